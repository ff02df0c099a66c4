"""Fits on tables that are not one in-memory array: memory maps, Zarr, chunk iterators,
Parquet, Dask arrays (:mod:`privpca.streaming.sources`), through the release pipeline's block
reductions (:mod:`privpca.streaming.reductions`)."""

from privpca.streaming import sources
from privpca.streaming.sources import *  # noqa: F403

__all__ = list(sources.__all__)
