"""Composition through dp-accounting, privacy records and the ledger."""

from __future__ import annotations

import copy
import json
import math
import pickle

import dp_accounting
import pytest

from privpca.accounting import (
    PrivacyLedger,
    PrivacyRecord,
    PrivacySpend,
    compose_epsilon,
    gaussian_noise_multiplier_for_composition,
)
from privpca.exceptions import BudgetExceededError


@pytest.mark.parametrize("count", [1, 4, 25])
@pytest.mark.parametrize("multiplier", [2.0, 8.0])
def test_composition_of_gaussians_matches_closed_form(count, multiplier):
    # T Gaussian releases with noise multiplier m compose exactly to one with m/√T.
    delta = 1e-6
    exact = dp_accounting.get_epsilon_gaussian(multiplier / math.sqrt(count), delta)
    events = [dp_accounting.GaussianDpEvent(multiplier)] * count
    pld_eps = compose_epsilon(events, delta)
    assert exact <= pld_eps <= exact * 1.01 + 1e-3  # PLD is a tight upper bound
    rdp_eps = compose_epsilon(events, delta, accountant="rdp")
    assert rdp_eps >= exact * 0.999  # RDP is valid but looser


def test_calibration_for_composition_hits_target():
    m = gaussian_noise_multiplier_for_composition(1.0, 1e-5, 10)
    exact = dp_accounting.get_epsilon_gaussian(m / math.sqrt(10), 1e-5)
    assert exact == pytest.approx(1.0, abs=1e-6)
    # The PLD accountant, composing 10 separate events, agrees with the identity.
    events = [dp_accounting.GaussianDpEvent(m)] * 10
    assert compose_epsilon(events, 1e-5) == pytest.approx(1.0, abs=2e-3)
    m_pld = gaussian_noise_multiplier_for_composition(1.0, 1e-5, 10, accountant="pld")
    assert m_pld == pytest.approx(m, rel=1e-3)
    assert gaussian_noise_multiplier_for_composition(1.0, 1e-5, 1) == pytest.approx(
        dp_accounting.get_sigma_gaussian(1.0, 1e-5)
    )


def _record(multiplier: float = 4.0, count: int = 1) -> PrivacyRecord:
    spend = PrivacySpend(
        "gaussian",
        epsilon=dp_accounting.get_epsilon_gaussian(multiplier, 1e-6),
        delta=1e-6,
        sensitivity=1.0,
        noise_scale=multiplier,
        count=count,
        dp_event=dp_accounting.GaussianDpEvent(multiplier),
    )
    return PrivacyRecord.from_spends(
        (spend,),
        1e-6,
        model="central",
        neighbouring="replace-one",
        sensitivity=1.0,
        noise_scale=multiplier,
        calibration="analytic",
        data_norm=1.0,
        n_samples=10,
    )


def test_record_composes_counted_spends_and_serialises():
    rec = _record(4.0, count=9)
    assert rec.epsilon == pytest.approx(
        dp_accounting.get_epsilon_gaussian(4.0 / 3.0, 1e-6), rel=0.01
    )
    text = json.dumps(rec.to_dict())
    assert '"model": "central"' in text
    assert "GaussianDpEvent" in text


def test_ledger_composes_and_enforces_budget():
    single = _record(4.0)
    budget = compose_epsilon(single.events() * 3, 1e-5) * 1.001
    ledger = PrivacyLedger(epsilon_budget=budget, delta_budget=1e-5)
    for _ in range(3):
        ledger.spend(single, "fit")
    assert len(ledger) == 3
    assert ledger.epsilon() == pytest.approx(budget / 1.001, rel=1e-6)
    with pytest.raises(BudgetExceededError, match="over its budget"):
        ledger.spend(single, "one too many")
    assert len(ledger) == 3  # the refused spend was not recorded


def test_withdraw_removes_exactly_the_booked_record():
    single = _record(4.0)
    budget = compose_epsilon(single.events() * 2, 1e-5) * 1.001
    ledger = PrivacyLedger(epsilon_budget=budget, delta_budget=1e-5)
    kept, refused = _record(4.0), _record(4.0)
    ledger.spend(kept, "fit")
    ledger.spend(refused, "refused fit")
    with pytest.raises(BudgetExceededError):
        ledger.spend(single, "third")  # the budget holds two
    ledger.withdraw(refused)
    assert [record for _, record in ledger] == [kept]
    alone = PrivacyLedger(epsilon_budget=budget, delta_budget=1e-5)
    alone.spend(kept, "fit")
    assert ledger.epsilon() == alone.epsilon()  # as if the refused fit had never booked
    ledger.spend(single, "third")  # room again for one
    with pytest.raises(ValueError, match="not in this ledger"):
        ledger.withdraw(refused)  # only a booked record, and only once


def test_ledger_is_shared_by_copies_and_refuses_pickling():
    ledger = PrivacyLedger()
    assert copy.deepcopy(ledger) is ledger
    assert copy.copy(ledger) is ledger
    with pytest.raises(TypeError, match="another process"):
        pickle.dumps(ledger)


