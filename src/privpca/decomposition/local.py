"""PCA in the local model (Wang & Xu): every user randomises their own ``x xᵀ``.

Both estimators simulate the protocol of :mod:`privpca.local_protocol.local_covariance` exactly:
the n users' independent noise matrices sum to one symmetric Gaussian matrix whose packed
entries have variance ``n σ₁²``, so ``S̃ = (XᵀX + Z)/n`` with that single ``Z`` has the same
distribution as the average of n separate reports, at the cost of one Gram matrix plus
``p(p+1)/2`` normal draws. To run the real protocol, give each user a
:class:`~privpca.local_protocol.LocalCovarianceRandomiser`, feed their reports to a
:class:`~privpca.local_protocol.LocalCovarianceAggregator`, and call :meth:`fit_aggregate`.
"""

from __future__ import annotations

import math
import numbers
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from numbers import Real
from typing import Any, ClassVar

import dp_accounting
import numpy as np
from numpy.typing import NDArray
from sklearn.base import _fit_context
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils._param_validation import Interval, StrOptions

from privpca._validation import (
    RowClippingWarning,
    caller_stacklevel,
    check_in_range,
    check_n_components,
    clip_rows,
)
from privpca.accounting.calibration import analytic_multiplier, unary_encoding_flip_probability
from privpca.accounting.ledger import PrivacyLedger
from privpca.accounting.neighbouring import Neighbouring
from privpca.accounting.record import PrivacyRecord, PrivacySpend
from privpca.decomposition._base import BasePrivatePCA, Plan, Release
from privpca.decomposition._constraints import LOCAL, positive_int
from privpca.local_protocol.local_covariance import (
    LocalCovarianceAggregator,
    LocalCovarianceRandomiser,
)
from privpca.local_protocol.local_preprocessing import (
    BOUND_QUANTILE,
    GROUP_FRACTIONS,
    LOCAL_GROUPS,
    LOCAL_QUANTILE,
    THRESHOLDS,
    LocalBinAggregator,
    LocalBinRandomiser,
    LocalMeanAggregator,
    LocalMeanRandomiser,
    combine_rounds,
    norm_bins,
    project_to_ball,
    window_thresholds,
)
from privpca.mechanisms.noise import symmetric_gaussian_release
from privpca.pipeline.settings import check_centering, check_scale
from privpca.pipeline.spectrum import (
    check_n_components_spec,
    feasible_spectrum,
    fit_noisy_matrix,
    mean_perturbation_bound,
    noise_norm_bound,
)
from privpca.solvers.eigen import fix_signs, top_eigenvectors
from privpca.solvers.fantope import ADMMIterationInfo, fantope_admm
from privpca.solvers.gram import gram_matrix
from privpca.streaming.reductions import clipped_gram, clipped_sum
from privpca.streaming.sources import ArraySource, RowSource

__all__ = ["LocalGaussianPCA", "LocalSparsePCA"]

#: ``projection_dtype="auto"`` in :class:`LocalSparsePCA`: float32 projections from this
#: dimension on (below it the eigendecompositions are cheap and stay float64).
FLOAT32_PROJECTION_P = 1000


@dataclass(kw_only=True)
class _LocalPlan(Plan):
    """Which protocol the users run, planned before a report is read.

    Attributes
    ----------
    protocol : {"paper", "groups", "collected"}
        ``"paper"``: every user sends a covariance report under a public bound (Wang & Xu's
        protocol exactly); ``"groups"``: the groups of
        :mod:`privpca.local_protocol.local_preprocessing` release a mean and a bound before the
        covariance group reports; ``"collected"``: reports of the real protocol
        (:meth:`~_LocalCovarianceEstimator.fit_aggregate`).
    randomiser : LocalCovarianceRandomiser or None
        The covariance reports' randomiser (None for ``"groups"``: its bound comes later).
    sizes : dict or None
        The public group sizes of ``"groups"``; ``settings`` holds its checked
        ``"centering"`` and ``"data_norm"``.
    """

    protocol: str
    randomiser: LocalCovarianceRandomiser | None = None
    sizes: dict[str, int] | None = None


@dataclass
class _Collected:
    """The input of :meth:`~_LocalCovarianceEstimator.fit_aggregate`: the server's reports."""

    aggregator: LocalCovarianceAggregator


@dataclass
class _Reports:
    """What the server holds before its post-processing.

    Attributes
    ----------
    total : ndarray of shape (n_features, n_features)
        The reporting users' exact sum of clipped ``x xᵀ`` (their noise still to add), or,
        when ``noisy``, the sum of the reports collected by the real protocol.
    n_reports : int
        How many users sent a covariance report.
    randomiser : LocalCovarianceRandomiser
        The covariance reports' randomiser: σ₁, the bound D and the centre they used.
    record : PrivacyRecord
        The fit's final record.
    mean_sd : float
        Standard deviation of the released mean's noise per coordinate (0: no private mean).
    noisy : bool
        Whether ``total`` carries the users' noise already.
    """

    total: NDArray[np.float64]
    n_reports: int
    randomiser: LocalCovarianceRandomiser
    record: PrivacyRecord
    mean_sd: float = 0.0
    noisy: bool = False


