"""Where ``expected_error_`` does not hold: a few far rows carrying the table's top components.

10 columns of variances 4, 2.9 and 1 (the other eight), and a share of the rows whose last
two columns have standard deviations 30 and 24: those two columns are scikit-learn's top two
components, and the rows are about as many as the bound search's count noise (an outside
tester's table, 2026-11-29). Prints, per (ε, n, share), the distance of AnalyzeGaussPCA's
defaults to scikit-learn's PCA, its bar, and the number of bars that missed.

    python benchmarks/far_rows.py [--seeds 3]
"""

from __future__ import annotations

import argparse
import itertools
import warnings

import numpy as np
from sklearn.decomposition import PCA

import privpca
from privpca.metrics import subspace_distance


def far_table(n: int, share: float, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, 10)) * np.sqrt([4.0, 2.9] + [1.0] * 8)
    far = rng.random(n) < share
    X[far, 8:] = rng.standard_normal((int(far.sum()), 2)) * [30.0, 24.0]
    return X


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, default=3)
    args = ap.parse_args()
    missed = fits = 0
    print(f"{'eps':>4s} {'n':>7s} {'share':>6s}  distance (min-max)   bar (min-max)   missed")
    for eps, n, share in itertools.product((0.5, 1.0, 2.0), (5_000, 20_000, 50_000),
                                           (0.005, 0.01, 0.02)):
        rows = []
        for seed in range(args.seeds):
            X = far_table(n, share, 1000 + seed)
            ref = PCA(2).fit(X).components_
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                est = privpca.AnalyzeGaussPCA(2, epsilon=eps, random_state=seed).fit(X)
            rows.append((subspace_distance(est.components_.T, ref.T), est.expected_error_))
        d, b = np.array(rows).T
        miss = int(np.sum(b < d - 1e-9))
        missed, fits = missed + miss, fits + len(rows)
        print(f"{eps:4g} {n:7d} {share:6.3f}  {d.min():.3f}-{d.max():.3f}        "
              f"{b.min():.3f}-{b.max():.3f}     {miss}/{len(rows)}", flush=True)
    print(f"bars that missed: {missed} of {fits}")


if __name__ == "__main__":
    main()
