"""The private score plot keeps the fit's neighbouring relation, and the report never composes
guarantees stated under different relations.

Under add/remove-one neighbours the number of records n is private: a fit under that relation
does not release it (``privacy_.n_samples`` is None). Its score plot must not release it
either, and must state the same relation, or a reader composing the two would add a replace-one
guarantee (which may publish n) to an add/remove one.
"""

from __future__ import annotations

import math
import re
import warnings

import numpy as np
import pytest

from privpca.accounting import PrivacyLedger
from privpca.accounting.neighbouring import Neighbouring
from privpca.decomposition.analyze_gauss import AnalyzeGaussPCA
from privpca.mechanisms.gaussian import analytic_gaussian_sigma
from privpca.plot import SCORES_NEIGHBOURING, scores
from privpca.report import render_release_report

N = 4_321  # an n that no other number on the page is likely to equal


@pytest.fixture(scope="module")
def table() -> np.ndarray:
    rng = np.random.default_rng(3)
    X = rng.standard_normal((N, 4)) * np.array([3.0, 2.0, 1.0, 0.5])
    return X / np.linalg.norm(X, axis=1).max()  # rows of norm <= 1: a public bound


def _fit(X: np.ndarray, neighbouring: str, ledger: PrivacyLedger) -> AnalyzeGaussPCA:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the seed's warning
        return AnalyzeGaussPCA(2, epsilon=1.0, neighbouring=neighbouring, centering=None,
                               data_norm=1.0, random_state=0, ledger=ledger).fit(X)


@pytest.mark.parametrize("delta", [0.0, 1e-6])
def test_an_add_remove_fit_gets_an_add_remove_plot_without_n(table, delta):
    ledger = PrivacyLedger()
    est = _fit(table, "add-remove", ledger)
    assert est.privacy_.n_samples is None
    ax = scores(est, table, epsilon=0.5, delta=delta, bins=8, random_state=0, ledger=ledger)
    record = ax.privacy_record
    assert record.neighbouring == est.privacy_.neighbouring
    assert record.neighbouring == Neighbouring.ADD_REMOVE_ONE.description
    assert record.n_samples is None and record.to_dict()["n_samples"] is None
    assert "n=" not in str(record) and str(N) not in ax.get_title()
    # Adding or removing one row moves one count by 1: sensitivity 1, L1 and L2.
    spend = record.spends[0]
    assert spend.sensitivity == record.sensitivity == 1.0
    if delta == 0.0:
        assert spend.noise_scale == pytest.approx(1.0 / 0.5)
    else:
        assert spend.noise_scale == pytest.approx(analytic_gaussian_sigma(0.5, delta, 1.0))
    assert ledger.epsilon(1e-5) > 1.0  # booked with the fit, under the fit's relation
    assert ledger.records[-1][1] is record


def test_a_replace_one_fit_keeps_its_plot_as_it_was(table):
    ledger = PrivacyLedger()
    est = _fit(table, "replace", ledger)
    ax = scores(est, table, epsilon=0.5, bins=8, random_state=0, ledger=ledger)
    record = ax.privacy_record
    assert record.neighbouring == SCORES_NEIGHBOURING and record.n_samples == N
    assert record.spends[0].sensitivity == 2.0
    assert record.spends[0].noise_scale == pytest.approx(2.0 / 0.5)


def _total(page: str) -> re.Match[str] | None:
    return re.search(r"\(ε = ([0-9.]+), δ = ([0-9.e-]+)\)</strong> in total", page)


def test_the_report_composes_a_fit_and_its_plot_under_one_relation(table):
    ledger = PrivacyLedger()
    est = _fit(table, "add-remove", ledger)
    ax = scores(est, table, epsilon=0.5, bins=8, random_state=0, ledger=ledger)
    page = render_release_report(est, scores=ax)
    total = _total(page)
    assert total is not None
    assert 1.0 < float(total.group(1)) <= 1.5
    assert "No total for this page" not in page


def test_the_report_never_composes_two_relations_into_one_total(table):
    # An add/remove fit shown with a score plot released under replace-one (a plot of
    # another fit, or one made before plots followed their fit's relation).
    add_remove = _fit(table, "add-remove", PrivacyLedger())
    replace = _fit(table, "replace", PrivacyLedger())
    ax = scores(replace, table, epsilon=0.5, bins=8, random_state=0, ledger=PrivacyLedger())
    page = render_release_report(add_remove, scores=ax)
    assert _total(page) is None and "in total" not in page
    assert 'id="total" class="missing"' in page and "No total for this page" in page
    assert "do not compose" in page
    for relation in (add_remove.privacy_.neighbouring, SCORES_NEIGHBOURING):
        assert relation.replace("<=", "&lt;=") in page  # both stated, each on its own
    # The other way round too.
    page = render_release_report(replace, scores=scores(
        add_remove, table, epsilon=0.5, bins=8, random_state=0, ledger=PrivacyLedger()))
    assert _total(page) is None and "No total for this page" in page


def test_wordings_of_replace_one_still_compose(table):
    # The fit says "replace one record (any two records of norm <= data_norm)", the plot
    # "replace one record (any two records; n public)": one relation, one total.
    est = _fit(table, "replace", PrivacyLedger())
    assert est.privacy_.neighbouring != SCORES_NEIGHBOURING
    ax = scores(est, table, epsilon=0.5, bins=8, random_state=0, ledger=PrivacyLedger())
    total = _total(render_release_report(est, scores=ax))
    assert total is not None and math.isfinite(float(total.group(1)))
