"""privpca.plot: the scree plot with its noise band, and the loadings heatmap."""

from __future__ import annotations

import math

import matplotlib
import numpy as np
import pytest
from matplotlib.collections import PolyCollection
from matplotlib.figure import Figure
from sklearn.exceptions import NotFittedError

from privpca.accounting import PrivacyLedger
from privpca.datasets import make_spiked
from privpca.decomposition.analyze_gauss import AnalyzeGaussPCA
from privpca.exceptions import BudgetExceededError, NonFiniteInputError, RowClippingWarning
from privpca.mechanisms.gaussian import analytic_gaussian_delta
from privpca.pipeline.spectrum import noisy_eigenvalues
from privpca.plot import loadings, scores, scree, variances_read_elsewhere


class Fitted:
    """A stand-in for an estimator that releases only some attributes."""

    def __init__(self, **attributes: object) -> None:
        for key, value in attributes.items():
            setattr(self, key, value)


@pytest.fixture(scope="module")
def est() -> AnalyzeGaussPCA:
    X, _ = make_spiked(6_000, 6, 2, lam=9.0, random_state=0)
    return AnalyzeGaussPCA(3, epsilon=1.0, random_state=0, ledger=PrivacyLedger()).fit(X + 3.0)


@pytest.fixture(scope="module")
def public_bound() -> tuple[AnalyzeGaussPCA, np.ndarray]:
    """A fit with a public bound D: its variances are the eigenvalues the noise level bounds
    (60 000 rows: at 6 000 the top two, 0.034 and 0.033, lie below the noise's edge)."""
    X, _ = make_spiked(60_000, 6, 2, lam=9.0, random_state=0)
    X = X + 3.0
    est = AnalyzeGaussPCA(3, epsilon=1.0, data_norm=4.0, random_state=0,
                          ledger=PrivacyLedger()).fit(X)
    return est, X


def _band(ax) -> PolyCollection:
    bands = [c for c in ax.collections if isinstance(c, PolyCollection)]
    assert len(bands) == 1
    return bands[0]


def test_scree_draws_eigenvalues_and_noise_band(public_bound):
    est, _ = public_bound
    assert not variances_read_elsewhere(est)
    ax = scree(est)
    k = est.n_components_
    line = ax.lines[0]
    np.testing.assert_array_equal(line.get_xdata(), np.arange(1, k + 1))
    np.testing.assert_allclose(line.get_ydata(), est.explained_variance_)
    # The band covers [i - 1/2, i + 1/2] at explained_variance_[i] ± noise_level_.
    verts = _band(ax).get_paths()[0].vertices
    assert verts[:, 0].min() == pytest.approx(0.5) and verts[:, 0].max() == pytest.approx(k + 0.5)
    # The band is Weyl's about the released eigenvalues ℓ, which the debias moved down to λ:
    # it runs from λ − noise up to ℓ + noise.
    lam, noise = est.explained_variance_, est.noise_level_
    sd, p = est.noise_sd_per_entry_, est.n_features_in_
    released = np.where(lam > 0, noisy_eigenvalues(lam, sd, p), 2 * sd * math.sqrt(p))
    assert np.all(released > lam)
    assert verts[:, 1].min() == pytest.approx((lam - noise).min())
    assert verts[:, 1].max() == pytest.approx((released + noise).max())
    # The noise floor is drawn at noise_level_.
    assert any(np.allclose(ln.get_ydata(), noise) for ln in ax.lines[1:])
    title = ax.get_title()
    assert "ε = 1" in title and "δ = 1e-05" in title and "AnalyzeGaussPCA" in title
    assert "\n" not in title  # nothing missing
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert any("noise level" in label for label in labels)
    assert any("95 % noise range" in label and "clipped rows" in label for label in labels)


def _prepared_eigenvalues(est: AnalyzeGaussPCA, X: np.ndarray) -> np.ndarray:
    """The exact top-k eigenvalues of the rows as the fit prepared them: centred on the
    released mean and clipped to length D (the data holder's check, not a release)."""
    Y = X - est.mean_
    norms = np.linalg.norm(Y, axis=1)
    Y = Y * np.minimum(1.0, est.data_norm_ / norms)[:, None]
    k = est.n_components_
    return np.linalg.eigvalsh(Y.T @ Y / (len(Y) - 1))[::-1][:k]


