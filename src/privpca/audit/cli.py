"""``privpca audit``: audit estimators on their built-in neighbours and print the table."""

from __future__ import annotations

import time
from collections.abc import Iterator

import click

__all__ = ["AUDITED", "audit_command", "audit_table", "format_table", "iter_audit_rows"]

#: The private estimators the table covers (the non-private OjaPCA/SparsePCA are excluded).
AUDITED: tuple[str, ...] = (
    "AnalyzeGaussPCA", "ModSuLQPCA", "NoisyPowerPCA", "DPSPCA", "BinghamPCA",
    "LocalGaussianPCA", "LocalSparsePCA", "PrivateOjaPCA", "DPPCA",
)


def audit_table(methods: list[str], epsilons: list[float], *, delta: float, runs: int,
                setting: str, seed: int | None, progress: bool) -> list[dict[str, object]]:
    """Audit each method at each ε; one row per (method, ε)."""
    return list(iter_audit_rows(methods, epsilons, delta=delta, runs=runs, setting=setting,
                                seed=seed, progress=progress))


def iter_audit_rows(methods: list[str], epsilons: list[float], *, delta: float, runs: int,
                    setting: str, seed: int | None, progress: bool
                    ) -> Iterator[dict[str, object]]:
    """:func:`audit_table`'s rows, one at a time (printed as they come by the CLI)."""
    import privpca
    from privpca.audit import audit

    for name in methods:
        est = getattr(privpca, name)()
        for eps in epsilons:
            start = time.perf_counter()
            try:
                report = audit(est, epsilon=eps, delta=delta, runs=runs, random_state=seed,
                               setting=setting, progress=progress)
            except Exception as exc:  # report and go on: one estimator must not stop the table
                yield {"method": name, "epsilon": eps,
                       "error": f"{type(exc).__name__}: {str(exc)[:120]}"}
                continue
            yield {"method": name, "epsilon": eps, "epsilon_lower": report.epsilon_lower,
                         "power": report.power, "runs": runs, "statistic": report.statistic,
                         "verdict": "VIOLATION" if report.violated else "ok",
                   "seconds": time.perf_counter() - start}


HEADER = ("| method | ε claimed | ε_lower | power | runs | statistic | verdict | seconds |\n"
          "| --- | ---: | ---: | ---: | ---: | --- | --- | ---: |")


def format_row(r: dict[str, object]) -> str:
    """One Markdown table row of :func:`audit_table`."""
    if "error" in r:
        return f"| {r['method']} | {r['epsilon']:g} | – | – | – | {r['error']} | not run | – |"
    return (f"| {r['method']} | {r['epsilon']:g} | {r['epsilon_lower']:.3f} | "
            f"{r['power']:.3f} | {r['runs']} | {r['statistic']} | {r['verdict']} | "
            f"{r['seconds']:.1f} |")


def format_table(rows: list[dict[str, object]]) -> str:
    """A Markdown table of :func:`audit_table` rows."""
    return "\n".join([HEADER, *(format_row(r) for r in rows)])


@click.command("audit")
@click.argument("method", default="all")
@click.option("--epsilon", "epsilons", type=float, multiple=True, default=(1.0,),
              show_default=True, help="Claimed ε; repeat for several.")
@click.option("--delta", type=float, default=1e-5, show_default=True)
@click.option("--runs", type=int, default=10_000, show_default=True,
              help="Runs per neighbouring dataset.")
@click.option("--setting", type=click.Choice(["paper", "release"]), default="paper",
              show_default=True,
              help="paper: centering=None, unit norm bound; release: the estimators' defaults.")
@click.option("--seed", type=int, default=None, help="Seed the runs (a reproducible audit).")
@click.option("--progress/--no-progress", default=True, show_default=True)
def audit_command(method: str, epsilons: tuple[float, ...], delta: float, runs: int,
                  setting: str, seed: int | None, progress: bool) -> None:
    """Audit METHOD (an estimator name, or "all") on its built-in worst-case neighbours.

    Prints, per claimed ε, the ε that the runs prove (95 % Clopper–Pearson) and the power
    (what as many runs prove for a mechanism meeting the claim exactly).
    """
    methods = list(AUDITED) if method == "all" else [method]
    import privpca

    for name in methods:
        if name not in AUDITED or not hasattr(privpca, name):
            raise click.BadParameter(f"unknown method {name!r}; choose from "
                                     f"{', '.join(AUDITED)} or 'all'.", param_hint="METHOD")
    click.echo(HEADER)
    for row in iter_audit_rows(methods, list(epsilons), delta=delta, runs=runs, setting=setting,
                               seed=seed, progress=progress):
        click.echo(format_row(row))
