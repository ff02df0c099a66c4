"""DPS-PCA under secure aggregation over Flower (issue 39), without processes: the server's loop
(:func:`privpca.federated.flower_app.run_server`) and the providers' ClientApp handlers run in
this process, a fake grid carrying the records between them (Flower's ``Message`` replaced by a
recorder). The same seeds give bitwise the in-process ``DPSPCA(aggregation="secure")``; what
the providers send never holds their residues in the clear; dropouts below ``min_providers``
abort with nothing opened; the provider refuses what does not match its own agreement. The
runs with real processes (``privpca server``/``privpca provider``) are the slow tests of
tests/test_federated_flower.py.
"""

from __future__ import annotations

import itertools
import json
import threading
import types
import warnings

import numpy as np
import pytest

pytest.importorskip("flwr")

from flwr.app import Error, RecordDict

from privpca import DPSPCA, PrivacyLedger
from privpca.datasets import make_dpspca_data
from privpca.decomposition.distributed import dpspca_provider_seeds
from privpca.federated import flower_app as fa
from privpca.federated import flower_secagg as fs
from privpca.federated import flower_wire as fw

D, K, S_HAT, T = 30, 2, 10, 3
EPS, DELTA = 2.0, 1e-5


class FakeGrid:
    """Routes each message to the node's ClientApp handler at once; records what travelled.

    ``silent``: node → the message types it no longer answers (or ``"*"``: none), from the
    ``after``-th message of that type on (0: the first).
    """

    def __init__(self, configs: dict[int, dict]) -> None:
        self.configs = configs
        self.replies: dict[str, object] = {}
        self.sent: list[tuple[int, str, RecordDict]] = []
        self.received: list[tuple[int, str, RecordDict]] = []
        self.silent: dict[int, tuple[str, int]] = {}
        self.seen: dict[tuple[int, str], int] = {}
        self.ids = itertools.count()

    def get_node_ids(self):
        return list(self.configs)

    def push_messages(self, messages):
        out = []
        for msg in messages:
            msg_id = f"m{next(self.ids)}"
            msg.metadata.message_id = msg_id
            node, mtype = msg.metadata.dst_node_id, msg.metadata.message_type
            self.sent.append((node, mtype, msg.content))
            n = self.seen[node, mtype] = self.seen.get((node, mtype), 0) + 1
            rule = self.silent.get(node)
            out.append(msg_id)
            if rule is not None and rule[0] in ("*", mtype) and n > rule[1]:
                continue
            action = mtype.partition(".")[2]
            handler = getattr(fa, f"answer_{action}" if action else "answer")
            reply = handler(msg, types.SimpleNamespace(node_config=self.configs[node]))
            if not reply.has_error():
                self.received.append((node, mtype, reply.content))
            self.replies[msg_id] = reply
        return out

    def pull_messages(self, ids):
        return [self.replies.pop(i) for i in list(ids) if i in self.replies]


def _message(*args, **kwargs):
    """Flower's Message outside a run: the server's (content, node, type) or a reply."""
    if "reply_to" in kwargs:
        body = args[0]
        error = isinstance(body, Error)
        return types.SimpleNamespace(
            content=None if error else body, error=body if error else None,
            has_error=lambda: error,
            metadata=types.SimpleNamespace(
                reply_to_message_id=kwargs["reply_to"].metadata.message_id))
    return types.SimpleNamespace(content=kwargs["content"], metadata=types.SimpleNamespace(
        dst_node_id=kwargs["dst_node_id"], message_type=kwargs["message_type"]))


@pytest.fixture
def flower(monkeypatch):
    monkeypatch.setattr(fa, "Message", _message)
    monkeypatch.setattr(fa, "HANDSHAKE_GRACE", 0.0)
    monkeypatch.setattr(fs, "_SESSIONS", {})
    event = threading.Event()
    event.set()  # the long-running provider (flower_node), as `privpca provider` runs it
    monkeypatch.setattr(fs, "_IN_PROCESS", event)
    return event


@pytest.fixture(scope="module")
def split():
    X, _ = make_dpspca_data(1_200, D, K, 4, random_state=3)
    return [X[:300], X[300:700], X[700:]]


