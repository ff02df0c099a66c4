"""LocalGaussianPCA: the top-k eigenvectors of the users' averaged noisy ``x xᵀ``."""

from __future__ import annotations

import math
from typing import Any, ClassVar

import numpy as np
from numpy.typing import NDArray

from privpca.accounting.ledger import PrivacyLedger
from privpca.decomposition._constraints import LOCAL, N_COMPONENTS_SPECTRUM, WHITEN
from privpca.decomposition._local_base import _LocalCovarianceEstimator
from privpca.pipeline.spectrum import (
    check_n_components_spec,
    fit_noisy_matrix,
    mean_perturbation_bound,
)

__all__ = ["LocalGaussianPCA"]


class LocalGaussianPCA(_LocalCovarianceEstimator):
    """PCA under local differential privacy by Gaussian noise on ``x xᵀ`` (Wang & Xu, Alg. 1).

    Each user adds symmetric Gaussian noise to their own ``x xᵀ``; the untrusted server
    averages the reports and returns the top-k eigenvectors of the average.

    Parameters
    ----------
    n_components : int or float, default=2
        Dimension k of the subspace, or a float in (0, 1): the smallest k whose private
        explained-variance ratio reaches it.
    epsilon : float, default=1.0
        ε > 0 of each user's (ε, δ)-local-DP guarantee.
    delta : float, default=1e-5
        0 < δ < 1.
    centering : "private", None or array of shape (n_features,), default="private"
        ``"private"``: a group of users reports the bin of their norm (a frequency oracle) and
        another sends noisy clipped records, twice (around 0, then around the first mean),
        from which the server releases a mean; the covariance users report ``x − μ̂``
        (:mod:`privpca.local_protocol.local_preprocessing`). ``None``: Wang & Xu's uncentred second
        moment. An array: a public mean, free.
    data_norm : "auto" or float, default="auto"
        Bound D on ``‖x − μ̂‖``. ``"auto"``: a group of users reports the bin of ``‖x − μ̂‖``
        and the server releases the 75 % quantile of the bins it can tell from noise
        (``BOUND_QUANTILE``). A float is public and free; longer rows are clipped to it (on
        the clients).
    scale : False, default=False
        Private scaling is not available in the local model (a clear error); public scales
        can be applied before fitting.
    calibration : {"analytic", "classic"}, default="analytic"
        Gaussian calibration: exact analytic (Balle & Wang 2018) or classic
        ``σ = Δ√(2 ln(1.25/δ))/ε`` (valid only for ε < 1; warns otherwise).
    sensitivity : {"replace", "paper"}, default="replace"
        ``"replace"``: Δ = √2·D², the true L2 sensitivity of the packed upper triangle of
        ``x xᵀ`` when one record is replaced. ``"paper"``: Δ = D², Wang & Xu's
        ``σ₁² = 2 ln(1.25/δ)/ε²``, for reproducing their numbers; it under-noises by √2, so a
        :class:`~privpca.exceptions.PrivacyLeakWarning` is issued and ``privacy_.epsilon``
        reports the ε actually certified.
    whiten : bool, default=False
        Divide the projections of :meth:`transform` by ``sqrt(explained_variance_)`` (and
        multiply them back in :meth:`inverse_transform`), as scikit-learn's ``PCA``:
        post-processing of released values; the fit is the same either way.
    random_state : None, int or numpy.random.Generator, default=None
        Source of the noise.
    ledger : PrivacyLedger or None, default=None
        Where the spend is recorded (``None``: :func:`privpca.accounting.default_ledger`).

    Attributes
    ----------
    components_ : ndarray of shape (n_components, n_features)
        Orthonormal rows spanning the estimated principal subspace.
    explained_variance_ : ndarray of shape (n_components_,)
        Top eigenvalues of the summed reports over n − 1 (centred) or n, debiased for the
        noise as in :class:`~privpca.AnalyzeGaussPCA` (0: not resolved).
    explained_variance_ratio_ : ndarray of shape (n_components_,)
        The same over the reports' trace (the private total variance, ``total_variance_``).
    n_components_ : int
    mean_ : ndarray of shape (n_features,)
        The mean the server released from the mean groups (zeros when uncentred).
    scale_ : None
    data_norm_ : float
        The bound D the covariance reports were clipped to (released).
    noise_level_, expected_error_ : float
        As in :class:`~privpca.AnalyzeGaussPCA`, for the summed noise of the covariance
        reports and the released mean's noise.
    noise_scale_ : float
        σ₁, the standard deviation of one user's noise on one upper-triangle entry.
    privacy_ : PrivacyRecord
        The guarantee: local model, replace-one neighbours, sensitivity, noise scale.
    n_features_in_ : int

    See Also
    --------
    LocalSparsePCA : the high-dimensional, row-sparse variant (Algorithm 2).

    References
    ----------
    Di Wang and Jinhui Xu. Principal Component Analysis in the Local Differential Privacy
    Model. IJCAI 2019 / Theoretical Computer Science (journal version), Algorithm 1.

    Examples
    --------
    >>> from privpca import LocalGaussianPCA
    >>> from privpca.datasets import make_spiked
    >>> X, V = make_spiked(20_000, 10, 2, lam=9.0, random_state=0)
    >>> est = LocalGaussianPCA(n_components=2, epsilon=2.0, random_state=0).fit(X)
    >>> est.components_.shape
    (2, 10)
    >>> est.privacy_.model
    'local'
    """

    _parameter_constraints: ClassVar[dict[str, list[Any]]] = {
        **LOCAL, "n_components": N_COMPONENTS_SPECTRUM, "whiten": WHITEN}

    def __init__(
        self,
        n_components: int = 2,
        *,
        epsilon: float = 1.0,
        delta: float = 1e-5,
        centering: Any = "private",
        data_norm: float | str = "auto",
        scale: Any = False,
        calibration: str = "analytic",
        sensitivity: str = "replace",
        whiten: bool = False,
        random_state: Any = None,
        ledger: PrivacyLedger | None = None,
    ) -> None:
        self.n_components = n_components
        self.epsilon = epsilon
        self.delta = delta
        self.centering = centering
        self.data_norm = data_norm
        self.scale = scale
        self.calibration = calibration
        self.sensitivity = sensitivity
        self.whiten = whiten
        self.random_state = random_state
        self.ledger = ledger

    def _fit_second_moment(self, total: NDArray[np.float64], n: int) -> None:
        p = total.shape[0]
        k = check_n_components_spec(self.n_components, p, self)
        # The n users' noise sums to one symmetric Gaussian with per-entry std √n·σ₁.
        fit = fit_noisy_matrix(
            total, k, noise_sd=math.sqrt(n) * self.noise_scale_,
            denominator=self._denominator(n),
            extra_perturbation=mean_perturbation_bound(n, self._mean_sd, p)
            if self._mean_sd else 0.0,
        )
        self._set_spectrum(fit)
