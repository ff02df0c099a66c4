"""MOD-SuLQ (Chaudhuri, Sarwate & Sinha 2013): PCA of ``XᵀX/n + N`` with their noise level β.

A trusted curator releases the top-k eigenvectors of ``A = XᵀX/n + N``, where ``N`` is
symmetric with i.i.d. ``N(0, β²)`` upper triangle (diagonal included) and

    β = (d+1)/(nε) · √(2 ln((d² + d)/(2δ√(2π)))) + 1/(n√ε).

β is a **standard deviation**. (A public Python port draws the entries with standard deviation
β², which for β < 1 is far less noise than the theorem requires; privpca's tests check that the
noise here has standard deviation β.)

Privacy
-------
* The (ε, δ) claim is Chaudhuri et al.'s theorem for MOD-SuLQ, for data sets that differ in one
  record (replacement, ``n`` public) with every ``‖x‖ ≤ 1``.
* ``data_norm = D ≠ 1``: the theorem is applied to ``X/D`` (norms ≤ 1); its ``A`` scaled by D²
  is ``XᵀX/n + D²N``, with the same eigenvectors. So the noise added to ``XᵀX/n`` has standard
  deviation ``D²β``.
* For comparison, privpca also computes the ε that the Gaussian-mechanism analysis certifies
  for that noise: the packed upper triangle of ``XᵀX/n`` has L2 sensitivity ``√2·D²/n`` under
  replacement (same derivation as :mod:`privpca.decomposition.analyze_gauss`), so
  ``ε_Gauss = certified_epsilon(D²β, δ, √2·D²/n)``, which does not depend on D. It is usually
  far below ε: β grows like ``d/n`` while the Gaussian mechanism needs only ``√2/n`` times a
  factor independent of d. That ε is stored in ``certified_epsilon_`` and the record's notes,
  and the spend's ``dp_event`` (what a ledger composes) is that Gaussian mechanism.
"""

from __future__ import annotations

import math
from typing import Any, ClassVar

import dp_accounting
import numpy as np

from privpca._validation import check_delta, check_epsilon, check_in_range
from privpca.accounting.ledger import PrivacyLedger
from privpca.accounting.neighbouring import Neighbouring
from privpca.decomposition._base import FitPlan, PipelinePCA, Release
from privpca.decomposition._constraints import GRAM_PIPELINE, N_COMPONENTS_SPECTRUM, WHITEN
from privpca.mechanisms.gaussian import certified_epsilon
from privpca.mechanisms.noise import symmetric_gaussian_release
from privpca.mechanisms.secure_noise import fast_stream
from privpca.pipeline.release import ReleasePipeline
from privpca.pipeline.rows import Statistic, Table
from privpca.pipeline.scale_refinement import fit_released_matrix, refinement_note
from privpca.pipeline.spectrum import (
    HIGH_PILOT_NOTE,
    check_n_components_spec,
)

__all__ = ["ModSuLQPCA", "mod_sulq_beta"]


def mod_sulq_beta(n_samples: int, n_features: int, epsilon: float, delta: float) -> float:
    """Chaudhuri et al.'s MOD-SuLQ noise standard deviation β (records of norm ≤ 1).

    ``β = (d+1)/(nε)·√(2 ln((d²+d)/(2δ√(2π)))) + 1/(n√ε)``.

    Parameters
    ----------
    n_samples, n_features : int
        n and d.
    epsilon, delta : float
        The (ε, δ) of their theorem.

    Returns
    -------
    beta : float
        The standard deviation (not the variance) of each upper-triangle noise entry on
        ``XᵀX/n``.

    Raises
    ------
    ValueError
        If ``(d² + d)/(2δ√(2π)) ≤ 1``, where the formula has no real value (only for d = 1 with
        δ ≥ 1/√(2π) ≈ 0.399).
    """
    n = int(check_in_range(n_samples, "n_samples", low=1, low_closed=True, integer=True))
    d = int(check_in_range(n_features, "n_features", low=1, low_closed=True, integer=True))
    epsilon = check_epsilon(epsilon)
    delta = check_delta(delta)
    ratio = (d * d + d) / (2.0 * delta * math.sqrt(2.0 * math.pi))
    if ratio <= 1.0:
        raise ValueError(
            f"MOD-SuLQ's beta is undefined for d={d}, delta={delta:g}: "
            f"(d²+d)/(2·delta·√(2π)) = {ratio:.4g} must exceed 1. Use a smaller delta."
        )
    return (d + 1) / (n * epsilon) * math.sqrt(2.0 * math.log(ratio)) + 1.0 / (
        n * math.sqrt(epsilon)
    )


