"""Samplers for the matrix Bingham distribution on the Stiefel manifold: the exponential
mechanism's draws.

BinghamPCA (:mod:`privpca.decomposition.bingham`) releases a basis drawn from the Bingham law
of the clipped Gram matrix scaled by ``ε/(2D²)``: the exponential mechanism, whose privacy is
the law these samplers draw from. They live in :mod:`privpca.mechanisms` because every draw
here is privacy randomness (``tests/test_noise_release.py`` bans generator draws outside this
package).

The target is the law on ``V_{k,p} = {V ∈ ℝ^{p×k} : VᵀV = I_k}`` with density

    p(V) ∝ exp(tr(Vᵀ B V))      (with respect to the uniform, Haar, measure)

for a symmetric ``B = U diag(λ) Uᵀ``. Every sampler works in the eigen-coordinates
``W = UᵀV``, where the density is ``exp(Σᵢ λᵢ ‖wᵢ‖²)`` (``wᵢ`` the i-th *row* of ``W``), and
takes ``(eigenvalues, eigenvectors)`` so one eigendecomposition of ``B`` serves everything.

This module holds the exact samplers and is where all the samplers are imported from:

:func:`sample_bingham_exact`
    Exact sampler for ``k = 1`` (Kent, Ganeiber & Mardia 2018): angular central Gaussian
    proposals with rejection, in vectorised batches, under a proposal budget.
:func:`sample_haar`
    The law for ``k = p``, which is Haar whatever ``B``.
:func:`sample_bingham_gibbs`
    Hoff's (2009) Gibbs sampler for any ``k``, row or column block updates
    (:mod:`privpca.mechanisms.bingham_gibbs`).
:func:`effective_sample_size`, :func:`split_rhat`, :func:`geweke_z`, :func:`mixing_diagnostics`
    Mixing diagnostics of the Gibbs sampler's traces
    (:mod:`privpca.mechanisms.bingham_diagnostics`).

References
----------
J. T. Kent, A. M. Ganeiber, K. V. Mardia. A new unified approach for the simulation of a wide
class of directional distributions. JCGS 27(2), 2018.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import scipy.linalg
import scipy.optimize
from numpy.typing import ArrayLike, NDArray

from privpca.mechanisms.bingham_diagnostics import (
    effective_sample_size,
    geweke_z,
    mixing_diagnostics,
    split_rhat,
)
from privpca.mechanisms.bingham_gibbs import UPDATES, BinghamGibbsResult, sample_bingham_gibbs

# The pure-Python reference chain, imported from here by tests/test_bingham.py.
from privpca.mechanisms.bingham_gibbs import _draw_theta as _draw_theta
from privpca.mechanisms.bingham_gibbs import _orthonormalise as _orthonormalise
from privpca.mechanisms.bingham_gibbs import _run_chain as _run_chain
from privpca.mechanisms.bingham_spectrum import _check_spectrum
from privpca.mechanisms.randomness import check_noise_rng

__all__ = [
    "UPDATES",
    "BinghamGibbsResult",
    "ExactBinghamResult",
    "ProposalBudgetExceededError",
    "effective_sample_size",
    "geweke_z",
    "mixing_diagnostics",
    "sample_bingham_exact",
    "sample_bingham_gibbs",
    "sample_haar",
    "split_rhat",
]


class ProposalBudgetExceededError(RuntimeError):
    """The exact (rejection) sampler used its whole proposal budget without an acceptance."""


def sample_haar(p: int, rng: np.random.Generator | None = None) -> NDArray[np.float64]:
    """A Haar-distributed orthogonal ``p × p`` matrix (Q of the QR of a Gaussian matrix).

    The Bingham law when ``k = p``: ``tr(VᵀBV) = tr B`` for every orthogonal V, so the
    exponential mechanism's output is this data-independent draw (0-DP).
    """
    rng = check_noise_rng(rng, owner="sample_haar")
    return np.asarray(scipy.linalg.qr(rng.standard_normal((int(p), int(p))))[0])


# --------------------------------------------------------------------------------------------
# Exact sampler for k = 1 (Kent, Ganeiber & Mardia)
# --------------------------------------------------------------------------------------------


def _kgm_b(a: NDArray[np.float64]) -> float:
    """Root ``b ∈ (0, q]`` of ``Σ 1/(b + 2aᵢ) = 1`` (KGM's optimal ACG parameter)."""
    q = a.size

    def f(b: float) -> float:
        return float(np.sum(1.0 / (b + 2.0 * a))) - 1.0

    if f(float(q)) >= 0.0:  # every aᵢ = 0: uniform target, b = q
        return float(q)
    return float(scipy.optimize.brentq(f, 1e-300, float(q), xtol=1e-15, rtol=1e-14))


@dataclass(frozen=True)
class ExactBinghamResult:
    """Output of :func:`sample_bingham_exact`.

    Attributes
    ----------
    vector : ndarray of shape (n_features,)
        A unit vector drawn exactly from the Bingham law (up to floating point).
    n_proposals : int
        Proposals drawn before the acceptance (≥ 1).
    """

    vector: NDArray[np.float64]
    n_proposals: int


def sample_bingham_exact(
    eigenvalues: ArrayLike,
    *,
    eigenvectors: ArrayLike | None = None,
    max_proposals: int = 100_000,
    batch_size: int = 4096,
    rng: np.random.Generator | None = None,
) -> ExactBinghamResult:
    """Exact draw of a unit vector with density ``∝ exp(vᵀBv)`` (Kent, Ganeiber & Mardia).

    With ``A = λ_max I − Λ ⪰ 0`` (``exp(vᵀBv) ∝ exp(−vᵀAv)`` on the sphere), proposals come
    from the angular central Gaussian with ``Ω = I + 2A/b``, ``b`` the root of
    ``Σ 1/(b + 2aᵢ) = 1``, and are accepted with probability
    ``exp(−t + (q/2) log(1 + 2t/b) + (q − b)/2 − (q/2) log(q/b))``, ``t = vᵀAv``.
    The acceptance rate falls as the spread ``λ_max − λ_min`` and the dimension grow — slowly
    in our measurements (about 0.15 at p = 50 and 0.03 at p = 800 for spiked data with
    spread ≈ 2·10³, i.e. ``ε n/2`` at n = 10⁵, ε ≈ 0.05) — but without a bound, hence the
    budget. (Implementations that skip the shift to ``min aᵢ = 0`` or the optimal ``b``
    lose a factor ``e^{λ_min}``-like in acceptance and do collapse.)

    Parameters
    ----------
    eigenvalues : array-like of shape (p,)
    eigenvectors : array-like of shape (p, p), optional
        ``None``: the result is in eigen-coordinates.
    max_proposals : int, default=100_000
        Proposals allowed before giving up.
    batch_size : int, default=4096
        Largest vectorised batch of proposals (batches start at 32 and double).
    rng : numpy.random.Generator, optional
        As in :func:`sample_bingham_gibbs` (secure mode: OS-keyed only).

    Returns
    -------
    ExactBinghamResult

    Raises
    ------
    ProposalBudgetExceededError
        When ``max_proposals`` proposals were all rejected. Never loops without bound.
    """
    lam, U = _check_spectrum(eigenvalues, eigenvectors)
    if int(max_proposals) < 1:
        raise ValueError(f"max_proposals must be >= 1. Got {max_proposals!r} instead.")
    rng = check_noise_rng(rng, owner="sample_bingham_exact")
    q = lam.size
    a = lam.max() - lam
    b = _kgm_b(a)
    scale = 1.0 / np.sqrt(1.0 + 2.0 * a / b)
    log_m = -(q - b) / 2.0 + (q / 2.0) * math.log(q / b)
    used = 0
    budget = int(max_proposals)
    nb = 16
    while used < budget:
        nb = min(2 * nb, int(batch_size), budget - used)  # grow batches: cheap when accepting
        z = rng.standard_normal((nb, q)) * scale
        x = z / np.linalg.norm(z, axis=1, keepdims=True)
        t = (x * x) @ a
        log_ratio = -t + (q / 2.0) * np.log1p(2.0 * t / b) - log_m
        accept = np.flatnonzero(np.log1p(-rng.random(nb)) < log_ratio)
        if accept.size:
            first = int(accept[0])
            vec = x[first]
            return ExactBinghamResult(
                vector=np.asarray(vec if U is None else U @ vec), n_proposals=used + first + 1
            )
        used += nb
    raise ProposalBudgetExceededError(
        f"The exact Bingham sampler rejected all max_proposals={budget} proposals: its "
        "acceptance rate falls roughly geometrically in the spread of the exponent's "
        "eigenvalues (epsilon * n / 2 at most for the exponential mechanism). Use the Gibbs "
        "sampler, or raise max_proposals."
    )
