"""Reading a command's input table: delimited text (:data:`TEXT_SUFFIXES`; line 1 the header
unless ``--no-header``, the delimiter read off it, ``,`` the decimal mark of a ``;`` file),
``.npy``, or a streamed Parquet/Zarr/``.npy`` source (or a lazy Dask array on a cluster).

Whether line 1 is a header is the user's to say, never read off its values (a record taken for
a header would be published as names): a line 1 of numbers only is refused unless ``--header``.

``--columns`` selects the features (:mod:`privpca.cli.columns`); without it, text columns and
columns named as identifiers (by name: :mod:`privpca._columns`) are refused. A refusal found by
reading values is a :class:`DataRefusal`: its message says the kind of problem and the way
out; where (columns, lines, cells) only with ``--show-data-warnings``, as the count of cells
``--missing VALUE`` filled with a public value (a DataDependentWarning)."""

from __future__ import annotations

import csv
import math
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NamedTuple

import click
import numpy as np
from numpy.typing import NDArray

from privpca._columns import identifier_message
from privpca._validation import caller_stacklevel
from privpca.cli.columns import (
    check_feature_names,
    describe,
    identifier_columns,
    resolve_columns,
    suggest_columns,
)
from privpca.cli.refusals import MISSING_ADVICE
from privpca.exceptions import DataDependentWarning
from privpca.streaming import ArraySource, ParquetSource, as_row_source, is_zarr_path

#: Delimited text tables, by suffix (the separator is read off line 1).
TEXT_SUFFIXES = (".csv", ".tsv", ".txt")

#: Cells read as "missing" (refused with the column's name unless --missing gives a value).
_MISSING_TOKENS = frozenset({"", "na", "nan", "n/a", "null", "none", "?", "-"})

#: Data rows read to name the text columns when a table is refused early (before the rest).
_SAMPLE_ROWS = 1000

#: Said by every refusal of the table: it comes before the fit books anything.
NOTHING_SPENT = "Nothing was fitted and nothing was spent (ε and δ untouched)."


class DataRefusal(click.ClickException):
    """A refusal of the table whose diagnosis depends on the data.

    Parameters
    ----------
    message : str
        What is printed on defaults: the kind of problem and the way out, with no count,
        line number, cell, or column found by reading the values (stderr stays publishable).
    detail : str
        The diagnosis (the columns, lines and cells), printed with ``--show-data-warnings``
        only: stderr is then for the data holder's eyes.
    """

    def __init__(self, message: str, detail: str) -> None:
        super().__init__(message)
        self.detail = detail

    def text(self, show_data_warnings: bool) -> str:
        """The message to print, with the diagnosis only when ``show_data_warnings``."""
        if show_data_warnings:
            return (f"{self.message} {NOTHING_SPENT}\nDetails (they depend on the data: for "
                    f"the data holder only): {self.detail}")
        return (f"{self.message} {NOTHING_SPENT} Add --show-data-warnings to see where "
                "(stderr is then for the data holder only).")


def _is_number(cell: str) -> bool:
    try:
        float(cell)
    except ValueError:
        return False
    return True


#: Field separators a table may use (the most frequent on the first line wins).
_DELIMITERS = (",", ";", "\t")


def _sniff_delimiter(line: str) -> str:
    """``,``, ``;`` or tab: whichever occurs most on the first line (``,`` on a tie/none)."""
    counts = {d: line.count(d) for d in _DELIMITERS}
    best = max(_DELIMITERS, key=lambda d: (counts[d], d == ","))
    return best if counts[best] else ","


class _CsvHeader(NamedTuple):
    names: list[str]
    has_header: bool
    delimiter: str

    @property
    def decimal_comma(self) -> bool:
        """A ``;`` file is a European CSV: ``,`` its decimal mark (by line 1, not values)."""
        return self.delimiter == ";"


def _comma_float(cell: str) -> float:
    return float(cell.replace(",", "."))


