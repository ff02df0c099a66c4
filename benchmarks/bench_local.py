"""Benchmarks for the local model, measured side by side in one run.

1. ``LocalGaussianPCA.fit`` at n = 10⁶, p = 100 against the bare cost of non-private PCA on
   the same data: a Gram matrix plus one p×p ``eigh``. Two baselines are printed:
   (a) the literal ``X.T @ X`` + ``numpy.linalg.eigh``, (b) BLAS ``syrk`` + ``eigh`` (what
   the estimator itself uses for the Gram matrix). Run it on an otherwise idle machine:
   OpenBLAS threads that compete for the 2 cores with another process slow down erratically.
   Target: fit / baseline ≤ 1.5.
2. ``LocalSparsePCA`` seconds per ADMM iteration at p = 2 000 and p = 7 128 (n = 2 000 users,
   row-sparse spiked data, k = 10, ε = 1), with peak memory. Target: < 5 s per iteration at
   p = 7 128 on 2 cores.

Peak memory: ``tracemalloc`` peak of the traced call (NumPy reports its buffers to it) and the
process's maximum resident set size (``ru_maxrss``), which never decreases during a run.

Run: ``python benchmarks/bench_local.py`` (add ``--skip-sparse`` or ``--sparse-p 2000`` to
shorten).
"""

from __future__ import annotations

import argparse
import resource
import time
import tracemalloc
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np

from privpca import LocalGaussianPCA, LocalSparsePCA, PrivacyLedger
from privpca.datasets import make_sparse_spiked, make_spiked
from privpca.solvers.gram import gram_matrix


def _timed(func: Callable[[], Any], repeat: int = 3) -> tuple[float, float]:
    """Best wall time over ``repeat`` calls, and the tracemalloc peak (MiB) of one call."""
    best = np.inf
    for _ in range(repeat):
        start = time.perf_counter()
        func()
        best = min(best, time.perf_counter() - start)
    tracemalloc.start()
    func()
    peak = tracemalloc.get_traced_memory()[1] / 2**20
    tracemalloc.stop()
    return best, peak


def _maxrss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def bench_gaussian(n: int, p: int, repeat: int) -> None:
    X, _ = make_spiked(n, p, 5, lam=4.0, random_state=0)
    ledger = PrivacyLedger()

    def fit() -> None:  # the papers' setting: every user sends a covariance report
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            LocalGaussianPCA(5, epsilon=1.0, centering=None, data_norm=1.0, random_state=0,
                             ledger=ledger).fit(X)

    def fit_defaults() -> None:  # private centring and bound: users split into groups
        LocalGaussianPCA(5, epsilon=1.0, random_state=0, ledger=ledger).fit(X)

    def numpy_baseline() -> None:
        np.linalg.eigh(X.T @ X)

    def syrk_baseline() -> None:
        np.linalg.eigh(gram_matrix(X))

    t_fit, m_fit = _timed(fit, repeat)
    t_def, m_def = _timed(fit_defaults, repeat)
    t_np, m_np = _timed(numpy_baseline, repeat)
    t_syrk, m_syrk = _timed(syrk_baseline, repeat)
    print(f"LocalGaussianPCA.fit, n={n:,}, p={p} (data {X.nbytes / 2**20:.0f} MiB)")
    print(f"  fit (papers' setting)        {t_fit:8.3f} s   peak {m_fit:7.1f} MiB")
    print(f"  fit (defaults: centred)      {t_def:8.3f} s   peak {m_def:7.1f} MiB")
    print(f"  X.T @ X + eigh (numpy)       {t_np:8.3f} s   peak {m_np:7.1f} MiB")
    print(f"  syrk Gram + eigh             {t_syrk:8.3f} s   peak {m_syrk:7.1f} MiB")
    print(f"  ratio fit / (X.T @ X + eigh) {t_fit / t_np:8.3f}   (target <= 1.5)")
    print(f"  ratio fit / (syrk + eigh)    {t_fit / t_syrk:8.3f}   (target <= 1.5)")
    print(f"  ratio defaults / (X.T @ X + eigh) {t_def / t_np:8.3f}   (target <= 1.5)")
    print(f"  ratio defaults / (syrk + eigh)    {t_def / t_syrk:8.3f}   (target <= 1.5)")


def bench_sparse(p: int, n: int, k: int, s: int, max_iter: int) -> None:
    X, _ = make_sparse_spiked(n, p, k, s, lam=50.0, random_state=1)
    est = LocalSparsePCA(k, epsilon=1.0, max_iter=max_iter, random_state=0, ledger=PrivacyLedger())
    tracemalloc.start()
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est.fit(X)
    total = time.perf_counter() - start
    peak = tracemalloc.get_traced_memory()[1] / 2**20
    tracemalloc.stop()
    matrix = p * p * 8 / 2**20
    print(
        f"LocalSparsePCA.fit, p={p:,}, n={n:,}, k={k}, s={s}: {est.n_iter_} ADMM iterations "
        f"(converged={est.converged_}), {total:.1f} s in all"
    )
    print(
        f"  seconds per ADMM iteration   {total / max(est.n_iter_, 1):8.3f}   "
        "(whole fit / iterations; target < 5 s at p = 7128)"
    )
    print(
        f"  peak traced memory           {peak:8.0f} MiB  (= {peak / matrix:.1f} p×p matrices)"
        f";  process max RSS {_maxrss_mib():.0f} MiB"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=1_000_000)
    parser.add_argument("--p", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--sparse-p", type=int, nargs="*", default=[2000, 7128])
    parser.add_argument("--sparse-max-iter", type=int, default=100)
    parser.add_argument("--skip-sparse", action="store_true")
    args = parser.parse_args()
    bench_gaussian(args.n, args.p, args.repeat)
    if not args.skip_sparse:
        for p in args.sparse_p:
            bench_sparse(p, n=2000, k=10, s=20, max_iter=args.sparse_max_iter)


if __name__ == "__main__":
    main()
