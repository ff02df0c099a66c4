"""The stream's records: what an Oja-type pass reads, and the one reader of them.

Oja, Private Oja and DP-PCA each make one pass over m records ``y_j`` (the rows of a table,
their pair differences, or the rows minus a public or released centre), in an order. The
table behind them is either an in-memory array, read through an index, or a
:class:`~privpca.streaming.RowSource`, read block by block, once, in its order.
:class:`RecordStream` is that pass for all three estimators, over either layout: gathered
blocks for Oja's and Private Oja's per-record steps, minibatches for DP-PCA's compiled passes.
:func:`pair_differences`, :func:`stream_blocks` and :func:`table_records` form the records
(:mod:`privpca.decomposition._stochastic` explains why pairs centre the stream).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator
from typing import Any

import numpy as np
from numpy.typing import NDArray

from privpca._validation import refuse_non_finite
from privpca.solvers.oja import VectorGradients
from privpca.streaming.sources import RowSource

__all__ = ["RecordStream", "pair_differences", "stream_blocks", "table_records"]

Block = NDArray[np.float64]


def stream_blocks(blocks: Iterable[Block], pairs: bool) -> Iterator[Block]:
    """The stream's records, block by block in order: the rows as read, or the pair
    differences ``(x_a − x_b)/√2`` of consecutive rows (across block boundaries; an odd last
    row is unused), computed as :func:`pair_differences` computes them."""
    if not pairs:
        yield from blocks
        return
    carry: NDArray[np.float64] | None = None
    for block in blocks:
        rows = block if carry is None else np.concatenate([carry, block])
        m = rows.shape[0] // 2
        if m:
            out = rows[0 : 2 * m : 2] - rows[1 : 2 * m : 2]
            out *= 1.0 / math.sqrt(2.0)
            yield out
        carry = rows[2 * m :].copy() if rows.shape[0] % 2 else None


def pair_differences(
    X: NDArray[np.float64], index: NDArray[np.intp]
) -> NDArray[np.float64]:
    """``(x_a − x_b)/√2`` for consecutive pairs ``(a, b)`` of ``index`` (an odd last is unused).

    Parameters
    ----------
    X : ndarray of shape (n_samples, n_features)
    index : ndarray of int, shape (n_rest,)
        Records in the order that pairs them.

    Returns
    -------
    ndarray of shape (n_rest // 2, n_features)
        Mean zero and covariance Σ when the records are i.i.d. with covariance Σ.
    """
    m = len(index) // 2
    out = X[index[0 : 2 * m : 2]]
    out -= X[index[1 : 2 * m : 2]]
    out *= 1.0 / math.sqrt(2.0)
    return out


def table_records(
    X: NDArray[np.float64], index: NDArray[np.intp], pairs: bool, centre: Any, *,
    verify: bool = False,
) -> RecordStream:
    """The stream's records of an in-memory table, in the order of ``index``: pair
    differences (a table of their own), else ``X[index] − centre`` read in place (no copy)."""
    if pairs:
        return RecordStream(pair_differences(X, index))
    return RecordStream(X, index, centre, verify=verify)


class RecordStream:
    """The m records ``y_j = x_j − centre`` of one pass (``j < n_samples``), in order.

    Two layouts of the table, one reader:

    * **in memory** (``RecordStream(X, index, centre)``): ``x_j = X[index[j]]`` (``X[j]``
      without ``index``), read in place: neither a gathered nor a centred copy of the stream
      is made for DP-PCA's compiled passes (:mod:`privpca.mechanisms._kernels`), which read
      the rows of ``X`` and subtract the centre themselves. Also a
      :class:`~privpca.solvers.oja.GradientSource`, for the generic callers;
    * **streamed** (:meth:`streamed`): the rows of a :class:`~privpca.streaming.RowSource`
      (or their pair differences, :func:`stream_blocks`), read in one pass, in its order.

    and two ways to read it: :meth:`blocks` (the records as gathered, centred blocks: Oja's
    and Private Oja's steps) and :meth:`batches` (DP-PCA's minibatches, the centre left to
    the compiled passes). A streamed stream can be read once.
    """

    def __init__(
        self,
        X: NDArray[np.float64],
        index: NDArray[np.intp] | None = None,
        centre: Any = None,
        *,
        verify: bool = False,
    ) -> None:
        #: ``X`` has not been checked for NaN/inf: :meth:`batches` checks the rows no step
        #: reads, the steps' compiled passes the others (each before its mechanism releases).
        self.verify = verify
        self.X = X
        self.index = None if index is None else np.asarray(index, dtype=np.intp)
        self.n_samples = X.shape[0] if index is None else len(index)
        self.n_features = X.shape[1]
        self._set_centre(centre)
        self._source: RowSource | None = None
        self._pairs = False
        self._table: NDArray[np.float64] | None = None

    @classmethod
    def streamed(cls, source: RowSource, *, pairs: bool = False,
                 centre: Any = None) -> RecordStream:
        """The rows of ``source`` (their pair differences with ``pairs``) minus ``centre``,
        read in one pass, in order, when the stream is read (not before)."""
        self = cls.__new__(cls)
        self.verify = False  # a source validates its blocks as it reads them
        self.X = np.empty((0, source.n_features))  # no table in memory
        self.index = None
        self.n_samples = source.n_samples // 2 if pairs else source.n_samples
        self.n_features = source.n_features
        self._set_centre(centre)
        self._source, self._pairs, self._table = source, pairs, None
        return self

    def _set_centre(self, centre: Any) -> None:
        self._centred = centre is not None
        # x − 0.0 is x bit for bit: "no centring" is a zero centre for the compiled passes.
        self.centre = (np.zeros(self.n_features) if centre is None
                       else np.ascontiguousarray(centre, dtype=np.float64))

    @property
    def is_streamed(self) -> bool:
        """Whether the records come from one pass over a streamed table (in its order)."""
        return self._source is not None

    def _read(self) -> Iterator[Block]:
        """The one pass over a streamed table: its records, uncentred, in order."""
        assert self._source is not None
        return stream_blocks(self._source.blocks(), self._pairs)

    def _in_place(self) -> NDArray[np.float64]:
        """``X`` C-ordered (made so once: a copy only for Fortran-ordered or strided input,
        which then gives the same output as C-ordered input)."""
        if self._source is not None:
            raise ValueError("A streamed table's records are read in order, by blocks or "
                             "batches, not by position.")
        if self._table is None:
            self._table = np.ascontiguousarray(self.X, dtype=np.float64)
        return self._table

    # ------------------------------------------------------------------ reading in order
    def blocks(self, order: NDArray[np.intp] | None, size: int) -> Iterator[Block]:
        """The records, block by block, as new arrays: in memory those of ``order`` (None:
        in their order) gathered ``size`` at a time; streamed, the table's blocks in order
        (``order`` must be None)."""
        if self._source is not None:
            assert order is None, "a streamed table is read in its order"
            blocks: Iterable[Block] = self._read()
        else:
            order = np.arange(self.n_samples) if order is None else order
            rows = self.rows(order)
            blocks = (self.X[rows[start : start + size]]
                      for start in range(0, len(rows), size))
        if not self._centred:
            return iter(blocks)
        return (block - self.centre for block in blocks)

    def batches(self, order: NDArray[np.intp] | None, B: int,
                T: int) -> Iterator[tuple[NDArray[np.float64], NDArray[np.intp]]]:
        """``(table, rows)`` of each of the T minibatches of B records of ``order`` (None:
        the records in their order); the records are ``table[rows] − centre``.

        In memory ``table`` is ``X`` itself; streamed, one B×p buffer that every minibatch
        is copied into (memory: one block and one minibatch, whatever n), and the records
        after T·B are not read."""
        if self._source is not None:
            del order  # the stream's own order
            yield from self._buffered(B, T)
            return
        X = self._in_place()
        if self.verify:  # the records after T·B are read by no step
            refuse_non_finite(X[self.rows(np.arange(T * B, self.n_samples) if order is None
                                          else order[T * B:])], "X")
        rows = self.rows(order[: T * B] if order is not None else np.arange(T * B))
        for t in range(T):
            yield X, rows[t * B : (t + 1) * B]

    def _buffered(self, B: int,
                  T: int) -> Iterator[tuple[NDArray[np.float64], NDArray[np.intp]]]:
        buffer = np.empty((B, self.n_features))
        rows = np.arange(B, dtype=np.intp)
        filled, done = 0, 0
        for block in self._read():
            start = 0
            while start < block.shape[0]:
                take = min(B - filled, block.shape[0] - start)
                buffer[filled:filled + take] = block[start:start + take]
                filled += take
                start += take
                if filled == B:
                    yield buffer, rows
                    filled, done = 0, done + 1
                    if done == T:
                        return  # the records after T·B are unused, as in memory: stop reading
        raise ValueError(f"The stream gave fewer than T·B = {T * B} records; its n_samples "
                         f"is {self.n_samples}. A chunk source must give the same rows on "
                         "every pass.")

    # ------------------------------------------------------------------ in memory, by position
    def rows(self, positions: NDArray[np.intp]) -> NDArray[np.intp]:
        """Rows of ``X`` holding the stream's records at ``positions``."""
        out = positions if self.index is None else self.index[positions]
        return np.ascontiguousarray(out, dtype=np.intp)

    def records(self, positions: NDArray[np.intp]) -> NDArray[np.float64]:
        """The records ``y_j`` at ``positions`` (a new array)."""
        Y = self._in_place()[self.rows(positions)]
        Y -= self.centre
        return Y

    def gradients(self, index: NDArray[np.intp], W: NDArray[np.float64]) -> NDArray[np.float64]:
        return VectorGradients(self.records(index)).gradients(np.arange(len(index)), W)

    def mean_gradient(
        self, index: NDArray[np.intp], W: NDArray[np.float64]
    ) -> NDArray[np.float64]:
        Y = self.records(index)
        return np.asarray(Y.T @ (Y @ W)) / max(len(index), 1)
