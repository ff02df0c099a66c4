"""DPS-PCA's error against the number of providers: local noise, secure aggregation, central.

For each table, ε = 1, δ = 1e-5, k = 2, defaults otherwise (private mean, private bound), the
distance ‖V̂V̂ᵀ − VVᵀ‖_F to scikit-learn's ``PCA(2)``, mean and worst over the seeds, for
``DPSPCA(aggregation="local-noise")`` and ``DPSPCA(aggregation="secure")`` (min_providers = N)
at N providers of equal size, beside central ``AnalyzeGaussPCA`` and DPS-PCA with one
provider. Prints a Markdown table and the seconds per fit.

    OPENBLAS_NUM_THREADS=1 python benchmarks/bench_dpspca_secure.py --providers 1 5 20
"""

from __future__ import annotations

import argparse
import time
import warnings
from typing import Any

import numpy as np
from sklearn.decomposition import PCA

import privpca
from privpca import DPSPCA, AnalyzeGaussPCA
from privpca.datasets import load_covtype
from privpca.datasets.real import load_package_table


def _tables(names: list[str]) -> dict[str, np.ndarray]:
    out = {}
    for name in names:
        if name == "covtype10":
            out[name] = load_covtype(normalize_rows=False).data[:, :10].copy()
        elif name == "spiked":
            rng = np.random.default_rng(7)
            out[name] = (rng.standard_normal((100_000, 20)) * np.linspace(4, 1, 20)) + 3.0
        else:
            out[name] = np.asarray(load_package_table(name).data, dtype=np.float64)
    return out


def _distance(W: np.ndarray, V: np.ndarray) -> float:
    return float(np.linalg.norm(W.T @ W - V.T @ V))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--tables", nargs="+", default=["covtype10", "china_patches", "spiked"])
    parser.add_argument("--providers", nargs="+", type=int, default=[1, 5, 20])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--epsilon", type=float, default=1.0)
    args = parser.parse_args()
    privpca.set_config(secure_mode=False)  # seeded runs, for a comparison under equal seeds
    warnings.simplefilter("ignore")
    print("| table | n × p | estimator | N | mean | worst | s per fit |")
    print("|---|---|---|---|---|---|---|")
    for name, X in _tables(args.tables).items():
        V = PCA(2).fit(X).components_
        shape = f"{X.shape[0]} × {X.shape[1]}"

        def run(label: str, make: Any, N: int | str, X: np.ndarray = X,
                V: np.ndarray = V, name: str = name, shape: str = shape) -> None:
            d, t0 = [], time.perf_counter()
            for seed in range(args.seeds):
                d.append(_distance(make(seed).fit(X).components_, V))
            sec = (time.perf_counter() - t0) / args.seeds
            print(f"| {name} | {shape} | {label} | {N} | {np.mean(d):.4f} | {max(d):.4f} | "
                  f"{sec:.1f} |", flush=True)

        run("AnalyzeGaussPCA (central)", lambda s: AnalyzeGaussPCA(
            2, epsilon=args.epsilon, random_state=s), "-")
        for N in args.providers:
            run("DPSPCA local-noise", lambda s, N=N: DPSPCA(
                2, epsilon=args.epsilon, n_providers=N, random_state=s), N)
            if N >= 2:
                run("DPSPCA secure", lambda s, N=N: DPSPCA(
                    2, epsilon=args.epsilon, n_providers=N, aggregation="secure",
                    random_state=s), N)


if __name__ == "__main__":
    main()