def _configs(tmp_path, parts, seed, **extra):
    seeds = dpspca_provider_seeds(seed, parts[0].shape[1], K, len(parts),
                                  n_nonzero=extra.pop("n_nonzero", S_HAT))
    configs = {}
    for i, part in enumerate(parts):
        path = tmp_path / f"p{i}.npy"
        np.save(path, part)
        configs[10 + i] = {
            "data-path": str(path), "provider-id": str(i), "n-components": K, "epsilon": EPS,
            "delta": DELTA, "n-rounds": T, "data-norm": 1.0, "centering": "none",
            "state-path": str(tmp_path / f"state-{i}.json"), "noise-seed": seeds[i],
            "aggregation": "secure", **extra}
    return configs


def _run(grid, tmp_path, seed, n=3, **extra):
    config = {"n-features": D, "n-components": K, "n-nonzero": S_HAT, "n-rounds": T,
              "n-providers": n, "seed": seed, "centering": "none", "data-norm": 1.0,
              "aggregation": "secure", "round-timeout": 0.05, "wait-timeout": 1.0,
              "poll-interval": 0.001, "output-path": str(tmp_path / "result.json"), **extra}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fa.run_server(grid, config)


def _booked(state) -> int:
    """Power answers booked in a provider's state file (0: none, or no file yet)."""
    return json.loads(state.read_text())["by-kind"]["query"] if state.exists() else 0


def _reference(parts, seed, **params):
    params = {"n_nonzero": S_HAT, "centering": None, "data_norm": 1.0, **params}
    est = DPSPCA(n_components=K, epsilon=EPS, delta=DELTA, n_iter=T, random_state=seed,
                 aggregation="secure", ledger=PrivacyLedger(), **params)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return est.fit_providers(parts)


def test_secure_run_matches_in_process_estimator_bitwise(flower, split, tmp_path):
    seed = 11
    grid = FakeGrid(_configs(tmp_path, split, seed))
    result = _run(grid, tmp_path, seed)
    assert result["status"] == "ok", result.get("error")
    ref = _reference(split, seed)
    np.testing.assert_array_equal(np.array(result["components"]), ref.components_)
    np.testing.assert_array_equal(np.array(result["history"]), ref.history_)
    assert result["noise_level"] == pytest.approx(ref.noise_level_, rel=1e-12)
    secure = result["secure"]
    assert (secure["min_providers"], secure["colluders"], secure["max_rows"]) == (3, 0, 500)
    assert {int(j): e for j, e in secure["collusion_epsilons"].items()} == \
        pytest.approx(ref.collusion_epsilons_, rel=1e-12)
    # Every power round: the step and SecAgg's three further stages, to every provider.
    types_sent = [t for _, t, _ in grid.sent if t != fa.HELLO_TYPE]
    assert types_sent == T * (["query"] * 3 + ["query.secagg_roster"] * 3
                              + ["query.secagg_mask"] * 3 + ["query.secagg_unmask"] * 3)
    assert len(result["round_bytes"]) == T
    assert all(set(r) == {"0", "1", "2"} and min(min(v) for v in r.values()) > 0
               for r in result["round_bytes"])
    for i in range(3):  # T power answers each, and no SecAgg secret left behind
        assert json.loads((tmp_path / f"state-{i}.json").read_text())["by-kind"]["query"] == T
    assert fs._SESSIONS == {}


def test_the_residues_never_travel_in_the_clear(flower, split, tmp_path):
    """A provider's first share reply, recomputed from its seed, is in none of its records:
    it announced a plan and keys, then sent the residues masked."""
    from privpca.federated.protocol import ProviderState, ServerState
    from privpca.mechanisms.randomness import check_random_state

    seed = 11
    configs = _configs(tmp_path, split, seed)
    grid = FakeGrid(configs)
    assert _run(grid, tmp_path, seed)["status"] == "ok"
    agreement = fs.SecureAgreement(3, 3, 0, 500, 1_200)
    start = ServerState.initial(D, K, S_HAT, "random", check_random_state(seed))
    query = ServerState(D, K, S_HAT, T, start).query()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        share = ProviderState(split[0], n_components=K, epsilon=EPS, delta=DELTA, n_rounds=T,
                              data_norm=1.0, noise_seed=configs[10]["noise-seed"],
                              provider_id="0", secure=agreement).answer_query(query)
    words = share.residues.tobytes()
    sent_by_0 = [c for node, t, c in grid.received if node == 10 and t != fa.HELLO_TYPE]
    masked = [c for _, t, c in grid.received if t == "query.secagg_mask"]
    assert len(sent_by_0) == 4 * T and len(masked) == 3 * T
    for content in sent_by_0:
        for value in content.config_records["meta"].values():
            for blob in value if isinstance(value, list) else [value]:
                assert not (isinstance(blob, bytes) and words in blob)


