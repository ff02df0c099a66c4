"""The local model's shared machinery: plans, simulated or collected reports, records.

:class:`_LocalCovarianceEstimator` runs the one fit of both local estimators (the users'
protocol, their reports up to noise, the noise) and hands the noisy sum of the covariance
reports to the estimator's ``_fit_second_moment``.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from functools import partial
from typing import Any

import dp_accounting
import numpy as np
from numpy.typing import NDArray

from privpca._validation import RowClippingWarning, caller_stacklevel, clip_rows
from privpca.accounting.calibration import analytic_multiplier, unary_encoding_flip_probability
from privpca.accounting.neighbouring import Neighbouring
from privpca.accounting.record import PrivacyRecord, PrivacySpend
from privpca.decomposition._base import BasePrivatePCA, Plan, Release, warn_if_centre_noisy
from privpca.decomposition._constraints import private_fit_context
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
from privpca.pipeline.spectrum import check_n_components_spec
from privpca.solvers.gram import gram_matrix
from privpca.streaming.reductions import clipped_gram, clipped_sum
from privpca.streaming.sources import ArraySource, RowSource


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

    @private_fit_context
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
        # The groups' mean is far noisier than a curator's: it can be read as a component.
        warn_if_centre_noisy(self, prepared.mean_sd, r.n_features, float(r.data_norm))
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
        self._check_collected_centre(r.centre)
        planned = self._reports_record(r, aggregator.n_reports_,
                                       notes=" Clipping, if any, happened on clients.")
        return _LocalPlan(planned=planned, protocol="collected", randomiser=r)

    def _check_collected_centre(self, centre: NDArray[np.float64] | None) -> None:
        """The reports are centred on the randomiser's public centre (or not at all): refuse
        a ``centering`` that asks for something else, rather than fit what it did not ask."""
        if isinstance(self.centering, str):  # "private": the centre the server released
            if centre is None:
                raise ValueError(
                    "centering='private': these reports are not centred (their randomiser has "
                    "no centre), so their PCA would be of the uncentred second moment. Centre "
                    "them on the mean the server released (LocalCovarianceRandomiser(..., "
                    "centre=mean)), or pass centering=None to fit the uncentred second moment.")
        elif self.centering is None:
            if centre is not None:
                raise ValueError(
                    "centering=None, but these reports are centred on their randomiser's "
                    "public centre: pass centering='private' (or that centre) to fit them.")
        elif centre is None or not np.array_equal(
                np.asarray(self.centering, dtype=np.float64), centre):
            raise ValueError("The aggregator's randomiser centres the reports on another "
                             "centre than this estimator's centering array.")

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
                f"{len(THRESHOLDS)} users to locate the norms). Nothing was released or "
                "charged. Use more users, or the papers' setting (centering=None and a public "
                "data_norm)."
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
