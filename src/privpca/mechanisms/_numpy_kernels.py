"""NumPy twins of DP-PCA's exact compiled passes, for small tables, and the dispatch.

Compiling a numba pass costs seconds the first time an install runs it; on a small table
NumPy finishes first. Every pass here returns, bit for bit, what its twin in
:mod:`privpca.mechanisms._kernels` returns: the same IEEE operations in the same order (a
projection ``yᵀW`` summed in the compiled pass's partial sums, column after column; the
truncated sums added row after row from 0.0; the power iteration's dot products, four-row
updates and norms summed as ``_dot_axpy`` and ``_top_one`` sum them). Sums are running sums
(:func:`numpy.add.accumulate` from 0.0), never NumPy's pairwise reductions or BLAS, whose
order is not the loop's. The eigenvalues agree when a row is NaN or infinite too, up to the
sign or payload of a NaN (such rows are refused by the caller).

:func:`kernel` picks the pass on public sizes only; the results do not depend on it.
Nothing here is random.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
from numpy.typing import NDArray

__all__ = [
    "JIT_MIN_CELLS",
    "gradient_counts",
    "kernel",
    "pair_top_eigenvalues",
    "top_eigenvalues",
    "truncated_sums",
]

_MAX_BIN = float(2**52)
_SQRT2 = math.sqrt(2.0)
#: As :data:`privpca.mechanisms._kernels.WINDOW` (kept here so that numba is not imported).
WINDOW = 30

#: Cells each exact pass reads in NumPy, in a process, before its compiled twin takes over
#: (as :data:`privpca.streaming.reductions.JIT_MIN_CELLS`): compiling ``gradient_counts``
#: costs 1–2.5 s the first time, its twin ~30 ns a gradient entry; compiling
#: ``pair_top_eigenvalues`` ~5 s, its twin (20 power steps) 250–650 ns a gradient entry.
JIT_MIN_CELLS = 4_000_000
_cells_seen: dict[str, int] = {}


def kernel(name: str, cells: int) -> Callable[..., Any]:
    """The NumPy pass ``name`` while this process has read ≤ :data:`JIT_MIN_CELLS` cells
    with it, else the compiled one (numba imported, and compiled or loaded, on first use)."""
    seen = _cells_seen[name] = _cells_seen.get(name, 0) + cells
    if seen <= JIT_MIN_CELLS:
        return globals()[name]
    from privpca.mechanisms import _kernels

    return getattr(_kernels, name)


def _projections(Y: NDArray[np.float64], W: NDArray[np.float64]) -> NDArray[np.float64]:
    """``YW`` summed as ``_project`` sums it: four partial sums for k = 1, else in order."""
    b, p = Y.shape
    k = W.shape[1]
    if k == 1:
        part = [np.zeros(b) for _ in range(4)]
        q = p - p % 4
        for a in range(q):
            part[a % 4] += Y[:, a] * W[a, 0]
        for a in range(q, p):
            part[0] += Y[:, a] * W[a, 0]
        return ((part[0] + part[1]) + (part[2] + part[3]))[:, None]
    proj = np.zeros((b, k))
    for a in range(p):
        proj += Y[:, a:a + 1] * W[a]
    return proj


def _bins(G: NDArray[np.float64], inv_width: float) -> NDArray[np.int64]:
    """``_bin``: ``⌊g/h⌋`` as ``floor(g·(1/h))``, clamped to ``±2⁵²``, NaN to the top."""
    v = G * inv_width
    v = np.where((v >= _MAX_BIN) | np.isnan(v), _MAX_BIN, v)
    v = np.where(v <= -_MAX_BIN, -_MAX_BIN, v)
    return np.floor(v).astype(np.int64)


def gradient_counts(
    X: Any, rows: Any, centre: Any, W: Any, inv_width: float, G: Any, base: Any, table: Any
) -> bool:
    """:func:`privpca.mechanisms._kernels.gradient_counts` (one thread)."""
    b, p, k = rows.shape[0], W.shape[0], W.shape[1]
    table[:] = 0
    if b == 0:
        base[:] = 0
        return False
    window = table.shape[1] - 2
    with np.errstate(all="ignore"):
        Y = X[rows] - centre
        proj = _projections(Y, W)
        bad = not np.isfinite(proj).all()
        grads = (Y[:, :, None] * proj[:, None, :]).reshape(b, p * k)
        G[:b] = grads
        bins = _bins(grads, inv_width)
    base[:] = bins[0] - window // 2
    slot = np.clip(bins - base, -1, window) + 1
    flat = slot + np.arange(p * k) * (window + 2)
    table[:] = np.bincount(flat.ravel(), minlength=table.size).reshape(table.shape)
    return bad


def truncated_sums(G: Any, n_rows: int, low: Any, high: Any, out: Any) -> None:
    """:func:`privpca.mechanisms._kernels.truncated_sums`: rows added in order from 0.0 (an
    accumulation, never NumPy's pairwise reduction, whatever the shape)."""
    t = np.empty((n_rows + 1, G.shape[1]))
    t[0] = 0.0
    t[1:] = np.where(G[:n_rows] < low, low, G[:n_rows])
    t[1:] = np.where(t[1:] > high, high, t[1:])
    out[:] = np.add.accumulate(t, axis=0)[-1]


def _running_sum(T: NDArray[np.float64], axis: int) -> NDArray[np.float64]:
    """``Σ T`` along ``axis``, each term added in index order to a running sum from 0.0 (a
    loop's accumulation, never NumPy's pairwise reduction)."""
    T = np.moveaxis(T, axis, 0)
    Z = np.concatenate([np.zeros((1, *T.shape[1:])), T])
    return np.add.accumulate(Z, axis=0)[-1]


def _top(S: NDArray[np.float64], n_iter: int) -> NDArray[np.float64]:
    """``_top_one`` of every block ``S[j]`` (shape ``(m, s, q)``, ``s ≥ 1``), in its order."""
    m, s, q = S.shape
    gram = s <= q
    x0 = 1.0 / math.sqrt(s if gram else q)
    x = _running_sum(x0 * S, 1) if gram else np.full((m, q), x0)  # Sᵀv₀, or v₀
    g = s - s % 4
    for _ in range(n_iter):
        d = _running_sum(S * x[:, None, :], 2)  # d_i = S_i·x
        # _dot_axpy's y = Σ_i d_i S_i: four rows to a term, then the rows left one by one
        dg, Sg = d[:, :g].reshape(m, g // 4, 4, 1), S[:, :g].reshape(m, g // 4, 4, q)
        four = ((dg[:, :, 0] * Sg[:, :, 0] + dg[:, :, 1] * Sg[:, :, 1])
                + dg[:, :, 2] * Sg[:, :, 2]) + dg[:, :, 3] * Sg[:, :, 3]
        y = _running_sum(np.concatenate([four, d[:, g:, None] * S[:, g:]], axis=1), 1)
        w = d / s if gram else y / s
        nrm = np.sqrt(_running_sum(w * w, 1))
        nrm = np.where(1e-300 > nrm, 1e-300, nrm)  # Python's max(nrm, 1e-300): NaN kept
        x = (y / s) / nrm[:, None]
    if gram:
        acc = _running_sum(x * x, 1)
    else:
        d = _running_sum(S * x[:, None, :], 2)
        acc = _running_sum(d * d, 1)
    return acc / s


def top_eigenvalues(pairs: Any, n_subsets: int, n_iter: int, out: Any) -> None:
    """:func:`privpca.mechanisms._kernels.top_eigenvalues` (``len(pairs) ≥ n_subsets``)."""
    s = pairs.shape[0] // n_subsets
    S = pairs[: n_subsets * s].reshape(n_subsets, s, pairs.shape[1])
    with np.errstate(all="ignore"):
        out[:n_subsets] = _top(S, n_iter)


def _not_finite(A: NDArray[np.float64]) -> bool:
    return not np.isfinite(A).all()


def pair_top_eigenvalues(
    X: Any, rows: Any, centre: Any, W: Any, n_subsets: int, n_iter: int, out: Any
) -> bool:
    """:func:`privpca.mechanisms._kernels.pair_top_eigenvalues` (one thread)."""
    s = (rows.shape[0] // 2) // max(n_subsets, 1)
    n = n_subsets * s
    with np.errstate(all="ignore"):
        bad = _not_finite(X[rows[2 * n:]])  # the rows no pair reads (all when s = 0)
        if s == 0:
            out[:n_subsets] = 0.0
            return bad
        Y0, Y1 = X[rows[0 : 2 * n : 2]] - centre, X[rows[1 : 2 * n : 2]] - centre
        proj0, proj1 = _projections(Y0, W), _projections(Y1, W)
        P = (Y1[:, :, None] * proj1[:, None, :] - Y0[:, :, None] * proj0[:, None, :]) / _SQRT2
        out[:n_subsets] = _top(P.reshape(n_subsets, s, W.size), n_iter)
    return bad or _not_finite(proj0) or _not_finite(proj1)
