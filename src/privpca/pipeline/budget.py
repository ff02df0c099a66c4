"""How one fit's (ε, δ) is split across the parts of the release pipeline.

Every part of a fit that touches the data (the private norm bound, the mean, the per-feature
scales, the explained variance, the estimator's own statistic) is a Gaussian mechanism, or is
given a fixed share of (ε, δ). The split is decided from public parameters only, before any
data is read, and is frozen in a :class:`BudgetPlan`.

Gaussian parts: an exact split
------------------------------
The adaptive composition of Gaussian mechanisms with noise multipliers ``m₁, …, m_r``
(``mᵢ = σᵢ/Δᵢ``) has exactly the privacy curve of one Gaussian mechanism with multiplier
``m = (Σ 1/mᵢ²)^(-1/2)``: the privacy-loss random variables are Gaussian and their means and
variances add. So with ``m = σ₁(ε, δ_noise)`` (the analytic calibration) and weights
``wᵢ ≥ 0`` summing to 1, the multipliers ``mᵢ = m/√wᵢ`` compose to exactly (ε, δ_noise). A
part released ``T`` times (a power method) gets ``m√T/√w`` per release
(:mod:`privpca.accounting.calibration` holds the formulas). The weights are shares of
``1/m²`` (zCDP's ρ), not of ε; a 5 % share costs the statistic only 2.5 % more noise.

The private quantiles (:mod:`privpca.mechanisms.quantile`) are Gaussian searches like the
other parts: no δ is set aside for them.

Other statistics: basic composition
-----------------------------------
A statistic that is not a Gaussian mechanism of known sensitivity (the exponential mechanism
of :class:`~privpca.BinghamPCA`, MOD-SuLQ's theorem) is given ``(ε·(1 − s), δ·(1 − s))``
(δ = 0 for a pure mechanism, which then leaves all of δ to the rest), where ``s`` is the summed
weight of the Gaussian parts; those get ``(ε·s, δ·s)`` (or ``(ε·s, δ)``) split exactly as
above. The two add up to (ε, δ) by basic composition.

With no part but the statistic (``centering=None`` and a public ``data_norm``: the papers'
setting), the statistic gets all of (ε, δ) and the noise is the papers' mechanism draw for
draw.

Wide tables: centring by row pairs
----------------------------------
A private mean has an error ``e`` with ``‖e‖² ≈ p·σ_mean²/n²``; centring on it adds the
rank-one ``n·e·eᵀ`` to the Gram matrix, in a random direction, and when that exceeds a
component's eigenvalue the component is lost (the fit returns the mean's noise instead).
The differences of disjoint row pairs (:mod:`privpca.pipeline.pairing`) need no mean and
have the table's covariance, at the price of half the rows (the Gram's signal halves, its
noise does not). :func:`pairs_pay` chooses from the public shape (n, p, ε, δ, the shares):
the ratio :func:`mean_bias_ratio` of the mean's predicted rank-one bias to the Gram noise's
detection threshold ``σ√p``; above :data:`PAIRS_MIN_RATIO` the mean parts are dropped (their
budget goes to the statistic) and the rows are paired.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import dp_accounting
import numpy as np

from privpca._validation import check_in_range
from privpca.accounting import calibration

__all__ = [
    "DEFAULT_SHARES",
    "PAIRS_MEAN_OFFSET",
    "PAIRS_MIN_RATIO",
    "PART_NAMES",
    "BudgetPlan",
    "PartBudget",
    "mean_bias_ratio",
    "pairs_pay",
]

#: Parts of the pipeline, in the order they run.
PART_NAMES: tuple[str, ...] = (
    "bound_raw",  # quantile of ‖x‖ (clipping bound of the first private mean)
    "mean",  # Σ clip(x): the first private mean
    "bound_residual",  # quantile of ‖x − μ̂₁‖ (clipping bound of the refinement)
    "mean_refine",  # Σ clip(x − μ̂₁): the refined mean
    "scale_bound",  # per-feature quantiles of |x_j − μ_j| (clipping of the variances)
    "scale",  # per-feature Σ (x_j − μ_j)²: the private standard deviations
    "bound",  # quantile of ‖(x − μ)/s‖: the candidate bounds (data_norm)
    "bound_select",  # two pilot Gram matrices: which candidate bound clips without rotating
    "centre",  # Σ y over the statistic's rows (held-out layout: re-centres the statistic)
    "statistic",  # the estimator's own release
    "variance",  # component and total variances (estimators whose statistic has no spectrum)
)

#: Default weights (shares of 1/m²) of the preprocessing parts; the statistic gets the rest.
DEFAULT_SHARES: Mapping[str, float] = {
    "bound_raw": 0.015,
    "mean": 0.015,
    "bound_residual": 0.015,
    "mean_refine": 0.03,
    "scale_bound": 0.02,
    "scale": 0.45,  # the most: smaller on large tables (release.SCALE_NOISE_FRACTION)
    "bound": 0.015,
    "bound_select": 0.2,
    "centre": 0.02,
    "variance": 0.02,
}

#: Releases per part (the per-feature scales run two rounds: the second one's bounds are set
#: around the first one's refined means, so features with a large mean and a tiny spread get
#: bounds of their own size).
PART_COUNTS: Mapping[str, int] = {"scale_bound": 2, "scale": 2}

#: :func:`pairs_pay`: pair the rows when the private mean's predicted rank-one bias is this
#: many times the Gram noise's detection threshold. Pairing halves the signal, so it pays
#: once the bias hides components the halved signal still shows (ratio above 2 in theory);
#: measured crossover on spiked models (n 1 500–5 000, p 50–600, a mean of 1 or 3 spreads)
#: and on the suite's tuning tables: the mean wins at ratios ≤ 3.6 (digits 3.1,
#: wide_spiked 3.6), pairs win from 5.5 on (tests/test_wide_tables.py).
PAIRS_MIN_RATIO = 4.5
#: The distance of the table's mean from the origin assumed by :func:`mean_bias_ratio`, in
#: units of the rows' spread around it (a public assumption: the first mean round's noise
#: grows with it, and a larger mean only makes the private mean worse).
PAIRS_MEAN_OFFSET = 1.0


def mean_bias_ratio(n_samples: int, n_features: int, epsilon: float, delta: float, *,
                    statistic_share: float,
                    shares: Mapping[str, float] | None = None) -> float:
    """The private mean's predicted rank-one bias over the Gram noise's threshold (public).

    In units of the rows' spread ``s`` (the clipping bounds of the mean's refinement and of
    the Gram are both about ``s``): each mean round of multiplier ``mᵢ`` (from the shares) and
    clipping radius ``Rᵢ`` leaves an error ``‖eᵢ‖ ≈ κᵢ·Rᵢ`` with ``κᵢ = 2√p·mᵢ/n`` (Δ = 2R,
    p coordinates, divided by n); the first round's radius is ``(1 + r)·s`` (``r`` =
    :data:`PAIRS_MEAN_OFFSET`), the refinement's ``‖e₁‖ + s``. The bias ``n‖e₂‖²`` is
    compared with ``√2·m_stat·√p`` (the Gram noise's ``σ√p`` over ``s²``, the level a
    component's eigenvalue must pass to be seen at all).

    Parameters
    ----------
    n_samples, n_features : int
    epsilon, delta : float
        The fit's target.
    statistic_share : float
        The statistic's share of the Gaussian budget in the plan with the private mean.
    shares : mapping, optional
        The user's shares (``"mean"``, ``"mean_refine"`` override the defaults).

    Returns
    -------
    float
        0 for a non-private fit (ε = ∞).

    Examples
    --------
    >>> round(mean_bias_ratio(1500, 600, 1.0, 1e-5, statistic_share=0.91), 1)
    49.0
    >>> mean_bias_ratio(581_012, 10, 1.0, 1e-5, statistic_share=0.71) < 0.01
    True
    """
    if math.isinf(epsilon):
        return 0.0
    n, p = int(n_samples), int(n_features)
    shares = shares or {}
    m = calibration.analytic_multiplier(epsilon, delta)
    k1 = 2.0 * math.sqrt(p) * m / math.sqrt(float(shares.get("mean", DEFAULT_SHARES["mean"]))) / n
    k2 = 2.0 * math.sqrt(p) * m / math.sqrt(
        float(shares.get("mean_refine", DEFAULT_SHARES["mean_refine"]))) / n
    e2 = k2 * (k1 * (1.0 + PAIRS_MEAN_OFFSET) + 1.0)
    threshold = math.sqrt(2.0) * m / math.sqrt(statistic_share) * math.sqrt(p)
    return n * e2**2 / threshold


def pairs_pay(n_samples: int, n_features: int, epsilon: float, delta: float, *,
              statistic_share: float, shares: Mapping[str, float] | None = None) -> bool:
    """Whether to centre by row pairs instead of a private mean (public shape only):
    :func:`mean_bias_ratio` above :data:`PAIRS_MIN_RATIO`.

    Examples
    --------
    >>> pairs_pay(1500, 600, 1.0, 1e-5, statistic_share=0.91)  # wide and spiked
    True
    >>> pairs_pay(1797, 64, 1.0, 1e-5, statistic_share=0.71)  # digits: the mean stays
    False
    """
    return mean_bias_ratio(n_samples, n_features, epsilon, delta,
                           statistic_share=statistic_share, shares=shares) > PAIRS_MIN_RATIO


@dataclass(frozen=True)
class PartBudget:
    """The budget of one part.

    Attributes
    ----------
    name : str
        One of :data:`PART_NAMES`.
    weight : float
        Share of ``1/m²`` (Gaussian parts) — the fraction of the Gaussian budget.
    multiplier : float
        Noise multiplier ``σ/Δ`` of *one* release of this part (``inf`` for a non-Gaussian
        statistic, which uses ``epsilon``/``delta`` instead).
    count : int
        How many releases (composed adaptively).
    epsilon, delta : float
        For a non-Gaussian statistic: the (ε, δ) it must satisfy on its own. For a Gaussian
        part: the ε that this part alone certifies at the plan's noise δ (informative).
    """

    name: str
    weight: float
    multiplier: float
    count: int = 1
    epsilon: float = math.nan
    delta: float = math.nan

    @property
    def gaussian(self) -> bool:
        return math.isfinite(self.multiplier)

    def dp_event(self) -> dp_accounting.DpEvent:
        """The event of all ``count`` releases (privpca's convention: multiplier σ/Δ)."""
        single = dp_accounting.GaussianDpEvent(self.multiplier)
        return single if self.count == 1 else dp_accounting.SelfComposedDpEvent(single, self.count)


@dataclass(frozen=True)
class BudgetPlan:
    """A frozen split of (ε, δ) across the active parts of one fit.

    Build it with :meth:`split`. ``parts`` maps each active part to its :class:`PartBudget`.

    Examples
    --------
    >>> plan = BudgetPlan.split(1.0, 1e-5, ("bound", "mean"), statistic_count=1)
    >>> sorted(plan.parts)
    ['bound', 'mean', 'statistic']
    >>> bool(plan.parts["statistic"].multiplier < plan.parts["mean"].multiplier)
    True
    >>> round(plan.composed_multiplier() / plan.total_multiplier, 12)
    1.0
    """

    epsilon: float
    delta: float
    parts: Mapping[str, PartBudget]
    total_multiplier: float
    delta_noise: float
    statistic_gaussian: bool
    notes: str = field(default="", compare=False)

    # ------------------------------------------------------------------ construction
    @classmethod
    def split(
        cls,
        epsilon: float,
        delta: float,
        active: tuple[str, ...],
        *,
        statistic_count: int = 1,
        statistic_gaussian: bool = True,
        statistic_pure: bool = False,
        shares: Mapping[str, float] | None = None,
        include_statistic: bool = True,
    ) -> BudgetPlan:
        """Split (ε, δ) across the ``active`` preprocessing parts and the statistic.

        Parameters
        ----------
        epsilon, delta : float
            The whole fit's target. ``epsilon = inf`` is a non-private fit (every multiplier 0).
        active : tuple of str
            Preprocessing parts in use (names from :data:`PART_NAMES`, except "statistic").
        statistic_count : int, default=1
            Releases of the statistic (T for a power method).
        statistic_gaussian : bool, default=True
            Whether the statistic is a Gaussian mechanism calibrated by multiplier.
        statistic_pure : bool, default=False
            For a non-Gaussian statistic: pure ε-DP (takes no δ).
        shares : mapping, optional
            Weights overriding :data:`DEFAULT_SHARES` (each in [0, 1); their sum below 1).
        include_statistic : bool, default=True
            ``False``: a plan of the ``active`` parts alone (no statistic), their weights
            normalised to sum to 1, so they compose to exactly (ε, δ) by themselves: the plan
            of a held-out share of the rows, which releases only preprocessing (parallel
            composition with the statistic's own plan on the other rows).

        Returns
        -------
        BudgetPlan
        """
        weights, pre = _preprocessing_weights(active, shares, include_statistic)
        if not include_statistic:
            statistic_gaussian = True
        if math.isinf(epsilon):
            parts = {name: PartBudget(name, w, 0.0) for name, w in weights.items()}
            if include_statistic:
                parts["statistic"] = PartBudget("statistic", 1.0 - pre, 0.0,
                                                int(statistic_count))
            return cls(epsilon, 0.0, parts, 0.0, 0.0, statistic_gaussian)

        if not include_statistic:
            gauss_eps, gauss_delta = epsilon, delta
        elif statistic_gaussian:
            gauss_eps, gauss_delta = epsilon, delta
            weights["statistic"] = 1.0 - pre
        elif not weights:
            parts = {"statistic": PartBudget("statistic", 1.0, math.inf, int(statistic_count),
                                             epsilon=epsilon, delta=0.0 if statistic_pure
                                             else delta)}
            return cls(epsilon, delta, parts, math.inf, 0.0, False)
        else:
            gauss_eps = epsilon * pre
            gauss_delta = delta if statistic_pure else delta * pre
            weights = {name: w / pre for name, w in weights.items()}

        delta_noise = gauss_delta
        m = calibration.analytic_multiplier(gauss_eps, delta_noise)
        parts = _gaussian_parts(weights, m, delta_noise, int(statistic_count))
        drowned = [name for name, b in parts.items() if b.multiplier > MAX_MULTIPLIER]
        if drowned:  # refused before anything is charged, not mid-fit by the noise's grid
            raise ValueError(
                f"The budget gives {', '.join(drowned)} noise more than {MAX_MULTIPLIER:.0e} "
                "times its sensitivity: nothing could be learned from it, and secure noise "
                "cannot be drawn at that scale. Raise its budget_shares entry or epsilon.")
        if not statistic_gaussian:
            parts["statistic"] = PartBudget(
                "statistic", 1.0 - pre, math.inf, int(statistic_count),
                epsilon=epsilon - gauss_eps,
                delta=0.0 if statistic_pure else delta - gauss_delta,
            )
        return cls(epsilon, delta, parts, m, delta_noise, statistic_gaussian)

    # ------------------------------------------------------------------ queries
    def __contains__(self, name: object) -> bool:
        return name in self.parts

    def __getitem__(self, name: str) -> PartBudget:
        return self.parts[name]

    def composed_multiplier(self) -> float:
        """``(Σ count/mᵢ²)^(-1/2)`` over the Gaussian parts: equals ``total_multiplier``."""
        inv = sum(p.count / p.multiplier**2 for p in self.parts.values() if p.gaussian)
        return math.inf if inv == 0 else 1.0 / math.sqrt(inv)

    def describe(self) -> dict[str, Any]:
        """A JSON-friendly summary of the split."""
        return {
            name: {
                "weight": p.weight,
                "noise_multiplier": p.multiplier if p.gaussian else None,
                "count": p.count,
                "epsilon": p.epsilon,
                "delta": p.delta,
            }
            for name, p in self.parts.items()
        }


def _preprocessing_weights(active: tuple[str, ...], shares: Mapping[str, float] | None,
                           include_statistic: bool) -> tuple[dict[str, float], float]:
    """The ``active`` parts' weights (:data:`DEFAULT_SHARES`, overridden by ``shares``) and
    their sum; without the statistic, normalised to sum to 1."""
    weights = {name: float(DEFAULT_SHARES[name]) for name in active}
    for name, value in (shares or {}).items():
        if name not in DEFAULT_SHARES:
            raise ValueError(
                f"budget_shares has an unknown part {name!r}; the parts are "
                f"{sorted(DEFAULT_SHARES)}."
            )
        if name in weights:
            weights[name] = check_in_range(value, f"budget_shares[{name!r}]", low=0.0,
                                           high=1.0)
    pre = sum(weights.values())
    if not include_statistic:
        if not weights or pre <= 0.0:
            raise ValueError("A plan without a statistic needs an active part of positive "
                             "share.")
        return {name: w / pre for name, w in weights.items()}, 1.0
    if not pre < 1.0:
        raise ValueError(
            f"The preprocessing shares {weights} sum to {pre:g}; they must leave a positive "
            "share (1 - sum) for the estimator's statistic."
        )
    return weights, pre


#: The largest noise multiplier σ/Δ a part may get (a tiny share, a tiny ε): beyond it a
#: release says nothing, and the secure grid's integer scale (below 2⁵²) fails for wide releases.
MAX_MULTIPLIER = 1e12


def _gaussian_parts(weights: Mapping[str, float], multiplier: float, delta_noise: float,
                    statistic_count: int) -> dict[str, PartBudget]:
    """The Gaussian parts' budgets: each part's share ``weights[name]`` of the whole
    Gaussian budget of multiplier ``multiplier``, spread over its releases."""
    parts = {}
    for name, w in weights.items():
        count = statistic_count if name == "statistic" else PART_COUNTS.get(name, 1)
        if w <= 0.0:
            raise ValueError(f"budget_shares[{name!r}] must be positive for an active part.")
        mult = calibration.share_multiplier(multiplier, w, count)
        parts[name] = PartBudget(
            name, w, mult, count,
            epsilon=_single_epsilon(mult / math.sqrt(count), delta_noise),
            delta=delta_noise,
        )
    return parts


@functools.lru_cache(maxsize=1024)
def _single_epsilon(multiplier: float, delta: float) -> float:
    """ε of one Gaussian release of multiplier ``multiplier`` at ``delta`` (informative)."""
    if multiplier <= 0 or not np.isfinite(multiplier):
        return math.inf if multiplier <= 0 else 0.0
    return calibration.certified_epsilon(multiplier, delta)
