"""DPS-PCA: the protocol's maths (providers, server, budgets, refusals, dropouts) and DPSPCA.

The paper's experiment (Ge et al. §5.1, Figure 3) is scaled down for CI: d = 200, n = 20 000,
k = 5, s = 10, ŝ = 50, T = 10, δ = 10⁻⁵. Measured with 5 seeds there (mean ‖sin Θ‖_F after 10
rounds): 0.50 at ε = 0.5, 0.27 at ε = 1, 0.15 at ε = 2, with run-to-run standard deviations
below 0.02; the thresholds below leave several standard deviations of room.
"""

from __future__ import annotations

import json
import math
import warnings

import numpy as np
import pytest
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils.estimator_checks import parametrize_with_checks

from privpca import DPSPCA, BudgetExceededError, PrivacyLedger, RowClippingWarning
from privpca.accounting import compose_epsilon
from privpca.datasets import make_dpspca_covariance, make_dpspca_data
from privpca.decomposition.noisy_power import power_sensitivity
from privpca.federated.protocol import (
    FileReleaseCounter,
    ProviderDropoutError,
    ProviderState,
    Query,
    QueryRefusedError,
    ServerState,
    dpspca_noise_multiplier,
    paper_noise_scale,
    select_replies,
)
from privpca.metrics import sin_theta
from privpca.solvers.power import random_orthonormal_basis, thin_qr


@parametrize_with_checks([DPSPCA(n_iter=3), DPSPCA(n_iter=2, n_providers=2)])
def test_sklearn_compatible(estimator, check):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RowClippingWarning)
        warnings.simplefilter("ignore", ConvergenceWarning)
        check(estimator)


@pytest.fixture(scope="module")
def paper_small():
    """Ge et al.'s §5.1 model at d = 200, n = 20 000 (rows normalised to norm 1)."""
    return make_dpspca_data(20_000, 200, 5, 10, random_state=0)


def _provider(X, **kw):
    params = dict(n_components=2, epsilon=1.0, delta=1e-5, n_rounds=3, noise_seed=0)
    params.update(kw)
    return ProviderState(X, **params)


# --- data generator -----------------------------------------------------------------------------


def test_make_dpspca_data_matches_the_paper_model():
    U, lam = make_dpspca_covariance(50, 3, 6, random_state=0)
    np.testing.assert_allclose(U.T @ U, np.eye(50), atol=1e-10)
    np.testing.assert_array_equal(lam[:3], 100.0)
    assert np.all((lam[3:] >= 0) & (lam[3:] <= 10))
    assert np.all(U[6:, :3] == 0.0)  # leading eigenspace supported on the first s rows
    X, V = make_dpspca_data(40_000, 50, 3, 6, random_state=0)
    np.testing.assert_allclose(np.linalg.norm(X, axis=1), 1.0)
    # Row normalisation keeps the leading eigenspace: the sample second moment finds it.
    _w, vecs = np.linalg.eigh(X.T @ X / len(X))
    assert sin_theta(vecs[:, -3:], V) < 0.1
    Xraw, _ = make_dpspca_data(5_000, 50, 3, 6, normalize=None, random_state=0)
    assert np.mean(np.sum(Xraw**2, axis=1)) == pytest.approx(300 + 47 * 5, rel=0.15)


# --- provider -----------------------------------------------------------------------------------


def test_provider_answer_is_the_noised_product_with_the_stated_scale(rng):
    X = rng.standard_normal((500, 20)) * 0.1
    prov = _provider(X, noise_seed=7)
    Q = random_orthonormal_basis(20, 2, rng)
    reply = prov.answer_query(Query.from_dense(Q, round=1))
    exact = X.T @ (X @ Q) / 500
    m = dpspca_noise_multiplier(1.0, 1e-5, 3)
    assert prov.sensitivity == pytest.approx(math.sqrt(2) / 500)
    assert prov.noise_scale == pytest.approx(m * math.sqrt(2) / 500)
    noise = reply.product - exact
    expected = np.random.default_rng([7, 0]).standard_normal((20, 2)) * prov.noise_scale
    np.testing.assert_allclose(noise, expected, rtol=1e-9, atol=1e-15)
    # k = 1 uses Δ = D², as for the noisy power method.
    assert _provider(X, n_components=1).sensitivity == pytest.approx(1 / 500)


