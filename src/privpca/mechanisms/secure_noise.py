"""Secure noise: an OS-keyed cryptographic generator and floating-point-safe samplers.

Why
---
Textbook samplers are attackable in floating point. The Laplace sampler ``-b·ln(U)`` reaches
only an irregular subset of the floats, and which floats ``f(D) + noise`` can reach depends on
``f(D)``: an output can rule a neighbouring dataset out with certainty (Mironov 2012, "On
significance of the least significant bits for differential privacy", CCS). Noise on a
*lattice* is no better when the release is a nonlinear function of it: a unit vector
``U·(z/‖z‖)`` with ``z = 2^-30·K`` (K integer) is proportional, after the public map ``Uᵀ``,
to a short integer vector that a lattice reduction finds under the true table only (40
of 40 in the lattice probe). A seeded PCG64 stream is also reproducible by whoever learns the seed.

What this module provides
-------------------------
:class:`SecureGenerator` is a :class:`numpy.random.Generator` on AES-128 in counter mode
(``randomgen.AESCounter``, AES-NI where the CPU has it: about 1.4× PCG64's cost per word),
keyed with 128 bits from the operating system (:mod:`secrets`). Its key cannot be read or
replaced through the public API (``bit_generator.state`` refuses both), it cannot be pickled,
and ``spawn`` gives children with fresh OS keys. It is what
:func:`~privpca.mechanisms.randomness.check_random_state` returns for ``random_state=None``
unless the
user opted out (``privpca.set_config(secure_mode=False)``).

Its *continuous* draws are built from full-precision uniforms (:func:`uniform_full`: every
float in (0, 1) reachable, with its probability, by drawing the binary exponent geometrically
and 52 mantissa bits uniformly — not the 2⁻⁵³ lattice of ``(bits >> 11)·2⁻⁵³``):

* ``random`` returns them; ``standard_normal`` is ``±|Φ⁻¹(U/2)|`` with an independent sign bit,
  ``normal`` is ``loc + scale·standard_normal``, ``standard_exponential`` is ``−ln U``,
  ``exponential`` and ``laplace`` follow. None of them returns values on a lattice. These
  serve the exponential mechanism (Bingham's samplers) and post-processing; the additive
  releases never use them.
* Every other Generator method (``integers``, ``permutation``, ``gamma``, ``vonmises``, …) is
  NumPy's algorithm on the AES stream (the compiled Bingham kernels call NumPy's algorithms on
  the bit generator directly).

The additive releases (:mod:`privpca.mechanisms.noise`) add *exact discrete* noise on a grid
they snap the value to, from :func:`discrete_gaussian` and :func:`discrete_laplace`, which
only :mod:`privpca.mechanisms` calls. With the grid ``Λ = 2^(⌊log₂ scale⌋ − GRID_BITS)``, a
release is ``Λ·round(value/Λ) + Λ·K``: both terms are multiples of Λ, so the sum is exact in
float64. Rounding the query to the grid changes its sensitivity by at most Λ per coordinate
(``Δ_ℓ₂ + Λ√d``, ``Δ_ℓ₁ + Λd``), which the release covers by raising the scale. The discrete
Gaussian ``N_ℤ(0, σ²)`` on an integer query of L2 sensitivity Δ is ``Δ²/(2σ²)``-zCDP, as the
continuous one, and its (ε, δ) curve matches the continuous one's to a relative error below
``e^(−2π²σ²)`` (Canonne, Kamath & Steinke 2020, NeurIPS, Theorems 4, 7 and 14); here
``σ ≥ 2^GRID_BITS``. The discrete Laplace with parameter ``t`` on an integer query of L1
sensitivity Δ is ``(Δ/t)``-DP (Ghosh, Roughgarden & Sundararajan 2012; CKS 2020, Section 2.1).

The samplers follow CKS 2020's Algorithms 1–3 (discrete Laplace: a sign bit and a geometric
magnitude, ``−0`` rejected; the geometric as a uniform remainder accepted with probability
``e^(−b/t)`` plus a quotient drawn by Bernoulli(e^(−M/t)) trials, so it has *no* upper
truncation; discrete Gaussian by rejection from a discrete Laplace with ``t = ⌊σ⌋ + 1``),
vectorised. Each Bernoulli(e^(−x)) trial compares a 53-bit uniform with the float
``exp(−x)``: its probability is off by at most 2⁻⁵³ absolutely, a relative error below
10⁻¹⁵ on every output probability (stated in ``docs/SECURITY.md``; nothing is truncated).
"""

