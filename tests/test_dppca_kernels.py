"""DP-PCA's compiled passes (:mod:`privpca.mechanisms._kernels`) against plain NumPy."""

from __future__ import annotations

import math

import numpy as np
import pytest

import privpca
from privpca import DPPCA
from privpca.accounting.ledger import PrivacyLedger
from privpca.mechanisms import _kernels as kernels
from privpca.mechanisms.gradient_statistics import PrivateMean, subset_top_eigenvalues
from privpca.mechanisms.histogram import _column_counts, linear_bins, window_bin_counts


def _numpy_top_eigenvalues(pairs, n_subsets, n_iter=20):
    """The batched NumPy power iteration the compiled pass replaced (same function)."""
    s = pairs.shape[0] // n_subsets
    S = pairs[: s * n_subsets].reshape(n_subsets, s, -1)
    if s <= S.shape[2]:
        M = np.matmul(S, S.transpose(0, 2, 1)) / s
    else:
        M = np.matmul(S.transpose(0, 2, 1), S) / s
    v = np.ones((n_subsets, M.shape[1], 1)) / math.sqrt(M.shape[1])
    for _ in range(n_iter):
        v = np.matmul(M, v)
        v /= np.maximum(np.linalg.norm(v, axis=1, keepdims=True), 1e-300)
    return np.einsum("mi,mi->m", v[:, :, 0], np.matmul(M, v)[:, :, 0])


def _gradients(X, rows, centre, W):
    Y = X[rows] - centre
    return (Y[:, :, None] * (Y @ W)[:, None, :]).reshape(len(rows), -1)


@pytest.mark.parametrize(("n_pairs", "q", "m"), [(600, 40, 12), (600, 10, 6), (7, 5, 2)])
@pytest.mark.parametrize("n_iter", [0, 3, 20])
def test_top_eigenvalues_are_numpys_power_iteration(rng, n_pairs, q, m, n_iter):
    """Same iterates as the NumPy version (Gram when s ≤ q, else q×q), up to rounding."""
    pairs = rng.standard_normal((n_pairs, q)) * rng.uniform(0.1, 3.0, size=q)
    pairs[: n_pairs // m] = 0.0  # an all-zero subset: the 1e-300 floor, eigenvalue 0
    got = subset_top_eigenvalues(pairs, m, n_iter=n_iter)
    want = _numpy_top_eigenvalues(pairs, m, n_iter)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=0)
    assert got[0] == 0.0


@pytest.mark.parametrize("k", [1, 2])
def test_pair_gradients(rng, k):
    X = rng.standard_normal((50, 7))
    rows = rng.permutation(50)[:21].astype(np.intp)  # odd: the last row is unused
    centre, W = rng.standard_normal(7), np.linalg.qr(rng.standard_normal((7, k)))[0]
    out = np.full((12, 7 * k), np.nan)
    kernels.pair_gradients(X, rows, centre, np.ascontiguousarray(W), out)
    G = _gradients(X, rows, centre, W)
    np.testing.assert_allclose(
        out[:10], (G[1:20:2] - G[0:20:2]) / math.sqrt(2.0), rtol=1e-12, atol=1e-12
    )
    assert np.isnan(out[10:]).all()  # rows beyond the pairs are left alone


@pytest.mark.parametrize("k", [1, 2])
@pytest.mark.parametrize(("width", "nan_first"), [(2.0, False), (2.0, True), (1e-4, False)])
def test_gradient_counts_give_the_exact_bin_counts(rng, k, width, nan_first):
    """Window counts, spills recounted: the triples of the exact sort-based count.

    Features 3–5 carry far values but no weight in W, so only their gradients spill; a NaN
    in the first record (which places every window) or bins too narrow spill every column.
    """
    X = rng.standard_normal((300, 9))
    rows = rng.permutation(300).astype(np.intp)
    X[rows[5], 3], X[rows[6], 4], X[rows[7], 5] = 1e30, -1e300, 1e200
    if nan_first:
        X[rows[0], 2] = np.nan
    centre, W = rng.standard_normal(9), np.linalg.qr(rng.standard_normal((9, k)))[0]
    W[3:6] = 0.0
    q = 9 * k
    G = np.empty((310, q))
    base = np.empty(q, dtype=np.int64)
    table = np.empty((q, kernels.WINDOW + 2), dtype=np.int64)
    with np.errstate(all="ignore"):
        kernels.gradient_counts(
            X, rows, centre, np.ascontiguousarray(W), 1.0 / width, G, base, table
        )
        want_G = _gradients(X, rows, centre, W)
        np.testing.assert_allclose(G[:300], want_G, rtol=1e-12, atol=1e-12)
        got = window_bin_counts(G, 300, width, base, table)
        want = _column_counts(linear_bins(G[:300], width))
    assert table.sum() == 300 * q
    for a, b in zip(got, want, strict=True):
        np.testing.assert_array_equal(a, b)
    spilled = table[:, [0, -1]].any(axis=1)
    if nan_first or width < 1.0:
        assert spilled.all()
    else:
        np.testing.assert_array_equal(np.flatnonzero(spilled), np.arange(3 * k, 6 * k))


