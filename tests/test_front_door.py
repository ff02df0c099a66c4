"""privpca.PCA: the rule that picks the mechanism, delegation, scikit-learn's checks; a light
``import privpca``."""

from __future__ import annotations

import subprocess
import sys
import warnings

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.utils.estimator_checks import parametrize_with_checks

import privpca
from conftest import PAPER
from privpca import PCA, PrivacyLedger, RowClippingWarning
from privpca._registry import PRIVATE_ESTIMATORS, TRUST_MODELS
from privpca.pca import MAX_GRAM_FEATURES, select_mechanism


@pytest.fixture(scope="module")
def table():
    rng = np.random.default_rng(0)
    return rng.standard_normal((3_000, 6)) @ np.diag([3.0, 2.0, 1.0, 0.5, 0.5, 0.5]) + 4.0


@pytest.fixture(scope="module")
def unit_rows(table):
    X = table - table.mean(axis=0)
    return X / np.linalg.norm(X, axis=1).max()


# -------------------------------------------------------------------------- the rule
@pytest.mark.parametrize(("kwargs", "expected"), [
    ({"n_features": 20, "delta": 1e-5}, "analyze-gauss"),
    ({"n_features": MAX_GRAM_FEATURES, "delta": 1e-5}, "analyze-gauss"),
    ({"n_features": MAX_GRAM_FEATURES + 1, "delta": 1e-5}, "noisy-power"),
    ({"n_features": None, "delta": 1e-5}, "analyze-gauss"),
    ({"n_features": 20, "delta": 0.0}, "bingham"),
    ({"n_features": 10**5, "delta": 0.0}, "bingham"),
    ({"n_features": 20, "delta": 1e-5, "model": "local"}, "local-gaussian"),
    ({"n_features": 20, "delta": 1e-5, "model": "distributed"}, "dps-pca"),
    ({"n_features": 20, "delta": 1e-5, "mechanism": "mod-sulq"}, "mod-sulq"),
    ({"n_features": 20, "delta": 1e-5, "model": "local", "mechanism": "local-sparse"},
     "local-sparse"),
    ({"n_features": 20, "delta": 1e-5, "model": "distributed", "mechanism": "local-gaussian"},
     "local-gaussian"),
])
def test_the_rule(kwargs, expected):
    name, reason = select_mechanism(**kwargs)
    assert name == expected
    assert reason.endswith(".")


def test_a_mechanism_needing_more_trust_is_refused():
    with pytest.raises(ValueError, match="runs in the central model: it needs more trust"):
        select_mechanism(20, delta=1e-5, model="local", mechanism="analyze-gauss")
    with pytest.raises(ValueError, match="runs in the distributed model"):
        select_mechanism(20, delta=1e-5, model="local", mechanism="dps-pca")


def test_unknown_model_or_mechanism():
    with pytest.raises(ValueError, match="'model' parameter must be a str among"):
        select_mechanism(20, delta=1e-5, model="federated")
    with pytest.raises(ValueError, match="'mechanism' parameter of PCA must be a str among"):
        PCA(mechanism="gauss").fit(np.ones((5, 2)))


def test_pure_dp_outside_the_central_model_is_refused():
    with pytest.raises(ValueError, match=r"delta=0 .* no mechanism in the local model"):
        select_mechanism(20, delta=0.0, model="local")


def test_every_registered_mechanism_has_a_trust_model():
    assert set(TRUST_MODELS) == set(PRIVATE_ESTIMATORS)
    assert set(TRUST_MODELS.values()) == {"central", "distributed", "local"}


def test_the_choice_reads_the_shape_only(table):
    """Two tables of the same shape and different values get the same mechanism: the choice
    is a function of public quantities."""
    a = PCA()._chosen(table)
    b = PCA()._chosen(-1e6 * table[::-1])
    assert a[:2] == b[:2]
    assert type(a[2]) is type(b[2])


def test_a_wide_table_gets_the_noisy_power_method_without_a_gram_matrix():
    name, _, est = PCA()._chosen(np.empty((10, MAX_GRAM_FEATURES + 1)))
    assert name == "noisy-power" and est.solver == "data"
    _, _, forced = PCA(mechanism="noisy-power")._chosen(np.empty((10, 50)))
    assert forced.solver == "auto"  # asked for by name: its own default


