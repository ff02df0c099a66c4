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


def test_pure_spends_compose_by_basic_composition():
    pure = PrivacyRecord.from_spends(
        (PrivacySpend("exponential", epsilon=0.5, delta=0.0, sensitivity=1.0, noise_scale=4.0),),
        0.0,
        model="central",
        neighbouring="replace-one",
        sensitivity=1.0,
        noise_scale=4.0,
        calibration="exponential mechanism",
        data_norm=1.0,
        n_samples=10,
    )
    gauss = _record(4.0)
    ledger = PrivacyLedger()
    ledger.spend(pure)
    ledger.spend(pure)
    assert ledger.epsilon(1e-6) == pytest.approx(1.0)
    ledger.spend(gauss)
    assert ledger.epsilon(1e-6) == pytest.approx(1.0 + gauss.epsilon, rel=1e-3)
    budgeted = PrivacyLedger(epsilon_budget=0.9, delta_budget=1e-6)
    budgeted.spend(pure)
    with pytest.raises(BudgetExceededError):
        budgeted.spend(pure)
