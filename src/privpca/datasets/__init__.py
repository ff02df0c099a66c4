"""Data sets: synthetic generators with known truth, the papers' real data sets (shipped), and
public tables that ship inside scikit-learn and statsmodels (the real-table suite)."""

from privpca.datasets import packaged, real, synthetic
from privpca.datasets.packaged import *  # noqa: F403
from privpca.datasets.real import *  # noqa: F403
from privpca.datasets.synthetic import *  # noqa: F403

__all__ = [*packaged.__all__, *real.__all__, *synthetic.__all__]