class _LocalCovarianceEstimator(BasePrivatePCA):
    """The local model's steps of the one fit, and the server's post-processing hook.

    :meth:`_plan` chooses the users' protocol (:class:`_LocalPlan`) and its record;
    :meth:`_prepare` simulates the users' reports up to their noise (the preprocessing groups'
    releases included); :meth:`_release` adds the covariance reports' noise and hands the
    aggregate to the estimator's :meth:`_fit_second_moment`.
    """

    @_fit_context(prefer_skip_nested_validation=True)
    def fit_aggregate(self, aggregator: LocalCovarianceAggregator) -> _LocalCovarianceEstimator:
        """Fit from reports collected by the real client/server protocol.

        Parameters
        ----------
        aggregator : LocalCovarianceAggregator
            Holds the reports; its randomiser must use this estimator's privacy parameters.

        Returns
        -------
        self
        """
        return self._fit(_Collected(aggregator))

    # ------------------------------------------------------------------ the one fit's steps
    def _plan(self, data: Any) -> _LocalPlan:
        if isinstance(data, _Collected):
            return self._plan_collected(data.aggregator)
        n, p = data.n_samples, data.n_features
        self._check_params(p)
        centering, data_norm = self._protocol_settings(p)
        if centering is not None or isinstance(data_norm, str):
            return self._plan_groups(n, p, centering, data_norm)
        randomiser = self._randomiser(p)
        randomiser.warn_if_weaker()
        return _LocalPlan(planned=self._reports_record(randomiser, n), protocol="paper",
                          randomiser=randomiser)

    def _prepare(self, plan: _LocalPlan, data: Any, pre_rng: np.random.Generator) -> _Reports:
        if plan.protocol == "collected":
            return self._collected_reports(plan, data.aggregator)
        if plan.protocol == "paper":
            return self._paper_reports(plan, data)
        source = data.source if data.streamed else ArraySource(data.X, validated=True)
        return self._group_reports(plan, source, pre_rng)

    def _release(self, plan: _LocalPlan, prepared: _Reports, rng: np.random.Generator,
                 pre_rng: np.random.Generator) -> Release:
        r = prepared.randomiser
        self.noise_scale_ = r.noise_scale
        self.mean_ = np.zeros(r.n_features) if r.centre is None else np.asarray(r.centre)
        self.scale_ = None
        self.data_norm_ = float(r.data_norm)
        self._mean_sd = prepared.mean_sd
        total, m = prepared.total, prepared.n_reports
        if not prepared.noisy:  # the m users' noise sums to one Gaussian of per-entry std √m·σ₁
            total = symmetric_gaussian_release(total, math.sqrt(m) * r.noise_scale, rng,
                                               sensitivity=r.mechanism.sensitivity)
        self._fit_second_moment(total, m)
        return Release(final=prepared.record)

    # ------------------------------------------------------------------ checks
    def _randomiser(
        self, n_features: int, data_norm: float | None = None,
        centre: NDArray[np.float64] | None = None,
    ) -> LocalCovarianceRandomiser:
        # The randomiser checks what it is given (it is also the users' public API).
        data_norm = float(self.data_norm) if data_norm is None else data_norm
        return LocalCovarianceRandomiser(n_features, self.epsilon, self.delta, data_norm,
                                         self.calibration, self.sensitivity, centre=centre)

    def _protocol_settings(self, n_features: int) -> tuple[Any, Any]:
        """The checked ``(centering, data_norm)``; ``(None, a number)`` is the papers' setting."""
        centering = check_centering(self.centering, n_features, self)
        data_norm = self.data_norm  # declared: checked
        if check_scale(self.scale, n_features, self) is not False:
            raise ValueError(
                f"The 'scale' parameter of {type(self).__name__} must be False: private "
                "per-feature scales are not available in the local model yet (each user would "
                "need a further report). Standardise with public scales before fitting."
            )
        return centering, data_norm

    def _check_params(self, n_features: int) -> None:
        check_n_components_spec(self.n_components, n_features, self)

    # ------------------------------------------ one covariance report per user (paper, collected)
    def _paper_reports(self, plan: _LocalPlan, table: Any) -> _Reports:
        """Every user's clipped ``x xᵀ``, summed exactly (their noise is added on release)."""
        randomiser = plan.randomiser
        assert randomiser is not None
        D = float(randomiser.data_norm)
        if table.streamed:  # the users' exact sum by one pass
            gram, n_clipped = clipped_gram(table.source, None, None, D)
            if n_clipped:
                warnings.warn(
                    f"Some users' records had an L2 norm above data_norm={D:g} and were "
                    "clipped to it. The privacy guarantee holds; the estimate is biased.",
                    RowClippingWarning, stacklevel=caller_stacklevel())
        else:
            Xc, _ = clip_rows(table.X, D, owner=self, norms=np.sqrt(table.sq))
            gram = gram_matrix(Xc)
        return _Reports(gram, table.n_samples, randomiser, plan.planned)

    def _plan_collected(self, aggregator: LocalCovarianceAggregator) -> _LocalPlan:
        r = aggregator.randomiser
        # The randomiser's public bound (and centre) are the protocol's: a numeric data_norm
        # here must agree with them; "auto" accepts the bound the server released.
        own_norm = r.data_norm if isinstance(self.data_norm, str) else float(self.data_norm)
        mine = (float(self.epsilon), float(self.delta), own_norm, self.calibration,
                self.sensitivity)
        theirs = (r.epsilon, r.delta, r.data_norm, r.calibration, r.sensitivity)
        if mine != theirs:
            raise ValueError(
                "The aggregator's randomiser (epsilon, delta, data_norm, calibration, "
                f"sensitivity) = {theirs} differs from this estimator's {mine}."
            )
        self._check_params(r.n_features)
        planned = self._reports_record(r, aggregator.n_reports_,
                                       notes=" Clipping, if any, happened on clients.")
        return _LocalPlan(planned=planned, protocol="collected", randomiser=r)

    def _collected_reports(self, plan: _LocalPlan,
                           aggregator: LocalCovarianceAggregator) -> _Reports:
        r = aggregator.randomiser
        self.n_features_in_ = r.n_features
        n = aggregator.n_reports_
        return _Reports(aggregator.noisy_second_moment() * n, n, r, plan.planned, noisy=True)

    def _reports_record(self, randomiser: LocalCovarianceRandomiser, n_samples: int,
                        notes: str = "") -> PrivacyRecord:
        """Every user's one covariance report (the papers' setting, or collected reports)."""
        mech = randomiser.mechanism
        eps = randomiser.certified_epsilon
        Delta = randomiser.true_sensitivity
        spend = PrivacySpend(
            mechanism="gaussian: packed upper triangle of x xᵀ, one report per user",
            epsilon=eps, delta=float(self.delta), sensitivity=Delta, noise_scale=mech.sigma,
            dp_event=dp_accounting.GaussianDpEvent(mech.sigma / Delta),
        )
        paper = (
            " Noise calibrated with the paper's sensitivity D² (sensitivity='paper'); epsilon is "
            "what that noise certifies under replacement."
            if self.sensitivity == "paper"
            else ""
        )
        return _local_record(
            epsilon=eps, delta=float(self.delta), sensitivity=Delta, noise_scale=mech.sigma,
            calibration=self.calibration, data_norm=float(randomiser.data_norm),
            n_samples=int(n_samples), spends=(spend,), target_epsilon=float(self.epsilon),
            notes=(
                "Each user's report is (epsilon, delta)-LDP; the server's output is "
                "post-processing of the reports." + paper + notes
            ),
        )

    # ------------------------------------------------------------------ the groups' protocol
    def _plan_groups(self, n: int, p: int, centering: Any, data_norm: Any) -> _LocalPlan:
        self._randomiser(p, data_norm=1.0)  # validates ε, δ, calibration, sensitivity
        if self.calibration != "analytic" or self.sensitivity != "replace":
            raise ValueError(
                f"{type(self).__name__}: calibration='classic' and sensitivity='paper' "
                "reproduce the paper's setting; they require centering=None and a numeric "
                "data_norm."
            )
        sizes = self._groups(n, centering, data_norm)
        return _LocalPlan(
            planned=self._groups_record(sizes, n, {}, notes="planned before the fit"),
            protocol="groups", sizes=sizes,
            settings={"centering": centering, "data_norm": data_norm},
        )

    def _groups(self, n: int, centering: Any, data_norm: Any) -> dict[str, int]:
        """Public group sizes (the covariance group gets the rest); refused if too small."""
        active = []
        if isinstance(centering, str):
            active += ["norm", "mean", "residual", "mean_refine"]
        if isinstance(data_norm, str):
            active.append("bound")
        sizes = {g: int(GROUP_FRACTIONS[g] * n) for g in active}
        sizes["covariance"] = n - sum(sizes.values())
        small = {g: m for g, m in sizes.items()
                 if m < (len(THRESHOLDS) if g in ("norm", "bound", "residual") else 2)}
        if small:
            raise ValueError(
                f"{type(self).__name__}: n_samples={n} users are too few for the local "
                f"protocol's groups {sizes} (each norm group needs at least "
                f"{len(THRESHOLDS)} users to locate the norms). Use more users, or the papers' "
                "setting (centering=None and a public data_norm)."
            )
        return sizes

    def _group_reports(self, plan: _LocalPlan, source: RowSource,
                       pre_rng: np.random.Generator) -> _Reports:
        """The groups report in turn: norm bins, noisy clipped records (the mean), twice; the
        bound's norm bins; then the covariance group's clipped ``x xᵀ``, summed exactly."""
        sizes = plan.sizes
        assert sizes is not None
        centering, data_norm = plan.settings["centering"], plan.settings["data_norm"]
        n, p = source.n_samples, source.n_features
        eps, delta = float(self.epsilon), float(self.delta)
        # Public: which user is in which group. One int8 label per user (not an index array),
        # so a streamed fit reads each block's labels by slicing, in any order of blocks.
        group_id = {g: i for i, g in enumerate(LOCAL_GROUPS)}
        labels = pre_rng.permutation(np.repeat(
            np.array([group_id[g] for g in LOCAL_GROUPS if g in sizes], dtype=np.int8),
            [sizes[g] for g in LOCAL_GROUPS if g in sizes]))

        def norm_quantile(group: str, centre: NDArray[np.float64] | None,
                          grid: NDArray[np.float64], q: float = LOCAL_QUANTILE) -> float:
            """The group's one-hot bin reports on ``grid``, de-biased, read at the quantile."""
            bin_rand = LocalBinRandomiser(eps, centre=centre)
            counts = source.reduce(
                partial(_block_bin_counts, group=group_id[group], centre=centre, grid=grid),
                _add_counts, aux=lambda start, stop: (labels[start:stop],), desc="norm bins")
            agg = LocalBinAggregator(bin_rand, grid).add_counts(
                bin_rand.simulate_counts(counts, pre_rng), sizes[group])
            return agg.quantile(q)

        released: dict[str, Any] = {}
        mean = None if centering is None else (
            None if isinstance(centering, str) else np.asarray(centering, dtype=np.float64))
        mean_sd = 0.0
        window_top = 0.0
        if isinstance(centering, str):
            # Round 1 around 0 on the full grid; round 2 around μ̂₁ on a window below 2R.
            first = np.zeros(p)
            first_sd = 0.0
            grid = THRESHOLDS
            for norm_g, mean_g in (("norm", "mean"), ("residual", "mean_refine")):
                centre = first
                R = norm_quantile(norm_g, centre, grid)
                mean_rand = LocalMeanRandomiser(eps, delta, R)
                total = clipped_sum(source, centre, R, labels=labels, group=group_id[mean_g])
                agg = LocalMeanAggregator(mean_rand, p).add_sum(
                    mean_rand.add_report_noise(total, sizes[mean_g], pre_rng), sizes[mean_g])
                released[f"{mean_g}_bound"] = R
                released[f"{mean_g}_noise_scale"] = mean_rand.noise_scale
                step = project_to_ball(agg.mean(), R)  # the clipped mean lies in that ball
                if mean_g == "mean":
                    first, first_sd = step, agg.noise_scale
                    grid = window_thresholds(R)
                else:
                    mean, mean_sd = combine_rounds(first, step, first_sd, agg.noise_scale)
                    window_top = R + float(np.linalg.norm(mean - first))
        if isinstance(data_norm, str):
            # ‖x − μ̂‖ ≤ ‖x − μ̂₁‖ + ‖μ̂ − μ̂₁‖ ≲ 2R₂: the window below it, once R₂ is public.
            grid = window_thresholds(window_top) if isinstance(centering, str) else THRESHOLDS
            D = norm_quantile("bound", mean, grid, BOUND_QUANTILE)
        else:
            D = float(data_norm)
        randomiser = self._randomiser(p, data_norm=D, centre=mean)
        gram, _ = clipped_gram(source, mean, None, D, labels=labels,
                               group=group_id["covariance"])
        released.update(data_norm=D, covariance_noise_scale=randomiser.noise_scale)
        record = self._groups_record(sizes, n, released, notes="")
        return _Reports(gram, sizes["covariance"], randomiser, record, mean_sd=mean_sd)

    def _groups_record(
        self, sizes: dict[str, int], n: int, released: dict[str, Any], notes: str
    ) -> PrivacyRecord:
        """One spend per group of users; the total is (ε, δ) by parallel composition.

        ``released`` holds the released bounds and noise scales (NaN until released).
        """
        eps, delta = float(self.epsilon), float(self.delta)
        nan = math.nan
        q = unary_encoding_flip_probability(eps)
        mult = analytic_multiplier(eps, delta)

        def answers(part: str, what: str, users: int) -> PrivacySpend:
            # Replacing a record moves two bits of the one-hot: L1 sensitivity 2.
            return PrivacySpend(
                mechanism=(f"{part}: optimal unary encoding of the bin of {what} on a "
                           f"geometric grid ({users} users, one report each; a 1-bit kept "
                           f"with probability 1/2, a 0-bit set with probability {q:.4g})"),
                epsilon=eps, delta=0.0, sensitivity=2.0, noise_scale=q, dp_event=None)

        def reports(mechanism: str, sensitivity: float, noise_scale: float) -> PrivacySpend:
            return PrivacySpend(mechanism=mechanism, epsilon=eps, delta=delta,
                                sensitivity=sensitivity, noise_scale=noise_scale,
                                dp_event=dp_accounting.GaussianDpEvent(mult))

        spends = []
        for norm_g, mean_g, part, what in (
            ("norm", "mean", "bound_raw", "‖x‖"),
            ("residual", "mean_refine", "bound_residual", "‖x − μ̂₁‖"),
        ):
            if norm_g not in sizes:
                continue
            spends.append(answers(part, what, sizes[norm_g]))
            spends.append(reports(
                f"{mean_g}: gaussian: clip_R(x{'' if mean_g == 'mean' else ' − μ̂₁'})"
                f" ({sizes[mean_g]} users, one report each)",
                2.0 * released.get(f"{mean_g}_bound", nan),
                released.get(f"{mean_g}_noise_scale", nan)))
        if "bound" in sizes:
            spends.append(answers("bound", "‖x − μ̂‖", sizes["bound"]))
        D = released.get("data_norm", nan)
        sigma = released.get("covariance_noise_scale", nan)
        spends.append(reports(
            f"statistic: gaussian: packed upper triangle of clip_D(x − μ̂) "
            f"clip_D(x − μ̂)ᵀ ({sizes['covariance']} users, one report each)",
            math.sqrt(2.0) * D**2, sigma))
        groups = ", ".join(f"{g} {m}" for g, m in sizes.items())
        return _local_record(
            epsilon=eps, delta=delta, sensitivity=math.sqrt(2.0) * D**2, noise_scale=sigma,
            calibration="analytic (Gaussian reports), optimal unary encoding (norm bins)",
            data_norm=D, n_samples=int(n), spends=tuple(spends), target_epsilon=eps,
            notes=((notes + " ") if notes else "") + (
                f"Users split by a public random permutation into disjoint groups ({groups}); "
                "each user sends one report, (epsilon, delta)-LDP (the norm bins are pure "
                "epsilon-LDP), so by parallel composition every user's guarantee is "
                "(epsilon, delta). The server's bound R, mean and bound D are released "
                "before the later groups report; the means are projected onto their bound's "
                "ball and the two rounds combined by inverse variance (post-processing). A "
                "ledger composing this fit with others "
                "treats the groups' spends as sequential (conservative)."),
        )

    # ------------------------------------------------------------------ the server's step
    def _fit_second_moment(self, total: NDArray[np.float64], n: int) -> None:
        """The estimator's post-processing of the noisy sum ``total`` of ``n`` reports."""
        raise NotImplementedError

    def _denominator(self, n: int) -> float:
        """n − 1 for centred reports (scikit-learn's covariance), n for the second moment."""
        return float(n - 1 if np.any(self.mean_ != 0.0) and n > 1 else n)


