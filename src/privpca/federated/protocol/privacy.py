"""The providers' privacy accounting: the papers' noise multiplier and scale, the records.

:func:`dpspca_noise_multiplier` calibrates the T power answers of the papers' setting,
:func:`paper_noise_scale` is Ge et al.'s ω(ε, δ) (for comparison only),
:func:`provider_privacy_record` is a provider's record in the papers' setting and
:func:`merge_provider_spends` lists each part once across providers (parallel composition),
:func:`local_noise_pipeline` is the plan a local-noise run books (its providers' own plans).
The analysis is in :mod:`privpca.federated.protocol`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import dp_accounting

from privpca.accounting.composition import gaussian_noise_multiplier_for_composition
from privpca.accounting.neighbouring import Neighbouring
from privpca.accounting.record import PrivacyRecord, PrivacySpend
from privpca.mechanisms.gaussian import certified_epsilon
from privpca.mechanisms.sensitivity import power_sensitivity
from privpca.pipeline.budget import BudgetPlan
from privpca.pipeline.preprocessing import BoundNotFoundError

STATISTIC_MECHANISM = "gaussian: XᵢᵀXᵢQ per round, each provider its own noise (Frobenius " \
    "sensitivity)"


def paper_noise_scale(epsilon: float, delta: float, n_rounds: int) -> float:
    """Ge et al.'s ``ω(ε, δ) = (2T/ε)·√(2 ln(2T/δ))`` (std of G; for comparison only)."""
    return 2.0 * n_rounds / epsilon * math.sqrt(2.0 * math.log(2.0 * n_rounds / delta))


_MULTIPLIERS: dict[tuple[float, float, int], float] = {}


def dpspca_noise_multiplier(epsilon: float, delta: float, n_rounds: int) -> float:
    """``m = σ/Δ`` such that ``n_rounds`` Gaussian releases compose to (ε, δ) (cached).

    The multiplier of the papers' setting, where the T power answers are the only releases.
    """
    key = (float(epsilon), float(delta), int(n_rounds))
    if key not in _MULTIPLIERS:
        _MULTIPLIERS[key] = gaussian_noise_multiplier_for_composition(*key)
    return _MULTIPLIERS[key]


_POST_PROCESSING = (
    "Q⁽⁰⁾ is data-independent (free); the server's aggregation, thresholding, QR and "
    "rotation and the output are post-processing. The untrusted server sees only noised "
    "releases, the released bounds and the public nᵢ; the providers' data are disjoint, so "
    "every record is protected at this level (parallel composition)."
)


