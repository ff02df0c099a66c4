"""PCA in the local model (Wang & Xu): every user randomises their own ``x xᵀ``.

Both estimators simulate the protocol of :mod:`privpca.local_protocol.local_covariance` exactly:
the n users' independent noise matrices sum to one symmetric Gaussian matrix whose packed
entries have variance ``n σ₁²``, so ``S̃ = (XᵀX + Z)/n`` with that single ``Z`` has the same
distribution as the average of n separate reports, at the cost of one Gram matrix plus
``p(p+1)/2`` normal draws. To run the real protocol, give each user a
:class:`~privpca.local_protocol.LocalCovarianceRandomiser`, feed their reports to a
:class:`~privpca.local_protocol.LocalCovarianceAggregator`, and call :meth:`fit_aggregate`.

:class:`LocalSparsePCA` lives here, :class:`LocalGaussianPCA` in
:mod:`privpca.decomposition.local_gaussian`, their shared protocol in
:mod:`privpca.decomposition._local_base`.
"""

from __future__ import annotations

import math
import numbers
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from numbers import Real
from typing import Any, ClassVar

import numpy as np
from numpy.typing import NDArray
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils._param_validation import Interval, StrOptions

from privpca._validation import caller_stacklevel, check_in_range, check_n_components
from privpca.accounting.ledger import PrivacyLedger
from privpca.decomposition._constraints import LOCAL, N_COMPONENTS, WHITEN, positive_int
from privpca.decomposition._local_base import _LocalCovarianceEstimator
from privpca.decomposition.local_gaussian import LocalGaussianPCA
from privpca.pipeline.spectrum import (
    debiased_eigenvalues,
    feasible_spectrum,
    fit_noisy_matrix,
    mean_perturbation_bound,
    noise_norm_bound,
)
from privpca.solvers.eigen import fix_signs, top_eigenvectors
from privpca.solvers.fantope import ADMMIterationInfo, fantope_admm

__all__ = ["LocalGaussianPCA", "LocalSparsePCA"]

#: ``projection_dtype="auto"`` in :class:`LocalSparsePCA`: float32 projections from this
#: dimension on (below it the eigendecompositions are cheap and stay float64).
FLOAT32_PROJECTION_P = 1000