def test_ledger_argument_checks():
    with pytest.raises(ValueError, match="together"):
        PrivacyLedger(epsilon_budget=1.0)
    with pytest.raises(ValueError, match="epsilon_budget must be > 0"):
        PrivacyLedger(epsilon_budget=0.0, delta_budget=1e-5)
    with pytest.raises(ValueError, match="delta"):
        PrivacyLedger().epsilon()


def _pure_record(epsilon: float = 0.5) -> PrivacyRecord:
    return PrivacyRecord.from_spends(
        (PrivacySpend("exponential", epsilon=epsilon, delta=0.0, sensitivity=1.0,
                      noise_scale=4.0),),
        0.0,
        model="central",
        neighbouring="replace-one",
        sensitivity=1.0,
        noise_scale=4.0,
        calibration="exponential mechanism",
        data_norm=1.0,
        n_samples=10,
    )


def test_pure_spends_compose_at_most_by_basic_composition():
    # Pure spends compose through their (ε, 0) dominating pair: never above Σε (basic
    # composition), and at δ > 0 a hair below it (optimal composition of pure DP).
    pure = _pure_record(0.5)
    gauss = _record(4.0)
    ledger = PrivacyLedger()
    ledger.spend(pure)
    assert 0.4999 < ledger.epsilon(1e-6) <= 0.5
    ledger.spend(pure)
    assert 0.99 < ledger.epsilon(1e-6) <= 1.0
    with_gauss = PrivacyLedger()
    for rec in (pure, pure, gauss):
        with_gauss.spend(rec)
    assert max(1.0, gauss.epsilon) < with_gauss.epsilon(1e-6) <= (1.0 + gauss.epsilon) * (1 + 1e-9)
    budgeted = PrivacyLedger(epsilon_budget=0.9, delta_budget=1e-6)
    budgeted.spend(pure)
    with pytest.raises(BudgetExceededError):
        budgeted.spend(pure)


def test_parallel_record_composes_through_its_own_guarantee():
    # A record whose events, composed in sequence, exceed its claim (parts in parallel, as the
    # local model's user groups or DP-PCA's batches): the ledger composes its (ε, δ) instead.
    m = dp_accounting.get_sigma_gaussian(1.0, 1e-5)
    spends = tuple(
        PrivacySpend(f"group {i}", epsilon=1.0, delta=1e-5, sensitivity=1.0, noise_scale=m,
                     dp_event=dp_accounting.GaussianDpEvent(m)) for i in range(3))
    rec = PrivacyRecord(epsilon=1.0, delta=1e-5, model="local", neighbouring="replace-one",
                        sensitivity=1.0, noise_scale=m, calibration="analytic", data_norm=1.0,
                        n_samples=30, spends=spends)
    ledger = PrivacyLedger()
    ledger.spend(rec)
    assert ledger.epsilon(1e-5) == pytest.approx(1.0)
    ledger.spend(rec)
    # Before: the 6 Gaussian parts in sequence (> 2); now at most basic composition.
    assert 1.0 < ledger.epsilon(2e-5) <= 2.0
    assert 1.0 < ledger.epsilon(1e-4) < 2.0


def test_tail_records_compose_to_a_finite_epsilon():
    # DP-PCA's record: events (Laplace + Gaussian, composed in parallel by the estimator) with
    # a tail that uses all of δ when composed in sequence: two such fits composed to ε = inf
    # at δ <= 1e-4 before. Now each enters as its (1, 1e-5) guarantee.
    events = dp_accounting.ComposedDpEvent([
        dp_accounting.SelfComposedDpEvent(dp_accounting.LaplaceDpEvent(4.0), 2),
        dp_accounting.GaussianDpEvent(5.0)])
    tail = 1e-5 / (1 + math.e)  # (1 + e^ε)·tail = δ: no δ left for the events
    spend = PrivacySpend("dp-pca step", epsilon=1.0, delta=1e-5, sensitivity=math.nan,
                         noise_scale=math.nan, dp_event=events, tail=tail)
    rec = PrivacyRecord(epsilon=1.0, delta=1e-5, model="central", neighbouring="replace-one",
                        sensitivity=math.nan, noise_scale=math.nan, calibration="adaptive",
                        data_norm=math.inf, n_samples=100, spends=(spend,))
    assert compose_epsilon([events, events], 1e-4, tail=2 * tail) < math.inf
    ledger = PrivacyLedger()
    ledger.spend(rec)
    ledger.spend(rec)
    for delta in (2e-5, 5e-5, 1e-4):
        assert 1.0 < ledger.epsilon(delta) <= 2.0


def test_huge_epsilon_composes_quickly_and_in_bounded_memory():
    # ε = 10⁶ (multiplier ~1e-3) used to need a 1e-4 grid over a loss range of ~10⁶: the
    # calibration of NoisyPowerPCA/DPSPCA allocated ~150 GiB. Now bounded.
    import time

    m = gaussian_noise_multiplier_for_composition(1e6, 1e-5, 10)
    t0 = time.perf_counter()
    eps = compose_epsilon([dp_accounting.GaussianDpEvent(m)] * 10, 1e-5)
    assert eps == pytest.approx(1e6, rel=1e-6)
    mixed = compose_epsilon([dp_accounting.GaussianDpEvent(m)] * 10, 1e-5, pairs=[(1.0, 0.0)])
    assert 1e6 <= mixed <= 1e6 * 1.001
    assert compose_epsilon([dp_accounting.LaplaceDpEvent(1e-6)], 1e-5) == pytest.approx(
        1e6, rel=1e-3)
    assert time.perf_counter() - t0 < 5.0


