"""The release pipeline's held-out layout: preprocessing from a secret, uniformly random set of
rows at the whole (ε, δ), the statistic from the other rows at the whole (ε, δ) (parallel
composition, whatever the row order)."""

from __future__ import annotations

import itertools
import math
import warnings

import dp_accounting
import numpy as np
import pytest

from privpca import AnalyzeGaussPCA, BinghamPCA, ModSuLQPCA, NoisyPowerPCA, PrivacyLedger
from privpca.accounting.composition import compose_epsilon
from privpca.pipeline.budget import BudgetPlan
from privpca.pipeline.release import (
    HOLDOUT_AUTO_FRACTION,
    HOLDOUT_AUTO_MIN_ROWS,
    ReleasePipeline,
)
from privpca.pipeline.rows import Statistic
from privpca.pipeline.settings import PipelineSettings
from privpca.streaming import ArraySource, ChunkSource
from privpca.streaming.holdout import (
    held_out_size,
    random_row_split,
    random_subset,
)

ESTIMATORS = [AnalyzeGaussPCA, ModSuLQPCA, NoisyPowerPCA, BinghamPCA]
_SHORT = {BinghamPCA: dict(burn_in=0, n_iter=20)}


@pytest.fixture(scope="module")
def table():
    """Mixed units, not centred, 60 000 rows."""
    rng = np.random.default_rng(31)
    Z = rng.standard_normal((60_000, 8))
    Z[:, 1] += 0.9 * Z[:, 0]
    return Z * np.geomspace(0.5, 8, 8) + np.linspace(-20, 300, 8)


