"""Declared parameter constraints, as scikit-learn's ``_parameter_constraints``.

Each estimator declares, next to its constructor, what every parameter may be; the one fit
checks the declaration first (:meth:`BaseEstimator._validate_params`, scikit-learn's own
machinery), before the input is read or anything is booked, so a wrong type or a value out of
range is refused with scikit-learn's message (``The 'epsilon' parameter of AnalyzeGaussPCA must
be a float in the range [1e-09, 1000000000000.0]. Got -1 instead.``) and its
:class:`~sklearn.utils._param_validation.InvalidParameterError` (a ValueError and a
TypeError). What depends on the data's public shape (``n_components`` ≤ p, an array of p
scales) is checked in the estimator's ``_plan`` with the same wording.

The shared declarations live here so that every estimator states ε, δ, the bound, the
centring and the randomness the same way.
"""

from __future__ import annotations

import functools
import math
import warnings
from collections.abc import Callable
from numbers import Integral, Real
from typing import Any, TypeVar

import numpy as np
from sklearn import get_config
from sklearn.base import _fit_context
from sklearn.utils._param_validation import Hidden, Interval, RealNotInt, StrOptions

from privpca._config import large_delta_allowed
from privpca._validation import (
    EPSILON_RANGE,
    LARGE_DELTA,
    NORM_BOUND_RANGE,
    SMALLEST_DELTA,
    caller_stacklevel,
)
from privpca.accounting.ledger import PrivacyLedger
from privpca.exceptions import LargeDeltaWarning

__all__ = [
    "BUDGET_SHARES",
    "CENTERING",
    "DATA_NORM",
    "DATA_NORM_SELECT",
    "DELTA",
    "DELTA_OR_ZERO",
    "EPSILON",
    "GRAM_PIPELINE",
    "HOLDOUT_FRACTION",
    "LARGE_DELTA",
    "LEARNING_RATE",
    "LEDGER",
    "LOCAL",
    "N_COMPONENTS",
    "N_COMPONENTS_OR_SHARE",
    "N_COMPONENTS_SPECTRUM",
    "PIPELINE",
    "PRIVACY",
    "RANDOM_STATE",
    "SCALE",
    "SHUFFLE",
    "STOCHASTIC",
    "WHITEN",
    "DeltaRange",
    "positive_int",
    "private_fit_context",
    "warn_if_delta_large",
]

Constraints = list[Any]

#: ε of the whole fit: ε = ∞ (no privacy) and ε = 0 (nothing released) are refused.
EPSILON: Constraints = [Interval(Real, EPSILON_RANGE[0], EPSILON_RANGE[1], closed="both")]


class DeltaRange(Interval):
    """δ in (0, :data:`LARGE_DELTA`) (``[0, ...)`` where pure ε-DP is meaningful); in (0, 1)
    inside ``privpca.config_context(allow_large_delta=True)``, the forced range of a paper's
    grid or an audit probe (read when the fit checks its parameters, in the fit's thread).

    scikit-learn's :class:`~sklearn.utils._param_validation.Interval`, so the refusal is its
    ``InvalidParameterError`` with its wording, plus how to force a larger δ.
    """

    def __init__(self, *, closed: str) -> None:
        super().__init__(Real, 0.0, LARGE_DELTA, closed=closed)

    def __contains__(self, val: Any) -> bool:
        inside = (Interval(Real, 0.0, 1.0, closed=self.closed).__contains__(val)
                  if large_delta_allowed() else super().__contains__(val))
        return bool(inside) and (val == 0 or val >= SMALLEST_DELTA)

    def __str__(self) -> str:
        floor = f", and 0 or at least {SMALLEST_DELTA:g}" if self.closed == "left" else \
            f", at least {SMALLEST_DELTA:g}"
        if large_delta_allowed():
            return str(Interval(Real, 0.0, 1.0, closed=self.closed)) + floor
        return (f"{super().__str__()}{floor} (δ is the probability that the guarantee may fail "
                "outright and should be well below 1/n; a larger δ, for a paper's grid or an "
                "audit probe, only inside privpca.config_context(allow_large_delta=True))")


