"""Secure aggregation's agreement, its messages and its two errors.

:class:`SecAggConfig` is what every party agrees on before the run (the providers, b, d, the
Shamir threshold t and the fewest survivors ``min_providers``). The messages are plain
dataclasses of str, int, bytes and uint64 arrays, so an engine can move them:

=====  =========================================  ===========================================
stage  provider → server                          server → provider
=====  =========================================  ===========================================
1      :class:`AdvertiseKeys` (two public keys)   :class:`KeyRoster` (everyone's keys)
2      :class:`EncryptedShares` (to each peer)    :class:`ShareDelivery` (addressed to it)
3      :class:`MaskedInput` (``yᵢ``)              :class:`UnmaskRequest` (survivors, dropouts)
4      :class:`UnmaskReply` (the shares asked)    — (the server removes the masks)
=====  =========================================  ===========================================
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field, fields
from typing import Any

import numpy as np
from numpy.typing import NDArray

from privpca.exceptions import ProviderDropoutError, QueryRefusedError
from privpca.federated.secure.masking import DOMAIN, check_bits

__all__ = [
    "AdvertiseKeys",
    "EncryptedShares",
    "KeyRoster",
    "MaskedInput",
    "SecAggConfig",
    "SecureAggregationAborted",
    "SecureAggregationRefused",
    "ShareDelivery",
    "UnmaskReply",
    "UnmaskRequest",
    "message_nbytes",
]

#: The stages' names, for the errors' messages.
STAGES = {1: "advertise keys", 2: "share keys", 3: "masked inputs", 4: "unmasking"}


class SecureAggregationAborted(ProviderDropoutError):
    """Too few providers survived a stage: nothing was unmasked and no sum is released.

    Attributes
    ----------
    stage : int
        The stage (1 to 4) after which too few providers were left.
    survived : int
        How many providers sent that stage's message.
    agreed : int
        How many providers the run was agreed with.
    min_providers : int
        The fewest survivors the agreement allows.
    """

    def __init__(self, stage: int, survived: int, agreed: int, min_providers: int) -> None:
        self.stage, self.survived, self.agreed = stage, survived, agreed
        self.min_providers = min_providers
        super().__init__(
            f"Secure aggregation aborted at stage {stage} ({STAGES[stage]}): {survived} of the "
            f"{agreed} agreed providers survived, fewer than min_providers={min_providers}. "
            "Nothing was unmasked and no sum is released."
        )


class SecureAggregationRefused(QueryRefusedError):
    """A provider refused a secure-aggregation message (malformed, out of order or unsafe)."""


@dataclass(frozen=True)
class SecAggConfig:
    """What the providers and the server agree on before one secure aggregation.

    Parameters
    ----------
    provider_ids : tuple of str
        The providers, unique, non-empty (at least 2). Their order fixes the signs of the
        pairwise masks and the Shamir indices.
    bits : int
        b in ``[1, 64]``: the inputs and the sum are residues modulo ``2^b``.
    length : int
        d ≥ 1, the length of every input vector.
    min_providers : int or None, default=None
        The fewest providers that may survive any stage; fewer and the server aborts. At
        least 2 (a "sum" of one provider is its vector) and at least ``threshold``. None:
        ``threshold`` when given, else ``⌊N/2⌋ + 1``.
    threshold : int or None, default=None
        t, the shares needed to rebuild a secret. None: ``min_providers``.
    allow_low_threshold : bool, default=False
        Accept ``t ≤ N/2``. Refused otherwise: a provider answers the unmasking request once,
        for each peer either its self-mask share or its key share, so a server that tells two
        disjoint groups of providers different stories (to one that j survived, to the other
        that j dropped) gathers both secrets of j, and unmasks ``yⱼ`` alone, only if two
        disjoint groups of t providers exist, that is if ``2t ≤ N``.
    session : str, default="privpca"
        Label of the run, bound into every mask and share.
    round : int, default=0
        Number of this aggregation within the session, bound likewise.
    """

    provider_ids: tuple[str, ...]
    bits: int
    length: int
    min_providers: int | None = None
    threshold: int | None = None
    allow_low_threshold: bool = False
    session: str = "privpca"
    round: int = 0

    def __post_init__(self) -> None:
        ids = tuple(self.provider_ids)
        if not all(isinstance(p, str) and p for p in ids):
            raise ValueError("The 'provider_ids' of secure aggregation must be non-empty "
                             f"strings. Got {ids!r} instead.")
        if len(set(ids)) != len(ids):
            dup = sorted({p for p in ids if ids.count(p) > 1})
            raise ValueError(f"The 'provider_ids' of secure aggregation must be unique; "
                             f"{dup} appear more than once.")
        n = len(ids)
        if n < 2:
            raise ValueError(f"Secure aggregation needs at least 2 providers. Got {n}.")
        bits = check_bits(self.bits)
        length = _positive_int(self.length, "length", 1)
        threshold = None if self.threshold is None else _positive_int(
            self.threshold, "threshold", 1)
        majority = n // 2 + 1
        min_providers = (max(threshold if threshold is not None else majority, 2)
                         if self.min_providers is None
                         else _positive_int(self.min_providers, "min_providers", 2))
        threshold = min_providers if threshold is None else threshold
        if threshold > n:
            raise ValueError(f"The 'threshold' of secure aggregation must be in the range "
                             f"[1, {n}] ({n} providers). Got {threshold} instead.")
        if threshold < majority and not self.allow_low_threshold:
            raise ValueError(
                f"The 'threshold' of secure aggregation must be at least ⌊N/2⌋ + 1 = "
                f"{majority} for N = {n} providers. Got {threshold} instead. With 2t ≤ N, a "
                "server can ask two disjoint groups of t providers, one for a provider's "
                "self-mask shares and the other for its key shares, and unmask its vector "
                "alone. Pass allow_low_threshold=True only if the server cannot do so."
            )
        if not threshold <= min_providers <= n:
            raise ValueError(
                f"The 'min_providers' of secure aggregation must be in the range "
                f"[threshold, N] = [{threshold}, {n}]: fewer survivors than t cannot rebuild "
                f"the masks. Got {min_providers} instead."
            )
        object.__setattr__(self, "provider_ids", ids)
        object.__setattr__(self, "bits", bits)
        object.__setattr__(self, "length", length)
        object.__setattr__(self, "min_providers", min_providers)
        object.__setattr__(self, "threshold", threshold)
        object.__setattr__(self, "round", _positive_int(self.round, "round", 0))
        if not isinstance(self.session, str):
            raise ValueError(f"The 'session' must be a str. Got {self.session!r} instead.")

    @property
    def t(self) -> int:
        """The resolved Shamir threshold."""
        assert self.threshold is not None
        return self.threshold

    @property
    def minimum(self) -> int:
        """The resolved ``min_providers``."""
        assert self.min_providers is not None
        return self.min_providers


def _positive_int(value: Any, name: str, low: int) -> int:
    if isinstance(value, bool | np.bool_) or not isinstance(value, int | np.integer) \
            or int(value) < low:
        raise ValueError(f"The '{name}' parameter of secure aggregation must be an int in the "
                         f"range [{low}, inf). Got {value!r} instead.")
    return int(value)


@dataclass(frozen=True)
class AdvertiseKeys:
    """Stage 1, provider → server: the public keys (PEM) of its two P-384 key pairs."""

    provider_id: str
    c_public: bytes  # encryption of the shares (ECDH → Fernet)
    s_public: bytes  # pairwise masks (ECDH → HKDF → AES-CTR)


@dataclass(frozen=True)
class KeyRoster:
    """Stage 1, server → providers: the advertisements of the providers that sent keys."""

    keys: tuple[AdvertiseKeys, ...]


@dataclass(frozen=True)
class EncryptedShares:
    """Stage 2, provider → server: ``recipient → Fernet(shares of bᵢ and of s_skᵢ)``."""

    provider_id: str
    ciphertexts: dict[str, bytes] = field(default_factory=dict)


@dataclass(frozen=True)
class ShareDelivery:
    """Stage 2, server → one provider: ``sender → ciphertext`` addressed to it."""

    recipient: str
    ciphertexts: dict[str, bytes] = field(default_factory=dict)


@dataclass(frozen=True)
class MaskedInput:
    """Stage 3, provider → server: ``yᵢ``, uint64 words modulo ``2^b``."""

    provider_id: str
    masked: NDArray[np.uint64]


@dataclass(frozen=True)
class UnmaskRequest:
    """Stage 3 → 4, server → providers: who sent ``y`` (survivors) and who did not."""

    survivors: tuple[str, ...]
    dropouts: tuple[str, ...]


@dataclass(frozen=True)
class UnmaskReply:
    """Stage 4, provider → server: its shares of ``bⱼ`` (survivors) and ``s_skⱼ`` (dropouts)."""

    provider_id: str
    self_mask_shares: dict[str, bytes] = field(default_factory=dict)
    key_shares: dict[str, bytes] = field(default_factory=dict)


def message_nbytes(message: object) -> int:
    """Payload bytes of a message: its strings (UTF-8), bytes, arrays and ints (8 each).

    Engine framing (Flower's records, protobuf) is not counted.
    """

    def size(value: Any) -> int:
        if isinstance(value, str):
            return len(value.encode())
        if isinstance(value, bytes):
            return len(value)
        if isinstance(value, np.ndarray):
            return int(value.nbytes)
        if isinstance(value, int):
            return 8
        if isinstance(value, dict):
            return sum(size(k) + size(v) for k, v in value.items())
        if isinstance(value, tuple | list):
            return sum(size(v) for v in value)
        return sum(size(getattr(value, f.name)) for f in fields(value))

    return size(message)


def pack_shares(config: SecAggConfig, src: str, dst: str, seed_share: bytes,
                key_share: bytes) -> bytes:
    """The plaintext of one share ciphertext, bound to the run, the sender and the recipient."""
    parts = [DOMAIN, config.session.encode(), struct.pack("<Q", config.round), src.encode(),
             dst.encode(), seed_share, key_share]
    return b"".join(struct.pack("<I", len(p)) + p for p in parts)


def unpack_shares(config: SecAggConfig, src: str, dst: str, plaintext: bytes
                  ) -> tuple[bytes, bytes]:
    """``(seed share, key share)`` of a plaintext, refusing one bound to anything else."""
    parts: list[bytes] = []
    pos = 0
    while pos + 4 <= len(plaintext) and len(parts) < 7:
        (n,) = struct.unpack_from("<I", plaintext, pos)
        parts.append(plaintext[pos + 4: pos + 4 + n])
        pos += 4 + n
    expected = [DOMAIN, config.session.encode(), struct.pack("<Q", config.round),
                src.encode(), dst.encode()]
    if pos != len(plaintext) or len(parts) != 7 or parts[:5] != expected:
        raise SecureAggregationRefused(
            f"The share ciphertext relayed as {src!r} → {dst!r} is bound to another run, "
            "sender or recipient; refused."
        )
    return parts[5], parts[6]
