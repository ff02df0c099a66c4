"""A provider's checks: the settings it agrees to, and the server's messages against them.

Every check runs before anything is booked or released: a setting the provider could not
honour raises ValueError, a message out of order or other than what it agreed to raises
:class:`~privpca.federated.protocol.messages.QueryRefusedError`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

import numpy as np
from numpy.typing import NDArray

from privpca._validation import check_epsilon, check_in_range, check_norm_bound, check_party_delta
from privpca.federated.protocol.agreement import MEAN_ROUNDS
from privpca.federated.protocol.counter import ReleaseCounter, _refusal
from privpca.federated.protocol.messages import (
    MeanQuery,
    PrepareMessage,
    QueryRefusedError,
    validate_vector,
)


class ProviderSettings(NamedTuple):
    """A provider's validated agreement (:func:`check_settings`)."""

    n_components: int
    epsilon: float
    delta: float
    n_rounds: int
    data_norm: float | str
    noise_seed: int | None


def check_settings(provider_id: str, n_features: int, *, n_components: int, epsilon: float,
                   delta: float, n_rounds: int, data_norm: float | str, noise_seed: int | None,
                   scale: Any, budget_shares: Any) -> ProviderSettings:
    """The provider's agreement, validated as the estimators validate theirs.

    A provider refuses to open a budget it could not honour (ε = ∞ would release
    ``XᵢᵀXᵢQ/nᵢ`` exactly).
    """
    who = f"provider {provider_id}"
    k = int(check_in_range(n_components, "n_components", low=1, high=n_features,
                           low_closed=True, high_closed=True, integer=True, owner=who))
    epsilon = check_epsilon(epsilon, owner=who)
    delta = check_party_delta(delta, owner=who)  # every release is Gaussian: δ > 0
    T = int(check_in_range(n_rounds, "n_rounds", low=1, low_closed=True, integer=True,
                           owner=who))
    if not (isinstance(data_norm, str) and data_norm == "auto"):
        if isinstance(data_norm, str):
            raise ValueError(f"The 'data_norm' parameter of {who} must be 'auto' or a float "
                             f"in the range [1e-60, 1e+60]. Got {data_norm!r} instead.")
        data_norm = check_norm_bound(data_norm, owner=who)
    if noise_seed is not None and (isinstance(noise_seed, bool)
                                   or not isinstance(noise_seed, int | np.integer)
                                   or noise_seed < 0):
        raise ValueError(f"The 'noise_seed' parameter of {who} must be None or an int >= 0. "
                         f"Got {noise_seed!r} instead.")
    if isinstance(scale, bool | np.bool_) and scale:
        raise ValueError(
            "Private scaling (scale=True) is not offered in the distributed model: pass "
            "public per-feature scales as an array, or scale=False."
        )
    if budget_shares is not None and not isinstance(budget_shares, Mapping):
        raise ValueError(f"The 'budget_shares' parameter of {who} must be a dict of part -> "
                         f"share or None. Got {budget_shares!r} instead.")
    return ProviderSettings(k, epsilon, delta, T, data_norm,
                            None if noise_seed is None else int(noise_seed))


def check_counter(provider_id: str, counter: ReleaseCounter | None,
                  limits: dict[str, int]) -> ReleaseCounter:
    """``counter`` (a new in-memory one for ``None``), refused unless its limits are ``limits``."""
    if counter is None:
        return ReleaseCounter(limits)
    if counter.limits != limits:
        raise ValueError(
            f"provider {provider_id}: the counter's limits {counter.limits} are not "
            f"this provider's agreement {limits}."
        )
    return counter


def check_mean_query(query: Any, *, provider_id: str, centering: Any, n_features: int,
                     counter: ReleaseCounter, prepared: bool) -> NDArray[np.float64]:
    """The centre of a mean query the provider may answer now (the next of its rounds)."""
    if not isinstance(query, MeanQuery):
        raise QueryRefusedError(f"Expected a MeanQuery; got {type(query).__name__}.")
    if not (isinstance(centering, str) and centering == "private"):
        raise QueryRefusedError(
            f"provider {provider_id} did not agree to a private mean (centering is "
            "not 'private')."
        )
    centre = validate_vector(query.centre, n_features, "centre of the mean query")
    done = counter.used_by("mean")
    if (isinstance(query.round, bool | np.bool_)
            or not isinstance(query.round, int | np.integer)
            or int(query.round) != done + 1):
        if done >= MEAN_ROUNDS:
            raise _refusal(MEAN_ROUNDS, done, "mean")
        raise QueryRefusedError(
            f"Mean round {query.round!r} out of order: provider {provider_id} has "
            f"made {done} of the {MEAN_ROUNDS} mean rounds, so the next is {done + 1}."
        )
    if prepared:
        raise QueryRefusedError("The rows are already prepared: no more mean rounds.")
    return centre


def check_prepare_message(message: Any, *, provider_id: str, centering: Any, n_features: int,
                          counter: ReleaseCounter, prepared: bool) -> NDArray[np.float64] | None:
    """The mean of a prepare message the provider may act on now (None: no centring)."""
    if not isinstance(message, PrepareMessage):
        raise QueryRefusedError(f"Expected a PrepareMessage; got {type(message).__name__}.")
    if prepared:
        raise QueryRefusedError(f"provider {provider_id} is prepared already.")
    if centering is None:
        if message.mean is not None:
            raise QueryRefusedError(
                f"provider {provider_id} agreed to no centring; the server sent a mean."
            )
        return None
    if message.mean is None:
        raise QueryRefusedError(
            f"provider {provider_id} agreed to centring; the server sent no mean."
        )
    mean = validate_vector(message.mean, n_features, "mean")
    if isinstance(centering, str):
        done = counter.used_by("mean")
        if done < MEAN_ROUNDS:
            raise QueryRefusedError(
                f"provider {provider_id} has made {done} of the {MEAN_ROUNDS} "
                "rounds of the private mean; the mean cannot be final yet."
            )
    elif not np.array_equal(mean, centering):
        raise QueryRefusedError(
            f"provider {provider_id} agreed to another public mean than the one "
            "the server sent."
        )
    return mean


def check_secure(provider_id: str, secure: Any, centering: Any, data_norm: Any,
                 streamed: bool) -> Any:
    """A secure agreement's settings this version can honour (:mod:`.secure_sums`)."""
    if secure is None:
        return None
    if streamed and (isinstance(data_norm, str) or isinstance(centering, str)):
        raise ValueError(
            f"provider {provider_id}: aggregation='secure' with a streamed table needs a "
            "public data_norm (a number) and centering=None or a public mean: the shared "
            "counts of the private bound and mean are not written for streamed tables yet. "
            "Use aggregation='local-noise', or load the table in memory.")
    return secure
