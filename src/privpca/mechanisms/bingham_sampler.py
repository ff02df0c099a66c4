"""Samplers for the matrix Bingham distribution on the Stiefel manifold: the exponential
mechanism's draws.

BinghamPCA (:mod:`privpca.decomposition.bingham`) releases a basis drawn from the Bingham law
of the clipped Gram matrix scaled by ``ε/(2D²)``: the exponential mechanism, whose privacy is
the law these samplers draw from. They live in :mod:`privpca.mechanisms` because every draw
here is privacy randomness (``tests/test_noise_release.py`` bans generator draws outside this
package); the numerics below are unchanged from when they lived in ``privpca.solvers``.

The target is the law on ``V_{k,p} = {V ∈ ℝ^{p×k} : VᵀV = I_k}`` with density

    p(V) ∝ exp(tr(Vᵀ B V))      (with respect to the uniform, Haar, measure)

for a symmetric ``B = U diag(λ) Uᵀ``. Every sampler here works in the eigen-coordinates
``W = UᵀV``, where the density is ``exp(Σᵢ λᵢ ‖wᵢ‖²)`` (``wᵢ`` the i-th *row* of ``W``), and
takes ``(eigenvalues, eigenvectors)`` so one eigendecomposition of ``B`` serves everything.

Samplers
--------
:func:`sample_bingham_gibbs`
    Hoff's (2009) Gibbs sampler. Two block schemes, both exact Gibbs updates:

    * ``update="column"`` — Hoff's own scheme, as in the R package ``rstiefel``
      (``rbing.matrix.gibbs``): each column ``vⱼ`` given the others is a vector Bingham on the
      sphere of the orthogonal complement ``N`` of the other ``k − 1`` columns, with matrix
      ``NᵀBN``; rotate to the eigenbasis of ``NᵀBN`` and run one sweep of Hoff's coordinate
      updates (below). This needs an ``eigh`` of a ``(p − k + 1)``-square matrix per column,
      ``O(k p³)`` per sweep. For ``k = 1`` there is no complement and no ``eigh``.
    * ``update="row"`` (default) — the same coordinate updates applied to the *rows* of ``W``,
      which needs no eigendecomposition at all: ``O(p k³)`` per sweep. Derivation: write
      ``W = [x; Y]`` (row i and the rest). Given ``x``, ``YᵀY = C(x) = I − xᵀx``, so
      ``Y = Z C(x)^{1/2}`` with ``Z ∈ V_{k,p−1}``; under the Haar measure ``x`` has density
      ``(1 − ‖x‖²)^{(p−k−2)/2}`` on the unit ball and ``Z`` is Haar and independent of ``x``
      (the left action of ``O(p − 1)`` on the rest fixes ``x`` and is transitive on
      ``V_{k,p−1}``). The target becomes ``exp(λᵢ‖x‖² + tr(G) − xGxᵀ)``, ``G = ZᵀΛ₋ᵢZ``, so
      the Gibbs update of ``x`` given ``Z`` samples the density
      ``(1 − ‖x‖²)^{(p−k−2)/2} exp(x(λᵢI − G)xᵀ)`` on the ball — which is the law of the first
      ``k`` coordinates of a vector Bingham on ``S^{p−1}`` with matrix
      ``diag(α₁..α_k, 0, …, 0)`` in the eigenbasis of ``λᵢI − G`` (a ``k × k`` ``eigh``).
      Hoff's coordinate updates on those ``k`` coordinates leave it invariant; the rest is
      mapped along by ``Y ← Y C(x_old)^{-1/2} C(x_new)^{1/2}``. For ``k = 1`` the row and the
      column schemes are the same algorithm: Hoff's vector sweep in the eigenbasis of ``B``.

    Hoff's coordinate update (his ``ry_bing``): for a unit vector ``y`` with density
    ``exp(Σ μⱼ yⱼ²)`` on ``S^{m−1}``, coordinate ``j`` given the direction of the others has
    ``θ = yⱼ²`` with density ``∝ θ^{−1/2} (1 − θ)^{(m−3)/2} exp(aθ)``,
    ``a = μⱼ − Σ_{l≠j} μ_l y_l² / (1 − yⱼ²)``; ``θ`` is drawn exactly by rejection
    (:func:`_draw_theta`), the sign of ``yⱼ`` uniformly, and the others are rescaled.

    The sweeps run compiled (numba, :mod:`privpca.mechanisms._bingham_kernels`): line-for-line
    ports of the pure-Python sweeps below (``_row_sweep``, ``_ball_sweep``, ``_vector_sweep``,
    ``_draw_theta``), which stay as the readable reference. Both draw the same numbers in the
    same order and use the same eigenbasis convention, so for a given Generator state the
    compiled chain *is* the reference chain up to rounding (tested), except on the circle
    (``K = 1/2``: a different exact sampler than NumPy's von Mises). The eigenbasis
    convention (``_fix_columns``) pins the seeded outputs of the ``"row"`` scheme with
    ``k ≥ 2``; another convention would draw other numbers from the same law.

:func:`sample_bingham_exact`
    Exact sampler for ``k = 1`` (Kent, Ganeiber & Mardia 2018): angular central Gaussian
    proposals with rejection, in vectorised batches, under a proposal budget.

Mixing diagnostics
------------------
:func:`effective_sample_size`, :func:`split_rhat`, :func:`geweke_z` and
:func:`mixing_diagnostics` act on traces of a scalar summary (the samplers record
``tr(WᵀΛW) = tr(VᵀBV)`` after every sweep).

References
----------
P. D. Hoff. Simulation of the matrix Bingham–von Mises–Fisher distribution, with applications
to multivariate and relational data. JCGS 18(2), 2009.
J. T. Kent, A. M. Ganeiber, K. V. Mardia. A new unified approach for the simulation of a wide
class of directional distributions. JCGS 27(2), 2018.
A. Vehtari, A. Gelman, D. Simpson, B. Carpenter, P.-C. Bürkner. Rank-normalization, folding,
and localization: an improved R̂ for assessing convergence of MCMC. Bayesian Analysis, 2021.
J. Geweke. Evaluating the accuracy of sampling-based approaches to the calculation of
posterior moments. Bayesian Statistics 4, 1992.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.linalg
import scipy.optimize
import scipy.special
from numpy.typing import ArrayLike, NDArray
from scipy.linalg import lapack
from threadpoolctl import threadpool_limits

from privpca.mechanisms.randomness import check_noise_rng

__all__ = [
    "BinghamGibbsResult",
    "ExactBinghamResult",
    "ProposalBudgetExceededError",
    "effective_sample_size",
    "geweke_z",
    "mixing_diagnostics",
    "sample_bingham_exact",
    "sample_bingham_gibbs",
    "sample_haar",
    "split_rhat",
]

UPDATES = ("row", "column")

_LOG_HALF_SQRT2 = 0.5 * math.log(2.0)
_syev = lapack.dsyev  # k×k eigh without numpy.linalg's per-call overhead


class ProposalBudgetExceededError(RuntimeError):
    """The exact (rejection) sampler used its whole proposal budget without an acceptance."""


# --------------------------------------------------------------------------------------------
# One-dimensional conditional: θ with density ∝ θ^{-1/2} (1 − θ)^{K−1} exp(aθ) on (0, 1)
# --------------------------------------------------------------------------------------------


def _draw_theta(a: float, K: float, rng: np.random.Generator) -> tuple[float, float]:
    """Exact draw of ``(θ, 1 − θ)``, θ ∝ ``θ^{-1/2}(1 − θ)^{K−1}e^{aθ}`` on (0, 1).

    ``K = (m − 1)/2`` for a coordinate of a vector on ``S^{m−1}`` (``m ≥ 2``). ``1 − θ`` is
    returned separately because it is the accurate quantity when θ is close to 1. In
    ``y = √θ`` the density is ``h(y) ∝ (1 − y²)^{K−1} e^{a y²}`` on (0, 1). Regimes:

    * ``K = 1/2`` (the circle): ``θ = (1 − cos ψ)/2`` with ``ψ`` von Mises — exact, no rejection.
    * ``a ≤ K − 1`` (mode at 0): ``h(y) ≤ exp(−(K − 1 − a) y²)`` because
      ``log(1 − y²) ≤ −y²``: half-normal (or uniform, when that bound is flat) proposals.
    * ``a ≥ 2K + 10`` (mass near θ = 1): in ``s = 1 − θ`` the density is
      ``(1 − s)^{-1/2} s^{K−1} e^{−as}``; on ``s ≤ 1/2`` it is below the Gamma kernel
      ``s^{K−1} e^{−(a−1)s}`` (``(1 − s)^{-1/2} e^{−s} ≤ 1`` there), on ``s > 1/2`` below
      ``(1 − s)^{-1/2} max s^{K−1}e^{−as}``: a two-piece mixture envelope.
    * otherwise: a piecewise-constant envelope on a grid around the mode (``h`` is unimodal on
      (0, 1), so each cell's maximum sits at the end nearer the mode) — exact for any ``a``.
    """
    if K == 0.5:
        psi = rng.vonmises(math.pi if a >= 0.0 else 0.0, abs(a) / 2.0)
        c = math.cos(psi)
        return 0.5 * (1.0 - c), 0.5 * (1.0 + c)
    km1 = K - 1.0
    if a <= km1:
        tau = 2.0 * (km1 - a)
        if tau < 4.0:
            for _ in range(100_000):
                y = rng.random()
                y2 = y * y
                if math.log(1.0 - rng.random()) <= km1 * math.log1p(-y2) + a * y2:
                    return y2, (1.0 - y) * (1.0 + y)
        else:
            sd = 1.0 / math.sqrt(tau)
            for _ in range(100_000):
                y = abs(rng.standard_normal()) * sd
                if y >= 1.0:
                    continue
                y2 = y * y
                if math.log(1.0 - rng.random()) <= km1 * (math.log1p(-y2) + y2):
                    return y2, (1.0 - y) * (1.0 + y)
        raise RuntimeError(f"theta sampler failed (a={a!r}, K={K!r}); please report")
    if a >= 2.0 * K + 10.0:
        b = a - 1.0
        log_w1 = math.lgamma(K) - K * math.log(b)
        s_top = min(max(km1 / a, 0.5), 1.0)
        log_m2 = (km1 * math.log(s_top) if km1 > 0.0 else 0.0) - a * s_top
        log_w2 = log_m2 + _LOG_HALF_SQRT2
        diff = log_w2 - log_w1
        p1 = 0.0 if diff > 700.0 else 1.0 / (1.0 + math.exp(diff))
        for _ in range(100_000):
            if rng.random() < p1:
                s = rng.gamma(K, 1.0 / b)
                if s > 0.5:
                    continue
                if math.log(1.0 - rng.random()) <= -0.5 * math.log1p(-s) - s:
                    return 1.0 - s, s
            else:
                u = rng.random()
                v = 0.5 * u * u  # v = 1 − s, density ∝ v^{-1/2} on (0, 1/2)
                s = 1.0 - v
                log_h = (km1 * math.log(s) if km1 > 0.0 else 0.0) - a * s
                if math.log(1.0 - rng.random()) <= log_h - log_m2:
                    return v, s
        raise RuntimeError(f"theta sampler failed (a={a!r}, K={K!r}); please report")
    return _draw_theta_grid(a, K, rng)


_GRID_STEPS = np.concatenate((np.arange(0.0, 4.0, 0.25), 4.0 * 1.5 ** np.arange(0, 70)))


def _draw_theta_grid(a: float, K: float, rng: np.random.Generator) -> tuple[float, float]:
    """The general exact branch of :func:`_draw_theta`: a grid envelope around the mode."""
    km1 = K - 1.0
    if km1 <= 0.0:  # K = 1: h = e^{a y²}, monotone
        mode = 1.0 if a > 0.0 else 0.0
        sig = min(1.0, 1.0 / (2.0 * abs(a))) if a != 0.0 else 1.0
    elif a > km1:
        mode = math.sqrt(max(0.0, 1.0 - km1 / a))
        curv = math.sqrt(km1) / (2.0 * a * mode) if mode > 0.0 else 1.0
        sig = min(curv, (2.0 / km1) ** 0.25, 1.0)
    else:
        mode = 0.0
        curv = 1.0 / math.sqrt(2.0 * (km1 - a)) if km1 > a else 1.0
        sig = min(curv, (2.0 / km1) ** 0.25, 1.0)
    left = mode - sig * _GRID_STEPS
    right = mode + sig * _GRID_STEPS[1:]
    pts = np.unique(np.concatenate(([0.0, 1.0], left[left > 0.0], right[right < 1.0], [mode])))

    def log_h(y: NDArray[np.float64]) -> NDArray[np.float64]:
        y2 = y * y
        if km1 > 0.0:
            with np.errstate(divide="ignore"):
                return np.asarray(km1 * np.log1p(-y2) + a * y2)
        return np.asarray(a * y2)

    lh = log_h(pts)
    mid = 0.5 * (pts[:-1] + pts[1:])
    cell_max = np.where(mid < mode, lh[1:], lh[:-1])
    width = np.diff(pts)
    log_w = np.log(np.maximum(width, 1e-300)) + cell_max
    prob = np.exp(log_w - log_w.max())
    cdf = np.cumsum(prob)
    cdf /= cdf[-1]
    last = width.size - 1
    for _ in range(100_000):
        u = rng.random(3)
        c = min(int(np.searchsorted(cdf, u[0])), last)
        y = float(pts[c] + u[1] * width[c])
        if y >= 1.0:
            continue
        y2 = y * y
        val = (km1 * math.log1p(-y2) if km1 > 0.0 else 0.0) + a * y2
        if math.log(1.0 - u[2]) <= val - cell_max[c]:
            return y2, (1.0 - y) * (1.0 + y)
    raise RuntimeError(f"theta sampler failed (a={a!r}, K={K!r}); please report")


# --------------------------------------------------------------------------------------------
# Hoff's coordinate sweeps
# --------------------------------------------------------------------------------------------


def _vector_sweep(
    y: NDArray[np.float64], mu: NDArray[np.float64], rng: np.random.Generator
) -> NDArray[np.float64]:
    """One random-scan sweep of Hoff's coordinate updates for ``exp(Σ μⱼ yⱼ²)`` on ``S^{m−1}``.

    Runs in O(m) with lazily scaled squares ``tⱼ = g·t̃ⱼ`` and running sums; the rest's mass
    and weighted sum are recomputed exactly for the (at most one) coordinate holding more than
    half the mass, where ``1 − tⱼ`` would cancel.
    """
    m = y.shape[0]
    if m == 1:
        return np.array([1.0 if rng.random() < 0.5 else -1.0])
    K = 0.5 * (m - 1)
    tt = (y * y).tolist()
    sgn = np.where(y < 0.0, -1.0, 1.0).tolist()
    mul = mu.tolist()
    g = 1.0
    tot = math.fsum(tt)
    wsum = math.fsum(mj * tj for mj, tj in zip(mul, tt, strict=True))
    order = rng.permutation(m).tolist()
    flips = (np.asarray(rng.random(m)) < 0.5).tolist()
    for j in order:
        tj = tt[j]
        if tj > 0.5 * tot:  # the dominant coordinate: sum the rest instead of cancelling
            rest = math.fsum(tt[:j]) + math.fsum(tt[j + 1 :])
            srest = math.fsum(mk * tk for mk, tk in zip(mul[:j], tt[:j], strict=True))
            srest += math.fsum(mk * tk for mk, tk in zip(mul[j + 1 :], tt[j + 1 :], strict=True))
        else:
            rest = tot - tj
            srest = wsum - mul[j] * tj
        if rest <= 0.0:
            continue  # every other coordinate is exactly 0: the direction of the rest is void
        theta, one_minus = _draw_theta(mul[j] - srest / rest, K, rng)
        # True squares are g·t̃. The others' true squares become t̃ᵢ(1 − θ)/rest (unscaled
        # "rest" and "srest" are sums of t̃), so only the scale changes; t̃ⱼ absorbs θ.
        g = one_minus / rest
        tj_new = theta / g
        tt[j] = tj_new
        tot = rest + tj_new
        wsum = srest + mul[j] * tj_new
        sgn[j] = -1.0 if flips[j] else 1.0
        if not (1e-150 < g < 1e150):
            tt = [t * g for t in tt]
            tot *= g
            wsum *= g
            g = 1.0
    t = np.asarray(tt) * g
    out = np.asarray(sgn) * np.sqrt(np.maximum(t, 0.0))
    return np.asarray(out / np.linalg.norm(out))


def _ball_sweep(
    z: NDArray[np.float64],
    r2: float,
    alpha: NDArray[np.float64],
    K: float,
    rng: np.random.Generator,
) -> tuple[NDArray[np.float64], float]:
    """Hoff's coordinate updates of the ``k`` tilted coordinates of a vector on ``S^{2K}``.

    The vector is ``(z, rest)`` where the rest has squared norm ``r2`` and no tilt; the density
    is ``exp(Σ αₗ zₗ²)``. Returns the new ``z`` and the new ``r2`` (tracked multiplicatively,
    so it stays accurate when it is tiny).
    """
    k = z.shape[0]
    t = (z * z).tolist()
    al = alpha.tolist()
    zl = z.tolist()
    flips = np.asarray(rng.random(k)).tolist()
    # Systematic scan in the eigen-order of α (any fixed order leaves the law invariant).
    for j in range(k):
        rest = r2
        srest = 0.0
        for i in range(k):
            if i != j:
                rest += t[i]
                srest += al[i] * t[i]
        if rest <= 0.0:
            continue
        theta, one_minus = _draw_theta(al[j] - srest / rest, K, rng)
        scale = one_minus / rest
        for i in range(k):
            t[i] *= scale
        r2 *= scale
        t[j] = theta
        zl[j] = -1.0 if flips[j] < 0.5 else 1.0
    out = [math.copysign(math.sqrt(ti), zi) for ti, zi in zip(t, zl, strict=True)]
    return np.array(out), r2


def _fix_columns(P: NDArray[np.float64]) -> NDArray[np.float64]:
    """Each column's largest-magnitude entry made positive (a convention, so that the
    compiled sweep, whose eigen-solver differs, can reproduce this one)."""
    big = np.abs(P).argmax(axis=0)
    return np.asarray(P * np.where(P[big, np.arange(P.shape[1])] < 0.0, -1.0, 1.0))


def _row_sweep(
    W: NDArray[np.float64], lam: NDArray[np.float64], rng: np.random.Generator
) -> NDArray[np.float64]:
    """One random-scan sweep of row updates (module docstring); ``W`` is in eigen-coordinates.

    With ``x̂ = x/‖x‖`` and ``r² = 1 − ‖x‖²`` (computed as the rest's mass along ``x̂``, which
    stays accurate when tiny): ``C^{-1/2} = I + f x̂x̂ᵀ``, ``f = 1/r − 1``, and
    ``G = C^{-1/2} Hₓ C^{-1/2} = Hₓ + u x̂ᵀ + x̂ uᵀ`` with ``Hₓ = WᵀΛW − λᵢxᵀx``,
    ``u = f Hₓx̂ + (f² x̂ᵀHₓx̂/2) x̂``.
    """
    p, k = W.shape
    K = 0.5 * (p - 1)
    eye = np.eye(k)
    diag = np.arange(k)
    H = (W.T * lam) @ W
    for i in rng.permutation(p).tolist():
        x = W[i].copy()
        li = float(lam[i])
        Hx = H - li * (x[:, None] * x)
        n2 = float(x @ x)
        A = -Hx
        if n2 > 0.0:
            xh = x / math.sqrt(n2)
            v = W @ xh
            v[i] = 0.0
            r2 = max(float(v @ v), 1e-300)
            f = 1.0 / math.sqrt(r2) - 1.0
            h = Hx @ xh
            u = f * h + (0.5 * f * f * float(xh @ h)) * xh
            A -= u[:, None] * xh + xh[:, None] * u
        else:
            xh, r2, f = x, 1.0, 0.0
        A[diag, diag] += li
        alpha, P, info = _syev(A)
        if info != 0:  # pragma: no cover - LAPACK failure on a k×k symmetric matrix
            alpha, P = np.linalg.eigh(A)
        P = _fix_columns(P)
        z_new, r2_new = _ball_sweep(x @ P, r2, alpha, K, rng)
        xn = P @ z_new
        nn2 = float(xn @ xn)
        # T = C_old^{-1/2} C_new^{1/2} = (I + f x̂x̂ᵀ)(I + g x̂ₙx̂ₙᵀ), g = √r²ₙ − 1
        T = eye + f * (xh[:, None] * xh)
        if nn2 > 0.0:
            xnh = xn / math.sqrt(nn2)
            T += (math.sqrt(r2_new) - 1.0) * ((T @ xnh)[:, None] * xnh)
        W = W @ T
        W[i] = xn
        H = T.T @ Hx @ T + li * (xn[:, None] * xn)
    return W


def _run_chain(
    W: NDArray[np.float64],
    lam: NDArray[np.float64],
    n_sweeps: int,
    update: str,
    rng: np.random.Generator,
    *,
    reference: bool = False,
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """``n_sweeps`` sweeps from ``W`` (eigen-coordinates); returns the state and the trace.

    ``reference=False`` runs the compiled sweeps of :mod:`privpca.mechanisms._bingham_kernels`,
    ``True`` the pure-Python ones of this module (same update rules and stationary law; kept
    as the readable reference, and to test the compiled ones against).
    """
    k = W.shape[1]
    # The law is unchanged by λ → λ − c (tr(WᵀW) = k): shift so the largest is 0, which keeps
    # the conditional tilts well scaled when B's eigenvalues are large and close together.
    lam = np.ascontiguousarray(lam, dtype=np.float64)
    shifted = lam - lam.max()
    vector_sweep: Callable[..., NDArray[np.float64]] = _vector_sweep
    if not reference:
        from privpca.mechanisms import _bingham_kernels as kernels  # numba: imported on first use

        # The kernels draw from the Generator's bit generator without the GIL and without the
        # lock NumPy's own methods take: hold that lock, so that a Generator shared between
        # threads is never advanced by two of them at once.
        lock = rng.bit_generator.lock
        if k == 1:
            with lock:
                y, trace = kernels.vector_chain(W[:, 0].copy(), lam, shifted, n_sweeps, rng)
            return np.asarray(y)[:, None], np.asarray(trace)
        if update == "row":
            # The kernel works on Wᵀ (its O(p) passes then run along contiguous memory).
            with lock:
                Wt, trace = kernels.row_chain(
                    np.ascontiguousarray(W.T), lam, shifted, n_sweeps, rng
                )
            return np.asarray(Wt.T), np.asarray(trace)

        def vector_sweep(
            y: NDArray[np.float64], mu: NDArray[np.float64], rng: np.random.Generator
        ) -> NDArray[np.float64]:
            with lock:
                return np.asarray(kernels.vector_sweep(y, mu, rng))
    trace = np.empty(n_sweeps)
    # The reference and column sweeps are chains of small, latency-bound BLAS/LAPACK calls:
    # a second thread only adds synchronisation (docs/BENCHMARKS.md, "Measurements behind
    # small code choices"), so run them on one thread.
    with threadpool_limits(limits=1, user_api="blas"):
        for s in range(n_sweeps):
            if k == 1:
                W[:, 0] = vector_sweep(W[:, 0], shifted, rng)
            elif update == "row":
                W = _orthonormalise(_row_sweep(W, shifted, rng))
            else:
                W = _orthonormalise(_column_sweep(W, shifted, rng, vector_sweep))
            trace[s] = float(np.einsum("i,ij,ij->", lam, W, W))
    return W, trace


def _null_basis(Q: NDArray[np.float64]) -> NDArray[np.float64]:
    """Orthonormal basis of the orthogonal complement of the columns of ``Q`` (Householder)."""
    full, _ = np.linalg.qr(Q, mode="complete")
    return np.asarray(full[:, Q.shape[1] :])


def _column_sweep(
    W: NDArray[np.float64],
    lam: NDArray[np.float64],
    rng: np.random.Generator,
    vector_sweep: Callable[..., NDArray[np.float64]] = _vector_sweep,
) -> NDArray[np.float64]:
    """Hoff's ``rbing.matrix.gibbs`` scan: every column given the others, in random order."""
    k = W.shape[1]
    for j in rng.permutation(k).tolist():
        others = np.delete(W, j, axis=1)
        N = _null_basis(others)
        M = (N.T * lam) @ N
        mu, E = np.linalg.eigh((M + M.T) / 2.0)
        y = vector_sweep(np.ascontiguousarray(E.T @ (N.T @ W[:, j])), mu, rng)
        W[:, j] = N @ (E @ y)
    return W