def test_dropping_below_min_providers_aborts_with_nothing_opened(flower, split, tmp_path):
    seed = 5
    grid = FakeGrid(_configs(tmp_path, split, seed))
    grid.silent[12] = ("query.secagg_mask", 0)  # provider 2 never sends its masked input
    result = _run(grid, tmp_path, seed, **{"on-dropout": "continue"})
    assert result["status"] == "error"
    assert "Secure aggregation aborted at stage 3" in result["error"]
    assert "fewer than min_providers=3" in result["error"]
    assert "Nothing was unmasked" in result["error"]
    assert "components" not in result and result["rounds_completed"] == 0
    # No unmasking request was ever sent: nothing of any provider was opened.
    assert not [t for _, t, _ in grid.sent if t == "query.secagg_unmask"]
    # Under the default policy the first missing message stops the run.
    (tmp_path / "b").mkdir()
    grid = FakeGrid(_configs(tmp_path / "b", split, seed))
    grid.silent[11] = ("query.secagg_roster", 1)  # provider 1 goes silent in round 2
    result = _run(grid, tmp_path / "b", seed)
    assert result["status"] == "error" and result["rounds_completed"] == 1
    assert "did not answer secure aggregation's stage 2" in result["error"]
    assert "components" not in result


def test_dropouts_above_min_providers_are_survived(flower, split, tmp_path):
    """m = 2 of 3: a provider lost at stage 3 of round 2 is left out of that sum and later
    ones; its shares let the server remove its pairwise masks."""
    seed = 5
    grid = FakeGrid(_configs(tmp_path, split, seed, **{"min-providers": 2}))
    grid.silent[12] = ("query.secagg_mask", 1)  # from round 2 on
    result = _run(grid, tmp_path, seed, **{"min-providers": 2, "on-dropout": "continue"})
    assert result["status"] == "ok", result.get("error")
    assert result["dropped"] == {"2": 2}
    assert result["rounds_completed"] == T
    comps = np.array(result["components"])
    np.testing.assert_allclose(comps @ comps.T, np.eye(K), atol=1e-10)


def test_release_pipeline_secure_run_matches_in_process_bitwise(flower, tmp_path):
    """Private centring and bound under secure aggregation: the union's searches by opened
    counts, the mean rounds' sums, the T answers and the variances, all opened by SecAgg."""
    rng = np.random.default_rng(2)
    X = rng.standard_normal((3_000, 6)) @ rng.standard_normal((6, 6)) * 3 + 5
    parts = [X[:800], X[800:1900], X[1900:]]
    seed = 4
    configs = _configs(tmp_path, parts, seed, n_nonzero=6, **{"centering": "private",
                                                              "data-norm": "auto",
                                                              "show-data-warnings": True})
    grid = FakeGrid(configs)
    result = _run(grid, tmp_path, seed, **{"n-features": 6, "n-nonzero": 6,
                                           "centering": "private", "data-norm": "auto"})
    assert result["status"] == "ok", result.get("error")
    ref = _reference(parts, seed, n_nonzero=None, centering="private", data_norm="auto")
    np.testing.assert_array_equal(np.array(result["components"]), ref.components_)
    np.testing.assert_array_equal(np.array(result["mean"]), ref.mean_)
    np.testing.assert_array_equal(np.array(result["explained_variance"]),
                                  ref.explained_variance_)
    assert {t for _, t, _ in grid.sent} >= {"query.count", "query.sum", "query.prepare",
                                           "query.variance", "query.secagg_unmask"}


def test_a_provider_too_small_for_its_own_plan_joins_a_secure_run(flower, tmp_path):
    """Under secure aggregation the searches are the union's: a provider of 60 rows (too few
    for a private search of its own) passes the handshake and the run equals the estimator's."""
    rng = np.random.default_rng(5)
    X = rng.standard_normal((3_000, 6)) @ rng.standard_normal((6, 6)) * 3 + 5
    parts = [X[:60], X[60:1600], X[1600:]]
    settings = {"centering": "private", "data-norm": "auto"}
    configs = _configs(tmp_path, parts, 4, n_nonzero=6, **settings)
    result = _run(FakeGrid(configs), tmp_path, 4, **{"n-features": 6, "n-nonzero": 6,
                                                       **settings})
    assert result["status"] == "ok", result.get("error")
    ref = _reference(parts, 4, n_nonzero=None, centering="private", data_norm="auto")
    np.testing.assert_array_equal(np.array(result["components"]), ref.components_)


