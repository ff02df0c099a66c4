"""DPS-PCA on Flower (``flwr``, Message API): a thin adapter around :mod:`.protocol`.

* ``client_app`` (one per provider, run by a ``flower-supernode`` on the provider's machine)
  only answers ``query`` messages: it rebuilds the provider's
  :class:`~privpca.federated.protocol.ProviderState` from the SuperNode's ``--node-config``
  (its data file, its (ε, δ, T), its release-count file) and returns
  ``ProviderState.answer_query`` — or a Flower ``Error`` reply saying why it refused.
* ``server_app`` (started by ``flwr run`` on the SuperLink) only loops: send the
  :class:`~privpca.federated.protocol.ServerState`'s query to the providers still in the run,
  collect replies until a timeout, apply the dropout policy, aggregate; then it writes the
  result (JSON) to ``output-path``.

Every privacy decision is taken by the provider's own configuration, never by the server's
messages: a provider with ``n-rounds = T`` answers at most T queries for its data, ever (the
count lives in its ``state-path`` file, because Flower starts a fresh ClientApp process for
every message and a fresh context for every run).

Provider node config (``flower-supernode --node-config "..."``; ``privpca provider`` builds it):
``data-path`` (.npy or .csv), ``provider-id``, ``epsilon``, ``delta``, ``n-rounds``,
``n-components``, ``data-norm``, ``state-path``, and optionally ``noise-seed`` (experiments
only). Server run config (``[tool.flwr.app.config]``, ``privpca server`` writes it):
``n-features``, ``n-components``, ``n-nonzero``, ``n-rounds``, ``n-providers``, ``seed``,
``init``, ``on-dropout``, ``round-timeout``, ``wait-timeout``, ``output-path``.
See ``docs/DISTRIBUTED.md``.
"""

from __future__ import annotations

import json
import time
import traceback
from pathlib import Path
from typing import Any

import numpy as np
from flwr.app import Array, ArrayRecord, ConfigRecord, Context, Error, Message, RecordDict
from flwr.clientapp import ClientApp
from flwr.serverapp import Grid, ServerApp

from privpca.exceptions import BudgetExceededError
from privpca.federated.protocol import (
    FileReleaseCounter,
    ProviderDropoutError,
    ProviderState,
    Query,
    QueryRefusedError,
    Reply,
    ServerState,
    provider_privacy_record,
    select_replies,
)

__all__ = [
    "client_app",
    "load_provider",
    "query_to_message_content",
    "run_server",
    "server_app",
    "write_app_dir",
]

MESSAGE_TYPE = "query"
#: Error codes of refusals (Flower's own codes are below 100).
REFUSED_MALFORMED = 101
REFUSED_BUDGET = 102
PROVIDER_FAILED = 103
POLL_INTERVAL = 0.05

client_app = ClientApp()
server_app = ServerApp()


# --- serialisation -------------------------------------------------------------------------------


def query_to_message_content(query: Query) -> RecordDict:
    """A :class:`Query` as Flower records (support and block as arrays)."""
    return RecordDict({
        "query": ArrayRecord({
            "support": Array(np.asarray(query.support, dtype=np.int64)),
            "block": Array(np.asarray(query.block, dtype=np.float64)),
        }),
        "meta": ConfigRecord({"round": int(query.round), "n-features": int(query.n_features)}),
    })


def _query_from_content(content: RecordDict) -> Query:
    try:
        arrays = content.array_records["query"]
        meta: dict[str, Any] = dict(content.config_records["meta"])
        support = arrays["support"].numpy()
        block = arrays["block"].numpy()
        return Query(round=int(meta["round"]), support=support, block=block,
                     n_features=int(meta["n-features"]))
    except Exception as exc:  # any missing or mistyped field
        raise QueryRefusedError(f"Malformed query message: {exc!r}") from exc


def _reply_to_content(reply: Reply, provider: ProviderState) -> RecordDict:
    return RecordDict({
        "answer": ArrayRecord({"product": Array(reply.product)}),
        "meta": ConfigRecord({
            "provider-id": reply.provider_id,
            "round": reply.round,
            "n-samples": reply.n_samples,
            "epsilon": provider.epsilon,
            "delta": provider.delta,
            "n-rounds": provider.n_rounds,
            "releases": provider.counter.used,
            "n-clipped": provider.n_clipped,
            "data-norm": provider.data_norm,
        }),
    })


def _reply_from_content(content: RecordDict) -> tuple[Reply, dict[str, Any]]:
    meta: dict[str, Any] = dict(content.config_records["meta"])
    product = content.array_records["answer"]["product"].numpy()
    reply = Reply(str(meta["provider-id"]), int(meta["round"]), int(meta["n-samples"]), product)
    return reply, meta


