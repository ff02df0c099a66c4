"""The pipeline's compiled passes: log-grid histograms and the binned sums of the private mean."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from privpca import AnalyzeGaussPCA, PrivacyLedger
from privpca.mechanisms.histogram import _column_counts, geometric_bin
from privpca.metrics import subspace_distance
from privpca.streaming import ArraySource
from privpca.streaming._kernels import ZERO_BIN, log_bin_counts, row_norm_bin_counts
from privpca.streaming.reductions import BinnedSums

BASES = [2.0**0.25, 2.0**0.5, 2.0]


@pytest.fixture(scope="module")
def rows():
    """Mixed units, shifted, with exact zero rows and rows on a grid edge."""
    rng = np.random.default_rng(5)
    X = rng.standard_normal((20_000, 7)) * np.geomspace(0.01, 100, 7) + np.linspace(-3, 40, 7)
    X[:4] = 0.0
    X[4] = [2.0**0.5, 0, 0, 0, 0, 0, 0]  # norm exactly an edge of every grid below
    return X


def _reference_counts(values, base):
    _, index, counts = _column_counts(geometric_bin(np.asarray(values)[:, None], base=base))
    return index, counts


@pytest.mark.parametrize("base", BASES)
def test_log_bin_counts_match_geometric_bin(rows, base):
    norms = np.linalg.norm(rows, axis=1)
    index, counts = log_bin_counts(norms, base)
    ref_index, ref_counts = _reference_counts(norms, base)
    np.testing.assert_array_equal(index, ref_index)
    np.testing.assert_array_equal(counts, ref_counts)
    assert index[0] == ZERO_BIN and counts[0] == 4


@pytest.mark.parametrize("with_scale", [False, True])
def test_row_norm_bin_counts_of_centred_scaled_rows(rows, with_scale):
    centre = rows.mean(axis=0) * 0.9
    scale = rows.std(axis=0) if with_scale else None
    shifted = (rows - centre) / (1.0 if scale is None else scale)
    index, counts = row_norm_bin_counts(rows, centre, scale, BASES[0])
    ref_index, ref_counts = _reference_counts(np.linalg.norm(shifted, axis=1), BASES[0])
    np.testing.assert_array_equal(index, ref_index)
    np.testing.assert_array_equal(counts, ref_counts)


@pytest.mark.parametrize("base", BASES)
@pytest.mark.parametrize("centred", [False, True])
def test_binned_sums_give_the_clipped_sum_at_every_edge(rows, base, centred):
    centre = rows.mean(axis=0) * 0.9 if centred else None
    shifted = rows - (0.0 if centre is None else centre)
    r = np.linalg.norm(shifted, axis=1)
    sums = BinnedSums.of(rows, centre, base)
    np.testing.assert_array_equal((sums.index, sums.counts), _reference_counts(r, base))
    for j in sums.index:
        if j == ZERO_BIN:
            continue
        R = base ** (int(j) + 1)
        with np.errstate(divide="ignore"):
            direct = shifted.T @ np.minimum(1.0, R / r)
        np.testing.assert_allclose(sums.clipped_sum(R, base), direct, rtol=1e-10,
                                   atol=1e-10 * np.abs(direct).max())


def test_binned_sums_merge_blocks_and_refuse_a_bound_off_the_grid(rows):
    base = BASES[0]
    whole = BinnedSums.of(rows, None, base)
    merged = BinnedSums.of(rows[:7_000], None, base).merge(BinnedSums.of(rows[7_000:], None,
                                                                          base))
    np.testing.assert_array_equal(merged.index, whole.index)
    np.testing.assert_array_equal(merged.counts, whole.counts)
    np.testing.assert_allclose(merged.S, whole.S, rtol=1e-12, atol=1e-9)
    np.testing.assert_allclose(merged.T, whole.T, rtol=1e-12, atol=1e-12)
    edge = base ** (int(whole.index[len(whole.index) // 2]) + 1)
    with pytest.raises(ValueError, match="not an edge"):
        whole.clipped_sum(edge * base**0.5, base)


def test_clipped_sum_places_bins_by_index_whatever_power_made_the_bound(rows):
    # The private search releases R = base**j through NumPy's vectorised power, which on
    # NumPy 2.4 differs from Python's by an ulp at some j (j = 14 of 2**0.25: 11.313708498984754
    # against 11.313708498984756): a float comparison of the bin edges then raised "not an
    # edge" for a plain Gaussian table of 20 000 × 50.
    base = BASES[0]
    sums = BinnedSums.of(rows, None, base)
    r = np.linalg.norm(rows, axis=1)
    for j in sums.index[1:]:
        exact = base ** int(j)
        for R in (np.nextafter(exact, 0.0), exact, np.nextafter(exact, np.inf)):
            with np.errstate(divide="ignore"):
                direct = rows.T @ np.minimum(1.0, R / r)
            np.testing.assert_allclose(sums.clipped_sum(R, base), direct, rtol=1e-9,
                                       atol=1e-9 * np.abs(direct).max())


def test_a_gaussian_table_whose_bound_numpy_rounds_down_fits():
    X = np.random.default_rng(0).standard_normal((20_000, 50))
    X[:, :3] *= np.sqrt([9.0, 4.0, 2.0])
    est = AnalyzeGaussPCA(2, epsilon=1.0, random_state=0).fit(X)
    assert subspace_distance(est.components_.T, np.eye(50)[:, :2]) < 0.2


def test_defaults_read_the_table_four_times():
    # Two rounds of the private mean (one pass each: histogram and clipped sum together),
    # the bound's histogram, and the Gram: four passes, not six. On defaults the Gram pass
    # forms the two pilots' Grams, and the statistic takes the one at the chosen bound;
    # with data_norm="quantile" it is the statistic's own pass.
    calls = []

    class Counting(ArraySource):
        def reduce(self, fn, combine, **kw):
            calls.append(kw.get("desc"))
            return super().reduce(fn, combine, **kw)

    rng = np.random.default_rng(3)
    X = rng.standard_normal((20_000, 6)) * np.geomspace(1, 50, 6) + 100.0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        streamed = AnalyzeGaussPCA(2, random_state=0, ledger=PrivacyLedger()).fit(
            Counting(X, block_rows=3_000))
        in_memory = AnalyzeGaussPCA(2, random_state=0, ledger=PrivacyLedger()).fit(X)
    assert calls == ["norms and sums", "norms and sums", "norms", "pilot Grams"]
    np.testing.assert_allclose(streamed.components_, in_memory.components_, atol=1e-8)
    calls.clear()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        AnalyzeGaussPCA(2, data_norm="quantile", random_state=0, ledger=PrivacyLedger()).fit(
            Counting(X, block_rows=3_000))
    assert calls == ["norms and sums", "norms and sums", "norms", "Gram"]
    np.testing.assert_allclose(streamed.mean_, in_memory.mean_, rtol=1e-10)


@pytest.mark.parametrize("centred, scaled", [(False, False), (True, False), (True, True)])
def test_every_candidates_gram_from_one_interval_pass(centred, scaled):
    # clipped_grams sorts the rows into the intervals between the bounds (Σyyᵀ below,
    # Σyyᵀ/‖y‖² above): each Gram and clipped count equals clipped_gram's at that bound,
    # whatever the blocks, with rows exactly on a bound and rows at the centre.
    from privpca.streaming.interval_grams import clipped_grams
    from privpca.streaming.reductions import clipped_gram

    rng = np.random.default_rng(7)
    X = rng.standard_normal((5_000, 7)) * rng.exponential(2.0, (5_000, 1)) + 3.0
    centre = X.mean(axis=0) if centred else None
    scale = X.std(axis=0) if scaled else None
    Y = (X - (0.0 if centre is None else centre)) / (1.0 if scale is None else scale)
    norms = np.linalg.norm(Y, axis=1)
    bounds = (float(norms[0]), *np.quantile(norms, [0.6, 0.9, 0.99]), 2 * norms.max())
    bounds = tuple(sorted(bounds))
    X[1] = 0.0 if centre is None else centre  # a row at the centre: norm 0
    got = clipped_grams(ArraySource(X, block_rows=1_700), centre, scale, bounds)
    for (gram, n_over), bound in zip(got, bounds, strict=True):
        want, want_over = clipped_gram(ArraySource(X), centre, scale, bound)
        np.testing.assert_allclose(gram, want, rtol=1e-12, atol=1e-9 * np.abs(want).max())
        assert n_over == want_over and np.array_equal(gram, gram.T)
    assert got[-1][1] == 0  # nothing above twice the largest norm
    with pytest.raises(ValueError, match="ascending"):
        clipped_grams(ArraySource(X), centre, scale, bounds[::-1])
