"""A DPS-PCA provider's rows in a streamed table: each of its statistics is one pass.

A :class:`~privpca.federated.protocol.provider.ProviderState` given a table that is not one
in-memory array (anything :func:`privpca.streaming.as_row_source` accepts: a ``numpy.memmap`` or
``.npy`` path, a Parquet file or folder, a list of chunks, a Dask array) never forms its rows.
Every statistic it releases is a sum over its rows, computed here as a block reduction of its
:class:`~privpca.streaming.RowSource` (on the Dask workers for a Dask array), exact; the
provider adds its noise to the total afterwards, once, with the same draws as from an in-memory
array. So a streamed provider and an in-memory one with the same noise seed release the same
values to rounding, and the provider's memory is one block (plus p×k and bins × p partial sums),
whatever its n.

* the private mean's rounds: the rows binned by ``‖x − c‖`` with each bin's sums
  (:func:`privpca.streaming.reductions.binned_norm_sums`): the norm histogram, then the exact
  clipped sum at the released bound;
* the bound ``Dᵢ``: counts of the centred (scaled) row norms on the log grid
  (:func:`privpca.streaming.reductions.norm_counts`);
* each power answer: ``Σ yᵢ(yᵢ[S]ᵀQ_S)`` over the prepared rows
  ``yᵢ = clip_Dᵢ((xᵢ − μ̂)/s)`` (one pass per round: T + 1 passes with the variances);
* the variances: ``(Σ (Q_Sᵀyᵢ[S])(…)ᵀ, Σ ‖yᵢ‖²)``.

The prepared rows are those of :meth:`ProviderState._prepare_rows
<privpca.federated.protocol.provider.ProviderState>` block by block: the same shift, division
and clip test (with its relative slack :data:`CLIP_SLACK`, so a row of norm ``Dᵢ`` up to
rounding is not counted as clipped by one path and kept by the other). The block functions
are module-level so that Dask can ship them to worker processes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

import numpy as np
from numpy.typing import NDArray

from privpca._validation import row_norms
from privpca.streaming import reductions
from privpca.streaming.reductions import BinCounts, BinnedSums
from privpca.streaming.sources import RowSource

__all__ = ["CLIP_SLACK", "StreamedRows"]

#: Relative slack of the clip test (rows of norm ≤ D·(1 + slack) are kept as they are).
CLIP_SLACK = 1e-12

Pair = tuple[NDArray[np.float64], float]


def _prepared_block(
    block: NDArray[np.float64], mean: NDArray[np.float64] | None,
    scale: NDArray[np.float64] | None, bound: float,
) -> tuple[NDArray[np.float64], int]:
    """``clip_bound((block − mean)/scale)`` and how many rows were clipped (never modifies
    ``block``)."""
    rows = block if mean is None else block - mean
    if scale is not None:
        rows = rows / scale
    norms = row_norms(rows)
    over = norms > bound * (1.0 + CLIP_SLACK)
    n_over = int(np.count_nonzero(over))
    if n_over:
        if rows is block:
            rows = rows.copy()
        rows[over] *= (bound / norms[over])[:, None]
    return rows, n_over


def _block_product(
    block: NDArray[np.float64], *, mean: NDArray[np.float64] | None,
    scale: NDArray[np.float64] | None, bound: float, support: NDArray[np.intp],
    Q_S: NDArray[np.float64],
) -> Pair:
    rows, n_over = _prepared_block(block, mean, scale, bound)
    return np.asarray(rows.T @ (rows[:, support] @ Q_S)), float(n_over)


def _block_moments(
    block: NDArray[np.float64], *, mean: NDArray[np.float64] | None,
    scale: NDArray[np.float64] | None, bound: float, support: NDArray[np.intp],
    Q_S: NDArray[np.float64],
) -> Pair:
    rows, _ = _prepared_block(block, mean, scale, bound)
    proj = rows[:, support] @ Q_S
    return np.asarray(proj.T @ proj), float(np.einsum("ij,ij->", rows, rows))


def _add_pairs(a: Pair, b: Pair) -> Pair:
    return a[0] + b[0], a[1] + b[1]


@dataclass
class StreamedRows:
    """A provider's table as a :class:`~privpca.streaming.RowSource`, and how it is prepared.

    Parameters
    ----------
    source : RowSource
        The provider's rows (read by passes; validated block by block as they are read).

    Attributes
    ----------
    mean, scale : ndarray of shape (n_features,) or None
        The centre and public scales of the prepared rows (set by :meth:`set_prepared`).
    bound : float or None
        ``Dᵢ``, the clipping bound of the prepared rows; None until prepared.
    """

    source: RowSource
    mean: NDArray[np.float64] | None = None
    scale: NDArray[np.float64] | None = None
    bound: float | None = None

    @property
    def n_samples(self) -> int:
        return int(self.source.n_samples)

    @property
    def n_features(self) -> int:
        return int(self.source.n_features)

    @property
    def prepared(self) -> bool:
        return self.bound is not None

    def set_prepared(self, mean: NDArray[np.float64] | None,
                     scale: NDArray[np.float64] | None, bound: float) -> None:
        """Fix the centre, scales and bound the statistic's passes prepare each block with."""
        self.mean, self.scale, self.bound = mean, scale, float(bound)

    # ------------------------------------------------------------------ preprocessing passes
    def binned_sums(self, centre: NDArray[np.float64] | None, base: float) -> BinnedSums:
        """The rows binned by ``‖x − centre‖`` on the log grid of ratio ``base``, with each
        bin's count and sums: the mean round's histogram and its clipped sums, one pass."""
        return reductions.binned_norm_sums(self.source, centre, base)

    def norm_counts(self, mean: NDArray[np.float64] | None,
                    scale: NDArray[np.float64] | None, base: float) -> BinCounts:
        """Counts of ``‖(x − mean)/scale‖`` on the log grid of ratio ``base`` (one pass)."""
        shift = mean if scale is None or mean is not None else np.zeros(self.n_features)
        return reductions.norm_counts(self.source, shift, base, scale=scale)

    # ------------------------------------------------------------------ statistic passes
    def _reduce(self, fn: Callable[..., Pair], support: NDArray[np.intp], Q_S: NDArray[np.float64],
                desc: str) -> Pair:
        if self.bound is None:
            raise RuntimeError("The streamed rows are not prepared yet.")
        block_fn = partial(fn, mean=self.mean, scale=self.scale,
                           bound=self.bound, support=np.asarray(support, dtype=np.intp),
                           Q_S=np.ascontiguousarray(Q_S, dtype=np.float64))
        return self.source.reduce(block_fn, _add_pairs, desc=desc)

    def product(self, support: NDArray[np.intp],
                Q_S: NDArray[np.float64]) -> tuple[NDArray[np.float64], int]:
        """``Σ yᵢ(yᵢ[S]ᵀQ_S)`` over the prepared rows (exact, d × k) and how many rows were
        clipped (stays with the provider)."""
        out, n_over = self._reduce(_block_product, support, Q_S, "XᵢᵀXᵢQ")
        return np.array(out, order="C"), int(n_over)

    def moments(self, support: NDArray[np.intp],
                Q_S: NDArray[np.float64]) -> tuple[NDArray[np.float64], float]:
        """``(Σ (Q_Sᵀyᵢ[S])(Q_Sᵀyᵢ[S])ᵀ, Σ ‖yᵢ‖²)`` over the prepared rows (exact)."""
        matrix, total = self._reduce(_block_moments, support, Q_S, "variances")
        return np.array(matrix, order="C"), float(total)
