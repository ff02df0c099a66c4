"""PCA in the local model (Wang & Xu): every user randomises their own ``x xᵀ``.

Both estimators simulate the protocol of :mod:`privpca.protocols.local_covariance` exactly:
the n users' independent noise matrices sum to one symmetric Gaussian matrix whose packed
entries have variance ``n σ₁²``, so ``S̃ = (XᵀX + Z)/n`` with that single ``Z`` has the same
distribution as the average of n separate reports, at the cost of one Gram matrix plus
``p(p+1)/2`` normal draws. To run the real protocol, give each user a
:class:`~privpca.protocols.LocalCovarianceRandomiser`, feed their reports to a
:class:`~privpca.protocols.LocalCovarianceAggregator`, and call :meth:`fit_aggregate`.
"""

from __future__ import annotations

import math
import warnings
from typing import Any

import dp_accounting
import numpy as np
from numpy.typing import ArrayLike, NDArray
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils.validation import validate_data

from privpca._validation import (
    check_in_range,
    check_n_components,
    check_options,
    check_random_state,
    clip_rows,
)
from privpca.accounting.ledger import PrivacyLedger
from privpca.accounting.record import PrivacyRecord, PrivacySpend
from privpca.decomposition._base import BasePrivatePCA
from privpca.mechanisms.gaussian import CALIBRATIONS
from privpca.protocols.local_covariance import (
    NEIGHBOURING,
    SENSITIVITY_RULES,
    LocalCovarianceAggregator,
    LocalCovarianceRandomiser,
    simulate_report_sum,
)
from privpca.solvers.eigen import fix_signs, top_eigenvectors
from privpca.solvers.fantope import fantope_admm

__all__ = ["LocalGaussianPCA", "LocalSparsePCA"]


class _LocalCovarianceEstimator(BasePrivatePCA):
    """Shared machinery: validation, the randomiser, the noisy second moment, the record."""

    def _randomiser(self, n_features: int) -> LocalCovarianceRandomiser:
        check_in_range(self.data_norm, "data_norm", low=0.0, owner=self)
        check_options(self.calibration, "calibration", CALIBRATIONS, owner=self)
        check_options(self.sensitivity, "sensitivity", SENSITIVITY_RULES, owner=self)
        check_in_range(self.epsilon, "epsilon", low=0.0, owner=self)
        check_in_range(self.delta, "delta", low=0.0, high=1.0, owner=self)
        return LocalCovarianceRandomiser(
            n_features,
            self.epsilon,
            self.delta,
            self.data_norm,
            self.calibration,
            self.sensitivity,
        )

    def _record(
        self,
        randomiser: LocalCovarianceRandomiser,
        n_samples: int,
        n_clipped: int,
        notes: str = "",
    ) -> PrivacyRecord:
        mech = randomiser.mechanism
        eps = randomiser.certified_epsilon
        spend = PrivacySpend(
            mechanism="gaussian: packed upper triangle of x xᵀ, one report per user",
            epsilon=eps,
            delta=float(self.delta),
            sensitivity=randomiser.true_sensitivity,
            noise_scale=mech.sigma,
            dp_event=dp_accounting.GaussianDpEvent(mech.sigma / randomiser.true_sensitivity),
        )
        paper = (
            " Noise calibrated with the paper's sensitivity D² (sensitivity='paper'); epsilon is "
            "what that noise certifies under replacement."
            if self.sensitivity == "paper"
            else ""
        )
        return PrivacyRecord(
            epsilon=eps,
            delta=float(self.delta),
            model="local",
            neighbouring=NEIGHBOURING,
            sensitivity=randomiser.true_sensitivity,
            noise_scale=mech.sigma,
            calibration=self.calibration,
            data_norm=float(self.data_norm),
            n_samples=int(n_samples),
            n_clipped=int(n_clipped),
            spends=(spend,),
            target_epsilon=float(self.epsilon),
            notes=(
                "Each user's report is (epsilon, delta)-LDP; the server's output is "
                "post-processing of the reports." + paper + notes
            ),
        )

    def _noisy_second_moment(self, X: ArrayLike) -> tuple[NDArray[np.float64], int, int]:
        """Validate, clip, charge the ledger, and return ``(n S̃, n, n_clipped)`` (upper part)."""
        Xv = validate_data(self, X, dtype=np.float64, ensure_all_finite=False, reset=True)
        n, p = Xv.shape
        self._check_params(p)
        randomiser = self._randomiser(p)
        randomiser.warn_if_weaker(stacklevel=4)
        rng = check_random_state(self.random_state)
        Xc, n_clipped = clip_rows(Xv, self.data_norm, owner=self)
        self.privacy_ = self._record(randomiser, n, n_clipped)
        self._charge(self.privacy_, self.ledger)
        self.noise_scale_ = randomiser.noise_scale
        return simulate_report_sum(Xc, randomiser, rng), n, n_clipped

    def _check_params(self, n_features: int) -> None:
        check_n_components(self.n_components, n_features, owner=self)

    def fit_aggregate(self, aggregator: LocalCovarianceAggregator) -> _LocalCovarianceEstimator:
        """Fit from reports collected by the real client/server protocol.

        Parameters
        ----------
        aggregator : LocalCovarianceAggregator
            Holds the reports; its randomiser must use this estimator's privacy parameters.

        Returns
        -------
        self
        """
        r = aggregator.randomiser
        mine = (
            float(self.epsilon),
            float(self.delta),
            float(self.data_norm),
            self.calibration,
            self.sensitivity,
        )
        theirs = (r.epsilon, r.delta, r.data_norm, r.calibration, r.sensitivity)
        if mine != theirs:
            raise ValueError(
                "The aggregator's randomiser (epsilon, delta, data_norm, calibration, "
                f"sensitivity) = {theirs} differs from this estimator's {mine}."
            )
        p = r.n_features
        self._check_params(p)
        self.n_features_in_ = p
        n = aggregator.n_reports_
        self.privacy_ = self._record(r, n, 0, notes=" Clipping, if any, happened on clients.")
        self._charge(self.privacy_, self.ledger)
        self.noise_scale_ = r.noise_scale
        self._fit_second_moment(aggregator.noisy_second_moment() * n, n)
        return self

    def _fit_second_moment(self, total: NDArray[np.float64], n: int) -> None:
        raise NotImplementedError


