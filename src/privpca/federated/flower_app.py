"""DPS-PCA on Flower (``flwr``, Message API): a thin adapter around :mod:`.protocol`.

* ``client_app`` (one per provider, run by a ``flower-supernode`` on the provider's machine)
  only answers the protocol's messages: ``query`` (a power round), ``query.mean`` (a round of
  the private mean), ``query.prepare`` (the broadcast mean: centre, bound, clip),
  ``query.variance`` (the variances along the final components), a secure run's
  ``query.count`` and ``query.sum`` (the union's searches and mean) and SecAgg's
  ``query.secagg_roster``, ``query.secagg_mask`` and ``query.secagg_unmask``
  (:mod:`.flower_secagg`). It rebuilds the provider's
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
  them; then it writes the result (JSON, :mod:`.flower_result`) to ``output-path``.

Each message travels as one Flower record (:mod:`.flower_wire`); :func:`write_app_dir`
(:mod:`.flower_launch`) writes the App directory that ``flwr run`` starts the two apps from.

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
(log failures and data-dependent warnings in full); :mod:`.flower_provider` reads it. A node
config without ``centering``/``data-norm`` is the papers' setting. Server run config
(``[tool.flwr.app.config]``, ``privpca server`` writes it):
``n-features``, ``n-components``, ``n-nonzero``, ``n-rounds``, ``n-providers``, ``seed``,
``init``, ``centering`` and ``data-norm`` (the same settings as the providers': they decide
which steps the server runs; default the papers' setting), ``on-dropout``, ``round-timeout``,
``wait-timeout``, ``poll-interval`` (seconds between polls for replies; default
:data:`POLL_INTERVAL`), ``output-path``. See ``docs/DISTRIBUTED.md``.

Secure aggregation (both configs): ``aggregation`` (``"local-noise"``, the default, or
``"secure"``), ``min-providers`` (default: every provider of the run), ``colluders``
(default 0) and, optionally, ``max-rows`` (the public bound on every nᵢ; the server's default
is the largest nᵢ of the handshake, a provider's the server's, checked against its own nᵢ).
A secure step's answers are opened only as a sum, by SecAgg's stages as Flower messages
(:mod:`.flower_secagg`); the handshake refuses a provider of another agreement, and one that
runs Flower's stock SuperNode, before anything is released.
"""

from __future__ import annotations

import json
import logging
import secrets
import time
import traceback
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from flwr.app import ConfigRecord, Context, Error, Message, RecordDict
from flwr.clientapp import ClientApp
from flwr.serverapp import Grid, ServerApp

from privpca.exceptions import DataDependentWarning
from privpca.federated.flower_launch import write_app_dir
from privpca.federated.flower_provider import (
    SecureSettings,
    _centering_setting,
    _data_norm_setting,
    _flag,
    aggregation_settings,
    load_provider,
)
from privpca.federated.flower_provider import _load_data as _load_data
from privpca.federated.flower_result import finish_result, write_result
from privpca.federated.flower_secagg import (
    Exchange,
    answer_stage,
    check_keeps_state,
    combine_step,
    keeps_state,
    server_agreement,
    start_session,
    union_plan,
)
from privpca.federated.flower_wire import (
    SecureHeader,
    _message_from_content,
    _reply_from_content,
    _reply_to_content,
    announcement_content,
    content_nbytes,
    message_content,
    put_secure_header,
    query_to_message_content,
    secure_header,
)
from privpca.federated.protocol import (
    PROVIDER_FAILURES,
    MeanQuery,
    PrepareMessage,
    ProviderDropoutError,
    ProviderState,
    Query,
    ServerState,
    VarianceQuery,
    failure_code,
    failure_reply,
    is_table_mode,
)
from privpca.federated.protocol.messages import CountQuery, SumQuery
from privpca.federated.protocol.secure_sums import SecureAgreement, ShareReply
from privpca.mechanisms.randomness import public_start_generator

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
#: Flower message type of each protocol message ("query" is the power round).
MESSAGE_TYPES = {Query: "query", MeanQuery: "query.mean", PrepareMessage: "query.prepare",
                 VarianceQuery: "query.variance", CountQuery: "query.count",
                 SumQuery: "query.sum"}
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


