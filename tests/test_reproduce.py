"""``privpca reproduce``: every registered experiment in quick mode, the registry, the CLI."""

from __future__ import annotations

import csv
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner

from privpca.cli import main
from privpca.experiments import registry
from privpca.experiments.context import RunContext
from privpca.experiments.registry import get_experiment, list_experiments, register
from privpca.experiments.runner import run_experiment
from privpca.experiments.spec import Experiment, ExperimentResult, Panel

NAMES = [e.name for e in list_experiments()]
# Quick runs that take over ~20 s (a single ADMM iteration at Leukemia's p = 7129 costs 25-45 s).
SLOW = {"wangxu-tables-leukemia"}
QUICK_CASES = [pytest.param(n, marks=pytest.mark.slow) if n in SLOW else n for n in NAMES]
REQUIRED_COLUMNS = {"experiment", "panel", "method", "repetition", "seed", "error", "seconds"}
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _read_csv(path: Path) -> list[dict[str, str]]:
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


def test_builtin_experiments_are_registered() -> None:
    assert {
        "wangxu-fig3",
        "wangxu-real-lowdim",
        "wangxu-fig4",
        "wangxu-tables",
        "wangxu-tables-leukemia",
        "ge-table1",
        "ge-fig4",
        "ge-fig3",
        "liu-rate",
        "liu-example41",
        "liu-fig1",
    } <= set(NAMES)


def test_list_shows_every_experiment() -> None:
    result = CliRunner().invoke(main, ["reproduce", "--list"])
    assert result.exit_code == 0, result.output
    for exp in list_experiments():
        assert exp.name in result.output
        assert exp.figure in result.output


@pytest.mark.parametrize("name", QUICK_CASES)
def test_quick_run_writes_csv_png_and_summary(name: str, tmp_path: Path) -> None:
    result = CliRunner().invoke(
        main, ["reproduce", name, "--quick", "--no-progress", "--seed", "3", "-o", str(tmp_path)]
    )
    assert result.exit_code == 0, result.output
    exp = get_experiment(name)
    rows = _read_csv(tmp_path / f"{name}.csv")
    assert rows, "no runs written"
    assert REQUIRED_COLUMNS <= set(rows[0])
    errors = np.array([float(r["error"]) for r in rows])
    assert np.all(np.isfinite(errors)) and np.all(errors >= 0)
    # every subspace metric is bounded by its maximum (√(2k) for Wang & Xu's, √k for sin Θ,
    # 1 for Liu et al.'s sin∠); liu-fig1's ratio of norms is not a subspace metric
    if "sin" in exp.metric or "V̂V̂ᵀ" in exp.metric:
        ks = np.array([float(r["k"]) for r in rows])
        assert np.all(errors <= np.sqrt(2 * ks) + 1e-9)
    assert all(float(r["seconds"]) >= 0 for r in rows)
    assert {r["experiment"] for r in rows} == {name}
    assert {r["method"] for r in rows} >= set(exp.quick_params.get("methods") or ())
    seeds = {int(r["seed"]) for r in rows}
    assert all(0 <= s < 2**32 for s in seeds)

    png = (tmp_path / f"{name}.png").read_bytes()
    assert png.startswith(PNG_MAGIC) and len(png) > 10_000

    md = (tmp_path / f"{name}.md").read_text()
    assert f"privpca reproduce {name} --quick --seed 3" in md
    assert f"runs (CSV rows): {len(rows)}" in md
    assert "elapsed:" in md and "base seed: 3" in md and "mean ± standard error" in md
    panels = {r["panel"] for r in rows}
    assert panels == {p for p in panels if f"| {p}" not in md}  # panels are titled, not raw
    assert f"{name}.csv" in result.output


