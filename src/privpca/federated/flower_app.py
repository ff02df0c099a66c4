"""DPS-PCA on Flower (``flwr``, Message API): a thin adapter around :mod:`.protocol`.

* ``client_app`` (one per provider, run by a ``flower-supernode`` on the provider's machine)
  only answers the protocol's messages: ``query`` (a power round), ``query.mean`` (a round of
  the private mean), ``query.prepare`` (the broadcast mean: centre, bound, clip) and
  ``query.variance`` (the variances along the final components). It rebuilds the provider's
  :class:`~privpca.federated.protocol.provider.ProviderState` from the SuperNode's
  ``--node-config`` (its data file, its (ε, δ, T) and pipeline settings, its state file) and
  returns ``ProviderState.handle`` — or a Flower ``Error`` reply with one of the fixed codes
  of :data:`~privpca.federated.protocol.failures.PROVIDER_FAILURES` (``input-refused``,
  ``over-budget``, …), never the error's text: that names cells, rows and files of the
  provider's data. The text goes to the provider's own log, and only when its node config has
  ``show-data-warnings = true`` (``privpca provider --show-data-warnings``: its stderr is then
  for the data holder only).
* ``server_app`` (started by ``flwr run`` on the SuperLink) only loops: send the
  :class:`~privpca.federated.protocol.server.ServerState`'s next message to the providers still
  in the run, collect replies until a timeout, apply the dropout policy, let the server combine
  them; then it writes the result (JSON) to ``output-path``.

Every privacy decision is taken by the provider's own configuration, never by the server's
messages: a provider answers at most what it agreed to for its data, ever (the counts, and the
values it released and needs again — its bounds, the mean it centred on — live in its
``state-path`` file, read again for every message: Flower's stock SuperNode starts a fresh
ClientApp process for every message, :mod:`.flower_node` keeps one process, and a run gets a
fresh context either way). A provider never sends its exact number of clipped rows, and does
not print whether any row was clipped either (warnings whose presence depends on the data,
:class:`~privpca.exceptions.DataDependentWarning`, are dropped while it answers).

Provider node config (``flower-supernode --node-config "..."``; ``privpca provider`` builds it):
``data-path`` (.npy or .csv; a .parquet file or folder is streamed, as is a .npy with
``stream = true``: one pass per release, never held in memory), ``provider-id``,
``epsilon``, ``delta``, ``n-rounds``,
``n-components``, ``data-norm`` (a number or ``"auto"``; default 1.0), ``centering``
(``"private"`` or ``"none"``; default ``"none"``), ``budget-shares`` (optional JSON object),
``state-path``, and optionally ``noise-seed`` (experiments only) and ``show-data-warnings``
(log failures and data-dependent warnings in full). A node config without
``centering``/``data-norm`` keeps its meaning from before the release pipeline (the papers'
setting). Server run config (``[tool.flwr.app.config]``, ``privpca server`` writes it):
``n-features``, ``n-components``, ``n-nonzero``, ``n-rounds``, ``n-providers``, ``seed``,
``init``, ``centering`` and ``data-norm`` (the same settings as the providers': they decide
which steps the server runs; default the papers' setting), ``on-dropout``, ``round-timeout``,
``wait-timeout``, ``poll-interval`` (seconds between polls for replies; default
:data:`POLL_INTERVAL`), ``output-path``. See ``docs/DISTRIBUTED.md``.
"""

from __future__ import annotations

import json
import logging
import math
import time
import traceback
import warnings
from pathlib import Path
from typing import Any

import numpy as np
from flwr.app import ConfigRecord, Context, Error, Message, RecordDict
from flwr.clientapp import ClientApp
from flwr.serverapp import Grid, ServerApp

from privpca.exceptions import DataDependentWarning, NonFiniteInputError
from privpca.federated.flower_shim import shorten_pull_backoff
from privpca.federated.protocol import (
    PROVIDER_FAILURES,
    FileReleaseCounter,
    MeanQuery,
    MeanReply,
    PrepareMessage,
    PrepareReply,
    ProviderConfigError,
    ProviderDropoutError,
    ProviderInputError,
    ProviderState,
    Query,
    QueryRefusedError,
    Reply,
    ServerState,
    VarianceQuery,
    VarianceReply,
    failure_code,
    failure_reply,
    is_table_mode,
    provider_release_limits,
    select_replies,
)
from privpca.mechanisms.randomness import check_random_state

