"""Central-model preprocessing: private norm bounds, private mean, private scales, clipping.

Each function is one mechanism of the release pipeline; :mod:`privpca.pipeline.release` runs
them in order with the budget of a :class:`~privpca.pipeline.budget.BudgetPlan`. All are
Gaussian mechanisms under **replace-one** neighbours (n public):

* **norm bound** (:class:`~privpca.mechanisms.quantile.PrivateQuantile`): noisy bisection of
  the row norms on a log grid, ten counts of sensitivity 1;
* **mean**: ``Σᵢ clip_R(xᵢ) + N(0, σ²I)``, divided by n; replacing a row moves the sum by
  ``x − y`` with ``‖x‖, ‖y‖ ≤ R``: **Δ = 2R**;
* **scale bounds**: one noisy bisection per feature of ``|x_j − μ̂_j|`` (L2 sensitivity
  ``√p`` on each round's counts);
* **scale**: with ``u_j = clip((x_j − μ̂_j)/b_j, ±1)`` and, for each of the L levels ``K``
  (:data:`SCALE_LEVELS`), ``w_jK = min(|x_j − μ̂_j|/(K b_j), 1)²``, the sums ``Σu_j`` and
  ``Σw_jK`` of every feature, with Gaussian noise; replacing a row moves them by at most 2
  and 1 per feature and level: **Δ = √((4 + L)p)**. Normalising by each feature's own bound
  makes the noise on a feature's mean and variance proportional to its own spread: with mixed
  units, one joint bound would drown the small features. Each feature's variance is read at
  the level where its second moment stops growing (post-processing), so a bound that the
  search placed in the bulk (a binary column, a heavy tail) does not crush it. This also
  refines the mean, feature by feature.

The bounds R and b are themselves private releases, so the later mechanisms' sensitivities
are functions of released values only (adaptive composition).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from privpca.mechanisms.noise import gaussian_release
from privpca.mechanisms.quantile import GRID_BASE, GRID_RANGE, PrivateQuantile, QuantileRelease
from privpca.mechanisms.randomness import check_noise_rng
from privpca.streaming import as_row_source, reductions
from privpca.streaming._numpy_kernels import ZERO_BIN
from privpca.streaming.reductions import BinCounts, BinnedSums, log_bin_counts

__all__ = [
    "SCALE_LEVELS",
    "SCALE_LEVEL_Z",
    "SCALE_LOOKAHEAD",
    "SCALE_MIN_GAIN",
    "BinnedSums",  # re-exported from privpca.streaming.reductions, where it is made
    "GridRangeError",
    "MeanRelease",
    "ScaleRelease",
    "check_quantile_records",
    "choose_levels",
    "combine_scales",
    "level_variance",
    "norm_bin_counts",
    "private_mean",
    "private_mean_from_sum",
    "private_norm_bound",
    "private_norm_bound_from_counts",
    "private_scale",
    "scale_sensitivity",
]


class BoundNotFoundError(ValueError):
    """Too few rows for a private norm quantile at this ε (decided from public n and ε,
    before anything is released).

    Attributes
    ----------
    rows, needed : int or None
        The rows given and the fewest the search needs.
    epsilon_needed : float or None
        The smallest ε at which the same settings would fit (None: unknown or none).
    holdout_fraction : float or None
        Set when ``rows`` are the held-out share of the table, not the table.
    """

    def __init__(self, message: str, *, rows: int | None = None, needed: int | None = None,
                 epsilon_needed: float | None = None,
                 holdout_fraction: float | None = None) -> None:
        super().__init__(message)
        self.rows, self.needed, self.epsilon_needed = rows, needed, epsilon_needed
        self.holdout_fraction = holdout_fraction


class GridRangeError(ValueError):
    """The table's norms lie beyond the private searches' grid (2^±128): its units, which a
    public rescaling fixes. A refusal of the input, as NaN is (a provider sends the server
    the fixed code ``input-refused``, nothing of the text)."""


def norm_bin_counts(norms: NDArray[np.float64], base: float) -> BinCounts:
    """Exact counts of ``norms`` in the log-grid bins of ratio ``base`` (non-empty bins,
    ascending): ``geometric_bin`` and its counts, in one compiled pass."""
    return log_bin_counts(norms, base)


def private_norm_bound(
    norms: NDArray[np.float64],
    multiplier: float,
    quantile: float | tuple[float, ...],
    rng: np.random.Generator,
    *,
    what: str = "row norms",
    hint: str = "Give data_norm as a public number, or use a larger epsilon.",
) -> tuple[NDArray[np.float64], QuantileRelease]:
    """Private quantiles of ``norms`` (:class:`~privpca.mechanisms.quantile.PrivateQuantile`).

    Raises
    ------
    BoundNotFoundError
        When there are too few rows for this multiplier (a public check, before anything
        is released); the message says how to proceed.
    """
    return private_norm_bound_from_counts(
        lambda base: norm_bin_counts(norms, base), len(norms), multiplier, quantile, rng,
        what=what, hint=hint)


def check_quantile_records(search: PrivateQuantile, *, what: str, hint: str) -> None:
    """Refuse a search whose count noise would swamp the median (public: n and σ)."""
    if search.n_records < search.min_records():
        raise BoundNotFoundError(
            f"{search.n_records} rows are too few for a private bound on the {what} at this "
            f"epsilon: its counts carry noise of std {search.noise:.0f} rows, and the bound "
            f"needs at least {search.min_records()} rows. Nothing was released. {hint}",
            rows=search.n_records, needed=search.min_records())


def private_norm_bound_from_counts(
    counter: Callable[[float], BinCounts],
    n_records: int,
    multiplier: float,
    quantile: float | tuple[float, ...],
    rng: np.random.Generator,
    *,
    what: str = "row norms",
    hint: str = "Give data_norm as a public number, or use a larger epsilon.",
) -> tuple[NDArray[np.float64], QuantileRelease]:
    """:func:`private_norm_bound` from exact bin counts: ``counter(base)`` counts the norms on
    the grid of ratio ``base`` (e.g. summed over the blocks of a streamed table). Returns the
    quantiles (one per requested q) and the release."""
    search = PrivateQuantile.calibrate(multiplier, quantiles=quantile, n_records=n_records)
    check_quantile_records(search, what=what, hint=hint)
    index, counts = counter(GRID_BASE)
    low, high = GRID_RANGE
    nonzero = index > ZERO_BIN
    if nonzero.any() and np.all(index[nonzero] < math.log(low) / math.log(GRID_BASE) - 1):
        # Every non-zero row lies below the grid: refused before anything is released (the
        # exact counts decide it, as NaN is refused: a message to the data holder only).
        raise GridRangeError(
            f"The {what} are all below {low:.2g}, where the private search's grid ends: "
            "the table's units are too small for it. Rescale the columns by a public "
            "constant (other units) and fit again. This fit's (epsilon, delta) stays "
            "charged: it was booked before the table was read.")
    release = search.estimate_counts(np.zeros(len(index), dtype=np.intp), index, counts, rng)
    values = release.value[:, 0]
    if np.any(values >= high * (1 - 1e-9)):
        # Read off the released value (public): most norms lie above the grid, and a bound
        # at its end would clip every row.
        raise GridRangeError(
            f"The private quantile of the {what} came out at the top of its grid "
            f"({high:.2g}): the table's units put its rows beyond what the search covers. "
            "Rescale the columns by a public constant (other units) and fit again, or give "
            "data_norm as a public number. This fit's (epsilon, delta) stays charged: the "
            "search had released before the refusal.")
    return values, release


@dataclass(frozen=True)
class MeanRelease:
    """The private mean and how it was made."""

    mean: NDArray[np.float64]
    bound: float
    noise_scale: float  # std of the noise on the sum (per coordinate)
    sensitivity: float


def private_mean(
    X: NDArray[np.float64],
    norms: NDArray[np.float64],
    bound: float,
    multiplier: float,
    rng: np.random.Generator,
    *,
    centre: NDArray[np.float64] | None = None,
) -> MeanRelease:
    """``(Σ clip_R(xᵢ − c) + N(0, (2R·m)² I))/n`` with R = ``bound`` (Δ = 2R).

    ``norms`` are ``‖xᵢ − c‖`` for the public ``centre`` c (default 0); the clipped sum is
    ``Xᵀw − c·Σw`` (one pass over X, no shifted copy).
    """
    with np.errstate(divide="ignore"):
        weights = np.minimum(1.0, bound / norms)
    total = X.T @ weights  # one pass: Σ clip(x) without a clipped copy
    if centre is not None:
        total -= centre * weights.sum()
    return private_mean_from_sum(total, X.shape[0], bound, multiplier, rng)


def private_mean_from_sum(
    clipped_sum: NDArray[np.float64],
    n: int,
    bound: float,
    multiplier: float,
    rng: np.random.Generator,
) -> MeanRelease:
    """:func:`private_mean` from the exact ``Σ clip_R(xᵢ − c)`` (e.g. summed over blocks).

    In secure mode ``rng`` must be an OS-keyed SecureGenerator (``check_noise_rng``)."""
    rng = check_noise_rng(rng, owner="private_mean_from_sum")
    total = np.array(clipped_sum, dtype=np.float64)
    sensitivity = 2.0 * bound
    sigma = multiplier * sensitivity
    total = gaussian_release(total, sigma, rng, sensitivity=sensitivity)
    return MeanRelease(total / n, bound, sigma, sensitivity)


@dataclass(frozen=True)
class ScaleRelease:
    """Private per-feature means and standard deviations, and how they were made."""

    mean: NDArray[np.float64]
    scale: NDArray[np.float64]
    bounds: NDArray[np.float64]
    noise_scale: float  # std of the noise on each normalised sum
    sensitivity: float
    #: Per level and feature: the released second moments about the centre (in the
    #: feature's units, times n/(n − ddof)) and their noise's standard deviations; per
    #: feature, the square of the level-0 clipped mean's shift (:func:`combine_scales`).
    moments: NDArray[np.float64] | None = None
    moment_noise: NDArray[np.float64] | None = None
    shift_sq: NDArray[np.float64] | None = None


#: The multiples ``K_ℓ`` of each feature's searched bound ``b_j`` at which its clipped second
#: moment is released (:func:`private_scale`): a feature whose spread lies above its bound
#: (a binary column with few ones, a heavy tail, a bound the search's noise placed in the
#: bulk) is read at the level where its second moment stops growing.
SCALE_LEVELS: tuple[float, ...] = (1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0)
#: A higher level is taken when its second moment exceeds the current one's by this many
#: standard deviations of its own noise (chosen on the suite's tuning half).
SCALE_LEVEL_Z = 2.0
#: How many levels up :func:`choose_levels` looks from the current one.
SCALE_LOOKAHEAD = 2
#: A higher level is taken only when its second moment is at least this share above the
#: current one's: where the noise is small, a smaller gain (a light tail's clipping) costs
#: less than the level's noise (4 times the variance's, per doubling of the width).
SCALE_MIN_GAIN = 0.1


def scale_sensitivity(n_features: int, n_levels: int) -> float:
    """L2 sensitivity of :func:`private_scale`'s release under replace-one: per feature, the
    signed sum ``Σu_j`` (``u ∈ [−1, 1]``) moves by at most 2 and each of the ``n_levels``
    squared sums ``Σw_{jℓ}`` (``w ∈ [0, 1]``) by at most 1: ``√((4 + L)·p)``."""
    return math.sqrt((4.0 + n_levels) * n_features)


def choose_levels(moments: NDArray[np.float64], noise: NDArray[np.float64],
                  z: float) -> NDArray[np.intp]:
    """Per feature, the level whose second moment is used (post-processing).

    ``moments[ℓ, j]`` are the released second moments of feature j at level ℓ (in its units,
    non-decreasing in ℓ in expectation: the clipping only ever lowers them), ``noise[ℓ, j]``
    their noise's standard deviations. From level 0, the level moves up to the next one or
    the one after (:data:`SCALE_LOOKAHEAD`) when that level's moment exceeds the current
    one's by ``z`` of its own noise and by :data:`SCALE_MIN_GAIN` of the current moment: mass
    beyond the current width, seen above the noise. It stops at the first level where neither
    does. Two levels at most at a time, a false move (a noise excursion) costs one or two
    levels, not a jump to the noisiest.
    """
    n_levels, p = moments.shape
    chosen = np.zeros(p, dtype=np.intp)
    cols = np.arange(p)
    live = np.ones(p, dtype=bool)
    while live.any():
        moved = np.zeros(p, dtype=bool)
        for step in range(1, SCALE_LOOKAHEAD + 1):
            nxt = np.minimum(chosen + step, n_levels - 1)
            gain = moments[nxt, cols] - moments[chosen, cols]
            up = live & ~moved & (nxt > chosen) & (gain > z * noise[nxt, cols]) & (
                gain > SCALE_MIN_GAIN * moments[chosen, cols])
            chosen = np.where(up, nxt, chosen)
            moved |= up
        live = moved
    return chosen


def private_scale(
    source: Any,
    mean: NDArray[np.float64],
    bound_multiplier: float,
    multiplier: float,
    quantile: float,
    rng: np.random.Generator,
    *,
    ddof: int = 1,
) -> ScaleRelease:
    """Private mean and standard deviation of each feature, in that feature's own units.

    Per-feature bounds ``b_j`` are private ``quantile``-quantiles of ``|x_j − μ̂_j|`` (one
    noisy bisection per feature, all in the same rounds: L2 sensitivity ``√p`` per round,
    :class:`~privpca.mechanisms.quantile.PrivateQuantile`). Then one Gaussian release of,
    per feature, ``Σu_j`` with ``u_j = clip((x_j − μ̂_j)/b_j, −1, 1)`` and, for each level
    ``K_ℓ`` of :data:`SCALE_LEVELS`, ``Σw_{jℓ}`` with
    ``w_{jℓ} = min(|x_j − μ̂_j|/(K_ℓ b_j), 1)²``. Under replace-one neighbours (n public)
    a row moves each ``Σu_j`` by at most 2 and each ``Σw_{jℓ}`` by at most 1, so
    **Δ = √((4 + L)p)** (:func:`scale_sensitivity`), and the noise is ``multiplier·Δ`` on
    every sum. The bounds are themselves released, so Δ depends on public values only.

    Post-processing. The level-ℓ second moment is ``M_ℓ = (K_ℓ b_j)²·Σw_{jℓ}/n``, with noise
    ``(K_ℓ b_j)²σ/n``. The quantile search cannot see a minority of fewer than a few times
    its noise in rows (the ones of a rare binary column, a heavy tail), and clipping there
    crushes the variance, so the level is chosen per feature by :func:`choose_levels`:
    the moment still grows above the noise there. At level 0 the mean is refined,
    ``μ̂_j + b_j·Σu_j/n``, and the variance is ``M_0 − (b_j·Σu_j/n)²``; above it the clipped
    mean is biased by the mass beyond ``b_j``, so ``μ̂_j`` is kept and the variance is ``M_ℓ``
    (about ``μ̂_j``: over-stated by ``(μ_j − μ̂_j)²``, never crushed). Times ``n/(n − ddof)``;
    a variance below its own noise level gets that level (a floor).

    ``source`` is the table, an array or a :class:`~privpca.streaming.RowSource`: one pass for
    the histograms' counts, one for the sums at every level, each a block reduction.
    """

    levels, z = SCALE_LEVELS, SCALE_LEVEL_Z
    rows = as_row_source(source)
    n, p = rows.n_samples, rows.n_features
    search = PrivateQuantile.calibrate(bound_multiplier, quantiles=quantile, n_records=n,
                                       n_columns=p)
    col, index, counts = reductions.deviation_counts(rows, mean, GRID_BASE)
    bounds = search.estimate_counts(col, index, counts, rng).value[0]
    first, squares = reductions.normalised_moments(rows, mean, bounds, levels)
    sensitivity = scale_sensitivity(p, len(levels))
    sigma = multiplier * sensitivity
    # One release of (1 + L)p coordinates (Δ covers them all): the signed sums, then the
    # squared sums level by level.
    released = gaussian_release(np.concatenate([first, squares.ravel()]), sigma, rng,
                                sensitivity=sensitivity)
    first = released[:p]
    widths = np.asarray(levels)[:, None] * bounds[None, :]
    unbias = n / max(n - ddof, 1)
    moments = widths**2 * released[p:].reshape(len(levels), p) / n * unbias
    noise = widths**2 * sigma / n * unbias
    shift = first / n
    chosen, variance, floor = level_variance(moments, noise, (bounds * shift) ** 2 * unbias, z)
    # Above level 0 the clipped mean is biased by the mass beyond b_j: μ̂_j is kept.
    refined = mean + np.where(chosen == 0, bounds * shift, 0.0)
    scale = np.sqrt(np.maximum(variance, floor))
    scale[~(scale > 0)] = 1.0
    return ScaleRelease(refined, scale, bounds, sigma, sensitivity, moments, noise,
                        (bounds * shift) ** 2 * unbias)


def level_variance(
    moments: NDArray[np.float64], noise: NDArray[np.float64], shift_sq: NDArray[np.float64],
    z: float,
) -> tuple[NDArray[np.intp], NDArray[np.float64], NDArray[np.float64]]:
    """Per feature: the level chosen (:func:`choose_levels`), the variance there (the second
    moment, less the level-0 clipped mean's square at level 0) and its noise (the floor)."""
    chosen = choose_levels(moments, noise, z)
    cols = np.arange(moments.shape[1])
    variance = moments[chosen, cols] - np.where(chosen == 0, shift_sq, 0.0)
    return chosen, variance, noise[chosen, cols]


def combine_scales(releases: list[ScaleRelease]) -> NDArray[np.float64]:
    """One standard deviation per feature from several :func:`private_scale` releases of the
    same table (post-processing). The rounds' second moments at each level (in each round's
    own bounds, which differ by the searches' noise) are averaged with inverse-noise weights,
    and the level is chosen on the average (:func:`level_variance`): half the noise variance
    of one round, both for the choice and for the variance."""
    if len(releases) == 1:
        return releases[0].scale
    m = np.array([r.moments for r in releases])
    t = np.array([r.moment_noise for r in releases])
    w = 1.0 / t**2
    moments = (w * m).sum(axis=0) / w.sum(axis=0)
    noise = 1.0 / np.sqrt(w.sum(axis=0))
    wl = w[:, 0, :]
    shift_sq = (wl * np.array([r.shift_sq for r in releases])).sum(axis=0) / wl.sum(axis=0)
    _, variance, floor = level_variance(moments, noise, shift_sq, SCALE_LEVEL_Z)
    scale = np.sqrt(np.maximum(variance, floor))
    scale[~(scale > 0)] = 1.0
    return scale


def sq_norms(X: NDArray[np.float64]) -> NDArray[np.float64]:
    """Squared row norms in one pass; NaN/inf in X make the matching entry non-finite."""
    return np.einsum("ij,ij->i", X, X)


