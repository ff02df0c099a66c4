"""Client/server protocols: what each party computes and sends."""

from privpca.protocols import local_covariance
from privpca.protocols.local_covariance import *  # noqa: F403

__all__ = list(local_covariance.__all__)