def test_stock_supernode_refuses_secure_steps(flower, split, tmp_path):
    flower.clear()  # a fresh process per message: nothing survives between them
    configs = _configs(tmp_path, split, 1)
    result = _run(FakeGrid(configs), tmp_path, 1)
    assert result["status"] == "error"
    assert "Flower's stock SuperNode starts a fresh process per message" in result["error"]
    # Asked anyway, the provider refuses the step before anything is booked.
    content = fw.put_secure_header(
        fa.message_content(fa.Query(round=1, support=np.arange(D),
                                    block=np.eye(D)[:, :K], n_features=D)),
        fw.SecureHeader(3, 3, 0, 500, 1_200, "s", ("0", "1", "2")))
    reply = fa.answer(types.SimpleNamespace(content=content, metadata=types.SimpleNamespace(
        message_id="m")), types.SimpleNamespace(node_config=configs[10]))
    assert reply.has_error() and reply.error.reason.startswith("bad-agreement")
    assert _booked(tmp_path / "state-0.json") == 0


@pytest.mark.parametrize("header, why", [
    ((3, 2, 0, 500, 1_200, "s", ("0", "1", "2")), "min-providers"),
    ((3, 3, 1, 500, 1_200, "s", ("0", "1", "2")), "colluders"),
    ((3, 3, 0, 100, 1_200, "s", ("0", "1", "2")), "max-rows"),
    ((3, 3, 0, 500, 1_200, "s", ("1", "2")), "include it"),
    ((3, 3, 0, 500, 1_200, "s", ("0", "0", "2")), "once each"),
])
def test_provider_refuses_a_secure_step_of_another_agreement(flower, split, tmp_path, header,
                                                             why, caplog):
    configs = _configs(tmp_path, split, 1, **{"show-data-warnings": True})
    content = fw.put_secure_header(
        fa.message_content(fa.Query(round=1, support=np.arange(D), block=np.eye(D)[:, :K],
                                    n_features=D)), fw.SecureHeader(*header))
    reply = fa.answer(types.SimpleNamespace(content=content, metadata=types.SimpleNamespace(
        message_id="m")), types.SimpleNamespace(node_config=configs[10]))
    assert reply.has_error() and reply.error.reason.startswith("query-refused")
    assert why in caplog.text
    assert _booked(tmp_path / "state-0.json") == 0
    # A local-noise step (no header) is refused by a secure provider too.
    plain = fa.answer(types.SimpleNamespace(
        content=fa.message_content(fa.Query(round=1, support=np.arange(D),
                                            block=np.eye(D)[:, :K], n_features=D)),
        metadata=types.SimpleNamespace(message_id="m")),
        types.SimpleNamespace(node_config=configs[10]))
    assert plain.has_error() and plain.error.reason.startswith("query-refused")


def test_provider_refuses_a_step_that_changes_the_runs_size(flower, split, tmp_path):
    """The budget split follows Σnᵢ (and N, m, max-rows): a server that states another size
    in a later step would have the provider answer two plans' parts. The first secure step
    pins the size in the state file; a later step of another size is refused, nothing booked."""
    from privpca.federated.flower_provider import load_provider
    from privpca.federated.protocol import QueryRefusedError

    config = _configs(tmp_path, split, 1)[10]
    first = fw.SecureHeader(3, 3, 0, 500, 1_200, "s", ("0", "1", "2"))
    load_provider(config, first, step=True)
    load_provider(config, first, step=True)  # the same run again: answered
    for changed in (fw.SecureHeader(3, 3, 0, 500, 1_900, "s", ("0", "1", "2")),
                    fw.SecureHeader(3, 3, 0, 600, 1_200, "s", ("0", "1", "2"))):
        with pytest.raises(QueryRefusedError, match="mix two budget plans"):
            load_provider(config, changed, step=True)
    assert _booked(tmp_path / "state-0.json") == 0


def test_provider_refuses_a_roster_with_another_plan(flower, split, tmp_path):
    """The server's roster carries the plan it will decode with: a provider whose own plan
    differs (here: decoded as if sized for 2 survivors) refuses and forgets its session."""
    import dataclasses

    configs = _configs(tmp_path, split, 1)
    grid = FakeGrid(configs)
    original = fw.secagg_content

    def tampered(message, *, session, round, plan=None):
        if plan is not None:
            plan = dataclasses.replace(plan, min_providers=2)
        return original(message, session=session, round=round, plan=plan)

    import unittest.mock

    with unittest.mock.patch.object(fs, "secagg_content", tampered):
        result = _run(grid, tmp_path, 1)
    assert result["status"] == "error"
    assert "did not answer secure aggregation's stage 2" in result["error"]
    assert "query-refused" in result["error"]
    assert fs._SESSIONS == {}  # every provider forgot its keys, seed and residues


