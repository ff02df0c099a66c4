"""partial_fit: Analyze Gauss (and privpca.PCA on it) fitted in batches, each row read by one
call (parallel composition: one (ε, δ) charge for the whole stream)."""

from __future__ import annotations

import copy
import math
import pickle
import warnings

import numpy as np
import pytest
from sklearn.decomposition import PCA as SkPCA
from sklearn.utils._param_validation import InvalidParameterError
from sklearn.utils.estimator_checks import (
    check_dataframe_column_names_consistency,
    check_estimators_partial_fit_n_features,
)

import privpca
from privpca import AnalyzeGaussPCA, PrivacyLedger, RowClippingWarning
from privpca.accounting.calibration import analytic_multiplier
from privpca.datasets import make_spiked
from privpca.metrics import subspace_distance
from privpca.persistence import without_ledger
from privpca.pipeline.budget import DEFAULT_SHARES

LARGE_EPSILON = 1e6


def _table(n: int = 4000) -> np.ndarray:
    rng = np.random.default_rng(0)
    return rng.standard_normal((n, 6)) @ np.diag([3.0, 2.0, 1.0, 0.5, 0.4, 0.3]) + np.array(
        [1.0, -2.0, 3.0, 0.0, 5.0, 1.0])


def _in_batches(est, X: np.ndarray, batches: int):
    for batch in np.array_split(X, batches):
        est.partial_fit(batch)
    return est


def _make(front_door: bool, ledger: PrivacyLedger | None = None, **params):
    """AnalyzeGaussPCA, or privpca.PCA with the same options."""
    common = {"random_state": params.pop("random_state", 0),
              "ledger": PrivacyLedger() if ledger is None else ledger}
    k = params.pop("n_components", 2)
    eps = params.pop("epsilon", 1.0)
    if front_door:
        return privpca.PCA(k, epsilon=eps, options=params, **common)
    return AnalyzeGaussPCA(k, epsilon=eps, **params, **common)


# ------------------------------------------------------------- (1) scikit-learn's answer
@pytest.mark.parametrize("front_door", [False, True], ids=["AnalyzeGaussPCA", "privpca.PCA"])
def test_four_batches_at_a_large_epsilon_give_scikit_learns_pca(front_door):
    X = _table()
    D = 2.0 * float(np.linalg.norm(X, axis=1).max())  # raw rows: clipped around the origin
    est = _in_batches(_make(front_door, epsilon=LARGE_EPSILON, data_norm=D), X, 4)
    sk = SkPCA(2).fit(X)
    # Within the fit's own 95 % bound (from released values), itself small at this ε.
    assert subspace_distance(est.components_.T, sk.components_.T) <= est.expected_error_ < 0.01
    sum_sd = est.privacy_.spends[0].noise_scale * 2.0  # the summed noise of 4 batches
    np.testing.assert_allclose(est.mean_, sk.mean_, atol=5.0 * sum_sd / X.shape[0])
    np.testing.assert_allclose(est.explained_variance_, sk.explained_variance_, rtol=1e-3)
    assert est.n_samples_seen_ == X.shape[0] == est.privacy_.n_samples
    assert est.n_features_in_ == 6
    if front_door:
        assert est.mechanism_ == "analyze-gauss"
        assert est.estimator_.n_samples_seen_ == X.shape[0]


def test_a_public_centre_and_no_centre():
    X = _table()
    centre = np.array([1.0, -2.0, 3.0, 0.0, 5.0, 1.0])
    D = 2.0 * float(np.linalg.norm(X - centre, axis=1).max())
    est = _in_batches(AnalyzeGaussPCA(2, epsilon=LARGE_EPSILON, centering=centre, data_norm=D,
                                      random_state=0, ledger=PrivacyLedger()), X, 3)
    np.testing.assert_array_equal(est.mean_, centre)
    sk = SkPCA(2).fit(X)  # centred on the table's own mean, not on the public centre
    assert subspace_distance(est.components_.T, sk.components_.T) < 1e-2
    raw = _in_batches(AnalyzeGaussPCA(2, epsilon=LARGE_EPSILON, centering=None,
                                      data_norm=2.0 * float(np.linalg.norm(X, axis=1).max()),
                                      random_state=0, ledger=PrivacyLedger()), X, 3)
    second_moment = np.linalg.eigh(X.T @ X)[1][:, ::-1][:, :2]
    assert subspace_distance(raw.components_.T, second_moment) <= raw.expected_error_ < 1e-3
    np.testing.assert_array_equal(raw.mean_, np.zeros(6))


