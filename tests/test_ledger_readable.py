"""A ledger and a record a person can read, and the δ rules.

* ``PrivacyLedger.epsilon()`` without a δ: at ``delta_budget``, else at the sum of the spends'
  δ; it raises only for a ledger with neither (and says what to pass).
* ``str(record)``: the total (ε, δ), the neighbouring relation, the bound, every spend (ε, δ,
  share, mechanism), the composed total beside the naive sum of the spends' ε and one
  sentence on why they differ.
* δ ≥ 1/n (public n) warns at fit; δ ≥ 0.1 is refused unless forced with
  ``privpca.config_context(allow_large_delta=True)``.
"""

from __future__ import annotations

import dataclasses
import math
import warnings

import dp_accounting
import numpy as np
import pytest
import sklearn

import privpca
from privpca import LargeDeltaWarning, PrivacyLedger
from privpca._registry import PRIVATE_ESTIMATORS
from privpca.accounting import PrivacyRecord, PrivacySpend
from privpca.accounting.calibration import certified_epsilon
from privpca.accounting.record import COMPOSITION_SENTENCE, PARALLEL_SENTENCE

pytestmark = pytest.mark.filterwarnings("ignore::privpca.ReproducibleNoiseWarning")


@pytest.fixture(scope="module")
def table():
    rng = np.random.default_rng(11)
    return rng.standard_normal((20_000, 6)) * np.array([3.0, 2.0, 1.0, 1.0, 0.5, 0.5]) + 2.0


@pytest.fixture(scope="module")
def gauss(table):
    return privpca.AnalyzeGaussPCA(2, epsilon=1.0, delta=1e-5, random_state=0,
                                   ledger=PrivacyLedger()).fit(table)


def _first_line(text):
    return " ".join(text.split())


# ------------------------------------------------------------------------------ the ledger


def test_epsilon_without_delta_uses_the_budget(table):
    ledger = PrivacyLedger(epsilon_budget=5.0, delta_budget=1e-4)
    privpca.AnalyzeGaussPCA(2, random_state=0, ledger=ledger).fit(table)
    assert ledger.default_delta() == 1e-4
    assert ledger.epsilon() == ledger.epsilon(1e-4)


def test_epsilon_without_delta_uses_the_sum_of_the_spends_delta(gauss, table):
    ledger = PrivacyLedger()
    one = privpca.AnalyzeGaussPCA(2, random_state=0, ledger=ledger).fit(table)
    assert ledger.default_delta() == pytest.approx(1e-5)
    assert ledger.epsilon() == pytest.approx(one.privacy_.epsilon)  # one fit reads as itself
    privpca.AnalyzeGaussPCA(2, random_state=1, ledger=ledger).fit(table)
    assert ledger.default_delta() == pytest.approx(2e-5)
    assert ledger.epsilon() == ledger.epsilon(2e-5)
    assert 1.0 < ledger.epsilon() < 2.0  # exact composition, below the naive sum


def test_two_fits_known_by_their_pairs_compose_to_a_finite_epsilon(table):
    """Local fits compose their parts in parallel: the ledger holds them as (ε, δ) pairs. At
    the larger δ two of them are ε = ∞; at the sum of their δ, at most Σε."""
    ledger = PrivacyLedger()
    for seed in (0, 1):
        privpca.LocalGaussianPCA(2, random_state=seed, ledger=ledger).fit(table)
    assert math.isinf(ledger.epsilon(1e-5))
    assert ledger.epsilon() == pytest.approx(2.0, rel=1e-6)


def test_default_ledger_epsilon_needs_no_delta(table):
    est = privpca.AnalyzeGaussPCA(2, random_state=0).fit(table)  # ledger=None: the default
    ledger = privpca.default_ledger()
    assert ledger.epsilon() >= est.privacy_.epsilon
    assert ledger.default_delta() >= est.privacy_.delta


def test_only_an_empty_ledger_without_budget_asks_for_delta():
    with pytest.raises(ValueError, match=r"Give delta.*delta_budget"):
        PrivacyLedger().epsilon()
    assert PrivacyLedger().epsilon(1e-5) == 0.0
    assert PrivacyLedger(epsilon_budget=1.0, delta_budget=1e-5).epsilon() == 0.0


