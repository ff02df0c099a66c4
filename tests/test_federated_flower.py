"""DPS-PCA over Flower with real processes on 127.0.0.1: SuperLink, N SuperNodes, ServerApp.

Each test starts ``flower-superlink`` and one provider (a ``flower-supernode``) per provider as
separate processes on free local ports, then the server (``flwr run``), and compares with the
in-process :class:`privpca.DPSPCA` on the same split and seeds. The papers'-setting tests go
through the CLI (``privpca provider``/``privpca server``, passing ``--centering none
--data-norm 1.0`` where the CLI has those options); the release-pipeline test starts
``flower-supernode`` and ``flwr run`` directly with the node and run configs of
:mod:`privpca.federated.flower_app`. Flower's SuperNode polls every 3 s and starts a fresh
ClientApp process per message, so a round takes several seconds: these tests are marked slow.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("flwr")

from privpca import DPSPCA, PrivacyLedger
from privpca.datasets import make_dpspca_data
from privpca.decomposition.distributed import dpspca_provider_seeds
from privpca.federated.flower_app import write_app_dir

pytestmark = pytest.mark.slow

BIN = Path(sys.executable).parent
D, K, S_HAT, T = 30, 2, 10, 3
EPS, DELTA = 2.0, 1e-5
PAPER = {"centering": None, "data_norm": 1.0}


def _cli_options(command: str) -> set[str]:
    from privpca.cli import main

    return {opt for param in main.commands[command].params for opt in getattr(param, "opts", [])}


#: The papers' setting on the command line, where the CLI offers the pipeline's settings.
PROVIDER_PAPER_ARGS = (["--centering", "none", "--data-norm", "1.0"]
                       if "--centering" in _cli_options("provider") else [])
SERVER_PAPER_ARGS = (["--centering", "none", "--data-norm", "1.0"]
                     if "--centering" in _cli_options("server") else [])


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Federation:
    """A SuperLink and providers started as separate processes; stopped by their own ids."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.env = {**os.environ, "FLWR_HOME": str(tmp / "flwr-home"),
                    "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1",
                    "PATH": os.pathsep.join([str(BIN), os.environ.get("PATH", "")])}
        self.port = _free_port()
        self.procs: dict[str, subprocess.Popen[bytes]] = {}

    def _start(self, name: str, args: list[str]) -> None:
        log = open(self.tmp / f"{name}.log", "wb")
        self.procs[name] = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT,
                                            env=self.env, start_new_session=True)

    def start_superlink(self) -> None:
        self._start("superlink", [str(BIN / "flower-superlink"), "--insecure", "--host",
                                  "127.0.0.1", "--port", str(self.port), "--database",
                                  ":flwr-in-memory:"])

    def start_provider(self, pid: str, data: Path, seed: int, rounds: int = T) -> None:
        self._start(f"provider-{pid}", [
            str(BIN / "privpca"), "provider", str(data), "--superlink",
            f"127.0.0.1:{self.port}", "--insecure", "--provider-id", pid, "-k", str(K),
            "--epsilon", str(EPS), "--delta", str(DELTA), "--n-rounds", str(rounds),
            "--noise-seed", str(seed), "--port", str(_free_port()),
            "--state", str(self.tmp / f"state-{pid}.json"), *PROVIDER_PAPER_ARGS,
        ])

    def start_node(self, name: str, node_config: dict) -> None:
        """A ``flower-supernode`` with a node config of :mod:`privpca.federated.flower_app`."""
        config = " ".join(f"{k}={json.dumps(v)}" for k, v in node_config.items())
        self._start(name, [str(BIN / "flower-supernode"), "--insecure", "--superlink",
                           f"127.0.0.1:{self.port}", "--port", str(_free_port()),
                           "--node-config", config])

    def run_app(self, run_config: dict, timeout: float = 300) -> subprocess.CompletedProcess[str]:
        """``flwr run`` of privpca's Flower app with ``run_config`` (as ``privpca server``)."""
        app = write_app_dir(self.tmp / "app", run_config)
        home = self.tmp / "flwr-run-home"
        home.mkdir(exist_ok=True)
        (home / "config.toml").write_text(
            f'[superlink]\ndefault = "local"\n\n[superlink.local]\naddress = '
            f'"127.0.0.1:{self.port}"\ninsecure = true\n')
        return subprocess.run([str(BIN / "flwr"), "run", str(app), "local", "--stream"],
                              env={**self.env, "FLWR_HOME": str(home)}, capture_output=True,
                              text=True, timeout=timeout, check=False)

    def run_server(self, n_providers: int, seed: int, output: Path, *extra: str,
                   timeout: float = 240) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(BIN / "privpca"), "server", "--superlink", f"127.0.0.1:{self.port}",
             "--insecure", "-d", str(D), "-k", str(K), "--n-nonzero", str(S_HAT), "-T", str(T),
             "-N", str(n_providers), "--seed", str(seed), "--output", str(output),
             *SERVER_PAPER_ARGS, *extra],
            env=self.env, capture_output=True, text=True, timeout=timeout, check=False,
        )

    def kill(self, name: str) -> None:
        proc = self.procs[name]
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)  # its own session: the SuperNode and its children
            proc.wait(timeout=10)

    def stop(self) -> None:
        for name in list(self.procs):
            proc = self.procs[name]
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
        deadline = time.monotonic() + 10
        for name, proc in self.procs.items():
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                self.kill(name)


