"""Analyze Gauss (Dwork, Talwar, Thakurta & Zhang 2014): PCA of ``XᵀX + E`` in the central model.

A trusted curator computes the Gram matrix ``XᵀX``, adds a symmetric Gaussian matrix ``E``
whose upper triangle (diagonal included) is i.i.d. ``N(0, σ²)``, and releases the top-k
eigenvectors of the sum. The released matrix itself would also be private; the eigenvectors
are post-processing of it.

Privacy
-------
The mechanism releases ``u(XᵀX) + z`` where ``u`` packs the upper triangle (``p(p+1)/2``
numbers) and ``z ~ N(0, σ² I)``. With ``‖x‖ ≤ D`` for every record:

* **replace one record** (privpca's default relation, ``neighbouring="replace"``): ``XᵀX``
  changes by ``xxᵀ − yyᵀ`` and ``‖u(xxᵀ) − u(yyᵀ)‖₂ ≤ √2·D²``, attained at ``x = De₁``,
  ``y = De₂`` (derivation in ``ALGORITHMS.md``, local-model section, and in
  :mod:`privpca.protocols.local_covariance`), so **Δ = √2·D²**;
* **add or remove one record** (the paper's relation, ``neighbouring="add-remove"``): ``XᵀX``
  changes by ``±xxᵀ`` and ``‖u(xxᵀ)‖₂ ≤ ‖xxᵀ‖_F = ‖x‖² ≤ D²``, so **Δ = D²**.

σ is calibrated by the Gaussian mechanism, analytic (Balle & Wang 2018, default) or classic
``σ = Δ√(2 ln(1.25/δ))/ε`` (what the paper uses, valid for ε < 1 only).
"""

from __future__ import annotations

import math
from typing import Any

import dp_accounting
import numpy as np
from numpy.typing import ArrayLike
from sklearn.utils.validation import validate_data

from privpca._validation import (
    check_delta,
    check_epsilon,
    check_in_range,
    check_n_components,
    check_options,
    check_random_state,
    clip_rows,
)
from privpca.accounting.ledger import PrivacyLedger
from privpca.accounting.record import PrivacyRecord, PrivacySpend
from privpca.decomposition._base import BasePrivatePCA
from privpca.mechanisms.gaussian import (
    CALIBRATIONS,
    GaussianMechanism,
    certified_epsilon,
    symmetric_gaussian_noise,
)
from privpca.solvers.eigen import top_eigenvectors
from privpca.solvers.gram import gram_matrix

__all__ = [
    "ADD_REMOVE_ONE",
    "NEIGHBOURING_RELATIONS",
    "REPLACE_ONE",
    "AnalyzeGaussPCA",
    "gram_sensitivity",
]

NEIGHBOURING_RELATIONS: tuple[str, ...] = ("replace", "add-remove")
REPLACE_ONE = "replace one record (any two records of norm <= data_norm)"
ADD_REMOVE_ONE = "add or remove one record of norm <= data_norm"


def gram_sensitivity(data_norm: float, neighbouring: str = "replace") -> float:
    """L2 sensitivity of the packed upper triangle of ``XᵀX``: ``√2·D²`` or ``D²``.

    Parameters
    ----------
    data_norm : float
        The bound D on every record's L2 norm.
    neighbouring : {"replace", "add-remove"}, default="replace"
        Replace one record (Δ = √2·D²) or add/remove one record (Δ = D²).
    """
    neighbouring = check_options(neighbouring, "neighbouring", NEIGHBOURING_RELATIONS)
    return (math.sqrt(2.0) if neighbouring == "replace" else 1.0) * float(data_norm) ** 2


