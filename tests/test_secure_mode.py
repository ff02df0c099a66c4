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
from privpca import _validation
from privpca._config import ReproducibleNoiseWarning
from privpca._validation import check_random_state
from privpca.mechanisms.secure_noise import (
    GRID_BITS,
    SecureGenerator,
    discrete_gaussian,
    discrete_laplace,
)


def test_config_context_sets_and_restores_secure_mode():
    assert privpca.get_config()["secure_mode"] is False
    with privpca.config_context(secure_mode=True):
        assert privpca.get_config()["secure_mode"] is True
        assert isinstance(check_random_state(None), SecureGenerator)
    assert privpca.get_config()["secure_mode"] is False
    assert not isinstance(check_random_state(None), SecureGenerator)


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
        assert seen["other"] is False
    finally:
        privpca.set_config(secure_mode=False)
    with pytest.raises(ValueError, match="bool"):
        privpca.set_config(secure_mode="yes")  # type: ignore[arg-type]


def test_environment_variable_turns_secure_mode_on():
    code = ("import privpca, sys; from privpca._validation import check_random_state as c; "
            "print(privpca.get_config()['secure_mode'], type(c(None)).__name__)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env={"PRIVPCA_SECURE_MODE": "1", "PATH": ""}, check=True)
    assert out.stdout.split() == ["True", "SecureGenerator"]


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
    monkeypatch.setattr(_validation, "_warned_reproducible", False)
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


def test_snapped_noise_is_exact_on_a_power_of_two_grid():
    rng = SecureGenerator()
    counts = np.arange(50, dtype=np.float64)
    for noisy, scale in ((rng.laplace(counts, 3.0), 3.0), (rng.normal(counts, 3.0), 3.0)):
        lam = math.ldexp(1.0, math.frexp(scale)[1] - 1 - GRID_BITS)
        steps = (noisy - counts) / lam
        np.testing.assert_array_equal(steps, np.round(steps))  # exact multiples of Λ
    z = rng.standard_normal(100_000)
    np.testing.assert_array_equal(np.ldexp(z, GRID_BITS), np.round(np.ldexp(z, GRID_BITS)))
    assert stats.kstest(z, "norm").pvalue > 1e-4
    lap = rng.laplace(0.0, 2.0, size=100_000)
    assert stats.kstest(lap, "laplace", args=(0.0, 2.0)).pvalue > 1e-4


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

    assert not isinstance(provider_noise_rng(None, 0), SecureGenerator)
    with privpca.config_context(secure_mode=True):
        assert isinstance(provider_noise_rng(None, 0), SecureGenerator)
        assert isinstance(provider_noise_rng(None, 3, "mean"), SecureGenerator)
        with pytest.raises(ValueError, match="noise seed"):
            provider_noise_rng(7, 0)
