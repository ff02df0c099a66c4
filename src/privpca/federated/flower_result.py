"""The Flower server's result: the JSON that :func:`~privpca.federated.flower_app.run_server`
returns and writes to its ``output-path``, and the line it prints when the run ends."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np

from privpca.federated.flower_secagg import secure_summary
from privpca.federated.protocol import ServerState
from privpca.federated.protocol.secure_sums import SecureAgreement

__all__ = ["finish_result", "write_result"]


def finish_result(result: dict[str, Any], server: ServerState,
                  secure: SecureAgreement | None) -> None:
    """Put a finished run's releases in ``result``.

    The dropouts, the components and their history, each provider's privacy record, in table
    mode the mean and the variances, the noise level of the providers that stayed, and a
    secure run's agreement.
    """
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
    share = 1.0 if secure is None else 1.0 / math.sqrt(secure.min_providers
                                                       - secure.colluders)
    scales = {pid: float(m["noise-scale"]) * int(m["n-samples"]) * share
              for pid, m in result["providers"].items() if pid not in server.dropped}
    total = sum(int(result["providers"][pid]["n-samples"]) for pid in scales)
    if total:
        result["noise_level"] = math.sqrt(sum(s**2 for s in scales.values())) / total
    if secure is not None:
        result["secure"] = secure_summary(secure, result["providers"], server.table_mode)


def write_result(result: dict[str, Any], output: Any) -> None:
    """Write ``result`` as JSON to ``output`` (none: not written); say on stdout how it ended."""
    if output:
        Path(str(output)).write_text(json.dumps(result))
    print(f"DPS-PCA server: {result['status']}; rounds {result['rounds_completed']}"
          + (f"; error: {result.get('error')}" if result["status"] != "ok" else ""), flush=True)


def _floats(values: Any) -> list[float | str] | None:
    """``values`` as JSON numbers, a non-finite one as its text (``"nan"``); None stays."""
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
