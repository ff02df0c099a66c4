"""A privacy ledger: records every fit's spend and enforces an optional budget.

Estimators take ``ledger=None`` (the process-wide :func:`default_ledger`) or a
:class:`PrivacyLedger` of the user's. The ledger is a *shared sink*: scikit-learn's ``clone``
(used by ``GridSearchCV``, ``cross_val_score``, pipelines) deep-copies non-estimator
parameters, which in a peer library silently sends the spends of every cross-validation fit to a
throw-away copy. :class:`PrivacyLedger` returns itself from ``__deepcopy__`` so clones charge
the same ledger, and it refuses to be pickled, so a process-parallel search
(``n_jobs > 1`` with the default loky backend) fails loudly instead of losing spends.

The same refusal covers ``pickle.dumps(estimator)`` / ``joblib.dump`` of a model that holds a
ledger: a pickle cannot tell a model being published from one being sent to a worker to fit,
and a ledger is the data holder's running account, never part of a release. Publish a fitted
model with :func:`privpca.save` (its arrays, parameters and ``privacy_``, never the ledger,
in a file that loading cannot execute); pickle a copy without the ledger with
:func:`privpca.persistence.without_ledger`.
"""

from __future__ import annotations

import math
import textwrap
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import dp_accounting

from privpca._validation import caller_stacklevel
from privpca.accounting.composition import compose_epsilon
from privpca.accounting.record import COMPOSITION_SENTENCE, PrivacyRecord
from privpca.exceptions import BudgetExceededError, PrivacyWarning

__all__ = ["Booking", "PrivacyLedger", "default_ledger"]


