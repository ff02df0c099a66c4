"""Private centring and norm bounds in the local model: client randomisers, server aggregators.

Nobody is trusted in the local model, so the mean and the norm bound that centre and clip the
covariance reports (:mod:`privpca.local_protocol.local_covariance`) must come from local
randomisers too. The users are split, by a public random permutation, into disjoint groups;
**each user sends exactly one report, at the full (ε, δ)**, so the groups compose in parallel
and every user's guarantee is (ε, δ)-LDP:

1. ``norm`` users each report the **bin of their norm** on the log grid ``t_j = 2^(j/2)``
   (:data:`THRESHOLDS`; bin b holds ``t_(b−1) < ‖x‖ ≤ t_b``) through **optimal unary
   encoding** (Wang, Blocki, Li & Jha, USENIX Security 2017): the one-hot vector of the bin,
   each 1-bit kept with probability 1/2, each 0-bit set with probability ``q = 1/(1 + e^ε)``
   (:class:`~privpca.mechanisms.randomised_response.RandomisedResponse`, which owns ``q``
   and draws the bits) — pure ε-LDP, and every user informs every bin (a frequency oracle,
   where one threshold question per user would leave each of the 121 thresholds a 121st of
   the users). The server de-biases each bin's share, keeps the bins whose count an empty
   bin reaches with probability below :data:`EMPTY_BIN_LEVEL`/(bins) (an exact binomial
   test), and reads R off the kept bins: the first threshold above which at most
   1 − :data:`LOCAL_QUANTILE` of the kept mass lies (:meth:`LocalBinAggregator.quantile`).
   With probability ≥ 1 − :data:`EMPTY_BIN_LEVEL` no empty bin is kept, so R is at most one
   grid step above the largest norm: noise cannot push it up by orders of magnitude.
2. ``mean`` users send ``clip_R(x) + N(0, σ²I)``; replacing a record moves the report by at most
   2R: **Δ = 2R**, σ the analytic Gaussian calibration. The server averages and projects the
   average onto the ball of radius R (where every clipped record, hence their mean, lies:
   post-processing that can only move it closer): μ̂₁.
   A second round refines it: ``residual`` users answer the threshold question about
   ``‖x − μ̂₁‖`` (on the window R/1024 … 2R of :func:`window_thresholds`): R₂; ``mean_refine``
   users send ``clip_R₂(x − μ̂₁)`` + noise (Δ = 2R₂), averaged and projected onto the ball of
   radius R₂: d̂. The first round's noise scales with ‖μ‖ (R ≈ the raw norms), the second's
   with the spread; ``μ̂₁`` and ``μ̂₁ + d̂`` are two independent estimates of the mean, combined
   by their inverse noise variances (:func:`combine_rounds`): μ̂ = μ̂₁ + w·d̂.
3. ``bound`` users report the bin of ``‖x − μ̂‖`` the same way: D, read at
   :data:`BOUND_QUANTILE` (on the window below
   ``2(R₂ + ‖μ̂ − μ̂₁‖)`` with private centring, else the full grid).
4. ``covariance`` users (the rest) send the packed ``clip_D(x − μ̂) clip_D(x − μ̂)ᵀ`` plus
   Gaussian noise, Δ = √2·D² (:class:`~privpca.local_protocol.LocalCovarianceRandomiser` with
   ``centre=μ̂``).

R, μ̂ and D are public when a later group reports (they are the server's released estimates),
so the later reports' sensitivities are fixed before those users randomise.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.stats import binom

from privpca._validation import check_data, check_epsilon, check_in_range, check_party_delta
from privpca.mechanisms.gaussian import analytic_gaussian_sigma
from privpca.mechanisms.noise import gaussian_release
from privpca.mechanisms.randomised_response import RandomisedResponse
from privpca.mechanisms.randomness import check_noise_rng

__all__ = [
    "BOUND_QUANTILE",
    "EMPTY_BIN_LEVEL",
    "GROUP_FRACTIONS",
    "LOCAL_GROUPS",
    "LOCAL_QUANTILE",
    "THRESHOLDS",
    "LocalBinAggregator",
    "LocalBinRandomiser",
    "LocalMeanAggregator",
    "LocalMeanRandomiser",
    "LocalNormAggregator",
    "LocalNormRandomiser",
    "combine_rounds",
    "isotonic_increasing",
    "norm_bins",
    "project_to_ball",
    "window_thresholds",
]

#: Public thresholds of the norm questions: 2^(j/2), j = −40..80 (10⁻⁶ to 10¹²).
THRESHOLDS: NDArray[np.float64] = 2.0 ** (np.arange(-40, 81) / 2.0)
#: The quantile read off the kept bins (lower than the central 0.99: the oracle cannot resolve
#: a 1 % tail at the groups' sizes).
LOCAL_QUANTILE = 0.95
#: The quantile of ``‖x − μ̂‖`` that bounds the covariance reports. Lower than the means' because
#: every report's noise is calibrated to D² while a row's own signal is at most its norm²:
#: clipping the top quarter of rows to D keeps their directions (for elliptical data the
#: clipped covariance has the same eigenvectors) and shrinks the noise by the squared ratio of
#: the 95 % to the 75 % quantile (measured in benchmarks/local_defaults.py: 1.24× the papers'
#: error against 1.53× with 0.95, n = 2·10⁵, ε = 0.5).
BOUND_QUANTILE = 0.75
#: Probability that any empty bin is kept (Bonferroni over the bins, exact binomial tails).
EMPTY_BIN_LEVEL = 1e-3
#: The user groups in the order they answer (the covariance group gets the remaining users).
LOCAL_GROUPS = ("norm", "mean", "residual", "mean_refine", "bound", "covariance")

#: Share of the users in each group, when active (the covariance group gets the rest).
GROUP_FRACTIONS: dict[str, float] = {
    "norm": 0.10, "mean": 0.10, "residual": 0.05, "mean_refine": 0.10, "bound": 0.05,
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
    """One randomised answer to "is my norm ≤ t_j?" (pure ε-LDP), for clients that can send
    one bit only. Each threshold then hears a share of the users only: the estimator uses
    :class:`LocalBinRandomiser` instead.

    Parameters
    ----------
    epsilon : float
        ε of the answer; the bit is flipped with probability ``1/(1 + e^ε)``
        (:class:`~privpca.mechanisms.randomised_response.RandomisedResponse`, binary form).
    centre : array of shape (n_features,) or None
        A public centre: the question is about ``‖x − centre‖``.
    """

    epsilon: float
    centre: NDArray[np.float64] | None = None

    def __post_init__(self) -> None:
        check_epsilon(self.epsilon, owner="LocalNormRandomiser")

    @property
    def mechanism(self) -> RandomisedResponse:
        """The randomised response that flips the answer (its calibration and privacy)."""
        return RandomisedResponse(self.epsilon)

    @property
    def flip_probability(self) -> float:
        return self.mechanism.flip_probability

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
        return self.mechanism.flip(below, rng).astype(np.int8)


def window_thresholds(bound: float) -> NDArray[np.float64]:
    """Thresholds for ‖x − μ̂‖ once R is public: ``R·2^(j/2)``, j = −20..2 (R/1024 to 2R).

    ‖x − μ̂‖ ≤ ‖x‖ + ‖μ̂‖ stays below about 2R for most users, so 23 thresholds suffice and
    each gets five times the answers of the full grid's.
    """
    return float(bound) * 2.0 ** (np.arange(-20, 3) / 2.0)


class LocalNormAggregator:
    """Server side of :class:`LocalNormRandomiser`: de-biased, monotone CDF; its quantile.

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
        check_party_delta(self.delta, owner="LocalMeanRandomiser")
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


