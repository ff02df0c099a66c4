"""Compiled passes (numba) behind DP-PCA's per-step statistics.

Each function here is one pass over a block of per-record gradients, doing what several NumPy
passes (and temporaries the size of the block) did: per step, one pass forms Algorithm 4's
pair differences subset by subset and finds each subset's top eigenvalue while its block is in
cache (:func:`pair_top_eigenvalues`; :func:`pair_gradients` then :func:`top_eigenvalues` is
the same in two passes), one forms Algorithm 5's gradients and counts their bins
(:func:`gradient_counts`) and one truncates and sums them (:func:`truncated_sums`). Every
pass is deterministic arithmetic on public parameters and the data; all randomness stays with
the callers (NumPy Generators). Gradients, pairs, counts and sums are the same arithmetic in
the same order as the NumPy passes they replaced; the subset eigenvalues differ from NumPy's
batched power iteration by rounding only (~1e-15 relative), which changes DP-PCA's output
only if one lies within that of a √2 bin edge.

Every pass here is compiled without fast-math: each sum is added in the order the code
writes it (IEEE, no reassociation, no fused multiply-add), so that each has a NumPy twin in
:mod:`privpca.mechanisms._numpy_kernels` giving the same bits, which DP-PCA runs on small
tables so as not to wait for their compile. The power iteration pays for its fixed order
(docs/BENCHMARKS.md): Algorithm 4's pass takes ~1.3× its time with reassociation
and fused multiply-adds, once compiled.

Gradients are ``g_i = A_i W`` flattened row-major (``q = p·k`` entries, entry ``a·k + c`` is
``(A_i W)[a, c]``), for vector records ``A_i = y_i y_iᵀ`` with ``y_i = x_{row_i} − centre``:
``g_i[a·k + c] = y_ia · (y_iᵀ W)_c``, the layout of
:meth:`privpca.solvers.oja.VectorGradients.gradients`.

Bins are those of :func:`privpca.mechanisms.histogram.linear_bins`: ``⌊g/h⌋`` computed as
``floor(g·(1/h))``, clamped to ``±2⁵²`` (NaN to the top bin, so that every value has a bin).

The passes over rows of ``X`` read rows in a random (public) order, one row per record: each
row is a cache and TLB miss, so they prefetch the rows a few records ahead (a hint to the
cache only; no effect on any result).

Non-finite rows: the passes over rows of ``X`` return whether a projection ``yᵀW`` was not
finite. A row holding NaN or ±inf always makes it so (``inf·0`` is NaN, NaN propagates), so
``False`` proves every row read finite; ``True`` may also be an overflow of finite values, and
the caller then checks the rows exactly. DP-PCA's papers' setting uses this instead of a pass
over ``X`` before the fit.

Threads (opt-in)
----------------
:func:`gradient_counts`, :func:`pair_top_eigenvalues`, :func:`pair_gradients` and
:func:`top_eigenvalues` run on one thread unless the environment variable
``PRIVPCA_NUM_THREADS`` (or :func:`set_num_threads`) asks for more; then they split their
records (or subsets) into one chunk per thread (numba ``prange``). The results are the same
bit for bit: every gradient, pair and eigenvalue is computed as on one thread, and the
chunks' integer counts are added. numba's default threading layer must not be entered from
two Python threads at once: leave this at 1 when fitting from several threads.
"""

from __future__ import annotations

import math
import os
from typing import Any

import numba
import numpy as np
from llvmlite import ir
from numba.core import cgutils, types
from numba.extending import intrinsic

__all__ = [
    "WINDOW",
    "bin_counts",
    "bin_range",
    "gradient_counts",
    "num_threads",
    "pair_gradients",
    "pair_top_eigenvalues",
    "set_num_threads",
    "top_eigenvalues",
    "truncated_sums",
]

