"""DPS-PCA's own experiments (Ge, Wang, Wang & Liu 2018): Figure 3, and DPS-PCA in Table 1 and
Figure 4.

Importing this module

* registers ``"dps-pca"`` in :data:`privpca.experiments.ge_dpspca.COMPARISON_METHODS`, so
  ``ge-table1`` and ``ge-fig4`` run DPS-PCA beside MOD-SuLQ and PPCA (T = 10, ŝ = 50 as in
  §5.2; for Figure 4(b), ŝ = 50 too, capped at d);
* registers ``ge-fig3``: ``‖sin Θ(Q⁽ᵗ⁾, Q*)‖_F`` over the iterations t = 0..T for several ε at
  δ = 0.3 (panel a) and several δ at ε = 2 (panel b), d = 1000, n = 10⁵, k = 5, s = 10,
  ŝ = 50, T = 10 (the paper's §5.2).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from privpca.accounting.ledger import PrivacyLedger
from privpca.decomposition.distributed import DPSPCA
from privpca.experiments.ge_dpspca import COMPARISON_METHODS, SIN_LABEL, make_ge_data
from privpca.experiments.paper_setting import PAPER_NORM
from privpca.experiments.registry import (
    Experiment,
    ExperimentResult,
    FitSpec,
    Panel,
    register,
)
from privpca.experiments.runner import RunContext, quiet_fit

__all__ = ["dpspca_factory"]

PAPER = "Ge et al. (2018), DPS-PCA"


class _PaperDPSPCA(DPSPCA):
    """DPS-PCA with ŝ capped at d (Figure 4(b) goes down to d = 40 < ŝ = 50: no thresholding)."""

    def fit(self, X: Any, y: Any = None, *, groups: Any = None) -> _PaperDPSPCA:
        s_hat = self.n_nonzero
        if s_hat is not None and s_hat >= np.shape(X)[1]:
            self.n_nonzero = None
        try:
            super().fit(X, y, groups=groups)
        finally:
            self.n_nonzero = s_hat
        return self


def dpspca_factory(spec: FitSpec) -> DPSPCA:
    """DPS-PCA as run in the paper: T = 10, ŝ = 50 (no thresholding when d ≤ ŝ), one provider."""
    return _PaperDPSPCA(
        spec.n_components,
        epsilon=spec.epsilon,
        delta=spec.delta,
        n_iter=int(spec.options.get("n_iter", 10)),
        n_nonzero=int(spec.options.get("n_nonzero", 50)),
        random_state=spec.random_state,
        **PAPER_NORM,
        ledger=spec.ledger,
    )


COMPARISON_METHODS.setdefault("dps-pca", dpspca_factory)


def run_fig3(params: dict[str, Any], ctx: RunContext) -> ExperimentResult:
    """Trajectories of ‖sin Θ‖_F over the T rounds, for several ε and several δ."""
    reps, n, d, k, s = (int(params[key]) for key in ("repetitions", "n", "d", "k", "s"))
    T, s_hat = int(params["n_iter"]), int(params["n_nonzero"])
    a, b = params["panel_a"], params["panel_b"]
    settings = [("vs-epsilon", float(eps), float(a["delta"])) for eps in a["eps_grid"]]
    settings += [("vs-delta", float(b["epsilon"]), float(dl)) for dl in b["delta_grid"]]
    ctx.start(reps * len(settings))
    ledger = PrivacyLedger()
    rows: list[dict[str, Any]] = []
    for rep in range(reps):
        seed = ctx.run_seed(0, rep)
        X, Q = make_ge_data(n, d, k, s, np.random.default_rng(seed))
        for i, (panel, eps, delta) in enumerate(settings):
            est = DPSPCA(k, epsilon=eps, delta=delta, n_iter=T, n_nonzero=s_hat,
                         random_state=np.random.default_rng([seed, i]), ledger=ledger,
                         **PAPER_NORM)
            est, seconds, _ = quiet_fit(est, X)
            path = est.sin_theta_path(Q)
            for t, err in enumerate(path):
                rows.append(dict(panel=panel, method="DPS-PCA", epsilon=eps, delta=delta,
                                 iteration=t, n=n, d=d, k=k, s=s, n_nonzero=s_hat,
                                 repetition=rep, seed=seed, error=float(err), seconds=seconds))
            ctx.advance()
        del X
    panels = [
        Panel("vs-epsilon", f"(a) δ={a['delta']:g}, several ε", "iteration", "iteration t",
              series=("epsilon",), ylabel=SIN_LABEL),
        Panel("vs-delta", f"(b) ε={b['epsilon']:g}, several δ", "iteration", "iteration t",
              series=("delta",), ylabel=SIN_LABEL),
    ]
    notes = (
        f"d={d}, n={n:,}, k={k}, s={s}, ŝ={s_hat}, T={T}, one provider; iteration 0 is the "
        "data-independent dense random start Q⁽⁰⁾ (free), iteration t the iterate after t "
        "noisy rounds. Noise per round from T-fold Gaussian composition (dp-accounting) with "
        "replace-one sensitivity √2/n, not the paper's ω(ε, δ) (about 6× larger at ε = 1). "
        "δ = 0.3 and 0.5 are the paper's values, not meaningful privacy levels. Rows scaled by "
        "the largest row norm of the sample (not private), as in ge-fig4. Maximum √k = "
        f"{np.sqrt(k):.3f}."
    )
    return ExperimentResult(rows, panels, notes)


register(
    Experiment(
        name="ge-fig3",
        paper=PAPER,
        figure="Figure 3 (convergence over iterations)",
        description=(
            "DPS-PCA's ‖sin Θ‖_F over T = 10 rounds at d = 1000, n = 10⁵, k = 5, s = 10, ŝ = 50: "
            "(a) δ = 0.3, ε ∈ {0.5, 1, 2, 4}; (b) ε = 2, δ ∈ {0.01, 0.05, 0.1, 0.5}."
        ),
        run_fn=run_fig3,
        quick_params=dict(repetitions=1, n=5_000, d=100, k=3, s=10, n_iter=5, n_nonzero=20,
                          panel_a=dict(delta=0.3, eps_grid=(0.5, 2.0)),
                          panel_b=dict(epsilon=2.0, delta_grid=(0.01, 0.5))),
        full_params=dict(repetitions=5, n=100_000, d=1000, k=5, s=10, n_iter=10, n_nonzero=50,
                         panel_a=dict(delta=0.3, eps_grid=(0.5, 1.0, 2.0, 4.0)),
                         panel_b=dict(epsilon=2.0, delta_grid=(0.01, 0.05, 0.1, 0.5))),
        requires=("privpca:DPSPCA",),
        metric="‖sin Θ‖_F = ‖Q̂ᵀQ⊥‖_F (Ge et al.; at most √k)",
    )
)
