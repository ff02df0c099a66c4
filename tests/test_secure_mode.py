"""Secure mode: configuration, seeds refused, CSPRNG + floating-point-safe noise, accuracy."""

from __future__ import annotations

import math
import subprocess
import sys
import threading
import warnings

import numpy as np
import pytest
from scipy import stats

import privpca
from privpca._config import GRID_BITS, ReproducibleNoiseWarning
from privpca.mechanisms import randomness
from privpca.mechanisms.randomness import check_noise_rng, check_random_state
from privpca.mechanisms.secure_noise import (
    SecureGenerator,
    discrete_gaussian,
    discrete_laplace,
    is_os_keyed,
)


def test_config_context_sets_and_restores_secure_mode():
    assert privpca.get_config()["secure_mode"] == "auto"
    assert is_os_keyed(check_random_state(None))  # secure by default
    with privpca.config_context(secure_mode=True):
        assert privpca.get_config()["secure_mode"] is True
        assert is_os_keyed(check_random_state(None))
    with privpca.config_context(secure_mode=False):  # the explicit opt-out
        assert not isinstance(check_random_state(None), SecureGenerator)
        assert not isinstance(check_noise_rng(None), SecureGenerator)
    assert privpca.get_config()["secure_mode"] == "auto"


def test_set_config_is_thread_local_and_checked():
    seen = {}

    def worker():
        seen["other"] = privpca.get_config()["secure_mode"]

    privpca.set_config(secure_mode=True)
    try:
        t = threading.Thread(target=worker)
        t.start()
        t.join()
        assert privpca.get_config()["secure_mode"] is True
        assert seen["other"] == "auto"
    finally:
        privpca.set_config(secure_mode="auto")
    with pytest.raises(ValueError, match="'auto', True or False"):
        privpca.set_config(secure_mode="yes")


@pytest.mark.parametrize(("value", "expected"), [
    ("1", ["True", "SecureGenerator"]), ("0", ["False", "Generator"]),
    ("", ["auto", "SecureGenerator"])])
def test_environment_variable_sets_the_process_default(value, expected):
    code = ("import privpca, sys; "
            "from privpca.mechanisms.randomness import check_random_state as c; "
            "print(privpca.get_config()['secure_mode'], type(c(None)).__name__)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env={"PRIVPCA_SECURE_MODE": value, "PATH": ""}, check=True)
    assert out.stdout.split() == expected


@pytest.mark.parametrize("seed", [0, np.random.SeedSequence(1), np.random.default_rng(2)])
def test_secure_mode_refuses_every_seed(seed):
    X = np.random.default_rng(0).standard_normal((200, 3))
    with privpca.config_context(secure_mode=True):
        with pytest.raises(ValueError, match="Secure mode refuses random_state"):
            privpca.AnalyzeGaussPCA(1, centering=None, data_norm=5.0, random_state=seed,
                                    ledger=privpca.PrivacyLedger()).fit(X)
        # Data generators are not private releases: their seeds stay allowed.
        assert check_random_state(0, stream="data") is not None


def test_seeded_fit_warns_once_outside_secure_mode(monkeypatch):
    monkeypatch.setattr(randomness, "_warned_reproducible", False)
    X = np.random.default_rng(0).standard_normal((100, 3))
    est = privpca.AnalyzeGaussPCA(1, centering=None, data_norm=5.0, random_state=0,
                                  ledger=privpca.PrivacyLedger())
    with pytest.warns(ReproducibleNoiseWarning, match="rebuilt"):
        est.fit(X)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ReproducibleNoiseWarning)
        est.fit(X)  # once per process
        privpca.AnalyzeGaussPCA(1, centering=None, data_norm=5.0,
                                ledger=privpca.PrivacyLedger()).fit(X)  # unseeded: silent


def test_secure_generator_is_unpredictable_and_not_picklable():
    import pickle

    a, b = SecureGenerator(), SecureGenerator()
    assert not np.array_equal(a.integers(0, 2**62, 4), b.integers(0, 2**62, 4))
    assert all(isinstance(c, SecureGenerator) for c in a.spawn(3))
    with pytest.raises(TypeError):
        pickle.dumps(a)


