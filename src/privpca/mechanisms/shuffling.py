"""Privacy amplification by shuffling (Feldman, McMillan & Talwar 2021), evaluated numerically.

Setting (Private Oja, Algorithm 2 of Liu et al.): the records are put in a uniformly random,
unreleased order π and processed one at a time; step ``i`` applies a local randomiser
``R_i(z_1, …, z_{i−1}, x_{π(i)})`` — an ``ε₀``-DP function of one record for every value of the
earlier outputs (the **adaptive** setting) — and the whole sequence ``z_1, …, z_n`` is
released.

The numerical bound (FMT Theorem 3.1's reduction; the authors' reference code)
------------------------------------------------------------------------------
FMT prove Theorem 3.1, adaptive randomisers included, by a reduction: for datasets that differ
in one record, the released sequences are post-processings of the two distributions ``P``,
``Q`` of a pair of counts, in which each of the other ``n − 1`` records is a *clone* of one of
the two differing records with probability ``p = e^{−ε₀}``::

    C ~ Bin(n − 1, p),  A ~ Bin(C, 1/2),  Δ ~ Bernoulli(e^ε₀ / (e^ε₀ + 1)),
    P = (A + Δ, C − A + 1 − Δ),  Q = (A + 1 − Δ, C − A + Δ).

So shuffling is (ε, δ)-DP for every ``δ ≥ δ(ε) = D_{e^ε}(P ‖ Q)``, the hockey-stick divergence
(equal to ``D_{e^ε}(Q ‖ P)`` by the symmetry ``a ↦ C + 1 − a``). ``C`` has the same law under
both, so ``δ(ε) = Σ_c Pr[C = c]·D_c``, and each ``D_c`` is exact in closed form: given
``C = c`` the likelihood ratio of the first count ``a`` is
``(e^ε₀ a + c + 1 − a) / (e^ε₀ (c + 1 − a) + a)``, increasing in ``a``, above ``e^ε`` exactly
for ``a > β(c + 1)`` with ``β = (e^{ε+ε₀} − 1) / ((e^ε₀ − 1)(e^ε + 1))``; with
``a₀ = ⌊β(c + 1)⌋ + 1`` and ``T_c(k) = Pr[Bin(c, 1/2) ≥ k]``,

``D_c = ((e^ε₀ − e^ε)·T_c(a₀ − 1) − (e^{ε+ε₀} − 1)·T_c(a₀)) / (e^ε₀ + 1)``  (0 for ``ε ≥ ε₀``).

``D_c ≤ 1`` decreases in ``c`` (a clone more adds an independent fair bit: a post-processing),
so only the clone counts within the ``10⁻⁶·δ′``-quantiles of ``C`` are summed (scipy's
``logsf``/``logpmf`` and ``logsumexp``: a few thousand terms at n = 10⁶) and the mass of ``C``
outside them is **added** to δ, never dropped. Inside, a term whose Hoeffding bound
(``T_c(a₀ − 1) ≤ exp(−2(a₀ − 1 − c/2)²/c)``) is below ``10⁻⁶·δ′`` over the window's length
is counted at that bound rather than evaluated, and δ is raised by a relative ``10⁻¹²·n`` for
the rounding of the difference of tails in ``D_c``. The central ε for a given ``δ′`` is the
smallest ε with ``δ(ε) ≤ δ′``, found by a bracketing (Brent) search on the decreasing
``log δ(ε)`` and then checked: the returned ε satisfies ``δ(ε) ≤ δ′`` as evaluated. Since
``δ(ε₀) = 0``, the bound is at most ε₀ for every ``n`` and ε₀: it never refuses, and
amplification fades (ε → ε₀) where n is too small for ``e^{−ε₀}·n`` clones to hide a record.
About 0.1 s at n = 10⁶ (benchmarks/shuffling_bounds.py).

**Checked** against the authors' reference code (apple/ml-shuffling-amplification,
``computeamplification.py``: ``numericalanalysis`` evaluates the same ``δ(ε)`` on groups of
clone counts, as lower and upper bounds, and bisects over ε; our ε lies between the two, e.g.
0.1698 in their published [0.1675, 0.1728] at n = 10⁵, ε₀ = 4, δ′ = 10⁻⁶) and against a
brute-force 40-digit sum of ``D_{e^ε}`` over the joint law of ``(P, Q)`` at small n
(tests/test_shuffling.py).

The closed form (FMT Theorems 3.1 and 3.8) and approximate-DP randomisers
-------------------------------------------------------------------------
Theorem 3.1 bounds the same pair analytically: for ``ε₀ ≤ ln(n / (16 ln(2/δ′)))``,

``ε = ln(1 + (e^ε₀ − 1)/(e^ε₀ + 1) · (8√(e^ε₀ ln(4/δ′))/√n + 8e^ε₀/n))``,

and Theorem 3.8, its approximate-DP form (adaptive too; quoted by Liu et al. as their Theorem
D.1), adds ``(e^ε + 1)(1 + e^{−ε₀}/2)·n·δ₀`` to δ for ``(ε₀, δ₀)``-DP local randomisers. That
term comes from replacing each randomiser by an ε₀-DP one, an argument that does not depend on
how the ε₀-DP case is then bounded, so it is added to either bound:
``δ = δ′ + (e^ε + 1)(1 + e^{−ε₀}/2)·n·δ₀``. :func:`closed_form_shuffled_epsilon` is kept as a
check and a fallback (the numerical ε is never above it where both apply: tested); it uses the
reference code's form ``ε = ln(1 + b/d·(a + c))`` (``b = 1 − e^{−ε₀}``,
``d = 1 + e^{−ε₀ − ln(1 + a + c)}``) where that is larger than the printed one, and the
reference code's stricter condition ``ε₀ ≤ ln(n/(16 ln(4/δ′)))``.
:func:`shuffled_epsilon` is the smaller valid ε of the two, and :class:`ShuffledGuarantee`
records which bound gave it.

:func:`local_epsilon_for_shuffling` inverts the bound, so users give the central (ε, δ) they want
and never an unspecified constant ``C`` (Liu et al. state the regime as
``ε = O(√(log(n/δ)/n))``).

:func:`secret_permutation` draws the shuffle itself (and the in-memory held-out split of the
stochastic estimators): privacy randomness, so it is drawn here, in :mod:`privpca.mechanisms`.

References
----------
V. Feldman, A. McMillan, K. Talwar. Hiding among the clones: a simple and nearly optimal
analysis of privacy amplification by shuffling. FOCS 2021 (arXiv:2012.12803), Theorems 3.1
and 3.8; reference code: github.com/apple/ml-shuffling-amplification.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray
from scipy.optimize import brentq
from scipy.special import logsumexp
from scipy.stats import binom

from privpca._validation import check_delta, check_epsilon, check_in_range

__all__ = [
    "CLOSED_FORM",
    "NUMERICAL",
    "ShuffledGuarantee",
    "ShufflingBoundError",
    "closed_form_shuffled_epsilon",
    "local_epsilon_for_shuffling",
    "numerical_shuffled_epsilon",
    "secret_permutation",
    "shuffled_epsilon",
    "shuffling_condition",
]

#: The names a :class:`ShuffledGuarantee` (and Private Oja's record) gives the bound used.
NUMERICAL = "numerical (FMT 2021, Thm 3.1 / reference code)"
CLOSED_FORM = "closed form (FMT 2021, Thm 3.8)"

#: Mass of the clone count left out of the sum, as a fraction of δ′ (it is added to δ).
_OUTSIDE = 1e-6
#: Relative margin on δ per record: ``D_c`` is a difference of two tails whose relative
#: rounding grows like c (measured: 1e-8 at n = 10⁶, against exact sums of its positive terms).
_ROUNDING = 1e-12
#: Absolute and relative tolerances of the searches over ε and ε₀ (each result is checked).
_XTOL, _RTOL = 1e-12, 1e-10
#: Floor of the searched ``log δ − log δ′``: ``log δ = −inf`` (at ε ≥ ε₀) is finite for brentq.
_FLOOR = -50.0


class ShufflingBoundError(ValueError):
    """The closed-form shuffling bound does not apply to the requested (ε₀, δ′, n)."""


def shuffling_condition(n: int, delta_prime: float) -> float:
    """The largest local ε₀ the closed form allows: ``ln(n / (16 ln(4/δ′)))`` (may be negative).

    The reference code's condition; the printed theorem's ``ln(2/δ′)`` allows slightly more.
    """
    return math.log(n / (16.0 * math.log(4.0 / delta_prime)))


def closed_form_shuffled_epsilon(epsilon0: float, n: int, delta_prime: float) -> float:
    """The central ε of FMT's closed form (Theorem 3.8) for ``n`` shuffled ε₀-DP randomisers.

    Raises
    ------
    ShufflingBoundError
        If ``ε₀`` exceeds :func:`shuffling_condition`.
    """
    limit = shuffling_condition(n, delta_prime)
    if epsilon0 > limit:
        raise ShufflingBoundError(
            f"The closed-form shuffling bound needs eps0 <= ln(n/(16 ln(4/delta'))) = "
            f"{limit:.4g} for n={n}, delta'={delta_prime:g}; got eps0={epsilon0:.4g}."
        )
    e0 = math.exp(epsilon0)
    bracket = 8.0 * math.sqrt(e0 * math.log(4.0 / delta_prime)) / math.sqrt(n) + 8.0 * e0 / n
    printed = (e0 - 1.0) / (e0 + 1.0)  # the theorem as printed
    reference = -math.expm1(-epsilon0) / (1.0 + math.exp(-epsilon0) / (1.0 + bracket))
    return math.log1p(max(printed, reference) * bracket)


def _log_expm1(x: float) -> float:
    """``log(e^x − 1)`` for ``x > 0``, without overflow."""
    return x + math.log(-math.expm1(-x))


@dataclass(frozen=True)
class _Clones:
    """The clone count ``C ~ Bin(n − 1, e^{−ε₀})`` on the window summed, and the mass outside."""

    epsilon0: float
    c: NDArray[np.float64]
    log_pmf: NDArray[np.float64]
    log_outside: float
    log_negligible: float
    log_margin: float

    @classmethod
    def of(cls, epsilon0: float, n: int, delta_prime: float) -> _Clones:
        m, p, tail = n - 1, math.exp(-epsilon0), _OUTSIDE * delta_prime / 2.0
        lo = int(binom.ppf(tail, m, p))
        hi = m - int(binom.ppf(tail, m, 1.0 - p))  # the upper quantile, accurate in the tail
        c = np.arange(lo, max(lo, hi) + 1, dtype=np.float64)
        outside = np.logaddexp(binom.logcdf(lo - 1, m, p), binom.logsf(c[-1], m, p))
        return cls(epsilon0, c, binom.logpmf(c, m, p), float(outside),
                   math.log(_OUTSIDE * delta_prime / len(c)), math.log1p(_ROUNDING * n))

    def log_delta(self, epsilon: float) -> float:
        """``log δ(ε)``: the sum over the window plus the mass outside it (``D_c ≤ 1``), times
        ``1 + 10⁻¹²·n`` for rounding."""
        e0, c = self.epsilon0, self.c
        if epsilon >= e0:
            return -math.inf
        beta = math.exp(_log_expm1(epsilon + e0) - _log_expm1(e0) - math.log1p(math.exp(epsilon)))
        a0 = np.floor(beta * (c + 1.0)) + 1.0
        log_gap, log_scale = epsilon + _log_expm1(e0 - epsilon), -np.logaddexp(0.0, e0)
        # Hoeffding, T_c(a₀ − 1) ≤ exp(−2t²/c) with t = a₀ − 1 − c/2, bounds each term
        # Pr[C = c]·D_c ≤ Pr[C = c]·(e^ε₀ − e^ε)·T_c(a₀ − 1)/(e^ε₀ + 1): that bound is the term
        # where it is below 10⁻⁶·δ′/len(c) (counted, never dropped), the exact D_c elsewhere.
        t = np.maximum(a0 - 1.0 - c / 2.0, 0.0)
        terms = self.log_pmf + log_gap + log_scale - 2.0 * t * t / np.maximum(c, 1.0)
        exact = terms > self.log_negligible
        ce, ae = c[exact], a0[exact]
        log_second = binom.logsf(ae - 1.0, ce, 0.5)  # T_c(a₀)
        log_first = np.logaddexp(log_second, binom.logpmf(ae - 1.0, ce, 0.5))  # T_c(a₀ − 1)
        with np.errstate(divide="ignore"):  # D_c = 0 (log −inf) where the two terms are equal
            ratio = np.minimum(_log_expm1(epsilon + e0) - log_gap + log_second - log_first, 0.0)
            terms[exact] = (self.log_pmf[exact] + log_gap + log_scale + log_first
                            + np.log1p(-np.exp(ratio)))
        return float(logsumexp(np.append(terms, self.log_outside)) + self.log_margin)


def _safe_root(excess: Callable[[float], float], lo: float, hi: float, *, up: bool) -> float:
    """A root of the monotone ``excess`` in ``[lo, hi]``, moved until ``excess ≤ 0`` there.

    ``excess(hi) ≤ 0`` when ``up`` (the answer is at or above the root), ``excess(lo) ≤ 0``
    otherwise; the move doubles its step, so it ends at ``hi`` (``lo``) at worst.
    """
    x = brentq(excess, lo, hi, xtol=_XTOL, rtol=_RTOL)
    step = _XTOL + _RTOL * abs(x)
    while excess(x) > 0.0:
        x = min(x + step, hi) if up else max(x - step, lo)
        step *= 2.0
    return float(x)


def _numerical(clones: _Clones, delta_prime: float) -> float:
    """The smallest ε (to the tolerances) with ``δ(ε) ≤ δ′`` for these clones."""
    log_dp = math.log(delta_prime)

    @functools.cache
    def excess(eps: float) -> float:
        return max(clones.log_delta(eps), log_dp + _FLOOR) - log_dp

    hi, lo = clones.epsilon0, clones.epsilon0 / 8.0  # excess(ε₀) < 0: bracket from above
    while excess(lo) <= 0.0:
        if lo < _XTOL:
            return lo
        hi, lo = lo, lo / 8.0
    return _safe_root(excess, lo, hi, up=True)


def numerical_shuffled_epsilon(epsilon0: float, n: int, delta_prime: float) -> float:
    """The central ε of FMT's numerical bound for ``n`` shuffled ε₀-DP local randomisers.

    The smallest ε whose ``δ(ε) = D_{e^ε}(P ‖ Q)`` (module docstring) is at most ``δ′``; at
    most ``ε₀`` for every ``n``.

    Parameters
    ----------
    epsilon0 : float
        ε₀ > 0 of each local randomiser.
    n : int
        Number of shuffled records.
    delta_prime : float
        The δ′ of the bound, in (0, 1).

    Returns
    -------
    float
    """
    _check(epsilon0, n, delta_prime)
    return _numerical(_Clones.of(epsilon0, int(n), delta_prime), delta_prime)


def _check(epsilon0: float, n: int, delta_prime: float) -> None:
    check_epsilon(epsilon0, owner="the shuffling bound")
    check_in_range(n, "n", low=1, low_closed=True, integer=True, owner="the shuffling bound")
    check_delta(delta_prime, owner="the shuffling bound")


def _certify(epsilon0: float, n: int, delta_prime: float) -> tuple[float, str]:
    """The smaller valid ε of the two bounds, and the bound's name."""
    _check(epsilon0, n, delta_prime)
    eps, bound = _numerical(_Clones.of(epsilon0, int(n), delta_prime), delta_prime), NUMERICAL
    if epsilon0 <= shuffling_condition(n, delta_prime):
        closed = closed_form_shuffled_epsilon(epsilon0, n, delta_prime)
        if closed < eps:
            eps, bound = closed, CLOSED_FORM
    return eps, bound