def _block_bin_counts(
    block: NDArray[np.float64], labels: NDArray[np.int8], *, group: int,
    centre: NDArray[np.float64] | None, grid: NDArray[np.float64],
) -> NDArray[np.int64]:
    """How many of the group's users in the block have their norm in each bin of ``grid``."""
    bins = norm_bins(block[labels == group], grid, centre)
    return np.bincount(bins, minlength=len(grid) + 1).astype(np.int64)


def _add_counts(a: NDArray[np.int64], b: NDArray[np.int64]) -> NDArray[np.int64]:
    return a + b


def _local_record(**fields: Any) -> PrivacyRecord:
    """A record of the local model: replace-one user, nothing clipped is counted."""
    return PrivacyRecord(model="local", neighbouring=Neighbouring.LOCAL_REPLACE_ONE.description,
                         n_clipped=0, **fields)


class LocalGaussianPCA(_LocalCovarianceEstimator):
    """PCA under local differential privacy by Gaussian noise on ``x xᵀ`` (Wang & Xu, Alg. 1).

    Each user adds symmetric Gaussian noise to their own ``x xᵀ``; the untrusted server
    averages the reports and returns the top-k eigenvectors of the average.

    Parameters
    ----------
    n_components : int or float, default=2
        Dimension k of the subspace, or a float in (0, 1): the smallest k whose private
        explained-variance ratio reaches it.
    epsilon : float, default=1.0
        ε > 0 of each user's (ε, δ)-local-DP guarantee.
    delta : float, default=1e-5
        0 < δ < 1.
    centering : "private", None or array of shape (n_features,), default="private"
        ``"private"``: a group of users reports the bin of their norm (a frequency oracle) and
        another sends noisy clipped records, twice (around 0, then around the first mean),
        from which the server releases a mean; the covariance users report ``x − μ̂``
        (:mod:`privpca.local_protocol.local_preprocessing`). ``None``: Wang & Xu's uncentred second
        moment. An array: a public mean, free.
    data_norm : "auto" or float, default="auto"
        Bound D on ``‖x − μ̂‖``. ``"auto"``: a group of users reports the bin of ``‖x − μ̂‖``
        and the server releases the 75 % quantile of the bins it can tell from noise
        (``BOUND_QUANTILE``). A float is public and free; longer rows are clipped to it (on
        the clients).
    scale : False, default=False
        Private scaling is not available in the local model (a clear error); public scales
        can be applied before fitting.
    calibration : {"analytic", "classic"}, default="analytic"
        Gaussian calibration: exact analytic (Balle & Wang 2018) or classic
        ``σ = Δ√(2 ln(1.25/δ))/ε`` (valid only for ε < 1; warns otherwise).
    sensitivity : {"replace", "paper"}, default="replace"
        ``"replace"``: Δ = √2·D², the true L2 sensitivity of the packed upper triangle of
        ``x xᵀ`` when one record is replaced. ``"paper"``: Δ = D², Wang & Xu's
        ``σ₁² = 2 ln(1.25/δ)/ε²``, for reproducing their numbers; it under-noises by √2, so a
        :class:`~privpca.exceptions.PrivacyLeakWarning` is issued and ``privacy_.epsilon``
        reports the ε actually certified.
    random_state : None, int or numpy.random.Generator, default=None
        Source of the noise.
    ledger : PrivacyLedger or None, default=None
        Where the spend is recorded (``None``: :func:`privpca.accounting.default_ledger`).

    Attributes
    ----------
    components_ : ndarray of shape (n_components, n_features)
        Orthonormal rows spanning the estimated principal subspace.
    explained_variance_ : ndarray of shape (n_components_,)
        Top eigenvalues of the summed reports over n − 1 (centred) or n (noisy; may be
        negative).
    explained_variance_ratio_ : ndarray of shape (n_components_,)
        The same over the reports' trace (the private total variance).
    n_components_ : int
    mean_ : ndarray of shape (n_features,)
        The mean the server released from the mean groups (zeros when uncentred).
    scale_ : None
    data_norm_ : float
        The bound D the covariance reports were clipped to (released).
    noise_level_, expected_error_ : float
        As in :class:`~privpca.AnalyzeGaussPCA`, for the summed noise of the covariance
        reports and the released mean's noise.
    noise_scale_ : float
        σ₁, the standard deviation of one user's noise on one upper-triangle entry.
    privacy_ : PrivacyRecord
        The guarantee: local model, replace-one neighbours, sensitivity, noise scale.
    n_features_in_ : int

    See Also
    --------
    LocalSparsePCA : the high-dimensional, row-sparse variant (Algorithm 2).

    References
    ----------
    Di Wang and Jinhui Xu. Principal Component Analysis in the Local Differential Privacy
    Model. IJCAI 2019 / Theoretical Computer Science (journal version), Algorithm 1.

    Examples
    --------
    >>> from privpca import LocalGaussianPCA
    >>> from privpca.datasets import make_spiked
    >>> X, V = make_spiked(20_000, 10, 2, lam=9.0, random_state=0)
    >>> est = LocalGaussianPCA(n_components=2, epsilon=2.0, random_state=0).fit(X)
    >>> est.components_.shape
    (2, 10)
    >>> est.privacy_.model
    'local'
    """

    _parameter_constraints: ClassVar[dict[str, list[Any]]] = dict(LOCAL)

    def __init__(
        self,
        n_components: int = 2,
        *,
        epsilon: float = 1.0,
        delta: float = 1e-5,
        centering: Any = "private",
        data_norm: float | str = "auto",
        scale: Any = False,
        calibration: str = "analytic",
        sensitivity: str = "replace",
        random_state: Any = None,
        ledger: PrivacyLedger | None = None,
    ) -> None:
        self.n_components = n_components
        self.epsilon = epsilon
        self.delta = delta
        self.centering = centering
        self.data_norm = data_norm
        self.scale = scale
        self.calibration = calibration
        self.sensitivity = sensitivity
        self.random_state = random_state
        self.ledger = ledger

    def _fit_second_moment(self, total: NDArray[np.float64], n: int) -> None:
        p = total.shape[0]
        k = check_n_components_spec(self.n_components, p, self)
        # The n users' noise sums to one symmetric Gaussian with per-entry std √n·σ₁.
        fit = fit_noisy_matrix(
            total, k, noise_sd=math.sqrt(n) * self.noise_scale_,
            denominator=self._denominator(n),
            extra_perturbation=mean_perturbation_bound(n, self._mean_sd, p)
            if self._mean_sd else 0.0,
        )
        self._set_spectrum(fit)


