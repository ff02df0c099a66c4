"""Client/server protocols: what each party computes and sends."""

from privpca.protocols.local_covariance import (
    LocalCovarianceAggregator,
    LocalCovarianceRandomiser,
    covariance_sensitivity,
    pack_upper_triangle,
    simulate_report_sum,
    unpack_upper_triangle,
)

__all__ = [
    "LocalCovarianceAggregator",
    "LocalCovarianceRandomiser",
    "covariance_sensitivity",
    "pack_upper_triangle",
    "simulate_report_sum",
    "unpack_upper_triangle",
]
