"""Compiled (numba) Gibbs sweeps for the matrix Bingham sampler.

Line-for-line ports of the reference sweeps in :mod:`privpca.mechanisms.bingham_sampler`
(``_draw_theta``, ``_vector_sweep``, ``_ball_sweep``, ``_row_sweep``): the same conditionals,
envelopes and update rules, so the same stationary law. What goes is the interpreter's
overhead per row and per coordinate, which dominated the sweeps (a row update is O(pk)
arithmetic around a k × k eigendecomposition and k one-dimensional draws); the row sweep
also stores ``W`` transposed and applies ``W ← W T`` as the rank-2 update it is, so its O(p)
passes are contiguous.

Randomness is the caller's ``numpy.random.Generator``, passed in and advanced in place (numba
draws from its bit generator; the caller holds the bit generator's lock); nothing here seeds
or touches a global RNG. The kernels draw the same numbers in the same order as the reference
(the scan order by NumPy's own permutation algorithm, :func:`_permutation`), and the k × k
eigenbasis follows the reference's convention (ascending, each column's largest entry
positive), so for a given Generator state a compiled chain is the reference chain up to
rounding (``tests/test_bingham.py`` checks this), except where noted:

* ``K = 1/2`` (a coordinate on the circle, ``p = 2``): instead of NumPy's von Mises (whose
  ``κ > 10⁶`` branch is a wrapped-normal approximation), ``θ`` is drawn by rejection in
  ``s`` (``1 − θ`` for ``a ≥ 0``, ``θ`` otherwise) from arcsine proposals (``|a| ≤ 2``) or a
  two-piece Gamma(1/2)/power envelope (``|a| > 2``) — exact for every ``a``; another chain.
* k × k eigendecompositions by cyclic Jacobi (:func:`_jacobi_eigh`), not LAPACK; the drift
  of ``W`` from orthonormality is removed by Gram-Schmidt with reorthogonalisation, which
  gives the reference's sign-fixed QR factor up to rounding.
* the exact recomputation of the rest's mass and weighted sum (the dominant coordinate of
  a vector sweep) uses Neumaier-compensated sums instead of ``math.fsum``; the terms have one
  sign (squares, and weights ``μ ≤ 0`` after the shift), so either is accurate to a few ulps.
* a ``1 − θ`` that underflows to 0 puts the whole mass on the drawn coordinate (the reference
  would divide by zero).
"""

from __future__ import annotations

import math
from typing import Any

import numba
import numpy as np

__all__ = [
    "draw_theta",
    "draw_thetas",
    "row_chain",
    "row_sweep",
    "vector_chain",
    "vector_sweep",
]

_JIT: dict[str, Any] = {"cache": True, "nogil": True, "error_model": "numpy"}
_LOG_HALF_SQRT2 = 0.5 * math.log(2.0)
_MAX_TRIES = 100_000
# Cell boundaries of the grid envelope, in units of its width around the mode (the reference's).
_GRID_STEPS = np.concatenate((np.arange(0.0, 4.0, 0.25), 4.0 * 1.5 ** np.arange(0, 70)))


# --------------------------------------------------------------------------------------------
# θ with density ∝ θ^{-1/2} (1 − θ)^{K−1} exp(aθ) on (0, 1); returns (θ, 1 − θ)
# --------------------------------------------------------------------------------------------


