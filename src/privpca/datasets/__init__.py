"""Data sets: synthetic generators with known truth, and the papers' real data sets (shipped)."""

from privpca.datasets.real import (
    DatasetChecksumError,
    list_datasets,
    load_colon,
    load_covtype,
    load_dataset,
    load_isolet5,
    load_leukemia,
)
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
    "DatasetChecksumError",
    "list_datasets",
    "load_colon",
    "load_covtype",
    "load_dataset",
    "load_isolet5",
    "load_leukemia",
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
