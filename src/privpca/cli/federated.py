"""DPS-PCA distributed on Flower (needs the ``[federated]`` extra): ``privpca provider`` serves
one table as a SuperNode, ``privpca server`` submits privpca's ServerApp to the SuperLink."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import warnings
from pathlib import Path
from typing import Any

import click

from privpca.cli.options import _DataNorm

__all__ = ["provider", "server"]


def _flower_tool(name: str) -> str:
    exe = shutil.which(name) or str(Path(sys.executable).parent / name)
    if not Path(exe).exists():
        raise click.ClickException(
            f"{name} not found: install the Flower extra, pip install 'privpca[federated]'."
        )
    return exe


def _flower_env(**extra: str) -> dict[str, str]:
    """The environment with this interpreter's scripts first on PATH (Flower spawns its own
    helpers, e.g. ``flower-superexec``, by name, so they must be found from a venv too)."""
    env = {**os.environ, **extra}
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    return env


#: Why ``privpca provider --aggregation secure`` needs its long-running provider.
_SECURE_NEEDS_PROCESS = (
    "--aggregation secure needs --isolation process: the provider keeps its secure-aggregation "
    "state (ephemeral keys, self-mask seed, received shares, the residues of the current step) "
    "in the memory of its one long-running process between messages; Flower's stock SuperNode "
    "(a fresh process per message) could keep it only by writing it down.")


def _aggregation_options(command: Any) -> Any:
    """``--aggregation``, ``--min-providers`` and ``--colluders`` (both commands)."""
    command = click.option(
        "--colluders", type=click.IntRange(min=0), default=0, show_default=True,
        help="Secure only: providers that may pool what they know with the server; the noise "
        "shares are sized so that (ε, δ) holds against the server plus this many (less than "
        "--min-providers - 1). Must match the other side's.")(command)
    command = click.option(
        "--min-providers", type=click.IntRange(min=2), default=None,
        help="Secure only: the fewest providers whose sum may be opened (a strict majority "
        "of N; default: all N, no dropout tolerated). Fewer survivors at any stage abort the "
        "step with nothing opened. Must match the other side's.")(command)
    return click.option(
        "--aggregation", type=click.Choice(["local-noise", "secure"]), default="local-noise",
        show_default=True,
        help="'local-noise': every provider adds its own full noise to what it sends; "
        "'secure': exact answers plus a share each of one central noise, which the server "
        "opens only as a sum (SecAgg: each answer leaves the provider masked). Must match "
        "the other side's.")(command)


def _check_secure_options(n_providers: int | None, min_providers: int | None,
                          colluders: int, aggregation: str = "secure") -> None:
    """Refuse secure settings no run could honour (the agreement's own checks), and secure
    aggregation's settings without it (they were dropped without a word)."""
    from privpca.federated.protocol.secure_sums import SecureAgreement

    if aggregation != "secure":
        if min_providers is not None or colluders:
            raise click.UsageError(
                "--min-providers and --colluders size secure aggregation's noise shares: give "
                "them with --aggregation secure (with local noise every provider's own noise "
                "protects it whoever drops out or colludes).")
        return

    m = min_providers
    if n_providers is None:  # a provider: N is the server's; check what does not need it
        if m is not None and not colluders < m - 1:
            raise click.BadParameter(f"must be from 0 to --min-providers - 2 = {m - 2}.",
                                     param_hint="--colluders")
        return
    try:
        SecureAgreement(n_providers, n_providers if m is None else m, colluders, 1, 1)
    except ValueError as exc:  # the agreement's words, with the shell's flags
        words = str(exc).replace("aggregation='local-noise'", "--aggregation local-noise")
        raise click.UsageError(f"--aggregation secure: {words}") from exc


def _tls_args(insecure: bool, root_certificates: Path | None) -> list[str]:
    if insecure:
        return ["--insecure"]
    if root_certificates is None:
        raise click.UsageError("Give --root-certificates (TLS) or --insecure (trusted network).")
    return ["--root-certificates", str(root_certificates)]


@click.command()
@click.argument("data", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--superlink", required=True, help="HOST:PORT of the Flower SuperLink.")
@click.option("--provider-id", required=True,
              help="The public name the server and the other providers see (no default: "
              "DATA's file name can say what the data are).")
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
              help="'auto' (chosen by a ladder of private pilot Grams over this provider's "
              "centred rows; the private 99 % quantile of their norms where it has too few "
              "rows) or a public bound.")
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
              "ClientApp only; it keeps its data and imports between messages); "
              "'subprocess': Flower's stock SuperNode (a fresh ClientApp process per message). "
              "Either way the SuperNode polls the SuperLink at Flower's own pace (3 s).")
