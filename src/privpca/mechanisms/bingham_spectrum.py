"""Validation of the ``(eigenvalues, eigenvectors)`` input that every Bingham sampler takes."""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray


def _check_spectrum(
    eigenvalues: ArrayLike, eigenvectors: ArrayLike | None
) -> tuple[NDArray[np.float64], NDArray[np.float64] | None]:
    lam = np.asarray(eigenvalues, dtype=np.float64)
    if lam.ndim != 1 or lam.size == 0 or not np.all(np.isfinite(lam)):
        raise ValueError("eigenvalues must be a non-empty 1-D array of finite numbers.")
    if eigenvectors is None:
        return lam, None
    U = np.asarray(eigenvectors, dtype=np.float64)
    if U.shape != (lam.size, lam.size):
        raise ValueError(
            f"eigenvectors must have shape {(lam.size, lam.size)}; got {U.shape} instead."
        )
    return lam, U
