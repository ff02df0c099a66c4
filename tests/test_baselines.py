"""Baselines: AnalyzeGaussPCA, ModSuLQPCA, NoisyPowerPCA (private) and SparsePCA (non-private).

Calibrations are checked against their closed forms, noise levels against the spectrum of the
released noise itself, accuracy against the truth on seeded spiked data, and every estimator
against scikit-learn's common checks.
"""

from __future__ import annotations

import math
import warnings

import dp_accounting
import numpy as np
import pytest
import scipy.linalg
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils.estimator_checks import parametrize_with_checks

from conftest import PAPER, PAPER_CENTERING, expected_failed_checks
from privpca import BudgetExceededError, PrivacyLeakWarning, PrivacyLedger, RowClippingWarning
from privpca.accounting import compose_epsilon
from privpca.datasets import make_low_rank_gaussian, make_spiked
from privpca.decomposition import noisy_power
from privpca.decomposition.analyze_gauss import AnalyzeGaussPCA, gram_sensitivity
from privpca.decomposition.mod_sulq import ModSuLQPCA, mod_sulq_beta
from privpca.decomposition.noisy_power import (
    NoisyPowerPCA,
    hardt_price_noise_scale,
    power_sensitivity,
)
from privpca.decomposition.sparse_pca import SparsePCA, truncated_power_method
from privpca.metrics import sin_theta, support_recovery
from privpca.solvers.power import thin_qr

PRIVATE = [AnalyzeGaussPCA, ModSuLQPCA, NoisyPowerPCA]
ALL = [*PRIVATE, SparsePCA]


def _fast(cls, **params):
    """An instance in the papers' setting (uncentred, ‖x‖ ≤ 1) with a short noisy power run
    (the composition solve is cached per T)."""
    if cls is NoisyPowerPCA:
        params.setdefault("n_iter", 5)
    if "centering" in cls().get_params():
        for key, value in PAPER.items():
            params.setdefault(key, value)
    return cls(**params)


# The checks use tiny data sets (tens of rows): the defaults' private bounds need a few hundred
# rows at ε = 1, so the default pipeline runs at a large ε, and the papers' setting as is.
@parametrize_with_checks(
    [AnalyzeGaussPCA(epsilon=1e4), AnalyzeGaussPCA(**PAPER),
     ModSuLQPCA(epsilon=1e4), ModSuLQPCA(**PAPER),
     NoisyPowerPCA(n_iter=3, epsilon=1e4), NoisyPowerPCA(n_iter=3, **PAPER),
     SparsePCA(), SparsePCA(n_nonzero=3)],
    expected_failed_checks=expected_failed_checks,
)
def test_sklearn_compatible(estimator, check):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RowClippingWarning)  # check data exceeds norm 1
        warnings.simplefilter("ignore", ConvergenceWarning)
        check(estimator)


@pytest.fixture(scope="module")
def spiked():
    return make_spiked(20_000, 10, 2, lam=9.0, random_state=0)


def _noise_std(released):
    """The std of the upper-triangle entries of the one matrix released: with X = 0 it is the
    noise alone (relative error about 1/p for p(p+1)/2 independent entries)."""
    (N,) = released
    return float(np.std(N[np.triu_indices(N.shape[0])]))


# --- AnalyzeGaussPCA ----------------------------------------------------------------------------


