"""Building blocks of (noisy, truncated) power iterations: thin QR, row truncation, one step.

Pure numerics, no privacy logic: the estimators that use these (Hardt & Price's noisy power
method, the truncated power method for sparse PCA, Ge et al.'s distributed DPS-PCA) decide
what noise to add and account for it themselves.

* :func:`thin_qr` — reduced Householder QR with the diagonal of ``R`` made non-negative, so the
  orthonormal factor is unique for a full-rank input (Ge et al.'s "ThinQR").
* :func:`truncate_rows` — keep the ``s`` rows of largest L2 norm and zero the rest (Ge et al.'s
  "Threshold"; for a vector, Yuan & Zhang's truncation to the ``s`` largest ``|entries|``).
* :func:`random_orthonormal_basis` — a data-independent Haar-random start.
* :func:`power_step` — one step ``Q ← ThinQR(Truncate(A Q + G, s))`` with optional noise ``G``
  and optional truncation, where ``A`` is a matrix or a callable applying it.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, Literal, overload

import numpy as np
from numpy.typing import ArrayLike, NDArray

from privpca.mechanisms.noise import gaussian_release

__all__ = [
    "power_step",
    "random_orthonormal_basis",
    "thin_qr",
    "top_row_support",
    "truncate_rows",
]

LinearOperator = NDArray[np.float64] | Callable[[NDArray[np.float64]], NDArray[np.float64]]


@overload
def thin_qr(M: ArrayLike, *, return_r: Literal[False] = ...) -> NDArray[np.float64]: ...


@overload
def thin_qr(
    M: ArrayLike, *, return_r: Literal[True]
) -> tuple[NDArray[np.float64], NDArray[np.float64]]: ...


def thin_qr(
    M: ArrayLike, *, return_r: bool = False
) -> NDArray[np.float64] | tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Reduced QR decomposition ``M = Q R`` with ``diag(R) ≥ 0``.

    LAPACK's Householder QR (``geqrf``/``orgqr`` through :func:`numpy.linalg.qr`), followed by a
    sign flip of each column of ``Q`` (and row of ``R``) whose diagonal entry of ``R`` is
    negative. For a full-column-rank ``M`` the result is then the unique QR factorisation with
    positive diagonal, so two codes that agree on ``M`` agree on ``Q`` (Ge et al. define ThinQR
    this way). Columns with ``R[j, j] = 0`` (rank deficiency) are left as LAPACK returns them:
    still orthonormal, but not unique. Rows of ``M`` that are exactly zero are exactly zero in
    ``Q`` whenever at least k rows are non-zero (the factorisation is computed on the non-zero
    rows only), so a row-sparse input gives an exactly row-sparse basis.

    Parameters
    ----------
    M : array-like of shape (p, k)
        With ``p ≥ k``. A 1-D input of shape (p,) is treated as one column and a 1-D ``Q``
        (the normalised vector) is returned.
    return_r : bool, default=False
        Also return ``R``.

    Returns
    -------
    Q : ndarray of shape (p, k)
        Orthonormal columns spanning the range of ``M`` (when it has full column rank).
    R : ndarray of shape (k, k)
        Upper triangular with non-negative diagonal; only with ``return_r=True``.

    Examples
    --------
    >>> import numpy as np
    >>> Q, R = thin_qr(np.array([[3.0, 1.0], [-4.0, 2.0], [0.0, 1.0]]), return_r=True)
    >>> bool(np.all(np.diag(R) >= 0)), Q.shape
    (True, (3, 2))
    """
    arr = np.asarray(M, dtype=np.float64)
    vector = arr.ndim == 1
    if vector:
        arr = arr[:, None]
    if arr.ndim != 2:
        raise ValueError(f"thin_qr expects a 1-D or 2-D array; got shape {arr.shape}.")
    p, k = arr.shape
    if k > p:
        raise ValueError(f"thin_qr needs at least as many rows as columns; got shape {arr.shape}.")
    if not np.all(np.isfinite(arr)):
        raise ValueError("thin_qr: the matrix contains NaN or infinity.")
    nonzero = np.any(arr != 0.0, axis=1)
    n_rows = int(nonzero.sum())
    if k <= n_rows < p:
        # Row-sparse input (e.g. after truncate_rows): factor the non-zero rows only. Householder
        # reflections on the full matrix would leave rounding-level values (~1e-17) in rows that
        # are exactly zero in M and so in the exact Q; here they stay exactly zero.
        Q_rows, R = np.linalg.qr(arr[nonzero], mode="reduced")
        Q = np.zeros((p, k))
        Q[nonzero] = Q_rows
    else:
        Q, R = np.linalg.qr(arr, mode="reduced")
    signs = np.where(np.diag(R) < 0.0, -1.0, 1.0)
    Q *= signs
    R *= signs[:, None]
    if vector:
        Q, R = Q[:, 0], R
    if return_r:
        return Q, R
    return Q


