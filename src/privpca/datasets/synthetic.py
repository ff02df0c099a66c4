"""Synthetic data with a known principal subspace (Wang & Xu's spiked models).

Both generators draw ``x ~ N(0, Σ)`` with

    Σ = λ/(5p(λ+1)) · VVᵀ + 1/(5p(λ+1)) · I_p,

so the top-k eigenvalues are ``1/(5p)``, the rest ``1/(5p(λ+1))`` and the eigengap is
``λ/(5p(λ+1))`` (Wang & Xu, §6 and eq. (7)). ``E‖x‖² = (kλ + p)/(5p(λ+1)) < 1/5``, so rows
exceed norm 1 only with probability ``exp(−Ω(p))``; estimators clip (with a warning) the rare
ones that do.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from privpca._validation import check_in_range, check_random_state

__all__ = ["make_sparse_spiked", "make_spiked", "random_orthonormal", "spiked_covariance"]


def random_orthonormal(p: int, k: int, rng: np.random.Generator) -> NDArray[np.float64]:
    """A Haar-random ``(p, k)`` matrix with orthonormal columns (QR of a Gaussian, sign-fixed)."""
    q, r = np.linalg.qr(rng.standard_normal((p, k)))
    return q * np.sign(np.diag(r))


def spiked_covariance(V: NDArray[np.float64], lam: float = 1.0) -> NDArray[np.float64]:
    """The population covariance ``Σ = λ/(5p(λ+1))·VVᵀ + 1/(5p(λ+1))·I`` for basis ``V``."""
    p = V.shape[0]
    c = 1.0 / (5.0 * p * (lam + 1.0))
    return c * (lam * (V @ V.T) + np.eye(p))


def _sample(
    n: int, V: NDArray[np.float64], lam: float, rng: np.random.Generator, chunk: int = 1 << 20
) -> NDArray[np.float64]:
    # x = √c (g + (√(1+λ) − 1) V Vᵀ g) has covariance c(I + λVVᵀ); O(npk) instead of O(np²).
    p = V.shape[0]
    c = 1.0 / (5.0 * p * (lam + 1.0))
    boost = np.sqrt(1.0 + lam) - 1.0
    X = np.empty((n, p))
    rows = max(1, chunk // p)
    for start in range(0, n, rows):
        g = rng.standard_normal((min(rows, n - start), p))
        g += boost * ((g @ V) @ V.T)
        g *= np.sqrt(c)
        X[start : start + g.shape[0]] = g
    return X


def _check(n: int, p: int, k: int, lam: float) -> None:
    check_in_range(n, "n_samples", low=1, low_closed=True, integer=True)
    check_in_range(p, "n_features", low=1, low_closed=True, integer=True)
    check_in_range(
        k, "n_components", low=1, high=p, low_closed=True, high_closed=True, integer=True
    )
    check_in_range(lam, "lam", low=0.0)


def make_spiked(
    n_samples: int,
    n_features: int,
    n_components: int,
    *,
    lam: float = 1.0,
    random_state: Any = None,
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Gaussian data from Wang & Xu's spiked model with a Haar-random subspace.

    Parameters
    ----------
    n_samples, n_features, n_components : int
        n, p and k.
    lam : float, default=1.0
        Spike strength λ > 0 (the eigengap is λ/(5p(λ+1))).
    random_state : None, int or numpy Generator
        Seed.

    Returns
    -------
    X : ndarray of shape (n_samples, n_features)
    V : ndarray of shape (n_features, n_components)
        The true principal basis (orthonormal columns).

    Examples
    --------
    >>> X, V = make_spiked(1000, 20, 2, random_state=0)
    >>> X.shape, V.shape
    ((1000, 20), (20, 2))
    """
    _check(n_samples, n_features, n_components, lam)
    rng = check_random_state(random_state)
    V = random_orthonormal(n_features, n_components, rng)
    return _sample(n_samples, V, lam, rng), V


def make_sparse_spiked(
    n_samples: int,
    n_features: int,
    n_components: int,
    n_nonzero: int,
    *,
    lam: float = 1.0,
    random_state: Any = None,
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Gaussian data from the spiked model whose subspace is row-sparse.

    ``V`` is a random ``s × k`` orthonormal block, zero-padded to ``p × k`` and with its rows
    permuted, so exactly ``s = n_nonzero`` rows are non-zero (Wang & Xu §4, §6).

    Returns
    -------
    X : ndarray of shape (n_samples, n_features)
    V : ndarray of shape (n_features, n_components)
        The true basis; its support is ``np.flatnonzero(np.linalg.norm(V, axis=1))``.
    """
    _check(n_samples, n_features, n_components, lam)
    check_in_range(
        n_nonzero,
        "n_nonzero",
        low=n_components,
        high=n_features,
        low_closed=True,
        high_closed=True,
        integer=True,
    )
    rng = check_random_state(random_state)
    block = random_orthonormal(n_nonzero, n_components, rng)
    V = np.zeros((n_features, n_components))
    V[:n_nonzero] = block
    V = V[rng.permutation(n_features)]
    return _sample(n_samples, V, lam, rng), V
