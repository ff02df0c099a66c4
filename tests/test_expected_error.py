"""expected_error_ covers the distance to the exact PCA of the same prepared rows (issue 28).

The slow suite: each estimator on a few seeded tables; coverage ≥ 90 % of the fits
(benchmarks/error_bounds.py measures the full suite and the bounds' tightness)."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

from privpca import (
    DPPCA,
    DPSPCA,
    BinghamPCA,
    LocalSparsePCA,
    NoisyPowerPCA,
    PrivateOjaPCA,
)
from privpca.datasets import load_covtype, make_spiked
from privpca.metrics import subspace_distance

K = 2


def _prepared_distance(est, X):
    """Distance of components_ to the PCA of the rows centred on mean_ and clipped to D."""
    Y = X - est.mean_
    norms = np.linalg.norm(Y, axis=1)
    Y = Y * np.minimum(1.0, est.data_norm_ / np.maximum(norms, 1e-300))[:, None]
    V = np.linalg.svd(Y - Y.mean(axis=0), full_matrices=False)[2][:K]
    return subspace_distance(est.components_.T, V.T)


@pytest.mark.slow
@pytest.mark.parametrize("cls", [NoisyPowerPCA, BinghamPCA, PrivateOjaPCA, DPPCA,
                                 LocalSparsePCA, DPSPCA], ids=lambda c: c.__name__)
def test_expected_error_covers_on_a_small_suite(cls):
    tables = [make_spiked(20000, 10, K, lam=2.0, random_state=0)[0],
              np.asarray(load_covtype().data[:30_000], dtype=np.float64)]
    covered, fits = 0, 0
    for X in tables:
        for seed in range(5):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                est = cls(K, random_state=seed).fit(X)
            err = est.expected_error_
            assert err is not None and 0 <= err <= math.sqrt(2 * K) + 1e-12
            covered += err >= _prepared_distance(est, X) - 1e-9
            fits += 1
    assert covered >= 0.9 * fits