__all__ = [
    "client_app",
    "load_provider",
    "message_content",
    "query_to_message_content",
    "run_server",
    "server_app",
    "write_app_dir",
]

MESSAGE_TYPE = "query"
#: Flower message type of each protocol message ("query" is the power round, as before).
MESSAGE_TYPES = {Query: "query", MeanQuery: "query.mean", PrepareMessage: "query.prepare",
                 VarianceQuery: "query.variance"}
#: The handshake: a provider says who it is and what it agreed to; it releases nothing.
HELLO_TYPE = "query.hello"
#: Seconds the handshake still waits, once n providers answered, for any further answer.
HANDSHAKE_GRACE = 2.0
#: Error numbers of the failure codes (Flower's own are below 100; all of them:
#: :data:`~privpca.federated.protocol.failures.PROVIDER_FAILURES`).
REFUSED_MALFORMED = PROVIDER_FAILURES["query-refused"][0]
REFUSED_BUDGET = PROVIDER_FAILURES["over-budget"][0]
PROVIDER_FAILED = PROVIDER_FAILURES["internal-error"][0]
#: The provider's log: a failure's code always, its text only with ``show-data-warnings``.
LOG = logging.getLogger("privpca.federated.provider")
#: Seconds between the server's polls of the SuperLink for replies (run config
#: ``poll-interval``). Flower's own ``Grid.send_and_receive`` sleeps 3 s between polls; the
#: server loop pulls replies itself instead.
POLL_INTERVAL = 0.05

client_app = ClientApp()
server_app = ServerApp()


# --- serialisation -------------------------------------------------------------------------------
#
# Every message is one ConfigRecord ("meta") in which arrays travel as their exact bytes
# (little-endian, with dtype and shape beside them). Flower sends each record, array and
# array chunk as an object of its own, one HTTP request per object per hop (server →
# SuperLink → SuperNode → ClientApp and back): one record instead of up to seven objects
# halves a round's requests.

#: The dtypes an array in a message may have (anything else is a malformed message).
_WIRE_DTYPES = {"<f8": np.float64, "<i8": np.int64}


def _put_array(meta: dict[str, Any], name: str, values: Any, dtype: Any) -> None:
    a = np.ascontiguousarray(values, dtype=np.dtype(dtype).newbyteorder("<"))
    meta[name] = a.tobytes()
    meta[f"{name}.dtype"] = a.dtype.str
    meta[f"{name}.shape"] = ",".join(str(s) for s in a.shape)


def _get_array(meta: dict[str, Any], name: str) -> np.ndarray:
    data, code = meta[name], str(meta[f"{name}.dtype"])
    if not isinstance(data, bytes) or code not in _WIRE_DTYPES:
        raise ValueError(f"{name!r} is not an array of {sorted(_WIRE_DTYPES)}")
    shape = tuple(int(s) for s in str(meta[f"{name}.shape"]).split(",") if s)
    # frombuffer is exact and reshape checks the size; the copy is native and writable.
    return np.frombuffer(data, dtype=code).reshape(shape).astype(_WIRE_DTYPES[code])


def _record(meta: dict[str, Any]) -> RecordDict:
    return RecordDict({"meta": ConfigRecord(meta)})


def _meta(content: RecordDict) -> dict[str, Any]:
    return dict(content.config_records["meta"])


def query_to_message_content(query: Query) -> RecordDict:
    """A :class:`Query` as Flower records (support and block as exact bytes)."""
    meta: dict[str, Any] = {"round": int(query.round), "n-features": int(query.n_features)}
    _put_array(meta, "support", query.support, np.int64)
    _put_array(meta, "block", query.block, np.float64)
    return _record(meta)


def message_content(message: Any) -> RecordDict:
    """Any protocol message as Flower records (arrays travel as their exact bytes)."""
    if isinstance(message, Query):
        return query_to_message_content(message)
    if isinstance(message, VarianceQuery):
        return query_to_message_content(message.components)
    meta: dict[str, Any]
    if isinstance(message, MeanQuery):
        meta = {"round": int(message.round)}
        _put_array(meta, "centre", message.centre, np.float64)
        return _record(meta)
    if isinstance(message, PrepareMessage):
        meta = {"centred": message.mean is not None}
        if message.mean is not None:
            _put_array(meta, "mean", message.mean, np.float64)
        return _record(meta)
    raise TypeError(f"Not a protocol message: {type(message).__name__}")


