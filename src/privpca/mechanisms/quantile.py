"""Private quantiles of non-negative values (row norms, |feature − mean|) by noisy bisection.

The values are located on a fixed public log grid, the edges ``b^e`` with ``b = 2^(1/4)``
(steps of 19 %) for ``e`` from −512 to 512, i.e. from ``2^−128`` to ``2^128``. A q-quantile is
found by bisection over the edges: :data:`QUERY_ROUNDS` = 10 rounds halve the 1 024 steps to
one, and each round releases one noisy count ``#{v < b^e} + N(0, σ²)`` at the middle edge of
the interval left. The answer is the upper edge ``b^e`` of the last interval, the smallest
edge whose noisy count reached the target rank ``q·n``.

Why bisection (and not a histogram)
-----------------------------------
A stability histogram (:mod:`privpca.mechanisms.histogram`) releases only bins whose noisy
count clears a threshold of a few hundred rows; where the norms spread over many bins (seven
octaves of norms over 5 000 rows) or the table is small, nothing clears it and the fit had to
refuse. A count query below an edge sees every row below it, however thinly spread: the rank
error of the bisection is a few ``σ`` whatever the spread, and it never fails to return a
value. Values outside the grid are counted as below every edge (under ``2^−128``, zeros
included) or above every edge (from ``2^128``: the quantile is then at most ``2^128``, and
rows above it are clipped like any other).

Targets near ``n``
------------------
Above the largest value every count is ``n``, and a round there that reads its noisy count
below the target sends the search *up*, past every later edge: the answer would land orders of
magnitude above the data. A target is therefore ``min(q·n, n − 4.5σ)``, so such a round errs
with probability ``Φ(−4.5) ≈ 3·10⁻⁶`` (and one below every value, count 0 against a target of
at least ``5σ``, with less); ``q = 1`` asks for the point below which all but about ``4.5σ``
rows lie, a robust "maximum". :meth:`PrivateQuantile.min_records` is the public n below which
the median is not resolved (``n < 10σ``); callers refuse there, before anything is released.
(With a margin of 2σ, one round in 44 above the data erred and a per-feature scale came out
at ``2^64``.)

Privacy (replace one record; it contributes one value to each of ``H`` columns)
-------------------------------------------------------------------------------
One round releases, for every requested quantile and column, one count below an edge chosen
from earlier rounds' outputs: replacing a record moves each count by at most one, so a round's
vector of ``Q·H`` counts has L2 sensitivity ``√(QH)``. The part's budget, a Gaussian of
multiplier ``m``, is split exactly over the 10 adaptive rounds: each gets multiplier
``m·√10``, so ``σ = m·√10·√(QH)`` per count (``GaussianDpEvent(m)`` for the whole search,
no δ tail). Everything after the noisy counts is post-processing.
"""

from __future__ import annotations

import math
from collections.abc import Generator
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from privpca._validation import check_in_range
from privpca.mechanisms.histogram import _as_columns, _column_counts, geometric_bin
from privpca.mechanisms.noise import gaussian_release
from privpca.mechanisms.randomness import check_noise_rng

__all__ = ["GRID_BASE", "GRID_RANGE", "QUERY_ROUNDS", "PrivateQuantile", "QuantileRelease"]

#: Ratio of consecutive edges of the grid.
GRID_BASE = 2.0**0.25
#: The edges searched are ``GRID_BASE**e`` for ``e`` in ``(-_EDGE, _EDGE]``.
_EDGE = 512
#: The smallest and largest value a search can release (2^±128 ≈ 2.9e-39 and 3.4e38): a
#: quantile beyond them comes out at that end.
GRID_RANGE = (GRID_BASE ** (1 - _EDGE), GRID_BASE**_EDGE)
#: Rounds of the bisection (``2**QUERY_ROUNDS == 2 * _EDGE`` steps).
QUERY_ROUNDS = 10
#: A target rank is at most ``n − TOP_MARGIN·σ`` (see the module docstring).
TOP_MARGIN = 4.5
#: ``n ≥ MIN_RECORDS_PER_SIGMA·σ`` for the median to be resolved (its target ≥ 5σ).
MIN_RECORDS_PER_SIGMA = 10.0


