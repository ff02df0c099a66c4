"""DP-PCA's steps: Algorithm 3 over a source of records, with a calibrated plan.

:func:`_run` is the minibatch loop (Algorithm 4 on each step's first half-batch, Algorithm 5
on its second, then the Oja update); the rest are what it and the fit read around it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from privpca._validation import refuse_non_finite
from privpca.decomposition._records import RecordStream
from privpca.mechanisms.gradient_statistics import PrivateMean, PrivateTopEigenvalue
from privpca.solvers.oja import (
    GradientSource,
    LearningRate,
    MatrixGradients,
    VectorGradients,
    block_oja_update,
)


@dataclass(frozen=True)
class _Plan:
    """Resolved sizes and calibrated mechanisms of one DP-PCA run."""

    batch_size: int
    n_steps: int
    eigen: PrivateTopEigenvalue
    mean: PrivateMean
    epsilon_call: float
    delta_call: float
    resolvable: int  # the least batch whose Algorithm 4 is expected to release ("auto")


def _noise_level(history: dict[str, Any]) -> float:
    """``√(Σ_t σ_t²)/T``: per-entry std of the average of the steps' Gaussian noises."""
    sd = np.asarray(history["noise_scale"], dtype=np.float64)
    if sd.size == 0:
        return math.nan
    return float(math.sqrt(float(np.nansum(sd * sd))) / sd.size)


def _captured(
    source: GradientSource, index: NDArray[np.intp], W: NDArray[np.float64]
) -> NDArray[np.float64]:
    """``tr(Wᵀ A_i W)`` for each record in ``index`` (``‖Wᵀx_i‖²`` for vectors)."""
    if isinstance(source, RecordStream):
        return np.asarray(((source.records(index) @ W) ** 2).sum(axis=1))
    if isinstance(source, VectorGradients):
        return np.asarray(((source.X[index] @ W) ** 2).sum(axis=1))
    assert isinstance(source, MatrixGradients)
    AW = np.matmul(source.A[index], W)
    return np.einsum("pk,npk->n", W, AW)


def _run(
    source: Any,
    order: NDArray[np.intp] | None,
    W0: NDArray[np.float64],
    lr: LearningRate,
    plan: _Plan,
    rng: np.random.Generator,
    *,
    keep: bool,
    fallback: float | None = None,
) -> tuple[NDArray[np.float64], dict[str, Any]]:
    """Algorithm 3 over the records ``order`` (in that order).

    Each step's first half-batch feeds Algorithm 4 only, its second half Algorithm 5 only:
    every record's gradient is formed once, by one mechanism (the parallel composition of
    :mod:`privpca.decomposition.dp_pca` needs the halves disjoint, so they are never shared). On a
    :class:`RecordStream` the gradients are formed by compiled passes straight from the table:
    Algorithm 4's pairs subset by subset in cache, Algorithm 5's into one buffer reused by
    every step. A stream with ``verify`` has its rows checked for NaN/inf by those passes
    (and the rows no step reads by :meth:`RecordStream.batches`), each before its mechanism
    releases anything.
    """
    n_order = source.n_samples if order is None else len(order)
    B, T = plan.batch_size, min(plan.n_steps, n_order // plan.batch_size)
    half = B // 2
    W = W0.copy()
    p, k = W.shape
    hist: dict[str, Any] = {
        "eigenvalue": np.full(T, np.nan),
        "noise_scale": np.full(T, np.nan),
        "radius": np.full(T, np.nan),
        "centre_failures": np.zeros(T, dtype=np.int64),
        "eigen_released": np.zeros(T, dtype=bool),
        "eigenvalue_failed": np.zeros(T, dtype=bool),
    }
    if keep:
        hist["components"] = np.empty((T, k, p))
    # (table, rows) per step: rows of an in-memory table, or a minibatch read from a stream
    batches = source.batches(order, B, T) if isinstance(source, RecordStream) else None
    if batches is not None:
        gradient_buffer = np.empty((B - half, p * k))
    last: float | None = fallback
    for t in range(1, T + 1):
        if batches is not None:
            table, batch = next(batches)
            eigenvalue = plan.eigen.estimate_rows(table, batch[:half], source.centre,
                                                  np.ascontiguousarray(W), rng)
        else:
            assert order is not None
            batch = order[(t - 1) * B : t * B]
            eigenvalue = plan.eigen.estimate(source.gradients(batch[:half], W), rng)
        hist["eigen_released"][t - 1] = eigenvalue is not None
        hist["eigenvalue_failed"][t - 1] = eigenvalue is None
        if eigenvalue is None:
            # No bin cleared the threshold: reuse the last released estimate (public, so
            # free), or before the first release the fallback; without one, the step makes
            # no update.
            eigenvalue = last
        last = eigenvalue
        if eigenvalue is not None:
            if batches is not None:
                release = plan.mean.estimate_rows(
                    table, batch[half:], source.centre, W, eigenvalue, rng,
                    out=gradient_buffer)
            else:
                release = plan.mean.estimate(source.gradients(batch[half:], W), eigenvalue,
                                             rng)
            W = block_oja_update(W, lr(t) * release.mean.reshape(p, k))
            hist["eigenvalue"][t - 1] = eigenvalue
            hist["noise_scale"][t - 1] = release.noise_scale
            hist["radius"][t - 1] = release.radius
            hist["centre_failures"][t - 1] = release.n_centre_failures
        elif batches is not None and source.verify:
            refuse_non_finite(table[batch[half:]], "X")  # rows no pass read this step
        if keep:
            hist["components"][t - 1] = W.T
    return W, hist


def _fallback_eigenvalue(plan: _Plan, q: int, bound: float) -> float | None:
    """Λ whose Algorithm 5 box has half-width ``D²``, the largest coordinate of a gradient
    ``y(yᵀw)`` with ``‖y‖ ≤ D`` (``√2·D`` for pair differences; None without a finite,
    positive D)."""
    if not 0.0 < bound < math.inf:
        return None
    b, mean = plan.batch_size - plan.batch_size // 2, plan.mean
    return float((bound**2 / (mean.radius * math.log(b * q / mean.zeta) + mean.bin_width))**2)
