"""Secure aggregation (privpca.federated.secure): exact sums, masked transcripts, dropouts,
aborts and refusals."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("flwr")

from scipy import stats

from privpca.federated.protocol import ProviderDropoutError, QueryRefusedError
from privpca.federated.secure import (
    SecAggConfig,
    SecAggProvider,
    SecAggServer,
    SecureAggregationAborted,
    SecureAggregationRefused,
    ShareDelivery,
    UnmaskRequest,
    mask_stream,
    message_nbytes,
    run_secure_aggregation,
)
from privpca.federated.secure.masking import mask_info


def _inputs(n: int, bits: int, length: int, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {f"hospital-{i}": rng.integers(0, 2**bits, size=length, dtype=np.uint64)
            for i in range(n)}


def _exact_sum(xs, bits: int) -> np.ndarray:
    """Σ xᵢ mod 2^b in Python integers (independent of uint64 wrap-around)."""
    xs = list(xs)
    return np.array([sum(int(x[k]) for x in xs) % 2**bits for k in range(len(xs[0]))],
                    dtype=np.uint64)


def _blob(message) -> bytes:
    """Every byte of a message's payload, concatenated."""
    out = []

    def walk(value):
        if isinstance(value, np.ndarray):
            out.append(value.tobytes())
        elif isinstance(value, bytes):
            out.append(value)
        elif isinstance(value, str):
            out.append(value.encode())
        elif isinstance(value, dict):
            for k, v in value.items():
                walk(k)
                walk(v)
        elif isinstance(value, tuple | list):
            for v in value:
                walk(v)
        elif hasattr(value, "__dataclass_fields__"):
            for name in value.__dataclass_fields__:
                walk(getattr(value, name))

    walk(message)
    return b"|".join(out)


def _to_stage_three(n=3, bits=64, length=8, **kwargs):
    """Run stages 1-3 by hand; return (config, providers, server, request, inputs)."""
    xs = _inputs(n, bits, length)
    config = SecAggConfig(tuple(xs), bits, length, **kwargs)
    providers = {p: SecAggProvider(p, config) for p in xs}
    server = SecAggServer(config)
    roster = server.collect_keys([q.advertise() for q in providers.values()])
    deliveries = server.collect_shares([q.share_keys(roster) for q in providers.values()])
    request = server.collect_masked([q.mask(deliveries[p], xs[p]) for p, q in providers.items()])
    return config, providers, server, request, xs


# ---------------------------------------------------------------------------- exact sums
@pytest.mark.parametrize("bits", [64, 20])
@pytest.mark.parametrize("n", [3, 5, 20])
def test_the_unmasked_sum_is_exact(n, bits):
    xs = _inputs(n, bits, 16, seed=n + bits)
    result = run_secure_aggregation(xs, bits)
    assert result.total.dtype == np.uint64
    assert np.array_equal(result.total, _exact_sum(xs.values(), bits))
    assert result.survivors == tuple(xs) and result.dropped == {}
    assert result.config.threshold == result.config.min_providers == n // 2 + 1


def test_the_sum_is_the_same_bit_for_bit_but_the_masks_are_fresh():
    xs = _inputs(4, 64, 32)
    a, b = run_secure_aggregation(xs, 64), run_secure_aggregation(xs, 64)
    assert np.array_equal(a.total, b.total)
    for ya, yb in zip(a.transcript.masked, b.transcript.masked, strict=True):
        assert not np.array_equal(ya.masked, yb.masked)


def test_wrap_around_at_the_modulus():
    top = np.full(5, 2**20 - 1, dtype=np.uint64)
    xs = {"a": top, "b": top, "c": np.ones(5, dtype=np.uint64)}
    assert np.array_equal(run_secure_aggregation(xs, 20).total, np.full(5, 2**20 - 1))


