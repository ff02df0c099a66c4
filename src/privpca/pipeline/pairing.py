"""Centring without a mean: differences of disjoint pairs of rows (wide tables).

A private mean in ``p`` dimensions from ``n`` rows is off by ``‖e‖² ≈ p·σ_mean²/n²``, and
centring on it adds the positive rank-one term ``n·e·eᵀ`` to the Gram matrix: on a wide table
(``p`` comparable to ``n``) it outweighs the top eigenvalues, and the fit returns the mean's
noise direction as a component. The differences of disjoint pairs of rows need no
mean at all: for rows ``x_i, x_j`` drawn from a distribution of covariance Σ,
``d = (x_i − x_j)/√2`` has mean 0 and covariance Σ, so ``Σ d dᵀ`` over the ``⌊n/2⌋`` pairs
estimates ``(n/2)·Σ`` without any centring error. The price is half the rows; whether it pays
is decided from the public shape (:func:`privpca.pipeline.budget.pairs_pay`).

Privacy
-------
The pairing is a secret uniformly random permutation of the row indices drawn from the fit's
own generator (never from the data, never released); with ``n`` odd one row (the last of the
permutation) is left out. Neighbouring relation: **replace one record**, ``n`` public. A
replaced record changes exactly one pair difference (or none, if it is the row left out), so
the table of pair differences is a replace-one neighbour of the other one, with ``⌊n/2⌋``
rows (public): every later part (the private norm bound, the statistic, the variances) keeps
its sensitivity and calibration, computed on the pair differences (the Gram's ``Δ = √2·D²``
with ``‖d‖ ≤ D`` after clipping). The pairing itself releases nothing and takes no budget.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from numpy.typing import NDArray

from privpca.streaming.selection import take_rows

__all__ = ["PAIRING_NOTE", "pair_differences", "pair_order"]

#: What a fit's record says about the pairing (its notes).
PAIRING_NOTE = (
    "Centring by row pairs (wide table: n, p and epsilon public; privpca.pipeline.pairing): "
    "no private mean was released; the rows were paired by a secret uniformly random "
    "permutation drawn from the estimator's generator and the statistic read the floor(n/2) "
    "differences (x_i - x_j)/sqrt(2), which have the table's covariance. Replacing one "
    "record changes one difference, so every sensitivity is that of one row of the "
    "differences (the row left out when n is odd changes none)."
)


def pair_order(n_samples: int, rng: np.random.Generator) -> tuple[NDArray[np.int64],
                                                                   NDArray[np.int64]]:
    """The two halves ``(a, b)`` of a secret random pairing: row ``a[i]`` pairs ``b[i]``.

    ``rng`` is the fit's generator (one permutation draw); ``⌊n/2⌋`` pairs.
    """
    n = int(n_samples)
    if n < 2:
        raise ValueError(f"Pairing rows needs at least 2 rows; got {n}.")
    perm = rng.permutation(n)
    h = n // 2
    return perm[:h].astype(np.int64), perm[h:2 * h].astype(np.int64)


def pair_differences(X: Any, rng: np.random.Generator) -> NDArray[np.float64]:
    """``(x_a − x_b)/√2`` over a secret random pairing of the rows of ``X``.

    Parameters
    ----------
    X : ndarray of shape (n, p) or a :class:`~privpca.streaming.RowSource`
        The table (a source is gathered into memory, one pass).
    rng : numpy.random.Generator
        The fit's generator: the only randomness (one permutation).

    Returns
    -------
    ndarray of shape (n // 2, p), float64

    Examples
    --------
    >>> X = np.arange(10.0).reshape(5, 2)
    >>> D = pair_differences(X, np.random.default_rng(0))
    >>> D.shape
    (2, 2)
    >>> bool(np.allclose(D[:, 0], D[:, 1]))
    True
    """
    n = int(X.shape[0]) if isinstance(X, np.ndarray) else int(X.n_samples)
    a, b = pair_order(n, rng)
    if isinstance(X, np.ndarray):
        rows = X
    else:  # a RowSource: gather the paired rows (in the table's order) into memory
        keep = np.sort(np.concatenate([a, b]))
        rows = np.empty((n, int(X.n_features)))
        rows[keep] = np.asarray(take_rows(X, keep).X, dtype=np.float64)
    out = rows[a] - rows[b]
    out *= 1.0 / math.sqrt(2.0)
    return np.asarray(out, dtype=np.float64)
