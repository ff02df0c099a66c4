"""What an experiment is: :class:`Experiment`, its :class:`Panel` s, its result and a method's spec.

An experiment module (one per paper figure/table family) builds :class:`Experiment` objects
and lists them in a module-level ``EXPERIMENTS`` tuple; :mod:`privpca.experiments.registry`
collects them. Experiment modules import this module and :mod:`~privpca.experiments.context`,
never the registry or the runner, so the package has no import cycle
(``tests/test_experiments_layout.py``).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from privpca.experiments.context import RunContext

__all__ = [
    "Experiment",
    "ExperimentResult",
    "FitSpec",
    "MethodFactory",
    "Panel",
    "RunFunction",
]


@dataclass(frozen=True)
class Panel:
    """One subplot of an experiment's figure and one table of its summary.

    Parameters
    ----------
    key : str
        Value of the ``panel`` column of the rows it shows.
    title : str
        Subplot and table title.
    x : str
        Column on the horizontal axis (a setting: ``n``, ``epsilon``, ``p``, ...).
    xlabel : str
    series : tuple of str, default=("method",)
        Columns whose values make one curve (e.g. ``("method", "k")``).
    y : str, default="error"
        Column on the vertical axis.
    ylabel : str, default="‖V̂V̂ᵀ − VVᵀ‖_F"
    logx, logy : bool, default=False
    paper : mapping, default={}
        The paper's number per ``(series label, x)`` where it prints one (tables); shown
        beside ours in the summary.
    """

    key: str
    title: str
    x: str
    xlabel: str
    series: tuple[str, ...] = ("method",)
    y: str = "error"
    ylabel: str = "‖V̂V̂ᵀ − VVᵀ‖_F"
    logx: bool = False
    logy: bool = False
    paper: Mapping[tuple[str, float], float] = field(default_factory=dict)

    def label(self, row: Mapping[str, Any]) -> str:
        """The curve a row belongs to: its ``series`` values, ``name=value`` but for methods."""
        parts = []
        for col in self.series:
            value = row[col]
            parts.append(str(value) if col in ("method", "dataset") else f"{col}={value:g}")
        return ", ".join(parts)


@dataclass
class ExperimentResult:
    """What an experiment function returns.

    Attributes
    ----------
    rows : list of dict
        One dict per run (per fitted estimator): at least ``panel``, ``method``,
        ``repetition``, ``seed``, ``seconds`` and every column a panel plots.
    panels : sequence of Panel
    notes : str
        Markdown appended to the summary (settings that need a word, warnings counted, ...).
    """

    rows: list[dict[str, Any]]
    panels: Sequence[Panel]
    notes: str = ""


RunFunction = Callable[[dict[str, Any], RunContext], ExperimentResult]


@dataclass(frozen=True)
class Experiment:
    """A registered, reproducible experiment.

    Parameters
    ----------
    name : str
        Command-line name (``privpca reproduce NAME``), lower case with dashes.
    paper : str
        The paper reproduced.
    figure : str
        Which figure(s) or table(s).
    description : str
        One or two sentences for ``--list``.
    run_fn : callable ``(params, ctx) -> ExperimentResult``
    quick_params, full_params : mapping
        Keyword parameters of ``run_fn`` for ``--quick`` (each run well under 20 s) and for
        the full run. Both should contain the same keys.
    requires : tuple of str, default=()
        ``"module:attribute"`` names that must import (e.g. ``"privpca:DPSPCA"``); while one
        is missing the experiment is listed as unavailable and refuses to run.
    metric : str
        What the ``error`` column measures (shown in the summary).
    """

    name: str
    paper: str
    figure: str
    description: str
    run_fn: RunFunction
    quick_params: Mapping[str, Any]
    full_params: Mapping[str, Any]
    requires: tuple[str, ...] = ()
    metric: str = "subspace distance ‖V̂V̂ᵀ − VVᵀ‖_F"

    def missing_requirements(self) -> list[str]:
        """The entries of ``requires`` that cannot be imported now."""
        missing = []
        for req in self.requires:
            module, _, attr = req.partition(":")
            try:
                mod = importlib.import_module(module)
            except ImportError:
                missing.append(req)
                continue
            if attr and not hasattr(mod, attr):
                missing.append(req)
        return missing

    def params(self, quick: bool = False, **overrides: Any) -> dict[str, Any]:
        """The parameters of a quick or full run, with ``overrides`` applied."""
        base = dict(self.quick_params if quick else self.full_params)
        unknown = set(overrides) - set(base)
        if unknown:
            raise ValueError(
                f"Unknown parameters for experiment {self.name!r}: {sorted(unknown)}; "
                f"known: {sorted(base)}."
            )
        base.update(overrides)
        return base


@dataclass(frozen=True)
class FitSpec:
    """What a method factory needs to build one estimator for one run.

    ``random_state`` is the estimator's own stream, a ``SeedSequence`` spawned from the run's
    seed (:meth:`~privpca.experiments.seeding.RunStreams.estimator`), never the data's.
    ``options`` carries experiment-specific knobs (e.g. ``{"gibbs_sweeps": 100}``).
    """

    n_components: int
    epsilon: float
    delta: float
    random_state: Any
    ledger: Any
    options: Mapping[str, Any] = field(default_factory=dict)

    def private_kwargs(self) -> dict[str, Any]:
        """``epsilon``, ``delta``, ``random_state`` and ``ledger``: the keyword arguments every
        private estimator takes from the run."""
        return {"epsilon": self.epsilon, "delta": self.delta,
                "random_state": self.random_state, "ledger": self.ledger}


#: A method of an experiment: builds an unfitted estimator (anything with ``fit(X)`` and
#: ``components_`` of shape (k, p)) from a :class:`FitSpec`.
MethodFactory = Callable[[FitSpec], Any]
