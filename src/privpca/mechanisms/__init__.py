"""Privacy mechanisms: each states its neighbouring relation, sensitivity and calibration."""

from privpca.accounting import calibration
from privpca.accounting.calibration import *  # noqa: F403
from privpca.mechanisms import gaussian
from privpca.mechanisms.bingham_sampler import (
    ProposalBudgetExceededError,
    mixing_diagnostics,
    sample_bingham_exact,
    sample_bingham_gibbs,
)
from privpca.mechanisms.distributed_gaussian import DistributedGaussianPlan
from privpca.mechanisms.gaussian import *  # noqa: F403
from privpca.mechanisms.randomised_response import RandomisedResponse

__all__ = [*gaussian.__all__, *(n for n in calibration.__all__ if n not in gaussian.__all__)]
__all__ += ["DistributedGaussianPlan", "ProposalBudgetExceededError", "RandomisedResponse",
            "mixing_diagnostics", "sample_bingham_exact", "sample_bingham_gibbs"]
