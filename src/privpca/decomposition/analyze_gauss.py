"""Analyze Gauss (Dwork, Talwar, Thakurta & Zhang 2014): PCA of ``XᵀX + E`` in the central model.

A trusted curator computes the Gram matrix ``XᵀX``, adds a symmetric Gaussian matrix ``E``
whose upper triangle (diagonal included) is i.i.d. ``N(0, σ²)``, and releases the top-k
eigenvectors of the sum. The released matrix itself would also be private; the eigenvectors
are post-processing of it.

Privacy
-------
The mechanism releases ``u(XᵀX) + z`` where ``u`` packs the upper triangle (``p(p+1)/2``
numbers) and ``z ~ N(0, σ² I)``. With ``‖x‖ ≤ D`` for every record:

* **replace one record** (privpca's default relation, ``neighbouring="replace"``): ``XᵀX``
  changes by ``xxᵀ − yyᵀ`` and ``‖u(xxᵀ) − u(yyᵀ)‖₂ ≤ √2·D²``, attained at ``x = De₁``,
  ``y = De₂`` (derivation in ``ALGORITHMS.md``, local-model section, and in
  :mod:`privpca.local_protocol.local_covariance`), so **Δ = √2·D²**;
* **add or remove one record** (the paper's relation, ``neighbouring="add-remove"``): ``XᵀX``
  changes by ``±xxᵀ`` and ``‖u(xxᵀ)‖₂ ≤ ‖xxᵀ‖_F = ‖x‖² ≤ D²``, so **Δ = D²**.

σ is calibrated by the Gaussian mechanism, analytic (Balle & Wang 2018, default) or classic
``σ = Δ√(2 ln(1.25/δ))/ε`` (what the paper uses, valid for ε < 1 only).
"""

from __future__ import annotations

import math
from typing import Any, ClassVar

import dp_accounting
import numpy as np
from numpy.typing import NDArray
from sklearn.utils._param_validation import StrOptions

from privpca.accounting.ledger import PrivacyLedger
from privpca.accounting.neighbouring import NEIGHBOURING_RELATIONS, Neighbouring
from privpca.decomposition._base import FitPlan, PipelinePCA, Release
from privpca.decomposition._constraints import GRAM_PIPELINE, N_COMPONENTS_SPECTRUM, WHITEN
from privpca.decomposition._incremental import IncrementalGramMixin
from privpca.mechanisms.gaussian import (
    CALIBRATIONS,
    certified_epsilon,
    classic_gaussian_sigma,
)
from privpca.mechanisms.noise import symmetric_gaussian_release
from privpca.mechanisms.secure_noise import fast_stream
from privpca.mechanisms.sensitivity import gram_sensitivity
from privpca.pipeline.release import ReleasePipeline
from privpca.pipeline.rows import Statistic, Table
from privpca.pipeline.scale_refinement import fit_released_matrix, refinement_note
from privpca.pipeline.spectrum import (
    HIGH_PILOT_NOTE,
    check_n_components_spec,
)

__all__ = [
    "NEIGHBOURING_RELATIONS",
    "AnalyzeGaussPCA",
    "gram_sensitivity",
]


