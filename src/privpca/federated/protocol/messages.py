"""The protocol's messages and replies, and a provider's validation of what it receives.

The server sends :class:`MeanQuery`, :class:`PrepareMessage`, :class:`Query` and
:class:`VarianceQuery`; a provider answers with :class:`MeanReply`, :class:`PrepareReply`,
:class:`Reply` and :class:`VarianceReply`. :func:`validate_query` and :func:`validate_vector`
turn what arrives into real float64/intp arrays or raise :class:`QueryRefusedError` (a
provider computes with the returned arrays, never with the caller's).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from privpca.exceptions import ProviderDropoutError, QueryRefusedError

__all__ = [
    "MeanQuery",
    "MeanReply",
    "PrepareMessage",
    "PrepareReply",
    "ProviderDropoutError",
    "Query",
    "QueryRefusedError",
    "Reply",
    "VarianceQuery",
    "VarianceReply",
    "validate_query",
]

#: Largest deviation of QᵀQ from I that a provider accepts (rounding of a ThinQR is ~1e-15).
ORTHONORMALITY_TOL = 1e-8


@dataclass(frozen=True)
class Query:
    """"Multiply your covariance by Q": ``Q`` given by its row support and its non-zero block.

    Attributes
    ----------
    round : int
        1-based round number t (informational; the provider counts releases itself).
    support : ndarray of int of shape (m,)
        Sorted indices of the non-zero rows of Q (m = ŝ after thresholding, d for a dense Q).
    block : ndarray of shape (m, k)
        ``Q[support]``; orthonormal columns.
    n_features : int
        d.
    """

    round: int
    support: NDArray[np.intp]
    block: NDArray[np.float64]
    n_features: int

    @classmethod
    def from_dense(cls, Q: NDArray[np.float64], round: int = 0) -> Query:
        """The query for a dense ``(d, k)`` Q (its exactly-zero rows are left out)."""
        Q = np.asarray(Q, dtype=np.float64)
        support = np.flatnonzero(np.any(Q != 0.0, axis=1))
        return cls(round=int(round), support=support, block=Q[support].copy(),
                   n_features=int(Q.shape[0]))

    def to_dense(self) -> NDArray[np.float64]:
        """Q as a ``(d, k)`` array."""
        Q = np.zeros((self.n_features, self.block.shape[1]))
        Q[self.support] = self.block
        return Q


@dataclass(frozen=True)
class Reply:
    """A provider's noised answer ``Hᵢ = Σ̂ᵢQ + Gᵢ/nᵢ`` and its public ``nᵢ``."""

    provider_id: str
    round: int
    n_samples: int
    product: NDArray[np.float64]


@dataclass(frozen=True)
class MeanQuery:
    """"Release your noisy clipped sum around ``centre``" (round 1 or 2 of the private mean).

    Attributes
    ----------
    round : int
        1 (bound on ‖x − c‖, first estimate) or 2 (bound on the residuals, refinement).
    centre : ndarray of shape (n_features,)
        The public centre c (zeros in round 1, the first estimate in round 2).
    """

    round: int
    centre: NDArray[np.float64]


@dataclass(frozen=True)
class MeanReply:
    """A provider's private bound ``Rᵢ`` and noisy clipped sum, sent as ``Sᵢ/nᵢ``."""

    provider_id: str
    round: int
    n_samples: int
    bound: float
    mean: NDArray[np.float64]


@dataclass(frozen=True)
class PrepareMessage:
    """"Centre on this mean, bound and clip your rows" (``mean`` None: no centring;
    ``data_norm``: the bound opened by a secure run, else None)."""

    mean: NDArray[np.float64] | None
    data_norm: float | None = None


@dataclass(frozen=True)
class CountQuery:
    """Secure runs: "share your count of rows with ``‖x − c‖ < GRID_BASE^edge``", one round
    of the noisy bisection of budget part ``part`` (``centre`` None: norms of the raw rows)."""

    part: str
    centre: NDArray[np.float64] | None
    edge: int


@dataclass(frozen=True)
class SumQuery:
    """Secure runs: "share your ``Σ clip_R(x − c)``" (round ``round`` of the private mean)."""

    round: int
    centre: NDArray[np.float64]
    bound: float


@dataclass(frozen=True)
class PrepareReply:
    """The bound ``Dᵢ`` a provider's power answers use (released, or its public D).

    ``clipped_estimate`` is the private estimate of its clipped rows read off the bound's noisy
    counts (free), NaN with a public bound.
    """

    provider_id: str
    n_samples: int
    data_norm: float
    clipped_estimate: float = math.nan


@dataclass(frozen=True)
class VarianceQuery:
    """"Release the variances of your prepared rows along these components"."""

    components: Query