# --- provider (ClientApp) ------------------------------------------------------------------------


def _load_data(path: str) -> np.ndarray:
    p = Path(path)
    if p.suffix == ".npy":
        return np.asarray(np.load(p, mmap_mode="r", allow_pickle=False), dtype=np.float64)
    return np.loadtxt(p, delimiter=",", ndmin=2)


def load_provider(node_config: dict[str, Any]) -> ProviderState:
    """The provider described by a SuperNode's node config (see the module docstring)."""
    try:
        X = _load_data(str(node_config["data-path"]))
        k = int(node_config["n-components"])
        epsilon, delta = float(node_config["epsilon"]), float(node_config["delta"])
        T = int(node_config["n-rounds"])
        data_norm = float(node_config.get("data-norm", 1.0))
        pid = str(node_config.get("provider-id", Path(str(node_config["data-path"])).stem))
        state_path = str(node_config["state-path"])
    except KeyError as exc:
        raise ValueError(f"Provider node config lacks {exc}; see privpca provider --help.") from exc
    seed = node_config.get("noise-seed")
    agreement = {"data-path": str(Path(str(node_config["data-path"])).resolve()),
                 "shape": list(X.shape), "epsilon": epsilon, "delta": delta, "n-rounds": T,
                 "n-components": k, "data-norm": data_norm}
    counter = FileReleaseCounter(state_path, T, agreement)
    return ProviderState(X, n_components=k, epsilon=epsilon, delta=delta, n_rounds=T,
                         data_norm=data_norm, noise_seed=None if seed is None else int(seed),
                         provider_id=pid, counter=counter)


@client_app.query()
def answer(msg: Message, context: Context) -> Message:
    """Answer one query with the provider's noised product, or refuse with a reason."""
    try:
        provider = load_provider(dict(context.node_config))
        query = _query_from_content(msg.content)
        reply = provider.answer_query(query)
    except QueryRefusedError as exc:
        return Message(Error(REFUSED_MALFORMED, f"refused: {exc}"), reply_to=msg)
    except BudgetExceededError as exc:
        return Message(Error(REFUSED_BUDGET, f"refused: {exc}"), reply_to=msg)
    except Exception as exc:  # the provider's own failure: say so, release nothing
        return Message(Error(PROVIDER_FAILED, f"provider failed: {exc!r}"), reply_to=msg)
    return Message(_reply_to_content(reply, provider), reply_to=msg)


# --- server (ServerApp) --------------------------------------------------------------------------


def run_server(grid: Grid, config: dict[str, Any]) -> dict[str, Any]:
    """Run DPS-PCA over ``grid``; return (and write to ``output-path``) the result.

    Only loops send/receive and calls :class:`ServerState`. Failures become
    ``{"status": "error", "error": ...}`` in the result, never a silent stop.
    """
    d, k = int(config["n-features"]), int(config["n-components"])
    s_hat = int(config.get("n-nonzero", d))
    T, N = int(config["n-rounds"]), int(config["n-providers"])
    seed = int(config["seed"]) if int(config.get("seed", -1)) >= 0 else None
    on_dropout = str(config.get("on-dropout", "error"))
    round_timeout = float(config.get("round-timeout", 120.0))
    wait_timeout = float(config.get("wait-timeout", 120.0))
    result: dict[str, Any] = {"status": "running", "rounds_completed": 0, "round_seconds": [],
                              "dropped": {}, "providers": {}}
    try:
        nodes = _wait_for_nodes(grid, N, wait_timeout)
        rng = np.random.default_rng(seed)
        server = ServerState(d, k, s_hat, T,
                             ServerState.initial(d, k, s_hat, str(config.get("init", "random")),
                                                 rng))
        node_to_pid: dict[int, str] = {}
        active = list(nodes)
        while not server.finished:
            t0 = time.perf_counter()
            replies, reasons = _one_round(grid, active, server.query(), round_timeout)
            metas = {}
            for node, (reply, meta) in replies.items():
                node_to_pid[node] = reply.provider_id
                metas[reply.provider_id] = meta
            expected = [node_to_pid.get(n, f"node-{n}") for n in active]
            named_reasons = {node_to_pid.get(n, f"node-{n}"): r for n, r in reasons.items()}
            used = select_replies(server, expected, [r for r, _ in replies.values()],
                                  on_dropout=on_dropout, reasons=named_reasons)
            active = [n for n in active if node_to_pid.get(n, f"node-{n}") not in server.dropped]
            for pid, meta in metas.items():
                result["providers"][pid] = meta
            server.aggregate(used)
            result["rounds_completed"] = server.round
            result["round_seconds"].append(time.perf_counter() - t0)
        result["dropped"] = dict(server.dropped)
        result.update(status="ok", components=server.components().tolist(),
                      history=[Q.T.tolist() for Q in server.history],
                      privacy=_privacy(result["providers"], k, server.dropped))
    except (ProviderDropoutError, TimeoutError, ValueError) as exc:
        result.update(status="error", error=str(exc))
    except Exception as exc:  # pragma: no cover - reported, not swallowed
        result.update(status="error", error=f"{exc!r}\n{traceback.format_exc()}")
    output = config.get("output-path")
    if output:
        Path(str(output)).write_text(json.dumps(result))
    print(f"DPS-PCA server: {result['status']}; rounds {result['rounds_completed']}"
          + (f"; error: {result.get('error')}" if result["status"] != "ok" else ""), flush=True)
    return result