def test_ledger_printout(table):
    ledger = PrivacyLedger(epsilon_budget=4.0, delta_budget=1e-4)
    privpca.AnalyzeGaussPCA(2, random_state=0, ledger=ledger).fit(table)
    privpca.LocalGaussianPCA(2, random_state=0, ledger=ledger).fit(table)
    text = str(ledger)
    assert text == ledger.summary() and text.startswith("PrivacyLedger: 2 spends")
    assert "AnalyzeGaussPCA" in text and "LocalGaussianPCA" in text
    assert f"total: epsilon = {ledger.epsilon():.4g} at delta = 0.0001" in text
    assert "naive sum of the spends' epsilon: 2" in text
    assert "Why the total is below the naive sum" in _first_line(text)
    assert "left of the budget" in text
    assert "nothing spent yet" in str(PrivacyLedger())


# ------------------------------------------------------------------------------ the record


def test_record_printout_has_the_bound_the_spends_and_both_totals(gauss):
    record = gauss.privacy_
    text = str(record)
    assert text == record.summary()
    lines = text.splitlines()
    assert lines[0] == record.headline()  # the one line of old, first
    flat = _first_line(text)
    assert "epsilon = 1, delta = 1e-05" in flat and "central model" in flat
    assert f"neighbours:  {record.neighbouring}" in text
    assert f"data_norm = {record.data_norm:.4g}" in flat
    assert f"sensitivity is {record.sensitivity:.4g}" in flat
    assert f"n = {record.n_samples}" in flat
    for spend in record.spends:
        row = next(line for line in lines if line.endswith(spend.mechanism))
        assert f"{spend.epsilon:.4g}" in row and f"{spend.delta:.3g}" in row and "%" in row
    naive = sum(s.epsilon for s in record.spends)  # the pipeline states each part whole
    assert record.naive_epsilon() == pytest.approx(naive)
    assert naive > 1.5  # the column adds to ~1.8 for a (1, 1e-5) fit
    assert "total:       epsilon = 1 at delta = 1e-05" in text
    assert f"naive sum:   epsilon = {naive:.4g}" in text
    assert _first_line(COMPOSITION_SENTENCE) in flat
    assert "notes:" in text


def test_shares_are_the_budget_split(gauss):
    text = str(gauss.privacy_)
    stat = next(line for line in text.splitlines() if "statistic:" in line)
    assert "69.0 %" in stat  # 1 − the preprocessing's default shares (the bar's "variance" 2 %)


def test_parallel_parts_say_so(table):
    est = privpca.LocalGaussianPCA(2, random_state=0, ledger=PrivacyLedger()).fit(table)
    flat = _first_line(str(est.privacy_))
    assert _first_line(PARALLEL_SENTENCE) in flat
    assert "naive sum:" in flat and "local model" in flat


def test_a_spend_stated_per_release_counts_its_releases():
    m = 4.0
    one = certified_epsilon(m, 1e-6)
    per_release = PrivacySpend("gaussian: one answer per round", one, 1e-6, 1.0, m, count=5,
                               dp_event=dp_accounting.GaussianDpEvent(m))
    record = PrivacyRecord.from_spends((per_release,), 1e-6, model="distributed",
                                       neighbouring="replace one record", sensitivity=1.0,
                                       noise_scale=m, calibration="analytic", data_norm=1.0,
                                       n_samples=100)
    assert record.naive_epsilon() == pytest.approx(5 * one)
    assert record.epsilon < 5 * one
    text = str(record)
    assert f"{one:.4g} each" in text and "for its 5 releases" in text


def test_printout_changes_no_field_and_no_equality(gauss):
    record = gauss.privacy_
    assert dataclasses.replace(record) == record
    assert [f.name for f in dataclasses.fields(record)] == [
        "epsilon", "delta", "model", "neighbouring", "sensitivity", "noise_scale",
        "calibration", "data_norm", "n_samples", "spends", "target_epsilon", "notes",
        "noise_mode"]
    text = repr(record)
    assert "\n" not in text and text.startswith("PrivacyRecord(epsilon=1.0, delta=1e-05")
    non_private = PrivacyRecord.non_private(10, "exact PCA")
    assert "no noise (none); n=10" in str(non_private)


def test_add_remove_record_prints_no_count(table):
    est = privpca.AnalyzeGaussPCA(2, neighbouring="add-remove", centering=None, data_norm=20.0,
                                  random_state=0, ledger=PrivacyLedger()).fit(table)
    text = str(est.privacy_)
    assert "n=" not in text and str(len(table)) not in text
    assert "number is private" in text


# ------------------------------------------------------------------------------ δ rules