class ModSuLQPCA(PipelinePCA):
    """Central-model PCA by Chaudhuri et al.'s MOD-SuLQ: eigenvectors of ``XᵀX/n + N``.

    ``N`` is symmetric with i.i.d. ``N(0, (D²β)²)`` upper triangle (diagonal included), β as in
    :func:`mod_sulq_beta`. On defaults the rows are first centred on a private mean and
    clipped to a private norm bound D (:mod:`privpca.pipeline.release`); MOD-SuLQ then gets
    ``(ε, δ)·(1 − s)`` of the budget by basic composition, ``s`` being the preprocessing's
    share. ``certified_epsilon_`` gives the (usually much smaller) ε that the
    Gaussian-mechanism analysis certifies for the same noise, to show how loose the theorem's
    bound is.

    Parameters
    ----------
    n_components : int or float, default=2
        Dimension k of the subspace, or a fraction in (0, 1) of the private explained
        variance (scikit-learn's convention).
    epsilon : float, default=1.0
        ε > 0 of the whole fit's (ε, δ)-DP guarantee.
    delta : float, default=1e-5
        0 < δ < 1.
    centering : "private", None or array of shape (n_features,), default="private"
        As in :class:`~privpca.AnalyzeGaussPCA`.
    data_norm : "auto", "select", "quantile" or float, default="auto"
        Bound D on every (centred, scaled) row's L2 norm: chosen for the table by two pilot
        Grams (``"auto"``, ``"select"``; ``"quantile"`` is a private 99 % quantile of the
        norms, and so is ``"auto"`` above 256 features: as in
        :class:`~privpca.AnalyzeGaussPCA`),
        or a public
        float (longer rows are clipped, with a
        :class:`~privpca.exceptions.RowClippingWarning`). The paper assumes D = 1; for other D
        the data are analysed as ``X/D`` and the noise on ``XᵀX/n`` is ``D²β``.
    scale : bool or array of shape (n_features,), default=False
        As in :class:`~privpca.AnalyzeGaussPCA`.
    budget_shares : dict or None, default=None
        As in :class:`~privpca.AnalyzeGaussPCA`.
    holdout_fraction : "auto", None or float in (0, 0.5], default="auto"
        As in :class:`~privpca.AnalyzeGaussPCA`: the preprocessing from a held-out share of
        the rows (a secret, uniformly random set) at the whole (ε, δ), the statistic from the
        rest (``"auto"``: 2 % from 10⁷ rows on).
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
        Orthonormal rows: top-k eigenvectors of ``A``, decreasing eigenvalue order.
    n_components_ : int
    mean_, scale_, data_norm_
        As in :class:`~privpca.AnalyzeGaussPCA`.
    explained_variance_ : ndarray of shape (n_components_,)
        Top eigenvalues of ``A = XᵀX/n + N``, rescaled to n − 1 when centred, debiased for
        the noise as in :class:`~privpca.AnalyzeGaussPCA` (0: not resolved).
    explained_variance_ratio_ : ndarray of shape (n_components_,)
        Over the trace of ``A`` (the private total variance, ``total_variance_``).
    noise_level_, expected_error_ : float
        As in :class:`~privpca.AnalyzeGaussPCA` (noise std ``D²β`` per entry of ``A``).
    beta_ : float
        β of the formula (for records of norm ≤ 1).
    noise_scale_ : float
        ``D²·β``, the standard deviation of each upper-triangle entry of the noise added to
        ``XᵀX/n``.
    certified_epsilon_ : float
        ε certified at the statistic's δ by the Gaussian mechanism with sensitivity
        ``√2·D²/n`` (replace-one) for noise ``D²β``.
    privacy_ : PrivacyRecord
        ``epsilon``/``delta`` are the request (the theorem's share plus the preprocessing's);
        the statistic's ``sensitivity`` is ``√2·D²/n``; the notes repeat
        ``certified_epsilon_``.
    n_features_in_ : int

    Notes
    -----
    Cost: one Gram matrix (``O(nd²)``), ``d(d+1)/2`` normal draws and the top-k eigenpairs.

    References
    ----------
    K. Chaudhuri, A. D. Sarwate, K. Sinha. A near-optimal algorithm for differentially-private
    principal components. JMLR 14 (2013), Algorithm MOD-SuLQ. (A modification of the SuLQ
    framework of Blum, Dwork, McSherry & Nissim, PODS 2005.)

    Examples
    --------
    >>> from privpca.decomposition.mod_sulq import ModSuLQPCA
    >>> from privpca.datasets import make_spiked
    >>> X, V = make_spiked(10_000, 10, 2, lam=9.0, random_state=0)
    >>> est = ModSuLQPCA(n_components=2, epsilon=1.0, centering=None, data_norm=1.0,
    ...                  random_state=0).fit(X)
    >>> est.certified_epsilon_ < est.privacy_.epsilon
    True
    """

    _parameter_constraints: ClassVar[dict[str, list[Any]]] = {
        **GRAM_PIPELINE, "n_components": N_COMPONENTS_SPECTRUM, "whiten": WHITEN}

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
        self.whiten = whiten
        self.random_state = random_state
        self.ledger = ledger

    def _plan(self, table: Table) -> FitPlan:
        n, d = table.n_samples, table.n_features
        k = check_n_components_spec(self.n_components, d, self)
        n_stat = [n]  # the statistic's rows: n, or the rows not held out (public)
        noise = [math.nan]  # σ/Δ, once the statistic's budget is known (public)
        run = ReleasePipeline(
            self, self._settings(), n, d,
            Statistic("gaussian (MOD-SuLQ): packed upper triangle of XᵀX/n",
                      lambda D: math.sqrt(2.0) * D**2 / n_stat[0], kind="approx",
                      releases_spectrum=True,
                      subspace_rank=k if isinstance(k, int) else 0,
                      noise_multiplier=lambda: noise[0]),
            neighbouring=Neighbouring.REPLACE_ONE,
        )
        n = n_stat[0] = run.n_statistic
        eps_s, delta_s = run.statistic_budget.epsilon, run.statistic_budget.delta
        beta = mod_sulq_beta(n, d, eps_s, delta_s)
        # σ/Δ = D²β/(√2·D²/n) does not depend on D: the event is known before the data.
        multiplier = noise[0] = beta * n / math.sqrt(2.0)
        return FitPlan(run, charge={"statistic_event": dp_accounting.GaussianDpEvent(multiplier)},
                       settings={"k": k, "n": n, "d": d, "beta": beta, "multiplier": multiplier})

    def _release(self, plan: FitPlan, prepared: Any, rng: np.random.Generator,
                 pre_rng: np.random.Generator) -> Release:
        """``XᵀX/n`` of the prepared rows, MOD-SuLQ's Gaussian noise, top-k."""
        run, settings = plan.run, plan.settings
        n, beta, multiplier = settings["n"], settings["beta"], settings["multiplier"]
        eps_s, delta_s = run.statistic_budget.epsilon, run.statistic_budget.delta
        data_norm = prepared.data_norm
        scale = data_norm**2 * beta
        sensitivity = math.sqrt(2.0) * data_norm**2 / n
        eps_gauss = certified_epsilon(scale, delta_s, sensitivity)
        A = run.recentred_gram(prepared, pre_rng) if run.recentre else prepared.gram()
        A /= n
        A = symmetric_gaussian_release(A, scale, rng, sensitivity=sensitivity)
        # The pilots are in the Gram's units: A = G/n.
        fit, refinement, high = fit_released_matrix(
            A, scale, self.scale, settings["k"], denominator=run.denominator(prepared) / n,
            extra_perturbation=run.mean_perturbation(prepared) / n, rng=fast_stream(rng),
            choice=run.bound_choice(prepared), units=n)
        spend = run.statistic_spend(data_norm, scale, multiplier=multiplier)
        notes = (
            f"(epsilon, delta) = ({eps_s:.6g}, {delta_s:.3g}) for the statistic from Chaudhuri "
            f"et al.'s MOD-SuLQ theorem with beta = {beta:.6g} for records of norm <= 1"
            + (
                f", applied to X/data_norm (noise std data_norm²·beta = {scale:.6g})"
                if data_norm != 1.0
                else ""
            )
            + f". The Gaussian-mechanism analysis (L2 sensitivity √2·D²/n = "
            f"{sensitivity:.4g} under replacement) certifies epsilon = {eps_gauss:.4g} at "
            "the same delta for this noise; the dp_event composed by a ledger is that "
            "Gaussian mechanism."
        )
        if not run.paper_mode:
            notes += (" The preprocessing parts and the statistic compose by basic composition "
                      "to the requested (epsilon, delta).")
        if high:
            notes += HIGH_PILOT_NOTE
        self._set_spectrum(fit)
        self.expected_error_ = run.spectrum_bar(prepared, self.components_, self.expected_error_,
                                                rng, refinement)
        self.beta_ = beta
        self.noise_scale_ = scale
        self.certified_epsilon_ = eps_gauss
        return Release(spend, "mod-sulq", notes + refinement_note(refinement),
                       refinement=refinement)
