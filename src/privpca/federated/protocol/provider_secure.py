"""A provider's answers that exist only in a secure run: shares of counts and clipped sums.

In the local-noise protocol a provider searches its own quantiles (the mean rounds' bounds,
its bound Dᵢ) and releases them. In a secure run the server searches the union's quantiles
(:func:`~privpca.federated.protocol.secure_sums.secure_preparation`): each provider shares
its exact count below the edge the server asks for (Δ = 1 per count, replace one record),
and, for a mean round, its exact ``Σ clip_R(x − c)`` (Δ = 2R), with its noise share of the
central calibration of the same budget part (the plan over ``Σ nᵢ``). Each answer is booked
on the provider's counter before it is computed: at most one count per bisection round of
each agreed search, and the two mean rounds.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
from numpy.typing import NDArray

from privpca.federated.protocol.agreement import MEAN_PARTS
from privpca.federated.protocol.messages import (
    CountQuery,
    PrepareMessage,
    QueryRefusedError,
    SumQuery,
    validate_vector,
)
from privpca.federated.protocol.secure_sums import ShareReply
from privpca.mechanisms.histogram import geometric_bin
from privpca.mechanisms.quantile import _EDGE, GRID_BASE, PrivateQuantile
from privpca.pipeline.settings import DEFAULT_NORM_QUANTILE

__all__ = ["opened_bound", "secure_answer"]


def secure_answer(provider: Any, message: CountQuery | SumQuery,
                  provider_noise_rng: Callable[..., np.random.Generator]) -> ShareReply:
    """Book and answer a count or sum query of a secure run (refusals release nothing);
    ``provider_noise_rng`` gives the provider's noise stream of each release."""
    pid = provider.provider_id
    if provider.secure is None or not provider.table_mode:
        raise QueryRefusedError(f"provider {pid} agreed to no secure preparation: it shares "
                                "no counts and no sums.")
    if provider.X is None:
        raise QueryRefusedError(f"provider {pid}: a streamed table shares no counts yet.")
    if isinstance(message, CountQuery):
        return _count(provider, message, provider_noise_rng)
    return _sum(provider, message, provider_noise_rng)


def _centre(provider: Any, centre: Any) -> NDArray[np.float64] | None:
    return None if centre is None else validate_vector(centre, provider.n_features, "centre")


def _count(provider: Any, query: CountQuery, noise_rng: Any) -> ShareReply:
    searches = ([b for b, _ in MEAN_PARTS] if isinstance(provider.centering, str) else []) + (
        ["bound"] if isinstance(provider.data_norm, str) else [])
    if query.part not in searches:
        raise QueryRefusedError(f"provider {provider.provider_id} agreed to no search of "
                                f"{query.part!r}.")
    if not isinstance(query.edge, int | np.integer) or not -_EDGE < int(query.edge) <= _EDGE:
        raise QueryRefusedError("A count query's edge must be an integer of the public grid.")
    centre = _centre(provider, query.centre)
    if query.part == "bound":  # the prepared rows' norms: centred and scaled
        rows = provider._centred(centre)
    else:  # a mean round's distances to its centre, in the public scales' units
        units = 1.0 if provider._units is None else provider._units
        rows = provider._mean_rows if centre is None else provider._mean_rows - centre / units
    index = provider.counter.reserve("count")
    norms = np.sqrt(np.einsum("ij,ij->i", rows, rows))
    count = float(np.count_nonzero(geometric_bin(norms, base=GRID_BASE) < int(query.edge)))
    search = PrivateQuantile.calibrate(provider._plan[query.part].multiplier,
                                       quantiles=DEFAULT_NORM_QUANTILE,
                                       n_records=provider.secure.total_rows)
    plan = provider.secure.noise_plan(search.noise, search.sensitivity, 1, 1.0)
    rng = noise_rng(provider.noise_seed, index, "count")
    return ShareReply(provider.provider_id, "count", index, provider.n_samples,
                      plan.share(np.array([count]), rng), plan)


def _sum(provider: Any, query: SumQuery, noise_rng: Any) -> ShareReply:
    pid = provider.provider_id
    if not isinstance(provider.centering, str):
        raise QueryRefusedError(f"provider {pid} agreed to no private mean.")
    index = provider.counter.used_by("mean")
    if query.round != index + 1:
        raise QueryRefusedError(f"provider {pid} expects mean round {index + 1}; the server "
                                f"asked for round {query.round}.")
    R = float(query.bound)
    if not (R > 0.0 and math.isfinite(R)):
        raise QueryRefusedError("A sum query's bound must be positive and finite.")
    centre = validate_vector(query.centre, provider.n_features, "centre")
    index = provider.counter.reserve("mean")
    X = provider._mean_rows  # x/s: the server multiplies the opened sum by s
    if provider._units is not None:
        centre = centre / provider._units
    sq = provider._sq - 2.0 * (X @ centre) + float(centre @ centre)
    norms = np.sqrt(np.maximum(sq, 0.0))
    with np.errstate(divide="ignore"):
        weights = np.minimum(1.0, R / norms)
    total = X.T @ weights - centre * weights.sum()  # Σ clip_R(x − c) in one pass
    bound_part, sum_part = MEAN_PARTS[index]
    provider.counter.remember(bound_part, R)
    sensitivity = 2.0 * R
    plan = provider.secure.noise_plan(provider._plan[sum_part].multiplier * sensitivity,
                                      sensitivity, provider.n_features, R)
    rng = noise_rng(provider.noise_seed, index, "mean")
    return ShareReply(pid, "mean", index + 1, provider.n_samples, plan.share(total, rng), plan)


def opened_bound(provider_id: str, message: PrepareMessage) -> float:
    """The bound D a secure run's server opened and sends in its prepare message."""
    D = message.data_norm
    if D is None or not (float(D) > 0.0 and math.isfinite(float(D))):
        raise QueryRefusedError(f"provider {provider_id} agreed to a bound opened by secure "
                                "aggregation; the prepare message carries none.")
    return float(D)
