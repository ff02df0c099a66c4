"""Oja's algorithm, to rank k: gradient sources, learning rates and the block update.

The stochastic gradient of ``max_W tr(Wᵀ Σ W)`` at one record is ``G_i = A_i W`` (p×k), with
``A_i = x_i x_iᵀ`` for vector data. It is never formed as a matrix: ``x_i (x_iᵀ W)`` costs
O(pk). General symmetric matrices ``A_i`` (Liu et al.'s Assumption 1) go through
:class:`MatrixGradients`.

Rank k is block Oja (Oja 1982; Allen-Zhu & Li 2017): ``W ← ThinQR(W + η G)``. For k = 1 the
QR is the paper's normalisation ``w ← w/‖w‖``. :func:`oja_steps` is Algorithm 1's pass over
vector records read block by block (the non-private Oja of
:class:`~privpca.decomposition.oja.OjaPCA`).
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
from numpy.typing import ArrayLike, NDArray

from privpca.solvers.power import thin_qr

__all__ = [
    "OJA_LEARNING_RATE",
    "GradientSource",
    "LearningRate",
    "MatrixGradients",
    "VectorGradients",
    "block_oja_update",
    "check_steps",
    "oja_steps",
    "resolve_learning_rate",
]

_RENORMALISE_EVERY = 64


class GradientSource(Protocol):
    """Per-record gradients ``A_i W`` of the PCA objective, by random access to the records.

    Not a row stream: a record may be a symmetric matrix (:class:`MatrixGradients`), not a
    row, and the records are read by index in any order, any number of times. Tables read
    block by block are :class:`~privpca.streaming.RowSource`; the records an Oja-type pass
    reads from one, in order, are a
    :class:`~privpca.decomposition._records.RecordStream`.
    """

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


#: Oja's η_t = c1/(c2 + t) (Oja and Private Oja). c1 ≈ 1/(λ₁ − λ₂) for data whose eigengap
#: is of order 1 (Jain et al.'s α/((λ₁−λ₂)(ξ+t)) with α ≈ 1); c2 damps the first, nearly
#: random, steps.
OJA_LEARNING_RATE = LearningRate(c1=2.0, c2=100.0)


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


def oja_steps(
    blocks: Iterable[NDArray[np.float64]], n: int, W: NDArray[np.float64], lr: LearningRate
) -> tuple[NDArray[np.float64], int]:
    """Algorithm 1 with one record per step, one step per row of ``blocks`` (n rows in all,
    in order): ``(W, n)``.

    ``W ← (I + η x xᵀ) W`` is linear in W, so for k > 1 orthonormalising only every few steps
    gives the same column space as doing it every step (``QR`` is a right-multiplication by
    R⁻¹); it is done every 64 steps, or after any step that can more than double a column, to
    keep the numbers in range. For k = 1 the normalisation is one scalar and done every step.
    The schedule counts steps, not blocks, so any cut of the same rows into blocks gives the
    same iterate. ``W`` may be updated in place.
    """
    etas = lr(np.arange(1, n + 1, dtype=np.float64))
    k = W.shape[1]
    t = 0
    if k == 1:
        w = W[:, 0].copy()
        for Xc in blocks:
            eta_c = etas[t : t + Xc.shape[0]]
            for i in range(Xc.shape[0]):
                x = Xc[i]
                w += (eta_c[i] * float(x @ w)) * x
                w /= math.sqrt(float(w @ w))
            t += Xc.shape[0]
        check_steps(t, n)
        return w[:, None], n
    for Xc in blocks:
        eta_c = etas[t : t + Xc.shape[0]]
        for i in range(Xc.shape[0]):
            x = Xc[i]
            W += np.outer(x, eta_c[i] * (x @ W))
            if (t + i) % _RENORMALISE_EVERY == 0 or eta_c[i] * float(x @ x) > 1.0:
                W = thin_qr(W)
        t += Xc.shape[0]
    check_steps(t, n)
    return thin_qr(W), n


def check_steps(done: int, n: int) -> None:
    """Refuse a pass that read ``done`` records where ``n`` (public, fixed before the pass)
    were announced: a source whose passes disagree."""
    if done != n:
        raise ValueError(f"The stream gave {done} records; its n_samples is {n}. A chunk "
                         "source must give the same rows on every pass.")
