"""Wang & Xu's non-interactive local protocol for the second-moment matrix.

Each user runs :class:`LocalCovarianceRandomiser` on their own record ``x`` (‖x‖ ≤ data_norm)
and sends one report: the packed upper triangle of ``x xᵀ`` (diagonal included, row-major,
length p(p+1)/2) plus i.i.d. Gaussian noise. The untrusted server feeds reports, in batches of
any size, to a :class:`LocalCovarianceAggregator`, which averages them into a symmetric noisy
second-moment matrix ``S̃``.

Privacy (per user, local model)
-------------------------------
* Neighbouring relation: one user's record replaced by any other record of norm ≤ data_norm.
* Sensitivity: with ``u(x)`` the packed upper triangle of ``x xᵀ`` and ‖x‖, ‖y‖ ≤ D,
  ``‖u(x)‖² ≤ D⁴`` and ``⟨u(x), u(y)⟩ = ½[(xᵀy)² + Σᵢ xᵢ²yᵢ²] ≥ 0``, so
  ``‖u(x) − u(y)‖₂ ≤ √2·D²``, attained at ``x = D e₁, y = D e₂``. **Δ = √2·D²** (default,
  ``sensitivity="replace"``). Wang & Xu's Algorithm 1 uses σ₁² = 2 ln(1.25/δ)/ε², i.e. Δ = 1,
  which is only right for add/remove-style neighbours; ``sensitivity="paper"`` reproduces it,
  and the privacy record then states the ε it really certifies under replacement.
* Calibration: Gaussian mechanism, analytic (default) or classic; see
  :mod:`privpca.mechanisms.gaussian`.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import ArrayLike, NDArray

from privpca._validation import (
    caller_stacklevel,
    check_data,
    check_in_range,
    check_options,
    check_party_delta,
    clip_rows,
)
from privpca.accounting.neighbouring import Neighbouring
from privpca.exceptions import PrivacyLeakWarning
from privpca.mechanisms.gaussian import (
    GaussianMechanism,
    certified_epsilon,
)
from privpca.mechanisms.noise import gaussian_release, symmetric_gaussian_release
from privpca.mechanisms.randomness import check_noise_rng
from privpca.solvers.gram import gram_matrix

__all__ = [
    "SENSITIVITY_RULES",
    "LocalCovarianceAggregator",
    "LocalCovarianceRandomiser",
    "covariance_sensitivity",
    "pack_upper_triangle",
    "simulate_report_sum",
    "unpack_upper_triangle",
]

SENSITIVITY_RULES: tuple[str, ...] = ("replace", "paper")


def covariance_sensitivity(data_norm: float, rule: str = "replace") -> float:
    """L2 sensitivity of the packed upper triangle of ``x xᵀ``: ``√2·D²`` or the paper's ``D²``."""
    rule = check_options(rule, "sensitivity", SENSITIVITY_RULES)
    return (math.sqrt(2.0) if rule == "replace" else 1.0) * data_norm**2


def pack_upper_triangle(M: ArrayLike) -> NDArray[np.float64]:
    """The upper triangle of a square matrix (diagonal included), row by row."""
    arr = np.asarray(M, dtype=np.float64)
    if arr.ndim != 2 or arr.shape[0] != arr.shape[1]:
        raise ValueError(f"Expected a square matrix, got shape {arr.shape}.")
    return arr[np.triu_indices(arr.shape[0])]