@numba.njit(**_JIT)
def _draw_theta_circle(a, rng):
    """``K = 1/2``: density ∝ ``θ^{-1/2}(1 − θ)^{-1/2}e^{aθ}``, symmetric under θ ↔ 1 − θ, a ↔ −a.

    Draw ``s`` (``= 1 − θ`` for ``a ≥ 0``, ``= θ`` otherwise) with density
    ``f(s) ∝ s^{-1/2}(1 − s)^{-1/2}e^{−c s}``, ``c = |a|``:

    * ``c ≤ 2``: arcsine proposals ``s = sin²(πu/2)``, accepted with probability ``e^{−cs}``
      (at least ``e^{−2}``).
    * ``c > 2``: on ``s ≤ 1/2``, ``f ≤ √2 s^{-1/2}e^{−cs}`` (a Gamma(1/2, 1/c) kernel, total
      mass ``√(2π/c)``); on ``s > 1/2``, ``f ≤ √2 e^{−c/2}(1 − s)^{-1/2}`` (mass ``2e^{−c/2}``,
      ``1 − s = u²/2``).
    """
    c = abs(a)
    s = 0.0
    t = 1.0
    found = False
    if c <= 2.0:
        for _ in range(_MAX_TRIES):
            phi = 0.5 * math.pi * rng.random()
            sn = math.sin(phi)
            cs = math.cos(phi)
            s = sn * sn
            if math.log(1.0 - rng.random()) <= -c * s:
                t = cs * cs
                found = True
                break
    else:
        w1 = math.sqrt(2.0 * math.pi / c)
        w2 = 2.0 * math.exp(-0.5 * c)
        p1 = w1 / (w1 + w2)
        for _ in range(_MAX_TRIES):
            if rng.random() < p1:
                s = rng.gamma(0.5, 1.0 / c)
                if s > 0.5:
                    continue
                if math.log(1.0 - rng.random()) <= -0.5 * math.log1p(-s) - _LOG_HALF_SQRT2:
                    t = 1.0 - s
                    found = True
                    break
            else:
                u = rng.random()
                t = 0.5 * u * u
                s = 1.0 - t
                if math.log(1.0 - rng.random()) <= (
                    -0.5 * math.log(s) - c * (s - 0.5) - _LOG_HALF_SQRT2
                ):
                    found = True
                    break
    if not found:
        raise RuntimeError("theta sampler failed (circle); please report")
    if a >= 0.0:
        return t, s
    return s, t


@numba.njit(**_JIT)
def _draw_theta_grid(a, K, rng):
    """The reference's grid envelope around the mode of ``h(y) = (1 − y²)^{K−1}e^{ay²}``."""
    km1 = K - 1.0
    if km1 <= 0.0:
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
    # The reference's cell ends, np.unique([0, 1, left > 0, right < 1, mode]), built in order:
    # 0, the left points ascending (mode − sig·step, step descending), the right points
    # ascending, 1; rounding keeps that order, so dropping repeats is np.unique.
    steps = _GRID_STEPS
    ns = steps.size
    pts = np.empty(2 * ns + 2)
    pts[0] = 0.0
    npts = 1
    for q in range(ns - 1, -1, -1):
        left = mode - sig * steps[q]
        if left > 0.0 and left != pts[npts - 1]:
            pts[npts] = left
            npts += 1
    if mode != pts[npts - 1]:  # mode = 0 is already there
        pts[npts] = mode
        npts += 1
    for q in range(1, ns):
        right = mode + sig * steps[q]
        if right < 1.0 and right != pts[npts - 1]:
            pts[npts] = right
            npts += 1
    if pts[npts - 1] != 1.0:
        pts[npts] = 1.0
        npts += 1
    lh = np.empty(npts)
    for q in range(npts):
        y2 = pts[q] * pts[q]
        lh[q] = (km1 * math.log1p(-y2) if km1 > 0.0 else 0.0) + a * y2
    ncell = npts - 1
    cell_max = np.empty(ncell)
    width = np.empty(ncell)
    log_w = np.empty(ncell)
    top = -np.inf
    for q in range(ncell):
        width[q] = pts[q + 1] - pts[q]
        cell_max[q] = lh[q + 1] if 0.5 * (pts[q] + pts[q + 1]) < mode else lh[q]
        log_w[q] = math.log(max(width[q], 1e-300)) + cell_max[q]
        top = max(top, log_w[q])
    cdf = np.empty(ncell)
    acc = 0.0
    for q in range(ncell):
        acc += math.exp(log_w[q] - top)
        cdf[q] = acc
    for q in range(ncell):
        cdf[q] /= acc
    last = ncell - 1
    for _ in range(_MAX_TRIES):
        u0 = rng.random()
        u1 = rng.random()
        u2 = rng.random()
        lo = 0  # first cell with cdf ≥ u0 (np.searchsorted, side="left")
        hi = ncell
        while lo < hi:
            mid = (lo + hi) // 2
            if cdf[mid] < u0:
                lo = mid + 1
            else:
                hi = mid
        c = min(lo, last)
        y = pts[c] + u1 * width[c]
        if y >= 1.0:
            continue
        y2 = y * y
        val = (km1 * math.log1p(-y2) if km1 > 0.0 else 0.0) + a * y2
        if math.log(1.0 - u2) <= val - cell_max[c]:
            return y2, (1.0 - y) * (1.0 + y)
    raise RuntimeError("theta sampler failed (grid); please report")


