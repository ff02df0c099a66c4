"""How the protocol's messages and replies travel as Flower records (arrays as exact bytes).

Every message is one ConfigRecord ("meta") in which arrays travel as their exact bytes
(little-endian, with dtype and shape beside them). Flower sends each record, array and
array chunk as an object of its own, one HTTP request per object per hop (server →
SuperLink → SuperNode → ClientApp and back): one record instead of up to seven objects
halves a round's requests.
"""

from __future__ import annotations

import json
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