def _query_from_content(content: RecordDict) -> Query:
    try:
        meta = _meta(content)
        return Query(round=int(meta["round"]), support=_get_array(meta, "support"),
                     block=_get_array(meta, "block"), n_features=int(meta["n-features"]))
    except Exception as exc:  # any missing or mistyped field
        raise QueryRefusedError(f"Malformed query message: {exc!r}") from exc


def _message_from_content(kind: str, content: RecordDict) -> Any:
    if kind == "query":
        return _query_from_content(content)
    if kind == "variance":
        return VarianceQuery(_query_from_content(content))
    try:
        meta = _meta(content)
        if kind == "mean":
            return MeanQuery(int(meta["round"]), _get_array(meta, "centre"))
        if kind == "prepare":
            if not bool(meta["centred"]):
                return PrepareMessage(None)
            return PrepareMessage(_get_array(meta, "mean"))
    except Exception as exc:  # any missing or mistyped field
        raise QueryRefusedError(f"Malformed {kind} message: {exc!r}") from exc
    raise QueryRefusedError(f"Unknown message kind {kind!r}.")


def _provider_meta(provider: ProviderState) -> dict[str, Any]:
    return {
        "provider-id": provider.provider_id,
        "n-samples": provider.n_samples,
        "epsilon": provider.epsilon,
        "delta": provider.delta,
        "n-rounds": provider.n_rounds,
        "releases": provider.counter.used_by("query"),
        "releases-all": provider.counter.used,
        "data-norm": provider.data_norm_,
        "noise-scale": provider.noise_scale,
        "privacy": json.dumps(provider.privacy_record(
            provider.counter.used_by("query"), disclose_clipped=False).to_dict()),
    }


#: The reply's public fields (what ``_reply_from_content`` returns as its meta).
_ARRAY_FIELDS = ("product", "mean", "packed")


def _reply_to_content(reply: Any, provider: ProviderState) -> RecordDict:
    meta = _provider_meta(provider)
    if isinstance(reply, Reply):
        meta["round"] = reply.round
        _put_array(meta, "product", reply.product, np.float64)
    elif isinstance(reply, MeanReply):
        meta.update({"round": reply.round, "bound": reply.bound})
        _put_array(meta, "mean", reply.mean, np.float64)
    elif isinstance(reply, PrepareReply):
        meta.update({"bound": reply.data_norm, "clipped-estimate": reply.clipped_estimate})
    elif isinstance(reply, VarianceReply):
        meta["total"] = reply.total
        _put_array(meta, "packed", reply.packed, np.float64)
    else:
        raise TypeError(f"Not a protocol reply: {type(reply).__name__}")
    return _record(meta)


def _reply_from_content(content: RecordDict, kind: str = "query") -> tuple[Any, dict[str, Any]]:
    meta = _meta(content)
    pid, n = str(meta["provider-id"]), int(meta["n-samples"])
    reply: Any
    if kind == "query":
        reply = Reply(pid, int(meta["round"]), n, _get_array(meta, "product"))
    elif kind == "mean":
        reply = MeanReply(pid, int(meta["round"]), n, float(meta["bound"]),
                          _get_array(meta, "mean"))
    elif kind == "prepare":
        reply = PrepareReply(pid, n, float(meta["bound"]), float(meta["clipped-estimate"]))
    elif kind == "variance":
        reply = VarianceReply(pid, n, _get_array(meta, "packed"), float(meta["total"]))
    else:
        raise ValueError(f"Unknown message kind {kind!r}")
    public = {key: value for key, value in meta.items()
              if key.partition(".")[0] not in _ARRAY_FIELDS}
    return reply, public


# --- provider (ClientApp) ------------------------------------------------------------------------


#: The last data file read (its identity and array): a long-running provider process
#: (:mod:`.flower_node`) reads its data once, not per message; a changed file is read again.
_DATA_CACHE: dict[str, tuple[tuple[int, ...], np.ndarray]] = {}


