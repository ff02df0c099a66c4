"""Euclidean projection onto the Fantope, and the choice of eigensolver path that computes it.

For a symmetric ``A = sum_i g_i u_i u_i^T`` the projection onto
``F^k = {X = X^T : 0 <= X <= I, tr X = k}`` is ``sum_i clip(g_i - theta, 0, 1) u_i u_i^T``
where ``theta`` solves ``sum_i clip(g_i - theta, 0, 1) = k`` (:func:`fantope_threshold`).

Only the eigenpairs with ``g_i > theta`` enter the projection, so it is computed from the
top ``m`` eigenpairs when possible -- by a warm-started, restarted block Krylov method
(cheap when the contributing eigenvalues stand apart from the rest of the spectrum;
:mod:`privpca.solvers.fantope_partial`) or by LAPACK's ``syevr`` restricted to the top ``m``
pairs -- and accepted only when certified: the smallest computed eigenvalue satisfies
``g_m <= theta``, so that every uncomputed eigenvalue, being at most ``g_m``, has weight zero.
Otherwise a full divide-and-conquer eigendecomposition is used.  :class:`FantopeState`
carries the warm start and the policy state across successive projections.
"""

from __future__ import annotations

from typing import Literal

import numpy as np
import scipy.linalg

from privpca.solvers.fantope_partial import (
    _block_products,
    _budget,
    _capped_projection,
    _partial_eig,
)
from privpca.solvers.fantope_state import (
    MAX_PARTIAL_FRACTION,
    FantopeState,
    _check_int,
    _finish,
    _initial_block,
    _record,
    fantope_threshold,
)

__all__ = ["FantopeState", "fantope_projection", "fantope_threshold"]

EigMethod = Literal["auto", "full", "subset", "partial", "capped"]
_METHODS = ("auto", "full", "subset", "partial", "capped")

#: Below this dimension a full eigendecomposition is always used by ``method="auto"``.
SMALL_P = 300
#: The LAPACK subset path (``syevr`` for the top ``m`` pairs) is used while ``m`` is at most
#: this fraction of ``p``; beyond it the full divide-and-conquer ``syevd`` is faster.
SUBSET_MAX_FRACTION = 0.3
#: Eigenpairs computed by the capped projection under ``max_eig="auto"``.  At p = 7128 two
#: float32 block products of this width cost about 1.5 s on two (shared) cores.
DEFAULT_MAX_EIG = 256


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


def _subset_size(k: int, n_contrib: int | None, p: int) -> int:
    """Number of top pairs requested from LAPACK on the subset path."""
    m = 4 * k + 10 if n_contrib is None else max(2 * k + 5, 2 * n_contrib + 10)
    return min(p, m)


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
