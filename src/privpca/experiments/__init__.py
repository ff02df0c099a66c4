"""Experiments: the demo, and the papers' reproductions (``privpca reproduce``).

:mod:`~privpca.experiments.registry` holds the registry (:class:`Experiment`, :func:`register`),
:mod:`~privpca.experiments.runner` runs one and writes its CSV, PNG and markdown summary, and
one module per paper registers its experiments (:mod:`~privpca.experiments.wang_xu`,
:mod:`~privpca.experiments.ge_dpspca`).
"""

from privpca.experiments.registry import (
    Experiment,
    ExperimentResult,
    FitSpec,
    Panel,
    get_experiment,
    list_experiments,
    register,
)
from privpca.experiments.runner import RunContext, RunOutput, run_experiment

__all__ = [
    "Experiment",
    "ExperimentResult",
    "FitSpec",
    "Panel",
    "RunContext",
    "RunOutput",
    "get_experiment",
    "list_experiments",
    "register",
    "run_experiment",
]