def test_discrete_gaussian_matches_its_mass_function():
    rng = SecureGenerator()
    sigma = 1.7
    k = discrete_gaussian(rng, sigma, 100_000)
    support = np.arange(-12, 13)
    pmf = np.exp(-support**2 / (2 * sigma**2))
    pmf /= pmf.sum()
    counts = np.array([(k == v).sum() for v in support])
    keep = pmf * k.size > 5
    chi2 = (((counts - pmf * k.size) ** 2) / (pmf * k.size))[keep].sum()
    assert chi2 < stats.chi2.ppf(0.999, keep.sum() - 1)


def test_discrete_laplace_matches_its_mass_function():
    rng = SecureGenerator()
    t = 1.3
    k = discrete_laplace(rng, t, 100_000)
    r = math.exp(-1 / t)
    support = np.arange(-15, 16)
    pmf = (1 - r) / (1 + r) * r ** np.abs(support)
    counts = np.array([(k == v).sum() for v in support])
    keep = pmf * k.size > 5
    chi2 = (((counts - pmf * k.size) ** 2) / (pmf * k.size))[keep].sum()
    assert chi2 < stats.chi2.ppf(0.999, keep.sum() - 1)


def test_secure_releases_are_exact_on_a_power_of_two_grid():
    from privpca.mechanisms.noise import gaussian_release, laplace_release

    rng = SecureGenerator()
    counts = np.arange(50, dtype=np.float64) + 0.3
    for release in (gaussian_release, laplace_release):
        noisy = release(counts, 3.0, rng, sensitivity=1.0)
        lam = math.ldexp(1.0, math.frexp(3.0)[1] - 1 - GRID_BITS)
        steps = noisy / lam
        np.testing.assert_array_equal(steps, np.round(steps))  # exact multiples of Λ


@pytest.mark.parametrize("method", ["random", "standard_normal", "normal", "laplace",
                                    "standard_exponential", "exponential"])
def test_no_secure_generator_method_returns_lattice_values(method):
    """Issue 35: standard_normal returned 2^-30·K, and the exact Bingham sampler's unit
    vector was proportional to a short integer vector. Every continuous draw is now a
    transform of full-precision uniforms, with the right law."""
    z = np.asarray(getattr(SecureGenerator(), method)(size=100_000))
    scaled = np.ldexp(z, 30)  # the old grid 2^-30
    assert np.mean(scaled == np.round(scaled)) < 0.01
    law = {"random": ("uniform", ()), "standard_normal": ("norm", ()),
           "normal": ("norm", ()), "laplace": ("laplace", ()),
           "standard_exponential": ("expon", ()), "exponential": ("expon", ())}[method]
    assert stats.kstest(z, *law).pvalue > 1e-4


def test_full_precision_uniforms_reach_the_small_floats():
    from privpca.mechanisms.secure_noise import uniform_full

    u = uniform_full(SecureGenerator(), 2_000_000)
    assert u.min() > 0.0 and u.max() < 1.0
    tiny = u[u < 2.0**-12]  # about 488 of them, each with all 52 mantissa bits random
    assert 350 < tiny.size < 650
    assert np.mean(np.ldexp(tiny, 53) == np.round(np.ldexp(tiny, 53))) < 0.05
    assert stats.kstest(np.ldexp(tiny, 12), "uniform").pvalue > 1e-4


def test_secure_generator_key_cannot_be_read_or_replaced():
    rng = SecureGenerator()
    with pytest.raises(AttributeError, match="not readable"):
        rng.bit_generator.state  # noqa: B018
    with pytest.raises(AttributeError, match="cannot be replaced"):
        rng.bit_generator.state = np.random.PCG64(0).state
    assert is_os_keyed(rng) and "OS-keyed" in repr(rng)


def test_unseeded_default_fit_is_secure_and_says_so():
    X = _spiked(n=4000)
    est = privpca.AnalyzeGaussPCA(1, ledger=privpca.PrivacyLedger()).fit(X)
    assert est.privacy_.noise_mode == "secure" and "Secure mode:" in est.privacy_.notes
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        seeded = privpca.AnalyzeGaussPCA(1, random_state=3, ledger=privpca.PrivacyLedger())
        seeded.fit(X)
        with privpca.config_context(secure_mode=False):
            again = privpca.AnalyzeGaussPCA(1, random_state=3, ledger=privpca.PrivacyLedger())
            again.fit(X)
            opted_out = privpca.AnalyzeGaussPCA(1, ledger=privpca.PrivacyLedger()).fit(X)
    assert seeded.privacy_.noise_mode == "reproducible"
    assert "not a release" in seeded.privacy_.notes
    # A seeded fit is the float path bit for bit, whatever the configuration.
    np.testing.assert_array_equal(seeded.components_, again.components_)
    assert opted_out.privacy_.noise_mode == "float" and "Float noise" in opted_out.privacy_.notes


