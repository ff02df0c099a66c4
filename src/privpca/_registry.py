"""Names under which the CLI and the experiments find the estimators."""

from __future__ import annotations

from privpca.decomposition._base import BasePrivatePCA
from privpca.decomposition.analyze_gauss import AnalyzeGaussPCA
from privpca.decomposition.bingham import BinghamPCA
from privpca.decomposition.distributed import DPSPCA
from privpca.decomposition.dp_pca import DPPCA
from privpca.decomposition.local import LocalGaussianPCA, LocalSparsePCA
from privpca.decomposition.mod_sulq import ModSuLQPCA
from privpca.decomposition.noisy_power import NoisyPowerPCA
from privpca.decomposition.private_oja import PrivateOjaPCA

__all__ = ["PRIVATE_ESTIMATORS", "TRUST_MODELS"]

#: CLI name → private estimator class. Every class takes n_components, epsilon and
#: random_state; those built on the release pipeline (:mod:`privpca.pipeline.release`) also
#: take delta, centering, data_norm (or PrivateOjaPCA's clip_norm, its square) and scale. The
#: CLI passes a class only the parameters it accepts, and refuses an option given explicitly
#: for a class that does not take it. The non-private SparsePCA and OjaPCA are not listed.
PRIVATE_ESTIMATORS: dict[str, type[BasePrivatePCA]] = {
    "local-gaussian": LocalGaussianPCA,
    "local-sparse": LocalSparsePCA,
    "analyze-gauss": AnalyzeGaussPCA,
    "mod-sulq": ModSuLQPCA,
    "noisy-power": NoisyPowerPCA,
    "bingham": BinghamPCA,
    "private-oja": PrivateOjaPCA,
    "dp-pca": DPPCA,
    "dps-pca": DPSPCA,
}

#: CLI name → the trust model of its guarantee (``privacy_.model``): who sees raw rows. A
#: trusted curator ("central"), each data provider its own ("distributed"), or nobody
#: ("local"). :class:`privpca.PCA` refuses a mechanism that needs more trust than its model.
TRUST_MODELS: dict[str, str] = {
    "local-gaussian": "local",
    "local-sparse": "local",
    "analyze-gauss": "central",
    "mod-sulq": "central",
    "noisy-power": "central",
    "bingham": "central",
    "private-oja": "central",
    "dp-pca": "central",
    "dps-pca": "distributed",
}
