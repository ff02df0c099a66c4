"""DPS-PCA over Flower with real processes on 127.0.0.1: SuperLink, N SuperNodes, ServerApp.

Each test starts ``flower-superlink`` and one ``privpca provider`` (a ``flower-supernode``) per
provider as separate processes on free local ports, then ``privpca server`` (``flwr run``),
and compares with the in-process :class:`privpca.DPSPCA` on the same split and seeds. Flower's
SuperNode polls every 3 s and starts a fresh ClientApp process per message, so a round takes
several seconds: these tests are marked slow.
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

pytestmark = pytest.mark.slow

BIN = Path(sys.executable).parent
D, K, S_HAT, T = 30, 2, 10, 3
EPS, DELTA = 2.0, 1e-5


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
            "--state", str(self.tmp / f"state-{pid}.json"),
        ])

    def run_server(self, n_providers: int, seed: int, output: Path, *extra: str,
                   timeout: float = 240) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(BIN / "privpca"), "server", "--superlink", f"127.0.0.1:{self.port}",
             "--insecure", "-d", str(D), "-k", str(K), "--n-nonzero", str(S_HAT), "-T", str(T),
             "-N", str(n_providers), "--seed", str(seed), "--output", str(output), *extra],
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
    est = DPSPCA(n_components=K, epsilon=EPS, delta=DELTA, n_iter=T, n_nonzero=S_HAT,
                 random_state=seed, ledger=PrivacyLedger(), **params)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return est.fit_providers(parts)


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
        federation.start_provider(str(i), path, ref.provider_seeds_[i])
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
    ref = _reference(parts, seed)
    for i, path in enumerate(paths):
        federation.start_provider(str(i), path, ref.provider_seeds_[i])
    # Kill provider 2 once the first round is under way: it misses some round r >= 1.
    out = tmp_path / "continue.json"
    server = subprocess.Popen(
        [str(BIN / "privpca"), "server", "--superlink", f"127.0.0.1:{federation.port}",
         "--insecure", "-d", str(D), "-k", str(K), "--n-nonzero", str(S_HAT), "-T", str(T),
         "-N", "3", "--seed", str(seed), "--output", str(out), "--on-dropout", "continue",
         "--round-timeout", "25"],
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
    assert ("did not answer" in result["error"]) or ("providers connected" in result["error"])
    assert "components" not in result
