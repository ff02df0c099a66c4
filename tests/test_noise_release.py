"""The one place privacy noise is added (privpca.mechanisms.noise) and the grid attack.

The attack (issue 26): an adversary who knows every record but one computes the exact
statistic of both neighbours, v and v', and, for a candidate grid g, keeps the neighbour
whose residual ``(output − candidate)/g`` is closer to an integer. Before this module, secure
mode released ``v + σ·2^-30·K`` and the attack was right every time; now every secure output
is ``snap_Λ(v) + Λ·K``, whose low-order bits carry nothing of v.
"""

from __future__ import annotations

import ast
import math
import pathlib
import sys

import numpy as np
import pytest

import privpca
from privpca.mechanisms import noise
from privpca.mechanisms.gaussian import symmetric_gaussian_noise
from privpca.mechanisms.secure_noise import GRID_BITS, SecureGenerator

SRC = pathlib.Path(privpca.__file__).parent


def _dist_to_int(x: np.ndarray) -> np.ndarray:
    return np.abs(x - np.round(x))


def grid_attack(output: np.ndarray, v: np.ndarray, v_prime: np.ndarray, g: float) -> bool:
    """True when the attack says "D" (the output came from v, not v')."""
    a = _dist_to_int((np.asarray(output) - v) / g).sum()
    b = _dist_to_int((np.asarray(output) - v_prime) / g).sum()
    return bool(a < b)


def _grids(sigma: float) -> list[float]:
    return [sigma * 2.0**-GRID_BITS, noise.grid_step(sigma)]


def _accuracy(release, v, v_prime, sigma, runs=40) -> float:
    """Fraction of correct guesses over ``runs`` releases of v and ``runs`` of v' (best grid)."""
    best = 0.0
    for g in _grids(sigma):
        right = sum(grid_attack(release(v), v, v_prime, g) for _ in range(runs))
        right += sum(not grid_attack(release(v_prime), v, v_prime, g) for _ in range(runs))
        best = max(best, right / (2 * runs))
    return best


# Neighbouring exact values with arbitrary low-order bits (as sums of real rows have).
V = np.array([0.123456789012345, -3.3333333333333335, 12.000000000000002, 0.1 + 0.2])
V_PRIME = V + np.array([0.0471, -0.0193, 0.0302, 0.0071])


def test_old_secure_arithmetic_was_broken_by_the_grid_attack():
    """The issue's reproduction: ``v + σ·SecureGenerator.standard_normal()``: 40 of 40."""
    rng = SecureGenerator()
    sigma = 1.7

    def old(v):
        return v + sigma * rng.standard_normal(v.shape)

    assert _accuracy(old, V, V_PRIME, sigma) == 1.0


@pytest.mark.parametrize("kind", ["gaussian", "laplace", "symmetric", "steps"])
def test_secure_releases_are_at_chance_under_the_grid_attack(kind):
    rng = SecureGenerator()
    sigma = 1.7
    if kind == "gaussian":
        def release(v):
            return noise.gaussian_release(v, sigma, rng, sensitivity=1.0)
        v, vp = V, V_PRIME
    elif kind == "laplace":
        def release(v):
            return noise.laplace_release(v, sigma, rng, sensitivity=1.0)
        v, vp = V, V_PRIME
    elif kind == "symmetric":
        A = np.outer(V, V) + 0.1
        v, vp = A, A + np.outer(V_PRIME - V, V_PRIME - V)

        def release(M):
            return noise.symmetric_gaussian_release(M, sigma, rng, sensitivity=1.0)
    else:
        steps = noise.GaussianNoiseSteps(sigma, rng, V.shape, sensitivity=1.0)

        def release(v):
            steps.draw(1)
            return steps.release(v, 0)
        v, vp = V, V_PRIME
    acc = _accuracy(release, v, vp, sigma)
    # 80 guesses at chance: P(≥ 0.75) < 10⁻⁵. The attack's guess is in fact a function of
    # (v, v') only, so it is right on exactly half of the runs.
    assert acc <= 0.75, acc