def test_secagg_messages_travel_exactly():
    from privpca.federated.secure import (
        EncryptedShares,
        KeyRoster,
        MaskedInput,
        ShareDelivery,
        UnmaskReply,
        UnmaskRequest,
    )
    from privpca.federated.secure.messages import AdvertiseKeys, SecureAggregationRefused
    from privpca.mechanisms.distributed_gaussian import DistributedGaussianPlan

    plan = DistributedGaussianPlan(central_sigma=0.3, sensitivity=1.0 / 3, coordinates=4,
                                   min_providers=2, colluders=0, value_bound=7.5,
                                   max_providers=3)
    messages = [
        KeyRoster((AdvertiseKeys("a", b"c1", b"s1"), AdvertiseKeys("b", b"c2", b"s2"))),
        EncryptedShares("a", {"b": b"x", "c": b"y"}), ShareDelivery("b", {"a": b"x"}),
        MaskedInput("a", np.array([0, 2**63 + 5, 7, 1], dtype=np.uint64)),
        UnmaskRequest(("a", "b"), ()), UnmaskReply("a", {"a": b"1", "b": b"2"}, {}),
    ]
    for message in messages:
        content = fw.secagg_content(message, session="s", round=3,
                                    plan=plan if isinstance(message, KeyRoster) else None)
        back, session, round_, got_plan = fw.secagg_from_content(content, type(message))
        assert (session, round_) == ("s", 3)
        if isinstance(message, MaskedInput):
            assert back.masked.dtype == np.uint64
            assert back.masked.tobytes() == message.masked.tobytes()
        else:
            assert back == message
        assert got_plan == (plan if isinstance(message, KeyRoster) else None)
    with pytest.raises(SecureAggregationRefused, match="Malformed"):
        fw.secagg_from_content(fw.secagg_content(messages[1], session="s", round=0),
                               KeyRoster)


def test_cli_passes_and_refuses_secure_settings(tmp_path, monkeypatch):
    """``privpca provider/server --aggregation secure``: the settings reach the node and run
    configs; settings no run could honour are refused before anything starts."""
    import click
    from click.testing import CliRunner

    from privpca.cli import main
    from privpca.federated import flower_node

    seen: dict = {}
    monkeypatch.setattr(flower_node, "run_provider_node",
                        lambda args, address, poll: seen.setdefault("args", args))
    data = tmp_path / "x.npy"
    np.save(data, np.zeros((3, 2)))
    base = ["provider", str(data), "--superlink", "127.0.0.1:1", "--insecure", "-k", "1",
            "--provider-id", "a",
            "--epsilon", "1", "--aggregation", "secure"]
    result = CliRunner().invoke(main, [*base, "--min-providers", "3", "--colluders", "1"])
    assert result.exit_code == 0, result.output
    node_config = seen["args"][seen["args"].index("--node-config") + 1]
    assert 'aggregation="secure"' in node_config
    assert "min-providers=3" in node_config and "colluders=1" in node_config
    for extra, words in (
            (["--isolation", "subprocess"], "needs --isolation process"),
            (["--stream"], "with a streamed table needs a public data_norm"),
            (["--min-providers", "2", "--colluders", "1"], "--min-providers - 2 = 0")):
        result = CliRunner().invoke(main, [*base, *extra])
        assert result.exit_code != 0 and words in " ".join(result.output.split()), extra
    server = ["server", "--superlink", "127.0.0.1:1", "--insecure", "-d", "3", "-k", "1",
              "-N", "4", "-o", str(tmp_path / "o.json"), "--aggregation", "secure"]
    result = CliRunner().invoke(main, [*server, "--min-providers", "2"])
    assert result.exit_code != 0 and "strict majority" in result.output

    def capture(path, config):  # the run config privpca server would submit; no flwr run
        seen["config"] = config
        raise click.exceptions.Exit(0)

    monkeypatch.setattr("privpca.federated.flower_app.write_app_dir", capture)
    result = CliRunner().invoke(main, [*server, "--min-providers", "3", "--max-rows", "900"])
    assert result.exit_code == 0, result.output
    assert {k: seen["config"][k] for k in ("aggregation", "min-providers", "colluders",
                                           "max-rows")} == {
        "aggregation": "secure", "min-providers": 3, "colluders": 0, "max-rows": 900}
