"""Issue 35: lattice attacks on released floats (:mod:`privpca.audit.lattice`).

The exact Bingham sampler (Kent, Ganeiber & Mardia; ``BinghamPCA(n_components=1)``) releases
``v = ±U·(z/‖z‖)`` with proposals ``z = s∘g``; ``U`` and ``s`` are functions of the table. When
``g = 2^-30·K`` (secure mode's ``standard_normal`` until issue 35), ``Uᵀv/s`` is proportional
to the integer vector ``K`` under the true table only, and an LLL reduction tells which table
it was. The lattice sampler is rebuilt here, in the test (:class:`LatticeGenerator`); library
code is never changed.

* the LLL itself: exact (size-reduced, Lovász, same lattice), and the short-vector score;
* (a) the attack wins on the lattice sampler at the papers' setting (n = 200, p = 4);
* (b) with the library's generators — strict secure mode, and an unseeded fit in the default
  configuration — the same attack is at chance;
* the generic probes: the generator probe flags the lattice sampler from its draws alone, the
  release probe sees issue 35 only through the map an auditor rebuilds (said, and tested), and
  (slow) no estimator of the registry releases vectors whose lattice structure tells the
  neighbours apart in secure mode.
"""

from __future__ import annotations

import math
import random
import time
import warnings
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats

import privpca
from privpca._registry import PRIVATE_ESTIMATORS
from privpca.audit import generator_lattice_probe, lattice_probe
from privpca.audit.lattice import (
    LATTICE_THRESHOLD,
    bingham_distinguisher,
    kgm_map,
    lattice_score,
    lll_reduce,
    short_vector_score,
    vector_lattice_score,
)

EPSILON = 1.0
N, P = 200, 4


class LatticeGenerator(np.random.Generator):
    """PCG64 whose standard normals are issue 35's: ``2^-30·K`` with ``K`` an integer
    (``K = round(2^30·Z)``, the lattice of the old ``SecureGenerator.standard_normal``)."""

    def standard_normal(self, size=None, dtype=np.float64, out=None):  # type: ignore[override]
        z = np.ldexp(np.rint(np.ldexp(super().standard_normal(size), 30)), -30)
        return float(z) if size is None else z

    def spawn(self, n):  # type: ignore[override]
        return [LatticeGenerator(np.random.PCG64(s))
                for s in self.bit_generator.seed_seq.spawn(n)]


def _neighbours(seed: int = 5) -> tuple[np.ndarray, np.ndarray]:
    """The papers' setting: n = 200 rows of norm ≤ 1 in p = 4 (a spiked spectrum), the last
    record e₁ on one table and e₂ on the other."""
    rng = np.random.default_rng(seed)
    A = rng.standard_normal((N - 1, P)) * np.array([1.0, 0.6, 0.4, 0.2])
    A /= np.maximum(1.0, np.linalg.norm(A, axis=1, keepdims=True))
    e1, e2 = np.eye(P)[:2]
    return np.vstack([A, e1]), np.vstack([A, e2])


def _maps(X: np.ndarray, Xn: np.ndarray) -> list[tuple[np.ndarray, np.ndarray]]:
    """The attacker's rebuild of each table's sampler map: the exponent matrix of the
    exponential mechanism in the papers' setting is ``ε/(2D²)·XᵀX`` with D = 1 (centering=None,
    a public data_norm: the whole ε goes to the mechanism)."""
    return [kgm_map(EPSILON / 2.0 * (Z.T @ Z)) for Z in (X, Xn)]


def _bingham(random_state=None) -> privpca.BinghamPCA:
    return privpca.BinghamPCA(n_components=1, epsilon=EPSILON, centering=None, data_norm=1.0,
                              random_state=random_state)


