"""Numerical solvers used by the estimators of :mod:`privpca` (pure numerics, no privacy).

The matrix Bingham samplers (the exponential mechanism's draws) are privacy randomness and live
in :mod:`privpca.mechanisms.bingham_sampler`.
"""

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
    "fantope_admm",
    "fantope_projection",
    "fantope_threshold",
    "fix_signs",
    "gram_matrix",
    "power_step",
    "random_orthonormal_basis",
    "symmetrise_from_upper",
    "thin_qr",
    "top_eigenvectors",
    "top_row_support",
    "truncate_rows",
]
