"""The real-table suite: each Gram-based estimator on defaults beside its oracle bound.

``privpca reproduce real-data-suite`` runs AnalyzeGauss, ModSuLQ, NoisyPower and Bingham on
their **defaults** (private centring, the bound chosen for the table by
:mod:`privpca.pipeline.bound_selection`) and with ``data_norm="quantile"`` (the private 99 %
quantile of the norms) on the tables of :data:`SUITE_TABLES`, raw, and
scores each fit by ‖V̂V̂ᵀ − VVᵀ‖_F to scikit-learn's ``PCA(k)`` of the same table. Beside each
it fits the **oracle**: the same estimator and seed with ``data_norm`` fixed at a quantile of
the true centred row norms ‖x − μ̂‖ (μ̂ the private mean that fit releases, still paid from ε),
for each quantile of a grid; the best of them is the bound a perfect, non-private choice of a
fixed quantile would give. The oracle reads the norms to choose the bound: it is not private
and is reported for comparison only.

Tables and the tuning/held-out halves: :mod:`privpca.experiments.real_data_tables`.
"""

from __future__ import annotations

import hashlib
import math
import time
import warnings
from collections.abc import Mapping
from typing import Any

import numpy as np
from sklearn.decomposition import PCA

from privpca._registry import PRIVATE_ESTIMATORS
from privpca.accounting.ledger import PrivacyLedger
from privpca.experiments.context import quiet_fit
from privpca.experiments.real_data_report import (
    meets_targets,
    suite_notes,
    suite_summary,
    suite_table,
    tables_list,
)
from privpca.experiments.real_data_tables import (
    HALVES,
    HELD_OUT_TABLES,
    QUICK_TABLES,
    SUITE,
    SUITE_TABLES,
    TUNING_TABLES,
    SuiteTable,
    load_table,
    norm_tail_ratio,
    shape_class,
    split_halves,
)
from privpca.experiments.spec import ExperimentResult, Panel
from privpca.metrics import subspace_distance
from privpca.pipeline.settings import DEFAULT_NORM_QUANTILE

__all__ = [
    "HALVES",
    "HELD_OUT_TABLES",
    "QUICK_TABLES",
    "SUITE",
    "SUITE_FULL_PARAMS",
    "SUITE_QUICK_PARAMS",
    "SUITE_TABLES",
    "TUNING_TABLES",
    "SuiteTable",
    "load_table",
    "meets_targets",
    "norm_tail_ratio",
    "run_real_data_suite",
    "shape_class",
    "split_halves",
    "suite_summary",
    "suite_table",
    "tables_list",
]

_QUANTILES = (50.0, 75.0, 90.0, 95.0, 99.0, 100.0)
#: Parameters of the registered experiment's quick and full runs.
SUITE_QUICK_PARAMS: dict[str, Any] = dict(
    tables=QUICK_TABLES, half="all", methods=("analyze-gauss",), reduced_methods=None,
    repetitions=1, n_components=2, epsilon=1.0, quantiles=_QUANTILES, compare_quantile=True)
SUITE_FULL_PARAMS: dict[str, Any] = dict(
    tables=None, half="all", methods=("analyze-gauss", "mod-sulq", "noisy-power", "bingham"),
    reduced_methods=None, repetitions=3, n_components=2, epsilon=1.0, quantiles=_QUANTILES,
    compare_quantile=True)

#: Estimators whose ``"auto"`` bound is chosen for the table (the suite fits their
#: ``data_norm="quantile"`` beside the defaults).
SELECT_METHODS: frozenset[str] = frozenset({"analyze-gauss", "mod-sulq", "noisy-power",
                                            "bingham"})


def _refusal_row(exc: BaseException | str, seconds: float) -> dict[str, Any]:
    """The scores of a fit that refused: NaN, and the exception's class and first line."""
    if isinstance(exc, str):  # another fit's refusal, shared (the probe's)
        kind, _, message = exc.partition(": ")
    else:
        kind, message = type(exc).__name__, (str(exc).strip().splitlines() or [""])[0]
    return dict(error=np.nan, expected_error=np.nan, covered=None, explained_ratio=np.nan,
                data_norm=np.nan, mean_norm=np.nan, seconds=seconds,
                status=f"{kind}: {message[:120]}", refusal=kind, refusal_message=message)