# ---------------------------------------------------------------------------- what the server sees
@pytest.mark.parametrize("bits", [64, 20])
def test_the_server_receives_masked_vectors_only(bits):
    d = 4096
    zero = np.zeros(d, dtype=np.uint64)
    large = np.full(d, 2**bits - 1, dtype=np.uint64)
    other = np.random.default_rng(1).integers(0, 2**bits, size=d, dtype=np.uint64)
    xs = {"zero": zero, "large": large, "other": other}
    result = run_secure_aggregation(xs, bits)
    masked = {m.provider_id: m.masked for m in result.transcript.masked}
    tol = 6 * 0.5 / np.sqrt(d)  # six standard deviations of a bit's mean
    for p, x in xs.items():
        y = masked[p]
        assert y.dtype == np.uint64 and int(y.max()) < 2**bits
        assert np.count_nonzero(y == x) <= 2  # a word equal by chance: 2^-b each
        # Bit balance: every one of the b bits is set about half the time, whatever x is.
        ones = ((y[:, None] >> np.arange(bits, dtype=np.uint64)) & np.uint64(1)).mean(axis=0)
        assert np.all(np.abs(ones - 0.5) < tol), (p, ones)
        # Uniform top six bits (64 cells of 64 expected words each).
        cells = np.bincount((y >> np.uint64(bits - 6)).astype(np.intp), minlength=64)
        assert stats.chisquare(cells).pvalue > 1e-6, (p, cells)
    # The masked vectors of x = 0 and x = 2^b - 1 are alike: their means agree to sampling error.
    scale = 2.0**bits
    assert abs(masked["zero"].astype(float).mean() - masked["large"].astype(float).mean()) \
        < 6 * scale / np.sqrt(12 * d) * np.sqrt(2)
    # No message the server received holds an input in the clear (any two consecutive words).
    blob = b"||".join(_blob(m) for m in result.transcript.messages())
    for p in ("large", "other"):
        raw = xs[p].tobytes()
        assert not any(raw[k:k + 16] in blob for k in range(0, len(raw) - 16, 8)), p
    assert np.array_equal(result.total, _exact_sum(xs.values(), bits))


def test_bytes_sent_per_provider():
    result = run_secure_aggregation(_inputs(5, 64, 100), 64)
    sent = result.transcript.bytes_sent()
    assert set(sent) == set(result.survivors)
    masked = result.transcript.masked[0]
    assert message_nbytes(masked) == 8 * 100 + len(masked.provider_id)
    assert all(v > 8 * 100 for v in sent.values())


# ---------------------------------------------------------------------------- dropouts
@pytest.mark.parametrize("dropouts", [
    {3: ["hospital-1", "hospital-4"]},                 # after stage 2, down to min_providers
    {2: ["hospital-0"], 3: ["hospital-3"]},
    {1: ["hospital-2"], 4: ["hospital-0"]},
    {4: ["hospital-1", "hospital-2"]},                 # sent y, then no shares: still summed
])
def test_dropouts_down_to_min_providers_give_the_survivors_sum(dropouts):
    xs = _inputs(5, 64, 32)
    result = run_secure_aggregation(xs, 64, dropouts=dropouts)
    gone_before_y = {p for s in (1, 2, 3) for p in dropouts.get(s, ())}
    assert result.survivors == tuple(p for p in xs if p not in gone_before_y)
    assert result.dropped == {p: s for s, ps in dropouts.items() for p in ps}
    assert np.array_equal(result.total, _exact_sum((xs[p] for p in result.survivors), 64))


@pytest.mark.parametrize("stage", [1, 2, 3, 4])
def test_one_below_min_providers_aborts_with_no_sum(stage):
    xs = _inputs(5, 64, 8)
    gone = ["hospital-0", "hospital-2", "hospital-4"]
    with pytest.raises(SecureAggregationAborted,
                       match=f"stage {stage} .*2 of the 5 agreed providers survived, fewer "
                             "than min_providers=3") as info:
        run_secure_aggregation(xs, 64, dropouts={stage: gone})
    assert (info.value.stage, info.value.survived, info.value.agreed) == (stage, 2, 5)
    assert isinstance(info.value, ProviderDropoutError)


def test_an_aborted_server_unmasks_nothing():
    _config, providers, server, request, _ = _to_stage_three(n=5)
    replies = [providers[p].unmask(request) for p in request.survivors[:2]]
    with pytest.raises(SecureAggregationAborted):
        server.collect_unmask(replies)
    assert server.aborted and server._sum is None
    with pytest.raises(RuntimeError, match="aborted"):
        server.collect_unmask([*replies, providers[request.survivors[2]].unmask(request)])


