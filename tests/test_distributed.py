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

import dp_accounting
import numpy as np
import pytest
from sklearn.decomposition import PCA
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils.estimator_checks import parametrize_with_checks

from conftest import PAPER, expected_failed_checks
from privpca import DPSPCA, BudgetExceededError, PrivacyLedger, RowClippingWarning
from privpca.accounting import compose_epsilon
from privpca.datasets import make_dpspca_covariance, make_dpspca_data
from privpca.decomposition.noisy_power import power_sensitivity
from privpca.federated.protocol import (
    FileReleaseCounter,
    MeanQuery,
    MeanReply,
    PrepareMessage,
    PrepareReply,
    ProviderDropoutError,
    ProviderState,
    Query,
    QueryRefusedError,
    ReleaseCounter,
    Reply,
    ServerState,
    VarianceQuery,
    VarianceReply,
    dpspca_noise_multiplier,
    paper_noise_scale,
    provider_noise_rng,
    provider_release_limits,
    select_replies,
)
from privpca.metrics import sin_theta, subspace_distance
from privpca.pipeline.bound_selection import choose_bound
from privpca.pipeline.budget import DEFAULT_SHARES
from privpca.pipeline.preprocessing import (
    norm_bin_counts,
    private_norm_bound,
    private_norm_bound_from_counts,
)
from privpca.pipeline.rows import PilotGrams
from privpca.pipeline.settings import BOUND_QUANTILES
from privpca.solvers.power import random_orthonormal_basis, thin_qr
from privpca.streaming.array_source import ArraySource


@parametrize_with_checks(
    [DPSPCA(n_iter=3, epsilon=1e4), DPSPCA(n_iter=2, n_providers=2, **PAPER),
     DPSPCA(n_iter=2, n_providers=2, epsilon=1e4)],
    expected_failed_checks=expected_failed_checks,
)
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
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no warning before a release is booked
        prov = _provider(X)
    assert prov.n_clipped > 0
    assert np.all(np.linalg.norm(prov.rows, axis=1) <= 1 + 1e-12)
    query = Query.from_dense(random_orthonormal_basis(20, 2, rng))
    with pytest.warns(RowClippingWarning) as caught:
        prov.answer_query(query)
    assert str(prov.n_clipped) not in str(caught[0].message)  # no count of the data


# --- provider: the release pipeline's parts ----------------------------------------------------


def _table_provider(X, **kw):
    params = dict(n_components=2, epsilon=1.0, delta=1e-5, n_rounds=3, noise_seed=7,
                  centering="private", data_norm="auto")
    params.update(kw)
    return ProviderState(X, **params)


@pytest.fixture(scope="module")
def mixed():
    """Rows in mixed units (scales 0.01 to 1000, means up to 10⁶), as a user's table."""
    rng = np.random.default_rng(5)
    Z = rng.standard_normal((30_000, 8))
    Z[:, 1] += 0.6 * Z[:, 0]
    scales = np.array([1000.0, 200.0, 1.0, 0.01, 50.0, 5.0, 3.0, 2.0])
    means = np.array([3e3, -50.0, 2.0, 1990.0, 1e6, 1.0, 9.0, 4.0])
    return Z * scales + means


def _closed_form_multiplier(eps, delta, part, T=1):
    """m/√w (·√T): shares of the Gaussian budget 1/m² (no δ set aside: no histograms)."""
    shares = {k: DEFAULT_SHARES[k] for k in ("bound_raw", "mean", "bound_residual",
                                             "mean_refine", "bound", "bound_select",
                                             "variance")}
    w = 1.0 - sum(shares.values()) if part == "statistic" else shares[part]
    m = float(dp_accounting.get_sigma_gaussian(eps, delta))
    return m / math.sqrt(w) * math.sqrt(T)


