"""Arrays read in row slices: :class:`ArraySource` (an ndarray, a memory map, a Zarr array),
its threaded block reduction, opening a Zarr store, and dropping rows from a block."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from privpca.solvers.gram import BLOCK_ROWS
from privpca.streaming.row_source import Block, RowSource, T, _check_block
from privpca.streaming.zarr_rows import ZarrRows

#: Threads per core for passes that read their blocks from disk (a memory map, a Zarr store,
#: a lazily read Dask table): while some threads wait for their reads the others keep the
#: cores busy. Measured on 10⁸ × 100 float32 rows from Zarr (2 cores): 58 s against 68 s
#: with one thread per core; Dask's own ``X.T @ X`` took 48-54 s either way.
READ_THREADS_PER_CORE = 2


#: Values per dense block of a sparse matrix (32 MiB of float64): its rows are densified a
#: block at a time, never the whole table.
SPARSE_BLOCK_VALUES = 1 << 22


class ArraySource(RowSource):
    """An in-memory array, a memory map, a Zarr array or a SciPy sparse matrix, read
    ``block_rows`` rows at a time (a sparse matrix's rows densified one block at a time)."""

    def __init__(self, X: Any, *, block_rows: int = BLOCK_ROWS, validated: bool = False) -> None:
        if getattr(X, "ndim", None) != 2:
            raise ValueError(f"Expected a 2-D array; got {type(X).__name__} of shape "
                             f"{getattr(X, 'shape', None)}.")
        self.sparse = _is_sparse(X)
        if self.sparse:
            X = X.tocsr()  # row slices without copying the others
            block_rows = min(block_rows, max(64, SPARSE_BLOCK_VALUES // max(X.shape[1], 1)))
        self.X = X
        self.n_samples, self.n_features = (int(d) for d in X.shape)
        self.block_rows = int(block_rows)
        self.validated = bool(validated)  # already checked float64 and finite (fit's arrays)
        # An uncompressed Zarr store: its chunk files read straight into a buffer.
        self.direct = ZarrRows.of(X) if _is_zarr_array(X) else None

    def rows(self, start: int, stop: int, out: NDArray[Any] | None = None) -> NDArray[Any]:
        """Rows ``start:stop`` as stored (``out``: a buffer that a direct Zarr read fills and
        returns a view of; other arrays ignore it)."""
        if self.direct is not None:
            return self.direct.read(start, stop, out)
        if self.sparse:
            return np.asarray(self.X[start:stop].toarray())
        return np.asarray(self.X[start:stop])

    def blocks(self) -> Iterator[Block]:
        for start in range(0, self.n_samples, self.block_rows):
            block = self.rows(start, min(start + self.block_rows, self.n_samples))
            yield block if self.validated else _check_block(block, self.n_features)

    def reduce(self, fn: Callable[..., T], combine: Callable[[T, T], T], *,
               aux: Callable[[int, int], tuple[Any, ...]] | None = None,
               desc: str = "pass", raw: bool = False) -> T:
        """Blocks reduced by one thread per core, two for a memory map or a Zarr array (NumPy
        releases the GIL; BLAS is limited to one thread per block meanwhile), combined in
        block order: the result does not depend on the scheduling, and at most one block per
        thread is in memory."""
        bounds = [(a, min(a + self.block_rows, self.n_samples), a)
                  for a in range(0, self.n_samples, self.block_rows)]
        if self.progress:
            return super().reduce(fn, combine, aux=aux, desc=desc)
        return _threaded_reduce(self, bounds, fn, combine, aux, raw=raw)


def _threaded_reduce(array: ArraySource, bounds: Sequence[tuple[int, int, int]],
                     fn: Callable[..., T], combine: Callable[[T, T], T],
                     aux: Callable[[int, int], tuple[Any, ...]] | None, *,
                     raw: bool = False, drop: NDArray[np.int64] | None = None) -> T:
    """``combine`` of ``fn`` over the blocks ``array.rows(a, b)`` of ``bounds``
    ``(a, b, start)``, one thread per core, or :data:`READ_THREADS_PER_CORE` per core for a
    memory map or a Zarr array (NumPy releases the GIL; BLAS limited to one thread per block
    meanwhile), combined in the order of ``bounds``; ``aux(start, start + rows)`` numbers
    the block's rows as the caller's view does (a row range's own numbering). ``drop``:
    sorted row indices of ``array`` removed from each block before ``fn`` sees it (the rest
    of a held-out split, :class:`RowsExcept`). A direct Zarr read fills each thread's own
    buffer, reused block after block: ``fn`` must not keep its block. ``raw``: see
    :meth:`RowSource.reduce`."""
    local = threading.local()  # each thread's read buffer, for a direct Zarr read

    def part(bound: tuple[int, int, int]) -> T:
        a, b, start = bound
        buffer = None
        if array.direct is not None:
            buffer = getattr(local, "buffer", None)
            if buffer is None or buffer.shape[0] < b - a:
                buffer = local.buffer = np.empty((b - a, array.n_features),
                                                 dtype=array.direct.dtype)
        block = array.rows(a, b, out=buffer)  # fn never keeps its block
        if drop is not None:
            block = _without(block, drop, a)
        if not (array.validated or raw):
            block = _check_block(block, array.n_features)
        if aux is None:
            return fn(block)
        return fn(block, *aux(start, start + block.shape[0]))

    def combined(pieces: Iterable[T]) -> T:
        out: T | None = None
        for piece in pieces:
            out = piece if out is None else combine(out, piece)
        if out is None:
            raise ValueError("The table has no rows.")
        return out

    cores = os.cpu_count() or 1
    on_disk = not isinstance(array.X, np.ndarray) or isinstance(array.X, np.memmap)
    workers = min(cores * (READ_THREADS_PER_CORE if on_disk else 1), len(bounds))
    if workers < 2:
        return combined(map(part, bounds))
    from concurrent.futures import ThreadPoolExecutor

    from threadpoolctl import threadpool_limits

    with threadpool_limits(1, user_api="blas"), ThreadPoolExecutor(workers) as pool:
        return combined(pool.map(part, bounds))


def _is_sparse(X: Any) -> bool:
    """A SciPy sparse matrix or array (imported only if SciPy is loaded already)."""
    import sys

    sparse = sys.modules.get("scipy.sparse")
    return sparse is not None and bool(sparse.issparse(X))


def _is_zarr_array(X: Any) -> bool:
    return type(X).__module__.startswith("zarr") and hasattr(X, "chunks") and hasattr(X, "ndim")


def is_zarr_path(path: Path) -> bool:
    """Whether ``path`` is a Zarr store (a ``.zarr`` folder, or any folder with Zarr's
    metadata file)."""
    return path.suffix == ".zarr" or (
        path.is_dir() and ((path / "zarr.json").exists() or (path / ".zarray").exists()))


def open_zarr(path: str | os.PathLike[str]) -> Any:
    """A 2-D numeric Zarr array, opened read-only (nothing is read but its metadata)."""
    try:
        import zarr
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError("Reading Zarr needs zarr: pip install 'privpca[dask]'.") from exc
    arr = zarr.open_array(str(path), mode="r")
    if arr.ndim != 2 or np.dtype(arr.dtype).kind not in "biuf":
        raise ValueError(f"{path}: expected a 2-D numeric Zarr array; got shape {arr.shape} "
                         f"and dtype {arr.dtype}.")
    return arr


def zarr_block_rows(arr: Any, rows: int = BLOCK_ROWS) -> int:
    """About ``rows`` rows, rounded up to whole Zarr chunks (a partly read chunk is still
    decoded whole)."""
    chunk = int(arr.chunks[0])
    return chunk * max(1, -(-int(rows) // chunk))


# ------------------------------------------------------------------ dropping rows from blocks
def _without(block: NDArray[Any], rows: NDArray[np.int64], start: int) -> NDArray[Any]:
    """``block`` (the rows ``start:start + len(block)`` of a table) without the table's rows
    ``rows`` (sorted): a copy when any falls in the block, else the block itself."""
    lo, hi = np.searchsorted(rows, (start, start + block.shape[0]))
    if hi == lo:
        return block
    return _compress_out(block, rows[lo:hi] - start)


def _compress_out(block: NDArray[Any], local: NDArray[np.int64]) -> NDArray[Any]:
    """``block`` without its rows ``local`` (``np.compress`` on a mask, cheaper than
    ``np.delete`` with indices: docs/BENCHMARKS.md, "Measurements behind small code
    choices")."""
    keep = np.ones(block.shape[0], dtype=bool)
    keep[local] = False
    return np.compress(keep, block, axis=0)


def _span(rows: NDArray[np.int64], a: int, b: int) -> tuple[int, int]:
    """The positions ``lo:hi`` in the sorted ``rows`` of the indices in ``[a, b)``."""
    lo, hi = np.searchsorted(rows, (a, b))
    return int(lo), int(hi)