@pytest.fixture
def federation(tmp_path):
    fed = Federation(tmp_path)
    fed.start_superlink()
    time.sleep(2.0)
    try:
        yield fed
    finally:
        fed.stop()


@pytest.fixture(scope="module")
def split():
    X, V = make_dpspca_data(1_200, D, K, 4, random_state=3)
    return [X[:300], X[300:700], X[700:]], V


def _reference(parts, seed, **params):
    params = {"n_nonzero": S_HAT, **PAPER, **params}
    est = DPSPCA(n_components=K, epsilon=EPS, delta=DELTA, n_iter=T, random_state=seed,
                 ledger=PrivacyLedger(), **params)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return est.fit_providers(parts)


def _seeds(seed, n=3):
    """The providers' noise seeds of ``_reference(parts, seed)`` (never on the estimator)."""
    return dpspca_provider_seeds(seed, D, K, n, n_nonzero=S_HAT)


def _save(tmp: Path, parts) -> list[Path]:
    paths = []
    for i, part in enumerate(parts):
        paths.append(tmp / f"provider{i}.npy")
        np.save(paths[-1], part)
    return paths


def _logs(fed: Federation) -> str:
    return "\n".join(f"--- {p.name}\n{p.read_text()[-3000:]}" for p in fed.tmp.glob("*.log"))


def test_processes_match_in_process_estimator_bitwise(federation, split, tmp_path):
    parts, _V = split
    seed = 11
    ref = _reference(parts, seed)
    for i, path in enumerate(_save(tmp_path, parts)):
        federation.start_provider(str(i), path, _seeds(seed)[i])
    out = tmp_path / "result.json"
    proc = federation.run_server(3, seed, out)
    assert proc.returncode == 0, proc.stdout + proc.stderr + _logs(federation)
    result = json.loads(out.read_text())
    assert result["status"] == "ok", result
    assert result["rounds_completed"] == T
    np.testing.assert_array_equal(np.array(result["components"]), ref.components_)
    np.testing.assert_array_equal(np.array(result["history"]), ref.history_)
    # Every provider reports its own guarantee and used exactly its T releases.
    assert sorted(result["privacy"]) == ["0", "1", "2"]
    for pid, rec in result["privacy"].items():
        assert rec["epsilon"] == pytest.approx(EPS, rel=1e-3)
        assert rec["model"] == "distributed"
        assert json.loads((tmp_path / f"state-{pid}.json").read_text())["releases"] == T
    # The release counters persist: a second run finds every provider's budget spent.
    out2 = tmp_path / "second.json"
    proc = federation.run_server(3, seed, out2, "--round-timeout", "60")
    result2 = json.loads(out2.read_text())
    assert result2["status"] == "error"
    assert "refused" in result2["error"] and "agreed to 3 releases" in result2["error"]
    assert proc.returncode != 0


def test_killed_provider_error_and_continue(federation, split, tmp_path):
    parts, _V = split
    paths = _save(tmp_path, parts)
    seed = 5
    for i, path in enumerate(paths):
        federation.start_provider(str(i), path, _seeds(seed)[i])
    # Kill provider 2 once the first round is under way: it misses some round r >= 1.
    out = tmp_path / "continue.json"
    server = subprocess.Popen(
        [str(BIN / "privpca"), "server", "--superlink", f"127.0.0.1:{federation.port}",
         "--insecure", "-d", str(D), "-k", str(K), "--n-nonzero", str(S_HAT), "-T", str(T),
         "-N", "3", "--seed", str(seed), "--output", str(out), "--on-dropout", "continue",
         "--round-timeout", "25", *SERVER_PAPER_ARGS],
        env=federation.env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )
    deadline = time.monotonic() + 120
    state2 = tmp_path / "state-2.json"
    while time.monotonic() < deadline and not state2.exists():
        time.sleep(0.2)
    time.sleep(1.0)  # let its first answer go out
    federation.kill("provider-2")
    server.communicate(timeout=300)
    result = json.loads(out.read_text())
    assert result["status"] == "ok", result
    released = json.loads(state2.read_text())["releases"]
    assert released < T
    ((who, at_round),) = result["dropped"].items()
    assert at_round in (released, released + 1)
    assert result["rounds_completed"] == T
    comps = np.array(result["components"])
    np.testing.assert_allclose(comps @ comps.T, np.eye(K), atol=1e-10)
    if who == "2":  # known by name once it has answered a round
        notes = result["privacy"]["2"]["notes"]
        assert notes.endswith(f"Dropped out at round {at_round}.")
        assert f"of the {T} agreed releases were made" in notes
    else:
        assert who.startswith("node-")
    # The survivors answered every round: their budgets are exactly spent.
    for pid in ("0", "1"):
        assert json.loads((tmp_path / f"state-{pid}.json").read_text())["releases"] == T


