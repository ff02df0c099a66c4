"""The pipeline's settings: the user's parameters it reads and their checks (post-construction,
against the table's shape where needed)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from privpca.pipeline.bound_selection import LOW_QUANTILE

__all__ = ["BOUND_QUANTILES", "DEFAULT_NORM_QUANTILE", "QUANTILE_PARTS", "SCALE_QUANTILE",
           "PipelineSettings",
           "check_centering", "check_scale"]

#: Quantile of the row norms used as the clipping bound when ``data_norm="auto"``.
DEFAULT_NORM_QUANTILE = 0.99
#: The quantiles searched when ``data_norm="auto"`` chooses between two candidates: the
#: median and the robust maximum (a target of ``n − 4.5σ``, :mod:`privpca.mechanisms.quantile`).
BOUND_QUANTILES = (LOW_QUANTILE, 1.0)
#: Quantile of |x_j − μ_j| searched as each feature's base bound when ``scale=True``: the
#: robust maximum (a target of ``n − 4.5σ``); its second moments are also read at multiples
#: of it (:data:`~privpca.pipeline.preprocessing.SCALE_LEVELS`).
SCALE_QUANTILE = 1.0

#: The parts that are private quantile searches (:class:`PrivateQuantile`).
QUANTILE_PARTS = ("bound_raw", "bound_residual", "scale_bound", "bound")


def check_centering(value: Any, n_features: int, owner: object) -> Any:
    """``"private"``, ``None`` or a public mean of shape (n_features,) (returned as an array)."""
    name = type(owner).__name__
    if value is None or (isinstance(value, str) and value == "private"):
        return value
    if isinstance(value, str):
        raise ValueError(
            f"The 'centering' parameter of {name} must be 'private', None or an array of "
            f"shape ({n_features},) (a public mean). Got {value!r} instead."
        )
    arr = np.asarray(value, dtype=np.float64)
    if arr.shape != (n_features,) or not np.all(np.isfinite(arr)):
        raise ValueError(
            f"The 'centering' parameter of {name} must be 'private', None or a finite array "
            f"of shape ({n_features},). Got an array of shape {arr.shape} instead."
        )
    return arr


def check_scale(value: Any, n_features: int, owner: object) -> Any:
    """``False``, ``True`` (private scales) or public positive scales of shape (n_features,)."""
    name = type(owner).__name__
    if isinstance(value, bool | np.bool_):
        return bool(value)
    arr = np.asarray(value, dtype=np.float64)
    if arr.shape != (n_features,) or not np.all(np.isfinite(arr)) or not np.all(arr > 0):
        raise ValueError(
            f"The 'scale' parameter of {name} must be a bool or an array of shape "
            f"({n_features},) of positive public scales. Got {value!r} instead."
        )
    return arr


@dataclass(frozen=True)
class PipelineSettings:
    """The user's parameters the pipeline reads, handed over explicitly by the estimator.

    Attributes
    ----------
    epsilon : float
    delta : float or None
        None: the statistic is pure ε-DP and no Gaussian part runs.
    centering : "private", array-like or None
    data_norm : float or "auto"
    scale : bool or array-like
    budget_shares : dict of part -> share, or None
    holdout_fraction : "auto", float or None
    random_state : None, int or Generator
        Checked against secure mode when the ledger is charged.
    """

    epsilon: float
    delta: float | None = None
    centering: Any = None
    data_norm: Any = 1.0
    scale: Any = False
    budget_shares: Any = None
    holdout_fraction: Any = None
    random_state: Any = None
