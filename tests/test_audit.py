"""The privacy auditor: valid lower bounds, power, and half-noise mutants flagged.

A mutant is built in the test only: a Generator whose Gaussian and Laplace draws are scaled
by 1/2 (exactly half the noise of every mechanism that draws through it), or the noise
scale that a real fit calibrated, halved. Library code is never changed.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import privpca
from privpca.audit import audit, builtin_neighbours, ideal_power, release_features
from privpca.audit._bounds import cp_lower, cp_upper, epsilon_bound
from privpca.mechanisms import analytic_gaussian_sigma
from privpca.mechanisms.histogram import StabilityHistogram
from privpca.protocols.local_covariance import LocalCovarianceRandomiser, pack_upper_triangle


class HalfNoise(np.random.Generator):
    """Every Gaussian and Laplace draw at half its scale (the mutant)."""

    factor = 0.5

    def standard_normal(self, size=None, dtype=np.float64, out=None):  # type: ignore[override]
        return self.factor * super().standard_normal(size)

    def normal(self, loc=0.0, scale=1.0, size=None):  # type: ignore[override]
        return super().normal(loc, self.factor * np.asarray(scale), size)

    def laplace(self, loc=0.0, scale=1.0, size=None):  # type: ignore[override]
        return super().laplace(loc, self.factor * np.asarray(scale), size)

    def spawn(self, n):  # type: ignore[override]
        return [HalfNoise(np.random.PCG64(s)) for s in self.bit_generator.seed_seq.spawn(n)]


def half(seed: int) -> HalfNoise:
    return HalfNoise(np.random.PCG64(np.random.SeedSequence(seed)))


def real(seed: int) -> np.random.Generator:
    return np.random.default_rng(np.random.SeedSequence(seed))


def _quiet_fit(est, X):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return est.fit(X)


# --------------------------------------------------------------------------- bounds


def test_clopper_pearson_bounds_bracket_the_estimate():
    lo, hi = cp_lower(30, 1000, 0.975), cp_upper(30, 1000, 0.975)
    assert lo < 0.03 < hi
    assert cp_lower(0, 100, 0.975) == 0.0 and cp_upper(100, 100, 0.975) == 1.0
    # 0 hits of 1000: the upper bound is about ln(40)/1000 (rule of three at 97.5 %).
    assert cp_upper(0, 1000, 0.975) == pytest.approx(1 - 0.025 ** (1 / 1000), rel=1e-6)


def test_epsilon_bound_subtracts_delta_and_is_never_negative():
    assert epsilon_bound(10, 1000, 500, 1000, 0.0, 0.95) == 0.0
    with_delta = epsilon_bound(500, 1000, 50, 1000, 0.1, 0.95)
    without = epsilon_bound(500, 1000, 50, 1000, 0.0, 0.95)
    assert 0.0 < with_delta < without


def test_power_grows_with_runs_and_stays_below_the_claim():
    small, large = ideal_power(1.0, 1e-5, 10_000), ideal_power(1.0, 1e-5, 1_000_000)
    assert 0.0 < small < large < 1.0
    assert 0.0 < ideal_power(1.0, 0.0, 100_000) < 1.0  # Laplace yardstick when δ = 0


# --------------------------------------------------------------------------- done-when check


def _gaussian_sum(sigma: float):
    def mechanism(X, rng, runs):
        return np.asarray(X).sum() + sigma * rng.standard_normal(runs)

    return mechanism


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_gaussian_sum_real_passes_and_half_noise_is_flagged(seed):
    sigma = analytic_gaussian_sigma(1.0, 1e-5, 1.0)
    X, Xn = np.array([[0.0]]), np.array([[1.0]])
    ok = audit(_gaussian_sum(sigma), X, Xn, epsilon=1.0, delta=1e-5, runs=200_000,
               random_state=seed)
    bad = audit(_gaussian_sum(sigma / 2), X, Xn, epsilon=1.0, delta=1e-5, runs=200_000,
                random_state=seed)
    assert ok.epsilon_lower <= 1.0
    assert bad.epsilon_lower > 1.0 and bad.violated
    assert ok.power > 0.5  # 140 000 evaluation runs certify about 0.6 for an exact mechanism


def test_callable_without_runs_keyword_is_looped():
    sigma = analytic_gaussian_sigma(1.0, 1e-5)

    def one(X, rng):
        return np.asarray(X).sum() + sigma * rng.standard_normal(1)

    report = audit(one, [[0.0]], [[1.0]], epsilon=1.0, delta=1e-5, runs=500, random_state=0)
    assert 0.0 <= report.epsilon_lower <= 1.0
    assert report.counts[2] == 350


def test_audit_refuses_bad_arguments():
    with pytest.raises(ValueError, match="runs"):
        audit(_gaussian_sum(1.0), [[0.0]], [[1.0]], epsilon=1, delta=1e-5, runs=5)
    with pytest.raises(ValueError, match="X_neighbour"):
        audit(_gaussian_sum(1.0), [[0.0]], epsilon=1, delta=1e-5, runs=100)
    with pytest.raises(TypeError):
        audit(42, [[0.0]], [[1.0]], epsilon=1, delta=1e-5, runs=100)


# --------------------------------------------------------------------------- estimators


def test_estimator_form_runs_on_its_builtin_neighbours():
    report = audit(privpca.AnalyzeGaussPCA(), epsilon=1.0, delta=1e-5, runs=60, random_state=0)
    assert report.counts[2] == 42
    assert 0.0 <= report.epsilon_lower <= report.epsilon
    assert "e1 vs e2" in report.description


def test_builtin_neighbours_differ_in_one_record():
    for setting in ("paper", "release"):
        nb = builtin_neighbours(privpca.NoisyPowerPCA(), setting)
        if setting == "paper":
            assert nb.X.shape == nb.X_neighbour.shape
            assert int((nb.X != nb.X_neighbour).any(axis=1).sum()) == 1
            assert nb.params["centering"] is None and nb.params["data_norm"] == 1.0
        else:
            assert len(nb.X) == len(nb.X_neighbour) + 1
            np.testing.assert_array_equal(nb.X[:-1], nb.X_neighbour)


def test_release_features_project_on_the_difference_of_second_moments():
    class Fitted:
        components_ = np.array([[1.0, 0.0]])
        explained_variance_ = np.array([2.0])
        mean_ = np.zeros(2)

    f = release_features(Fitted(), np.array([1.0, 0.0]), np.array([0.0, 1.0]))
    np.testing.assert_allclose(f, [1.0, 2.0, 2.0, 0.0])


# --------------------------------------------------------------------------- mutants (slow)
# Claimed ε = 2: there a half-noise Gaussian mechanism is ≈ 4.5-DP, which ~30 000 runs prove
# (ideal power at ε = 2 is below 2 at that size, so the real mechanisms stay under).

EPS, DELTA = 2.0, 1e-5


def _pair(mechanism_for, X, Xn, *, runs=40_000, epsilon=EPS, delta=DELTA, seed=0):
    """(real report, mutant report) for a mechanism given the generator to draw from."""
    out = []
    for make in (real, half):
        gen = make(seed)
        fn = mechanism_for(gen)
        out.append(audit(fn, X, Xn, epsilon=epsilon, delta=delta, runs=runs))
    return out


@pytest.mark.slow
def test_mutant_local_randomiser():
    rand = LocalCovarianceRandomiser(n_features=2, epsilon=EPS, delta=DELTA, data_norm=1.0)

    def mechanism_for(gen):
        def m(X, rng, runs):
            return rand.report_batch(np.repeat(np.asarray(X), runs, axis=0), gen)
        return m

    ok, bad = _pair(mechanism_for, np.array([[1.0, 0.0]]), np.array([[0.0, 1.0]]))
    assert ok.epsilon_lower <= EPS < bad.epsilon_lower


def _matrix_release(sigma_of, x, runs, gen):
    packed = pack_upper_triangle(np.outer(x, x))
    return packed + sigma_of * gen.standard_normal((runs, packed.size))


@pytest.mark.slow
@pytest.mark.parametrize("name", ["AnalyzeGaussPCA", "ModSuLQPCA"])
def test_mutant_central_gram_release(name):
    """The noise each estimator calibrates, on the packed Gram matrix of the worst-case pair.

    ModSuLQ's theorem over-provisions noise: it is audited against the ε its noise certifies
    by the Gaussian analysis (``certified_epsilon_``, what the ledger composes), at ε = 2.
    """
    cls = getattr(privpca, name)
    x0, x1 = np.array([1.0, 0.0]), np.array([0.0, 1.0])
    est_eps = EPS if name == "AnalyzeGaussPCA" else 6.5
    fitted = _quiet_fit(cls(1, epsilon=est_eps, delta=DELTA, centering=None, data_norm=1.0),
                        x0[None, :])
    sigma = fitted.noise_scale_
    claim = getattr(fitted, "certified_epsilon_", EPS)
    reports = []
    for make in (real, half):
        gen = make(1)

        def m(X, rng, runs, gen=gen):
            return _matrix_release(sigma, np.asarray(X)[0], runs, gen)

        reports.append(audit(m, x0[None, :], x1[None, :], epsilon=claim, delta=DELTA,
                             runs=40_000))
    ok, bad = reports
    assert ok.epsilon_lower <= claim < bad.epsilon_lower


@pytest.mark.slow
def test_mutant_noisy_power_caught_by_projection_on_the_difference():
    """Half-noise NoisyPower: every noisy product ``Y_t = A Q_{t-1} + G_t`` is released (the
    mechanism the analysis composes), and the statistic is their projection on the
    neighbours' difference, ``Σ_t ⟨Y_t, (A − A')Q_{t-1}⟩``."""
    T = 3
    x0, x1 = np.array([1.0, 0.0]), np.array([0.0, 1.0])
    fitted = _quiet_fit(privpca.NoisyPowerPCA(1, epsilon=EPS, delta=DELTA, n_iter=T,
                                              centering=None, data_norm=1.0), x0[None, :])
    sigma = fitted.noise_scale_
    diff = np.outer(x0, x0) - np.outer(x1, x1)

    def mechanism_for(gen):
        def m(X, rng, runs):
            x = np.asarray(X)[0]
            A = np.outer(x, x)
            Q = np.tile(np.array([1.0, 1.0]) / np.sqrt(2.0), (runs, 1))  # public start
            stat = np.zeros(runs)
            for _ in range(T):
                Y = Q @ A.T + sigma * gen.standard_normal((runs, 2))
                stat += np.einsum("ij,ij->i", Y, Q @ diff.T)
                Q = Y / np.linalg.norm(Y, axis=1, keepdims=True)
            return stat
        return m

    ok, bad = _pair(mechanism_for, x0[None, :], x1[None, :])
    assert ok.epsilon_lower <= EPS < bad.epsilon_lower


@pytest.mark.slow
@pytest.mark.parametrize("noise", ["laplace"])
def test_mutant_dppca_stability_histogram(noise):
    """DP-PCA's histograms (Laplace and Gaussian steps): one record moves from bin 1 to bin
    0 (replace), both counts near the release threshold; the event is "bin 0 released"."""
    hist = StabilityHistogram.calibrate(EPS, DELTA, n_histograms=1, noise=noise)
    # Counts where releasing is possible but not certain; the Gaussian's privacy loss is
    # largest in its tail, so its counts sit further below the threshold.
    k = int(np.ceil(hist.threshold - (2.0 * hist.scale if noise == "gaussian" else 0.0)))

    def mechanism_for(gen):
        def m(X, rng):
            rel = hist.release_modes(np.asarray(X, dtype=np.int64), gen)
            return float(rel.released[0]) * (2.0 - float(rel.mode[0]))
        return m

    X = np.array([0] * k + [1] * k)[:, None]
    Xn = np.array([0] * (k + 1) + [1] * (k - 1))[:, None]
    ok, bad = _pair(mechanism_for, Xn, X, runs=20_000, delta=DELTA)
    assert ok.epsilon_lower <= EPS < bad.epsilon_lower


@pytest.mark.slow
def test_mutant_bingham_exponential_mechanism():
    """Bingham: 'less noise' is a larger ε in the density. On the p = 2 pair the normalising
    constants match, so the mechanism spends only ε/2 there and a 2ε density is still
    ε-DP (not a violation); the mutant is the 4ε density (a quarter of the temperature)."""
    est = privpca.BinghamPCA(1, epsilon=EPS, centering=None, data_norm=1.0)
    mutant = privpca.BinghamPCA(1, epsilon=4 * EPS, centering=None, data_norm=1.0)
    reports = []
    for e in (est, mutant):
        from privpca.accounting import PrivacyLedger

        def m(X, rng, e=e):
            fit = _quiet_fit(e.set_params(random_state=rng, ledger=PrivacyLedger()), X)
            return release_features(fit, np.array([1.0, 0.0]), np.array([0.0, 1.0]))[:1]

        reports.append(audit(m, [[1.0, 0.0]], [[0.0, 1.0]], epsilon=EPS, delta=0.0,
                             runs=6_000, random_state=3))
    ok, bad = reports
    assert ok.epsilon_lower <= EPS < bad.epsilon_lower


@pytest.mark.slow
def test_mutant_dpspca_provider(monkeypatch):
    """A DPS-PCA provider's answer ``XᵢᵀXᵢQ + G`` (one round, its whole budget): its noise
    generator is replaced by the real or the half-noise one."""
    from privpca.federated import protocol
    from privpca.federated.protocol import ProviderState, Query

    Q = Query.from_dense(np.array([[1.0], [1.0]]) / np.sqrt(2.0))
    reports = []
    for make in (real, half):
        gen = make(5)
        monkeypatch.setattr(protocol, "provider_noise_rng", lambda seed, release, kind="query",
                            gen=gen: gen)

        def m(X, rng):
            prov = ProviderState(np.asarray(X), n_components=1, epsilon=EPS, delta=DELTA,
                                 n_rounds=1, data_norm=1.0, centering=None)
            return prov.answer_query(Q).product.ravel()

        reports.append(audit(m, [[1.0, 0.0]], [[0.0, 1.0]], epsilon=EPS, delta=DELTA,
                             runs=30_000))
    ok, bad = reports
    assert ok.epsilon_lower <= EPS < bad.epsilon_lower


@pytest.mark.slow
def test_mutant_private_oja_step():
    """One Private Oja step, ``G(x) + N(0, σ²)`` with ``G(x) = x xᵀw`` and the σ the estimator
    calibrated (sensitivity 2β). ``{x xᵀw : ‖x‖ ≤ 1}`` is a circle of diameter ‖w‖, so the
    attainable sensitivity is β, half the calibrated one: a half-noise step is still exactly
    ε-DP (not a violation); the mutant is a quarter of the noise."""
    X = np.random.default_rng(0).standard_normal((3000, 2))
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    est = _quiet_fit(privpca.PrivateOjaPCA(1, epsilon=EPS, delta=DELTA, amplification="none",
                                           centering=None, clip_norm=1.0,
                                           ledger=privpca.PrivacyLedger()), X)
    sigma = est.privacy_.spends[0].noise_scale
    w = np.array([1.0, 0.0])
    x0, x1 = np.array([1.0, 1.0]) / np.sqrt(2.0), np.array([1.0, -1.0]) / np.sqrt(2.0)
    reports = []
    for scale in (sigma, sigma / 4):
        gen = real(7)

        def m(X, rng, runs, scale=scale, gen=gen):
            x = np.asarray(X)[0]
            return (x @ w) * x + scale * gen.standard_normal((runs, 2))

        reports.append(audit(m, x0[None, :], x1[None, :], epsilon=EPS, delta=DELTA,
                             runs=40_000))
    ok, bad = reports
    assert ok.epsilon_lower <= EPS < bad.epsilon_lower
