"""Warnings and errors raised by privpca.

Privacy failures are never silent: anything that changes or weakens a guarantee
raises one of these, so a user can turn the warnings into errors with
``warnings.simplefilter("error", privpca.exceptions.PrivacyWarning)``.
"""

from __future__ import annotations

__all__ = [
    "BudgetExceededError",
    "DataDependentWarning",
    "LargeDeltaWarning",
    "NonFiniteInputError",
    "NonPrivatePreprocessingWarning",
    "PrivacyLeakWarning",
    "PrivacyWarning",
    "ProviderDropoutError",
    "QueryRefusedError",
    "RowClippingWarning",
    "UnresolvedComponentsWarning",
]


class PrivacyWarning(UserWarning):
    """Base class of every privacy-related warning in privpca."""


class PrivacyLeakWarning(PrivacyWarning):
    """The stated guarantee is weaker than requested, or holds only under extra conditions.

    Raised, for example, when the classic Gaussian calibration is used with ε ≥ 1 (where it
    does not certify (ε, δ)-DP), or when the paper's sensitivity is used for reproduction.
    """


class LargeDeltaWarning(PrivacyWarning):
    """The fit's δ is not well below 1/n, for a public number of records n.

    δ is the probability that the guarantee fails outright, and a mechanism that publishes
    one record in full with probability δ is (0, δ)-DP: at δ ≥ 1/n it may publish about
    δ·n ≥ 1 records. Choose δ well below 1/n (a common choice is δ ≤ 1/n², or 1e-5 for
    n = 10⁴). Raised at fit, before anything is charged; n is the public count of the
    replace-one relation (under add/remove-one neighbours n is private and nothing is said).
    A δ ≥ 0.1 is refused outright unless forced (``privpca.config_context(
    allow_large_delta=True)``).
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


class UnresolvedComponentsWarning(UserWarning):
    """No component's variance was resolved above the release's noise.

    Every ``explained_variance_`` is 0: the components are directions the noise chose, not
    the table's (a table with no spread, or too little signal for its ε, rows and features).
    Decided from released values only: it may be shown to anyone.
    """


class NoisyCentreWarning(UserWarning):
    """The private mean's noise is large next to the bound on the centred rows.

    Centring on a noisy mean adds a rank-one term along the noise to the Gram matrix, which
    can turn the components toward it: a column with a large offset (a year, a code, a
    timestamp) beside columns of small spread, or a small table, causes this. Decided from
    released values only (the mean's public noise level and the released bound): it may be
    shown to anyone.
    """


class RowClippingWarning(PrivacyWarning, DataDependentWarning):
    """Some rows exceeded the declared ``data_norm`` and were scaled down to it.

    Clipping keeps the privacy guarantee intact but biases the estimate. The message says no
    count (how many rows were clipped is not private), but whether it fires at all depends on
    the data: a :class:`DataDependentWarning`, for the data holder only.
    """


class NonPrivatePreprocessingWarning(PrivacyWarning, DataDependentWarning):
    """The input looks standardised by a fitted transformer whose statistics are not private.

    ``Pipeline([StandardScaler(), privpca.PCA()])`` runs, but the scaler's means and standard
    deviations are exact statistics of the table: whoever sees the scaler (its ``mean_``,
    ``scale_``) or its output learns them, and ``privacy_`` covers only the estimator's own
    releases. ``scale=True`` gives the same correlation PCA with private scales inside the
    fit's (ε, δ). Raised by the estimators whose fit sees the whole table in memory when every
    column has mean 0 and standard deviation 1 (ddof 0 or 1) to within rounding.

    Whether it fires depends on the data, so it is also a :class:`DataDependentWarning`: for
    the data holder only (``privpca fit`` drops it unless ``--show-data-warnings``).
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


class QueryRefusedError(ValueError):
    """A data provider refused a malformed message of the distributed protocol (wrong shape,
    NaN, non-orthonormal Q, out of order)."""


class ProviderDropoutError(RuntimeError):
    """A data provider did not answer a round (dropped out, timed out, or refused)."""
