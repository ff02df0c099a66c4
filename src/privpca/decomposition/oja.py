"""Oja's algorithm, the non-private reference (Liu, Kong, Jain & Oh 2022, Algorithm 1).

One pass over the records in a random order, to rank k by block Oja (``ThinQR`` in place of
the normalisation; Liu et al. treat k = 1 and leave k > 1 open, §7), by
:func:`privpca.solvers.oja.oja_steps`. Private Oja (Algorithm 2) is
:mod:`privpca.decomposition.private_oja`; what both share (inputs, the start, streamed tables)
is :mod:`privpca.decomposition._stochastic`.

:class:`OjaPCA` is not private (ε = ∞): its ``centering="private"`` subtracts the exact mean
(on a streamed table one more pass for it and one for the exact variances). A streamed table
(a Dask array, a memory map, Parquet or chunks) is read once, in its order, holding one block
and W; ``shuffle=False`` on an in-memory array reads it the same way, with the same output.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
from numpy.typing import NDArray

from privpca._validation import check_in_range, check_n_components
from privpca.accounting.ledger import PrivacyLedger
from privpca.accounting.record import PrivacyRecord
from privpca.decomposition._base import Release
from privpca.decomposition._constraints import (
    CENTERING,
    LEARNING_RATE,
    LEDGER,
    N_COMPONENTS,
    RANDOM_STATE,
    SHUFFLE,
    WHITEN,
    positive_int,
)
from privpca.decomposition._records import RecordStream
from privpca.decomposition._stochastic import (
    Mode,
    StochasticPCA,
    StreamInput,
    StreamPlan,
    StreamPrepared,
)
from privpca.pipeline.basis_error import rotate_component_spectrum
from privpca.pipeline.settings import check_centering
from privpca.solvers.eigen import fix_signs
from privpca.solvers.oja import (
    OJA_LEARNING_RATE,
    LearningRate,
    MatrixGradients,
    VectorGradients,
    block_oja_update,
    oja_steps,
    resolve_learning_rate,
)
from privpca.solvers.power import random_orthonormal_basis
from privpca.streaming.reductions import clipped_sum, projected_moments
from privpca.streaming.sources import RowSource

__all__ = ["OjaPCA"]

_IN_ORDER = " The records were read in the table's order (one pass)."
_NON_PRIVATE = "Non-private Oja's algorithm: no noise, no guarantee (an infinite spend)."
#: Records gathered per block of an in-memory pass (any cut gives the same iterate).
_CHUNK = 8192


@dataclass(frozen=True)
class _Steps:
    """Oja's schedule, records per step, and the centring of table mode (public)."""

    lr: LearningRate
    batch_size: int
    centering: Any


def _check_batch_size(value: Any, owner: object) -> int:
    return int(check_in_range(value, "batch_size", low=1, low_closed=True, integer=True,
                              owner=owner))


