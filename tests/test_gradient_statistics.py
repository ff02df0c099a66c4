"""DP-PCA's private top eigenvalue (Alg. 4) and private mean (Alg. 5)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from privpca.accounting.composition import compose_epsilon
from privpca.mechanisms.gradient_statistics import (
    PrivateMean,
    PrivateTopEigenvalue,
    subset_top_eigenvalues,
)


def test_subset_eigenvalues_match_eigh(rng):
    pairs = rng.standard_normal((60, 4)) * [3.0, 1.0, 1.0, 0.5]
    got = subset_top_eigenvalues(pairs, 3, n_iter=200)
    for j in range(3):
        S = pairs[20 * j : 20 * (j + 1)]
        assert got[j] == pytest.approx(np.linalg.eigvalsh(S.T @ S / 20)[-1], rel=1e-6)
    # fewer rows than columns: the Gram path
    wide = rng.standard_normal((6, 10))
    got = subset_top_eigenvalues(wide, 2, n_iter=200)
    assert got[0] == pytest.approx(np.linalg.eigvalsh(wide[:3].T @ wide[:3] / 3)[-1], rel=1e-6)


@pytest.mark.parametrize(("epsilon", "delta"), [(1.0, 1e-8), (0.5, 1e-12)])
def test_eigenvalue_calibration(epsilon, delta):
    est = PrivateTopEigenvalue.calibrate(epsilon, delta)
    eps = compose_epsilon([est.dp_event()], delta, tail=est.histogram.tail)
    assert eps <= epsilon * 1.002
    assert est.n_subsets == math.ceil(3.0 * est.histogram.threshold)


def test_eigenvalue_estimate_within_the_papers_factor(rng):
    """Theorem 6.1: Λ ∈ [λ/√2, √2·λ] w.h.p. (we return the upper bin edge, so ≥ λ/√2·…)."""
    est = PrivateTopEigenvalue.calibrate(1.0, 1e-8)
    lam = 4.0
    q = 5
    scale = np.sqrt([lam] + [0.5] * (q - 1))
    hits = 0
    for _ in range(10):
        G = rng.standard_normal((2 * est.n_subsets * 200, q)) * scale + 7.0  # mean is ignored
        value = est.estimate(G, rng)
        assert value is not None
        hits += lam / math.sqrt(2) <= value <= 2 * lam
    assert hits == 10


def test_eigenvalue_refuses_too_few_gradients(rng):
    est = PrivateTopEigenvalue.calibrate(1.0, 1e-8)
    with pytest.raises(ValueError, match="at least"):
        est.estimate(rng.standard_normal((10, 3)), rng)


def test_eigenvalue_fails_openly_when_nothing_clears_the_threshold(rng):
    est = PrivateTopEigenvalue.calibrate(1.0, 1e-8, n_subsets=5)  # far below the threshold
    assert est.estimate(rng.standard_normal((100, 3)), rng) is None


@pytest.mark.parametrize("q", [1, 50])
def test_mean_calibration(q):
    mean = PrivateMean.calibrate(1.0, 1e-10, q)
    eps = compose_epsilon([mean.dp_event()], 1e-10, tail=mean.centre_histogram.tail)
    assert eps == pytest.approx(1.0, rel=2e-3)
    assert eps <= 1.002


def test_mean_has_no_truncation_and_gaussian_error_when_the_eigenvalue_is_right(rng):
    """Lemma 6.2 (truncation_radius=1): every gradient lies inside the box; the error is the
    Gaussian noise alone, with the stated σ."""
    q, b = 200, 20_000
    mean = PrivateMean.calibrate(1.0, 1e-8, q, radius=1.0)
    mu = rng.normal(0, 5, size=q)
    G = mu + rng.standard_normal((b, q))
    out = mean.estimate(G, 1.0, rng)
    assert out.n_centre_failures == 0
    assert np.all(np.abs(G - out.centre) <= out.radius)  # nothing truncated
    assert out.sensitivity == pytest.approx(2 * out.radius * math.sqrt(q) / b)
    assert out.noise_scale == pytest.approx(mean.noise_multiplier * out.sensitivity)
    z = (out.mean - G.mean(axis=0)) / out.noise_scale
    assert abs(z.mean()) < 4 / math.sqrt(q)
    assert 0.8 < z.std() < 1.2


def test_mean_without_released_centres_falls_back_to_zero(rng):
    mean = PrivateMean.calibrate(1.0, 1e-8, 3)
    G = rng.standard_normal((10, 3)) + 100.0  # 10 records cannot clear the threshold
    out = mean.estimate(G, 1.0, rng)
    assert out.n_centre_failures == 3
    np.testing.assert_array_equal(out.centre, 0.0)
    # Truncation to 0 ± r biases the mean but the sensitivity (privacy) is unchanged.
    assert np.all(out.mean < 100.0 - out.radius + 10 * out.noise_scale)
