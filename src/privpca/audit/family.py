"""Family-wise levels for many audit cells (``privpca audit all``).

Each cell (one threshold audit or one floating-point probe of one mechanism at one claimed ε)
proves its ``epsilon_lower`` with probability ≥ ``confidence`` *for that cell*. Over ``m``
cells some per-cell bound exceeds the true ε with probability up to ``m·(1 − confidence)``:
an exactly calibrated randomised response audited in 200 cells showed one ε_lower of 1.002
against the true ε = 1. Two corrections, valid under any dependence between the
cells:

* **Bonferroni** — every cell's bound at the per-cell level ``1 − (1 − confidence)/m``. Then
  with probability ≥ ``confidence``, *no* cell's bound exceeds its mechanism's true ε; in
  particular "no cell's ε_lower exceeds its claimed ε" holds at ``confidence`` for correct
  mechanisms, and any cell above its claim is a family-wise proven violation.
* **Holm** — the step-down correction of the cells' p-values (each p-value tests "the
  mechanism is (ε, δ)-DP" with the cell's one test, :func:`~privpca.audit._bounds.p_value`).
  It rejects every claim Bonferroni rejects and possibly more, with the same family-wise
  error ``1 − confidence``; it gives decisions, not bounds.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from privpca.audit._bounds import CellBounds

__all__ = ["FamilyWise", "bonferroni_confidence", "family_wise", "holm_adjust"]


def bonferroni_confidence(confidence: float, cells: int) -> float:
    """The per-cell confidence ``1 − (1 − confidence)/cells`` (Bonferroni)."""
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1). Got {confidence!r} instead.")
    if int(cells) < 1:
        raise ValueError(f"cells must be at least 1. Got {cells!r} instead.")
    return 1.0 - (1.0 - confidence) / int(cells)


def holm_adjust(p_values: ArrayLike) -> NDArray[np.float64]:
    """Holm's adjusted p-values: ``max_{j ≤ i} min(1, (m − j + 1)·p_(j))`` in sorted order,
    returned in the input order. Reject cell ``i`` at family-wise level α iff its adjusted
    p-value is ≤ α."""
    p = np.asarray(p_values, dtype=np.float64).ravel()
    m = p.size
    if m == 0:
        return p.copy()
    order = np.argsort(p, kind="stable")
    scaled = np.minimum(1.0, (m - np.arange(m)) * p[order])
    adjusted = np.empty(m)
    adjusted[order] = np.maximum.accumulate(scaled)
    return adjusted


@dataclass(frozen=True)
class FamilyWise:
    """The family-wise reading of ``cells`` audit cells at ``confidence``.

    Attributes
    ----------
    confidence : float
        The family-wise confidence (probability that every statement holds at once).
    cells : int
        The number of cells in the family.
    cell_confidence : float
        The Bonferroni per-cell level ``1 − (1 − confidence)/cells``.
    epsilon_lower : ndarray
        Each cell's ε lower bound at ``cell_confidence``.
    claimed : ndarray
        Each cell's claimed ε.
    p_values, holm : ndarray
        Each cell's p-value and its Holm-adjusted p-value.
    """

    confidence: float
    cells: int
    cell_confidence: float
    epsilon_lower: NDArray[np.float64]
    claimed: NDArray[np.float64]
    p_values: NDArray[np.float64]
    holm: NDArray[np.float64]

    @property
    def bonferroni_violations(self) -> NDArray[np.bool_]:
        """Cells whose Bonferroni-level bound exceeds the claimed ε."""
        return np.asarray(self.epsilon_lower > self.claimed)

    @property
    def holm_rejected(self) -> NDArray[np.bool_]:
        """Cells whose claim Holm rejects at family-wise level ``1 − confidence``."""
        return np.asarray(self.holm <= 1.0 - self.confidence)

    @property
    def holds(self) -> bool:
        """Whether the family-wise statement "no cell's ε_lower exceeds its claimed ε" (and
        no Holm rejection) holds on these runs."""
        return not (self.bonferroni_violations.any() or self.holm_rejected.any())


def family_wise(reports: Sequence[CellBounds], confidence: float = 0.95,
                cells: int | None = None) -> FamilyWise:
    """Bonferroni bounds and Holm decisions over ``reports`` (each an
    :class:`~privpca.audit.AuditReport` or :class:`~privpca.audit.FloatProbeReport`).

    ``cells`` is the size of the family when it is larger than ``reports`` (cells planned but
    not run, e.g. a fit that raised, still count: the correction stays valid).
    """
    m = len(reports) if cells is None else int(cells)
    if m < len(reports):
        raise ValueError(f"cells ({m}) is smaller than the number of reports "
                         f"({len(reports)}).")
    level = bonferroni_confidence(confidence, max(m, 1))
    eps = np.array([r.epsilon_lower_at(level) for r in reports], dtype=np.float64)
    claimed = np.array([r.epsilon for r in reports], dtype=np.float64)
    p = np.array([r.p_value for r in reports], dtype=np.float64)
    # Holm over the whole family: missing cells count as p = 1 (never rejected).
    padded = np.concatenate([p, np.ones(m - p.size)])
    holm = holm_adjust(padded)[: p.size]
    return FamilyWise(float(confidence), m, level, eps, claimed, p, holm)
