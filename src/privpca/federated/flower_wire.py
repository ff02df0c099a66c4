"""How the protocol's messages and replies travel as Flower records (arrays as exact bytes).

Every message is one ConfigRecord ("meta") in which arrays travel as their exact bytes
(little-endian, with dtype and shape beside them). Flower sends each record, array and
array chunk as an object of its own, one HTTP request per object per hop (server →
SuperLink → SuperNode → ClientApp and back): one record instead of up to seven objects
halves a round's requests.

Under secure aggregation (:mod:`.flower_secagg`) a step's message also carries the public
:class:`SecureHeader` (the run's agreement and the providers of the step), a provider's reply
to it is a :class:`ShareAnnouncement` (its public noise plan and its stage-1 public keys: its
residues never travel in the clear), and SecAgg's messages
(:mod:`privpca.federated.secure.messages`) travel as one record each too
(:func:`secagg_content`, :func:`secagg_from_content`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import numpy as np
from flwr.app import ConfigRecord, RecordDict

from privpca.federated.protocol import (
    MeanQuery,
    MeanReply,
    PrepareMessage,
    PrepareReply,
    ProviderState,
    Query,
    QueryRefusedError,
    Reply,
    VarianceQuery,
    VarianceReply,
)
from privpca.federated.protocol.messages import CountQuery, SumQuery
from privpca.federated.protocol.secure_sums import ShareReply
from privpca.federated.secure.messages import (
    AdvertiseKeys,
    EncryptedShares,
    KeyRoster,
    MaskedInput,
    SecureAggregationRefused,
    ShareDelivery,
    UnmaskReply,
    UnmaskRequest,
)
from privpca.mechanisms.distributed_gaussian import DistributedGaussianPlan

#: The dtypes an array in a message may have (anything else is a malformed message).
_WIRE_DTYPES = {"<f8": np.float64, "<i8": np.int64}


def _put_array(meta: dict[str, Any], name: str, values: Any, dtype: Any) -> None:
    a = np.ascontiguousarray(values, dtype=np.dtype(dtype).newbyteorder("<"))
    meta[name] = a.tobytes()
    meta[f"{name}.dtype"] = a.dtype.str
    meta[f"{name}.shape"] = ",".join(str(s) for s in a.shape)


def _get_array(meta: dict[str, Any], name: str,
               dtypes: dict[str, Any] | None = None) -> np.ndarray:
    allowed = _WIRE_DTYPES if dtypes is None else dtypes
    data, code = meta[name], str(meta[f"{name}.dtype"])
    if not isinstance(data, bytes) or code not in allowed:
        raise ValueError(f"{name!r} is not an array of {sorted(allowed)}")
    shape = tuple(int(s) for s in str(meta[f"{name}.shape"]).split(",") if s)
    # frombuffer is exact and reshape checks the size; the copy is native and writable.
    return np.frombuffer(data, dtype=code).reshape(shape).astype(allowed[code])


def content_nbytes(content: RecordDict) -> int:
    """The bytes Flower serialises ``content`` to (its records, as sent; no framing)."""
    from flwr.supercore.inflatable.inflatable_object import get_all_nested_objects

    return sum(len(obj.deflate()) for obj in get_all_nested_objects(content).values())


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
        if getattr(message, "data_norm", None) is not None:  # a bound opened by SecAgg
            meta["data-norm"] = float(message.data_norm)  # type: ignore[arg-type]
        return _record(meta)
    if isinstance(message, CountQuery):
        meta = {"part": str(message.part), "edge": int(message.edge),
                "centred": message.centre is not None}
        if message.centre is not None:
            _put_array(meta, "centre", message.centre, np.float64)
        return _record(meta)
    if isinstance(message, SumQuery):
        meta = {"round": int(message.round), "bound": float(message.bound)}
        _put_array(meta, "centre", message.centre, np.float64)
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
            mean = _get_array(meta, "mean") if bool(meta["centred"]) else None
            if "data-norm" in meta:
                return PrepareMessage(mean, float(meta["data-norm"]))
            return PrepareMessage(mean)
        if kind == "count":
            centre = _get_array(meta, "centre") if bool(meta["centred"]) else None
            edge = meta["edge"]
            if isinstance(edge, bool) or not isinstance(edge, int):
                raise TypeError("edge is not an int")
            return CountQuery(str(meta["part"]), centre, edge)
        if kind == "sum":
            return SumQuery(int(meta["round"]), _get_array(meta, "centre"),
                            float(meta["bound"]))
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
_ARRAY_FIELDS = ("product", "mean", "packed", "pilot")
#: The fields of a share announcement (not the provider's public meta).
_SECURE_FIELDS = ("share", "plan", "keys")


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
        if reply.pilot is not None:
            _put_array(meta, "pilot", reply.pilot, np.float64)
    else:
        raise TypeError(f"Not a protocol reply: {type(reply).__name__}")
    return _record(meta)


def _reply_from_content(content: RecordDict, kind: str = "query") -> tuple[Any, dict[str, Any]]:
    meta = _meta(content)
    pid, n = str(meta["provider-id"]), int(meta["n-samples"])
    reply: Any
    if "share.kind" in meta:  # a share reply kept by the provider: its plan and keys only
        reply = ShareAnnouncement(pid, str(meta["share.kind"]), int(meta["share.round"]), n,
                                  _plan_from_meta(meta),
                                  AdvertiseKeys(pid, meta["keys.c"], meta["keys.s"]))
        if not isinstance(reply.keys.c_public, bytes) or \
                not isinstance(reply.keys.s_public, bytes):
            raise ValueError("the advertised keys are not bytes")
    elif kind == "query":
        reply = Reply(pid, int(meta["round"]), n, _get_array(meta, "product"))
    elif kind == "mean":
        reply = MeanReply(pid, int(meta["round"]), n, float(meta["bound"]),
                          _get_array(meta, "mean"))
    elif kind == "prepare":
        reply = PrepareReply(pid, n, float(meta["bound"]), float(meta["clipped-estimate"]))
    elif kind == "variance":
        reply = VarianceReply(pid, n, _get_array(meta, "packed"), float(meta["total"]),
                              _get_array(meta, "pilot") if "pilot.dtype" in meta else None)
    else:
        raise ValueError(f"Unknown message kind {kind!r}")
    public = {key: value for key, value in meta.items()
              if key.partition(".")[0] not in _ARRAY_FIELDS + _SECURE_FIELDS}
    return reply, public


# --- secure aggregation -----------------------------------------------------------------------

#: The residues of a masked input (uint64 words modulo 2^b): the only unsigned array on the wire.
_MASKED_DTYPES = {"<u8": np.uint64}
#: The public parameters of a :class:`DistributedGaussianPlan` (the rest is derived from them).
_PLAN_FIELDS = ("central_sigma", "sensitivity", "coordinates", "min_providers", "colluders",
                "value_bound", "max_providers", "wrap_target")


@dataclass(frozen=True)
class SecureHeader:
    """What the server says with every step of a secure run (all public).

    ``n_providers``, ``min_providers``, ``colluders``, ``max_rows`` and ``total_rows`` are the
    server's :class:`~privpca.federated.protocol.secure_sums.SecureAgreement` (each provider
    checks them against its own); ``session`` names this run's aggregations (bound into every mask
    and share); ``ids`` are the providers of this step in the agreed order (SecAgg's order).
    """

    n_providers: int
    min_providers: int
    colluders: int
    max_rows: int
    total_rows: int
    session: str
    ids: tuple[str, ...]


@dataclass(frozen=True)
class ShareAnnouncement:
    """A provider's reply to a secure step: its share reply is kept; only this is sent.

    The public plan of its :class:`~privpca.federated.protocol.secure_sums.ShareReply`
    (the server checks that every provider's is the same and decodes the opened sum with
    it) and its stage-1 :class:`~privpca.federated.secure.messages.AdvertiseKeys`.
    """

    provider_id: str
    kind: str
    round: int
    n_samples: int
    plan: DistributedGaussianPlan
    keys: AdvertiseKeys


def _put_plan(meta: dict[str, Any], plan: DistributedGaussianPlan) -> None:
    for name in _PLAN_FIELDS:
        value = getattr(plan, name)
        meta[f"plan.{name}"] = int(value) if isinstance(value, int) else float(value)


def _plan_from_meta(meta: dict[str, Any]) -> DistributedGaussianPlan:
    values = {name: meta[f"plan.{name}"] for name in _PLAN_FIELDS}
    for name in ("coordinates", "min_providers", "colluders", "max_providers"):
        if isinstance(values[name], bool) or not isinstance(values[name], int):
            raise ValueError(f"plan.{name} is not an int")
    return DistributedGaussianPlan(**values)


def put_secure_header(content: RecordDict, header: SecureHeader) -> RecordDict:
    """``content`` (a step's message) with the secure header added to its record."""
    meta = _meta(content)
    meta.update({"secure.n-providers": header.n_providers,
                 "secure.min-providers": header.min_providers,
                 "secure.colluders": header.colluders, "secure.max-rows": header.max_rows,
                 "secure.total-rows": header.total_rows, "secure.session": header.session,
                 "secure.ids": list(header.ids)})
    return _record(meta)


def secure_header(content: RecordDict) -> SecureHeader | None:
    """The secure header of a step's message (None: a local-noise step).

    Raises :class:`~privpca.federated.protocol.messages.QueryRefusedError` when it is
    malformed.
    """
    meta = _meta(content)
    if "secure.session" not in meta:
        return None
    try:
        ids = meta["secure.ids"]
        ints = [meta[f"secure.{key}"] for key in ("n-providers", "min-providers", "colluders",
                                                   "max-rows", "total-rows")]
        if not isinstance(ids, list) or not all(isinstance(p, str) for p in ids) or \
                not all(isinstance(v, int) and not isinstance(v, bool) for v in ints) or \
                not isinstance(meta["secure.session"], str):
            raise TypeError("mistyped field")
        return SecureHeader(ints[0], ints[1], ints[2], ints[3], ints[4],
                            meta["secure.session"], tuple(ids))
    except Exception as exc:  # any missing or mistyped field
        raise QueryRefusedError(f"Malformed secure header: {exc!r}") from exc


def announcement_content(reply: ShareReply, keys: AdvertiseKeys,
                         provider: ProviderState) -> RecordDict:
    """A provider's reply to a secure step: its public meta, its plan and its keys only."""
    meta = _provider_meta(provider)
    meta.update({"share.kind": reply.kind, "share.round": int(reply.round),
                 "keys.c": keys.c_public, "keys.s": keys.s_public})
    _put_plan(meta, reply.plan)
    return _record(meta)


def secagg_content(message: Any, *, session: str, round: int,
                   plan: DistributedGaussianPlan | None = None) -> RecordDict:
    """One of SecAgg's messages (stages 2 to 4, both ways) as one record.

    ``session`` and ``round`` name the aggregation; the server's roster also carries the
    ``plan`` it will decode with (each provider compares it with its own).
    """
    meta: dict[str, Any] = {"secagg.session": session, "secagg.round": int(round),
                            "secagg.type": type(message).__name__}
    if plan is not None:
        _put_plan(meta, plan)
    if isinstance(message, KeyRoster):
        meta.update({"ids": [a.provider_id for a in message.keys],
                     "keys.c": [a.c_public for a in message.keys],
                     "keys.s": [a.s_public for a in message.keys]})
    elif isinstance(message, EncryptedShares | ShareDelivery):
        owner = (message.provider_id if isinstance(message, EncryptedShares)
                 else message.recipient)
        meta.update({"owner": owner, "peers": list(message.ciphertexts),
                     "ciphertexts": list(message.ciphertexts.values())})
    elif isinstance(message, MaskedInput):
        meta["owner"] = message.provider_id
        _put_array(meta, "masked", message.masked, np.uint64)
    elif isinstance(message, UnmaskRequest):
        meta.update({"survivors": list(message.survivors), "dropouts": list(message.dropouts)})
    elif isinstance(message, UnmaskReply):
        meta.update({"owner": message.provider_id,
                     "self.ids": list(message.self_mask_shares),
                     "self.shares": list(message.self_mask_shares.values()),
                     "key.ids": list(message.key_shares),
                     "key.shares": list(message.key_shares.values())})
    else:
        raise TypeError(f"Not a secure-aggregation message: {type(message).__name__}")
    return _record(meta)


def _strs(value: Any) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise TypeError("not a list of str")
    return value


def _blobs(value: Any) -> list[bytes]:
    if not isinstance(value, list) or not all(isinstance(v, bytes) for v in value):
        raise TypeError("not a list of bytes")
    return value


def _pairs(keys: Any, values: Any) -> dict[str, bytes]:
    keys, values = _strs(keys), _blobs(values)
    if len(keys) != len(values) or len(set(keys)) != len(keys):
        raise ValueError("ids and values do not pair up")
    return dict(zip(keys, values, strict=True))


def secagg_from_content(content: RecordDict, expected: type
                        ) -> tuple[Any, str, int, DistributedGaussianPlan | None]:
    """``(message, session, round, plan)`` of a record made by :func:`secagg_content`.

    Raises :class:`~privpca.federated.secure.messages.SecureAggregationRefused` (a refused
    message) when the record is not an ``expected`` message or is malformed.
    """
    try:
        meta = _meta(content)
        if meta["secagg.type"] != expected.__name__:
            raise TypeError(f"a {meta['secagg.type']!r}, not a {expected.__name__}")
        session, round_ = meta["secagg.session"], meta["secagg.round"]
        if not isinstance(session, str) or isinstance(round_, bool) or \
                not isinstance(round_, int):
            raise TypeError("session or round mistyped")
        plan = _plan_from_meta(meta) if "plan.coordinates" in meta else None
        message: Any
        if expected is KeyRoster:
            ids = _strs(meta["ids"])
            cs, ss = _blobs(meta["keys.c"]), _blobs(meta["keys.s"])
            if not len(ids) == len(cs) == len(ss):
                raise ValueError("ids and keys do not pair up")
            message = KeyRoster(tuple(AdvertiseKeys(p, c, s)
                                      for p, c, s in zip(ids, cs, ss, strict=True)))
        elif expected is EncryptedShares or expected is ShareDelivery:
            message = expected(str(meta["owner"]), _pairs(meta["peers"], meta["ciphertexts"]))
        elif expected is MaskedInput:
            message = MaskedInput(str(meta["owner"]),
                                  _get_array(meta, "masked", _MASKED_DTYPES).reshape(-1))
        elif expected is UnmaskRequest:
            message = UnmaskRequest(tuple(_strs(meta["survivors"])),
                                    tuple(_strs(meta["dropouts"])))
        elif expected is UnmaskReply:
            message = UnmaskReply(str(meta["owner"]),
                                  _pairs(meta["self.ids"], meta["self.shares"]),
                                  _pairs(meta["key.ids"], meta["key.shares"]))
        else:
            raise TypeError(f"{expected.__name__} is not a secure-aggregation message")
    except Exception as exc:  # any missing or mistyped field
        raise SecureAggregationRefused(f"Malformed secure-aggregation message: {exc!r}") from exc
    return message, session, int(round_), plan
