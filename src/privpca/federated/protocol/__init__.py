"""DPS-PCA (Ge, Wang, Wang, Liu 2018) as a multi-party protocol: the maths, with no engine.

Roles
-----
* A **provider** (:class:`ProviderState`) holds its records ``Xᵢ`` (nᵢ × d), its own noise, its
  own (ε, δ) and its own release counter. Everything it sends is noised, and it refuses
  malformed messages and every release beyond what it agreed to. ``nᵢ`` is public (the
  replace-one relation keeps it fixed).
* The **server** (:class:`ServerState`), untrusted, sends the messages, combines the answers
  and post-processes them.

Engines (Flower: :mod:`privpca.federated.flower_app`) and the in-process estimator
(:class:`privpca.DPSPCA`) only move the message objects of this module between the two
(``ServerState.next_message`` → ``ProviderState.handle`` → ``ServerState.receive``); both
therefore compute the same numbers from the same seeds.

The protocol
------------
Settings are the release pipeline's (:mod:`privpca.pipeline.release`): ``centering``
(``"private"``, ``None`` or a public mean), ``data_norm`` (``"auto"`` or a public bound D),
``scale`` (``False`` or public per-feature scales; private scales are not offered in the
distributed model) and ``budget_shares``.

1. **Mean** (``centering="private"``; two rounds, as the central pipeline's mean). Round r
   sends a public centre ``c`` (0, then the first estimate μ̂₁). Provider i releases a private
   99 % quantile ``Rᵢ`` of ``‖x − c‖`` over its rows (Gaussian noisy bisection on a log
   grid, :func:`~privpca.pipeline.preprocessing.private_norm_bound`) and its own noisy clipped
   sum ``Sᵢ = Σ clip_Rᵢ(x − c) + N(0, (m·2Rᵢ)²I)`` (sent as ``Sᵢ/nᵢ``). The server sets
   ``μ̂ = c + Σ Sᵢ / Σ nᵢ``. The second round's bound is a quantile of the residuals from the
   first estimate, so its noise scales with the spread of the data, not with ‖μ‖.
2. **Prepare** (outside the papers' setting). The server broadcasts the final mean. Each
   provider centres (and divides by public scales), releases a private 99 % quantile ``Dᵢ``
   of its centred row norms (``data_norm="auto"``; else ``Dᵢ = D``, public) and clips its
   rows to ``Dᵢ``.
3. **Power rounds** t = 1..T. The server sends ``Q⁽ᵗ⁾`` (row-sparse: its support and the
   ŝ × k block); provider i answers ``Hᵢ = Σ̂ᵢQ + Gᵢ/nᵢ`` with ``Σ̂ᵢ = XᵢᵀXᵢ/nᵢ`` over its
   prepared rows and ``Gᵢ`` i.i.d. ``N(0, σᵢ²)``, ``σᵢ = m_stat·power_sensitivity(Dᵢ, k)``;
   the server combines ``K = Σ nᵢHᵢ / Σ nᵢ`` and sets ``V = ThinQR(K)``,
   ``Q⁽ᵗ⁺¹⁾ = ThinQR(Threshold(V, ŝ))`` (Algorithm 1 of the paper; Threshold keeps the ŝ rows
   of largest norm, ThinQR has a positive diagonal — :mod:`privpca.solvers.power`).
4. **Variances** (outside the papers' setting). The server sends ``Q = Q⁽ᵀ⁺¹⁾``; provider i
   releases the packed upper triangle of ``QᵀXᵢᵀXᵢQ`` and ``‖Xᵢ‖²_F`` (its prepared rows) with
   Gaussian noise. The server sums them, rotates Q to the eigenvectors of the k × k sum (its
   components, by decreasing variance) and reports their variances and ratios to the total.

In the papers' setting (``centering=None`` and a public ``data_norm``) only step 3 runs, with
the rows clipped to D once.

Privacy (per provider; replace one record of that provider, n public)
-----------------------------------------------------------------------
Every release of provider i is a Gaussian mechanism whose sensitivity is a function of values
it released before (its bounds) and of public inputs (the centre, Q), so its releases are an
adaptive composition; its own :class:`~privpca.pipeline.budget.BudgetPlan` splits its (ε, δ)
across them *exactly* (Gaussian composition identity; the histograms' tails paid from δ):

* quantiles (``bound_raw``, ``bound_residual``, ``bound``): one value per record in one
  histogram, two counts change: L2 sensitivity √2 on the counts, plus the tail;
* mean sums (``mean``, ``mean_refine``): ``clip_R(x − c) − clip_R(y − c)`` has norm ≤ 2R for
  any public c: **Δ = 2Rᵢ**;
* power answers (``statistic``, T releases): replacing ``y`` by ``x`` changes ``XᵢᵀXᵢQ`` by
  ``(xxᵀ − yyᵀ)Q``, whose Frobenius norm is at most ``D²`` for k = 1 and ``√2·D²`` for k ≥ 2
  when Q has orthonormal columns (:func:`privpca.decomposition.noisy_power.power_sensitivity`;
  the bound holds for any ``Q`` with ``‖Q‖₂ ≤ 1``, which is why a provider refuses a Q that is
  not orthonormal: a scaled-up Q would amplify the data against the noise): **Δ = Δ(Dᵢ, k)**;
* variances: the vector ``(u(QᵀxxᵀQ), ‖x‖²)`` (u packs the upper triangle) has norm
  ≤ √2·‖x‖² and two records' vectors have a non-negative inner product, so replacing one moves
  the sum by at most **Δ = √2·Dᵢ²** (:meth:`ReleasePipeline.release_component_spectrum
  <privpca.pipeline.release.ReleasePipeline.release_component_spectrum>`).

Each provider draws its own noise: the pseudo-code's single shared ``G⁽ᵗ⁾`` would be known to
whoever draws it, and the server is not trusted. Everything the server does with the answers,
and the output, is post-processing; since the providers' data are disjoint, every record of
every provider is protected at its provider's (ε, δ) whatever the other providers do
(parallel composition). In the papers' setting the T answers take all of (ε, δ) (multiplier
:func:`dpspca_noise_multiplier`). The paper's scale
``ω(ε, δ) = (2T/ε)·√(2 ln(2T/δ))`` (:func:`paper_noise_scale`, the standard deviation of ``G``)
is recorded for comparison only.

A provider's table may be streamed (not one in-memory array): each release is then one pass
of exact block reductions and the same noise draws (:mod:`privpca.federated.protocol.provider`),
so its answers equal the in-memory ones to rounding, with memory independent of nᵢ.

The start ``Q⁽⁰⁾`` is data-independent (Haar-random from the server's seed, or a public matrix
the user supplies): it costs nothing. A data-dependent start would be one more release and is
not offered. The exact number of rows a provider clipped is a count of its data and never
leaves it (its reports give the private estimate from the bound's histogram instead).

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
    paper_noise_scale,
)
from privpca.federated.protocol.privacy import merge_provider_spends as merge_provider_spends
from privpca.federated.protocol.privacy import provider_privacy_record as provider_privacy_record
from privpca.federated.protocol.provider import ProviderState, provider_noise_rng
from privpca.federated.protocol.server import INITS as INITS
from privpca.federated.protocol.server import ProviderDropoutError, ServerState, select_replies

__all__ = [
    "PROVIDER_FAILURES",
    "FileReleaseCounter",
    "ProviderConfigError",
    "ProviderInputError",
    "ProviderDropoutError",
    "ProviderState",
    "ReleaseCounter",
    "ServerState",
    "dpspca_noise_multiplier",
    "failure_code",
    "failure_reply",
    "paper_noise_scale",
    "provider_noise_rng",
    "provider_release_limits",
    "select_replies",
    *messages.__all__,
]
