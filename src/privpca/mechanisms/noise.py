"""The one place privacy noise is added: ``release = value + noise``, in either mode.

Every noisy release in privpca (central statistics, pipeline parts, local reports, a
provider's answers, gradient steps, histogram counts) calls one of these functions with the
**exact value**, its **sensitivity** and the noise scale its calibration gave. A test reads
the source and checks that nothing outside :mod:`privpca.mechanisms` draws privacy noise.
Every function passes its generator through secure mode's rule first
(:func:`privpca.mechanisms.randomness.check_noise_rng`: in secure mode only an OS-keyed
:class:`~privpca.mechanisms.secure_noise.SecureGenerator` may draw a release).

Two modes, chosen by the generator (:func:`~privpca.mechanisms.randomness.check_random_state`
returns a
:class:`~privpca.mechanisms.secure_noise.SecureGenerator` in secure mode):

* **default** (NumPy's PCG64): ``value + σ·Z`` with ``Z`` standard normal (or
  ``value + Laplace(0, b)``), in float64. Bit for bit what the estimators computed before this
  module existed, so seeded results are unchanged.
* **secure** (:class:`SecureGenerator`): the value is *snapped* to the grid
  ``Λ = 2^(⌊log₂ σ⌋ − GRID_BITS)`` and exact discrete noise ``Λ·K`` is added,
  ``K ~ N_ℤ(0, (σ'/Λ)²)`` (or the discrete Laplace). Both terms are multiples of Λ, so the
  float64 sum is exact: the output carries no trace of the low-order bits of the value, which
  is what let an adversary tell ``f(D) + σ·2^-30·K`` from ``f(D') + σ·2^-30·K`` with certainty
  (``privpca.audit``'s floating-point probe tests it).

Calibration of the snap
-----------------------
Rounding each of the ``d`` released coordinates to the grid moves it by at most Λ/2, so the
snapped query of L2 sensitivity Δ has sensitivity at most ``Δ + Λ√d`` (L1: ``Δ₁ + Λd``). The
secure path raises the noise to ``σ' = σ·(Δ + Λ√d)/Δ``, keeping ``σ'/Δ'`` — and so (ε, δ) —
exactly what the caller calibrated. With ``Λ ≤ σ·2^-30`` the factor is at most
``1 + 2^-30·√d·σ/Δ`` (below ``1 + 10^-5`` for every calibration in this library at
d ≤ 10⁶). A query whose values are integers (counts, ``integer_valued=True``) with ``Λ ≤ 1`` is
on the grid already: no rounding, no extra noise. :func:`secure_noise_scale` returns σ' and
:data:`privpca._config.SECURE_NOISE_NOTE` states the rule in every secure fit's privacy record.

The discrete Gaussian ``N_ℤ(0, s²)`` on an integer query is ``Δ²/(2s²)``-zCDP like the
continuous one and its (ε, δ) curve matches to a relative error below ``e^(−2π²s²)`` with
``s ≥ 2^30`` (Canonne, Kamath & Steinke 2020); the samplers' own floating-point residue is
stated in :mod:`privpca.mechanisms.secure_noise` and ``docs/SECURITY.md``.
"""

from __future__ import annotations

import functools
import math
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from privpca._config import GRID_BITS
from privpca.mechanisms.randomness import check_noise_rng
from privpca.mechanisms.secure_noise import (
    SecureGenerator,
    discrete_gaussian,
    discrete_laplace,
)

__all__ = [
    "GaussianNoiseSteps",
    "gaussian_release",
    "grid_step",
    "laplace_release",
    "secure_noise_scale",
    "symmetric_gaussian_release",
]

def grid_step(scale: float) -> float:
    """The power of two Λ with ``scale/Λ ∈ [2^GRID_BITS, 2^(GRID_BITS+1))``."""
    return math.ldexp(1.0, math.frexp(scale)[1] - 1 - GRID_BITS)


def secure_noise_scale(scale: float, sensitivity: float, coordinates: int, *,
                       norm: str = "l2", integer_valued: bool = False) -> tuple[float, float]:
    """``(Λ, scale')``: the secure grid and the noise scale that covers rounding to it.

    ``scale' = scale·(Δ + Λ√d)/Δ`` for an L2 sensitivity, ``scale·(Δ₁ + Λd)/Δ₁`` for L1,
    ``scale`` itself for an integer-valued query with ``Λ ≤ 1`` (nothing is rounded). Every
    argument is public: the grid never depends on the data.
    """
    lam = grid_step(scale)
    if integer_valued and lam <= 1.0:
        return lam, float(scale)
    if not (sensitivity > 0.0 and math.isfinite(sensitivity)):
        raise ValueError("Secure mode needs the release's sensitivity (a positive finite "
                         f"float) to cover the grid's rounding; got {sensitivity!r}.")
    d = max(int(coordinates), 1)
    extra = lam * (math.sqrt(d) if norm == "l2" else float(d))
    return lam, float(scale) * (sensitivity + extra) / sensitivity


