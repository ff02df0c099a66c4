"""Secure aggregation (SecAgg): the server learns the providers' sum modulo 2^b, not one input.

DPS-PCA under secure aggregation: each provider sends its noisy answer encoded
as uint64 residues modulo ``2^b`` on a common grid; the untrusted server must learn only
their sum. This package runs the protocol of Bonawitz et al. (2017), the one Flower's SecAgg+
(Bell et al. 2020) runs, with Flower's own primitives — EC key pairs
(:mod:`flwr.supercore.primitives.asymmetric`), ECDH + HKDF and Fernet
(:mod:`flwr.common.secure_aggregation.crypto.symmetric_encryption`), Shamir's secret sharing
(:mod:`flwr.common.secure_aggregation.crypto.shamir`, pycryptodome underneath) — except
Flower's mask generator, which folds each seed to 32 bits and draws from MT19937 (see
:mod:`.masking`): the masks here are an AES-256-CTR keystream keyed by HKDF-SHA256. It needs
the optional extra ``pip install "privpca[federated]"`` (nothing else in privpca imports it).

The four stages (:mod:`.messages`; :class:`SecAggProvider`, :class:`SecAggServer`)
--------------------------------------------------------------------------------
1. Each provider makes two P-384 key pairs, c (encryption) and s (masking), and advertises
   the public keys; the server sends everyone the roster.
2. Each provider draws a fresh 32-byte self-mask seed ``bᵢ`` and Shamir-shares ``bᵢ`` and its
   masking key ``s_skᵢ`` among all providers (threshold t), encrypting each peer's pair of
   shares to it with the Fernet key of their c keys; the server relays the ciphertexts.
3. Each provider sends ``yᵢ = xᵢ + PRG(bᵢ) + Σ_{j>i} PRG(sᵢⱼ) − Σ_{j<i} PRG(sᵢⱼ) mod 2^b``,
   ``sᵢⱼ`` the ECDH secret of the s keys of i and j.
4. The server announces the survivors (who sent ``y``) and the dropouts; each survivor
   returns its shares of ``bⱼ`` for the survivors and of ``s_skⱼ`` for the dropouts — never
   both for the same j (refused: both would unmask ``yⱼ`` alone), and only once. From t shares
   each the server removes every mask and gets ``Σ_{survivors} xᵢ mod 2^b``.

Fewer than ``min_providers`` survivors at any stage and the server aborts
(:class:`SecureAggregationAborted`): nothing is unmasked, no sum released. The threshold
must be at least ``⌊N/2⌋ + 1`` (:class:`SecAggConfig` says why). The graph is complete:
every provider shares with every other, O(N²) work and O(N) messages per provider, which is
fine for the ≤ 100 hospitals of DPS-PCA; SecAgg+ replaces it with a random k-regular graph
(k = O(log N)) so that thousands of phones each share with only O(log N) neighbours, a saving
we do not need and whose security argument (a random graph stays connected after dropouts
and corruptions, with high probability only) we would rather not take on.

Keys and seeds come from the OS, never from a user's seed (a seeded mask is no mask): the
masked vectors change from run to run, but the sum is exact and the same bit for bit for the
same inputs. The threat model is Bonawitz et al.'s honest-but-curious server that may drop
any provider; against an active server this package adds the refusals above and binds each
share to its run, sender and recipient, but it does not authenticate the advertised keys
(a server that substitutes keys can impersonate peers: that needs signed keys, a PKI) nor run
SecAgg's consistency round (a signed survivor list).

:func:`run_secure_aggregation` runs the four stages in process with simulated dropouts and
returns the sum with the server's transcript.

Cost
----
``python benchmarks/bench_secure_aggregation.py`` (one aggregation, all parties in one
process one after another, so the wall time is the sum of their work; "per provider" is each
provider's own compute and the bytes it sends, the payload of its four messages):

|   N |       d |   t | wall s | provider s | server s | sent kB/provider | input kB |
|----:|--------:|----:|-------:|-----------:|---------:|-----------------:|---------:|
|   3 |      10 |   2 |   0.04 |      0.008 |     0.01 |              1.4 |      0.1 |
|   3 |    1000 |   2 |   0.04 |      0.008 |     0.01 |              9.3 |      8.0 |
|   3 |  100000 |   2 |   0.05 |      0.010 |     0.02 |            801.3 |    800.0 |
|   5 |      10 |   3 |   0.09 |      0.010 |     0.04 |              2.1 |      0.1 |
|   5 |    1000 |   3 |   0.10 |      0.012 |     0.04 |             10.1 |      8.0 |
|   5 |  100000 |   3 |   0.13 |      0.018 |     0.04 |            802.1 |    800.0 |
|  20 |      10 |  11 |   1.79 |      0.059 |     0.61 |              8.0 |      0.1 |
|  20 |    1000 |  11 |   1.87 |      0.059 |     0.70 |             15.9 |      8.0 |
|  20 |  100000 |  11 |   2.15 |      0.083 |     0.47 |            807.9 |    800.0 |
|  50 |      10 |  26 |  19.25 |      0.233 |     7.58 |             19.7 |      0.1 |
|  50 |    1000 |  26 |  18.54 |      0.242 |     6.46 |             27.6 |      8.0 |
|  50 |  100000 |  26 |  21.80 |      0.299 |     6.83 |            819.6 |    800.0 |

Measured on 2 shared CPU cores (load average about 1.6), Flower 1.41, pycryptodome 3.24,
cryptography 50. The bytes sent are 8·d for ``yᵢ`` plus about 0.4 kB per peer (two PEM
public keys once, one Fernet ciphertext of two shares per peer, and the shares returned at
stage 4). The time grows as N²: each provider makes 2(N−1) ECDH agreements and N shares of
two secrets, and the server rebuilds N secrets from t ≈ N/2 shares each by Lagrange
interpolation in pure Python (pycryptodome's Shamir): at N = 50 most of the server's time.
The masks themselves (AES-CTR) are cheap: d = 10⁵ adds about 0.07 s to each provider at
N = 50 (50 keystreams of 800 kB). With the providers running in parallel, one aggregation
takes about a provider's time plus the server's, plus the network: ≈ 7 s at N = 50,
≈ 0.6 s at N = 20.
"""

from privpca.federated.secure.driver import (
    SecureAggregationResult,
    Transcript,
    run_secure_aggregation,
)
from privpca.federated.secure.masking import mask_stream
from privpca.federated.secure.messages import (
    AdvertiseKeys,
    EncryptedShares,
    KeyRoster,
    MaskedInput,
    SecAggConfig,
    SecureAggregationAborted,
    SecureAggregationRefused,
    ShareDelivery,
    UnmaskReply,
    UnmaskRequest,
    message_nbytes,
)
from privpca.federated.secure.provider import SecAggProvider
from privpca.federated.secure.server import SecAggServer

__all__ = [
    "AdvertiseKeys",
    "EncryptedShares",
    "KeyRoster",
    "MaskedInput",
    "SecAggConfig",
    "SecAggProvider",
    "SecAggServer",
    "SecureAggregationAborted",
    "SecureAggregationRefused",
    "SecureAggregationResult",
    "ShareDelivery",
    "Transcript",
    "UnmaskReply",
    "UnmaskRequest",
    "mask_stream",
    "message_nbytes",
    "run_secure_aggregation",
]
