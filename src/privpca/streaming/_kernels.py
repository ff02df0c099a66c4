"""Compiled (numba) passes of the release pipeline's preprocessing.

The private mean needs, for a bound R that is itself released from the histogram of the row
norms, the clipped sum ``Σᵢ min(1, R/‖xᵢ − c‖)(xᵢ − c)``. Done directly this is three passes
over X (norms, histogram, clipped sum) with n-sized temporaries between them. Here one pass
computes, per bin ``j`` of the log grid ``[bʲ, bʲ⁺¹)`` of the norms ``rᵢ = ‖xᵢ − c‖``:

* the count of rows in the bin (the histogram the private quantile releases),
* ``Sⱼ = Σ (xᵢ − c)`` and ``Tⱼ = Σ (xᵢ − c)/rᵢ`` over the bin's rows.

The quantile is the upper edge ``R = bʲ⁺¹`` of a bin, so every bin lies wholly below or above
it: the clipped sum is ``Σ_{j' ≤ j} Sⱼ' + R·Σ_{j' > j} Tⱼ'`` (post-processing of exact sums,
nothing released in between). A row whose norm lies within 10⁻⁹ (relative) below an edge is
binned above it (the grid's rounding offset, as in
:func:`privpca.mechanisms.histogram.geometric_bin`) and so contributes ``R(x − c)/r``, whose
norm is R: the sensitivity 2R of the mean is unchanged.

Bins are ``floor(log(r)/log(b) + 10⁻⁹)``; zero rows go to a bin of their own (index −2⁵²)
and contribute nothing to S and T. Nothing here is random.

Small tables never reach this module: :mod:`privpca.streaming._numpy_kernels` holds NumPy
twins of these passes (the same bits), and :mod:`privpca.streaming.reductions` runs them
until a process has read :data:`~privpca.streaming.reductions.JIT_MIN_CELLS` cells with a
pass, so a first fit on a small table neither imports numba nor waits for a compile.
"""

from __future__ import annotations

import math
from typing import Any

import numba
import numpy as np
from numpy.typing import NDArray

__all__ = [
    "ZERO_BIN", "binned_norm_sums", "log_bin_counts", "row_norm_bin_counts",
    "shifted_clipped_rows",
]

#: Bin index of the zero values (below every other bin), as in ``geometric_bin``.
ZERO_BIN = -(2**52)
_OFFSET = 1e-9  # puts exact powers of the base in the bin they open (log rounding)
_JIT: dict[str, Any] = {"cache": True, "nogil": True, "error_model": "numpy"}


@numba.njit(**_JIT)
def _log_bin(v, log_base):
    if not v > 0.0:
        return ZERO_BIN
    return math.floor(math.log(v) / log_base + _OFFSET)


@numba.njit(**_JIT)
def _counts_from_bins(bins):
    n = bins.size
    zeros = 0
    lo = 0
    hi = -1
    first = True
    for i in range(n):
        b = bins[i]
        if b == ZERO_BIN:
            zeros += 1
        elif first:
            lo = b
            hi = b
            first = False
        elif b < lo:
            lo = b
        elif b > hi:
            hi = b
    span = hi - lo + 1 if not first else 0
    table = np.zeros(max(span, 0), dtype=np.int64)
    for i in range(n):
        b = bins[i]
        if b != ZERO_BIN:
            table[b - lo] += 1
    n_out = (1 if zeros else 0) + int(np.count_nonzero(table))
    index = np.empty(n_out, dtype=np.int64)
    counts = np.empty(n_out, dtype=np.float64)
    k = 0
    if zeros:
        index[0] = ZERO_BIN
        counts[0] = zeros
        k = 1
    for j in range(span):
        if table[j]:
            index[k] = lo + j
            counts[k] = table[j]
            k += 1
    return index, counts


@numba.njit(**_JIT)
def _log_bin_counts(values, log_base):
    bins = np.empty(values.size, dtype=np.int64)
    for i in range(values.size):
        bins[i] = _log_bin(values[i], log_base)
    return _counts_from_bins(bins)


