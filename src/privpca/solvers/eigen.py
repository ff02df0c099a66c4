"""Dense symmetric eigen-solvers shared by the estimators."""

from __future__ import annotations

import numpy as np
import scipy.linalg
from numpy.typing import NDArray

__all__ = ["fix_signs", "top_eigenvectors"]


def fix_signs(basis: NDArray[np.float64]) -> NDArray[np.float64]:
    """Flip each column so its largest-magnitude entry is positive (deterministic output)."""
    idx = np.argmax(np.abs(basis), axis=0)
    signs = np.sign(basis[idx, np.arange(basis.shape[1])])
    signs[signs == 0] = 1.0
    return basis * signs


def top_eigenvectors(
    S: NDArray[np.float64], k: int
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Top-``k`` eigenpairs of a symmetric matrix, in decreasing order of eigenvalue.

    Uses LAPACK's ``syevr`` through ``scipy.linalg.eigh(subset_by_index=...)``, which skips the
    back-transformation of the unwanted eigenvectors. Only the upper triangle of ``S`` is read.

    Returns
    -------
    eigenvalues : ndarray of shape (k,)
    eigenvectors : ndarray of shape (p, k)
        Orthonormal columns, signs fixed by :func:`fix_signs`.
    """
    p = S.shape[0]
    values, vectors = scipy.linalg.eigh(
        S, subset_by_index=[p - k, p - 1], lower=False, check_finite=False, driver="evr"
    )
    return values[::-1].copy(), fix_signs(vectors[:, ::-1])