class LocalSparsePCA(_LocalCovarianceEstimator):
    """Sparse PCA under local DP: Fantope projection and selection on the private reports.

    The same reports as :class:`LocalGaussianPCA`; the server then solves (Wang & Xu, Alg. 2)

        X̂ = argmax ⟨S̃, X⟩ − λ‖X‖₁,₁  over the Fantope {0 ⪯ X ⪯ I, tr X = k}

    by ADMM (Vu, Cho, Lei & Rohe 2013) and returns the top-k eigenvectors of the sparse
    iterate, whose rows outside the selected support are exactly zero.

    Parameters
    ----------
    n_components : int, default=2
    epsilon, delta, data_norm, calibration, sensitivity, random_state, ledger
        As in :class:`LocalGaussianPCA`.
    lam : "auto" or float, default="auto"
        ℓ₁ penalty λ ≥ 0. ``"auto"`` sets ``λ = lam_scale · (σ₁/√n)·√(2 ln(p²))``: the
        typical size of the largest entry of the averaged noise ``Z/n`` (``p²`` entries of std
        ``σ₁/√n``), which is the noise part of the ``λ ≥ ‖S̃ − Σ‖_∞`` condition in the proof
        of Theorem 4 (its stated order ``λ₁√(log p/(nε²)))`` uses the unknown λ₁). It uses
        only public quantities (σ₁, n, p), so choosing it costs no privacy.
    lam_scale : float, default=0.25
        Multiplier of the theoretical λ when ``lam="auto"``. The full theory value is
        conservative (it shrinks the signal along with the noise); see
        ``docs/local_sparse_lambda.md`` for the measurements behind 0.25.
    max_iter : int, default=100
        Maximum ADMM iterations.
    tol : float, default=1e-3
        Stop when the primal ‖X − Y‖_F and dual ρ‖Y − Y_old‖_F residuals are below √k·tol.
    max_eig : None, int or "auto", default=None
        Cap on the eigenpairs each Fantope projection computes
        (:func:`~privpca.solvers.fantope.fantope_admm`): ``None`` always projects exactly
        (an O(p³) decomposition per iteration when the noise makes many eigenvalues
        fractional); an integer uses the inexact projection, whose error bound is recorded
        per iteration; ``"auto"`` is exact up to p = 4000 and capped at 256 above.
        Experimental, and it loses accuracy where the estimate starts to be informative:
        there the exact solution has hundreds to thousands of fractional eigenvalues, which a
        cap cannot represent. Measured side by side on the same S̃ (issue 16,
        ``docs/BENCHMARKS.md``): at p = 7 128, ε = 16 the exact projections recover 11 of
        the 20 support rows and the cap of 256 recovers 1 (29.5 s against 2.3 s per
        iteration); at ε = 1 both recover none (14.5 s against 2.1 s). Hence the exact
        default; a cap buys speed only where the estimate is noise anyway.
    projection_dtype : {"auto", "float64", "float32"}, default="auto"
        Precision of the exact Fantope projections' eigendecompositions (the ADMM updates
        are float64 throughout). ``"float32"`` about halves their cost at p in the
        thousands; each projection then carries float32 rounding (relative ~p·2⁻²⁴), orders
        of magnitude below the privacy noise in S̃ (relative ~1 per entry at ε ≤ 10), and
        is post-processing, so it changes no guarantee. ``"auto"``: float32 from p = 1 000
        on (at p = 800, ε = 1, the solutions of the two agree to 2·10⁻⁶ in Frobenius norm).
    progress : bool, default=False
        Show a progress bar (tqdm, on stderr) over the ADMM iterations, with the primal and
        dual residuals against the stopping target: at p in the thousands each iteration
        takes seconds to tens of seconds. The residuals are computed from the private S̃
        only (post-processing). ``privpca fit`` turns it on.

    Attributes
    ----------
    components_ : ndarray of shape (n_components, n_features)
        Orthonormal rows; rows outside ``support_`` are zero.
    mean_, scale_, data_norm_, n_components_
        As in :class:`LocalGaussianPCA`.
    explained_variance_, explained_variance_ratio_ : ndarray of shape (n_components,)
        Variances along the sparse components in the noisy ``S̃``, and over its trace, made
        feasible (:func:`~privpca.pipeline.spectrum.feasible_spectrum`).
    noise_level_ : float
        Bound (probability ≥ 95 %) on ``‖S̃ − S‖₂`` in variance units.
    expected_error_ : float
        Distance of the sparse basis to the top-k eigenvectors Ṽ of the released ``S̃``
        (exact, post-processing) plus the Davis–Kahan–Weyl bound of ``Ṽ`` to the PCA of the
        prepared rows (users' aggregate noise: per-entry std σ₁/√n; the private mean's term):
        the triangle inequality, w.p. ≥ 95 %, capped at √(2k). It includes the ℓ₁ penalty's
        bias (the sparse basis is compared with the ordinary PCA).
    support_ : ndarray of int
        Features (rows of the subspace) selected by the ℓ₁ penalty.
    lam_ : float
        The λ used.
    projection_dtype_ : str
        The precision of the projections, ``"float64"`` or ``"float32"``.
    n_iter_ : int
        ADMM iterations run.
    converged_ : bool
    noise_scale_ : float
        σ₁, per-user noise std on one upper-triangle entry.
    privacy_ : PrivacyRecord
    n_features_in_ : int

    Warns
    -----
    sklearn.exceptions.ConvergenceWarning
        When ADMM stops at ``max_iter`` before both residuals are below tolerance.

    References
    ----------
    Wang & Xu (2019), Algorithm 2 and Theorem 4. V. Q. Vu, J. Cho, J. Lei, K. Rohe. Fantope
    Projection and Selection: A near-optimal convex relaxation of sparse PCA. NeurIPS 2013.
    """

    _parameter_constraints: ClassVar[dict[str, list[Any]]] = {
        **LOCAL,
        "lam": [StrOptions({"auto"}), Interval(Real, 0.0, None, closed="left")],
        "lam_scale": [Interval(Real, 0.0, None, closed="neither")],
        "max_iter": positive_int(),
        "tol": [Interval(Real, 0.0, None, closed="neither")],
        "max_eig": [None, StrOptions({"auto"}), *positive_int()],
        "projection_dtype": [StrOptions({"auto", "float32", "float64"})],
        "progress": ["boolean"],
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
        calibration: str = "analytic",
        sensitivity: str = "replace",
        lam: float | str = "auto",
        lam_scale: float = 0.25,
        max_iter: int = 100,
        tol: float = 1e-3,
        max_eig: int | str | None = None,
        projection_dtype: str = "auto",
        progress: bool = False,
        random_state: Any = None,
        ledger: PrivacyLedger | None = None,
    ) -> None:
        self.n_components = n_components
        self.epsilon = epsilon
        self.delta = delta
        self.centering = centering
        self.data_norm = data_norm
        self.scale = scale
        self.calibration = calibration
        self.sensitivity = sensitivity
        self.lam = lam
        self.lam_scale = lam_scale
        self.max_iter = max_iter
        self.tol = tol
        self.max_eig = max_eig
        self.projection_dtype = projection_dtype
        self.progress = progress
        self.random_state = random_state
        self.ledger = ledger

    def _check_params(self, n_features: int) -> None:
        # Each value was checked against its declaration; what remains relates two of them.
        k = check_n_components(self.n_components, n_features, owner=self)
        if isinstance(self.max_eig, numbers.Integral):
            check_in_range(self.max_eig, "max_eig", low=k, integer=True, owner=self)

    def default_lam(self, n_samples: int, n_features: int) -> float:
        """λ for ``lam="auto"``: ``lam_scale · (σ₁/√n)·√(2 ln(p²))`` (public inputs only).

        σ₁ is the covariance reports' noise: for the bound D in force (the released one after a
        fit with ``data_norm="auto"``).
        """
        norm = getattr(self, "data_norm_", None) if isinstance(self.data_norm, str) else None
        sigma1 = self._randomiser(n_features, data_norm=norm).noise_scale
        return (
            float(self.lam_scale)
            * sigma1
            / math.sqrt(n_samples)
            * math.sqrt(2.0 * math.log(max(n_features, 2) ** 2))
        )

    def _fit_second_moment(self, total: NDArray[np.float64], n: int) -> None:
        p = total.shape[0]
        k = int(self.n_components)
        # Full symmetric S̃ (gram_matrix and the noise are already symmetric; the aggregator's
        # matrix too). Scale in place: total is ours.
        total /= n
        S = total
        self.lam_ = self.default_lam(n, p) if isinstance(self.lam, str) else float(self.lam)
        dtype = self.projection_dtype
        if dtype == "auto":
            dtype = "float32" if p >= FLOAT32_PROJECTION_P else "float64"
        self.projection_dtype_ = dtype
        if k == p:  # the Fantope is the single point I
            solution = np.eye(p)
            self.n_iter_, self.converged_ = 0, True
        else:
            with _admm_progress(bool(self.progress), int(self.max_iter),
                                math.sqrt(k) * float(self.tol)) as callback:
                result = fantope_admm(S, k, self.lam_, tol=float(self.tol),
                                      max_iter=int(self.max_iter), callback=callback,
                                      max_eig=self.max_eig,  # type: ignore[arg-type]
                                      projection_dtype=dtype)  # type: ignore[arg-type]
            solution = result.solution
            self.n_iter_, self.converged_ = result.n_iter, bool(result.converged)
            if not result.converged:
                warnings.warn(
                    f"LocalSparsePCA: ADMM did not converge in max_iter={self.max_iter} "
                    f"iterations (primal residual {result.primal_residual:.3g}, dual "
                    f"{result.dual_residual:.3g}, target {math.sqrt(k) * self.tol:.3g}). "
                    "Increase max_iter or tol.",
                    ConvergenceWarning,
                    stacklevel=caller_stacklevel(),
                )
        self.components_, self.support_ = _sparse_top_eigenvectors(solution, k, S)
        # Variances along the sparse components and their share of the noisy trace
        # (post-processing of S̃); noise_level_ bounds ‖S̃ − S‖₂ (per-entry std σ₁/√n).
        scale = n / self._denominator(n)
        self.explained_variance_, self.explained_variance_ratio_, _ = feasible_spectrum(
            np.einsum("ij,jk,ik->i", self.components_, S, self.components_) * scale,
            float(np.trace(S)) * scale)
        self.noise_level_ = noise_norm_bound(self.noise_scale_ / math.sqrt(n), p) * scale
        self.expected_error_ = self._sparse_error_bound(S, n)
        self.n_components_ = k

    def _sparse_error_bound(self, S: NDArray[np.float64], n: int) -> float:
        """Triangle inequality through the top-k eigenvectors Ṽ of the released S̃.

        ``‖V̂V̂ᵀ − VVᵀ‖_F ≤ ‖V̂V̂ᵀ − ṼṼᵀ‖_F + ‖ṼṼᵀ − VVᵀ‖_F``: the first term is computed
        from released quantities exactly (the sparse basis against S̃'s eigenvectors), the
        second is Davis–Kahan–Weyl on S̃ (:func:`~privpca.pipeline.spectrum.fit_noisy_matrix`'s
        bound: per-entry noise std σ₁/√n, plus the private mean's term). Valid w.p. ≥ 95 %.
        """
        p = S.shape[0]
        k = self.components_.shape[0]
        extra = (mean_perturbation_bound(n, self._mean_sd, p) / n if self._mean_sd else 0.0)
        exact = fit_noisy_matrix(S, k, noise_sd=self.noise_scale_ / math.sqrt(n),
                                 denominator=1.0, extra_perturbation=extra)
        V, W = exact.components, self.components_
        to_noisy = math.sqrt(max(2.0 * k - 2.0 * float(np.sum((V @ W.T) ** 2)), 0.0))
        return min(math.sqrt(2.0 * min(k, p - k)) if k < p else 0.0,
                   to_noisy + exact.expected_error)


