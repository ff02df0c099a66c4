"""Fantope projection and the ADMM solver for Fantope projection and selection (FPS).

This module implements the convex relaxation of sparse PCA of Vu, Cho, Lei and Rohe
(2013), "Fantope projection and selection: a near-optimal convex relaxation of sparse
PCA" (NeurIPS), as used by Wang and Xu's locally differentially private sparse PCA:

.. math::

    \\hat X = \\arg\\max_{X \\in \\mathcal F^k} \\langle S, X\\rangle - \\lambda \\|X\\|_{1,1},
    \\qquad \\mathcal F^k = \\{X = X^\\top : 0 \\preceq X \\preceq I,\\ \\operatorname{tr} X = k\\}.

The problem is solved by ADMM (:func:`fantope_admm`), whose expensive step is the
Euclidean projection onto the Fantope (:func:`fantope_projection`).  For a symmetric
``A = sum_i g_i u_i u_i^T`` the projection is ``sum_i clip(g_i - theta, 0, 1) u_i u_i^T``
where ``theta`` solves ``sum_i clip(g_i - theta, 0, 1) = k`` (:func:`fantope_threshold`).

Only the eigenpairs with ``g_i > theta`` enter the projection, so it is computed from the
top ``m`` eigenpairs when possible -- by a warm-started, restarted block Krylov method
(cheap when the contributing eigenvalues stand apart from the rest of the spectrum) or by
LAPACK's ``syevr`` restricted to the top ``m`` pairs -- and accepted only when certified:
the smallest computed eigenvalue satisfies ``g_m <= theta``, so that every uncomputed
eigenvalue, being at most ``g_m``, has weight zero.  Otherwise a full divide-and-conquer
eigendecomposition is used.  :class:`FantopeState` carries the warm start and the policy
state across the ADMM iterations.

Note that in the noise-dominated regime of local-DP sparse PCA the ADMM iterates often
have hundreds or thousands of eigenvalues with fractional weights (the projection is far
from low rank), and then every iteration costs about one full eigendecomposition; there
``projection_dtype="float32"`` (:func:`fantope_admm`) runs those decompositions in float32,
about 1.6 times faster at p = 7128, with rounding far below the privacy noise.

No code from the reference FPS implementation was copied; the algorithm follows its
published description.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
import scipy.linalg

__all__ = [
    "ADMMIterationInfo",
    "ADMMResult",
    "FantopeState",
    "fantope_admm",
    "fantope_projection",
    "fantope_threshold",
]

EigMethod = Literal["auto", "full", "subset", "partial", "capped"]
_METHODS = ("auto", "full", "subset", "partial", "capped")

#: Below this dimension a full eigendecomposition is always used by ``method="auto"``.
SMALL_P = 300
#: The partial path gives up when it would need more than ``p * MAX_PARTIAL_FRACTION`` pairs.
MAX_PARTIAL_FRACTION = 1.0 / 3.0
#: The LAPACK subset path (``syevr`` for the top ``m`` pairs) is used while ``m`` is at most
#: this fraction of ``p``; beyond it the full divide-and-conquer ``syevd`` is faster.
SUBSET_MAX_FRACTION = 0.3
#: ``max_eig="auto"`` in :func:`fantope_admm`: exact projections up to this dimension, the
#: capped (inexact, error-bounded) projection above it.
AUTO_CAP_P = 4000
#: Eigenpairs computed by the capped projection under ``max_eig="auto"``.  At p = 7128 two
#: float32 block products of this width cost about 1.5 s on two (shared) cores.
DEFAULT_MAX_EIG = 256
#: Lanczos steps that estimate the largest eigenvalue left out by the capped projection.
_TAIL_LANCZOS_STEPS = 8
#: Rows per chunk in the element-wise ADMM updates (bounds the size of temporaries).
_CHUNK_BYTES = 4 * 2**20


# ----------------------------------------------------------------------------------------
# Threshold
# ----------------------------------------------------------------------------------------
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


# ----------------------------------------------------------------------------------------
# State of the eigensolver (warm start across ADMM iterations)
# ----------------------------------------------------------------------------------------
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
    n_partial, n_subset, n_full, n_capped : int
        Projections served by each path.
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
    n_partial: int = 0
    n_subset: int = 0
    n_full: int = 0
    n_capped: int = 0
    last_error_bound: float = 0.0
    last_tail_estimate: float = float("nan")
    n_failed: int = 0
    n_subset_failed: int = 0

    def _generator(self) -> np.random.Generator:
        if self.rng is None:
            self.rng = np.random.default_rng(0)
        return self.rng


# ----------------------------------------------------------------------------------------
# Projection
# ----------------------------------------------------------------------------------------
def fantope_projection(
    A: np.ndarray,
    k: int,
    *,
    eig_state: FantopeState | None = None,
    method: EigMethod = "auto",
) -> np.ndarray:
    """Euclidean projection of a symmetric matrix onto the Fantope ``F^k``.

    With ``A = sum_i g_i u_i u_i^T`` the projection is
    ``sum_i clip(g_i - theta, 0, 1) u_i u_i^T`` where ``theta`` solves
    ``sum_i clip(g_i - theta, 0, 1) = k`` (:func:`fantope_threshold`).

    Three paths compute the eigenpairs with ``g_i > theta``; the first two compute only
    the top ``m`` eigenpairs and are accepted only when the smallest computed eigenvalue
    satisfies ``g_m <= theta`` (``theta`` computed from the computed eigenvalues): then every
    uncomputed eigenvalue, being ``<= g_m``, has weight zero and the result is exact.

    * **partial**: a restarted block Krylov method (block Lanczos with full
      orthogonalisation and Rayleigh-Ritz), warm-started from ``eig_state.vectors``, with
      block size ``b`` = previous number of contributing pairs plus a margin (``2k + 5``
      on a cold start), doubled while every computed pair contributes.  Costs a few
      dozen ``p x b`` block products when the contributing eigenvalues are separated from
      the rest of the spectrum.  It is accepted when every contributing Ritz pair has a
      residual below ``eig_state.eig_tol`` (relative) and the first non-contributing Ritz
      value plus its residual norm is ``<= theta``.  The returned matrix is then the exact
      projection of a matrix within ``sqrt(2) * ||residuals||_F`` of ``A``, hence
      (projections being non-expansive) that close to the exact projection.  A work
      budget (``eig_state.partial_budget``) bounds a failing attempt, which also stops as
      soon as each cycle's Ritz values predict convergence beyond that budget (in the
      noise bulk at p = 7 128 this took about 6 s off the first projection, which LAPACK
      answers).
    * **subset**: LAPACK ``syevr`` for the top ``m`` eigenpairs, ``m`` = twice the
      previous number of contributing pairs plus 10 (``4k + 10`` on a cold start).  Still
      an ``O(p^3)`` tridiagonal reduction, but about half the time of a full
      decomposition when ``m << p``.
    * **full**: LAPACK's divide-and-conquer symmetric eigendecomposition (``syevd``).

    Parameters
    ----------
    A : ndarray of shape (p, p)
        Matrix to project; only its symmetric part ``(A + A^T) / 2`` matters (the Fantope
        lies in the symmetric matrices).  Not modified.
    k : int
        Trace of the Fantope, ``1 <= k <= p``.
    eig_state : FantopeState or None
        Warm-start state, updated in place; it also records which path was used
        (``eig_state.last_method``), how many eigenpairs were computed and ``theta``.
        ``None`` uses a fresh state (cold start).
    method : {"auto", "full", "subset", "partial"}
        ``"full"``: always the full decomposition.  ``"subset"``: the LAPACK subset path,
        then full if it cannot certify.  ``"partial"``: always try the Krylov path first,
        whatever ``p`` (giving up when it cannot certify its result within the budget or
        when more than ``p / 3`` pairs would be needed), then as ``"auto"``.  ``"auto"``:
        full decomposition for ``p <= 300``; otherwise the Krylov path when the spectrum
        recorded in ``eig_state`` predicts that it converges within the budget (always on
        a fresh state), else the subset path when ``m <= 0.3 p``, else the full path.
        ``"capped"``: always the capped path.  With ``eig_state.max_eig`` set, ``"auto"``
        and ``"partial"`` use the capped path instead of the LAPACK paths: ``m`` warm-started
        Ritz pairs (one block Krylov step), an inexact projection whose Frobenius distance to
        the exact one is bounded in ``eig_state.last_error_bound`` (residuals of the
        contributing pairs, float32 rounding, and the weight the uncomputed spectrum could
        take, with its top estimated by a few Lanczos steps; at most ``sqrt(2k)``).

    Returns
    -------
    ndarray of shape (p, p)
        The projection (symmetric up to rounding).

    Raises
    ------
    ValueError
        If ``A`` is not a finite square matrix, if ``k`` is out of range or if ``method``
        is unknown.
    """
    A = np.asarray(A, dtype=np.float64)
    if A.ndim != 2 or A.shape[0] != A.shape[1]:
        raise ValueError(f"A must be a square matrix, got shape {A.shape}")
    p = A.shape[0]
    k = _check_int(k, "k")
    if not 1 <= k <= p:
        raise ValueError(f"k must satisfy 1 <= k <= p = {p}, got {k}")
    if method not in _METHODS:
        raise ValueError(f"method must be one of {_METHODS}, got {method!r}")
    if not np.all(np.isfinite(A)):
        raise ValueError("A must be finite")
    state = FantopeState() if eig_state is None else eig_state
    if k == p:
        _record(state, "full", p, p, float(np.min(np.linalg.eigvalsh(A))) - 1.0, 0)
        return np.eye(p)
    out = A + A.T
    out *= 0.5
    _project_into(out, k, state, method, out)
    return out


def _project_into(
    A: np.ndarray, k: int, state: FantopeState, method: EigMethod, out: np.ndarray
) -> None:
    """Project the symmetric ``A`` onto ``F^k`` and write the result into ``out``.

    ``out`` may be ``A`` itself, in which case ``A`` is destroyed.
    """
    p = A.shape[0]
    state.last_matvec_cols = 0
    state.last_error_bound = 0.0
    state.last_tail_estimate = float("nan")
    if state.vectors is not None and state.vectors.shape[0] != p:
        state.vectors, state.n_contrib = None, None
        state.predicted_ok, state.lambda_min = True, None
    max_m = int(p * MAX_PARTIAL_FRACTION)
    cap = state.max_eig
    if method == "capped" and cap is None:
        cap = DEFAULT_MAX_EIG
    if cap is not None:
        cap = min(int(cap), (p - 1) // 2)  # room for one Krylov block beyond the cap
        if cap <= k:
            cap = None  # too small a matrix to cap: exact paths
    if cap is not None:
        max_m = min(max_m, cap)
    # 1. Warm-started block Krylov.
    if method == "partial":
        try_krylov = True
    elif method == "auto":
        try_krylov = p > SMALL_P and state.predicted_ok
    else:
        try_krylov = False
    b0 = _initial_block(k, state.n_contrib)
    if try_krylov and k < max_m and b0 <= max_m:
        res = _partial_eig(A, k, state, b0, max_m)
        if res is not None:
            w, V, theta, V_warm, bound = res
            _finish(state, "partial", w, V_warm, theta, k, p)
            state.predicted_ok = True
            state.last_error_bound = bound
            _assemble(w, V, theta, out)
            return
        state.n_failed += 1
    cols = state.last_matvec_cols
    # 1b. Capped, inexact projection: never an O(p^3) decomposition.
    if cap is not None and (method == "capped" or (method in ("auto", "partial") and p > SMALL_P)):
        _capped_projection(A, k, state, cap, out)
        state.last_matvec_cols += cols
        return
    # 2. LAPACK syevr for the top m pairs (keeps A: a failure falls through to 3).
    m = _subset_size(k, state.n_contrib, p)
    if method == "subset" or (
        method in ("auto", "partial") and p > SMALL_P and m <= SUBSET_MAX_FRACTION * p
    ):
        a, copied = _lapack_operand(A, state)
        w, V = scipy.linalg.eigh(
            a, subset_by_index=[p - m, p - 1], driver="evr", check_finite=False,
            overwrite_a=copied,
        )
        w = np.asarray(w[::-1], dtype=np.float64)
        V = V[:, ::-1]
        theta = fantope_threshold(w, k)
        if m == p or w[-1] <= theta:
            state.last_matvec_cols = cols
            _finish(state, "subset", w, V, theta, k, p)
            state.predicted_ok = state.lambda_min is not None and _predict_partial(
                w, theta, k, p, state
            )
            _assemble(w, V, theta, out)
            return
        state.n_subset_failed += 1
    # 3. Full eigendecomposition (LAPACK syevd, divide and conquer: fastest full driver).
    a, copied = _lapack_operand(A, state)
    w, V = scipy.linalg.eigh(a, overwrite_a=copied or out is A, check_finite=False,
                             driver="evd")
    w = np.asarray(w[::-1], dtype=np.float64)
    V = V[:, ::-1]
    theta = fantope_threshold(w, k)
    state.last_matvec_cols = cols
    state.lambda_min = float(w[-1])
    _finish(state, "full", w, V, theta, k, p)
    state.predicted_ok = _predict_partial(w, theta, k, p, state)
    _assemble(w, V, theta, out)


def _lapack_operand(A: np.ndarray, state: FantopeState) -> tuple[np.ndarray, bool]:
    """``A`` as LAPACK takes it, and whether that is a copy (free to overwrite).

    Fortran-ordered (a C-ordered symmetric ``A`` is its own transpose: a view), and a float32
    copy when ``state.lapack_float32``.
    """
    if state.lapack_float32:
        return np.asarray(A, dtype=np.float32, order="F"), True
    return (A.T if A.flags.c_contiguous else A), False


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
    if path == "partial":
        state.n_partial += 1
    elif path == "subset":
        state.n_subset += 1
    elif path == "capped":
        state.n_capped += 1
    else:
        state.n_full += 1
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


def _subset_size(k: int, n_contrib: int | None, p: int) -> int:
    """Number of top pairs requested from LAPACK on the subset path."""
    m = 4 * k + 10 if n_contrib is None else max(2 * k + 5, 2 * n_contrib + 10)
    return min(p, m)


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


def _predict_partial(w: np.ndarray, theta: float, k: int, p: int, state: FantopeState) -> bool:
    """Predict from the top of the spectrum whether the Krylov path would pay off.

    ``w`` holds the largest eigenvalues (decreasing; all of them after a full
    decomposition) and ``state.lambda_min`` estimates the smallest.  A block Krylov
    method with block ``b`` reduces the error of the pair ``j`` by about
    ``exp(-2 sqrt(delta))`` per block product, ``delta = (w_j - w_{b+1}) / (w_{b+1} -
    lambda_min)``.  From a warm-start error ~1e-2 down to ``eig_tol`` this takes
    ``log(1e-2 / eig_tol) / (2 sqrt(delta))`` products for the last contributing pair;
    the attempt is predicted to pay off when that fits in half the budget.
    """
    n_c = int(np.count_nonzero(w > theta))
    b = _initial_block(k, n_c)
    if p <= SMALL_P or b > int(p * MAX_PARTIAL_FRACTION) or b >= w.size:
        return False
    w_min = float(w[-1]) if state.lambda_min is None else min(state.lambda_min, float(w[-1]))
    spread = float(w[b]) - w_min
    gap = float(w[max(n_c, 1) - 1] - w[b])
    if spread <= 0.0:
        return True
    delta = gap / spread
    if delta <= 0.0:
        return False
    steps = _block_products(delta, 1e-2, min(state.eig_tol, 1e-3))
    return (steps + 1.0) * b <= 0.5 * _budget(state, b, p)


def _block_products(delta: float, error: float, tol: float) -> float:
    """Block products a block Krylov method needs to bring a residual from ``error`` down to
    ``tol`` when each reduces it by about ``exp(−2 sqrt(delta))`` (``delta > 0``: the gap
    below the pair over the spread of the rest of the spectrum)."""
    return math.log(error / tol) / (2.0 * math.sqrt(delta))


def _assemble(w: np.ndarray, V: np.ndarray, theta: float, out: np.ndarray) -> None:
    """Write ``sum_i clip(w_i - theta, 0, 1) v_i v_i^T`` into ``out`` (``w`` decreasing)."""
    n_c = int(np.count_nonzero(w > theta))  # w is decreasing: the first n_c pairs
    d = np.minimum(w[:n_c] - theta, 1.0)
    # (V sqrt(d)) (V sqrt(d))^T: one p x n_c temporary, which never overlaps ``out`` (the
    # full path computes eigenvectors in place), and NumPy evaluates ``B @ B.T`` with a
    # symmetric rank-k update (half the flops, exactly symmetric result).  Float32
    # eigenvectors (``lapack_float32``) are assembled in float32, then widened.
    Vs = np.multiply(V[:, :n_c], np.sqrt(d).astype(V.dtype),
                     out=np.empty((V.shape[0], n_c), dtype=V.dtype, order="F"))
    if V.dtype == out.dtype:
        np.matmul(Vs, Vs.T, out=out)
    else:
        out[...] = Vs @ Vs.T


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
# ADMM
# ----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ADMMIterationInfo:
    """Progress report passed to the ``callback`` of :func:`fantope_admm`.

    Attributes
    ----------
    iteration : int
        One-based iteration number.
    solution : ndarray of shape (p, p)
        The current sparse iterate ``Y`` (a live buffer: do not modify; copy it to keep it).
    primal_residual, dual_residual : float
        ``||X - Y||_F`` and ``rho ||Y - Y_old||_F`` of this iteration.
    rho : float
        Penalty parameter used in this iteration.
    n_eig : int
        Number of eigenpairs the projection was computed from.
    eig_method : str
        ``"partial"``, ``"subset"``, ``"full"`` or ``"capped"``.
    seconds : float
        Wall-clock time of the iteration.
    error_bound : float
        Bound on the Frobenius distance of this iteration's projection from the exact one
        (see :attr:`FantopeState.last_error_bound`).
    """

    iteration: int
    solution: np.ndarray
    primal_residual: float
    dual_residual: float
    rho: float
    n_eig: int
    eig_method: str
    seconds: float
    error_bound: float = 0.0


@dataclass(frozen=True)
class ADMMResult:
    """Result of :func:`fantope_admm`.

    Attributes
    ----------
    solution : ndarray of shape (p, p)
        The sparse iterate ``Y`` (symmetric); its top-``k`` eigenvectors estimate the
        principal subspace.
    n_iter : int
        Number of iterations run.
    converged : bool
        Whether both residuals fell below ``sqrt(k) * tol``.
    primal_residual, dual_residual : float
        Final ``||X - Y||_F`` and ``rho ||Y - Y_old||_F``.
    rho : float
        Penalty parameter of the last iteration.
    primal_history, dual_history, rho_history : list of float
        Per-iteration residuals and the ``rho`` used in each iteration.
    n_eig_history : list of int
        Eigenpairs computed for each projection (``p`` for a full eigendecomposition).
    n_contrib_history : list of int
        Eigenpairs with a non-zero weight in each projection.
    eig_method_history : list of str
        ``"partial"``, ``"subset"``, ``"full"`` or ``"capped"`` for each projection.
    seconds_history : list of float
        Wall-clock seconds of each iteration.
    error_bound_history : list of float
        Bound on the Frobenius distance of each projection from the exact projection (0
        for the LAPACK paths; see :attr:`FantopeState.last_error_bound`).
    max_eig : int or None
        The cap on computed eigenpairs in force (``None``: exact projections).
    failed_partial_attempts, failed_subset_attempts : int
        Krylov and LAPACK-subset attempts abandoned for a later path.
    projection_seconds : float
        Total seconds spent in the Fantope projections (including failed attempts).
    seconds : float
        Total wall-clock seconds.
    stopped_by_callback : bool
        Whether the callback requested an early stop.
    """

    solution: np.ndarray
    n_iter: int
    converged: bool
    primal_residual: float
    dual_residual: float
    rho: float
    primal_history: list[float] = field(default_factory=list)
    dual_history: list[float] = field(default_factory=list)
    rho_history: list[float] = field(default_factory=list)
    n_eig_history: list[int] = field(default_factory=list)
    n_contrib_history: list[int] = field(default_factory=list)
    eig_method_history: list[str] = field(default_factory=list)
    seconds_history: list[float] = field(default_factory=list)
    error_bound_history: list[float] = field(default_factory=list)
    max_eig: int | None = None
    failed_partial_attempts: int = 0
    failed_subset_attempts: int = 0
    projection_seconds: float = 0.0
    seconds: float = 0.0
    stopped_by_callback: bool = False


def fantope_admm(
    S: np.ndarray,
    k: int,
    lam: float,
    *,
    rho: float | None = None,
    tol: float = 1e-3,
    max_iter: int = 100,
    callback: Callable[[ADMMIterationInfo], bool | None] | None = None,
    eig_method: EigMethod = "auto",
    rng: np.random.Generator | None = None,
    max_eig: int | Literal["auto"] | None = None,
    capped_float32: bool = True,
    projection_dtype: Literal["float64", "float32"] = "float64",
) -> ADMMResult:
    """Solve Fantope projection and selection by ADMM.

    Solves ``max <S, X> - lam * ||X||_{1,1}`` over ``X`` in the Fantope ``F^k`` with the
    iteration (``U`` is the scaled dual variable)::

        X <- P_F(Y - U + S / rho)
        Y <- soft_threshold(X + U, lam / rho)
        U <- U + X - Y

    stopping when ``||X - Y||_F`` and ``rho ||Y - Y_old||_F`` are both below
    ``sqrt(k) * tol``.  ``rho`` starts at ``max |S_ij|`` (1 if ``S = 0``) and is adapted
    by residual balancing: if the primal residual exceeds ten times the dual one, ``rho``
    is doubled and ``U`` halved; in the opposite case ``rho`` is halved and ``U`` doubled.

    No warning is issued when the iteration limit is reached; check ``converged``.

    Parameters
    ----------
    S : ndarray of shape (p, p)
        Symmetric (e.g. noisy covariance) matrix; not modified.
    k : int
        Target dimension, ``1 <= k < p``.
    lam : float
        ``l1`` penalty, ``lam >= 0``.
    rho : float or None
        Initial penalty parameter (``> 0``); ``None`` uses ``max |S_ij|``.
    tol : float
        Convergence tolerance (``> 0``), scaled by ``sqrt(k)``.
    max_iter : int
        Maximum number of iterations (``>= 1``).
    callback : callable or None
        Called after every iteration with an :class:`ADMMIterationInfo`; returning
        ``True`` stops the iteration (the result then has ``stopped_by_callback=True``).
    eig_method : {"auto", "full", "subset", "partial"}
        Eigensolver policy of the projections; see :func:`fantope_projection`.
    rng : numpy.random.Generator or None
        Random source of the partial eigensolver (see :class:`FantopeState`).
    max_eig : int, "auto" or None, default=None
        Cap on the eigenpairs computed per projection (:attr:`FantopeState.max_eig`).
        ``None``: exact projections, which cost an ``O(p^3)`` decomposition whenever many
        eigenvalues are fractional (the local-DP regime).  An integer ``m > k``: the
        capped, inexact projection whenever the certified Krylov path fails; each
        projection's error bound is recorded in ``error_bound_history``.  ``"auto"``:
        ``None`` for ``p <= 4000`` and ``256`` above. The cap is opt-in: where the noise
        leaves hundreds of eigenvalues fractional at the solution (ε = 1, p ≥ 800), the
        capped iteration was measured not to reach the exact solution, and where the exact
        one starts to recover the support (p = 7 128, ε = 16: 11 of 20 rows) the capped
        one does not (1 of 20) (issue 16, ``docs/BENCHMARKS.md``).
    capped_float32 : bool
        Block products of the capped path in float32 (:attr:`FantopeState.capped_float32`).
    projection_dtype : {"float64", "float32"}, default="float64"
        Precision of the exact (LAPACK) projections (:attr:`FantopeState.lapack_float32`).
        ``"float32"`` halves their cost at large ``p`` and perturbs each projection by
        float32 rounding (relative ``~p 2^-24``); the ADMM updates stay in float64.  Meant
        for noisy ``S`` (local DP), where that rounding is far below the noise.

    Returns
    -------
    ADMMResult
        The sparse iterate ``Y`` and convergence diagnostics.

    Raises
    ------
    ValueError
        If ``S`` is not a finite, square, symmetric matrix, or a parameter is out of range.

    Notes
    -----
    Memory: besides ``S`` the solver keeps three ``p x p`` arrays (``Y``, ``U`` and a work
    array holding ``A`` and then ``X``), plus the eigensolver's storage (``p x p``
    eigenvectors and the LAPACK workspace on the full path).
    """
    S = _validate_matrix(S)
    p = S.shape[0]
    k = _check_int(k, "k")
    if not 1 <= k < p:
        raise ValueError(f"k must satisfy 1 <= k < p = {p}, got {k}")
    lam = float(lam)
    if not math.isfinite(lam) or lam < 0:
        raise ValueError(f"lam must be a finite number >= 0, got {lam}")
    tol = float(tol)
    if not math.isfinite(tol) or tol <= 0:
        raise ValueError(f"tol must be > 0, got {tol}")
    max_iter = _check_int(max_iter, "max_iter")
    if max_iter < 1:
        raise ValueError(f"max_iter must be >= 1, got {max_iter}")
    if eig_method not in _METHODS:
        raise ValueError(f"eig_method must be one of {_METHODS}, got {eig_method!r}")
    if isinstance(max_eig, str):
        if max_eig != "auto":
            raise ValueError(f"max_eig must be an integer, 'auto' or None, got {max_eig!r}")
        cap: int | None = None if p <= AUTO_CAP_P else DEFAULT_MAX_EIG
    elif max_eig is None:
        cap = None
    else:
        cap = _check_int(max_eig, "max_eig")
        if cap <= k:
            raise ValueError(f"max_eig must be > k = {k}, got {cap}")
    if rho is None:
        rho = float(np.max(np.abs(S)))
        if not rho > 0:
            rho = 1.0
    else:
        rho = float(rho)
        if not math.isfinite(rho) or rho <= 0:
            raise ValueError(f"rho must be a finite number > 0, got {rho}")

    if projection_dtype not in ("float64", "float32"):
        raise ValueError("projection_dtype must be 'float64' or 'float32', got "
                         f"{projection_dtype!r}")
    state = FantopeState(rng=rng, max_eig=cap, capped_float32=bool(capped_float32),
                         lapack_float32=projection_dtype == "float32")
    Y = np.zeros_like(S)
    U = np.zeros_like(S)
    W = np.empty_like(S)
    rows = max(1, _CHUNK_BYTES // (8 * p))
    thresh = math.sqrt(k) * tol

    primal_h: list[float] = []
    dual_h: list[float] = []
    rho_h: list[float] = []
    neig_h: list[int] = []
    ncontrib_h: list[int] = []
    meth_h: list[str] = []
    sec_h: list[float] = []
    err_h: list[float] = []
    proj_seconds = 0.0
    converged = False
    stopped = False
    r_norm = s_norm = float("nan")
    t_start = time.perf_counter()
    n_iter = 0
    for it in range(1, max_iter + 1):
        t_it = time.perf_counter()
        n_iter = it
        # W <- Y - U + S / rho (row chunks: small temporaries, S untouched).
        inv_rho = 1.0 / rho
        for r0 in range(0, p, rows):
            sl = slice(r0, r0 + rows)
            w = W[sl]
            np.multiply(S[sl], inv_rho, out=w)
            w += Y[sl]
            w -= U[sl]
        # X <- P_F(W), written into W.
        t_proj = time.perf_counter()
        _project_into(W, k, state, eig_method, W)
        proj_seconds += time.perf_counter() - t_proj
        # T = X + U (into U); Y <- soft(T, lam/rho); U <- T - Y = clip(T, -tau, tau).
        tau = lam / rho
        r_sq = 0.0
        s_sq = 0.0
        for r0 in range(0, p, rows):
            sl = slice(r0, r0 + rows)
            x = W[sl]
            t = U[sl]
            y = Y[sl]
            t += x
            y_new = np.abs(t)
            y_new -= tau
            np.maximum(y_new, 0.0, out=y_new)
            np.copysign(y_new, t, out=y_new)
            y -= y_new  # y <- Y_old - Y_new
            s_sq += float(np.vdot(y, y))
            np.subtract(x, y_new, out=x)  # x <- X - Y_new (X no longer needed)
            r_sq += float(np.vdot(x, x))
            y[...] = y_new
            t -= y_new
        r_norm = math.sqrt(r_sq)
        s_norm = rho * math.sqrt(s_sq)
        primal_h.append(r_norm)
        dual_h.append(s_norm)
        rho_h.append(rho)
        neig_h.append(state.last_n_eig)
        ncontrib_h.append(state.last_n_contrib)
        meth_h.append(state.last_method)
        err_h.append(state.last_error_bound)
        sec_h.append(time.perf_counter() - t_it)
        if callback is not None:
            info = ADMMIterationInfo(
                iteration=it,
                solution=Y,
                primal_residual=r_norm,
                dual_residual=s_norm,
                rho=rho,
                n_eig=state.last_n_eig,
                eig_method=state.last_method,
                seconds=sec_h[-1],
                error_bound=state.last_error_bound,
            )
            if callback(info) is True:
                stopped = True
                break
        if r_norm < thresh and s_norm < thresh:
            converged = True
            break
        if it == max_iter:
            break
        if r_norm > 10.0 * s_norm:
            rho *= 2.0
            U *= 0.5
        elif s_norm > 10.0 * r_norm:
            rho *= 0.5
            U *= 2.0
    del W, U
    _symmetrize_inplace(Y)
    return ADMMResult(
        solution=Y,
        n_iter=n_iter,
        converged=converged,
        primal_residual=r_norm,
        dual_residual=s_norm,
        rho=rho,
        primal_history=primal_h,
        dual_history=dual_h,
        rho_history=rho_h,
        n_eig_history=neig_h,
        n_contrib_history=ncontrib_h,
        eig_method_history=meth_h,
        seconds_history=sec_h,
        error_bound_history=err_h,
        max_eig=cap,
        failed_partial_attempts=state.n_failed,
        failed_subset_attempts=state.n_subset_failed,
        projection_seconds=proj_seconds,
        seconds=time.perf_counter() - t_start,
        stopped_by_callback=stopped,
    )


# ----------------------------------------------------------------------------------------
# Helpers
# ----------------------------------------------------------------------------------------
def _check_int(value: object, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int | np.integer):
        raise ValueError(f"{name} must be an integer, got {value!r}")
    return int(value)


def _validate_matrix(S: object) -> np.ndarray:
    """Check that ``S`` is a finite, square, symmetric float matrix.

    Returns ``S`` itself (as float64, without copying) when it is exactly symmetric, and a
    symmetrised copy when it is symmetric only within the tolerance.
    """
    arr = np.asarray(S)
    if arr.ndim != 2 or arr.shape[0] != arr.shape[1]:
        raise ValueError(f"S must be a square matrix, got shape {arr.shape}")
    if arr.shape[0] < 2:
        raise ValueError("S must be at least 2 x 2")
    if not np.issubdtype(arr.dtype, np.number) or np.iscomplexobj(arr):
        raise ValueError("S must be a real numeric matrix")
    arr = np.asarray(arr, dtype=np.float64)
    p = arr.shape[0]
    rows = max(1, _CHUNK_BYTES // (8 * p))
    max_abs = 0.0
    max_asym = 0.0
    for r0 in range(0, p, rows):
        blk = arr[r0 : r0 + rows]
        if not np.all(np.isfinite(blk)):
            raise ValueError("S must be finite (no NaN or inf)")
        max_abs = max(max_abs, float(np.max(np.abs(blk))))
        max_asym = max(max_asym, float(np.max(np.abs(blk - arr[:, r0 : r0 + rows].T))))
    if max_asym > 1e-8 * max_abs:
        raise ValueError(f"S must be symmetric (max |S - S^T| = {max_asym:.3g})")
    if max_asym > 0.0:
        # Symmetric within tolerance but not exactly: work on a symmetrised copy.
        arr = arr + arr.T
        arr *= 0.5
    return arr


def _symmetrize_inplace(M: np.ndarray) -> None:
    """Replace ``M`` by ``(M + M^T) / 2`` in place, block by block."""
    p = M.shape[0]
    bs = max(1, int(math.sqrt(_CHUNK_BYTES / 8)))
    for i0 in range(0, p, bs):
        i1 = min(p, i0 + bs)
        for j0 in range(i0, p, bs):
            j1 = min(p, j0 + bs)
            avg = 0.5 * (M[i0:i1, j0:j1] + M[j0:j1, i0:i1].T)
            M[i0:i1, j0:j1] = avg
            M[j0:j1, i0:i1] = avg.T
