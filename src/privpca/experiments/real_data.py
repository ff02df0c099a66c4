"""PCA of real tables on defaults: every private estimator against scikit-learn's PCA.

The question users ask is *the PCA of my table*: centred, in the table's own units, with no
norm bound known in advance. Each privpca estimator runs on its **defaults** (private centring,
private norm bound; ``n_components=2``) on the raw shipped tables, and is scored by the
subspace distance ‖V̂V̂ᵀ − VVᵀ‖_F to scikit-learn's ``PCA(2)`` on the same table, and by its
private ``explained_variance_ratio_`` against scikit-learn's. Peer libraries (diffprivlib,
OpenDP) run in another interpreter when ``peer_python`` is given
(:mod:`privpca.experiments.peers`), each under a time limit.

Tables: Covertype's 10 quantitative columns (n = 581 012; elevation in metres, slopes in
degrees, distances in metres, hillshade indices 0–255: mixed units, not centred) and isolet5
(n = 1 559, p = 617, features scaled to [−1, 1] by its curators).

``real-data-suite`` (:func:`run_real_data_suite`) runs the Gram-based estimators on a suite of
real tables (:data:`SUITE_TABLES`: these two, Leukemia, Colon, and public tables shipped inside
scikit-learn and statsmodels, :mod:`privpca.datasets.packaged`) at one ε, and beside each
estimator's defaults its **oracle**: the same estimator with ``data_norm`` fixed at the best of
a few quantiles of the true centred row norms. The oracle is not private (it reads the norms to
choose the bound); it measures how much the defaults' bound costs.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import warnings
from pathlib import Path
from typing import Any

import numpy as np
from sklearn.decomposition import PCA

from privpca import datasets
from privpca._registry import PRIVATE_ESTIMATORS
from privpca.accounting.ledger import PrivacyLedger
from privpca.experiments.context import quiet_fit
from privpca.experiments.spec import Experiment, ExperimentResult, Panel
from privpca.metrics import subspace_distance
from privpca.pipeline.release import DEFAULT_NORM_QUANTILE

__all__ = ["EXPERIMENTS", "SUITE_TABLES", "load_table", "run_real_data",
           "run_real_data_suite", "suite_table"]

#: Peers compared when ``peer_python`` is given, and their time limit per fit (seconds).
PEERS: tuple[str, ...] = ("diffprivlib", "opendp")


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


def _score(components: Any, ratio: Any, ref: PCA) -> tuple[float, float]:
    C = np.asarray(components, dtype=np.float64)
    error = subspace_distance(C.T, ref.components_.T)
    r = np.asarray(ratio, dtype=np.float64) if ratio is not None else np.full(2, np.nan)
    ratio_error = float(np.abs(np.sum(r[:2]) - np.sum(ref.explained_variance_ratio_)))
    return error, ratio_error


def _peer(python: str, library: str, path: str, k: int, eps: float, seed: int,
          timeout: float) -> dict[str, Any]:
    script = str(Path(__file__).with_name("peers.py"))
    try:
        out = subprocess.run([python, script, library, path, str(k), str(eps), str(seed)],
                             capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        return {"error": f"did not finish in {timeout:g} s"}
    lines = [line for line in out.stdout.splitlines() if line.startswith("{")]
    if not lines:
        return {"error": (out.stderr.strip().splitlines() or ["no output"])[-1][:200]}
    result: dict[str, Any] = json.loads(lines[-1])
    return result


def run_real_data(params: dict[str, Any], ctx: Any) -> ExperimentResult:
    """Every private estimator on defaults, each table, each ε; scikit-learn as reference."""
    tables = tuple(params["tables"])
    eps_grid = tuple(float(e) for e in params["eps_grid"])
    chosen = params.get("methods")
    methods = tuple(sorted(PRIVATE_ESTIMATORS) if chosen is None else chosen)
    reps = int(params["repetitions"])
    k = int(params["n_components"])
    peer_python = params.get("peer_python")
    peers = PEERS if peer_python else ()
    peer_reps = min(int(params.get("peer_repetitions", reps)), reps)
    ctx.start(len(tables) * len(eps_grid) * (reps * len(methods) + peer_reps * len(peers)))
    rows: list[dict[str, Any]] = []
    reference: dict[str, float] = {}
    for t_index, table in enumerate(tables):
        X, _ = load_table(table)
        ref = PCA(k).fit(X)
        reference[table] = float(np.sum(ref.explained_variance_ratio_))
        tmp = None
        if peers:
            tmp = tempfile.NamedTemporaryFile(suffix=".npy", delete=False)
            np.save(tmp.name, X)
        for e_index, eps in enumerate(eps_grid):
            for rep in range(reps):
                seed = ctx.run_seed(t_index, e_index, rep)
                for m_index, name in enumerate(methods):
                    cls = PRIVATE_ESTIMATORS[name]
                    rng = np.random.default_rng(np.random.SeedSequence(seed).spawn(
                        len(methods))[m_index])
                    est = cls(n_components=k, epsilon=eps, random_state=rng,
                              ledger=PrivacyLedger())
                    row = dict(panel=table, method=name, epsilon=eps, repetition=rep,
                               seed=seed, k=k, n=X.shape[0], p=X.shape[1])
                    try:
                        with warnings.catch_warnings():
                            warnings.simplefilter("ignore")
                            est, seconds, _ = quiet_fit(est, X)
                        error, ratio_error = _score(
                            est.components_, getattr(est, "explained_variance_ratio_", None),
                            ref)
                        row.update(error=error, ratio_error=ratio_error,
                                   explained_ratio=float(np.nansum(
                                       getattr(est, "explained_variance_ratio_",
                                               np.full(k, np.nan))[:k])),
                                   expected_error=float(getattr(est, "expected_error_",
                                                                np.nan)),
                                   seconds=seconds, status="ok")
                    except Exception as exc:  # a refusal is a result: record it
                        row.update(error=np.nan, ratio_error=np.nan, explained_ratio=np.nan,
                                   expected_error=np.nan, seconds=np.nan,
                                   status=f"{type(exc).__name__}: {str(exc)[:120]}")
                    rows.append(row)
                    ctx.advance()
                for library in peers if rep < peer_reps else ():
                    assert tmp is not None and peer_python is not None
                    out = _peer(str(peer_python), library, tmp.name, k, eps, seed,
                                float(params["peer_timeout"]))
                    row = dict(panel=table, method=f"{library} PCA (peer)", epsilon=eps,
                               repetition=rep, seed=seed, k=k, n=X.shape[0], p=X.shape[1],
                               expected_error=np.nan)
                    if "error" in out:
                        row.update(error=np.nan, ratio_error=np.nan, explained_ratio=np.nan,
                                   seconds=np.nan, status=str(out["error"])[:160])
                    else:
                        error, ratio_error = _score(out["components"],
                                                    out["explained_variance_ratio"], ref)
                        row.update(error=error, ratio_error=ratio_error,
                                   explained_ratio=float(np.nansum(
                                       out["explained_variance_ratio"] or [np.nan])),
                                   seconds=float(out["seconds"]),
                                   status="ok; " + "; ".join(out.get("warnings", []))[:160])
                    rows.append(row)
                    ctx.advance()
        if tmp is not None:
            Path(tmp.name).unlink(missing_ok=True)
    panels = []
    for table in tables:
        title = load_table(table)[1]
        panels.append(Panel(table, f"{title}: distance to scikit-learn's PCA({k})", "epsilon",
                            "ε", logy=True))
        panels.append(Panel(table, f"{title}: |explained variance ratio − scikit-learn's "
                            f"{reference[table]:.4f}|", "epsilon", "ε", y="ratio_error",
                            ylabel="|Σ ratio − sklearn|", logy=True))
    notes = (
        "Every privpca estimator on its defaults (centering='private', data_norm='auto', "
        f"n_components={k}, δ = 1e-5 where it has one), on the raw table; error = "
        "‖V̂V̂ᵀ − VVᵀ‖_F against scikit-learn's PCA on the same table (max 2); ratio_error = "
        "|Σ explained_variance_ratio_ − scikit-learn's|. A fit that refused (e.g. too few rows "
        "for a private bound) is recorded with its message in 'status'. Peers run on their "
        "own defaults in another interpreter (peer_python), each under peer_timeout seconds."
    )
    return ExperimentResult(rows, panels, notes)



def _fit_row(cls: type, X: np.ndarray, ref: PCA, seed_seq: np.random.SeedSequence, k: int,
             eps: float, **kwargs: Any) -> tuple[dict[str, Any], Any]:
    """One fit on a fresh generator from ``seed_seq`` (so fits of one seed share the private
    mean): the row's scores, and the estimator (None when it refused)."""
    est = cls(n_components=k, epsilon=eps, random_state=np.random.default_rng(seed_seq),
              ledger=PrivacyLedger(), **kwargs)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            est, seconds, _ = quiet_fit(est, X)
    except Exception as exc:  # a refusal is a result: record it
        return dict(error=np.nan, explained_ratio=np.nan, data_norm=np.nan, seconds=0.0,
                    status=f"{type(exc).__name__}: {str(exc)[:120]}"), None
    error, _ = _score(est.components_, None, ref)
    ratio = np.asarray(getattr(est, "explained_variance_ratio_", np.full(k, np.nan)))
    return dict(error=error, explained_ratio=float(np.sum(ratio[:k])),
                data_norm=float(est.data_norm_), seconds=seconds, status="ok"), est


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
    """Each Gram-based estimator on defaults and at its oracle bounds, on every suite table."""
    tables = tuple(params["tables"])
    methods = tuple(params["methods"])
    reduced = dict(params.get("reduced_methods") or {})
    quantiles = tuple(float(q) for q in params["quantiles"])
    reps, k, eps = int(params["repetitions"]), int(params["n_components"]), float(
        params["epsilon"])
    plan = {t: tuple(reduced.get(t, methods)) for t in tables}
    ctx.start(sum(len(m) for m in plan.values()) * reps * (2 + len(quantiles)))
    rows: list[dict[str, Any]] = []
    panels: list[Panel] = []
    for t_index, table in enumerate(tables):
        X, title = load_table(table)
        panels.append(Panel(table, f"{title} (n = {X.shape[0]}, p = {X.shape[1]}): distance "
                            f"to scikit-learn's PCA({k}) against the bound's quantile of the "
                            "norms", "clip_quantile", "quantile of ‖x − μ̂‖ (%)"))
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
                                 clip_quantile=100 * DEFAULT_NORM_QUANTILE, **row))
                bounds = _oracle_bounds(cls, X, ref, child, k, eps, quantiles)
                ctx.advance(2)
                for q_index, q in enumerate(quantiles):
                    if isinstance(bounds, str):
                        row = dict(error=np.nan, explained_ratio=np.nan, data_norm=np.nan,
                                   seconds=0.0, status=bounds)
                    else:
                        row, _ = _fit_row(cls, X, ref, child, k, eps,
                                          data_norm=bounds[q_index])
                    rows.append(dict(head, method=f"{name}, fixed D (oracle)",
                                     estimator=name, bound=f"q{q:g}", clip_quantile=q, **row))
                    ctx.advance()
    notes = _suite_notes(rows, k, eps, quantiles, reduced)
    return ExperimentResult(rows, panels, notes)


