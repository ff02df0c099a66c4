"""DPS-PCA's booked record is the plan its providers run (local noise: each over its own nᵢ).

A provider's budget plan depends on its public nᵢ (a quantile search's share is raised on a
small table), so a record planned over the union's Σnᵢ is not what the providers spend.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from sklearn.decomposition import PCA

from privpca import DPSPCA, PrivacyLedger
from privpca.accounting import compose_epsilon
from privpca.federated.protocol import ProviderState, dpspca_pipeline
from privpca.metrics import subspace_distance
from privpca.pipeline.settings import PipelineSettings

QUANTILE_ROUNDS = {"bound_raw", "bound_residual", "bound"}  # listed as rounds of a search


@pytest.fixture(scope="module")
def table():
    rng = np.random.default_rng(0)
    return rng.standard_normal((20_000, 10)) * np.linspace(3, 0.5, 10)


def _provider_plan(rows, epsilon=0.3, delta=1e-5):
    """The plan a provider of these rows makes for itself, as the protocol builds it."""
    return ProviderState(rows, n_components=2, epsilon=epsilon, delta=delta, n_rounds=10,
                         data_norm="auto", centering="private").plan


def _multipliers(record):
    """Each part's per-release multiplier (a search's rounds folded back into its part's)."""
    out = {}
    for s in record.spends:
        part = s.mechanism.split(":")[0]
        rounds = s.count // (10 if part == "statistic" else 1)
        out[part] = s.dp_event.noise_multiplier / math.sqrt(
            rounds if part in QUANTILE_ROUNDS else 1)
    return out


def _union_plan(n):
    """The plan over ``n`` rows on DPSPCA's defaults (private mean and bound)."""
    settings = PipelineSettings(epsilon=0.3, delta=1e-5, centering="private", data_norm="auto")
    return dpspca_pipeline("union", settings, n, 10, 2, 10, select_bound=False).plan


def _fit(X, ledger, **params):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return DPSPCA(n_components=2, epsilon=0.3, random_state=0, ledger=ledger,
                      **params).fit(X)


def test_twenty_equal_providers_settle_on_the_plan_they_ran(table):
    """The reported failure: 20 providers of 1000 rows at ε = 0.3 released, then the ledger
    refused the final record (planned over 20 000 rows, spent over 1000 each)."""
    ledger = PrivacyLedger()
    est = _fit(table, ledger, n_providers=20)
    rec = est.privacy_
    assert est.provider_n_samples_.tolist() == [1000] * 20
    assert (rec.epsilon, rec.delta, rec.model, rec.n_samples) == (0.3, 1e-5, "distributed",
                                                                 20_000)
    assert ledger.records == [("DPSPCA", rec)]
    assert ledger.epsilon(1e-5) == pytest.approx(0.3, abs=1e-3)
    assert compose_epsilon([s.event() for s in rec.spends], 1e-5) == pytest.approx(0.3,
                                                                                   abs=1e-3)
    # The events are a 1000-row provider's plan, not the union's: on 1000 rows the searches'
    # shares are raised (0.129 each, statistic 0.548; the union's would be 0.015 and 0.89).
    plan = _provider_plan(table[:1000])
    assert plan["statistic"].weight == pytest.approx(0.5484, abs=1e-3)
    assert plan["bound"].weight == pytest.approx(0.1289, abs=1e-3)
    union = _union_plan(20_000)
    assert union["statistic"].weight == pytest.approx(0.89)
    expected = {name: b.multiplier for name, b in plan.parts.items()}
    assert _multipliers(rec) == pytest.approx(expected, rel=1e-12)
    assert est.noise_multiplier_ == pytest.approx(plan["statistic"].multiplier, rel=1e-12)
    assert [s.count for s in rec.spends] == [10, 1, 10, 1, 10, 10, 1]
    assert "runs the same budget plan" in rec.notes and "statistic 0.548" in rec.notes


