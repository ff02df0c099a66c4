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
* **scale**: with ``u_j = clip((x_j − μ̂_j)/b_j, ±1)``, the sums ``Σu_j`` and ``Σu_j²`` of every
  feature, with Gaussian noise; replacing a row moves them by at most 2 and 1 per feature:
  **Δ = √(5p)**. Normalising by each feature's own bound makes the noise on a feature's mean
  and variance proportional to its own spread: with mixed units, one joint bound would drown
  the small features. This also refines the mean, feature by feature.

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

from privpca._validation import check_noise_rng
from privpca.mechanisms.noise import gaussian_release
from privpca.mechanisms.quantile import GRID_BASE, PrivateQuantile, QuantileRelease
from privpca.streaming import as_row_source, reductions
from privpca.streaming.reductions import BinCounts, BinnedSums, log_bin_counts

__all__ = [
    "BinnedSums",  # re-exported from privpca.streaming.reductions, where it is made
    "MeanRelease",
    "ScaleRelease",
    "check_quantile_records",
    "norm_bin_counts",
    "private_mean",
    "private_mean_from_sum",
    "private_norm_bound",
    "private_norm_bound_from_counts",
    "private_scale",
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
    """

    def __init__(self, message: str, *, rows: int | None = None, needed: int | None = None,
                 epsilon_needed: float | None = None) -> None:
        super().__init__(message)
        self.rows, self.needed, self.epsilon_needed = rows, needed, epsilon_needed


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
    release = search.estimate_counts(np.zeros(len(index), dtype=np.intp), index, counts, rng)
    return release.value[:, 0], release


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
    noisy bisection per feature, all in the same rounds). With
    ``u_j = clip((x_j − μ̂_j)/b_j, −1, 1)``,
    the sums ``Σu_j`` and ``Σu_j²`` of all features are released together with Gaussian noise
    of multiplier ``multiplier``: replacing a row moves each ``Σu_j`` by at most 2 and each
    ``Σu_j²`` by at most 1, so **Δ = √(5p)**. Normalising by each feature's own bound makes
    every feature's noise proportional to its own spread: with mixed units, a joint norm
    bound would drown the small features. The refined mean is ``μ̂_j + b_j·Σu_j/n`` and the
    variance ``b_j²(Σu_j²/n − (Σu_j/n)²)`` (times n/(n − ddof)); a variance below its own
    noise level gets that level (a post-processing floor).

    ``source`` is the table, an array or a :class:`~privpca.streaming.RowSource`: two passes
    (the histograms' counts, then the sums), each a block reduction.
    """

    rows = as_row_source(source)
    n, p = rows.n_samples, rows.n_features
    search = PrivateQuantile.calibrate(bound_multiplier, quantiles=quantile, n_records=n,
                                       n_columns=p)
    col, index, counts = reductions.deviation_counts(rows, mean, GRID_BASE)
    bounds = search.estimate_counts(col, index, counts, rng).value[0]
    first, second = reductions.normalised_moments(rows, mean, bounds)
    sensitivity = math.sqrt(5.0 * p)
    sigma = multiplier * sensitivity
    # One release of 2p coordinates (Δ = √(5p) covers both): the sums, then the squares.
    released = gaussian_release(np.concatenate([first, second]), sigma, rng,
                                sensitivity=sensitivity)
    first, second = released[:p], released[p:]
    shift = first / n
    refined = mean + bounds * shift
    variance = (second / n - shift**2) * n / max(n - ddof, 1)
    floor = sigma / max(n - ddof, 1)
    scale = np.sqrt(np.maximum(variance, floor)) * bounds
    scale[~(scale > 0)] = 1.0
    return ScaleRelease(refined, scale, bounds, sigma, sensitivity)


def sq_norms(X: NDArray[np.float64]) -> NDArray[np.float64]:
    """Squared row norms in one pass; NaN/inf in X make the matching entry non-finite."""
    return np.einsum("ij,ij->i", X, X)


def check_finite_norms(sq: NDArray[np.float64], X: NDArray[np.float64]) -> None:
    """Refuse NaN/inf (found through the norms' pass) and overflowing rows."""
    if np.isfinite(sq).all():
        return
    if not np.isfinite(X).all():  # how many rows is not reported: a count of the data
        raise ValueError(
            "X contains NaN or infinity. Differentially private estimators cannot impute "
            "or drop rows silently: remove or impute them first."
        )
    raise ValueError("X has rows whose norm overflows float64; rescale the data.")


