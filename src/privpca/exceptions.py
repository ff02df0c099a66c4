"""Warnings and errors raised by privpca.

Privacy failures are never silent: anything that changes or weakens a guarantee
raises one of these, so a user can turn the warnings into errors with
``warnings.simplefilter("error", privpca.exceptions.PrivacyWarning)``.
"""

from __future__ import annotations

__all__ = [
    "BudgetExceededError",
    "NonFiniteInputError",
    "PrivacyLeakWarning",
    "PrivacyWarning",
    "RowClippingWarning",
]


class PrivacyWarning(UserWarning):
    """Base class of every privacy-related warning in privpca."""


class PrivacyLeakWarning(PrivacyWarning):
    """The stated guarantee is weaker than requested, or holds only under extra conditions.

    Raised, for example, when the classic Gaussian calibration is used with ε ≥ 1 (where it
    does not certify (ε, δ)-DP), or when the paper's sensitivity is used for reproduction.
    """


class RowClippingWarning(PrivacyWarning):
    """Some rows exceeded the declared ``data_norm`` and were scaled down to it.

    Clipping keeps the privacy guarantee intact but biases the estimate; the message says how
    many rows were clipped.
    """


class BudgetExceededError(RuntimeError):
    """A spend would take a :class:`~privpca.accounting.PrivacyLedger` past its budget.

    Raised *before* anything computed from the data is released.
    """


class NonFiniteInputError(ValueError):
    """The data hold NaN or infinity, which no estimator imputes or drops silently.

    A ``ValueError``. Raised before anything computed from the data is released, and
    without a count or position of the offending entries (that would be an exact statistic).
    """