def test_mean_from_rows_is_the_mean_from_the_gradients(rng):
    """estimate_rows (fused counts) releases exactly what estimate does on the same gradients."""
    X = rng.standard_normal((4000, 6)) * [3.0, 1.0, 1.0, 1.0, 0.5, 0.5] + 2.0
    X[17, 1] = 1e6  # one far value: its column spills out of the window
    rows = rng.permutation(4000)[:3000].astype(np.intp)
    centre = rng.standard_normal(6)
    W = np.ascontiguousarray(np.linalg.qr(rng.standard_normal((6, 2)))[0])
    mean = PrivateMean.calibrate(2.0, 1e-6, 12)
    G = np.empty((3000, 12))
    a = mean.estimate_rows(X, rows, centre, W, 4.0, np.random.default_rng(5), out=G)
    b = mean.estimate(G.copy(), 4.0, np.random.default_rng(5))
    np.testing.assert_array_equal(a.mean, b.mean)
    np.testing.assert_array_equal(a.centre, b.centre)
    assert a.n_centre_failures == b.n_centre_failures < 12


@pytest.fixture
def two_threads():
    kernels.set_num_threads(2)
    yield
    kernels.set_num_threads(None)


@pytest.mark.slow  # compiling the threaded kernels takes ~10 s on a cold cache
@pytest.mark.usefixtures("two_threads")
@pytest.mark.parametrize("k", [1, 2])
def test_threads_give_the_same_bits(rng, k):
    """Opt-in threads split records and subsets in chunks: the same results, bit for bit."""
    if kernels.num_threads() < 2:
        pytest.skip("numba has one thread here")
    X = rng.standard_normal((3000, 20)) * 2.0
    rows = rng.permutation(3000).astype(np.intp)
    centre = rng.standard_normal(20)
    W = np.ascontiguousarray(np.linalg.qr(rng.standard_normal((20, k)))[0])
    q = 20 * k

    def run():
        G, P = np.empty((3000, q)), np.empty((1500, q))
        base, table = np.empty(q, dtype=np.int64), np.empty((q, kernels.WINDOW + 2), np.int64)
        kernels.gradient_counts(X, rows, centre, W, 0.7, G, base, table)
        kernels.pair_gradients(X, rows, centre, W, P)
        lam = np.empty(30)
        kernels.top_eigenvalues(P, 30, 20, lam)
        fused = np.empty(30)
        kernels.pair_top_eigenvalues(X, rows, centre, W, 30, 20, fused)
        return G, base, table, P, lam, fused

    parallel = run()
    kernels.set_num_threads(1)
    serial = run()
    for a, b in zip(parallel, serial, strict=True):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("k", [1, 2])