def symmetric_noise(p: int, scale: float, rng: np.random.Generator) -> NDArray[np.float64]:
    """Default mode's symmetric noise: ``p(p+1)/2`` draws in one call, in the order of the
    packed upper triangle (row 0 first), scaled, mirrored below the diagonal."""
    rows, cols = _upper_triangle(p)
    values = rng.standard_normal(rows.size)
    values *= scale
    noise = np.empty((p, p))
    noise[rows, cols] = values
    noise[cols, rows] = values
    return noise


@functools.lru_cache(maxsize=16)
def _upper_triangle(p: int) -> tuple[NDArray[np.intp], NDArray[np.intp]]:
    # Row-major indices: the same draws, in the same order, as one row at a time.
    return np.triu_indices(p)


def _is_secure(rng: np.random.Generator) -> bool:
    return isinstance(rng, SecureGenerator)


def _check_scale(scale: float, what: str) -> float:
    value = float(scale)
    if not (value > 0.0 and math.isfinite(value)):
        raise ValueError(f"{what}: the noise scale must be positive and finite; got {scale!r}.")
    return value


def _snapped(value: NDArray[np.float64], lam: float) -> NDArray[np.float64]:
    # Multiples of a power of two: exact (floats coarser than Λ are on the grid already).
    return np.asarray(np.round(value / lam) * lam)


def _as_output(value: NDArray[np.float64], scalar: bool) -> Any:
    return float(value) if scalar else value


def gaussian_release(value: ArrayLike, sigma: float, rng: np.random.Generator, *,
                     sensitivity: float, coordinates: int | None = None,
                     integer_valued: bool = False) -> Any:
    """Release ``value + N(0, σ²)`` per coordinate: the Gaussian mechanism's output.

    Parameters
    ----------
    value : float or array-like
        The exact value ``f(D)``, never modified (a new array or float is returned).
    sigma : float
        The noise standard deviation per coordinate, calibrated by the caller for
        ``sensitivity`` under its neighbouring relation.
    rng : numpy.random.Generator
        The release's stream; a :class:`SecureGenerator` selects the snapped, discrete path.
    sensitivity : float
        L2 sensitivity Δ of ``value`` (secure mode raises σ to cover the grid's rounding).
    coordinates : int, optional
        Number of coordinates of the *whole* release this call belongs to (default:
        ``value``'s size). A release drawn in several calls (a matrix and its trace) passes
        its total so the rounding term ``Λ√d`` covers all of it.
    integer_valued : bool, default=False
        Whether ``value`` is integer-valued by construction (counts): nothing to round.

    Returns
    -------
    float or ndarray
        Same shape as ``value``; float for a scalar.
    """
    rng = check_noise_rng(rng, owner="gaussian_release")
    sigma = _check_scale(sigma, "gaussian_release")
    scalar = np.ndim(value) == 0
    if not _is_secure(rng):
        if scalar:
            return float(value) + sigma * float(rng.standard_normal())  # type: ignore[arg-type]
        return np.asarray(value, dtype=np.float64) + sigma * rng.standard_normal(np.shape(value))
    exact = np.asarray(value, dtype=np.float64)
    d = exact.size if coordinates is None else coordinates
    lam, scale = secure_noise_scale(sigma, sensitivity, d, integer_valued=integer_valued)
    k = discrete_gaussian(rng, scale / lam, exact.shape)
    return _as_output(_snapped(exact, lam) + lam * k.astype(np.float64), scalar)


