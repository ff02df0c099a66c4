"""The client/server protocol and the fast simulation agree in distribution."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from conftest import PAPER
from privpca import LocalGaussianPCA, PrivacyLedger, RowClippingWarning
from privpca.local_protocol import (
    LocalCovarianceAggregator,
    LocalCovarianceRandomiser,
    covariance_sensitivity,
    pack_upper_triangle,
    simulate_report_sum,
    unpack_upper_triangle,
)
from privpca.metrics import subspace_distance


def test_sensitivity_is_attained_at_orthogonal_basis_vectors():
    p = 5
    e1, e2 = np.eye(p)[0], np.eye(p)[1]
    gap = np.linalg.norm(
        pack_upper_triangle(np.outer(e1, e1)) - pack_upper_triangle(np.outer(e2, e2))
    )
    assert gap == pytest.approx(math.sqrt(2)) == covariance_sensitivity(1.0)
    # No pair of unit vectors does worse (random search).
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2000, p))
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    rows, cols = np.triu_indices(p)
    u = x[:, rows] * x[:, cols]
    d = np.linalg.norm(u[:1000] - u[1000:], axis=1)
    assert d.max() <= math.sqrt(2) + 1e-12
    assert covariance_sensitivity(2.0) == pytest.approx(4 * math.sqrt(2))
    assert covariance_sensitivity(1.0, "paper") == 1.0


def test_pack_unpack_round_trip(rng):
    A = rng.standard_normal((6, 6))
    A = A + A.T
    np.testing.assert_array_equal(unpack_upper_triangle(pack_upper_triangle(A), 6), A)
    with pytest.raises(ValueError, match="length 21"):
        unpack_upper_triangle(np.zeros(20), 6)


def test_report_is_upper_triangle_plus_noise(rng):
    rand = LocalCovarianceRandomiser(4, epsilon=1.0, delta=1e-5)
    x = np.array([0.5, -0.5, 0.1, 0.0])
    reports = np.stack([rand.report(x, rng) for _ in range(4000)])
    assert reports.shape == (4000, 10)
    np.testing.assert_allclose(reports.mean(axis=0), pack_upper_triangle(np.outer(x, x)), atol=0.6)
    assert reports.std(axis=0) == pytest.approx(np.full(10, rand.noise_scale), rel=0.05)


def test_randomiser_clips_on_the_client(rng):
    rand = LocalCovarianceRandomiser(2, epsilon=1.0, delta=1e-5)
    with pytest.warns(RowClippingWarning, match="were clipped") as caught:
        reports = np.stack([rand.report([3.0, 4.0], rng) for _ in range(2000)])
    # The record sent is the clipped one, (0.6, 0.8); the warning names no count nor norm (5).
    np.testing.assert_allclose(reports.mean(axis=0), [0.36, 0.48, 0.64],
                               atol=5 * rand.noise_scale / np.sqrt(2000))
    assert all("5" not in str(w.message) and " of " not in str(w.message) for w in caught)


def test_aggregator_checks_reports():
    agg = LocalCovarianceAggregator(LocalCovarianceRandomiser(3, epsilon=1.0, delta=1e-5))
    with pytest.raises(ValueError, match="No reports"):
        agg.noisy_second_moment()
    with pytest.raises(ValueError, match="length 6"):
        agg.add(np.zeros(5))
    with pytest.raises(ValueError, match="NaN"):
        agg.add(np.full(6, np.nan))
    agg.add(np.ones(6)).add(np.zeros((3, 6)))
    assert agg.n_reports_ == 4
    np.testing.assert_allclose(agg.noisy_second_moment(), np.full((3, 3), 0.25))


def test_protocol_and_fast_path_agree_in_distribution():
    """Entry-wise two-sample KS tests between n separate reports and the one-shot simulation."""
    p, n, reps = 4, 50, 400
    rng = np.random.default_rng(11)
    X = rng.standard_normal((n, p))
    X /= 2 * np.linalg.norm(X, axis=1, keepdims=True)
    rand = LocalCovarianceRandomiser(p, epsilon=1.0, delta=1e-5)
    rows, cols = np.triu_indices(p)
    protocol = np.empty((reps, rows.size))
    fast = np.empty((reps, rows.size))
    for r in range(reps):
        agg = LocalCovarianceAggregator(rand)
        for start in range(0, n, 16):  # reports arrive in batches
            agg.add(rand.report_batch(X[start : start + 16], rng))
        protocol[r] = agg.noisy_second_moment()[rows, cols]
        fast[r] = (simulate_report_sum(X, rand, rng) / n)[rows, cols]
    pvalues = [stats.ks_2samp(protocol[:, j], fast[:, j]).pvalue for j in range(rows.size)]
    assert min(pvalues) > 1e-3 / rows.size  # Bonferroni over the 10 entries
    # And both match the exact law N(XᵀX/n, σ₁²/n) entry-wise.
    mean = (X.T @ X / n)[rows, cols]
    sd = rand.noise_scale / math.sqrt(n)
    for sample in (protocol, fast):
        z = ((sample - mean) / sd).ravel()
        assert stats.kstest(z, "norm").pvalue > 1e-4


def test_fit_aggregate_matches_fit_in_distribution():
    p, n, k, reps = 5, 400, 1, 60
    rng = np.random.default_rng(3)
    V = np.eye(p)[:, :1]
    X = 0.15 * rng.standard_normal((n, p))
    X[:, 0] *= 4
    X /= np.maximum(1.0, np.linalg.norm(X, axis=1, keepdims=True))
    kw = dict(n_components=k, epsilon=8.0, delta=1e-5, **PAPER)
    err_protocol, err_fast = [], []
    for r in range(reps):
        est = LocalGaussianPCA(**kw, random_state=r).fit(X)
        err_fast.append(subspace_distance(est.components_.T, V))
        rand = LocalCovarianceRandomiser(p, epsilon=8.0, delta=1e-5)
        agg = LocalCovarianceAggregator(rand).add(rand.report_batch(X, rng))
        est2 = LocalGaussianPCA(**kw).fit_aggregate(agg)
        err_protocol.append(subspace_distance(est2.components_.T, V))
        assert est2.privacy_.n_samples == n
    assert stats.ks_2samp(err_protocol, err_fast).pvalue > 1e-3


def test_fit_aggregate_refuses_mismatched_parameters():
    rand = LocalCovarianceRandomiser(3, epsilon=2.0, delta=1e-5)
    agg = LocalCovarianceAggregator(rand).add(np.zeros(6))
    with pytest.raises(ValueError, match="differs"):
        LocalGaussianPCA(n_components=1, epsilon=1.0, **PAPER).fit_aggregate(agg)


def test_fit_aggregate_with_auto_data_norm_uses_the_randomisers_bound():
    """``data_norm="auto"`` accepts the bound the server released: the record and
    ``data_norm_`` carry the randomiser's bound and centre."""
    rng = np.random.default_rng(4)
    X = 0.3 * rng.standard_normal((300, 4)) + 1.0
    rand = LocalCovarianceRandomiser(4, epsilon=1.0, delta=1e-5, data_norm=2.0,
                                     centre=np.ones(4))
    agg = LocalCovarianceAggregator(rand).add(rand.report_batch(X, rng))
    ledger = PrivacyLedger()
    est = LocalGaussianPCA(n_components=2, ledger=ledger).fit_aggregate(agg)
    assert est.data_norm_ == est.privacy_.data_norm == 2.0
    np.testing.assert_array_equal(est.mean_, np.ones(4))
    assert est.privacy_.n_samples == 300 and est.n_features_in_ == 4
    assert len(ledger) == 1 and ledger.records[0][1] is est.privacy_


