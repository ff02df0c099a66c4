"""Names under which the CLI and the experiments find the estimators."""

from __future__ import annotations

from privpca.decomposition._base import BasePrivatePCA
from privpca.decomposition.analyze_gauss import AnalyzeGaussPCA
from privpca.decomposition.bingham import BinghamPCA
from privpca.decomposition.distributed import DPSPCA
from privpca.decomposition.local import LocalGaussianPCA, LocalSparsePCA
from privpca.decomposition.mod_sulq import ModSuLQPCA
from privpca.decomposition.noisy_power import NoisyPowerPCA

__all__ = ["PRIVATE_ESTIMATORS"]

#: CLI name → private estimator class. Every class takes n_components, epsilon, delta,
#: data_norm and random_state (the non-private SparsePCA is not listed).
PRIVATE_ESTIMATORS: dict[str, type[BasePrivatePCA]] = {
    "local-gaussian": LocalGaussianPCA,
    "local-sparse": LocalSparsePCA,
    "analyze-gauss": AnalyzeGaussPCA,
    "mod-sulq": ModSuLQPCA,
    "noisy-power": NoisyPowerPCA,
    "bingham": BinghamPCA,
    "dps-pca": DPSPCA,
}