def test_noise_multiplier_composes_to_epsilon_and_paper_scale_is_recorded():
    m = dpspca_noise_multiplier(1.0, 1e-5, 10)
    import dp_accounting

    eps = compose_epsilon([dp_accounting.SelfComposedDpEvent(dp_accounting.GaussianDpEvent(m),
                                                              10)], 1e-5)
    assert eps == pytest.approx(1.0, abs=2e-3)
    omega = paper_noise_scale(1.0, 0.3, 10)
    assert omega == pytest.approx(20 * math.sqrt(2 * math.log(20 / 0.3)))


def test_provider_uses_only_the_support_rows_of_sparse_queries(rng):
    X = rng.standard_normal((300, 30)) * 0.1
    Q = np.zeros((30, 2))
    Q[[3, 8, 20]] = random_orthonormal_basis(3, 2, rng)
    query = Query.from_dense(Q)
    np.testing.assert_array_equal(query.support, [3, 8, 20])
    a = _provider(X, noise_seed=1).answer_query(query).product
    b = _provider(X, noise_seed=1).answer_query(Query(0, np.arange(30), Q, 30)).product
    np.testing.assert_allclose(a, b, atol=1e-15)


@pytest.mark.parametrize(
    ("query", "match"),
    [
        (Query(1, np.arange(20), np.ones((20, 2)), 20), "not orthonormal"),
        (Query(1, np.arange(20), 3.0 * np.eye(20)[:, :2], 20), "not orthonormal"),
        (Query(1, np.arange(20), np.full((20, 2), np.nan), 20), "NaN"),
        (Query(1, np.arange(20), np.eye(20)[:, :3], 20), r"shape \(20, 3\)"),
        (Query(1, np.arange(21), np.eye(21)[:, :2], 21), "n_features=21"),
        (Query(1, np.array([0, 0, 1]), np.eye(3)[:, :2], 20), "strictly increasing"),
        (Query(1, np.array([0, 1, 25]), np.eye(3)[:, :2], 20), "strictly increasing"),
        (Query(1, np.array([4]), np.ones((1, 2)), 20), r"shape|fewer than"),
        ("multiply by this", "Expected a Query"),
    ],
)
def test_malformed_queries_are_refused_and_cost_nothing(rng, query, match):
    prov = _provider(rng.standard_normal((50, 20)) * 0.1)
    with pytest.raises(QueryRefusedError, match=match):
        prov.answer_query(query)
    assert prov.counter.used == 0


def test_over_budget_queries_are_refused(rng):
    prov = _provider(rng.standard_normal((50, 20)) * 0.1, n_rounds=2)
    q = Query.from_dense(random_orthonormal_basis(20, 2, rng))
    prov.answer_query(q)
    prov.answer_query(q)
    with pytest.raises(BudgetExceededError, match="agreed to 2 releases"):
        prov.answer_query(q)
    assert prov.counter.used == 2


def test_file_counter_survives_restarts_and_pins_the_agreement(rng, tmp_path):
    X = rng.standard_normal((50, 20)) * 0.1
    path = tmp_path / "state.json"
    agreement = {"epsilon": 1.0, "n-rounds": 2}
    q = Query.from_dense(random_orthonormal_basis(20, 2, rng))
    _provider(X, n_rounds=2, counter=FileReleaseCounter(path, 2, agreement)).answer_query(q)
    # A "restarted" provider (new object, same file) has one release left, then refuses.
    again = _provider(X, n_rounds=2, counter=FileReleaseCounter(path, 2, agreement))
    assert again.counter.used == 1
    again.answer_query(q)
    with pytest.raises(BudgetExceededError):
        again.answer_query(q)
    assert json.loads(path.read_text())["releases"] == 2
    with pytest.raises(BudgetExceededError, match="another agreement"):
        FileReleaseCounter(path, 4, {"epsilon": 1.0, "n-rounds": 4})


def test_provider_validates_its_data(rng):
    X = rng.standard_normal((50, 20)) * 0.1
    X[3, 4] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        _provider(X)
    X = rng.standard_normal((50, 20))
    with pytest.warns(RowClippingWarning):
        prov = _provider(X)
    assert prov.n_clipped > 0
    assert np.all(np.linalg.norm(prov.X, axis=1) <= 1 + 1e-12)


# --- server and dropouts --------------------------------------------------------------------------