@dataclass(frozen=True)
class VarianceReply:
    """Noisy packed upper triangle of ``QᵀXᵢᵀXᵢQ`` (k(k+1)/2 values) and noisy ``‖Xᵢ‖²_F``;
    where the provider's bound ladder chose below its top, ``pilot``: the same basis read off
    its pilot Gram at the robust maximum (packed ``QᵀĜQ``, ``tr Ĝ``, then that pilot's noise
    std per entry; post-processing of a release, so free)."""

    provider_id: str
    n_samples: int
    packed: NDArray[np.float64]
    total: float
    pilot: NDArray[np.float64] | None = None


Message = MeanQuery | PrepareMessage | Query | VarianceQuery | CountQuery | SumQuery
AnyReply = MeanReply | PrepareReply | Reply | VarianceReply


def _real_array(value: Any, what: str) -> NDArray[np.float64]:
    """``value`` as a float64 array, refusing what is not a real number array.

    Complex values (``QᵀQ = I`` without the conjugate lets ``‖Q‖₂`` grow without bound),
    object arrays, booleans, strings and floats that do not fit float64 are refused, not
    converted (``np.asarray(z, float)`` would silently drop an imaginary part).
    """
    if isinstance(value, np.ndarray):
        arr = value
    else:
        try:
            arr = np.asarray(value)
        except (TypeError, ValueError) as exc:
            raise QueryRefusedError(f"The {what} is not a numeric array: {exc}") from exc
    if arr.dtype.kind not in "fiu":
        raise QueryRefusedError(
            f"The {what} must be an array of real numbers; got dtype {arr.dtype} "
            "(complex, object, boolean and text arrays are refused)."
        )
    with np.errstate(over="ignore", invalid="ignore"):
        out = np.asarray(arr, dtype=np.float64)
    if not np.all(np.isfinite(out)):
        raise QueryRefusedError(f"The {what} contains NaN or infinity (or overflows float64).")
    return out


def _int_scalar(value: Any, what: str) -> int:
    if isinstance(value, bool | np.bool_) or not isinstance(value, int | np.integer):
        raise QueryRefusedError(f"The {what} must be an int; got {value!r}.")
    return int(value)


def validate_query(query: Any, n_features: int, n_components: int) -> Query:
    """Return ``query`` with real float64/intp arrays, or raise :class:`QueryRefusedError`.

    Checked: the types (a real, finite ``block``, integer ``support``, int ``round`` and
    ``n_features``), ``n_features == d``, a support of unique sorted indices in ``[0, d)``
    with at least k of them, a ``block`` of shape ``(len(support), k)`` and
    ``‖QᵀQ − I‖_max ≤ 1e-8`` (the sensitivity bound needs ``‖Q‖₂ ≤ 1``). The provider computes
    with the returned arrays, never with the caller's.
    """
    if not isinstance(query, Query):
        raise QueryRefusedError(f"Expected a Query; got {type(query).__name__}.")
    d = _int_scalar(query.n_features, "query's n_features")
    if d != n_features:
        raise QueryRefusedError(
            f"Query for n_features={d}; this provider holds {n_features} features."
        )
    round_ = _int_scalar(query.round, "query's round")
    raw_support = np.asarray(query.support) if not isinstance(query.support, np.ndarray) \
        else query.support
    if raw_support.ndim != 1 or raw_support.dtype.kind not in "iu":
        raise QueryRefusedError("Query support must be a 1-D array of integer row indices.")
    if raw_support.size and (raw_support.min() < 0 or raw_support.max() >= n_features):
        raise QueryRefusedError(
            f"Query support must be strictly increasing row indices in [0, {n_features})."
        )
    support = raw_support.astype(np.intp)  # in range, so exact
    block = _real_array(query.block, "query block")
    if block.ndim != 2 or block.shape != (support.shape[0], n_components):
        raise QueryRefusedError(
            f"Query block has shape {block.shape}; expected ({support.shape[0]}, {n_components}) "
            f"(support size × n_components={n_components} agreed by this provider)."
        )
    if support.shape[0] < n_components:
        raise QueryRefusedError(
            f"Query support has {support.shape[0]} rows, fewer than n_components={n_components}."
        )
    if np.any(np.diff(support) <= 0):
        raise QueryRefusedError(
            f"Query support must be strictly increasing row indices in [0, {n_features})."
        )
    deviation = float(np.abs(block.T @ block - np.eye(n_components)).max())
    if not deviation <= ORTHONORMALITY_TOL:
        raise QueryRefusedError(
            f"Query Q is not orthonormal (max |QᵀQ − I| = {deviation:.3g} > "
            f"{ORTHONORMALITY_TOL:g}); the noise is calibrated for ‖Q‖₂ ≤ 1 only."
        )
    return Query(round=round_, support=support, block=block, n_features=d)


def validate_vector(value: Any, n_features: int, what: str) -> NDArray[np.float64]:
    """A finite real float vector of shape ``(n_features,)``, or :class:`QueryRefusedError`."""
    arr = _real_array(value, what)
    if arr.shape != (n_features,):
        raise QueryRefusedError(
            f"The {what} has shape {arr.shape}; this provider holds {n_features} features, "
            f"so it expects shape ({n_features},)."
        )
    return arr