def _load_data(path: str, stream: bool = False) -> Any:
    """The provider's table: an array, or (a Parquet file or folder; a ``.npy`` with
    ``stream``) a streamed table read by one pass per release, never held in memory
    (:mod:`privpca.federated.protocol.provider`).

    A CSV has no header line (every line is a record). Raises
    :class:`~privpca.federated.protocol.failures.ProviderInputError` when the table cannot be
    read (its text, which may quote a cell, stays with the provider).
    """
    try:
        return _read_data(path, stream)
    except Exception as exc:  # unreadable, not numeric, ...: refused as input
        raise ProviderInputError(f"The provider's table {path} could not be read: "
                                 f"{exc!r}") from exc


def _read_data(path: str, stream: bool) -> Any:
    p = Path(path).resolve()
    if p.suffix == ".parquet" or p.is_dir() or (stream and p.suffix == ".npy"):
        from privpca.streaming import as_row_source

        return as_row_source(p)  # reads the metadata only (so not cached: n stays current)
    st = p.stat()
    key = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
    cached = _DATA_CACHE.get(str(p))
    if cached is not None and cached[0] == key:
        return cached[1]
    if p.suffix == ".npy":
        X = np.asarray(np.load(p, mmap_mode="r", allow_pickle=False), dtype=np.float64)
    else:
        X = np.loadtxt(p, delimiter=",", ndmin=2)
    X.flags.writeable = False  # shared by every message: no answer may change it
    _DATA_CACHE.clear()
    _DATA_CACHE[str(p)] = (key, X)
    return X


def _centering_setting(value: Any) -> str | None:
    text = str(value).lower()
    if text in ("none", "null", "false", ""):
        return None
    if text == "private":
        return "private"
    raise ValueError(f"centering must be 'private' or 'none'; got {value!r}.")


def _data_norm_setting(value: Any) -> float | str:
    if isinstance(value, str):
        if value == "auto":
            return "auto"
        return float(value)
    return float(value)


def load_provider(node_config: dict[str, Any]) -> ProviderState:
    """The provider described by a SuperNode's node config (see the module docstring).

    Raises
    ------
    ProviderConfigError
        A setting is missing or invalid (a ``ValueError``).
    ProviderInputError
        The data file cannot be read as a table of numbers (a ``ValueError``).
    NonFiniteInputError
        The table holds NaN or infinity.
    AgreementMismatchError
        The state file records another agreement.
    """
    try:
        stream = _flag(node_config.get("stream"))
        data_path = str(node_config["data-path"])
        k = int(node_config["n-components"])
        epsilon, delta = float(node_config["epsilon"]), float(node_config["delta"])
        T = int(node_config["n-rounds"])
        data_norm = _data_norm_setting(node_config.get("data-norm", 1.0))
        centering = _centering_setting(node_config.get("centering", "none"))
        shares_text = node_config.get("budget-shares")
        shares = None if shares_text in (None, "") else json.loads(str(shares_text))
        pid = str(node_config.get("provider-id", Path(data_path).stem))
        state_path = str(node_config["state-path"])
    except KeyError as exc:
        raise ProviderConfigError(
            f"Provider node config lacks {exc}; see privpca provider --help.") from exc
    except (TypeError, ValueError) as exc:  # a setting that is not a number, bad JSON
        raise ProviderConfigError(f"Provider node config: {exc}") from exc
    X = _load_data(data_path, stream)
    seed = node_config.get("noise-seed")
    agreement: dict[str, Any] = {
        "data-path": str(Path(data_path).resolve()),
        "shape": [int(X.n_samples), int(X.n_features)] if hasattr(X, "n_samples")
        else list(X.shape), "epsilon": epsilon, "delta": delta, "n-rounds": T,
        "n-components": k, "data-norm": data_norm}
    if is_table_mode(centering, data_norm):  # papers' setting: the agreement of before
        agreement.update({"centering": centering or "none", "budget-shares": shares})
    limits = provider_release_limits(T, centering, data_norm)
    counter = FileReleaseCounter(state_path, limits, agreement)
    try:
        return ProviderState(X, n_components=k, epsilon=epsilon, delta=delta, n_rounds=T,
                             data_norm=data_norm, centering=centering, budget_shares=shares,
                             noise_seed=None if seed is None else int(seed), provider_id=pid,
                             counter=counter)
    except NonFiniteInputError:
        raise
    except (TypeError, ValueError) as exc:  # its settings, checked against the table's shape
        raise ProviderConfigError(str(exc)) from exc


