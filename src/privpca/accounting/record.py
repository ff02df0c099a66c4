"""What a fitted estimator spent: :class:`PrivacySpend` and :class:`PrivacyRecord`."""

from __future__ import annotations

import math
import textwrap
from dataclasses import InitVar, asdict, dataclass, field
from typing import Any

import dp_accounting

from privpca._config import NOISE_MODE_NOTES, current_noise_mode
from privpca.accounting.composition import compose_epsilon
from privpca.accounting.neighbouring import Neighbouring

__all__ = ["COMPOSITION_SENTENCE", "NOISE_LABELS", "PARALLEL_SENTENCE",
           "PrivacyRecord", "PrivacySpend"]

#: What a record's ``noise_scale`` measures, by the law of its main noise
#: (:attr:`PrivacyRecord.noise_kind`).
NOISE_LABELS: dict[str, str] = {
    "gaussian": "noise std",
    "laplace": "Laplace scale b",
    "exponential": "temperature",
}

#: Why a composed total is below the naive sum of the spends' ε (printed beside both).
COMPOSITION_SENTENCE = (
    "Why the total is below the naive sum: the naive sum adds up each spend's worst case, "
    "while dp-accounting composes the spends' exact privacy losses, and Gaussian noises "
    "compose like one Gaussian (their 1/sigma^2 add up), so epsilon grows about like the "
    "square root of the number of spends, not like their sum."
)

#: Why a total is below the naive sum when its spends read disjoint sets of records.
PARALLEL_SENTENCE = (
    "Why the total is below the naive sum: the spends read disjoint sets of records (a "
    "held-out share of the rows, separate groups of users), and each record pays only for the "
    "spends that read it (parallel composition); spends that read the same records are "
    "composed exactly by dp-accounting, which adds their privacy losses more tightly than "
    "their epsilon."
)

#: Words of a score plot's spend (:mod:`privpca._score_release`): its record's ``data_norm`` is
#: the box's largest half-width, and its summary says so.
SCORE_PLOT_MECHANISM = "2-D histogram of the projections"

#: Who sees raw records in each trust model (:attr:`PrivacyRecord.model`), for the printout.
MODEL_WORDS: dict[str, str] = {
    "central": "a trusted curator sees the raw records",
    "distributed": "each data provider sees only its own records and adds its own noise",
    "local": "every user randomises their own record; nobody sees raw records",
    "non-private": "no privacy: the output is exact",
}


@dataclass(frozen=True)
class PrivacySpend:
    """One mechanism call on the private data.

    Attributes
    ----------
    mechanism : str
        Human-readable name (e.g. ``"gaussian: upper triangle of x xᵀ"``).
    epsilon, delta : float
        The guarantee this call certifies on its own.
    sensitivity : float
        L2 sensitivity Δ of the released quantity under the record's neighbouring relation.
    noise_scale : float
        The noise's scale per coordinate: the standard deviation σ of Gaussian noise, the
        scale b of Laplace noise, the temperature of the exponential mechanism.
    count : int
        How many identical releases of this kind were made (composed by the accountant).
    dp_event : dp_accounting.DpEvent
        The event composed by ``dp-accounting`` (noise multiplier σ/Δ).
    tail : float
        Probability, per side of a neighbouring pair, that this call's output differs from
        that of ``dp_event``'s mechanism under a coupling (stability histograms: an empty bin
        being released); added to δ as ``(1 + e^ε)·tail`` when composing. 0 for plain
        Gaussian mechanisms.
    condition : str
        What this call's guarantee rests on that the code cannot certify (an approximate
        sampler's law, a failure probability with no known bound); empty when certified. The
        record's headline states every condition (:attr:`PrivacyRecord.conditions`).
    """

    mechanism: str
    epsilon: float
    delta: float
    sensitivity: float
    noise_scale: float
    count: int = 1
    dp_event: dp_accounting.DpEvent | None = field(default=None, compare=False)
    tail: float = 0.0
    condition: str = ""

    def event(self) -> dp_accounting.DpEvent:
        """The composed event of all ``count`` releases."""
        if self.dp_event is None:
            raise ValueError(f"spend {self.mechanism!r} has no dp_event to compose")
        if self.count == 1:
            return self.dp_event
        return dp_accounting.SelfComposedDpEvent(self.dp_event, self.count)