@numba.njit(**_JIT)
def draw_theta(a, K, rng):
    """Exact draw of ``(θ, 1 − θ)``; the regimes of the reference ``_draw_theta``."""
    if K == 0.5:
        return _draw_theta_circle(a, rng)
    km1 = K - 1.0
    if a <= km1:
        tau = 2.0 * (km1 - a)
        if tau < 4.0:  # the bound exp(−τy²/2) is nearly flat: uniform proposals
            for _ in range(_MAX_TRIES):
                y = rng.random()
                y2 = y * y
                if math.log(1.0 - rng.random()) <= km1 * math.log1p(-y2) + a * y2:
                    return y2, (1.0 - y) * (1.0 + y)
        else:
            sd = 1.0 / math.sqrt(tau)
            for _ in range(_MAX_TRIES):
                y = abs(rng.standard_normal()) * sd
                if y >= 1.0:
                    continue
                y2 = y * y
                if math.log(1.0 - rng.random()) <= km1 * (math.log1p(-y2) + y2):
                    return y2, (1.0 - y) * (1.0 + y)
        raise RuntimeError("theta sampler failed (mode at 0); please report")
    if a >= 2.0 * K + 10.0:
        b = a - 1.0
        log_w1 = math.lgamma(K) - K * math.log(b)
        s_top = min(max(km1 / a, 0.5), 1.0)
        log_m2 = (km1 * math.log(s_top) if km1 > 0.0 else 0.0) - a * s_top
        diff = log_m2 + _LOG_HALF_SQRT2 - log_w1
        p1 = 0.0 if diff > 700.0 else 1.0 / (1.0 + math.exp(diff))
        for _ in range(_MAX_TRIES):
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
        raise RuntimeError("theta sampler failed (mass near 1); please report")
    return _draw_theta_grid(a, K, rng)


@numba.njit(**_JIT)
def draw_thetas(a, K, n, rng):
    """``n`` independent draws of :func:`draw_theta` as an ``(n, 2)`` array (tests, tools)."""
    out = np.empty((n, 2))
    for q in range(n):
        out[q, 0], out[q, 1] = draw_theta(a, K, rng)
    return out


# --------------------------------------------------------------------------------------------
# Sweeps
# --------------------------------------------------------------------------------------------


@numba.njit(**_JIT)
def _permutation(n, rng):
    """``rng.permutation(n)``, draw for draw (NumPy's Fisher-Yates with masked rejection).

    numba's own ``Generator.permutation`` gives the same result but takes ~20 s to compile.
    """
    arr = np.arange(n)
    for i in range(n - 1, 0, -1):
        mask = i
        mask |= mask >> 1
        mask |= mask >> 2
        mask |= mask >> 4
        mask |= mask >> 8
        mask |= mask >> 16
        mask |= mask >> 32
        while True:  # uniform on {0, …, i}: 32 random bits, masked, until ≤ i
            j = np.int64(rng.integers(0, 0xFFFFFFFF, dtype=np.uint32, endpoint=True)) & mask
            if j <= i:
                break
        arr[i], arr[j] = arr[j], arr[i]
    return arr


@numba.njit(**_JIT)
def _neumaier_add(s, c, v):
    """``s + v`` and the compensation ``c`` plus that addition's rounding error (Neumaier)."""
    nxt = s + v
    if abs(s) >= abs(v):
        c += (s - nxt) + v
    else:
        c += (v - nxt) + s
    return nxt, c


