"""How DP-PCA's unspecified constants were chosen, and what they do (docs/DP_PCA.md).

    python benchmarks/dppca_constants.py [--seeds 3] [--quick]

Prints three tables, metric sin∠(ŵ, v₁), mean over seeds:
1. error against n and ε on Gaussian data (d = 50, λ₁ = 1, λ₂..d = 0.5, δ = 1/n²);
2. the effect of batch_constant, truncation_radius and the learning rate at n = 10⁶, ε = 1;
3. Example 4.1 (x = ±v + σz, n = 10⁵, d = 20, ε = 1): DP-PCA against Private Oja as σ shrinks.
"""

from __future__ import annotations

import argparse
import math
import warnings

import numpy as np

from privpca import DPPCA, PrivateOjaPCA
from privpca.datasets import make_signal_noise
from privpca.metrics import sin_theta


def gaussian(n: int, d: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return rng.standard_normal((n, d)) * np.sqrt([1.0] + [0.5] * (d - 1)), np.eye(d)[:, :1]


def dp_error(n: int, eps: float, seeds: int, d: int = 50, **kw: object) -> float:
    errs = []
    for seed in range(seeds):
        X, v = gaussian(n, d, seed)
        try:
            est = DPPCA(epsilon=eps, delta=1.0 / n**2, random_state=seed, **kw).fit(X)
        except ValueError:
            return math.nan
        errs.append(sin_theta(est.components_.T, v))
    return float(np.mean(errs))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="smaller n (for a smoke run)")
    args = parser.parse_args()
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
            est = DPPCA(epsilon=1.0, delta=1.0 / n**2, random_state=seed).fit(X)
            out["dp"].append(sin_theta(est.components_.T, v))
            clip = (1.0 + 4 * sigma * math.sqrt(d)) ** 2
            for amp in ("shuffle", "none"):
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    po = PrivateOjaPCA(epsilon=1.0, delta=1.0 / n**2, clip_norm=clip,
                                       amplification=amp, random_state=seed).fit(X)
                out[amp].append(sin_theta(po.components_.T, v))
        print(f"| {sigma} | {np.mean(out['dp']):.4f} | {np.mean(out['shuffle']):.4f} | "
              f"{np.mean(out['none']):.4f} |", flush=True)


if __name__ == "__main__":
    main()
