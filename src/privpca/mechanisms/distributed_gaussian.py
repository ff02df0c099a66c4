"""The distributed discrete Gaussian: each provider's share of one central release's noise.

N data providers each hold rows; an untrusted server may learn only the **sum** of their
answers (mean sums, histogram counts, power-method products ``XᵢᵀXᵢQ``, variances), through a
secure aggregation that sums integer vectors modulo ``2^b``. Each provider therefore turns its
real answer into integers on a public grid and adds its share of integer noise, so that the
shares of the surviving honest providers carry the noise of **one** central release
(Kairouz, Liu & Steinke 2021, "The Distributed Discrete Gaussian Mechanism for Federated
Learning with Secure Aggregation", ICML; arXiv 2102.06387: "KLS" below). It is the
distributed form of the secure path of :mod:`privpca.mechanisms.noise`: the value snapped to
a power-of-two grid Λ, exact discrete Gaussian noise ``Λ·K``, the rounding covered by raising
the noise to ``σ' = σ_c·(Δ + Λ√d)/Δ``.

Neighbouring relation and sensitivity
-------------------------------------
Δ is the caller's L2 sensitivity of the summed answer under the caller's neighbouring relation
(replace-one or add/remove-one record). A record belongs to one provider, so between
neighbouring datasets only that provider's answer moves, by at most Δ in L2. Its code
``round(v/Λ)`` moves by at most ``Δ/Λ + √d`` (each coordinate's rounding error is below 1/2
on each side), and every other provider rounds exactly as before: the sum of the codes has
the integer L2 sensitivity ``Δ_ℤ = Δ/Λ + √d`` (:attr:`DistributedGaussianPlan.integer_sensitivity`).

Calibration
-----------
Each provider adds ``K ~ N_ℤ(0, s²)`` per coordinate. With ``m`` the agreed minimum number of
survivors and ``t`` the providers that may pool their noise with the server (know it, or add
none), at least ``m − t`` honest shares are in every opened sum; s is sized so that
``(m − t)·(sΛ)² ≥ σ'²``, i.e. ``Δ_ℤ/(√(m−t)·s) ≤ Δ/σ_c``: the honest noise matches, in grid
units, the central release's noise-to-sensitivity ratio. More honest shares (more survivors,
fewer colluders) only add independent noise: post-processing of the ``m − t`` case.

Privacy (KLS 2021, the sum of discrete Gaussians)
-------------------------------------------------
A sum of n independent ``N_ℤ(0, s²)`` is not a discrete Gaussian. The authors' reference
accounting (google-research/federated, ``distributed_dp/accounting_utils.py``,
``compute_rdp_dgaussian``: "Proposition 14 / Eq. 17") bounds, for s ≥ 1/2, every order α > 1,

    ``D_α ≤ min{ α·Δ_ℤ²/(2ns²) + τd,  (α/2)·(Δ_ℤ/(√n·s) + τ√d)² }``,
    ``τ = 10·Σ_{k=1}^{n−1} exp(−2π²s²·k/(k+1))``.

The largest ρ with ``D_α ≤ ρα`` for all α > 1 that this gives is ``ρ = ε²/2`` with
``ε = min{ √(Δ_ℤ²/(ns²) + 2τd),  Δ_ℤ/(√n·s) + τ√d }`` (:func:`kls_epsilon`). KLS's Theorem 1
is quoted elsewhere with ``½τd`` in the first branch; ``2τd`` is what follows from the RDP
bound above and is never smaller, so it is used. The shares here have ``s ≥ 2^GRID_BITS``: τ
underflows to 0 and ``ρ = Δ_ℤ²/(2ns²) ≤ Δ²/(2σ_c²)``, the central Gaussian's ρ. A ρ-zCDP
mechanism has the RDP curve αρ of a Gaussian with noise multiplier ``1/√(2ρ)``, so (ε, δ) is
that Gaussian event in dp-accounting's RDP accountant
(:func:`privpca.accounting.compose_epsilon`): a cross-check. The fits account the opened sum
as the central Gaussian it equals: by Poisson summation the sum's pmf is ``N_ℤ(0, ns²)``'s
times a factor within ``1 ± η`` with η below ``exp(−10¹⁸)`` at these s (the argument in
:mod:`privpca.federated.protocol.secure_sums`), so its privacy curve is the discrete
Gaussian's, which is the continuous one's to a relative ``e^(−2π²ns²)`` (Canonne, Kamath &
Steinke 2020) — the exact (Balle–Wang) curve, not the RDP conversion
(:meth:`~DistributedGaussianPlan.central_epsilon` gives both).

Threat model
------------
Honest-but-curious server, which sees only the opened sum (secure aggregation's guarantee);
up to t providers colluding with it (their codes and noise known, or their noise omitted);
dropouts down to m survivors (the aggregation must refuse to open a sum of fewer). The
guarantee is for the records of honest providers, against the server alone
(``colluders=0``: m honest shares) and the server with j ≤ t colluders (``m − j`` shares).

Rounding, bias and bit width
----------------------------
KLS round a coarse grid (γ chosen for 16–20 bits) with conditional randomised rounding, to
keep the sum unbiased and the rounded norm bounded. Here the grid is 2^-GRID_BITS below each
share's noise and the words are up to 64 bits, so deterministic rounding is used and its
extra sensitivity ``Λ√d`` charged exactly. Its bias is at most Λ/2 per provider and
coordinate, ``NΛ/2`` in the sum: with ``Λ ≤ 2^-30·σ_c/√(m−t)`` that is below
``N·2^-31/√(m−t)`` times the noise's standard deviation (below 5·10⁻⁶ for N = 10⁴).
The bit width b is the smallest with ``P(wrap) ≤ wrap_target``: ``|Σ codes| ≤ N·⌈B/Λ⌉``,
and ``N_ℤ(0, s²)`` is sub-Gaussian, ``E[e^{λK}] ≤ e^{λ²s²/2}`` (Canonne, Kamath & Steinke
2020), so a sum of at most N shares has ``P(|ΣK| ≥ x) ≤ 2·exp(−x²/(2Ns²))``; a union bound
over the d coordinates. Wrapping is post-processing of the opened sum: it can cost accuracy,
never privacy.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import dp_accounting
import numpy as np
from numpy.typing import ArrayLike, NDArray

from privpca.accounting import calibration
from privpca.accounting.composition import compose_epsilon
from privpca.mechanisms.noise import grid_step
from privpca.mechanisms.randomness import check_noise_rng
from privpca.mechanisms.secure_noise import discrete_gaussian

__all__ = ["MAX_BITS", "DistributedGaussianPlan", "kls_epsilon", "kls_tau", "zcdp_epsilon"]

#: Widest word: residues and sums are uint64.
MAX_BITS = 64


def kls_tau(sigma: float, shares: int) -> float:
    """KLS's ``τ = 10·Σ_{k=1}^{n−1} exp(−2π²σ²·k/(k+1))`` for n shares of ``N_ℤ(0, σ²)``.

    0 for one share (a discrete Gaussian itself); below 10⁻¹⁵⁰ from σ = 6 and 0 in float64
    from σ ≈ 9 (the shares of :class:`DistributedGaussianPlan` have σ ≥ 2^GRID_BITS).
    """
    n = _check_int(shares, "shares", "kls_tau", low=1)
    sigma = _check_positive(sigma, "sigma", "kls_tau")
    if n == 1:
        return 0.0
    k = np.arange(1, n, dtype=np.float64)
    return float(10.0 * np.exp(-2.0 * math.pi**2 * sigma**2 * k / (k + 1.0)).sum())


def kls_epsilon(sensitivity: float, sigma: float, shares: int, coordinates: int) -> float:
    """The ε of ``½ε²``-zCDP for a sum of n independent ``N_ℤ(0, σ²)`` per coordinate.

    ``ε = min{ √(Δ²/(nσ²) + 2τd),  Δ/(√n·σ) + τ√d }`` with τ from :func:`kls_tau`: the bound
    of KLS 2021 (Proposition 14's RDP curve, module docstring) on an integer query.

    Parameters
    ----------
    sensitivity : float
        The integer query's L2 sensitivity Δ (grid units), under the caller's relation.
    sigma : float
        Each share's scale σ ≥ 1/2 (grid units).
    shares : int
        n, the number of independent shares summed.
    coordinates : int
        d, the number of coordinates.
    """
    delta = _check_positive(sensitivity, "sensitivity", "kls_epsilon")
    sigma = _check_positive(sigma, "sigma", "kls_epsilon")
    if sigma < 0.5:
        raise ValueError("The 'sigma' parameter of kls_epsilon must be a float in the range "
                         f"[0.5, inf) (KLS's theorem needs it). Got {sigma!r} instead.")
    n = _check_int(shares, "shares", "kls_epsilon", low=1)
    d = _check_int(coordinates, "coordinates", "kls_epsilon", low=1)
    tau = kls_tau(sigma, n)
    ratio = delta / (math.sqrt(n) * sigma)
    return min(math.sqrt(ratio**2 + 2.0 * tau * d), ratio + tau * math.sqrt(d))


def zcdp_epsilon(rho: float, delta: float) -> float:
    """(ε at δ) of a ρ-zCDP mechanism: the Gaussian event of multiplier ``1/√(2ρ)`` (the same
    RDP curve αρ) in dp-accounting's RDP accountant (:func:`privpca.accounting.compose_epsilon`)."""
    rho = _check_positive(rho, "rho", "zcdp_epsilon")
    return compose_epsilon([dp_accounting.GaussianDpEvent(1.0 / math.sqrt(2.0 * rho))],
                           delta, accountant="rdp")


@dataclass(frozen=True)
class DistributedGaussianPlan:
    """The public plan of one distributed discrete Gaussian release (module docstring).

    Every parameter is public; the plan never reads data.

    Parameters
    ----------
    central_sigma : float
        σ_c, the noise standard deviation one central release of this sum needs (the
        caller's calibration for ``sensitivity`` under its neighbouring relation).
    sensitivity : float
        Δ, the L2 sensitivity of the summed answer (one record moves one provider's answer).
    coordinates : int
        d, the number of coordinates of each answer (and of the release).
    min_providers : int
        m ≥ 1, the agreed minimum number of survivors whose shares are summed.
    colluders : int
        t with 0 ≤ t < m: providers that may pool their noise with the server.
    value_bound : float
        B ≥ 0, a public bound on each provider's ``|answer|`` per coordinate (``nᵢ·D²`` for a
        Gram product); larger values are refused by :meth:`encode`.
    max_providers : int
        N ≥ m, the most providers whose shares can be summed.
    wrap_target : float, default=1e-9
        The largest accepted probability that the opened sum wraps around ``2^b``.

    Attributes
    ----------
    grid : float
        Λ, the power of two ``grid_step(σ_c/√(m−t))``.
    covered_sigma : float
        σ' = σ_c·(Δ + Λ√d)/Δ, the central noise that covers the rounding.
    share_sigma : float
        s, each share's discrete Gaussian scale in grid units: ``(m−t)·(sΛ)² ≥ σ'²``.
    max_code : int
        ``⌈B/Λ⌉``, the largest ``|code|`` of one answer.
    bits : int
        b, the smallest word (≤ 64) with :meth:`wrap_probability` ≤ ``wrap_target``.

    Raises
    ------
    ValueError
        For a parameter out of its range, or when 64 bits cannot meet ``wrap_target``.
    """

    central_sigma: float
    sensitivity: float
    coordinates: int
    min_providers: int
    colluders: int
    value_bound: float
    max_providers: int
    wrap_target: float = 1e-9
    grid: float = field(init=False)
    covered_sigma: float = field(init=False)
    share_sigma: float = field(init=False)
    max_code: int = field(init=False)
    bits: int = field(init=False)

    def __post_init__(self) -> None:
        owner = type(self).__name__
        sigma_c = _check_positive(self.central_sigma, "central_sigma", owner)
        delta = _check_positive(self.sensitivity, "sensitivity", owner)
        d = _check_int(self.coordinates, "coordinates", owner, low=1)
        m = _check_int(self.min_providers, "min_providers", owner, low=1)
        t = _check_int(self.colluders, "colluders", owner, low=0, high=m - 1)
        n_max = _check_int(self.max_providers, "max_providers", owner, low=m)
        bound = float(self.value_bound)
        if not (bound >= 0.0 and math.isfinite(bound)):
            raise ValueError(f"The 'value_bound' parameter of {owner} must be a float in the "
                             f"range [0, inf). Got {self.value_bound!r} instead.")
        target = float(self.wrap_target)
        if not 0.0 < target < 1.0:
            raise ValueError(f"The 'wrap_target' parameter of {owner} must be a float in the "
                             f"range (0, 1). Got {self.wrap_target!r} instead.")
        honest = m - t
        lam = grid_step(sigma_c / math.sqrt(honest))
        covered = sigma_c * (delta + lam * math.sqrt(d)) / delta
        s = covered / (lam * math.sqrt(honest))
        while honest * (s * lam) ** 2 < covered**2:  # a last ulp of rounding, never less noise
            s = math.nextafter(s, math.inf)
        ratio = bound / lam
        if not math.isfinite(ratio) or ratio >= 2.0**63:
            raise ValueError(self._too_wide(bound, lam, n_max))
        for name, value in (("central_sigma", sigma_c), ("sensitivity", delta),
                            ("coordinates", d), ("min_providers", m), ("colluders", t),
                            ("max_providers", n_max), ("value_bound", bound),
                            ("wrap_target", target), ("grid", lam), ("covered_sigma", covered),
                            ("share_sigma", s), ("max_code", math.ceil(ratio))):
            object.__setattr__(self, name, value)
        bits = next((b for b in range(1, MAX_BITS + 1) if self.wrap_probability(b) <= target),
                    None)
        if bits is None:
            raise ValueError(self._too_wide(bound, lam, n_max))
        object.__setattr__(self, "bits", bits)

    def _too_wide(self, bound: float, lam: float, n_max: int) -> str:
        return (f"DistributedGaussianPlan: {MAX_BITS} bits cannot hold the sum of {n_max} "
                f"answers bounded by {bound!r} on the grid {lam!r} plus their noise with a wrap "
                f"probability at most {self.wrap_target!r}: lower 'value_bound' or "
                "'max_providers', raise 'wrap_target', or split the query.")

    # ------------------------------------------------------------------ public quantities
    @property
    def integer_sensitivity(self) -> float:
        """``Δ_ℤ = Δ/Λ + √d``: the L2 sensitivity of the summed codes (grid units)."""
        return self.sensitivity / self.grid + math.sqrt(self.coordinates)

    def wrap_probability(self, bits: int | None = None) -> float:
        """A bound on the probability that the opened sum wraps around ``2^bits``.

        ``min{1, 2d·exp(−x²/(2Ns²))}`` with ``x = 2^(b−1) − N·max_code``: the sum of at most N
        codes and N shares decodes exactly unless some coordinate's noise reaches x.
        """
        b = self.bits if bits is None else _check_int(bits, "bits", "wrap_probability",
                                                       low=1, high=MAX_BITS)
        x = 2 ** (b - 1) - self.max_providers * self.max_code
        if x <= 0:
            return 1.0
        log_p = (math.log(2.0 * self.coordinates)
                 - float(x) ** 2 / (2.0 * self.max_providers * self.share_sigma**2))
        return min(1.0, math.exp(log_p))

    # ------------------------------------------------------------------ the provider's side
    def encode(self, value: ArrayLike) -> NDArray[np.int64]:
        """``round(value/Λ)`` as int64 (same shape), refusing what the plan does not cover.

        Raises
        ------
        ValueError
            When ``value`` does not have ``coordinates`` entries, is not finite, or exceeds
            ``value_bound`` in absolute value (it would break the bit width).
        """
        v = np.asarray(value, dtype=np.float64)
        if v.size != self.coordinates:
            raise ValueError(f"DistributedGaussianPlan.encode: the plan covers "
                             f"{self.coordinates} coordinates; got a value of shape {v.shape}.")
        if not np.all(np.isfinite(v)):
            raise ValueError("DistributedGaussianPlan.encode: the value must be finite.")
        if np.any(np.abs(v) > self.value_bound):
            raise ValueError(
                f"DistributedGaussianPlan.encode: |value| reaches {float(np.abs(v).max())!r}, "
                f"beyond the public bound value_bound={self.value_bound!r}; the bit width "
                f"b={self.bits} was sized for that bound (clip the answer or raise the bound).")
        return np.round(v / self.grid).astype(np.int64)

    def share(self, value: ArrayLike, rng: np.random.Generator | None = None
              ) -> NDArray[np.uint64]:
        """One provider's message: ``(encode(value) + K) mod 2^b``, ``K ~ N_ℤ(0, s²)``.

        Parameters
        ----------
        value : array-like
            The provider's exact answer (``coordinates`` entries, ``|·| ≤ value_bound``).
        rng : numpy.random.Generator, optional
            The noise stream, through secure mode's rule (:func:`check_noise_rng`): ``None``
            draws a fresh OS-keyed :class:`~privpca.mechanisms.secure_noise.SecureGenerator`
            (a seeded generator makes the noise reproducible: tests only).

        Returns
        -------
        ndarray of uint64, same shape as ``value``
            Residues in ``[0, 2^b)``, for the secure aggregation.
        """
        rng = check_noise_rng(rng, owner="DistributedGaussianPlan.share")
        code = self.encode(value)
        k = np.asarray(discrete_gaussian(rng, self.share_sigma, code.size), dtype=np.int64)
        # Two's complement views add modulo 2⁶⁴ (1-d arrays: no scalar overflow warning);
        # 2^b divides 2⁶⁴, so reducing afterwards is reducing modulo 2^b.
        out = code.reshape(-1).view(np.uint64) + k.view(np.uint64)
        return self._reduce(out).reshape(code.shape)

    # ------------------------------------------------------------------ the server's side
    def decode_integers(self, sum_residues: ArrayLike, *, survivors: int | None = None
                        ) -> NDArray[np.int64]:
        """The signed representative in ``[−2^(b−1), 2^(b−1))`` of a sum of shares mod ``2^b``.

        ``survivors``, when given, is checked against ``[min_providers, max_providers]``: a sum
        of fewer shares than m carries less noise than planned (the aggregation must not open
        it), and more than N breaks the wrap bound.
        """
        if survivors is not None:
            _check_int(survivors, "survivors", "DistributedGaussianPlan.decode",
                       low=self.min_providers, high=self.max_providers)
        words = np.asarray(sum_residues, dtype=np.uint64)
        r = self._reduce(words.reshape(-1))
        if self.bits == MAX_BITS:
            return r.view(np.int64).reshape(words.shape)
        signed = r.astype(np.int64)
        signed[signed >= 1 << (self.bits - 1)] -= 1 << self.bits
        return signed.reshape(words.shape)

    def decode(self, sum_residues: ArrayLike, *, survivors: int | None = None
               ) -> NDArray[np.float64]:
        """``Λ ×`` :meth:`decode_integers`: the released sum (exact below 2⁵³ grid steps)."""
        return self.decode_integers(sum_residues, survivors=survivors).astype(np.float64) \
            * self.grid

    def _reduce(self, words: NDArray[np.uint64]) -> NDArray[np.uint64]:
        if self.bits == MAX_BITS:
            return np.array(words, dtype=np.uint64)
        return words & np.uint64((1 << self.bits) - 1)

    # ------------------------------------------------------------------ privacy
    def _honest_shares(self, colluders: int) -> int:
        j = _check_int(colluders, "colluders", "DistributedGaussianPlan's privacy", low=0,
                       high=self.colluders)
        return self.min_providers - j

    def rho(self, colluders: int = 0) -> float:
        """ρ (zCDP) against the server with ``colluders`` ≤ t colluding providers.

        ``ε²/2`` from :func:`kls_epsilon` with ``m − colluders`` shares of scale s and the
        integer sensitivity ``Δ_ℤ`` over d coordinates.
        """
        n = self._honest_shares(colluders)
        eps = kls_epsilon(self.integer_sensitivity, self.share_sigma, n, self.coordinates)
        return 0.5 * eps**2

    def epsilon(self, delta: float, colluders: int = 0) -> float:
        """(ε at δ) against the server with ``colluders`` ≤ t colluders (:func:`zcdp_epsilon`)."""
        return zcdp_epsilon(self.rho(colluders), delta)

    def central_rho(self) -> float:
        """``Δ²/(2σ_c²)``: the ρ of one central continuous Gaussian release at σ_c."""
        return 0.5 * (self.sensitivity / self.central_sigma) ** 2

    def central_epsilon(self, delta: float, *, exact: bool = False) -> float:
        """(ε at δ) of one central continuous Gaussian release at σ_c.

        Through the same RDP conversion as :meth:`epsilon` (the fair comparison), or, with
        ``exact=True``, the Gaussian's exact curve (Balle & Wang 2018), which no RDP
        conversion reaches.
        """
        if exact:
            return calibration.certified_epsilon(self.central_sigma, delta, self.sensitivity)
        return compose_epsilon(
            [dp_accounting.GaussianDpEvent(self.central_sigma / self.sensitivity)], delta,
            accountant="rdp")


def _check_positive(value: Any, name: str, owner: str) -> float:
    out = float(value)
    if not (out > 0.0 and math.isfinite(out)):
        raise ValueError(f"The {name!r} parameter of {owner} must be a float in the range "
                         f"(0, inf). Got {value!r} instead.")
    return out


def _check_int(value: Any, name: str, owner: str, *, low: int,
               high: int | None = None) -> int:
    ok = isinstance(value, int | np.integer) and not isinstance(value, bool | np.bool_)
    if not ok or value < low or (high is not None and value > high):
        upper = "inf)" if high is None else f"{high}]"
        raise ValueError(f"The {name!r} parameter of {owner} must be an int in the range "
                         f"[{low}, {upper}. Got {value!r} instead.")
    return int(value)
