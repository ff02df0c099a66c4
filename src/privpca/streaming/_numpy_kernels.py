"""NumPy twins of the compiled passes of :mod:`privpca.streaming._kernels`, for small tables.

Compiling a numba kernel costs seconds the first time an install runs it (and every time
where the cache cannot be written); on a small table NumPy finishes first. Each function here
returns, bit for bit, what its compiled twin returns, because it performs the same IEEE
operations in the same order:

* a row's squared norm is summed column after column (``acc += d·d``, one vectorised add per
  column), not by NumPy's pairwise reductions;
* logarithms are CPython's :func:`math.log` (the C library's ``log``, which the compiled code
  calls too), not :func:`numpy.log` (NumPy's own SIMD routines may differ in the last bit);
* per-bin sums are :func:`numpy.add.at`, which adds the rows in order, as the compiled loop
  does.

The dispatch (:func:`privpca.streaming.reductions.use_jit`) depends on public shapes only;
the results do not depend on it. Nothing here is random.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from numpy.typing import NDArray

__all__ = ["binned_norm_sums", "log_bin_counts", "row_norm_bin_counts", "shifted_clipped_rows"]

#: As :data:`privpca.streaming._kernels.ZERO_BIN` (kept here so that numba is not imported).
ZERO_BIN = -(2**52)
_OFFSET = 1e-9


def _log_bins(values: NDArray[np.float64], log_base: float) -> NDArray[np.int64]:
    """``floor(log(v)/log_base + 10⁻⁹)`` per value, ``ZERO_BIN`` where ``not v > 0``."""
    v = np.asarray(values, dtype=np.float64)
    positive = v > 0.0
    logs = np.array([math.log(x) for x in v[positive].tolist()], dtype=np.float64)
    bins = np.full(v.shape, ZERO_BIN, dtype=np.int64)
    with np.errstate(invalid="ignore"):  # an infinite norm: as the compiled cast does
        bins[positive] = np.floor(logs / log_base + _OFFSET).astype(np.int64)
    return bins


def _counts(bins: NDArray[np.int64]) -> tuple[NDArray[np.int64], NDArray[np.float64]]:
    index, counts = np.unique(bins, return_counts=True)
    return index.astype(np.int64), counts.astype(np.float64)


def _squared_norms(D: NDArray[np.float64]) -> NDArray[np.float64]:
    """``Σⱼ D[:, j]²`` added column after column (the compiled loop's order)."""
    acc = np.zeros(D.shape[0])
    for j in range(D.shape[1]):
        acc += D[:, j] * D[:, j]
    return acc


def _shifted(X: NDArray[Any], centre: NDArray[np.float64] | None,
             scale: NDArray[np.float64] | None) -> NDArray[np.float64]:
    """``(X − centre)/scale`` as float64: subtract, then divide."""
    D = np.array(X, dtype=np.float64)
    if centre is not None:
        D -= centre
    if scale is not None:
        D /= scale
    return D


def log_bin_counts(values: NDArray[np.float64], base: float,
                   ) -> tuple[NDArray[np.int64], NDArray[np.float64]]:
    """:func:`privpca.streaming._kernels.log_bin_counts`."""
    v = np.ascontiguousarray(values, dtype=np.float64).ravel()
    return _counts(_log_bins(v, math.log(base)))


def row_norm_bin_counts(
    X: NDArray[np.float64], centre: NDArray[np.float64] | None,
    scale: NDArray[np.float64] | None, base: float,
) -> tuple[NDArray[np.int64], NDArray[np.float64]]:
    """:func:`privpca.streaming._kernels.row_norm_bin_counts`."""
    norms = np.sqrt(_squared_norms(_shifted(X, centre, scale)))
    return _counts(_log_bins(norms, math.log(base)))


def binned_norm_sums(
    X: NDArray[np.float64], centre: NDArray[np.float64] | None, base: float
) -> tuple[NDArray[np.int64], NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]]:
    """:func:`privpca.streaming._kernels.binned_norm_sums`."""
    D = _shifted(X, centre, None)
    r = np.sqrt(_squared_norms(D))
    bins = _log_bins(r, math.log(base))
    index, counts = _counts(bins)
    rows = bins != ZERO_BIN  # x = c: adds nothing to either sum
    position = np.searchsorted(index, bins[rows])
    S = np.zeros((index.size, D.shape[1]))
    T = np.zeros((index.size, D.shape[1]))
    np.add.at(S, position, D[rows])
    np.add.at(T, position, D[rows] * (1.0 / r[rows])[:, None])
    return index, counts, S, T


def shifted_clipped_rows(
    x: NDArray[Any], centre: NDArray[np.float64] | None, scale: NDArray[np.float64] | None,
    bound: float, out: NDArray[np.float64],
) -> tuple[int, bool]:
    """:func:`privpca.streaming._kernels.shifted_clipped_rows` (the same four interleaved
    partial sums of the squared norm)."""
    D = _shifted(x, centre, scale)
    p = D.shape[1]
    q = p - p % 4
    part = [np.zeros(D.shape[0]) for _ in range(4)]
    with np.errstate(over="ignore", invalid="ignore"):  # reported as finite=False
        for j in range(q):
            part[j % 4] += D[:, j] * D[:, j]
        for j in range(q, p):
            part[0] += D[:, j] * D[:, j]
        r = np.sqrt((part[0] + part[1]) + (part[2] + part[3]))
    with np.errstate(invalid="ignore"):
        finite = bool(np.isfinite(r).all())
        over = r > bound  # an infinite norm (overflow of finite values) zeroes the row
        D[over] *= (bound / r[over])[:, None]
    out[...] = D
    return int(np.count_nonzero(over)), finite
