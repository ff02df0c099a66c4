"""Private Oja (Liu, Kong, Jain & Oh 2022, Algorithm 2): a clipped, noisy Oja step per record.

One pass over the records in a random order, to rank k by block Oja (``ThinQR`` in place of
the normalisation; Liu et al. treat k = 1 and leave k > 1 open, §7). The non-private
reference, Algorithm 1, is :mod:`privpca.decomposition.oja`.

Privacy (central model, replace one record)
-------------------------------------------
Step t uses only record π(t): ``W ← QR(W + η_t·clip_β(A W) + 2η_tβα·Z)``, ``Z`` i.i.d.
``N(0, 1)`` of shape p×k, ``clip_β`` scaling the p×k block to Frobenius norm ≤ β. Replacing the
record moves ``η_t·clip_β(AW)`` by at most ``2η_tβ`` (two blocks of norm ≤ β), so every step is
a Gaussian mechanism with noise multiplier ``α`` on one record, chosen adaptively from the
previous outputs — a *local randomiser* in the sense of amplification by shuffling.

* ``amplification="shuffle"`` (the paper's Algorithm 2): the records are shuffled, so by
  Feldman–McMillan–Talwar (their Theorem 3.1 evaluated numerically as in the authors'
  reference code, with Theorem 3.8's term for δ₀; the paper's Theorem D.1 is the closed form;
  :mod:`privpca.mechanisms.shuffling`) the released trajectory is (ε, δ)-DP when each step is
  an adaptive (ε₀, δ₀)-DP local randomiser, ε₀ the largest the bound allows. ``α`` is then the
  analytic Gaussian multiplier for (ε₀, δ₀). The numerical bound holds for every n and ε
  (never refused), but amplifies little where n is small for ε (the paper's regime is
  ``ε = O(√(log(n/δ)/n))``): there ε₀ is close to ε with ``δ₀ ≪ δ``, and ``"none"`` may need
  less noise (compare ``noise_multiplier_``).
* ``amplification="none"`` [derived, ALGORITHMS.md]: each record enters exactly one step and
  the other steps do not read it, so (ε, δ) per step is (ε, δ) overall: ``α = σ(ε, δ)``.
  Valid for every ε and in any order; more noise than shuffling except where n is small for ε.

The paper's clipping threshold ``β = Cλ₁√d(Kγ·log^a(nd/ζ) + 1)`` needs λ₁ and C, which users
do not know; ``clip_norm`` is β itself. For records with ``‖x‖ ≤ D`` and orthonormal W,
``‖x xᵀW‖_F ≤ D²``, so ``clip_norm = D²`` never clips.

On a table (the defaults)
-------------------------
``centering="private"`` and ``clip_norm="auto"``: the stream reads **pair differences**
``(x_a − x_b)/√2`` of the records left after a held-out share, which have the covariance as
second moment, and a private 99 % quantile D of the held-out centred row norms gives
``β = D²`` (a gradient block ``g gᵀW`` has norm ≤ ‖g‖², so only derived records longer than D
can be clipped: about 1 % for Gaussian-like data, where ``‖g‖`` and ``‖x − μ‖`` have the same
law). β is a released value, so the per-step sensitivity ``2ηβ`` is computed from released
quantities only. Replacing one record replaces at most one derived record, so the guarantees
above hold unchanged for the ``m = ⌊(n − n_held)/2⌋`` derived records; the held-out share
(private mean, bound and explained variance at the full (ε, δ)) composes in parallel.
:mod:`privpca.decomposition._stochastic` gives the argument in full. ``centering=None``
with a numeric ``clip_norm`` is the paper's algorithm exactly.

Streamed tables (one pass, in the table's order)
------------------------------------------------
``fit`` on a Dask array, a memory map, Parquet or chunks reads the blocks once, in order,
holding one block and W (:mod:`privpca.decomposition._stochastic`). That order is not a
uniformly random one, so **amplification by shuffling does not apply and is refused**
(ValueError, before anything is charged): ``amplification="none"`` is required, whose
argument above never used the order. Shuffling inside a bounded buffer is not offered: it is
not a uniformly random permutation of the n records, and no amplification bound is claimed
for it. ``shuffle=False`` on an in-memory array reads it the same way and gives the streamed
fit's output for the same seed (the noise is drawn 4096 steps at a time, counted in steps,
so any cut into blocks draws the same). On defaults a secret, uniformly random set of rows is
held out for the mean, β and the variances, gathered in one pass before the stream.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, ClassVar

import dp_accounting
import numpy as np
from numpy.typing import NDArray
from sklearn.utils._param_validation import StrOptions

from privpca._validation import (
    caller_stacklevel,
    check_n_components,
    check_norm_bound,
)
from privpca.accounting.calibration import analytic_multiplier
from privpca.accounting.ledger import PrivacyLedger
from privpca.accounting.neighbouring import Neighbouring
from privpca.accounting.record import PrivacyRecord, PrivacySpend
from privpca.decomposition._constraints import DATA_NORM, STOCHASTIC, WHITEN
from privpca.decomposition._records import RecordStream
from privpca.decomposition._stochastic import (
    HeldOutRelease,
    StochasticPCA,
    StreamInput,
    StreamPlan,
    StreamRun,
)
from privpca.exceptions import RowClippingWarning
from privpca.mechanisms.noise import GaussianNoiseSteps
from privpca.mechanisms.shuffling import local_epsilon_for_shuffling, secret_permutation
from privpca.solvers.eigen import fix_signs
from privpca.solvers.oja import (
    OJA_LEARNING_RATE,
    LearningRate,
    VectorGradients,
    block_oja_update,
    check_steps,
    resolve_learning_rate,
)
from privpca.solvers.power import random_orthonormal_basis

__all__ = ["PrivateOjaPCA"]

#: Records per draw of the noise (counted in steps: any cut into blocks draws the same).
_CHUNK = 4096


@dataclass(frozen=True)
class _Stream:
    """Private Oja's stream: its calibration and β (``"auto"``: the held-out bound²)."""

    cal: _Calibration
    clip: float | str