def test_delta_at_least_one_over_n_warns(table):
    X = table[:2_000]
    with pytest.warns(LargeDeltaWarning, match="well below 1/n") as caught:
        privpca.AnalyzeGaussPCA(2, delta=1e-3, random_state=0, ledger=PrivacyLedger()).fit(X)
    assert caught[0].filename == __file__
    assert "1/2000" in str(caught[0].message)
    with warnings.catch_warnings():
        warnings.simplefilter("error", LargeDeltaWarning)
        privpca.AnalyzeGaussPCA(2, delta=1e-5, random_state=0, ledger=PrivacyLedger()).fit(X)
        # add/remove-one neighbours: n is private, nothing is said
        privpca.AnalyzeGaussPCA(2, delta=1e-3, neighbouring="add-remove", centering=None,
                                data_norm=20.0, random_state=0, ledger=PrivacyLedger()).fit(X)


@pytest.mark.parametrize("name", [*sorted(PRIVATE_ESTIMATORS), "PCA"])
def test_delta_of_a_tenth_or_more_is_refused(name, table):
    cls = privpca.PCA if name == "PCA" else PRIVATE_ESTIMATORS[name]
    ledger = PrivacyLedger()
    for delta in (0.2, 0.1, 0.5):
        with pytest.raises(ValueError, match=r"range [(\[]0.0, 0.1\).*allow_large_delta"):
            cls(n_components=2, delta=delta, random_state=0, ledger=ledger).fit(table)
    assert len(ledger) == 0  # refused before anything was charged
    with sklearn.config_context(skip_parameter_validation=True), pytest.raises(ValueError):
        cls(n_components=2, delta=0.2, random_state=0, ledger=ledger).fit(table)
    assert len(ledger) == 0


@pytest.mark.parametrize("cls", [privpca.AnalyzeGaussPCA, privpca.DPSPCA, privpca.PCA])
def test_a_large_delta_is_accepted_when_forced(cls, table):
    ledger = PrivacyLedger()
    with privpca.config_context(allow_large_delta=True):
        assert privpca.get_config()["allow_large_delta"] is True
        with pytest.warns(LargeDeltaWarning):
            est = cls(n_components=2, delta=0.2, random_state=0, ledger=ledger).fit(table)
        with pytest.raises(ValueError, match=r"range [[(]0.0, 1.0\)"):
            cls(n_components=2, delta=1.0, random_state=0, ledger=ledger).fit(table)
    assert est.privacy_.delta == pytest.approx(0.2) and len(ledger) == 1
    assert privpca.get_config()["allow_large_delta"] is False  # restored
    with pytest.raises(ValueError, match="allow_large_delta"):
        cls(n_components=2, delta=0.2, random_state=0, ledger=ledger).fit(table)


def test_just_below_a_tenth_and_pure_dp_are_accepted(table):
    X = table[:2_000]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", LargeDeltaWarning)
        privpca.AnalyzeGaussPCA(2, delta=0.0999, random_state=0, ledger=PrivacyLedger()).fit(X)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # rows clipped at the public bound
        est = privpca.BinghamPCA(2, delta=0.0, centering=None, data_norm=5.0, random_state=0,
                                 ledger=PrivacyLedger()).fit(X)
    assert est.privacy_.delta == 0.0


def test_allow_large_delta_takes_a_bool():
    with pytest.raises(ValueError, match="allow_large_delta must be True or False"):
        privpca.set_config(allow_large_delta="yes")  # type: ignore[arg-type]


def test_the_summary_says_when_a_fits_noise_certifies_less_than_it_states():
    """Three MOD-SuLQ fits at ε = 0.5 total 0.5: the ledger composes what their noise
    certifies (MOD-SuLQ's theorem asks for more noise than its ε needs), which an outside
    tester read as a budget never enforced. The summary now says so, with the figures."""
    from privpca import ModSuLQPCA

    X = np.random.default_rng(1010).standard_normal((20_000, 8))
    ledger = PrivacyLedger()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for _ in range(3):
            ModSuLQPCA(2, epsilon=0.5, delta=1e-6, random_state=5, ledger=ledger).fit(X)
    text = " ".join(ledger.summary().split())
    assert "#3 states 0.5, its noise certifies" in text
    certified = float(text.split("#1 states 0.5, its noise certifies ")[1].split(",")[0])
    assert 0.0 < certified < 0.5
    # The total is what the three noises certify composed, floored at one fit's 0.5.
    assert ledger.epsilon() == pytest.approx(0.5)