def test_secure_outputs_lie_on_the_public_grid_and_have_the_calibrated_spread():
    rng = SecureGenerator()
    sigma = 0.37
    lam, scale = noise.secure_noise_scale(sigma, 1.0, 20_000)
    out = noise.gaussian_release(np.full(20_000, 0.1), sigma, rng, sensitivity=1.0)
    k = out / lam
    assert np.array_equal(k, np.round(k))
    assert lam == math.ldexp(1.0, math.frexp(sigma)[1] - 1 - GRID_BITS)
    assert abs(out.std() / scale - 1.0) < 0.03
    assert abs(out.mean() - 0.1) < 4 * sigma / math.sqrt(20_000)


def test_secure_scale_covers_the_grid_rounding_exactly():
    sigma, delta_, d = 3.0, 0.5, 10_000
    lam, scale = noise.secure_noise_scale(sigma, delta_, d)
    # σ'/(Δ + Λ√d) = σ/Δ: the noise multiplier, hence (ε, δ), is unchanged.
    assert scale / (delta_ + lam * math.sqrt(d)) == pytest.approx(sigma / delta_, rel=1e-15)
    assert 1.0 < scale / sigma < 1.0 + 2.0**-GRID_BITS * math.sqrt(d) * sigma / delta_ * 1.01
    lam1, b = noise.secure_noise_scale(sigma, 2.0, 7, norm="l1")
    assert b == pytest.approx(sigma * (2.0 + 7 * lam1) / 2.0, rel=1e-15)
    # Counts on a grid finer than 1: nothing is rounded, nothing is added.
    assert noise.secure_noise_scale(sigma, 1.0, 50, integer_valued=True)[1] == sigma
    with pytest.raises(ValueError, match="sensitivity"):
        noise.secure_noise_scale(sigma, math.nan, 5)


def test_default_mode_is_the_arithmetic_seeded_results_were_made_with():
    v = np.linspace(-1, 1, 7)
    a = noise.gaussian_release(v, 0.3, np.random.default_rng(5), sensitivity=1.0)
    b = v + 0.3 * np.random.default_rng(5).standard_normal(7)
    assert np.array_equal(a, b)
    assert noise.gaussian_release(2.5, 0.3, np.random.default_rng(5), sensitivity=1.0) == \
        2.5 + 0.3 * float(np.random.default_rng(5).standard_normal())
    M = np.arange(16.0).reshape(4, 4)
    M = M + M.T
    a = noise.symmetric_gaussian_release(M, 0.2, np.random.default_rng(1), sensitivity=1.0)
    assert np.array_equal(a, M + symmetric_gaussian_noise(4, 0.2, np.random.default_rng(1)))
    counts = np.array([3, 0, 7])
    a = noise.laplace_release(counts, 2.0, np.random.default_rng(2), sensitivity=2.0)
    assert np.array_equal(a, counts + np.random.default_rng(2).laplace(0.0, 2.0, size=3))
    steps = noise.GaussianNoiseSteps(0.5, np.random.default_rng(3), (2, 1), sensitivity=1.0)
    steps.draw(4)
    Z = np.random.default_rng(3).standard_normal((4, 2, 1))
    G = np.array([[0.3], [-0.2]])
    assert np.array_equal(steps.release(G, 2, 0.1), 0.1 * G + (0.1 * 0.5) * Z[2])


def test_noise_scales_are_checked():
    with pytest.raises(ValueError, match="positive and finite"):
        noise.gaussian_release(np.zeros(2), 0.0, np.random.default_rng(), sensitivity=1.0)
    with pytest.raises(ValueError, match="square"):
        noise.symmetric_gaussian_release(np.zeros((2, 3)), 1.0, np.random.default_rng(),
                                         sensitivity=1.0)


