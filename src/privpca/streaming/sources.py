"""Tables that are not one NumPy array: blocks of rows from memory maps, chunk iterators,
Parquet files and Dask arrays, behind one interface.

The release pipeline needs, from the table, only sums over rows (the Gram-based estimators'
statistics are such sums): counts of row norms on a log grid, clipped sums, a clipped Gram
matrix. A :class:`RowSource` computes each as a reduction over blocks of rows; the noise is
added afterwards, once, on the caller's machine, from the estimator's own generator (nothing
random happens in a block). So a streamed fit and an in-memory fit of the same table with the
same seed agree to rounding, and memory is one block, whatever n.

* :class:`ArraySource`: an ndarray or a ``numpy.memmap`` (a ``.npy`` too large for memory:
  ``np.load(path, mmap_mode="r")``), or a Zarr array (a ``.zarr`` store, see
  :func:`open_zarr`), read in slices (a Zarr array in whole chunks);
* :class:`ChunkSource`: a re-iterable of 2-D arrays (a list, or a function returning a fresh
  iterator — every fit makes several passes, so a one-shot generator is refused);
* :class:`ParquetSource`: a Parquet file or a folder of them (its numeric columns, or a
  selection of them), read by record batches with ``pyarrow``;
* :class:`DaskSource`: a ``dask.array.Array`` (hence Zarr, HDF5, Parquet via dask.dataframe, …):
  the block reductions run on the workers of the current scheduler (a ``distributed.Client``
  when one is active), only the p- or p×p-sized partial sums travel.

Every block is validated on the fly (float64, finite): a non-finite entry raises ValueError.
"""

from __future__ import annotations

import os
import sys
import threading
import warnings
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
from numpy.typing import NDArray
from tqdm.auto import tqdm

from privpca._validation import caller_stacklevel
from privpca.exceptions import DataDependentWarning, NonFiniteInputError
from privpca.solvers.gram import BLOCK_ROWS
from privpca.streaming.zarr_rows import ZarrRows

__all__ = [
    "ArraySource",
    "ChunkSource",
    "DaskSource",
    "ParquetSource",
    "RowSource",
    "as_row_source",
    "is_streamed",
    "is_zarr_path",
    "open_zarr",
]

T = TypeVar("T")
Block = NDArray[np.float64]


#: The error for a table with NaN or infinity (it says nothing about how many, or where).
NON_FINITE_MESSAGE = (
    "The table contains NaN or infinity. Differentially private estimators cannot impute or "
    "drop rows silently: remove or impute them first."
)


def check_shape(block: Any, n_features: int | None) -> NDArray[Any]:
    """``block`` as an array of its own numeric dtype, checked 2-D with ``n_features``
    columns (no copy, no finiteness check: see :func:`check_finite`)."""
    arr = np.asarray(block)
    if arr.ndim != 2:
        raise ValueError(f"Every block of rows must be 2-D; got an array of shape {arr.shape}.")
    if n_features is not None and arr.shape[1] != n_features:
        raise ValueError(
            f"A block has {arr.shape[1]} columns; the table has {n_features}. Every block must "
            "have the same columns."
        )
    if arr.dtype.kind not in "biuf":
        raise ValueError(f"Every block must be numeric; got dtype {arr.dtype}.")
    return arr


def check_finite(summary: Any, block: NDArray[Any]) -> None:
    """Raise when ``block`` holds NaN or infinity. ``summary`` is a reduction that any NaN or
    infinity of the block reaches (a sum, row norms); the exact, block-sized check runs only
    when it is not finite (it may have overflowed on finite values)."""
    if not np.isfinite(np.add.reduce(summary, axis=None)) and not np.isfinite(block).all():
        raise NonFiniteInputError(NON_FINITE_MESSAGE)


def _check_block(block: Any, n_features: int | None) -> Block:
    arr = np.asarray(check_shape(block, n_features), dtype=np.float64)
    # One pass without a block-sized temporary; the exact check only on the error path.
    check_finite(arr, arr)
    return arr