@dataclass(frozen=True)
class _Calibration:
    """Private Oja's per-step calibration for n records (public: no data read)."""

    epsilon: float
    delta: float
    amplification: str
    eps0: float
    delta0: float
    certified: float
    calibration: str
    alpha: float
    lr: LearningRate


class PrivateOjaPCA(StochasticPCA):
    """Private Oja's algorithm (Liu et al., Algorithm 2): clipping, Gaussian noise, shuffling.

    One pass in a uniformly random order; step t: ``W ← QR(W + η_t·clip_β(A_t W) +
    2η_tβα·Z_t)``. The module docstring gives the privacy analysis. On defaults the stream
    reads pair differences of the records (the covariance, not the second moment) and a
    held-out share releases ``mean_``, β and the explained variance
    (:mod:`privpca.decomposition._stochastic`).

    Parameters
    ----------
    n_components : int, default=1
        Dimension k (block Oja for k > 1; each step privatises the p×k gradient block).
    epsilon : float, default=1.0
        ε > 0 of the overall guarantee.
    delta : float, default=1e-5
        0 < δ < 1.
    centering : "private", None or array of shape (n_features,), default="private"
        ``"private"``: the stream reads pair differences ``(x_a − x_b)/√2`` (no budget, half
        the records) and ``mean_`` is a private mean of the held-out share. ``None``: no
        centring (the paper's ``E[x xᵀ]``). An array: a public mean, subtracted (free).
    clip_norm : "auto" or float, default="auto"
        β, a bound on the **squared** record norm: ``clip_norm = D²`` where D bounds ``‖x‖``,
        the D the other estimators take as ``data_norm`` (so ``clip_norm=1.0`` is
        ``data_norm=1.0``, ``clip_norm=4.0`` is ``data_norm=2.0``). Each gradient block
        ``A_t W`` is scaled to Frobenius norm ≤ β. ``"auto"``:
        ``β = D²`` with D a private 99 % quantile of the held-out (centred) row norms, which
        clips few blocks (``‖g gᵀW‖ ≤ ‖g‖²``) and follows the data's units; a float is a
        public β (``clip_norm = D²`` never clips records with ``‖x‖ ≤ D``), with a
        :class:`~privpca.exceptions.RowClippingWarning` when it clips. ``"auto"`` is the
        default because a fixed number cannot suit data in arbitrary units: β = 1 on a table
        in metres clips every block, β far above the gradients drowns them in noise.
    amplification : {"shuffle", "none"}, default="shuffle"
        Privacy argument (module docstring). ``"shuffle"`` certifies ε by FMT's numerical
        amplification bound for the m records the stream reads (the record's ``calibration``
        names the bound used), and raises ValueError when the records are not read in a
        uniformly random order (a streamed table, ``shuffle=False``): the amplification
        theorem needs one. ``"none"`` holds in any order.
    learning_rate : "auto", float or (float, float), default="auto"
        As in :class:`~privpca.OjaPCA`.
    holdout_fraction : "auto" or float, default="auto"
        Share of the records held out (outside the papers' setting) for the private mean, β
        and the explained variance, at the full (ε, δ) (parallel composition). ``"auto"``:
        0.1, raised to the fewest rows the held-out searches need at these settings (a
        function of n, p, ε and δ only), up to half the table.
    shuffle : "auto" or bool, default="auto"
        Read the records in a uniformly random order (Algorithm 2, line 1; ``"auto"`` for
        in-memory arrays) or in their order (``False``; ``"auto"`` for streamed tables,
        read in one pass with memory independent of n; ``True`` is refused on them). In
        the given order only ``amplification="none"`` applies, and the accuracy suffers if
        the rows are sorted; see :mod:`privpca.decomposition._stochastic` (streamed tables:
        order, held-out rows).
    stream_centering : {"mean", "pairs"}, default="mean"
        With ``centering="private"``: ``"mean"`` centres the streamed records on the held-out
        share's private mean (a released value, computed from other records: free for the
        stream); ``"pairs"`` streams pair differences ``(x_a − x_b)/√2`` (no mean needed, half
        as many records). Measured at n = 10⁶, d = 20 (docs/DP_PCA.md): "mean" 0.52 against
        0.85 for Private Oja, 0.19 against 0.31 for DP-PCA.
    budget_shares : dict or None, default=None
        Relative weights of the held-out parts (``"bound_raw"``, ``"mean"``, ``"bound"``,
        ``"variance"``), normalised over those in use;
        :data:`~privpca.decomposition._stochastic.HOLDOUT_SHARES` by default.
    whiten : bool, default=False
        Divide the projections of :meth:`transform` by ``sqrt(explained_variance_)`` (and
        multiply them back in :meth:`inverse_transform`), as scikit-learn's ``PCA``:
        post-processing of released values; the fit is the same either way.
    random_state : None, int or numpy.random.Generator, default=None
        Source of the order, ``W₀``, the noise and the held-out split.
    ledger : PrivacyLedger or None, default=None
        Where the spend is recorded.

    Attributes
    ----------
    components_ : ndarray of shape (n_components, n_features)
        Outside the papers' setting, ordered by decreasing private variance.
    mean_ : ndarray of shape (n_features,)
        The private (held-out) or public mean ``transform`` subtracts; zeros uncentred.
    scale_ : None
    data_norm_ : float
        D, the held-out bound (``√β`` in the papers' setting: the norm β never clips).
    explained_variance_ : ndarray of shape (n_components,)
        Private variance of the held-out rows (centred, clipped to D) along each component,
        over ``n_held − 1`` (``n_held`` uncentred); NaN in the papers' setting.
    explained_variance_ratio_ : ndarray of shape (n_components,)
        Over the held-out rows' private total variance, made feasible
        (:func:`~privpca.pipeline.spectrum.feasible_spectrum`); NaN in the papers' setting.
    noise_level_ : float
        ``2βα/√m``: the standard deviation, per entry, of the average over the m steps of the
        noise added to the gradient blocks, in the units of ``explained_variance_``. An
        indicator of the noise the stream averages (Oja's error grows with it over the
        eigengap), not a bound.
    expected_error_ : float or None
        The smaller of the Ky Fan and the Davis–Kahan residual bounds from the released
        variances and residual pair, w.p. ≥ 95 %, capped at √(2k): derivation in
        :func:`~privpca.pipeline.basis_error.component_error_bound`. It bounds the distance
        to the PCA of the *held-out* rows (a uniformly random share of the table). None in
        the papers' setting (only W is released).
    noise_multiplier_ : float
        α (noise std over the per-step sensitivity 2ηβ).
    local_epsilon_ : float
        ε₀ of each step (equal to ε without amplification).
    clip_norm_ : float
        β used (a bound on ``‖x‖²``).
    n_iter_ : int
        Steps: n, or m (the stream's records) outside the papers' setting.
    learning_rate_ : LearningRate
    privacy_ : PrivacyRecord
        The shuffled (or per-step) guarantee; outside the papers' setting also every
        held-out part, with (ε, δ) the request. Its events are used, conservatively
        (per-step Gaussian, no amplification), when a ledger composes several fits.
    n_features_in_ : int

    References
    ----------
    X. Liu, W. Kong, P. Jain, S. Oh. DP-PCA: Statistically optimal and differentially private
    PCA. NeurIPS 2022, Algorithm 2 and Theorem D.1.
    V. Feldman, A. McMillan, K. Talwar. Hiding among the clones: a simple and nearly optimal
    analysis of privacy amplification by shuffling. FOCS 2021, Theorems 3.1 and 3.8, and the
    authors' reference code (github.com/apple/ml-shuffling-amplification).

    Examples
    --------
    >>> from privpca import PrivateOjaPCA
    >>> from privpca.datasets import make_spiked
    >>> X, V = make_spiked(20_000, 10, 1, lam=9.0, random_state=0)
    >>> est = PrivateOjaPCA(epsilon=0.5, centering=None, clip_norm=1.0, random_state=0).fit(X)
    >>> round(est.privacy_.epsilon, 3) <= 0.5
    True
    """

    _parameter_constraints: ClassVar[dict[str, list[Any]]] = {
        **STOCHASTIC,
        "clip_norm": DATA_NORM,
        "amplification": [StrOptions({"shuffle", "none"})],
        "whiten": WHITEN,
    }

    def __init__(
        self,
        n_components: int = 1,
        *,
        epsilon: float = 1.0,
        delta: float = 1e-5,
        centering: Any = "private",
        clip_norm: float | str = "auto",
        amplification: str = "shuffle",
        learning_rate: Any = "auto",
        holdout_fraction: float | str = "auto",
        shuffle: Any = "auto",
        stream_centering: str = "mean",
        budget_shares: dict[str, float] | None = None,
        whiten: bool = False,
        random_state: Any = None,
        ledger: PrivacyLedger | None = None,
    ) -> None:
        self.n_components = n_components
        self.epsilon = epsilon
        self.delta = delta
        self.centering = centering
        self.clip_norm = clip_norm
        self.amplification = amplification
        self.learning_rate = learning_rate
        self.holdout_fraction = holdout_fraction
        self.shuffle = shuffle
        self.stream_centering = stream_centering
        self.budget_shares = budget_shares
        self.whiten = whiten
        self.random_state = random_state
        self.ledger = ledger

    # ------------------------------------------------------------------ parameters
    def __sklearn_tags__(self) -> Any:
        tags = super().__sklearn_tags__()
        # A sparse matrix is read in its stored order: the default amplification by
        # shuffling refuses it (saying so); amplification="none" fits it.
        tags.input_tags.sparse = self.amplification == "none"
        return tags

    def _check_clip_norm(self) -> float | str:
        """``"auto"`` or a public β > 0."""
        if isinstance(self.clip_norm, str):
            if self.clip_norm == "auto":
                return "auto"
            raise ValueError(
                "The 'clip_norm' parameter of PrivateOjaPCA must be 'auto' or a float in the "
                f"range (0, inf). Got {self.clip_norm!r} instead."
            )
        return check_norm_bound(self.clip_norm, "clip_norm", owner=self)

    def _paper_mode(self, n_features: int) -> bool:
        return self.centering is None and not isinstance(self.clip_norm, str)

    def _check_matrix_params(self) -> None:
        if isinstance(self._check_clip_norm(), str):
            raise ValueError(
                "PrivateOjaPCA.fit_matrices needs a numeric clip_norm (a public bound β on "
                "‖A_i W‖_F, e.g. max ‖A_i‖_F if it is public); clip_norm='auto' estimates β "
                "from held-out vector records."
            )

    def _calibrate(self, n: int, *, shuffle: bool = True) -> _Calibration:
        """Validate (ε, δ, amplification, learning rate) and calibrate α for n steps."""
        epsilon, delta = float(self.epsilon), float(self.delta)  # declared: checked
        amplification = self.amplification
        if amplification == "shuffle" and not shuffle:
            # Never swap the guarantee silently: amplification needs a uniformly random,
            # unreleased order; records read in a given order get the per-step guarantee.
            raise ValueError(
                "PrivateOjaPCA: amplification='shuffle' needs the records in a uniformly "
                "random order (Feldman-McMillan-Talwar), and this fit reads them in the "
                "table's order (a streamed table or a sparse matrix, or shuffle=False). Use "
                "amplification='none' (the per-step guarantee, valid in any order; more "
                "noise), or fit an in-memory array with shuffle='auto'."
            )
        lr = resolve_learning_rate(
            self.learning_rate, OJA_LEARNING_RATE, owner="PrivateOjaPCA"
        )
        if amplification == "shuffle":
            guarantee = local_epsilon_for_shuffling(epsilon, delta, n)
            eps0, delta0 = guarantee.epsilon0, guarantee.delta0
            certified = guarantee.epsilon
            calibration = f"analytic + shuffling: {guarantee.bound}"
        else:
            eps0, delta0 = epsilon, delta
            certified, calibration = epsilon, "analytic (one step per record)"
        alpha = analytic_multiplier(eps0, delta0)
        return _Calibration(epsilon, delta, amplification, eps0, delta0, certified,
                            calibration, alpha, lr)

    # ------------------------------------------------------------------ the stream
    def _stream(
        self,
        source: Any,
        cal: _Calibration,
        beta: float,
        k: int,
        rng: np.random.Generator,
        *,
        shuffle: bool = True,
    ) -> tuple[NDArray[np.float64], int]:
        """Algorithm 2 over the records of ``source``: ``(W, blocks clipped)``.

        ``W₀`` is uniform on the Stiefel manifold, then the order: a permutation
        (Algorithm 2, line 1, and what shuffling assumes), the records' own order with
        ``shuffle=False`` (only with ``amplification="none"``: :meth:`_calibrate` refuses the
        other), or a streamed :class:`RecordStream`'s, read once.
        """
        W = random_orthonormal_basis(source.n_features, k, rng)
        n = source.n_samples
        etas = cal.lr(np.arange(1, n + 1, dtype=np.float64))
        noise_sd = 2.0 * beta * cal.alpha  # per unit of η
        if isinstance(source, VectorGradients):
            source = RecordStream(source.X)
        if isinstance(source, RecordStream):
            order = (None if source.is_streamed
                     else (secret_permutation(n, rng) if shuffle else np.arange(n)))
            return _private_oja_steps(W, source.blocks(order, _CHUNK), n, etas, noise_sd,
                                      beta, rng)
        order = secret_permutation(n, rng) if shuffle else np.arange(n)
        n_clipped = 0
        p = source.n_features
        noise = GaussianNoiseSteps(noise_sd, rng, (p, k), sensitivity=2.0 * beta)
        for start in range(0, n, _CHUNK):
            idx = order[start : start + _CHUNK]
            noise.draw(len(idx))
            for i, rec in enumerate(idx):
                with np.errstate(over="ignore", invalid="ignore"):
                    G = source.gradients(np.array([rec]), W).reshape(p, k)
                    norm = float(np.linalg.norm(G))
                if norm > beta:
                    G *= beta / norm
                    n_clipped += 1
                W = block_oja_update(W, noise.release(G, i, etas[start + i]))
        return W, n_clipped

    def _stream_spend(self, cal: _Calibration, beta: float, *, derived: bool) -> PrivacySpend:
        what = "derived record (pair difference)" if derived else "record"
        return PrivacySpend(
            mechanism=f"gaussian: one clipped gradient step per {what} (local randomiser)",
            epsilon=cal.certified,
            delta=cal.delta,
            sensitivity=2.0 * beta,
            noise_scale=2.0 * beta * cal.alpha,
            dp_event=dp_accounting.GaussianDpEvent(cal.alpha),
        )

    def _stream_notes(self, cal: _Calibration, beta: float, n: int) -> str:
        return (
            f"Each step adds N(0, (2·eta_t·beta·alpha)²) to eta_t·clip_beta(A W) with "
            f"beta={beta:g}, alpha={cal.alpha:.4g}: a ({cal.eps0:.4g}, {cal.delta0:.3g})-DP "
            "local randomiser per record. "
            + (
                f"Shuffling n={n} records amplifies it to ({cal.certified:.4g}, "
                f"{cal.delta:g}) ({cal.calibration}). "
                if cal.amplification == "shuffle"
                else "Each record enters one step only, so this is the overall guarantee. "
            )
        )

    # ------------------------------------------------------------------ the papers' setting
    def _papers_plan(self, data: StreamInput) -> StreamPlan:
        """The paper's algorithm on the records as given (uncentred, public β): its record,
        known in full before the stream reads a record."""
        beta = check_norm_bound(self.clip_norm, "clip_norm", owner=self)
        n = data.n_samples
        cal = self._calibrate(n, shuffle=data.shuffle)
        k = check_n_components(self.n_components, data.n_features, owner=self)
        record = PrivacyRecord(
            epsilon=cal.certified,
            delta=cal.delta,
            model="central",
            neighbouring=Neighbouring.REPLACE_ONE_CENTRAL.description,
            sensitivity=2.0 * beta,
            noise_scale=2.0 * beta * cal.alpha,
            calibration=cal.calibration,
            data_norm=math.sqrt(beta),
            n_samples=int(n),
            spends=(self._stream_spend(cal, beta, derived=False),),
            target_epsilon=cal.epsilon,
            notes=(
                self._stream_notes(cal, beta, n)
                + "data_norm is sqrt(clip_norm): the record norm that clipping never touches. "
                "When composed with other fits the per-step Gaussian event (no amplification) "
                "is used, which is conservative."
            ),
        )
        return StreamPlan(planned=record, mode=data.mode, k=k, shuffle=data.shuffle,
                          stream=_Stream(cal, beta))

    def _release_papers(self, plan: StreamPlan, records: Any,
                        rng: np.random.Generator) -> None:
        cal, beta = plan.stream.cal, plan.stream.clip
        assert isinstance(beta, float)
        W, n_clipped = self._stream(records, cal, beta, plan.k, rng, shuffle=plan.shuffle)
        if n_clipped:
            _warn_clipped(beta)
        self.components_ = fix_signs(W).T.copy()
        self._set_stream_attributes(cal, beta, records.n_samples)

    def _set_stream_attributes(self, cal: _Calibration, beta: float, n: int) -> None:
        self.noise_multiplier_ = cal.alpha
        self.local_epsilon_ = cal.eps0
        self.clip_norm_ = float(beta)
        self.n_iter_ = n
        self.learning_rate_ = cal.lr

    def _paper_noise_level(self) -> float:
        return 2.0 * self.clip_norm_ * self.noise_multiplier_ / math.sqrt(max(self.n_iter_, 1))

    def _paper_data_norm(self) -> float:
        return math.sqrt(self.clip_norm_)

    # ------------------------------------------------------------------ on a table
    def _table_stream_plan(self, m: int, p: int, *, pairs: bool,
                           streamed: bool) -> tuple[_Stream, PrivacySpend, str]:
        """β (public, or ``"auto"``: the held-out bound squared) and α for m steps; a
        streamed table's order refuses amplification by shuffling."""
        clip = self._check_clip_norm()
        cal = self._calibrate(m, shuffle=not streamed)
        planned = PrivacySpend(
            mechanism="statistic: planned", epsilon=cal.certified, delta=cal.delta,
            sensitivity=math.nan, noise_scale=math.nan,
            dp_event=dp_accounting.GaussianDpEvent(cal.alpha),
        )
        return _Stream(cal, clip), planned, cal.calibration

    def _table_stream(self, plan: StreamPlan, records: Any, held: HeldOutRelease,
                      rng: np.random.Generator) -> StreamRun:
        """Algorithm 2 on the (derived) records left after the held-out share: an array's
        shuffled, a streamed table's in order."""
        cal, clip = plan.stream.cal, plan.stream.clip
        beta = held.prepared.data_norm ** 2 if isinstance(clip, str) else float(clip)
        W, n_clipped = self._stream(records, cal, beta, plan.k, rng)
        if n_clipped and not isinstance(clip, str):
            _warn_clipped(beta)
        m = records.n_samples
        self._set_stream_attributes(cal, beta, m)
        self.noise_level_ = self._paper_noise_level()
        notes = (self._stream_notes(cal, beta, m)
                 + ("beta = D² (clip_norm='auto'), D the held-out private norm bound. "
                    if isinstance(clip, str) else "beta is the public clip_norm. "))
        assert plan.split is not None
        return StreamRun(W, self._stream_spend(cal, beta, derived=plan.split.pairs), notes)


