"""What every privpca PCA estimator shares: the one fit, transform, tags.

:meth:`BasePrivatePCA.fit` is the only path through a fit, for every private estimator:
validate → plan → book the planned spend → prepare → release → settle the record. The
estimators supply the steps; two release families fill them: the noisy-matrix family on the
release pipeline (:class:`PipelinePCA`: Analyze Gauss, MOD-SuLQ, noisy power, Bingham,
DPS-PCA, the local model) and the streaming gradient family (:class:`~privpca.decomposition.
_stochastic.StochasticPCA`: Oja, Private Oja, DP-PCA).
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.sparse import issparse
from sklearn.base import (
    BaseEstimator,
    ClassNamePrefixFeaturesOutMixin,
    TransformerMixin,
)
from sklearn.utils.validation import check_is_fitted, validate_data

from privpca._config import fit_noise_mode
from privpca._validation import caller_stacklevel
from privpca.accounting.ledger import Booking
from privpca.accounting.record import PrivacyRecord, PrivacySpend
from privpca.decomposition._constraints import private_fit_context
from privpca.decomposition._probabilistic import ProbabilisticPCAMixin
from privpca.exceptions import (
    NoisyCentreWarning,
    NonFiniteInputError,
    UnresolvedComponentsWarning,
)
from privpca.mechanisms.randomness import (
    check_random_state,
    check_secure_random_state,
    noise_mode_of,
)
from privpca.pipeline.release import ReleasePipeline
from privpca.pipeline.rows import validated_table
from privpca.pipeline.scale_refinement import ScaleRefinement
from privpca.pipeline.settings import PipelineSettings

__all__ = ["BasePrivatePCA", "FitPlan", "PipelinePCA", "Plan", "Release"]


class BasePrivatePCA(ProbabilisticPCAMixin, ClassNamePrefixFeaturesOutMixin, TransformerMixin,
                     BaseEstimator):
    """Base class: ``transform``/``inverse_transform`` on ``components_``, and the ledger.

    Projections subtract ``mean_`` and divide by ``scale_`` when the fit centred or scaled
    (``centering="private"``, the default of the estimators built on the release pipeline,
    :mod:`privpca.pipeline.release`); with ``centering=None`` they are uncentred, the papers'
    second-moment setting. With ``whiten=True`` (a constructor parameter of every estimator,
    scikit-learn's) they are then divided by ``sqrt(explained_variance_)``, and
    ``inverse_transform`` multiplies it back.

    scikit-learn's probabilistic PCA surface (``get_covariance``, ``get_precision``,
    ``score_samples``, ``score``, ``noise_variance_``, ``singular_values_``, ``n_samples_``)
    comes from :class:`~privpca.decomposition._probabilistic.ProbabilisticPCAMixin`: computed
    from released attributes only (post-processing, free), absent with a reason where the fit
    released too little to define it.

    The output columns are named as scikit-learn names a PCA's: the lower-case class name and
    the component's index (``analyzegausspca0``, ``analyzegausspca1``, ...), from
    :meth:`get_feature_names_out`; ``set_output(transform="pandas")`` therefore returns a
    DataFrame with those columns (and the input's index).
    """

    components_: NDArray[np.float64]
    privacy_: PrivacyRecord
    #: What each constructor parameter may be (scikit-learn's declaration, checked first by
    #: :meth:`fit`; :mod:`privpca.decomposition._constraints` holds the shared ones).
    _parameter_constraints: ClassVar[dict[str, list[Any]]] = {}

    @private_fit_context
    def fit(self, X: ArrayLike, y: Any = None) -> Any:
        """Fit privately: plan, charge, prepare, release, record.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features), or a streamed table
            One record per row. Not modified. A ``dask.array.Array``, a memory-mapped array,
            a Parquet path or a :class:`~privpca.streaming.RowSource` is read block by block
            (:mod:`privpca.streaming`).
        y : ignored

        Returns
        -------
        self
        """
        return self._fit(self._validate(X))

    def _fit(self, data: Any) -> Any:
        """The one fit, read top to bottom (every entry point ends here):

        1. :meth:`_plan`: the estimator checks its parameters against the data's public
           shape and plans its spend (a :class:`FitPlan`);
        2. the planned record is booked on the ledger before any value of the data is read
           (secure mode refuses a seed first: a refused fit spends nothing);
        3. :meth:`_prepare`: private centring, scales, norm bound, held-out layout, from the
           preprocessing's own stream;
        4. :meth:`_release`: the statistic, its noise (:mod:`privpca.mechanisms.noise`) and
           what is derived from it, as fitted attributes;
        5. the final record replaces the planned one and becomes ``privacy_``.

        A step that refuses the input before anything is released raises
        :class:`~privpca.exceptions.NonFiniteInputError`; the booking is then withdrawn.
        Every record made during the fit states how its noise is drawn
        (``privacy_.noise_mode``: secure unless seeded, :mod:`privpca._config`).
        """
        with fit_noise_mode(noise_mode_of(getattr(self, "random_state", None))):
            return self._fit_steps(data)

    def _fit_steps(self, data: Any) -> Any:
        from privpca.decomposition._constraints import warn_if_delta_large

        plan = self._plan(data)
        warn_if_delta_large(self, plan.planned)  # δ ≥ 1/n (public n), before any charge
        rng = check_random_state(self.random_state)
        pre_rng = self._preprocessing_rng(rng)
        booking = self._book(plan.planned)  # before anything data-dependent
        try:
            prepared = self._prepare(plan, data, pre_rng)
            release = self._release(plan, prepared, rng, pre_rng)
        except NonFiniteInputError:
            booking.withdraw()  # refused before anything was released
            raise
        # scikit-learn's attribute, for every estimator (the iterative ones set no spectrum).
        self.n_components_ = int(np.shape(self.components_)[0])
        _warn_if_nothing_resolved(self)
        self.privacy_ = booking.settle(self._final_record(plan, prepared, release))
        return self

    def _validate(self, X: Any) -> Any:
        """The checked input of :meth:`_fit` (a :class:`~privpca.pipeline.rows.Table`)."""
        return validated_table(self, X)

    def _plan(self, data: Any) -> Plan:
        """Check the parameters against the data's public shape; plan the spend."""
        raise NotImplementedError

    def _prepare(self, plan: Any, data: Any, pre_rng: np.random.Generator) -> Any:
        """Preprocessing releases (private mean, scales, bound, held-out layout)."""
        return data

    def _release(self, plan: Any, prepared: Any, rng: np.random.Generator,
                 pre_rng: np.random.Generator) -> Release:
        """Release the statistic from the prepared data; set the fitted attributes.

        ``rng`` is the statistic's stream, ``pre_rng`` the preprocessing's (the pipeline's
        own later releases, such as the variances along the components, draw from it).
        """
        raise NotImplementedError

    def _final_record(self, plan: Any, prepared: Any, release: Release) -> PrivacyRecord:
        """The final privacy record (its events must be the planned ones)."""
        if release.final is None:
            raise NotImplementedError(f"{type(self).__name__}._release returned no record.")
        return release.final

    def _book(self, planned: PrivacyRecord) -> Booking:
        """Charge the planned record before anything computed from the data is released.

        Secure mode's refusal of ``random_state`` comes first: a fit that is refused spends
        nothing, whatever the order of its own steps.
        """
        check_secure_random_state(getattr(self, "random_state", None), owner=self)
        return Booking.charge(self, getattr(self, "ledger", None), planned)

    @staticmethod
    def _preprocessing_rng(rng: np.random.Generator) -> np.random.Generator:
        """An independent stream for the pipeline's noise, spawned without drawing from
        ``rng`` (so the statistic's draws are the same with or without preprocessing)."""
        try:
            return rng.spawn(1)[0]
        except (TypeError, ValueError):  # a bit generator without a SeedSequence
            return np.random.default_rng(rng.integers(0, 2**63))

    @property
    def _n_features_out(self) -> int:
        """The number of output columns (read by :meth:`get_feature_names_out`)."""
        return int(self.components_.shape[0])

    def transform(self, X: ArrayLike) -> NDArray[np.float64]:
        """Project ``X`` onto the components: ``X @ components_.T`` (post-processing, free).

        After ``mean_`` and ``scale_`` (when the fit centred or scaled); with ``whiten=True``
        divided by ``sqrt(explained_variance_)`` (at least machine ε, as scikit-learn), which a
        fit that released no variances (the papers' settings) refuses with a ValueError.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        ndarray of shape (n_samples, n_components)
            A lazy ``dask.array.Array`` when ``X`` is one (projected where its blocks live).
        """
        check_is_fitted(self, "components_")
        if type(X).__module__.startswith("dask.array"):
            return self._transform_dask(X)
        Xv = validate_data(self, X, reset=False, dtype=np.float64,
                           accept_sparse=("csr", "csc", "coo"))
        mean = getattr(self, "mean_", None)
        scale = getattr(self, "scale_", None)
        if issparse(Xv):  # ((X − μ)/s)Cᵀ = X(C/s)ᵀ − (μ/s)Cᵀ: X is never densified
            weights = self.components_ / (1.0 if scale is None else scale)
            projected = np.asarray(Xv @ weights.T)
            if mean is not None:
                projected -= mean @ weights.T
        else:
            if mean is not None and np.any(mean != 0.0):
                Xv = Xv - mean
            if scale is not None:
                Xv = Xv / scale
            projected = np.asarray(Xv @ self.components_.T)
        if getattr(self, "whiten", False):
            projected /= self._whiten_scale()
        return projected

    def _transform_dask(self, X: Any) -> Any:
        if X.ndim != 2 or X.shape[1] != self.n_features_in_:
            raise ValueError(f"X has shape {X.shape}; {type(self).__name__} was fitted on "
                             f"{self.n_features_in_} features.")
        mean = getattr(self, "mean_", None)
        scale = getattr(self, "scale_", None)
        Xv = X.astype(np.float64)
        if mean is not None and np.any(mean != 0.0):
            Xv = Xv - mean
        if scale is not None:
            Xv = Xv / scale
        projected = Xv @ self.components_.T
        if getattr(self, "whiten", False):
            projected = projected / self._whiten_scale()
        return projected

    def inverse_transform(self, X: ArrayLike) -> NDArray[np.float64]:
        """Map projections back to feature space: ``X @ components_ · scale_ + mean_``.

        With ``whiten=True`` the projections are first multiplied by
        ``sqrt(explained_variance_)``, undoing :meth:`transform`'s division (scikit-learn's).
        """
        check_is_fitted(self, "components_")
        Y = np.asarray(X, dtype=np.float64)
        if getattr(self, "whiten", False):
            Y = Y * self._whiten_scale()
        out = np.asarray(Y @ self.components_)
        scale = getattr(self, "scale_", None)
        mean = getattr(self, "mean_", None)
        if scale is not None:
            out = out * scale
        if mean is not None and np.any(mean != 0.0):
            out = out + mean
        return out

    def _set_spectrum(self, fit: Any) -> None:
        """The attributes of a :class:`~privpca.pipeline.spectrum.SpectrumFit`."""
        self.components_ = fit.components
        self.n_components_ = fit.n_components
        self.explained_variance_ = fit.explained_variance
        self.explained_variance_ratio_ = fit.explained_variance_ratio
        self.total_variance_ = fit.total_variance
        self.noise_level_ = fit.noise_level
        self.noise_sd_per_entry_ = fit.entry_noise
        self.expected_error_ = fit.expected_error

    def _set_preprocessing(self, prepared: Any) -> None:
        """``mean_`` (zeros when uncentred), ``scale_`` (None unless scaled), ``data_norm_``."""
        p = prepared.n_features
        # Re-centred on the statistic's own rows (held-out layout), else the clipping centre.
        mean = prepared.mean if prepared.reported_mean is None else prepared.reported_mean
        self.mean_ = np.zeros(p) if mean is None else np.asarray(mean)
        self.scale_ = None if prepared.scale is None else np.asarray(prepared.scale)
        self.data_norm_ = float(prepared.data_norm)
        if prepared.scale is None:  # scale=True refines the means per feature, in their units
            warn_if_centre_noisy(self, prepared.details.get("mean_noise_scale"), p,
                                 float(prepared.data_norm))

    def __sklearn_tags__(self) -> Any:
        tags = super().__sklearn_tags__()
        # Not tagged non_deterministic: the noise is random, but a fixed random_state
        # reproduces a fit exactly, which scikit-learn's idempotence checks verify.
        tags.transformer_tags.preserves_dtype = ["float64"]
        # SciPy sparse tables are streamed, one dense block of rows at a time.
        tags.input_tags.sparse = True
        return tags


