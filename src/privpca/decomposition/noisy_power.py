"""The noisy power method (Hardt & Price 2014), with row-level privacy and exact accounting.

Starting from a data-independent random orthonormal ``Q₀`` (p×k), each of ``T = n_iter``
iterations releases ``Y = A Q + G`` with ``A = XᵀX`` and ``G`` i.i.d. ``N(0, σ²)``, then sets
``Q = ThinQR(Y)`` (post-processing). The output is ``Q_T``.

Privacy (central model, replace one record, ‖x‖ ≤ D)
------------------------------------------------------
Replacing ``y`` by ``x`` changes ``A Q`` by ``M Q`` with ``M = xxᵀ − yyᵀ``. ``M`` has rank ≤ 2
and ``−yyᵀ ⪯ M ⪯ xxᵀ``, so its eigenvalues λ₊ ≥ 0 ≥ λ₋ satisfy ``|λ±| ≤ D²`` and
``λ₊² + λ₋² = ‖M‖²_F ≤ 2D⁴``. For orthonormal ``Q``, ``‖MQ‖²_F = tr(QᵀM²Q)`` is at most the sum
of the k largest eigenvalues of ``M²``:

* k = 1: ``‖Mq‖ ≤ max|λ±| ≤ D²`` — **Δ = D²**;
* k ≥ 2: ``‖MQ‖_F ≤ ‖M‖_F ≤ √2·D²`` — **Δ = √2·D²**;

both attained (``x = De₁``, ``y = De₂``, ``Q ⊇ [e₁, e₂]``), and independent of Q, so they hold
for every iteration whatever the earlier noisy releases were. The T releases are an adaptive
composition of Gaussian mechanisms with noise multiplier ``m = σ/Δ``; ``m`` is solved with
privpca's accounting (:func:`~privpca.accounting.gaussian_noise_multiplier_for_composition`,
PLD accounting by ``dp-accounting``) so that they compose to exactly the requested (ε, δ).
Since T Gaussian releases with multiplier ``m`` are equivalent to one with ``m/√T``, this ``m``
is ``√T`` times the single-release analytic multiplier, up to the accountant's tolerance.

Differences from the paper and from public code
-----------------------------------------------
* Hardt & Price state privacy for matrices that differ in **one entry** by at most one and
  scale the noise by ``‖Q‖_∞`` (largest entry of the current iterate): their
  ``σ = ε⁻¹√(4kT ln(1/δ))`` comes from that entry-level relation and an advanced-composition
  bound. One record of ``X`` changes every entry of ``XᵀX``, so that guarantee does not
  cover records; we calibrate to the row-level Δ above instead and keep the paper's σ only as
  ``paper_noise_scale_``, for comparison.
* The number of iterations must be fixed in advance. Public implementations derive it from the
  true spectrum (the eigengap of ``XᵀX``), which is a function of the private data and leaks;
  here ``n_iter`` is a parameter, never computed from the data.
"""

from __future__ import annotations

import functools
import math
from typing import Any, ClassVar

import numpy as np
from sklearn.utils._param_validation import StrOptions

from privpca._validation import (
    check_n_components,
)
from privpca.accounting.composition import gaussian_noise_multiplier_for_composition
from privpca.accounting.ledger import PrivacyLedger
from privpca.accounting.neighbouring import Neighbouring
from privpca.decomposition._base import FitPlan, PipelinePCA, Release
from privpca.decomposition._constraints import (
    GRAM_PIPELINE,
    N_COMPONENTS,
    WHITEN,
    positive_int,
)
from privpca.mechanisms.gaussian import certified_epsilon
from privpca.mechanisms.sensitivity import power_sensitivity
from privpca.pipeline.release import ReleasePipeline
from privpca.pipeline.rows import Statistic, Table
from privpca.pipeline.spectrum import HIGH_PILOT_NOTE
from privpca.solvers.eigen import fix_signs
from privpca.solvers.gram import gram_matrix
from privpca.solvers.power import power_step, random_orthonormal_basis

__all__ = [
    "NoisyPowerPCA",
    "hardt_price_noise_scale",
    "power_sensitivity",
]

SOLVERS: tuple[str, ...] = ("auto", "gram", "data")
#: Measured on the development machine (2 cores, OpenBLAS): a p×k product with a tall X runs at
#: about 1/6 of the flop rate of the Gram matrix's syrk (it is memory-bound for small k).
_THIN_PRODUCT_PENALTY = 6.0