def test_provider_private_mean_rounds_match_the_closed_forms(mixed):
    X = mixed[:6000]
    prov = _table_provider(X)
    plan = prov.plan
    assert prov.counter.limits == {"mean": 2, "bound": 1, "bound_select": 1, "query": 3,
                                   "variance": 1}
    for part in ("bound_raw", "mean", "bound_residual", "mean_refine", "bound", "bound_select",
                 "variance"):
        assert plan[part].multiplier == pytest.approx(_closed_form_multiplier(1.0, 1e-5, part),
                                                      rel=1e-9)
    assert prov.noise_multiplier == pytest.approx(
        _closed_form_multiplier(1.0, 1e-5, "statistic", T=3), rel=1e-9)
    centre = np.zeros(8)
    for r, (bound_part, sum_part) in enumerate((("bound_raw", "mean"),
                                                ("bound_residual", "mean_refine"))):
        reply = prov.answer_mean(MeanQuery(r + 1, centre))
        # Replay the provider's stream: the quantile's draws, then N(0, (m·2R)²) per feature.
        rng = provider_noise_rng(7, r, "mean")
        norms = np.linalg.norm(X - centre, axis=1)
        (R,), _ = private_norm_bound(norms, plan[bound_part].multiplier, 0.99, rng)
        assert reply.bound == R
        clipped = (X - centre) * np.minimum(1.0, R / norms)[:, None]
        sigma = plan[sum_part].multiplier * 2.0 * R  # Δ = 2R
        expected = (clipped.sum(axis=0) + sigma * rng.standard_normal(8)) / 6000
        np.testing.assert_allclose(reply.mean, expected, rtol=1e-9, atol=1e-9 * R)
        centre = centre + reply.mean  # what the server broadcasts for one provider
    assert prov.counter.counts() == {"mean": 2, "bound": 0, "bound_select": 0, "query": 0,
                                     "variance": 0}
    # The second round's bound is set around the first estimate: far below ‖x‖ ≈ 10⁶.
    assert prov.counter.recall("bound_residual") < 0.1 * prov.counter.recall("bound_raw")
    spends, _ = prov.spends()
    by_part = {s.mechanism.split(":")[0]: s for s in spends}
    R1 = prov.counter.recall("bound_raw")
    assert by_part["mean"].sensitivity == pytest.approx(2 * R1)
    assert by_part["mean"].noise_scale == pytest.approx(2 * R1 * plan["mean"].multiplier)
    assert by_part["bound_raw"].sensitivity == pytest.approx(1.0)  # one count per round
    assert by_part["bound_raw"].count == 10  # the bisection's rounds
    with pytest.raises(BudgetExceededError, match=r"agreed to 2 releases \(mean\)"):
        prov.answer_mean(MeanQuery(1, np.zeros(8)))


def test_provider_bound_power_answers_and_variances_match_the_closed_forms(mixed):
    X = mixed[:6000]
    prov = _table_provider(X)
    for r in (1, 2):
        prov.answer_mean(MeanQuery(r, np.zeros(8) if r == 1 else X.mean(axis=0)))
    mean = X.mean(axis=0) + 0.5
    prep = prov.prepare(PrepareMessage(mean))
    plan = prov.plan
    norms = np.linalg.norm(X - mean, axis=1)
    # The bound: the median and the robust maximum, then the ladder's pilots over these rows
    # choose among the candidates with the power answers' noise (the central rule).
    values, rel = private_norm_bound_from_counts(
        lambda base: norm_bin_counts(norms, base), 6000, plan["bound"].multiplier,
        BOUND_QUANTILES, provider_noise_rng(7, 0, "bound"))
    choice = choose_bound(PilotGrams(ArraySource(X), mean, None, same_rows=False), 2,
                          float(rel.interpolated()[0, 0]), float(values[1]),
                          plan["bound_select"].multiplier, prov.noise_multiplier,
                          provider_noise_rng(7, 0, "bound_select"))
    D = choice.chosen
    assert prep.data_norm == D == prov.data_norm_ and D in choice.candidates
    assert prep.clipped_estimate == pytest.approx(
        rel.above[0 if D == choice.low else 1, 0])
    assert prov.bound_choice == choice
    rows = (X - mean) * np.minimum(1.0, D / norms)[:, None]
    np.testing.assert_allclose(prov.rows, rows, rtol=1e-12, atol=1e-9)
    # Power answers: σᵢ = m_stat·√2·D² (k = 2), the stream of the papers' setting.
    Q = random_orthonormal_basis(8, 2, np.random.default_rng(0))
    reply = prov.answer_query(Query.from_dense(Q, round=1))
    m_stat = _closed_form_multiplier(1.0, 1e-5, "statistic", T=3)
    assert prov.noise_scale == pytest.approx(m_stat * math.sqrt(2) * D**2 / 6000, rel=1e-9)
    noise = np.random.default_rng([7, 0]).standard_normal((8, 2)) * prov.noise_scale
    np.testing.assert_allclose(reply.product, rows.T @ rows @ Q / 6000 + noise, rtol=1e-9)
    # Variances: (u(QᵀXᵀXQ), ‖WXᵀXQ‖_F, λ_max(WXᵀXW), ‖X‖²_F) + N(0, (m_var·√2·D²)²),
    # W = I − QQᵀ: the residual pair of the error bar, at the same sensitivity.
    # The variances read the rows clipped at the ladder's reference (the error bar covers
    # the rotation clipping at D causes), at that bound's sensitivity.
    var = prov.answer_variance(VarianceQuery(Query.from_dense(Q, round=4)))
    rng = provider_noise_rng(7, 0, "variance")
    ref = choice.reference
    assert prov.variance_bound == ref >= D
    sigma = _closed_form_multiplier(1.0, 1e-5, "variance") * math.sqrt(2) * ref**2
    rows = (X - mean) * np.minimum(1.0, ref / norms)[:, None]
    G = rows.T @ rows
    W = np.eye(8) - Q @ Q.T
    exact = [*(Q.T @ G @ Q)[np.triu_indices(2)], np.linalg.norm(W @ G @ Q),
             np.linalg.eigvalsh(W @ G @ W)[-1]]
    np.testing.assert_allclose(var.packed, exact + sigma * rng.standard_normal(5), rtol=1e-9)
    assert var.total == pytest.approx(np.sum(rows**2) + sigma * rng.standard_normal(), rel=1e-12)
    with pytest.raises(BudgetExceededError, match=r"\(variance\)"):
        prov.answer_variance(VarianceQuery(Query.from_dense(Q)))
    assert prov.counter.counts() == {"mean": 2, "bound": 1, "bound_select": 1, "query": 1,
                                     "variance": 1}


