"""The error bar and variances of a released basis: noisy power, Bingham, the stochastic
family (Private Oja and DP-PCA, on their held-out rows) and DPS-PCA.

These estimators release a basis ``Q`` (k×p) and then, in a separate Gaussian release (the
pipeline's ``variance`` part), ``M̃ = QᵀGQ + E_k`` (k×k, entries of std τ), ``t̃ = tr G + e``
and, up to :data:`RESIDUAL_MAX_FEATURES` features, the residual pair below.
:func:`component_error_bound` bounds the distance of ``Q`` to the top-k eigenvectors ``V`` of
``G`` from these alone, whatever produced ``Q`` (no eigengap, no convergence assumed).
Everything here is post-processing of released values and public parameters.

* **Ky Fan residual.** With ``G``'s eigenpairs ``(λᵢ, uᵢ)``, ``cᵢ = ‖Quᵢ‖²`` and
  ``s = ‖sin Θ‖²_F = Σ_{i≤k}(1 − cᵢ)``, the energy ``G`` keeps outside ``Q``,
  ``r = tr G − tr QᵀGQ = Σᵢ λᵢ(1 − cᵢ) ≥ λ_k·s`` (G is PSD). So ``s ≤ r/λ_k``, and
  ``λ_k ≥ λ_min(QᵀGQ)`` (Courant–Fischer).
* **Noise.** ``Q`` is fixed before the noise is drawn, and so is ``u``, the lowest
  eigenvector of ``M = QᵀGQ``. Courant–Fischer gives ``λ_min(M̃) ≤ uᵀM̃u = λ_min(M) +
  uᵀE_ku``, a Gaussian of variance ``τ²(2 − Σuᵢ⁴) ≤ τ²(2 − 1/k)``; the trace's error
  ``e − tr E_k`` has variance ``τ²(1 + k)``. The bound needs only one side of each, so with
  probability ≥ 1 − α (α/2 each, α/4 with the residual pair): ``λ_min(M) ≥ λ_min(M̃) −
  zτ√(2 − 1/k)`` and ``tr G − tr M ≤ t̃ − tr M̃ + zτ√(1 + k)``, with ``z`` the standard
  Gaussian's upper α/2 (α/4) quantile: 2.24 at α = 0.05 with the pair, where a two-sided
  bound on ``‖E_k‖₂`` took 4.8τ. The energy outside Q, ρ and ω (below) are ≥ 0: where one's
  upper bound is below 0 the draw fell in the α event, and the bar is the cap. A further
  perturbation ``c`` of ``G`` in spectral norm and
  of rank ≤ 2 (the private centring) moves a trace by at most ``2c``.
* Hence ``‖V̂V̂ᵀ − VVᵀ‖_F = √(2s) ≤ √(2 r⁺/λ⁻)`` with ``r⁺ = t̃ − tr M̃ + zτ√(1 + k) + 4c``
  and ``λ⁻ = λ_min(M̃) − zτ√(2 − 1/k) − c``, capped at ``√(2·min(k, p − k))`` ("no
  information"), which is also reported when ``λ⁻ ≤ 0``. It is vacuous when the tail energy
  exceeds ``λ_k``: a basis and its own variances cannot tell the true ``λ_{k+1}``.
* **Davis–Kahan residual** (where ``p ≤`` :data:`RESIDUAL_MAX_FEATURES`: the same release
  carries ``ρ̃ = ‖R‖_F + e_ρ`` and ``ω̃ = λ_max(WGW) + e_ω``, with ``W = I − QQᵀ`` and
  ``R = WGQ``). ``λ_{k+1}(G) ≤ λ_max(WGW)`` (Courant–Fischer: the max over a subspace of
  codimension k), and ``X = U_⊥ᵀQ`` solves ``Λ_⊥X − X(QᵀGQ) = U_⊥ᵀR``, so when the spectra
  are apart by ``δ = λ_min(QᵀGQ) − λ_max(WGW) > 0``, ``‖sin Θ‖_F = ‖X‖_F ≤ ‖R‖_F/δ``.
  With the centring's ``c`` (``‖R‖_F`` moves by ≤ √2c, each eigenvalue by ≤ c):
  ``√2(ρ̃ + τz + √2c)/(λ⁻ − ω̃ − τz − c)``. It is tight whenever ``Q`` is close, whatever
  the tail's energy (p − k directions of small variance add up to a tail that makes the Ky
  Fan bound vacuous). The bar is the smaller of the two.
* **The release's sensitivity is unchanged by the two extra numbers.** For a record ``x`` let
  ``a = ‖Qᵀx‖²``, ``b = ‖Wx‖²``, ``A = a + b ≤ D²``; replacing ``x`` by ``y`` moves the packed
  ``QᵀGQ`` by at most ``√(a_x² + a_y²)`` (non-negative inner products), ``tr G`` by
  ``|A − B|``, ``‖R‖_F`` by at most ``√(a_x b_x) + √(a_y b_y)`` (triangle inequality on
  ``WxxᵀQ``) and ``λ_max(WGW)`` by at most ``max(b_x, b_y)`` (Weyl). The squares sum to at
  most ``a_x² + a_y² + 2a_xb_x + 2a_yb_y + b_x² + b_y² + (A − B)² = 2(A² + B² − AB) ≤ 2D⁴``:
  **Δ = √2·D²** for the whole vector, as for the first two parts alone (adding or removing a
  record: ``2a² + 3ab + 2b² ≤ 2A²``, the same).
* **Clipping.** Where the bound selection chose below its robust maximum, the ``variance``
  part reads the rows clipped *at the robust maximum*
  (:meth:`~privpca.pipeline.release.ReleasePipeline.rotate_to_spectrum`), so the bar bounds
  the distance to those rows' PCA: the rotation clipping at the chosen bound causes is
  inside it. Rows above the robust maximum (about 4.5 noise deviations of the search's
  counts) are not covered.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import scipy.linalg
import scipy.stats
from numpy.typing import NDArray

from privpca.pipeline.rows import PreparedRows
from privpca.pipeline.spectrum import (
    ERROR_ALPHA,
    feasible_spectrum,
    mean_perturbation_bound,
    read_off,
)
from privpca.solvers.eigen import fix_signs

__all__ = [
    "RESIDUAL_MAX_FEATURES",
    "ComponentSpectrum",
    "basis_moments",
    "component_error_bound",
    "residual_moments",
    "rotate_component_spectrum",
    "spectrum_off_high_pilot",
    "summed_error_bound",
    "unpack_moments",
]

#: The ``variance`` part carries the residual pair up to this many features: it reads the
#: p×p Gram (one ``O(np²)`` pass where the part alone needs ``O(npk)``; none with the bound
#: selection, whose pass kept it, up to the same 256 features) and one top eigenvalue.
#: Public, so the release's layout is too.
RESIDUAL_MAX_FEATURES = 256


def component_error_bound(
    matrix: NDArray[np.float64], total: float, noise_sd: float, n_features: int,
    extra_perturbation: float = 0.0, alpha: float = ERROR_ALPHA,
    residual: tuple[float, float] | None = None,
) -> float:
    """Bound on ‖V̂V̂ᵀ − VVᵀ‖_F from a basis's released ``QᵀGQ + E_k``, ``tr G + e`` and,
    where given, ``residual``: the released ``(‖(I − QQᵀ)GQ‖_F, λ_max((I − QQᵀ)G(I − QQᵀ)))``.

    ``matrix`` (k×k), ``total``, ``residual`` and ``noise_sd`` (τ, the std of each released
    entry) in the same units; ``extra_perturbation`` bounds, in those units, a rank-≤ 2
    perturbation of ``G`` in spectral norm. Valid w.p. ≥ 1 − α (module docstring): the
    smaller of the Ky Fan residual bound and, with ``residual``, Davis–Kahan's.
    """
    k = matrix.shape[0]
    if k >= n_features:
        return 0.0
    cap = math.sqrt(2.0 * min(k, n_features - k))
    released = (*np.ravel(matrix), total, *(residual or ()))
    if not all(math.isfinite(v) for v in released):
        return cap
    # One-sided Gaussian events, α shared over them: λ_min's and the trace's, and ρ's and
    # ω's with the residual pair (module docstring, "Noise").
    z = float(scipy.stats.norm.isf(alpha / (2 if residual is None else 4)))
    tau, c = float(noise_sd), float(extra_perturbation)
    lowest = float(np.linalg.eigvalsh(matrix)[0]) - z * tau * math.sqrt(2.0 - 1.0 / k) - c
    if not lowest > 0:
        return cap
    outside = float(total) - float(np.trace(matrix)) + z * tau * math.sqrt(1.0 + k) + 4.0 * c
    uppers = [outside]
    if residual is not None:
        norm, top_outside = residual
        uppers += [norm + z * tau + math.sqrt(2.0) * c, top_outside + z * tau + c]
    if min(uppers) < 0:  # an upper bound of a quantity ≥ 0 below 0: the draw is in the α event
        return cap
    bound = math.sqrt(2.0 * outside / lowest)
    if residual is not None:
        separation = lowest - uppers[2]
        if separation > 0:
            bound = min(bound, math.sqrt(2.0) * uppers[1] / separation)
    return min(cap, bound)


def residual_moments(gram: NDArray[np.float64], components: NDArray[np.float64]
                     ) -> tuple[NDArray[np.float64], float, tuple[float, float]]:
    """``(QᵀGQ, tr G, (‖(I − QQᵀ)GQ‖_F, λ_max((I − QQᵀ)G(I − QQᵀ))))`` for ``Q`` =
    ``components.T``: what the ``variance`` part releases (exact, private)."""
    Q = components.T
    GQ = gram @ Q
    matrix = Q.T @ GQ
    outside = np.eye(gram.shape[0]) - Q @ Q.T
    top = scipy.linalg.eigh(outside @ gram @ outside, eigvals_only=True,
                            subset_by_index=[gram.shape[0] - 1] * 2)
    return ((matrix + matrix.T) / 2.0, float(np.trace(gram)),
            (float(np.linalg.norm(GQ - Q @ matrix)), float(top[0])))


def basis_moments(rows: PreparedRows, components: NDArray[np.float64],
                  factors: NDArray[np.float64] | None = None) -> NDArray[np.float64]:
    """What the ``variance`` part releases about ``rows`` (exact, private): the packed upper
    triangle of ``VᵀGV``, ``tr G`` and, up to :data:`RESIDUAL_MAX_FEATURES` features, the
    residual pair; re-centred on the rows' released ``Σ y`` where the held-out layout
    released one (a public term: post-processing). With ``factors`` (a scale refinement's,
    public), of the rows divided by them: ``G`` becomes ``R⁻¹GR⁻¹``."""
    k, p = components.shape
    c, n = rows.centre_sum, rows.n_samples
    residual: tuple[float, ...] = ()
    if p <= RESIDUAL_MAX_FEATURES or factors is not None:
        gram = rows.exact_gram()
        if c is not None:
            gram -= np.outer(c, c) / n
        if factors is not None:
            gram /= np.outer(factors, factors)
        matrix, total, residual = residual_moments(gram, components)
    else:
        matrix, total = rows.projected_moments(components)
        if c is not None:
            v = components @ c
            matrix, total = matrix - np.outer(v, v) / n, total - float(c @ c) / n
    return np.concatenate([matrix[np.triu_indices(k)], [total], residual])


def unpack_moments(packed: NDArray[np.float64], k: int) -> tuple[Any, ...]:
    """``(k×k matrix, total[, residual pair])`` from a :func:`basis_moments` layout."""
    iu = np.triu_indices(k)
    matrix = np.zeros((k, k))
    matrix[iu] = packed[:len(iu[0])]
    rest = packed[len(iu[0]):]
    out: tuple[Any, ...] = (matrix + np.triu(matrix, 1).T, float(rest[0]))
    return (*out, (float(rest[1]), float(rest[2]))) if rest.size > 1 else out


@dataclass(frozen=True)
class ComponentSpectrum:
    """A basis rotated to its released variances (:func:`rotate_component_spectrum`)."""

    components: NDArray[np.float64]
    explained_variance: NDArray[np.float64]
    explained_variance_ratio: NDArray[np.float64]
    total_variance: float
    expected_error: float | None
    #: The variances were read off the bound selection's pilot at the robust maximum
    #: (:func:`spectrum_off_high_pilot`; the record's notes say so).
    read_off_high_pilot: bool = False


def spectrum_off_high_pilot(choice: Any, spectrum: ComponentSpectrum,
                            denominator: float) -> ComponentSpectrum:
    """``spectrum`` with its variances read off the bound selection's pilot at the robust
    maximum, ``vᵀĜv`` along its components and ``tr Ĝ`` (post-processing), where ``choice``
    (a :class:`~privpca.pipeline.bound_selection.BoundChoice` or None) chose a bound below
    its top candidate. That pilot
    carries a tenth of the noise of the 2 % ``variance`` part or less (a fifth of the budget
    over the ladder's shells) and reads nearly every row; the basis was chosen without its
    noise, so its readings need no debias. A reading within
    :data:`~privpca.pipeline.spectrum.VARIANCE_SHIFT_SDS` of its own noise is 0."""
    if (choice is None or choice.high_pilot is None or choice.chosen == choice.high
            or not np.all(np.isfinite(spectrum.explained_variance))):
        return spectrum
    V = spectrum.components
    read = read_off(V, choice.high_pilot, choice.high_sigma, None, math.nan, 0.0, denominator)
    assert read is not None
    order, variance, ratio, feasible_total = read
    return replace(spectrum, components=V[order], explained_variance=variance,
                   explained_variance_ratio=ratio, total_variance=feasible_total,
                   read_off_high_pilot=True)


def rotate_component_spectrum(
    components: NDArray[np.float64],
    released: tuple[Any, ...] | None,
    noise_sd: float = 0.0,
    *,
    extra_perturbation: float = 0.0,
) -> ComponentSpectrum:
    """Rotate ``components`` (k×p) to the eigenvectors of the released ``QᵀGQ``.

    ``released`` is ``(k×k matrix, total[, residual pair])`` (:func:`unpack_moments`) in
    variance units with entries of std ``noise_sd``, or None when nothing beyond the basis is
    released (then NaN variances and ``expected_error`` None: no released quantity bounds the
    distance). The span is unchanged; the variances are made feasible
    (:func:`~privpca.pipeline.spectrum.feasible_spectrum`) and the error bounded by
    :func:`component_error_bound`.
    """
    k, p = components.shape
    if released is None:
        nan = np.full(k, np.nan)
        return ComponentSpectrum(components, nan, nan.copy(), math.nan, None)
    matrix, total = released[:2]
    error = component_error_bound(matrix, total, noise_sd, p, extra_perturbation,
                                  residual=released[2] if len(released) > 2 else None)
    values, vectors = np.linalg.eigh(matrix)
    values, vectors = values[::-1], vectors[:, ::-1]
    rotated = fix_signs((vectors.T @ components).T).T.copy()
    values, ratio, feasible_total = feasible_spectrum(values, total)
    return ComponentSpectrum(rotated, values, ratio, feasible_total, error)


def summed_error_bound(values: NDArray[np.float64], total: float,
                       spends: list[list[Any]], n: int, centred: bool, p: int,
                       residual: tuple[float, float] | None = None) -> float:
    """:func:`component_error_bound` for a spectrum summed over parties (DPS-PCA's server):
    eigenvalues of the summed ``QᵀXᵢᵀXᵢQ + Eᵢ``, the summed totals and residual pairs (each
    provider's pair bounds its share: ``‖Σ Rᵢ‖ ≤ Σ‖Rᵢ‖`` and ``λ_max`` is subadditive), each
    provider's noise independent (std ``√Σσᵢ²`` over the denominator); the private mean's
    term from the last mean round's summed noise (a rank-one PSD term, the assumption of
    :func:`~privpca.pipeline.spectrum.mean_perturbation_bound`)."""
    denom = float(n - 1 if centred and n > 1 else n)
    sd = _summed_scale(spends, "variance")
    mean_sd = _summed_scale(spends, "mean_refine") or _summed_scale(spends, "mean")
    extra = mean_perturbation_bound(n, mean_sd / n, p) / denom if mean_sd else 0.0
    return component_error_bound(np.diag(values), total, sd / denom, p, extra,
                                 residual=residual)


def _summed_scale(spends: list[list[Any]], part: str) -> float:
    """``√Σσᵢ²`` of one part's noise over the providers (its spends' ``"part: …"`` names)."""
    scales = [s.noise_scale for provider in spends for s in provider
              if s.mechanism.startswith(f"{part}:")]
    return math.sqrt(sum(x * x for x in scales))