def test_killed_provider_stops_the_run_by_default(federation, split, tmp_path):
    parts, _ = split
    paths = _save(tmp_path, parts[:2])
    for i, path in enumerate(paths):
        federation.start_provider(str(i), path, 100 + i)
    time.sleep(3.0)
    federation.kill("provider-1")
    out = tmp_path / "error.json"
    proc = federation.run_server(2, 0, out, "--round-timeout", "20", "--wait-timeout", "30")
    result = json.loads(out.read_text())
    assert result["status"] == "error"
    assert proc.returncode != 0
    # Killed before the run: the handshake (no release) finds one of two providers; killed
    # later, a round times out.
    assert any(text in result["error"] for text in
               ("did not answer", "providers connected", "answered the handshake"))
    assert "components" not in result


def test_release_pipeline_over_flower_matches_in_process_estimator_bitwise(federation, tmp_path):
    """Private mean (two rounds), private bounds, T power rounds and the variances, over
    Flower, give bitwise the in-process DPSPCA on defaults; every provider's counter covers
    every part, and a second run is refused at its first message."""
    rng = np.random.default_rng(2)
    Z = rng.standard_normal((6_000, 6)) @ rng.standard_normal((6, 6))
    X = Z * np.array([300.0, 20.0, 1.0, 0.5, 40.0, 2.0]) + np.array([2e3, 5.0, -1.0, 1990.0,
                                                                     0.0, 1e4])
    parts = [X[:1500], X[1500:3500], X[3500:]]
    seed = 4
    ref = _reference(parts, seed, centering="private", data_norm="auto", n_nonzero=None)
    paths = _save(tmp_path, parts)
    for i, path in enumerate(paths):
        federation.start_node(f"provider-{i}", {
            "data-path": str(path), "provider-id": str(i), "n-components": K, "epsilon": EPS,
            "delta": DELTA, "n-rounds": T, "data-norm": "auto", "centering": "private",
            "state-path": str(tmp_path / f"state-{i}.json"),
            "noise-seed": dpspca_provider_seeds(seed, X.shape[1], K, 3)[i]})
    d = X.shape[1]
    config = {"n-features": d, "n-components": K, "n-nonzero": d, "n-rounds": T,
              "n-providers": 3, "seed": seed, "init": "random", "centering": "private",
              "data-norm": "auto", "on-dropout": "error", "round-timeout": 60.0,
              "wait-timeout": 60.0, "output-path": str(tmp_path / "result.json")}
    proc = federation.run_app(config)
    assert proc.returncode == 0, proc.stdout + proc.stderr + _logs(federation)
    result = json.loads((tmp_path / "result.json").read_text())
    assert result["status"] == "ok", result
    np.testing.assert_array_equal(np.array(result["components"]), ref.components_)
    np.testing.assert_array_equal(np.array(result["history"]), ref.history_)
    np.testing.assert_array_equal(np.array(result["mean"]), ref.mean_)
    np.testing.assert_array_equal(np.array(result["explained_variance"]),
                                  ref.explained_variance_)
    np.testing.assert_array_equal(np.array(result["explained_variance_ratio"]),
                                  ref.explained_variance_ratio_)
    assert result["noise_level"] == pytest.approx(ref.noise_level_, rel=1e-12)
    bounds = [result["provider_bounds"][str(i)]["data_norm"] for i in range(3)]
    np.testing.assert_array_equal(bounds, ref.provider_data_norms_)
    for pid, rec in result["privacy"].items():
        assert (rec["epsilon"], rec["delta"], rec["model"]) == (EPS, DELTA, "distributed")
        assert [s["mechanism"].split(":")[0] for s in rec["spends"]] == [
            "bound_raw", "mean", "bound_residual", "mean_refine", "bound", "statistic",
            "variance"]
        assert "n_clipped" not in rec  # a count of the provider's data: never sent
        state = json.loads((tmp_path / f"state-{pid}.json").read_text())
        assert state["by-kind"] == {"mean": 2, "bound": 1, "query": T, "variance": 1}
    # The counters persist: a second run is refused at its first message (the mean).
    config["output-path"] = str(tmp_path / "second.json")
    federation.run_app(config)
    result2 = json.loads((tmp_path / "second.json").read_text())
    assert result2["status"] == "error"
    assert "refused" in result2["error"] and "agreed to 2 releases (mean)" in result2["error"]