class LocalSparsePCA(_LocalCovarianceEstimator):
    """Sparse PCA under local DP: Fantope projection and selection on the private reports.

    The same reports as :class:`LocalGaussianPCA`; the server then solves (Wang & Xu, Alg. 2)

        X̂ = argmax ⟨S̃, X⟩ − λ‖X‖₁,₁  over the Fantope {0 ⪯ X ⪯ I, tr X = k}

    by ADMM (Vu, Cho, Lei & Rohe 2013) and returns the top-k eigenvectors of the sparse
    iterate, whose rows outside the selected support are exactly zero.

    Parameters
    ----------
    n_components : int, default=2
    epsilon, delta, data_norm, calibration, sensitivity, whiten, random_state, ledger
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
    max_eig : None, int or "auto", default=None
        Cap on the eigenpairs each Fantope projection computes
        (:func:`~privpca.solvers.fantope.fantope_admm`): ``None`` always projects exactly
        (an O(p³) decomposition per iteration when the noise makes many eigenvalues
        fractional); an integer uses the inexact projection, whose error bound is recorded
        per iteration; ``"auto"`` is exact up to p = 4000 and capped at 256 above.
        Experimental, and it loses accuracy where the estimate starts to be informative:
        there the exact solution has hundreds to thousands of fractional eigenvalues, which a
        cap cannot represent. Measured side by side on the same S̃
        (``docs/BENCHMARKS.md``): at p = 7 128, ε = 16 the exact projections recover 11 of
        the 20 support rows and the cap of 256 recovers 1 (29.5 s against 2.3 s per
        iteration); at ε = 1 both recover none (14.5 s against 2.1 s). Hence the exact
        default; a cap buys speed only where the estimate is noise anyway.
    projection_dtype : {"auto", "float64", "float32"}, default="auto"
        Precision of the exact Fantope projections' eigendecompositions (the ADMM updates
        are float64 throughout). ``"float32"`` about halves their cost at p in the
        thousands; each projection then carries float32 rounding (relative ~p·2⁻²⁴), orders
        of magnitude below the privacy noise in S̃ (relative ~1 per entry at ε ≤ 10), and
        is post-processing, so it changes no guarantee. ``"auto"``: float32 from p = 1 000
        on (at p = 800, ε = 1, the solutions of the two agree to 2·10⁻⁶ in Frobenius norm).
    progress : bool, default=False
        Show a progress bar (tqdm, on stderr) over the ADMM iterations, with the primal and
        dual residuals against the stopping target: at p in the thousands each iteration
        takes seconds to tens of seconds. The residuals are computed from the private S̃
        only (post-processing). ``privpca fit`` turns it on.

    Attributes
    ----------
    components_ : ndarray of shape (n_components, n_features)
        Orthonormal rows; rows outside ``support_`` are zero.
    mean_, scale_, data_norm_, n_components_
        As in :class:`LocalGaussianPCA`.
    explained_variance_, explained_variance_ratio_ : ndarray of shape (n_components,)
        Variances along the sparse components in the noisy ``S̃``, debiased for the noise
        they caught as eigenvalues of ``S̃`` on their support are
        (:func:`~privpca.pipeline.spectrum.debiased_eigenvalues`: 0 where not resolved above
        it), and over its trace, made feasible
        (:func:`~privpca.pipeline.spectrum.feasible_spectrum`).
    total_variance_ : float
        The trace of ``S̃`` (the private total variance), at least the variances' sum.
    noise_level_ : float
        Bound (probability ≥ 95 %) on ``‖S̃ − S‖₂`` in variance units.
    expected_error_ : float
        Distance of the sparse basis to the top-k eigenvectors Ṽ of the released ``S̃``
        (exact, post-processing) plus the Davis–Kahan–Weyl bound of ``Ṽ`` to the PCA of the
        prepared rows (users' aggregate noise: per-entry std σ₁/√n; the private mean's term):
        the triangle inequality, w.p. ≥ 95 %, capped at √(2k). It includes the ℓ₁ penalty's
        bias (the sparse basis is compared with the ordinary PCA).
    support_ : ndarray of int
        Features (rows of the subspace) selected by the ℓ₁ penalty: the non-zero columns of
        ``components_``.
    lam_ : float
        The λ used.
    projection_dtype_ : str
        The precision of the projections, ``"float64"`` or ``"float32"``.
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

    _parameter_constraints: ClassVar[dict[str, list[Any]]] = {
        **LOCAL,
        "n_components": N_COMPONENTS,  # the ADMM solves for a fixed k: no share
        "lam": [StrOptions({"auto"}), Interval(Real, 0.0, None, closed="left")],
        "lam_scale": [Interval(Real, 0.0, None, closed="neither")],
        "max_iter": positive_int(),
        "tol": [Interval(Real, 0.0, None, closed="neither")],
        "max_eig": [None, StrOptions({"auto"}), *positive_int()],
        "projection_dtype": [StrOptions({"auto", "float32", "float64"})],
        "progress": ["boolean"],
        "whiten": WHITEN,
    }

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
        lam: float | str = "auto",
        lam_scale: float = 0.25,
        max_iter: int = 100,
        tol: float = 1e-3,
        max_eig: int | str | None = None,
        projection_dtype: str = "auto",
        progress: bool = False,
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
        self.lam = lam
        self.lam_scale = lam_scale
        self.max_iter = max_iter
        self.tol = tol
        self.max_eig = max_eig
        self.projection_dtype = projection_dtype
        self.progress = progress
        self.whiten = whiten
        self.random_state = random_state
        self.ledger = ledger

    def _check_params(self, n_features: int) -> None:
        # Each value was checked against its declaration; what remains relates two of them.
        k = check_n_components(self.n_components, n_features, owner=self)
        if isinstance(self.max_eig, numbers.Integral):
            check_in_range(self.max_eig, "max_eig", low=k, integer=True, owner=self)

    def default_lam(self, n_samples: int, n_features: int) -> float:
        """λ for ``lam="auto"``: ``lam_scale · (σ₁/√n)·√(2 ln(p²))`` (public inputs only).

        σ₁ is the covariance reports' noise: for the bound D in force (the released one after a
        fit with ``data_norm="auto"``).
        """
        norm = getattr(self, "data_norm_", None) if isinstance(self.data_norm, str) else None
        sigma1 = self._randomiser(n_features, data_norm=norm).noise_scale
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
        dtype = self.projection_dtype
        if dtype == "auto":
            dtype = "float32" if p >= FLOAT32_PROJECTION_P else "float64"
        self.projection_dtype_ = dtype
        if k == p:  # the Fantope is the single point I
            solution = np.eye(p)
            self.n_iter_, self.converged_ = 0, True
        else:
            with _admm_progress(bool(self.progress), int(self.max_iter),
                                math.sqrt(k) * float(self.tol)) as callback:
                result = fantope_admm(S, k, self.lam_, tol=float(self.tol),
                                      max_iter=int(self.max_iter), callback=callback,
                                      max_eig=self.max_eig,  # type: ignore[arg-type]
                                      projection_dtype=dtype)  # type: ignore[arg-type]
            solution = result.solution
            self.n_iter_, self.converged_ = result.n_iter, bool(result.converged)
            if not result.converged:
                warnings.warn(
                    f"LocalSparsePCA: ADMM did not converge in max_iter={self.max_iter} "
                    f"iterations (primal residual {result.primal_residual:.3g}, dual "
                    f"{result.dual_residual:.3g}, target {math.sqrt(k) * self.tol:.3g}). "
                    "Increase max_iter or tol.",
                    ConvergenceWarning,
                    stacklevel=caller_stacklevel(),
                )
        self.components_, self.support_ = _sparse_top_eigenvectors(solution, k, S)
        # Variances along the sparse components and their share of the noisy trace
        # (post-processing of S̃); noise_level_ bounds ‖S̃ − S‖₂ (per-entry std σ₁/√n). The
        # components were chosen from S̃, so S̃ along them holds the noise they caught:
        # debiased as the eigenvalues of S̃ on their support (a spiked model of that size),
        # as LocalGaussianPCA's are. Raw, four of eight components "explained" the whole
        # trace at the defaults (an outside tester: noise_variance_ 1e-7, score -4e7).
        scale = n / self._denominator(n)
        along = np.einsum("ij,jk,ik->i", self.components_, S, self.components_) * scale
        entry_sd = self.noise_scale_ / math.sqrt(n) * scale
        (self.explained_variance_, self.explained_variance_ratio_,
         self.total_variance_) = feasible_spectrum(
            debiased_eigenvalues(along, entry_sd, max(int(self.support_.size), k)),
            float(np.trace(S)) * scale)
        self.noise_level_ = noise_norm_bound(self.noise_scale_ / math.sqrt(n), p) * scale
        self.expected_error_ = self._sparse_error_bound(S, n)
        self.n_components_ = k

    def _sparse_error_bound(self, S: NDArray[np.float64], n: int) -> float:
        """Triangle inequality through the top-k eigenvectors Ṽ of the released S̃.

        ``‖V̂V̂ᵀ − VVᵀ‖_F ≤ ‖V̂V̂ᵀ − ṼṼᵀ‖_F + ‖ṼṼᵀ − VVᵀ‖_F``: the first term is computed
        from released quantities exactly (the sparse basis against S̃'s eigenvectors), the
        second is Davis–Kahan–Weyl on S̃ (:func:`~privpca.pipeline.spectrum.fit_noisy_matrix`'s
        bound: per-entry noise std σ₁/√n, plus the private mean's term). Valid w.p. ≥ 95 %.
        """
        p = S.shape[0]
        k = self.components_.shape[0]
        extra = (mean_perturbation_bound(n, self._mean_sd, p) / n if self._mean_sd else 0.0)
        exact = fit_noisy_matrix(S, k, noise_sd=self.noise_scale_ / math.sqrt(n),
                                 denominator=1.0, extra_perturbation=extra)
        V, W = exact.components, self.components_
        to_noisy = math.sqrt(max(2.0 * k - 2.0 * float(np.sum((V @ W.T) ** 2)), 0.0))
        return min(math.sqrt(2.0 * min(k, p - k)) if k < p else 0.0,
                   to_noisy + exact.expected_error)


@contextmanager
def _admm_progress(
    show: bool, max_iter: int, target: float
) -> Iterator[Callable[[ADMMIterationInfo], None] | None]:
    """A tqdm bar (stderr, removed when done) over the ADMM's iterations, with its residuals
    against the stopping target, or ``None`` when ``show`` is false. The residuals are
    computed from the private S̃ alone (post-processing)."""
    if not show:
        yield None
        return
    from tqdm.auto import tqdm

    with tqdm(total=max_iter, desc="LocalSparsePCA ADMM", unit="it", leave=False) as bar:

        def update(info: ADMMIterationInfo) -> None:
            bar.set_postfix(primal=f"{info.primal_residual:.3g}",
                            dual=f"{info.dual_residual:.3g}", target=f"{target:.3g}",
                            refresh=False)
            bar.update(1)

        yield update


def _sparse_top_eigenvectors(
    Y: NDArray[np.float64], k: int, S: NDArray[np.float64]
) -> tuple[NDArray[np.float64], NDArray[np.intp]]:
    """Top-k eigenvectors of the sparse Fantope iterate, computed on its support only, then
    rotated within their span to the eigenvectors of ``VᵀS̃V`` (ordered by variance).

    Rows of ``Y`` that are entirely zero cannot enter an eigenvector of a non-zero eigenvalue,
    so restricting to the support is exact, cheaper, and leaves exact zeros elsewhere. The
    ADMM solution is often an exact projection (eigenvalue 1, k-fold), whose eigenvectors are
    any basis of the subspace: rounding would pick it. Rotating by the noisy covariance
    (post-processing) makes the components well defined and keeps the support.
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
    _, rotation = np.linalg.eigh(components @ S @ components.T)
    components = fix_signs((rotation[:, ::-1].T @ components).T).T.copy()
    components[:, np.setdiff1d(np.arange(p), support)] = 0.0  # exact zeros off the support
    # The support is the rows the components use: a row of Y with its diagonal entry alone
    # enters no top-k eigenvector (it listed every row while the components used 11 %).
    return components, np.flatnonzero(np.any(components != 0.0, axis=0))
