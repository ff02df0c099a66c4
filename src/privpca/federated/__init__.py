"""Multi-party protocols: pure protocol maths (:mod:`.protocol`) and engine adapters.

The Flower adapter (:mod:`privpca.federated.flower_app`) needs the optional extra
``pip install "privpca[federated]"``; nothing here imports Flower.
"""

from privpca.federated import protocol
from privpca.federated.protocol import *  # noqa: F403

__all__ = list(protocol.__all__)
