"""From a noisy p×p matrix to components, explained variance and an error estimate.

Shared by the estimators whose release is a noisy second-moment matrix ``M = G + E``
(Analyze Gauss, MOD-SuLQ, the local model): ``G`` is the Gram matrix of the prepared rows and
``E`` symmetric Gaussian noise of known per-entry standard deviation σ. Everything here is
post-processing of ``M`` and public parameters: it costs no privacy.

Error estimate
--------------
* **Noise norm.** ``E`` has i.i.d. ``N(0, σ²)`` entries on and above the diagonal. Its spectral
  norm has mean at most ``2σ√p`` (comparison with the Gaussian orthogonal ensemble), and is a
  ``√2σ``-Lipschitz function of the independent entries, so (Gaussian concentration)
  ``‖E‖₂ ≤ σ(2√p + 2√(ln(2/α)))`` with probability at least 1 − α (:func:`noise_norm_bound`).
* **Centring.** Centring on a private mean ``μ̂`` instead of the sample mean adds the PSD rank-one
  term ``n(x̄ − μ̂)(x̄ − μ̂)ᵀ``, bounded the same way from the mean's released noise level.
* **Subspace.** Davis–Kahan's sin θ theorem: if ``G``'s top-k eigenvalues are ≥ a and the
  perturbed matrix's others are ≤ a − η, then ``‖sin Θ‖_F ≤ ‖(M − G)V‖_F/η`` with V the top-k
  eigenvectors of ``G``. V does not depend on the noise, so ``EV`` is a Gaussian p×k matrix
  (entries of variance at most σ², a √2σ-Lipschitz function of the noise):
  ``‖EV‖_F ≤ σ(√(pk) + 2√ln(2/α))`` w.p. ≥ 1 − α; the centring term adds at most its norm.
  By Weyl, ``η ≥ λ̂_k − λ̂_{k+1} − ‖M − G‖₂`` in terms of the released ``λ̂``. The estimate
  reported is ``√2·‖sin Θ‖_F`` (the distance ‖V̂V̂ᵀ − VVᵀ‖_F used throughout privpca), capped
  at its maximum ``√(2·min(k, p − k))``. It bounds the distance to the *non-private PCA of the
  same prepared rows* (centred, scaled, clipped): clipping bias is not noise and not included.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import scipy.linalg
from numpy.typing import NDArray

from privpca._validation import check_n_components
from privpca.solvers.eigen import top_eigenvectors

__all__ = [
    "ERROR_ALPHA",
    "SpectrumFit",
    "check_n_components_spec",
    "fit_noisy_matrix",
    "noise_norm_bound",
    "projected_noise_bound",
    "subspace_error_bound",
]

#: Failure probability of the high-probability bounds behind ``expected_error_``.
ERROR_ALPHA = 0.05


def noise_norm_bound(sigma: float, n_features: int, alpha: float = ERROR_ALPHA) -> float:
    """``σ(2√p + 2√ln(2/α))``: ‖E‖₂ for symmetric Gaussian noise, w.p. ≥ 1 − α."""
    return float(sigma) * (2.0 * math.sqrt(n_features) + 2.0 * math.sqrt(math.log(2.0 / alpha)))


def mean_perturbation_bound(
    n_samples: int, mean_noise_sd: float, n_features: int, alpha: float = ERROR_ALPHA
) -> float:
    """``n·‖x̄ − μ̂‖²`` bound from the mean's noise (per-coordinate std ``mean_noise_sd``)."""
    radius = mean_noise_sd * (math.sqrt(n_features) + math.sqrt(2.0 * math.log(1.0 / alpha)))
    return float(n_samples) * radius**2


def projected_noise_bound(sigma: float, n_features: int, k: int,
                          alpha: float = ERROR_ALPHA) -> float:
    """``σ(√(pk) + 2√ln(2/α))``: ‖EV‖_F for a fixed orthonormal p×k V, w.p. ≥ 1 − α."""
    return float(sigma) * (math.sqrt(n_features * k) + 2.0 * math.sqrt(math.log(2.0 / alpha)))


