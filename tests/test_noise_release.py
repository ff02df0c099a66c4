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
from privpca._config import GRID_BITS, SECURE_NOISE_NOTE
from privpca.mechanisms import noise
from privpca.mechanisms.gaussian import symmetric_gaussian_noise
from privpca.mechanisms.secure_noise import SecureGenerator

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
    """The issue's reproduction: ``v + σ·2^-30·K`` (what ``SecureGenerator.standard_normal``
    returned until issue 35): 40 of 40."""
    from privpca.mechanisms.secure_noise import discrete_gaussian

    rng = SecureGenerator()
    sigma = 1.7

    def old(v):
        return v + sigma * np.ldexp(discrete_gaussian(rng, 2.0**30, v.shape).astype(float), -30)

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
#: Every sampling method of ``numpy.random.Generator``, read from NumPy itself (its callables
#: but ``spawn``, which makes generators; ``bit_generator`` is an attribute), plus a bit
#: generator's raw words and privpca's own raw samplers. A call ``X.<method>(…)`` on anything
#: but a module (below) is a draw; privpca's samplers count by bare name too.
GENERATOR_DRAWS = frozenset(
    name for name in dir(np.random.Generator)
    if not name.startswith("_") and name != "spawn" and callable(getattr(np.random.Generator, name))
) | {"random_raw"}
PRIVPCA_SAMPLERS = frozenset({"symmetric_gaussian_noise", "symmetric_noise",
                              "discrete_gaussian", "discrete_laplace"})
DRAWS = GENERATOR_DRAWS | PRIVPCA_SAMPLERS
#: Receivers that are modules, not generators, whose functions share a draw's name
#: (``np.power``, ``math.gamma``, ``scipy.special.beta``, ``scipy.stats.chisquare``, …).
#: ``np.random.<draw>`` (NumPy's global generator) is a draw.
MODULES = frozenset({"np", "numpy", "math", "cmath", "scipy", "special", "scipy.special",
                     "stats", "scipy.stats"})

_SYNTHETIC = "synthetic data: a table to fit, not a release (the fit's privacy is for it)"
_SUBSAMPLE = ("which records form the experiment's table (a random subsample of a data set): "
              "data generation; the fit's privacy is for the table it is given")
_SOLVER_START = ("random start vectors of the block Krylov eigensolver inside the Fantope "
                 "projection: numerics on a matrix already released (LocalSparsePCA's noisy "
                 "covariance, post-processing) or on non-private data (SparsePCA); the "
                 "projection does not depend on the start beyond the solver's tolerance")

