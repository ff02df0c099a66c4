"""The real-table suite: packaged tables load offline, and ``real-data-suite`` runs and scores."""

from __future__ import annotations

import importlib.util
import math
import sys
from pathlib import Path

import numpy as np
import pytest

from privpca import AnalyzeGaussPCA, PrivacyLedger
from privpca.datasets import PACKAGED_TABLES, list_packaged_tables, load_packaged
from privpca.experiments.real_data import SUITE_TABLES, load_table, suite_table
from privpca.experiments.runner import run_experiment

HAS_STATSMODELS = importlib.util.find_spec("statsmodels") is not None
NO_STATSMODELS = "statsmodels is not installed (pip install 'privpca[suite]')"

# The documented shapes, copied by hand from the loaders' docstring table (an independent
# record of what each package ships).
SHAPES = {
    "randhie": (20_190, 10), "fair": (6_366, 9), "digits": (1_797, 64), "anes96": (944, 11),
    "breast_cancer": (569, 30), "diabetes": (442, 10), "star98": (303, 22),
    "macrodata": (203, 12), "wine": (178, 13),
}
SHIPPED_SHAPES = {"covtype": (581_012, 10), "isolet5": (1_559, 617), "leukemia": (72, 7_129),
                  "colon": (62, 2_000)}
SUITE_COLUMNS = {"panel", "method", "estimator", "bound", "clip_quantile", "error",
                 "explained_ratio", "sklearn_ratio", "data_norm", "mean_norm", "seconds",
                 "status", "n", "p", "seed", "repetition"}


def _packaged_case(name: str) -> object:
    needs = PACKAGED_TABLES[name].package == "statsmodels"
    return pytest.param(name, marks=pytest.mark.skipif(needs and not HAS_STATSMODELS,
                                                       reason=NO_STATSMODELS))


@pytest.mark.parametrize("name", [_packaged_case(n) for n in list_packaged_tables()])
def test_packaged_table_has_its_documented_shape(name: str) -> None:
    table = load_packaged(name)
    assert set(SHAPES) == set(list_packaged_tables())
    assert table.data.shape == SHAPES[name] == PACKAGED_TABLES[name].shape
    assert table.data.dtype == np.float64 and np.all(np.isfinite(table.data))
    assert len(table.feature_names) == table.data.shape[1]
    assert table.version and table.package in table.DESCR and table.version in table.DESCR


def test_packaged_tables_are_raw() -> None:
    # scaled=False: the diabetes columns in their own units (age in years, sex 1/2)
    diabetes = load_packaged("diabetes").data
    assert diabetes[:, 0].max() > 50 and set(np.unique(diabetes[:, 1])) == {1.0, 2.0}
    # breast cancer's units span four orders of magnitude (the point of having it)
    spread = load_packaged("breast_cancer").data.std(axis=0)
    assert spread.max() / spread.min() > 1e4


@pytest.mark.skipif(not HAS_STATSMODELS, reason=NO_STATSMODELS)
def test_macrodata_drops_its_time_index() -> None:
    table = load_packaged("macrodata")
    assert "year" not in table.feature_names and "quarter" not in table.feature_names


def test_a_missing_statsmodels_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "statsmodels.datasets.fair", None)  # import fails
    with pytest.raises(ImportError, match=r"pip install 'privpca\[suite\]'"):
        load_packaged("fair")


def test_unknown_tables_are_refused() -> None:
    with pytest.raises(ValueError, match="Unknown table 'iris'"):
        load_packaged("iris")
    with pytest.raises(ValueError, match="unknown table 'iris'"):
        load_table("iris")


@pytest.mark.parametrize("name", ["isolet5", "leukemia", "colon"])
def test_shipped_suite_tables_are_raw(name: str) -> None:
    X, title = load_table(name)
    assert X.shape == SHIPPED_SHAPES[name] and title
    norms = np.linalg.norm(X, axis=1)
    assert not np.allclose(norms, 1.0)  # not row-normalised, as the loaders do by default


def test_suite_lists_every_table() -> None:
    assert set(SUITE_TABLES) == set(SHAPES) | set(SHIPPED_SHAPES)


def test_oracle_fits_share_the_private_mean_of_their_seed() -> None:
    # The oracle's quantiles are of ‖x − μ̂‖, μ̂ read from a probe fit: valid because the
    # private mean does not depend on the value of a fixed data_norm.
    X = load_packaged("digits").data
    means = [AnalyzeGaussPCA(2, data_norm=d, random_state=4, ledger=PrivacyLedger()).fit(X).mean_
             for d in (1.0, 30.0)]
    np.testing.assert_array_equal(means[0], means[1])


def test_quick_run_scores_defaults_and_oracle(tmp_path: Path) -> None:
    out = run_experiment("real-data-suite", quick=True, seed=3, output_dir=tmp_path,
                         progress=False)
    rows = out.result.rows
    assert SUITE_COLUMNS <= set(rows[0])
    assert {r["panel"] for r in rows} == set(out.params["tables"]) == {"covtype", "digits"}
    for r in rows:
        assert r["status"] == "ok", r["status"]
        assert 0.0 <= r["error"] <= math.sqrt(2 * r["k"]) + 1e-9
        assert math.isfinite(r["explained_ratio"]) and r["data_norm"] > 0
        assert 0.0 < r["sklearn_ratio"] <= 1.0
    bounds = {r["bound"] for r in rows}
    assert bounds == {"defaults", "private quantile"} | {f"q{q:g}" for q in out.params["quantiles"]}
    # every fit of a seed has the same private mean (AnalyzeGauss: defaults included), and
    # the oracle's bounds grow with the quantile (one seed, one table)
    for table in ("covtype", "digits"):
        assert len({r["mean_norm"] for r in rows if r["panel"] == table}) == 1
    oracle = [r["data_norm"] for r in rows
              if r["panel"] == "digits" and str(r["bound"]).startswith("q")]
    assert oracle == sorted(oracle)
    table = suite_table(rows)
    assert table.count("`analyze-gauss`") == 2 and "refused" not in table
    assert "0.99 quantile: distance" in table
    assert "oracle (non-private)" in out.md_path.read_text()


@pytest.mark.slow
@pytest.mark.skipif(not HAS_STATSMODELS, reason=NO_STATSMODELS)
def test_full_suite_runs_on_every_table(tmp_path: Path) -> None:
    # One seed of the full run (every table and estimator): ~1–3 min on 2 cores.
    out = run_experiment("real-data-suite", seed=0, output_dir=tmp_path, progress=False,
                         repetitions=1)
    rows = out.result.rows
    assert {r["panel"] for r in rows} == set(SUITE_TABLES)
    for r in rows:
        if r["status"] == "ok":
            assert 0.0 <= r["error"] <= 2.0 + 1e-9
        else:  # a refusal is recorded with its exception's name
            assert math.isnan(r["error"]) and "Error" in r["status"].split(":")[0]
    # every estimator fits the large tables on defaults
    large = [r for r in rows if r["n"] >= 5_000 and r["bound"] == "defaults"]
    assert large and all(r["status"] == "ok" for r in large)