def test_server_thresholds_and_keeps_q_row_sparse(paper_small):
    X, _V = paper_small
    start = random_orthonormal_basis(200, 5, np.random.default_rng(0))
    server = ServerState(200, 5, 50, 3, start)
    providers = [ProviderState(X[i::2], n_components=5, epsilon=1.0, delta=1e-5, n_rounds=3,
                               noise_seed=i, provider_id=str(i)) for i in range(2)]
    assert server.query().support.size == 200  # dense random start
    while not server.finished:
        server.aggregate([p.answer_query(server.query()) for p in providers])
        assert np.count_nonzero(np.linalg.norm(server.Q, axis=1)) == 50
        np.testing.assert_allclose(server.Q.T @ server.Q, np.eye(5), atol=1e-12)
        assert server.query().support.size == 50
    assert len(server.history) == 4
    with pytest.raises(BudgetExceededError):
        providers[0].answer_query(server.query())


def test_dropout_policy(rng):
    server = ServerState(20, 2, 20, 3, random_orthonormal_basis(20, 2, rng))
    provs = [_provider(rng.standard_normal((40 + 10 * i, 20)) * 0.1, provider_id=str(i))
             for i in range(3)]
    replies = [p.answer_query(server.query()) for p in provs[:2]]
    with pytest.raises(ProviderDropoutError, match=r"\['2'\] did not answer \(2: timed out"):
        select_replies(server, ["0", "1", "2"], replies, on_dropout="error",
                       reasons={"2": "timed out"})
    used = select_replies(server, ["0", "1", "2"], replies, on_dropout="continue")
    assert [r.provider_id for r in used] == ["0", "1"]
    assert server.dropped == {"2": 1}
    Q = server.aggregate(used)
    # Weights renormalised over those who answered: K = (n₀H₀ + n₁H₁)/(n₀ + n₁).
    K = (40 * replies[0].product + 50 * replies[1].product) / 90
    np.testing.assert_allclose(Q, thin_qr(K), atol=1e-12)
    with pytest.raises(ProviderDropoutError, match="no provider answered"):
        server.aggregate([])


# --- the estimator ------------------------------------------------------------------------------


def test_figure3_shape_geometric_convergence_to_an_epsilon_floor(paper_small):
    X, V = paper_small
    floors = {}
    for eps in (0.5, 1.0, 2.0):
        paths = np.array([
            DPSPCA(n_components=5, epsilon=eps, delta=1e-5, n_iter=10, n_nonzero=50,
                   random_state=seed, ledger=PrivacyLedger()).fit(X).sin_theta_path(V)
            for seed in range(2)
        ])
        path = paths.mean(axis=0)
        assert path[0] > 2.0  # a random start is nearly orthogonal (max √5 ≈ 2.24)
        floors[eps] = path[-3:].mean()
        # Geometric phase: the error drops by a constant factor per round until the floor...
        drop = path[:4] - floors[eps]
        assert np.all(drop[1:] < 0.8 * drop[:-1])
        # ...and then stays there (no drift over the last rounds).
        assert np.ptp(path[-4:]) < 0.1
    assert floors[0.5] > floors[1.0] > floors[2.0]
    assert floors[0.5] < 0.7 and floors[2.0] < 0.25
    assert floors[0.5] > 1.5 * floors[2.0]


def test_providers_split_does_not_change_the_guarantee_and_more_data_helps(paper_small):
    X, V = paper_small
    one = DPSPCA(n_components=5, epsilon=1.0, n_nonzero=50, random_state=0,
                 ledger=PrivacyLedger()).fit(X)
    four = DPSPCA(n_components=5, epsilon=1.0, n_nonzero=50, n_providers=4, random_state=0,
                  ledger=PrivacyLedger()).fit(X)
    assert one.privacy_.epsilon == pytest.approx(four.privacy_.epsilon)
    assert four.provider_n_samples_.tolist() == [5000] * 4
    np.testing.assert_allclose(four.noise_scales_, one.noise_scales_[0] * 4)
    # Each provider's noise is its own: 4 providers add 4 noise draws at 4× the per-provider
    # scale (relative to their nᵢ), i.e. 2× the single provider's total noise std.
    assert sin_theta(one.components_.T, V) < sin_theta(four.components_.T, V) + 0.05
    small = DPSPCA(n_components=5, epsilon=1.0, n_nonzero=50, random_state=0,
                   ledger=PrivacyLedger()).fit(X[:2000])
    assert sin_theta(small.components_.T, V) > sin_theta(one.components_.T, V)


