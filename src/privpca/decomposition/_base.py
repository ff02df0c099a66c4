"""What every privpca PCA estimator shares: transform, tags, privacy charging, and the one fit
of the estimators built on the release pipeline (:class:`PipelinePCA`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray
from sklearn.base import BaseEstimator, TransformerMixin
from sklearn.utils.validation import check_is_fitted, validate_data

from privpca._validation import check_random_state, check_secure_random_state
from privpca.accounting.ledger import PrivacyLedger, resolve_ledger
from privpca.accounting.record import PrivacyRecord, PrivacySpend
from privpca.pipeline.release import PipelineSettings, ReleasePipeline, Table, validated_table

__all__ = ["BasePrivatePCA", "FitPlan", "PipelinePCA", "Release"]


class BasePrivatePCA(TransformerMixin, BaseEstimator):
    """Base class: ``transform``/``inverse_transform`` on ``components_``, and the ledger.

    Projections subtract ``mean_`` and divide by ``scale_`` when the fit centred or scaled
    (``centering="private"``, the default of the estimators built on the release pipeline,
    :mod:`privpca.pipeline.release`); with ``centering=None`` they are uncentred, the papers'
    second-moment setting.
    """

    components_: NDArray[np.float64]
    privacy_: PrivacyRecord

    @staticmethod
    def _preprocessing_rng(rng: np.random.Generator) -> np.random.Generator:
        """An independent stream for the pipeline's noise, spawned without drawing from
        ``rng`` (so the statistic's draws are the same with or without preprocessing)."""
        try:
            return rng.spawn(1)[0]
        except (TypeError, ValueError):  # a bit generator without a SeedSequence
            return np.random.default_rng(rng.integers(0, 2**63))

    def _charge(self, record: PrivacyRecord, ledger: PrivacyLedger | None) -> None:
        """Record the spend before anything computed from the data is released.

        Secure mode's refusal of ``random_state`` comes first: a fit that is refused spends
        nothing, whatever the order of its own steps.
        """
        check_secure_random_state(getattr(self, "random_state", None), owner=self)
        target = resolve_ledger(self, ledger)
        target.spend(record, label=type(self).__name__)

    def transform(self, X: ArrayLike) -> NDArray[np.float64]:
        """Project ``X`` onto the components: ``X @ components_.T`` (post-processing, free).

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
        Xv = validate_data(self, X, reset=False, dtype=np.float64)
        mean = getattr(self, "mean_", None)
        scale = getattr(self, "scale_", None)
        if mean is not None and np.any(mean != 0.0):
            Xv = Xv - mean
        if scale is not None:
            Xv = Xv / scale
        return np.asarray(Xv @ self.components_.T)

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
        return Xv @ self.components_.T

    def inverse_transform(self, X: ArrayLike) -> NDArray[np.float64]:
        """Map projections back to feature space: ``X @ components_ · scale_ + mean_``."""
        check_is_fitted(self, "components_")
        out = np.asarray(np.asarray(X, dtype=np.float64) @ self.components_)
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
        self.noise_level_ = fit.noise_level
        self.expected_error_ = fit.expected_error

    def _set_preprocessing(self, prepared: Any) -> None:
        """``mean_`` (zeros when uncentred), ``scale_`` (None unless scaled), ``data_norm_``."""
        p = prepared.n_features
        # Re-centred on the statistic's own rows (held-out layout), else the clipping centre.
        mean = prepared.mean if prepared.reported_mean is None else prepared.reported_mean
        self.mean_ = np.zeros(p) if mean is None else np.asarray(mean)
        self.scale_ = None if prepared.scale is None else np.asarray(prepared.scale)
        self.data_norm_ = float(prepared.data_norm)

    def __sklearn_tags__(self) -> Any:
        tags = super().__sklearn_tags__()
        # Not tagged non_deterministic: the noise is random, but a fixed random_state
        # reproduces a fit exactly, which scikit-learn's idempotence checks verify.
        tags.transformer_tags.preserves_dtype = ["float64"]
        return tags


@dataclass
class FitPlan:
    """What an estimator plans before it reads a value of the data.

    Attributes
    ----------
    run : ReleasePipeline
        The budget split between the preprocessing parts and the statistic, and the steps
        that carry it out.
    charge : dict
        Options of :meth:`ReleasePipeline.charge` for an estimator that calibrates its
        statistic itself (the papers' settings: ``epsilon``, ``statistic_event``).
    settings : dict
        The estimator's own checked parameters, for its release step.
    """

    run: ReleasePipeline
    charge: dict[str, Any] = field(default_factory=dict)
    settings: dict[str, Any] = field(default_factory=dict)


@dataclass
class Release:
    """What an estimator's release step hands back to the one fit, for the record.

    ``spend`` is the statistic's :class:`~privpca.accounting.record.PrivacySpend`;
    ``calibration`` and ``notes`` go into :attr:`privacy_`; ``record`` holds further
    options of :meth:`ReleasePipeline.record` (e.g. the ``epsilon`` a classic calibration
    certifies).
    """

    spend: PrivacySpend
    calibration: str
    notes: str
    record: dict[str, Any] = field(default_factory=dict)


class PipelinePCA(BasePrivatePCA):
    """The one fit of the estimators built on the release pipeline.

    ``fit`` is the only path, read top to bottom:

    1. validate the table (an array, or a streamed source read block by block);
    2. :meth:`_plan`: the estimator checks its parameters and names its statistic and how
       its sensitivity follows from the norm bound; the pipeline splits (ε, δ);
    3. charge the ledger with the planned spend, before any value of the data is read (a
       refused fit spends nothing);
    4. prepare the rows: private centring, scales, norm bound, held-out layout
       (:meth:`ReleasePipeline.prepare_table`, from its own independent stream);
    5. :meth:`_release`: the estimator's statistic, its noise (through
       :mod:`privpca.mechanisms.noise`) and what it derives from it, as fitted attributes;
    6. the privacy record, composed from every part's spend, replaces the planned one.

    A new estimator on the pipeline supplies :meth:`_plan` and :meth:`_release` only
    (docs/ARCHITECTURE.md).
    """

    def fit(self, X: ArrayLike, y: Any = None) -> Any:
        """Fit privately: plan, charge, prepare, release, record.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features), or a streamed table
            One record per row. Not modified. A ``dask.array.Array``, a memory-mapped array,
            a Parquet path or a :class:`~privpca.streaming.RowSource` is read block by block
            (:mod:`privpca.streaming`) by the estimators that stream.
        y : ignored

        Returns
        -------
        self
        """
        table = validated_table(self, X)
        plan = self._plan(table)
        rng = check_random_state(self.random_state)
        pre_rng = self._preprocessing_rng(rng)
        plan.run.charge(self.ledger, **plan.charge)  # before anything data-dependent
        prepared = plan.run.prepare_table(table, pre_rng)
        release = self._release(plan, prepared, rng, pre_rng)
        self.privacy_ = plan.run.record(prepared, release.spend,
                                        calibration=release.calibration,
                                        notes=release.notes, **release.record)
        self._set_preprocessing(prepared)
        return self

    def _settings(self) -> PipelineSettings:
        """The parameters the pipeline reads, handed over explicitly."""
        return PipelineSettings(
            epsilon=self.epsilon, delta=self.delta, centering=self.centering,
            data_norm=self.data_norm, scale=self.scale, budget_shares=self.budget_shares,
            holdout_fraction=self.holdout_fraction, random_state=self.random_state,
        )

    def _plan(self, table: Table) -> FitPlan:
        """Check the parameters against the table's public shape and plan the fit
        (a :class:`ReleasePipeline` on :meth:`_settings`)."""
        raise NotImplementedError

    def _release(self, plan: FitPlan, prepared: Any, rng: np.random.Generator,
                 pre_rng: np.random.Generator) -> Release:
        """Release the statistic from the prepared rows; set the fitted attributes.

        ``rng`` is the statistic's stream, ``pre_rng`` the preprocessing's (the pipeline's
        own later releases, such as the variances along the components, draw from it).
        """
        raise NotImplementedError