@pytest.mark.parametrize("k", [0.9, None])
def test_a_share_of_variance_on_a_wide_table_is_refused_by_the_front_door(k):
    """Above MAX_GRAM_FEATURES the noisy power method is chosen, which releases no spectrum:
    a share (or None) is refused by PCA itself, naming the mechanism and why, before any
    charge (it read 'must be an int' from one estimator and 'or a float' from another)."""
    ledger = PrivacyLedger()
    with pytest.raises(ValueError, match=r"'noisy-power'.*whole number of components"):
        PCA(k, ledger=ledger)._chosen(np.empty((10, MAX_GRAM_FEATURES + 1)))
    assert len(ledger) == 0
    # The estimators that release no spectrum declare so: one refusal, the same class.
    from sklearn.utils._param_validation import InvalidParameterError
    for cls in (privpca.NoisyPowerPCA, privpca.BinghamPCA, privpca.LocalSparsePCA):
        with pytest.raises(InvalidParameterError, match="must be an int"):
            cls(0.9, ledger=ledger).fit(np.random.default_rng(0).normal(size=(500, 5)))


@pytest.mark.parametrize("k", [1.0, 0])
def test_a_value_out_of_range_gets_the_range_not_the_no_spectrum_reason(k):
    """PCA(1.0) and PCA(0) on a table Analyze Gauss fits (which takes a share: PCA(0.5)
    works) were told the mechanism "releases no spectrum" (an outside tester)."""
    from sklearn.utils._param_validation import InvalidParameterError

    with pytest.raises(InvalidParameterError, match=r"float in the range \(0.0, 1.0\)"):
        PCA(k, random_state=0, ledger=PrivacyLedger()).fit(
            np.random.default_rng(0).normal(size=(2000, 5)))


def test_pure_dp_needs_a_public_centre_and_bound(unit_rows):
    with pytest.raises(ValueError, match="needs a public centre, norm bound and scales"):
        PCA(delta=0.0).fit(unit_rows)
    with pytest.raises(ValueError, match="scale, variance would be Gaussian"):
        PCA(delta=0.0, options={**PAPER, "scale": True}).fit(unit_rows)
    with pytest.raises(ValueError, match="variance would be Gaussian"):  # public scales too
        PCA(delta=0.0, options={**PAPER, "scale": np.ones(unit_rows.shape[1])}).fit(unit_rows)
    est = PCA(delta=0.0, options=PAPER, random_state=0, ledger=PrivacyLedger()).fit(unit_rows)
    assert est.mechanism_ == "bingham"
    assert est.privacy_.delta == 0.0 and est.privacy_.epsilon == 1.0


def test_options_may_not_repeat_its_own_parameters(table):
    with pytest.raises(ValueError, match=r"options may not set \['epsilon'\]"):
        PCA(options={"epsilon": 2.0}).fit(table)


# -------------------------------------------------------------------------- delegation
def test_same_bits_and_record_as_the_chosen_estimator(table):
    ledger = PrivacyLedger()
    est = PCA(2, epsilon=1.0, random_state=0, ledger=ledger).fit(table)
    ref = privpca.AnalyzeGaussPCA(2, epsilon=1.0, random_state=0,
                                  ledger=PrivacyLedger()).fit(table)
    assert type(est.estimator_) is privpca.AnalyzeGaussPCA and est.mechanism_ == "analyze-gauss"
    assert "Analyze Gauss" in est.selection_reason_
    for name in ("components_", "mean_", "explained_variance_", "explained_variance_ratio_"):
        np.testing.assert_array_equal(getattr(est, name), getattr(ref, name))
    assert est.expected_error_ == ref.expected_error_ and est.n_components_ == 2
    assert est.privacy_ == ref.privacy_
    # The ledger holds the chosen estimator's record, the very object privacy_ is.
    [(label, record)] = ledger.records
    assert label == "AnalyzeGaussPCA" and record is est.privacy_ is est.estimator_.privacy_
    np.testing.assert_array_equal(est.transform(table), ref.transform(table))
    np.testing.assert_array_equal(est.inverse_transform(est.transform(table[:5])),
                                  ref.inverse_transform(ref.transform(table[:5])))


@pytest.mark.parametrize(("model", "cls", "options"), [
    ("local", "LocalGaussianPCA", PAPER),
    ("distributed", "DPSPCA", {**PAPER, "n_providers": 2, "n_iter": 3}),
])
def test_other_trust_models(unit_rows, model, cls, options):
    est = PCA(2, epsilon=2.0, model=model, options=options, random_state=0,
              ledger=PrivacyLedger()).fit(unit_rows)
    assert type(est.estimator_).__name__ == cls
    assert est.privacy_.model == model
    assert est.transform(unit_rows).shape == (len(unit_rows), 2)


def test_fit_params_reach_the_chosen_estimator(unit_rows):
    groups = np.arange(len(unit_rows)) % 3
    est = PCA(2, model="distributed", options={**PAPER, "n_iter": 2}, random_state=0,
              ledger=PrivacyLedger()).fit(unit_rows, groups=groups)
    assert est.estimator_.n_providers_ == 3


