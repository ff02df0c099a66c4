"""Reading a command's input table: CSV (delimiter and header sniffed), ``.npy``, or a streamed
Parquet/Zarr/``.npy`` source (or a lazy Dask array on a cluster), with every refusal (ragged
rows, text or missing cells, non-finite values) naming its column and line."""

from __future__ import annotations

import csv
import math
import warnings
from pathlib import Path
from typing import Any

import click
import numpy as np

from privpca.streaming import ParquetSource, as_row_source, is_zarr_path

#: Cells read as "missing" (refused with the column's name, never imputed).
_MISSING_TOKENS = frozenset({"", "na", "nan", "n/a", "null", "none", "?", "-"})


def _is_number(cell: str) -> bool:
    try:
        float(cell)
    except ValueError:
        return False
    return True


def _describe_columns(items: list[str], limit: int = 6) -> str:
    shown = ", ".join(items[:limit])
    return shown + (f" and {len(items) - limit} more" if len(items) > limit else "")


#: Field separators a table may use (the most frequent on the first line wins).
_DELIMITERS = (",", ";", "\t")


def _sniff_delimiter(line: str) -> str:
    """``,``, ``;`` or tab: whichever occurs most on the first line (``,`` on a tie/none)."""
    counts = {d: line.count(d) for d in _DELIMITERS}
    best = max(_DELIMITERS, key=lambda d: (counts[d], d == ","))
    return best if counts[best] else ","


def _looks_like_header(cells: list[str]) -> bool:
    """A line of names: a cell that is not a number, or pandas' default column labels.

    pandas writes ``0,1,2,…`` (and ``,0,1,…`` or ``Unnamed: 0,…`` with its index) as the
    header of a frame without names: numbers, but a header.
    """
    stripped = [c.strip() for c in cells]
    if any(c and not _is_number(c) for c in stripped):
        return True
    labels = stripped[1:] if stripped and stripped[0] == "" else stripped
    return len(labels) > 0 and labels == [str(j) for j in range(len(labels))] and (
        len(labels) > 1 or stripped[0] == "")


def _parse_csv_slowly(path: Path, names: list[str], skip: int,
                      delimiter: str = ",") -> np.ndarray:
    """Read ``path`` cell by cell after ``np.loadtxt`` refused it: missing cells become NaN
    (refused later, by column); ragged rows and text columns are refused here, named."""
    p = len(names)
    rows: list[list[float]] = []
    text_cells: dict[int, tuple[str, int]] = {}  # column -> (first bad cell, its line number)
    with open(path, newline="", encoding="utf-8-sig") as fh:
        for line_no, row in enumerate(csv.reader(fh, delimiter=delimiter), start=1):
            if line_no <= skip or not row:
                continue
            if len(row) != p:
                raise click.ClickException(
                    f"{path}: line {line_no} has {len(row)} fields, expected {p} (as on line "
                    f"{skip + 1}). privpca reads values separated by {delimiter!r}, one record "
                    "per line."
                )
            values = []
            for j, cell in enumerate(row):
                value = cell.strip()
                try:
                    values.append(float(value))
                except ValueError:
                    values.append(math.nan)
                    if value.lower() not in _MISSING_TOKENS and j not in text_cells:
                        text_cells[j] = (value, line_no)
            rows.append(values)
    if text_cells:
        items = [f"{names[j]!r} (e.g. {cell!r} on line {line})"
                 for j, (cell, line) in sorted(text_cells.items())]
        raise click.ClickException(
            f"{path}: non-numeric column{'s' if len(items) > 1 else ''} "
            f"{_describe_columns(items)}. privpca fit needs numbers only: drop these columns "
            "or encode them as numbers first."
        )
    return np.array(rows, dtype=np.float64).reshape(len(rows), p)


