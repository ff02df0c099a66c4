"""A data provider: its records, its noise and its budget; it answers the server's messages.

:class:`ProviderState` validates its agreement and every message (:mod:`.provider_checks`,
:mod:`.messages`), books each release on its counter (:mod:`.counter`) before computing it,
prepares and sums its rows in memory or by one pass over a streamed table
(:mod:`.provider_rows`), draws its noise from :func:`provider_noise_rng`, and reports its
privacy (:mod:`.provider_privacy`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from functools import partial
from typing import Any, TypeVar

import numpy as np
from numpy.typing import ArrayLike, NDArray

from privpca._validation import check_data, row_norms, warn_clipped
from privpca.federated.protocol.agreement import (
    MEAN_PARTS,
    is_table_mode,
    provider_release_limits,
)
from privpca.federated.protocol.counter import ReleaseCounter
from privpca.federated.protocol.messages import (
    AnyReply,
    CountQuery,
    MeanQuery,
    MeanReply,
    PrepareMessage,
    PrepareReply,
    Query,
    QueryRefusedError,
    Reply,
    SumQuery,
    VarianceQuery,
    VarianceReply,
    validate_query,
)
from privpca.federated.protocol.privacy import dpspca_noise_multiplier, dpspca_pipeline
from privpca.federated.protocol.provider_checks import (
    check_counter,
    check_mean_query,
    check_prepare_message,
    check_secure,
    check_settings,
)
from privpca.federated.protocol.provider_privacy import ProviderPrivacy
from privpca.federated.protocol.provider_rows import CLIP_SLACK as CLIP_SLACK
from privpca.federated.protocol.provider_rows import (
    StreamPreparation,
    centred,
    clip_rows,
    memory_mean,
    pilot_from_state,
    pilot_readings,
    pilot_to_state,
    public_scale,
    streamed_mean,
    streamed_norm_counts,
    streamed_pass,
)
from privpca.federated.protocol.provider_secure import opened_bound, secure_answer
from privpca.federated.protocol.secure_sums import SecureAgreement, ShareReply
from privpca.mechanisms.noise import gaussian_release
from privpca.mechanisms.randomness import check_noise_rng
from privpca.mechanisms.sensitivity import power_sensitivity
from privpca.pipeline.basis_error import RESIDUAL_MAX_FEATURES, residual_moments
from privpca.pipeline.bound_selection import BoundChoice, choose_bound
from privpca.pipeline.budget import BudgetPlan
from privpca.pipeline.preprocessing import (
    BoundNotFoundError,
    norm_bin_counts,
    private_norm_bound_from_counts,
)
from privpca.pipeline.rows import PilotGrams
from privpca.pipeline.settings import BOUND_QUANTILES, DEFAULT_NORM_QUANTILE, PipelineSettings
from privpca.streaming import reductions
from privpca.streaming.array_source import ArraySource
from privpca.streaming.sources import RowSource

_T = TypeVar("_T")

#: Spawn keys of the noise streams of the other kinds (the power answers keep their streams).
_KIND_CODES = {"mean": 1, "bound": 2, "variance": 3, "count": 4, "bound_select": 5}


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


class ProviderState(ProviderPrivacy):
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
        Bound D on the L2 norm of the (centred) rows: ``"auto"`` chooses it by the pilots of
        a ladder over its rows (a private 99 % quantile without); a float is a public bound.
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
    provider given none of the pipeline's settings runs the papers' protocol;
    :class:`privpca.DPSPCA` and ``privpca provider`` pass the pipeline's settings explicitly.

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
        secure: SecureAgreement | None = None,
    ) -> None:
        self.provider_id = str(provider_id)
        #: The rows of a streamed table (None: an in-memory array, ``X``).
        self.stream: RowSource | None = None
        #: A streamed table's centre, public scales and bound Dᵢ (None until prepared): each
        #: statistic's pass prepares its blocks with them.
        self._stream_prepared: StreamPreparation | None = None
        Xv = self._read_table(X)
        agreed = check_settings(
            self.provider_id, self.n_features, n_components=n_components, epsilon=epsilon,
            delta=delta, n_rounds=n_rounds, data_norm=data_norm, noise_seed=noise_seed,
            scale=scale, budget_shares=budget_shares)
        self.n_components, self.epsilon, self.delta = (agreed.n_components, agreed.epsilon,
                                                       agreed.delta)
        self.n_rounds, self.noise_seed = agreed.n_rounds, agreed.noise_seed
        self.centering, self.data_norm, self.scale = centering, agreed.data_norm, scale
        self.budget_shares = budget_shares
        self.table_mode = is_table_mode(centering, self.data_norm, scale)
        self.secure = check_secure(self.provider_id, secure, centering, self.data_norm,
                                   self.stream is not None)
        self.counter = check_counter(
            self.provider_id, counter,
            provider_release_limits(self.n_rounds, centering, self.data_norm, scale,
                                    secure=self.secure is not None))
        self.plan: BudgetPlan | None = None
        self.data_norm_ = math.nan
        self.sensitivity = self.noise_scale = math.nan
        self.rows: NDArray[np.float64] | None = None
        self.mean_: NDArray[np.float64] | None = None
        self.clipped_estimate = math.nan
        #: The ladder's outcome where this provider chose its bound (publishable), its
        #: candidates (kept for the record across a restart) and the bound the "variance"
        #: part reads the rows at (:attr:`BoundChoice.reference`; Dᵢ without a ladder).
        self.bound_choice: BoundChoice | None = None
        self.pilot_candidates: list[float] | None = None
        self.variance_bound = math.nan
        #: Its pilot at the robust maximum and that pilot's noise std, where the ladder chose
        #: below its top (the variances are read off it: :func:`.pilot_readings`).
        self.high_pilot: tuple[NDArray[np.float64], float] | None = None
        if self.table_mode:
            self._start_pipeline(Xv)
        else:
            self._start_papers_setting(Xv, float(self.data_norm))

    def _read_table(self, X: ArrayLike) -> NDArray[np.float64] | None:
        """Set the table's shape; return its checked rows (None: a streamed table)."""
        from privpca.streaming import as_row_source, is_streamed

        if is_streamed(X):  # validated block by block as each pass reads it
            self.stream = as_row_source(X)
            self.n_samples = int(self.stream.n_samples)
            self.n_features = int(self.stream.n_features)
            return None
        Xv = check_data(X)
        self.n_samples, self.n_features = (int(s) for s in Xv.shape)
        return Xv

    def _start_papers_setting(self, Xv: NDArray[np.float64] | None, data_norm: float) -> None:
        """The papers' setting: no plan; the rows clipped to the public D at once."""
        self.X = Xv
        if self.stream is not None:  # clipped block by block in each answer's pass
            self._stream_prepared = (None, None, data_norm)
            self.n_clipped = 0
        else:
            assert Xv is not None
            self._clip(Xv, data_norm)
        self.noise_multiplier = dpspca_noise_multiplier(self.epsilon, self.delta,
                                                        self.n_rounds)
        self._set_bound(data_norm)

    def _start_pipeline(self, Xv: NDArray[np.float64] | None) -> None:
        """The release pipeline's setting: the budget plan; a restarted provider's rows."""
        self.X, self.n_clipped = Xv, 0
        settings = PipelineSettings(
            epsilon=self.epsilon, delta=self.delta, centering=self.centering,
            data_norm=self.data_norm, scale=self.scale, budget_shares=self.budget_shares,
        )
        n_plan = self.n_samples if self.secure is None else self.secure.total_rows
        self._run = dpspca_pipeline(self, settings, n_plan, self.n_features,
                                    self.n_components, self.n_rounds,
                                    select_bound=self.secure is None)
        try:  # too few rows for the private bounds: refused before anything is released
            self._run.check_rows()
        except BoundNotFoundError as exc:
            raise BoundNotFoundError(f"provider {self.provider_id}: {exc}", rows=exc.rows,
                                     needed=exc.needed, epsilon_needed=exc.epsilon_needed
                                     ) from exc
        self.centering, self.scale = self._run.centering, self._run.scale
        self.plan = self._run.plan
        self.noise_multiplier = self._run.statistic_multiplier()
        # The mean rounds run on x/s (s: the public scales), as the central pipeline's do:
        # in raw units the column in the largest unit would set the mean's sensitivity and
        # its noise, divided by s, would swamp the columns in small units.
        self._units = public_scale(self.scale)
        if Xv is not None:
            self._mean_rows = Xv if self._units is None else Xv / self._units
            self._sq = np.einsum("ij,ij->i", self._mean_rows, self._mean_rows)
        stored = self.counter.recall("prepared")
        if stored is not None:  # a restarted provider: rebuild its rows, release nothing
            mean = None if stored["mean"] is None else np.asarray(stored["mean"], np.float64)
            self._prepare_rows(mean, float(stored["data_norm"]), warn=False)
            stored_clipped = stored.get("clipped_estimate")  # None: no bound was released
            self.clipped_estimate = math.nan if stored_clipped is None else float(stored_clipped)
            self.variance_bound = float(stored.get("variance_bound", stored["data_norm"]))
            self.pilot_candidates = stored.get("candidates")
            self.high_pilot = pilot_from_state(stored.get("high_pilot"), self.n_features)

    # ------------------------------------------------------------------ helpers
    def _set_bound(self, data_norm: float) -> None:
        self.data_norm_ = float(data_norm)
        self._raw_sensitivity = power_sensitivity(self.data_norm_, self.n_components)
        self.sensitivity = self._raw_sensitivity / self.n_samples
        self.noise_scale = self.noise_multiplier * self.sensitivity

    def _centred(self, mean: NDArray[np.float64] | None) -> NDArray[np.float64]:
        assert self.X is not None
        return centred(self.X, mean, self.scale)

    def _clip(self, rows: NDArray[np.float64], data_norm: float) -> NDArray[np.float64]:
        """Clip ``rows`` to ``data_norm`` (a copy if any is clipped), silently.

        The count stays here; the provider warns, with no count, only after it has booked
        its first power answer (:meth:`answer_query`), so a refused message never warns.
        """
        rows, self.n_clipped = clip_rows(rows, data_norm, copy=rows is self.X)
        self.rows = rows
        return rows

    def _prepare_rows(self, mean: NDArray[np.float64] | None, data_norm: float, *,
                      warn: bool = False) -> None:
        self._warn_public_clip = warn
        if self.stream is not None:  # nothing formed: each statistic's pass prepares its blocks
            self._stream_prepared = (mean, public_scale(self.scale), float(data_norm))
            self.n_clipped = 0  # counted by the first power answer's pass
            self.mean_ = mean
            self._set_bound(data_norm)
            return
        rows = self._clip(self._centred(mean), data_norm)
        self.rows, self.mean_ = rows, mean
        self._total = float(np.einsum("ij,ij->", rows, rows))
        self._set_bound(data_norm)

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

    def _prepared_rows(self, what: str) -> NDArray[np.float64] | None:
        """The prepared rows (None for a streamed table: its passes prepare each block)."""
        if not self.prepared:
            raise QueryRefusedError(
                f"provider {self.provider_id} has no prepared rows yet (it expects the "
                f"server's prepare message before {what})."
            )
        return self.rows

    # ------------------------------------------------------------------ messages
    def handle(self, message: Any) -> AnyReply | ShareReply:
        """Answer any message of the protocol (dispatch on its type)."""
        if isinstance(message, MeanQuery):
            return self.answer_mean(message)
        if isinstance(message, PrepareMessage):
            return self.prepare(message)
        if isinstance(message, VarianceQuery):
            return self.answer_variance(message)
        if isinstance(message, CountQuery | SumQuery):
            return secure_answer(self, message, provider_noise_rng)
        return self.answer_query(message)

    def answer_mean(self, query: MeanQuery) -> MeanReply:
        """Round r of the private mean: release ``Rᵢ`` and ``(Σ clip_Rᵢ(x − c) + noise)/nᵢ``.

        With public scales ``s`` the round runs on ``x/s`` (centre ``c/s``) and the reply is
        that mean times ``s`` (post-processing): the protocol's means stay in raw units.

        Raises
        ------
        QueryRefusedError
            Not private centring, a round out of order, or a centre that is not a finite
            vector of shape (n_features,) (nothing booked or released).
        BudgetExceededError
            Both rounds already made.
        """
        self._refuse_unless_table("the private mean")
        centre = check_mean_query(query, provider_id=self.provider_id, centering=self.centering,
                                  n_features=self.n_features, counter=self.counter,
                                  prepared=self.prepared)
        index = self.counter.reserve("mean")
        bound_part, sum_part = MEAN_PARTS[index]
        rng = provider_noise_rng(self.noise_seed, index, "mean")
        multipliers = self._plan[bound_part].multiplier, self._plan[sum_part].multiplier
        units = 1.0 if self._units is None else self._units
        if self.stream is not None:
            R, mean = streamed_mean(self.stream, self.n_samples, centre / units, *multipliers,
                                    rng, self.provider_id, scale=self._units)
        else:
            R, mean = memory_mean(self._mean_rows, self._sq, centre / units, *multipliers, rng,
                                  self.provider_id)
        mean = mean * units
        self.counter.remember(bound_part, R)
        return MeanReply(self.provider_id, int(query.round), self.n_samples, R, mean)

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
        mean = check_prepare_message(message, provider_id=self.provider_id,
                                     centering=self.centering, n_features=self.n_features,
                                     counter=self.counter, prepared=self.prepared)
        clipped = math.nan
        if self.secure is not None and isinstance(self.data_norm, str):
            D = opened_bound(self.provider_id, message)  # the union's bound, opened by SecAgg
            self._prepare_rows(mean, D, warn=False)
        elif isinstance(self.data_norm, str):
            D, clipped = self._release_bound(mean)
            self._prepare_rows(mean, D, warn=False)
        else:
            D = float(self.data_norm)
            self._prepare_rows(mean, D, warn=True)
        self.clipped_estimate = clipped
        choice = self.bound_choice
        self.variance_bound = D if choice is None else choice.reference
        if choice is not None and choice.high_pilot is not None and choice.chosen != choice.high:
            self.high_pilot = (choice.high_pilot, choice.high_sigma)
        self.counter.remember("prepared", {  # released values only: a restart reads them
            "mean": None if mean is None else mean.tolist(), "data_norm": D,
            "clipped_estimate": None if math.isnan(clipped) else clipped,
            "variance_bound": self.variance_bound, "high_pilot": pilot_to_state(self.high_pilot),
            "candidates": None if choice is None else list(choice.candidates)})
        return PrepareReply(self.provider_id, self.n_samples, float(D), clipped)

    def _release_bound(self, mean: NDArray[np.float64] | None) -> tuple[float, float]:
        """Book and release ``Dᵢ``, a private quantile of the centred row norms or, with the
        "bound_select" part, the candidate the ladder's pilots over this provider's rows
        choose (:func:`~privpca.pipeline.bound_selection.choose_bound`, its power answers'
        noise in the rule; its own releases: parallel composition over the providers);
        return it and the private estimate of the rows above it."""
        rng = provider_noise_rng(self.noise_seed, self.counter.reserve("bound"), "bound")
        what = f"provider {self.provider_id}'s " + ("centred row norms" if mean is not None
                                                    else "row norms")
        scale = public_scale(self.scale)
        selects = "bound_select" in self._plan
        if self.stream is not None:  # one pass: the norms' counts on the log grid
            counts = partial(streamed_norm_counts, self.stream, self.n_features, mean, scale)
        else:
            counts = partial(norm_bin_counts, row_norms(self._centred(mean)))
        try:
            values, rel = private_norm_bound_from_counts(
                counts, self.n_samples, self._plan["bound"].multiplier,
                BOUND_QUANTILES if selects else DEFAULT_NORM_QUANTILE, rng, what=what)
        except BoundNotFoundError as exc:
            raise BoundNotFoundError(f"provider {self.provider_id}: {exc}") from exc
        if not selects:
            return float(values[0]), float(rel.above[0, 0])
        select = self.counter.reserve("bound_select")
        source = self.stream if self.stream is not None else ArraySource(self.X, validated=True)
        shift = mean if scale is None or mean is not None else np.zeros(self.n_features)
        # The median read inside its last step; the robust maximum (all but ~4.5σ rows).
        choice = choose_bound(PilotGrams(source, shift, scale, same_rows=False),
                              self.n_components, float(rel.interpolated()[0, 0]),
                              float(values[1]), self._plan["bound_select"].multiplier,
                              self.noise_multiplier,
                              provider_noise_rng(self.noise_seed, select, "bound_select"))
        self.bound_choice, self.pilot_candidates = choice, list(choice.candidates)
        return choice.chosen, float(rel.above[0 if choice.chosen == choice.low else 1, 0])

    def answer_query(self, query: Query) -> Reply | ShareReply:
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
            Q_S = np.ascontiguousarray(query.block, dtype=np.float64)
            P, self.n_clipped = self._streamed_pass(reductions.clipped_product, Q_S,
                                                    query.support)
        if release == 0 and self.n_clipped and getattr(self, "_warn_public_clip", True):
            warn_clipped(f"provider {self.provider_id}", self.data_norm_)
        if rows is not None:
            Y = rows[:, query.support] @ query.block
            P = rows.T @ Y  # XᵢᵀXᵢQ, exact
        rng = provider_noise_rng(self.noise_seed, release)
        sigma = self.noise_multiplier * self._raw_sensitivity
        if self.secure is not None:  # exact XᵢᵀXᵢQ plus a share of one central draw
            return self._share("query", int(query.round), P, sigma, self._raw_sensitivity, rng)
        P = gaussian_release(P, sigma, rng, sensitivity=self._raw_sensitivity)
        P /= self.n_samples
        return Reply(self.provider_id, int(query.round), self.n_samples, P)

    def answer_variance(self, query: VarianceQuery) -> VarianceReply | ShareReply:
        """Release ``u(QᵀXᵢᵀXᵢQ)``, up to
        :data:`~privpca.pipeline.basis_error.RESIDUAL_MAX_FEATURES` features the residual pair
        ``(‖WXᵢᵀXᵢQ‖_F, λ_max(WXᵢᵀXᵢW))`` (``W = I − QQᵀ``; the server sums each, an upper
        bound of the pooled one's), and ``‖Xᵢ‖²_F``, with noise (Δ = √2·Dᵢ² for the whole
        vector: :mod:`privpca.pipeline.basis_error`).

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
        bound = self.variance_bound  # above Dᵢ where the ladder chose below its reference
        if rows is not None and bound > self.data_norm_:
            rows = clip_rows(self._centred(self.mean_), bound, copy=True)[0]
        index = self.counter.reserve("variance")
        rng = provider_noise_rng(self.noise_seed, index, "variance")
        k, p = self.n_components, self.n_features
        residual: tuple[float, ...] = ()
        if p <= RESIDUAL_MAX_FEATURES:
            components = np.zeros((k, p))
            components[:, q.support] = q.block.T
            gram = rows.T @ rows if rows is not None else self._streamed_pass(
                reductions.clipped_product, np.eye(p), np.arange(p), bound)[0]
            matrix, row_total, residual = residual_moments(gram, components)
        elif rows is None:
            Q_S = np.ascontiguousarray(q.block, dtype=np.float64)
            matrix, row_total = self._streamed_pass(reductions.projected_moments, Q_S.T,
                                                    q.support, bound)
        else:
            proj = rows[:, q.support] @ q.block
            matrix, row_total = proj.T @ proj, (self._total if bound == self.data_norm_ else
                                                float(np.einsum("ij,ij->", rows, rows)))
        iu = np.triu_indices(k)
        sensitivity = math.sqrt(2.0) * bound**2
        sigma = self._plan["variance"].multiplier * sensitivity
        # One Gaussian release: the packed matrix, the residual pair, then the total.
        value = np.concatenate([matrix[iu], residual, [row_total]])
        if self.secure is not None:
            return self._share("variance", self.n_rounds + 1, value, sigma, sensitivity, rng)
        released = gaussian_release(value, sigma, rng, sensitivity=sensitivity)
        packed, total = released[:-1], float(released[-1])
        return VarianceReply(self.provider_id, self.n_samples, packed, float(total),
                             pilot_readings(self.high_pilot, q.support, q.block))

    def _share(self, kind: str, round: int, value: NDArray[np.float64], sigma: float,
               sensitivity: float, rng: np.random.Generator) -> ShareReply:
        """The exact answer encoded with this provider's noise share (:mod:`.secure_sums`)."""
        assert self.secure is not None
        plan = self.secure.noise_plan(sigma, sensitivity, value.size, self.data_norm_**2)
        return ShareReply(self.provider_id, kind, round, self.n_samples,
                          plan.share(value.reshape(-1), rng), plan)

    def _streamed_pass(self, reduction: Callable[..., _T], basis: NDArray[np.float64],
                       support: ArrayLike, bound: float | None = None) -> _T:
        """One statistic pass over the streamed table, prepared (:func:`.streamed_pass`);
        clipped at ``bound`` instead of Dᵢ where given."""
        assert self.stream is not None and self._stream_prepared is not None
        mean, scale, D = self._stream_prepared
        return streamed_pass(self.stream, (mean, scale, D if bound is None else bound),
                             reduction, basis, support)