def _is_name(cell: str) -> bool:
    """A header cell that names something: neither a number nor a missing-cell marker."""
    return bool(cell) and not _is_number(cell) and cell.lower() not in _MISSING_TOKENS


def _not_utf8(path: Path, exc: UnicodeDecodeError) -> DataRefusal:
    return DataRefusal(f"{path}: not a UTF-8 text table.", f"{exc}.")


def _csv_header(path: Path, header: bool | None = None) -> _CsvHeader:
    """The feature names, whether line 1 is a header, and the delimiter of a CSV. ``header``:
    True, line 1 is the header (``--header``); False, a record, the columns ``x0, x1, …``
    (``--no-header``); None (default), the header, refused if it names nothing (numbers or
    missing cells only: more likely a record). The delimiter: :func:`_sniff_delimiter`."""
    try:
        with open(path, newline="", encoding="utf-8-sig") as fh:
            first_text = fh.readline()
            following = [fh.readline() for _ in range(5)]  # R's row names (below)
    except UnicodeDecodeError as exc:
        raise _not_utf8(path, exc) from None
    delimiter = _sniff_delimiter(first_text)
    first = next(csv.reader([first_text], delimiter=delimiter), None)
    if not first:
        raise click.ClickException(f"{path}: the file is empty.")
    if header is False:
        return _CsvHeader([f"x{j}" for j in range(len(first))], False, delimiter)
    names = [cell.strip() for cell in first]
    if header is None and not any(_is_name(name) for name in names):
        raise click.ClickException(
            f"{path}: line 1 holds no name, only numbers (or missing cells): it looks like a "
            "record, while privpca fit reads line 1 as the header (its cells are published "
            "as the feature names). Give --no-header if line 1 is a record (the columns are "
            "then x0, x1, …), or --header if it is the header (e.g. pandas' default labels 0, "
            "1, …).")
    # R's write.table/write.csv with row names: every line (of 5, 2 at least) holds one field
    # more than the header. The names become a column with an empty name, kept out as an id.
    lines = list(csv.reader([t for t in following if t.strip()], delimiter=delimiter))
    if len(lines) >= 2 and all(len(row) == len(names) + 1 for row in lines):
        names = ["", *names]
    return _CsvHeader(names, True, delimiter)


def _parse_csv_slowly(path: Path, head: _CsvHeader, usecols: Sequence[int] | None = None,
                      limit: int | None = None) -> tuple[np.ndarray, dict[int, tuple[str, int]]]:
    """Read ``path`` cell by cell (``np.loadtxt`` refused it): ``(X, text cells)``.

    Only the columns ``usecols`` (default all) are converted; missing cells become NaN; ragged
    rows are refused here (:func:`_ragged`). ``text cells``: column -> (its first non-numeric
    cell, its line), for a diagnosis. ``limit``: stop after that many data rows (a sample to
    name the text columns).
    """
    p = len(head.names)
    skip = int(head.has_header)
    cols = list(range(p)) if usecols is None else list(usecols)
    rows: list[list[float]] = []
    text_cells: dict[int, tuple[str, int]] = {}
    try:
        with open(path, newline="", encoding="utf-8-sig") as fh:
            for line_no, row in enumerate(csv.reader(fh, delimiter=head.delimiter), start=1):
                if line_no <= skip or not row:
                    continue
                if limit is not None and len(rows) >= limit:
                    break
                if len(row) != p:
                    raise _ragged(path, head, line_no, len(row))
                values = []
                for j in cols:
                    value = row[j].strip()
                    try:
                        values.append(_comma_float(value) if head.decimal_comma
                                      else float(value))
                    except ValueError:
                        values.append(math.nan)
                        if value.lower() not in _MISSING_TOKENS and j not in text_cells:
                            text_cells[j] = (value, line_no)
                rows.append(values)
    except UnicodeDecodeError as exc:
        raise _not_utf8(path, exc) from None
    return np.array(rows, dtype=np.float64).reshape(len(rows), len(cols)), text_cells