def laplace_release(value: ArrayLike, scale: float, rng: np.random.Generator, *,
                    sensitivity: float, coordinates: int | None = None,
                    integer_valued: bool = False) -> Any:
    """Release ``value + Laplace(0, b)`` per coordinate (``sensitivity``: the L1 Δ₁).

    The default path is ``value + rng.laplace(0.0, b, size)``; the secure path snaps the
    value and adds exact discrete Laplace noise, ``b`` raised by ``(Δ₁ + Λd)/Δ₁`` unless the
    value is integer-valued. See :func:`gaussian_release` for the parameters.
    """
    rng = check_noise_rng(rng, owner="laplace_release")
    scale = _check_scale(scale, "laplace_release")
    scalar = np.ndim(value) == 0
    if not _is_secure(rng):
        if scalar:
            return float(value) + float(rng.laplace(0.0, scale))  # type: ignore[arg-type]
        return np.asarray(value) + rng.laplace(0.0, scale, size=np.shape(value))
    exact = np.asarray(value, dtype=np.float64)
    d = exact.size if coordinates is None else coordinates
    lam, b = secure_noise_scale(scale, sensitivity, d, norm="l1",
                                integer_valued=integer_valued)
    k = discrete_laplace(rng, b / lam, exact.shape)
    return _as_output(_snapped(exact, lam) + lam * k.astype(np.float64), scalar)


def symmetric_gaussian_release(matrix: ArrayLike, sigma: float, rng: np.random.Generator, *,
                               sensitivity: float) -> NDArray[np.float64]:
    """Release a symmetric matrix with i.i.d. ``N(0, σ²)`` noise on its upper triangle.

    The noise is symmetric (the lower triangle mirrors the upper one, diagonal included):
    ``p(p+1)/2`` released coordinates. Default mode: ``matrix + N`` with ``N`` drawn row by row
    of the packed upper triangle (:func:`~privpca.mechanisms.gaussian.symmetric_gaussian_noise`,
    the draws every seeded result was made with). Secure mode: the upper triangle of
    ``matrix`` is snapped and released by :func:`gaussian_release`, then mirrored.
    """
    rng = check_noise_rng(rng, owner="symmetric_gaussian_release")
    sigma = _check_scale(sigma, "symmetric_gaussian_release")
    A = np.asarray(matrix, dtype=np.float64)
    p = A.shape[0]
    if A.ndim != 2 or A.shape[1] != p:
        raise ValueError(f"symmetric_gaussian_release needs a square matrix; got {A.shape}.")
    if not _is_secure(rng):
        return A + symmetric_noise(p, sigma, rng)
    iu = np.triu_indices(p)
    packed = gaussian_release(A[iu], sigma, rng, sensitivity=sensitivity)
    out = np.empty((p, p))
    out[iu] = packed
    out[(iu[1], iu[0])] = packed
    return out


class GaussianNoiseSteps:
    """Noise for a sequence of Gaussian releases of one shape (Oja's per-step gradients).

    The draws for ``chunk`` steps are made at once (:meth:`draw`); :meth:`release` then
    returns step ``j``'s released value times a public step size η. Default mode:
    ``η·value + (η·σ)·Z[j]``, the arithmetic the Oja family always used; secure mode:
    ``η·(snap(value) + Λ·K[j])``, where ``snap(value) + Λ·K[j]`` is the released gradient
    and the product by η is post-processing.
    """

    def __init__(self, sigma: float, rng: np.random.Generator, shape: tuple[int, ...], *,
                 sensitivity: float) -> None:
        self.sigma = _check_scale(sigma, "GaussianNoiseSteps")
        self.rng = check_noise_rng(rng, owner="GaussianNoiseSteps")
        self.shape = tuple(int(s) for s in shape)
        self.secure = _is_secure(rng)
        self._draws: NDArray[np.float64] = np.empty((0, *self.shape))
        if self.secure:
            self._lam, self._scale = secure_noise_scale(
                self.sigma, sensitivity, int(np.prod(self.shape, dtype=np.int64)))

    def draw(self, count: int) -> None:
        """Draw the noise of the next ``count`` steps (replacing the previous chunk)."""
        shape = (int(count), *self.shape)
        if self.secure:
            k = discrete_gaussian(self.rng, self._scale / self._lam, shape)
            self._draws = k.astype(np.float64) * self._lam  # Λ·K: exact (Λ a power of two)
        else:
            self._draws = self.rng.standard_normal(shape)

    def release(self, value: NDArray[np.float64], j: int, step: float = 1.0
                ) -> NDArray[np.float64]:
        """``step ×`` (the released value of step ``j`` of the current chunk)."""
        if self.secure:  # step · (Λ·round(value/Λ) + Λ·K), in place on one temporary
            out = np.round(np.asarray(value, dtype=np.float64) / self._lam)
            out *= self._lam
            out += self._draws[j]
            out *= step
            return out
        return np.asarray(step * value + (step * self.sigma) * self._draws[j])
