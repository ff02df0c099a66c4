"""A private estimator fed by a fitted, non-private scaler says so (to the data holder).

``make_pipeline(StandardScaler(), privpca.PCA())`` runs, and ``privacy_`` still states the
fit's (ε, δ), but the scaler's exact means and standard deviations are a release outside it.
The fit warns (:class:`~privpca.exceptions.NonPrivatePreprocessingWarning`, a
:class:`~privpca.exceptions.DataDependentWarning`: for the data holder only) and points to
``scale=True``.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

import privpca
from privpca.exceptions import (
    DataDependentWarning,
    NonPrivatePreprocessingWarning,
    PrivacyWarning,
)


@pytest.fixture(scope="module")
def raw() -> np.ndarray:
    rng = np.random.default_rng(0)
    Z = rng.standard_normal((5_000, 3)) @ np.array([[2.0, 0.5, 0.0], [0.0, 1.0, 0.3],
                                                     [0.0, 0.0, 0.2]])
    return Z * np.array([1e3, 2.0, 0.01]) + np.array([5e4, -3.0, 7.0])


def _caught(fit) -> list[warnings.WarningMessage]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fit()
    return [w for w in caught if issubclass(w.category, NonPrivatePreprocessingWarning)]


def test_the_warning_is_a_privacy_and_a_data_dependent_warning():
    assert issubclass(NonPrivatePreprocessingWarning, PrivacyWarning)
    assert issubclass(NonPrivatePreprocessingWarning, DataDependentWarning)
    assert privpca.NonPrivatePreprocessingWarning is NonPrivatePreprocessingWarning
    assert "NonPrivatePreprocessingWarning" in privpca.__all__


def test_a_standard_scaler_before_a_private_pca_warns(raw):
    pipe = make_pipeline(StandardScaler(), privpca.PCA(n_components=2, random_state=0,
                                                       ledger=privpca.PrivacyLedger()))
    found = _caught(lambda: pipe.fit(raw))
    assert len(found) == 1
    message = str(found[0].message)
    assert "standardised" in message and "not private" in message
    assert "privacy_" in message and "scale=True" in message


def test_ddof_one_standardisation_warns_too(raw):
    Z = (raw - raw.mean(axis=0)) / raw.std(axis=0, ddof=1)
    est = privpca.AnalyzeGaussPCA(2, random_state=0, ledger=privpca.PrivacyLedger())
    assert len(_caught(lambda: est.fit(Z))) == 1


@pytest.mark.parametrize("name", ["DPPCA", "PrivateOjaPCA", "DPSPCA"])
def test_the_streaming_and_distributed_families_warn_too(raw, name):
    Z = (raw - raw.mean(axis=0)) / raw.std(axis=0)
    est = getattr(privpca, name)(1, random_state=0, ledger=privpca.PrivacyLedger())
    assert len(_caught(lambda: est.fit(Z))) == 1
    assert _caught(lambda: getattr(privpca, name)(1, random_state=0,
                                                  ledger=privpca.PrivacyLedger()).fit(raw)) == []


def test_a_fit_on_raw_data_does_not_warn(raw):
    for X in (raw, raw - raw.mean(axis=0), raw / raw.std(axis=0)):  # centred or scaled only
        est = privpca.PCA(n_components=2, random_state=0, ledger=privpca.PrivacyLedger())
        assert _caught(lambda est=est, X=X: est.fit(X)) == []
    # The private scales (the recipe the warning points to) do not warn either.
    est = privpca.PCA(n_components=2, options={"scale": True}, random_state=0,
                      ledger=privpca.PrivacyLedger())
    assert _caught(lambda: est.fit(raw)) == []
    assert est.scale_ is not None


def test_the_cli_prints_it_only_with_show_data_warnings(raw, tmp_path):
    from click.testing import CliRunner

    from privpca.cli import main

    path = tmp_path / "standardised.npy"
    np.save(path, StandardScaler().fit_transform(raw))
    args = ["fit", "-k", "2", "--epsilon", "1", "--seed", "0", str(path)]
    quiet = CliRunner().invoke(main, args)
    assert quiet.exit_code == 0, quiet.output
    assert "NonPrivatePreprocessingWarning" not in quiet.stderr
    assert "standardised" not in quiet.stderr
    shown = CliRunner().invoke(main, [*args, "--show-data-warnings"])
    assert shown.exit_code == 0, shown.output
    assert "NonPrivatePreprocessingWarning" in shown.stderr
