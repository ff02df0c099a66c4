"""Run a registered experiment and write its CSV, PNG and markdown summary.

Files, for experiment ``NAME`` in ``output_dir``:

* ``NAME.csv``: one row per run (one fitted estimator): experiment, panel, method, the
  settings, repetition, seed, the error metric(s), seconds, and whether the fit converged;
* ``NAME.png``: one subplot per panel, mean ± standard error (std/√repetitions) per point;
* ``NAME.md``: tables of mean ± standard error (and the paper's number where it prints one),
  the parameters, the base seed, the command and the elapsed time.

Seeds: run ``key`` (e.g. ``(sample, repetition)``) of an experiment with base seed ``b`` has
the seed ``SeedSequence(b)`` spawned along ``key`` (:meth:`RunContext.run_seed`), and its data,
estimators and other draws get independent streams spawned from that seed
(:mod:`privpca.experiments.seeding`); the CSV records it, so any single run can be repeated.
"""

from __future__ import annotations

import csv
import math
import os
import platform
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from threadpoolctl import threadpool_info

from privpca._config import config_context
from privpca.experiments.context import RunContext, quiet_fit
from privpca.experiments.plotting import plot_panels
from privpca.experiments.registry import get_experiment
from privpca.experiments.spec import Experiment, ExperimentResult, Panel

__all__ = ["RunContext", "RunOutput", "quiet_fit", "run_experiment", "summarise"]


@dataclass
class RunOutput:
    """Where a run's files went, and what it produced."""

    experiment: Experiment
    result: ExperimentResult
    params: dict[str, Any]
    seed: int
    quick: bool
    elapsed: float
    csv_path: Path
    png_path: Path
    md_path: Path


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def summarise(
    rows: Sequence[Mapping[str, Any]], panel: Panel
) -> dict[str, dict[float, tuple[float, float, int]]]:
    """``{series label: {x: (mean, standard error, count)}}`` of ``panel.y`` over its rows."""
    groups: dict[str, dict[float, list[float]]] = {}
    for row in rows:
        if row.get("panel") != panel.key:
            continue
        groups.setdefault(panel.label(row), {}).setdefault(row[panel.x], []).append(
            float(row[panel.y])
        )
    out: dict[str, dict[float, tuple[float, float, int]]] = {}
    for label, by_x in groups.items():
        out[label] = {}
        for x in sorted(by_x):
            vals = np.asarray(by_x[x])
            se = float(vals.std(ddof=1) / math.sqrt(vals.size)) if vals.size > 1 else 0.0
            out[label][x] = (float(vals.mean()), se, int(vals.size))
    return out


def _panel_table(rows: Sequence[Mapping[str, Any]], panel: Panel) -> str:
    stats = summarise(rows, panel)
    xs = sorted({x for by_x in stats.values() for x in by_x})
    head = f"| {' / '.join(panel.series)} | " + " | ".join(f"{panel.x} = {_fmt(x)}" for x in xs)
    lines = [head + " |", "|---|" + "---|" * len(xs)]
    digits = 4 if panel.y == "seconds" else 3
    for label, by_x in stats.items():
        cells = []
        for x in xs:
            if x not in by_x:
                cells.append("")
                continue
            mean, se, _ = by_x[x]
            cell = f"{mean:.{digits}f} ± {se:.{digits}f}"
            if (label, x) in panel.paper:
                cell += f" (paper {panel.paper[(label, x)]:g})"
            cells.append(cell)
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    counts = {c for by_x in stats.values() for (_, _, c) in by_x.values()}
    note = f"{panel.y}: mean ± standard error over {'/'.join(str(c) for c in sorted(counts))} runs"
    return f"### {panel.title}\n\n{note}.\n\n" + "\n".join(lines) + "\n"


