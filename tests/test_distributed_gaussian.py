"""The distributed discrete Gaussian (issue 39): shares, exact decoding, noise, privacy, bits."""

from __future__ import annotations

import itertools
import math
from typing import Any

import numpy as np
import pytest

from privpca._config import GRID_BITS
from privpca.mechanisms.distributed_gaussian import (
    MAX_BITS,
    DistributedGaussianPlan,
    kls_epsilon,
    kls_tau,
    zcdp_epsilon,
)
from privpca.mechanisms.noise import grid_step
from privpca.mechanisms.secure_noise import SecureGenerator, discrete_gaussian

DELTA = 1e-6


def _plan(**kw: Any) -> DistributedGaussianPlan:
    args: dict[str, Any] = dict(central_sigma=4.0, sensitivity=1.0, coordinates=6, min_providers=3,
                colluders=1, value_bound=1e4, max_providers=5)
    args.update(kw)
    return DistributedGaussianPlan(**args)


def _sum_mod(residues, bits: int) -> np.ndarray:
    total = np.zeros_like(residues[0])
    for r in residues:
        total += r  # uint64 wraps modulo 2⁶⁴
    return total & np.uint64((1 << bits) - 1) if bits < 64 else total


# --------------------------------------------------------------------------- the plan
def test_the_plan_sizes_the_honest_shares_to_the_covered_central_noise():
    p = _plan(coordinates=100, min_providers=7, colluders=3, max_providers=20)
    honest = p.min_providers - p.colluders
    assert p.grid == grid_step(p.central_sigma / math.sqrt(honest))
    assert math.frexp(p.grid)[0] == 0.5  # a power of two
    assert 2.0**GRID_BITS <= p.share_sigma < 2.0 ** (GRID_BITS + 1) * 1.001
    covered = p.central_sigma * (p.sensitivity + p.grid * 10.0) / p.sensitivity
    assert p.covered_sigma == pytest.approx(covered, rel=1e-15)
    assert honest * (p.share_sigma * p.grid) ** 2 >= p.covered_sigma**2
    assert honest * (p.share_sigma * p.grid) ** 2 <= p.covered_sigma**2 * (1 + 1e-12)
    assert p.integer_sensitivity == pytest.approx(p.sensitivity / p.grid + 10.0, rel=1e-15)
    assert p.max_code == math.ceil(p.value_bound / p.grid)
    with pytest.raises(AttributeError):
        p.bits = 3  # type: ignore[misc]  # frozen


@pytest.mark.parametrize("n_providers", [5, 20])
def test_decoded_sum_is_the_codes_plus_the_noise_exactly(n_providers):
    p = _plan(coordinates=7, min_providers=3, colluders=2, max_providers=n_providers)
    rng = np.random.default_rng(n_providers)
    B = p.value_bound
    values = [rng.uniform(-B, B, 7) for _ in range(n_providers)]
    values[0] = np.array([B, -B, np.nextafter(B, 0), -np.nextafter(B, 0), 0.0, -1e-300, 0.5])
    values[1] = -np.abs(values[1])  # all negative
    seeds = [1000 + i for i in range(n_providers)]
    residues = [p.share(v, np.random.default_rng(s)) for v, s in zip(values, seeds, strict=True)]
    # The same streams again: each provider's K, as share drew it.
    noise = [discrete_gaussian(np.random.default_rng(s), p.share_sigma, 7) for s in seeds]
    codes = [p.encode(v) for v in values]
    assert all(r.dtype == np.uint64 and int(r.max()) < 2**p.bits for r in residues)
    for r, c, k in zip(residues, codes, noise, strict=True):
        assert np.array_equal(r, (c + k).astype(np.uint64) & np.uint64(2**p.bits - 1))
    # Python integers (no overflow possible) for the reference sum.
    expected = [sum(int(c[i]) for c in codes) + sum(int(k[i]) for k in noise) for i in range(7)]
    total = _sum_mod(residues, p.bits)
    got = p.decode_integers(total, survivors=n_providers)
    assert got.dtype == np.int64
    assert [int(g) for g in got] == expected  # exact integers
    assert np.array_equal(p.decode(total), got.astype(np.float64) * p.grid)
    assert np.all(np.abs(got) < 2**53)  # so the float decode is exact too
    # Summed modulo 2⁶⁴ without reducing: the same residue modulo 2^b.
    unreduced = np.zeros(7, dtype=np.uint64)
    for r in residues:
        unreduced += r
    assert np.array_equal(p.decode_integers(unreduced), got)
    # The deterministic rounding's bias: at most Λ/2 per provider and coordinate.
    codes_sum = sum(c.astype(np.float64) for c in codes) * p.grid
    assert np.all(np.abs(codes_sum - sum(values)) <= n_providers * p.grid / 2)