@pytest.mark.parametrize("neighbouring", ["replace", "add-remove"])
@pytest.mark.parametrize("calibration", ["analytic", "classic"])
def test_analyze_gauss_calibration(neighbouring, calibration, spiked):
    X, _ = spiked
    eps, delta, D = 0.5, 1e-6, 2.0
    est = AnalyzeGaussPCA(
        epsilon=eps,
        delta=delta,
        data_norm=D,
        neighbouring=neighbouring,
        calibration=calibration,
        random_state=0, **PAPER_CENTERING,
    ).fit(X)
    sens = (math.sqrt(2) if neighbouring == "replace" else 1.0) * D**2
    if calibration == "classic":
        sigma = sens * math.sqrt(2 * math.log(1.25 / delta)) / eps
    else:
        sigma = sens * dp_accounting.get_sigma_gaussian(eps, delta)
    assert est.noise_scale_ == pytest.approx(sigma, rel=1e-9)
    rec = est.privacy_
    assert rec.model == "central"
    assert rec.sensitivity == pytest.approx(sens)
    assert rec.noise_scale == pytest.approx(sigma, rel=1e-9)
    assert rec.calibration == calibration
    assert rec.spends[0].dp_event.noise_multiplier == pytest.approx(sigma / sens)
    expected_eps = (
        eps
        if calibration == "analytic"
        else dp_accounting.get_epsilon_gaussian(sigma / sens, delta)
    )
    assert rec.epsilon == pytest.approx(expected_eps, rel=1e-6)
    assert rec.target_epsilon == eps
    if neighbouring == "replace":
        assert rec.neighbouring.startswith("replace one record")
    else:
        assert rec.neighbouring.startswith("add or remove one record")
        eps_replace = dp_accounting.get_epsilon_gaussian(sigma / (math.sqrt(2) * D**2), delta)
        assert f"{eps_replace:.4g}" in rec.notes
        assert eps_replace > rec.epsilon


def test_add_remove_releases_nothing_scaled_by_n():
    """Issue 26, item 2: under add/remove n is private. An all-zero row adds nothing to XᵀX
    (its norm is 0 ≤ D) but increments n: fitted with the same seed, every released value
    must be the same, never off by n/(n + 1) (explained_variance_ and noise_level_ used to be
    divided by n: 1000 against 1001 to six digits)."""
    from privpca.cli import _fit_payload

    X = np.random.default_rng(0).standard_normal((1000, 5)) * 0.2
    X[:, 0] *= 3.0
    X1 = np.vstack([X, np.zeros((1, 5))])
    ests = [AnalyzeGaussPCA(2, epsilon=1.0, neighbouring="add-remove", data_norm=2.0,
                            random_state=0, ledger=PrivacyLedger(), **PAPER_CENTERING).fit(T)
            for T in (X, X1)]
    a, b = ests
    ratio = 1000 / 1001
    released = ["components_", "explained_variance_", "explained_variance_ratio_",
                "noise_level_", "expected_error_", "mean_", "data_norm_", "noise_scale_"]
    for name in released:
        va = np.asarray(getattr(a, name), dtype=float)
        vb = np.asarray(getattr(b, name), dtype=float)
        np.testing.assert_allclose(va, vb, rtol=1e-12, atol=0, err_msg=name)
        nonzero = va != 0
        if nonzero.any():
            assert not np.allclose(vb[nonzero], va[nonzero] * ratio, rtol=1e-6, atol=0), name
    assert not hasattr(a, "singular_values_") and not hasattr(a, "n_samples_")
    assert a.privacy_.n_samples is None
    assert a.privacy_.to_dict() == b.privacy_.to_dict()
    assert "1000" not in a.privacy_.notes and "1001" not in b.privacy_.notes
    # Every field of the CLI's JSON.
    pa, pb = (_fit_payload("analyze-gauss", est, 5, [f"x{i}" for i in range(5)])
              for est in ests)
    assert pa["n_samples"] is None
    assert set(pa) == set(pb)
    for key in pa:
        numeric = isinstance(pa[key], float | list) and key != "feature_names"
        if numeric:
            np.testing.assert_allclose(np.asarray(pa[key], dtype=float),
                                       np.asarray(pb[key], dtype=float), rtol=1e-12,
                                       err_msg=key)
        else:
            assert pa[key] == pb[key], key
    # Replace-one (n public): variances per record, as before.
    rep = AnalyzeGaussPCA(2, epsilon=1.0, data_norm=2.0, random_state=0,
                          ledger=PrivacyLedger(), **PAPER_CENTERING).fit(X)
    assert rep.privacy_.n_samples == 1000
    assert rep.explained_variance_[0] < 1.0
    # Under add/remove the eigenvalues of the noisy Gram matrix itself (about n·λ, not λ).
    assert a.explained_variance_[0] > 100 * rep.explained_variance_[0]


