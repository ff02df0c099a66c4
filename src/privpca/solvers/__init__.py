"""Numerical solvers used by the estimators of :mod:`privpca`."""

from privpca.solvers.fantope import (
    ADMMIterationInfo,
    ADMMResult,
    FantopeState,
    fantope_admm,
    fantope_projection,
    fantope_threshold,
)

__all__ = [
    "ADMMIterationInfo",
    "ADMMResult",
    "FantopeState",
    "fantope_admm",
    "fantope_projection",
    "fantope_threshold",
]
