"""A provider of secure aggregation: its keys, its shares of the others' secrets, its mask.

:class:`SecAggProvider` answers the server's four messages in order and refuses anything
else (:class:`~privpca.federated.secure.messages.SecureAggregationRefused`); a refusal ends
its part in the run and forgets its secrets. It never sends its input in the clear, and it
answers the unmasking request once, never with both secrets of the same peer.
"""

from __future__ import annotations

import secrets
from typing import Any, NoReturn

import numpy as np
from cryptography.exceptions import UnsupportedAlgorithm
from cryptography.fernet import Fernet, InvalidToken
from cryptography.hazmat.primitives.asymmetric import ec
from flwr.common.secure_aggregation.crypto.shamir import create_shares
from flwr.supercore.primitives.asymmetric import (
    bytes_to_public_key,
    generate_key_pairs,
    public_key_to_bytes,
)
from numpy.typing import NDArray

from privpca.federated.secure.masking import (
    add_mod,
    agreed_secret,
    fernet_key,
    mask_info,
    mask_stream,
    scalar_bytes,
    sub_mod,
)
from privpca.federated.secure.messages import (
    AdvertiseKeys,
    EncryptedShares,
    KeyRoster,
    MaskedInput,
    SecAggConfig,
    SecureAggregationRefused,
    ShareDelivery,
    UnmaskReply,
    UnmaskRequest,
    pack_shares,
    unpack_shares,
)

__all__ = ["SecAggProvider", "check_input"]


def check_input(x: Any, config: SecAggConfig) -> NDArray[np.uint64]:
    """A provider's input as a fresh uint64 array of shape ``(d,)`` with words below ``2^b``.

    Raises ``ValueError`` (naming what is wrong) for another dtype, shape or a word out of
    range: the input must already be encoded as residues modulo ``2^b``.
    """
    if not isinstance(x, np.ndarray) or x.dtype != np.uint64:
        raise ValueError("A secure-aggregation input must be a numpy array of dtype uint64 "
                         f"(residues modulo 2^b). Got {type(x).__name__} "
                         f"{getattr(x, 'dtype', '')} instead.")
    if x.shape != (config.length,):
        raise ValueError(f"A secure-aggregation input must have shape ({config.length},) "
                         f"(the agreed length). Got {x.shape} instead.")
    if config.bits < 64 and x.size and int(x.max()) >> config.bits:
        raise ValueError(f"A secure-aggregation input must hold residues modulo 2^{config.bits}"
                         f"; its largest word is {int(x.max())}.")
    return np.array(x, dtype=np.uint64, copy=True)