def provider_privacy_record(
    *,
    epsilon: float,
    delta: float,
    n_rounds: int,
    n_components: int,
    data_norm: float,
    n_samples: int,
    n_clipped: int = 0,
    releases: int | None = None,
    n_providers: int = 1,
    notes: str = "",
) -> PrivacyRecord:
    """The :class:`PrivacyRecord` of a provider in the papers' setting that made ``releases``
    (≤ T) answers. ``n_clipped`` is accepted and ignored: no record carries that count."""
    del n_clipped
    count = n_rounds if releases is None else int(releases)
    m = dpspca_noise_multiplier(epsilon, delta, n_rounds)
    raw = power_sensitivity(data_norm, n_components)
    spend = PrivacySpend(
        mechanism="gaussian: Σ̂ᵢQ per round, each provider its own noise (Frobenius sensitivity)",
        epsilon=certified_epsilon(m, delta),
        delta=delta,
        sensitivity=raw,
        noise_scale=m * raw,
        count=max(count, 1),
        dp_event=dp_accounting.GaussianDpEvent(m),
    )
    omega = paper_noise_scale(epsilon, delta, n_rounds)
    omega_eps = certified_epsilon(omega / math.sqrt(n_rounds), delta, raw)
    text = (
        f"Each of {n_providers} provider(s) answers at most T={n_rounds} queries "
        f"Hᵢ = Σ̂ᵢQ + Gᵢ/nᵢ with its own Gᵢ ~ N(0, (m·Δ)²), Δ = {raw:.4g} (sensitivity of XᵢᵀXᵢQ "
        f"for orthonormal Q, replace one record), m = {m:.6g} so that T releases compose to "
        f"({epsilon:g}, {delta:g}) by dp-accounting (parallel composition across providers: "
        "every record is protected at this level). Q⁽⁰⁾ is data-independent (free); the server's "
        "thresholding, QR and the output are post-processing. The untrusted server sees only "
        "noised answers and the public nᵢ. For comparison the paper's ω(ε, δ) = "
        f"(2T/ε)√(2 ln(2T/δ)) = {omega:.4g} (std of G) would certify epsilon = {omega_eps:.4g} "
        "at this delta under this analysis."
    )
    if releases is not None and count < n_rounds:
        text += f" Only {count} of the {n_rounds} agreed releases were made."
    if notes:
        text += " " + notes
    spend_record = PrivacyRecord.from_spends(
        (spend,),
        delta,
        model="distributed",
        neighbouring=Neighbouring.DISTRIBUTED_REPLACE_ONE.description,
        sensitivity=raw / max(n_samples, 1),
        noise_scale=m * raw / max(n_samples, 1),
        calibration="analytic (T-fold Gaussian composition, dp-accounting)",
        data_norm=data_norm,
        n_samples=int(n_samples),
        target_epsilon=epsilon,
        notes=text,
    )
    return spend_record


def merge_provider_spends(per_provider: Sequence[Sequence[PrivacySpend]]) -> list[PrivacySpend]:
    """One spend per part across providers: the same plan, the largest sensitivity shown.

    Every provider runs the same plan (the same multipliers) on its own data; by parallel
    composition the union's guarantee is one provider's, so each part is listed once (its
    event composes correctly), with the largest sensitivity and noise of any provider.
    """
    merged: dict[str, PrivacySpend] = {}
    for spends in per_provider:
        for s in spends:
            part = s.mechanism.split(":")[0]
            best = merged.get(part)
            if best is None or (s.sensitivity > best.sensitivity):
                merged[part] = s
    return [
        PrivacySpend(
            mechanism=s.mechanism + " (largest provider's sensitivity and noise shown)"
            if len(per_provider) > 1 and not s.mechanism.startswith("statistic") else s.mechanism,
            epsilon=s.epsilon, delta=s.delta, sensitivity=s.sensitivity,
            noise_scale=s.noise_scale, count=s.count, dp_event=s.dp_event, tail=s.tail,
        )
        for s in merged.values()
    ]


def local_noise_pipeline(owner: Any, settings: Any, sizes: Sequence[int], ids: Sequence[str],
                         n_features: int, n_components: int, n_rounds: int) -> Any:
    """The pipeline a local-noise DPS-PCA books: its smallest provider's, after refusing
    (before anything is booked) any provider with too few rows for its own plan.

    Each provider plans over its own public nᵢ (:class:`ProviderState`, here as on Flower),
    and a small nᵢ raises the quantile searches' shares, so providers of different sizes may
    split (ε, δ) differently. Every split gives its parts shares of one Gaussian budget
    ``1/m²`` that sum to 1 (m = m(ε, δ)): each provider's releases compose to the same single
    Gaussian mechanism, exactly (ε, δ). Each record is in one provider (parallel composition),
    so any provider's plan states every record's guarantee and composes on a ledger exactly as
    the others'; the smallest provider's is the one booked (a function of the public nᵢ only).
    """
    runs: dict[int, Any] = {}
    for n, pid in sorted(zip(sizes, ids, strict=True), key=lambda pair: pair[0]):
        if n in runs:
            continue
        run = dpspca_pipeline(owner, settings, n, n_features, n_components, n_rounds,
                              select_bound=True)
        try:
            run.check_rows()
        except BoundNotFoundError as exc:
            if len(sizes) == 1:
                raise
            raise BoundNotFoundError(f"provider {pid}: {exc}", rows=exc.rows, needed=exc.needed,
                                     epsilon_needed=exc.epsilon_needed) from exc
        runs[n] = run
    return runs[min(sizes)]


