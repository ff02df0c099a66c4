"""The Fantope projection's Krylov paths: top eigenpairs without a full decomposition.

The certified path (:func:`_partial_eig`) runs a warm-started, restarted block Krylov method and
returns its eigenpairs only when they determine the projection exactly (up to a residual
bound); the capped path (:func:`_capped_projection`) computes a fixed number of approximate
pairs and bounds the error of the resulting inexact projection, estimating the largest
uncomputed eigenvalue by a few Lanczos steps.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import scipy.linalg

from privpca.solvers.fantope_state import FantopeState, _finish, _initial_block, fantope_threshold

#: Lanczos steps that estimate the largest eigenvalue left out by the capped projection.
_TAIL_LANCZOS_STEPS = 8


# ----------------------------------------------------------------------------------------
# Partial eigensolver: warm-started, restarted block Krylov (block Lanczos with full
# orthogonalisation and Rayleigh-Ritz), certified by residuals and by g_m <= theta.
# ----------------------------------------------------------------------------------------
def _orthonormalise_against(Wb: np.ndarray, K: np.ndarray | None) -> np.ndarray:
    """Orthonormal basis of ``Wb`` (overwritten) orthogonalised against orthonormal ``K``.

    Block classical Gram-Schmidt applied twice, then Householder QR; when the block was
    (nearly) rank deficient, one more projection and QR keep the new columns orthogonal
    to ``K``.
    """
    norm0 = float(np.max(np.linalg.norm(Wb, axis=0)))
    for _ in range(2):
        if K is not None and K.shape[1] > 0:
            Wb -= K @ (K.T @ Wb)
    Q, R = np.linalg.qr(Wb)
    if K is not None and K.shape[1] > 0:
        if float(np.min(np.abs(np.diag(R)))) < 1e-6 * max(norm0, np.finfo(float).tiny):
            Q -= K @ (K.T @ Q)
            Q = np.linalg.qr(Q)[0]
    return Q


def _krylov_basis(
    Q: np.ndarray, AQ: np.ndarray, steps: int, matmul: Callable[[np.ndarray], np.ndarray]
) -> tuple[np.ndarray, np.ndarray]:
    """The block Krylov basis ``K = [Q, Q₁, ..., Q_steps]`` (orthonormal, each block
    orthogonalised against the ones before) and ``AK``, from ``Q`` (orthonormal) and
    ``AQ = matmul(Q)``."""
    blocks, ablocks = [Q], [AQ]
    for _ in range(steps):
        K = np.concatenate(blocks, axis=1)
        Qj = _orthonormalise_against(ablocks[-1].copy(), K)
        blocks.append(Qj)
        ablocks.append(matmul(Qj))
    return np.concatenate(blocks, axis=1), np.concatenate(ablocks, axis=1)


def _krylov_depth(b: int, p: int) -> int:
    """Blocks added per restart cycle: basis of about ``max(3b, min(p/4, 600))`` columns."""
    q = max(1, min(6, max(3 * b, min(p // 4, 600)) // b - 1))
    return min(q, max(1, (p - b) // b))  # the basis cannot exceed p columns


def _budget(state: FantopeState, b: int, p: int) -> int:
    """Matrix-vector columns allowed to one partial attempt."""
    allowed = int(state.partial_budget * p)
    if state.max_eig is not None:
        # The capped path is the fallback: a failing attempt must not cost more than it.
        allowed = min(allowed, 2 * int(state.max_eig))
    return max(allowed, 2 * (_krylov_depth(b, p) + 1) * b)


def _block_products(delta: float, error: float, tol: float) -> float:
    """Block products a block Krylov method needs to bring a residual from ``error`` down to
    ``tol`` when each reduces it by about ``exp(−2 sqrt(delta))`` (``delta > 0``: the gap
    below the pair over the spread of the rest of the spectrum)."""
    return math.log(error / tol) / (2.0 * math.sqrt(delta))


def _partial_eig(
    A: np.ndarray, k: int, state: FantopeState, b: int, max_m: int
) -> tuple[np.ndarray, np.ndarray, float, np.ndarray, float] | None:
    """Top eigenpairs of ``A`` sufficient for the Fantope projection, or ``None``.

    Returns ``(w, V, theta, V_warm, bound)``: the contributing pairs (``w`` decreasing, all
    ``w > theta``), ``theta``, the top ``b`` Ritz vectors to warm-start the next call, and
    ``sqrt(2)`` times the Frobenius norm of the contributing residuals (the error bound).
    The result is certified as described in :func:`fantope_projection`.  Gives up
    (returns ``None``) when the block would exceed ``max_m`` columns or when the work
    budget is spent.
    """
    p = A.shape[0]
    rng = state._generator()
    budget = _budget(state, b, p)
    cols = 0

    def matmul(X: np.ndarray) -> np.ndarray:
        nonlocal cols
        cols += X.shape[1]
        return A @ X

    # Starting block: warm start padded with random vectors.
    V0 = state.vectors
    if V0 is not None and V0.shape[1] > b:
        V0 = V0[:, :b]
    n_warm = 0 if V0 is None else V0.shape[1]
    start = np.empty((p, b))
    if V0 is not None:
        start[:, :n_warm] = V0
    start[:, n_warm:] = rng.standard_normal((p, b - n_warm))
    V = _orthonormalise_against(start, None)
    AV = matmul(V)
    try:
        while True:
            K, AK = _krylov_basis(V, AV, _krylov_depth(b, p), matmul)
            H = K.T @ AK
            H = 0.5 * (H + H.T)
            ritz, C = scipy.linalg.eigh(H, check_finite=False, driver="evd")
            ritz = ritz[::-1]
            C = C[:, ::-1]
            state.lambda_min = float(ritz[-1])  # an upper bound of the smallest eigenvalue
            tol = state.eig_tol * max(1.0, float(np.max(np.abs(ritz))))
            n_keep = min(b, ritz.size)
            Cb = C[:, :n_keep]
            V = K @ Cb
            AV = AK @ Cb
            res = np.linalg.norm(AV - V * ritz[:n_keep], axis=0)
            theta = fantope_threshold(ritz[:n_keep], k)
            n_c = int(np.count_nonzero(ritz[:n_keep] > theta))  # contributing pairs
            if n_c < n_keep:
                # Accept when the contributing pairs have converged and the first
                # non-contributing Ritz value plus its residual norm (an estimate from
                # above of the largest remaining eigenvalue) does not exceed theta.
                if np.all(res[:n_c] <= tol) and ritz[n_c] + res[n_c] <= theta:
                    bound = math.sqrt(2.0) * float(np.linalg.norm(res[:n_c]))
                    return ritz[:n_c].copy(), V[:, :n_c], theta, V, bound
                if not _may_converge(ritz, res, tol, n_c, n_keep, cols, budget):
                    return None  # give up now rather than after the whole budget
                b_small = _initial_block(k, n_c)
                if 2 * b_small <= b:
                    # Far fewer pairs are needed than the block holds: shrink it.
                    V, AV, b = V[:, :b_small], AV[:, :b_small], b_small
            else:
                # Every computed pair contributes: the block is too small, double it.
                b_new = 2 * b
                if b_new > max_m:
                    return None
                n_take = min(b_new, ritz.size)
                V = K @ C[:, :n_take]
                AV = AK @ C[:, :n_take]
                if n_take < b_new:
                    extra = _orthonormalise_against(rng.standard_normal((p, b_new - n_take)), V)
                    V = np.concatenate((V, extra), axis=1)
                    AV = np.concatenate((AV, matmul(extra)), axis=1)
                b = b_new
            if cols + _krylov_depth(b, p) * b > budget:
                return None
    finally:
        state.last_matvec_cols = cols


def _may_converge(
    ritz: np.ndarray, res: np.ndarray, tol: float, n_c: int, b: int, cols: int, budget: int
) -> bool:
    """Whether the contributing pairs can still converge within the partial budget.

    The estimate of :func:`_predict_partial` (:func:`_block_products`) from the Ritz values
    of this cycle, with ``delta = (r_{n_c} − r_{b+1}) / (r_{b+1} − r_min)``, for the worst
    contributing residual. ``r_min`` (the smallest Ritz value) lies above the smallest
    eigenvalue, which makes ``delta`` and the estimate optimistic: the attempt is abandoned
    only when even that exceeds the budget, and the exact LAPACK path then answers (the same
    projection).
    """
    if ritz.size <= b or n_c == 0:
        return True
    spread = float(ritz[b] - ritz[-1])
    gap = float(ritz[n_c - 1] - ritz[b])
    if spread <= 0.0:
        return True
    if gap <= 0.0:
        return False
    worst = float(np.max(res[:n_c]))
    if worst <= tol:
        return True
    return cols + _block_products(gap / spread, worst, tol) * b <= budget


# ----------------------------------------------------------------------------------------
# Capped projection: m approximate top eigenpairs, inexact result with an error bound.
# ----------------------------------------------------------------------------------------
def _capped_projection(
    A: np.ndarray, k: int, state: FantopeState, m: int, out: np.ndarray
) -> None:
    """Inexact Fantope projection from ``m`` warm-started Ritz pairs; see
    :func:`fantope_projection` for the error bound written to ``state.last_error_bound``."""
    p = A.shape[0]
    rng = state._generator()
    dt = np.float32 if state.capped_float32 else np.float64
    # ||A||_F^2 and tr(A) in float64 (the tail bound needs them); then the working copy.
    fro2 = float(np.vdot(A, A))
    trace = float(np.trace(A))
    Ad = A.astype(dt, copy=dt is not np.float64)
    conv_err = float(np.finfo(np.float32).eps) / 2 * math.sqrt(fro2) if dt is np.float32 else 0.0
    cols = 0

    def matmul(X: np.ndarray) -> np.ndarray:
        nonlocal cols
        cols += X.shape[1]
        return Ad @ X

    start = np.empty((p, m), dtype=dt)
    V0 = state.vectors
    n_warm = 0 if V0 is None else min(m, V0.shape[1])
    if V0 is not None:
        start[:, :n_warm] = V0[:, :n_warm]
    start[:, n_warm:] = rng.standard_normal((p, m - n_warm))
    Q = _orthonormalise_against(start, None)
    steps = max(1, min(int(state.capped_steps), (p - m) // m))
    K, AK = _krylov_basis(Q, matmul(Q), steps, matmul)
    H = np.asarray(K.T @ AK, dtype=np.float64)
    H = 0.5 * (H + H.T)
    ritz, C = scipy.linalg.eigh(H, check_finite=False, driver="evd")
    ritz, C = ritz[::-1], C[:, ::-1]
    Cm = np.ascontiguousarray(C[:, :m], dtype=dt)
    V = K @ Cm
    R = AK @ Cm
    R -= V * ritz[:m].astype(dt)
    res = np.linalg.norm(R, axis=0).astype(np.float64)
    del R, AK
    w = ritz[:m].copy()
    theta = fantope_threshold(w, k)
    n_c = int(np.count_nonzero(w > theta))
    # The bound treats the r = n_c contributing Ritz vectors as the computed subspace
    # (A' = A - R_r V_r^T - V_r R_r^T has them as exact eigenvectors, ||A - A'||_F =
    # sqrt(2) ||R_r||_F); every other direction is "tail", whose largest eigenvalue is
    # estimated by Lanczos on A deflated by V_r, started from the next Ritz vector.
    r = n_c if n_c < m else m
    y = K @ np.asarray(C[:, r], dtype=dt)
    del K
    mu, lanczos_cols = _tail_top_estimate(Ad, V[:, :r], y, _TAIL_LANCZOS_STEPS)
    cols += lanczos_cols
    mu = max(mu, float(ritz[r]))
    res_fro = float(np.linalg.norm(res[:r]))
    wr = w[:r]
    tail = _tail_error_bound(wr, theta, k, mu, p - r, trace - float(wr.sum()),
                             fro2 - float(np.dot(wr, wr)) - 2.0 * res_fro**2)
    state.last_matvec_cols = cols
    _finish(state, "capped", w, V, theta, k, p)
    state.vectors = np.asarray(V, order="F")  # the whole capped block warm-starts the next call
    state.lambda_min = None
    state.last_tail_estimate = mu
    # float32 assembly: |fl(B B^T) - B B^T| <= n_c u |B| |B|^T entrywise, ||B||_F^2 = k.
    round_err = n_c * float(np.finfo(np.float32).eps) / 2 * k if dt is np.float32 else 0.0
    # Both matrices lie in F^k, whose diameter is sqrt(2k) (for k <= p/2).
    state.last_error_bound = min(
        conv_err + round_err + math.sqrt(2.0) * res_fro + tail, math.sqrt(2.0 * k)
    )
    # The certified Krylov path is worth trying again only when few pairs contribute.
    state.predicted_ok = tail == 0.0 and 2 * _initial_block(k, state.n_contrib) <= m
    d = np.minimum(w[:n_c] - theta, 1.0).astype(dt)
    Vs = V[:, :n_c] * np.sqrt(d)
    out[...] = Vs @ Vs.T


def _tail_top_estimate(
    Ad: np.ndarray, V: np.ndarray, y: np.ndarray, steps: int
) -> tuple[float, int]:
    """Estimate from above of the largest eigenvalue of ``A`` on ``V``'s complement.

    ``steps`` Lanczos steps (full reorthogonalisation) on ``(I - VV^T) A (I - VV^T)`` from
    ``y``; returns the largest Ritz value plus its residual norm (an eigenvalue lies within
    the residual of the Ritz value, and the extreme Ritz value converges first), and the
    number of matrix-vector products.
    """
    basis: list[np.ndarray] = []
    alphas: list[float] = []
    betas: list[float] = []
    q = y - V @ (V.T @ y)
    nq = float(np.linalg.norm(q))
    if not nq > 0.0:
        return -math.inf, 0
    q /= nq
    n_mv = 0
    beta = 0.0
    for _ in range(steps):
        basis.append(q)
        z = Ad @ q
        n_mv += 1
        z -= V @ (V.T @ z)
        alphas.append(float(q @ z))
        Qb = np.stack(basis, axis=1)
        for _ in range(2):
            z -= Qb @ (Qb.T @ z)
        beta = float(np.linalg.norm(z))
        if beta <= 1e-12 * max(1.0, abs(alphas[-1])):
            beta = 0.0
            break
        betas.append(beta)
        q = z / beta
    j = len(alphas)
    T = np.diag(alphas) + np.diag(betas[: j - 1], 1) + np.diag(betas[: j - 1], -1)
    t, S = np.linalg.eigh(T)
    return float(t[-1] + beta * abs(S[-1, -1])), n_mv


def _tail_error_bound(
    w: np.ndarray, theta: float, k: int, mu: float, n_tail: int, tail_trace: float,
    tail_fro2: float,
) -> float:
    """Bound on ``||P_m - P(A')||_F`` when the ``n_tail`` uncomputed eigenvalues are ``<= mu``.

    ``A'`` has the computed pairs ``(w, V)`` as exact eigenpairs and ``P_m`` keeps only them
    (``theta`` from ``w``).  The smaller of two bounds:

    * duality: for ``x`` in the Fantope, ``||x - P(a)||^2 <= 2 (s_k(a - x) - <a - x, x>)``
      with ``s_k`` the sum of the ``k`` largest eigenvalues; the tail's are replaced by
      ``mu``;
    * ``P_m`` is the exact projection of ``A'`` with its tail clamped to ``theta``, which
      moves ``A'`` by ``sqrt(sum (c_j - theta)_+^2)``; with ``c_j <= mu``, the tail's trace
      and squared Frobenius norm this is at most ``(mu - theta) sqrt(min_u (N + 2 H1 u +
      H2 u^2))`` over ``0 < u <= 1 / (mu - theta)`` (``H1``, ``H2``: first two moments of
      ``c_j - mu``).
    """
    if mu <= theta:
        return 0.0
    d = np.clip(w - theta, 0.0, 1.0)
    z = w - d
    top = np.sort(np.concatenate((z, np.full(k, mu))))[::-1][:k]
    gap2 = max(0.0, 2.0 * (float(top.sum()) - float(np.dot(z, d))))
    dm = mu - theta
    h1 = tail_trace - n_tail * mu
    h2 = max(tail_fro2 - 2.0 * mu * tail_trace + n_tail * mu * mu, 0.0)
    u = 1.0 / dm if h2 <= 0.0 or h1 >= 0.0 else min(-h1 / h2, 1.0 / dm)
    frob2 = dm * dm * max(0.0, n_tail + 2.0 * h1 * u + h2 * u * u)
    return math.sqrt(min(gap2, frob2))
