"""Amplification by shuffling: FMT's numerical bound, the closed form it replaces, inversion."""

from __future__ import annotations

import math
import warnings

import mpmath
import numpy as np
import pytest

from privpca import PrivateOjaPCA
from privpca.mechanisms.shuffling import (
    CLOSED_FORM,
    NUMERICAL,
    ShufflingBoundError,
    closed_form_shuffled_epsilon,
    local_epsilon_for_shuffling,
    numerical_shuffled_epsilon,
    shuffled_epsilon,
    shuffling_condition,
)

# ---------------------------------------------------------------- the closed form (a check)


def test_closed_form_is_never_below_the_printed_theorem():
    eps0, n, dp = 2.0, 100_000, 1e-6
    e0 = math.exp(eps0)
    printed = math.log(
        1 + (e0 - 1) / (e0 + 1) * (8 * math.sqrt(e0 * math.log(4 / dp) / n) + 8 * e0 / n)
    )
    assert closed_form_shuffled_epsilon(eps0, n, dp) >= printed
    assert shuffling_condition(n, dp) == pytest.approx(math.log(n / (16 * math.log(4 / dp))))


# The authors' closed form (apple/ml-shuffling-amplification, computeamplification.py,
# closedformanalysis), evaluated by hand at these points: (n, eps0, delta') -> eps.
CLOSED_REFERENCE = {
    (10_000, 0.5, 1e-6): 0.10468237511990537,
    (10_000, 1.0, 1e-6): 0.2332655961237434,
    (100_000, 2.0, 1e-6): 0.19057970666626542,
    (1_000_000, 4.0, 1e-6): 0.20160146475304283,
}


@pytest.mark.parametrize(("n", "eps0", "dp"), sorted(CLOSED_REFERENCE))
def test_closed_form_matches_the_authors_reference_code(n, eps0, dp):
    assert closed_form_shuffled_epsilon(eps0, n, dp) == pytest.approx(
        CLOSED_REFERENCE[(n, eps0, dp)], rel=1e-12)


def test_closed_form_refuses_outside_its_condition():
    with pytest.raises(ShufflingBoundError, match="eps0 <="):
        closed_form_shuffled_epsilon(10.0, 10_000, 1e-6)


# ---------------------------------------------------------------- the numerical bound
GRID_N = (10**3, 10**4, 10**5, 10**6)
GRID_EPS0 = (0.5, 1.0, 2.0, 4.0, 6.0)


@pytest.mark.parametrize("n", GRID_N)
def test_numerical_bound_is_below_the_closed_form_wherever_both_apply(n):
    dp, compared = 1e-6, 0
    for eps0 in GRID_EPS0:
        numerical = numerical_shuffled_epsilon(eps0, n, dp)
        assert 0 < numerical <= eps0
        assert shuffled_epsilon(eps0, n, dp) == pytest.approx(numerical, rel=1e-12)
        if eps0 <= shuffling_condition(n, dp):
            closed = closed_form_shuffled_epsilon(eps0, n, dp)
            assert numerical <= closed
            assert numerical < 0.5 * closed  # 3-6x tighter on this grid
            compared += 1
    assert compared >= (1 if n == 10**3 else 3)


def test_numerical_bound_matches_the_authors_published_example():
    # README of apple/ml-shuffling-amplification (example.py): shuffling 10^5 4-DP local
    # randomisers is (eps, 1e-6)-DP "for eps between 0.1675385583317841 and 0.172790550755978"
    # (their grouped lower and upper bounds), closed form "at most 0.5378040242374512".
    eps = numerical_shuffled_epsilon(4.0, 100_000, 1e-6)
    assert 0.1675385583317841 <= eps <= 0.172790550755978
    assert closed_form_shuffled_epsilon(4.0, 100_000, 1e-6) == pytest.approx(
        0.5378040242374512, rel=1e-12)


def _exact_delta(eps: float, eps0: float, n: int) -> mpmath.mpf:
    """δ of the clone pair (P, Q) by brute force over its joint law, in 40-digit arithmetic.

    C ~ Bin(n − 1, e^{−ε₀}), A ~ Bin(C, 1/2), Δ ~ Bernoulli(e^ε₀/(e^ε₀ + 1)); P's first count
    is A + Δ, Q's is A + 1 − Δ (the second count is C + 1 minus the first). Both directions.
    """
    with mpmath.workdps(40):
        p, big = mpmath.exp(-eps0), mpmath.exp(eps)
        alpha = mpmath.exp(eps0) / (1 + mpmath.exp(eps0))
        forward = backward = mpmath.mpf(0)
        for c in range(n):
            weight = mpmath.binomial(n - 1, c) * p**c * (1 - p) ** (n - 1 - c)
            b = [mpmath.binomial(c, a) / mpmath.mpf(2) ** c for a in range(c + 1)] + [0]
            for a in range(c + 2):
                below = b[a - 1] if a else 0  # Pr[A = a − 1]
                P = alpha * below + (1 - alpha) * b[a]
                Q = alpha * b[a] + (1 - alpha) * below
                forward += weight * max(P - big * Q, 0)
                backward += weight * max(Q - big * P, 0)
        return max(forward, backward)


