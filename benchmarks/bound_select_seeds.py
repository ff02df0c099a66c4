"""The default bound (``data_norm="auto"``: chosen for the table) against ``"quantile"`` (the
private 99 % quantile, the previous default) over more seeds than the suite's three (issue 28).

AnalyzeGaussPCA (ε = 1, δ = 10⁻⁵, k = 2, private centring) on real-suite tables, seeds
100, 101, …: the mean distance to scikit-learn's ``PCA(2)`` of the raw table for each rule,
their ratio and the spread of ``"auto"`` (a refusal is left out of both means).

    PYTHONPATH=src python benchmarks/bound_select_seeds.py [table ...] [--seeds S]
"""

from __future__ import annotations

import argparse
import warnings

import numpy as np
from sklearn.decomposition import PCA

from privpca import AnalyzeGaussPCA, PrivacyLedger
from privpca.experiments.real_data_suite import load_table
from privpca.metrics import subspace_distance
from privpca.pipeline.preprocessing import BoundNotFoundError

TABLES = ("covtype", "randhie", "fair", "digits", "isolet5", "anes96", "breast_cancer",
          "diabetes")


def distances(X: np.ndarray, rule: str, seeds: int) -> np.ndarray:
    """The distances of the fits that did not refuse, one per seed."""
    ref = PCA(2).fit(X)
    out = []
    for seed in range(100, 100 + seeds):
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                est = AnalyzeGaussPCA(2, epsilon=1.0, data_norm=rule, random_state=seed,
                                      ledger=PrivacyLedger()).fit(X)
        except BoundNotFoundError:
            continue
        out.append(subspace_distance(est.components_.T, ref.components_.T))
    return np.asarray(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("tables", nargs="*", default=list(TABLES))
    parser.add_argument("--seeds", type=int, default=10)
    args = parser.parse_args()
    print(f"{'table':14s} {'quantile':>8s} {'auto':>7s} {'ratio':>6s}  auto min–max  fits")
    for name in args.tables:
        X, _ = load_table(name)
        quantile, auto = (distances(X, "quantile", args.seeds),
                          distances(X, "auto", args.seeds))
        if not (quantile.size and auto.size):
            print(f"{name:14s} refused")
            continue
        print(f"{name:14s} {quantile.mean():8.3f} {auto.mean():7.3f} "
              f"{auto.mean() / quantile.mean():6.2f}  {auto.min():.3f}–{auto.max():.3f}  "
              f"{auto.size}/{args.seeds}", flush=True)


if __name__ == "__main__":
    main()
