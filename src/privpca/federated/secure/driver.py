"""One secure aggregation run in process, with simulated dropouts and the server's transcript.

:func:`run_secure_aggregation` moves the messages of :mod:`.messages` between one
:class:`~privpca.federated.secure.provider.SecAggProvider` per input and a
:class:`~privpca.federated.secure.server.SecAggServer`, as an engine would, and records
everything the server received (:class:`Transcript`) so that tests can inspect it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Container, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from privpca.federated.secure.messages import (
    AdvertiseKeys,
    EncryptedShares,
    MaskedInput,
    SecAggConfig,
    UnmaskReply,
    message_nbytes,
)
from privpca.federated.secure.provider import SecAggProvider, check_input
from privpca.federated.secure.server import SecAggServer

__all__ = ["SecureAggregationResult", "Transcript", "run_secure_aggregation"]


@dataclass
class Transcript:
    """Every message the server received, by stage (1 to 4)."""

    keys: list[AdvertiseKeys] = field(default_factory=list)
    shares: list[EncryptedShares] = field(default_factory=list)
    masked: list[MaskedInput] = field(default_factory=list)
    unmask: list[UnmaskReply] = field(default_factory=list)

    def messages(self) -> list[Any]:
        """All of them, stage by stage."""
        return [*self.keys, *self.shares, *self.masked, *self.unmask]

    def bytes_sent(self) -> dict[str, int]:
        """Provider → payload bytes it sent (:func:`~.messages.message_nbytes`)."""
        sent: dict[str, int] = {}
        for m in self.messages():
            sent[m.provider_id] = sent.get(m.provider_id, 0) + message_nbytes(m)
        return sent


@dataclass(frozen=True)
class SecureAggregationResult:
    """The outcome of :func:`run_secure_aggregation`.

    Attributes
    ----------
    total : ndarray of uint64 of shape (length,)
        ``Σ_{survivors} xᵢ mod 2^b``.
    survivors : tuple of str
        The providers whose inputs are in ``total``.
    dropped : dict of str to int
        Provider → the stage whose message it did not send.
    transcript : Transcript
        What the server received.
    config : SecAggConfig
        The resolved agreement (threshold, min_providers).
    provider_seconds : dict of str to float
        Each provider's compute time over the four stages.
    server_seconds : float
        The server's compute time.
    """

    total: NDArray[np.uint64]
    survivors: tuple[str, ...]
    dropped: dict[str, int]
    transcript: Transcript
    config: SecAggConfig
    provider_seconds: dict[str, float]
    server_seconds: float


def run_secure_aggregation(
    inputs: Mapping[str, NDArray[np.uint64]],
    bits: int,
    *,
    min_providers: int | None = None,
    threshold: int | None = None,
    allow_low_threshold: bool = False,
    session: str = "privpca",
    round: int = 0,
    dropouts: Mapping[int, Iterable[str]] | None = None,
) -> SecureAggregationResult:
    """Sum the providers' inputs modulo ``2^bits`` under SecAgg, in process.

    Parameters
    ----------
    inputs : mapping of str to ndarray of uint64 of shape (length,)
        Provider id → its input, residues modulo ``2^bits``; the mapping's order is the
        agreed order of the providers.
    bits : int
        b in ``[1, 64]``.
    min_providers, threshold, allow_low_threshold, session, round
        See :class:`~privpca.federated.secure.messages.SecAggConfig`.
    dropouts : mapping of int to iterable of str, optional
        Stage (1 to 4) → providers that drop before sending that stage's message (and send
        nothing after it).

    Returns
    -------
    SecureAggregationResult

    Raises
    ------
    SecureAggregationAborted
        Fewer than ``min_providers`` providers survived a stage; nothing was unmasked.
    ValueError
        Invalid settings (b, ids, threshold, min_providers), inputs of different lengths or
        not residues modulo ``2^bits``.

    Examples
    --------
    >>> import numpy as np
    >>> from privpca.federated.secure import run_secure_aggregation
    >>> xs = {p: np.full(3, v, dtype=np.uint64) for p, v in zip("abc", (1, 2, 2**20 - 1))}
    >>> run_secure_aggregation(xs, 20).total
    array([2, 2, 2], dtype=uint64)
    """
    ids = tuple(inputs)
    lengths = {p: int(np.shape(x)[0]) if np.ndim(x) == 1 else -1 for p, x in inputs.items()}
    if len(set(lengths.values())) != 1 or -1 in lengths.values():
        raise ValueError(f"Every secure-aggregation input must be a vector of the same length; "
                         f"got lengths {lengths} (-1: not a vector).")
    config = SecAggConfig(ids, bits, next(iter(lengths.values())), min_providers=min_providers,
                          threshold=threshold, allow_low_threshold=allow_low_threshold,
                          session=session, round=round)
    xs = {p: check_input(x, config) for p, x in inputs.items()}
    stop = {stage: set(dropouts.get(stage, ())) if dropouts else set() for stage in (1, 2, 3, 4)}
    unknown = set().union(*stop.values()) - set(ids)
    if unknown:
        raise ValueError(f"dropouts name providers that are not inputs: {sorted(unknown)}.")
    server, transcript = SecAggServer(config), Transcript()
    providers = {p: SecAggProvider(p, config) for p in ids}
    seconds = dict.fromkeys(ids, 0.0)
    server_seconds = 0.0
    alive = set(ids)

    def ask(stage: int, eligible: Container[str], step: Callable[[str], Any]) -> list[Any]:
        alive.difference_update(stop[stage])
        sent = []
        for p in ids:
            if p in alive and p in eligible:
                start = time.perf_counter()
                sent.append(step(p))
                seconds[p] += time.perf_counter() - start
        return sent

    def serve(method: Callable[[list[Any]], Any], messages: list[Any]) -> Any:
        nonlocal server_seconds
        start = time.perf_counter()
        try:
            return method(messages)
        finally:
            server_seconds += time.perf_counter() - start

    transcript.keys = ask(1, ids, lambda p: providers[p].advertise())
    roster = serve(server.collect_keys, transcript.keys)
    in_roster = {a.provider_id for a in roster.keys}
    transcript.shares = ask(2, in_roster, lambda p: providers[p].share_keys(roster))
    deliveries = serve(server.collect_shares, transcript.shares)
    transcript.masked = ask(3, deliveries, lambda p: providers[p].mask(deliveries[p], xs[p]))
    request = serve(server.collect_masked, transcript.masked)
    transcript.unmask = ask(4, request.survivors, lambda p: providers[p].unmask(request))
    total = serve(server.collect_unmask, transcript.unmask)
    return SecureAggregationResult(total, server.survivors, dict(server.dropped), transcript,
                                   config, seconds, server_seconds)
