"""The interface of a table read block by block (:class:`RowSource`), and the checks every
block of rows passes (2-D, numeric, the table's columns, finite)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import numpy as np
from numpy.typing import NDArray
from tqdm.auto import tqdm

from privpca._validation import bounded_rows, non_finite_message

T = TypeVar("T")
Block = NDArray[np.float64]


#: The error for a table with NaN or infinity (it says nothing about how many, or where).
NON_FINITE_MESSAGE = non_finite_message("The table")


def check_shape(block: Any, n_features: int | None) -> NDArray[Any]:
    """``block`` as an array of its own numeric dtype, checked 2-D with ``n_features``
    columns (no copy, no finiteness check: see :func:`bounded_block`)."""
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


def check_overflow(finite: bool) -> None:
    """Refuse a bounded slice whose rows, centred and divided by public scales, still
    overflow float64 (only with public scales far below the data's units)."""
    if not finite:
        raise ValueError("The table's rows, centred and divided by the scales, overflow "
                         "float64: pass larger scales, or rescale the data.")


def _check_block(block: Any, n_features: int | None) -> Block:
    """A block as float64, NaN and infinity refused, rows above
    :data:`~privpca._validation.MAX_ROW_NORM` scaled down to it, as an in-memory table's
    (one pass without a block-sized temporary; the exact checks only where a norm is not
    below the limit)."""
    return bounded_block(check_shape(block, n_features))


def bounded_block(block: Any) -> Block:
    """A validated block (:func:`~privpca._validation.bounded_rows`); also for a raw slice
    whose compiled pass met a norm that was not finite (the pass then reruns on it)."""
    return bounded_rows(np.asarray(block, dtype=np.float64), name="The table")[0]


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
        (:func:`check_shape`, then :func:`bounded_block` where a norm it computes anyway is
        not finite):
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
