"""Data sets: synthetic generators with known truth (real-data loaders come later)."""

from privpca.datasets.synthetic import (
    make_sparse_spiked,
    make_spiked,
    random_orthonormal,
    spiked_covariance,
)

__all__ = ["make_sparse_spiked", "make_spiked", "random_orthonormal", "spiked_covariance"]
