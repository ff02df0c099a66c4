"""Stability-based private histograms over an unbounded set of bins.

A stability histogram (Karwa & Vadhan 2018, Lemma 2.3; Bun, Nissim & Stemmer 2016) adds noise
only to the counts of **non-empty** bins and releases the bins whose noisy count exceeds a
threshold ``τ``. Empty bins are never touched, so no bound on the data's range is needed: this
is what lets DP-PCA find the scale and the centre of its gradients without a clipping norm.

Privacy (replace one record; the record contributes one value to each of ``H`` histograms)
------------------------------------------------------------------------------------------
Replacing a record moves one value from bin ``j`` to bin ``j'`` in each histogram: two counts
change by 1. Fix neighbours ``D, D'`` and let ``M̃`` add the same noise to every bin non-empty
in *either* dataset. ``M̃`` is an ordinary noisy-count mechanism on a fixed bin set:

* **Laplace** noise of scale ``b`` on each count: two Laplace mechanisms of L1 sensitivity 1
  per histogram, i.e. ``SelfComposedDpEvent(LaplaceDpEvent(b), 2·H)``;
* **Gaussian** noise of standard deviation ``σ``: one Gaussian mechanism on the vector of all
  counts with L2 sensitivity ``√(2H)``, i.e. ``GaussianDpEvent(σ/√(2H))``.

The real mechanism ``M`` differs from ``M̃`` only when ``M̃`` releases a bin that is empty
for the dataset at hand (count 0, at most one per histogram): probability
``t = H·P(noise > τ)`` per side (``½e^{−τ/b}`` or ``Φ̄(τ/σ)`` per histogram). By the
triangle inequality for the hockey-stick divergence, ``M`` is
``(ε, δ_M̃(ε) + (1 + e^ε)·t)``-DP; composition with other mechanisms works the same way
(:func:`privpca.accounting.compose_epsilon`'s ``tail``). This replaces the constants of
Karwa & Vadhan (``Lap(2/(εm))``, threshold ``2 ln(2/δ)/(εm) + 1/m``) with exact accounting;
their constants are a special case (``b = 2/ε``, which is pure ``ε`` for ``M̃``).

The Gaussian variant is used when one record enters many histograms at once (DP-PCA's
per-coordinate centres): Gaussian noise composes in L2, so ``H`` histograms cost ``√H`` times
the noise of one, against ``H`` for Laplace.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Literal

import dp_accounting
import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.stats import norm

from privpca._validation import check_delta, check_epsilon, check_in_range
from privpca.accounting.calibration import (
    analytic_multiplier,
    composed_laplace_scale,
    threshold_tail,
)
from privpca.accounting.composition import compose_epsilon
from privpca.mechanisms.noise import gaussian_release, laplace_release
from privpca.mechanisms.randomness import check_noise_rng

__all__ = [
    "HistogramRelease",
    "StabilityHistogram",
    "column_bin_counts",
    "geometric_bin",
    "geometric_bin_edges",
    "linear_bins",
    "threshold_tail",
    "window_bin_counts",
]

Noise = Literal["laplace", "gaussian"]
_MAX_BIN = 2**52  # bin indices beyond this are clamped (values ~1e15 bin widths away)


def geometric_bin(values: ArrayLike, *, base: float = math.sqrt(2.0)) -> NDArray[np.int64]:
    """Index ``j`` of the bin ``[base^j, base^(j+1))`` holding each positive value.

    Non-positive values go to a bin of their own, index ``-2**52``.
    """
    v = np.asarray(values, dtype=np.float64)
    out = np.full(v.shape, -_MAX_BIN, dtype=np.int64)
    pos = v > 0
    # The small offset puts exact powers of the base in the bin they open (log rounding).
    out[pos] = np.floor(np.log(v[pos]) / math.log(base) + 1e-9).astype(np.int64)
    return out


def geometric_bin_edges(index: int, *, base: float = math.sqrt(2.0)) -> tuple[float, float]:
    """The interval ``[base^index, base^(index+1))`` of a geometric bin."""
    if index <= -_MAX_BIN:
        return (0.0, 0.0)
    return (base**index, base ** (index + 1))


def linear_bins(values: ArrayLike, width: float) -> NDArray[np.int64]:
    """Index ``floor(v / width)`` of the bin ``[j·width, (j+1)·width)`` of each value."""
    v = np.asarray(values, dtype=np.float64) * (1.0 / width)
    if not np.abs(v).max(initial=0.0) < _MAX_BIN:  # also catches NaN
        v = np.clip(v, -_MAX_BIN, _MAX_BIN)
        v[np.isnan(v)] = _MAX_BIN  # every value needs a bin: NaN joins the top one
    return np.floor(v, out=v if v is not values else None).astype(np.int64)


def column_bin_counts(
    G: NDArray[np.float64],
    n_rows: int,
    width: float,
    bin_low: NDArray[np.int64],
    bin_high: NDArray[np.int64],
) -> tuple[NDArray[np.intp], NDArray[np.int64], NDArray[np.float64]]:
    """Non-empty ``(column, bin, count)`` of :func:`linear_bins` of ``G[:n_rows]``, in one pass.

    ``bin_low``/``bin_high`` are each column's lowest and highest bin (found in the pass that
    wrote ``G``). The triples come ordered by column, then bin — as :func:`_column_counts`
    orders them, so a release draws its noise in the same order either way. When the bins
    span a modest range, one compiled pass counts into a ``(columns, span)`` table; otherwise
    (a few values ~10⁶ bin widths away) the columns are sorted.
    """
    from privpca.mechanisms._kernels import bin_counts

    q = G.shape[1]
    span = int((bin_high - bin_low).max(initial=0)) + 1
    if n_rows == 0:
        empty = np.zeros(0, dtype=np.int64)
        return empty.astype(np.intp), empty, empty.astype(np.float64)
    if span * q > max(4 * n_rows * q, 1 << 20):
        return _column_counts(linear_bins(G[:n_rows], width))
    table = np.zeros((q, span), dtype=np.int64)
    bin_counts(G, n_rows, 1.0 / width, bin_low, table)
    nz = np.flatnonzero(table)
    col = nz // span
    return col, (nz - col * span) + bin_low[col], table.ravel()[nz].astype(np.float64)


def window_bin_counts(
    G: NDArray[np.float64],
    n_rows: int,
    width: float,
    base: NDArray[np.int64],
    table: NDArray[np.int64],
) -> tuple[NDArray[np.intp], NDArray[np.int64], NDArray[np.float64]]:
    """:func:`column_bin_counts` from the windowed counts of one compiled pass.

    ``table[j, 1 + v − base[j]]`` counts bin ``v`` of column ``j`` within a window;
    ``table[j, 0]`` and ``table[j, −1]`` count its values outside it (see
    :func:`privpca.mechanisms._kernels.gradient_counts`). Columns that spilled are counted
    again exactly from ``G[:n_rows]``; the triples are the same, in the same order.
    """
    window = table.shape[1] - 2
    inner = table[:, 1 : window + 1]
    nz = np.flatnonzero(inner)
    col = nz // window
    value = (nz - col * window) + base[col]
    counts = inner.ravel()[nz].astype(np.float64)
    spilled = np.flatnonzero((table[:, 0] != 0) | (table[:, -1] != 0))
    if spilled.size == 0:
        return col, value, counts
    keep = ~np.isin(col, spilled)
    c2, v2, n2 = _column_counts(linear_bins(G[:n_rows, spilled], width))
    col = np.concatenate([col[keep], spilled[c2]])
    order = np.argsort(col, kind="stable")  # by column; each source is by bin within one
    return (
        col[order],
        np.concatenate([value[keep], v2])[order],
        np.concatenate([counts[keep], n2])[order],
    )


@dataclass(frozen=True)
class HistogramRelease:
    """What one call released, per histogram.

    Attributes
    ----------
    mode : ndarray of int64, shape (n_histograms,)
        Index of the released bin with the largest noisy count (meaningless where
        ``released`` is False).
    released : ndarray of bool, shape (n_histograms,)
        Whether any bin cleared the threshold.
    """

    mode: NDArray[np.int64]
    released: NDArray[np.bool_]


@dataclass(frozen=True)
class StabilityHistogram:
    """A calibrated stability histogram: noise scale and release threshold on *counts*.

    Build with :meth:`calibrate`; apply with :meth:`release_modes`.

    Attributes
    ----------
    noise : {"laplace", "gaussian"}
    scale : float
        Laplace scale ``b`` or Gaussian standard deviation ``σ`` added to each count.
    threshold : float
        A bin is released when its noisy count exceeds this.
    n_histograms : int
        How many histograms one record contributes to (``H``).
    tail : float
        ``t``: probability per side that an empty bin would be released (see module doc).
    """

    noise: Noise
    scale: float
    threshold: float
    n_histograms: int
    tail: float

    @classmethod
    def calibrate(
        cls,
        epsilon: float,
        delta: float,
        *,
        n_histograms: int = 1,
        noise: Noise = "laplace",
        tail_fraction: float = 0.5,
    ) -> StabilityHistogram:
        """Noise and threshold for ``H = n_histograms`` histograms that are jointly (ε, δ)-DP.

        ``tail_fraction`` of δ pays for the threshold (``(1 + e^ε)·t``), the rest for the
        noise mechanism ``M̃``, whose scale is solved exactly (``dp-accounting`` for Laplace,
        the analytic Gaussian for Gaussian noise).
        """
        epsilon = check_epsilon(epsilon, owner="StabilityHistogram")
        delta = check_delta(delta, owner="StabilityHistogram")
        check_in_range(n_histograms, "n_histograms", low=1, low_closed=True, integer=True)
        check_in_range(tail_fraction, "tail_fraction", low=0, high=1)
        delta_noise = (1.0 - tail_fraction) * delta
        tail = threshold_tail(epsilon, delta, tail_fraction)
        per_hist = tail / n_histograms
        if noise == "laplace":
            scale = composed_laplace_scale(epsilon, delta_noise, 2 * n_histograms, compose_epsilon)
            threshold = scale * math.log(1.0 / (2.0 * per_hist))
        elif noise == "gaussian":
            multiplier = analytic_multiplier(epsilon, delta_noise)
            return cls.gaussian(multiplier, n_histograms=n_histograms, tail=tail)
        else:
            raise ValueError(f"noise must be 'laplace' or 'gaussian'. Got {noise!r} instead.")
        return cls(noise, scale, threshold, int(n_histograms), tail)

    @classmethod
    def gaussian(cls, multiplier: float, *, n_histograms: int, tail: float) -> StabilityHistogram:
        """Gaussian noise of multiplier ``σ/√(2H)`` and the threshold whose tail is ``tail``.

        For callers that split a budget themselves (e.g. DP-PCA's private mean, which composes
        these counts with another Gaussian mechanism).
        """
        scale = multiplier * math.sqrt(2.0 * n_histograms)
        threshold = scale * float(norm.isf(tail / n_histograms))
        return cls("gaussian", scale, threshold, int(n_histograms), tail)

    @property
    def sensitivity(self) -> float:
        """Of the vector of counts: L1 2 (Laplace, one record moves two counts by 1) or L2
        ``√(2H)`` (Gaussian, one count in each of H histograms)."""
        if self.noise == "laplace":
            return 2.0
        return math.sqrt(2.0 * self.n_histograms)

    def dp_event(self) -> dp_accounting.DpEvent:
        """The event of the coupled mechanism ``M̃`` (convention of privpca's accounting)."""
        if self.noise == "laplace":
            return dp_accounting.SelfComposedDpEvent(
                dp_accounting.LaplaceDpEvent(self.scale), 2 * self.n_histograms
            )
        return dp_accounting.GaussianDpEvent(self.scale / math.sqrt(2.0 * self.n_histograms))

    def release_modes(self, bins: ArrayLike, rng: np.random.Generator) -> HistogramRelease:
        """Privately find the most occupied bin of each column of ``bins``.

        Parameters
        ----------
        bins : array-like of int, shape (n_values, n_histograms)
            Bin index of every value, one column per histogram (one row per record).
        rng : numpy.random.Generator

        Returns
        -------
        HistogramRelease
        """
        B = _as_columns(bins, np.int64)
        n, h = B.shape
        if h != self.n_histograms:
            raise ValueError(
                f"bins has {h} histogram column(s); this histogram was calibrated for "
                f"{self.n_histograms}."
            )
        if n == 0:
            return HistogramRelease(np.zeros(h, dtype=np.int64), np.zeros(h, dtype=bool))
        return self.release_counts(*_column_counts(B), rng)

    def release_counts(
        self,
        col: NDArray[np.intp],
        value: NDArray[np.int64],
        counts: NDArray[np.float64],
        rng: np.random.Generator,
    ) -> HistogramRelease:
        """:meth:`release_modes` from the non-empty bins already counted.

        Parameters
        ----------
        col, value, counts : ndarray
            Every non-empty ``(histogram, bin)`` pair and its count, ordered by histogram,
            then bin (the order the noise is drawn in), e.g. from :func:`column_bin_counts`.
        rng : numpy.random.Generator
            In secure mode, None or an OS-keyed SecureGenerator only (``check_noise_rng``).

        Returns
        -------
        HistogramRelease
        """
        rng = check_noise_rng(rng, owner="StabilityHistogram")
        h = self.n_histograms
        mode = np.zeros(h, dtype=np.int64)
        released = np.zeros(h, dtype=bool)
        if counts.size == 0:
            return HistogramRelease(mode, released)
        if self.noise == "laplace":
            noisy = laplace_release(counts, self.scale, rng, sensitivity=self.sensitivity,
                                    integer_valued=True)
        else:
            noisy = gaussian_release(counts, self.scale, rng, sensitivity=self.sensitivity,
                                     integer_valued=True)
        ok = noisy > self.threshold
        if not ok.any():
            return HistogramRelease(mode, released)
        c_ok, v_ok, s_ok = col[ok], noisy[ok], value[ok]
        # Per column, the released run with the largest noisy count: sort by (column, count).
        order = np.lexsort((v_ok, c_ok))
        last = np.append(c_ok[order][1:] != c_ok[order][:-1], True)
        best = order[last]
        mode[c_ok[best]] = s_ok[best]
        released[c_ok[best]] = True
        return HistogramRelease(mode, released)


def _as_columns(values: ArrayLike, dtype: type) -> NDArray[Any]:
    """``values`` as an array with one column per histogram (1-D: a single histogram)."""
    V: NDArray[Any] = np.asarray(values, dtype=dtype)
    return V[:, None] if V.ndim == 1 else V


def _column_counts(
    B: NDArray[np.int64],
) -> tuple[NDArray[np.intp], NDArray[np.int64], NDArray[np.float64]]:
    """Every non-empty (column, bin) pair of ``B`` with its count, ordered by column then bin.

    When each column's bins span a modest range, one ``bincount`` over ``column·R + offset``
    does it in O(n·h); otherwise each column is sorted and read as runs.
    """
    n, h = B.shape
    low = B.min(axis=0)
    span = int((B.max(axis=0) - low).max()) + 1
    if span * h <= max(4 * n * h, 1 << 20):
        flat = (B - low) + np.arange(h, dtype=np.int64) * span
        table = np.bincount(flat.ravel(), minlength=span * h)
        nz = np.flatnonzero(table)
        col = nz // span
        return col, (nz - col * span) + low[col], table[nz].astype(np.float64)
    S = np.sort(B, axis=0).T  # (h, n): runs of equal bins, column by column
    starts = np.ones_like(S, dtype=bool)
    starts[:, 1:] = S[:, 1:] != S[:, :-1]
    col, pos = np.nonzero(starts)
    flat_start = col * n + pos
    run_end = np.append(flat_start[1:], h * n)  # every column's first entry starts a run
    return col, S[col, pos], (run_end - flat_start).astype(np.float64)
