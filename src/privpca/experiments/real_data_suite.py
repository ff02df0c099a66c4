"""The real-table suite: each Gram-based estimator on defaults beside its oracle bound.

``privpca reproduce real-data-suite`` runs AnalyzeGauss, ModSuLQ, NoisyPower and Bingham on
their **defaults** (private centring, the bound chosen for the table by
:mod:`privpca.pipeline.bound_selection`) and with ``data_norm="quantile"`` (the private 99 %
quantile of the norms, the previous default) on every table of
:data:`SUITE_TABLES`, raw, and scores each fit by ‖V̂V̂ᵀ − VVᵀ‖_F to scikit-learn's ``PCA(k)``
of the same table. Beside each it fits the **oracle**: the same estimator and seed with
``data_norm`` fixed at a quantile of the true centred row norms ‖x − μ̂‖ (μ̂ the private mean
that fit releases, still paid from ε), for each quantile of a grid; the best of them is the
bound a perfect, non-private choice of a fixed quantile would give. The oracle reads the norms
to choose the bound: it is not private and is reported for comparison only.

Tables (docs/REAL_DATA.md has each one's source, version and columns): Covertype's 10
quantitative columns, isolet5, Leukemia and Colon (shipped with privpca), and the tables
shipped inside scikit-learn and statsmodels (:mod:`privpca.datasets.packaged`).
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
from sklearn.decomposition import PCA

from privpca import datasets
from privpca._registry import PRIVATE_ESTIMATORS
from privpca.accounting.ledger import PrivacyLedger
from privpca.experiments.context import quiet_fit
from privpca.experiments.spec import ExperimentResult, Panel
from privpca.metrics import subspace_distance
from privpca.pipeline.release import DEFAULT_NORM_QUANTILE

__all__ = ["SUITE_TABLES", "load_table", "run_real_data_suite", "suite_table"]

#: The real-table suite, largest n first: Covertype's quantitative columns, the shipped
#: isolet5, Leukemia and Colon, and tables shipped inside scikit-learn and statsmodels.
SUITE_TABLES: tuple[str, ...] = (
    "covtype", "randhie", "fair", "digits", "isolet5", "anes96", "breast_cancer", "diabetes",
    "star98", "macrodata", "wine", "leukemia", "colon",
)

#: The shipped tables of the suite: loader, its keyword arguments, description.
_SHIPPED: dict[str, tuple[str, dict[str, Any], str]] = {
    "covtype": ("load_covtype", {}, "Covertype, 10 quantitative columns"),
    "isolet5": ("load_isolet5", {}, "isolet5"),
    "leukemia": ("load_leukemia", {"variant": "allaml"},
                 "Leukemia ALL/AML, continuous (standardised per gene at the source)"),
    "colon": ("load_colon", {"variant": "continuous"},
              "Colon, continuous (standardised per sample at the source)"),
}


def load_table(name: str) -> tuple[np.ndarray, str]:
    """The raw table (float64, as shipped: not normalised or centred) and a description.

    ``name`` is one of :data:`SUITE_TABLES`: a table shipped with privpca or one shipped inside
    scikit-learn or statsmodels (:func:`privpca.datasets.load_packaged`).
    """
    if name in _SHIPPED:
        loader, kwargs, title = _SHIPPED[name]
        X = getattr(datasets, loader)(normalize_rows=False, **kwargs).data
        return (X[:, :10].copy() if name == "covtype" else X), title
    if name in datasets.PACKAGED_TABLES:
        table = datasets.load_packaged(name)
        return table.data, f"{table.info.title}, {table.package} {table.version}"
    raise ValueError(f"unknown table {name!r}; choose one of {list(SUITE_TABLES)}")


#: Estimators whose ``"auto"`` bound is chosen for the table (the suite fits their
#: ``data_norm="quantile"``, the previous default, beside the defaults).
SELECT_METHODS: frozenset[str] = frozenset({"analyze-gauss", "mod-sulq", "noisy-power",
                                            "bingham"})


def _fit_row(cls: type, X: np.ndarray, ref: PCA, seed_seq: np.random.SeedSequence, k: int,
             eps: float, **kwargs: Any) -> tuple[dict[str, Any], Any]:
    """One fit on a fresh generator from ``seed_seq`` (so fits of one seed share the private
    mean): the row's scores, and the estimator (None when it refused)."""
    # A copy of the sequence: an estimator spawns from its generator's sequence, which would
    # advance a shared one and give the next fit of this seed other draws.
    fresh = np.random.SeedSequence(seed_seq.entropy, spawn_key=seed_seq.spawn_key)
    est = cls(n_components=k, epsilon=eps, random_state=np.random.default_rng(fresh),
              ledger=PrivacyLedger(), **kwargs)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            est, seconds, _ = quiet_fit(est, X)
    except Exception as exc:  # a refusal is a result: record it
        return dict(error=np.nan, explained_ratio=np.nan, data_norm=np.nan, mean_norm=np.nan,
                    seconds=0.0, status=f"{type(exc).__name__}: {str(exc)[:120]}"), None
    error = subspace_distance(np.asarray(est.components_).T, ref.components_.T)
    ratio = np.asarray(getattr(est, "explained_variance_ratio_", np.full(k, np.nan)))
    return dict(error=error, explained_ratio=float(np.sum(ratio[:k])),
                data_norm=float(est.data_norm_), mean_norm=float(np.linalg.norm(est.mean_)),
                seconds=seconds, status="ok"), est


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


