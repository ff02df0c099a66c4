"""Wang & Xu, Figure 4: high-dimensional synthetic data (``wangxu-fig4``).

LocalSparsePCA against LocalGaussianPCA on Wang & Xu's spiked model with an s-row-sparse
subspace: error vs n (one curve per s), vs p, vs ε. Methods and metric:
:mod:`privpca.experiments.wang_xu`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from privpca.accounting.ledger import PrivacyLedger
from privpca.datasets.synthetic import make_sparse_spiked
from privpca.experiments.context import RunContext
from privpca.experiments.spec import Experiment, ExperimentResult, Panel
from privpca.experiments.sweep import Cell, Truths, sweep
from privpca.experiments.wang_xu import ERROR_LABEL, PAPER, fitter

__all__ = ["EXPERIMENTS", "run_fig4"]


def run_fig4(params: dict[str, Any], ctx: RunContext) -> ExperimentResult:
    """High-dimensional synthetic experiment (Figure 4): vs n per s, vs p, vs ε."""
    methods = list(params["methods"])
    k, n_grid = int(params["k"]), params["n_grid"]
    n0, p0, s0, eps0 = params["n"], params["p"], params["s"], params["epsilon"]
    delta, lam = params["delta"], params["lam"]
    cells: list[Cell] = []
    for i_s, s in enumerate(params["s_grid"]):
        cells += [Cell("vs-n", dict(k=k, s=s, p=p0, n=n, epsilon=eps0, delta=delta), (0, i_s),
                       {"n_data": max(n_grid)}) for n in n_grid]
    cells += [Cell("vs-p", dict(k=k, s=s0, p=p, n=n0, epsilon=eps0, delta=delta), (1, i))
              for i, p in enumerate(params["p_grid"])]
    cells += [Cell("vs-epsilon", dict(k=k, s=s0, p=p0, n=n0, epsilon=eps, delta=delta), (2,))
              for eps in params["eps_grid"]]

    def make_data(cell: Cell, rng: np.random.Generator) -> tuple[Any, Truths]:
        v = cell.values
        n = int(cell.extra.get("n_data", v["n"]))
        X, V = make_sparse_spiked(n, int(v["p"]), k, int(v["s"]), lam=lam, random_state=rng)
        return X, {0: V}

    options = {"admm_max_iter": params["admm_max_iter"], "lam_scale": params["lam_scale"]}
    fit = fitter(ctx, methods, PrivacyLedger(), options=options)
    rows = sweep(ctx, cells, int(params["repetitions"]), make_data, fit,
                 steps_per_cell=len(methods))
    panels = [
        Panel("vs-n", f"(a) vs n (k={k}, p={p0}, ε={eps0:g})", "n", "sample size n (users)",
              ("method", "s"), ylabel=ERROR_LABEL, logx=True),
        Panel("vs-p", f"(b) vs p (n={n0:,}, s={s0}, ε={eps0:g})", "p", "dimension p",
              ("method",), ylabel=ERROR_LABEL, logx=True),
        Panel("vs-epsilon", f"(c) vs ε (n={n0:,}, p={p0}, s={s0})", "epsilon", "privacy ε",
              ("method",), ylabel=ERROR_LABEL, logx=True),
    ]
    not_conv = sum(1 for r in rows if not r["converged"])
    notes = (
        f"Model: Wang & Xu's spiked covariance (λ = {lam:g}) with an s-row-sparse V; "
        f"eigengap λ/(5p(λ+1)) = {lam / (5 * p0 * (lam + 1)):.2e} at p = {p0}. Maximum error "
        f"√(2k) = {np.sqrt(2 * k):.3f}. LocalSparsePCA: λ = 'auto' with lam_scale = "
        f"{params['lam_scale']:g}, at most {params['admm_max_iter']} ADMM iterations; "
        f"{not_conv} of {len(rows)} fits stopped at the iteration limit (column `converged`)."
    )
    return ExperimentResult(rows, panels, notes)


EXPERIMENTS = (
    Experiment(
        name="wangxu-fig4",
        paper=PAPER,
        figure="Figure 4 (high-dimensional, synthetic)",
        description=(
            "LocalSparsePCA (Algorithm 2) against LocalGaussianPCA on row-sparse spiked data: "
            "k = 10, error vs n for s ∈ {15,20,40,80}, vs p, vs ε (n = 2000, p = 400, ε = 1)."
        ),
        run_fn=run_fig4,
        quick_params=dict(
            methods=("local-sparse", "local-gaussian"), repetitions=1, k=4, s_grid=(8, 16),
            n_grid=(500, 2000), p_grid=(60,), eps_grid=(1.0, 4.0), n=2000, p=60, s=8,
            epsilon=1.0, delta=1e-4, lam=1.0, admm_max_iter=30, lam_scale=0.25,
        ),
        full_params=dict(
            methods=("local-sparse", "local-gaussian", "non-private-pca"), repetitions=5, k=10,
            s_grid=(15, 20, 40, 80), n_grid=(1000, 2000, 4000), p_grid=(100, 200, 400, 800),
            eps_grid=(0.5, 1.0, 2.0, 4.0), n=2000, p=400, s=20, epsilon=1.0, delta=1e-4,
            lam=1.0, admm_max_iter=100, lam_scale=0.25,
        ),
    ),
)
