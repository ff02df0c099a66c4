"""Streamed fits (memory maps, chunk lists, Parquet, Dask) equal in-memory fits."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import warnings

import numpy as np
import pytest

from privpca import (
    AnalyzeGaussPCA,
    BinghamPCA,
    LocalGaussianPCA,
    LocalSparsePCA,
    ModSuLQPCA,
    NoisyPowerPCA,
    PrivacyLedger,
)
from privpca.streaming import ArraySource, ChunkSource, as_row_source, is_streamed

da = pytest.importorskip("dask.array")

ESTIMATORS = [AnalyzeGaussPCA, ModSuLQPCA, LocalGaussianPCA, NoisyPowerPCA, BinghamPCA]


@pytest.fixture(scope="module")
def table():
    """Mixed units, not centred: the defaults' two-round mean and bound have work to do."""
    rng = np.random.default_rng(20)
    Z = rng.standard_normal((30_000, 9))
    Z[:, 1] += 0.8 * Z[:, 0]
    return Z * np.geomspace(0.2, 20, 9) + np.linspace(-50, 400, 9)


def _paper(X):
    return dict(centering=None, data_norm=float(np.quantile(np.linalg.norm(X, axis=1), 0.99)))


def _local_epsilon(cls, kw):
    """The local model needs a large ε per user at n = 30 000 (its noise is per user)."""
    return dict(kw, epsilon=20.0) if cls in (LocalGaussianPCA, LocalSparsePCA) else kw


# Hoff's Gibbs sweeps amplify rounding: after a few hundred sweeps two chains on Gram matrices
# that differ in the last bits (summed block by block, not in one product) take different
# accept/reject branches and become two draws of the same law. A short chain stays on the
# same path, which is what "the same fit" can mean for a sampler.
_SHORT = {BinghamPCA: dict(burn_in=0, n_iter=20)}


