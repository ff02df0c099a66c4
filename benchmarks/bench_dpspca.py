"""DPS-PCA per-iteration time beside Table 1 of Ge et al. (papers/003), and the protocol's overhead.

Table 1 setting: n = 10⁵, k = 5, s = 10, ŝ = 50, T = 10, d ∈ {200, 400, 800}; the paper reports
"< 1 ms" for DPS-PCA (R, 3.4 GHz Xeon), which can only be the iterations on a precomputed
covariance (one pass over the data alone is 10⁸ multiply-adds per d = 1000). Printed here:

* ``gram`` — one round with the provider holding ``Σ̂ᵢ`` (computed once, timed separately):
  ``Σ̂ᵢ[:, S] Q_S`` + noise, then the server's ThinQR, Threshold, ThinQR — the O(k·ŝ·d) round;
* ``data`` — one round of :class:`privpca.federated.protocol.provider.ProviderState` as
  shipped, which never forms ``Σ̂ᵢ``: ``Xᵢᵀ(Xᵢ[:, S] Q_S)/nᵢ``, O(nᵢ·k·(ŝ + d));
* ``DPSPCA.fit`` whole (T = 10 rounds, data path).

``--flower`` also runs the protocol over Flower with real processes on 127.0.0.1 (SuperLink,
N providers, ServerApp) and prints its seconds per round next to the in-process round, once
per provider isolation: ``subprocess`` (Flower's stock SuperNode, a ClientApp process per
message: the figures before) and ``process`` (privpca's long-running provider: after).
``--flower-only`` skips the per-dimension figures. ``--aggregation local-noise secure`` times
each aggregation (``secure``: every answer opened only as a sum, by SecAgg's stages as Flower
messages; long-running providers only) and prints the bytes each provider received and sent
per round (Flower's serialised records, :func:`privpca.federated.flower_wire.content_nbytes`).
``--covertype`` runs DPSPCA on defaults (private mean, private bounds, explained variance;
no ``data_norm``, no preprocessing) on the shipped Covertype table (the 10 quantitative
columns, n = 581 012) split over 3 providers, against scikit-learn's ``PCA(2)``: subspace
distance and explained-variance ratios at ε ∈ {0.5, 1, 2}.
BLAS is pinned to one thread (the machine is shared).

Run: ``python benchmarks/bench_dpspca.py [--dims 200 400 800] [--repeat 5] [--flower |
--flower-only [--isolation subprocess process] [--aggregation local-noise secure]
[--rounds 5]] [--covertype [--seeds 3]]``
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np
from threadpoolctl import threadpool_limits

from privpca import DPSPCA, PrivacyLedger
from privpca.datasets import make_dpspca_data
from privpca.decomposition.distributed import dpspca_provider_seeds
from privpca.federated.protocol import ProviderState, ServerState, dpspca_noise_multiplier
from privpca.solvers.power import thin_qr, top_row_support

N, K, S, S_HAT, T = 100_000, 5, 10, 50, 10
EPS, DELTA = 1.0, 1e-5
#: Table 1's setting: uncentred, rows of norm 1 (also on the command line of the Flower run).
PAPER = {"centering": None, "data_norm": 1.0}


def _best(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def bench_dim(d: int, repeat: int) -> None:
    X, _V = make_dpspca_data(N, d, K, S, random_state=0)
    rng = np.random.default_rng(0)
    t0 = time.perf_counter()
    G = X.T @ X / N
    t_gram = time.perf_counter() - t0
    sigma = dpspca_noise_multiplier(EPS, DELTA, T) * np.sqrt(2.0) / N
    Q = thin_qr(np.where(np.arange(d)[:, None] < S_HAT, rng.standard_normal((d, K)), 0.0))
    support = top_row_support(Q, S_HAT)

    def gram_round() -> None:
        H = G[:, support] @ Q[support] + sigma * rng.standard_normal((d, K))
        Vt = thin_qr(H)
        keep = top_row_support(Vt, S_HAT)
        Z = np.zeros_like(Vt)
        Z[keep] = Vt[keep]
        thin_qr(Z)

    provider = ProviderState(X, n_components=K, epsilon=EPS, delta=DELTA, n_rounds=10**9,
                             noise_seed=0)  # the papers' setting (rows of norm 1)
    server = ServerState(d, K, S_HAT, 10**9, Q)

    def data_round() -> None:
        server.aggregate([provider.answer_query(server.query())])

    def fit() -> None:
        DPSPCA(n_components=K, epsilon=EPS, delta=DELTA, n_iter=T, n_nonzero=S_HAT,
               random_state=0, ledger=PrivacyLedger(), **PAPER).fit(X)

    t_round_gram = _best(gram_round, 20 * repeat)
    t_round_data = _best(data_round, repeat)
    t_fit = _best(fit, max(1, repeat // 2))
    print(f"d={d:4d}  gram round {t_round_gram * 1e3:8.3f} ms   T=10 rounds "
          f"{10 * t_round_gram * 1e3:7.2f} ms (+ Σ̂ once {t_gram:6.2f} s)   paper < 1 ms per run")
    print(f"        data round {t_round_data * 1e3:8.1f} ms   DPSPCA.fit (T=10, data path) "
          f"{t_fit:6.2f} s")


def _cli_options(command: str) -> set[str]:
    from privpca.cli import main

    return {o for param in main.commands[command].params for o in getattr(param, "opts", [])}


def _paper_cli_args(command: str) -> list[str]:
    """``--centering none --data-norm 1.0`` where the CLI offers the pipeline's settings."""
    return (["--centering", "none", "--data-norm", "1.0"]
            if "--centering" in _cli_options(command) else [])


