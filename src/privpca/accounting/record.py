"""What a fitted estimator spent: :class:`PrivacySpend` and :class:`PrivacyRecord`."""

from __future__ import annotations

import math
from dataclasses import InitVar, asdict, dataclass, field
from typing import Any

import dp_accounting

from privpca._config import NOISE_MODE_NOTES, current_noise_mode
from privpca.accounting.composition import compose_epsilon
from privpca.accounting.neighbouring import Neighbouring

__all__ = ["NOISE_LABELS", "PrivacyRecord", "PrivacySpend"]

#: What a record's ``noise_scale`` measures, by the law of its main noise
#: (:attr:`PrivacyRecord.noise_kind`).
NOISE_LABELS: dict[str, str] = {
    "gaussian": "noise std",
    "laplace": "Laplace scale b",
    "exponential": "temperature",
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
    """

    mechanism: str
    epsilon: float
    delta: float
    sensitivity: float
    noise_scale: float
    count: int = 1
    dp_event: dp_accounting.DpEvent | None = field(default=None, compare=False)
    tail: float = 0.0

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
            + ("" if self.n_samples is None else f"; n={self.n_samples}")
        )
