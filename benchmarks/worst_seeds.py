"""The issue-36 targets over fresh seeds: AnalyzeGaussPCA's defaults (or another bound rule)
on every suite table of 1 000 rows or more, against the oracle of the published suite run.

The suite (``privpca reproduce real-data-suite``) runs three seeds; a rule that is wrong one
time in ten passes it often. Here each table gets ``--seeds`` fresh seeds (200, 201, …) and
the line reports the mean and the worst distance to scikit-learn's ``PCA(2)`` of the raw
table, whether the mean meets 1.25·oracle + 0.01 and how many seeds miss 2·oracle + 0.02
(the oracle: the best fixed quantile's mean, read from docs/experiments/real-data-suite.csv).

    python benchmarks/worst_seeds.py [--seeds 10] [--rule auto|quantile] [table ...]
"""

from __future__ import annotations

import argparse
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
from sklearn.decomposition import PCA

from privpca import AnalyzeGaussPCA, PrivacyLedger
from privpca.experiments.real_data_report import (
    MEAN_SLACK,
    MEAN_TARGET,
    WORST_SLACK,
    WORST_TARGET,
)
from privpca.experiments.real_data_tables import SUITE, TUNING_TABLES, load_table
from privpca.metrics import subspace_distance
from privpca.pipeline.preprocessing import BoundNotFoundError

SUITE_CSV = Path(__file__).resolve().parents[1] / "docs/experiments/real-data-suite.csv"


def oracles() -> pd.Series:
    """Per table, the oracle's mean distance for AnalyzeGauss (its best fixed quantile)."""
    runs = pd.read_csv(SUITE_CSV)
    runs = runs[(runs.estimator == "analyze-gauss") & runs.method.str.contains("oracle")]
    return runs.groupby(["panel", "clip_quantile"]).error.mean().groupby(level=0).min()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("tables", nargs="*")
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--rule", default="auto", choices=("auto", "quantile"))
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    oracle = oracles()
    names = args.tables or [t for t in SUITE if SUITE[t].n >= 1000]
    print(f"{'table':14s} {'half':8s} {'n':>7s} {'p':>4s} {'oracle':>7s} {'mean':>7s} "
          f"{'worst':>7s} {'mean ok':>8s} {'seeds > 2·oracle + 0.02':>24s}")
    for name in names:
        X, _ = load_table(name)
        ref = PCA(2).fit(X).components_.T
        errors = []
        for seed in range(200, 200 + args.seeds):
            try:
                est = AnalyzeGaussPCA(2, epsilon=1.0, data_norm=args.rule, random_state=seed,
                                      ledger=PrivacyLedger()).fit(X)
            except BoundNotFoundError:
                errors.append(np.nan)
                continue
            errors.append(subspace_distance(np.asarray(est.components_).T, ref))
        e = np.asarray(errors)
        o = float(oracle.get(name, np.nan))
        half = "tuning" if name in TUNING_TABLES else "held-out"
        print(f"{name:14s} {half:8s} {X.shape[0]:7d} {X.shape[1]:4d} {o:7.3f} "
              f"{np.nanmean(e):7.3f} {np.nanmax(e):7.3f} "
              f"{'yes' if np.nanmean(e) <= MEAN_TARGET * o + MEAN_SLACK else 'no':>8s} "
              f"{int(np.sum(e > WORST_TARGET * o + WORST_SLACK)):>20d}/{len(e)}", flush=True)


if __name__ == "__main__":
    main()