def _trials(n_trials: int, random_state=lambda i: None, seed: int = 0
            ) -> tuple[int, list[float]]:
    """``n_trials`` fits on a table drawn at random (of the pair), each guessed by the
    distinguisher: (right guesses, the true table's score in each trial)."""
    X, Xn = _neighbours()
    maps = _maps(X, Xn)
    coin = np.random.default_rng(seed)
    right, true_scores = 0, []
    for i in range(n_trials):
        truth = int(coin.integers(2))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # a seeded generator warns (reproducible noise)
            est = _bingham(random_state(i)).fit((X, Xn)[truth])
        assert est.sampler_ == "exact-or-gibbs"  # k = 1: the KGM proposals
        guess = bingham_distinguisher(est.components_[0], maps)
        right += guess.index == truth
        true_scores.append(guess.scores[truth])
    return right, true_scores


def _chance_interval(n: int, level: float = 0.999) -> tuple[float, float]:
    lo, hi = stats.binom.interval(level, n, 0.5)
    return float(lo), float(hi)


# --------------------------------------------------------------------------- LLL


def _gram_schmidt(rows):
    out, mu = [], [[Fraction(0)] * len(rows) for _ in rows]
    for i, r in enumerate(rows):
        v = [Fraction(x) for x in r]
        for j, u in enumerate(out):
            mu[i][j] = sum(Fraction(a) * b for a, b in zip(r, u, strict=True)) / sum(
                b * b for b in u)
            v = [a - mu[i][j] * b for a, b in zip(v, u, strict=True)]
        out.append(v)
    return out, mu


def test_lll_is_exact_size_reduced_lovasz_and_keeps_the_lattice():
    """Random integer bases (square ones, so that the change of basis can be solved): the
    result is size-reduced, satisfies Lovász's condition at δ = 0.99, has the same volume,
    and is an integer unimodular transform of the input."""
    gen = random.Random(1)
    for _ in range(60):
        n = gen.randint(2, 7)
        while True:
            B = [[gen.randint(-(10 ** gen.randint(1, 12)), 10 ** gen.randint(1, 12))
                  for _ in range(n)] for _ in range(n)]
            if abs(np.linalg.det(np.array(B, dtype=float))) > 0.5:
                break
        R, d = lll_reduce(B)
        star, mu = _gram_schmidt(R)
        norms = [sum(x * x for x in v) for v in star]
        for i in range(n):
            assert all(abs(mu[i][j]) <= Fraction(1, 2) for j in range(i))
        for k in range(1, n):
            assert norms[k] >= (Fraction(99, 100) - mu[k][k - 1] ** 2) * norms[k - 1]
        vol2 = Fraction(1)
        for i, b in enumerate(norms):
            vol2 *= b
            assert vol2 == d[i + 1]
        star0, _ = _gram_schmidt(B)
        assert math.prod(sum(x * x for x in v) for v in star0) == d[n]
        # R = T·B with T integer and det T = ±1.
        T = np.linalg.solve(np.array(B, dtype=float).T, np.array(R, dtype=float).T).T
        assert np.allclose(T, np.rint(T), atol=1e-6)
        assert abs(abs(round(np.linalg.det(np.rint(T)))) - 1) == 0


def test_lll_refuses_dependent_rows_and_finds_a_planted_vector():
    with pytest.raises(ValueError, match="dependent"):
        lll_reduce([[1, 2, 3], [2, 4, 6]])
    # w proportional to a 20-bit integer vector: the reduction finds it (up to sign).
    K = np.array([712_345, -233_001, 98_765, 501_113, -4_097])
    w = K / np.linalg.norm(K) * 0.731
    found = short_vector_score(w, 52)
    assert found.score < -15
    assert np.array_equal(np.abs(found.vector), np.abs(K))


def test_short_vector_score_is_near_zero_for_generic_vectors_and_low_on_a_lattice():
    rng = np.random.default_rng(0)
    for d in (4, 6, 8):
        generic = [lattice_score(rng.standard_normal(d)) for _ in range(30)]
        K = np.rint(np.ldexp(rng.standard_normal((30, d)), 30))
        planted = [lattice_score(k * 0.37 / np.linalg.norm(k)) for k in K]
        assert min(generic) > -LATTICE_THRESHOLD and np.median(generic) > -1.0
        assert max(planted) < -LATTICE_THRESHOLD  # ≈ 31 − 52·(d−1)/d bits
    # Blocks, zeros and tiny coordinates.
    assert math.isnan(vector_lattice_score(np.array([0.5, 0.0, 0.25])))  # 2 coordinates left
    v = np.zeros(20)
    v[::2] = np.ldexp(np.rint(np.ldexp(rng.standard_normal(10), 30)), -30)
    assert vector_lattice_score(v) < -LATTICE_THRESHOLD
    assert math.isnan(vector_lattice_score(np.array([1.0, np.nan, 2.0, 3.0])))