@dataclass(frozen=True)
class QuantileRelease:
    """What one search released: per requested quantile (rows) and column (columns).

    Attributes
    ----------
    value : ndarray of shape (n_quantiles, n_columns)
        The private quantile: the upper edge ``b^e`` of the last interval.
    above : ndarray of shape (n_quantiles, n_columns)
        ``n`` minus the noisy count released at that edge: a private estimate of how many
        values the bound clips (0 where the edge was never queried: the top of the grid).
    lower, upper : ndarray of shape (n_quantiles, n_columns)
        The noisy counts released at the interval's two edges ``b^(e−1)`` and ``b^e``
        (NaN where that edge was never queried): :meth:`interpolated` reads inside it.
    target : ndarray of shape (n_quantiles,)
        The target ranks.
    noise : float
        The standard deviation of every released count.
    """

    value: NDArray[np.float64]
    above: NDArray[np.float64]
    lower: NDArray[np.float64]
    upper: NDArray[np.float64]
    target: NDArray[np.float64]
    noise: float

    def interpolated(self) -> NDArray[np.float64]:
        """The quantiles placed inside their last interval, geometrically, where the two
        released counts put the target (post-processing; the edge itself where a count is
        missing or the counts do not bracket the target)."""
        edge = np.log(self.value) / math.log(GRID_BASE)
        share = (self.target[:, None] - self.lower) / (self.upper - self.lower)
        ok = np.isfinite(share) & (self.upper > self.lower)
        share = np.where(ok, np.clip(share, 0.0, 1.0), 1.0)
        return np.asarray(GRID_BASE ** (edge - 1.0 + share), dtype=np.float64)