def _spiked(n=4000, p=6, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, p)) * np.sqrt([6.0] + [0.5] * (p - 1))
    return X / np.max(np.linalg.norm(X, axis=1))


@pytest.mark.parametrize("secure", [False, True])
@pytest.mark.parametrize("name", ["AnalyzeGaussPCA", "NoisyPowerPCA", "ModSuLQPCA",
                                  "LocalGaussianPCA", "BinghamPCA"])
def test_secure_mode_is_as_accurate_as_default(name, secure):
    """The same accuracy bar in both modes: the top component is found on a spiked model."""
    X = _spiked(n=20_000 if name == "LocalGaussianPCA" else 4000)
    eps = 10.0 if name == "LocalGaussianPCA" else 1.0
    with privpca.config_context(secure_mode=secure), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est = getattr(privpca, name)(1, epsilon=eps, centering=None, data_norm=1.0,
                                     ledger=privpca.PrivacyLedger()).fit(X)
    assert abs(est.components_[0, 0]) > 0.8


def test_federated_provider_noise_is_secure_in_secure_mode():
    from privpca.federated.protocol import provider_noise_rng

    assert is_os_keyed(provider_noise_rng(None, 0))  # secure by default
    assert not isinstance(provider_noise_rng(7, 0), SecureGenerator)  # seeded: reproducible
    with privpca.config_context(secure_mode=False):
        assert not isinstance(provider_noise_rng(None, 0), SecureGenerator)
    with privpca.config_context(secure_mode=True):
        assert isinstance(provider_noise_rng(None, 0), SecureGenerator)
        assert isinstance(provider_noise_rng(None, 3, "mean"), SecureGenerator)
        with pytest.raises(ValueError, match="noise seed"):
            provider_noise_rng(7, 0)


# =============================================================================================
# Issue 26, item 5: seeds slip through secure mode (only None or an OS-keyed SecureGenerator
# passes; every public releasing function checks its rng; refusals come before any charge).
# =============================================================================================

from privpca._registry import PRIVATE_ESTIMATORS  # noqa: E402


def _seeded_sources():
    from randomgen import ChaCha

    return {
        "int": 0,
        "SeedSequence": np.random.SeedSequence(1),
        "Generator": np.random.default_rng(2),
        "RandomState": np.random.RandomState(3),
        "BitGenerator": np.random.PCG64(4),
        "SecureGenerator(PCG64)": SecureGenerator(np.random.PCG64(5)),
        "SecureGenerator(seeded ChaCha)": SecureGenerator(ChaCha(seed=6)),
    }


def test_only_os_keyed_secure_generators_are_marked_as_such():
    fresh = SecureGenerator()
    assert is_os_keyed(fresh) and all(is_os_keyed(c) for c in fresh.spawn(2))
    seeded = SecureGenerator(np.random.PCG64(0))
    assert not is_os_keyed(seeded) and "caller-supplied" in repr(seeded)
    assert all(is_os_keyed(c) for c in seeded.spawn(2))  # spawn keys children from the OS
    assert not is_os_keyed(np.random.default_rng(0))


@pytest.mark.parametrize("kind", list(_seeded_sources()))
def test_secure_mode_refuses_every_seeded_source(kind):
    source = _seeded_sources()[kind]
    with privpca.config_context(secure_mode=True):
        with pytest.raises(ValueError, match="Secure mode refuses random_state"):
            check_random_state(source)
        with pytest.raises(ValueError, match="Secure mode refuses rng"):
            check_noise_rng(source)
        fresh = SecureGenerator()
        assert check_random_state(fresh) is fresh and check_noise_rng(fresh) is fresh
        assert is_os_keyed(check_random_state(None)) and is_os_keyed(check_noise_rng(None))