def sample_haar(p: int, rng: np.random.Generator | None = None) -> NDArray[np.float64]:
    """A Haar-distributed orthogonal ``p × p`` matrix (Q of the QR of a Gaussian matrix).

    The Bingham law when ``k = p``: ``tr(VᵀBV) = tr B`` for every orthogonal V, so the
    exponential mechanism's output is this data-independent draw (0-DP).
    """
    rng = check_noise_rng(rng, owner="sample_haar")
    return np.asarray(scipy.linalg.qr(rng.standard_normal((int(p), int(p))))[0])


def _orthonormalise(W: NDArray[np.float64]) -> NDArray[np.float64]:
    """Remove rounding drift: QR with the signs of R's diagonal put back (W ≈ Q then)."""
    q, r = np.linalg.qr(W)
    d = np.sign(np.diag(r))
    d[d == 0] = 1.0
    return np.asarray(q * d)


@dataclass(frozen=True)
class BinghamGibbsResult:
    """Output of :func:`sample_bingham_gibbs`.

    Attributes
    ----------
    basis : ndarray of shape (n_features, n_components)
        The final state ``V`` (orthonormal columns), in the original coordinates.
    trace : ndarray of shape (n_sweeps,)
        ``tr(VᵀBV)`` after every sweep.
    n_sweeps : int
    update : str
    """

    basis: NDArray[np.float64]
    trace: NDArray[np.float64]
    n_sweeps: int
    update: str


