"""Data sets: synthetic generators with known truth (real-data loaders come later)."""

from privpca.datasets.synthetic import (
    make_dpspca_covariance,
    make_dpspca_data,
    make_low_rank_gaussian,
    make_signal_noise,
    make_sparse_spiked,
    make_spiked,
    random_orthonormal,
    sparse_basis,
    spiked_covariance,
)

__all__ = [
    "make_dpspca_covariance",
    "make_dpspca_data",
    "make_low_rank_gaussian",
    "make_signal_noise",
    "make_sparse_spiked",
    "make_spiked",
    "random_orthonormal",
    "sparse_basis",
    "spiked_covariance",
]