class RowSource(ABC):
    """Blocks of rows of an (n, p) table, and reductions over them.

    Subclasses implement :meth:`blocks` (or :meth:`reduce` directly, as Dask does). Shapes are
    public: ``n_samples`` is the public n of the replace-one relation.

    The one interface of a table read block by block: the pipeline's sums
    (:mod:`privpca.streaming.reductions`), row selections (:mod:`privpca.streaming.selection`),
    a DPS-PCA provider's passes and the one pass of the Oja-type estimators
    (:class:`~privpca.decomposition._records.RecordStream`) all read tables through it.
    """

    n_samples: int
    n_features: int
    #: Show a progress bar over blocks during each pass (set by the estimator or the CLI).
    progress: bool = False

    @abstractmethod
    def blocks(self) -> Iterator[Block]:
        """A fresh pass over the table, block by block (validated float64)."""

    def reduce(self, fn: Callable[..., T], combine: Callable[[T, T], T], *,
               aux: Callable[[int, int], tuple[Any, ...]] | None = None,
               desc: str = "pass", raw: bool = False) -> T:
        """``combine`` of ``fn(block, *aux(start, stop))`` over every block, in order (one
        pass). ``aux`` gives per-row public inputs of the block's rows ``start:stop`` (a
        user's group, its assigned question), sliced on the caller's side.

        ``raw=True`` declares that ``fn`` converts and validates blocks itself
        (:func:`check_shape`, then :func:`check_finite` on a reduction it computes anyway):
        a source may then hand it blocks of their stored dtype, unchecked, which saves the
        float64 copy and the finiteness pass when ``fn`` makes its own copy. Sources that
        validate while reading (chunks, Parquet) ignore it.

        ``fn`` must not keep a reference to its block: a source may reuse one buffer for
        the blocks it reads (a Zarr store read directly, :mod:`privpca.streaming.zarr_rows`)."""
        out: T | None = None
        bar = tqdm(total=self.n_samples, desc=desc, unit="row", unit_scale=True,
                   disable=not self.progress, leave=False)
        start = 0
        with bar:
            for block in self.blocks():
                stop = start + block.shape[0]
                part = fn(block) if aux is None else fn(block, *aux(start, stop))
                out = part if out is None else combine(out, part)
                bar.update(block.shape[0])
                start = stop
        if out is None:
            raise ValueError("The table has no rows.")
        return out


class ArraySource(RowSource):
    """An in-memory array, a memory map or a Zarr array, read ``block_rows`` rows at a time."""

    def __init__(self, X: Any, *, block_rows: int = BLOCK_ROWS, validated: bool = False) -> None:
        if getattr(X, "ndim", None) != 2:
            raise ValueError(f"Expected a 2-D array; got {type(X).__name__} of shape "
                             f"{getattr(X, 'shape', None)}.")
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


class ChunkSource(RowSource):
    """Row chunks from a re-iterable: a sequence of arrays, or a function returning an iterator.

    The first pass (made at construction) counts the rows and checks the columns.
    """

    def __init__(self, chunks: Sequence[Any] | Callable[[], Iterable[Any]]) -> None:
        if isinstance(chunks, Iterator):
            raise ValueError(
                "A one-shot iterator cannot be fitted: every private fit reads the table "
                "several times (bounds, mean, statistic). Pass a list of chunks or a function "
                "that returns a fresh iterator, e.g. lambda: read_chunks(path)."
            )
        self._chunks = chunks
        n, p = 0, None
        for block in self._iterate():
            arr = np.asarray(block)
            if arr.ndim != 2:
                raise ValueError(f"Every chunk must be 2-D; got shape {arr.shape}.")
            if p is not None and arr.shape[1] != p:
                raise ValueError("Every chunk must have the same number of columns.")
            n, p = n + arr.shape[0], arr.shape[1]
        if p is None or n == 0:
            raise ValueError("The chunks hold no rows.")
        self.n_samples, self.n_features = n, int(p)

    def _iterate(self) -> Iterable[Any]:
        return self._chunks() if callable(self._chunks) else self._chunks

    def blocks(self) -> Iterator[Block]:
        for block in self._iterate():
            yield _check_block(block, self.n_features)