#: The only draws outside privpca/mechanisms/: (file, function) → (methods, reason). The
#: function is the qualified name of the innermost enclosing def/class ("<module>" at top
#: level). A draw in an allowed file but another function, or of another method, fails.
ALLOWED_DRAWS: dict[tuple[str, str], tuple[frozenset[str], str]] = {
    # Random starts of iterative methods: not privacy randomness.
    ("solvers/power.py", "random_orthonormal_basis"): (frozenset({"standard_normal"}), (
        "random orthonormal start of the iterative estimators (noisy power method, Oja, "
        "Private Oja and DP-PCA's W0, SparsePCA): drawn independently of the data, and each "
        "privacy proof holds for every start, so it need not be secret")),
    ("solvers/fantope_partial.py", "_capped_projection"): (frozenset({"standard_normal"}),
                                                   _SOLVER_START),
    ("solvers/fantope_partial.py", "_partial_eig"): (frozenset({"standard_normal"}), _SOLVER_START),
    # Public, data-independent assignments and orders: the guarantee holds for every draw.
    ("decomposition/dp_pca.py", "DPPCA._stream"): (frozenset({"permutation"}), (
        "DP-PCA's order of the records: each record enters one minibatch, so the steps "
        "compose in parallel for every data-independent order; the order is not secret and "
        "no amplification is claimed from it")),
    ("decomposition/_local_base.py", "_LocalCovarianceEstimator._group_reports"): (
        frozenset({"permutation"}), (
            "public assignment of users to the local model's groups: each user sends one "
            "report at the full (epsilon, delta), so every assignment drawn independently of "
            "the data gives every user (epsilon, delta)-LDP; the assignment is public")),
    ("local_protocol/local_preprocessing.py", "assign_thresholds"): (frozenset({"permutation"}), (
        "public, balanced assignment of a threshold question to each user "
        "(LocalNormRandomiser): each answer is epsilon-LDP whatever the question")),
    ("decomposition/oja.py", "OjaPCA._release_papers"): (frozenset({"permutation"}), (
        "the order of the non-private reference OjaPCA: no privacy claimed")),
    # Post-processing of released values.
    ("pipeline/spectrum.py", "bootstrap_error_bound"): (
        frozenset({"standard_normal", "random", "symmetric_noise"}), (
            "a parametric bootstrap of the error bar on the released noisy matrix with a "
            "public sigma and the mean's public perturbation bound: post-processing, it reads "
            "no data")),
    ("pipeline/pairing.py", "pair_order"): (frozenset({"permutation"}), (
        "which rows are paired (wide tables): the sensitivity holds for any fixed pairing, "
        "so the permutation is not privacy noise; it is drawn from the fit's own generator "
        "so that the pairing cannot follow the row order")),
    ("pipeline/bound_selection.py", "subspace_noise"): (
        frozenset({"symmetric_noise", "standard_normal"}), (
            "a parametric bootstrap on a released pilot Gram with a public sigma and the "
            "private mean's public noise level (how far noise of that size moves its top-k "
            "subspace): post-processing, it reads no data")),
    # Seeds of other streams: as secret as the generator they come from; nothing released.
    ("decomposition/_base.py", "BasePrivatePCA._preprocessing_rng"): (
        frozenset({"integers"}), (
            "seeds the preprocessing's independent stream when the generator cannot spawn "
            "(a caller's bit generator without a SeedSequence; never a SecureGenerator, whose "
            "spawn answers first): the seed is as secret as the generator and never released")),
    ("decomposition/_providers.py", "start_and_seeds"): (frozenset({"integers"}), (
        "one noise seed per simulated DPS-PCA provider (privacy-relevant: each provider's "
        "noise stream comes from it, drawn in privpca.mechanisms.noise); the seeds are never "
        "released, and a secure fit hands the providers none (is_os_keyed)")),
    # Privacy-relevant draws still outside mechanisms/ (stated, not hidden).
    ("streaming/holdout.py", "random_subset"): (frozenset({"integers", "choice"}), (
        "PRIVACY-RELEVANT: the secret held-out subset of a streamed fit; parallel "
        "composition's coupling needs it uniform, data-independent and never published "
        "(streaming/holdout.py's docstring). The fit's own generator (a SecureGenerator "
        "unless seeded); a candidate for privpca.mechanisms")),
    # Synthetic data and the experiments' tables.
    ("datasets/synthetic.py", "random_orthonormal"): (frozenset({"standard_normal"}),
                                                      _SYNTHETIC),
    ("datasets/synthetic.py", "_sample"): (frozenset({"standard_normal"}), _SYNTHETIC),
    ("datasets/public_shapes.py", "make_survey_binary"): (frozenset({"standard_normal", "random"}),
                                                          _SYNTHETIC),
    ("datasets/public_shapes.py", "make_counts_heavy"): (frozenset({"standard_normal", "poisson"}),
                                                         _SYNTHETIC),
    ("datasets/public_shapes.py", "make_wide_spiked"): (frozenset({"standard_normal"}), _SYNTHETIC),
    ("datasets/public_shapes.py", "make_norm_octaves"): (frozenset({"standard_normal", "uniform"}),
                                                         _SYNTHETIC),
    ("datasets/synthetic.py", "sparse_basis"): (frozenset({"permutation"}), _SYNTHETIC),
    ("datasets/synthetic.py", "make_signal_noise"): (frozenset({"choice", "standard_normal"}),
                                                     _SYNTHETIC),
    ("datasets/synthetic.py", "make_dpspca_covariance"): (
        frozenset({"standard_normal", "uniform"}), _SYNTHETIC),
    ("datasets/synthetic.py", "make_dpspca_data"): (frozenset({"standard_normal"}), _SYNTHETIC),
    ("experiments/liu_dppca.py", "gaussian_data"): (frozenset({"standard_normal"}), _SYNTHETIC),
    ("experiments/liu_dppca.py", "run_fig1"): (frozenset({"standard_normal"}), (
        "Liu et al.'s Figure 1 data: the planted direction of a synthetic table")),
    ("experiments/demo.py", "run_demo"): (frozenset({"choice"}), _SUBSAMPLE),
    ("experiments/wang_xu_lowdim.py", "run_real_lowdim.make_data"): (
        frozenset({"permutation"}), _SUBSAMPLE),
    # The auditor's reference mechanisms and generator probes: they release nothing of a
    # user's data; they are what an audit is run on.
    ("audit/cli.py", "_mechanism.leaky"): (frozenset({"discrete_gaussian"}), (
        "the audit CLI's control: the broken pre-issue-26 lattice arithmetic, which the "
        "probe must flag")),
    ("audit/cli.py", "Issue35Generator.standard_normal"): (frozenset({"standard_normal"}), (
        "the generator probe's control: a generator whose standard_normal is issue 35's "
        "lattice, which the probe must flag (never used for a release)")),
    ("audit/probe.py", "<module>"): (
        frozenset({"laplace", "normal", "random", "standard_exponential", "standard_gamma",
                   "standard_normal", "vonmises"}), (
            "the generator probe's table of continuous draws (GENERATOR_METHODS): it tests "
            "the generator's own outputs, no data")),
}

