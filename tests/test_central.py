"""Central model: OjaPCA, PrivateOjaPCA and DPPCA (Liu, Kong, Jain & Oh)."""

from __future__ import annotations

import math
import warnings

import dp_accounting
import numpy as np
import pytest
from sklearn.utils.estimator_checks import parametrize_with_checks

from privpca import (
    DPPCA,
    BudgetExceededError,
    NonFiniteInputError,
    OjaPCA,
    PrivacyLedger,
    PrivateOjaPCA,
    RowClippingWarning,
    ShufflingBoundError,
)
from privpca.datasets import make_signal_noise, make_spiked
from privpca.decomposition._records import pair_differences, table_records
from privpca.mechanisms.shuffling import closed_form_shuffled_epsilon, local_epsilon_for_shuffling
from privpca.metrics import sin_theta

SMALL_DPPCA = {"n_subsets": 2, "min_subset_size": 1, "batch_size": 8}
#: The papers' setting (uncentred second moment, public clipping bound): bitwise as before.
PAPER = {"centering": None}
PAPER_OJA = {"centering": None, "clip_norm": 1.0}
HELD_OUT_PARTS = ["bound_raw", "mean", "bound_residual", "mean_refine", "bound", "variance"]


# sklearn's checks fit tiny arrays, far too small for private norm quantiles on a held-out
# share: the private estimators are checked in the papers' setting (OjaPCA on its defaults).
@parametrize_with_checks(
    [OjaPCA(), PrivateOjaPCA(amplification="none", **PAPER_OJA),  # type: ignore[arg-type]
     DPPCA(**SMALL_DPPCA, **PAPER)]
)
def test_sklearn_compatible(estimator, check):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RowClippingWarning)
        check(estimator)


def gaussian(n, d, rng, top=1.0, rest=0.5):
    lam = np.array([top] + [rest] * (d - 1))
    return rng.standard_normal((n, d)) * np.sqrt(lam), np.eye(d)[:, :1]


# ---------------------------------------------------------------- Oja (non-private)
def test_oja_reaches_the_non_private_rate():
    """Theorem 2.2: sin² ≍ d/n, i.e. a slope of −1/2 for sin against n."""
    errors = {}
    for n in (5_000, 80_000):
        runs = []
        for seed in range(4):
            X, v = gaussian(n, 10, np.random.default_rng(seed))
            est = OjaPCA(learning_rate=(4.0, 10.0), random_state=seed, **PAPER).fit(X)
            runs.append(sin_theta(est.components_.T, v))
        errors[n] = np.mean(runs)
    slope = math.log(errors[80_000] / errors[5_000]) / math.log(16)
    assert -0.75 < slope < -0.35, (errors, slope)
    assert errors[80_000] < 0.06


def test_block_oja_finds_a_rank_k_subspace_and_matrix_path_agrees():
    rng = np.random.default_rng(1)
    X = rng.standard_normal((20_000, 8)) * np.sqrt([2.0, 1.5] + [0.25] * 6)
    V = np.eye(8)[:, :2]
    est = OjaPCA(n_components=2, random_state=0, **PAPER).fit(X)
    assert sin_theta(est.components_.T, V) < 0.1
    A = np.einsum("ni,nj->nij", X[:2000], X[:2000])
    a = OjaPCA(n_components=2, random_state=3, **PAPER).fit(X[:2000])
    b = OjaPCA(n_components=2, random_state=3).fit_matrices(A)
    np.testing.assert_allclose(a.components_, b.components_, atol=1e-8)


def test_oja_is_non_private_and_a_budget_refuses_it():
    X, _ = make_spiked(1000, 5, 1, random_state=0)
    with pytest.raises(BudgetExceededError):
        OjaPCA(ledger=PrivacyLedger(epsilon_budget=10.0, delta_budget=1e-5)).fit(X)


@pytest.mark.parametrize(
    ("param", "value"),
    [("learning_rate", -1.0), ("learning_rate", (1.0,)), ("learning_rate", "fast"),
     ("batch_size", 0), ("centering", "mean"), ("centering", np.zeros(3))],
)
def test_oja_parameter_errors(param, value):
    X, _ = make_spiked(200, 4, 1, random_state=0)
    with pytest.raises(ValueError, match=param):
        OjaPCA(**{param: value}).fit(X)