class ParquetSource(RowSource):
    """A Parquet file or a folder of ``*.parquet`` files, numeric columns, by batches.

    ``columns`` selects columns by name, in the order given (default: all): only those are
    read and type-checked, so a table with text columns can be fitted on its numeric ones.
    ``fill_value``, a public number, replaces every missing cell (a null, or NaN) as the
    blocks are read; infinities stay refused. Whether and how many cells were filled depends
    on the data: it is said once, after the first full pass, by a
    :class:`~privpca.exceptions.DataDependentWarning` (for the data holder only). Without
    ``fill_value`` a missing cell raises :class:`~privpca.exceptions.NonFiniteInputError`.

    A selection of row ranges (:func:`select_rows`: a party's rows in a distributed fit) reads
    only the row groups it overlaps, located from the files' footers.
    """

    def __init__(self, path: str | os.PathLike[str], *, block_rows: int = BLOCK_ROWS,
                 columns: Sequence[str] | None = None,
                 fill_value: float | None = None) -> None:
        try:
            import pyarrow.parquet as pq
        except ImportError as exc:  # pragma: no cover - depends on the environment
            raise ImportError("Reading Parquet needs pyarrow: pip install 'privpca[dask]'.") \
                from exc
        root = Path(path)
        files = sorted(root.glob("*.parquet")) if root.is_dir() else [root]
        if not files:
            raise ValueError(f"No .parquet files in {root}.")
        self.files = files
        self.block_rows = int(block_rows)
        metas = [pq.ParquetFile(f) for f in files]
        schema = metas[0].schema_arrow
        if columns is None:
            columns = schema.names
        unknown = [c for c in columns if c not in schema.names]
        if unknown:
            raise ValueError(f"No Parquet column {unknown} in {root}; its columns are "
                             f"{schema.names}.")
        bad = [c for c in columns if schema.field(c).type.id not in _NUMERIC_ARROW_IDS]
        if bad:
            raise ValueError(f"Parquet columns {bad} are not numeric; select numeric columns.")
        self.columns = list(columns)
        self.fill_value = None if fill_value is None else float(fill_value)
        if self.fill_value is not None and not np.isfinite(self.fill_value):
            raise ValueError(f"fill_value must be a finite number; got {fill_value}.")
        self._fill_reported = False
        self.n_samples = sum(m.metadata.num_rows for m in metas)
        self.n_features = len(self.columns)
        #: ``(file, row group, first row, end row)`` in the table's numbering (footers only).
        self.row_groups: list[tuple[str, int, int, int]] = []
        start = 0
        for f, meta in zip(files, metas, strict=True):
            for g in range(meta.metadata.num_row_groups):
                rows = meta.metadata.row_group(g).num_rows
                self.row_groups.append((str(f), g, start, start + rows))
                start += rows

    @staticmethod
    def schema(path: str | os.PathLike[str]) -> list[tuple[str, str, bool]]:
        """``(name, Arrow type, numeric)`` of each column of a Parquet file or folder (its
        first file's footer; no data is read)."""
        import pyarrow.parquet as pq

        root = Path(path)
        files = sorted(root.glob("*.parquet")) if root.is_dir() else [root]
        if not files:
            raise ValueError(f"No .parquet files in {root}.")
        return [(f.name, str(f.type), f.type.id in _NUMERIC_ARROW_IDS)
                for f in pq.ParquetFile(files[0]).schema_arrow]

    def null_counts(self) -> dict[str, int | None]:
        """Nulls per selected column, from the footers' statistics (None where a row group
        has none): no data is read."""
        import pyarrow.parquet as pq

        counts: dict[str, int | None] = dict.fromkeys(self.columns, 0)
        for f in self.files:
            meta = pq.ParquetFile(f).metadata
            for g in range(meta.num_row_groups):
                group = meta.row_group(g)
                for i in range(group.num_columns):
                    chunk = group.column(i)
                    name = chunk.path_in_schema
                    if name not in counts or counts[name] is None:
                        continue
                    stats = chunk.statistics
                    if stats is None or not stats.has_null_count:
                        counts[name] = None
                    else:
                        counts[name] = int(counts[name] or 0) + int(stats.null_count)
        return counts

    def _filled(self, arr: NDArray[Any], counts: NDArray[np.int64] | None) -> NDArray[Any]:
        """``arr`` (a fresh block) with its NaN cells set to ``fill_value``, counted per
        column into ``counts``."""
        if self.fill_value is None or arr.dtype.kind != "f":
            return arr
        missing = np.isnan(arr)
        if missing.any():
            arr[missing] = self.fill_value
            if counts is not None:
                counts += missing.sum(axis=0)
        return arr

    def _report_fill(self, counts: NDArray[np.int64]) -> None:
        if self._fill_reported or not counts.any():
            return
        self._fill_reported = True
        items = [f"{name!r} ({int(c)})" for name, c in zip(self.columns, counts, strict=True)
                 if c]
        warnings.warn(
            f"{int(counts.sum())} missing cells (null or NaN) were read as "
            f"{self.fill_value:g}: {', '.join(items)}.",
            DataDependentWarning, stacklevel=caller_stacklevel())

    def blocks(self) -> Iterator[Block]:
        import pyarrow.parquet as pq

        counts = np.zeros(self.n_features, dtype=np.int64)
        for f in self.files:
            for batch in pq.ParquetFile(f).iter_batches(batch_size=self.block_rows,
                                                         columns=self.columns):
                arr = np.column_stack([c.to_numpy(zero_copy_only=False)
                                       for c in batch.columns])
                yield _check_block(self._filled(arr, counts), self.n_features)
        self._report_fill(counts)

    def pieces(self, ranges: Sequence[tuple[int, int]]) -> list[RowGroupPiece]:
        """The row groups that the increasing, disjoint ``ranges`` overlap, each with the
        rows wanted from it (``(file, group, local start, local stop)``, in table order)."""
        out: list[RowGroupPiece] = []
        groups = self.row_groups
        i = 0
        for a, b in ranges:
            while i < len(groups) and groups[i][3] <= a:
                i += 1
            j = i
            while j < len(groups) and groups[j][2] < b:
                f, g, lo, hi = groups[j]
                out.append((f, g, max(a, lo) - lo, min(b, hi) - lo))
                j += 1
        return out

    def blocks_in(self, ranges: Sequence[tuple[int, int]]) -> Iterator[Block]:
        """The rows of ``ranges``, reading only the row groups they overlap."""
        pieces = self.pieces(ranges)
        k = 0
        while k < len(pieces):  # the pieces of one row group: one read
            f, g = pieces[k][0], pieces[k][1]
            m = k
            while m < len(pieces) and pieces[m][:2] == (f, g):
                m += 1
            group = self._filled(parquet_row_group(f, g, self.columns), None)
            for _, _, a, b in pieces[k:m]:
                yield _check_block(group[a:b], self.n_features)
            k = m


