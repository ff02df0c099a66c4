"""Oja, Private Oja and DP-PCA on streamed tables: one pass in the table's order.

A streamed fit equals the in-memory fit with ``shuffle=False`` and the same seed (the same
draws; sums in another order at most), reads the stream once, holds one block and one
minibatch, and refuses what it cannot guarantee (amplification by shuffling needs a uniformly
random order) before anything is charged.
"""

from __future__ import annotations

import tracemalloc
import warnings

import numpy as np
import pytest

from privpca import DPPCA, OjaPCA, PrivacyLedger, PrivateOjaPCA
from privpca.decomposition._records import pair_differences, stream_blocks
from privpca.streaming import ArraySource, ChunkSource, RowSource
from privpca.streaming.holdout import held_out_size, random_row_split
from privpca.streaming.selection import RowRanges, select_rows


@pytest.fixture(scope="module")
def table():
    """Not centred, unequal variances: the held-out mean and bound have work to do."""
    rng = np.random.default_rng(7)
    X = rng.standard_normal((16_000, 6)) * np.sqrt([6.0, 3.0, 1.0, 0.5, 0.5, 0.5])
    return X + np.linspace(-4.0, 9.0, 6)


def _chunks(X, size=2_345):  # uneven on purpose: blocks never align with steps or batches
    return [X[i:i + size] for i in range(0, X.shape[0], size)]


def _distance(A, B):
    """‖AᵀA − BᵀB‖_F for rows spanning each subspace (exact zero for equal bases)."""
    return float(np.linalg.norm(A.T @ A - B.T @ B))


#: (estimator, parameters): the papers' setting, then the defaults' held-out share.
PAPER = [
    (OjaPCA, dict(centering=None)),
    (PrivateOjaPCA, dict(centering=None, clip_norm=60.0, amplification="none", epsilon=2.0)),
    (DPPCA, dict(centering=None, epsilon=2.0)),
]
TABLE = [
    (OjaPCA, dict()),
    (PrivateOjaPCA, dict(amplification="none", epsilon=2.0)),
    (PrivateOjaPCA, dict(amplification="none", epsilon=2.0, stream_centering="pairs",
                         centering=np.zeros(6) + 1.0)),
    (DPPCA, dict(epsilon=2.0)),
    (DPPCA, dict(epsilon=2.0, stream_centering="pairs")),
]


def _rows(cls, X):
    """Oja's steps are a Python loop per record: a shorter table keeps the tests fast."""
    return X if cls is DPPCA else X[:5_000]