# --------------------------------------------------------------------------- the attack


def test_attack_wins_on_the_lattice_sampler():
    """(a) The old behaviour, rebuilt: standard normals on 2^-30·ℤ. The distinguisher keeps
    the true table in at least 18 of 20 trials (measured: 20 of 20, the true table's score
    about −6.7 bits in the median, the other's about −0.4; 40 of 40 in 40 trials)."""
    with privpca.config_context(secure_mode=False):  # a generator given by the test
        right, true_scores = _trials(20, lambda i: LatticeGenerator(np.random.PCG64(i)))
    assert right >= 18
    assert np.median(true_scores) < -LATTICE_THRESHOLD


@pytest.mark.parametrize("config", [True, None], ids=["strict-secure", "default-config"])
def test_attack_is_at_chance_on_the_library(config):
    """(b) The library as it is: strict secure mode, and an unseeded fit in the default
    configuration (``random_state=None``, no config set). 40 trials: the accuracy is inside
    the binomial 99.9 % interval around 1/2, and the true table's scores are those of a
    generic vector (median about −0.4; the lattice sampler's: about −6.7). A generic
    4-vector scores below −3 about once in 1 200 and below −6 about never (2^-22-ish)."""
    with privpca.config_context(secure_mode=config):
        right, true_scores = _trials(40, seed=1)
    lo, hi = _chance_interval(40)
    assert lo <= right <= hi, f"{right} of 40 right: the released component still carries K"
    assert np.median(true_scores) > -1.5 and min(true_scores) > -6.0


@pytest.mark.slow
@pytest.mark.parametrize("config", [True, None], ids=["strict-secure", "default-config"])
def test_attack_is_at_chance_on_the_library_many_trials(config):
    """(b), tighter: 400 trials in each configuration."""
    with privpca.config_context(secure_mode=config):
        right, true_scores = _trials(400, seed=2)
    lo, hi = _chance_interval(400)
    assert lo <= right <= hi
    assert np.median(true_scores) > -1.5 and min(true_scores) > -6.0


# --------------------------------------------------------------------------- generic probes


def test_generator_probe_flags_the_lattice_sampler_and_not_the_library():
    """The check that would have caught issue 35 without knowing Bingham's sampler: the
    continuous draws of the generator a fit gets must not lie on a lattice."""
    bad = generator_lattice_probe(LatticeGenerator(np.random.PCG64(3)))
    assert bad.flagged == ("standard_normal",)
    with privpca.config_context(secure_mode=True):
        secure = generator_lattice_probe()
    default = generator_lattice_probe()
    with privpca.config_context(secure_mode=False):
        opted_out = generator_lattice_probe()
    for r in (secure, default, opted_out):
        assert not r.violated, str(r)
    assert secure.mode == "secure" and secure.generator == "SecureGenerator"


def test_release_probe_sees_issue35_only_through_the_rebuilt_map():
    """The release probe, honestly: Bingham's component under the lattice sampler is on no
    lattice by itself (U and the scales s are the table's), so the raw test is at chance; with
    the map ``diag(1/s)·Uᵀ`` an auditor rebuilds for each neighbour it is a violation."""
    X, Xn = _neighbours()

    def maps(Z):
        U, s = kgm_map(EPSILON / 2.0 * (Z.T @ Z))
        return {"diag(1/s)·Uᵀ": U.T / s[:, None]}

    est = _bingham()
    with privpca.config_context(secure_mode=False):
        raw = lattice_probe(est, X, Xn, epsilon=EPSILON, delta=0.0, runs=40,
                            random_state=LatticeGenerator(np.random.PCG64(4)))
        mapped = lattice_probe(est, X, Xn, epsilon=EPSILON, delta=0.0, runs=40, maps=maps,
                               random_state=LatticeGenerator(np.random.PCG64(4)))
    assert not raw.violated and raw.on_lattice == (0.0, 0.0)
    assert mapped.violated and mapped.accuracy == 1.0
    assert mapped.statistic.startswith("diag(1/s)·Uᵀ: score@D' − score@D")
    with privpca.config_context(secure_mode=True):
        fixed = lattice_probe(est, X, Xn, epsilon=EPSILON, delta=0.0, runs=40, maps=maps)
    assert not fixed.violated