def _flag(value: Any) -> bool:
    """A node config's boolean (``true``, ``"true"`` or ``1``)."""
    return str(value).lower() in ("true", "1")


def _failure(exc: Exception, msg: Message, node_config: dict[str, Any]) -> Message:
    """The reply to ``msg`` when the provider cannot answer: a fixed public code only.

    The server receives :func:`~privpca.federated.protocol.failures.failure_reply` (the
    code's number and fixed wording). The provider's log gets the code and, with
    ``show-data-warnings`` in its node config, the error's text and traceback (which may quote
    the data).
    """
    number, reason = failure_reply(exc)
    code = failure_code(exc)
    if _flag(node_config.get("show-data-warnings")):
        LOG.error("privpca provider: answered %s (%s); the error, for the data holder only:\n%s",
                  code, number, "".join(traceback.format_exception(exc)))
    else:
        LOG.warning("privpca provider: answered %s (%s); the error's text may quote the data "
                    "and is not logged (restart with --show-data-warnings to log it).",
                    code, number)
    return Message(Error(number, reason), reply_to=msg)


def _answer(kind: str, msg: Message, context: Context) -> Message:
    """Answer one message with the provider's noised release, or refuse with a reason.

    Warnings whose presence depends on the provider's data (a
    :class:`~privpca.exceptions.DataDependentWarning`: rows above a public data-norm were
    clipped; NumPy's RuntimeWarnings on the values) are dropped: a provider's stderr is a log
    others may read (unless its node config has ``show-data-warnings``). A failure is
    answered with a fixed code (:func:`_failure`).
    """
    node_config = dict(context.node_config)
    try:
        with warnings.catch_warnings():
            if not _flag(node_config.get("show-data-warnings")):
                warnings.simplefilter("ignore", DataDependentWarning)
                warnings.simplefilter("ignore", RuntimeWarning)
            provider = load_provider(node_config)
            message = _message_from_content(kind, msg.content)
            reply = provider.handle(message)
            content = _reply_to_content(reply, provider)
    except Exception as exc:  # refused or failed: a fixed code, nothing released
        return _failure(exc, msg, node_config)
    return Message(content, reply_to=msg)


def _hello_content(provider: ProviderState) -> RecordDict:
    """The handshake reply: public facts and the agreement, nothing computed from the data."""
    return RecordDict({"meta": ConfigRecord({
        "provider-id": provider.provider_id,
        "n-samples": provider.n_samples,
        "n-features": provider.n_features,
        "n-components": provider.n_components,
        "n-rounds": provider.n_rounds,
        "centering": "none" if provider.centering is None else str(provider.centering),
        "data-norm": "auto" if isinstance(provider.data_norm, str) else "public",
        "releases-all": provider.counter.used,
    })})


@client_app.query("hello")
def answer_hello(msg: Message, context: Context) -> Message:
    """The handshake: who this provider is and what it agreed to (no release, no budget)."""
    node_config = dict(context.node_config)
    try:
        with warnings.catch_warnings():
            if not _flag(node_config.get("show-data-warnings")):  # see _answer
                warnings.simplefilter("ignore", DataDependentWarning)
                warnings.simplefilter("ignore", RuntimeWarning)
            content = _hello_content(load_provider(node_config))
    except Exception as exc:  # its own failure: a fixed code
        return _failure(exc, msg, node_config)
    return Message(content, reply_to=msg)


@client_app.query()
def answer(msg: Message, context: Context) -> Message:
    """A power round: ``Hᵢ = Σ̂ᵢQ + Gᵢ/nᵢ``."""
    return _answer("query", msg, context)


@client_app.query("mean")
def answer_mean(msg: Message, context: Context) -> Message:
    """A round of the private mean: ``Rᵢ`` and the noisy clipped sum over ``nᵢ``."""
    return _answer("mean", msg, context)


