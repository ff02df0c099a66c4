"""A data provider: its records, its noise and its budget; it answers the server's messages.

:class:`ProviderState` validates every message (:mod:`.messages`), books each release on its
counter (:mod:`.counter`) before computing it, and draws its noise from
:func:`provider_noise_rng`.

A provider given a streamed table (anything :func:`privpca.streaming.as_row_source` accepts)
never forms its rows: each statistic it releases is a sum over its rows, computed as one
block reduction of its :class:`~privpca.streaming.RowSource`
(:mod:`privpca.streaming.reductions`, on the Dask workers for a Dask array), exact; the
provider adds its noise to the total afterwards, once, with the same draws as from an
in-memory array. Its memory is one block (plus p×k and bins × p partial sums), whatever its n.

* the private mean's rounds: the rows binned by ``‖x − c‖`` with each bin's sums
  (:func:`~privpca.streaming.reductions.binned_norm_sums`): the norm histogram, then the
  exact clipped sum at the released bound;
* the bound ``Dᵢ``: counts of the centred (scaled) row norms on the log grid
  (:func:`~privpca.streaming.reductions.norm_counts`);
* each power answer: ``Σ yᵢ(yᵢ[S]ᵀQ_S)`` over the prepared rows ``yᵢ = clip_Dᵢ((xᵢ − μ̂)/s)``
  (:func:`~privpca.streaming.reductions.clipped_product` on Q's support; one pass per round);
* the variances: ``(Σ (Q_Sᵀyᵢ[S])(…)ᵀ, Σ ‖yᵢ‖²)``
  (:func:`~privpca.streaming.reductions.projected_moments` on the support).

The passes prepare each block as the in-memory rows are prepared (:meth:`ProviderState._clip`):
the same shift, division, norms (``exact_norms``) and clip test, with its relative slack
:data:`CLIP_SLACK` (``slack``), so the streamed answers are the in-memory ones to rounding.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from functools import partial
from typing import Any, TypeVar

import dp_accounting
import numpy as np
from numpy.typing import ArrayLike, NDArray

from privpca._config import fit_noise_mode
from privpca._validation import (
    check_data,
    check_delta,
    check_epsilon,
    check_in_range,
    check_norm_bound,
    row_norms,
    warn_clipped,
)
from privpca.accounting.neighbouring import Neighbouring
from privpca.accounting.record import PrivacyRecord, PrivacySpend
from privpca.federated.protocol.agreement import (
    MEAN_PARTS,
    MEAN_ROUNDS,
    is_table_mode,
    provider_release_limits,
)
from privpca.federated.protocol.counter import ReleaseCounter, _refusal
from privpca.federated.protocol.messages import (
    AnyReply,
    MeanQuery,
    MeanReply,
    PrepareMessage,
    PrepareReply,
    Query,
    QueryRefusedError,
    Reply,
    VarianceQuery,
    VarianceReply,
    validate_query,
    validate_vector,
)
from privpca.federated.protocol.privacy import (
    _POST_PROCESSING,
    STATISTIC_MECHANISM,
    dpspca_noise_multiplier,
    provider_privacy_record,
)
from privpca.mechanisms.noise import gaussian_release
from privpca.mechanisms.randomness import check_noise_rng, noise_mode_of
from privpca.mechanisms.sensitivity import power_sensitivity
from privpca.pipeline.budget import BudgetPlan
from privpca.pipeline.preprocessing import (
    BoundNotFoundError,
    private_mean,
    private_mean_from_sum,
    private_norm_bound,
    private_norm_bound_from_counts,
)
from privpca.pipeline.release import ReleasePipeline
from privpca.pipeline.rows import PreparedRows, Statistic
from privpca.pipeline.settings import DEFAULT_NORM_QUANTILE, PipelineSettings
from privpca.streaming import reductions
from privpca.streaming.reductions import BinCounts
from privpca.streaming.sources import RowSource

_T = TypeVar("_T")

#: Relative slack of the provider's clip test: rows of norm ≤ D·(1 + slack) are kept as they
#: are, so a row of norm D up to rounding is clipped by neither the in-memory nor the streamed
#: path (both test with it).
CLIP_SLACK = 1e-12

#: Spawn keys of the noise streams of the other kinds (the power answers keep their streams).
_KIND_CODES = {"mean": 1, "bound": 2, "variance": 3}


def provider_noise_rng(noise_seed: int | None, release: int,
                       kind: str = "query") -> np.random.Generator:
    """The generator of a provider's noise for its ``release``-th release of ``kind`` (0-based).

    With a seed, the noise of a release is a pure function of ``(noise_seed, kind, release)``:
    a provider whose process restarts between messages (as Flower's ClientApp does) draws the
    same stream as one that lives throughout, and an in-process simulation with the same seeds
    gives bitwise the same answers. The power answers use ``default_rng([seed, release])`` (the
    streams of the papers' setting, unchanged); the other kinds are spawned children
    ``SeedSequence(seed, spawn_key=(code, release))``, independent of those. A seed is for
    experiments only: whoever knows it can subtract the noise. ``None`` (the default) draws
    every release from a fresh OS-keyed
    :class:`~privpca.mechanisms.secure_noise.SecureGenerator` (the secure path), unless the
    provider's process opted out (``PRIVPCA_SECURE_MODE=0``); in strict secure mode
    (``PRIVPCA_SECURE_MODE=1``) a seed is refused.
    """
    from privpca._config import secure_mode

    if secure_mode():
        if noise_seed is not None:
            raise ValueError("Secure mode refuses a provider noise seed: it would make the "
                             "provider's noise reproducible. Leave --noise-seed unset.")
        from privpca.mechanisms.secure_noise import SecureGenerator

        return SecureGenerator()
    if noise_seed is None:
        return check_noise_rng(None)  # secure unless the user opted out
    if kind == "query":
        return np.random.default_rng([int(noise_seed), int(release)])
    seq = np.random.SeedSequence(int(noise_seed), spawn_key=(_KIND_CODES[kind], int(release)))
    return np.random.default_rng(seq)


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
        pass over it (:mod:`privpca.streaming.reductions`), with the same mechanisms and
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
        :func:`provider_release_limits`; use
        :class:`~privpca.federated.protocol.counter.FileReleaseCounter` to make the budget
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
    stream : RowSource or None
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
        self.stream: RowSource | None = None
        #: A streamed table's centre, public scales and bound Dᵢ (None until prepared): each
        #: statistic's pass prepares its blocks with them.
        self._stream_prepared: tuple[NDArray[np.float64] | None, NDArray[np.float64] | None,
                                     float] | None = None
        if is_streamed(X):  # validated block by block as each pass reads it
            self.stream = as_row_source(X)
            self.n_samples = int(self.stream.n_samples)
            self.n_features = int(self.stream.n_features)
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
        if budget_shares is not None and not isinstance(budget_shares, Mapping):
            raise ValueError(f"The 'budget_shares' parameter of {who} must be a dict of part -> "
                             f"share or None. Got {budget_shares!r} instead.")
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
                self._stream_prepared = (None, None, float(data_norm))
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
            model="distributed", neighbouring=Neighbouring.DISTRIBUTED_REPLACE_ONE,
        )
        try:  # too few rows for the private bounds: refused before anything is released
            self._run.check_rows()
        except BoundNotFoundError as exc:
            raise BoundNotFoundError(f"provider {self.provider_id}: {exc}", rows=exc.rows,
                                     needed=exc.needed, epsilon_needed=exc.epsilon_needed
                                     ) from exc
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
        over = norms > data_norm * (1.0 + CLIP_SLACK)
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
            self._stream_prepared = (mean, self._public_scale(), float(data_norm))
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
        return self.rows is not None or self._stream_prepared is not None

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
            (R,), _ = private_norm_bound(norms, b.multiplier, DEFAULT_NORM_QUANTILE, rng,
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
            seen["sums"] = sums = reductions.binned_norm_sums(stream, c, base)
            return sums.index, sums.counts

        b = self._plan[bound_part]
        try:
            (R,), _ = private_norm_bound_from_counts(
                counter, self.n_samples, b.multiplier, DEFAULT_NORM_QUANTILE, rng,
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
                    (D,), rel = private_norm_bound_from_counts(
                        partial(self._streamed_norm_counts, mean, self._public_scale()),
                        self.n_samples, b.multiplier, DEFAULT_NORM_QUANTILE, rng, what=what)
                else:
                    rows = self._centred(mean)
                    norms = np.sqrt(np.einsum("ij,ij->i", rows, rows))
                    (D,), rel = private_norm_bound(norms, b.multiplier,
                                                   DEFAULT_NORM_QUANTILE, rng, what=what)
            except BoundNotFoundError as exc:
                raise BoundNotFoundError(f"provider {self.provider_id}: {exc}") from exc
            clipped = float(rel.above[0, 0])
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
            Q_S = np.ascontiguousarray(query.block, dtype=np.float64)
            P, self.n_clipped = self._streamed_pass(reductions.clipped_product, Q_S,
                                                    query.support)
        if release == 0 and self.n_clipped and getattr(self, "_warn_public_clip", True):
            warn_clipped(f"provider {self.provider_id}", self.data_norm_)
        if rows is not None:
            Y = rows[:, query.support] @ query.block
            P = rows.T @ Y  # XᵢᵀXᵢQ, exact
        rng = provider_noise_rng(self.noise_seed, release)
        P = gaussian_release(P, self.noise_multiplier * self._raw_sensitivity, rng,
                             sensitivity=self._raw_sensitivity)
        P /= self.n_samples
        return Reply(self.provider_id, int(query.round), self.n_samples, P)

    def answer_variance(self, query: VarianceQuery) -> VarianceReply:
        """Release ``u(QᵀXᵢᵀXᵢQ) + z`` and ``‖Xᵢ‖²_F + z₀`` (Δ = √2·Dᵢ²).

        The sensitivity is derived in :mod:`privpca.federated.protocol` (Privacy).

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
            Q_S = np.ascontiguousarray(q.block, dtype=np.float64)
            matrix, row_total = self._streamed_pass(reductions.projected_moments, Q_S.T,
                                                    q.support)
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

    def _streamed_norm_counts(self, mean: NDArray[np.float64] | None,
                              scale: NDArray[np.float64] | None, base: float) -> BinCounts:
        """Counts of a streamed table's ``‖(x − mean)/scale‖`` on the log grid (one pass)."""
        assert self.stream is not None
        shift = mean if scale is None or mean is not None else np.zeros(self.n_features)
        return reductions.norm_counts(self.stream, shift, base, scale=scale)

    def _streamed_pass(self, reduction: Callable[..., _T], basis: NDArray[np.float64],
                       support: ArrayLike) -> _T:
        """One statistic pass over a streamed table (``reduction``:
        :func:`~privpca.streaming.reductions.clipped_product` or
        :func:`~privpca.streaming.reductions.projected_moments`) on Q's support, each block
        prepared as the in-memory rows are (:meth:`_clip`: exact norms, :data:`CLIP_SLACK`)."""
        assert self.stream is not None and self._stream_prepared is not None
        return reduction(self.stream, *self._stream_prepared, basis,
                         support=np.asarray(support, dtype=np.intp), slack=CLIP_SLACK,
                         exact_norms=True)

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
            search = run._search(bound_part, self.plan[bound_part], self.n_samples)
            spends.append(run._spend(
                bound_part, "noisy bisection of ‖x − c‖ on a log grid (private quantile), "
                "each provider its own", search.sensitivity, search.noise))
            spends.append(run._spend(
                sum_part, "gaussian: Σ clip_R(x − c), each provider its own noise (private "
                "mean)", 2.0 * R, 2.0 * R * self.plan[sum_part].multiplier))
        if counts.get("bound", 0):
            search = run._search("bound", self.plan["bound"], self.n_samples)
            spends.append(run._spend(
                "bound", "noisy bisection of the centred row norms (private quantile), each "
                "provider its own", search.sensitivity, search.noise))
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
        with fit_noise_mode(noise_mode_of(self.noise_seed)):  # how its noise was drawn
            return self._privacy_record(releases)

    def _privacy_record(self, releases: int | None) -> PrivacyRecord:
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
