"""Gram matrices ``XᵀX`` through BLAS ``syrk``.

``syrk`` computes one triangle only (half the flops of a general product) and reads ``X``
in place whether it is C- or F-ordered. NumPy's ``X.T @ X`` often takes the same route; calling
BLAS directly makes that a guarantee rather than a detail of the NumPy build.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
from numpy.typing import NDArray
from scipy.linalg import blas

__all__ = [
    "clipped_blocks",
    "gram_matrix",
    "symmetrise_from_upper",
    "transformed_blocks",
]


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
        # NumPy dispatches X.T @ X to its BLAS's syrk and fills both triangles, faster than
        # SciPy's dsyrk on the OpenBLAS builds privpca runs on (docs/BENCHMARKS.md, the
        # release pipeline).
        return np.asarray(X.T @ X)
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


#: Rows per block of the chunked passes: ~13 MB at p = 100, large enough for BLAS to run at
#: full speed and small enough that a pass never copies more than a block of the table.
BLOCK_ROWS = 16384


def transformed_blocks(
    X: NDArray[np.float64],
    rows: NDArray[np.intp] | None,
    centre: NDArray[np.float64] | None,
    scale: NDArray[np.float64] | None = None,
    *,
    block_rows: int = BLOCK_ROWS,
) -> Iterator[NDArray[np.float64]]:
    """Blocks of ``(X[rows] − centre)/scale``, each a new array (``X`` is never modified).

    ``rows`` (sorted, so the gathers read ``X`` nearly in order) selects a subset; ``None``
    takes every row. Only one block is ever materialised: a pass over a subset of a large
    table costs one block of memory instead of a copy of the subset.
    """
    n = X.shape[0] if rows is None else rows.shape[0]
    for start in range(0, n, block_rows):
        stop = min(start + block_rows, n)
        block = X[start:stop] if rows is None else X[rows[start:stop]]
        if centre is not None:
            block = block - centre
        elif rows is None:
            block = block.copy()
        if scale is not None:
            block /= scale
        yield block


def clipped_blocks(
    X: NDArray[np.float64],
    rows: NDArray[np.intp] | None,
    centre: NDArray[np.float64] | None,
    bound: float,
    *,
    scale: NDArray[np.float64] | None = None,
    block_rows: int = BLOCK_ROWS,
) -> Iterator[tuple[NDArray[np.float64], int]]:
    """Blocks of ``clip_bound((X[rows] − centre)/scale)``, each with its clipped count
    (see :func:`transformed_blocks`)."""
    for block in transformed_blocks(X, rows, centre, scale, block_rows=block_rows):
        norms = np.sqrt(np.einsum("ij,ij->i", block, block))
        over = norms > bound
        n_over = int(np.count_nonzero(over))
        if n_over:
            block[over] *= (bound / norms[over])[:, None]
        yield block, n_over