def _releasing_calls():
    """Every public function that takes an ``rng`` and releases something from its input."""
    from privpca.local_protocol import LocalCovarianceRandomiser
    from privpca.local_protocol.local_covariance import simulate_report_sum
    from privpca.local_protocol.local_preprocessing import LocalMeanRandomiser, LocalNormRandomiser
    from privpca.mechanisms.bingham_sampler import sample_bingham_exact, sample_bingham_gibbs
    from privpca.mechanisms.gaussian import GaussianMechanism, symmetric_gaussian_noise
    from privpca.mechanisms.histogram import StabilityHistogram
    from privpca.mechanisms.quantile import PrivateQuantile
    from privpca.pipeline.preprocessing import private_mean_from_sum

    x = np.array([0.3, -0.2, 0.1])
    X = np.tile(x, (4, 1))
    cov = LocalCovarianceRandomiser(3, 1.0, 1e-5)
    mean = LocalMeanRandomiser(1.0, 1e-5, 1.0)
    lam = np.array([3.0, 1.0, 0.0])
    return {
        "LocalCovarianceRandomiser.report": lambda rng: cov.report(x, rng),
        "LocalCovarianceRandomiser.report_batch": lambda rng: cov.report_batch(X, rng),
        "simulate_report_sum": lambda rng: simulate_report_sum(X, cov, rng),
        "LocalNormRandomiser.report_batch":
            lambda rng: LocalNormRandomiser(1.0).report_batch(X, np.ones(4), rng),
        "LocalMeanRandomiser.report_batch": lambda rng: mean.report_batch(X, rng),
        "LocalMeanRandomiser.add_report_noise":
            lambda rng: mean.add_report_noise(X.sum(axis=0), 4, rng),
        "GaussianMechanism.randomise":
            lambda rng: GaussianMechanism(1.0, 1e-5, 1.0).randomise(x, rng),
        "symmetric_gaussian_noise": lambda rng: symmetric_gaussian_noise(3, 1.0, rng),
        "StabilityHistogram.release_modes": lambda rng: StabilityHistogram.calibrate(
            1.0, 1e-5).release_modes(np.zeros(50, dtype=np.int64), rng),
        "PrivateQuantile.estimate": lambda rng: PrivateQuantile.calibrate(
            1.0, quantiles=0.9, n_records=50).estimate(np.ones(50), rng),
        "private_mean_from_sum": lambda rng: private_mean_from_sum(x, 4, 1.0, 1.0, rng),
        "sample_bingham_exact": lambda rng: sample_bingham_exact(lam, rng=rng),
        "sample_bingham_gibbs": lambda rng: sample_bingham_gibbs(lam, 1, 2, rng=rng),
    }


@pytest.mark.parametrize("name", sorted(_releasing_calls()))
def test_public_releasing_functions_route_their_rng_through_secure_mode(name):
    call = _releasing_calls()[name]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        # Outside secure mode a seeded generator is the caller's choice (reproducible).
        first = call(np.random.default_rng(0))
        again = call(np.random.default_rng(0))
        if name == "LocalCovarianceRandomiser.report":
            np.testing.assert_array_equal(first, again)
        with privpca.config_context(secure_mode=True):
            for seeded in (np.random.default_rng(0), SecureGenerator(np.random.PCG64(0))):
                with pytest.raises(ValueError, match="Secure mode refuses rng"):
                    call(seeded)
            call(None)
            call(SecureGenerator())
        call(None)  # None is fresh entropy outside secure mode too


def _estimator_params(cls, paper):
    import inspect

    params = inspect.signature(cls).parameters
    kw = {"n_components": 1}
    if paper:
        kw.update({key: value for key, value in (("centering", None), ("data_norm", 1.0),
                                                  ("clip_norm", 1.0), ("amplification", "none"))
                   if key in params})
    return kw


@pytest.fixture(scope="module")
def secure_table():
    X = np.random.default_rng(0).standard_normal((30_000, 4)) * 0.3
    return X / np.max(np.linalg.norm(X, axis=1))


