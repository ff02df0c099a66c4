"""Choosing the clipping bound D for the table: the estimated errors of two candidates.

Why a choice at all
-------------------
Clipping the rows at D has two effects on the top-k subspace (Davis–Kahan, sin Θ form):

* **noise**: the Gram's noise is ``σ ∝ D²``, so its effect on the subspace is about
  ``ν(D) ≈ ‖N_D‖ / gap(Σ_D)``, growing with D wherever the rows above D carry little of the
  gap;
* **bias**: ``Σ_D = Σ − B_D`` with ``B_D = Σ_{‖y‖>D} (1 − D²/‖y‖²) y yᵀ``. Shrinking a row
  does not turn it: if the shrunk rows' directions have the same principal axes as the
  table (a sign-symmetric, e.g. elliptical, cloud), ``Σ_D`` has the same top-k eigenvectors
  as ``Σ`` at every D and the bias is zero however much is clipped. When the heavy rows point
  elsewhere than the bulk (a skewed count, a subgroup far out), clipping *rotates* the
  subspace by ``b(D) ≈ ‖P_k(Σ_D) − P_k(Σ)‖``, decreasing in D, 0 above the largest norm.

On real tables the best fixed quantile is the median on some (the clipped rows carry no
direction of their own) and the maximum on others (docs/REAL_DATA.md): the norms alone cannot
tell the two apart, because the bias is a property of the directions.

The rule: estimated errors of the two candidates
------------------------------------------------
Two candidates are read off the released norm histogram (post-processing): a low bound
``D_low`` (its median, :data:`LOW_QUANTILE`) and a high one ``D_high`` (:func:`high_candidate`),
meant to clip (almost) nothing. A stability histogram releases no bin holding fewer rows than
its threshold τ, so its top released edge may clip a thin tail it cannot see (a count with a
long right tail, a few far-out rows; on the RAND table, docs/REAL_DATA.md, the top components
*are* that tail: 0.98 at the released 99 % quantile). Where the tail thins through the
threshold, ``D_high`` is :data:`HIGH_FACTOR` times the top released edge. Where the histogram
ends at a cliff it is the top edge itself: the top bin holds ``c ≥ τ`` rows and the bin above
fewer than τ, so if the tail decays geometrically from bin to bin (ratio ρ), ``ρ < τ/c`` and
the rows above the top edge number about ``c·ρ/(1 − ρ) < τ/(c/τ − 1)``; when that is at most
``1 −`` the default quantile (1 %) of the released mass, the top edge clips no more than the
default bound does, and the factor would only add noise (Covertype: its norms stop at 5 818,
its top bin holds 17 τ rows; 2× the edge cost 0.004 against 0.001).

Two pilot Gram matrices ``Ĝ_c = Σ clip_c(y) clip_c(y)ᵀ + N_c`` (upper triangle i.i.d.
``N(0, σ_c²)``, ``σ_c = m_c·√2·c²``, replace one; the "bound_select" part: two Gaussian
releases, the high one getting ``1 −`` :data:`LOW_WEIGHT` of the part, :func:`pilot_multipliers`)
are released; the record lists each as its own spend (count 1, its own ``σ_c`` and ``Δ_c``), so
an accountant composing the listed spends gets the fit's (ε, δ). From them only
(post-processing; ``P_k`` is the projector on the top-k eigenvectors):

* ``d = ‖P_k(Ĝ_low) − P_k(Ĝ_high)‖_F``, the pilots' distance;
* ``ν_c``: the ``1 −`` :data:`NOISE_LEVEL` quantile of ``‖P_k(Ĝ_c + E) − P_k(Ĝ_c)‖_F`` over
  :data:`NOISE_DRAWS` draws ``E`` of the pilot's noise law (a parametric bootstrap on the
  released matrix): how far the pilot's own noise moves its subspace, taken high so that a
  fluctuation of the noise is not read as a rotation;
* ``f_c``: the mean of the same with the *statistic's* noise level at bound c (its multiplier times
  ``√2·c²``; the plan's total multiplier for a statistic that is not Gaussian): how far the
  final release would be moved at that bound.

Estimated errors: ``e_low = b̂ + f_low`` with ``b̂ = max(0, d − ν_low − ν_high)`` (the part
of the distance that the pilots' noise cannot explain: the low bound's rotation), and
``e_high = f_high`` (no bias, by A1). ``D = D_high`` if the pilots resolve a rotation
(``b̂ > 0``) and ``e_high < e_low``, else ``D_low``.

Assumptions: (A1) the bias is non-increasing in D and ``D_high`` clips (almost) nothing that
rotates; (A2) the bootstrap's ν and f, computed around the released matrices instead of the
true ones, are the noise's effect (they are typical values, not bounds: the rule chooses the
smaller estimated error, it does not certify it); (A3) without a rotation the low bound is the
better one: both bounds then have the same subspace, the high bound's noise is
``(D_high/D_low)²`` times larger and the rows it restores widen the eigengap by at most their
own mass. A3 is why ``b̂ > 0`` is required: the f of a pilot that cannot see the k-th
component (noise above its eigengap) is a draw, not an estimate, and comparing two such draws
took the noisier bound on the anes96 table in 4 of 10 seeds (0.85 against 0.63 at D_low).

What it does and does not do (``PYTHONPATH=src python benchmarks/bound_select_seeds.py``,
AnalyzeGaussPCA at ε = 1 over ten seeds, against the private 0.99-quantile, the previous
default; docs/REAL_DATA.md has the suite): fair 0.092 against 0.334, anes96 0.393 against
0.599, digits 1.037 against 1.137, RAND 0.789 against 0.971, Covertype 0.001 for both,
breast_cancer and diabetes within 1 %. The pilots get a fifth of the budget (the high one
15 %), so their noise is about ``√(0.78/0.15) ≈ 2.3×`` the final release's and ``b̂``
resolves a rotation only when it is several times the final noise: on RAND (a rotation of
1.07 inside a near-tie of the 2nd and 3rd eigenvalues, 2σ of the high pilot apart) it is
bimodal, 0.14–0.57 where resolved and 1.2 where not (about 4 seeds in 10). Larger pilot
shares (30–65 %, simulated from the same pilots) moved RAND by less than its seed-to-seed
spread and cost the tables that keep the median 5–10 %. Where the noise dominates both bounds
give about the same and the pilots' share costs a few per cent (``AnalyzeGaussPCA`` averages
its Gram with the pilot released at the chosen bound, so it loses only the other pilot's
share). The final noise f is that of a Gram release, which overstates the noisy power
method's at the high bound. Pilots run up to :data:`MAX_FEATURES` features.

Everything released here — the two candidates, ``d``, the ν, f and the choice — is
post-processing of the private releases and is published in the record's notes.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
import scipy.linalg
from numpy.typing import NDArray

from privpca.mechanisms.noise import symmetric_gaussian_release, symmetric_noise
from privpca.mechanisms.secure_noise import fast_stream
from privpca.mechanisms.sensitivity import gram_sensitivity

__all__ = [
    "CLIFF_FRACTION",
    "HIGH_FACTOR",
    "LOW_QUANTILE",
    "LOW_WEIGHT",
    "MAX_FEATURES",
    "NOISE_DRAWS",
    "NOISE_LEVEL",
    "BoundChoice",
    "choose_bound",
    "high_candidate",
    "pilot_multipliers",
    "pilot_sigmas",
    "subspace_noise",
    "top_vectors",
]

#: Quantile of the released norm histogram giving the low candidate.
LOW_QUANTILE = 0.5
#: Where the norms' tail thins through the histogram's threshold, the high candidate is this
#: factor times the upper edge of the highest released bin (:func:`high_candidate`).
HIGH_FACTOR = 2.0
#: The top released edge is the high candidate when the rows estimated above it are at most
#: this fraction of the released mass: ``1 −`` the default bound's quantile (0.99).
CLIFF_FRACTION = 0.01
#: Share of the "bound_select" part that the low pilot gets (the high one, whose noise the
#: distance must see through, gets the rest).
LOW_WEIGHT = 0.25
#: Bootstrap draws per noise level.
NOISE_DRAWS = 10
#: The pilots' noise distances are taken at their ``1 − NOISE_LEVEL`` quantile.
NOISE_LEVEL = 0.1
#: Up to this many features the pilots run (``2 + 4·NOISE_DRAWS`` top-k eigenpairs of a p×p
#: matrix); above it no pilot is planned (decided from the public p) and D is the private
#: 0.99-quantile of the norms, as with ``"quantile"``. Measured on AnalyzeGaussPCA's fits of
#: 20 000 rows: +0.7 s at p = 256 (0.2 s without), +5 s at p = 617, +9 s at p = 1 024.
MAX_FEATURES = 256


@dataclass(frozen=True)
class BoundChoice:
    """The rule's outcome (all of it post-processing of private releases: publishable).

    Attributes
    ----------
    low, high : float
        The candidate bounds.
    chosen : float
        The bound the statistic uses.
    distance : float
        ``d``, the pilots' subspace distance.
    noise_low, noise_high : float
        The pilots' noise levels ν.
    final_low, final_high : float
        The final release's estimated noise effect f at each candidate.
    pilot : ndarray of shape (p, p) or None
        The released pilot Gram at the chosen bound (kept in memory, not published: a
        statistic that releases the same Gram may average it in, inverse-variance).
    pilot_sigma : float
        Its noise standard deviation per coordinate.
    high_pilot : ndarray of shape (p, p) or None
        The pilot released at ``high`` (in memory only): where the low bound is chosen, the
        explained variances can be read off it, clipped at a bound above (almost) every norm
        (:func:`privpca.pipeline.spectrum.variances_along`).
    high_sigma : float
        Its noise standard deviation per coordinate.
    """

    low: float
    high: float
    chosen: float
    distance: float
    noise_low: float
    noise_high: float
    final_low: float
    final_high: float
    pilot: NDArray[np.float64] | None = field(default=None, repr=False, compare=False)
    pilot_sigma: float = math.nan
    high_pilot: NDArray[np.float64] | None = field(default=None, repr=False, compare=False)
    high_sigma: float = math.nan

    @property
    def bias(self) -> float:
        """``b̂ = max(0, d − ν_low − ν_high)``, the low bound's estimated rotation."""
        return max(0.0, self.distance - self.noise_low - self.noise_high)

    def describe(self) -> str:
        """One sentence for the record's notes."""
        which = "high" if self.chosen == self.high else "low"
        return (
            f"The bound selection chose D = {self.chosen:.6g} ({which} candidate) between the "
            f"private median of the norms D_low = {self.low:.6g} and D_high = {self.high:.6g} "
            "(the top of their released histogram, or twice it where the tail thins through "
            "the histogram's threshold): estimated errors "
            f"{self.bias:.3g} (rotation) + {self.final_low:.3g} (noise) at D_low against "
            f"{self.final_high:.3g} at D_high, from two pilot Grams {self.distance:.3g} apart "
            f"with noise levels {self.noise_low:.3g} and {self.noise_high:.3g} "
            "(privpca.pipeline.bound_selection)."
        )


