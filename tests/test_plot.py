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
from privpca.plot import loadings, scree


class Fitted:
    """A stand-in for an estimator that releases only some attributes."""

    def __init__(self, **attributes: object) -> None:
        for key, value in attributes.items():
            setattr(self, key, value)


@pytest.fixture(scope="module")
def est() -> AnalyzeGaussPCA:
    X, _ = make_spiked(6_000, 6, 2, lam=9.0, random_state=0)
    return AnalyzeGaussPCA(3, epsilon=1.0, random_state=0, ledger=PrivacyLedger()).fit(X + 3.0)


def _band(ax) -> PolyCollection:
    bands = [c for c in ax.collections if isinstance(c, PolyCollection)]
    assert len(bands) == 1
    return bands[0]


def test_scree_draws_eigenvalues_and_noise_band(est):
    ax = scree(est)
    k = est.n_components_
    line = ax.lines[0]
    np.testing.assert_array_equal(line.get_xdata(), np.arange(1, k + 1))
    np.testing.assert_allclose(line.get_ydata(), est.explained_variance_)
    # The band covers [i - 1/2, i + 1/2] at explained_variance_[i] ± noise_level_.
    verts = _band(ax).get_paths()[0].vertices
    assert verts[:, 0].min() == pytest.approx(0.5) and verts[:, 0].max() == pytest.approx(k + 0.5)
    lam, noise = est.explained_variance_, est.noise_level_
    assert verts[:, 1].min() == pytest.approx((lam - noise).min())
    assert verts[:, 1].max() == pytest.approx((lam + noise).max())
    # The noise floor is drawn at noise_level_.
    assert any(np.allclose(ln.get_ydata(), noise) for ln in ax.lines[1:])
    title = ax.get_title()
    assert "ε = 1" in title and "δ = 1e-05" in title and "AnalyzeGaussPCA" in title
    assert "\n" not in title  # nothing missing
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert any("noise level" in label for label in labels)


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