def _fit(cls, X, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return cls(3, random_state=11, ledger=PrivacyLedger(), **_SHORT.get(cls, {}),
                   **kw).fit(X)


def _assert_same_fit(a, b):
    # Bingham's chain runs in the eigenvectors of B, whose low, nearly equal eigenvalues (the
    # uncentred setting: one huge eigenvalue, the mean) make them sensitive to the last bits.
    atol = 1e-6 if isinstance(a, BinghamPCA) else 1e-8
    np.testing.assert_allclose(a.components_, b.components_, rtol=0, atol=atol)
    np.testing.assert_allclose(a.mean_, b.mean_, rtol=1e-10, atol=1e-10)
    assert a.data_norm_ == pytest.approx(b.data_norm_, rel=1e-12)
    assert (a.privacy_.epsilon, a.privacy_.delta) == (b.privacy_.epsilon, b.privacy_.delta)
    assert [s.mechanism for s in a.privacy_.spends] == [s.mechanism for s in b.privacy_.spends]
    np.testing.assert_allclose([s.noise_scale for s in a.privacy_.spends],
                               [s.noise_scale for s in b.privacy_.spends], rtol=1e-12)
    np.testing.assert_allclose(a.explained_variance_, b.explained_variance_, rtol=1e-8)


def _write_npy_and_parquet(table, tmp_path, rows_per_file):
    """``table`` as ``X.npy`` and as a folder of Parquet files (columns ``c0, c1, …``)."""
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    path = tmp_path / "X.npy"
    np.save(path, table)
    folder = tmp_path / "parts"
    folder.mkdir()
    for i, start in enumerate(range(0, table.shape[0], rows_per_file)):
        part = table[start:start + rows_per_file]
        pq.write_table(pa.table({f"c{j}": part[:, j] for j in range(part.shape[1])}),
                       folder / f"part-{i:03d}.parquet")
    return path, folder


def _write_zarr(table, tmp_path, chunk_rows):
    """``table`` as an uncompressed Zarr store ``X.zarr`` of ``chunk_rows``-row chunks."""
    zarr = pytest.importorskip("zarr")
    store = tmp_path / "X.zarr"
    out = zarr.create_array(store, shape=table.shape, chunks=(chunk_rows, table.shape[1]),
                            dtype=table.dtype, compressors=None)
    out[:] = table
    return store


def _open_zarr(store):
    from privpca.streaming.sources import open_zarr

    return open_zarr(store)


@pytest.mark.parametrize("paper", [False, True], ids=["defaults", "paper"])
@pytest.mark.parametrize("cls", ESTIMATORS)
def test_dask_fit_on_a_local_cluster_equals_the_in_memory_fit(cls, paper, table, cluster_client):
    kw = _local_epsilon(cls, _paper(table) if paper else {})
    Xd = da.from_array(table, chunks=(4_000, 5))  # row and column chunks: re-chunked by rows
    _assert_same_fit(_fit(cls, table, **kw), _fit(cls, Xd, **kw))


@pytest.mark.parametrize("cls", ESTIMATORS)
def test_memmap_chunks_and_parquet_equal_the_in_memory_fit(cls, table, tmp_path):
    kw = _local_epsilon(cls, {})
    ref = _fit(cls, table, **kw)
    path, folder = _write_npy_and_parquet(table, tmp_path, 7_000)
    store = _write_zarr(table, tmp_path, 4_000)
    chunks = [table[i:i + 5_000] for i in range(0, table.shape[0], 5_000)]
    for X in (path, np.load(path, mmap_mode="r"), ArraySource(table, block_rows=3_000),
              ChunkSource(chunks), ChunkSource(lambda: iter(chunks)), folder, store,
              _open_zarr(store)):
        assert is_streamed(X)
        fit = _fit(cls, X, **kw)
        _assert_same_fit(ref, fit)
        assert fit.n_features_in_ == table.shape[1]


def test_transform_of_a_dask_array_is_lazy_and_equals_numpy(table):
    fit = _fit(AnalyzeGaussPCA, table)
    Xd = da.from_array(table, chunks=(7_000, 9))
    lazy = fit.transform(Xd)
    assert type(lazy).__module__.startswith("dask.array")
    np.testing.assert_allclose(lazy.compute(), fit.transform(table), rtol=1e-12, atol=1e-9)
    with pytest.raises(ValueError, match="fitted on 9 features"):
        fit.transform(Xd[:, :4])


def test_local_sparse_streamed_equals_in_memory(table):
    kw = dict(epsilon=20.0, lam=0.05, max_iter=20)
    Xd = da.from_array(table, chunks=(6_000, 9))
    _assert_same_fit(_fit(LocalSparsePCA, table, **kw), _fit(LocalSparsePCA, Xd, **kw))


@pytest.mark.parametrize("cls", [AnalyzeGaussPCA, NoisyPowerPCA])
def test_private_scaling_streams(table, cls):
    # scale=True: per-feature histograms and moments as block reductions (two rounds).
    ref = _fit(cls, table, scale=True)
    for X in (ArraySource(table, block_rows=4_000), da.from_array(table, chunks=(7_000, 9))):
        fit = _fit(cls, X, scale=True)
        _assert_same_fit(ref, fit)
        np.testing.assert_allclose(fit.scale_, ref.scale_, rtol=1e-10)


def test_streamed_input_is_refused_clearly(table):
    with pytest.raises(ValueError, match="one-shot iterator"):
        ChunkSource(iter([table]))
    bad = table.copy()
    bad[12_345, 3] = np.nan
    with pytest.raises(ValueError, match="NaN or infinity"):
        _fit(AnalyzeGaussPCA, ChunkSource([table[:10_000], bad[10_000:]]))
    with pytest.raises(ValueError, match="same number of columns"):
        ChunkSource([table[:10, :3], table[:10, :4]])
    Xd = da.from_array(table, chunks=(4_000, 9))
    with pytest.raises(ValueError, match="compute_chunk_sizes"):
        _fit(AnalyzeGaussPCA, Xd[Xd[:, 0] > 0])
    with pytest.raises(ValueError, match="Cannot stream"):
        as_row_source("table.csv")


@pytest.mark.parametrize("reduction", ["gram", "gram_and_sum"])
def test_statistic_pass_converts_checks_and_clips_raw_blocks(table, reduction):
    # The statistic's pass takes blocks as stored (float32 from disk), converts and shifts
    # them in one pass and checks finiteness through the row norms: same sums as float64
    # blocks, NaN and infinity still refused, huge finite rows clipped, not refused.
    from privpca.streaming.reductions import clipped_gram, clipped_gram_and_sum
    from privpca.streaming.sources import DaskSource

    def run(X, centre):
        if reduction == "gram":
            return clipped_gram(X, centre, None, 30.0)
        return clipped_gram_and_sum(X, centre, None, 30.0)

    X32 = table.astype(np.float32)
    centre = X32.astype(np.float64).mean(axis=0)
    for c in (centre, None):
        ref = run(ArraySource(X32.astype(np.float64), validated=True), c)
        Y = np.asarray(X32, dtype=np.float64) - (0.0 if c is None else c)
        norms = np.linalg.norm(Y, axis=1)
        Y *= np.minimum(1.0, 30.0 / norms)[:, None]
        np.testing.assert_allclose(ref[0], Y.T @ Y, rtol=1e-12)
        assert ref[-1] == int(np.count_nonzero(norms > 30.0)) > 0
        if reduction == "gram_and_sum":
            np.testing.assert_allclose(ref[1], Y.sum(axis=0), rtol=1e-9, atol=1e-6)
        for X in (ArraySource(X32, block_rows=7_000),
                  DaskSource(da.from_array(X32, chunks=(6_000, 9)))):
            out = run(X, c)
            for got, want in zip(out, ref, strict=True):
                np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-9)
    for value in (np.nan, np.inf, -np.inf):
        bad = X32.copy()
        bad[23_456, 4] = value
        for X in (ArraySource(bad, block_rows=7_000), DaskSource(da.from_array(bad, 6_000))):
            with pytest.raises(ValueError, match="NaN or infinity") as info:
                run(X, centre)
            assert not any(ch.isdigit() for ch in str(info.value))  # no count, no index
    huge = table.copy()
    huge[5, :] = 1e200  # finite: its norm overflows, the exact check lets it through
    out = run(ArraySource(huge, block_rows=7_000), None)
    assert np.isfinite(out[0]).all()