def _ragged(path: Path, head: _CsvHeader, line_no: int, fields: int) -> DataRefusal:
    """A line with another number of fields than line 1 (found by reading the lines)."""
    p, first = len(head.names), "the header (line 1)" if head.has_header else "line 1"
    return DataRefusal(
        f"{path}: not every line has as many fields as {first}. privpca reads values "
        f"separated by {head.delimiter!r}, one record per line.",
        f"line {line_no} has {fields} fields, expected {p} (as on line 1).")


def _text_items(text_cells: dict[int, tuple[str, int]], names: Sequence[str]) -> dict[int, str]:
    return {j: f"{names[j]!r} (e.g. {cell!r} on line {line})"
            for j, (cell, line) in sorted(text_cells.items())}


def _not_features(path: Path, names: Sequence[str], text: dict[int, str], *,
                  by_name: bool = False) -> DataRefusal:
    """The refusal of a table with text columns or identifier columns and no ``--columns``.

    On defaults it names only what the header says (the columns named as identifiers, and
    the ``--columns`` of the others) and, unless the refusal is ``by_name`` (decided by the
    header alone, ``text`` being a sample for the diagnosis), that some cells are text; the
    diagnosis (:func:`_diagnosis`) names the text columns with a cell and its line."""
    ids = identifier_columns(names)
    parts = [f"{path}:"]
    if text and not by_name:
        parts.append("some cells are text (neither numbers nor missing-cell markers). "
                     "privpca fit needs numbers only.")
    if ids:
        parts.append(_identifiers(names, ids))
    if text and not by_name:
        parts.append("Choose the numeric feature columns with --columns SPEC (names, 0-based "
                     "indices or inclusive ranges a:b), or encode the text as numbers first.")
    else:
        others = [j for j in range(len(names)) if j not in ids]
        if others:
            parts.append(f"The other columns are {describe([names[j] for j in others], 12)}: "
                         f"fit them with --columns {suggest_columns(others, names)} (names, "
                         "0-based indices or inclusive ranges a:b).")
        else:
            parts.append("No other column is left: encode the columns as numbers first.")
    return DataRefusal(" ".join(parts), _diagnosis(names, text))


def _identifiers(names: Sequence[str], ids: Sequence[int]) -> str:
    """``Column 'id' looks like an identifier by name …`` (from the header alone: the
    wording ``fit(df)`` uses in Python) and how to keep it out, in shell terms."""
    them, are = ("them", "they are features") if len(ids) > 1 else ("it", "it is a feature")
    anyway = (f"; if {are}, choose {them} there too (a chosen column is fitted, whatever "
              "its name)" if all(names[j].strip() for j in ids) else "")
    return f"{identifier_message(names, ids)} Keep {them} out with --columns{anyway}."


def _diagnosis(names: Sequence[str], text: dict[int, str]) -> str:
    """The text columns (with a cell and its line), the identifier columns and the
    ``--columns`` of the numeric ones: for the data holder only."""
    ids = [j for j in identifier_columns(names) if j not in text]
    parts = []
    if text:
        parts.append(f"non-numeric column{'s' if len(text) > 1 else ''} "
                     f"{describe(list(text.values()))}. privpca fit needs numbers only.")
    if ids:
        parts.append(_identifiers(names, ids))
    numeric = [j for j in range(len(names)) if j not in text and j not in ids]
    if numeric:
        parts.append(f"The numeric feature columns are {describe([names[j] for j in numeric], 12)}"
                     f": fit them with --columns {suggest_columns(numeric, names)} (names, "
                     "0-based indices or inclusive ranges a:b)"
                     + (", or encode the others as numbers first." if text else "."))
    else:
        parts.append("No numeric feature column is left: encode the columns as numbers first.")
    return " ".join(parts)


