"""Numerical solvers used by the estimators of :mod:`privpca` (pure numerics, no privacy)."""

from privpca.solvers.bingham import (
    ProposalBudgetExceededError,
    mixing_diagnostics,
    sample_bingham_exact,
    sample_bingham_gibbs,
)
from privpca.solvers.eigen import fix_signs, top_eigenvectors
from privpca.solvers.fantope import (
    ADMMIterationInfo,
    ADMMResult,
    FantopeState,
    fantope_admm,
    fantope_projection,
    fantope_threshold,
)
from privpca.solvers.gram import gram_matrix, symmetrise_from_upper
from privpca.solvers.power import (
    power_step,
    random_orthonormal_basis,
    thin_qr,
    top_row_support,
    truncate_rows,
)

__all__ = [
    "ADMMIterationInfo",
    "ADMMResult",
    "FantopeState",
    "ProposalBudgetExceededError",
    "fantope_admm",
    "fantope_projection",
    "fantope_threshold",
    "fix_signs",
    "gram_matrix",
    "mixing_diagnostics",
    "power_step",
    "random_orthonormal_basis",
    "sample_bingham_exact",
    "sample_bingham_gibbs",
    "symmetrise_from_upper",
    "thin_qr",
    "top_eigenvectors",
    "top_row_support",
    "truncate_rows",
]