def test_neighbouring_relations_are_one_type():
    """Every record names its relation through Neighbouring; the public option maps once."""
    from privpca.accounting.neighbouring import Neighbouring

    assert Neighbouring.from_option("replace") is Neighbouring.REPLACE_ONE
    assert Neighbouring.from_option("add-remove") is Neighbouring.ADD_REMOVE_ONE
    with pytest.raises(ValueError, match="'neighbouring' parameter"):
        Neighbouring.from_option("add")
    assert [m for m in Neighbouring if not m.n_public] == [Neighbouring.ADD_REMOVE_ONE]
    assert {m.relation for m in Neighbouring} == {
        "replace", "add-remove", "replace-user", "replace-provider", "none"}
    assert len({m.description for m in Neighbouring}) == len(Neighbouring)
    assert PrivacyRecord.non_private(3, "").neighbouring == Neighbouring.NOT_PRIVATE.description


def _one_spend_record(spend: PrivacySpend, calibration: str) -> PrivacyRecord:
    return PrivacyRecord(epsilon=spend.epsilon, delta=spend.delta, model="central",
                         neighbouring="replace one record", sensitivity=spend.sensitivity,
                         noise_scale=spend.noise_scale, calibration=calibration, data_norm=1.0,
                         n_samples=100, spends=(spend,))


@pytest.mark.parametrize(
    ("spend", "calibration", "kind", "words"),
    [
        (PrivacySpend("gaussian: x", 1.0, 1e-5, 2.0, 3.5,
                      dp_event=dp_accounting.GaussianDpEvent(1.75)),
         "analytic", "gaussian", "sensitivity 2, noise std 3.5 (analytic)"),
        # The score plot's record: calibration "laplace", b = 2/ε.
        (PrivacySpend("laplace: counts", 0.5, 0.0, 2.0, 4.0,
                      dp_event=dp_accounting.SelfComposedDpEvent(
                          dp_accounting.LaplaceDpEvent(4.0), 2)),
         "laplace", "laplace", "L1 sensitivity 2, Laplace scale b 4 (laplace)"),
        # Laplace known from the main spend's event alone.
        (PrivacySpend("vote counts", 0.5, 0.0, 2.0, 4.0,
                      dp_event=dp_accounting.LaplaceDpEvent(2.0)),
         "report-noisy-max", "laplace", "L1 sensitivity 2, Laplace scale b 4"),
        (PrivacySpend("exponential mechanism: matrix Bingham", 1.0, 0.0, 9.0, 18.0),
         "exponential mechanism", "exponential", "sensitivity 9, temperature 18"),
        (PrivacySpend("adaptive", 1.0, 1e-5, math.nan, math.nan),
         "adaptive", "per-step", "noise set step by step (see the spends)"),
    ],
)
def test_record_names_what_its_noise_scale_measures(spend, calibration, kind, words):
    record = _one_spend_record(spend, calibration)
    assert record.noise_kind == kind
    assert words in str(record)
    if kind != "gaussian":
        assert "noise std" not in str(record)


def test_non_private_record_says_no_noise():
    record = PrivacyRecord.non_private(10, "exact PCA")
    assert record.noise_kind == "none"
    assert "no noise (none); n=10" in str(record) and "noise std" not in str(record)


def test_fitted_records_name_their_noise():
    import numpy as np

    from privpca import AnalyzeGaussPCA, BinghamPCA
    from privpca.plot import scores

    X = np.random.default_rng(0).standard_normal((5_000, 4))
    ledger = PrivacyLedger()
    gauss = AnalyzeGaussPCA(2, epsilon=1.0, random_state=0, ledger=ledger).fit(X)
    assert gauss.privacy_.noise_kind == "gaussian" and "noise std" in str(gauss.privacy_)
    with pytest.warns(Warning):  # rows above the public bound are clipped
        bingham = BinghamPCA(2, epsilon=1.0, delta=0.0, centering=None, data_norm=1.0,
                             random_state=0, ledger=ledger).fit(X)
    assert bingham.privacy_.noise_kind == "exponential"
    assert f"temperature {2 / 1.0:.4g}" in str(bingham.privacy_)
    laplace = scores(gauss, X, epsilon=0.5, random_state=0, ledger=ledger).privacy_record
    assert laplace.noise_kind == "laplace" and "Laplace scale b 4 (laplace)" in str(laplace)
    gaussian = scores(gauss, X, epsilon=0.5, delta=1e-6, random_state=0,
                      ledger=ledger).privacy_record
    assert gaussian.noise_kind == "gaussian" and "noise std" in str(gaussian)
