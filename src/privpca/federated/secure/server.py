"""The untrusted server of secure aggregation: it relays, counts survivors and unmasks the sum.

:class:`SecAggServer` holds no provider's secret and never a provider's input: it receives
public keys, ciphertexts it cannot read, masked vectors, and at the end t shares of the
self-mask seed of each survivor and of the masking key of each dropout, from which it
removes the masks of the sum (never of one vector). If fewer than ``min_providers``
providers survive any stage it aborts
(:class:`~privpca.federated.secure.messages.SecureAggregationAborted`): it unmasks nothing
and returns no sum.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any, Concatenate, NoReturn, ParamSpec, TypeVar, cast

import numpy as np
from flwr.common.secure_aggregation.crypto.shamir import combine_shares
from flwr.supercore.primitives.asymmetric import public_key_to_bytes
from numpy.typing import NDArray

from privpca.federated.secure.masking import (
    add_mod,
    agreed_secret,
    mask_info,
    mask_stream,
    private_key_from_scalar,
    sub_mod,
)
from privpca.federated.secure.messages import (
    AdvertiseKeys,
    EncryptedShares,
    KeyRoster,
    MaskedInput,
    SecAggConfig,
    SecureAggregationAborted,
    ShareDelivery,
    UnmaskReply,
    UnmaskRequest,
)

__all__ = ["SecAggServer"]

_P = ParamSpec("_P")
_R = TypeVar("_R")


def _fails_closed(method: Callable[Concatenate[SecAggServer, _P], _R]
                  ) -> Callable[Concatenate[SecAggServer, _P], _R]:
    """A malformed message (``ValueError``) ends the run: nothing is unmasked after it."""

    @functools.wraps(method)
    def wrapper(self: SecAggServer, *args: _P.args, **kwargs: _P.kwargs) -> _R:
        try:
            return method(self, *args, **kwargs)
        except ValueError:
            self.aborted = True
            self._sum = None
            raise

    return wrapper


class SecAggServer:
    """The server's side of one secure aggregation.

    Parameters
    ----------
    config : SecAggConfig
        The agreement of the run.

    Attributes
    ----------
    stage : int
        The last stage whose messages were collected (0 before the first).
    dropped : dict of str to int
        Provider → the stage whose message it did not send.
    survivors : tuple of str
        The providers whose input is in the sum (those who sent a masked vector).

    Notes
    -----
    The calls, in order: :meth:`collect_keys`, :meth:`collect_shares`,
    :meth:`collect_masked`, :meth:`collect_unmask`. Each takes the messages that arrived at
    that stage (a provider whose message is missing dropped out) and returns what the server
    sends next. A message from a provider not expected at that stage, or malformed, raises
    ``ValueError`` and ends the run (nothing is unmasked after it), as an abort does.
    """

    def __init__(self, config: SecAggConfig) -> None:
        if not isinstance(config, SecAggConfig):
            raise TypeError(f"config must be a SecAggConfig; got {type(config).__name__}.")
        self.config = config
        self.stage = 0
        self.aborted = False
        self.dropped: dict[str, int] = {}
        self.survivors: tuple[str, ...] = ()
        self._keys: dict[str, AdvertiseKeys] = {}
        self._shared: tuple[str, ...] = ()
        self._sum: NDArray[np.uint64] | None = None

    # ------------------------------------------------------------------ helpers
    def _arrived(self, stage: int, messages: Sequence[Any], kind: type,
                 expected: Sequence[str]) -> dict[str, Any]:
        """The stage's messages by provider (in the agreed order), after the checks."""
        if self.aborted:
            raise RuntimeError("This secure aggregation was aborted; start a new one.")
        if self.stage != stage - 1:
            raise RuntimeError(f"Stage {stage} collected after stage {self.stage}; the stages "
                               "run once each, in order.")
        got: dict[str, Any] = {}
        for m in messages:
            if not isinstance(m, kind):
                raise ValueError(f"Stage {stage} expects {kind.__name__} messages; got "
                                 f"{type(m).__name__}.")
            sender: str = cast(Any, m).provider_id
            if sender not in expected or sender in got:
                raise ValueError(f"Stage {stage}: a message from {sender!r}, which is not "
                                 "expected at this stage or sent twice.")
            got[sender] = m
        for p in expected:
            if p not in got:
                self.dropped[p] = stage
        if len(got) < self.config.minimum:
            self._abort(stage, len(got))
        self.stage = stage
        return {p: got[p] for p in expected if p in got}

    def _abort(self, stage: int, survived: int) -> NoReturn:
        self.aborted = True
        self._sum = None
        raise SecureAggregationAborted(stage, survived, len(self.config.provider_ids),
                                       self.config.minimum)

    def _position(self, provider_id: str) -> int:
        return self.config.provider_ids.index(provider_id)

    # ------------------------------------------------------------------ stages
    @_fails_closed
    def collect_keys(self, adverts: Sequence[AdvertiseKeys]) -> KeyRoster:
        """Stage 1: the public keys that arrived, as the roster sent to every provider."""
        got = self._arrived(1, adverts, AdvertiseKeys, self.config.provider_ids)
        self._keys = got
        return KeyRoster(tuple(got.values()))

    @_fails_closed
    def collect_shares(self, messages: Sequence[EncryptedShares]) -> dict[str, ShareDelivery]:
        """Stage 2: relay each ciphertext to its recipient (providers that sent shares)."""
        got = self._arrived(2, messages, EncryptedShares, tuple(self._keys))
        for p, m in got.items():
            if set(m.ciphertexts) != set(self._keys) - {p} or \
                    not all(isinstance(c, bytes) for c in m.ciphertexts.values()):
                raise ValueError(f"Stage 2: {p!r} must send one ciphertext (bytes) to each "
                                 "other provider of the roster.")
        self._shared = tuple(got)
        return {r: ShareDelivery(r, {s: got[s].ciphertexts[r] for s in got if s != r})
                for r in got}

    @_fails_closed
    def collect_masked(self, messages: Sequence[MaskedInput]) -> UnmaskRequest:
        """Stage 3: add the masked vectors; announce the survivors and the dropouts."""
        got = self._arrived(3, messages, MaskedInput, self._shared)
        cfg = self.config
        total = np.zeros(cfg.length, dtype=np.uint64)
        for p, m in got.items():
            y = m.masked
            if not isinstance(y, np.ndarray) or y.dtype != np.uint64 or \
                    y.shape != (cfg.length,) or (cfg.bits < 64 and y.size and
                                                 int(y.max()) >> cfg.bits):
                raise ValueError(f"Stage 3: {p!r} must send a uint64 vector of shape "
                                 f"({cfg.length},) with words below 2^{cfg.bits}.")
            total = add_mod(total, y, cfg.bits)
        self._sum = total
        self.survivors = tuple(got)
        return UnmaskRequest(self.survivors,
                             tuple(p for p in self._shared if p not in got))

    @_fails_closed
    def collect_unmask(self, replies: Sequence[UnmaskReply]) -> NDArray[np.uint64]:
        """Stage 4: rebuild the secrets from t shares each and remove the masks of the sum.

        Returns
        -------
        ndarray of uint64 of shape (length,)
            ``Σ_{survivors} xᵢ mod 2^b``.
        """
        got = self._arrived(4, replies, UnmaskReply, self.survivors)
        cfg, survivors = self.config, self.survivors
        dropouts = tuple(p for p in self._shared if p not in survivors)
        for p, r in got.items():
            if set(r.self_mask_shares) != set(survivors) or set(r.key_shares) != set(dropouts):
                raise ValueError(f"Stage 4: {p!r} must send a self-mask share of each survivor "
                                 "and a key share of each dropout, nothing else.")
        holders = list(got.values())[: cfg.t]
        assert self._sum is not None
        total = self._sum
        for j in survivors:
            seed = self._combine(j, [r.self_mask_shares[j] for r in holders])
            total = sub_mod(total, mask_stream(
                seed, cfg.length, cfg.bits, info=mask_info(cfg.session, cfg.round, "self", j)),
                cfg.bits)
        for d in dropouts:
            key = private_key_from_scalar(self._combine(d, [r.key_shares[d] for r in holders]))
            if public_key_to_bytes(key.public_key()) != self._keys[d].s_public:
                raise ValueError(f"Stage 4: the masking key rebuilt for {d!r} does not match "
                                 "its advertised public key (a bad share).")
            for u in survivors:
                stream = mask_stream(agreed_secret(key, self._keys[u].s_public), cfg.length,
                                     cfg.bits, info=mask_info(cfg.session, cfg.round,
                                                              "pairwise", *sorted((u, d))))
                # yᵤ holds +PRG(s_ud) when d comes after u, −PRG(s_ud) otherwise.
                total = (sub_mod if self._position(d) > self._position(u) else add_mod)(
                    total, stream, cfg.bits)
        self._sum = None
        return total

    @staticmethod
    def _combine(owner: str, shares: list[bytes]) -> bytes:
        try:
            return combine_shares(shares)
        except (ValueError, IndexError) as exc:
            raise ValueError(f"Stage 4: the shares of {owner!r}'s secret do not combine "
                             "(a bad share).") from exc
