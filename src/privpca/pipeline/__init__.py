"""The release pipeline shared by every estimator: budget split, private centring, private
norm bounds, private scaling, clipping and the charge to the ledger.

* :mod:`privpca.pipeline.budget`: :class:`BudgetPlan`, the frozen split of (ε, δ);
* :mod:`privpca.pipeline.preprocessing`: the central-model mechanisms (mean, bounds, scales);
* :mod:`privpca.pipeline.release`: :class:`ReleasePipeline`, one way through a fit.
"""

from privpca.pipeline.budget import DEFAULT_SHARES, BudgetPlan, PartBudget
from privpca.pipeline.release import ReleasePipeline
from privpca.pipeline.rows import PreparedRows, Statistic, validated_rows
from privpca.pipeline.settings import DEFAULT_NORM_QUANTILE

__all__ = [
    "DEFAULT_NORM_QUANTILE",
    "DEFAULT_SHARES",
    "BudgetPlan",
    "PartBudget",
    "PreparedRows",
    "ReleasePipeline",
    "Statistic",
    "validated_rows",
]