#: The modules of privpca/mechanisms/ that draw, with the methods each may call (None: any).
#: Only the first four add noise to values; the others draw a mechanism's other randomness.
MECHANISM_DRAWS: dict[str, tuple[frozenset[str] | None, str]] = {
    "noise.py": (None, "the one place noise is added to a value (default and secure mode)"),
    "secure_noise.py": (None, "the secure generator and the exact discrete samplers"),
    "_discrete_kernels.py": (None, "the discrete samplers, compiled"),
    "gaussian.py": (None, "the symmetric Gaussian matrix draw, through noise.py"),
    "distributed_gaussian.py": (frozenset({"discrete_gaussian"}), (
        "each provider's share of one central release's discrete Gaussian noise, added to "
        "its integer code (the distributed form of noise.py's secure path)")),
    "randomised_response.py": (frozenset({"random", "binomial"}),
                               "randomised response's flips and their count-level form"),
    "shuffling.py": (frozenset({"permutation"}),
                     "the secret order: Private Oja's shuffle, the held-out split"),
    "bingham_gibbs.py": (
        frozenset({"random", "gamma", "standard_normal", "vonmises", "permutation"}),
        "the exponential mechanism's sampler (its target law, not additive noise)"),
    "bingham_sampler.py": (frozenset({"random", "standard_normal"}),
                           "the exponential mechanism's exact samplers (k = 1 and k = p)"),
    "_bingham_kernels.py": (frozenset({"random", "gamma", "standard_normal", "integers"}),
                            "the exponential mechanism's sampler, compiled"),
}


class _DrawFinder(ast.NodeVisitor):
    """Every draw in a module: (qualified name of the enclosing def/class, line, method)."""

    def __init__(self) -> None:
        self.scope: list[str] = []
        self.found: list[tuple[str, int, str]] = []

    def _enter(self, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) -> None:
        self.scope.append(node.name)
        self.generic_visit(node)
        self.scope.pop()

    visit_FunctionDef = visit_AsyncFunctionDef = visit_ClassDef = _enter

    def visit_Call(self, node: ast.Call) -> None:
        f = node.func
        name = None
        if isinstance(f, ast.Attribute) and f.attr in DRAWS and \
                ast.unparse(f.value) not in MODULES:
            name = f.attr
        elif isinstance(f, ast.Name) and f.id in PRIVPCA_SAMPLERS:
            name = f.id
        if name is not None:
            self.found.append((".".join(self.scope) or "<module>", node.lineno, name))
        self.generic_visit(node)


def _draws(source: str) -> list[tuple[str, int, str]]:
    finder = _DrawFinder()
    finder.visit(ast.parse(source))
    return finder.found


def _outside_mechanisms() -> dict[str, list[tuple[str, int, str]]]:
    return {rel: _draws(path.read_text())
            for path in sorted(SRC.rglob("*.py"))
            if not (rel := path.relative_to(SRC).as_posix()).startswith("mechanisms/")}


