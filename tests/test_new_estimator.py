"""docs/ARCHITECTURE.md's recipe, followed: a new estimator on the release pipeline in a few
lines, passing scikit-learn's checks and spending exactly its budget."""

from __future__ import annotations

import math
from typing import Any, ClassVar

import numpy as np
import pytest
from sklearn.utils.estimator_checks import parametrize_with_checks

from privpca.decomposition._base import FitPlan, PipelinePCA, Release
from privpca.decomposition._constraints import PIPELINE
from privpca.mechanisms.noise import symmetric_gaussian_release
from privpca.mechanisms.sensitivity import gram_sensitivity
from privpca.pipeline.release import ReleasePipeline
from privpca.pipeline.rows import Statistic, Table
from privpca.pipeline.spectrum import check_n_components_spec, fit_noisy_matrix


class ToyGramPCA(PipelinePCA):
    """Gaussian noise on the Gram matrix, top-k: the smallest estimator the recipe gives."""

    _parameter_constraints: ClassVar[dict[str, list[Any]]] = dict(PIPELINE)  # checked first

    def __init__(self, n_components: Any = 2, *, epsilon: float = 1.0, delta: float = 1e-5,
                 centering: Any = "private", data_norm: Any = "auto", scale: Any = False,
                 budget_shares: Any = None, holdout_fraction: Any = "auto",
                 random_state: Any = None, ledger: Any = None) -> None:
        self.n_components = n_components
        self.epsilon = epsilon
        self.delta = delta
        self.centering = centering
        self.data_norm = data_norm
        self.scale = scale
        self.budget_shares = budget_shares
        self.holdout_fraction = holdout_fraction
        self.random_state = random_state
        self.ledger = ledger

    def _plan(self, table: Table) -> FitPlan:
        k = check_n_components_spec(self.n_components, table.n_features, self)
        statistic = Statistic("gaussian: packed upper triangle of the Gram matrix",
                              gram_sensitivity, releases_spectrum=True)
        run = ReleasePipeline(self, self._settings(), table.n_samples, table.n_features,
                              statistic)
        return FitPlan(run, settings={"k": k})

    def _release(self, plan: FitPlan, prepared: Any, rng: np.random.Generator,
                 pre_rng: np.random.Generator) -> Release:
        run = plan.run
        sensitivity = gram_sensitivity(prepared.data_norm)
        sigma = run.statistic_multiplier() * sensitivity
        gram = run.recentred_gram(prepared, pre_rng) if run.recentre else prepared.gram()
        noisy = symmetric_gaussian_release(gram, sigma, rng, sensitivity=sensitivity)
        self._set_spectrum(fit_noisy_matrix(noisy, plan.settings["k"], noise_sd=sigma,
                                            denominator=run.denominator(prepared)))
        spend = run.statistic_spend(prepared.data_norm, sigma)  # the privacy map
        return Release(spend, "analytic", "A toy: the Gram matrix plus Gaussian noise.")


PAPER = {"centering": None, "data_norm": 1.0}


@parametrize_with_checks([ToyGramPCA(**PAPER), ToyGramPCA(epsilon=1e4, holdout_fraction=None)],
                         expected_failed_checks=lambda est: {})
def test_the_toy_passes_scikit_learns_checks(estimator, check):
    check(estimator)


def test_the_toy_spends_its_budget_and_matches_analyze_gauss():
    from privpca import AnalyzeGaussPCA, PrivacyLedger

    rng = np.random.default_rng(0)
    X = rng.standard_normal((4000, 6)) * np.linspace(3, 0.5, 6) + 5.0
    ledger = PrivacyLedger()
    toy = ToyGramPCA(2, epsilon=1.0, random_state=3, ledger=ledger).fit(X)
    assert toy.privacy_.epsilon == pytest.approx(1.0) and toy.privacy_.delta == 1e-5
    assert ledger.epsilon(1e-5) == pytest.approx(1.0, rel=1e-3)
    # Same plan, same streams, same statistic: AnalyzeGauss's numbers to the bit (with the
    # private quantile bound: the toy declares no subspace_rank, so its "auto" is that one).
    ref = AnalyzeGaussPCA(2, epsilon=1.0, data_norm="quantile", random_state=3,
                          ledger=PrivacyLedger()).fit(X)
    assert np.array_equal(toy.components_, ref.components_)
    assert np.array_equal(toy.mean_, ref.mean_)
    assert math.isfinite(toy.expected_error_)


def test_registering_the_toy_is_all_the_front_door_and_the_audit_need(monkeypatch):
    """One line in :mod:`privpca._registry` (here patched in): ``privpca.PCA`` fits it by
    name and ``privpca audit``'s table runs it, with no list elsewhere to extend."""
    import privpca
    from privpca._registry import PRIVATE_ESTIMATORS, TRUST_MODELS
    from privpca.audit.cli import audit_table

    monkeypatch.setitem(PRIVATE_ESTIMATORS, "toy-gram", ToyGramPCA)
    monkeypatch.setitem(TRUST_MODELS, "toy-gram", "central")
    X = np.random.default_rng(0).standard_normal((3000, 4)) + 2.0
    front = privpca.PCA(2, epsilon=1.0, mechanism="toy-gram", random_state=1,
                        ledger=privpca.PrivacyLedger()).fit(X)
    assert isinstance(front.estimator_, ToyGramPCA) and front.components_.shape == (2, 4)
    rows = audit_table(["ToyGramPCA"], [1.0], delta=1e-5, runs=20, setting="release",
                       seed=0, progress=False)
    assert [(r["method"], r["kind"]) for r in rows] == [("ToyGramPCA", "audit")]
    assert "error" not in rows[0], rows[0]