from __future__ import annotations

import secrets
from typing import Any

import numpy as np
from numpy.typing import NDArray
from scipy.special import ndtri

__all__ = [
    "SecureGenerator",
    "discrete_gaussian",
    "discrete_laplace",
    "fast_stream",
    "is_os_keyed",
    "secure_bit_generator",
    "uniform_full",
]


def _sealed_class() -> type:
    """``randomgen.AESCounter`` whose state (key and counter) cannot be read or replaced."""
    try:
        from randomgen import AESCounter
    except ImportError as exc:  # pragma: no cover - randomgen is a dependency
        raise ImportError(
            "privpca's secure noise needs the 'randomgen' package (AES counter mode): "
            "pip install randomgen") from exc

    class SealedAESCounter(AESCounter):
        """AES-128-CTR keyed from the OS; ``state`` is sealed (no reading, no seeding)."""

        @property
        def state(self) -> Any:
            raise AttributeError("A secure generator's key and counter are not readable.")

        @state.setter
        def state(self, value: Any) -> None:
            raise AttributeError("A secure generator's state cannot be replaced.")

        def __reduce__(self) -> Any:
            raise TypeError("A secure generator cannot be pickled: its key must not leave "
                            "the process.")

    return SealedAESCounter


_SEALED: type | None = None


def secure_bit_generator() -> np.random.BitGenerator:
    """AES-128 in counter mode keyed with 128 bits from :mod:`secrets` (the OS's CSPRNG),
    its state sealed."""
    global _SEALED
    if _SEALED is None:
        _SEALED = _sealed_class()
    bit_generator: np.random.BitGenerator = _SEALED(key=secrets.randbits(128), counter=0)
    return bit_generator


def _shape(size: Any) -> tuple[int, ...]:
    if size is None:
        return ()
    if isinstance(size, int | np.integer):
        return (int(size),)
    return tuple(int(s) for s in size)


def _raw(rng: np.random.Generator, n: int) -> NDArray[np.uint64]:
    """``n`` raw 64-bit words of ``rng``'s bit generator (under its lock)."""
    return np.asarray(rng.bit_generator.random_raw(int(n)), dtype=np.uint64)


def uniform_full(rng: np.random.Generator, size: Any = None) -> NDArray[np.float64]:
    """Uniforms on (0, 1) at full floating-point precision (every float reachable).

    The binary exponent is geometric (the number of leading zeros of a random bit stream) and
    the 52 mantissa bits are uniform, so ``P(U ∈ [2^-(e+1), 2^-e)) = 2^-(e+1)`` and the
    draw is uniform on the floats of each binade (Downey 2007, "Generating pseudo-random
    floating-point values"). Two words per draw, more with probability 2⁻⁵³.
    """
    shape = _shape(size)
    n = int(np.prod(shape, dtype=np.int64)) if shape else 1
    words = _raw(rng, 2 * n)
    mantissa = (words[:n] >> np.uint64(12)).astype(np.float64) + 2.0 ** 52
    zeros = np.zeros(n)
    todo = np.arange(n)
    bits = words[n:] >> np.uint64(11)  # 53 random bits: converted to float exactly
    while True:
        top = bits.astype(np.float64)
        hit = top > 0
        # frexp(top)[1] is the bit length of the 53-bit integer: 53 − it leading zeros.
        zeros[todo[hit]] += 53 - np.frexp(top[hit])[1]
        todo = todo[~hit]
        if not todo.size:
            break
        zeros[todo] += 53  # all 53 bits were zero (probability 2⁻⁵³): draw on
        bits = _raw(rng, todo.size) >> np.uint64(11)
    out = np.ldexp(mantissa, (-53 - zeros).astype(np.int64))
    return out.reshape(shape) if shape else out.reshape(())


