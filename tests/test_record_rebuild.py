"""An accountant rebuilt from a record's listed spends gets the record's (ε, δ).

A reader of ``privacy_`` (or of the CLI's JSON) who trusts none of privpca's code rebuilds
the guarantee from each spend's listed fields: a Gaussian spend is ``count`` Gaussian
mechanisms of noise multiplier ``noise_scale / sensitivity`` (plus its stability-histogram
``tail`` per release, paid from δ), a pure spend is its ``epsilon`` per release. They are
composed here with dp_accounting's PLD accountant (in privpca's convention: multiplier σ/Δ
under ``ADD_OR_REMOVE_ONE``, :mod:`privpca.accounting.composition`), independently of
privpca's own composition code.

Some spends are not Gaussian mechanisms of their listed σ/Δ; the field that makes each one
rebuildable:

* a pure mechanism (``dp_event`` None, ``delta`` 0: Bingham's exponential mechanism, the local
  norm bins' unary encoding): its ``epsilon`` per release;
* a guarantee certified by a theorem or an amplification, not by the Gaussian mechanism of
  its noise: ModSuLQ's statistic (``calibration == "mod-sulq"``: Chaudhuri et al.'s theorem,
  looser than the Gaussian analysis of the same noise) and Private Oja's (``"shuffling"`` in
  the calibration: a local randomiser amplified by shuffling), and DP-PCA's stream (its
  sensitivity and noise are NaN: each record enters one of many calls): their own
  ``(epsilon, delta)``, composed by basic composition as the budget split does;
* parallel composition (each record enters one group of releases): the held-out layout marks
  its preprocessing spends ``[held-out records]`` (DP-PCA, Private Oja) and the local model's
  spends each read a disjoint group of users (``model == "local"``); the rebuilt ε is the
  largest over the groups. No field of a spend names its group yet: the marker in
  ``mechanism`` and the record's ``model`` are what this test reads.
"""

from __future__ import annotations

import math
import warnings

import dp_accounting
import numpy as np
import pytest
from dp_accounting import pld

from privpca import (
    DPPCA,
    AnalyzeGaussPCA,
    BinghamPCA,
    LocalGaussianPCA,
    ModSuLQPCA,
    NoisyPowerPCA,
    PrivacyLedger,
    PrivateOjaPCA,
)
from privpca.accounting import PrivacyRecord, PrivacySpend

HELD = "[held-out records]"
NEIGHBOURS = dp_accounting.NeighboringRelation.ADD_OR_REMOVE_ONE


def _kind(spend: PrivacySpend, record: PrivacyRecord) -> str:
    """How ``spend`` is rebuilt: "gaussian" (σ/Δ, count, tail), "pure" or "pair"."""
    if spend.dp_event is None:
        return "pure" if spend.delta == 0 else "pair"
    if not (math.isfinite(spend.sensitivity) and math.isfinite(spend.noise_scale)):
        return "pair"
    if spend.mechanism.startswith("statistic:") and (
            record.calibration == "mod-sulq" or "shuffling" in record.calibration):
        return "pair"
    return "gaussian"


def _groups(record: PrivacyRecord) -> list[list[PrivacySpend]]:
    """The spends in groups of disjoint records (parallel composition across groups)."""
    spends = list(record.spends)
    if record.model == "local":
        return [[s] for s in spends]
    held = [s for s in spends if s.mechanism.endswith(HELD)]
    if held:
        return [held, [s for s in spends if not s.mechanism.endswith(HELD)]]
    return [spends]


def _group_epsilon(spends: list[PrivacySpend], record: PrivacyRecord, delta: float) -> float:
    """ε at ``delta`` of one group's spends, rebuilt from their listed fields only."""
    kinds = {id(s): _kind(s, record) for s in spends}
    other = [s for s in spends if kinds[id(s)] != "gaussian"]
    pure = sum(s.epsilon * s.count for s in other)  # basic composition, as the budget split
    pair_delta = sum(s.delta * s.count for s in other)
    gaussian = [s for s in spends if kinds[id(s)] == "gaussian"]
    if not gaussian:
        assert pair_delta <= delta * (1 + 1e-9)
        return pure
    accountant = pld.PLDAccountant(NEIGHBOURS, value_discretization_interval=1e-4)
    for s in gaussian:
        accountant.compose(dp_accounting.GaussianDpEvent(s.noise_scale / s.sensitivity),
                           s.count)
    tail = sum(s.tail * s.count for s in gaussian)
    # The tails are paid from δ: δ_events = δ − (1 + e^ε)·tail, a monotone fixed point.
    eps = 0.0
    for _ in range(100):
        new = float(accountant.get_epsilon(delta - pair_delta - (1 + math.exp(eps)) * tail))
        if new <= eps * (1 + 1e-12):
            break
        eps = new
    return eps + pure


