"""The release pipeline: one way through every fit, in one file.

::

    plan     = BudgetPlan.split(ε, δ, active parts)        # public: decided before any data
    ledger.spend(planned record)                           # refused here, before anything runs
    R₁       = private quantile of ‖x‖                     # centering="private"
    μ̂₁       = private mean of clip_R₁(x)
    R₂       = private quantile of ‖x − μ̂₁‖
    μ̂        = μ̂₁ + private mean of clip_R₂(x − μ̂₁)        # refinement: noise ∝ spread, not ‖μ‖
    s        = private per-feature scales                  # scale=True
    D        = private quantile of ‖(x − μ̂)/s‖             # data_norm="auto" (else public D)
    rows     = clip_D((x − μ̂)/s)
    release  = estimator's statistic on rows, noise σ = m_stat·Δ(D)
    variance = private component/total variances           # only if the statistic has no spectrum

An estimator declares only its :class:`Statistic` (mechanism, sensitivity as a function of the
norm bound D, number of releases) and computes it from :class:`PreparedRows` with the noise
multiplier the plan gives it. The budget split (:mod:`privpca.pipeline.budget`), the clipping
and the charge to the ledger all happen here.

From 10⁷ rows on (``holdout_fraction="auto"``; any fraction on request) the Gram-based
estimators run the **held-out layout**: the preprocessing reads 2 % of the rows (a uniformly
random set of single rows, drawn secretly from the estimator's generator: whatever the row
order, :mod:`privpca.streaming.holdout`) with its own plan at the whole (ε, δ), and the
statistic reads the other rows with its own plan at the whole (ε, δ), releasing also their
clipped sum (the ``"centre"`` part) to re-centre itself on their own mean. Each record enters
one of the two: parallel composition (docs/PIPELINE.md).

Neighbouring relation: replace one record (the number of records n is public). Every part is a
Gaussian mechanism whose sensitivity is computed from earlier *released* values, so the whole
fit is an adaptive composition, and the split makes it compose to exactly the requested
(ε, δ) (see :mod:`privpca.pipeline.budget`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

import numpy as np
from numpy.typing import NDArray

from privpca.accounting.neighbouring import Neighbouring
from privpca.mechanisms.noise import gaussian_release
from privpca.mechanisms.quantile import PrivateQuantile
from privpca.pipeline.basis_error import (
    ComponentSpectrum,
    basis_moments,
    component_error_bound,
    rotate_component_spectrum,
    spectrum_off_high_pilot,
    unpack_moments,
)
from privpca.pipeline.bound_selection import MAX_FEATURES as SELECT_MAX_FEATURES
from privpca.pipeline.budget import (
    DEFAULT_SHARES,
    PART_NAMES,
    BudgetPlan,
    PartBudget,
    pairs_pay,
)
from privpca.pipeline.preparation import RowPreparation
from privpca.pipeline.preprocessing import (
    SCALE_LEVELS,
    BoundNotFoundError,
    scale_sensitivity,
)
from privpca.pipeline.recording import PrivacyRecording
from privpca.pipeline.rows import (
    PreparedRows,
    Statistic,
)
from privpca.pipeline.settings import (
    BOUND_QUANTILES,
    DEFAULT_NORM_QUANTILE,
    QUANTILE_PARTS,
    SCALE_QUANTILE,
    PipelineSettings,
    check_centering,
    check_scale,
)
from privpca.pipeline.spectrum import ERROR_ALPHA, mean_perturbation_bound
from privpca.streaming.holdout import held_out_size, random_row_split
from privpca.streaming.reductions import (
    clipped_gram_and_sum,
    clipped_sum,
)

__all__ = [
    "HOLDOUT_AUTO_FRACTION",
    "HOLDOUT_AUTO_MIN_ROWS",
    "ReleasePipeline",
]

#: The private mean's parts (dropped when the rows are paired, :mod:`privpca.pipeline.pairing`).
MEAN_PARTS = ("bound_raw", "mean", "bound_residual", "mean_refine")
_SEARCH_WHAT = {"bound_raw": "mean's norm bound", "bound_residual": "mean's refined norm "
                "bound", "scale_bound": "per-feature scale bounds", "bound": "norm bound"}
#: The most a quantile search's share is raised to on a small table.
MAX_SEARCH_SHARE = 0.15
#: With ``scale=True``: the per-feature sums' noise, in rows, as a fraction of n. A minority
#: that carries a feature's spread (the ones of a rare binary column) is seen when it is a
#: few times this noise; the default share (:data:`~privpca.pipeline.budget.DEFAULT_SHARES`,
#: the most) is what RAND's 20 190 rows need for its 1.5 %-ones column (chosen on the tuning
#: half); larger tables need less and give the rest to the statistic.
SCALE_NOISE_FRACTION = 0.004
#: The least share of the scales on a large table.
MIN_SCALE_SHARE = 0.02
#: ``holdout_fraction="auto"`` holds out a share of the rows for the preprocessing from this
#: many rows on. Below it the whole-table layout is more accurate: leaving the held-out rows
#: out of the statistic costs about 1/√n, not yet small against the noise (measured,
#: benchmarks/holdout_tradeoff.py, docs/PIPELINE.md).
HOLDOUT_AUTO_MIN_ROWS = 10_000_000
#: The share of the rows held out under ``holdout_fraction="auto"``.
HOLDOUT_AUTO_FRACTION = 0.02


class ReleasePipeline(RowPreparation, PrivacyRecording):
    """Validate → plan → charge → centre/scale/bound/clip → statistic → variances → record.

    Parameters
    ----------
    owner : estimator
        Named in error messages; its ``ledger`` (or the default one) is charged.
    settings : PipelineSettings
        The user's parameters (ε, δ, centering, bound, scales, shares, held-out fraction).
    n_samples, n_features : int
    statistic : Statistic
    model : str
        Trust model written to the record (``"central"``; the local and distributed models
        run the same plan on their own parties).
    neighbouring : Neighbouring
        The neighbouring relation; its description is written to the record, and n is
        recorded only where it is public.
    """

    def __init__(
        self,
        owner: Any,
        settings: PipelineSettings,
        n_samples: int,
        n_features: int,
        statistic: Statistic,
        *,
        model: str = "central",
        neighbouring: Neighbouring = Neighbouring.REPLACE_ONE_N_PUBLIC,
    ) -> None:
        self.owner = owner
        self.settings = settings
        self.n_samples, self.n_features = int(n_samples), int(n_features)
        self.statistic = statistic
        self.model = model
        self.neighbouring = neighbouring
        # The values were checked by the caller's declaration (an estimator's
        # _parameter_constraints, a provider's agreement); what depends on p is checked here.
        self.epsilon = float(settings.epsilon)
        pure = statistic.kind == "pure"
        raw_delta = settings.delta
        self.centering = check_centering(settings.centering, n_features, owner)
        self.data_norm = (settings.data_norm if isinstance(settings.data_norm, str)
                          else float(settings.data_norm))
        self.scale = check_scale(settings.scale, n_features, owner)
        shares = settings.budget_shares
        active = []
        if isinstance(self.centering, str):
            active += ["bound_raw", "mean", "bound_residual", "mean_refine"]
        if self.scale is True:
            active += ["scale_bound", "scale"]
        if isinstance(self.data_norm, str):
            active.append("bound")
            if (self.data_norm in ("auto", "select") and statistic.subspace_rank > 0
                    and self.n_features <= SELECT_MAX_FEATURES):
                active.append("bound_select")
        self.table_mode = bool(active) or self.scale is not False or self.centering is not None
        # The "variance" part: a basis's bar (and variances); a spectrum's bar, on a chosen D.
        if (not statistic.releases_spectrum and (self.table_mode or (shares and "variance"
                                                                     in shares))) \
                or (statistic.releases_spectrum and "bound_select" in active):
            active.append("variance")
        self.active = tuple(active)
        if pure and not self.active:
            self.delta = 0.0  # a pure statistic alone: pure epsilon-DP, delta unused
        elif pure and not raw_delta:  # the pure-DP rule, the one place it is decided
            raise ValueError(
                f"{type(owner).__name__}: delta=0 (pure epsilon-DP) needs a public centre, norm "
                "bound and scales: pass centering=None, data_norm=D (a public bound on the "
                "rows' norms, never read off the data) and scale=False. "
                f"{', '.join(self.active)} would be Gaussian releases, which need delta > 0.")
        else:
            self.delta = float(raw_delta)  # type: ignore[arg-type]  # declared in (0, 1)
        held_parts = tuple(part for part in self.active if part != "variance")
        self.holdout_fraction = self._resolve_holdout(
            settings.holdout_fraction, held_parts)
        #: The held-out rows' plan (preprocessing only, the whole (ε, δ)), or None.
        self.held_plan: BudgetPlan | None = None
        statistic_parts = self.active
        if self.holdout_fraction is not None:
            self.held_out_sizes()  # refuses a split too small, before the data
            if statistic.releases_spectrum:  # no bound chosen on its rows: no bar to cover
                self.active = held_parts
            statistic_parts = tuple(part for part in self.active if part not in held_parts)
            if isinstance(self.centering, str):
                # The held-out mean is off the statistic's rows' own mean by its sampling
                # error (a rank-one term ∝ tr Σ / fraction, as large as the noise at 2 %):
                # the statistic's pass also releases Σ y, which re-centres it exactly.
                statistic_parts = ("centre", *statistic_parts)
        def plans(shares: Any) -> tuple[BudgetPlan, BudgetPlan | None]:
            held = None if self.holdout_fraction is None else BudgetPlan.split(
                self.epsilon, self.delta, held_parts, shares=shares, include_statistic=False)
            return BudgetPlan.split(
                self.epsilon, self.delta, statistic_parts, statistic_count=statistic.count,
                statistic_gaussian=statistic.kind == "gaussian", statistic_pure=pure,
                shares=shares), held

        self.plan, self.held_plan = plans(self._sized_shares(plans, shares))
        #: Centring by row-pair differences instead of a private mean (wide tables; decided
        #: from the public shape: :func:`~privpca.pipeline.budget.pairs_pay`).
        self.pairing = False
        if self._pairs_pay(shares):
            unpaired = (self.active, self.plan, self.centering)
            self.pairing, self.centering = True, None
            self.active = statistic_parts = tuple(p for p in self.active if p not in MEAN_PARTS)
            self.plan = plans(self._sized_shares(plans, shares))[0]
            if self._short_searches(self.plan, None):  # too few pairs: keep the mean
                self.pairing = False
                self.active, self.plan, self.centering = unpaired

    def _pairs_pay(self, shares: Mapping[str, float] | None) -> bool:
        """Whether the rows are paired: a pairable Gaussian statistic on a whole in-memory
        layout with a private mean and bound, no private scales, the mean's shares not set
        by the user, and the public shape past :data:`~privpca.pipeline.budget.PAIRS_MIN_RATIO`."""
        return (self.statistic.pairable and self.statistic.kind == "gaussian"
                and self.model == "central" and self.n_samples >= 4
                and isinstance(self.centering, str) and isinstance(self.data_norm, str)
                and self.scale is not True and self.holdout_fraction is None
                and not any(part in (shares or {}) for part in MEAN_PARTS)
                and pairs_pay(self.n_samples, self.n_features, self.epsilon, self.delta,
                              statistic_share=self.plan["statistic"].weight, shares=shares))

    # ------------------------------------------------------------------ budget
    def _search(self, part: str, b: PartBudget, n: int) -> PrivateQuantile:
        """The private quantile search a part runs (public: its multiplier, n, p)."""
        quantiles = (BOUND_QUANTILES if part == "bound" and "bound_select" in self.active
                     else SCALE_QUANTILE if part == "scale_bound" else DEFAULT_NORM_QUANTILE)
        return PrivateQuantile.calibrate(b.multiplier, quantiles=quantiles, n_records=n,
                                         n_columns=self.n_features if part == "scale_bound"
                                         else 1)

    def _short_searches(self, plan: BudgetPlan, held: BudgetPlan | None
                        ) -> list[tuple[str, PrivateQuantile]]:
        """The quantile searches of the plans that would have too few rows."""
        sizes = self.held_out_sizes() if held is not None else None
        pairs = [(plan, self.n_statistic)] if sizes is None or held is None else [
            (plan, sizes[1]), (held, sizes[0])]
        out = []
        for which, n in pairs:
            for part in QUANTILE_PARTS:
                if part in which:
                    search = self._search(part, which[part], n)
                    if n < search.min_records():
                        out.append((part, search))
        return out

    def _sized_shares(self, plans: Callable[[Any], tuple[BudgetPlan, BudgetPlan | None]],
                      shares: Mapping[str, float] | None) -> Mapping[str, float] | None:
        """The default shares, with the quantile searches' raised where the public n is too
        small for them (their noise falls as ``1/√share``), up to :data:`MAX_SEARCH_SHARE`
        each. Shares the user set are kept."""
        sized = dict(shares or {})
        if "scale" in self.active and "scale" not in (shares or {}):
            sized["scale"] = self._scale_share(plans, sized)
        for _ in range(3):  # the other parts' multipliers move a little with each raise
            short = [(part, search) for part, search in self._short_searches(*plans(sized))
                     if part not in (shares or {})]
            if not short:
                break
            for part, search in short:
                share = sized.get(part, DEFAULT_SHARES[part])
                need = (search.min_records() / search.n_records) ** 2 * 1.02
                raised = {**sized, part: min(share * need, MAX_SEARCH_SHARE)}
                # The statistic keeps a share: past it the searches stay short and the
                # fit is refused as too small (check_rows), not as badly split.
                if sum(raised.get(q, DEFAULT_SHARES[q]) for q in self.active) < 1.0:
                    sized = raised
        return sized or shares

    def _scale_share(self, plans: Callable[[Any], tuple[BudgetPlan, BudgetPlan | None]],
                     sized: dict[str, float]) -> float:
        """The scales' share that puts their sums' noise at :data:`SCALE_NOISE_FRACTION` of
        the public n in rows (their noise falls as ``1/√share``), within
        [:data:`MIN_SCALE_SHARE`, the default share]."""
        top = DEFAULT_SHARES["scale"]
        share = top
        for _ in range(3):  # the statistic's rest moves the total a little with each change
            b = plans({**sized, "scale": share})[0]["scale"]
            rows = b.multiplier * scale_sensitivity(self.n_features, len(SCALE_LEVELS))
            need = share * (rows / (SCALE_NOISE_FRACTION * self.n_samples)) ** 2
            share = min(max(need, MIN_SCALE_SHARE), top)
        return share

    def check_rows(self) -> None:
        """Refuse, before anything is booked or released, a plan whose quantile searches have
        too few rows at this ε (public: n, p, ε, δ and the shares). Called by
        :meth:`planned_record`, after the estimator's own parameter checks."""
        short = self._short_searches(self.plan, self.held_plan)
        if not short:
            return
        part, search = short[0]
        eps = self._epsilon_that_works()
        needed = self._rows_that_work(max(s.min_records() for _, s in short))
        raise BoundNotFoundError(
            f"{type(self.owner).__name__}: {search.n_records} rows are too few for the "
            f"private {_SEARCH_WHAT[part]} at epsilon={self.epsilon:g}, delta={self.delta:g}: "
            f"its counts carry noise of {search.noise:.0f} rows. At these settings the fit "
            f"needs at least {needed} rows (every search's, with the shares planned for "
            "that many). Nothing was released or charged. What works: "
            + self._what_works(eps, scaled='scale' in self.active),
            rows=search.n_records, needed=needed, epsilon_needed=eps)

    def _rows_that_work(self, start: int) -> int:
        """The fewest rows at which no search is short, the rest of the settings unchanged
        (public): the searches' shares are planned for the public n, so a table of ``start``
        rows (what this plan's searches need) may still be short for another search."""

        low, high = self.n_samples, max(int(start), self.n_samples + 1)
        while not self._fits(n_samples=high):  # by a fifth: a few probes from the plan's figure
            low, high = high, int(high * 1.2) + 1
        while high - low > 1:  # low is short, high is not
            mid = (low + high) // 2
            low, high = (low, mid) if self._fits(n_samples=mid) else (mid, high)
        return high

    def _fits(self, *, n_samples: int | None = None, epsilon: float | None = None) -> bool:
        """Whether every search has the rows it needs with n or ε changed, the rest of the
        settings as they are (a probe plan: public quantities only)."""
        settings = self.settings if epsilon is None else replace(self.settings, epsilon=epsilon)
        probe = ReleasePipeline(self.owner, settings, self.n_samples if n_samples is None
                                else n_samples, self.n_features, self.statistic,
                                model=self.model, neighbouring=self.neighbouring)
        return not probe._short_searches(probe.plan, probe.held_plan)

    def _epsilon_that_works(self) -> float | None:
        """The smallest ε (on a grid of ratio 1.25, up to 64) at which every search has the
        rows it needs, the rest of the settings unchanged (public)."""
        for i in range(1, 40):
            eps = self.epsilon * 1.25**i
            if eps > 64:
                break
            if self._fits(epsilon=eps):
                return eps
        return None

    @staticmethod
    def _what_works(eps: float | None, *, scaled: bool) -> str:
        larger = (f"epsilon >= {eps:.3g}" if eps is not None else "no epsilon up to 64 does")
        return (f"{larger}; or public quantities in place of the private ones: a public "
                "centre (centering=array of the feature means, or None for data already "
                "centred) and a public data_norm (a number that bounds every row's norm, "
                "never read off this table)"
                + (", and public scales (scale=array of the features' standard deviations "
                   "from another source) or scale=False." if scaled else "."))

    def _resolve_holdout(self, value: Any, held_parts: tuple[str, ...]) -> float | None:
        """The held-out fraction in use: None without preprocessing or with ``None``;
        ``"auto"`` holds out :data:`HOLDOUT_AUTO_FRACTION` from
        :data:`HOLDOUT_AUTO_MIN_ROWS` rows on (a function of the public n only)."""
        if not held_parts or value is None:
            return None
        if value == "auto":
            return HOLDOUT_AUTO_FRACTION if self.n_samples >= HOLDOUT_AUTO_MIN_ROWS else None
        return float(value)

    def _part(self, name: str) -> PartBudget:
        """A part's budget, from the held-out plan when it runs on the held-out rows."""
        if self.held_plan is not None and name in self.held_plan:
            return self.held_plan[name]
        return self.plan[name]

    def _all_parts(self) -> list[str]:
        """Every part of the fit (held-out plan first), in pipeline order."""
        names = set(self.plan.parts) | set(() if self.held_plan is None
                                           else self.held_plan.parts)
        return [name for name in PART_NAMES if name in names]

    def held_out_sizes(self) -> tuple[int, int] | None:
        """``(n_held, n_rest)``, public: ``n_held = ⌈holdout_fraction·n⌉`` (None: no
        hold-out). Refuses a split with fewer than 2 rows on either side."""
        if self.holdout_fraction is None:
            return None

        n_held = held_out_size(self.n_samples, self.holdout_fraction)
        n_rest = self.n_samples - n_held
        if n_held < 2 or n_rest < 2:
            raise ValueError(
                f"{type(self.owner).__name__}: holdout_fraction={self.holdout_fraction:g} "
                f"holds out {n_held} of n_samples={self.n_samples} rows and leaves "
                f"{n_rest}; both need at least 2. Use holdout_fraction=None."
            )
        return n_held, n_rest

    def held_out_split(self, rng: np.random.Generator) -> Any:
        """The held-out rows, ``n_held`` of them drawn uniformly without replacement from
        ``rng`` (the estimator's own generator; the draw stays secret), as a
        :class:`~privpca.streaming.holdout.RowSplit` (None: no hold-out)."""
        if self.held_out_sizes() is None:
            return None

        assert self.holdout_fraction is not None
        return random_row_split(self.n_samples, self.holdout_fraction, rng)

    @property
    def recentre(self) -> bool:
        """Whether the statistic re-centres on its own rows (the "centre" part)."""
        return "centre" in self.plan

    def recentred_gram(self, prepared: PreparedRows,
                       rng: np.random.Generator) -> NDArray[np.float64]:
        """``Σ yyᵀ − s̃s̃ᵀ/n`` from one pass over the statistic's rows, ``s̃`` the released
        ``Σ y`` (the "centre" part): the Gram of the rows centred on their own private mean.
        """

        gram, total, prepared.n_clipped = clipped_gram_and_sum(
            prepared.source, prepared.mean, prepared.scale, prepared.data_norm)
        prepared._warn_if_clipped()
        s = self._release_centre(prepared, total, rng)
        gram -= np.outer(s, s) / prepared.n_samples
        return gram

    def recentred_product(self, prepared: PreparedRows, rng: np.random.Generator
                          ) -> Callable[[NDArray[np.float64]], NDArray[np.float64]]:
        """``Q ↦ Σ y(yᵀQ) − s̃(s̃ᵀQ)/n``: :meth:`recentred_gram` without the p×p matrix (one
        more pass, for ``Σ y``)."""

        total = clipped_sum(prepared.source, prepared.mean, prepared.data_norm,
                            scale=prepared.scale)
        s = self._release_centre(prepared, total, rng)
        n = prepared.n_samples

        def product(Q: NDArray[np.float64]) -> NDArray[np.float64]:
            return prepared.product(Q) - np.outer(s, s @ Q) / n

        return product

    def _release_centre(self, prepared: PreparedRows, total: NDArray[np.float64],
                        rng: np.random.Generator) -> NDArray[np.float64]:
        """The "centre" part: ``s̃ = Σ y + N(0, σ²I)``, Δ = 2D (replace one row of norm ≤ D).

        The reported ``mean_`` becomes the held-out mean plus ``s̃/n`` (in the table's units);
        the rows keep their clipping centre. The error the re-centring leaves in the Gram,
        ``(ssᵀ − s̃s̃ᵀ)/n`` with ``s = s̃ − e``, is at most ``(2‖s̃‖‖e‖ + ‖e‖²)/n`` and ‖e‖ is
        bounded w.p. 1 − α from σ: released quantities only (``expected_error_``).
        """
        b = self.plan["centre"]
        sensitivity = 2.0 * prepared.data_norm
        sigma = b.multiplier * sensitivity
        noisy = gaussian_release(total, sigma, rng, sensitivity=sensitivity)
        n = prepared.n_samples
        prepared.centre_sum = noisy
        shift = noisy / n if prepared.scale is None else noisy / n * prepared.scale
        base = np.zeros(prepared.n_features) if prepared.mean is None else prepared.mean
        prepared.reported_mean = base + shift
        radius = sigma * (math.sqrt(prepared.n_features)
                          + math.sqrt(2.0 * math.log(1.0 / ERROR_ALPHA)))
        prepared.details["centre_error"] = (2.0 * float(np.linalg.norm(noisy)) * radius
                                            + radius**2) / n
        prepared.spends.append(self._spend(
            "centre", "gaussian: Σ clip_D((x − μ̂)/s) over the statistic's rows (re-centres "
            "the statistic on their own private mean)", sensitivity, sigma))
        return noisy

    @property
    def n_statistic(self) -> int:
        """Rows the statistic reads: n, the rows not held out, or ⌊n/2⌋ pair differences
        (public: sizes only)."""
        if getattr(self, "pairing", False):
            return self.n_samples // 2
        sizes = self.held_out_sizes()
        return self.n_samples if sizes is None else sizes[1]

    @property
    def paper_mode(self) -> bool:
        """No preprocessing part: the papers' uncentred, publicly bounded setting."""
        return not self.active

    @property
    def statistic_budget(self) -> PartBudget:
        return self.plan["statistic"]

    def statistic_multiplier(self) -> float:
        """Noise multiplier σ/Δ of *one* release of the (Gaussian) statistic."""
        return self.plan["statistic"].multiplier

    # ------------------------------------------------------------------ variances
    def rotate_to_spectrum(self, prepared: PreparedRows, components: NDArray[np.float64],
                           rng: np.random.Generator) -> ComponentSpectrum:
        """The "variance" part, then ``components`` rotated to the private ``VᵀGV``'s
        eigenvectors with variances and bar (papers' setting: the components unchanged)."""
        if "variance" not in self.plan:
            return rotate_component_spectrum(components, None)
        released, sd, extra, _ = self._release_variance(prepared, components, rng)
        spectrum = rotate_component_spectrum(components, released, sd, extra_perturbation=extra)
        return spectrum_off_high_pilot(self.bound_choice(prepared), spectrum,
                                       self.denominator(prepared))

    def spectrum_bar(self, prepared: PreparedRows, components: NDArray[np.float64],
                     noise_error: float | None, rng: np.random.Generator,
                     refinement: Any = None) -> float | None:
        """The bar of a statistic with a spectrum of its own (Analyze Gauss, MOD-SuLQ) where
        the bound selection chose its bound: the "variance" part's residual bar against the
        rows :meth:`_variance_rows` reads, the smaller of it and ``noise_error`` (the noise
        bar, against the chosen bound's rows) where those are the same rows. After a scale
        ``refinement`` the part reads the rows divided by its (public) factors: the units of
        ``components``. ``noise_error`` unchanged where the part is not active."""
        if "variance" not in self.plan or noise_error is None:
            return noise_error
        factors = None if refinement is None or refinement.is_identity else refinement.factors
        released, sd, extra, reclipped = self._release_variance(prepared, components, rng,
                                                                factors)
        bar = component_error_bound(released[0], released[1], sd, components.shape[1], extra,
                                    residual=released[2] if len(released) > 2 else None)
        return bar if reclipped else min(bar, float(noise_error))

    def _release_variance(self, prepared: PreparedRows, components: NDArray[np.float64],
                          rng: np.random.Generator, factors: NDArray[np.float64] | None = None
                          ) -> tuple[tuple[Any, ...], float, float, bool]:
        """The "variance" part: :func:`~privpca.pipeline.basis_error.basis_moments` of
        :meth:`_variance_rows` (divided by ``factors``, then bounded by ``D/min(factors)``)
        in one Gaussian release of **Δ = √2·D²** for the whole vector (the proof is in
        :mod:`privpca.pipeline.basis_error`). Returns the released moments
        (:func:`~privpca.pipeline.basis_error.unpack_moments`), their noise std and the
        centring's perturbation bound in variance units, and whether the rows were clipped
        at the robust maximum rather than at the chosen bound."""
        k = components.shape[0]
        rows = self._variance_rows(prepared)
        shrink = 1.0 if factors is None else float(np.min(factors))
        exact = basis_moments(rows, components, factors)
        sensitivity = math.sqrt(2.0) * (rows.data_norm / shrink) ** 2
        sigma = self.plan["variance"].multiplier * sensitivity
        packed = gaussian_release(exact, sigma, rng, sensitivity=sensitivity)
        prepared.spends.append(self._spend(
            "variance", "gaussian: packed VᵀGV and tr G (explained variance along the "
            "components)" + (", ‖(I − VVᵀ)GV‖_F and λ_max((I − VVᵀ)G(I − VVᵀ)) (the error "
                             "bar)" if exact.size > k * (k + 1) // 2 + 1 else "")
            + f" of the rows clipped at D = {rows.data_norm:.6g}"
            + ("" if factors is None else ", divided by the scale refinement's factors"),
            sensitivity, sigma))
        denom = self.denominator(prepared)
        extra = self.mean_perturbation(prepared) / denom / shrink**2
        return unpack_moments(packed / denom, k), sigma / denom, extra, rows is not prepared

    def _variance_rows(self, prepared: PreparedRows) -> PreparedRows:
        """The rows the "variance" part reads: where the bound selection chose below its
        :attr:`~privpca.pipeline.bound_selection.BoundChoice.reference`, the same rows
        clipped there (a view; spends shared), so that its bar covers the rotation clipping
        at the chosen bound causes and the variances are those of rows clipped above
        (almost) every norm. Rows above the reference are not covered: no release at a
        bound below them sees them. Else the statistic's rows."""
        choice = self.bound_choice(prepared)
        if choice is None or prepared.source is None or choice.reference <= prepared.data_norm:
            return prepared
        return replace(prepared, data_norm=choice.reference, stored_rows=None, n_clipped=0)

    def mean_perturbation(self, prepared: PreparedRows) -> float:
        """Spectral-norm bound (w.p. ≈ 95 %) of ``n(x̄ − μ̂)(x̄ − μ̂)ᵀ`` in the prepared rows' units.

        Centring on the private μ̂ instead of the sample mean x̄ adds that PSD rank-one term to
        the Gram matrix; its size follows from the mean's released noise level (0 when the
        mean is public or absent).
        """
        if "centre_error" in prepared.details:  # re-centred: what the re-centring leaves
            return float(prepared.details["centre_error"])
        if "mean_noise_scale" not in prepared.details:
            return 0.0
        sd = float(prepared.details["mean_noise_scale"])
        if prepared.scale is not None:
            sd /= float(np.min(prepared.scale))
        return mean_perturbation_bound(prepared.n_samples, sd, prepared.n_features)

    def bound_choice(self, prepared: PreparedRows) -> Any:
        """The bound selection's :class:`~privpca.pipeline.bound_selection.BoundChoice` when
        its pilots are releases over the statistic's own rows, centre and chosen bound (not
        with a held-out split, whose pilots saw other rows); else None."""
        choice = prepared.details.get("bound_choice")
        if choice is None or self.held_plan is not None or choice.chosen != prepared.data_norm:
            return None
        return choice

    def denominator(self, prepared: PreparedRows) -> float:
        """n − 1 for centred rows (scikit-learn's covariance), n for the second moment."""
        n = prepared.n_samples
        return float(n - 1 if prepared.centred and n > 1 else n)
