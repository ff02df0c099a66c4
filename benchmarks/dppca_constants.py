"""How DP-PCA's unspecified constants were chosen, and what they do (docs/DP_PCA.md).

    python benchmarks/dppca_constants.py [--seeds 3] [--quick]

Prints three tables in the papers' setting (``centering=None``: uncentred second moment),
metric sin∠(ŵ, v₁), mean over seeds:
1. error against n and ε on Gaussian data (d = 50, λ₁ = 1, λ₂..d = 0.5, δ = 1/n²);
2. the effect of batch_constant, truncation_radius and the learning rate at n = 10⁶, ε = 1;
3. Example 4.1 (x = ±v + σz, n = 10⁵, d = 20, ε = 1): DP-PCA against Private Oja as σ shrinks.

With ``--centering`` it prints instead the table of docs/DP_PCA.md's centring section: data with
a large mean (5·1, d = 20, Σ = I + 9vvᵀ, ε = 1, δ = 1/n²), each estimator on its defaults and
with ``centering=None``, against scikit-learn's ``PCA(1)`` and ``AnalyzeGaussPCA(1)`` on its
defaults; metric ‖P̂ − P_sklearn‖_F (max √2).
"""

from __future__ import annotations

import argparse
import math
import warnings

import numpy as np

from privpca import DPPCA, AnalyzeGaussPCA, OjaPCA, PrivateOjaPCA
from privpca.datasets import make_signal_noise
from privpca.metrics import sin_theta

PAPER = {"centering": None}  # the papers' uncentred setting: today's numbers, bitwise


