"""DPS-PCA with ``aggregation="secure"``: one central noise in the opened sum, what the server
sees, dropouts down to ``min_providers`` and the refusals before anything is charged."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

import privpca
from privpca import DPSPCA, PrivacyLedger
from privpca.federated.protocol import ProviderState, ServerState
from privpca.federated.protocol.messages import Query, Reply
from privpca.federated.protocol.privacy import dpspca_pipeline
from privpca.federated.protocol.secure_sums import (
    SecureAgreement,
    ShareReply,
    combine_replies,
)
from privpca.federated.secure import SecureAggregationAborted, run_secure_aggregation
from privpca.pipeline.settings import PipelineSettings

pytestmark = pytest.mark.filterwarnings("ignore::privpca.exceptions.RowClippingWarning")


@pytest.fixture(autouse=True)
def _seeded_mode():
    with privpca.config_context(secure_mode=False):
        yield


def _table(n: int = 6_000, p: int = 8, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, p)) * np.linspace(3.0, 0.5, p)
    return X / np.quantile(np.linalg.norm(X, axis=1), 0.95)


def _distance(est: DPSPCA, X: np.ndarray, k: int = 2) -> float:
    _, _, vt = np.linalg.svd(X, full_matrices=False)  # uncentred: the papers' setting
    V, W = vt[:k].T, est.components_.T
    return float(np.linalg.norm(W @ W.T - V @ V.T))


def _providers(X: np.ndarray, N: int, agreement: SecureAgreement | None, k: int = 2):
    parts = np.array_split(X, N)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return [ProviderState(part, n_components=k, epsilon=1.0, delta=1e-5, n_rounds=3,
                              data_norm=1.0, noise_seed=10 + i, provider_id=str(i),
                              secure=agreement) for i, part in enumerate(parts)]


def test_the_opened_sum_carries_one_central_noise_whatever_the_number_of_providers():
    X = _table()
    kw = dict(centering=None, data_norm=1.0, epsilon=0.5)
    one = DPSPCA(2, n_providers=1, random_state=0, **kw).fit(X)
    local = DPSPCA(2, n_providers=4, random_state=0, **kw).fit(X)
    secure = DPSPCA(2, n_providers=4, aggregation="secure", random_state=0, **kw).fit(X)
    # The noise of the aggregated K: one provider's, N providers' summed, one central draw.
    assert local.noise_level_ == pytest.approx(2.0 * one.noise_level_, rel=1e-9)
    assert secure.noise_level_ == pytest.approx(one.noise_level_, rel=1e-9)
    assert secure.min_providers_ == 4
    assert secure.privacy_.epsilon == pytest.approx(0.5, rel=1e-6)
    assert "Secure aggregation" in secure.privacy_.notes
    # ε against the server plus j colluders grows with j (the shares were sized for none).
    eps = secure.collusion_epsilons_
    assert eps[0] == pytest.approx(0.5, rel=1e-6)
    assert eps[1] > eps[0] and eps[2] > eps[1]
    assert _distance(secure, X) < 0.5


def test_the_server_sees_masked_vectors_whose_sum_is_the_providers_noisy_answers_sum():
    X = _table(3_000)
    agreement = SecureAgreement(n_providers=3, min_providers=3, colluders=0, max_rows=1_000,
                                total_rows=3_000)
    providers = _providers(X, 3, agreement)
    Q = np.linalg.qr(np.random.default_rng(1).standard_normal((X.shape[1], 2)))[0]
    replies = [pr.answer_query(Query.from_dense(Q, round=1)) for pr in providers]
    assert all(isinstance(r, ShareReply) for r in replies)
    plan = replies[0].plan
    result = run_secure_aggregation({r.provider_id: r.residues for r in replies}, plan.bits,
                                    min_providers=3)
    masked = {m.provider_id: np.asarray(m.masked) for m in result.transcript.masked}
    for r in replies:  # what the server received is not any provider's answer
        assert not np.array_equal(masked[r.provider_id], r.residues)
    modulus = 1 << plan.bits
    exact = sum(int(v) for r in replies for v in r.residues[:1])  # Python ints: no overflow
    assert int(result.total[0]) == exact % modulus
    expected = np.zeros(len(replies[0].residues), dtype=object)
    for r in replies:
        expected = expected + r.residues.astype(object)
    assert [int(v) for v in result.total] == [int(v) % modulus for v in expected]
    # Decoded, it is the sum of the exact products plus one draw of the central scale.
    exact_sum = sum(pr.rows.T @ (pr.rows @ Q) for pr in providers)
    opened = plan.decode(result.total, survivors=3).reshape(exact_sum.shape)
    central = providers[0].noise_multiplier * providers[0]._raw_sensitivity
    assert np.max(np.abs(opened - exact_sum)) < 6 * central
    assert np.max(np.abs(opened - exact_sum)) > 1e-3 * central  # noise was added


def test_dropouts_down_to_min_providers_finish_and_below_nothing_is_opened():
    X = _table(4_000)
    agreement = SecureAgreement(n_providers=4, min_providers=3, colluders=0, max_rows=1_000,
                                total_rows=4_000)
    providers = _providers(X, 4, agreement)
    Q = np.linalg.qr(np.random.default_rng(2).standard_normal((X.shape[1], 2)))[0]
    replies = [pr.answer_query(Query.from_dense(Q, round=1)) for pr in providers]
    (combined,) = combine_replies(replies, X.shape[1], 2, dropouts={3: ["2"]})
    assert isinstance(combined, Reply)
    assert combined.n_samples == sum(pr.n_samples for pr in providers if pr.provider_id != "2")
    server = ServerState(X.shape[1], 2, X.shape[1], 3, Q)
    server.aggregate([combined])
    assert server.round == 1
    with pytest.raises(SecureAggregationAborted, match="survived"):
        combine_replies(replies, X.shape[1], 2, dropouts={3: ["1", "2"]})


def test_shares_are_sized_for_min_providers_and_the_survivors_add_noise():
    agreement = SecureAgreement(n_providers=5, min_providers=3, colluders=1, max_rows=100,
                                total_rows=500)
    plan = agreement.noise_plan(central_sigma=2.0, sensitivity=1.0, coordinates=4,
                                per_row=1.0)
    honest = agreement.min_providers - agreement.colluders
    assert honest * (plan.share_sigma * plan.grid) ** 2 >= plan.covered_sigma**2
    assert plan.covered_sigma == pytest.approx(2.0, rel=1e-6)
    assert math.isclose(plan.value_bound, 100.0, rel_tol=1e-8)


@pytest.mark.parametrize("kwargs, match", [
    (dict(n_providers=1), "at least 2 providers"),
    (dict(n_providers=4, min_providers=2), "strict majority"),
    (dict(n_providers=3, colluders=2), "colluders"),
])
def test_a_secure_agreement_that_cannot_be_honoured_is_refused_before_the_charge(kwargs, match):
    settings = dict(centering=None, data_norm=1.0, aggregation="secure", random_state=0)
    settings.update(kwargs)
    ledger = PrivacyLedger()
    with pytest.raises(ValueError, match=match):
        DPSPCA(2, ledger=ledger, **settings).fit(_table(1_200))
    assert len(ledger) == 0


def test_the_table_setting_with_a_public_mean_opens_the_variances_too():
    X = _table(6_000) + 0.3
    mean = X.mean(axis=0)  # a public mean in this test
    est = DPSPCA(2, n_providers=3, aggregation="secure", centering=mean, data_norm=1.5,
                 epsilon=2.0, random_state=0).fit(X)
    assert np.all(np.isfinite(est.explained_variance_))
    exact = np.linalg.eigvalsh(np.cov(X.T))[::-1][:2]
    assert np.allclose(est.explained_variance_, exact, rtol=0.2)
    assert est.privacy_.epsilon == pytest.approx(2.0, rel=1e-6)


def test_on_defaults_the_union_is_prepared_from_opened_counts_and_sums():
    """Private mean and bound searched on the union (one central noise each), not per provider.
    The union's bound is its opened quantile: no provider runs a ladder of its own."""
    X = _table(6_000) * 4.0 + 2.0
    one = DPSPCA(2, n_providers=1, random_state=0).fit(X)
    secure = DPSPCA(2, n_providers=3, aggregation="secure", random_state=0).fit(X)
    local = DPSPCA(2, n_providers=3, random_state=0).fit(X)
    settings = PipelineSettings(epsilon=1.0, delta=1e-5, centering="private", data_norm="auto")
    union = dpspca_pipeline("union", settings, 6_000, 8, 2, 10, select_bound=False)
    # The union's plan, at the calibration (σ/Δ) of one provider holding the union without
    # the ladder: that provider's parts but "bound_select", whose share the others take.
    def parts(est):
        return [s.mechanism.split(":")[0] for s in est.privacy_.spends]

    assert parts(secure) == [part for part in parts(one) if part != "bound_select"]
    assert secure.noise_multiplier_ == pytest.approx(union.statistic_multiplier(), rel=1e-12)
    assert secure.noise_level_ / secure.data_norm_**2 == pytest.approx(
        union.statistic_multiplier() * math.sqrt(2) / 6_000, rel=1e-9)
    assert local.noise_level_ / local.data_norm_**2 > 1.5 * (
        secure.noise_level_ / secure.data_norm_**2)
    assert secure.provider_data_norms_.tolist() == [secure.data_norm_] * 3  # one D for all
    assert np.abs(secure.mean_ - X.mean(axis=0)).max() < 0.3
    assert secure.privacy_.epsilon == pytest.approx(1.0, rel=1e-6)


