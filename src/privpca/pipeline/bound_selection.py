"""Choosing the clipping bound D for the table: a two-candidate balancing test.

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

The test (Lepski's balancing principle with two candidates)
-----------------------------------------------------------
Two candidates are read off the released norm histogram (post-processing): a low bound
``D_low`` (its median, :data:`LOW_QUANTILE`) and a high one ``D_high``,
:data:`HIGH_FACTOR` times the upper edge of the highest released bin. The factor is there
because a stability histogram releases no bin holding fewer rows than its threshold: a thin
tail (a count with a long right tail, a few far-out rows) is invisible to it, and a bound at
the top released edge would clip all of it (measured on the RAND table, docs/REAL_DATA.md:
0.98 at the released 99 % quantile, 0.34 at twice the top edge). Doubling costs at most 4× the
noise of the high candidate, which is chosen only when the low one is biased anyway.

Two pilot Gram matrices ``Ĝ_c = Σ clip_c(y) clip_c(y)ᵀ + N_c`` (upper triangle i.i.d.
``N(0, σ_c²)``, ``σ_c = m·√2·c²``, replace one; the "bound_select" part, two Gaussian releases)
are released. From them only (post-processing), with ``V̂`` the top-k eigenvectors of
``Ĝ_low`` and ``Q̂ = I − V̂V̂ᵀ``, the statistic

``T = ‖Q̂ Ĝ_high V̂‖_F² / σ_high²``

measures how far the high pilot's matrix is from having the low bound's subspace as an
invariant subspace. **Null hypothesis** (clipping at ``D_low`` does not rotate the subspace:
``Σ_high`` and ``Σ_low`` share their top-k eigenvectors): the block ``Q Σ_high V`` is zero,
and because ``N_high`` is independent of ``V̂`` (separate releases), ``Q̂ N_high V̂`` has
``k(p − k)`` coordinates, each of variance ``σ_high²(1 − Σᵢ uᵢ²vᵢ²) ≤ σ_high²``: ``T`` is at
most a χ² with ``k(p − k)`` degrees of freedom. The test rejects at level
:data:`TEST_LEVEL` (``T`` above that χ²'s ``1 − α`` quantile) and then ``D = D_high``;
otherwise ``D = D_low``. Assumptions: (A1) the bias is non-increasing in D, so ``D_high`` is
the less biased candidate; (A2) ``V̂`` is close to ``Σ_low``'s eigenvectors (the low pilot's
noise, ``(D_low/D_high)²`` times the high one's, is small against its gap; where it is not,
the noise of ``V̂`` leaks into ``T`` and favours ``D_high``, the unbiased choice).

The pilots cost a share of the budget (10 % of ``1/m²`` by default: the statistic's noise grows
by ``1/√0.9 − 1 ≈ 5 %``). Everything released here — the two candidates, ``d`` and the
statistic — is post-processing of the private releases and is published in the record's notes.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray
from scipy.stats import chi2

from privpca.mechanisms.noise import symmetric_gaussian_release, symmetric_noise
from privpca.mechanisms.sensitivity import gram_sensitivity

__all__ = [
    "HIGH_FACTOR",
    "LOW_QUANTILE",
    "MAX_FEATURES",
    "TEST_LEVEL",
    "BoundChoice",
    "choose_bound",
    "rotation_statistic",
    "top_vectors",
]

#: Quantile of the released norm histogram giving the low candidate.
LOW_QUANTILE = 0.5
#: The high candidate is this factor times the upper edge of the highest released bin.
HIGH_FACTOR = 2.0
#: Level of the test (its false-positive rate under the null: no rotation).
TEST_LEVEL = 0.05
#: Share of the "bound_select" part that the low pilot gets (the high one gets the rest).
LOW_WEIGHT = 0.25
#: Draws of the parametric bootstrap of the null.
NULL_DRAWS = 40
#: Up to this many features the test runs (one eigendecomposition of a p×p matrix);
#: above it no pilot is planned (decided from the public p) and D is the private 0.99-quantile
#: of the norms, as for every estimator whose statistic is not a Gram (``subspace_rank=0``).
MAX_FEATURES = 2048


@dataclass(frozen=True)
class BoundChoice:
    """The test's outcome (all of it post-processing of private releases: publishable).

    Attributes
    ----------
    low, high : float
        The candidate bounds.
    chosen : float
        The bound the statistic uses.
    statistic : float
        ``T = ‖Q̂ Ĝ_high V̂‖_F² / σ_high²``.
    critical : float
        The χ² quantile it is compared with (``k(p − k)`` degrees of freedom).
    """

    low: float
    high: float
    chosen: float
    statistic: float
    critical: float

    @property
    def rotates(self) -> bool:
        """Whether the test found that clipping at ``low`` rotates the subspace."""
        return self.statistic > self.critical

    def describe(self) -> str:
        """One sentence for the record's notes."""
        which = "high" if self.chosen == self.high else "low"
        return (
            f"data_norm='auto' chose D = {self.chosen:.6g} ({which} candidate) between the "
            f"private median of the norms D_low = {self.low:.6g} and D_high = {self.high:.6g} "
            f"({HIGH_FACTOR:g}× the top of their released histogram): the rotation statistic "
            f"of two pilot Grams is {self.statistic:.4g} against the χ² critical value "
            f"{self.critical:.4g} at level {TEST_LEVEL:g} (D_high when above: clipping at "
            "D_low rotates the subspace; privpca.pipeline.bound_selection)."
        )