def high_candidate(top_edge: float, top_count: float, threshold: float,
                   released_mass: float) -> float:
    """``D_high`` from the released norm histogram (post-processing; module docstring).

    Parameters
    ----------
    top_edge, top_count : float
        Upper edge and released noisy count of the highest released bin.
    threshold : float
        The histogram's release threshold τ (public).
    released_mass : float
        The sum of the released counts.

    Returns
    -------
    float
        ``top_edge`` when the rows estimated above it, ``τ/(c/τ − 1)`` under a geometric
        tail, are at most :data:`CLIFF_FRACTION` of the released mass; else
        :data:`HIGH_FACTOR` ``· top_edge``.

    Examples
    --------
    >>> high_candidate(5792.6, 4150.0, 242.7, 581_000.0)  # a cliff: ≈ 15 rows above
    5792.6
    >>> high_candidate(22.6, 290.0, 242.7, 20_000.0)  # a tail through the threshold
    45.2
    """
    ratio = top_count / threshold
    if ratio > 1.0 and threshold / (ratio - 1.0) <= CLIFF_FRACTION * released_mass:
        return float(top_edge)
    return float(HIGH_FACTOR * top_edge)


def top_vectors(matrix: NDArray[np.float64], k: int) -> NDArray[np.float64]:
    """The top-``k`` eigenvectors (columns) of a symmetric matrix, largest first. Only the k
    pairs are computed (LAPACK's subset drivers: the rule runs ``2 + 4·NOISE_DRAWS`` of these;
    ``evx`` is the faster one from a few hundred features on, measured)."""
    p = matrix.shape[0]
    _, vectors = scipy.linalg.eigh(matrix, subset_by_index=[p - k, p - 1],
                                   driver="evr" if p < 512 else "evx")
    return np.ascontiguousarray(vectors[:, ::-1])


