"""Wide tables (issue 36): centring by row-pair differences where the public shape says the
private mean's rank-one bias would hide the components."""

from __future__ import annotations

import math

import dp_accounting
import numpy as np
import pytest
from sklearn.decomposition import PCA

import privpca
import privpca.pipeline.budget as budget
from privpca.accounting import PrivacyLedger
from privpca.accounting.composition import compose_epsilon
from privpca.pipeline.budget import mean_bias_ratio, pairs_pay
from privpca.pipeline.pairing import pair_differences, pair_order
from privpca.pipeline.release import MEAN_PARTS, ReleasePipeline


def spiked(n, p, seed=0, spikes=(36.0, 16.0), noise=0.09, mean_scale=3.0):
    """The issue's spiked model, with a mean of N(0, 1)·3 per coordinate."""
    rng = np.random.default_rng(seed)
    V = np.linalg.qr(rng.standard_normal((p, len(spikes))))[0]
    X = (rng.standard_normal((n, len(spikes))) * np.sqrt(spikes)) @ V.T
    X += rng.standard_normal((n, p)) * math.sqrt(noise)
    return X + rng.standard_normal(p) * mean_scale


def distance(A, B):
    return float(np.linalg.norm(A.T @ A - B.T @ B))


def fit(X, seed=0, **kw):
    return privpca.AnalyzeGaussPCA(n_components=2, epsilon=1.0, delta=1e-5, random_state=seed,
                                   ledger=PrivacyLedger(), **kw).fit(X)


def run_for(n, p, **kw):
    est = privpca.AnalyzeGaussPCA(n_components=2, **kw)
    return ReleasePipeline(est, est._settings(), n, p, est._statistic("replace", 2))


# ---------------------------------------------------------------------------- the pairing
def test_pair_differences_have_the_covariance_and_no_mean():
    rng = np.random.default_rng(1)
    cov = np.diag([4.0, 1.0, 0.25])
    X = rng.multivariate_normal([100.0, -50.0, 7.0], cov, size=40_000)
    D = pair_differences(X, np.random.default_rng(2))
    assert D.shape == (20_000, 3)
    assert np.abs(D.mean(axis=0)).max() < 0.05
    np.testing.assert_allclose(D.T @ D / len(D), cov, atol=0.1)


def test_pairing_is_a_secret_permutation_from_the_given_generator_only():
    X = np.random.default_rng(3).standard_normal((11, 4))
    state = np.random.get_state()  # noqa: NPY002
    a1 = pair_differences(X, np.random.default_rng(5))
    a2 = pair_differences(X, np.random.default_rng(5))
    np.testing.assert_array_equal(a1, a2)
    assert np.random.get_state()[1].tolist() == state[1].tolist()  # noqa: NPY002
    a, b = pair_order(11, np.random.default_rng(5))
    assert len(a) == len(b) == 5 and len(set(a) | set(b)) == 10  # disjoint; one left out


def test_replacing_one_row_changes_at_most_one_difference():
    X = np.random.default_rng(4).standard_normal((9, 3))
    for i in range(9):
        Y = X.copy()
        Y[i] = [10.0, -10.0, 3.0]
        dX = pair_differences(X, np.random.default_rng(6))
        dY = pair_differences(Y, np.random.default_rng(6))
        assert int((np.abs(dX - dY).sum(axis=1) > 0).sum()) <= 1


# ---------------------------------------------------------------------------- the rule
def test_the_rule_follows_the_public_shape():
    assert pairs_pay(1500, 600, 1.0, 1e-5, statistic_share=0.91)  # the model
    assert pairs_pay(1559, 617, 1.0, 1e-5, statistic_share=0.91)  # isolet5
    for n, p in [(581_012, 10), (5000, 24), (1797, 64), (3000, 210)]:  # the mean wins there
        assert not pairs_pay(n, p, 1.0, 1e-5, statistic_share=0.71)
    r = mean_bias_ratio(3000, 200, 1.0, 1e-5, statistic_share=0.71)
    assert mean_bias_ratio(3000, 400, 1.0, 1e-5, statistic_share=0.71) > r  # wider: worse
    assert mean_bias_ratio(6000, 200, 1.0, 1e-5, statistic_share=0.71) < r  # more rows
    assert mean_bias_ratio(3000, 200, 4.0, 1e-5, statistic_share=0.71) < r  # more epsilon
    assert mean_bias_ratio(3000, 200, 1.0, 1e-5, statistic_share=0.71,
                           shares={"mean_refine": 0.3}) < r
    assert mean_bias_ratio(3000, 200, math.inf, 1e-5, statistic_share=0.71) == 0.0


def test_the_pipeline_pairs_only_where_it_may():
    assert run_for(1500, 600).pairing
    assert not run_for(1797, 64).pairing
    # The user's choices are kept: a public centre, private scales, the mean's shares.
    assert not run_for(1500, 600, centering=np.zeros(600)).pairing
    assert not run_for(1500, 600, scale=True).pairing
    assert not run_for(1500, 600, budget_shares={"mean_refine": 0.2}).pairing
    assert not run_for(1500, 600, data_norm=10.0).pairing
    # Too few pairs for the private bound: the mean stays (the public check is the same).
    assert not run_for(569, 30).pairing


def test_a_paired_plan_drops_the_mean_and_gives_its_share_to_the_statistic():
    run = run_for(1500, 600)
    assert not set(MEAN_PARTS) & set(run.plan.parts)
    assert run.n_statistic == 750
    assert run.plan["statistic"].weight > 0.95


# ---------------------------------------------------------------------------- the fit
def test_a_wide_fit_composes_to_the_request_and_says_it_paired():
    X = spiked(1500, 600)
    est = fit(X)
    rec = est.privacy_
    assert (rec.epsilon, rec.delta) == (1.0, 1e-5)
    names = [s.mechanism.split(":")[0] for s in rec.spends]
    assert names == ["bound", "statistic"]
    events = [dp_accounting.SelfComposedDpEvent(s.dp_event, s.count) for s in rec.spends]
    assert compose_epsilon(events, 1e-5) == pytest.approx(1.0, abs=3e-3)
    assert "row pairs" in rec.notes
    np.testing.assert_array_equal(est.mean_, np.zeros(600))  # no mean was released


@pytest.mark.parametrize("seed", [0, 1])
def test_pairs_recover_what_the_private_mean_loses(seed):
    # n = 1 500, p = 100: the private mean's bias n·e·eᵀ takes the second component's
    # place (distance ≈ 1.41, measured); the pairs keep both (≈ 0.54).
    X = spiked(1500, 100, seed=seed)
    ref = PCA(2).fit(X).components_
    assert run_for(*X.shape).pairing
    assert distance(fit(X, seed).components_, ref) < 1.0


def test_low_dimensional_tables_are_unchanged(monkeypatch):
    X = spiked(3000, 12, seed=3)
    paired = fit(X, 7).components_
    monkeypatch.setattr(budget, "PAIRS_MIN_RATIO", math.inf)
    np.testing.assert_array_equal(fit(X, 7).components_, paired)


def test_a_streamed_wide_table_is_paired_too():
    from privpca.streaming import ArraySource

    X = spiked(1500, 100, seed=2)
    a = fit(X, 3)
    b = fit(ArraySource(X), 3)
    assert "row pairs" in b.privacy_.notes
    np.testing.assert_allclose(b.components_, a.components_, atol=1e-8)
