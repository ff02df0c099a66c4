"""What the streaming (Oja-type) estimators share: inputs, the start, centring and a held-out share.

Every estimator in :mod:`privpca.decomposition.oja`, :mod:`privpca.decomposition.private_oja`
and :mod:`privpca.decomposition.dp_pca` accepts vector records (``fit(X)``, ``A_i = x_i x_iᵀ``
never formed) or general symmetric matrices (``fit_matrices(A)``, Liu et al.'s Assumption 1,
used as given). The records a pass reads, in memory or streamed, are a
:class:`~privpca.decomposition._records.RecordStream`.

* **The papers' setting** (``centering=None``, and for :class:`~privpca.PrivateOjaPCA` a
  numeric ``clip_norm``): Oja/DP-PCA on the uncentred records, the whole (ε, δ) on the
  stream, nothing held out, one pass.
* **On a table** (the defaults): ``n_held = ⌈holdout_fraction·n⌉`` records, drawn by the
  fit's own generator, go through the release pipeline at the full (ε, δ) (private mean,
  bound, and after the stream the k×k variances along the components); the stream reads the
  other records minus the held-out mean (``stream_centering="mean"``) or their pair
  differences ``(x_a − x_b)/√2`` (``"pairs"``, no mean at all). Disjoint records: by
  adaptive parallel composition the fit is (ε, δ)-DP under replace-one with public n, and
  ``privacy_`` is one record listing every part.
* **Streamed tables** are read once, in their order (``shuffle="auto"``; ``shuffle=True`` on
  a stream is refused: Private Oja's amplification by shuffling needs a uniformly random
  order); the held-out rows are single rows drawn uniformly, not segments, so re-sorting a
  table moves no other record across the split. A streamed fit equals the in-memory fit with
  ``shuffle=False`` and the same seed. A non-finite entry stops the fit before anything is
  released and the booking is withdrawn.

The privacy argument in full, the centring choices and their measurements: docs/DP_PCA.md
("Centring", "Privacy of the whole fit", "Streamed tables").
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from privpca._validation import fit_input, refuse_non_finite
from privpca.decomposition._base import Release
from privpca.decomposition._constraints import private_fit_context
from privpca.decomposition._records import RecordStream
from privpca.decomposition._stochastic_holdout import (
    DEFAULT_HOLDOUT_FRACTION,
    HOLDOUT_SHARES,
    HeldOutTable,
    held_out_notes,
)
from privpca.decomposition._stochastic_types import (
    HeldOutRelease,
    HeldOutSplit,
    Mode,
    StreamInput,
    StreamPlan,
    StreamPrepared,
    StreamRun,
)
from privpca.pipeline.rows import validated_table, warn_if_standardised
from privpca.pipeline.spectrum import feasible_spectrum
from privpca.solvers.oja import MatrixGradients, VectorGradients, check_matrices
from privpca.streaming import ArraySource, is_streamed

__all__ = [
    "DEFAULT_HOLDOUT_FRACTION",
    "HOLDOUT_SHARES",
    "HeldOutRelease",
    "HeldOutSplit",
    "Mode",
    "StochasticPCA",
    "StreamInput",
    "StreamPlan",
    "StreamPrepared",
    "StreamRun",
    "held_out_notes",
]


class StochasticPCA(HeldOutTable):
    """Base class: the one fit's steps for a stream of records.

    :meth:`_validate` says which :class:`Mode` a fit takes; the papers' modes call the
    estimator's :meth:`_papers_plan` and :meth:`_release_papers`; table mode runs the shared
    held-out share (:class:`~privpca.decomposition._stochastic_holdout.HeldOutTable`) around
    the estimator's :meth:`_table_stream_plan` and :meth:`_table_stream` (Private Oja, DP-PCA;
    the non-private Oja overrides it with the exact mean).
    """

    n_components: int
    random_state: Any

    def _validate(self, X: Any) -> StreamInput:
        """Vector records, in memory or streamed; the mode and the order they are read in.

        A streamed table (a ``dask.array.Array``, a ``numpy.memmap``, a ``.npy``/Parquet path,
        a list of chunks or a :class:`~privpca.streaming.RowSource`) is read block by block
        in its order (module docstring); ``A_i = x_i x_iᵀ`` is never formed.
        """
        if is_streamed(X):
            rows = validated_table(self, X).source
            self._resolve_shuffle(streamed=True)
            mode = Mode.PAPERS_STREAM if self._paper_mode(rows.n_features) else Mode.TABLE_STREAM
            return StreamInput(mode, rows, False)
        Xv = fit_input(self, X)
        warn_if_standardised(self, Xv)
        paper = self._paper_mode(Xv.shape[1])
        shuffle = self._resolve_shuffle(streamed=False)
        # NaN/inf: one pass first, unless the fit's own passes refuse them before anything
        # is released (the papers' stream; the defaults' held-out rows and stream).
        if not (self._stream_checks_finite() if paper
                else shuffle and self._table_checks_finite()):
            refuse_non_finite(Xv, "X")
        if paper:
            return StreamInput(Mode.PAPERS, VectorGradients(Xv), shuffle)
        if not shuffle:  # as a stream would read it: the same code, the same output
            return StreamInput(Mode.TABLE_STREAM, ArraySource(Xv, validated=True), False)
        return StreamInput(Mode.TABLE, Xv, True)

    @private_fit_context
    def fit_matrices(self, A: ArrayLike) -> Any:
        """Fit on general symmetric matrices ``A_i`` (Liu et al.'s Assumption 1).

        The estimate is the top-k eigenspace of ``E[A_i]``: the matrices are used as given
        (the papers' setting), so ``centering`` does not apply (``mean_`` is zeros) and no
        records are held out (``explained_variance_`` is NaN). ``transform`` then takes
        vectors of dimension p as usual.

        Parameters
        ----------
        A : array-like of shape (n_samples, n_features, n_features)
            One symmetric matrix per record. Not modified.

        Returns
        -------
        self
        """
        arr = check_matrices(A)
        centering = getattr(self, "centering", None)
        if centering is not None and not (isinstance(centering, str)
                                          and centering == "private"):
            raise ValueError(
                f"{type(self).__name__}.fit_matrices uses the matrices as given: a public mean "
                "(centering=array) applies to vector records only. Use centering=None."
            )
        self.n_features_in_ = arr.shape[1]
        if hasattr(self, "feature_names_in_"):
            del self.feature_names_in_
        self._check_matrix_params()
        shuffle = self._resolve_shuffle(streamed=False)
        return self._fit(StreamInput(Mode.PAPERS, MatrixGradients(arr), shuffle))

    # ------------------------------------------------------------------ the one fit's steps
    def _plan(self, data: StreamInput) -> StreamPlan:
        return self._papers_plan(data) if data.mode.papers else self._table_plan(data)

    def _prepare(self, plan: StreamPlan, data: StreamInput,
                 pre_rng: np.random.Generator) -> StreamPrepared:
        if not data.mode.papers:
            return self._prepare_table(plan, data, pre_rng)
        records = (RecordStream.streamed(data.table) if data.mode.streamed else data.table)
        return StreamPrepared(records, source=data.table)

    def _release(self, plan: StreamPlan, prepared: StreamPrepared, rng: np.random.Generator,
                 pre_rng: np.random.Generator) -> Release:
        if not plan.mode.papers:
            return self._release_table(plan, prepared, rng, pre_rng)
        self._release_papers(plan, prepared.records, rng)
        self._set_paper_attributes(prepared.source)
        return Release(final=plan.planned)  # known in full before the data were read

    # ------------------------------------------------------------------ the estimators' hooks
    def _papers_plan(self, data: StreamInput) -> StreamPlan:
        """The papers' algorithm: validate, calibrate, and its (final) record."""
        raise NotImplementedError

    def _release_papers(self, plan: StreamPlan, records: Any,
                        rng: np.random.Generator) -> None:
        """Run the papers' algorithm over ``records``; set ``components_`` and its own
        attributes (a :class:`RecordStream` when streamed, else the in-memory records)."""
        raise NotImplementedError

    def _resolve_shuffle(self, *, streamed: bool) -> bool:
        """``shuffle`` resolved: whether the records are read in a uniformly random order."""
        value = getattr(self, "shuffle", "auto")
        name = type(self).__name__
        if isinstance(value, str) and value == "auto":
            return not streamed
        if not isinstance(value, bool | np.bool_):
            raise ValueError(
                f"The 'shuffle' parameter of {name} must be 'auto' or a bool. Got {value!r} "
                "instead."
            )
        if value and streamed:
            raise ValueError(
                f"{name}: shuffle=True cannot be honoured on a streamed table: one pass reads "
                "the blocks in their order. Use shuffle='auto' or False (the privacy of the "
                "per-record steps does not depend on the order; the accuracy does if the "
                "rows are sorted: shuffle them first), or fit an in-memory array."
            )
        return bool(value)

    def _stream_checks_finite(self) -> bool:
        """Whether the papers' stream refuses NaN/inf in ``X`` itself, in passes that read
        the records anyway, each before its mechanism releases (instead of a pass first)."""
        return False

    def _paper_mode(self, n_features: int) -> bool:
        """Whether ``fit(X)`` runs the papers' algorithm unchanged (no preprocessing)."""
        return getattr(self, "centering", None) is None

    def _check_matrix_params(self) -> None:
        """Refuse parameters that need vector records (overridden)."""

    def _paper_noise_level(self) -> float:
        """``noise_level_`` after a fit in the papers' setting."""
        return math.nan

    def _paper_expected_error(self) -> float | None:
        """``expected_error_`` in the papers' setting: None, no variance is released to
        bound the distance with (overridden by the non-private Oja)."""
        return None

    def _paper_data_norm(self) -> float:
        """``data_norm_`` after a fit in the papers' setting (no bound: inf)."""
        return math.inf

    def _paper_variances(
        self, source: Any
    ) -> tuple[NDArray[np.float64], float] | None:
        """Explained variances and total in the papers' setting (None: not released)."""
        return None

    # ------------------------------------------------------------------ the papers' setting
    def _set_paper_attributes(self, source: Any) -> None:
        """The pipeline's attributes in the papers' setting (the components are untouched)."""
        k = self.components_.shape[0]
        self.mean_ = np.zeros(source.n_features)
        self.scale_ = None
        self.data_norm_ = self._paper_data_norm()
        released = self._paper_variances(source)
        if released is None:  # nothing beyond the components is released
            self.explained_variance_ = np.full(k, np.nan)
            self.explained_variance_ratio_ = np.full(k, np.nan)
        else:
            values, total = released
            self.explained_variance_, self.explained_variance_ratio_, _ = (
                feasible_spectrum(values, total))
        self.noise_level_ = self._paper_noise_level()
        self.expected_error_ = self._paper_expected_error()