@click.option("--poll", type=click.FloatRange(min=0.005, max=3.0), default=0.1,
              show_default=True,
              help="Seconds between the long-running provider's requests to its own SuperNode "
              "for a task (--isolation process).")
@click.option("--show-data-warnings", is_flag=True,
              help="Log this provider's failures in full (the error and its traceback, which "
              "may quote a cell of DATA) and the warnings whose presence depends on the data: "
              "for the data holder's eyes only, NOT for a shared log. Without it the log has "
              "each failure's code only. The server never gets more than the code.")
@_aggregation_options
def provider(
    data: Path, superlink: str, provider_id: str, n_components: int, epsilon: float,
    delta: float, n_rounds: int, centering: str, data_norm: float | str,
    budget_shares: str | None, state_path: Path | None,
    noise_seed: int | None, stream: bool, port: int, insecure: bool,
    root_certificates: Path | None, isolation: str, poll: float, show_data_warnings: bool,
    aggregation: str, min_providers: int | None, colluders: int,
) -> None:
    """Serve DATA as a DPS-PCA provider: a Flower SuperNode that answers at most T queries.

    DATA (.npy, .parquet or CSV without header) stays on this machine; only noised answers
    leave it. A provider that cannot answer (its table refused, its budget spent, a malformed
    message) replies with a fixed code (input-refused, over-budget, query-refused,
    bad-agreement, no-bound, internal-error), never with its error's text.
    """
    if data.suffix not in {".npy", ".csv", ".txt", ".parquet"}:
        raise click.BadParameter(f"{data}: expected a .npy, .parquet or .csv file",
                                 param_hint="DATA")
    _check_secure_options(None, min_providers, colluders, aggregation)
    if aggregation == "secure":  # refused before anything runs, let alone is released
        from privpca.federated.protocol.provider_checks import check_secure

        if isolation != "process":
            raise click.UsageError(_SECURE_NEEDS_PROCESS)
        try:
            check_secure(provider_id, True,
                         None if centering == "none" else centering, data_norm,
                         stream or data.suffix == ".parquet")
        except ValueError as exc:
            raise click.UsageError(str(exc)) from exc
    state = state_path or data.with_name(data.name + ".privpca-state.json")
    cfg: dict[str, Any] = {
        "data-path": str(data.resolve()), "provider-id": provider_id,
        "n-components": n_components, "epsilon": epsilon, "delta": delta, "n-rounds": n_rounds,
        "data-norm": data_norm, "centering": centering, "state-path": str(state.resolve()),
    }
    if aggregation == "secure":
        cfg.update({"aggregation": aggregation, "colluders": colluders})
        if min_providers is not None:
            cfg["min-providers"] = min_providers
    if noise_seed is not None:
        cfg["noise-seed"] = noise_seed
    if stream:
        cfg["stream"] = True
    if show_data_warnings:
        cfg["show-data-warnings"] = True
    node_config = " ".join(f"{k}={json.dumps(v)}" for k, v in cfg.items())
    if budget_shares is not None:
        try:
            shares = json.loads(budget_shares)
        except json.JSONDecodeError as exc:
            raise click.BadParameter(str(exc), param_hint="--budget-shares") from exc
        # Single quotes: Flower's node-config parser refuses double-quoted values with quotes.
        node_config += " budget-shares='" + json.dumps(shares, separators=(",", ":")) + "'"
        cfg["budget-shares"] = json.dumps(shares)
    _check_provider(cfg)
    args = [_flower_tool("flower-supernode"), *_tls_args(insecure, root_certificates),
            "--superlink", superlink, "--port", str(port), "--node-config", node_config]
    if isolation == "process":
        from privpca.federated.flower_node import run_provider_node  # Flower: only to run

        click.echo(f"privpca provider (in process, poll {poll:g} s): {' '.join(args[1:])}",
                   err=True)
        run_provider_node(args[1:], f"127.0.0.1:{port}", poll=poll)
        return
    click.echo(f"privpca provider: {' '.join(args[1:])}", err=True)
    os.execve(args[0], args, _flower_env())


