"""Hoff's (2009) Gibbs sampler for the matrix Bingham law on the Stiefel manifold.

The target is ``p(V) ∝ exp(tr(VᵀBV))`` on ``V_{k,p}``, worked in the eigen-coordinates
``W = UᵀV`` of ``B = U diag(λ) Uᵀ``, where the density is ``exp(Σᵢ λᵢ ‖wᵢ‖²)`` (``wᵢ`` the i-th
*row* of ``W``). Two block schemes, both exact Gibbs updates:

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

The samplers record ``tr(WᵀΛW) = tr(VᵀBV)`` after every sweep: the trace that
:mod:`privpca.mechanisms.bingham_diagnostics` reads.

References
----------
P. D. Hoff. Simulation of the matrix Bingham–von Mises–Fisher distribution, with applications
to multivariate and relational data. JCGS 18(2), 2009.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.linalg import lapack
from threadpoolctl import threadpool_limits

from privpca.mechanisms.bingham_spectrum import _check_spectrum
from privpca.mechanisms.randomness import check_noise_rng

__all__ = ["UPDATES", "BinghamGibbsResult", "sample_bingham_gibbs"]

UPDATES = ("row", "column")

_LOG_HALF_SQRT2 = 0.5 * math.log(2.0)
_syev = lapack.dsyev  # k×k eigh without numpy.linalg's per-call overhead


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