# ------------------------------------------------------------- (2) calibration
def test_each_call_is_calibrated_by_the_closed_form():
    eps, delta, D = 0.7, 1e-6, 1.5
    est = AnalyzeGaussPCA(2, epsilon=eps, delta=delta, data_norm=D, random_state=0,
                          ledger=PrivacyLedger())
    _in_batches(est, make_spiked(3000, 8, 2, random_state=1)[0], 3)
    m = analytic_multiplier(eps, delta)
    share = DEFAULT_SHARES["centre"]
    centre, statistic = est.privacy_.spends
    assert statistic.sensitivity == pytest.approx(math.sqrt(2.0) * D**2, rel=1e-12)
    assert statistic.noise_scale == pytest.approx(m / math.sqrt(1 - share) * math.sqrt(2.0)
                                                  * D**2, rel=1e-9)
    assert centre.sensitivity == pytest.approx(2.0 * D, rel=1e-12)
    assert centre.noise_scale == pytest.approx(m / math.sqrt(share) * 2.0 * D, rel=1e-9)
    # The two compose to exactly one Gaussian of multiplier m: (ε, δ) per call.
    inv = sum((s.sensitivity / s.noise_scale) ** 2 for s in est.privacy_.spends)
    assert inv == pytest.approx(1.0 / m**2, rel=1e-9)
    assert est.privacy_.noise_scale == statistic.noise_scale
    assert est.noise_scale_ == pytest.approx(statistic.noise_scale * math.sqrt(3), rel=1e-12)


def test_the_released_noise_has_the_stated_variance(released_matrices):
    """Zero rows: the running Gram is the summed noise alone, std σ√T per upper-triangle entry
    (σ = m·√2·D², uncentred), read off the last matrix released."""
    eps, delta, D, p, T = 1.0, 1e-5, 1.0, 60, 4
    est = AnalyzeGaussPCA(p, epsilon=eps, delta=delta, centering=None, data_norm=D,
                          random_state=3, ledger=PrivacyLedger())
    _in_batches(est, np.zeros((4 * 50, p)), T)
    sigma = analytic_multiplier(eps, delta) * math.sqrt(2.0) * D**2
    assert est.privacy_.noise_scale == pytest.approx(sigma, rel=1e-12)
    N = released_matrices[-1]
    measured = float(np.std(N[np.triu_indices(p)]))
    assert measured == pytest.approx(sigma * math.sqrt(T), rel=0.08)


# ------------------------------------------------------------- (3) one charge
def test_the_ledger_pays_one_call_for_the_whole_stream():
    eps, delta = 1.0, 1e-5
    ledger = PrivacyLedger(epsilon_budget=eps, delta_budget=delta)  # a second charge: refused
    est = AnalyzeGaussPCA(2, epsilon=eps, delta=delta, data_norm=1.0, ledger=ledger)  # secure
    _in_batches(est, make_spiked(5000, 10, 2, random_state=0)[0], 5)
    assert len(ledger) == 1
    assert ledger.records[0][1] is est.privacy_
    assert ledger.epsilon(delta) == pytest.approx(eps, rel=1e-6)
    record = est.privacy_
    assert (record.epsilon, record.delta) == (eps, delta)
    assert "5 batches (5000 rows)" in record.notes and "parallel composition" in record.notes
    assert "assumed disjoint" in record.notes
    assert record.noise_mode == "secure"
    assert [s.mechanism.split(":")[0] for s in record.spends] == ["centre", "statistic"]