def test_fig3_rows_and_signal_below_noise(tmp_path: Path) -> None:
    out = run_experiment("wangxu-fig3", quick=True, output_dir=tmp_path, progress=False)
    p = out.params
    settings = len(p["ks"]) * (len(p["n_grid"]) + len(p["eps_grid"])) + sum(
        1 for k in p["ks"] for q in p["p_grid"] if q > k
    )
    assert len(out.result.rows) == p["repetitions"] * settings * len(p["methods"])
    assert len(_read_csv(out.csv_path)) == len(out.result.rows)
    by = {m: [r["error"] for r in out.result.rows if r["method"] == m] for m in p["methods"]}
    # Wang & Xu's model at these sizes: the sample alone pins the subspace down, the
    # local-DP noise does not (the eigengap 1/(5p(λ+1)) is far below the noise).
    assert max(by["non-private-pca"]) < 0.5
    assert min(by["local-gaussian"]) > 2.0


def test_ge_fig4_row_count_and_metric(tmp_path: Path) -> None:
    out = run_experiment("ge-fig4", quick=True, output_dir=tmp_path, progress=False)
    p = out.params
    n_methods = len({r["method"] for r in out.result.rows})
    expected = (
        p["repetitions"] * n_methods * (len(p["panel_a"]["eps_grid"]) + len(p["panel_b"]["dims"]))
    )
    assert len(out.result.rows) == expected
    for r in out.result.rows:
        assert r["error"] <= math.sqrt(r["k"]) + 1e-9
        assert r["proj_distance"] == pytest.approx(math.sqrt(2) * r["error"], abs=1e-9)


def test_same_seed_same_numbers_other_seed_other_numbers(tmp_path: Path) -> None:
    kw: dict[str, Any] = dict(quick=True, progress=False)
    a = run_experiment("wangxu-fig4", seed=5, output_dir=tmp_path / "a", **kw)
    b = run_experiment("wangxu-fig4", seed=5, output_dir=tmp_path / "b", **kw)
    c = run_experiment("wangxu-fig4", seed=6, output_dir=tmp_path / "c", **kw)
    err = [[r["error"] for r in o.result.rows] for o in (a, b, c)]
    assert err[0] == err[1]
    assert err[0] != err[2]
    assert [r["seed"] for r in a.result.rows] == [r["seed"] for r in b.result.rows]


def test_overrides_and_unknown_parameters(tmp_path: Path) -> None:
    out = run_experiment(
        "ge-table1", quick=True, output_dir=tmp_path, progress=False, dims=(30,), methods=["ppca"]
    )
    assert {(r["d"], r["method"]) for r in out.result.rows} == {(30, "ppca")}
    assert "dims=(30,)" in out.md_path.read_text()
    with pytest.raises(ValueError, match="Unknown parameters"):
        run_experiment("ge-table1", quick=True, output_dir=tmp_path, no_such=1)
    with pytest.raises(ValueError, match="Unknown methods"):
        run_experiment("ge-table1", quick=True, output_dir=tmp_path, methods=["no-such-method"])
    # DPS-PCA is one of privpca.experiments.ge_dpspca's COMPARISON_METHODS
    out = run_experiment(
        "ge-table1", quick=True, output_dir=tmp_path, progress=False, dims=(30,),
        methods=["dps-pca"],
    )
    assert {r["method"] for r in out.result.rows} == {"dps-pca"}


@pytest.mark.parametrize("param, says", [("bogus=1", "Unknown parameters"),
                                         ("repetitions=abc", "takes a number there")])
def test_a_bad_param_is_a_usage_error_before_anything_runs(param, says, tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["reproduce", "wangxu-fig3", "--quick", "-p", param,
                                       "-o", str(tmp_path)])
    assert result.exit_code == 2 and says in result.output
    assert not list(tmp_path.iterdir())  # nothing ran


def _toy(params: dict[str, Any], ctx: RunContext) -> ExperimentResult:
    ctx.start(params["repetitions"])
    rows = []
    for rep in range(params["repetitions"]):
        seed = ctx.run_seed(rep)
        rows.append(
            dict(panel="a", method="toy", x=1.0, k=1, repetition=rep, seed=seed,
                 error=float(np.random.default_rng(seed).random()), seconds=0.0)
        )  # fmt: skip
        ctx.advance()
    return ExperimentResult(rows, [Panel("a", "toy", x="x", xlabel="x")])


