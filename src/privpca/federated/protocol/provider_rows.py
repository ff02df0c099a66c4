"""A provider's rows prepared (centred, scaled, clipped) and summed, in memory or streamed.

A provider given a streamed table (anything :func:`privpca.streaming.as_row_source` accepts)
never forms its rows: each statistic it releases is a sum over its rows, computed as one
block reduction of its :class:`~privpca.streaming.RowSource`
(:mod:`privpca.streaming.reductions`, on the Dask workers for a Dask array), exact; the
provider adds its noise to the total afterwards, once, with the same draws as from an
in-memory array. Its memory is one block (plus p×k and bins × p partial sums), whatever its n.

* the private mean's rounds: the rows binned by ``‖x − c‖`` with each bin's sums
  (:func:`~privpca.streaming.reductions.binned_norm_sums`): the norm histogram, then the
  exact clipped sum at the released bound (:func:`streamed_mean`);
* the bound ``Dᵢ``: counts of the centred (scaled) row norms on the log grid
  (:func:`streamed_norm_counts`);
* each power answer: ``Σ yᵢ(yᵢ[S]ᵀQ_S)`` over the prepared rows ``yᵢ = clip_Dᵢ((xᵢ − μ̂)/s)``
  (:func:`~privpca.streaming.reductions.clipped_product` on Q's support; one pass per round);
* the variances: ``(Σ (Q_Sᵀyᵢ[S])(…)ᵀ, Σ ‖yᵢ‖²)``
  (:func:`~privpca.streaming.reductions.projected_moments` on the support).

The passes (:func:`streamed_pass`) prepare each block as the in-memory rows are prepared
(:func:`centred`, :func:`clip_rows`): the same shift, division, norms (``exact_norms``) and
clip test, with its relative slack :data:`CLIP_SLACK` (``slack``), so the streamed answers
are the in-memory ones to rounding.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import numpy as np
from numpy.typing import ArrayLike, NDArray

from privpca._validation import row_norms
from privpca.pipeline.preprocessing import (
    BoundNotFoundError,
    private_mean,
    private_mean_from_sum,
    private_norm_bound,
    private_norm_bound_from_counts,
)
from privpca.pipeline.settings import DEFAULT_NORM_QUANTILE
from privpca.streaming import reductions
from privpca.streaming.reductions import BinCounts
from privpca.streaming.sources import RowSource

_T = TypeVar("_T")

#: Relative slack of the provider's clip test: rows of norm ≤ D·(1 + slack) are kept as they
#: are, so a row of norm D up to rounding is clipped by neither the in-memory nor the streamed
#: path (both test with it).
CLIP_SLACK = 1e-12

#: A streamed table's preparation: its centre, public scales and bound Dᵢ.
StreamPreparation = tuple[NDArray[np.float64] | None, NDArray[np.float64] | None, float]


def public_scale(scale: Any) -> NDArray[np.float64] | None:
    """The public per-feature scales (None for ``scale=False``)."""
    if isinstance(scale, bool | np.bool_) and not scale:
        return None
    return np.asarray(scale, dtype=np.float64)


def centred(X: NDArray[np.float64], mean: NDArray[np.float64] | None,
            scale: Any) -> NDArray[np.float64]:
    """``(X − mean)/scale`` (``X`` itself when there is neither)."""
    rows = X if mean is None else X - mean
    scales = public_scale(scale)
    if scales is not None:
        rows = rows / scales
    return rows


def clip_rows(rows: NDArray[np.float64], data_norm: float, *,
              copy: bool) -> tuple[NDArray[np.float64], int]:
    """``rows`` clipped to ``data_norm`` (in place unless ``copy``) and how many were clipped."""
    norms = row_norms(rows)
    over = norms > data_norm * (1.0 + CLIP_SLACK)
    n_clipped = int(over.sum())
    if n_clipped:
        rows = rows.copy() if copy else rows
        rows[over] *= (data_norm / norms[over])[:, None]
    return rows, n_clipped


def streamed_norm_counts(stream: RowSource, n_features: int,
                         mean: NDArray[np.float64] | None,
                         scale: NDArray[np.float64] | None, base: float) -> BinCounts:
    """Counts of a streamed table's ``‖(x − mean)/scale‖`` on the log grid (one pass)."""
    shift = mean if scale is None or mean is not None else np.zeros(n_features)
    return reductions.norm_counts(stream, shift, base, scale=scale)


