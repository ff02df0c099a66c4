"""What a provider tells the server when it does not answer: a fixed code, never its error's text.

A provider's own failures are about its data more often than not: ``np.loadtxt`` names the
text cell of a CSV with its row and column, a state file's path names the data file, a
traceback holds values. None of that may reach the untrusted server, so a provider that
cannot answer replies with one of the public :data:`PROVIDER_FAILURES` codes and its fixed
wording only; the error itself stays in the provider's own log (and only when its operator
declared that log data-holder-only: ``privpca provider --show-data-warnings``).

That a provider failed, and which kind of failure it was, are all the server learns. A
failure is raised before anything is released (a refusal of the input or of the message,
the budget spent) or after a release was booked, when the release is then withheld (nothing
computed from the data leaves the provider either way).
"""

from __future__ import annotations

from privpca.exceptions import BudgetExceededError, NonFiniteInputError
from privpca.federated.protocol.counter import AgreementMismatchError
from privpca.federated.protocol.messages import QueryRefusedError
from privpca.pipeline.preprocessing import BoundNotFoundError, GridRangeError

__all__ = [
    "PROVIDER_FAILURES",
    "ProviderConfigError",
    "ProviderInputError",
    "failure_code",
    "failure_reply",
]

#: Every code a provider may send instead of an answer: code -> (Flower error number, fixed
#: public wording). Flower's own error numbers are below 100.
PROVIDER_FAILURES: dict[str, tuple[int, str]] = {
    "query-refused": (101, "the server's message is malformed or out of the protocol's "
                           "order; nothing booked, nothing released"),
    "over-budget": (102, "refused: this provider has made every release it agreed to; "
                         "nothing released"),
    "internal-error": (103, "the provider failed; nothing released"),
    "bad-agreement": (104, "the provider's settings are invalid, or differ from the agreement "
                           "in its state file; nothing released"),
    "input-refused": (105, "the provider's table was refused (unreadable, not numeric, "
                           "missing or non-finite values, or units beyond the private search's "
                           "range); nothing released"),
    "no-bound": (106, "the provider's private norm bound found no bin above its threshold "
                      "(too few rows for its epsilon); nothing more released"),
}


class ProviderInputError(ValueError):
    """The provider's own table could not be read or was refused (its text stays local)."""


class ProviderConfigError(ValueError):
    """The provider's settings (its node config) are missing or invalid."""


def failure_code(exc: BaseException) -> str:
    """The public code (a key of :data:`PROVIDER_FAILURES`) of a provider's failure.

    Parameters
    ----------
    exc : BaseException
        What the provider raised while loading itself or answering a message.

    Returns
    -------
    str
        Decided by the exception's class alone, never by its text.
    """
    if isinstance(exc, AgreementMismatchError | ProviderConfigError):
        return "bad-agreement"
    if isinstance(exc, BudgetExceededError):
        return "over-budget"
    if isinstance(exc, QueryRefusedError):
        return "query-refused"
    if isinstance(exc, ProviderInputError | NonFiniteInputError | GridRangeError):
        return "input-refused"
    if isinstance(exc, BoundNotFoundError):
        return "no-bound"
    return "internal-error"


def failure_reply(exc: BaseException) -> tuple[int, str]:
    """``(error number, reason)`` that the server receives for ``exc``: fixed text only.

    Parameters
    ----------
    exc : BaseException
        The provider's failure.

    Returns
    -------
    tuple of (int, str)
        The code's number and ``"<code>: <fixed wording>"``; nothing of ``exc``'s text.
    """
    code = failure_code(exc)
    number, wording = PROVIDER_FAILURES[code]
    return number, f"{code}: {wording}"
