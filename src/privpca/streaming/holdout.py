"""A secret, uniformly random held-out subset of a table's rows, whatever their order.

A fit that releases its preprocessing (private mean, bounds, scales) from a held-out share of
the rows and its statistic from the other rows composes the two in parallel, each at the whole
(ε, δ), provided that **for neighbouring tables D, D' (one record replaced) the two partitions
can be coupled so that every record other than the replaced one lands on the same side**. The
held-out set here is ``m = ⌈fraction·n⌉`` row indices drawn uniformly without replacement from
the estimator's own generator (:func:`random_row_split`), never from the data:

* *Order does not matter.* The draw is a uniformly random m-subset of positions, independent
  of the values, so the partition of the *multiset* of records is uniform over the ways of
  holding out m of them, whatever the row order: replacing a record and re-sorting the table
  (which moves other records to other positions) leaves the law of the partition unchanged.
  Couple the draws for D and D' through a bijection of positions that matches every unchanged
  record with itself (and the replaced record with its replacement): both sides get the same
  records but one, which is on the same side in both. Conditioned on the coupled draw, one set
  holds identical records and the other differs in one record, so the held-out plan and the
  statistic's plan (each (ε, δ)-DP on its own rows, the statistic's given the released
  preprocessing) compose to (ε, δ) for every draw, hence for the mixture.
* *Segments of consecutive rows are not enough:* they are safe for
  "replace the record at position i" only if positions are independent of the values. On a
  table sorted by a feature, replacing one record and re-sorting shifts every record between
  its old and new position by one, so each held-out segment in that range gains one record
  and loses another: at n = 20 000, 2 % held out in 2-row segments, 396 other records change
  sides, and even the best segment draw for the neighbour moves about 400
  (``tests/test_pipeline_holdout.py``): parallel composition proves nothing.
* The statistic must depend on its rows as a multiset for the coupling to carry over to it
  (the release pipeline's sums do). A stream read in storage order (the Oja family on a
  streamed table) is private for replacing the record at a position.
* *Not a keyed hash of the row content either:* duplicated records would always go to the same
  side, so replacing one of two equal records changes which side their copies fall on and the
  coupling above fails.
* *The draw must stay secret* (it is part of the mechanism's randomness, like the noise): it is
  never published (only ``n_held``, a function of n and the public fraction, is), and in secure
  mode the generator is a :class:`~privpca.mechanisms.secure_noise.SecureGenerator`
  (AES-128-CTR, OS-keyed). Under Dask the indices travel in the task graph to the workers, which
  hold the data anyway.

The indices are kept sorted (int64, 8 bytes per held-out row: 16 MB for 2 % of 10⁸ rows), so a
block of rows ``[a, b)`` finds its own held-out rows by two binary searches: blocks read in
storage order, in parallel threads or as Dask chunks, each drop (statistic) or keep
(preprocessing) their own rows (:mod:`privpca.streaming.sources`: :func:`take_rows`,
:func:`drop_rows`).

On sorted rows the held-out statistics are now those of a simple random sample of the rows (not
a cluster sample of a few neighbourhoods, as with segments).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

__all__ = ["RowSplit", "held_out_size", "random_row_split", "random_subset"]


def held_out_size(n: int, fraction: float) -> int:
    """``min(n, ⌈fraction·n⌉)``: the held-out share's size, a function of public values only."""
    return min(int(n), math.ceil(float(fraction) * int(n)))


@dataclass(frozen=True)
class RowSplit:
    """A table's held-out rows (sorted int64 indices) and, implicitly, the rest."""

    n: int
    held: NDArray[np.int64]

    @property
    def n_held(self) -> int:
        return int(self.held.size)

    @property
    def n_rest(self) -> int:
        return self.n - self.n_held


def random_subset(n: int, m: int, rng: np.random.Generator) -> NDArray[np.int64]:
    """A uniformly random m-subset of ``range(n)``, as sorted int64 indices, in O(m) memory
    (O(n) bits when ``m > n/2``: the complement is drawn instead).

    Uniform because every step commutes with relabelling the n positions: i.i.d. uniform
    integers, the set of distinct values (more draws while fewer than m are distinct, a test
    on their number only), and a uniformly random m-subset of that set; a law on m-subsets
    invariant under every permutation of ``range(n)`` is the uniform one.
    """
    n, m = int(n), int(m)
    if not 0 <= m <= n:
        raise ValueError(f"Cannot draw {m} of {n} rows.")
    if 2 * m > n:  # the complement is the smaller set
        keep = np.ones(n, dtype=bool)
        keep[random_subset(n, n - m, rng)] = False
        return np.flatnonzero(keep).astype(np.int64, copy=False)
    chosen = np.empty(0, dtype=np.int64)
    while chosen.size < m:
        c = chosen.size
        # Draws expected to give the m − c missing distinct values, with a margin (usually
        # one round; the surplus is dropped uniformly below).
        k = -n * math.log1p(-(m - c) / (n - c))
        k = math.ceil(k + 4.0 * math.sqrt(k) + 16)
        chosen = _sorted_distinct(np.concatenate(
            [chosen, rng.integers(0, n, size=k, dtype=np.int64)]))
    surplus = chosen.size - m
    if surplus:
        chosen = np.delete(chosen, rng.choice(chosen.size, size=surplus, replace=False))
    return chosen


def _sorted_distinct(values: NDArray[np.int64]) -> NDArray[np.int64]:
    """The distinct values, sorted (``np.unique`` without its overhead: a sort and a mask)."""
    values = np.sort(values)
    if values.size < 2:
        return values
    first = np.empty(values.size, dtype=bool)
    first[0] = True
    np.not_equal(values[1:], values[:-1], out=first[1:])
    return values[first]


def random_row_split(n: int, fraction: float, rng: np.random.Generator) -> RowSplit:
    """``⌈fraction·n⌉`` rows drawn uniformly without replacement from ``rng`` (the estimator's
    own generator, kept secret), as sorted indices; the rest are the other rows (module
    docstring: why this keeps parallel composition on any row order)."""
    return RowSplit(int(n), random_subset(n, held_out_size(n, fraction), rng))
