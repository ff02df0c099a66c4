"""DPS-PCA's defaults on the real-table suite's tables of 1 000 rows or more.

Each table is split among ``--providers`` providers (``DPSPCA(n_providers=...)``); the line
reports the mean and the worst distance to scikit-learn's ``PCA(2)`` of the raw table over
``--seeds`` seeds (300, 301, …), ε = 1. To compare with another version of privpca, run the
same command with ``PYTHONPATH`` set to that checkout's ``src`` (docs/DISTRIBUTED.md: the
providers' bound ladder against the 99 % quantile it replaced).

    python benchmarks/dps_suite_tables.py [--seeds 3] [--providers 3] [table ...]
"""

from __future__ import annotations

import argparse
import warnings

import numpy as np
from sklearn.decomposition import PCA

from privpca import DPSPCA, PrivacyLedger
from privpca.experiments.real_data_tables import SUITE, load_table
from privpca.metrics import subspace_distance
from privpca.pipeline.preprocessing import BoundNotFoundError


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("tables", nargs="*")
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--providers", type=int, default=3)
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    print(f"{'table':14s} {'n':>7s} {'p':>4s} {'mean':>7s} {'worst':>7s} {'refused':>8s}")
    for name in args.tables or [t for t in SUITE if SUITE[t].n >= 1000]:
        X, _ = load_table(name)
        ref = PCA(2).fit(X).components_.T
        errors = []
        for seed in range(300, 300 + args.seeds):
            try:
                est = DPSPCA(2, n_providers=args.providers, random_state=seed,
                             ledger=PrivacyLedger()).fit(X)
            except BoundNotFoundError:
                errors.append(np.nan)
                continue
            errors.append(subspace_distance(est.components_.T, ref))
        e = np.asarray(errors)
        print(f"{name:14s} {X.shape[0]:7d} {X.shape[1]:4d} {np.nanmean(e):7.3f} "
              f"{np.nanmax(e):7.3f} {int(np.sum(np.isnan(e))):>8d}", flush=True)


if __name__ == "__main__":
    main()
