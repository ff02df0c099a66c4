"""Multi-party protocols: pure protocol maths (:mod:`.protocol`) and engine adapters.

The Flower adapter (:mod:`privpca.federated.flower_app`) needs the optional extra
``pip install "privpca[federated]"``; nothing here imports Flower.
"""

from privpca.federated.protocol import (
    FileReleaseCounter,
    MeanQuery,
    MeanReply,
    PrepareMessage,
    PrepareReply,
    ProviderDropoutError,
    ProviderState,
    Query,
    QueryRefusedError,
    ReleaseCounter,
    Reply,
    ServerState,
    VarianceQuery,
    VarianceReply,
    paper_noise_scale,
    provider_release_limits,
)

__all__ = [
    "FileReleaseCounter",
    "MeanQuery",
    "MeanReply",
    "PrepareMessage",
    "PrepareReply",
    "ProviderDropoutError",
    "ProviderState",
    "Query",
    "QueryRefusedError",
    "ReleaseCounter",
    "Reply",
    "ServerState",
    "VarianceQuery",
    "VarianceReply",
    "paper_noise_scale",
    "provider_release_limits",
]