def test_groups_fit_providers_and_block_split_agree(rng):
    X, _ = make_dpspca_data(900, 30, 2, 5, random_state=1)
    groups = np.repeat(["a", "b", "c"], 300)
    params = dict(n_components=2, n_nonzero=8, n_iter=4, random_state=3)
    by_groups = DPSPCA(**params, ledger=PrivacyLedger()).fit(X, groups=groups)
    by_list = DPSPCA(**params, ledger=PrivacyLedger()).fit_providers([X[:300], X[300:600],
                                                                       X[600:]])
    by_blocks = DPSPCA(**params, n_providers=3, ledger=PrivacyLedger()).fit(X)
    np.testing.assert_array_equal(by_groups.components_, by_list.components_)
    np.testing.assert_array_equal(by_blocks.components_, by_list.components_)
    assert by_groups.provider_ids_ == ["a", "b", "c"]
    assert np.count_nonzero(np.linalg.norm(by_groups.components_, axis=0)) == 8


def test_privacy_record_and_ledger():
    X, _ = make_dpspca_data(600, 20, 2, 4, random_state=2)
    ledger = PrivacyLedger(epsilon_budget=1.2, delta_budget=1e-5)
    est = DPSPCA(n_components=2, epsilon=1.0, delta=1e-5, n_iter=5, random_state=0,
                 ledger=ledger).fit(X)
    rec = est.privacy_
    assert rec.model == "distributed"
    assert "replace one record of one provider" in rec.neighbouring
    assert rec.epsilon == pytest.approx(1.0, abs=2e-3)
    assert rec.spends[0].count == 5
    assert rec.spends[0].sensitivity == pytest.approx(power_sensitivity(1.0, 2))
    assert "ω(ε, δ)" in rec.notes and "data-independent" in rec.notes
    assert est.paper_noise_scale_ == pytest.approx(paper_noise_scale(1.0, 1e-5, 5))
    with pytest.raises(BudgetExceededError):
        DPSPCA(n_components=2, epsilon=1.0, n_iter=5, ledger=ledger).fit(X)
    assert len(ledger) == 1


def test_sparse_random_start_is_the_papers_literal_initialisation(paper_small):
    X, V = paper_small
    est = DPSPCA(n_components=5, epsilon=2.0, n_nonzero=50, init="random-sparse", n_iter=3,
                 random_state=0, ledger=PrivacyLedger()).fit(X)
    assert np.count_nonzero(np.linalg.norm(est.history_[0], axis=0)) == 50
    public = np.linalg.qr(V + 0.01 * np.random.default_rng(0).standard_normal(V.shape))[0]
    warm = DPSPCA(n_components=5, epsilon=2.0, n_nonzero=50, init=public, n_iter=3,
                  random_state=0, ledger=PrivacyLedger()).fit(X)
    assert warm.sin_theta_path(V)[0] < 0.3


@pytest.mark.parametrize(
    ("params", "match"),
    [
        ({"epsilon": 0}, r"'epsilon' parameter of DPSPCA must be a float in the range \(0, inf\)"),
        ({"epsilon": -1}, "'epsilon' parameter"),
        ({"delta": 1.0}, "'delta' parameter"),
        ({"n_iter": 0}, "'n_iter' parameter of DPSPCA must be an int"),
        ({"n_nonzero": 1}, "'n_nonzero' parameter of DPSPCA"),
        ({"n_nonzero": 99}, "'n_nonzero' parameter of DPSPCA"),
        ({"n_providers": 0}, "'n_providers' parameter"),
        ({"init": "pca"}, "'init' parameter of DPSPCA"),
        ({"init": np.eye(3)}, "'init' parameter of DPSPCA"),
    ],
)
def test_parameter_errors(params, match):
    X = np.random.default_rng(0).standard_normal((40, 10)) * 0.1
    with pytest.raises(ValueError, match=match):
        DPSPCA(**params, ledger=PrivacyLedger()).fit(X)


def test_groups_shape_error():
    X = np.zeros((10, 4))
    with pytest.raises(ValueError, match="groups must have shape"):
        DPSPCA(ledger=PrivacyLedger()).fit(X, groups=[0, 1])


def test_cli_fit_dps_pca(tmp_path):
    from click.testing import CliRunner

    from privpca.cli import main

    X, _ = make_dpspca_data(500, 12, 2, 4, random_state=0)
    np.save(tmp_path / "x.npy", X)
    out = tmp_path / "out.json"
    res = CliRunner().invoke(main, ["fit", str(tmp_path / "x.npy"), "-m", "dps-pca", "-k", "2",
                                    "--epsilon", "1", "--seed", "0", "-o", str(out)])
    assert res.exit_code == 0, res.output
    payload = json.loads(out.read_text())
    assert payload["privacy"]["model"] == "distributed"
    assert np.array(payload["components"]).shape == (2, 12)