def _selected_text(path: Path, text: dict[int, str]) -> DataRefusal:
    plural = len(text) > 1
    pronoun = "them" if plural else "it"
    return DataRefusal(
        f"{path}: the columns selected with --columns hold text cells (neither numbers nor "
        "missing-cell markers). privpca fit needs numbers only: leave those columns out or "
        "encode them as numbers first.",
        f"--columns selects non-numeric column{'s' if plural else ''} "
        f"{describe(list(text.values()))}: leave {pronoun} out or encode {pronoun} as numbers "
        "first.")


def _choose(path: Path, names: Sequence[str], columns: str | None, *,
            text: dict[int, str] | None = None) -> list[int]:
    """The columns to fit: ``--columns`` resolved, or all of them when none is text or named
    as an identifier (refused otherwise, with the numeric columns listed).

    ``text``: the columns whose declared type is not numeric (a Parquet schema's: public, so
    they are named on defaults; a CSV's text cells are found by reading values instead and
    refused as a :class:`DataRefusal`)."""
    text = text or {}
    if columns is None:
        if text or identifier_columns(names):
            raise click.ClickException(f"{path}: {_diagnosis(names, text)}")
        return list(range(len(names)))
    chosen = resolve_columns(columns, names, path.name)
    picked_text = {j: text[j] for j in chosen if j in text}
    if picked_text:
        raise click.ClickException(f"{path}: {_selected_text(path, picked_text).detail}")
    return chosen


def _load_csv(path: Path, columns: str | None,
              header: bool | None = None) -> tuple[np.ndarray, list[str], int]:
    """``(X, feature names, first data line)`` of the selected columns of a CSV (``header``:
    see :func:`_csv_header`)."""
    head = _csv_header(path, header)
    names = head.names
    chosen = None if columns is None else _choose(path, names, columns)
    if chosen is None and identifier_columns(names):
        # Refused by name; the first rows only, to say which columns are text (diagnosis).
        try:
            _, text_cells = _parse_csv_slowly(path, head, limit=_SAMPLE_ROWS)
        except DataRefusal:  # ragged or not UTF-8: found when the columns are chosen
            text_cells = {}
        raise _not_features(path, names, _text_items(text_cells, names), by_name=True)
    check_feature_names(names, range(len(names)) if chosen is None else chosen, str(path))
    first_line = 2 if head.has_header else 1
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # "input contained no data": handled below
            X = np.loadtxt(path, delimiter=head.delimiter, skiprows=int(head.has_header),
                           ndmin=2, quotechar='"', dtype=np.float64, encoding="utf-8-sig",
                           converters=_comma_float if head.decimal_comma else None)
    except (ValueError, UnicodeDecodeError):
        if chosen is None:  # text within the first rows: refused before the rest is read
            _, text_cells = _parse_csv_slowly(path, head, limit=_SAMPLE_ROWS)
            if text_cells:
                raise _not_features(path, names, _text_items(text_cells, names)) from None
        X, text_cells = _parse_csv_slowly(path, head, chosen)
        if text_cells:
            text = _text_items(text_cells, names)
            raise (_not_features(path, names, text) if chosen is None
                   else _selected_text(path, text)) from None
    else:
        if X.shape[0] and X.shape[1] != len(names):  # loadtxt checks rows against each other
            raise _ragged(path, head, first_line, X.shape[1])
        if chosen is not None:
            X = X[:, chosen]
    if X.shape[0] == 0:
        raise click.ClickException(f"{path}: no data rows" +
                                   (" below the header." if head.has_header else "."))
    return X, names if chosen is None else [names[j] for j in chosen], first_line


