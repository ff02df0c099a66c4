"""``privpca fit`` on tables as people have them: ID and text columns, missing cells, Parquet
with nulls (``--columns``, ``--missing``; issue 29)."""

from __future__ import annotations

import json
import subprocess
import sys
import warnings

import click
import numpy as np
import pytest
from click.testing import CliRunner

from privpca.cli import main
from privpca.cli.columns import identifier_columns, resolve_columns, suggest_columns
from privpca.exceptions import DataDependentWarning, NonFiniteInputError

FEATURES = ["age", "income", "spend", "visits"]
#: Public settings that keep the fits small and fast; the defaults' own path is tested once.
FAST = ["-k", "1", "--epsilon", "1", "--centering", "none", "--data-norm", "1e5", "--seed",
        "3"]


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner()


def _numbers(n: int = 3000, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    z = rng.standard_normal(n)
    return np.column_stack([40 + 10 * (0.8 * z + 0.6 * rng.standard_normal(n)),
                            50_000 + 10_000 * z,
                            25_000 + 5_000 * (0.9 * z + 0.4 * rng.standard_normal(n)),
                            rng.integers(0, 10, n).astype(float)])


def _export(X: np.ndarray, holes: tuple[tuple[int, int], ...] = ()) -> str:
    """A CSV as exported from elsewhere: an ID column, two text columns, ``holes`` (row,
    feature) left empty or ``NA``."""
    lines = ["customer_id,age,city,income,plan,spend,visits"]
    for i, (age, income, spend, visits) in enumerate(X):
        cells = [f"{age:.6g}", f"{income:.8g}", f"{spend:.8g}", f"{visits:g}"]
        for k, (r, c) in enumerate(holes):
            if r == i:
                cells[c] = "" if k % 2 == 0 else "NA"
        lines.append(",".join([str(10_000 + i), cells[0], ["Paris", "Lyon"][i % 2], cells[1],
                               ["basic", "gold", "plus"][i % 3], cells[2], cells[3]]))
    return "\n".join(lines) + "\n"


def _payload(result) -> dict:
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


# ----------------------------------------------------------------------------- CSV, end to end
def test_a_real_csv_fits_its_chosen_columns_with_missing_cells_set_to_a_stated_value(
        runner, tmp_path):
    X = _numbers()
    holes = ((4, 0), (9, 2), (9, 3))
    path = tmp_path / "customers.csv"
    path.write_text(_export(X, holes))
    args = ["fit", str(path), *FAST, "--columns", "age,income,spend,visits", "--missing", "0"]
    payload = _payload(runner.invoke(main, args))
    assert payload["feature_names"] == FEATURES
    assert payload["n_samples"] == 3000 and payload["n_features"] == 4  # no row dropped
    assert payload["missing"] == 0.0

    # The same fit as the numeric table with those cells set to 0 (parsed as the CSV was).
    filled = np.array([[float(f"{v:.8g}") for v in row] for row in X])
    filled[:, 0] = [float(f"{v:.6g}") for v in X[:, 0]]
    for r, c in holes:
        filled[r, c] = 0.0
    np.save(tmp_path / "filled.npy", filled)
    ref = _payload(runner.invoke(main, ["fit", str(tmp_path / "filled.npy"), *FAST]))
    assert payload["components"] == ref["components"]
    assert payload["privacy"] == ref["privacy"]

    # Ranges, and the defaults' own path (private mean and bound).
    ranged = _payload(runner.invoke(main, ["fit", str(path), *FAST, "--columns", "1,3,5:6",
                                           "--missing", "0"]))
    assert ranged["feature_names"] == FEATURES and ranged["components"] == ref["components"]
    default = _payload(runner.invoke(main, ["fit", str(path), "--epsilon", "2", "--columns",
                                            "age,income,spend,visits", "--missing", "0"]))
    assert default["feature_names"] == FEATURES and default["privacy"]["epsilon"] == 2


def test_without_columns_the_text_and_id_columns_are_named_with_the_way_out(runner, tmp_path):
    path = tmp_path / "customers.csv"
    path.write_text(_export(_numbers(300)))
    result = runner.invoke(main, ["fit", str(path), *FAST])
    assert result.exit_code == 1 and "Traceback" not in result.output
    out = result.output
    # On defaults: what the header says (the identifier, by name), nothing read off values.
    assert "Column 'customer_id' looks like an identifier by name" in out
    assert "The other columns are age, city, income, plan, spend, visits" in out
    assert "--columns age:visits" in out and "Nothing was fitted and nothing was spent" in out
    assert "Paris" not in out and "line 2" not in out and "non-numeric" not in out
    # With --show-data-warnings (stderr for the data holder only): the text columns too.
    shown = runner.invoke(main, ["fit", str(path), *FAST, "--show-data-warnings"]).output
    assert ("non-numeric columns 'city' (e.g. 'Paris' on line 2), 'plan' (e.g. 'basic' on "
            "line 2)") in shown
    assert "The numeric feature columns are age, income, spend, visits" in shown
    assert "--columns age,income,spend,visits" in shown
    # The suggestion works as printed.
    spec = shown.split("Details")[1].split("--columns ")[1].split(" ")[0]
    assert _payload(runner.invoke(main, ["fit", str(path), *FAST, "--columns", spec]))


def test_text_found_past_the_first_rows_is_refused_with_the_same_message(runner, tmp_path):
    X = _numbers(1500)
    lines = ["a,b,c,d"] + [",".join(f"{v:.6g}" for v in row) for row in X]
    lines[1201] = lines[1201].rsplit(",", 1)[0] + ",n/a?"
    path = tmp_path / "late.csv"
    path.write_text("\n".join(lines) + "\n")
    result = runner.invoke(main, ["fit", str(path), *FAST])
    assert result.exit_code == 1
    assert "some cells are text" in result.output and "--columns SPEC" in result.output
    assert "n/a?" not in result.output and "1202" not in result.output
    result = runner.invoke(main, ["fit", str(path), *FAST, "--show-data-warnings"])
    assert result.exit_code == 1
    assert "non-numeric column 'd' (e.g. 'n/a?' on line 1202)" in result.output
    assert "--columns a:c" in result.output


@pytest.mark.parametrize("header", ["id", "ID", "Id", "user_id", "CUSTOMER_ID", "customerId",
                                    "CustomerID", "index", "Unnamed: 0", "", "__index_level_0__"])
def test_identifier_columns_are_refused_by_their_name_alone(runner, tmp_path, header):
    X = _numbers(300)
    # The identifier's values are ordinary floats: the name alone decides.
    path = tmp_path / "t.csv"
    path.write_text(f"{header},age,income,spend,visits\n" + "\n".join(
        ",".join(f"{v:.6g}" for v in row) for row in np.column_stack([X[:, 3], X])) + "\n")
    result = runner.invoke(main, ["fit", str(path), *FAST])
    assert result.exit_code == 1
    assert "like an identifier by name" in result.output
    assert "--columns age:visits" in result.output
    if header == "":
        assert "the blank first header cell: an index" in result.output
    assert _payload(runner.invoke(main, ["fit", str(path), *FAST, "--columns", "1:4"]))
    # Chosen explicitly, it is the user's feature (if it has a name to publish).
    chosen = runner.invoke(main, ["fit", str(path), *FAST, "--columns", "0:4"])
    if header == "":
        assert chosen.exit_code == 1 and "gives no name to column 0" in chosen.output
    else:
        assert _payload(chosen)


@pytest.mark.parametrize("name", ["paid", "valid", "width", "idle", "x", "identity", "ideal",
                                  "width_idx", "idx", "key", "X1", "level_0", "humid", "COVID"])
def test_names_that_merely_contain_id_are_features(name):
    assert identifier_columns([name, "a"]) == []


@pytest.mark.parametrize(("names", "expected"), [
    (["X", "a", "b"], [0]),          # R's read.csv name for write.csv's blank first cell
    (["", "X", "a"], [0, 1]),        # ... written again with its row names
    (["rownames", "X", "a"], [0, 1]),
    (["X", "Y", "Z"], []),           # coordinates: X is an axis
    (["X", "a", "y"], []),           # a design matrix and its response
    (["a", "X", "b"], []),           # X elsewhere is a feature
    (["a", "b", "", "c"], [2]),      # a blank cell anywhere names no feature
    ([" ", "a"], [0]),
    (["a", "Unnamed: 3"], [1]),
    (["...1", "a", "...3"], [0, 2]),  # readr
    (["row.names", "rowname", "ROWNAMES", "a"], [0, 1, 2]),
    (["subject.id", "Customer ID", "uuid", "a"], [0, 1, 2]),
])
def test_the_identifier_rule_reads_names_and_the_position_of_r_s_x(names, expected):
    assert identifier_columns(names) == expected


def _r_table(n: int = 300) -> np.ndarray:
    """Three features (the row number, 1…n, is written beside them)."""
    rng = np.random.default_rng(5)
    z = rng.standard_normal(n)
    return np.column_stack([z, 0.9 * z + 0.3 * rng.standard_normal(n),
                            0.5 * rng.standard_normal(n)])


@pytest.mark.parametrize("style", ["write.csv", "Rdatasets", "pandas", "readr", "R twice",
                                   "blank in the middle"])
def test_exported_row_numbers_are_never_suggested_as_features(runner, tmp_path, style):
    """R's ``write.csv`` (``""`` heading the row names 1…n), Rdatasets (``rownames``), pandas'
    ``Unnamed: 0``, readr's ``...1``, R's ``X`` and a blank cell in the middle: refused by the
    name, and the advice, fitted as printed, leaves the row numbers out."""
    X = _r_table()
    n = len(X)
    rows = [[f"{v:.6g}" for v in row] for row in X]
    if style == "write.csv":  # R quotes every name and the row names
        header = '"","a","b","c"'
        lines = [f'"{i + 1}",' + ",".join(r) for i, r in enumerate(rows)]
    elif style == "R twice":  # read.csv named the blank cell X; written again with row names
        header = '"","X","a","b","c"'
        lines = [f'"{i + 1}",{i + 1},' + ",".join(r) for i, r in enumerate(rows)]
    elif style == "blank in the middle":
        header = "a,,b,c"
        lines = [f"{r[0]},{i + 1},{r[1]},{r[2]}" for i, r in enumerate(rows)]
    else:
        first = {"Rdatasets": "rownames", "pandas": "Unnamed: 0", "readr": "...1"}[style]
        header = f"{first},a,b,c"
        lines = [f"{i + 1 - (style == 'pandas')}," + ",".join(r) for i, r in enumerate(rows)]
    path = tmp_path / "export.csv"
    path.write_text("\n".join([header, *lines]) + "\n")
    result = runner.invoke(main, ["fit", str(path), *FAST])
    out = result.output
    assert result.exit_code == 1 and "by name (a key or row number, not a feature" in out
    assert ("like an identifier" if style != "R twice" else "like identifiers") in out
    assert ("Keep it out" if style != "R twice" else "Keep them out") + " with --columns" in out
    assert "Nothing was fitted and nothing was spent" in out
    if style in ("write.csv", "R twice"):
        assert "the blank first header cell: an index" in out
    if style == "blank in the middle":
        assert "(the header gives no name to column 1, 0-based)" in out
    assert "df.drop" not in out and "X.drop" not in out  # shell terms, not Python's
    spec = out.split("fit them with --columns ")[1].split(" ")[0]
    assert spec in ("a:c", "a,b,c")
    payload = _payload(runner.invoke(main, ["fit", str(path), *FAST, "--columns", spec]))
    assert payload["feature_names"] == ["a", "b", "c"] and payload["n_samples"] == n


def test_pandas_default_header_with_its_index_is_refused_as_an_index(runner, tmp_path):
    X = _numbers(300)
    path = tmp_path / "pandas.csv"
    path.write_text(",0,1,2,3\n" + "\n".join(f"{i}," + ",".join(f"{v:.6g}" for v in row)
                                             for i, row in enumerate(X)) + "\n")
    result = runner.invoke(main, ["fit", str(path), *FAST])
    # Only numbers on line 1: it may be a record, so it is refused unless --header says.
    assert result.exit_code == 1 and "line 1 holds no name" in result.output
    result = runner.invoke(main, ["fit", str(path), *FAST, "--header"])
    assert result.exit_code == 1 and "blank first header cell" in result.output
    payload = _payload(runner.invoke(main, ["fit", str(path), *FAST, "--header", "--columns",
                                            "0:3"]))
    # "0" is a header name (column 1), which wins over the index reading (column 0).
    assert payload["feature_names"] == ["0", "1", "2", "3"]


# ----------------------------------------------------------------------------- --columns
NAMES = ["id", "age", "city", "income", "plan", "spend", "visits"]


@pytest.mark.parametrize(("spec", "expected"), [
    ("age", [1]),
    ("age,income,spend", [1, 3, 5]),
    ("spend,age", [5, 1]),               # the order given
    ("2:5", [2, 3, 4, 5]),               # inclusive, as pandas' .loc
    ("age:income", [1, 2, 3]),
    ("age:3", [1, 2, 3]),
    (":city", [0, 1, 2]),
    ("spend:", [5, 6]),
    (" 1 , visits ", [1, 6]),
    ("6,0", [6, 0]),
])
def test_columns_by_name_index_and_range(spec, expected):
    assert resolve_columns(spec, NAMES, "t.csv") == expected


@pytest.mark.parametrize(("spec", "message"), [
    ("incme", "no column 'incme' in t.csv. Did you mean 'income'? Its columns: id, age, city"),
    ("age,1", "selects column 'age' (index 1) twice ('age' and '1')"),
    ("age:city,2", "selects column 'city' (index 2) twice"),
    ("7", "index 7 is out of range; t.csv has 7 columns (indices 0 to 6)"),
    ("spend:age", "the range 'spend:age' runs backwards"),
    ("age:salary", "no column 'salary'"),
    ("age,,income", "an empty item"),
    ("-1", "no column '-1'"),
])
def test_bad_columns_are_refused_clearly(spec, message):
    with pytest.raises(click.UsageError) as info:
        resolve_columns(spec, NAMES, "t.csv")
    assert message in info.value.message


def test_a_header_name_wins_over_an_index_and_duplicate_names_need_indices():
    names = ["b", "3", "a", "c", "d"]
    assert resolve_columns("3", names) == [1]
    assert resolve_columns("4", names) == [4]
    assert resolve_columns("3:c", names) == [1, 2, 3]
    assert resolve_columns("a:b", ["x", "a:b", "a", "b"]) == [1]  # the name, not the range
    with pytest.raises(click.UsageError, match="heads 2 columns"):
        resolve_columns("a", ["a", "b", "a"])


def test_the_suggested_columns_read_back_as_the_same_columns():
    names = ["id", "a", "b", "c", "text", "d", "x,y", "e f", "g", "h", "i"]
    chosen = [1, 2, 3, 6, 7, 10]
    spec = suggest_columns(chosen, names)
    assert spec == "'a:c,6,e f,i'"  # a run as a range; a name with a comma by its index
    assert resolve_columns(spec.strip("'"), names) == chosen


def test_columns_on_the_cli_keep_their_order_and_names(runner, tmp_path):
    path = tmp_path / "t.csv"
    X = _numbers(300)
    path.write_text("b,3,a,c\n" + "\n".join(",".join(f"{v:.6g}" for v in row) for row in X))
    payload = _payload(runner.invoke(main, ["fit", str(path), *FAST, "--columns", "c,3"]))
    assert payload["feature_names"] == ["c", "3"] and len(payload["components"][0]) == 2
    result = runner.invoke(main, ["fit", str(path), *FAST, "--columns", "3,b,e"])
    assert result.exit_code == 2 and "no column 'e' in t.csv" in result.output
    npy = tmp_path / "t.npy"
    np.save(npy, X)
    payload = _payload(runner.invoke(main, ["fit", str(npy), *FAST, "--columns", "3,0:1"]))
    assert payload["feature_names"] == ["x3", "x0", "x1"]


# ----------------------------------------------------------------------------- --missing
def test_missing_cells_are_refused_by_default_naming_columns_and_the_way_out(runner, tmp_path):
    path = tmp_path / "holes.csv"
    path.write_text(_export(_numbers(300), ((4, 0), (9, 2), (12, 2))))
    result = runner.invoke(main, ["fit", str(path), *FAST, "--columns", "age,income,spend"])
    assert result.exit_code == 1
    assert "missing or non-finite cells" in result.output
    assert "does not impute" in result.output and "--missing VALUE" in result.output
    # What VALUE is: one value for every column's gaps, chosen without looking at the table.
    said = " ".join(result.output.split())
    assert "The same VALUE fills every column's missing cells" in said
    assert "chosen without looking at this table" in said and "leaks" in said
    assert "'age'" not in result.output and "on line" not in result.output
    shown = runner.invoke(main, ["fit", str(path), *FAST, "--columns", "age,income,spend",
                                 "--show-data-warnings"])
    assert ("missing or non-finite values (empty, NaN or infinity) in columns 'age' (1 cell, "
            "first on line 6), 'spend' (2 cells, first on line 11)") in shown.output


def test_infinities_stay_refused_with_a_missing_value(runner, tmp_path):
    path = tmp_path / "inf.csv"
    path.write_text("a,b,c\n1,2,inf\n2,,4\n" + "3,4,5\n" * 50)
    result = runner.invoke(main, ["fit", str(path), *FAST, "--missing", "0"])
    assert result.exit_code == 1
    assert "has infinite cells" in result.output and "'c'" not in result.output
    result = runner.invoke(main, ["fit", str(path), *FAST, "--missing", "0",
                                  "--show-data-warnings"])
    assert "infinite values in column 'c' (1 cell, first on line 2)" in result.output
    assert "'b'" not in result.output
    result = runner.invoke(main, ["fit", str(path), *FAST, "--missing", "nan"])
    assert result.exit_code == 2 and "neither 'refuse' nor a finite number" in result.output


def test_the_output_says_nothing_about_how_many_cells_were_filled(runner, tmp_path):
    X = _numbers(2000)
    X[7, 2] = 0.0  # the value --missing 0 will put in the hole of the other table
    full, holed = tmp_path / "full.csv", tmp_path / "holed.csv"
    full.write_text(_export(X))
    holed.write_text(_export(X, ((7, 2),)))
    args = [*FAST, "--columns", "age,income,spend,visits", "--missing", "0"]
    a = runner.invoke(main, ["fit", str(full), *args])
    b = runner.invoke(main, ["fit", str(holed), *args])
    assert a.stdout == b.stdout  # the JSON: the policy, no count
    assert a.stderr == b.stderr  # byte for byte: no warning without the flag
    payload = _payload(b)
    assert payload["missing"] == 0.0
    assert not any("fill" in key or "impute" in key for key in payload)
    shown = runner.invoke(main, ["fit", str(holed), *args, "--show-data-warnings"])
    assert "warning: DataDependentWarning: 1 missing cells were set to 0 (--missing): " \
           "'spend' (1)." in shown.stderr
    assert shown.stdout == b.stdout
    refused = _payload(runner.invoke(main, ["fit", str(full), *FAST, "--columns",
                                            "age,income,spend,visits"]))
    assert refused["missing"] == "refuse"


# ----------------------------------------------------------------------------- Parquet
def _parquet(tmp_path, X, *, nulls=(), files=2):
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    folder = tmp_path / "pq"
    folder.mkdir()
    n = X.shape[0]
    for i, part in enumerate(np.array_split(np.arange(n), files)):
        columns = {"row_id": pa.array(part, pa.int64()),
                   "city": pa.array([["Paris", "Lyon"][r % 2] for r in part])}
        for j, name in enumerate(FEATURES):
            mask = np.array([(r, j) in nulls for r in part])
            columns[name] = pa.array(X[part, j], pa.float64(), mask=mask)
        pq.write_table(pa.table(columns), folder / f"part-{i}.parquet", row_group_size=700)
    return folder


def test_parquet_with_text_id_and_nulls_fits_its_chosen_columns(runner, tmp_path):
    X = _numbers(3000)
    holes = ((10, 0), (1600, 2), (2900, 2))
    folder = _parquet(tmp_path, X, nulls=holes)
    result = runner.invoke(main, ["fit", str(folder), *FAST])
    assert result.exit_code == 1
    assert "non-numeric column 'city' (string)" in result.output
    assert "Column 'row_id' looks like an identifier by name" in result.output
    assert "--columns age:visits" in result.output
    result = runner.invoke(main, ["fit", str(folder), *FAST, "--columns", "age:visits"])
    assert result.exit_code == 1
    assert "missing cells (nulls)" in result.output and "--missing VALUE" in result.output
    assert "chosen without looking at this table" in " ".join(result.output.split())
    assert "'age'" not in result.output and "2 nulls" not in result.output
    result = runner.invoke(main, ["fit", str(folder), *FAST, "--columns", "age:visits",
                                  "--show-data-warnings"])
    assert "missing cells in columns 'age' (1 null), 'spend' (2 nulls)" in result.output
    result = runner.invoke(main, ["fit", str(folder), *FAST, "--columns", "city,age"])
    assert result.exit_code == 1 and "selects non-numeric column 'city' (string)" in result.output

    got = runner.invoke(main, ["fit", str(folder), *FAST, "--columns", "age:visits",
                               "--missing", "-1.5"])
    payload = _payload(got)
    assert payload["feature_names"] == FEATURES and payload["missing"] == -1.5
    filled = X.copy()
    for r, c in holes:
        filled[r, c] = -1.5
    np.save(tmp_path / "filled.npy", filled)
    ref = _payload(runner.invoke(main, ["fit", str(tmp_path / "filled.npy"), *FAST]))
    np.testing.assert_allclose(payload["components"], ref["components"], rtol=0, atol=1e-8)
    shown = runner.invoke(main, ["fit", str(folder), *FAST, "--columns", "age:visits",
                                 "--missing", "-1.5", "--show-data-warnings"])
    assert shown.stderr.count("DataDependentWarning") == 1
    assert "3 missing cells (null or NaN) were read as -1.5: 'age' (1), 'spend' (2)." \
        in shown.stderr
    assert "DataDependentWarning" not in got.stderr


def _fill(X, holes, value):
    out = X.copy()
    for r, c in holes:
        out[r, c] = value
    return out


def test_parquet_stderr_is_the_same_with_and_without_nulls(runner, tmp_path):
    X = _numbers(2000)
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    holed = _parquet(tmp_path / "a", _fill(X, ((5, 1),), 0.0), nulls=((5, 1),))
    full = _parquet(tmp_path / "b", _fill(X, ((5, 1),), 0.0))
    args = [*FAST, "--columns", "age:visits", "--missing", "0"]
    a = runner.invoke(main, ["fit", str(holed), *args])
    b = runner.invoke(main, ["fit", str(full), *args])
    assert a.exit_code == b.exit_code == 0
    assert a.stdout == b.stdout and a.stderr == b.stderr


def test_parquet_source_reads_and_checks_only_the_selected_columns(tmp_path):
    from privpca.streaming import ParquetSource

    X = _numbers(1000)
    folder = _parquet(tmp_path, X, nulls=((3, 1),))
    with pytest.raises(ValueError, match=r"Parquet columns \['city'\] are not numeric"):
        ParquetSource(folder)
    with pytest.raises(ValueError, match=r"No Parquet column \['salary'\]"):
        ParquetSource(folder, columns=["age", "salary"])
    source = ParquetSource(folder, columns=["spend", "age"], block_rows=300)
    assert source.n_features == 2 and source.null_counts() == {"spend": 0, "age": 0}
    assert ParquetSource(folder, columns=["income"]).null_counts() == {"income": 1}
    blocks = np.vstack(list(source.blocks()))
    np.testing.assert_array_equal(blocks, X[:, [2, 0]])
    with pytest.raises(NonFiniteInputError):
        list(ParquetSource(folder, columns=["income"]).blocks())
    filled = ParquetSource(folder, columns=["income", "visits"], fill_value=7.0, block_rows=300)
    with pytest.warns(DataDependentWarning, match=r"1 missing cells .* read as 7: 'income'"):
        first = np.vstack(list(filled.blocks()))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # said once, not at every pass
        again = np.vstack(list(filled.blocks()))
        part = np.vstack(list(filled.blocks_in([(0, 10)])))
    np.testing.assert_array_equal(first, again)
    assert first[3, 0] == 7.0 and part[3, 0] == 7.0
    np.testing.assert_array_equal(np.delete(first, 3, 0), np.delete(X[:, [1, 3]], 3, 0))
    assert [(name, numeric) for name, _, numeric in ParquetSource.schema(folder)] == [
        ("row_id", True), ("city", False), ("age", True), ("income", True), ("spend", True),
        ("visits", True)]


# ----------------------------------------------------------------------------- streamed .npy
def test_a_streamed_npy_selects_and_fills_block_by_block(runner, tmp_path):
    X = _numbers(3000)
    holed = X.copy()
    holed[[3, 2000], [1, 3]] = np.nan
    np.save(tmp_path / "holed.npy", np.column_stack([holed, np.arange(3000.0)]))
    filled = X.copy()
    filled[[3, 2000], [1, 3]] = 0.0
    np.save(tmp_path / "filled.npy", filled)
    ref = _payload(runner.invoke(main, ["fit", str(tmp_path / "filled.npy"), *FAST]))
    got = _payload(runner.invoke(main, ["fit", str(tmp_path / "holed.npy"), *FAST, "--stream",
                                        "--columns", "0:3", "--missing", "0"]))
    assert got["feature_names"] == ["x0", "x1", "x2", "x3"]
    np.testing.assert_allclose(got["components"], ref["components"], rtol=0, atol=1e-8)
    refused = runner.invoke(main, ["fit", str(tmp_path / "holed.npy"), *FAST, "--stream",
                                   "--columns", "0:3"])
    assert refused.exit_code == 1 and "NaN or infinity" in refused.output


# ----------------------------------------------------------------------------- --scheduler
@pytest.mark.slow  # a local cluster and three fresh interpreters: about 90 s on two cores
def test_columns_and_missing_on_a_dask_scheduler(tmp_path, cluster_client):
    X = _numbers(3000)
    holes = ((10, 0), (2500, 2))
    folder = _parquet(tmp_path, X, nulls=holes)
    np.save(tmp_path / "t.npy", np.column_stack([np.arange(3000.0), _fill(X, holes, np.nan)]))
    np.save(tmp_path / "filled.npy", _fill(X, holes, 0.0))
    address = cluster_client.scheduler.address
    outputs = []
    for args in ([tmp_path / "filled.npy"],
                 [folder, "--scheduler", address, "--columns", "age:visits", "--missing", "0"],
                 [tmp_path / "t.npy", "--scheduler", address, "--columns", "1:4", "--missing",
                  "0"]):
        out = tmp_path / f"{len(outputs)}.json"
        done = subprocess.run([sys.executable, "-m", "privpca", "fit", *map(str, args), *FAST,
                               "-o", str(out)], capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr
        outputs.append(json.loads(out.read_text()))
    for got in outputs[1:]:
        np.testing.assert_allclose(got["components"], outputs[0]["components"], rtol=0,
                                   atol=1e-8)
        assert got["missing"] == 0.0
    assert outputs[1]["feature_names"] == FEATURES


# ------------------------------------------------------------------- formats people export
def test_tab_separated_and_european_csvs_fit_as_the_comma_csv(runner, tmp_path):
    """A .tsv, and a ';'-separated file with decimal commas (a European spreadsheet's CSV),
    read as the same numbers as the comma CSV: the same fit, bit for bit."""
    X = np.round(_numbers(), 3)
    rows = [[f"{v:.3f}" for v in row] for row in X]
    (tmp_path / "t.csv").write_text("\n".join([",".join(FEATURES)]
                                              + [",".join(r) for r in rows]) + "\n")
    (tmp_path / "t.tsv").write_text("\n".join(["\t".join(FEATURES)]
                                              + ["\t".join(r) for r in rows]) + "\n")
    (tmp_path / "eu.csv").write_text("\n".join([";".join(FEATURES)] + [
        ";".join(c.replace(".", ",") for c in r) for r in rows]) + "\n")
    ref = _payload(runner.invoke(main, ["fit", str(tmp_path / "t.csv"), *FAST]))
    for name in ("t.tsv", "eu.csv"):
        payload = _payload(runner.invoke(main, ["fit", str(tmp_path / name), *FAST]))
        assert payload["feature_names"] == FEATURES
        assert payload["components"] == ref["components"], name


def test_an_unknown_format_is_refused_naming_every_format_read(runner, tmp_path):
    path = tmp_path / "table.xlsx"
    path.write_bytes(b"PK\x03\x04")
    result = runner.invoke(main, ["fit", str(path), *FAST])
    assert result.exit_code != 0
    for word in (".csv", ".tsv", ".npy", "Parquet", "Zarr"):
        assert word in result.output
