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
  records, the whole (ε, δ) on the stream, bitwise what privpca did before the release pipeline.
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
from collections.abc import Mapping
from dataclasses import dataclass, replace
from enum import Enum
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray
from sklearn.base import _fit_context

from privpca._validation import (
    check_in_range,
    check_n_components,
    fit_input,
    refuse_non_finite,
)
from privpca.accounting.neighbouring import Neighbouring
from privpca.accounting.record import PrivacyRecord, PrivacySpend
from privpca.decomposition._base import BasePrivatePCA, Plan, Release
from privpca.decomposition._records import RecordStream, table_records
from privpca.mechanisms.shuffling import secret_permutation
from privpca.pipeline.budget import DEFAULT_SHARES, PART_NAMES
from privpca.pipeline.preprocessing import BoundNotFoundError
from privpca.pipeline.release import MAX_SEARCH_SHARE, ReleasePipeline
from privpca.pipeline.rows import (
    PreparedRows,
    Statistic,
    validated_table,
    warn_if_standardised,
)
from privpca.pipeline.settings import PipelineSettings, check_centering
from privpca.pipeline.spectrum import feasible_spectrum
from privpca.solvers.eigen import fix_signs
from privpca.solvers.oja import MatrixGradients, VectorGradients, check_matrices
from privpca.streaming import ArraySource, is_streamed
from privpca.streaming.holdout import held_out_size, random_row_split
from privpca.streaming.selection import drop_rows, take_rows
from privpca.streaming.sources import RowSource

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

#: Default share of the records held out for the mean, the bound and the explained variance.
DEFAULT_HOLDOUT_FRACTION = 0.1
#: Default relative weights of the held-out parts: the release pipeline's own default shares
#: (:data:`privpca.pipeline.budget.DEFAULT_SHARES`), normalised over the parts in use, so the
#: held-out records' whole (ε, δ) is split in the proportions a one-shot fit would use.
HOLDOUT_SHARES: Mapping[str, float] = DEFAULT_SHARES
_HELD = " [held-out records]"


class Mode(Enum):
    """The way through a streaming fit (module docstring)."""

    #: The papers' algorithm on in-memory records (vectors, or ``fit_matrices``' matrices).
    PAPERS = "papers"
    #: The papers' algorithm in one pass over a streamed table, in its order.
    PAPERS_STREAM = "papers, streamed"
    #: Table mode on an in-memory array read in a uniformly random order.
    TABLE = "table"
    #: Table mode on a streamed table (or an array read in its order, ``shuffle=False``).
    TABLE_STREAM = "table, streamed"

    @property
    def papers(self) -> bool:
        return self in (Mode.PAPERS, Mode.PAPERS_STREAM)

    @property
    def streamed(self) -> bool:
        """Whether the stream reads a :class:`~privpca.streaming.RowSource` in its order."""
        return self in (Mode.PAPERS_STREAM, Mode.TABLE_STREAM)


@dataclass(frozen=True)
class StreamInput:
    """The checked input of a streaming fit (:meth:`StochasticPCA._validate`).

    Attributes
    ----------
    mode : Mode
    table : VectorGradients, MatrixGradients, RowSource or ndarray
        The records of :attr:`Mode.PAPERS`, the source of a streamed mode, the array of
        :attr:`Mode.TABLE`.
    shuffle : bool
        Whether in-memory records are read in a uniformly random order.
    """

    mode: Mode
    table: Any
    shuffle: bool

    @property
    def n_samples(self) -> int:
        return int(self.table.shape[0] if isinstance(self.table, np.ndarray)
                   else self.table.n_samples)

    @property
    def n_features(self) -> int:
        return int(self.table.shape[1] if isinstance(self.table, np.ndarray)
                   else self.table.n_features)


@dataclass(frozen=True)
class HeldOutSplit:
    """Table mode's plan for the held-out share: sizes, centring, its pipeline, its (ε, δ)."""

    n: int
    n_held: int
    m: int
    pairs: bool
    centering: Any
    run: ReleasePipeline
    epsilon: float
    delta: float
    calibration: str