#: Expected 53-bit words per draw (about 7 and 12), with a margin: read in bulk first.
_WORDS_PER_DRAW = {"laplace": 8, "gaussian": 13}


def _draw_integers(kind: str, rng: np.random.Generator, scale: float,
                   size: Any) -> NDArray[np.int64]:
    if not 1.0 <= scale < 2.0 ** 52:
        raise ValueError(f"discrete_{kind} needs a scale in [1, 2^52). Got {scale!r} instead.")
    # numba: compiled on first use (cached on disk)
    from privpca.mechanisms._discrete_kernels import (
        discrete_gaussian_kernel,
        discrete_laplace_kernel,
    )

    shape = _shape(size)
    n = int(np.prod(shape, dtype=np.int64)) if shape else 1
    words = _raw(rng, _WORDS_PER_DRAW[kind] * n + 64)
    kernel = discrete_gaussian_kernel if kind == "gaussian" else discrete_laplace_kernel
    with rng.bit_generator.lock:  # the kernel reads more words from it if these run out
        out = kernel(words, rng, float(scale), n)
    return np.asarray(out).reshape(shape)


def discrete_laplace(rng: np.random.Generator, t: float, size: Any = None) -> NDArray[np.int64]:
    """Integers with ``P(K = k) ∝ exp(−|k|/t)``, ``1 ≤ t < 2⁵²``: a sign and a geometric
    magnitude, the negative zero rejected (CKS 2020, Algorithm 2; nothing truncated;
    :mod:`privpca.mechanisms._discrete_kernels`)."""
    return _draw_integers("laplace", rng, t, size)


def discrete_gaussian(rng: np.random.Generator, sigma: float,
                      size: Any = None) -> NDArray[np.int64]:
    """Integers with ``P(K = k) ∝ exp(−k²/(2σ²))``, ``1 ≤ σ < 2⁵²`` (CKS 2020, Algorithm 3).

    Rejection from the discrete Laplace with ``t = ⌊σ⌋ + 1``: a proposal ``y`` is kept with
    probability ``exp(−(|y| − σ²/t)²/(2σ²))``; fewer than 1.6 proposals per draw on average
    (:mod:`privpca.mechanisms._discrete_kernels`).
    """
    return _draw_integers("gaussian", rng, sigma, size)


def _signs(rng: np.random.Generator, shape: tuple[int, ...]) -> NDArray[np.float64]:
    """Independent ±1 of ``shape``, one word's lowest bit each."""
    n = int(np.prod(shape, dtype=np.int64))
    bits = _raw(rng, max(n, 1))[:n] & np.uint64(1)
    return (2.0 * bits.astype(np.float64) - 1.0).reshape(shape)


def _finish(value: NDArray[np.float64], size: Any, dtype: Any, out: Any) -> Any:
    if dtype not in (None, np.float64, float, "float64", "f8", "d"):
        raise TypeError("SecureGenerator draws float64 values only.")
    if out is not None:
        out[...] = value
        return out
    if size is None and value.ndim == 0:
        return float(value)
    return value


