"""``privpca fit --method auto``: the shell's way to :class:`privpca.PCA` and its choice."""

from __future__ import annotations

import json

import numpy as np
import pytest
from click.testing import CliRunner

from privpca.cli import main

#: The fields ``--method auto`` adds to the JSON (the choice and why).
SELECTION_FIELDS = {"model", "mechanism", "selection_reason"}


@pytest.fixture(scope="module")
def table(tmp_path_factory):
    """A CSV with a header, 5 000 rows and 6 columns, far from centred."""
    from privpca.datasets import make_spiked

    X, _ = make_spiked(5_000, 6, 2, lam=9.0, random_state=0)
    path = tmp_path_factory.mktemp("auto") / "table.csv"
    np.savetxt(path, 3.0 * X + 10.0, delimiter=",", header=",".join(f"f{i}" for i in range(6)),
               comments="", fmt="%.6g")
    return path


def fit(table, *args):
    return CliRunner().invoke(main, ["fit", str(table), "-k", "2", "--epsilon", "1",
                                      "--seed", "0", *args])


def payload_of(result):
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_auto_picks_analyze_gauss_in_the_central_model(table):
    result = fit(table, "--method", "auto")
    payload = payload_of(result)
    assert payload["method"] == "auto"
    assert payload["model"] == "central" and payload["mechanism"] == "analyze-gauss"
    assert "Analyze Gauss is the most accurate central mechanism" in payload["selection_reason"]
    assert payload["estimator"].startswith("AnalyzeGaussPCA(")
    assert "mechanism: analyze-gauss (--method auto, central model): central model" \
        in result.stderr
    # The same fit as naming the method: only the three fields of the choice are added.
    named = payload_of(fit(table, "--method", "analyze-gauss"))
    assert set(payload) == set(named) | SELECTION_FIELDS
    assert {k: v for k, v in payload.items() if k not in SELECTION_FIELDS | {"method"}} \
        == {k: v for k, v in named.items() if k != "method"}


def test_auto_with_delta_zero_and_a_public_bound_picks_bingham(table):
    public = ["--delta", "0", "--centering", "none", "--data-norm", "60"]
    result = fit(table, "--method", "auto", *public)
    payload = payload_of(result)
    assert payload["mechanism"] == "bingham" and "pure epsilon-DP" in payload["selection_reason"]
    assert payload["privacy"]["delta"] == 0.0 and payload["privacy"]["data_norm"] == 60.0
    assert payload["params"]["centering"] is None and payload["params"]["delta"] == 0.0
    assert "mechanism: bingham (--method auto, central model)" in result.stderr
    assert "temperature" in result.stderr and "noise std" not in result.stderr
    named = payload_of(fit(table, "--method", "bingham", *public))
    assert named["components"] == payload["components"]
    assert named["privacy"] == payload["privacy"]


def test_auto_in_the_local_model_picks_the_local_estimator(table):
    result = fit(table, "--method", "auto", "--model", "local")
    payload = payload_of(result)
    assert payload["model"] == "local" and payload["mechanism"] == "local-gaussian"
    assert payload["privacy"]["model"] == "local"
    assert payload["estimator"].startswith("LocalGaussianPCA(")
    assert "mechanism: local-gaussian (--method auto, local model)" in result.stderr
    named = payload_of(fit(table, "--method", "local-gaussian"))
    assert named["components"] == payload["components"]


def test_auto_in_the_distributed_model_picks_dps_pca(table):
    payload = payload_of(fit(table, "--method", "auto", "--model", "distributed"))
    assert payload["mechanism"] == "dps-pca" and payload["privacy"]["model"] == "distributed"


def test_auto_above_the_gram_width_picks_the_noisy_power_method(tmp_path, monkeypatch):
    import privpca.pca

    monkeypatch.setattr(privpca.pca, "MAX_GRAM_FEATURES", 5)  # a "wide" table of 6 columns
    rng = np.random.default_rng(0)
    path = tmp_path / "wide.csv"
    np.savetxt(path, rng.normal(size=(3000, 6)), delimiter=",")
    payload = payload_of(fit(path, "--method", "auto", "--no-header"))
    assert payload["mechanism"] == "noisy-power" and "forms none" in payload["selection_reason"]
    assert "solver='data'" in payload["estimator"]  # never a p×p matrix


def test_a_named_method_keeps_its_json_and_may_name_its_model(table):
    payload = payload_of(fit(table, "--method", "local-gaussian", "--model", "local"))
    assert payload["method"] == "local-gaussian" and not SELECTION_FIELDS & set(payload)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--method", "auto", "--model", "local", "--delta", "0"],
         "--delta 0 (pure ε-DP) has no mechanism in the local model"),
        (["--method", "auto", "--model", "distributed", "--delta", "0", "--centering", "none",
          "--data-norm", "60"], "--delta 0 (pure ε-DP) has no mechanism in the distributed"),
        (["--method", "auto", "--delta", "0"],
         "--delta 0 (pure ε-DP) needs a public centre and norm bound: give --centering none"),
        (["--method", "auto", "--delta", "0", "--centering", "none"],
         "needs a public centre and norm bound"),
        (["--method", "auto", "--delta", "0", "--data-norm", "60"],
         "needs a public centre and norm bound"),
        (["--method", "auto", "--delta", "0", "--centering", "none", "--data-norm", "60",
          "--scale"], "without --scale"),
        (["--method", "analyze-gauss", "--delta", "0"],
         "--delta 0 (pure ε-DP) is for bingham (the exponential mechanism) only"),
        (["--method", "analyze-gauss", "--model", "local"],
         "--method analyze-gauss runs in the central model: it needs more trust than --model "
         "local grants. Choose one of local-gaussian, local-sparse, or --method auto."),
        (["--method", "dps-pca", "--model", "local"], "needs more trust than --model local"),
        (["--method", "auto", "--model", "local", "--amplification", "none"],
         "--amplification does not apply to local-gaussian (LocalGaussianPCA takes no "
         "'amplification' parameter)."),
        (["--method", "auto", "--model", "trusted"], "Invalid value for '--model'"),
        (["--method", "auto", "--delta", "-0.1"], "Invalid value for '--delta'"),
    ],
)
def test_bad_combinations_are_usage_errors(table, args, message):
    from privpca.accounting import default_ledger

    before = len(default_ledger().records)
    result = fit(table, *args)
    assert result.exit_code == 2, result.output
    assert message in result.stderr
    assert len(default_ledger().records) == before  # refused before anything was fitted


@pytest.mark.parametrize("centering", ["private", "none"])
@pytest.mark.parametrize("data_norm", ["auto", "60"])
@pytest.mark.parametrize("scale", [False, True])
def test_the_shells_pure_dp_refusal_is_the_estimators_rule(table, centering, data_norm, scale):
    """The shell refuses --delta 0 before reading the table exactly where BinghamPCA's pipeline
    (the one place the rule is decided) would refuse it."""
    from privpca import BinghamPCA, PrivacyLedger

    X = np.loadtxt(table, delimiter=",", skiprows=1)
    est = BinghamPCA(2, epsilon=1.0, delta=0.0, centering=None if centering == "none" else
                     centering, data_norm=data_norm if data_norm == "auto" else 60.0,
                     scale=scale, random_state=0, ledger=PrivacyLedger())
    try:
        est._plan(est._validate(X))
        refused = False
    except ValueError:
        refused = True
    args = ["--method", "bingham", "--delta", "0", "--centering", centering,
            "--data-norm", data_norm, *(["--scale"] if scale else [])]
    result = fit(table, *args)
    assert (result.exit_code != 0) == refused, result.output