def _check_spectrum(
    eigenvalues: ArrayLike, eigenvectors: ArrayLike | None
) -> tuple[NDArray[np.float64], NDArray[np.float64] | None]:
    lam = np.asarray(eigenvalues, dtype=np.float64)
    if lam.ndim != 1 or lam.size == 0 or not np.all(np.isfinite(lam)):
        raise ValueError("eigenvalues must be a non-empty 1-D array of finite numbers.")
    if eigenvectors is None:
        return lam, None
    U = np.asarray(eigenvectors, dtype=np.float64)
    if U.shape != (lam.size, lam.size):
        raise ValueError(
            f"eigenvectors must have shape {(lam.size, lam.size)}; got {U.shape} instead."
        )
    return lam, U


def sample_bingham_gibbs(
    eigenvalues: ArrayLike,
    n_components: int,
    n_sweeps: int,
    *,
    eigenvectors: ArrayLike | None = None,
    update: str = "row",
    init: ArrayLike | None = None,
    rng: np.random.Generator | None = None,
) -> BinghamGibbsResult:
    """Run Hoff's Gibbs sampler for ``p(V) ∝ exp(tr(VᵀBV))`` on ``V_{k,p}``.

    Parameters
    ----------
    eigenvalues : array-like of shape (p,)
        Eigenvalues ``λ`` of the symmetric matrix ``B`` (any order, any sign).
    n_components : int
        ``k``, the number of columns of ``V`` (``1 ≤ k ≤ p``).
    n_sweeps : int
        Number of sweeps (one sweep updates every row, or every column, once). The result is
        the state after the last sweep; whether that state is close to the Bingham law is
        what the trace diagnoses (see :func:`mixing_diagnostics`), never guaranteed.
    eigenvectors : array-like of shape (p, p), optional
        Orthonormal eigenvectors ``U`` (columns) of ``B``. ``None``: ``B`` is taken to be
        ``diag(eigenvalues)`` (i.e. the result is in eigen-coordinates).
    update : {"row", "column"}, default="row"
        Block scheme (module docstring): ``"column"`` is Hoff's/rstiefel's, ``O(k p³)`` per
        sweep; ``"row"`` does the same coordinate updates on rows, ``O(p k³)`` per sweep.
    init : array-like of shape (p, k), optional
        Starting ``V`` (orthonormalised). ``None``: Haar-random, independent of ``B``.
    rng : numpy.random.Generator, optional
        ``None``: fresh OS entropy. In secure mode only None or an OS-keyed SecureGenerator
        (:func:`privpca.mechanisms.randomness.check_noise_rng`): the draw may be a private release.

    Returns
    -------
    BinghamGibbsResult

    Notes
    -----
    The sweeps are compiled with numba (module docstring): the first call in a fresh
    environment compiles them (seconds) and caches the machine code on disk; later processes
    load it in well under a second. Row sweeps cost ``O(p k)`` per row plus a ``k × k``
    Jacobi eigendecomposition, ``O(p² k)`` per sweep.
    """
    lam, U = _check_spectrum(eigenvalues, eigenvectors)
    p = lam.size
    k = int(n_components)
    if not 1 <= k <= p:
        raise ValueError(f"n_components must be in [1, {p}]. Got {n_components!r} instead.")
    if update not in UPDATES:
        raise ValueError(f"update must be one of {UPDATES}. Got {update!r} instead.")
    if int(n_sweeps) < 0:
        raise ValueError(f"n_sweeps must be >= 0. Got {n_sweeps!r} instead.")
    rng = check_noise_rng(rng, owner="sample_bingham_gibbs")
    if init is None:
        W = _orthonormalise(rng.standard_normal((p, k)))
    else:
        V0 = np.asarray(init, dtype=np.float64)
        if V0.shape != (p, k):
            raise ValueError(f"init must have shape {(p, k)}; got {V0.shape} instead.")
        W = _orthonormalise(V0 if U is None else U.T @ V0)
    if k == p:
        # tr(WᵀΛW) = tr Λ for every orthogonal W: the law is Haar, drawn exactly. (The row
        # update is degenerate here, r² = 0 for every row, and only rounding would move it.)
        if int(n_sweeps) > 0:
            W = _orthonormalise(rng.standard_normal((p, p)))
        trace = np.full(int(n_sweeps), float(np.einsum("i,ij,ij->", lam, W, W)))
    else:
        W, trace = _run_chain(W, lam, int(n_sweeps), update, rng)
    basis = W if U is None else U @ W
    return BinghamGibbsResult(
        basis=np.asarray(basis), trace=trace, n_sweeps=int(n_sweeps), update=update
    )


