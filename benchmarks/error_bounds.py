"""Coverage and tightness of ``expected_error_``, per estimator.

For each table and seed, fit the estimator on defaults (ε = 1, δ = 10⁻⁵, private centring
and bound) and compare ``expected_error_`` with the true distance ‖V̂V̂ᵀ − VVᵀ‖_F to
scikit-learn's ``PCA`` of the raw table (``--reference raw``, the default: what the README
promises) or to the exact PCA of the same prepared rows (``--reference prepared``: the rows
centred on the fit's ``mean_`` and clipped to its ``data_norm_``, then centred on their own
mean). Prints, per estimator, the coverage (share of fits with ``expected_error_ ≥`` the
distance), the median of ``expected_error_ / distance`` and of ``expected_error_ /
(distance + 0.02)`` (non-vacuous when ≤ 5) and the fits where the bound was at its cap √(2k).
``--quick`` runs the small suite of the ``slow`` test.

    python benchmarks/error_bounds.py [--quick] [--seeds 3] [--reference raw|prepared]
"""

from __future__ import annotations

import argparse
import math
import warnings

import numpy as np
from sklearn import datasets as skd

import privpca
from privpca.datasets import load_covtype, load_isolet5, make_spiked
from privpca.metrics import subspace_distance
from privpca.pipeline.preprocessing import BoundNotFoundError

K = 2
# Estimator name → (constructor, largest p it is run at: LocalSparsePCA's ADMM and Bingham's
# sampler are O(p³) per step).
ESTIMATORS = {
    "AnalyzeGaussPCA": (lambda s: privpca.AnalyzeGaussPCA(K, random_state=s), 10**9),
    "ModSuLQPCA": (lambda s: privpca.ModSuLQPCA(K, random_state=s), 10**9),
    "NoisyPowerPCA": (lambda s: privpca.NoisyPowerPCA(K, random_state=s), 10**9),
    "BinghamPCA": (lambda s: privpca.BinghamPCA(K, random_state=s), 100),
    "PrivateOjaPCA": (lambda s: privpca.PrivateOjaPCA(K, random_state=s), 10**9),
    "DPPCA": (lambda s: privpca.DPPCA(K, random_state=s), 10**9),
    "LocalGaussianPCA": (lambda s: privpca.LocalGaussianPCA(K, random_state=s), 100),
    "LocalSparsePCA": (lambda s: privpca.LocalSparsePCA(K, random_state=s), 100),
    "DPSPCA": (lambda s: privpca.DPSPCA(K, random_state=s), 10**9),
}


def tables(quick: bool) -> dict[str, np.ndarray]:
    """Real tables (shipped and scikit-learn's) and the synthetic suite."""
    out: dict[str, np.ndarray] = {
        "diabetes": skd.load_diabetes().data,
        "breast_cancer": skd.load_breast_cancer().data,
        "wine": skd.load_wine().data,
        "digits": skd.load_digits().data,
        "spiked(20000,20,λ=1)": make_spiked(20000, 20, K, lam=1.0, random_state=0)[0],
        "spiked(50000,50,λ=4)": make_spiked(50000, 50, K, lam=4.0, random_state=1)[0],
    }
    if not quick:
        # Covertype's first 100 000 rows (of 581 012): the suite must run in minutes.
        out["covtype[:1e5]"] = np.asarray(load_covtype().data[:100_000], dtype=np.float64)
        out["isolet5"] = np.asarray(load_isolet5().data, dtype=np.float64)
        out["spiked(100000,10,λ=0.5)"] = make_spiked(100000, 10, K, lam=0.5,
                                                     random_state=2)[0]
    return out


def prepared_distance(est: object, X: np.ndarray) -> float:
    """Distance of ``components_`` to the exact PCA of the fit's prepared rows."""
    Y = X - est.mean_
    if est.scale_ is not None:
        Y = Y / est.scale_
    if math.isfinite(est.data_norm_):
        norms = np.linalg.norm(Y, axis=1)
        Y = Y * np.minimum(1.0, est.data_norm_ / np.maximum(norms, 1e-300))[:, None]
    Y = Y - Y.mean(axis=0)
    V = np.linalg.svd(Y, full_matrices=False)[2][:K]
    return float(subspace_distance(est.components_.T, V.T))


def raw_distance(est: object, X: np.ndarray) -> float:
    """Distance of ``components_`` to scikit-learn's PCA of the raw table."""
    Y = X - X.mean(axis=0)
    V = np.linalg.svd(Y, full_matrices=False)[2][:K]
    return float(subspace_distance(est.components_.T, V.T))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--only", default="")
    ap.add_argument("--reference", choices=("raw", "prepared"), default="raw")
    ap.add_argument("--per-table", action="store_true",
                    help="also print each table's median distance and bound")
    args = ap.parse_args()
    data = tables(args.quick)
    names = [n for n in ESTIMATORS if not args.only or n in args.only.split(",")]
    distance = raw_distance if args.reference == "raw" else prepared_distance
    print(f"reference: {args.reference}")
    print(f"{'estimator':18s} {'fits':>5s} {'coverage':>9s} {'bar/dist':>9s} "
          f"{'bar/(d+.02)':>12s} {'at cap':>7s} {'None':>5s}")
    for name in names:
        make, max_p = ESTIMATORS[name]
        cover, ratios, plain, capped, none, fits = 0, [], [], 0, 0, 0
        for tname, X in data.items():
            if X.shape[1] > max_p:
                continue
            rows: list[tuple[float, float]] = []
            for seed in range(args.seeds):
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    try:
                        est = make(seed).fit(X)
                    except (BoundNotFoundError, ValueError):  # too few rows at ε = 1
                        continue
                bound = est.expected_error_
                fits += 1
                if bound is None:
                    none += 1
                    continue
                d = distance(est, X)
                rows.append((d, bound))
                cover += bound >= d - 1e-9
                ratios.append(bound / (d + 0.02))
                plain.append(bound / max(d, 1e-12))
                capped += bound >= math.sqrt(2 * K) - 1e-12
            if args.per_table and rows:
                d_med, b_med = np.median(np.array(rows), axis=0)
                print(f"    {name:18s} {tname:26s} {X.shape!s:14s} distance {d_med:.3f} "
                      f"bound {b_med:.3f}", flush=True)
        n_b = fits - none
        cov = cover / n_b if n_b else math.nan
        med = float(np.median(ratios)) if ratios else math.nan
        med_plain = float(np.median(plain)) if plain else math.nan
        print(f"{name:18s} {fits:5d} {cov:9.2f} {med_plain:9.2f} {med:12.2f} {capped:7d} "
              f"{none:5d}", flush=True)


if __name__ == "__main__":
    main()