@pytest.mark.parametrize(
    ("step", "message", "match"),
    [
        ("mean", MeanQuery(1, np.full(8, np.nan)), "NaN"),
        ("mean", MeanQuery(1, np.zeros(7)), r"shape \(7,\)"),
        ("mean", MeanQuery(1, np.zeros((2, 8))), r"shape \(2, 8\)"),
        ("mean", MeanQuery(1, np.array(["a"] * 8)), "real numbers"),
        ("mean", MeanQuery(1, np.zeros(8) + 1j), "real numbers"),
        ("mean", MeanQuery(2, np.zeros(8)), "out of order"),
        ("mean", "a mean, please", "Expected a MeanQuery"),
        ("prepare", PrepareMessage(np.zeros(8)), "0 of the 2 rounds"),
        ("prepare", PrepareMessage(None), "sent no mean"),
        ("query", Query.from_dense(np.eye(8)[:, :2]), "no prepared rows"),
        ("variance", VarianceQuery(Query.from_dense(np.eye(8)[:, :2])), "no prepared rows"),
        ("variance", VarianceQuery(Query.from_dense(2 * np.eye(8)[:, :2])), "not orthonormal"),
    ],
)
def test_malformed_or_early_messages_are_refused_and_cost_nothing(mixed, step, message, match):
    prov = _table_provider(mixed[:3000])
    with pytest.raises(QueryRefusedError, match=match):
        prov.handle(message) if step != "mean" else prov.answer_mean(message)
    assert prov.counter.used == 0


def test_prepare_refuses_bad_final_means(mixed):
    prov = _table_provider(mixed[:3000])
    prov.answer_mean(MeanQuery(1, np.zeros(8)))
    prov.answer_mean(MeanQuery(2, np.ones(8)))
    for bad, match in ((np.full(8, np.inf), "NaN or infinity"), (np.zeros(9), r"shape \(9,\)"),
                       (None, "sent no mean")):
        with pytest.raises(QueryRefusedError, match=match):
            prov.prepare(PrepareMessage(bad))
    assert prov.counter.counts()["bound"] == 0 and prov.rows is None
    prov.prepare(PrepareMessage(np.zeros(8)))
    with pytest.raises(QueryRefusedError, match="prepared already"):
        prov.prepare(PrepareMessage(np.zeros(8)))
    # Uncentred and public-mean providers check what the server sends against what they agreed.
    none = _table_provider(mixed[:3000], centering=None)
    with pytest.raises(QueryRefusedError, match="did not agree to a private mean"):
        none.answer_mean(MeanQuery(1, np.zeros(8)))
    with pytest.raises(QueryRefusedError, match="no centring; the server sent a mean"):
        none.prepare(PrepareMessage(np.zeros(8)))
    public = _table_provider(mixed[:3000], centering=np.ones(8), data_norm=1e7)
    with pytest.raises(QueryRefusedError, match="another public mean"):
        public.prepare(PrepareMessage(np.zeros(8)))
    assert public.prepare(PrepareMessage(np.ones(8))).data_norm == 1e7
    assert public.counter.limits == {"query": 3, "variance": 1}
    # A provider in the papers' setting answers power queries only.
    paper = _provider(mixed[:100] / 1e7)
    for msg in (MeanQuery(1, np.zeros(8)), PrepareMessage(None),
                VarianceQuery(Query.from_dense(np.eye(8)[:, :2]))):
        with pytest.raises(QueryRefusedError, match="papers' setting"):
            paper.handle(msg)
    with pytest.raises(ValueError, match="scale=True"):
        _table_provider(mixed[:100], scale=True)
    with pytest.raises(ValueError, match="counter's limits"):
        _table_provider(mixed[:100], counter=ReleaseCounter(3))