@dataclass(frozen=True)
class PrivacyRecord:
    """The privacy guarantee of one fitted estimator (its ``privacy_`` attribute).

    Attributes
    ----------
    epsilon, delta : float
        The overall guarantee certified for the released output (the composition of
        ``spends`` by ``dp-accounting`` when there are several).
    model : {"local", "central", "distributed"}
        The trust model: who sees unnoised data.
    neighbouring : str
        The neighbouring relation of the guarantee (e.g. ``"replace one user's record"``).
    sensitivity : float
        Sensitivity of the (main) released quantity: L2 for Gaussian noise, L1 for Laplace
        noise, of the score for the exponential mechanism.
    noise_scale : float
        Scale of the (main) noise, per coordinate, per user or release: what it measures
        depends on the noise's law (:attr:`noise_kind`, :data:`NOISE_LABELS`).
    calibration : str
        How the noise was calibrated (``"analytic"`` or ``"classic"``).
    data_norm : float
        The public bound on each record's L2 norm that the analysis assumes.
    n_samples : int or None
        Number of records (or reports) used: public under replace-one neighbours; ``None``
        under add/remove-one neighbours, where the exact count is private.
    spends : tuple of PrivacySpend
        Every mechanism call that touched the data.
    target_epsilon : float
        The ε the user asked for (differs from ``epsilon`` when a calibration certifies a
        different value, e.g. classic calibration or the paper's sensitivity).
    notes : str
        Anything a reader of the guarantee must know.
    noise_mode : {"secure", "reproducible", "float", "none"}
        How the noise was drawn (:data:`privpca._config.NOISE_MODE_NOTES` says what
        each means; the note is appended to ``notes``): ``"secure"`` (an unseeded fit: OS-keyed
        cryptographic generator, values snapped to a grid with exact discrete noise),
        ``"reproducible"`` (a seeded fit: NumPy's float noise, rebuilt by whoever knows the
        seed; for tests and experiments, not a release), ``"float"`` (the explicit opt-out
        ``secure_mode=False``), ``"none"`` (a non-private fit). Filled in from the fit being
        run when not given.

    The record carries no exact count computed from the data (how many rows were clipped
    is such a count: a non-private release). The ``n_clipped`` argument of older callers is
    accepted and discarded.
    """

    epsilon: float
    delta: float
    model: str
    neighbouring: str
    sensitivity: float
    noise_scale: float
    calibration: str
    data_norm: float
    n_samples: int | None
    n_clipped: InitVar[int | None] = None
    spends: tuple[PrivacySpend, ...] = ()
    target_epsilon: float | None = None
    notes: str = ""
    noise_mode: str = ""

    def __post_init__(self, n_clipped: int | None) -> None:
        del n_clipped  # an exact count of the data: never stored, never released

        # Every record says how its noise was drawn (a public rule), in a field and a note.
        mode = self.noise_mode or ("none" if self.model == "non-private"
                                   else current_noise_mode())
        object.__setattr__(self, "noise_mode", mode)
        note = NOISE_MODE_NOTES.get(mode, "")
        if note and note not in self.notes:
            object.__setattr__(self, "notes", f"{self.notes} {note}".strip())

    @classmethod
    def from_spends(
        cls, spends: tuple[PrivacySpend, ...], delta: float, **kwargs: Any
    ) -> PrivacyRecord:
        """Build a record whose ε composes ``spends`` at ``delta`` with ``dp-accounting``."""
        if len(spends) == 1 and spends[0].count == 1:
            epsilon = spends[0].epsilon
        else:
            epsilon = compose_epsilon(
                [s.event() for s in spends], delta, tail=sum(s.tail * s.count for s in spends)
            )
        return cls(epsilon=epsilon, delta=delta, spends=spends, **kwargs)

    @classmethod
    def non_private(cls, n_samples: int, notes: str) -> PrivacyRecord:
        """The record of a non-private fit: ε = ∞, no spends (a budgeted ledger refuses it)."""
        return cls(
            epsilon=math.inf,
            delta=0.0,
            model="non-private",
            neighbouring=Neighbouring.NOT_PRIVATE.description,
            sensitivity=math.inf,
            noise_scale=0.0,
            calibration="none",
            data_norm=math.inf,
            n_samples=int(n_samples),
            spends=(),
            target_epsilon=math.inf,
            notes=notes,
        )

    def events(self) -> list[dp_accounting.DpEvent]:
        """The ``dp-accounting`` events of every spend, for composing across fits."""
        return [s.event() for s in self.spends]

    def to_dict(self) -> dict[str, Any]:
        """A JSON-serialisable dictionary (``dp_event`` objects rendered as text)."""
        out = asdict(self)
        out["spends"] = [
            {
                **{k: v for k, v in asdict(s).items() if k != "dp_event"},
                "dp_event": repr(s.dp_event),
            }
            for s in self.spends
        ]
        for key, value in list(out.items()):
            if isinstance(value, float) and not math.isfinite(value):
                out[key] = str(value)
        return out

    @property
    def noise_kind(self) -> str:
        """The law of the main noise, which says what ``noise_scale`` measures.

        ``"gaussian"`` (a standard deviation), ``"laplace"`` (the scale b), ``"exponential"``
        (the exponential mechanism's temperature), ``"none"`` (a non-private fit) or
        ``"per-step"`` (no single scale: it is set step by step, in the spends).
        """
        if self.model == "non-private":
            return "none"
        if not math.isfinite(self.noise_scale):
            return "per-step"
        if self.calibration.startswith("exponential"):
            return "exponential"
        if self.calibration == "laplace":
            return "laplace"
        spend = self._main_spend()
        if spend is None:
            return "gaussian"
        if spend.mechanism.startswith("exponential"):
            return "exponential"
        event = spend.dp_event
        while isinstance(event, dp_accounting.SelfComposedDpEvent):
            event = event.event
        return "laplace" if isinstance(event, dp_accounting.LaplaceDpEvent) else "gaussian"

    def _main_spend(self) -> PrivacySpend | None:
        """The spend whose sensitivity and noise scale the record reports, if listed."""
        for spend in self.spends:
            if (spend.noise_scale, spend.sensitivity) == (self.noise_scale, self.sensitivity):
                return spend
        return None

    def __str__(self) -> str:
        return self.summary()

    def __repr__(self) -> str:
        # One line: the guarantee's fields and the number of spends (print() the record for
        # the statement; the fields, spends included, are the dataclass's, for code).
        return (
            f"PrivacyRecord(epsilon={self.epsilon!r}, delta={self.delta!r}, "
            f"model={self.model!r}, neighbouring={self.neighbouring!r}, "
            f"data_norm={self.data_norm!r}, sensitivity={self.sensitivity!r}, "
            f"n_samples={self.n_samples!r}, spends={len(self.spends)})"
        )

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        """IPython and Jupyter show the statement of :meth:`summary`."""
        printer.text("PrivacyRecord(...)" if cycle else self.summary())

    def summary(self) -> str:
        """The guarantee as a data steward reads it (``str(record)``, ``print(record)``).

        The first line is :meth:`headline`. Then: the total (ε, δ) and the trust model; the
        neighbouring relation; the bound (the public norm bound every record is clipped to)
        and the main release's sensitivity and noise; the number of records when it is public;
        every spend (mechanism call on the data) with its own ε and δ, its share of the
        Gaussian noise budget (where every spend is Gaussian), how many releases it made, its
        sensitivity and noise scale; the composed total beside the naive sum of the spends' ε,
        with one sentence on why they differ; the notes.

        A spend's ε is the guarantee of all its releases together (for a spend whose ε is
        stated per release, ε × releases, said so in its row): the naive sum adds those.
        """
        lines = [self.headline()]
        model = MODEL_WORDS.get(self.model, self.model)
        lines.append(f"  guarantee:   epsilon = {self.epsilon:.4g}, delta = {self.delta:.3g} for "
                     f"everything released under this record ({self.model} model: {model})"
                     + self._provided())
        lines.append(f"  neighbours:  {self.neighbouring}")
        lines.append(f"  bound:       {self._bound_words()}")
        if self.n_samples is not None:
            lines.append(f"  records:     n = {self.n_samples} (public under this relation)")
        elif self.model != "non-private":
            lines.append("  records:     their number is private under this relation (not "
                         "released)")
        if self.spends:
            lines += self._spend_lines()
        if self.notes:
            lines.append(textwrap.fill(self.notes, width=100, initial_indent="  notes:       ",
                                       subsequent_indent=" " * 15, break_on_hyphens=False))
        return "\n".join(lines)

    def naive_epsilon(self) -> float:
        """The naive sum of the spends' ε (basic composition; it would hold at the sum of their
        δ): each spend's ε for all its releases together, added up. The record's ``epsilon``,
        composed exactly, is never more than this for spends of the same δ."""
        return float(sum(_spend_epsilon(s)[0] for s in self.spends))

    def _bound_words(self) -> str:
        if self.model == "non-private":
            return "none (a non-private fit)"
        kind = self.noise_kind
        clip = (f"data_norm = {self.data_norm:.4g}, the bound on each record's L2 norm that the "
                "analysis assumes (rows above it are clipped to it)"
                if math.isfinite(self.data_norm) else f"data_norm = {self.data_norm:.4g}")
        if any(SCORE_PLOT_MECHANISM in s.mechanism for s in self.spends):
            clip = (f"box half-width = {self.data_norm:.4g}, the largest half-width of the public "
                    "box the projections are clipped to (not a bound on the rows' norms)")
        if kind == "per-step" or not math.isfinite(self.sensitivity):
            return f"{clip}; sensitivity and noise set step by step (see the spends)"
        sens = "L1 sensitivity" if kind == "laplace" else "sensitivity"
        return (f"{clip}; the main release's {sens} is {self.sensitivity:.4g}, its "
                f"{NOISE_LABELS.get(kind, 'noise scale')} {self.noise_scale:.4g} "
                f"({self.calibration} calibration)")

    def _spend_lines(self) -> list[str]:
        spends = self.spends
        shares = _gaussian_shares(spends)
        lines = [f"  spends:      {len(spends)} mechanism call{'' if len(spends) == 1 else 's'} "
                 "on the data, each with the (epsilon, delta) it certifies on its own"
                 + ("; share: of the Gaussian noise budget (1/sigma^2)" if shares else "")]
        lines.append(f"    {'#':>2}  {'epsilon':>8}  {'delta':>8}  {'share':>6}  {'releases':>8}  "
                     f"{'sensitivity':>11}  {'noise':>9}  mechanism")
        for i, spend in enumerate(spends, 1):
            eps_all, per_release = _spend_epsilon(spend)
            eps_text = f"{spend.epsilon:.4g}" + (" each" if per_release else "")
            share = f"{100 * shares[i - 1]:.1f} %" if shares else "-"
            mechanism = spend.mechanism + (
                f" [epsilon {eps_all:.4g} for its {spend.count} releases]" if per_release else "")
            lines.append(f"    {i:>2}  {eps_text:>8}  {spend.delta:>8.3g}  {share:>6}  "
                         f"{spend.count:>8}  {spend.sensitivity:>11.4g}  "
                         f"{spend.noise_scale:>9.4g}  {mechanism}")
        naive = self.naive_epsilon()
        releases = sum(s.count for s in spends)
        lines.append(f"  total:       epsilon = {self.epsilon:.4g} at delta = {self.delta:.3g}, "
                     + ("composed by dp-accounting" if releases > 1 else "its one spend"))
        lines.append(f"  naive sum:   epsilon = {naive:.4g} (the spends' epsilon added up; it "
                     f"would hold at delta = {sum(s.delta for s in spends):.3g})")
        if releases > 1 and self.epsilon < naive * (1 - 1e-9):
            sequential = self._sequential_epsilon()
            why = (PARALLEL_SENTENCE if self.epsilon < sequential * (1 - 1e-6)
                   else COMPOSITION_SENTENCE)
            lines.append(textwrap.fill(why, width=100, initial_indent="  ",
                                       subsequent_indent="  ", break_on_hyphens=False))
        elif releases > 1 and self.epsilon > naive * (1 + 1e-9):
            lines.append("  The total is above the naive sum: it is the record's own statement "
                         "(see the notes), which composing its spends does not tighten.")
        return lines

    def _sequential_epsilon(self) -> float:
        """ε at ``delta`` of the spends composed one after the other on the same records
        (their events; a spend without one by its pure ε), or -inf where that cannot be
        computed (then nothing is inferred from it)."""
        if self.delta <= 0 or any(s.dp_event is None and s.delta > 0 for s in self.spends):
            return -math.inf
        events = [s.event() for s in self.spends if s.dp_event is not None]
        pairs = [(float(s.epsilon), 0.0) for s in self.spends if s.dp_event is None
                 for _ in range(s.count)]
        try:
            return float(compose_epsilon(events, self.delta, pairs=pairs,
                                         tail=sum(s.tail * s.count for s in self.spends
                                                  if s.dp_event is not None)))
        except Exception:  # an event dp-accounting cannot compose: infer nothing
            return -math.inf

    @property
    def conditions(self) -> tuple[str, ...]:
        """What the guarantee rests on that the code cannot certify (the spends' distinct
        :attr:`PrivacySpend.condition`): empty when (ε, δ) is certified outright."""
        return tuple(dict.fromkeys(s.condition for s in self.spends if s.condition))

    def _provided(self) -> str:
        return "".join(f"; provided {c}" for c in self.conditions)

    def headline(self) -> str:
        """The guarantee in one line: (ε, δ), model, neighbours, sensitivity and noise, n, and
        any condition the guarantee rests on (:attr:`conditions`)."""
        kind = self.noise_kind
        if kind == "none":
            noise = "no noise"
        elif kind == "per-step":
            noise = "noise set step by step (see the spends)"
        else:
            sensitivity = "L1 sensitivity" if kind == "laplace" else "sensitivity"
            noise = (f"{sensitivity} {self.sensitivity:.4g}, {NOISE_LABELS[kind]} "
                     f"{self.noise_scale:.4g}")
        return (
            f"({self.epsilon:.4g}, {self.delta:.3g})-DP, {self.model} model, neighbours: "
            f"{self.neighbouring}; {noise} ({self.calibration})"
            + ("" if self.n_samples is None else f"; n={self.n_samples}") + self._provided()
        )


