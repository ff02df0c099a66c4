"""The input of a DPS-PCA fit: one table per provider, cut from the caller's table; the
providers' noise seeds; one clipping warning for all of them.

A provider's table is an array's rows, or a view of a streamed table's rows (nothing read):
contiguous blocks of (nearly) equal size, or the rows of each label of ``groups``.
"""

from __future__ import annotations

import itertools
import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from privpca.federated.protocol import ServerState
from privpca.mechanisms.randomness import check_random_state

__all__ = ["Providers", "dpspca_provider_seeds", "split_providers"]


@dataclass
class Providers:
    """The input of a fit: each provider's table (an array, or a streamed table read where it
    is) and its id."""

    parts: list[Any]
    ids: list[str]

    @property
    def n_features(self) -> int:
        return n_features_of(self.parts[0])

    @property
    def n_samples(self) -> int:
        """Σ nᵢ (public)."""
        return sum(n_samples_of(part) for part in self.parts)


def split_providers(table: Any, groups: ArrayLike | None, n_providers: int) -> Providers:
    """``n_providers`` contiguous blocks of ``table`` (an array or a row source), or the rows
    of each label of ``groups``."""
    n = n_samples_of(table)
    if groups is None:
        if n_providers > n:
            raise ValueError(
                f"n_providers={n_providers} exceeds n_samples={n}: every provider needs at "
                "least one record."
            )
        bounds = np.linspace(0, n, n_providers + 1).round().astype(int)
        return Providers([_take(table, slice(int(a), int(b)))
                          for a, b in itertools.pairwise(bounds)],
                         [str(i) for i in range(n_providers)])
    g = np.asarray(groups)
    if g.shape != (n,):
        raise ValueError(f"groups must have shape ({n},); got {g.shape}.")
    missing = (np.isnan(g) if g.dtype.kind == "f"
               else np.array([v is None or v != v for v in g]) if g.dtype.kind == "O"
               else np.zeros(n, dtype=bool))
    if missing.any():  # NaN is no label: its rows would form no provider
        raise ValueError("groups holds missing labels (NaN or None): every row needs the "
                         "label of the provider that holds it.")
    labels = np.unique(g)
    if n_providers not in (1, len(labels)):  # 1, the default: the groups decide
        raise ValueError(f"n_providers={n_providers}, but groups has {len(labels)} labels: the "
                         "groups decide the providers; pass one or the other.")
    return Providers([_take(table, g == lab) for lab in labels], [str(lab) for lab in labels])


def _take(table: Any, rows: slice | NDArray[np.bool_]) -> Any:
    """A provider's rows of ``table``: an array's slice or masked rows, or a view of a
    streamed table's rows (nothing read; the whole table is itself)."""
    if isinstance(table, np.ndarray):
        return table[rows]
    if isinstance(rows, slice):
        if (rows.start, rows.stop) == (0, table.n_samples):
            return table
        return _row_view(table, [(rows.start, rows.stop)])
    return _row_view(table, _runs(rows))


def n_samples_of(part: Any) -> int:
    """A provider's public nᵢ (an array's rows, or a streamed table's)."""
    return int(part.shape[0] if isinstance(part, np.ndarray) else part.n_samples)


def n_features_of(part: Any) -> int:
    return int(part.shape[1] if isinstance(part, np.ndarray) else part.n_features)


def _runs(mask: NDArray[np.bool_]) -> list[tuple[int, int]]:
    """The maximal runs ``[(a, b), …]`` of True in ``mask`` (increasing, disjoint)."""
    edges = np.flatnonzero(np.diff(np.concatenate([[False], mask, [False]]).astype(np.int8)))
    return [(int(a), int(b)) for a, b in zip(edges[::2], edges[1::2], strict=True)]


def _row_view(source: Any, ranges: list[tuple[int, int]]) -> Any:
    """The rows of ``source`` in ``ranges`` without reading them: a memory map's slice (its
    threaded reductions kept), a lazy Dask slice, or a filter over any other source's
    blocks (:func:`privpca.streaming.selection.select_rows`)."""
    from privpca.streaming import ArraySource
    from privpca.streaming.selection import select_rows

    if isinstance(source, ArraySource) and len(ranges) == 1:
        a, b = ranges[0]
        return ArraySource(source.X[a:b], block_rows=source.block_rows,
                           validated=source.validated)
    return select_rows(source, ranges)


def start_and_seeds(rng: np.random.Generator, p: int, k: int, s_hat: int, init: Any,
                     n_providers: int) -> tuple[NDArray[np.float64], list[int]]:
    """Q⁽¹⁾, then one noise seed per provider, from the estimator's generator (in that order)."""
    start = ServerState.initial(p, k, s_hat, init, rng)
    return start, [int(s) for s in rng.integers(0, 2**63, size=n_providers)]


def dpspca_provider_seeds(random_state: int | np.random.SeedSequence, n_features: int,
                          n_components: int, n_providers: int, *,
                          n_nonzero: int | None = None, init: Any = "random") -> list[int]:
    """The providers' noise seeds of a seeded :class:`DPSPCA` fit, to replay it elsewhere.

    ``DPSPCA(random_state=s, n_components=k, n_nonzero=ŝ, init=init)`` on N providers with
    d features gives its providers these seeds; passing them to ``privpca provider
    --noise-seed`` (and ``s`` to ``privpca server --seed``) replays the same run over
    Flower. For experiments only: the seeds are derived from ``s``, so whoever knows ``s``
    can remove the noise of that run; they are never stored on the fitted estimator, and a
    fit with ``random_state=None`` cannot be replayed (its seeds come from fresh entropy).
    """
    if random_state is None or isinstance(random_state, np.random.Generator):
        raise ValueError("dpspca_provider_seeds needs the int or SeedSequence the fit was given "
                         "(a fit with random_state=None cannot be replayed).")
    s_hat = n_features if n_nonzero is None else int(n_nonzero)
    rng = check_random_state(random_state)
    return start_and_seeds(rng, n_features, n_components, s_hat, init, n_providers)[1]


def reemit_clipping(caught: list[warnings.WarningMessage], clipped: bool, data_norm: float,
            owner: object) -> None:
    """One clipping warning for the whole fit (not one per provider); others re-raised as is.

    Called after the charge; it says no count (which providers clipped how many rows is data).
    """
    from privpca._validation import warn_clipped
    from privpca.exceptions import RowClippingWarning

    clipping = False
    for w in caught:
        if issubclass(w.category, RowClippingWarning):
            clipping = True
        else:
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    if clipped and clipping:
        warn_clipped(owner, data_norm)