def _load_npy(path: Path, columns: str | None) -> tuple[np.ndarray, list[str]]:
    try:
        data = np.load(path, allow_pickle=False)
    except ValueError as exc:
        raise click.ClickException(
            f"{path}: not a plain numeric array ({exc}). privpca never unpickles a file "
            "(an object array could run code): save a float array, e.g. "
            "np.save(path, X.astype(float))."
        ) from exc
    except (OSError, EOFError) as exc:
        raise click.ClickException(f"{path}: not a readable .npy file ({exc}).") from exc
    if data.ndim != 2 or data.dtype.kind not in "biuf":
        raise click.ClickException(
            f"{path}: expected a 2-D numeric array (one row per record). Got shape "
            f"{data.shape} and dtype {data.dtype}."
        )
    names = [f"x{j}" for j in range(data.shape[1])]
    if columns is None:
        return np.asarray(data, dtype=np.float64), names
    chosen = _choose(path, names, columns)
    return np.asarray(data[:, chosen], dtype=np.float64), [names[j] for j in chosen]


def _load_table(path: Path, columns: str | None = None, missing: float | None = None,
                header: bool | None = None) -> tuple[np.ndarray, list[str], bool]:
    """``(X, feature names, has_header)`` from a CSV or a ``.npy`` file.

    A CSV's line 1 is its header, whose cells name the features, unless ``header`` is False
    (``--no-header``: ``x0, x1, …``, scikit-learn's names); never decided from its values
    (:func:`_csv_header`). ``columns``: the ``--columns`` selection. Missing cells (empty,
    ``NA``, ``NaN``, …) are refused, or set to ``missing`` (a public value) when one is given;
    infinities and text are refused (:class:`DataRefusal`).
    """
    if path.suffix == ".npy":
        X, names = _load_npy(path, columns)
        has_header, first_line, unit = False, 1, "row"
    elif path.suffix in TEXT_SUFFIXES:
        X, names, first_line = _load_csv(path, columns, header)
        has_header, unit = first_line == 2, "line"
    else:
        raise click.BadParameter(
            f"{path}: not a table privpca reads. It reads delimited text ("
            f"{', '.join(TEXT_SUFFIXES)}: ',', ';' or tab, line 1 the header), a .npy array, "
            "a Parquet file or folder, or a Zarr store (the last two streamed).",
            param_hint="DATA")
    return _fill_missing(path, X, names, missing, first_line, unit), names, has_header


def _cells(mask: NDArray[np.bool_], names: Sequence[str], first_line: int, unit: str) -> str:
    """``'b' (2 cells, first on line 3), …``: the columns where ``mask`` holds."""
    items = []
    for j in np.flatnonzero(mask.any(axis=0)):
        rows = np.flatnonzero(mask[:, j])
        items.append(f"{names[int(j)]!r} ({rows.size} cell{'s' if rows.size > 1 else ''}, "
                     f"first on {unit} {rows[0] + first_line})")
    return f"column{'s' if len(items) > 1 else ''} {describe(items)}"


def _fill_missing(path: Path, X: np.ndarray, names: Sequence[str], missing: float | None,
                  first_line: int, unit: str) -> np.ndarray:
    """``X`` with its missing (NaN) cells refused, or set to ``missing``; infinities are
    refused either way. The count of filled cells goes to a DataDependentWarning only."""
    nan = np.isnan(X)
    if missing is None:
        bad = ~np.isfinite(X)
        if bad.any():
            raise DataRefusal(
                f"{path}: the table has missing or non-finite cells (empty, NA, NaN or "
                f"infinity). {MISSING_ADVICE} Infinities must be fixed first.",
                f"missing or non-finite values (empty, NaN or infinity) in "
                f"{_cells(bad, names, first_line, unit)}.")
        return X
    infinite = np.isinf(X)
    if infinite.any():
        raise DataRefusal(
            f"{path}: the table has infinite cells. --missing fills missing cells only: "
            "replace the infinities first.",
            f"infinite values in {_cells(infinite, names, first_line, unit)}.")
    if nan.any():
        counts = nan.sum(axis=0)
        X[nan] = missing
        items = [f"{names[int(j)]!r} ({int(counts[j])})" for j in np.flatnonzero(counts)]
        warnings.warn(f"{int(counts.sum())} missing cells were set to {missing:g} "
                      f"(--missing): {describe(items, 12)}.", DataDependentWarning,
                      stacklevel=caller_stacklevel())
    return X


