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
  same prepared rows* (centred, scaled, clipped). Given a post-processing stream, the bar is
  the smaller of this and a parametric bootstrap around the released matrix
  (:func:`bootstrap_error_bound`), much tighter where the analytic noise norm is loose.
  Clipping is not noise: where the bound selection chose the bound, the bar is the residual
  bound of a release on the rows clipped at its reference
  (:meth:`ReleasePipeline.spectrum_bar <privpca.pipeline.release.ReleasePipeline.spectrum_bar>`).

Noise-debiased eigenvalues
--------------------------
The eigenvectors of ``M`` are chosen by the same noise that is in ``M``, so ``v̂ᵀMv̂`` is biased
up: on a pure-noise matrix the top eigenvalue is ``≈ 2σ√p`` (the edge of the semicircle), and
a table whose variance is spread thinly reported its top components as carrying all of it.
For a spike θ of ``G`` above ``σ√p`` the top eigenvalue of ``G + E`` is ``ℓ ≈ θ + pσ²/θ``
(Benaych-Georges & Nadakuditi 2011; to first order in ``E`` when ``G`` is not low-rank), so
:func:`debiased_eigenvalues` reports ``θ̂ = (ℓ + √(ℓ² − 4pσ²))/2`` where ``ℓ`` passes the edge
``2σ√p`` by more than the noise's top eigenvalue fluctuates (Tracy–Widom, 0.99 quantile), and 0
below (a variance the noise hides: not resolved). The total ``tr M`` is unbiased and
kept, so noise directions no longer take the explained variance, and ``n_components`` as a
share counts resolved variance only.

Feasible spectra
----------------
Noise can make a released eigenvalue negative and a released total smaller than the sum of the
released variances. :func:`feasible_spectrum` projects them onto what a spectrum can be, for
every estimator: variances ``max(λ̂ᵢ, 0)``, a total ``max(t̂, Σ max(λ̂ᵢ, 0))`` (the released
total, raised to the released variances when noise pushed it below them: the total is itself
private), ratios the variances over that total (each in [0, 1], summing to at most 1). It reads
released values only: post-processing, no budget. NaN stays NaN: it marks "nothing released".

The bar of a released basis (noisy power, Bingham, the stochastic family, DPS-PCA) is
:mod:`privpca.pipeline.basis_error`.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import scipy.linalg
import scipy.stats
from numpy.typing import NDArray

from privpca._validation import check_n_components
from privpca.mechanisms.noise import symmetric_noise
from privpca.solvers.eigen import top_eigenvectors