def test_gram_sensitivity_closed_forms():
    assert gram_sensitivity(1.0) == pytest.approx(math.sqrt(2))
    assert gram_sensitivity(3.0, "add-remove") == pytest.approx(9.0)
    # Attained: x = D e₁, y = D e₂ differ by √2·D² in the packed upper triangle of xxᵀ.
    x, y = np.array([3.0, 0.0]), np.array([0.0, 3.0])
    iu = np.triu_indices(2)
    assert np.linalg.norm(np.outer(x, x)[iu] - np.outer(y, y)[iu]) == pytest.approx(
        gram_sensitivity(3.0)
    )


def test_analyze_gauss_classic_warns_above_one(spiked):
    with pytest.warns(PrivacyLeakWarning, match="epsilon < 1"):
        est = AnalyzeGaussPCA(epsilon=2.0, calibration="classic", random_state=0,
            **PAPER).fit(spiked[0])
    assert est.privacy_.epsilon == pytest.approx(
        dp_accounting.get_epsilon_gaussian(est.noise_scale_ / math.sqrt(2), 1e-5), rel=1e-6
    )


def test_analyze_gauss_noise_std_is_sigma(released_matrices):
    p = 60
    est = AnalyzeGaussPCA(n_components=p, epsilon=1.0, random_state=1, **PAPER).fit(np.zeros((10,
        p)))
    std = _noise_std(released_matrices)
    assert std == pytest.approx(est.noise_scale_, rel=0.05)


# --- ModSuLQPCA -----------------------------------------------------------------------------------


def test_mod_sulq_beta_closed_form():
    n, d, eps, delta = 1000, 20, 0.7, 1e-4
    beta = (d + 1) / (n * eps) * math.sqrt(
        2 * math.log((d**2 + d) / (2 * delta * math.sqrt(2 * math.pi)))
    ) + 1 / (n * math.sqrt(eps))
    assert mod_sulq_beta(n, d, eps, delta) == pytest.approx(beta, rel=1e-12)
    with pytest.raises(ValueError, match="beta is undefined"):
        mod_sulq_beta(100, 1, 1.0, 0.45)


def test_mod_sulq_noise_std_is_beta_not_beta_squared(released_matrices):
    # n = 500, d = 50: beta ≈ 0.61, so beta² ≈ 0.37 would be visibly too little noise.
    n, d = 500, 50
    est = ModSuLQPCA(n_components=d, epsilon=1.0, delta=1e-5, random_state=2,
        **PAPER).fit(np.zeros((n, d)))
    beta = mod_sulq_beta(n, d, 1.0, 1e-5)
    assert est.beta_ == pytest.approx(beta) and est.noise_scale_ == pytest.approx(beta)
    assert beta < 0.7 and beta**2 < 0.65 * beta
    std = _noise_std(released_matrices)
    assert std == pytest.approx(beta, rel=0.05)
    assert abs(std - beta**2) > 0.3 * beta


