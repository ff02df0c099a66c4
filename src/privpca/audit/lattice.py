"""Lattice attacks on released floats: is a released vector proportional to a short integer
vector?

Why
---
A sampler whose ``standard_normal`` returns ``2^-30·K`` (``K`` an
integer, ``|K| ≈ 2^30``). The exact Bingham sampler (Kent, Ganeiber & Mardia, ``k = 1``)
releases ``v = ±U·(z/‖z‖)`` with ``zᵢ = 2^-30·Kᵢ·sᵢ``, where ``U`` (the eigenvectors of the
exponent matrix ``B = ε/(2D²)·XᵀX``) and the scales ``sᵢ = 1/√(1 + 2aᵢ/b)`` are functions of
the table. An adversary who knows every record but one rebuilds ``(U, s)`` for each candidate
table and computes ``w = Uᵀv / s``: under the true table ``w`` is proportional to the integer
vector ``K`` (up to float rounding, ~2⁻⁵⁰ relative), under the other it is not. A *lattice
reduction* finds a short integer vector proportional to ``w`` when one exists: ``p`` ratios
known to ~50 bits each pin ``p`` integers of ~31 bits, so for ``p ≥ 3`` the true ``K`` is far
shorter than any vector a generic ``w`` admits. The attack was right 40 of 40 times.

What this module provides
-------------------------
* :func:`lll_reduce`: exact integral LLL (Cohen, *A Course in Computational Algebraic Number
  Theory*, Algorithm 2.6.7, de Weger's all-integer version) on Python integers. It is written
  here because no well-kept dependency of privpca offers LLL (``sympy``'s
  ``DomainMatrix.lll`` and ``fpylll`` are not dependencies; a dozen-dimensional reduction in
  pure Python integers takes milliseconds).
* :func:`proportional_lattice` and :func:`short_vector_score`: the embedding of a float vector
  ``w`` at precision ``2^bits`` and ``log₂(shortest reduced vector / Gaussian heuristic)``:
  about 0 for a generic ``w``, clearly negative (≤ −3) when ``w`` is proportional to an integer
  vector shorter than the precision allows to arise by chance.
* :func:`lattice_score`: the score minimised over a few precisions (the relative precision of
  ``w`` is not known in advance).
* :func:`kgm_map` and :func:`bingham_distinguisher`: the lattice attack on the exact
  sampler (rebuild its public map for each candidate table; keep the candidate under which the
  released vector is on the lattice).

The embedding
-------------
For ``w ∈ ℝ^d`` with largest coordinate ``w_J``, let ``Wᵢ = round(2^bits·wᵢ/|w_J|)`` (so
``W_J = ±2^bits``). The lattice is spanned by the rows ``e_J ⊕ (Wᵢ)_{i≠J}`` and
``eᵢ ⊕ (−W_J·e'ᵢ)`` (``i ≠ J``) in ``ℤ^{2d−1}``; an integer vector ``K`` maps to
``K ⊕ (K_J·Wᵢ − Kᵢ·W_J)_{i≠J}``, whose second part is 0 up to rounding exactly when ``K`` is
proportional to ``w``. The lattice has rank ``d`` and volume ``vol`` (``vol² = det`` of the
basis's Gram matrix, an integer); its expected shortest vector (Gaussian heuristic) is
``GH = Γ(d/2 + 1)^{1/d}·vol^{1/d}/√π ≈ 2^{bits·(d−1)/d}``. A vector ``K`` of ``L`` bits
proportional to ``w`` (to relative precision ``η``) gives a lattice vector of length about
``2^L·(1 + 2^bits·η)``, so the score is about ``L − bits·(d−1)/d`` at ``bits ≈ −log₂ η``:
negative when ``L < (d−1)/d·log₂(1/η)``. For a generic ``w`` (no such ``K``) the shortest
vector is near ``GH``: ``P(score < −t) ≈ 2^{−t·d}`` for a random lattice, and LLL's first
vector is within ``2^{(d−1)/2}`` of the shortest (in practice, at ``d ≤ 10``, nearly the
shortest).

What it cannot see
------------------
Two coordinates carry at most ~53 bits, which ``2^30``-sized integers (60 bits for a ratio)
exceed: a 2-vector is never flagged (:data:`MIN_DIM`). A lattice with an *offset*
(``c + g·K``) is the float probe's concern (:mod:`privpca.audit.probe`), not this one's. And
a float vector itself is always ``2^e·M`` with 53-bit integers ``M``: the score is negative
only for structure coarser than the floats (``L`` below about ``(d−1)/d·52`` bits).
Coordinates below ``2^-SMALL_BITS`` of the largest are left out (a tiny coordinate carries
fewer bits than the heuristic assumes and would bias the score low), so a lattice shown only
by very small coordinates is not seen either.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction

import numpy as np
import scipy.linalg
import scipy.optimize
from numpy.typing import ArrayLike, NDArray

__all__ = [
    "DEFAULT_LATTICE_BITS",
    "LATTICE_THRESHOLD",
    "MAX_DIM",
    "MIN_DIM",
    "SMALL_BITS",
    "BinghamGuess",
    "LatticeScore",
    "bingham_distinguisher",
    "gaussian_heuristic_log2",
    "kgm_map",
    "lattice_score",
    "lll_reduce",
    "proportional_lattice",
    "short_vector_score",
    "short_vector_scores",
    "vector_lattice_score",
]

#: The precisions ``2^bits`` tried by :func:`lattice_score` (the best is near ``−log₂ η``,
#: the relative precision of the vector: 2⁻⁵³ for a float as released, ~2⁻⁵⁰ after a map).
DEFAULT_LATTICE_BITS: tuple[int, ...] = (24, 36, 44, 48, 50, 52)
#: A score below ``−LATTICE_THRESHOLD`` (a reduced vector 2^t times shorter than expected)
#: counts as "on a lattice": a random lattice of rank d has one with probability ≈ 2^{−t·d}.
LATTICE_THRESHOLD = 4.0
#: Coordinates a test reads at once: vectors longer than this are cut into consecutive blocks
#: (a sub-vector of an integer vector is an integer vector).
MAX_DIM = 8
#: Fewer coordinates carry too few bits to pin a 2^30 lattice (see the module docstring).
MIN_DIM = 3
#: Coordinates below ``2^-SMALL_BITS`` times the largest are left out of a test.
SMALL_BITS = 12


# --------------------------------------------------------------------------- LLL


def _round_div(a: int, b: int) -> int:
    """``round(a/b)`` for integers, ``b > 0`` (halves up)."""
    return (2 * a + b) // (2 * b)


def lll_reduce(basis: Sequence[Sequence[int]], delta: Fraction = Fraction(99, 100)
               ) -> tuple[list[list[int]], list[int]]:
    """LLL-reduce the rows of an integer basis, exactly (Cohen's Algorithm 2.6.7).

    Parameters
    ----------
    basis : sequence of sequences of int
        ``n`` linearly independent rows in ``ℤ^m``.
    delta : Fraction, default=99/100
        Lovász's parameter, in (1/4, 1].

    Returns
    -------
    reduced : list of list of int
        The reduced rows (same lattice): size-reduced (``|μᵢⱼ| ≤ 1/2``) and
        ``‖bₖ*‖² ≥ (δ − μ²ₖ,ₖ₋₁)‖bₖ₋₁*‖²``.
    d : list of int
        ``d[i]`` (``i = 0..n``): the Gram determinant of the first ``i`` reduced rows
        (``d[0] = 1``; ``d[n]`` is the squared volume of the lattice).

    Raises
    ------
    ValueError
        When the rows are linearly dependent.
    """
    b = [[int(x) for x in row] for row in basis]
    n = len(b)
    if n == 0:
        return [], [1]
    num, den = Fraction(delta).numerator, Fraction(delta).denominator
    if not Fraction(1, 4) < Fraction(num, den) <= 1:
        raise ValueError(f"delta must be in (1/4, 1]. Got {delta!r} instead.")

    def dot(u: list[int], v: list[int]) -> int:
        return sum(x * y for x, y in zip(u, v, strict=True))

    # 1-based bookkeeping as in Cohen: d[0..n], lam[k][j] for j < k (lam[k][j] = d_j·μ_kj).
    d = [1] + [0] * n
    lam = [[0] * (n + 1) for _ in range(n + 1)]
    d[1] = dot(b[0], b[0])
    if d[1] == 0:
        raise ValueError("lll_reduce: the rows are linearly dependent.")
    k, k_max = 2, 1

    def redi(k: int, j: int) -> None:
        """Size-reduce row k against row j < k."""
        if 2 * abs(lam[k][j]) <= d[j]:
            return
        q = _round_div(lam[k][j], d[j])
        bk, bj = b[k - 1], b[j - 1]
        for t in range(len(bk)):
            bk[t] -= q * bj[t]
        lam[k][j] -= q * d[j]
        for i in range(1, j):
            lam[k][i] -= q * lam[j][i]

    def swapi(k: int) -> None:
        b[k - 1], b[k - 2] = b[k - 2], b[k - 1]
        for j in range(1, k - 1):
            lam[k][j], lam[k - 1][j] = lam[k - 1][j], lam[k][j]
        lk = lam[k][k - 1]
        B = (d[k - 2] * d[k] + lk * lk) // d[k - 1]
        for i in range(k + 1, k_max + 1):
            t = lam[i][k]
            lam[i][k] = (d[k] * lam[i][k - 1] - lk * t) // d[k - 1]
            lam[i][k - 1] = (B * t + lk * lam[i][k]) // d[k]
        d[k - 1] = B

    while k <= n:
        if k > k_max:
            k_max = k
            for j in range(1, k + 1):
                u = dot(b[k - 1], b[j - 1])
                for i in range(1, j):
                    u = (d[i] * u - lam[k][i] * lam[j][i]) // d[i - 1]
                if j < k:
                    lam[k][j] = u
                else:
                    if u == 0:
                        raise ValueError("lll_reduce: the rows are linearly dependent.")
                    d[k] = u
        while True:
            redi(k, k - 1)
            lk = lam[k][k - 1]
            if den * d[k] * d[k - 2] < num * d[k - 1] ** 2 - den * lk * lk:
                swapi(k)
                k = max(2, k - 1)
                continue
            for j in range(k - 2, 0, -1):
                redi(k, j)
            k += 1
            break
    return b, d


# --------------------------------------------------------------------------- scores


def gaussian_heuristic_log2(rank: int, log2_volume: float) -> float:
    """``log₂`` of the Gaussian heuristic ``Γ(n/2 + 1)^{1/n}·vol^{1/n}/√π`` (rank n)."""
    n = int(rank)
    return (math.lgamma(n / 2.0 + 1.0) / math.log(2.0) + log2_volume) / n - 0.5 * math.log2(
        math.pi)


def proportional_lattice(w: ArrayLike, bits: int) -> list[list[int]]:
    """The basis (rows, in ``ℤ^{2d−1}``) whose short vectors are the integer vectors
    proportional to ``w`` at precision ``2^bits`` (module docstring). ``w`` must be finite
    with a nonzero coordinate; its scale and sign do not matter."""
    x = [float(v) for v in np.ravel(np.asarray(w, dtype=np.float64))]
    d = len(x)
    if d < 2 or not all(math.isfinite(v) for v in x):
        raise ValueError("w must hold at least two finite numbers.")
    J = max(range(d), key=lambda i: abs(x[i]))
    if x[J] == 0.0:
        raise ValueError("w must have a nonzero coordinate.")
    top = Fraction(abs(x[J]))
    scale = 2 ** int(bits)
    W = [round(Fraction(v) * scale / top) for v in x]  # exact: floats are dyadic rationals
    others = [i for i in range(d) if i != J]
    rows = []
    for i in range(d):
        row = [0] * (2 * d - 1)
        row[i] = 1
        if i == J:
            for c, o in enumerate(others):
                row[d + c] = W[o]
        else:
            row[d + others.index(i)] = -W[J]
        rows.append(row)
    return rows


@dataclass(frozen=True)
class LatticeScore:
    """One reduction: ``score = log₂(shortest / GH)``, the shortest reduced vector's integer
    part (the ``K`` found, proportional to ``w`` when the score is very negative) and
    ``bits``."""

    score: float
    bits: int
    vector: tuple[int, ...]


def _score(reduced: list[list[int]], d: list[int], bits: int) -> LatticeScore:
    rank = len(reduced)
    norms = [sum(v * v for v in row) for row in reduced]
    i = min(range(rank), key=lambda j: norms[j])
    log2_short = 0.5 * math.log2(norms[i])
    gh = gaussian_heuristic_log2(rank, 0.5 * math.log2(d[rank]))
    return LatticeScore(log2_short - gh, int(bits), tuple(reduced[i][:rank]))


def short_vector_score(w: ArrayLike, bits: int) -> LatticeScore:
    """``log₂`` of the shortest LLL-reduced vector of :func:`proportional_lattice` over the
    Gaussian heuristic of that lattice: near 0 (mostly within ±1) for a generic ``w``,
    about ``L − bits·(d−1)/d`` for a ``w`` proportional to an ``L``-bit integer vector."""
    reduced, d = lll_reduce(proportional_lattice(w, bits))
    return _score(reduced, d, bits)


def short_vector_scores(w: ArrayLike, bits: Sequence[int] = DEFAULT_LATTICE_BITS
                        ) -> list[LatticeScore]:
    """:func:`short_vector_score` at every precision of ``bits`` (in increasing order),
    progressively: each reduction starts from the previous one's unimodular transform (the
    first ``d`` coordinates of the reduced rows), which is nearly reduced already at the next
    precision; the scores are those of the same lattices, only found faster."""
    x = np.ravel(np.asarray(w, dtype=np.float64))
    n = x.size
    out: list[LatticeScore] = []
    T: list[list[int]] | None = None
    for b in sorted({int(v) for v in bits}):
        basis = proportional_lattice(x, b)
        if T is not None:  # rows T·basis: T in the identity block, T·M in the other
            M = [row[n:] for row in basis]
            basis = [t + [sum(t[k] * M[k][c] for k in range(n) if t[k])
                          for c in range(n - 1)] for t in T]
        reduced, d = lll_reduce(basis)
        T = [row[:n] for row in reduced]
        out.append(_score(reduced, d, b))
    return out


def _significant(x: NDArray[np.float64]) -> NDArray[np.float64]:
    """The coordinates of at least ``2^-SMALL_BITS`` times the largest magnitude."""
    top = float(np.max(np.abs(x))) if x.size else 0.0
    return x[np.abs(x) >= math.ldexp(top, -SMALL_BITS)] if top > 0 else x[:0]


def lattice_score(w: ArrayLike, bits: Sequence[int] = DEFAULT_LATTICE_BITS) -> float:
    """:func:`short_vector_score` minimised over the precisions ``bits``, on the coordinates
    of ``w`` of at least ``2^-SMALL_BITS`` times its largest (a tiny coordinate carries
    fewer bits than the heuristic assumes and biases the score low; a sub-vector of an
    integer vector is an integer vector). NaN when ``w`` has a non-finite coordinate or
    fewer than two such coordinates."""
    x = np.ravel(np.asarray(w, dtype=np.float64))
    if not np.all(np.isfinite(x)):
        return math.nan
    x = _significant(x)
    if x.size < 2:
        return math.nan
    return min(s.score for s in short_vector_scores(x, bits))


def vector_lattice_score(v: ArrayLike, bits: Sequence[int] = DEFAULT_LATTICE_BITS,
                         max_dim: int = MAX_DIM, min_dim: int = MIN_DIM) -> float:
    """The lowest :func:`lattice_score` over consecutive blocks of at most ``max_dim``
    coordinates of ``v`` (the last block is the last ``max_dim``), each with at least
    ``min_dim`` coordinates of at least ``2^-SMALL_BITS`` times the largest of ``v`` (zeros
    and tiny ones are dropped: see :func:`lattice_score`). NaN when no block qualifies or
    ``v`` is not finite."""
    x = np.ravel(np.asarray(v, dtype=np.float64))
    if not np.all(np.isfinite(x)):
        return math.nan
    x = _significant(x)
    if x.size < min_dim:
        return math.nan
    starts = list(range(0, max(x.size - max_dim, 0) + 1, max_dim))
    if starts[-1] + max_dim < x.size:
        starts.append(x.size - max_dim)
    return min(lattice_score(x[s:s + max_dim], bits) for s in starts)


# --------------------------------------------------------------- the exact sampler's attack


def kgm_map(exponent: ArrayLike) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """The public map of Kent–Ganeiber–Mardia's exact sampler for ``exp(vᵀBv)``: ``(U, s)``
    with ``U`` the eigenvectors of ``B`` (columns) and ``s = 1/√(1 + 2a/b)``, ``a = λ_max − λ``
    and ``b`` the root of ``Σ 1/(b + 2aᵢ) = 1`` — computed as ``sample_bingham_exact`` does
    (LAPACK's ``syevd`` through ``scipy.linalg.eigh``; the same bracketed root), so that a
    proposal ``z = s∘g`` and its released direction ``U·z/‖z‖`` give ``Uᵀv/s ∝ g``.

    This is the attacker's side of the lattice attack: a function of the table, rebuilt for each
    candidate neighbour. Eigenvector signs do not matter to the attack."""
    B = np.asarray(exponent, dtype=np.float64)
    lam, U = scipy.linalg.eigh(B, check_finite=False)
    a = lam.max() - lam
    q = a.size

    def f(b: float) -> float:
        return float(np.sum(1.0 / (b + 2.0 * a))) - 1.0

    if f(float(q)) >= 0.0:
        b = float(q)
    else:
        b = float(scipy.optimize.brentq(f, 1e-300, float(q), xtol=1e-15, rtol=1e-14))
    return np.asarray(U), np.asarray(1.0 / np.sqrt(1.0 + 2.0 * a / b))


@dataclass(frozen=True)
class BinghamGuess:
    """The distinguisher's answer: ``index`` of the candidate it keeps (lowest score) and
    every candidate's :func:`lattice_score` of ``Uᵀv/s``."""

    index: int
    scores: tuple[float, ...]


def bingham_distinguisher(
    v: ArrayLike,
    candidates: Sequence[tuple[ArrayLike, ArrayLike]],
    bits: Sequence[int] = DEFAULT_LATTICE_BITS,
) -> BinghamGuess:
    """Which candidate table produced the released unit vector ``v``?

    Parameters
    ----------
    v : array-like of shape (p,)
        The released direction (either sign).
    candidates : sequence of ``(U, s)``
        For each candidate table, the sampler's public map (:func:`kgm_map` of its exponent
        matrix): eigenvectors ``U`` (columns) and proposal scales ``s``.
    bits : sequence of int
        Precisions tried (:func:`lattice_score`).

    Returns
    -------
    BinghamGuess
        The candidate under which ``w = Uᵀv/s`` is closest to a short integer vector.
    """
    x = np.ravel(np.asarray(v, dtype=np.float64))
    scores = []
    for U, s in candidates:
        w = (np.asarray(U, dtype=np.float64).T @ x) / np.ravel(np.asarray(s, dtype=np.float64))
        scores.append(lattice_score(w, bits))
    finite = [sc if math.isfinite(sc) else math.inf for sc in scores]
    return BinghamGuess(int(np.argmin(finite)), tuple(float(sc) for sc in scores))
