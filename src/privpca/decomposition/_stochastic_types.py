"""The streaming estimators' inputs, modes and plans: the data classes a fit passes along.

:class:`Mode` is the way through a fit, :class:`StreamInput` its checked input,
:class:`StreamPlan` (with table mode's :class:`HeldOutSplit`) what is fixed before the data
are read, :class:`StreamPrepared`, :class:`HeldOutRelease` and :class:`StreamRun` what the
passes produce. :mod:`privpca.decomposition._stochastic` describes the modes.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Any

import numpy as np
from numpy.typing import NDArray

from privpca.accounting.record import PrivacySpend
from privpca.decomposition._base import Plan
from privpca.pipeline.release import ReleasePipeline
from privpca.pipeline.rows import PreparedRows

__all__ = [
    "HeldOutRelease",
    "HeldOutSplit",
    "Mode",
    "StreamInput",
    "StreamPlan",
    "StreamPrepared",
    "StreamRun",
]


class Mode(Enum):
    """The way through a streaming fit (:mod:`privpca.decomposition._stochastic`)."""

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
    held-out share's (:func:`~privpca.decomposition._stochastic_holdout.held_out_notes`)."""

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