__all__ = [
    "BOOTSTRAP_DRAWS",
    "BOOTSTRAP_FACTOR",
    "BOOTSTRAP_MAX_FEATURES",
    "ERROR_ALPHA",
    "HIGH_PILOT_NOTE",
    "NOISE_DOMINATED",
    "TRACY_WIDOM_99",
    "SpectrumFit",
    "bootstrap_error_bound",
    "check_n_components_spec",
    "debiased_eigenvalues",
    "feasible_spectrum",
    "fit_noisy_matrix",
    "noise_norm_bound",
    "noisy_eigenvalues",
    "projected_noise_bound",
    "read_off",
    "released_total",
    "subspace_error_bound",
    "variances_off_high_pilot",
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


def feasible_spectrum(
    values: NDArray[np.float64], total: float
) -> tuple[NDArray[np.float64], NDArray[np.float64], float]:
    """Released variances and total projected onto a spectrum: ``(variances, ratios, total)``.

    Variances ``max(λ̂ᵢ, 0)``; total ``max(t̂, Σ max(λ̂ᵢ, 0))`` (a non-finite ``t̂`` counts as
    not released: the variances' sum); ratios the variances over it, each in [0, 1] and
    summing to at most 1 (0 when everything released is 0). Post-processing of released
    values only. Returns NaN throughout when ``values`` holds a NaN (nothing released).
    """
    v = np.asarray(values, dtype=np.float64)
    if v.size and not np.all(np.isfinite(v)):
        return np.full(v.shape, np.nan), np.full(v.shape, np.nan), math.nan
    v = np.maximum(v, 0.0)
    released = float(total)
    top = float(v.sum())
    t = max(released, top) if math.isfinite(released) else top
    if not t > 0:
        return v, np.zeros_like(v), max(t, 0.0)
    ratio = v / t
    while ratio.sum() > 1.0:  # rounding only: at most a few ulps
        ratio = np.nextafter(ratio, 0.0)
    return v, ratio, t


#: The 0.99 quantile of the Tracy–Widom (β = 1) law: the noise's own top eigenvalue exceeds
#: ``σ(2√p + TRACY_WIDOM_99·p^(−1/6))`` with probability about 1 % (Johnstone 2001).
TRACY_WIDOM_99 = 2.02


def debiased_eigenvalues(values: NDArray[np.float64], noise_sd: float,
                         n_features: int) -> NDArray[np.float64]:
    """Eigenvalues of ``G`` estimated from those ``ℓ`` of ``G + E`` (E symmetric, entries of
    std σ): ``(ℓ + √(ℓ² − 4pσ²))/2`` where ``ℓ`` passes what the noise alone reaches with
    probability 0.99, ``σ(2√p + 2.02·p^(−1/6))`` (the edge and its Tracy–Widom fluctuation:
    with p = 50 the noise's top eigenvalue passed the bare edge 2σ√p in one seed of three),
    and 0 below (the module docstring). Post-processing of released values; NaN stays NaN."""
    v = np.asarray(values, dtype=np.float64)
    sigma, p = float(noise_sd), n_features
    edge_sq = 4.0 * p * sigma**2
    above = v > sigma * (2.0 * math.sqrt(p) + TRACY_WIDOM_99 * p ** (-1.0 / 6.0))
    with np.errstate(invalid="ignore"):
        out = np.where(above, (v + np.sqrt(np.where(above, v**2 - edge_sq, 0.0))) / 2, 0.0)
    return np.where(np.isnan(v), np.nan, out)


def noisy_eigenvalues(debiased: NDArray[np.float64], noise_sd: float,
                      n_features: int) -> NDArray[np.float64]:
    """The inverse of :func:`debiased_eigenvalues` above the edge, ``ℓ = θ + pσ²/θ`` (θ > 0):
    the eigenvalues of ``G + E`` as released. A θ of 0 gives the edge ``2σ√p``, about what its
    ℓ was at most (not recovered)."""
    t = np.asarray(debiased, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(t > 0, t + n_features * float(noise_sd) ** 2 / t,
                        np.where(t == 0, 2.0 * float(noise_sd) * math.sqrt(n_features), t))


def check_n_components_spec(n_components: object, n_features: int, owner: object) -> int | float:
    """An int in [1, p], a float in (0, 1) (fraction of the explained variance) or None (all p
    components, as scikit-learn's); ``"mle"`` is refused with the reason."""
    name = type(owner).__name__
    if n_components is None:
        return n_features
    if isinstance(n_components, str) and n_components == "mle":
        # Measured: a 3-factor table (n = 20 000, p = 10, isotropic noise 0.25, ε = 1) where
        # scikit-learn's "mle" gives 3 gave 8 (Analyze Gauss), 7 (MOD-SuLQ), 6 (local).
        raise ValueError(
            f"{name}: n_components='mle' is not offered. Minka's choice assumes the spectrum's "
            "tail is flat (isotropic noise), and the release's own noise spreads it (a "
            "semicircle of width about 4σ√p), which the likelihood reads as more components: "
            "on a 3-factor table it chose 6 to 8 where scikit-learn's chooses 3. Give an int, "
            "None (every component) or a share of the private explained variance, e.g. "
            "n_components=0.9.")
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
    #: The std of each released entry's noise in the variances' units (the debias's σ).
    entry_noise: float = math.nan


#: How many noise standard deviations the two releases' variances must differ by before the
#: noisier, unclipped one replaces the clipped one (:func:`variances_along`).
VARIANCE_SHIFT_SDS = 2.0


def variances_along(fit: SpectrumFit, final: NDArray[np.float64], final_sd: float,
                    released: NDArray[np.float64], noise_sd: float,
                    denominator: float, *, shares_noise: bool = False) -> SpectrumFit | None:
    """``fit`` (from ``final``, noise std ``final_sd``) with its explained variances read off
    another release ``M'`` of the same rows (noise std ``noise_sd``) at a bound above (almost)
    every norm: ``vᵢᵀ M' vᵢ`` along its components and the total ``tr M'`` (post-processing),
    made feasible. Used where the components come from rows clipped at a low bound, whose
    variances are the clipped rows' (:mod:`privpca.pipeline.bound_selection`).

    The clipped variances are biased, ``M'``'s are noisier: ``M'``'s are used when clipping
    visibly moved them, i.e. when a variance or the total differs between the two releases by
    more than :data:`VARIANCE_SHIFT_SDS` standard deviations of the difference's noise (a
    quadratic form ``vᵀEv`` of the symmetric noise has std at most ``√2·σ``, the trace
    ``√p·σ``); otherwise None (keep ``fit``'s).

    A variance read within :data:`VARIANCE_SHIFT_SDS` noise deviations of 0 is reported as 0
    (not resolved). ``shares_noise``: ``final`` is the statistic averaged with a pilot whose
    noise ``M'`` also carries (the pilots are cumulative sums of shells). With
    inverse-variance weights that pilot's noise projects onto ``final``'s with coefficient 1,
    so the components chose ``M'``'s noise as much as ``final``'s and its variances are
    debiased at ``final_sd`` (:func:`debiased_eigenvalues`).
    """
    V = fit.components
    read = read_off(V, released, noise_sd, np.einsum("ij,jk,ik->i", V, final, V),
                     float(np.trace(final)), final_sd, denominator,
                     debias_sd=final_sd if shares_noise else 0.0)
    if read is None:
        return None
    order, variance, ratio, feasible_total = read
    return replace(fit, components=V[order], explained_variance=variance,
                   explained_variance_ratio=ratio, total_variance=feasible_total,
                   entry_noise=final_sd / denominator if shares_noise else 0.0)


def read_off(V: NDArray[np.float64], M: NDArray[np.float64], noise_sd: float,
             current: NDArray[np.float64] | None, current_total: float, current_sd: float,
             denominator: float, *, debias_sd: float = 0.0, total: float | None = None,
             ) -> tuple[NDArray[np.intp], NDArray[np.float64], NDArray[np.float64], float] | None:
    """The variances ``vᵢᵀMvᵢ`` and total ``tr M`` (or ``total``, where ``M`` is the release
    projected on a basis) along the rows of ``V`` (``M`` of noise std
    ``noise_sd``), where they differ from ``current`` and ``current_total`` (same units,
    noise std ``current_sd``) by more than :data:`VARIANCE_SHIFT_SDS` of the difference's
    noise (always with ``current`` None); None otherwise. Debiased at ``debias_sd`` when
    ``M`` shares the noise that chose ``V``; a reading within :data:`VARIANCE_SHIFT_SDS` of
    its own noise is 0 (not resolved). Returns the order (largest first, as scikit-learn's)
    and the feasible spectrum over ``denominator``."""
    p = M.shape[0]
    values = np.einsum("ij,jk,ik->i", V, M, V)
    total = float(np.trace(M)) if total is None else float(total)
    spread = math.hypot(noise_sd, current_sd)
    moved = current is None or (
        np.abs(values - current).max() > VARIANCE_SHIFT_SDS * math.sqrt(2.0) * spread
        or abs(total - current_total) > VARIANCE_SHIFT_SDS * math.sqrt(p) * spread)
    if not moved:
        return None
    if debias_sd:
        values = debiased_eigenvalues(values, debias_sd, p)
    values = np.where(values > VARIANCE_SHIFT_SDS * math.sqrt(2.0) * noise_sd, values, 0.0)
    order = np.argsort(-values, kind="stable")
    return (order, *feasible_spectrum(values[order] / denominator, total / denominator))


#: What a fit's record notes say when :func:`variances_off_high_pilot` replaced its variances
#: (the scree plot draws no band then: :func:`privpca.plot.variances_read_elsewhere`).
HIGH_PILOT_NOTE = (
    " The bound chosen was below the ladder's top: explained_variance_ and its ratio are read "
    "off the pilot Gram released at the robust maximum (post-processing), the variances of "
    "rows clipped at a bound above (almost) every norm, not of rows clipped at the chosen "
    "bound (for a statistic with a spectrum of its own, where the two differ by more than "
    "their noise: privpca.pipeline.spectrum.variances_along).")


def variances_off_high_pilot(choice: Any, fit: SpectrumFit, final: NDArray[np.float64],
                             final_sd: float, denominator: float, *,
                             shares_noise: bool = False,
                             refinement: Any = None) -> SpectrumFit | None:
    """:func:`variances_along` the bound selection's pilot at its high candidate, when the
    bound chosen (``choice``, a :class:`~privpca.pipeline.bound_selection.BoundChoice` or
    None) was a lower one: ``final`` (Gram units, noise std ``final_sd``) then holds rows
    clipped at about the median, whose variances can be half the table's. None otherwise.
    ``refinement`` (a :class:`~privpca.pipeline.scale_refinement.ScaleRefinement`) put
    ``final`` in refined units; the pilot is read in the same units."""
    if choice is None or choice.chosen == choice.high or choice.high_pilot is None:
        return None
    pilot, pilot_sd = choice.high_pilot, choice.high_sigma
    if refinement is not None and not refinement.is_identity:
        pilot, pilot_sd = refinement.matrix(pilot), refinement.noise_sd(pilot_sd)
    return variances_along(fit, final, final_sd, pilot, pilot_sd, denominator,
                           shares_noise=shares_noise)


#: Draws of the parametric bootstrap of the noise-only error bar.
BOOTSTRAP_DRAWS = 20
#: The bootstrap bar is this factor times the draws' 0.95 quantile (the draws perturb the
#: released, already noisy matrix: its gap is a draw too). Chosen on the suite's tuning half.
BOOTSTRAP_FACTOR = 1.25
#: When the median draw moves the subspace by this fraction of the largest distance √(2k)
#: or more, the release is noise-dominated and the bar is that largest distance: a bootstrap
#: around a matrix whose top-k is noise measures the noise, not the error (its draws
#: saturate near 1.4 for k = 2 while true errors reach 2).
NOISE_DOMINATED = 0.5
#: Up to this many features (the draws are top-k eigenpairs of a p×p matrix).
BOOTSTRAP_MAX_FEATURES = 256


def bootstrap_error_bound(M: NDArray[np.float64], k: int, noise_sd: float,
                          extra_perturbation: float, rng: np.random.Generator) -> float:
    """A parametric bootstrap of the noise's effect on the top-k subspace of ``M``.

    ``M`` (upper triangle read) is the released ``G + E``; each draw adds a fresh symmetric
    ``E'`` of the same per-entry std and a rank-one ``±c·uuᵀ`` (``c`` the centring's
    perturbation bound, ``u`` uniform) and measures ``‖P_k(M + E') − P_k(M)‖_F``. Returns
    :data:`BOOTSTRAP_FACTOR` times the 0.95 quantile of the draws, or the cap ``√(2k)`` when
    the median reaches :data:`NOISE_DOMINATED` of it. Post-processing of ``M`` and public
    σ: no privacy cost. An estimate of a 95 % bound, not a certificate (the draws perturb
    ``M``, not ``G``); measured coverage on the real-table suite in docs/REAL_DATA.md.
    """
    p = M.shape[0]
    cap = math.sqrt(2.0 * min(k, p - k))
    A = np.triu(M) + np.triu(M, 1).T
    V = top_eigenvectors(A, k)[1]
    P = V @ V.T
    moved = np.empty(BOOTSTRAP_DRAWS)
    for i in range(BOOTSTRAP_DRAWS):
        u = rng.standard_normal(p)
        u *= extra_perturbation / max(float(np.linalg.norm(u)), 1e-300)
        sign = 1.0 if rng.random() < 0.5 else -1.0
        W = top_eigenvectors(A + symmetric_noise(p, noise_sd, rng) + sign * np.outer(u, u),
                             k)[1]
        moved[i] = np.linalg.norm(W @ W.T - P)
    if np.median(moved) >= NOISE_DOMINATED * cap:
        return cap
    return min(cap, BOOTSTRAP_FACTOR * float(np.quantile(moved, 0.95)))


def fit_noisy_matrix(
    M: NDArray[np.float64],
    n_components: int | float,
    *,
    noise_sd: float,
    denominator: float,
    extra_perturbation: float = 0.0,
    rng: np.random.Generator | None = None,
    debias_sd: float | None = None,
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
    rng : numpy.random.Generator, optional
        A post-processing stream: the error bar is then the smaller of Davis–Kahan's and
        :func:`bootstrap_error_bound` (up to :data:`BOOTSTRAP_MAX_FEATURES` features).
    debias_sd : float, optional
        Where the entries' noise is not all of std σ (``noise_sd`` then bounds them, for the
        error bar), the root mean square entry std that debiases the eigenvalues.
    """
    p = M.shape[0]
    debias_sd = noise_sd if debias_sd is None else debias_sd
    total = float(np.trace(M))
    if isinstance(n_components, float):
        spectrum = scipy.linalg.eigh(M, eigvals_only=True, lower=False, check_finite=False)[::-1]
        # Resolved variance only: a noise direction's eigenvalue is the noise's edge.
        spectrum = debiased_eigenvalues(spectrum, debias_sd, p)
        ratios = np.cumsum(spectrum) / total if total > 0 else np.full(p, np.nan)
        reached = np.flatnonzero(ratios >= n_components)
        k = int(reached[0]) + 1 if reached.size else p
        if not reached.size:
            resolved = int(np.count_nonzero(spectrum > 0))
            warnings.warn(
                f"n_components={n_components:g}: the variance resolved above the release's "
                f"noise ({resolved} components, {float(ratios[-1]):.3g} of the private total) "
                f"does not reach that share, so every component is kept (k = {p}). Give an "
                "int, or a larger epsilon.", UserWarning, stacklevel=2)
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
    if rng is not None and k < p <= BOOTSTRAP_MAX_FEATURES:
        error = min(error, bootstrap_error_bound(M, k, noise_sd, extra_perturbation, rng))
    variance, ratio, feasible_total = feasible_spectrum(
        debiased_eigenvalues(values, debias_sd, p) / denominator, total / denominator)
    return SpectrumFit(
        components=vectors.T.copy(),
        explained_variance=variance,
        explained_variance_ratio=ratio,
        total_variance=feasible_total,
        noise_level=noise_norm / denominator,
        expected_error=error,
        n_components=k,
        entry_noise=debias_sd / denominator,
    )


def released_total(values: NDArray[np.float64], ratio: NDArray[np.float64]) -> float:
    """The server's private total variance, ``λ̂ᵢ/ratioᵢ`` (NaN when it was not positive)."""
    i = int(np.argmax(np.abs(ratio))) if np.all(np.isfinite(ratio)) else -1
    return float(values[i] / ratio[i]) if i >= 0 and ratio[i] != 0 else math.nan