def streamed_pass(stream: RowSource, prepared: StreamPreparation,
                  reduction: Callable[..., _T], basis: NDArray[np.float64],
                  support: ArrayLike) -> _T:
    """One statistic pass over a streamed table (``reduction``:
    :func:`~privpca.streaming.reductions.clipped_product` or
    :func:`~privpca.streaming.reductions.projected_moments`) on Q's support, each block
    prepared as the in-memory rows are (exact norms, :data:`CLIP_SLACK`)."""
    return reduction(stream, *prepared, basis, support=np.asarray(support, dtype=np.intp),
                     slack=CLIP_SLACK, exact_norms=True)


def memory_mean(X: NDArray[np.float64], sq: NDArray[np.float64], centre: NDArray[np.float64],
                bound_multiplier: float, sum_multiplier: float, rng: np.random.Generator,
                provider_id: str) -> tuple[float, NDArray[np.float64]]:
    """One mean round on in-memory rows ``X`` (``sq``: their squared norms): the private
    bound ``Rᵢ`` on ``‖x − c‖``, then the noisy clipped mean at ``Rᵢ``."""
    if np.any(centre):
        sq = np.maximum(sq - 2.0 * (X @ centre) + float(centre @ centre), 0.0)
    norms = np.sqrt(sq)
    try:
        (R,), _ = private_norm_bound(norms, bound_multiplier, DEFAULT_NORM_QUANTILE, rng,
                                     what=f"provider {provider_id}'s distances to the centre")
    except BoundNotFoundError as exc:
        raise BoundNotFoundError(f"provider {provider_id}: {exc}") from exc
    m = private_mean(X, norms, R, sum_multiplier, rng, centre=centre if np.any(centre) else None)
    return float(R), m.mean


def streamed_mean(stream: RowSource, n_samples: int, centre: NDArray[np.float64],
                  bound_multiplier: float, sum_multiplier: float, rng: np.random.Generator,
                  provider_id: str, *, scale: NDArray[np.float64] | None = None
                  ) -> tuple[float, NDArray[np.float64]]:
    """One mean round on a streamed table: one pass bins the rows by ``‖x − c‖`` with
    their sums (the histogram of ``Rᵢ``, then the exact clipped sum at ``Rᵢ``); the same
    mechanisms and draws as the in-memory round. With ``scale``, of the rows ``x/scale``
    (``centre`` and the mean returned in those units)."""
    c = centre if np.any(centre) else None
    seen: dict[str, Any] = {}

    def counter(base: float) -> tuple[Any, Any]:
        seen["base"] = base
        seen["sums"] = sums = reductions.binned_norm_sums(stream, c, base, scale=scale)
        return sums.index, sums.counts

    try:
        (R,), _ = private_norm_bound_from_counts(
            counter, n_samples, bound_multiplier, DEFAULT_NORM_QUANTILE, rng,
            what=f"provider {provider_id}'s distances to the centre")
    except BoundNotFoundError as exc:
        raise BoundNotFoundError(f"provider {provider_id}: {exc}") from exc
    m = private_mean_from_sum(seen["sums"].clipped_sum(R, seen["base"]), n_samples,
                              R, sum_multiplier, rng)
    return float(R), m.mean


def pilot_readings(pilot: tuple[NDArray[np.float64], float] | None,
                   support: NDArray[np.intp], block: NDArray[np.float64],
                   ) -> NDArray[np.float64] | None:
    """The basis ``Q`` (``block`` on ``support``) read off a provider's pilot at the robust
    maximum (``pilot``: the released matrix and its noise std, where its bound ladder chose
    below the top): packed ``QᵀĜQ``, ``tr Ĝ`` and that std (post-processing of a release).
    They are the variances of rows clipped above (almost) every norm, with a fraction of the
    ``variance`` part's noise (centrally:
    :func:`~privpca.pipeline.basis_error.spectrum_off_high_pilot`). None without one."""
    if pilot is None:
        return None
    M, sigma = pilot
    V = np.zeros((block.shape[1], M.shape[0]))
    V[:, support] = block.T
    return np.concatenate([(V @ M @ V.T)[np.triu_indices(block.shape[1])],
                           [np.trace(M), sigma]])


def pilot_to_state(pilot: tuple[NDArray[np.float64], float] | None) -> Any:
    """A provider's pilot at the robust maximum as its state file's JSON: ``(upper triangle,
    σ)`` (a released value; None stays None)."""
    if pilot is None:
        return None
    return pilot[0][np.triu_indices(pilot[0].shape[0])].tolist(), float(pilot[1])


def pilot_from_state(stored: Any, n_features: int) -> tuple[NDArray[np.float64], float] | None:
    """:func:`pilot_to_state`'s inverse: the symmetric matrix and σ."""
    if stored is None:
        return None
    M = np.zeros((n_features, n_features))
    M[np.triu_indices(n_features)] = stored[0]
    return M + np.triu(M, 1).T, float(stored[1])
