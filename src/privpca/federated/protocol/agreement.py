"""What a setting asks of the parties: the steps it runs and the releases a provider agrees to.

A setting is the release pipeline's (``centering``, ``data_norm``, ``scale``): outside the
papers' setting (:func:`is_table_mode`) the server sends the mean rounds, the prepare message
and the variance query besides the T power queries; :func:`provider_release_limits` is what a
provider's counter enforces.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from privpca.mechanisms.quantile import QUERY_ROUNDS

#: Rounds of the private mean (a first estimate, then the mean of the residuals).
MEAN_ROUNDS = 2
#: Budget parts (of :mod:`privpca.pipeline.budget`) of each mean round: (bound, sum).
MEAN_PARTS: tuple[tuple[str, str], ...] = (("bound_raw", "mean"),
                                           ("bound_residual", "mean_refine"))


def is_table_mode(centering: Any, data_norm: Any, scale: Any = False) -> bool:
    """Whether a setting leaves the papers' (no centring, public bound, no scaling)."""
    return (centering is not None or isinstance(data_norm, str)
            or not (isinstance(scale, bool | np.bool_) and not scale))


def provider_release_limits(n_rounds: int, centering: Any = None, data_norm: Any = 1.0,
                            scale: Any = False, secure: bool = False) -> dict[str, int]:
    """Releases of each kind a provider agrees to for a setting (what its counter enforces).

    ``"mean"``: 2 with private centring; ``"bound"`` and ``"bound_select"`` (at most): 1 with
    ``data_norm="auto"``; ``"query"``:
    T; ``"variance"``: 1 outside the papers' setting. A secure run shares counts instead of
    its own quantiles: ``"count"``, one per bisection round of each search (the mean rounds'
    bounds and the bound).
    """
    limits: dict[str, int] = {}
    searches = 0
    if isinstance(centering, str):
        limits["mean"] = MEAN_ROUNDS
        searches += MEAN_ROUNDS
    if isinstance(data_norm, str):
        searches += 1
        if not secure:
            limits["bound"] = 1
            limits["bound_select"] = 1  # the ladder's pilots, where the plan has them
    if secure and searches:
        limits["count"] = searches * QUERY_ROUNDS
    limits["query"] = int(n_rounds)
    if is_table_mode(centering, data_norm, scale):
        limits["variance"] = 1
    return limits
