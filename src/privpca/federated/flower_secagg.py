"""Secure aggregation over Flower: SecAgg's stages as Flower messages.

With ``aggregation = "secure"`` a provider answers a step (a power query, the variance
query, any step whose answer is a :class:`~privpca.federated.protocol.secure_sums.ShareReply`)
by computing its share reply and **keeping it**: it sends the server only a
:class:`~privpca.federated.flower_wire.ShareAnnouncement` (the reply's public noise plan and
its stage-1 public keys, :meth:`SecAggProvider.advertise`). The server then runs SecAgg's
other stages as Flower messages to the providers of that step (:func:`open_secure_step`):

===========  ==========================================  ========================================
message      server → provider                           provider → server
===========  ==========================================  ========================================
the step     the step's message + the secure header      plan + AdvertiseKeys (stage 1)
``roster``   :class:`KeyRoster` + the plan to decode      :class:`EncryptedShares` (stage 2)
``mask``     its :class:`ShareDelivery`                  :class:`MaskedInput` (stage 3): the
                                                         kept residues, masked
``unmask``   :class:`UnmaskRequest`                      :class:`UnmaskReply` (stage 4)
===========  ==========================================  ========================================

Stage 1 rides on the step's reply (one Flower round trip less: each costs the SuperNode's 3 s
poll). The server decodes the opened sum with the public plan and gives
:class:`~privpca.federated.protocol.server.ServerState` one combined reply, exactly as
:func:`~privpca.federated.protocol.secure_sums.combine_replies` does in process; the dropout
policy applies at every stage, and fewer than ``min_providers`` survivors abort the step:
nothing is opened and the run fails.

A provider's secure-aggregation state (its ephemeral EC private keys, its self-mask seed, the
shares it received, the residues of the current step) lives in the memory of the provider's
one long-running process (:mod:`.flower_node`, which calls :func:`keep_sessions_in_process`)
and is forgotten when the aggregation ends or fails. Flower's stock SuperNode starts a fresh
process per message, which could keep it only by writing it down: a secure step is refused
there (:data:`STOCK_SUPERNODE_REFUSAL`; docs/DISTRIBUTED.md says why).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from flwr.app import RecordDict

from privpca.federated.flower_wire import (
    SecureHeader,
    ShareAnnouncement,
    secagg_content,
    secagg_from_content,
)
from privpca.federated.protocol import (
    ProviderConfigError,
    ProviderDropoutError,
    Reply,
    ServerState,
    VarianceReply,
    dpspca_noise_multiplier,
    select_replies,
)
from privpca.federated.protocol.secure_sums import (
    SecureAgreement,
    ShareReply,
    collusion_epsilons,
    opened_reply,
    secure_notes,
)
from privpca.federated.secure import (
    EncryptedShares,
    KeyRoster,
    MaskedInput,
    SecAggConfig,
    SecAggProvider,
    SecAggServer,
    SecureAggregationAborted,
    SecureAggregationRefused,
    ShareDelivery,
    UnmaskReply,
    UnmaskRequest,
)
from privpca.federated.secure.messages import AdvertiseKeys
from privpca.mechanisms.distributed_gaussian import DistributedGaussianPlan

__all__ = [
    "STAGE_ACTIONS",
    "STOCK_SUPERNODE_REFUSAL",
    "answer_stage",
    "combine_step",
    "keep_sessions_in_process",
    "keeps_state",
    "open_secure_step",
    "secure_summary",
    "server_agreement",
    "start_session",
    "union_plan",
]

#: Flower action (``query.<action>``) of each stage after the first → (what the provider
#: receives, what it sends back, the stage).
STAGE_ACTIONS: dict[str, tuple[type, type, int]] = {
    "secagg_roster": (KeyRoster, EncryptedShares, 2),
    "secagg_mask": (ShareDelivery, MaskedInput, 3),
    "secagg_unmask": (UnmaskRequest, UnmaskReply, 4),
}
#: Why a provider under Flower's stock SuperNode refuses a secure step (its log; the server
#: gets the fixed ``bad-agreement`` code, and its handshake names the cause itself).
STOCK_SUPERNODE_REFUSAL = (
    "secure aggregation needs privpca's long-running provider (privpca provider "
    "--aggregation secure, --isolation process): Flower's stock SuperNode starts a fresh "
    "process per message, which could keep the provider's SecAgg keys, self-mask seed, "
    "received shares and unmasked residues between messages only by writing them down.")


# --- provider ----------------------------------------------------------------------------------

@dataclass
class _Session:
    """One provider's part in one aggregation: its kept share reply and its SecAgg state."""

    share: ShareReply | None  # None once sent masked
    secagg: SecAggProvider
    session: str
    round: int


