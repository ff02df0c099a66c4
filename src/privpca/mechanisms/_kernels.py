"""Compiled passes (numba) behind DP-PCA's per-step statistics.

Each function here is one pass over a block of per-record gradients, doing what several NumPy
passes (and temporaries the size of the block) did: DP-PCA is memory-bound, so the number of
passes over the data is its running time. Every pass is deterministic arithmetic on public
parameters and the data; all randomness stays with the callers (NumPy Generators).

Gradients are ``g_i = A_i W`` flattened row-major (``q = p·k`` entries, entry ``a·k + c`` is
``(A_i W)[a, c]``), for vector records ``A_i = y_i y_iᵀ`` with ``y_i = x_{row_i} − centre``:
``g_i[a·k + c] = y_ia · (y_iᵀ W)_c``, the layout of
:meth:`privpca.solvers.oja.VectorGradients.gradients`.

Bins are those of :func:`privpca.mechanisms.histogram.linear_bins`: ``⌊g/h⌋`` computed as
``floor(g·(1/h))``, clamped to ``±2⁵²`` (NaN to the top bin, so that every value has a bin).
"""

from __future__ import annotations

import math
from typing import Any

import numba
import numpy as np

__all__ = [
    "bin_counts",
    "bin_range",
    "pair_gradients",
    "row_gradients",
    "truncated_sums",
]

_MAX_BIN = float(2**52)
_SQRT2 = math.sqrt(2.0)
_JIT: dict[str, Any] = {"cache": True, "nogil": True, "error_model": "numpy"}


@numba.njit(inline="always", **_JIT)
def _bin(g: float, inv_width: float) -> int:
    v = g * inv_width
    if v >= _MAX_BIN or v != v:
        v = _MAX_BIN
    elif v <= -_MAX_BIN:
        v = -_MAX_BIN
    return math.floor(v)  # an int64 in numba (Python 3 semantics)


@numba.njit(**_JIT)
def _project(X, i, centre, W, y, proj):
    """``y = X[i] − centre`` and ``proj = yᵀW`` (four partial sums: no serial FMA chain)."""
    p, k = W.shape
    for a in range(p):
        y[a] = X[i, a] - centre[a]
    if k == 1:
        s0 = s1 = s2 = s3 = 0.0
        a = 0
        while a + 4 <= p:
            s0 += y[a] * W[a, 0]
            s1 += y[a + 1] * W[a + 1, 0]
            s2 += y[a + 2] * W[a + 2, 0]
            s3 += y[a + 3] * W[a + 3, 0]
            a += 4
        while a < p:
            s0 += y[a] * W[a, 0]
            a += 1
        proj[0] = (s0 + s1) + (s2 + s3)
        return
    for c in range(k):
        proj[c] = 0.0
    for a in range(p):
        ya = y[a]
        for c in range(k):
            proj[c] += ya * W[a, c]


@numba.njit(**_JIT)
def row_gradients(X, rows, centre, W, inv_width, G, bin_low, bin_high):
    """Write ``G[r] = g(rows[r])`` and each column's lowest and highest bin, in one pass.

    Parameters
    ----------
    X : ndarray of shape (n, p), C-ordered
    rows : ndarray of intp, shape (b,)
        Rows of ``X``, in the order of ``G``'s rows.
    centre : ndarray of shape (p,)
        Subtracted from every row (zeros: none; ``x − 0.0`` is ``x`` bit for bit).
    W : ndarray of shape (p, k), C-ordered
    inv_width : float
        ``1/h`` of the bins whose range is wanted.
    G : ndarray of shape (≥ b, p·k), C-ordered
        Output; rows beyond ``b`` are left alone.
    bin_low, bin_high : ndarray of int64, shape (p·k,)
        Output: ``min_r ⌊G[r, j]/h⌋`` and ``max_r ⌊G[r, j]/h⌋``.
    """
    p, k = W.shape
    q = p * k
    y = np.empty(p)
    proj = np.empty(k)
    for j in range(q):
        bin_low[j] = np.iinfo(np.int64).max
        bin_high[j] = np.iinfo(np.int64).min
    for r in range(rows.shape[0]):
        _project(X, rows[r], centre, W, y, proj)
        for a in range(p):
            for c in range(k):
                j = a * k + c
                g = y[a] * proj[c]
                G[r, j] = g
                v = _bin(g, inv_width)
                if v < bin_low[j]:
                    bin_low[j] = v
                if v > bin_high[j]:
                    bin_high[j] = v


@numba.njit(**_JIT)
def pair_gradients(X, rows, centre, W, P):
    """``P[i] = (g(rows[2i+1]) − g(rows[2i]))/√2``, ``i < len(rows)//2``: Algorithm 4's pairs."""
    p, k = W.shape
    y0 = np.empty(p)
    y1 = np.empty(p)
    proj0 = np.empty(k)
    proj1 = np.empty(k)
    for i in range(rows.shape[0] // 2):
        _project(X, rows[2 * i], centre, W, y0, proj0)
        _project(X, rows[2 * i + 1], centre, W, y1, proj1)
        for a in range(p):
            for c in range(k):
                P[i, a * k + c] = (y1[a] * proj1[c] - y0[a] * proj0[c]) / _SQRT2


@numba.njit(**_JIT)
def bin_range(G, inv_width, bin_low, bin_high):
    """Each column's lowest and highest bin ``⌊G[r, j]/h⌋`` (gradients given explicitly)."""
    b, q = G.shape
    for j in range(q):
        bin_low[j] = np.iinfo(np.int64).max
        bin_high[j] = np.iinfo(np.int64).min
    for r in range(b):
        for j in range(q):
            v = _bin(G[r, j], inv_width)
            if v < bin_low[j]:
                bin_low[j] = v
            if v > bin_high[j]:
                bin_high[j] = v


@numba.njit(**_JIT)
def bin_counts(G, n_rows, inv_width, bin_low, table):
    """``table[j, v − bin_low[j]]`` += 1 for every ``v = ⌊G[r, j]/h⌋``, ``r < n_rows``."""
    q = G.shape[1]
    for r in range(n_rows):
        for j in range(q):
            table[j, _bin(G[r, j], inv_width) - bin_low[j]] += 1


@numba.njit(**_JIT)
def truncated_sums(G, n_rows, low, high, out):
    """``out[j] = Σ_{r < n_rows} min(max(G[r, j], low[j]), high[j])``, summed in row order.

    Row order is NumPy's own order for ``np.clip(G, low, high).sum(axis=0)`` on a C-ordered
    block, so the result is the same bit for bit.
    """
    q = G.shape[1]
    for j in range(q):
        out[j] = 0.0
    for r in range(n_rows):
        for j in range(q):
            t = G[r, j]
            if t < low[j]:
                t = low[j]
            if t > high[j]:
                t = high[j]
            out[j] += t
