"""DP-PCA's two private subroutines on a minibatch of gradients (Liu, Kong, Jain & Oh 2022).

* :class:`PrivateTopEigenvalue` — Algorithm 4: the scale of the gradients' spread.
* :class:`PrivateMean` — Algorithm 5: their mean, with noise proportional to that spread
  rather than to their norm.

Both take gradients as rows of a ``(b, q)`` array (``q = p·k`` for a rank-k block) and are
(ε, δ)-DP under replacement of one row, **whatever the data**: no norm bound is assumed. The
constants the paper leaves implicit are parameters, named below; privacy never depends on
them, only accuracy does. ALGORITHMS.md marks this reconstruction **[reconstructed]**.

Algorithm 4 (private top eigenvalue)
------------------------------------
1. Pair differences ``g̃_i = (g_{2i} − g_{2i−1})/√2``: zero mean, same covariance as ``g``.
2. Split them, in order, into ``m`` subsets of equal size; ``λ_j`` is the top eigenvalue of
   subset ``j``'s second-moment matrix ``(1/s) Σ g̃ g̃ᵀ`` (power iteration, from a fixed start).
3. Stability histogram (Laplace) of the ``λ_j`` over geometric bins ``[√2^i, √2^(i+1))``;
   return the **upper** edge of the most occupied released bin (so the estimate errs towards
   less truncation), or nothing if no bin clears the threshold.

Replacing one gradient changes one pair, hence one ``λ_j``: one value moves between bins
(:mod:`privpca.mechanisms.histogram`).

Algorithm 5 (private mean)
--------------------------
1. Centre: for every coordinate, a stability histogram (Gaussian noise, all ``q`` coordinates
   calibrated jointly) over bins of width ``h = bin_width·√Λ``; the centre ``c`` is the middle
   of the most occupied released bin, or 0 where none is released (counted, not hidden).
2. Truncate every gradient into the box ``c ± r`` per coordinate, with
   ``r = radius·√Λ·ln(b·q/ζ) + h`` (Lemma 6.2's ``3K√Λ·log^a(Bd/ζ)`` with ``a = 1``, and the
   centre's uncertainty ``h``).
3. Release the truncated mean plus ``N(0, σ² I)``: replacing one gradient moves the mean by at
   most the box's L2 diameter over b, ``Δ = 2r√q/b``, and ``σ = m·Δ``.

The histogram noise and the Gaussian noise are one Gaussian mechanism for accounting purposes
(their privacy losses add): with total multiplier ``m_tot`` for the requested (ε, δ), the centre
gets ``m_tot/√ρ`` and the mean ``m_tot/√(1 − ρ)`` (``1/m_tot² = 1/m_c² + 1/m²``), where
``ρ = centre_fraction``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import dp_accounting
import numpy as np
from numpy.typing import NDArray

from privpca._validation import (
    check_delta,
    check_epsilon,
    check_in_range,
    refuse_non_finite,
)
from privpca.accounting.calibration import analytic_multiplier, share_multiplier, threshold_tail
from privpca.mechanisms.histogram import (
    StabilityHistogram,
    column_bin_counts,
    geometric_bin,
    geometric_bin_edges,
    window_bin_counts,
)
from privpca.mechanisms.noise import gaussian_release

__all__ = ["MeanRelease", "PrivateMean", "PrivateTopEigenvalue"]

#: Power-iteration steps for each subset eigenvalue of Algorithm 4 (a fixed, public count).
POWER_ITERATIONS = 20


def subset_top_eigenvalues(
    pairs: NDArray[np.float64], n_subsets: int, *, n_iter: int = POWER_ITERATIONS
) -> NDArray[np.float64]:
    """Top eigenvalue of each of ``n_subsets`` consecutive blocks' second-moment matrices.

    Power iteration on the smaller of the ``s×s`` Gram and the ``q×q`` second-moment matrix
    of each block, from a fixed all-ones start (data-independent), finishing with a Rayleigh
    quotient: one compiled pass (:func:`privpca.mechanisms._kernels.top_eigenvalues`) that
    never forms the matrices, or its NumPy twin on small inputs (the same bits). Accurate to
    well within the √2 width of the histogram's bins.
    """
    from privpca.mechanisms._numpy_kernels import kernel

    P = np.ascontiguousarray(pairs, dtype=np.float64)
    out = np.zeros(n_subsets)
    if P.shape[0] >= n_subsets > 0:  # else every block is empty: eigenvalue 0
        kernel("top_eigenvalues", P.size)(P, int(n_subsets), int(n_iter), out)
    return out


@dataclass(frozen=True)
class PrivateTopEigenvalue:
    """Algorithm 4, calibrated: (ε, δ)-DP estimate of the gradients' top eigenvalue.

    Build with :meth:`calibrate`; see the module docstring for the algorithm.

    Attributes
    ----------
    histogram : StabilityHistogram
        Laplace stability histogram over the ``n_subsets`` subset eigenvalues.
    n_subsets : int
        ``m``, the number of subsets (histogram entries).
    """

    histogram: StabilityHistogram
    n_subsets: int

    @classmethod
    def calibrate(
        cls,
        epsilon: float,
        delta: float,
        *,
        n_subsets: int | None = None,
        subsets_factor: float = 3.0,
    ) -> PrivateTopEigenvalue:
        """Calibrate for (ε, δ); ``n_subsets=None`` uses ``⌈subsets_factor · threshold⌉``.

        The threshold is the count a bin needs to be released; when the subset eigenvalues
        fall in two adjacent bins, the fuller holds at least half of them, so
        ``subsets_factor ≥ 2`` plus a margin for the noise makes a release likely.
        """
        hist = StabilityHistogram.calibrate(epsilon, delta, n_histograms=1, noise="laplace")
        if n_subsets is None:
            check_in_range(subsets_factor, "subsets_factor", low=1.0, owner="DPPCA")
            n_subsets = math.ceil(subsets_factor * hist.threshold)
        return cls(hist, int(n_subsets))

    def min_gradients(self) -> int:
        """Fewest gradients that give every subset one pair difference."""
        return 2 * self.n_subsets

    def estimate(
        self, gradients: NDArray[np.float64], rng: np.random.Generator
    ) -> float | None:
        """The released upper bin edge ``Λ``, or ``None`` when no bin is released."""
        G = gradients
        n_pairs = G.shape[0] // 2
        self._check_pairs(n_pairs)
        pairs = (G[1 : 2 * n_pairs : 2] - G[0 : 2 * n_pairs : 2]) / math.sqrt(2.0)
        return self.estimate_pairs(pairs, rng)

    def _check_pairs(self, n_pairs: int) -> None:
        if n_pairs < self.n_subsets:
            raise ValueError(
                f"Algorithm 4 needs at least {self.min_gradients()} gradients for "
                f"{self.n_subsets} subsets; got {2 * n_pairs}."
            )

    def estimate_pairs(
        self, pairs: NDArray[np.float64], rng: np.random.Generator
    ) -> float | None:
        """:meth:`estimate` from the pair differences ``g̃ᵢ`` already formed (step 1 done).

        Parameters
        ----------
        pairs : ndarray of shape (n_pairs, q)
            ``(g_{2i+1} − g_{2i})/√2`` of consecutive gradients of the half-batch (each
            gradient in one pair), e.g. from :func:`privpca.mechanisms._kernels.pair_gradients`.
        rng : numpy.random.Generator

        Returns
        -------
        float or None
        """
        self._check_pairs(pairs.shape[0])
        return self._release(subset_top_eigenvalues(pairs, self.n_subsets), rng)

    def estimate_rows(
        self,
        X: NDArray[np.float64],
        rows: NDArray[np.intp],
        centre: NDArray[np.float64],
        W: NDArray[np.float64],
        rng: np.random.Generator,
    ) -> float | None:
        """:meth:`estimate` on the gradients ``yᵢ(yᵢᵀW)``, ``yᵢ = X[rows[i]] − centre``.

        One compiled pass (:func:`privpca.mechanisms._kernels.pair_top_eigenvalues`, or its
        NumPy twin on small tables: the same bits) forms the pair differences subset by
        subset with their eigenvalues: the same values as :meth:`estimate` on those
        gradients. A row holding NaN or infinity is refused
        (``ValueError``) before the histogram is released.

        Parameters
        ----------
        X : ndarray of shape (n, p), C-ordered float64
        rows : ndarray of intp
            Rows of ``X``, paired in order: ``(rows[2i], rows[2i+1])``.
        centre : ndarray of shape (p,)
            Subtracted from every row (zeros: no centring).
        W : ndarray of shape (p, k)
        rng : numpy.random.Generator

        Returns
        -------
        float or None
        """
        from privpca.mechanisms._numpy_kernels import kernel

        self._check_pairs(rows.shape[0] // 2)
        pair_top_eigenvalues = kernel("pair_top_eigenvalues", rows.shape[0] * W.size)
        lambdas = np.zeros(self.n_subsets)
        if pair_top_eigenvalues(X, rows, centre, np.ascontiguousarray(W), self.n_subsets,
                                POWER_ITERATIONS, lambdas):
            refuse_non_finite(X[rows], "X")  # else finite values overflowed: go on
        return self._release(lambdas, rng)

    def _release(self, lambdas: NDArray[np.float64], rng: np.random.Generator) -> float | None:
        """Step 3: the histogram of the subset eigenvalues ``lambdas``."""
        release = self.histogram.release_modes(geometric_bin(lambdas)[:, None], rng)
        if not release.released[0]:
            return None
        upper = geometric_bin_edges(int(release.mode[0]))[1]
        return upper if upper > 0 else None

    def dp_event(self) -> dp_accounting.DpEvent:
        return self.histogram.dp_event()


@dataclass(frozen=True)
class MeanRelease:
    """One private mean: the estimate and what was used to make it (all public)."""

    mean: NDArray[np.float64]
    radius: float
    sensitivity: float
    noise_scale: float
    n_centre_failures: int
    centre: NDArray[np.float64] = field(repr=False)


@dataclass(frozen=True)
class PrivateMean:
    """Algorithm 5, calibrated for ``n_coordinates`` coordinates: (ε, δ)-DP mean.

    Attributes
    ----------
    centre_histogram : StabilityHistogram
        Gaussian stability histogram, one per coordinate, calibrated jointly.
    noise_multiplier : float
        ``σ/Δ`` of the Gaussian mechanism on the truncated mean.
    bin_width, radius, zeta : float
        ``h = bin_width·√Λ``; ``r = radius·√Λ·ln(b·q/ζ) + h`` (module docstring).
    """

    centre_histogram: StabilityHistogram
    noise_multiplier: float
    bin_width: float = 4.0
    radius: float = 1.0
    zeta: float = 0.01

    @classmethod
    def calibrate(
        cls,
        epsilon: float,
        delta: float,
        n_coordinates: int,
        *,
        centre_fraction: float = 0.25,
        bin_width: float = 4.0,
        radius: float = 1.0,
        zeta: float = 0.01,
        tail_fraction: float = 0.5,
    ) -> PrivateMean:
        """Split (ε, δ) between the centre histograms and the mean (module docstring)."""
        epsilon = check_epsilon(epsilon, owner="PrivateMean")
        delta = check_delta(delta, owner="PrivateMean")
        check_in_range(centre_fraction, "centre_fraction", low=0, high=1, owner="PrivateMean")
        check_in_range(bin_width, "bin_width", low=0, owner="PrivateMean")
        check_in_range(radius, "radius", low=0, owner="PrivateMean")
        check_in_range(zeta, "zeta", low=0, high=1, owner="PrivateMean")
        m_total = analytic_multiplier(epsilon, (1 - tail_fraction) * delta)
        m_centre = share_multiplier(m_total, centre_fraction)
        m_mean = share_multiplier(m_total, 1.0 - centre_fraction)
        tail = threshold_tail(epsilon, delta, tail_fraction)
        hist = StabilityHistogram.gaussian(m_centre, n_histograms=int(n_coordinates), tail=tail)
        return cls(hist, m_mean, bin_width, radius, zeta)

    @property
    def n_coordinates(self) -> int:
        return self.centre_histogram.n_histograms

    def dp_event(self) -> dp_accounting.DpEvent:
        return dp_accounting.ComposedDpEvent(
            [self.centre_histogram.dp_event(), dp_accounting.GaussianDpEvent(self.noise_multiplier)]
        )

    def _bin_width(self, eigenvalue: float) -> tuple[float, float]:
        """``(√Λ, h = bin_width·√Λ)`` for a released eigenvalue ``Λ``."""
        check_in_range(eigenvalue, "eigenvalue", low=0, owner="PrivateMean")
        scale = math.sqrt(eigenvalue)
        return scale, self.bin_width * scale

    def estimate(
        self, gradients: NDArray[np.float64], eigenvalue: float, rng: np.random.Generator
    ) -> MeanRelease:
        """Private mean of the rows of ``gradients`` given the released eigenvalue ``Λ``."""
        from privpca.mechanisms._kernels import bin_range

        G = np.ascontiguousarray(gradients, dtype=np.float64)
        b, q = G.shape
        if q != self.n_coordinates:
            raise ValueError(f"expected {self.n_coordinates} coordinates, got {q}")
        scale, h = self._bin_width(eigenvalue)
        low, high = np.empty(q, dtype=np.int64), np.empty(q, dtype=np.int64)
        bin_range(G, 1.0 / h, low, high)
        return self._release(G, b, scale, h, column_bin_counts(G, b, h, low, high), rng)

    def estimate_rows(
        self,
        X: NDArray[np.float64],
        rows: NDArray[np.intp],
        centre: NDArray[np.float64],
        W: NDArray[np.float64],
        eigenvalue: float,
        rng: np.random.Generator,
        *,
        out: NDArray[np.float64] | None = None,
    ) -> MeanRelease:
        """:meth:`estimate` on the gradients ``yᵢ(yᵢᵀW)``, ``yᵢ = X[rows[i]] − centre``.

        The gradients are formed in the same compiled pass that counts each coordinate's
        bins, into ``out`` when given (a reusable ``(≥ len(rows), p·k)`` C-ordered buffer),
        then read once more for the truncated sums: two passes in all. A row holding NaN or
        infinity is refused (``ValueError``) before anything is released.

        Parameters
        ----------
        X : ndarray of shape (n, p), C-ordered float64
        rows : ndarray of intp
        centre : ndarray of shape (p,)
            Subtracted from every row (zeros: no centring).
        W : ndarray of shape (p, k)
        eigenvalue : float
            The released ``Λ``.
        rng : numpy.random.Generator
        out : ndarray, optional

        Returns
        -------
        MeanRelease
        """
        from privpca.mechanisms._numpy_kernels import WINDOW, kernel

        b, q = rows.shape[0], W.size
        gradient_counts = kernel("gradient_counts", b * q)  # NumPy on small tables
        if q != self.n_coordinates:
            raise ValueError(f"expected {self.n_coordinates} coordinates, got {q}")
        scale, h = self._bin_width(eigenvalue)
        G = np.empty((b, q)) if out is None else out
        base, table = np.empty(q, dtype=np.int64), np.empty((q, WINDOW + 2), dtype=np.int64)
        if gradient_counts(X, rows, centre, np.ascontiguousarray(W), 1.0 / h, G, base, table):
            refuse_non_finite(X[rows], "X")  # else finite values overflowed: go on
        return self._release(G, b, scale, h, window_bin_counts(G, b, h, base, table), rng)

    def _release(
        self,
        G: NDArray[np.float64],
        b: int,
        scale: float,
        h: float,
        bins: tuple[NDArray[np.intp], NDArray[np.int64], NDArray[np.float64]],
        rng: np.random.Generator,
    ) -> MeanRelease:
        """Steps 1–3 of the module docstring on the gradients ``G[:b]`` (bins counted)."""
        from privpca.mechanisms._numpy_kernels import kernel

        q = G.shape[1]
        truncated_sums = kernel("truncated_sums", b * q)  # NumPy on small tables
        release = self.centre_histogram.release_counts(*bins, rng)
        centre = np.where(release.released, (release.mode + 0.5) * h, 0.0)
        r = self.radius * scale * math.log(b * q / self.zeta) + h
        sums = np.empty(q)
        truncated_sums(G, b, centre - r, centre + r, sums)
        sensitivity = 2.0 * r * math.sqrt(q) / b
        sigma = self.noise_multiplier * sensitivity
        mean = gaussian_release(sums / b, sigma, rng, sensitivity=sensitivity)
        return MeanRelease(
            mean, r, sensitivity, sigma, int((~release.released).sum()), centre
        )
