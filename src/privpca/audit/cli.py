"""``privpca audit``: audit estimators on their built-in neighbours and print the tables.

Three parts, one family:

* the **threshold audit** of each estimator at each claimed ε (default mode, seeded by
  ``--seed``), one row per (method, ε);
* the **floating-point probe** (:mod:`privpca.audit.probe`) of each estimator in both
  modes — default (PCG64; it reads the threshold audit's fits) and secure (fresh fits in
  ``config_context(secure_mode=True)``) — and, for ``all`` or ``mechanisms``, of the noise
  mechanisms themselves (:data:`MECHANISMS`) in both modes, plus a *control* (a leaky float
  sampler, ``value + σ·2^-30·K``) that the probe must detect and that is not part of the family;
* with ``--lattice``, the **lattice probe** (:func:`~privpca.audit.lattice_probe`) of each
  estimator in both modes (cells of the family: does a release proportional to a short
  integer vector tell the neighbours apart?) and the **generator lattice probe**
  (:func:`~privpca.audit.generator_lattice_probe`) of the generator an unseeded fit draws
  from in each mode, with a control (a lattice ``standard_normal``, ``2^-30·K``) that it
  must flag; the generator rows are checks, not cells of the family (no ε claim);
* the **family-wise** reading: every cell's bound at the per-cell level ``confidence`` and at
  the Bonferroni level ``1 − (1 − confidence)/m`` over the ``m`` cells planned, and Holm's
  decisions on the cells' p-values (:mod:`privpca.audit.family`).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import click
import numpy as np

from privpca._config import config_context
from privpca._registry import PRIVATE_ESTIMATORS
from privpca.audit import (
    audit,
    audit_with_probe,
    float_probe,
    generator_lattice_probe,
    lattice_probe,
)
from privpca.audit.family import bonferroni_confidence, family_wise
from privpca.mechanisms import GaussianMechanism, analytic_gaussian_sigma
from privpca.mechanisms.noise import laplace_release
from privpca.mechanisms.secure_noise import discrete_gaussian

__all__ = ["LATTICE_CONTROL", "MECHANISMS", "Issue35Generator", "Levels",
           "audit_command", "audit_table", "format_row", "format_table", "iter_audit_rows",
           "plan_cells", "summary"]


def audited() -> dict[str, type]:
    """Class name → class of the estimators the table covers: every registered one, read when
    asked (the registry lists no non-private estimator)."""
    return {cls.__name__: cls for cls in PRIVATE_ESTIMATORS.values()}


#: The noise mechanisms the probe also runs directly (f(D) = 0 against f(D') = 1, the
#: sensitivity; the exact values are given to the probe, as an adversary knows them).
MECHANISMS: tuple[str, ...] = ("GaussianMechanism", "Laplace")
MODES: tuple[str, ...] = ("default", "secure")
#: The control: a leaky float sampler, ``f + σ·2^-30·K`` computed in float64 (must be detected).
CONTROL = "f + σ·2^-30·K"
#: The noise mechanisms' probes run ``max(MECHANISM_RUNS, MECHANISM_RUNS_FACTOR·probe_runs)``
#: times per dataset (a run costs microseconds).
MECHANISM_RUNS = 2000
MECHANISM_RUNS_FACTOR = 20
#: The lattice control: a ``standard_normal`` on a lattice (must be flagged by the generator probe).
LATTICE_CONTROL = "standard_normal = 2^-30·K"
#: Row kinds that are cells of the family (the others are controls and generator checks).
FAMILY_KINDS: tuple[str, ...] = ("audit", "probe", "lattice")


class Issue35Generator(np.random.Generator):
    """PCG64 whose ``standard_normal`` is on a lattice: ``2^-30·K``, ``K`` an integer (the
    generator probe's control; never used for a release)."""

    def standard_normal(self, size: Any = None, dtype: Any = np.float64,
                        out: Any = None) -> Any:
        z = np.ldexp(np.rint(np.ldexp(super().standard_normal(size), 30)), -30)
        return float(z) if size is None else z


@dataclass(frozen=True)
class Levels:
    """The family's levels: ``confidence`` per cell and family-wise over ``cells`` cells,
    ``cell_confidence = 1 − (1 − confidence)/cells`` (Bonferroni)."""

    confidence: float
    cells: int

    @property
    def cell_confidence(self) -> float:

        return bonferroni_confidence(self.confidence, max(self.cells, 1))


def plan_cells(methods: list[str], epsilons: list[float], *, probe: bool,
               mechanisms: bool, lattice: bool = False) -> int:
    """The number of cells of the family (controls and generator checks excluded): per
    (method, ε) one threshold audit, with ``probe`` two float probes and with ``lattice``
    two lattice probes; with ``mechanisms`` (and ``probe``) two probes per (noise mechanism,
    ε)."""
    per_method = 1 + (len(MODES) if probe else 0) + (len(MODES) if lattice else 0)
    cells = len(methods) * len(epsilons) * per_method
    if probe and mechanisms:
        cells += len(MECHANISMS) * len(epsilons) * len(MODES)
    return cells


def audit_table(methods: list[str], epsilons: list[float], *, delta: float, runs: int,
                setting: str, seed: int | None, progress: bool, probe: bool = False,
                probe_runs: int | None = None, mechanisms: bool = False,
                confidence: float = 0.95, lattice: bool = False) -> list[dict[str, Any]]:
    """Every row of :func:`iter_audit_rows`, as a list."""
    return list(iter_audit_rows(methods, epsilons, delta=delta, runs=runs, setting=setting,
                                seed=seed, progress=progress, probe=probe,
                                probe_runs=probe_runs, mechanisms=mechanisms,
                                confidence=confidence, lattice=lattice))


def _error(kind: str, name: str, eps: float, exc: Exception, mode: str = "default"
           ) -> dict[str, Any]:
    return {"kind": kind, "method": name, "mode": mode, "epsilon": eps,
            "error": f"{type(exc).__name__}: {str(exc)[:120]}"}


def iter_audit_rows(methods: list[str], epsilons: list[float], *, delta: float, runs: int,
                    setting: str, seed: int | None, progress: bool, probe: bool = False,
                    probe_runs: int | None = None, mechanisms: bool = False,
                    confidence: float = 0.95, lattice: bool = False
                    ) -> Iterator[dict[str, Any]]:
    """The rows, one at a time (printed as they come by the CLI).

    Each row is a dict with ``kind`` (``"audit"``, ``"probe"``, ``"lattice"``, ``"control"``,
    ``"generator"`` or ``"generator-control"``), ``method``, ``mode``, ``epsilon``, ``runs``,
    ``seconds`` and ``report`` (an :class:`~privpca.audit.AuditReport`,
    :class:`~privpca.audit.FloatProbeReport`, :class:`~privpca.audit.LatticeProbeReport` or
    :class:`~privpca.audit.GeneratorLatticeReport`), or ``error`` when the cell could not run
    (it still counts in the family).
    """
    p_runs = runs if probe_runs is None else int(probe_runs)
    for name in methods:
        for eps in epsilons:
            est = audited()[name]()
            start = time.perf_counter()
            try:
                if probe:
                    report, prb = audit_with_probe(est, epsilon=eps, delta=delta, runs=runs,
                                                   random_state=seed, setting=setting,
                                                   confidence=confidence, progress=progress)
                else:
                    report = audit(est, epsilon=eps, delta=delta, runs=runs,
                                   random_state=seed, setting=setting, confidence=confidence,
                                   progress=progress)
            except Exception as exc:  # report and go on: one estimator must not stop the table
                yield _error("audit", name, eps, exc)
                if probe:
                    yield _error("probe", name, eps, exc)
            else:
                seconds = time.perf_counter() - start
                yield {"kind": "audit", "method": name, "mode": "default", "epsilon": eps,
                       "report": report, "runs": runs, "seconds": seconds,
                       "epsilon_lower": report.epsilon_lower, "power": report.power,
                       "statistic": report.statistic}
                if probe:
                    yield {"kind": "probe", "method": name, "mode": "default", "epsilon": eps,
                           "report": prb, "runs": runs, "seconds": None}
            if probe:
                start = time.perf_counter()
                try:
                    with config_context(secure_mode=True):
                        prb = float_probe(est, epsilon=eps, delta=delta, runs=p_runs,
                                          setting=setting, confidence=confidence,
                                          progress=progress)
                except Exception as exc:
                    yield _error("probe", name, eps, exc, mode="secure")
                else:
                    yield {"kind": "probe", "method": name, "mode": "secure", "epsilon": eps,
                           "report": prb, "runs": p_runs,
                           "seconds": time.perf_counter() - start}
            if lattice:
                yield from _lattice_rows(est, name, eps, delta=delta, runs=p_runs,
                                         setting=setting, seed=seed, confidence=confidence,
                                         progress=progress)
    if lattice:
        yield from _generator_rows(seed)
    if probe and mechanisms:
        yield from _mechanism_rows(epsilons, delta=delta,
                                   runs=max(MECHANISM_RUNS, MECHANISM_RUNS_FACTOR * p_runs),
                                   seed=seed, confidence=confidence)


def _lattice_rows(est: Any, name: str, eps: float, *, delta: float, runs: int, setting: str,
                  seed: int | None, confidence: float, progress: bool
                  ) -> Iterator[dict[str, Any]]:
    """The lattice probe of one (estimator, ε) in both modes (fresh fits each: the probe runs
    on the built-in neighbours lifted to more features, see
    :func:`~privpca.audit.probe.lattice_neighbours`)."""
    import privpca

    for mode in MODES:
        start = time.perf_counter()
        try:
            with privpca.config_context(secure_mode=True if mode == "secure" else None):
                r = lattice_probe(est, epsilon=eps, delta=delta, runs=runs, setting=setting,
                                  random_state=seed if mode == "default" else None,
                                  confidence=confidence, progress=progress)
        except Exception as exc:  # report and go on, as the other cells do
            yield _error("lattice", name, eps, exc, mode=mode)
            continue
        yield {"kind": "lattice", "method": name, "mode": mode, "epsilon": eps, "report": r,
               "runs": runs, "seconds": time.perf_counter() - start}


def _generator_rows(seed: int | None) -> Iterator[dict[str, Any]]:
    """The generator lattice probe: the generator a fit draws from in each mode (default:
    the seeded stream of ``--seed``, else an unseeded fit's), and the control."""
    import warnings

    import privpca
    from privpca.mechanisms.randomness import check_random_state

    jobs: list[tuple[str, str, str]] = [("generator", mode, "generator") for mode in MODES]
    jobs.append(("generator-control", "default", LATTICE_CONTROL))
    for kind, mode, label in jobs:
        start = time.perf_counter()
        try:
            with privpca.config_context(secure_mode=True if mode == "secure" else None):
                if kind == "generator-control":
                    rng: Any = Issue35Generator(np.random.PCG64(seed))
                elif mode == "default" and seed is not None:
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore")
                        rng = check_random_state(seed)
                else:
                    rng = None
                r = generator_lattice_probe(rng)
        except Exception as exc:
            yield _error(kind, label, math.nan, exc, mode=mode)
            continue
        yield {"kind": kind, "method": label if kind == "generator-control" else r.generator,
               "mode": mode, "epsilon": math.nan, "report": r, "runs": r.draws,
               "seconds": time.perf_counter() - start}


def _mechanism(name: str, epsilon: float, delta: float
               ) -> tuple[Callable[..., Any], dict[str, float], float, str]:
    """(release(X, rng), {label: noise scale}, δ of the claim, its name in the table) for a
    noise mechanism at claimed ε, sensitivity 1."""
    if name == "GaussianMechanism":

        gm = GaussianMechanism(epsilon, delta, 1.0)

        def gaussian(X: Any, rng: Any) -> Any:
            return gm.randomise(np.asarray(X, dtype=np.float64), rng)

        return gaussian, {f"σ={gm.sigma:.6g}": gm.sigma}, delta, "GaussianMechanism.randomise"
    if name == "Laplace":
        scale = 1.0 / epsilon

        # The library's Laplace release (snapped, exact discrete noise in secure mode); a
        # generator's own ``laplace(loc, b)`` is a continuous sampler that no release uses.
        def laplace(X: Any, rng: Any) -> Any:
            return laplace_release(np.asarray(X, dtype=np.float64), scale, rng,
                                   sensitivity=1.0)

        return laplace, {f"b={scale:.6g}": scale}, 0.0, "laplace_release(f, 1/ε)"
    if name == CONTROL:

        sigma = analytic_gaussian_sigma(epsilon, delta, 1.0)

        def leaky(X: Any, rng: Any) -> Any:
            k = discrete_gaussian(rng, 2.0 ** 30, np.shape(X))
            return np.asarray(X, dtype=np.float64) + sigma * np.ldexp(k.astype(np.float64), -30)

        return leaky, {f"σ={sigma:.6g}": sigma}, delta, CONTROL
    raise ValueError(f"unknown mechanism {name!r}")


def _mechanism_rows(epsilons: list[float], *, delta: float, runs: int, seed: int | None,
                    confidence: float) -> Iterator[dict[str, Any]]:
    import privpca

    X0, X1 = np.array([0.0]), np.array([1.0])
    jobs = [(m, mode, "probe") for m in MECHANISMS for mode in MODES]
    jobs.append((CONTROL, "secure", "control"))
    for name, mode, kind in jobs:
        for eps in epsilons:
            start = time.perf_counter()
            try:
                fn, scales, dlt, _ = _mechanism(name, eps, delta)
                with privpca.config_context(secure_mode=mode == "secure"):
                    r = float_probe(fn, X0, X1, epsilon=eps, delta=dlt, runs=runs,
                                    values=(X0, X1), scales=scales,
                                    random_state=seed if mode == "default" else None,
                                    confidence=confidence)
            except Exception as exc:
                yield _error(kind, name, eps, exc, mode=mode)
                continue
            yield {"kind": kind, "method": name, "mode": mode, "epsilon": eps, "report": r,
                   "runs": runs, "seconds": time.perf_counter() - start}


# --------------------------------------------------------------------------- formatting


def _pct(level: float) -> str:
    return f"{100 * level:.4g} %"


def audit_header(levels: Levels) -> str:
    return (f"| method | ε claimed | ε_lower ({_pct(levels.confidence)}) | ε_lower FW "
            f"({_pct(levels.cell_confidence)}) | p | power | runs | statistic | verdict | "
            "seconds |\n"
            "| --- | ---: | ---: | ---: | ---: | ---: | ---: | --- | --- | ---: |")


def probe_header(levels: Levels) -> str:
    return (f"| mechanism | mode | ε claimed | ε_lower ({_pct(levels.confidence)}) | ε_lower "
            f"FW ({_pct(levels.cell_confidence)}) | p | accuracy | best grid | statistic | "
            "runs | verdict | seconds |\n"
            "| --- | --- | ---: | ---: | ---: | ---: | ---: | --- | --- | ---: | --- | ---: |")


def lattice_header(levels: Levels) -> str:
    return (f"| method | mode | ε claimed | ε_lower ({_pct(levels.confidence)}) | ε_lower "
            f"FW ({_pct(levels.cell_confidence)}) | p | accuracy | statistic | on a lattice "
            "(D, D') | lowest score (D, D') | runs | verdict | seconds |\n"
            "| --- | --- | ---: | ---: | ---: | ---: | ---: | --- | --- | --- | ---: | --- | "
            "---: |")


GENERATOR_HEADER = ("| generator | mode | methods flagged (share of vectors on a lattice, "
                    "median score) | vectors per method | verdict | seconds |\n"
                    "| --- | --- | --- | ---: | --- | ---: |")



def _verdict(r: dict[str, Any], levels: Levels) -> str:
    report = r["report"]
    if r["kind"] in ("control", "generator-control"):
        return "detected (expected)" if report.violated else "MISSED (probe too weak)"
    if r["kind"] == "generator":
        return "LATTICE: " + ", ".join(report.flagged) if report.violated else "ok"
    if report.epsilon_lower_at(levels.cell_confidence) > report.epsilon:
        return "VIOLATION"
    if report.violated:
        return "above claim per cell only"
    return "ok"


def format_row(r: dict[str, Any], levels: Levels | None = None) -> str:
    """One Markdown table row (the threshold audit's or the probe's table, by ``kind``)."""
    levels = Levels(0.95, 1) if levels is None else levels
    control = r["kind"] in ("control", "generator-control")
    name = r["method"] + (" (control)" if control else "")
    if r["kind"] in ("generator", "generator-control"):
        if "error" in r:
            return f"| {name} | {r['mode']} | {r['error']} | – | not run | – |"
        g = r["report"]
        shown = "; ".join(f"{m} {f:.2f} ({sc:+.1f})" for m, f, sc in g.methods
                          if f > 0.0 or m in g.flagged) or "none"
        return (f"| {name} | {r['mode']} | {shown} | {g.draws} | {_verdict(r, levels)} | "
                f"{r['seconds']:.1f} |")
    if r["kind"] == "lattice":
        if "error" in r:
            return (f"| {name} | {r['mode']} | {r['epsilon']:g} | – | – | – | – | "
                    f"{r['error']} | – | – | – | not run | – |")
        lp = r["report"]
        chosen = lp.statistic if lp.selection_epsilon > 0.0 else "none found"
        return (f"| {name} | {r['mode']} | {r['epsilon']:g} | {lp.epsilon_lower:.3f} | "
                f"{lp.epsilon_lower_at(levels.cell_confidence):.3f} | {lp.p_value:.2g} | "
                f"{lp.accuracy:.3f} | {chosen} | {lp.on_lattice[0]:.2f}, "
                f"{lp.on_lattice[1]:.2f} | {lp.lowest_score[0]:+.1f}, "
                f"{lp.lowest_score[1]:+.1f} | {r['runs']} | {_verdict(r, levels)} | "
                f"{r['seconds']:.1f} |")
    if r["kind"] == "audit":
        if "error" in r:
            return (f"| {name} | {r['epsilon']:g} | – | – | – | – | – | {r['error']} | "
                    "not run | – |")
        a = r["report"]
        return (f"| {name} | {r['epsilon']:g} | {a.epsilon_lower:.3f} | "
                f"{a.epsilon_lower_at(levels.cell_confidence):.3f} | {a.p_value:.2g} | "
                f"{a.power:.3f} | {r['runs']} | {a.statistic} | {_verdict(r, levels)} | "
                f"{r['seconds']:.1f} |")
    if "error" in r:
        return (f"| {name} | {r['mode']} | {r['epsilon']:g} | – | – | – | – | – | "
                f"{r['error']} | – | not run | – |")
    p = r["report"]
    found = p.grid_label != "none" and p.selection_epsilon > 0.0
    grid = f"{p.grid_label} ({p.grid:.3g})" if found else "none found"
    statistic = p.statistic if found else "–"
    seconds = "(audit's fits)" if r["seconds"] is None else f"{r['seconds']:.1f}"
    return (f"| {name} | {r['mode']} | {r['epsilon']:g} | {p.epsilon_lower:.3f} | "
            f"{p.epsilon_lower_at(levels.cell_confidence):.3f} | {p.p_value:.2g} | "
            f"{p.accuracy:.3f} | {grid} | {statistic} | {r['runs']} | {_verdict(r, levels)} | "
            f"{seconds} |")


def preamble(levels: Levels) -> str:
    """What the levels mean (printed above the tables)."""
    return (f"Family: {levels.cells} cells (controls excluded). Each cell's ε_lower holds with "
            f"probability ≥ {_pct(levels.confidence)} for that cell; ε_lower FW is the same "
            f"test at the Bonferroni level 1 − {1 - levels.confidence:.3g}/{levels.cells} = "
            f"{_pct(levels.cell_confidence)}, so that with probability ≥ "
            f"{_pct(levels.confidence)} no cell's ε_lower FW exceeds its mechanism's true ε "
            "(verdict VIOLATION: ε_lower FW above the claim). p: the cell's p-value of its "
            "claim (Holm below).")


def summary(rows: list[dict[str, Any]], levels: Levels) -> str:
    """The family-wise reading of every non-control row (Bonferroni and Holm)."""

    cells = [r for r in rows if r["kind"] in FAMILY_KINDS and "error" not in r]
    not_run = sum(1 for r in rows if r["kind"] in FAMILY_KINDS and "error" in r)
    fw = family_wise([r["report"] for r in cells], levels.confidence, cells=levels.cells)

    def label(r: dict[str, Any]) -> str:
        what = ("threshold audit" if r["kind"] == "audit"
                else f"{'lattice' if r['kind'] == 'lattice' else 'float'} probe, "
                f"{r['mode']} mode")
        return f"{r['method']} ({what}, ε={r['epsilon']:g})"

    lines = [f"Family-wise at {_pct(levels.confidence)} over {levels.cells} cells "
             f"({len(cells)} run, {not_run} not run; per-cell Bonferroni level "
             f"{_pct(levels.cell_confidence)}):"]
    bad = [label(r) for r, v in zip(cells, fw.bonferroni_violations, strict=True) if v]
    lines.append("- Bonferroni: " + ("no cell's ε_lower FW exceeds its claimed ε."
                                     if not bad else "ε_lower FW above the claim: "
                                     + "; ".join(bad) + "."))
    rej = [f"{label(r)} (p={p:.2g}, Holm p={h:.2g})"
           for r, p, h, v in zip(cells, fw.p_values, fw.holm, fw.holm_rejected, strict=True)
           if v]
    lines.append(f"- Holm (family-wise error {1 - levels.confidence:.3g}): "
                 + ("no claim rejected." if not rej else "claims rejected: " + "; ".join(rej)
                    + "."))
    gens = [r for r in rows if r["kind"] == "generator"]
    if gens:
        flagged = [f"{r['method']} ({r['mode']} mode): {', '.join(r['report'].flagged)}"
                   for r in gens if "error" not in r and r["report"].violated]
        failed = sum(1 for r in gens if "error" in r)
        lines.append("- Generators (not in the family): " + (
            "draws on a lattice: " + "; ".join(flagged) + "." if flagged else
            "no continuous draw on a lattice.") + (f" {failed} not run." if failed else ""))
    controls = [r for r in rows if r["kind"] in ("control", "generator-control")]
    if controls:
        ok = sum(1 for r in controls if "error" not in r and r["report"].violated)
        lines.append(f"- Controls (not in the family): {ok} of {len(controls)} detected.")
    return "\n".join(lines)


def format_table(rows: list[dict[str, Any]], levels: Levels | None = None) -> str:
    """The threshold-audit table, the float-probe table (if any) and the summary."""
    if levels is None:
        levels = Levels(0.95, max(sum(1 for r in rows if r["kind"] in FAMILY_KINDS), 1))
    audits = [r for r in rows if r["kind"] == "audit"]
    probes = [r for r in rows if r["kind"] in ("probe", "control")]
    lattices = [r for r in rows if r["kind"] == "lattice"]
    gens = [r for r in rows if r["kind"] in ("generator", "generator-control")]
    out = [preamble(levels), "", audit_header(levels),
           *(format_row(r, levels) for r in audits)]
    if probes:
        out += ["", "Float probe:", "", probe_header(levels),
                *(format_row(r, levels) for r in probes)]
    if lattices:
        out += ["", "Lattice probe:", "", lattice_header(levels),
                *(format_row(r, levels) for r in lattices)]
    if gens:
        out += ["", "Generator lattice probe:", "", GENERATOR_HEADER,
                *(format_row(r, levels) for r in gens)]
    out += ["", summary(rows, levels)]
    return "\n".join(out)


@click.command("audit")
@click.argument("method", default="all")
@click.option("--epsilon", "epsilons", type=float, multiple=True, default=(1.0,),
              show_default=True, help="Claimed ε; repeat for several.")
@click.option("--delta", type=float, default=1e-5, show_default=True)
@click.option("--runs", type=int, default=60, show_default=True,
              help="Runs per neighbouring dataset of the threshold audit (default mode). "
                   "The default is a quick check; proving ε ≈ 1 takes about 10^5.")
@click.option("--probe-runs", type=int, default=60, show_default=True,
              help="Secure-mode runs per dataset of each estimator's float probe (the "
                   "default-mode probe reads the threshold audit's runs); the noise "
                   f"mechanisms' probes run max({MECHANISM_RUNS}, {MECHANISM_RUNS_FACTOR}x) "
                   "as many. 60 runs prove ε > 1.6 against a leak at the family-wise level "
                   "of 'all'; claims above that need more.")
@click.option("--probe/--no-probe", default=True, show_default=True,
              help="Run the floating-point probe (both modes).")
@click.option("--lattice/--no-lattice", default=False, show_default=True,
              help="Also run the lattice probe (both modes, --probe-runs runs per dataset, "
                   "on the built-in neighbours lifted to 6 features) and the generator "
                   "lattice probe with its control (a lattice standard_normal).")
@click.option("--confidence", type=float, default=0.95, show_default=True,
              help="Per-cell confidence, and the family-wise confidence of the Bonferroni "
                   "columns and Holm's decisions.")
@click.option("--setting", type=click.Choice(["paper", "release"]), default="paper",
              show_default=True,
              help="paper: centering=None, unit norm bound; release: the estimators' defaults.")
@click.option("--seed", type=int, default=None,
              help="Seed the default-mode runs (a reproducible audit; secure mode never is).")
@click.option("--progress/--no-progress", default=True, show_default=True)
def audit_command(method: str, epsilons: tuple[float, ...], delta: float, runs: int,
                  probe_runs: int, probe: bool, lattice: bool, confidence: float,
                  setting: str, seed: int | None, progress: bool) -> None:
    """Audit METHOD (an estimator's class or --method name, "all", or "mechanisms": the noise
    mechanisms' float probes only) on its built-in worst-case neighbours.

    Prints the threshold audit (per claimed ε: the ε its runs prove at the per-cell and at the
    Bonferroni family-wise level, and the power), the floating-point probe in default and
    secure mode (the best grid, the attack's accuracy, the ε it proves), with --lattice the
    lattice probe and the generator lattice probe, and the family-wise summary (Bonferroni
    and Holm over every cell).
    """
    if method == "mechanisms":
        methods: list[str] = []
        probe = True
    elif method == "all":
        methods = list(audited())
    else:  # a class name, or the CLI name `privpca fit --method` takes
        cls = PRIVATE_ESTIMATORS.get(method)
        methods = [method if cls is None else cls.__name__]
    for name in methods:
        if name not in audited():
            raise click.BadParameter(f"unknown method {name!r}; choose from "
                                     f"{', '.join(audited())} (or their `privpca fit --method` "
                                     "names), 'all' or 'mechanisms'.", param_hint="METHOD")
    if not 0.0 < confidence < 1.0:
        raise click.BadParameter("must be in (0, 1).", param_hint="--confidence")
    mechanisms = method in ("all", "mechanisms")
    levels = Levels(confidence, max(plan_cells(methods, list(epsilons), probe=probe,
                                               mechanisms=mechanisms, lattice=lattice), 1))
    click.echo(preamble(levels))
    rows: list[dict[str, Any]] = []
    probes: list[str] = []
    lattices: list[str] = []
    gens: list[str] = []
    if methods:
        click.echo("")
        click.echo(audit_header(levels))
    for row in iter_audit_rows(methods, list(epsilons), delta=delta, runs=runs,
                               setting=setting, seed=seed, progress=progress, probe=probe,
                               probe_runs=probe_runs, mechanisms=mechanisms,
                               confidence=confidence, lattice=lattice):
        rows.append(row)
        if row["kind"] == "audit":
            click.echo(format_row(row, levels))
        elif row["kind"] == "lattice":
            lattices.append(format_row(row, levels))
        elif row["kind"] in ("generator", "generator-control"):
            gens.append(format_row(row, levels))
        else:
            probes.append(format_row(row, levels))
    if probes:
        click.echo("")
        click.echo("Float probe:")
        click.echo("")
        click.echo(probe_header(levels))
        for line in probes:
            click.echo(line)
    for title, header, lines in (("Lattice probe:", lattice_header(levels), lattices),
                                 ("Generator lattice probe:", GENERATOR_HEADER, gens)):
        if lines:
            click.echo("")
            click.echo(title)
            click.echo("")
            click.echo(header)
            for line in lines:
                click.echo(line)
    click.echo("")
    click.echo(summary(rows, levels))