def test_a_malformed_message_ends_the_run():
    xs = _inputs(3, 20, 4)
    config = SecAggConfig(tuple(xs), 20, 4)
    providers = {p: SecAggProvider(p, config) for p in xs}
    server = SecAggServer(config)
    roster = server.collect_keys([q.advertise() for q in providers.values()])
    deliveries = server.collect_shares([q.share_keys(roster) for q in providers.values()])
    masked = [q.mask(deliveries[p], xs[p]) for p, q in providers.items()]
    bad = type(masked[0])(masked[0].provider_id, np.full(4, 2**20, dtype=np.uint64))
    with pytest.raises(ValueError, match="words below 2\\^20"):
        server.collect_masked([bad, *masked[1:]])
    assert server.aborted
    with pytest.raises(RuntimeError, match="aborted"):
        server.collect_masked(masked)


def test_a_share_that_does_not_combine_ends_the_run():
    _, providers, server, request, _ = _to_stage_three(n=3, min_providers=3)
    replies = [providers[p].unmask(request) for p in request.survivors]
    victim = request.survivors[1]
    share = bytearray(replies[0].self_mask_shares[victim])
    share[-1] ^= 1  # in the padding block: the rebuilt seed's PKCS#7 padding is wrong
    forged = type(replies[0])(replies[0].provider_id,
                              {**replies[0].self_mask_shares, victim: bytes(share)}, {})
    with pytest.raises(ValueError):
        server.collect_unmask([forged, *replies[1:]])
    assert server.aborted and server._sum is None


def test_a_provider_refuses_both_shares_of_the_same_peer():
    _, providers, _, request, _ = _to_stage_three(n=3)
    a, b, c = request.survivors
    attack = UnmaskRequest(survivors=(a, b, c), dropouts=(c,))
    with pytest.raises(SecureAggregationRefused, match="both the self-mask share and the key"):
        providers[a].unmask(attack)
    assert providers[a].phase == "refused"
    with pytest.raises(SecureAggregationRefused):  # and it has left the run
        providers[a].unmask(request)
    assert isinstance(SecureAggregationRefused("x"), QueryRefusedError)


def test_a_provider_answers_the_unmasking_request_once():
    _, providers, _, request, _ = _to_stage_three(n=3)
    a, b, c = request.survivors
    providers[a].unmask(request)
    with pytest.raises(SecureAggregationRefused, match="phase 'done'"):
        providers[a].unmask(UnmaskRequest(survivors=(a, b), dropouts=(c,)))


@pytest.mark.parametrize("survivors, dropouts, match", [
    (("hospital-0", "hospital-1"), ("hospital-2",), "fewer than min_providers"),
    (("hospital-1", "hospital-2"), ("hospital-0",), "listed as a dropout"),
    (("hospital-0", "hospital-1", "hospital-2", "hospital-9"), (), "not exactly"),
    (("hospital-0", "hospital-1"), (), "not exactly"),
])
def test_a_provider_refuses_unsafe_unmasking_requests(survivors, dropouts, match):
    _, providers, _, _, _ = _to_stage_three(n=3, min_providers=3)
    with pytest.raises(SecureAggregationRefused, match=match):
        providers["hospital-0"].unmask(UnmaskRequest(survivors, dropouts))


def test_a_provider_refuses_a_tampered_or_misrouted_ciphertext():
    xs = _inputs(3, 64, 4)
    config = SecAggConfig(tuple(xs), 64, 4)
    providers = {p: SecAggProvider(p, config) for p in xs}
    server = SecAggServer(config)
    roster = server.collect_keys([q.advertise() for q in providers.values()])
    deliveries = server.collect_shares([q.share_keys(roster) for q in providers.values()])
    a, b, c = xs
    misrouted = ShareDelivery(a, {b: deliveries[c].ciphertexts[b]})  # b's shares meant for c
    with pytest.raises(SecureAggregationRefused, match="does not decrypt"):
        providers[a].mask(misrouted, xs[a])
    with pytest.raises(SecureAggregationRefused, match="phase 'refused'"):
        providers[a].mask(deliveries[a], xs[a])
    bad_input = np.zeros(5, dtype=np.uint64)
    with pytest.raises(ValueError, match="shape"):  # the caller's error: nothing changes
        providers[b].mask(deliveries[b], bad_input)
    assert providers[b].phase == "shared"


