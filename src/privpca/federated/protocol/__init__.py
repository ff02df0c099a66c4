"""DPS-PCA (Ge, Wang, Wang, Liu 2018) as a multi-party protocol: the maths, with no engine.

Roles
-----
* A **provider** (:class:`ProviderState`) holds its records ``Xᵢ`` (nᵢ × d, nᵢ public), its
  own noise, its own (ε, δ) and its own release counter. Everything it sends is noised, and
  it refuses malformed messages and every release beyond what it agreed to.
* The **server** (:class:`ServerState`), untrusted, sends the messages, combines the answers
  and post-processes them.

Engines (Flower: :mod:`privpca.federated.flower_app`) and the in-process estimator
(:class:`privpca.DPSPCA`) only move the message objects of this module between the two
(``ServerState.next_message`` → ``ProviderState.handle`` → ``ServerState.receive``); both
therefore compute the same numbers from the same seeds.

The protocol runs the release pipeline's settings: a two-round private mean, a private bound
``Dᵢ`` per provider, T power rounds ``Hᵢ = XᵢᵀXᵢQ/nᵢ + Gᵢ/nᵢ`` combined by the server
(``ThinQR(Threshold(·, ŝ))``, Algorithm 1) and the variances along the result; in the papers'
setting (``centering=None`` and a public ``data_norm``) only the power rounds. Privacy is per
provider, replace one of its records: each release is a Gaussian mechanism whose sensitivity
depends on public inputs and the provider's earlier releases (mean sums Δ = 2Rᵢ; power
answers Δ = Δ(Dᵢ, k) for an orthonormal Q, which is why a provider refuses any other; the
variances and the error bar's residual pair Δ = √2·Dᵢ²), split exactly by the provider's own
:class:`~privpca.pipeline.budget.BudgetPlan`; each provider draws its own noise, so every
record is protected at its provider's (ε, δ) whatever the others do. The steps, the
sensitivities, what the server sees and the refusals in full: docs/DISTRIBUTED.md.

Modules
-------
* :mod:`.messages` — the messages and replies, and a provider's validation of what it receives
  (:class:`Query`, :func:`validate_query`, :class:`QueryRefusedError`, ...);
* :mod:`.agreement` — the steps a setting runs and the releases a provider agrees to
  (:func:`provider_release_limits`);
* :mod:`.counter` — the release counters (:class:`ReleaseCounter`, the file-locked
  :class:`FileReleaseCounter`);
* :mod:`.privacy` — the noise multiplier of the papers' setting, the paper's scale and the
  providers' privacy records;
* :mod:`.provider` — :class:`ProviderState` and its noise (:func:`provider_noise_rng`);
* :mod:`.server` — :class:`ServerState`, the dropout policy (:func:`select_replies`,
  :class:`ProviderDropoutError`);
* :mod:`.failures` — what a provider that cannot answer tells the server: one of the fixed
  codes of :data:`PROVIDER_FAILURES` (:func:`failure_reply`), never its error's text.

This package re-exports their public names.
"""

# ``name as name``: not in __all__, but imported from here by flower_app and
# decomposition.distributed.
from privpca.federated.protocol import messages
from privpca.federated.protocol.agreement import is_table_mode as is_table_mode
from privpca.federated.protocol.agreement import provider_release_limits
from privpca.federated.protocol.counter import FileReleaseCounter, ReleaseCounter
from privpca.federated.protocol.failures import (
    PROVIDER_FAILURES,
    ProviderConfigError,
    ProviderInputError,
    failure_code,
    failure_reply,
)
from privpca.federated.protocol.messages import *  # noqa: F403
from privpca.federated.protocol.privacy import STATISTIC_MECHANISM as STATISTIC_MECHANISM
from privpca.federated.protocol.privacy import (
    dpspca_noise_multiplier,
    dpspca_pipeline,
    paper_noise_scale,
)
from privpca.federated.protocol.privacy import merge_provider_spends as merge_provider_spends
from privpca.federated.protocol.privacy import provider_privacy_record as provider_privacy_record
from privpca.federated.protocol.provider import ProviderState, provider_noise_rng
from privpca.federated.protocol.server import INITS as INITS
from privpca.federated.protocol.server import ServerState, select_replies

__all__ = [
    "PROVIDER_FAILURES",
    "FileReleaseCounter",
    "ProviderConfigError",
    "ProviderInputError",
    "ProviderState",
    "ReleaseCounter",
    "ServerState",
    "dpspca_noise_multiplier",
    "dpspca_pipeline",
    "failure_code",
    "failure_reply",
    "paper_noise_scale",
    "provider_noise_rng",
    "provider_release_limits",
    "select_replies",
    *messages.__all__,
]