def log_bin_counts(
    values: NDArray[np.float64], base: float
) -> tuple[NDArray[np.int64], NDArray[np.float64]]:
    """``(bin index, count)`` of every non-empty bin of ``values`` (≥ 0) on the log grid of
    ratio ``base``, ascending (the zero bin first): ``geometric_bin`` and its counts in one
    compiled pass without n-sized temporaries."""
    v = np.ascontiguousarray(values, dtype=np.float64).ravel()
    index, counts = _log_bin_counts(v, math.log(base))
    return np.asarray(index), np.asarray(counts)


@numba.njit(**_JIT)
def _row_norm_bin_counts(X, centre, has_centre, scale, has_scale, log_base):
    n, p = X.shape
    bins = np.empty(n, dtype=np.int64)
    for i in range(n):
        acc = 0.0
        for j in range(p):
            d = X[i, j] - centre[j] if has_centre else X[i, j]
            if has_scale:
                d /= scale[j]
            acc += d * d
        bins[i] = _log_bin(math.sqrt(acc), log_base)
    return _counts_from_bins(bins)


def row_norm_bin_counts(
    X: NDArray[np.float64], centre: NDArray[np.float64] | None,
    scale: NDArray[np.float64] | None, base: float,
) -> tuple[NDArray[np.int64], NDArray[np.float64]]:
    """:func:`log_bin_counts` of the row norms ``‖(x − centre)/scale‖``, in one compiled pass
    over X without a shifted copy."""
    Xc = np.ascontiguousarray(X, dtype=np.float64)
    p = Xc.shape[1]
    c = np.zeros(p) if centre is None else np.ascontiguousarray(centre, dtype=np.float64)
    sc = np.ones(p) if scale is None else np.ascontiguousarray(scale, dtype=np.float64)
    index, counts = _row_norm_bin_counts(Xc, c, centre is not None, sc, scale is not None,
                                         math.log(base))
    return np.asarray(index), np.asarray(counts)


@numba.njit(**_JIT)
def _grow(S, T, counts, lo, new_lo, new_hi):
    """Tables for bins ``new_lo..new_hi`` holding the old ones (bins ``lo..``)."""
    p = S.shape[1]
    S2 = np.zeros((new_hi - new_lo + 1, p))
    T2 = np.zeros((new_hi - new_lo + 1, p))
    c2 = np.zeros(new_hi - new_lo + 1, dtype=np.int64)
    off = lo - new_lo
    for k in range(S.shape[0]):
        c2[k + off] = counts[k]
        for j in range(p):
            S2[k + off, j] = S[k, j]
            T2[k + off, j] = T[k, j]
    return S2, T2, c2


@numba.njit(**_JIT)
def _binned_norm_sums(X, centre, has_centre, log_base):
    n, p = X.shape
    sub = 256  # rows per sweep pair: the second sweep reads them from cache
    bins = np.empty(sub, dtype=np.int64)
    inv = np.empty(sub)
    zeros = 0
    lo = 0
    hi = -1  # empty table
    S = np.zeros((0, p))
    T = np.zeros((0, p))
    cnt = np.zeros(0, dtype=np.int64)
    for s0 in range(0, n, sub):
        s1 = min(s0 + sub, n)
        b_lo = 0
        b_hi = -1
        for i in range(s0, s1):
            acc = 0.0
            for j in range(p):
                d = X[i, j] - centre[j] if has_centre else X[i, j]
                acc += d * d
            r = math.sqrt(acc)
            b = _log_bin(r, log_base)
            bins[i - s0] = b
            if b == ZERO_BIN:
                zeros += 1
                continue
            inv[i - s0] = 1.0 / r
            if b_hi < b_lo:
                b_lo = b
                b_hi = b
            elif b < b_lo:
                b_lo = b
            elif b > b_hi:
                b_hi = b
        if b_hi >= b_lo and (hi < lo or b_lo < lo or b_hi > hi):
            new_lo = b_lo if hi < lo else min(lo, b_lo)
            new_hi = b_hi if hi < lo else max(hi, b_hi)
            S, T, cnt = _grow(S, T, cnt, lo if hi >= lo else new_lo, new_lo, new_hi)
            lo = new_lo
            hi = new_hi
        for i in range(s0, s1):
            b = bins[i - s0]
            if b == ZERO_BIN:
                continue  # x = c: adds nothing to either sum
            k = b - lo
            w = inv[i - s0]
            cnt[k] += 1
            for j in range(p):
                d = X[i, j] - centre[j] if has_centre else X[i, j]
                S[k, j] += d
                T[k, j] += d * w
    m = (1 if zeros else 0) + int(np.count_nonzero(cnt))
    index = np.empty(m, dtype=np.int64)
    counts = np.empty(m)
    S_out = np.zeros((m, p))
    T_out = np.zeros((m, p))
    k = 0
    if zeros:
        index[0] = ZERO_BIN
        counts[0] = zeros
        k = 1
    for t in range(cnt.size):
        if cnt[t]:
            index[k] = lo + t
            counts[k] = cnt[t]
            for j in range(p):
                S_out[k, j] = S[t, j]
                T_out[k, j] = T[t, j]
            k += 1
    return index, counts, S_out, T_out