_SESSIONS: dict[str, _Session] = {}
_LOCK = threading.Lock()
_IN_PROCESS = threading.Event()


def keep_sessions_in_process() -> None:
    """Declare this process long-running (:mod:`.flower_node`): secure steps are answered."""
    _IN_PROCESS.set()


def keeps_state() -> bool:
    """Whether this process keeps a provider's secure-aggregation state between messages."""
    return _IN_PROCESS.is_set()


def _key(node_config: dict[str, Any]) -> str:
    """A provider's sessions are keyed by its state file (one provider, one budget)."""
    try:
        return str(Path(str(node_config["state-path"])).resolve())
    except KeyError as exc:
        raise ProviderConfigError(f"Provider node config lacks {exc}.") from exc


def check_keeps_state() -> None:
    """Refuse a secure step in a process that cannot keep its state (the stock SuperNode)."""
    if not keeps_state():
        raise ProviderConfigError(STOCK_SUPERNODE_REFUSAL)


def start_session(node_config: dict[str, Any], reply: ShareReply,
                  header: SecureHeader) -> AdvertiseKeys:
    """Keep ``reply`` for this step's aggregation; return the stage-1 public keys.

    The aggregation's config comes from the provider's own plan (bit width, length, the
    fewest survivors) and the header's order of the step's providers and session; a previous
    aggregation still under way for this provider is forgotten (a provider takes part in
    one at a time).
    """
    plan = reply.plan
    session = aggregation_session(header.session, reply.kind)
    config = SecAggConfig(header.ids, plan.bits, int(reply.residues.size),
                          min_providers=plan.min_providers, session=session,
                          round=int(reply.round))
    secagg = SecAggProvider(reply.provider_id, config)
    keys = secagg.advertise()
    with _LOCK:
        _SESSIONS[_key(node_config)] = _Session(reply, secagg, session, int(reply.round))
    return keys


def aggregation_session(session: str, kind: str) -> str:
    """The SecAgg session of one step: the run's session and the kind of its answers (with
    the answer's round, bound into every mask and share: one aggregation per step)."""
    return f"{session}/{kind}"


def answer_stage(action: str, node_config: dict[str, Any], content: RecordDict) -> RecordDict:
    """A provider's answer to a stage message (``action`` of :data:`STAGE_ACTIONS`).

    Refused (:class:`~privpca.federated.secure.messages.SecureAggregationRefused`, sent as
    the fixed ``query-refused`` code) and the session forgotten: a malformed message, no
    aggregation under way, another session or round, a roster whose plan is not this
    provider's own, and every refusal of :class:`SecAggProvider`. The residues are forgotten
    once sent masked, the whole session once the unmasking request is answered.
    """
    expected, _, _stage = STAGE_ACTIONS[action]
    key = _key(node_config)
    with _LOCK:
        session = _SESSIONS.get(key)
        try:
            message, sid, round_, plan = secagg_from_content(content, expected)
            if session is None:
                raise SecureAggregationRefused("No secure aggregation is under way here.")
            if (sid, round_) != (session.session, session.round):
                raise SecureAggregationRefused(
                    f"A message of aggregation ({sid!r}, {round_}); this provider takes part "
                    f"in ({session.session!r}, {session.round}).")
            out: Any
            if expected is KeyRoster:
                if session.share is None or plan != session.share.plan:
                    raise SecureAggregationRefused(
                        "The server's noise plan differs from the one this provider's own "
                        "agreement gives: its sum would be decoded on another grid, or opened "
                        "with fewer survivors than agreed.")
                out = session.secagg.share_keys(message)
            elif expected is ShareDelivery:
                if session.share is None:
                    raise SecureAggregationRefused("The masked input was sent already.")
                out = session.secagg.mask(message, session.share.residues)
                session.share = None  # sent masked: not kept a moment longer
            else:
                out = session.secagg.unmask(message)
                del _SESSIONS[key]
        except Exception:
            _SESSIONS.pop(key, None)  # a refused or failed stage ends this provider's part
            raise
    return secagg_content(out, session=sid, round=round_)


