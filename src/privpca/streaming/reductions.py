"""The pipeline's sums over rows, as block reductions of a :class:`RowSource`.

Each function is exact (no noise): the caller adds the calibrated noise to the total, once.
The block functions are module-level so that Dask can ship them to worker processes.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

import numpy as np
from numpy.typing import NDArray

from privpca._validation import row_norms
from privpca.mechanisms.histogram import _column_counts, geometric_bin
from privpca.streaming import _numpy_kernels
from privpca.streaming._numpy_kernels import ZERO_BIN
from privpca.streaming.sources import RowSource, bounded_block, check_overflow, check_shape

__all__ = [
    "JIT_MIN_CELLS",
    "BinCounts",
    "BinnedSums",
    "binned_norm_sums",
    "clipped_gram",
    "clipped_product",
    "clipped_sum",
    "count_rows",
    "deviation_counts",
    "norm_counts",
    "normalised_moments",
    "projected_moments",
    "randomised_norm_answers",
]

#: Cells (rows × columns) each pass of :mod:`privpca.streaming._kernels` reads in NumPy, in a
#: process, before its compiled twin takes over. Compiling costs 2–8 s per kernel the first
#: time an install runs it (and loading it from the cache with numba's import ~0.5 s); the
#: NumPy twins cost 20–50 ns a cell, so 4·10⁶ cells (≤ 0.2 s a kernel) is about where even a
#: cached compile pays. Both give the same bits (:mod:`privpca.streaming._numpy_kernels`):
#: the choice, made on public shapes only, changes the time and nothing else.
JIT_MIN_CELLS = 4_000_000
_cells_seen: dict[str, int] = {}


def _kernel(name: str, cells: int) -> Callable[..., Any]:
    """The NumPy pass ``name`` while this process has read ≤ :data:`JIT_MIN_CELLS` cells
    with it, then the compiled one (numba imported, and compiled or loaded, on first use)."""
    seen = _cells_seen[name] = _cells_seen.get(name, 0) + cells
    if seen <= JIT_MIN_CELLS:
        return getattr(_numpy_kernels, name)
    from privpca.streaming import _kernels
    return getattr(_kernels, name)


def _expect(name: str, source: RowSource) -> None:
    """Count a whole table's cells for pass ``name`` before its first block: a table over
    :data:`JIT_MIN_CELLS` runs compiled from its first block (no NumPy head start)."""
    _cells_seen[name] = _cells_seen.get(name, 0) + source.n_samples * source.n_features


def log_bin_counts(values: NDArray[np.float64], base: float) -> tuple[NDArray[np.int64],
                                                                     NDArray[np.float64]]:
    """:func:`privpca.streaming._kernels.log_bin_counts`, in NumPy for small inputs."""
    return _kernel("log_bin_counts", np.size(values))(values, base)


def row_norm_bin_counts(
    X: NDArray[np.float64], centre: NDArray[np.float64] | None,
    scale: NDArray[np.float64] | None, base: float,
) -> tuple[NDArray[np.int64], NDArray[np.float64]]:
    """:func:`privpca.streaming._kernels.row_norm_bin_counts`, in NumPy for small inputs."""
    return _kernel("row_norm_bin_counts", np.size(X))(
        X, centre, scale, base)


def shifted_clipped_rows(
    x: NDArray[Any], centre: NDArray[np.float64] | None, scale: NDArray[np.float64] | None,
    bound: float, out: NDArray[np.float64],
) -> tuple[int, bool]:
    """:func:`privpca.streaming._kernels.shifted_clipped_rows`, in NumPy for small inputs."""
    return _kernel("shifted_clipped_rows", np.size(x))(
        x, centre, scale, bound, out)


def _binned_norm_sums(
    X: NDArray[np.float64], centre: NDArray[np.float64] | None, base: float
) -> tuple[NDArray[np.int64], NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]]:
    return _kernel("binned_norm_sums", np.size(X))(X, centre, base)


#: ``(bin index, count)`` of every non-empty bin of one histogram on a log grid.
BinCounts = tuple[NDArray[np.int64], NDArray[np.float64]]


@dataclass(frozen=True)
class BinnedSums:
    """Rows binned on the log grid by ``r = ‖x − c‖``: per non-empty bin (ascending) its
    count, ``S = Σ (x − c)`` and ``T = Σ (x − c)/r`` (:mod:`privpca.streaming._kernels`).

    One pass gives both the norm histogram of a private bound R and, once R (a bin edge) is
    released, the exact clipped sum ``Σ clip_R(x − c)`` (:meth:`clipped_sum`), so a round of
    the private mean reads the table once instead of twice.
    """

    index: NDArray[np.int64]
    counts: NDArray[np.float64]
    S: NDArray[np.float64]
    T: NDArray[np.float64]

    @classmethod
    def of(cls, X: NDArray[np.float64], centre: NDArray[np.float64] | None,
           base: float) -> BinnedSums:
        return cls(*_binned_norm_sums(X, centre, base))

    def merge(self, other: BinnedSums) -> BinnedSums:
        """The sums of both sets of rows (bins united, ascending)."""
        index, inverse = np.unique(np.concatenate([self.index, other.index]),
                                   return_inverse=True)
        m, p = len(index), self.S.shape[1]
        counts = np.zeros(m)
        S, T = np.zeros((m, p)), np.zeros((m, p))
        for part, rows in ((self, inverse[:len(self.index)]),
                           (other, inverse[len(self.index):])):
            counts[rows] += part.counts
            S[rows] += part.S
            T[rows] += part.T
        return BinnedSums(index.astype(np.int64), counts, S, T)

    def clipped_sum(self, bound: float, base: float) -> NDArray[np.float64]:
        """``Σ min(1, R/r)(x − c)`` for ``R = bound``, an edge ``base^j`` of the grid.

        Bins wholly below R are summed as they are, bins wholly above are scaled to norm R.
        The bins are placed against R by integer index: R computed another way (NumPy's
        vectorised power differs from Python's by an ulp) must not decide which side a bin
        lies on. Raises ValueError if R is not an edge (within 10⁻⁹ relative).
        """
        j = round(math.log(bound) / math.log(base)) if bound > 0 else 0
        if not (bound > 0 and abs(base**j - bound) <= 1e-9 * bound):
            raise ValueError(f"The bound {bound!r} is not an edge of the log grid of "
                             f"ratio {base!r}.")
        total = np.zeros(self.S.shape[1])
        for idx, s_row, t_row in zip(self.index, self.S, self.T, strict=True):
            if idx <= ZERO_BIN:
                continue  # rows equal to the centre add nothing
            total += s_row if idx < j else bound * t_row
        return total




def _shift(block: NDArray[np.float64], centre: NDArray[np.float64] | None,
           scale: NDArray[np.float64] | None = None, *,
           inplace: bool = False) -> NDArray[np.float64]:
    """``(block − centre)/scale``; in place when the block is the caller's own copy."""
    out = block
    if centre is not None:
        out = np.subtract(out, centre, out=out if inplace else None)
        inplace = True
    if scale is not None:
        out = np.divide(out, scale, out=out if inplace else None)
    return out


def _norms(block: NDArray[np.float64]) -> NDArray[np.float64]:
    return np.sqrt(np.einsum("ij,ij->i", block, block))


def _block_norm_counts(block: NDArray[np.float64], centre: NDArray[np.float64] | None,
                       base: float, scale: NDArray[np.float64] | None = None) -> BinCounts:
    return row_norm_bin_counts(block, centre, scale, base)


def _merge_counts(a: BinCounts, b: BinCounts) -> BinCounts:
    index, inverse = np.unique(np.concatenate([a[0], b[0]]), return_inverse=True)
    counts = np.bincount(inverse, weights=np.concatenate([a[1], b[1]]), minlength=len(index))
    return index.astype(np.int64), counts.astype(np.float64)


def norm_counts(source: RowSource, centre: NDArray[np.float64] | None, base: float, *,
                scale: NDArray[np.float64] | None = None) -> BinCounts:
    """Counts of ``‖(x − centre)/scale‖`` on the log grid of ratio ``base``, over every row."""
    _expect("row_norm_bin_counts", source)
    return source.reduce(partial(_block_norm_counts, centre=centre, base=base, scale=scale),
                         _merge_counts, desc="norms")


def _block_binned_sums(block: NDArray[np.float64], centre: NDArray[np.float64] | None,
                       base: float, scale: NDArray[np.float64] | None) -> BinnedSums:
    return BinnedSums.of(block if scale is None else block / scale, centre, base)


def _merge_binned(a: BinnedSums, b: BinnedSums) -> BinnedSums:
    return a.merge(b)


def binned_norm_sums(source: RowSource, centre: NDArray[np.float64] | None,
                     base: float, *, scale: NDArray[np.float64] | None = None) -> BinnedSums:
    """The rows binned by ``‖x − centre‖`` on the log grid of ratio ``base``, with each bin's
    count and sums (:class:`~privpca.pipeline.preprocessing.BinnedSums`): a norm histogram
    and the clipped sums at every edge of the grid, in one pass. With ``scale``, of the rows
    ``x/scale`` (``centre`` in those units)."""
    _expect("binned_norm_sums", source)
    return source.reduce(partial(_block_binned_sums, centre=centre, base=base, scale=scale),
                         _merge_binned, desc="norms and sums")


ColumnCounts = tuple[NDArray[np.intp], NDArray[np.int64], NDArray[np.float64]]


def _block_deviation_counts(block: NDArray[np.float64], centre: NDArray[np.float64],
                            base: float) -> ColumnCounts:
    return _column_counts(geometric_bin(np.abs(block - centre), base=base))


def _merge_column_counts(a: ColumnCounts, b: ColumnCounts) -> ColumnCounts:
    col = np.concatenate([a[0], b[0]]).astype(np.int64)
    index = np.concatenate([a[1], b[1]]).astype(np.int64)
    order = np.lexsort((index, col))  # by column, then bin (the release's noise order)
    col, index = col[order], index[order]
    counts = np.concatenate([a[2], b[2]])[order]
    first = np.ones(len(col), dtype=bool)
    first[1:] = (col[1:] != col[:-1]) | (index[1:] != index[:-1])
    starts = np.flatnonzero(first)
    return (col[starts].astype(np.intp), index[starts],
            np.add.reduceat(counts, starts) if len(starts) else counts)


def deviation_counts(source: RowSource, centre: NDArray[np.float64],
                     base: float) -> ColumnCounts:
    """Counts of ``|x_j − centre_j|`` on the log grid of ratio ``base``, one histogram per
    feature: every non-empty ``(feature, bin, count)``, ordered by feature then bin."""
    return source.reduce(partial(_block_deviation_counts, centre=centre, base=base),
                         _merge_column_counts, desc="feature deviations")


def _block_normalised_moments(
    block: NDArray[np.float64], centre: NDArray[np.float64], bounds: NDArray[np.float64],
    levels: tuple[float, ...],
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    d = block - centre
    d /= bounds
    first = np.clip(d, -1.0, 1.0).sum(axis=0)
    np.abs(d, out=d)
    squares = np.empty((len(levels), block.shape[1]))
    for i, k in enumerate(levels):
        w = np.minimum(d, k)
        w *= w
        squares[i] = w.sum(axis=0) / (k * k)
    return first, squares


def _add_pair(a: tuple[NDArray[np.float64], NDArray[np.float64]],
              b: tuple[NDArray[np.float64], NDArray[np.float64]]
              ) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    return a[0] + b[0], a[1] + b[1]


def normalised_moments(
    source: RowSource, centre: NDArray[np.float64], bounds: NDArray[np.float64],
    levels: tuple[float, ...] = (1.0,),
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """``(Σᵢ u_i, [Σᵢ w_iK for K in levels])`` per feature in one pass, with
    ``u = clip((x − centre)/bounds, ±1)`` and ``w_K = min(|x − centre|/(K·bounds), 1)²``."""
    return source.reduce(partial(_block_normalised_moments, centre=centre, bounds=bounds,
                                 levels=tuple(float(k) for k in levels)),
                         _add_pair, desc="feature moments")


def _members(
    labels: NDArray[np.int8] | None, group: int
) -> Callable[[int, int], tuple[NDArray[np.bool_]]] | None:
    """``aux`` for a reduction over the rows whose (public) label is ``group``."""
    if labels is None:
        return None
    return lambda start, stop: (labels[start:stop] == group,)


def _block_clipped_sum(block: NDArray[np.float64], mask: NDArray[np.bool_] | None = None, *,
                       centre: NDArray[np.float64] | None,
                       bound: float,
                       scale: NDArray[np.float64] | None = None) -> NDArray[np.float64]:
    if mask is not None:
        block = block[mask]  # a copy: shifted in place
    shifted = _shift(block, centre, scale, inplace=mask is not None)
    with np.errstate(divide="ignore"):
        weights = np.minimum(1.0, bound / _norms(shifted))
    return np.asarray(shifted.T @ weights)


def _add(a: NDArray[np.float64], b: NDArray[np.float64]) -> NDArray[np.float64]:
    return a + b


def clipped_sum(source: RowSource, centre: NDArray[np.float64] | None,
                bound: float, *, labels: NDArray[np.int8] | None = None,
                group: int = 0, scale: NDArray[np.float64] | None = None,
                ) -> NDArray[np.float64]:
    """``Σᵢ clip_bound((xᵢ − centre)/scale)`` over every row (or the rows labelled
    ``group``); no ``scale``: ``Σᵢ clip_bound(xᵢ − centre)``."""
    return source.reduce(partial(_block_clipped_sum, centre=centre, bound=bound, scale=scale),
                         _add, aux=_members(labels, group), desc="clipped sum")


def _clipped_rows(
    block: NDArray[np.float64], mask: NDArray[np.bool_] | None, *,
    centre: NDArray[np.float64] | None, scale: NDArray[np.float64] | None, bound: float,
    slack: float = 0.0, exact_norms: bool = False,
) -> tuple[NDArray[np.float64], int]:
    """``clip_bound((x − centre)/scale)`` for the block's (masked) rows, and how many clipped
    (``slack`` and ``exact_norms``: :func:`clipped_product`)."""
    shared = mask is None and centre is None and scale is None  # rows would be the block
    if mask is not None:
        block = block[mask]  # a copy already: shifted in place
    rows = _shift(block, centre, scale, inplace=mask is not None)
    norms = row_norms(rows) if exact_norms else _norms(rows)
    return _clip(rows, norms, bound, copy=shared, slack=slack)


def _clip(rows: NDArray[np.float64], norms: NDArray[np.float64], bound: float, *,
          copy: bool, slack: float = 0.0) -> tuple[NDArray[np.float64], int]:
    """``rows`` with every row whose norm exceeds ``bound`` (times ``1 + slack``) scaled onto
    ``bound`` (on a copy when ``copy`` and some row is: never modify the caller's block), and
    how many were."""
    over = norms > bound * (1.0 + slack)  # times 1.0 (no slack) is exact
    n_over = int(np.count_nonzero(over))
    if n_over:
        if copy:
            rows = rows.copy()
        rows[over] *= (bound / norms[over])[:, None]
    return rows, n_over


#: Rows per slice of a raw block in the statistic's pass: a slice's float64 copy (1.6 MB at
#: p = 100) stays in cache from its conversion through its norms to its product, and the
#: buffer is reused (no fresh block-sized allocation, and its page faults, per block).
SLICE_ROWS = 2048


def _raw_clipped_gram(
    block: NDArray[Any], *, centre: NDArray[np.float64] | None,
    scale: NDArray[np.float64] | None, bound: float, with_sum: bool,
) -> tuple[NDArray[np.float64], NDArray[np.float64] | None, int]:
    """``Σ yyᵀ`` (and ``Σ y`` with ``with_sum``), ``y = clip_bound((x − centre)/scale)``, for
    a raw block (any numeric dtype, unchecked), slice by slice: each slice converted,
    shifted, normed and clipped in one compiled pass into a reused float64 buffer (its norms,
    which any NaN or infinity reaches, are the finiteness check), then its product. With
    ``with_sum`` the buffer has a column of ones, so that the product's last row is ``Σ y``
    (no other pass). Returns the Gram, the sum (or None) and how many rows were clipped."""
    raw = check_shape(block, None)
    m, p = raw.shape
    q = p + 1 if with_sum else p
    buf = np.empty((min(m, SLICE_ROWS), q))
    if with_sum:
        buf[:, p] = 1.0
    total = np.zeros((q, q))
    n_over = 0
    for a in range(0, m, SLICE_ROWS):
        part = raw[a:a + SLICE_ROWS]
        full = buf[:part.shape[0]]
        clipped, finite = shifted_clipped_rows(part, centre, scale, bound, full[:, :p])
        if not finite:  # NaN or infinity (refused), or rows above MAX_ROW_NORM (bounded)
            clipped, finite = shifted_clipped_rows(bounded_block(part), centre, scale, bound,
                                                   full[:, :p])
            check_overflow(finite)
        n_over += clipped
        total += full.T @ full
    if with_sum:
        return total[:p, :p], total[p, :p].copy(), n_over
    return total, None, n_over


def _block_clipped_gram(
    block: NDArray[np.float64], mask: NDArray[np.bool_] | None = None, *,
    centre: NDArray[np.float64] | None, scale: NDArray[np.float64] | None, bound: float,
) -> tuple[NDArray[np.float64], int]:
    rows, n_over = _clipped_rows(block, mask, centre=centre, scale=scale, bound=bound)
    # NumPy recognises rows.T @ rows (its own BLAS syrk, measured ~1.5x faster here than
    # SciPy's dsyrk) and returns the full symmetric matrix.
    return rows.T @ rows, n_over


def _block_raw_clipped_gram(
    block: NDArray[Any], *, centre: NDArray[np.float64] | None,
    scale: NDArray[np.float64] | None, bound: float,
) -> tuple[NDArray[np.float64], int]:
    """:func:`_block_clipped_gram` of a raw block (``reduce(..., raw=True)``)."""
    if centre is None and scale is None and block.dtype == np.float64:
        # Nothing to shift: no copy (unless a row is clipped); the finiteness check reads
        # the norms the clipping needs.
        rows = check_shape(block, None)
        norms = _norms(rows)
        if not np.isfinite(norms).all():  # NaN or infinity (refused), or huge rows (bounded)
            rows = bounded_block(rows)
            norms = _norms(rows)
        rows, n_over = _clip(rows, norms, bound, copy=True)
        return rows.T @ rows, n_over
    gram, _, n_over = _raw_clipped_gram(block, centre=centre, scale=scale, bound=bound,
                                        with_sum=False)
    return gram, n_over


def _add_gram(a: tuple[NDArray[np.float64], int],
              b: tuple[NDArray[np.float64], int]) -> tuple[NDArray[np.float64], int]:
    return a[0] + b[0], a[1] + b[1]


def clipped_gram(
    source: RowSource, centre: NDArray[np.float64] | None,
    scale: NDArray[np.float64] | None, bound: float, *,
    labels: NDArray[np.int8] | None = None, group: int = 0,
) -> tuple[NDArray[np.float64], int]:
    """``Σᵢ yᵢyᵢᵀ`` with ``yᵢ = clip_bound((xᵢ − centre)/scale)`` (symmetric) over every row
    (or the rows labelled ``group``), and how many rows were clipped."""
    if labels is None:  # the blocks as stored: converted, shifted and checked in one pass
        _expect("shifted_clipped_rows", source)
        gram, n_clipped = source.reduce(
            partial(_block_raw_clipped_gram, centre=centre, scale=scale, bound=bound),
            _add_gram, desc="Gram", raw=True)
    else:
        gram, n_clipped = source.reduce(
            partial(_block_clipped_gram, centre=centre, scale=scale, bound=bound), _add_gram,
            aux=_members(labels, group), desc="Gram")
    return np.array(gram, order="C"), n_clipped


def _block_clipped_gram_sum(
    block: NDArray[Any], *, centre: NDArray[np.float64] | None,
    scale: NDArray[np.float64] | None, bound: float,
) -> tuple[NDArray[np.float64], NDArray[np.float64], int]:
    gram, total, n_over = _raw_clipped_gram(block, centre=centre, scale=scale, bound=bound,
                                            with_sum=True)
    assert total is not None
    return gram, total, n_over


def _add_gram_sum(a: tuple[NDArray[np.float64], NDArray[np.float64], int],
                  b: tuple[NDArray[np.float64], NDArray[np.float64], int],
                  ) -> tuple[NDArray[np.float64], NDArray[np.float64], int]:
    return a[0] + b[0], a[1] + b[1], a[2] + b[2]


def clipped_gram_and_sum(
    source: RowSource, centre: NDArray[np.float64] | None,
    scale: NDArray[np.float64] | None, bound: float,
) -> tuple[NDArray[np.float64], NDArray[np.float64], int]:
    """``(Σᵢ yᵢyᵢᵀ, Σᵢ yᵢ)`` with ``yᵢ = clip_bound((xᵢ − centre)/scale)`` in one pass, and
    how many rows were clipped (the held-out layout re-centres the Gram on its own rows)."""
    _expect("shifted_clipped_rows", source)
    gram, total, n_clipped = source.reduce(
        partial(_block_clipped_gram_sum, centre=centre, scale=scale, bound=bound),
        _add_gram_sum, desc="Gram", raw=True)
    return np.array(gram, order="C"), np.asarray(total, dtype=np.float64), n_clipped


def _block_clipped_product(
    block: NDArray[np.float64], *, centre: NDArray[np.float64] | None,
    scale: NDArray[np.float64] | None, bound: float, Q: NDArray[np.float64],
    support: NDArray[np.intp] | None = None, slack: float = 0.0, exact_norms: bool = False,
) -> tuple[NDArray[np.float64], int]:
    rows, n_over = _clipped_rows(block, None, centre=centre, scale=scale, bound=bound,
                                 slack=slack, exact_norms=exact_norms)
    return rows.T @ ((rows if support is None else rows[:, support]) @ Q), n_over


def clipped_product(
    source: RowSource, centre: NDArray[np.float64] | None,
    scale: NDArray[np.float64] | None, bound: float, Q: NDArray[np.float64], *,
    support: NDArray[np.intp] | None = None, slack: float = 0.0, exact_norms: bool = False,
) -> tuple[NDArray[np.float64], int]:
    """``Σᵢ yᵢ(yᵢᵀQ)`` with ``yᵢ = clip_bound((xᵢ − centre)/scale)``: one power step's pass
    without the p×p Gram, and how many rows were clipped.

    With ``support`` (feature indices S), ``Q`` holds only the rows of S (|S|×k) and the pass
    computes ``Σᵢ yᵢ(yᵢ[S]ᵀQ)``: a row-sparse basis's product in O(n·k·(|S| + p)).

    ``slack`` keeps the rows of norm up to ``bound·(1 + slack)`` as they are, and
    ``exact_norms`` computes the norms by :func:`privpca._validation.row_norms` (exact also
    where the squares overflow or underflow): the federated provider's clip, so that its
    streamed passes prepare the rows bit for bit as its in-memory rows are.
    """
    return source.reduce(
        partial(_block_clipped_product, centre=centre, scale=scale, bound=bound, Q=Q,
                support=support, slack=slack, exact_norms=exact_norms),
        _add_gram, desc="XᵀXQ")


def _block_projected_moments(
    block: NDArray[np.float64], *, centre: NDArray[np.float64] | None,
    scale: NDArray[np.float64] | None, bound: float, components: NDArray[np.float64],
    support: NDArray[np.intp] | None = None, slack: float = 0.0, exact_norms: bool = False,
) -> tuple[NDArray[np.float64], float]:
    rows, _ = _clipped_rows(block, None, centre=centre, scale=scale, bound=bound,
                            slack=slack, exact_norms=exact_norms)
    proj = (rows if support is None else rows[:, support]) @ components.T
    return proj.T @ proj, float(np.einsum("ij,ij->", rows, rows))


def _add_moments(a: tuple[NDArray[np.float64], float],
                 b: tuple[NDArray[np.float64], float]) -> tuple[NDArray[np.float64], float]:
    return a[0] + b[0], a[1] + b[1]


def projected_moments(
    source: RowSource, centre: NDArray[np.float64] | None,
    scale: NDArray[np.float64] | None, bound: float, components: NDArray[np.float64], *,
    support: NDArray[np.intp] | None = None, slack: float = 0.0, exact_norms: bool = False,
) -> tuple[NDArray[np.float64], float]:
    """``(Σᵢ (Vyᵢ)(Vyᵢ)ᵀ, Σᵢ ‖yᵢ‖²)`` for ``V = components`` (k×p): the explained-variance
    part's statistic, by one pass. With ``support`` (S), ``components`` is k×|S| and the
    projections are ``V yᵢ[S]``; ``slack`` and ``exact_norms``: :func:`clipped_product`."""
    matrix, total = source.reduce(
        partial(_block_projected_moments, centre=centre, scale=scale, bound=bound,
                components=components, support=support, slack=slack,
                exact_norms=exact_norms), _add_moments, desc="variances")
    return np.array(matrix, order="C"), float(total)


def _block_count(block: NDArray[np.float64]) -> int:
    return int(block.shape[0])


def _add_int(a: int, b: int) -> int:
    return a + b


def count_rows(source: RowSource) -> int:
    """The number of rows, by a pass that also validates every block (finite float64)."""
    return source.reduce(_block_count, _add_int, desc="validate")


def _block_norm_answers(
    block: NDArray[np.float64], question: NDArray[np.int16], flip: NDArray[np.bool_], *,
    centre: NDArray[np.float64] | None, thresholds: NDArray[np.float64],
) -> NDArray[np.float64]:
    asked = question >= 0
    rows = _shift(block[asked], centre, inplace=True)
    j = question[asked].astype(np.intp)
    below = np.einsum("ij,ij->i", rows, rows) <= thresholds[j] ** 2
    bits = (below ^ flip[asked]).astype(np.float64)
    return np.bincount(j, weights=bits, minlength=len(thresholds)).astype(np.float64)


def randomised_norm_answers(
    source: RowSource, question: NDArray[np.int16], flip: NDArray[np.bool_],
    centre: NDArray[np.float64] | None, thresholds: NDArray[np.float64],
) -> NDArray[np.float64]:
    """The local model's norm answers, summed per threshold: user i (``question[i] ≥ 0``)
    answers ``1[‖xᵢ − centre‖ ≤ t_question[i]] XOR flip[i]`` (binary randomised response;
    ``flip`` are the users' own coins, drawn by the simulation). Rows with ``question < 0``
    do not answer."""
    return source.reduce(
        partial(_block_norm_answers, centre=centre, thresholds=np.asarray(thresholds)), _add,
        aux=lambda start, stop: (question[start:stop], flip[start:stop]), desc="norm answers")