def test_a_scalar_answer_and_the_secure_generator():
    p = _plan(coordinates=1)
    r = p.share(3.25, SecureGenerator())
    assert r.shape == () and r.dtype == np.uint64
    assert p.share(np.array([-2.0]), None).shape == (1,)
    assert p.decode_integers(np.uint64(2**p.bits - 1)) == -1  # −1 mod 2^b
    assert p.decode_integers(np.uint64(2 ** (p.bits - 1))) == -(2 ** (p.bits - 1))


@pytest.mark.parametrize("which", ["min", "max"])
def test_the_decoded_noise_has_the_planned_variance(which):
    """The noise of a sum of ``k`` shares is ``Λ·ΣK``: variance ``k·(sΛ)²``. 20,000 samples:
    the sample variance's relative standard deviation is √(2/20000) = 1%; 5% is 5 of them."""
    p = _plan(coordinates=5000, min_providers=4, colluders=1, max_providers=10,
              value_bound=1.0)
    survivors = p.min_providers if which == "min" else p.max_providers
    zero = np.zeros(p.coordinates)
    rng = np.random.default_rng(7)
    samples = np.concatenate([
        p.decode(_sum_mod([p.share(zero, rng) for _ in range(survivors)], p.bits),
                 survivors=survivors) for _ in range(4)])
    planned = survivors * (p.share_sigma * p.grid) ** 2
    assert abs(samples.var() / planned - 1.0) < 0.05
    assert abs(samples.mean()) < 5 * math.sqrt(planned / samples.size)
    honest = (p.min_providers - p.colluders) * (p.share_sigma * p.grid) ** 2
    assert honest >= p.covered_sigma**2 > p.central_sigma**2


# --------------------------------------------------------------------------- privacy
def test_kls_epsilon_without_tau_is_the_gaussian_ratio():
    for n, d in [(1, 1), (5, 10), (200, 10_000)]:
        sigma = 2.0**GRID_BITS * 1.37
        assert kls_tau(sigma, n) == 0.0
        expected = 3.5e9 / (math.sqrt(n) * sigma)
        assert kls_epsilon(3.5e9, sigma, n, d) == pytest.approx(expected, rel=1e-12)


def test_tau_grows_for_small_shares_and_costs_epsilon():
    taus = [kls_tau(0.5, n) for n in (1, 2, 5, 20)]
    assert taus[0] == 0.0 and all(a < b for a, b in itertools.pairwise(taus))
    assert kls_tau(0.5, 5) > kls_tau(1.0, 5) > kls_tau(2.0, 5) > 0.0
    n, d, sens = 5, 4, 3.0
    tau = kls_tau(0.5, n)
    continuous = sens / (math.sqrt(n) * 0.5)
    eps = kls_epsilon(sens, 0.5, n, d)
    assert eps > continuous
    assert eps == pytest.approx(min(math.sqrt(continuous**2 + 2 * tau * d),
                                    continuous + tau * math.sqrt(d)), rel=1e-15)


def test_distributed_epsilon_is_the_central_one_at_most():
    p = _plan(coordinates=50, min_providers=6, colluders=3, max_providers=30)
    central = p.central_epsilon(DELTA)
    eps = [p.epsilon(DELTA, j) for j in range(p.colluders + 1)]
    assert all(a < b for a, b in itertools.pairwise(eps))  # more colluders, more ε
    assert eps[0] <= central * (1 + 1e-6)
    # t colluders leave exactly the central noise-to-sensitivity ratio in grid units.
    assert eps[-1] == pytest.approx(central, rel=1e-6)
    assert p.rho(p.colluders) == pytest.approx(p.central_rho(), rel=1e-9)
    assert p.rho(0) == pytest.approx(p.central_rho() * 3 / 6, rel=1e-9)
    assert p.central_epsilon(DELTA, exact=True) < central  # no RDP conversion is exact
    assert zcdp_epsilon(p.rho(1), DELTA) == p.epsilon(DELTA, 1)
    assert p.rho(2) == 0.5 * kls_epsilon(p.integer_sensitivity, p.share_sigma, 4, 50) ** 2


