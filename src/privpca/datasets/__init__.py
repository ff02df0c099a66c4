"""Data sets: synthetic generators with known truth (real-data loaders come later)."""

from privpca.datasets.synthetic import (
    make_low_rank_gaussian,
    make_signal_noise,
    make_sparse_spiked,
    make_spiked,
    random_orthonormal,
    sparse_basis,
    spiked_covariance,
)

__all__ = [
    "make_low_rank_gaussian",
    "make_signal_noise",
    "make_sparse_spiked",
    "make_spiked",
    "random_orthonormal",
    "sparse_basis",
    "spiked_covariance",
]
