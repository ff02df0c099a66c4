"""The experiments' commands: ``privpca demo`` (every estimator on synthetic data) and
``privpca reproduce`` (the papers' registered experiments)."""

from __future__ import annotations

import ast
import shlex
from pathlib import Path
from typing import Any

import click
import numpy as np

__all__ = ["demo", "reproduce"]


@click.command()
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
    # The experiments (and matplotlib) load only when a command runs: privpca --help stays fast.
    from privpca.experiments.demo import DemoConfig, _convergence_note, run_demo

    cfg = DemoConfig(seed=seed, repetitions=repetitions, epsilon=epsilon)
    if quick:
        cfg = DemoConfig(seed=seed, repetitions=2, epsilon=epsilon, n_grid=(5_000, 20_000))
    result = run_demo(cfg, output_dir, progress=not no_progress)
    click.echo(
        "\nSubspace distance ‖V̂V̂ᵀ − VVᵀ‖_F against the true basis "
        f"(mean ± s.e. over {cfg.repetitions} runs; max {np.sqrt(2 * cfg.n_components):.2f}):"
    )
    click.echo(result.table())
    note = _convergence_note(result)
    if note:
        click.echo(note.strip())
    click.echo(
        f"\nWrote {output_dir}/demo_summary.md, demo_runs.csv, demo_privacy.json, demo_errors.png"
    )


def _check_overrides(exp: Any, quick: bool, overrides: dict[str, Any]) -> None:
    """Refuse ``-p`` keys the experiment does not take, and text where it takes a number."""
    hint = "'-p' / '--param'"
    try:
        defaults = exp.params(quick=quick)
        exp.params(quick=quick, **overrides)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint=hint) from exc
    for key, value in overrides.items():
        default = defaults[key]
        number = isinstance(default, int | float) and not isinstance(default, bool)
        if number and not (isinstance(value, int | float) and not isinstance(value, bool)):
            raise click.BadParameter(f"{key}={value!r}: {exp.name} takes a number there "
                                     f"(default {default!r}).", param_hint=hint)


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


@click.command()
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
    # Imported only when the command runs: privpca --help stays fast.
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
    for exp in experiments:  # a bad -p is a usage error, before anything runs
        _check_overrides(exp, quick, overrides)
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