def subspace_noise(released: NDArray[np.float64], sigma: float, k: int,
                   rng: np.random.Generator) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """``(P_k(released), distances)``: how far :data:`NOISE_DRAWS` symmetric draws ``E`` of
    standard deviation ``sigma`` move the top-k subspace, ``‖P_k(released + E) −
    P_k(released)‖_F`` (a parametric bootstrap: it reads only the released matrix and a
    public σ)."""
    V = top_vectors(released, k)
    P = V @ V.T
    p = released.shape[0]
    moved = []
    for _ in range(NOISE_DRAWS):
        W = top_vectors(released + symmetric_noise(p, sigma, rng), k)
        moved.append(float(np.linalg.norm(W @ W.T - P)))
    return P, np.asarray(moved)


def pilot_multipliers(multiplier: float) -> tuple[float, float]:
    """The two pilots' noise multipliers σ_c/Δ_c, low then high: ``multiplier/√(2w)`` with
    w = :data:`LOW_WEIGHT` and ``1 − LOW_WEIGHT``.

    Two releases at ``multiplier`` each compose to ``2/m²``; this split keeps that total
    (``2w/m² + 2(1 − w)/m²``, exact for Gaussian mechanisms), so the pilots compose to the
    part's planned share. Public: a function of the plan only, known before any data is read
    (the record lists each pilot with its own multiplier).

    Examples
    --------
    >>> m_low, m_high = pilot_multipliers(10.0)
    >>> round(m_low, 4), round(m_high, 4)
    (14.1421, 8.165)
    >>> round((m_low**-2 + m_high**-2) / (2 * 10.0**-2), 12)
    1.0
    """
    return (multiplier / math.sqrt(2.0 * LOW_WEIGHT),
            multiplier / math.sqrt(2.0 * (1.0 - LOW_WEIGHT)))


