"""Bingham samplers (Hoff's Gibbs, Kent–Ganeiber–Mardia) and BinghamPCA (PPCA).

Distribution checks use two-sample or one-sample Kolmogorov–Smirnov tests against exact
references: the KGM rejection sampler (k = 1), rejection from the Haar law (tiny spreads), the
von Mises law of 2φ on the circle (p = 2), and, for k = p − 1, the Bingham law of the normal
vector (``tr(VᵀΛV) = tr Λ − nᵀΛn``). Gibbs traces are autocorrelated, so every such test
thins or uses chains whose integrated autocorrelation time was measured to be ≈ 1; seeds are
fixed and thresholds are p > 1e-3.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from scipy import stats
from sklearn.utils.estimator_checks import parametrize_with_checks

import privpca.decomposition.bingham as bingham_module
import privpca.mechanisms._bingham_kernels as kernels
from conftest import PAPER, PAPER_CENTERING, expected_failed_checks
from privpca import (
    DataDependentWarning,
    PrivacyLeakWarning,
    PrivacyLedger,
    RowClippingWarning,
    default_ledger,
)
from privpca.datasets import make_spiked
from privpca.decomposition.bingham import BinghamPCA
from privpca.mechanisms.bingham_sampler import (
    ProposalBudgetExceededError,
    _draw_theta,
    _orthonormalise,
    _run_chain,
    effective_sample_size,
    geweke_z,
    mixing_diagnostics,
    sample_bingham_exact,
    sample_bingham_gibbs,
    split_rhat,
)
from privpca.metrics import sin_theta

# --- the one-dimensional conditional ----------------------------------------------------------


def _theta_draws(impl, a, K, n, rng):
    if impl == "compiled":
        return kernels.draw_thetas(a, K, n, rng)
    return np.array([_draw_theta(a, K, rng) for _ in range(n)])


@pytest.mark.parametrize("impl", ["reference", "compiled"])
@pytest.mark.parametrize(
    ("K", "a"),
    [
        (0.5, 3.0),  # circle: von Mises (reference); two-piece envelope (compiled)
        (0.5, -1.5),  # circle: arcsine proposals (compiled)
        (0.5, -40.0),  # circle, mass at θ ≈ 0
        (0.5, 1e7),  # circle, mass at θ ≈ 1 (NumPy's von Mises: wrapped normal here)
        (1.0, -5.0),  # half-normal envelope
        (10.0, 9.0),  # near-flat: uniform envelope
        (10.0, 25.0),  # grid envelope
        (400.0, 850.0),  # grid envelope, large K
        (400.0, 1e5),  # two-piece Gamma envelope
        (1.5, 1e4),  # mass at θ ≈ 1, small K
        (400.0, -1e5),  # mass at θ ≈ 0
    ],
)
def test_theta_draw_matches_its_density(K, a, impl):
    rng = np.random.default_rng(11)
    draws = _theta_draws(impl, a, K, 3000, rng)
    np.testing.assert_allclose(draws.sum(axis=1), 1.0, atol=1e-12)
    # Reference CDF of θ ∝ θ^{-1/2}(1 − θ)^{K−1}e^{aθ} by quadrature in y = √θ (in s = 1 − θ
    # near θ = 1, where the mass is too thin for a uniform grid in y).
    if a > 50 * K:
        s = np.linspace(0.0, 30.0 * K / a, 200_001)[1:]
        log_f = -0.5 * np.log1p(-s) + (K - 1) * np.log(s) - a * s
        cdf = np.cumsum(np.exp(log_f - log_f.max()))
        sample = draws[:, 1]
    else:
        s = np.linspace(0.0, 1.0, 400_001)[1:-1]
        with np.errstate(divide="ignore"):
            log_f = (K - 1) * np.log1p(-s * s) + a * s * s
        cdf = np.cumsum(np.exp(log_f - log_f.max()))
        sample = np.sqrt(draws[:, 0])
    cdf /= cdf[-1]
    assert stats.kstest(sample, lambda v: np.interp(v, s, cdf)).pvalue > 1e-3


# --- the compiled sweeps against the Python reference --------------------------------------


@pytest.mark.parametrize(
    ("p", "k", "scale", "update", "start"),
    [
        (6, 1, 1.0, "row", "haar"),  # vector sweep
        (40, 1, 1e4, "row", "haar"),  # vector sweep, a dominant coordinate
        (6, 2, 1.0, "row", "haar"),
        (7, 3, 1.0, "row", "haar"),
        (30, 4, 1e4, "row", "haar"),  # concentrated: tiny r², large f
        (8, 3, 10.0, "row", "axes"),  # rows with x = 0 and rows with ‖x‖ = 1
        (6, 1, 10.0, "row", "axes"),  # all the mass on one coordinate
        (9, 3, 5.0, "column", "haar"),  # column scheme with the compiled vector sweep
    ],
)
def test_compiled_chain_reproduces_the_reference(p, k, scale, update, start):
    # Same update rules, same draws in the same order, same eigenbasis convention: the
    # compiled chain is the reference chain up to rounding (so it has the same law).
    rng = np.random.default_rng(p + k)
    lam = np.sort(rng.uniform(0.0, 10.0, p))[::-1] * scale
    W0 = np.eye(p)[:, :k] if start == "axes" else _orthonormalise(rng.standard_normal((p, k)))
    W_c, tr_c = _run_chain(W0.copy(), lam, 6, update, np.random.default_rng(1))
    W_r, tr_r = _run_chain(W0.copy(), lam, 6, update, np.random.default_rng(1), reference=True)
    np.testing.assert_allclose(W_c, W_r, atol=1e-9)
    np.testing.assert_allclose(tr_c, tr_r, rtol=1e-12)
    np.testing.assert_allclose(W_c.T @ W_c, np.eye(k), atol=1e-12)


@pytest.mark.parametrize("lam1", [1.0, 3.0, 40.0])
def test_compiled_circle_agrees_with_the_reference_in_law(lam1):
    # p = 2 is the one case where the two differ in algorithm (K = 1/2: von Mises in the
    # reference, an exact rejection sampler in the compiled sweep). Each sweep's first
    # coordinate update is an exact draw there, so successive states are nearly independent.
    lam = np.array([lam1, 0.0])
    W0 = np.array([[0.6], [0.8]])
    comp = _run_chain(W0.copy(), lam, 2000, "row", np.random.default_rng(21))[1]
    ref = _run_chain(W0.copy(), lam, 2000, "row", np.random.default_rng(22), reference=True)[1]
    assert stats.ks_2samp(comp, ref).pvalue > 1e-3


def test_full_rank_gibbs_is_an_exact_haar_draw():
    # k = p: the density is constant, the row update degenerate (r² = 0); the sampler draws
    # from the Haar law directly. Haar: the first entry squared is Beta(1/2, (p − 1)/2).
    lam = np.array([6.0, 3.0, 0.0])
    rng = np.random.default_rng(8)
    draws = [sample_bingham_gibbs(lam, 3, 2, rng=rng) for _ in range(1000)]
    for res in draws[:5]:
        np.testing.assert_allclose(res.basis.T @ res.basis, np.eye(3), atol=1e-12)
        np.testing.assert_allclose(res.trace, [9.0, 9.0])
    first = np.array([res.basis[0, 0] ** 2 for res in draws])
    assert stats.kstest(first, stats.beta(0.5, 1.0).cdf).pvalue > 1e-3


def test_compiled_chains_in_threads_match_sequential_runs():
    # The kernels release the GIL: chains on separate Generators run side by side and give
    # what they give alone.
    from concurrent.futures import ThreadPoolExecutor

    lam = np.linspace(30.0, 0.0, 25)

    def run(seed):
        return sample_bingham_gibbs(lam, 3, 50, rng=np.random.default_rng(seed)).basis

    alone = [run(s) for s in range(4)]
    with ThreadPoolExecutor(2) as pool:
        together = list(pool.map(run, range(4)))
    for a, b in zip(alone, together, strict=True):
        np.testing.assert_array_equal(a, b)


@pytest.mark.slow
@pytest.mark.parametrize(("update", "n_compiled"), [("row", 20_000), ("column", 8_000)])
def test_compiled_and_reference_chains_agree_in_law(update, n_compiled):
    # Stationary traces of long independent chains (the reference runs 4 000 sweeps).
    rng = np.random.default_rng(13)
    p, k = 8, 3
    lam = np.sort(rng.uniform(0.0, 20.0, p))[::-1]
    W0 = _orthonormalise(rng.standard_normal((p, k)))
    comp = _run_chain(W0.copy(), lam, n_compiled, update, np.random.default_rng(31))[1][20:]
    ref = _run_chain(W0.copy(), lam, 4_000, update, np.random.default_rng(32),
                     reference=True)[1][20:]
    assert stats.ks_2samp(comp[::2], ref[::2]).pvalue > 1e-3
    assert abs(comp.mean() - ref.mean()) < 4 * ref.std() / math.sqrt(ref.size / 4)


# --- samplers against exact answers -----------------------------------------------------------


def test_gibbs_k1_matches_exact_sampler():
    rng = np.random.default_rng(0)
    lam = np.array([5.0, 3.0, 2.0, 1.0, 0.5, 0.0])  # low concentration: KGM accepts ~80%
    exact = np.array([sample_bingham_exact(lam, rng=rng).vector for _ in range(3000)])
    chain = sample_bingham_gibbs(lam, 1, 3000, rng=rng)
    assert stats.ks_2samp((exact**2) @ lam, chain.trace[20:]).pvalue > 1e-3
    assert stats.ks_2samp(exact[:, 0] ** 2, exact[:, 0] ** 2).pvalue == 1.0  # sanity


@pytest.mark.parametrize("sampler", ["exact", "gibbs"])
def test_circle_is_von_mises_in_twice_the_angle(sampler):
    # p = 2: v = (cos φ, sin φ), density ∝ exp(λ₁cos²φ + λ₂sin²φ) ∝ exp(((λ₁−λ₂)/2) cos 2φ).
    rng = np.random.default_rng(1)
    lam = np.array([3.0, 0.0])
    if sampler == "exact":
        v = np.array([sample_bingham_exact(lam, rng=rng).vector for _ in range(3000)])
    else:
        v = np.array([sample_bingham_gibbs(lam, 1, 3, rng=rng).basis[:, 0] for _ in range(1500)])
    two_phi = np.angle((v[:, 0] + 1j * v[:, 1]) ** 2)
    ref = stats.vonmises(kappa=(lam[0] - lam[1]) / 2.0)
    assert stats.kstest(two_phi, ref.cdf).pvalue > 1e-3


@pytest.mark.parametrize("update", ["row", "column"])
def test_gibbs_matches_haar_rejection_for_k2(update):
    rng = np.random.default_rng(7)
    p, k = 5, 2
    lam = np.array([3.0, 2.2, 1.0, 0.4, 0.0])
    # Exact reference: Haar proposals accepted with probability exp(tr(WᵀΛW) − λ₁ − λ₂).
    Q = np.linalg.qr(rng.standard_normal((100_000, p, k)))[0]
    tr = np.einsum("i,nij,nij->n", lam, Q, Q)
    exact = tr[np.log(rng.random(tr.size)) < tr - lam[:k].sum()]
    chain = sample_bingham_gibbs(lam, k, 3000, rng=rng, update=update)
    assert stats.ks_2samp(exact, chain.trace[10::2]).pvalue > 1e-3


@pytest.mark.parametrize("update", ["row", "column"])
def test_gibbs_k_equals_p_minus_one_matches_the_normal_vector(update):
    # For k = p − 1, tr(VᵀΛV) = tr Λ − nᵀΛn with n ~ Bingham(−Λ) (sampled exactly by KGM).
    rng = np.random.default_rng(3)
    lam = np.array([4.0, 2.5, 1.0, 0.0])
    normals = np.array([sample_bingham_exact(-lam, rng=rng).vector for _ in range(3000)])
    chain = sample_bingham_gibbs(lam, 3, 3000, rng=rng, update=update)
    assert stats.ks_2samp(lam.sum() - (normals**2) @ lam, chain.trace[10:]).pvalue > 1e-3


def test_row_and_column_updates_agree_for_k3():
    rng = np.random.default_rng(2)
    lam = np.sort(rng.uniform(0.0, 20.0, 8))[::-1]
    a = sample_bingham_gibbs(lam, 3, 3000, rng=rng, update="row").trace[20:]
    b = sample_bingham_gibbs(lam, 3, 3000, rng=rng, update="column").trace[20:]
    assert stats.ks_2samp(a[::2], b[::2]).pvalue > 1e-3


def test_concentration_grows_to_the_top_eigenvector():
    rng = np.random.default_rng(4)
    base = np.array([1.0, 0.6, 0.3, 0.1, 0.0])
    means = []
    for scale in (0.5, 5.0, 50.0, 5000.0):
        trace_u1 = [
            sample_bingham_gibbs(base * scale, 1, 3, rng=rng).basis[0, 0] ** 2 for _ in range(300)
        ]
        means.append(np.mean(trace_u1))
    assert all(np.diff(means) > 0), means
    assert means[-1] > 0.999


@pytest.mark.parametrize("update", ["row", "column"])
def test_mode_is_the_top_k_eigenspace(update):
    rng = np.random.default_rng(5)
    p, k = 12, 3
    U = np.linalg.qr(rng.standard_normal((p, p)))[0]
    lam = np.concatenate((np.full(k, 1e5), np.linspace(0.0, 10.0, p - k)))
    chain = sample_bingham_gibbs(lam, k, 5, eigenvectors=U, update=update, rng=rng)
    assert sin_theta(chain.basis, U[:, :k]) < 0.05
    np.testing.assert_allclose(chain.basis.T @ chain.basis, np.eye(k), atol=1e-10)


def test_gibbs_reaches_stationary_level_from_a_random_start():
    # High concentration (spread 5·10⁴ like n = 10⁵, ε = 1): the trace's first value is already
    # within a few stationary standard deviations of its long-run mean.
    rng = np.random.default_rng(6)
    lam = np.concatenate(([5e4, 4.9e4], rng.uniform(0, 200, 38)))
    chain = sample_bingham_gibbs(lam, 2, 60, rng=rng)
    tail = chain.trace[20:]
    assert abs(chain.trace[1] - tail.mean()) < 5 * tail.std()
    assert effective_sample_size(tail) > 20


def test_exact_sampler_budget_raises_never_hangs():
    # Spiked-like spectrum with a large spread: about 1 proposal in 5 is accepted, so a budget
    # of one proposal fails for most seeds, and a failure is an error, never a loop.
    lam = np.concatenate(([2.5e4, 2.4e4], np.linspace(0.0, 300.0, 48)))
    outcomes = []
    for seed in range(10):
        try:
            res = sample_bingham_exact(lam, max_proposals=1, rng=np.random.default_rng(seed))
        except ProposalBudgetExceededError as err:
            assert "max_proposals=1 " in str(err)
            outcomes.append(False)
        else:
            assert res.n_proposals == 1
            outcomes.append(True)
    assert not all(outcomes)
    ok = sample_bingham_exact(lam, max_proposals=100_000, rng=np.random.default_rng(0))
    assert 1 <= ok.n_proposals <= 100_000
    assert np.linalg.norm(ok.vector) == pytest.approx(1.0)


def test_exact_sampler_agrees_with_gibbs_at_high_concentration():
    rng = np.random.default_rng(12)
    lam = np.r_[1000.0, 990.0, rng.uniform(0, 50, 18)]  # near-degenerate top pair
    exact = np.array([sample_bingham_exact(lam, rng=rng).vector for _ in range(1500)])
    chain = sample_bingham_gibbs(lam, 1, 1500, rng=rng)
    assert stats.ks_2samp((exact**2) @ lam, chain.trace[10:]).pvalue > 1e-3


# --- diagnostics --------------------------------------------------------------------------------


def test_diagnostics_on_known_chains():
    rng = np.random.default_rng(9)
    iid = rng.standard_normal((4, 1000))
    assert split_rhat(iid) == pytest.approx(1.0, abs=0.01)
    assert effective_sample_size(iid) == pytest.approx(4000, rel=0.2)
    ar = np.zeros(4000)
    for t in range(1, ar.size):  # AR(1), ρ = 0.9: τ = (1 + ρ)/(1 − ρ) = 19
        ar[t] = 0.9 * ar[t - 1] + rng.standard_normal()
    assert effective_sample_size(ar) == pytest.approx(4000 / 19, rel=0.35)
    shifted = iid + np.arange(4)[:, None]
    assert split_rhat(shifted) > 1.5
    drift = rng.standard_normal(1000) + np.linspace(0, 3, 1000)
    assert abs(geweke_z(drift)) > 3
    report = mixing_diagnostics(shifted)
    assert report["flags"] and report["n_chains"] == 4 and report["n_draws"] == 1000
    assert mixing_diagnostics(iid)["flags"] == []


# --- the estimator ----------------------------------------------------------------------------


@parametrize_with_checks([BinghamPCA(epsilon=1e4, n_iter=10, burn_in=0), BinghamPCA(**PAPER)],
                         expected_failed_checks=expected_failed_checks)
def test_sklearn_compatible(estimator, check):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RowClippingWarning)  # check data exceeds norm 1
        check(estimator)


@pytest.fixture(scope="module")
def spiked():
    return make_spiked(20_000, 10, 2, lam=9.0, random_state=0)


def test_privacy_record_and_attributes(spiked):
    X, _ = spiked
    est = BinghamPCA(n_components=2, epsilon=0.7, data_norm=2.0, random_state=0,
        **PAPER_CENTERING).fit(X)
    assert est.components_.shape == (2, 10)
    np.testing.assert_allclose(est.components_ @ est.components_.T, np.eye(2), atol=1e-10)
    rec = est.privacy_
    assert (rec.epsilon, rec.delta, rec.model) == (0.7, 0.0, "central")
    assert rec.neighbouring == "replace one record"
    assert rec.sensitivity == pytest.approx(4.0)  # D² of the score
    assert rec.noise_scale == pytest.approx(2 * 4.0 / 0.7)  # temperature 2D²/ε
    assert rec.calibration == "exponential mechanism"
    assert rec.n_samples == 20_000 and "n_clipped" not in rec.to_dict()
    assert len(rec.spends) == 1 and rec.spends[0].dp_event is None
    assert "total-variation" in rec.notes and "basic composition" in rec.notes
    assert est.sampler_ == "gibbs" and est.n_sweeps_ == 200
    assert not hasattr(est, "trace_")
    np.testing.assert_allclose(est.transform(X[:5]), X[:5] @ est.components_.T)


def test_auto_uses_exact_for_one_component(spiked):
    X, _ = spiked
    one = BinghamPCA(n_components=1, epsilon=1.0, random_state=0, **PAPER).fit(X)
    # The exact sampler with a Gibbs fallback: published as such whichever ran (issue 26).
    assert one.sampler_ == "exact-or-gibbs" and one.n_sweeps_ == 200
    assert "exact Kent-Ganeiber-Mardia" in one.privacy_.notes
    exact = BinghamPCA(n_components=1, epsilon=1.0, sampler="exact", random_state=0,
                       **PAPER).fit(X)
    assert exact.sampler_ == "exact" and exact.n_sweeps_ == 0
    assert "exactly" in exact.privacy_.notes
    np.testing.assert_array_equal(exact.components_, one.components_)  # same draw
    two = BinghamPCA(n_components=2, epsilon=1.0, burn_in=5, n_iter=5, random_state=0,
        **PAPER).fit(X)
    assert two.sampler_ == "gibbs"


def test_exact_sampler_errors(spiked):
    X, _ = spiked
    with pytest.raises(ValueError, match="requires n_components=1"):
        BinghamPCA(n_components=2, sampler="exact", **PAPER).fit(X[:100])
    raised = 0
    for seed in range(10):
        try:
            BinghamPCA(
                n_components=1,
                epsilon=5.0,
                sampler="exact",
                max_proposals=1,
                random_state=seed,
                ledger=PrivacyLedger(), **PAPER,
            ).fit(X)
        except ProposalBudgetExceededError as err:
            assert "max_proposals=1 " in str(err)
            raised += 1
    assert raised > 0


def test_auto_falls_back_to_gibbs_with_a_warning(spiked, monkeypatch):
    X, _ = spiked
    kw = dict(n_components=1, epsilon=1.0, burn_in=5, n_iter=5, random_state=0, **PAPER)
    accepted = BinghamPCA(**kw).fit(X)

    def exhausted(*args, **kwargs):
        raise ProposalBudgetExceededError("budget")

    monkeypatch.setattr(bingham_module, "sample_bingham_exact", exhausted)
    # A DataDependentWarning for the data holder; nothing published says it happened.
    with pytest.warns(DataDependentWarning, match="the Gibbs sampler drew"):
        est = BinghamPCA(**kw).fit(X)
    assert est.sampler_ == accepted.sampler_ == "exact-or-gibbs"
    assert est.n_sweeps_ == accepted.n_sweeps_ == 10
    assert est.privacy_ == accepted.privacy_


def test_full_rank_is_haar(spiked):
    X, _ = spiked
    est = BinghamPCA(n_components=10, random_state=0, **PAPER).fit(X[:200])
    assert est.sampler_ == "uniform"
    np.testing.assert_allclose(est.components_ @ est.components_.T, np.eye(10), atol=1e-10)


def test_clipping_warns_counts_and_never_mutates():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((100, 4)) * 0.1
    X[:7] *= 100
    original = X.copy()
    with pytest.warns(RowClippingWarning, match="exceeded the public data_norm"):
        est = BinghamPCA(n_components=2, burn_in=2, n_iter=2, random_state=0, **PAPER).fit(X)
    assert "n_clipped" not in est.privacy_.to_dict()  # a count of the data: not released
    np.testing.assert_array_equal(X, original)


@pytest.mark.parametrize(
    ("params", "match"),
    [
        ({"epsilon": 0}, r"'epsilon' parameter of BinghamPCA must be a float in the range"),
        ({"epsilon": -1}, r"Got -1 instead"),
        ({"data_norm": 0.0}, r"'data_norm'"),
        ({"sampler": "hmc"}, r"'sampler' parameter of BinghamPCA must be a str among"),
        ({"update": "block"}, r"'update'"),
        ({"burn_in": -1}, r"'burn_in'"),
        ({"n_iter": 1.5}, r"'n_iter' parameter of BinghamPCA must be an int"),
        ({"burn_in": 0, "n_iter": 0}, r"burn_in \+ n_iter of BinghamPCA must be at least 1"),
        ({"max_proposals": 0}, r"'max_proposals'"),
        ({"diagnostic_chains": -2}, r"'diagnostic_chains'"),
        ({"n_components": 11}, r"n_components=11 must be between 1 and n_features=10"),
        ({"n_components": 0}, r"'n_components'"),
    ],
)
def test_bad_parameters(params, match, spiked):
    X, _ = spiked
    with pytest.raises(ValueError, match=match):
        BinghamPCA(**params).fit(X[:50])


def test_seeded_fits_are_reproducible(spiked):
    X, _ = spiked
    a = BinghamPCA(burn_in=10, n_iter=10, random_state=4, **PAPER).fit(X).components_
    b = BinghamPCA(burn_in=10, n_iter=10, random_state=4, **PAPER).fit(X).components_
    np.testing.assert_array_equal(a, b)


def test_more_privacy_more_error_and_more_samples_less(spiked):
    X, V = spiked

    def err(eps, n):
        return np.mean(
            [
                sin_theta(
                    BinghamPCA(epsilon=eps, burn_in=20, n_iter=10, random_state=s, **PAPER)
                    .fit(X[:n])
                    .components_.T,
                    V,
                )
                for s in range(4)
            ]
        )

    assert err(0.05, 20_000) > 1.5 * err(5.0, 20_000)
    assert err(1.0, 1_000) > 1.5 * err(1.0, 20_000)


def test_diagnostic_chains_are_flagged_as_not_private(spiked):
    X, _ = spiked
    with pytest.warns(PrivacyLeakWarning, match="not covered by privacy_"):
        est = BinghamPCA(
            n_components=2, burn_in=20, n_iter=60, diagnostic_chains=3, random_state=0, **PAPER
        ).fit(X)
    assert est.trace_.shape == (4, 80)
    assert np.all((est.trace_ > 0) & (est.trace_ <= 2.0))  # tr(VᵀAV) ∈ [0, k D²]
    assert set(est.mixing_) >= {"split_rhat", "ess", "geweke_z", "flags"}
    assert est.mixing_["split_rhat"] < 1.1
    refit = BinghamPCA(n_components=2, burn_in=2, n_iter=2, random_state=0, **PAPER).fit(X)
    assert not hasattr(refit, "mixing_")


def test_ledger_records_the_pure_spend(spiked):
    X, _ = spiked
    before = len(default_ledger())
    BinghamPCA(burn_in=2, n_iter=2, random_state=0, **PAPER).fit(X[:100])
    assert len(default_ledger()) == before + 1
    ledger = PrivacyLedger()
    BinghamPCA(epsilon=0.3, burn_in=2, n_iter=2, ledger=ledger, random_state=0,
        **PAPER).fit(X[:100])
    assert ledger.epsilon(1e-6) == pytest.approx(0.3)
    assert math.isclose(ledger.records[0][1].delta, 0.0)


def test_exact_sampler_exhaustion_is_not_published():
    """Issue 26, item 4: whether the exact sampler exhausts max_proposals depends on the data.
    On two neighbouring tables (one row replaced) where, with the same seed, it accepts on one
    and exhausts on the other, everything published is the same: sampler_, n_sweeps_, the
    notes and the whole record; only the data holder gets a DataDependentWarning."""
    rng = np.random.default_rng(5)
    X = rng.standard_normal((20, 5)) * np.sqrt([4.0, 1.0, 1.0, 1.0, 1.0])
    X /= np.linalg.norm(X, axis=1).max()
    Y = X.copy()  # the largest row along the spike replaced by one orthogonal to it
    Y[np.argmax(np.abs(X[:, 0]))] = [0.0, 0.0, 0.0, 0.0, 1.0]
    for seed in range(100):  # seeds 2, 3, 11, ... separate them (14 of the first 100)
        fits = []
        for table in (X, Y):
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                est = BinghamPCA(n_components=1, epsilon=5.0, max_proposals=1, burn_in=3,
                                 n_iter=3, random_state=seed, ledger=PrivacyLedger(),
                                 **PAPER).fit(table)
            fell_back = any(issubclass(w.category, DataDependentWarning) for w in caught)
            fits.append((fell_back, est))
        if fits[0][0] != fits[1][0]:
            break
    else:
        pytest.fail("no seed made the exact sampler accept on one table only")
    a, b = fits[0][1], fits[1][1]
    assert a.sampler_ == b.sampler_ == "exact-or-gibbs"
    assert a.n_sweeps_ == b.n_sweeps_ == 6
    assert a.privacy_.notes == b.privacy_.notes
    assert a.privacy_.to_dict() == b.privacy_.to_dict()
    assert sorted(vars(a)) == sorted(vars(b))
    assert "exhaust" not in a.privacy_.notes and "fall" not in a.privacy_.notes.lower()


@pytest.mark.parametrize("sampler, k, condition", [
    ("exact", 1, "failure probability"), ("auto", 1, "Gibbs fallback is uncertified"),
    ("gibbs", 2, "Gibbs chain has reached"), ("auto", 4, None)])
def test_the_headline_states_what_the_guarantee_rests_on(sampler, k, condition, tmp_path):
    """An exact sampler's failure is an output and a Gibbs chain's law is uncertified: the
    record's headline says the guarantee rests on them; the Haar draw (k = p) rests on nothing.
    The condition survives saving and loading."""
    import privpca

    X = np.random.default_rng(11).standard_normal((400, 4))
    est = BinghamPCA(n_components=k, sampler=sampler, random_state=0,
                     ledger=PrivacyLedger(), **PAPER).fit(X)
    record = est.privacy_
    if condition is None:
        assert record.conditions == () and "provided" not in record.headline()
        return
    assert len(record.conditions) == 1 and condition in record.conditions[0]
    assert record.headline().endswith(f"; provided {record.conditions[0]}")
    assert f"provided {record.conditions[0]}" in str(record).splitlines()[1]
    path = privpca.save(est, tmp_path / "fit.npz")
    assert privpca.load(path).privacy_.conditions == record.conditions