_MAX_BIN = float(2**52)
_SQRT2 = math.sqrt(2.0)
_JIT: dict[str, Any] = {"cache": True, "nogil": True, "error_model": "numpy"}
_PARALLEL: dict[str, Any] = {**_JIT, "parallel": True}
_MIN_CHUNK = 512  # records per thread below which threads cost more than they save
_threads: int | None = None  # set_num_threads; None: PRIVPCA_NUM_THREADS, else 1
#: Bins per column that :func:`gradient_counts` counts directly (two more slots for spills).
WINDOW = 30
#: Block rows from which the power iteration's dot products run on the block's transpose.
_TRANSPOSE_MIN = 32
_AHEAD = 4  # records prefetched ahead: enough to hide a memory miss behind one row's work


def _prefetch_typer(typingctx, arr, i, a):
    """Ask the cache for ``arr[i, a]`` (LLVM's prefetch: a hint, never a fault or a result)."""
    sig = types.void(arr, i, a)

    def codegen(context, builder, signature, args):
        aty = signature.args[0]
        ary = context.make_array(aty)(context, builder, args[0])
        ptr = cgutils.get_item_pointer(
            context, builder, aty, ary, [args[1], args[2]], wraparound=False
        )
        i8p, i32 = ir.IntType(8).as_pointer(), ir.IntType(32)
        fn = builder.module.declare_intrinsic(
            "llvm.prefetch", fnty=ir.FunctionType(ir.VoidType(), [i8p, i32, i32, i32])
        )
        # read, high temporal locality, data cache
        builder.call(fn, [builder.bitcast(ptr, i8p), i32(0), i32(3), i32(1)])
        return context.get_dummy_value()

    return sig, codegen


_prefetch: Any = intrinsic(_prefetch_typer)


@numba.njit(inline="always", **_JIT)
def _prefetch_row(X, i):
    """Prefetch every cache line of row ``i`` of the C-ordered ``X``."""
    p = X.shape[1]
    for a in range(0, p, 8):
        _prefetch(X, i, a)
    _prefetch(X, i, p - 1)


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


@numba.njit(inline="always", **_JIT)
def _project1(X, i, centre, W):
    """``(X[i] − centre)·W[:, 0]``, summed as :func:`_project` sums it (bit for bit)."""
    p = X.shape[1]
    s0 = s1 = s2 = s3 = 0.0
    a = 0
    while a + 4 <= p:
        s0 += (X[i, a] - centre[a]) * W[a, 0]
        s1 += (X[i, a + 1] - centre[a + 1]) * W[a + 1, 0]
        s2 += (X[i, a + 2] - centre[a + 2]) * W[a + 2, 0]
        s3 += (X[i, a + 3] - centre[a + 3]) * W[a + 3, 0]
        a += 4
    while a < p:
        s0 += (X[i, a] - centre[a]) * W[a, 0]
        a += 1
    return (s0 + s1) + (s2 + s3)


def num_threads() -> int:
    """Threads the compiled passes use: :func:`set_num_threads`, ``PRIVPCA_NUM_THREADS`` or 1.

    Capped at numba's thread pool (``NUMBA_NUM_THREADS``, the number of cores by default).
    """
    n = _threads
    if n is None:
        try:
            n = int(os.environ.get("PRIVPCA_NUM_THREADS", "1"))
        except ValueError:
            n = 1
    return max(1, min(n, numba.config.NUMBA_NUM_THREADS))  # type: ignore[attr-defined]


def set_num_threads(n: int | None) -> None:
    """Use ``n`` threads in the compiled passes (``None``: back to ``PRIVPCA_NUM_THREADS``)."""
    global _threads
    _threads = None if n is None else max(1, int(n))