def test_the_draw_list_is_numpys_and_the_finder_sees_draws():
    assert {"random", "integers", "binomial", "permutation", "permuted", "shuffle", "choice",
            "bytes", "gamma", "standard_normal", "laplace", "vonmises"} <= GENERATOR_DRAWS
    assert not {"spawn", "bit_generator"} & GENERATOR_DRAWS
    found = _draws(
        "import math\nimport numpy as np\n"
        "def f(rng):\n    x = np.power(2.0, 3) + math.gamma(2.0)\n"
        "    return rng.integers(3) + x\n"
        "class C:\n    def g(self):\n        return self.rng.shuffle([1]), np.random.random()\n"
        "h = discrete_gaussian(None, 1.0, 3)\n")
    assert found == [("f", 5, "integers"), ("C.g", 8, "shuffle"), ("C.g", 8, "random"),
                     ("<module>", 9, "discrete_gaussian")]


def test_no_privacy_noise_is_drawn_outside_mechanisms():
    """Every draw on a generator outside privpca/mechanisms/ is allow-listed, by file and
    function and method, with its reason: privacy randomness (noise, flips, the exponential
    mechanism's sampler, secret orders) is drawn in privpca/mechanisms/ only."""
    offenders = [f"{rel}:{line} {qual}: .{name}(" for rel, draws in _outside_mechanisms().items()
                 for qual, line, name in draws
                 if name not in ALLOWED_DRAWS.get((rel, qual), (frozenset(), ""))[0]]
    assert not offenders, (
        "draws outside privpca/mechanisms/: move privacy randomness into a mechanism (noise "
        "through privpca.mechanisms.noise), or allow-list a non-privacy draw in "
        "ALLOWED_DRAWS with its reason: " + ", ".join(offenders))


def test_every_allowed_draw_is_still_there():
    """No stale entry: each allowed (file, function) still draws each allowed method."""
    seen = {(rel, qual, name) for rel, draws in _outside_mechanisms().items()
            for qual, _line, name in draws}
    stale = [f"{rel} {qual} .{name}(" for (rel, qual), (names, reason) in ALLOWED_DRAWS.items()
             for name in sorted(names) if (rel, qual, name) not in seen]
    assert not stale, "remove from ALLOWED_DRAWS: " + ", ".join(stale)
    assert all(reason for _names, reason in ALLOWED_DRAWS.values())


def test_inside_mechanisms_only_the_noise_module_adds_noise_to_values():
    """Inside privpca/mechanisms/ only the designated modules draw: noise.py (the additive
    releases), secure_noise.py and its compiled kernels (the samplers) and gaussian.py draw
    any noise; randomised response, the shuffle and the Bingham sampler draw only what their
    mechanisms are made of."""
    offenders = []
    for path in sorted((SRC / "mechanisms").glob("*.py")):
        allowed, _role = MECHANISM_DRAWS.get(path.name, (frozenset(), ""))
        offenders += [f"{path.name}:{line} {qual}: .{name}("
                      for qual, line, name in _draws(path.read_text())
                      if allowed is not None and name not in allowed]
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
        "DPPCA": lambda: DPPCA(n_components=1, epsilon=2.0),
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
                # The attack on the first release whose values differ between the
                # neighbours (a quantile search's first counts are often equal on both), whose
                # candidate values the adversary computes from the data alone.
                differing = [(a, b) for a, b in zip(mine, other, strict=False)
                             if a[0].shape == b[0].shape and not np.array_equal(a[0], b[0])]
                if not differing:
                    continue
                (v, out, scale), (v_other, _, scale_o) = differing[0]
                if scale == scale_o:
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
    assert SECURE_NOISE_NOTE in est.privacy_.notes
    default = privpca.AnalyzeGaussPCA(n_components=2, epsilon=1.0, centering=None,
                                      data_norm=1.0).fit(X)  # unseeded: secure by default
    assert SECURE_NOISE_NOTE in default.privacy_.notes
    with privpca.config_context(secure_mode=False):
        plain = privpca.AnalyzeGaussPCA(n_components=2, epsilon=1.0, centering=None,
                                        data_norm=1.0).fit(X)
    assert SECURE_NOISE_NOTE not in plain.privacy_.notes