@dataclass(kw_only=True)
class Plan:
    """What an estimator plans before it reads a value of the data.

    Attributes
    ----------
    planned : PrivacyRecord
        The record booked before the data are read: every part's event.
    settings : dict
        The estimator's own checked parameters, for its release step.
    """

    planned: PrivacyRecord = None  # type: ignore[assignment]  # set by every subclass
    settings: dict[str, Any] = field(default_factory=dict)


@dataclass
class FitPlan(Plan):
    """A plan on the release pipeline (the noisy-matrix family).

    Attributes
    ----------
    run : ReleasePipeline
        The budget split between the preprocessing parts and the statistic, and the steps
        that carry it out.
    charge : dict
        Options of :meth:`ReleasePipeline.planned_record` for an estimator that calibrates
        its statistic itself (the papers' settings: ``epsilon``, ``statistic_event``).
    planned : PrivacyRecord
        Default: the run's :meth:`~ReleasePipeline.planned_record`.
    """

    run: ReleasePipeline
    charge: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.planned is None:
            self.planned = self.run.planned_record(**self.charge)


@dataclass
class Release:
    """What an estimator's release step hands back to the one fit, for the record.

    On the release pipeline, ``spend`` is the statistic's
    :class:`~privpca.accounting.record.PrivacySpend`; ``calibration`` and ``notes`` go into
    :attr:`privacy_`; ``record`` holds further options of :meth:`ReleasePipeline.record`
    (e.g. the ``epsilon`` a classic calibration certifies). An estimator that composes its
    record itself hands it over as ``final``.
    """

    spend: PrivacySpend | None = None
    calibration: str = ""
    notes: str = ""
    record: dict[str, Any] = field(default_factory=dict)
    final: PrivacyRecord | None = None
    #: Private scales refined by the released matrix's diagonal (``scale=True``).
    refinement: ScaleRefinement | None = None