@client_app.query("prepare")
def answer_prepare(msg: Message, context: Context) -> Message:
    """The broadcast mean: centre, release ``Dᵢ`` (``data-norm = "auto"``), clip."""
    return _answer("prepare", msg, context)


@client_app.query("variance")
def answer_variance(msg: Message, context: Context) -> Message:
    """The noisy variances along the final components."""
    return _answer("variance", msg, context)


# --- server (ServerApp) --------------------------------------------------------------------------


def run_server(grid: Grid, config: dict[str, Any]) -> dict[str, Any]:
    """Run DPS-PCA over ``grid``; return (and write to ``output-path``) the result.

    Only loops send/receive and calls :class:`ServerState`. Failures become
    ``{"status": "error", "error": ...}`` in the result, never a silent stop.
    """
    result: dict[str, Any] = {"status": "running", "rounds_completed": 0, "round_seconds": [],
                              "dropped": {}, "providers": {}}
    try:
        d, k = int(config["n-features"]), int(config["n-components"])
        s_hat = int(config.get("n-nonzero", d))
        T, N = int(config["n-rounds"]), int(config["n-providers"])
        seed = int(config["seed"]) if int(config.get("seed", -1)) >= 0 else None
        on_dropout = str(config.get("on-dropout", "error"))
        round_timeout = float(config.get("round-timeout", 120.0))
        wait_timeout = float(config.get("wait-timeout", 120.0))
        poll = float(config.get("poll-interval", POLL_INTERVAL))
        centering = _centering_setting(config.get("centering", "none"))
        data_norm = _data_norm_setting(config.get("data-norm", 1.0))
        nodes = handshake(grid, N, wait_timeout, {
            "n-features": d, "n-components": k, "n-rounds": T,
            "centering": "none" if centering is None else centering,
            "data-norm": "auto" if isinstance(data_norm, str) else "public"})
        rng = check_random_state(seed)  # the same Q⁽⁰⁾ as DPSPCA(random_state=seed)
        server = ServerState(d, k, s_hat, T,
                             ServerState.initial(d, k, s_hat, str(config.get("init", "random")),
                                                 rng),
                             centering=centering,
                             table_mode=is_table_mode(centering, data_norm))
        node_to_pid: dict[int, str] = {}
        active = list(nodes)
        while not server.finished:
            t0 = time.perf_counter()
            phase = server.phase
            replies, reasons = _one_round(grid, active, server.next_message(), round_timeout,
                                          server.step_label, poll)
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
            server.receive(used)
            if phase == "query":
                result["rounds_completed"] = server.round
                result["round_seconds"].append(time.perf_counter() - t0)
        result["dropped"] = dict(server.dropped)
        result.update(status="ok", components=server.components().tolist(),
                      history=[Q.T.tolist() for Q in server.history],
                      privacy=_privacy(result["providers"], server.dropped))
        if server.table_mode:
            result.update(
                mean=None if server.mean is None else server.mean.tolist(),
                explained_variance=_floats(server.explained_variance),
                explained_variance_ratio=_floats(server.explained_variance_ratio),
                provider_bounds=server.provider_bounds,
            )
        scales = {pid: float(m["noise-scale"]) * int(m["n-samples"])
                  for pid, m in result["providers"].items() if pid not in server.dropped}
        total = sum(int(result["providers"][pid]["n-samples"]) for pid in scales)
        if total:
            result["noise_level"] = math.sqrt(sum(s**2 for s in scales.values())) / total
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


def _floats(values: Any) -> list[float | str] | None:
    if values is None:
        return None
    return [float(v) if math.isfinite(v) else str(v) for v in np.asarray(values, float)]


def _privacy(providers: dict[str, dict[str, Any]], dropped: dict[str, int]) -> dict:
    """Each provider's own record (as it reported it with its last reply)."""
    out = {}
    for pid, meta in providers.items():
        rec = json.loads(str(meta["privacy"]))
        if pid in dropped:
            rec["notes"] = f"{rec['notes']} Dropped out at round {dropped[pid]}."
        out[pid] = rec
    return out


