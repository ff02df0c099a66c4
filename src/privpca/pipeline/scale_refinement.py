"""With ``scale=True``: the private scales refined by the released matrix's own diagonal.

The per-feature scales are released before the norm bound, from a share of the budget
(:func:`privpca.pipeline.preprocessing.private_scale`), and on binary or heavy-tailed columns
they miss the true standard deviations by up to 2× at ε = 1. Dividing by a wrong scale changes
the correlation matrix itself, so the components miss the correlation PCA however little
noise the statistic carries. The statistic ``M = G + E`` (the Gram matrix of the rows in the
private scales' units) holds a second reading of every feature's variance on its diagonal, at
the statistic's noise, for free (post-processing). With ``r_j = √M_jj`` the matrix
``R⁻¹MR⁻¹`` has a unit diagonal: the correlation matrix of the prepared rows.

* ``r`` is normalised to geometric mean 1 over the features it is read for, so the fitted
  ``scale_ = s·r`` keeps the private scales' level (clipping shrinks every diagonal entry,
  and only the ratios move the components).
* A diagonal entry within :data:`RESOLVED_SDS` of its own noise is not read (its factor is 1):
  a scale read off noise would multiply that feature's noise.
* ``R⁻¹ER⁻¹`` has entries of std at most ``σ/min(r)²``, which the error bar uses, and of root
  mean square std ``σ·mean(r⁻²)``, which debiases the eigenvalues (a feature whose private
  scale was twice too large has four times the noise after the refinement; the others do
  not). Only released values are read, so the privacy argument is unchanged.

Measured on the real-table suite (``python benchmarks/scale_tables.py``, docs/PIPELINE.md):
survey_binary 0.246 → 0.193, fair 0.307 → 0.164, randhie 0.506 → 0.280 against the
standardised table's PCA.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from privpca.pipeline.spectrum import SpectrumFit, fit_noisy_matrix, variances_off_high_pilot

__all__ = ["RESOLVED_SDS", "ScaleRefinement", "fit_released_matrix", "refine_scales",
           "refinement_note"]

#: A diagonal entry is read as a variance when it exceeds this many of its noise's standard
#: deviations (then its relative error is at most a quarter, the factor's an eighth).
RESOLVED_SDS = 4.0


@dataclass(frozen=True)
class ScaleRefinement:
    """Per-feature factors ``r`` (geometric mean 1) that divide the prepared rows' units.

    The identity (every factor 1) when the fit has no private scales.
    """

    factors: NDArray[np.float64]

    @property
    def is_identity(self) -> bool:
        return bool(np.all(self.factors == 1.0))

    def matrix(self, M: NDArray[np.float64]) -> NDArray[np.float64]:
        """``R⁻¹MR⁻¹`` (a new array)."""
        return M / np.outer(self.factors, self.factors)

    def noise_sd(self, sd: float) -> float:
        """The largest entry std of ``R⁻¹ER⁻¹`` for noise ``E`` of entry std ``sd`` (also the
        factor on a spectral-norm bound)."""
        return sd / float(self.factors.min()) ** 2

    def mean_noise_sd(self, sd: float) -> float:
        """The root mean square entry std of ``R⁻¹ER⁻¹``: ``sd·mean(r⁻²)`` (what debiases the
        eigenvalues; :meth:`noise_sd` bounds every entry, for the error bar)."""
        return sd * float(np.mean(self.factors**-2.0)) if self.factors.size else sd


def refine_scales(M: NDArray[np.float64], noise_sd: float, scale: Any) -> ScaleRefinement:
    """The refinement of a fit's private scales by the diagonal of its released ``M`` (Gram
    units, entry noise std ``noise_sd``). ``scale`` is the estimator's parameter: only
    ``True`` (private scales) is refined; public scales, given as an array, are the caller's
    choice and are kept."""
    if not (isinstance(scale, (bool, np.bool_)) and bool(scale)):
        return ScaleRefinement(np.ones(M.shape[0]))
    diagonal = np.diag(M).astype(np.float64)
    read = diagonal > RESOLVED_SDS * noise_sd
    factors = np.ones_like(diagonal)
    if read.any():
        roots = np.sqrt(diagonal[read])
        factors[read] = roots / math.exp(float(np.mean(np.log(roots))))
    return ScaleRefinement(factors)


def refinement_note(refinement: ScaleRefinement) -> str:
    """The record's sentence on a refinement (empty for the identity)."""
    if refinement.is_identity:
        return ""
    return (" With scale=True the private scales were refined by the released matrix's own "
            "diagonal (post-processing: the components are those of its correlation matrix; "
            f"factors {refinement.factors.min():.3g}–{refinement.factors.max():.3g}, "
            "geometric mean 1, in scale_).")


def fit_released_matrix(M: NDArray[np.float64], noise_sd: float, scale: Any, k: int | float, *,
                        denominator: float, extra_perturbation: float,
                        rng: np.random.Generator, choice: Any, units: float = 1.0,
                        shares_noise: bool = False,
                        ) -> tuple[SpectrumFit, ScaleRefinement, bool]:
    """A released second-moment matrix ``M`` (entry noise std ``noise_sd``) to its fit: the
    scales refined (:func:`refine_scales`, for the estimator's ``scale`` parameter), the
    components and spectrum (:func:`~privpca.pipeline.spectrum.fit_noisy_matrix`), and the
    variances read off the bound selection's high pilot where ``choice`` clipped below it
    (:func:`~privpca.pipeline.spectrum.variances_off_high_pilot`; the pilots are in Gram
    units, ``units`` times ``M``'s). Returns ``(fit, refinement, read off the pilot)``."""
    refinement = refine_scales(M, noise_sd, scale)
    matrix, matrix_sd = refinement.matrix(M), refinement.noise_sd(noise_sd)
    fit = fit_noisy_matrix(matrix, k, noise_sd=matrix_sd, denominator=denominator,
                           extra_perturbation=refinement.noise_sd(extra_perturbation), rng=rng,
                           debias_sd=refinement.mean_noise_sd(noise_sd))
    high = variances_off_high_pilot(choice, fit, matrix * units, matrix_sd * units,
                                    denominator * units, shares_noise=shares_noise,
                                    refinement=refinement)
    return (fit if high is None else high), refinement, high is not None