#: δ of an (ε, δ) guarantee: (0, 0.1), or (0, 1) when forced (:class:`DeltaRange`).
DELTA: Constraints = [DeltaRange(closed="neither")]
#: δ where δ = 0 (pure ε-DP) is meaningful (the exponential mechanism): [0, 0.1), or [0, 1).
DELTA_OR_ZERO: Constraints = [DeltaRange(closed="left")]


def warn_if_delta_large(owner: object, planned: Any) -> None:
    """Warn (:class:`~privpca.exceptions.LargeDeltaWarning`) when the planned record's δ is
    not below 1/n for its public number of records n.

    Called by the one fit after the plan, before anything is charged. ``planned`` is the
    planned :class:`~privpca.accounting.PrivacyRecord`: its ``n_samples`` is the public n of
    the replace-one relation, ``None`` under add/remove-one neighbours (where n is private:
    nothing is said).
    """
    n, delta = getattr(planned, "n_samples", None), float(getattr(planned, "delta", 0.0))
    if n is None or n <= 0 or delta <= 0 or delta * n < 1:
        return
    warnings.warn(
        f"{type(owner).__name__}: delta={delta:g} is not below 1/n = 1/{n} = {1 / n:.3g}. δ "
        "is the probability that the guarantee may fail outright: a mechanism that "
        "publishes each record in full with probability δ is (0, δ)-DP, and here it would "
        f"publish about δ·n = {delta * n:.3g} records. δ should be well below 1/n, e.g. "
        f"delta={_suggested_delta(n):g} (below 1/n²).",
        LargeDeltaWarning,
        stacklevel=caller_stacklevel(),
    )


def _suggested_delta(n: int) -> float:
    """A round δ ≤ 1/n² (1, 2 or 5 times a power of ten), for the warning's advice."""
    bound = 1.0 / float(n) ** 2
    exponent = math.floor(math.log10(bound))
    for mantissa in (5.0, 2.0, 1.0):
        if mantissa * 10.0**exponent <= bound:
            return mantissa * 10.0**exponent
    return 10.0**exponent


#: k ≥ 1 (checked against p in the fit).
N_COMPONENTS: Constraints = [Interval(Integral, 1, None, closed="left")]
#: k ≥ 1, or a share of the private explained variance in (0, 1).
N_COMPONENTS_OR_SHARE: Constraints = [Interval(Integral, 1, None, closed="left"),
                                      Interval(RealNotInt, 0.0, 1.0, closed="neither")]
#: As :data:`N_COMPONENTS_OR_SHARE`, or scikit-learn's ``None`` (every component) and
#: ``"mle"`` (declared so that its refusal says why: the release's noise defeats Minka's
#: choice; hidden from the range message, which would list it as allowed): the estimators
#: that release the whole noisy matrix (Analyze Gauss, MOD-SuLQ, the
#: local Gaussian protocol).
N_COMPONENTS_SPECTRUM: Constraints = [*N_COMPONENTS_OR_SHARE, Hidden(StrOptions({"mle"})), None]
#: ``"private"``, None (uncentred) or a public mean of shape (p,) (shape checked in the fit).
CENTERING: Constraints = [StrOptions({"private"}), None, "array-like"]
#: ``"auto"`` (a private quantile of the norms) or a public bound D.
DATA_NORM: Constraints = [StrOptions({"auto"}),
                          Interval(Real, NORM_BOUND_RANGE[0], NORM_BOUND_RANGE[1],
                                   closed="both")]
#: False, True (private scales) or public scales of shape (p,).
SCALE: Constraints = ["boolean", "array-like"]
#: Part → share of the budget, or None for the defaults (parts checked by the pipeline).
BUDGET_SHARES: Constraints = [dict, None]
#: ``"auto"``, None or the fraction of the rows held out for the preprocessing.
HOLDOUT_FRACTION: Constraints = [StrOptions({"auto"}), None,
                                 Interval(Real, 0.0, 0.5, closed="right")]
#: None (fresh OS entropy), a seed, a SeedSequence or a Generator (strict secure mode: None only,
#: refused by the fit's booking with its own message).
RANDOM_STATE: Constraints = [None, Interval(Integral, 0, None, closed="left"),
                             np.random.SeedSequence, np.random.Generator]
