"""Composition of privacy losses with Google's ``dp-accounting``.

Convention used throughout privpca: every :class:`dp_accounting.GaussianDpEvent` carries the
noise multiplier ``σ/Δ``, where ``Δ`` is the L2 sensitivity *already derived for privpca's own
neighbouring relation* (usually replace-one). Such an event is a Gaussian mechanism whose two
neighbouring output distributions are ``N(0, σ²)`` and ``N(Δ, σ²)``; in ``dp-accounting`` that
is exactly the ``ADD_OR_REMOVE_ONE`` accounting of a unit-sensitivity query (its
``REPLACE_ONE`` mode would double the sensitivity a second time). The accountants below are
therefore always built with ``ADD_OR_REMOVE_ONE``; the neighbouring relation of the data is
stated in each :class:`~privpca.accounting.PrivacyRecord`.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import dp_accounting
from dp_accounting import pld, rdp

import privpca.accounting.calibration as calibration

__all__ = [
    "compose_epsilon",
    "compose_events",
    "epsilon_curve",
    "gaussian_noise_multiplier_for_composition",
]

_NEIGHBOURS = dp_accounting.NeighboringRelation.ADD_OR_REMOVE_ONE


def _make_accountant(accountant: str) -> dp_accounting.PrivacyAccountant:
    if accountant == "pld":
        return pld.PLDAccountant(_NEIGHBOURS, value_discretization_interval=1e-4)
    if accountant == "rdp":
        return rdp.RdpAccountant(neighboring_relation=_NEIGHBOURS)
    raise ValueError(f"accountant must be 'pld' or 'rdp'. Got {accountant!r} instead.")


def merge_gaussian_events(events: Iterable[dp_accounting.DpEvent]) -> list[dp_accounting.DpEvent]:
    """``events`` with every Gaussian release merged into one exactly equivalent event.

    Adaptively composed Gaussian mechanisms with multipliers ``mᵢ`` (each ``cᵢ`` times) have the
    privacy curve of one Gaussian with ``m = (Σ cᵢ/mᵢ²)^(-1/2)``: an identity, not a bound. The
    merged list composes faster and without the accountant's discretisation error per event.
    """
    inverse = 0.0
    rest: list[dp_accounting.DpEvent] = []
    stack = list(events)
    while stack:
        event = stack.pop(0)
        if isinstance(event, dp_accounting.ComposedDpEvent):
            stack[:0] = list(event.events)
        elif isinstance(event, dp_accounting.GaussianDpEvent):
            inverse += math.inf if event.noise_multiplier == 0 else event.noise_multiplier**-2
        elif isinstance(event, dp_accounting.SelfComposedDpEvent) and isinstance(
            event.event, dp_accounting.GaussianDpEvent
        ):
            m = event.event.noise_multiplier
            inverse += math.inf if m == 0 else event.count * m**-2
        else:
            rest.append(event)
    if inverse > 0:
        rest.append(dp_accounting.GaussianDpEvent(0.0 if math.isinf(inverse)
                                                  else inverse**-0.5))
    return rest


def compose_events(events: Iterable[dp_accounting.DpEvent]) -> dp_accounting.DpEvent:
    """One ``ComposedDpEvent`` of ``events`` (a single event is returned as is)."""
    events = merge_gaussian_events(events)
    if len(events) == 1:
        return events[0]
    return dp_accounting.ComposedDpEvent(events)


#: Finest discretisation of a privacy loss distribution (dp-accounting's default).
PLD_FINEST_INTERVAL = 1e-4
#: Largest number of discretisation steps across the range of the composed privacy loss: the
#: interval grows with the loss's scale, so memory and time stay bounded at any ε (a fixed
#: 1e-4 grid for ε = 10⁶ would need ~10¹⁰ bins). The estimate stays pessimistic (an upper
#: bound); its error is about one interval per composed distribution.
PLD_MAX_STEPS = 100_000
#: Beyond this scale of the privacy loss (ε ~ 10⁴) mixtures compose by basic composition.
PLD_MAX_SCALE = 1e4


def _flatten(events: Iterable[dp_accounting.DpEvent]) -> tuple[float, list[tuple[Any, int]]]:
    """``(Σ count/m², [(other event, count), ...])``: compositions unrolled, Gaussians merged.

    Adaptively composed Gaussian mechanisms are exactly one Gaussian with
    ``m = (Σ count/m²)^(-1/2)`` (see :func:`merge_gaussian_events`).
    """
    inverse = 0.0
    rest: list[tuple[Any, int]] = []
    stack: list[tuple[Any, int]] = [(e, 1) for e in events]
    while stack:
        event, count = stack.pop(0)
        if isinstance(event, dp_accounting.ComposedDpEvent):
            stack[:0] = [(e, count) for e in event.events]
        elif isinstance(event, dp_accounting.SelfComposedDpEvent):
            stack.insert(0, (event.event, count * int(event.count)))
        elif isinstance(event, dp_accounting.GaussianDpEvent):
            m = float(event.noise_multiplier)
            inverse += math.inf if m == 0 else count / m**2
        elif not isinstance(event, dp_accounting.NoOpDpEvent):
            rest.append((event, count))
    return inverse, rest


def epsilon_curve(
    events: Sequence[dp_accounting.DpEvent],
    pairs: Sequence[tuple[float, float]] = (),
) -> Callable[[float], float]:
    """``δ ↦ ε``: an upper bound on ε at δ for the adaptive composition of ``events`` and of
    mechanisms known only by an (ε, δ) guarantee (``pairs``).

    Gaussian events alone are composed exactly (one Gaussian, Balle & Wang's closed form, no
    discretisation). Otherwise the privacy loss distributions (pessimistic, dp-accounting) of
    the merged Gaussian, of each Laplace event and of each pair (the (ε, δ) dominating pair,
    ``privacy_loss_distribution.from_privacy_parameters``) are composed once, on a grid whose
    step grows with the scale of the loss (:data:`PLD_MAX_STEPS`), so the cost is bounded
    for any ε. An event of another kind (or a non-private one) makes the curve ``inf``.
    """
    inverse, rest = _flatten(events)
    pairs = [(float(e), float(d)) for e, d in pairs]
    if math.isinf(inverse) or any(not math.isfinite(e) or not 0 <= d < 1 for e, d in pairs):
        return lambda delta: math.inf
    if any(not isinstance(e, dp_accounting.LaplaceDpEvent) or not e.noise_multiplier > 0
           for e, _ in rest):
        return lambda delta: math.inf  # not composable here: never free
    multiplier = inverse**-0.5 if inverse > 0 else math.inf
    if not rest and not pairs:
        if inverse == 0:
            return lambda delta: 0.0
        return lambda delta: (calibration.certified_epsilon(multiplier, delta) if delta > 0
                              else math.inf)
    scale = sum(e for e, _ in pairs) + sum(c / float(e.noise_multiplier) for e, c in rest)
    if inverse > 0:
        scale += 0.5 * inverse + 10.0 * math.sqrt(inverse)  # mean and spread of the loss
    pure = sum(e for e, _ in pairs) + sum(c / float(e.noise_multiplier) for e, c in rest)
    pair_delta = sum(d for _, d in pairs)

    def basic(delta: float) -> float:
        # Basic composition, valid alongside: the PLD's grid can only lose against it.
        if inverse == 0:
            return pure if delta >= pair_delta else math.inf
        if delta <= pair_delta:
            return math.inf
        return pure + calibration.certified_epsilon(multiplier, delta - pair_delta)

    if scale > PLD_MAX_SCALE:
        return basic  # ε in the thousands: nothing private left for a tighter bound to save
    interval = max(PLD_FINEST_INTERVAL, scale / PLD_MAX_STEPS)
    dist = pld.privacy_loss_distribution.identity(value_discretization_interval=interval)
    if inverse > 0:
        dist = dist.compose(pld.privacy_loss_distribution.from_gaussian_mechanism(
            multiplier, value_discretization_interval=interval))
    for event, count in rest:
        laplace = pld.privacy_loss_distribution.from_laplace_mechanism(
            float(event.noise_multiplier), value_discretization_interval=interval)
        dist = dist.compose(laplace.self_compose(count) if count > 1 else laplace)
    for eps, dlt in pairs:
        dist = dist.compose(pld.privacy_loss_distribution.from_privacy_parameters(
            pld.common.DifferentialPrivacyParameters(eps, dlt),
            value_discretization_interval=interval))

    def at(delta: float) -> float:
        if delta <= 0:
            return math.inf
        eps = float(dist.get_epsilon_for_delta(delta))
        return min(eps if math.isfinite(eps) else math.inf, basic(delta))

    return at


def compose_epsilon(
    events: Sequence[dp_accounting.DpEvent],
    delta: float,
    *,
    accountant: str = "pld",
    tail: float = 0.0,
    pairs: Sequence[tuple[float, float]] = (),
) -> float:
    """An upper bound on ε at ``delta`` for the adaptive composition of ``events``.

    Parameters
    ----------
    events : sequence of dp_accounting.DpEvent
        Events following the module's convention (noise multiplier σ/Δ).
    delta : float
        Target δ of the composed guarantee.
    accountant : {"pld", "rdp"}, default="pld"
        Privacy-loss-distribution accounting (tight; Gaussian events alone are composed
        exactly, see :func:`epsilon_curve`) or Rényi-DP accounting (looser; ``pairs`` are
        then still composed by PLD).
    tail : float, default=0.0
        Total variation between the real mechanisms and the ``events`` they are coupled to,
        summed over both neighbouring datasets' sides as ``t`` per side (see
        :mod:`privpca.mechanisms.histogram`: a stability histogram is a noisy histogram over
        a fixed bin set except on an event of probability ``t``). The result then holds at
        ``δ_events + (1 + e^ε)·tail = delta``; solved by a monotone fixed point.
    pairs : sequence of (float, float), default=()
        Further mechanisms known only by an (ε, δ) guarantee, composed through their
        dominating pair (e.g. a fit whose parts are composed in parallel).

    Returns
    -------
    epsilon : float
        ``inf`` if any event is non-private or ``tail`` leaves no δ for the events.
    """
    if not events and not pairs:
        return 0.0 if tail <= 0 else (0.0 if 2 * tail <= delta else math.inf)
    if accountant not in ("pld", "rdp"):
        raise ValueError(f"accountant must be 'pld' or 'rdp'. Got {accountant!r} instead.")
    curve: Callable[[float], float]
    if accountant == "rdp" and not pairs:
        def curve(delta_events: float) -> float:
            if delta_events <= 0:
                return math.inf
            acc = _make_accountant("rdp")
            acc.compose(compose_events(events))
            eps = float(acc.get_epsilon(delta_events))
            return eps if math.isfinite(eps) else math.inf
    else:
        curve = epsilon_curve(events, pairs)

    if tail <= 0:
        return curve(delta)
    # ε(δ_events) decreases in δ_events and δ_events = delta − (1 + e^ε)·tail decreases in ε,
    # so iterating from ε = 0 increases monotonically to the smallest consistent ε.
    eps = 0.0
    for _ in range(50):
        new = curve(calibration.noise_delta(eps, delta, tail))
        if not math.isfinite(new) or new <= eps * (1 + 1e-9):
            return max(new, eps) if math.isfinite(new) else math.inf
        eps = new
    return eps


def gaussian_noise_multiplier_for_composition(
    epsilon: float, delta: float, count: int, *, accountant: str | None = None
) -> float:
    """The noise multiplier σ/Δ such that ``count`` Gaussian releases compose to (ε, δ).

    :func:`privpca.accounting.calibration.composed_gaussian_multiplier`: exactly
    ``√count·σ₁(ε, δ)`` for ``accountant=None``; ``"pld"``/``"rdp"`` instead bisect on that
    accountant of this module (slower, slightly more noise; the tests check the identity).
    """
    return calibration.composed_gaussian_multiplier(
        epsilon, delta, count,
        None if accountant is None else functools.partial(_make_accountant, accountant))
