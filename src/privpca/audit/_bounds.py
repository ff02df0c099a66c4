"""Clopper–Pearson bounds, the threshold search and the power of a threshold audit.

A threshold test sets ``S = {s > t}`` (or ``{s ≤ t}``) for a scalar statistic ``s`` of a
release. If the mechanism is (ε, δ)-DP then for both orderings of the neighbours
``P[M(X) ∈ S] ≤ e^ε P[M(X') ∈ S] + δ``, so with ``p₀`` a lower confidence bound on the first
probability and ``p₁`` an upper bound on the second, ``ε ≥ ln((p₀ − δ)/p₁)``. Each bound is
one-sided Clopper–Pearson at level ``1 − α/2``, so the pair holds with probability ≥ 1 − α
(union bound) for the one test chosen before the evaluation runs were looked at.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.stats import beta, laplace, norm

__all__ = ["CellBounds", "ThresholdTest", "best_threshold", "cp_lower", "cp_upper",
           "epsilon_bound", "ideal_power", "p_value"]

#: The smallest p-value reported (the Clopper–Pearson quantiles lose precision below it).
P_FLOOR = 1e-15


def cp_lower(k: ArrayLike, n: int, level: float) -> NDArray[np.float64]:
    """One-sided Clopper–Pearson lower bound on p from k successes of n, at ``level``."""
    k_arr = np.asarray(k, dtype=np.float64)
    with np.errstate(invalid="ignore"):
        out = beta.ppf(1.0 - level, k_arr, n - k_arr + 1.0)
    return np.asarray(np.where(k_arr <= 0, 0.0, out), dtype=np.float64)


def cp_upper(k: ArrayLike, n: int, level: float) -> NDArray[np.float64]:
    """One-sided Clopper–Pearson upper bound on p from k successes of n, at ``level``."""
    k_arr = np.asarray(k, dtype=np.float64)
    with np.errstate(invalid="ignore"):
        out = beta.ppf(level, k_arr + 1.0, n - k_arr)
    return np.asarray(np.where(k_arr >= n, 1.0, out), dtype=np.float64)


def epsilon_bound(k0: ArrayLike, n0: int, k1: ArrayLike,
                  n1: int, delta: float, confidence: float) -> NDArray[np.float64]:
    """``max(0, ln((p₀ − δ)/p₁))`` with CP bounds, each at level ``1 − (1 − confidence)/2``."""
    level = 1.0 - (1.0 - confidence) / 2.0
    p0 = cp_lower(k0, n0, level) - delta
    p1 = cp_upper(k1, n1, level)
    with np.errstate(divide="ignore", invalid="ignore"):
        eps = np.log(np.maximum(p0, 0.0) / p1)
    return np.asarray(np.nan_to_num(np.maximum(eps, 0.0), nan=0.0, posinf=0.0),
                      dtype=np.float64)


@functools.lru_cache(maxsize=4096)
def p_value(k0: int, n0: int, k1: int, n1: int, delta: float, epsilon: float) -> float:
    """The p-value of "the mechanism is (ε, δ)-DP" from one pre-chosen test's counts.

    The smallest α at which :func:`epsilon_bound` at confidence ``1 − α`` exceeds ``epsilon``
    (1 when it never does, :data:`P_FLOOR` at most precision), to a relative precision of
    10⁻⁶. Valid: if the mechanism is (ε, δ)-DP, ``P[p ≤ α] ≤ α`` for every α, because the
    bound at ``1 − α`` exceeds ε with probability at most α and it grows as α does. These are
    the p-values the family-wise (Holm) correction of :mod:`privpca.audit.family` combines.
    """
    k0, n0, k1, n1 = int(k0), int(n0), int(k1), int(n1)

    def bounds(alphas: NDArray[np.float64]) -> NDArray[np.float64]:
        level = 1.0 - alphas / 2.0
        with np.errstate(invalid="ignore", divide="ignore"):
            lo = (beta.ppf(1.0 - level, k0, n0 - k0 + 1.0) if k0 > 0
                  else np.zeros_like(alphas)) - delta
            hi = beta.ppf(level, k1 + 1.0, n1 - k1) if k1 < n1 else np.ones_like(alphas)
            eps = np.log(np.maximum(lo, 0.0) / hi)
        return np.asarray(np.nan_to_num(eps, nan=-np.inf, posinf=-np.inf))

    lo_log, hi_log = math.log(P_FLOOR), math.log(1.0 - 1e-12)
    ends = bounds(np.exp(np.array([lo_log, hi_log])))
    if ends[1] <= epsilon:  # not even at confidence ~0
        return 1.0
    if ends[0] > epsilon:
        return P_FLOOR
    # The bound grows with α: narrow the bracket [lo_log, hi_log] in log α on 33-point grids.
    while hi_log - lo_log > 1e-6:
        grid = np.linspace(lo_log, hi_log, 33)
        above = np.flatnonzero(bounds(np.exp(grid)) > epsilon)
        i = int(above[0]) if above.size else 32
        lo_log, hi_log = float(grid[max(i - 1, 0)]), float(grid[i])
    return float(math.exp(hi_log))


class CellBounds:
    """What a report of one test (``epsilon``, ``delta``, ``epsilon_lower``, ``counts``)
    gives: whether the claim is violated, and the bound at any level.

    ``counts`` are the evaluation hits ``(k₀, k₁, n)`` of the one test chosen on the
    selection runs; the bound at another confidence reuses them (the test does not change).
    """

    epsilon: float
    delta: float
    epsilon_lower: float
    counts: tuple[int, int, int]

    @property
    def violated(self) -> bool:
        """Whether the runs prove a larger ε than claimed."""
        return self.epsilon_lower > self.epsilon

    @property
    def _verdict(self) -> str:
        return "VIOLATION" if self.violated else "ok"

    def epsilon_lower_at(self, confidence: float) -> float:
        """The ε lower bound these evaluation counts prove at ``confidence`` (e.g. a
        Bonferroni-corrected per-cell level)."""
        k0, k1, n = self.counts
        if n <= 0:
            return 0.0
        return float(epsilon_bound(k0, n, k1, n, self.delta, confidence))

    @property
    def p_value(self) -> float:
        """The p-value of the claim "(ε, δ)-DP" (:func:`p_value`); 1 when no test was made."""
        k0, k1, n = self.counts
        if n <= 0:
            return 1.0
        return p_value(k0, n, k1, n, self.delta, self.epsilon)


@dataclass(frozen=True)
class ThresholdTest:
    """One chosen test: ``s > threshold`` (``upper=True``) or ``s <= threshold``; ``swap``
    puts the neighbour first (its probability is bounded below)."""

    threshold: float
    upper: bool
    swap: bool

    def counts(self, s0: NDArray[np.float64], s1: NDArray[np.float64]) -> tuple[int, int]:
        """(hits among the first dataset's runs, hits among the second's), in test order."""
        hit0 = s0 > self.threshold if self.upper else s0 <= self.threshold
        hit1 = s1 > self.threshold if self.upper else s1 <= self.threshold
        a, b = int(hit0.sum()), int(hit1.sum())
        return (b, a) if self.swap else (a, b)


def best_threshold(s0: NDArray[np.float64], s1: NDArray[np.float64], delta: float,
                   confidence: float, max_candidates: int = 400) -> tuple[float, ThresholdTest]:
    """The threshold test with the largest ε bound on these (selection) runs.

    Candidates: quantiles of the pooled statistic, denser in both tails (where the
    likelihood ratio is largest), in both directions and both orderings.
    """
    pooled = np.sort(np.concatenate([s0, s1]))
    m = pooled.size
    # Ranks geometric from each end, then uniform: the tails matter most for ε.
    tail = np.unique(np.geomspace(1, max(m // 2, 1), max_candidates // 3).astype(np.int64))
    mid = np.linspace(0, m - 1, max_candidates // 3).astype(np.int64)
    ranks = np.unique(np.concatenate([tail - 1, m - tail, mid]))
    ranks = ranks[(ranks >= 0) & (ranks < m)]
    thresholds = np.unique(pooled[ranks])
    a0 = np.sort(s0)
    a1 = np.sort(s1)
    n0, n1 = a0.size, a1.size
    above0 = n0 - np.searchsorted(a0, thresholds, side="right")
    above1 = n1 - np.searchsorted(a1, thresholds, side="right")
    best = (-1.0, ThresholdTest(float(thresholds[0]), True, False))
    for upper in (True, False):
        h0 = above0 if upper else n0 - above0
        h1 = above1 if upper else n1 - above1
        for swap in (False, True):
            k0, k1, m0, m1 = (h1, h0, n1, n0) if swap else (h0, h1, n0, n1)
            eps = epsilon_bound(k0, m0, k1, m1, delta, confidence)
            i = int(np.argmax(eps))
            if eps[i] > best[0]:
                best = (float(eps[i]), ThresholdTest(float(thresholds[i]), upper, swap))
    return best


@functools.lru_cache(maxsize=512)
def ideal_power(epsilon: float, delta: float, runs: int, confidence: float = 0.95) -> float:
    """What ``runs`` evaluation runs per neighbour would certify, in expectation, for the
    ideal mechanism of the claimed privacy: the Gaussian mechanism calibrated exactly to
    (ε, δ) (analytic calibration, sensitivity 1) when δ > 0, the Laplace mechanism with scale
    1/ε when δ = 0, each with the best threshold known in advance (closed form: the counts are
    taken at their expectations). An audit cannot certify more than this for a mechanism that
    meets its claim with equality; it is the yardstick for ``epsilon_lower``.
    """
    if delta > 0:
        from privpca.mechanisms.gaussian import analytic_gaussian_sigma

        sigma = analytic_gaussian_sigma(epsilon, delta, 1.0)
        ts = np.linspace(0.5 - 12 * sigma, 0.5 + 12 * sigma, 4001)
        p0 = norm.sf(ts, loc=1.0, scale=sigma)
        p1 = norm.sf(ts, loc=0.0, scale=sigma)
    else:
        b = 1.0 / epsilon
        ts = np.linspace(-40 * b, 40 * b, 4001)
        p0 = laplace.sf(ts, loc=1.0, scale=b)
        p1 = laplace.sf(ts, loc=0.0, scale=b)
    k0 = np.round(p0 * runs)
    k1 = np.round(p1 * runs)
    eps = epsilon_bound(k0, runs, k1, runs, delta, confidence)
    return float(eps.max()) if math.isfinite(float(eps.max())) else 0.0
