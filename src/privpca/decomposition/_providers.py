"""The input of a DPS-PCA fit: one table per provider, cut from the caller's table.

A provider's table is an array's rows, or a view of a streamed table's rows (nothing read):
contiguous blocks of (nearly) equal size, or the rows of each label of ``groups``.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

__all__ = ["Providers", "split_providers"]


@dataclass
class Providers:
    """The input of a fit: each provider's table (an array, or a streamed table read where it
    is) and its id."""

    parts: list[Any]
    ids: list[str]

    @property
    def n_features(self) -> int:
        return n_features_of(self.parts[0])

    @property
    def n_samples(self) -> int:
        """Σ nᵢ (public)."""
        return sum(n_samples_of(part) for part in self.parts)


def split_providers(table: Any, groups: ArrayLike | None, n_providers: int) -> Providers:
    """``n_providers`` contiguous blocks of ``table`` (an array or a row source), or the rows
    of each label of ``groups``."""
    n = n_samples_of(table)
    if groups is None:
        if n_providers > n:
            raise ValueError(
                f"n_providers={n_providers} exceeds n_samples={n}: every provider needs at "
                "least one record."
            )
        bounds = np.linspace(0, n, n_providers + 1).round().astype(int)
        return Providers([_take(table, slice(int(a), int(b)))
                          for a, b in itertools.pairwise(bounds)],
                         [str(i) for i in range(n_providers)])
    g = np.asarray(groups)
    if g.shape != (n,):
        raise ValueError(f"groups must have shape ({n},); got {g.shape}.")
    labels = np.unique(g)
    return Providers([_take(table, g == lab) for lab in labels], [str(lab) for lab in labels])


def _take(table: Any, rows: slice | NDArray[np.bool_]) -> Any:
    """A provider's rows of ``table``: an array's slice or masked rows, or a view of a
    streamed table's rows (nothing read; the whole table is itself)."""
    if isinstance(table, np.ndarray):
        return table[rows]
    if isinstance(rows, slice):
        if (rows.start, rows.stop) == (0, table.n_samples):
            return table
        return _row_view(table, [(rows.start, rows.stop)])
    return _row_view(table, _runs(rows))


def n_samples_of(part: Any) -> int:
    """A provider's public nᵢ (an array's rows, or a streamed table's)."""
    return int(part.shape[0] if isinstance(part, np.ndarray) else part.n_samples)


def n_features_of(part: Any) -> int:
    return int(part.shape[1] if isinstance(part, np.ndarray) else part.n_features)


def _runs(mask: NDArray[np.bool_]) -> list[tuple[int, int]]:
    """The maximal runs ``[(a, b), …]`` of True in ``mask`` (increasing, disjoint)."""
    edges = np.flatnonzero(np.diff(np.concatenate([[False], mask, [False]]).astype(np.int8)))
    return [(int(a), int(b)) for a, b in zip(edges[::2], edges[1::2], strict=True)]


def _row_view(source: Any, ranges: list[tuple[int, int]]) -> Any:
    """The rows of ``source`` in ``ranges`` without reading them: a memory map's slice (its
    threaded reductions kept), a lazy Dask slice, or a filter over any other source's
    blocks (:func:`privpca.streaming.selection.select_rows`)."""
    from privpca.streaming import ArraySource
    from privpca.streaming.selection import select_rows

    if isinstance(source, ArraySource) and len(ranges) == 1:
        a, b = ranges[0]
        return ArraySource(source.X[a:b], block_rows=source.block_rows,
                           validated=source.validated)
    return select_rows(source, ranges)