def test_partial_fit_never_silently_replaces_a_fit_it_cannot_continue(tmp_path):
    """A stream restored by load, copy or pickle keeps no exact running sums: partial_fit
    refuses to continue it rather than start a new stream over it (a loaded 20 000-row stream
    became a 10 000-row one without a word: an outside tester). After fit it starts a new
    stream (scikit-learn's checks call one after the other); so does a clone."""
    from sklearn.base import clone

    import privpca

    X = make_spiked(4000, 6, 2, random_state=0)[0]
    ledger = PrivacyLedger()
    est = AnalyzeGaussPCA(2, data_norm=1.0, random_state=0, ledger=ledger)
    _in_batches(est, X, 2)
    est.fit(X)
    assert not hasattr(est, "n_samples_seen_") and len(ledger) == 2
    est.partial_fit(X[:1000])  # after fit: a new stream, a new charge
    assert est.n_samples_seen_ == 1000 and len(ledger) == 3
    fresh = clone(est).partial_fit(X[:1000])  # a new stream, a new charge
    assert fresh.n_samples_seen_ == 1000 and len(ledger) == 4
    assert "1 batch (1000 rows)" in fresh.privacy_.notes
    privpca.save(fresh, tmp_path / "stream.npz")
    for twin in (copy.deepcopy(fresh), privpca.load(tmp_path / "stream.npz")):
        with pytest.raises(ValueError, match="cannot continue this stream"):
            twin.partial_fit(X[1000:2000])  # nor a stream over it, nor its noise twice
    assert len(ledger) == 4
    pickle.loads(pickle.dumps(without_ledger(fresh)))  # the generator is not pickled
    fresh.set_params(n_components=1).partial_fit(X[2000:])  # post-processing may change
    assert fresh.components_.shape == (1, 6) and fresh.n_samples_seen_ == 3000


# ------------------------------------------------------------- (4) refusals before a charge
@pytest.mark.parametrize("front_door", [False, True], ids=["AnalyzeGaussPCA", "privpca.PCA"])
@pytest.mark.parametrize("params, match", [
    ({}, "data_norm='auto' is chosen privately"),
    ({"data_norm": "quantile"}, "What works: a public numeric data_norm"),
    ({"data_norm": 1.0, "scale": True}, "scale=True releases private scales"),
])
def test_parameters_without_a_stream_say_what_works(front_door, params, match):
    ledger = PrivacyLedger()
    est = _make(front_door, ledger, **params)
    assert not hasattr(est, "partial_fit")
    with pytest.raises(AttributeError, match=match):
        est.partial_fit(np.zeros((10, 3)))
    assert len(ledger) == 0


@pytest.mark.parametrize("front_door", [False, True], ids=["AnalyzeGaussPCA", "privpca.PCA"])
@pytest.mark.parametrize("epsilon", [0.0, -1.0])
def test_a_non_positive_epsilon_is_refused_before_a_charge(front_door, epsilon):
    ledger = PrivacyLedger()
    with pytest.raises(InvalidParameterError, match="'epsilon' parameter"):
        _make(front_door, ledger, epsilon=epsilon, data_norm=1.0).partial_fit(np.ones((10, 3)))
    assert len(ledger) == 0


def test_refusals_come_before_any_release():
    ledger = PrivacyLedger()
    X = make_spiked(2000, 5, 2, random_state=0)[0]
    bad = X[:100].copy()
    bad[3, 1] = np.nan
    est = AnalyzeGaussPCA(2, data_norm=1.0, random_state=0, ledger=ledger)
    with pytest.raises(ValueError, match="NaN or infinity"):
        est.partial_fit(bad)
    assert len(ledger) == 0 and not hasattr(est, "components_")
    with pytest.raises(ValueError, match="add-remove"):  # as for fit: a private mean counts n
        AnalyzeGaussPCA(2, data_norm=1.0, neighbouring="add-remove",
                        ledger=ledger).partial_fit(X)
    assert len(ledger) == 0
    est.partial_fit(X[:1000])
    record, components = est.privacy_, est.components_.copy()
    refusals = [
        (bad, "NaN or infinity"),
        (X[:100, :4], "X has 4 features, but AnalyzeGaussPCA is expecting 5 features"),
    ]
    for batch, match in refusals:
        with pytest.raises(ValueError, match=match):
            est.partial_fit(batch)
    with pytest.raises(ValueError, match="changed since the stream's first batch"):
        est.set_params(epsilon=2.0).partial_fit(X[1000:])
    assert est.privacy_ is record and ledger.records[0][1] is record and len(ledger) == 1
    np.testing.assert_array_equal(est.components_, components)
    assert est.n_samples_seen_ == 1000