def test_mod_sulq_record_and_gaussian_epsilon(spiked):
    X, _ = spiked
    n, d = X.shape
    est = ModSuLQPCA(epsilon=1.0, delta=1e-5, data_norm=2.0, random_state=0,
        **PAPER_CENTERING).fit(X)
    beta = mod_sulq_beta(n, d, 1.0, 1e-5)
    assert est.noise_scale_ == pytest.approx(4.0 * beta)  # D²·beta
    rec = est.privacy_
    assert (rec.epsilon, rec.delta, rec.model) == (1.0, 1e-5, "central")
    assert rec.neighbouring.startswith("replace one record")
    assert rec.sensitivity == pytest.approx(math.sqrt(2) * 4.0 / n)
    assert rec.noise_scale == pytest.approx(4.0 * beta)
    eps_gauss = dp_accounting.get_epsilon_gaussian(beta * n / math.sqrt(2), 1e-5)
    assert est.certified_epsilon_ == pytest.approx(eps_gauss, rel=1e-9)
    assert est.certified_epsilon_ < 0.5 * rec.epsilon  # the theorem is loose
    assert f"{eps_gauss:.4g}" in rec.notes and "X/data_norm" in rec.notes
    # Rescaling by D leaves the eigenvectors' distribution unchanged: same seed, same answer.
    unit = ModSuLQPCA(epsilon=1.0, delta=1e-5, data_norm=1.0, random_state=0,
        **PAPER_CENTERING).fit(X / 2.0)
    np.testing.assert_allclose(np.abs(est.components_ @ unit.components_.T), np.eye(2), atol=1e-8)


# --- NoisyPowerPCA -------------------------------------------------------------------------------


@pytest.mark.parametrize(("eps", "delta", "T"), [(1.0, 1e-5, 3), (0.5, 1e-6, 8)])
def test_noisy_power_multiplier_composes_to_epsilon(eps, delta, T, spiked):
    X, _ = spiked
    est = NoisyPowerPCA(epsilon=eps, delta=delta, n_iter=T, random_state=0, **PAPER).fit(X[:500])
    m = est.noise_multiplier_
    # Through the project's accounting (PLD):
    composed = compose_epsilon(
        [dp_accounting.SelfComposedDpEvent(dp_accounting.GaussianDpEvent(m), T)], delta
    )
    assert composed == pytest.approx(eps, rel=1e-3)
    assert composed <= eps * (1 + 1e-9)
    # Exact closed form: T Gaussian releases with multiplier m ≡ one with m/√T.
    assert dp_accounting.get_epsilon_gaussian(m / math.sqrt(T), delta) == pytest.approx(
        eps, rel=1e-3
    )
    assert m == pytest.approx(math.sqrt(T) * dp_accounting.get_sigma_gaussian(eps, delta), rel=1e-3)
    rec = est.privacy_
    assert rec.epsilon == pytest.approx(eps, rel=1e-3)
    assert rec.spends[0].count == T
    assert rec.noise_scale == pytest.approx(m * math.sqrt(2))
    assert est.noise_scale_ == pytest.approx(m * rec.sensitivity)
    assert est.paper_noise_scale_ == pytest.approx(math.sqrt(4 * 2 * T * math.log(1 / delta)) / eps)
    assert hardt_price_noise_scale(eps, delta, 2, T) == pytest.approx(est.paper_noise_scale_)


def test_noisy_power_sensitivity():
    # k = 1: ‖(xxᵀ − yyᵀ)q‖ ≤ D²; k ≥ 2: ‖(xxᵀ − yyᵀ)Q‖_F ≤ √2·D²; both attained.
    assert power_sensitivity(2.0, 1) == pytest.approx(4.0)
    assert power_sensitivity(2.0, 3) == pytest.approx(4.0 * math.sqrt(2))
    D, p = 2.0, 5
    x, y = D * np.eye(p)[0], D * np.eye(p)[1]
    M = np.outer(x, x) - np.outer(y, y)
    assert np.linalg.norm(M @ np.eye(p)[:, :1]) == pytest.approx(power_sensitivity(D, 1))
    assert np.linalg.norm(M @ np.eye(p)[:, :2]) == pytest.approx(power_sensitivity(D, 2))
    # And random pairs of norm ≤ D never exceed them.
    rng = np.random.default_rng(0)
    for _ in range(200):
        x, y = rng.standard_normal((2, p))
        x *= D / np.linalg.norm(x)
        y *= D * rng.uniform() / np.linalg.norm(y)
        M = np.outer(x, x) - np.outer(y, y)
        Q = thin_qr(rng.standard_normal((p, 3)))
        assert np.linalg.norm(M @ Q[:, :1]) <= power_sensitivity(D, 1) + 1e-12
        assert np.linalg.norm(M @ Q) <= power_sensitivity(D, 3) + 1e-12