def test_unequal_providers_book_the_smallest_providers_plan(table):
    """Providers of 1000, 1500 and 17 500 rows split (ε, δ) three ways; the record is the
    smallest one's plan (every split is one Gaussian of the same total multiplier)."""
    parts = [table[:1000], table[1000:2500], table[2500:]]
    plans = [_provider_plan(rows) for rows in parts]
    assert len({p["statistic"].weight for p in plans}) == 3
    assert len({p.total_multiplier for p in plans}) == 1
    for plan in plans:  # each provider's own releases compose to exactly its (ε, δ)
        events = [b.dp_event() for b in plan.parts.values()]
        assert compose_epsilon(events, 1e-5) == pytest.approx(0.3, abs=1e-3)
    ledger = PrivacyLedger(epsilon_budget=0.31, delta_budget=1e-5)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est = DPSPCA(n_components=2, epsilon=0.3, random_state=0,
                     ledger=ledger).fit_providers(parts)
    rec = est.privacy_
    assert est.provider_n_samples_.tolist() == [1000, 1500, 17_500]
    assert (rec.epsilon, rec.delta, rec.n_samples) == (0.3, 1e-5, 20_000)
    assert ledger.records == [("DPSPCA", rec)]
    assert ledger.epsilon(1e-5) == pytest.approx(0.3, abs=1e-3)
    expected = {name: b.multiplier for name, b in plans[0].parts.items()}
    assert _multipliers(rec) == pytest.approx(expected, rel=1e-12)
    assert "provider(s) 0 (the smallest nᵢ)" in rec.notes
    assert "statistic 0.506" in rec.notes and "statistic 0.69" in rec.notes
    # Each provider's noise is its own plan's: m_i·√2·D_i²/n_i.
    multipliers = np.array([p["statistic"].multiplier for p in plans])
    np.testing.assert_allclose(
        est.noise_scales_,
        multipliers * np.sqrt(2) * est.provider_data_norms_**2 / est.provider_n_samples_,
        rtol=1e-12)


def test_groups_of_unequal_size_fit(table):
    groups = np.repeat(["a", "b", "c", "d"], [1200, 1800, 7000, 10_000])
    ledger = PrivacyLedger()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est = DPSPCA(n_components=2, epsilon=0.3, random_state=0,
                     ledger=ledger).fit(table, groups=groups)
    assert est.provider_ids_ == ["a", "b", "c", "d"]
    assert ledger.epsilon(1e-5) == pytest.approx(0.3, abs=1e-3)
    expected = {name: b.multiplier for name, b in _provider_plan(table[:1200]).parts.items()}
    assert _multipliers(est.privacy_) == pytest.approx(expected, rel=1e-12)


def test_n_providers_that_contradicts_the_groups_is_refused(table):
    groups = np.repeat(["a", "b", "c"], [5_000, 5_000, 10_000])
    with pytest.raises(ValueError, match="n_providers=5, but groups has 3 labels"):
        DPSPCA(n_components=2, n_providers=5, random_state=0,
               ledger=PrivacyLedger()).fit(table, groups=groups)


@pytest.mark.parametrize("missing", [np.nan, None])
def test_a_missing_group_label_is_refused_by_name(table, missing):
    """A NaN label formed an empty provider ("X is empty", an outside tester)."""
    groups = np.repeat(np.array([1.0, 2.0, 3.0], dtype=object if missing is None else float),
                       [5_000, 5_000, 10_000])
    groups[17] = missing
    ledger = PrivacyLedger()
    with pytest.raises(ValueError, match="groups holds missing labels"):
        DPSPCA(n_components=2, random_state=0, ledger=ledger).fit(table, groups=groups)
    assert len(ledger) == 0


