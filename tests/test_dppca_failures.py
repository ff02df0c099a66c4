"""DP-PCA never fails silently: its steps resolve on defaults, and when they do not it says so.

The README's ``DPPCA(n_components=1, epsilon=1.0, delta=1e-12).fit(X)`` on 10⁵ rows of
Covertype used to release no eigenvalue in any of its 13 steps (⌈3τ⌉ subsets of about 10 pair
differences each: their eigenvalues were too dispersed for a third of them to share one √2
bin) and returned its random start, at distance 1.3–1.4 from scikit-learn's PCA, without a
word.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from sklearn.decomposition import PCA
from sklearn.exceptions import ConvergenceWarning

from privpca import DPPCA, PrivacyLedger, ReproducibleNoiseWarning
from privpca.datasets import load_covtype
from privpca.metrics import subspace_distance

pytestmark = pytest.mark.filterwarnings("ignore::privpca.ReproducibleNoiseWarning")


@pytest.fixture(scope="module")
def covtype():
    """The README's table (Covertype's first 10 columns, raw units), 10⁵ random rows."""
    X = load_covtype(normalize_rows=False).data[:, :10]
    X = X[np.random.default_rng(1).permutation(len(X))[:100_000]]
    return X, PCA(1).fit(X).components_.T


def fit_quietly(X, **kw):
    """Fit and return (estimator, ConvergenceWarning messages)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        est = DPPCA(n_components=1, epsilon=1.0, delta=1e-12, random_state=0, **kw).fit(X)
    return est, [str(w.message) for w in caught if issubclass(w.category, ConvergenceWarning)]


def test_the_readme_example_resolves_every_step(covtype):
    X, ref = covtype
    est, warned = fit_quietly(X)
    assert warned == []
    assert est.n_eigen_failures_ == 0 and est.n_iter_ >= 3
    assert np.isfinite(est.history_["noise_scale"]).all()
    # More subsets than ⌈3τ⌉ (τ = 57.9), of ≥ 16 pairs: τ + 3 noise scales in the fullest bin.
    assert est.n_subsets_ > 3 * 57 and est.batch_size_ // (4 * est.n_subsets_) >= 16
    assert subspace_distance(est.components_.T, ref) < 0.5  # 1.3 before; max is √2
    assert (est.privacy_.epsilon, est.privacy_.delta) == (1.0, 1e-12)


@pytest.mark.parametrize("shuffle", ["auto", False])
def test_steps_that_resolve_nothing_warn_and_fall_back_to_the_held_out_bound(covtype, shuffle):
    """The former constants (⌈3τ⌉ subsets of ≥ 8 pairs): no step releases an eigenvalue. The
    fit warns, and every step sizes its box by the held-out private bound D instead."""
    X, ref = covtype
    ledger = PrivacyLedger()
    est, warned = fit_quietly(X, n_subsets=174, min_subset_size=8, batch_size=6_916,
                              shuffle=shuffle, ledger=ledger)
    assert len(warned) == 1
    assert "released no eigenvalue in 13 of 13 steps" in warned[0]
    assert "174 subset eigenvalues" in warned[0] and "threshold 57.9" in warned[0]
    assert "held-out private bound D" in warned[0] and "at least 22860 records" in warned[0]
    assert est.n_eigen_failures_ == est.n_iter_ == 13
    assert np.isfinite(est.history_["eigenvalue"]).all()  # every step updated
    assert subspace_distance(est.components_.T, ref) < 1.0
    # The record is the one booked: the same events, with the fallback said in its notes.
    assert (est.privacy_.epsilon, est.privacy_.delta) == (1.0, 1e-12)
    assert "13 step(s) before Algorithm 4's first release sized their box" in est.privacy_.notes
    assert len(ledger) == 1 and ledger.epsilon(1e-12) == pytest.approx(1.0)


def test_too_few_rows_to_resolve_warn_and_too_few_to_run_are_refused(covtype):
    """Below one resolvable batch (22 860 records here) the steps get ⌈3τ⌉ subsets of 8 pairs
    and release nothing: warned. Below one such batch (5 568) the fit is refused uncharged."""
    X, _ = covtype
    with pytest.warns(ConvergenceWarning, match=r"in 3 of 3 steps.*about 8 pair differences"
                      r".*every step sized its truncation box by the held-out private bound"
                      r".*steps of at least 22860 records are expected to release"):
        est = DPPCA(epsilon=1.0, delta=1e-12, random_state=0).fit(X[:20_000])
    assert est.batch_size_ == 5_568 and est.n_eigen_failures_ == 3
    ledger = PrivacyLedger()
    with pytest.raises(ValueError, match=r"at least one minibatch of 5568 records"):
        DPPCA(epsilon=1.0, delta=1e-12, holdout_fraction=0.15, random_state=0,
              ledger=ledger).fit(X[:5_000])  # 750 held-out rows: enough for their bounds
    assert len(ledger) == 0


def test_a_papers_fit_that_resolves_nothing_says_its_output_is_the_random_start():
    """No held-out bound to fall back on: the warning says the output is meaningless."""
    X = np.random.default_rng(0).standard_normal((400, 3)) * [2.0, 1.0, 0.5]
    ledger = PrivacyLedger()
    with pytest.warns(ConvergenceWarning, match=r"in 50 of 50 steps.*no step updated: "
                      r"components_ is the random start, independent of the data"):
        est = DPPCA(n_subsets=2, min_subset_size=1, batch_size=8, centering=None,
                    random_state=0, ledger=ledger).fit(X)
    assert np.isnan(est.history_["noise_scale"]).all()
    assert est.privacy_.epsilon == 1.0 and ledger.epsilon(1e-5) == pytest.approx(1.0)


def test_a_minority_of_failed_steps_does_not_warn_a_majority_does():
    """Few subsets for the threshold (τ = 15.9 at ε = 2, δ = 10⁻⁶): steps fail at random; a
    failed step reuses the last released eigenvalue."""
    X = np.random.default_rng(0).standard_normal((40_000, 4)) * [2.0, 1.0, 0.5, 0.5]
    kw = {"epsilon": 2.0, "delta": 1e-6, "centering": None, "n_subsets": 80, "random_state": 0}
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        warnings.simplefilter("ignore", ReproducibleNoiseWarning)
        est = DPPCA(min_subset_size=16, batch_size=5_120, **kw).fit(X)
    assert 0 < 2 * est.n_eigen_failures_ <= est.n_iter_
    with pytest.warns(ConvergenceWarning, match=r"in 10 of 15 steps.*those steps reused the "
                      r"last released eigenvalue\."):
        est = DPPCA(min_subset_size=8, batch_size=2_560, **kw).fit(X)
    assert np.isfinite(est.history_["eigenvalue"][np.argmax(est.history_["eigen_released"]):]).all()
