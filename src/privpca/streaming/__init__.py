"""Fits on tables that are not one in-memory array: memory maps, Zarr, chunk iterators,
Parquet, Dask arrays (:mod:`privpca.streaming.sources`), through the release pipeline's block
reductions (:mod:`privpca.streaming.reductions`)."""

from privpca.streaming.sources import (
    ArraySource,
    ChunkSource,
    DaskSource,
    ParquetSource,
    RowSource,
    as_row_source,
    is_streamed,
    is_zarr_path,
    open_zarr,
)

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
