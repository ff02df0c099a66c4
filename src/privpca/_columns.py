"""Which columns are identifiers (keys, row numbers), not features: decided by their names.

One rule for the shell (``privpca fit table.csv``, :mod:`privpca.cli.columns`) and for Python
(``fit(df)`` on a DataFrame, :func:`refuse_identifier_columns`). A table exported with its row
names or its index (R's ``write.csv``, pandas' ``to_csv``, ``reset_index``) carries the row
number as a column; fitted with the features, it takes the first component (its variance is
n²/12) and the fit is about row order, not the data.

The rule looks at the column *names* only, never at their values. The names are the table's
public schema; a refusal decided from the values (say, "the integers 1 to n", "all distinct")
would depend on the data, and saying it would tell whoever sees the message something about
the records. So a column of row numbers under an ordinary name (``n``, ``obs``) is not caught,
and an identifier is never missed or flagged because of what it holds.

A column is an identifier when its name (spaces around it ignored) is:

* empty (a blank header cell): pandas writes one for its index and R's ``write.csv`` one
  (``""``) for the row names; wherever it stands, it names no feature;
* ``rownames``, ``rowname``, ``row.names``, ``row_names`` (any case): R's row names, as
  Rdatasets CSVs and tibble's ``rownames_to_column()`` name them;
* ``Unnamed: N``: pandas' ``read_csv`` name for a blank header cell;
* ``...N``: readr's (``read_csv`` ≥ 2.0) name for a blank header cell (``...1``: the row
  names of a ``write.csv`` file);
* ``index`` (any case): pandas' ``reset_index()``; ``__index_level_N__``: pyarrow's name for a
  pandas index stored in Parquet;
* ``id``, ``uuid``, ``guid``, or ending in ``_id``, ``.id``, ``-id`` or `` id`` (any case:
  ``row_id``, ``record_id``, ``CUSTOMER_ID``, ``subject.id``), or in ``Id``/``ID`` after a
  lower-case letter (``customerId``, ``CustomerID``);
* ``X`` (upper case, exactly) heading the table: R's ``read.csv`` names the blank first header
  cell of a ``write.csv`` file ``X``, so a table read and written again by R starts with it
  (``X, …``, or ``"", X, …`` with the row names written once more). Only the first column, or
  the second right after another identifier, counts; and not when a column is named ``Y`` or
  ``y``: then X is an axis or a design matrix (``X, Y, Z``; ``X, y``), a feature.

Names that are *not* identifiers, on purpose: names merely containing ``id`` (``width``,
``valid``, ``paid``, ``idle``, ``identity``, ``ideal``); ``idx`` and ``*_idx`` (an index can
be a measurement: a price index, ``bmi_idx``, ``width_idx``); ``key`` (a musical key, a
keyboard key: a feature in common data sets); ``X1``, ``X2``, … (readr < 2.0 named blank
cells so, but they are the commonest feature names of all); ``x`` (lower case); pandas'
``level_0`` (a reset MultiIndex; also a plausible measurement name). A feature caught by the
rule is still fitted when chosen explicitly: ``--columns`` on the command line; in Python,
renamed, or passed as ``df.to_numpy()``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

__all__ = ["identifier_columns", "identifier_message", "refuse_identifier_columns"]

#: The names that say "key or row number", not "feature" (matched in full, after strip);
#: R's ``X`` depends on its position and is decided in :func:`identifier_columns`.
_IDENTIFIER = re.compile(
    r"\s*"                                    # blank: no name at all
    r"|(?i:row[._]?names?)"                   # R's row names: rownames, row.names, rowname
    r"|Unnamed: \d+"                          # pandas: a blank header cell
    r"|\.\.\.\d+"                             # readr: a blank header cell
    r"|(?i:index|__index_level_\d+__)"        # pandas' reset_index(); pyarrow's stored index
    r"|(?i:id|uuid|guid|.*[_.\- ]id)"         # id, row_id, record_id, subject.id, Customer ID
    r"|.*[a-z](?:Id|ID)"                      # camelCase: customerId, CustomerID
)

#: Names that make a leading ``X`` an axis (a feature), not R's row names.
_AXIS_PARTNERS = frozenset({"Y", "y"})


def identifier_columns(names: Sequence[str]) -> list[int]:
    """The 0-based positions of the columns whose *name* marks them as identifiers.

    Decided from the names alone, never from the values (the module's docstring gives the
    rule, each name and why): the names are public, the values are not.

    Parameters
    ----------
    names : sequence of str
        Every column's name, in the table's order.

    Returns
    -------
    list of int
        The identifier columns, in order.

    Examples
    --------
    >>> identifier_columns(["", "Sepal.Length", "Species"])
    [0]
    >>> identifier_columns(["rownames", "width_idx", "ideal", "customer_id"])
    [0, 3]
    >>> identifier_columns(["X", "Y", "Z"])
    []
    """
    stripped = [name.strip() for name in names]
    ids = [j for j, name in enumerate(stripped) if _IDENTIFIER.fullmatch(name)]
    if not _AXIS_PARTNERS.intersection(stripped):
        # R's read.csv names a blank first header cell X: first, or right after another id.
        lead = 0 if not ids or ids[0] != 0 else 1
        if lead < len(stripped) and stripped[lead] == "X":
            ids = sorted([*ids, lead])
    return ids


def _label(names: Sequence[str], j: int) -> str:
    name = names[j]
    if name.strip():
        return repr(name)
    if j == 0:
        return f"{name!r} (the blank first header cell: an index)"
    return f"{name!r} (the header gives no name to column {j}, 0-based)"


def identifier_message(names: Sequence[str], ids: Sequence[int]) -> str:
    """The core of every refusal of identifier columns: ``Column 'id' looks like an
    identifier by name (a key or row number, not a feature).``

    The shell and Python each add their own way out (``--columns``; ``df.drop``).

    Parameters
    ----------
    names : sequence of str
        Every column's name.
    ids : sequence of int
        The identifier columns (:func:`identifier_columns`), at least one.

    Returns
    -------
    str
        One sentence naming the columns (at most six, then a count).
    """
    labels = [_label(names, j) for j in ids]
    shown = ", ".join(labels[:6]) + (f" and {len(labels) - 6} more" if len(labels) > 6 else "")
    plural = len(ids) > 1
    return (f"Column{'s' if plural else ''} {shown} {'look' if plural else 'looks'} like "
            f"{'identifiers' if plural else 'an identifier'} by name (a key or row number, "
            "not a feature; the name decides, never the values).")


def refuse_identifier_columns(X: Any, owner: object | None = None) -> None:
    """Refuse a DataFrame whose column names mark an identifier (before anything is read).

    Only tables whose columns are all named by strings are checked (a pandas or polars
    DataFrame, as scikit-learn reads ``feature_names_in_``); an array has no names and passes.

    Parameters
    ----------
    X : object
        The table given to ``fit``.
    owner : object, optional
        The estimator (its class is named in the message).

    Raises
    ------
    ValueError
        Naming the identifier columns and the way out: ``X.drop(columns=[...])``.
    """
    columns = getattr(X, "columns", None)
    if columns is None or isinstance(columns, str):
        return
    try:
        names = list(columns)
    except TypeError:
        return
    if not names or not all(isinstance(name, str) for name in names):
        return
    ids = identifier_columns(names)
    if not ids:
        return
    who = f"{type(owner).__name__}: " if owner is not None else ""
    dropped = [names[j] for j in ids]
    them, are = ("them", "they are features") if len(ids) > 1 else ("it", "it is a feature")
    raise ValueError(
        f"{who}{identifier_message(names, ids)} Drop {them} before the fit: "
        f"X.drop(columns={dropped!r}). If {are}, rename {them} (X.rename(columns={{...}})) "
        "or fit X.to_numpy(). Nothing was fitted and nothing was spent (ε and δ untouched).")


def refuse_text_columns(X: Any, owner: object | None = None) -> None:
    """Refuse a DataFrame with text or category columns, naming them (before anything is read).

    Decided by the columns' dtypes, the table's schema, never by its values. An array has
    no column dtypes and passes (NumPy's own conversion then refuses text).

    Raises
    ------
    ValueError
        Naming the columns and the ways out: select the numeric ones, or encode categories.
    """
    dtypes = getattr(X, "dtypes", None)
    columns = getattr(X, "columns", None)
    if dtypes is None or columns is None or isinstance(dtypes, str):
        return
    try:
        pairs = list(zip(list(columns), list(dtypes), strict=True))
    except TypeError:
        return
    text = [name for name, dtype in pairs if getattr(dtype, "kind", "O") not in "biuf"]
    if not text:
        return
    numeric = [name for name, _ in pairs if name not in text]
    who = f"{type(owner).__name__}: " if owner is not None else ""
    times = [name for name, dtype in pairs if getattr(dtype, "kind", "O") in "mM"]
    dates = (f" Dates and times ({', '.join(map(repr, times))}) are numbers only once you "
             "choose their unit and origin, e.g. (X[col] - pd.Timestamp('2000-01-01')) / "
             "pd.Timedelta(days=1), with a public origin (not the column's own minimum)."
             if times else "")
    raise ValueError(
        f"{who}the table's column(s) {', '.join(map(repr, text))} hold text, categories, "
        f"dates or times; a PCA fits numbers only. Select the numeric columns "
        f"(X[{numeric!r}]) or encode the categories first (e.g. "
        f"sklearn.preprocessing.OneHotEncoder in a ColumnTransformer).{dates}"
    )
