"""The pipeline's privacy record: each part's spend, the statistic's privacy map, the record
booked before the fit (:meth:`PrivacyRecording.planned_record`) and the one it settles on
(:meth:`PrivacyRecording.record`), composed by the accountant to the requested (ε, δ).

:class:`PrivacyRecording` is the part of :class:`~privpca.pipeline.release.ReleasePipeline` that
writes what was spent; the pipeline holds the plan and the settings.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import dp_accounting

from privpca.accounting.neighbouring import Neighbouring
from privpca.accounting.record import PrivacyRecord, PrivacySpend
from privpca.mechanisms.quantile import QUERY_ROUNDS
from privpca.pipeline.budget import (
    PART_NAMES,
    BudgetPlan,
    PartBudget,
)
from privpca.pipeline.pairing import PAIRING_NOTE
from privpca.pipeline.rows import (
    PreparedRows,
    Statistic,
)
from privpca.pipeline.settings import (
    QUANTILE_PARTS,
)

__all__ = ["PrivacyRecording"]


class PrivacyRecording:
    """The pipeline's spends and records (mixed into
    :class:`~privpca.pipeline.release.ReleasePipeline`, which sets these attributes)."""

    owner: Any
    plan: BudgetPlan
    held_plan: BudgetPlan | None
    statistic: Statistic
    n_samples: int
    epsilon: float
    delta: float
    model: str
    neighbouring: Neighbouring
    holdout_fraction: float | None
    pairing: bool

    if TYPE_CHECKING:  # defined by ReleasePipeline and its preparation
        @property
        def statistic_budget(self) -> PartBudget: ...

        @property
        def recentre(self) -> bool: ...

        @property
        def paper_mode(self) -> bool: ...

        def held_out_sizes(self) -> tuple[int, int] | None: ...

        def check_rows(self) -> None: ...

        def _part(self, name: str) -> PartBudget: ...

        def _all_parts(self) -> list[str]: ...

        def _pilot_spends(self, candidates: tuple[float, ...] | None
                          ) -> list[PrivacySpend]: ...

    def statistic_spend(
        self,
        data_norm: float,
        noise_scale: float,
        *,
        multiplier: float | None = None,
        epsilon: float | None = None,
        delta: float | None = None,
    ) -> PrivacySpend:
        """The statistic's privacy map: its spend for rows of norm ≤ ``data_norm`` and noise
        ``noise_scale``.

        The sensitivity is the statistic's own function of the bound; the event is the
        Gaussian mechanism at ``multiplier`` (default: the plan's σ/Δ), which must be the
        planned one for the record to settle. ``epsilon``/``delta`` override the plan's
        share where an estimator's own calibration certifies another (the papers' settings).
        """
        b = self.statistic_budget
        return PrivacySpend(
            mechanism=self.statistic.mechanism,
            epsilon=b.epsilon if epsilon is None else epsilon,
            delta=b.delta if delta is None else delta,
            sensitivity=self.statistic.sensitivity(data_norm),
            noise_scale=noise_scale,
            count=self.statistic.count,
            dp_event=dp_accounting.GaussianDpEvent(
                b.multiplier if multiplier is None else multiplier),
        )

    def _spend(self, part: str, mechanism: str, sensitivity: float, noise: float) -> PrivacySpend:
        """One part's spend. A quantile search lists its rounds: ``count`` releases of
        multiplier ``m·√rounds`` (each round's σ over its Δ), composing to the part's ``m``."""
        b = self._part(part)
        rounds = QUERY_ROUNDS if part in QUANTILE_PARTS else 1
        return PrivacySpend(
            mechanism=f"{part}: {mechanism}",
            epsilon=b.epsilon,
            delta=b.delta,
            sensitivity=float(sensitivity),
            noise_scale=float(noise),
            count=b.count * rounds,
            dp_event=dp_accounting.GaussianDpEvent(b.multiplier * math.sqrt(rounds))
            if b.gaussian else None,
        )

    def planned_record(
        self,
        *,
        epsilon: float | None = None,
        statistic_event: Any = None,
    ) -> PrivacyRecord:
        """The record booked before any data-dependent computation.

        It has every part's event; the final record (:meth:`record`: the released bounds and
        noise scales) replaces it when the fit completes. ``epsilon`` and ``statistic_event``
        override the plan where an estimator calibrates its statistic itself (classic
        calibration, a theorem's noise level), which needs a public bound.
        """
        self.check_rows()
        spends: list[PrivacySpend] = []
        for part in self._all_parts():
            if part == "bound_select":
                spends += self._pilot_spends(None)
            elif part != "statistic":
                spends.append(self._spend(part, "planned", math.nan, math.nan))
        stat = self._planned_statistic_spend()
        if statistic_event is not None:  # an estimator-specific calibration (paper setting)
            stat = replace(stat, dp_event=statistic_event)
        return self._record_from(spends, stat, data_norm=math.nan, n_clipped=0,
                                 notes="planned before the fit", epsilon=epsilon)

    def _planned_statistic_spend(self) -> PrivacySpend:
        b = self.plan["statistic"]
        return PrivacySpend(
            mechanism=f"statistic: {self.statistic.mechanism}",
            epsilon=b.epsilon,
            delta=b.delta,
            sensitivity=math.nan,
            noise_scale=math.nan,
            count=b.count,
            dp_event=dp_accounting.GaussianDpEvent(b.multiplier) if b.gaussian else None,
        )

    def record(
        self,
        prepared: PreparedRows,
        statistic_spend: PrivacySpend,
        *,
        calibration: str,
        notes: str = "",
        epsilon: float | None = None,
        delta: float | None = None,
    ) -> PrivacyRecord:
        """The final record: every part's spend, the certified total and the notes."""
        spend = replace(statistic_spend, mechanism=statistic_spend.mechanism
                        if statistic_spend.mechanism.startswith("statistic: ")
                        else f"statistic: {statistic_spend.mechanism}")
        choice = prepared.details.get("bound_choice")
        if choice is not None:
            notes = f"{notes} {choice.describe()}".strip()
        if self.pairing:
            notes = f"{notes} {PAIRING_NOTE}".strip()
        record = self._record_from(
            list(prepared.spends), spend, data_norm=prepared.data_norm,
            n_clipped=prepared.n_clipped, notes=notes, calibration=calibration,
            epsilon=epsilon, delta=delta,
        )
        return record

    def _split_note(self) -> str:
        """The notes' sentence on how the (ε, δ) was split (and on the held-out rows)."""
        if self.plan.statistic_gaussian:
            shares = ", ".join(f"{name} {p.weight:.3g}" for name, p in self.plan.parts.items())
            split = (
                f" Budget split (shares of the Gaussian budget 1/m², exact composition; "
                f"dp-accounting): {shares}; total noise multiplier "
                f"{self.plan.total_multiplier:.6g}."
            )
        else:  # a statistic outside the Gaussian split: basic composition
            stat = self.plan.parts["statistic"]
            shares = ", ".join(f"{name} {p.weight:.3g}" for name, p in self.plan.parts.items()
                               if name != "statistic")
            split = (
                f" Budget split: the preprocessing composes exactly (dp-accounting) to "
                f"(epsilon, delta) = ({self.plan.epsilon - stat.epsilon:.4g}, "
                f"{self.plan.delta - stat.delta:.3g}), shared as {shares} of its Gaussian "
                f"budget 1/m² (noise multiplier {self.plan.total_multiplier:.6g}); the "
                f"statistic takes the rest, ({stat.epsilon:.4g}, {stat.delta:.3g}), by basic "
                "composition."
            )
        if self.held_plan is not None:
            held = self.held_plan
            sizes = self.held_out_sizes()
            assert sizes is not None
            n_held = sizes[0]
            shares = ", ".join(f"{name} {p.weight:.3g}" for name, p in held.parts.items())
            split += (
                f" Held-out preprocessing (holdout_fraction={self.holdout_fraction:g}): "
                f"{', '.join(held.parts)} were released from {n_held} of the "
                f"{self.n_samples} rows (a uniformly random set of rows drawn secretly from "
                f"the estimator's own generator, whatever the row order) at the whole "
                f"(epsilon, delta), split {shares} (total "
                f"noise multiplier {held.total_multiplier:.6g}"
                + "); the statistic read only the other "
                f"{self.n_samples - n_held} rows at the whole (epsilon, delta): each "
                "record enters one of the two (parallel composition). A ledger composes "
                "this fit as its (epsilon, delta), not as its parts in sequence."
            )
            if self.recentre:
                split += (" The statistic's pass also released the sum of its clipped rows "
                          "(the centre part, sensitivity 2D): the statistic is re-centred "
                          "on its own rows' private mean (post-processing), which is "
                          "mean_.")
        return split

    def _record_from(
        self,
        pre: list[PrivacySpend],
        statistic_spend: PrivacySpend,
        *,
        data_norm: float,
        n_clipped: int,
        notes: str,
        calibration: str = "analytic",
        epsilon: float | None = None,
        delta: float | None = None,
    ) -> PrivacyRecord:
        rank = {name: i for i, name in enumerate(PART_NAMES)}
        spends = sorted([*pre, statistic_spend],
                        key=lambda s: rank.get(s.mechanism.split(":")[0], len(rank)))
        split = "" if self.paper_mode else self._split_note()
        return PrivacyRecord(
            epsilon=self.epsilon if epsilon is None else float(epsilon),
            delta=self.delta if delta is None else float(delta),
            model=self.model,
            neighbouring=self.neighbouring.description,
            sensitivity=statistic_spend.sensitivity,
            noise_scale=statistic_spend.noise_scale,
            calibration=calibration,
            data_norm=float(data_norm),
            # n is public under replace-one; under add/remove-one it is a private count.
            n_samples=self.n_samples if self.neighbouring.n_public else None,
            spends=tuple(spends),
            target_epsilon=self.epsilon,
            notes=(notes + split).strip(),
        )