@dataclass(kw_only=True)
class StreamPlan(Plan):
    """A streaming fit's plan, made from public quantities before the data are read.

    Attributes
    ----------
    mode : Mode
    k : int
        The validated number of components.
    shuffle : bool
        Whether in-memory records are read in a uniformly random order.
    stream : object
        The estimator's own calibrated stream (schedule, noise, minibatches).
    split : HeldOutSplit or None
        The held-out share of table mode (Private Oja, DP-PCA).
    """

    mode: Mode
    k: int
    shuffle: bool
    stream: Any
    split: HeldOutSplit | None = None


@dataclass
class StreamPrepared:
    """What the stream reads (``records``), and what the fit keeps beside it.

    ``source`` is the input the papers' attributes are computed from, ``held`` the held-out
    share's releases (table mode), ``centre`` what the stream's records are centred on.
    """

    records: Any
    source: Any = None
    held: HeldOutRelease | None = None
    centre: Any = None


@dataclass
class StreamRun:
    """A table-mode stream's outcome: its basis, spend and the record's notes around the
    held-out share's (:func:`held_out_notes`)."""

    W: NDArray[np.float64]
    spend: PrivacySpend
    notes: str
    tail: str = ""


@dataclass
class HeldOutRelease:
    """What the held-out share released (all of it free to inspect)."""

    prepared: PreparedRows
    run: ReleasePipeline

    def stream_centre(self, centering: Any) -> Any:
        """What the stream's records are centred on: the released mean (``"private"``), the
        public one (an array) or nothing (None)."""
        return self.prepared.mean if isinstance(centering, str) else centering


