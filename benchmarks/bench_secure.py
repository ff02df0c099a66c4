"""The default (secure) noise against the float path, side by side.

Usage: ``python benchmarks/bench_secure.py [--n 100000] [--p 50] [--repeats 5]
[--estimators AnalyzeGaussPCA DPPCA ...]``.

An unseeded fit draws its privacy noise on the secure path by default (OS-keyed AES-CTR,
values snapped to a grid, exact discrete noise); ``privpca.set_config(secure_mode=False)`` is
the float path (PCG64, continuous samplers). For each estimator this prints the median wall
time of a fit on each path, the two paths alternating on the same table after one warm-up
fit each, and their ratio; then the time of 10⁶ noisy coordinates on each path
(``privpca.mechanisms.noise.gaussian_release``) and the machine's load average.
"""

from __future__ import annotations

import argparse
import os
import time
import warnings

import numpy as np

import privpca
from privpca.mechanisms.noise import gaussian_release
from privpca.mechanisms.secure_noise import SecureGenerator

ESTIMATORS = ("AnalyzeGaussPCA", "ModSuLQPCA", "NoisyPowerPCA", "BinghamPCA",
              "LocalGaussianPCA", "LocalSparsePCA", "PrivateOjaPCA", "DPPCA", "DPSPCA")


def _fit_once(name: str, X: np.ndarray, secure: bool) -> float:
    est = getattr(privpca, name)(2, ledger=privpca.PrivacyLedger())
    with privpca.config_context(secure_mode="auto" if secure else False), \
            warnings.catch_warnings():
        warnings.simplefilter("ignore")
        start = time.perf_counter()
        est.fit(X)
        elapsed = time.perf_counter() - start
    assert est.privacy_.noise_mode == ("secure" if secure else "float")
    return elapsed


def _fit_times(name: str, X: np.ndarray, repeats: int) -> tuple[float, float]:
    """Median float and secure times, the paths alternating (after one warm-up each)."""
    _fit_once(name, X, False)
    _fit_once(name, X, True)
    plain, secure = [], []
    for _ in range(repeats):
        plain.append(_fit_once(name, X, False))
        secure.append(_fit_once(name, X, True))
    return float(np.median(plain)), float(np.median(secure))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--p", type=int, default=50)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--estimators", nargs="+", default=list(ESTIMATORS))
    args = parser.parse_args()
    X = np.random.default_rng(0).standard_normal((args.n, args.p)) * np.linspace(2, 0.5, args.p)
    print(f"n={args.n} p={args.p}, median of {args.repeats} fits per path, alternating "
          f"(defaults: private centring, data_norm='auto'); load average before: "
          f"{os.getloadavg()[0]:.2f}")
    print("| estimator | float path (s) | default, secure (s) | secure/float |")
    print("| --- | ---: | ---: | ---: |")
    for name in args.estimators:
        d, s = _fit_times(name, X, args.repeats)
        print(f"| {name} | {d:.3f} | {s:.3f} | {s / d:.2f} |", flush=True)
    print()
    value = np.random.default_rng(0).standard_normal(1_000_000)
    for label, gen in (("float path (PCG64)", np.random.default_rng()),
                       ("secure path", SecureGenerator())):
        gaussian_release(value, 0.7, gen, sensitivity=1.0)  # compile and touch the memory
        times = []
        for _ in range(3):
            start = time.perf_counter()
            gaussian_release(value, 0.7, gen, sensitivity=1.0)
            times.append(time.perf_counter() - start)
        print(f"10^6 noisy coordinates, {label}: {np.median(times):.3f} s (median of 3)")
    print(f"load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
