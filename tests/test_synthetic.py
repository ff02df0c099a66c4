"""Synthetic generators reproduce Wang & Xu's spiked covariance."""

from __future__ import annotations

import numpy as np
import pytest

from privpca.datasets import make_sparse_spiked, make_spiked, spiked_covariance


def test_spiked_covariance_matches_model():
    n, p, k, lam = 200_000, 8, 2, 3.0
    X, V = make_spiked(n, p, k, lam=lam, random_state=1)
    np.testing.assert_allclose(V.T @ V, np.eye(k), atol=1e-12)
    sigma = spiked_covariance(V, lam)
    emp = X.T @ X / n
    # Entry-wise standard error of a sample covariance is about sqrt(2/n)·max Σ.
    assert np.abs(emp - sigma).max() < 6 * np.sqrt(2 / n) * sigma.max()
    values = np.linalg.eigvalsh(sigma)[::-1]
    np.testing.assert_allclose(values[:k], 1 / (5 * p))
    np.testing.assert_allclose(values[k:], 1 / (5 * p * (lam + 1)))


def test_sparse_spiked_has_s_nonzero_rows():
    X, V = make_sparse_spiked(100, 50, 3, 7, random_state=2)
    assert X.shape == (100, 50)
    assert np.count_nonzero(np.linalg.norm(V, axis=1)) == 7
    np.testing.assert_allclose(V.T @ V, np.eye(3), atol=1e-12)
    # Rows are permuted: the support is not simply the first s rows (for this seed).
    assert set(np.flatnonzero(np.linalg.norm(V, axis=1))) != set(range(7))


def test_seeded_and_validated():
    a, _ = make_spiked(10, 5, 1, random_state=7)
    b, _ = make_spiked(10, 5, 1, random_state=7)
    np.testing.assert_array_equal(a, b)
    with pytest.raises(ValueError, match="n_components"):
        make_spiked(10, 5, 6)
    with pytest.raises(ValueError, match="n_nonzero"):
        make_sparse_spiked(10, 5, 3, 2)


def test_dpspca_data_normalisations_share_the_sample():
    from privpca.datasets import make_dpspca_data

    raw, Q = make_dpspca_data(3000, 40, 2, 6, normalize=None, random_state=5)
    by_max, Q2 = make_dpspca_data(3000, 40, 2, 6, normalize="max", random_state=5)
    by_row, _ = make_dpspca_data(3000, 40, 2, 6, normalize="rows", random_state=5)
    np.testing.assert_array_equal(Q, Q2)
    norms = np.linalg.norm(raw, axis=1)
    # "max": one common scale, the largest row at norm 1; "rows": every row at norm 1
    np.testing.assert_allclose(by_max, raw / norms.max(), rtol=1e-12)
    assert np.linalg.norm(by_max, axis=1).max() == pytest.approx(1.0)
    np.testing.assert_allclose(np.linalg.norm(by_row, axis=1), 1.0)
    # the leading eigenspace of the scaled sample is still Q
    top = np.linalg.eigh(by_max.T @ by_max)[1][:, -2:]
    assert np.linalg.norm(Q.T @ top @ top.T @ Q - np.eye(2)) < 0.05
    with pytest.raises(ValueError, match="'rows', 'max' or None"):
        make_dpspca_data(10, 40, 2, 6, normalize="l2")