def test_a_provider_too_small_for_its_own_plan_is_refused_before_the_booking(table):
    """The union's 20 000 rows are enough, provider 0's 100 are not: refused, nothing booked."""
    ledger = PrivacyLedger()
    with pytest.raises(ValueError, match=r"provider 0: DPSPCA: 100 rows are too few"):
        DPSPCA(n_components=2, epsilon=0.3, random_state=0,
               ledger=ledger).fit_providers([table[:100], table[100:]])
    assert len(ledger) == 0


def test_secure_aggregation_still_books_the_unions_plan(table):
    """Secure: every provider plans over Σnᵢ (the opened sums carry one central noise)."""
    ledger = PrivacyLedger()
    est = _fit(table[:4000], ledger, n_providers=2, aggregation="secure")
    union, one = _union_plan(4000), _provider_plan(table[:2000])
    assert union["statistic"].weight != pytest.approx(one["statistic"].weight, abs=1e-3)
    assert _multipliers(est.privacy_) == pytest.approx(
        {name: b.multiplier for name, b in union.parts.items()}, rel=1e-12)
    assert est.privacy_.n_samples == 4000 and ledger.records == [("DPSPCA", est.privacy_)]
    assert ledger.epsilon(1e-5) == pytest.approx(0.3, abs=1e-3)


@pytest.mark.parametrize("path", ["local", "secure", "streamed"])
def test_public_scales_make_the_fit_that_of_the_table_divided_by_them(path):
    """One column in units 10⁴ × the others: the mean rounds run on x/s, so the fit is the
    one on X/s (in raw units the large column set the mean's noise and swamped the rest)."""
    from privpca.streaming.array_source import ArraySource

    rng = np.random.default_rng(20261129)
    n, p = 12_000, 6
    X = (rng.standard_normal((n, 2)) * [2.0, 1.4]) @ rng.standard_normal((2, p))
    X += 0.6 * rng.standard_normal((n, p)) + 3.0
    X[:, 0] *= 1e4
    sd = X.std(axis=0, ddof=1)
    kwargs = dict(epsilon=1.0, n_providers=3, random_state=0)
    if path == "secure":
        kwargs["aggregation"] = "secure"
    scaled = DPSPCA(2, scale=sd, **kwargs)
    divided = DPSPCA(2, **kwargs)
    if path == "streamed":
        parts = np.array_split(np.arange(n), 3)
        scaled.fit_providers([ArraySource(X[i]) for i in parts])
        divided.fit_providers([ArraySource(X[i] / sd) for i in parts])
    else:
        scaled.fit(X)
        divided.fit(X / sd)
    np.testing.assert_allclose(np.abs(scaled.components_), np.abs(divided.components_),
                               atol=1e-6)
    np.testing.assert_allclose(scaled.mean_ / sd, divided.mean_, atol=1e-8)
    assert any("x/s" in s.mechanism for s in scaled.privacy_.spends)


def test_each_provider_chooses_its_bound_by_the_ladder():
    """data_norm="auto": each provider's pilots choose its bound (the central rule, its own
    rows and power noise). On an elliptical cloud clipping turns nothing, so the low
    candidates win: 0.200 → 0.066 for three seeds with the 99 % quantile before (a public
    median bound: 0.050). The record lists the pilots; the parts compose to exactly ε."""
    rng = np.random.default_rng(7)
    X = rng.standard_normal((8_000, 6)) * np.geomspace(30.0, 0.5, 6) + 100.0
    ref = PCA(2).fit(X).components_.T
    norms = np.linalg.norm(X - X.mean(axis=0), axis=1)
    distances = []
    for seed in (200, 201, 202):
        est = DPSPCA(2, random_state=seed, ledger=PrivacyLedger()).fit(X)
        distances.append(subspace_distance(est.components_.T, ref))
        assert est.data_norm_ < np.quantile(norms, 0.9)
        assert "bound_select" in [s.mechanism.split(":")[0] for s in est.privacy_.spends]
        assert compose_epsilon([s.event() for s in est.privacy_.spends], 1e-5) == \
            pytest.approx(1.0, abs=1e-3)
    assert np.mean(distances) < 0.1
