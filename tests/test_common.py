"""Properties every privpca estimator shares (parametrised over all of them)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from sklearn.base import clone

import privpca
from privpca import PrivacyLedger, PrivacyRecord
from privpca.decomposition._base import BasePrivatePCA

ESTIMATORS = sorted(
    (
        getattr(privpca, name)
        for name in privpca.__all__
        if isinstance(getattr(privpca, name), type)
        and issubclass(getattr(privpca, name), BasePrivatePCA)
    ),
    key=lambda cls: cls.__name__,
)


#: Parameters that let an estimator run on the small data below (its defaults need more data:
#: DP-PCA's histograms need thousands of records, shuffling amplification needs n ≫ log(1/δ)).
SMALL_DATA_PARAMS: dict[str, dict[str, object]] = {
    "DPPCA": {"n_subsets": 2, "min_subset_size": 1, "batch_size": 8},
    "PrivateOjaPCA": {"amplification": "none"},
}


def make(cls, **kwargs):
    return cls(**{**SMALL_DATA_PARAMS.get(cls.__name__, {}), **kwargs})


def test_every_public_estimator_is_covered():
    names = {cls.__name__ for cls in ESTIMATORS}
    assert {
        "LocalGaussianPCA",
        "LocalSparsePCA",
        "AnalyzeGaussPCA",
        "ModSuLQPCA",
        "NoisyPowerPCA",
        "BinghamPCA",
        "SparsePCA",
        "OjaPCA",
        "PrivateOjaPCA",
        "DPPCA",
        "DPSPCA",
    } <= names


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((5_000, 8)) * 0.2 + 3.0  # not centred; defaults need ~10³ rows
    X[:3] *= 20  # three rows far above norm 1
    return X


@pytest.mark.parametrize("cls", ESTIMATORS, ids=lambda c: c.__name__)
def test_fit_never_modifies_input_and_records_spend(cls, data):
    X = data.copy()
    X_f = np.asfortranarray(data)
    ledger = PrivacyLedger()
    est = make(cls, n_components=2, random_state=0, ledger=ledger)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est.fit(X)
        clone(est).fit(X_f)
    np.testing.assert_array_equal(X, data)
    np.testing.assert_array_equal(X_f, data)
    assert est.components_.shape == (2, 8)
    np.testing.assert_allclose(est.components_ @ est.components_.T, np.eye(2), atol=1e-8)
    assert isinstance(est.privacy_, PrivacyRecord)
    assert est.privacy_.model in {"local", "central", "distributed", "non-private"}
    assert len(ledger) == 2  # the clone charged the same ledger


@pytest.mark.parametrize("cls", ESTIMATORS, ids=lambda c: c.__name__)
def test_nan_is_refused(cls, data):
    X = data.copy()
    X[5, 2] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        make(cls, n_components=2, ledger=PrivacyLedger()).fit(X)