def top_vectors(matrix: NDArray[np.float64], k: int) -> NDArray[np.float64]:
    """The top-``k`` eigenvectors (columns) of a symmetric matrix."""
    _, vectors = np.linalg.eigh(matrix)
    return np.ascontiguousarray(vectors[:, ::-1][:, :k])


def rotation_statistic(low: NDArray[np.float64], high: NDArray[np.float64], sigma_high: float,
                       k: int) -> float:
    """``‖(I − V̂V̂ᵀ) high V̂‖_F² / σ_high²`` with ``V̂`` the top-k eigenvectors of ``low``."""
    V = top_vectors(low, k)
    block = high @ V
    block -= V @ (V.T @ block)
    return float(np.sum(block * block) / sigma_high**2)


def choose_bound(
    gram_at: Callable[[float], NDArray[np.float64]],
    n_components: int,
    low: float,
    high: float,
    multiplier: float,
    rng: np.random.Generator,
) -> BoundChoice:
    """Release the two pilots (multiplier ``m`` each, replace one) and run the test.

    Parameters
    ----------
    gram_at : callable
        ``D ↦ Σ clip_D(y) clip_D(y)ᵀ`` over the rows the statistic will see (exact, private).
    n_components : int
        k.
    low, high : float
        The candidates (public: read off a released histogram).
    multiplier : float
        Noise multiplier σ/Δ of each pilot (the "bound_select" part's).
    rng : numpy.random.Generator
        The fit's noise generator.

    Returns
    -------
    BoundChoice
    """
    k = int(n_components)
    released, sigmas = [], []
    for bound, weight in ((low, LOW_WEIGHT), (high, 1.0 - LOW_WEIGHT)):
        sensitivity = gram_sensitivity(bound, "replace")
        # The part's two releases compose to 2/m²; the split gives the high pilot, whose
        # noise the test must see through, the larger share.
        sigma = multiplier / math.sqrt(2.0 * weight) * sensitivity
        released.append(symmetric_gaussian_release(gram_at(bound), sigma, rng,
                                                   sensitivity=sensitivity))
        sigmas.append(sigma)
    p = released[0].shape[0]
    statistic = rotation_statistic(released[0], released[1], sigmas[1], k)
    critical = max(float(chi2.ppf(1.0 - TEST_LEVEL, k * (p - k))),
                   null_quantile(released[0], released[1], sigmas, k, rng))
    rotates = statistic > critical or not math.isfinite(statistic)
    return BoundChoice(float(low), float(high), float(high if rotates else low), statistic,
                       critical)


def null_quantile(low: NDArray[np.float64], high: NDArray[np.float64], sigmas: list[float],
                  k: int, rng: np.random.Generator) -> float:
    """The statistic's ``1 − α`` quantile under the null fitted to the pilots (a parametric
    bootstrap, post-processing): the high pilot with ``V̂`` made an invariant subspace, both
    re-noised; this adds the leakage of ``V̂``'s own noise that the χ² bound leaves out."""
    V = top_vectors(low, k)
    P = V @ V.T
    Q = np.eye(low.shape[0]) - P
    null_high = P @ high @ P + Q @ high @ Q
    p = low.shape[0]
    draws = [rotation_statistic(low + symmetric_noise(p, sigmas[0], rng),
                                null_high + symmetric_noise(p, sigmas[1], rng), sigmas[1], k)
             for _ in range(NULL_DRAWS)]
    return float(np.quantile(draws, 1.0 - TEST_LEVEL))