def handshake(grid: Grid, n: int, timeout: float, expected: dict[str, Any],
              poll: float = 0.2) -> list[int]:
    """The ``n`` nodes that answered the handshake, in node order; nothing released yet.

    Every registered node gets a ``query.hello`` (which costs a provider nothing); only
    nodes that answer, with distinct provider ids and the agreement of this run
    (``expected``: d, k, T, centering, kind of data_norm), are ever queried. A stale node
    (registered but gone, or left from another run) never answers and is never queried, so
    it cannot make the others spend their budget on a run that then fails. Raises
    ValueError if more than ``n`` providers answer, two nodes claim one provider id, or a
    provider agreed to other settings; TimeoutError if fewer than ``n`` answer in
    ``timeout`` seconds.
    """
    end = time.monotonic() + timeout
    answered: dict[int, dict[str, Any]] = {}
    asked: dict[str, int] = {}
    full_at: float | None = None
    while True:
        new = [node for node in sorted(grid.get_node_ids())
               if node not in answered and node not in asked.values()]
        if new:
            messages = [Message(content=RecordDict({}), dst_node_id=node,
                                message_type=HELLO_TYPE, group_id="handshake")
                        for node in new]
            asked.update(zip(grid.push_messages(messages), new, strict=True))
        for msg in grid.pull_messages(list(asked)):
            node = asked.pop(msg.metadata.reply_to_message_id, None)
            if node is None or msg.has_error():
                continue
            try:
                answered[node] = dict(msg.content.config_records["meta"])
            except Exception:  # a malformed hello: not a provider of this run
                continue
        now = time.monotonic()
        if len(answered) >= n and full_at is None:
            full_at = now
        if full_at is not None and (not asked or now - full_at > HANDSHAKE_GRACE):
            break  # the silent ones are stale: they will never be queried
        if now > end:
            if len(answered) >= n:
                break
            raise TimeoutError(
                f"Only {len(answered)} of {n} providers answered the handshake within "
                f"{timeout} s (registered nodes that do not answer are never queried).")
        time.sleep(poll)
    ids = [str(meta.get("provider-id")) for meta in answered.values()]
    if len(set(ids)) != len(ids):
        raise ValueError(f"Two nodes answered as the same provider ({sorted(ids)}): refusing "
                         "to query one provider's data twice. Stop the stale SuperNode.")
    if len(answered) > n:
        raise ValueError(f"{len(answered)} providers answered the handshake ({sorted(ids)}), "
                         f"more than n-providers={n}: refusing to guess which to query.")
    for meta in answered.values():
        wrong = {key: (meta.get(key), value) for key, value in expected.items()
                 if str(meta.get(key)) != str(value)}
        if wrong:
            raise ValueError(f"Provider {meta.get('provider-id')!r} agreed to other settings "
                             f"than this run (theirs, ours): {wrong}. Nothing was released.")
    return sorted(answered)


def _one_round(grid: Grid, nodes: list[int], message: Any, timeout: float, label: str = "",
               poll: float = POLL_INTERVAL,
               ) -> tuple[dict[int, tuple[Any, dict[str, Any]]], dict[int, str]]:
    """Send ``message`` to ``nodes``; collect replies (by node) and reasons for the others."""
    message_type = MESSAGE_TYPES[type(message)]
    kind = message_type.partition(".")[2] or "query"
    content = message_content(message)
    messages = [Message(content=content, dst_node_id=n, message_type=message_type,
                        group_id=label or kind) for n in nodes]
    pending: dict[str, int] = {}
    for msg_id, node in zip(grid.push_messages(messages), nodes, strict=True):
        pending[msg_id] = node
    replies: dict[int, tuple[Any, dict[str, Any]]] = {}
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
                try:
                    replies[node] = _reply_from_content(msg.content, kind)
                except Exception as exc:  # a malformed reply: that provider dropped out
                    reasons[node] = f"malformed reply: {exc!r}"
        if pending:
            time.sleep(poll)
    for node in pending.values():
        reasons[node] = f"no answer within round-timeout={timeout:g} s"
    return replies, reasons


@server_app.main()
def main(grid: Grid, context: Context) -> None:
    """ServerApp entry point: ``run_server`` with the run config."""
    import sys

    # Replies are listed before their contents arrive: retry those pulls after 0.02 s, not
    # Flower's 1 s (only the grid's retry delay changes).
    shorten_pull_backoff(sys.modules.get(type(grid).__module__))
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
