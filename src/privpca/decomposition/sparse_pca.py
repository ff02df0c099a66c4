"""Non-private sparse PCA: truncated power method with a Fantope (FPS) initialisation.

This is the **non-private** reference used to build ground truths (Wang & Xu's real-data
experiments) and to measure what privacy costs. It is not differentially private: its
``privacy_`` says so (``epsilon = inf``) and it charges that infinite spend to the ledger, so a
budgeted :class:`~privpca.accounting.PrivacyLedger` refuses to run it.

Algorithm
---------
With ``S = XᵀX/n`` (or the covariance, ``center=True``), ``s = n_nonzero`` and ``k`` components:

1. **Initialisation** (Wang, Lu & Liu 2014, "tighten after relax"): the top-k eigenvectors of
   the Fantope projection and selection solution ``argmax ⟨S, Π⟩ − λ‖Π‖₁,₁`` over
   ``{0 ⪯ Π ⪯ I, tr Π = k}`` (:func:`privpca.solvers.fantope.fantope_admm`); or a random
   orthonormal basis.
2. **Truncated power iterations** (Yuan & Zhang 2013; row-sparse block form as in Wang, Lu &
   Liu and Ge et al.): ``Q ← ThinQR(Truncate(S Q, s))``, keeping the s rows of largest norm,
   until the subspace moves less than ``tol`` (``‖QQᵀ − Q_oldQ_oldᵀ‖_F``) or ``max_iter``.
   For k = 1 this is Yuan & Zhang's TPower (keep the s largest ``|entries|``, normalise).

With ``n_init > 1`` the method restarts from random bases and keeps the solution of largest
explained variance ``tr(QᵀSQ)`` (Wang & Xu build their real-data ground truth from the best of
50 such runs). Finally the basis is rotated within its span to the Ritz vectors of S, so
components come in decreasing order of variance; rotation does not change the row support.
"""

from __future__ import annotations

import math
import warnings
from typing import Any, ClassVar

import numpy as np
from numpy.typing import ArrayLike, NDArray
from sklearn.exceptions import ConvergenceWarning

from privpca._validation import (
    caller_stacklevel,
    check_in_range,
    check_n_components,
    check_options,
    fit_input,
)
from privpca.accounting.ledger import PrivacyLedger
from privpca.accounting.record import PrivacyRecord
from privpca.decomposition._base import BasePrivatePCA
from privpca.decomposition._constraints import WHITEN
from privpca.mechanisms.randomness import check_random_state
from privpca.solvers.eigen import fix_signs, top_eigenvectors
from privpca.solvers.fantope import fantope_admm
from privpca.solvers.gram import gram_matrix
from privpca.solvers.power import power_step, random_orthonormal_basis

__all__ = ["SparsePCA", "truncated_power_method"]

INITS: tuple[str, ...] = ("fps", "random")


def truncated_power_method(
    S: NDArray[np.float64],
    Q0: NDArray[np.float64],
    n_nonzero: int,
    *,
    max_iter: int = 100,
    tol: float = 1e-6,
) -> tuple[NDArray[np.float64], int, bool]:
    """Row-truncated orthogonal iteration ``Q ← ThinQR(Truncate(S Q, s))`` from ``Q0``.

    Parameters
    ----------
    S : ndarray of shape (p, p)
        Symmetric matrix (e.g. sample covariance).
    Q0 : ndarray of shape (p, k)
        Start (need not be sparse or orthonormal; it is multiplied by S first).
    n_nonzero : int
        s: rows kept at every step (``k ≤ s ≤ p``).
    max_iter : int, default=100
        Maximum number of steps.
    tol : float, default=1e-6
        Stop when ``‖QQᵀ − Q_oldQ_oldᵀ‖_F < tol``.

    Returns
    -------
    Q : ndarray of shape (p, k)
        Orthonormal, at most s non-zero rows.
    n_iter : int
        Steps taken.
    converged : bool
    """
    k = Q0.shape[1]
    Q = Q0
    for it in range(1, max_iter + 1):
        Q_next = power_step(S, Q, n_nonzero=n_nonzero)
        if it > 1:
            # ‖QQᵀ − PPᵀ‖²_F = 2k − 2‖QᵀP‖²_F for orthonormal bases.
            overlap = float(np.sum((Q.T @ Q_next) ** 2))
            if math.sqrt(max(2.0 * k - 2.0 * overlap, 0.0)) < tol:
                return Q_next, it, True
        Q = Q_next
    return Q, max_iter, False