def _fit(cls, X, ledger=None, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return cls(2, random_state=7, ledger=PrivacyLedger() if ledger is None else ledger,
                   **_SHORT.get(cls, {}),
                   **kw).fit(X)


class _Owner:
    """Stands in for an estimator (named in the pipeline's messages)."""


def _pipeline(n, holdout="auto", **settings):
    options = {"epsilon": 1.0, "delta": 1e-5, "centering": "private", "data_norm": "auto",
               "scale": False, "budget_shares": None, "holdout_fraction": holdout, **settings}
    return ReleasePipeline(_Owner(), PipelineSettings(**options), n, 5,
                           Statistic("gaussian: test", lambda D: D**2, releases_spectrum=True))


def test_plan_without_statistic_composes_to_exactly_epsilon_delta():
    parts = ("bound_raw", "mean", "bound_residual", "mean_refine", "bound")
    plan = BudgetPlan.split(1.0, 1e-5, parts, include_statistic=False)
    assert "statistic" not in plan
    assert sum(p.weight for p in plan.parts.values()) == pytest.approx(1.0)
    events = [p.dp_event() for p in plan.parts.values()]
    assert compose_epsilon(events, 1e-5) == pytest.approx(1.0, abs=2e-3)
    with pytest.raises(ValueError, match="active part"):
        BudgetPlan.split(1.0, 1e-5, (), include_statistic=False)


def test_auto_holds_out_from_ten_million_rows_on_and_only_with_preprocessing():
    assert _pipeline(HOLDOUT_AUTO_MIN_ROWS - 1).holdout_fraction is None
    big = _pipeline(HOLDOUT_AUTO_MIN_ROWS)
    assert big.holdout_fraction == HOLDOUT_AUTO_FRACTION
    held = held_out_size(HOLDOUT_AUTO_MIN_ROWS, HOLDOUT_AUTO_FRACTION)
    assert big.n_statistic == HOLDOUT_AUTO_MIN_ROWS - held == 9_800_000
    # The statistic's plan (the statistic and its re-centring sum) is the whole budget.
    assert sorted(big.plan.parts) == ["centre", "statistic"]
    assert big.plan.total_multiplier == pytest.approx(
        dp_accounting.get_sigma_gaussian(1.0, 1e-5), rel=1e-12)
    paper = _pipeline(HOLDOUT_AUTO_MIN_ROWS, centering=None, data_norm=1.0)
    assert paper.holdout_fraction is None and paper.n_statistic == HOLDOUT_AUTO_MIN_ROWS
    assert _pipeline(HOLDOUT_AUTO_MIN_ROWS, holdout=None).holdout_fraction is None


@pytest.mark.parametrize("bad", [0, 0.0, 0.51, 1.0, -0.1, "half", True, [0.1]])
def test_invalid_holdout_fraction_is_refused(bad, table):
    with pytest.raises(ValueError, match="holdout_fraction"):
        AnalyzeGaussPCA(2, holdout_fraction=bad).fit(table)


def test_a_split_too_small_is_refused_before_the_ledger_is_charged():
    ledger = PrivacyLedger()
    X = np.random.default_rng(0).standard_normal((60, 3))
    with pytest.raises(ValueError, match="holds out 1 of n_samples=60"):
        AnalyzeGaussPCA(2, holdout_fraction=0.01, ledger=ledger).fit(X)
    assert len(ledger) == 0


@pytest.mark.parametrize("cls", ESTIMATORS)
def test_held_out_fit_spends_exactly_the_request_and_composes_as_one_pair(cls, table):
    ledger = PrivacyLedger(epsilon_budget=5.0, delta_budget=1e-4)
    est = _fit(cls, table, ledger=ledger, holdout_fraction=0.05)
    rec = est.privacy_
    assert (rec.epsilon, rec.delta) == (1.0, 1e-5)
    names = [s.mechanism.split(":")[0] for s in rec.spends]
    assert names[:5] == ["bound_raw", "mean", "bound_residual", "mean_refine", "bound"]
    assert "statistic" in names
    assert "Held-out preprocessing (holdout_fraction=0.05)" in rec.notes
    assert "3000 of the 60000 rows" in rec.notes
    # The held-out parts alone compose to (ε, δ); so does the statistic on the rest: the
    # ledger books the fit as its pair, not as the (larger) sequential composition.
    held = [s for s in rec.spends
            if s.mechanism.split(":")[0] not in ("centre", "statistic", "variance")]
    eps_held = compose_epsilon([s.event() for s in held], 1e-5)
    assert eps_held == pytest.approx(1.0, abs=2e-3)
    assert ledger.epsilon() == pytest.approx(1.0)
    assert len(ledger) == 1
    assert np.isfinite(est.explained_variance_ratio_).all()


def test_the_statistic_and_its_recentring_get_the_whole_budget(table):
    a = _fit(AnalyzeGaussPCA, table, holdout_fraction=0.05)
    b = _fit(AnalyzeGaussPCA, table, holdout_fraction=None)
    spends = {s.mechanism.split(":")[0]: s for s in a.privacy_.spends}
    rest = [spends["centre"], spends["statistic"]]
    assert compose_epsilon([s.event() for s in rest], 1e-5) == pytest.approx(1.0, rel=1e-6)
    assert spends["centre"].sensitivity == pytest.approx(2 * a.data_norm_)
    # Less noise per unit of sensitivity than the whole-table layout's statistic.
    assert a.noise_scale_ / a.privacy_.sensitivity < b.noise_scale_ / b.privacy_.sensitivity
    m = _fit(ModSuLQPCA, table, holdout_fraction=0.05)
    n_rest = table.shape[0] - 3000
    assert m.privacy_.sensitivity == pytest.approx(math.sqrt(2) * m.data_norm_**2 / n_rest)


def test_recentring_removes_the_held_out_means_sampling_error():
    """A 1 % hold-out's mean is off by its sampling error; without the re-centring that adds
    n·δμδμᵀ to the Gram. With it, the components match the whole-table layout's accuracy."""
    from sklearn.decomposition import PCA

    from privpca.metrics import subspace_distance

    rng = np.random.default_rng(5)
    n, p = 400_000, 30
    basis = np.linalg.qr(rng.standard_normal((p, 2)))[0]
    X = rng.standard_normal((n, p)) + (rng.standard_normal((n, 2)) * [2.0, 1.6]) @ basis.T
    X = X * np.geomspace(0.5, 2.0, p) + np.linspace(0, 500, p)
    truth = PCA(2).fit(X).components_.T
    errors = {}
    for h in (None, 0.01):
        est = AnalyzeGaussPCA(2, epsilon=2.0, holdout_fraction=h,
                              random_state=np.random.default_rng(1),
                              ledger=PrivacyLedger()).fit(X)
        errors[h] = subspace_distance(est.components_.T, truth)
        np.testing.assert_allclose(est.mean_, X.mean(axis=0), atol=0.05)
        assert errors[h] <= est.expected_error_
    assert errors[0.01] < 2 * errors[None] + 0.01


class _CountingArray:
    """An array that records how many rows each slice reads (the passes over the table)."""

    def __init__(self, X):
        self.X, self.shape, self.ndim, self.dtype, self.rows_read = X, X.shape, 2, X.dtype, 0

    def __getitem__(self, key):
        out = self.X[key]
        self.rows_read += out.shape[0]
        return out


def test_the_table_is_read_twice_once_to_gather_the_held_out_rows(table):
    """The held-out 5 % lie everywhere: one pass gathers them into memory, where the three
    preprocessing passes (two mean rounds, the bound) read them; then one pass over the rest
    (the held-out rows removed block by block). Segments read 3·n_held + (n − n_held) rows
    (1.1 n here) but are not private on sorted tables (below)."""
    counting = _CountingArray(table)
    _fit(AnalyzeGaussPCA, ArraySource(counting), holdout_fraction=0.05)
    n = table.shape[0]
    assert counting.rows_read == 2 * n
    full = _CountingArray(table)
    _fit(AnalyzeGaussPCA, ArraySource(full), holdout_fraction=None)
    assert full.rows_read == 4 * n


@pytest.mark.parametrize("cls", ESTIMATORS)
def test_streamed_and_dask_held_out_fits_equal_the_in_memory_fit(cls, table, tmp_path):
    da = pytest.importorskip("dask.array")
    from privpca.streaming.dask_io import dask_table

    ref = _fit(cls, table, holdout_fraction=0.05)
    path = tmp_path / "X.npy"
    np.save(path, table)
    store = _zarr_store(table, tmp_path)
    others = [np.load(path, mmap_mode="r"),
              ChunkSource([table[i:i + 7_000] for i in range(0, table.shape[0], 7_000)]),
              da.from_array(table, chunks=(9_000, 8)), dask_table(path, chunk_rows=11_000),
              store, dask_table(store, chunk_rows=11_000)]
    atol = 1e-6 if cls is BinghamPCA else 1e-8
    for X in others:
        other = _fit(cls, X, holdout_fraction=0.05)
        np.testing.assert_allclose(other.components_, ref.components_, rtol=0, atol=atol)
        np.testing.assert_allclose(other.mean_, ref.mean_, rtol=1e-10, atol=1e-10)
        assert other.privacy_.spends == ref.privacy_.spends
        np.testing.assert_allclose(other.explained_variance_, ref.explained_variance_,
                                   rtol=1e-8)


def _zarr_store(table, tmp_path):
    zarr = pytest.importorskip("zarr")
    store = tmp_path / "X.zarr"
    out = zarr.create_array(store, shape=table.shape, chunks=(2_000, table.shape[1]),
                            dtype=table.dtype, compressors=None)
    out[:] = table
    return store


@pytest.mark.parametrize("kind", ["npy", "zarr"])
def test_dask_table_selection_reads_only_the_selected_rows(table, tmp_path, kind):
    pytest.importorskip("dask.array")
    from privpca.streaming.dask_io import dask_table, dask_table_rows
    from privpca.streaming.selection import select_rows
    from privpca.streaming.sources import DaskSource

    path = tmp_path / "X.npy"
    np.save(path, table)
    X = dask_table(path if kind == "npy" else _zarr_store(table, tmp_path), chunk_rows=20_000)
    ranges = [(5, 17), (30_000, 30_100)]
    picked = select_rows(DaskSource(X), ranges)
    assert picked.X.chunks[0] == (112,)  # short ranges gathered: one task reads both
    np.testing.assert_array_equal(picked.X.compute(),
                                  np.concatenate([table[5:17], table[30_000:30_100]]))
    long = select_rows(DaskSource(X), [(0, 10), (100, 45_100)])  # cut into 20 000-row blocks
    assert long.X.chunks[0] == (20_000, 20_000, 5_010)
    np.testing.assert_array_equal(long.X.compute(),
                                  np.concatenate([table[0:10], table[100:45_100]]))
    assert dask_table_rows(X[1:], ranges) is None  # any other array: sliced by Dask


def test_paper_setting_ignores_the_holdout(table):
    kw = dict(centering=None, data_norm=float(np.quantile(np.linalg.norm(table, axis=1), 0.99)))
    a = _fit(AnalyzeGaussPCA, table, holdout_fraction=0.1, **kw)
    b = _fit(AnalyzeGaussPCA, table, holdout_fraction=None, **kw)
    np.testing.assert_array_equal(a.components_, b.components_)
    assert a.privacy_ == b.privacy_


def test_auto_below_the_threshold_is_the_whole_table_bitwise(table):
    a = _fit(AnalyzeGaussPCA, table)  # holdout_fraction="auto", n = 60 000
    b = _fit(AnalyzeGaussPCA, table, holdout_fraction=None)
    np.testing.assert_array_equal(a.components_, b.components_)
    assert a.privacy_ == b.privacy_


def _parquet_folder(table, tmp_path, *, rows_per_file, group_rows):
    """``table`` as a folder of Parquet files (columns ``c0, c1, …``) of ``group_rows``-row
    groups."""
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    folder = tmp_path / "parts"
    folder.mkdir()
    for i, start in enumerate(range(0, table.shape[0], rows_per_file)):
        part = table[start:start + rows_per_file]
        pq.write_table(pa.table({f"c{j}": part[:, j] for j in range(part.shape[1])}),
                       folder / f"part-{i:03d}.parquet", row_group_size=group_rows)
    return folder


def test_parquet_selections_read_only_the_row_groups_they_overlap(table, tmp_path):
    pq = pytest.importorskip("pyarrow.parquet")
    pytest.importorskip("dask.array")
    from privpca.streaming.dask_io import dask_table, dask_table_rows
    from privpca.streaming.selection import select_rows
    from privpca.streaming.sources import DaskSource, ParquetSource

    folder = _parquet_folder(table, tmp_path, rows_per_file=25_000, group_rows=1_000)
    ranges = [(5, 17), (24_990, 26_010), (59_000, 59_500)]
    want = np.concatenate([table[a:b] for a, b in ranges])
    source = ParquetSource(folder)
    assert [(g, a, b) for _, g, a, b in source.pieces(ranges)] == [
        (0, 5, 17), (24, 990, 1_000), (0, 0, 1_000), (1, 0, 10), (9, 0, 500)]
    read: list[tuple[str, int]] = []
    original = pq.ParquetFile.read_row_group

    def counting(self, i, *args, **kwargs):
        read.append((str(self.metadata), i))
        return original(self, i, *args, **kwargs)

    pq.ParquetFile.read_row_group = counting
    try:
        picked = select_rows(source, ranges)
        np.testing.assert_array_equal(np.concatenate(list(picked.blocks())), want)
        assert len(read) == 5  # the five row groups overlapped, each read once
        X = dask_table(folder, chunk_rows=600)
        lazy = select_rows(DaskSource(X), ranges)
        read.clear()
        np.testing.assert_array_equal(lazy.X.compute(scheduler="sync"), want)
        assert len(read) == 5
        assert lazy.X.chunks[0] == (1_022, 510)  # pieces gathered until chunk_rows rows
    finally:
        pq.ParquetFile.read_row_group = original
    assert dask_table_rows(X[1:], ranges) is None


def test_parquet_held_out_fits_equal_the_in_memory_fit(table, tmp_path):
    pytest.importorskip("dask.array")
    from privpca.streaming.dask_io import dask_table

    folder = _parquet_folder(table, tmp_path, rows_per_file=20_000, group_rows=3_000)
    ref = _fit(AnalyzeGaussPCA, table, holdout_fraction=0.05)
    for X in (folder, dask_table(folder, chunk_rows=4_000)):
        other = _fit(AnalyzeGaussPCA, X, holdout_fraction=0.05)
        np.testing.assert_allclose(other.components_, ref.components_, rtol=0, atol=1e-8)
        assert other.privacy_.spends == ref.privacy_.spends


# ------------------------------------------------------------------ the held-out rows' law
def _old_segments(n, fraction, rng, segments=10_000):
    """The layout before (whole segments of consecutive rows; the pipeline's 10 000), kept
    here only to show why it was replaced: ``(held positions, segment size, h)``."""
    S = min(n, segments)
    size = n // S
    h = math.ceil(fraction * S)
    chosen = np.sort(rng.choice(S, size=h, replace=False))
    return (chosen[:, None] * size + np.arange(size)).ravel(), size, h


def test_replacing_a_record_of_a_sorted_table_moves_only_that_record():
    """A table sorted by a feature: replace its smallest record by a new largest one and
    re-sort, so every other record moves up one position. Parallel composition needs a
    coupling of the two fits' draws under which every other record stays on its side.

    Random rows: the draw for D relabelled by the position map σ (each unchanged record's
    new position) is exactly as likely for D' as the draw is for D (the law is uniform over
    m-subsets, next test), and under it only the replaced record differs. Segments: the
    relabelled draw is no union of D''s segments (probability 0), and even the best segment
    draw for D' moves ~400 other records (198 out, 198 in)."""
    n, fraction = 20_000, 0.02
    rng = np.random.default_rng(3)
    D = np.sort(rng.standard_normal(n))  # one feature; sorted by it
    D2 = np.sort(np.r_[D[1:], 10.0])  # D[0] replaced by 10, re-sorted: D2[i - 1] = D[i]
    sigma = np.r_[n - 1, np.arange(n - 1)]  # position in D2 of D[i]'s record (or its stand-in)
    for seed in range(5):
        held = random_row_split(n, fraction, np.random.default_rng(seed)).held
        coupled = np.sort(sigma[held])  # a draw for D2, as likely as `held` is for D
        assert coupled.size == held.size == held_out_size(n, fraction) == 400
        rest = np.setdiff1d(np.arange(n), held)
        coupled_rest = np.setdiff1d(np.arange(n), coupled)
        for a, b in ((D[held], D2[coupled]), (D[rest], D2[coupled_rest])):
            assert set(a) - set(b) <= {D[0]} and set(b) - set(a) <= {10.0}
            assert len(a) == len(b)
        # The same positions for both tables (not the coupling) would move most records:
        # the positions carry no meaning on their own, only the law of the partition does.
        assert len(set(D[held]) ^ set(D2[held])) > 700

    # The layout before: D's held-out records, at their positions in D2, straddle D2's
    # 2-row segments, so every segment draw for D2 moves many other records.
    old, size, h = _old_segments(n, fraction, np.random.default_rng(0))
    positions = sigma[old[old != 0]]  # D's held-out records other than the replaced one
    per_segment = np.bincount(positions // size, minlength=n // size)
    best_kept = int(np.sort(per_segment)[::-1][:h].sum())  # the best draw of h segments
    moved_out = positions.size - best_kept
    assert moved_out >= 150  # 198 here: ~400 records change sides (in and out), not 1
    assert len(set(D[old]) ^ set(D2[old])) >= 300  # the same segments: 396 records move


def test_random_row_split_is_uniform_over_subsets():
    """Inclusion frequency of every row ≈ m/n and of every pair ≈ m(m−1)/(n(n−1)): the law
    is invariant under relabelling the rows (so it ignores their order)."""
    n, draws = 40, 20_000
    rng = np.random.default_rng(11)
    for fraction in (0.1, 0.8):  # 0.8: the complement is drawn
        m = held_out_size(n, fraction)
        hits = np.zeros((draws, n), dtype=bool)
        for i in range(draws):
            held = random_row_split(n, fraction, rng).held
            assert held.size == m and np.all(np.diff(held) > 0)
            hits[i, held] = True
        q = m / n
        np.testing.assert_allclose(hits.mean(axis=0), q, atol=5 * math.sqrt(q * (1 - q) / draws))
        pairs = (hits.T.astype(np.float64) @ hits)[np.triu_indices(n, 1)] / draws
        r = m * (m - 1) / (n * (n - 1))
        np.testing.assert_allclose(pairs, r, atol=5 * math.sqrt(r * (1 - r) / draws))
        # rows 0 and 1 (neighbours) are held together no more often than rows 0 and 39
        assert abs(pairs[0] - pairs[n - 2]) < 6 * math.sqrt(r / draws)
    # Several rounds of draws (few rows, many duplicates) and the extremes keep the size.
    for n, m in ((3, 1), (5, 2), (1_000, 500), (1_000, 0), (7, 7)):
        got = random_subset(n, m, rng)
        assert got.size == m and len(set(got.tolist())) == m and np.all((0 <= got) & (got < n))


def test_held_out_sizes_are_public_functions_of_n_and_the_fraction(table):
    for n in (1_000, 60_000, 123_457, HOLDOUT_AUTO_MIN_ROWS):
        for fraction in (0.02, 0.05, 0.1):
            sizes = {random_row_split(n, fraction, np.random.default_rng(s)).n_held
                     for s in range(3)}
            assert sizes == {math.ceil(fraction * n)}
    from privpca.mechanisms.secure_noise import SecureGenerator

    secure = random_row_split(60_000, 0.05, SecureGenerator())  # secure mode: ChaCha20
    assert secure.n_held == 3000 and secure.n_rest == 57_000
    # Sorting the table moves the held-out rows, not their number, and not the record.
    by_feature = table[np.argsort(table[:, 0])]
    a = _fit(AnalyzeGaussPCA, table, holdout_fraction=0.05)
    b = _fit(AnalyzeGaussPCA, by_feature, holdout_fraction=0.05)
    for fit in (a, b):
        assert "3000 of the 60000 rows (a uniformly random set of rows" in fit.privacy_.notes
        assert "the other 57000 rows" in fit.privacy_.notes


def test_take_and_drop_rows_partition_every_kind_of_source(table, tmp_path):
    """The held-out rows gathered in table order and the rest streamed without them, from
    memory, a memory map, a Zarr store, chunks and Dask, across uneven block boundaries."""
    da = pytest.importorskip("dask.array")
    from privpca.streaming.selection import RowsExcept, drop_rows, take_rows
    from privpca.streaming.sources import DaskSource, as_row_source

    n = table.shape[0]
    held = random_row_split(n, 0.05, np.random.default_rng(2)).held
    keep = np.ones(n, dtype=bool)
    keep[held] = False
    path = tmp_path / "X.npy"
    np.save(path, table)
    sources = [ArraySource(table, block_rows=777), ArraySource(table, validated=True),
               as_row_source(np.load(path, mmap_mode="r")),
               as_row_source(_zarr_store(table, tmp_path)),
               ChunkSource([table[i:i + 7_001] for i in range(0, n, 7_001)]),
               DaskSource(da.from_array(table, chunks=(9_000, 8)))]
    for source in sources:
        gathered = take_rows(source, held)
        assert isinstance(gathered, ArraySource)
        np.testing.assert_array_equal(np.asarray(gathered.X), table[held])
        rest = drop_rows(source, held)
        assert rest.n_samples == n - held.size
        assert isinstance(rest, DaskSource if isinstance(source, DaskSource) else RowsExcept)
        np.testing.assert_array_equal(np.concatenate(list(rest.blocks())), table[keep])
        # Reductions see the rest's own row numbering (aux), block by block and in order.
        spans = rest.reduce(lambda block, a, b: [(a, b, block.shape[0])], lambda x, y: x + y,
                            aux=lambda a, b: (a, b))
        assert spans[0][0] == 0 and spans[-1][1] == n - held.size
        assert all(b - a == rows for a, b, rows in spans)
        assert all(x[1] == y[0] for x, y in itertools.pairwise(spans))
        total = rest.reduce(lambda block: block.sum(axis=0), np.add)
        np.testing.assert_allclose(total, table[keep].sum(axis=0), rtol=1e-12)
