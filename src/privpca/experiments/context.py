"""What an experiment function is handed: :class:`RunContext` (seeds, progress), and fitting.

Seeds: run ``key`` (non-negative ints, e.g. ``(panel, setting, repetition)``) of an experiment
with base seed ``b`` has the integer seed ``spawned_int(b, *key)``, i.e. drawn from
``SeedSequence(b).spawn(...)`` along ``key`` (:mod:`~privpca.experiments.seeding`). The CSV
records it; :class:`~privpca.experiments.seeding.RunStreams` spawns the run's independent data,
estimator and extra streams from it, so any single row can be recomputed from its seed.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from sklearn.exceptions import ConvergenceWarning
from tqdm.auto import tqdm

from privpca.exceptions import (
    PrivacyLeakWarning,
    PrivacyWarning,
    RowClippingWarning,
    UnresolvedComponentsWarning,
)
from privpca.experiments.seeding import RunStreams, spawned_int

__all__ = ["RunContext", "eigenvalue_failures", "quiet_fit"]


class RunContext:
    """Handed to an experiment function: seeds, progress bar, quick flag.

    Parameters
    ----------
    seed : int
        Base seed of the whole experiment.
    quick : bool
        Whether this is a ``--quick`` run (experiments may use it to skip expensive extras).
    progress : bool
        Show a tqdm progress bar.
    desc : str
        Progress bar label.
    """

    def __init__(self, seed: int, *, quick: bool = False, progress: bool = True, desc: str = ""):
        self.seed = int(seed)
        self.quick = quick
        self._bar = tqdm(total=0, desc=desc, disable=not progress, unit="run", leave=True)

    def run_seed(self, *key: int) -> int:
        """The seed of the run identified by ``key``: spawned from the base seed along it."""
        return spawned_int(self.seed, *key)

    def streams(self, *key: int) -> RunStreams:
        """The independent streams (data, estimators, extra) of run ``key``."""
        return RunStreams(self.run_seed(*key))

    def start(self, total: int) -> None:
        """Set the number of steps the progress bar counts."""
        self._bar.total = int(total)
        self._bar.refresh()

    def advance(self, steps: int = 1) -> None:
        """Advance the progress bar."""
        self._bar.update(steps)

    def close(self) -> None:
        self._bar.close()


@contextmanager
def _quiet() -> Iterator[None]:
    with warnings.catch_warnings():
        # Clipping and the paper-calibration leak warning are expected in experiments and
        # recorded in privacy_; non-convergence goes to the 'converged' column; a fit that
        # resolves nothing shows in its error.
        for category in (RowClippingWarning, ConvergenceWarning, PrivacyLeakWarning,
                         UnresolvedComponentsWarning):
            warnings.simplefilter("ignore", category)
        warnings.simplefilter("ignore", PrivacyWarning)
        yield


def quiet_fit(estimator: Any, X: Any) -> tuple[Any, float, bool]:
    """Fit with the expected warnings silenced; return ``(estimator, seconds, converged)``."""
    with _quiet():
        start = time.perf_counter()
        estimator.fit(X)
        seconds = time.perf_counter() - start
    return estimator, seconds, bool(getattr(estimator, "converged_", True))


def eigenvalue_failures(estimator: Any) -> dict[str, int]:
    """DP-PCA's steps whose private top-eigenvalue estimate (Algorithm 4) failed, as columns.

    Reads ``history_["eigenvalue_failed"]`` (True where the step reused the previous Λ) and,
    on estimators that predate it, ``~history_["eigen_released"]``. Empty for estimators
    without such a history (the column is left blank in the CSV).
    """
    history = getattr(estimator, "history_", None)
    if not isinstance(history, dict):
        return {}
    failed = history.get("eigenvalue_failed")
    if failed is None:
        released = history.get("eigen_released")
        if released is None:
            return {}
        failed = [not bool(r) for r in released]
    flags = [bool(f) for f in failed]
    return {"steps": len(flags), "eigenvalue_failed_steps": sum(flags)}
