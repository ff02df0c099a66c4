"""Randomised response as a mechanism object: calibration, privacy statement, samplers.

The local randomisers (privpca.local_protocol.local_preprocessing) compose it and draw nothing
themselves; its samplers draw exactly what the randomisers drew inline before, so seeded
results are unchanged (checked here against the old inline code).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from privpca.accounting.calibration import unary_encoding_flip_probability
from privpca.local_protocol.local_preprocessing import (
    THRESHOLDS,
    LocalBinRandomiser,
    LocalNormRandomiser,
    norm_bins,
)
from privpca.mechanisms import RandomisedResponse


@pytest.mark.parametrize("eps", [0.1, 1.0, 4.0, 800.0])
def test_calibration_and_privacy_statement(eps):
    rr = RandomisedResponse(eps)
    q = 1.0 / (1.0 + math.exp(min(eps, 700.0)))
    assert rr.flip_probability == q == unary_encoding_flip_probability(eps)
    assert (rr.keep_probability, rr.set_probability, rr.delta) == (0.5, q, 0.0)
    assert "one user's report" in rr.neighbouring
    if eps < 700:
        # The likelihood ratio of either form is at most e^ε (binary: (1 − q)/q; unary:
        # ½(1 − q)/(½q)), with equality.
        assert (1 - q) / q == pytest.approx(math.exp(eps), rel=1e-12)
    with pytest.raises(ValueError):
        RandomisedResponse(-1.0)


def test_the_randomisers_draw_what_they_drew_inline():
    """Bit for bit the pre-mechanism code, for the same generator state."""
    rng = np.random.default_rng(3)
    X = rng.standard_normal((500, 4)) * 3.0
    t = THRESHOLDS[rng.integers(0, len(THRESHOLDS), 500)]

    # LocalNormRandomiser.report_batch, before: below ^ (rng.random(len(t)) < q)
    old_rng = np.random.default_rng(11)
    below = np.einsum("ij,ij->i", X, X) <= t * t
    q = 1.0 / (1.0 + math.exp(1.3))
    old = (below ^ (old_rng.random(len(t)) < q)).astype(np.int8)
    new = LocalNormRandomiser(1.3).report_batch(X, t, np.random.default_rng(11))
    assert new.dtype == np.int8 and np.array_equal(new, old)

    # LocalBinRandomiser.report_batch, before: one uniform per bit of the one-hot.
    old_rng = np.random.default_rng(12)
    bins = norm_bins(X, THRESHOLDS)
    onehot = np.zeros((500, len(THRESHOLDS) + 1), dtype=bool)
    onehot[np.arange(500), bins] = True
    u = old_rng.random(onehot.shape)
    old = np.where(onehot, u < 0.5, u < q).astype(np.int8)
    new = LocalBinRandomiser(1.3).report_batch(X, THRESHOLDS, np.random.default_rng(12))
    assert new.dtype == np.int8 and np.array_equal(new, old)

    # LocalBinRandomiser.simulate_counts, before: two binomials per bin.
    counts = np.bincount(bins, minlength=len(THRESHOLDS) + 1)
    old_rng = np.random.default_rng(13)
    m = int(counts.sum())
    old = (old_rng.binomial(counts, 0.5) + old_rng.binomial(m - counts, q)).astype(np.float64)
    new = LocalBinRandomiser(1.3).simulate_counts(counts, np.random.default_rng(13))
    assert new.dtype == np.float64 and np.array_equal(new, old)


def test_samplers_have_the_stated_law():
    rng = np.random.default_rng(0)
    rr = RandomisedResponse(1.0)
    q = rr.flip_probability
    bits = np.arange(200_000) % 2 == 0
    flipped = rr.flip(bits, rng)
    assert abs((flipped != bits).mean() - q) < 4 * math.sqrt(q * (1 - q) / bits.size)
    onehot = np.eye(5, dtype=bool)[np.arange(100_000) % 5]
    rep = rr.encode_unary(onehot, rng)
    assert abs(rep[onehot].mean() - 0.5) < 0.01
    assert abs(rep[~onehot].mean() - q) < 0.01
    counts = np.array([0, 1000, 3000, 0, 6000])
    sims = np.array([rr.unary_counts(counts, rng) for _ in range(400)])
    expect = counts * 0.5 + (counts.sum() - counts) * q
    np.testing.assert_allclose(sims.mean(axis=0), expect, rtol=0.02)
    with pytest.raises(ValueError, match="one bit per user"):
        rr.flip(np.zeros((2, 2), dtype=bool), rng)