def norm_bins(
    X: ArrayLike, thresholds: ArrayLike, centre: NDArray[np.float64] | None = None
) -> NDArray[np.intp]:
    """Each row's bin on the grid: ``b = #{j : t_j < ‖x − centre‖}`` (0 … len(thresholds))."""
    Xv = np.asarray(X, dtype=np.float64)
    rows = Xv if centre is None else Xv - centre
    sq = np.einsum("ij,ij->i", rows, rows)
    t = np.asarray(thresholds, dtype=np.float64)
    return np.asarray(np.searchsorted(t * t, sq, side="left"), dtype=np.intp)


@dataclass(frozen=True)
class LocalBinRandomiser:
    """Client side of step 1/3: the bin of ``‖x − centre‖`` by optimal unary encoding (pure ε).

    Each user sends ``len(thresholds) + 1`` bits: the one-hot of their bin, each 1 kept with
    probability 1/2 and each 0 set to 1 with probability ``q = 1/(1 + e^ε)``. Replacing the
    record changes two bits of the one-hot; a report's probability changes by at most
    ``(1/2)(1 − q) / ((1/2) q) = e^ε`` (Wang, Blocki, Li & Jha 2017, OUE). The bits are
    randomised by :class:`~privpca.mechanisms.randomised_response.RandomisedResponse`
    (its unary form), which owns ``q`` and the draws.

    Parameters
    ----------
    epsilon : float
        ε of the report.
    centre : array of shape (n_features,) or None
        A public centre: the bin is that of ``‖x − centre‖``.
    """

    epsilon: float
    centre: NDArray[np.float64] | None = None

    def __post_init__(self) -> None:
        check_epsilon(self.epsilon, owner="LocalBinRandomiser")

    @property
    def mechanism(self) -> RandomisedResponse:
        """The randomised response that encodes the bin (its calibration and privacy)."""
        return RandomisedResponse(self.epsilon)

    @property
    def keep_probability(self) -> float:
        return self.mechanism.keep_probability

    @property
    def set_probability(self) -> float:
        """``q``: the probability that a 0-bit is reported as 1."""
        return self.mechanism.set_probability

    def report_batch(
        self, X: ArrayLike, thresholds: ArrayLike, rng: np.random.Generator
    ) -> NDArray[np.int8]:
        """Each user's randomised one-hot, shape (m, len(thresholds) + 1) (``rng``: secure
        mode accepts only None or an OS-keyed SecureGenerator)."""
        rng = check_noise_rng(rng, owner="LocalBinRandomiser")
        Xv = check_data(X)
        t = np.asarray(thresholds, dtype=np.float64)
        bins = norm_bins(Xv, t, self.centre)
        onehot = np.zeros((Xv.shape[0], len(t) + 1), dtype=bool)
        onehot[np.arange(Xv.shape[0]), bins] = True
        return self.mechanism.encode_unary(onehot, rng).astype(np.int8)

    def simulate_counts(
        self, bin_counts: ArrayLike, rng: np.random.Generator
    ) -> NDArray[np.float64]:
        """The 1-bits per bin of ``m = Σ bin_counts`` users' reports, drawn exactly.

        Bin b's count is ``Binomial(n_b, 1/2) + Binomial(m − n_b, q)``: the distribution of
        summing :meth:`report_batch` over the users, at the cost of two draws per bin (the
        simulation of many users inside one fit).
        """
        rng = check_noise_rng(rng, owner="LocalBinRandomiser")
        return np.asarray(self.mechanism.unary_counts(bin_counts, rng), dtype=np.float64)


