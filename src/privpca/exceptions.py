"""Warnings and errors raised by privpca.

Privacy failures are never silent: anything that changes or weakens a guarantee
raises one of these, so a user can turn the warnings into errors with
``warnings.simplefilter("error", privpca.exceptions.PrivacyWarning)``.
"""

from __future__ import annotations

__all__ = [
    "BudgetExceededError",
    "DataDependentWarning",
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


class DataDependentWarning(UserWarning):
    """This warning's presence depends on the data; it is for the data holder's eyes.

    Whether it fires is a function of the private records themselves (a row above a public
    ``data_norm``, the exact Bingham sampler running out of proposals, ...), not of anything
    the privacy guarantee covers: one bit about the data, outside ``privacy_``. Show it to
    whoever called ``fit`` on their own data; never publish it (a pipeline log, a shared
    terminal, a federated provider's output). ``privpca fit`` and the federated provider
    therefore drop these warnings unless asked (``privpca fit --show-data-warnings``).
    Silence them with ``warnings.simplefilter("ignore", DataDependentWarning)``.
    """


class RowClippingWarning(PrivacyWarning, DataDependentWarning):
    """Some rows exceeded the declared ``data_norm`` and were scaled down to it.

    Clipping keeps the privacy guarantee intact but biases the estimate. The message says no
    count (how many rows were clipped is not private), but whether it fires at all depends on
    the data: a :class:`DataDependentWarning`, for the data holder only.
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
