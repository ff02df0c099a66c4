"""What DP-PCA's two compiled passes cost, split into arithmetic and memory.

One fit of the papers' setting at n = 10⁶, d = 100 (``bench_dppca.py``) makes T = 19 steps; each
step reads one batch of B = 52 392 rows: half as Algorithm 4's pair differences
(:func:`~privpca.mechanisms._kernels.pair_top_eigenvalues`, 174 subsets of 75 pairs), half as
Algorithm 5's gradients and bin counts (:func:`~privpca.mechanisms._kernels.gradient_counts`).
This script runs the same 19 batches through each pass with the rows read in a random order
(as a fit reads them) and in storage order (the arithmetic alone), Algorithm 4 with its power
steps and with none, beside one ``X @ w`` over the same rows: the limit of a memory-bound pass.

    OPENBLAS_NUM_THREADS=1 python benchmarks/bench_dppca_passes.py [--repeats 3]

Every figure is the best of the repeats, in seconds for all 19 batches.
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable

import numpy as np

from privpca.mechanisms._kernels import WINDOW, gradient_counts, pair_top_eigenvalues
from privpca.mechanisms.gradient_statistics import POWER_ITERATIONS

N, D, STEPS, BATCH, SUBSETS = 1_000_000, 100, 19, 52_392, 174


def best_of(fn: Callable[[], object], repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    X = rng.standard_normal((N, D)) * np.sqrt([1.0] + [0.5] * (D - 1))
    W = np.ascontiguousarray(rng.standard_normal((D, 1)) / 10.0)
    centre = np.zeros(D)
    half = BATCH // 2
    perm = rng.permutation(N)
    shuffled = [perm[t * BATCH : (t + 1) * BATCH] for t in range(STEPS)]
    in_order = [np.arange(t * BATCH, (t + 1) * BATCH, dtype=np.intp) for t in range(STEPS)]
    G = np.empty((half, D))
    base = np.empty(D, dtype=np.int64)
    table = np.empty((D, WINDOW + 2), dtype=np.int64)
    lam = np.empty(SUBSETS)

    def eigen(batches: list[np.ndarray], n_iter: int) -> Callable[[], None]:
        def run() -> None:
            for rows in batches:
                pair_top_eigenvalues(X, rows[:half], centre, W, SUBSETS, n_iter, lam)
        return run

    def counts(batches: list[np.ndarray]) -> Callable[[], None]:
        def run() -> None:
            for rows in batches:
                gradient_counts(X, rows[half:], centre, W, 20.0, G, base, table)
        return run

    def one_pass() -> None:
        for rows in in_order:
            X[rows[0] : rows[-1] + 1] @ W

    eigen(shuffled[:1], POWER_ITERATIONS)()  # compile / load the kernels
    counts(shuffled[:1])()
    print(f"n={N}, d={D}: {STEPS} batches of {BATCH} rows, best of {args.repeats}; "
          f"load average {os.getloadavg()[0]:.2f} before")
    rows_ = [
        (f"Algorithm 4, {POWER_ITERATIONS} power steps, random order",
         eigen(shuffled, POWER_ITERATIONS)),
        (f"Algorithm 4, {POWER_ITERATIONS} power steps, storage order",
         eigen(in_order, POWER_ITERATIONS)),
        ("Algorithm 4, no power step,   storage order", eigen(in_order, 0)),
        ("Algorithm 5 counts,           random order", counts(shuffled)),
        ("Algorithm 5 counts,           storage order", counts(in_order)),
        ("one X @ w over every batch,   storage order", one_pass),
    ]
    for label, fn in rows_:
        print(f"  {label:48s}: {best_of(fn, args.repeats):.3f} s")
    print(f"load average {os.getloadavg()[0]:.2f} after")


if __name__ == "__main__":
    main()
