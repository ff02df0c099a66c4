"""How close the private explained-variance ratios are to scikit-learn's, on the real-table suite.

Reads the suite's CSV (``privpca reproduce real-data-suite -o docs/experiments``) and prints,
per estimator on defaults, the median of |private EVR − scikit-learn EVR| (top-2, summed) and
the median EVR claimed, separately for fits that resolved the subspace (distance to
scikit-learn's < 0.5) and fits that did not (> 1). Given a second CSV (an older run), prints
its figures beside: e.g. before the noise debias,

    git show 172ebb4:docs/experiments/real-data-suite.csv > /tmp/before.csv
    python benchmarks/evr_suite.py docs/experiments/real-data-suite.csv /tmp/before.csv
"""

from __future__ import annotations

import sys

import pandas as pd


def summary(path: str) -> pd.DataFrame:
    runs = pd.read_csv(path)
    runs = runs[(runs.bound == "defaults") & runs.explained_ratio.notna()].copy()
    runs["gap"] = (runs.explained_ratio - runs.sklearn_ratio).abs()
    runs["fits"] = pd.cut(runs.error, [-1.0, 0.5, 1.0, 3.0],
                          labels=["resolved (< 0.5)", "between", "noise (> 1)"])
    return (runs[runs.fits != "between"]
            .groupby(["fits", "estimator"], observed=True)
            .agg(n=("gap", "size"), median_gap=("gap", "median"),
                 median_claimed=("explained_ratio", "median")))


def main() -> None:
    table = summary(sys.argv[1])
    if len(sys.argv) > 2:
        table = table.merge(summary(sys.argv[2]), left_index=True, right_index=True,
                            suffixes=("", "_older"))
    print(table.round(3).to_string())


if __name__ == "__main__":
    main()
