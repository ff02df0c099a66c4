"""Calibration: every (ε, δ) → noise-parameter formula of privpca, in this one module.

A calibration turns a privacy target into the parameter of a noise law: the standard deviation
σ of Gaussian noise, the scale b of Laplace noise, a flip probability, the share of δ that a
stability histogram's threshold may leave out. Each is a pure function of public quantities:
nothing here reads data or draws noise (:mod:`privpca.mechanisms.noise` does that).

Conventions
-----------
* **Sensitivity Δ**: the largest change of the released value between two neighbouring
  datasets, in the norm the noise is calibrated to (L2 for Gaussian noise, L1 for Laplace). It
  must be derived for the neighbouring relation in force (replace-one in most of privpca,
  add/remove where an estimator says so); a calibration certifies (ε, δ)-DP under that relation
  and no other. The functions below take Δ as given.
* **Noise multiplier** ``m = σ/Δ``: the σ of a unit-sensitivity query, the number
  ``dp-accounting`` composes (:mod:`privpca.accounting.composition`).

Every formula is kept as it was written where it came from, operation for operation: seeded
fits reproduce bit for bit. This module imports nothing of privpca (the ground floor,
tests/test_architecture.py), so the accounting can use it; the two searches that need an
accountant take it as an argument. tests/test_calibration_one_place.py fails when a calibration
is written anywhere else.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence

import dp_accounting
from scipy.stats import norm

__all__ = ["analytic_gaussian_delta", "analytic_multiplier", "certified_epsilon", "classic_sigma",
           "composed_gaussian_multiplier", "composed_laplace_scale", "laplace_scale",
           "noise_delta", "share_multiplier", "split_tail", "threshold_tail",
           "unary_encoding_flip_probability"]

# ------------------------------------------------------------------------------ Gaussian noise


def analytic_gaussian_delta(sigma: float, epsilon: float, sensitivity: float = 1.0) -> float:
    """The exact δ(ε) of the Gaussian mechanism (Balle & Wang 2018, Theorem 8).

    ``δ = Φ(Δ/(2σ) − εσ/Δ) − e^ε Φ(−Δ/(2σ) − εσ/Δ)`` for noise ``N(0, σ²)`` on a query of L2
    sensitivity Δ (any neighbouring relation: Δ is derived for it), computed in log space for
    stability. The tests check :func:`analytic_multiplier` against it.
    """
    a = sensitivity / (2.0 * sigma)
    b = epsilon * sigma / sensitivity
    first = norm.cdf(a - b)
    second = math.exp(epsilon + norm.logcdf(-a - b))
    return float(max(first - second, 0.0))


@functools.lru_cache(maxsize=1024)  # public floats; refits reuse (ε, δ) many times
def analytic_multiplier(epsilon: float, delta: float) -> float:
    """The smallest noise multiplier ``σ₁ = σ/Δ`` for which the Gaussian mechanism is (ε, δ)-DP.

    Analytic calibration (Balle & Wang 2018, Theorem 8): the root in σ of
    ``analytic_gaussian_delta(σ, ε, 1) = δ``, solved by ``dp_accounting.get_sigma_gaussian``
    (to 1e-12). Exact for every ε > 0 and never above :func:`classic_sigma`.

    Parameters
    ----------
    epsilon : float
        ε > 0 (``inf`` gives 0).
    delta : float
        0 < δ < 1.

    Returns
    -------
    multiplier : float
        ``σ₁``: the noise for a query of L2 sensitivity Δ is ``σ₁·Δ``, (ε, δ)-DP under the
        neighbouring relation Δ was derived for.

    Notes
    -----
    Above ε = :data:`TAIL_EPSILON` the root's absolute tolerance is no longer small beside σ₁
    (an outside tester measured δ 8× the target at ε = 10¹²), so the multiplier is raised to
    the closed-form tail bound: the privacy loss is ``N(μ, 2μ)`` with ``μ = 1/(2σ₁²)`` and
    ``δ(ε) ≤ P(loss > ε)``, which is δ at ``1/σ₁ = √(z² + 2ε) − z``, ``z = Φ⁻¹(1 − δ)``
    (at most 5·10⁻⁴ more noise at ε = 10³, 5·10⁻⁷ at 10⁶). Below it the root overshoots δ
    by at most ~10⁻¹² of δ (rounding; tests/test_gaussian_mechanism.py checks at 80 digits).
    """
    multiplier = float(dp_accounting.get_sigma_gaussian(epsilon, delta))
    if epsilon > TAIL_EPSILON and math.isfinite(epsilon):
        z = float(norm.isf(delta))
        multiplier = max(multiplier, 1.0 / (math.sqrt(z * z + 2.0 * epsilon) - z))
    return multiplier


#: Above this ε :func:`analytic_multiplier` takes the closed-form tail bound where it is larger.
TAIL_EPSILON = 1e3


def classic_sigma(epsilon: float, delta: float, sensitivity: float = 1.0) -> float:
    """``σ = Δ·√(2 ln(1.25/δ))/ε``: the classic Gaussian calibration (Dwork & Roth 2014, Thm A.1).

    Certifies (ε, δ)-DP only for ε < 1 (:func:`privpca.mechanisms.classic_gaussian_sigma`
    checks the arguments and warns); Δ is the L2 sensitivity under the relation in force.
    """
    return sensitivity * math.sqrt(2.0 * math.log(1.25 / delta)) / epsilon


def certified_epsilon(sigma: float, delta: float, sensitivity: float = 1.0) -> float:
    """The smallest ε for which noise σ on a query of L2 sensitivity Δ is (ε, δ)-DP (exact).

    The inverse of :func:`analytic_multiplier` in ε (Balle & Wang 2018, Theorem 8, solved by
    ``dp_accounting.get_epsilon_gaussian``) at the multiplier ``σ/Δ``; Δ is derived for the
    neighbouring relation in force. With the default Δ = 1, ``sigma`` is a multiplier.
    """
    return float(dp_accounting.get_epsilon_gaussian(sigma / sensitivity, delta))


def share_multiplier(multiplier: float, share: float = 1.0, count: int = 1) -> float:
    """The multiplier of one release of a part given ``share`` of a Gaussian budget.

    ``mᵢ = m·√count/√share``. Gaussian mechanisms compose in ``1/m²`` (zCDP's
    ``ρ = 1/(2m²)``; the privacy-loss variables are Gaussian and add), so parts with shares
    ``wᵢ`` summing to 1, part i released ``cᵢ`` times at ``m√cᵢ/√wᵢ``, compose to exactly the
    one Gaussian of multiplier ``m``, i.e. to the (ε, δ) that ``m`` was calibrated for
    (:mod:`privpca.pipeline.budget`). Written so that a share of 1 and one release return
    ``m`` itself.
    """
    mult = multiplier if share == 1.0 else multiplier / math.sqrt(share)
    if count > 1:
        mult = mult * math.sqrt(count)
    return mult


def composed_gaussian_multiplier(epsilon: float, delta: float, count: int, make_accountant:
                                 Callable[[], dp_accounting.PrivacyAccountant] | None = None
                                 ) -> float:
    """The multiplier σ/Δ such that ``count`` adaptive Gaussian releases compose to (ε, δ).

    Exactly ``√count·σ₁(ε, δ)`` (:func:`share_multiplier`, :func:`analytic_multiplier`): the
    composition of ``count`` Gaussians of multiplier ``m`` has the privacy curve of one of
    multiplier ``m/√count``. With ``make_accountant`` (a factory of a ``dp-accounting``
    accountant, :func:`privpca.accounting.gaussian_noise_multiplier_for_composition`), the
    multiplier is instead bisected with ``dp_accounting.calibrate_dp_mechanism`` on that
    accountant (slower, slightly more noise; the tests use it to check the identity).

    Raises
    ------
    ValueError
        When ``count`` is not a positive int.
    """
    if not isinstance(count, int) or count < 1:
        raise ValueError(f"count must be a positive int. Got {count!r} instead.")
    exact = share_multiplier(analytic_multiplier(epsilon, delta), 1.0, count)
    if make_accountant is None or count == 1:
        return exact
    bracket = dp_accounting.ExplicitBracketInterval(0.999 * exact, 1.5 * exact)
    return float(dp_accounting.calibrate_dp_mechanism(
        make_accountant,
        lambda m: dp_accounting.SelfComposedDpEvent(dp_accounting.GaussianDpEvent(m), count),
        epsilon, delta, bracket, tol=1e-6))


# ------------------------------------------------------------------------------- Laplace noise


def laplace_scale(epsilon: float, sensitivity: float = 1.0) -> float:
    """``b = Δ/ε``: Laplace noise of scale b on a query of L1 sensitivity Δ is pure ε-DP.

    Dwork, McSherry, Nissim & Smith 2006 (Dwork & Roth 2014, Theorem 3.6), under the
    neighbouring relation Δ was derived for. By basic composition, ``Δ = count`` also covers
    ``count`` unit-sensitivity releases at a total ε.
    """
    return sensitivity / epsilon


@functools.lru_cache(maxsize=256)  # a pure function of public parameters: solve it once
def composed_laplace_scale(epsilon: float, delta: float, count: int,
                           compose: Callable[[Sequence[dp_accounting.DpEvent], float], float]
                           ) -> float:
    """Smallest Laplace scale ``b`` with ``count`` L1-sensitivity-1 releases (ε, δ)-DP.

    Bisection on the privacy loss distribution's composition ``compose`` (privpca's
    bounded-grid :func:`privpca.accounting.compose_epsilon`, passed in by the caller because
    this module is below the accounting): the grid of dp-accounting's own calibration is fixed
    at 1e-4, so its memory grew with ε (a huge ε asked for petabytes). The answer is certified
    (the PLD is pessimistic) and never above basic composition's ``count/ε``
    (:func:`laplace_scale`).
    """
    pure = laplace_scale(epsilon, count)  # basic composition: always enough
    if count == 1 or delta <= 0 or epsilon > 5.0 * count:
        return pure  # (beyond ε = 5 per release composition gains nothing that matters)

    def enough(b: float) -> bool:
        event = dp_accounting.SelfComposedDpEvent(dp_accounting.LaplaceDpEvent(b), count)
        return compose([event], delta) <= epsilon

    low, high = pure / (4.0 * math.sqrt(count)), pure
    if not enough(pure / 1.001):
        return pure  # composition saves nothing here (few releases, small δ)
    if enough(low):
        return low
    while high / low > 1.0 + 1e-3:  # geometric bisection, ~11 steps; ends on a valid b
        mid = math.sqrt(low * high)
        low, high = (low, mid) if enough(mid) else (mid, high)
    return high


# ---------------------------------------------------------- stability histograms, unary encoding


def threshold_tail(epsilon: float, delta: float, tail_fraction: float) -> float:
    """The tail ``t = f·δ/(1 + e^ε)`` that a stability histogram's threshold leaves out, for
    the share ``f = tail_fraction`` of δ that pays for it (written so that a large ε cannot
    overflow).

    A histogram whose threshold lets an empty bin through with probability ``t`` per side is
    ``(ε, δ_noise + (1 + e^ε)·t)``-DP (:mod:`privpca.mechanisms.histogram`, replace one
    record), so this ``t`` costs exactly ``f·δ``.

    Raises
    ------
    ValueError
        When ``t`` underflows float64 (ε above about 700).
    """
    tail = tail_fraction * delta * math.exp(-epsilon) / (1.0 + math.exp(-epsilon))
    if not tail > 0:
        raise ValueError(
            f"epsilon={epsilon:g} is too large for a stability histogram: its tail "
            "delta/(1 + e^epsilon) underflows float64 (epsilon > ~700 leaves nothing "
            "private to protect; use a smaller epsilon)."
        )
    return tail


def noise_delta(epsilon: float, delta: float, tail: float) -> float:
    """``δ − (1 + e^ε)·t``: the δ left to the noise of mechanisms whose thresholds leave out a
    total tail ``t`` (per side), at a target (ε, δ); ε is capped at 700 against overflow."""
    return delta - (1.0 + math.exp(min(epsilon, 700.0))) * tail


def split_tail(epsilon: float, delta: float, tail_fraction: float) -> tuple[float, float]:
    """``(t, δ_noise)`` with ``t = f·δ/(1 + e^ε)`` and ``δ_noise = δ − (1 + e^ε)·t``.

    The release pipeline's split (:mod:`privpca.pipeline.budget`). It is
    :func:`threshold_tail` and ``(1 − f)·δ`` spelled differently (ε capped at 700 rather than
    ``e^{−ε}``); the two differ in the last bit and seeded fits depend on each, so both stay.
    """
    tail = tail_fraction * delta / (1.0 + math.exp(min(epsilon, 700.0)))
    return tail, noise_delta(epsilon, delta, tail)


def unary_encoding_flip_probability(epsilon: float) -> float:
    """``q = 1/(1 + e^ε)``: optimal unary encoding (Wang, Blocki, Li & Jha 2017) is pure ε-LDP.

    Each user sends the one-hot vector of their bin, keeping a 1-bit with probability ½ and
    setting a 0-bit with probability ``q``. Replacing the user's value moves two bits (L1
    sensitivity 2); the likelihood ratio of a report is at most ``½(1 − q)/(½q) = e^ε``. No
    sensitivity enters: it is the user's whole record. ε is capped at 700.
    """
    return 1.0 / (1.0 + math.exp(min(epsilon, 700.0)))