def test_matrices_must_be_symmetric_and_finite(rng):
    A = rng.standard_normal((5, 3, 3))
    with pytest.raises(ValueError, match="symmetric"):
        OjaPCA().fit_matrices(A)
    A = A + A.transpose(0, 2, 1)
    A[1, 0, 0] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        OjaPCA().fit_matrices(A)


# ---------------------------------------------------------------- Private Oja
def test_private_oja_shuffled_calibration():
    n, eps, delta = 50_000, 0.5, 1e-8
    X, _ = make_spiked(n, 5, 1, lam=9.0, random_state=0)
    est = PrivateOjaPCA(epsilon=eps, delta=delta, random_state=0, **PAPER_OJA).fit(X)
    g = local_epsilon_for_shuffling(eps, delta, n)
    assert est.local_epsilon_ == pytest.approx(g.epsilon0)
    assert est.noise_multiplier_ == pytest.approx(
        float(dp_accounting.get_sigma_gaussian(g.epsilon0, g.delta0))
    )
    assert est.privacy_.epsilon <= eps
    assert est.privacy_.epsilon == pytest.approx(eps, rel=1e-6)
    # Without shuffling the same ε needs the single-step multiplier, which is larger here.
    plain = PrivateOjaPCA(epsilon=eps, delta=delta, amplification="none", random_state=0,
                          **PAPER_OJA).fit(X)
    assert plain.noise_multiplier_ == pytest.approx(
        float(dp_accounting.get_sigma_gaussian(eps, delta))
    )
    assert plain.noise_multiplier_ > est.noise_multiplier_


def test_private_oja_fits_where_only_the_numerical_shuffling_bound_applies():
    # ε = 4 at n = 2 000: the closed form's condition fails, FMT's numerical bound certifies.
    X, _ = make_spiked(2_000, 5, 1, random_state=0)
    with pytest.raises(ShufflingBoundError, match="closed-form shuffling bound needs"):
        closed_form_shuffled_epsilon(4.0, 2_000, 1e-6)
    est = PrivateOjaPCA(epsilon=4.0, random_state=0, **PAPER_OJA).fit(X)
    assert est.privacy_.epsilon <= 4.0
    assert "numerical" in est.privacy_.calibration


def test_private_oja_warns_when_clipping(rng):
    X = rng.standard_normal((3_000, 5)) * 3
    with pytest.warns(RowClippingWarning, match="gradient blocks"):
        est = PrivateOjaPCA(amplification="none", random_state=0, **PAPER_OJA).fit(X)
    assert not hasattr(est, "n_clipped_")  # an exact count of the data: not released
    assert "n_clipped" not in est.privacy_.to_dict()
    # The papers' setting releases nothing beyond W; the pipeline's attributes say so.
    np.testing.assert_array_equal(est.mean_, np.zeros(5))
    assert np.isnan(est.explained_variance_).all() and est.expected_error_ is None
    assert est.noise_level_ == pytest.approx(2 * 1.0 * est.noise_multiplier_ / math.sqrt(3_000))
    assert est.data_norm_ == 1.0 and est.clip_norm_ == 1.0


# ---------------------------------------------------------------- DP-PCA
def test_dppca_records_a_parallel_guarantee_and_the_ledger_agrees(rng):
    X, _ = gaussian(60_000, 5, rng)
    ledger = PrivacyLedger()
    est = DPPCA(epsilon=1.0, delta=1e-6, random_state=0, ledger=ledger, **PAPER).fit(X)
    assert (est.privacy_.epsilon, est.privacy_.delta) == (1.0, 1e-6)
    assert est.n_iter_ == 60_000 // est.batch_size_
    assert ledger.epsilon(1e-6) == 1.0
    DPPCA(epsilon=1.0, delta=1e-6, random_state=1, ledger=ledger, **PAPER).fit(X)
    # Conservative composition of two fits (each as if a record entered both of its calls);
    # the histograms' tails cost (1 + e^ε)·tail of δ, so ask at a δ with room for them.
    two = ledger.epsilon(1e-4)
    assert 1.0 < two < 4.0
    paper = DPPCA(epsilon=1.0, delta=1e-6, budget_split="paper", random_state=0,
                  **PAPER).fit(X)
    assert paper.privacy_.epsilon == 0.5 and paper.privacy_.target_epsilon == 1.0
    assert paper.n_subsets_ > est.n_subsets_  # half the budget: a higher threshold


