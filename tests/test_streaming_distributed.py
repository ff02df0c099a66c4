"""DPS-PCA providers on streamed tables (memory maps, chunks, Parquet, Dask) equal in-memory ones.

A streamed provider never forms its rows: each release is one pass (block reductions), its
noise added to the exact total with the same draws, so the same seed gives the same fit to
rounding and memory does not grow with the provider's n.
"""

from __future__ import annotations

import math
import pickle
import tracemalloc
import warnings
from functools import partial

import numpy as np
import pytest

from privpca import DPSPCA, PrivacyLedger, RowClippingWarning
from privpca.federated.protocol import (
    FileReleaseCounter,
    MeanQuery,
    PrepareMessage,
    ProviderState,
    Query,
    VarianceQuery,
    provider_release_limits,
)
from privpca.metrics import subspace_distance
from privpca.solvers.power import random_orthonormal_basis
from privpca.streaming import ArraySource, ChunkSource
from privpca.streaming.reductions import _block_clipped_product

da = pytest.importorskip("dask.array")


@pytest.fixture(scope="module")
def table():
    """Mixed units, not centred: the providers' mean rounds and bounds have work to do."""
    rng = np.random.default_rng(21)
    Z = rng.standard_normal((24_000, 9))
    Z[:, 1] += 0.8 * Z[:, 0]
    return Z * np.geomspace(0.2, 20, 9) + np.linspace(-50, 400, 9)


def _paper(X):
    return dict(centering=None, data_norm=float(np.quantile(np.linalg.norm(X, axis=1), 0.99)))


SETTINGS = {
    "defaults": lambda X: {},
    "paper": _paper,
    "public": lambda X: dict(centering=X.mean(axis=0) + 0.1, scale=X.std(axis=0) + 0.5,
                             data_norm="auto"),
}


def _fit(X, *, providers=None, groups=None, **kw):
    est = DPSPCA(3, random_state=11, ledger=PrivacyLedger(), n_iter=4, n_nonzero=7, **kw)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RowClippingWarning)
        if providers is not None:
            return est.fit_providers(providers)
        return est.fit(X, groups=groups)


def _projection_distance(A, B):
    """``‖AᵀA − BᵀB‖_F`` formed explicitly: ``metrics.subspace_distance`` takes a square root
    of a difference of sums, whose rounding alone is ~3e-8 for equal subspaces."""
    return float(np.linalg.norm(A.T @ A - B.T @ B))