class PrivacyLedger:
    """Records :class:`PrivacyRecord` spends and composes them with ``dp-accounting``.

    Parameters
    ----------
    epsilon_budget : float or None, default=None
        Total ε allowed at ``delta_budget``; ``None`` records without limit.
    delta_budget : float or None, default=None
        The δ at which the budget is checked; required with ``epsilon_budget``. Each spend's
        own δ is part of its events, so the composed ε at ``delta_budget`` is what is checked.
        :meth:`epsilon` reports at it when given no δ (without a budget: at the sum of the
        spends' δ, :meth:`default_delta`).
    accountant : {"pld", "rdp"}, default="pld"
        Composition method of ``dp-accounting``.

    Examples
    --------
    >>> from privpca import LocalGaussianPCA, PrivacyLedger
    >>> ledger = PrivacyLedger(epsilon_budget=3.0, delta_budget=1e-4)
    >>> est = LocalGaussianPCA(n_components=1, epsilon=1.0, delta=1e-6, ledger=ledger)
    """

    def __init__(
        self,
        epsilon_budget: float | None = None,
        delta_budget: float | None = None,
        *,
        accountant: str = "pld",
    ) -> None:
        if (epsilon_budget is None) != (delta_budget is None):
            raise ValueError("epsilon_budget and delta_budget must be given together.")
        if epsilon_budget is not None and not epsilon_budget > 0:
            raise ValueError(f"epsilon_budget must be > 0. Got {epsilon_budget!r} instead.")
        if delta_budget is not None and not 0 < delta_budget < 1:
            raise ValueError(f"delta_budget must be in (0, 1). Got {delta_budget!r} instead.")
        self.epsilon_budget = epsilon_budget
        self.delta_budget = delta_budget
        self.accountant = accountant
        self._records: list[tuple[str, PrivacyRecord]] = []
        self._reps: dict[int, tuple[PrivacyRecord, _Representation | None]] = {}
        self._lock = threading.RLock()

    # A ledger is an identity, not a value: clones of an estimator must charge this object.
    def __deepcopy__(self, memo: dict[int, Any]) -> PrivacyLedger:
        return self

    def __copy__(self) -> PrivacyLedger:
        return self

    def __reduce__(self) -> Any:
        raise TypeError(
            "A PrivacyLedger cannot be sent to another process or pickled: spends made there "
            "would never reach this ledger. Run model selection with n_jobs=1 (or a threading "
            "backend). To publish or store a fitted model, use privpca.save(estimator, path) "
            "(its arrays, parameters and privacy_ record, never the ledger; read back with "
            "privpca.load); to pickle one, pickle privpca.persistence.without_ledger(estimator)."
        )

    def __len__(self) -> int:
        return len(self._records)

    def __iter__(self) -> Iterator[tuple[str, PrivacyRecord]]:
        return iter(list(self._records))

    def __repr__(self) -> str:
        budget = (
            f"epsilon_budget={self.epsilon_budget}, delta_budget={self.delta_budget}"
            if self.epsilon_budget is not None
            else "no budget"
        )
        return f"PrivacyLedger({budget}, spends={len(self)})"

    def __str__(self) -> str:
        return self.summary()

    def summary(self) -> str:
        """The account for a person: every spend, the composed total and the naive sum.

        One line per recorded fit (its label and its own (ε, δ)); the total ε composed
        exactly by ``dp-accounting`` at :meth:`default_delta`, beside the naive sum of the
        fits' ε (basic composition, which holds at the sum of their δ); the budget and what is
        left of it when there is one. Each fit's own spends are in its record
        (``print(estimator.privacy_)``).
        """
        records = self.records
        head = f"PrivacyLedger: {len(records)} spend{'' if len(records) == 1 else 's'}"
        if self.epsilon_budget is not None:
            head += (f", budget epsilon = {self.epsilon_budget:.4g} at delta = "
                     f"{self.delta_budget:.3g}")
        lines = [head]
        if not records:
            lines.append("  nothing spent yet.")
            return "\n".join(lines)
        naive = sum(r.epsilon for _, r in records)
        try:
            delta, why = self._default_delta()
        except ValueError as exc:  # the spends' δ add up to 1 or more
            lines.append(f"  total: {exc}")
            return "\n".join(lines)
        total = self.epsilon(delta)
        lines.append(f"  total: epsilon = {total:.4g} at delta = {delta:.3g} ({why}), "
                     "composed exactly by dp-accounting")
        lines.append(f"  naive sum of the spends' epsilon: {naive:.4g} (holds at delta = "
                     f"{sum(r.delta for _, r in records):.3g})")
        if len(records) > 1 and total < naive * (1 - 1e-9):
            lines.append(textwrap.fill(COMPOSITION_SENTENCE, width=100, initial_indent="  ",
                                       subsequent_indent="  ", break_on_hyphens=False))
        looser = [(i, r.epsilon, rep.certifies) for i, (_, r) in enumerate(records, 1)
                  if (rep := self._representation(r)) is not None
                  and math.isfinite(rep.certifies)]
        if looser:
            each = ", ".join(f"#{i} states {stated:.4g}, its noise certifies {own:.4g}"
                             for i, stated, own in looser)
            lines.append(textwrap.fill(
                "Some fits' noise certifies less than they state (their releases composed "
                f"exactly; MOD-SuLQ's theorem asks for more noise than its ε needs): {each}. "
                "The total composes what the noise certifies, a valid and tighter bound, and "
                "is never below a fit's stated epsilon.", width=100, initial_indent="  ",
                subsequent_indent="  ", break_on_hyphens=False))
        if self.epsilon_budget is not None:
            left = self.epsilon_budget - total
            lines.append(f"  left of the budget: epsilon = {max(left, 0.0):.4g}")
        width = max(len(label) for label, _ in records)
        lines.append(f"  {'#':>3}  {'label':<{width}}  {'epsilon':>9}  {'delta':>9}  model")
        for i, (label, record) in enumerate(records, 1):
            lines.append(f"  {i:>3}  {label:<{width}}  {record.epsilon:>9.4g}  "
                         f"{record.delta:>9.3g}  {record.model}")
        return "\n".join(lines)

    @property
    def records(self) -> list[tuple[str, PrivacyRecord]]:
        """``(label, record)`` pairs in the order they were spent."""
        return list(self._records)

    def epsilon(self, delta: float | None = None) -> float:
        """Composed ε over every recorded spend, at ``delta`` (default: :meth:`default_delta`).

        The spends are composed exactly (adaptively) with ``dp-accounting``, as
        :meth:`_compose` says. Without ``delta``: at ``delta_budget`` when the ledger was
        built with a budget; otherwise at the **sum of the recorded spends' δ**. The sum, not
        the largest, because it is the one δ at which the spends' own statements always
        compose to a finite ε: a fit known to the accountant only by its (ε, δ) pair (the
        local model, DP-PCA, Private Oja: parts composed in parallel) contributes its whole
        δ, so two such fits compose to ε = ∞ at the larger of their δ, and at their sum to at
        most Σε (basic composition). It also says plainly that the chances of failure of the
        fits add up. Raises ValueError only for a ledger with neither a budget nor a spend.
        """
        return self._compose([r for _, r in self._records], self._delta(delta))

    def default_delta(self) -> float:
        """The δ at which :meth:`epsilon` reports without an argument: ``delta_budget``, else
        the sum of the recorded spends' δ. Raises ValueError when there is neither."""
        return self._default_delta()[0]

    def _default_delta(self) -> tuple[float, str]:
        """:meth:`default_delta` and the words that say where it comes from."""
        if self.delta_budget is not None:
            return self.delta_budget, "the ledger's delta_budget"
        records = [r for _, r in self._records]
        if not records:
            raise ValueError(
                "Give delta, e.g. ledger.epsilon(delta=1e-5): this ledger has no delta_budget "
                "and no spend yet, so there is no delta to state epsilon at (nothing spent is "
                "epsilon = 0 at every delta). A ledger built with "
                "PrivacyLedger(epsilon_budget=..., delta_budget=...) reports at delta_budget; "
                "one without a budget at the sum of its spends' delta."
            )
        total = float(sum(r.delta for r in records))
        if total >= 1.0:
            raise ValueError(
                f"Give delta, e.g. ledger.epsilon(delta=1e-5): the spends' delta add up to "
                f"{total:g} >= 1, at which no epsilon means anything."
            )
        return total, "the sum of the spends' delta"

    def _delta(self, delta: float | None) -> float:
        if delta is None:
            return self._default_delta()[0]
        return delta

    def _compose(self, records: list[PrivacyRecord], delta: float) -> float:
        """An upper bound on ε at ``delta`` for ``records`` composed adaptively.

        Each record enters as its events (tight; Gaussian events exactly) when they certify
        its own guarantee, else as its (ε, δ) dominating pair: a record whose parts are
        composed in parallel (the local model's user groups, DP-PCA's disjoint batches)
        states a guarantee its events, composed in sequence, do not reach. The result is
        also never above basic composition (Σε at Σδ), nor below any record's own stated ε.
        All three are valid upper bounds and none decreases when a record is added, so the
        ledger's ε never decreases as fits are added (and grows with each fit whose noise
        is calibrated exactly to its ε).
        """
        if not records:
            return 0.0
        events: list[dp_accounting.DpEvent] = []
        pairs: list[tuple[float, float]] = []
        tail = 0.0
        for record in records:
            rep = self._representation(record)
            if rep is None:
                return math.inf  # a record we cannot compose (e.g. non-private) is never free
            events += rep.events
            pairs += rep.pairs
            tail += rep.tail
        composed = compose_epsilon(events, delta, accountant=self.accountant, tail=tail,
                                   pairs=pairs)
        basic = (sum(r.epsilon for r in records)
                 if sum(r.delta for r in records) <= delta * (1 + 1e-12) else math.inf)
        # Never below a record's own stated guarantee (any larger ε is as valid an upper
        # bound): one fit reads as its privacy_, and the total never decreases as fits are
        # added, even where a record's events certify less than it states (MOD-SuLQ's noise,
        # from its theorem, certifies ~0.13 of its nominal ε = 1).
        floor = max((r.epsilon for r in records if r.delta <= delta * (1 + 1e-12)),
                    default=0.0)
        return max(min(composed, basic), floor)

    def _representation(self, record: PrivacyRecord) -> _Representation | None:
        """How ``record`` composes (cached per record object; records are immutable)."""
        key = id(record)
        cached = self._reps.get(key)
        if cached is not None and cached[0] is record:
            return cached[1]
        rep = _represent(record, self.accountant)
        self._reps[key] = (record, rep)
        return rep

    def check(self, record: PrivacyRecord) -> None:
        """Raise :class:`BudgetExceededError` if spending ``record`` would exceed the budget."""
        if self.epsilon_budget is None:
            return
        assert self.delta_budget is not None
        records = [r for _, r in self._records] + [record]
        total = self._compose(records, self.delta_budget)
        if total > self.epsilon_budget * (1 + 1e-9):
            raise BudgetExceededError(
                f"This fit would bring the ledger to epsilon={total:.4g} at "
                f"delta={self.delta_budget:g}, over its budget epsilon_budget="
                f"{self.epsilon_budget:g}. Nothing was released."
            )

    def amend(self, old: PrivacyRecord, new: PrivacyRecord) -> None:
        """Replace a booked record by its completed version (same events, more detail).

        Estimators book their planned spend before touching the data and complete the record
        (released bounds, noise scales) when the fit ends. Raises ValueError if the events
        differ, so an amendment can never change what was spent.
        """
        if [repr(s.dp_event) for s in old.spends] != [repr(s.dp_event) for s in new.spends] or (
            old.epsilon, old.delta) != (new.epsilon, new.delta):
            raise ValueError("An amended record must keep the booked events and guarantee.")
        with self._lock:
            for i, (label, record) in enumerate(self._records):
                if record is old:
                    self._records[i] = (label, new)
                    return
        raise ValueError("The record to amend is not in this ledger.")

    def withdraw(self, record: PrivacyRecord) -> None:
        """Remove a booked record whose fit refused its input before returning anything.

        For an estimator that books its planned spend, then finds NaN or infinity in a
        pass over records it reads anyway, and raises before any attribute is set: nothing
        was released, as when its input is refused before the booking. Raises ValueError if
        ``record`` is not booked in this ledger.
        """
        with self._lock:
            for i, (_, booked) in enumerate(self._records):
                if booked is record:
                    del self._records[i]
                    self._reps.pop(id(record), None)
                    return
        raise ValueError("The record to withdraw is not in this ledger.")

    def spend(self, record: PrivacyRecord, label: str = "") -> None:
        """Check the budget, then record ``record`` under ``label``."""
        with self._lock:
            self.check(record)
            self._records.append((label, record))


