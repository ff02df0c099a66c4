"""``privpca fit``: a private PCA of one table, its JSON, summary and plots."""

from __future__ import annotations

import contextlib
import inspect
import json
import os
import sys
import threading
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click
from sklearn.utils._param_validation import InvalidParameterError

from privpca._registry import PRIVATE_ESTIMATORS, TRUST_MODELS
from privpca.cli.columns import MissingPolicy
from privpca.cli.options import _Declared, _ScoresDelta
from privpca.cli.payload import _fit_payload, _summary
from privpca.cli.refusals import option_refused, refusal_says_what_was_spent
from privpca.cli.scores import release_scores, scores_payload, scores_summary
from privpca.cli.tables import TEXT_SUFFIXES, _read_table
from privpca.exceptions import DataDependentWarning
from privpca.pca import AUTO_OPTIONS, MODELS, select_mechanism
from privpca.streaming import is_streamed

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
    type=click.Choice(["auto", *sorted(PRIVATE_ESTIMATORS)]),
    default="analyze-gauss",
    show_default=True,
    help="Estimator to fit. 'auto': privpca.PCA picks it from public quantities only "
    "(--model, --delta, the number of columns): Analyze Gauss in the central model, Bingham "
    "with --delta 0, the noisy power method above 4096 columns, local-gaussian with --model "
    "local, dps-pca with --model distributed; the JSON and the summary say which and why.",
)
@click.option(
    "--model",
    type=click.Choice(list(MODELS)),
    default="central",
    show_default=True,
    help="The trust model: a curator sees the raw rows ('central'), each provider only its "
    "own ('distributed'), or nobody ('local'). Chooses the mechanism with --method auto; a "
    "named --method needing more trust is refused.",
)
@click.option(
    "--n-components",
    "-k",
    type=_Declared("n_components", int, float),
    default="2",
    show_default=True,
    help="Number of components, or a float in (0, 1): the smallest k whose (private) "
    "explained-variance ratio reaches it.",
)
@click.option(
    "--epsilon",
    type=float,
    default=None,
    help="Required: ε > 0 of the (ε, δ)-DP guarantee of the whole fit (centring and bound "
    "included).",
)
@click.option(
    "--delta",
    type=float,
    default=1e-5,
    show_default=True,
    help="0 < δ < 1; well below 1/n. 0 (pure ε-DP): bingham only (or --method auto), with "
    "--centering none and a public --data-norm.",
)
@click.option(
    "--centering",
    type=_Declared("centering"),
    default="private",
    show_default=True,
    help="'private': centre on a private mean (as PCA does); 'none': the uncentred second "
    "moment of the papers.",
)
@click.option(
    "--data-norm",
    type=_Declared("data_norm", float),
    default="auto",
    show_default=True,
    help="Bound on each (centred) row's L2 norm. 'auto': chosen privately for the table; for "
    "analyze-gauss, mod-sulq, noisy-power and bingham (up to 256 columns) the pilot Grams of "
    "a ladder of candidates (a fifth of ε) choose between the private median of the norms "
    "and bounds above it ('select' names that rule), for the central others (and "
    "'quantile') it is a private 0.99 quantile of the norms (a small share of ε), for the "
    "local model the 75 % quantile of the users' reported norm bins. "
    "A float is a public bound, free; longer rows are clipped (with a warning). private-oja "
    "clips gradients at its square.",
)
@click.option(
    "--holdout-fraction",
    type=_Declared("holdout_fraction", float),
    default=None,
    help="Rows held out for the private mean and bound, released at the whole (ε, δ) while "
    "the statistic reads the rest (parallel composition). Default: the method's own ('auto' "
    "for the Gram-based methods: 2 % from 10⁷ rows on, else none).",
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
    "--header/--no-header",
    default=None,
    help="Whether a CSV's line 1 is its header (it names the features, published in the "
    "JSON). Default: it is, and a line 1 with no name on it (only numbers or missing cells) "
    "is refused as more likely a record. --no-header: line 1 is a record and the columns are "
    "x0, x1, …; --header: line 1 is the header even if its names are numbers (pandas' "
    "default labels 0, 1, …). Never decided from the values.",
)
@click.option(
    "--missing",
    type=MissingPolicy(),
    default="refuse",
    show_default=True,
    help="Missing cells (empty, NA, NaN; Parquet nulls): 'refuse', or a public number put "
    "in every one, the same in every column (free; no row is dropped, n stays public). Choose "
    "it without looking at this table (e.g. a clinical reference value): one worked out from "
    "it (its own mean) leaks outside the guarantee. Infinities are always refused. The JSON "
    "records the policy, never how many cells were filled.",
)
@click.option(
    "--scale",
    is_flag=True,
    help="Divide each feature by a private standard deviation first (a correlation PCA, "
    "as after StandardScaler).",
)
@click.option(
    "--calibration",
    type=_Declared("calibration"),
    default="analytic",
    show_default=True,
)
@click.option(
    "--amplification",
    type=_Declared("amplification"),
    default="shuffle",
    show_default=True,
    help="private-oja only: 'shuffle' certifies ε by amplification by shuffling (records in a "
    "random order: in-memory data); 'none' the per-step guarantee, valid in any order (more "
    "noise; needed with --stream).",
)
@click.option("--seed", "random_state", type=int, default=None,
              help="Seed (omit for fresh randomness).")
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
    "--report",
    "report_path",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Write a release report: one self-contained HTML page (no network needed) with the "
    "guarantee, every spend, the scree and loadings plots, the expected error, the command "
    "and the versions, for whoever approves the release.",
)
@click.option(
    "--scores-epsilon",
    type=click.FloatRange(min=0, min_open=True),
    default=None,
    help="Also release a private score plot (the rows projected on PC1 and PC2, a noisy 2-D "
    "histogram) with this ε of its OWN, on top of --epsilon: scores.png in the --plot "
    "folder, a section of the --report, and its counts and record in the JSON.",
)
@click.option(
    "--scores-delta",
    type=_ScoresDelta(),
    default=0.0,
    show_default=True,
    help="δ of the score plot: 0 for Laplace noise (pure ε-DP), else Gaussian noise.",
)
@click.option(
    "--scores-bins",
    type=click.IntRange(min=2, max=4096),
    default=20,
    show_default=True,
    help="Cells per axis of the score plot.",
)
@click.option(
    "--scores-bound",
    type=click.FloatRange(min=0, min_open=True),
    default=None,
    help="Public box [-r, r]² the projections are clipped to. Default: ±4 released standard "
    "deviations of each component's scores (from the released explained variances: free), "
    "or [-D, D]² with the fit's bound D where no variance was released. Never choose it by "
    "looking at the data.",
)
@click.option(
    "--show-data-warnings",
    is_flag=True,
    help="Also print the warnings whose presence depends on the data (a row above a public "
    "--data-norm was clipped, the exact Bingham sampler ran out of proposals, NumPy's "
    "RuntimeWarnings) and the diagnosis of a refused table (which columns, lines and cells): "
    "for the data holder's eyes only, NOT for publication (a shared log or terminal). Without "
    "it they are dropped: a refusal says only what kind of problem it is, and stderr is the "
    "same whatever the data say.",
)
@click.pass_context
def fit(
    ctx: click.Context, data: Path, method: str, model: str, n_components: int | float,
    epsilon: float | None, delta: float, centering: str, data_norm: str | float,
    holdout_fraction: str | float | None, columns: str | None, header: bool | None,
    missing: float | None, scale: bool, calibration: str, amplification: str,
    random_state: int | None, output: Path | None, stream: bool, scheduler: str | None,
    chunk_rows: int, plot_dir: Path | None, report_path: Path | None,
    scores_epsilon: float | None, scores_delta: float, scores_bins: int,
    scores_bound: float | None, show_data_warnings: bool,
) -> None:
    """Fit a private PCA on DATA: a CSV (line 1 is the header, naming the features, unless
    --no-header), a .npy array, or a Parquet file or folder (streamed), one record per row,
    numbers only.

    On defaults it is the PCA you expect, with (ε, δ)-differential privacy for every record
    (one record replaced by another; the number of rows is public): the rows are centred on a
    private mean and clipped to a privately chosen bound, and everything released, the JSON
    included, is covered by the single (ε, δ) given. Example:

    \b
        privpca fit data.csv -k 2 --epsilon 1 --plot figures
        privpca fit data.csv -k 2 --epsilon 1 --report release.html --scores-epsilon 0.2
        privpca fit data.csv -k 2 --epsilon 1 --method auto --model local

    The JSON has the components, mean, scale, bound, explained variance (and ratio), the noise
    level, an error estimate and the privacy record; a value the method does not release is
    null. With --method auto it also has the model, the mechanism chosen and why. Warnings
    whose presence depends on the data (DataDependentWarning: e.g. rows above a public
    --data-norm were clipped) are not printed unless --show-data-warnings is given, so that
    stdout, stderr and the JSON can be published as they are; nor are the columns, lines and
    cells behind a refusal of the table.
    """
    if epsilon is None:
        raise click.UsageError(
            "Missing option '--epsilon': the privacy budget of this fit, ε > 0 (e.g. "
            "--epsilon 1). Smaller is more private and noisier; every fit of the same rows "
            "spends its own ε.")
    _refuse_io_options(ctx, data, output=output, plot_dir=plot_dir, report_path=report_path,
                       scores_epsilon=scores_epsilon, stream=stream, scheduler=scheduler,
                       header=header)
    # Refused before the table is read: a combination no mechanism honours, and a value the
    # estimator's declared constraints refuse (for auto, those of its choice at unknown width).
    _refuse_combination(method, model, delta, centering, data_norm, scale)
    name, reason, est = _choose(ctx, method, model, delta, None)
    X, names, client = _read_table(data, columns=columns, missing=missing, stream=stream,
                                   scheduler=scheduler, chunk_rows=chunk_rows,
                                   show_data_warnings=show_data_warnings, header=header)
    if method == "auto":  # the one choice, from the table's width (public)
        name, reason, est = _choose(ctx, method, model, delta, len(names))
    # A table in memory has no block bars: at a terminal, the time so far (a 20 000 × 2 000
    # fit takes seconds); streamed tables show their passes instead.
    with _elapsed(f"fitting {type(est).__name__}",
                  show=client is None and not is_streamed(X) and _is_terminal(sys.stderr)):
        _fit_quietly(est, X, client, show_data_warnings)
    payload = _fit_payload(method, est, len(names), names)
    payload["missing"] = "refuse" if missing is None else missing  # the policy, never a count
    if method == "auto":
        payload.update(model=model, mechanism=name, selection_reason=reason)
    score_ax = None
    if scores_epsilon is not None:
        score_ax = release_scores(est, X, scores_epsilon, scores_delta, scores_bins,
                                  scores_bound, random_state, show_data_warnings)
        payload["score_plot"] = scores_payload(score_ax)
    _write_json(payload, output)
    click.echo(_summary(payload, est), err=True)
    if score_ax is not None:
        click.echo(scores_summary(score_ax, est.privacy_), err=True)
    written = [str(output)] if output is not None else []
    written += _write_figures(ctx, est, names, plot_dir, report_path, score_ax,
                              _input_rows(data, missing))
    if written:
        click.echo(f"Wrote {', '.join(written)}", err=True)


