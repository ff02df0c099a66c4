"""Feasible spectra (issue 28): every estimator's explained_variance_ ≥ 0 and ratios in
[0, 1] summing to at most 1; the post-processing in pipeline/spectrum.py."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

import privpca
from privpca import (
    DPPCA,
    DPSPCA,
    AnalyzeGaussPCA,
    BinghamPCA,
    LocalGaussianPCA,
    LocalSparsePCA,
    ModSuLQPCA,
    NoisyPowerPCA,
    PrivateOjaPCA,
)
from privpca.mechanisms.noise import symmetric_noise
from privpca.pipeline.basis_error import component_error_bound, rotate_component_spectrum
from privpca.pipeline.spectrum import (
    bootstrap_error_bound,
    debiased_eigenvalues,
    feasible_spectrum,
    fit_noisy_matrix,
    noisy_eigenvalues,
)

finite = st.floats(-1e6, 1e6, allow_nan=False)


@settings(max_examples=200, deadline=None)
@given(arrays(np.float64, st.integers(1, 8), elements=finite), finite)
def test_feasible_spectrum_is_a_spectrum(values, total):
    v, ratio, t = feasible_spectrum(values, total)
    assert np.all(v >= 0) and np.all((ratio >= 0) & (ratio <= 1))
    assert ratio.sum() <= 1.0 and t >= v.sum() * (1 - 1e-12)
    assert t >= max(total, 0.0)  # never below the released total: nothing shrunk


def test_feasible_spectrum_keeps_a_feasible_one_and_nan():
    v, ratio, t = feasible_spectrum(np.array([3.0, 1.0]), 8.0)
    np.testing.assert_array_equal(v, [3.0, 1.0])
    np.testing.assert_array_equal(ratio, [3 / 8, 1 / 8])
    assert t == 8.0
    v, ratio, t = feasible_spectrum(np.array([np.nan, np.nan]), 1.0)
    assert np.isnan(v).all() and np.isnan(ratio).all() and math.isnan(t)
    v, ratio, _ = feasible_spectrum(np.array([2.0, -1.0]), 1.0)  # total below the values
    np.testing.assert_array_equal(v, [2.0, 0.0])
    np.testing.assert_array_equal(ratio, [1.0, 0.0])


def test_component_error_bound_is_exact_without_noise():
    rng = np.random.default_rng(0)
    p, k = 6, 2
    U = np.linalg.qr(rng.standard_normal((p, p)))[0]
    lam = np.array([10.0, 8.0, 1.0, 0.5, 0.2, 0.1])
    G = U @ np.diag(lam) @ U.T
    # the true top-k: √(2·tail/λ_k) (the bound cannot see λ_{k+1}); a tilted basis: at least
    # its true distance
    assert component_error_bound(U[:, :k].T @ G @ U[:, :k], lam.sum(), 0.0, p) == \
        pytest.approx(math.sqrt(2 * lam[k:].sum() / lam[k - 1]))
    Q = np.linalg.qr(U[:, :k] + 0.3 * U[:, k:k + 2])[0]
    true = math.sqrt(2 * k - 2 * np.sum((Q.T @ U[:, :k]) ** 2))
    bound = component_error_bound(Q.T @ G @ Q, lam.sum(), 0.0, p)
    assert true <= bound <= math.sqrt(2 * k)
    spectrum = rotate_component_spectrum(Q.T.copy(), (Q.T @ G @ Q, lam.sum()))
    assert spectrum.expected_error == bound
    assert rotate_component_spectrum(Q.T.copy(), None).expected_error is None


def _fits():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((20000, 6)) * np.array([3.0, 2.0, 1.0, 1.0, 1.0, 1.0]) + 5.0
    small = X[:5000]  # a noisy fit: negative eigenvalues and a small noisy total
    yield AnalyzeGaussPCA(6, epsilon=0.5, random_state=1), small
    yield ModSuLQPCA(6, epsilon=0.5, random_state=1), small
    yield NoisyPowerPCA(3, epsilon=0.5, random_state=1), small
    yield BinghamPCA(2, epsilon=0.5, random_state=1), X
    yield PrivateOjaPCA(2, epsilon=1.0, random_state=1), X
    yield DPPCA(2, epsilon=1.0, random_state=1), X
    yield LocalGaussianPCA(3, epsilon=1.0, random_state=1), X
    yield LocalSparsePCA(2, epsilon=1.0, random_state=1), X
    yield DPSPCA(2, epsilon=1.0, random_state=1), X


@pytest.mark.parametrize("est,X", list(_fits()), ids=lambda e: type(e).__name__)
def test_every_estimator_releases_a_feasible_spectrum(est, X):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est.fit(X)
    v, r = est.explained_variance_, est.explained_variance_ratio_
    assert np.all(np.isfinite(v)) and np.all(v >= 0)
    assert np.all((r >= 0) & (r <= 1)) and r.sum() <= 1.0
    assert est.noise_level_ is None or not est.noise_level_ < 0
    err = est.expected_error_
    assert err is not None and 0.0 <= err <= math.sqrt(2 * est.components_.shape[0]) + 1e-12


# ------------------------------------------------------------ the bootstrap's noise bar
def _noisy_gram(gap: float, sigma: float, seed: int = 0, p: int = 12) -> tuple[np.ndarray,
                                                                               np.ndarray]:
    rng = np.random.default_rng(seed)
    G = np.diag(np.r_[[gap * 3, gap * 2], np.ones(p - 2)])
    E = rng.standard_normal((p, p)) * sigma
    E = np.triu(E) + np.triu(E, 1).T
    return G + E, np.eye(p)[:, :2]


def test_the_bootstrap_bar_covers_the_noise_and_is_tighter_than_davis_kahan():
    # A clear gap and small noise: the bar covers the true distance in every seed and sits
    # below the analytic bound, which pays for the worst-case noise norm.
    for seed in range(10):
        M, V = _noisy_gram(50.0, 1.0, seed)
        W = np.linalg.eigh(M)[1][:, ::-1][:, :2]
        true = np.linalg.norm(W @ W.T - V @ V.T)
        bar = bootstrap_error_bound(M, 2, 1.0, 0.0, np.random.default_rng(seed))
        dk = fit_noisy_matrix(M, 2, noise_sd=1.0, denominator=1.0).expected_error
        assert true <= bar < dk


def test_the_bootstrap_bar_is_the_cap_when_the_noise_dominates():
    M, _ = _noisy_gram(0.5, 5.0)
    assert bootstrap_error_bound(M, 2, 5.0, 0.0, np.random.default_rng(0)) == 2.0
    # fit_noisy_matrix takes the smaller of the two bars only when given a stream.
    fit = fit_noisy_matrix(M, 2, noise_sd=5.0, denominator=1.0, rng=np.random.default_rng(0))
    assert fit.expected_error <= fit_noisy_matrix(M, 2, noise_sd=5.0,
                                                  denominator=1.0).expected_error


def test_variances_read_off_another_release_come_largest_first():
    """Where the variances are read along the components off the release at the robust
    maximum (a low bound chosen), the components are reordered with them: scikit-learn's
    order, the same span (k = p − 1 gave 0.395 before 0.426)."""
    rng = np.random.default_rng(8)
    Q, _ = np.linalg.qr(rng.normal(size=(10, 10)))
    X = (rng.normal(size=(20_000, 10))
         * np.sqrt([9, 4, 2, 1, 0.5, 0.4, 0.3, 0.2, 0.1, 0.05])) @ Q.T
    for seed in range(3):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            est = AnalyzeGaussPCA(9, random_state=seed, ledger=privpca.PrivacyLedger()).fit(X)
        assert np.all(np.diff(est.explained_variance_) <= 0)
        # Each variance is its own component's (the reordering kept the pairs).
        along = np.einsum("ij,jk,ik->i", est.components_, np.cov(X.T), est.components_)
        assert np.corrcoef(along, est.explained_variance_)[0, 1] > 0.99


# ------------------------------------------------------------ noise-debiased eigenvalues
def test_debiased_eigenvalues_recover_a_spike_and_zero_the_noise():
    """G = θ·uuᵀ plus symmetric noise (σ = 1, p = 400, edge 2σ√p = 40): the released top
    eigenvalue is pulled up by about pσ²/θ; the debias puts it back within 2 % at θ = 60
    and 120 (10 seeds). The noise's own top eigenvalue (θ = 0) is at the edge, and reported
    as 0 in most seeds (where a draw passes the edge it is at most about σ√p)."""
    p, sigma = 400, 1.0
    u = np.ones(p) / math.sqrt(p)
    for theta in (60.0, 120.0):
        raw, fixed = [], []
        for seed in range(10):
            M = theta * np.outer(u, u) + symmetric_noise(p, sigma, np.random.default_rng(seed))
            top = np.linalg.eigvalsh(M)[-1]
            raw.append(top)
            fixed.append(debiased_eigenvalues(np.array([top]), sigma, p)[0])
        assert np.mean(raw) > theta + 0.8 * p * sigma**2 / theta  # the bias is real
        assert abs(np.mean(fixed) - theta) < 0.02 * theta
    noise_only = [debiased_eigenvalues(np.linalg.eigvalsh(symmetric_noise(
        p, sigma, np.random.default_rng(s)))[-1:], sigma, p)[0] for s in range(10)]
    assert sum(v == 0.0 for v in noise_only) >= 5 and max(noise_only) < 1.5 * math.sqrt(p)


def test_noisy_eigenvalues_invert_the_debias_above_the_edge():
    p, sigma = 50, 0.3
    edge = 2 * sigma * math.sqrt(p)
    ell = np.array([edge * 1.2, edge * 1.5, edge * 10, edge * 0.5, np.nan])
    theta = debiased_eigenvalues(ell, sigma, p)
    assert theta[3] == 0.0 and np.isnan(theta[4]) and np.all(theta[:3] < ell[:3])
    np.testing.assert_allclose(noisy_eigenvalues(theta[:3], sigma, p), ell[:3], rtol=1e-12)


def test_explained_variance_is_not_taken_by_noise_directions():
    """The outside tester's complaint: a table whose variance is spread thinly reported its
    top components as carrying most of it. MOD-SuLQ on 2 000 × 50 standard normals (sklearn:
    top two ratios ≈ 0.05) claimed about 0.6 for them; its components are noise, and the
    resolved variance is now 0. A strong component stays: the same table with one column
    ×10 gives about scikit-learn's variance for it (a public bound above every row: no
    clipping; the ratio's denominator, the noisy trace, has noise σ√p ≈ 30 of 145 here)."""
    rng = np.random.default_rng(0)
    X = rng.standard_normal((2000, 50))
    est = ModSuLQPCA(2, epsilon=1.0, random_state=0, ledger=privpca.PrivacyLedger()).fit(X)
    assert est.explained_variance_ratio_.sum() < 0.1
    assert est.total_variance_ > 0
    X[:, 0] *= 10.0
    D = 1.01 * float(np.linalg.norm(X - X.mean(axis=0), axis=1).max())
    est = AnalyzeGaussPCA(1, epsilon=1.0, data_norm=D, random_state=0,
                          ledger=privpca.PrivacyLedger()).fit(X)
    sklearn_variance = float(np.linalg.eigvalsh(np.cov(X.T))[-1])
    assert est.explained_variance_[0] == pytest.approx(sklearn_variance, rel=0.1)


