"""Secure mode's cost: default vs secure fit times, side by side.

Usage: ``python benchmarks/bench_secure.py [--n 20000] [--p 20] [--repeats 3]``.
Prints the median wall time of a fit in each mode and the ratio, per estimator, and the
time of 10⁶ standard normal draws from each generator.
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np

import privpca
from privpca.mechanisms.secure_noise import SecureGenerator

ESTIMATORS = ("AnalyzeGaussPCA", "NoisyPowerPCA", "BinghamPCA", "LocalGaussianPCA",
              "PrivateOjaPCA")


def _fit_time(name: str, X: np.ndarray, secure: bool, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        est = getattr(privpca, name)(2, ledger=privpca.PrivacyLedger())
        with privpca.config_context(secure_mode=secure), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            start = time.perf_counter()
            est.fit(X)
            times.append(time.perf_counter() - start)
    return float(np.median(times))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--n", type=int, default=20_000)
    parser.add_argument("--p", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    X = np.random.default_rng().standard_normal((args.n, args.p)) * np.linspace(2, 0.5, args.p)
    print(f"n={args.n} p={args.p}, median of {args.repeats} fits (defaults: private "
          "centring, data_norm='auto')")
    print("| estimator | default (s) | secure (s) | secure/default |")
    print("| --- | ---: | ---: | ---: |")
    for name in ESTIMATORS:
        d = _fit_time(name, X, False, args.repeats)
        s = _fit_time(name, X, True, args.repeats)
        print(f"| {name} | {d:.3f} | {s:.3f} | {s / d:.2f} |")
    print()
    for label, gen in (("PCG64", np.random.default_rng()), ("SecureGenerator", SecureGenerator())):
        start = time.perf_counter()
        gen.standard_normal(1_000_000)
        print(f"10^6 standard normal draws, {label}: {time.perf_counter() - start:.3f} s")


if __name__ == "__main__":
    main()