class LocalGaussianPCA(_LocalCovarianceEstimator):
    """PCA under local differential privacy by Gaussian noise on ``x xᵀ`` (Wang & Xu, Alg. 1).

    Each user adds symmetric Gaussian noise to their own ``x xᵀ``; the untrusted server
    averages the reports and returns the top-k eigenvectors of the average.

    Parameters
    ----------
    n_components : int, default=2
        Dimension k of the subspace.
    epsilon : float, default=1.0
        ε > 0 of each user's (ε, δ)-local-DP guarantee.
    delta : float, default=1e-5
        0 < δ < 1.
    data_norm : float, default=1.0
        Public bound D on every record's L2 norm. Longer rows are clipped to it, with a
        :class:`~privpca.exceptions.RowClippingWarning` saying how many.
    calibration : {"analytic", "classic"}, default="analytic"
        Gaussian calibration: exact analytic (Balle & Wang 2018) or classic
        ``σ = Δ√(2 ln(1.25/δ))/ε`` (valid only for ε < 1; warns otherwise).
    sensitivity : {"replace", "paper"}, default="replace"
        ``"replace"``: Δ = √2·D², the true L2 sensitivity of the packed upper triangle of
        ``x xᵀ`` when one record is replaced. ``"paper"``: Δ = D², Wang & Xu's
        ``σ₁² = 2 ln(1.25/δ)/ε²``, for reproducing their numbers; it under-noises by √2, so a
        :class:`~privpca.exceptions.PrivacyLeakWarning` is issued and ``privacy_.epsilon``
        reports the ε actually certified.
    random_state : None, int or numpy.random.Generator, default=None
        Source of the noise.
    ledger : PrivacyLedger or None, default=None
        Where the spend is recorded (``None``: :func:`privpca.accounting.default_ledger`).

    Attributes
    ----------
    components_ : ndarray of shape (n_components, n_features)
        Orthonormal rows spanning the estimated principal subspace.
    explained_variance_ : ndarray of shape (n_components,)
        Top eigenvalues of the noisy second-moment matrix ``S̃`` (noisy; may be negative).
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

    def __init__(
        self,
        n_components: int = 2,
        *,
        epsilon: float = 1.0,
        delta: float = 1e-5,
        data_norm: float = 1.0,
        calibration: str = "analytic",
        sensitivity: str = "replace",
        random_state: Any = None,
        ledger: PrivacyLedger | None = None,
    ) -> None:
        self.n_components = n_components
        self.epsilon = epsilon
        self.delta = delta
        self.data_norm = data_norm
        self.calibration = calibration
        self.sensitivity = sensitivity
        self.random_state = random_state
        self.ledger = ledger

    def fit(self, X: ArrayLike, y: Any = None) -> LocalGaussianPCA:
        """Simulate every user's report and fit on their average.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            One record per user. Not modified.
        y : ignored

        Returns
        -------
        self
        """
        total, n, _ = self._noisy_second_moment(X)
        self._fit_second_moment(total, n)
        return self

    def _fit_second_moment(self, total: NDArray[np.float64], n: int) -> None:
        k = int(self.n_components)
        values, vectors = top_eigenvectors(total, k)  # reads the upper triangle only
        self.components_ = vectors.T.copy()
        self.explained_variance_ = values / n


class LocalSparsePCA(_LocalCovarianceEstimator):
    """Sparse PCA under local DP: Fantope projection and selection on the private reports.

    The same reports as :class:`LocalGaussianPCA`; the server then solves (Wang & Xu, Alg. 2)

        X̂ = argmax ⟨S̃, X⟩ − λ‖X‖₁,₁  over the Fantope {0 ⪯ X ⪯ I, tr X = k}

    by ADMM (Vu, Cho, Lei & Rohe 2013) and returns the top-k eigenvectors of the sparse
    iterate, whose rows outside the selected support are exactly zero.

    Parameters
    ----------
    n_components : int, default=2
    epsilon, delta, data_norm, calibration, sensitivity, random_state, ledger
        As in :class:`LocalGaussianPCA`.
    lam : "auto" or float, default="auto"
        ℓ₁ penalty λ ≥ 0. ``"auto"`` sets ``λ = lam_scale · (σ₁/√n)·√(2 ln(p²))``: the
        typical size of the largest entry of the averaged noise ``Z/n`` (``p²`` entries of std
        ``σ₁/√n``), which is the noise part of the ``λ ≥ ‖S̃ − Σ‖_∞`` condition in the proof
        of Theorem 4 (its stated order ``λ₁√(log p/(nε²)))`` uses the unknown λ₁). It uses
        only public quantities (σ₁, n, p), so choosing it costs no privacy.
    lam_scale : float, default=0.25
        Multiplier of the theoretical λ when ``lam="auto"``. The full theory value is
        conservative (it shrinks the signal along with the noise); see
        ``docs/local_sparse_lambda.md`` for the measurements behind 0.25.
    max_iter : int, default=100
        Maximum ADMM iterations.
    tol : float, default=1e-3
        Stop when the primal ‖X − Y‖_F and dual ρ‖Y − Y_old‖_F residuals are below √k·tol.

    Attributes
    ----------
    components_ : ndarray of shape (n_components, n_features)
        Orthonormal rows; rows outside ``support_`` are zero.
    support_ : ndarray of int
        Features (rows of the subspace) selected by the ℓ₁ penalty.
    lam_ : float
        The λ used.
    n_iter_ : int
        ADMM iterations run.
    converged_ : bool
    noise_scale_ : float
        σ₁, per-user noise std on one upper-triangle entry.
    privacy_ : PrivacyRecord
    n_features_in_ : int

    Warns
    -----
    sklearn.exceptions.ConvergenceWarning
        When ADMM stops at ``max_iter`` before both residuals are below tolerance.

    References
    ----------
    Wang & Xu (2019), Algorithm 2 and Theorem 4. V. Q. Vu, J. Cho, J. Lei, K. Rohe. Fantope
    Projection and Selection: A near-optimal convex relaxation of sparse PCA. NeurIPS 2013.
    """

    def __init__(
        self,
        n_components: int = 2,
        *,
        epsilon: float = 1.0,
        delta: float = 1e-5,
        data_norm: float = 1.0,
        calibration: str = "analytic",
        sensitivity: str = "replace",
        lam: float | str = "auto",
        lam_scale: float = 0.25,
        max_iter: int = 100,
        tol: float = 1e-3,
        random_state: Any = None,
        ledger: PrivacyLedger | None = None,
    ) -> None:
        self.n_components = n_components
        self.epsilon = epsilon
        self.delta = delta
        self.data_norm = data_norm
        self.calibration = calibration
        self.sensitivity = sensitivity
        self.lam = lam
        self.lam_scale = lam_scale
        self.max_iter = max_iter
        self.tol = tol
        self.random_state = random_state
        self.ledger = ledger

    def _check_params(self, n_features: int) -> None:
        super()._check_params(n_features)
        if not (isinstance(self.lam, str) and self.lam == "auto"):
            check_in_range(self.lam, "lam", low=0.0, low_closed=True, owner=self)
        check_in_range(self.lam_scale, "lam_scale", low=0.0, owner=self)
        check_in_range(self.max_iter, "max_iter", low=1, low_closed=True, integer=True, owner=self)
        check_in_range(self.tol, "tol", low=0.0, owner=self)

    def fit(self, X: ArrayLike, y: Any = None) -> LocalSparsePCA:
        """Simulate every user's report, then solve the Fantope-ℓ₁ problem by ADMM.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            One record per user. Not modified.
        y : ignored

        Returns
        -------
        self
        """
        total, n, _ = self._noisy_second_moment(X)
        self._fit_second_moment(total, n)
        return self

    def default_lam(self, n_samples: int, n_features: int) -> float:
        """λ for ``lam="auto"``: ``lam_scale · (σ₁/√n)·√(2 ln(p²))`` (public inputs only)."""
        sigma1 = self._randomiser(n_features).noise_scale
        return (
            float(self.lam_scale)
            * sigma1
            / math.sqrt(n_samples)
            * math.sqrt(2.0 * math.log(max(n_features, 2) ** 2))
        )

    def _fit_second_moment(self, total: NDArray[np.float64], n: int) -> None:
        p = total.shape[0]
        k = int(self.n_components)
        # Full symmetric S̃ (gram_matrix and the noise are already symmetric; the aggregator's
        # matrix too). Scale in place: total is ours.
        total /= n
        S = total
        self.lam_ = self.default_lam(n, p) if isinstance(self.lam, str) else float(self.lam)
        if k == p:  # the Fantope is the single point I
            solution = np.eye(p)
            self.n_iter_, self.converged_ = 0, True
        else:
            result = fantope_admm(S, k, self.lam_, tol=float(self.tol), max_iter=int(self.max_iter))
            solution = result.solution
            self.n_iter_, self.converged_ = result.n_iter, bool(result.converged)
            if not result.converged:
                warnings.warn(
                    f"LocalSparsePCA: ADMM did not converge in max_iter={self.max_iter} "
                    f"iterations (primal residual {result.primal_residual:.3g}, dual "
                    f"{result.dual_residual:.3g}, target {math.sqrt(k) * self.tol:.3g}). "
                    "Increase max_iter or tol.",
                    ConvergenceWarning,
                    stacklevel=3,
                )
        self.components_, self.support_ = _sparse_top_eigenvectors(solution, k)
        self.explained_variance_ = np.einsum("ij,jk,ik->i", self.components_, S, self.components_)


def _sparse_top_eigenvectors(
    Y: NDArray[np.float64], k: int
) -> tuple[NDArray[np.float64], NDArray[np.intp]]:
    """Top-k eigenvectors of the sparse Fantope iterate, computed on its support only.

    Rows of ``Y`` that are entirely zero cannot enter an eigenvector of a non-zero eigenvalue,
    so restricting to the support is exact, cheaper, and leaves exact zeros elsewhere.
    """
    p = Y.shape[0]
    support = np.flatnonzero(np.any(Y != 0.0, axis=1))
    components = np.zeros((k, p))
    if support.size >= k:
        sub = Y[np.ix_(support, support)]
        _, vectors = top_eigenvectors(sub, k)
        components[:, support] = vectors.T
    else:  # fewer selected rows than components: fall back to the whole matrix
        _, vectors = top_eigenvectors(Y, k)
        components = fix_signs(vectors).T.copy()
        support = np.flatnonzero(np.any(components != 0.0, axis=0))
    return components, support