def hardt_price_noise_scale(epsilon: float, delta: float, n_components: int, n_iter: int) -> float:
    """Hardt & Price's ``σ = ε⁻¹√(4kT ln(1/δ))`` (entry-level neighbours; for comparison only)."""
    return math.sqrt(4.0 * n_components * n_iter * math.log(1.0 / delta)) / epsilon


@functools.lru_cache(maxsize=256)
def _composition_multiplier(epsilon: float, delta: float, n_iter: int) -> float:
    # Solving for the multiplier takes about a second (more at large epsilon): cache it, since
    # model selection refits with the same (epsilon, delta, T) many times.
    return gaussian_noise_multiplier_for_composition(epsilon, delta, n_iter)


def _use_gram(n: int, p: int, k: int, n_iter: int) -> bool:
    """Whether forming ``XᵀX`` once beats ``Xᵀ(X Q)`` every iteration (flop model)."""
    gram_cost = n * p * p + _THIN_PRODUCT_PENALTY * 2.0 * n_iter * p * p * k
    data_cost = _THIN_PRODUCT_PENALTY * 4.0 * n_iter * n * p * k
    return gram_cost <= data_cost


class NoisyPowerPCA(PipelinePCA):
    """Central-model PCA by the noisy power method (Hardt & Price 2014), row-level private.

    ``Q₀`` random orthonormal (independent of the data); for ``t = 1..T``:
    ``Y = XᵀX Q + G``, ``G`` i.i.d. ``N(0, σ²)``; ``Q = ThinQR(Y)``. σ = ``m·Δ`` with Δ the
    replace-one sensitivity of ``XᵀX Q`` (``D²`` for k = 1, ``√2·D²`` for k ≥ 2; see the module
    docstring) and ``m`` the noise multiplier for which T Gaussian releases compose to (ε, δ)
    under privpca's accounting.

    Parameters
    ----------
    n_components : int, default=2
        Dimension k of the subspace.
    epsilon : float, default=1.0
        ε > 0 of the overall (ε, δ)-DP guarantee (all T iterations together).
    delta : float, default=1e-5
        0 < δ < 1.
    centering : "private", None or array of shape (n_features,), default="private"
        As in :class:`~privpca.AnalyzeGaussPCA`: a private mean (a share of the budget),
        none (the papers' ``XᵀX``), or a public mean.
    data_norm : "auto", "select", "quantile" or float, default="auto"
        Bound D on every (centred, scaled) row's L2 norm: chosen for the table by two pilot
        Grams (``"auto"``, ``"select"``; ``"quantile"`` is a private 99 % quantile of the
        norms, and so is ``"auto"`` above 256 features: as in
        :class:`~privpca.AnalyzeGaussPCA`)
        (a share of the
        budget) or a public float (longer rows are clipped, with a
        :class:`~privpca.exceptions.RowClippingWarning`).
    scale : bool or array of shape (n_features,), default=False
        As in :class:`~privpca.AnalyzeGaussPCA`.
    budget_shares : dict or None, default=None
        Shares of the Gaussian budget for the preprocessing parts and ``"variance"`` (the
        explained variance, released when not in the papers' setting); see
        :data:`privpca.pipeline.budget.DEFAULT_SHARES`.
    holdout_fraction : "auto", None or float in (0, 0.5], default="auto"
        As in :class:`~privpca.AnalyzeGaussPCA`: the preprocessing from a held-out share of
        the rows (a secret, uniformly random set) at the whole (ε, δ), the statistic from the
        rest (``"auto"``: 2 % from 10⁷ rows on).
    n_iter : int, default=10
        T, the number of noisy iterations, fixed in advance (it sets the noise). Hardt & Price
        need ``T ≈ log(p)/log(λ_k/λ_{k+1})``-ish iterations; choose T from public knowledge —
        never from the data's own spectrum, which would leak.
    solver : {"auto", "gram", "data"}, default="auto"
        How ``XᵀX Q`` is computed: ``"gram"`` forms ``XᵀX`` once (``O(np²)``, then ``O(p²k)``
        per iteration); ``"data"`` computes ``Xᵀ(XQ)`` (``O(npk)`` per iteration, no p×p
        matrix); ``"auto"`` picks the cheaper by a flop model. The result is the same up to
        rounding (same random draws). On a streamed table (a ``dask.array.Array``, a
        memory-mapped ``.npy``, Parquet, :class:`~privpca.streaming.ChunkSource`) ``"gram"``
        is one pass and ``"data"`` one pass per iteration, each a reduction over the blocks;
        the noise is added here, once per release.
    keep_history : bool, default=False
        Store every iterate ``Q_t`` in ``history_`` (post-processing of the releases: free).
    whiten : bool, default=False
        Divide the projections of :meth:`transform` by ``sqrt(explained_variance_)`` (and
        multiply them back in :meth:`inverse_transform`), as scikit-learn's ``PCA``:
        post-processing of released values; the fit is the same either way.
    random_state : None, int or numpy.random.Generator, default=None
        Source of ``Q₀`` and of the noise.
    ledger : PrivacyLedger or None, default=None
        Where the spend is recorded (``None``: :func:`privpca.accounting.default_ledger`).

    Attributes
    ----------
    components_ : ndarray of shape (n_components, n_features)
        Orthonormal rows spanning ``Q_T``. They are a basis of the estimated subspace, not
        eigenvectors; outside the papers' setting they are ordered by their private variance.
    mean_, scale_, data_norm_
        As in :class:`~privpca.AnalyzeGaussPCA`.
    explained_variance_ : ndarray of shape (n_components,)
        Private variance along each component (the pipeline's ``"variance"`` part; NaN in the
        papers' setting, where nothing beyond ``Q_T`` is released).
    explained_variance_ratio_ : ndarray of shape (n_components,)
        Over the private total variance, made feasible
        (:func:`~privpca.pipeline.spectrum.feasible_spectrum`: variances ≥ 0, ratios in
        [0, 1] summing to at most 1). NaN in the papers' setting (nothing released).
    noise_level_ : float
        σ over the variance denominator: the noise std of each entry of ``XᵀX Q`` per record.
    expected_error_ : float or None
        The smaller of the Ky Fan and the Davis–Kahan residual bounds from the released
        variances and residual pair, w.p. ≥ 95 %, capped at √(2k), against the rows clipped
        at the bound selection's robust maximum (so it covers the rotation clipping at a lower
        chosen bound causes): :mod:`privpca.pipeline.basis_error`. None in the papers'
        setting: only ``Q_T`` is released, and the Hardt–Price bound needs ``XᵀX``'s eigengap,
        which is not.
    n_iter_ : int
        T.
    noise_scale_ : float
        σ, the standard deviation of each entry of every ``G``.
    noise_multiplier_ : float
        ``σ/Δ`` per release.
    paper_noise_scale_ : float
        Hardt & Price's ``ε⁻¹√(4kT ln(1/δ))`` (entry-level privacy; multiplied by ``‖Q‖_∞`` in
        their algorithm), for comparison only: it is not what is used.
    history_ : ndarray of shape (n_iter, n_components, n_features) or None
        ``Q_t`` (as rows, like ``components_``) for ``t = 1..T`` when ``keep_history=True``.
    solver_ : str
        ``"gram"`` or ``"data"``, as resolved.
    privacy_ : PrivacyRecord
        Central model, replace-one, Δ, σ, and ε composed by ``dp-accounting`` over the T
        releases (one spend with ``count = T``).
    n_features_in_ : int

    Notes
    -----
    No p×p eigendecomposition is ever computed. Cost: ``min(O(np²) + O(Tp²k), O(Tnpk))`` plus T
    thin QRs of p×k.

    References
    ----------
    M. Hardt, E. Price. The noisy power method: a meta algorithm with applications. NeurIPS
    2014, Algorithm 1 and Section 4 (privacy).

    Examples
    --------
    >>> from privpca.decomposition.noisy_power import NoisyPowerPCA
    >>> from privpca.datasets import make_spiked
    >>> X, V = make_spiked(5_000, 10, 2, lam=9.0, random_state=0)
    >>> est = NoisyPowerPCA(n_components=2, epsilon=1.0, n_iter=5, random_state=0).fit(X)
    >>> est.components_.shape, est.n_iter_
    ((2, 10), 5)
    """

    _parameter_constraints: ClassVar[dict[str, list[Any]]] = {
        **GRAM_PIPELINE,
        "n_components": N_COMPONENTS,  # no released spectrum to pick k from a share
        "n_iter": positive_int(),
        "solver": [StrOptions(set(SOLVERS))],
        "keep_history": ["boolean"],
        "whiten": WHITEN,
    }

    def __init__(
        self,
        n_components: int = 2,
        *,
        epsilon: float = 1.0,
        delta: float = 1e-5,
        centering: Any = "private",
        data_norm: float | str = "auto",
        scale: Any = False,
        budget_shares: dict[str, float] | None = None,
        holdout_fraction: float | str | None = "auto",
        n_iter: int = 10,
        solver: str = "auto",
        keep_history: bool = False,
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
        self.n_iter = n_iter
        self.solver = solver
        self.keep_history = keep_history
        self.whiten = whiten
        self.random_state = random_state
        self.ledger = ledger

    def _plan(self, table: Table) -> FitPlan:
        n, p = table.n_samples, table.n_features
        k = check_n_components(self.n_components, p, owner=self)
        T, solver = int(self.n_iter), self.solver  # declared: checked
        run = ReleasePipeline(
            self, self._settings(), n, p,
            Statistic("gaussian: XᵀX Q per power iteration (Frobenius sensitivity)",
                      lambda D: power_sensitivity(D, k), count=T,
                      subspace_rank=k),
            neighbouring=Neighbouring.REPLACE_ONE,
        )
        multiplier = (_composition_multiplier(run.epsilon, run.delta, T) if run.paper_mode
                      else run.statistic_multiplier())
        return FitPlan(run, settings={"k": k, "T": T, "solver": solver, "n": n, "p": p,
                                      "multiplier": multiplier})

    def _release(self, plan: FitPlan, prepared: Any, rng: np.random.Generator,
                 pre_rng: np.random.Generator) -> Release:
        """T noisy power steps on ``XᵀX`` of the prepared rows; the variances along Q_T."""
        run, settings = plan.run, plan.settings
        epsilon, delta = run.epsilon, run.delta
        k, T, multiplier = settings["k"], settings["T"], settings["multiplier"]
        n, p, solver = settings["n"], settings["p"], settings["solver"]
        sensitivity = power_sensitivity(prepared.data_norm, k)
        sigma = multiplier * sensitivity
        paper_sigma = hardt_price_noise_scale(epsilon, delta, k, T)

        if solver == "auto":
            solver = "gram" if _use_gram(n, p, k, T) else "data"
        operator: Any
        if solver == "gram" and run.recentre:  # held-out layout: re-centred Gram, one pass
            operator = run.recentred_gram(prepared, pre_rng)
        elif solver == "gram":  # a streamed table: one pass on the workers, noise added here
            operator = prepared.gram() if prepared.streamed else gram_matrix(prepared.rows)
        elif run.recentre:  # one pass for Σ y, then one per step
            operator = run.recentred_product(prepared, pre_rng)
        else:  # XᵀXQ without the Gram: one pass over the rows (or the stream) per step
            operator = prepared.product

        Q = random_orthonormal_basis(p, k, rng)
        history = np.empty((T, k, p)) if self.keep_history else None
        for t in range(T):
            Q = power_step(operator, Q, noise_scale=sigma, rng=rng, sensitivity=sensitivity)
            if history is not None:
                history[t] = Q.T
        spectrum = run.rotate_to_spectrum(prepared, fix_signs(Q).T.copy(), pre_rng)
        components = spectrum.components
        self.explained_variance_ = spectrum.explained_variance
        self.explained_variance_ratio_ = spectrum.explained_variance_ratio
        spend = run.statistic_spend(
            prepared.data_norm, sigma, multiplier=multiplier,
            epsilon=certified_epsilon(sigma, delta, sensitivity) if run.paper_mode else None,
            delta=delta if run.paper_mode else None)
        notes = (
            f"{T} adaptive releases of XᵀX Q + N(0, sigma²), each with sensitivity "
            f"{sensitivity:.4g} (replace one record) and noise multiplier {multiplier:.6g}, "
            "composed by dp-accounting; Q_0 is data-independent and every Q_t is "
            "post-processing. For comparison, Hardt & Price's entry-level calibration "
            f"would use sigma = {paper_sigma:.4g}·‖Q‖_∞ (not a row-level guarantee)."
        )
        if spectrum.read_off_high_pilot:
            notes += HIGH_PILOT_NOTE
        self.components_ = components
        self.n_iter_ = T
        self.noise_scale_ = sigma
        self.noise_multiplier_ = multiplier
        self.paper_noise_scale_ = paper_sigma
        self.noise_level_ = sigma / run.denominator(prepared)
        self.expected_error_ = spectrum.expected_error
        self.history_ = history
        self.solver_ = solver
        return Release(spend, "analytic (T-fold Gaussian composition, dp-accounting)", notes)