def test_noisy_power_k1_uses_d_squared(spiked):
    est = NoisyPowerPCA(n_components=1, epsilon=1.0, n_iter=3, random_state=0,
        **PAPER).fit(spiked[0])
    assert est.privacy_.sensitivity == 1.0
    assert est.noise_scale_ == pytest.approx(est.noise_multiplier_)


def test_noisy_power_noise_scale_reaches_every_iteration(monkeypatch, spiked):
    calls = []
    original = noisy_power.power_step

    def spy(A, Q, **kwargs):
        calls.append(kwargs["noise_scale"])
        return original(A, Q, **kwargs)

    monkeypatch.setattr(noisy_power, "power_step", spy)
    est = NoisyPowerPCA(n_iter=3, epsilon=1.0, random_state=0, **PAPER).fit(spiked[0][:200])
    assert calls == [est.noise_scale_] * 3


def test_noisy_power_history_solvers_and_no_full_eigh(monkeypatch, spiked):
    X, _ = spiked

    def forbidden(*args, **kwargs):
        raise AssertionError("NoisyPowerPCA must not compute an eigendecomposition")

    monkeypatch.setattr(np.linalg, "eigh", forbidden)
    monkeypatch.setattr(scipy.linalg, "eigh", forbidden)
    fits = {
        solver: NoisyPowerPCA(n_iter=3, solver=solver, keep_history=True, random_state=5,
            **PAPER).fit(X)
        for solver in ("gram", "data")
    }
    a, b = fits["gram"], fits["data"]
    assert (a.solver_, b.solver_) == ("gram", "data")
    np.testing.assert_allclose(a.components_, b.components_, atol=1e-8)
    assert a.n_iter_ == 3 and a.history_.shape == (3, 2, 10)
    # The last iterate is the output, up to the sign convention of components_.
    np.testing.assert_allclose(np.abs(a.history_[-1] @ a.components_.T), np.eye(2), atol=1e-12)
    assert NoisyPowerPCA(n_iter=3, random_state=5, **PAPER).fit(X).history_ is None
    # "auto": a tall X with few features forms the Gram matrix; a wide one does not.
    assert NoisyPowerPCA(n_iter=3, random_state=0, **PAPER).fit(X).solver_ == "gram"
    wide = np.random.default_rng(0).standard_normal((20, 400)) * 0.01
    assert NoisyPowerPCA(n_iter=3, random_state=0, **PAPER).fit(wide).solver_ == "data"


# --- all private estimators ------------------------------------------------------------------


@pytest.mark.parametrize("cls", PRIVATE)
def test_more_privacy_more_error_and_more_samples_less(cls):
    X, V = make_spiked(40_000, 10, 2, lam=9.0, random_state=3)

    def err(eps, n):
        return np.mean(
            [
                sin_theta(_fast(cls, epsilon=eps, random_state=s).fit(X[:n]).components_.T, V)
                for s in range(4)
            ]
        )

    assert err(0.3, 40_000) > 1.5 * err(3.0, 40_000)
    assert err(1.0, 2_000) > 1.5 * err(1.0, 40_000)


@pytest.mark.parametrize("cls", PRIVATE)
def test_reasonable_accuracy_at_moderate_privacy(cls, spiked):
    X, V = spiked
    errors = [
        sin_theta(_fast(cls, epsilon=2.0, random_state=s).fit(X).components_.T, V) for s in range(3)
    ]
    assert np.mean(errors) < (0.6 if cls is ModSuLQPCA else 0.25)