# --------------------------------------------------------------------------------------------
# Exact sampler for k = 1 (Kent, Ganeiber & Mardia)
# --------------------------------------------------------------------------------------------


def _kgm_b(a: NDArray[np.float64]) -> float:
    """Root ``b ∈ (0, q]`` of ``Σ 1/(b + 2aᵢ) = 1`` (KGM's optimal ACG parameter)."""
    q = a.size

    def f(b: float) -> float:
        return float(np.sum(1.0 / (b + 2.0 * a))) - 1.0

    if f(float(q)) >= 0.0:  # every aᵢ = 0: uniform target, b = q
        return float(q)
    return float(scipy.optimize.brentq(f, 1e-300, float(q), xtol=1e-15, rtol=1e-14))


@dataclass(frozen=True)
class ExactBinghamResult:
    """Output of :func:`sample_bingham_exact`.

    Attributes
    ----------
    vector : ndarray of shape (n_features,)
        A unit vector drawn exactly from the Bingham law (up to floating point).
    n_proposals : int
        Proposals drawn before the acceptance (≥ 1).
    """

    vector: NDArray[np.float64]
    n_proposals: int


def sample_bingham_exact(
    eigenvalues: ArrayLike,
    *,
    eigenvectors: ArrayLike | None = None,
    max_proposals: int = 100_000,
    batch_size: int = 4096,
    rng: np.random.Generator | None = None,
) -> ExactBinghamResult:
    """Exact draw of a unit vector with density ``∝ exp(vᵀBv)`` (Kent, Ganeiber & Mardia).

    With ``A = λ_max I − Λ ⪰ 0`` (``exp(vᵀBv) ∝ exp(−vᵀAv)`` on the sphere), proposals come
    from the angular central Gaussian with ``Ω = I + 2A/b``, ``b`` the root of
    ``Σ 1/(b + 2aᵢ) = 1``, and are accepted with probability
    ``exp(−t + (q/2) log(1 + 2t/b) + (q − b)/2 − (q/2) log(q/b))``, ``t = vᵀAv``.
    The acceptance rate falls as the spread ``λ_max − λ_min`` and the dimension grow — slowly
    in our measurements (about 0.15 at p = 50 and 0.03 at p = 800 for spiked data with
    spread ≈ 2·10³, i.e. ``ε n/2`` at n = 10⁵, ε ≈ 0.05) — but without a bound, hence the
    budget. (Implementations that skip the shift to ``min aᵢ = 0`` or the optimal ``b``
    lose a factor ``e^{λ_min}``-like in acceptance and do collapse.)

    Parameters
    ----------
    eigenvalues : array-like of shape (p,)
    eigenvectors : array-like of shape (p, p), optional
        ``None``: the result is in eigen-coordinates.
    max_proposals : int, default=100_000
        Proposals allowed before giving up.
    batch_size : int, default=4096
        Largest vectorised batch of proposals (batches start at 32 and double).
    rng : numpy.random.Generator, optional
        As in :func:`sample_bingham_gibbs` (secure mode: OS-keyed only).

    Returns
    -------
    ExactBinghamResult

    Raises
    ------
    ProposalBudgetExceededError
        When ``max_proposals`` proposals were all rejected. Never loops without bound.
    """
    lam, U = _check_spectrum(eigenvalues, eigenvectors)
    if int(max_proposals) < 1:
        raise ValueError(f"max_proposals must be >= 1. Got {max_proposals!r} instead.")
    rng = check_noise_rng(rng, owner="sample_bingham_exact")
    q = lam.size
    a = lam.max() - lam
    b = _kgm_b(a)
    scale = 1.0 / np.sqrt(1.0 + 2.0 * a / b)
    log_m = -(q - b) / 2.0 + (q / 2.0) * math.log(q / b)
    used = 0
    budget = int(max_proposals)
    nb = 16
    while used < budget:
        nb = min(2 * nb, int(batch_size), budget - used)  # grow batches: cheap when accepting
        z = rng.standard_normal((nb, q)) * scale
        x = z / np.linalg.norm(z, axis=1, keepdims=True)
        t = (x * x) @ a
        log_ratio = -t + (q / 2.0) * np.log1p(2.0 * t / b) - log_m
        accept = np.flatnonzero(np.log1p(-rng.random(nb)) < log_ratio)
        if accept.size:
            first = int(accept[0])
            vec = x[first]
            return ExactBinghamResult(
                vector=np.asarray(vec if U is None else U @ vec), n_proposals=used + first + 1
            )
        used += nb
    raise ProposalBudgetExceededError(
        f"The exact Bingham sampler rejected all max_proposals={budget} proposals: its "
        "acceptance rate falls roughly geometrically in the spread of the exponent's "
        "eigenvalues (epsilon * n / 2 at most for the exponential mechanism). Use the Gibbs "
        "sampler, or raise max_proposals."
    )