def test_a_share_not_resolved_keeps_every_component_and_says_so():
    X = np.random.default_rng(1).standard_normal((2000, 40))
    with pytest.warns(UserWarning, match="does not reach that share"):
        est = AnalyzeGaussPCA(0.9, epsilon=1.0, random_state=0,
                              ledger=privpca.PrivacyLedger()).fit(X)
    assert est.n_components_ == 40
    with pytest.warns(UserWarning, match="not resolved above"):
        AnalyzeGaussPCA(40, epsilon=1.0, random_state=0, whiten=True,
                        ledger=privpca.PrivacyLedger()).fit(X).transform(X[:5])


def test_a_fit_that_resolves_nothing_keeps_its_total_for_the_model():
    """Every variance 0 (the statistic's noise hides them, and no high pilot is read: a
    public bound): the ratios carry no total, which total_variance_ does; the model's
    covariance is then isotropic at t/(p − k)."""
    X = np.random.default_rng(0).standard_normal((2000, 50))
    est = ModSuLQPCA(2, epsilon=1.0, data_norm=12.0, random_state=1,
                     ledger=privpca.PrivacyLedger()).fit(X)
    assert np.all(est.explained_variance_ == 0.0) and est.total_variance_ > 0
    cov = est.get_covariance()
    np.testing.assert_allclose(np.diag(cov), est.total_variance_ / 48, rtol=1e-12)
    front = privpca.PCA(2, epsilon=1.0, random_state=1, mechanism="mod-sulq",
                        options={"data_norm": 12.0}, ledger=privpca.PrivacyLedger()).fit(X)
    assert front.total_variance_ == est.total_variance_


