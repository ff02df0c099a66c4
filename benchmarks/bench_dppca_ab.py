"""Two checkouts of privpca side by side: DPPCA fits timed alternately, in one run.

On a shared machine the load moves between runs; timing the old and the new code in turns
(one long-lived worker process per checkout, each holding its own copy of the data, one fit
at a time) exposes both to the same load. scikit-learn's ``PCA(n_components=1).fit`` is
timed in the same turns, in the new checkout's worker.

    git archive <old-commit> src | tar -x -C /tmp/old
    OPENBLAS_NUM_THREADS=1 python benchmarks/bench_dppca_ab.py --old /tmp/old/src [--repeats 3]

Prints the best of ``--repeats`` for each, wall and CPU time (under load the CPU time is
less sensitive to the scheduler; the defaults' held-out reductions run one thread per core,
so their CPU time counts both), the ratios to scikit-learn, whether the first three entries
of the components agree (the same seed), and the load average.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

WORKER = r"""
import sys, time, warnings
import numpy as np
warnings.simplefilter("ignore")
from sklearn.decomposition import PCA
from privpca import DPPCA
n, d = int(sys.argv[1]), int(sys.argv[2])
rng = np.random.default_rng(0)
X = rng.standard_normal((n, d)) * np.sqrt([1.0] + [0.5] * (d - 1))
for c in (None, "private"):  # JIT warm-up
    DPPCA(epsilon=1.0, delta=1e-6, centering=c, random_state=0).fit(X[:20_000])
fits = {
    "sklearn": lambda: PCA(n_components=1).fit(X),
    "paper": lambda: DPPCA(epsilon=1.0, delta=1.0 / n**2, centering=None,
                           random_state=0).fit(X),
    "defaults": lambda: DPPCA(epsilon=1.0, delta=1.0 / n**2, random_state=0).fit(X),
}
print("ready", flush=True)
for line in sys.stdin:
    t0, c0 = time.perf_counter(), time.process_time()
    est = fits[line.strip()]()
    t, c = time.perf_counter() - t0, time.process_time() - c0
    print(t, c, est.components_[0, :3].tolist(), flush=True)
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--old", required=True, help="the old checkout's src folder")
    parser.add_argument("--new", default=str(Path(__file__).parents[1] / "src"))
    parser.add_argument("--n", type=int, default=1_000_000)
    parser.add_argument("--d", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    workers = {}
    for tag, src in (("old", args.old), ("new", args.new)):
        workers[tag] = subprocess.Popen(
            [sys.executable, "-c", WORKER, str(args.n), str(args.d)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env={**os.environ, "PYTHONPATH": src},
        )
        assert workers[tag].stdout is not None
        if workers[tag].stdout.readline().strip() != "ready":
            raise RuntimeError(f"the {tag} worker did not start")

    def fit(tag: str, name: str) -> tuple[float, float, str]:
        worker = workers[tag]
        assert worker.stdin is not None and worker.stdout is not None
        worker.stdin.write(name + "\n")
        worker.stdin.flush()
        seconds, cpu, head = worker.stdout.readline().strip().split(" ", 2)
        return float(seconds), float(cpu), head

    load = [os.getloadavg()[0]]
    best: dict[tuple[str, str], float] = {}
    best_cpu: dict[tuple[str, str], float] = {}
    heads: dict[tuple[str, str], str] = {}
    for _ in range(args.repeats):
        for name in ("sklearn", "paper", "defaults"):
            for tag in ("new",) if name == "sklearn" else ("old", "new"):
                seconds, cpu, heads[tag, name] = fit(tag, name)
                best[tag, name] = min(best.get((tag, name), float("inf")), seconds)
                best_cpu[tag, name] = min(best_cpu.get((tag, name), float("inf")), cpu)
    load.append(os.getloadavg()[0])
    for worker in workers.values():
        assert worker.stdin is not None
        worker.stdin.close()
        worker.wait()
    print(
        f"n={args.n}, d={args.d}, best of {args.repeats}, old and new in turns; load average "
        f"{load[0]:.2f} before, {load[1]:.2f} after"
    )
    for label, table in (("wall", best), ("CPU", best_cpu)):
        sk = table["new", "sklearn"]
        print(f"  {label:<4} sklearn PCA(n_components=1).fit : {sk:.3f} s")
        for name in ("paper", "defaults"):
            old, new = table["old", name], table["new", name]
            print(
                f"  {label:<4} DPPCA {name:<9} old {old:.3f} s ({old / sk:.2f}x)  new {new:.3f} s "
                f"({new / sk:.2f}x)"
            )
    for name in ("paper", "defaults"):
        print(f"  same components ({name}): {heads['old', name] == heads['new', name]}")


if __name__ == "__main__":
    main()
