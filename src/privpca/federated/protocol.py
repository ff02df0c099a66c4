"""DPS-PCA (Ge, Wang, Wang, Liu 2018) as a multi-party protocol: the maths, with no engine.

Roles
-----
* A **provider** (:class:`ProviderState`) holds its records ``Xᵢ`` (nᵢ × d, ‖x‖ ≤ D), its own
  noise and its own budget. It answers one kind of query only — "multiply by this Q" — with

      Hᵢ = Σ̂ᵢQ + Gᵢ/nᵢ,    Σ̂ᵢ = XᵢᵀXᵢ/nᵢ,    Gᵢ i.i.d. N(0, σ²),

  and refuses malformed queries (wrong shape, NaN, non-orthonormal Q) and every query beyond
  the T releases it agreed to. Nothing unnoised ever leaves it (``nᵢ``, which the replace-one
  relation keeps fixed, is public).
* The **server** (:class:`ServerState`), untrusted, sends ``Q⁽ᵗ⁾`` (row-sparse: its support and
  the ŝ × k block), combines ``K = Σ nᵢHᵢ / Σ nᵢ``, and sets ``V = ThinQR(K)``,
  ``Q⁽ᵗ⁺¹⁾ = ThinQR(Threshold(V, ŝ))`` (Algorithm 1 of the paper; Threshold keeps the ŝ rows of
  largest norm, ThinQR has a positive diagonal — :mod:`privpca.solvers.power`).

Engines (Flower: :mod:`privpca.federated.flower_app`) and the in-process estimator
(:class:`privpca.DPSPCA`) only move :class:`Query` and :class:`Reply` objects between these
two; both therefore compute the same numbers from the same seeds.

Privacy (per provider; replace one record of that provider, ‖x‖ ≤ D)
----------------------------------------------------------------------
Replacing ``y`` by ``x`` in ``Xᵢ`` changes ``XᵢᵀXᵢQ`` by ``(xxᵀ − yyᵀ)Q``, whose Frobenius norm
is at most ``D²`` for k = 1 and ``√2·D²`` for k ≥ 2 when Q has orthonormal columns
(:func:`privpca.decomposition.noisy_power.power_sensitivity`; the bound holds for any ``Q``
with ``‖Q‖₂ ≤ 1``, which is why a provider refuses a Q that is not orthonormal: a scaled-up Q
would amplify the data against the noise). So ``Σ̂ᵢQ`` has sensitivity
``Δᵢ = power_sensitivity(D, k)/nᵢ`` and ``Gᵢ/nᵢ`` has standard deviation ``m·Δᵢ``, with ``m``
the noise multiplier for which T adaptively chosen Gaussian releases compose to exactly
(ε, δ) (:func:`~privpca.accounting.gaussian_noise_multiplier_for_composition`). Each provider
draws its own ``Gᵢ``: the pseudo-code's single shared ``G⁽ᵗ⁾`` would be known to whoever
draws it, and the server is not trusted. Everything the server does with the answers, and the
output ``Q⁽ᵀ⁺¹⁾``, is post-processing; since the providers' data are disjoint, every record of
every provider is protected at (ε, δ) whatever the other providers do (parallel composition).

The paper's scale ``ω(ε, δ) = (2T/ε)·√(2 ln(2T/δ))`` (:func:`paper_noise_scale`, the standard
deviation of ``G``) is recorded for comparison only.

The start ``Q⁽⁰⁾`` is data-independent (Haar-random from the server's seed, or a public matrix
the user supplies): it costs nothing. A data-dependent start would be one more release and is
not offered.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import math
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import dp_accounting
import numpy as np
from numpy.typing import ArrayLike, NDArray

from privpca._validation import check_data, clip_rows
from privpca.accounting.composition import gaussian_noise_multiplier_for_composition
from privpca.accounting.record import PrivacyRecord, PrivacySpend
from privpca.decomposition.noisy_power import power_sensitivity
from privpca.exceptions import BudgetExceededError
from privpca.mechanisms.gaussian import certified_epsilon
from privpca.solvers.eigen import fix_signs
from privpca.solvers.power import random_orthonormal_basis, thin_qr, top_row_support

__all__ = [
    "DISTRIBUTED_REPLACE_ONE",
    "FileReleaseCounter",
    "ProviderDropoutError",
    "ProviderState",
    "Query",
    "QueryRefusedError",
    "ReleaseCounter",
    "Reply",
    "ServerState",
    "dpspca_noise_multiplier",
    "paper_noise_scale",
    "provider_noise_rng",
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


class QueryRefusedError(ValueError):
    """A provider refused a malformed query (wrong shape, NaN, non-orthonormal Q, ...)."""


class ProviderDropoutError(RuntimeError):
    """A provider did not answer a round (dropped out, timed out, or refused)."""


def paper_noise_scale(epsilon: float, delta: float, n_rounds: int) -> float:
    """Ge et al.'s ``ω(ε, δ) = (2T/ε)·√(2 ln(2T/δ))`` (std of G; for comparison only)."""
    return 2.0 * n_rounds / epsilon * math.sqrt(2.0 * math.log(2.0 * n_rounds / delta))


