"""Choosing a table's columns from the shell (``--columns``) and the policy for its missing
cells (``--missing``).

Both are decided from public things only: the header (the table's schema) and what the user
types. A column whose *name* says it is an identifier is not a feature; its values are never
looked at to decide so, which would make the refusal depend on the data. The rule
(:func:`identifier_columns`) lives in :mod:`privpca._columns`, shared with ``fit(df)`` in
Python.
"""

from __future__ import annotations

import difflib
import re
import shlex
from collections.abc import Sequence
from typing import Any

import click

from privpca._columns import identifier_columns

__all__ = ["MissingPolicy", "check_feature_names", "describe", "identifier_columns",
           "resolve_columns", "suggest_columns"]


def describe(items: Sequence[str], limit: int = 6) -> str:
    """``a, b, c and 3 more``: the first ``limit`` items of a list for a message."""
    shown = ", ".join(items[:limit])
    return shown + (f" and {len(items) - limit} more" if len(items) > limit else "")


class MissingPolicy(click.ParamType):
    """``refuse`` (None) or a finite number stated by the user (a float)."""

    name = "refuse|VALUE"

    def convert(self, value: Any, param: Any, ctx: Any) -> float | None:
        if value is None or (isinstance(value, str) and value.strip().lower() == "refuse"):
            return None
        try:
            number = float(value)
        except (TypeError, ValueError):
            number = float("nan")
        if number != number or number in (float("inf"), float("-inf")):
            self.fail(f"{value!r} is neither 'refuse' nor a finite number (e.g. --missing 0).",
                      param, ctx)
        return number


def check_feature_names(names: Sequence[str], chosen: Sequence[int], what: str) -> None:
    """Refuse fitted columns whose header names are empty or repeated.

    The names are the table's public schema and go into the JSON, the plots and the report as
    the feature names: each fitted column needs one, and no two the same.

    Parameters
    ----------
    names : sequence of str
        Every column's name, from the header line.
    chosen : sequence of int
        The columns to fit.
    what : str
        The table, for the message (its file name).

    Raises
    ------
    click.ClickException
        An empty name, or a name shared by two fitted columns.
    """
    header = "line 1, the header,"
    blank = [j for j in chosen if not names[j]]
    if blank:
        plural = len(blank) > 1
        raise click.ClickException(
            f"{what}: {header} gives no name to column{'s' if plural else ''} "
            f"{describe([str(j) for j in blank])} (0-based). Every fitted column needs a name "
            "(it is the feature's name in the JSON): name "
            f"{'them' if plural else 'it'}, leave {'them' if plural else 'it'} out with "
            "--columns, or give --no-header if line 1 is a record.")
    seen: dict[str, int] = {}
    for j in chosen:
        if names[j] in seen:
            raise click.ClickException(
                f"{what}: {header} names columns {seen[names[j]]} and {j} (0-based) both "
                f"{names[j]!r}. Feature names must be distinct: rename one, or leave one out "
                "with --columns.")
        seen[names[j]] = j


def resolve_columns(spec: str, names: Sequence[str], what: str = "the table") -> list[int]:
    """The 0-based indices that ``spec`` selects among ``names``, in the order given.

    ``spec`` is comma-separated: names, 0-based indices, or inclusive ranges ``a:b`` of either
    (``age:income``, ``2:5`` is 2, 3, 4, 5, as pandas' ``.loc``; an open end, ``a:`` or ``:b``,
    runs to the table's edge). A header name takes precedence over an index reading of the
    same text. Duplicates, unknown names and indices out of range are refused
    (``click.UsageError``), an unknown name with the list of columns and a close match.
    """
    picked: list[int] = []
    seen: dict[int, str] = {}
    for token in (t.strip() for t in spec.split(",")):
        if not token:
            raise click.UsageError(f"--columns {spec!r}: an empty item (two commas, or a "
                                   "comma at an end).")
        for j in _resolve_token(token, names, what):
            if j in seen:
                raise click.UsageError(
                    f"--columns {spec!r} selects column {names[j]!r} (index {j}) twice "
                    f"({seen[j]!r} and {token!r}).")
            seen[j] = token
            picked.append(j)
    return picked