@contextmanager
def _admm_progress(
    show: bool, max_iter: int, target: float
) -> Iterator[Callable[[ADMMIterationInfo], None] | None]:
    """A tqdm bar (stderr, removed when done) over the ADMM's iterations, with its residuals
    against the stopping target, or ``None`` when ``show`` is false. The residuals are
    computed from the private S̃ alone (post-processing)."""
    if not show:
        yield None
        return
    from tqdm.auto import tqdm

    with tqdm(total=max_iter, desc="LocalSparsePCA ADMM", unit="it", leave=False) as bar:

        def update(info: ADMMIterationInfo) -> None:
            bar.set_postfix(primal=f"{info.primal_residual:.3g}",
                            dual=f"{info.dual_residual:.3g}", target=f"{target:.3g}",
                            refresh=False)
            bar.update(1)

        yield update


def _sparse_top_eigenvectors(
    Y: NDArray[np.float64], k: int, S: NDArray[np.float64]
) -> tuple[NDArray[np.float64], NDArray[np.intp]]:
    """Top-k eigenvectors of the sparse Fantope iterate, computed on its support only, then
    rotated within their span to the eigenvectors of ``VᵀS̃V`` (ordered by variance).

    Rows of ``Y`` that are entirely zero cannot enter an eigenvector of a non-zero eigenvalue,
    so restricting to the support is exact, cheaper, and leaves exact zeros elsewhere. The
    ADMM solution is often an exact projection (eigenvalue 1, k-fold), whose eigenvectors are
    any basis of the subspace: rounding would pick it. Rotating by the noisy covariance
    (post-processing) makes the components well defined and keeps the support.
    """
    p = Y.shape[0]
    support = np.flatnonzero(np.any(Y != 0.0, axis=1))
    components = np.zeros((k, p))
    if support.size >= k:
        sub = Y[np.ix_(support, support)]
        _, vectors = top_eigenvectors(sub, k)
        components[:, support] = vectors.T
    else:  # fewer selected rows than components: fall back to the whole matrix
        _, vectors = top_eigenvectors(Y, k)
        components = fix_signs(vectors).T.copy()
        support = np.flatnonzero(np.any(components != 0.0, axis=0))
    _, rotation = np.linalg.eigh(components @ S @ components.T)
    components = fix_signs((rotation[:, ::-1].T @ components).T).T.copy()
    components[:, np.setdiff1d(np.arange(p), support)] = 0.0  # exact zeros off the support
    return components, support