def test_the_band_holds_the_prepared_rows_eigenvalues(public_bound):
    """What the band claims, checked: each eigenvalue of the centred, clipped rows lies in it
    (5 seeds; on a 5 000-row clinical table, 40 of 40 at two public bounds, the largest gap
    0.16 of the band's half-width: docs/REPORT.md)."""
    _, X = public_bound
    for seed in range(5):
        est = AnalyzeGaussPCA(3, epsilon=1.0, data_norm=4.0, random_state=seed,
                              ledger=PrivacyLedger()).fit(X)
        gap = np.abs(est.explained_variance_ - _prepared_eigenvalues(est, X))
        assert np.all(gap <= est.noise_level_), (seed, gap, est.noise_level_)


def test_no_band_where_the_variances_come_from_another_release(est):
    """After choosing a low bound, Analyze Gauss reads its variances off the pilot at a higher
    one: noise_level_ does not describe their noise, so no band (and the title says why)."""
    assert variances_read_elsewhere(est)
    ax = scree(est)
    assert not [c for c in ax.collections if isinstance(c, PolyCollection)]
    assert len(ax.lines) == 2  # the variances and the zero line: no noise floor either
    assert "no noise band" in ax.get_title() and "second release" in ax.get_title()


def test_scree_ratio_on_twin_axis(est):
    ax = scree(est, ratio=True)
    axes = ax.figure.axes
    assert len(axes) == 2 and axes[0] is ax
    twin = axes[1]
    np.testing.assert_allclose(twin.lines[0].get_ydata(),
                               np.cumsum(est.explained_variance_ratio_))
    assert twin.get_ylim()[0] == 0.0 and twin.get_ylim()[1] >= 1.0
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert "cumulative explained variance ratio" in labels


def test_scree_uses_the_given_axes_and_never_pyplot(est, tmp_path):
    import matplotlib.pyplot as plt

    before = plt.get_fignums()
    fig = Figure()
    ax0, ax1 = fig.subplots(1, 2)
    assert scree(est, ax1) is ax1 and not ax0.lines
    loadings(est).figure.savefig(tmp_path / "l.png")
    scree(est).figure.savefig(tmp_path / "s.png")
    assert plt.get_fignums() == before
    assert (tmp_path / "s.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert matplotlib.get_backend()  # headless tests: nothing was shown


def test_scree_degrades_when_attributes_are_missing(est):
    comps = est.components_
    # No explained variance at all: nothing drawn but a note, and the title says why.
    ax = scree(Fitted(components_=comps, noise_level_=0.1), ratio=True)
    assert not ax.lines and not ax.collections
    assert "explained variance not released" in ax.get_title()
    assert "explained variance ratio not released" in ax.get_title()
    assert "no privacy record" in ax.get_title()
    assert any("not released" in t.get_text() for t in ax.texts)
    # NaN explained variance counts as missing.
    ax = scree(Fitted(components_=comps, explained_variance_=np.full(3, np.nan)))
    assert not ax.lines and "explained variance not released" in ax.get_title()
    # Eigenvalues but a NaN noise level: the line, no band, and a note.
    ax = scree(Fitted(components_=comps, explained_variance_=np.array([3.0, 2.0, 1.0]),
                      noise_level_=math.nan, privacy_=est.privacy_))
    assert len(ax.lines[0].get_ydata()) == 3 and not ax.collections
    assert "noise level not available" in ax.get_title() and "ε = 1" in ax.get_title()
    # n_components_ absent: the rows of components_ decide k.
    ax = scree(Fitted(components_=comps[:2], explained_variance_=np.array([3.0, 2.0]),
                      noise_level_=0.5))
    assert len(ax.lines[0].get_xdata()) == 2 and len(ax.get_xticks()) == 2
    with pytest.raises(NotFittedError, match="fit it before plotting"):
        scree(Fitted())
    with pytest.raises(NotFittedError):
        scree(AnalyzeGaussPCA())


def test_loadings_heatmap(est):
    ax = loadings(est)
    image = ax.images[0]
    k, p = est.components_.shape
    np.testing.assert_allclose(image.get_array(), est.components_)
    vmax = np.abs(est.components_).max()
    assert image.norm.vmin == pytest.approx(-vmax) and image.norm.vmax == pytest.approx(vmax)
    assert image.get_cmap().name == "RdBu_r"  # diverging, white at 0
    assert [t.get_text() for t in ax.get_xticklabels()] == [f"x{j}" for j in range(p)]
    assert [t.get_text() for t in ax.get_yticklabels()] == ["PC1", "PC2", "PC3"]
    assert len(ax.texts) == k * p  # the values are written in the cells
    assert len(ax.figure.axes) == 2  # with a colour bar
    assert "ε = 1" in ax.get_title()


def test_loadings_names_and_component_selection(est):
    names = ["income", "age", "height", "rate", "visits", "score"]
    fitted = Fitted(components_=est.components_, feature_names_in_=np.array(names))
    ax = loadings(fitted)
    assert [t.get_text() for t in ax.get_xticklabels()] == names
    ax = loadings(est, feature_names=[n.upper() for n in names], components=2)
    assert ax.images[0].get_array().shape == (2, 6)
    assert ax.get_xticklabels()[0].get_text() == "INCOME"
    ax = loadings(est, components=[2, 0])
    np.testing.assert_allclose(ax.images[0].get_array(), est.components_[[2, 0]])
    assert [t.get_text() for t in ax.get_yticklabels()] == ["PC3", "PC1"]
    wide = Fitted(components_=np.linalg.qr(np.random.default_rng(0).normal(size=(80, 2)))[0].T)
    assert not loadings(wide).texts  # 160 cells: no numbers written


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"feature_names": ["a", "b"]}, "one name per feature"),
        ({"components": 0}, "'components' parameter of loadings"),
        ({"components": 4}, "'components' parameter of loadings"),
        ({"components": [0, 3]}, "indices in \\[0, 2\\]"),
        ({"components": []}, "non-empty"),
    ],
)
def test_loadings_refuses_bad_arguments(est, kwargs, match):
    with pytest.raises(ValueError, match=match):
        loadings(est, **kwargs)