_MULTIPLIERS: dict[tuple[float, float, int], float] = {}


def dpspca_noise_multiplier(epsilon: float, delta: float, n_rounds: int) -> float:
    """``m = σ/Δ`` such that ``n_rounds`` Gaussian releases compose to (ε, δ) (cached)."""
    key = (float(epsilon), float(delta), int(n_rounds))
    if key not in _MULTIPLIERS:
        _MULTIPLIERS[key] = gaussian_noise_multiplier_for_composition(*key)
    return _MULTIPLIERS[key]


def provider_noise_rng(noise_seed: int | None, release: int) -> np.random.Generator:
    """The generator of a provider's noise for its ``release``-th answer (0-based).

    With a seed, the noise of release r is a pure function of ``(noise_seed, r)``: a provider
    whose process restarts between rounds (as Flower's ClientApp does) draws the same stream
    as one that lives throughout, and an in-process simulation with the same seeds gives
    bitwise the same answers. A seed is for experiments only: whoever knows it can subtract
    the noise. ``None`` draws fresh operating-system entropy for every release.
    """
    if noise_seed is None:
        return np.random.default_rng()
    return np.random.default_rng([int(noise_seed), int(release)])


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


def validate_query(query: Any, n_features: int, n_components: int) -> None:
    """Raise :class:`QueryRefusedError` unless ``query`` is a well-formed DPS-PCA query.

    Checked: the types, ``n_features == d``, a support of unique sorted indices in ``[0, d)``
    with at least k of them, a finite ``block`` of shape ``(len(support), k)`` and
    ``‖QᵀQ − I‖_max ≤ 1e-8`` (the sensitivity bound needs ``‖Q‖₂ ≤ 1``).
    """
    if not isinstance(query, Query):
        raise QueryRefusedError(f"Expected a Query; got {type(query).__name__}.")
    if query.n_features != n_features:
        raise QueryRefusedError(
            f"Query for n_features={query.n_features}; this provider holds {n_features} features."
        )
    support = np.asarray(query.support)
    block = np.asarray(query.block)
    if support.ndim != 1 or not np.issubdtype(support.dtype, np.integer):
        raise QueryRefusedError("Query support must be a 1-D array of integer row indices.")
    if block.ndim != 2 or block.shape != (support.shape[0], n_components):
        raise QueryRefusedError(
            f"Query block has shape {block.shape}; expected ({support.shape[0]}, {n_components}) "
            f"(support size × n_components={n_components} agreed by this provider)."
        )
    if support.shape[0] < n_components:
        raise QueryRefusedError(
            f"Query support has {support.shape[0]} rows, fewer than n_components={n_components}."
        )
    if support.size and (support[0] < 0 or support[-1] >= n_features
                         or np.any(np.diff(support) <= 0)):
        raise QueryRefusedError(
            f"Query support must be strictly increasing row indices in [0, {n_features})."
        )
    if not np.all(np.isfinite(block)):
        raise QueryRefusedError("Query contains NaN or infinity.")
    deviation = float(np.abs(block.T @ block - np.eye(n_components)).max())
    if not deviation <= ORTHONORMALITY_TOL:
        raise QueryRefusedError(
            f"Query Q is not orthonormal (max |QᵀQ − I| = {deviation:.3g} > "
            f"{ORTHONORMALITY_TOL:g}); the noise is calibrated for ‖Q‖₂ ≤ 1 only."
        )


# --- the provider's budget ---------------------------------------------------------------------