def test_file_counter_covers_every_part_and_a_restart_reuses_the_bound(mixed, tmp_path):
    X = mixed[:4000]
    limits = provider_release_limits(2, "private", "auto")
    agreement = {"epsilon": 1.0, "n-rounds": 2, "centering": "private"}

    def restarted():
        return _table_provider(X, n_rounds=2,
                               counter=FileReleaseCounter(tmp_path / "s.json", limits, agreement))

    reference = _table_provider(X, n_rounds=2)
    server = ServerState(8, 2, 8, 2, random_orthonormal_basis(8, 2, np.random.default_rng(1)),
                         centering="private", table_mode=True)
    while not server.finished:  # a fresh provider object for every message, as Flower does
        message = server.next_message()
        a, b = restarted().handle(message), reference.handle(message)
        for field in ("mean", "product", "packed", "data_norm", "bound", "total", "pilot"):
            if hasattr(a, field):
                np.testing.assert_array_equal(getattr(a, field), getattr(b, field))
        server.receive([a])
    state = json.loads((tmp_path / "s.json").read_text())
    assert state["by-kind"] == {"mean": 2, "bound": 1, "bound_select": 1, "query": 2,
                                "variance": 1}
    assert state["releases"] == 7
    assert state["released"]["prepared"]["data_norm"] == reference.data_norm_
    again = restarted()  # everything agreed is spent: every kind is refused
    assert again.data_norm_ == reference.data_norm_  # rebuilt from the file, not re-released
    with pytest.raises(BudgetExceededError, match=r"agreed to 2 releases \(mean\)"):
        again.answer_mean(MeanQuery(1, np.zeros(8)))
    with pytest.raises(BudgetExceededError, match=r"agreed to 2 releases \(query\)"):
        again.answer_query(server.query())
    with pytest.raises(QueryRefusedError, match="prepared already"):
        again.prepare(PrepareMessage(np.zeros(8)))


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


def test_server_runs_the_pipeline_steps_and_combines_means_and_variances(rng):
    start = random_orthonormal_basis(6, 2, rng)
    server = ServerState(6, 2, 6, 1, start, centering="private", table_mode=True)
    assert [server.phase, server.step_label] == ["mean", "Mean round 1"]
    first = server.next_message()
    np.testing.assert_array_equal(first.centre, np.zeros(6))
    m = [rng.standard_normal(6) for _ in range(2)]
    server.receive([MeanReply("1", 1, 30, 2.0, m[1]), MeanReply("0", 1, 10, 3.0, m[0])])
    mu1 = (10 * m[0] + 30 * m[1]) / 40  # c + Σ nᵢ(Sᵢ/nᵢ) / Σ nᵢ
    np.testing.assert_allclose(server.mean, mu1, rtol=1e-15)
    second = server.next_message()
    assert second.round == 2
    np.testing.assert_array_equal(second.centre, mu1)
    with pytest.raises(ValueError, match="non-finite"):
        server.receive([MeanReply("0", 2, 10, 3.0, np.full(6, np.nan))])
    server.receive([MeanReply("0", 2, 10, 1.0, m[0]), MeanReply("1", 2, 30, 1.0, m[1])])
    np.testing.assert_allclose(server.mean, 2 * mu1, rtol=1e-15)
    assert server.provider_bounds == {"0": {"bound_raw": 3.0, "bound_residual": 1.0},
                                      "1": {"bound_raw": 2.0, "bound_residual": 1.0}}
    prepare = server.next_message()
    assert isinstance(prepare, PrepareMessage)
    np.testing.assert_array_equal(prepare.mean, 2 * mu1)
    server.receive([PrepareReply("0", 10, 4.0), PrepareReply("1", 30, 5.0)])
    assert server.phase == "query"
    server.receive([Reply(pid, 1, n, rng.standard_normal((6, 2))) for pid, n in
                    (("0", 10), ("1", 30))])
    assert server.phase == "variance" and server.step == 2
    vq = server.next_message()
    np.testing.assert_array_equal(vq.components.to_dense(), server.Q)
    # Two providers' packed k×k sums, residual pairs and totals: the server sums, divides by
    # Σn − 1, rotates.
    A, B = np.array([[5.0, 2.0], [2.0, 1.0]]), np.array([[3.0, -1.0], [-1.0, 4.0]])
    iu = np.triu_indices(2)
    server.receive([VarianceReply("0", 10, np.append(A[iu], [0.5, 2.0]), 20.0),
                    VarianceReply("1", 30, np.append(B[iu], [1.5, 1.0]), 30.0)])
    assert server.finished
    assert server.residual == pytest.approx((2.0 / 39, 3.0 / 39))
    values, vectors = np.linalg.eigh((A + B) / 39)
    np.testing.assert_allclose(server.explained_variance, values[::-1], rtol=1e-12)
    np.testing.assert_allclose(server.explained_variance_ratio, values[::-1] / (50 / 39),
                               rtol=1e-12)
    comps = server.components()
    np.testing.assert_allclose(comps @ comps.T, np.eye(2), atol=1e-12)
    assert sin_theta(comps.T, server.Q) < 1e-6  # a rotation within the span of Q⁽ᵀ⁺¹⁾
    np.testing.assert_allclose(np.abs(comps @ server.Q), np.abs(vectors[:, ::-1].T),
                               atol=1e-12)