def bench_flower(n_providers: int = 3, d: int = 200, n: int = 30_000, rounds: int = 5,
                 isolations: tuple[str, ...] = ("subprocess", "process"),
                 aggregations: tuple[str, ...] = ("local-noise",)) -> None:
    """Seconds (and bytes per provider) per round over Flower (real processes on 127.0.0.1)
    vs in-process.

    One federation per provider isolation (``privpca provider --isolation``): ``subprocess``
    is Flower's stock SuperNode (a fresh ClientApp process per message, 3 s polls; the
    figures before the long-running provider), ``process`` privpca's long-running provider;
    and per aggregation (``secure`` runs with ``process`` only: the stock SuperNode refuses it).
    """
    X, _ = make_dpspca_data(n, d, K, S, random_state=0)
    parts = np.array_split(X, n_providers)
    print(f"Flower, {n_providers} providers on 127.0.0.1, d={d}, n={n}, k={K}, ŝ={S_HAT}, "
          f"{rounds} rounds")
    print("  aggregation  isolation    in-process ms/round   s/round (mean, min, max)   "
          "kB/provider/round (down, up)   `privpca server` s   bitwise = DPSPCA")
    for aggregation in aggregations:
        est = DPSPCA(n_components=K, epsilon=EPS, delta=DELTA, n_iter=rounds, n_nonzero=S_HAT,
                     aggregation=aggregation, random_state=1, ledger=PrivacyLedger(), **PAPER)
        t_in = _best(lambda est=est: est.fit_providers(parts), 3) / rounds
        for isolation in isolations:
            if aggregation == "secure" and isolation != "process":
                continue
            seconds, total, components, traffic = _flower_run(parts, d, rounds, isolation,
                                                              aggregation)
            same = np.array_equal(components, est.components_)
            down = np.mean([v[0] for r in traffic for v in r.values()]) / 1e3
            up = np.mean([v[1] for r in traffic for v in r.values()]) / 1e3
            print(f"  {aggregation:<11}  {isolation:<11}  {t_in * 1e3:10.1f}          "
                  f"{np.mean(seconds):6.2f}, {np.min(seconds):5.2f}, {np.max(seconds):5.2f}"
                  f"         {down:8.1f}, {up:8.1f}              {total:8.1f}            "
                  f"{same}", flush=True)


