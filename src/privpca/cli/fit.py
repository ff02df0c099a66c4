"""``privpca fit``: a private PCA of one table, its JSON, summary and plots."""

from __future__ import annotations

import json
import os
import warnings
from pathlib import Path
from typing import Any

import click

from privpca._registry import PRIVATE_ESTIMATORS
from privpca.cli.columns import MissingPolicy
from privpca.cli.options import _DataNorm, _HoldoutFraction, _NComponents
from privpca.cli.payload import _fit_payload, _summary
from privpca.cli.tables import _read_table
from privpca.exceptions import BudgetExceededError, DataDependentWarning

__all__ = ["fit"]


def _check_writable(path: Path) -> None:
    """Fail now, with a clear message, if ``path`` cannot be written (nothing is fitted)."""
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


@click.command()
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
    "--columns",
    default=None,
    metavar="SPEC",
    help="The feature columns, in this order: comma-separated names, 0-based indices or "
    "inclusive ranges a:b of either (e.g. age:income,7). Needed when DATA has text columns "
    "or columns named as identifiers (id, *_id, index, pandas' index). A header name wins "
    "over an index reading.",
)
@click.option(
    "--missing",
    type=MissingPolicy(),
    default="refuse",
    show_default=True,
    help="Missing cells (empty, NA, NaN; Parquet nulls): 'refuse', or a public number put "
    "in every one (free; no row is dropped, n stays public). Infinities are always refused. "
    "The JSON records the policy, never how many cells were filled.",
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
    columns: str | None,
    missing: float | None,
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
    X, names, client = _read_table(data, columns=columns, missing=missing, stream=stream,
                                   scheduler=scheduler, chunk_rows=chunk_rows,
                                   show_data_warnings=show_data_warnings)
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
    payload["missing"] = "refuse" if missing is None else missing  # the policy, never a count
    text = json.dumps(payload, indent=2, default=str, allow_nan=False)
    if output is None:
        click.echo(text)
    else:
        output.parent.mkdir(parents=True, exist_ok=True)
        output.write_text(text + "\n")
    click.echo(_summary(payload, est), err=True)
    written = [str(output)] if output is not None else []
    if plot_dir is not None:
        # matplotlib only when plots are asked for (privpca --help stays fast)
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