# --------------------------------------------------------------------------- the source
#: Draws outside mechanisms/ that are not privacy noise, each with its reason.
ALLOWED_DRAWS = {
    "solvers/power.py": "random orthonormal start of the power method",
    "solvers/fantope.py": "random start vectors of the block Krylov eigensolver",
    "solvers/bingham.py": "the exponential mechanism's sampler (draws its target law)",
    "solvers/_bingham_kernels.py": "the exponential mechanism's sampler (compiled)",
    "decomposition/bingham.py": "random rotation that starts the Gibbs sampler",
    "datasets/synthetic.py": "synthetic data",
}
NOISE_METHODS = {"standard_normal", "normal", "laplace", "gumbel", "exponential",
                 "symmetric_gaussian_noise", "discrete_gaussian", "discrete_laplace"}


def _draws(path: pathlib.Path) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text())
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            f = node.func
            name = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", None)
            if name in NOISE_METHODS:
                out.append((node.lineno, name))
    return out


def test_no_privacy_noise_is_drawn_outside_mechanisms():
    offenders = []
    for path in sorted(SRC.rglob("*.py")):
        rel = path.relative_to(SRC).as_posix()
        # experiments/ draws synthetic data; audit/ builds reference mechanisms to audit
        # (e.g. the broken pre-issue-26 arithmetic), which release nothing of a user's data.
        if rel.startswith(("mechanisms/", "experiments/", "audit/")) or rel in ALLOWED_DRAWS:
            continue
        offenders += [f"{rel}:{line} {name}" for line, name in _draws(path)]
    assert not offenders, ("privacy noise must go through privpca.mechanisms.noise: "
                           + ", ".join(offenders))


def test_inside_mechanisms_only_the_noise_module_adds_noise_to_values():
    """The samplers live in secure_noise.py and the symmetric draw in gaussian.py; every
    other mechanism releases through noise.py."""
    owners = {"noise.py", "secure_noise.py", "gaussian.py"}
    offenders = []
    for path in sorted((SRC / "mechanisms").glob("*.py")):
        if path.name not in owners:
            offenders += [f"{path.name}:{line} {name}" for line, name in _draws(path)]
    assert not offenders, offenders


