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
from pathlib import Path
from typing import Any

import numpy as np

# The ``X as X`` names are re-exported: the other streaming modules import them from here.
from privpca.streaming.array_source import (
    ArraySource,
    _is_sparse,
    _is_zarr_array,
    is_zarr_path,
    open_zarr,
    zarr_block_rows,
)
from privpca.streaming.array_source import _compress_out as _compress_out
from privpca.streaming.array_source import _span as _span
from privpca.streaming.array_source import _threaded_reduce as _threaded_reduce
from privpca.streaming.array_source import _without as _without
from privpca.streaming.chunk_source import ChunkSource
from privpca.streaming.dask_source import DaskSource, _is_dask_array
from privpca.streaming.dask_source import _local_dask_options as _local_dask_options
from privpca.streaming.parquet_source import ParquetSource
from privpca.streaming.parquet_source import parquet_row_group as parquet_row_group
from privpca.streaming.row_source import Block as Block
from privpca.streaming.row_source import RowSource
from privpca.streaming.row_source import T as T
from privpca.streaming.row_source import _check_block as _check_block
from privpca.streaming.row_source import bounded_block as bounded_block
from privpca.streaming.row_source import check_overflow as check_overflow
from privpca.streaming.row_source import check_shape as check_shape

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


def is_streamed(X: Any) -> bool:
    """Whether ``fit`` should take the streamed path (anything but an in-memory array-like).

    A ``numpy.memmap`` counts as streamed: it is read block by block, never copied whole; so
    does a SciPy sparse matrix, densified one block of rows at a time.
    """
    return (isinstance(X, RowSource | np.memmap | str | os.PathLike) or _is_dask_array(X)
            or _is_zarr_array(X) or _is_sparse(X) or callable(X))


def as_row_source(X: Any) -> RowSource:
    """Wrap a table for a streamed fit.

    ``X`` may be a :class:`RowSource`, a ``dask.array.Array``, a ``numpy.memmap``, a SciPy
    sparse matrix (densified a block of rows at a time), a Zarr
    array, a path to a ``.npy`` file (memory-mapped), to a Zarr store, to a Parquet file or
    a folder of them, a list of 2-D chunks, or a function returning a fresh iterator of
    chunks.
    """
    if isinstance(X, RowSource):
        return X
    if _is_dask_array(X):
        return DaskSource(X)
    if isinstance(X, np.memmap) or _is_sparse(X):
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