def _assert_same_fit(a, b):
    assert _projection_distance(a.components_, b.components_) <= 1e-8
    np.testing.assert_allclose(a.components_, b.components_, rtol=0, atol=1e-8)
    np.testing.assert_allclose(a.mean_, b.mean_, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(a.provider_data_norms_, b.provider_data_norms_, rtol=1e-12)
    np.testing.assert_array_equal(a.provider_n_samples_, b.provider_n_samples_)
    np.testing.assert_allclose(a.explained_variance_, b.explained_variance_, rtol=1e-8)
    assert a.privacy_.to_dict() == b.privacy_.to_dict()
    assert a.n_features_in_ == b.n_features_in_


def _parquet_folder(X, folder, rows_per_file):
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    folder.mkdir()
    for i, start in enumerate(range(0, X.shape[0], rows_per_file)):
        part = X[start:start + rows_per_file]
        pq.write_table(pa.table({f"c{j}": part[:, j] for j in range(part.shape[1])}),
                       folder / f"part-{i:03d}.parquet")
    return folder


@pytest.mark.parametrize("setting", sorted(SETTINGS))
def test_a_streamed_table_split_into_providers_equals_the_in_memory_fit(setting, table,
                                                                        tmp_path):
    kw = SETTINGS[setting](table)
    ref = _fit(table, n_providers=3, **kw)
    path = tmp_path / "X.npy"
    np.save(path, table)
    chunks = [table[i:i + 5_000] for i in range(0, table.shape[0], 5_000)]
    for X in (path, np.load(path, mmap_mode="r"), ChunkSource(chunks),
              da.from_array(table, chunks=(3_500, 9))):
        _assert_same_fit(ref, _fit(X, n_providers=3, **kw))


def test_fit_providers_takes_each_providers_table_in_any_streamed_form(table, tmp_path):
    parts = [table[:9_000], table[9_000:15_000], table[15_000:]]
    ref = _fit(None, providers=parts)
    path = tmp_path / "p1.npy"
    np.save(path, parts[1])
    folder = _parquet_folder(parts[2], tmp_path / "p2", 4_000)
    mixed = [da.from_array(parts[0], chunks=(2_000, 9)), np.load(path, mmap_mode="r"), folder]
    fit = _fit(None, providers=mixed)
    _assert_same_fit(ref, fit)
    assert fit.provider_ids_ == ["0", "1", "2"]
    # An in-memory provider next to streamed ones.
    _assert_same_fit(ref, _fit(None, providers=[parts[0], path, ChunkSource([parts[2]])]))


def test_groups_of_a_streamed_table_equal_the_in_memory_groups(table):
    groups = np.repeat(np.array(["b", "a", "c", "a"]), 6_000)  # provider "a" in two runs
    ref = _fit(table, groups=groups)
    fit = _fit(ChunkSource([table[i:i + 7_000] for i in range(0, 24_000, 7_000)]),
               groups=groups)
    _assert_same_fit(ref, fit)
    assert fit.provider_ids_ == ["a", "b", "c"]
    np.testing.assert_array_equal(fit.provider_n_samples_, [12_000, 6_000, 6_000])


def _drive(prov, Q):
    """Every message of the pipeline's protocol to one provider (the server's role, by hand)."""
    replies = []
    centre = np.zeros(prov.n_features)
    for r in (1, 2):
        reply = prov.answer_mean(MeanQuery(r, centre))
        replies.append(reply)
        centre = centre + reply.mean
    replies.append(prov.prepare(PrepareMessage(centre)))
    replies += [prov.answer_query(Query.from_dense(Q, round=t)) for t in (1, 2, 3)]
    replies.append(prov.answer_variance(VarianceQuery(Query.from_dense(Q, round=4))))
    return replies


def _provider(X, **kw):
    params = dict(n_components=2, epsilon=1.0, delta=1e-5, n_rounds=3, noise_seed=7,
                  centering="private", data_norm="auto")
    return ProviderState(X, **{**params, **kw})


def test_a_streamed_provider_releases_what_an_in_memory_one_does_without_forming_rows(table):
    X = table[:8_000]
    Q = random_orthonormal_basis(9, 2, np.random.default_rng(0))
    Q[[2, 5]] = 0.0  # row-sparse, as after a Threshold
    Q = np.linalg.qr(Q)[0]
    mem, streamed = _provider(X), _provider(ArraySource(X, block_rows=1_500))
    for a, b in zip(_drive(mem, Q), _drive(streamed, Q), strict=True):
        assert type(a) is type(b)
        for name, value in vars(a).items():
            if isinstance(value, str):
                assert vars(b)[name] == value
            else:
                np.testing.assert_allclose(vars(b)[name], value, rtol=1e-10,
                                           atol=1e-10 * (1 + np.max(np.abs(value))))
    assert streamed.rows is None and streamed.X is None  # nothing n-sized kept
    assert streamed.n_clipped == mem.n_clipped > 0  # stays with the provider, as in memory
    assert streamed.privacy_record().to_dict() == mem.privacy_record().to_dict()


def test_a_restarted_streamed_provider_reuses_its_bound_and_releases_the_same(table,
                                                                              tmp_path):
    X = table[:6_000]
    Q = random_orthonormal_basis(9, 2, np.random.default_rng(1))
    limits = provider_release_limits(3, "private", "auto")

    def provider(state):
        return _provider(ArraySource(X), counter=FileReleaseCounter(state, limits, {"x": 1}))

    whole = _drive(provider(tmp_path / "a.json"), Q)
    first = provider(tmp_path / "b.json")
    centre = np.zeros(9)
    for r in (1, 2):
        centre = centre + first.answer_mean(MeanQuery(r, centre)).mean
    first.prepare(PrepareMessage(centre))
    again = provider(tmp_path / "b.json")  # a fresh process: rows "prepared" from the file
    assert again.prepared and again.data_norm_ == whole[2].data_norm
    np.testing.assert_array_equal(again.answer_query(Query.from_dense(Q, round=1)).product,
                                  whole[3].product)


def test_streamed_clipping_warns_once_per_provider_after_the_first_answer_without_a_count(
        table):
    X = ArraySource(table[:5_000])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # nothing before a release is booked
        prov = ProviderState(X, n_components=2, epsilon=1.0, delta=1e-5, n_rounds=2,
                             data_norm=1.0, noise_seed=3)
    Q = Query.from_dense(random_orthonormal_basis(9, 2, np.random.default_rng(2)))
    with pytest.warns(RowClippingWarning) as caught:
        prov.answer_query(Q)
    assert len(caught) == 1 and str(prov.n_clipped) not in str(caught[0].message)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        prov.answer_query(Q)
    # Rows of norm exactly D (up to rounding) are not "clipped": no warning for unit rows.
    unit = table[:2_000] / np.linalg.norm(table[:2_000], axis=1, keepdims=True)
    prov = ProviderState(ArraySource(unit), n_components=2, epsilon=1.0, delta=1e-5,
                         n_rounds=1, data_norm=1.0, noise_seed=3)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        prov.answer_query(Q)
    assert prov.n_clipped == 0


def test_streamed_providers_refuse_bad_tables_clearly(table):
    bad = table.copy()
    bad[12_345, 3] = np.nan
    with pytest.raises(ValueError, match="NaN or infinity"):
        _fit(ChunkSource([bad[:10_000], bad[10_000:]]), n_providers=2)
    with pytest.raises(ValueError, match="same features"):
        _fit(None, providers=[ArraySource(table[:100]), ArraySource(table[:100, :4])])
    with pytest.raises(ValueError, match="n_providers=3 exceeds"):
        _fit(ArraySource(table[:2]), n_providers=3)
    with pytest.raises(ValueError, match="one per provider"):
        _fit(None, providers=da.from_array(table))
    with pytest.raises(ValueError, match=r"groups must have shape \(24000,\)"):
        _fit(ArraySource(table), groups=np.zeros(5))


def test_the_block_functions_ship_to_worker_processes(table):
    """Dask's distributed workers receive the provider's block function by pickling."""
    fn = partial(_block_clipped_product, centre=np.ones(9), scale=None, bound=3.0,
                 Q=np.eye(9)[:, :2], support=np.arange(9), slack=1e-12, exact_norms=True)
    again = pickle.loads(pickle.dumps(fn))
    np.testing.assert_array_equal(again(table[:50])[0], fn(table[:50])[0])


def _generated(n, p=10, chunk=5_000):
    """A table generated chunk by chunk on every pass (never in memory as a whole)."""
    def chunks():
        rng = np.random.default_rng(3)
        for start in range(0, n, chunk):
            yield rng.standard_normal((min(chunk, n - start), p)) * 2.0 + 1.0
    return ChunkSource(chunks)


def _peak(n):
    source = _generated(n)
    tracemalloc.start()
    try:
        DPSPCA(2, random_state=0, ledger=PrivacyLedger(), n_iter=2, n_providers=2).fit(source)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_a_streamed_fit_keeps_memory_independent_of_the_providers_n():
    _peak(10_000)  # the first fit compiles kernels and imports modules: not the fit's memory
    small, large = _peak(40_000), _peak(160_000)
    # The table at n = 160 000 is 12.8 MB; a provider's rows would be 6.4 MB each.
    assert large < 4 * 2**20, large
    assert large < 1.5 * small + 2**19, (small, large)


@pytest.mark.slow
def test_dps_pca_on_a_local_cluster_equals_the_in_memory_fit(table):
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None) as cluster, \
            distributed.Client(cluster):
        for kw in ({}, _paper(table)):
            ref = _fit(table, n_providers=2, **kw)
            _assert_same_fit(ref, _fit(da.from_array(table, chunks=(4_000, 5)),
                                       n_providers=2, **kw))