class AnalyzeGaussPCA(IncrementalGramMixin, PipelinePCA):
    """Central-model PCA by Gaussian noise on the Gram matrix ("Analyze Gauss").

    On defaults it is the PCA a data scientist expects, privately: the rows are centred on a
    private mean, clipped to a private high quantile of their norms, and
    ``G = Σ(x − μ̂)(x − μ̂)ᵀ + E`` is released with ``E`` symmetric, its upper triangle
    (diagonal included) i.i.d. ``N(0, σ²)``; the components are its top-k eigenvectors. The
    whole pipeline (:mod:`privpca.pipeline.release`) composes to exactly (ε, δ).
    ``centering=None`` with a numeric ``data_norm`` is Dwork et al.'s algorithm on the
    uncentred ``XᵀX``, as in the papers. σ is the Gaussian-mechanism noise for the L2
    sensitivity Δ of the packed upper triangle of the Gram matrix: ``Δ = √2·D²`` when one
    record is replaced (default) and ``Δ = D²`` when one is added or removed (the paper's
    relation).

    Parameters
    ----------
    n_components : int or float, default=2
        Dimension k of the subspace, or a float in (0, 1): the smallest k whose private
        explained-variance ratio reaches it (as in scikit-learn; free: post-processing).
    epsilon : float, default=1.0
        ε > 0 of the (ε, δ)-DP guarantee of the whole fit.
    delta : float, default=1e-5
        0 < δ < 1.
    centering : "private", None or array of shape (n_features,), default="private"
        ``"private"``: centre on a private mean (a share of the budget, see
        ``budget_shares``). ``None``: no centring (the papers' second moment ``E[x xᵀ]``).
        An array: a public mean, free.
    data_norm : "auto", "select", "quantile" or float, default="auto"
        Bound D on the L2 norm of every (centred, scaled) row. ``"auto"`` (``"select"`` is
        the same rule by name): chosen for the table. From the private histogram of the row
        norms come two candidates, its median and a bound above (almost) every norm; a fifth
        of the budget releases two pilot Grams at them, and the high bound is used only when
        clipping at the median visibly turns the subspace by more than the high bound's
        extra noise costs (:mod:`privpca.pipeline.bound_selection`, docs/REAL_DATA.md). The
        pilot at the chosen bound is averaged into the statistic, so about 15 % of the
        budget is the rule's cost. Above 256 features: ``"quantile"``. ``"quantile"``: a
        private 99 % quantile of the row norms (a small share of the budget). A float is a
        public bound at no cost; longer rows are clipped to it with a
        :class:`~privpca.exceptions.RowClippingWarning`.
    scale : bool or array of shape (n_features,), default=False
        ``True``: divide each feature by a private standard deviation first (a correlation
        PCA, as after scikit-learn's ``StandardScaler``). An array: public scales, free.
    budget_shares : dict or None, default=None
        Shares of the Gaussian budget for the preprocessing parts (``"bound_raw"``,
        ``"mean"``, ``"scale_bound"``, ``"scale"``, ``"bound"``); ``None`` uses
        :data:`privpca.pipeline.budget.DEFAULT_SHARES`. The statistic gets the rest.
    holdout_fraction : "auto", None or float in (0, 0.5], default="auto"
        Where the preprocessing (private mean, scales, bound) reads its rows. ``None``: the
        whole table, with a share of the budget. A float: that share of the rows, a uniformly
        random set of single rows drawn secretly from the estimator's own generator (whatever
        the row order), at the whole (ε, δ); the statistic then reads the other rows, also at
        the whole (ε, δ) (parallel composition: each record enters one of the two), and a
        streamed table is read twice (gathering the held-out rows, then the statistic)
        instead of four times. ``"auto"``: ``0.02`` from 10⁷ rows on, else ``None``
        (:data:`privpca.pipeline.release.HOLDOUT_AUTO_MIN_ROWS`; docs/PIPELINE.md has the
        measured trade-off). Ignored in the papers' setting (nothing to preprocess).
    neighbouring : {"replace", "add-remove"}, default="replace"
        The neighbouring relation of the guarantee. ``"replace"``: one record replaced by any
        other (Δ = √2·D²; privpca's relation everywhere). ``"add-remove"``: one record added
        or removed (Δ = D²), as in Dwork et al.; only with ``centering=None`` and a numeric
        ``data_norm`` (the paper's setting: a private mean, scales or bound would divide by n
        or count rows, and are refused). The privacy record then also states, in its
        ``notes``, the ε the same noise certifies under replacement. Under add/remove the
        number of records n is itself private, so nothing released is computed from it:
        ``privacy_.n_samples`` is None and ``explained_variance_`` and ``noise_level_`` are
        in Gram units (eigenvalues of the noisy ``XᵀX``, not divided by n); the ratios,
        ``expected_error_`` and ``components_`` do not depend on the units. (Releasing a
        noisy, charged n instead was not needed: the outputs are meaningful without it.)
    calibration : {"analytic", "classic"}, default="analytic"
        Exact analytic Gaussian calibration (Balle & Wang 2018), or the paper's classic
        ``σ = Δ√(2 ln(1.25/δ))/ε``, which is proven only for ε < 1 (a
        :class:`~privpca.exceptions.PrivacyLeakWarning` is issued otherwise and
        ``privacy_.epsilon`` reports the ε the noise really certifies); classic only in the
        paper's setting.
    whiten : bool, default=False
        Divide the projections of :meth:`transform` by ``sqrt(explained_variance_)`` (and
        multiply them back in :meth:`inverse_transform`), as scikit-learn's ``PCA``:
        post-processing of released values; the fit is the same either way.
    random_state : None, int or numpy.random.Generator, default=None
        Source of the noise.
    ledger : PrivacyLedger or None, default=None
        Where the spend is recorded (``None``: :func:`privpca.accounting.default_ledger`).

    Attributes
    ----------
    components_ : ndarray of shape (n_components_, n_features)
        Orthonormal rows: top-k eigenvectors of the noisy Gram matrix, decreasing eigenvalue.
    n_components_ : int
        k (resolved when ``n_components`` is a fraction).
    mean_ : ndarray of shape (n_features,)
        The private (or public) mean subtracted by ``transform``; zeros without centring,
        and zeros on a wide table centred by row pairs (no mean is released there:
        :mod:`privpca.pipeline.pairing`; ``transform`` then returns uncentred scores, which
        differ from centred ones by a constant per component).
    scale_ : ndarray of shape (n_features,) or None
        The private (or public) scales ``transform`` divides by; None without scaling. With
        ``scale=True``, refined by the released matrix's diagonal
        (:mod:`privpca.pipeline.scale_refinement`): the components are those of the prepared
        rows' correlation matrix.
    data_norm_ : float
        The bound D the statistic used (released: free to inspect).
    explained_variance_ : ndarray of shape (n_components_,)
        Top eigenvalues of the noisy Gram matrix over n − 1 (centred) or n (uncentred),
        debiased for the noise that chose them and 0 where the noise's edge hides them
        (:func:`~privpca.pipeline.spectrum.debiased_eigenvalues`). With
        ``neighbouring="add-remove"`` (n private) in the Gram's units, undivided.
    explained_variance_ratio_ : ndarray of shape (n_components_,)
        Those variances over ``total_variance_``.
    total_variance_ : float
        The noisy matrix's trace in the same units (the private total variance, unbiased),
        raised to the variances' sum where noise put it below.
    noise_level_ : float
        Bound (probability ≥ 95 %) on the spectral norm of the noise, in the units of
        ``explained_variance_`` (Gram units under add/remove): eigenvalues closer than this
        to each other are not resolved.
    expected_error_ : float
        Bound (probability ≈ 95 %) on ‖V̂V̂ᵀ − VVᵀ‖_F between ``components_`` and the exact
        PCA of the same centred, clipped rows, from released quantities only: the smaller of
        Davis–Kahan's and a parametric bootstrap's (:mod:`privpca.pipeline.spectrum`). With
        ``data_norm='auto'`` a 2 % "variance" part releases ``VᵀGV``, ``tr G`` and the
        residual pair of the rows clipped at the ladder's reference (its robust maximum, or
        its top where the pilots cannot rule out the top shell's rotation), and the bar is
        Davis–Kahan's residual bound from them (:mod:`privpca.pipeline.basis_error`): it
        covers the rotation clipping at a lower bound causes, so it bounds the distance to
        the PCA of the raw rows but for rows above the reference. Its maximum √(2k) means "no
        guarantee" (noise-dominated, or gaps the noise hides).
    noise_scale_ : float
        σ, the standard deviation of each upper-triangle entry of ``E``.
    privacy_ : PrivacyRecord
        Every part's spend (bounds, mean, statistic), the neighbouring relation, Δ, σ, and the
        certified total (ε, δ).
    n_samples_seen_ : int or None
        After :meth:`partial_fit`: the rows of every batch so far (None under add/remove-one
        neighbours, where n is private). ``noise_scale_`` is then the summed noise's σ√T.
    n_features_in_ : int

    See Also
    --------
    ModSuLQPCA : the same mechanism on ``XᵀX/n``, calibrated by Chaudhuri et al.'s theorem.
    NoisyPowerPCA : noise on ``XᵀX Q`` over T iterations (never forms the noisy p×p matrix).

    Notes
    -----
    Cost on defaults: one pass for the row norms (the finiteness check), one per round of the
    private mean, one for the bound, and one blocked pass that centres, clips and forms the
    Gram matrix (``O(np²)``, BLAS ``syrk``; no copy of X); then ``p(p+1)/2`` normal draws and a
    partial symmetric eigendecomposition (top k + 1 pairs). From 10⁷ rows the three
    preprocessing passes read only the held-out 2 % (``holdout_fraction``), gathered into
    memory by one pass over the table.

    :meth:`partial_fit` fits in batches (scikit-learn's ``IncrementalPCA``), with a public
    numeric ``data_norm``: each call releases its batch's noisy Gram (and row sum) at the
    whole (ε, δ), each row in one batch (parallel composition: one charge for the stream),
    and the components follow the running sums; the error grows with the number of batches
    (:mod:`privpca.decomposition._incremental` has the measurements).

    References
    ----------
    C. Dwork, K. Talwar, A. Thakurta, L. Zhang. Analyze Gauss: optimal bounds for
    privacy-preserving principal component analysis. STOC 2014, Algorithm 1.
    B. Balle, Y.-X. Wang. Improving the Gaussian mechanism for differential privacy:
    analytical calibration and optimal denoising. ICML 2018.

    Examples
    --------
    >>> from privpca.decomposition.analyze_gauss import AnalyzeGaussPCA
    >>> from privpca.datasets import make_spiked
    >>> X, V = make_spiked(5_000, 10, 2, lam=9.0, random_state=0)
    >>> est = AnalyzeGaussPCA(n_components=2, epsilon=1.0, random_state=0).fit(X + 5.0)
    >>> est.components_.shape, est.mean_.shape
    ((2, 10), (10,))
    >>> [s.mechanism.split(":")[0] for s in est.privacy_.spends][4:]
    ['bound', 'bound_select', 'statistic', 'variance']
    >>> paper = AnalyzeGaussPCA(2, epsilon=1.0, centering=None, data_norm=1.0, random_state=0)
    >>> round(paper.fit(X).privacy_.sensitivity, 4)
    1.4142
    """

    _parameter_constraints: ClassVar[dict[str, list[Any]]] = {
        **GRAM_PIPELINE,
        "n_components": N_COMPONENTS_SPECTRUM,
        "neighbouring": [StrOptions(set(NEIGHBOURING_RELATIONS))],
        "calibration": [StrOptions(set(CALIBRATIONS))],
        "whiten": WHITEN,
    }

    def __init__(
        self,
        n_components: int | float = 2,
        *,
        epsilon: float = 1.0,
        delta: float = 1e-5,
        centering: Any = "private",
        data_norm: float | str = "auto",
        scale: Any = False,
        budget_shares: dict[str, float] | None = None,
        holdout_fraction: float | str | None = "auto",
        neighbouring: str = "replace",
        calibration: str = "analytic",
        whiten: bool = False,
        random_state: Any = None,
        ledger: PrivacyLedger | None = None,
    ) -> None:
        self.n_components = n_components
        self.epsilon = epsilon
        self.delta = delta
        self.centering = centering
        self.data_norm = data_norm
        self.scale = scale
        self.budget_shares = budget_shares
        self.holdout_fraction = holdout_fraction
        self.neighbouring = neighbouring
        self.calibration = calibration
        self.whiten = whiten
        self.random_state = random_state
        self.ledger = ledger

    def _statistic(self, relation: str, k: int = 0) -> Statistic:
        return Statistic(
            "gaussian: packed upper triangle of the Gram matrix (Analyze Gauss)",
            lambda D: gram_sensitivity(D, relation),
            releases_spectrum=True,
            subspace_rank=k,
            pairable=True,
        )

    def _plan(self, table: Table) -> FitPlan:
        n, p = table.n_samples, table.n_features
        k = check_n_components_spec(self.n_components, p, self)
        neighbouring = Neighbouring.from_option(self.neighbouring, owner=self)
        relation = neighbouring.relation
        calibration = self.calibration  # declared: checked
        rank = k if isinstance(k, int) else 0  # a variance share: no subspace test
        run = ReleasePipeline(self, self._settings(), n, p, self._statistic(relation, rank),
                              neighbouring=neighbouring)
        if not run.paper_mode and (relation != "replace" or calibration != "analytic"):
            raise ValueError(
                f"{type(self).__name__}: neighbouring='add-remove' and calibration='classic' "
                "reproduce the paper's setting; they require centering=None, scale=False and a "
                "numeric data_norm."
            )
        settings: dict[str, Any] = {"k": k, "relation": relation, "calibration": calibration,
                                    "epsilon": run.epsilon}
        if not run.paper_mode:
            return FitPlan(run, settings=settings)
        # A public D: σ and the certified ε are known before the data.
        sensitivity = gram_sensitivity(run.data_norm, relation)
        sigma = (classic_gaussian_sigma(run.epsilon, run.delta, sensitivity)
                 if calibration == "classic" else run.statistic_multiplier() * sensitivity)
        eps = (certified_epsilon(sigma, run.delta, sensitivity) if calibration == "classic"
               else run.epsilon)
        settings.update(epsilon=eps, sigma=sigma)
        return FitPlan(run, settings=settings,
                       charge={"epsilon": eps,
                               "statistic_event": dp_accounting.GaussianDpEvent(
                                   sigma / sensitivity)})

    def _release(self, plan: FitPlan, prepared: Any, rng: np.random.Generator,
                 pre_rng: np.random.Generator) -> Release:
        """The Gram matrix of the prepared rows, Gaussian noise on its upper triangle, top-k."""
        run, settings = plan.run, plan.settings
        relation, eps = settings["relation"], settings["epsilon"]
        sensitivity = gram_sensitivity(prepared.data_norm, relation)
        sigma = settings["sigma"] if run.paper_mode else run.statistic_multiplier() * sensitivity
        noisy = run.recentred_gram(prepared, pre_rng) if run.recentre else prepared.gram()
        noisy = symmetric_gaussian_release(noisy, sigma, rng, sensitivity=sensitivity)
        released_sigma = sigma
        noisy, sigma = _with_pilot(noisy, sigma, prepared, run)
        # Under add/remove neighbours n is a private count: no released value may divide by
        # it, so the spectrum stays in the units of the noisy Gram matrix (denominator 1).
        denominator = 1.0 if relation == "add-remove" else run.denominator(prepared)
        fit, refinement, high = fit_released_matrix(
            noisy, sigma, self.scale, settings["k"], denominator=denominator,
            extra_perturbation=run.mean_perturbation(prepared), rng=fast_stream(rng),
            choice=run.bound_choice(prepared), shares_noise=sigma != released_sigma)
        self._set_spectrum(fit)
        self.expected_error_ = run.spectrum_bar(prepared, self.components_, self.expected_error_,
                                                rng, refinement)
        self.noise_scale_ = sigma
        spend = run.statistic_spend(
            prepared.data_norm, released_sigma,
            multiplier=released_sigma / sensitivity if run.paper_mode else None,
            epsilon=eps if run.paper_mode else None)
        notes = self._notes(eps, released_sigma, run)
        if high:
            notes += HIGH_PILOT_NOTE
        if sigma != released_sigma:
            notes += (
                " The bound selection: the noisy Gram matrix was averaged with the pilot Gram "
                "released at the same bound (inverse-variance weights: post-processing of two "
                f"releases), so the components' noise std is {sigma:.6g}, not {released_sigma:.6g}."
            )
        return Release(spend, settings["calibration"], notes + refinement_note(refinement),
                       record={"epsilon": eps}, refinement=refinement)

    def _notes(self, eps: float, sigma: float, run: ReleasePipeline) -> str:
        notes = (
            "The released eigenvectors are post-processing of the noisy Gram matrix "
            "G + E, itself (epsilon, delta)-DP together with the preprocessing."
        )
        if self.calibration == "classic":
            notes += (
                f" Classic calibration: epsilon is what sigma certifies exactly ({eps:.4g}), "
                f"the requested target was {float(self.epsilon):g}."
            )
        if self.neighbouring == "add-remove":
            replace_sens = gram_sensitivity(run.data_norm, "replace")
            eps_replace = certified_epsilon(sigma, run.delta, replace_sens)
            notes += (
                " Guarantee stated for add/remove-one neighbours (Delta = D²), as in Dwork et "
                f"al.; under replace-one neighbours (Delta = √2·D²) the same noise certifies "
                f"epsilon = {eps_replace:.4g} at the same delta. The ledger composes this "
                "fit's event as given: do not mix neighbouring relations in one ledger. "
                "Under add/remove the number of records is private: nothing released depends "
                "on it except through the noisy Gram matrix (n_samples is not recorded; "
                "explained_variance_ and noise_level_ are in Gram units, eigenvalues of "
                "X^T X + E, not divided by n; ratios and expected_error_ are unit-free)."
            )
        return notes


def _with_pilot(noisy: NDArray[np.float64], sigma: float, prepared: Any,
                run: ReleasePipeline) -> tuple[NDArray[np.float64], float]:
    """The noisy Gram averaged with the bound selection's pilot at the same bound, when that
    pilot is a release of the same matrix, and the averaged noise std."""
    choice = run.bound_choice(prepared)
    if choice is None or choice.pilot is None:
        return noisy, sigma
    weight = choice.pilot_sigma**2 / (sigma**2 + choice.pilot_sigma**2)
    averaged = weight * noisy + (1.0 - weight) * choice.pilot
    return averaged, float(sigma * choice.pilot_sigma / math.hypot(sigma, choice.pilot_sigma))
