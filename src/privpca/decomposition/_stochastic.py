"""What the streaming (Oja-type) estimators share: inputs, the start, centring and a held-out share.

Every estimator in :mod:`privpca.decomposition.oja`, :mod:`privpca.decomposition.private_oja`
and :mod:`privpca.decomposition.dp_pca` accepts either vector records (``fit(X)``,
``A_i = x_i x_iᵀ`` never formed) or general symmetric matrices (``fit_matrices(A)``, Liu et
al.'s Assumption 1, always used as given). The records a pass reads, in memory or streamed,
are a :class:`~privpca.decomposition._records.RecordStream`.

Two ways through ``fit(X)``
---------------------------
* **The papers' setting** (``centering=None``, and for
  :class:`~privpca.PrivateOjaPCA` a numeric ``clip_norm``): Oja/DP-PCA on the uncentred
  records, the whole (ε, δ) on the stream, nothing held out.
* **On a table** (the defaults): the stream estimates the top eigenspace of the *covariance*,
  and a small held-out share of the records releases ``mean_`` (for ``transform``), the
  explained variance and, for Private Oja with ``clip_norm="auto"``, the clipping bound.
  Described below; the privacy argument is at the end.

Centring the stream: the held-out private mean (default) or pair differences
---------------------------------------------------------------------------
By default (``stream_centering="mean"``) the stream reads ``x − μ̂`` with μ̂ the held-out
share's private mean (below): μ̂ is released from records disjoint from the stream's, so for
the stream it is a public constant and its guarantee is unchanged; what is left of the mean's
noise, ``(μ − μ̂)(μ − μ̂)ᵀ``, is small next to an eigengap of order the data's variance (about
3·10⁻⁴ against 9 in the measurement of docs/DP_PCA.md) and every streamed record is kept.
The alternative, ``stream_centering="pairs"``, needs no mean and leaves no mean noise: the
stream reads **pair differences**: the records left after the hold-out, in the (uniformly
random) order ``π``, are paired consecutively and each pair gives one derived record

    ``g = (x_a − x_b)/√2``.

For i.i.d. records ``E g = 0`` and ``Cov g = (Σ + Σ)/2 = Σ``, so ``E[g gᵀ] = Σ``: Oja/DP-PCA
on the g's estimate the top eigenspace of the covariance, with no mean estimated at all. Even
for a fixed table, the average of ``g gᵀ`` over a uniformly random pair is exactly the sample
covariance ``Σᵢ(xᵢ − x̄)(xᵢ − x̄)ᵀ/(n − 1)`` (scikit-learn's). The price is in data: the stream
sees ``m = ⌊(n − n_held)/2⌋`` derived records (an odd last record is unused). DP-PCA's
Algorithm 4 uses the same device on its gradients. Measured (docs/DP_PCA.md), halving the
records costs more than the mean's noise, hence the default. With a public mean ``c``
(``centering=array``) no pairs are needed: the stream reads ``x − c``, free.

The held-out share
------------------
``n_held = ⌈holdout_fraction·n⌉`` records (the first of ``π``) go through the central release
pipeline's mechanisms (:mod:`privpca.pipeline.preprocessing`, run by
:class:`~privpca.pipeline.release.ReleasePipeline`) at the **full** (ε, δ), split exactly among
its Gaussian parts by a :class:`~privpca.pipeline.budget.BudgetPlan` (weights
:data:`HOLDOUT_SHARES`, overridable by ``budget_shares``, normalised over the parts in use):

* with ``centering="private"``, the pipeline's two-round private mean: private quantiles of
  the row norms (stability histograms on a log grid, Δ = √2 on the counts) clip the rows for
  a Gaussian mean (Δ = 2R), then the residuals for a refinement ("bound_raw", "mean",
  "bound_residual", "mean_refine");
* ``"bound"``: a private 99 % quantile D of the centred norms ``‖x − μ̂‖`` (or ``‖x − c‖``,
  or ``‖x‖`` uncentred); Private Oja's ``clip_norm="auto"`` is ``β = D²``;
* ``"variance"``, after the stream: the k×k matrix ``VᵀGV`` and ``tr G`` of the held-out
  rows (centred, clipped to D) plus Gaussian noise, Δ = √2·D²
  (:meth:`ReleasePipeline.release_component_spectrum` derives it), over ``n_held − 1``
  (centred) or ``n_held``. Its eigenvectors rotate the stream's basis into ordered
  components (post-processing: the span is the stream's), its eigenvalues are
  ``explained_variance_`` and, over the private total, ``explained_variance_ratio_``.

The held-out records have no statistic of their own, so the plan's statistic share is the
variance part: nothing of the held-out (ε, δ) is left unused.

Privacy of the whole fit (central model, replace one record, n public)
----------------------------------------------------------------------
Let D and D' differ in record j, and fix the permutation π: it is drawn from the estimator's
own random stream, independently of the data, with the same law under D and D'. The sizes
``n_held`` and ``m`` are functions of n and public parameters.

1. **The derived data set is a neighbour.** Each original record of the stream enters exactly
   one pair. If j is held out (or is the unused odd record), the derived records are
   identical; otherwise exactly one derived record differs, the one of j's pair, and ``m`` is
   unchanged. So the derived data sets are neighbours under the same replace-one relation
   with public size m, and every guarantee of the stream mechanism on m records — Private
   Oja's per-step or shuffled one, DP-PCA's parallel one — carries over unchanged. (For the
   shuffled guarantee: given π, the stream processes the m derived records in its own
   uniformly random, unreleased order, drawn independently of π, which is what
   Feldman–McMillan–Talwar's theorem assumes.)
2. **Parallel composition.** The fit runs, adaptively, M₁ = held-out bound(s) and mean,
   M₂ = the stream (it may read M₁'s release: β), M₃ = held-out variances (it reads M₂'s
   components). If j is held out, M₂'s output law given the past is the same under D and D'
   (it does not read j) and M₁, M₃ compose exactly to (ε, δ) with the rest of the held-out
   plan; if j is in the stream, M₁ and M₃ have the same law given the past and M₂ is
   (ε, δ)-DP by 1. Either way the joint release is (ε, δ)-DP, and averaging over π (the same
   law for D and D') keeps it so.

``privacy_`` is **one** record per fit (booked in the ledger before the data are read, then
completed) listing every held-out part and the stream (``"statistic: …"``), with (ε, δ) equal
to the request. When a ledger composes it with other fits, all its events are composed as if
a record had entered both the held-out part and the stream: conservative.

Streamed tables: one pass, in the table's order
-----------------------------------------------
``fit`` also takes what :func:`privpca.streaming.as_row_source` takes (a ``dask.array.Array``,
a memory-mapped ``.npy``, a Parquet file or folder, a list of chunks or a
:class:`~privpca.streaming.RowSource`). The stream then reads the blocks **in their order**,
once, holding one block (and, for DP-PCA, one minibatch of B rows) plus the p×k iterate:
memory does not grow with n (DP-PCA's ``batch_size="auto"``, ``B = c·n/(ln n)²``, does; give
an int ``batch_size`` to bound it). X is never formed.

* **Order.** ``shuffle="auto"`` (the default) reads an in-memory table in a uniformly random
  order and a streamed one in its order (one pass cannot shuffle it);
  ``shuffle=False`` reads an in-memory table as a stream would (and then gives the streamed
  fit's output, same seed); ``shuffle=True`` on a stream is refused. The privacy of DP-PCA
  and of Private Oja's per-step argument does not depend on the order (each record enters one
  mechanism call, whatever the order; the batches are fixed by positions, not by values).
  Private Oja's amplification by shuffling *does* need a uniformly random order, unknown to
  the adversary: with a given order it is refused (``amplification="none"``, the per-step
  guarantee, is needed). No bounded buffer shuffle is offered: it gives no uniformly random
  permutation, and privpca states no amplification bound for it. The accuracy does depend on
  the order: Oja's analysis assumes i.i.d. records, so a table sorted by a feature (by time,
  by region) biases the estimate towards the last rows' directions; shuffle such a table
  first (e.g. ``X[rng.permutation(n)]`` in Dask) or fit it in memory.
* **Held-out share.** ``n_held = ⌈holdout_fraction·n⌉`` rows (a function of n and public
  parameters, as in memory) are drawn uniformly without replacement from the estimator's
  generator, as single rows, not from the data, and kept secret
  (:func:`privpca.streaming.holdout.random_row_split`): the partition of the multiset of
  records is then uniform whatever the storage order, so replacing one record of a table
  sorted by a feature (and re-sorting it) changes the side of no other record, and the
  parallel-composition argument above holds word for word, with this draw in place of π.
  (Whole segments of consecutive rows would not: re-sorting moves other records across the
  boundary.) The held-out rows are gathered into memory in one pass over
  the table (:func:`privpca.streaming.selection.take_rows`; ``n_held × p`` values), the
  held-out passes (the pipeline's quantiles and means, then the variances) read them there,
  and the stream then reads the other rows in order, block by block with the held-out ones
  removed (:func:`privpca.streaming.selection.drop_rows`): two passes over the table in all.
  Pair differences (``stream_centering="pairs"``) of neighbouring **sorted** rows are still
  small and estimate the local, not the global, covariance (the stream's order, not the
  split). In the papers' setting (``centering=None`` and, for Private Oja, a numeric
  ``clip_norm``) nothing is held out: one pass.
* **The same output.** A streamed fit equals the in-memory fit with ``shuffle=False`` and the
  same seed (to rounding, at most; the draws are the same).
* **NaN and infinity.** Every block is checked as a pass reads it. The planned record is
  booked before the first pass; a non-finite entry stops the fit before anything is released
  (no fitted attribute is set), so the booking is withdrawn, wherever the entry lies.
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