def unpack_upper_triangle(packed: ArrayLike, n_features: int) -> NDArray[np.float64]:
    """Inverse of :func:`pack_upper_triangle`: the symmetric matrix with that upper triangle."""
    v = np.asarray(packed, dtype=np.float64)
    p = int(n_features)
    if v.shape != (p * (p + 1) // 2,):
        raise ValueError(
            f"A packed upper triangle for p={p} has length {p * (p + 1) // 2}; got shape {v.shape}."
        )
    out = np.zeros((p, p))
    out[np.triu_indices(p)] = v
    out += np.triu(out, 1).T
    return out


@dataclass(frozen=True)
class LocalCovarianceRandomiser:
    """Client side: turns one record ``x`` into a private report (Wang & Xu, Algorithm 1, step 2).

    Parameters
    ----------
    n_features : int
        Dimension p (public).
    epsilon, delta : float
        Each report is (ε, δ)-locally-DP.
    data_norm : float, default=1.0
        Public bound D on ‖x‖₂; larger records are clipped to it (with a warning).
    calibration : {"analytic", "classic"}, default="analytic"
    sensitivity : {"replace", "paper"}, default="replace"
        ``"replace"``: Δ = √2·D² (correct for replacement). ``"paper"``: Δ = D² as in the paper.
    centre : array of shape (n_features,) or None, default=None
        A public centre (the server's released private mean, see
        :mod:`privpca.local_protocol.local_preprocessing`): the user reports ``x − centre``.

    Attributes
    ----------
    mechanism : GaussianMechanism
        The calibrated mechanism; ``mechanism.sigma`` is the noise std per packed entry.
    """

    n_features: int
    epsilon: float
    delta: float
    data_norm: float = 1.0
    calibration: str = "analytic"
    sensitivity: str = "replace"
    centre: NDArray[np.float64] | None = field(default=None, repr=False, compare=False)
    mechanism: GaussianMechanism = field(init=False, repr=False)

    def __post_init__(self) -> None:
        check_in_range(
            self.n_features,
            "n_features",
            low=1,
            low_closed=True,
            integer=True,
            owner="LocalCovarianceRandomiser",
        )
        check_in_range(self.data_norm, "data_norm", low=0.0, owner="LocalCovarianceRandomiser")
        check_party_delta(self.delta, owner="LocalCovarianceRandomiser")
        delta_sens = covariance_sensitivity(self.data_norm, self.sensitivity)
        mech = GaussianMechanism(
            self.epsilon, self.delta, delta_sens, self.calibration,
            Neighbouring.LOCAL_REPLACE_ONE.description
        )
        object.__setattr__(self, "mechanism", mech)

    @property
    def report_length(self) -> int:
        return self.n_features * (self.n_features + 1) // 2

    @property
    def noise_scale(self) -> float:
        """σ₁, the standard deviation of one user's noise on one packed entry."""
        return self.mechanism.sigma

    @property
    def true_sensitivity(self) -> float:
        """Δ under replacement, whatever ``sensitivity`` rule calibrated the noise."""
        return covariance_sensitivity(self.data_norm, "replace")

    @property
    def certified_epsilon(self) -> float:
        """The ε each report really certifies at ``delta`` under replace-one neighbours."""
        if self.sensitivity == "replace" and self.calibration == "analytic":
            return float(self.epsilon)
        return certified_epsilon(self.noise_scale, self.delta, self.true_sensitivity)

    def warn_if_weaker(self) -> None:
        """Warn when the paper's sensitivity makes the real guarantee weaker than requested."""
        if self.sensitivity == "paper":
            warnings.warn(
                f"sensitivity='paper' calibrates with Delta={self.data_norm**2:g} as in Wang & "
                f"Xu, but one user's report has sensitivity sqrt(2)*{self.data_norm**2:g} under "
                f"replacement: each report is ({self.certified_epsilon:.4g}, {self.delta:g})-"
                f"LDP, not ({self.epsilon:g}, {self.delta:g}). Use it only to reproduce the "
                "paper's numbers.",
                PrivacyLeakWarning,
                stacklevel=caller_stacklevel(),
            )

    def _clip(self, X: NDArray[np.float64]) -> NDArray[np.float64]:
        if X.shape[1] != self.n_features:
            raise ValueError(f"Records must have {self.n_features} features; got {X.shape[1]}.")
        if self.centre is not None:
            X = X - self.centre
        return clip_rows(X, self.data_norm, owner="LocalCovarianceRandomiser")[0]

    def report(self, x: ArrayLike, rng: np.random.Generator | None = None
               ) -> NDArray[np.float64]:
        """One user's report: packed upper triangle of ``x xᵀ`` plus Gaussian noise.

        Parameters
        ----------
        x : array-like of shape (n_features,)
            The user's record; clipped to ``data_norm`` (with a warning) if longer.
        rng : numpy.random.Generator or None, default=None
            The user's randomness (``None``: fresh OS entropy). In secure mode only ``None``
            or an OS-keyed :class:`~privpca.mechanisms.secure_noise.SecureGenerator` is
            accepted (:func:`privpca.mechanisms.randomness.check_noise_rng`); a seeded generator is
            refused with a ValueError.

        Returns
        -------
        ndarray of shape (n_features * (n_features + 1) // 2,)
        """
        return self.report_batch(np.asarray(x, dtype=np.float64).reshape(1, -1), rng)[0]

    def report_batch(self, X: ArrayLike, rng: np.random.Generator | None = None
                     ) -> NDArray[np.float64]:
        """Reports of several users at once (each row randomised independently); ``rng`` as
        in :meth:`report` (secure mode refuses a seeded one before anything is computed)."""
        rng = check_noise_rng(rng, owner="LocalCovarianceRandomiser")
        Xc = self._clip(check_data(X))
        rows, cols = np.triu_indices(self.n_features)
        reports = Xc[:, rows] * Xc[:, cols]
        # Each row is one user's release of p(p+1)/2 coordinates.
        reports = gaussian_release(reports, self.noise_scale, rng,
                                   sensitivity=self.mechanism.sensitivity,
                                   coordinates=reports.shape[1])
        return reports


class LocalCovarianceAggregator:
    """Server side: accumulates reports, one batch at a time, into ``S̃ = (1/n) Σ reports``.

    The server never sees raw records; it needs only the public protocol parameters (the
    randomiser configuration) to state the guarantee of what it computes.

    Parameters
    ----------
    randomiser : LocalCovarianceRandomiser
        The configuration every client used (public).

    Attributes
    ----------
    n_reports_ : int
        Number of reports received so far.
    """

    def __init__(self, randomiser: LocalCovarianceRandomiser) -> None:
        self.randomiser = randomiser
        self._sum = np.zeros(randomiser.report_length)
        self.n_reports_ = 0

    def add(self, reports: ArrayLike) -> LocalCovarianceAggregator:
        """Add one report (1-D) or a batch of reports (2-D, one per row)."""
        batch = np.asarray(reports, dtype=np.float64)
        if batch.ndim == 1:
            batch = batch[None, :]
        if batch.ndim != 2 or batch.shape[1] != self.randomiser.report_length:
            raise ValueError(
                f"Each report must have length {self.randomiser.report_length} "
                f"(p={self.randomiser.n_features}); got an array of shape {batch.shape}."
            )
        if not np.all(np.isfinite(batch)):
            raise ValueError("A report contains NaN or infinity; refusing to aggregate it.")
        self._sum += batch.sum(axis=0)
        self.n_reports_ += batch.shape[0]
        return self

    def noisy_second_moment(self) -> NDArray[np.float64]:
        """The symmetric ``p × p`` matrix ``S̃`` averaged over the reports received."""
        if self.n_reports_ == 0:
            raise ValueError("No reports have been aggregated yet.")
        return unpack_upper_triangle(self._sum / self.n_reports_, self.randomiser.n_features)

    def __repr__(self) -> str:
        p = self.randomiser.n_features
        return f"LocalCovarianceAggregator(p={p}, n_reports={self.n_reports_})"


def simulate_report_sum(
    X: NDArray[np.float64], randomiser: LocalCovarianceRandomiser, rng: np.random.Generator
) -> NDArray[np.float64]:
    """The sum of n users' reports, as a symmetric matrix, drawn exactly and fast.

    Each report is ``u(xᵢ) + zᵢ`` with ``zᵢ ~ N(0, σ₁² I)`` on the packed upper triangle, so
    ``Σᵢ zᵢ ~ N(0, nσ₁² I)``: one symmetric Gaussian matrix with per-entry std ``√n·σ₁``.
    The result, ``XᵀX + Z``, has exactly the distribution of the sum of the n separate reports
    (unpacked), at the cost of one Gram matrix and ``p(p+1)/2`` normal draws instead of
    ``n·p(p+1)/2``.

    Parameters
    ----------
    X : ndarray of shape (n_samples, n_features)
        Records already clipped to ``randomiser.data_norm`` (not checked again here).
    randomiser : LocalCovarianceRandomiser
    rng : numpy.random.Generator

    Returns
    -------
    ndarray of shape (n_features, n_features)
        Symmetric; divide by n for the server's ``S̃``.
    """
    n, p = X.shape
    if p != randomiser.n_features:
        raise ValueError(f"X has {p} features; the randomiser expects {randomiser.n_features}.")
    rng = check_noise_rng(rng, owner="simulate_report_sum")
    total = gram_matrix(X)
    total = symmetric_gaussian_release(total, math.sqrt(n) * randomiser.noise_scale, rng,
                                       sensitivity=randomiser.mechanism.sensitivity)
    return total