@dataclass(frozen=True)
class _Representation:
    """What a record contributes to a composition: events (+ tail) or (ε, δ) pairs."""

    events: list[dp_accounting.DpEvent]
    pairs: list[tuple[float, float]]
    tail: float
    #: What the events certify at the record's own δ, where below its stated ε (else NaN).
    certifies: float = math.nan


def _represent(record: PrivacyRecord, accountant: str) -> _Representation | None:
    """The tighter valid way to compose ``record`` (None: it cannot be composed)."""
    finite = math.isfinite(record.epsilon) and 0 <= record.delta < 1
    as_pair = _Representation([], [(float(record.epsilon), float(record.delta))], 0.0)
    if not record.spends:
        return as_pair if finite and record.model != "non-private" else None
    with_events = [s for s in record.spends if s.dp_event is not None]
    pure = [s for s in record.spends if s.dp_event is None]
    if any(s.delta > 0 for s in pure):  # an (ε, δ) spend without an event
        return as_pair if finite else None
    rep = _Representation(
        [s.event() for s in with_events],
        [(float(s.epsilon), 0.0) for s in pure for _ in range(s.count)],
        sum(s.tail * s.count for s in with_events),
    )
    if not finite or (record.delta <= 0 and rep.events):
        return rep  # its own claim cannot be the tighter one
    own = compose_epsilon(rep.events, record.delta, accountant=accountant, tail=rep.tail,
                          pairs=rep.pairs)
    if own > record.epsilon * (1 + 1e-9) + 1e-12:
        return as_pair
    if own < record.epsilon * (1 - 1e-6):
        return _Representation(rep.events, rep.pairs, rep.tail, own)
    return rep