@pytest.mark.parametrize("cls", ALL)
def test_clipping_warning_counts_and_input_untouched(cls):
    rng = np.random.default_rng(0)
    X = rng.standard_normal((300, 6)) * 0.05
    X[:9] *= 100  # nine rows far above norm 1
    original = X.copy()
    if cls is SparsePCA:  # non-private: nothing to clip, and centring must not touch X
        est = cls(n_components=1, n_nonzero=3, center=True, random_state=0).fit(X)
        assert "n_clipped" not in est.privacy_.to_dict()
    else:
        with pytest.warns(RowClippingWarning, match="exceeded the public data_norm"):
            est = _fast(cls, n_components=1, random_state=0).fit(X)
        assert "n_clipped" not in est.privacy_.to_dict()  # a count of the data
    np.testing.assert_array_equal(X, original)


@pytest.mark.parametrize("cls", ALL)
def test_seeded_fits_are_reproducible(cls, spiked):
    X = spiked[0][:3000]
    a = _fast(cls, random_state=4).fit(X).components_
    b = _fast(cls, random_state=4).fit(X).components_
    np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("cls", PRIVATE)
def test_budgeted_ledger_refuses_before_release(cls, spiked):
    X = spiked[0][:2000]
    ledger = PrivacyLedger(epsilon_budget=0.5, delta_budget=1e-4)
    est = _fast(cls, epsilon=1.0, ledger=ledger, random_state=0)
    with pytest.raises(BudgetExceededError):
        est.fit(X)
    assert not hasattr(est, "components_") and len(ledger) == 0
    ok = PrivacyLedger(epsilon_budget=5.0, delta_budget=1e-4)
    _fast(cls, epsilon=1.0, ledger=ok, random_state=0).fit(X)
    assert len(ok) == 1 and ok.records[0][0] == cls.__name__


@pytest.mark.parametrize("cls", PRIVATE)
@pytest.mark.parametrize(
    ("params", "match"),
    [
        ({"epsilon": 0}, r"The 'epsilon' parameter of {} must be a float in the range \[1e-09"),
        ({"epsilon": -1}, r"Got -1 instead"),
        ({"delta": 1.0}, r"The 'delta' parameter of {} must be a float in the range \(0.0, 0.1\)"),
        ({"data_norm": 0.0}, r"The 'data_norm' parameter of {}"),
        ({"n_components": 7}, r"n_components=7 must be between 1 and n_features=6"),
        ({"n_components": 0}, r"The 'n_components' parameter of {}"),
    ],
)
def test_bad_common_parameters(cls, params, match):
    with pytest.raises(ValueError, match=match.format(cls.__name__)):
        _fast(cls, **params).fit(np.full((20, 6), 0.1))


@pytest.mark.parametrize(
    ("est", "match"),
    [
        (
            AnalyzeGaussPCA(neighbouring="add"),
            r"'neighbouring' parameter of AnalyzeGaussPCA "
            r"must be a str among \{'(add-remove|replace)', '(add-remove|replace)'\}",
        ),
        (AnalyzeGaussPCA(calibration="exact"), r"'calibration' parameter of AnalyzeGaussPCA"),
        (
            NoisyPowerPCA(n_iter=0),
            r"'n_iter' parameter of NoisyPowerPCA must be an int in the "
            r"range \[1, inf\)",
        ),
        (NoisyPowerPCA(n_iter=2.5), r"'n_iter' parameter"),
        (NoisyPowerPCA(solver="eigh"), r"'solver' parameter of NoisyPowerPCA"),
        (NoisyPowerPCA(keep_history="yes"), r"'keep_history' parameter of NoisyPowerPCA"),
        (
            SparsePCA(n_nonzero=1),
            r"'n_nonzero' parameter of SparsePCA must be an int in the "
            r"range \[2, inf\)",
        ),
        (SparsePCA(init="pca"), r"'init' parameter of SparsePCA"),
        (SparsePCA(n_init=0), r"'n_init' parameter of SparsePCA"),
        (SparsePCA(lam=-1.0), r"'lam' parameter of SparsePCA"),
        (SparsePCA(lam="big"), r"'lam' parameter of SparsePCA"),
        (SparsePCA(center="no"), r"'center' parameter of SparsePCA must be a bool"),
        (SparsePCA(max_iter=0), r"'max_iter' parameter of SparsePCA"),
        (SparsePCA(tol=0.0), r"'tol' parameter of SparsePCA"),
        (SparsePCA(fps_max_iter=0), r"'fps_max_iter' parameter of SparsePCA"),
        (SparsePCA(fps_tol=-1.0), r"'fps_tol' parameter of SparsePCA"),
    ],
)
def test_bad_specific_parameters(est, match):
    with pytest.raises(ValueError, match=match):
        est.fit(np.full((20, 6), 0.1))