def rebuilt_epsilon(record: PrivacyRecord) -> float:
    """The record's ε rebuilt by an accountant from the listed spends alone."""
    return max(_group_epsilon(group, record, record.delta) for group in _groups(record))


ESTIMATORS = [AnalyzeGaussPCA, ModSuLQPCA, NoisyPowerPCA, BinghamPCA, DPPCA, PrivateOjaPCA,
              LocalGaussianPCA]


@pytest.fixture(scope="module")
def table():
    rng = np.random.default_rng(0)
    return rng.standard_normal((20_000, 6)) @ np.diag([5.0, 3.0, 2.0, 1.0, 1.0, 0.5]) + 3.0


@pytest.mark.parametrize("cls", ESTIMATORS)
def test_an_accountant_rebuilt_from_the_listed_spends_gets_the_record(cls, table):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the seed's warning; clipping (data holder's)
        est = cls(n_components=2, random_state=0, ledger=PrivacyLedger()).fit(table)
    record = est.privacy_
    assert (record.epsilon, record.delta) == (1.0, 1e-5)
    for spend in record.spends:
        if _kind(spend, record) != "gaussian":
            continue
        # The listed σ/Δ is the multiplier of the event the ledger composes.
        event = spend.dp_event
        assert isinstance(event, dp_accounting.GaussianDpEvent), spend.mechanism
        assert spend.noise_scale / spend.sensitivity == pytest.approx(
            event.noise_multiplier, rel=1e-9), spend.mechanism
    assert rebuilt_epsilon(record) == pytest.approx(record.epsilon, rel=1e-3)


def test_the_pilots_are_listed_as_one_release_with_its_noise_and_candidates(table):
    ledger = PrivacyLedger(epsilon_budget=1.0, delta_budget=1e-5)
    est = AnalyzeGaussPCA(n_components=2, random_state=0, ledger=ledger).fit(table)
    pilots = [s for s in est.privacy_.spends if s.mechanism.startswith("bound_select:")]
    assert [s.count for s in pilots] == [1]
    (pilot,) = pilots
    assert "candidate bounds D = " in pilot.mechanism
    assert f"noise std {pilot.noise_scale:.6g})" in pilot.mechanism
    n_candidates = len(pilot.mechanism.split("D = ")[1].split(", released")[0].split(", "))
    assert pilot.sensitivity == pytest.approx(math.sqrt(2 * n_candidates))
    # The planned booking listed the same event: the final record settled it.
    assert len(ledger) == 1 and ledger.records[0][1] is est.privacy_
    assert ledger.epsilon() == pytest.approx(1.0)


@pytest.mark.parametrize("cls", [ModSuLQPCA, BinghamPCA])
def test_the_notes_split_the_budget_as_the_spends_do(cls, table):
    """A statistic outside the Gaussian split (MOD-SuLQ's theorem, Bingham's exponential
    mechanism) is composed by basic composition: the notes said "statistic 0.71" of the
    Gaussian budget beside a spends table that gave it 6.4 % (an outside tester)."""
    import re

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est = cls(n_components=2, random_state=0, ledger=PrivacyLedger()).fit(table)
    notes = " ".join(est.privacy_.notes.split())
    found = re.search(r"composes exactly \(dp-accounting\) to \(epsilon, delta\) = \(([\d.e-]+), "
                      r"([\d.e-]+)\), shared as (.*?) of its Gaussian budget.*?the statistic "
                      r"takes the rest, \(([\d.e-]+), ([\d.e-]+)\), by basic composition", notes)
    assert found, notes
    shares = [float(part.rsplit(" ", 1)[1]) for part in found[3].split(", ")]
    assert sum(shares) == pytest.approx(1.0, abs=0.01)
    statistic = next(s for s in est.privacy_.spends if s.mechanism.startswith("statistic"))
    assert float(found[4]) == pytest.approx(statistic.epsilon, rel=1e-3)
    assert float(found[1]) + float(found[4]) == pytest.approx(1.0, rel=1e-3)
