"""The Gaussian mechanism: checked calibration, vector noise and symmetric-matrix noise.

A mechanism releases ``f(D) + Z`` with ``Z ~ N(0, σ² I)``. If ``f`` has L2 sensitivity ``Δ``
under the chosen neighbouring relation (``‖f(D) − f(D')‖₂ ≤ Δ`` for all neighbours), then:

* **analytic** calibration (Balle & Wang, 2018, Theorem 8; the default) is exact: (ε, δ)-DP
  for every ε > 0 and never more noise than the classic rule;
* **classic** calibration (Dwork & Roth, 2014, Theorem A.1), ``σ = Δ·√(2 ln(1.25/δ))/ε``,
  certifies (ε, δ)-DP only for ε < 1.

The formulas are in :mod:`privpca.accounting.calibration`; the functions here check their
arguments and warn where a calibration does not certify what was asked.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from typing import Literal

import dp_accounting
import numpy as np
from numpy.typing import NDArray

from privpca._validation import (
    caller_stacklevel,
    check_delta,
    check_epsilon,
    check_in_range,
    check_options,
)
from privpca.accounting.calibration import (
    analytic_gaussian_delta,
    analytic_multiplier,
    certified_epsilon,
    classic_sigma,
)
from privpca.exceptions import PrivacyLeakWarning
from privpca.mechanisms.noise import gaussian_release, symmetric_noise
from privpca.mechanisms.randomness import check_noise_rng

__all__ = [
    "Calibration",
    "GaussianMechanism",
    "analytic_gaussian_delta",
    "analytic_gaussian_sigma",
    "certified_epsilon",
    "classic_gaussian_sigma",
    "gaussian_sigma",
    "symmetric_gaussian_noise",
]

Calibration = Literal["analytic", "classic"]
CALIBRATIONS: tuple[str, ...] = ("analytic", "classic")


def analytic_gaussian_sigma(epsilon: float, delta: float, sensitivity: float = 1.0) -> float:
    """Smallest σ for which the Gaussian mechanism is (ε, δ)-DP (analytic calibration).

    Parameters
    ----------
    epsilon : float
        ε > 0 (any value: the analytic calibration is exact for all ε).
    delta : float
        0 < δ < 1.
    sensitivity : float, default=1.0
        L2 sensitivity Δ of the released quantity under the neighbouring relation in force.

    Returns
    -------
    sigma : float
        The noise standard deviation ``Δ · σ₁(ε, δ)``, where ``σ₁`` is the Δ = 1 value
        (:func:`privpca.accounting.calibration.analytic_multiplier`).
    """
    epsilon = check_epsilon(epsilon)
    delta = check_delta(delta)
    sensitivity = check_in_range(sensitivity, "sensitivity", low=0.0)
    return analytic_multiplier(epsilon, delta) * sensitivity


def classic_gaussian_sigma(epsilon: float, delta: float, sensitivity: float = 1.0) -> float:
    """``σ = Δ·√(2 ln(1.25/δ))/ε`` (Dwork & Roth 2014, Theorem A.1).

    Warns
    -----
    PrivacyLeakWarning
        When ε ≥ 1, where this σ does not certify (ε, δ)-DP. Use the analytic calibration.
    """
    epsilon = check_epsilon(epsilon)
    delta = check_delta(delta)
    sensitivity = check_in_range(sensitivity, "sensitivity", low=0.0)
    sigma = classic_sigma(epsilon, delta, sensitivity)
    if epsilon >= 1.0:
        # Say what the noise does certify: at ε = 4 it is often stronger than asked.
        certified = certified_epsilon(sigma, delta, sensitivity)
        how = ("at least as strong as asked" if certified <= epsilon
               else "WEAKER than asked")
        warnings.warn(
            f"The classic Gaussian calibration is proven only for epsilon < 1; got "
            f"epsilon={epsilon:g}. Its noise certifies ({certified:.4g}, {delta:g})-DP by the "
            f"exact analysis, {how}; the privacy record reports that epsilon. Use "
            "calibration='analytic' for an exact calibration at any epsilon.",
            PrivacyLeakWarning,
            stacklevel=caller_stacklevel(),
        )
    return sigma


def gaussian_sigma(
    epsilon: float, delta: float, sensitivity: float = 1.0, calibration: str = "analytic"
) -> float:
    """Noise standard deviation for ``calibration`` in ``{"analytic", "classic"}``."""
    calibration = check_options(calibration, "calibration", CALIBRATIONS)
    if calibration == "analytic":
        return analytic_gaussian_sigma(epsilon, delta, sensitivity)
    return classic_gaussian_sigma(epsilon, delta, sensitivity)


def symmetric_gaussian_noise(
    n_features: int, scale: float, rng: np.random.Generator
) -> NDArray[np.float64]:
    """A symmetric matrix with i.i.d. ``N(0, scale²)`` upper triangle (diagonal included).

    The lower triangle mirrors the upper one. Exactly ``p(p+1)/2`` normal draws are made, in
    the row-major order of the packed upper triangle (row 0 first), so the matrix equals
    ``unpack_upper_triangle(scale * rng.standard_normal(p(p+1)/2))`` for the same generator
    state. In secure mode ``rng`` must be an OS-keyed SecureGenerator (a seeded one is
    refused: :func:`privpca.mechanisms.randomness.check_noise_rng`).
    """
    rng = check_noise_rng(rng, owner="symmetric_gaussian_noise")
    return symmetric_noise(int(n_features), scale, rng)


@dataclass(frozen=True)
class GaussianMechanism:
    """A calibrated Gaussian mechanism for a query of known L2 sensitivity.

    Parameters
    ----------
    epsilon, delta : float
        Target privacy parameters.
    sensitivity : float
        L2 sensitivity Δ of the query under ``neighbouring``.
    calibration : {"analytic", "classic"}, default="analytic"
        How σ is derived from (ε, δ, Δ); see the module docstring.
    neighbouring : str, default="replace-one"
        The neighbouring relation under which ``sensitivity`` was derived (documentation only;
        it is carried into the privacy record).

    Attributes
    ----------
    sigma : float
        The noise standard deviation per coordinate.
    certified_epsilon : float
        The ε that σ actually certifies at ``delta``: equal to ``epsilon`` for the analytic
        calibration, at most ``epsilon`` for classic with ε < 1.
    """

    epsilon: float
    delta: float
    sensitivity: float
    calibration: str = "analytic"
    neighbouring: str = "replace-one"
    sigma: float = field(init=False)

    def __post_init__(self) -> None:
        check_epsilon(self.epsilon, owner="GaussianMechanism")
        check_delta(self.delta, owner="GaussianMechanism")
        check_in_range(self.sensitivity, "sensitivity", low=0.0, owner="GaussianMechanism")
        check_options(self.calibration, "calibration", CALIBRATIONS, owner="GaussianMechanism")
        sigma = gaussian_sigma(self.epsilon, self.delta, self.sensitivity, self.calibration)
        object.__setattr__(self, "sigma", sigma)  # computed once: the classic rule may warn

    @property
    def noise_multiplier(self) -> float:
        """σ/Δ, the quantity ``dp-accounting`` composes."""
        return self.sigma / self.sensitivity

    @property
    def certified_epsilon(self) -> float:
        if self.calibration == "analytic":
            return float(self.epsilon)
        return certified_epsilon(self.sigma, self.delta, self.sensitivity)

    def dp_event(self) -> dp_accounting.GaussianDpEvent:
        """The ``dp-accounting`` event of one release (noise multiplier σ/Δ)."""
        return dp_accounting.GaussianDpEvent(self.noise_multiplier)

    def randomise(
        self, value: NDArray[np.float64], rng: np.random.Generator
    ) -> NDArray[np.float64]:
        """Return ``value + N(0, σ²)`` noise of the same shape (a new array).

        In secure mode ``rng`` must be None or an OS-keyed SecureGenerator; anything seeded is
        refused before the value is read (:func:`privpca.mechanisms.randomness.check_noise_rng`).
        """
        rng = check_noise_rng(rng, owner="GaussianMechanism")
        value = np.asarray(value, dtype=np.float64)
        return np.asarray(gaussian_release(value, self.sigma, rng,
                                           sensitivity=self.sensitivity))