@pytest.mark.parametrize("cls", PRIVATE)
def test_nan_rows_are_refused_with_a_count(cls):
    X = np.full((5, 3), 0.1)
    X[2, 1] = np.nan
    with pytest.raises(ValueError, match=r"contains NaN or infinity\. "):
        _fast(cls, n_components=1).fit(X)


# --- SparsePCA -----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def sparse_problem():
    # p = 60, 6 relevant rows, k = 2: the spike does not shrink with p.
    return make_low_rank_gaussian(4000, 60, 2, n_nonzero=6, random_state=7)


@pytest.mark.parametrize(("init", "n_init"), [("fps", 1), ("random", 1), ("random", 5)])
def test_sparse_pca_recovers_the_support(init, n_init, sparse_problem):
    X, V = sparse_problem
    truth = np.flatnonzero(np.linalg.norm(V, axis=1))
    est = SparsePCA(n_components=2, n_nonzero=6, init=init, n_init=n_init, random_state=0).fit(X)
    rec = support_recovery(est.components_.T, truth)
    assert rec.true_positive_rate == 1.0 and rec.false_positive_rate == 0.0
    np.testing.assert_array_equal(est.support_, truth)
    assert sin_theta(est.components_.T, V) < 0.05
    np.testing.assert_allclose(est.components_ @ est.components_.T, np.eye(2), atol=1e-10)
    assert est.converged_ and 1 <= est.n_iter_ <= 100
    S = X.T @ X / X.shape[0]
    np.testing.assert_allclose(
        est.explained_variance_, np.einsum("ij,jk,ik->i", est.components_, S, est.components_)
    )
    assert est.explained_variance_[0] >= est.explained_variance_[1]
    assert (est.lam_ is not None) == (init == "fps")


def test_sparse_pca_privacy_record_is_honest(sparse_problem):
    X, _ = sparse_problem
    ledger = PrivacyLedger()
    est = SparsePCA(n_nonzero=6, ledger=ledger, random_state=0).fit(X)
    rec = est.privacy_
    assert rec.epsilon == math.inf and rec.delta == 0.0
    assert rec.model == "non-private" and rec.spends == ()
    assert "not differentially private" in rec.neighbouring
    assert len(ledger) == 1 and ledger.epsilon(1e-5) == math.inf
    assert rec.to_dict()["epsilon"] == "inf"


def test_sparse_pca_infinite_spend_refused_by_budgeted_ledger(sparse_problem):
    X, _ = sparse_problem
    ledger = PrivacyLedger(epsilon_budget=100.0, delta_budget=1e-5)
    est = SparsePCA(n_nonzero=6, ledger=ledger, random_state=0)
    with pytest.raises(BudgetExceededError, match="epsilon=inf"):
        est.fit(X)
    assert not hasattr(est, "components_") and len(ledger) == 0


