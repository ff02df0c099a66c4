"""Oja's algorithm, to rank k: gradient sources, learning rates and the block update.

The stochastic gradient of ``max_W tr(Wᵀ Σ W)`` at one record is ``G_i = A_i W`` (p×k), with
``A_i = x_i x_iᵀ`` for vector data. It is never formed as a matrix: ``x_i (x_iᵀ W)`` costs
O(pk). General symmetric matrices ``A_i`` (Liu et al.'s Assumption 1) go through
:class:`MatrixGradients`.

Rank k is block Oja (Oja 1982; Allen-Zhu & Li 2017): ``W ← ThinQR(W + η G)``. For k = 1 the
QR is the paper's normalisation ``w ← w/‖w‖``.
"""

from __future__ import annotations

import numbers
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
from numpy.typing import ArrayLike, NDArray

from privpca.solvers.power import thin_qr

__all__ = [
    "GradientSource",
    "LearningRate",
    "MatrixGradients",
    "VectorGradients",
    "block_oja_update",
    "resolve_learning_rate",
]


class GradientSource(Protocol):
    """Per-record gradients ``A_i W`` of the PCA objective."""

    n_samples: int
    n_features: int

    def gradients(self, index: NDArray[np.intp], W: NDArray[np.float64]) -> NDArray[np.float64]:
        """``A_i W`` for each record in ``index``, flattened: shape ``(len(index), p·k)``."""
        ...

    def mean_gradient(
        self, index: NDArray[np.intp], W: NDArray[np.float64]
    ) -> NDArray[np.float64]:
        """``(1/|index|) Σ_i A_i W``, shape ``(p, k)``."""
        ...


class VectorGradients:
    """Gradients of vector records: ``A_i W = x_i (x_iᵀ W)`` without forming ``x_i x_iᵀ``."""

    def __init__(self, X: NDArray[np.float64]) -> None:
        self.X = X
        self.n_samples, self.n_features = X.shape

    def gradients(self, index: NDArray[np.intp], W: NDArray[np.float64]) -> NDArray[np.float64]:
        Xb = self.X[index]
        proj = Xb @ W  # (b, k)
        if W.shape[1] == 1:
            Xb *= proj  # in place on the gathered copy: no second b×p array
            return Xb
        return (Xb[:, :, None] * proj[:, None, :]).reshape(len(index), -1)

    def mean_gradient(
        self, index: NDArray[np.intp], W: NDArray[np.float64]
    ) -> NDArray[np.float64]:
        Xb = self.X[index]
        return np.asarray(Xb.T @ (Xb @ W)) / max(len(index), 1)


class MatrixGradients:
    """Gradients of general symmetric matrix records ``A_i`` (shape ``(n, p, p)``)."""

    def __init__(self, A: NDArray[np.float64]) -> None:
        self.A = A
        self.n_samples, self.n_features = A.shape[0], A.shape[1]

    def gradients(self, index: NDArray[np.intp], W: NDArray[np.float64]) -> NDArray[np.float64]:
        return np.matmul(self.A[index], W).reshape(len(index), -1)

    def mean_gradient(
        self, index: NDArray[np.intp], W: NDArray[np.float64]
    ) -> NDArray[np.float64]:
        return np.asarray(self.A[index].sum(axis=0) @ W) / max(len(index), 1)


def check_matrices(A: ArrayLike) -> NDArray[np.float64]:
    """Validate a stack of symmetric matrices ``(n, p, p)``: finite, square, symmetric."""
    arr = np.asarray(A, dtype=np.float64)
    if arr.ndim != 3 or arr.shape[1] != arr.shape[2] or arr.shape[0] == 0:
        raise ValueError(
            f"A must be a non-empty stack of square matrices of shape (n, p, p); got shape "
            f"{arr.shape}."
        )
    if not np.isfinite(arr).all():
        raise ValueError("A contains NaN or infinity (how many matrices is not reported: a "
                         "count of the data).")
    asym = np.abs(arr - arr.transpose(0, 2, 1)).max()
    if asym > 1e-8 * max(1.0, float(np.abs(arr).max())):
        raise ValueError(
            f"Every A_i must be symmetric (Liu et al.'s Assumption 1); the largest asymmetry "
            f"found is {asym:.3g}."
        )
    return arr


@dataclass(frozen=True)
class LearningRate:
    """The schedule ``η_t = c1 / (c2 + t)``, t = 1, 2, … (Liu et al., §5)."""

    c1: float
    c2: float

    def __call__(self, t: Any) -> Any:
        return self.c1 / (self.c2 + t)


def resolve_learning_rate(
    learning_rate: Any, default: LearningRate, *, owner: str
) -> LearningRate:
    """Turn ``"auto"``, a float ``c1`` or a pair ``(c1, c2)`` into a :class:`LearningRate`."""
    if isinstance(learning_rate, str) and learning_rate == "auto":
        return default
    if isinstance(learning_rate, numbers.Real) and not isinstance(learning_rate, bool):
        pair: Sequence[Any] = (float(learning_rate), default.c2)
    elif isinstance(learning_rate, Sequence) and not isinstance(learning_rate, str):
        pair = learning_rate
    else:
        pair = ()
    if (
        len(pair) == 2
        and all(isinstance(c, numbers.Real) and not isinstance(c, bool) for c in pair)
        and float(pair[0]) > 0
        and float(pair[1]) >= 0
        and all(np.isfinite(float(c)) for c in pair)
    ):
        return LearningRate(float(pair[0]), float(pair[1]))
    raise ValueError(
        f"The 'learning_rate' parameter of {owner} must be 'auto', a float c1 > 0 or a pair "
        f"(c1 > 0, c2 >= 0) for eta_t = c1/(c2 + t). Got {learning_rate!r} instead."
    )


def block_oja_update(
    W: NDArray[np.float64], step: NDArray[np.float64]
) -> NDArray[np.float64]:
    """``ThinQR(W + step)`` (normalisation for k = 1); a zero update leaves ``W`` unchanged."""
    M = W + step
    if W.shape[1] == 1:
        norm = float(np.linalg.norm(M))
        return W if norm == 0 or not np.isfinite(norm) else M / norm
    return thin_qr(M)