# --- the estimator ------------------------------------------------------------------------------


def test_figure3_shape_geometric_convergence_to_an_epsilon_floor(paper_small):
    X, V = paper_small
    floors = {}
    for eps in (0.5, 1.0, 2.0):
        paths = np.array([
            DPSPCA(n_components=5, epsilon=eps, delta=1e-5, n_iter=10, n_nonzero=50,
                   random_state=seed, ledger=PrivacyLedger(), **PAPER).fit(X).sin_theta_path(V)
            for seed in range(4)
        ])
        path = paths.mean(axis=0)
        assert path[0] > 2.0  # a random start is nearly orthogonal (max √5 ≈ 2.24)
        floors[eps] = path[-3:].mean()
        # Geometric phase: the error drops by a constant factor per round until the floor
        # (the first round, from a random start, contracts a little less: ~0.8 measured)...
        drop = path[:4] - floors[eps]
        assert drop[1] < 0.9 * drop[0]
        assert np.all(drop[2:] < 0.75 * drop[1:-1])
        # ...and then stays there (no drift over the last rounds).
        assert np.ptp(path[-4:]) < 0.1
    assert floors[0.5] > floors[1.0] > floors[2.0]
    assert floors[0.5] < 0.7 and floors[2.0] < 0.25
    assert floors[0.5] > 1.5 * floors[2.0]


def test_providers_split_does_not_change_the_guarantee_and_more_data_helps(paper_small):
    X, V = paper_small
    one = DPSPCA(n_components=5, epsilon=1.0, n_nonzero=50, random_state=0,
                 ledger=PrivacyLedger(), **PAPER).fit(X)
    four = DPSPCA(n_components=5, epsilon=1.0, n_nonzero=50, n_providers=4, random_state=0,
                  ledger=PrivacyLedger(), **PAPER).fit(X)
    assert one.privacy_.epsilon == pytest.approx(four.privacy_.epsilon)
    assert four.provider_n_samples_.tolist() == [5000] * 4
    np.testing.assert_allclose(four.noise_scales_, one.noise_scales_[0] * 4)
    # Each provider's noise is its own: 4 providers add 4 noise draws at 4× the per-provider
    # scale (relative to their nᵢ), i.e. 2× the single provider's total noise std.
    assert sin_theta(one.components_.T, V) < sin_theta(four.components_.T, V) + 0.05
    small = DPSPCA(n_components=5, epsilon=1.0, n_nonzero=50, random_state=0,
                   ledger=PrivacyLedger(), **PAPER).fit(X[:2000])
    assert sin_theta(small.components_.T, V) > sin_theta(one.components_.T, V)