def _flower_run(parts: list[np.ndarray], d: int, rounds: int, isolation: str,
                aggregation: str = "local-noise"
                ) -> tuple[list[float], float, np.ndarray, list[dict]]:
    """One ``privpca server`` run against ``len(parts)`` ``privpca provider`` processes."""
    import signal
    import socket

    binp = Path(sys.executable).parent
    n_providers = len(parts)
    seeds = dpspca_provider_seeds(1, d, K, n_providers, n_nonzero=S_HAT)  # replay seed 1's run
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    isolation_args = (["--isolation", isolation]
                      if "--isolation" in _cli_options("provider") else [])
    secure_args = [] if aggregation == "local-noise" else ["--aggregation", aggregation]
    with tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, "FLWR_HOME": f"{tmp}/home", "OPENBLAS_NUM_THREADS": "1",
               "PATH": f"{binp}{os.pathsep}{os.environ.get('PATH', '')}"}
        procs = [subprocess.Popen([str(binp / "flower-superlink"), "--insecure", "--host",
                                   "127.0.0.1", "--port", str(port), "--database",
                                   ":flwr-in-memory:"], env=env, start_new_session=True,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)]
        time.sleep(2)
        try:
            for i, part in enumerate(parts):
                np.save(f"{tmp}/p{i}.npy", part)
                procs.append(subprocess.Popen(
                    [str(binp / "privpca"), "provider", f"{tmp}/p{i}.npy", "--superlink",
                     f"127.0.0.1:{port}", "--insecure", "--provider-id", str(i), "-k", str(K),
                     "--epsilon", str(EPS), "--delta", str(DELTA), "-T", str(rounds),
                     "--noise-seed", str(seeds[i]), "--port", str(port + 1 + i),
                     *_paper_cli_args("provider"), *isolation_args, *secure_args],
                    env=env, start_new_session=True, stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL))
            out = Path(tmp) / "result.json"
            t0 = time.perf_counter()
            subprocess.run([str(binp / "privpca"), "server", "--superlink", f"127.0.0.1:{port}",
                            "--insecure", "-d", str(d), "-k", str(K), "--n-nonzero", str(S_HAT),
                            "-T", str(rounds), "-N", str(n_providers), "--seed", "1",
                            "--output", str(out), *_paper_cli_args("server"), *secure_args],
                           env=env, check=True,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            total = time.perf_counter() - t0
            result = json.loads(out.read_text())
        finally:
            for p in procs:
                if p.poll() is None:
                    os.killpg(p.pid, signal.SIGTERM)
            for p in procs:
                p.wait(timeout=20)
    return (list(result["round_seconds"]), total, np.array(result["components"]),
            list(result.get("round_bytes", [])))


def bench_covertype(seeds: int = 3, n_providers: int = 3) -> None:
    """DPSPCA(2) on defaults vs scikit-learn's PCA(2) on Covertype, 3 providers."""
    from sklearn.decomposition import PCA

    from privpca.datasets import load_covtype
    from privpca.metrics import subspace_distance

    X = load_covtype(normalize_rows=False).data[:, :10]
    ref = PCA(2).fit(X)
    ratio = np.array2string(ref.explained_variance_ratio_, precision=4)
    print(f"Covertype, n={len(X):,}, d=10, {n_providers} providers (contiguous blocks), "
          f"DPSPCA(2) on defaults (T={T}), {seeds} seeds; scikit-learn ratios {ratio}")
    print("  eps   distance (mean, max)   |ratio - sklearn| max   seconds per fit")
    for eps in (0.5, 1.0, 2.0):
        dist, err, secs = [], [], []
        for seed in range(seeds):
            t0 = time.perf_counter()
            est = DPSPCA(2, epsilon=eps, n_providers=n_providers, random_state=seed,
                         ledger=PrivacyLedger()).fit(X)
            secs.append(time.perf_counter() - t0)
            dist.append(subspace_distance(est.components_.T, ref.components_.T))
            err.append(float(np.abs(est.explained_variance_ratio_
                                    - ref.explained_variance_ratio_).max()))
        print(f"  {eps:3.1f}   {np.mean(dist):.4f}, {np.max(dist):.4f}        "
              f"{np.max(err):.4f}                {np.mean(secs):.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dims", type=int, nargs="+", default=[200, 400, 800])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--flower", action="store_true")
    parser.add_argument("--flower-only", action="store_true",
                        help="Only the Flower rounds (no per-dimension figures).")
    parser.add_argument("--isolation", nargs="+", choices=["subprocess", "process"],
                        default=["subprocess", "process"],
                        help="Provider isolations to time over Flower (before: subprocess, "
                        "after: process).")
    parser.add_argument("--aggregation", nargs="+", choices=["local-noise", "secure"],
                        default=["local-noise"],
                        help="Aggregations to time over Flower (secure: process isolation).")
    parser.add_argument("--rounds", type=int, default=5, help="Rounds of the Flower runs.")
    parser.add_argument("--covertype", action="store_true",
                        help="Only the Covertype comparison with scikit-learn (defaults).")
    parser.add_argument("--seeds", type=int, default=3)
    args = parser.parse_args()
    if args.covertype:
        with threadpool_limits(1), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            bench_covertype(args.seeds)
        return
    print(f"DPS-PCA, n={N:,}, k={K}, s={S}, ŝ={S_HAT}, T={T}, ε={EPS}, δ={DELTA}; one BLAS thread")
    with threadpool_limits(1), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if not args.flower_only:
            for d in args.dims:
                bench_dim(d, args.repeat)
        if args.flower or args.flower_only:
            bench_flower(rounds=args.rounds, isolations=tuple(args.isolation),
                         aggregations=tuple(args.aggregation))


if __name__ == "__main__":
    main()