@pytest.mark.parametrize(("n", "eps0", "dp"), [(40, 1.0, 1e-2), (100, 2.0, 1e-3),
                                                (80, 0.5, 1e-4), (2, 1.0, 1e-3)])
def test_numerical_bound_against_a_brute_force_exact_sum(n, eps0, dp):
    eps = numerical_shuffled_epsilon(eps0, n, dp)
    assert 0 < eps < eps0
    assert _exact_delta(eps, eps0, n) <= dp  # valid
    assert _exact_delta(eps - 1e-6, eps0, n) > dp  # and tight


def test_numerical_bound_increases_in_eps0_and_falls_with_n():
    for n in (10**3, 10**5):
        values = [shuffled_epsilon(e, n, 1e-8) for e in (0.1, 0.5, 1.0, 2.0, 4.0, 8.0)]
        assert values == sorted(values) and len(set(values)) == len(values)
    for eps0 in (0.5, 3.0, 8.0):
        values = [shuffled_epsilon(eps0, n, 1e-8) for n in (10**2, 10**3, 10**4, 10**5, 10**6)]
        assert values == sorted(values, reverse=True) and len(set(values)) == len(values)


def test_numerical_bound_applies_where_the_closed_form_does_not():
    # n = 10^4, eps0 = 4: ln(n/(16 ln(4/delta'))) = 2.9, the closed form refuses.
    assert shuffling_condition(10_000, 1e-6) < 4.0
    assert numerical_shuffled_epsilon(4.0, 10_000, 1e-6) < 0.7
    # n = 1 (no clones): delta(eps) = (e^eps0 - e^eps)/(e^eps0 + 1), solved for eps by hand.
    exact = math.log(math.exp(3.0) - 1e-6 * (math.exp(3.0) + 1))
    assert numerical_shuffled_epsilon(3.0, 1, 1e-6) == pytest.approx(exact, abs=1e-11)
    with pytest.raises(ValueError, match="epsilon"):
        numerical_shuffled_epsilon(0.0, 10, 1e-6)


# ---------------------------------------------------------------- the inversion
@pytest.mark.parametrize(("epsilon", "delta", "n"), [
    (1.0, 1e-10, 10**6), (0.2, 1e-6, 10**5), (2.0, 1e-5, 18_000),
    (5.0, 1e-6, 10_000), (1.0, 1e-6, 100),  # refused by the closed form alone
])
def test_inversion_composes_back_to_the_requested_guarantee(epsilon, delta, n):
    g = local_epsilon_for_shuffling(epsilon, delta, n)
    assert g.bound == NUMERICAL
    assert g.epsilon <= epsilon
    assert g.epsilon == pytest.approx(epsilon, rel=1e-6)
    assert shuffled_epsilon(g.epsilon0, n, g.delta_prime) == pytest.approx(epsilon, rel=1e-6)
    assert shuffled_epsilon(g.epsilon0 * (1 + 1e-4), n, g.delta_prime) > epsilon  # largest
    assert g.epsilon0 > epsilon  # amplification: each step may be less private
    factor = (math.exp(g.epsilon) + 1) * (1 + math.exp(-g.epsilon0) / 2)
    assert g.delta_prime + factor * n * g.delta0 == pytest.approx(delta, rel=1e-9)


def test_inversion_allows_a_larger_local_epsilon_than_the_closed_form():
    n = 50_000
    g = local_epsilon_for_shuffling(0.5, 1e-8, n)
    lo, hi = 0.0, shuffling_condition(n, g.delta_prime)  # the closed form's own inverse
    for _ in range(60):
        mid = (lo + hi) / 2
        certified = closed_form_shuffled_epsilon(mid, n, g.delta_prime)
        lo, hi = (mid, hi) if certified <= 0.5 else (lo, mid)
    assert g.epsilon0 > lo + 1.0  # 4.8 against 2.9 here: less noise per step
    assert CLOSED_FORM != g.bound == NUMERICAL


def test_inversion_validates_its_arguments():
    with pytest.raises(ValueError, match="epsilon"):
        local_epsilon_for_shuffling(-1.0, 1e-6, 10_000)
    with pytest.raises(ValueError, match="'n'"):
        local_epsilon_for_shuffling(1.0, 1e-6, 0)


# ---------------------------------------------------------------- Private Oja
def test_private_oja_fits_at_epsilon_two_by_the_numerical_bound():
    rng = np.random.default_rng(0)
    n, p = 20_000, 10
    v = np.zeros(p)
    v[0] = 1.0
    X = rng.standard_normal((n, p)) + 3.0 * rng.standard_normal((n, 1)) * v  # one spike
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*reproducible.*")
        est = PrivateOjaPCA(n_components=1, epsilon=2.0, delta=1e-5, random_state=0).fit(X)
    record = est.privacy_
    assert record.epsilon <= 2.0
    assert NUMERICAL in record.calibration and "shuffling" in record.calibration
    assert est.local_epsilon_ > 2.0  # 6.4: amplified, where the closed form refused
    assert np.linalg.norm(est.components_[0]) == pytest.approx(1.0)