class StochasticPCA(BasePrivatePCA):
    """Base class: the one fit's steps for a stream of records.

    :meth:`_validate` says which :class:`Mode` a fit takes; the papers' modes call the
    estimator's :meth:`_papers_plan` and :meth:`_release_papers`; table mode runs the shared
    held-out share around the estimator's :meth:`_table_stream_plan` and :meth:`_table_stream`
    (Private Oja, DP-PCA; the non-private Oja overrides it with the exact mean).
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

    @_fit_context(prefer_skip_nested_validation=True)
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

    def _table_stream_plan(self, m: int, p: int, *, pairs: bool,
                           streamed: bool) -> tuple[Any, PrivacySpend, str]:
        """Table mode: calibrate the stream over m records; ``(stream, planned spend,
        calibration)``."""
        raise NotImplementedError

    def _table_stream(self, plan: StreamPlan, records: Any, held: HeldOutRelease,
                      rng: np.random.Generator) -> StreamRun:
        """Table mode: run the stream over ``records`` (after the held-out share's
        preprocessing); set the stream's own attributes."""
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

    def _table_checks_finite(self) -> bool:
        """Whether table mode refuses NaN/inf in ``X`` itself: the held-out rows before their
        preprocessing, the stream's rows by passes that read them anyway, before each
        release."""
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

    # ------------------------------------------------------------------ table mode
    def _table_plan(self, data: StreamInput) -> StreamPlan:
        """The held-out share's pipeline and the stream over the rest; the planned record
        lists every held-out part and the stream's event (before the data are read)."""
        n, p = data.n_samples, data.n_features
        k = check_n_components(self.n_components, p, owner=self)
        epsilon, delta = float(self.epsilon), float(self.delta)  # declared: checked
        centering = check_centering(getattr(self, "centering", None), p, self)
        n_held, m, pairs = self._split(n, centering)
        run = self._held_out_pipeline(n_held, p, epsilon, delta, centering,
                                      Neighbouring.REPLACE_ONE_CENTRAL)
        # Refuses (before any charge) what the stream cannot guarantee on m records.
        stream, spend, calibration = self._table_stream_plan(m, p, pairs=pairs,
                                                             streamed=data.mode.streamed)
        calibration += "; held-out parts: analytic Gaussian, exact split (dp-accounting)"
        split = HeldOutSplit(n, n_held, m, pairs, centering, run, epsilon, delta, calibration)
        planned = self._table_record(self._planned_spends(run), spend, split,
                                     data_norm=math.nan, notes="planned before the fit")
        return StreamPlan(planned=planned, mode=data.mode, k=k, shuffle=data.shuffle,
                          stream=stream, split=split)

    def _prepare_table(self, plan: StreamPlan, data: StreamInput,
                       pre_rng: np.random.Generator) -> StreamPrepared:
        """The held-out share (drawn from the preprocessing's stream) and its releases; the
        records of the stream over the rest.

        An array's held-out rows are the first of a public random permutation and the stream
        reads the rest in place, in that order (pair differences form a table of their own);
        a streamed table's are a secret random set of rows, gathered in one pass
        (:meth:`_split_streamed`).
        """
        split = plan.split
        assert split is not None
        if data.mode.streamed:
            held, records = self._split_streamed(split.run, data.table, split.n_held,
                                                 split.pairs, split.centering, pre_rng)
            return StreamPrepared(records, held=held)
        X = data.table
        # In memory, the fit's own passes refuse NaN/inf (_table_checks_finite): the held-out
        # rows here, before their preprocessing; the stream's by its compiled passes.
        verify = not split.pairs and self._table_checks_finite()
        perm = secret_permutation(split.n, pre_rng)
        held_rows = X[perm[: split.n_held]]
        if verify:
            refuse_non_finite(held_rows, "X")
        held = self._prepare_held_out(split.run, held_rows, pre_rng)
        del held_rows
        records = table_records(X, perm[split.n_held:], split.pairs,
                                held.stream_centre(split.centering), verify=verify)
        return StreamPrepared(records, held=held)

    def _release_table(self, plan: StreamPlan, prepared: StreamPrepared,
                       rng: np.random.Generator, pre_rng: np.random.Generator) -> Release:
        """The stream, then the held-out "variance" part; the record of every part."""
        split, held = plan.split, prepared.held
        assert split is not None and held is not None
        run = self._table_stream(plan, prepared.records, held, rng)
        prepared.records = None  # the stream's table is not needed any more
        self._set_table_attributes(fix_signs(run.W).T.copy(), held, pre_rng)
        notes = (run.notes + held_out_notes(split.n, split.n_held, split.m, split.pairs,
                                            split.centering, split.run,
                                            in_order=plan.mode.streamed)
                 + run.tail)
        return Release(final=self._table_record(held.prepared.spends, run.spend, split,
                                                data_norm=held.prepared.data_norm,
                                                notes=notes))

    def _holdout_fraction(self) -> float:
        return float(getattr(self, "holdout_fraction", DEFAULT_HOLDOUT_FRACTION))

    def _holdout_weights(self, active: tuple[str, ...]) -> dict[str, float]:
        """``budget_shares`` merged into :data:`HOLDOUT_SHARES`, normalised over ``active``."""
        shares = getattr(self, "budget_shares", None)
        name = type(self).__name__
        weights = dict(HOLDOUT_SHARES)
        for part, value in (shares or {}).items():
            if part not in HOLDOUT_SHARES:
                raise ValueError(
                    f"The 'budget_shares' parameter of {name} has an unknown part {part!r}; "
                    f"the parts are {sorted(HOLDOUT_SHARES)}."
                )
            weights[part] = check_in_range(value, f"budget_shares[{part!r}]", low=0.0,
                                           owner=self)
        used = {part: weights[part] for part in active}
        total = sum(used.values())
        return {part: w / total for part, w in used.items()}

    def _split(self, n: int, centering: Any) -> tuple[int, int, bool]:
        """``(n_held, m, pairs)``: held-out size, stream size, whether pairs are formed.

        ``n_held = ⌈holdout_fraction·n⌉`` (:func:`~privpca.streaming.holdout.held_out_size`,
        in memory and streamed alike)."""
        frac = self._holdout_fraction()
        n_held = held_out_size(n, frac)
        mode = getattr(self, "stream_centering", "mean")
        if mode not in ("mean", "pairs"):
            raise ValueError(
                f"The 'stream_centering' parameter of {type(self).__name__} must be a str "
                f"among ['mean', 'pairs']. Got {mode!r} instead."
            )
        pairs = isinstance(centering, str) and mode == "pairs"
        rest = n - n_held
        m = rest // 2 if pairs else rest
        if n_held < 2 or m < 2:
            raise ValueError(
                f"{type(self).__name__} holds out {n_held} of n_samples={n} records "
                f"(holdout_fraction={frac:g}) and streams {m} "
                f"{'pair differences' if pairs else 'records'}; both need at least 2. Use "
                "more data, or centering=None for the papers' uncentred setting."
            )
        return n_held, m, pairs

    def _held_out_pipeline(
        self, n_held: int, p: int, epsilon: float, delta: float, centering: Any,
        neighbouring: Neighbouring,
    ) -> ReleasePipeline:
        """The held-out share's pipeline; its last Gaussian part is the variance release.

        The pipeline decides the preprocessing parts (from ``centering`` and
        ``data_norm="auto"``); the held-out records have no statistic of their own, so the
        plan's "statistic" share is the "variance" part (``VᵀGV`` and ``tr G``, Δ = √2·D²):
        the held-out (ε, δ) is split exactly among the parts that run, nothing is left over.
        """
        statistic = Statistic("gaussian: packed VᵀGV and tr G of the held-out rows",
                              lambda D: math.sqrt(2.0) * D**2, releases_spectrum=True)
        # The held-out rows' own settings: a private bound, no scales; shares set below.
        held = PipelineSettings(epsilon=epsilon, delta=delta, centering=centering,
                                data_norm="auto", scale=False)
        try:  # the searches' public check: refused before anything is charged
            probe = ReleasePipeline(self, held, n_held, p, statistic, model="central",
                                    neighbouring=neighbouring)
            weights = self._holdout_weights((*probe.active, "variance"))
            shares = {part: weights[part] for part in probe.active}
            for _ in range(3):  # few held-out rows: raise the searches' shares (public n)
                held = replace(held, budget_shares=shares)
                run = ReleasePipeline(self, held, n_held, p, statistic, model="central",
                                      neighbouring=neighbouring)
                short = run._short_searches(run.plan, run.held_plan)
                for part, search in short:
                    need = (search.min_records() / search.n_records) ** 2 * 1.02
                    shares[part] = min(shares[part] * need, MAX_SEARCH_SHARE)
            run.check_rows()
        except BoundNotFoundError as exc:
            raise BoundNotFoundError(
                f"{type(self).__name__} holds out {n_held} records (holdout_fraction="
                f"{self._holdout_fraction():g}) for its private mean, bound and explained "
                f"variance; its private norm quantiles need at least {exc.needed} at "
                f"epsilon={epsilon:g}, delta={delta:g}. Nothing was charged. Raise "
                "holdout_fraction, use more data or a larger epsilon, or use the papers' "
                f"setting ({self._papers_setting()}).", rows=n_held, needed=exc.needed
            ) from exc
        parts = {name: b for name, b in run.plan.parts.items() if name != "statistic"}
        parts["variance"] = replace(run.plan.parts["statistic"], name="variance")
        run.plan = replace(run.plan, parts=parts)
        return run

    @staticmethod
    def _planned_spends(run: ReleasePipeline) -> list[PrivacySpend]:
        """The held-out parts' spends as booked (events known before the data are read)."""
        return [run._spend(part, f"planned{_HELD}", math.nan, math.nan)
                for part in PART_NAMES if part in run.plan]

    def _papers_setting(self) -> str:
        """The parameters of the papers' setting, for the errors that suggest it."""
        return "centering=None" + (", a numeric clip_norm" if hasattr(self, "clip_norm")
                                   else "")

    def _prepare_held_out(
        self, run: ReleasePipeline, rows: NDArray[np.float64] | RowSource,
        rng: np.random.Generator
    ) -> HeldOutRelease:
        """The held-out share's preprocessing releases on its ``rows`` (an array, or a
        :class:`~privpca.streaming.RowSource` read by block passes)."""
        # the rows' norms only where the path needs them
        prepared = (run.prepare_streamed(rows, rng) if isinstance(rows, RowSource)
                    else run.prepare(rows, rng))
        return HeldOutRelease(prepared, run)

    def _split_streamed(
        self, run: ReleasePipeline, table: RowSource, n_held: int, pairs: bool,
        centering: Any, rng: np.random.Generator,
    ) -> tuple[HeldOutRelease, RecordStream]:
        """A streamed table's held-out share, released, and the stream of its other rows.

        The held-out rows are a secret, uniformly random set of single rows (whatever the
        storage order, module docstring), gathered in one pass; the stream reads the other
        rows in order (their pair differences, or minus the released or public centre) when
        it is read."""
        split = random_row_split(table.n_samples, self._holdout_fraction(), rng)
        assert split.n_held == n_held
        held = self._prepare_held_out(run, take_rows(table, split.held), rng)
        centre = None if pairs else held.stream_centre(centering)
        return held, RecordStream.streamed(drop_rows(table, split.held), pairs=pairs,
                                           centre=centre)

    @staticmethod
    def _table_record(spends: list[PrivacySpend], statistic: PrivacySpend, split: HeldOutSplit,
                      *, data_norm: float, notes: str) -> PrivacyRecord:
        """Table mode's one record: every held-out part's spend, then the stream's."""
        held = [replace(s, mechanism=s.mechanism if s.mechanism.endswith(_HELD)
                        else s.mechanism + _HELD) for s in spends]
        stat = replace(statistic, mechanism=statistic.mechanism
                       if statistic.mechanism.startswith("statistic: ")
                       else f"statistic: {statistic.mechanism}")
        return PrivacyRecord(
            epsilon=float(split.epsilon),
            delta=float(split.delta),
            model="central",
            neighbouring=Neighbouring.REPLACE_ONE_CENTRAL.description,
            sensitivity=stat.sensitivity,
            noise_scale=stat.noise_scale,
            calibration=split.calibration,
            data_norm=float(data_norm),
            n_samples=int(split.n),
            n_clipped=0,
            spends=(*held, stat),
            target_epsilon=float(split.epsilon),
            notes=notes,
        )

    def _set_table_attributes(
        self, components: NDArray[np.float64], held: HeldOutRelease, rng: np.random.Generator
    ) -> None:
        """The "variance" part, then components rotated to its eigenvectors, and mean_ etc.

        :meth:`ReleasePipeline.rotate_to_spectrum` releases ``VᵀGV`` and ``tr G`` of the
        held-out rows (centred, clipped to D) with noise of sensitivity √2·D²; its eigenvectors
        rotate the stream's basis into ordered components (post-processing: the span is the
        stream's) and its eigenvalues are their variances.
        """
        spectrum = held.run.rotate_to_spectrum(held.prepared, components, rng)
        self.components_ = spectrum.components
        self.explained_variance_ = spectrum.explained_variance
        self.explained_variance_ratio_ = spectrum.explained_variance_ratio
        self.expected_error_ = spectrum.expected_error
        self._set_preprocessing(held.prepared)


