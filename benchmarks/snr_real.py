"""Signal against local-DP noise on the real data sets of Wang & Xu's Tables 1-2.

For each data set (rows scaled to unit norm, not centred, as in the experiments) print n, p,
the 10th and 11th eigenvalues of S = XᵀX/n (the eigengap k = 10 needs), the per-user noise σ₁
at ε = 2 and δ = 10⁻⁴ with our calibration (analytic, Δ = √2) and the paper's (classic, Δ = 1),
the std of one entry of the averaged noise σ₁/√n, and the typical spectral norm of the averaged
noise matrix, 2√p·σ₁/√n. Recovery needs the eigengap to exceed that norm by a good margin.

Run: ``python benchmarks/snr_real.py``
"""

from __future__ import annotations

import math
import warnings

import numpy as np

from privpca.datasets import load_dataset
from privpca.mechanisms.gaussian import analytic_gaussian_sigma, classic_gaussian_sigma

EPS, DELTA, K = 2.0, 1e-4, 10

print(f"epsilon={EPS}, delta={DELTA}, k={K}; noise norm = 2*sqrt(p)*sigma1/sqrt(n)")
print(
    f"{'data set':18} {'n':>7} {'p':>5} {'lam_k':>9} {'lam_k+1':>9} {'gap':>9} "
    f"{'sig1 ours':>9} {'sig1 paper':>10} {'entry sd':>9} {'noise norm':>10}"
)
for name in ("isolet5", "colon_continuous", "leukemia_allaml"):
    X = load_dataset(name).data
    n, p = X.shape
    small = X @ X.T if n < p else X.T @ X
    evals = np.sort(np.linalg.eigvalsh(small / n))[::-1]
    ours = analytic_gaussian_sigma(EPS, DELTA, math.sqrt(2.0))
    with warnings.catch_warnings():  # the classic formula is only proven for epsilon < 1
        warnings.simplefilter("ignore")
        paper = classic_gaussian_sigma(EPS, DELTA, 1.0)
    entry = ours / math.sqrt(n)
    print(
        f"{name:18} {n:7d} {p:5d} {evals[K - 1]:9.2e} {evals[K]:9.2e} "
        f"{evals[K - 1] - evals[K]:9.2e} {ours:9.3f} {paper:10.3f} {entry:9.2e} "
        f"{2 * math.sqrt(p) * entry:10.2e}"
    )