def shuffled_epsilon(epsilon0: float, n: int, delta_prime: float) -> float:
    """The central ε for ``n`` shuffled ε₀-DP local randomisers: the smaller valid bound.

    :func:`numerical_shuffled_epsilon`, or :func:`closed_form_shuffled_epsilon` where that
    applies and is smaller (it never is, to rounding; kept as a check). The guarantee is
    ``(ε, δ′)``-DP; approximate-DP randomisers add the term of :class:`ShuffledGuarantee`.
    """
    return _certify(epsilon0, n, delta_prime)[0]


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
        The δ′ of the shuffling bound; ``delta = δ′ + (e^ε + 1)(1 + e^{−ε₀}/2)·n·δ₀``.
    n : int
        Number of shuffled records.
    bound : str
        The bound that certifies ``epsilon``: :data:`NUMERICAL` or :data:`CLOSED_FORM`.
    """

    epsilon: float
    delta: float
    epsilon0: float
    delta0: float
    delta_prime: float
    n: int
    bound: str


def local_epsilon_for_shuffling(
    epsilon: float, delta: float, n: int, *, delta_split: float = 0.5
) -> ShuffledGuarantee:
    """The largest local ε₀ whose shuffled guarantee is within the requested (ε, δ).

    The numerical bound is inverted directly: the largest ``ε₀ ≥ ε`` with ``δ(ε) ≤ δ′`` (by a
    bracketing search on ε₀, checked at the result); the closed form's inverse is used
    instead where it allows a larger ε₀ (to rounding, never).

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
        Never a refusal: the numerical bound certifies ε for ``ε₀ = ε`` at every n, so a
        solution ``ε₀ ≥ ε`` always exists. Where n is small for ε it is close to ε and
        ``δ₀ < δ``, and ``amplification="none"`` (ε₀ = ε, δ₀ = δ) may need less noise.
    """
    epsilon = check_epsilon(epsilon, owner="the shuffling bound")
    delta = check_delta(delta, owner="the shuffling bound")
    check_in_range(n, "n", low=1, low_closed=True, integer=True, owner="the shuffling bound")
    check_in_range(delta_split, "delta_split", low=0, high=1, owner="the shuffling bound")
    n = int(n)
    delta_prime = delta_split * delta
    log_dp = math.log(delta_prime)

    @functools.cache
    def excess(e0: float) -> float:
        return max(_Clones.of(e0, n, delta_prime).log_delta(epsilon), log_dp + _FLOOR) - log_dp

    low, top = epsilon, 2.0 * epsilon  # δ(ε) = 0 at ε₀ = ε
    while excess(top) <= 0.0:  # ends: with no clones, δ(ε) → 1 as ε₀ grows
        low, top = top, 2.0 * top
    eps0 = _safe_root(excess, low, top, up=False)
    limit = shuffling_condition(n, delta_prime)
    if limit > 0.0:  # the closed form's inverse, capped at its condition
        def closed(e0: float) -> float:
            return closed_form_shuffled_epsilon(e0, n, delta_prime) - epsilon

        eps0 = max(eps0, limit if closed(limit) <= 0.0
                   else _safe_root(closed, 0.0, limit, up=False))
    certified, bound = _certify(eps0, n, delta_prime)
    certified = min(certified, epsilon)  # δ(ε) ≤ δ′ at eps0 was checked (or closed(eps0) ≤ ε)
    delta0 = (delta - delta_prime) / (
        (math.exp(certified) + 1.0) * (1.0 + math.exp(-eps0) / 2.0) * n)
    return ShuffledGuarantee(certified, delta, eps0, delta0, delta_prime, n, bound)


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