def _choose(ctx: click.Context, method: str, model: str, delta: float,
            n_features: int | None) -> tuple[str, str, Any]:
    """The mechanism, why ``--method auto`` chose it ("" when named) and its estimator, built
    and checked; ``auto`` chooses from public quantities: ``n_features`` is the table's width
    (None: not read yet)."""
    if method != "auto":
        return method, "", _estimator(ctx, method, auto=False)
    name, reason = select_mechanism(n_features, delta=delta, model=model)
    return name, reason, _estimator(ctx, name, auto=True)


def _write_json(payload: dict[str, Any], output: Path | None) -> None:
    """The fit's JSON to ``output``, else to stdout when piped (at a terminal: how to get it)."""
    text = json.dumps(payload, indent=2, default=str, allow_nan=False)
    if output is None and not _is_terminal(sys.stdout):
        click.echo(text)  # piped: the JSON is the output
    elif output is None:
        click.echo("The full JSON (components, mean, bound, privacy record): -o FILE, or "
                   "pipe stdout.", err=True)
    else:
        output.parent.mkdir(parents=True, exist_ok=True)
        output.write_text(text + "\n")


def _input_rows(data: Path, missing: float | None) -> list[tuple[str, str]]:
    """The release report's lines on the input: the file, and what filled its missing cells."""
    return [("input", str(data)),
            ("missing values", "refused: none may be missing" if missing is None else
             f"set to {missing:g} in every column's missing cells, a public value "
             "given with --missing (to be chosen without looking at this table)")]


