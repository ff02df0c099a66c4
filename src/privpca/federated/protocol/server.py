"""The untrusted server: it builds the messages, combines the answers and thresholds.

:class:`ServerState` walks the steps of a setting (mean rounds, prepare, power rounds,
variances); :func:`select_replies` applies the dropout policy to one step's replies. All of
it is post-processing of the providers' noised releases.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from privpca.federated.protocol.agreement import MEAN_PARTS, MEAN_ROUNDS
from privpca.federated.protocol.messages import (
    MeanQuery,
    MeanReply,
    Message,
    PrepareMessage,
    PrepareReply,
    ProviderDropoutError,
    Query,
    Reply,
    VarianceQuery,
    VarianceReply,
)
from privpca.federated.protocol.secure_sums import OpenedSum, secure_preparation
from privpca.pipeline.basis_error import RESIDUAL_MAX_FEATURES
from privpca.pipeline.spectrum import feasible_spectrum, read_off
from privpca.solvers.eigen import fix_signs
from privpca.solvers.power import random_orthonormal_basis, thin_qr, top_row_support

ON_DROPOUT: tuple[str, ...] = ("error", "continue")
INITS: tuple[str, ...] = ("random", "random-sparse")


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
    secure : tuple or None, default=None
        A secure run's ``(budget plan, Σ nᵢ, data_norm)``: the mean and the bound are then
        searched on the opened sums (:func:`~.secure_sums.secure_preparation`, phase
        ``"secure"``) instead of the providers' own releases.
    units : ndarray of shape (n_features,) or None, default=None
        The providers' public scales: a secure run's opened mean sums are in their units.

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
        After the variance round: the released spectrum made feasible (variances ≥ 0,
        ratios in [0, 1]; :func:`~privpca.pipeline.spectrum.feasible_spectrum`), what every
        reader of the run publishes.
    raw_variances : ndarray of shape (n_components,) or None
        The eigenvalues of the summed noisy ``QᵀΣQ`` before that (the error bound reads them).
    total_variance : float
        The summed noisy total over the same denominator (NaN before the variance round).
    read_off_pilots : bool
        Whether the explained variances were read off the providers' pilot readings (every
        provider's bound ladder chose below its top; :class:`VarianceReply`'s ``pilot``).
    residual : tuple of float or None
        Up to :data:`~privpca.pipeline.basis_error.RESIDUAL_MAX_FEATURES` features, the summed
        noisy ``(‖WΣᵢXᵢᵀXᵢQ‖_F, λ_max(WΣᵢXᵢᵀXᵢW))`` upper bounds over the same denominator
        (each provider's own pair, summed: the error bound reads them).
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
    secure: Any = None
    units: NDArray[np.float64] | None = None
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
    raw_variances: NDArray[np.float64] | None = field(init=False, default=None)
    total_variance: float = field(init=False, default=math.nan)
    residual: tuple[float, float] | None = field(init=False, default=None)
    read_off_pilots: bool = field(init=False, default=False)
    variance_noise_scale: float = field(init=False, default=math.nan)
    _rotated: NDArray[np.float64] | None = field(init=False, default=None)
    data_norm: float | None = field(init=False, default=None)
    _preparation: Any = field(init=False, default=None)
    _pending: Any = field(init=False, default=None)

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
        if self.secure is not None and self.table_mode:
            plan, n_total, data_norm = self.secure
            if isinstance(self.centering, str) or isinstance(data_norm, str):
                self._preparation = secure_preparation(plan, n_total, self.centering,
                                                       data_norm, self.n_features,
                                                       self.units)
                self._pending = next(self._preparation)

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
        """``"secure"``, ``"mean"``, ``"prepare"``, ``"query"``, ``"variance"`` or ``"done"``."""
        if self._preparation is not None:
            return "secure"
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
        if phase in ("secure", "mean", "prepare"):
            return 0
        return self.round + 1

    @property
    def step_label(self) -> str:
        """The next step, for messages (``"Round 3"``, ``"Mean round 1"``, ...)."""
        phase = self.phase
        if phase == "secure":
            return "Secure preparation"
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
        if phase == "secure":
            return self._pending
        if phase == "mean":
            assert self.mean is not None
            return MeanQuery(self.mean_round + 1, self.mean.copy())
        if phase == "prepare":
            return PrepareMessage(None if self.mean is None else self.mean.copy(),
                                  self.data_norm)
        if phase == "query":
            return self.query()
        if phase == "variance":
            return VarianceQuery(Query.from_dense(self.Q, round=self.n_rounds + 1))
        raise RuntimeError("The protocol is finished: no more messages.")

    def receive(self, replies: Sequence[Any]) -> None:
        """Combine the replies to :meth:`next_message` (dispatch on the phase)."""
        phase = self.phase
        if phase == "secure":
            self._advance(replies)
        elif phase == "mean":
            self.aggregate_mean(replies)
        elif phase == "prepare":
            self.acknowledge(replies)
        elif phase == "query":
            self.aggregate(replies)
        elif phase == "variance":
            self.aggregate_variances(replies)
        else:
            raise RuntimeError("The protocol is finished: no more replies expected.")

    def _advance(self, replies: Sequence[Any]) -> None:
        """Send the opened sum to the secure preparation; at its end, its mean and bound."""
        if len(replies) != 1 or not isinstance(replies[0], OpenedSum):
            raise ValueError("Secure preparation: expected one opened sum.")
        try:
            self._pending = self._preparation.send(replies[0])
        except StopIteration as done:
            mean, self.data_norm = done.value
            self.mean = None if mean is None else np.asarray(mean, dtype=np.float64)
            self.mean_round = MEAN_ROUNDS
            self._preparation = self._pending = None

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
        paired = self.n_features <= RESIDUAL_MAX_FEATURES  # each reply ends with its pair
        acc, total, n = np.zeros(len(iu[0]) + 2 * paired), 0.0, 0
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
        matrix[iu] = acc[:len(iu[0])]
        matrix = matrix + np.triu(matrix, 1).T
        denom = float(n - 1 if self.centering is not None and n > 1 else n)
        if paired:  # a sum of each provider's pair bounds the pooled pair above
            self.residual = (float(acc[-2]) / denom, float(acc[-1]) / denom)
        values, vectors = np.linalg.eigh(matrix / denom)
        values, vectors = values[::-1], vectors[:, ::-1]
        components = fix_signs(self.Q).T
        self._rotated = np.ascontiguousarray(fix_signs((vectors.T @ components).T).T)
        self.raw_variances, self.total_variance = values, total / denom
        # Made feasible here, so the in-process fit and a Flower run publish the same numbers.
        self.explained_variance, self.explained_variance_ratio, _ = feasible_spectrum(
            values, self.total_variance if total > 0 else math.nan)
        pilots = [reply.pilot for reply in ordered]
        if all(pilot is not None for pilot in pilots):
            self._read_off_pilots(np.asarray(pilots, dtype=np.float64), vectors, denom)
        self.variances_done = True

    def _read_off_pilots(self, pilots: NDArray[np.float64], vectors: NDArray[np.float64],
                         denom: float) -> None:
        """The variances along the rotated components read off the providers' pilot
        readings (``pilots``: one row per provider, each ladder having chosen below its
        top), as the central pipeline reads them off its pilot at the robust maximum
        (:func:`~privpca.pipeline.basis_error.spectrum_off_high_pilot`): summed, a reading
        within two of its noise's deviations is 0
        (:func:`~privpca.pipeline.spectrum.read_off`), and the components are reordered by
        them. The error bar keeps the ``variance`` part's."""
        k = self.n_components
        iu = np.triu_indices(k)
        M = np.zeros((k, k))
        M[iu] = pilots[:, :len(iu[0])].sum(axis=0)
        sd = math.sqrt(float(np.sum(pilots[:, -1] ** 2)))  # independent noise per provider
        read = read_off(vectors.T, M + np.triu(M, 1).T, sd, None, math.nan, 0.0, denom,
                        total=float(pilots[:, -2].sum()))
        assert read is not None and self._rotated is not None  # no current: always read
        order, self.explained_variance, self.explained_variance_ratio, _ = read
        self._rotated = np.ascontiguousarray(self._rotated[order])
        self.read_off_pilots = True

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
