"""Table mode of the streaming estimators: the held-out share's split, releases and record.

``n_held`` records are held out of the stream and released through the central release
pipeline at the full (ε, δ), in parallel with the stream over the rest; the privacy argument
is in :mod:`privpca.decomposition._stochastic`'s docstring.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

import numpy as np
from numpy.typing import NDArray

from privpca._validation import check_in_range, check_n_components, refuse_non_finite
from privpca.accounting.neighbouring import Neighbouring
from privpca.accounting.record import PrivacyRecord, PrivacySpend
from privpca.decomposition._base import BasePrivatePCA, Release
from privpca.decomposition._records import RecordStream, table_records
from privpca.decomposition._stochastic_types import (
    HeldOutRelease,
    HeldOutSplit,
    StreamInput,
    StreamPlan,
    StreamPrepared,
    StreamRun,
)
from privpca.mechanisms.shuffling import secret_permutation
from privpca.pipeline.budget import DEFAULT_SHARES, PART_NAMES
from privpca.pipeline.preprocessing import BoundNotFoundError
from privpca.pipeline.release import MAX_SEARCH_SHARE, ReleasePipeline
from privpca.pipeline.rows import Statistic
from privpca.pipeline.settings import PipelineSettings, check_centering
from privpca.solvers.eigen import fix_signs
from privpca.streaming.holdout import RowSplit, held_out_size, random_subset
from privpca.streaming.selection import drop_rows, take_rows
from privpca.streaming.sources import RowSource

__all__ = ["DEFAULT_HOLDOUT_FRACTION", "HOLDOUT_SHARES", "HeldOutTable", "held_out_notes"]

#: Default share of the records held out for the mean, the bound and the explained variance.
DEFAULT_HOLDOUT_FRACTION = 0.1
#: Default relative weights of the held-out parts: the release pipeline's own default shares
#: (:data:`privpca.pipeline.budget.DEFAULT_SHARES`), normalised over the parts in use, so the
#: held-out records' whole (ε, δ) is split in the proportions a one-shot fit would use.
HOLDOUT_SHARES: Mapping[str, float] = DEFAULT_SHARES
_HELD = " [held-out records]"


class HeldOutTable(BasePrivatePCA):
    """Table mode's steps: the held-out share around the estimator's stream, supplied by the
    hooks :meth:`_table_stream_plan` and :meth:`_table_stream` (Private Oja, DP-PCA; the
    non-private Oja overrides the steps with the exact mean)."""

    n_components: int

    def _table_stream_plan(self, m: int, p: int, *, pairs: bool,
                           streamed: bool) -> tuple[Any, PrivacySpend, str]:
        """Table mode: calibrate the stream over m records; ``(stream, planned spend,
        calibration)``."""
        raise NotImplementedError

    def _table_stream(self, plan: StreamPlan, records: Any, held: HeldOutRelease,
                      rng: np.random.Generator) -> StreamRun:
        """Table mode: run the stream over ``records`` (after the held-out share's
        preprocessing); set the stream's own attributes."""
        raise NotImplementedError

    def _table_checks_finite(self) -> bool:
        """Whether table mode refuses NaN/inf in ``X`` itself: the held-out rows before their
        preprocessing, the stream's rows by passes that read them anyway, before each
        release."""
        return False


    def _table_plan(self, data: StreamInput) -> StreamPlan:
        """The held-out share's pipeline and the stream over the rest; the planned record
        lists every held-out part and the stream's event (before the data are read)."""
        n, p = data.n_samples, data.n_features
        k = check_n_components(self.n_components, p, owner=self)
        epsilon, delta = float(self.epsilon), float(self.delta)  # declared: checked
        centering = check_centering(getattr(self, "centering", None), p, self)
        n_held, m, pairs = self._split(n, centering)
        try:
            run = self._held_out_pipeline(n_held, p, epsilon, delta, centering,
                                          Neighbouring.REPLACE_ONE_CENTRAL)
        except BoundNotFoundError as exc:
            # "auto": hold out the rows the searches need (public: n, p, ε, δ), up to half.
            if getattr(self, "holdout_fraction", "auto") != "auto" or exc.needed is None \
                    or exc.needed > n // 2:
                raise
            n_held, m, pairs = self._split(n, centering, n_held=int(exc.needed))
            run = self._held_out_pipeline(n_held, p, epsilon, delta, centering,
                                          Neighbouring.REPLACE_ONE_CENTRAL)
        # Refuses (before any charge) what the stream cannot guarantee on m records.
        stream, spend, calibration = self._table_stream_plan(m, p, pairs=pairs,
                                                             streamed=data.mode.streamed)
        calibration += "; held-out parts: analytic Gaussian, exact split (dp-accounting)"
        split = HeldOutSplit(n, n_held, m, pairs, centering, run, epsilon, delta, calibration)
        planned = self._table_record(self._planned_spends(run), spend, split,
                                     data_norm=math.nan, notes="planned before the fit")
        return StreamPlan(planned=planned, mode=data.mode, k=k, shuffle=data.shuffle,
                          stream=stream, split=split)

    def _prepare_table(self, plan: StreamPlan, data: StreamInput,
                       pre_rng: np.random.Generator) -> StreamPrepared:
        """The held-out share (drawn from the preprocessing's stream) and its releases; the
        records of the stream over the rest.

        An array's held-out rows are the first of a public random permutation and the stream
        reads the rest in place, in that order (pair differences form a table of their own);
        a streamed table's are a secret random set of rows, gathered in one pass
        (:meth:`_split_streamed`).
        """
        split = plan.split
        assert split is not None
        if data.mode.streamed:
            held, records = self._split_streamed(split.run, data.table, split.n_held,
                                                 split.pairs, split.centering, pre_rng)
            return StreamPrepared(records, held=held)
        X = data.table
        # In memory, the fit's own passes refuse NaN/inf (_table_checks_finite): the held-out
        # rows here, before their preprocessing; the stream's by its compiled passes.
        verify = not split.pairs and self._table_checks_finite()
        perm = secret_permutation(split.n, pre_rng)
        held_rows = X[perm[: split.n_held]]
        if verify:
            refuse_non_finite(held_rows, "X")
        held = self._prepare_held_out(split.run, held_rows, pre_rng)
        del held_rows
        records = table_records(X, perm[split.n_held:], split.pairs,
                                held.stream_centre(split.centering), verify=verify)
        return StreamPrepared(records, held=held)

    def _release_table(self, plan: StreamPlan, prepared: StreamPrepared,
                       rng: np.random.Generator, pre_rng: np.random.Generator) -> Release:
        """The stream, then the held-out "variance" part; the record of every part."""
        split, held = plan.split, prepared.held
        assert split is not None and held is not None
        run = self._table_stream(plan, prepared.records, held, rng)
        prepared.records = None  # the stream's table is not needed any more
        self._set_table_attributes(fix_signs(run.W).T.copy(), held, pre_rng)
        notes = (run.notes + held_out_notes(split.n, split.n_held, split.m, split.pairs,
                                            split.centering, split.run,
                                            in_order=plan.mode.streamed)
                 + run.tail)
        return Release(final=self._table_record(held.prepared.spends, run.spend, split,
                                                data_norm=held.prepared.data_norm,
                                                notes=notes))

    def _holdout_fraction(self) -> float:
        fraction = getattr(self, "holdout_fraction", "auto")
        return DEFAULT_HOLDOUT_FRACTION if fraction == "auto" else float(fraction)

    def _holdout_weights(self, active: tuple[str, ...]) -> dict[str, float]:
        """``budget_shares`` merged into :data:`HOLDOUT_SHARES`, normalised over ``active``."""
        shares = getattr(self, "budget_shares", None)
        name = type(self).__name__
        weights = dict(HOLDOUT_SHARES)
        for part, value in (shares or {}).items():
            if part not in HOLDOUT_SHARES:
                raise ValueError(
                    f"The 'budget_shares' parameter of {name} has an unknown part {part!r}; "
                    f"the parts are {sorted(HOLDOUT_SHARES)}."
                )
            weights[part] = check_in_range(value, f"budget_shares[{part!r}]", low=0.0,
                                           owner=self)
        used = {part: weights[part] for part in active}
        total = sum(used.values())
        return {part: w / total for part, w in used.items()}

    def _split(self, n: int, centering: Any, *, n_held: int | None = None,
               ) -> tuple[int, int, bool]:
        """``(n_held, m, pairs)``: held-out size, stream size, whether pairs are formed.

        ``n_held = ⌈holdout_fraction·n⌉`` (:func:`~privpca.streaming.holdout.held_out_size`,
        in memory and streamed alike) unless given."""
        frac = self._holdout_fraction()
        n_held = held_out_size(n, frac) if n_held is None else n_held
        mode = getattr(self, "stream_centering", "mean")
        if mode not in ("mean", "pairs"):
            raise ValueError(
                f"The 'stream_centering' parameter of {type(self).__name__} must be a str "
                f"among ['mean', 'pairs']. Got {mode!r} instead."
            )
        pairs = isinstance(centering, str) and mode == "pairs"
        rest = n - n_held
        m = rest // 2 if pairs else rest
        if n_held < 2 or m < 2:
            raise ValueError(
                f"{type(self).__name__} holds out {n_held} of n_samples={n} records "
                f"(holdout_fraction={frac:g}) and streams {m} "
                f"{'pair differences' if pairs else 'records'}; both need at least 2. Use "
                "more data, or centering=None for the papers' uncentred setting."
            )
        return n_held, m, pairs

    def _held_out_pipeline(
        self, n_held: int, p: int, epsilon: float, delta: float, centering: Any,
        neighbouring: Neighbouring,
    ) -> ReleasePipeline:
        """The held-out share's pipeline; its last Gaussian part is the variance release.

        The pipeline decides the preprocessing parts (from ``centering`` and
        ``data_norm="auto"``); the held-out records have no statistic of their own, so the
        plan's "statistic" share is the "variance" part (``VᵀGV`` and ``tr G``, Δ = √2·D²):
        the held-out (ε, δ) is split exactly among the parts that run, nothing is left over.
        """
        statistic = Statistic("gaussian: packed VᵀGV and tr G of the held-out rows",
                              lambda D: math.sqrt(2.0) * D**2, releases_spectrum=True)
        # The held-out rows' own settings: a private bound, no scales; shares set below.
        held = PipelineSettings(epsilon=epsilon, delta=delta, centering=centering,
                                data_norm="auto", scale=False)
        try:  # the searches' public check: refused before anything is charged
            probe = ReleasePipeline(self, held, n_held, p, statistic, model="central",
                                    neighbouring=neighbouring)
            weights = self._holdout_weights((*probe.active, "variance"))
            shares = {part: weights[part] for part in probe.active}
            for _ in range(3):  # few held-out rows: raise the searches' shares (public n)
                held = replace(held, budget_shares=shares)
                run = ReleasePipeline(self, held, n_held, p, statistic, model="central",
                                      neighbouring=neighbouring)
                short = run._short_searches(run.plan, run.held_plan)
                for part, search in short:
                    need = (search.min_records() / search.n_records) ** 2 * 1.02
                    shares[part] = min(shares[part] * need, MAX_SEARCH_SHARE)
            run.check_rows()
        except BoundNotFoundError as exc:
            raise BoundNotFoundError(
                f"{type(self).__name__} holds out {n_held} records (holdout_fraction="
                f"{getattr(self, 'holdout_fraction', 'auto')!r}: 'auto' holds out at most "
                "half the table) for its private mean, bound and explained variance; its "
                f"private norm quantiles need at least {exc.needed} at epsilon={epsilon:g}, "
                f"delta={delta:g}. Nothing was charged. Use more data or a larger epsilon, "
                f"or the papers' setting ({self._papers_setting()}).", rows=n_held,
                needed=exc.needed,
                epsilon_needed=exc.epsilon_needed, holdout_fraction=self._holdout_fraction()
            ) from exc
        parts = {name: b for name, b in run.plan.parts.items() if name != "statistic"}
        parts["variance"] = replace(run.plan.parts["statistic"], name="variance")
        run.plan = replace(run.plan, parts=parts)
        return run

    @staticmethod
    def _planned_spends(run: ReleasePipeline) -> list[PrivacySpend]:
        """The held-out parts' spends as booked (events known before the data are read)."""
        return [run._spend(part, f"planned{_HELD}", math.nan, math.nan)
                for part in PART_NAMES if part in run.plan]

    def _papers_setting(self) -> str:
        """The parameters of the papers' setting, for the errors that suggest it."""
        return "centering=None" + (", a numeric clip_norm" if hasattr(self, "clip_norm")
                                   else "")

    def _prepare_held_out(
        self, run: ReleasePipeline, rows: NDArray[np.float64] | RowSource,
        rng: np.random.Generator
    ) -> HeldOutRelease:
        """The held-out share's preprocessing releases on its ``rows`` (an array, or a
        :class:`~privpca.streaming.RowSource` read by block passes)."""
        # the rows' norms only where the path needs them
        prepared = (run.prepare_streamed(rows, rng) if isinstance(rows, RowSource)
                    else run.prepare(rows, rng))
        return HeldOutRelease(prepared, run)

    def _split_streamed(
        self, run: ReleasePipeline, table: RowSource, n_held: int, pairs: bool,
        centering: Any, rng: np.random.Generator,
    ) -> tuple[HeldOutRelease, RecordStream]:
        """A streamed table's held-out share, released, and the stream of its other rows.

        The held-out rows are a secret, uniformly random set of single rows (whatever the
        storage order, :mod:`privpca.decomposition._stochastic`), gathered in one pass; the
        stream reads the other rows in order (their pair differences, or minus the released or
        public centre) when it is read."""
        split = RowSplit(table.n_samples, random_subset(table.n_samples, n_held, rng))
        held = self._prepare_held_out(run, take_rows(table, split.held), rng)
        centre = None if pairs else held.stream_centre(centering)
        return held, RecordStream.streamed(drop_rows(table, split.held), pairs=pairs,
                                           centre=centre)

    @staticmethod
    def _table_record(spends: list[PrivacySpend], statistic: PrivacySpend, split: HeldOutSplit,
                      *, data_norm: float, notes: str) -> PrivacyRecord:
        """Table mode's one record: every held-out part's spend, then the stream's."""
        held = [replace(s, mechanism=s.mechanism if s.mechanism.endswith(_HELD)
                        else s.mechanism + _HELD) for s in spends]
        stat = replace(statistic, mechanism=statistic.mechanism
                       if statistic.mechanism.startswith("statistic: ")
                       else f"statistic: {statistic.mechanism}")
        return PrivacyRecord(
            epsilon=float(split.epsilon),
            delta=float(split.delta),
            model="central",
            neighbouring=Neighbouring.REPLACE_ONE_CENTRAL.description,
            sensitivity=stat.sensitivity,
            noise_scale=stat.noise_scale,
            calibration=split.calibration,
            data_norm=float(data_norm),
            n_samples=int(split.n),
            n_clipped=0,
            spends=(*held, stat),
            target_epsilon=float(split.epsilon),
            notes=notes,
        )

    def _set_table_attributes(
        self, components: NDArray[np.float64], held: HeldOutRelease, rng: np.random.Generator
    ) -> None:
        """The "variance" part, then components rotated to its eigenvectors, and mean_ etc.

        :meth:`ReleasePipeline.rotate_to_spectrum` releases ``VᵀGV`` and ``tr G`` of the
        held-out rows (centred, clipped to D) with noise of sensitivity √2·D²; its eigenvectors
        rotate the stream's basis into ordered components (post-processing: the span is the
        stream's) and its eigenvalues are their variances.
        """
        spectrum = held.run.rotate_to_spectrum(held.prepared, components, rng)
        self.components_ = spectrum.components
        self.explained_variance_ = spectrum.explained_variance
        self.explained_variance_ratio_ = spectrum.explained_variance_ratio
        self.expected_error_ = spectrum.expected_error
        self._set_preprocessing(held.prepared)


