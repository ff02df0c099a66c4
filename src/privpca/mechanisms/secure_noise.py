"""Secure-mode noise: a cryptographic generator and floating-point-safe samplers.

Why
---
Textbook samplers are attackable in floating point. The Laplace sampler ``-b·ln(U)`` reaches
only an irregular subset of the floats, and which floats ``f(D) + noise`` can reach depends on
``f(D)``: an output can rule a neighbouring dataset out with certainty (Mironov 2012, "On
significance of the least significant bits for differential privacy", CCS). A seeded PCG64
stream is also reproducible by whoever learns (or guesses) the seed.

What this module provides
-------------------------
:class:`SecureGenerator` is a :class:`numpy.random.Generator` on ChaCha20 (``randomgen``),
keyed with 256 bits from the operating system (:mod:`secrets`). It is what
:func:`privpca._validation.check_random_state` returns in secure mode
(:func:`privpca.config_context`), so every estimator draws from it without change. Its
noise methods are replaced by exact discrete samplers:

* ``normal(loc, scale, size)`` and ``laplace(loc, scale, size)`` are *snapped*: with the grid
  ``Λ = 2^(⌊log₂ scale⌋ − GRID_BITS)`` (a power of two), the output is
  ``Λ·round(loc/Λ) + Λ·K`` where ``K`` is an integer drawn from the discrete Gaussian
  ``N_ℤ(0, (scale/Λ)²)`` or the discrete Laplace ``P(K = k) ∝ exp(−|k|Λ/scale)``. Both terms
  are multiples of Λ, so the sum is exact in float64 (or, beyond 2⁵³Λ, a rounding of an exact
  value: post-processing). Privacy: rounding the query to the grid changes its sensitivity by
  at most Λ per coordinate, i.e. ``Δ_ℓ₂ + Λ√d`` (Gaussian) and ``Δ_ℓ₁ + Λd`` (Laplace), a
  relative increase of at most ``2^−GRID_BITS·√d·σ/Δ``; below 10⁻⁶ for every calibration in
  this library at d ≤ 10⁶ features. For a query already on the grid (counts, with Λ ≤ 1) there
  is no rounding at all. The discrete Gaussian ``N_ℤ(0, σ²)`` on an integer-valued query of
  L2 sensitivity Δ is ``Δ²/(2σ²)``-zCDP, the same as the continuous one, and its (ε, δ)
  curve is at most the continuous Gaussian's up to a relative error below ``e^(−2π²σ²)``
  (Canonne, Kamath & Steinke 2020, "The Discrete Gaussian for Differential Privacy",
  NeurIPS, Theorems 4, 7 and 14 and their Figure 1); here ``σ ≥ 2^GRID_BITS``, so the curves
  agree to machine precision. The discrete Laplace with parameter ``t`` on an integer query of
  L1 sensitivity Δ is ``(Δ/t)``-DP exactly (Ghosh, Roughgarden & Sundararajan 2012; CKS 2020,
  Section 2.1).
* ``standard_normal(size)`` returns ``2^−GRID_BITS·K`` with ``K ~ N_ℤ(0, 4^GRID_BITS)``: an
  exact discrete Gaussian on a regular grid (no unreachable holes depending on a seed or a
  ``log``). The callers compute ``value + σ·z`` in float64; that final product and sum are
  rounded once each, which is the residual floating-point surface of secure mode (see
  ``docs/SECURITY.md``). Callers that pass ``loc`` to :meth:`SecureGenerator.normal` get the
  exact snapped release.

The samplers follow CKS 2020's Algorithms 1–3 (discrete Laplace by a uniform remainder with a
Bernoulli(e^−b/t) acceptance plus a geometric quotient; discrete Gaussian by rejection from a
discrete Laplace with ``t = ⌊σ⌋ + 1``), vectorised, with the Bernoulli(e^−x) trials made by
comparing a 53-bit uniform with ``exp(−x)`` for ``x ∈ [0, 1]`` or for the Gaussian acceptance:
each acceptance probability is off by at most 2⁻⁵³ absolutely, a relative error below 10⁻¹⁵
on every probability of the output (it adds less than 10⁻¹⁵ to ε).
Every other Generator method (``random``, ``integers``, ``permutation``, ``gamma``, ...) is
NumPy's, on the ChaCha20 stream: cryptographically unpredictable, with NumPy's floating-point
transforms.
"""

from __future__ import annotations

import math
import secrets
from collections.abc import Callable
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

