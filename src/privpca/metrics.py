"""Accuracy metrics for estimated principal subspaces.

Bases are ``(n_features, k)`` arrays with orthonormal columns. A fitted estimator's
``components_`` has orthonormal *rows*, so pass ``est.components_.T``.

Which metric each paper reports (see ``ALGORITHMS.md``):

* Wang & Xu: :func:`subspace_distance` ``‖ÛÛᵀ − UUᵀ‖_F`` (at most √(2k));
* Ge et al.: :func:`sin_theta` ``‖sin Θ‖_F`` (at most √k); ``‖sin Θ‖²_F = ½‖ÛÛᵀ − UUᵀ‖²_F``;
* Liu et al.: ``sin∠(ŵ, v₁)``, which is :func:`sin_theta` for k = 1.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numpy.typing import ArrayLike, NDArray

__all__ = [
    "SupportRecovery",
    "explained_variance",
    "sin_theta",
    "subspace_distance",
    "support_recovery",
]


def _basis(U: ArrayLike, name: str, atol: float = 1e-6) -> NDArray[np.float64]:
    arr = np.asarray(U, dtype=np.float64)
    if arr.ndim == 1:
        arr = arr[:, None]
    if arr.ndim != 2:
        raise ValueError(f"{name} must be a 1-D vector or a 2-D (n_features, k) basis.")
    if arr.shape[1] > arr.shape[0]:
        raise ValueError(
            f"{name} has shape {arr.shape}: bases are (n_features, k) with k <= n_features. "
            "Did you pass components_ (k, n_features)? Use components_.T."
        )
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} contains NaN or infinity.")
    gram = arr.T @ arr
    if not np.allclose(gram, np.eye(arr.shape[1]), atol=atol):
        raise ValueError(
            f"{name} must have orthonormal columns (max |UᵀU − I| = "
            f"{np.abs(gram - np.eye(arr.shape[1])).max():.2e})."
        )
    return arr


def _pair(U: ArrayLike, V: ArrayLike) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    u, v = _basis(U, "U"), _basis(V, "V")
    if u.shape[0] != v.shape[0]:
        raise ValueError(f"U and V live in different spaces: {u.shape[0]} vs {v.shape[0]} rows.")
    return u, v


def subspace_distance(U: ArrayLike, V: ArrayLike) -> float:
    """``‖UUᵀ − VVᵀ‖_F``, the projection distance (Wang & Xu's metric).

    Computed without forming p×p matrices: ``‖UUᵀ − VVᵀ‖²_F = k_U + k_V − 2‖UᵀV‖²_F
    = ‖(I − VVᵀ)U‖²_F + ‖(I − UUᵀ)V‖²_F``, the last form from the residuals themselves, so
    that near-equal subspaces give distances down to rounding (~1e-15) rather than the
    ~1e-8 floor that the square root of a cancelled difference would leave.
    """
    u, v = _pair(U, V)
    sq = _residual_sq(u, v) + _residual_sq(v, u)
    return float(np.sqrt(sq))


def _residual_sq(u: np.ndarray, v: np.ndarray) -> float:
    """``‖(I − VVᵀ)U‖²_F`` from the residual ``U − V(VᵀU)`` (orthonormal columns)."""
    r = u - v @ (v.T @ u)
    return float(np.einsum("ij,ij->", r, r))


def sin_theta(U: ArrayLike, V: ArrayLike) -> float:
    """``‖sin Θ(U, V)‖_F = ‖(I − VVᵀ)U‖_F`` (Ge et al.'s metric; sin∠ for k = 1)."""
    u, v = _pair(U, V)
    return float(np.sqrt(_residual_sq(u, v)))


def explained_variance(X: ArrayLike, U: ArrayLike, *, ratio: bool = False) -> float:
    """Variance of ``X`` captured by the subspace of ``U``: ``tr(UᵀXᵀXU)/n``.

    Parameters
    ----------
    X : array-like of shape (n_samples, n_features)
        Data (not centred here: centre it first if you want variance about the mean).
    U : array-like of shape (n_features, k)
        Orthonormal basis.
    ratio : bool, default=False
        Divide by the total ``‖X‖²_F/n``, giving the fraction in [0, 1].
    """
    x = np.asarray(X, dtype=np.float64)
    u = _basis(U, "U")
    if x.ndim != 2 or x.shape[1] != u.shape[0]:
        raise ValueError(f"X must be 2-D with {u.shape[0]} columns; got shape {x.shape}.")
    captured = float(np.sum((x @ u) ** 2)) / x.shape[0]
    if not ratio:
        return captured
    total = float(np.sum(x**2)) / x.shape[0]
    return captured / total if total > 0 else 0.0


class SupportRecovery(NamedTuple):
    """Row-support recovery: rates and the estimated support."""

    true_positive_rate: float
    false_positive_rate: float
    support: NDArray[np.intp]


def support_recovery(
    U_hat: ArrayLike, true_support: ArrayLike, *, threshold: float = 1e-8
) -> SupportRecovery:
    """True and false positive rates of the estimated row support.

    Parameters
    ----------
    U_hat : array-like of shape (n_features, k)
        Estimated basis (need not be orthonormal: a sparse solution is fine).
    true_support : array-like of int or bool
        Indices of the true non-zero rows, or a boolean mask of length ``n_features``.
    threshold : float, default=1e-8
        A row is in the estimated support when its L2 norm exceeds this.

    Returns
    -------
    SupportRecovery
        ``true_positive_rate`` = |Ŝ ∩ S|/|S|, ``false_positive_rate`` = |Ŝ \\ S|/(p − |S|),
        and ``support``, the sorted estimated support.
    """
    u = np.asarray(U_hat, dtype=np.float64)
    if u.ndim == 1:
        u = u[:, None]
    p = u.shape[0]
    truth = np.asarray(true_support)
    mask = np.zeros(p, dtype=bool)
    if truth.dtype == bool:
        if truth.shape != (p,):
            raise ValueError(f"A boolean true_support must have length {p}.")
        mask = truth.copy()
    else:
        mask[truth.astype(np.intp)] = True
    estimated = np.linalg.norm(u, axis=1) > threshold
    n_true = int(mask.sum())
    n_false = p - n_true
    tpr = float((estimated & mask).sum() / n_true) if n_true else float("nan")
    fpr = float((estimated & ~mask).sum() / n_false) if n_false else float("nan")
    return SupportRecovery(tpr, fpr, np.flatnonzero(estimated))