# --------------------------------------------------------------------------------------------
# Mixing diagnostics
# --------------------------------------------------------------------------------------------


def _as_chains(traces: ArrayLike) -> NDArray[np.float64]:
    arr = np.asarray(traces, dtype=np.float64)
    if arr.ndim == 1:
        arr = arr[None, :]
    if arr.ndim != 2 or arr.shape[1] < 4:
        raise ValueError("traces must be (n_chains, n_draws) with n_draws >= 4.")
    return arr


def _autocovariance(x: NDArray[np.float64]) -> NDArray[np.float64]:
    n = x.shape[-1]
    xc = x - x.mean(axis=-1, keepdims=True)
    size = 1 << (2 * n - 1).bit_length()
    f = np.fft.rfft(xc, size, axis=-1)
    return np.asarray(np.fft.irfft(f * np.conj(f), size, axis=-1)[..., :n] / n)


def effective_sample_size(traces: ArrayLike) -> float:
    """Effective sample size of one or more chains (Geyer's initial monotone sequence).

    Uses the multi-chain autocorrelation of Vehtari et al. (2021): ``ρ_t = 1 −
    (W − mean_chains(γ_t))/var⁺``; the sum of positive pairs ``ρ_{2t} + ρ_{2t+1}``, made
    monotone, gives ``τ`` and ``ESS = m n / τ``. Constant traces give ``n·m``.
    """
    x = _as_chains(traces)
    m, n = x.shape
    acov = _autocovariance(x)
    within = float(np.mean(acov[:, 0])) * n / (n - 1)
    between = float(np.var(x.mean(axis=1), ddof=1)) * n if m > 1 else 0.0
    var_plus = (n - 1) / n * within + between / n
    if var_plus <= 0.0 or not math.isfinite(var_plus):
        return float(m * n)
    rho = 1.0 - (within - acov.mean(axis=0)) / var_plus
    rho[0] = 1.0
    tau = -1.0
    prev = math.inf
    for t in range(0, n - 1, 2):
        pair = float(rho[t] + rho[t + 1])
        if pair <= 0.0:
            break
        pair = min(pair, prev)
        prev = pair
        tau += 2.0 * pair
    tau = max(tau, 1.0 / math.log10(max(m * n, 10)))
    return float(m * n / tau)