def _write_csv(rows: Sequence[Mapping[str, Any]], path: Path) -> None:
    columns: dict[str, None] = {}
    for row in rows:
        columns.update(dict.fromkeys(row))
    with open(path, "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(columns), restval="")
        writer.writeheader()
        writer.writerows(rows)


def _blas_threads() -> str:
    info = threadpool_info()
    return ", ".join(f"{i.get('internal_api')}={i.get('num_threads')}" for i in info) or "n/a"


def _load_average() -> str:
    try:
        one, five, fifteen = os.getloadavg()
    except OSError:  # pragma: no cover - not on every platform
        return "n/a"
    return f"{one:.2f}/{five:.2f}/{fifteen:.2f}"


def _summary(out: RunOutput, command: str, load: str = "n/a") -> str:
    exp = out.experiment
    params = "\n".join(f"- `{k}` = `{v!r}`" for k, v in out.params.items())
    tables = "\n".join(_panel_table(out.result.rows, p) for p in out.result.panels)
    mode = "quick" if out.quick else "full"
    return (
        f"# {exp.name}: {exp.paper}, {exp.figure}\n\n{exp.description}\n\n"
        f"Error metric: {exp.metric}. Every table cell is mean ± standard error "
        f"(sample std / √runs); `seconds` are wall-clock fit times.\n\n"
        f"{tables}\n{out.result.notes}\n\n## Run\n\n"
        f"- command: `{command}`\n- mode: {mode}\n- base seed: {out.seed} (per-run seeds in "
        f"the `seed` column of `{out.csv_path.name}`)\n- runs (CSV rows): "
        f"{len(out.result.rows)}\n- elapsed: {out.elapsed:.1f} s\n"
        f"- machine: {platform.machine()}, Python {platform.python_version()}, NumPy "
        f"{np.__version__}, {os.cpu_count()} CPUs, BLAS threads {_blas_threads()}; load "
        f"average (1/5/15 min) {load}\n\n"
        f"## Parameters\n\n{params}\n"
    )


def run_experiment(
    experiment: str | Experiment,
    *,
    quick: bool = False,
    seed: int = 0,
    output_dir: str | Path = "privpca-results",
    progress: bool = True,
    command: str | None = None,
    **overrides: Any,
) -> RunOutput:
    """Run one registered experiment and write ``NAME.csv``, ``NAME.png`` and ``NAME.md``.

    Parameters
    ----------
    experiment : str or Experiment
        A registered name (see ``privpca reproduce --list``) or the experiment itself.
    quick : bool, default=False
        Use ``quick_params`` (small sizes, few repetitions) instead of ``full_params``.
    seed : int, default=0
        Base seed; every run's own seed derives from it and is written to the CSV.
    output_dir : path, default="privpca-results"
        Created if needed.
    progress : bool, default=True
        Show a tqdm progress bar.
    command : str, optional
        The command line to record in the summary (default: a Python call).
    **overrides
        Replace single parameters of the chosen set (e.g. ``repetitions=5``).

    Returns
    -------
    RunOutput

    Raises
    ------
    RuntimeError
        When a requirement of the experiment (``Experiment.requires``) is not importable.
    """
    exp = get_experiment(experiment) if isinstance(experiment, str) else experiment
    missing = exp.missing_requirements()
    if missing:
        raise RuntimeError(
            f"Experiment {exp.name!r} needs {', '.join(missing)}, which this installation "
            "does not provide."
        )
    params = exp.params(quick, **overrides)
    out_dir = Path(output_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    ctx = RunContext(seed, quick=quick, progress=progress, desc=exp.name)
    load_start = _load_average()
    start = time.perf_counter()
    try:
        # The papers' own settings are reproduced as published (Ge et al. at δ = 0.3, 0.5):
        # experiments, not releases.
        with config_context(allow_large_delta=True):
            result = exp.run_fn(dict(params), ctx)
    finally:
        ctx.close()
    elapsed = time.perf_counter() - start
    load = f"{load_start} at the start, {_load_average()} at the end"
    if not result.rows:
        raise RuntimeError(f"Experiment {exp.name!r} produced no rows.")
    for row in result.rows:
        row.setdefault("experiment", exp.name)
    rows = [{"experiment": r["experiment"], **r} for r in result.rows]
    result.rows = rows
    out = RunOutput(
        exp,
        result,
        params,
        seed,
        quick,
        elapsed,
        out_dir / f"{exp.name}.csv",
        out_dir / f"{exp.name}.png",
        out_dir / f"{exp.name}.md",
    )
    _write_csv(rows, out.csv_path)
    plot_panels(
        [(p, summarise(rows, p)) for p in result.panels],
        out.png_path,
        suptitle=f"{exp.paper}, {exp.figure} ({'quick' if quick else 'full'} run; "
        "mean ± standard error)",
    )
    if command is None:
        extra = "".join(f", {k}={v!r}" for k, v in overrides.items())
        command = (
            f'python -c "from privpca.experiments import run_experiment; run_experiment('
            f"'{exp.name}', quick={quick}, seed={seed}{extra})\""
        )
    out.md_path.write_text(_summary(out, command, load))
    return out