def test_groups_fit_providers_and_block_split_agree(rng):
    X, _ = make_dpspca_data(900, 30, 2, 5, random_state=1)
    groups = np.repeat(["a", "b", "c"], 300)
    params = dict(n_components=2, n_nonzero=8, n_iter=4, random_state=3, **PAPER)
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
                 ledger=ledger, **PAPER).fit(X)
    rec = est.privacy_
    assert rec.model == "distributed"
    assert "replace one record of one provider" in rec.neighbouring
    assert rec.epsilon == pytest.approx(1.0, abs=2e-3)
    assert rec.spends[0].count == 5
    assert rec.spends[0].sensitivity == pytest.approx(power_sensitivity(1.0, 2))
    assert "ω(ε, δ)" in rec.notes and "data-independent" in rec.notes
    assert est.paper_noise_scale_ == pytest.approx(paper_noise_scale(1.0, 1e-5, 5))
    with pytest.raises(BudgetExceededError):
        DPSPCA(n_components=2, epsilon=1.0, n_iter=5, ledger=ledger, **PAPER).fit(X)
    assert len(ledger) == 1


def test_defaults_find_the_covariance_pca_of_a_mixed_unit_table(mixed):
    """Three providers, no data_norm, no preprocessing: sklearn's centred PCA (ε = 2).

    Measured over seeds 0–5: distance 0.21–0.49 (the second eigenvalue is 16× the third),
    explained-variance ratios within 0.02, mean error 2–3 % of the overall spread."""
    ref = PCA(2).fit(mixed)
    ledger = PrivacyLedger()
    est = DPSPCA(2, epsilon=2.0, n_providers=3, random_state=1, ledger=ledger).fit(mixed)
    assert subspace_distance(est.components_.T, ref.components_.T) < 0.6
    np.testing.assert_allclose(est.explained_variance_ratio_, ref.explained_variance_ratio_,
                               atol=0.03)
    np.testing.assert_allclose(est.explained_variance_[0], ref.explained_variance_[0], rtol=0.1)
    spread = math.sqrt(mixed.var(axis=0).sum())
    assert np.linalg.norm(est.mean_ - mixed.mean(axis=0)) < 0.05 * spread
    assert est.scale_ is None and est.data_norm_ == est.provider_data_norms_.max()
    Z = est.transform(mixed[:4])
    np.testing.assert_allclose(Z, (mixed[:4] - est.mean_) @ est.components_.T)
    # Uncentred, the top direction is the mean (the failure mode).
    with warnings.catch_warnings():  # clipping; the paper's ω certifies a huge ε at this D
        warnings.simplefilter("ignore")
        paper = DPSPCA(2, epsilon=2.0, n_providers=3, random_state=1, ledger=PrivacyLedger(),
                       centering=None, data_norm=2e6).fit(mixed)
    assert subspace_distance(paper.components_.T, ref.components_.T) > 1.0
    assert np.all(np.isnan(paper.explained_variance_ratio_))


def test_pipeline_record_totals_the_request_and_lists_every_part(mixed):
    ledger = PrivacyLedger(epsilon_budget=1.0, delta_budget=1e-5)
    est = DPSPCA(2, epsilon=1.0, delta=1e-5, n_iter=4, n_providers=3, random_state=0,
                 ledger=ledger).fit(mixed)
    rec = est.privacy_
    parts = [s.mechanism.split(":")[0] for s in rec.spends]
    assert parts == ["bound_raw", "mean", "bound_residual", "mean_refine", "bound",
                     "bound_select", "statistic", "variance"]
    assert (rec.epsilon, rec.delta, rec.model) == (1.0, 1e-5, "distributed")
    assert "replace one record of one provider" in rec.neighbouring
    # Each part once (every provider runs the same plan; parallel composition): the events
    # compose to exactly the request.
    assert compose_epsilon([s.event() for s in rec.spends], 1e-5) == pytest.approx(
        1.0, abs=2e-3)
    stat = rec.spends[parts.index("statistic")]
    assert stat.count == 4
    assert stat.sensitivity == pytest.approx(power_sensitivity(est.data_norm_, 2))
    assert est.noise_multiplier_ == pytest.approx(
        _closed_form_multiplier(1.0, 1e-5, "statistic", T=4), rel=1e-9)
    np.testing.assert_allclose(
        est.noise_scales_,
        est.noise_multiplier_ * math.sqrt(2) * est.provider_data_norms_**2
        / est.provider_n_samples_)
    assert est.noise_level_ == pytest.approx(
        np.sqrt(np.sum((est.noise_scales_ * est.provider_n_samples_) ** 2)) / len(mixed))
    assert 0 <= est.expected_error_ <= 2.0
    assert len(ledger) == 1 and ledger.records[0][1] is rec
    with pytest.raises(BudgetExceededError):  # spent: refused before any provider computes
        DPSPCA(2, epsilon=0.1, n_providers=3, ledger=ledger).fit(mixed)
    assert len(ledger) == 1


