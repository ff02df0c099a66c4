"""DPS-PCA (Ge, Wang, Wang, Liu 2018): distributed private sparse PCA, simulated in one process.

:class:`DPSPCA` runs :mod:`privpca.federated.protocol` in this process: N providers (each a
:class:`~privpca.federated.protocol.ProviderState`, with its own noise, budget plan and
release counter) and a :class:`~privpca.federated.protocol.ServerState`; the Flower app runs
them apart (:mod:`privpca.federated.flower_app`), bitwise the same for the same seeds.

Privacy (distributed model; replace one record of one provider, nᵢ public)
---------------------------------------------------------------------------
``aggregation="local-noise"``: each provider releases Gaussian mechanisms with its own noise
(the private mean's quantiles and sums, its bound Dᵢ, T answers ``Hᵢ = Σ̂ᵢQ + Gᵢ/nᵢ``, the
variances), split by one :class:`~privpca.pipeline.budget.BudgetPlan` to exactly its (ε, δ),
against the server whatever the others do. ``"secure"``: the server opens only sums carrying
one central noise (:mod:`privpca.federated.protocol.secure_sums`). In full: docs/DISTRIBUTED.md.
"""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Sequence
from numbers import Integral
from typing import Any, ClassVar

import numpy as np
from numpy.typing import ArrayLike, NDArray
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import check_is_fitted

from privpca._validation import check_data, check_in_range, check_n_components, fit_input
from privpca.accounting.ledger import PrivacyLedger
from privpca.accounting.record import PrivacyRecord
from privpca.decomposition._base import BasePrivatePCA, FitPlan, Release
from privpca.decomposition._constraints import (
    N_COMPONENTS,
    PIPELINE,
    WHITEN,
    positive_int,
    private_fit_context,
)
from privpca.decomposition._providers import (
    Providers,
    dpspca_provider_seeds,
    n_samples_of,
    reemit_clipping,
    split_providers,
    start_and_seeds,
)
from privpca.federated.protocol import (
    INITS,
    ProviderState,
    ServerState,
    dpspca_noise_multiplier,
    dpspca_pipeline,
    merge_provider_spends,
    paper_noise_scale,
    provider_privacy_record,
)
from privpca.federated.protocol.privacy import local_noise_notes, local_noise_pipeline
from privpca.federated.protocol.secure_sums import (
    SecureAgreement,
    collusion_epsilons,
    combine_replies,
    secure_agreement,
    secure_notes,
)
from privpca.mechanisms.secure_noise import is_os_keyed
from privpca.metrics import sin_theta
from privpca.pipeline.basis_error import summed_error_bound
from privpca.pipeline.release import ReleasePipeline
from privpca.pipeline.rows import PreparedRows, warn_if_standardised
from privpca.pipeline.settings import PipelineSettings

__all__ = ["DPSPCA", "dpspca_provider_seeds"]


