"""Tables on disk as lazy Dask arrays whose blocks are read by the workers themselves.

``dask.array.from_array(np.load(path, mmap_mode="r"))`` would read every block on the client
and ship it to the workers; here each block is a task that opens the file where it runs, so
only the partial sums travel. The workers must see the file at the same path (a shared or
replicated file system), as with any Dask cluster reading from disk. Only the shape is read on
the client: the ``.npy`` header, the Zarr metadata or the Parquet footers (not data).

A table is registered by its Dask name, so that a selection of row ranges (a party's rows
in a distributed fit) is read by tasks that read only those rows (:func:`dask_table_rows`);
Dask's own slicing of a block would read the whole block first.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
from numpy.typing import NDArray

__all__ = ["dask_table", "dask_table_rows"]

_Piece = TypeVar("_Piece")

#: Rows per Dask block by default: ~800 MB of float64 at p = 100, one task per block.
DEFAULT_CHUNK_ROWS = 1_000_000

#: Tables made by :func:`dask_table` (``.npy``, Zarr, Parquet), by Dask array name:
#: ``(kind, path, dtype, chunk_rows)``, so that a selection of row ranges (a party's rows)
#: reads only those rows. Bounded: the oldest entries are dropped.
_TABLES: dict[str, tuple[str, str, Any, int]] = {}
_TABLES_MAX = 256


def _parquet_rows(path: str, columns: list[str]) -> NDArray[np.float64]:
    import pyarrow.parquet as pq

    table = pq.read_table(path, columns=columns)
    return np.column_stack([c.to_numpy(zero_copy_only=False) for c in table.columns]).astype(
        np.float64, copy=False)


def dask_table(path: str | os.PathLike[str], *, chunk_rows: int = DEFAULT_CHUNK_ROWS) -> Any:
    """A lazy ``dask.array.Array`` over a ``.npy`` file or a Parquet file or folder.

    Parameters
    ----------
    path : str or path-like
        A ``.npy`` file (read memory-mapped, ``chunk_rows`` rows per block), a Zarr store
        (``chunk_rows`` rounded up to whole Zarr chunks), a ``.parquet`` file or a folder of
        them (one block per file; every column must be numeric).
    chunk_rows : int, default=1_000_000
        Rows per block of a ``.npy`` file or a Zarr store (Parquet: of a selection of row
        ranges, which reads only the row groups it overlaps).

    Returns
    -------
    dask.array.Array
        Of shape ``(n, p)`` (a float file keeps its dtype, anything else is float64; Parquet
        is read as float64), chunked by rows; nothing is read until it is computed.
    """
    import dask
    import dask.array as da

    from privpca.streaming.sources import (
        ParquetSource,
        is_zarr_path,
        open_zarr,
        zarr_block_rows,
    )

    chunk_rows = int(chunk_rows)
    if chunk_rows < 1:
        raise ValueError(f"chunk_rows must be a positive int; got {chunk_rows}.")
    root = Path(path)
    if root.suffix == ".npy" or is_zarr_path(root):
        kind = "npy" if root.suffix == ".npy" else "zarr"
        if kind == "npy":
            header = np.load(root, mmap_mode="r", allow_pickle=False)
            if header.ndim != 2 or header.dtype.kind not in "biuf":
                raise ValueError(f"{root}: expected a 2-D numeric array; got shape "
                                 f"{header.shape} and dtype {header.dtype}.")
        else:
            header = open_zarr(root)
            chunk_rows = zarr_block_rows(header, chunk_rows)
        n, p = (int(d) for d in header.shape)
        stored = np.dtype(header.dtype)
        # Floats keep their width (the reductions convert block by block, so a float32 table
        # moves half the bytes); integers become float64.
        dtype = stored if stored.kind == "f" else np.dtype(np.float64)
        location = str(root.resolve())
        out = _table_blocks(kind, location, [(0, n)], p, dtype, chunk_rows)
        _register(out.name, (kind, location, dtype, chunk_rows))
        return out
    elif root.suffix == ".parquet" or root.is_dir():
        meta = ParquetSource(root)  # checks the columns, counts the rows from the footers
        import pyarrow.parquet as pq

        p = meta.n_features
        parts = [da.from_delayed(dask.delayed(_parquet_rows)(str(f.resolve()), meta.columns),
                                 shape=(pq.ParquetFile(f).metadata.num_rows, p),
                                 dtype=np.float64)
                 for f in meta.files]
        if parts:
            out = da.concatenate(parts, axis=0)
            _register(out.name, ("parquet", str(root.resolve()), np.dtype(np.float64),
                                 chunk_rows))
            return out
    else:
        raise ValueError(f"Cannot read {root} as a Dask table: expected a .npy file, a Zarr "
                         "store, a .parquet file or a folder of .parquet files.")
    if not parts:
        raise ValueError(f"{root}: the table has no rows.")
    return da.concatenate(parts, axis=0)


def _register(name: str, entry: tuple[str, str, Any, int]) -> None:
    if len(_TABLES) >= _TABLES_MAX:
        del _TABLES[next(iter(_TABLES))]
    _TABLES[name] = entry


def _gather(pieces: Iterable[tuple[_Piece, int]], chunk_rows: int) -> list[list[_Piece]]:
    """Consecutive ``(piece, rows)`` in groups of at least ``chunk_rows`` rows, in order (the
    last group may hold fewer)."""
    groups: list[list[_Piece]] = []
    current: list[_Piece] = []
    filled = 0
    for piece, rows in pieces:
        current.append(piece)
        filled += rows
        if filled >= chunk_rows:
            groups.append(current)
            current, filled = [], 0
    if current:
        groups.append(current)
    return groups


def _cut(ranges: list[tuple[int, int]],
         chunk_rows: int) -> Iterator[tuple[tuple[int, int], int]]:
    """``(start, stop)`` ranges cut where the running row count reaches a multiple of
    ``chunk_rows``, each piece with its number of rows (so that :func:`_gather` makes groups
    of exactly ``chunk_rows`` rows, the last excepted)."""
    filled = 0
    for start, stop in ranges:
        a = start
        while a < stop:
            take = min(stop - a, chunk_rows - filled)
            yield (a, a + take), take
            filled = (filled + take) % chunk_rows
            a += take


def _parquet_pieces_rows(pieces: list[tuple[str, int, int, int]],
                         columns: list[str]) -> NDArray[np.float64]:
    """The rows of ``pieces`` (parts of Parquet row groups), stacked; each group read once."""
    from privpca.streaming.sources import parquet_row_group

    out, cached = [], None
    for f, g, a, b in pieces:
        if cached is None or cached[0] != (f, g):
            cached = ((f, g), parquet_row_group(f, g, columns))
        out.append(cached[1][a:b])
    return out[0] if len(out) == 1 else np.concatenate(out)


def _parquet_selection(path: str, ranges: list[tuple[int, int]], chunk_rows: int) -> Any:
    """The rows of ``ranges`` of a Parquet table as a Dask array whose tasks read only the row
    groups the ranges overlap (each task about ``chunk_rows`` selected rows)."""
    import dask
    import dask.array as da

    from privpca.streaming.sources import ParquetSource

    meta = ParquetSource(path)  # footers only
    groups = _gather(((piece, piece[3] - piece[2]) for piece in meta.pieces(ranges)),
                     chunk_rows)
    if not groups:
        raise ValueError(f"{path}: no rows selected.")
    parts = [da.from_delayed(dask.delayed(_parquet_pieces_rows)(group, meta.columns),
                             shape=(sum(b - a for _, _, a, b in group), meta.n_features),
                             dtype=np.float64)
             for group in groups]
    return da.concatenate(parts, axis=0)


def _range_rows(kind: str, path: str, ranges: list[tuple[int, int]],
                dtype: Any) -> NDArray[Any]:
    """The rows of several ``(start, stop)`` ranges of a ``.npy`` file or a Zarr store,
    stacked (each range one read; a Zarr read decodes only the chunks it overlaps)."""
    if kind == "npy":
        table: Any = np.load(path, mmap_mode="r", allow_pickle=False)
    else:
        from privpca.streaming.sources import open_zarr
        from privpca.streaming.zarr_rows import ZarrRows

        table = open_zarr(path)
        direct = ZarrRows.of(table)
        if direct is not None and np.dtype(dtype) == direct.dtype:
            # The chunk files read straight into the task's block (zarr_rows: a fraction of
            # Zarr's own CPU), each range into its rows: no concatenation.
            out = np.empty((sum(b - a for a, b in ranges), direct.n_columns), dtype=dtype)
            filled = 0
            for a, b in ranges:
                direct.read(a, b, out=out[filled:])
                filled += b - a
            return out
    if len(ranges) == 1:
        rows = table[ranges[0][0]:ranges[0][1]]
        # A memory map's rows are copied here, in the task (a view would be read later);
        # Zarr returns a fresh array already.
        return np.array(rows, dtype=dtype) if kind == "npy" else np.asarray(rows, dtype=dtype)
    return np.concatenate([np.asarray(table[a:b], dtype=dtype) for a, b in ranges])


def _table_blocks(kind: str, path: str, ranges: list[tuple[int, int]], p: int, dtype: Any,
                  chunk_rows: int) -> Any:
    """The rows of ``ranges`` of a ``.npy`` file or a Zarr store in blocks of at most
    ``chunk_rows`` rows, each block one task that reads only its rows (a block may gather
    several short ranges: a selection of many short ranges is then a few tasks, not one per
    range)."""
    import dask
    import dask.array as da

    groups = _gather(_cut(ranges, chunk_rows), chunk_rows)
    if not groups:
        raise ValueError(f"{path}: the table has no rows.")
    parts = [da.from_delayed(dask.delayed(_range_rows)(kind, path, group, dtype),
                             shape=(sum(b - a for a, b in group), p), dtype=dtype)
             for group in groups]
    return da.concatenate(parts, axis=0)


def dask_table_rows(X: Any, ranges: list[tuple[int, int]]) -> Any:
    """The rows ``ranges`` of a :func:`dask_table` array, read by tasks that read only those
    rows (a ``.npy`` file, a Zarr store: the chunks they overlap; Parquet: the row groups they
    overlap); None for any other Dask array (slice it instead)."""
    entry = _TABLES.get(getattr(X, "name", ""))
    if entry is None:
        return None
    kind, path, dtype, chunk_rows = entry
    selected = [(int(a), int(b)) for a, b in ranges if b > a]
    if kind == "parquet":
        return _parquet_selection(path, selected, chunk_rows)
    return _table_blocks(kind, path, selected, int(X.shape[1]), dtype, chunk_rows)
