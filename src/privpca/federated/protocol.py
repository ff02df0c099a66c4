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
   99 % quantile ``Rᵢ`` of ``‖x − c‖`` over its rows (Gaussian stability histogram on a log
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
the rows clipped to D once, exactly as before the release pipeline existed.

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
:func:`dpspca_noise_multiplier`, as before). The paper's scale
``ω(ε, δ) = (2T/ε)·√(2 ln(2T/δ))`` (:func:`paper_noise_scale`, the standard deviation of ``G``)
is recorded for comparison only.

A provider's table may be streamed (not one in-memory array): each release is then one pass
of exact block reductions and the same noise draws (:mod:`privpca.federated.streamed_rows`),
so its answers equal the in-memory ones to rounding, with memory independent of nᵢ.

The start ``Q⁽⁰⁾`` is data-independent (Haar-random from the server's seed, or a public matrix
the user supplies): it costs nothing. A data-dependent start would be one more release and is
not offered. The exact number of rows a provider clipped is a count of its data and never
leaves it (its reports give the private estimate from the bound's histogram instead).
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import math
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import dp_accounting
import numpy as np
from numpy.typing import ArrayLike, NDArray

from privpca._validation import (
    check_data,
    check_delta,
    check_epsilon,
    check_in_range,
    check_norm_bound,
    row_norms,
    warn_clipped,
)
from privpca.accounting.composition import gaussian_noise_multiplier_for_composition
from privpca.accounting.record import PrivacyRecord, PrivacySpend
from privpca.exceptions import BudgetExceededError
from privpca.federated.streamed_rows import StreamedRows
from privpca.mechanisms.gaussian import certified_epsilon
from privpca.mechanisms.noise import gaussian_release
from privpca.mechanisms.sensitivity import power_sensitivity
from privpca.pipeline.budget import BudgetPlan
from privpca.pipeline.preprocessing import (
    BoundNotFoundError,
    private_mean,
    private_mean_from_sum,
    private_norm_bound,
    private_norm_bound_from_counts,
)
from privpca.pipeline.release import (
    DEFAULT_NORM_QUANTILE,
    PipelineSettings,
    PreparedRows,
    ReleasePipeline,
    Statistic,
)
from privpca.solvers.eigen import fix_signs
from privpca.solvers.power import random_orthonormal_basis, thin_qr, top_row_support

__all__ = [
    "DISTRIBUTED_REPLACE_ONE",
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
    "dpspca_noise_multiplier",
    "paper_noise_scale",
    "provider_noise_rng",
    "provider_release_limits",
    "select_replies",
    "validate_query",
]

DISTRIBUTED_REPLACE_ONE = (
    "replace one record of one provider (any two records of norm <= data_norm; the numbers "
    "of records n_i are public)"
)
#: Largest deviation of QᵀQ from I that a provider accepts (rounding of a ThinQR is ~1e-15).
ORTHONORMALITY_TOL = 1e-8
ON_DROPOUT: tuple[str, ...] = ("error", "continue")
INITS: tuple[str, ...] = ("random", "random-sparse")
#: Rounds of the private mean (a first estimate, then the mean of the residuals).
MEAN_ROUNDS = 2
#: Budget parts (of :mod:`privpca.pipeline.budget`) of each mean round: (bound, sum).
MEAN_PARTS: tuple[tuple[str, str], ...] = (("bound_raw", "mean"),
                                           ("bound_residual", "mean_refine"))
#: Kinds of release a provider counts ("query": the T power answers).
RELEASE_KINDS: tuple[str, ...] = ("mean", "bound", "query", "variance")
#: Spawn keys of the noise streams of the other kinds (the power answers keep their streams).
_KIND_CODES = {"mean": 1, "bound": 2, "variance": 3}
STATISTIC_MECHANISM = "gaussian: XᵢᵀXᵢQ per round, each provider its own noise (Frobenius " \
    "sensitivity)"


class QueryRefusedError(ValueError):
    """A provider refused a malformed message (wrong shape, NaN, non-orthonormal Q, ...)."""


class ProviderDropoutError(RuntimeError):
    """A provider did not answer a round (dropped out, timed out, or refused)."""


def paper_noise_scale(epsilon: float, delta: float, n_rounds: int) -> float:
    """Ge et al.'s ``ω(ε, δ) = (2T/ε)·√(2 ln(2T/δ))`` (std of G; for comparison only)."""
    return 2.0 * n_rounds / epsilon * math.sqrt(2.0 * math.log(2.0 * n_rounds / delta))


_MULTIPLIERS: dict[tuple[float, float, int], float] = {}


def dpspca_noise_multiplier(epsilon: float, delta: float, n_rounds: int) -> float:
    """``m = σ/Δ`` such that ``n_rounds`` Gaussian releases compose to (ε, δ) (cached).

    The multiplier of the papers' setting, where the T power answers are the only releases.
    """
    key = (float(epsilon), float(delta), int(n_rounds))
    if key not in _MULTIPLIERS:
        _MULTIPLIERS[key] = gaussian_noise_multiplier_for_composition(*key)
    return _MULTIPLIERS[key]


def provider_noise_rng(noise_seed: int | None, release: int,
                       kind: str = "query") -> np.random.Generator:
    """The generator of a provider's noise for its ``release``-th release of ``kind`` (0-based).

    With a seed, the noise of a release is a pure function of ``(noise_seed, kind, release)``:
    a provider whose process restarts between messages (as Flower's ClientApp does) draws the
    same stream as one that lives throughout, and an in-process simulation with the same seeds
    gives bitwise the same answers. The power answers use ``default_rng([seed, release])`` (the
    streams of the papers' setting, unchanged); the other kinds are spawned children
    ``SeedSequence(seed, spawn_key=(code, release))``, independent of those. A seed is for
    experiments only: whoever knows it can subtract the noise. ``None`` draws fresh
    operating-system entropy for every release: in secure mode (``PRIVPCA_SECURE_MODE=1`` in
    the provider's environment, or :func:`privpca.config_context`) a ChaCha20
    :class:`~privpca.mechanisms.secure_noise.SecureGenerator` with floating-point-safe noise,
    and a seed is refused.
    """
    from privpca._config import secure_mode

    if secure_mode():
        if noise_seed is not None:
            raise ValueError("Secure mode refuses a provider noise seed: it would make the "
                             "provider's noise reproducible. Leave --noise-seed unset.")
        from privpca.mechanisms.secure_noise import SecureGenerator

        return SecureGenerator()
    if noise_seed is None:
        return np.random.default_rng()
    if kind == "query":
        return np.random.default_rng([int(noise_seed), int(release)])
    seq = np.random.SeedSequence(int(noise_seed), spawn_key=(_KIND_CODES[kind], int(release)))
    return np.random.default_rng(seq)


def is_table_mode(centering: Any, data_norm: Any, scale: Any = False) -> bool:
    """Whether a setting leaves the papers' (no centring, public bound, no scaling)."""
    return (centering is not None or isinstance(data_norm, str)
            or not (isinstance(scale, bool | np.bool_) and not scale))


def provider_release_limits(n_rounds: int, centering: Any = None, data_norm: Any = 1.0,
                            scale: Any = False) -> dict[str, int]:
    """Releases of each kind a provider agrees to for a setting (what its counter enforces).

    ``"mean"``: 2 with private centring; ``"bound"``: 1 with ``data_norm="auto"``; ``"query"``:
    T; ``"variance"``: 1 outside the papers' setting.
    """
    limits: dict[str, int] = {}
    if isinstance(centering, str):
        limits["mean"] = MEAN_ROUNDS
    if isinstance(data_norm, str):
        limits["bound"] = 1
    limits["query"] = int(n_rounds)
    if is_table_mode(centering, data_norm, scale):
        limits["variance"] = 1
    return limits


# --- messages -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Query:
    """"Multiply your covariance by Q": ``Q`` given by its row support and its non-zero block.

    Attributes
    ----------
    round : int
        1-based round number t (informational; the provider counts releases itself).
    support : ndarray of int of shape (m,)
        Sorted indices of the non-zero rows of Q (m = ŝ after thresholding, d for a dense Q).
    block : ndarray of shape (m, k)
        ``Q[support]``; orthonormal columns.
    n_features : int
        d.
    """

    round: int
    support: NDArray[np.intp]
    block: NDArray[np.float64]
    n_features: int

    @classmethod
    def from_dense(cls, Q: NDArray[np.float64], round: int = 0) -> Query:
        """The query for a dense ``(d, k)`` Q (its exactly-zero rows are left out)."""
        Q = np.asarray(Q, dtype=np.float64)
        support = np.flatnonzero(np.any(Q != 0.0, axis=1))
        return cls(round=int(round), support=support, block=Q[support].copy(),
                   n_features=int(Q.shape[0]))

    def to_dense(self) -> NDArray[np.float64]:
        """Q as a ``(d, k)`` array."""
        Q = np.zeros((self.n_features, self.block.shape[1]))
        Q[self.support] = self.block
        return Q


@dataclass(frozen=True)
class Reply:
    """A provider's noised answer ``Hᵢ = Σ̂ᵢQ + Gᵢ/nᵢ`` and its public ``nᵢ``."""

    provider_id: str
    round: int
    n_samples: int
    product: NDArray[np.float64]


@dataclass(frozen=True)
class MeanQuery:
    """"Release your noisy clipped sum around ``centre``" (round 1 or 2 of the private mean).

    Attributes
    ----------
    round : int
        1 (bound on ‖x − c‖, first estimate) or 2 (bound on the residuals, refinement).
    centre : ndarray of shape (n_features,)
        The public centre c (zeros in round 1, the first estimate in round 2).
    """

    round: int
    centre: NDArray[np.float64]


@dataclass(frozen=True)
class MeanReply:
    """A provider's private bound ``Rᵢ`` and noisy clipped sum, sent as ``Sᵢ/nᵢ``."""

    provider_id: str
    round: int
    n_samples: int
    bound: float
    mean: NDArray[np.float64]


@dataclass(frozen=True)
class PrepareMessage:
    """"Centre on this mean, bound and clip your rows" (``mean`` None: no centring)."""

    mean: NDArray[np.float64] | None


@dataclass(frozen=True)
class PrepareReply:
    """The bound ``Dᵢ`` a provider's power answers use (released, or its public D).

    ``clipped_estimate`` is the private estimate of its clipped rows read off the bound's
    histogram (free), NaN with a public bound.
    """

    provider_id: str
    n_samples: int
    data_norm: float
    clipped_estimate: float = math.nan


@dataclass(frozen=True)
class VarianceQuery:
    """"Release the variances of your prepared rows along these components"."""

    components: Query


@dataclass(frozen=True)
class VarianceReply:
    """Noisy packed upper triangle of ``QᵀXᵢᵀXᵢQ`` (k(k+1)/2 values) and noisy ``‖Xᵢ‖²_F``."""

    provider_id: str
    n_samples: int
    packed: NDArray[np.float64]
    total: float


Message = MeanQuery | PrepareMessage | Query | VarianceQuery
AnyReply = MeanReply | PrepareReply | Reply | VarianceReply


def _real_array(value: Any, what: str) -> NDArray[np.float64]:
    """``value`` as a float64 array, refusing what is not a real number array.

    Complex values (``QᵀQ = I`` without the conjugate lets ``‖Q‖₂`` grow without bound),
    object arrays, booleans, strings and floats that do not fit float64 are refused, not
    converted (``np.asarray(z, float)`` would silently drop an imaginary part).
    """
    if isinstance(value, np.ndarray):
        arr = value
    else:
        try:
            arr = np.asarray(value)
        except (TypeError, ValueError) as exc:
            raise QueryRefusedError(f"The {what} is not a numeric array: {exc}") from exc
    if arr.dtype.kind not in "fiu":
        raise QueryRefusedError(
            f"The {what} must be an array of real numbers; got dtype {arr.dtype} "
            "(complex, object, boolean and text arrays are refused)."
        )
    with np.errstate(over="ignore", invalid="ignore"):
        out = np.asarray(arr, dtype=np.float64)
    if not np.all(np.isfinite(out)):
        raise QueryRefusedError(f"The {what} contains NaN or infinity (or overflows float64).")
    return out


def _int_scalar(value: Any, what: str) -> int:
    if isinstance(value, bool | np.bool_) or not isinstance(value, int | np.integer):
        raise QueryRefusedError(f"The {what} must be an int; got {value!r}.")
    return int(value)


def validate_query(query: Any, n_features: int, n_components: int) -> Query:
    """Return ``query`` with real float64/intp arrays, or raise :class:`QueryRefusedError`.

    Checked: the types (a real, finite ``block``, integer ``support``, int ``round`` and
    ``n_features``), ``n_features == d``, a support of unique sorted indices in ``[0, d)``
    with at least k of them, a ``block`` of shape ``(len(support), k)`` and
    ``‖QᵀQ − I‖_max ≤ 1e-8`` (the sensitivity bound needs ``‖Q‖₂ ≤ 1``). The provider computes
    with the returned arrays, never with the caller's.
    """
    if not isinstance(query, Query):
        raise QueryRefusedError(f"Expected a Query; got {type(query).__name__}.")
    d = _int_scalar(query.n_features, "query's n_features")
    if d != n_features:
        raise QueryRefusedError(
            f"Query for n_features={d}; this provider holds {n_features} features."
        )
    round_ = _int_scalar(query.round, "query's round")
    raw_support = np.asarray(query.support) if not isinstance(query.support, np.ndarray) \
        else query.support
    if raw_support.ndim != 1 or raw_support.dtype.kind not in "iu":
        raise QueryRefusedError("Query support must be a 1-D array of integer row indices.")
    if raw_support.size and (raw_support.min() < 0 or raw_support.max() >= n_features):
        raise QueryRefusedError(
            f"Query support must be strictly increasing row indices in [0, {n_features})."
        )
    support = raw_support.astype(np.intp)  # in range, so exact
    block = _real_array(query.block, "query block")
    if block.ndim != 2 or block.shape != (support.shape[0], n_components):
        raise QueryRefusedError(
            f"Query block has shape {block.shape}; expected ({support.shape[0]}, {n_components}) "
            f"(support size × n_components={n_components} agreed by this provider)."
        )
    if support.shape[0] < n_components:
        raise QueryRefusedError(
            f"Query support has {support.shape[0]} rows, fewer than n_components={n_components}."
        )
    if np.any(np.diff(support) <= 0):
        raise QueryRefusedError(
            f"Query support must be strictly increasing row indices in [0, {n_features})."
        )
    deviation = float(np.abs(block.T @ block - np.eye(n_components)).max())
    if not deviation <= ORTHONORMALITY_TOL:
        raise QueryRefusedError(
            f"Query Q is not orthonormal (max |QᵀQ − I| = {deviation:.3g} > "
            f"{ORTHONORMALITY_TOL:g}); the noise is calibrated for ‖Q‖₂ ≤ 1 only."
        )
    return Query(round=round_, support=support, block=block, n_features=d)


def validate_vector(value: Any, n_features: int, what: str) -> NDArray[np.float64]:
    """A finite real float vector of shape ``(n_features,)``, or :class:`QueryRefusedError`."""
    arr = _real_array(value, what)
    if arr.shape != (n_features,):
        raise QueryRefusedError(
            f"The {what} has shape {arr.shape}; this provider holds {n_features} features, "
            f"so it expects shape ({n_features},)."
        )
    return arr


# --- the provider's budget ---------------------------------------------------------------------


def _limits(limit: int | Mapping[str, int]) -> dict[str, int]:
    if isinstance(limit, Mapping):
        out = {str(k): int(v) for k, v in limit.items()}
        unknown = sorted(set(out) - set(RELEASE_KINDS))
        if unknown:
            raise ValueError(f"Unknown release kind(s) {unknown}; the kinds are {RELEASE_KINDS}.")
        return out
    return {"query": int(limit)}


def _refusal(limit: int, used: int, kind: str, where: str = "") -> BudgetExceededError:
    return BudgetExceededError(
        f"This provider agreed to {limit} releases ({kind}) and has made {used}{where}: "
        "query refused, nothing released."
    )


class ReleaseCounter:
    """Counts a provider's releases of each kind and refuses more than agreed (in memory).

    Parameters
    ----------
    limit : int or mapping of str to int
        The releases agreed: an int is T power answers (the papers' setting); a mapping gives
        each kind's limit (:func:`provider_release_limits`).

    The counter also keeps the values a provider released that it needs again (its bounds and
    the mean it was given), so that a restarted provider reuses them instead of releasing
    them again.
    """

    def __init__(self, limit: int | Mapping[str, int]) -> None:
        self.limits = _limits(limit)
        self._counts = dict.fromkeys(self.limits, 0)
        self._values: dict[str, Any] = {}

    @property
    def limit(self) -> int:
        """All releases agreed, every kind together."""
        return sum(self.limits.values())

    @property
    def used(self) -> int:
        """How many releases have been made, every kind together."""
        return sum(self.counts().values())

    def counts(self) -> dict[str, int]:
        """Releases made, per kind."""
        return dict(self._counts)

    def used_by(self, kind: str) -> int:
        """Releases of ``kind`` made."""
        return int(self.counts().get(kind, 0))

    def reserve(self, kind: str = "query") -> int:
        """Book one release of ``kind`` *before* it is computed; return its 0-based index.

        Raises
        ------
        BudgetExceededError
            When the agreed releases of this kind have all been made.
        """
        limit, used = self.limits.get(kind, 0), self._counts.get(kind, 0)
        if used >= limit:
            raise _refusal(limit, used, kind)
        self._counts[kind] = used + 1
        return used

    def remember(self, name: str, value: Any) -> None:
        """Keep a released (or received, public) value for later messages."""
        self._values[name] = value

    def recall(self, name: str, default: Any = None) -> Any:
        """A value kept by :meth:`remember` (``default`` if none)."""
        return self._values.get(name, default)


class FileReleaseCounter(ReleaseCounter):
    """A :class:`ReleaseCounter` kept in a JSON file under an exclusive lock.

    The count survives process restarts (Flower starts a fresh ClientApp process for every
    message) and new runs: a server that starts a second run against the same data finds the
    budget spent. The file also pins the agreement (ε, δ, T, k, the pipeline's settings) and a
    fingerprint of the data; a provider restarted with other parameters on the same state
    file is refused rather than silently granted a fresh budget. It also keeps the values the
    provider released and needs again (its bounds, the mean): they stay on the provider's
    machine. Deleting the file is the data owner's decision.
    """

    def __init__(self, path: str | os.PathLike[str], limit: int | Mapping[str, int],
                 agreement: dict[str, Any]) -> None:
        super().__init__(limit)
        self.path = Path(path)
        self.agreement = dict(agreement)
        with self._locked() as state:
            self._counts = dict(state["by-kind"])

    def _locked(self) -> _LockedState:
        return _LockedState(self.path, self.limits, self.agreement)

    def counts(self) -> dict[str, int]:
        with self._locked() as state:
            return {str(k): int(v) for k, v in state["by-kind"].items()}

    def reserve(self, kind: str = "query") -> int:
        with self._locked() as state:
            counts = state["by-kind"]
            limit, used = self.limits.get(kind, 0), int(counts.get(kind, 0))
            if used >= limit:
                raise _refusal(limit, used, kind, f" (state file {self.path})")
            counts[kind] = used + 1
            state["releases"] = int(sum(counts.values()))
        self._counts = dict(counts)
        return used

    def remember(self, name: str, value: Any) -> None:
        with self._locked() as state:
            state.setdefault("released", {})[name] = value

    def recall(self, name: str, default: Any = None) -> Any:
        with self._locked() as state:
            return state.get("released", {}).get(name, default)


class _LockedState:
    """Context manager: read the state file under ``flock``, write it back on clean exit."""

    def __init__(self, path: Path, limits: dict[str, int], agreement: dict[str, Any]) -> None:
        self.path, self.limits, self.agreement = path, limits, agreement

    def __enter__(self) -> dict[str, Any]:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._fh = open(self.path, "a+")
        fcntl.flock(self._fh, fcntl.LOCK_EX)
        self._fh.seek(0)
        text = self._fh.read()
        if text.strip():
            self.state: dict[str, Any] = json.loads(text)
            if self.state.get("agreement") != self.agreement:
                self._release()
                raise BudgetExceededError(
                    f"The state file {self.path} records another agreement "
                    f"({self.state.get('agreement')}) than this provider's "
                    f"({self.agreement}); refusing rather than opening a second budget on the "
                    "same data."
                )
            if "by-kind" not in self.state:  # written before the release pipeline
                self.state["by-kind"] = {"query": int(self.state.get("releases", 0))}
        else:
            self.state = {"releases": 0, "by-kind": dict.fromkeys(self.limits, 0),
                          "limit": sum(self.limits.values()), "limits": dict(self.limits),
                          "agreement": self.agreement, "released": {}}
        return self.state

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        try:
            if exc_type is None:
                self._fh.seek(0)
                self._fh.truncate()
                self._fh.write(json.dumps(self.state, sort_keys=True))
                self._fh.flush()
                os.fsync(self._fh.fileno())
        finally:
            self._release()

    def _release(self) -> None:
        fcntl.flock(self._fh, fcntl.LOCK_UN)
        self._fh.close()


def data_fingerprint(X: NDArray[np.float64]) -> str:
    """SHA-256 of the array's shape and bytes (binds a state file to its data; stays local)."""
    h = hashlib.sha256(repr(X.shape).encode())
    h.update(np.ascontiguousarray(X).tobytes())
    return h.hexdigest()


# --- provider ------------------------------------------------------------------------------------


class ProviderState:
    """One data provider: its records, its noise, its budget; answers the server's messages.

    Parameters
    ----------
    X : array-like of shape (n_samples, n_features) or a streamed table
        The provider's records. NaN/infinity raise ValueError. In the papers' setting rows
        longer than ``data_norm`` are clipped at once (with a
        :class:`~privpca.exceptions.RowClippingWarning`); otherwise when the server's
        :class:`PrepareMessage` arrives. A table that is not one in-memory array (anything
        :func:`privpca.streaming.as_row_source` accepts: a ``numpy.memmap``, a ``.npy`` or
        Parquet path, a list of chunks, a ``dask.array.Array``, a
        :class:`~privpca.streaming.RowSource`) is never formed in memory: each release is one
        pass over it (:mod:`privpca.federated.streamed_rows`), with the same mechanisms and
        noise draws, so the answers equal the in-memory ones to rounding. Its entries are
        checked as each pass reads them (a non-finite entry raises ValueError during the
        pass, after the release was booked: nothing is released).
    n_components : int
        k agreed with the server.
    epsilon, delta : float
        The provider's own (ε, δ) for all its releases together.
    n_rounds : int
        T: the number of power answers it agrees to make, ever (for this data and counter).
    data_norm : "auto" or float, default=1.0
        Bound D on the L2 norm of the (centred) rows: ``"auto"`` releases a private 99 %
        quantile of its own centred row norms; a float is a public bound.
    centering : "private", None or array of shape (n_features,), default=None
        ``"private"``: take part in the two rounds of the private mean; ``None``: no centring
        (the papers' second moment); an array: a public mean (free), which the server's
        :class:`PrepareMessage` must repeat.
    scale : False or array of shape (n_features,), default=False
        Public per-feature scales the centred rows are divided by (free). Private scales
        (``True``) are not offered in the distributed model.
    budget_shares : dict or None, default=None
        Shares of the Gaussian budget of the preprocessing parts
        (:data:`privpca.pipeline.budget.DEFAULT_SHARES`).
    noise_seed : int or None, default=None
        Seed of the noise (:func:`provider_noise_rng`); ``None`` (fresh entropy) in
        production.
    provider_id : str, default="0"
        Public name, echoed in replies (the server orders providers by it).
    counter : ReleaseCounter or None, default=None
        Where releases are booked (``None``: a new in-memory counter with the limits of
        :func:`provider_release_limits`; use :class:`FileReleaseCounter` to make the budget
        survive restarts). Its limits must be those of this provider's setting.

    The defaults are the papers' setting (``centering=None``, ``data_norm=1.0``), so a
    provider configured before the release pipeline keeps its meaning; :class:`privpca.DPSPCA`
    and ``privpca provider`` pass the pipeline's settings explicitly.

    Attributes
    ----------
    n_samples, n_features : int
    n_clipped : int
        Rows clipped (stays with the provider: never sent, in no record or message). For a
        streamed table, counted by the first power answer's pass.
    stream : StreamedRows or None
        The streamed table (None for an in-memory array).
    noise_multiplier : float
        m = σ/Δ per power answer.
    sensitivity : float
        Δᵢ = power_sensitivity(Dᵢ, k)/nᵢ, of ``Σ̂ᵢQ`` (NaN until the bound is known).
    noise_scale : float
        m·Δᵢ, the standard deviation of each entry of ``Gᵢ/nᵢ`` (NaN until the bound is known).
    data_norm_ : float
        The bound Dᵢ in use (NaN until prepared).
    plan : BudgetPlan or None
        The split of (ε, δ) over this provider's parts (None in the papers' setting).
    """

    def __init__(
        self,
        X: ArrayLike,
        *,
        n_components: int,
        epsilon: float,
        delta: float,
        n_rounds: int,
        data_norm: float | str = 1.0,
        centering: Any = None,
        scale: Any = False,
        budget_shares: Mapping[str, float] | None = None,
        noise_seed: int | None = None,
        provider_id: str = "0",
        counter: ReleaseCounter | None = None,
    ) -> None:
        self.provider_id = str(provider_id)
        who = f"provider {self.provider_id}"
        from privpca.streaming import as_row_source, is_streamed

        Xv: NDArray[np.float64] | None = None
        #: The rows of a streamed table (None: an in-memory array, ``X``).
        self.stream: StreamedRows | None = None
        if is_streamed(X):  # validated block by block as each pass reads it
            self.stream = StreamedRows(as_row_source(X))
            self.n_samples, self.n_features = self.stream.n_samples, self.stream.n_features
        else:
            Xv = check_data(X)
            self.n_samples, self.n_features = (int(s) for s in Xv.shape)
        # Every party validates its agreement as the estimators do: a provider refuses to
        # open a budget it could not honour (ε = ∞ would release XᵢᵀXᵢQ/nᵢ exactly).
        self.n_components = int(check_in_range(n_components, "n_components", low=1,
                                               high=self.n_features, low_closed=True,
                                               high_closed=True, integer=True, owner=who))
        self.epsilon = check_epsilon(epsilon, owner=who)
        self.delta = check_delta(delta, owner=who)  # every release is Gaussian: δ > 0
        self.n_rounds = int(check_in_range(n_rounds, "n_rounds", low=1, low_closed=True,
                                           integer=True, owner=who))
        if not (isinstance(data_norm, str) and data_norm == "auto"):
            if isinstance(data_norm, str):
                raise ValueError(f"The 'data_norm' parameter of {who} must be 'auto' or a float "
                                 f"in the range [1e-60, 1e+60]. Got {data_norm!r} instead.")
            data_norm = check_norm_bound(data_norm, owner=who)
        if noise_seed is not None and (isinstance(noise_seed, bool)
                                       or not isinstance(noise_seed, int | np.integer)
                                       or noise_seed < 0):
            raise ValueError(f"The 'noise_seed' parameter of {who} must be None or an int >= 0. "
                             f"Got {noise_seed!r} instead.")
        self.noise_seed = None if noise_seed is None else int(noise_seed)
        if isinstance(scale, bool | np.bool_) and scale:
            raise ValueError(
                "Private scaling (scale=True) is not offered in the distributed model: pass "
                "public per-feature scales as an array, or scale=False."
            )
        self.centering, self.data_norm, self.scale = centering, data_norm, scale
        self.budget_shares = budget_shares
        self.table_mode = is_table_mode(centering, data_norm, scale)
        limits = provider_release_limits(self.n_rounds, centering, data_norm, scale)
        if counter is None:
            counter = ReleaseCounter(limits)
        elif counter.limits != limits:
            raise ValueError(
                f"provider {self.provider_id}: the counter's limits {counter.limits} are not "
                f"this provider's agreement {limits}."
            )
        self.counter = counter
        self.plan: BudgetPlan | None = None
        self.data_norm_ = math.nan
        self.sensitivity = self.noise_scale = math.nan
        self.rows: NDArray[np.float64] | None = None
        self.mean_: NDArray[np.float64] | None = None
        self.clipped_estimate = math.nan
        if not self.table_mode:  # the papers' setting: exactly the code before the pipeline
            self.X = Xv
            if self.stream is not None:  # clipped block by block in each answer's pass
                self.stream.set_prepared(None, None, float(data_norm))
                self.n_clipped = 0
            else:
                assert Xv is not None
                self._clip(Xv, float(data_norm))
            self.noise_multiplier = dpspca_noise_multiplier(self.epsilon, self.delta,
                                                            self.n_rounds)
            self._set_bound(float(data_norm))
            return
        self.X, self.n_clipped = Xv, 0
        settings = PipelineSettings(
            epsilon=self.epsilon, delta=self.delta, centering=self.centering,
            data_norm=self.data_norm, scale=self.scale, budget_shares=self.budget_shares,
        )
        self._run = ReleasePipeline(
            self, settings, self.n_samples, self.n_features,
            Statistic(STATISTIC_MECHANISM, lambda D: power_sensitivity(D, self.n_components),
                      count=self.n_rounds),
            model="distributed", neighbouring=DISTRIBUTED_REPLACE_ONE,
        )
        self.centering, self.scale = self._run.centering, self._run.scale
        self.plan = self._run.plan
        self.noise_multiplier = self._run.statistic_multiplier()
        if Xv is not None:
            self._sq = np.einsum("ij,ij->i", Xv, Xv)
        stored = self.counter.recall("prepared")
        if stored is not None:  # a restarted provider: rebuild its rows, release nothing
            mean = None if stored["mean"] is None else np.asarray(stored["mean"], np.float64)
            self._prepare_rows(mean, float(stored["data_norm"]), warn=False)
            self.clipped_estimate = float(stored.get("clipped_estimate", math.nan))

    # ------------------------------------------------------------------ helpers
    def _set_bound(self, data_norm: float) -> None:
        self.data_norm_ = float(data_norm)
        self._raw_sensitivity = power_sensitivity(self.data_norm_, self.n_components)
        self.sensitivity = self._raw_sensitivity / self.n_samples
        self.noise_scale = self.noise_multiplier * self.sensitivity

    def _centred(self, mean: NDArray[np.float64] | None) -> NDArray[np.float64]:
        assert self.X is not None
        rows = self.X if mean is None else self.X - mean
        if not (isinstance(self.scale, bool | np.bool_) and not self.scale):
            rows = rows / np.asarray(self.scale, dtype=np.float64)
        return rows

    def _clip(self, rows: NDArray[np.float64], data_norm: float) -> NDArray[np.float64]:
        """Clip ``rows`` to ``data_norm`` (a copy if any is clipped), silently.

        The count stays here; the provider warns, with no count, only after it has booked
        its first power answer (:meth:`answer_query`), so a refused message never warns.
        """
        norms = row_norms(rows)
        over = norms > data_norm * (1.0 + 1e-12)
        self.n_clipped = int(over.sum())
        if self.n_clipped:
            rows = rows.copy() if rows is self.X else rows
            rows[over] *= (data_norm / norms[over])[:, None]
        self.rows = rows
        return rows

    def _prepare_rows(self, mean: NDArray[np.float64] | None, data_norm: float, *,
                      warn: bool = False) -> None:
        self._warn_public_clip = warn
        if self.stream is not None:  # nothing formed: each statistic's pass prepares its blocks
            self.stream.set_prepared(mean, self._public_scale(), data_norm)
            self.n_clipped = 0  # counted by the first power answer's pass
            self.mean_ = mean
            self._set_bound(data_norm)
            return
        rows = self._clip(self._centred(mean), data_norm)
        self.rows, self.mean_ = rows, mean
        self._total = float(np.einsum("ij,ij->", rows, rows))
        self._set_bound(data_norm)

    def _public_scale(self) -> NDArray[np.float64] | None:
        if isinstance(self.scale, bool | np.bool_) and not self.scale:
            return None
        return np.asarray(self.scale, dtype=np.float64)

    @property
    def prepared(self) -> bool:
        """Whether the rows are prepared (centred, scaled, bounded) for the power answers."""
        return self.rows is not None or (self.stream is not None and self.stream.prepared)

    @property
    def _plan(self) -> BudgetPlan:
        if self.plan is None:
            raise QueryRefusedError("the papers' setting has no budget plan")
        return self.plan

    def _refuse_unless_table(self, what: str) -> None:
        if not self.table_mode:
            raise QueryRefusedError(
                f"provider {self.provider_id} agreed to the papers' setting (no centring, "
                f"public data_norm): it answers power queries only, not {what}."
            )

    # ------------------------------------------------------------------ messages
    def handle(self, message: Any) -> AnyReply:
        """Answer any message of the protocol (dispatch on its type)."""
        if isinstance(message, MeanQuery):
            return self.answer_mean(message)
        if isinstance(message, PrepareMessage):
            return self.prepare(message)
        if isinstance(message, VarianceQuery):
            return self.answer_variance(message)
        return self.answer_query(message)

    def answer_mean(self, query: MeanQuery) -> MeanReply:
        """Round r of the private mean: release ``Rᵢ`` and ``(Σ clip_Rᵢ(x − c) + noise)/nᵢ``.

        Raises
        ------
        QueryRefusedError
            Not private centring, a round out of order, or a centre that is not a finite
            vector of shape (n_features,) (nothing booked or released).
        BudgetExceededError
            Both rounds already made.
        """
        self._refuse_unless_table("the private mean")
        if not isinstance(query, MeanQuery):
            raise QueryRefusedError(f"Expected a MeanQuery; got {type(query).__name__}.")
        if not (isinstance(self.centering, str) and self.centering == "private"):
            raise QueryRefusedError(
                f"provider {self.provider_id} did not agree to a private mean (centering is "
                "not 'private')."
            )
        centre = validate_vector(query.centre, self.n_features, "centre of the mean query")
        done = self.counter.used_by("mean")
        if (isinstance(query.round, bool | np.bool_)
                or not isinstance(query.round, int | np.integer)
                or int(query.round) != done + 1):
            if done >= MEAN_ROUNDS:
                raise _refusal(MEAN_ROUNDS, done, "mean")
            raise QueryRefusedError(
                f"Mean round {query.round!r} out of order: provider {self.provider_id} has "
                f"made {done} of the {MEAN_ROUNDS} mean rounds, so the next is {done + 1}."
            )
        if self.prepared:
            raise QueryRefusedError("The rows are already prepared: no more mean rounds.")
        index = self.counter.reserve("mean")
        bound_part, sum_part = MEAN_PARTS[index]
        rng = provider_noise_rng(self.noise_seed, index, "mean")
        if self.stream is not None:
            R, mean = self._streamed_mean(centre, bound_part, sum_part, rng)
            self.counter.remember(bound_part, R)
            return MeanReply(self.provider_id, int(query.round), self.n_samples, R, mean)
        assert self.X is not None
        sq = self._sq
        if np.any(centre):
            sq = np.maximum(sq - 2.0 * (self.X @ centre) + float(centre @ centre), 0.0)
        norms = np.sqrt(sq)
        b = self._plan[bound_part]
        try:
            R, _ = private_norm_bound(norms, b.multiplier, b.tail, DEFAULT_NORM_QUANTILE, rng,
                                      what=f"provider {self.provider_id}'s distances to the "
                                      "centre")
        except BoundNotFoundError as exc:
            raise BoundNotFoundError(f"provider {self.provider_id}: {exc}") from exc
        m = private_mean(self.X, norms, R, self._plan[sum_part].multiplier, rng,
                         centre=centre if np.any(centre) else None)
        self.counter.remember(bound_part, R)
        return MeanReply(self.provider_id, int(query.round), self.n_samples, float(R), m.mean)

    def _streamed_mean(self, centre: NDArray[np.float64], bound_part: str, sum_part: str,
                       rng: np.random.Generator) -> tuple[float, NDArray[np.float64]]:
        """One mean round on a streamed table: one pass bins the rows by ``‖x − c‖`` with
        their sums (the histogram of ``Rᵢ``, then the exact clipped sum at ``Rᵢ``); the same
        mechanisms and draws as the in-memory round."""
        assert self.stream is not None
        stream = self.stream
        c = centre if np.any(centre) else None
        seen: dict[str, Any] = {}

        def counter(base: float) -> tuple[Any, Any]:
            seen["base"] = base
            seen["sums"] = sums = stream.binned_sums(c, base)
            return sums.index, sums.counts

        b = self._plan[bound_part]
        try:
            R, _ = private_norm_bound_from_counts(
                counter, self.n_samples, b.multiplier, b.tail, DEFAULT_NORM_QUANTILE, rng,
                what=f"provider {self.provider_id}'s distances to the centre")
        except BoundNotFoundError as exc:
            raise BoundNotFoundError(f"provider {self.provider_id}: {exc}") from exc
        m = private_mean_from_sum(seen["sums"].clipped_sum(R, seen["base"]), self.n_samples,
                                  R, self._plan[sum_part].multiplier, rng)
        return float(R), m.mean

    def prepare(self, message: PrepareMessage) -> PrepareReply:
        """Centre on the broadcast mean, release the bound ``Dᵢ`` (``"auto"``), clip.

        Raises
        ------
        QueryRefusedError
            Papers' setting; prepared already; the private mean's rounds not done; a mean that
            is not a finite vector of shape (n_features,); a mean with ``centering=None``; a
            mean other than the public one agreed (nothing booked or released).
        BudgetExceededError
            The bound was released already (a restarted run).
        """
        self._refuse_unless_table("a prepare message")
        if not isinstance(message, PrepareMessage):
            raise QueryRefusedError(f"Expected a PrepareMessage; got {type(message).__name__}.")
        if self.prepared:
            raise QueryRefusedError(f"provider {self.provider_id} is prepared already.")
        mean: NDArray[np.float64] | None
        if self.centering is None:
            if message.mean is not None:
                raise QueryRefusedError(
                    f"provider {self.provider_id} agreed to no centring; the server sent a mean."
                )
            mean = None
        else:
            if message.mean is None:
                raise QueryRefusedError(
                    f"provider {self.provider_id} agreed to centring; the server sent no mean."
                )
            mean = validate_vector(message.mean, self.n_features, "mean")
            if isinstance(self.centering, str):
                done = self.counter.used_by("mean")
                if done < MEAN_ROUNDS:
                    raise QueryRefusedError(
                        f"provider {self.provider_id} has made {done} of the {MEAN_ROUNDS} "
                        "rounds of the private mean; the mean cannot be final yet."
                    )
            elif not np.array_equal(mean, self.centering):
                raise QueryRefusedError(
                    f"provider {self.provider_id} agreed to another public mean than the one "
                    "the server sent."
                )
        clipped = math.nan
        if isinstance(self.data_norm, str):
            index = self.counter.reserve("bound")
            rng = provider_noise_rng(self.noise_seed, index, "bound")
            b = self._plan["bound"]
            what = f"provider {self.provider_id}'s " + ("centred row norms" if mean is not None
                                                        else "row norms")
            try:
                if self.stream is not None:  # one pass: the norms' counts on the log grid
                    D, rel = private_norm_bound_from_counts(
                        partial(self.stream.norm_counts, mean, self._public_scale()),
                        self.n_samples, b.multiplier, b.tail, DEFAULT_NORM_QUANTILE, rng,
                        what=what)
                else:
                    rows = self._centred(mean)
                    norms = np.sqrt(np.einsum("ij,ij->i", rows, rows))
                    D, rel = private_norm_bound(norms, b.multiplier, b.tail,
                                                DEFAULT_NORM_QUANTILE, rng, what=what)
            except BoundNotFoundError as exc:
                raise BoundNotFoundError(f"provider {self.provider_id}: {exc}") from exc
            clipped = float(rel.above[0])
            self._prepare_rows(mean, D, warn=False)
        else:
            D = float(self.data_norm)
            self._prepare_rows(mean, D, warn=True)
        self.clipped_estimate = clipped
        self.counter.remember("prepared", {
            "mean": None if mean is None else mean.tolist(), "data_norm": D,
            "clipped_estimate": None if math.isnan(clipped) else clipped})
        return PrepareReply(self.provider_id, self.n_samples, float(D), clipped)

    def answer_query(self, query: Query) -> Reply:
        """Validate, book one release, and return ``Hᵢ = Σ̂ᵢQ + Gᵢ/nᵢ``.

        The product is computed on Q's support only: ``Xᵢᵀ(Xᵢ[:, S] Q_S)``, O(nᵢ·k·(ŝ + d)).

        Raises
        ------
        QueryRefusedError
            Malformed query, or rows not prepared yet (nothing is booked or released).
        BudgetExceededError
            The provider's T releases are spent (nothing is released).
        """
        query = validate_query(query, self.n_features, self.n_components)
        rows = self._prepared_rows("power queries")
        release = self.counter.reserve("query")
        if rows is None:  # a streamed table: one pass, the clipped rows counted on the way
            assert self.stream is not None
            P, self.n_clipped = self.stream.product(query.support, query.block)
        if release == 0 and self.n_clipped and getattr(self, "_warn_public_clip", True):
            warn_clipped(f"provider {self.provider_id}", self.data_norm_, stacklevel=3)
        if rows is not None:
            Y = rows[:, query.support] @ query.block
            P = rows.T @ Y  # XᵢᵀXᵢQ, exact
        rng = provider_noise_rng(self.noise_seed, release)
        P = gaussian_release(P, self.noise_multiplier * self._raw_sensitivity, rng,
                             sensitivity=self._raw_sensitivity)
        P /= self.n_samples
        return Reply(self.provider_id, int(query.round), self.n_samples, P)

    def answer_variance(self, query: VarianceQuery) -> VarianceReply:
        """Release ``u(QᵀXᵢᵀXᵢQ) + z`` and ``‖Xᵢ‖²_F + z₀`` (Δ = √2·Dᵢ², see the module).

        Raises
        ------
        QueryRefusedError
            Papers' setting, not prepared, or a malformed ``components`` query.
        BudgetExceededError
            The variances were released already.
        """
        self._refuse_unless_table("a variance query")
        if not isinstance(query, VarianceQuery):
            raise QueryRefusedError(f"Expected a VarianceQuery; got {type(query).__name__}.")
        q = validate_query(query.components, self.n_features, self.n_components)
        rows = self._prepared_rows("the variance query")
        index = self.counter.reserve("variance")
        rng = provider_noise_rng(self.noise_seed, index, "variance")
        if rows is None:
            assert self.stream is not None
            matrix, row_total = self.stream.moments(q.support, q.block)
        else:
            proj = rows[:, q.support] @ q.block
            matrix, row_total = proj.T @ proj, self._total
        k = self.n_components
        iu = np.triu_indices(k)
        sensitivity = math.sqrt(2.0) * self.data_norm_**2
        sigma = self._plan["variance"].multiplier * sensitivity
        # One Gaussian release of k(k+1)/2 + 1 coordinates: the packed matrix, then the total.
        released = gaussian_release(np.append(matrix[iu], row_total), sigma, rng,
                                    sensitivity=sensitivity)
        packed, total = released[:-1], float(released[-1])
        return VarianceReply(self.provider_id, self.n_samples, packed, float(total))

    def _prepared_rows(self, what: str) -> NDArray[np.float64] | None:
        """The prepared rows (None for a streamed table: its passes prepare each block)."""
        if not self.prepared:
            raise QueryRefusedError(
                f"provider {self.provider_id} has no prepared rows yet (it expects the "
                f"server's prepare message before {what})."
            )
        return self.rows

    # ------------------------------------------------------------------ privacy
    def spends(self) -> tuple[list[PrivacySpend], PrivacySpend]:
        """The spends of the parts released so far (preprocessing, variance) and the
        statistic's spend (its planned T releases; NaN sensitivity until the bound is known).
        """
        if self.plan is None:
            raise ValueError("the papers' setting has no pipeline parts")
        run = self._run
        counts = self.counter.counts()
        spends: list[PrivacySpend] = []
        for r, (bound_part, sum_part) in enumerate(MEAN_PARTS):
            if counts.get("mean", 0) <= r:
                break
            R = float(self.counter.recall(bound_part, math.nan))
            spends.append(run._spend(
                bound_part, "Gaussian stability histogram of ‖x − c‖ on a log grid (private "
                "quantile), each provider its own", math.sqrt(2.0),
                math.sqrt(2.0) * self.plan[bound_part].multiplier))
            spends.append(run._spend(
                sum_part, "gaussian: Σ clip_R(x − c), each provider its own noise (private "
                "mean)", 2.0 * R, 2.0 * R * self.plan[sum_part].multiplier))
        if counts.get("bound", 0):
            spends.append(run._spend(
                "bound", "Gaussian stability histogram of the centred row norms (private "
                "quantile), each provider its own", math.sqrt(2.0),
                math.sqrt(2.0) * self.plan["bound"].multiplier))
        if counts.get("variance", 0):
            sens = math.sqrt(2.0) * self.data_norm_**2
            spends.append(run._spend(
                "variance", "gaussian: packed QᵀXᵢᵀXᵢQ and ‖Xᵢ‖²_F (explained variance)",
                sens, sens * self.plan["variance"].multiplier))
        stat = self.plan["statistic"]
        statistic = PrivacySpend(
            mechanism=f"statistic: {STATISTIC_MECHANISM}",
            epsilon=stat.epsilon,
            delta=stat.delta,
            sensitivity=getattr(self, "_raw_sensitivity", math.nan),
            noise_scale=self.noise_multiplier * getattr(self, "_raw_sensitivity", math.nan),
            count=stat.count,
            dp_event=dp_accounting.GaussianDpEvent(stat.multiplier),
        )
        return spends, statistic

    def privacy_record(self, releases: int | None = None, *,
                       disclose_clipped: bool = True) -> PrivacyRecord:
        """This provider's guarantee (default: after its agreed releases).

        ``releases`` (papers' setting) is the number of power answers made; outside it the
        record lists the parts released so far and totals the agreed (ε, δ).
        No record carries the exact number of clipped rows (a count of the provider's data);
        ``disclose_clipped`` is kept for compatibility and has no effect.
        """
        del disclose_clipped
        if self.plan is None:
            count = self.n_rounds if releases is None else int(releases)
            return provider_privacy_record(
                epsilon=self.epsilon, delta=self.delta, n_rounds=self.n_rounds,
                n_components=self.n_components, data_norm=self.data_norm_,
                n_samples=self.n_samples, n_clipped=0, releases=count,
            )
        pre, statistic = self.spends()
        made = self.counter.used_by("query")
        notes = (
            f"Provider {self.provider_id}: every release is Gaussian, split from its own "
            f"({self.epsilon:g}, {self.delta:g}) by its own budget plan (exact composition), "
            f"{self.n_rounds} power answers with noise multiplier {self.noise_multiplier:.6g}"
            f" per answer. {_POST_PROCESSING}"
        )
        if made < self.n_rounds:
            notes += f" Only {made} of the {self.n_rounds} agreed power answers were made."
        if not math.isnan(self.clipped_estimate):
            notes += (f" Private estimate of its clipped rows: {self.clipped_estimate:.0f}.")
        prepared = PreparedRows(np.empty((0, self.n_features)), self.data_norm_, self.mean_,
                                None if isinstance(self.scale, bool | np.bool_)
                                else np.asarray(self.scale), 0, list(pre))
        return self._run.record(
            prepared, statistic,
            calibration="analytic (exact Gaussian composition of every part, dp-accounting)",
            notes=notes,
        )


_POST_PROCESSING = (
    "Q⁽⁰⁾ is data-independent (free); the server's aggregation, thresholding, QR and "
    "rotation and the output are post-processing. The untrusted server sees only noised "
    "releases, the released bounds and the public nᵢ; the providers' data are disjoint, so "
    "every record is protected at this level (parallel composition)."
)


def provider_privacy_record(
    *,
    epsilon: float,
    delta: float,
    n_rounds: int,
    n_components: int,
    data_norm: float,
    n_samples: int,
    n_clipped: int = 0,
    releases: int | None = None,
    n_providers: int = 1,
    notes: str = "",
) -> PrivacyRecord:
    """The :class:`PrivacyRecord` of a provider in the papers' setting that made ``releases``
    (≤ T) answers. ``n_clipped`` is accepted and ignored: no record carries that count."""
    del n_clipped
    count = n_rounds if releases is None else int(releases)
    m = dpspca_noise_multiplier(epsilon, delta, n_rounds)
    raw = power_sensitivity(data_norm, n_components)
    spend = PrivacySpend(
        mechanism="gaussian: Σ̂ᵢQ per round, each provider its own noise (Frobenius sensitivity)",
        epsilon=certified_epsilon(m, delta),
        delta=delta,
        sensitivity=raw,
        noise_scale=m * raw,
        count=max(count, 1),
        dp_event=dp_accounting.GaussianDpEvent(m),
    )
    omega = paper_noise_scale(epsilon, delta, n_rounds)
    omega_eps = certified_epsilon(omega / math.sqrt(n_rounds), delta, raw)
    text = (
        f"Each of {n_providers} provider(s) answers at most T={n_rounds} queries "
        f"Hᵢ = Σ̂ᵢQ + Gᵢ/nᵢ with its own Gᵢ ~ N(0, (m·Δ)²), Δ = {raw:.4g} (sensitivity of XᵢᵀXᵢQ "
        f"for orthonormal Q, replace one record), m = {m:.6g} so that T releases compose to "
        f"({epsilon:g}, {delta:g}) by dp-accounting (parallel composition across providers: "
        "every record is protected at this level). Q⁽⁰⁾ is data-independent (free); the server's "
        "thresholding, QR and the output are post-processing. The untrusted server sees only "
        "noised answers and the public nᵢ. For comparison the paper's ω(ε, δ) = "
        f"(2T/ε)√(2 ln(2T/δ)) = {omega:.4g} (std of G) would certify epsilon = {omega_eps:.4g} "
        "at this delta under this analysis."
    )
    if releases is not None and count < n_rounds:
        text += f" Only {count} of the {n_rounds} agreed releases were made."
    if notes:
        text += " " + notes
    spend_record = PrivacyRecord.from_spends(
        (spend,),
        delta,
        model="distributed",
        neighbouring=DISTRIBUTED_REPLACE_ONE,
        sensitivity=raw / max(n_samples, 1),
        noise_scale=m * raw / max(n_samples, 1),
        calibration="analytic (T-fold Gaussian composition, dp-accounting)",
        data_norm=data_norm,
        n_samples=int(n_samples),
        target_epsilon=epsilon,
        notes=text,
    )
    return spend_record


def merge_provider_spends(per_provider: Sequence[Sequence[PrivacySpend]]) -> list[PrivacySpend]:
    """One spend per part across providers: the same plan, the largest sensitivity shown.

    Every provider runs the same plan (the same multipliers) on its own data; by parallel
    composition the union's guarantee is one provider's, so each part is listed once (its
    event composes correctly), with the largest sensitivity and noise of any provider.
    """
    merged: dict[str, PrivacySpend] = {}
    for spends in per_provider:
        for s in spends:
            part = s.mechanism.split(":")[0]
            best = merged.get(part)
            if best is None or (s.sensitivity > best.sensitivity):
                merged[part] = s
    return [
        PrivacySpend(
            mechanism=s.mechanism + " (largest provider's sensitivity and noise shown)"
            if len(per_provider) > 1 and not s.mechanism.startswith("statistic") else s.mechanism,
            epsilon=s.epsilon, delta=s.delta, sensitivity=s.sensitivity,
            noise_scale=s.noise_scale, count=s.count, dp_event=s.dp_event, tail=s.tail,
        )
        for s in merged.values()
    ]


# --- server --------------------------------------------------------------------------------------


@dataclass
class ServerState:
    """The untrusted server of DPS-PCA: builds messages, combines answers, thresholds.

    Parameters
    ----------
    n_features, n_components : int
        d and k.
    n_nonzero : int
        ŝ, the rows kept by Threshold (``n_features``: no thresholding).
    n_rounds : int
        T.
    start : ndarray of shape (n_features, n_components)
        ``Q⁽¹⁾``, orthonormal (see :meth:`initial`).
    centering : "private", None or array of shape (n_features,), default=None
        ``"private"``: run the two mean rounds first; an array: a public mean (sent in the
        prepare message); None: no centring.
    table_mode : bool, default=False
        Outside the papers' setting: send the prepare message before the power rounds and the
        variance query after them (set it when ``centering`` is not None, ``data_norm`` is
        ``"auto"`` or the providers scale).

    Attributes
    ----------
    Q : ndarray of shape (n_features, n_components)
        The current iterate (row-sparse after the first round when ŝ < d).
    history : list of ndarray
        ``Q⁽¹⁾, Q⁽²⁾, …``: the start and every iterate (post-processing, free).
    round : int
        Power rounds completed.
    mean : ndarray of shape (n_features,) or None
        The current (after the mean rounds: final) private mean.
    provider_bounds : dict
        provider id → its bound ``Rᵢ`` per mean round and its ``Dᵢ`` (released values).
    explained_variance, explained_variance_ratio : ndarray of shape (n_components,) or None
        After the variance round.
    dropped : dict
        provider id → power round at which it stopped answering (0 during the mean and
        prepare steps, T + 1 at the variances; ``on_dropout="continue"``).
    """

    n_features: int
    n_components: int
    n_nonzero: int
    n_rounds: int
    start: NDArray[np.float64]
    centering: Any = None
    table_mode: bool = False
    Q: NDArray[np.float64] = field(init=False)
    history: list[NDArray[np.float64]] = field(init=False)
    round: int = field(init=False, default=0)
    dropped: dict[str, int] = field(init=False, default_factory=dict)
    mean_round: int = field(init=False, default=0)
    mean: NDArray[np.float64] | None = field(init=False, default=None)
    prepared: bool = field(init=False, default=False)
    variances_done: bool = field(init=False, default=False)
    provider_bounds: dict[str, dict[str, float]] = field(init=False, default_factory=dict)
    explained_variance: NDArray[np.float64] | None = field(init=False, default=None)
    explained_variance_ratio: NDArray[np.float64] | None = field(init=False, default=None)
    variance_noise_scale: float = field(init=False, default=math.nan)
    _rotated: NDArray[np.float64] | None = field(init=False, default=None)

    def __post_init__(self) -> None:
        self.Q = np.asarray(self.start, dtype=np.float64).copy()
        self.history = [self.Q.copy()]
        if self.centering is not None and not isinstance(self.centering, str):
            self.centering = np.asarray(self.centering, dtype=np.float64)
            self.mean = self.centering
        if self.centering is not None:
            self.table_mode = True
        if isinstance(self.centering, str):
            self.mean = np.zeros(self.n_features)

    @staticmethod
    def initial(
        n_features: int,
        n_components: int,
        n_nonzero: int,
        init: str | ArrayLike,
        rng: np.random.Generator,
    ) -> NDArray[np.float64]:
        """``Q⁽¹⁾`` from a data-independent ``Q⁽⁰⁾`` (free in privacy).

        * ``"random"`` (default): a Haar-random dense ``Q⁽⁰⁾``, *not* thresholded, so the first
          query is dense. Thresholding a random matrix keeps ŝ random rows, which for s ≪ d
          miss the true support with high probability; the first dense product then carries
          the signal into every row and the first Threshold finds the support.
        * ``"random-sparse"``: Algorithm 1 literally, ``ThinQR(Threshold(Q⁽⁰⁾, ŝ))``.
        * an array: a public ``(d, k)`` start (e.g. from public data), thresholded as in
          Algorithm 1. It must not be computed from the providers' data.
        """
        if isinstance(init, str):
            Q0 = random_orthonormal_basis(n_features, n_components, rng)
            if init == "random":
                return Q0
            return thin_qr(_threshold(Q0, n_nonzero))
        Q0 = np.asarray(init, dtype=np.float64)
        return thin_qr(_threshold(Q0, n_nonzero))

    # ------------------------------------------------------------------ the steps
    @property
    def phase(self) -> str:
        """``"mean"``, ``"prepare"``, ``"query"``, ``"variance"`` or ``"done"``."""
        if isinstance(self.centering, str) and self.mean_round < MEAN_ROUNDS:
            return "mean"
        if self.table_mode and not self.prepared:
            return "prepare"
        if self.round < self.n_rounds:
            return "query"
        if self.table_mode and not self.variances_done:
            return "variance"
        return "done"

    @property
    def finished(self) -> bool:
        """Whether every step is done (in the papers' setting: all T rounds)."""
        return self.phase == "done"

    @property
    def step(self) -> int:
        """The power round the next message belongs to (0 before them, T + 1 after them)."""
        phase = self.phase
        if phase in ("mean", "prepare"):
            return 0
        return self.round + 1

    @property
    def step_label(self) -> str:
        """The next step, for messages (``"Round 3"``, ``"Mean round 1"``, ...)."""
        phase = self.phase
        if phase == "mean":
            return f"Mean round {self.mean_round + 1}"
        if phase == "prepare":
            return "Prepare step"
        if phase == "variance":
            return "Variance step"
        return f"Round {self.round + 1}"

    def next_message(self) -> Message:
        """The message of the next step (see :attr:`phase`)."""
        phase = self.phase
        if phase == "mean":
            assert self.mean is not None
            return MeanQuery(self.mean_round + 1, self.mean.copy())
        if phase == "prepare":
            return PrepareMessage(None if self.mean is None else self.mean.copy())
        if phase == "query":
            return self.query()
        if phase == "variance":
            return VarianceQuery(Query.from_dense(self.Q, round=self.n_rounds + 1))
        raise RuntimeError("The protocol is finished: no more messages.")

    def receive(self, replies: Sequence[Any]) -> None:
        """Combine the replies to :meth:`next_message` (dispatch on the phase)."""
        phase = self.phase
        if phase == "mean":
            self.aggregate_mean(replies)
        elif phase == "prepare":
            self.acknowledge(replies)
        elif phase == "query":
            self.aggregate(replies)
        elif phase == "variance":
            self.aggregate_variances(replies)
        else:
            raise RuntimeError("The protocol is finished: no more replies expected.")

    def _ordered(self, replies: Sequence[Any], kind: type) -> list[Any]:
        if not replies:
            raise ProviderDropoutError(f"{self.step_label}: no provider answered.")
        for r in replies:
            if not isinstance(r, kind):
                raise ValueError(f"{self.step_label}: expected {kind.__name__} replies; got "
                                 f"{type(r).__name__} from {getattr(r, 'provider_id', '?')!r}.")
        return sorted(replies, key=lambda r: r.provider_id)

    def aggregate_mean(self, replies: Sequence[MeanReply]) -> NDArray[np.float64]:
        """``μ̂ = c + Σ nᵢ·(Sᵢ/nᵢ) / Σ nᵢ`` (in provider-id order); returns the new mean."""
        ordered = self._ordered(replies, MeanReply)
        assert self.mean is not None
        total, acc = 0, np.zeros(self.n_features)
        for reply in ordered:
            m = np.asarray(reply.mean, dtype=np.float64)
            if m.shape != (self.n_features,) or not np.all(np.isfinite(m)) or not (
                    math.isfinite(reply.bound)):
                raise ValueError(f"Provider {reply.provider_id!r} sent a mean of shape "
                                 f"{m.shape} (or non-finite); expected ({self.n_features},).")
            acc += reply.n_samples * m
            total += reply.n_samples
            self.provider_bounds.setdefault(reply.provider_id, {})[
                MEAN_PARTS[self.mean_round][0]] = float(reply.bound)
        self.mean = self.mean + acc / total
        self.mean_round += 1
        return self.mean

    def acknowledge(self, replies: Sequence[PrepareReply]) -> None:
        """Record each provider's bound ``Dᵢ``; the power rounds come next."""
        for reply in self._ordered(replies, PrepareReply):
            self.provider_bounds.setdefault(reply.provider_id, {})["data_norm"] = float(
                reply.data_norm)
        self.prepared = True

    def query(self) -> Query:
        """The query of the next power round (support and block of the current Q)."""
        return Query.from_dense(self.Q, round=self.round + 1)

    def aggregate(self, replies: Sequence[Reply]) -> NDArray[np.float64]:
        """Combine ``K = Σ nᵢHᵢ/Σ nᵢ`` (in provider-id order), then QR, Threshold, QR.

        Returns the new Q. Raises ValueError for an empty or inconsistent set of replies.
        """
        if not replies:
            raise ProviderDropoutError(f"Round {self.round + 1}: no provider answered.")
        ordered = sorted(replies, key=lambda r: r.provider_id)
        total = 0
        K = np.zeros((self.n_features, self.n_components))
        for reply in ordered:
            H = np.asarray(reply.product, dtype=np.float64)
            if H.shape != K.shape or not np.all(np.isfinite(H)):
                raise ValueError(
                    f"Provider {reply.provider_id!r} sent an answer of shape {H.shape} (or "
                    f"non-finite); expected {K.shape}."
                )
            K += reply.n_samples * H
            total += reply.n_samples
        K /= total
        V = thin_qr(K)
        self.Q = V if self.n_nonzero >= self.n_features else thin_qr(_threshold(V, self.n_nonzero))
        self.round += 1
        self.history.append(self.Q.copy())
        return self.Q

    def aggregate_variances(self, replies: Sequence[VarianceReply]) -> None:
        """Sum the providers' noisy ``QᵀXᵢᵀXᵢQ`` and ``‖Xᵢ‖²_F``; rotate Q to its eigenvectors.

        The variances are over ``Σ nᵢ − 1`` (centred, scikit-learn's convention) or ``Σ nᵢ``;
        the ratios are the eigenvalues over the noisy total.
        """
        ordered = self._ordered(replies, VarianceReply)
        k = self.n_components
        iu = np.triu_indices(k)
        acc, total, n = np.zeros(len(iu[0])), 0.0, 0
        for reply in ordered:
            packed = np.asarray(reply.packed, dtype=np.float64)
            if packed.shape != acc.shape or not np.all(np.isfinite(packed)) or not (
                    math.isfinite(reply.total)):
                raise ValueError(f"Provider {reply.provider_id!r} sent variances of shape "
                                 f"{packed.shape} (or non-finite); expected {acc.shape}.")
            acc += packed
            total += float(reply.total)
            n += reply.n_samples
        matrix = np.zeros((k, k))
        matrix[iu] = acc
        matrix = matrix + np.triu(matrix, 1).T
        denom = float(n - 1 if self.centering is not None and n > 1 else n)
        values, vectors = np.linalg.eigh(matrix / denom)
        values, vectors = values[::-1], vectors[:, ::-1]
        components = fix_signs(self.Q).T
        self._rotated = np.ascontiguousarray(fix_signs((vectors.T @ components).T).T)
        self.explained_variance = values
        self.explained_variance_ratio = (values / (total / denom) if total > 0
                                         else np.full(k, np.nan))
        self.variances_done = True

    def components(self) -> NDArray[np.float64]:
        """The output as ``(k, d)`` orthonormal rows, signs fixed (``components_``).

        After the variance step: rotated within the span of ``Q⁽ᵀ⁺¹⁾`` to the eigenvectors of
        the private ``QᵀΣQ``, by decreasing variance (post-processing; the row support is
        unchanged).
        """
        if self._rotated is not None:
            return self._rotated.copy()
        return np.ascontiguousarray(fix_signs(self.Q).T)


def _threshold(M: NDArray[np.float64], n_nonzero: int) -> NDArray[np.float64]:
    if n_nonzero >= M.shape[0]:
        return M
    keep = top_row_support(M, n_nonzero)
    out = np.zeros_like(M)
    out[keep] = M[keep]
    return out


def select_replies(
    server: ServerState,
    expected: Iterable[str],
    replies: Sequence[Any],
    *,
    on_dropout: str,
    reasons: dict[str, str] | None = None,
) -> list[Any]:
    """Apply the dropout policy to one step's replies.

    ``expected`` are the providers still in the run. If some did not answer (``reasons`` may
    say why: timeout, refusal, lost connection): ``on_dropout="error"`` raises
    :class:`ProviderDropoutError`; ``"continue"`` records them in ``server.dropped`` and returns
    the replies of the others (they are not asked again, and the weights ``nᵢ/Σnⱼ`` are
    renormalised over those who answered).
    """
    expected = list(expected)
    got = {r.provider_id for r in replies}
    missing = [p for p in expected if p not in got]
    if missing:
        why = "; ".join(
            f"{p}: {(reasons or {}).get(p, 'no answer before the timeout')}" for p in missing
        )
        if on_dropout == "error":
            raise ProviderDropoutError(
                f"{server.step_label}: provider(s) {missing} did not answer ({why}). "
                "Stopping (on_dropout='error'); no output released."
            )
        for p in missing:
            server.dropped[p] = server.step
    return [r for r in replies if r.provider_id in expected]