def local_noise_notes(providers: Sequence[Any], listed: BudgetPlan, epsilon: float,
                      delta: float) -> str:
    """The record's notes on a local-noise run: which plan its parts are, each provider's
    bound and, where the providers' plans differ, each plan's split and who ran it."""
    bounds = ", ".join(f"{pr.provider_id}: D = {pr.data_norm_:.4g}" for pr in providers)
    groups: list[tuple[BudgetPlan, list[str]]] = []
    for pr in providers:
        group = next((ids for plan, ids in groups if plan == pr.plan), None)
        if group is None:
            groups.append((pr.plan, group := []))
        group.append(pr.provider_id)
    if len(groups) == 1:
        plan = (f"Each of {len(providers)} provider(s) runs the same budget plan on its own "
                "data with its own noise: every part is listed once with the largest "
                "provider's sensitivity")
    else:
        ran = "; ".join(f"provider(s) {', '.join(who)}: " + ", ".join(
            f"{name} {b.weight:.3g}" for name, b in plan.parts.items()) for plan, who in groups)
        mine = next(who for plan, who in groups if plan == listed)
        plan = (f"The {len(providers)} providers' public nᵢ differ, and so do their budget "
                f"plans (a search gets a larger share on fewer rows): {ran}. Every plan's "
                "shares of the one Gaussian budget sum to 1 (total noise multiplier "
                f"{listed.total_multiplier:.6g} for all), so each provider's releases compose "
                "to exactly the same Gaussian mechanism; the parts listed are the plan of "
                f"provider(s) {', '.join(mine)} (the smallest nᵢ), with the largest "
                "sensitivity among them")
    return (
        f"{plan} (each provider's own values: {bounds}). By parallel composition over the "
        f"disjoint providers every record is protected at ({epsilon:g}, {delta:g}); the "
        "server's mean, aggregation, thresholding, QR and rotation and the output are "
        "post-processing of the providers' noisy releases, Q⁽⁰⁾ is data-independent. The "
        "untrusted server sees only noisy releases, the released bounds and the public nᵢ."
    )


def dpspca_pipeline(owner: Any, settings: Any, n_samples: int, n_features: int,
                    n_components: int, n_rounds: int, *, select_bound: bool) -> Any:
    """The release pipeline DPS-PCA's parties plan with: T power answers of sensitivity
    Δ(D, k), distributed model, replace one record. The estimator, each provider (over its
    nᵢ, or Σ nᵢ in a secure run) and a secure run's Flower server build it here, so their
    budget plans agree. ``select_bound``: with ``data_norm="auto"`` each provider chooses
    its own bound by the ladder's pilots (the "bound_select" part), unless the ladder's share
    would leave its quantile searches too few rows where the 99 % quantile alone has enough
    (public: nᵢ, ε, δ); a secure run's bound is the union's quantile, opened by secure
    aggregation, so it passes False."""
    from privpca.pipeline.preprocessing import BoundNotFoundError
    from privpca.pipeline.release import ReleasePipeline
    from privpca.pipeline.rows import Statistic

    def plan(select: bool) -> Any:
        return ReleasePipeline(
            owner, settings, n_samples, n_features,
            Statistic(STATISTIC_MECHANISM, lambda D: power_sensitivity(D, n_components),
                      count=n_rounds, subspace_rank=n_components if select else 0),
            model="distributed", neighbouring=Neighbouring.DISTRIBUTED_REPLACE_ONE)

    run = plan(select_bound)
    if "bound_select" in run.active:
        try:
            run.check_rows()
        except BoundNotFoundError:
            return plan(False)  # too few rows for the ladder: the quantile (or its refusal)
    return run