class _Columns:
    """Some columns of a 2-D array read by row slices (a memory map, a Zarr array), missing
    cells set to ``fill`` (None: left as they are, refused by the source's checks)."""

    ndim = 2

    def __init__(self, X: Any, columns: Sequence[int], fill: float | None) -> None:
        self.X, self.columns, self.fill = X, np.asarray(columns, dtype=np.intp), fill
        self.shape = (int(X.shape[0]), len(columns))
        self.dtype = np.dtype(X.dtype)
        self._all = list(columns) == list(range(int(X.shape[1])))

    def __getitem__(self, rows: slice) -> NDArray[Any]:
        block = np.asarray(self.X[rows])
        if not self._all:
            block = block[:, self.columns]
        if self.fill is not None and block.dtype.kind == "f":
            block = np.where(np.isnan(block), block.dtype.type(self.fill), block)
        return block


def _parquet_source(path: Path, columns: str | None,
                    missing: float | None) -> tuple[ParquetSource, list[str]]:
    """A :class:`ParquetSource` over the selected columns (the schema's types decide which
    are text: no data is read), missing cells refused by the footers' null counts, or
    filled."""
    try:
        schema = ParquetSource.schema(path)
    except (ValueError, ImportError, OSError) as exc:
        raise click.ClickException(f"{path}: cannot be streamed ({exc}). Stream a .npy "
                                   "file, a Zarr store, a .parquet file or a folder of "
                                   "them.") from exc
    names = [name for name, _, _ in schema]
    text = {j: f"{name!r} ({kind})" for j, (name, kind, numeric) in enumerate(schema)
            if not numeric}
    chosen = _choose(path, names, columns, text=text)
    selected = [names[j] for j in chosen]
    source = ParquetSource(path, columns=selected, fill_value=missing)
    if missing is None:
        nulls = {name: count for name, count in source.null_counts().items() if count}
        if nulls:
            items = [f"{name!r} ({count} null{'s' if count != 1 else ''})"
                     for name, count in nulls.items()]
            raise DataRefusal(
                f"{path}: the selected columns have missing cells (nulls). {MISSING_ADVICE} "
                "Or fill them first.",
                f"missing cells in column{'s' if len(items) > 1 else ''} {describe(items)}.")
    return source, selected


def _streamed_table(path: Path, columns: str | None = None,
                    missing: float | None = None) -> tuple[Any, list[str]]:
    """A :class:`~privpca.streaming.RowSource` over DATA (with a progress bar) and its names."""
    if _is_parquet(path):
        parquet, names = _parquet_source(path, columns, missing)
        parquet.progress = True
        return parquet, names
    try:
        source = as_row_source(path)
    except (ValueError, ImportError, OSError) as exc:
        raise click.ClickException(f"{path}: cannot be streamed ({exc}). Stream a .npy "
                                   "file, a Zarr store, a .parquet file or a folder of "
                                   "them.") from exc
    names = [f"x{j}" for j in range(source.n_features)]
    if columns is not None or missing is not None:
        if not isinstance(source, ArraySource):  # pragma: no cover - .npy and Zarr are arrays
            raise click.ClickException(f"{path}: --columns and --missing need a .npy file, a "
                                       "Zarr store or Parquet to stream.")
        chosen = _choose(path, names, columns)
        source = ArraySource(_Columns(source.X, chosen, missing), block_rows=source.block_rows)
        names = [names[j] for j in chosen]
    source.progress = True
    return source, names