@pytest.mark.parametrize("seed_kind", ["int", "SecureGenerator(PCG64)"])
@pytest.mark.parametrize("paper", [False, True], ids=["pipeline", "paper"])
@pytest.mark.parametrize("name", sorted(PRIVATE_ESTIMATORS))
def test_refused_fit_leaves_the_ledger_untouched(name, paper, seed_kind, secure_table):
    """The seed is refused before the ledger is charged, in every estimator family (before:
    LocalGaussianPCA, LocalSparsePCA and PrivateOjaPCA charged first)."""
    cls = PRIVATE_ESTIMATORS[name]
    ledger = privpca.PrivacyLedger()
    seed = _seeded_sources()[seed_kind]
    with privpca.config_context(secure_mode=True), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(ValueError, match="Secure mode refuses random_state"):
            cls(random_state=seed, ledger=ledger, **_estimator_params(cls, paper)).fit(
                secure_table)
    assert len(ledger) == 0


@pytest.mark.parametrize("paper", [False, True], ids=["pipeline", "paper"])
def test_in_process_dpspca_runs_in_secure_mode(paper, secure_table):
    """DPSPCA used to hand its providers seeds drawn from the secure generator, which the
    providers then refused after the charge: in secure mode they now draw every release from
    a fresh OS-keyed SecureGenerator."""
    from unittest import mock

    from privpca.federated.protocol import provider

    ledger = privpca.PrivacyLedger()
    seen = []
    real = provider.provider_noise_rng

    def spy(noise_seed, release, kind="query"):
        rng = real(noise_seed, release, kind)
        seen.append((noise_seed, is_os_keyed(rng)))
        return rng

    with privpca.config_context(secure_mode=True), warnings.catch_warnings(), \
            mock.patch.object(provider, "provider_noise_rng", spy):
        warnings.simplefilter("ignore")
        est = privpca.DPSPCA(n_providers=2, n_iter=3, ledger=ledger,
                             **_estimator_params(privpca.DPSPCA, paper)).fit(secure_table)
    assert len(ledger) == 1 and np.all(np.isfinite(est.components_))
    assert seen and all(seed is None and keyed for seed, keyed in seen)


def test_records_made_outside_a_fit_state_how_their_noise_was_drawn():
    """A score plot and a federated provider build their records outside the one fit: a
    seeded one says "reproducible", an unseeded one "secure"."""
    from privpca.federated.protocol import ProviderState
    from privpca.plot import scores

    X = _spiked(n=4000, p=4)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est = privpca.AnalyzeGaussPCA(2, random_state=0, ledger=privpca.PrivacyLedger()).fit(X)
        seeded = scores(est, X, epsilon=0.5, random_state=0, ledger=privpca.PrivacyLedger())
        fresh = scores(est, X, epsilon=0.5, ledger=privpca.PrivacyLedger())
    assert seeded.privacy_record.noise_mode == "reproducible"
    assert fresh.privacy_record.noise_mode == "secure"
    for seed, mode in ((3, "reproducible"), (None, "secure")):
        provider = ProviderState(X, n_components=1, epsilon=1.0, delta=1e-5, n_rounds=2,
                                 noise_seed=seed)
        assert provider.privacy_record().noise_mode == mode


def test_the_discrete_laplace_is_not_truncated():
    """Until issue 35 the geometric quotient was ⌊−ln(U)·t/M⌋ with a 53-bit U: never beyond
    ~37 scales (≈ 7·10⁻¹⁷ of the mass per count, unreachable while the record said δ = 0).
    It is now counted by Bernoulli trials: fed 100 successes, the sampler returns 100·M."""
    from privpca.mechanisms._discrete_kernels import discrete_laplace_kernel

    t = 3.5  # M = 3, remainders drawn from the top 2 bits of a word
    words = np.array([0, 0] + [0] * 100 + [2**64 - 1, 0], dtype=np.uint64)
    # b = 0 (accepted: 0 < e^0), 100 quotient successes, one failure, then a + sign.
    k = discrete_laplace_kernel(words, SecureGenerator(), t, 1)
    assert k[0] == 100 * 3


def test_the_servers_public_start_is_the_estimators_stream_without_its_warning():
    """``privpca server --seed`` seeds only Q⁽⁰⁾, which is public: it warned that its noise
    could be rebuilt (an outside tester). Same draws as ``check_random_state``, no warning,
    and strict secure mode does not refuse it."""
    from privpca.mechanisms.randomness import check_random_state, public_start_generator

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        expected = check_random_state(3).standard_normal(5)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        np.testing.assert_array_equal(public_start_generator(3).standard_normal(5), expected)
        with privpca.config_context(secure_mode=True):
            public_start_generator(3)
