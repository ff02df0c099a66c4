"""Accuracy of the release pipeline's two layouts on defaults, side by side: preprocessing on
the whole table with a share of the budget (``holdout_fraction=None``) against a held-out
share of the rows (a secret, uniformly random set) at the whole budget (``holdout_fraction=f``).

Data: a shifted, mixed-units spiked table (a column mean of up to 10³, scales 0.3–3, a
k-dimensional signal); the error is ‖V̂V̂ᵀ − VVᵀ‖_F to scikit-learn's ``PCA(k)`` of the same
table, mean ± standard error over the repetitions (independent streams per run). This is the
evidence for ``holdout_fraction="auto"`` (docs/PIPELINE.md).

Run: ``python benchmarks/holdout_tradeoff.py`` (``--sizes 100000 1000000 10000000``);
``--covertype`` fits Covertype's 10 raw quantitative columns (n = 581 012) instead, k = 2.
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np
from sklearn.decomposition import PCA

from privpca import AnalyzeGaussPCA, PrivacyLedger
from privpca.metrics import subspace_distance
from privpca.streaming.holdout import random_row_split


def table(n: int, p: int, k: int, rng: np.random.Generator) -> np.ndarray:
    """Shifted mixed-units rows with a k-dimensional spike (built block by block)."""
    basis = np.linalg.qr(rng.standard_normal((p, k)))[0]
    scales = np.geomspace(0.3, 3.0, p)
    shift = np.linspace(0.0, 1000.0, p)
    out = np.empty((n, p))
    for a in range(0, n, 1_000_000):
        b = min(a + 1_000_000, n)
        z = rng.standard_normal((b - a, p))
        z += (rng.standard_normal((b - a, k)) * np.linspace(3.0, 2.0, k)) @ basis.T
        out[a:b] = z * scales + shift
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[100_000, 1_000_000, 10_000_000])
    parser.add_argument("--p", type=int, default=50)
    parser.add_argument("--k", type=int, default=3)
    parser.add_argument("--epsilon", type=float, default=1.0)
    parser.add_argument("--fractions", type=float, nargs="+", default=[0.02, 0.05])
    parser.add_argument("--repetitions", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--covertype", action="store_true",
                        help="Covertype's 10 quantitative columns, raw, instead of the synthetic")
    args = parser.parse_args()
    if args.covertype:
        from privpca.datasets import load_covtype

        covtype = load_covtype(normalize_rows=False).data[:, :10]
        args.sizes, args.p, args.k = [covtype.shape[0]], 10, 2
    warnings.simplefilter("ignore")
    root = np.random.SeedSequence(args.seed)
    layouts: list[float | None] = [None, *args.fractions]
    print(f"AnalyzeGaussPCA({args.k}) on defaults, epsilon={args.epsilon}, delta=1e-5, "
          f"p={args.p}; distance to scikit-learn's PCA({args.k}), mean ± s.e. over "
          f"{args.repetitions} runs")
    print(f"{'n':>11} " + " ".join(f"{'holdout ' + str(f):>22}" for f in layouts)
          + " " + " ".join(f"{'(sub-sample ' + str(f) + ')':>22}" for f in args.fractions))
    for n, size_seq in zip(args.sizes, root.spawn(len(args.sizes)), strict=True):
        errors: dict[float | None, list[float]] = {f: [] for f in layouts}
        subsample: dict[float, list[float]] = {f: [] for f in args.fractions}
        t0 = time.perf_counter()
        for rep_seq in size_seq.spawn(args.repetitions):
            data_seq, *fit_seqs = rep_seq.spawn(1 + len(layouts))
            X = (covtype if args.covertype
                 else table(n, args.p, args.k, np.random.default_rng(data_seq)))
            truth = PCA(args.k, svd_solver="covariance_eigh").fit(X).components_.T
            for f, seq in zip(layouts, fit_seqs, strict=True):
                est = AnalyzeGaussPCA(args.k, epsilon=args.epsilon, holdout_fraction=f,
                                      random_state=np.random.default_rng(seq),
                                      ledger=PrivacyLedger()).fit(X)
                errors[f].append(subspace_distance(est.components_.T, truth))
            for f in args.fractions:  # a draw of held-out rows, as the fit makes it
                split = random_row_split(n, f, np.random.default_rng(0))
                keep = np.ones(n, dtype=bool)
                keep[split.held] = False
                rest = X[keep]
                sub = PCA(args.k, svd_solver="covariance_eigh").fit(rest).components_.T
                subsample[f].append(subspace_distance(sub, truth))
                del rest
            if not args.covertype:
                del X
        cells = []
        for e_list in [*(errors[f] for f in layouts), *(subsample[f] for f in args.fractions)]:
            e = np.asarray(e_list)
            se = e.std(ddof=1) / np.sqrt(len(e)) if len(e) > 1 else float("nan")
            cells.append(f"{e.mean():.5f} ± {se:.5f}")
        print(f"{n:>11,} " + " ".join(f"{c:>22}" for c in cells)
              + f"   ({time.perf_counter() - t0:.0f} s)", flush=True)


if __name__ == "__main__":
    main()