def run_real_data_suite(params: dict[str, Any], ctx: Any) -> ExperimentResult:
    """Each Gram-based estimator on defaults and at its oracle bounds, on every suite table.

    ``params``: ``tables`` (names of :data:`SUITE_TABLES`), ``methods`` (CLI names of
    estimators that take ``data_norm``), ``reduced_methods`` (None, or ``{table: methods}``
    to run fewer estimators on a table; the summary says so), ``quantiles`` (the oracle's grid,
    in %), ``repetitions`` (seeds), ``n_components`` and ``epsilon``.
    """
    tables = tuple(params["tables"])
    methods = tuple(params["methods"])
    reduced = dict(params.get("reduced_methods") or {})
    quantiles = tuple(float(q) for q in params["quantiles"])
    reps, k, eps = int(params["repetitions"]), int(params["n_components"]), float(
        params["epsilon"])
    plan = {t: tuple(reduced.get(t, methods)) for t in tables}
    ctx.start(sum(len(m) for m in plan.values()) * reps * (2 + len(quantiles)))
    # "quantile" rows are extra fits of the same seeds (not counted in the progress bar).
    rows: list[dict[str, Any]] = []
    panels: list[Panel] = []
    for t_index, table in enumerate(tables):
        X, _ = load_table(table)
        # Short titles: the figure has a subplot per table. The table's source is in the
        # summary's notes (and docs/REAL_DATA.md).
        panels.append(Panel(table, f"{table} (n = {X.shape[0]}, p = {X.shape[1]})",
                            "clip_quantile", "quantile of ‖x − μ̂‖ (%)"))
        ref = PCA(k).fit(X)
        base = dict(panel=table, epsilon=eps, k=k, n=X.shape[0], p=X.shape[1],
                    sklearn_ratio=float(np.sum(ref.explained_variance_ratio_)))
        for rep in range(reps):
            seed = ctx.run_seed(t_index, rep)
            children = np.random.SeedSequence(seed).spawn(len(methods))
            for name in plan[table]:
                cls, child = PRIVATE_ESTIMATORS[name], children[methods.index(name)]
                head = dict(base, repetition=rep, seed=seed)
                row, _ = _fit_row(cls, X, ref, child, k, eps)
                rows.append(dict(head, method=name, estimator=name, bound="defaults",
                                 clip_quantile=(np.nan if name in SELECT_METHODS
                                                else 100 * DEFAULT_NORM_QUANTILE), **row))
                if name in SELECT_METHODS:
                    row, _ = _fit_row(cls, X, ref, child, k, eps, data_norm="quantile")
                    rows.append(dict(head, method=f"{name}, data_norm='quantile'",
                                     estimator=name, bound="private quantile",
                                     clip_quantile=100 * DEFAULT_NORM_QUANTILE, **row))
                bounds = _oracle_bounds(cls, X, ref, child, k, eps, quantiles)
                ctx.advance(2)
                for q_index, q in enumerate(quantiles):
                    if isinstance(bounds, str):
                        row = dict(error=np.nan, explained_ratio=np.nan, data_norm=np.nan,
                                   mean_norm=np.nan, seconds=0.0, status=bounds)
                    else:
                        row, _ = _fit_row(cls, X, ref, child, k, eps,
                                          data_norm=bounds[q_index])
                    rows.append(dict(head, method=f"{name}, fixed D (oracle)",
                                     estimator=name, bound=f"q{q:g}", clip_quantile=q, **row))
                    ctx.advance()
    notes = _suite_notes(rows, k, eps, quantiles, reduced)
    return ExperimentResult(rows, panels, notes)


def _spread(values: np.ndarray) -> str:
    """``mean (min–max)`` over the seeds that fitted, and how many refused."""
    done = values[np.isfinite(values)]
    if done.size == 0:
        return f"refused ({values.size}/{values.size})"
    text = f"{done.mean():.3f} ({done.min():.3f}–{done.max():.3f})"
    return text if done.size == values.size else f"{text}; {values.size - done.size} refused"


def _oracle(rows: list[dict[str, Any]]) -> tuple[str, np.ndarray] | None:
    """The fixed quantile with the smallest mean error over the seeds that fitted (all of
    them at the same seeds: a refusal is the private mean's, shared by a seed's fits), and
    its errors."""
    by_bound: dict[str, list[float]] = {}
    for r in rows:
        by_bound.setdefault(str(r["bound"]), []).append(float(r["error"]))
    finite = {b: np.asarray(v) for b, v in by_bound.items() if np.any(np.isfinite(v))}
    if not finite:
        return None
    best = min(finite, key=lambda b: float(np.nanmean(finite[b])))
    return best, finite[best]


