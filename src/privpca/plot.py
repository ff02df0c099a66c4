"""Pictures of a fitted private PCA: a scree plot with the noise band, the loadings, and a
private score plot.

:func:`scree` and :func:`loadings` read a fitted estimator's released attributes only
(``explained_variance_``, ``noise_level_``, ``components_``, ``privacy_``, ...): plotting is
post-processing and costs no privacy. :func:`scores` is different: it reads the rows again, so
it is a release of its own, with its own (ε, δ) charged on a ledger. The functions use
matplotlib's object API only: they never touch pyplot's global state nor call
``plt.show()``, so they work headless (Agg) and in notebooks alike. Without an ``ax``, a new
:class:`matplotlib.figure.Figure` is made; save it with ``ax.figure.savefig(path)``.

Estimators differ in what they release: a stochastic or sampling estimator may have no
``explained_variance_`` or ``noise_level_`` (absent or NaN). The plots draw what exists and say
what is missing in the title, so a picture never suggests an accuracy that was not computed.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
from matplotlib.axes import Axes
from matplotlib.colors import Normalize
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from numpy.typing import NDArray
from sklearn.exceptions import NotFittedError

from privpca._score_release import SCORES_ADD_REMOVE_SENSITIVITY as SCORES_ADD_REMOVE_SENSITIVITY
from privpca._score_release import SCORES_L1_SENSITIVITY as SCORES_L1_SENSITIVITY
from privpca._score_release import SCORES_L2_SENSITIVITY as SCORES_L2_SENSITIVITY
from privpca._score_release import SCORES_NEIGHBOURING as SCORES_NEIGHBOURING
from privpca._score_release import Box, Edges, release_scores
from privpca._validation import check_delta, check_epsilon, check_in_range
from privpca.accounting.record import PrivacyRecord
from privpca.pipeline.spectrum import HIGH_PILOT_NOTE, noisy_eigenvalues

__all__ = ["loadings", "scores", "scree", "variances_read_elsewhere"]

#: Diverging colormap of :func:`loadings` (blue negative, red positive, white at 0).
LOADINGS_CMAP = "RdBu_r"


def _new_axes(figsize: tuple[float, float]) -> Axes:
    fig = Figure(figsize=figsize, dpi=110, layout="constrained")
    ax: Axes = fig.add_subplot()
    return ax


def _components(est: Any) -> NDArray[np.float64]:
    comps = getattr(est, "components_", None)
    if comps is None:
        raise NotFittedError(
            f"This {type(est).__name__} instance has no components_: fit it before plotting."
        )
    comps = np.atleast_2d(np.asarray(comps, dtype=np.float64))
    return comps


def _n_components(est: Any, comps: NDArray[np.float64]) -> int:
    k = getattr(est, "n_components_", None)
    if isinstance(k, (int, np.integer)) and 0 < int(k) <= comps.shape[0]:
        return int(k)
    return int(comps.shape[0])


def _vector(est: Any, name: str, k: int) -> NDArray[np.float64] | None:
    """``est.name`` as a float vector of length ``k`` (None when absent or all NaN)."""
    value = getattr(est, name, None)
    if value is None:
        return None
    try:
        arr = np.asarray(value, dtype=np.float64).ravel()
    except (TypeError, ValueError):
        return None
    if arr.size < k or not np.any(np.isfinite(arr[:k])):
        return None
    return arr[:k]


def _scalar(est: Any, name: str) -> float | None:
    """``est.name`` as a finite float (None when absent, NaN or infinite)."""
    value = getattr(est, name, None)
    try:
        out = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None
    return out if math.isfinite(out) else None


def _privacy_label(est: Any) -> str:
    record = getattr(est, "privacy_", None)
    eps = getattr(record, "epsilon", None)
    delta = getattr(record, "delta", None)
    if eps is None:
        return "no privacy record"
    try:
        eps_f, delta_f = float(eps), float(delta if delta is not None else 0.0)
    except (TypeError, ValueError):
        return "no privacy record"
    if math.isinf(eps_f):
        return "not private"
    return f"(ε = {eps_f:.3g}, δ = {delta_f:.3g})-DP"


def variances_read_elsewhere(est: Any) -> bool:
    """Whether ``est``'s explained variances were read off another noisy release than the one
    its ``noise_level_`` describes (its record's notes say so): then no band around them is
    true, and :func:`scree` draws none. Measured on a 5 000-row table where the low bound was
    chosen (19 fits in 20): the band covered the prepared rows' eigenvalues in 0 of 19."""
    return HIGH_PILOT_NOTE in str(getattr(getattr(est, "privacy_", None), "notes", ""))


def _draw_eigenvalues(ax: Axes, values: NDArray[np.float64] | None, noise: float | None,
                      elsewhere: bool = False, entry: tuple[float | None, int] = (None, 0),
                      ) -> list[str]:
    """The private eigenvalues with their noise band on ``ax``; returns what is missing.
    ``elsewhere``: the values are not the eigenvalues ``noise`` bounds (no band, said).
    ``entry``: the debias's σ and p (``noise_sd_per_entry_``): the band's top is then Weyl's
    about the released eigenvalues ℓ (:func:`~privpca.pipeline.spectrum.noisy_eigenvalues`)."""
    if values is None:
        ax.text(0.5, 0.5, "explained variance\nnot released by this estimator",
                transform=ax.transAxes, ha="center", va="center", color="0.4")
        return ["explained variance not released"]
    k = values.size
    ax.plot(np.arange(1, k + 1), values, "o-", color="C0",
            label="private eigenvalue (explained variance)")
    ax.axhline(0.0, color="0.7", linewidth=0.8)
    if noise is None:
        return ["noise level not available"]
    if elsewhere:
        return ["no noise band: these variances come from a second release\n(at a higher "
                "bound), whose noise the noise level does not measure"]
    # One shaded patch: component i's band spans [i − ½, i + ½], values[i] − noise to ℓᵢ + noise.
    sd, p = entry
    upper = (values if sd is None else noisy_eigenvalues(values, sd, p)) + noise
    edges = np.arange(k + 1) + 0.5
    ax.fill_between(
        edges, np.append(values - noise, values[-1] - noise),
        np.append(upper, upper[-1]), step="post", alpha=0.25,
        color="C0", linewidth=0, zorder=1,
        label=f"± {noise:.3g}: 95 % noise range (clipped rows)",
    )
    ax.axhline(noise, color="0.4", linestyle=":", linewidth=1,
               label="noise level (unresolved below)")
    top = float(np.nanmax(np.abs(values))) if np.isfinite(values).any() else 0.0
    if 0.0 < top and noise > 2.0 * top:
        # A band many times the eigenvalues would flatten them into one line: keep the axis
        # on the eigenvalues and say in the title that the band runs beyond it.
        ax.set_ylim(min(0.0, float(np.nanmin(values))) - 0.1 * top, 1.3 * top)
        n = int(np.count_nonzero(values > 0))  # the release's own test, on the noisy ℓ
        return [f"noise level {noise:.3g} is above every eigenvalue drawn ({n} resolved: "
                "their noisy ℓ pass it; the band runs beyond the axis)"]
    return []


def _draw_cumulative_ratio(ax: Axes, ratios: NDArray[np.float64]) -> Line2D:
    """The cumulative explained variance ratio on a twin y axis of ``ax``, from 0 to 1."""
    twin = ax.twinx()
    cumulative = np.cumsum(np.nan_to_num(ratios, nan=0.0))
    (line,) = twin.plot(np.arange(1, ratios.size + 1), cumulative, "s--", color="C1",
                        label="cumulative explained variance ratio")
    twin.set_ylim(0.0, max(1.05, float(np.max(cumulative)) * 1.05))
    twin.set_ylabel("cumulative ratio (private)")
    return line


def scree(est: Any, ax: Axes | None = None, *, ratio: bool = False) -> Axes:
    """Scree plot: the private eigenvalues per component, with the noise band.

    Draws ``explained_variance_`` against the component number (1, …, k) as a line with
    markers, and around it a shaded band from ``explained_variance_ − noise_level_`` up to
    ``ℓ + noise_level_``, ℓ the released eigenvalue before the noise debias. Where the
    estimator states it, ``noise_level_`` bounds (with probability ≥ 95 %) the spectral norm of
    the noise in explained-variance units, so by Weyl's inequality each eigenvalue of the
    non-private PCA of the same prepared rows (centred on ``mean_`` and clipped to length
    ``data_norm_``) lies in the band; eigenvalues whose bands overlap are not resolved by this
    fit, and an eigenvalue below ``noise_level_`` (the dotted line) is indistinguishable from
    zero. Clipping lowers eigenvalues below those of the raw table, by an amount the band does
    not show: the raw table's eigenvalues may lie above it. Where the variances were read off
    another release than the one ``noise_level_`` describes (:func:`variances_read_elsewhere`),
    no band is drawn and the title says why. Post-processing: costs no privacy.

    Parameters
    ----------
    est : fitted privpca estimator
        Anything with ``components_``; ``explained_variance_``, ``noise_level_``,
        ``explained_variance_ratio_``, ``n_components_`` and ``privacy_`` are used when present
        and finite. What is missing (absent or NaN) is not drawn, and the title says so.
    ax : matplotlib.axes.Axes or None, default=None
        Where to draw; ``None`` makes a new :class:`~matplotlib.figure.Figure`.
    ratio : bool, default=False
        Also draw the cumulative ``explained_variance_ratio_`` (private) on a twin y axis,
        from 0 to 1 (the twin axes is ``ax.figure.axes[-1]``).

    Returns
    -------
    matplotlib.axes.Axes
        The axes with the eigenvalues (not the twin).

    Raises
    ------
    sklearn.exceptions.NotFittedError
        If ``est`` has no ``components_``.

    See Also
    --------
    loadings : the components themselves, feature by feature.

    Examples
    --------
    >>> from privpca.accounting import PrivacyLedger
    >>> from privpca.datasets import make_spiked
    >>> from privpca.decomposition.analyze_gauss import AnalyzeGaussPCA
    >>> from privpca.plot import scree
    >>> X, _ = make_spiked(4_000, 6, 2, lam=9.0, random_state=0)
    >>> est = AnalyzeGaussPCA(3, epsilon=1.0, random_state=0, ledger=PrivacyLedger()).fit(X)
    >>> ax = scree(est, ratio=True)
    >>> len(ax.lines[0].get_xdata())  # one point per component
    3
    >>> ax.get_title().splitlines()[0]
    'AnalyzeGaussPCA: scree plot, (ε = 1, δ = 1e-05)-DP'
    >>> ax.figure.savefig("/dev/null", format="png")  # or a file name
    """
    comps = _components(est)
    k = _n_components(est, comps)
    if ax is None:
        ax = _new_axes((6.4, 4.8))
    x = np.arange(1, k + 1)
    missing = _draw_eigenvalues(ax, _vector(est, "explained_variance_", k),
                                _scalar(est, "noise_level_"), variances_read_elsewhere(est),
                                (_scalar(est, "noise_sd_per_entry_"), comps.shape[1]))
    ax.set_xlim(0.5, k + 0.5)
    ax.set_xticks(x)
    ax.set_xlabel("component")
    ax.set_ylabel("explained variance (private)")
    ax.grid(True, axis="y", alpha=0.3)
    twin_lines: list[Line2D] = []
    if ratio:
        ratios = _vector(est, "explained_variance_ratio_", k)
        if ratios is not None:
            twin_lines.append(_draw_cumulative_ratio(ax, ratios))
        else:
            missing.append("explained variance ratio not released")
    _legend_below(ax, twin_lines)
    _set_title(ax, est, "scree plot", missing)
    return ax


def _legend_below(ax: Axes, twin_lines: Sequence[Line2D]) -> None:
    """One legend for the curves of ``ax`` and ``twin_lines`` (drawn on its twin), below the
    axes: never over the curves of either y axis. No legend without a labelled curve."""
    handles, labels = ax.get_legend_handles_labels()
    handles += twin_lines
    labels += [str(line.get_label()) for line in twin_lines]
    if handles:
        ax.legend(handles, labels, fontsize="small", loc="upper center",
                  bbox_to_anchor=(0.5, -0.14), ncol=2, frameon=False)


def _set_title(ax: Axes, est: Any, what: str, missing: Sequence[str] = ()) -> None:
    """Title ``ax`` with the estimator, what the plot shows and its guarantee, then a line on
    what is ``missing`` (not drawn)."""
    title = f"{type(est).__name__}: {what}, {_privacy_label(est)}"
    if missing:
        title += "\n" + "; ".join(missing)
    ax.set_title(title, fontsize="medium")


def _feature_names(est: Any, n_features: int, feature_names: Sequence[str] | None) -> list[str]:
    if feature_names is None:
        feature_names = getattr(est, "feature_names_in_", None)
        if feature_names is None:
            return [f"x{j}" for j in range(n_features)]
    names = [str(name) for name in feature_names]
    if len(names) != n_features:
        raise ValueError(
            f"The 'feature_names' parameter of loadings must have one name per feature "
            f"({n_features}). Got {len(names)} names instead."
        )
    return names


def _component_indices(components: int | Sequence[int] | None, k: int) -> list[int]:
    if components is None:
        return list(range(k))
    if isinstance(components, (int, np.integer)) and not isinstance(components, bool):
        if not 1 <= int(components) <= k:
            raise ValueError(
                f"The 'components' parameter of loadings must be an int in [1, {k}] (the "
                f"first ones) or a sequence of indices in [0, {k - 1}]. Got {components!r} "
                "instead."
            )
        return list(range(int(components)))
    indices = [int(i) for i in components]  # type: ignore[union-attr]
    bad = [i for i in indices if not 0 <= i < k]
    if not indices or bad:
        raise ValueError(
            f"The 'components' parameter of loadings must be an int in [1, {k}] (the first "
            f"ones) or a non-empty sequence of indices in [0, {k - 1}]. Got {components!r} "
            "instead."
        )
    return indices


#: Above this many features :func:`loadings` puts the features down the side.
TALL_LOADINGS = 12


def loadings(est: Any, ax: Axes | None = None, *, feature_names: Sequence[str] | None = None,
             components: int | Sequence[int] | None = None) -> Axes:
    """Heatmap of the loadings ``components_``: one row per component, one column per feature
    (beyond :data:`TALL_LOADINGS` features, one row per feature, so that every name stays
    horizontal and readable).

    Colours use a diverging colormap centred at 0 (blue negative, red positive, white 0) with
    the same scale on both sides, so the strength of a loading reads the same whatever its
    sign; the values are written in the cells when there are at most 120 of them. A
    component's overall sign is arbitrary (as in any PCA): compare patterns, not signs.
    Post-processing: costs no privacy.

    Parameters
    ----------
    est : fitted privpca estimator
        Anything with ``components_`` of shape (k, n_features).
    ax : matplotlib.axes.Axes or None, default=None
        Where to draw; ``None`` makes a new :class:`~matplotlib.figure.Figure`. A colour bar
        is added next to ``ax``.
    feature_names : sequence of str or None, default=None
        Column labels; ``None`` uses ``est.feature_names_in_`` (set when fitted on a
        DataFrame) or ``x0, x1, …`` (scikit-learn's names).
    components : int, sequence of int or None, default=None
        Which rows to draw: ``None`` all, an int m the first m, a sequence the given 0-based
        indices. They are labelled PC1, PC2, … (1-based).

    Returns
    -------
    matplotlib.axes.Axes
        The axes with the heatmap (its image is ``ax.images[0]``).

    Raises
    ------
    sklearn.exceptions.NotFittedError
        If ``est`` has no ``components_``.
    ValueError
        If ``feature_names`` has the wrong length or ``components`` is out of range.

    See Also
    --------
    scree : the eigenvalues with the noise band.

    Examples
    --------
    >>> from privpca.accounting import PrivacyLedger
    >>> from privpca.datasets import make_spiked
    >>> from privpca.decomposition.analyze_gauss import AnalyzeGaussPCA
    >>> from privpca.plot import loadings
    >>> X, _ = make_spiked(4_000, 5, 2, lam=9.0, random_state=0)
    >>> est = AnalyzeGaussPCA(2, epsilon=1.0, random_state=0, ledger=PrivacyLedger()).fit(X)
    >>> ax = loadings(est, feature_names=["a", "b", "c", "d", "e"])
    >>> ax.images[0].get_array().shape  # components × features
    (2, 5)
    >>> [t.get_text() for t in ax.get_xticklabels()]
    ['a', 'b', 'c', 'd', 'e']
    >>> ax.images[0].norm.vmin == -ax.images[0].norm.vmax  # centred at 0
    True
    """
    comps = _components(est)
    k_all, p = comps.shape
    rows = _component_indices(components, k_all)
    names = _feature_names(est, p, feature_names)
    # Beyond a dozen features the names go down the side, where they stay horizontal and
    # readable at any width; the components then run across.
    tall = p > TALL_LOADINGS
    if ax is None:
        ax = _new_axes((max(4.0, 2.6 + 0.9 * len(rows)), max(3.0, 1.2 + 0.28 * p)) if tall
                       else (max(4.8, 1.0 + 0.55 * p), max(2.6, 1.4 + 0.45 * len(rows))))
    _draw_heatmap(ax, comps[rows].T if tall else comps[rows])
    _label_loadings(ax, [f"PC{i + 1}" for i in rows], names, tall=tall)
    _set_title(ax, est, "loadings")
    return ax


def _draw_heatmap(ax: Axes, shown: NDArray[np.float64]) -> None:
    """``shown`` on ``ax`` in :data:`LOADINGS_CMAP`, the same scale either side of 0, with a
    colour bar; each value is written in its cell when there are at most 120."""
    finite = np.abs(shown[np.isfinite(shown)])
    vmax = float(finite.max()) if finite.size and finite.max() > 0 else 1.0
    image = ax.imshow(shown, cmap=LOADINGS_CMAP, norm=Normalize(vmin=-vmax, vmax=vmax),
                      aspect="auto", interpolation="nearest")
    ax.figure.colorbar(image, ax=ax, label="loading")
    if shown.size <= 120:
        for (i, j), value in np.ndenumerate(shown):
            if np.isfinite(value):
                ax.text(j, i, f"{value:.2f}", ha="center", va="center", fontsize="x-small",
                        color="white" if abs(value) > 0.6 * vmax else "black")


def _label_loadings(ax: Axes, labels: list[str], names: list[str], *, tall: bool) -> None:
    """Name the heatmap's cells: the components ``labels`` across and the feature ``names``
    down the side when ``tall``, else the names across (slanted beyond four) and the
    components down."""
    across, down = (labels, names) if tall else (names, labels)
    ax.set_xticks(np.arange(len(across)))
    ax.set_yticks(np.arange(len(down)))
    if tall:
        ax.set_xticklabels(labels)
        ax.set_yticklabels(names, fontsize="small")
        ax.set_ylabel("feature")
    else:
        slanted = len(names) > 4
        ax.set_xticklabels(names, rotation=45 if slanted else 0,
                           ha="right" if slanted else "center")
        ax.set_yticklabels(labels)
        ax.set_xlabel("feature")


def _score_params(
    est: Any, epsilon: float, delta: float, bins: int, bound: Any
) -> tuple[NDArray[np.float64], float, float, int, Box]:
    """:func:`scores`' checks, all before the charge: ``(components, ε, δ, bins, box)``."""
    comps = _components(est)
    if comps.shape[0] < 2:
        raise ValueError(f"scores needs at least two components; {type(est).__name__} has "
                         f"{comps.shape[0]}.")
    epsilon = check_epsilon(epsilon, owner="scores")
    delta = 0.0 if delta == 0 else check_delta(delta, owner="scores")
    m = int(check_in_range(bins, "bins", low=2, low_closed=True, high=4096, high_closed=True,
                           integer=True, owner="scores"))
    return comps, epsilon, delta, m, _score_box(est, bound)


#: The default score box spans this many released standard deviations of each component's
#: scores either side of 0 (at least 15/16 of the rows inside, whatever the law: Chebyshev).
SCORE_BOX_SDS = 4.0


def _variance_box(est: Any) -> Box | None:
    """±:data:`SCORE_BOX_SDS` released standard deviations of PC1's and PC2's scores (None
    without two positive released variances): post-processing. It follows each component's
    spread, where the norm bound D may be many times it (the mass then sits in a few cells)."""
    variances = _vector(est, "explained_variance_", 2)
    if variances is None or not np.all(variances > 0):
        return None
    r1, r2 = (SCORE_BOX_SDS * math.sqrt(float(v)) for v in variances)
    return (-r1, r1), (-r2, r2)


def _score_box(est: Any, bound: Any) -> Box:
    """The public box ``((x0, x1), (y0, y1))`` the projections are clipped to."""
    if bound is None and (spread := _variance_box(est)) is not None:
        return spread
    if bound is None:
        radius = _scalar(est, "data_norm_")
        if radius is None or radius <= 0.0:
            raise ValueError(
                f"scores needs a public bound for the projections: {type(est).__name__} has "
                "no finite data_norm_ to default to. Pass bound= (a radius r for the box "
                "[-r, r]², or ((x0, x1), (y0, y1)))."
            )
        return (-radius, radius), (-radius, radius)
    if np.ndim(bound) == 0:
        r = check_in_range(bound, "bound", low=0.0, high=math.inf, owner="scores")
        return (-r, r), (-r, r)
    box = np.asarray(bound, dtype=np.float64)
    if box.shape != (2, 2) or not np.all(np.isfinite(box)) or np.any(box[:, 1] <= box[:, 0]):
        raise ValueError(
            "The 'bound' parameter of scores must be a float r > 0 (the box [-r, r]²) or "
            f"((x0, x1), (y0, y1)) with x0 < x1 and y0 < y1, finite. Got {bound!r} instead."
        )
    return (float(box[0, 0]), float(box[0, 1])), (float(box[1, 0]), float(box[1, 1]))


def scores(est: Any, X: Any, *, epsilon: float, delta: float = 0.0, bins: int = 20,
           bound: float | Sequence[Sequence[float]] | None = None, random_state: Any = None,
           ledger: Any = None, ax: Axes | None = None) -> Axes:
    """Private score plot: a noisy 2-D histogram of the rows projected on PC1 and PC2.

    Unlike :func:`scree` and :func:`loadings`, this reads the rows ``X`` again, so it is a
    release of its own with its own (ε, δ), charged on ``ledger`` **before** ``X`` is read.
    Each row is centred and scaled as the fit did (``mean_``, ``scale_``), projected on the
    first two private components and clipped to the public box ``bound``: it falls in one of
    ``bins × bins`` fixed cells, whose counts are released with noise through
    :mod:`privpca.mechanisms.noise`. Replacing one row moves one count out of one cell into
    another (L1 sensitivity 2, L2 √2): Laplace noise of scale ``2/ε`` per count when
    ``delta == 0`` (pure ε-DP), else Gaussian noise with the analytic calibration for (ε, δ)
    and Δ₂ = √2.

    The plot's guarantee is stated under the fit's neighbouring relation. After a fit under
    add/remove-one neighbours (``neighbouring="add-remove"``: ``privacy_.n_samples`` None) n
    stays private: the record states that relation and no ``n_samples``, and adding or removing
    a row moves one count by 1 (sensitivity 1: Laplace scale ``1/ε``, or the analytic Gaussian
    for Δ₂ = 1). After any other fit, n is public and the relation is replace-one.

    The noisy counts are drawn with negatives shown as 0 (post-processing). The title states
    the guarantee and the clipping box, never whether a projection was clipped: that depends on
    the data and only the data holder is told, by the warning below.

    Parameters
    ----------
    est : fitted privpca estimator
        With ``components_`` of at least two rows (``mean_``, ``scale_``, ``data_norm_`` used
        when present).
    X : array-like of shape (n_samples, n_features)
        The rows to project (usually those the estimator was fitted on). NaN or infinity is
        refused (:class:`~privpca.exceptions.NonFiniteInputError`) and the spend withdrawn.
    epsilon : float
        ε of this plot's own guarantee.
    delta : float, default=0.0
        0 for the Laplace mechanism (pure ε-DP), or 0 < δ < 1 for the Gaussian mechanism.
    bins : int, default=20
        Cells per axis (2 to 4096).
    bound : float, ((x0, x1), (y0, y1)) or None, default=None
        The public box: a radius r for ``[-r, r]²``, or the two ranges, never chosen by
        looking at the data. ``None``: ±:data:`SCORE_BOX_SDS` released standard deviations of
        each component's scores (``√explained_variance_``), else ``[-D, D]²`` with
        ``D = est.data_norm_`` (a ValueError if neither is a finite positive number, e.g.
        DP-PCA in the papers' setting).
    random_state : None, int, SeedSequence or Generator, default=None
        The noise's stream (strict secure mode: None only).
    ledger : PrivacyLedger or None, default=None
        Where the spend is booked (None: the process-wide default ledger).
    ax : matplotlib.axes.Axes or None, default=None
        Where to draw; ``None`` makes a new :class:`~matplotlib.figure.Figure`.

    Returns
    -------
    matplotlib.axes.Axes
        The axes with the noisy histogram, carrying three released attributes:
        ``ax.privacy_record`` (the :class:`~privpca.accounting.PrivacyRecord` booked on the
        ledger), ``ax.noisy_counts`` (shape (bins, bins), PC1 along the first axis, before the
        negatives were set to 0) and ``ax.bin_edges`` (the two arrays of edges).

    Raises
    ------
    BudgetExceededError
        If the ledger's budget refuses the spend: nothing is read, computed or drawn.
    ValueError
        For bad parameters, fewer than two components, a feature count that differs from
        the fit's, or NaN/infinity in ``X`` (then the spend is withdrawn: nothing released).

    Warns
    -----
    RowClippingWarning
        When a projection lay outside the box, except the ``[-D, D]²`` fallback's (it clips
        again only rows the fit itself clipped): a
        :class:`~privpca.exceptions.DataDependentWarning`, for the data holder only.

    Examples
    --------
    >>> from privpca.accounting import PrivacyLedger
    >>> from privpca.datasets import make_spiked
    >>> from privpca.decomposition.analyze_gauss import AnalyzeGaussPCA
    >>> from privpca.plot import scores
    >>> X, _ = make_spiked(4_000, 5, 2, lam=9.0, random_state=0)
    >>> ledger = PrivacyLedger()
    >>> est = AnalyzeGaussPCA(2, epsilon=1.0, random_state=0, ledger=ledger).fit(X)
    >>> ax = scores(est, X, epsilon=0.5, bins=10, random_state=0, ledger=ledger)
    >>> ax.noisy_counts.shape
    (10, 10)
    >>> ax.privacy_record.spends[0].noise_scale  # Laplace scale 2/ε
    4.0
    >>> len(ledger)  # the fit and the plot
    2
    """
    checked = _score_params(est, epsilon, delta, bins, bound)  # (components, ε, δ, bins, box)
    # Whether a row left the box is said to the data holder where the box is not D's.
    warn = bound is not None or _variance_box(est) is not None
    record, noisy, edges = release_scores(est, X, *checked, warn=warn,
                                          random_state=random_state, ledger=ledger)
    return _draw_scores(ax, est, record, noisy, edges)


def _draw_scores(ax: Axes | None, est: Any, record: PrivacyRecord, noisy: NDArray[np.float64],
                 edges: Edges) -> Axes:
    """Draw released counts (post-processing) and attach ``privacy_record``, ``noisy_counts``
    and ``bin_edges`` to the axes."""
    if ax is None:
        ax = _new_axes((6.0, 5.0))
    (x0, x1), (y0, y1) = (edges[0][0], edges[0][-1]), (edges[1][0], edges[1][-1])  # the box
    shown = np.maximum(noisy, 0.0)  # post-processing: a count is never negative
    mesh = ax.pcolormesh(edges[0], edges[1], shown.T, cmap="viridis", shading="flat")
    ax.figure.colorbar(mesh, ax=ax, label="noisy count (negatives shown as 0)")
    ax.set_xlabel("PC1 score (clipped)")
    ax.set_ylabel("PC2 score (clipped)")
    ax.locator_params(nbins=5)  # wide units (dollars) must not collide
    ax.ticklabel_format(style="sci", scilimits=(-3, 4))
    noise = ("Laplace" if record.delta == 0.0 else "Gaussian") + \
        f" noise, scale {record.noise_scale:.3g} per count"
    ax.set_title(
        f"{type(est).__name__}: private score plot, "
        f"(ε = {record.epsilon:.3g}, δ = {record.delta:.3g})-DP of its own\n"
        f"projections clipped to [{x0:.3g}, {x1:.3g}] × [{y0:.3g}, {y1:.3g}]\n{noise}",
        fontsize="medium")
    released: Any = ax
    released.privacy_record, released.noisy_counts, released.bin_edges = record, noisy, edges
    return ax