class LocalBinAggregator:
    """Server side of step 1/3: de-biased bin shares, the bins an empty one cannot explain, and
    a quantile of what they hold.

    Parameters
    ----------
    randomiser : LocalBinRandomiser
    thresholds : array, default :data:`THRESHOLDS`
        The public grid; there is one more bin than thresholds.
    level : float, default :data:`EMPTY_BIN_LEVEL`
        Probability that some empty bin is kept.
    """

    def __init__(self, randomiser: LocalBinRandomiser, thresholds: ArrayLike | None = None,
                 level: float = EMPTY_BIN_LEVEL) -> None:
        self.randomiser = randomiser
        self.thresholds = np.asarray(THRESHOLDS if thresholds is None else thresholds,
                                     dtype=np.float64)
        self.level = check_in_range(level, "level", low=0.0, high=1.0)
        self._ones = np.zeros(len(self.thresholds) + 1)
        self.n_reports_ = 0

    def add(self, reports: ArrayLike) -> LocalBinAggregator:
        """Add reports of :meth:`LocalBinRandomiser.report_batch` (0/1 rows)."""
        bits = np.asarray(reports)
        if bits.ndim != 2 or bits.shape[1] != self._ones.shape[0] or np.any(
                (bits != 0) & (bits != 1)):
            raise ValueError(f"Bin reports must be 0/1 rows of length {self._ones.shape[0]}.")
        return self.add_counts(bits.sum(axis=0), bits.shape[0])

    def add_counts(self, ones: ArrayLike, n_reports: int) -> LocalBinAggregator:
        """Add the 1-bits per bin of ``n_reports`` reports."""
        o = np.asarray(ones, dtype=np.float64)
        if o.shape != self._ones.shape or np.any((o < 0) | (o > n_reports)):
            raise ValueError(f"Per-bin sums must have shape {self._ones.shape} with "
                             "0 ≤ ones ≤ n_reports.")
        self._ones += o
        self.n_reports_ += int(n_reports)
        return self

    def shares(self) -> NDArray[np.float64]:
        """Unbiased estimates of each bin's share of the users: ``(ȳ_b − q)/(1/2 − q)``."""
        r = self.randomiser
        q = r.set_probability
        m = max(self.n_reports_, 1)
        return (self._ones / m - q) / (r.keep_probability - q)

    def _levels(self) -> list[int]:
        """Group sizes of the readout's resolutions: 1, 2, 4, 8 adjacent bins (a factor 16 in
        norm at most on the default grid: a wider group places the users no better than a
        guess)."""
        bins = self._ones.shape[0]
        return [w for w in (1, 2, 4, 8) if w == 1 or w < bins]

    def kept(self, width: int = 1) -> NDArray[np.bool_]:
        """Groups of ``width`` adjacent bins whose count an empty group exceeds with
        probability at most ``level`` over the number of groups tested at every resolution.

        An empty group's 1-bits are exactly ``Binomial(width·m, q)`` (independent bits), so
        with probability ≥ 1 − level no empty group is kept at any resolution.
        """
        m = self.n_reports_
        if m == 0:
            raise ValueError("No bin reports have been aggregated yet.")
        bins = self._ones.shape[0]
        tests = sum(-(-bins // w) for w in self._levels())
        ones = np.add.reduceat(self._ones, np.arange(0, bins, width))
        sizes = np.diff(np.append(np.arange(0, bins, width), bins))
        cut = binom.isf(self.level / tests, sizes * m, self.randomiser.set_probability)
        return np.asarray(ones > cut)

    def quantile(self, q: float = LOCAL_QUANTILE) -> float:
        """The smallest norm above which at most ``1 − q`` of the kept mass lies.

        Read at the finest resolution (groups of 1, 2, 4, 8 adjacent bins) at which some
        group is kept: few users see only coarse groups, whose upper edges are then the
        candidates. Within the group where the tail crosses ``1 − q``, the norm is
        interpolated as if its mass were spread evenly in log-norm (never above the group's
        upper threshold). With none kept at any resolution, the upper threshold of the
        group that stands furthest above an empty one (:meth:`_most_significant`). The last
        bin (above every threshold) reads as the largest threshold.
        """
        check_in_range(q, "quantile", low=0.0, high=1.0, high_closed=True)
        share = self.shares()
        t = self.thresholds
        bins = share.shape[0]
        for width in self._levels():
            keep = self.kept(width)
            if not keep.any():
                continue
            starts = np.arange(0, bins, width)
            mass = np.where(keep, np.add.reduceat(share, starts), 0.0)
            edges = np.minimum(starts + width - 1, len(t) - 1)  # each group's upper threshold
            above = mass.sum() - np.cumsum(mass)
            target = (1.0 - q) * mass.sum()
            g = int(np.flatnonzero(above <= target * (1.0 + 1e-12))[0])
            upper = float(t[edges[g]])
            if starts[g] == 0 or mass[g] <= 0.0 or starts[g] > len(t) - 1:
                return upper
            # Inside the crossing group, its mass spread evenly in log-norm: the point where
            # the tail reaches the target (post-processing of the released shares).
            lower = float(t[starts[g] - 1])
            below = float(np.clip((above[g] + mass[g] - target) / mass[g], 0.0, 1.0))
            return lower * (upper / lower) ** below
        return self._most_significant()

    def _most_significant(self) -> float:
        """The upper threshold of the run of 1, 2, 4 or 8 adjacent bins (any start) whose
        count stands furthest above an empty run's, in standard deviations: the best guess of
        where the users are when no group passes the test."""
        m, q = self.n_reports_, self.randomiser.set_probability
        t = self.thresholds
        best, edge = -math.inf, len(t) - 1
        for width in self._levels():
            runs = np.convolve(self._ones, np.ones(width), mode="valid")
            z = (runs - width * m * q) / math.sqrt(width * m * q * (1 - q))
            g = int(np.argmax(z))
            if z[g] > best:
                best, edge = float(z[g]), int(min(g + width - 1, len(t) - 1))
        return float(t[edge])


def project_to_ball(
    vector: ArrayLike, radius: float
) -> NDArray[np.float64]:
    """``vector`` scaled onto the ball of ``radius`` around 0 if it lies outside.

    The mean of records clipped to norm R lies in that ball, so projecting a noisy estimate of
    it onto the (convex) ball can only bring it closer: post-processing.
    """
    v = np.asarray(vector, dtype=np.float64)
    norm = float(np.linalg.norm(v))
    return v * (radius / norm) if norm > radius else v


def combine_rounds(
    first: NDArray[np.float64], refinement: NDArray[np.float64], first_sd: float,
    refinement_sd: float,
) -> tuple[NDArray[np.float64], float]:
    """The inverse-variance combination of two independent estimates of the mean.

    ``first`` (μ̂₁, noise std ``first_sd`` per coordinate) and ``first + refinement``
    (noise std ``refinement_sd``: the second round's own noise, independent of the first's)
    both estimate the mean; ``μ̂₁ + w·d̂`` with ``w = s₁²/(s₁² + s₂²)`` has the smallest
    variance among their weighted averages, ``s₁²s₂²/(s₁² + s₂²)``. Where the first round's
    noise is large (data far from the origin) ``w → 1``; on centred data the two halve it.
    """
    v1, v2 = first_sd ** 2, refinement_sd ** 2
    w = v1 / (v1 + v2) if v1 + v2 > 0 else 1.0
    return first + w * refinement, math.sqrt(v1 * v2 / (v1 + v2)) if v1 + v2 > 0 else 0.0