def top_row_support(M: ArrayLike, n_nonzero: int) -> NDArray[np.intp]:
    """Indices (sorted) of the ``n_nonzero`` rows of ``M`` with the largest L2 norm.

    Ties are broken towards the lower index, so the result is deterministic. For a 1-D ``M``
    the "rows" are its entries and the norm is the absolute value.
    """
    arr = np.asarray(M, dtype=np.float64)
    if arr.ndim not in (1, 2):
        raise ValueError(f"Expected a 1-D or 2-D array; got shape {arr.shape}.")
    p = arr.shape[0]
    s = int(n_nonzero)
    if isinstance(n_nonzero, bool) or s != n_nonzero or not 0 <= s <= p:
        raise ValueError(
            f"n_nonzero must be an int in [0, {p}] (the number of rows). Got {n_nonzero!r} instead."
        )
    norms = np.abs(arr) if arr.ndim == 1 else np.einsum("ij,ij->i", arr, arr)
    if s == p:
        return np.arange(p)
    # A stable sort of -norm keeps, among equal norms, the lower indices first.
    keep = np.argsort(-norms, kind="stable")[:s]
    return np.sort(keep)


def truncate_rows(M: ArrayLike, n_nonzero: int) -> NDArray[np.float64]:
    """Keep the ``n_nonzero`` rows of largest L2 norm and set every other row to zero.

    This is the ``Threshold``/``Truncate`` operator of row-sparse power methods (Ge et al. 2018,
    Algorithm 1; Yuan & Zhang 2013 for a vector, where it keeps the largest ``|entries|``).
    Ties are broken towards the lower row index (see :func:`top_row_support`).

    Parameters
    ----------
    M : array-like of shape (p, k) or (p,)
        Not modified.
    n_nonzero : int
        ``s``, with ``0 ≤ s ≤ p``.

    Returns
    -------
    ndarray of the shape of ``M``
        A new array with at most ``s`` non-zero rows.

    Examples
    --------
    >>> import numpy as np
    >>> truncate_rows(np.array([[1.0, 0.0], [0.0, 3.0], [2.0, 2.0]]), 2)
    array([[0., 0.],
           [0., 3.],
           [2., 2.]])
    """
    arr = np.asarray(M, dtype=np.float64)
    keep = top_row_support(arr, n_nonzero)
    out = np.zeros_like(arr)
    out[keep] = arr[keep]
    return out


def random_orthonormal_basis(
    n_features: int, n_components: int, rng: np.random.Generator
) -> NDArray[np.float64]:
    """A Haar-random ``(p, k)`` basis: :func:`thin_qr` of a standard Gaussian matrix.

    It depends on nothing but ``rng``: a data-independent start for a private power method.
    """
    return thin_qr(rng.standard_normal((int(n_features), int(n_components))))


def power_step(
    A: LinearOperator,
    Q: NDArray[np.float64],
    *,
    noise_scale: float = 0.0,
    rng: np.random.Generator | None = None,
    n_nonzero: int | None = None,
    return_noisy_product: bool = False,
    sensitivity: float = math.nan,
) -> Any:
    """One (noisy, truncated) power-iteration step: ``ThinQR(Truncate(A Q + G, s))``.

    Parameters
    ----------
    A : ndarray of shape (p, p) or callable
        The matrix, or a function returning ``A @ Q`` for a ``(p, k)`` block (e.g.
        ``lambda Q: X.T @ (X @ Q)`` to avoid forming ``XᵀX``).
    Q : ndarray of shape (p, k)
        Current orthonormal basis.
    noise_scale : float, default=0.0
        Standard deviation σ of the i.i.d. Gaussian noise ``G`` added to every entry of
        ``A Q`` (Hardt & Price's noisy power method). 0 adds nothing and draws nothing.
    rng : numpy.random.Generator or None
        Required when ``noise_scale > 0``.
    n_nonzero : int or None, default=None
        Keep only the ``s`` rows of largest norm before the QR (truncated power method);
        ``None`` keeps all rows.
    return_noisy_product : bool, default=False
        Also return ``Y = A Q + G`` (what a private algorithm releases).
    sensitivity : float, optional
        L2 sensitivity of ``A Q`` under the caller's neighbouring relation: secure mode needs
        it to cover its grid's rounding (:func:`privpca.mechanisms.noise.gaussian_release`).

    Returns
    -------
    Q_next : ndarray of shape (p, k)
    Y : ndarray of shape (p, k)
        Only with ``return_noisy_product=True``.
    """
    if not (np.isfinite(noise_scale) and noise_scale >= 0):
        raise ValueError(f"noise_scale must be a finite float >= 0. Got {noise_scale!r} instead.")
    if noise_scale > 0 and rng is None:
        raise ValueError("power_step needs an rng when noise_scale > 0.")
    Y = A(Q) if callable(A) else A @ Q
    Y = np.array(Y, dtype=np.float64)  # a fresh array we may modify
    if noise_scale > 0:
        assert rng is not None
        Y = gaussian_release(Y, noise_scale, rng, sensitivity=sensitivity)
    Z = Y if n_nonzero is None else truncate_rows(Y, n_nonzero)
    Q_next = thin_qr(Z)
    if return_noisy_product:
        return Q_next, Y
    return Q_next
