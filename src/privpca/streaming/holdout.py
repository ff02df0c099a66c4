"""A public partition of a table's rows into held-out segments and the rest.

A fit that releases its preprocessing (private mean, bounds, scales) from a held-out share of
the rows and its statistic from the other rows composes the two in parallel: each record enters
exactly one of them, so both get the whole (ε, δ). The share must be chosen without reading the
data and be readable without a pass over the rest, hence whole segments of consecutive rows:
``S = min(n, segments)`` public segments of ``s = ⌊n/S⌋`` rows (the last ``n − S·s`` rows are
never held out) and ``h = ⌈fraction·S⌉`` of them drawn uniformly without replacement from the
estimator's own generator. ``n_held = h·s`` is a function of n and public parameters only.

On **sorted** rows the held-out statistics are a cluster sample of h neighbourhoods (unbiased
over the draw, with the variance of a cluster sample): more segments make it closer to a simple
random sample of rows.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

__all__ = ["HOLDOUT_SEGMENTS", "StreamSplit", "segment_split"]

#: Public segments the rows are cut into by default (the Oja family's held-out share).
HOLDOUT_SEGMENTS = 1000


@dataclass(frozen=True)
class StreamSplit:
    """A table's public partition: held-out segments and the rest, as ``(start, stop)``."""

    held: list[tuple[int, int]]
    rest: list[tuple[int, int]]

    @property
    def n_held(self) -> int:
        return sum(b - a for a, b in self.held)

    @property
    def n_rest(self) -> int:
        return sum(b - a for a, b in self.rest)


def segment_split(n: int, fraction: float, rng: np.random.Generator | None, *,
                  segments: int = HOLDOUT_SEGMENTS) -> StreamSplit:
    """``h = ⌈fraction·S⌉`` of ``S = min(n, segments)`` segments of ``⌊n/S⌋`` rows, drawn
    uniformly (``rng``; None draws nothing and only sizes the split); the rest in order.
    """
    S = min(n, int(segments))
    size = n // S
    h = min(math.ceil(fraction * S), S)
    if rng is None:
        chosen = np.arange(h)
    else:
        chosen = np.sort(rng.choice(S, size=h, replace=False))
    held = [(int(i) * size, (int(i) + 1) * size) for i in chosen]
    rest, start = [], 0
    for a, b in held:
        if a > start:
            rest.append((start, a))
        start = b
    if start < n:
        rest.append((start, n))
    return StreamSplit(held, rest)
