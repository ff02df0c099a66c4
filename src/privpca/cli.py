"""The ``privpca`` command line: ``demo``, ``fit``, ``reproduce``, and DPS-PCA's ``provider`` and
``server``."""

from __future__ import annotations

import ast
import json
import math
import shlex
import sys
import warnings
from pathlib import Path
from typing import Any

import click
import numpy as np

from privpca import __version__
from privpca._registry import PRIVATE_ESTIMATORS
from privpca.exceptions import BudgetExceededError, DataDependentWarning

__all__ = ["main"]


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="privpca")
def main() -> None:
    """Principal component analysis under differential privacy."""


@main.command()
@click.option(
    "--output-dir",
    "-o",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("privpca-demo"),
    show_default=True,
    help="Where the table (markdown), runs (CSV), privacy records (JSON) and plot go.",
)
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--repetitions", type=click.IntRange(min=2), default=5, show_default=True)
@click.option(
    "--epsilon", type=click.FloatRange(min=0, min_open=True), default=2.0, show_default=True
)
@click.option("--quick", is_flag=True, help="Smaller grid and fewer repetitions (seconds).")
@click.option("--no-progress", is_flag=True, help="Hide the progress bar.")
def demo(
    output_dir: Path, seed: int, repetitions: int, epsilon: float, quick: bool, no_progress: bool
) -> None:
    """Fit every estimator on synthetic data and compare errors against the truth."""
    from privpca.experiments.demo import DemoConfig, run_demo

    cfg = DemoConfig(seed=seed, repetitions=repetitions, epsilon=epsilon)
    if quick:
        cfg = DemoConfig(seed=seed, repetitions=2, epsilon=epsilon, n_grid=(5_000, 20_000))
    result = run_demo(cfg, output_dir, progress=not no_progress)
    click.echo(
        "\nSubspace distance ‖V̂V̂ᵀ − VVᵀ‖_F against the true basis "
        f"(mean ± s.e. over {cfg.repetitions} runs; max {np.sqrt(2 * cfg.n_components):.2f}):"
    )
    click.echo(result.table())
    from privpca.experiments.demo import _convergence_note

    note = _convergence_note(result)
    if note:
        click.echo(note.strip())
    click.echo(
        f"\nWrote {output_dir}/demo_summary.md, demo_runs.csv, demo_privacy.json, demo_errors.png"
    )


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
    import csv

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
    import csv

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
    from privpca.streaming import ParquetSource, as_row_source

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
    try:
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
    from privpca.streaming import is_zarr_path

    return path.suffix == ".parquet" or (path.is_dir() and not is_zarr_path(path))


def _parquet_names(path: Path) -> list[str]:
    from privpca.streaming import ParquetSource

    return list(ParquetSource(path).columns)


def _check_writable(path: Path) -> None:
    """Fail now, with a clear message, if ``path`` cannot be written (nothing is fitted)."""
    import os

    if path.is_dir():
        raise click.ClickException(f"{path}: is a directory; give a file name for the output.")
    parent = path.parent
    try:
        parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise click.ClickException(f"{path}: cannot create its folder ({exc}). Nothing was "
                                   "fitted.") from exc
    target = path if path.exists() else parent
    if not os.access(target, os.W_OK):
        raise click.ClickException(f"{path}: not writable. Nothing was fitted.")


class _NComponents(click.ParamType):
    """An int ≥ 1, or a float in (0, 1) (a share of the explained variance)."""

    name = "K"

    def convert(self, value: Any, param: Any, ctx: Any) -> int | float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            number: int | float = value
        else:
            text = str(value).strip()
            try:
                number = int(text)
            except ValueError:
                try:
                    number = float(text)
                except ValueError:
                    number = math.nan
        if isinstance(number, int) and number >= 1:
            return number
        if isinstance(number, float) and 0.0 < number < 1.0:
            return number
        self.fail(
            f"expected an int >= 1 (the number of components) or a float in (0, 1) (the share "
            f"of the explained variance to reach). Got {value!r}.", param, ctx)