# --- server ----------------------------------------------------------------------------------

#: ``exchange(sends, action, parse)`` sends each node its record as ``query.<action>`` and
#: returns the parsed replies by node and the reasons of the nodes that did not answer.
Exchange = Callable[[dict[int, RecordDict], str, Callable[[int, RecordDict], Any]],
                    tuple[dict[int, Any], dict[int, str]]]


def _parser(expected: type, owners: dict[int, str]) -> Callable[[int, RecordDict], Any]:
    def parse(node: int, content: RecordDict) -> Any:
        message, _, _, _ = secagg_from_content(content, expected)
        if message.provider_id != owners[node]:
            raise ValueError(f"node {node} answered as {message.provider_id!r}, not "
                             f"{owners[node]!r}")
        return message

    return parse


def _common_plan(announced: Sequence[ShareAnnouncement],
                 agreement: SecureAgreement) -> DistributedGaussianPlan:
    """The plan every provider of the step announced, checked against the server's agreement."""
    first = announced[0]
    if any((a.kind, a.round, a.plan) != (first.kind, first.round, first.plan)
           for a in announced):
        raise ValueError("The providers' noise plans (or steps) differ: they did not agree on "
                         "the same public settings. Nothing was opened.")
    plan = first.plan
    if (plan.min_providers, plan.colluders, plan.max_providers) != (
            agreement.min_providers, agreement.colluders, agreement.n_providers):
        raise ValueError(f"The providers' noise plan is sized for min_providers="
                         f"{plan.min_providers}, colluders={plan.colluders} of "
                         f"{plan.max_providers}; the run agreed to {agreement}. Nothing was "
                         "opened.")
    return plan


def combine_step(exchange: Exchange, server: ServerState, secure: SecureAgreement | None,
                 session: str, owners: dict[int, str],
                 replies: dict[int, tuple[Any, dict[str, Any]]], reasons: dict[int, str],
                 on_dropout: str) -> list[Any]:
    """One step's replies as :meth:`ServerState.receive` takes them: share announcements
    opened by :func:`open_secure_step` into one reply, others through the dropout policy
    (:func:`~privpca.federated.protocol.server.select_replies`). A secure run never reads
    a power answer or variances sent in the clear."""
    label = server.step_label
    if any(isinstance(r, ShareAnnouncement) for r, _ in replies.values()):
        if secure is None:
            raise ValueError(f"{label}: share replies in a run agreed with local noise. "
                             "Nothing was opened.")
        return [open_secure_step(exchange, server, secure, session, owners, replies, reasons,
                                 on_dropout)]
    if secure is not None and any(isinstance(r, Reply | VarianceReply)
                                  for r, _ in replies.values()):
        raise ValueError(f"{label}: a provider answered in the clear in a run agreed with "
                         "secure aggregation; its answer is not used.")
    return select_replies(server, list(owners.values()), [r for r, _ in replies.values()],
                          on_dropout=on_dropout,
                          reasons={owners[n]: why for n, why in reasons.items()})


