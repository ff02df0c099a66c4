"""Shared pieces of the experiments of Wang & Xu, "Principal Component Analysis in the Local
Differential Privacy Model" (§6): Figures 1-4 and Tables 1-2.

The experiments live in :mod:`~privpca.experiments.wang_xu_lowdim` (Figures 1-3),
:mod:`~privpca.experiments.wang_xu_fig4` (Figure 4) and
:mod:`~privpca.experiments.wang_xu_tables` (Tables 1-2):

* ``wangxu-fig3``: low-dimensional synthetic data (Figure 3): error vs n (one curve per k),
  vs p, vs ε; Wang & Xu's spiked model ``Σ = λ/(5p(λ+1))·VVᵀ + 1/(5p(λ+1))·I``.
* ``wangxu-real-lowdim``: Figures 1-2 on Covertype (the only one of the paper's three
  low-dimensional data sets we have): error vs n and vs ε against the non-private top-k
  eigenvectors of the whole normalised data set.
* ``wangxu-fig4``: high-dimensional synthetic data (Figure 4): LocalSparsePCA against
  LocalGaussianPCA, error vs n (one curve per s), vs p, vs ε.
* ``wangxu-tables`` (isolet5, Colon) and ``wangxu-tables-leukemia``: Tables 1-2 (rows
  scaled to unit norm):
  LocalSparsePCA against the best of 50 random starts of the non-private truncated power
  method (:class:`~privpca.SparsePCA`), k = 10, s ∈ {10, 20, 40} at ε = 2 and
  ε ∈ {1, 0.5, 0.1} at s = 20.

Methods are looked up by name in :data:`METHODS`; every experiment takes a ``methods``
parameter listing the names to run. ``"local-gaussian"`` is our calibration (analytic
Gaussian, replace-one sensitivity √2·D²); ``"local-gaussian-paper-sigma"`` uses the paper's
``σ₁² = 2 ln(1.25/δ)/ε²`` (classic formula, sensitivity D²), which is not (ε, δ)-LDP under
replacement (``privacy_.epsilon`` states what it certifies). The error is always Wang & Xu's
``‖V̂V̂ᵀ − VVᵀ‖_F`` (at most √(2k)).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from privpca.decomposition import LocalGaussianPCA, LocalSparsePCA
from privpca.experiments.context import RunContext
from privpca.experiments.paper_setting import PAPER_NORM
from privpca.experiments.seeding import RunStreams
from privpca.experiments.spec import MethodFactory
from privpca.experiments.sweep import Cell, FitFunction, Truths, check_methods, fit_methods
from privpca.metrics import subspace_distance
from privpca.solvers.eigen import top_eigenvectors
from privpca.solvers.gram import gram_matrix

__all__ = ["ERROR_LABEL", "METHODS", "PAPER", "NonPrivatePCA", "fitter", "projection_score"]

PAPER = "Wang & Xu (2019), PCA in the local DP model"
ERROR_LABEL = "‖V̂V̂ᵀ − VVᵀ‖_F"


class NonPrivatePCA:
    """Top-k eigenvectors of ``XᵀX`` (uncentred, like the local estimators): the reference."""

    def __init__(self, n_components: int) -> None:
        self.n_components = n_components

    def fit(self, X: NDArray[np.float64]) -> NonPrivatePCA:
        self.components_ = top_eigenvectors(gram_matrix(X), self.n_components)[1].T
        return self


METHODS: dict[str, MethodFactory] = {
    "local-gaussian": lambda f: LocalGaussianPCA(
        f.n_components, **f.private_kwargs(), **PAPER_NORM
    ),
    "local-gaussian-paper-sigma": lambda f: LocalGaussianPCA(
        f.n_components, calibration="classic", sensitivity="paper", **f.private_kwargs(),
        **PAPER_NORM,
    ),
    "local-sparse": lambda f: LocalSparsePCA(
        f.n_components,
        max_iter=int(f.options.get("admm_max_iter", 100)),
        lam_scale=float(f.options.get("lam_scale", 0.25)),
        projection_dtype=str(f.options.get("projection_dtype", "auto")),
        **f.private_kwargs(),
        **PAPER_NORM,
    ),
    "non-private-pca": lambda f: NonPrivatePCA(f.n_components),
}


def projection_score(U: NDArray[np.float64], V: NDArray[np.float64]) -> dict[str, float]:
    """Wang & Xu's error ``‖ÛÛᵀ − VVᵀ‖_F`` (at most √(2k))."""
    return {"error": subspace_distance(U, V)}


def fitter(
    ctx: RunContext,
    methods: Sequence[str],
    ledger: Any,
    *,
    options: Mapping[str, Any] | None = None,
    truth_key: str | None = None,
) -> FitFunction:
    """The fit step of a Wang & Xu sweep: every method on the first ``n`` rows of the sample.

    ``cell.values`` gives ``n``, ``k``, ``epsilon`` and ``delta``; ``cell.extra["truths"]``,
    when present, selects the truths a cell is scored against.
    """
    names = check_methods(methods, METHODS)

    def fit(X: Any, truths: Truths, cell: Cell, streams: RunStreams, index: int,
            base: dict[str, Any]) -> list[dict[str, Any]]:
        v = cell.values
        n = int(v["n"])
        X = X[:n] if X.shape[0] > n else X
        wanted = cell.extra.get("truths", truths)
        return fit_methods(X, wanted, names, METHODS, streams=streams, setting=index, base=base,
                           ctx=ctx, score=projection_score, n_components=int(v["k"]),
                           epsilon=float(v["epsilon"]), delta=float(v["delta"]), ledger=ledger,
                           options=options, truth_key=truth_key)

    return fit