def _privacy(providers: dict[str, dict[str, Any]], k: int, dropped: dict[str, int]) -> dict:
    out = {}
    for pid, meta in providers.items():
        rec = provider_privacy_record(
            epsilon=float(meta["epsilon"]), delta=float(meta["delta"]),
            n_rounds=int(meta["n-rounds"]), n_components=k, data_norm=float(meta["data-norm"]),
            n_samples=int(meta["n-samples"]), n_clipped=int(meta["n-clipped"]),
            releases=int(meta["releases"]),
            notes=f"Dropped out at round {dropped[pid]}." if pid in dropped else "",
        )
        out[pid] = rec.to_dict()
    return out


def _wait_for_nodes(grid: Grid, n: int, timeout: float) -> list[int]:
    end = time.monotonic() + timeout
    while True:
        nodes = sorted(grid.get_node_ids())
        if len(nodes) >= n:
            return nodes[:n] if len(nodes) == n else nodes
        if time.monotonic() > end:
            raise TimeoutError(f"Only {len(nodes)} of {n} providers connected within {timeout} s.")
        time.sleep(0.2)


def _one_round(grid: Grid, nodes: list[int], query: Query, timeout: float
               ) -> tuple[dict[int, tuple[Reply, dict[str, Any]]], dict[int, str]]:
    """Send ``query`` to ``nodes``; collect replies (by node) and reasons for the others."""
    content = query_to_message_content(query)
    messages = [Message(content=content, dst_node_id=n, message_type=MESSAGE_TYPE,
                        group_id=str(query.round)) for n in nodes]
    pending: dict[str, int] = {}
    for msg_id, node in zip(grid.push_messages(messages), nodes, strict=True):
        pending[msg_id] = node
    replies: dict[int, tuple[Reply, dict[str, Any]]] = {}
    reasons: dict[int, str] = {}
    end = time.monotonic() + timeout
    while pending and time.monotonic() < end:
        for msg in grid.pull_messages(list(pending)):
            reply_to = msg.metadata.reply_to_message_id
            if reply_to not in pending:
                continue
            node = pending.pop(reply_to)
            if msg.has_error():
                reasons[node] = f"error {msg.error.code}: {msg.error.reason}"
            else:
                replies[node] = _reply_from_content(msg.content)
        time.sleep(POLL_INTERVAL)
    for node in pending.values():
        reasons[node] = f"no answer within round-timeout={timeout:g} s"
    return replies, reasons


@server_app.main()
def main(grid: Grid, context: Context) -> None:
    """ServerApp entry point: ``run_server`` with the run config."""
    run_server(grid, dict(context.run_config))


# --- app directory -------------------------------------------------------------------------------

_PYPROJECT = """[build-system]
requires = ["setuptools>=69"]
build-backend = "setuptools.build_meta"

[project]
name = "privpca-dpspca"
version = "1.0.0"
description = "DPS-PCA (Ge et al. 2018) server and provider apps of privpca"
license = "BSD-3-Clause"
dependencies = []

[tool.flwr.app]
publisher = "privpca"

[tool.flwr.app.components]
serverapp = "privpca.federated.flower_app:server_app"
clientapp = "privpca.federated.flower_app:client_app"

[tool.flwr.app.config]
{config}
"""


def write_app_dir(path: str | Path, run_config: dict[str, Any]) -> Path:
    """Write the Flower App directory (a ``pyproject.toml`` naming privpca's apps) for ``flwr run``.

    The apps' code is privpca itself, which must be installed (``privpca[federated]``) where
    the SuperLink and the SuperNodes run; the app directory only carries the run config.
    """
    out = Path(path)
    out.mkdir(parents=True, exist_ok=True)
    lines = []
    for key, value in run_config.items():
        lines.append(f"{key} = {json.dumps(value)}")
    (out / "pyproject.toml").write_text(_PYPROJECT.format(config="\n".join(lines)))
    return out
