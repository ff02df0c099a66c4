"""Subspace metrics against known angles."""

from __future__ import annotations

import math

import numpy as np
import pytest

from privpca.datasets import random_orthonormal
from privpca.metrics import explained_variance, sin_theta, subspace_distance, support_recovery


@pytest.mark.parametrize("theta", [0.0, 0.3, math.pi / 4, math.pi / 2])
def test_known_principal_angle(theta):
    u = np.array([1.0, 0.0, 0.0])
    v = np.array([math.cos(theta), math.sin(theta), 0.0])
    assert sin_theta(u, v) == pytest.approx(abs(math.sin(theta)), abs=1e-12)
    assert subspace_distance(u, v) == pytest.approx(math.sqrt(2) * abs(math.sin(theta)), abs=1e-7)


def test_relation_between_metrics_and_bounds(rng):
    p, k = 30, 4
    U, V = random_orthonormal(p, k, rng), random_orthonormal(p, k, rng)
    d, s = subspace_distance(U, V), sin_theta(U, V)
    assert s**2 == pytest.approx(0.5 * d**2)
    assert d == pytest.approx(np.linalg.norm(U @ U.T - V @ V.T))
    assert 0 <= s <= math.sqrt(k)
    # Invariant to the choice of basis within the subspace.
    Q = random_orthonormal(k, k, rng)
    assert subspace_distance(U @ Q, V) == pytest.approx(d)
    # Orthogonal subspaces reach the maxima.
    E = np.eye(p)
    assert subspace_distance(E[:, :k], E[:, k : 2 * k]) == pytest.approx(math.sqrt(2 * k))
    assert sin_theta(E[:, :k], E[:, k : 2 * k]) == pytest.approx(math.sqrt(k))


def test_metric_input_errors(rng):
    U = random_orthonormal(10, 2, rng)
    with pytest.raises(ValueError, match=r"components_\.T"):
        subspace_distance(U.T, U)
    with pytest.raises(ValueError, match="orthonormal"):
        sin_theta(2 * U, U)
    with pytest.raises(ValueError, match="different spaces"):
        sin_theta(U, random_orthonormal(11, 2, rng))


def test_explained_variance():
    X = np.array([[3.0, 0.0], [0.0, 1.0], [-3.0, 0.0], [0.0, -1.0]])
    assert explained_variance(X, np.array([1.0, 0.0])) == pytest.approx(4.5)
    assert explained_variance(X, np.array([1.0, 0.0]), ratio=True) == pytest.approx(0.9)


def test_support_recovery_rates():
    U = np.zeros((10, 2))
    U[[0, 1, 2, 7], 0] = 1.0  # estimated support {0, 1, 2, 7}
    res = support_recovery(U, [0, 1, 2, 3])
    assert res.true_positive_rate == pytest.approx(0.75)
    assert res.false_positive_rate == pytest.approx(1 / 6)
    np.testing.assert_array_equal(res.support, [0, 1, 2, 7])
    mask = np.zeros(10, dtype=bool)
    mask[:4] = True
    assert support_recovery(U, mask).true_positive_rate == pytest.approx(0.75)


def test_distances_of_equal_subspaces_reach_rounding_not_a_square_root_floor():
    # k − ‖UᵀV‖² cancels to ~1e-16, whose square root is ~1e-8; the residual form does not.
    rng = np.random.default_rng(4)
    U = np.linalg.qr(rng.standard_normal((300, 6)))[0]
    rotated = U @ np.linalg.qr(rng.standard_normal((6, 6)))[0]  # same subspace, other basis
    assert subspace_distance(U, rotated) < 1e-13
    assert sin_theta(U, rotated) < 1e-13
    tilt = np.linalg.qr(U + 1e-11 * rng.standard_normal(U.shape))[0]
    assert 1e-12 < subspace_distance(U, tilt) < 1e-9