# --------------------------------------------------------------------------- private scores
@pytest.fixture(scope="module")
def fitted() -> tuple[AnalyzeGaussPCA, np.ndarray]:
    X, _ = make_spiked(3_000, 5, 2, lam=9.0, random_state=1)
    X = X + 2.0
    return AnalyzeGaussPCA(2, epsilon=1.0, random_state=0, ledger=PrivacyLedger()).fit(X), X


class Untouchable:
    """An X whose values must not be read: reading it fails the test."""

    shape = (3_000, 5)

    def __array__(self, *args, **kwargs):
        raise AssertionError("X was read")


def test_scores_laplace_record_is_the_closed_form(fitted):
    est, X = fitted
    ledger = PrivacyLedger()
    ax = scores(est, X, epsilon=0.5, bins=12, random_state=0, ledger=ledger)
    record = ax.privacy_record
    assert (record.epsilon, record.delta) == (0.5, 0.0)
    spend = record.spends[0]
    # Replace-one moves one count from one bin to another: L1 sensitivity 2, b = 2/ε.
    assert spend.sensitivity == 2.0 and spend.noise_scale == pytest.approx(2.0 / 0.5)
    assert record.n_samples == X.shape[0]
    assert ledger.records == [("AnalyzeGaussPCA score plot", record)]
    assert ledger.epsilon(1e-5) == pytest.approx(0.5, rel=1e-6)
    assert ax.noisy_counts.shape == (12, 12)
    assert [len(e) for e in ax.bin_edges] == [13, 13]


def test_scores_gaussian_sigma_is_the_analytic_calibration(fitted):
    est, X = fitted
    eps, delta = 0.8, 1e-6
    ax = scores(est, X, epsilon=eps, delta=delta, random_state=0, ledger=PrivacyLedger())
    spend = ax.privacy_record.spends[0]
    sigma = spend.noise_scale
    assert spend.sensitivity == pytest.approx(math.sqrt(2.0))
    # Balle & Wang's closed form: σ is (ε, δ)-DP for Δ₂ = √2, and barely (1 % less is not).
    assert analytic_gaussian_delta(sigma, eps, math.sqrt(2.0)) <= delta * (1 + 1e-6)
    assert analytic_gaussian_delta(0.99 * sigma, eps, math.sqrt(2.0)) > delta
    assert spend.dp_event.noise_multiplier == pytest.approx(sigma / math.sqrt(2.0))