def split_rhat(traces: ArrayLike) -> float:
    """Split-R̂ (Gelman–Rubin on chains cut in halves); ≈ 1 when the chains agree.

    Read it as: above about 1.01 the chains have not forgotten their starting points (or
    explore different regions); one chain is split in two, so even ``n_chains = 1`` detects
    a drift between the first and the second half.
    """
    x = _as_chains(traces)
    half = x.shape[1] // 2
    parts = np.concatenate((x[:, :half], x[:, x.shape[1] - half :]), axis=0)
    n = parts.shape[1]
    means = parts.mean(axis=1)
    within = float(np.mean(parts.var(axis=1, ddof=1)))
    between = float(n * np.var(means, ddof=1))
    if within <= 0.0:
        return 1.0 if between <= 0.0 else math.inf
    var_plus = (n - 1) / n * within + between / n
    return float(math.sqrt(var_plus / within))


def geweke_z(trace: ArrayLike, first: float = 0.1, last: float = 0.5) -> float:
    """Geweke's z: the first ``first`` and last ``last`` fractions of one chain compared.

    ``z = (mean_a − mean_b)/sqrt(var_a/ESS_a + var_b/ESS_b)``; under stationarity it is
    approximately standard normal, so ``|z| > 2`` flags a drift (e.g. an unfinished burn-in).
    """
    x = np.asarray(trace, dtype=np.float64).ravel()
    n = x.size
    na, nb = int(first * n), int(last * n)
    if na < 4 or nb < 4:
        raise ValueError("trace too short for Geweke's test (need >= 4 draws in each part).")
    a, b = x[:na], x[n - nb :]
    va = float(a.var(ddof=1)) / effective_sample_size(a)
    vb = float(b.var(ddof=1)) / effective_sample_size(b)
    if va + vb <= 0.0:
        return 0.0 if a.mean() == b.mean() else math.inf
    return float((a.mean() - b.mean()) / math.sqrt(va + vb))