def _fit_row(cls: type, X: np.ndarray, ref: PCA, seed_seq: np.random.SeedSequence, k: int,
             eps: float, **kwargs: Any) -> tuple[dict[str, Any], Any]:
    """One fit on a fresh generator from ``seed_seq`` (so fits of one seed share the private
    mean): the row's scores, and the estimator (None when it refused)."""
    # A copy of the sequence: an estimator spawns from its generator's sequence, which would
    # advance a shared one and give the next fit of this seed other draws.
    fresh = np.random.SeedSequence(seed_seq.entropy, spawn_key=seed_seq.spawn_key)
    est = cls(n_components=k, epsilon=eps, random_state=np.random.default_rng(fresh),
              ledger=PrivacyLedger(), **kwargs)
    start = time.perf_counter()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            est, seconds, _ = quiet_fit(est, X)
    except Exception as exc:  # a refusal is a result: record it
        return _refusal_row(exc, time.perf_counter() - start), None
    error = subspace_distance(np.asarray(est.components_).T, ref.components_.T)
    ratio = np.asarray(getattr(est, "explained_variance_ratio_", np.full(k, np.nan)))
    bound = getattr(est, "expected_error_", None)
    expected = float(bound) if bound is not None else math.nan
    return dict(error=error, expected_error=expected,
                covered=None if math.isnan(expected) else bool(expected >= error),
                explained_ratio=float(np.sum(ratio[:k])), data_norm=float(est.data_norm_),
                mean_norm=float(np.linalg.norm(est.mean_)), seconds=seconds, status="ok",
                refusal="", refusal_message=""), est


def _oracle_bounds(cls: type, X: np.ndarray, ref: PCA, seed_seq: np.random.SeedSequence,
                   k: int, eps: float, quantiles: tuple[float, ...]) -> list[float] | str:
    """The quantiles of ‖x − μ̂‖ over the true rows, μ̂ the private mean the oracle's fits
    release (one probe fit with a fixed bound: the mean does not depend on its value), or the
    probe's refusal."""
    probe, est = _fit_row(cls, X, ref, seed_seq, k, eps, data_norm=1.0)
    if est is None:
        return str(probe["status"])
    norms = np.linalg.norm(X - est.mean_, axis=1)
    return [float(b) for b in np.quantile(norms, np.asarray(quantiles) / 100.0)]


def _selected_tables(params: Mapping[str, Any]) -> tuple[str, ...]:
    """``params["tables"]`` (None: all) restricted to ``params["half"]``, in suite order."""
    half = str(params.get("half", "all"))
    if half not in HALVES:
        raise ValueError(f"half must be one of {sorted(HALVES)}; got {half!r}")
    asked = params.get("tables")
    names = SUITE_TABLES if asked is None else tuple(asked)
    unknown = [t for t in names if t not in SUITE]
    if unknown:
        raise ValueError(f"unknown table(s) {unknown}; choose from {list(SUITE_TABLES)}")
    return tuple(t for t in names if t in HALVES[half])


def _table_seed_key(name: str) -> int:
    """A table's key in the run's seed tree: from its name, so that its seeds do not depend
    on which other tables run (a half, a subset) or on their order."""
    return int.from_bytes(hashlib.sha256(name.encode("utf-8")).digest()[:4], "big")


