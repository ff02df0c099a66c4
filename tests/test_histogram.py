"""Stability histograms: calibration against the accountant, the threshold's tail, the modes."""

from __future__ import annotations

import math

import dp_accounting
import numpy as np
import pytest
from scipy.stats import norm

from privpca.accounting.composition import compose_epsilon
from privpca.mechanisms.histogram import (
    StabilityHistogram,
    geometric_bin,
    geometric_bin_edges,
    linear_bins,
)


@pytest.mark.parametrize("noise", ["laplace", "gaussian"])
@pytest.mark.parametrize(("epsilon", "delta", "h"), [(1.0, 1e-6, 1), (0.5, 1e-10, 20)])
def test_calibration_composes_to_the_requested_guarantee(noise, epsilon, delta, h):
    hist = StabilityHistogram.calibrate(epsilon, delta, n_histograms=h, noise=noise)
    eps = compose_epsilon([hist.dp_event()], delta, tail=hist.tail)
    assert eps <= epsilon * 1.002
    assert eps >= epsilon * 0.9  # not wastefully loose


def test_threshold_tail_closed_forms():
    lap = StabilityHistogram.calibrate(1.0, 1e-6, noise="laplace")
    # An empty bin is released with probability ½·exp(−τ/b) per histogram.
    assert 0.5 * math.exp(-lap.threshold / lap.scale) == pytest.approx(lap.tail, rel=1e-9)
    assert (1 + math.e) * lap.tail == pytest.approx(0.5e-6)
    gau = StabilityHistogram.calibrate(1.0, 1e-6, n_histograms=7, noise="gaussian")
    assert 7 * norm.sf(gau.threshold / gau.scale) == pytest.approx(gau.tail, rel=1e-6)
    # Gaussian noise composes in L2: 7 histograms are one Gaussian mechanism of L2
    # sensitivity √(2·7) on all counts, calibrated to the δ left after the threshold's share.
    assert gau.scale / math.sqrt(14) == pytest.approx(
        float(dp_accounting.get_sigma_gaussian(1.0, 0.5e-6)), rel=1e-9
    )


def test_release_probability_of_a_single_record_bin_matches_the_noise(rng):
    """The neighbour's extra bin (count 1) is released with probability ½e^{−(τ−1)/b} ≤ δ."""
    hist = StabilityHistogram.calibrate(2.0, 0.05, noise="laplace")
    reps = 40_000
    bins = np.zeros((1, reps), dtype=np.int64)  # one record in bin 0, per histogram column
    many = StabilityHistogram(hist.noise, hist.scale, hist.threshold, reps, hist.tail)
    freq = many.release_modes(bins, rng).released.mean()
    expected = 0.5 * math.exp(-(hist.threshold - 1) / hist.scale)
    assert expected <= 0.05
    assert freq == pytest.approx(expected, abs=4 * math.sqrt(expected / reps) + 1e-4)


def test_release_modes_finds_each_columns_mode(rng):
    hist = StabilityHistogram.calibrate(1.0, 1e-6, n_histograms=3, noise="gaussian")
    n = 5_000
    cols = np.stack(
        [
            np.full(n, 4),
            np.where(rng.random(n) < 0.7, -3, 9),
            np.arange(n),  # every value in its own bin: nothing can clear the threshold
        ],
        axis=1,
    )
    out = hist.release_modes(cols, rng)
    np.testing.assert_array_equal(out.released, [True, True, False])
    np.testing.assert_array_equal(out.mode[:2], [4, -3])


def test_calibrated_for_the_wrong_number_of_histograms_is_refused(rng):
    hist = StabilityHistogram.calibrate(1.0, 1e-6, n_histograms=2)
    with pytest.raises(ValueError, match="calibrated for 2"):
        hist.release_modes(np.zeros((10, 3), dtype=np.int64), rng)


def test_bins():
    idx = geometric_bin([1.0, 1.5, 2.0, 0.0, -1.0])
    np.testing.assert_array_equal(idx[:3], [0, 1, 2])
    assert idx[3] == idx[4] < -(10**15)
    lo, hi = geometric_bin_edges(3)
    assert lo == pytest.approx(2 ** 1.5) and hi == pytest.approx(4.0)
    got = linear_bins([-0.1, 0.0, 0.99, 1.0, 1e300], 1.0)
    np.testing.assert_array_equal(got[:4], [-1, 0, 0, 1])
