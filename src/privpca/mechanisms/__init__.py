"""Privacy mechanisms: each states its neighbouring relation, sensitivity and calibration."""

from privpca.mechanisms.gaussian import (
    GaussianMechanism,
    analytic_gaussian_delta,
    analytic_gaussian_sigma,
    certified_epsilon,
    classic_gaussian_sigma,
    gaussian_sigma,
    symmetric_gaussian_noise,
)

__all__ = [
    "GaussianMechanism",
    "analytic_gaussian_delta",
    "analytic_gaussian_sigma",
    "certified_epsilon",
    "classic_gaussian_sigma",
    "gaussian_sigma",
    "symmetric_gaussian_noise",
]
