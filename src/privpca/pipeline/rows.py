"""What the pipeline hands the statistics: the validated table (:class:`Table`), the rows
prepared for a statistic (:class:`PreparedRows`: centred, scaled and clipped, formed lazily
from the source), the statistic's declaration (:class:`Statistic`) and the bound selection's
exact pilot Grams (:class:`PilotGrams`)."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from privpca._validation import (
    RowClippingWarning,
    bounded_rows,
    caller_stacklevel,
    fit_input,
)
from privpca.accounting.record import PrivacySpend
from privpca.exceptions import NonPrivatePreprocessingWarning
from privpca.solvers.gram import (
    clipped_blocks,
    gram_matrix,
)
from privpca.streaming import as_row_source, is_streamed
from privpca.streaming.interval_grams import clipped_grams
from privpca.streaming.reductions import (
    clipped_gram,
    clipped_product,
    projected_moments,
)
from privpca.streaming.sources import ArraySource

__all__ = ["PilotGrams", "PreparedRows", "Statistic", "Table", "validated_rows",
           "validated_table", "warn_if_standardised"]


@dataclass(frozen=True)
class Statistic:
    """What an estimator releases from the prepared rows, declared before the fit.

    Attributes
    ----------
    mechanism : str
        Human-readable description, e.g. ``"gaussian: packed upper triangle of XᵀX"``.
    sensitivity : callable
        ``D ↦ Δ``, the L2 sensitivity of one release for rows of norm ≤ D (replace one).
    count : int
        Releases (adaptively composed), e.g. T power iterations.
    kind : {"gaussian", "approx", "pure"}
        ``"gaussian"``: calibrated by the plan's noise multiplier. ``"approx"``/``"pure"``:
        given its own (ε, δ) (or pure ε) share and calibrated by the estimator.
    releases_spectrum : bool
        The statistic yields a noisy p×p matrix whose eigenvalues give the explained variance
        for free; otherwise the pipeline spends a small share on the variances.
    subspace_rank : int
        k for a statistic of the rows' second moment whose top-k subspace is the estimate:
        with ``data_norm="auto"`` (or ``"select"``) the bound is then chosen for the table by
        :mod:`privpca.pipeline.bound_selection` (up to its ``MAX_FEATURES``). Otherwise, and
        with ``"quantile"``, the bound is the private :data:`DEFAULT_NORM_QUANTILE` of the
        norms.
    pairable : bool
        The statistic may read the differences of row pairs in place of rows centred on a
        private mean, where :func:`~privpca.pipeline.budget.pairs_pay` says so (wide tables,
        :mod:`privpca.pipeline.pairing`).
    noise_multiplier : callable or None
        For an ``"approx"`` statistic whose noise is Gaussian but calibrated by the estimator
        (MOD-SuLQ): ``() ↦ σ/Δ``, public once the plan is made. The bound selection models
        the final release's noise with it (else with the plan's multiplier).
    """

    mechanism: str
    sensitivity: Callable[[float], float]
    count: int = 1
    kind: str = "gaussian"
    releases_spectrum: bool = False
    subspace_rank: int = 0
    pairable: bool = False
    noise_multiplier: Callable[[], float] | None = None


@dataclass
class PreparedRows:
    """Rows ready for the statistic, and what preprocessing released about them.

    The rows are ``clip_D((x − mean)/scale)``. When they differ from ``X`` they are formed
    lazily from ``source``: a Gram-based statistic asks for :meth:`gram` (one blocked pass, no
    copy of the table); an iterative one reads :attr:`rows` (one copy, made on first use).
    """

    stored_rows: NDArray[np.float64] | None
    data_norm: float
    mean: NDArray[np.float64] | None
    scale: NDArray[np.float64] | None
    n_clipped: int
    spends: list[PrivacySpend] = field(default_factory=list)
    details: dict[str, Any] = field(default_factory=dict)
    source: Any = None  # the table X (ndarray) or a privpca.streaming.RowSource
    warned_clipping: bool = field(default=False, repr=False)
    #: The released Σ y of the statistic's rows (held-out layout), and the mean it gives.
    centre_sum: NDArray[np.float64] | None = None
    reported_mean: NDArray[np.float64] | None = None

    @property
    def rows(self) -> NDArray[np.float64]:
        if self.stored_rows is None:
            if not isinstance(self.source, np.ndarray):
                raise ValueError("PreparedRows has neither rows nor a source to form them.")
            n, p = self.source.shape
            out = np.empty((n, p))
            start = 0
            for block, _ in clipped_blocks(self.source, None, self.mean, self.data_norm,
                                           scale=self.scale):
                out[start:start + block.shape[0]] = block
                start += block.shape[0]
            self.stored_rows = out
        return self.stored_rows

    def gram(self) -> NDArray[np.float64]:
        """``Σᵢ rowᵢ rowᵢᵀ`` (symmetric), without forming the rows when they are lazy.

        On a streamed source this is the statistic's pass; it counts the clipped rows, and
        with a public ``data_norm`` warns (after the charge) when any row was clipped.
        """
        if self.stored_rows is not None or self.source is None:
            return gram_matrix(self.rows)

        pilots = self.details.get("pilot_grams")
        kept = None if pilots is None else pilots.take(self.data_norm)
        if kept is not None:  # the same rows, centre, scale and bound: the same matrix
            gram, n_clipped = kept
            if not isinstance(self.source, np.ndarray):
                self.n_clipped = n_clipped
                self._warn_if_clipped()
            return gram
        if isinstance(self.source, np.ndarray):
            return clipped_gram(self._pass_source(), self.mean, self.scale, self.data_norm)[0]
        gram, self.n_clipped = clipped_gram(self.source, self.mean, self.scale, self.data_norm)
        self._warn_if_clipped()
        return gram

    def exact_gram(self) -> NDArray[np.float64]:
        """``Σᵢ rowᵢ rowᵢᵀ`` (a new array), leaving the statistic's clipping count and warning
        alone: a later part's private input. The bound selection's exact Gram at this bound
        where it kept one (then every kept Gram is forgotten), else one pass."""
        pilots = self.details.get("pilot_grams")
        kept = None if pilots is None else pilots.take(self.data_norm, last=True)
        if kept is not None:
            return kept[0].copy()
        if self.stored_rows is not None or self.source is None:
            return gram_matrix(self.rows)
        return clipped_gram(self._pass_source(), self.mean, self.scale, self.data_norm)[0]

    @property
    def streamed(self) -> bool:
        """Whether the rows live in a :class:`~privpca.streaming.RowSource` (read by passes)."""
        return self.stored_rows is None and self.source is not None and not isinstance(
            self.source, np.ndarray)

    def product(self, Q: NDArray[np.float64]) -> NDArray[np.float64]:
        """``Σᵢ rowᵢ(rowᵢᵀQ)``: on a streamed source one pass, without the p×p Gram."""
        if not self.streamed:
            rows = self.rows
            return np.asarray(rows.T @ (rows @ Q))

        out, self.n_clipped = clipped_product(self.source, self.mean, self.scale,
                                              self.data_norm, Q)
        self._warn_if_clipped()
        return out

    def projected_moments(
        self, components: NDArray[np.float64]
    ) -> tuple[NDArray[np.float64], float]:
        """``(Σᵢ (Vrowᵢ)(Vrowᵢ)ᵀ, Σᵢ ‖rowᵢ‖²)`` for ``V = components`` (k×p).

        Lazy rows of an in-memory table are not formed: one blocked pass, as on a stream.
        """
        if self.stored_rows is not None or self.source is None:
            rows = self.rows
            proj = rows @ components.T
            return proj.T @ proj, float(np.einsum("ij,ij->", rows, rows))

        return projected_moments(self._pass_source(), self.mean, self.scale, self.data_norm,
                                 components)

    def _pass_source(self) -> Any:
        """The lazy rows' source as block passes read it: an in-memory table (validated
        already) as an :class:`~privpca.streaming.ArraySource`, blocks on every core."""

        if isinstance(self.source, np.ndarray):
            return ArraySource(self.source, validated=True)
        return self.source

    def _warn_if_clipped(self) -> None:
        """With a public bound, one warning (after the charge) when any row was clipped."""
        if self.n_clipped and "clipped_estimate" not in self.details \
                and not self.warned_clipping:
            self.warned_clipping = True
            warnings.warn(
                f"Some rows had an L2 norm above data_norm={self.data_norm:g} and were clipped "
                "to it. The privacy guarantee holds; the estimate is biased.",
                RowClippingWarning, stacklevel=caller_stacklevel())

    @property
    def n_samples(self) -> int:
        return self._shape()[0]

    @property
    def n_features(self) -> int:
        return self._shape()[1]

    def _shape(self) -> tuple[int, int]:
        if self.stored_rows is not None:
            return self.stored_rows.shape
        if isinstance(self.source, np.ndarray):
            return self.source.shape
        return (int(self.source.n_samples), int(self.source.n_features))

    @property
    def centred(self) -> bool:
        return self.mean is not None


class PilotGrams:
    """The exact Grams ``Σ clip_c((x − mean)/scale)(…)ᵀ`` at the candidate bounds, over
    ``source``, in one pass; the one at the bound the rule chooses is kept for the statistic
    (:meth:`take`) when ``same_rows`` (the statistic reads the same rows with the same centre
    and scale), so on defaults the pilots cost no pass of their own beyond the statistic's.
    Never published: private values, held in memory until the statistic takes them."""

    def __init__(self, source: Any, mean: NDArray[np.float64] | None,
                 scale: NDArray[np.float64] | None, *, same_rows: bool) -> None:
        self.source, self.mean, self.scale, self.same_rows = source, mean, scale, same_rows
        self._kept: dict[float, tuple[NDArray[np.float64], int]] = {}

    def __call__(self, bounds: tuple[float, ...]) -> list[NDArray[np.float64]]:
        grams = clipped_grams(self.source, self.mean, self.scale, bounds)
        if self.same_rows:
            # The releases add noise to new arrays: these stay the exact statistics.
            self._kept = dict(zip(bounds, grams, strict=True))
        return [gram.copy() for gram, _ in grams]

    def take(self, bound: float, *, last: bool = False) -> tuple[NDArray[np.float64], int] | None:
        """The exact Gram at ``bound`` and its clipped-row count, once (then forgotten; with
        ``last``, every other kept Gram too). The statistic takes the chosen bound's, the
        "variance" part its reference's."""
        found = self._kept.pop(float(bound), None)
        if last:
            self._kept.clear()
        return found