def _mean(values: np.ndarray, fmt: str) -> str:
    """The mean over the seeds that fitted, or a dash."""
    done = values[np.isfinite(values)]
    return format(float(done.mean()), fmt) if done.size else "—"


def suite_table(rows: list[dict[str, Any]]) -> str:
    """The markdown table of a ``real-data-suite`` run: defaults against the oracle.

    One line per table and estimator: scikit-learn's explained variance ratio (top k summed)
    and the defaults' private one, the defaults' distance to scikit-learn's subspace and their
    bound D, the same with ``data_norm="quantile"`` (the previous default), the oracle's best
    quantile, its D and distance, and the ratios defaults/oracle and quantile/oracle.
    Distances are ``mean (min–max)`` over the seeds that fitted; refusals are counted.
    """
    lines = ["| table (n × p) | estimator | sklearn EVR | private EVR (defaults) | defaults: "
             "distance | defaults: D | 0.99 quantile: distance | 0.99 quantile: D | oracle "
             "(non-private): quantile | oracle: D | oracle: distance | defaults / oracle | "
             "0.99 quantile / oracle |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for r in rows:
        groups.setdefault((str(r["panel"]), str(r["estimator"])), []).append(r)
    for (table, name), group in groups.items():
        default = [r for r in group if r["bound"] == "defaults"]
        d_err = np.array([float(r["error"]) for r in default])
        evr = np.array([float(r["explained_ratio"]) for r in default])
        d_norm = np.array([float(r["data_norm"]) for r in default])
        best = _oracle([r for r in group if str(r["bound"]).startswith("q")])
        chosen = [r for r in group if r["bound"] == "private quantile"]
        s_err = np.array([float(r["error"]) for r in chosen]) if chosen else None
        cells = [f"**{table}** ({default[0]['n']} × {default[0]['p']})", f"`{name}`",
                 f"{float(default[0]['sklearn_ratio']):.3f}",
                 _mean(evr, ".3f"), _spread(d_err), _mean(d_norm, ".4g")]
        cells += ["—", "—"] if s_err is None else [
            _spread(s_err), _mean(np.array([float(r["data_norm"]) for r in chosen]), ".4g")]
        if best is None:
            cells += ["refused", "—", "—", "—", "—"]
        else:
            bound, o_err = best
            o_norm = np.nanmean([float(r["data_norm"]) for r in group if r["bound"] == bound])
            cells += [f"{bound[1:]} %", f"{o_norm:.4g}", _spread(o_err),
                      _ratio(d_err, o_err), "—" if s_err is None else _ratio(s_err, o_err)]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _ratio(errors: np.ndarray, oracle: np.ndarray) -> str:
    """Mean error over the oracle's mean error (a dash when nothing fitted)."""
    if np.all(np.isnan(errors)):
        return "—"
    return f"{np.nanmean(errors) / max(float(np.nanmean(oracle)), 1e-12):.2f}"


def _suite_notes(rows: list[dict[str, Any]], k: int, eps: float, quantiles: tuple[float, ...],
                 reduced: dict[str, Any]) -> str:
    skipped = "".join(f" On {t} only {', '.join(m)} ran (time)." for t, m in reduced.items())
    return (
        "## Defaults against the oracle bound\n\n" + suite_table(rows) + "\n\n"
        f"ε = {eps:g}, δ = 1e-5, n_components = {k}; distance = ‖V̂V̂ᵀ − VVᵀ‖_F to "
        "scikit-learn's PCA on the same raw table (max 2), mean (min–max) over the seeds. "
        "**defaults**: centering='private', data_norm='auto': for these four estimators a "
        "fifth of the budget releases two pilot Grams that choose between the private median "
        "of the centred norms and a bound above them (the top of their released histogram, "
        "or twice it where the tail thins through its threshold): "
        "privpca.pipeline.bound_selection; D is the bound it used (mean over seeds). "
        "**0.99 quantile**: the same fit with data_norm='quantile' (a private 99 % quantile "
        "of the centred norms: the previous default). **oracle "
        "(non-private, for comparison only)**: the same estimator and seed with data_norm "
        "fixed at a quantile of the true norms ‖x − μ̂‖, μ̂ the private mean that fit releases "
        f"(still paid from ε); the quantile in {{{', '.join(f'{q:g}' for q in quantiles)}}} % "
        "with the smallest mean distance. Reading the norms to choose D is not private. "
        "EVR = the top-k explained variance ratio, summed (mean over the fits that gave one). "
        "A refusal (too few rows for a private bound, the private mean's included) is counted; "
        "means are over the seeds that fitted. The ratio is the defaults' mean over the "
        "oracle's." + skipped
    )