def test_scores_charges_the_ledger_before_reading_x(fitted):
    est, X = fitted
    small = PrivacyLedger(epsilon_budget=0.5, delta_budget=1e-5)
    ax = Figure().add_subplot()
    with pytest.raises(BudgetExceededError):
        scores(est, Untouchable(), epsilon=1.0, random_state=0, ledger=small, ax=ax)
    assert len(small) == 0 and not ax.collections and not ax.images
    assert not hasattr(ax, "privacy_record") and len(ax.figure.axes) == 1  # no colour bar

    ledger = PrivacyLedger()

    booked_when_read: list[int] = []

    class Spy:
        def __array__(self, dtype=None, copy=None):
            booked_when_read.append(len(ledger))
            return X.astype(dtype or X.dtype)

    scores(est, Spy(), epsilon=1.0, random_state=0, ledger=ledger)
    assert booked_when_read and booked_when_read[0] == 1


def test_scores_refuses_nan_and_withdraws_its_spend(fitted):
    est, X = fitted
    ledger = PrivacyLedger()
    bad = X.copy()
    bad[7, 2] = np.nan
    ax = Figure().add_subplot()
    with pytest.raises(NonFiniteInputError):
        scores(est, bad, epsilon=1.0, random_state=0, ledger=ledger, ax=ax)
    assert len(ledger) == 0 and not ax.collections
    with pytest.raises(ValueError, match="fitted on 5"):
        scores(est, X[:, :4], epsilon=1.0, random_state=0, ledger=ledger)
    assert len(ledger) == 0


def test_scores_are_deterministic_with_a_seed_and_sum_to_about_n(fitted):
    est, X = fitted
    a = scores(est, X, epsilon=1.0, random_state=3, ledger=PrivacyLedger()).noisy_counts
    b = scores(est, X, epsilon=1.0, random_state=3, ledger=PrivacyLedger()).noisy_counts
    c = scores(est, X, epsilon=1.0, random_state=4, ledger=PrivacyLedger()).noisy_counts
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)
    n = X.shape[0]
    # 400 cells of Laplace(2) noise (std 2√2 each): the sum's std is 2√2·20 ≈ 57.
    assert abs(a.sum() - n) < 6 * 2 * math.sqrt(2) * 20
    # Every row lands in one cell of the box: with negligible noise the counts sum to n.
    exact = scores(est, X, epsilon=1e9, random_state=0, ledger=PrivacyLedger()).noisy_counts
    assert exact.sum() == pytest.approx(n, abs=1e-3) and exact.min() > -1e-3


def test_scores_drawing_states_the_guarantee_and_the_clipping(fitted):
    est, X = fitted
    ax = scores(est, X, epsilon=1.0, random_state=0, ledger=PrivacyLedger())
    # The default box: 4 released standard deviations of each component's scores.
    r1, r2 = 4 * np.sqrt(est.explained_variance_[:2])
    np.testing.assert_allclose([ax.bin_edges[0][[0, -1]], ax.bin_edges[1][[0, -1]]],
                               [[-r1, r1], [-r2, r2]])
    title = ax.get_title()
    assert "ε = 1, δ = 0" in title and "of its own" in title and "clipped to" in title
    assert f"{r1:.3g}" in title and "Laplace" in title
    mesh = ax.collections[0]
    shown = np.asarray(mesh.get_array()).reshape(20, 20)
    np.testing.assert_array_equal(shown, np.maximum(ax.noisy_counts, 0).T)  # post-processing
    assert ax.get_xlabel().startswith("PC1") and ax.get_ylabel().startswith("PC2")


def test_scores_warns_only_for_a_box_that_is_not_the_fit_s_bound(fitted, recwarn):
    """The fallback box [-D, D]² clips only rows the fit clipped: no warning. A box from
    the released variances, or a stated one, may clip rows the fit kept: the data holder is
    told (a data-dependent warning)."""
    est, X = fitted
    no_variances = Fitted(components_=est.components_, mean_=est.mean_,
                          data_norm_=est.data_norm_, privacy_=est.privacy_)
    ax = scores(no_variances, X, epsilon=1.0, random_state=0, ledger=PrivacyLedger())
    np.testing.assert_allclose(ax.bin_edges[0][[0, -1]], [-est.data_norm_, est.data_norm_])
    assert not [w for w in recwarn if issubclass(w.category, RowClippingWarning)]
    spread = X.copy()
    spread[0] = est.mean_ + 50 * np.sqrt(est.explained_variance_[0]) * est.components_[0]
    with pytest.warns(RowClippingWarning):
        scores(est, spread, epsilon=1.0, random_state=0, ledger=PrivacyLedger())
    with pytest.warns(RowClippingWarning, match="not reported"):
        ax = scores(est, X, epsilon=1.0, bound=0.01, random_state=0, ledger=PrivacyLedger())
    assert "0.01" in ax.get_title()
    box = ((-1.0, 2.0), (-0.5, 0.5))
    ax = scores(est, X, epsilon=1.0, bound=box, bins=3, random_state=0, ledger=PrivacyLedger())
    np.testing.assert_allclose(ax.bin_edges[0], [-1, 0, 1, 2])


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"epsilon": 0.0}, "epsilon"),
        ({"epsilon": 1.0, "delta": 1.0}, "delta"),
        ({"epsilon": 1.0, "bins": 1}, "bins"),
        ({"epsilon": 1.0, "bound": -1.0}, "bound"),
        ({"epsilon": 1.0, "bound": ((1.0, 0.0), (0.0, 1.0))}, "bound"),
    ],
)
def test_scores_refuses_bad_arguments_before_any_charge(fitted, kwargs, match):
    est, X = fitted
    ledger = PrivacyLedger()
    with pytest.raises(ValueError, match=match):
        scores(est, X, ledger=ledger, **kwargs)
    assert len(ledger) == 0