# --------------------------------------------------------------------------- bit width
def test_bits_are_the_narrowest_meeting_the_wrap_target():
    # No signal (bound 0): the wrap probability is the noise's tail alone, smooth in b.
    p = _plan(value_bound=0.0, max_providers=8)
    probs = [p.wrap_probability(b) for b in range(1, MAX_BITS + 1)]
    assert all(a >= b for a, b in itertools.pairwise(probs))
    inside = [q for q in probs if 0.0 < q < 1.0]
    assert len(inside) >= 1 and all(a > b for a, b in itertools.pairwise(inside))
    assert p.wrap_probability() <= p.wrap_target < p.wrap_probability(p.bits - 1)
    strict = _plan(value_bound=0.0, max_providers=8, wrap_target=1e-30)
    assert strict.bits >= p.bits and strict.wrap_probability() <= 1e-30
    # With a bound: the sum of N maximal codes plus the noise fits in b bits, not in b − 1.
    q = _plan(value_bound=123.0, max_providers=9)
    assert q.wrap_probability() <= q.wrap_target < q.wrap_probability(q.bits - 1)
    assert q.max_providers * q.max_code < 2 ** (q.bits - 1)


def test_sixty_four_bits_not_enough_is_refused():
    lam = grid_step(4.0 / math.sqrt(2))
    with pytest.raises(ValueError, match="64 bits cannot hold"):
        _plan(value_bound=2.0**61 * lam, max_providers=5)  # 5·2^61 > 2^63
    with pytest.raises(ValueError, match="64 bits cannot hold"):
        _plan(value_bound=1e300)
    assert _plan(value_bound=1.5 * 2.0**60 * lam, max_providers=5).bits == MAX_BITS  # 7.5·2^60


# --------------------------------------------------------------------------- refusals
@pytest.mark.parametrize("kw, match", [
    (dict(min_providers=0), "'min_providers'.*\\[1, inf\\)"),
    (dict(min_providers=3, colluders=3), "'colluders'.*\\[0, 2\\]"),
    (dict(colluders=-1), "'colluders'"),
    (dict(min_providers=3, max_providers=2), "'max_providers'.*\\[3, inf\\)"),
    (dict(min_providers=2.0), "'min_providers'"),
    (dict(coordinates=0), "'coordinates'"),
    (dict(coordinates=True), "'coordinates'"),
    (dict(central_sigma=math.nan), "'central_sigma'.*\\(0, inf\\)"),
    (dict(central_sigma=math.inf), "'central_sigma'"),
    (dict(central_sigma=0.0), "'central_sigma'"),
    (dict(central_sigma=-1.0), "'central_sigma'"),
    (dict(sensitivity=math.nan), "'sensitivity'"),
    (dict(sensitivity=0.0), "'sensitivity'"),
    (dict(sensitivity=-2.0), "'sensitivity'"),
    (dict(value_bound=-1.0), "'value_bound'"),
    (dict(value_bound=math.nan), "'value_bound'"),
    (dict(wrap_target=0.0), "'wrap_target'"),
    (dict(wrap_target=1.0), "'wrap_target'"),
])
def test_invalid_plans_are_refused(kw, match):
    with pytest.raises(ValueError, match=match):
        _plan(**kw)


def test_values_and_sums_outside_the_plan_are_refused():
    p = _plan()
    with pytest.raises(ValueError, match="beyond the public bound"):
        p.encode(np.full(6, np.nextafter(p.value_bound, math.inf)))
    with pytest.raises(ValueError, match="beyond the public bound"):
        p.share(np.array([0, 0, 0, 0, 0, -2e4]), np.random.default_rng(0))
    with pytest.raises(ValueError, match="finite"):
        p.encode(np.array([0, 0, 0, 0, 0, math.nan]))
    with pytest.raises(ValueError, match="6 coordinates"):
        p.encode(np.zeros(5))
    with pytest.raises(ValueError, match=r"'survivors'.*\[3, 5\]"):
        p.decode(np.zeros(6, dtype=np.uint64), survivors=2)
    with pytest.raises(ValueError, match="'survivors'"):
        p.decode(np.zeros(6, dtype=np.uint64), survivors=6)
    with pytest.raises(ValueError, match=r"'colluders'.*\[0, 1\]"):
        p.epsilon(DELTA, colluders=2)
    with pytest.raises(ValueError, match="'bits'"):
        p.wrap_probability(65)
    with pytest.raises(ValueError, match=r"'sigma'.*0\.5"):
        kls_epsilon(1.0, 0.4, 3, 2)
    with pytest.raises(ValueError, match="'shares'"):
        kls_tau(1.0, 0)