@contextlib.contextmanager
def _elapsed(desc: str, *, show: bool) -> Iterator[None]:
    """While the body runs, ``desc: elapsed`` on stderr, refreshed twice a second."""
    if not show:
        yield
        return
    from tqdm.auto import tqdm

    stop = threading.Event()
    with tqdm(desc=desc, bar_format="{desc}: {elapsed}", leave=False) as bar:
        def tick() -> None:
            while not stop.wait(0.5):
                bar.refresh()

        ticker = threading.Thread(target=tick, daemon=True)
        ticker.start()
        try:
            yield
        finally:
            stop.set()
            ticker.join()


def _is_terminal(stream: Any) -> bool:
    """Whether ``stream`` is a terminal (a person reading), not a pipe or a file."""
    isatty = getattr(stream, "isatty", None)
    return bool(isatty is not None and isatty())


def _refuse_io_options(ctx: click.Context, data: Path, *, output: Path | None,
                       plot_dir: Path | None, report_path: Path | None,
                       scores_epsilon: float | None, stream: bool, scheduler: str | None,
                       header: bool | None) -> None:
    """Refuse an unwritable output or an option that does not fit the input, before anything
    is read or fitted (nothing spent)."""
    if output is not None:
        _check_writable(output)
    if plot_dir is not None:
        _check_writable(plot_dir / "scree.png")
    if report_path is not None:
        _check_writable(report_path)
    if scores_epsilon is None:
        for option in ("scores_delta", "scores_bins", "scores_bound"):
            if ctx.get_parameter_source(option) is not click.core.ParameterSource.DEFAULT:
                raise click.UsageError(f"--{option.replace('_', '-')} needs --scores-epsilon "
                                       "(the score plot's own budget).")
    elif stream or scheduler is not None or data.suffix == ".parquet" or data.is_dir():
        raise click.UsageError("--scores-epsilon needs the table in memory: not with --stream, "
                               "--scheduler, Parquet or a folder.")
    if header is not None and (data.suffix not in TEXT_SUFFIXES or data.is_dir() or stream
                               or scheduler is not None):
        flag = "--header" if header else "--no-header"
        raise click.UsageError(f"{flag} is for a CSV read into memory: a .npy file has no "
                               "header (x0, x1, …), Parquet's names are in its schema.")