class AnalyzeGaussPCA(BasePrivatePCA):
    """Central-model PCA by Gaussian noise on the Gram matrix ("Analyze Gauss").

    Computes ``XᵀX + E`` with ``E`` symmetric, its upper triangle (diagonal included) i.i.d.
    ``N(0, σ²)``, and returns the top-k eigenvectors. σ is the Gaussian-mechanism noise for
    the L2 sensitivity Δ of the packed upper triangle of ``XᵀX``: ``Δ = √2·D²`` when one record
    is replaced (default) and ``Δ = D²`` when one is added or removed (the paper's relation).

    Parameters
    ----------
    n_components : int, default=2
        Dimension k of the subspace.
    epsilon : float, default=1.0
        ε > 0 of the (ε, δ)-DP guarantee.
    delta : float, default=1e-5
        0 < δ < 1.
    data_norm : float, default=1.0
        Public bound D on every record's L2 norm. Longer rows are clipped to it, with a
        :class:`~privpca.exceptions.RowClippingWarning` saying how many.
    neighbouring : {"replace", "add-remove"}, default="replace"
        The neighbouring relation of the guarantee. ``"replace"``: one record replaced by any
        other (Δ = √2·D²; privpca's relation everywhere). ``"add-remove"``: one record added
        or removed (Δ = D²), as in Dwork et al.; the privacy record then also states, in its
        ``notes``, the ε the same noise certifies under replacement.
    calibration : {"analytic", "classic"}, default="analytic"
        Exact analytic Gaussian calibration (Balle & Wang 2018), or the paper's classic
        ``σ = Δ√(2 ln(1.25/δ))/ε``, which is proven only for ε < 1 (a
        :class:`~privpca.exceptions.PrivacyLeakWarning` is issued otherwise and
        ``privacy_.epsilon`` reports the ε the noise really certifies).
    random_state : None, int or numpy.random.Generator, default=None
        Source of the noise.
    ledger : PrivacyLedger or None, default=None
        Where the spend is recorded (``None``: :func:`privpca.accounting.default_ledger`).

    Attributes
    ----------
    components_ : ndarray of shape (n_components, n_features)
        Orthonormal rows: top-k eigenvectors of ``XᵀX + E``, in decreasing eigenvalue order.
    explained_variance_ : ndarray of shape (n_components,)
        Top eigenvalues of ``(XᵀX + E)/n`` (noisy; may be negative). ``n`` is treated as
        public, as it is in ``privacy_.n_samples``.
    noise_scale_ : float
        σ, the standard deviation of each upper-triangle entry of ``E``.
    privacy_ : PrivacyRecord
        Central model, the neighbouring relation, Δ, σ and the certified (ε, δ).
    n_features_in_ : int

    See Also
    --------
    ModSuLQPCA : the same mechanism on ``XᵀX/n``, calibrated by Chaudhuri et al.'s theorem.
    NoisyPowerPCA : noise on ``XᵀX Q`` over T iterations (never forms the noisy p×p matrix).

    Notes
    -----
    Cost: one Gram matrix (``O(np²)``, BLAS ``syrk``), ``p(p+1)/2`` normal draws and a partial
    symmetric eigendecomposition (top k pairs only).

    References
    ----------
    C. Dwork, K. Talwar, A. Thakurta, L. Zhang. Analyze Gauss: optimal bounds for
    privacy-preserving principal component analysis. STOC 2014, Algorithm 1.
    B. Balle, Y.-X. Wang. Improving the Gaussian mechanism for differential privacy:
    analytical calibration and optimal denoising. ICML 2018.

    Examples
    --------
    >>> from privpca.decomposition.analyze_gauss import AnalyzeGaussPCA
    >>> from privpca.datasets import make_spiked
    >>> X, V = make_spiked(5_000, 10, 2, lam=9.0, random_state=0)
    >>> est = AnalyzeGaussPCA(n_components=2, epsilon=1.0, random_state=0).fit(X)
    >>> est.components_.shape
    (2, 10)
    >>> est.privacy_.model, round(est.privacy_.sensitivity, 4)
    ('central', 1.4142)
    """

    def __init__(
        self,
        n_components: int = 2,
        *,
        epsilon: float = 1.0,
        delta: float = 1e-5,
        data_norm: float = 1.0,
        neighbouring: str = "replace",
        calibration: str = "analytic",
        random_state: Any = None,
        ledger: PrivacyLedger | None = None,
    ) -> None:
        self.n_components = n_components
        self.epsilon = epsilon
        self.delta = delta
        self.data_norm = data_norm
        self.neighbouring = neighbouring
        self.calibration = calibration
        self.random_state = random_state
        self.ledger = ledger

    def _mechanism(self) -> GaussianMechanism:
        epsilon = check_epsilon(self.epsilon, owner=self)
        delta = check_delta(self.delta, owner=self)
        data_norm = check_in_range(self.data_norm, "data_norm", low=0.0, owner=self)
        relation = check_options(
            self.neighbouring, "neighbouring", NEIGHBOURING_RELATIONS, owner=self
        )
        calibration = check_options(self.calibration, "calibration", CALIBRATIONS, owner=self)
        return GaussianMechanism(
            epsilon,
            delta,
            gram_sensitivity(data_norm, relation),
            calibration,
            REPLACE_ONE if relation == "replace" else ADD_REMOVE_ONE,
        )

    def _record(self, mech: GaussianMechanism, n: int, n_clipped: int) -> PrivacyRecord:
        eps = mech.certified_epsilon
        notes = (
            "The released eigenvectors are post-processing of the noisy Gram matrix "
            "XᵀX + E, itself (epsilon, delta)-DP."
        )
        if self.calibration == "classic":
            notes += (
                f" Classic calibration: epsilon is what sigma certifies exactly ({eps:.4g}), "
                f"the requested target was {float(self.epsilon):g}."
            )
        if self.neighbouring == "add-remove":
            replace_sens = gram_sensitivity(self.data_norm, "replace")
            eps_replace = certified_epsilon(mech.sigma, mech.delta, replace_sens)
            notes += (
                " Guarantee stated for add/remove-one neighbours (Delta = D²), as in Dwork et "
                f"al.; under replace-one neighbours (Delta = √2·D²) the same noise certifies "
                f"epsilon = {eps_replace:.4g} at the same delta. The ledger composes this "
                "fit's event as given: do not mix neighbouring relations in one ledger."
            )
        spend = PrivacySpend(
            mechanism="gaussian: packed upper triangle of XᵀX (Analyze Gauss)",
            epsilon=eps,
            delta=mech.delta,
            sensitivity=mech.sensitivity,
            noise_scale=mech.sigma,
            dp_event=dp_accounting.GaussianDpEvent(mech.noise_multiplier),
        )
        return PrivacyRecord(
            epsilon=eps,
            delta=mech.delta,
            model="central",
            neighbouring=mech.neighbouring,
            sensitivity=mech.sensitivity,
            noise_scale=mech.sigma,
            calibration=mech.calibration,
            data_norm=float(self.data_norm),
            n_samples=int(n),
            n_clipped=int(n_clipped),
            spends=(spend,),
            target_epsilon=float(self.epsilon),
            notes=notes,
        )

    def fit(self, X: ArrayLike, y: Any = None) -> AnalyzeGaussPCA:
        """Add calibrated symmetric Gaussian noise to ``XᵀX`` and keep its top-k eigenvectors.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            One record per row. Not modified.
        y : ignored

        Returns
        -------
        self
        """
        Xv = validate_data(self, X, dtype=np.float64, ensure_all_finite=False, reset=True)
        n, p = Xv.shape
        k = check_n_components(self.n_components, p, owner=self)
        mech = self._mechanism()
        rng = check_random_state(self.random_state)
        Xc, n_clipped = clip_rows(Xv, float(self.data_norm), owner=self)
        self.privacy_ = self._record(mech, n, n_clipped)
        self._charge(self.privacy_, self.ledger)
        noisy = gram_matrix(Xc)
        noisy += symmetric_gaussian_noise(p, mech.sigma, rng)
        values, vectors = top_eigenvectors(noisy, k)
        self.components_ = vectors.T.copy()
        self.explained_variance_ = values / n
        self.noise_scale_ = mech.sigma
        return self