def _private_oja_steps(
    W: NDArray[np.float64],
    blocks: Iterable[NDArray[np.float64]],
    n: int,
    etas: NDArray[np.float64],
    noise_sd: float,
    beta: float,
    rng: np.random.Generator,
) -> tuple[NDArray[np.float64], int]:
    """Algorithm 2's steps on vector records, one per row of ``blocks`` (n in all, in order).

    The noise is drawn ``_CHUNK`` steps at a time, counted in steps, not blocks: any cut of
    the same rows into blocks (an in-memory gather, a stream's chunks) draws the same noise.
    """
    p, k = W.shape
    n_clipped = 0
    t = 0
    # One record's clipped gradient moves by at most 2β: the release's sensitivity.
    noise = GaussianNoiseSteps(noise_sd, rng, (p, k), sensitivity=2.0 * beta)
    for X_chunk in blocks:
        for x in X_chunk:
            if t >= n:
                break
            j = t % _CHUNK
            if j == 0:
                noise.draw(min(_CHUNK, n - t))
            with np.errstate(over="ignore", invalid="ignore"):  # huge rows: below
                G = np.outer(x, x @ W)
                norm = float(np.linalg.norm(G))
            if not np.isfinite(norm):
                # ‖x‖ ≥ ~1e154: x xᵀW overflows; its clipped value is exact from x/max|x|.
                xs = x / np.abs(x).max()
                G = np.outer(xs, xs @ W)
                norm_s = float(np.linalg.norm(G))
                G = G * (beta / norm_s) if norm_s > 0 else np.zeros_like(G)
                if norm_s > 0:
                    n_clipped += 1
            elif norm > beta:
                G *= beta / norm
                n_clipped += 1
            W = block_oja_update(W, noise.release(G, j, etas[t]))
            t += 1
    check_steps(t, n)
    return W, n_clipped


def _warn_clipped(beta: float) -> None:
    # No count: how many gradients were clipped is a statistic of the data.
    warnings.warn(
        f"Some gradient blocks had a norm above clip_norm={beta:g} and were clipped. The "
        "privacy guarantee holds; the estimate is biased. Raise clip_norm (more noise) or "
        "rescale the data if this is unexpected.",
        RowClippingWarning,
        stacklevel=caller_stacklevel(),
    )