class SecAggProvider:
    """One provider's side of SecAgg (Bonawitz et al. 2017) over the complete graph.

    Parameters
    ----------
    provider_id : str
        This provider's id, one of ``config.provider_ids``.
    config : SecAggConfig
        The agreement of the run.

    Attributes
    ----------
    phase : str
        One of ``"new"``, ``"advertised"``, ``"shared"``, ``"masked"``, ``"done"`` (the
        unmasking request answered) and ``"refused"`` (it refused a message and left).

    Notes
    -----
    The calls, in order: :meth:`advertise` (stage 1), :meth:`share_keys` (stage 2),
    :meth:`mask` (stage 3), :meth:`unmask` (stage 4). The key pairs come from the OS when
    :meth:`advertise` runs and the self-mask seed when :meth:`share_keys` runs; nothing here
    takes a seed. Each secret is forgotten once it is no longer needed (the c key after
    stage 2, the s key and the seed after stage 3, the peers' shares after stage 4).
    """

    def __init__(self, provider_id: str, config: SecAggConfig) -> None:
        if not isinstance(config, SecAggConfig):
            raise TypeError(f"config must be a SecAggConfig; got {type(config).__name__}.")
        if provider_id not in config.provider_ids:
            raise ValueError(f"Provider {provider_id!r} is not one of the agreed providers "
                             f"{list(config.provider_ids)}.")
        self.provider_id = provider_id
        self.config = config
        self.phase = "new"
        self._c_key: ec.EllipticCurvePrivateKey | None = None
        self._s_key: ec.EllipticCurvePrivateKey | None = None
        self._seed = b""
        self._public: AdvertiseKeys | None = None
        self._peers: dict[str, AdvertiseKeys] = {}
        self._seed_shares: dict[str, bytes] = {}
        self._key_shares: dict[str, bytes] = {}
        self._fernet: dict[str, bytes] = {}  # peer → Fernet key of the pair's c keys
        self._masked_with: tuple[str, ...] = ()

    # ------------------------------------------------------------------ helpers
    def _expect(self, phase: str, what: str) -> None:
        if self.phase != phase:
            self._refuse(f"Provider {self.provider_id!r} received {what} in phase "
                         f"{self.phase!r} (expected phase {phase!r})")

    def _refuse(self, reason: str) -> NoReturn:
        """Forget every secret, leave the run and raise :class:`SecureAggregationRefused`."""
        self._forget()
        self.phase = "refused"
        raise SecureAggregationRefused(reason + "; refused, and this provider left the run.")

    def _forget(self) -> None:
        self._c_key = self._s_key = None
        self._seed = b""
        self._seed_shares, self._key_shares, self._fernet = {}, {}, {}

    def _order(self, ids: set[str]) -> tuple[str, ...]:
        return tuple(p for p in self.config.provider_ids if p in ids)

    # ------------------------------------------------------------------ stage 1
    def advertise(self) -> AdvertiseKeys:
        """Make the two P-384 key pairs (c: encryption, s: masking); send the public keys."""
        self._expect("new", "the setup request")
        c_key, c_pub = generate_key_pairs()
        s_key, s_pub = generate_key_pairs()
        self._c_key, self._s_key = c_key, s_key
        self._public = AdvertiseKeys(self.provider_id, public_key_to_bytes(c_pub),
                                     public_key_to_bytes(s_pub))
        self.phase = "advertised"
        return self._public

    # ------------------------------------------------------------------ stage 2
    def _check_roster(self, roster: Any) -> dict[str, AdvertiseKeys]:
        if not isinstance(roster, KeyRoster) or \
                not all(isinstance(a, AdvertiseKeys) for a in roster.keys):
            self._refuse("The key roster is not a KeyRoster of AdvertiseKeys")
        ids = [a.provider_id for a in roster.keys]
        if len(set(ids)) != len(ids) or not set(ids) <= set(self.config.provider_ids):
            self._refuse(f"The key roster's providers {ids} repeat or are not agreed")
        peers = {a.provider_id: a for a in roster.keys}
        if peers.get(self.provider_id) != self._public:
            self._refuse("The key roster does not hold this provider's own keys unchanged")
        if len(peers) < self.config.minimum:
            self._refuse(f"The key roster has {len(peers)} providers, fewer than "
                         f"min_providers={self.config.minimum}")
        keys = [k for a in roster.keys for k in (a.c_public, a.s_public)]
        if len(set(keys)) != len(keys):
            self._refuse("Two public keys of the key roster are identical")
        for a in roster.keys:
            for key in (a.c_public, a.s_public):
                try:
                    public = bytes_to_public_key(key)
                except (ValueError, TypeError, UnsupportedAlgorithm):
                    public = None
                if not isinstance(public, ec.EllipticCurvePublicKey) or \
                        not isinstance(public.curve, ec.SECP384R1):
                    self._refuse(f"A public key of {a.provider_id!r} is not a P-384 key")
        return {p: peers[p] for p in self._order(set(peers))}

    def share_keys(self, roster: KeyRoster) -> EncryptedShares:
        """Shamir-share the self-mask seed and the masking key; encrypt each pair of shares.

        The shares (threshold t, one per provider of the roster, Flower's
        :func:`~flwr.common.secure_aggregation.crypto.shamir.create_shares`) of the fresh
        32-byte seed ``bᵢ`` and of the 48-byte masking scalar ``s_skᵢ`` are encrypted to
        each peer with the Fernet key of the pair's c keys; this provider keeps its own.
        """
        self._expect("advertised", "the key roster")
        self._peers = self._check_roster(roster)
        assert self._c_key is not None and self._s_key is not None
        self._seed = seed = secrets.token_bytes(32)
        n, t = len(self._peers), self.config.t
        seed_shares = create_shares(seed, t, n)
        key_shares = create_shares(scalar_bytes(self._s_key), t, n)
        ciphertexts: dict[str, bytes] = {}
        for k, peer in enumerate(self._peers):
            if peer == self.provider_id:
                self._seed_shares[peer], self._key_shares[peer] = seed_shares[k], key_shares[k]
                continue
            plaintext = pack_shares(self.config, self.provider_id, peer, seed_shares[k],
                                    key_shares[k])
            self._fernet[peer] = fernet_key(self._c_key, self._peers[peer].c_public)
            ciphertexts[peer] = Fernet(self._fernet[peer]).encrypt(plaintext)
        self._c_key = None  # the pair keys are kept, the private key is not needed again
        self.phase = "shared"
        return EncryptedShares(self.provider_id, ciphertexts)

    # ------------------------------------------------------------------ stage 3
    def mask(self, delivery: ShareDelivery, x: NDArray[np.uint64]) -> MaskedInput:
        """Store the shares addressed to this provider; send ``yᵢ`` (its input, masked).

        ``yᵢ = xᵢ + PRG(bᵢ) + Σ_{j>i} PRG(sᵢⱼ) − Σ_{j<i} PRG(sᵢⱼ) mod 2^b`` over the peers j
        whose shares arrived (the order is the agreed ``provider_ids``).

        Parameters
        ----------
        delivery : ShareDelivery
            The ciphertexts addressed to this provider, by sender.
        x : ndarray of uint64 of shape (length,)
            This provider's input, residues modulo ``2^b`` (checked before anything else;
            a bad input raises ``ValueError`` and changes nothing).

        Returns
        -------
        MaskedInput
        """
        x = check_input(x, self.config)
        self._expect("shared", "the share delivery")
        if not isinstance(delivery, ShareDelivery) or delivery.recipient != self.provider_id:
            self._refuse("The share delivery is not a ShareDelivery addressed to this provider")
        senders = set(delivery.ciphertexts)
        if not senders <= set(self._peers) - {self.provider_id}:
            self._refuse(f"The share delivery has senders {sorted(senders)} outside the roster")
        assert self._s_key is not None
        for src in self._order(senders):
            try:
                plaintext = Fernet(self._fernet[src]).decrypt(delivery.ciphertexts[src])
            except (InvalidToken, TypeError, ValueError):
                self._refuse(f"The ciphertext from {src!r} does not decrypt")
            try:
                seed_share, key_share = unpack_shares(self.config, src, self.provider_id,
                                                      plaintext)
            except SecureAggregationRefused as exc:
                self._refuse(str(exc).removesuffix("; refused."))
            self._seed_shares[src], self._key_shares[src] = seed_share, key_share
        masked_with = self._order(senders | {self.provider_id})
        if len(masked_with) < self.config.minimum:
            self._refuse(f"Shares arrived from {len(masked_with) - 1} peers: {len(masked_with)} "
                         f"providers, fewer than min_providers={self.config.minimum}")
        cfg = self.config
        y = add_mod(x, mask_stream(self._seed, cfg.length, cfg.bits,
                                   info=mask_info(cfg.session, cfg.round, "self",
                                                  self.provider_id)), cfg.bits)
        position = cfg.provider_ids.index
        for peer in masked_with:
            if peer == self.provider_id:
                continue
            stream = mask_stream(
                agreed_secret(self._s_key, self._peers[peer].s_public), cfg.length, cfg.bits,
                info=mask_info(cfg.session, cfg.round, "pairwise",
                               *sorted((self.provider_id, peer))))
            y = (add_mod if position(peer) > position(self.provider_id) else sub_mod)(
                y, stream, cfg.bits)
        del x
        self._masked_with = masked_with
        self._seed, self._s_key, self._fernet = b"", None, {}
        self.phase = "masked"
        return MaskedInput(self.provider_id, y)

    # ------------------------------------------------------------------ stage 4
    def unmask(self, request: UnmaskRequest) -> UnmaskReply:
        """Send the shares of ``bⱼ`` for each survivor j and of ``s_skⱼ`` for each dropout j.

        Refused (and the provider leaves the run): a second request; a peer listed both as
        survivor and dropout (both its secrets would unmask its vector alone); survivors and
        dropouts that are not exactly the providers this provider masked with; fewer
        survivors than ``min_providers``; this provider not among the survivors.
        """
        self._expect("masked", "an unmasking request")
        if not isinstance(request, UnmaskRequest):
            self._refuse("The unmasking request is not an UnmaskRequest")
        survivors, dropouts = tuple(request.survivors), tuple(request.dropouts)
        both = sorted(set(survivors) & set(dropouts))
        if both:
            self._refuse(f"The server asked for both the self-mask share and the key share of "
                         f"{both}: together they unmask a provider's vector alone")
        listed = survivors + dropouts
        if len(set(listed)) != len(listed) or set(listed) != set(self._masked_with):
            self._refuse(f"Survivors {list(survivors)} and dropouts {list(dropouts)} are not "
                         f"exactly the providers this provider masked with "
                         f"{list(self._masked_with)}")
        if self.provider_id not in survivors:
            self._refuse("This provider sent its masked input but is listed as a dropout")
        if len(survivors) < self.config.minimum:
            self._refuse(f"Only {len(survivors)} survivors, fewer than "
                         f"min_providers={self.config.minimum}")
        reply = UnmaskReply(self.provider_id,
                            {j: self._seed_shares[j] for j in self._order(set(survivors))},
                            {j: self._key_shares[j] for j in self._order(set(dropouts))})
        self._forget()
        self.phase = "done"
        return reply
