"""The local model on defaults against the papers' setting (issue 28).

Zero-mean rows of norm ≤ 1 (Σ = 0.2·VVᵀ + 0.005·I clipped to norm 1, p = 10, k = 2), ε = 0.5,
δ = 10⁻⁵: the released norm bound D, the released mean's error ‖μ̂ − x̄‖ and the subspace
distance to the truth, on defaults (private mean and bound) and in the papers' setting
(``centering=None, data_norm=1``), mean over seeds.

    PYTHONPATH=src python benchmarks/local_defaults.py [n ...] [--seeds S]
"""

from __future__ import annotations

import argparse

import numpy as np

from privpca import LocalGaussianPCA, PrivacyLedger
from privpca.datasets import make_low_rank_gaussian
from privpca.metrics import subspace_distance


def run(n: int, seeds: int, eps: float = 0.5) -> dict[str, float]:
    out: dict[str, list[float]] = {"D": [], "mean_err": [], "err_default": [], "err_paper": []}
    for seed in range(seeds):
        X, V = make_low_rank_gaussian(n, 10, 2, signal=0.2, random_state=seed)
        X = X / np.maximum(1.0, np.linalg.norm(X, axis=1))[:, None]  # norm ≤ 1 exactly
        d = LocalGaussianPCA(2, epsilon=eps, random_state=seed, ledger=PrivacyLedger()).fit(X)
        pap = LocalGaussianPCA(2, epsilon=eps, centering=None, data_norm=1.0,
                               random_state=seed, ledger=PrivacyLedger()).fit(X)
        out["D"].append(d.data_norm_)
        out["mean_err"].append(float(np.linalg.norm(d.mean_ - X.mean(axis=0))))
        out["err_default"].append(subspace_distance(d.components_.T, V))
        out["err_paper"].append(subspace_distance(pap.components_.T, V))
    return {k: float(np.mean(v)) for k, v in out.items()} | {
        "D_max": float(np.max(out["D"])), "mean_err_max": float(np.max(out["mean_err"]))}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("n", nargs="*", type=int, default=[20_000, 200_000])
    ap.add_argument("--seeds", type=int, default=5)
    args = ap.parse_args()
    print("| n | D (mean, max) | ‖μ̂ − x̄‖ (mean, max) | defaults | papers' setting | ratio |")
    print("|---|---|---|---|---|---|")
    for n in args.n:
        r = run(n, args.seeds)
        print(f"| {n} | {r['D']:.3g}, {r['D_max']:.3g} | {r['mean_err']:.3g}, "
              f"{r['mean_err_max']:.3g} | {r['err_default']:.3f} | {r['err_paper']:.3f} | "
              f"{r['err_default'] / r['err_paper']:.2f} |")


if __name__ == "__main__":
    main()
