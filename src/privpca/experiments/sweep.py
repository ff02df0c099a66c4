"""The one panel loop: settings × repetitions × methods, each fit a CSV row.

An experiment lists its :class:`Cell` s (one per point of a panel) and gives two functions:
``make_data(cell, rng)`` draws the data and truth of a cell from the run's data stream, and
``fit(X, truths, cell, streams, index, base)`` fits and scores (usually through
:func:`fit_methods`). :func:`sweep` does the rest: per repetition, cells with the same
``sample`` share one run seed and one data draw (e.g. the nested prefixes of a vs-n panel, the
ε grid of one sample), each run's streams are spawned from its seed
(:class:`~privpca.experiments.seeding.RunStreams`), and every estimator gets its own stream
keyed by ``(index of the cell in its sample, method)``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from privpca.experiments.context import RunContext, eigenvalue_failures, quiet_fit
from privpca.experiments.seeding import RunStreams
from privpca.experiments.spec import FitSpec, MethodFactory

__all__ = [
    "Cell",
    "DataFunction",
    "FitFunction",
    "Score",
    "Truths",
    "check_methods",
    "fit_methods",
    "sweep",
]

#: Scores an estimate ``U`` (p, k) against a truth ``V``: the row's metric columns.
Score = Callable[[NDArray[np.float64], NDArray[np.float64]], Mapping[str, float]]
Truths = Mapping[Any, NDArray[np.float64]]


@dataclass(frozen=True)
class Cell:
    """One point of a panel.

    Parameters
    ----------
    panel : str
        The ``panel`` column.
    values : mapping
        The setting's columns (n, p, k, ε, δ, ...), copied into every row of the cell.
    sample : tuple of int
        Cells with equal ``sample`` share, within a repetition, one run seed and one draw of
        the data (``make_data`` is called for the first of them).
    """

    panel: str
    values: Mapping[str, Any]
    sample: tuple[int, ...] = (0,)
    extra: Mapping[str, Any] = field(default_factory=dict)


DataFunction = Callable[[Cell, np.random.Generator], tuple[Any, Truths]]
FitFunction = Callable[[Any, Truths, Cell, RunStreams, int, dict[str, Any]], list[dict[str, Any]]]


def sweep(
    ctx: RunContext,
    cells: Sequence[Cell],
    repetitions: int,
    make_data: DataFunction,
    fit: FitFunction,
    *,
    steps_per_cell: int = 1,
    start: bool = True,
) -> list[dict[str, Any]]:
    """Run every cell ``repetitions`` times; the rows of all fits.

    The run seed of a cell's sample in repetition ``r`` is ``ctx.run_seed(*sample, r)``. Cells
    of one sample should be listed together (only the latest sample's data is kept).
    ``start=False`` leaves the progress bar's total to the caller (several sweeps in one run).
    """
    if start:
        ctx.start(repetitions * len(cells) * steps_per_cell)
    rows: list[dict[str, Any]] = []
    for rep in range(repetitions):
        data: dict[tuple[int, ...], tuple[Any, Truths, RunStreams]] = {}
        used: dict[tuple[int, ...], int] = {}
        for cell in cells:
            if cell.sample not in data:
                streams = ctx.streams(*cell.sample, rep)
                data = {cell.sample: (*make_data(cell, streams.data()), streams)}
            X, truths, streams = data[cell.sample]
            index = used.get(cell.sample, 0)
            used[cell.sample] = index + 1
            base = dict(panel=cell.panel, **cell.values, repetition=rep, seed=streams.seed)
            rows += fit(X, truths, cell, streams, index, base)
    return rows


def check_methods(names: Any, registered: Mapping[str, MethodFactory]) -> list[str]:
    """The method names to run (``None``: every registered one); unknown names refused."""
    chosen = list(registered) if names is None else list(names)
    unknown = [m for m in chosen if m not in registered]
    if unknown:
        raise ValueError(f"Unknown methods {unknown}; choose from {sorted(registered)}.")
    return chosen


def fit_methods(
    X: Any,
    truths: Truths,
    methods: Sequence[str],
    registered: Mapping[str, MethodFactory],
    *,
    streams: RunStreams,
    setting: int,
    base: Mapping[str, Any],
    ctx: RunContext,
    score: Score,
    n_components: int,
    epsilon: float,
    delta: float,
    ledger: Any,
    options: Mapping[str, Any] | None = None,
    truth_key: str | None = None,
) -> list[dict[str, Any]]:
    """Fit every method once on ``X``; one row per (method, truth).

    Method ``j`` gets the stream ``streams.estimator(setting, j)``. Rows carry ``method``, the
    ``score`` columns, ``seconds``, ``converged`` and, for DP-PCA, the number of steps whose
    private eigenvalue estimate failed (:func:`~privpca.experiments.context.eigenvalue_failures`).
    """
    rows = []
    for j, name in enumerate(methods):
        spec = FitSpec(n_components, epsilon, delta, streams.estimator(setting, j), ledger,
                       options or {})
        est, seconds, converged = quiet_fit(registered[name](spec), X)
        U = est.components_.T
        for key, V in truths.items():
            row = dict(base)
            if truth_key is not None:
                row[truth_key] = key
            row.update(method=name, **score(U, V), seconds=seconds, converged=converged,
                       **eigenvalue_failures(est))
            rows.append(row)
        ctx.advance()
    return rows