class ReleaseCounter:
    """Counts a provider's releases and refuses more than ``limit`` (in memory)."""

    def __init__(self, limit: int) -> None:
        self.limit = int(limit)
        self._used = 0

    @property
    def used(self) -> int:
        """How many releases have been made."""
        return self._used

    def reserve(self) -> int:
        """Book one release *before* it is computed; return its 0-based index.

        Raises
        ------
        BudgetExceededError
            When ``limit`` releases have already been made.
        """
        if self._used >= self.limit:
            raise BudgetExceededError(
                f"This provider agreed to {self.limit} releases and has made {self._used}: "
                "query refused, nothing released."
            )
        self._used += 1
        return self._used - 1


class FileReleaseCounter(ReleaseCounter):
    """A :class:`ReleaseCounter` kept in a JSON file under an exclusive lock.

    The count survives process restarts (Flower starts a fresh ClientApp process for every
    message) and new runs: a server that starts a second run against the same data finds the
    budget spent. The file also pins the agreement (ε, δ, T, k, D) and a fingerprint of the
    data; a provider restarted with other parameters on the same state file is refused rather
    than silently granted a fresh budget. Deleting the file is the data owner's decision.
    """

    def __init__(self, path: str | os.PathLike[str], limit: int, agreement: dict[str, Any]) -> None:
        super().__init__(limit)
        self.path = Path(path)
        self.agreement = dict(agreement)
        with self._locked() as state:
            self._used = int(state["releases"])

    def _locked(self) -> _LockedState:
        return _LockedState(self.path, self.limit, self.agreement)

    @property
    def used(self) -> int:
        with self._locked() as state:
            return int(state["releases"])

    def reserve(self) -> int:
        with self._locked() as state:
            used = int(state["releases"])
            if used >= self.limit:
                raise BudgetExceededError(
                    f"This provider agreed to {self.limit} releases and has made {used} "
                    f"(state file {self.path}): query refused, nothing released."
                )
            state["releases"] = used + 1
        self._used = used + 1
        return used


class _LockedState:
    """Context manager: read the state file under ``flock``, write it back on clean exit."""

    def __init__(self, path: Path, limit: int, agreement: dict[str, Any]) -> None:
        self.path, self.limit, self.agreement = path, limit, agreement

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
        else:
            self.state = {"releases": 0, "limit": self.limit, "agreement": self.agreement}
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
    """One data provider: its records, its noise, its budget; answers "multiply by Q".

    Parameters
    ----------
    X : array-like of shape (n_samples, n_features)
        The provider's records. NaN/infinity raise ValueError; rows longer than
        ``data_norm`` are clipped with a :class:`~privpca.exceptions.RowClippingWarning`.
    n_components : int
        k agreed with the server.
    epsilon, delta : float
        The provider's own (ε, δ) for all its releases together.
    n_rounds : int
        T: the number of releases it agrees to make, ever (for this data and counter).
    data_norm : float, default=1.0
        Public bound D on a record's L2 norm.
    noise_seed : int or None, default=None
        Seed of the noise (:func:`provider_noise_rng`); ``None`` (fresh entropy) in
        production.
    provider_id : str, default="0"
        Public name, echoed in replies (the server orders providers by it).
    counter : ReleaseCounter or None, default=None
        Where releases are booked (``None``: a new in-memory counter with limit T; use
        :class:`FileReleaseCounter` to make the budget survive restarts).

    Attributes
    ----------
    n_samples, n_features : int
    n_clipped : int
    noise_multiplier : float
        m = σ/Δ per release.
    sensitivity : float
        Δᵢ = power_sensitivity(D, k)/nᵢ, of ``Σ̂ᵢQ``.
    noise_scale : float
        m·Δᵢ, the standard deviation of each entry of ``Gᵢ/nᵢ``.
    """

    def __init__(
        self,
        X: ArrayLike,
        *,
        n_components: int,
        epsilon: float,
        delta: float,
        n_rounds: int,
        data_norm: float = 1.0,
        noise_seed: int | None = None,
        provider_id: str = "0",
        counter: ReleaseCounter | None = None,
    ) -> None:
        Xv = check_data(X)
        self.X, self.n_clipped = clip_rows(Xv, float(data_norm), owner=f"provider {provider_id}")
        self.n_samples, self.n_features = (int(s) for s in self.X.shape)
        self.n_components = int(n_components)
        self.epsilon, self.delta = float(epsilon), float(delta)
        self.n_rounds = int(n_rounds)
        self.data_norm = float(data_norm)
        self.noise_seed = noise_seed
        self.provider_id = str(provider_id)
        self.counter = ReleaseCounter(self.n_rounds) if counter is None else counter
        self.noise_multiplier = dpspca_noise_multiplier(self.epsilon, self.delta, self.n_rounds)
        self._raw_sensitivity = power_sensitivity(self.data_norm, self.n_components)
        self.sensitivity = self._raw_sensitivity / self.n_samples
        self.noise_scale = self.noise_multiplier * self.sensitivity

    def answer_query(self, query: Query) -> Reply:
        """Validate, book one release, and return ``Hᵢ = Σ̂ᵢQ + Gᵢ/nᵢ``.

        The product is computed on Q's support only: ``Xᵢᵀ(Xᵢ[:, S] Q_S)``, O(nᵢ·k·(ŝ + d)).

        Raises
        ------
        QueryRefusedError
            Malformed query (nothing is booked or released).
        BudgetExceededError
            The provider's T releases are spent (nothing is released).
        """
        validate_query(query, self.n_features, self.n_components)
        release = self.counter.reserve()
        Y = self.X[:, query.support] @ query.block
        P = self.X.T @ Y  # XᵢᵀXᵢQ, exact
        rng = provider_noise_rng(self.noise_seed, release)
        P += (self.noise_multiplier * self._raw_sensitivity) * rng.standard_normal(P.shape)
        P /= self.n_samples
        return Reply(self.provider_id, int(query.round), self.n_samples, P)

    def privacy_record(self, releases: int | None = None) -> PrivacyRecord:
        """This provider's guarantee after ``releases`` answers (default: the T agreed)."""
        count = self.n_rounds if releases is None else int(releases)
        return provider_privacy_record(
            epsilon=self.epsilon,
            delta=self.delta,
            n_rounds=self.n_rounds,
            n_components=self.n_components,
            data_norm=self.data_norm,
            n_samples=self.n_samples,
            n_clipped=self.n_clipped,
            releases=count,
        )


