"""Issue 35, item 4, on ``privpca fit``: nothing data-derived on stdout or stderr by default.

* Whether a CSV's line 1 is a header is said by the user (``--no-header``; ``--header``),
  never read off its values: two tables that differ in one record (its first, in a file
  without a header) give the same feature names and the same n.
* A refusal of the table says what kind of problem it is and the way out, with no count,
  line, cell or column found in the values (``--show-data-warnings`` adds the diagnosis),
  and whether anything was spent.
"""

from __future__ import annotations

import json
import re

import numpy as np
import pytest
from click.testing import CliRunner

from privpca.cli import main

SECRET = "SECRET_CELL_VALUE"
FAST = ["-k", "1", "--epsilon", "1", "--centering", "none", "--data-norm", "10", "--seed", "3"]


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner()


def _rows(n: int = 200, p: int = 4, seed: int = 0) -> list[str]:
    X = np.random.default_rng(seed).standard_normal((n, p))
    return [",".join(f"{v:.6f}" for v in row) for row in X]


def _refused(runner, path, rows: list[str], args: list[str]) -> str:
    """``privpca fit`` on a CSV of ``rows`` (a header of one letter per column) that must be
    refused (exit code 1): its stderr on one line."""
    header = ",".join("abcdefgh"[: len(rows[0].split(","))])
    path.write_text("\n".join([header, *rows]) + "\n")
    result = runner.invoke(main, ["fit", str(path), *args])
    assert result.exit_code == 1, result.output
    return " ".join(result.stderr.split())


def _payload(result) -> dict:
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


# ----------------------------------------------------------------------------- the header
@pytest.mark.parametrize("first", ["0,1,2,3", "0,1,2,4"])
def test_first_records_are_records_with_no_header(runner, tmp_path, first):
    """Neighbouring tables (their first record replaced) without a header: the same names
    and the same n, whichever values the first record holds."""
    path = tmp_path / "t.csv"
    path.write_text("\n".join([first, *_rows()]) + "\n")
    payload = _payload(runner.invoke(main, ["fit", str(path), *FAST, "--no-header"]))
    assert payload["feature_names"] == ["x0", "x1", "x2", "x3"]
    assert payload["n_samples"] == 201


def test_neighbouring_first_records_give_the_same_names_and_n(runner, tmp_path):
    path = tmp_path / "t.csv"
    outputs = []
    for first in ("0,1,2,3", "0,1,2,4"):
        path.write_text("\n".join([first, *_rows()]) + "\n")
        result = runner.invoke(main, ["fit", str(path), *FAST, "--no-header"])
        payload = _payload(result)
        outputs.append((payload["feature_names"], payload["n_samples"], result.stderr))
        # On defaults line 1 is the header: a line of numbers is refused, whatever they are.
        refused = runner.invoke(main, ["fit", str(path), *FAST])
        assert refused.exit_code == 1 and refused.stdout == ""
        assert "line 1 holds no name" in refused.stderr and "--no-header" in refused.stderr
        assert first not in refused.stderr
        outputs.append(refused.stderr)
    assert outputs[0][:2] == outputs[2][:2]
    assert outputs[1] == outputs[3]  # byte for byte


def test_a_header_line_is_always_the_header(runner, tmp_path):
    """With a header, the records after it decide nothing about the names or n."""
    path = tmp_path / "t.csv"
    seen = []
    for second in ("0,1,2,3", "0,1,2,4", "a,b,c,d"):
        path.write_text("\n".join(["f0,f1,f2,f3", second, *_rows()]) + "\n")
        result = runner.invoke(main, ["fit", str(path), *FAST, "--missing", "0"])
        if second[0] == "a":  # text in a record: refused, not taken for names
            assert result.exit_code == 1 and "some cells are text" in result.stderr
            assert "a,b,c,d" not in result.stderr
            continue
        payload = _payload(result)
        seen.append((payload["feature_names"], payload["n_samples"]))
    assert seen == [(["f0", "f1", "f2", "f3"], 201)] * 2


def test_header_forces_a_line_of_numbers_to_be_the_header(runner, tmp_path):
    path = tmp_path / "t.csv"
    path.write_text("\n".join(["0,1,2,3", *_rows()]) + "\n")
    payload = _payload(runner.invoke(main, ["fit", str(path), *FAST, "--header"]))
    assert payload["feature_names"] == ["0", "1", "2", "3"] and payload["n_samples"] == 200