def _cluster_table(path: Path, address: str, chunk_rows: int, columns: str | None = None,
                   missing: float | None = None) -> tuple[Any, list[str], Any]:
    """``(RowSource over a lazy dask array, names, client)`` for a fit on a Dask cluster."""
    try:  # the [dask] extra, imported only when --scheduler is given
        import dask.array as da
        from distributed import Client

        from privpca.streaming import DaskSource
        from privpca.streaming.dask_io import dask_table
    except ImportError as exc:
        raise click.ClickException("--scheduler needs Dask: pip install 'privpca[dask]'.") \
            from exc
    try:
        if _is_parquet(path):
            parquet, names = _parquet_source(path, columns, missing)  # filled on the workers
            everything = [name for name, _, _ in ParquetSource.schema(path)]
            X = (dask_table(path, chunk_rows=chunk_rows) if names == everything
                 else _dask_parquet(parquet))
        else:
            X = dask_table(path, chunk_rows=chunk_rows)
            names = [f"x{j}" for j in range(X.shape[1])]
            if columns is not None:
                chosen = _choose(path, names, columns)
                X, names = X[:, chosen], [names[j] for j in chosen]
    except (ValueError, OSError) as exc:
        raise click.ClickException(f"{path}: {exc}") from exc
    if missing is not None:  # on the workers, block by block (no count is made)
        X = da.where(da.isnan(X), missing, X)
    try:
        client = Client(address, timeout="20s")
    except OSError as exc:
        raise click.ClickException(f"Cannot reach the Dask scheduler at {address} ({exc}). "
                                   "Nothing was fitted.") from exc
    source = DaskSource(X)
    source.progress = True
    return source, names, client


def _dask_parquet(parquet: ParquetSource) -> Any:
    """A lazy Dask array over the selected columns of a Parquet table, a task per file."""
    import dask
    import dask.array as da
    import pyarrow.parquet as pq

    from privpca.streaming.dask_io import _parquet_rows

    parts = [da.from_delayed(dask.delayed(_parquet_rows)(str(f.resolve()), parquet.columns),
                             shape=(pq.ParquetFile(f).metadata.num_rows, parquet.n_features),
                             dtype=np.float64)
             for f in parquet.files]
    return da.concatenate(parts, axis=0)


def _is_parquet(path: Path) -> bool:
    return path.suffix == ".parquet" or (path.is_dir() and not is_zarr_path(path))


def _read_table(data: Path, *, columns: str | None, missing: float | None, stream: bool,
                scheduler: str | None, chunk_rows: int, show_data_warnings: bool,
                header: bool | None = None) -> tuple[Any, list[str], Any]:
    """``(X, feature names, Dask client or None)`` for ``privpca fit``: a cluster's lazy
    table, a streamed source, or an array in memory. ``header``: whether a CSV's line 1 is
    its header (:func:`_csv_header`). Warnings raised while reading (the count of filled
    cells) follow the rule of ``fit``'s own: data-dependent ones only with
    ``--show-data-warnings``; so do the diagnoses of refusals (:class:`DataRefusal`)."""
    client = None
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            if scheduler is not None:
                X, names, client = _cluster_table(data, scheduler, chunk_rows, columns,
                                                  missing)
            elif stream or data.suffix == ".parquet" or data.is_dir():
                X, names = _streamed_table(data, columns, missing)
            else:
                X, names, _ = _load_table(data, columns, missing, header)
        except DataRefusal as exc:
            raise click.ClickException(exc.text(show_data_warnings)) from None
        except click.UsageError:
            raise
        except click.ClickException as exc:  # refused before the fit: say so
            if NOTHING_SPENT in exc.message:
                raise
            raise click.ClickException(f"{exc.message} {NOTHING_SPENT}") from exc
    _echo_warnings(caught, show_data_warnings)
    return X, names, client


def _echo_warnings(caught: Sequence[warnings.WarningMessage], show_data_warnings: bool) -> None:
    """Print ``caught`` on stderr, but a warning whose presence depends on the data
    (DataDependentWarning, NumPy's RuntimeWarnings) only with ``--show-data-warnings``."""
    for w in caught:
        if issubclass(w.category, DataDependentWarning | RuntimeWarning) \
                and not show_data_warnings:
            continue
        click.echo(f"warning: {w.category.__name__}: {w.message}", err=True)