def _resolve_token(token: str, names: Sequence[str], what: str) -> list[int]:
    exact = _by_name(token, names)
    if exact is not None:
        return [exact]
    cuts = [m.start() for m in re.finditer(":", token)]
    if len(cuts) == 1:  # a range: each end a name, else an index (strict: named if wrong)
        start, stop = token[:cuts[0]].strip(), token[cuts[0] + 1:].strip()
        a = 0 if not start else _endpoint(start, names, what)
        b = len(names) - 1 if not stop else _endpoint(stop, names, what)
        return _span(token, a, b, names)
    for cut in cuts:  # names with colons: the first reading whose both ends are columns
        start, stop = token[:cut].strip(), token[cut + 1:].strip()
        ends = [_lenient(start, names, 0), _lenient(stop, names, len(names) - 1)]
        if ends[0] is not None and ends[1] is not None:
            return _span(token, ends[0], ends[1], names)
    index = _by_index(token, names, what)
    if index is not None:
        return [index]
    raise click.UsageError(_unknown(token, names, what))


def _span(token: str, a: int, b: int, names: Sequence[str]) -> list[int]:
    if a > b:
        raise click.UsageError(
            f"--columns: the range {token!r} runs backwards ({names[a]!r} is column {a}, "
            f"{names[b]!r} column {b}).")
    return list(range(a, b + 1))


def _endpoint(text: str, names: Sequence[str], what: str) -> int:
    found = _by_name(text, names)
    if found is None:
        found = _by_index(text, names, what)
    if found is None:
        raise click.UsageError(_unknown(text, names, what))
    return found


def _lenient(text: str, names: Sequence[str], edge: int) -> int | None:
    if not text:
        return edge
    found = _by_name(text, names)
    if found is None and _is_index(text) and int(text) < len(names):
        found = int(text)
    return found


def _is_index(text: str) -> bool:
    return text.isascii() and text.isdigit()


def _by_name(text: str, names: Sequence[str]) -> int | None:
    hits = [j for j, name in enumerate(names) if name == text]
    if len(hits) > 1:
        raise click.UsageError(
            f"--columns: the name {text!r} heads {len(hits)} columns (indices "
            f"{', '.join(map(str, hits))}); select them by index.")
    return hits[0] if hits else None


def _by_index(text: str, names: Sequence[str], what: str) -> int | None:
    if not _is_index(text):
        return None
    index = int(text)
    if index >= len(names):
        raise click.UsageError(
            f"--columns: index {index} is out of range; {what} has {len(names)} column"
            f"{'s' if len(names) != 1 else ''} (indices 0 to {len(names) - 1}).")
    return index


def _unknown(token: str, names: Sequence[str], what: str) -> str:
    close = difflib.get_close_matches(token, [str(n) for n in names], n=1)
    hint = f" Did you mean {close[0]!r}?" if close else ""
    return (f"--columns: no column {token!r} in {what}.{hint} Its columns: "
            f"{describe(list(names), 30)} (or 0-based indices 0 to {len(names) - 1}).")


def suggest_columns(selected: Sequence[int], names: Sequence[str]) -> str:
    """The ``--columns`` argument that selects ``selected`` (in table order): runs of three
    or more as ranges, by name where the name reads back as that column, else by index;
    quoted for the shell where needed."""
    def label(j: int) -> str:
        name = names[j]
        safe = (name and "," not in name and ":" not in name and name == name.strip()
                and sum(n == name for n in names) == 1)
        return name if safe else str(j)

    items: list[str] = []
    run: list[int] = []
    for j in [*sorted(selected), None]:
        if run and (j is None or j != run[-1] + 1):
            items.extend([f"{label(run[0])}:{label(run[-1])}"] if len(run) >= 3
                         else [label(k) for k in run])
            run = []
        if j is not None:
            run.append(j)
    return shlex.quote(",".join(items))
