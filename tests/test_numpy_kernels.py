"""The NumPy twins of the compiled preprocessing passes give the same bits (first-fit path)."""

from __future__ import annotations

import numpy as np
import pytest

from privpca.streaming import _kernels as jit
from privpca.streaming import _numpy_kernels as npk
from privpca.streaming import reductions


def _same(a, b):
    if isinstance(a, tuple):
        assert len(a) == len(b)
        for x, y in zip(a, b, strict=True):
            _same(x, y)
        return
    a, b = np.atleast_1d(np.asarray(a)), np.atleast_1d(np.asarray(b))
    assert a.shape == b.shape
    if a.dtype.kind == "f":
        assert b.dtype == a.dtype
        np.testing.assert_array_equal(a.view(np.uint64), b.view(np.uint64))
    else:
        np.testing.assert_array_equal(a, b)


def _tables():
    rng = np.random.default_rng(29)
    for n, p in [(1, 1), (7, 3), (300, 20), (2000, 7), (1000, 33), (0, 4)]:
        # norms over sixty orders of magnitude
        yield rng.standard_normal((n, p)) * np.exp(rng.uniform(-60, 60, (n, 1)))
    zeros = np.zeros((50, 5))
    zeros[::3] = 1.0
    yield zeros
    yield (2.0 ** np.arange(-40, 40, dtype=np.float64))[:, None]  # norms on the bin edges
    yield (1.1 ** np.arange(-200, 200, dtype=np.float64))[:, None]
    yield np.full((10, 4), 1e200)  # squares overflow: infinite norms
    yield np.full((10, 4), 1e-200)  # squares underflow: zero norms
    tiny = np.full((10, 4), 5e-324)
    yield tiny
    rows = rng.standard_normal((200, 5))
    rows[3, 1] = np.nan
    rows[9, 0] = np.inf
    yield rows