def open_secure_step(exchange: Exchange, server: ServerState, agreement: SecureAgreement,
                     session: str, owners: dict[int, str],
                     replies: dict[int, tuple[Any, dict[str, Any]]], reasons: dict[int, str],
                     on_dropout: str) -> Any:
    """Open the sum of one step's share replies by SecAgg's stages 2 to 4 over Flower.

    ``owners`` are the step's nodes → provider ids in SecAgg's agreed order (those the step's
    message went to); ``replies`` their parsed replies (announcements, stage 1) and
    ``reasons`` why the others did not answer. Returns the combined reply for
    :meth:`ServerState.receive`; providers missing at a stage are recorded in
    ``server.dropped`` (``on_dropout="continue"``; the step of the first sum they are not in).

    Raises
    ------
    ProviderDropoutError
        A provider missed a stage under ``on_dropout="error"``, or fewer than
        ``min_providers`` survived a stage (SecAgg aborted): nothing was opened.
    ValueError
        Replies that are not all announcements of one plan, or a malformed stage message.
    """
    label = server.step_label
    announced = {node: r for node, (r, _) in replies.items()}
    if not all(isinstance(r, ShareAnnouncement) for r in announced.values()):
        raise ValueError(f"{label}: the replies mix share replies with others: the providers "
                         "did not agree on the aggregation. Nothing was opened.")
    for node, a in announced.items():
        if a.provider_id != owners[node]:
            raise ValueError(f"{label}: node {node} answered as {a.provider_id!r}, not "
                             f"{owners[node]!r}. Nothing was opened.")
    named = {owners[n]: why for n, why in reasons.items()}
    used = select_replies(server, list(owners.values()), list(announced.values()),
                          on_dropout=on_dropout, reasons=named)
    if not used:
        raise ProviderDropoutError(f"{label}: no provider answered.")
    plan = _common_plan(used, agreement)
    first = used[0]
    session = aggregation_session(session, first.kind)
    config = SecAggConfig(tuple(owners.values()), plan.bits, plan.coordinates,
                          min_providers=plan.min_providers, session=session, round=first.round)
    secagg = SecAggServer(config)
    node_of = {pid: node for node, pid in owners.items()}
    try:
        roster = secagg.collect_keys([a.keys for a in used])
        sends = {node_of[a.provider_id]: secagg_content(roster, session=session,
                                                       round=first.round, plan=plan)
                 for a in roster.keys}
        shares = _stage(exchange, server, "secagg_roster", sends, owners, on_dropout)
        deliveries = secagg.collect_shares(shares)
        sends = {node_of[pid]: secagg_content(delivery, session=session, round=first.round)
                 for pid, delivery in deliveries.items()}
        masked = _stage(exchange, server, "secagg_mask", sends, owners, on_dropout)
        request = secagg.collect_masked(masked)
        sends = {node_of[pid]: secagg_content(request, session=session, round=first.round)
                 for pid in request.survivors}
        unmasked = _stage(exchange, server, "secagg_unmask", sends, owners, on_dropout,
                          in_sum=True)
        total = secagg.collect_unmask(unmasked)
    except SecureAggregationAborted as exc:
        raise ProviderDropoutError(f"{label}: {exc} The run stops.") from exc
    survivors = set(secagg.survivors)
    opened = plan.decode(total, survivors=len(survivors))
    n = sum(a.n_samples for a in used if a.provider_id in survivors)
    return opened_reply(first.kind, first.round, n, opened, server.n_features,
                        server.n_components)


def _stage(exchange: Exchange, server: ServerState, action: str, sends: dict[int, RecordDict],
           owners: dict[int, str], on_dropout: str, *, in_sum: bool = False) -> list[Any]:
    """One stage's messages out and replies in; a missing provider meets the dropout policy."""
    _, reply_type, stage = STAGE_ACTIONS[action]
    got, reasons = exchange(sends, action, _parser(reply_type, owners))
    missing = {owners[n]: reasons.get(n, "no answer") for n in sends if n not in got}
    if missing and on_dropout == "error":
        why = "; ".join(f"{p}: {r}" for p, r in missing.items())
        raise ProviderDropoutError(
            f"{server.step_label}: provider(s) {sorted(missing)} did not answer secure "
            f"aggregation's stage {stage} ({why}). Stopping (on_dropout='error'); nothing was "
            "opened, no output released.")
    for pid in missing:  # in_sum: its input is in this step's sum, not in the next one's
        server.dropped[pid] = server.step + (1 if in_sum else 0)
    return list(got.values())