# ---------------------------------------------------------------------------- refusals
@pytest.mark.parametrize("kwargs, match", [
    ({"bits": 0}, r"'bits' parameter .* \[1, 64\]. Got 0"),
    ({"bits": 65}, r"'bits' parameter .* \[1, 64\]. Got 65"),
    ({"bits": 20.0}, "'bits' parameter"),
    ({"bits": True}, "'bits' parameter"),
    ({"provider_ids": ("a", "b", "a")}, r"unique; \['a'\] appear"),
    ({"provider_ids": ("a",)}, "at least 2 providers"),
    ({"provider_ids": ("a", "")}, "non-empty strings"),
    ({"threshold": 2}, r"at least ⌊N/2⌋ \+ 1 = 3 for N = 5 .* Got 2"),
    ({"threshold": 6}, r"'threshold' .* \[1, 5\]"),
    ({"threshold": 4, "min_providers": 3}, r"'min_providers' .* \[4, 5\]"),
    ({"min_providers": 1}, r"'min_providers' .* \[2, inf\)"),
    ({"length": 0}, r"'length' .* \[1, inf\)"),
])
def test_invalid_agreements_are_refused(kwargs, match):
    settings = {"provider_ids": ("a", "b", "c", "d", "e"), "bits": 32, "length": 3, **kwargs}
    with pytest.raises(ValueError, match=match):
        SecAggConfig(**settings)


def test_a_low_threshold_only_when_explicitly_allowed():
    config = SecAggConfig(("a", "b", "c", "d", "e"), 32, 3, threshold=2,
                          allow_low_threshold=True)
    assert (config.threshold, config.min_providers) == (2, 2)
    xs = _inputs(5, 32, 3)
    result = run_secure_aggregation(xs, 32, threshold=2, allow_low_threshold=True,
                                    dropouts={3: list(xs)[:3]})
    assert np.array_equal(result.total, _exact_sum((xs[p] for p in result.survivors), 32))


@pytest.mark.parametrize("inputs, match", [
    ({"a": np.zeros(3, np.uint64), "b": np.zeros(4, np.uint64)}, "same length"),
    ({"a": np.zeros(3, np.uint64), "b": np.zeros((3, 1), np.uint64)}, "same length"),
    ({"a": np.zeros(3), "b": np.zeros(3)}, "dtype uint64"),
    ({"a": np.zeros(3, np.uint64), "b": np.full(3, 2**20, np.uint64)}, "residues modulo 2"),
])
def test_invalid_inputs_are_refused(inputs, match):
    with pytest.raises(ValueError, match=match):
        run_secure_aggregation(inputs, 20)


def test_unknown_dropouts_are_refused():
    with pytest.raises(ValueError, match="not inputs"):
        run_secure_aggregation(_inputs(3, 8, 2), 8, dropouts={3: ["nobody"]})


# ---------------------------------------------------------------------------- the mask generator
def test_mask_stream_is_a_keyed_stream_modulo_two_to_the_b():
    secret = bytes(range(32))
    info = mask_info("s", 0, "self", "a")
    a = mask_stream(secret, 1000, 64, info=info)
    assert np.array_equal(a, mask_stream(secret, 1000, 64, info=info))
    assert not np.array_equal(a, mask_stream(secret, 1000, 64, info=mask_info("s", 1, "self",
                                                                               "a")))
    assert np.array_equal(mask_stream(secret, 1000, 20, info=info), a & np.uint64(2**20 - 1))
    assert int(a.max()) >= 2**63  # the full 64-bit range
    assert mask_info("s", 0, "pairwise", "a", "b") != mask_info("s", 0, "pairwise", "ab", "")


def test_flowers_mask_generator_has_32_bits_of_seed_which_ours_does_not():
    """Why masking.py does not use flwr's pseudo_rand_gen: it XOR-folds the seed to 32 bits,
    so two seeds with the same fold give the same mask (2^32 seeds to try)."""
    from flwr.common.secure_aggregation.secaggplus_utils import pseudo_rand_gen

    seed = bytes(range(1, 33))
    flip = b"\x5a\x11\x07\x99"
    twin = bytes(a ^ b for a, b in zip(seed, flip * 2 + bytes(24), strict=True))
    assert twin != seed
    same = [pseudo_rand_gen(s, 2**31, [(100,)])[0] for s in (seed, twin)]
    assert np.array_equal(*same)
    info = mask_info("s", 0, "self", "a")
    assert not np.array_equal(mask_stream(seed, 100, 31, info=info),
                              mask_stream(twin, 100, 31, info=info))