def pilot_sigmas(multiplier: float, low: float, high: float) -> tuple[float, float]:
    """The two pilots' noise standard deviations: their multipliers
    (:func:`pilot_multipliers`) times Δ_c = √2·c² (replace one)."""
    return tuple(  # type: ignore[return-value]
        m * gram_sensitivity(bound, "replace")
        for bound, m in zip((low, high), pilot_multipliers(multiplier), strict=True))


def choose_bound(
    grams_at: Callable[[tuple[float, float]], Sequence[NDArray[np.float64]]],
    n_components: int,
    low: float,
    high: float,
    multiplier: float,
    final_multiplier: float,
    rng: np.random.Generator,
) -> BoundChoice:
    """Release the two pilots and choose the candidate with the smaller estimated error.

    Parameters
    ----------
    grams_at : callable
        ``(D_low, D_high) ↦ [Σ clip_D(y) clip_D(y)ᵀ for D in them]`` over the rows the
        statistic will see (exact, private; one pass).
    n_components : int
        k.
    low, high : float
        The candidates (public: read off a released histogram).
    multiplier : float
        The "bound_select" part's noise multiplier per release (its two releases compose to
        its share; :data:`LOW_WEIGHT` splits it).
    final_multiplier : float
        The statistic's noise multiplier (σ/Δ), for the final release's noise effect f.
    rng : numpy.random.Generator
        The fit's noise generator.

    Returns
    -------
    BoundChoice
    """
    k = int(n_components)
    sigmas = list(pilot_sigmas(multiplier, low, high))
    released = [symmetric_gaussian_release(gram, sigma, rng,
                                           sensitivity=gram_sensitivity(bound, "replace"))
                for gram, bound, sigma in zip(grams_at((low, high)), (low, high), sigmas,
                                              strict=True)]
    # The bootstrap reads only the released pilots (post-processing): a fast stream keyed
    # from the release's (the release's own on a seeded run, so its draws are unchanged).
    boot = fast_stream(rng)
    P_low, moved_low = subspace_noise(released[0], sigmas[0], k, boot)
    P_high, moved_high = subspace_noise(released[1], sigmas[1], k, boot)
    distance = float(np.linalg.norm(P_low - P_high))
    # The rotation is what the distance keeps beyond an upper quantile of each pilot's noise
    # distance (a mean would call half of the noise's fluctuations a rotation).
    nu_low, nu_high = (float(np.quantile(m, 1.0 - NOISE_LEVEL)) for m in (moved_low,
                                                                           moved_high))
    final_low = float(np.mean(subspace_noise(
        released[0], final_multiplier * gram_sensitivity(low, "replace"), k, boot)[1]))
    final_high = float(np.mean(subspace_noise(
        released[1], final_multiplier * gram_sensitivity(high, "replace"), k, boot)[1]))
    choice = BoundChoice(float(low), float(high), float(low), distance, nu_low, nu_high,
                         final_low, final_high, released[0], sigmas[0], released[1],
                         sigmas[1])
    # A3: only a rotation the pilots resolve can make the noisier bound the better one.
    if choice.bias > 0.0 and final_high < choice.bias + final_low:
        choice = BoundChoice(float(low), float(high), float(high), distance, nu_low, nu_high,
                             final_low, final_high, released[1], sigmas[1], released[1],
                             sigmas[1])
    return choice