#: Where the spend is recorded.
LEDGER: Constraints = [None, PrivacyLedger]
#: Whether ``transform`` divides the projections by ``sqrt(explained_variance_)``
#: (scikit-learn's ``whiten``; post-processing of released values, no fit reads it).
WHITEN: Constraints = ["boolean"]

#: What every private estimator takes: its guarantee, its randomness and its ledger.
PRIVACY: dict[str, Constraints] = {
    "epsilon": EPSILON,
    "delta": DELTA,
    "centering": CENTERING,
    "random_state": RANDOM_STATE,
    "ledger": LEDGER,
}

#: ``data_norm`` of the central Gram-based estimators: ``"auto"`` is ``"select"`` there (the
#: bound chosen for the table by :mod:`privpca.pipeline.bound_selection`), ``"quantile"`` the
#: private 0.99-quantile alone (``"auto"`` of the other estimators).
DATA_NORM_SELECT: Constraints = [StrOptions({"auto", "select", "quantile"}), *DATA_NORM[1:]]

#: The parameters every estimator on the release pipeline shares.
PIPELINE: dict[str, Constraints] = {
    **PRIVACY,
    "n_components": N_COMPONENTS_OR_SHARE,
    "data_norm": DATA_NORM,
    "scale": SCALE,
    "budget_shares": BUDGET_SHARES,
    "holdout_fraction": HOLDOUT_FRACTION,
}


def positive_int(low: int = 1) -> Constraints:
    """An int ≥ ``low``."""
    return [Interval(Integral, low, None, closed="left")]


#: The release pipeline's parameters for the central estimators whose statistic is the Gram
#: (Analyze Gauss, MOD-SuLQ, noisy power, Bingham).
GRAM_PIPELINE: dict[str, Constraints] = {**PIPELINE, "data_norm": DATA_NORM_SELECT}


#: ``"auto"``, c₁ > 0 or a pair (c₁, c₂) of the step size η_t = c₁/(c₂ + t) (values checked
#: by the solver).
LEARNING_RATE: Constraints = [StrOptions({"auto"}), Interval(Real, 0.0, None, closed="neither"),
                              tuple, list]
#: ``"auto"`` (in memory: a random order) or a bool.
SHUFFLE: Constraints = [StrOptions({"auto"}), "boolean"]

#: The parameters the streaming gradient estimators with a held-out share (Private Oja,
#: DP-PCA) share.
STOCHASTIC: dict[str, Constraints] = {
    **PRIVACY,
    "n_components": N_COMPONENTS,
    "learning_rate": LEARNING_RATE,
    "shuffle": SHUFFLE,
    "holdout_fraction": [StrOptions({"auto"}), Interval(Real, 0.0, 1.0, closed="neither")],
    "stream_centering": [StrOptions({"mean", "pairs"})],
    "budget_shares": BUDGET_SHARES,
}

#: The parameters of the local-model estimators.
LOCAL: dict[str, Constraints] = {
    **PRIVACY,
    "n_components": N_COMPONENTS_OR_SHARE,
    "data_norm": DATA_NORM,
    "scale": SCALE,
    "calibration": [StrOptions({"analytic", "classic"})],
    "sensitivity": [StrOptions({"replace", "paper"})],
}


_Fit = TypeVar("_Fit", bound=Callable[..., Any])


def private_fit_context(fit: _Fit) -> _Fit:
    """scikit-learn's ``_fit_context`` for a private fit, whose declared values are checked
    even under ``sklearn.config_context(skip_parameter_validation=True)``.

    ε, δ and the bound are the guarantee: a global switch meant for speed must not let
    ``epsilon=0`` reach the accountant (whose errors would not name the parameter) or a
    negative bound reach the clipping.
    """
    in_context = _fit_context(prefer_skip_nested_validation=True)(fit)

    @functools.wraps(fit)
    def checked(estimator: Any, *args: Any, **kwargs: Any) -> Any:
        if get_config()["skip_parameter_validation"]:
            estimator._validate_params()
        return in_context(estimator, *args, **kwargs)

    return checked  # type: ignore[return-value]
