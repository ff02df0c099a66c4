"""Selecting rows of a :class:`~privpca.streaming.sources.RowSource`: ranges, a set, its rest.

* :class:`RowRanges` / :func:`select_rows`: public ranges of consecutive rows (the distributed
  fits' per-provider row ranges).
* :func:`take_rows` / :func:`drop_rows` (:class:`RowsExcept`): a set of single rows (the
  held-out share, :func:`privpca.streaming.holdout.random_row_split`) gathered into memory in
  one pass, and the other rows streamed block by block with those removed.

A Dask table stays lazy: its tasks select their own rows (:mod:`privpca.streaming.dask_io`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from privpca.streaming.dask_io import dask_table_rows
from privpca.streaming.sources import (
    ArraySource,
    Block,
    DaskSource,
    ParquetSource,
    RowSource,
    T,
    _check_block,
    _compress_out,
    _local_dask_options,
    _span,
    _threaded_reduce,
    _without,
)

__all__ = ["RowRanges", "RowsExcept", "drop_rows", "select_rows", "take_rows"]

# ------------------------------------------------------------------ row ranges (stream-oja)
class RowRanges(RowSource):
    """The rows of ``parent`` in the public half-open ``ranges`` ``[(a, b), …]`` (increasing,
    disjoint), in the parent's order: a party's share of the rows in a distributed fit. (A
    fit's held-out share is a random set of single rows: :func:`take_rows`,
    :func:`drop_rows`.)

    An :class:`ArraySource` (memory map, Zarr) is sliced, so only the selected rows are read;
    a :class:`ParquetSource` reads only the row groups they overlap; any other source is read
    whole and the selected rows kept (one full pass per pass of the view). Use
    :func:`select_rows`, which also keeps a :class:`DaskSource` lazy.
    """

    def __init__(self, parent: RowSource, ranges: Sequence[tuple[int, int]]) -> None:
        self.parent = parent
        self.ranges = [(int(a), int(b)) for a, b in ranges if b > a]
        self.n_samples = sum(b - a for a, b in self.ranges)
        self.n_features = parent.n_features
        self.progress = parent.progress

    def _bounds(self) -> list[tuple[int, int, int]]:
        """The blocks of an :class:`ArraySource` parent: ``(a, b, offset in the view)``."""
        assert isinstance(self.parent, ArraySource)
        out, offset, step = [], 0, self.parent.block_rows
        for a, b in self.ranges:
            for start in range(a, b, step):
                stop = min(start + step, b)
                out.append((start, stop, offset))
                offset += stop - start
        return out

    def reduce(self, fn: Callable[..., T], combine: Callable[[T, T], T], *,
               aux: Callable[[int, int], tuple[Any, ...]] | None = None,
               desc: str = "pass", raw: bool = False) -> T:
        """Over an :class:`ArraySource`, the selected blocks threaded as the array's own
        reduction; otherwise one pass of the parent, keeping the selected rows."""
        if isinstance(self.parent, ArraySource) and not self.progress:
            return _threaded_reduce(self.parent, self._bounds(), fn, combine, aux, raw=raw)
        return super().reduce(fn, combine, aux=aux, desc=desc)

    def blocks(self) -> Iterator[Block]:
        parent = self.parent
        if isinstance(parent, ArraySource):
            for a, b in self.ranges:
                for start in range(a, b, parent.block_rows):
                    block = parent.rows(start, min(start + parent.block_rows, b))
                    yield block if parent.validated else _check_block(block, self.n_features)
            return
        if isinstance(parent, ParquetSource):  # only the row groups the ranges overlap
            yield from parent.blocks_in(self.ranges)
            return
        ranges = iter(self.ranges)
        current = next(ranges, None)
        offset = 0
        for block in parent.blocks():
            stop = offset + block.shape[0]
            while current is not None and current[0] < stop:
                a, b = max(current[0], offset), min(current[1], stop)
                if b > a:
                    yield block[a - offset:b - offset]
                if current[1] <= stop:
                    current = next(ranges, None)
                else:
                    break
            offset = stop
            if current is None:
                return  # nothing selected further on: stop reading


def select_rows(source: RowSource, ranges: Sequence[tuple[int, int]]) -> RowSource:
    """The rows of ``source`` in ``ranges`` (see :class:`RowRanges`); a Dask array stays a
    lazy Dask array (its reductions still run on the workers, reading only those chunks)."""
    if isinstance(source, DaskSource):
        import dask.array as da

        direct = dask_table_rows(source.X, list(ranges))
        if direct is not None:  # a .npy table: the tasks read only the selected rows
            return DaskSource(direct)
        parts = [source.X[a:b] for a, b in ranges if b > a]
        return DaskSource(da.concatenate(parts, axis=0))
    return RowRanges(source, ranges)


# ------------------------------------------------------------------ a random set of rows
def take_rows(source: RowSource, rows: NDArray[np.int64]) -> ArraySource:
    """The rows ``rows`` (sorted, distinct indices) of ``source``, gathered into memory in
    the table's order: the held-out share of a fit (:mod:`privpca.streaming.holdout`).

    One pass over the table (the selected rows lie everywhere), block by block: an
    :class:`ArraySource` on its threads, copying into one preallocated array; a
    :class:`DaskSource` on the workers, only the selected rows travelling; any other source
    by its blocks. An in-memory array is indexed directly. A float table keeps its dtype (a
    float32 table gathers in half the memory), anything else becomes float64; the rows are
    validated (float64, finite) by the returned source's own passes, unless ``source`` was
    validated already.
    """
    rows = np.asarray(rows, dtype=np.int64)
    p = source.n_features
    if isinstance(source, DaskSource):
        return ArraySource(_dask_rows(source.X, rows, keep=True))
    if isinstance(source, ArraySource) and type(source.X) is np.ndarray:
        return ArraySource(source.X[rows], block_rows=source.block_rows,
                           validated=source.validated)
    stored = np.dtype(getattr(getattr(source, "X", None), "dtype", np.float64))
    out = np.empty((rows.size, p), dtype=stored if stored.kind == "f" else np.float64)

    def gather(block: NDArray[Any], start: int, lo: int, hi: int) -> int:
        out[lo:hi] = block[rows[lo:hi] - start]
        return hi - lo

    def positions(start: int, stop: int) -> tuple[int, int, int]:
        return (start, *_span(rows, start, stop))

    def added(x: int, y: int) -> int:
        return x + y

    if isinstance(source, ArraySource) and not source.progress:
        # Blocks without a selected row are not read; the rows are validated later.
        bounds = []
        for a in range(0, source.n_samples, source.block_rows):
            b = min(a + source.block_rows, source.n_samples)
            lo, hi = _span(rows, a, b)
            if hi > lo:
                bounds.append((a, b, a))
        got = _threaded_reduce(source, bounds, gather, added, positions,
                               raw=True) if bounds else 0
    else:
        got = source.reduce(gather, added, aux=positions, desc="held-out rows", raw=True)
    if got != rows.size:  # pragma: no cover - a source that yields fewer rows than it says
        raise ValueError(f"Gathered {got} of the {rows.size} selected rows.")
    return ArraySource(out, validated=isinstance(source, ArraySource) and source.validated)


class RowsExcept(RowSource):
    """The rows of ``parent`` other than ``rows`` (sorted, distinct indices), in the parent's
    order: the statistic's share of a held-out split (:mod:`privpca.streaming.holdout`).

    Every block of the parent is read and its selected rows removed (a copy of the block), so
    nothing the size of the table is formed: an :class:`ArraySource` keeps its threaded
    reductions; any other source is filtered block by block. Use :func:`drop_rows`, which
    also keeps a :class:`DaskSource` lazy.
    """

    def __init__(self, parent: RowSource, rows: NDArray[np.int64]) -> None:
        self.parent = parent
        self.dropped = np.asarray(rows, dtype=np.int64)
        self.n_samples = parent.n_samples - int(self.dropped.size)
        self.n_features = parent.n_features
        self.progress = parent.progress

    def _bounds(self) -> list[tuple[int, int, int]]:
        """The parent's blocks holding a kept row: ``(a, b, offset in the view)``."""
        assert isinstance(self.parent, ArraySource)
        out, step, n = [], self.parent.block_rows, self.parent.n_samples
        for a in range(0, n, step):
            b = min(a + step, n)
            lo, hi = _span(self.dropped, a, b)
            if hi - lo < b - a:
                out.append((a, b, a - lo))
        return out

    def reduce(self, fn: Callable[..., T], combine: Callable[[T, T], T], *,
               aux: Callable[[int, int], tuple[Any, ...]] | None = None,
               desc: str = "pass", raw: bool = False) -> T:
        """Over an :class:`ArraySource`, its blocks less the dropped rows, threaded as the
        array's own reduction; otherwise one pass of the parent, filtered."""
        if isinstance(self.parent, ArraySource) and not self.progress:
            return _threaded_reduce(self.parent, self._bounds(), fn, combine, aux, raw=raw,
                                    drop=self.dropped)
        return super().reduce(fn, combine, aux=aux, desc=desc)

    def blocks(self) -> Iterator[Block]:
        parent = self.parent
        if isinstance(parent, ArraySource):
            for a, b, _ in self._bounds():
                block = _without(parent.rows(a, b), self.dropped, a)
                yield block if parent.validated else _check_block(block, self.n_features)
            return
        offset = 0
        for block in parent.blocks():
            kept = _without(block, self.dropped, offset)
            offset += block.shape[0]
            if kept.shape[0]:
                yield kept


