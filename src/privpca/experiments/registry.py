"""The registry of reproducible experiments (``privpca reproduce NAME``).

An experiment is a plain function ``run_fn(params, ctx) -> ExperimentResult`` plus two
parameter sets (``quick_params`` for CI, ``full_params`` for the paper's setting) and some
metadata. Registering one takes a few lines in any module listed in :data:`BUILTIN_MODULES`
(or imported before the registry is read)::

    from privpca.experiments.registry import Experiment, ExperimentResult, Panel, register

    def run_my_figure(params, ctx):
        ctx.start(total=len(params["eps_grid"]) * params["repetitions"])
        rows = []
        for i, eps in enumerate(params["eps_grid"]):
            for rep in range(params["repetitions"]):
                seed = ctx.run_seed(i, rep)        # recorded in the CSV
                ...                                # fit, score, time
                rows.append(dict(panel="a", method="dp-pca", epsilon=eps,
                                 repetition=rep, seed=seed, error=err, seconds=sec))
                ctx.advance()
        return ExperimentResult(rows, panels=[Panel("a", "error vs ε", x="epsilon",
                                                    xlabel="ε")])

    register(Experiment(
        name="liu-fig1", paper="Liu et al. (2022), DP-PCA", figure="Figure 1",
        description="...", run_fn=run_my_figure,
        quick_params={"eps_grid": (1.0,), "repetitions": 2},
        full_params={"eps_grid": (0.5, 1.0, 2.0), "repetitions": 20},
        requires=("privpca:DPPCA",),   # listed but refused while privpca.DPPCA is missing
    ))

The runner (:func:`privpca.experiments.runner.run_experiment`) adds the progress bar, the CSV
of every run, the PNG (one subplot per :class:`Panel`, mean ± standard error) and the markdown
summary; the experiment only produces rows.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from privpca.experiments.runner import RunContext

__all__ = [
    "BUILTIN_MODULES",
    "Experiment",
    "ExperimentResult",
    "FitSpec",
    "MethodFactory",
    "Panel",
    "get_experiment",
    "list_experiments",
    "register",
]

#: Modules whose import registers the built-in experiments (one module per paper). Add the
#: module of a new paper here.
BUILTIN_MODULES: tuple[str, ...] = (
    "privpca.experiments.wang_xu",
    "privpca.experiments.ge_dpspca",
    "privpca.experiments.ge_dpspca_distributed",
    "privpca.experiments.liu_dppca",
    "privpca.experiments.real_data",
)


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


RunFunction = Callable[[dict[str, Any], "RunContext"], ExperimentResult]


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


_REGISTRY: dict[str, Experiment] = {}
_loaded = False


def register(experiment: Experiment, *, replace: bool = False) -> Experiment:
    """Add an experiment to the registry (``replace=True`` to redefine a name)."""
    if experiment.name in _REGISTRY and not replace:
        raise ValueError(f"An experiment named {experiment.name!r} is already registered.")
    if set(experiment.quick_params) != set(experiment.full_params):
        raise ValueError(
            f"{experiment.name}: quick_params and full_params must have the same keys."
        )
    _REGISTRY[experiment.name] = experiment
    return experiment


def _load_builtin() -> None:
    global _loaded
    if not _loaded:
        _loaded = True
        for module in BUILTIN_MODULES:
            importlib.import_module(module)


def list_experiments() -> list[Experiment]:
    """Every registered experiment, sorted by name (available or not)."""
    _load_builtin()
    return [_REGISTRY[name] for name in sorted(_REGISTRY)]


def get_experiment(name: str) -> Experiment:
    """The experiment registered as ``name``."""
    _load_builtin()
    if name not in _REGISTRY:
        raise KeyError(f"No experiment named {name!r}. Registered: {', '.join(sorted(_REGISTRY))}.")
    return _REGISTRY[name]


@dataclass(frozen=True)
class FitSpec:
    """What a method factory needs to build one estimator for one run.

    ``options`` carries experiment-specific knobs (e.g. ``{"gibbs_sweeps": 100}``).
    """

    n_components: int
    epsilon: float
    delta: float
    random_state: Any
    ledger: Any
    options: Mapping[str, Any] = field(default_factory=dict)


#: A method of an experiment: builds an unfitted estimator (anything with ``fit(X)`` and
#: ``components_`` of shape (k, p)) from a :class:`FitSpec`.
MethodFactory = Callable[[FitSpec], Any]
