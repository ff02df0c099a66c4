"""What every path of the Fantope projection shares: the exact threshold and the solver state.

:func:`fantope_threshold` solves for the shift ``theta`` of the projection; :class:`FantopeState`
carries the warm start, the path policy and the diagnostics from one projection to the next, and
the helpers below update it after a projection.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

__all__ = ["FantopeState", "fantope_threshold"]

#: The partial path gives up when it would need more than ``p * MAX_PARTIAL_FRACTION`` pairs.
MAX_PARTIAL_FRACTION = 1.0 / 3.0


def fantope_threshold(eigenvalues: np.ndarray, k: int) -> float:
    """Exact threshold ``theta`` of the Fantope projection.

    Solves ``sum_i clip(eigenvalues[i] - theta, 0, 1) = k``.  The left-hand side is a
    continuous, piecewise linear, non-increasing function of ``theta`` with knots at
    ``g_i`` and ``g_i - 1``; the root is found exactly by sorting the knots, evaluating the
    function at all of them with prefix sums (``O(n log n)``), and solving the linear
    equation on the bracketing segment.  When the solution set is an interval (which
    happens when ``g_(k) - g_(k+1) >= 1`` for the eigenvalues sorted in decreasing order),
    the largest solution ``g_(k) - 1`` is returned; every solution gives the same
    projection.

    Parameters
    ----------
    eigenvalues : ndarray of shape (n,)
        Eigenvalues, in any order.
    k : int
        Target trace, ``1 <= k <= n``.

    Returns
    -------
    float
        The threshold ``theta``.

    Raises
    ------
    ValueError
        If ``eigenvalues`` is empty, not one-dimensional or not finite, or if ``k`` is
        not an integer in ``[1, n]``.
    """
    g = np.asarray(eigenvalues, dtype=np.float64)
    if g.ndim != 1 or g.size == 0:
        raise ValueError("eigenvalues must be a non-empty one-dimensional array")
    if not np.all(np.isfinite(g)):
        raise ValueError("eigenvalues must be finite")
    n = g.size
    k = _check_int(k, "k")
    if not 1 <= k <= n:
        raise ValueError(f"k must satisfy 1 <= k <= len(eigenvalues) = {n}, got {k}")
    g = np.sort(g)  # ascending
    if k == n:
        return float(g[0] - 1.0)
    # Work relative to the largest eigenvalue and with suffix sums (sums over the top of
    # the spectrum only), which limits cancellation when |g| is large.
    top = float(g[-1])
    g = g - top
    suf = np.concatenate((np.cumsum(g[::-1])[::-1], [0.0]))  # suf[i] = sum(g[i:])
    knots = np.unique(np.concatenate((g - 1.0, g)))  # ascending

    def f_at(t: np.ndarray) -> np.ndarray:
        lo = np.searchsorted(g, t, side="right")  # g[lo:] > t
        hi = np.searchsorted(g, t + 1.0, side="left")  # g[hi:] >= t + 1 (full weight)
        hi = np.maximum(hi, lo)
        return (n - hi) + (suf[lo] - suf[hi]) - (hi - lo) * t

    f = f_at(knots)  # non-increasing, f[0] = n > k, f[-1] = 0 < k
    j = int(np.flatnonzero(f >= k)[-1])  # last knot with f >= k; j < len(knots) - 1
    t0, t1 = float(knots[j]), float(knots[j + 1])
    # f is linear on [t0, t1]: use the sets of the segment's midpoint for an exact solve.
    mid = 0.5 * (t0 + t1)
    lo = int(np.searchsorted(g, mid, side="right"))
    hi = max(int(np.searchsorted(g, mid + 1.0, side="left")), lo)
    n_part = hi - lo
    if n_part == 0:
        # f is constant on the segment, hence equal to k up to rounding (this happens when
        # the solutions form an interval): return its right end, the largest solution.
        return t1 + top
    theta = ((n - hi) + (suf[lo] - suf[hi]) - k) / n_part
    theta = min(max(theta, t0), t1)
    # One Newton correction with a direct evaluation of the residual.
    resid = float(np.clip(g[lo:hi] - theta, 0.0, 1.0).sum()) + (n - hi) - k
    theta = min(max(theta + resid / n_part, t0), t1)
    return float(theta + top)


@dataclass
class FantopeState:
    """Warm-start state, policy and diagnostics for repeated Fantope projections.

    Pass the same instance to successive calls of :func:`fantope_projection` on slowly
    changing matrices (as in ADMM): the eigenvectors of the previous call warm-start the
    partial eigensolver, the previous number of contributing eigenpairs sizes its block,
    and the previous spectrum predicts whether a partial attempt can pay off.

    Parameters
    ----------
    rng : numpy.random.Generator or None
        Source of the random vectors that pad a warm start (or form a cold start).
        ``None`` uses ``numpy.random.default_rng(0)`` so that results are reproducible.
    eig_tol : float
        Relative residual tolerance of the partial eigensolver: a contributing eigenpair
        is accepted when ``||A u - g u|| <= eig_tol * max(1, max |Ritz value|)``.  The
        projection error is at most ``sqrt(2)`` times the Frobenius norm of these
        residuals, so the default ``1e-10`` gives projections accurate to about ``1e-9``
        relative (see :func:`fantope_projection`).
    partial_budget : float
        Work allowed to one partial attempt, in block matrix-vector product columns, as a
        fraction of ``p`` (at least two Krylov cycles are always allowed).  A full
        eigendecomposition costs roughly ``0.4 p`` to ``1 p`` such columns on two cores.
    max_eig : int or None
        Cap on the number of eigenpairs a projection may compute.  ``None`` (default): exact
        projections only (the paths below may need a full ``O(p^3)`` decomposition).  An
        integer ``m``: the ``O(p^3)`` LAPACK paths are never used; when the certified Krylov
        path cannot serve the projection, the *capped* path computes ``m`` approximate top
        eigenpairs and returns an inexact projection whose error it bounds (see
        :func:`fantope_projection` and ``last_error_bound``).
    capped_float32 : bool
        Run the block products of the capped path in float32 (twice the throughput; the
        conversion error ``2^-24 ||A||_F`` is included in the reported bound).  Meant for
        the local-DP regime, where the privacy noise in ``A`` dwarfs that rounding.
    capped_steps : int
        Block Krylov steps of the capped path per projection (each costs one block product
        of ``m`` columns, plus the one applied to the warm start).
    lapack_float32 : bool
        Run the LAPACK paths (``subset`` and ``full``) in float32: the matrix is rounded to
        float32 (relative error ``2^-24`` per entry), decomposed by ``ssyevr``/``ssyevd``
        and the projection assembled in float32, in about half the time of float64 at
        p = 7128 on two cores.  The result is then the exact projection of a matrix within
        about ``c p 2^-24 ||A||_2`` of ``A`` (LAPACK's backward error; ``c`` a small
        constant): meant for the local-DP regime, where the privacy noise in ``A`` is many
        orders of magnitude larger.  Not reflected in ``last_error_bound``, which counts
        the error of inexact paths only.

    Attributes
    ----------
    vectors : ndarray of shape (p, b) or None
        Top (Ritz or exact) eigenvectors of the previous matrix (warm start).
    n_contrib : int or None
        Number of eigenpairs with ``g_i > theta`` at the previous call.
    predicted_ok : bool
        Whether, judging from the previous spectrum, a partial attempt is expected to
        succeed within the budget (used by ``method="auto"``).
    last_n_eig : int
        Number of eigenpairs the last projection was computed from.
    last_n_contrib : int
        Number of eigenpairs with a non-zero weight in the last projection.
    last_theta : float
        Threshold of the last projection.
    last_matvec_cols : int
        Matrix-vector products (columns of block products) spent by the last call in the
        partial eigensolver, including an abandoned attempt.
    lambda_min : float or None
        Estimate of the smallest eigenvalue of the previous matrix (exact after a full
        decomposition, an upper bound after a Krylov attempt), used by the prediction.
    last_method : str
        ``"partial"``, ``"subset"``, ``"full"`` or ``"capped"``: the path of the last
        projection.
    last_error_bound : float
        Bound on the Frobenius distance between the last returned matrix and the exact
        projection: 0 for the LAPACK paths (up to rounding), ``sqrt(2)`` times the
        Frobenius norm of the contributing Ritz residuals for the Krylov path, and the
        bound described in :func:`fantope_projection` for the capped path.
    last_tail_estimate : float
        Capped path: estimate of the largest eigenvalue left out (NaN on other paths).
    n_failed, n_subset_failed : int
        Krylov attempts and LAPACK subset attempts abandoned for a later path.
    """

    rng: np.random.Generator | None = None
    eig_tol: float = 1e-10
    partial_budget: float = 0.25
    max_eig: int | None = None
    capped_float32: bool = True
    capped_steps: int = 1
    lapack_float32: bool = False
    vectors: np.ndarray | None = field(default=None, repr=False)
    n_contrib: int | None = None
    predicted_ok: bool = True
    last_method: str = ""
    last_n_eig: int = 0
    last_n_contrib: int = 0
    last_theta: float = float("nan")
    last_matvec_cols: int = 0
    lambda_min: float | None = None
    last_error_bound: float = 0.0
    last_tail_estimate: float = float("nan")
    n_failed: int = 0
    n_subset_failed: int = 0

    def _generator(self) -> np.random.Generator:
        if self.rng is None:
            self.rng = np.random.default_rng(0)
        return self.rng


def _finish(
    state: FantopeState,
    path: str,
    w: np.ndarray,
    V: np.ndarray,
    theta: float,
    k: int,
    p: int,
) -> None:
    """Update counters and the warm start after a successful projection."""
    n_contrib = int(np.count_nonzero(w > theta))
    _record(state, path, w.size, n_contrib, theta, state.last_matvec_cols)
    state.n_contrib = n_contrib
    b_next = _initial_block(k, n_contrib)
    if b_next <= int(p * MAX_PARTIAL_FRACTION):
        state.vectors = np.array(V[:, : min(b_next, V.shape[1])], dtype=np.float64, order="F")
    else:
        state.vectors = None


def _record(
    state: FantopeState, path: str, n_eig: int, n_contrib: int, theta: float, cols: int
) -> None:
    state.last_method = path
    state.last_n_eig = int(n_eig)
    state.last_n_contrib = int(n_contrib)
    state.last_theta = float(theta)
    state.last_matvec_cols = int(cols)


def _initial_block(k: int, n_contrib: int | None) -> int:
    """Block size of the partial eigensolver: needed pairs plus a margin."""
    if n_contrib is None:
        return 2 * k + 5
    need = n_contrib + 1
    return max(2 * k + 5, need + max(5, need // 4))


def _check_int(value: object, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int | np.integer):
        raise ValueError(f"{name} must be an integer, got {value!r}")
    return int(value)