def test_the_accuracy_is_the_in_memory_one(table):
    """Not only equal bits: the streamed fit finds the data's top-3 subspace and its leading
    direction (each provider's bound chosen by its ladder; in-memory over seeds 0–3 and 11:
    distance 0.03–0.09, the leading direction's cosine 0.988–0.997; 0.12–0.16 and 0.999
    with the 99 % quantile)."""
    fit = _fit(da.from_array(table, chunks=(6_000, 9)), n_providers=2)
    Xc = (table - table.mean(axis=0))
    vectors = np.linalg.eigh(Xc.T @ Xc)[1]
    assert subspace_distance(fit.components_.T, vectors[:, -3:]) < 0.1
    assert abs(float(fit.components_[0] @ vectors[:, -1])) > 0.98
    assert math.isfinite(fit.noise_level_)


def test_a_flower_provider_streams_parquet_and_npy_on_request(table, tmp_path):
    pytest.importorskip("flwr")
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    from privpca.federated.flower_app import load_provider

    X = table[:6_000]
    np.save(tmp_path / "p.npy", X)
    pq.write_table(pa.table({f"c{j}": X[:, j] for j in range(9)}), tmp_path / "p.parquet")
    Q = random_orthonormal_basis(9, 2, np.random.default_rng(4))
    config = {"provider-id": "a", "n-components": 2, "epsilon": 1.0, "delta": 1e-5, "n-rounds": 3,
              "data-norm": "auto", "centering": "private", "noise-seed": 7}
    ref = _drive(_provider(X), Q)
    for name, extra, streamed in (("p.parquet", {}, True), ("p.npy", {"stream": True}, True),
                                  ("p.npy", {}, False)):
        state = tmp_path / f"{name}-{bool(extra)}.json"
        node = {**config, **extra, "data-path": str(tmp_path / name), "state-path": str(state)}
        prov = load_provider(node)
        assert (prov.stream is not None) is streamed
        for a, b in zip(ref, _drive(prov, Q), strict=True):
            for field in ("mean", "product", "packed"):
                if hasattr(a, field):
                    np.testing.assert_allclose(getattr(b, field), getattr(a, field),
                                               rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("setting", ["defaults", "paper"])
def test_a_non_finite_streamed_provider_withdraws_the_booking(table, setting):
    """A streamed provider's entries are checked by its passes, after the booking: a NaN is
    refused with nothing released, and the booking is withdrawn."""
    from privpca import NonFiniteInputError

    bad = table.copy()
    bad[12_345, 3] = np.nan
    ledger = PrivacyLedger()
    est = DPSPCA(3, random_state=11, ledger=ledger, n_iter=2, **SETTINGS[setting](table))
    with pytest.raises(NonFiniteInputError, match="NaN or infinity"):
        est.fit_providers([ArraySource(table[:10_000]), ArraySource(bad[10_000:])])
    assert len(ledger) == 0
    assert not hasattr(est, "components_")
