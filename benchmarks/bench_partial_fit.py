"""partial_fit in T batches against one fit on the whole table: the cost of fitting in batches.

Each call of ``AnalyzeGaussPCA.partial_fit`` releases its batch's noisy Gram matrix (and noisy
row sum) at the whole (ε, δ); the components come from the running sums, whose noise has std
σ√T per entry while the signal grows with n only. This prints, for a spiked table (n = 20 000,
p = 20, k = 2, ε = 1, δ = 1e-5, ``centering="private"``, the public ``data_norm=1``: every row
of this model has norm below 0.5), the mean and worst subspace distance
``‖UUᵀ − VVᵀ‖_F`` to scikit-learn's PCA of the same table over the seeds, beside one ``fit``
on the whole table with the same parameters and one ``fit`` on the defaults (a private bound).
Chance for k = 2, p = 20 is about 1.9 (at most 2).

    python benchmarks/bench_partial_fit.py [--seeds 5]

The figures are in :mod:`privpca.decomposition._incremental` and docs/GUIDE.md.
"""

from __future__ import annotations

import argparse
import warnings

import numpy as np
from sklearn.decomposition import PCA

from privpca import AnalyzeGaussPCA, PrivacyLedger
from privpca.datasets import make_spiked
from privpca.metrics import subspace_distance

N, P, K, EPSILON, DELTA, DATA_NORM = 20_000, 20, 2, 1.0, 1e-5, 1.0
BATCHES = (1, 2, 5, 10, 20)


def distance(est: AnalyzeGaussPCA, reference: PCA) -> float:
    return subspace_distance(est.components_.T, reference.components_.T)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=5)
    seeds = range(parser.parse_args().seeds)
    rows: dict[str, list[float]] = {f"{t}": [] for t in BATCHES}
    rows.update({"fit": [], "fit, defaults": []})
    warnings.simplefilter("ignore")  # the seeds' ReproducibleNoiseWarning: a benchmark
    for seed in seeds:
        X, _ = make_spiked(N, P, K, lam=9.0, random_state=seed)
        reference = PCA(K).fit(X)
        params = {"epsilon": EPSILON, "delta": DELTA, "random_state": seed,
                  "ledger": PrivacyLedger()}
        for t in BATCHES:
            est = AnalyzeGaussPCA(K, data_norm=DATA_NORM, **params)
            for batch in np.array_split(X, t):
                est.partial_fit(batch)
            rows[f"{t}"].append(distance(est, reference))
        rows["fit"].append(distance(AnalyzeGaussPCA(K, data_norm=DATA_NORM, **params).fit(X),
                                    reference))
        rows["fit, defaults"].append(distance(AnalyzeGaussPCA(K, **params).fit(X), reference))
    print(f"n = {N}, p = {P}, k = {K}, epsilon = {EPSILON:g}, delta = {DELTA:g}, "
          f"data_norm = {DATA_NORM:g}, {len(seeds)} seeds: distance to scikit-learn's PCA")
    print(f"{'batches T':<16}{'mean':>8}{'worst':>8}")
    for name, values in rows.items():
        print(f"{name:<16}{np.mean(values):>8.3f}{np.max(values):>8.3f}")


if __name__ == "__main__":
    main()
