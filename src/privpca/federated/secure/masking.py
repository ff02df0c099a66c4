"""The masks of secure aggregation: a cryptographic expansion of each agreed secret.

A provider's masked vector is ``yᵢ = xᵢ + PRG(bᵢ) + Σ_{j>i} PRG(sᵢⱼ) − Σ_{j<i} PRG(sᵢⱼ)
mod 2^b``; this module is the ``PRG``, the arithmetic modulo ``2^b`` and the two key
agreements (Flower's primitives: EC key pairs from
:func:`flwr.supercore.primitives.asymmetric.generate_key_pairs`, ECDH + HKDF from
:func:`flwr.common.secure_aggregation.crypto.symmetric_encryption.generate_shared_key`).

Why not Flower's mask generator
-------------------------------
Flower's SecAgg+ expands a seed with
:func:`flwr.common.secure_aggregation.secaggplus_utils.pseudo_rand_gen` (Flower 1.41): it
folds the seed to **32 bits** (the XOR of its 4-byte words) and draws from NumPy's MT19937
``RandomState``, which is not a cryptographic generator (its state is recovered from 624
outputs); and ``randint(0, num_range - 1)`` never returns ``num_range − 1``. A server that
holds one masked vector can try all 2³² seeds of one mask, so a 32-byte secret buys 32 bits
of security at best. We use Flower's key agreement, secret sharing and encryption, but never
that function: each 32-byte secret is expanded by :func:`mask_stream`, an AES-256 keystream
in CTR mode (the ``cryptography`` package, already a dependency of Flower) whose key and
initial counter are derived by HKDF-SHA256 from the secret with an ``info`` that names the
session, the aggregation round, the purpose (``pairwise`` or ``self``) and the providers
(:func:`mask_info`). The keystream is read as little-endian uint64 words reduced modulo
``2^b``: for ``b < 64`` the low ``b`` bits, uniform because ``2^b`` divides ``2^64``.

Secrets come from the OS only (``secrets.token_bytes``, the EC key generation of
``cryptography``), never from a user's seed: a mask drawn from a seed the server could learn
or guess is no mask. The masked vectors therefore differ from run to run; the sum, in which
every mask cancels or is removed, is exact and the same for the same inputs.
"""

from __future__ import annotations

import base64
import struct

import numpy as np
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from flwr.common.secure_aggregation.crypto.symmetric_encryption import generate_shared_key
from flwr.supercore.primitives.asymmetric import bytes_to_public_key
from numpy.typing import NDArray

__all__ = [
    "MAX_BITS",
    "add_mod",
    "agreed_secret",
    "check_bits",
    "fernet_key",
    "mask_info",
    "mask_stream",
    "private_key_from_scalar",
    "scalar_bytes",
    "sub_mod",
]

#: Largest modulus exponent b: the sums are uint64 words.
MAX_BITS = 64
#: Prefix of every HKDF ``info`` and share plaintext (a new version changes it).
DOMAIN = b"privpca-secagg-v1"
#: Bytes of a P-384 private scalar (the curve of Flower's ``generate_key_pairs``).
_SCALAR_BYTES = 48


def check_bits(bits: object) -> int:
    """``bits`` as an int in ``[1, 64]``, or raise ``ValueError`` naming the range.

    Parameters
    ----------
    bits : object
        The modulus exponent b (sums are taken modulo ``2^b``).

    Returns
    -------
    int
        b.
    """
    if isinstance(bits, bool | np.bool_) or not isinstance(bits, int | np.integer) \
            or not 1 <= int(bits) <= MAX_BITS:
        raise ValueError(
            f"The 'bits' parameter of secure aggregation must be an int in the range "
            f"[1, {MAX_BITS}]. Got {bits!r} instead."
        )
    return int(bits)


def _word_mask(bits: int) -> np.uint64:
    return np.uint64((1 << bits) - 1)


def add_mod(a: NDArray[np.uint64], b: NDArray[np.uint64], bits: int) -> NDArray[np.uint64]:
    """``(a + b) mod 2^bits`` for uint64 arrays (a new array; uint64 wraps modulo 2⁶⁴)."""
    out = np.add(a, b, dtype=np.uint64)
    out &= _word_mask(bits)
    return out


