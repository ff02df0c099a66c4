"""Input validation, clipping and RNG handling."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from privpca._validation import (
    check_data,
    check_delta,
    check_epsilon,
    check_n_components,
    check_norm_bound,
    clip_rows,
    row_norms,
)
from privpca.exceptions import RowClippingWarning
from privpca.mechanisms.randomness import check_random_state


@pytest.mark.parametrize(
    ("func", "value", "match"),
    [
        (
            check_epsilon,
            -1,
            r"'epsilon' parameter must be a float in the range \[1e-09, 1e\+12\]\. Got -1",
        ),
        (check_epsilon, 0.0, r"range \[1e-09, 1e\+12\]"),
        (check_epsilon, 1e13, r"Got 1e\+13|Got 10000000000000"),
        (check_norm_bound, 1e300, r"'data_norm' parameter must be a float in the range "
                                  r"\[1e-60, 1e\+60\]\. Got 1e\+300"),
        (check_norm_bound, 1e-300, r"Got 1e-300"),
        (check_norm_bound, 0.0, r"Got 0.0"),
        (check_norm_bound, float("nan"), r"Got nan"),
        (check_epsilon, float("nan"), r"Got nan"),
        (check_epsilon, float("inf"), r"Got inf"),
        (check_epsilon, "1", r"Got '1'"),
        (check_epsilon, True, r"Got True"),
        (check_delta, 0.0, r"'delta' parameter must be a float in the range \(0, 1\)"),
        (check_delta, 1.0, r"range \(0, 1\)"),
        (check_delta, -0.1, r"Got -0.1"),
    ],
)
def test_privacy_parameters_refused(func, value, match):
    with pytest.raises(ValueError, match=match):
        func(value)


def test_error_names_the_estimator():
    class LocalGaussianPCA:
        pass

    with pytest.raises(ValueError, match="'epsilon' parameter of LocalGaussianPCA must be"):
        check_epsilon(-1, owner=LocalGaussianPCA())


def test_valid_privacy_parameters_pass():
    assert check_epsilon(0.5) == 0.5
    assert check_epsilon(np.float32(2.0)) == 2.0
    assert check_delta(1e-6) == 1e-6


@pytest.mark.parametrize(("k", "p"), [(0, 5), (6, 5), (2.5, 5), (-1, 5)])
def test_n_components_out_of_range(k, p):
    with pytest.raises(ValueError, match="n_components"):
        check_n_components(k, p)


def test_check_data_refuses_nan_inf_and_bad_shapes():
    with pytest.raises(ValueError, match=r"contains NaN or infinity\. ") as err:
        check_data([[1.0, np.nan], [0.0, 1.0], [np.inf, 0.0]])
    assert "2" not in str(err.value)  # no count of the data in the message
    with pytest.raises(ValueError, match="2-D"):
        check_data([1.0, 2.0])
    with pytest.raises(ValueError, match="empty"):
        check_data(np.zeros((0, 3)))
    with pytest.raises(ValueError, match="numeric"):
        check_data([["a", "b"]])


def test_clip_rows_warns_without_data_values_and_leaves_input_alone():
    X = np.array([[3.0, 4.0], [0.3, 0.4], [0.0, 2.0], [0.6, 0.8]])
    original = X.copy()
    with pytest.warns(RowClippingWarning, match="exceeded the public data_norm=1") as caught:
        clipped, n = clip_rows(X, 1.0)
    message = str(caught[0].message)
    # Before: "2 of 4 rows ... (largest norm 5)": a count and a value of the data.
    assert "2 of 4" not in message and "largest" not in message and "5" not in message
    assert n == 2
    np.testing.assert_array_equal(X, original)
    np.testing.assert_allclose(np.linalg.norm(clipped, axis=1), [1.0, 0.5, 1.0, 1.0])
    # Directions are kept.
    np.testing.assert_allclose(clipped[0], [0.6, 0.8])


def test_rows_beyond_1e154_are_clipped_exactly():
    # Their squared norms overflow float64: clip_rows used to refuse them as "overflowing".
    X = np.array([[3e200, 4e200], [0.3, 0.4], [3e-170, 4e-170]])
    np.testing.assert_allclose(row_norms(X), [5e200, 0.5, 5e-170])
    with pytest.warns(RowClippingWarning):
        clipped, n = clip_rows(X, 1.0)
    assert n == 1
    np.testing.assert_allclose(clipped[0], [0.6, 0.8])
    np.testing.assert_array_equal(clipped[1:], X[1:])


def test_norm_bound_limits_keep_powers_finite():
    low, high = 1e-60, 1e60
    assert check_norm_bound(low) == low and check_norm_bound(high) == high
    for D in (low, high):
        assert 0 < D**4 < np.inf and 0 < D**-4 < np.inf


def test_clip_rows_no_warning_when_within_bound(recwarn):
    X = np.array([[0.6, 0.8], [0.0, 0.1]])
    out, n = clip_rows(X, 1.0)
    assert n == 0 and out is X
    assert not [w for w in recwarn if issubclass(w.category, RowClippingWarning)]


def test_clip_rows_refuses_nan():
    with pytest.raises(ValueError, match=r"contains NaN or infinity\. "):
        clip_rows(np.array([[np.nan, 0.0], [0.1, 0.1]]), 1.0)


def test_random_state_handling():
    a = check_random_state(3).standard_normal(3)
    b = check_random_state(3).standard_normal(3)
    np.testing.assert_array_equal(a, b)
    g = np.random.default_rng(0)
    assert check_random_state(g) is g
    with pytest.raises(ValueError, match="random_state"):
        check_random_state(np.random.RandomState(0))


def test_bounded_rows_scales_rows_above_the_limit_and_refuses_nan():
    from privpca._validation import MAX_ROW_NORM, bounded_rows
    from privpca.exceptions import NonFiniteInputError

    X = np.array([[3e200, 4e200], [0.3, 0.4], [3e151, -4e151]])
    Y, sq = bounded_rows(X)
    np.testing.assert_allclose(Y[0], [0.6 * MAX_ROW_NORM, 0.8 * MAX_ROW_NORM])
    np.testing.assert_allclose(Y[2], [0.6 * MAX_ROW_NORM, -0.8 * MAX_ROW_NORM])
    np.testing.assert_array_equal(Y[1], X[1])
    np.testing.assert_allclose(sq, [MAX_ROW_NORM**2, 0.25, MAX_ROW_NORM**2])
    assert X[0, 0] == 3e200  # the caller's array is not modified
    small = np.array([[0.3, 0.4]])
    assert bounded_rows(small)[0] is small  # no copy where nothing is above the limit
    with pytest.raises(NonFiniteInputError):
        bounded_rows(np.array([[np.nan, 1e200]]))


@pytest.mark.parametrize("name", ["analyze-gauss", "noisy-power", "dp-pca", "local-gaussian",
                                  "dps-pca"])
def test_one_huge_row_is_clipped_like_any_outlier_in_memory_and_streamed(name, tmp_path):
    """A finite row whose squared norm overflows (a cell of 1e300) is fitted and charged, in
    memory and streamed alike, as the same row at 1e140: a refusal would depend on that one
    row and would not be charged (an outside tester)."""
    from privpca import PrivacyLedger
    from privpca._registry import PRIVATE_ESTIMATORS

    rng = np.random.default_rng(20261129)
    X = rng.standard_normal((6_000, 5)) * [3.0, 2.0, 1.0, 1.0, 1.0]
    for streamed in (False, True):
        fits = []
        for value in (1e140, 1e300):
            Y = X.copy()
            Y[7, 0] = value
            ledger = PrivacyLedger()
            if streamed:
                np.save(tmp_path / "huge.npy", Y)
                Y = np.load(tmp_path / "huge.npy", mmap_mode="r")
            est = PRIVATE_ESTIMATORS[name](2, epsilon=1.0, random_state=3, ledger=ledger)
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                est.fit(Y)
            assert not [(str(w.message), w.filename, w.lineno) for w in caught
                        if issubclass(w.category, RuntimeWarning)]
            assert len(ledger) == 1 and np.all(np.isfinite(est.components_))
            fits.append(est.components_)
        np.testing.assert_allclose(fits[1], fits[0], atol=1e-9)


def test_refusals_of_a_bad_table_print_none_of_its_values():
    """scikit-learn's messages for a 1-D or complex table print the array: said without it."""
    from privpca import PCA, PrivacyLedger

    X = np.random.default_rng(1042).normal(size=(2_000, 3)) * 1000 + 123456.789
    for bad, match in ((X[:, 0], "Reshape your data"), (X + 1j, "Complex data not supported"),
                       (np.array([["a", "1"], ["2", "3"]], dtype=object), "numeric")):
        with pytest.raises(ValueError, match=match) as info:
            PCA(1, ledger=PrivacyLedger()).fit(bad)
        assert "123" not in str(info.value) and "'a'" not in str(info.value)
