"""The privpca command line."""

from __future__ import annotations

import json

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


@pytest.mark.parametrize("suffix", [".csv", ".npy"])
def test_fit_writes_components_and_privacy(runner, tmp_path, suffix):
    rng = np.random.default_rng(0)
    X = rng.standard_normal((500, 6)) * 0.2
    path = tmp_path / f"data{suffix}"
    if suffix == ".csv":
        header = ",".join(f"f{i}" for i in range(6))
        np.savetxt(path, X, delimiter=",", header=header, comments="")
    else:
        np.save(path, X)
    out = tmp_path / "fit.json"
    result = runner.invoke(
        main,
        [
            "fit",
            "-m",
            "local-gaussian",
            "-k",
            "2",
            "--epsilon",
            "1",
            "--seed",
            "3",
            str(path),
            "-o",
            str(out),
        ],
    )
    assert result.exit_code == 0, result.output
    payload = json.loads(out.read_text())
    comps = np.array(payload["components"])
    assert comps.shape == (2, 6)
    np.testing.assert_allclose(comps @ comps.T, np.eye(2), atol=1e-10)
    assert payload["privacy"]["epsilon"] == 1.0
    assert payload["privacy"]["model"] == "local"
    assert payload["n_samples"] == 500


def test_fit_reports_clipping_and_bad_input(runner, tmp_path):
    X = np.full((20, 3), 0.1)
    X[:4] = 5.0
    path = tmp_path / "big.npy"
    np.save(path, X)
    result = runner.invoke(
        main, ["fit", "-m", "local-sparse", "-k", "1", "--epsilon", "1", str(path)]
    )
    assert result.exit_code == 0, result.output
    assert "RowClippingWarning: 4 of 20 rows" in result.output
    X[0, 0] = np.nan
    np.save(path, X)
    result = runner.invoke(main, ["fit", "-m", "local-gaussian", "--epsilon", "1", str(path)])
    assert result.exit_code != 0
    assert "NaN or infinity" in result.output
    clean = tmp_path / "clean.npy"
    np.save(clean, np.full((20, 3), 0.1))
    result = runner.invoke(main, ["fit", "-m", "local-gaussian", "--epsilon", "-1", str(clean)])
    assert result.exit_code != 0
    assert "'epsilon' parameter of LocalGaussianPCA must be a float" in result.output


def test_fit_central_methods(runner, tmp_path):
    rng = np.random.default_rng(0)
    X = rng.standard_normal((40_000, 4)) * np.sqrt([1.0, 0.3, 0.3, 0.3])
    path = tmp_path / "data.npy"
    np.save(path, X)
    args = ["fit", "-k", "1", "--epsilon", "1", "--seed", "0", str(path)]
    result = runner.invoke(main, [*args, "-m", "dp-pca"])
    assert result.exit_code == 0, result.output
    payload = json.loads(result.output)
    assert payload["privacy"]["model"] == "central"
    assert np.array(payload["components"]).shape == (1, 4)
    assert payload["privacy"]["epsilon"] == 1.0 and "Algorithm 4" in payload["privacy"]["notes"]
    result = runner.invoke(main, [*args, "-m", "private-oja", "--data-norm", "2"])
    assert result.exit_code == 0, result.output
    assert "clip_norm=4.0" in json.loads(result.output[result.output.index("{"):])["estimator"]
    small = tmp_path / "small.npy"
    np.save(small, X[:300])
    result = runner.invoke(main, ["fit", "-m", "dp-pca", "--epsilon", "1", str(small)])
    assert result.exit_code != 0 and "at least one minibatch" in result.output
