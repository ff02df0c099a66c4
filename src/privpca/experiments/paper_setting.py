"""The papers' setting, passed explicitly by every experiment that reproduces a paper.

The estimators' defaults centre on a private mean and bound the rows privately (the PCA
of a user's table). The papers study the *uncentred* second moment of rows of norm ≤ 1,
so every experiment passes ``centering=None`` and, where the estimator takes one, the public
bound ``data_norm=1.0``: with those, each estimator's noise and output are exactly what they
were before the release pipeline existed (``tests/test_pipeline.py`` checks it).
"""

from __future__ import annotations

from typing import Any

__all__ = ["PAPER_NORM", "PAPER_UNCENTRED"]

#: No centring (the papers' second moment).
PAPER_UNCENTRED: dict[str, Any] = {"centering": None}
#: No centring and the papers' public bound ‖x‖ ≤ 1.
PAPER_NORM: dict[str, Any] = {"centering": None, "data_norm": 1.0}