class _DataNorm(click.ParamType):
    """``auto`` or a float > 0 (a public bound on the rows' norms)."""

    name = "auto|FLOAT"

    def convert(self, value: Any, param: Any, ctx: Any) -> str | float:
        if isinstance(value, str) and value.strip().lower() == "auto":
            return "auto"
        try:
            number = float(value)
        except (TypeError, ValueError):
            number = math.nan
        if not (math.isfinite(number) and number > 0):
            self.fail(f"expected 'auto' or a float in (0, inf). Got {value!r}.", param, ctx)
        return number


class _HoldoutFraction(click.ParamType):
    """``auto``, ``none`` or a fraction in (0, 1) of the rows held out for the preprocessing."""

    name = "auto|none|FLOAT"

    def convert(self, value: Any, param: Any, ctx: Any) -> str | float | None:
        if isinstance(value, str) and value.strip().lower() in ("auto", "none"):
            return None if value.strip().lower() == "none" else "auto"
        try:
            number = float(value)
        except (TypeError, ValueError):
            number = math.nan
        if not (0.0 < number < 1.0):
            self.fail(f"expected 'auto', 'none' or a float in (0, 1). Got {value!r}.", param,
                      ctx)
        return number


def _finite_or_none(value: Any) -> Any:
    """JSON-safe numbers: arrays to lists, NaN and infinities to None (JSON ``null``)."""
    if value is None:
        return None
    if isinstance(value, np.ndarray) or isinstance(value, (list, tuple)):
        return [_finite_or_none(v) for v in np.asarray(value, dtype=np.float64).tolist()]
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def _strict_json(value: Any) -> Any:
    """``value`` with every NaN or infinite float nested in it replaced by None (strict JSON
    has no NaN; the privacy record already writes its top-level infinities as text)."""
    if isinstance(value, dict):
        return {key: _strict_json(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_strict_json(item) for item in value]
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def _fit_payload(method: str, est: Any, n_features: int, names: list[str]) -> dict[str, Any]:
    """What ``privpca fit`` writes: released attributes only (NaN or absent: ``null``)."""
    params = {key: value for key, value in est.get_params().items() if key != "ledger"}
    components = np.asarray(est.components_, dtype=np.float64)
    scale = getattr(est, "scale_", None)
    data_norm = getattr(est, "data_norm_", None)
    if data_norm is None and not isinstance(params.get("data_norm"), str):
        data_norm = params.get("data_norm")
    return {
        "method": method,
        "estimator": repr(est),
        "params": _strict_json(json.loads(json.dumps(params, default=str))),
        # n as the privacy record has it: public under replace-one neighbours, null where
        # the relation makes it a private count.
        "n_samples": est.privacy_.n_samples,
        "n_features": int(n_features),
        "feature_names": names,
        "n_components": int(getattr(est, "n_components_", None) or components.shape[0]),
        "components": _finite_or_none(components),
        "mean": _finite_or_none(getattr(est, "mean_", None)),
        "scale": None if scale is None else _finite_or_none(scale),
        "data_norm": _finite_or_none(data_norm),
        "explained_variance": _finite_or_none(getattr(est, "explained_variance_", None)),
        "explained_variance_ratio": _finite_or_none(
            getattr(est, "explained_variance_ratio_", None)),
        "noise_level": _finite_or_none(getattr(est, "noise_level_", None)),
        "expected_error": _finite_or_none(getattr(est, "expected_error_", None)),
        "privacy": _strict_json(est.privacy_.to_dict()),
    }


def _summary(payload: dict[str, Any], est: Any) -> str:
    def fmt(values: Any) -> str:
        if values is None:
            return "not released"
        return ", ".join("n/a" if v is None else f"{v:.3g}" for v in values)

    lines = [
        f"{type(est).__name__}: k = {payload['n_components']} of {payload['n_features']} "
        f"features, n = {payload['n_samples'] if payload['n_samples'] is not None else 'private'}",
        f"  explained variance ratio (private): {fmt(payload['explained_variance_ratio'])}",
    ]
    error = payload["expected_error"]
    k, p = payload["n_components"], payload["n_features"]
    cap = math.sqrt(2 * min(k, p - k))
    if error is None:
        text = "not estimated by this method"
    elif error >= cap * (1 - 1e-9):
        text = f"no guarantee at this n and ε (the bound is its maximum, {cap:.3g})"
    else:
        text = f"<= {error:.3g} with probability 95 % (maximum {cap:.3g})"
    lines.append(f"  expected subspace error ‖V̂V̂ᵀ − VVᵀ‖_F: {text}")
    lines.append(f"  privacy: {est.privacy_}")
    return "\n".join(lines)


@main.command()
@click.argument("data", type=click.Path(exists=True, path_type=Path))
@click.option(
    "--method",
    "-m",
    type=click.Choice(sorted(PRIVATE_ESTIMATORS)),
    default="analyze-gauss",
    show_default=True,
    help="Estimator to fit.",
)
@click.option(
    "--n-components",
    "-k",
    type=_NComponents(),
    default="2",
    show_default=True,
    help="Number of components, or a float in (0, 1): the smallest k whose (private) "
    "explained-variance ratio reaches it.",
)
@click.option(
    "--epsilon",
    type=click.FloatRange(min=0, min_open=True),
    required=True,
    help="ε > 0 of the (ε, δ)-DP guarantee of the whole fit (centring and bound included).",
)
@click.option(
    "--delta",
    type=click.FloatRange(min=0, max=1, min_open=True, max_open=True),
    default=1e-5,
    show_default=True,
    help="0 < δ < 1; well below 1/n.",
)
@click.option(
    "--centering",
    type=click.Choice(["private", "none"]),
    default="private",
    show_default=True,
    help="'private': centre on a private mean (as PCA does); 'none': the uncentred second "
    "moment of the papers.",
)
@click.option(
    "--data-norm",
    type=_DataNorm(),
    default="auto",
    show_default=True,
    help="Bound on each (centred) row's L2 norm. 'auto': a private high quantile of the "
    "norms (a small share of ε). A float is a public bound, free; longer rows are clipped "
    "(with a warning). private-oja clips gradients at its square.",
)
@click.option(
    "--holdout-fraction",
    type=_HoldoutFraction(),
    default=None,
    help="Rows held out for the private mean and bound, released at the whole (ε, δ) while "
    "the statistic reads the rest (parallel composition). Default: the method's own ('auto' "
    "for the Gram-based methods: 2 %% from 10⁷ rows on, else none).",
)
@click.option(
    "--scale",
    is_flag=True,
    help="Divide each feature by a private standard deviation first (a correlation PCA, "
    "as after StandardScaler).",
)
@click.option(
    "--calibration",
    type=click.Choice(["analytic", "classic"]),
    default="analytic",
    show_default=True,
)
@click.option(
    "--amplification",
    type=click.Choice(["shuffle", "none"]),
    default="shuffle",
    show_default=True,
    help="private-oja only: 'shuffle' certifies ε by amplification by shuffling (records in a "
    "random order: in-memory data); 'none' the per-step guarantee, valid in any order (more "
    "noise; needed with --stream).",
)
@click.option("--seed", type=int, default=None, help="Seed (omit for fresh randomness).")
@click.option(
    "--output",
    "-o",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="JSON file for the result and privacy record (default: stdout).",
)
@click.option(
    "--stream",
    is_flag=True,
    help="Read DATA block by block instead of loading it (a .npy file is memory-mapped; "
    "Parquet and Zarr are always streamed): for tables larger than memory, with a progress "
    "bar per pass. Methods whose statistic is a sum over rows only.",
)
@click.option(
    "--scheduler",
    default=None,
    metavar="ADDRESS",
    help="A Dask scheduler (e.g. tcp://10.0.0.5:8786): the sums over rows run on its "
    "workers, which read DATA (.npy, Zarr or Parquet) at the same path; the noise is added "
    "here. Needs pip install 'privpca[dask]'.",
)
@click.option(
    "--chunk-rows",
    type=click.IntRange(min=1),
    default=1_000_000,
    show_default=True,
    help="Rows per block of a .npy file or Zarr store read by --scheduler (Zarr: rounded up "
    "to whole chunks).",
)
@click.option(
    "--plot",
    "plot_dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Folder for scree.png (eigenvalues with the noise band) and loadings.png.",
)
@click.option(
    "--show-data-warnings",
    is_flag=True,
    help="Also print the warnings whose presence depends on the data (a row above a public "
    "--data-norm was clipped, the exact Bingham sampler ran out of proposals, NumPy's "
    "RuntimeWarnings): for the data holder's eyes only, NOT for publication (a shared log or "
    "terminal). Without it they are dropped and stderr is the same whatever the data say.",
)
@click.pass_context
def fit(
    ctx: click.Context,
    data: Path,
    method: str,
    n_components: int | float,
    epsilon: float,
    delta: float,
    centering: str,
    data_norm: str | float,
    holdout_fraction: str | float | None,
    scale: bool,
    calibration: str,
    amplification: str,
    seed: int | None,
    output: Path | None,
    stream: bool,
    scheduler: str | None,
    chunk_rows: int,
    plot_dir: Path | None,
    show_data_warnings: bool,
) -> None:
    """Fit a private PCA on DATA: a CSV (header optional: it names the features), a .npy
    array, or a Parquet file or folder (streamed), one record per row, numbers only.

    On defaults it is the PCA you expect, with (ε, δ)-differential privacy for every record
    (one record replaced by another; the number of rows is public): the rows are centred on a
    private mean and clipped to a privately chosen bound, and everything released, the JSON
    included, is covered by the single (ε, δ) given. Example:

    \b
        privpca fit data.csv -k 2 --epsilon 1 --plot figures

    The JSON has the components, mean, scale, bound, explained variance (and ratio), the noise
    level, an error estimate and the privacy record; a value the method does not release is
    null. Warnings whose presence depends on the data (DataDependentWarning: e.g. rows above
    a public --data-norm were clipped) are not printed unless --show-data-warnings is given,
    so that stdout, stderr and the JSON can be published as they are.
    """
    if output is not None:
        _check_writable(output)  # before anything is read or fitted (nothing spent)
    if plot_dir is not None:
        _check_writable(plot_dir / "scree.png")
    client = None
    if scheduler is not None:
        X, names, client = _cluster_table(data, scheduler, chunk_rows)
    elif stream or data.suffix == ".parquet" or data.is_dir():
        X, names = _streamed_table(data)
    else:
        X, names, _ = _load_table(data)
    cls = PRIVATE_ESTIMATORS[method]
    accepted = cls().get_params()
    # estimator parameter -> (click parameter, value); a method gets only what it takes, and
    # an option given explicitly to a method that does not take it is refused.
    wanted: dict[str, tuple[str, Any]] = {
        "n_components": ("n_components", n_components),
        "epsilon": ("epsilon", epsilon),
        "delta": ("delta", delta),
        "centering": ("centering", None if centering == "none" else "private"),
        "data_norm": ("data_norm", data_norm),
        "scale": ("scale", scale),
        "calibration": ("calibration", calibration),
        "amplification": ("amplification", amplification),
        "random_state": ("seed", seed),
    }
    if ctx.get_parameter_source("holdout_fraction") is not click.core.ParameterSource.DEFAULT:
        wanted["holdout_fraction"] = ("holdout_fraction", holdout_fraction)
    if "clip_norm" in accepted and "data_norm" not in accepted:
        # Private Oja clips gradients x xᵀw, whose norm is ≤ ‖x‖²: the same bound, squared.
        del wanted["data_norm"]
        wanted["clip_norm"] = ("data_norm",
                               data_norm if isinstance(data_norm, str) else data_norm**2)
    params: dict[str, Any] = {}
    for key, (option, value) in wanted.items():
        if key in accepted:
            params[key] = value
        elif ctx.get_parameter_source(option) is not click.core.ParameterSource.DEFAULT:
            flag = "--" + option.replace("_", "-")
            raise click.UsageError(
                f"{flag} does not apply to {method} ({cls.__name__} takes no {key!r} "
                "parameter)."
            )
    if "progress" in accepted:  # long solvers (LocalSparsePCA's ADMM): a bar on stderr
        params["progress"] = True
    # Pure ε-DP methods may take no delta: their privacy record states what they certify.
    est: Any = cls(**params)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            est.fit(X)
        except (ValueError, BudgetExceededError) as exc:
            raise click.ClickException(str(exc)) from exc
        finally:
            if client is not None:
                client.close()
    for w in caught:
        # A data-dependent warning is one bit about the data outside the guarantee: printed
        # only on request, for the data holder (never in the JSON). NumPy's RuntimeWarnings
        # (overflow, invalid value) fire on the values too: treated the same way.
        if issubclass(w.category, DataDependentWarning | RuntimeWarning) \
                and not show_data_warnings:
            continue
        click.echo(f"warning: {w.category.__name__}: {w.message}", err=True)
    payload = _fit_payload(method, est, len(names), names)
    text = json.dumps(payload, indent=2, default=str, allow_nan=False)
    if output is None:
        click.echo(text)
    else:
        output.parent.mkdir(parents=True, exist_ok=True)
        output.write_text(text + "\n")
    click.echo(_summary(payload, est), err=True)
    written = [str(output)] if output is not None else []
    if plot_dir is not None:
        from matplotlib.figure import Figure

        from privpca import plot

        plot_dir.mkdir(parents=True, exist_ok=True)
        for name, ax in (("scree.png", plot.scree(est, ratio=True)),
                         ("loadings.png", plot.loadings(est, feature_names=names))):
            figure: Figure = ax.figure  # type: ignore[assignment]  # a Figure: ax=None
            figure.savefig(plot_dir / name)
        written += [str(plot_dir / "scree.png"), str(plot_dir / "loadings.png")]
    if written:
        click.echo(f"Wrote {', '.join(written)}", err=True)


# --- distributed DPS-PCA on Flower (needs the [federated] extra) ---------------------------------


def _flower_tool(name: str) -> str:
    import shutil

    exe = shutil.which(name) or str(Path(sys.executable).parent / name)
    if not Path(exe).exists():
        raise click.ClickException(
            f"{name} not found: install the Flower extra, pip install 'privpca[federated]'."
        )
    return exe


def _flower_env(**extra: str) -> dict[str, str]:
    """The environment with this interpreter's scripts first on PATH (Flower spawns its own
    helpers, e.g. ``flower-superexec``, by name, so they must be found from a venv too)."""
    import os

    env = {**os.environ, **extra}
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    return env


def _tls_args(insecure: bool, root_certificates: Path | None) -> list[str]:
    if insecure:
        return ["--insecure"]
    if root_certificates is None:
        raise click.UsageError("Give --root-certificates (TLS) or --insecure (trusted network).")
    return ["--root-certificates", str(root_certificates)]


@main.command()
@click.argument("data", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--superlink", required=True, help="HOST:PORT of the Flower SuperLink.")
@click.option("--provider-id", default=None, help="Public name (default: DATA's file stem).")
@click.option("--n-components", "-k", type=click.IntRange(min=1), required=True)
@click.option("--epsilon", type=click.FloatRange(min=0, min_open=True), required=True,
              help="This provider's ε for all its releases together.")
@click.option("--delta", type=click.FloatRange(min=0, max=1, min_open=True, max_open=True),
              default=1e-5, show_default=True)
@click.option("--n-rounds", "-T", type=click.IntRange(min=1), default=10, show_default=True,
              help="Releases this provider agrees to make, ever, for DATA.")
@click.option("--centering", type=click.Choice(["private", "none"]), default="private",
              show_default=True, help="'private': take part in the private mean; 'none': the "
              "papers' uncentred second moment (the server must use the same).")
@click.option("--data-norm", type=_DataNorm(), default="auto", show_default=True,
              help="'auto' (a private 99 % quantile of this provider's centred row norms) or "
              "a public bound.")
@click.option("--budget-shares", default=None,
              help="JSON object of part -> share of this provider's budget, e.g. "
              "'{\"mean\": 0.05}'.")
@click.option("--state", "state_path", type=click.Path(dir_okay=False, path_type=Path),
              default=None, help="Release-count file (default: DATA + '.privpca-state.json').")
@click.option("--noise-seed", type=int, default=None,
              help="Seed the noise (experiments only: whoever knows it can remove the noise).")
@click.option("--stream", is_flag=True,
              help="Read a .npy DATA by one pass per release (memory-mapped) instead of "
              "holding it in memory (a .parquet DATA is always streamed).")
@click.option("--port", type=int, default=9094, show_default=True,
              help="Local port of the SuperNode's runtime API (one per provider on a machine).")
@click.option("--insecure", is_flag=True, help="No TLS (only on a trusted network).")
@click.option("--root-certificates", type=click.Path(exists=True, path_type=Path), default=None)
@click.option("--isolation", type=click.Choice(["process", "subprocess"]), default="process",
              show_default=True,
              help="'process': one long-running process answers every message (privpca's "
              "ClientApp only), polling every --poll seconds while a run is active; "
              "'subprocess': Flower's stock SuperNode (a fresh ClientApp process per message, "
              "3 s polls).")
@click.option("--poll", type=click.FloatRange(min=0.005, max=3.0), default=0.1,
              show_default=True,
              help="Seconds between polls of the SuperLink while a run is active "
              "(--isolation process; idle, it backs off to Flower's 3 s).")
def provider(
    data: Path, superlink: str, provider_id: str | None, n_components: int, epsilon: float,
    delta: float, n_rounds: int, centering: str, data_norm: float | str,
    budget_shares: str | None, state_path: Path | None,
    noise_seed: int | None, stream: bool, port: int, insecure: bool,
    root_certificates: Path | None, isolation: str, poll: float,
) -> None:
    """Serve DATA as a DPS-PCA provider: a Flower SuperNode that answers at most T queries.

    DATA (.npy, .parquet or CSV without header) stays on this machine; only noised answers
    leave it.
    """
    if data.suffix not in {".npy", ".csv", ".txt", ".parquet"}:
        raise click.BadParameter(f"{data}: expected a .npy, .parquet or .csv file",
                                 param_hint="DATA")
    state = state_path or data.with_name(data.name + ".privpca-state.json")
    cfg: dict[str, Any] = {
        "data-path": str(data.resolve()), "provider-id": provider_id or data.stem,
        "n-components": n_components, "epsilon": epsilon, "delta": delta, "n-rounds": n_rounds,
        "data-norm": data_norm, "centering": centering, "state-path": str(state.resolve()),
    }
    if noise_seed is not None:
        cfg["noise-seed"] = noise_seed
    if stream:
        cfg["stream"] = True
    node_config = " ".join(f"{k}={json.dumps(v)}" for k, v in cfg.items())
    if budget_shares is not None:
        try:
            shares = json.loads(budget_shares)
        except json.JSONDecodeError as exc:
            raise click.BadParameter(str(exc), param_hint="--budget-shares") from exc
        # Single quotes: Flower's node-config parser refuses double-quoted values with quotes.
        node_config += " budget-shares='" + json.dumps(shares, separators=(",", ":")) + "'"
    import os

    args = [_flower_tool("flower-supernode"), *_tls_args(insecure, root_certificates),
            "--superlink", superlink, "--port", str(port), "--node-config", node_config]
    if isolation == "process":
        from privpca.federated.flower_node import run_provider_node

        click.echo(f"privpca provider (in process, poll {poll:g} s): {' '.join(args[1:])}",
                   err=True)
        run_provider_node(args[1:], f"127.0.0.1:{port}", poll=poll)
        return
    click.echo(f"privpca provider: {' '.join(args[1:])}", err=True)
    os.execve(args[0], args, _flower_env())


@main.command()
@click.option("--superlink", required=True,
              help="HOST:PORT of the Flower SuperLink (its control API; one port in Flower 1.41).")
@click.option("--n-features", "-d", type=click.IntRange(min=1), required=True)
@click.option("--n-components", "-k", type=click.IntRange(min=1), required=True)
@click.option("--n-nonzero", type=click.IntRange(min=1), default=None,
              help="ŝ, rows kept by Threshold (default: all, no sparsity).")
@click.option("--n-rounds", "-T", type=click.IntRange(min=1), default=10, show_default=True)
@click.option("--n-providers", "-N", type=click.IntRange(min=1), required=True)
@click.option("--seed", type=int, default=None, help="Seed of Q⁽⁰⁾ (data-independent).")
@click.option("--init", type=click.Choice(["random", "random-sparse"]), default="random",
              show_default=True)
@click.option("--on-dropout", type=click.Choice(["error", "continue"]), default="error",
              show_default=True)
@click.option("--round-timeout", type=float, default=120.0, show_default=True)
@click.option("--wait-timeout", type=float, default=120.0, show_default=True,
              help="Seconds to wait for N providers to connect.")
@click.option("--centering", type=click.Choice(["private", "none"]), default="private",
              show_default=True, help="Must match the providers'.")
@click.option("--data-norm", type=_DataNorm(), default="auto", show_default=True,
              help="Must match the providers'.")
@click.option("--output", "-o", type=click.Path(dir_okay=False, path_type=Path), required=True,
              help="Result JSON, written by the ServerApp on the SuperLink's machine.")
@click.option("--insecure", is_flag=True, help="No TLS (only on a trusted network).")
@click.option("--root-certificates", type=click.Path(exists=True, path_type=Path), default=None)
@click.option("--poll", type=click.FloatRange(min=0.005, max=3.0), default=0.05,
              show_default=True, help="Seconds between the server's polls for replies.")
def server(
    superlink: str, n_features: int, n_components: int, n_nonzero: int | None, n_rounds: int,
    n_providers: int, seed: int | None, init: str, on_dropout: str, round_timeout: float,
    wait_timeout: float, centering: str, data_norm: float | str, output: Path, insecure: bool,
    root_certificates: Path | None, poll: float,
) -> None:
    """Run DPS-PCA's server: submit privpca's Flower app to the SuperLink and wait for it."""
    import subprocess
    import tempfile

    from privpca.federated.flower_app import write_app_dir

    _tls_args(insecure, root_certificates)
    run_config = {
        "n-features": n_features, "n-components": n_components,
        "n-nonzero": n_nonzero or n_features, "n-rounds": n_rounds, "n-providers": n_providers,
        "seed": -1 if seed is None else seed, "init": init, "on-dropout": on_dropout,
        "round-timeout": round_timeout, "wait-timeout": wait_timeout,
        "centering": centering, "data-norm": data_norm, "poll-interval": poll,
        "output-path": str(output.resolve()),
    }
    with tempfile.TemporaryDirectory(prefix="privpca-flwr-") as tmp:
        app = write_app_dir(Path(tmp) / "app", run_config)
        home = Path(tmp) / "home"
        home.mkdir()
        conn = [f'address = "{superlink}"']
        conn.append("insecure = true" if insecure else f'root-certificates = "{root_certificates}"')
        (home / "config.toml").write_text(
            '[superlink]\ndefault = "privpca"\n\n[superlink.privpca]\n' + "\n".join(conn) + "\n"
        )
        env = _flower_env(FLWR_HOME=str(home))
        proc = subprocess.run([_flower_tool("flwr"), "run", str(app), "privpca", "--stream"],
                              env=env, check=False)
    if proc.returncode != 0:
        raise click.ClickException(f"flwr run exited with status {proc.returncode}.")
    if output.exists():
        result = json.loads(output.read_text())
        click.echo(f"DPS-PCA: {result['status']}, {result['rounds_completed']} rounds; "
                   f"result in {output}", err=True)
        if result["status"] != "ok":
            raise click.ClickException(str(result.get("error")))


def _parse_params(params: tuple[str, ...]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for item in params:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise click.BadParameter(f"expected KEY=VALUE, got {item!r}", param_hint="--param")
        try:
            out[key.strip()] = ast.literal_eval(value)
        except (ValueError, SyntaxError):
            out[key.strip()] = value  # a bare string
    return out


@main.command()
@click.argument("names", nargs=-1)
@click.option("--list", "list_", is_flag=True, help="List the registered experiments and exit.")
@click.option("--all", "all_", is_flag=True, help="Run every available experiment in turn.")
@click.option(
    "--quick", is_flag=True, help="Small sizes and few repetitions (seconds; what CI runs)."
)
@click.option("--seed", type=int, default=0, show_default=True, help="Base seed of the run.")
@click.option(
    "--output",
    "-o",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("privpca-results"),
    show_default=True,
    help="Folder for NAME.csv (every run), NAME.png (plot) and NAME.md (summary).",
)
@click.option(
    "--param",
    "-p",
    "params",
    multiple=True,
    metavar="KEY=VALUE",
    help="Override one parameter of the chosen set (VALUE is a Python literal), e.g. "
    "-p repetitions=5 -p 'eps_grid=(0.5, 1.0)'. Repeatable.",
)
@click.option("--no-progress", is_flag=True, help="Hide the progress bar.")
def reproduce(
    names: tuple[str, ...],
    list_: bool,
    all_: bool,
    quick: bool,
    seed: int,
    output: Path,
    params: tuple[str, ...],
    no_progress: bool,
) -> None:
    """Reproduce an experiment of the papers: privpca reproduce NAME [NAME ...]."""
    from privpca.experiments.registry import get_experiment, list_experiments
    from privpca.experiments.runner import run_experiment

    if list_:
        for exp in list_experiments():
            missing = exp.missing_requirements()
            state = f"  [unavailable: needs {', '.join(missing)}]" if missing else ""
            click.echo(f"{exp.name}{state}\n    {exp.paper}, {exp.figure}\n    {exp.description}")
        return
    if all_:
        names = tuple(e.name for e in list_experiments() if not e.missing_requirements())
    if not names:
        raise click.UsageError("Name an experiment (see --list), or pass --all.")
    try:
        experiments = [get_experiment(name) for name in names]
    except KeyError as exc:
        raise click.UsageError(str(exc.args[0])) from exc
    for exp in experiments:
        missing = exp.missing_requirements()
        if missing:
            raise click.ClickException(f"{exp.name} needs {', '.join(missing)}.")
    overrides = _parse_params(params)
    for exp in experiments:
        command = "privpca reproduce " + exp.name + (" --quick" if quick else "")
        command += f" --seed {seed} -o {output}"
        command += "".join(f" -p {shlex.quote(p)}" for p in params)
        try:
            out = run_experiment(
                exp,
                quick=quick,
                seed=seed,
                output_dir=output,
                progress=not no_progress,
                command=command,
                **overrides,
            )
        except ValueError as exc:
            raise click.ClickException(f"{exp.name}: {exc}") from exc
        click.echo(
            f"{exp.name}: {len(out.result.rows)} runs in {out.elapsed:.1f} s -> "
            f"{out.csv_path}, {out.png_path}, {out.md_path}"
        )


# privpca audit (issue 14): the command lives in privpca.audit.cli.
from privpca.audit.cli import audit_command  # noqa: E402

main.add_command(audit_command)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