@pytest.mark.parametrize(("n_rows", "p", "m"), [(1003, 7, 5), (300, 40, 6), (9, 5, 4), (5, 3, 4)])
def test_pair_top_eigenvalues_are_pairs_then_eigenvalues(rng, k, n_rows, p, m):
    """The fused pass gives the two-pass result bit for bit (q×q and Gram iterations, one
    pair per subset, no pair per subset), and reports finite rows as finite."""
    X = rng.standard_normal((n_rows + 20, p)) * rng.uniform(0.5, 2.0, size=p)
    rows = rng.permutation(n_rows + 20)[:n_rows].astype(np.intp)
    centre = rng.standard_normal(p)
    W = np.ascontiguousarray(np.linalg.qr(rng.standard_normal((p, k)))[0])
    P = np.empty((n_rows // 2, p * k))
    kernels.pair_gradients(X, rows, centre, W, P)
    want = subset_top_eigenvalues(P, m)
    got = np.full(m, np.nan)
    assert not kernels.pair_top_eigenvalues(X, rows, centre, W, m, 20, got)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("k", [1, 2])
def test_passes_flag_non_finite_rows(rng, k):
    """NaN/inf in any row a pass reads (paired, unpaired, counted) is flagged; so is an
    overflow of finite values (the caller then checks exactly); finite rows are not."""
    X = rng.standard_normal((40, 6))
    rows = np.arange(33, dtype=np.intp)  # 16 pairs, 4 subsets of 4 pairs: rows 32 unpaired
    W = np.ascontiguousarray(np.linalg.qr(rng.standard_normal((6, k)))[0])
    centre = np.zeros(6)
    lam = np.empty(4)
    G, base = np.empty((33, 6 * k)), np.empty(6 * k, dtype=np.int64)
    table = np.empty((6 * k, kernels.WINDOW + 2), dtype=np.int64)

    def flags(Y):
        return (
            kernels.pair_top_eigenvalues(Y, rows, centre, W, 4, 20, lam),
            kernels.gradient_counts(Y, rows, centre, W, 0.5, G, base, table),
        )

    assert flags(X) == (False, False)
    for row, value in [(0, np.nan), (17, np.inf), (31, -np.inf)]:
        Y = X.copy()
        Y[row, 3] = value
        assert flags(Y) == (True, True)
    Y = X.copy()
    Y[32, 0] = np.nan  # read by the counts; unpaired, so only checked by the pairs' pass
    assert flags(Y) == (True, True)
    sign = np.where(W[:, 0] < 0, -1.0, 1.0)
    assert flags(np.tile(1.7e308 * sign, (40, 1))) == (True, True)  # finite: yᵀW overflows


def _ledger_fit(X, **kw):
    ledger = PrivacyLedger()
    kw = {"epsilon": 1.0, "delta": 1e-6, **kw}
    est = DPPCA(
        centering=None,
        shuffle=False,
        batch_size=200,
        n_subsets=4,
        random_state=0,
        ledger=ledger,
        **kw,
    )
    return est, ledger


@pytest.fixture
def large_delta():
    """δ = 0.3 makes Algorithm 4 release at these few rows: a probe, not a release."""
    with privpca.config_context(allow_large_delta=True):
        yield


@pytest.mark.usefixtures("large_delta")
@pytest.mark.parametrize("k", [1, 2])
@pytest.mark.parametrize(("epsilon", "delta"), [(30.0, 0.3), (1e-3, 1e-6)])
@pytest.mark.parametrize("row", [3, 97, 150, 999, 1020])
def test_dppca_refuses_non_finite_rows_before_charging(k, epsilon, delta, row):
    """In the papers' setting the stream's passes check the rows (no pass over X first):
    NaN/inf is refused wherever it is — paired (3), unpaired in Algorithm 4's half (97),
    Algorithm 5's half (150: counted, or, before any eigenvalue is released, read by no
    pass; 999: counted), or after the last step (1020) — and nothing is charged."""
    X = np.random.default_rng(0).standard_normal((1050, 5))
    # shuffle=False, B = 200: T = 5; each half of 100 rows gives 50 pairs, 4 subsets of 12
    est, ledger = _ledger_fit(X, n_components=k, epsilon=epsilon, delta=delta)
    assert est.fit(X).n_iter_ == 5 and len(ledger) == 1
    released = est.history_["eigen_released"]
    # (30, 0.3): a release at step 1 (k = 2) or 2 (k = 1), Algorithm 5 at step 5; 1e-3: none
    assert (released[2 - k] and not released[: 2 - k].any()) if epsilon > 1 else not any(released)
    Y = X.copy()
    Y[row, 2] = np.inf if row % 2 else np.nan
    est, ledger = _ledger_fit(Y, n_components=k, epsilon=epsilon, delta=delta)
    with pytest.raises(ValueError, match="X contains NaN or infinity"):
        est.fit(Y)
    assert len(ledger) == 0 and not hasattr(est, "privacy_")


def test_dppca_fits_huge_finite_rows():
    """Projections that overflow are flagged, checked exactly and found finite: no refusal."""
    X = np.random.default_rng(0).standard_normal((1050, 5)) * 1e200
    est, ledger = _ledger_fit(X)
    assert est.fit(X).n_iter_ == 5 and len(ledger) == 1


def test_top_eigenvalues_of_empty_blocks_are_zero():
    np.testing.assert_array_equal(subset_top_eigenvalues(np.ones((2, 3)), 4), 0.0)
