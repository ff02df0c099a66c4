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

from privpca._validation import check_in_range
from privpca.mechanisms.randomness import check_random_state

__all__ = [
    "make_dpspca_covariance",
    "make_dpspca_data",
    "make_low_rank_gaussian",
    "make_signal_noise",
    "make_sparse_spiked",
    "make_spiked",
    "random_orthonormal",
    "sparse_basis",
    "spiked_covariance",
]


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
    n: int,
    V: NDArray[np.float64],
    lam: float,
    rng: np.random.Generator,
    chunk: int = 1 << 20,
    c: float | None = None,
) -> NDArray[np.float64]:
    # x = √c (g + (√(1+λ) − 1) V Vᵀ g) has covariance c(I + λVVᵀ); O(npk) instead of O(np²).
    # c defaults to Wang & Xu's 1/(5p(λ+1)).
    p = V.shape[0]
    if c is None:
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
    rng = check_random_state(random_state, stream="data")
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
    rng = check_random_state(random_state, stream="data")
    V = sparse_basis(n_features, n_components, n_nonzero, rng)
    return _sample(n_samples, V, lam, rng), V


def sparse_basis(p: int, k: int, s: int, rng: np.random.Generator) -> NDArray[np.float64]:
    """A random s×k orthonormal block, zero-padded to p×k, rows permuted."""
    V = np.zeros((p, k))
    V[:s] = random_orthonormal(s, k, rng)
    return V[rng.permutation(p)]