def run_real_data_suite(params: dict[str, Any], ctx: Any) -> ExperimentResult:
    """Each Gram-based estimator on defaults and at its oracle bounds, on the suite's tables.

    Parameters
    ----------
    params : dict
        ``tables`` (names of :data:`SUITE_TABLES`; None: all), ``half`` (``"all"``,
        ``"tuning"`` or ``"held-out"``: only the tables of that half, default ``"all"``),
        ``methods`` (CLI names of estimators that take ``data_norm``), ``reduced_methods``
        (None, or ``{table: methods}`` to run fewer estimators on a table; the summary says
        so), ``quantiles`` (the oracle's grid, in %; empty: no oracle), ``compare_quantile``
        (also fit ``data_norm="quantile"``, default True), ``repetitions`` (seeds),
        ``n_components`` and ``epsilon``.
    ctx : RunContext
        Seeds and progress.

    Returns
    -------
    ExperimentResult
        One row per fit (columns: the table's ``panel``, ``half``, ``shape_class``,
        ``source``, ``n``, ``p``; the fit's ``estimator``, ``bound``, ``seed``, ``error`` (the
        distance), ``expected_error``, ``covered``, ``data_norm`` (D), ``refusal``,
        ``refusal_message``, ``seconds``, ...), a panel per table, and the summary
        (:func:`suite_table` per half).
    """
    tables = _selected_tables(params)
    methods = tuple(params["methods"])
    reduced = dict(params.get("reduced_methods") or {})
    quantiles = tuple(float(q) for q in params.get("quantiles") or ())
    compare = bool(params.get("compare_quantile", True))
    reps, k, eps = int(params["repetitions"]), int(params["n_components"]), float(
        params["epsilon"])
    plan = {t: tuple(reduced.get(t, methods)) for t in tables}
    oracle_steps = (1 if quantiles else 0) + len(quantiles)
    ctx.start(sum(len(m) for m in plan.values()) * reps * (1 + oracle_steps))
    # "quantile" rows are extra fits of the same seeds (not counted in the progress bar).
    rows: list[dict[str, Any]] = []
    panels: list[Panel] = []
    for table in tables:
        X, _ = load_table(table)
        info = SUITE[table]
        # Short titles: the figure has a subplot per table. The table's source is in the
        # summary's notes (and docs/REAL_DATA.md).
        panels.append(Panel(table, f"{table} (n = {X.shape[0]}, p = {X.shape[1]})",
                            "clip_quantile", "quantile of ‖x − μ̂‖ (%)"))
        ref = PCA(k).fit(X)
        half = "tuning" if table in TUNING_TABLES else "held-out"
        base = dict(panel=table, half=half, shape_class=info.shape_class, source=info.source,
                    epsilon=eps, k=k, n=X.shape[0], p=X.shape[1],
                    sklearn_ratio=float(np.sum(ref.explained_variance_ratio_)))
        for rep in range(reps):
            seed = ctx.run_seed(_table_seed_key(table), rep)
            children = np.random.SeedSequence(seed).spawn(len(methods))
            for name in plan[table]:
                cls, child = PRIVATE_ESTIMATORS[name], children[methods.index(name)]
                head = dict(base, repetition=rep, seed=seed)
                row, _ = _fit_row(cls, X, ref, child, k, eps)
                rows.append(dict(head, method=name, estimator=name, bound="defaults",
                                 clip_quantile=(np.nan if name in SELECT_METHODS
                                                else 100 * DEFAULT_NORM_QUANTILE), **row))
                if compare and name in SELECT_METHODS:
                    row, _ = _fit_row(cls, X, ref, child, k, eps, data_norm="quantile")
                    rows.append(dict(head, method=f"{name}, data_norm='quantile'",
                                     estimator=name, bound="private quantile",
                                     clip_quantile=100 * DEFAULT_NORM_QUANTILE, **row))
                ctx.advance()
                if not quantiles:
                    continue
                bounds = _oracle_bounds(cls, X, ref, child, k, eps, quantiles)
                ctx.advance()
                for q_index, q in enumerate(quantiles):
                    if isinstance(bounds, str):
                        row = _refusal_row(bounds, 0.0)
                    else:
                        row, _ = _fit_row(cls, X, ref, child, k, eps,
                                          data_norm=bounds[q_index])
                    rows.append(dict(head, method=f"{name}, fixed D (oracle)",
                                     estimator=name, bound=f"q{q:g}", clip_quantile=q, **row))
                    ctx.advance()
    notes = suite_notes(rows, tables, k, eps, quantiles, reduced)
    return ExperimentResult(rows, panels, notes)


# ---------------------------------------------------------------------------------------------
# The summary
# ---------------------------------------------------------------------------------------------
