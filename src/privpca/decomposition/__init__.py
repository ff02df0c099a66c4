"""PCA estimators, grouped by privacy model.

* local model: :class:`LocalGaussianPCA`, :class:`LocalSparsePCA` (Wang & Xu);
* central model: :class:`DPPCA`, :class:`PrivateOjaPCA` and the non-private
  :class:`OjaPCA` (Liu, Kong, Jain & Oh);
* central model baselines: :class:`AnalyzeGaussPCA`, :class:`ModSuLQPCA`,
  :class:`NoisyPowerPCA`, :class:`BinghamPCA` (PPCA);
* distributed model: :class:`DPSPCA` (Ge et al.; providers simulated in-process);
* non-private reference: :class:`SparsePCA` (truncated power method).
"""

from privpca.decomposition.analyze_gauss import AnalyzeGaussPCA
from privpca.decomposition.bingham import BinghamPCA
from privpca.decomposition.distributed import DPSPCA
from privpca.decomposition.dp_pca import DPPCA
from privpca.decomposition.local import LocalGaussianPCA, LocalSparsePCA
from privpca.decomposition.mod_sulq import ModSuLQPCA
from privpca.decomposition.noisy_power import NoisyPowerPCA
from privpca.decomposition.oja import OjaPCA
from privpca.decomposition.private_oja import PrivateOjaPCA
from privpca.decomposition.sparse_pca import SparsePCA

__all__ = [
    "DPPCA",
    "DPSPCA",
    "AnalyzeGaussPCA",
    "BinghamPCA",
    "LocalGaussianPCA",
    "LocalSparsePCA",
    "ModSuLQPCA",
    "NoisyPowerPCA",
    "OjaPCA",
    "PrivateOjaPCA",
    "SparsePCA",
]
