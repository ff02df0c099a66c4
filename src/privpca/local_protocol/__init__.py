"""The local model's protocol (Wang & Xu): what each user computes on their own row and
sends, and how the server combines the reports. (DPS-PCA's providers and server are
:mod:`privpca.federated.protocol`.)
"""

from privpca.local_protocol import local_covariance
from privpca.local_protocol.local_covariance import *  # noqa: F403

__all__ = list(local_covariance.__all__)