@dataclass
class Table:
    """The validated input of a fit: an in-memory array with its squared row norms, or a
    streamed :class:`~privpca.streaming.RowSource` (validated block by block as it is read)."""

    X: NDArray[np.float64] | None
    sq: NDArray[np.float64] | None
    source: Any
    n_samples: int
    n_features: int

    @property
    def streamed(self) -> bool:
        return self.source is not None


def validated_table(owner: Any, X: Any) -> Table:
    """:func:`validated_rows` for an array; a :class:`RowSource` for anything streamed.

    A streamed table is checked as each pass reads it: a non-finite entry raises
    :class:`~privpca.exceptions.NonFiniteInputError` during the first pass, before anything
    is released, and the one fit withdraws its booking.

    A DataFrame whose column names mark an identifier (``id``, ``rownames``, ``Unnamed: 0``,
    …: :mod:`privpca._columns`, by the names alone) is refused with a ``ValueError``.
    """
    if not is_streamed(X):
        Xv, sq = validated_rows(owner, X)
        warn_if_standardised(owner, Xv, sq)
        return Table(Xv, sq, None, Xv.shape[0], Xv.shape[1])
    source = as_row_source(X)
    owner.n_features_in_ = source.n_features
    if hasattr(owner, "feature_names_in_"):
        del owner.feature_names_in_
    return Table(None, None, source, source.n_samples, source.n_features)