class PipelinePCA(BasePrivatePCA):
    """The noisy-matrix family: the one fit's steps on the release pipeline.

    :meth:`_plan` returns a :class:`FitPlan` holding a :class:`ReleasePipeline` built from
    :meth:`_settings` (the estimator names its statistic and how its sensitivity follows from
    the norm bound; the pipeline splits (ε, δ)); the planned record is the run's. The
    preparation is :meth:`ReleasePipeline.prepare_table` (private centring, scales, norm
    bound, held-out layout); the final record is composed from every part's spend by
    :meth:`ReleasePipeline.record`. A new estimator on the pipeline supplies :meth:`_plan`
    and :meth:`_release` only (docs/ARCHITECTURE.md).
    """

    def _prepare(self, plan: FitPlan, data: Any, pre_rng: np.random.Generator) -> Any:
        return plan.run.prepare_table(data, pre_rng)

    def _final_record(self, plan: FitPlan, prepared: Any, release: Release) -> PrivacyRecord:
        assert release.spend is not None
        self._set_preprocessing(prepared)
        if (self.scale_ is not None and release.refinement is not None
                and not release.refinement.is_identity):
            self.scale_ = self.scale_ * release.refinement.factors
        return plan.run.record(prepared, release.spend, calibration=release.calibration,
                               notes=release.notes, **release.record)

    def _settings(self) -> PipelineSettings:
        """The parameters the pipeline reads, handed over explicitly."""
        return PipelineSettings(
            epsilon=self.epsilon, delta=self.delta, centering=self.centering,
            data_norm=self.data_norm, scale=self.scale, budget_shares=self.budget_shares,
            holdout_fraction=self.holdout_fraction, random_state=self.random_state,
        )


