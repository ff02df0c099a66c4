"""The ``variance`` part's residual pair and Davis–Kahan's residual bound on ``expected_error_``
(src/privpca/pipeline/basis_error.py): valid without noise, tight where the Ky Fan bound is
vacuous, calibrated with noise, and the whole release's sensitivity still √2·D²."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
import scipy.stats
from sklearn.decomposition import PCA

from privpca import BinghamPCA, NoisyPowerPCA, PrivacyLedger
from privpca.metrics import subspace_distance
from privpca.pipeline.basis_error import (
    component_error_bound,
    residual_moments,
)


def _spiked_gram(rng: np.random.Generator, p: int, head: tuple[float, ...], tail: float):
    """``U diag(head, tail, …, tail) Uᵀ`` and ``U``: a long tail of small variances, whose
    energy outweighs the k-th variance (the Ky Fan bound's blind spot)."""
    U = np.linalg.qr(rng.standard_normal((p, p)))[0]
    lam = np.concatenate([head, np.full(p - len(head), tail)])
    return U @ np.diag(lam) @ U.T, U


def _tilted(U: np.ndarray, k: int, angle: float) -> np.ndarray:
    """An orthonormal k×p basis at a known angle from ``U``'s top k."""
    Q = np.cos(angle) * U[:, :k] + np.sin(angle) * U[:, k:2 * k]
    return np.linalg.qr(Q)[0].T


def test_residual_bound_holds_and_is_tight_where_ky_fan_is_vacuous():
    rng = np.random.default_rng(3)
    p, k = 40, 2
    G, U = _spiked_gram(rng, p, (10.0, 8.0), 0.5)  # tail energy 19 > λ_k = 8
    for angle in (0.0, 0.01, 0.05, 0.2):
        components = _tilted(U, k, angle)
        matrix, total, residual = residual_moments(G, components)
        true = subspace_distance(components.T, U[:, :k])
        ky_fan = component_error_bound(matrix, total, 0.0, p)
        both = component_error_bound(matrix, total, 0.0, p, residual=residual)
        assert ky_fan == pytest.approx(math.sqrt(2 * k))  # vacuous: at its cap
        assert true - 1e-12 <= both <= ky_fan
        # Sylvester: ‖sin Θ‖ ≤ ‖R‖/δ with δ ≥ 7.5 − 0.5 here: within 2× of the truth
        assert both <= 2.0 * true + 1e-9


def test_residual_moments_match_their_definitions():
    rng = np.random.default_rng(4)
    G, U = _spiked_gram(rng, 12, (5.0, 3.0, 2.0), 1.0)
    components = _tilted(U, 2, 0.3)
    matrix, total, (norm, top) = residual_moments(G, components)
    Q = components.T
    W = np.eye(12) - Q @ Q.T
    np.testing.assert_allclose(matrix, Q.T @ G @ Q, atol=1e-12)
    assert total == pytest.approx(np.trace(G))
    assert norm == pytest.approx(np.linalg.norm(W @ G @ Q))
    assert top == pytest.approx(np.linalg.eigvalsh(W @ G @ W)[-1])


def _released_vector(rows: np.ndarray, components: np.ndarray) -> np.ndarray:
    matrix, total, residual = residual_moments(rows.T @ rows, components)
    iu = np.triu_indices(components.shape[0])
    return np.concatenate([matrix[iu], [total], residual])


def test_replacing_one_row_moves_the_release_by_at_most_sqrt2_d_squared():
    rng = np.random.default_rng(5)
    p, k, D = 8, 2, 1.5
    components = np.linalg.qr(rng.standard_normal((p, k)))[0].T
    Q = components.T
    worst = 0.0
    for trial in range(400):
        rows = rng.standard_normal((30, p))
        rows *= np.minimum(1.0, D / np.linalg.norm(rows, axis=1))[:, None]
        other = rows.copy()
        # adversarial replacements: norms at the bound, energy split between Q and its
        # complement at a random share, and rows removed (the zero row)
        share = rng.choice([0.0, 0.5, 1.0, rng.uniform()], size=2)
        for i, s in zip((0, 1), share, strict=True):
            inside = Q @ rng.standard_normal(k)
            outside = rng.standard_normal(p)
            outside -= Q @ (Q.T @ outside)
            v = math.sqrt(s) * inside / np.linalg.norm(inside) + math.sqrt(1 - s) * \
                outside / np.linalg.norm(outside)
            (rows if i == 0 else other)[0] = 0.0 if i == 1 and trial % 5 == 0 else D * v
        moved = np.linalg.norm(_released_vector(rows, components)
                               - _released_vector(other, components))
        worst = max(worst, moved)
    assert worst <= math.sqrt(2.0) * D**2 * (1 + 1e-9)
    assert worst > 1.3 * D**2  # the search came near the bound (√2 ≈ 1.41)


def test_residual_bound_covers_with_noise():
    """Released with noise of std τ (as the ``variance`` part does), the bound covers the
    truth in at least 95 % of draws, and is informative."""
    rng = np.random.default_rng(6)
    p, k, tau = 30, 2, 0.05
    G, U = _spiked_gram(rng, p, (10.0, 7.0), 1.0)
    components = _tilted(U, k, 0.05)
    true = subspace_distance(components.T, U[:, :k])
    matrix, total, residual = residual_moments(G, components)
    iu = np.triu_indices(k)
    exact = np.concatenate([matrix[iu], [total], residual])
    bars = []
    for _ in range(400):
        noisy = exact + tau * rng.standard_normal(exact.size)
        m = np.zeros((k, k))
        m[iu] = noisy[:len(iu[0])]
        m = m + np.triu(m, 1).T
        bars.append(component_error_bound(m, noisy[len(iu[0])], tau, p,
                                          residual=(noisy[-2], noisy[-1])))
    bars = np.array(bars)
    assert np.mean(bars >= true) >= 0.95
    assert np.median(bars) < 1.75 * true  # 1.64; 1.81 with two-sided margins


def test_an_upper_bound_below_zero_gives_the_cap():
    """ρ, ω and the energy outside Q are ≥ 0: a draw that puts one's upper bound below 0
    shows the noise fell in the α event, so the bar is the cap √(2k), not 0."""
    matrix, tau, cap = np.diag([10.0, 8.0]), 0.1, 2.0
    assert component_error_bound(matrix, 18.0 - 5.0, tau, 30) == cap
    assert component_error_bound(matrix, 18.0 + 5.0, tau, 30, residual=(-5.0, 1.0)) == cap
    assert component_error_bound(matrix, 18.0 + 5.0, tau, 30, residual=(0.0, -5.0)) == cap
    assert component_error_bound(matrix, 18.0 + 5.0, tau, 30, residual=(0.0, 1.0)) < 0.1


@pytest.mark.parametrize("k", [1, 2, 4])
def test_the_lowest_eigenvalue_margin_holds_at_its_level(k):
    """λ_min(M + E) ≤ uᵀ(M + E)u = λ_min(M) + uᵀEu, u M's lowest eigenvector (fixed before
    the noise): a Gaussian of variance τ²(2 − Σuᵢ⁴) ≤ τ²(2 − 1/k). The bar's one-sided margin
    zτ√(2 − 1/k) is exceeded at most α/4 of the time, and about that often where u is spread
    evenly over the coordinates (the variance's maximum), so it is not looser than needed."""
    rng = np.random.default_rng(7)
    alpha, draws = 0.05, 40_000
    z = float(scipy.stats.norm.isf(alpha / 4))
    H = np.linalg.qr(rng.standard_normal((k, k)))[0] if k > 1 else np.ones((1, 1))
    if k > 1:  # a rotation whose first column is the even vector 1/√k
        even = np.ones(k) / math.sqrt(k)
        H = np.linalg.qr(np.column_stack([even, H[:, 1:]]))[0]
    M = H @ np.diag(1.0 + 50.0 * np.arange(k)) @ H.T
    E = np.triu(rng.standard_normal((draws, k, k)))
    E = E + np.triu(E, 1).transpose(0, 2, 1)
    lowest = np.linalg.eigvalsh(M + E)[:, 0]
    rate = float(np.mean(lowest - 1.0 > z * math.sqrt(2.0 - 1.0 / k)))
    slack = 4.0 * math.sqrt(alpha / 4 / draws)
    assert rate <= alpha / 4 + slack
    assert rate >= alpha / 4 - slack


@pytest.mark.parametrize("cls", [NoisyPowerPCA, BinghamPCA])
def test_a_basis_bar_covers_the_rotation_clipping_caused(cls):
    """A bulk in the plane of features 0–1 and 5 % of rows far out along feature 2 (the raw
    table's top 2 contain feature 2; clipping at the median removes it). The "variance" part
    reads the rows clipped at the robust maximum, so its bar covers the distance to
    scikit-learn's PCA of the raw table wherever a lower bound was chosen."""
    rng = np.random.default_rng(11)
    n = 20_000
    X = rng.standard_normal((n, 6)) * np.array([3.0, 2.0, 0.3, 0.3, 0.3, 0.3])
    far = rng.random(n) < 0.05
    X[far, 2] += rng.exponential(15.0, far.sum())
    ref = PCA(2).fit(X).components_
    below = 0
    for seed in range(3):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            est = cls(2, random_state=seed, ledger=PrivacyLedger()).fit(X)
        distance = subspace_distance(est.components_.T, ref.T)
        assert distance <= est.expected_error_
        variance = next(s for s in est.privacy_.spends if s.mechanism.startswith("variance"))
        below += float(variance.mechanism.rsplit("D = ", 1)[1]) > est.data_norm_
    assert below >= 1