@dataclass(frozen=True)
class PrivateQuantile:
    """Calibrated private quantiles by noisy bisection (see the module docstring).

    Parameters
    ----------
    quantiles : tuple of float
        The q in (0, 1] searched, all with the same budget.
    multiplier : float
        Noise multiplier ``σ/Δ`` of the whole search (all rounds, quantiles and columns).
    n_records : int
        The public number of values per column.
    n_columns : int
        How many columns (one value each per record).
    """

    quantiles: tuple[float, ...]
    multiplier: float
    n_records: int
    n_columns: int = 1

    @classmethod
    def calibrate(cls, multiplier: float, *, quantiles: float | tuple[float, ...],
                  n_records: int, n_columns: int = 1) -> PrivateQuantile:
        """Check and store the search's public parameters."""
        qs = (quantiles,) if isinstance(quantiles, float | int) else tuple(quantiles)
        for q in qs:
            check_in_range(q, "quantile", low=0.0, high=1.0, high_closed=True)
        if not multiplier > 0.0:
            raise ValueError(f"multiplier must be positive; got {multiplier!r}.")
        return cls(tuple(float(q) for q in qs), float(multiplier), int(n_records),
                   int(n_columns))

    @property
    def sensitivity(self) -> float:
        """L2 sensitivity of one round's counts: ``√(QH)``."""
        return math.sqrt(len(self.quantiles) * self.n_columns)

    @property
    def noise(self) -> float:
        """Standard deviation of each released count: ``m·√(rounds)·√(QH)``."""
        return self.multiplier * math.sqrt(QUERY_ROUNDS) * self.sensitivity

    @property
    def targets(self) -> NDArray[np.float64]:
        """The target ranks ``min(q·n, n − 4.5σ)``."""
        n = float(self.n_records)
        return np.minimum(np.asarray(self.quantiles) * n, n - TOP_MARGIN * self.noise)

    @staticmethod
    def records_needed(noise: float) -> int:
        """The fewest records for which a search whose counts have std ``noise`` resolves
        the median (``n ≥ 10σ``)."""
        return math.ceil(MIN_RECORDS_PER_SIGMA * noise)

    def min_records(self) -> int:
        """:meth:`records_needed` for this search's noise."""
        return self.records_needed(self.noise)

    def estimate(self, values: ArrayLike, rng: np.random.Generator) -> QuantileRelease:
        """The private quantiles of each column of ``values`` (non-negative, one row per
        record)."""
        V = _as_columns(values, np.float64)
        if V.shape[1] != self.n_columns or V.shape[0] != self.n_records:
            raise ValueError(f"values has shape {V.shape}; calibrated for "
                             f"({self.n_records}, {self.n_columns}).")
        col, index, counts = _column_counts(geometric_bin(V, base=GRID_BASE))
        return self.estimate_counts(col, index, counts, rng)

    def estimate_counts(
        self,
        col: NDArray[np.intp],
        index: NDArray[np.int64],
        counts: NDArray[np.float64],
        rng: np.random.Generator,
    ) -> QuantileRelease:
        """:meth:`estimate` from the exact counts on the grid of ratio :data:`GRID_BASE`.

        ``(col, index, counts)``: every non-empty (column, bin) pair, ordered by column then
        bin (bin ``j`` holds ``[b^j, b^(j+1))``), with its count — as
        :func:`~privpca.mechanisms.histogram._column_counts` returns them; streamed fits
        sum them over blocks of rows.
        """
        rng = check_noise_rng(rng, owner="PrivateQuantile")  # secure mode: OS-keyed only
        below = _CountsBelow(col, index, counts, self.n_columns)
        search = self.bisection()
        columns, mid = next(search)
        try:
            while True:
                noisy = gaussian_release(below(columns, mid).astype(np.float64), self.noise,
                                         rng, sensitivity=self.sensitivity, integer_valued=True)
                columns, mid = search.send(noisy)
        except StopIteration as done:
            return done.value

    def bisection(self) -> Generator[tuple[NDArray[np.int64], NDArray[np.int64]],
                                     NDArray[np.float64], QuantileRelease]:
        """The search as a coroutine: it yields ``(columns, edges)`` and is sent the noisy
        counts below them (std :attr:`noise`, from whoever releases them: this process, or a
        secure sum over data providers); it returns the release."""
        h, q = self.n_columns, len(self.quantiles)
        lo = np.full((q, h), -_EDGE, dtype=np.int64)
        hi = np.full((q, h), _EDGE, dtype=np.int64)
        c_lo = np.full((q, h), np.nan)
        c_hi = np.full((q, h), np.nan)
        target = self.targets[:, None]
        columns = np.broadcast_to(np.arange(h), (q, h))
        for _ in range(QUERY_ROUNDS):
            mid = (lo + hi) // 2
            noisy = np.asarray((yield columns, mid), dtype=np.float64)
            up = noisy >= target
            hi, c_hi = np.where(up, mid, hi), np.where(up, noisy, c_hi)
            lo, c_lo = np.where(up, lo, mid), np.where(up, c_lo, noisy)
        value = GRID_BASE ** hi.astype(np.float64)
        above = np.where(np.isnan(c_hi), 0.0, np.maximum(self.n_records - c_hi, 0.0))
        return QuantileRelease(value, above, c_lo, c_hi, self.targets, self.noise)


class _CountsBelow:
    """``#{v < b^e}`` per column from sorted ``(column, bin, count)`` triples."""

    def __init__(self, col: NDArray[np.intp], index: NDArray[np.int64],
                 counts: NDArray[np.float64], n_columns: int) -> None:
        # Bins beyond the searched edges count the same at every edge: clamp them so the
        # keys (column, bin) fit one int64.
        span = 4 * _EDGE
        clamped = np.clip(np.asarray(index, dtype=np.int64), -2 * _EDGE, 2 * _EDGE - 1)
        self.span = span
        self.keys = np.asarray(col, dtype=np.int64) * span + (clamped + 2 * _EDGE)
        self.cum = np.concatenate([[0.0], np.cumsum(np.asarray(counts, dtype=np.float64))])
        self.start = np.searchsorted(self.keys, np.arange(n_columns) * span)

    def __call__(self, columns: NDArray[np.int64], edge: NDArray[np.int64]) -> NDArray[np.float64]:
        pos = np.searchsorted(self.keys, columns * self.span + (edge + 2 * _EDGE))
        return np.asarray(self.cum[pos] - self.cum[self.start[columns]], dtype=np.float64)