__all__ = [
    "GRID_BITS",
    "SecureGenerator",
    "discrete_gaussian",
    "discrete_laplace",
    "is_os_keyed",
    "secure_bit_generator",
]

#: log₂ of the number of grid points per noise standard deviation (or Laplace scale).
GRID_BITS = 30


def secure_bit_generator() -> np.random.BitGenerator:
    """ChaCha20 (20 rounds) keyed with 256 bits from :mod:`secrets` (the OS's CSPRNG)."""
    try:
        from randomgen import ChaCha
    except ImportError as exc:  # pragma: no cover - randomgen is a dependency
        raise ImportError(
            "privpca's secure mode needs the 'randomgen' package (ChaCha20): pip install randomgen"
        ) from exc
    bit_generator: np.random.BitGenerator = ChaCha(key=secrets.randbits(256), counter=0,
                                                   rounds=20)
    return bit_generator


def _shape(size: Any) -> tuple[int, ...]:
    if size is None:
        return ()
    if isinstance(size, int | np.integer):
        return (int(size),)
    return tuple(int(s) for s in size)


def _bernoulli_exp(rng: np.random.Generator, x: NDArray[np.float64]) -> NDArray[np.bool_]:
    """Independent Bernoulli(e^−x) trials, x ≥ 0 (a 53-bit uniform against exp(−x))."""
    return np.asarray(rng.random(x.shape) < np.exp(-x))


def _geometric(rng: np.random.Generator, t: float, n: int) -> NDArray[np.int64]:
    """``n`` draws of ``g ≥ 0`` with ``P(g) ∝ exp(−g/t)`` (t ≥ 1), exactly up to 2⁻⁵³ per trial.

    ``g = a·M + b`` with ``M = ⌊t⌋``: the remainder ``b`` is uniform on ``[0, M)`` accepted with
    probability ``e^(−b/t)`` (CKS 2020, Algorithm 2); the quotient ``a`` is geometric with
    ratio ``e^(−M/t) ∈ [e^−2, e^−1]``, drawn by inversion where its probabilities are not small.
    """
    m = math.floor(t)
    out = np.empty(n, dtype=np.int64)
    todo = np.arange(n)
    while todo.size:
        b = rng.integers(0, m, size=todo.size)
        ok = _bernoulli_exp(rng, b / t)
        out[todo[ok]] = b[ok]
        todo = todo[~ok]
    # a = ⌊−ln(U)·t/M⌋ with U ∈ (0, 1]: P(a ≥ j) = exp(−jM/t).
    u = 1.0 - rng.random(n)
    a = np.floor(-np.log(u) * (t / m)).astype(np.int64)
    return out + a * m


def discrete_laplace(rng: np.random.Generator, t: float, size: Any = None) -> NDArray[np.int64]:
    """Integers with ``P(K = k) ∝ exp(−|k|/t)``: the difference of two geometric draws."""
    shape = _shape(size)
    n = int(np.prod(shape, dtype=np.int64)) if shape else 1
    k = _geometric(rng, t, n) - _geometric(rng, t, n)
    return k.reshape(shape)


def discrete_gaussian(rng: np.random.Generator, sigma: float,
                      size: Any = None) -> NDArray[np.int64]:
    """Integers with ``P(K = k) ∝ exp(−k²/(2σ²))`` (CKS 2020, Algorithm 3, vectorised).

    Rejection from the discrete Laplace with ``t = ⌊σ⌋ + 1``: a proposal ``y`` is kept with
    probability ``exp(−(|y| − σ²/t)²/(2σ²))``; fewer than 1.6 proposals per draw on average.
    """
    if not sigma >= 1.0:
        raise ValueError(f"discrete_gaussian needs sigma >= 1. Got {sigma!r} instead.")
    shape = _shape(size)
    n = int(np.prod(shape, dtype=np.int64)) if shape else 1
    t = math.floor(sigma) + 1.0
    out = np.empty(n, dtype=np.int64)
    todo = np.arange(n)
    s2 = sigma * sigma
    while todo.size:
        y = discrete_laplace(rng, t, todo.size)
        dev = np.abs(y) - s2 / t
        ok = _bernoulli_exp(rng, dev * dev / (2.0 * s2))
        out[todo[ok]] = y[ok]
        todo = todo[~ok]
    return out.reshape(shape)


def _grid(scale: float) -> float:
    """The power of two Λ with ``scale/Λ ∈ [2^GRID_BITS, 2^(GRID_BITS+1))``."""
    return math.ldexp(1.0, math.frexp(scale)[1] - 1 - GRID_BITS)


