"""Secure mode's cost: default vs secure fit times, side by side.

Usage: ``python benchmarks/bench_secure.py [--n 20000] [--p 20] [--repeats 3]
[--estimators AnalyzeGaussPCA DPPCA ...]``.
Prints the median wall time of a fit in each mode and the ratio, per estimator (the two modes
in turns, on the same table), and the time of 10⁶ noisy releases from each generator
(``privpca.mechanisms.noise.gaussian_release``: PCG64 ``v + σZ`` against the secure snap and
exact discrete Gaussian).
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np

import privpca
from privpca.mechanisms.noise import gaussian_release
from privpca.mechanisms.secure_noise import SecureGenerator

ESTIMATORS = ("AnalyzeGaussPCA", "NoisyPowerPCA", "BinghamPCA", "LocalGaussianPCA",
              "PrivateOjaPCA", "DPPCA")


def _fit_once(name: str, X: np.ndarray, secure: bool) -> float:
    est = getattr(privpca, name)(2, ledger=privpca.PrivacyLedger())
    with privpca.config_context(secure_mode=secure), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        start = time.perf_counter()
        est.fit(X)
        return time.perf_counter() - start


def _fit_times(name: str, X: np.ndarray, repeats: int) -> tuple[float, float]:
    """Median default and secure times, the modes alternating (after one warm-up each)."""
    _fit_once(name, X, False)
    _fit_once(name, X, True)
    default, secure = [], []
    for _ in range(repeats):
        default.append(_fit_once(name, X, False))
        secure.append(_fit_once(name, X, True))
    return float(np.median(default)), float(np.median(secure))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--n", type=int, default=20_000)
    parser.add_argument("--p", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--estimators", nargs="+", default=list(ESTIMATORS))
    args = parser.parse_args()
    X = np.random.default_rng().standard_normal((args.n, args.p)) * np.linspace(2, 0.5, args.p)
    print(f"n={args.n} p={args.p}, median of {args.repeats} fits (defaults: private "
          "centring, data_norm='auto')")
    print("| estimator | default (s) | secure (s) | secure/default |")
    print("| --- | ---: | ---: | ---: |")
    for name in args.estimators:
        d, s = _fit_times(name, X, args.repeats)
        print(f"| {name} | {d:.3f} | {s:.3f} | {s / d:.2f} |", flush=True)
    print()
    value = np.random.default_rng(0).standard_normal(1_000_000)
    for label, gen in (("PCG64", np.random.default_rng()), ("SecureGenerator", SecureGenerator())):
        start = time.perf_counter()
        gaussian_release(value, 0.7, gen, sensitivity=1.0)
        print(f"10^6 noisy coordinates, {label}: {time.perf_counter() - start:.3f} s")


if __name__ == "__main__":
    main()