@pytest.mark.parametrize("cls", [AnalyzeGaussPCA, ModSuLQPCA, NoisyPowerPCA, BinghamPCA])
def test_defaults_report_the_tables_variances_not_the_clipped_rows(cls):
    """Two strong directions (variances 26 and 10) on 20 000 × 10: with the bound chosen at
    about the median norm, MOD-SuLQ, NoisyPower and Bingham reported the clipped rows'
    variances, about [12, 6.5] (an outside tester). All four read them off the pilot at the
    robust maximum; the "variance" part (the bar's) reads the rows clipped at the reference
    bound, above the chosen one."""
    rng = np.random.default_rng(0)
    V = np.linalg.qr(rng.standard_normal((10, 2)))[0]
    X = rng.standard_normal((20_000, 10)) + (rng.standard_normal((20_000, 2)) * [5, 3]) @ V.T
    truth = np.linalg.eigvalsh(np.cov(X.T))[::-1][:2]
    est = cls(2, random_state=0, ledger=privpca.PrivacyLedger()).fit(X + 7.0)
    np.testing.assert_allclose(est.explained_variance_, truth, rtol=0.1)
    assert "read off the pilot Gram released at the robust maximum" in est.privacy_.notes
    variance = next(s for s in est.privacy_.spends if s.mechanism.startswith("variance"))
    reference = float(variance.mechanism.split("D = ", 1)[1].split()[0].rstrip(","))
    assert reference > 1.2 * est.data_norm_  # a bound below the reference was chosen
    assert variance.sensitivity == pytest.approx(math.sqrt(2) * reference**2, rel=1e-5)


def test_a_fit_that_resolves_nothing_says_so():
    # A 1 000 x 400 table of pure noise at epsilon = 1: every released variance is below the
    # noise's edge, so the components are noise directions. Once silent (an outside tester:
    # an all-constant table gave arbitrary unit vectors with no warning).
    from privpca import UnresolvedComponentsWarning

    X = np.random.default_rng(5).standard_normal((1_000, 400))
    with pytest.warns(UnresolvedComponentsWarning, match="no component's variance"):
        est = AnalyzeGaussPCA(2, random_state=0, ledger=privpca.PrivacyLedger()).fit(X)
    assert np.all(est.explained_variance_ == 0)
    with warnings.catch_warnings():
        warnings.simplefilter("error", UnresolvedComponentsWarning)
        AnalyzeGaussPCA(2, random_state=0, ledger=privpca.PrivacyLedger()).fit(X[:, :3] * [5, 2, 1])