# --- provider (ClientApp) ------------------------------------------------------------------------


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

    A secure step (its message carries the server's :class:`SecureHeader`) is answered by a
    secure provider only, in a process that keeps its state: its share reply is kept
    (:func:`~privpca.federated.flower_secagg.start_session`) and only the reply's public
    plan and SecAgg's stage-1 keys are sent.
    """
    node_config = dict(context.node_config)
    try:
        with warnings.catch_warnings():
            if not _flag(node_config.get("show-data-warnings")):
                warnings.simplefilter("ignore", DataDependentWarning)
                warnings.simplefilter("ignore", RuntimeWarning)
            header = secure_header(msg.content)
            provider = load_provider(node_config, header, step=True)
            if provider.secure is not None:
                check_keeps_state()  # before anything is booked
            message = _message_from_content(kind, msg.content)
            reply = provider.handle(message)
            if isinstance(reply, ShareReply):  # kept here; its residues leave only masked
                assert header is not None
                keys = start_session(node_config, reply, header)
                content = announcement_content(reply, keys, provider)
            else:
                content = _reply_to_content(reply, provider)
    except Exception as exc:  # refused or failed: a fixed code, nothing released
        return _failure(exc, msg, node_config)
    return Message(content, reply_to=msg)


def _hello_content(provider: ProviderState, secure: SecureSettings | None = None) -> RecordDict:
    """The handshake reply: public facts and the agreement, nothing computed from the data."""
    agreed: dict[str, Any] = {"aggregation": "local-noise"}
    if secure is not None:
        shares = provider.budget_shares
        agreed = {"aggregation": "secure", "min-providers": secure.min_providers_text,
                  "colluders": secure.colluders, "keeps-state": keeps_state(),
                  "epsilon": provider.epsilon, "delta": provider.delta,
                  "budget-shares": json.dumps(shares, sort_keys=True) if shares else ""}
    return RecordDict({"meta": ConfigRecord({
        **agreed,
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
            content = _hello_content(load_provider(node_config),
                                     aggregation_settings(node_config))
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


@client_app.query("count")
def answer_count(msg: Message, context: Context) -> Message:
    """A secure run's search: a share of the count of rows below an edge (kept; announced)."""
    return _answer("count", msg, context)


@client_app.query("sum")
def answer_sum(msg: Message, context: Context) -> Message:
    """A secure run's mean round: a share of ``Σ clip_R(x − c)`` (kept; announced)."""
    return _answer("sum", msg, context)


def _answer_stage(action: str, msg: Message, context: Context) -> Message:
    """A stage of secure aggregation (:func:`~privpca.federated.flower_secagg.answer_stage`);
    a refusal or failure is a fixed code, as for the protocol's messages."""
    node_config = dict(context.node_config)
    try:
        check_keeps_state()
        content = answer_stage(action, node_config, msg.content)
    except Exception as exc:  # refused or failed: a fixed code, nothing sent in the clear
        return _failure(exc, msg, node_config)
    return Message(content, reply_to=msg)


@client_app.query("secagg_roster")
def answer_secagg_roster(msg: Message, context: Context) -> Message:
    """SecAgg stage 2: the roster in, the encrypted shares of this provider's secrets out."""
    return _answer_stage("secagg_roster", msg, context)


@client_app.query("secagg_mask")
def answer_secagg_mask(msg: Message, context: Context) -> Message:
    """SecAgg stage 3: the shares addressed to it in, its kept residues masked out."""
    return _answer_stage("secagg_mask", msg, context)


@client_app.query("secagg_unmask")
def answer_secagg_unmask(msg: Message, context: Context) -> Message:
    """SecAgg stage 4: the survivors in, its shares of their self masks (or keys) out."""
    return _answer_stage("secagg_unmask", msg, context)


# --- server (ServerApp) --------------------------------------------------------------------------


def run_server(grid: Grid, config: dict[str, Any]) -> dict[str, Any]:
    """Run DPS-PCA over ``grid``; return (and write to ``output-path``) the result.

    Only loops send/receive and calls :class:`ServerState`; a step whose replies are share
    announcements is opened by secure aggregation
    (:func:`~privpca.federated.flower_secagg.open_secure_step`). Failures become
    ``{"status": "error", "error": ...}`` in the result, never a silent stop.
    """
    result: dict[str, Any] = {"status": "running", "rounds_completed": 0, "round_seconds": [],
                              "round_bytes": [], "dropped": {}, "providers": {}}
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
        settings = aggregation_settings(config)
        hellos = _handshake(grid, N, wait_timeout,
                            _agreement(d, k, T, centering, data_norm, settings))
        node_to_pid = {node: str(meta.get("provider-id")) for node, meta in hellos.items()}
        secure = None if settings is None else server_agreement(
            settings.min_providers, settings.colluders, settings.max_rows, N, hellos)
        run = _Run(grid, round_timeout, poll, on_dropout, secure,
                   f"privpca-dpspca-{secrets.token_hex(8)}", node_to_pid)
        rng = public_start_generator(seed)  # the same Q⁽⁰⁾ as DPSPCA(random_state=seed)
        table_mode = is_table_mode(centering, data_norm)
        preparation: dict[str, Any] = {}
        if secure is not None and table_mode:  # the union's mean and bound, by opened sums
            preparation["secure"] = (union_plan(hellos, centering, data_norm, secure.total_rows,
                                                d, k, T), secure.total_rows, data_norm)
        server = ServerState(d, k, s_hat, T,
                             ServerState.initial(d, k, s_hat, str(config.get("init", "random")),
                                                 rng),
                             centering=centering, table_mode=table_mode, **preparation)
        active = sorted(hellos)
        while not server.finished:
            active = _run_step(run, server, active, result)
        finish_result(result, server, secure)
    except (ProviderDropoutError, TimeoutError, ValueError) as exc:
        result.update(status="error", error=str(exc))
    except Exception as exc:  # pragma: no cover - reported, not swallowed
        result.update(status="error", error=f"{exc!r}\n{traceback.format_exc()}")
    write_result(result, config.get("output-path"))
    return result


def _agreement(d: int, k: int, T: int, centering: Any, data_norm: Any,
               settings: SecureSettings | None) -> dict[str, Any]:
    """What every provider must have agreed to in its hello to be queried in this run."""
    expected: dict[str, Any] = {
        "n-features": d, "n-components": k, "n-rounds": T,
        "centering": "none" if centering is None else centering,
        "data-norm": "auto" if isinstance(data_norm, str) else "public",
        "aggregation": "local-noise"}
    if settings is not None:
        expected.update({"aggregation": "secure", "colluders": settings.colluders,
                         "min-providers": settings.min_providers_text})
    return expected


@dataclass
class _Run:
    """What every step of a server run uses: the grid and its timing, the dropout policy, the
    secure agreement and session (None: local noise) and each node's provider id."""

    grid: Grid
    round_timeout: float
    poll: float
    on_dropout: str
    secure: SecureAgreement | None
    session: str
    node_to_pid: dict[int, str]

    def pid(self, node: int) -> str:
        """The provider id of ``node`` (``node-<id>`` for one not known)."""
        return self.node_to_pid.get(node, f"node-{node}")


def _run_step(run: _Run, server: ServerState, active: list[int],
              result: dict[str, Any]) -> list[int]:
    """Send the server's next message to the ``active`` nodes and let it combine the replies
    (the dropout policy applied); a power round's time and bytes go to ``result``. Returns
    the nodes still in the run."""
    t0 = time.perf_counter()
    phase, label = server.phase, server.step_label
    traffic: dict[int, list[int]] = {}
    exchange = _exchanger(run.grid, run.round_timeout, run.poll, label, traffic)
    message = server.next_message()
    content = message_content(message)
    secure = run.secure
    if secure is not None:
        content = put_secure_header(content, SecureHeader(
            secure.n_providers, secure.min_providers, secure.colluders, secure.max_rows,
            secure.total_rows, run.session, tuple(run.node_to_pid[n] for n in active)))
    kind = MESSAGE_TYPES[type(message)].partition(".")[2] or "query"

    def parse(node: int, reply: RecordDict) -> Any:
        return _reply_from_content(reply, kind)

    replies, reasons = exchange(dict.fromkeys(active, content), kind, parse)
    metas = {}
    for node, (reply, meta) in replies.items():
        if secure is None:
            run.node_to_pid[node] = reply.provider_id
        metas[reply.provider_id] = meta
    used = combine_step(exchange, server, secure, run.session,
                        {n: run.pid(n) for n in active}, replies, reasons, run.on_dropout)
    active = [n for n in active if run.pid(n) not in server.dropped]
    result["providers"].update(metas)
    server.receive(used)
    if phase == "query":
        result["rounds_completed"] = server.round
        result["round_seconds"].append(time.perf_counter() - t0)
        result["round_bytes"].append({run.pid(n): v for n, v in traffic.items()})
    return active


def handshake(grid: Grid, n: int, timeout: float, expected: dict[str, Any],
              poll: float = 0.2) -> list[int]:
    """The ``n`` nodes that answered the handshake, in node order (see :func:`_handshake`)."""
    return sorted(_handshake(grid, n, timeout, expected, poll))


def _handshake(grid: Grid, n: int, timeout: float, expected: dict[str, Any],
               poll: float = 0.2) -> dict[int, dict[str, Any]]:
    """The ``n`` nodes that answered the handshake, with their hellos; nothing released yet.

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
    # An agreement covers one run, from its first release: a provider that released anything
    # already (a run that stopped, or one that finished) would refuse this run part-way,
    # after the others were charged, and leave them stuck in turn. Refused here, for free.
    used = {str(meta.get("provider-id")): int(meta.get("releases-all", 0))
            for meta in answered.values() if int(meta.get("releases-all", 0))}
    if used:
        raise ValueError(
            f"Provider(s) {used} (id: releases made) already made releases of their agreement "
            "(a run that stopped, or one that finished); an agreement covers one run, which "
            "cannot start again. Nothing was released. Such a provider's data holder may join a "
            "new run with a new --state file: a new budget, which they choose to spend.")
    return answered


def _exchanger(grid: Grid, timeout: float, poll: float, label: str,
               traffic: dict[int, list[int]] | None = None) -> Exchange:
    """:func:`_exchange` over ``grid`` for one step (``action`` "query" is the power round)."""

    def exchange(sends: dict[int, RecordDict], action: str,
                 parse: Callable[[int, RecordDict], Any]
                 ) -> tuple[dict[int, Any], dict[int, str]]:
        message_type = "query" if action == "query" else f"query.{action}"
        return _exchange(grid, sends, message_type, label, timeout, poll, parse, traffic)

    return exchange


def _exchange(grid: Grid, sends: dict[int, RecordDict], message_type: str, group: str,
              timeout: float, poll: float, parse: Callable[[int, RecordDict], Any],
              traffic: dict[int, list[int]] | None = None
              ) -> tuple[dict[int, Any], dict[int, str]]:
    """Send each node its record; collect the parsed replies (by node) and reasons for the
    others (an error reply, a malformed one, none within ``timeout``). ``traffic`` adds the
    bytes each node was sent and sent back."""
    nodes = list(sends)
    messages = [Message(content=sends[n], dst_node_id=n, message_type=message_type,
                        group_id=group) for n in nodes]
    pending = dict(zip(grid.push_messages(messages), nodes, strict=True))
    sizes: dict[int, int] = {}
    if traffic is not None:
        for n in nodes:
            size = sizes.setdefault(id(sends[n]), content_nbytes(sends[n]))
            traffic.setdefault(n, [0, 0])[0] += size
    replies: dict[int, Any] = {}
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
                continue
            if traffic is not None:
                traffic.setdefault(node, [0, 0])[1] += content_nbytes(msg.content)
            try:
                replies[node] = parse(node, msg.content)
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
    run_server(grid, dict(context.run_config))


