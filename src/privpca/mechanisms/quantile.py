"""Private quantiles of non-negative values (row norms, |feature − mean|) on a log grid.

The values are binned on the fixed geometric grid ``[b^j, b^(j+1))`` with ``b = 2^(1/4)``
(bins 19 % wide, any scale from 10⁻³⁰⁰ to 10³⁰⁰, zero in a bin of its own) — or ``2^(1/2)``
or ``2`` when there are few records for the threshold (:func:`grid_base`: a function of the
public n and the threshold only, so the choice is free) — and a Gaussian
**stability histogram** (:class:`~privpca.mechanisms.histogram.StabilityHistogram`) releases
the noisy counts of the bins that clear a threshold. The q-quantile is then read off the
released bins: the upper edge of the first bin at which the released cumulative count reaches
``q`` times the released total. Bins below the threshold (a thin tail spread over many bins)
are treated as empty, so the estimate errs towards a *smaller* bound (more clipping, less
noise) rather than towards the largest outlier.

Privacy (replace one record; it contributes one value to each of ``H`` histograms)
----------------------------------------------------------------------------------
Two counts per histogram change by one, so the vector of all counts has L2 sensitivity
``√(2H)``; with Gaussian noise of standard deviation ``σ`` the coupled fixed-bin mechanism is
``GaussianDpEvent(σ/√(2H))``, plus the tail ``t`` (probability that an empty bin clears the
threshold) that :mod:`privpca.accounting` adds to δ. Everything after the noisy counts is
post-processing. No bound on the values is needed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from privpca._validation import check_in_range, check_noise_rng
from privpca.mechanisms.histogram import (
    StabilityHistogram,
    _as_columns,
    _column_counts,
    geometric_bin,
)
from privpca.mechanisms.noise import gaussian_release

__all__ = ["LOG_GRID_BASE", "PrivateQuantile", "QuantileRelease", "grid_base"]

#: Ratio of consecutive bin edges of the grid.
LOG_GRID_BASE = 2.0**0.25
_ZERO_BIN = -(2**52)


@dataclass(frozen=True)
class QuantileRelease:
    """What :meth:`PrivateQuantile.estimate` released, per histogram.

    Attributes
    ----------
    value : ndarray of shape (n_histograms,)
        The private quantile (upper edge of the bin that reaches it); NaN where no bin
        cleared the threshold.
    released_mass : ndarray of shape (n_histograms,)
        Sum of the released noisy counts (a private estimate of the number of values in
        bins that are not sparse).
    above : ndarray of shape (n_histograms,)
        Released noisy count above ``value`` (a private estimate of how many values the
        bound clips; free to publish).
    """

    value: NDArray[np.float64]
    released_mass: NDArray[np.float64]
    above: NDArray[np.float64]
    #: The first histogram's released bins (grid indices) and their noisy counts, so that
    #: other quantiles can be read off the same release (post-processing, :meth:`at`).
    bins: NDArray[np.int64] | None = None
    counts: NDArray[np.float64] | None = None
    base: float = LOG_GRID_BASE
    #: The release threshold τ on noisy counts (public: set by ε, δ and the tail).
    threshold: float = math.nan

    def at(self, quantile: float, *, interpolate: bool = False) -> tuple[float, float]:
        """``(q-quantile, released count above it)`` of the first histogram, read off
        the same released bins as :attr:`value` (no further privacy cost); NaN when no bin
        was released. By default the quantile is the upper edge of the bin that reaches it;
        ``interpolate=True`` places it inside that bin, geometrically, where the released
        counts put it (as if the norms were spread evenly in log scale within a bin: on the
        coarse grids of small tables the edge can be up to twice the quantile), and the
        count above is the released count above that point, read the same way."""
        if self.bins is None or self.counts is None or self.bins.size == 0:
            return math.nan, math.nan
        return _read_quantile(self.bins, self.counts, quantile, self.base,
                              interpolate=interpolate)

    def top_bin(self) -> tuple[float, float]:
        """``(upper edge, released noisy count)`` of the first histogram's highest released
        bin (post-processing); NaN when no bin was released."""
        if self.bins is None or self.counts is None or self.bins.size == 0:
            return math.nan, math.nan
        return _upper_edge(int(self.bins[-1]), self.base), float(self.counts[-1])


@dataclass(frozen=True)
class PrivateQuantile:
    """A calibrated private q-quantile on the log grid (see the module docstring).

    Parameters
    ----------
    quantile : float
        q in (0, 1].
    histogram : StabilityHistogram
        Gaussian stability histogram (noise, threshold, tail) for ``n_histograms`` columns.
    """

    quantile: float
    histogram: StabilityHistogram
    base: float = LOG_GRID_BASE

    @classmethod
    def calibrate(
        cls,
        multiplier: float,
        tail: float,
        *,
        quantile: float,
        n_histograms: int = 1,
        n_records: int | None = None,
    ) -> PrivateQuantile:
        """Gaussian noise of multiplier ``σ/√(2H)`` and the threshold whose tail is ``tail``.

        With ``n_records`` (public), the grid is widened when the records are few for the
        threshold (:func:`grid_base`).
        """
        q = check_in_range(quantile, "quantile", low=0.0, high=1.0, high_closed=True)
        check_in_range(tail, "tail", low=0.0, high=1.0)
        hist = StabilityHistogram.gaussian(multiplier, n_histograms=n_histograms, tail=tail)
        base = LOG_GRID_BASE if n_records is None else grid_base(n_records, hist.threshold)
        return cls(q, hist, base)

    def estimate(self, values: ArrayLike, rng: np.random.Generator) -> QuantileRelease:
        """The private quantile of each column of ``values`` (non-negative, one row per record).

        Parameters
        ----------
        values : array-like of shape (n_records,) or (n_records, n_histograms)
        rng : numpy.random.Generator

        Returns
        -------
        QuantileRelease
        """
        V = _as_columns(values, np.float64)
        h = V.shape[1]
        if h != self.histogram.n_histograms:
            raise ValueError(f"values has {h} column(s); calibrated for "
                             f"{self.histogram.n_histograms}.")
        col, index, counts = _column_counts(geometric_bin(V, base=self.base))
        return self.estimate_counts(col, index, counts, rng, n_histograms=h)

    def estimate_counts(
        self,
        col: NDArray[np.intp],
        index: NDArray[np.int64],
        counts: NDArray[np.float64],
        rng: np.random.Generator,
        *,
        n_histograms: int = 1,
    ) -> QuantileRelease:
        """:meth:`estimate` from the exact bin counts on this grid (``self.base``).

        ``(col, index, counts)``: every non-empty (histogram, bin) pair, ordered by histogram
        then bin, with its count (as :func:`~privpca.mechanisms.histogram._column_counts`
        returns them). Streamed fits sum these counts over blocks of rows and release the
        total here, exactly as if the values had been passed at once.
        """
        rng = check_noise_rng(rng, owner="PrivateQuantile")  # secure mode: OS-keyed only
        h = int(n_histograms)
        noisy = gaussian_release(counts, self.histogram.scale, rng,
                                 sensitivity=self.histogram.sensitivity, integer_valued=True)
        ok = noisy > self.histogram.threshold
        value = np.full(h, np.nan)
        mass = np.zeros(h)
        above = np.zeros(h)
        # _column_counts orders by column, then bin: each column's released bins are a run.
        col, index, noisy = col[ok], index[ok], noisy[ok]
        first: tuple[NDArray[np.int64], NDArray[np.float64]] | None = None
        for c in np.unique(col):
            sel = col == c
            idx, cnt = index[sel], noisy[sel]
            if c == 0:
                first = (idx.copy(), cnt.copy())
            value[c], above[c] = _read_quantile(idx, cnt, self.quantile, self.base)
            mass[c] = float(np.cumsum(cnt)[-1])  # as the quantile reads it
        if first is None:
            return QuantileRelease(value, mass, above, base=self.base,
                                   threshold=self.histogram.threshold)
        return QuantileRelease(value, mass, above, first[0], first[1], self.base,
                               self.histogram.threshold)


def _read_quantile(idx: NDArray[np.int64], cnt: NDArray[np.float64], quantile: float,
                   base: float, *, interpolate: bool = False) -> tuple[float, float]:
    """The upper edge of the first released bin whose cumulative count reaches ``quantile``
    of the released total (``interpolate``: the point inside that bin, geometric between its
    edges, at the quantile's share of its count), and the released count above that bin."""
    cum = np.cumsum(cnt)
    total = cum[-1]
    j = int(np.searchsorted(cum, quantile * total * (1 - 1e-12)))
    j = min(j, len(idx) - 1)
    value = _upper_edge(int(idx[j]), base)
    if interpolate and value > 0.0:
        before = float(cum[j - 1]) if j > 0 else 0.0
        share = min(max((quantile * total - before) / float(cnt[j]), 0.0), 1.0)
        value = base ** (int(idx[j]) + share)
        return float(value), float(total - before - share * float(cnt[j]))
    return float(value), float(total - cum[j])


def grid_base(n_records: int, threshold: float) -> float:
    """Bin ratio for ``n_records`` values against a release ``threshold`` (both public).

    Norms of real rows typically spread over a factor of 2–3; a bin must hold more than the
    threshold to be released. 2^(1/4) when n ≥ 16·threshold, 2^(1/2) when n ≥ 6·threshold,
    else 2 (a coarser bound, up to twice the quantile, rather than none).
    """
    if n_records >= 16 * threshold:
        return LOG_GRID_BASE
    if n_records >= 6 * threshold:
        return 2.0**0.5
    return 2.0


def _upper_edge(index: int, base: float) -> float:
    """Upper edge ``base^(index+1)`` of bin ``index`` (0 for the bin of zeros)."""
    return 0.0 if index <= _ZERO_BIN else float(base ** (index + 1))


def log_grid_edge(index: int) -> float:
    """Upper edge ``b^(index+1)`` of bin ``index`` (for documentation and tests)."""
    return 0.0 if index <= _ZERO_BIN else math.pow(LOG_GRID_BASE, index + 1)