def mixing_diagnostics(traces: ArrayLike) -> dict[str, Any]:
    """Summarise chains' traces: split-R̂, ESS, Geweke z per chain, and plain-language flags.

    Parameters
    ----------
    traces : array-like of shape (n_chains, n_draws) or (n_draws,)
        Post-burn-in traces of a scalar summary (e.g. ``tr(VᵀAV)``).

    Returns
    -------
    dict
        ``split_rhat`` (float), ``ess`` (float), ``geweke_z`` (list of float, one per chain),
        ``n_chains``, ``n_draws``, ``mean``, ``sd``, and ``flags`` (list of str, empty when no
        check fired). An empty ``flags`` list means no problem was *detected*; it never
        proves that the chain reached its stationary law.
    """
    x = _as_chains(traces)
    m, n = x.shape
    rhat = split_rhat(x)
    ess = effective_sample_size(x)
    zs = [geweke_z(row) if n >= 40 else float("nan") for row in x]
    flags = []
    if rhat > 1.01:
        flags.append(f"split-R̂ = {rhat:.3f} > 1.01: the chains disagree or drift.")
    if ess < 100:
        flags.append(f"ESS = {ess:.0f} < 100: too few effective draws to judge mixing.")
    bad = [i for i, z in enumerate(zs) if math.isfinite(z) and abs(z) > 2.5]
    if bad:
        flags.append(f"Geweke |z| > 2.5 in chain(s) {bad}: start and end of the trace differ.")
    return {
        "split_rhat": rhat,
        "ess": ess,
        "geweke_z": zs,
        "n_chains": m,
        "n_draws": n,
        "mean": float(x.mean()),
        "sd": float(x.std(ddof=1)) if x.size > 1 else 0.0,
        "flags": flags,
    }