def test_dppca_refuses_too_little_data_clearly(rng):
    X, _ = gaussian(500, 5, rng)
    ledger = PrivacyLedger()
    with pytest.raises(ValueError, match="at least one minibatch"):
        DPPCA(delta=1e-8, ledger=ledger, **PAPER).fit(X)
    with pytest.raises(ValueError, match="too small"):
        DPPCA(batch_size=10, ledger=ledger, **PAPER).fit(X)
    # On a table the held-out records' private quantiles need enough rows (public n, ε, δ);
    # refused before any charge, like the papers' setting.
    X, _ = gaussian(2_500, 5, rng)
    with pytest.raises(ValueError, match=r"holds out 250 records .* need at least"):
        DPPCA(delta=1e-8, ledger=ledger, holdout_fraction=0.1).fit(X)
    # "auto" holds out what the quantiles need (417 rows here); the stream is then too short.
    with pytest.raises(ValueError, match=r"minibatch .* got m \(records\)=2083"):
        DPPCA(delta=1e-8, ledger=ledger).fit(X)
    X, _ = gaussian(5_000, 5, rng)
    with pytest.raises(ValueError, match=r"minibatch .* got m \(pair differences\)=2250"):
        DPPCA(delta=1e-8, ledger=ledger, stream_centering="pairs").fit(X)
    with pytest.raises(ValueError, match="too small"):
        DPPCA(batch_size=10, ledger=ledger).fit(X)
    assert len(ledger) == 0


def test_dppca_matrix_path_matches_vector_path(rng):
    X, _ = gaussian(12_000, 4, rng)
    A = np.einsum("ni,nj->nij", X, X)
    kw = {"epsilon": 2.0, "delta": 1e-5, "random_state": 5}
    a = DPPCA(**kw, **PAPER).fit(X)
    b = DPPCA(**kw).fit_matrices(A)
    np.testing.assert_allclose(a.components_, b.components_, atol=1e-6)


def test_dppca_rank_k_returns_an_orthonormal_block(rng):
    X = rng.standard_normal((200_000, 6)) * np.sqrt([2.0, 1.5] + [0.25] * 4)
    V = np.eye(6)[:, :2]
    est = DPPCA(n_components=2, epsilon=2.0, delta=1e-8, random_state=0, **PAPER).fit(X)
    np.testing.assert_allclose(est.components_ @ est.components_.T, np.eye(2), atol=1e-10)
    assert est.history_["noise_scale"].shape == (est.n_iter_,)
    assert sin_theta(est.components_.T, V) < 0.5


def test_dppca_learning_rate_search_is_private_and_recorded(rng):
    X, _ = gaussian(200_000, 5, rng)
    ledger = PrivacyLedger()
    est = DPPCA(epsilon=2.0, delta=1e-8, learning_rate="search", random_state=0,
                ledger=ledger, **PAPER).fit(X)
    assert "Learning-rate search" in est.privacy_.notes
    # Only the choice is released: floating-point Laplace scores could reveal the counts.
    assert not any("score" in name for name in vars(est))
    assert (est.learning_rate_.c1, est.learning_rate_.c2) in {
        (4.0, 0.0), (16.0, 0.0), (64.0, 0.0), (16.0, 8.0)}
    assert ledger.epsilon(1e-8) == 2.0
    with pytest.raises(ValueError, match="two"):
        DPPCA(learning_rate="search", search_grid=[(1.0, 1.0)]).fit(X)


