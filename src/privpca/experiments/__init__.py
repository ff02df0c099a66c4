"""Experiments: the demo, and the papers' reproductions (``privpca reproduce``).

Layout (imports go down this list, never up; ``tests/test_experiments_layout.py``):

* :mod:`~privpca.experiments.seeding`: independent data/estimator/extra streams spawned from
  a run's seed (``SeedSequence.spawn``);
* :mod:`~privpca.experiments.context`: :class:`RunContext` (seeds, progress) and fitting;
* :mod:`~privpca.experiments.spec`: :class:`Experiment`, :class:`Panel`, results, method specs;
* :mod:`~privpca.experiments.sweep`: the one panel loop (settings × repetitions × methods);
* one module per paper figure/table family, each listing its ``EXPERIMENTS``
  (``wang_xu_lowdim``, ``wang_xu_fig4``, ``wang_xu_tables``, ``ge_dpspca``, ``ge_fig3``,
  ``liu_dppca``, ``real_data``);
* :mod:`~privpca.experiments.registry`: collects them; :func:`register` adds yours;
* :mod:`~privpca.experiments.runner`: runs one and writes its CSV, PNG and markdown summary.
"""

from privpca.experiments.context import RunContext
from privpca.experiments.registry import get_experiment, list_experiments, register
from privpca.experiments.runner import RunOutput, run_experiment
from privpca.experiments.seeding import RunStreams
from privpca.experiments.spec import Experiment, ExperimentResult, FitSpec, Panel

__all__ = [
    "Experiment",
    "ExperimentResult",
    "FitSpec",
    "Panel",
    "RunContext",
    "RunOutput",
    "RunStreams",
    "get_experiment",
    "list_experiments",
    "register",
    "run_experiment",
]