def test_streamed_clipping_warns_after_the_statistic_pass(table):
    with pytest.warns(Warning, match="clipped"):
        AnalyzeGaussPCA(2, centering=None, data_norm=1.0, random_state=0,
                        ledger=PrivacyLedger()).fit(ArraySource(table))


@pytest.mark.slow
def test_a_lazily_generated_ten_million_row_dask_fit_stays_under_one_gigabyte():
    """10⁷ × 100 (8 GB as float64) generated chunk by chunk: the client's peak RSS < 1 GB."""
    script = textwrap.dedent("""
        import resource, warnings
        import dask, dask.array as da
        from privpca import AnalyzeGaussPCA, PrivacyLedger
        dask.config.set(scheduler="threads", num_workers=2)
        X = da.random.default_rng(0).standard_normal((10_000_000, 100), chunks=(100_000, 100))
        X = X * 3.0 + 10.0
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            AnalyzeGaussPCA(2, random_state=0, ledger=PrivacyLedger()).fit(X)
        # VmHWM: this process's own high-water mark. ru_maxrss is not: Linux carries the
        # parent's peak across fork + exec into it (a 3.8 GB pytest parent read as ours).
        with open("/proc/self/status") as fh:
            hwm = [line for line in fh if line.startswith("VmHWM:")]
        print(int(hwm[0].split()[1]) if hwm else resource.getrusage(
            resource.RUSAGE_SELF).ru_maxrss)
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         check=True, timeout=1800)
    peak_kib = int(out.stdout.strip().splitlines()[-1])
    assert peak_kib < 1024 * 1024, f"peak RSS {peak_kib / 1024:.0f} MiB"


# ------------------------------------------------------------------------------- the CLI
def _cli_fit(args, tmp_path, name):
    """``privpca fit`` in a fresh interpreter (a cluster client of its own opens and closes
    there, leaving this process's default client alone); the JSON it wrote."""
    import json

    out = tmp_path / f"{name}.json"
    cmd = [sys.executable, "-m", "privpca", "fit", *map(str, args), "-k", "2", "--epsilon",
           "1", "--seed", "5", "-o", str(out)]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return json.loads(out.read_text()), done.stderr


def test_cli_streams_npy_and_parquet_and_runs_on_a_dask_scheduler(table, tmp_path,
                                                                   cluster_client):
    path, folder = _write_npy_and_parquet(table, tmp_path, 12_000)
    store = _write_zarr(table, tmp_path, 5_000)
    ref, _ = _cli_fit([path], tmp_path, "memory")
    address = cluster_client.scheduler.address
    for name, args in [("stream", [path, "--stream"]), ("parquet", [folder]),
                       ("zarr", [store]),
                       ("cluster", [path, "--scheduler", address, "--chunk-rows", 7_000]),
                       ("cluster-parquet", [folder, "--scheduler", address]),
                       ("cluster-zarr", [store, "--scheduler", address])]:
        got, _ = _cli_fit(args, tmp_path, name)
        np.testing.assert_allclose(got["components"], ref["components"], rtol=0, atol=1e-8)
        assert got["privacy"]["epsilon"] == ref["privacy"]["epsilon"]
        if name == "parquet":
            assert got["feature_names"] == [f"c{j}" for j in range(table.shape[1])]
    done = subprocess.run([sys.executable, "-m", "privpca", "fit", str(path), "--scheduler",
                           "tcp://127.0.0.1:1", "-k", "2", "--epsilon", "1"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode != 0 and "Cannot reach the Dask scheduler" in done.stderr


def test_noisy_power_data_solver_streams_one_pass_per_iteration(table):
    # solver="data": XᵀXQ by a reduction per iteration, never the p × p Gram (the
    # "variance" part's residual pair reads the bound selection's kept one).
    calls = []

    class Counting(ArraySource):
        def reduce(self, fn, combine, **kw):
            calls.append(kw.get("desc"))
            return super().reduce(fn, combine, **kw)

    ref = _fit(NoisyPowerPCA, table, solver="data", n_iter=4)
    fit = _fit(NoisyPowerPCA, Counting(table, block_rows=4_000), solver="data", n_iter=4)
    _assert_same_fit(ref, fit)
    assert calls.count("XᵀXQ") == 4 and "Gram" not in calls
