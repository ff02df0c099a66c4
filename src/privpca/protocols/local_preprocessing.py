"""Private centring and norm bounds in the local model: client randomisers, server aggregators.

Nobody is trusted in the local model, so the mean and the norm bound that centre and clip the
covariance reports (:mod:`privpca.protocols.local_covariance`) must come from local
randomisers too. The users are split, by a public random permutation, into disjoint groups;
**each user sends exactly one report, at the full (ε, δ)**, so the groups compose in parallel
and every user's guarantee is (ε, δ)-LDP:

1. ``norm`` users answer one question "is ‖x‖ ≤ t_j?" for a publicly assigned threshold of the
   log grid ``t_j = 2^(j/2)`` (:data:`THRESHOLDS`), by **binary randomised response**: the true
   bit is flipped with probability ``q = 1/(1 + e^ε)`` — pure ε-LDP (Warner 1965). The server
   de-biases each threshold's share ``(ȳ_j − q)/(1 − 2q)`` (unbiased), makes the estimates a
   CDF by isotonic regression (pool-adjacent-violators, weighted by the answers per
   threshold), and takes the smallest ``t_j`` whose CDF reaches :data:`LOCAL_QUANTILE`: R.
2. ``mean`` users send ``clip_R(x) + N(0, σ²I)``; replacing a record moves the report by at most
   2R: **Δ = 2R**, σ the analytic Gaussian calibration. The server averages: μ̂.
   A second round refines it: ``residual`` users answer the threshold question about
   ``‖x − μ̂₁‖`` (on the window R/1024 … 2R of :func:`window_thresholds`): R₂; ``mean_refine``
   users send ``clip_R₂(x − μ̂₁)`` + noise (Δ = 2R₂): μ̂ = μ̂₁ + their average. The first
   round's noise scales with ‖μ‖ (R ≈ the raw norms), the second's with the spread.
3. ``bound`` users answer the threshold question about ``‖x − μ̂‖``: D (on the window below
   ``2(R₂ + ‖μ̂ − μ̂₁‖)`` with private centring, else the full grid).
4. ``covariance`` users (the rest) send the packed ``clip_D(x − μ̂) clip_D(x − μ̂)ᵀ`` plus
   Gaussian noise, Δ = √2·D² (:class:`~privpca.protocols.LocalCovarianceRandomiser` with
   ``centre=μ̂``).

R, μ̂ and D are public when a later group reports (they are the server's released estimates),
so the later reports' sensitivities are fixed before those users randomise.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from privpca._validation import (
    check_data,
    check_delta,
    check_epsilon,
    check_in_range,
    check_noise_rng,
)
from privpca.mechanisms.gaussian import analytic_gaussian_sigma
from privpca.mechanisms.noise import gaussian_release

__all__ = [
    "GROUP_FRACTIONS",
    "LOCAL_GROUPS",
    "LOCAL_QUANTILE",
    "THRESHOLDS",
    "LocalMeanAggregator",
    "LocalMeanRandomiser",
    "LocalNormAggregator",
    "LocalNormRandomiser",
    "isotonic_increasing",
    "window_thresholds",
]

#: Public thresholds of the norm questions: 2^(j/2), j = −40..80 (10⁻⁶ to 10¹²).
THRESHOLDS: NDArray[np.float64] = 2.0 ** (np.arange(-40, 81) / 2.0)
#: The quantile read off the de-biased CDF (lower than the central 0.99: the randomised
#: response's CDF is too noisy near 1 for the groups' sizes).
LOCAL_QUANTILE = 0.95
#: Share of the users in each group, when active (the covariance group gets the rest).
#: The user groups in the order they answer (the covariance group gets the remaining users).
LOCAL_GROUPS = ("norm", "mean", "residual", "mean_refine", "bound", "covariance")

GROUP_FRACTIONS: dict[str, float] = {
    "norm": 0.05, "mean": 0.10, "residual": 0.05, "mean_refine": 0.10, "bound": 0.05,
}


def isotonic_increasing(values: ArrayLike, weights: ArrayLike) -> NDArray[np.float64]:
    """Weighted least-squares non-decreasing fit (pool adjacent violators)."""
    y = np.asarray(values, dtype=np.float64)
    w = np.asarray(weights, dtype=np.float64)
    blocks: list[list[float]] = []  # [mean, weight, length]
    for yi, wi in zip(y, w, strict=True):
        blocks.append([yi, wi, 1.0])
        while len(blocks) > 1 and blocks[-2][0] > blocks[-1][0]:
            m2, w2, n2 = blocks.pop()
            m1, w1, n1 = blocks.pop()
            wt = w1 + w2
            blocks.append([(m1 * w1 + m2 * w2) / wt if wt > 0 else (m1 + m2) / 2, wt, n1 + n2])
    return np.concatenate([np.full(int(n), m) for m, _, n in blocks])


@dataclass(frozen=True)
class LocalNormRandomiser:
    """Client side of step 1/3: one randomised answer to "is my norm ≤ t_j?" (pure ε-LDP).

    Parameters
    ----------
    epsilon : float
        ε of the answer; the bit is flipped with probability ``1/(1 + e^ε)``.
    centre : array of shape (n_features,) or None
        A public centre: the question is about ``‖x − centre‖``.
    """

    epsilon: float
    centre: NDArray[np.float64] | None = None

    def __post_init__(self) -> None:
        check_epsilon(self.epsilon, owner="LocalNormRandomiser")

    @property
    def flip_probability(self) -> float:
        return 1.0 / (1.0 + math.exp(min(self.epsilon, 700.0)))

    def report_batch(
        self, X: ArrayLike, thresholds: ArrayLike, rng: np.random.Generator
    ) -> NDArray[np.int8]:
        """Each user's flipped bit ``1[‖x − c‖ ≤ t]`` for its assigned threshold ``t``
        (``rng``: secure mode accepts only None or an OS-keyed SecureGenerator)."""
        rng = check_noise_rng(rng, owner="LocalNormRandomiser")
        Xv = check_data(X)
        t = np.asarray(thresholds, dtype=np.float64)
        if t.shape != (Xv.shape[0],):
            raise ValueError("thresholds must give one threshold per user.")
        rows = Xv if self.centre is None else Xv - self.centre
        below = np.einsum("ij,ij->i", rows, rows) <= t * t
        flip = rng.random(len(t)) < self.flip_probability
        return (below ^ flip).astype(np.int8)


def window_thresholds(bound: float) -> NDArray[np.float64]:
    """Thresholds for ‖x − μ̂‖ once R is public: ``R·2^(j/2)``, j = −20..2 (R/1024 to 2R).

    ‖x − μ̂‖ ≤ ‖x‖ + ‖μ̂‖ stays below about 2R for most users, so 23 thresholds suffice and
    each gets five times the answers of the full grid's.
    """
    return float(bound) * 2.0 ** (np.arange(-20, 3) / 2.0)


class LocalNormAggregator:
    """Server side of step 1/3: de-biased, monotone CDF of the norms; its quantile.

    ``thresholds`` are the public questions (default :data:`THRESHOLDS`).
    """

    def __init__(
        self, randomiser: LocalNormRandomiser, thresholds: ArrayLike | None = None
    ) -> None:
        self.randomiser = randomiser
        self.thresholds = np.asarray(THRESHOLDS if thresholds is None else thresholds,
                                     dtype=np.float64)
        self._ones = np.zeros(len(self.thresholds))
        self._counts = np.zeros(len(self.thresholds))

    def add(self, threshold_index: ArrayLike, bits: ArrayLike) -> LocalNormAggregator:
        """Add answers: the index into ``thresholds`` each user answered, and its bit."""
        j = np.asarray(threshold_index, dtype=np.intp)
        b = np.asarray(bits, dtype=np.float64)
        if j.shape != b.shape or np.any((b != 0) & (b != 1)):
            raise ValueError("Each answer is a threshold index and a bit (0 or 1).")
        if j.size and (j.min() < 0 or j.max() >= len(self.thresholds)):
            raise ValueError(f"Threshold indices must lie in [0, {len(self.thresholds)}).")
        np.add.at(self._ones, j, b)
        np.add.at(self._counts, j, 1.0)
        return self

    def add_counts(self, ones: ArrayLike, counts: ArrayLike) -> LocalNormAggregator:
        """Add answers already summed per threshold: how many 1-bits and how many answers."""
        o = np.asarray(ones, dtype=np.float64)
        c = np.asarray(counts, dtype=np.float64)
        if o.shape != self._ones.shape or c.shape != o.shape or np.any((o < 0) | (o > c)):
            raise ValueError(f"Per-threshold sums must have shape {self._ones.shape} with "
                             "0 ≤ ones ≤ counts.")
        self._ones += o
        self._counts += c
        return self

    def cdf(self) -> NDArray[np.float64]:
        """The de-biased CDF at every threshold (isotonic, clipped to [0, 1])."""
        q = self.randomiser.flip_probability
        with np.errstate(invalid="ignore", divide="ignore"):
            share = np.where(self._counts > 0, self._ones / self._counts, 0.5)
        unbiased = (share - q) / (1.0 - 2.0 * q)
        return np.clip(isotonic_increasing(unbiased, self._counts), 0.0, 1.0)

    def quantile(self, q: float = LOCAL_QUANTILE) -> float:
        """Smallest threshold whose CDF reaches ``q`` (the largest when none does)."""
        check_in_range(q, "quantile", low=0.0, high=1.0, high_closed=True)
        cdf = self.cdf()
        reached = np.flatnonzero(cdf >= q)
        return float(self.thresholds[reached[0]] if reached.size else self.thresholds[-1])


def assign_thresholds(
    n_users: int, rng: np.random.Generator, n_thresholds: int = len(THRESHOLDS)
) -> NDArray[np.intp]:
    """Public, data-independent assignment of a threshold index to each user (balanced)."""
    j = np.arange(n_users) % int(n_thresholds)
    return np.asarray(rng.permutation(j), dtype=np.intp)


@dataclass(frozen=True)
class LocalMeanRandomiser:
    """Client side of step 2: ``clip_R(x) + N(0, σ²I)``, Δ = 2R (replace one user's record)."""

    epsilon: float
    delta: float
    bound: float

    def __post_init__(self) -> None:
        check_epsilon(self.epsilon, owner="LocalMeanRandomiser")
        check_delta(self.delta, owner="LocalMeanRandomiser")
        check_in_range(self.bound, "bound", low=0.0, owner="LocalMeanRandomiser")

    @property
    def sensitivity(self) -> float:
        return 2.0 * self.bound

    @property
    def noise_scale(self) -> float:
        return analytic_gaussian_sigma(self.epsilon, self.delta, self.sensitivity)

    def report_batch(self, X: ArrayLike, rng: np.random.Generator) -> NDArray[np.float64]:
        """Each user's clipped record plus its own Gaussian noise (``rng``: secure mode
        accepts only None or an OS-keyed SecureGenerator)."""
        rng = check_noise_rng(rng, owner="LocalMeanRandomiser")
        Xv = check_data(X)
        norms = np.sqrt(np.einsum("ij,ij->i", Xv, Xv))
        with np.errstate(divide="ignore"):
            factor = np.minimum(1.0, self.bound / norms)
        reports = Xv * factor[:, None]
        # Each row is one user's release of p coordinates.
        reports = gaussian_release(reports, self.noise_scale, rng,
                                   sensitivity=self.sensitivity, coordinates=reports.shape[1])
        return reports

    def add_report_noise(
        self, clipped_sum: NDArray[np.float64], n_reports: int, rng: np.random.Generator
    ) -> NDArray[np.float64]:
        """The sum of ``n_reports`` users' reports, drawn exactly from their clipped sum.

        ``Σᵢ (clip_R(xᵢ − c) + zᵢ)`` with ``Σᵢ zᵢ ~ N(0, mσ²I)``: the distribution of summing
        :meth:`report_batch`, at the cost of ``p`` normal draws instead of ``m·p`` (the
        simulation of many users inside one fit; the clipped sum is a block reduction).
        """
        rng = check_noise_rng(rng, owner="LocalMeanRandomiser")
        total = np.array(clipped_sum, dtype=np.float64)
        total = gaussian_release(total, math.sqrt(n_reports) * self.noise_scale, rng,
                                 sensitivity=self.sensitivity)
        return total


class LocalMeanAggregator:
    """Server side of step 2: the average of the mean reports (unbiased for the clipped mean)."""

    def __init__(self, randomiser: LocalMeanRandomiser, n_features: int) -> None:
        self.randomiser = randomiser
        self._sum = np.zeros(int(n_features))
        self.n_reports_ = 0

    def add(self, reports: ArrayLike) -> LocalMeanAggregator:
        batch = np.asarray(reports, dtype=np.float64)
        if batch.ndim != 2 or batch.shape[1] != self._sum.shape[0]:
            raise ValueError(f"Mean reports must have shape (m, {self._sum.shape[0]}).")
        if not np.all(np.isfinite(batch)):
            raise ValueError("A report contains NaN or infinity; refusing to aggregate it.")
        self._sum += batch.sum(axis=0)
        self.n_reports_ += batch.shape[0]
        return self

    def add_sum(self, total: ArrayLike, n_reports: int) -> LocalMeanAggregator:
        """Add the sum of ``n_reports`` reports (``LocalMeanRandomiser.add_report_noise``)."""
        vec = np.asarray(total, dtype=np.float64)
        if vec.shape != self._sum.shape:
            raise ValueError(f"A sum of mean reports must have shape {self._sum.shape}.")
        if not np.all(np.isfinite(vec)):
            raise ValueError("A report contains NaN or infinity; refusing to aggregate it.")
        self._sum += vec
        self.n_reports_ += int(n_reports)
        return self

    def mean(self) -> NDArray[np.float64]:
        if self.n_reports_ == 0:
            raise ValueError("No mean reports have been aggregated yet.")
        return self._sum / self.n_reports_

    @property
    def noise_scale(self) -> float:
        """Std of the noise on each coordinate of :meth:`mean`."""
        return self.randomiser.noise_scale / math.sqrt(max(self.n_reports_, 1))
