"""Privacy amplification by shuffling (Feldman, McMillan & Talwar 2021), evaluated numerically.

Setting (Private Oja, Algorithm 2 of Liu et al.): the records are put in a uniformly random
order and processed one at a time; step ``t`` applies a local randomiser ``R_t`` — an
``(ε₀, δ₀)``-DP function of one record, chosen adaptively from the earlier outputs — and the
whole sequence of outputs is released. FMT's Theorem 3.8 (the adaptive, approximate-DP form of
their Theorem 3.1, quoted by Liu et al. as Theorem D.1) then gives, for any ``δ′ ∈ (0, 1)``
with ``ε₀ ≤ ln(n / (16 ln(2/δ′)))``, an ``(ε, δ)``-DP guarantee with

``ε = ln(1 + (e^ε₀ − 1)/(e^ε₀ + 1) · (8√(e^ε₀ ln(4/δ′))/√n + 8e^ε₀/n))``,
``δ = δ′ + (e^ε + 1)(1 + e^{−ε₀}/2)·n·δ₀``.

**Checked against the authors' reference code** (``closedformanalysis`` in
apple/ml-shuffling-amplification, issue 14): it states the bound as
``ε = ln(1 + b/d · (a + c))`` with ``a + c`` the bracket above, ``b = 1 − e^{−ε₀}`` and
``d = 1 + e^{−ε₀ − ln(1 + a + c)}``, and the condition as ``ε₀ ≤ ln(n/(16 ln(4/δ′)))``. Its
``b/d`` is never below the paper's ``(e^ε₀ − 1)/(e^ε₀ + 1) = b/(1 + e^{−ε₀})``, so the
printed theorem certifies a smaller ε: 10 % smaller at n = 10⁴, ε₀ = 0.5, δ′ = 10⁻⁶ (0.094
against 0.105), 1–4 % at n = 10⁵–10⁶. We use the larger of the two and the stricter
condition, so the guarantee claimed is never below what either form gives.

:func:`local_epsilon_for_shuffling` inverts this bound by bisection (it increases in ``ε₀``),
so users give the central (ε, δ) they want and never an unspecified constant ``C``. Where the
condition on ``ε₀`` cannot be met for the requested ε, the bound does not apply and
:class:`ShufflingBoundError` says so; Liu et al. state the same restriction as
``ε = O(√(log(n/δ)/n))``.

:func:`secret_permutation` draws the shuffle itself (and the in-memory held-out split of the
stochastic estimators): privacy randomness, so it is drawn here, in :mod:`privpca.mechanisms`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray
from scipy.optimize import brentq

from privpca._validation import check_delta, check_epsilon, check_in_range

__all__ = [
    "ShuffledGuarantee",
    "ShufflingBoundError",
    "local_epsilon_for_shuffling",
    "secret_permutation",
    "shuffled_epsilon",
    "shuffling_condition",
]


class ShufflingBoundError(ValueError):
    """The shuffling amplification bound does not apply to the requested (ε, δ, n)."""


def shuffling_condition(n: int, delta_prime: float) -> float:
    """The largest local ε₀ the bound allows: ``ln(n / (16 ln(4/δ′)))`` (may be negative).

    The reference code's condition; the printed theorem's ``ln(2/δ′)`` allows slightly more.
    """
    return math.log(n / (16.0 * math.log(4.0 / delta_prime)))


def shuffled_epsilon(epsilon0: float, n: int, delta_prime: float) -> float:
    """The central ε of FMT's bound for ``n`` shuffled ε₀-DP local randomisers.

    Raises
    ------
    ShufflingBoundError
        If ``ε₀`` exceeds :func:`shuffling_condition`.
    """
    limit = shuffling_condition(n, delta_prime)
    if epsilon0 > limit:
        raise ShufflingBoundError(
            f"The shuffling bound needs eps0 <= ln(n/(16 ln(4/delta'))) = {limit:.4g} for "
            f"n={n}, delta'={delta_prime:g}; got eps0={epsilon0:.4g}."
        )
    e0 = math.exp(epsilon0)
    bracket = 8.0 * math.sqrt(e0 * math.log(4.0 / delta_prime)) / math.sqrt(n) + 8.0 * e0 / n
    printed = (e0 - 1.0) / (e0 + 1.0)  # the theorem as printed
    reference = -math.expm1(-epsilon0) / (1.0 + math.exp(-epsilon0) / (1.0 + bracket))
    return math.log1p(max(printed, reference) * bracket)


@dataclass(frozen=True)
class ShuffledGuarantee:
    """How a central (ε, δ) is met by shuffling n local (ε₀, δ₀)-DP steps.

    Attributes
    ----------
    epsilon, delta : float
        The central guarantee (``epsilon`` is the bound at ``epsilon0``, ≤ the request).
    epsilon0, delta0 : float
        What each local randomiser must satisfy.
    delta_prime : float
        The δ′ of the shuffling bound.
    n : int
        Number of shuffled records.
    """

    epsilon: float
    delta: float
    epsilon0: float
    delta0: float
    delta_prime: float
    n: int


def local_epsilon_for_shuffling(
    epsilon: float, delta: float, n: int, *, delta_split: float = 0.5
) -> ShuffledGuarantee:
    """The largest local ε₀ whose shuffled guarantee is within the requested (ε, δ).

    Parameters
    ----------
    epsilon, delta : float
        The central guarantee wanted.
    n : int
        Number of records shuffled (each processed by one local randomiser).
    delta_split : float, default=0.5
        Fraction of δ given to the bound's ``δ′``; the rest pays for the local randomisers'
        ``δ₀`` through ``(e^ε + 1)(1 + e^{−ε₀}/2)·n·δ₀``.

    Returns
    -------
    ShuffledGuarantee

    Raises
    ------
    ShufflingBoundError
        When even the largest admissible ε₀ would not reach ``epsilon`` — the bound does not
        apply; use ``amplification="none"`` (no shuffling argument: each record enters one
        step, so the local guarantee is the central one).
    """
    epsilon = check_epsilon(epsilon, owner="the shuffling bound")
    delta = check_delta(delta, owner="the shuffling bound")
    check_in_range(n, "n", low=1, low_closed=True, integer=True, owner="the shuffling bound")
    check_in_range(delta_split, "delta_split", low=0, high=1, owner="the shuffling bound")
    delta_prime = delta_split * delta
    limit = shuffling_condition(n, delta_prime)
    if limit <= 0:
        raise ShufflingBoundError(
            f"Amplification by shuffling does not apply: with n={n} and delta'={delta_prime:g} "
            f"the bound needs eps0 <= ln(n/(16 ln(4/delta'))) = {limit:.3g} <= 0. Use more "
            "records or amplification='none'."
        )
    if shuffled_epsilon(limit, n, delta_prime) <= epsilon:
        raise ShufflingBoundError(
            f"Amplification by shuffling does not apply at epsilon={epsilon:g}: its bound "
            f"(Feldman-McMillan-Talwar Thm 3.8) requires eps0 <= {limit:.3g} for n={n}, "
            f"delta={delta:g}, and that eps0 already certifies epsilon="
            f"{shuffled_epsilon(limit, n, delta_prime):.3g} < {epsilon:g}. The paper states "
            "the same restriction (epsilon = O(sqrt(log(n/delta)/n))). Ask for a smaller "
            "epsilon, or use amplification='none', which is valid for every epsilon and needs "
            "less noise in this regime."
        )
    eps0 = brentq(lambda e0: shuffled_epsilon(e0, n, delta_prime) - epsilon, 1e-12, limit)
    eps0 = min(eps0, limit) * (1 - 1e-12)
    eps = shuffled_epsilon(eps0, n, delta_prime)
    delta0 = (delta - delta_prime) / ((math.exp(eps) + 1.0) * (1.0 + math.exp(-eps0) / 2.0) * n)
    return ShuffledGuarantee(eps, delta, eps0, delta0, delta_prime, int(n))


def secret_permutation(n: int, rng: np.random.Generator) -> NDArray[np.int64]:
    """A uniformly random order of ``range(n)`` from the mechanism's generator, never published.

    Privacy randomness, not a numerical device: Private Oja's amplification by shuffling
    (the bound above) holds only if the records' order is uniformly random and unknown to the
    adversary, and the stochastic estimators' in-memory held-out split (the first rows of this
    order) composes in parallel with the rest only through a secret, data-independent draw
    (:mod:`privpca.streaming.holdout`). In strict secure mode ``rng`` is the fit's OS-keyed
    :class:`~privpca.mechanisms.secure_noise.SecureGenerator`. ``rng.permutation(n)``, exactly.
    """
    return rng.permutation(int(n))