def _check_provider(node_config: dict[str, Any]) -> None:
    """Build the provider its SuperNode will build, before it registers: settings that no
    query could be answered under (-k above DATA's columns, bad --budget-shares, a state
    file of another agreement) are refused here, not at the first query. Nothing is
    released. The error's text can quote DATA (a cell of a CSV): as in the provider's log,
    only its fixed code is shown unless --show-data-warnings."""
    from privpca.federated.flower_provider import load_provider
    from privpca.federated.protocol import failure_reply

    try:  # on a copy of the state file: a refused trial must not pin its settings in it
        with warnings.catch_warnings(), tempfile.TemporaryDirectory() as tmp:
            warnings.simplefilter("ignore")
            state, trial = Path(node_config["state-path"]), Path(tmp) / "state.json"
            if state.exists():
                shutil.copyfile(state, trial)
            load_provider({**node_config, "state-path": str(trial)})
    except Exception as exc:
        reason = (f"{str(exc).rstrip('.')}. Nothing was released."
                  if node_config.get("show-data-warnings") else
                  f"{failure_reply(exc)[1]} (the reason: --show-data-warnings, for the data "
                  "holder only).")
        raise click.UsageError(f"DATA and these options make no provider: {reason}") from exc


@click.command()
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
@click.option("--max-rows", type=click.IntRange(min=1), default=None,
              help="Secure only: the public bound on every provider's number of rows, which "
              "sizes the sums' bit width (default: the largest the providers announce).")
@_aggregation_options
def server(
    superlink: str, n_features: int, n_components: int, n_nonzero: int | None, n_rounds: int,
    n_providers: int, seed: int | None, init: str, on_dropout: str, round_timeout: float,
    wait_timeout: float, centering: str, data_norm: float | str, output: Path, insecure: bool,
    root_certificates: Path | None, poll: float, max_rows: int | None, aggregation: str,
    min_providers: int | None, colluders: int,
) -> None:
    """Run DPS-PCA's server: submit privpca's Flower app to the SuperLink and wait for it."""
    from privpca.federated.flower_app import write_app_dir  # Flower: imported only to run

    _tls_args(insecure, root_certificates)
    if n_components > n_features:
        raise click.BadParameter(f"{n_components} components of {n_features} features: give "
                                 "at most -d.", param_hint="-k")
    # Refused before any provider is asked.
    _check_secure_options(n_providers, min_providers, colluders, aggregation)
    run_config = {
        "n-features": n_features, "n-components": n_components,
        "n-nonzero": n_nonzero or n_features, "n-rounds": n_rounds, "n-providers": n_providers,
        "seed": -1 if seed is None else seed, "init": init, "on-dropout": on_dropout,
        "round-timeout": round_timeout, "wait-timeout": wait_timeout,
        "centering": centering, "data-norm": data_norm, "poll-interval": poll,
        "output-path": str(output.resolve()), "aggregation": aggregation,
    }
    if aggregation == "secure":
        run_config["colluders"] = colluders
        run_config.update({key: value for key, value in (("min-providers", min_providers),
                                                         ("max-rows", max_rows))
                           if value is not None})
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
