"""Tables on disk as lazy Dask arrays whose blocks are read by the workers themselves.

``dask.array.from_array(np.load(path, mmap_mode="r"))`` would read every block on the client
and ship it to the workers; here each block is a task that opens the file where it runs, so
only the partial sums travel. The workers must see the file at the same path (a shared or
replicated file system), as with any Dask cluster reading from disk. Only the shape is read on
the client: the ``.npy`` header or the Parquet footers (metadata, not data).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

__all__ = ["dask_table", "dask_table_rows"]

#: Rows per Dask block by default: ~800 MB of float64 at p = 100, one task per block.
DEFAULT_CHUNK_ROWS = 1_000_000

#: ``.npy`` tables made by :func:`dask_table`, by Dask array name: ``(path, dtype, chunk_rows)``,
#: so that a selection of rows (a held-out share) reads only those rows (Dask's own slicing of
#: a block reads the whole block first). Bounded: the oldest entries are dropped.
_NPY_TABLES: dict[str, tuple[str, Any, int]] = {}
_NPY_TABLES_MAX = 256


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
        A ``.npy`` file (read memory-mapped, ``chunk_rows`` rows per block), a ``.parquet``
        file or a folder of them (one block per file; every column must be numeric).
    chunk_rows : int, default=1_000_000
        Rows per block of a ``.npy`` file.

    Returns
    -------
    dask.array.Array
        Of shape ``(n, p)`` (a float file keeps its dtype, anything else is float64; Parquet
        is read as float64), chunked by rows; nothing is read until it is computed.
    """
    import dask
    import dask.array as da

    from privpca.streaming.sources import ParquetSource

    chunk_rows = int(chunk_rows)
    if chunk_rows < 1:
        raise ValueError(f"chunk_rows must be a positive int; got {chunk_rows}.")
    root = Path(path)
    if root.suffix == ".npy":
        header = np.load(root, mmap_mode="r", allow_pickle=False)
        if header.ndim != 2 or header.dtype.kind not in "biuf":
            raise ValueError(f"{root}: expected a 2-D numeric array; got shape "
                             f"{header.shape} and dtype {header.dtype}.")
        n, p = header.shape
        # Floats keep their width (the reductions convert block by block, so a float32 table
        # moves half the bytes); integers become float64.
        dtype = header.dtype if header.dtype.kind == "f" else np.dtype(np.float64)
        out = _npy_blocks(str(root.resolve()), [(0, n)], p, dtype, chunk_rows)
        if len(_NPY_TABLES) >= _NPY_TABLES_MAX:
            del _NPY_TABLES[next(iter(_NPY_TABLES))]
        _NPY_TABLES[out.name] = (str(root.resolve()), dtype, chunk_rows)
        return out
    elif root.suffix == ".parquet" or root.is_dir():
        meta = ParquetSource(root)  # checks the columns, counts the rows from the footers
        import pyarrow.parquet as pq

        p = meta.n_features
        parts = [da.from_delayed(dask.delayed(_parquet_rows)(str(f.resolve()), meta.columns),
                                 shape=(pq.ParquetFile(f).metadata.num_rows, p),
                                 dtype=np.float64)
                 for f in meta.files]
    else:
        raise ValueError(f"Cannot read {root} as a Dask table: expected a .npy file, a "
                         ".parquet file or a folder of .parquet files.")
    if not parts:
        raise ValueError(f"{root}: the table has no rows.")
    return da.concatenate(parts, axis=0)


def _npy_range_rows(path: str, ranges: list[tuple[int, int]], dtype: Any) -> NDArray[Any]:
    """The rows of several ``(start, stop)`` ranges of a ``.npy`` file, stacked (one read)."""
    table = np.load(path, mmap_mode="r", allow_pickle=False)
    if len(ranges) == 1:
        return np.array(table[ranges[0][0]:ranges[0][1]], dtype=dtype)
    return np.concatenate([np.asarray(table[a:b], dtype=dtype) for a, b in ranges])


def _npy_blocks(path: str, ranges: list[tuple[int, int]], p: int, dtype: Any,
                chunk_rows: int) -> Any:
    """The rows of ``ranges`` of a ``.npy`` file in blocks of at most ``chunk_rows`` rows, each
    block one task that reads only its rows (a block may gather several short ranges: a
    held-out share of many small segments is then a few tasks, not one per segment)."""
    import dask
    import dask.array as da

    groups: list[list[tuple[int, int]]] = []
    current: list[tuple[int, int]] = []
    filled = 0
    for start, stop in ranges:
        a = start
        while a < stop:
            take = min(stop - a, chunk_rows - filled)
            current.append((a, a + take))
            filled += take
            a += take
            if filled == chunk_rows:
                groups.append(current)
                current, filled = [], 0
    if current:
        groups.append(current)
    if not groups:
        raise ValueError(f"{path}: the table has no rows.")
    parts = [da.from_delayed(dask.delayed(_npy_range_rows)(path, group, dtype),
                             shape=(sum(b - a for a, b in group), p), dtype=dtype)
             for group in groups]
    return da.concatenate(parts, axis=0)


def dask_table_rows(X: Any, ranges: list[tuple[int, int]]) -> Any:
    """The rows ``ranges`` of a :func:`dask_table` ``.npy`` array, read by tasks that read only
    those rows; None for any other Dask array (slice it instead)."""
    entry = _NPY_TABLES.get(getattr(X, "name", ""))
    if entry is None:
        return None
    path, dtype, chunk_rows = entry
    return _npy_blocks(path, [(int(a), int(b)) for a, b in ranges if b > a], int(X.shape[1]),
                       dtype, chunk_rows)
