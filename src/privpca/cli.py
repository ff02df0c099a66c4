"""The ``privpca`` command line: ``demo``, ``fit``, ``reproduce``, and DPS-PCA's ``provider`` and
``server``."""

from __future__ import annotations

import ast
import json
import shlex
import sys
import warnings
from pathlib import Path
from typing import Any

import click
import numpy as np

from privpca import __version__
from privpca._registry import PRIVATE_ESTIMATORS

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


def _load(path: Path) -> np.ndarray:
    if path.suffix == ".npy":
        data = np.load(path, allow_pickle=False)
    elif path.suffix in {".csv", ".txt"}:
        with open(path) as fh:
            first = fh.readline()
        has_header = any(c.isalpha() for c in first.replace("e", "").replace("E", ""))
        data = np.loadtxt(path, delimiter=",", skiprows=1 if has_header else 0, ndmin=2)
    else:
        raise click.BadParameter(f"{path}: expected a .csv or .npy file", param_hint="DATA")
    return np.asarray(data, dtype=np.float64)


@main.command()
@click.argument("data", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option(
    "--method",
    "-m",
    type=click.Choice(sorted(PRIVATE_ESTIMATORS)),
    required=True,
    help="Estimator to fit.",
)
@click.option("--n-components", "-k", type=click.IntRange(min=1), default=2, show_default=True)
@click.option("--epsilon", type=float, required=True, help="Privacy parameter ε > 0.")
@click.option("--delta", type=float, default=1e-5, show_default=True, help="0 < δ < 1.")
@click.option(
    "--data-norm",
    type=float,
    default=1.0,
    show_default=True,
    help="Public bound on each row's L2 norm; longer rows are clipped (with a warning). "
    "private-oja clips gradients at its square; dp-pca needs no bound and ignores it.",
)
@click.option(
    "--calibration",
    type=click.Choice(["analytic", "classic"]),
    default="analytic",
    show_default=True,
)
@click.option("--seed", type=int, default=None, help="Seed (omit for fresh randomness).")
@click.option(
    "--output",
    "-o",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="JSON file for components and privacy record (default: stdout).",
)
def fit(
    data: Path,
    method: str,
    n_components: int,
    epsilon: float,
    delta: float,
    data_norm: float,
    calibration: str,
    seed: int | None,
    output: Path | None,
) -> None:
    """Fit METHOD on DATA (CSV with optional header, or .npy; one row per record)."""
    X = _load(data)
    cls = PRIVATE_ESTIMATORS[method]
    params: dict[str, Any] = dict(
        n_components=n_components,
        epsilon=epsilon,
        delta=delta,
        data_norm=data_norm,
        random_state=seed,
        calibration=calibration,
    )
    accepted = cls().get_params()
    if "clip_norm" in accepted:  # Private Oja clips gradients x xᵀw, whose norm is ≤ ‖x‖²
        params["clip_norm"] = data_norm**2
    if calibration != "analytic" and "calibration" not in accepted:
        raise click.UsageError(f"--calibration does not apply to {method}.")
    # Pure ε-DP methods (bingham) take no delta: their privacy record states delta = 0.
    params = {key: value for key, value in params.items() if key in accepted}
    est: Any = cls(**params)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            est.fit(X)
        except ValueError as exc:
            raise click.ClickException(str(exc)) from exc
    for w in caught:
        click.echo(f"warning: {w.category.__name__}: {w.message}", err=True)
    payload = {
        "method": method,
        "estimator": repr(est),
        "n_samples": int(X.shape[0]),
        "n_features": int(X.shape[1]),
        "components": est.components_.tolist(),
        "privacy": est.privacy_.to_dict(),
    }
    text = json.dumps(payload, indent=2, default=str)
    if output is None:
        click.echo(text)
    else:
        output.write_text(text + "\n")
        click.echo(f"Wrote {output}: {est.privacy_}", err=True)


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
@click.option("--data-norm", type=float, default=1.0, show_default=True)
@click.option("--state", "state_path", type=click.Path(dir_okay=False, path_type=Path),
              default=None, help="Release-count file (default: DATA + '.privpca-state.json').")
@click.option("--noise-seed", type=int, default=None,
              help="Seed the noise (experiments only: whoever knows it can remove the noise).")
@click.option("--port", type=int, default=9094, show_default=True,
              help="Local port of the SuperNode's runtime API (one per provider on a machine).")
@click.option("--insecure", is_flag=True, help="No TLS (only on a trusted network).")
@click.option("--root-certificates", type=click.Path(exists=True, path_type=Path), default=None)
def provider(
    data: Path, superlink: str, provider_id: str | None, n_components: int, epsilon: float,
    delta: float, n_rounds: int, data_norm: float, state_path: Path | None,
    noise_seed: int | None, port: int, insecure: bool, root_certificates: Path | None,
) -> None:
    """Serve DATA as a DPS-PCA provider: a Flower SuperNode that answers at most T queries.

    DATA (.npy or CSV without header) stays on this machine; only noised answers leave it.
    """
    if data.suffix not in {".npy", ".csv", ".txt"}:
        raise click.BadParameter(f"{data}: expected a .npy or .csv file", param_hint="DATA")
    state = state_path or data.with_name(data.name + ".privpca-state.json")
    cfg: dict[str, Any] = {
        "data-path": str(data.resolve()), "provider-id": provider_id or data.stem,
        "n-components": n_components, "epsilon": epsilon, "delta": delta, "n-rounds": n_rounds,
        "data-norm": data_norm, "state-path": str(state.resolve()),
    }
    if noise_seed is not None:
        cfg["noise-seed"] = noise_seed
    node_config = " ".join(f"{k}={json.dumps(v)}" for k, v in cfg.items())
    import os

    args = [_flower_tool("flower-supernode"), *_tls_args(insecure, root_certificates),
            "--superlink", superlink, "--port", str(port), "--node-config", node_config]
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
@click.option("--output", "-o", type=click.Path(dir_okay=False, path_type=Path), required=True,
              help="Result JSON, written by the ServerApp on the SuperLink's machine.")
@click.option("--insecure", is_flag=True, help="No TLS (only on a trusted network).")
@click.option("--root-certificates", type=click.Path(exists=True, path_type=Path), default=None)
def server(
    superlink: str, n_features: int, n_components: int, n_nonzero: int | None, n_rounds: int,
    n_providers: int, seed: int | None, init: str, on_dropout: str, round_timeout: float,
    wait_timeout: float, output: Path, insecure: bool, root_certificates: Path | None,
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


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
