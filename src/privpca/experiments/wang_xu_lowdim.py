"""Wang & Xu, low-dimensional experiments: Figure 3 (synthetic) and Figures 1-2 (Covertype).

* ``wangxu-fig3``: error vs n (one curve per k), vs p, vs ε on Wang & Xu's spiked model
  ``Σ = λ/(5p(λ+1))·VVᵀ + 1/(5p(λ+1))·I``.
* ``wangxu-real-lowdim``: Figures 1-2 on Covertype (the only one of the paper's three
  low-dimensional data sets we have): error vs n and vs ε against the non-private top-k
  eigenvectors of the whole normalised data set.

Methods and metric: :mod:`privpca.experiments.wang_xu`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from privpca.accounting.ledger import PrivacyLedger
from privpca.datasets.real import load_dataset
from privpca.datasets.synthetic import make_spiked
from privpca.experiments.context import RunContext
from privpca.experiments.seeding import RunStreams
from privpca.experiments.spec import Experiment, ExperimentResult, Panel
from privpca.experiments.sweep import Cell, Truths, sweep
from privpca.experiments.wang_xu import ERROR_LABEL, PAPER, fitter
from privpca.solvers.eigen import top_eigenvectors
from privpca.solvers.gram import gram_matrix

__all__ = ["EXPERIMENTS", "run_fig3", "run_real_lowdim"]

_LOWDIM_METHODS = ("local-gaussian", "local-gaussian-paper-sigma", "non-private-pca")


def run_fig3(params: dict[str, Any], ctx: RunContext) -> ExperimentResult:
    """Low-dimensional synthetic experiment (Figure 3): panels vs n, vs p and vs ε."""
    methods = list(params["methods"])
    ks, n_grid, p_grid = tuple(params["ks"]), params["n_grid"], params["p_grid"]
    n0, p0, eps0 = params["n"], params["p"], params["epsilon"]
    delta, lam = params["delta"], params["lam"]
    cells: list[Cell] = []
    for ik, k in enumerate(ks):
        # (a) vs n: nested prefixes of one sample of the largest size
        cells += [Cell("vs-n", dict(k=k, p=p0, n=n, epsilon=eps0, delta=delta), (0, ik),
                       {"n_data": max(n_grid)}) for n in n_grid]
        # (c) vs ε: one sample at (n, p)
        cells += [Cell("vs-epsilon", dict(k=k, p=p0, n=n0, epsilon=eps, delta=delta), (2, ik))
                  for eps in params["eps_grid"]]
    # (b) vs p at (n, ε)
    p_pairs = [(k, p) for k in ks for p in p_grid if p > k]
    cells += [Cell("vs-p", dict(k=k, p=p, n=n0, epsilon=eps0, delta=delta), (1, i))
              for i, (k, p) in enumerate(p_pairs)]

    def make_data(cell: Cell, rng: np.random.Generator) -> tuple[Any, Truths]:
        v = cell.values
        n = int(cell.extra.get("n_data", v["n"]))
        X, V = make_spiked(n, int(v["p"]), int(v["k"]), lam=lam, random_state=rng)
        return X, {0: V}

    fit = fitter(ctx, methods, PrivacyLedger())
    rows = sweep(ctx, cells, int(params["repetitions"]), make_data, fit,
                 steps_per_cell=len(methods))
    series = ("method", "k")
    panels = [
        Panel("vs-n", f"(a) vs n (p={p0}, ε={eps0:g})", "n", "sample size n (users)", series,
              ylabel=ERROR_LABEL, logx=True),
        Panel("vs-p", f"(b) vs p (n={n0:,}, ε={eps0:g})", "p", "dimension p", series,
              ylabel=ERROR_LABEL),
        Panel("vs-epsilon", f"(c) vs ε (n={n0:,}, p={p0})", "epsilon", "privacy ε", series,
              ylabel=ERROR_LABEL, logx=True),
    ]
    gap = lam / (5 * p0 * (lam + 1))
    notes = (
        f"Model: Wang & Xu's spiked covariance with λ = {lam:g}: eigengap λ/(5p(λ+1)) = "
        f"{gap:.2e} at p = {p0}. A Haar-random estimate has expected squared error "
        "2k − 2k²/p (e.g. √(2·5 − 2·25/40) = 2.96 for k = 5, p = 40). "
        "`local-gaussian`: analytic Gaussian, Δ = √2 (replace-one); "
        "`local-gaussian-paper-sigma`: σ₁² = 2 ln(1.25/δ)/ε² as printed in the paper; "
        "`non-private-pca`: top-k eigenvectors of XᵀX (sampling error only)."
    )
    return ExperimentResult(rows, panels, notes)


def run_real_lowdim(params: dict[str, Any], ctx: RunContext) -> ExperimentResult:
    """Figures 1-2 on a real data set: error vs n (subsamples) and vs ε (all rows)."""
    methods = list(params["methods"])
    ks = tuple(params["ks"])
    eps0, delta, name = params["epsilon"], params["delta"], params["dataset"]
    data = load_dataset(name)
    X_all = data.data
    N = X_all.shape[0]
    n_grid = [N if n in (None, "all") else int(n) for n in params["n_grid"]]
    n_eps = N if params["n"] in (None, "all") else int(params["n"])
    S = gram_matrix(X_all)
    truths = {k: top_eigenvectors(S, k)[1] for k in ks}
    cells = [Cell("vs-n", dict(dataset=name, k=k, n=n, epsilon=eps0, delta=delta), (0,),
                  {"truths": {0: truths[k]}}) for n in n_grid for k in ks]
    cells += [Cell("vs-epsilon", dict(dataset=name, k=k, n=n_eps, epsilon=eps, delta=delta),
                   (1,), {"truths": {0: truths[k]}}) for eps in params["eps_grid"] for k in ks]

    def make_data(cell: Cell, rng: np.random.Generator) -> tuple[Any, Truths]:
        # the data stream is the subsample: nested prefixes of one random permutation
        return rng.permutation(N), truths

    inner = fitter(ctx, methods, PrivacyLedger())

    def fit(order: Any, truths_: Truths, cell: Cell, streams: RunStreams, index: int,
            base: dict[str, Any]) -> list[dict[str, Any]]:
        n = int(cell.values["n"])
        X = X_all if n == N else X_all[np.sort(order[:n])]
        return inner(X, truths_, cell, streams, index, base)

    rows = sweep(ctx, cells, int(params["repetitions"]), make_data, fit,
                 steps_per_cell=len(methods))
    evals = np.linalg.eigvalsh(S / N)[::-1][: max(ks) + 1]
    panels = [
        Panel("vs-n", f"Fig. 1: {name}, vs n (ε={eps0:g})", "n", "sample size n (users)",
              ("method", "k"), ylabel=ERROR_LABEL, logx=True),
        Panel("vs-epsilon", f"Fig. 2: {name}, vs ε (n={n_eps:,})", "epsilon", "privacy ε",
              ("method", "k"), ylabel=ERROR_LABEL, logx=True),
    ]
    notes = (
        f"Data: {data.DESCR.splitlines()[0]} Rows scaled to unit norm, not centred; truth = "
        f"top-k eigenvectors of XᵀX/N over all N = {N:,} rows; subsamples of size n are "
        "nested prefixes of one random permutation per repetition. Top eigenvalues of XᵀX/N: "
        + ", ".join(f"{v:.4g}" for v in evals)
        + "."
    )
    return ExperimentResult(rows, panels, notes)


EXPERIMENTS = (
    Experiment(
        name="wangxu-fig3",
        paper=PAPER,
        figure="Figure 3 (low-dimensional, synthetic)",
        description=(
            "LocalGaussianPCA (Algorithm 1) on Wang & Xu's spiked Gaussian model: error vs n "
            "for k ∈ {5,10,15,20}, vs p and vs ε (n = 10⁵, p = 40, ε = 0.5, δ = 10⁻⁴, λ = 1)."
        ),
        run_fn=run_fig3,
        quick_params=dict(
            methods=_LOWDIM_METHODS, repetitions=2, ks=(5, 10), n_grid=(10_000, 30_000),
            p_grid=(20, 40), eps_grid=(0.5, 2.0), n=20_000, p=40, epsilon=0.5, delta=1e-4,
            lam=1.0,
        ),
        full_params=dict(
            methods=_LOWDIM_METHODS, repetitions=20, ks=(5, 10, 15, 20),
            n_grid=(10_000, 30_000, 100_000, 300_000), p_grid=(30, 40, 60, 80),
            eps_grid=(0.1, 0.25, 0.5, 1.0, 2.0, 4.0), n=100_000, p=40, epsilon=0.5,
            delta=1e-4, lam=1.0,
        ),
    ),
    Experiment(
        name="wangxu-real-lowdim",
        paper=PAPER,
        figure="Figures 1-2 (low-dimensional, real data: Covertype)",
        description=(
            "LocalGaussianPCA on Covertype (581,012 x 54, rows normalised): error vs n and "
            "vs ε against the non-private top-k subspace of the whole data set. The paper's "
            "Buzz and Year data sets are not available here."
        ),
        run_fn=run_real_lowdim,
        quick_params=dict(
            methods=_LOWDIM_METHODS, dataset="covtype", repetitions=2, ks=(1, 3),
            n_grid=(10_000, 100_000), n=100_000, eps_grid=(0.5, 2.0), epsilon=0.5, delta=1e-4,
        ),
        full_params=dict(
            methods=_LOWDIM_METHODS, dataset="covtype", repetitions=20, ks=(1, 2, 3, 5),
            n_grid=(10_000, 30_000, 100_000, 300_000, "all"), n="all",
            eps_grid=(0.1, 0.25, 0.5, 1.0, 2.0, 4.0), epsilon=0.5, delta=1e-4,
        ),
    ),
)
