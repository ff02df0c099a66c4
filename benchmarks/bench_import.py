"""Cold import time of privpca beside scikit-learn's, in fresh processes.

Usage: ``python benchmarks/bench_import.py [--runs 7] [--python PYTHON]``.
Each statement runs in a new interpreter (``python -c STATEMENT``), the statements in turns
(A B C A B C ...) so that a drift of the machine's speed reaches all of them; the wall time
of the whole process is read around it, its start-up included. Prints min and median per
statement, and the ratio of the medians to ``import sklearn.decomposition`` (what a user of
scikit-learn's PCA pays before the first fit). Set ``PYTHONPATH`` to time another checkout.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time

STATEMENTS: dict[str, str] = {
    "python (start-up only)": "pass",
    "import privpca": "import privpca",
    "from privpca import AnalyzeGaussPCA (first use)": "from privpca import AnalyzeGaussPCA",
    "import sklearn.decomposition": "import sklearn.decomposition",
}
BASELINE = "import sklearn.decomposition"


def _wall(python: str, statement: str) -> float:
    start = time.perf_counter()
    subprocess.run([python, "-c", statement], check=True)
    return time.perf_counter() - start


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7, help="processes per statement (≥ 5)")
    parser.add_argument("--python", default=sys.executable, help="the interpreter to start")
    args = parser.parse_args(argv)
    for statement in STATEMENTS.values():  # warm the OS file cache; not counted
        _wall(args.python, statement)
    times: dict[str, list[float]] = {label: [] for label in STATEMENTS}
    for _ in range(args.runs):
        for label, statement in STATEMENTS.items():
            times[label].append(_wall(args.python, statement))
    base = statistics.median(times[BASELINE])
    print(f"{'statement':<50} {'min s':>7} {'median s':>9} {'/ sklearn':>10}")
    for label, values in times.items():
        median = statistics.median(values)
        print(f"{label:<50} {min(values):>7.3f} {median:>9.3f} {median / base:>10.2f}")
    print(f"({args.runs} fresh processes each; ratio of medians to '{BASELINE}')")


if __name__ == "__main__":
    main()
