"""NumPy twins of DP-PCA's exact compiled passes, for small tables, and the dispatch.

Compiling a numba pass costs seconds the first time an install runs it; on a small table
NumPy finishes first. :func:`gradient_counts` and :func:`truncated_sums` here return, bit for
bit, what their twins in :mod:`privpca.mechanisms._kernels` return: the same IEEE operations
in the same order (a projection ``yᵀW`` summed in the compiled pass's partial sums, column
after column; the truncated sums added row after row from 0.0). The subset eigenvalues
(:func:`privpca.mechanisms._kernels.pair_top_eigenvalues`) have no twin: that pass is
compiled with reassociation (vectorised sums whose order is LLVM's choice), which NumPy
cannot reproduce bit for bit.

:func:`kernel` picks the pass on public sizes only; the results do not depend on it.
Nothing here is random.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from numpy.typing import NDArray

__all__ = ["JIT_MIN_CELLS", "gradient_counts", "kernel", "truncated_sums"]

_MAX_BIN = float(2**52)
#: As :data:`privpca.mechanisms._kernels.WINDOW` (kept here so that numba is not imported).
WINDOW = 30

#: Cells each exact pass reads in NumPy, in a process, before its compiled twin takes over
#: (as :data:`privpca.streaming.reductions.JIT_MIN_CELLS`): compiling ``gradient_counts``
#: costs 1–2.5 s the first time, its twin ~30 ns a gradient entry.
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
