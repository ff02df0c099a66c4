"""PCA estimators, grouped by privacy model."""

from privpca.decomposition.local import LocalGaussianPCA, LocalSparsePCA

__all__ = ["LocalGaussianPCA", "LocalSparsePCA"]