class OjaPCA(StochasticPCA):
    """Non-private Oja's algorithm (Liu et al., Algorithm 1), to rank k by block Oja.

    One pass over the records in a random order: ``W ← ThinQR(W + η_t·A_t W)`` with
    ``η_t = c1/(c2 + t)``; ``W₀`` is uniform on the Stiefel manifold. With ``batch_size = b``
    the gradient is the mean over b records per step (⌊n/b⌋ steps).

    Parameters
    ----------
    n_components : int, default=1
        Dimension k of the subspace.
    centering : "private", None or array of shape (n_features,), default="private"
        ``"private"``: subtract the **exact** mean first (this estimator is not private,
        ε = ∞, so nothing is gained by noise; the name matches the private estimators').
        ``None``: no centring, the papers' second moment ``E[x xᵀ]`` (their algorithm exactly). An
        array: that mean is subtracted.
    learning_rate : "auto", float or (float, float), default="auto"
        ``(c1, c2)`` of ``η_t = c1/(c2 + t)``; a float sets c1 only; ``"auto"`` is (2, 100),
        suited to data whose eigengap ``λ_k − λ_{k+1}`` is of order 1. Rescale c1 by
        ``1/scale`` when the data are scaled by ``√scale`` (e.g. rows normalised to unit
        norm in high dimension have small eigenvalues).
    batch_size : int, default=1
        Records per step (1 is Algorithm 1).
    shuffle : "auto" or bool, default="auto"
        Read the records in a uniformly random order (``"auto"``: for in-memory arrays) or
        in their order (``False``; ``"auto"`` for streamed tables, which ``True`` refuses).
        See :mod:`privpca.decomposition._stochastic` on streamed tables; ``batch_size``
        must be 1 on them.
    whiten : bool, default=False
        Divide the projections of :meth:`transform` by ``sqrt(explained_variance_)`` (and
        multiply them back in :meth:`inverse_transform`), as scikit-learn's ``PCA``:
        post-processing of released values; the fit is the same either way.
    random_state : None, int or numpy.random.Generator, default=None
        Source of the order of the records and of ``W₀``.
    ledger : PrivacyLedger or None, default=None
        Where the (infinite) spend is recorded; a budgeted ledger refuses it.

    Attributes
    ----------
    components_ : ndarray of shape (n_components, n_features)
        Orthonormal rows spanning the estimate; when centred, rotated within that span to the
        eigenvectors of the data's covariance restricted to it (decreasing variance).
    mean_ : ndarray of shape (n_features,)
        The mean subtracted (exact or public); zeros without centring.
    scale_ : None
    data_norm_ : float
        ``inf``: no norm bound is used.
    explained_variance_ : ndarray of shape (n_components,)
        Exact variance of the data along each component: over n − 1 when centred, the second
        moment (over n) when not, and the mean of ``v_lᵀA_i v_l`` for ``fit_matrices``
        (unordered in the papers' setting, whose basis is left as Oja returns it).
    explained_variance_ratio_ : ndarray of shape (n_components,)
        Over the exact total variance (trace), clipped to be feasible.
    noise_level_ : float
        0.0: no privacy noise.
    expected_error_ : float or None
        With a table: the Ky Fan bound ``√(2r/λ)`` on the distance to the exact PCA, from the
        exact variances (:func:`~privpca.pipeline.basis_error.component_error_bound`, no noise:
        deterministic). None in the papers' setting (the basis is not rotated to its
        variances there).
    n_iter_ : int
        Number of steps taken.
    learning_rate_ : LearningRate
        The schedule used.
    privacy_ : PrivacyRecord
        ε = ∞: non-private (a budgeted ledger refuses it).
    n_features_in_ : int

    References
    ----------
    E. Oja. Simplified neuron model as a principal component analyzer. J. Math. Biology, 1982.
    P. Jain et al. Streaming PCA: matching matrix Bernstein and near-optimal finite sample
    guarantees for Oja's algorithm. COLT 2016.

    Examples
    --------
    >>> from privpca import OjaPCA
    >>> from privpca.datasets import make_spiked
    >>> X, V = make_spiked(20_000, 10, 1, lam=9.0, random_state=0)
    >>> OjaPCA(random_state=0).fit(X).components_.shape
    (1, 10)
    """

    _parameter_constraints: ClassVar[dict[str, list[Any]]] = {
        "n_components": N_COMPONENTS,
        "centering": CENTERING,
        "learning_rate": LEARNING_RATE,
        "batch_size": positive_int(),
        "shuffle": SHUFFLE,
        "random_state": RANDOM_STATE,
        "ledger": LEDGER,
        "whiten": WHITEN,
    }

    def __init__(
        self,
        n_components: int = 1,
        *,
        centering: Any = "private",
        learning_rate: Any = "auto",
        batch_size: int = 1,
        shuffle: Any = "auto",
        whiten: bool = False,
        random_state: Any = None,
        ledger: PrivacyLedger | None = None,
    ) -> None:
        self.n_components = n_components
        self.centering = centering
        self.learning_rate = learning_rate
        self.batch_size = batch_size
        self.shuffle = shuffle
        self.whiten = whiten
        self.random_state = random_state
        self.ledger = ledger

    # ------------------------------------------------------------------ the one fit's steps
    def _papers_plan(self, data: StreamInput) -> StreamPlan:
        return self._oja_plan(data, None)

    def _table_plan(self, data: StreamInput) -> StreamPlan:
        """Centred on the exact (or public) mean: no held-out share (nothing is private)."""
        return self._oja_plan(data, check_centering(self.centering, data.n_features, self))

    def _oja_plan(self, data: StreamInput, centering: Any) -> StreamPlan:
        """Algorithm 1's schedule and batches; the (infinite) spend of a non-private fit."""
        k = check_n_components(self.n_components, data.n_features, owner=self)
        lr = resolve_learning_rate(self.learning_rate, OJA_LEARNING_RATE, owner="OjaPCA")
        b = _check_batch_size(self.batch_size, self)
        if data.mode.streamed and b != 1:
            raise ValueError("OjaPCA streams one record per step: use batch_size=1 on a "
                             "streamed table (or shuffle=True on an in-memory array).")
        notes = (_NON_PRIVATE + (_IN_ORDER if data.mode.streamed or not data.shuffle else "")
                 + ("" if data.mode.papers else _centering_note(centering)))
        return StreamPlan(planned=PrivacyRecord.non_private(data.n_samples, notes),
                          mode=data.mode, k=k, shuffle=data.shuffle,
                          stream=_Steps(lr, b, centering))

    def _prepare_table(self, plan: StreamPlan, data: StreamInput,
                       pre_rng: np.random.Generator) -> StreamPrepared:
        """The exact (or public) mean; an in-memory table is centred, a streamed one is
        read minus it (one pass for the exact mean)."""
        centering = plan.stream.centering
        if data.mode is Mode.TABLE:
            X = data.table
            mean = X.mean(axis=0) if isinstance(centering, str) else centering
            Xc = X - mean
            return StreamPrepared(VectorGradients(Xc), source=Xc, centre=mean)
        source = data.table
        if isinstance(centering, str):
            mean = clipped_sum(source, None, math.inf) / source.n_samples  # none clipped at inf
        else:
            mean = np.asarray(centering, dtype=np.float64)
        return StreamPrepared(RecordStream.streamed(source, centre=mean), source=source,
                              centre=mean)

    def _release_papers(self, plan: StreamPlan, records: Any,
                        rng: np.random.Generator) -> None:
        """Algorithm 1 over ``records`` as given; a streamed :class:`RecordStream` is read
        once, in its order (one record per step)."""
        lr, b = plan.stream.lr, plan.stream.batch_size
        W = random_orthonormal_basis(records.n_features, plan.k, rng)
        streamed = isinstance(records, RecordStream) and records.is_streamed
        n = records.n_samples
        order = None if streamed else (rng.permutation(n) if plan.shuffle else np.arange(n))
        if b == 1 and isinstance(records, VectorGradients | RecordStream):
            stream = records if isinstance(records, RecordStream) else RecordStream(records.X)
            W, steps = oja_steps(stream.blocks(order, _CHUNK), n, W, lr)
        else:
            assert order is not None
            steps = n // b
            for t in range(1, steps + 1):
                idx = order[(t - 1) * b : t * b]
                W = block_oja_update(W, lr(t) * records.mean_gradient(idx, W))
        self.components_ = fix_signs(W).T.copy()
        self.n_iter_ = steps
        self.learning_rate_ = lr

    def _release_table(self, plan: StreamPlan, prepared: StreamPrepared,
                       rng: np.random.Generator, pre_rng: np.random.Generator) -> Release:
        """The same pass as the papers' Oja on the centred rows, then the exact ``VᵀCV``
        (one more pass over a streamed table)."""
        self._release_papers(plan, prepared.records, rng)
        source = prepared.source
        n = source.n_samples if isinstance(source, RowSource) else source.shape[0]
        denom = max(n - 1, 1)
        if isinstance(source, RowSource):
            matrix, total = projected_moments(source, prepared.centre, None, math.inf,
                                              self.components_)
        else:
            proj = source @ self.components_.T
            matrix, total = proj.T @ proj, float(np.einsum("ij,ij->", source, source))
        self._set_exact_spectrum(matrix / denom, total / denom, prepared.centre)
        return Release(final=plan.planned)

    def _paper_variances(
        self, source: Any
    ) -> tuple[NDArray[np.float64], float] | None:
        values, total = _exact_variances(source, self.components_)
        n = source.n_samples
        return values / n, total / n

    def _set_exact_spectrum(self, matrix: NDArray[np.float64], total: float,
                            mean: Any) -> None:
        """Rotate the basis to the eigenvectors of the exact ``VᵀCV`` (free: not private).

        ``expected_error_`` is the Ky Fan bound with no noise
        (:func:`~privpca.pipeline.basis_error.component_error_bound`): the residual variance over
        the smallest component variance, deterministic.
        """
        spectrum = rotate_component_spectrum(self.components_, (matrix, total))
        self.components_ = spectrum.components
        self.explained_variance_ = spectrum.explained_variance
        self.explained_variance_ratio_ = spectrum.explained_variance_ratio
        self.expected_error_ = spectrum.expected_error
        self.mean_ = np.asarray(mean, dtype=np.float64).copy()
        self.scale_ = None
        self.data_norm_ = math.inf
        self.noise_level_ = 0.0

    def _paper_noise_level(self) -> float:
        return 0.0


def _centering_note(centering: Any) -> str:
    """The record's note on the centring (the exact mean, or a public one)."""
    return (" The rows were centred on their exact mean (non-private)."
            if isinstance(centering, str) else " A public mean was subtracted first.")


def _exact_variances(
    source: Any, components: NDArray[np.float64]
) -> tuple[NDArray[np.float64], float]:
    """``(Σᵢ v_lᵀA_i v_l per component, Σᵢ tr A_i)`` — exact, for the non-private Oja."""
    if isinstance(source, RowSource):  # one pass over a streamed table
        matrix, total = projected_moments(source, None, None, math.inf, components)
        return np.diag(matrix).copy(), total
    if isinstance(source, VectorGradients):
        proj = source.X @ components.T
        return (proj * proj).sum(axis=0), float(np.einsum("ij,ij->", source.X, source.X))
    assert isinstance(source, MatrixGradients)
    AV = np.matmul(source.A, components.T)  # (n, p, k)
    values = np.einsum("lp,npl->l", components, AV)
    return values, float(np.einsum("nii->", source.A))