def _snap(loc: ArrayLike, lam: float) -> NDArray[np.float64]:
    # Multiples of a power of two: exact (floats coarser than Λ are on the grid already).
    return np.asarray(np.round(np.asarray(loc, dtype=np.float64) / lam) * lam)


def _finish(value: NDArray[np.float64], size: Any, dtype: Any, out: Any) -> Any:
    if dtype not in (None, np.float64, float, "float64", "f8", "d"):
        raise TypeError("SecureGenerator draws float64 noise only.")
    if out is not None:
        out[...] = value
        return out
    if size is None and value.ndim == 0:
        return float(value)
    return value


class SecureGenerator(np.random.Generator):
    """A NumPy Generator on ChaCha20 with floating-point-safe Gaussian and Laplace noise.

    Parameters
    ----------
    bit_generator : numpy.random.BitGenerator, optional
        Defaults to :func:`secure_bit_generator` (a fresh OS key). Tests only: anything else
        is not secure, and secure mode refuses such a generator (:func:`is_os_keyed`).

    Notes
    -----
    ``spawn`` returns new SecureGenerators with fresh OS keys (never derived from this one),
    so streams handed to sub-steps are independent and unpredictable too.
    """

    def __init__(self, bit_generator: np.random.BitGenerator | None = None) -> None:
        super().__init__(secure_bit_generator() if bit_generator is None else bit_generator)
        # Keyed by privpca from the OS (not a caller's bit generator, which may be seeded):
        # the only generators secure mode lets through (privpca._validation).
        self._os_keyed = bit_generator is None

    def standard_normal(self, size: Any = None, dtype: Any = np.float64,
                        out: Any = None) -> Any:
        shape = _shape(size) if out is None else np.shape(out)
        k = discrete_gaussian(self, math.ldexp(1.0, GRID_BITS), shape)
        return _finish(np.ldexp(k.astype(np.float64), -GRID_BITS), size, dtype, out)

    def normal(self, loc: Any = 0.0, scale: Any = 1.0,
               size: Any = None) -> Any:
        return self._on_grid(discrete_gaussian, loc, _scalar_scale(scale, "normal"), size)

    def laplace(self, loc: Any = 0.0, scale: Any = 1.0,
                size: Any = None) -> Any:
        return self._on_grid(discrete_laplace, loc, _scalar_scale(scale, "laplace"), size)

    def _on_grid(self, draw: Callable[[np.random.Generator, float, Any], NDArray[np.int64]],
                 loc: Any, scale: float, size: Any) -> Any:
        """``loc`` snapped to the grid Λ of ``scale`` plus Λ times integers ``draw`` gives
        at ``scale/Λ``."""
        shape = _broadcast_shape(loc, size)
        lam = _grid(scale)
        k = draw(self, scale / lam, shape)
        value = _snap(loc, lam) + lam * k.astype(np.float64)
        return _finish(np.asarray(value), size if size is not None or np.ndim(loc) else None,
                       None, None)

    def spawn(self, n_children: int) -> list[SecureGenerator]:  # type: ignore[override]
        return [SecureGenerator() for _ in range(int(n_children))]

    def __reduce__(self) -> Any:
        raise TypeError("A SecureGenerator cannot be pickled: its key must not leave the process.")

    def __repr__(self) -> str:
        if self._os_keyed:
            return "SecureGenerator(ChaCha20, OS-keyed)"
        return f"SecureGenerator({type(self.bit_generator).__name__}, caller-supplied key)"


def is_os_keyed(rng: Any) -> bool:
    """Whether ``rng`` is a :class:`SecureGenerator` that privpca keyed from the OS itself.

    A SecureGenerator built on a caller's bit generator (``SecureGenerator(ChaCha(seed=0))``)
    is not: its stream is as reproducible as the seed behind it.
    """
    return isinstance(rng, SecureGenerator) and bool(getattr(rng, "_os_keyed", False))


def _scalar_scale(scale: Any, what: str) -> float:
    arr = np.asarray(scale, dtype=np.float64)
    if arr.ndim != 0:
        raise ValueError(f"SecureGenerator.{what} takes one scalar scale in secure mode.")
    value = float(arr)
    if not (value > 0.0 and math.isfinite(value)):
        raise ValueError(f"SecureGenerator.{what}: scale must be positive and finite; "
                         f"got {value!r}.")
    return value


def _broadcast_shape(loc: Any, size: Any) -> tuple[int, ...]:
    if size is not None:
        return _shape(size)
    return tuple(np.shape(loc))
