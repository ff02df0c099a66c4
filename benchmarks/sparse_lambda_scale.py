"""Measure LocalSparsePCA's error against the multiplier of its default λ.

The default ``lam="auto"`` is ``lam_scale · (σ₁/√n)·√(2 ln p²)``. This script fits
LocalSparsePCA on several row-sparse spiked problems (``make_low_rank_gaussian``: a spike that
does not shrink with p, so the problems are neither trivial nor hopeless) for a range of
``lam_scale`` values and
prints a markdown table of mean ``‖V̂V̂ᵀ − VVᵀ‖_F`` and support recovery; the dense
LocalGaussianPCA on the same data is the reference. ``docs/local_sparse_lambda.md`` holds its
output.

Run: ``python benchmarks/sparse_lambda_scale.py [--repetitions 5] [--settings 0 1]``
"""

from __future__ import annotations

import argparse
import warnings

import numpy as np

from privpca import LocalGaussianPCA, LocalSparsePCA, PrivacyLedger
from privpca.datasets import make_low_rank_gaussian
from privpca.metrics import subspace_distance, support_recovery

SETTINGS = [
    # (n, p, k, s, signal, ε): make_low_rank_gaussian(Σ = signal·VVᵀ + (0.05/p)·I)
    (100_000, 200, 1, 5, 0.1, 4.0),
    (100_000, 200, 2, 8, 0.1, 2.0),
    (50_000, 500, 2, 10, 0.15, 4.0),
    (200_000, 300, 3, 12, 0.08, 1.0),
]
SCALES = [2.0, 1.0, 0.5, 0.25, 0.125]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repetitions", type=int, default=5)
    parser.add_argument(
        "--settings",
        type=int,
        nargs="*",
        default=None,
        help="indices into SETTINGS to run (default: all)",
    )
    args = parser.parse_args()
    ledger = PrivacyLedger()
    print("| n | p | k | s | signal | ε | dense | " + " | ".join(f"c={c:g}" for c in SCALES) + " |")
    print("|---" * (7 + len(SCALES)) + "|")
    chosen = SETTINGS if args.settings is None else [SETTINGS[i] for i in args.settings]
    for n, p, k, s, signal, eps in chosen:
        X, V = make_low_rank_gaussian(n, p, k, n_nonzero=s, signal=signal, random_state=123)
        truth = np.flatnonzero(np.linalg.norm(V, axis=1))
        dense = np.mean(
            [
                subspace_distance(
                    LocalGaussianPCA(k, epsilon=eps, random_state=r, ledger=ledger)
                    .fit(X)
                    .components_.T,
                    V,
                )
                for r in range(args.repetitions)
            ]
        )
        cells = []
        for c in SCALES:
            errs, tprs, fprs = [], [], []
            for r in range(args.repetitions):
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    est = LocalSparsePCA(
                        k, epsilon=eps, lam_scale=c, random_state=r, ledger=ledger, max_iter=300
                    ).fit(X)
                errs.append(subspace_distance(est.components_.T, V))
                rec = support_recovery(est.components_.T, truth)
                tprs.append(rec.true_positive_rate)
                fprs.append(rec.false_positive_rate)
            cells.append(f"{np.mean(errs):.3f} ({np.mean(tprs):.2f}/{np.mean(fprs):.3f})")
        print(
            f"| {n:,} | {p} | {k} | {s} | {signal:g} | {eps:g} | {dense:.3f} | "
            + " | ".join(cells)
            + " |",
            flush=True,
        )
    print(
        "\nCells: mean ‖V̂V̂ᵀ − VVᵀ‖_F (true positive rate / false positive rate of the row "
        f"support), {args.repetitions} repetitions; dense = LocalGaussianPCA."
    )


if __name__ == "__main__":
    main()
