"""Tests of the Fantope projection and of the FPS ADMM solver."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.linalg
from threadpoolctl import threadpool_limits

from privpca.solvers import (
    ADMMIterationInfo,
    ADMMResult,
    FantopeState,
    fantope_admm,
    fantope_projection,
    fantope_threshold,
)


# ----------------------------------------------------------------------------------------
# Helpers
# ----------------------------------------------------------------------------------------
@pytest.fixture(autouse=True)
def _single_blas_thread():
    """Small matrices only: one BLAS thread avoids pathological slowdowns of multithreaded
    OpenBLAS (many small calls) when the cores are shared with other processes."""
    with threadpool_limits(limits=1, user_api="blas"):
        yield


def _sym(rng: np.random.Generator, p: int, scale: float = 1.0) -> np.ndarray:
    G = rng.standard_normal((p, p))
    return scale * (G + G.T) / np.sqrt(2 * p)


def _reference_projection(A: np.ndarray, k: int) -> np.ndarray:
    """Brute force: full eigendecomposition and bisection for theta."""
    w, V = scipy.linalg.eigh(0.5 * (A + A.T))
    lo, hi = w.min() - 1.0, w.max()
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if np.clip(w - mid, 0.0, 1.0).sum() > k:
            lo = mid
        else:
            hi = mid
    d = np.clip(w - 0.5 * (lo + hi), 0.0, 1.0)
    return (V * d) @ V.T


def _random_fantope_member(rng: np.random.Generator, p: int, k: int) -> np.ndarray:
    Q = np.linalg.qr(rng.standard_normal((p, p)))[0]
    # Eigenvalues in [0, 1] with sum k: project a random vector onto the capped simplex.
    d = rng.uniform(0.0, 1.0, p)
    theta = fantope_threshold(d, k)
    d = np.clip(d - theta, 0.0, 1.0)
    return (Q * d) @ Q.T


def _spiked(
    rng: np.random.Generator, p: int, k: int, gaps: np.ndarray, noise: float
) -> tuple[np.ndarray, np.ndarray]:
    """Symmetric matrix with k well separated top eigenvalues; returns (A, top vectors)."""
    Q = np.linalg.qr(rng.standard_normal((p, k)))[0]
    A = (Q * gaps) @ Q.T + _sym(rng, p, noise)
    V = np.linalg.eigh(A)[1]
    return A, V[:, -k:]


def _assert_in_fantope(P: np.ndarray, k: int, atol: float = 1e-10) -> None:
    assert np.allclose(P, P.T, atol=atol)
    w = np.linalg.eigvalsh(0.5 * (P + P.T))
    assert w.min() >= -atol
    assert w.max() <= 1.0 + atol
    assert np.trace(P) == pytest.approx(k, abs=max(1e-9, atol))


# ----------------------------------------------------------------------------------------
# fantope_threshold
# ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("k", [1, 3, 7])
def test_threshold_solves_equation(seed: int, k: int) -> None:
    rng = np.random.default_rng(seed)
    g = rng.standard_normal(20) * rng.choice([0.1, 1.0, 10.0])
    theta = fantope_threshold(g, k)
    assert np.clip(g - theta, 0.0, 1.0).sum() == pytest.approx(k, abs=1e-12)
    # Order does not matter.
    assert fantope_threshold(g[::-1], k) == pytest.approx(theta, abs=1e-14)


def test_threshold_ties_and_interval() -> None:
    # Four tied eigenvalues sharing weight: 4 * (1 - theta) = 2.
    assert fantope_threshold(np.array([1.0, 1.0, 1.0, 1.0, -5.0]), 2) == pytest.approx(0.5)
    # Gap >= 1 between g_k and g_{k+1}: solutions form [g_{k+1}, g_k - 1]; the largest.
    g = np.array([5.0, 4.0, 0.5, 0.0])
    theta = fantope_threshold(g, 2)
    assert theta == pytest.approx(3.0)
    assert np.clip(g - theta, 0.0, 1.0).sum() == pytest.approx(2.0)
    # Boundary case g_k - 1 == g_{k+1}.
    assert fantope_threshold(np.array([3.0, 2.0, 1.0, 0.0]), 2) == pytest.approx(1.0)
    # k == n: every eigenvalue gets weight 1.
    theta = fantope_threshold(np.array([0.3, -2.0, 1.0]), 3)
    assert theta <= -3.0


def test_threshold_many_partial_weights_and_large_values() -> None:
    rng = np.random.default_rng(3)
    g = 1e6 + 1e-3 * rng.standard_normal(1000)  # all within 1: every weight fractional
    theta = fantope_threshold(g, 5)
    assert np.clip(g - theta, 0.0, 1.0).sum() == pytest.approx(5.0, abs=1e-6)
    assert np.count_nonzero(g > theta) > 100


def test_threshold_invalid() -> None:
    with pytest.raises(ValueError, match="non-empty one-dimensional"):
        fantope_threshold(np.array([]), 1)
    with pytest.raises(ValueError, match="1 <= k"):
        fantope_threshold(np.array([1.0, 2.0]), 3)
    with pytest.raises(ValueError, match="integer"):
        fantope_threshold(np.array([1.0, 2.0]), 1.5)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="finite"):
        fantope_threshold(np.array([1.0, np.nan]), 1)


# ----------------------------------------------------------------------------------------
# fantope_projection
# ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("scale", [0.05, 1.0, 30.0])
def test_projection_in_fantope_and_matches_reference(seed: int, scale: float) -> None:
    rng = np.random.default_rng(seed)
    p, k = 40, 3
    A = _sym(rng, p, scale)
    P = fantope_projection(A, k)
    _assert_in_fantope(P, k)
    np.testing.assert_allclose(P, _reference_projection(A, k), atol=1e-10)


def test_projection_many_partial_contributions() -> None:
    rng = np.random.default_rng(1)
    p, k = 60, 2
    A = _sym(rng, p, 0.01)  # spectrum narrower than 1: many fractional weights
    state = FantopeState()
    P = fantope_projection(A, k, eig_state=state)
    assert state.last_n_contrib > 2 * k
    w = np.linalg.eigvalsh(P)
    assert np.count_nonzero((w > 1e-9) & (w < 1 - 1e-9)) > 2 * k
    _assert_in_fantope(P, k)
    np.testing.assert_allclose(P, _reference_projection(A, k), atol=1e-10)


def test_projection_ties_and_tight_gaps() -> None:
    rng = np.random.default_rng(2)
    p, k = 30, 4
    Q = np.linalg.qr(rng.standard_normal((p, p)))[0]
    w = np.concatenate(
        ([3.0, 2.0, 2.0, 2.0, 2.0, 2.0], 1.0 + 1e-12 * np.arange(6), np.linspace(-1, 0.5, p - 12))
    )
    A = (Q * w) @ Q.T
    A = 0.5 * (A + A.T)
    P = fantope_projection(A, k)
    _assert_in_fantope(P, k)
    np.testing.assert_allclose(P, _reference_projection(A, k), atol=1e-9)
    # The tied eigenspace gets a common weight: P commutes with A.
    np.testing.assert_allclose(P @ A, A @ P, atol=1e-9)


def test_projection_of_nonsymmetric_input_uses_symmetric_part() -> None:
    rng = np.random.default_rng(4)
    A = rng.standard_normal((25, 25))
    P = fantope_projection(A, 2)
    np.testing.assert_allclose(P, fantope_projection(0.5 * (A + A.T), 2), atol=1e-12)
    _assert_in_fantope(P, 2)


@pytest.mark.parametrize("seed", range(3))
def test_projection_idempotent_on_fantope(seed: int) -> None:
    rng = np.random.default_rng(seed)
    Z = _random_fantope_member(rng, 30, 5)
    np.testing.assert_allclose(fantope_projection(Z, 5), Z, atol=1e-10)
    P = fantope_projection(_sym(rng, 30, 3.0), 5)
    np.testing.assert_allclose(fantope_projection(P, 5), P, atol=1e-10)


def test_projection_is_nearest_point() -> None:
    rng = np.random.default_rng(5)
    p, k = 20, 3
    for _ in range(5):
        A = _sym(rng, p, 4.0)
        P = fantope_projection(A, k)
        dist = np.linalg.norm(A - P)
        for _ in range(20):
            Z = _random_fantope_member(rng, p, k)
            assert dist <= np.linalg.norm(A - Z) + 1e-12
        # Variational inequality: <A - P, Z - P> <= 0 for every Z in the Fantope.
        for _ in range(20):
            Z = _random_fantope_member(rng, p, k)
            assert np.vdot(A - P, Z - P) <= 1e-10


def test_projection_k_equals_p_and_does_not_modify_input() -> None:
    rng = np.random.default_rng(6)
    A = _sym(rng, 10)
    A0 = A.copy()
    np.testing.assert_allclose(fantope_projection(A, 10), np.eye(10))
    fantope_projection(A, 3)
    fantope_projection(A, 3, method="partial")
    np.testing.assert_array_equal(A, A0)


@pytest.mark.parametrize("p", [400, 600])
def test_partial_path_matches_full_path(p: int) -> None:
    rng = np.random.default_rng(p)
    k = 5
    gaps = np.array([6.0, 5.0, 4.5, 4.0, 3.0])
    A, _ = _spiked(rng, p, k, gaps, noise=1.0)
    state = FantopeState(partial_budget=4.0)  # a cold start at small p needs > 0.25 p
    P_partial = fantope_projection(A, k, eig_state=state, method="partial")
    assert state.last_method == "partial"
    assert state.last_n_eig < p // 3
    full_state = FantopeState()
    P_full = fantope_projection(A, k, eig_state=full_state, method="full")
    assert full_state.last_method == "full"
    np.testing.assert_allclose(P_partial, P_full, atol=1e-8)
    assert state.last_theta == pytest.approx(full_state.last_theta, abs=1e-9)
    _assert_in_fantope(P_partial, k, atol=1e-9)


def test_partial_path_with_partial_weights_and_warm_start() -> None:
    """Fractional weights straddling theta, then a perturbed matrix warm-started."""
    rng = np.random.default_rng(11)
    p, k = 500, 3
    gaps = np.array([4.0, 3.6, 3.5, 3.45, 3.3, 3.2])  # top six all contribute partially
    A, _ = _spiked(rng, p, 6, gaps, noise=0.5)
    state = FantopeState(partial_budget=4.0)
    P = fantope_projection(A, k, eig_state=state, method="partial")
    assert state.last_method == "partial"
    assert state.last_n_contrib > k
    np.testing.assert_allclose(P, _reference_projection(A, k), atol=1e-8)
    # A slightly perturbed matrix: the warm start makes this cheap.
    cols_cold = state.last_matvec_cols
    A2 = A + _sym(rng, p, 1e-3)
    P2 = fantope_projection(A2, k, eig_state=state, method="partial")
    assert state.last_method == "partial"
    assert state.last_matvec_cols <= cols_cold
    np.testing.assert_allclose(P2, _reference_projection(A2, k), atol=1e-8)


def test_partial_path_falls_back_when_spectrum_is_flat() -> None:
    """A narrow pure-noise spectrum: more than p / 3 eigenvalues contribute."""
    rng = np.random.default_rng(12)
    p, k = 400, 5
    A = _sym(rng, p, 0.05)
    state = FantopeState()
    P = fantope_projection(A, k, eig_state=state, method="partial")
    assert state.last_method == "full"
    assert state.n_failed == 1
    assert state.last_n_contrib > p // 3
    np.testing.assert_allclose(P, _reference_projection(A, k), atol=1e-10)
    # In "auto" mode the recorded spectrum predicts failure: no second attempt.
    assert not state.predicted_ok
    fantope_projection(A, k, eig_state=state, method="auto")
    assert state.n_failed == 1
    assert state.last_matvec_cols == 0


def test_partial_path_gives_up_within_budget() -> None:
    """Eigenvalues dense just below theta: certification would be too slow."""
    rng = np.random.default_rng(13)
    p, k = 400, 5
    A = _sym(rng, p, 0.2)
    state = FantopeState()
    P = fantope_projection(A, k, eig_state=state, method="partial")
    assert state.last_method == "full"
    assert state.n_failed == 1
    assert 0 < state.last_matvec_cols <= max(p // 4, 2 * 7 * (2 * k + 5))
    np.testing.assert_allclose(P, _reference_projection(A, k), atol=1e-10)


def test_partial_path_abandons_early_when_convergence_is_out_of_reach() -> None:
    """The Ritz values of the first cycles predict a convergence beyond the budget: the
    attempt stops there (it used to spend the whole budget, 1 590 of 1 600 columns here)
    and the LAPACK path gives the exact projection."""
    rng = np.random.default_rng(13)
    p, k = 400, 5
    A = _sym(rng, p, 0.2)
    state = FantopeState(partial_budget=4.0)
    P = fantope_projection(A, k, eig_state=state, method="partial")
    assert state.last_method == "full" and state.n_failed == 1
    assert 0 < state.last_matvec_cols <= 4 * p // 4
    np.testing.assert_allclose(P, _reference_projection(A, k), atol=1e-10)


def test_subset_path_matches_reference_and_certifies() -> None:
    rng = np.random.default_rng(14)
    p, k = 400, 5
    A = _sym(rng, p, 0.2)  # about 70 contributing eigenvalues
    ref = _reference_projection(A, k)
    # Cold start: m = 4k + 10 = 30 top pairs cannot certify (g_m > theta): full fallback.
    cold = FantopeState()
    P = fantope_projection(A, k, eig_state=cold, method="subset")
    assert cold.n_subset_failed == 1
    assert cold.last_method == "full"
    np.testing.assert_allclose(P, ref, atol=1e-10)
    # Knowing the previous count, m = 2 n_contrib + 10 pairs suffice.
    P = fantope_projection(A + _sym(rng, p, 1e-4), k, eig_state=cold, method="subset")
    assert cold.last_method == "subset"
    assert k < cold.last_n_contrib < cold.last_n_eig < p
    A2 = A + _sym(rng, p, 1e-3)
    P2 = fantope_projection(A2, k, eig_state=cold, method="subset")
    assert cold.last_method == "subset"
    np.testing.assert_allclose(P2, _reference_projection(A2, k), atol=1e-10)
    _assert_in_fantope(P2, k)


def test_auto_policy_uses_cheapest_certified_path() -> None:
    rng = np.random.default_rng(15)
    p, k = 600, 4
    A, _ = _spiked(rng, p, k, np.array([9.0, 8.0, 7.0, 6.0]), noise=1.0)
    state = FantopeState(partial_budget=1.0)  # the default budget only pays at larger p
    fantope_projection(A, k, eig_state=state, method="full")
    assert state.predicted_ok  # separated top eigenvalues: Krylov predicted to pay off
    A2 = A + _sym(rng, p, 1e-3)
    P2 = fantope_projection(A2, k, eig_state=state)
    assert state.last_method == "partial"
    np.testing.assert_allclose(P2, _reference_projection(A2, k), atol=1e-9)
    # A flat spectrum with ~ p/10 contributing pairs: Krylov predicted to fail, subset used.
    B = _sym(rng, p, 0.3)
    fantope_projection(B, k, eig_state=state, method="full")
    n_c = state.last_n_contrib
    assert 2 * n_c + 10 <= 0.3 * p
    assert not state.predicted_ok
    B2 = B + _sym(rng, p, 1e-4)
    P = fantope_projection(B2, k, eig_state=state)
    assert state.last_method == "subset"
    assert state.last_matvec_cols == 0
    np.testing.assert_allclose(P, _reference_projection(B2, k), atol=1e-10)


def test_projection_invalid_inputs() -> None:
    with pytest.raises(ValueError, match="square"):
        fantope_projection(np.ones((3, 4)), 1)
    with pytest.raises(ValueError, match="1 <= k"):
        fantope_projection(np.eye(3), 0)
    with pytest.raises(ValueError, match="1 <= k"):
        fantope_projection(np.eye(3), 4)
    with pytest.raises(ValueError, match="finite"):
        fantope_projection(np.full((3, 3), np.inf), 1)
    with pytest.raises(ValueError, match="method"):
        fantope_projection(np.eye(3), 1, method="lanczos")  # type: ignore[arg-type]


# ----------------------------------------------------------------------------------------
# fantope_admm
# ----------------------------------------------------------------------------------------
def _objective(S: np.ndarray, X: np.ndarray, lam: float) -> float:
    return float(np.vdot(S, X) - lam * np.abs(X).sum())


def _row_sparse_covariance(
    rng: np.random.Generator, p: int, s: int, k: int, n: int
) -> tuple[np.ndarray, np.ndarray]:
    support = np.sort(rng.choice(p, s, replace=False))
    V = np.zeros((p, k))
    V[support] = np.linalg.qr(rng.standard_normal((s, k)))[0]
    ell = np.linspace(8.0, 5.0, k)
    X = rng.standard_normal((n, k)) * np.sqrt(ell) @ V.T + rng.standard_normal((n, p))
    return X.T @ X / n, support


def test_admm_lambda_zero_recovers_top_eigenspace() -> None:
    rng = np.random.default_rng(0)
    p, k = 40, 3
    S, V = _spiked(rng, p, k, np.array([10.0, 8.0, 6.0]), noise=1.0)
    S0 = S.copy()
    res = fantope_admm(S, k, 0.0, tol=1e-7, max_iter=500)
    assert isinstance(res, ADMMResult)
    assert res.converged
    np.testing.assert_array_equal(S, S0)
    np.testing.assert_allclose(res.solution, V @ V.T, atol=1e-5)
    assert res.n_iter == len(res.primal_history) == len(res.dual_history)
    assert res.primal_residual < np.sqrt(k) * 1e-7
    assert res.dual_residual < np.sqrt(k) * 1e-7


def test_admm_sparse_recovers_support_and_is_optimal() -> None:
    rng = np.random.default_rng(1)
    p, s, k, n = 60, 6, 2, 2000
    S, support = _row_sparse_covariance(rng, p, s, k, n)
    S0 = S.copy()
    lam = 0.25
    res = fantope_admm(S, k, lam, tol=1e-6, max_iter=1000)
    np.testing.assert_array_equal(S, S0)
    assert res.converged
    Y = res.solution
    np.testing.assert_array_equal(Y, Y.T)
    off = np.setdiff1d(np.arange(p), support)
    assert np.all(Y[off] == 0.0)
    assert np.all(Y[:, off] == 0.0)
    assert np.abs(Y[np.ix_(support, support)]).sum() > 1.0
    # Nearly feasible, and at least as good as the oracle projector of the true subspace
    # and as the projector onto the top-k eigenvectors of S.
    _assert_in_fantope(fantope_projection(Y, k), k)
    assert np.linalg.norm(fantope_projection(Y, k) - Y) < 1e-4
    U = np.linalg.eigh(S)[1]
    Pi_top = U[:, -k:] @ U[:, -k:].T
    sub = S[np.ix_(support, support)]
    Us = np.linalg.eigh(sub)[1]
    Pi_oracle = np.zeros((p, p))
    Pi_oracle[np.ix_(support, support)] = Us[:, -k:] @ Us[:, -k:].T
    f_sol = _objective(S, Y, lam)
    assert f_sol >= _objective(S, Pi_top, lam) - 1e-3
    assert f_sol >= _objective(S, Pi_oracle, lam) - 1e-3
    # ... and no Fantope member nearby does better (local optimality check).
    X = fantope_projection(Y, k)
    for _ in range(20):
        Z = _random_fantope_member(rng, p, k)
        for t in (1e-3, 1e-2, 1e-1):
            assert _objective(S, (1 - t) * X + t * Z, lam) <= f_sol + 1e-3


def test_admm_partial_and_full_paths_agree() -> None:
    rng = np.random.default_rng(2)
    p, s, k, n = 400, 10, 2, 4000
    S, support = _row_sparse_covariance(rng, p, s, k, n)
    lam = 0.2
    full = fantope_admm(S, k, lam, max_iter=100, eig_method="full")
    part = fantope_admm(S, k, lam, max_iter=100, eig_method="partial")
    assert full.converged
    assert part.converged
    assert set(full.eig_method_history) == {"full"}
    assert "partial" in part.eig_method_history
    assert part.n_iter == full.n_iter
    np.testing.assert_allclose(part.solution, full.solution, atol=1e-7)
    off = np.setdiff1d(np.arange(p), support)
    assert np.abs(part.solution[off]).max() == 0.0


def test_admm_callback_and_history() -> None:
    rng = np.random.default_rng(3)
    S, _ = _spiked(rng, 30, 2, np.array([5.0, 4.0]), noise=1.0)
    seen: list[ADMMIterationInfo] = []

    def cb(info: ADMMIterationInfo) -> bool:
        seen.append(info)
        return info.iteration >= 3

    res = fantope_admm(S, 2, 0.01, tol=1e-12, callback=cb)
    assert res.stopped_by_callback
    assert not res.converged
    assert res.n_iter == 3 == len(seen)
    assert [i.iteration for i in seen] == [1, 2, 3]
    assert res.rho_history[0] == pytest.approx(np.abs(S).max())
    assert all(m == "full" for m in res.eig_method_history)
    assert len(res.seconds_history) == 3


def test_admm_not_converged_is_reported() -> None:
    rng = np.random.default_rng(4)
    S = _sym(rng, 30)
    res = fantope_admm(S, 3, 0.1, tol=1e-12, max_iter=2)
    assert res.n_iter == 2
    assert not res.converged
    assert res.rho == res.rho_history[-1]


def test_admm_nearly_symmetric_input_is_symmetrised_not_modified() -> None:
    rng = np.random.default_rng(5)
    S, _ = _spiked(rng, 30, 2, np.array([5.0, 4.0]), noise=1.0)
    S_sym = 0.5 * (S + S.T)
    S_pert = S_sym + 1e-12 * np.triu(np.ones_like(S), 1)  # asymmetric within tolerance
    S0 = S_pert.copy()
    a = fantope_admm(S_pert, 2, 0.05, tol=1e-8, max_iter=300)
    b = fantope_admm(S_sym, 2, 0.05, tol=1e-8, max_iter=300)
    np.testing.assert_array_equal(S_pert, S0)
    np.testing.assert_allclose(a.solution, b.solution, atol=1e-8)
    np.testing.assert_array_equal(a.solution, a.solution.T)


def test_admm_zero_matrix() -> None:
    res = fantope_admm(np.zeros((5, 5)), 2, 0.0, max_iter=50)
    assert res.rho_history[0] == 1.0
    assert np.all(np.isfinite(res.solution))


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"S": np.ones((3, 4))}, "square"),
        ({"S": np.ones(3)}, "square"),
        ({"S": np.array([[1.0, 2.0], [0.0, 1.0]])}, "symmetric"),
        ({"S": np.array([[1.0, np.nan], [np.nan, 1.0]])}, "finite"),
        ({"k": 0}, "1 <= k < p"),
        ({"k": 4}, "1 <= k < p"),
        ({"k": 2.0}, "integer"),
        ({"lam": -0.1}, "lam"),
        ({"lam": np.nan}, "lam"),
        ({"tol": 0.0}, "tol"),
        ({"max_iter": 0}, "max_iter"),
        ({"rho": -1.0}, "rho"),
        ({"eig_method": "dense"}, "eig_method"),
        ({"max_eig": 1}, "max_eig"),
        ({"max_eig": "many"}, "max_eig"),
        ({"max_eig": 2.5}, "max_eig"),
        ({"projection_dtype": "float16"}, "projection_dtype"),
    ],
)
def test_admm_invalid_inputs(kwargs: dict[str, object], match: str) -> None:
    args: dict[str, object] = {"S": np.eye(4), "k": 1, "lam": 0.1}
    args.update(kwargs)
    S = args.pop("S")
    k = args.pop("k")
    lam = args.pop("lam")
    with pytest.raises(ValueError, match=match):
        fantope_admm(S, k, lam, **args)  # type: ignore[arg-type]


# ----------------------------------------------------------------------------------------
# float32 LAPACK projections
# ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("method", ["full", "subset"])
def test_float32_projection_is_the_projection_up_to_float32_rounding(method: str) -> None:
    # A flat spectrum with ~p/10 contributing pairs (the local-DP regime): eigenvectors in
    # the bulk are ill-conditioned, but the projection is a Lipschitz function of A, so
    # float32 rounding moves it by about p 2^-24 ||A|| only.
    rng = np.random.default_rng(31)
    p, k = 400, 5
    A = _sym(rng, p, 0.2)
    ref = _reference_projection(A, k)
    state = FantopeState(lapack_float32=True)
    fantope_projection(A, k, eig_state=state, method="full")  # sizes the subset request
    P = fantope_projection(A, k, eig_state=state, method=method)
    assert state.last_method == method
    assert P.dtype == np.float64
    err = np.linalg.norm(P - ref)
    assert 1e-12 < err < 1e-4 * np.linalg.norm(ref)  # float32 rounding, not float64's
    _assert_in_fantope(P, k, atol=1e-5)
    # The warm start handed to the float64 Krylov path stays float64.
    assert state.vectors is not None and state.vectors.dtype == np.float64


def test_admm_float32_projections_reach_the_float64_solution() -> None:
    rng = np.random.default_rng(2)
    p, s, k, n = 400, 10, 2, 4000
    S, _ = _row_sparse_covariance(rng, p, s, k, n)
    S = S + _sym(rng, p, 0.05)  # noisy: many fractional eigenvalues, LAPACK paths
    lam = 0.05
    r64 = fantope_admm(S, k, lam, max_iter=30, eig_method="full")
    r32 = fantope_admm(S, k, lam, max_iter=30, eig_method="full", projection_dtype="float32")
    assert r32.n_iter == r64.n_iter
    assert r32.rho_history == r64.rho_history
    scale = np.linalg.norm(r64.solution)
    assert 0.0 < np.linalg.norm(r32.solution - r64.solution) < 1e-4 * scale


# ----------------------------------------------------------------------------------------
# Capped (inexact, error-bounded) projection
# ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("float32", [False, True])
@pytest.mark.parametrize("scale", [1.0, 5.0, 30.0])
def test_capped_projection_error_within_bound(scale: float, float32: bool) -> None:
    # Flat (Wigner) spectra: the exact projection needs more pairs than the cap at small
    # scales (the local-DP regime); the bound must hold from a cold start on.
    rng = np.random.default_rng(int(scale))
    p, k, cap = 320, 5, 40
    A = _sym(rng, p, scale)
    exact = _reference_projection(A, k)
    state = FantopeState(max_eig=cap, capped_float32=float32)
    atol = 1e-5 if float32 else 1e-10
    for _ in range(4):
        P = fantope_projection(A, k, eig_state=state, method="capped")
        assert state.last_method == "capped"
        assert state.last_n_eig == cap
        _assert_in_fantope(P, k, atol=atol)
        err = np.linalg.norm(P - exact)
        assert err <= state.last_error_bound + atol
        assert state.last_error_bound <= np.sqrt(2 * k)


def test_capped_projection_converges_to_exact_when_few_pairs_contribute() -> None:
    rng = np.random.default_rng(7)
    p, k = 400, 3
    A, _ = _spiked(rng, p, k, np.array([10.0, 8.0, 6.0]), noise=1.0)
    exact = _reference_projection(A, k)
    state = FantopeState(max_eig=30, capped_float32=False)
    bounds = []
    for _ in range(14):  # warm starts refine the subspace (about 4x per call here)
        P = fantope_projection(A, k, eig_state=state, method="capped")
        bounds.append(state.last_error_bound)
        assert np.linalg.norm(P - exact) <= state.last_error_bound + 1e-10
    assert bounds[-1] < 1e-6
    np.testing.assert_allclose(P, exact, atol=1e-7)
    assert state.last_tail_estimate < state.last_theta


def test_exact_paths_report_zero_or_tiny_bounds() -> None:
    rng = np.random.default_rng(8)
    A, _ = _spiked(rng, 400, 3, np.array([10.0, 8.0, 6.0]), noise=1.0)
    state = FantopeState()
    fantope_projection(A, 3, eig_state=state, method="full")
    assert state.last_error_bound == 0.0
    fantope_projection(A, 3, eig_state=state, method="partial")
    assert state.last_method == "partial"
    assert state.last_error_bound < 1e-7


def test_admm_capped_matches_exact_on_small_problem() -> None:
    rng = np.random.default_rng(2)
    p, s, k, n = 400, 10, 2, 4000
    S, support = _row_sparse_covariance(rng, p, s, k, n)
    lam = 0.2
    exact = fantope_admm(S, k, lam, max_iter=200, tol=1e-5, max_eig=None)
    capped = fantope_admm(
        S, k, lam, max_iter=200, tol=1e-5, eig_method="capped", max_eig=20,
        capped_float32=False,
    )
    assert exact.max_eig is None and capped.max_eig == 20
    assert set(capped.eig_method_history) == {"capped"}
    assert exact.converged and capped.converged
    assert len(capped.error_bound_history) == capped.n_iter
    assert capped.error_bound_history[-1] < 1e-4
    assert np.linalg.norm(capped.solution - exact.solution) < 1e-3
    off = np.setdiff1d(np.arange(p), support)
    assert np.all(capped.solution[off] == 0.0)


def test_admm_max_eig_auto_is_exact_for_small_p() -> None:
    rng = np.random.default_rng(3)
    S, _ = _row_sparse_covariance(rng, 60, 6, 2, 2000)
    res = fantope_admm(S, 2, 0.25, max_iter=5)
    assert res.max_eig is None
    assert set(res.error_bound_history) == {0.0}
