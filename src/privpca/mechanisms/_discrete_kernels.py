"""Compiled (numba) exact samplers of the discrete Laplace and Gaussian laws.

Canonne, Kamath & Steinke 2020 ("The Discrete Gaussian for Differential Privacy"),
Algorithms 1–3, one draw at a time:

* geometric ``g ≥ 0`` with ``P(g) ∝ exp(−g/t)``: a remainder ``b`` uniform on ``[0, M)``,
  ``M = ⌊t⌋``, accepted with probability ``e^(−b/t)``, plus ``M`` times a quotient counted by
  Bernoulli(e^(−M/t)) trials — nothing is truncated;
* discrete Laplace: a sign and a geometric magnitude, the negative zero rejected;
* discrete Gaussian: discrete Laplace proposals with ``t = ⌊σ⌋ + 1``, each kept with
  probability ``exp(−(|y| − σ²/t)²/(2σ²))``.

Randomness: 53-bit words, read first from ``words`` (raw 64-bit words drawn in bulk by the
caller from the secure bit generator, shifted right by 11 here) and, should they run out, from
``rng.random()·2⁵³`` (the same bit generator, one word at a time), so the stream is never cut
and no draw is abandoned. A Bernoulli(p) trial keeps a word below ``p·2⁵³`` (off by at most
2⁻⁵³); a uniform integer below ``M ≤ 2⁵²`` takes the word's top bits and rejects values
``≥ M``; a sign is a word's lowest bit. The caller holds the bit generator's lock.
"""

from __future__ import annotations

import math
from typing import Any

import numba
import numpy as np

_JIT: dict[str, Any] = {"cache": True, "nogil": True, "error_model": "numpy"}
_TWO_53 = 9007199254740992.0


@numba.njit(inline="always", **_JIT)
def _word(words: np.ndarray, pos: int, rng: np.random.Generator) -> tuple[Any, int]:
    """The next 53-bit word and the new position in ``words``."""
    if pos < words.size:
        return np.int64(words[pos] >> np.uint64(11)), pos + 1
    return np.int64(rng.random() * _TWO_53), pos


@numba.njit(inline="always", **_JIT)
def _laplace(words: np.ndarray, pos: int, rng: np.random.Generator, m: int, shift: int,
             inv_t: float, go_on: float) -> tuple[int, int]:
    """One discrete Laplace draw (parameter ``t = 1/inv_t``, ``m = ⌊t⌋``) and the position."""
    while True:
        while True:  # the remainder b, accepted with probability e^(−b/t)
            w, pos = _word(words, pos, rng)
            b = w >> shift
            if b >= m:
                continue
            w, pos = _word(words, pos, rng)
            if w < math.exp(-b * inv_t) * _TWO_53:
                break
        g = b
        while True:  # plus m for every success of a Bernoulli(e^(−m/t)) trial
            w, pos = _word(words, pos, rng)
            if w >= go_on:
                break
            g += m
        w, pos = _word(words, pos, rng)
        if (w & 1) == 0:
            return g, pos
        if g != 0:  # −0 rejected: 0 keeps the weight of one sign
            return -g, pos


@numba.njit(**_JIT)
def _constants(t: float) -> tuple[int, int, float, float]:
    """``m = ⌊t⌋``, the shift that leaves ``⌈log₂ m⌉`` bits of a word, ``1/t`` and the quotient's
    Bernoulli threshold ``e^(−m/t)·2⁵³``."""
    m = math.floor(t)
    bits = 1
    while (1 << bits) < m:
        bits += 1
    return m, 53 - bits, 1.0 / t, math.exp(-m / t) * _TWO_53


@numba.njit(**_JIT)
def discrete_laplace_kernel(words: np.ndarray, rng: np.random.Generator, t: float,
                            n: int) -> np.ndarray:
    """``n`` integers with ``P(K = k) ∝ exp(−|k|/t)``, ``1 ≤ t < 2⁵²``."""
    m, shift, inv_t, go_on = _constants(t)
    out = np.empty(n, dtype=np.int64)
    pos = 0
    for i in range(n):
        out[i], pos = _laplace(words, pos, rng, m, shift, inv_t, go_on)
    return out


@numba.njit(**_JIT)
def discrete_gaussian_kernel(words: np.ndarray, rng: np.random.Generator, sigma: float,
                             n: int) -> np.ndarray:
    """``n`` integers with ``P(K = k) ∝ exp(−k²/(2σ²))``, ``1 ≤ σ < 2⁵²``."""
    t = math.floor(sigma) + 1.0
    m, shift, inv_t, go_on = _constants(t)
    s2 = sigma * sigma
    centre = s2 / t
    out = np.empty(n, dtype=np.int64)
    pos = 0
    for i in range(n):
        while True:
            y, pos = _laplace(words, pos, rng, m, shift, inv_t, go_on)
            dev = abs(y) - centre
            w, pos = _word(words, pos, rng)
            if w < math.exp(-dev * dev / (2.0 * s2)) * _TWO_53:
                out[i] = y
                break
    return out