def test_fit_aggregate_refuses_a_centering_the_reports_do_not_have():
    """The collected reports are centred on their randomiser's centre or not at all: a
    ``centering`` asking for anything else is refused (before, the defaults silently fitted
    the uncentred second moment of uncentred reports)."""
    rng = np.random.default_rng(20261129)
    X = 0.3 * rng.standard_normal((300, 4)) + 1.0
    plain = LocalCovarianceRandomiser(4, epsilon=1.0, delta=1e-5, data_norm=3.0)
    centred = LocalCovarianceRandomiser(4, epsilon=1.0, delta=1e-5, data_norm=3.0,
                                        centre=np.ones(4))
    for rand, kwargs, match in (
        (plain, {}, "not centred"),
        (centred, {"centering": None, "data_norm": 3.0}, "centering=None"),
        (centred, {"centering": np.zeros(4), "data_norm": 3.0}, "another centre"),
    ):
        agg = LocalCovarianceAggregator(rand).add(rand.report_batch(X, rng))
        ledger = PrivacyLedger()
        with pytest.raises(ValueError, match=match):
            LocalGaussianPCA(n_components=2, ledger=ledger, **kwargs).fit_aggregate(agg)
        assert len(ledger) == 0
    agg = LocalCovarianceAggregator(centred).add(centred.report_batch(X, rng))
    est = LocalGaussianPCA(n_components=2, centering=np.ones(4), data_norm=3.0,
                           ledger=PrivacyLedger()).fit_aggregate(agg)
    np.testing.assert_array_equal(est.mean_, np.ones(4))


@pytest.mark.parametrize("delta", [0.1, 0.5, 0.9])
def test_a_users_randomiser_refuses_a_large_delta_as_the_estimators_do(delta):
    """δ ≥ 0.1 is refused at the client too (before, any δ < 1 was accepted there and only the
    server's fit_aggregate noticed), and forced only inside allow_large_delta."""
    import privpca

    with pytest.raises(ValueError, match="allow_large_delta"):
        LocalCovarianceRandomiser(3, epsilon=1.0, delta=delta)
    with privpca.config_context(allow_large_delta=True):
        assert LocalCovarianceRandomiser(3, epsilon=1.0, delta=delta).delta == delta
