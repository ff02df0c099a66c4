"""Tables given as a re-iterable of row chunks (:class:`ChunkSource`)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

import numpy as np

from privpca.streaming.row_source import Block, RowSource, _check_block


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