#: A part of one Parquet row group: ``(file, group, first row, end row)`` within the group.
RowGroupPiece = tuple[str, int, int, int]


def parquet_row_group(path: str, group: int, columns: list[str]) -> NDArray[np.float64]:
    """One row group of a Parquet file as a float64 array (rows × columns)."""
    import pyarrow.parquet as pq

    table = pq.ParquetFile(path).read_row_group(group, columns=columns)
    return np.column_stack([c.to_numpy(zero_copy_only=False)
                            for c in table.columns]).astype(np.float64, copy=False)


def _numeric_arrow_ids() -> frozenset[int]:
    try:
        import pyarrow as pa
    except ImportError:  # pragma: no cover
        return frozenset()
    types = [pa.int8(), pa.int16(), pa.int32(), pa.int64(), pa.uint8(), pa.uint16(),
             pa.uint32(), pa.uint64(), pa.float16(), pa.float32(), pa.float64()]
    return frozenset(t.id for t in types)


_NUMERIC_ARROW_IDS = _numeric_arrow_ids()


class DaskSource(RowSource):
    """A ``dask.array.Array``: each block reduced where it lives, partial sums combined.

    The array is re-chunked to whole rows (one chunk across the columns) if needed; its row
    count must be known (``X.compute_chunk_sizes()`` after a filter).
    """

    def __init__(self, X: Any) -> None:
        if X.ndim != 2:
            raise ValueError(f"Expected a 2-D dask array; got shape {X.shape}.")
        if any(np.isnan(c) for c in X.chunks[0]):
            raise ValueError("The dask array's row chunks are unknown; call "
                             "X.compute_chunk_sizes() first (n is public and must be known).")
        if len(X.chunks[1]) != 1:
            X = X.rechunk({1: -1})
        self.X = X
        self.n_samples, self.n_features = (int(d) for d in X.shape)

    def blocks(self) -> Iterator[Block]:
        for chunk in self.X.to_delayed().ravel():
            yield _check_block(chunk.compute(), self.n_features)

    def reduce(self, fn: Callable[..., T], combine: Callable[[T, T], T], *,
               aux: Callable[[int, int], tuple[Any, ...]] | None = None,
               desc: str = "pass", raw: bool = False) -> T:
        import dask

        p = self.n_features

        def part(chunk: Any, *args: Any) -> T:
            return fn(check_shape(chunk, p) if raw else _check_block(chunk, p), *args)

        bounds = np.concatenate([[0], np.cumsum(self.X.chunks[0])]).astype(int)
        parts = [dask.delayed(part)(c, *(() if aux is None else aux(int(bounds[i]),
                                                                     int(bounds[i + 1]))))
                 for i, c in enumerate(self.X.to_delayed().ravel())]
        leaves = list(parts)
        while len(parts) > 1:  # a balanced tree: log₂(blocks) rounds of pairwise combines
            parts = [dask.delayed(combine)(parts[i], parts[i + 1]) if i + 1 < len(parts)
                     else parts[i] for i in range(0, len(parts), 2)]
        from threadpoolctl import threadpool_limits

        # Dask runs blocks in parallel already: one BLAS thread per block (as its distributed
        # workers do by default), else the local threads oversubscribe the cores.
        with threadpool_limits(1, user_api="blas"):
            client = _distributed_client()
            if client is not None and self.progress:
                return _compute_with_progress(client, leaves, parts[0], desc)
            if self.progress:  # local schedulers; on stderr (stdout may carry the output)
                from dask.diagnostics import ProgressBar

                with ProgressBar(out=sys.stderr):
                    return dask.compute(parts[0], **_local_dask_options())[0]
            return dask.compute(parts[0], **_local_dask_options())[0]


