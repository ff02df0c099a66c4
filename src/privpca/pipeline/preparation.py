"""Preparing the rows for a statistic: the private mean (two rounds), the private scales, the
private bound (with the bound selection's ladder) and the clipping, for an in-memory array, a
streamed :class:`~privpca.streaming.RowSource` or the held-out layout.

:class:`RowPreparation` is the part of :class:`~privpca.pipeline.release.ReleasePipeline` that
reads the table; the pipeline holds the plan, the settings and the record. Every release here
is a Gaussian mechanism of the plan's parts (:mod:`privpca.pipeline.budget`), drawn through
:mod:`privpca.mechanisms`; its spend is listed as it is made.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, Any

import dp_accounting
import numpy as np
from numpy.typing import NDArray

from privpca._validation import (
    clip_rows,
)
from privpca.accounting.record import PrivacySpend
from privpca.mechanisms.quantile import GRID_BASE, GRID_RANGE, QUERY_ROUNDS, PrivateQuantile
from privpca.pipeline.bound_selection import (
    choose_bound,
    shell_sigmas,
)
from privpca.pipeline.budget import (
    BudgetPlan,
    PartBudget,
)
from privpca.pipeline.pairing import pair_differences
from privpca.pipeline.preprocessing import (
    SCALE_LEVEL_Z,
    SCALE_LEVELS,
    MeanRelease,
    ScaleRelease,
    choose_levels,
    combine_scales,
    norm_bin_counts,
    private_mean_from_sum,
    private_norm_bound_from_counts,
    private_scale,
    sq_norms,
)
from privpca.pipeline.rows import (
    PilotGrams,
    PreparedRows,
    Statistic,
    Table,
)
from privpca.pipeline.settings import BOUND_QUANTILES, DEFAULT_NORM_QUANTILE, SCALE_QUANTILE
from privpca.streaming import reductions
from privpca.streaming.selection import drop_rows, take_rows
from privpca.streaming.sources import ArraySource

__all__ = ["RowPreparation"]


class RowPreparation:
    """The pipeline's passes over the table (mixed into
    :class:`~privpca.pipeline.release.ReleasePipeline`, which sets these attributes)."""

    owner: Any
    plan: BudgetPlan
    held_plan: BudgetPlan | None
    statistic: Statistic
    centering: Any
    scale: Any
    data_norm: Any
    holdout_fraction: float | None
    pairing: bool

    if TYPE_CHECKING:  # defined by ReleasePipeline (the plan's side)
        def _part(self, name: str) -> PartBudget: ...

        def _spend(self, part: str, mechanism: str, sensitivity: float,
                   noise: float) -> PrivacySpend: ...

        def _search(self, part: str, b: PartBudget, n: int) -> PrivateQuantile: ...

        def held_out_split(self, rng: np.random.Generator) -> Any: ...

    def prepare(
        self, X: NDArray[np.float64], rng: np.random.Generator, *,
        sq: NDArray[np.float64] | None = None, paired: bool = False,
    ) -> PreparedRows:
        """Centre, scale, bound and clip ``X`` (never modified) with the planned budget.

        With :attr:`pairing` the rows are first replaced by their pair differences
        (:mod:`privpca.pipeline.pairing`), unless ``paired`` (``X`` is them already).

        ``sq`` are the squared row norms of ``X`` when the caller has them (computed once,
        before the charge, as the non-finite check); ``None``: computed here if needed (the
        centred, privately bounded path never needs them).
        """

        owner = self.owner
        spends: list[PrivacySpend] = []
        details: dict[str, Any] = {}
        if self.pairing and not paired:  # wide table: pair differences (pipeline.pairing)
            X, sq = pair_differences(X, rng), None
        mean, scale = self._centre_and_scale(ArraySource(X, validated=True), rng, spends,
                                             details)

        lazy = (mean is not None or scale is not None) and isinstance(self.data_norm, str)
        rows: NDArray[np.float64] | None
        if lazy:
            # Only the bound now (one compiled pass of the centred norms' histogram); the
            # statistic forms the rows it needs (one blocked pass). No exact count is kept:
            # with a private bound nothing about the clipping is reported but its estimate.

            source = ArraySource(X, validated=True)
            D = self._private_bound(
                partial(reductions.norm_counts, source, mean, scale=scale), X.shape[0], rng,
                spends, details, centred=mean is not None,
                grams_at=PilotGrams(source, mean, scale, same_rows=True), scale=scale)
            return PreparedRows(None, float(D), mean, scale, 0, spends, details, source=X)
        if mean is None and scale is None:
            rows, row_sq = X, (sq_norms(X) if sq is None else sq)
        else:
            rows = X - mean if mean is not None else X.copy()
            if scale is not None:
                rows /= scale
            row_sq = sq_norms(rows)
        if isinstance(self.data_norm, str):
            norms = np.sqrt(row_sq)
            D = self._private_bound(partial(norm_bin_counts, norms), len(norms), rng, spends,
                                    details, centred=mean is not None,
                                    grams_at=PilotGrams(ArraySource(rows, validated=True),
                                                        None, None, same_rows=False),
                                    scale=scale)
            over = norms > D
            n_clipped = int(over.sum())
            if n_clipped:
                if rows is X:
                    rows = X.copy()
                rows[over] *= (D / norms[over])[:, None]
        else:
            D = float(self.data_norm)
            assert rows is not None
            rows, n_clipped = clip_rows(rows, D, owner=owner, norms=np.sqrt(row_sq),
                                        copy=rows is X)
        # With a private bound the table stays the source: a later part may clip it elsewhere.
        return PreparedRows(rows, float(D), mean, scale, n_clipped, spends, details,
                            source=X if isinstance(self.data_norm, str) else None)

    def _private_mean(
        self,
        source: Any,
        rng: np.random.Generator,
        spends: list[PrivacySpend],
        details: dict[str, Any],
        scale: NDArray[np.float64] | None = None,
    ) -> NDArray[np.float64]:
        """Two rounds: a mean clipped at a quantile of ‖x‖, then the mean of the residuals.

        With ``scale`` (public scales, or the released per-feature units of
        :meth:`_centre_and_scale`) the rounds run on ``x/scale``, the units the statistic
        sees: on the raw rows a column in large units would set the mean's sensitivity, and
        its noise, divided by the small columns' scales, would swamp them (an outside tester:
        46 SDs off with one column in units 1 000 times the others). Returned in raw units.

        The first round's noise scales with ‖μ‖ (the raw rows' norm), which drowns features
        with a large mean and a small spread (a year, a timestamp); the refinement's scales
        with the spread around the first estimate. Each round is one pass over the table
        (``source``, a :class:`~privpca.streaming.RowSource`): the rows binned by their norm
        around the current centre give the histogram of the private bound R and, once R is
        released, the exact clipped sum (:class:`~privpca.pipeline.preprocessing.BinnedSums`).
        """

        n = source.n_samples
        mean = np.zeros(source.n_features)
        for bound_part, mean_part in (("bound_raw", "mean"), ("bound_residual", "mean_refine")):
            b = self._part(bound_part)
            centre = None if bound_part == "bound_raw" else mean
            seen: dict[str, Any] = {}

            def counter(base: float, centre: NDArray[np.float64] | None = centre,
                        seen: dict[str, Any] = seen) -> tuple[Any, Any]:
                seen["base"] = base
                seen["sums"] = sums = reductions.binned_norm_sums(source, centre, base,
                                                                  scale=scale)
                return sums.index, sums.counts

            (R,), _ = private_norm_bound_from_counts(
                counter, n, b.multiplier, DEFAULT_NORM_QUANTILE, rng,
                what="row norms (to clip the private mean)" if centre is None
                else "residuals from the first private mean")
            spends.append(self._mean_bound_spend(bound_part))
            m = private_mean_from_sum(seen["sums"].clipped_sum(R, seen["base"]), n, R,
                                      self._part(mean_part).multiplier, rng)
            spends.append(self._mean_spend(mean_part, m, scaled=scale is not None))
            mean = mean + m.mean
            details[f"{mean_part}_bound"] = R
            # Its consumers divide by min(scale) to get the scaled rows' units.
            details["mean_noise_scale"] = m.noise_scale / n * (
                1.0 if scale is None else float(np.min(scale)))
        return mean if scale is None else mean * scale

    def _public_scale(self) -> NDArray[np.float64] | None:
        """The public scales (an array), or None (no scales, or private ones)."""
        if isinstance(self.scale, bool | np.bool_):
            return None
        return np.asarray(self.scale, dtype=np.float64)

    def _centre_and_scale(self, source: Any, rng: np.random.Generator,
                          spends: list[PrivacySpend], details: dict[str, Any],
                          ) -> tuple[NDArray[np.float64] | None, NDArray[np.float64] | None]:
        """The centre and the scales the statistic's rows are formed with (raw units).

        The private mean runs in the scales' units. Public scales: as given. Private scales
        with a private centre: the first scale round runs around 0 and gives each feature's
        unit (:func:`_units`), the mean runs on ``x/units``, and the second round, around that
        mean, gives the scales and refines the centre per feature. On the raw rows a column
        in units 10⁵ times the others set the mean's sensitivity, and the per-feature rounds
        could not bring the small columns' centres back from 10⁵ of their SDs (an outside
        tester: distance 0.66–1.69, scales up to 23 000× too large; now 0.10 at every unit
        from 10⁻⁴ to 10⁶). The scales then come from one round, not two combined: the first
        is about 0."""
        public = self._public_scale()
        if self.scale is True and isinstance(self.centering, str):
            bb, bs = self._part("scale_bound"), self._part("scale")
            first = private_scale(source, np.zeros(source.n_features), bb.multiplier,
                                  bs.multiplier, SCALE_QUANTILE, rng, ddof=0)
            centre = self._private_mean(source, rng, spends, details, _units(first))
            second = private_scale(source, centre, bb.multiplier, bs.multiplier,
                                   SCALE_QUANTILE, rng)
            self._scale_spends(spends, second)
            return second.mean, second.scale
        mean: NDArray[np.float64] | None = None
        if isinstance(self.centering, str):
            mean = self._private_mean(source, rng, spends, details, public)
        elif self.centering is not None:
            mean = np.asarray(self.centering, dtype=np.float64)
        if self.scale is True:
            return self._private_scale(source, mean, rng, spends)
        return mean, public

    def _private_scale(
        self,
        source: Any,
        mean: NDArray[np.float64] | None,
        rng: np.random.Generator,
        spends: list[PrivacySpend],
    ) -> tuple[NDArray[np.float64] | None, NDArray[np.float64]]:
        """The "scale_bound" and "scale" parts: two rounds of per-feature private means and
        standard deviations (:func:`~privpca.pipeline.preprocessing.private_scale`), the
        second re-bounded around the first's refined means; the scales combine both rounds'
        second moments (:func:`~privpca.pipeline.preprocessing.combine_scales`,
        post-processing). Returns ``(mean, scale)``."""
        p = source.n_features
        centre = np.zeros(p) if mean is None else mean
        bb, bs = self._part("scale_bound"), self._part("scale")
        rounds: list[ScaleRelease] = []
        for _ in range(bs.count):  # round 2 re-bounds around round 1's refined means
            s = private_scale(source, centre, bb.multiplier, bs.multiplier,
                              SCALE_QUANTILE, rng, ddof=1 if mean is not None else 0)
            rounds.append(s)
            if mean is not None:
                centre = s.mean
        self._scale_spends(spends, s)
        return (None if mean is None else centre), combine_scales(rounds)

    def _scale_spends(self, spends: list[PrivacySpend], s: ScaleRelease) -> None:
        """The "scale_bound" and "scale" parts' spends (two rounds each)."""
        p = len(s.scale)
        spends.append(self._spend(
            "scale_bound", f"noisy bisections of |x_j − μ_j| ({p} features, quantile "
            f"{SCALE_QUANTILE:g}, log grid, {QUERY_ROUNDS} rounds of counts each), two rounds",
            math.sqrt(p),
            math.sqrt(p * QUERY_ROUNDS) * self._part("scale_bound").multiplier))
        spends.append(self._spend(
            "scale", f"gaussian: Σu_j and, at each of {len(SCALE_LEVELS)} levels K, "
            "Σw_jK, u_j = clip((x_j − μ_j)/b_j, ±1), w_jK = min(|x_j − μ_j|/(K·b_j), 1)², "
            f"per feature (replace-one: Δ = √((4 + {len(SCALE_LEVELS)})·{p})), two rounds",
            s.sensitivity, s.noise_scale))

    def _private_bound(
        self,
        counter: Callable[[float], Any],
        n: int,
        rng: np.random.Generator,
        spends: list[PrivacySpend],
        details: dict[str, Any],
        *,
        centred: bool,
        grams_at: PilotGrams | None = None,
        scale: NDArray[np.float64] | None = None,
    ) -> float:
        """The "bound" part: the private quantile D of the norms the statistic will see,
        from ``counter(base)``, their exact counts on the log grid. With the "bound_select"
        part, D is one of two candidates read off that histogram, chosen by
        :func:`~privpca.pipeline.bound_selection.choose_bound` from two pilot Grams
        ``grams_at((D_low, D_high))`` (one pass; the exact Gram at the chosen bound is kept
        for the statistic in ``details["pilot_grams"]``)."""
        b = self._part("bound")
        selects = self._selects_bound()
        values, rel = private_norm_bound_from_counts(
            counter, n, b.multiplier, BOUND_QUANTILES if selects else DEFAULT_NORM_QUANTILE,
            rng, what="centred row norms" if centred else "row norms")
        spends.append(self._bound_spend())
        D = float(values[0])
        details["clipped_estimate"] = float(rel.above[0, 0])
        if selects:
            assert grams_at is not None
            # The median read inside its last step; the robust maximum (all but ~4.5σ rows).
            low, high = float(rel.interpolated()[0, 0]), float(values[1])
            stat = self.plan["statistic"]
            own = self.statistic.noise_multiplier
            final = (stat.multiplier if stat.gaussian else own() if own is not None
                     else self.plan.total_multiplier)
            # The private centre's noise per coordinate, in the scaled rows' units.
            centre_sd = float(details.get("mean_noise_scale", 0.0)) / (
                1.0 if scale is None else float(np.min(scale)))
            choice = choose_bound(grams_at, self.statistic.subspace_rank, low, high,
                                  self._part("bound_select").multiplier, final, rng,
                                  centring=n * centre_sd**2)
            spends += self._pilot_spends(choice.candidates)
            D = choice.chosen
            # The search's estimates of the rows above the median and the robust maximum;
            # a bound between them clips fewer than the first (no further release).
            details["clipped_estimate"] = float(rel.above[0, 0] if D == choice.low
                                                else rel.above[1, 0])
            details["bound_choice"] = choice
            details["pilot_grams"] = grams_at
        return float(D)

    def _pilot_spends(self, candidates: tuple[float, ...] | None) -> list[PrivacySpend]:
        """The "bound_select" part's spend: one Gaussian release of the ladder's normalised
        shells (:func:`~privpca.pipeline.bound_selection.choose_bound`), sensitivity
        ``√(2L)`` for L candidates; its multiplier is the plan's (public), so the planned
        record (``candidates=None``: L not yet known, NaN) books the same event."""
        b = self._part("bound_select")
        if candidates is None:
            what, sensitivity, sigma = "planned (pilot Grams of the candidate bounds)", \
                math.nan, math.nan
        else:
            sensitivity = math.sqrt(2.0 * len(candidates))
            sigma = shell_sigmas(b.multiplier, candidates)[0]
            what = (f"gaussian: pilot Gram matrices at {len(candidates)} candidate bounds "
                    f"D = {', '.join(f'{c:.6g}' for c in candidates)}, released as "
                    "normalised shells (Σ of clip_c(y)clip_c(y)ᵀ between consecutive "
                    f"candidates, over c² differences; noise std {sigma:.6g}); their top-k "
                    "subspaces choose D")
        return [PrivacySpend(mechanism=f"bound_select: {what}", epsilon=b.epsilon,
                             delta=b.delta, sensitivity=float(sensitivity),
                             noise_scale=float(sigma), count=1,
                             dp_event=dp_accounting.GaussianDpEvent(b.multiplier))]

    def _selects_bound(self) -> bool:
        """Whether data_norm='auto' chooses between two candidates (the "bound_select" part)."""
        return "bound_select" in self.plan or (self.held_plan is not None
                                               and "bound_select" in self.held_plan)

    def _mean_bound_spend(self, part: str) -> PrivacySpend:
        search = self._search(part, self._part(part), 1)
        return self._spend(
            part, "noisy bisection of " + ("‖x‖" if part == "bound_raw" else "‖x − μ̂₁‖")
            + f" on a log grid (private quantile {search.quantiles[0]:g}, {QUERY_ROUNDS} "
            "rounds of counts)", search.sensitivity, search.noise)

    def _mean_spend(self, part: str, m: MeanRelease, *, scaled: bool = False) -> PrivacySpend:
        x = "x/s" if scaled else "x"
        return self._spend(
            part, f"gaussian: Σ clip_R({x}" + ("" if part == "mean" else " − μ̂₁")
            + ") (private mean" + ("; s: the public scales or released per-feature units"
                                    if scaled else "") + ")", m.sensitivity, m.noise_scale)

    def _bound_spend(self) -> PrivacySpend:
        search = self._search("bound", self._part("bound"), 1)
        return self._spend("bound", "noisy bisection of the row norms seen by the statistic "
                           f"(private quantiles {', '.join(f'{q:g}' for q in search.quantiles)}"
                           f", {QUERY_ROUNDS} rounds of counts)", search.sensitivity,
                           search.noise)

    def prepare_table(self, table: Table, rng: np.random.Generator) -> PreparedRows:
        """:meth:`prepare` or :meth:`prepare_streamed`, whichever the table needs; with a
        hold-out (:attr:`holdout_fraction`), :meth:`prepare_held_out`."""
        if self.holdout_fraction is not None:
            return self.prepare_held_out(table, rng)
        if table.streamed:
            return self.prepare_streamed(table.source, rng)
        assert table.X is not None and table.sq is not None
        return self.prepare(table.X, rng, sq=table.sq)

    def prepare_held_out(self, table: Table, rng: np.random.Generator) -> PreparedRows:
        """The preprocessing from held-out rows, the statistic's rows the rest.

        The held-out rows are a uniformly random ``n_held``-subset of the rows drawn from
        ``rng`` (the estimator's own stream, never the data; kept secret), gathered into
        memory in one pass (:func:`~privpca.streaming.selection.take_rows`); the mean, scales
        and bound are released from them with the held-out plan (the whole (ε, δ)), and the
        returned rows are the other rows, read block by block with the held-out ones removed
        (:func:`~privpca.streaming.selection.drop_rows`). Each record enters either the
        preprocessing or the statistic, never both, and which one does not depend on the row
        order: parallel composition (:mod:`privpca.streaming.holdout`), so the statistic's
        own plan gets the whole (ε, δ) too.
        """

        source = table.source if table.streamed else ArraySource(table.X, validated=True)
        split = self.held_out_split(rng)
        prepared = self.prepare_streamed(take_rows(source, split.held), rng)
        prepared.source = drop_rows(source, split.held)
        prepared.details.pop("pilot_grams", None)  # the pilots saw the held-out rows
        return prepared

    # ------------------------------------------------------------------ streamed tables
    def prepare_streamed(self, source: Any, rng: np.random.Generator) -> PreparedRows:
        """:meth:`prepare` for a :class:`~privpca.streaming.RowSource`: the same mechanisms,
        budget and draws, from block reductions (one pass per released statistic: norm counts,
        clipped sums, per-feature counts and moments), with the rows never formed: the statistic
        reduces a Gram over the source (:meth:`PreparedRows.gram`).
        """

        if self.pairing:  # wide table: the pair differences, gathered (pipeline.pairing)
            return self.prepare(pair_differences(source, rng), rng, paired=True)
        spends: list[PrivacySpend] = []
        details: dict[str, Any] = {}
        n = source.n_samples
        mean, scale = self._centre_and_scale(source, rng, spends, details)
        shift = mean if scale is None else (np.zeros(source.n_features) if mean is None
                                            else mean)
        if isinstance(self.data_norm, str):
            D = self._private_bound(partial(reductions.norm_counts, source, shift, scale=scale),
                                    n, rng, spends, details, centred=mean is not None,
                                    grams_at=PilotGrams(source, mean, scale, same_rows=True),
                                    scale=scale)
        else:
            D = float(self.data_norm)
        # n_clipped is counted by the statistic's own pass (PreparedRows.gram).
        return PreparedRows(None, float(D), mean, scale, 0, spends, details, source=source)


def _units(first: ScaleRelease) -> NDArray[np.float64]:
    """Each feature's unit for the private mean, from a scale round around 0: its scale where
    the round saw its spread (the moment stopped growing below the top level); else, where
    its non-zero values are fewer than the search's noise in rows and the bound fell in the
    zeros, the largest unit seen (too large a unit costs that feature's mean noise, which the
    next round refines; too small a one would blow its rows up)."""
    assert first.moments is not None and first.moment_noise is not None
    chosen = choose_levels(first.moments, first.moment_noise, SCALE_LEVEL_Z)
    # A bisection that ended at the grid's lowest edge found no spread: the bound is in the
    # zeros.
    seen = (chosen < len(SCALE_LEVELS) - 1) & (first.bounds > GRID_RANGE[0] * GRID_BASE)
    return np.where(seen, first.scale, first.scale[seen].max() if seen.any() else 1.0)


