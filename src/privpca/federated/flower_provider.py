"""A provider's SuperNode node config read into its :class:`ProviderState` (no Flower needed).

The node config's keys are listed in :mod:`privpca.federated.flower_app`; its data file is
read once per process (a changed file is read again). Under secure aggregation
(``aggregation = "secure"``) the provider's own settings (:class:`SecureSettings`) meet the
server's header of each step in :func:`secure_agreement_for`: the step is refused, before
anything is booked, unless the two describe the same agreement.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from privpca.exceptions import NonFiniteInputError
from privpca.federated.protocol import (
    FileReleaseCounter,
    ProviderConfigError,
    ProviderInputError,
    ProviderState,
    QueryRefusedError,
    is_table_mode,
    provider_release_limits,
)
from privpca.federated.protocol.provider_checks import check_secure
from privpca.federated.protocol.secure_sums import SecureAgreement

if TYPE_CHECKING:  # Flower's wire types: only a Flower step passes a header
    from privpca.federated.flower_wire import SecureHeader

#: The aggregations a provider or a server may agree to (``aggregation`` in their configs).
AGGREGATIONS = ("local-noise", "secure")

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


@dataclass(frozen=True)
class SecureSettings:
    """One party's own secure-aggregation settings (its node or run config; all public).

    ``min_providers`` None means every provider of the run (N, as the server announces it);
    ``max_rows`` None, a provider's: the server's (checked to cover its own nᵢ); the server's:
    the largest nᵢ of the handshake.
    """

    min_providers: int | None
    colluders: int
    max_rows: int | None

    @property
    def min_providers_text(self) -> str:
        """``min-providers`` as the handshake compares it (``"all"``: every provider)."""
        return "all" if self.min_providers is None else str(self.min_providers)


def _optional_int(value: Any, name: str, low: int) -> int | None:
    """A config's int setting (None: unset, ``"all"`` or ``"auto"``), at least ``low``."""
    if value is None or str(value).strip().lower() in ("", "all", "none", "auto"):
        return None
    if isinstance(value, bool) or (isinstance(value, float) and not value.is_integer()):
        raise ValueError(f"{name} must be an int >= {low}; got {value!r}.")
    number = int(str(value).strip()) if isinstance(value, str) else int(value)
    if number < low:
        raise ValueError(f"{name} must be an int >= {low}; got {value!r}.")
    return number


def aggregation_settings(config: dict[str, Any]) -> SecureSettings | None:
    """A node or run config's aggregation: None for ``"local-noise"`` (the default).

    Raises ValueError for an unknown aggregation or settings no run could honour
    (``min-providers`` below 2, ``colluders`` not below ``min-providers`` − 1).
    """
    mode = str(config.get("aggregation", "local-noise"))
    if mode not in AGGREGATIONS:
        raise ValueError(f"aggregation must be one of {list(AGGREGATIONS)}; got {mode!r}.")
    if mode == "local-noise":
        return None
    m = _optional_int(config.get("min-providers"), "min-providers", 2)
    t = _optional_int(config.get("colluders", 0), "colluders", 0) or 0
    if m is not None and not t < m - 1:
        raise ValueError(f"colluders must be from 0 to min-providers - 2 = {m - 2} (the sum "
                         f"must keep at least two honest shares); got {t}.")
    return SecureSettings(m, t, _optional_int(config.get("max-rows"), "max-rows", 1))


def secure_agreement_for(settings: SecureSettings, header: SecureHeader, provider_id: str,
                         n_samples: int) -> SecureAgreement:
    """The agreement of one secure step: the provider's own settings, the run's size from the
    server's header.

    Raises :class:`~privpca.federated.protocol.messages.QueryRefusedError` (nothing booked)
    when the header's ``min-providers``, ``colluders`` or ``max-rows`` are not the
    provider's own, when ``max-rows`` is below its nᵢ (its answers would not fit the plan),
    or when the step's providers do not include it, repeat, or are fewer than
    ``min-providers`` (no sum of them could be opened) or more than N.
    """
    N = header.n_providers
    m = N if settings.min_providers is None else settings.min_providers
    wrong = {key: (mine, theirs) for key, mine, theirs in (
        ("min-providers", m, header.min_providers),
        ("colluders", settings.colluders, header.colluders),
        ("max-rows", settings.max_rows, header.max_rows)) if mine is not None and mine != theirs}
    if wrong:
        raise QueryRefusedError(f"provider {provider_id}: the server's secure agreement differs "
                                f"from this provider's (mine, the server's): {wrong}.")
    if not n_samples <= header.max_rows <= header.total_rows:
        raise QueryRefusedError(f"provider {provider_id}: the server's max-rows "
                                f"{header.max_rows} and total rows {header.total_rows} do not "
                                f"cover this provider's {n_samples} rows.")
    ids = header.ids
    if provider_id not in ids or len(set(ids)) != len(ids) or not m <= len(ids) <= N:
        raise QueryRefusedError(f"provider {provider_id}: the step's providers {list(ids)} must "
                                f"include it, once each, and number from {m} to {N}.")
    try:
        return SecureAgreement(N, m, settings.colluders, header.max_rows, header.total_rows)
    except ValueError as exc:
        raise QueryRefusedError(f"provider {provider_id}: {exc}") from exc