def test_sparse_pca_restarts_keep_the_largest_variance(sparse_problem):
    X, _ = sparse_problem
    single = SparsePCA(n_nonzero=4, random_state=0).fit(X)  # s < true support: local optima
    multi = SparsePCA(n_nonzero=4, n_init=6, random_state=0).fit(X)
    assert multi.explained_variance_.sum() >= single.explained_variance_.sum() - 1e-12
    S = X.T @ X / X.shape[0]
    rng = np.random.default_rng(11)
    for _ in range(5):  # no random start does better than the kept solution
        Q0 = np.linalg.qr(rng.standard_normal((60, 2)))[0]
        Q, _, _ = truncated_power_method(S, Q0, 4)
        assert np.trace(Q.T @ S @ Q) <= multi.explained_variance_.sum() + 1e-9


def test_truncated_power_k1_is_yuan_zhang_tpower(sparse_problem):
    X, _ = sparse_problem
    S = X.T @ X / X.shape[0]
    x0 = np.random.default_rng(2).standard_normal(60)
    q, n_iter, converged = truncated_power_method(S, x0[:, None], 5, max_iter=30, tol=1e-300)
    x = x0
    for _ in range(30):  # Yuan & Zhang: x ← S x, keep the s largest |x_i|, normalise
        y = S @ x
        y[np.argsort(-np.abs(y))[5:]] = 0.0
        x = y / np.linalg.norm(y)
    assert n_iter == 30 and not converged
    np.testing.assert_allclose(q[:, 0], x, atol=1e-12)


def test_sparse_pca_without_truncation_is_dense_pca():
    X, _ = make_spiked(3000, 12, 2, lam=9.0, random_state=1)
    est = SparsePCA(n_components=2, n_nonzero=50, tol=1e-10, max_iter=1000, lam=0.0).fit(X)
    exact = np.linalg.eigh(X.T @ X)[1][:, -2:]
    assert sin_theta(est.components_.T, exact) < 1e-6
    assert est.support_.size == 12


def test_sparse_pca_auto_lambda_and_centering(sparse_problem):
    X, _ = sparse_problem
    n, p = X.shape
    shifted = X + 3.0  # a large mean: only centring recovers the same subspace
    est = SparsePCA(n_nonzero=6, center=True, random_state=0).fit(shifted)
    base = SparsePCA(n_nonzero=6, random_state=0).fit(X)
    np.testing.assert_allclose(est.mean_, shifted.mean(axis=0))
    assert sin_theta(est.components_.T, base.components_.T) < 0.05
    Xc = shifted - shifted.mean(axis=0)
    S = Xc.T @ Xc / n
    assert est.lam_ == pytest.approx(np.max(np.diag(S)) * math.sqrt(math.log(p) / n))
    np.testing.assert_allclose(
        est.transform(shifted[:3]), (shifted[:3] - est.mean_) @ est.components_.T
    )
    np.testing.assert_allclose(
        est.inverse_transform(est.transform(shifted[:3])),
        est.transform(shifted[:3]) @ est.components_ + est.mean_,
    )
    with warnings.catch_warnings():  # the mean dominates: slow convergence, irrelevant here
        warnings.simplefilter("ignore", ConvergenceWarning)
        uncentred = SparsePCA(n_nonzero=6, max_iter=5, random_state=0).fit(shifted)
    np.testing.assert_array_equal(uncentred.mean_, np.zeros(p))


def test_sparse_pca_convergence_warning(sparse_problem):
    with pytest.warns(ConvergenceWarning, match="did not converge"):
        est = SparsePCA(n_nonzero=6, max_iter=1, random_state=0).fit(sparse_problem[0])
    assert not est.converged_ and est.n_iter_ == 1


# --- statistical (slow) ------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("cls", PRIVATE)
def test_error_falls_with_n(cls):
    """Davis–Kahan regime: the error falls as n grows at fixed ε (central noise ∝ 1/n)."""
    ns = [5_000, 20_000, 80_000]
    X, V = make_spiked(max(ns), 10, 2, lam=9.0, random_state=21)
    means = [
        np.mean(
            [
                sin_theta(cls(epsilon=1.0, random_state=r).fit(X[:n]).components_.T, V)
                for r in range(8)
            ]
        )
        for n in ns
    ]
    assert means[0] > means[1] > means[2], means