def _fit_quietly(est: Any, X: Any, client: Any, show_data_warnings: bool) -> None:
    """Fit ``est``, close the scheduler, and print the warnings that are public."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            with refusal_says_what_was_spent(show_data_warnings):
                est.fit(X)
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


def _write_figures(ctx: click.Context, est: Any, names: list[str], plot_dir: Path | None,
                   report_path: Path | None, score_ax: Any,
                   input_rows: list[tuple[str, str]]) -> list[str]:
    """The scree and loadings figures (and the score plot) under ``plot_dir``, the release
    report at ``report_path``; the paths written."""
    written: list[str] = []
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
        if score_ax is not None:
            score_ax.figure.savefig(plot_dir / "scores.png")
            written.append(str(plot_dir / "scores.png"))
    if report_path is not None:
        from privpca.report import write_release_report

        write_release_report(est, report_path, command=_command_line(ctx),
                             feature_names=names, scores=score_ax, data=input_rows)
        written.append(str(report_path))
    return written


def _refuse_combination(method: str, model: str, delta: float, centering: str | None,
                        data_norm: str | float, scale: bool) -> None:
    """Refuse, before the table is read and in the shell's words, a --method that needs more
    trust than --model grants and a --delta 0 that no mechanism of the fit could honour (the
    rules of :func:`~privpca.pca.select_mechanism` and :class:`~privpca.PCA`)."""
    if method != "auto" and MODELS.index(TRUST_MODELS[method]) < MODELS.index(model):
        fitting = ", ".join(n for n, m in sorted(TRUST_MODELS.items())
                            if MODELS.index(m) >= MODELS.index(model))
        raise click.UsageError(
            f"--method {method} runs in the {TRUST_MODELS[method]} model: it needs more trust "
            f"than --model {model} grants. Choose one of {fitting}, or --method auto."
        )
    if delta != 0:
        return
    if model != "central":
        raise click.UsageError(
            f"--delta 0 (pure ε-DP) has no mechanism in the {model} model: its mechanisms add "
            "Gaussian noise. Give --delta > 0, or --model central (the exponential mechanism, "
            "bingham)."
        )
    if method not in ("auto", "bingham"):
        raise click.UsageError(
            f"--delta 0 (pure ε-DP) is for bingham (the exponential mechanism) only: {method} "
            "adds Gaussian noise. Give --delta > 0, or --method bingham (or auto)."
        )
    if centering is not None or isinstance(data_norm, str) or scale:
        raise click.UsageError(
            "--delta 0 (pure ε-DP) needs a public centre and norm bound: give --centering none "
            "and --data-norm D (a public bound on the rows' norms, never read off the data), "
            "without --scale. The private mean, norm bound and scales are Gaussian releases "
            "and need --delta > 0."
        )


def _estimator(ctx: click.Context, name: str, *, auto: bool) -> Any:
    """The estimator ``name``, built once: every option named as one of its parameters
    (``--seed`` is ``random_state``), on top of what ``--method auto`` sets on its choice
    (:data:`~privpca.pca.AUTO_OPTIONS`); an option left at a None default is left to the
    estimator, and one given for an estimator that does not take it is refused. Private Oja
    clips gradients x xᵀw, of norm ≤ ‖x‖²: ``--data-norm D`` is its clip_norm D²."""
    params = dict(AUTO_OPTIONS.get(name, {})) if auto else {}
    cls = PRIVATE_ESTIMATORS[name]
    takes = inspect.signature(cls).parameters
    declared = {p for c in PRIVATE_ESTIMATORS.values() for p in inspect.signature(c).parameters}
    for option in ctx.command.params:
        key, value = option.name or "", ctx.params.get(option.name or "")
        given = ctx.get_parameter_source(key) is not click.core.ParameterSource.DEFAULT
        if key == "data_norm" and "clip_norm" in takes and key not in takes:
            key = "clip_norm"
            value = value**2 if isinstance(value, float) and value > 0 else value
        if key not in declared or (value is None and not given):
            continue
        if key not in takes and given:
            raise click.UsageError(f"{max(option.opts, key=len)} does not apply to {name} "
                                   f"({cls.__name__} takes no {key!r} parameter).")
        if key in takes:
            params[key] = value
    if "progress" in takes:  # long solvers (LocalSparsePCA's ADMM): a bar on stderr
        params["progress"] = True
    est = cls(**params)
    try:
        if hasattr(est, "_validate_params"):  # scikit-learn's check of the declared values
            est._validate_params()
    except InvalidParameterError as exc:
        raise option_refused(exc) from exc
    return est


#: Environment variables that change how the guarantee is implemented (secure mode: where the
#: noise comes from), shown before the command in the report when set.
ENVIRONMENT_SETTINGS = ("PRIVPCA_SECURE_MODE",)


def _command_line(ctx: click.Context) -> list[str]:
    """The command as typed (``sys.argv`` when run as ``privpca`` or ``python -m privpca``),
    else rebuilt from the options given (a caller that invoked the command in-process), after
    the :data:`ENVIRONMENT_SETTINGS` that are set (``PRIVPCA_SECURE_MODE=1 privpca fit …``)."""
    import sys

    # Settings of the environment that change how the guarantee is implemented come first.
    env = [f"{key}={os.environ[key]}" for key in ENVIRONMENT_SETTINGS if key in os.environ]
    program = Path(sys.argv[0]) if sys.argv else Path()
    if program.name == "privpca" or (program.name == "__main__.py"
                                     and program.parent.name in ("privpca", "cli")):
        return [*env, "privpca", *sys.argv[1:]]
    words = [*env, "privpca", *ctx.command_path.split()[1:]]
    for param in ctx.command.params:
        name = param.name or ""
        value = ctx.params.get(name)
        if isinstance(param, click.Argument):
            words.append(str(value))
        elif ctx.get_parameter_source(name) is not click.core.ParameterSource.DEFAULT:
            flag = max(param.opts, key=len)
            words += [flag] if getattr(param, "is_flag", False) else [flag, str(value)]
    return words