def held_out_notes(n: int, n_held: int, m: int, pairs: bool, centering: Any,
                   run: ReleasePipeline, *, in_order: bool = False) -> str:
    """The part of a table-mode record's notes that explains the split and the centring."""
    shares = ", ".join(f"{name} {p.weight:.3g}" for name, p in run.plan.parts.items())
    order = "in the table's order" if in_order else "in a uniformly random order"
    chosen = ("a uniformly random set of rows drawn secretly from the estimator's generator, "
              "independently of the data and of the row order" if in_order
              else "chosen by a data-independent random permutation")
    if pairs:
        centering_note = (
            f"Centring by pair differences: the other {n - n_held} records, {order}, "
            f"give m={m} derived records (x_a - x_b)/√2 "
            "(mean zero, covariance Σ); each record enters one pair, so replacing "
            "one record replaces at most one derived record: the stream's guarantee "
            "on m records carries over unchanged.")
    elif isinstance(centering, str):
        centering_note = (
            f"Centred on the held-out private mean: the stream reads the other {m} "
            "records minus a value released from disjoint records (free for them).")
    elif centering is None:
        centering_note = f"No centring: the stream reads the other {m} records as given."
    else:
        centering_note = (
            f"Public mean subtracted (free): the stream reads the other {m} records.")
    return (
        f"Parallel composition over disjoint records: {n_held} of n={n} records ({chosen}) "
        "are held out and released at the full "
        f"(epsilon, delta) through the release pipeline's Gaussian parts, split exactly "
        f"(shares of 1/m²: {shares}); the stream runs at the full (epsilon, delta) on the "
        f"rest. {centering_note} A ledger composing this fit with others treats the held-out "
        "events and the stream's as sequential (conservative)."
        + (" Assumption of a streamed fit: the stream reads the rest in the table's storage "
           "order, its minibatches fixed by position, so its guarantee is for replacing the "
           "record at a position; that is replace-one only if the row order does not depend "
           "on the values (a table sorted by a feature does: shuffle it first, or fit it in "
           "memory, where the order is a secret random permutation)." if in_order else "")
    )
