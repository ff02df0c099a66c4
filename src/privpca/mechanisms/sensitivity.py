"""Sensitivities of the released statistics, as functions of the public norm bound D.

Each function states the neighbouring relation it holds under
(:class:`~privpca.accounting.neighbouring.Neighbouring`), so that every party that releases a
statistic (an estimator, a federated provider) computes the same Δ from the same code.
"""

from __future__ import annotations

import math

from privpca._validation import check_options
from privpca.accounting.neighbouring import NEIGHBOURING_RELATIONS

__all__ = ["gram_sensitivity", "power_sensitivity"]


def gram_sensitivity(data_norm: float, neighbouring: str = "replace") -> float:
    """L2 sensitivity of the packed upper triangle of ``XᵀX``: ``√2·D²`` or ``D²``.

    Parameters
    ----------
    data_norm : float
        The bound D on every record's L2 norm.
    neighbouring : {"replace", "add-remove"}, default="replace"
        Replace one record (Δ = √2·D²) or add/remove one record (Δ = D²).
    """
    neighbouring = check_options(neighbouring, "neighbouring", NEIGHBOURING_RELATIONS)
    return (math.sqrt(2.0) if neighbouring == "replace" else 1.0) * float(data_norm) ** 2


def power_sensitivity(data_norm: float, n_components: int) -> float:
    """L2 (Frobenius) sensitivity of ``XᵀX Q`` under replace-one: ``D²`` (k = 1), ``√2·D²``."""
    return (1.0 if int(n_components) == 1 else math.sqrt(2.0)) * float(data_norm) ** 2