def binned_norm_sums(
    X: NDArray[np.float64], centre: NDArray[np.float64] | None, base: float
) -> tuple[NDArray[np.int64], NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]]:
    """``(index, counts, S, T)`` of the rows of ``X`` binned by ``‖x − centre‖`` (module
    docstring): one compiled pass over X, memory O(bins × p)."""
    Xc = np.ascontiguousarray(X, dtype=np.float64)
    has_centre = centre is not None
    c = (np.ascontiguousarray(centre, dtype=np.float64) if has_centre
         else np.zeros(Xc.shape[1]))
    index, counts, S, T = _binned_norm_sums(Xc, c, has_centre, math.log(base))
    return np.asarray(index), np.asarray(counts), np.asarray(S), np.asarray(T)


@numba.njit(**_JIT)
def _shifted_clipped_rows(x, centre, has_centre, scale, has_scale, bound, out):
    m, p = x.shape
    q = p - p % 4
    n_over = 0
    finite = True
    for i in range(m):
        for j in range(p):  # vectorised: no reduction in this loop
            d = np.float64(x[i, j])
            if has_centre:
                d -= centre[j]
            if has_scale:
                d /= scale[j]
            out[i, j] = d
        # Four partial sums: the squared norm is not one serial chain of additions.
        a0 = a1 = a2 = a3 = 0.0
        for j in range(0, q, 4):
            a0 += out[i, j] * out[i, j]
            a1 += out[i, j + 1] * out[i, j + 1]
            a2 += out[i, j + 2] * out[i, j + 2]
            a3 += out[i, j + 3] * out[i, j + 3]
        for j in range(q, p):
            a0 += out[i, j] * out[i, j]
        r = math.sqrt((a0 + a1) + (a2 + a3))
        if not math.isfinite(r):
            finite = False
        if r > bound:  # an infinite norm (overflow of finite values) zeroes the row
            f = bound / r
            for j in range(p):
                out[i, j] *= f
            n_over += 1
    return n_over, finite


def shifted_clipped_rows(
    x: NDArray[Any], centre: NDArray[np.float64] | None, scale: NDArray[np.float64] | None,
    bound: float, out: NDArray[np.float64],
) -> tuple[int, bool]:
    """Write ``clip_bound((x − centre)/scale)`` of the rows of ``x`` (any numeric dtype,
    converted to float64 on the fly) into ``out`` (``x.shape``, float64), in one compiled pass
    that stays in cache: conversion, shift, norm and clipping per row. Returns how many rows
    were clipped and whether every norm was finite (any NaN or infinity in ``x`` makes its
    row's norm NaN or infinite; so may overflow of huge finite values). The operations are
    those of the NumPy path (subtract, then divide), so unclipped rows agree with it bit for
    bit; the norms are summed in four interleaved partial sums (a clipped row's factor may
    differ from NumPy's in the last bit)."""
    p = x.shape[1]
    c = np.zeros(p) if centre is None else np.ascontiguousarray(centre, dtype=np.float64)
    sc = np.ones(p) if scale is None else np.ascontiguousarray(scale, dtype=np.float64)
    n_over, finite = _shifted_clipped_rows(x, c, centre is not None, sc, scale is not None,
                                           float(bound), out)
    return int(n_over), bool(finite)