def _gaussian_rho(event: Any) -> float | None:
    """Σ 1/σ² of a Gaussian event (σ its noise multiplier), or None if it is not Gaussian."""
    if isinstance(event, dp_accounting.GaussianDpEvent):
        m = float(event.noise_multiplier)
        return 1.0 / m**2 if m > 0 else None
    if isinstance(event, dp_accounting.SelfComposedDpEvent):
        inner = _gaussian_rho(event.event)
        return None if inner is None else inner * int(event.count)
    if isinstance(event, dp_accounting.ComposedDpEvent):
        total = 0.0
        for part in event.events:
            rho = _gaussian_rho(part)
            if rho is None:
                return None
            total += rho
        return total
    return None


def _gaussian_shares(spends: tuple[PrivacySpend, ...]) -> list[float] | None:
    """Each spend's share of Σ 1/σ² (the Gaussian budget that ``budget_shares`` splits), or
    None unless every spend is a Gaussian event without tail."""
    rhos = []
    for spend in spends:
        rho = None if spend.dp_event is None or spend.tail else _gaussian_rho(spend.event())
        if rho is None:
            return None
        rhos.append(rho)
    total = sum(rhos)
    return [r / total for r in rhos] if total > 0 else None


def _spend_epsilon(spend: PrivacySpend) -> tuple[float, bool]:
    """The ε of all of ``spend``'s releases together, and whether its ``epsilon`` is stated
    per release (then that ε × ``count``, basic composition, is what a naive sum adds).

    Estimators state a multi-release spend either way (the release pipeline: the ε of all
    its rounds; a federated provider: the ε of one round); which one is read off its event.
    A spend without event counts each release at its ε, as the ledger composes it.
    """
    if spend.count <= 1:
        return float(spend.epsilon), False
    if spend.dp_event is None:
        return float(spend.epsilon) * spend.count, True
    per_release = _states_one_release(repr(spend.dp_event), spend.count, float(spend.epsilon),
                                      float(spend.delta), spend)
    return (float(spend.epsilon) * spend.count, True) if per_release else (
        float(spend.epsilon), False)


def _states_one_release(event_key: str, count: int, epsilon: float, delta: float,
                        spend: PrivacySpend) -> bool:
    """Whether ``epsilon`` is closer to one release's ε than to all ``count`` releases'."""
    key = (event_key, count, epsilon, delta)
    cached = _PER_RELEASE.get(key)
    if cached is not None:
        return cached
    try:
        one = compose_epsilon([spend.dp_event], delta) if delta > 0 else math.inf
        every = compose_epsilon([spend.event()], delta) if delta > 0 else math.inf
    except Exception:  # an event dp-accounting cannot compose: take the ε as stated
        one = every = math.inf
    answer = bool(math.isfinite(one) and abs(epsilon - one) < abs(epsilon - every))
    if len(_PER_RELEASE) < 1024:
        _PER_RELEASE[key] = answer
    return answer


_PER_RELEASE: dict[tuple[str, int, float, float], bool] = {}