@pytest.mark.parametrize("X", list(_tables()), ids=lambda X: f"{X.shape}")
@pytest.mark.parametrize("base", [2.0, 1.1, 10.0])
def test_twins_are_bitwise_equal(X, base):
    rng = np.random.default_rng(X.size)
    centres = [None, X[: max(1, len(X) // 2)].mean(0) if len(X) else np.zeros(X.shape[1])]
    with np.errstate(all="ignore"):
        for centre in centres:
            finite = np.isfinite(X).all()
            if finite:  # the compiled pass assumes checked rows
                _same(jit.binned_norm_sums(X, centre, base),
                      npk.binned_norm_sums(X, centre, base))
            for scale in (None, rng.uniform(0.1, 3.0, X.shape[1])):
                if finite:
                    _same(jit.row_norm_bin_counts(X, centre, scale, base),
                          npk.row_norm_bin_counts(X, centre, scale, base))
                for bound in (0.5, 1.0, 1e300):
                    a, b = np.full(X.shape, 7.0), np.full(X.shape, 7.0)
                    _same(jit.shifted_clipped_rows(X, centre, scale, bound, a),
                          npk.shifted_clipped_rows(X, centre, scale, bound, b))
                    _same(a, b)
        v = np.abs(X.ravel())
        if np.isfinite(v).all():
            _same(jit.log_bin_counts(v, base), npk.log_bin_counts(v, base))


@pytest.mark.parametrize("dtype", [np.float32, np.int64, np.int16, np.float64])
def test_clipped_rows_any_dtype_into_a_strided_buffer(dtype):
    rng = np.random.default_rng(3)
    x = (rng.standard_normal((500, 9)) * 40).astype(dtype)
    centre, scale = rng.standard_normal(9), rng.uniform(0.5, 2, 9)
    bufs = [np.ones((500, 10)) for _ in range(2)]
    r1 = jit.shifted_clipped_rows(x, centre, scale, 30.0, bufs[0][:, :9])
    r2 = npk.shifted_clipped_rows(x, centre, scale, 30.0, bufs[1][:, :9])
    _same(r1, r2)
    _same(bufs[0], bufs[1])


def test_dispatch_switches_to_the_compiled_pass_on_public_size(monkeypatch):
    monkeypatch.setattr(reductions, "JIT_MIN_CELLS", 100)
    monkeypatch.setattr(reductions, "_cells_seen", {})
    assert reductions._kernel("binned_norm_sums", 60) is npk.binned_norm_sums
    assert reductions._kernel("binned_norm_sums", 40) is npk.binned_norm_sums
    assert reductions._kernel("binned_norm_sums", 1) is jit.binned_norm_sums
    assert reductions._kernel("row_norm_bin_counts", 1) is npk.row_norm_bin_counts


@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.parametrize("name", ["AnalyzeGaussPCA", "DPPCA"])
def test_a_fit_is_the_same_on_either_path(monkeypatch, name):
    import privpca.decomposition as dec
    from privpca.mechanisms import _numpy_kernels as mnp

    X = np.random.default_rng(5).standard_normal((20000 if name == "DPPCA" else 3000, 6))
    kw = {"delta": 1e-5, "epsilon": 8.0} if name == "DPPCA" else {"epsilon": 1.0}
    fits = []
    for limit in (10**12, 0):
        for module in (reductions, mnp):
            monkeypatch.setattr(module, "JIT_MIN_CELLS", limit)
            monkeypatch.setattr(module, "_cells_seen", {})
        est = getattr(dec, name)(2, random_state=0, **kw).fit(X)
        fits.append((est.components_, est.mean_, est.explained_variance_))
    _same(tuple(fits[0]), tuple(fits[1]))


@pytest.mark.parametrize("k", [1, 2, 3])
@pytest.mark.parametrize("scale", [1e-3, 1.0, 1e3, 1e150])
def test_dppca_twins_are_bitwise_equal(k, scale):
    from privpca.mechanisms import _kernels as mjit
    from privpca.mechanisms import _numpy_kernels as mnp

    assert mnp.WINDOW == mjit.WINDOW
    rng = np.random.default_rng(k)
    for n, p in [(50, 1), (300, 5), (700, 20), (10, 9)]:
        X = rng.standard_normal((n, p)) * scale
        if scale == 1.0:
            X[5, 0] = np.nan  # flagged, and binned to the top
        rows = rng.permutation(n)[: n - 3].astype(np.intp)
        centre = rng.standard_normal(p) * 0.1
        W = np.ascontiguousarray(np.linalg.qr(rng.standard_normal((p, k)))[0][:, :k])
        if W.shape[1] < k:
            continue
        for width in (0.01, 0.7, 5.0):  # spills on both sides of the window, or none
            got = []
            for mod in (mjit, mnp):
                G = np.full((len(rows) + 2, p * k), 3.0)
                base = np.empty(p * k, np.int64)
                table = np.empty((p * k, mnp.WINDOW + 2), np.int64)
                with np.errstate(all="ignore"):
                    bad = mod.gradient_counts(X, rows, centre, W, 1.0 / width, G, base, table)
                got.append((bad, G, base, table))
            _same(got[0], got[1])
            G = got[0][1]
            low = rng.standard_normal(p * k) - 1.0
            high = low + rng.uniform(0.0, 3.0, p * k)
            for n_rows in (0, 1, len(rows)):
                a, b = np.empty(p * k), np.empty(p * k)
                mjit.truncated_sums(G, n_rows, low, high, a)
                mnp.truncated_sums(G, n_rows, low, high, b)
                _same(a, b)


def test_truncated_sums_start_from_positive_zero():
    from privpca.mechanisms import _kernels as mjit
    from privpca.mechanisms import _numpy_kernels as mnp

    G = np.full((3, 2), -0.0)
    a, b = np.empty(2), np.empty(2)
    mjit.truncated_sums(G, 3, np.full(2, -1.0), np.full(2, 1.0), a)
    mnp.truncated_sums(G, 3, np.full(2, -1.0), np.full(2, 1.0), b)
    _same(a, b)


def _eigen_cases():
    """(X, rows, n_subsets, n_iter, finite): Gram and q×q blocks, empty and ragged subsets,
    four-row groups with and without a tail, all-zero and overflowing rows, NaN and inf."""
    rng = np.random.default_rng(29)
    for n, p, n_rows, m in [(50, 1, 47, 3), (300, 5, 299, 7), (700, 20, 640, 9),
                            (10, 9, 7, 5), (400, 3, 400, 1), (90, 4, 90, 11), (30, 6, 3, 2)]:
        X = rng.standard_normal((n, p)) * np.exp(rng.uniform(-3, 3, (n, 1)))
        rows = rng.permutation(n)[:n_rows].astype(np.intp)
        for n_iter in (0, 1, 3, 20):
            yield X, rows, m, n_iter, True
    X = np.zeros((40, 4))
    X[::5] = 1.0
    yield X, np.arange(40, dtype=np.intp), 4, 20, True  # zero pairs: the 1e-300 floor
    yield np.full((40, 4), 1e160), np.arange(40, dtype=np.intp), 3, 20, True  # overflow
    yield np.full((40, 4), 5e-324), np.arange(40, dtype=np.intp), 3, 20, True  # underflow
    for bad in (np.nan, np.inf):
        X = rng.standard_normal((60, 5))
        X[7, 2] = bad
        yield X, rng.permutation(60).astype(np.intp), 4, 20, False
        yield X, np.r_[np.arange(8, 60), 7].astype(np.intp), 4, 20, False  # an unpaired row


@pytest.mark.parametrize("k", [1, 2, 3])
@pytest.mark.parametrize("case", list(_eigen_cases()),
                         ids=lambda c: f"{c[0].shape}-{len(c[1])}rows-m{c[2]}-it{c[3]}")
def test_subset_eigenvalue_twins_are_bitwise_equal(case, k):
    from privpca.mechanisms import _kernels as mjit
    from privpca.mechanisms import _numpy_kernels as mnp

    X, rows, m, n_iter, finite = case
    p = X.shape[1]
    if k > p:
        pytest.skip("k > p")
    rng = np.random.default_rng(k)
    W = np.ascontiguousarray(np.linalg.qr(rng.standard_normal((p, k)))[0])
    for centre in (np.zeros(p), rng.standard_normal(p) * 0.1):
        got = []
        for mod in (mjit, mnp):
            out = np.full(m + 2, 7.0)
            with np.errstate(all="ignore"):
                bad = mod.pair_top_eigenvalues(X, rows, centre, W, m, n_iter, out)
            got.append((bad, out))
        if finite:
            _same(got[0], got[1])
        else:  # flagged (the caller refuses the rows); NaN's sign may differ
            assert got[0][0] and got[1][0]
            np.testing.assert_array_equal(got[0][1], got[1][1])
        s = len(rows) // 2 // m
        if s == 0 or not finite:
            continue
        P = np.empty((len(rows) // 2, p * k))
        with np.errstate(all="ignore"):
            mjit.pair_gradients(X, rows, centre, W, P)
        a, b = np.full(m, 7.0), np.full(m, 7.0)
        with np.errstate(all="ignore"):
            mjit.top_eigenvalues(P, m, n_iter, a)
            mnp.top_eigenvalues(P, m, n_iter, b)
        _same(a, b)
        _same(a, got[0][1][:m])


@pytest.mark.parametrize(("n_pairs", "q", "m"), [(600, 40, 12), (600, 10, 6), (7, 5, 2),
                                                 (9, 1, 1), (1000, 3, 250)])
def test_top_eigenvalue_twins_on_random_pairs(n_pairs, q, m):
    from privpca.mechanisms import _kernels as mjit
    from privpca.mechanisms import _numpy_kernels as mnp

    rng = np.random.default_rng(n_pairs + q)
    pairs = rng.standard_normal((n_pairs, q)) * rng.uniform(0.1, 3.0, size=q)
    pairs[: n_pairs // m] = 0.0
    pairs[-1] *= -0.0  # signed zeros: sums start from +0.0 in both
    for n_iter in (0, 2, 20):
        a, b = np.empty(m), np.empty(m)
        mjit.top_eigenvalues(pairs, m, n_iter, a)
        mnp.top_eigenvalues(pairs, m, n_iter, b)
        _same(a, b)


def test_subset_eigenvalues_dispatch_on_public_size(monkeypatch):
    from privpca.mechanisms import _kernels as mjit
    from privpca.mechanisms import _numpy_kernels as mnp

    monkeypatch.setattr(mnp, "JIT_MIN_CELLS", 100)
    monkeypatch.setattr(mnp, "_cells_seen", {})
    assert mnp.kernel("pair_top_eigenvalues", 100) is mnp.pair_top_eigenvalues
    assert mnp.kernel("pair_top_eigenvalues", 1) is mjit.pair_top_eigenvalues
    assert mnp.kernel("top_eigenvalues", 100) is mnp.top_eigenvalues


def test_default_dppca_fit_compiles_nothing_on_a_small_table():
    """A new process's first DP-PCA fit on 20 000 × 20 does not import numba (issue 29)."""
    import subprocess
    import sys

    code = ("import sys, warnings; warnings.simplefilter('ignore'); import numpy as np; "
            "from privpca import DPPCA; "
            "DPPCA(2, epsilon=1.0, delta=1e-6, random_state=0).fit("
            "np.random.default_rng(0).standard_normal((20000, 20))); "
            "print('numba' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, timeout=300)
    assert out.stdout.strip() == "False"


@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.parametrize(("k", "n_subsets"), [(1, 6), (3, 40)])
def test_a_dppca_fit_with_large_subsets_is_the_same_on_either_path(monkeypatch, k, n_subsets):
    """78 pairs a subset (the compiled power iteration on the transpose) and 11 at k = 3."""
    import privpca.decomposition as dec
    from privpca.mechanisms import _numpy_kernels as mnp

    X = np.random.default_rng(7).standard_normal((20000, 8)) * np.linspace(2.0, 0.5, 8)
    fits = []
    for limit in (10**12, 0):
        for module in (reductions, mnp):
            monkeypatch.setattr(module, "JIT_MIN_CELLS", limit)
            monkeypatch.setattr(module, "_cells_seen", {})
        est = dec.DPPCA(k, epsilon=4.0, delta=1e-5, n_subsets=n_subsets,
                        random_state=1).fit(X)
        fits.append((est.components_, est.explained_variance_))
    _same(tuple(fits[0]), tuple(fits[1]))