def _fit(cls, X, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return cls(2, random_state=5, ledger=PrivacyLedger(), **kw).fit(X)


def _assert_same(a, b):
    assert _distance(a.components_, b.components_) <= 1e-8
    np.testing.assert_allclose(a.components_, b.components_, rtol=0, atol=1e-10)
    assert a.privacy_ == b.privacy_
    np.testing.assert_allclose(a.mean_, b.mean_, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(a.explained_variance_, b.explained_variance_, rtol=1e-9)
    assert a.n_iter_ == b.n_iter_


@pytest.mark.parametrize("cls,kw", PAPER + TABLE, ids=[
    "Oja-paper", "PrivateOja-paper", "DPPCA-paper", "Oja", "PrivateOja", "PrivateOja-pairs",
    "DPPCA", "DPPCA-pairs"])
def test_streamed_fit_equals_the_in_memory_fit_read_in_order(cls, kw, table):
    table = _rows(cls, table)
    ref = _fit(cls, table, shuffle=False, **kw)
    _assert_same(ref, _fit(cls, ChunkSource(_chunks(table)), **kw))


@pytest.mark.parametrize("cls,kw", [PAPER[1], TABLE[3]], ids=["PrivateOja-paper", "DPPCA"])
def test_memmap_and_dask_streams_equal_the_in_memory_fit(cls, kw, table, tmp_path):
    table = _rows(cls, table)
    ref = _fit(cls, table, shuffle=False, **kw)
    path = tmp_path / "X.npy"
    np.save(path, table)
    _assert_same(ref, _fit(cls, np.load(path, mmap_mode="r"), **kw))
    _assert_same(ref, _fit(cls, ArraySource(table, block_rows=999), **kw))
    da = pytest.importorskip("dask.array")
    _assert_same(ref, _fit(cls, da.from_array(table, chunks=(3_001, 3)), **kw))


class _Counting(ChunkSource):
    """Counts passes (calls of blocks()) and rows read, after the constructor's own pass."""

    def __init__(self, chunks):
        super().__init__(chunks)
        self.passes = 0
        self.rows = 0

    def blocks(self):
        self.passes += 1
        for block in super().blocks():
            self.rows += block.shape[0]
            yield block


@pytest.mark.parametrize(("cls", "kw"), PAPER[2:] + TABLE[-2:],
                         ids=["dppca-paper", "dppca-defaults", "dppca-pairs"])
def test_dask_stream_on_a_local_cluster_equals_the_in_memory_fit(cls, kw, table,
                                                                  cluster_client):
    # The blocks are computed on two worker processes and read in order by the stream.
    da = pytest.importorskip("dask.array")
    ref = _fit(cls, _rows(cls, table), shuffle=False, **kw)
    _assert_same(ref, _fit(cls, da.from_array(_rows(cls, table), chunks=(2_500, 6)), **kw))


@pytest.mark.parametrize("cls,kw", PAPER[1:], ids=["PrivateOja", "DPPCA"])
def test_the_papers_setting_reads_the_stream_once(cls, kw, table):
    table = _rows(cls, table)
    source = _Counting(_chunks(table))
    fit = _fit(cls, source, **kw)
    assert source.passes == 1
    if cls is DPPCA:  # the records after T·B are unused, and not read past the last batch
        used = fit.batch_size_ * fit.n_iter_
        assert used <= source.rows < used + 2_345
    else:
        assert source.rows == table.shape[0]


def test_held_out_rows_are_gathered_in_one_pass_before_one_stream_pass(table, monkeypatch):
    import privpca.decomposition._records as module

    streams = []

    def counted(blocks, pairs):
        streams.append(pairs)
        return stream_blocks(blocks, pairs)

    monkeypatch.setattr(module, "stream_blocks", counted)
    source = _Counting(_chunks(table))
    fit = _fit(DPPCA, source, epsilon=2.0)
    assert streams == [False]  # the stream: one pass over the rows not held out
    # One pass gathers the held-out rows (anywhere in the table) into memory, where the
    # held-out parts (two mean rounds, the bound, the variances) read them; then the stream.
    assert source.passes == 2
    assert source.rows == 2 * table.shape[0]
    n_held = held_out_size(table.shape[0], 0.1)
    assert fit.privacy_.n_samples == table.shape[0]
    assert (f"{n_held} of n={table.shape[0]} records (a uniformly random set of rows"
            in fit.privacy_.notes)


def test_random_row_split_is_secret_and_sized_by_n_only():
    n = 123_457
    a = random_row_split(n, 0.1, np.random.default_rng(0))
    b = random_row_split(n, 0.1, np.random.default_rng(1))
    assert a.n_held == b.n_held == 12_346  # public: the draw moves the rows, not the size
    assert a.n_rest == n - 12_346
    assert not np.array_equal(a.held, b.held)
    for split in (a, b):
        assert split.held.dtype == np.int64 and np.all(np.diff(split.held) > 0)
        assert 0 <= split.held[0] and split.held[-1] < n
    # Single rows, not runs: about (1 − 0.1)·n_held gaps between consecutive held rows.
    assert np.count_nonzero(np.diff(a.held) > 1) > 0.8 * a.n_held


def test_row_ranges_and_pair_differences_cross_block_boundaries(table):
    ranges = [(5, 900), (2_340, 2_350), (15_990, 16_000)]
    want = np.concatenate([table[a:b] for a, b in ranges])
    for source in (ChunkSource(_chunks(table)), ArraySource(table, block_rows=777)):
        view = select_rows(source, ranges)
        assert isinstance(view, RowRanges) and view.n_samples == len(want)
        np.testing.assert_array_equal(np.concatenate(list(view.blocks())), want)
    got = np.concatenate(list(stream_blocks(iter(_chunks(table[:1001], 7)), pairs=True)))
    np.testing.assert_array_equal(got, pair_differences(table, np.arange(1001)))


class _Generated(RowSource):
    """n rows generated block by block (never stored): a table larger than its reader."""

    def __init__(self, n, p, block=5_000):
        self.n_samples, self.n_features, self.block = n, p, block

    def blocks(self):
        rng = np.random.default_rng(0)
        scale = np.sqrt(np.r_[4.0, np.full(self.n_features - 1, 0.5)])
        for start in range(0, self.n_samples, self.block):
            yield rng.standard_normal((min(self.block, self.n_samples - start),
                                       self.n_features)) * scale


def test_streamed_fit_memory_does_not_grow_with_n():
    """200 000 × 20 rows (32 MB as one array): the fit's peak allocation stays a few MB."""
    kw = dict(centering=None, epsilon=2.0, batch_size=4_000)
    peaks = []
    for n in (50_000, 200_000):
        tracemalloc.start()
        fit = _fit(DPPCA, _Generated(n, 20), **kw)
        peaks.append(tracemalloc.get_traced_memory()[1])
        tracemalloc.stop()
        assert abs(fit.components_[0, 0]) > 0.9  # it found the spike, e.₁
    assert peaks[1] < 8 * 2**20  # < 8 MiB against the table's 32 MB
    assert peaks[1] < 1.5 * peaks[0]  # independent of n (4x the rows)


def test_private_oja_refuses_shuffling_amplification_in_a_given_order(table):
    ledger = PrivacyLedger()
    table = table[:5_000]
    for X, kw in [(ChunkSource(_chunks(table)), {}),
                  (table, dict(shuffle=False)),
                  (ChunkSource(_chunks(table)), dict(centering=None, clip_norm=60.0))]:
        with pytest.raises(ValueError, match="uniformly random order"):
            PrivateOjaPCA(epsilon=1.0, ledger=ledger, random_state=0, **kw).fit(X)
    assert len(ledger) == 0


@pytest.mark.parametrize("cls", [OjaPCA, PrivateOjaPCA, DPPCA])
def test_shuffle_true_on_a_stream_and_bad_values_are_refused(cls, table):
    with pytest.raises(ValueError, match="shuffle=True cannot be honoured"):
        cls(shuffle=True, ledger=PrivacyLedger()).fit(ChunkSource(_chunks(table)))
    with pytest.raises(ValueError, match="'shuffle' parameter"):
        cls(shuffle="yes", ledger=PrivacyLedger()).fit(table)


def test_dppca_search_is_refused_on_a_stream_before_the_charge(table):
    ledger = PrivacyLedger()
    with pytest.raises(ValueError, match="learning_rate='search' is not available"):
        DPPCA(learning_rate="search", ledger=ledger).fit(ChunkSource(_chunks(table)))
    assert len(ledger) == 0


@pytest.mark.parametrize("cls,kw", PAPER + TABLE[:2] + TABLE[3:4], ids=[
    "Oja-paper", "PrivateOja-paper", "DPPCA-paper", "Oja", "PrivateOja", "DPPCA"])
def test_nan_in_a_streamed_table_is_refused_and_the_booking_withdrawn(cls, kw, table):
    """The planned record is booked before the stream reads a block; a NaN found by the
    fit's own passes (the held-out gather, the exact mean, or the stream itself) releases
    nothing, so the one fit withdraws the booking and sets no attribute."""
    from privpca import NonFiniteInputError

    X = _rows(cls, table).copy()
    X[X.shape[0] - 3, 1] = np.nan  # in the last block: read after the stream has begun
    ledger = PrivacyLedger()
    est = cls(2, random_state=5, ledger=ledger, **kw)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(NonFiniteInputError, match="NaN or infinity"):
            est.fit(ChunkSource(_chunks(X)))
    assert len(ledger) == 0
    assert not hasattr(est, "components_") and not hasattr(est, "privacy_")


@pytest.mark.parametrize("cls,kw", PAPER, ids=["Oja-paper", "PrivateOja-paper",
                                               "DPPCA-paper"])
def test_papers_setting_refuses_parameters_before_the_booking(cls, kw, table):
    """n_components is checked with the plan (Private Oja's papers' setting used to check it
    after the charge); over budget, nothing runs and nothing is set."""
    from privpca import BudgetExceededError

    ledger = PrivacyLedger()
    with pytest.raises(ValueError, match="n_components=7"):
        cls(7, ledger=ledger, **kw).fit(table[:3_000])
    assert len(ledger) == 0
    budget = PrivacyLedger(epsilon_budget=0.5, delta_budget=1e-3)
    est = cls(1, random_state=0, ledger=budget, **kw)
    with pytest.raises(BudgetExceededError):
        est.fit(_rows(cls, table))
    assert len(budget) == 0 and not hasattr(est, "privacy_")


def test_in_memory_defaults_are_unchanged_by_the_shuffle_parameter(table):
    """shuffle='auto' on an array is the random order of before (True gives the same fit)."""
    for cls, kw in (PAPER[1], TABLE[3]):
        X = _rows(cls, table)
        _assert_same(_fit(cls, X, **kw), _fit(cls, X, shuffle=True, **kw))


@pytest.mark.slow
def test_streamed_defaults_are_accurate_on_iid_rows():
    """DP-PCA and Private Oja read in order (i.i.d. rows) find the top eigenvector."""
    rng = np.random.default_rng(1)
    n, p = 200_000, 10
    X = rng.standard_normal((n, p)) * np.sqrt(np.r_[9.0, np.ones(p - 1)]) + 5.0
    # Private Oja without amplification needs a larger epsilon at this n, streamed or not
    # (in memory, random order, seed 0: |v₁| = 0.27 at epsilon=1, 0.94 at 4).
    for cls, kw in [(DPPCA, dict(epsilon=1.0)),
                    (PrivateOjaPCA, dict(epsilon=4.0, amplification="none"))]:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fit = cls(1, random_state=0, ledger=PrivacyLedger(), **kw).fit(
                ChunkSource(_chunks(X, 10_000)))
        assert abs(fit.components_[0, 0]) > 0.9, cls.__name__
        np.testing.assert_allclose(fit.mean_, 5.0, atol=0.2)