def _lattice_release(X, rng):
    """A release whose lattice depends on the data: ``c(X)∘K/‖·‖`` with ``K`` on the
    2^30 lattice and ``cⱼ = e^{jx}``, x the table's sum: on a lattice when x = 0, not
    otherwise (the ratios of the cⱼ are not rationals with small denominators)."""
    x = float(np.sum(X))
    K = np.rint(np.ldexp(rng.standard_normal(6), 30))
    z = np.exp(x * np.arange(6)) * K
    return z / np.linalg.norm(z)


def _snapped_lattice_release(X, rng):
    """A release on a data-independent lattice: ``2^-30·K`` (plus nothing of the data)."""
    return np.ldexp(np.rint(np.ldexp(rng.standard_normal(6), 30)), -30)


def test_release_probe_flags_a_data_dependent_lattice_and_not_a_data_independent_one():
    X, Xn = np.array([[0.0]]), np.array([[0.1]])
    leak = lattice_probe(_lattice_release, X, Xn, epsilon=1.0, delta=1e-5, runs=60,
                         random_state=0)
    assert leak.violated and leak.accuracy > 0.95
    assert leak.on_lattice[0] == 1.0 and leak.on_lattice[1] == 0.0
    same = lattice_probe(_snapped_lattice_release, X, Xn, epsilon=1.0, delta=1e-5, runs=60,
                         random_state=0)
    assert same.structure and same.on_lattice == (1.0, 1.0)  # structure, reported ...
    assert not same.violated  # ... but it does not tell the neighbours apart


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(PRIVATE_ESTIMATORS))
def test_lattice_probe_every_estimator_secure_mode(name):
    """Every private estimator in strict secure mode, on its built-in neighbours lifted to 6
    features: no released vector's lattice structure tells the neighbours apart. (Noisy
    power and DPS-PCA release a component proportional to their last snapped release, a
    vector on the public grid Λ·ℤ^p: ``on_lattice`` is 1 on both neighbours, which is
    post-processing of that release and not a leak.)"""
    cls = PRIVATE_ESTIMATORS[name]
    start = time.perf_counter()
    with privpca.config_context(secure_mode=True):
        r = lattice_probe(cls(), epsilon=1.0, delta=1e-5, runs=30)
    assert r.mode == "secure"
    assert not r.violated, f"{name}: {r} ({time.perf_counter() - start:.1f} s)"


@pytest.mark.slow
def test_cli_audit_lattice_rows_and_control():
    from click.testing import CliRunner

    from privpca.audit.cli import LATTICE_CONTROL, audit_command

    res = CliRunner().invoke(audit_command, ["BinghamPCA", "--runs", "30", "--probe-runs",
                                             "30", "--seed", "0", "--lattice",
                                             "--no-progress"])
    assert res.exit_code == 0, res.output
    out = res.output
    # 1 threshold audit + 2 float probes + 2 lattice probes.
    assert "Family: 5 cells" in out
    assert "Lattice probe:" in out and "Generator lattice probe:" in out
    assert "| BinghamPCA | secure | 1 |" in out
    control = [ln for ln in out.splitlines() if ln.startswith(f"| {LATTICE_CONTROL} (control)")]
    assert len(control) == 1 and "detected (expected)" in control[0]
    assert "Generators (not in the family): no continuous draw on a lattice." in out
    assert "Controls (not in the family): 1 of 1 detected." in out
