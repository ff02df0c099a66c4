"""What every privpca PCA estimator shares: transform, tags and privacy charging."""

from __future__ import annotations

import multiprocessing
import warnings
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray
from sklearn.base import BaseEstimator, TransformerMixin
from sklearn.utils.validation import check_is_fitted, validate_data

from privpca.accounting.ledger import PrivacyLedger, default_ledger
from privpca.accounting.record import PrivacyRecord
from privpca.exceptions import PrivacyWarning

__all__ = ["BasePrivatePCA"]


class BasePrivatePCA(TransformerMixin, BaseEstimator):
    """Base class: ``transform``/``inverse_transform`` on ``components_``, and the ledger.

    Projections are *uncentred*: the private estimators find the principal subspace of the
    second-moment matrix ``E[x xᵀ]`` (as the papers do), because centring needs a private mean
    that would cost budget. Centre data with a public mean first when that matters.
    """

    components_: NDArray[np.float64]
    privacy_: PrivacyRecord

    def _charge(self, record: PrivacyRecord, ledger: PrivacyLedger | None) -> None:
        """Record the spend before anything computed from the data is released."""
        if ledger is None and multiprocessing.parent_process() is not None:
            warnings.warn(
                f"{type(self).__name__} is fitting in a child process with ledger=None: its "
                "spend is recorded in this process's default ledger and will not reach the "
                "parent's. Pass an explicit PrivacyLedger (it refuses to cross processes, so "
                "the problem becomes an error) or fit with n_jobs=1.",
                PrivacyWarning,
                stacklevel=3,
            )
        target = default_ledger() if ledger is None else ledger
        if not isinstance(target, PrivacyLedger):
            raise ValueError(
                f"The 'ledger' parameter of {type(self).__name__} must be a PrivacyLedger or "
                f"None. Got {ledger!r} instead."
            )
        target.spend(record, label=type(self).__name__)

    def transform(self, X: ArrayLike) -> NDArray[np.float64]:
        """Project ``X`` onto the components: ``X @ components_.T`` (post-processing, free).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        ndarray of shape (n_samples, n_components)
        """
        check_is_fitted(self, "components_")
        Xv = validate_data(self, X, reset=False, dtype=np.float64)
        return np.asarray(Xv @ self.components_.T)

    def inverse_transform(self, X: ArrayLike) -> NDArray[np.float64]:
        """Map projections back to feature space: ``X @ components_``."""
        check_is_fitted(self, "components_")
        Xv = np.asarray(X, dtype=np.float64)
        return np.asarray(Xv @ self.components_)

    def __sklearn_tags__(self) -> Any:
        tags = super().__sklearn_tags__()
        # Not tagged non_deterministic: the noise is random, but a fixed random_state
        # reproduces a fit exactly, which scikit-learn's idempotence checks verify.
        tags.transformer_tags.preserves_dtype = ["float64"]
        return tags
