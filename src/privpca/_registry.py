"""Names under which the CLI and the experiments find the estimators."""

from __future__ import annotations

from privpca.decomposition.local import LocalGaussianPCA, LocalSparsePCA
from privpca.decomposition._base import BasePrivatePCA

__all__ = ["ESTIMATORS"]

#: CLI name → estimator class. Every class takes n_components, epsilon, delta, data_norm and
#: random_state.
ESTIMATORS: dict[str, type[BasePrivatePCA]] = {
    "local-gaussian": LocalGaussianPCA,
    "local-sparse": LocalSparsePCA,
}
