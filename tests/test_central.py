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
    OjaPCA,
    PrivacyLedger,
    PrivateOjaPCA,
    RowClippingWarning,
    ShufflingBoundError,
)
from privpca.datasets import make_signal_noise, make_spiked
from privpca.mechanisms.shuffling import local_epsilon_for_shuffling
from privpca.metrics import sin_theta

SMALL_DPPCA = {"n_subsets": 2, "min_subset_size": 1, "batch_size": 8}


@parametrize_with_checks(
    [OjaPCA(), PrivateOjaPCA(amplification="none"), DPPCA(**SMALL_DPPCA)]  # type: ignore[arg-type]
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
            est = OjaPCA(learning_rate=(4.0, 10.0), random_state=seed).fit(X)
            runs.append(sin_theta(est.components_.T, v))
        errors[n] = np.mean(runs)
    slope = math.log(errors[80_000] / errors[5_000]) / math.log(16)
    assert -0.75 < slope < -0.35, (errors, slope)
    assert errors[80_000] < 0.06


def test_block_oja_finds_a_rank_k_subspace_and_matrix_path_agrees():
    rng = np.random.default_rng(1)
    X = rng.standard_normal((20_000, 8)) * np.sqrt([2.0, 1.5] + [0.25] * 6)
    V = np.eye(8)[:, :2]
    est = OjaPCA(n_components=2, random_state=0).fit(X)
    assert sin_theta(est.components_.T, V) < 0.1
    A = np.einsum("ni,nj->nij", X[:2000], X[:2000])
    a = OjaPCA(n_components=2, random_state=3).fit(X[:2000])
    b = OjaPCA(n_components=2, random_state=3).fit_matrices(A)
    np.testing.assert_allclose(a.components_, b.components_, atol=1e-8)


def test_oja_is_non_private_and_a_budget_refuses_it():
    X, _ = make_spiked(1000, 5, 1, random_state=0)
    from privpca import BudgetExceededError

    with pytest.raises(BudgetExceededError):
        OjaPCA(ledger=PrivacyLedger(epsilon_budget=10.0, delta_budget=1e-5)).fit(X)


@pytest.mark.parametrize(
    ("param", "value"),
    [("learning_rate", -1.0), ("learning_rate", (1.0,)), ("learning_rate", "fast"),
     ("batch_size", 0)],
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
    est = PrivateOjaPCA(epsilon=eps, delta=delta, random_state=0).fit(X)
    g = local_epsilon_for_shuffling(eps, delta, n)
    assert est.local_epsilon_ == pytest.approx(g.epsilon0)
    assert est.noise_multiplier_ == pytest.approx(
        float(dp_accounting.get_sigma_gaussian(g.epsilon0, g.delta0))
    )
    assert est.privacy_.epsilon <= eps
    assert est.privacy_.epsilon == pytest.approx(eps, rel=1e-6)
    # Without shuffling the same ε needs the single-step multiplier, which is larger here.
    plain = PrivateOjaPCA(epsilon=eps, delta=delta, amplification="none", random_state=0).fit(X)
    assert plain.noise_multiplier_ == pytest.approx(
        float(dp_accounting.get_sigma_gaussian(eps, delta))
    )
    assert plain.noise_multiplier_ > est.noise_multiplier_


def test_private_oja_refuses_outside_the_shuffling_regime():
    X, _ = make_spiked(2_000, 5, 1, random_state=0)
    with pytest.raises(ShufflingBoundError, match="does not apply"):
        PrivateOjaPCA(epsilon=4.0).fit(X)


def test_private_oja_warns_when_clipping(rng):
    X = rng.standard_normal((3_000, 5)) * 3
    with pytest.warns(RowClippingWarning, match="gradient blocks"):
        est = PrivateOjaPCA(amplification="none", clip_norm=1.0, random_state=0).fit(X)
    assert est.privacy_.n_clipped == est.n_clipped_ > 0


# ---------------------------------------------------------------- DP-PCA
def test_dppca_records_a_parallel_guarantee_and_the_ledger_agrees(rng):
    X, _ = gaussian(60_000, 5, rng)
    ledger = PrivacyLedger()
    est = DPPCA(epsilon=1.0, delta=1e-6, random_state=0, ledger=ledger).fit(X)
    assert (est.privacy_.epsilon, est.privacy_.delta) == (1.0, 1e-6)
    assert est.n_iter_ == 60_000 // est.batch_size_
    assert ledger.epsilon(1e-6) == 1.0
    DPPCA(epsilon=1.0, delta=1e-6, random_state=1, ledger=ledger).fit(X)
    # Conservative composition of two fits (each as if a record entered both of its calls);
    # the histograms' tails cost (1 + e^ε)·tail of δ, so ask at a δ with room for them.
    two = ledger.epsilon(1e-4)
    assert 1.0 < two < 4.0
    paper = DPPCA(epsilon=1.0, delta=1e-6, budget_split="paper", random_state=0).fit(X)
    assert paper.privacy_.epsilon == 0.5 and paper.privacy_.target_epsilon == 1.0
    assert paper.n_subsets_ > est.n_subsets_  # half the budget: a higher threshold


def test_dppca_refuses_too_little_data_clearly(rng):
    X, _ = gaussian(500, 5, rng)
    with pytest.raises(ValueError, match="at least one minibatch"):
        DPPCA(delta=1e-8).fit(X)
    with pytest.raises(ValueError, match="too small"):
        DPPCA(batch_size=10).fit(X)


def test_dppca_matrix_path_matches_vector_path(rng):
    X, _ = gaussian(12_000, 4, rng)
    A = np.einsum("ni,nj->nij", X, X)
    kw = {"epsilon": 2.0, "delta": 1e-5, "random_state": 5}
    a = DPPCA(**kw).fit(X)
    b = DPPCA(**kw).fit_matrices(A)
    np.testing.assert_allclose(a.components_, b.components_, atol=1e-6)


def test_dppca_rank_k_returns_an_orthonormal_block(rng):
    X = rng.standard_normal((200_000, 6)) * np.sqrt([2.0, 1.5] + [0.25] * 4)
    V = np.eye(6)[:, :2]
    est = DPPCA(n_components=2, epsilon=2.0, delta=1e-8, random_state=0).fit(X)
    np.testing.assert_allclose(est.components_ @ est.components_.T, np.eye(2), atol=1e-10)
    assert est.history_["noise_scale"].shape == (est.n_iter_,)
    assert sin_theta(est.components_.T, V) < 0.5


def test_dppca_learning_rate_search_is_private_and_recorded(rng):
    X, _ = gaussian(200_000, 5, rng)
    ledger = PrivacyLedger()
    est = DPPCA(epsilon=2.0, delta=1e-8, learning_rate="search", random_state=0,
                ledger=ledger).fit(X)
    assert "Learning-rate search" in est.privacy_.notes
    assert est.search_scores_ is not None and len(est.search_scores_) == 4
    assert (est.learning_rate_.c1, est.learning_rate_.c2) in {
        (4.0, 0.0), (16.0, 0.0), (64.0, 0.0), (16.0, 8.0)}
    assert ledger.epsilon(1e-8) == 2.0
    with pytest.raises(ValueError, match="two"):
        DPPCA(learning_rate="search", search_grid=[(1.0, 1.0)]).fit(X)


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
            est = DPPCA(epsilon=eps, delta=1.0 / n**2, random_state=seed).fit(X)
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
            est = DPPCA(epsilon=eps, delta=1.0 / n**2, random_state=seed).fit(X)
            dp_runs.append(sin_theta(est.components_.T, v))
            clip = (1.0 + 4 * sigma * math.sqrt(d)) ** 2  # never clips: ‖x‖² ≤ clip w.h.p.
            po = PrivateOjaPCA(epsilon=eps, delta=1.0 / n**2, clip_norm=clip,
                               random_state=seed).fit(X)
            oja_runs.append(sin_theta(po.components_.T, v))
        dp[sigma], oja[sigma] = np.mean(dp_runs), np.mean(oja_runs)
    assert dp[0.003] < dp[0.03] / 3  # vanishes with σ
    assert oja[0.003] > oja[0.03] / 3  # does not
    assert dp[0.003] < oja[0.003] / 5
