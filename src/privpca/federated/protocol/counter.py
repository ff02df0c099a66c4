"""A provider's release counter: in memory, or in a JSON state file under an exclusive lock.

The counter books each release *before* it is computed and refuses every release beyond the
agreed limits (:func:`~privpca.federated.protocol.agreement.provider_release_limits`); the file
counter survives process restarts and new runs, and pins the agreement.
"""

from __future__ import annotations

import fcntl
import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from privpca.exceptions import BudgetExceededError

#: Kinds of release a provider counts ("query": the T power answers; "bound_select": the
#: ladder's pilots, where a provider chooses its own bound).
RELEASE_KINDS: tuple[str, ...] = ("mean", "bound", "bound_select", "query", "variance", "count")


class AgreementMismatchError(BudgetExceededError):
    """A state file records another agreement than the provider's: no second budget opens.

    A :class:`~privpca.exceptions.BudgetExceededError`, told apart so that the server hears
    ``bad-agreement``, not ``over-budget``.
    """


def _limits(limit: int | Mapping[str, int]) -> dict[str, int]:
    if isinstance(limit, Mapping):
        out = {str(k): int(v) for k, v in limit.items()}
        unknown = sorted(set(out) - set(RELEASE_KINDS))
        if unknown:
            raise ValueError(f"Unknown release kind(s) {unknown}; the kinds are {RELEASE_KINDS}.")
        return out
    return {"query": int(limit)}


def _refusal(limit: int, used: int, kind: str, where: str = "") -> BudgetExceededError:
    return BudgetExceededError(
        f"This provider agreed to {limit} releases ({kind}) and has made {used}{where}: "
        "query refused, nothing released."
    )


class ReleaseCounter:
    """Counts a provider's releases of each kind and refuses more than agreed (in memory).

    Parameters
    ----------
    limit : int or mapping of str to int
        The releases agreed: an int is T power answers (the papers' setting); a mapping gives
        each kind's limit (:func:`~privpca.federated.protocol.agreement.provider_release_limits`).

    The counter also keeps the values a provider released that it needs again (its bounds and
    the mean it was given), so that a restarted provider reuses them instead of releasing
    them again.
    """

    def __init__(self, limit: int | Mapping[str, int]) -> None:
        self.limits = _limits(limit)
        self._counts = dict.fromkeys(self.limits, 0)
        self._values: dict[str, Any] = {}

    @property
    def limit(self) -> int:
        """All releases agreed, every kind together."""
        return sum(self.limits.values())

    @property
    def used(self) -> int:
        """How many releases have been made, every kind together."""
        return sum(self.counts().values())

    def counts(self) -> dict[str, int]:
        """Releases made, per kind."""
        return dict(self._counts)

    def used_by(self, kind: str) -> int:
        """Releases of ``kind`` made."""
        return int(self.counts().get(kind, 0))

    def reserve(self, kind: str = "query") -> int:
        """Book one release of ``kind`` *before* it is computed; return its 0-based index.

        Raises
        ------
        BudgetExceededError
            When the agreed releases of this kind have all been made.
        """
        limit, used = self.limits.get(kind, 0), self._counts.get(kind, 0)
        if used >= limit:
            raise _refusal(limit, used, kind)
        self._counts[kind] = used + 1
        return used

    def remember(self, name: str, value: Any) -> None:
        """Keep a released (or received, public) value for later messages."""
        self._values[name] = value

    def recall(self, name: str, default: Any = None) -> Any:
        """A value kept by :meth:`remember` (``default`` if none)."""
        return self._values.get(name, default)


class FileReleaseCounter(ReleaseCounter):
    """A :class:`ReleaseCounter` kept in a JSON file under an exclusive lock.

    The count survives process restarts (Flower starts a fresh ClientApp process for every
    message) and new runs: a server that starts a second run against the same data finds the
    budget spent. The file also pins the agreement (ε, δ, T, k, the pipeline's settings) and a
    fingerprint of the data; a provider restarted with other parameters on the same state
    file is refused rather than silently granted a fresh budget. It also keeps the values the
    provider released and needs again (its bounds, the mean): they stay on the provider's
    machine. Deleting the file is the data owner's decision.
    """

    def __init__(self, path: str | os.PathLike[str], limit: int | Mapping[str, int],
                 agreement: dict[str, Any]) -> None:
        super().__init__(limit)
        self.path = Path(path)
        self.agreement = dict(agreement)
        with self._locked() as state:
            self._counts = dict(state["by-kind"])

    def _locked(self) -> _LockedState:
        return _LockedState(self.path, self.limits, self.agreement)

    def counts(self) -> dict[str, int]:
        with self._locked() as state:
            return {str(k): int(v) for k, v in state["by-kind"].items()}

    def reserve(self, kind: str = "query") -> int:
        with self._locked() as state:
            counts = state["by-kind"]
            limit, used = self.limits.get(kind, 0), int(counts.get(kind, 0))
            if used >= limit:
                raise _refusal(limit, used, kind, f" (state file {self.path})")
            counts[kind] = used + 1
            state["releases"] = int(sum(counts.values()))
        self._counts = dict(counts)
        return used

    def remember(self, name: str, value: Any) -> None:
        with self._locked() as state:
            state.setdefault("released", {})[name] = value

    def recall(self, name: str, default: Any = None) -> Any:
        with self._locked() as state:
            return state.get("released", {}).get(name, default)


class _LockedState:
    """Context manager: read the state file under ``flock``, write it back on clean exit."""

    def __init__(self, path: Path, limits: dict[str, int], agreement: dict[str, Any]) -> None:
        self.path, self.limits, self.agreement = path, limits, agreement

    def __enter__(self) -> dict[str, Any]:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._fh = open(self.path, "a+")
        fcntl.flock(self._fh, fcntl.LOCK_EX)
        self._fh.seek(0)
        text = self._fh.read()
        if text.strip():
            self.state: dict[str, Any] = json.loads(text)
            if self.state.get("agreement") != self.agreement:
                self._release()
                raise AgreementMismatchError(
                    f"The state file {self.path} records another agreement "
                    f"({self.state.get('agreement')}) than this provider's "
                    f"({self.agreement}); refusing rather than opening a second budget on the "
                    "same data."
                )
            if "by-kind" not in self.state:  # written before the release pipeline
                self.state["by-kind"] = {"query": int(self.state.get("releases", 0))}
        else:
            self.state = {"releases": 0, "by-kind": dict.fromkeys(self.limits, 0),
                          "limit": sum(self.limits.values()), "limits": dict(self.limits),
                          "agreement": self.agreement, "released": {}}
        return self.state

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        try:
            if exc_type is None:
                self._fh.seek(0)
                self._fh.truncate()
                self._fh.write(json.dumps(self.state, sort_keys=True))
                self._fh.flush()
                os.fsync(self._fh.fileno())
        finally:
            self._release()

    def _release(self) -> None:
        fcntl.flock(self._fh, fcntl.LOCK_UN)
        self._fh.close()
