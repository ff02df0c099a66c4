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
from collections.abc import Callable
from numbers import Integral, Real
from typing import Any, TypeVar

import numpy as np
from sklearn import get_config
from sklearn.base import _fit_context
from sklearn.utils._param_validation import Interval, RealNotInt, StrOptions

from privpca._validation import EPSILON_RANGE, NORM_BOUND_RANGE
from privpca.accounting.ledger import PrivacyLedger

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
    "LEARNING_RATE",
    "LEDGER",
    "LOCAL",
    "N_COMPONENTS",
    "N_COMPONENTS_OR_SHARE",
    "PIPELINE",
    "PRIVACY",
    "RANDOM_STATE",
    "SCALE",
    "SHUFFLE",
    "STOCHASTIC",
    "positive_int",
    "private_fit_context",
]

Constraints = list[Any]

#: ε of the whole fit: ε = ∞ (no privacy) and ε = 0 (nothing released) are refused.
EPSILON: Constraints = [Interval(Real, EPSILON_RANGE[0], EPSILON_RANGE[1], closed="both")]
#: δ of an (ε, δ) guarantee.
DELTA: Constraints = [Interval(Real, 0.0, 1.0, closed="neither")]
#: δ where δ = 0 (pure ε-DP) is meaningful (the exponential mechanism).
DELTA_OR_ZERO: Constraints = [Interval(Real, 0.0, 1.0, closed="left")]
#: k ≥ 1 (checked against p in the fit).
N_COMPONENTS: Constraints = [Interval(Integral, 1, None, closed="left")]
#: k ≥ 1, or a share of the private explained variance in (0, 1).
N_COMPONENTS_OR_SHARE: Constraints = [Interval(Integral, 1, None, closed="left"),
                                      Interval(RealNotInt, 0.0, 1.0, closed="neither")]
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
    "holdout_fraction": [Interval(Real, 0.0, 1.0, closed="neither")],
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
