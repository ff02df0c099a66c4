"""How ``privpca fit`` says a refusal: whether anything was spent, in the shell's words."""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from typing import Any

import click
from sklearn.utils._param_validation import InvalidParameterError

from privpca._registry import PRIVATE_ESTIMATORS
from privpca.exceptions import BudgetExceededError

__all__ = ["MISSING_ADVICE", "option_refused", "refusal_says_what_was_spent"]

#: What a refusal of missing cells advises: ``--missing VALUE``, and what VALUE must be.
MISSING_ADVICE = (
    "privpca does not impute unless told: give --missing VALUE to put a public value of your "
    "choice in every missing cell (no row dropped, n stays public). The same VALUE fills "
    "every column's missing cells, and it must be chosen without looking at this table (e.g. "
    "a clinical reference value): a value worked out from it (its own mean) leaks outside "
    "the guarantee.")


#: The estimators' refusal of more components than columns (public: the table's width).
_COMPONENTS_ABOVE_COLUMNS = re.compile(r"n_components=(\d+) must be between 1 and "
                                       r"n_features=(\d+)")


@contextlib.contextmanager
def refusal_says_what_was_spent(show_data_warnings: bool,
                                 what: str = "the fit") -> Iterator[None]:
    """Turn a refusal raised inside (``ValueError``, ``BudgetExceededError``) into a
    ``click.ClickException`` that says whether any (ε, δ) was spent, its text data-free.

    A fit books its whole (ε, δ) on the ledger (the process's default one here) before it
    reads a value of the data, and withdraws the booking when it refuses the input before
    releasing anything (:class:`~privpca.exceptions.NonFiniteInputError`). A refusal that
    left the ledger as it was came before the booking (public parameters against the table's
    shape, the budget) or is that withdrawal: its text is public and printed. One that left
    the booking came after the data were read: its budget counts as spent, and its text,
    which may be computed from the data, is printed only with ``--show-data-warnings``
    (except a ``BoundNotFoundError``, a function of the noisy histogram the spend covers).

    Parameters
    ----------
    show_data_warnings : bool
        ``--show-data-warnings``: stderr is for the data holder only.
    what : str, default="the fit"
        What is refused, for the message.
    """
    from privpca.accounting.ledger import default_ledger
    from privpca.pipeline.preprocessing import BoundNotFoundError

    ledger = default_ledger()
    booked = len(ledger)
    try:
        yield
    except InvalidParameterError as exc:  # a value its declaration refuses: nothing booked
        raise option_refused(exc) from exc
    except (ValueError, BudgetExceededError) as exc:
        too_many = _COMPONENTS_ABOVE_COLUMNS.match(str(exc))
        if too_many and len(ledger) == booked:  # -k against the file's public width
            raise click.BadParameter(
                f"{too_many[1]} components asked, but the table has {too_many[2]} columns: "
                f"-k must be between 1 and {too_many[2]}. Nothing was spent.",
                param_hint="'-k' / '--n-components'") from exc
        if isinstance(exc, BoundNotFoundError) and exc.needed is not None:
            text = _shell_rows_refusal(exc, what)  # public: n, p, ε, δ; before any booking
        elif len(ledger) == booked:  # refused before the booking, or the booking withdrawn
            text = f"{exc} Nothing was spent: {what} released nothing and left no (ε, δ) booked."
        elif isinstance(exc, BoundNotFoundError):
            text = (f"{exc} The (ε, δ) of {what} counts as spent: it was booked before the "
                    "data were read; nothing else was released.")
        else:
            text = (f"{what.capitalize()} failed after booking its (ε, δ), which counts as "
                    "spent; nothing was released. The error's text may depend on the data: "
                    + (f"for the data holder only: {type(exc).__name__}: {exc}"
                       if show_data_warnings else "--show-data-warnings prints it (stderr is "
                       "then for the data holder only)."))
        raise click.ClickException(text) from exc


def _shell_rows_refusal(exc: Any, what: str) -> str:
    """A too-small table's refusal in the shell's terms (flags, not Python parameters)."""
    eps = exc.epsilon_needed
    larger = f"--epsilon {eps:.3g} or more" if eps is not None else "no --epsilon up to 64"
    rows = f"The table has {exc.rows} rows"
    if exc.holdout_fraction is not None:
        rows = (f"The held-out share (--holdout-fraction {exc.holdout_fraction:g}) has "
                f"{exc.rows} rows")
        larger += " or a larger --holdout-fraction"
    return (f"{rows}; its private norm bounds need at least "
            f"{exc.needed} at this --epsilon and --delta. Nothing was spent: {what} released "
            f"nothing and left no (ε, δ) booked. What works: {larger}; or public quantities "
            "instead of the private ones: --centering none (for data already centred, or "
            "centred with a public mean) with --data-norm D (a public bound on every row's "
            "norm, never read off this table), without --scale.")


def option_refused(exc: InvalidParameterError) -> click.ClickException:
    """An estimator's refusal of a parameter's value (its declared constraints, checked before
    anything is booked), said of the option that gave it."""
    ctx = click.get_current_context()
    found = re.match(r"The '(\w+)' parameter of (\w+) ", str(exc))
    key = {"clip_norm": "data_norm"}.get(found[1], found[1]) if found else None
    option = next((o for o in ctx.command.params if o.name == key), None)
    if found is None or option is None:
        return click.UsageError(str(exc))
    names = {cls.__name__: n for n, cls in PRIVATE_ESTIMATORS.items()}
    hint = f"{option.get_error_hint(ctx)} ({names.get(found[2], found[2])})"
    return click.BadParameter(str(exc)[found.end():], ctx, param_hint=hint)