def test_scores_needs_two_components_and_a_public_box(fitted):
    est, X = fitted
    one = Fitted(components_=est.components_[:1], data_norm_=1.0)
    with pytest.raises(ValueError, match="two components"):
        scores(one, X, epsilon=1.0, ledger=PrivacyLedger())
    unbounded = Fitted(components_=est.components_, data_norm_=math.inf)
    ledger = PrivacyLedger()
    with pytest.raises(ValueError, match="bound="):
        scores(unbounded, X, epsilon=1.0, ledger=ledger)
    assert len(ledger) == 0
    ax = scores(unbounded, X, epsilon=1.0, bound=5.0, random_state=0, ledger=ledger)
    assert ax.privacy_record.data_norm == 5.0 and len(ledger) == 1


def test_scores_in_secure_mode_refuse_a_seed_before_the_charge(fitted):
    import privpca

    est, X = fitted
    ledger = PrivacyLedger()
    with privpca.config_context(secure_mode=True):
        with pytest.raises(ValueError, match="Secure mode refuses"):
            scores(est, X, epsilon=1.0, random_state=0, ledger=ledger)
        assert len(ledger) == 0
        ax = scores(est, X, epsilon=1.0, ledger=ledger)
    assert len(ledger) == 1 and "Secure mode" in ax.privacy_record.notes
    assert abs(ax.noisy_counts.sum() - X.shape[0]) < 6 * 2 * math.sqrt(2) * 20


def test_many_features_run_down_the_side_with_every_name():
    """Beyond a dozen features the names are the rows: horizontal and readable."""
    comps = np.linalg.qr(np.random.default_rng(1).normal(size=(25, 3)))[0].T
    names = [f"survey_question_{j}" for j in range(25)]
    ax = loadings(Fitted(components_=comps), feature_names=names)
    np.testing.assert_allclose(ax.images[0].get_array(), comps.T)
    assert [t.get_text() for t in ax.get_yticklabels()] == names
    assert [t.get_text() for t in ax.get_xticklabels()] == ["PC1", "PC2", "PC3"]
    assert all(t.get_rotation() == 0 for t in ax.get_yticklabels())
    assert len(ax.texts) == 75


def test_a_band_far_above_the_eigenvalues_keeps_them_readable():
    """A noise level 10⁴ times the eigenvalues: the axis stays on the eigenvalues and the
    title says how many are resolved: the release's own test, a variance above 0 (a
    heavy-tailed table with scale=True drew a flat line; a resolved 6.9 under a level of 15
    was called unresolved: an outside tester)."""
    est = Fitted(components_=np.eye(3)[:2], explained_variance_=np.array([3.0, 1.0]),
                 noise_level_=3.8e4)
    ax = scree(est)
    low, high = ax.get_ylim()
    assert high < 10 and low < 0 < high
    assert "2 resolved" in ax.get_title()
    est.explained_variance_ = np.array([3.0, 0.0])
    assert "1 resolved" in scree(est).get_title()


def test_a_clipped_score_says_what_a_larger_box_costs(fitted):
    """A score box's clipping fills the edge cells; a larger box coarsens the cells (it adds
    no noise): the warning says so, not the fit's wording."""
    est, X = fitted
    with pytest.warns(RowClippingWarning, match="coarsens the cells") as caught:
        scores(est, X, epsilon=1.0, bound=0.01, random_state=0, ledger=PrivacyLedger())
    assert "adds noise" not in str(caught[0].message)