class SecureGenerator(np.random.Generator):
    """A NumPy Generator on OS-keyed AES-128-CTR whose continuous draws are full-precision.

    Parameters
    ----------
    bit_generator : numpy.random.BitGenerator, optional
        Defaults to :func:`secure_bit_generator` (a fresh OS key, sealed). Tests only:
        anything else is not secure, and :func:`is_os_keyed` says so (secure mode refuses it).

    Notes
    -----
    ``random``, ``standard_normal``, ``normal``, ``standard_exponential``, ``exponential`` and
    ``laplace`` are continuous transforms of :func:`uniform_full` (module docstring): no
    method returns lattice values. Additive privacy noise is not drawn here but by
    :mod:`privpca.mechanisms.noise` (snapped value + exact discrete noise). ``spawn`` returns
    new SecureGenerators with fresh OS keys (never derived from this one).
    """

    def __init__(self, bit_generator: np.random.BitGenerator | None = None) -> None:
        super().__init__(secure_bit_generator() if bit_generator is None else bit_generator)
        # Keyed by privpca from the OS (not a caller's bit generator, which may be seeded):
        # the only generators secure mode lets through (privpca._validation).
        self._os_keyed = bit_generator is None

    def random(self, size: Any = None, dtype: Any = np.float64, out: Any = None) -> Any:
        shape = _shape(size) if out is None else np.shape(out)
        return _finish(uniform_full(self, shape), size, dtype, out)

    def standard_normal(self, size: Any = None, dtype: Any = np.float64,
                        out: Any = None) -> Any:
        shape = _shape(size) if out is None else np.shape(out)
        u = uniform_full(self, shape)
        # Φ⁻¹ on (0, 1/2] only: the lower tail is where the floats are dense.
        z = ndtri(0.5 * u) * _signs(self, u.shape)
        return _finish(np.asarray(z), size, dtype, out)

    def normal(self, loc: Any = 0.0, scale: Any = 1.0, size: Any = None) -> Any:
        shape = _shape(size) if size is not None else np.broadcast_shapes(np.shape(loc),
                                                                            np.shape(scale))
        value = np.asarray(loc + np.asarray(scale) * self.standard_normal(shape))
        return _finish(value, size, None, None)

    def standard_exponential(self, size: Any = None, dtype: Any = np.float64,
                             method: str = "zig", out: Any = None) -> Any:
        shape = _shape(size) if out is None else np.shape(out)
        return _finish(-np.log(uniform_full(self, shape)), size, dtype, out)

    def exponential(self, scale: Any = 1.0, size: Any = None) -> Any:
        shape = _shape(size) if size is not None else np.shape(scale)
        return _finish(np.asarray(np.asarray(scale) * self.standard_exponential(shape)),
                       size, None, None)

    def laplace(self, loc: Any = 0.0, scale: Any = 1.0, size: Any = None) -> Any:
        shape = _shape(size) if size is not None else np.broadcast_shapes(np.shape(loc),
                                                                            np.shape(scale))
        e = np.asarray(self.standard_exponential(shape))
        signed = e * _signs(self, e.shape)
        return _finish(np.asarray(loc + np.asarray(scale) * signed), size, None, None)

    def spawn(self, n_children: int) -> list[SecureGenerator]:  # type: ignore[override]
        return [SecureGenerator() for _ in range(int(n_children))]

    def __reduce__(self) -> Any:
        raise TypeError("A SecureGenerator cannot be pickled: its key must not leave the process.")

    def __repr__(self) -> str:
        if self._os_keyed:
            return "SecureGenerator(AES-128-CTR, OS-keyed)"
        return f"SecureGenerator({type(self.bit_generator).__name__}, caller-supplied key)"

    __str__ = __repr__


def is_os_keyed(rng: Any) -> bool:
    """Whether ``rng`` is a :class:`SecureGenerator` that privpca keyed from the OS itself.

    Checked at each use: the flag set when privpca made the key, and the sealed bit
    generator it made (whose key cannot be replaced). A SecureGenerator built on a caller's
    bit generator (``SecureGenerator(ChaCha(seed=0))``) is not: its stream is as reproducible
    as the seed behind it.
    """
    return (isinstance(rng, SecureGenerator) and bool(getattr(rng, "_os_keyed", False))
            and _SEALED is not None and type(rng.bit_generator) is _SEALED)


def fast_stream(rng: np.random.Generator) -> np.random.Generator:
    """The generator for post-processing draws of a fit whose privacy noise ``rng`` draws.

    Post-processing of released values (bootstraps, random starts of solvers, synthetic
    tables) needs no cryptographic stream and no exact sampler. For a :class:`SecureGenerator`
    it is a PCG64 generator keyed with 256 bits drawn from ``rng`` (unpredictable to whoever
    cannot predict ``rng``); for any other generator it is ``rng`` itself, so seeded runs draw
    exactly what they always drew.
    """
    if not isinstance(rng, SecureGenerator):
        return rng
    entropy = [int(w) for w in _raw(rng, 4)]
    return np.random.Generator(np.random.PCG64(np.random.SeedSequence(entropy)))