_DEFAULT_LEDGER = PrivacyLedger()


def resolve_ledger(owner: object, ledger: object) -> PrivacyLedger:
    """The ledger a fit charges: ``ledger``, or the default one (warning in a child process).

    Raises ValueError for anything that is not a :class:`PrivacyLedger` or None.
    """
    import multiprocessing
    import warnings


    name = type(owner).__name__
    if ledger is None and multiprocessing.parent_process() is not None:
        warnings.warn(
            f"{name} is fitting in a child process with ledger=None: its spend is recorded in "
            "this process's default ledger and will not reach the parent's. Pass an explicit "
            "PrivacyLedger (it refuses to cross processes, so the problem becomes an error) or "
            "fit with n_jobs=1.",
            PrivacyWarning,
            stacklevel=caller_stacklevel(),
        )
    target = default_ledger() if ledger is None else ledger
    if not isinstance(target, PrivacyLedger):
        raise ValueError(
            f"The 'ledger' parameter of {name} must be a PrivacyLedger or None. Got "
            f"{ledger!r} instead."
        )
    return target


def default_ledger() -> PrivacyLedger:
    """The process-wide ledger used by estimators whose ``ledger`` parameter is ``None``."""
    return _DEFAULT_LEDGER


class Booking:
    """A planned record charged on a ledger, settled by the fit's final record.

    A fit books its planned spend before it reads a value of the data; when it completes,
    :meth:`settle` replaces the plan by the final record (same events, the released bounds
    and noise scales filled in); a fit that refuses its input before releasing anything
    calls :meth:`withdraw`.

    Parameters
    ----------
    ledger : PrivacyLedger
        Where the spend is booked.
    planned : PrivacyRecord
        The record booked (already spent on ``ledger``).
    """

    def __init__(self, ledger: PrivacyLedger, planned: PrivacyRecord) -> None:
        self.ledger = ledger
        self.record = planned

    @classmethod
    def charge(cls, owner: object, ledger: object, planned: PrivacyRecord) -> Booking:
        """Book ``planned`` on ``ledger`` (or the default one); raises if over budget."""
        target = resolve_ledger(owner, ledger)
        target.spend(planned, label=type(owner).__name__)
        return cls(target, planned)

    def settle(self, final: PrivacyRecord) -> PrivacyRecord:
        """Replace the booked record by ``final`` (refused if the events differ)."""
        if final is not self.record:
            self.ledger.amend(self.record, final)
            self.record = final
        return final

    def withdraw(self) -> None:
        """Remove the booking: the fit refused its input before releasing anything."""
        self.ledger.withdraw(self.record)
