"""A provider's privacy accounting: the spends of the parts it released and its record."""

from __future__ import annotations

import math
from typing import Any

import dp_accounting
import numpy as np
from numpy.typing import NDArray

from privpca._config import fit_noise_mode
from privpca.accounting.record import PrivacyRecord, PrivacySpend
from privpca.federated.protocol.agreement import MEAN_PARTS
from privpca.federated.protocol.counter import ReleaseCounter
from privpca.federated.protocol.privacy import (
    _POST_PROCESSING,
    STATISTIC_MECHANISM,
    provider_privacy_record,
)
from privpca.mechanisms.randomness import noise_mode_of
from privpca.pipeline.budget import BudgetPlan
from privpca.pipeline.release import ReleasePipeline
from privpca.pipeline.rows import PreparedRows


class ProviderPrivacy:
    """The privacy methods of :class:`~privpca.federated.protocol.provider.ProviderState`.

    They read the provider's state (the attributes below) and release nothing.
    """

    provider_id: str
    n_samples: int
    n_features: int
    n_components: int
    n_rounds: int
    epsilon: float
    delta: float
    noise_seed: int | None
    noise_multiplier: float
    data_norm_: float
    data_norm: float | str
    variance_bound: float
    pilot_candidates: list[float] | None
    mean_: NDArray[np.float64] | None
    scale: Any
    clipped_estimate: float
    counter: ReleaseCounter
    plan: BudgetPlan | None
    _run: ReleasePipeline

    def spends(self) -> tuple[list[PrivacySpend], PrivacySpend]:
        """The spends of the parts released so far (preprocessing, variance) and the
        statistic's spend (its planned T releases; NaN sensitivity until the bound is known).
        """
        if self.plan is None:
            raise ValueError("the papers' setting has no pipeline parts")
        run = self._run
        counts = self.counter.counts()
        spends: list[PrivacySpend] = []
        secure = getattr(self, "secure", None) is not None
        who = "on the union, opened by secure aggregation" if secure else "each provider its own"
        noise = "a share of one central noise" if secure else "each provider its own noise"
        x = "x" if getattr(self, "_units", None) is None else "x/s"  # s: the public scales
        for r, (bound_part, sum_part) in enumerate(MEAN_PARTS):
            if counts.get("mean", 0) <= r:
                break
            R = float(self.counter.recall(bound_part, math.nan))
            search = run._search(bound_part, self.plan[bound_part], self.n_samples)
            spends.append(run._spend(
                bound_part, f"noisy bisection of ‖{x} − c‖ on a log grid (private quantile), "
                + who, search.sensitivity, search.noise))
            spends.append(run._spend(
                sum_part, f"gaussian: Σ clip_R({x} − c), {noise} (private mean)", 2.0 * R,
                2.0 * R * self.plan[sum_part].multiplier))
        if counts.get("bound", 0) or (secure and isinstance(self.data_norm, str)
                                      and getattr(self, "prepared", False)):
            search = run._search("bound", self.plan["bound"], self.n_samples)
            spends.append(run._spend(
                "bound", "noisy bisection of the centred row norms (private quantiles "
                f"{', '.join(f'{q:g}' for q in search.quantiles)}), " + who,
                search.sensitivity, search.noise))
        if counts.get("bound_select", 0):
            spends += run._pilot_spends(tuple(self.pilot_candidates or ()))
        if counts.get("variance", 0):
            bound = self.variance_bound
            sens = math.sqrt(2.0) * bound**2
            spends.append(run._spend(
                "variance", "gaussian: packed QᵀXᵢᵀXᵢQ and ‖Xᵢ‖²_F (explained variance)"
                + ("" if bound == self.data_norm_ else
                   f", of the rows clipped at the ladder's reference {bound:.6g}"),
                sens, sens * self.plan["variance"].multiplier))
        stat = self.plan["statistic"]
        statistic = PrivacySpend(
            mechanism=f"statistic: {STATISTIC_MECHANISM}",
            epsilon=stat.epsilon,
            delta=stat.delta,
            sensitivity=getattr(self, "_raw_sensitivity", math.nan),
            noise_scale=self.noise_multiplier * getattr(self, "_raw_sensitivity", math.nan),
            count=stat.count,
            dp_event=dp_accounting.GaussianDpEvent(stat.multiplier),
        )
        return spends, statistic

    def privacy_record(self, releases: int | None = None, *,
                       disclose_clipped: bool = True) -> PrivacyRecord:
        """This provider's guarantee (default: after its agreed releases).

        ``releases`` (papers' setting) is the number of power answers made; outside it the
        record lists the parts released so far and totals the agreed (ε, δ).
        No record carries the exact number of clipped rows (a count of the provider's data);
        ``disclose_clipped`` is kept for compatibility and has no effect.
        """
        del disclose_clipped
        with fit_noise_mode(noise_mode_of(self.noise_seed)):  # how its noise was drawn
            return self._privacy_record(releases)

    def _privacy_record(self, releases: int | None) -> PrivacyRecord:
        if self.plan is None:
            count = self.n_rounds if releases is None else int(releases)
            return provider_privacy_record(
                epsilon=self.epsilon, delta=self.delta, n_rounds=self.n_rounds,
                n_components=self.n_components, data_norm=self.data_norm_,
                n_samples=self.n_samples, n_clipped=0, releases=count,
            )
        pre, statistic = self.spends()
        made = self.counter.used_by("query")
        notes = (
            f"Provider {self.provider_id}: every release is Gaussian, split from its own "
            f"({self.epsilon:g}, {self.delta:g}) by its own budget plan (exact composition), "
            f"{self.n_rounds} power answers with noise multiplier {self.noise_multiplier:.6g}"
            f" per answer. {_POST_PROCESSING}"
        )
        if made < self.n_rounds:
            notes += f" Only {made} of the {self.n_rounds} agreed power answers were made."
        if not math.isnan(self.clipped_estimate):
            notes += (f" Private estimate of its clipped rows: {self.clipped_estimate:.0f}.")
        prepared = PreparedRows(np.empty((0, self.n_features)), self.data_norm_, self.mean_,
                                None if isinstance(self.scale, bool | np.bool_)
                                else np.asarray(self.scale), 0, list(pre))
        return self._run.record(
            prepared, statistic,
            calibration="analytic (exact Gaussian composition of every part, dp-accounting)",
            notes=notes,
        )