def held_out_notes(n: int, n_held: int, m: int, pairs: bool, centering: Any,
                   run: ReleasePipeline, *, in_order: bool = False) -> str:
    """The part of a table-mode record's notes that explains the split and the centring."""
    shares = ", ".join(f"{name} {p.weight:.3g}" for name, p in run.plan.parts.items())
    order = "in the table's order" if in_order else "in a uniformly random order"
    chosen = ("a uniformly random set of rows drawn secretly from the estimator's generator, "
              "independently of the data and of the row order" if in_order
              else "chosen by a data-independent random permutation")
    if pairs:
        centering_note = (
            f"Centring by pair differences: the other {n - n_held} records, {order}, "
            f"give m={m} derived records (x_a - x_b)/√2 "
            "(mean zero, covariance Σ); each record enters one pair, so replacing "
            "one record replaces at most one derived record: the stream's guarantee "
            "on m records carries over unchanged.")
    elif isinstance(centering, str):
        centering_note = (
            f"Centred on the held-out private mean: the stream reads the other {m} "
            "records minus a value released from disjoint records (free for them).")
    elif centering is None:
        centering_note = f"No centring: the stream reads the other {m} records as given."
    else:
        centering_note = (
            f"Public mean subtracted (free): the stream reads the other {m} records.")
    return (
        f"Parallel composition over disjoint records: {n_held} of n={n} records ({chosen}) "
        "are held out and released at the full "
        f"(epsilon, delta) through the release pipeline's Gaussian parts, split exactly "
        f"(shares of 1/m²: {shares}); the stream runs at the full (epsilon, delta) on the "
        f"rest. {centering_note} A ledger composing this fit with others treats the held-out "
        "events and the stream's as sequential (conservative)."
        + (" Assumption of a streamed fit: the stream reads the rest in the table's storage "
           "order, its minibatches fixed by position, so its guarantee is for replacing the "
           "record at a position; that is replace-one only if the row order does not depend "
           "on the values (a table sorted by a feature does: shuffle it first, or fit it in "
           "memory, where the order is a secret random permutation)." if in_order else "")
    )