@numba.njit(**_JIT)
def _rows_combination(c, Wt, out):
    """``out = Σₐ cₐ Wt[a]`` (``Wᵀ``'s rows, so contiguous passes), summed from a = 0."""
    for r in range(Wt.shape[1]):
        out[r] = c[0] * Wt[0, r]
    for a in range(1, Wt.shape[0]):
        ca = c[a]
        for r in range(Wt.shape[1]):
            out[r] += ca * Wt[a, r]


@numba.njit(**_JIT)
def _sums_except(t, mu, j):
    """Neumaier-compensated ``(Σ_{i≠j} tᵢ, Σ_{i≠j} μᵢtᵢ)`` (``j = −1``: all terms)."""
    s = 0.0
    cs = 0.0
    w = 0.0
    cw = 0.0
    for i in range(t.size):
        if i == j:
            continue
        s, cs = _neumaier_add(s, cs, t[i])
        w, cw = _neumaier_add(w, cw, mu[i] * t[i])
    return s + cs, w + cw


@numba.njit(**_JIT)
def vector_sweep(y, mu, rng):
    """One random-scan sweep of Hoff's coordinate updates for ``exp(Σ μⱼ yⱼ²)`` on ``S^{m−1}``.

    The reference ``_vector_sweep``: lazily scaled squares ``tⱼ = g·t̃ⱼ`` with running sums;
    the rest's sums are recomputed for a coordinate holding more than half the mass.
    Returns a new unit vector.
    """
    m = y.size
    out = np.empty(m)
    if m == 1:
        out[0] = 1.0 if rng.random() < 0.5 else -1.0
        return out
    K = 0.5 * (m - 1)
    tt = np.empty(m)
    sgn = np.empty(m)
    for i in range(m):
        tt[i] = y[i] * y[i]
        sgn[i] = -1.0 if y[i] < 0.0 else 1.0
    g = 1.0
    tot, wsum = _sums_except(tt, mu, np.int64(-1))
    order = _permutation(m, rng)
    flips = rng.random(m)
    for j in order:
        tj = tt[j]
        if tj > 0.5 * tot:  # the dominant coordinate: sum the rest instead of cancelling
            rest, srest = _sums_except(tt, mu, np.int64(j))
        else:
            rest = tot - tj
            srest = wsum - mu[j] * tj
        if rest <= 0.0:
            continue  # every other coordinate is exactly 0: the direction of the rest is void
        theta, one_minus = draw_theta(mu[j] - srest / rest, K, rng)
        sgn[j] = -1.0 if flips[j] < 0.5 else 1.0
        if one_minus <= 0.0:  # 1 − θ underflowed: all the mass on coordinate j
            for i in range(m):
                tt[i] = 0.0
            tt[j] = 1.0
            g = 1.0
            tot = 1.0
            wsum = mu[j]
            continue
        # True squares are g·t̃; the others' become t̃ᵢ(1 − θ)/rest: only the scale changes.
        g = one_minus / rest
        tj_new = theta / g
        tt[j] = tj_new
        tot = rest + tj_new
        wsum = srest + mu[j] * tj_new
        if not (1e-150 < g < 1e150):
            for i in range(m):
                tt[i] *= g
            tot *= g
            wsum *= g
            g = 1.0
    nrm = 0.0
    for i in range(m):
        out[i] = sgn[i] * math.sqrt(max(tt[i] * g, 0.0))
        nrm += out[i] * out[i]
    nrm = math.sqrt(nrm)
    for i in range(m):
        out[i] /= nrm
    return out