class SparsePCA(BasePrivatePCA):
    """Row-sparse PCA by the truncated power method from an FPS start (**not private**).

    Parameters
    ----------
    n_components : int, default=2
        Dimension k of the subspace.
    n_nonzero : int, default=10
        s, the number of non-zero rows (features) of the solution, ``s ≥ n_components``.
        Values ``≥ n_features`` keep every row (plain orthogonal iteration).
    init : {"fps", "random"}, default="fps"
        Start of the first run: top-k eigenvectors of the Fantope projection and selection
        solution (Wang, Lu & Liu 2014), or a random orthonormal basis. Runs after the first
        (``n_init > 1``) always start at random.
    n_init : int, default=1
        Number of runs; the one with the largest ``tr(QᵀSQ)`` is kept. Wang & Xu's real-data
        ground truth is the best of 50 random runs: ``init="random", n_init=50``.
    lam : "auto" or float, default="auto"
        ℓ₁ penalty λ ≥ 0 of the FPS initialisation. ``"auto"``:
        ``λ = max_j S_jj · √(ln p / n)``, half the typical largest sampling error of an entry
        of S for sub-Gaussian data (entry std ≈ ``√(S_ii S_jj/n)``; the maximum of ``p²`` such
        errors ≈ ``√(2 ln p²)`` of them). It errs small on purpose: FPS only initialises here and
        the truncation enforces sparsity; λ = 0 starts from the dense top-k eigenvectors.
    center : bool, default=False
        Subtract the column means before forming S (and in ``transform``). Default ``False``:
        Wang & Xu's real-data ground truth is computed on the data as given, as the private
        estimators' papers' setting (``centering=None``) is; their defaults centre on a
        private mean.
    max_iter : int, default=100
        Maximum truncated power iterations per run.
    tol : float, default=1e-6
        A run stops when the subspace moves less than ``tol`` in ``‖QQᵀ − Q_oldQ_oldᵀ‖_F``.
    fps_max_iter : int, default=100
        Maximum ADMM iterations of the FPS initialisation.
    fps_tol : float, default=1e-3
        ADMM tolerance of the FPS initialisation
        (see :func:`~privpca.solvers.fantope.fantope_admm`).
    whiten : bool, default=False
        Divide the projections of :meth:`transform` by ``sqrt(explained_variance_)`` (and
        multiply them back in :meth:`inverse_transform`), as scikit-learn's ``PCA``:
        post-processing of released values; the fit is the same either way.
    random_state : None, int or numpy.random.Generator, default=None
        Source of the random starts (and of the FPS eigensolver's random vectors).
    ledger : PrivacyLedger or None, default=None
        Where the (infinite) spend is recorded (``None``: the default ledger). A ledger with a
        budget raises :class:`~privpca.exceptions.BudgetExceededError` before fitting.

    Attributes
    ----------
    components_ : ndarray of shape (n_components, n_features)
        Orthonormal rows in decreasing order of variance; at most ``n_nonzero`` columns
        (features) are non-zero.
    explained_variance_ : ndarray of shape (n_components,)
        ``diag(components_ S components_ᵀ)`` (Ritz values of S on the subspace).
    support_ : ndarray of int
        Sorted indices of the selected features.
    mean_ : ndarray of shape (n_features,)
        Column means subtracted (zeros when ``center=False``).
    lam_ : float or None
        The FPS λ used (``None`` when no run started from FPS).
    n_iter_ : int
        Truncated power iterations of the kept run.
    converged_ : bool
        Whether the kept run met ``tol``.
    privacy_ : PrivacyRecord
        ``epsilon = inf``, ``delta = 0``, ``model = "non-private"``, no spends.
    n_features_in_ : int

    Warns
    -----
    sklearn.exceptions.ConvergenceWarning
        When the kept run stopped at ``max_iter``.

    References
    ----------
    X.-T. Yuan, T. Zhang. Truncated power method for sparse eigenvalue problems. JMLR 14 (2013).
    Z. Wang, H. Lu, H. Liu. Tighten after relax: minimax-optimal sparse PCA in polynomial time.
    NeurIPS 2014.
    V. Q. Vu, J. Cho, J. Lei, K. Rohe. Fantope projection and selection. NeurIPS 2013.

    Examples
    --------
    >>> import numpy as np
    >>> from privpca.decomposition.sparse_pca import SparsePCA
    >>> from privpca.datasets import make_low_rank_gaussian
    >>> X, V = make_low_rank_gaussian(2_000, 50, 2, n_nonzero=6, random_state=0)
    >>> est = SparsePCA(n_components=2, n_nonzero=6, random_state=0).fit(X)
    >>> sorted(est.support_.tolist()) == sorted(np.flatnonzero(V.any(axis=1)).tolist())
    True
    >>> est.privacy_.epsilon
    inf
    """

    #: Only ``whiten`` is declared (scikit-learn's check): the other parameters are
    #: checked by the fit.
    _parameter_constraints: ClassVar[dict[str, list[Any]]] = {"whiten": WHITEN}

    def __init__(
        self,
        n_components: int = 2,
        *,
        n_nonzero: int = 10,
        init: str = "fps",
        n_init: int = 1,
        lam: float | str = "auto",
        center: bool = False,
        max_iter: int = 100,
        tol: float = 1e-6,
        fps_max_iter: int = 100,
        fps_tol: float = 1e-3,
        whiten: bool = False,
        random_state: Any = None,
        ledger: PrivacyLedger | None = None,
    ) -> None:
        self.n_components = n_components
        self.n_nonzero = n_nonzero
        self.init = init
        self.n_init = n_init
        self.lam = lam
        self.center = center
        self.max_iter = max_iter
        self.tol = tol
        self.fps_max_iter = fps_max_iter
        self.fps_tol = fps_tol
        self.whiten = whiten
        self.random_state = random_state
        self.ledger = ledger

    def _check_params(self, n_features: int) -> tuple[int, int]:
        k = check_n_components(self.n_components, n_features, owner=self)
        s = int(
            check_in_range(
                self.n_nonzero, "n_nonzero", low=k, low_closed=True, integer=True, owner=self
            )
        )
        check_options(self.init, "init", INITS, owner=self)
        check_in_range(self.n_init, "n_init", low=1, low_closed=True, integer=True, owner=self)
        if not (isinstance(self.lam, str) and self.lam == "auto"):
            check_in_range(self.lam, "lam", low=0.0, low_closed=True, owner=self)
        if not isinstance(self.center, bool | np.bool_):
            raise ValueError(
                f"The 'center' parameter of {type(self).__name__} must be a bool. "
                f"Got {self.center!r} instead."
            )
        check_in_range(self.max_iter, "max_iter", low=1, low_closed=True, integer=True, owner=self)
        check_in_range(self.tol, "tol", low=0.0, owner=self)
        check_in_range(
            self.fps_max_iter, "fps_max_iter", low=1, low_closed=True, integer=True, owner=self
        )
        check_in_range(self.fps_tol, "fps_tol", low=0.0, owner=self)
        return k, min(s, n_features)

    def _record(self, n: int) -> PrivacyRecord:
        return PrivacyRecord.non_private(
            n,
            "Non-private sparse PCA (truncated power method): no noise, no privacy "
            "guarantee. Recorded as an infinite spend, so a budgeted ledger refuses it.",
        )

    def default_lam(self, S: NDArray[np.float64], n_samples: int) -> float:
        """λ for ``lam="auto"``: ``max_j S_jj · √(ln p / n)``."""
        p = S.shape[0]
        return float(np.max(np.diag(S))) * math.sqrt(math.log(max(p, 2)) / n_samples)

    def __sklearn_tags__(self) -> Any:
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = False  # the ADMM reads a dense covariance of X in memory
        return tags

    def fit(self, X: ArrayLike, y: Any = None) -> SparsePCA:
        """Run the truncated power method from the FPS (and/or random) starts.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Not modified.
        y : ignored

        Returns
        -------
        self
        """
        Xv = fit_input(self, X, finite=True)
        n, p = Xv.shape
        k, s = self._check_params(p)
        rng = check_random_state(self.random_state)
        # Nothing private is released, but the ledger is told first: an infinite spend.
        self.privacy_ = self._record(n)
        self._book(self.privacy_)

        if self.center:
            self.mean_ = Xv.mean(axis=0)
            Xw = Xv - self.mean_
        else:
            self.mean_ = np.zeros(p)
            Xw = Xv
        S = gram_matrix(Xw)
        S /= n

        self.lam_: float | None = None
        best: tuple[float, NDArray[np.float64], int, bool] | None = None
        for run in range(int(self.n_init)):
            if run == 0 and self.init == "fps":
                Q0 = self._fps_start(S, k, n, rng)
            else:
                Q0 = random_orthonormal_basis(p, k, rng)
            Q, n_iter, converged = truncated_power_method(
                S, Q0, s, max_iter=int(self.max_iter), tol=float(self.tol)
            )
            variance = float(np.sum(Q * (S @ Q)))  # tr(QᵀSQ)
            if best is None or variance > best[0]:
                best = (variance, Q, n_iter, converged)
        assert best is not None
        _, Q, self.n_iter_, self.converged_ = best
        if not self.converged_:
            warnings.warn(
                f"SparsePCA: the truncated power method did not converge in max_iter="
                f"{self.max_iter} iterations (tol={self.tol:g}). Increase max_iter or tol.",
                ConvergenceWarning,
                stacklevel=caller_stacklevel(),
            )
        self.components_, self.explained_variance_ = _ritz_rotation(S, Q)
        self.n_components_ = k
        self.support_ = np.flatnonzero(np.any(self.components_ != 0.0, axis=0))
        return self

    def _fps_start(
        self, S: NDArray[np.float64], k: int, n: int, rng: np.random.Generator
    ) -> NDArray[np.float64]:
        p = S.shape[0]
        lam = self.default_lam(S, n) if isinstance(self.lam, str) else float(self.lam)
        self.lam_ = lam
        if k == p:  # the Fantope is the single point I
            return np.eye(p)
        result = fantope_admm(
            S, k, lam, tol=float(self.fps_tol), max_iter=int(self.fps_max_iter), rng=rng
        )
        _, vectors = top_eigenvectors(result.solution, k)
        return vectors


def _ritz_rotation(
    S: NDArray[np.float64], Q: NDArray[np.float64]
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Rotate ``Q`` within its span to the Ritz vectors of S (decreasing), as rows.

    ``Q R`` for an orthogonal k×k ``R`` has the same zero rows as ``Q``: the support is kept.
    """
    k = Q.shape[1]
    values, R = top_eigenvectors(Q.T @ S @ Q, k)
    basis = Q @ R
    basis[~np.any(Q != 0.0, axis=1)] = 0.0  # already exact zeros; made explicit
    return fix_signs(basis).T.copy(), values