def test_a_provider_answers_no_more_counts_than_its_searches_need():
    X = _table(3_000) + 1.0
    agreement = SecureAgreement(n_providers=3, min_providers=3, colluders=0, max_rows=1_000,
                                total_rows=3_000)
    (provider,) = [ProviderState(X[:1_000], n_components=2, epsilon=1.0, delta=1e-5,
                                 n_rounds=3, centering="private", data_norm="auto",
                                 noise_seed=1, provider_id="0", secure=agreement)]
    from privpca.exceptions import BudgetExceededError
    from privpca.federated.protocol.messages import CountQuery, QueryRefusedError

    for _ in range(30):  # 3 searches of 10 bisection rounds
        provider.handle(CountQuery("bound", None, 3))
    with pytest.raises(BudgetExceededError):
        provider.handle(CountQuery("bound", None, 3))
    with pytest.raises(QueryRefusedError, match="no search"):
        provider.handle(CountQuery("variance", None, 3))


def test_streamed_providers_are_refused_a_secure_private_bound_before_the_charge():
    from privpca.streaming.array_source import ArraySource

    ledger = PrivacyLedger()
    X = _table(3_000)
    with pytest.raises(ValueError, match="streamed"):
        DPSPCA(2, aggregation="secure", ledger=ledger, random_state=0).fit_providers(
            [ArraySource(X[:1_500]), ArraySource(X[1_500:])])
    assert len(ledger) == 0