@pytest.mark.parametrize(("header", "message", "kept", "names"), [
    ("a,b,a,c", "names columns 0 and 2 (0-based) both 'a'", "1:3", ["b", "a", "c"]),
    ("a,,b,c", "gives no name to column 1", "0,2:3", ["a", "b", "c"]),
    ("a, ,b,c", "gives no name to column 1", "0,2:3", ["a", "b", "c"]),
])
def test_empty_or_repeated_names_are_refused_unless_left_out(runner, tmp_path, header, message,
                                                             kept, names):
    path = tmp_path / "t.csv"
    path.write_text("\n".join([header, *_rows()]) + "\n")
    result = runner.invoke(main, ["fit", str(path), *FAST])
    assert result.exit_code == 1 and message in result.stderr, result.output
    assert "Nothing was fitted and nothing was spent" in result.stderr
    payload = _payload(runner.invoke(main, ["fit", str(path), *FAST, "--columns", kept]))
    assert payload["feature_names"] == names


def test_header_options_are_for_a_csv(runner, tmp_path):
    path = tmp_path / "t.npy"
    np.save(path, np.zeros((10, 3)))
    result = runner.invoke(main, ["fit", str(path), *FAST, "--no-header"])
    assert result.exit_code == 2 and "--no-header is for a CSV" in result.output


# ----------------------------------------------------------------------------- refusals
def _with_cell(path, value, line, column=2):
    """A CSV with a header and ``value`` in ``column`` of (1-based) ``line``."""
    lines = ["a,b,c,d", *_rows(60)]
    cells = lines[line - 1].split(",")
    cells[column] = value
    lines[line - 1] = ",".join(cells)
    path.write_text("\n".join(lines) + "\n")
    return path


def _data_free(text: str, path) -> str:
    """``text`` without the file's path (which holds digits of its own)."""
    return text.replace(str(path), "DATA")


@pytest.mark.parametrize("extra", [[], ["--columns", "a:d"], ["--columns", "c"],
                                   ["--missing", "0"]])
def test_a_text_cell_is_refused_without_the_cell_its_line_or_its_column(runner, tmp_path,
                                                                        extra):
    path = _with_cell(tmp_path / "t.csv", SECRET, line=7)
    result = runner.invoke(main, ["fit", str(path), *FAST, *extra])
    assert result.exit_code != 0 and result.stdout == ""
    out = _data_free(result.stdout + result.stderr, path)
    assert SECRET not in out
    assert not re.search(r"\b7\b", out)  # no line number
    assert "'c'" not in out  # the column holding it is not named either
    assert "text" in out and "nothing was spent" in out
    assert "--show-data-warnings" in out
    shown = runner.invoke(main, ["fit", str(path), *FAST, *extra, "--show-data-warnings"])
    assert shown.exit_code != 0
    assert f"'c' (e.g. '{SECRET}' on line 7)" in shown.stderr


def test_refusals_of_the_same_kind_are_the_same_bytes(runner, tmp_path):
    """Another text cell elsewhere, a missing cell elsewhere, a ragged line elsewhere: the
    same stderr as the first of its kind (only the kind of problem is said)."""
    path = tmp_path / "t.csv"
    pairs = [((SECRET, 7, 2), ("other text", 31, 0)), (("", 7, 2), ("NA", 40, 3)),
             (("1,2", 7, 2), ("5,6", 12, 0))]  # an extra field: a ragged line
    for first, second in pairs:
        outs = []
        for value, line, column in (first, second):
            _with_cell(path, value, line, column)
            result = runner.invoke(main, ["fit", str(path), *FAST])
            assert result.exit_code == 1
            outs.append((result.stdout, result.stderr))
        assert outs[0] == outs[1], outs


def test_missing_cells_and_ragged_lines_are_diagnosed_on_request_only(runner, tmp_path):
    path = _with_cell(tmp_path / "t.csv", "", line=7)
    result = runner.invoke(main, ["fit", str(path), *FAST])
    out = _data_free(result.stderr, path)
    assert result.exit_code == 1 and "missing or non-finite cells" in out
    assert not re.search(r"\b7\b", out) and "'c'" not in out and "1 cell" not in out
    shown = runner.invoke(main, ["fit", str(path), *FAST, "--show-data-warnings"])
    assert "'c' (1 cell, first on line 7)" in shown.stderr
    path = _with_cell(tmp_path / "r.csv", "1,2", line=7)
    result = runner.invoke(main, ["fit", str(path), *FAST])
    out = _data_free(result.stderr, path)
    assert result.exit_code == 1 and "not every line has as many fields" in out
    assert not re.search(r"\b7\b", out) and "5 fields" not in out
    shown = runner.invoke(main, ["fit", str(path), *FAST, "--show-data-warnings"])
    assert "line 7 has 5 fields, expected 4" in shown.stderr