def test_register_requires_and_duplicates(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(registry, "_REGISTRY", dict(registry._REGISTRY))
    toy = Experiment(
        name="toy",
        paper="nobody",
        figure="Fig. 0",
        description="a toy",
        run_fn=_toy,
        quick_params={"repetitions": 2},
        full_params={"repetitions": 3},
    )
    register(toy)
    with pytest.raises(ValueError, match="already registered"):
        register(toy)
    out = run_experiment("toy", output_dir=tmp_path, progress=False)
    assert len(out.result.rows) == 3
    blocked = Experiment(
        name="needs-dpspca-missing",
        paper="nobody",
        figure="Fig. 0",
        description="needs a class that does not exist",
        run_fn=_toy,
        quick_params={"repetitions": 1},
        full_params={"repetitions": 1},
        requires=("privpca:NoSuchEstimator",),
    )
    register(blocked)
    assert blocked.missing_requirements() == ["privpca:NoSuchEstimator"]
    listing = CliRunner().invoke(main, ["reproduce", "--list"])
    assert "needs-dpspca-missing  [unavailable: needs privpca:NoSuchEstimator]" in listing.output
    with pytest.raises(RuntimeError, match="NoSuchEstimator"):
        run_experiment("needs-dpspca-missing", output_dir=tmp_path, progress=False)
    res = CliRunner().invoke(main, ["reproduce", "needs-dpspca-missing", "-o", str(tmp_path)])
    assert res.exit_code != 0 and "NoSuchEstimator" in res.output
    with pytest.raises(ValueError, match="same keys"):
        register(
            Experiment("bad", "p", "f", "d", _toy, {"repetitions": 1}, {"reps": 1}),
        )


def test_cli_usage_errors(tmp_path: Path) -> None:
    res = CliRunner().invoke(main, ["reproduce"])
    assert res.exit_code == 2 and "--list" in res.output
    res = CliRunner().invoke(main, ["reproduce", "no-such-figure", "-o", str(tmp_path)])
    assert res.exit_code == 2 and "No experiment named" in res.output


def test_sparse_truth_is_sparsepca_with_random_starts() -> None:
    from privpca import PrivacyLedger, SparsePCA
    from privpca.datasets import load_isolet5
    from privpca.experiments.wang_xu_tables import sparse_truth
    from privpca.metrics import subspace_distance

    X = load_isolet5().data
    Q, _ = sparse_truth(X, 3, 10, n_init=2, random_state=4)
    est = SparsePCA(3, n_nonzero=10, init="random", n_init=2, random_state=4)
    est.set_params(ledger=PrivacyLedger()).fit(X)
    assert subspace_distance(Q, est.components_.T) < 1e-6
    assert np.count_nonzero(np.linalg.norm(Q, axis=1)) <= 10


def test_cli_param_overrides(tmp_path: Path) -> None:
    args = ["reproduce", "ge-table1", "--quick", "--no-progress", "-o", str(tmp_path)]
    res = CliRunner().invoke(main, [*args, "-p", "dims=(20, 30)", "-p", "methods=['mod-sulq']"])
    assert res.exit_code == 0, res.output
    rows = _read_csv(tmp_path / "ge-table1.csv")
    assert {(r["d"], r["method"]) for r in rows} == {("20", "mod-sulq"), ("30", "mod-sulq")}
    md = (tmp_path / "ge-table1.md").read_text()
    assert "-p 'dims=(20, 30)'" in md
    res = CliRunner().invoke(main, [*args, "-p", "nonsense=1"])
    assert res.exit_code == 2 and "Unknown parameters" in res.output
    res = CliRunner().invoke(main, [*args, "-p", "novalue"])
    assert res.exit_code == 2 and "KEY=VALUE" in res.output
