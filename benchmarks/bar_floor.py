"""Why ``expected_error_`` is not within 2× of the distance: the residual bound's margins.

For AnalyzeGaussPCA's defaults on suite tables (ε = 1, the suite's seeds), reads what the
``variance`` part released (post-processing only) and prints the distance to scikit-learn's
PCA, the bar, the released residual norm ρ, the noise margin τz (z one-sided at α/4), the
separation ``λ_min(VᵀGV) − zτ√(2 − 1/k) − λ_max(WGW) − τz`` (the bar is the cap √(2k) where
it is ≤ 0) and the noise-only floor ``√2·τz/separation`` of the residual bound
(docs/REAL_DATA.md).

    python benchmarks/bar_floor.py [table ...]
"""

from __future__ import annotations

import argparse
import math
import warnings

import numpy as np
import scipy.stats
from sklearn.decomposition import PCA

import privpca.pipeline.release as release
from privpca import AnalyzeGaussPCA
from privpca.experiments.real_data import load_table
from privpca.experiments.real_data_suite import _fit_row, _table_seed_key
from privpca.pipeline.basis_error import component_error_bound
from privpca.pipeline.spectrum import ERROR_ALPHA

TABLES = ("covtype", "china_patches", "fair", "norm_octaves", "survey_binary", "digits",
          "anes96")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("tables", nargs="*", default=list(TABLES))
    args = ap.parse_args()
    seen: dict[str, float] = {}

    def spy(matrix, total, sd, p, extra=0.0, alpha=ERROR_ALPHA, residual=None):  # type: ignore[no-untyped-def]
        k = matrix.shape[0]  # the margins of component_error_bound, with the residual pair
        z = float(scipy.stats.norm.isf(alpha / 4))
        lowest = float(np.linalg.eigvalsh(matrix)[0]) - z * sd * math.sqrt(2 - 1 / k) - extra
        seen.update(rho=math.nan if residual is None else residual[0], margin=sd * z,
                    separation=math.nan if residual is None
                    else lowest - residual[1] - sd * z - extra)
        return component_error_bound(matrix, total, sd, p, extra, alpha, residual=residual)

    release.component_error_bound = spy  # type: ignore[assignment]
    print(f"{'table':14s} seed distance   bar      rho        tau*z      separation  floor")
    for name in args.tables:
        X, _ = load_table(name)
        ref = PCA(2).fit(X)
        for seed in range(3):
            seen.clear()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                row, est = _fit_row(AnalyzeGaussPCA, X, ref,
                                    np.random.SeedSequence([seed, _table_seed_key(name)]), 2,
                                    1.0)
            if est is None or not seen:
                print(f"{name:14s} {seed:4d} refused or no variance part")
                continue
            sep = seen["separation"]
            floor = math.sqrt(2.0) * seen["margin"] / sep if sep > 0 else math.inf
            print(f"{name:14s} {seed:4d} {row['error']:.4f}   {row['expected_error']:.4f}   "
                  f"{seen['rho']:<10.3g} {seen['margin']:<10.3g} {sep:<11.3g} {floor:.4f}",
                  flush=True)


if __name__ == "__main__":
    main()
