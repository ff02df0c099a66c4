"""Multi-party protocols: pure protocol maths (:mod:`.protocol`) and engine adapters.

The Flower adapter (:mod:`privpca.federated.flower_app`) needs the optional extra
``pip install "privpca[federated]"``; nothing here imports Flower.
"""

from privpca.federated.protocol import (
    FileReleaseCounter,
    ProviderDropoutError,
    ProviderState,
    Query,
    QueryRefusedError,
    ReleaseCounter,
    Reply,
    ServerState,
    paper_noise_scale,
)

__all__ = [
    "FileReleaseCounter",
    "ProviderDropoutError",
    "ProviderState",
    "Query",
    "QueryRefusedError",
    "ReleaseCounter",
    "Reply",
    "ServerState",
    "paper_noise_scale",
]
