"""The cost of one secure aggregation (privpca.federated.secure), by providers N and length d.

Usage: ``python benchmarks/bench_secure_aggregation.py [--n 3 5 20 50] [--d 10 1000 100000]``.

For each (N, d) this runs :func:`privpca.federated.secure.run_secure_aggregation` once on
random 64-bit inputs (threshold and min_providers at their default ⌊N/2⌋ + 1, no dropout)
and prints: the wall time of the whole run (every party in this one process, one after
another), the mean compute time of one provider and the server's, and the mean payload
bytes one provider sends (its four messages, :func:`message_nbytes`) beside the 8·d bytes of
its input. The sum is checked against the exact one.
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np

from privpca.federated.secure import run_secure_aggregation


def _row(n: int, d: int, rng: np.random.Generator) -> str:
    xs = {f"p{i:02d}": rng.integers(0, 2**64, size=d, dtype=np.uint64) for i in range(n)}
    start = time.perf_counter()
    result = run_secure_aggregation(xs, 64)
    wall = time.perf_counter() - start
    expected = np.zeros(d, dtype=np.uint64)
    for x in xs.values():
        expected += x
    assert np.array_equal(result.total, expected)
    provider = float(np.mean(list(result.provider_seconds.values())))
    sent = float(np.mean(list(result.transcript.bytes_sent().values())))
    return (f"| {n:>3} | {d:>7} | {result.config.threshold:>3} | {wall:6.2f} | "
            f"{provider:10.3f} | {result.server_seconds:8.2f} | {sent / 1e3:16.1f} | "
            f"{8 * d / 1e3:8.1f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, nargs="+", default=[3, 5, 20, 50])
    parser.add_argument("--d", type=int, nargs="+", default=[10, 1000, 100_000])
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    run_secure_aggregation({p: np.zeros(2, np.uint64) for p in "abc"}, 64)  # warm-up
    print("|   N |       d |   t | wall s | provider s | server s | sent kB/provider | "
          "input kB |")
    print("|----:|--------:|----:|-------:|-----------:|---------:|-----------------:|"
          "---------:|")
    for n in args.n:
        for d in args.d:
            print(_row(n, d, rng), flush=True)
    print(f"load average: {os.getloadavg()}")


if __name__ == "__main__":
    main()