@numba.njit(**_JIT)
def _ball_sweep(z, r2, alpha, K, rng):
    """The reference ``_ball_sweep``, in place on ``z``; returns the new ``r²``."""
    k = z.size
    t = np.empty(k)
    for i in range(k):
        t[i] = z[i] * z[i]
    flips = rng.random(k)
    for j in range(k):  # systematic scan in the eigen-order of α
        rest = r2
        srest = 0.0
        for i in range(k):
            if i != j:
                rest += t[i]
                srest += alpha[i] * t[i]
        if rest <= 0.0:
            continue
        theta, one_minus = draw_theta(alpha[j] - srest / rest, K, rng)
        scale = one_minus / rest
        for i in range(k):
            t[i] *= scale
        r2 *= scale
        t[j] = theta
        z[j] = -1.0 if flips[j] < 0.5 else 1.0
    for i in range(k):
        z[i] = math.copysign(math.sqrt(t[i]), z[i])
    return r2


@numba.njit(**_JIT)
def _jacobi_eigh(A, V):
    """Eigen-decomposition of a small symmetric ``A`` by cyclic Jacobi rotations, in place.

    On return ``A``'s diagonal holds the eigenvalues (unsorted) and ``V``'s columns the
    orthonormal eigenvectors: ``A_in = V diag(A) Vᵀ``. For the k × k tilts of the row sweep
    this is several times cheaper than a LAPACK call, with the same ``O(ε‖A‖)`` accuracy.
    """
    k = A.shape[0]
    for a in range(k):
        for b in range(k):
            V[a, b] = 0.0
        V[a, a] = 1.0
    for _ in range(64):
        off = 0.0
        fro = 0.0
        for a in range(k):
            fro += A[a, a] * A[a, a]
            for b in range(a + 1, k):
                off += A[a, b] * A[a, b]
        fro += 2.0 * off
        if off <= 1e-34 * fro:  # off-diagonal mass below (1e-17‖A‖)²: diagonal to rounding
            break
        for p in range(k - 1):
            for q in range(p + 1, k):
                apq = A[p, q]
                if apq == 0.0:
                    continue
                theta = (A[q, q] - A[p, p]) / (2.0 * apq)
                if abs(theta) > 1e150:
                    t = 0.5 / theta
                else:
                    t = 1.0 / (abs(theta) + math.sqrt(theta * theta + 1.0))
                    if theta < 0.0:
                        t = -t
                c = 1.0 / math.sqrt(t * t + 1.0)
                s = t * c
                for r in range(k):  # A ← A J
                    arp = A[r, p]
                    arq = A[r, q]
                    A[r, p] = c * arp - s * arq
                    A[r, q] = s * arp + c * arq
                for r in range(k):  # A ← Jᵀ A
                    apr = A[p, r]
                    aqr = A[q, r]
                    A[p, r] = c * apr - s * aqr
                    A[q, r] = s * apr + c * aqr
                A[p, q] = 0.0
                A[q, p] = 0.0
                for r in range(k):  # V ← V J
                    vrp = V[r, p]
                    vrq = V[r, q]
                    V[r, p] = c * vrp - s * vrq
                    V[r, q] = s * vrp + c * vrq


@numba.njit(**_JIT)
def _sort_and_sign(D, P, alpha):
    """``alpha`` = ``diag(D)`` ascending, ``P``'s columns permuted to match, each column's
    largest-magnitude entry made positive: the reference's convention (LAPACK order plus
    ``_fix_columns``), so both sweeps see the same eigenbasis."""
    k = P.shape[0]
    for a in range(k):
        alpha[a] = D[a, a]
    for a in range(1, k):  # insertion sort, columns of P along
        b = a
        while b > 0 and alpha[b - 1] > alpha[b]:
            alpha[b - 1], alpha[b] = alpha[b], alpha[b - 1]
            for r in range(k):
                P[r, b - 1], P[r, b] = P[r, b], P[r, b - 1]
            b -= 1
    for b in range(k):
        big = 0
        for r in range(1, k):
            if abs(P[r, b]) > abs(P[big, b]):
                big = r
        if P[big, b] < 0.0:
            for r in range(k):
                P[r, b] = -P[r, b]