# ---------------------------------------------------------------- on a table: pair differences
def shifted(n, d, seed, shift=50.0, spike=3.0):
    """Mean ``shift·1``, covariance ``I + spike²·e₁e₁ᵀ``: the second moment's top direction
    is the mean's, the covariance's is e₁."""
    rng = np.random.default_rng(seed)
    X = shift + rng.standard_normal((n, d))
    X[:, 0] += spike * rng.standard_normal(n)
    return X, np.eye(d)[:, :1]


def test_pair_differences_average_to_the_sample_covariance(rng):
    """Over all ordered pairs, the mean of g gᵀ with g = (x_a − x_b)/√2 is exactly np.cov."""
    X = rng.standard_normal((7, 3)) * [1.0, 2.0, 0.5] + [100.0, -3.0, 7.0]
    a, b = np.array([(i, j) for i in range(7) for j in range(7) if i != j]).T
    G = pair_differences(X, np.ravel(np.column_stack([a, b])))
    np.testing.assert_allclose(G, (X[a] - X[b]) / math.sqrt(2))
    np.testing.assert_allclose(G.T @ G / len(G), np.cov(X.T), rtol=1e-10)


def test_pair_differences_recover_the_covariance_of_shifted_data(rng):
    n, d = 200_001, 4
    Sigma = np.array([[4.0, 1.0, 0, 0], [1.0, 2.0, 0, 0], [0, 0, 1.0, 0], [0, 0, 0, 0.5]])
    X = 1e3 + rng.multivariate_normal(np.zeros(d), Sigma, size=n)
    G = pair_differences(X, rng.permutation(n))
    assert G.shape == (n // 2, d)  # the odd last record is unused
    assert np.abs(G.mean(axis=0)).max() < 0.03  # the mean 1000·1 is gone
    np.testing.assert_allclose(G.T @ G / len(G), Sigma, atol=0.05)


@pytest.mark.parametrize("j", [0, 1, 5, 8, 9, 10])
def test_replacing_one_record_changes_at_most_one_derived_record(rng, j):
    """The neighbouring argument as a property: for a fixed order, the derived data sets of
    neighbours (record j replaced) differ in exactly one row when j is paired, none when j is
    held out or is the unused odd record; their size never changes."""
    n, n_held = 11, 2
    X = rng.standard_normal((n, 3)) + 5.0
    Y = X.copy()
    Y[j] = rng.standard_normal(3) * 100.0
    order = rng.permutation(n)
    rest = order[n_held:]
    for pairs, centre in ((True, np.full(3, 5.0)), (False, np.full(3, 5.0)), (False, None)):
        # the records the fit's stream reads (pairs ignore the centre)
        a, b = (table_records(Z, rest, pairs, centre) for Z in (X, Y))
        A, B = (r.records(np.arange(r.n_samples)) for r in (a, b))
        assert A.shape == B.shape == ((n - n_held) // 2 if pairs else n - n_held, 3)
        changed = int((A != B).any(axis=1).sum())
        position = int(np.flatnonzero(order == j)[0])
        paired = n_held <= position < n_held + 2 * ((n - n_held) // 2) if pairs else (
            position >= n_held)
        assert changed == (1 if paired else 0)


@pytest.mark.parametrize("cls", [DPPCA, PrivateOjaPCA])
def test_defaults_estimate_the_covariance_not_the_mean_and_record_every_part(cls):
    n = 60_000 if cls is DPPCA else 40_000
    X, v = shifted(n, 4, seed=1)
    eps, delta = (4.0, 1e-6) if cls is DPPCA else (20.0, 1e-6)
    extra = {} if cls is DPPCA else {"amplification": "none"}
    ledger = PrivacyLedger()
    est = cls(epsilon=eps, delta=delta, random_state=0, ledger=ledger, **extra).fit(X)
    paper = cls(epsilon=eps, delta=delta, random_state=0, ledger=PrivacyLedger(),
                centering=None, **({"clip_norm": 1.0} if cls is PrivateOjaPCA else {}),
                **extra)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RowClippingWarning)
        paper.fit(X if cls is DPPCA else X[:10_000])
    assert sin_theta(est.components_.T, v) < 0.25
    # uncentred: the second moment's top direction is the mean's, 1/2·(1, 1, 1, 1)
    assert sin_theta(paper.components_.T, np.full((4, 1), 0.5)) < 0.1
    # mean_, transform and the private explained variance (sklearn: 10/13 = 0.77)
    assert np.abs(est.mean_ - 50.0).max() < 0.2
    np.testing.assert_allclose(est.transform(X[:3]), (X[:3] - est.mean_) @ est.components_.T)
    assert est.explained_variance_[0] == pytest.approx(10.0, rel=0.15)
    assert est.explained_variance_ratio_[0] == pytest.approx(10.0 / 13.0, abs=0.05)
    assert 0 <= est.expected_error_ <= 2.0 and est.noise_level_ > 0
    # One ledger record, the final one, with every held-out part and the stream; its total is
    # the request, and the held-out Gaussian parts alone compose to exactly (ε, δ).
    assert len(ledger) == 1 and ledger.records[0][1] is est.privacy_
    rec = est.privacy_
    assert [s.mechanism.split(":")[0] for s in rec.spends] == [*HELD_OUT_PARTS, "statistic"]
    assert (rec.epsilon, rec.delta) == (eps, delta) and ledger.epsilon(delta) == eps
    held = rec.spends[:-1]
    assert all("held-out" in s.mechanism for s in held)
    # Gaussian composition identity: the parts' multipliers merge into one Gaussian of
    # multiplier (Σ cᵢ/mᵢ²)^(-1/2) (cᵢ releases of each: a quantile search lists its rounds),
    # whose ε at δ is ε.
    merged = sum(s.count * s.dp_event.noise_multiplier ** -2 for s in held) ** -0.5
    composed = dp_accounting.get_epsilon_gaussian(merged, delta)
    assert composed == pytest.approx(eps, rel=1e-6)
    assert "Parallel composition" in rec.notes and "held-out private mean" in rec.notes
    n_held = math.ceil(0.1 * n)
    m = n - n_held  # the other records, centred on the held-out private mean
    assert est.n_iter_ == m // (est.batch_size_ if cls is DPPCA else 1)
    # The stream's spend is the papers' spend on the m streamed records.
    if cls is DPPCA:
        stream = DPPCA(epsilon=eps, delta=delta, centering=None, random_state=0,
                       ledger=PrivacyLedger()).fit(X[:m])
        assert repr(rec.spends[-1].dp_event) == repr(stream.privacy_.spends[0].dp_event)
        assert rec.spends[-1].epsilon == stream.privacy_.spends[0].epsilon
    else:
        alpha = float(dp_accounting.get_sigma_gaussian(eps, delta))
        assert est.noise_multiplier_ == alpha
        assert repr(rec.spends[-1].dp_event) == repr(dp_accounting.GaussianDpEvent(alpha))
        assert rec.spends[-1].noise_scale == pytest.approx(2 * est.clip_norm_ * alpha)


def test_private_oja_auto_clip_is_the_squared_held_out_bound():
    X, _ = shifted(40_000, 4, seed=2)
    est = PrivateOjaPCA(epsilon=20.0, delta=1e-6, amplification="none", random_state=0).fit(X)
    assert est.clip_norm_ == pytest.approx(est.data_norm_**2)
    assert est.privacy_.sensitivity == pytest.approx(2 * est.clip_norm_)
    # D is a 99 % quantile of the centred norms: it clips about 1 % of the held-out rows and
    # few gradient blocks (‖g gᵀw‖ ≤ ‖g‖²).
    norms = np.linalg.norm(X - X.mean(axis=0), axis=1)
    assert 0.9 < np.mean(norms <= est.data_norm_) <= 1.0
    assert est.noise_level_ == pytest.approx(
        2 * est.clip_norm_ * est.noise_multiplier_ / math.sqrt(est.n_iter_))


def test_public_mean_needs_no_pairs_and_no_private_mean():
    X, v = shifted(40_000, 4, seed=3)
    est = PrivateOjaPCA(epsilon=20.0, delta=1e-6, amplification="none", random_state=0,
                        centering=np.full(4, 50.0)).fit(X)
    assert est.n_iter_ == 40_000 - 4_000  # every non-held-out record, no pairs
    np.testing.assert_array_equal(est.mean_, np.full(4, 50.0))
    assert [s.mechanism.split(":")[0] for s in est.privacy_.spends] == [
        "bound", "variance", "statistic"]
    assert sin_theta(est.components_.T, v) < 0.25


def test_uncentred_with_auto_clip_releases_the_second_moment():
    X, _ = shifted(40_000, 4, seed=4, shift=0.0)
    est = PrivateOjaPCA(epsilon=20.0, delta=1e-6, amplification="none", centering=None,
                        random_state=0).fit(X)
    np.testing.assert_array_equal(est.mean_, np.zeros(4))
    assert [s.mechanism.split(":")[0] for s in est.privacy_.spends] == [
        "bound", "variance", "statistic"]
    assert est.explained_variance_[0] == pytest.approx(10.0, rel=0.15)  # E[x₁²], zero mean


def test_oja_centres_on_the_exact_mean():
    """OjaPCA is not private: centering="private" is the exact mean, the same pass as the
    papers' Oja on the centred rows, and sklearn's explained variance."""
    from sklearn.decomposition import PCA

    X, _ = shifted(20_000, 5, seed=5)
    est = OjaPCA(random_state=3).fit(X)
    ref = OjaPCA(random_state=3, centering=None).fit(X - X.mean(axis=0))
    np.testing.assert_allclose(est.components_, ref.components_, atol=1e-12)
    np.testing.assert_allclose(est.mean_, X.mean(axis=0))
    sk = PCA(1).fit(X)
    assert est.explained_variance_ == pytest.approx(sk.explained_variance_, rel=1e-3)
    assert est.explained_variance_ratio_ == pytest.approx(sk.explained_variance_ratio_,
                                                          rel=1e-3)
    assert est.noise_level_ == 0.0 and est.privacy_.epsilon == math.inf
    two = OjaPCA(n_components=2, random_state=3).fit(X)
    assert two.explained_variance_[0] > two.explained_variance_[1]
    uncentred = OjaPCA(random_state=3, centering=None).fit(X)
    assert sin_theta(uncentred.components_.T, np.full((5, 1), 1 / math.sqrt(5))) < 0.1
    np.testing.assert_array_equal(uncentred.mean_, np.zeros(5))
    assert uncentred.explained_variance_[0] > 2000  # the second moment, over n


def test_table_mode_refuses_over_budget_before_reading_data():
    X, _ = shifted(60_000, 4, seed=6)
    ledger = PrivacyLedger(epsilon_budget=3.0, delta_budget=1e-5)
    with pytest.raises(BudgetExceededError):
        DPPCA(epsilon=4.0, delta=1e-6, ledger=ledger).fit(X)
    assert len(ledger) == 0


@pytest.mark.parametrize("where", ["held out", "first record", "last record", "unread"])
@pytest.mark.parametrize("value", [np.nan, np.inf])
def test_defaults_refuse_nan_wherever_it_is_and_charge_nothing(where, value):
    """The defaults check X in the fit's own passes (held-out rows before their
    preprocessing, the stream's rows by its compiled passes, the unread rows at the start): a
    NaN or inf row anywhere is refused, nothing is set on the estimator and the booking is
    withdrawn."""
    from privpca.mechanisms.randomness import check_random_state

    n = 60_000
    X, _ = shifted(n, 4, seed=6)
    fitted = DPPCA(epsilon=2.0, batch_size=4_000, random_state=4).fit(X)
    n_held = math.ceil(0.1 * n)
    TB = fitted.batch_size_ * fitted.n_iter_
    assert n_held + TB < n  # some records are read by no step
    # The held-out permutation, drawn as the fit draws it (from its own random stream).
    perm = DPPCA._preprocessing_rng(check_random_state(4)).permutation(n)
    row = {"held out": perm[0], "first record": perm[n_held],
           "last record": perm[n_held + TB - 1], "unread": perm[-1]}[where]
    X[row, 2] = value
    ledger = PrivacyLedger()
    est = DPPCA(epsilon=2.0, batch_size=4_000, random_state=4, ledger=ledger)
    with pytest.raises(NonFiniteInputError, match="NaN or infinity"):
        est.fit(X)
    assert len(ledger) == 0
    assert not hasattr(est, "components_")


@pytest.mark.parametrize(
    ("cls", "params", "match"),
    [
        (PrivateOjaPCA, {"clip_norm": "max"}, "clip_norm"),
        (PrivateOjaPCA, {"clip_norm": -1.0}, "clip_norm"),
        (PrivateOjaPCA, {"centering": "median"}, "centering"),
        (DPPCA, {"centering": np.zeros(3)}, "centering"),
        (DPPCA, {"holdout_fraction": 0.0}, "holdout_fraction"),
        (DPPCA, {"holdout_fraction": 1.0}, "holdout_fraction"),
        (PrivateOjaPCA, {"holdout_fraction": "10%"}, "holdout_fraction"),
        (DPPCA, {"budget_shares": {"statistic": 0.5}}, "unknown part"),
        (DPPCA, {"budget_shares": {"mean": -0.1}}, r"budget_shares\['mean'\]"),
        (PrivateOjaPCA, {"budget_shares": [0.1]}, "budget_shares"),
        (DPPCA, {"holdout_fraction": 0.9999}, "at least 2"),
    ],
)
def test_table_mode_parameter_errors(cls, params, match):
    X, _ = shifted(3_000, 4, seed=7)
    ledger = PrivacyLedger()
    with pytest.raises(ValueError, match=match):
        cls(amplification="none", ledger=ledger, **params).fit(X) if cls is PrivateOjaPCA \
            else cls(ledger=ledger, **params).fit(X)
    assert len(ledger) == 0


def test_auto_holdout_holds_out_what_the_quantiles_need():
    """``holdout_fraction="auto"``: 0.1 of the rows, raised to the rows the held-out searches
    need (public n, p, ε, δ) up to half the table: 1 030 rows fit, where 0.1 (103) refuses."""
    X, _ = shifted(1_030, 4, seed=3)
    ledger = PrivacyLedger()
    with pytest.raises(ValueError, match=r"holds out 103 records .* need at least (\d+)") as e:
        PrivateOjaPCA(holdout_fraction=0.1, ledger=ledger, random_state=0).fit(X)
    assert len(ledger) == 0
    need = e.value.needed
    est = PrivateOjaPCA(ledger=ledger, random_state=0).fit(X)
    assert f" {need} of n=1030 records" in est.privacy_.notes and len(ledger) == 1
    assert est.privacy_.epsilon == pytest.approx(1.0)
    with pytest.raises(ValueError, match=r"'auto' holds out at most half"):
        PrivateOjaPCA(ledger=ledger).fit(X[: 2 * need - 2])
    assert len(ledger) == 1


@pytest.mark.parametrize("cls", [DPPCA, PrivateOjaPCA])
def test_too_small_a_held_out_share_is_refused_before_any_charge(cls):
    """The private norm quantiles release only bins above a public threshold: with fewer
    held-out records than that, the fit is refused from public quantities, spending nothing."""
    X, _ = shifted(400, 4, seed=9)
    ledger = PrivacyLedger()
    with pytest.raises(ValueError, match=r"holds out 40 records .* need at least \d+"):
        cls(ledger=ledger, **SMALL_DPPCA if cls is DPPCA else {}).fit(X)
    assert len(ledger) == 0
    est = cls(ledger=ledger, holdout_fraction=0.5, epsilon=4.0,
              **SMALL_DPPCA if cls is DPPCA else {"amplification": "none"}).fit(X)
    assert len(ledger) == 1 and est.mean_.shape == (4,)


def test_matrices_are_used_as_given(rng):
    X = rng.standard_normal((300, 3))
    A = np.einsum("ni,nj->nij", X, X)
    with pytest.raises(ValueError, match="numeric clip_norm"):
        PrivateOjaPCA(amplification="none").fit_matrices(A)
    with pytest.raises(ValueError, match="centering=None"):
        DPPCA(centering=np.zeros(3), **SMALL_DPPCA).fit_matrices(A)
    with pytest.warns(RowClippingWarning):
        est = PrivateOjaPCA(amplification="none", clip_norm=1.0).fit_matrices(A)
    np.testing.assert_array_equal(est.mean_, np.zeros(3))
    assert np.isnan(est.explained_variance_).all()


def test_budget_shares_move_the_held_out_split():
    X, _ = shifted(60_000, 4, seed=8)
    # With pair differences the stream does not read the held-out mean, so it is unaffected.
    a = DPPCA(epsilon=4.0, delta=1e-6, random_state=0, ledger=PrivacyLedger(),
              stream_centering="pairs").fit(X)
    b = DPPCA(epsilon=4.0, delta=1e-6, random_state=0, ledger=PrivacyLedger(),
              stream_centering="pairs", budget_shares={"variance": 1.0}).fit(X)
    var_a, var_b = (next(s for s in r.privacy_.spends if s.mechanism.startswith("variance"))
                    for r in (a, b))
    assert var_b.noise_scale / var_b.sensitivity < var_a.noise_scale / var_a.sensitivity
    assert (b.privacy_.epsilon, b.privacy_.delta) == (4.0, 1e-6)
    np.testing.assert_allclose(a.components_, b.components_)  # the stream is unaffected


@pytest.mark.slow
def test_dppca_error_falls_with_n_and_epsilon_as_the_privacy_term_predicts():
    """Corollary 5.2 on Gaussian data (d = 50, λ₁ = 1, λ₂ = 0.5, δ = 1/n²): in the regime
    where the privacy term d·√log(1/δ)/(εn) dominates, the error scales as 1/ε and falls
    with n at least as fast as that term."""
    d = 50

    def error(n, eps, seeds=(0, 1)):
        runs = []
        for seed in seeds:
            X, v = gaussian(n, d, np.random.default_rng(seed))
            est = DPPCA(epsilon=eps, delta=1.0 / n**2, random_state=seed, **PAPER).fit(X)
            runs.append(sin_theta(est.components_.T, v))
        return float(np.mean(runs))

    e_small, e_large = error(300_000, 2.0), error(1_000_000, 2.0)
    e_eps1 = error(1_000_000, 1.0)
    assert e_large < 0.25
    assert e_large < e_small / 2  # still leaving saturation: steeper than the rate
    assert 1.4 < e_eps1 / e_large < 3.0  # privacy term ∝ 1/ε
    # Where the privacy term dominates, its slope in n is −1 (the statistical term's −1/2).
    slope = math.log(error(3_000_000, 1.0) / e_eps1) / math.log(3.0)
    assert -1.35 < slope < -0.75, slope


@pytest.mark.slow
def test_example_4_1_dppca_error_vanishes_with_sigma_private_oja_does_not():
    """Liu et al. §4–5: on x = ±v + σz, DP-PCA's noise scales with the gradients' range (σ),
    Private Oja's with their norm (≈ 1)."""
    n, d, eps = 100_000, 20, 1.0
    dp, oja = {}, {}
    for sigma in (0.03, 0.003):
        dp_runs, oja_runs = [], []
        for seed in (0, 1):
            X, v = make_signal_noise(n, d, sigma, random_state=seed)
            est = DPPCA(epsilon=eps, delta=1.0 / n**2, random_state=seed, **PAPER).fit(X)
            dp_runs.append(sin_theta(est.components_.T, v))
            clip = (1.0 + 4 * sigma * math.sqrt(d)) ** 2  # never clips: ‖x‖² ≤ clip w.h.p.
            po = PrivateOjaPCA(epsilon=eps, delta=1.0 / n**2, clip_norm=clip,
                               random_state=seed, **PAPER).fit(X)
            oja_runs.append(sin_theta(po.components_.T, v))
        dp[sigma], oja[sigma] = np.mean(dp_runs), np.mean(oja_runs)
    assert dp[0.003] < dp[0.03] / 3  # vanishes with σ
    # Private Oja's noise is set by the gradients' norm (≈ 1), not their range: it levels off
    # (0.05 at σ = 0.003 in docs/DP_PCA.md's table, 27 times DP-PCA's 0.0019).
    assert oja[0.003] > 0.02 and oja[0.003] > 5 * dp[0.003]
    assert dp[0.003] < oja[0.003] / 5
