"""The privpca command line."""

from __future__ import annotations

import json
import math
import re
import subprocess
import sys

import numpy as np
import pytest
from click.testing import CliRunner

from privpca.cli import main


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner()


def test_demo_quick_writes_table_plot_and_records(runner, tmp_path):
    out = tmp_path / "demo"
    result = runner.invoke(main, ["demo", "--quick", "--no-progress", "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert "LocalGaussianPCA" in result.output and "LocalSparsePCA" in result.output
    for name in ("demo_runs.csv", "demo_summary.md", "demo_privacy.json", "demo_errors.png"):
        assert (out / name).stat().st_size > 0
    assert (out / "demo_errors.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    records = json.loads((out / "demo_privacy.json").read_text())["privacy"]
    assert records["LocalGaussianPCA (local)"]["model"] == "local"
    assert records["AnalyzeGaussPCA (central)"]["model"] == "central"
    rows = (out / "demo_runs.csv").read_text().splitlines()
    assert len(rows) == 1 + 2 * 2 * 8  # header + grid × repetitions × (7 estimators + exact PCA)
    assert "BinghamPCA" in result.output and "SparsePCA (non-private)" in result.output


#: Every field ``privpca fit`` writes (null where a method does not release it).
FIT_FIELDS = {
    "method", "estimator", "params", "n_samples", "n_features", "feature_names",
    "n_components", "components", "mean", "scale", "data_norm", "explained_variance",
    "explained_variance_ratio", "noise_level", "expected_error", "privacy", "missing",
}

CUSTOMER_COLUMNS = ("income_usd", "spending_usd", "age_years", "share_online", "height_m",
                    "visits_per_month")


def customers(n: int, seed: int = 0) -> np.ndarray:
    """A table as people have them: two latent factors, columns in dollars, years, fractions,
    metres and counts (standard deviations from 0.09 to 15 000), far from centred."""
    rng = np.random.default_rng(seed)
    z = rng.standard_normal((n, 2))
    e = rng.standard_normal((n, 6))
    return np.column_stack([
        52_000 + 15_000 * (0.9 * z[:, 0] + 0.3 * e[:, 0]),
        31_000 + 8_000 * (0.7 * z[:, 0] + 0.6 * z[:, 1] + 0.3 * e[:, 1]),
        41 + 12 * (0.8 * z[:, 1] + 0.5 * e[:, 2]),
        0.35 + 0.08 * (0.6 * z[:, 0] - 0.6 * z[:, 1] + 0.5 * e[:, 3]),
        1.72 + 0.09 * e[:, 4],
        3 + 1.5 * (0.7 * z[:, 1] + 0.6 * e[:, 5]),
    ])


def write_csv(path, X, header=CUSTOMER_COLUMNS):
    np.savetxt(path, X, delimiter=",", header=",".join(header) if header else "",
               comments="", fmt="%.6g")
    return path


@pytest.fixture(scope="module")
def customers_csv(tmp_path_factory):
    X = customers(20_000)
    path = write_csv(tmp_path_factory.mktemp("cli") / "customers.csv", X)
    return path, np.loadtxt(path, delimiter=",", skiprows=1)  # the rows as written


def projector(components) -> np.ndarray:
    V = np.asarray(components, dtype=float).T
    return V @ V.T


def test_fit_data_norm_select_chooses_the_bound_and_says_so(runner, customers_csv):
    path, _ = customers_csv
    args = ["fit", str(path), "-k", "2", "--epsilon", "1", "--seed", "0", "--data-norm",
            "select"]
    result = runner.invoke(main, args)
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    assert payload["params"]["data_norm"] == "select"
    text = json.dumps(payload["privacy"])
    assert "bound_select" in text and "The bound selection chose" in text
    refused = runner.invoke(main, [*args, "-m", "local-gaussian"])
    assert refused.exit_code != 0 and "'--data-norm' (local-gaussian)" in refused.output


def test_fit_defaults_on_a_mixed_unit_table_match_sklearn(runner, customers_csv, tmp_path):
    from sklearn.decomposition import PCA

    path, X = customers_csv
    out, figures = tmp_path / "fit.json", tmp_path / "figures"
    result = runner.invoke(main, ["fit", str(path), "-k", "2", "--epsilon", "1", "--seed", "0",
                                  "-o", str(out), "--plot", str(figures)])
    assert result.exit_code == 0, result.output
    payload = json.loads(out.read_text())
    assert set(payload) == FIT_FIELDS
    assert payload["method"] == "analyze-gauss"
    assert payload["params"]["centering"] == "private" and payload["params"]["data_norm"] == "auto"
    assert payload["params"]["scale"] is False and payload["scale"] is None
    assert payload["feature_names"] == list(CUSTOMER_COLUMNS)
    assert payload["n_samples"] == 20_000 and payload["n_features"] == 6
    assert payload["n_components"] == 2
    ref = PCA(2).fit(X)
    distance = np.linalg.norm(projector(payload["components"]) - projector(ref.components_))
    assert distance < 0.1, distance
    np.testing.assert_allclose(payload["explained_variance_ratio"],
                               ref.explained_variance_ratio_, atol=0.05)
    np.testing.assert_allclose(payload["explained_variance"], ref.explained_variance_, rtol=0.2)
    mean = np.array(payload["mean"])  # private: the large-unit columns are close
    assert mean.shape == (6,) and abs(mean[0] - X[:, 0].mean()) < 0.05 * X[:, 0].std()
    assert payload["data_norm"] > 0 and payload["noise_level"] > 0
    assert distance <= payload["expected_error"] <= 2.0
    privacy = payload["privacy"]
    assert privacy["epsilon"] == pytest.approx(1.0) and privacy["delta"] == pytest.approx(1e-5)
    assert privacy["n_samples"] == 20_000 and privacy["data_norm"] == payload["data_norm"]
    parts = [s["mechanism"].split(":")[0] for s in privacy["spends"]]
    assert "mean" in parts and "bound" in parts and parts[-2:] == ["statistic", "variance"]
    # A human summary on stderr; the plots written.
    assert "explained variance ratio (private)" in result.stderr
    assert "(1, 1e-05)-DP" in result.stderr
    for name in ("scree.png", "loadings.png"):
        assert (figures / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert str(figures / name) in result.stderr


def test_fit_options_fraction_scale_centering_public_bound(runner, customers_csv):
    path, X = customers_csv
    small = path.with_name("small.csv")
    write_csv(small, X[:4_000])
    args = ["fit", str(small), "--epsilon", "1", "--seed", "1"]
    result = runner.invoke(main, [*args, "-k", "0.95"])
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    assert payload["params"]["n_components"] == 0.95
    assert payload["n_components"] == len(payload["components"]) >= 1
    result = runner.invoke(main, [*args, "--scale"])
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    scale = np.array(payload["scale"])
    assert payload["params"]["scale"] is True
    assert scale.shape == (6,) and np.all(scale > 0) and np.all(np.isfinite(scale))
    result = runner.invoke(main, [*args, "--centering", "none", "--data-norm", "2e5"])
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    assert payload["params"]["centering"] is None and payload["mean"] == [0.0] * 6
    assert payload["data_norm"] == 2e5 and payload["privacy"]["data_norm"] == 2e5
    assert [s["mechanism"].split(":")[0] for s in payload["privacy"]["spends"]] == [
        "statistic"]  # a public bound and no centring: the whole budget to the statistic


@pytest.mark.parametrize("suffix", [".csv", ".npy"])
def test_fit_without_header_names_features_like_sklearn(runner, tmp_path, suffix):
    rng = np.random.default_rng(0)
    X = rng.standard_normal((500, 4)) * 0.2
    path = tmp_path / f"data{suffix}"
    if suffix == ".csv":
        write_csv(path, X, header=None)
    else:
        np.save(path, X)
    header = ["--no-header"] if suffix == ".csv" else []  # line 1 is a record: say so
    result = runner.invoke(main, ["fit", str(path), "-k", "2", "--epsilon", "1", "--seed", "3",
                                  "--centering", "none", "--data-norm", "1", *header])
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    comps = np.array(payload["components"])
    assert comps.shape == (2, 4)
    np.testing.assert_allclose(comps @ comps.T, np.eye(2), atol=1e-10)
    assert payload["feature_names"] == ["x0", "x1", "x2", "x3"]
    assert payload["n_samples"] == 500 and payload["data_norm"] == 1.0


def test_fit_local_method_with_public_bound(runner, tmp_path):
    rng = np.random.default_rng(0)
    path = tmp_path / "data.csv"
    write_csv(path, rng.standard_normal((5000, 6)) * 0.2, header=[f"f{i}" for i in range(6)])
    out = tmp_path / "fit.json"
    result = runner.invoke(main, ["fit", "-m", "local-gaussian", "-k", "2", "--epsilon", "1",
                                  "--data-norm", "1", "--seed", "3", str(path), "-o", str(out)])
    assert result.exit_code == 0, result.output
    payload = json.loads(out.read_text())
    assert set(payload) == FIT_FIELDS
    assert np.array(payload["components"]).shape == (2, 6)
    assert payload["privacy"]["epsilon"] == 1.0 and payload["privacy"]["model"] == "local"
    assert payload["feature_names"] == [f"f{i}" for i in range(6)]


def test_fit_local_sparse_shows_admm_progress_on_stderr_only(runner, tmp_path):
    rng = np.random.default_rng(0)
    path = tmp_path / "data.npy"
    np.save(path, rng.standard_normal((400, 8)) * 0.3)
    result = runner.invoke(main, ["fit", "-m", "local-sparse", "-k", "2", "--epsilon", "1",
                                  "--centering", "none", "--data-norm", "1", "--seed", "0",
                                  str(path)])
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)  # the bar does not reach stdout
    assert "progress=True" in payload["estimator"]
    assert "LocalSparsePCA ADMM" in result.stderr


def test_fit_reports_clipping(runner, tmp_path):
    X = np.full((20, 3), 0.1)
    X[:4] = 5.0
    path = tmp_path / "big.npy"
    np.save(path, X)
    result = runner.invoke(main, ["fit", "-k", "1", "--epsilon", "1", "--centering", "none",
                                  "--data-norm", "1", "--show-data-warnings", str(path)])
    assert result.exit_code == 0, result.output
    assert "RowClippingWarning: Some rows" in result.stderr
    assert "4 of 20" not in result.stderr  # no count of the data, in no output
    assert "n_clipped" not in json.loads(result.stdout)["privacy"]


def test_fit_stderr_does_not_depend_on_clipping(runner, tmp_path, monkeypatch):
    """Issue 26, item 4: whether a row exceeds a public --data-norm is one bit about the data.
    Two tables equal after clipping (a row of norm 2 clipped to [1, 0, 0], or that row as is)
    give byte-identical stdout and stderr by default; --show-data-warnings (for the data
    holder) prints the warning, and in Python it is a DataDependentWarning."""
    from privpca.exceptions import DataDependentWarning, RowClippingWarning
    from privpca.mechanisms import randomness

    X = np.random.default_rng(0).standard_normal((300, 3)) * 0.1
    outputs = []
    for first in ([2.0, 0.0, 0.0], [1.0, 0.0, 0.0]):
        X[0] = first
        path = tmp_path / f"table{first[0]:g}.npy"
        np.save(path, X)
        monkeypatch.setattr(randomness, "_warned_reproducible", False)  # same lines each run
        result = runner.invoke(main, ["fit", "-k", "1", "--epsilon", "1", "--centering",
                                      "none", "--data-norm", "1", "--seed", "0", str(path)])
        assert result.exit_code == 0, result.output
        outputs.append((result.stdout, result.stderr))
    assert outputs[0] == outputs[1]
    assert "RowClippingWarning" not in outputs[0][1] and "clipped" not in outputs[0][1]
    X[0] = [2.0, 0.0, 0.0]
    np.save(tmp_path / "table2.npy", X)
    shown = runner.invoke(main, ["fit", "-k", "1", "--epsilon", "1", "--centering", "none",
                                 "--data-norm", "1", "--seed", "0", "--show-data-warnings",
                                 str(tmp_path / "table2.npy")])
    assert shown.exit_code == 0, shown.output
    assert "warning: RowClippingWarning: Some rows" in shown.stderr
    assert issubclass(RowClippingWarning, DataDependentWarning)
    from privpca import AnalyzeGaussPCA, PrivacyLedger

    with pytest.warns(DataDependentWarning, match="clipped"):
        AnalyzeGaussPCA(1, centering=None, data_norm=1.0, ledger=PrivacyLedger()).fit(X)


BAD_CELLS = [
    ("1.5,2,3\n2.5,,4\n", "'b' (1 cell, first on line 3)"),
    ("1.5,2,3\n2.5,NaN,4\n3.5,nan,5\n", "'b' (2 cells, first on line 3)"),
    ("1.5,2,inf\n2.5,1,4\n", "'c' (1 cell, first on line 2)"),
    ("1.5,2,3\nNA,1,\n", "'a' (1 cell, first on line 3), 'c' (1 cell"),
]


@pytest.mark.parametrize(("body", "named"), BAD_CELLS)
def test_fit_refuses_missing_values_naming_the_columns(runner, tmp_path, body, named):
    path = tmp_path / "holes.csv"
    path.write_text("a,b,c\n" + body)
    result = runner.invoke(main, ["fit", str(path), "-k", "1", "--epsilon", "1"])
    assert result.exit_code != 0
    assert "missing or non-finite cells" in result.output and named not in result.output
    assert "does not impute" in result.output and "nothing was spent" in result.output
    result = runner.invoke(main, ["fit", str(path), "-k", "1", "--epsilon", "1",
                                  "--show-data-warnings"])  # the diagnosis, on request
    assert result.exit_code != 0
    assert "missing or non-finite values" in result.output and named in result.output


def test_fit_refuses_text_columns_and_ragged_rows(runner, tmp_path):
    path = tmp_path / "mixed.csv"
    path.write_text("age,city,income,plan\n31,Paris,5e4,basic\n40,Lyon,6e4,gold\n")
    result = runner.invoke(main, ["fit", str(path), "-k", "1", "--epsilon", "1"])
    assert result.exit_code != 0
    assert "some cells are text" in result.output and "Paris" not in result.output
    shown = runner.invoke(main, ["fit", str(path), "-k", "1", "--epsilon", "1",
                                 "--show-data-warnings"])
    assert "non-numeric columns 'city' (e.g. 'Paris' on line 2), 'plan'" in shown.output
    assert "'age'" not in shown.output and "'income'" not in shown.output
    path.write_text("a,b\n1,2\n3,4,5\n")
    result = runner.invoke(main, ["fit", str(path), "-k", "1", "--epsilon", "1"])
    assert result.exit_code != 0 and "not every line has as many fields" in result.output
    assert "line 3" not in result.output
    shown = runner.invoke(main, ["fit", str(path), "-k", "1", "--epsilon", "1",
                                 "--show-data-warnings"])
    assert shown.exit_code != 0 and "line 3 has 3 fields, expected 2" in shown.output
    path.write_text("a,b\n")
    result = runner.invoke(main, ["fit", str(path), "-k", "1", "--epsilon", "1"])
    assert result.exit_code != 0 and "no data rows below the header" in result.output
    npy = tmp_path / "vector.npy"
    np.save(npy, np.ones(5))
    result = runner.invoke(main, ["fit", str(npy), "-k", "1", "--epsilon", "1"])
    assert result.exit_code != 0 and "expected a 2-D numeric array" in result.output


@pytest.mark.parametrize(
    ("option", "message"),
    [
        (["--epsilon", "0"], "Invalid value for '--epsilon' (analyze-gauss): must be a float"),
        (["--epsilon", "-1"], "Got -1.0 instead"),
        (["--epsilon", "1", "--delta", "1"], "Invalid value for '--delta'"),
        (["--epsilon", "1", "-k", "0"], "must be an int in the range [1, inf)"),
        (["--epsilon", "1", "-k", "1.5"], "a float in the range (0.0, 1.0) or None. Got 1.5"),
        (["--epsilon", "1", "-k", "two"], "Got 'two'"),
        (["--epsilon", "1", "-k", "7"], "'-k' / '--n-components': 7 components asked, but the "
         "table has 6 columns: -k must be between 1 and 6. Nothing was spent."),
        (["--epsilon", "1", "--data-norm", "-2"],
         "Invalid value for '--data-norm' (analyze-gauss)"),
        (["--epsilon", "1", "--data-norm", "big"], "Got 'big'"),
        (["--epsilon", "1", "--centering", "mean"], "Invalid value for '--centering'"),
        (["--epsilon", "1", "--holdout-fraction", "1.5"],
         "None or a float in the range (0.0, 0.5]. Got 1.5 instead."),
        (["--epsilon", "1", "--holdout-fraction", "0.7"],
         "None or a float in the range (0.0, 0.5]. Got 0.7 instead."),
    ],
)
def test_fit_refuses_bad_options(runner, customers_csv, option, message):
    path, _ = customers_csv
    result = runner.invoke(main, ["fit", str(path), *option])
    assert result.exit_code == 2  # a usage error, as click's own
    assert message in result.output


class _Minimal:
    """A private estimator that takes few parameters and releases only components."""

    def __init__(self, n_components=2, *, epsilon=1.0, random_state=None):
        self.n_components = n_components
        self.epsilon = epsilon
        self.random_state = random_state

    def get_params(self, deep=True):
        return {"n_components": self.n_components, "epsilon": self.epsilon,
                "random_state": self.random_state}

    def fit(self, X):
        from privpca.accounting.record import PrivacyRecord, PrivacySpend

        self.components_ = np.eye(X.shape[1])[: self.n_components]
        self.explained_variance_ = np.full(self.n_components, np.nan)
        adaptive = PrivacySpend(mechanism="adaptive", epsilon=self.epsilon, delta=0.0,
                                sensitivity=np.nan, noise_scale=np.nan)
        self.privacy_ = PrivacyRecord(epsilon=self.epsilon, delta=0.0, model="central",
                                      neighbouring="replace one record", sensitivity=1.0,
                                      noise_scale=1.0, calibration="test", data_norm=1.0,
                                      n_samples=X.shape[0], spends=(adaptive,))
        return self


def test_fit_passes_only_accepted_parameters_and_writes_null(runner, tmp_path, monkeypatch):
    import privpca.cli

    monkeypatch.setitem(privpca.cli.PRIVATE_ESTIMATORS, "dps-pca", _Minimal)
    path = write_csv(tmp_path / "d.csv", customers(50), header=CUSTOMER_COLUMNS)
    figures = tmp_path / "figures"
    result = runner.invoke(main, ["fit", str(path), "-m", "dps-pca", "--epsilon", "2",
                                  "--plot", str(figures)])
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    assert set(payload) == FIT_FIELDS
    assert payload["params"] == {"n_components": 2, "epsilon": 2.0, "random_state": None}
    for key in ("mean", "scale", "data_norm", "explained_variance_ratio", "noise_level",
                "expected_error"):
        assert payload[key] is None, key
    assert payload["explained_variance"] == [None, None]  # NaN → null: strict JSON
    assert payload["privacy"]["spends"][0]["sensitivity"] is None
    assert "NaN" not in result.stdout
    assert "not available: nothing this fit released bounds it" in result.stderr
    assert (figures / "scree.png").stat().st_size > 0
    assert (figures / "loadings.png").stat().st_size > 0
    for option in (["--scale"], ["--centering", "none"], ["--data-norm", "3"],
                   ["--delta", "1e-6"], ["--calibration", "classic"]):
        result = runner.invoke(main, ["fit", str(path), "-m", "dps-pca", "--epsilon", "2",
                                      *option])
        assert result.exit_code != 0
        assert f"{option[0]} does not apply to dps-pca" in result.output


def test_fit_central_methods(runner, tmp_path):
    rng = np.random.default_rng(0)
    X = rng.standard_normal((40_000, 4)) * np.sqrt([1.0, 0.3, 0.3, 0.3])
    path = tmp_path / "data.npy"
    np.save(path, X)
    args = ["fit", "-k", "1", "--epsilon", "1", "--seed", "0", str(path)]
    result = runner.invoke(main, [*args, "-m", "dp-pca"])
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    assert payload["privacy"]["model"] == "central"
    assert np.array(payload["components"]).shape == (1, 4)
    assert payload["privacy"]["epsilon"] == 1.0 and "Algorithm 4" in payload["privacy"]["notes"]
    result = runner.invoke(main, [*args, "-m", "private-oja", "--data-norm", "2"])
    assert result.exit_code == 0, result.output
    assert "clip_norm=4.0" in json.loads(result.stdout)["estimator"]
    # A streamed table is read in its order: shuffling amplification is refused, "none" fits.
    result = runner.invoke(main, [*args, "--stream", "-m", "private-oja"])
    assert result.exit_code != 0 and "amplification='none'" in result.output
    result = runner.invoke(main, [*args, "--stream", "-m", "private-oja",
                                  "--amplification", "none"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["params"]["amplification"] == "none"
    result = runner.invoke(main, [*args, "-m", "dp-pca", "--amplification", "none"])
    assert result.exit_code != 0 and "--amplification does not apply to dp-pca" in result.output
    small = tmp_path / "small.npy"
    np.save(small, X[:300])
    result = runner.invoke(main, ["fit", "-m", "dp-pca", "--epsilon", "1", "--centering", "none",
                                  str(small)])
    assert result.exit_code != 0 and "at least one minibatch" in result.output
    result = runner.invoke(main, ["fit", "-m", "dp-pca", "--epsilon", "1", str(small)])
    assert result.exit_code != 0 and "epsilon" in result.output  # too few rows, said clearly


# --- reading tables and refusing bad input (issue 14) ------------------------------------------

def _table(rng, n=400):
    return rng.standard_normal((n, 3)) * np.array([3.0, 1.0, 0.2])


FIT = ["fit", "-k", "1", "--epsilon", "1", "--centering", "none", "--data-norm", "10"]


@pytest.mark.parametrize(
    ("header", "sep"),
    [("0,1,2", ","), ("a;b;c", ";"), ("a\tb\tc", "\t"), (None, ";"), (None, "\t")],
)
def test_fit_reads_headers_and_separators(runner, tmp_path, header, sep):
    X = _table(np.random.default_rng(0))
    lines = [header] if header is not None else []
    lines += [sep.join(f"{v:.6f}" for v in row) for row in X]
    path = tmp_path / "t.csv"
    path.write_text("\n".join(lines) + "\n")
    # Whether line 1 is a header is said, never guessed: pandas' labels "0,1,2" need
    # --header (a line of numbers is refused as a header otherwise), no header --no-header.
    said = {None: ["--no-header"], "0,1,2": ["--header"]}.get(header, [])
    result = runner.invoke(main, [*FIT, str(path), *said])
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    assert payload["n_samples"] == 400  # a header "0,1,2" is not a record
    assert len(payload["feature_names"]) == 3


@pytest.mark.parametrize(
    ("text", "match"),
    [("a,b,c\n1,2,x\n3,4,5\n", r"non-numeric column 'c' \(e.g. 'x' on line 2\)"),
     ("a;b;c\n1;2;3\n3;;5\n", r"'b' \(1 cell, first on line 3\)"),
     ("a,b\n1,2\n3\n", r"line 3 has 1 fields, expected 2"),
     # every data row wider than the header (found by the property test)
     # (names now distinct: a repeated name is refused before any line is read)
     ("0,1,2,NA\n0,0,0,0,1e999\n", r"line 2 has 5 fields, expected 4")],
)
def test_fit_names_the_bad_column_and_line(runner, tmp_path, text, match):
    """Only with --show-data-warnings: the column and line are found by reading values."""
    import re

    path = tmp_path / "bad.csv"
    path.write_text(text)
    header = ["--header"] if text.startswith("0,") else []  # a header of numbers, said so
    result = runner.invoke(main, [*FIT, str(path), *header])
    assert result.exit_code == 1
    assert "Traceback" not in result.output and not re.search(match, result.output)
    assert "--show-data-warnings" in result.output
    result = runner.invoke(main, [*FIT, str(path), *header, "--show-data-warnings"])
    assert result.exit_code == 1
    assert "Traceback" not in result.output
    assert re.search(match, result.output), result.output


def test_fit_refuses_object_and_complex_npy(runner, tmp_path):
    obj = tmp_path / "obj.npy"
    np.save(obj, np.array([[1, "a"], [2, None]], dtype=object), allow_pickle=True)
    result = runner.invoke(main, [*FIT, str(obj)])
    assert result.exit_code == 1 and "never unpickles" in result.output
    cpx = tmp_path / "cpx.npy"
    np.save(cpx, np.ones((5, 2)) + 1j)
    result = runner.invoke(main, [*FIT, str(cpx)])
    assert result.exit_code == 1 and "numeric array" in result.output


def test_unwritable_output_fails_before_anything_is_read(runner, tmp_path):
    # DATA is not even a valid table: the -o check comes first, before any read or fit.
    data = tmp_path / "data.csv"
    data.write_text("not,a\ntable\n")
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    result = runner.invoke(main, [*FIT, str(data), "-o", str(blocker / "out.json")])
    assert result.exit_code == 1 and "Nothing was fitted" in result.output, result.output
    result = runner.invoke(main, [*FIT, str(data), "-o", str(tmp_path)])  # a directory
    assert result.exit_code == 2 and "directory" in result.output


def test_fit_holdout_fraction_releases_the_preprocessing_from_held_out_rows(runner,
                                                                           customers_csv):
    path, _ = customers_csv
    args = ["fit", str(path), "-k", "2", "--epsilon", "1", "--seed", "3"]
    held = runner.invoke(main, [*args, "--holdout-fraction", "0.05"])
    assert held.exit_code == 0, held.output
    payload = json.loads(held.stdout)
    assert payload["params"]["holdout_fraction"] == 0.05
    privacy = payload["privacy"]
    assert "Held-out preprocessing (holdout_fraction=0.05)" in privacy["notes"]
    assert "1000 of the 20000 rows" in privacy["notes"]
    parts = [s["mechanism"].split(":")[0] for s in privacy["spends"]]
    assert parts[-2:] == ["centre", "statistic"]
    assert privacy["epsilon"] == pytest.approx(1.0) and privacy["delta"] == pytest.approx(1e-5)
    whole = json.loads(runner.invoke(main, [*args, "--holdout-fraction", "none"]).stdout)
    default = json.loads(runner.invoke(main, args).stdout)  # 20 000 rows: 'auto' holds none
    assert whole["components"] == default["components"]
    assert "Held-out" not in default["privacy"]["notes"]


# --------------------------------------------------------------------------- report, scores
def test_fit_report_and_plot_scores_release_the_score_plot_on_its_own_budget(runner, tmp_path):
    path = write_csv(tmp_path / "c.csv", customers(4_000), header=CUSTOMER_COLUMNS)
    figures, out = tmp_path / "figures", tmp_path / "f.json"
    page = tmp_path / "out" / "release.html"
    args = ["fit", str(path), "--epsilon", "1", "--seed", "0", "-o", str(out), "--plot",
            str(figures), "--report", str(page), "--scores-epsilon", "0.25", "--scores-bins", "8"]
    result = runner.invoke(main, args)
    assert result.exit_code == 0, result.output
    payload = json.loads(out.read_text())
    assert set(payload) == FIT_FIELDS | {"score_plot"}
    score = payload["score_plot"]
    assert score["privacy"]["epsilon"] == 0.25 and score["privacy"]["delta"] == 0.0
    assert score["privacy"]["spends"][0]["noise_scale"] == pytest.approx(2 / 0.25)
    assert np.asarray(score["noisy_counts"]).shape == (8, 8)
    assert len(score["pc1_edges"]) == len(score["pc2_edges"]) == 9
    assert payload["privacy"]["epsilon"] == pytest.approx(1.0)  # the fit's record unchanged
    # The box is the plot's, not a bound on the rows' norms: named as such, JSON and stderr.
    assert "data_norm" not in score["privacy"]
    half = score["box_half_widths"]
    assert half == pytest.approx([score["pc1_edges"][-1], score["pc2_edges"][-1]])
    assert half == pytest.approx([4 * math.sqrt(v) for v in payload["explained_variance"]])
    assert "score plot, a release of its own: (0.25, 0)-DP, the same relation as the fit" \
        in result.stderr
    assert f"box half-widths: {half[0]:.4g} (PC1), {half[1]:.4g} (PC2)" in result.stderr
    assert "for everything the fit released" not in result.stderr
    assert "data_norm" not in result.stderr.split("score plot", 1)[1]
    total = re.search(r"total, the fit and the score plot composed: epsilon = ([0-9.]+), "
                      r"delta = 1e-05; other runs on this table are not included",
                      result.stderr)
    assert total is not None and 1.0 < float(total.group(1)) < 1.25
    for name in ("scree.png", "loadings.png", "scores.png"):
        assert (figures / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    text = page.read_text(encoding="utf-8")
    assert str(page) in result.stderr and "Private score plot" in text
    assert "How the budget was spent" in text and "income_usd" in text
    # The command, rebuilt from the options given (CliRunner has no argv of its own).
    assert f"privpca fit {path} --epsilon 1.0 --seed 0" in text
    assert "--scores-epsilon 0.25" in text and "--report" in text


def test_fit_report_alone_and_bad_report_or_scores_options(runner, tmp_path):
    path = write_csv(tmp_path / "c.csv", customers(3_000), header=CUSTOMER_COLUMNS)
    page = tmp_path / "r.html"
    result = runner.invoke(main, ["fit", str(path), "--epsilon", "1", "--report", str(page)])
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    assert set(payload) == FIT_FIELDS  # no score plot unless asked for
    assert "Private score plot" not in page.read_text(encoding="utf-8")
    for extra, message in ((["--scores-bins", "5"], "--scores-bins needs --scores-epsilon"),
                           (["--scores-delta", "1e-6"], "--scores-delta needs"),
                           (["--scores-epsilon", "1", "--stream"], "needs the table in memory"),
                           (["--report", str(tmp_path)], "is a directory"),
                           (["--scores-epsilon", "1", "--scores-delta", "1"], "0 (Laplace")):
        result = runner.invoke(main, ["fit", str(path), "--epsilon", "1", *extra])
        assert result.exit_code != 0 and message in result.output, (extra, result.output)
        assert "components" not in result.stdout  # refused before anything was fitted


def test_a_missing_epsilon_says_what_it_is_and_a_value_that_works(tmp_path):
    np.save(tmp_path / "x.npy", np.random.default_rng(0).normal(size=(100, 3)))
    result = CliRunner().invoke(main, ["fit", str(tmp_path / "x.npy")])
    assert result.exit_code == 2
    assert "--epsilon" in result.output and "privacy budget" in result.output
    assert "--epsilon 1" in result.output


def test_at_a_terminal_the_summary_comes_without_the_json(tmp_path, monkeypatch):
    """A person at a prompt reads the summary; the JSON goes to -o or a pipe."""
    cli_fit = sys.modules["privpca.cli.fit"]  # the module, not the command it defines
    np.save(tmp_path / "x.npy", np.random.default_rng(0).normal(size=(2000, 3)) + 4)
    args = ["fit", str(tmp_path / "x.npy"), "--epsilon", "1", "--seed", "0"]
    monkeypatch.setattr(cli_fit, "_is_terminal", lambda stream: True)
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    assert result.stdout == ""
    assert "-o FILE" in result.stderr and "explained variance ratio" in result.stderr


def test_help_has_no_doubled_percent_signs():
    result = CliRunner().invoke(main, ["fit", "--help"])
    assert "%%" not in result.output and "2 %" in result.output


def test_help_says_what_the_score_box_and_missing_value_really_are():
    """--scores-bound's default is the one plot.scores applies (±SCORE_BOX_SDS released
    standard deviations), and --missing says its VALUE is one public value for every column."""
    from privpca.plot import SCORE_BOX_SDS

    said = " ".join(CliRunner().invoke(main, ["fit", "--help"]).output.split())
    assert f"Default: ±{SCORE_BOX_SDS:g} released standard deviations of each component's" \
        in said
    assert "the fit's released bound on the rows' norms" not in said
    assert "the same in every column" in said and "without looking at this table" in said


def test_the_report_shows_the_environment_settings_of_the_guarantee(runner, tmp_path):
    """PRIVPCA_SECURE_MODE, where set, is shown before the command (its value here is the
    default's, 'auto', so that the seeded fit still runs)."""
    np.save(tmp_path / "x.npy", np.random.default_rng(0).normal(size=(2000, 3)) + 4)
    page = tmp_path / "r.html"
    args = ["fit", str(tmp_path / "x.npy"), "--epsilon", "1", "--seed", "0", "--report",
            str(page), "-o", str(tmp_path / "f.json")]
    result = runner.invoke(main, args, env={"PRIVPCA_SECURE_MODE": "auto"})
    assert result.exit_code == 0, result.output
    assert f"PRIVPCA_SECURE_MODE=auto privpca fit {tmp_path / 'x.npy'}" in page.read_text()
    result = runner.invoke(main, args, env={"PRIVPCA_SECURE_MODE": None})
    assert "PRIVPCA_SECURE_MODE" not in page.read_text()


def test_a_warning_in_the_shell_names_no_file_and_line(tmp_path):
    """The demo's seeded fits warn that their noise is reproducible: in the shell, as
    ``warning: Kind: message``, not as the line of click's code that called the demo."""
    result = subprocess.run(
        [sys.executable, "-c", "from privpca.cli import main; main()", "demo", "--quick",
         "--no-progress", "-o", str(tmp_path)], capture_output=True, text=True, check=True)
    assert "warning: ReproducibleNoiseWarning:" in result.stderr
    assert ".py:" not in result.stderr


def test_a_fit_in_memory_shows_its_time_at_a_terminal(capsys):
    """The in-memory fit has no block bars: at a terminal, its elapsed time ticks on stderr
    (and nothing is shown when stderr is a file or a pipe)."""
    import time

    cli_fit = sys.modules["privpca.cli.fit"]
    with cli_fit._elapsed("fitting AnalyzeGaussPCA", show=True):
        time.sleep(1.2)
    err = capsys.readouterr().err
    assert "fitting AnalyzeGaussPCA: 00:01" in err
    with cli_fit._elapsed("fitting AnalyzeGaussPCA", show=False):
        time.sleep(0.1)
    assert capsys.readouterr().err == ""