def test_the_front_door_refuses_a_wide_table_and_a_changed_stream():
    ledger = PrivacyLedger()
    front = privpca.PCA(1, options={"data_norm": 1.0}, random_state=0, ledger=ledger)
    with pytest.raises(ValueError, match="Only Analyze Gauss fits in batches"):
        front.partial_fit(np.zeros((3, 4097)))
    assert len(ledger) == 0
    assert not hasattr(privpca.PCA(model="local", options={"data_norm": 1.0}), "partial_fit")
    X = make_spiked(2000, 5, 2, random_state=0)[0]
    front.partial_fit(X[:1000])
    with pytest.raises(ValueError, match="changed since the stream's first batch"):
        front.set_params(delta=1e-6).partial_fit(X[1000:])
    front.set_params(delta=1e-5, n_components=2).partial_fit(X[1000:])
    assert front.components_.shape == (2, 5) and front.n_samples_seen_ == 2000
    assert len(ledger) == 1


@pytest.mark.parametrize("estimator", [AnalyzeGaussPCA(centering=None, data_norm=1.0),
                                       privpca.PCA(options={"centering": None, "data_norm": 1.0})],
                         ids=["AnalyzeGaussPCA", "privpca.PCA"])
@pytest.mark.parametrize("check", [check_estimators_partial_fit_n_features,
                                   check_dataframe_column_names_consistency])
def test_scikit_learns_partial_fit_checks(estimator, check):
    """The checks scikit-learn runs on an estimator with ``partial_fit`` (the transformer
    suite of ``parametrize_with_checks`` leaves the first out)."""
    pytest.importorskip("pandas")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RowClippingWarning)
        check(type(estimator).__name__, estimator)


# ------------------------------------------------------------- (5) clipping
def test_rows_above_the_bound_are_clipped_with_the_librarys_warning():
    X = make_spiked(1000, 5, 2, random_state=0)[0]  # norms below 0.5
    est = AnalyzeGaussPCA(2, data_norm=1.0, random_state=0, ledger=PrivacyLedger())
    with warnings.catch_warnings():
        warnings.simplefilter("error", RowClippingWarning)
        est.partial_fit(X[:500])
    with pytest.warns(RowClippingWarning, match="data_norm=1"):
        est.partial_fit(X[500:] * 10.0)


# ------------------------------------------------------------- (6) the cost of batches
def test_ten_batches_cost_accuracy_but_stay_far_from_chance():
    """n = 20 000, p = 20, k = 2, ε = 1, data_norm = 1 (benchmarks/bench_partial_fit.py: mean
    distance 0.25 in one batch, 0.81 in ten over 5 seeds; chance ≈ 1.9 for k = 2, p = 20)."""
    errors: dict[int, list[float]] = {1: [], 10: []}
    for seed in range(3):
        X, _ = make_spiked(20_000, 20, 2, lam=9.0, random_state=seed)
        sk = SkPCA(2).fit(X)
        for batches in errors:
            est = AnalyzeGaussPCA(2, data_norm=1.0, random_state=seed, ledger=PrivacyLedger())
            _in_batches(est, X, batches)
            errors[batches].append(subspace_distance(est.components_.T, sk.components_.T))
    one, ten = np.mean(errors[1]), np.mean(errors[10])
    assert ten > 1.5 * one, errors
    assert max(errors[10]) < 1.3, errors