def _spread(values: np.ndarray) -> str:
    """``mean (min–max)`` of a seed's values, or the number of refusals."""
    if np.any(np.isnan(values)):
        return f"refused ({int(np.isnan(values).sum())}/{values.size})"
    return f"{values.mean():.3f} ({values.min():.3f}–{values.max():.3f})"


def _oracle(rows: list[dict[str, Any]]) -> tuple[str, np.ndarray] | None:
    """The fixed quantile with the smallest mean error over the seeds, and its errors."""
    by_bound: dict[str, list[float]] = {}
    for r in rows:
        by_bound.setdefault(str(r["bound"]), []).append(float(r["error"]))
    finite = {b: np.asarray(v) for b, v in by_bound.items() if np.all(np.isfinite(v))}
    if not finite:
        return None
    best = min(finite, key=lambda b: float(finite[b].mean()))
    return best, finite[best]


def suite_table(rows: list[dict[str, Any]]) -> str:
    """The markdown table of a ``real-data-suite`` run: defaults against the oracle.

    One line per table and estimator: scikit-learn's explained variance ratio (top k summed)
    and the defaults' private one, the defaults' distance to scikit-learn's subspace and their
    bound D, the oracle's best quantile, its D and distance, and the ratio defaults/oracle.
    Distances are ``mean (min–max)`` over the seeds.
    """
    lines = ["| table (n × p) | estimator | sklearn EVR | private EVR (defaults) | defaults: "
             "distance | defaults: D | oracle (non-private): quantile | oracle: D | "
             "oracle: distance | defaults / oracle |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for r in rows:
        groups.setdefault((str(r["panel"]), str(r["estimator"])), []).append(r)
    for (table, name), group in groups.items():
        default = [r for r in group if r["bound"] == "defaults"]
        d_err = np.array([float(r["error"]) for r in default])
        evr = np.array([float(r["explained_ratio"]) for r in default])
        d_norm = np.array([float(r["data_norm"]) for r in default])
        best = _oracle([r for r in group if r["bound"] != "defaults"])
        cells = [f"{table} ({default[0]['n']} × {default[0]['p']})", f"`{name}`",
                 f"{float(default[0]['sklearn_ratio']):.3f}",
                 "—" if np.any(np.isnan(evr)) else f"{evr.mean():.3f}",
                 _spread(d_err), "—" if np.any(np.isnan(d_norm)) else f"{d_norm.mean():.4g}"]
        if best is None:
            cells += ["refused", "—", "—", "—"]
        else:
            bound, o_err = best
            o_norm = np.mean([float(r["data_norm"]) for r in group if r["bound"] == bound])
            ratio = ("—" if np.any(np.isnan(d_err))
                     else f"{d_err.mean() / max(o_err.mean(), 1e-12):.2f}")
            cells += [f"{bound[1:]} %", f"{o_norm:.4g}", _spread(o_err), ratio]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _suite_notes(rows: list[dict[str, Any]], k: int, eps: float, quantiles: tuple[float, ...],
                 reduced: dict[str, Any]) -> str:
    skipped = "".join(f" On {t} only {', '.join(m)} ran (time)." for t, m in reduced.items())
    return (
        "## Defaults against the oracle bound\n\n" + suite_table(rows) + "\n\n"
        f"ε = {eps:g}, δ = 1e-5, n_components = {k}; distance = ‖V̂V̂ᵀ − VVᵀ‖_F to "
        "scikit-learn's PCA on the same raw table (max 2), mean (min–max) over the seeds. "
        "**defaults**: centering='private', data_norm='auto' (a private 99 % quantile of the "
        "centred norms); D is the bound it released (mean over seeds). **oracle "
        "(non-private, for comparison only)**: the same estimator and seed with data_norm "
        "fixed at a quantile of the true norms ‖x − μ̂‖, μ̂ the private mean that fit releases "
        f"(still paid from ε); the quantile in {{{', '.join(f'{q:g}' for q in quantiles)}}} % "
        "with the smallest mean distance. Reading the norms to choose D is not private. "
        "EVR = the top-k explained variance ratio, summed. A refusal (too few rows for a "
        "private bound, the private mean's included) is counted as such." + skipped
    )


EXPERIMENTS = (
    Experiment(
        name="real-data",
        paper="privpca (issue 13: PCA that works on people's data)",
        figure="README table: real tables on defaults vs scikit-learn",
        description=(
            "Every private estimator on defaults (private centring and bound) on Covertype's "
            "10 quantitative columns and isolet5, ε ∈ {0.5, 1, 2}, against scikit-learn's "
            "PCA(2); diffprivlib and OpenDP too when peer_python names an interpreter with them."
        ),
        run_fn=run_real_data,
        quick_params=dict(tables=("covtype",), eps_grid=(1.0,), repetitions=1, n_components=2,
                          methods=("analyze-gauss", "noisy-power", "local-gaussian"),
                          peer_python=None, peer_timeout=60.0, peer_repetitions=1),
        full_params=dict(tables=("covtype", "isolet5"), eps_grid=(0.5, 1.0, 2.0),
                         repetitions=3, n_components=2, methods=None, peer_python=None,
                         peer_timeout=300.0, peer_repetitions=1),
    ),
    Experiment(
        name="real-data-suite",
        paper="privpca (issue 28: the most accurate private PCA on real tables)",
        figure="docs/REAL_DATA.md and the README's real-data table: defaults vs oracle bound",
        description=(
            "AnalyzeGauss, ModSuLQ, NoisyPower and Bingham on defaults (ε = 1) on 13 real "
            "tables (Covertype, isolet5, Leukemia, Colon, tables shipped in scikit-learn and "
            "statsmodels) against scikit-learn's PCA(2), each beside its oracle: data_norm "
            "fixed at the best quantile of the true centred norms (non-private)."
        ),
        run_fn=run_real_data_suite,
        quick_params=dict(tables=("covtype", "digits"), methods=("analyze-gauss",),
                          reduced_methods=None, repetitions=1, n_components=2, epsilon=1.0,
                          quantiles=(50.0, 75.0, 90.0, 95.0, 99.0, 100.0)),
        full_params=dict(tables=SUITE_TABLES,
                         methods=("analyze-gauss", "mod-sulq", "noisy-power", "bingham"),
                         reduced_methods=None, repetitions=3, n_components=2, epsilon=1.0,
                         quantiles=(50.0, 75.0, 90.0, 95.0, 99.0, 100.0)),
    ),
)

if __name__ == "__main__":  # pragma: no cover
    sys.exit("Run it with: privpca reproduce real-data")