def sub_mod(a: NDArray[np.uint64], b: NDArray[np.uint64], bits: int) -> NDArray[np.uint64]:
    """``(a − b) mod 2^bits`` for uint64 arrays (a new array)."""
    out = np.subtract(a, b, dtype=np.uint64)
    out &= _word_mask(bits)
    return out


def _field(value: bytes) -> bytes:
    return struct.pack("<I", len(value)) + value


def mask_info(session: str, round: int, purpose: str, *provider_ids: str) -> bytes:
    """HKDF ``info`` of one mask: the domain, session, round, purpose and providers.

    Parameters
    ----------
    session : str
        The session's label (the run).
    round : int
        The aggregation round within the session (≥ 0).
    purpose : {"pairwise", "self"}
        A pairwise mask ``PRG(sᵢⱼ)`` or a provider's self mask ``PRG(bᵢ)``.
    *provider_ids : str
        The provider (self mask) or the two providers, in sorted order so that both ends
        derive the same stream (pairwise mask).

    Returns
    -------
    bytes
        Length-prefixed fields, so that no two different tuples give the same ``info``.
    """
    if purpose not in ("pairwise", "self"):
        raise ValueError(f"purpose must be 'pairwise' or 'self'; got {purpose!r}.")
    fields = [DOMAIN, session.encode(), struct.pack("<Q", round), purpose.encode(),
              *(p.encode() for p in provider_ids)]
    return b"".join(_field(f) for f in fields)


def mask_stream(secret: bytes, length: int, bits: int, *, info: bytes) -> NDArray[np.uint64]:
    """``length`` words modulo ``2^bits`` of the AES-256-CTR keystream keyed from ``secret``.

    Parameters
    ----------
    secret : bytes
        A 32-byte agreed secret (a self-mask seed ``bᵢ`` or a pairwise ``sᵢⱼ``).
    length : int
        Number of words d.
    bits : int
        b in ``[1, 64]``.
    info : bytes
        :func:`mask_info` of the mask: a different ``info`` gives an independent stream.

    Returns
    -------
    ndarray of uint64 of shape (length,)
        Uniform on ``[0, 2^bits)``, independent across ``(secret, info)``.
    """
    if len(secret) != 32:
        raise ValueError(f"A mask secret must be 32 bytes; got {len(secret)}.")
    okm = HKDF(algorithm=hashes.SHA256(), length=48, salt=None, info=info).derive(secret)
    encryptor = Cipher(algorithms.AES(okm[:32]), modes.CTR(okm[32:])).encryptor()
    stream = encryptor.update(bytes(8 * length)) + encryptor.finalize()
    words = np.frombuffer(stream, dtype="<u8").astype(np.uint64)
    if bits < MAX_BITS:
        words &= _word_mask(bits)
    return words


def agreed_secret(private_key: ec.EllipticCurvePrivateKey, peer_public: bytes) -> bytes:
    """The 32-byte pairwise secret ``sᵢⱼ`` of a masking key and a peer's public key.

    Flower's :func:`generate_shared_key` (ECDH on P-384, then HKDF-SHA256 to 32 bytes),
    whose base64 encoding for Fernet is undone here.
    """
    return base64.urlsafe_b64decode(
        generate_shared_key(private_key, bytes_to_public_key(peer_public)))


def fernet_key(private_key: ec.EllipticCurvePrivateKey, peer_public: bytes) -> bytes:
    """The Fernet key of the pair's encryption keys (Flower's :func:`generate_shared_key`)."""
    return generate_shared_key(private_key, bytes_to_public_key(peer_public))


def scalar_bytes(private_key: ec.EllipticCurvePrivateKey) -> bytes:
    """The private scalar of a P-384 key as 48 big-endian bytes (what is secret-shared)."""
    return private_key.private_numbers().private_value.to_bytes(_SCALAR_BYTES, "big")


def private_key_from_scalar(secret: bytes) -> ec.EllipticCurvePrivateKey:
    """The P-384 private key of a reconstructed scalar (``ValueError`` if it is not one)."""
    if len(secret) != _SCALAR_BYTES:
        raise ValueError(f"A P-384 private scalar has {_SCALAR_BYTES} bytes; got {len(secret)}.")
    return ec.derive_private_key(int.from_bytes(secret, "big"), ec.SECP384R1())