@numba.njit(**_JIT)
def row_sweep(Wt, lam, rng):
    """One random-scan sweep of row updates, in place on ``Wt = Wᵀ`` (k × p, C-ordered).

    The reference ``_row_sweep``: for row ``i`` (``x``) of ``W``, ``Hₓ = WᵀΛW − λᵢxᵀx``; the
    tilt of the ball coordinates is ``λᵢI − C^{-1/2}HₓC^{-1/2}`` with ``C^{-1/2} = I + f x̂x̂ᵀ``,
    ``f = 1/r − 1``, ``r²`` the rest's mass along ``x̂``; after the ball sweep the rest is
    mapped by ``T = (I + f x̂x̂ᵀ)(I + g x̂ₙx̂ₙᵀ)``, ``g = r_new − 1``, and ``H`` updated to
    match. ``W`` is stored transposed so the O(p) passes (``v = Wx̂`` and the rank-2 update
    ``WT = W + f v x̂ᵀ + g (W x̂ₙ + f (x̂·x̂ₙ) v) x̂ₙᵀ``) run along contiguous memory.
    """
    k, p = Wt.shape
    K = 0.5 * (p - 1)
    H = np.zeros((k, k))
    for a in range(k):
        for b in range(k):
            s = 0.0
            for r in range(p):
                s += lam[r] * Wt[a, r] * Wt[b, r]
            H[a, b] = s
    x = np.empty(k)
    xh = np.empty(k)
    h = np.empty(k)
    u = np.empty(k)
    z = np.empty(k)
    alpha = np.empty(k)
    xn = np.empty(k)
    xnh = np.empty(k)
    col = np.empty(k)
    Hx = np.empty((k, k))
    A = np.empty((k, k))
    P = np.empty((k, k))
    T = np.empty((k, k))
    TH = np.empty((k, k))
    v = np.empty(p)
    w = np.empty(p)
    for i in _permutation(p, rng):
        li = lam[i]
        n2 = 0.0
        for a in range(k):
            x[a] = Wt[a, i]
            n2 += x[a] * x[a]
        for a in range(k):
            for b in range(k):
                Hx[a, b] = H[a, b] - li * x[a] * x[b]
                A[a, b] = -Hx[a, b]
        f = 0.0
        r2 = 1.0
        if n2 > 0.0:
            nx = math.sqrt(n2)
            for a in range(k):
                xh[a] = x[a] / nx
            _rows_combination(xh, Wt, v)
            v[i] = 0.0
            # r² = the rest's mass along x̂, accurate when tiny (1 − ‖x‖² would cancel)
            r2 = 0.0
            for r in range(p):
                r2 += v[r] * v[r]
            r2 = max(r2, 1e-300)
            f = 1.0 / math.sqrt(r2) - 1.0
            xhh = 0.0
            for a in range(k):
                s = 0.0
                for b in range(k):
                    s += Hx[a, b] * xh[b]
                h[a] = s
                xhh += xh[a] * s
            c = 0.5 * f * f * xhh
            for a in range(k):
                u[a] = f * h[a] + c * xh[a]
            for a in range(k):
                for b in range(k):
                    A[a, b] -= u[a] * xh[b] + xh[a] * u[b]
        else:
            for a in range(k):
                xh[a] = x[a]
        for a in range(k):
            A[a, a] += li
        _jacobi_eigh(A, P)
        _sort_and_sign(A, P, alpha)
        for b in range(k):
            s = 0.0
            for a in range(k):
                s += x[a] * P[a, b]
            z[b] = s
        r2_new = _ball_sweep(z, r2, alpha, K, rng)
        nn2 = 0.0
        for a in range(k):
            s = 0.0
            for b in range(k):
                s += P[a, b] * z[b]
            xn[a] = s
            nn2 += s * s
        # T = C_old^{-1/2} C_new^{1/2} = (I + f x̂x̂ᵀ)(I + g x̂ₙx̂ₙᵀ), g = √r²ₙ − 1
        for a in range(k):
            for b in range(k):
                T[a, b] = f * xh[a] * xh[b]
            T[a, a] += 1.0
        g = 0.0
        if nn2 > 0.0:
            nn = math.sqrt(nn2)
            for a in range(k):
                xnh[a] = xn[a] / nn
            g = math.sqrt(r2_new) - 1.0
            for a in range(k):
                s = 0.0
                for b in range(k):
                    s += T[a, b] * xnh[b]
                col[a] = g * s
            for a in range(k):
                for b in range(k):
                    T[a, b] += col[a] * xnh[b]
        # W ← W T as a rank-2 update (row i is overwritten below)
        if g != 0.0:
            dot = 0.0
            for a in range(k):
                dot += xh[a] * xnh[a]
            fd = f * dot
            _rows_combination(xnh, Wt, w)
            if f != 0.0:
                for r in range(p):
                    w[r] += fd * v[r]
        for b in range(k):
            cf = f * xh[b]
            cg = g * xnh[b]
            if cf != 0.0 and cg != 0.0:
                for r in range(p):
                    Wt[b, r] += cf * v[r] + cg * w[r]
            elif cf != 0.0:
                for r in range(p):
                    Wt[b, r] += cf * v[r]
            elif cg != 0.0:
                for r in range(p):
                    Wt[b, r] += cg * w[r]
        for a in range(k):
            Wt[a, i] = xn[a]
        # H ← Tᵀ Hₓ T + λᵢ xₙxₙᵀ
        for a in range(k):
            for b in range(k):
                s = 0.0
                for c2 in range(k):
                    s += Hx[a, c2] * T[c2, b]
                TH[a, b] = s
        for a in range(k):
            for b in range(k):
                s = 0.0
                for c2 in range(k):
                    s += T[c2, a] * TH[c2, b]
                H[a, b] = s + li * xn[a] * xn[b]
    return Wt