# ----------------------------------------------------------------------------- refused fits
def test_a_fit_refused_after_its_booking_says_it_spent_and_hides_the_text(runner, tmp_path,
                                                                          monkeypatch):
    from privpca._registry import PRIVATE_ESTIMATORS

    def fail(*args, **kwargs):
        raise ValueError(f"a value of the data: {SECRET}")

    monkeypatch.setattr(PRIVATE_ESTIMATORS["analyze-gauss"], "_release", fail)
    path = tmp_path / "t.csv"
    path.write_text("\n".join(["a,b,c,d", *_rows()]) + "\n")
    result = runner.invoke(main, ["fit", str(path), *FAST])
    assert result.exit_code == 1 and SECRET not in result.stderr
    assert "counts as spent" in result.stderr and "--show-data-warnings" in result.stderr
    shown = runner.invoke(main, ["fit", str(path), *FAST, "--show-data-warnings"])
    assert shown.exit_code == 1 and SECRET in shown.stderr and "counts as spent" in shown.stderr


def test_a_fit_refused_before_its_booking_says_nothing_was_spent(runner, tmp_path):
    path = tmp_path / "t.npy"
    X = np.random.default_rng(0).standard_normal((100, 3))
    X[17, 1] = np.nan
    np.save(path, X)
    result = runner.invoke(main, ["fit", str(path), *FAST, "--stream"])
    assert result.exit_code == 1 and "NaN or infinity" in result.stderr
    assert "Nothing was spent" in result.stderr and "17" not in result.stderr
    np.save(path, np.nan_to_num(X))
    result = runner.invoke(main, ["fit", str(path), *FAST[2:], "-k", "4"])  # k > p: usage
    assert result.exit_code == 2 and "Nothing was spent" in result.stderr, result.output


def test_too_few_rows_for_a_private_bound_are_refused_in_shell_terms_before_any_spend(
        runner, tmp_path):
    err = _refused(runner, tmp_path / "t.csv", _rows(8, 3),
                   ["-k", "1", "--epsilon", "0.01", "--data-norm", "quantile"])
    assert "The table has 8 rows" in err and "Nothing was spent" in err
    assert "--centering none" in err and "--data-norm D" in err and "--epsilon" in err
    assert "centering=" not in err and "data_norm=" not in err  # no Python advice


def test_a_held_out_share_too_small_is_named_and_the_epsilon_that_works_given(runner, tmp_path):
    """DPPCA on 3 000 rows at ε = 1: its 10 % held-out share (300 rows) is short. The shell
    said "The table has 300 rows" and "no --epsilon up to 64", though --epsilon 1.25 fits
    (an outside tester)."""
    err = _refused(runner, tmp_path / "t.csv", _rows(3000, 4),
                   ["--method", "dp-pca", "--epsilon", "1", "--seed", "0",
                    "--holdout-fraction", "0.1"])
    assert "held-out share (--holdout-fraction 0.1) has 300 rows" in err
    assert "--epsilon 1.25 or more" in err and "--holdout-fraction" in err
    # The default, "auto", holds out the rows the searches need: the same table fits.
    fitted = runner.invoke(main, ["fit", str(tmp_path / "t.csv"), "--method", "dp-pca",
                                  "--epsilon", "1", "--seed", "0", "--holdout-fraction", "auto"])
    assert fitted.exit_code == 0 and "n = 3000" in fitted.output, fitted.output


def test_an_r_export_with_row_names_is_read_with_its_names_kept_out(runner, tmp_path):
    """R's write.table(df, sep=",") writes a header one field shorter than its rows (no cell
    over the row names). It was refused as ragged with no word of row names; now the names
    are a column with an empty header, refused as an identifier with the --columns to give,
    and --columns fits the features (an outside tester)."""
    path = tmp_path / "r.csv"
    rows = [f'"r{i}",' + line for i, line in enumerate(_rows(300, 3))]
    path.write_text("\n".join(['"a","b","c"', *rows]) + "\n")
    refused = runner.invoke(main, ["fit", str(path), "-k", "1", "--seed", "0", "--epsilon", "1"])
    err = " ".join(refused.stderr.split())
    assert refused.exit_code == 1 and "--columns a:c" in err, refused.output
    fitted = runner.invoke(main, ["fit", str(path), "-k", "1", "--seed", "0", "--epsilon", "1",
                                  "--columns", "a:c",
                                  "--data-norm", "10", "--centering", "none"])
    assert fitted.exit_code == 0, fitted.output


def test_every_component_kept_says_the_error_is_zero_not_uninformative(runner, tmp_path):
    path = tmp_path / "t.csv"
    path.write_text("\n".join(["a,b,c", *_rows(3000, 3)]) + "\n")
    result = runner.invoke(main, ["fit", str(path), "-k", "none", "--epsilon", "1", "--seed",
                                  "0"])
    assert result.exit_code == 0, result.output
    assert "0: every component is kept (k = p)" in result.output
    assert "not informative" not in result.output