#: A column counts as standardised when ``|mean| ≤ STANDARDISED_MEAN_TOL·(1 + sd)`` and
#: ``|sd − 1| ≤ STANDARDISED_SD_TOL`` (:func:`warn_if_standardised`).
STANDARDISED_MEAN_TOL = 1e-9
STANDARDISED_SD_TOL = 1e-6


def warn_if_standardised(owner: Any, X: NDArray[np.float64],
                         sq: NDArray[np.float64] | None = None) -> None:
    """Warn when ``X`` looks standardised by a fitted, non-private transformer.

    ``Pipeline([StandardScaler(), privpca.PCA()])`` feeds the fit a table whose every column
    has mean 0 and standard deviation 1 to rounding: the scaler's means and standard
    deviations are exact statistics of the data, outside ``privacy_``. When every column's
    mean is 0 (``|mean| ≤ 1e-9·(1 + sd)``) and every column's standard deviation is 1 to
    ``1e-6`` (all with ddof 0, or all with ddof 1), this emits a
    :class:`~privpca.exceptions.NonPrivatePreprocessingWarning` pointing to ``scale=True``.

    Cheap: the squared row norms ``sq`` that the validation already computed give ``Σ‖x‖²/n``,
    which is ``p`` (ddof 0) or ``p(n − 1)/n`` (ddof 1) for a standardised table; without them
    the first column alone is tested (a strided read, a fraction of a pass). Only a table that
    passes gets the two column passes (means and second moments, without temporaries).
    Whether it fires depends on the data: a
    :class:`~privpca.exceptions.DataDependentWarning`, for the data holder only.

    Parameters
    ----------
    owner : estimator
        The estimator being fitted (named in the message).
    X : ndarray of shape (n_samples, n_features)
        The validated, finite rows.
    sq : ndarray of shape (n_samples,) or None, default=None
        Their squared norms, when the caller has them.
    """
    n, p = X.shape
    if n < 2 or p == 0:
        return
    if sq is not None:
        second = float(np.sum(sq)) / n
        slack = 4.0 * STANDARDISED_SD_TOL * p
        if min(abs(second - p), abs(second - p * (n - 1) / n)) > slack:
            return
    elif not _standardised(X[:, :1], n):  # a necessary condition, from one column
        return
    if not _standardised(X, n):
        return
    warnings.warn(
        f"{type(owner).__name__}: the input looks standardised by a fitted transformer "
        "(every column has mean 0 and standard deviation 1, as scikit-learn's StandardScaler "
        "leaves it). That transformer's means and standard deviations are exact statistics "
        "of the data, not private: whoever sees it or its output can learn them, and "
        "privacy_ covers only this estimator's own releases. Fit the raw table with "
        "scale=True instead (private per-feature scales inside the same (epsilon, delta); "
        "privpca.PCA: options={'scale': True}; privpca fit: --scale), or with scales fixed "
        "without looking at this table. (Whether this warning fires depends on the data: "
        "it is for the data holder only.)",
        NonPrivatePreprocessingWarning,
        stacklevel=caller_stacklevel(),
    )


def _standardised(X: NDArray[np.float64], n: int) -> bool:
    """Every column of ``X`` has mean 0 and standard deviation 1 (all ddof 0, or all ddof 1)."""
    with np.errstate(over="ignore", invalid="ignore"):  # huge rows: not standardised
        mean = X.mean(axis=0)
        var = np.maximum(np.einsum("ij,ij->j", X, X) / n - mean**2, 0.0)
    sd = np.sqrt(var)
    if np.any(np.abs(mean) > STANDARDISED_MEAN_TOL * (1.0 + sd)):
        return False
    return any(bool(np.all(np.abs(s - 1.0) <= STANDARDISED_SD_TOL))
               for s in (sd, np.sqrt(var * (n / (n - 1)))))


def validated_rows(owner: Any, X: ArrayLike) -> tuple[NDArray[np.float64],
                                                       NDArray[np.float64]]:
    """:func:`~privpca._validation.fit_input` and the squared row norms (which double as the
    non-finite check; :func:`~privpca._validation.bounded_rows`)."""
    return bounded_rows(fit_input(owner, X))