def subspace_error_bound(
    eigenvalues: NDArray[np.float64], k: int, noise_norm: float, n_features: int,
    projected_noise: float | None = None,
) -> float:
    """Davis–Kahan–Weyl bound on ‖V̂V̂ᵀ − VVᵀ‖_F from released eigenvalues (k+1 of them).

    ``noise_norm`` bounds ‖M − G‖₂ and ``projected_noise`` bounds ‖(M − G)V‖_F (default:
    √k·noise_norm, always valid).
    """
    if k >= n_features:
        return 0.0
    cap = math.sqrt(2.0 * min(k, n_features - k))
    if projected_noise is None:
        projected_noise = math.sqrt(k) * noise_norm
    gap = float(eigenvalues[k - 1] - eigenvalues[k]) - noise_norm
    if not gap > 0:
        return cap
    return min(cap, math.sqrt(2.0) * projected_noise / gap)


def check_n_components_spec(n_components: object, n_features: int, owner: object) -> int | float:
    """An int in [1, p] or a float in (0, 1) (fraction of the explained variance)."""
    name = type(owner).__name__
    if isinstance(n_components, float) and not isinstance(n_components, bool):
        if 0.0 < n_components < 1.0:
            return float(n_components)
        raise ValueError(
            f"The 'n_components' parameter of {name} must be an int in [1, {n_features}] or a "
            f"float in the range (0, 1). Got {n_components!r} instead."
        )

    return check_n_components(n_components, n_features, owner=owner)


@dataclass(frozen=True)
class SpectrumFit:
    """What :func:`fit_noisy_matrix` computed (attributes of the estimator)."""

    components: NDArray[np.float64]
    explained_variance: NDArray[np.float64]
    explained_variance_ratio: NDArray[np.float64]
    total_variance: float
    noise_level: float
    expected_error: float
    n_components: int


def fit_noisy_matrix(
    M: NDArray[np.float64],
    n_components: int | float,
    *,
    noise_sd: float,
    denominator: float,
    extra_perturbation: float = 0.0,
) -> SpectrumFit:
    """Top-k eigenvectors of the noisy ``M`` (upper triangle read), and its spectrum's summaries.

    Parameters
    ----------
    M : ndarray of shape (p, p)
        ``G + E``; not modified.
    n_components : int or float
        k, or a fraction in (0, 1): the smallest k whose private explained-variance ratio
        reaches it (needs every eigenvalue: one full ``eigvalsh``).
    noise_sd : float
        σ, std of each upper-triangle entry of ``E``.
    denominator : float
        Divides eigenvalues into variances (n − 1 for centred rows, n otherwise).
    extra_perturbation : float
        Spectral-norm bound of any further perturbation (e.g. the private mean's).
    """
    p = M.shape[0]
    total = float(np.trace(M))
    if isinstance(n_components, float):
        spectrum = scipy.linalg.eigh(M, eigvals_only=True, lower=False, check_finite=False)[::-1]
        ratios = np.cumsum(spectrum) / total if total > 0 else np.full(p, np.nan)
        reached = np.flatnonzero(ratios >= n_components)
        k = int(reached[0]) + 1 if reached.size else p
    else:
        k = int(n_components)
    values, vectors = top_eigenvectors(M, k)
    if k < p:
        nxt = scipy.linalg.eigh(M, eigvals_only=True, lower=False, check_finite=False,
                                subset_by_index=[p - k - 1, p - k - 1], driver="evr")
        with_next = np.append(values, nxt[0])
    else:
        with_next = values
    noise_norm = noise_norm_bound(noise_sd, p) + extra_perturbation
    projected = projected_noise_bound(noise_sd, p, k) + extra_perturbation
    error = subspace_error_bound(with_next, k, noise_norm, p, projected)
    ratio = values / total if total > 0 else np.full(k, np.nan)
    return SpectrumFit(
        components=vectors.T.copy(),
        explained_variance=values / denominator,
        explained_variance_ratio=ratio,
        total_variance=total / denominator,
        noise_level=noise_norm / denominator,
        expected_error=error,
        n_components=k,
    )


