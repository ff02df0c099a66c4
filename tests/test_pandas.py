"""pandas and scikit-learn habits: output names, set_output, Pipeline, ColumnTransformer.

scikit-learn's checks of feature names and of ``set_output`` are not part of
``check_estimator``'s list: they are run here on every estimator. Those that need pandas skip
(SkipTest) where it is not installed.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from sklearn.compose import ColumnTransformer
from sklearn.exceptions import ConvergenceWarning
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.utils.estimator_checks import (
    check_dataframe_column_names_consistency,
    check_get_feature_names_out_error,
    check_global_output_transform_pandas,
    check_set_output_transform,
    check_set_output_transform_pandas,
    check_transformer_get_feature_names_out,
    check_transformer_get_feature_names_out_pandas,
)

import privpca
from conftest import PAPER
from privpca import PrivacyLedger, RowClippingWarning
from privpca._registry import PRIVATE_ESTIMATORS

#: Every public estimator, on settings that fit the checks' tens of rows (the papers'
#: setting: public centre and bound; the defaults' private bound needs hundreds of rows).
ESTIMATORS = [
    privpca.PCA(options=PAPER),
    privpca.PCA(model="local", options=PAPER),
    privpca.AnalyzeGaussPCA(**PAPER),
    privpca.ModSuLQPCA(**PAPER),
    privpca.NoisyPowerPCA(n_iter=3, **PAPER),
    privpca.BinghamPCA(n_iter=10, burn_in=0, **PAPER),
    privpca.LocalGaussianPCA(**PAPER),
    privpca.LocalSparsePCA(**PAPER),
    privpca.DPSPCA(n_iter=2, **PAPER),
    privpca.PrivateOjaPCA(amplification="none", centering=None, clip_norm=1.0),
    privpca.DPPCA(n_subsets=2, min_subset_size=1, batch_size=8, centering=None),
    privpca.OjaPCA(),
    privpca.SparsePCA(),
]

CHECKS = [
    check_get_feature_names_out_error,
    check_transformer_get_feature_names_out,
    check_transformer_get_feature_names_out_pandas,
    check_set_output_transform,
    check_set_output_transform_pandas,
    check_global_output_transform_pandas,
    check_dataframe_column_names_consistency,
]


def test_every_public_estimator_is_covered():
    covered = {type(est).__name__ for est in ESTIMATORS}
    public = {name for name in privpca.__all__ if isinstance(getattr(privpca, name), type)
              and hasattr(getattr(privpca, name), "transform")}
    assert covered == public


@pytest.mark.parametrize("check", CHECKS, ids=lambda c: c.__name__)
@pytest.mark.parametrize("estimator", ESTIMATORS, ids=repr)
def test_sklearn_output_checks(estimator, check):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RowClippingWarning)
        warnings.simplefilter("ignore", ConvergenceWarning)
        # The pandas checks transform arrays after a DataFrame fit (and back) on purpose:
        # scikit-learn's own PCA warns the same there.
        warnings.filterwarnings("ignore", "X (does not have valid|has) feature names",
                                UserWarning)
        check(type(estimator).__name__, estimator)


def test_output_names_follow_scikit_learns_pca():
    X = np.random.default_rng(0).standard_normal((40, 4)) / 4
    est = privpca.AnalyzeGaussPCA(**PAPER, ledger=PrivacyLedger()).fit(X)
    assert list(est.get_feature_names_out()) == ["analyzegausspca0", "analyzegausspca1"]
    est = privpca.PCA(3, options=PAPER, ledger=PrivacyLedger()).fit(X)
    assert list(est.get_feature_names_out()) == ["pca0", "pca1", "pca2"]


# -------------------------------------------------------------------------- with pandas
@pytest.fixture(scope="module")
def frame():
    pd = pytest.importorskip("pandas")
    rng = np.random.default_rng(1)
    X = rng.standard_normal((4_000, 4)) @ np.diag([3.0, 2.0, 1.0, 0.5]) + [170, 70, 40, 3]
    return pd.DataFrame(X, columns=["height", "weight", "age", "children"],
                        index=pd.RangeIndex(100, 4_100, name="person"))


def test_fit_a_dataframe_with_named_columns(frame):
    pd = pytest.importorskip("pandas")
    est = privpca.PCA(2, epsilon=1, ledger=PrivacyLedger()).fit(frame)
    assert list(est.feature_names_in_) == list(frame.columns)
    assert list(est.estimator_.feature_names_in_) == list(frame.columns)
    assert list(est.get_feature_names_out()) == ["pca0", "pca1"]
    out = est.set_output(transform="pandas").transform(frame)
    assert isinstance(out, pd.DataFrame)
    assert list(out.columns) == ["pca0", "pca1"]
    assert out.index.equals(frame.index)
    np.testing.assert_array_equal(out.to_numpy(), est.estimator_.transform(frame.to_numpy()))


def test_a_pipeline_with_pandas_output(frame):
    pd = pytest.importorskip("pandas")
    pipe = Pipeline([("scale", StandardScaler()),
                     ("pca", privpca.PCA(2, epsilon=1, random_state=0,
                                         ledger=PrivacyLedger()))])
    out = pipe.set_output(transform="pandas").fit_transform(frame)
    assert isinstance(out, pd.DataFrame)
    assert list(out.columns) == ["pca0", "pca1"]
    assert list(pipe.get_feature_names_out()) == ["pca0", "pca1"]
    assert list(pipe[-1].feature_names_in_) == list(frame.columns)  # the scaler keeps them


def test_a_column_transformer_with_pandas_output(frame):
    pd = pytest.importorskip("pandas")
    table = frame.assign(city=np.where(np.arange(len(frame)) % 2, "Lyon", "Oslo"))
    ct = ColumnTransformer([
        ("body", privpca.AnalyzeGaussPCA(2, epsilon=1, random_state=0, ledger=PrivacyLedger()),
         ["height", "weight", "age"]),
        ("all", privpca.PCA(1, epsilon=1, random_state=0, ledger=PrivacyLedger()),
         ["height", "weight", "age", "children"]),
        ("city", "passthrough", ["city"]),
    ]).set_output(transform="pandas")
    out = ct.fit_transform(table)
    assert isinstance(out, pd.DataFrame)
    assert list(out.columns) == ["body__analyzegausspca0", "body__analyzegausspca1",
                                 "all__pca0", "city__city"]
    assert out.index.equals(frame.index)
    assert list(ct.named_transformers_["body"].feature_names_in_) == ["height", "weight", "age"]


# ------------------------------------------------------------ identifier columns, by name
@pytest.mark.parametrize("name", ["id", "rownames", "row.names", "Unnamed: 0", "", " ",
                                  "customer_id", "CustomerID", "userId", "index", "...1",
                                  "__index_level_0__"])
def test_a_dataframe_with_an_identifier_column_is_refused_by_its_name(frame, name):
    # The values are ordinary numbers (the row number): the name alone decides.
    table = frame.reset_index(drop=True)
    table.insert(0, name, np.arange(1, len(table) + 1, dtype=float))
    ledger = PrivacyLedger()
    with pytest.raises(ValueError, match="by name") as info:
        privpca.PCA(2, epsilon=1, ledger=ledger).fit(table)
    message = str(info.value)
    assert repr(name) in message and "looks like an identifier" in message
    assert f"X.drop(columns=[{name!r}])" in message  # the way out, in Python's terms
    assert "--columns" not in message
    assert "nothing was spent" in message and len(ledger) == 0
    # Dropped as told, the rest fits; the same values without names (NumPy) are not checked.
    est = privpca.PCA(2, epsilon=1, ledger=PrivacyLedger()).fit(table.drop(columns=[name]))
    assert list(est.feature_names_in_) == list(frame.columns)
    privpca.PCA(2, epsilon=1, ledger=PrivacyLedger()).fit(table.to_numpy())


def test_every_identifier_is_named_and_the_estimators_refuse_them_too(frame):
    # reset_index() of an unnamed index makes the column "index" (here the index is named).
    table = frame.reset_index().rename(columns={"person": "index"}).assign(record_id=0.0)
    with pytest.raises(ValueError, match=r"Columns 'index', 'record_id' look like "
                                         r"identifiers") as info:
        privpca.AnalyzeGaussPCA(2, **PAPER, ledger=PrivacyLedger()).fit(table)
    assert "X.drop(columns=['index', 'record_id'])" in str(info.value)
    assert str(info.value).startswith("AnalyzeGaussPCA: ")


@pytest.mark.parametrize("cls", [*PRIVATE_ESTIMATORS.values(), privpca.OjaPCA,
                                 privpca.SparsePCA], ids=lambda c: c.__name__)
def test_every_estimator_refuses_an_identifier_before_it_spends(frame, cls):
    # Every fit reads an in-memory table through one door (privpca._validation.fit_input);
    # tests/test_architecture.py bans the others.
    table = frame.reset_index(drop=True)
    table.insert(0, "Unnamed: 0", np.arange(1.0, len(table) + 1))
    ledger = PrivacyLedger()
    kwargs = {"ledger": ledger} if "ledger" in cls().get_params() else {}
    with pytest.raises(ValueError, match="Column 'Unnamed: 0' looks like an identifier"):
        cls(n_components=1, **kwargs).fit(table)
    assert len(ledger) == 0


@pytest.mark.parametrize("cls", [*PRIVATE_ESTIMATORS.values(), privpca.OjaPCA,
                                 privpca.SparsePCA], ids=lambda c: c.__name__)
def test_every_estimator_names_text_columns_before_it_spends(frame, cls):
    """By the columns' dtypes (the schema), never a cell's value."""
    table = frame.reset_index(drop=True).assign(make="audi")
    table["plan"] = table["make"].astype("category")
    ledger = PrivacyLedger()
    kwargs = {"ledger": ledger} if "ledger" in cls().get_params() else {}
    with pytest.raises(ValueError, match=r"column\(s\) 'make', 'plan' hold text") as info:
        cls(n_components=1, **kwargs).fit(table)
    assert "audi" not in str(info.value)
    assert len(ledger) == 0


def test_a_date_column_is_named_with_a_way_to_make_it_a_number(frame):
    """A datetime column is neither text nor a category: the refusal says how to turn it
    into a number with a public origin (its own minimum would be read off the data)."""
    table = frame.reset_index(drop=True)
    pd = pytest.importorskip("pandas")
    table["when"] = pd.date_range("2020-01-01", periods=len(table))
    with pytest.raises(ValueError, match=r"Dates and times \('when'\).*public origin"):
        privpca.AnalyzeGaussPCA(1, ledger=PrivacyLedger()).fit(table)


def test_missing_cells_take_a_public_value_in_a_pipeline_as_the_shell_does(frame):
    """The refusal's way out works: scikit-learn's constant imputer before the estimator is
    the same fit as the table with those cells set to the value (the shell's --missing)."""
    from sklearn.impute import SimpleImputer

    holed = frame.copy()
    holed.iloc[3, 1] = np.nan
    with pytest.raises(ValueError, match="SimpleImputer"):
        privpca.AnalyzeGaussPCA(2, **PAPER, random_state=0).fit(holed)
    pipe = Pipeline([("fill", SimpleImputer(strategy="constant", fill_value=0.0)),
                     ("pca", privpca.AnalyzeGaussPCA(2, **PAPER, random_state=0))]).fit(holed)
    filled = privpca.AnalyzeGaussPCA(2, **PAPER, random_state=0).fit(holed.fillna(0.0))
    np.testing.assert_array_equal(pipe["pca"].components_, filled.components_)


@pytest.mark.parametrize("columns", [["width_idx", "ideal", "key", "valid"],
                                     ["X", "Y", "Z", "width"], ["X1", "X2", "X3", "X4"],
                                     ["idle", "paid", "identity", "humid"]])
def test_features_whose_names_merely_resemble_identifiers_fit(frame, columns):
    pd = pytest.importorskip("pandas")
    table = pd.DataFrame(frame.to_numpy(), columns=columns)
    est = privpca.PCA(2, epsilon=1, ledger=PrivacyLedger()).fit(table)
    assert list(est.feature_names_in_) == columns


def test_r_s_x_heading_a_table_is_an_identifier_but_not_beside_a_y(frame):
    pd = pytest.importorskip("pandas")
    X = frame.to_numpy()
    with pytest.raises(ValueError, match="Column 'X' looks like an identifier"):
        privpca.PCA(2, epsilon=1, ledger=PrivacyLedger()).fit(
            pd.DataFrame(X, columns=["X", "a", "b", "c"]))
    for columns in (["a", "X", "b", "c"], ["X", "a", "b", "y"]):
        privpca.PCA(2, epsilon=1, ledger=PrivacyLedger()).fit(pd.DataFrame(X, columns=columns))