def test_public_settings_cost_nothing_and_private_scaling_is_refused(mixed):
    rng = np.random.default_rng(9)  # two factors in mixed units: a correlation PCA has a gap
    Z = rng.standard_normal((20_000, 2)) @ rng.standard_normal((2, 8))
    X = (Z + 0.5 * rng.standard_normal((20_000, 8))) * mixed.std(axis=0) + mixed.mean(axis=0)
    mean, scale = X.mean(axis=0), X.std(axis=0)
    D = float(np.quantile(np.linalg.norm((X - mean) / scale, axis=1), 0.99))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RowClippingWarning)
        est = DPSPCA(2, centering=mean, data_norm=D, scale=scale, n_providers=2,
                     random_state=0, ledger=PrivacyLedger()).fit(X)
    assert [s.mechanism.split(":")[0] for s in est.privacy_.spends] == ["statistic", "variance"]
    np.testing.assert_array_equal(est.mean_, mean)
    np.testing.assert_array_equal(est.scale_, scale)
    np.testing.assert_array_equal(est.provider_data_norms_, [D, D])
    ref = PCA(2).fit((X - mean) / scale)
    assert subspace_distance(est.components_.T, ref.components_.T) < 0.1
    np.testing.assert_allclose(est.transform(X[:3]), ((X[:3] - mean) / scale) @ est.components_.T)
    ledger = PrivacyLedger()
    with pytest.raises(ValueError, match=r"does not offer private scaling \(scale=True\)"):
        DPSPCA(2, scale=True, ledger=ledger).fit(mixed)
    assert len(ledger) == 0


def test_groups_and_lists_agree_on_defaults(mixed):
    X = mixed[:6000]
    params = dict(n_components=2, n_iter=3, random_state=4, epsilon=2.0)
    by_groups = DPSPCA(**params, ledger=PrivacyLedger()).fit(X, groups=np.repeat([0, 1], 3000))
    by_list = DPSPCA(**params, ledger=PrivacyLedger()).fit_providers([X[:3000], X[3000:]])
    np.testing.assert_array_equal(by_groups.components_, by_list.components_)
    np.testing.assert_array_equal(by_groups.mean_, by_list.mean_)
    np.testing.assert_array_equal(by_groups.explained_variance_, by_list.explained_variance_)


def test_a_provider_with_too_few_rows_for_the_private_bound_says_so():
    X = np.random.default_rng(0).standard_normal((40, 5))
    ledger = PrivacyLedger()
    with pytest.raises(ValueError, match="40 rows are too few for the private"):
        DPSPCA(2, ledger=ledger).fit(X)
    assert len(ledger) == 0  # refused from the public n and ε, before anything is booked


def test_sparse_random_start_is_the_papers_literal_initialisation(paper_small):
    X, V = paper_small
    est = DPSPCA(n_components=5, epsilon=2.0, n_nonzero=50, init="random-sparse", n_iter=3,
                 random_state=0, ledger=PrivacyLedger(), **PAPER).fit(X)
    assert np.count_nonzero(np.linalg.norm(est.history_[0], axis=0)) == 50
    public = np.linalg.qr(V + 0.01 * np.random.default_rng(0).standard_normal(V.shape))[0]
    warm = DPSPCA(n_components=5, epsilon=2.0, n_nonzero=50, init=public, n_iter=3,
                  random_state=0, ledger=PrivacyLedger(), **PAPER).fit(X)
    assert warm.sin_theta_path(V)[0] < 0.3