class DPSPCA(BasePrivatePCA):
    """Distributed private sparse PCA (DPS-PCA, Ge et al. 2018), providers simulated in-process.

    Algorithm 1 of the paper with one change for an untrusted server: every provider draws its
    own noise. On defaults the providers first compute a private mean together (each adds noise
    to its own clipped sum; the server combines them), centre on it and clip their rows to a
    private bound of their own; then, for ``t = 1..T``, each provider i answers
    ``Hᵢ = Σ̂ᵢQ⁽ᵗ⁾ + Gᵢ/nᵢ``; the server combines ``K = Σ nᵢHᵢ/Σ nᵢ``, ``V = ThinQR(K)``,
    ``Q⁽ᵗ⁺¹⁾ = ThinQR(Threshold(V, ŝ))``. Finally the providers release their noisy variances
    along ``Q⁽ᵀ⁺¹⁾``: the server rotates it to the components by decreasing variance and reports
    the explained variance. See :mod:`privpca.federated.protocol` for the privacy analysis.

    Parameters
    ----------
    n_components : int, default=2
        k.
    epsilon : float, default=1.0
        ε > 0 of each provider's (ε, δ) guarantee (all its releases together).
    delta : float, default=1e-5
        0 < δ < 1.
    centering : "private", None or array of shape (n_features,), default="private"
        ``"private"``: centre on a private mean, two rounds in which every provider releases a
        private bound of its own and its noisy clipped sum (a share of each provider's budget).
        ``None``: no centring (the paper's second moment). An array: a public mean, free.
    data_norm : "auto" or float, default="auto"
        Bound D on every (centred) row's L2 norm. ``"auto"``: each provider's ``Dᵢ``, chosen by
        pilots over its rows (:mod:`privpca.pipeline.bound_selection`; a private 99 % quantile
        on too few rows or secure), calibrates its noise. A float: public, free; longer rows
        are clipped to it with a :class:`~privpca.exceptions.RowClippingWarning`.
    scale : False or array of shape (n_features,), default=False
        Public per-feature scales the centred rows are divided by (free). Private scaling
        (``True``) is refused: per-feature private variances across providers are not
        implemented in the distributed model.
    budget_shares : dict or None, default=None
        Shares of each provider's Gaussian budget for the preprocessing parts
        (``"bound_raw"``, ``"mean"``, ``"bound_residual"``, ``"mean_refine"``, ``"bound"``,
        ``"variance"``); ``None`` uses :data:`privpca.pipeline.budget.DEFAULT_SHARES`. The
        power answers get the rest.
    n_iter : int, default=10
        T, the number of rounds (= power answers per provider), fixed in advance; the paper
        uses 10.
    n_nonzero : int or None, default=None
        ŝ, the rows kept by Threshold. ``None`` keeps all (no sparsity: a distributed noisy
        power method). The paper uses ŝ = 50 for s = 10 at d = 1000; choose it from public
        knowledge of the sparsity.
    n_providers : int, default=1
        Used by :meth:`fit` without ``groups``: the rows are cut into this many contiguous
        blocks of (nearly) equal size, one per provider. The default treats the data as one
        provider (the paper's §5 setting). With ``groups`` it must be 1 or their number of
        labels.
    aggregation : {"local-noise", "secure"}, default="local-noise"
        ``"local-noise"``: every provider adds its own full noise (no cryptography; the sum
        carries N noises). ``"secure"``: exact answers plus a share each of one noise draw,
        summed by SecAgg (Flower's primitives): the server opens only the sum, which carries
        one central noise; needs N ≥ 2 (the private centre and bounds are secure sums too).
    min_providers : int or None, default=None
        ``"secure"`` only: the fewest survivors whose sum may be opened (a strict majority);
        the noise shares are sized for it, so the opened sum carries ``N/m`` times one central
        noise variance when all answer. ``None``: N (no dropout tolerated, no extra noise).
    colluders : int, default=0
        ``"secure"`` only: providers that may pool what they know with the server; the
        shares are sized so that (ε, δ) holds against the server plus this many.
    init : {"random", "random-sparse"} or array of shape (n_features, n_components), \
default="random"
        Data-independent start ``Q⁽⁰⁾`` (see
        :meth:`privpca.federated.protocol.server.ServerState.initial`): ``"random"`` queries a dense
        Haar-random Q first; ``"random-sparse"`` thresholds it first (Algorithm 1 literally);
        an array is a public start. None costs privacy.
    whiten : bool, default=False
        Divide the projections of :meth:`transform` by ``sqrt(explained_variance_)`` (and
        multiply them back in :meth:`inverse_transform`), as scikit-learn's ``PCA``:
        post-processing of released values; the fit is the same either way.
    random_state : None, int or numpy.random.Generator, default=None
        Seeds Q⁽⁰⁾, then one noise seed per provider (``integers(0, 2**63)``), never stored
        (whoever knows them can subtract the noise); :func:`dpspca_provider_seeds` replays a
        seeded run across processes. ``None`` (the default, for a release): every provider
        draws each release from a fresh OS-keyed
        :class:`~privpca.mechanisms.secure_noise.SecureGenerator`; strict secure mode
        refuses anything else before anything is charged.
    ledger : PrivacyLedger or None, default=None
        Where the spend is recorded (``None``: :func:`privpca.accounting.default_ledger`).

    Attributes
    ----------
    components_ : ndarray of shape (n_components, n_features)
        Orthonormal rows spanning ``Q⁽ᵀ⁺¹⁾`` (at most ŝ non-zero columns); outside the
        paper's setting rotated within that span to decreasing private variance.
    mean_ : ndarray of shape (n_features,)
        The private (or public) mean the providers centred on; zeros without centring.
    scale_ : ndarray of shape (n_features,) or None
        The public scales, or None.
    data_norm_ : float
        The largest provider bound ``Dᵢ`` (the public D in the paper's setting).
    provider_data_norms_ : ndarray of shape (n_providers,)
        Each provider's bound ``Dᵢ`` (released values).
    explained_variance_ : ndarray of shape (n_components,)
        Private variance along each component (sum of the providers' noisy releases over
        ``Σnᵢ − 1``, or ``Σnᵢ`` uncentred), made feasible (≥ 0,
        :func:`~privpca.pipeline.spectrum.feasible_spectrum`). NaN in the paper's setting
        (nothing but the T answers is released there).
    explained_variance_ratio_ : ndarray of shape (n_components,)
        Those variances over the private total variance (the server's ``λ̂ᵢ/ratioᵢ``), each
        in [0, 1] and summing to at most 1 (NaN in the paper's setting).
    noise_level_ : float
        Standard deviation of each entry of the aggregated ``K = Σ nᵢHᵢ/Σ nᵢ`` due to the
        providers' noise, ``√(Σ (m·Δ(Dᵢ))²)/Σnᵢ``, in the units of the covariance: directions
        whose variances differ by less than a few times ``noise_level_·√n_features`` are not
        resolved.
    expected_error_ : float or None
        The Ky Fan bound ``√(2r/λ)`` from the released variances (r outside the components, λ the
        smallest component's), w.p. ≥ 95 %, capped at √(2k): derivation in
        :func:`~privpca.pipeline.basis_error.component_error_bound`. The noise is the
        providers' summed variance releases (std ``√Σσᵢ²``), the centring term the last
        private-mean round's. None in the paper's setting (only the T answers are released;
        the (k+1)-th eigenvalue is not).
    history_ : ndarray of shape (n_iter + 1, n_components, n_features)
        ``Q⁽¹⁾`` (the start) and every iterate, as rows (post-processing: free). Use
        :meth:`sin_theta_path` for the error per iteration (the paper's Figure 3).
    n_iter_ : int
    n_providers_ : int
    provider_ids_ : list of str
    provider_n_samples_ : ndarray of int of shape (n_providers,)
    noise_multiplier_ : float
        m = σ/Δ per power answer.
    noise_scales_ : ndarray of shape (n_providers,)
        Standard deviation of each entry of ``Gᵢ/nᵢ`` (= m·Δ(Dᵢ)/nᵢ); with secure
        aggregation, of each provider's share (``1/√(m − t)`` of it).
    min_providers_ : int or None
        The agreed m of a secure run (None: local noise); then also ``collusion_epsilons_``,
        j → ε of the fit at δ against the server plus j colluding providers.
    paper_noise_scale_ : float
        The paper's ω(ε, δ) = (2T/ε)√(2 ln(2T/δ)) (std of G), for comparison only.
    privacy_ : PrivacyRecord
        Distributed model; every part's spend (each part once, of the smallest provider's
        plan, the largest sensitivity among its runners shown: every provider's plan composes
        to the same (ε, δ)) and the per-provider guarantee, the requested (ε, δ) for each.
    n_features_in_ : int

    References
    ----------
    J. Ge, Z. Wang, M. Wang, H. Liu. Minimax-optimal privacy-preserving sparse PCA in
    distributed systems. AISTATS 2018, Algorithms 1–3, Theorem 4.1.

    Examples
    --------
    >>> from privpca import DPSPCA
    >>> from privpca.datasets import make_dpspca_data
    >>> X, V = make_dpspca_data(4_000, 60, 2, 6, random_state=0)
    >>> est = DPSPCA(n_components=2, epsilon=1.0, n_nonzero=12, n_providers=3,
    ...              centering=None, data_norm=1.0, random_state=0).fit(X)
    >>> est.components_.shape, est.history_.shape, est.n_providers_
    ((2, 60), (11, 2, 60), 3)
    >>> est = DPSPCA(n_components=2, epsilon=1.0, n_providers=3, random_state=0).fit(X * 5 + 2)
    >>> [s.mechanism.split(":")[0] for s in est.privacy_.spends][3:]  # mean rounds first
    ['mean_refine', 'bound', 'bound_select', 'statistic', 'variance']
    """

    _parameter_constraints: ClassVar[dict[str, list[Any]]] = {
        **{name: PIPELINE[name] for name in PIPELINE if name != "holdout_fraction"},
        "n_components": N_COMPONENTS,
        "n_iter": positive_int(),
        "n_nonzero": [None, *positive_int()],
        "n_providers": positive_int(),
        "init": [StrOptions(set(INITS)), "array-like"],
        "aggregation": [StrOptions({"local-noise", "secure"})],
        "min_providers": [None, *positive_int()],
        "colluders": [Interval(Integral, 0, None, closed="left")],
        "whiten": WHITEN,
    }

    def __init__(
        self,
        n_components: int = 2,
        *,
        epsilon: float = 1.0,
        delta: float = 1e-5,
        centering: Any = "private",
        data_norm: float | str = "auto",
        scale: Any = False,
        budget_shares: dict[str, float] | None = None,
        n_iter: int = 10,
        n_nonzero: int | None = None,
        n_providers: int = 1,
        init: Any = "random",
        aggregation: str = "local-noise",
        min_providers: int | None = None,
        colluders: int = 0,
        whiten: bool = False,
        random_state: Any = None,
        ledger: PrivacyLedger | None = None,
    ) -> None:
        self.n_components = n_components
        self.epsilon = epsilon
        self.delta = delta
        self.centering = centering
        self.data_norm = data_norm
        self.scale = scale
        self.budget_shares = budget_shares
        self.n_iter = n_iter
        self.n_nonzero = n_nonzero
        self.n_providers = n_providers
        self.init = init
        self.aggregation = aggregation
        self.min_providers = min_providers
        self.colluders = colluders
        self.whiten = whiten
        self.random_state = random_state
        self.ledger = ledger

    @private_fit_context
    def fit(self, X: Any, y: Any = None, *, groups: ArrayLike | None = None) -> DPSPCA:
        """Run DPS-PCA with providers given by ``groups`` (or ``n_providers`` equal blocks).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features), or a streamed table
            All records. Not modified. A table that is not one in-memory array (anything
            :func:`privpca.streaming.as_row_source` accepts: a ``dask.array.Array``, a
            ``numpy.memmap`` or ``.npy`` path, a Parquet file or folder, a list of chunks) is
            never formed: each provider reads its rows (a contiguous range, or its group) by
            passes, one per release (see :meth:`fit_providers`).
        y : ignored
        groups : array-like of shape (n_samples,) or None, default=None
            Provider label of each row; providers are ordered by sorted label (their ids are
            ``str(label)``). ``None``: ``n_providers`` contiguous blocks.

        Returns
        -------
        self
        """
        return self._fit(self._split(X, groups))

    @private_fit_context
    def fit_providers(self, datasets: Sequence[Any]) -> DPSPCA:
        """Run DPS-PCA with one provider per table of ``datasets`` (ids ``"0"``, ``"1"``, …).

        Parameters
        ----------
        datasets : sequence of array-like of shape (n_i, n_features), or of streamed tables
            Each provider's records. A table that is not one in-memory array (anything
            :func:`privpca.streaming.as_row_source` accepts: a ``dask.array.Array``, a
            ``numpy.memmap`` or ``.npy`` path, a Parquet file or folder, a
            :class:`~privpca.streaming.ChunkSource`) stays where it is: that provider makes one
            pass over it per release (its two mean rounds, its bound, each of its T answers,
            its variances; on the Dask workers for a Dask array), adds its noise to the exact
            total, and keeps one block in memory, whatever its nᵢ. The same seed gives the same
            fit as the in-memory tables, to rounding. A streamed table's entries are checked as
            the passes read them, after the charge: a non-finite entry raises
            :class:`~privpca.exceptions.NonFiniteInputError` with nothing released, and the
            charge is withdrawn. A table given in chunks is wrapped as ``ChunkSource(chunks)``
            (a bare list is read as an array).

        Returns
        -------
        self
        """
        from privpca.streaming import as_row_source, is_streamed

        if isinstance(datasets, np.ndarray) or is_streamed(datasets) or len(datasets) == 0:
            raise ValueError("fit_providers expects a non-empty list of 2-D tables, one per "
                             "provider.")
        parts: list[Any] = []
        for i, Xi in enumerate(datasets):
            if is_streamed(Xi):
                source = as_row_source(Xi)
                if i == 0:
                    self._set_streamed_features(source.n_features)
                elif source.n_features != self.n_features_in_:
                    raise ValueError(
                        f"Provider {i}'s table has {source.n_features} features; provider 0's "
                        f"has {self.n_features_in_}. Every provider must hold the same features.")
                parts.append(source)
            else:
                try:
                    parts.append(fit_input(self, Xi, reset=i == 0))
                except ValueError as exc:  # say whose table: the message names only "X"
                    if type(exc) is not ValueError:
                        raise
                    raise ValueError(f"Provider {i}'s table: {exc}") from exc
        return self._fit(Providers(parts, [str(i) for i in range(len(parts))]))

    def _set_streamed_features(self, n_features: int) -> None:
        self.n_features_in_ = int(n_features)
        if hasattr(self, "feature_names_in_"):
            del self.feature_names_in_

    def _split(self, X: Any, groups: ArrayLike | None) -> Providers:
        """One table per provider (:func:`split_providers`); a streamed table is not read."""
        from privpca.streaming import as_row_source, is_streamed

        if is_streamed(X):
            table: Any = as_row_source(X)
            self._set_streamed_features(table.n_features)
        else:
            table = fit_input(self, X)
            warn_if_standardised(self, table)
        return split_providers(table, groups, int(self.n_providers))

    # ------------------------------------------------------------------ the one fit's steps
    def _plan(self, data: Providers) -> FitPlan:
        """The parameters against the providers' public shapes; the paper's record (T answers
        with all of (ε, δ)) or the pipeline's (every part of every provider's budget plan)."""
        p, N = data.n_features, data.n_samples
        k = check_n_components(self.n_components, p, owner=self)
        T = int(self.n_iter)  # declared: checked
        if isinstance(self.scale, bool | np.bool_) and self.scale:
            raise ValueError(
                f"{type(self).__name__} does not offer private scaling (scale=True) in the "
                "distributed model: pass public per-feature scales as an array of shape "
                f"({p},), or scale=False."
            )
        settings = PipelineSettings(
            epsilon=self.epsilon, delta=self.delta, centering=self.centering,
            data_norm=self.data_norm, scale=self.scale, budget_shares=self.budget_shares,
            random_state=self.random_state,
        )
        run = dpspca_pipeline(self, settings, N, p, k, T, select_bound=False)  # the union's
        s_hat = p if self.n_nonzero is None else int(
            check_in_range(self.n_nonzero, "n_nonzero", low=k, high=p, low_closed=True,
                           high_closed=True, integer=True, owner=self)
        )
        self._check_init(p, k)
        for part in data.parts:  # refuse NaN/inf before anything is charged (streamed: per pass)
            if isinstance(part, np.ndarray):
                check_data(part)
        sizes = [n_samples_of(part) for part in data.parts]
        rounds = {"n_components": k, "n_rounds": T, "n_nonzero": s_hat,
                  "secure": secure_agreement(
                      self.aggregation, self.centering, self.data_norm, self.min_providers,
                      self.colluders, sizes,
                      any(not isinstance(part, np.ndarray) for part in data.parts))}
        if not run.paper_mode:
            if rounds["secure"] is None:  # each provider plans over its own nᵢ: book that
                run = local_noise_pipeline(self, settings, sizes, data.ids, p, k, T)
            # The record states the union's Σnᵢ (a provider's plan states its own nᵢ).
            return FitPlan(run=run, settings=rounds, planned=dataclasses.replace(
                run.planned_record(), n_samples=N))
        return FitPlan(run=run, settings=rounds, planned=provider_privacy_record(
            epsilon=run.epsilon, delta=run.delta, n_rounds=T, n_components=k,
            data_norm=run.data_norm, n_samples=N, n_clipped=0, n_providers=len(data.parts),
        ))

    @staticmethod
    def _preprocessing_rng(rng: np.random.Generator) -> np.random.Generator:
        """The estimator's own stream: it draws Q⁽⁰⁾ and the providers' noise seeds only (every
        provider's preprocessing draws from its own seed), so nothing is split off it."""
        return rng

    def _release(self, plan: FitPlan, prepared: Providers, rng: np.random.Generator,
                 pre_rng: np.random.Generator) -> Release:
        """The protocol, the providers simulated in this process; the fitted attributes."""
        run = plan.run
        k, T, s_hat = _rounds(plan)
        parts = prepared.parts
        start, drawn = start_and_seeds(rng, prepared.n_features, k, s_hat, self.init,
                                        len(parts))
        # A secure fit hands no seed to a provider (a seed would make its noise reproducible;
        # strict mode's provider_noise_rng refuses one): each release draws from a fresh
        # OS-keyed generator instead.
        seeds: list[int | None] = [None] * len(parts) if is_os_keyed(rng) else list(drawn)
        if run.paper_mode:
            record = self._run_paper(plan, prepared, seeds, start)
        else:
            record = self._run_pipeline(plan, prepared, seeds, start)
        self.n_iter_ = T
        self.n_nonzero_ = s_hat
        self.n_providers_ = len(parts)
        self.provider_ids_ = prepared.ids
        self.paper_noise_scale_ = paper_noise_scale(run.epsilon, run.delta, T)
        return Release(final=record)

    def _check_init(self, p: int, k: int) -> None:
        if isinstance(self.init, str):
            if self.init not in INITS:
                raise ValueError(
                    f"The 'init' parameter of {type(self).__name__} must be a str among "
                    f"{sorted(INITS)} or an array of shape ({p}, {k}). Got {self.init!r} instead."
                )
        else:
            init = np.asarray(self.init, dtype=np.float64)
            if init.shape != (p, k) or not np.all(np.isfinite(init)):
                raise ValueError(
                    f"The 'init' parameter of {type(self).__name__} must be a str among "
                    f"{sorted(INITS)} or a finite array of shape ({p}, {k}). Got an array of "
                    f"shape {init.shape} instead."
                )

    def _run_paper(self, plan: FitPlan, data: Providers, seeds: list[int | None],
                   start: NDArray[np.float64]) -> PrivacyRecord:
        """The paper's setting: T answers only, the paper's protocol without the pipeline."""
        run = plan.run
        k, T, s_hat = _rounds(plan)
        p = start.shape[0]
        providers = []
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            for part, pid, seed in zip(data.parts, data.ids, seeds, strict=True):
                providers.append(ProviderState(
                    part, n_components=k, epsilon=run.epsilon, delta=run.delta, n_rounds=T,
                    data_norm=run.data_norm, noise_seed=seed, provider_id=pid,
                    secure=plan.settings["secure"],
                ))
        reemit_clipping(caught, any(pr.n_clipped for pr in providers), run.data_norm, self)

        server = ServerState(p, k, s_hat, T, start)
        while not server.finished:
            query = server.query()
            server.aggregate(combine_replies([pr.answer_query(query) for pr in providers], p, k))

        self._set_server(server, providers, dpspca_noise_multiplier(run.epsilon, run.delta, T),
                         plan.settings["secure"])
        self.mean_ = np.zeros(p)
        self.scale_ = None
        self.data_norm_ = float(run.data_norm)
        self.explained_variance_ = np.full(k, np.nan)
        self.explained_variance_ratio_ = np.full(k, np.nan)
        self.expected_error_ = None  # only the basis is released: nothing bounds its distance
        secure = plan.settings["secure"]
        if secure is None:
            return plan.planned
        self.collusion_epsilons_ = collusion_epsilons([(self.noise_multiplier_, T)], run.delta,
                                                      secure)
        return dataclasses.replace(plan.planned, notes=secure_notes(
            secure, run.epsilon, run.delta, self.collusion_epsilons_))

    def _run_pipeline(self, plan: FitPlan, data: Providers, seeds: list[int | None],
                      start: NDArray[np.float64]) -> PrivacyRecord:
        """Private mean, bounds, T answers and variances, every provider on its own plan."""
        run = plan.run
        k, T, s_hat = _rounds(plan)
        p = start.shape[0]
        providers = [
            ProviderState(part, n_components=k, epsilon=run.epsilon, delta=run.delta,
                          n_rounds=T, data_norm=run.data_norm, centering=run.centering,
                          scale=run.scale, budget_shares=self.budget_shares, noise_seed=seed,
                          provider_id=pid, secure=plan.settings["secure"])
            for part, pid, seed in zip(data.parts, data.ids, seeds, strict=True)
        ]
        secure = plan.settings["secure"]
        scale = None if isinstance(run.scale, bool) else np.asarray(run.scale, dtype=np.float64)
        server = ServerState(p, k, s_hat, T, start, centering=run.centering, table_mode=True,
                             secure=None if secure is None else (run.plan, secure.total_rows,
                                                                 run.data_norm), units=scale)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            while not server.finished:
                message = server.next_message()
                server.receive(combine_replies([pr.handle(message) for pr in providers], p, k))
        bounds = np.array([pr.data_norm_ for pr in providers])
        reemit_clipping(caught, any(pr.n_clipped for pr in providers), float(bounds.max()), self)

        per_provider = [pr.spends() for pr in providers]
        # The parts of the booked plan only: another provider's plan may split differently
        # (local_noise_pipeline), and mixing the two splits' events would state neither.
        on_plan = [pr.plan == run.plan for pr in providers]
        listed = [spent for spent, on in zip(per_provider, on_plan, strict=True) if on]
        pre = merge_provider_spends([spends for spends, _ in listed])
        statistic = max((stat for _, stat in listed), key=lambda s: s.sensitivity)
        mean = None if server.mean is None else np.asarray(server.mean)
        # The record's bound is that of the providers whose spends it lists, so that it and
        # its sensitivity (√2·D² of their statistic) agree; every Dᵢ is in the notes.
        summary = PreparedRows(np.empty((0, p)), float(bounds[on_plan].max()), mean, scale, 0,
                               pre)
        self._set_server(server, providers, run.statistic_multiplier(), plan.settings["secure"])
        self.mean_ = np.zeros(p) if mean is None else mean
        self.scale_ = scale
        self.data_norm_ = float(bounds.max())
        assert server.raw_variances is not None
        self.explained_variance_ = server.explained_variance
        self.explained_variance_ratio_ = server.explained_variance_ratio
        self.expected_error_ = summed_error_bound(
            server.raw_variances, server.total_variance, [spends for spends, _ in per_provider],
            int(self.provider_n_samples_.sum()), run.centering is not None, p, server.residual)
        return dataclasses.replace(run.record(
            summary, statistic,
            calibration="analytic (exact Gaussian composition of every part, dp-accounting)",
            notes=self._notes(providers, run, plan.settings["secure"], statistic, pre, T),
        ), n_samples=int(self.provider_n_samples_.sum()))

    def _set_server(self, server: ServerState, providers: list[ProviderState],
                    multiplier: float, secure: SecureAgreement | None) -> None:
        """The server's iterates and the providers' public sizes, bounds and noise scales
        (secure: each provider's share, ``1/√(m − t)`` of one central draw)."""
        self.components_ = server.components()
        self.history_ = np.stack([Q.T for Q in server.history])
        self.provider_n_samples_ = np.array([pr.n_samples for pr in providers])
        self.provider_data_norms_ = np.array([pr.data_norm_ for pr in providers])
        self.noise_multiplier_ = multiplier
        share = 1.0 if secure is None else 1.0 / np.sqrt(secure.min_providers
                                                           - secure.colluders)
        self.noise_scales_ = np.array([pr.noise_scale for pr in providers]) * share
        self.min_providers_ = None if secure is None else secure.min_providers
        total = int(self.provider_n_samples_.sum())
        self.noise_level_ = float(np.sqrt(np.sum((self.noise_scales_
                                                  * self.provider_n_samples_) ** 2)) / total)

    def _notes(self, providers: list[ProviderState], run: ReleasePipeline,
               secure: SecureAgreement | None, statistic: Any, pre: list[Any], T: int) -> str:
        if secure is not None:
            parts = [(sp.noise_scale / sp.sensitivity, sp.count) for sp in (*pre, statistic)]
            self.collusion_epsilons_ = collusion_epsilons(parts, run.delta, secure)
            return secure_notes(secure, run.epsilon, run.delta, self.collusion_epsilons_)
        return local_noise_notes(providers, run.plan, run.epsilon, run.delta)

    def sin_theta_path(self, V: ArrayLike) -> NDArray[np.float64]:
        """``‖sin Θ(Q⁽ᵗ⁾, V)‖_F`` for t = 1..T+1 (the paper's Figure 3 against truth ``V``).

        Parameters
        ----------
        V : array-like of shape (n_features, n_components)
            The true basis (orthonormal columns).

        Returns
        -------
        ndarray of shape (n_iter + 1,)
            Entry 0 is the start ``Q⁽¹⁾``, entry t the iterate after t rounds.
        """
        check_is_fitted(self, "history_")
        return np.array([sin_theta(Q.T, V) for Q in self.history_])


def _rounds(plan: FitPlan) -> tuple[int, int, int]:
    """The plan's checked k, T and ŝ."""
    return plan.settings["n_components"], plan.settings["n_rounds"], plan.settings["n_nonzero"]
