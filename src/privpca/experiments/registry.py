"""The registry of reproducible experiments (``privpca reproduce NAME``).

An experiment is a plain function ``run_fn(params, ctx) -> ExperimentResult`` plus two
parameter sets (``quick_params`` for CI, ``full_params`` for the paper's setting) and some
metadata (:class:`~privpca.experiments.spec.Experiment`). The built-in ones live in the modules
of :data:`BUILTIN_MODULES`, one per paper figure/table family, each listing its experiments in
a module-level ``EXPERIMENTS`` tuple; this registry imports those modules when first read. The
dependency goes one way: experiment modules import :mod:`~privpca.experiments.spec`,
:mod:`~privpca.experiments.context` and :mod:`~privpca.experiments.sweep`, never this module
or the runner. Your own experiment is added with :func:`register`::

    from privpca.experiments.registry import register
    from privpca.experiments.spec import Experiment, ExperimentResult, Panel

    def run_my_figure(params, ctx):
        ctx.start(total=len(params["eps_grid"]) * params["repetitions"])
        rows = []
        for i, eps in enumerate(params["eps_grid"]):
            for rep in range(params["repetitions"]):
                streams = ctx.streams(i, rep)      # the run's seed, recorded in the CSV
                X, v = ...                         # data from streams.data()
                est = ...                          # random_state=streams.estimator(0)
                rows.append(dict(panel="a", method="dp-pca", epsilon=eps, repetition=rep,
                                 seed=streams.seed, error=err, seconds=sec))
                ctx.advance()
        return ExperimentResult(rows, panels=[Panel("a", "error vs ε", x="epsilon",
                                                    xlabel="ε")])

    register(Experiment(
        name="my-figure", paper="...", figure="Figure 1",
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

from privpca.experiments.spec import (
    Experiment,
    ExperimentResult,
    FitSpec,
    MethodFactory,
    Panel,
)

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

#: Modules whose ``EXPERIMENTS`` are the built-in experiments (one per paper figure/table
#: family). Add the module of a new family here.
BUILTIN_MODULES: tuple[str, ...] = (
    "privpca.experiments.wang_xu_lowdim",
    "privpca.experiments.wang_xu_fig4",
    "privpca.experiments.wang_xu_tables",
    "privpca.experiments.ge_dpspca",
    "privpca.experiments.ge_fig3",
    "privpca.experiments.liu_dppca",
    "privpca.experiments.real_data",
)

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
    # Lazy: importing the experiment modules pulls in every estimator, which `privpca --help`
    # does not need.
    global _loaded
    if not _loaded:
        _loaded = True
        for module in BUILTIN_MODULES:
            for experiment in importlib.import_module(module).EXPERIMENTS:
                register(experiment)


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