def provider_privacy_record(
    *,
    epsilon: float,
    delta: float,
    n_rounds: int,
    n_components: int,
    data_norm: float,
    n_samples: int,
    n_clipped: int,
    releases: int | None = None,
    n_providers: int = 1,
    notes: str = "",
) -> PrivacyRecord:
    """The :class:`PrivacyRecord` of a provider that made ``releases`` (≤ T) answers."""
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
        n_clipped=int(n_clipped),
        target_epsilon=epsilon,
        notes=text,
    )
    return spend_record


# --- server --------------------------------------------------------------------------------------


@dataclass
class ServerState:
    """The untrusted server of DPS-PCA: builds queries, combines answers, thresholds.

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

    Attributes
    ----------
    Q : ndarray of shape (n_features, n_components)
        The current iterate (row-sparse after the first round when ŝ < d).
    history : list of ndarray
        ``Q⁽¹⁾, Q⁽²⁾, …``: the start and every iterate (post-processing, free).
    round : int
        Rounds completed.
    dropped : dict
        provider id → round at which it stopped answering (``on_dropout="continue"``).
    """

    n_features: int
    n_components: int
    n_nonzero: int
    n_rounds: int
    start: NDArray[np.float64]
    Q: NDArray[np.float64] = field(init=False)
    history: list[NDArray[np.float64]] = field(init=False)
    round: int = field(init=False, default=0)
    dropped: dict[str, int] = field(init=False, default_factory=dict)

    def __post_init__(self) -> None:
        self.Q = np.asarray(self.start, dtype=np.float64).copy()
        self.history = [self.Q.copy()]

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

    @property
    def finished(self) -> bool:
        """Whether all T rounds are done."""
        return self.round >= self.n_rounds

    def query(self) -> Query:
        """The query of the next round (support and block of the current Q)."""
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

    def components(self) -> NDArray[np.float64]:
        """The output as ``(k, d)`` orthonormal rows, signs fixed (``components_``)."""
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
    replies: Sequence[Reply],
    *,
    on_dropout: str,
    reasons: dict[str, str] | None = None,
) -> list[Reply]:
    """Apply the dropout policy to one round's replies.

    ``expected`` are the providers still in the run. If some did not answer (``reasons`` may
    say why: timeout, refusal, lost connection): ``on_dropout="error"`` raises
    :class:`ProviderDropoutError`; ``"continue"`` records them in ``server.dropped`` and returns
    the replies of the others (they are not queried again, and the weights ``nᵢ/Σnⱼ`` are
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
                f"Round {server.round + 1}: provider(s) {missing} did not answer ({why}). "
                "Stopping (on_dropout='error'); no output released."
            )
        for p in missing:
            server.dropped[p] = server.round + 1
    return [r for r in replies if r.provider_id in expected]
