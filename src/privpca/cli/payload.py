"""What ``privpca fit`` releases: the JSON payload of a fitted estimator (strict JSON, NaN and
infinities as ``null``) and the summary it prints on stderr."""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np

from privpca._config import secure_mode

#: The summary's gloss of ``privacy_.noise_mode`` (docs/SECURITY.md).
_NOISE_MODE_WORDS = {
    "secure": "secure mode on, the default without --seed: OS-keyed cryptographic generator, "
              "exact discrete noise on a grid",
    "reproducible": "seeded float noise: a reproducible run, not a release",
    "float": "float noise: secure_mode=False",
}


def _finite_or_none(value: Any) -> Any:
    """JSON-safe numbers: arrays to lists, NaN and infinities to None (JSON ``null``)."""
    if value is None:
        return None
    if isinstance(value, np.ndarray) or isinstance(value, (list, tuple)):
        return [_finite_or_none(v) for v in np.asarray(value, dtype=np.float64).tolist()]
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def _strict_json(value: Any) -> Any:
    """``value`` with every NaN or infinite float nested in it replaced by None (strict JSON
    has no NaN; the privacy record already writes its top-level infinities as text)."""
    if isinstance(value, dict):
        return {key: _strict_json(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_strict_json(item) for item in value]
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def _fit_payload(method: str, est: Any, n_features: int, names: list[str]) -> dict[str, Any]:
    """What ``privpca fit`` writes: released attributes only (NaN or absent: ``null``)."""
    params = {key: value for key, value in est.get_params().items() if key != "ledger"}
    components = np.asarray(est.components_, dtype=np.float64)
    scale = getattr(est, "scale_", None)
    data_norm = getattr(est, "data_norm_", None)
    if data_norm is None and not isinstance(params.get("data_norm"), str):
        data_norm = params.get("data_norm")
    return {
        "method": method,
        "estimator": repr(est),
        "params": _strict_json(json.loads(json.dumps(params, default=str))),
        # n as the privacy record has it: public under replace-one neighbours, null where
        # the relation makes it a private count.
        "n_samples": est.privacy_.n_samples,
        "n_features": int(n_features),
        "feature_names": names,
        "n_components": int(getattr(est, "n_components_", None) or components.shape[0]),
        "components": _finite_or_none(components),
        "mean": _finite_or_none(getattr(est, "mean_", None)),
        "scale": None if scale is None else _finite_or_none(scale),
        "data_norm": _finite_or_none(data_norm),
        "explained_variance": _finite_or_none(getattr(est, "explained_variance_", None)),
        "explained_variance_ratio": _finite_or_none(
            getattr(est, "explained_variance_ratio_", None)),
        "noise_level": _finite_or_none(getattr(est, "noise_level_", None)),
        "expected_error": _finite_or_none(getattr(est, "expected_error_", None)),
        "privacy": _strict_json(est.privacy_.to_dict()),
    }


def _summary(payload: dict[str, Any], est: Any) -> str:
    def fmt(values: Any) -> str:
        if values is None:
            return "not released"
        return ", ".join("n/a" if v is None else f"{v:.3g}" for v in values)

    lines = [
        f"{type(est).__name__}: k = {payload['n_components']} of {payload['n_features']} "
        f"features, n = {payload['n_samples'] if payload['n_samples'] is not None else 'private'}",
        f"  explained variance ratio (private): {fmt(payload['explained_variance_ratio'])}",
    ]
    if "mechanism" in payload:  # --method auto: what privpca.PCA chose, and why
        lines.insert(1, f"  mechanism: {payload['mechanism']} (--method auto, "
                        f"{payload['model']} model): {payload['selection_reason']}")
    error = payload["expected_error"]
    k, p = payload["n_components"], payload["n_features"]
    cap = math.sqrt(2 * min(k, p - k))
    if error is None:
        text = "not available: nothing this fit released bounds it"
    elif cap == 0:
        text = "0: every component is kept (k = p), so the span is the whole space"
    elif error >= cap * (1 - 1e-9):
        text = (f"the bound is not informative at this size (it is its maximum, {cap:.3g}); "
                "this does not mean the result is inaccurate")
    else:
        text = (f"<= {error:.3g} with probability 95 % (maximum {cap:.3g}; an estimate from "
                "the released, noisy values; rows far longer than the bound, which no release "
                "sees, are not covered)")
    lines.append(f"  expected subspace error ‖V̂V̂ᵀ − VVᵀ‖_F: {text}")
    lines.append(f"  privacy: {est.privacy_.headline()}")
    mode = est.privacy_.noise_mode
    words = _NOISE_MODE_WORDS.get(mode, "see privacy notes")
    if mode == "secure" and secure_mode():
        words = words.replace("the default without --seed", "strict: PRIVPCA_SECURE_MODE=1, "
                                                            "a seed is refused")
    lines.append(f"  noise: {mode} ({words})")
    return "\n".join(lines)
