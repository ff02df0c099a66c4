"""privpca.solvers.power: thin QR with positive diagonal, row truncation, one power step."""

from __future__ import annotations

import numpy as np
import pytest

from privpca.solvers.power import (
    power_step,
    random_orthonormal_basis,
    thin_qr,
    top_row_support,
    truncate_rows,
)


@pytest.mark.parametrize("shape", [(7, 3), (50, 5), (4, 4), (6, 1)])
def test_thin_qr_factorises_with_positive_diagonal(rng, shape):
    M = rng.standard_normal(shape)
    original = M.copy()
    Q, R = thin_qr(M, return_r=True)
    assert Q.shape == shape and R.shape == (shape[1], shape[1])
    np.testing.assert_allclose(Q @ R, M, atol=1e-12)
    np.testing.assert_allclose(Q.T @ Q, np.eye(shape[1]), atol=1e-12)
    np.testing.assert_array_equal(np.triu(R), R)
    assert np.all(np.diag(R) > 0)
    np.testing.assert_array_equal(M, original)


def test_thin_qr_is_unique_given_positive_diagonal(rng):
    # Any two QR factorisations with positive diag(R) of a full-rank matrix coincide, so the
    # answer cannot depend on LAPACK's sign conventions: compare with Gram–Schmidt.
    M = rng.standard_normal((9, 3))
    gs = np.zeros_like(M)
    for j in range(3):
        v = M[:, j] - gs[:, :j] @ (gs[:, :j].T @ M[:, j])
        gs[:, j] = v / np.linalg.norm(v)
    np.testing.assert_allclose(thin_qr(M), gs, atol=1e-12)
    # Flipping a column's sign flips only that column of Q.
    flipped = M * np.array([1.0, -1.0, 1.0])
    np.testing.assert_allclose(thin_qr(flipped), gs * np.array([1.0, -1.0, 1.0]), atol=1e-12)


def test_thin_qr_vector_and_errors():
    q = thin_qr(np.array([3.0, -4.0]))
    np.testing.assert_allclose(q, [0.6, -0.8])
    with pytest.raises(ValueError, match="at least as many rows"):
        thin_qr(np.ones((2, 3)))
    with pytest.raises(ValueError, match="NaN or infinity"):
        thin_qr(np.array([[1.0], [np.nan]]))
    with pytest.raises(ValueError, match="1-D or 2-D"):
        thin_qr(np.ones((2, 2, 2)))


def test_truncate_rows_keeps_the_largest_rows():
    M = np.array([[1.0, 0.0], [0.0, 3.0], [2.0, 2.0], [0.5, 0.5], [-3.0, 0.1]])
    original = M.copy()
    out = truncate_rows(M, 2)
    expected = np.zeros_like(M)
    expected[[1, 4]] = M[[1, 4]]  # norms 3 and 3.0017 beat 2.83
    np.testing.assert_array_equal(out, expected)
    np.testing.assert_array_equal(M, original)
    np.testing.assert_array_equal(top_row_support(M, 3), [1, 2, 4])
    np.testing.assert_array_equal(truncate_rows(M, 5), M)
    np.testing.assert_array_equal(truncate_rows(M, 0), np.zeros_like(M))


def test_truncate_rows_vector_and_ties():
    v = np.array([0.1, -5.0, 2.0, 5.0, -2.0])
    np.testing.assert_array_equal(truncate_rows(v, 2), [0.0, -5.0, 0.0, 5.0, 0.0])
    # Ties are broken towards the lower index: deterministic.
    np.testing.assert_array_equal(truncate_rows(v, 3), [0.0, -5.0, 2.0, 5.0, 0.0])
    np.testing.assert_array_equal(top_row_support(np.ones((4, 2)), 2), [0, 1])


@pytest.mark.parametrize("bad", [-1, 6, 2.5, True])
def test_truncate_rows_rejects_bad_sizes(bad):
    with pytest.raises(ValueError, match="n_nonzero must be an int in"):
        truncate_rows(np.ones((5, 2)), bad)


def test_power_step_plain_callable_noisy_and_truncated(rng):
    A = rng.standard_normal((8, 8))
    A = A + A.T
    Q = random_orthonormal_basis(8, 2, rng)
    np.testing.assert_allclose(power_step(A, Q), thin_qr(A @ Q), atol=1e-12)
    np.testing.assert_allclose(power_step(lambda B: A @ B, Q), thin_qr(A @ Q), atol=1e-12)

    Q_next, Y = power_step(
        A, Q, noise_scale=0.5, rng=np.random.default_rng(3), return_noisy_product=True
    )
    G = 0.5 * np.random.default_rng(3).standard_normal((8, 2))
    np.testing.assert_allclose(Y, A @ Q + G, atol=1e-12)
    np.testing.assert_allclose(Q_next, thin_qr(Y), atol=1e-12)

    Q_sparse = power_step(A, Q, n_nonzero=3)
    assert np.count_nonzero(np.linalg.norm(Q_sparse, axis=1)) == 3
    np.testing.assert_allclose(Q_sparse, thin_qr(truncate_rows(A @ Q, 3)), atol=1e-12)


def test_power_step_errors(rng):
    Q = random_orthonormal_basis(4, 1, rng)
    with pytest.raises(ValueError, match="needs an rng"):
        power_step(np.eye(4), Q, noise_scale=1.0)
    with pytest.raises(ValueError, match="noise_scale must be"):
        power_step(np.eye(4), Q, noise_scale=-1.0)


def test_power_iteration_converges_to_top_eigenspace(rng):
    U = np.linalg.qr(rng.standard_normal((30, 30)))[0]
    A = U @ np.diag(np.r_[10.0, 8.0, np.linspace(1.0, 0.1, 28)]) @ U.T
    Q = random_orthonormal_basis(30, 2, rng)
    for _ in range(60):
        Q = power_step(A, Q)
    overlap = np.linalg.svd(Q.T @ U[:, :2], compute_uv=False)
    np.testing.assert_allclose(overlap, 1.0, atol=1e-10)


def test_random_orthonormal_basis_is_seeded():
    a = random_orthonormal_basis(12, 3, np.random.default_rng(1))
    b = random_orthonormal_basis(12, 3, np.random.default_rng(1))
    np.testing.assert_array_equal(a, b)
    np.testing.assert_allclose(a.T @ a, np.eye(3), atol=1e-12)


def test_thin_qr_keeps_zero_rows_exactly_zero(rng):
    M = truncate_rows(rng.standard_normal((40, 3)), 5)
    Q, R = thin_qr(M, return_r=True)
    zero = ~np.any(M != 0.0, axis=1)
    assert zero.sum() == 35
    assert np.all(Q[zero] == 0.0)
    np.testing.assert_allclose(Q @ R, M, atol=1e-12)
    np.testing.assert_allclose(Q.T @ Q, np.eye(3), atol=1e-12)
    assert np.all(np.diag(R) > 0)
    # Fewer non-zero rows than columns: the full factorisation (still orthonormal).
    Q2 = thin_qr(truncate_rows(rng.standard_normal((6, 3)), 2))
    np.testing.assert_allclose(Q2.T @ Q2, np.eye(3), atol=1e-12)