def _chunks(n_items: int, min_chunk: int) -> int:
    """How many threads to split ``n_items`` over (1: stay serial)."""
    t = num_threads()
    if t > 1:
        t = min(t, n_items // min_chunk)
        if t > 1:
            numba.set_num_threads(t)
    return max(t, 1)


@numba.njit(**_JIT)
def _window_base(X, rows, centre, W, inv_width, base, fbase, window):
    """``base[j]``: the first record's bin less half the window (also as a float)."""
    p, k = W.shape
    y = np.empty(p)
    proj = np.empty(k)
    _project(X, rows[0], centre, W, y, proj)
    for a in range(p):
        for c in range(k):
            j = a * k + c
            base[j] = _bin(y[a] * proj[c], inv_width) - window // 2
            fbase[j] = float(base[j])


@numba.njit(**_JIT)
def _count_rows(X, rows, start, stop, centre, W, inv_width, G, base, fbase, table):
    """:func:`gradient_counts` for the records ``start ≤ r < stop`` (adds to ``table``)."""
    p, k = W.shape
    q = p * k
    window = table.shape[1] - 2
    top = float(window)
    y = np.empty(p)
    proj = np.empty(k)
    slot = np.empty(q, dtype=np.int32)
    check = 0.0  # NaN or inf once a projection is not finite (x·0 is 0 only for finite x)
    for r in range(start, stop):
        if r + _AHEAD < stop:
            _prefetch_row(X, rows[r + _AHEAD])
        if k == 1:
            # Branch-free, in floats (vectorised): ⌊g/h⌋ − base, clamped to the window's
            # spill slots; exact for every value in the window (integers below 2⁵³).
            i = rows[r]
            pc = _project1(X, i, centre, W)
            check += pc * 0.0
            for a in range(p):
                g = (X[i, a] - centre[a]) * pc
                G[r, a] = g
                v = g * inv_width
                v = v if v < _MAX_BIN else _MAX_BIN  # NaN too: the top bin
                v = v if v > -_MAX_BIN else -_MAX_BIN
                f = np.floor(v) - fbase[a]
                f = f if f > -1.0 else -1.0
                f = f if f < top else top
                slot[a] = np.int32(f) + 1
            for a in range(p):
                table[a, slot[a]] += 1
            continue
        _project(X, rows[r], centre, W, y, proj)
        for c in range(k):
            check += proj[c] * 0.0
        for a in range(p):
            for c in range(k):
                j = a * k + c
                g = y[a] * proj[c]
                G[r, j] = g
                v = _bin(g, inv_width) - base[j]
                if v < -1:
                    v = -1
                elif v > window:
                    v = window
                table[j, v + 1] += 1
    return check != 0.0


@numba.njit(**_JIT)
def _gradient_counts(X, rows, centre, W, inv_width, G, base, table):
    table[:] = 0
    if rows.shape[0] == 0:
        base[:] = 0
        return False
    fbase = np.empty(base.shape[0])
    _window_base(X, rows, centre, W, inv_width, base, fbase, table.shape[1] - 2)
    return _count_rows(X, rows, 0, rows.shape[0], centre, W, inv_width, G, base, fbase, table)


@numba.njit(**_PARALLEL)
def _gradient_counts_parallel(X, rows, centre, W, inv_width, G, base, table, n_chunks):
    b = rows.shape[0]
    fbase = np.empty(base.shape[0])
    _window_base(X, rows, centre, W, inv_width, base, fbase, table.shape[1] - 2)
    parts = np.zeros((n_chunks, table.shape[0], table.shape[1]), dtype=np.int64)
    bad = 0
    for c in numba.prange(n_chunks):
        bad += _count_rows(
            X,
            rows,
            c * b // n_chunks,
            (c + 1) * b // n_chunks,
            centre,
            W,
            inv_width,
            G,
            base,
            fbase,
            parts[c],
        )
    table[:] = 0
    for c in range(n_chunks):
        table += parts[c]
    return bad > 0


def gradient_counts(
    X: Any, rows: Any, centre: Any, W: Any, inv_width: float, G: Any, base: Any, table: Any
) -> bool:
    """Write ``G[r] = g(rows[r])`` and count each column's bins, in one pass.

    Each column ``j`` is counted in a window of :data:`WINDOW` bins starting at ``base[j]``
    (the first record's bin less half the window): ``table[j, 1 + v − base[j]]`` counts the
    bin ``v``; ``table[j, 0]`` and ``table[j, −1]`` count the values below and above the
    window (a column with such spills must be counted again, exactly, by the caller).

    Parameters
    ----------
    X : ndarray of shape (n, p), C-ordered
    rows : ndarray of intp, shape (b,)
        Rows of ``X``, in the order of ``G``'s rows.
    centre : ndarray of shape (p,)
        Subtracted from every row (zeros: none; ``x − 0.0`` is ``x`` bit for bit).
    W : ndarray of shape (p, k), C-ordered
    inv_width : float
        ``1/h`` of the bins.
    G : ndarray of shape (≥ b, p·k), C-ordered
        Output; rows beyond ``b`` are left alone.
    base : ndarray of int64, shape (p·k,)
        Output: the bin counted in ``table[j, 1]``.
    table : ndarray of int64, shape (p·k, WINDOW + 2), C-ordered
        Output (overwritten).

    Returns
    -------
    bool
        Whether some row's projection ``yᵀW`` was not finite: a row read holds NaN or
        infinity, or finite values overflowed (the caller checks the rows exactly). False:
        every row read is finite.
    """
    n_chunks = _chunks(rows.shape[0], _MIN_CHUNK)
    if n_chunks > 1:
        return bool(
            _gradient_counts_parallel(X, rows, centre, W, inv_width, G, base, table, n_chunks)
        )
    return bool(_gradient_counts(X, rows, centre, W, inv_width, G, base, table))


@numba.njit(**_JIT)
def _pair_rows(X, rows, start, stop, limit, centre, W, P, o):
    """:func:`pair_gradients` for the pairs ``start ≤ i < stop``, into ``P[i − o]``.

    Rows are prefetched ahead up to the pair ``limit`` (the next call's rows too). Returns
    whether a projection was not finite (as :func:`gradient_counts`).
    """
    p, k = W.shape
    y0 = np.empty(p)
    y1 = np.empty(p)
    proj0 = np.empty(k)
    proj1 = np.empty(k)
    check = 0.0
    for i in range(start, stop):
        if i + _AHEAD < limit:
            _prefetch_row(X, rows[2 * (i + _AHEAD)])
            _prefetch_row(X, rows[2 * (i + _AHEAD) + 1])
        if k == 1:  # no copies of the rows: one read each, from the cache
            i0, i1 = rows[2 * i], rows[2 * i + 1]
            p0, p1 = _project1(X, i0, centre, W), _project1(X, i1, centre, W)
            check += p0 * 0.0 + p1 * 0.0
            for a in range(p):
                P[i - o, a] = ((X[i1, a] - centre[a]) * p1 - (X[i0, a] - centre[a]) * p0) / _SQRT2
            continue
        _project(X, rows[2 * i], centre, W, y0, proj0)
        _project(X, rows[2 * i + 1], centre, W, y1, proj1)
        for c in range(k):
            check += proj0[c] * 0.0 + proj1[c] * 0.0
        for a in range(p):
            for c in range(k):
                P[i - o, a * k + c] = (y1[a] * proj1[c] - y0[a] * proj0[c]) / _SQRT2
    return check != 0.0


@numba.njit(**_JIT)
def _pair_gradients(X, rows, centre, W, P):
    n = rows.shape[0] // 2
    return _pair_rows(X, rows, 0, n, n, centre, W, P, 0)


@numba.njit(**_PARALLEL)
def _pair_gradients_parallel(X, rows, centre, W, P, n_chunks):
    n = rows.shape[0] // 2
    bad = 0
    for c in numba.prange(n_chunks):
        stop = (c + 1) * n // n_chunks
        bad += _pair_rows(X, rows, c * n // n_chunks, stop, stop, centre, W, P, 0)
    return bad > 0


def pair_gradients(X: Any, rows: Any, centre: Any, W: Any, P: Any) -> bool:
    """``P[i] = (g(rows[2i+1]) − g(rows[2i]))/√2``, ``i < len(rows)//2``: Algorithm 4's pairs.

    Returns whether a projection was not finite (as :func:`gradient_counts`). DP-PCA forms
    the pairs with their eigenvalues (:func:`pair_top_eigenvalues`); this is the reference.
    """
    n_chunks = _chunks(rows.shape[0] // 2, _MIN_CHUNK // 2)
    if n_chunks > 1:
        return bool(_pair_gradients_parallel(X, rows, centre, W, P, n_chunks))
    return bool(_pair_gradients(X, rows, centre, W, P))


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


@numba.njit(**_JIT)
def _dots(P, o, s, x, d, St):
    """``d_i = P[o+i]·x`` for ``i < s``, each summed in the order of the columns from 0.0.

    ``St`` (``q × ≥s``) holds the block's transpose when ``s ≥`` :data:`_TRANSPOSE_MIN`: the
    sums then advance over all rows at once (vectorised), else four rows at a time. The
    same bits either way.
    """
    q = P.shape[1]
    if s >= _TRANSPOSE_MIN:
        for i in range(s):
            d[i] = 0.0
        for a in range(q):
            xa = x[a]
            for i in range(s):
                d[i] += St[a, i] * xa
        return
    i = 0
    while i + 4 <= s:
        d0 = d1 = d2 = d3 = 0.0
        for a in range(q):
            xa = x[a]
            d0 += P[o + i, a] * xa
            d1 += P[o + i + 1, a] * xa
            d2 += P[o + i + 2, a] * xa
            d3 += P[o + i + 3, a] * xa
        d[i], d[i + 1], d[i + 2], d[i + 3] = d0, d1, d2, d3
        i += 4
    while i < s:
        acc = 0.0
        for a in range(q):
            acc += P[o + i, a] * x[a]
        d[i] = acc
        i += 1


@numba.njit(**_JIT)
def _axpy(P, o, s, d, y):
    """``y = Σ_i d_i P[o+i]``, ``i < s``: four rows to a term, then the rows left one by one."""
    q = P.shape[1]
    for a in range(q):
        y[a] = 0.0
    i = 0
    while i + 4 <= s:
        d0, d1, d2, d3 = d[i], d[i + 1], d[i + 2], d[i + 3]
        for a in range(q):
            y[a] += (
                d0 * P[o + i, a]
                + d1 * P[o + i + 1, a]
                + d2 * P[o + i + 2, a]
                + d3 * P[o + i + 3, a]
            )
        i += 4
    while i < s:
        di = d[i]
        for a in range(q):
            y[a] += di * P[o + i, a]
        i += 1


@numba.njit(**_JIT)
def _top_one(pairs, o, s, n_iter, x, y, d, St):
    """:func:`top_eigenvalues` of the block ``pairs[o:o+s]`` (scratch ``x, y`` (q), ``d`` (s),
    ``St`` (q × ≥s))."""
    q = pairs.shape[1]
    gram = s <= q
    if s >= _TRANSPOSE_MIN:
        for i in range(s):
            for a in range(q):
                St[a, i] = pairs[o + i, a]
    x0 = 1.0 / math.sqrt(s if gram else q)
    for a in range(q):
        x[a] = 0.0 if gram else x0
    if gram:  # x = Sᵀv₀
        for i in range(s):
            for a in range(q):
                x[a] += x0 * pairs[o + i, a]
    for _ in range(n_iter):
        _dots(pairs, o, s, x, d, St)
        _axpy(pairs, o, s, d, y)
        # w = Mv is d/s (Gram) or y/s; the next x is Sᵀw/‖w‖ (Gram) or w/‖w‖: y/(s‖w‖)
        nrm = 0.0
        if gram:
            for i in range(s):
                wi = d[i] / s
                nrm += wi * wi
        else:
            for a in range(q):
                wa = y[a] / s
                nrm += wa * wa
        nrm = math.sqrt(nrm)
        if 1e-300 > nrm:  # max(nrm, 1e-300), NaN kept (Python's max)
            nrm = 1e-300
        for a in range(q):
            x[a] = (y[a] / s) / nrm
    # vᵀMv = ‖Sᵀv‖²/s = ‖x‖²/s (Gram) or ‖Sv‖²/s
    acc = 0.0
    if gram:
        for a in range(q):
            acc += x[a] * x[a]
    else:
        _dots(pairs, o, s, x, d, St)
        for i in range(s):
            acc += d[i] * d[i]
    return acc / s


@numba.njit(**_JIT)
def _top_eigenvalues(pairs, n_subsets, n_iter, out):
    q = pairs.shape[1]
    s = pairs.shape[0] // n_subsets
    x, y, d, St = np.empty(q), np.empty(q), np.empty(s), np.empty((q, s))
    for m in range(n_subsets):
        out[m] = _top_one(pairs, m * s, s, n_iter, x, y, d, St)


@numba.njit(**_PARALLEL)
def _top_eigenvalues_parallel(pairs, n_subsets, n_iter, out, n_chunks):
    q = pairs.shape[1]
    s = pairs.shape[0] // n_subsets
    for c in numba.prange(n_chunks):
        x, y, d, St = np.empty(q), np.empty(q), np.empty(s), np.empty((q, s))
        for m in range(c * n_subsets // n_chunks, (c + 1) * n_subsets // n_chunks):
            out[m] = _top_one(pairs, m * s, s, n_iter, x, y, d, St)


def top_eigenvalues(pairs: Any, n_subsets: int, n_iter: int, out: Any) -> None:
    """Power-iteration top eigenvalue of each block's second moment, into ``out[j]``.

    ``S_j = pairs[j·s:(j+1)·s]`` with ``s = len(pairs)//n_subsets``. The iterate ``v`` lives in
    the smaller of ``ℝˢ`` (``M = S Sᵀ/s``, the Gram) and ``ℝ^q`` (``M = SᵀS/s``), starts at
    the normalised all-ones vector, takes ``n_iter`` steps ``v ← Mv/max(‖Mv‖, 1e-300)`` and
    returns the Rayleigh quotient ``vᵀMv`` — the function NumPy's batched version computed,
    without forming ``M``: each step is one pass over ``S_j`` (``d = Sx``, ``y = Sᵀd``, with
    ``x = Sᵀv`` for the Gram, ``x = v`` otherwise), so it differs from it only by rounding
    (~1e-15 relative). Every sum is added in the code's order (its NumPy twin is
    :func:`privpca.mechanisms._numpy_kernels.top_eigenvalues`).
    """
    work = n_subsets * (pairs.shape[0] // max(n_subsets, 1)) * pairs.shape[1] * (n_iter + 1)
    n_chunks = min(_chunks(work, 1 << 18), n_subsets)
    if n_chunks > 1:
        _top_eigenvalues_parallel(pairs, n_subsets, n_iter, out, n_chunks)
    else:
        _top_eigenvalues(pairs, n_subsets, n_iter, out)


@numba.njit(**_JIT)
def _rows_check(X, rows, start, stop):
    """0 when the rows ``rows[start:stop]`` of ``X`` are finite, else NaN or inf (x·0 ≠ 0)."""
    check = 0.0
    for r in range(start, stop):
        i = rows[r]
        for a in range(X.shape[1]):
            check += X[i, a] * 0.0
    return check


@numba.njit(**_JIT)
def _pair_subsets(X, rows, centre, W, s, first, stop, n_iter, out):
    """:func:`pair_top_eigenvalues` for the subsets ``first ≤ m < stop``."""
    q = W.size
    S = np.empty((s, q))
    x, y, d, St = np.empty(q), np.empty(q), np.empty(s), np.empty((q, s))
    bad = False
    for m in range(first, stop):
        bad |= _pair_rows(X, rows, m * s, (m + 1) * s, stop * s, centre, W, S, m * s)
        if m + 1 < stop:
            # The next subset's rows (beyond those _pair_rows prefetched) arrive from memory
            # while this subset's power iteration computes on the cache.
            for j in range(2 * ((m + 1) * s + _AHEAD), 2 * (m + 2) * s):
                _prefetch_row(X, rows[j])
        out[m] = _top_one(S, 0, s, n_iter, x, y, d, St)
    return bad


@numba.njit(**_PARALLEL)
def _pair_top_eigenvalues_parallel(X, rows, centre, W, n_subsets, n_iter, out, n_chunks):
    s = rows.shape[0] // 2 // n_subsets
    bad = 0
    for c in numba.prange(n_chunks):
        first, stop = c * n_subsets // n_chunks, (c + 1) * n_subsets // n_chunks
        bad += _pair_subsets(X, rows, centre, W, s, first, stop, n_iter, out)
    return bad > 0 or _rows_check(X, rows, 2 * n_subsets * s, rows.shape[0]) != 0.0


def pair_top_eigenvalues(
    X: Any, rows: Any, centre: Any, W: Any, n_subsets: int, n_iter: int, out: Any
) -> bool:
    """Algorithm 4's subset eigenvalues straight from rows of ``X``, one subset at a time.

    The same values as :func:`pair_gradients` into ``P`` followed by
    ``top_eigenvalues(P, n_subsets, n_iter, out)``, bit for bit (the same arithmetic), in one
    pass: each subset's ``s = (len(rows)//2)//n_subsets`` pairs are formed into a small block
    that stays in cache for its power iteration, while the next subset's rows are fetched
    from memory. No ``(len(rows)//2) × p·k`` table of pairs is written and read back.

    Parameters
    ----------
    X : ndarray of shape (n, p), C-ordered
    rows : ndarray of intp, shape (b,)
        Rows of ``X``; pair ``i`` is ``(rows[2i], rows[2i+1])``; pairs beyond
        ``n_subsets·s`` are not formed (as in :func:`top_eigenvalues`), but their rows are
        checked.
    centre : ndarray of shape (p,)
    W : ndarray of shape (p, k), C-ordered
    n_subsets, n_iter : int
    out : ndarray of shape (≥ n_subsets,)
        Output: ``out[j]`` is subset ``j``'s eigenvalue (0 when ``s = 0``).

    Returns
    -------
    bool
        Whether some row of ``rows`` may hold NaN or infinity: a projection was not finite
        (or finite values overflowed) or an unpaired row is not finite; the caller checks
        the rows exactly. False: every row of ``rows`` is finite.
    """
    s = (rows.shape[0] // 2) // max(n_subsets, 1)
    if s == 0:
        out[:n_subsets] = 0.0
        return bool(_rows_check(X, rows, 0, rows.shape[0]) != 0.0)
    work = n_subsets * s * W.size * (n_iter + 1)
    n_chunks = min(_chunks(work, 1 << 18), n_subsets)
    if n_chunks > 1:
        return bool(
            _pair_top_eigenvalues_parallel(X, rows, centre, W, n_subsets, n_iter, out, n_chunks)
        )
    # The serial path calls the subsets' kernel from here: one compiled layer less (numba
    # optimises each layer's callees again, so the first call compiles ~20% faster).
    bad = _pair_subsets(X, rows, centre, W, s, 0, n_subsets, n_iter, out)
    return bool(bad or _rows_check(X, rows, 2 * n_subsets * s, rows.shape[0]) != 0.0)
