"""Gram matrices ``XᵀX`` through BLAS ``syrk``.

``syrk`` computes one triangle only (half the flops of a general product) and reads ``X``
in place whether it is C- or F-ordered. NumPy's ``X.T @ X`` often takes the same route; calling
BLAS directly makes that a guarantee rather than a detail of the NumPy build.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray
from scipy.linalg import blas

__all__ = ["gram_matrix", "symmetrise_from_upper"]


def gram_matrix(X: NDArray[np.float64], *, symmetrise: bool = True) -> NDArray[np.float64]:
    """``XᵀX`` for a 2-D float64 array, without copying ``X`` when it is C- or F-ordered.

    Parameters
    ----------
    X : ndarray of shape (n_samples, n_features)
    symmetrise : bool, default=True
        Fill the lower triangle too. With ``False`` only the upper triangle is meaningful
        (enough for LAPACK eigen-solvers told to read the upper triangle).

    Returns
    -------
    ndarray of shape (n_features, n_features)
    """
    X = np.asarray(X, dtype=np.float64)
    if X.flags.c_contiguous:
        gram = blas.dsyrk(1.0, X.T, trans=0, lower=0)  # X.T is F-ordered: no copy
    else:
        gram = blas.dsyrk(1.0, np.asfortranarray(X), trans=1, lower=0)
    gram = np.asarray(gram)
    if symmetrise:
        symmetrise_from_upper(gram)
    return gram


def symmetrise_from_upper(M: NDArray[np.float64], block: int = 512) -> NDArray[np.float64]:
    """Copy the upper triangle of square ``M`` onto its lower triangle, in place, by blocks.

    Blocked so no p×p temporary (or p²/2 index array) is made: p = 20 000 stays cheap.
    """
    p = M.shape[0]
    for i in range(0, p, block):
        j = min(i + block, p)
        diag = M[i:j, i:j]
        diag[...] = np.triu(diag) + np.triu(diag, 1).T
        M[j:, i:j] = M[i:j, j:].T
    return M
