"""A provider's SuperNode node config read into its :class:`ProviderState` (no Flower needed).

The node config's keys are listed in :mod:`privpca.federated.flower_app`; its data file is
read once per process (a changed file is read again).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from privpca.exceptions import NonFiniteInputError
from privpca.federated.protocol import (
    FileReleaseCounter,
    ProviderConfigError,
    ProviderInputError,
    ProviderState,
    is_table_mode,
    provider_release_limits,
)

#: The last data file read (its identity and array): a long-running provider process
#: (:mod:`.flower_node`) reads its data once, not per message; a changed file is read again.
_DATA_CACHE: dict[str, tuple[tuple[int, ...], np.ndarray]] = {}


def _load_data(path: str, stream: bool = False) -> Any:
    """The provider's table: an array, or (a Parquet file or folder; a ``.npy`` with
    ``stream``) a streamed table read by one pass per release, never held in memory
    (:mod:`privpca.federated.protocol.provider_rows`).

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
    # The papers' setting's agreement omits these, so its state files match as they are.
    if is_table_mode(centering, data_norm):
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
