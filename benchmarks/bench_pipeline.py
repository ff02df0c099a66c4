"""The release pipeline's cost, measured side by side in one run.

For Covertype's 10 quantitative columns (n = 581 012) and a synthetic table (n = 10⁶,
p = 100, shifted and in mixed units), prints the best wall time of:

* ``AnalyzeGaussPCA`` on defaults (private two-round mean, private bounds, Gram, noise, eigh);
* ``AnalyzeGaussPCA`` in the papers' setting (``centering=None``, public ``data_norm``);
* the bare non-private work: ``syrk`` Gram of the centred data + ``eigh`` (the limit);
* one pass over X (``X @ w``), the unit of the pipeline's extra work;
* scikit-learn's ``PCA(2).fit`` (full SVD solver chosen by scikit-learn);

and the ratios defaults / papers' setting and defaults / (Gram + eigh). The pipeline's extra
work is three compiled O(np) passes — one per round of the private mean (the norm histogram of
its bound and its clipped sums at every edge of the grid, together) and one for the histogram
of the centred norms (the candidate bounds) — and the pilot Grams of the bound selection: one
pass that sorts each slice's rows into the intervals between the candidates and forms ``Σyyᵀ``
below and ``Σyyᵀ/‖y‖²`` above (about 1.5 Grams' work at six candidates, of which the
statistic keeps the one at the chosen bound: no Gram pass of its own).

Run: ``python benchmarks/bench_pipeline.py`` (``--repeat 5`` for steadier numbers; run on an
otherwise idle machine).
"""

from __future__ import annotations

import argparse
import time
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
from sklearn.decomposition import PCA

from privpca import AnalyzeGaussPCA, PrivacyLedger
from privpca.datasets import load_covtype
from privpca.solvers.gram import gram_matrix


def best(func: Callable[[], Any], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        func()
        times.append(time.perf_counter() - start)
    return min(times)


def bench(name: str, X: np.ndarray, repeat: int) -> None:
    ledger = PrivacyLedger()
    D = float(np.quantile(np.linalg.norm(X, axis=1), 0.99))
    w = np.ones(X.shape[1])

    def defaults() -> None:
        AnalyzeGaussPCA(2, random_state=0, ledger=ledger).fit(X)

    def paper() -> None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            AnalyzeGaussPCA(2, centering=None, data_norm=D, random_state=0,
                            ledger=ledger).fit(X)

    def gram_eigh() -> None:
        np.linalg.eigh(gram_matrix(X - X.mean(axis=0)))

    t_def = best(defaults, repeat)
    t_pap = best(paper, repeat)
    t_ge = best(gram_eigh, repeat)
    t_pass = best(lambda: X @ w, repeat)
    t_sk = best(lambda: PCA(2).fit(X), max(1, repeat // 2))
    n, p = X.shape
    print(f"{name}: n={n:,}, p={p} ({X.nbytes / 2**20:.0f} MiB)")
    print(f"  AnalyzeGaussPCA defaults         {t_def:8.3f} s")
    print(f"  AnalyzeGaussPCA papers' setting  {t_pap:8.3f} s")
    print(f"  centred syrk Gram + eigh         {t_ge:8.3f} s")
    print(f"  one pass X @ w                   {t_pass:8.3f} s")
    print(f"  scikit-learn PCA(2).fit          {t_sk:8.3f} s")
    print(f"  ratio defaults / papers' setting {t_def / t_pap:8.2f}")
    print(f"  ratio defaults / (Gram + eigh)   {t_def / t_ge:8.2f}")
    print(f"  ratio defaults / scikit-learn    {t_def / t_sk:8.2f}")
    print(f"  pipeline overhead in passes of X {(t_def - t_pap) / t_pass:8.1f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--skip-synthetic", action="store_true")
    args = parser.parse_args()
    X = load_covtype(normalize_rows=False).data[:, :10].copy()
    bench("Covertype (10 quantitative columns)", X, args.repeat)
    if not args.skip_synthetic:
        rng = np.random.default_rng(0)
        X = rng.standard_normal((1_000_000, 100))
        X *= np.geomspace(0.01, 100.0, 100)
        X += np.linspace(-1e3, 1e4, 100)
        bench("Synthetic (shifted, mixed units)", X, args.repeat)


if __name__ == "__main__":
    main()