#: Threads per core for passes that read their blocks from disk (a memory map, a Zarr store,
#: a lazily read Dask table): while some threads wait for their reads the others keep the
#: cores busy. Measured on 10⁸ × 100 float32 rows from Zarr (2 cores): 58 s against 68 s
#: with one thread per core; Dask's own ``X.T @ X`` took 48-54 s either way.
READ_THREADS_PER_CORE = 2


def _local_dask_options() -> dict[str, Any]:
    """``dask.compute`` options for Dask's local threaded scheduler: twice as many threads
    as cores (:data:`READ_THREADS_PER_CORE`), unless the user configured a scheduler or a
    thread count of their own."""
    import dask

    if (dask.config.get("num_workers", None) is not None
            or dask.config.get("scheduler", None) not in (None, "threads", "threading")):
        return {}
    return {"num_workers": READ_THREADS_PER_CORE * (os.cpu_count() or 1)}


def _distributed_client() -> Any:
    """The active ``distributed.Client``, or None (no cluster, or distributed absent)."""
    try:
        from distributed import default_client
    except ImportError:  # pragma: no cover - dask without distributed
        return None
    try:
        return default_client()
    except ValueError:
        return None


def _compute_with_progress(client: Any, leaves: list[Any], root: Any, desc: str) -> Any:
    """Compute ``root`` on the cluster with a tqdm bar (stderr) over its block tasks."""
    from distributed import as_completed

    futures = client.compute(leaves)  # the per-block tasks: what takes the time
    root_future = client.compute(root)  # shares their keys: nothing is computed twice
    with tqdm(total=len(futures), desc=desc, unit="block", leave=False) as bar:
        for _ in as_completed(futures):
            bar.update(1)
    return root_future.result()


def _is_dask_array(X: Any) -> bool:
    return type(X).__module__.startswith("dask.array") and hasattr(X, "to_delayed")


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


def is_streamed(X: Any) -> bool:
    """Whether ``fit`` should take the streamed path (anything but an in-memory array-like).

    A ``numpy.memmap`` counts as streamed: it is read block by block, never copied whole.
    """
    return (isinstance(X, RowSource | np.memmap | str | os.PathLike) or _is_dask_array(X)
            or _is_zarr_array(X) or callable(X))


def as_row_source(X: Any) -> RowSource:
    """Wrap a table for a streamed fit.

    ``X`` may be a :class:`RowSource`, a ``dask.array.Array``, a ``numpy.memmap``, a Zarr
    array, a path to a ``.npy`` file (memory-mapped), to a Zarr store, to a Parquet file or
    a folder of them, a list of 2-D chunks, or a function returning a fresh iterator of
    chunks.
    """
    if isinstance(X, RowSource):
        return X
    if _is_dask_array(X):
        return DaskSource(X)
    if isinstance(X, np.memmap):
        return ArraySource(X)
    if _is_zarr_array(X):
        if X.ndim != 2:
            raise ValueError(f"Expected a 2-D Zarr array; got shape {X.shape}.")
        return ArraySource(X, block_rows=zarr_block_rows(X))
    if isinstance(X, str | os.PathLike):
        path = Path(X)
        if path.suffix == ".npy":
            arr = np.load(path, mmap_mode="r", allow_pickle=False)
            return ArraySource(arr)
        if is_zarr_path(path):
            zarr_array = open_zarr(path)
            return ArraySource(zarr_array, block_rows=zarr_block_rows(zarr_array))
        if path.suffix == ".parquet" or path.is_dir():
            return ParquetSource(path)
        raise ValueError(f"Cannot stream {path}: expected a .npy file, a Zarr store, a "
                         ".parquet file or a folder of .parquet files.")
    if callable(X) or isinstance(X, list | tuple):
        return ChunkSource(X)
    raise ValueError(f"Cannot stream an object of type {type(X).__name__}.")


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