#: :class:`~privpca.exceptions.NoisyCentreWarning` from this ratio of the private mean's
#: expected noise norm to the bound on the centred rows (post-processing of released
#: values). On the real-data suite it fires on the two tables under 600 rows only, where
#: every fit is near chance; a year column beside five columns of spread 2-4 gives 0.6.
NOISY_CENTRE_RATIO = 0.5


def _warn_if_nothing_resolved(owner: Any) -> None:
    """Warn when every released variance is 0: no component was resolved above the noise
    (released values only)."""
    variance = np.asarray(getattr(owner, "explained_variance_", []), dtype=np.float64)
    if variance.size and np.all(variance == 0.0):
        warnings.warn(
            f"{type(owner).__name__}: no component's variance was resolved above the "
            f"release's noise (explained_variance_ is 0 for all {variance.size}): the "
            "components are directions the noise chose, not the table's. A table with no "
            "spread does this, as does too little signal for this epsilon, number of rows and "
            "of features: use a larger epsilon, more rows or fewer features.",
            UnresolvedComponentsWarning, stacklevel=caller_stacklevel())


def warn_if_centre_noisy(owner: object, sd: float | None, n_features: int,
                         data_norm: float) -> None:
    """Warn when the private mean's noise ``sd`` (released level, per coordinate) is large
    next to the released bound D on the centred rows: central fits and the local model's
    groups alike (post-processing of public levels)."""
    if not sd or not data_norm > 0:
        return
    noise = float(sd) * math.sqrt(n_features)
    ratio = noise / float(data_norm)
    if ratio < NOISY_CENTRE_RATIO:
        return
    warnings.warn(
        f"{type(owner).__name__}: the private mean's noise (about {noise:.3g} in norm) is "
        f"{ratio:.0%} of the bound on the centred rows ({float(data_norm):.3g}): "
        "centring on it can turn the components toward the noise. A column with a large "
        "offset (a year, a code, a timestamp) beside columns of small spread causes this, as "
        "does a small table. What helps: subtract a public offset from such columns, pass a "
        "public centre (centering=array, or None for centred data), scale=True (means refined "
        "per feature), or a larger epsilon.",
        NoisyCentreWarning, stacklevel=caller_stacklevel())