# --------------------------------------------------------------------------------------------
# Whole chains (one compiled call: passing a Generator into numba costs ~0.1 ms per call)
# --------------------------------------------------------------------------------------------


@numba.njit(**_JIT)
def vector_chain(y, lam, shifted, n_sweeps, rng):
    """``n_sweeps`` vector sweeps (``k = 1``) with tilt ``shifted``; returns ``(y, trace)``.

    ``trace[s] = Σ λᵢ yᵢ²`` after sweep ``s`` (``lam`` unshifted).
    """
    trace = np.empty(n_sweeps)
    for s in range(n_sweeps):
        y = vector_sweep(y, shifted, rng)
        acc = 0.0
        for i in range(y.size):
            acc += lam[i] * y[i] * y[i]
        trace[s] = acc
    return y, trace


@numba.njit(**_JIT)
def _orthonormalise_rows(Wt):
    """Gram-Schmidt, twice per row (CGS2), on the rows of ``Wt``, in place."""
    k, p = Wt.shape
    for a in range(k):
        for _ in range(2):
            for b in range(a):
                c = 0.0
                for i in range(p):
                    c += Wt[a, i] * Wt[b, i]
                for i in range(p):
                    Wt[a, i] -= c * Wt[b, i]
        nrm = 0.0
        for i in range(p):
            nrm += Wt[a, i] * Wt[a, i]
        nrm = math.sqrt(nrm)
        for i in range(p):
            Wt[a, i] /= nrm


@numba.njit(**_JIT)
def row_chain(Wt, lam, shifted, n_sweeps, rng):
    """``n_sweeps`` row sweeps of ``Wt = Wᵀ`` (k × p), each followed by re-orthonormalisation.

    Rounding drift is removed as by the reference ``_orthonormalise`` (the Q of the QR
    factorisation of ``W`` whose R has a positive diagonal), here by Gram-Schmidt with
    reorthogonalisation on the rows of ``Wt`` — stable for a ``W`` this close to orthonormal.
    Returns ``(Wt, trace)``, ``trace[s] = tr(WᵀΛW)`` after sweep ``s`` (``lam`` unshifted).
    """
    k, p = Wt.shape
    trace = np.empty(n_sweeps)
    for s in range(n_sweeps):
        row_sweep(Wt, shifted, rng)
        _orthonormalise_rows(Wt)
        acc = 0.0
        for a in range(k):
            for i in range(p):
                acc += lam[i] * Wt[a, i] * Wt[a, i]
        trace[s] = acc
    return Wt, trace
