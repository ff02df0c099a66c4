"""ModSuLQPCA fit time at d ∈ {200, 400, 800} beside Ge et al.'s Table 1, with the other baselines.

Setting (Ge, Wang, Wang & Liu, AISTATS 2018, §5.1 and §5.2.3, Table 1): n = 10⁵ samples from
N(0, Σ), Σ = U diag(λ) Uᵀ with λ₁..λ₅ = 100 (k = 5), the other eigenvalues Uniform[0, 10]; the
leading eigenvectors are an s × k Gaussian matrix (s = 10) orthogonalised and zero-padded, the
rest an orthogonalised projection of a Gaussian matrix onto their complement. The paper reports
MOD-SuLQ at 8 / 21 / 97 ms (R, rARPACK for the top-k eigenvectors, Intel Xeon 3.4 GHz); it does
not say whether the covariance matrix was included, nor which (ε, δ).

Printed per d (best of ``--repeat`` wall times, seconds):

* ``gram``: the Gram matrix ``XᵀX`` alone (BLAS syrk, O(nd²)) — shared by ModSuLQ and Analyze
  Gauss;
* ``mod-sulq fit``: ``ModSuLQPCA.fit`` end to end (validation, clipping check, Gram, noise,
  top-k eigenpairs);
* ``mod-sulq post-gram``: noise + top-k eigenpairs on a precomputed ``XᵀX/n``, the part most
  comparable to a timing that starts from the covariance matrix;
* ``analyze-gauss fit`` and ``noisy-power fit`` (T = 10, as the paper's DPS-PCA) on the same data;
  the noisy power method's one-off noise calibration (cached per (ε, δ, T)) is printed apart.

Also printed: ``‖sin Θ‖_F`` of each estimate against the true top-5 subspace (max √5 ≈ 2.24).

Privacy parameters: ε = 1, δ = 10⁻⁵ (timing does not depend on them). ``data_norm`` is set to
the largest row norm of the generated data: fine for a timing, but a bound read off the data
is not private — real use needs a public bound.

Run: ``python benchmarks/bench_mod_sulq.py`` (``--dims 200 400`` or ``--n 20000`` to shorten).
The machine's other load makes timings erratic: run it on an otherwise idle machine.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from privpca.accounting import PrivacyLedger
from privpca.decomposition.analyze_gauss import AnalyzeGaussPCA
from privpca.decomposition.mod_sulq import ModSuLQPCA, mod_sulq_beta
from privpca.decomposition.noisy_power import NoisyPowerPCA, _composition_multiplier
from privpca.mechanisms.gaussian import symmetric_gaussian_noise
from privpca.metrics import sin_theta
from privpca.solvers.eigen import top_eigenvectors
from privpca.solvers.gram import gram_matrix

PAPER_MS = {200: 8.0, 400: 21.0, 800: 97.0}
K, S_NONZERO, EPS, DELTA, T = 5, 10, 1.0, 1e-5, 10


def ge_et_al_data(n: int, d: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Samples of Ge et al.'s §5.1 model, and the true leading basis (d × k)."""
    rng = np.random.default_rng(seed)
    lead = np.zeros((d, K))
    lead[:S_NONZERO] = np.linalg.qr(rng.standard_normal((S_NONZERO, K)))[0]
    R = rng.standard_normal((d, d - K))
    R -= lead @ (lead.T @ R)
    rest = np.linalg.qr(R)[0]
    U = np.hstack([lead, rest])
    lam = np.concatenate([np.full(K, 100.0), rng.uniform(0.0, 10.0, d - K)])
    X = rng.standard_normal((n, d)) @ (np.sqrt(lam)[:, None] * U.T)
    return X, lead


def best_time(func: Callable[[], Any], repeat: int) -> float:
    best = np.inf
    for _ in range(repeat):
        start = time.perf_counter()
        func()
        best = min(best, time.perf_counter() - start)
    return best


def bench_one(d: int, n: int, repeat: int) -> None:
    """Time every estimator on one data set of dimension d and print a row."""
    X, V = ge_et_al_data(n, d)
    D = float(np.sqrt(np.einsum("ij,ij->i", X, X)).max())
    ledger = PrivacyLedger()
    common = {"n_components": K, "epsilon": EPS, "delta": DELTA, "data_norm": D,
              "centering": None, "random_state": 0, "ledger": ledger}

    t_gram = best_time(lambda: gram_matrix(X), repeat)

    mod = ModSuLQPCA(**common)
    t_mod = best_time(lambda: mod.fit(X), repeat)

    cov = gram_matrix(X) / n
    scale = D**2 * mod_sulq_beta(n, d, EPS, DELTA)
    rng = np.random.default_rng(0)
    t_post = best_time(
        lambda: top_eigenvectors(cov + symmetric_gaussian_noise(d, scale, rng), K), repeat
    )

    ag = AnalyzeGaussPCA(**common)
    t_ag = best_time(lambda: ag.fit(X), repeat)

    start = time.perf_counter()
    _composition_multiplier(EPS, DELTA, T)
    t_calib = time.perf_counter() - start
    npm = NoisyPowerPCA(n_iter=T, **common)
    t_np = best_time(lambda: npm.fit(X), repeat)

    errs = [sin_theta(est.components_.T, V) for est in (mod, ag, npm)]
    paper = PAPER_MS[d] / 1e3 if d in PAPER_MS else float("nan")
    print(f"{d:>5} {paper:>14.3f} {t_gram:>8.3f} {t_mod:>12.3f} {t_post:>10.4f} {t_ag:>13.3f} "
          f"{t_np:>11.3f} {t_calib:>9.2f}   {errs[0]:>14.3f} {errs[1]:>6.3f} {errs[2]:>6.3f}"
          f"   (noisy power solver: {npm.solver_})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dims", type=int, nargs="+", default=[200, 400, 800])
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()

    print(f"n = {args.n}, k = {K}, s = {S_NONZERO}, epsilon = {EPS}, delta = {DELTA:g}, "
          f"noisy power T = {T}; best of {args.repeat}; seconds unless stated")
    header = (f"{'d':>5} {'paper MOD-SuLQ':>14} {'gram':>8} {'mod-sulq fit':>12} "
              f"{'post-gram':>10} {'analyze-gauss':>13} {'noisy-power':>11} {'(calib.)':>9}"
              f"   sinΘ: {'modsulq':>7} {'AG':>6} {'NP':>6}")
    print(header)
    for d in args.dims:
        bench_one(d, args.n, args.repeat)

if __name__ == "__main__":
    main()