def drop_rows(source: RowSource, rows: NDArray[np.int64]) -> RowSource:
    """The rows of ``source`` other than ``rows`` (see :class:`RowsExcept`); a Dask array
    stays a lazy Dask array whose tasks drop the rows of their own chunk."""
    rows = np.asarray(rows, dtype=np.int64)
    if isinstance(source, DaskSource):
        return DaskSource(_dask_rows(source.X, rows, keep=False, compute=False))
    return RowsExcept(source, rows)


def _select_local(block: Any, local: NDArray[np.int64], keep: bool) -> NDArray[Any]:
    """A Dask chunk's rows ``local`` (``keep``) or its other rows."""
    arr = np.asarray(block)
    return arr[local] if keep else _compress_out(arr, local)


def _dask_rows(X: Any, rows: NDArray[np.int64], *, keep: bool, compute: bool = True) -> Any:
    """The rows ``rows`` of a Dask array (``keep``) or its other rows, chunk by chunk: each
    task selects within its own chunk (only the chunk's own indices travel with it). Kept
    rows are computed into memory (``compute``; the scheduler's options as in
    :meth:`DaskSource.reduce`), the rest stays lazy."""
    import dask
    import dask.array as da

    bounds = np.concatenate([[0], np.cumsum(X.chunks[0])]).astype(np.int64)
    p = int(X.shape[1])
    parts = []
    for i, chunk in enumerate(X.to_delayed().ravel()):
        a, b = int(bounds[i]), int(bounds[i + 1])
        lo, hi = _span(rows, a, b)
        size = hi - lo if keep else (b - a) - (hi - lo)
        if size == 0:
            continue
        parts.append(da.from_delayed(
            dask.delayed(_select_local)(chunk, rows[lo:hi] - a, keep),
            shape=(size, p), dtype=X.dtype))
    if not parts:
        raise ValueError("No rows selected.")
    out = da.concatenate(parts, axis=0)
    if not compute:
        return out
    from threadpoolctl import threadpool_limits

    with threadpool_limits(1, user_api="blas"):
        return np.asarray(dask.compute(out, **_local_dask_options())[0])
