"""Data sets: synthetic generators with known truth, and the papers' real data sets (shipped)."""

from privpca.datasets import real, synthetic
from privpca.datasets.real import *  # noqa: F403
from privpca.datasets.synthetic import *  # noqa: F403

__all__ = [*real.__all__, *synthetic.__all__]
