"""What the streaming (Oja-type) estimators share: input paths and the starting point.

Every estimator in :mod:`privpca.decomposition.oja` and :mod:`privpca.decomposition.dp_pca`
accepts either vector records (``fit(X)``, ``A_i = x_i x_iᵀ`` never formed) or general
symmetric matrices (``fit_matrices(A)``, Liu et al.'s Assumption 1).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray
from sklearn.utils.validation import validate_data

from privpca._validation import check_n_components, check_random_state, refuse_non_finite
from privpca.decomposition._base import BasePrivatePCA
from privpca.solvers.oja import GradientSource, MatrixGradients, VectorGradients, check_matrices
from privpca.solvers.power import random_orthonormal_basis

__all__ = ["StochasticPCA"]


class StochasticPCA(BasePrivatePCA):
    """Base class: ``fit``/``fit_matrices`` → ``_fit_source(source, k, rng)``."""

    n_components: int
    random_state: Any

    def fit(self, X: ArrayLike, y: Any = None) -> Any:
        """Fit on vector records: ``A_i = x_i x_iᵀ`` (never materialised).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            One record per row, used in a single pass. Not modified.
        y : ignored

        Returns
        -------
        self
        """
        Xv = validate_data(self, X, dtype=np.float64, ensure_all_finite=False, reset=True)
        refuse_non_finite(Xv, "X")
        return self._fit_source(VectorGradients(Xv))

    def fit_matrices(self, A: ArrayLike) -> Any:
        """Fit on general symmetric matrices ``A_i`` (Liu et al.'s Assumption 1).

        The estimate is the top-k eigenspace of ``E[A_i]``. ``transform`` then takes vectors
        of dimension p as usual.

        Parameters
        ----------
        A : array-like of shape (n_samples, n_features, n_features)
            One symmetric matrix per record. Not modified.

        Returns
        -------
        self
        """
        arr = check_matrices(A)
        self.n_features_in_ = arr.shape[1]
        if hasattr(self, "feature_names_in_"):
            del self.feature_names_in_
        return self._fit_source(MatrixGradients(arr))

    def _fit_source(self, source: GradientSource) -> Any:
        raise NotImplementedError

    def _start(
        self, source: GradientSource
    ) -> tuple[int, np.random.Generator, NDArray[np.float64]]:
        """Validated k, the RNG, and ``W₀`` uniform on the Stiefel manifold (data-independent)."""
        k = check_n_components(self.n_components, source.n_features, owner=self)
        rng = check_random_state(self.random_state)
        return k, rng, random_orthonormal_basis(source.n_features, k, rng)