@pytest.mark.parametrize(
    ("params", "match"),
    [
        ({"epsilon": 0}, r"'epsilon' parameter of DPSPCA must be a float in the range \[1e-09"),
        ({"epsilon": math.inf}, r"'epsilon' parameter of DPSPCA must be a float in the range"),
        ({"data_norm": 1e300},
         r"'data_norm' parameter of DPSPCA must be a str among \{'auto'\} or a float in the range"),
        ({"epsilon": -1}, "'epsilon' parameter"),
        ({"delta": 1.0}, "'delta' parameter"),
        ({"n_iter": 0}, "'n_iter' parameter of DPSPCA must be an int"),
        ({"n_nonzero": 1}, "'n_nonzero' parameter of DPSPCA"),
        ({"n_nonzero": 99}, "'n_nonzero' parameter of DPSPCA"),
        ({"n_providers": 0}, "'n_providers' parameter"),
        ({"init": "pca"}, "'init' parameter of DPSPCA"),
        ({"init": np.eye(3)}, "'init' parameter of DPSPCA"),
        ({"centering": "mean"}, "'centering' parameter of DPSPCA"),
        ({"centering": np.zeros(3)}, "'centering' parameter of DPSPCA"),
        ({"data_norm": "big"}, "'data_norm' parameter of DPSPCA"),
        ({"data_norm": -1.0}, "'data_norm' parameter of DPSPCA"),
        ({"scale": -np.ones(10)}, "'scale' parameter of DPSPCA"),
        ({"budget_shares": [0.1]}, "'budget_shares' parameter of DPSPCA"),
        ({"budget_shares": {"mean": 0.99, "bound": 0.5}}, "leave a positive share"),
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


def test_the_server_publishes_a_feasible_spectrum_whoever_reads_it():
    """Noise can make the summed ``QᵀΣQ``'s eigenvalues negative: the server makes them
    feasible itself, so a Flower run's result (``finish_result``) publishes what the
    in-process fit does (an outside tester: -0.06 in result.json, 0 in process)."""
    from privpca.federated.flower_result import finish_result

    X = np.random.default_rng(8).standard_normal((3000, 8))  # isotropic: nothing resolved
    server = ServerState(8, 4, 8, 2, random_orthonormal_basis(8, 4, np.random.default_rng(1)),
                         centering="private", table_mode=True)
    provider = _table_provider(X, n_components=4, n_rounds=2, epsilon=0.3)
    while not server.finished:
        server.receive([provider.handle(server.next_message())])
    assert server.raw_variances is not None and server.raw_variances.min() < 0
    result = {"providers": {}}
    finish_result(result, server, None)
    ev, ratio = np.array(result["explained_variance"]), np.array(result["explained_variance_ratio"])
    assert ev.min() >= 0 and ratio.min() >= 0 and ratio.sum() <= 1 + 1e-12
    np.testing.assert_array_equal(ev, server.explained_variance)  # what the fit publishes
    if not server.read_off_pilots:  # else read off the providers' pilots, feasible too
        np.testing.assert_array_equal(ev, np.maximum(server.raw_variances, 0))


@pytest.mark.parametrize("settings", [{"colluders": 1}, {"min_providers": 2}])
def test_secure_aggregations_settings_are_refused_with_local_noise(settings):
    """``colluders`` and ``min_providers`` size secure aggregation's noise shares: with local
    noise they were ignored without a word (an outside tester); now refused, before any
    charge."""
    X = np.random.default_rng(2).standard_normal((3000, 5))
    ledger = PrivacyLedger()
    with pytest.raises(ValueError, match="aggregation='secure'"):
        DPSPCA(2, n_providers=3, ledger=ledger, **settings).fit(X)
    assert len(ledger) == 0


def test_a_bad_provider_table_is_named():
    """scikit-learn's messages name only "X": fit_providers says whose table it is."""
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError, match=r"Provider 1's table: X has 3 features"):
        DPSPCA(2).fit_providers([rng.standard_normal((100, 4)), rng.standard_normal((100, 3))])
    with pytest.raises(ValueError, match=r"Provider 1's table: Found array with 0 sample"):
        DPSPCA(2).fit_providers([rng.standard_normal((100, 4)), np.empty((0, 4))])


def test_the_record_of_providers_of_different_sizes_pairs_its_bound_and_sensitivity():
    """The record lists the spends of the providers of the booked plan: its bound is theirs,
    so the sensitivity it states is √2·D² of that bound (it stated the largest provider's
    bound beside the smaller one's sensitivity: an outside tester)."""
    rng = np.random.default_rng(1)
    X = rng.standard_normal((5400, 8)) @ np.diag([5, 3, 1, 1, 0.5, 0.5, 0.3, 0.2]) + 10
    groups = np.r_[np.zeros(400, int), np.ones(5000, int)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est = DPSPCA(2, random_state=0, ledger=PrivacyLedger()).fit(X, groups=groups)
    record = est.privacy_
    assert record.sensitivity == pytest.approx(math.sqrt(2) * record.data_norm**2)
    assert record.data_norm in est.provider_data_norms_