def test_input_unchanged_nan_refused_clone_shares_the_ledger(table):
    X = table.copy()
    ledger = PrivacyLedger()
    est = PCA(random_state=0, ledger=ledger).fit(X)
    clone(est).fit(X)
    np.testing.assert_array_equal(X, table)
    assert len(ledger) == 2
    X[4, 1] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        PCA(ledger=PrivacyLedger()).fit(X)


def test_a_refit_on_an_array_forgets_the_column_names(table):
    pd = pytest.importorskip("pandas")
    est = PCA(random_state=0, ledger=PrivacyLedger())
    est.fit(pd.DataFrame(table, columns=[f"c{i}" for i in range(6)]))
    assert list(est.feature_names_in_) == [f"c{i}" for i in range(6)]
    est.fit(table)
    assert not hasattr(est, "feature_names_in_")


def test_a_feature_name_mismatch_names_pca_not_the_chosen_estimator(table):
    pd = pytest.importorskip("pandas")
    frame = pd.DataFrame(table, columns=[f"c{i}" for i in range(6)])
    est = PCA(random_state=0, ledger=PrivacyLedger()).fit(frame)
    for call in (est.transform, est.score_samples):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            call(table)
        names = [str(w.message) for w in caught if "feature names" in str(w.message)]
        assert names == ["X does not have valid feature names, but PCA was fitted with "
                         "feature names"]
    with pytest.raises(ValueError, match="PCA is expecting 6 features"):
        est.transform(table[:, :5])


#: The checks that fit one row or one feature: at ε = 10⁴ the private quantile searches
#: resolve a handful of rows, so none is expected to fail.
TINY_DATA_CHECKS: dict[str, str] = {}


def _expected_failures(est):
    return {} if (est.options or {}).get("centering", "private") is None else TINY_DATA_CHECKS


# The checks fit tens of rows: the defaults' private bounds need more (as for every estimator,
# tests/conftest.py), so the defaults run at a large ε and the papers' setting as is.
@parametrize_with_checks(
    [PCA(epsilon=1e4), PCA(options=PAPER), PCA(model="local", options=PAPER),
     PCA(model="distributed", options={**PAPER, "n_iter": 2}),
     PCA(delta=0.0, options={**PAPER, "n_iter": 10, "burn_in": 0})],
    expected_failed_checks=_expected_failures,
)
def test_sklearn_compatible(estimator, check):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RowClippingWarning)
        check(estimator)


# -------------------------------------------------------------------------- the package
def test_import_privpca_loads_no_heavy_dependency():
    code = ("import sys, privpca; "
            "print(sorted(m for m in ('dp_accounting', 'sklearn', 'scipy', 'numba', "
            "'privpca.decomposition') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert out.strip() == "[]"


def test_public_names_load_on_first_use():
    assert set(privpca.__all__) <= set(dir(privpca))
    for name in privpca.__all__:
        assert getattr(privpca, name) is not None
    from privpca import PCA as again
    from privpca import PrivacyLedger as ledger_class

    assert again is PCA and ledger_class is PrivacyLedger
    assert privpca.datasets.make_spiked is not None  # a subpackage, reached as an attribute
    with pytest.raises(AttributeError, match="has no attribute 'Nope'"):
        privpca.Nope  # noqa: B018


def test_a_streamed_table_is_chosen_for_by_its_shape(table, tmp_path):
    path = tmp_path / "table.npy"
    np.save(path, table)
    est = PCA(random_state=0, ledger=PrivacyLedger()).fit(str(path))
    ref = PCA(random_state=0, ledger=PrivacyLedger()).fit(table)
    assert est.mechanism_ == "analyze-gauss" and est.n_features_in_ == 6
    np.testing.assert_allclose(est.components_, ref.components_, atol=1e-8)


@pytest.mark.parametrize("delta", [0.5, -1.0])
def test_a_refused_delta_names_the_front_door_and_spends_nothing(delta):
    ledger = PrivacyLedger()
    X = np.random.default_rng(0).normal(size=(2_000, 3))
    with pytest.raises(ValueError, match="The 'delta' parameter of PCA"):
        PCA(2, epsilon=1.0, delta=delta, ledger=ledger).fit(X)
    assert len(ledger) == 0


def test_an_option_the_chosen_mechanism_does_not_take_is_named_with_the_mechanism():
    """``options={"lam_scale": 1}`` on a table where the local model chose the Gaussian
    protocol raised a bare TypeError from the constructor (an outside tester): the refusal
    names the mechanism, its parameters, and how to choose another; nothing is charged."""
    X = np.random.default_rng(3).standard_normal((5000, 5))
    ledger = privpca.PrivacyLedger()
    with pytest.raises(ValueError, match=r"options \['lam_scale'\] are not parameters of .*"
                                         r"'local-gaussian'.*mechanism="):
        privpca.PCA(2, model="local", options={"lam_scale": 1}, ledger=ledger).fit(X)
    assert len(ledger) == 0