def load_provider(node_config: dict[str, Any], header: SecureHeader | None = None, *,
                  step: bool = False) -> ProviderState:
    """The provider described by a SuperNode's node config (see the module docstring).

    ``header`` is the secure header of the step being answered (``step=True``): a secure
    provider's agreement for it (:func:`secure_agreement_for`). A step whose header does not
    match the provider's ``aggregation`` is refused
    (:class:`~privpca.federated.protocol.messages.QueryRefusedError`).

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
        pid = str(node_config["provider-id"])  # never the file's name: it can say what it holds
        state_path = str(node_config["state-path"])
        secure_settings = aggregation_settings(node_config)
    except KeyError as exc:
        raise ProviderConfigError(
            f"Provider node config lacks {exc}; see privpca provider --help.") from exc
    except (TypeError, ValueError) as exc:  # a setting that is not a number, bad JSON
        raise ProviderConfigError(f"Provider node config: {exc}") from exc
    if step and (header is None) != (secure_settings is None):
        raise QueryRefusedError(
            f"provider {pid} agreed to aggregation="
            f"{'local-noise' if secure_settings is None else 'secure'}; the server's step is "
            f"{'secure' if header is not None else 'local-noise'}. Refused.")
    X = _load_data(data_path, stream)
    streamed = hasattr(X, "n_samples")
    n_rows = int(X.n_samples) if streamed else int(X.shape[0])
    if secure_settings is not None:  # the estimator's refusal, before anything is released
        try:
            check_secure(pid, True, centering, data_norm, streamed)
        except ValueError as exc:
            raise ProviderConfigError(str(exc)) from exc
    secure = (None if secure_settings is None
              else _handshake_agreement(secure_settings, n_rows) if header is None
              else secure_agreement_for(secure_settings, header, pid, n_rows))
    seed = node_config.get("noise-seed")
    agreement: dict[str, Any] = {
        "data-path": str(Path(data_path).resolve()),
        "shape": [int(X.n_samples), int(X.n_features)] if streamed else list(X.shape),
        "epsilon": epsilon, "delta": delta, "n-rounds": T, "n-components": k,
        "data-norm": data_norm}
    # The papers' setting's agreement omits these, so its state files match as they are.
    if is_table_mode(centering, data_norm):
        agreement.update({"centering": centering or "none", "budget-shares": shares})
    if secure_settings is not None:  # local-noise state files keep their agreement as it was
        agreement.update({"aggregation": "secure", "colluders": secure_settings.colluders,
                          "min-providers": secure_settings.min_providers_text})
    limits = provider_release_limits(T, centering, data_norm, secure=secure is not None)
    counter = FileReleaseCounter(state_path, limits, agreement)
    if secure is not None and header is not None:
        _pin_secure_run(counter, secure, pid)
    try:
        return ProviderState(X, n_components=k, epsilon=epsilon, delta=delta, n_rounds=T,
                             data_norm=data_norm, centering=centering, budget_shares=shares,
                             noise_seed=None if seed is None else int(seed), provider_id=pid,
                             counter=counter, secure=secure)
    except NonFiniteInputError:
        raise
    except (TypeError, ValueError) as exc:  # its settings, checked against the table's shape
        raise ProviderConfigError(str(exc)) from exc


#: The union a secure provider's handshake plans over (the server states Σnᵢ with its first
#: step, checked then): large enough that no private search is short of rows, so that the
#: handshake checks the provider's settings, not its own nᵢ against a plan that is the union's.
_HANDSHAKE_ROWS = 10**9


def _handshake_agreement(settings: SecureSettings, n_rows: int) -> SecureAgreement:
    """A provisional agreement for the handshake: the provider's own m and t, its nᵢ as the
    largest, and a union of :data:`_HANDSHAKE_ROWS` rows. Nothing is released under it."""
    t = settings.colluders
    n = max(2, settings.min_providers or 2, t + 2)
    m = n if settings.min_providers is None else settings.min_providers
    try:
        return SecureAgreement(n, m, t, n_rows, max(_HANDSHAKE_ROWS, n_rows))
    except ValueError as exc:
        raise ProviderConfigError(str(exc)) from exc


def _pin_secure_run(counter: FileReleaseCounter, secure: SecureAgreement, pid: str) -> None:
    """Keep the first secure step's run size in the state file and refuse any later step of
    another. The plan's split and the noise shares follow from (N, m, max-rows, Σnᵢ), which
    the server states in every step's header; a server that changed them between steps would
    have the provider answer parts of two different plans, whose shares together may exceed
    the one (ε, δ) agreed."""
    size = {"n-providers": secure.n_providers, "min-providers": secure.min_providers,
            "max-rows": secure.max_rows, "total-rows": secure.total_rows}
    pinned = counter.recall("secure-run")
    if pinned is None:
        counter.remember("secure-run", size)
    elif pinned != size:
        raise QueryRefusedError(
            f"provider {pid}: this step's secure run {size} differs from the one its state "
            f"file has answered for ({pinned}): answering would mix two budget plans. Refused "
            "(a new run on the same data needs the data owner's decision: a new state file).")


def _flag(value: Any) -> bool:
    """A node config's boolean (``true``, ``"true"`` or ``1``)."""
    return str(value).lower() in ("true", "1")
