"""The candidate grids of the float probe: ``σ·2^-b`` for each known noise scale, and powers of
two around the noise and the outputs' magnitude."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

__all__ = ["DEFAULT_BITS", "POW2_ABOVE", "POW2_BELOW", "Grid", "candidate_grids"]

#: The ``b`` of the grids ``σ·2^-b`` (2^-30 was the leaking grid of issue 26).
DEFAULT_BITS: tuple[int, ...] = tuple(range(8, 53))
#: Powers of two from ``2^-POW2_BELOW`` × the smallest reference magnitude ...
POW2_BELOW = 56
#: ... up to ``2^-POW2_ABOVE`` × the noise scale.
POW2_ABOVE = 4


@dataclass(frozen=True)
class Grid:
    """A candidate grid: its step and how it was made (``"σ·2^-30"``, ``"2^-28"``)."""

    step: float
    label: str


def _scale_items(scales: Mapping[str, float] | Sequence[float] | None
                 ) -> list[tuple[str, float]]:
    if scales is None:
        return []
    items = (list(scales.items()) if isinstance(scales, Mapping)
             else [(f"σ={float(v):.6g}", float(v)) for v in np.ravel(np.asarray(scales))])
    out: dict[float, str] = {}
    for label, value in items:
        v = float(value)
        if math.isfinite(v) and v > 0 and v not in out:
            out[v] = label
    return [(label, v) for v, label in out.items()]


def candidate_grids(scales: Mapping[str, float] | Sequence[float] | None,
                    magnitudes: Sequence[float] = (),
                    bits: Sequence[int] = DEFAULT_BITS) -> list[Grid]:
    """The grids to try: ``σ·2^-b`` for every scale and ``b`` in ``bits`` (coarse to fine),
    then powers of two from ``2^-POW2_ABOVE`` × the noise (the largest scale, or magnitude
    when no scale is known) down to ``2^-POW2_BELOW`` × the smallest scale or magnitude.
    Duplicates are dropped (the first label is kept)."""
    items = _scale_items(scales)
    grids: dict[float, str] = {}
    for label, s in items:
        for b in bits:
            step = math.ldexp(s, -int(b))
            if step > 0 and step not in grids:
                grids[step] = f"{label}·2^-{int(b)}"
    refs = [v for _, v in items] + [float(m) for m in magnitudes
                                    if math.isfinite(float(m)) and float(m) > 0]
    if refs:
        noise = max(v for _, v in items) if items else max(refs)
        hi = math.frexp(noise)[1] - 1 - POW2_ABOVE
        lo = math.frexp(min(refs))[1] - 1 - POW2_BELOW
        for j in range(min(hi, 1023), max(lo, -1074) - 1, -1):
            step = math.ldexp(1.0, j)
            if step not in grids:
                grids[step] = f"2^{j}"
    return [Grid(step, label) for step, label in grids.items()]