def gaussian(n: int, d: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return rng.standard_normal((n, d)) * np.sqrt([1.0] + [0.5] * (d - 1)), np.eye(d)[:, :1]


def dp_error(n: int, eps: float, seeds: int, d: int = 50, **kw: object) -> float:
    errs = []
    for seed in range(seeds):
        X, v = gaussian(n, d, seed)
        try:
            est = DPPCA(epsilon=eps, delta=1.0 / n**2, random_state=seed,
                        **{**PAPER, **kw}).fit(X)
        except ValueError:
            return math.nan
        errs.append(sin_theta(est.components_.T, v))
    return float(np.mean(errs))


def shifted(n: int, d: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Mean 5·1, covariance I + 9vvᵀ (v Haar-random, drawn from a seed the estimators never
    use: with the same seed, W₀ would be v itself)."""
    rng = np.random.default_rng(10_000 + seed)
    v = rng.standard_normal(d)
    v /= np.linalg.norm(v)
    X = 5.0 + rng.standard_normal((n, d)) + 3.0 * rng.standard_normal((n, 1)) * v
    return X, v


def centering_table(ns: list[int], seeds: int, d: int = 20) -> None:
    from sklearn.decomposition import PCA

    def dist(A: np.ndarray, B: np.ndarray) -> float:
        return float(np.linalg.norm(A.T @ A - B.T @ B))

    for n in ns:
        rows: dict[str, list[tuple[float, float]]] = {}
        for seed in range(seeds):
            X, v = shifted(n, d, seed)
            sk = PCA(1).fit(X)
            rows.setdefault("sklearn PCA(1) vs the true v", []).append(
                (dist(sk.components_, v[None]), float(sk.explained_variance_ratio_[0])))
            delta = 1.0 / n**2
            ests = {
                "OjaPCA() (exact mean)": OjaPCA(random_state=seed),
                "OjaPCA(centering=None)": OjaPCA(centering=None, random_state=seed),
                "PrivateOjaPCA() defaults": PrivateOjaPCA(delta=delta, random_state=seed),
                "PrivateOjaPCA(stream_centering='pairs')": PrivateOjaPCA(
                    delta=delta, stream_centering="pairs", random_state=seed),
                "PrivateOjaPCA(centering=None, clip_norm=1)": PrivateOjaPCA(
                    delta=delta, centering=None, clip_norm=1.0, random_state=seed),
                "DPPCA() defaults": DPPCA(delta=delta, random_state=seed),
                "DPPCA(stream_centering='pairs')": DPPCA(delta=delta, stream_centering="pairs",
                                                         random_state=seed),
                "DPPCA(centering=None)": DPPCA(delta=delta, centering=None, random_state=seed),
                "AnalyzeGaussPCA(1) defaults": AnalyzeGaussPCA(1, delta=delta,
                                                               random_state=seed),
            }
            for name, est in ests.items():
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    est.fit(X)
                rows.setdefault(name, []).append(
                    (dist(est.components_[:1], sk.components_),  # type: ignore[attr-defined]
                     float(est.explained_variance_ratio_[0])))  # type: ignore[attr-defined]
        print(f"\nn={n:.0e}, d={d}, mean 5·1, Σ = I + 9vvᵀ, ε=1, δ=1/n², {seeds} seeds")
        print("| estimator | ‖P̂ − P_sklearn‖_F | explained_variance_ratio_[0] |")
        print("|---|---|---|")
        for name, vals in rows.items():
            a = np.array(vals)
            ratio = "NaN" if np.isnan(a[:, 1]).all() else f"{np.nanmean(a[:, 1]):.3f}"
            print(f"| {name} | {a[:, 0].mean():.4f} | {ratio} |", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="smaller n (for a smoke run)")
    parser.add_argument("--centering", action="store_true",
                        help="the centring table (data with a large mean) instead")
    args = parser.parse_args()
    if args.centering:
        centering_table([10**5] if args.quick else [10**5, 10**6], args.seeds)
        return
    top = 10**5 if args.quick else 10**6
    ns = [n for n in (10**4, 3 * 10**4, 10**5, 3 * 10**5, 10**6) if n <= top]

    print("1. DPPCA defaults, Gaussian d=50: sin error (mean of", args.seeds, "seeds)")
    print("| eps | " + " | ".join(f"n={n:.0e}" for n in ns) + " |")
    print("|---|" + "---|" * len(ns))
    for eps in (0.5, 1.0, 2.0):
        row = [dp_error(n, eps, args.seeds) for n in ns]
        print(f"| {eps} | " + " | ".join(f"{e:.3f}" for e in row) + " |", flush=True)

    print(f"\n2. Constants at n={top:.0e}, eps=1 (defaults: batch_constant=10, "
          "truncation_radius=0.25, bin_width=2, learning_rate=(16, 0))")
    settings = [
        {},
        {"batch_constant": 3.0},
        {"batch_constant": 30.0},
        {"truncation_radius": 1.0, "bin_width": 4.0},
        {"learning_rate": (4.0, 0.0)},
        {"learning_rate": (64.0, 0.0)},
        {"budget_split": "paper"},
    ]
    print("| setting | sin |")
    print("|---|---|")
    for kw in settings:
        print(f"| {kw or 'defaults'} | {dp_error(top, 1.0, args.seeds, **kw):.3f} |", flush=True)

    print("\n3. Example 4.1, n=1e5, d=20, eps=1, delta=1/n^2: sin error")
    print("| sigma | DPPCA | PrivateOja (shuffle) | PrivateOja (none) |")
    print("|---|---|---|---|")
    n, d = 10**5, 20
    for sigma in (0.3, 0.1, 0.03, 0.01, 0.003):
        out = {"dp": [], "shuffle": [], "none": []}
        for seed in range(args.seeds):
            X, v = make_signal_noise(n, d, sigma, random_state=seed)
            est = DPPCA(epsilon=1.0, delta=1.0 / n**2, random_state=seed, **PAPER).fit(X)
            out["dp"].append(sin_theta(est.components_.T, v))
            clip = (1.0 + 4 * sigma * math.sqrt(d)) ** 2
            for amp in ("shuffle", "none"):
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    po = PrivateOjaPCA(epsilon=1.0, delta=1.0 / n**2, clip_norm=clip,
                                       amplification=amp, random_state=seed, **PAPER).fit(X)
                out[amp].append(sin_theta(po.components_.T, v))
        print(f"| {sigma} | {np.mean(out['dp']):.4f} | {np.mean(out['shuffle']):.4f} | "
              f"{np.mean(out['none']):.4f} |", flush=True)


if __name__ == "__main__":
    main()