def make_low_rank_gaussian(
    n_samples: int,
    n_features: int,
    n_components: int,
    *,
    n_nonzero: int | None = None,
    signal: float = 0.05,
    noise: float | None = None,
    random_state: Any = None,
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Gaussian data with ``Σ = signal·VVᵀ + noise·I``: a spike whose size does not shrink with p.

    Wang & Xu's model ties every eigenvalue to ``1/(5p)``, so at p in the hundreds its eigengap
    is far below what any local-DP method can resolve with feasible n. This generator keeps the
    spike fixed, as in the high-dimensional sparse-PCA literature, which is what shows the
    benefit of sparsity: the noise a dense method must fight grows with p, a sparse method's
    with s.

    Parameters
    ----------
    n_samples, n_features, n_components : int
    n_nonzero : int or None, default=None
        Row sparsity s of V (``None``: dense Haar-random V).
    signal : float, default=0.05
        Eigengap: the top-k eigenvalues are ``signal + noise``.
    noise : float or None, default=None
        Isotropic variance; default ``0.05/p``, so ``E‖x‖² = k·signal + 0.05``. Rows above
        norm 1 are rare but possible; estimators clip them with a warning.
    random_state : None, int or Generator

    Returns
    -------
    X : ndarray of shape (n_samples, n_features)
    V : ndarray of shape (n_features, n_components)
    """
    p, k = n_features, n_components
    _check(n_samples, p, k, 1.0)
    check_in_range(signal, "signal", low=0.0)
    noise = 0.05 / p if noise is None else check_in_range(noise, "noise", low=0.0)
    rng = check_random_state(random_state, stream="data")
    if n_nonzero is None:
        V = random_orthonormal(p, k, rng)
    else:
        check_in_range(
            n_nonzero, "n_nonzero", low=k, high=p, low_closed=True, high_closed=True, integer=True
        )
        V = sparse_basis(p, k, n_nonzero, rng)
    return _sample(n_samples, V, signal / noise, rng, c=noise), V


def make_signal_noise(
    n: int, p: int, sigma: float, *, random_state: Any = None
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Liu et al.'s Example 4.1: ``x = s·v + σ·z`` with ``s = ±1`` and ``z ~ N(0, I_p)``.

    ``E[x xᵀ] = v vᵀ + σ² I``: top eigenvector ``v`` (eigengap 1) whatever σ. The gradients
    ``x xᵀw`` have norm about 1 but spread about σ, which is where DP-PCA's range-adaptive
    noise beats norm clipping (Private Oja).

    Parameters
    ----------
    n, p : int
        Records and dimension.
    sigma : float
        Noise level σ ≥ 0.
    random_state : None, int or numpy.random.Generator

    Returns
    -------
    X : ndarray of shape (n, p)
    v : ndarray of shape (p, 1)
        The signal direction (a uniformly random unit vector).
    """
    rng = check_random_state(random_state, stream="data")
    if sigma < 0 or not np.isfinite(sigma):
        raise ValueError(f"sigma must be a finite float >= 0. Got {sigma!r} instead.")
    v = random_orthonormal(p, 1, rng)
    signs = rng.choice(np.array([-1.0, 1.0]), size=n)
    X = signs[:, None] * v[:, 0] + sigma * rng.standard_normal((n, p))
    return X, v


def make_dpspca_covariance(
    n_features: int = 1000,
    n_components: int = 5,
    n_nonzero: int = 10,
    *,
    spike: float = 100.0,
    bulk: tuple[float, float] = (0.0, 10.0),
    random_state: Any = None,
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """The population covariance of Ge et al.'s experiments (§5.1), as eigenvectors and values.

    ``Σ = U diag(λ) Uᵀ`` with ``λ₁ = … = λ_k = spike`` and the other ``d − k`` eigenvalues
    i.i.d. Uniform[bulk]. The leading eigenspace ``Q* = [Lᵀ 0]ᵀ``: an ``s × k`` standard Gaussian
    matrix orthogonalised (``L``) on the first ``s = n_nonzero`` coordinates, zero below. The other
    eigenvectors orthogonalise ``(I − Q*Q*ᵀ)R`` for a ``d × (d − k)`` standard Gaussian ``R``.

    Parameters
    ----------
    n_features, n_components, n_nonzero : int, default=1000, 5, 10
        d, k and s (the paper's values).
    spike : float, default=100.0
    bulk : (float, float), default=(0.0, 10.0)
        Range of the uniform non-leading eigenvalues (must stay below ``spike``).
    random_state : None, int or numpy Generator

    Returns
    -------
    U : ndarray of shape (n_features, n_features)
        Orthonormal eigenvectors; ``U[:, :n_components]`` is ``Q*``.
    eigenvalues : ndarray of shape (n_features,)
        In the order of ``U``'s columns (the first k equal ``spike``; the rest unsorted).
    """
    d, k = n_features, n_components
    _check(1, d, k, 1.0)
    check_in_range(n_nonzero, "n_nonzero", low=k, high=d, low_closed=True, high_closed=True,
                   integer=True)
    lo, hi = (float(b) for b in bulk)
    if not 0.0 <= lo <= hi < spike:
        raise ValueError(f"bulk must satisfy 0 <= low <= high < spike={spike}; got {bulk}.")
    rng = check_random_state(random_state, stream="data")
    Q = np.zeros((d, k))
    Q[:n_nonzero] = random_orthonormal(n_nonzero, k, rng)
    R = rng.standard_normal((d, d - k))
    R -= Q @ (Q.T @ R)
    U = np.hstack((Q, np.linalg.qr(R)[0]))
    eigenvalues = np.concatenate((np.full(k, float(spike)), rng.uniform(lo, hi, d - k)))
    return U, eigenvalues


def make_dpspca_data(
    n_samples: int = 100_000,
    n_features: int = 1000,
    n_components: int = 5,
    n_nonzero: int = 10,
    *,
    spike: float = 100.0,
    bulk: tuple[float, float] = (0.0, 10.0),
    normalize: str | None = "rows",
    random_state: Any = None,
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Gaussian data from Ge et al.'s §5.1 model (:func:`make_dpspca_covariance`).

    ``x ~ N(0, Σ)``. The paper does not bound ``‖x‖`` (here ``E‖x‖² = tr Σ ≈ 5 500`` at its
    defaults), but its privacy analysis, like privpca's, needs ``‖x‖ ≤ 1``. With
    ``normalize="rows"`` (default) every row is divided by its own norm. That is a per-record
    map (no privacy cost) and it keeps the truth: in Σ's eigenbasis the coordinates are
    independent and symmetric, so ``E[xxᵀ/‖x‖²]`` is diagonal there, with entries increasing in
    λⱼ — same eigenvectors, same order, eigenvalues ≈ λⱼ/tr Σ. ``normalize="max"`` divides every
    row by the largest row norm of the sample instead (the experiments' and Table 1
    benchmark's setting: it keeps the Gaussian covariance up to a scale, but the scale looks at
    every row, so it is a benchmark shortcut, not a private preprocessing). ``normalize=None``
    returns the raw Gaussian rows (estimators would clip them).

    Parameters
    ----------
    n_samples, n_features, n_components, n_nonzero : int, default=100 000, 1000, 5, 10
        n, d, k, s (the paper's values).
    spike, bulk : see :func:`make_dpspca_covariance`
    normalize : {"rows", "max", None}, default="rows"
    random_state : None, int or numpy Generator

    Returns
    -------
    X : ndarray of shape (n_samples, n_features)
    V : ndarray of shape (n_features, n_components)
        The true leading eigenspace ``Q*`` (non-zero on the first ``n_nonzero`` rows).

    Examples
    --------
    >>> X, V = make_dpspca_data(500, 40, 2, 5, random_state=0)
    >>> X.shape, V.shape, bool(np.allclose(np.linalg.norm(X, axis=1), 1.0))
    ((500, 40), (40, 2), True)
    """
    check_in_range(n_samples, "n_samples", low=1, low_closed=True, integer=True)
    if normalize not in ("rows", "max", None):
        raise ValueError(f"normalize must be 'rows', 'max' or None; got {normalize!r}.")
    rng = check_random_state(random_state, stream="data")
    U, lam = make_dpspca_covariance(n_features, n_components, n_nonzero, spike=spike, bulk=bulk,
                                    random_state=rng)
    root = U * np.sqrt(lam)  # Σ^{1/2} up to a rotation: x = root @ z
    X = np.empty((int(n_samples), int(n_features)))
    rows = max(1, (1 << 22) // int(n_features))
    for start in range(0, int(n_samples), rows):
        z = rng.standard_normal((min(rows, int(n_samples) - start), int(n_features)))
        block = z @ root.T
        if normalize == "rows":
            block /= np.sqrt(np.einsum("ij,ij->i", block, block))[:, None]
        X[start : start + block.shape[0]] = block
    if normalize == "max":
        X /= np.sqrt(np.einsum("ij,ij->i", X, X)).max()
    return X, np.ascontiguousarray(U[:, :n_components])