def _load_table(path: Path) -> tuple[np.ndarray, list[str], bool]:
    """``(X, feature names, has_header)`` from a CSV (header optional) or a ``.npy`` file.

    A CSV's first line is a header when any of its cells is not a number; its cells name the
    features (``x0, x1, …`` otherwise, scikit-learn's names). Missing cells (empty, ``NA``,
    ``NaN``, …), infinities and text are refused with the columns named: nothing is imputed.
    """
    if path.suffix == ".npy":
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
        X = np.asarray(data, dtype=np.float64)
        names = [f"x{j}" for j in range(X.shape[1])]
        has_header = False
        first_line = 1
    elif path.suffix in {".csv", ".txt"}:
        try:
            with open(path, newline="", encoding="utf-8-sig") as fh:
                first_text = fh.readline()
        except UnicodeDecodeError as exc:
            raise click.ClickException(f"{path}: not a UTF-8 text table ({exc}).") from exc
        delimiter = _sniff_delimiter(first_text)
        first = next(csv.reader([first_text], delimiter=delimiter), None)
        if not first:
            raise click.ClickException(f"{path}: the file is empty.")
        has_header = _looks_like_header(first)
        names = ([cell.strip() or f"x{j}" for j, cell in enumerate(first)] if has_header
                 else [f"x{j}" for j in range(len(first))])
        first_line = 2 if has_header else 1
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # "input contained no data": handled below
                X = np.loadtxt(path, delimiter=delimiter, skiprows=int(has_header), ndmin=2,
                               quotechar='"', dtype=np.float64, encoding="utf-8-sig")
        except (ValueError, UnicodeDecodeError):
            X = _parse_csv_slowly(path, names, int(has_header), delimiter)
        if X.shape[0] == 0:
            raise click.ClickException(f"{path}: no data rows" +
                                       (" below the header." if has_header else "."))
        if X.shape[1] != len(names):  # loadtxt checks the rows against each other only
            raise click.ClickException(
                f"{path}: line {first_line} has {X.shape[1]} fields, expected {len(names)} (as "
                f"on line 1). privpca reads values separated by {delimiter!r}, one record per "
                "line.")
    else:
        raise click.BadParameter(f"{path}: expected a .csv or .npy file", param_hint="DATA")
    bad = ~np.isfinite(X)
    if bad.any():
        items = []
        for j in np.flatnonzero(bad.any(axis=0)):
            rows = np.flatnonzero(bad[:, j])
            items.append(f"{names[j]!r} ({rows.size} cell{'s' if rows.size > 1 else ''}, "
                         f"first on {'line' if path.suffix != '.npy' else 'row'} "
                         f"{rows[0] + first_line})")
        raise click.ClickException(
            f"{path}: missing or non-finite values (empty, NaN or infinity) in column"
            f"{'s' if len(items) > 1 else ''} {_describe_columns(items)}. privpca does not "
            "impute: drop or fill those rows first."
        )
    return X, names, has_header


def _streamed_table(path: Path) -> tuple[Any, list[str]]:
    """A :class:`~privpca.streaming.RowSource` over DATA (with a progress bar) and its names."""
    try:
        source = as_row_source(path)
    except (ValueError, ImportError, OSError) as exc:
        raise click.ClickException(f"{path}: cannot be streamed ({exc}). Stream a .npy "
                                   "file, a Zarr store, a .parquet file or a folder of "
                                   "them.") from exc
    source.progress = True
    names = (list(source.columns) if isinstance(source, ParquetSource)
             else [f"x{j}" for j in range(source.n_features)])
    return source, names


def _cluster_table(path: Path, address: str, chunk_rows: int) -> tuple[Any, list[str], Any]:
    """``(RowSource over a lazy dask array, names, client)`` for a fit on a Dask cluster."""
    try:  # the [dask] extra, imported only when --scheduler is given
        from distributed import Client

        from privpca.streaming import DaskSource
        from privpca.streaming.dask_io import dask_table
    except ImportError as exc:
        raise click.ClickException("--scheduler needs Dask: pip install 'privpca[dask]'.") \
            from exc
    try:
        X = dask_table(path, chunk_rows=chunk_rows)
    except (ValueError, OSError) as exc:
        raise click.ClickException(f"{path}: {exc}") from exc
    try:
        client = Client(address, timeout="20s")
    except OSError as exc:
        raise click.ClickException(f"Cannot reach the Dask scheduler at {address} ({exc}). "
                                   "Nothing was fitted.") from exc
    source = DaskSource(X)
    source.progress = True
    names = _parquet_names(path) if _is_parquet(path) else [
        f"x{j}" for j in range(source.n_features)]
    return source, names, client


def _is_parquet(path: Path) -> bool:
    return path.suffix == ".parquet" or (path.is_dir() and not is_zarr_path(path))


def _parquet_names(path: Path) -> list[str]:
    return list(ParquetSource(path).columns)