# --------------------------------------------------------------------------- estimators
class _Spy:
    """Wraps every imported reference to the release functions and keeps (value, output)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.calls: list[tuple[np.ndarray, np.ndarray, float]] = []
        originals = {name: getattr(noise, name) for name in
                     ("gaussian_release", "laplace_release", "symmetric_gaussian_release")}
        for name, fn in originals.items():
            wrapped = self._wrap(fn)
            for module in list(sys.modules.values()):
                if getattr(module, "__name__", "").startswith("privpca") and \
                        getattr(module, name, None) is fn:
                    monkeypatch.setattr(module, name, wrapped)
        steps_release = noise.GaussianNoiseSteps.release
        calls = self.calls

        def release_step(steps, value, j, step=1.0):
            out = steps_release(steps, value, j)  # the released gradient; η is applied after
            calls.append((np.array(value, dtype=np.float64), np.asarray(out), steps.sigma))
            return step * out

        monkeypatch.setattr(noise.GaussianNoiseSteps, "release", release_step)

    def _wrap(self, fn):
        def wrapped(value, scale, rng, **kw):
            out = fn(value, scale, rng, **kw)
            self.calls.append((np.array(value, dtype=np.float64, copy=True),
                               np.asarray(out, dtype=np.float64), float(scale)))
            return out
        return wrapped


def _neighbours(n=400, p=4, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, p)) / math.sqrt(p)
    X /= np.maximum(1.0, np.linalg.norm(X, axis=1))[:, None]
    Xp = X.copy()
    Xp[0] = rng.standard_normal(p) / math.sqrt(p) * 0.9
    return X, Xp


def _estimators():
    from privpca import (
        DPPCA,
        AnalyzeGaussPCA,
        LocalGaussianPCA,
        ModSuLQPCA,
        NoisyPowerPCA,
        PrivateOjaPCA,
    )
    return {
        "AnalyzeGauss defaults": lambda: AnalyzeGaussPCA(n_components=2, epsilon=8.0),
        "AnalyzeGauss papers": lambda: AnalyzeGaussPCA(n_components=4, epsilon=1.0,
                                                       centering=None, data_norm=1.0),
        "ModSuLQ": lambda: ModSuLQPCA(n_components=2, epsilon=1.0, centering=None,
                                      data_norm=1.0),
        "NoisyPower": lambda: NoisyPowerPCA(n_components=2, epsilon=8.0, n_iter=3),
        "LocalGaussian": lambda: LocalGaussianPCA(n_components=2, epsilon=1.0,
                                                  centering=None, data_norm=1.0),
        "DPPCA": lambda: DPPCA(n_components=1, epsilon=1.0),
        "PrivateOja": lambda: PrivateOjaPCA(n_components=1, epsilon=1.0, centering=None,
                                            clip_norm=1.0),
    }


@pytest.mark.parametrize("name", list(_estimators()))
def test_every_estimator_release_is_at_chance_in_secure_mode(name, monkeypatch):
    """Each noisy value an estimator releases in secure mode: on the grid, and the attack
    (on both candidate grids, knowing the exact values of both neighbours) at chance."""
    make = _estimators()[name]
    X, Xp = _neighbours(n=400 if name.endswith("papers") or name == "ModSuLQ" else 3000)
    spy = _Spy(monkeypatch)
    right = total = 0
    with privpca.config_context(secure_mode=True):
        for _ in range(6):
            for data, is_d in ((X, True), (Xp, False)):
                spy.calls.clear()
                make().fit(data)
                mine = list(spy.calls)
                spy.calls.clear()
                make().fit(Xp if is_d else X)  # the other neighbour's exact values
                other = list(spy.calls)
                assert mine, "no release went through privpca.mechanisms.noise"
                for _v, out, scale in mine:
                    lam = noise.grid_step(scale)
                    assert np.array_equal(out / lam, np.round(out / lam))
                # The attack on the first release, whose candidate values the adversary
                # computes from the data alone (later ones also read earlier outputs).
                (v, out, scale), (v_other, _, scale_o) = mine[0], other[0]
                if v.shape == v_other.shape and scale == scale_o and \
                        not np.array_equal(v, v_other):
                    for g in _grids(scale):
                        v_x, v_xp = (v, v_other) if is_d else (v_other, v)
                        right += grid_attack(out, v_x, v_xp, g) == is_d
                        total += 1
    assert total > 0
    assert right / total <= 0.75, (right, total)


def test_a_providers_answers_are_at_chance_in_secure_mode():
    """A DPS-PCA provider's power answer and its variance reply (the server's view)."""
    from privpca.federated.protocol import ProviderState, Query

    X, Xp = _neighbours(n=300, p=6)
    Q = np.linalg.qr(np.random.default_rng(1).standard_normal((6, 2)))[0]
    right = total = 0
    with privpca.config_context(secure_mode=True):
        for _ in range(20):
            for data, is_d in ((X, True), (Xp, False)):
                prov = ProviderState(data, n_components=2, epsilon=1.0, delta=1e-5,
                                     n_rounds=1, data_norm=1.0)
                reply = prov.answer_query(Query.from_dense(Q, round=1))
                # The server sees P/n; n is public (replace-one): it multiplies back.
                out = reply.product * prov.n_samples
                v_x, v_xp = X.T @ (X @ Q), Xp.T @ (Xp @ Q)
                sigma = prov.noise_multiplier * prov._raw_sensitivity
                for g in _grids(sigma):
                    right += grid_attack(out, v_x, v_xp, g) == is_d
                    total += 1
    assert right / total <= 0.75, (right, total)


def test_a_secure_fits_record_states_the_grid_rule():
    X, _ = _neighbours(n=400)
    est = privpca.AnalyzeGaussPCA(n_components=2, epsilon=1.0, centering=None, data_norm=1.0)
    with privpca.config_context(secure_mode=True):
        est.fit(X)
    assert noise.SECURE_NOISE_NOTE in est.privacy_.notes
    plain = privpca.AnalyzeGaussPCA(n_components=2, epsilon=1.0, centering=None,
                                    data_norm=1.0).fit(X)
    assert noise.SECURE_NOISE_NOTE not in plain.privacy_.notes