def server_agreement(min_providers: int | None, colluders: int, max_rows: int | None, n: int,
                     hellos: dict[int, dict[str, Any]]) -> SecureAgreement:
    """The server's secure agreement from its settings and the handshake (nothing released
    yet): every provider must keep its state between messages and fit ``max_rows``
    (default: the largest nᵢ); ``total_rows`` is Σ nᵢ."""
    rows = {str(m.get("provider-id")): int(m["n-samples"]) for m in hellos.values()}
    for meta in hellos.values():
        if str(meta.get("keeps-state")).lower() not in ("true", "1"):
            raise ValueError(f"Provider {meta.get('provider-id')!r} refuses: "
                             f"{STOCK_SUPERNODE_REFUSAL} Nothing was released.")
    bound = max_rows or max(rows.values())
    over = {pid: n_i for pid, n_i in rows.items() if n_i > bound}
    if over:
        raise ValueError(f"max-rows={bound} is below the rows of providers {over}: their "
                         "answers would not fit the noise plan. Nothing was released.")
    m = n if min_providers is None else min_providers
    return SecureAgreement(n, m, colluders, bound, sum(rows.values()))


def union_plan(hellos: dict[int, dict[str, Any]], centering: Any, data_norm: Any,
               total_rows: int, n_features: int, n_components: int, n_rounds: int) -> Any:
    """The budget plan over the union that a secure run's preparation searches with: the one
    every provider makes (``ProviderState`` over ``Σ nᵢ``), from the (ε, δ, budget shares)
    they reported in the handshake, which must be the same for all (public)."""
    import json

    from privpca.federated.protocol.privacy import dpspca_pipeline
    from privpca.pipeline.settings import PipelineSettings

    agreed = {(float(m["epsilon"]), float(m["delta"]), str(m.get("budget-shares") or ""))
              for m in hellos.values()}
    if len(agreed) != 1:
        raise ValueError(f"The providers agreed to different (epsilon, delta, budget shares) "
                         f"{sorted(agreed)}: a secure run needs one budget plan for all. "
                         "Nothing was released.")
    ((epsilon, delta, shares),) = agreed
    settings = PipelineSettings(epsilon=epsilon, delta=delta, centering=centering,
                                data_norm=data_norm, scale=False,
                                budget_shares=json.loads(shares) if shares else None)
    run = dpspca_pipeline("the secure run's server", settings, total_rows, n_features,
                          n_components, n_rounds, select_bound=False)
    return run.plan


def secure_summary(secure: SecureAgreement, providers: dict[str, dict[str, Any]],
                   table_mode: bool) -> dict[str, Any]:
    """The secure agreement in the result; in the papers' setting also the fit's guarantee
    against the server plus j colluders (as ``DPSPCA.collusion_epsilons_``) and its notes."""
    out: dict[str, Any] = {"n_providers": secure.n_providers,
                           "min_providers": secure.min_providers,
                           "colluders": secure.colluders, "max_rows": secure.max_rows,
                           "total_rows": secure.total_rows}
    if not table_mode and providers:
        meta = next(iter(providers.values()))
        eps, delta, T = float(meta["epsilon"]), float(meta["delta"]), int(meta["n-rounds"])
        by_colluders = collusion_epsilons([(dpspca_noise_multiplier(eps, delta, T), T)], delta,
                                          secure)
        out["collusion_epsilons"] = {str(j): e for j, e in by_colluders.items()}
        out["notes"] = secure_notes(secure, eps, delta, by_colluders)
    return out
