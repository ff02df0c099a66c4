"""Privacy mechanisms: each states its neighbouring relation, sensitivity and calibration."""

from privpca.mechanisms import gaussian
from privpca.mechanisms.gaussian import *  # noqa: F403

__all__ = list(gaussian.__all__)
