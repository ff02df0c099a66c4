"""PPCA of Chaudhuri, Sarwate & Sinha: the exponential mechanism on the Stiefel manifold.

The released basis ``V`` (``p × k``, orthonormal columns) is drawn from the matrix Bingham law

    p(V) ∝ exp( ε/(2D²) · tr(Vᵀ XᵀX V) ) = exp( (n ε / (2D²)) · tr(Vᵀ A V) ),   A = XᵀX / n,

which is the exponential mechanism for the score ``q(V; X) = tr(VᵀXᵀXV) = Σᵢ ‖Vᵀxᵢ‖²``. With
``‖xᵢ‖ ≤ D`` every term lies in ``[0, D²]``, so replacing one record changes the score by at
most ``Δq = D²``, and sampling ``∝ exp(ε q / (2Δq))`` is ε-DP (pure, δ = 0) under
replace-one neighbours (McSherry & Talwar 2007). With ``D = 1`` this is the paper's
``exp((nε/2) tr(VᵀAV))``.

Sampling is by :mod:`privpca.mechanisms.bingham_sampler`: Hoff's Gibbs sampler for any ``k``,
or the exact rejection sampler of Kent, Ganeiber & Mardia for ``k = 1`` at low concentration.
"""

from __future__ import annotations

import math
import warnings
from typing import Any, ClassVar

import numpy as np
import scipy.linalg
from numpy.typing import NDArray
from sklearn.utils._param_validation import StrOptions
from threadpoolctl import threadpool_limits

from privpca._validation import (
    caller_stacklevel,
    check_n_components,
)
from privpca.accounting.ledger import PrivacyLedger
from privpca.accounting.neighbouring import Neighbouring
from privpca.accounting.record import PrivacySpend
from privpca.decomposition._base import FitPlan, PipelinePCA, Release
from privpca.decomposition._constraints import (
    DELTA_OR_ZERO,
    GRAM_PIPELINE,
    N_COMPONENTS,
    WHITEN,
    positive_int,
)
from privpca.exceptions import DataDependentWarning, PrivacyLeakWarning
from privpca.mechanisms.bingham_sampler import (
    UPDATES,
    ProposalBudgetExceededError,
    mixing_diagnostics,
    sample_bingham_exact,
    sample_bingham_gibbs,
    sample_haar,
)
from privpca.pipeline.release import ReleasePipeline
from privpca.pipeline.rows import Statistic, Table
from privpca.pipeline.spectrum import HIGH_PILOT_NOTE
from privpca.solvers.eigen import fix_signs
from privpca.solvers.gram import gram_matrix

__all__ = ["BinghamPCA"]

SAMPLERS = ("auto", "gibbs", "exact")
_ONE_THREAD_EIGH = 1024  # largest p whose eigh of B runs on one BLAS thread


#: What each sampler's guarantee rests on that the code cannot certify (the record's headline
#: states it; the notes say why): no closed-form bound on the exact sampler's acceptance rate a
#: is known, nor on the Gibbs chain's distance to the Bingham law after finitely many sweeps.
SAMPLER_CONDITIONS: dict[str, str] = {
    "exact": "the exact sampler's failure probability (1 - a)^max_proposals is negligible "
             "(its error is an output; see notes)",
    "exact-or-gibbs": "the exact sampler's failure probability (1 - a)^max_proposals is "
                      "negligible (the Gibbs fallback is uncertified; see notes)",
    "gibbs": "the Gibbs chain has reached the Bingham law (uncertified; see notes)",
}


class BinghamPCA(PipelinePCA):
    """Private PCA by the exponential mechanism (Chaudhuri, Sarwate & Sinha's PPCA).

    Releases ``V`` drawn from the matrix Bingham density
    ``∝ exp(ε/(2D²) · tr(VᵀXᵀXV))`` on the Stiefel manifold. Central model: the curator sees
    the data; only ``components_`` is released.

    **Privacy.** The score ``q(V) = tr(VᵀXᵀXV) = Σᵢ‖Vᵀxᵢ‖²`` has terms in ``[0, D²]``, so one
    replaced record moves it by at most ``D²``; the exponential mechanism
    ``∝ exp(ε q/(2D²))`` is then pure ε-DP (δ = 0) under replace-one neighbours — *for an exact
    draw*. The exact sampler (``k = 1``) draws exactly, up to floating point. The Gibbs
    sampler only approaches the Bingham law as its number of sweeps grows: if the law of its
    output is within total-variation distance η of the Bingham law for every data set, the
    release is (ε, (1 + e^ε)·η)-DP. **No bound on η is known for any finite number of
    sweeps**, so with ``sampler="gibbs"`` the defaults guarantee ε-DP only in the limit; what
    they give in practice is a chain that, in our measurements, reaches the level of its
    stationary trace within one or two sweeps from a data-independent random start (Hoff's
    coordinate updates draw each block from its exact conditional) and has an integrated
    autocorrelation time near 1 — evidence of mixing, not a certificate. ``privacy_.notes``
    says this. Chaudhuri et al. and Ge et al. ran 10³–10⁴ sweeps; raise ``burn_in`` to be
    more conservative.

    **What is published does not say which sampler ran.** The choice is a function of public
    parameters only (``sampler``, k, p): ``"uniform"`` for k = p, ``"exact"`` or ``"gibbs"``
    when asked, and for ``sampler="auto"`` with k = 1 the combined ``"exact-or-gibbs"``: the
    exact sampler within ``max_proposals`` proposals, and Hoff's Gibbs sampler only if every
    proposal is rejected. Whether that fallback runs depends on the data (the acceptance rate
    ``a`` of the exact sampler is a function of XᵀX), so ``sampler_``, ``n_sweeps_`` and
    ``privacy_`` are the same whichever ran; only the data holder hears of it, through a
    :class:`~privpca.exceptions.DataDependentWarning`. The guarantee covers the fallback: an
    accepted proposal is an exact Bingham draw, so the output's law is
    ``(1 − f)·Bingham + f·Gibbs`` with ``f = (1 − a)^max_proposals``, within total-variation
    distance ``f·η ≤ f`` of the Bingham law, and the release is
    ``(ε, (1 + e^ε)·sup f·η)``-DP (sup over the data sets of rows of norm ≤ D) — never weaker
    than the Gibbs sampler's guarantee, and δ below ``e^{-3000}`` at the default budget for
    the acceptance rates we measured (≥ 3 %, see ``sampler``); no closed-form lower bound on
    ``a`` is known. ``sampler="exact"`` raises instead of falling back: that error is the same
    kind of data-dependent event, of probability ``f``, covered the same way (counting the
    error as an output). Running times differ (a timing side channel): do not publish them.

    Parameters
    ----------
    n_components : int, default=2
        Dimension k of the released subspace.
    epsilon : float, default=1.0
        ε > 0 of the pure ε-DP guarantee.
    delta : float, default=1e-5
        δ of the Gaussian preprocessing (private mean, norm bound, variances). The
        exponential mechanism itself is pure: with ``centering=None`` and a numeric
        ``data_norm`` nothing else is released and the fit is pure ε-DP (δ unused, recorded
        as 0). Otherwise the preprocessing gets a share ``s`` of ε (and all of δ) and the
        mechanism ``(1 − s)·ε``, by basic composition.
    centering : "private", None or array of shape (n_features,), default="private"
        As in :class:`~privpca.AnalyzeGaussPCA`.
    data_norm : "auto", "select", "quantile" or float, default="auto"
        Bound D on every (centred, scaled) row's L2 norm: chosen for the table by two pilot
        Grams (``"auto"``, ``"select"``; ``"quantile"`` is a private 99 % quantile of the
        norms, and so is ``"auto"`` above 256 features: as in
        :class:`~privpca.AnalyzeGaussPCA`), or a public float (longer rows are clipped, with
        a :class:`~privpca.exceptions.RowClippingWarning` for the data holder that does not
        say how many: that count is not private).
    scale : bool or array of shape (n_features,), default=False
        As in :class:`~privpca.AnalyzeGaussPCA`.
    budget_shares : dict or None, default=None
        Shares of the Gaussian preprocessing (and ``"variance"``); see
        :data:`privpca.pipeline.budget.DEFAULT_SHARES`.
    holdout_fraction : "auto", None or float in (0, 0.5], default="auto"
        As in :class:`~privpca.AnalyzeGaussPCA`: the preprocessing from a held-out share of
        the rows (a secret, uniformly random set) at the whole (ε, δ), the statistic from the
        rest (``"auto"``: 2 % from 10⁷ rows on).
    sampler : {"auto", "gibbs", "exact"}, default="auto"
        ``"exact"``: Kent–Ganeiber–Mardia rejection sampling (``k = 1`` only); raises
        :class:`~privpca.mechanisms.bingham_sampler.ProposalBudgetExceededError` after
        ``max_proposals`` rejections. ``"gibbs"``: Hoff's Gibbs sampler. ``"auto"``: for
        ``k = 1`` the ``"exact-or-gibbs"`` sampler (the exact sampler within ``max_proposals``
        and, if the budget runs out, Hoff's Gibbs sampler, with a
        :class:`~privpca.exceptions.DataDependentWarning` for the data holder only; nothing
        published changes, see **What is published** above); Gibbs for ``k > 1``.
        In our measurements the exact sampler accepted 3–30 % of proposals even at
        ``εn/2 ≈ 2·10³`` (p = 50 to 800), so the fallback is rare at the default budget.
    update : {"row", "column"}, default="row"
        Gibbs block scheme (see :mod:`privpca.mechanisms.bingham_sampler`). ``"column"`` is
        Hoff's and rstiefel's (each column given the others; an ``O(p³)``
        eigendecomposition per column); ``"row"`` applies the same coordinate updates to the
        rows of ``V`` in the eigenbasis of ``XᵀX`` (``O(p k³)`` per sweep). Both leave the
        Bingham law invariant; for ``k = 1`` they are the same algorithm.
    burn_in : int, default=100
        Gibbs sweeps run before the diagnostic window. The released basis is the state after
        ``burn_in + n_iter`` sweeps, so privacy depends on that total (see above).
    n_iter : int, default=100
        Gibbs sweeps after ``burn_in``; mixing diagnostics (``diagnostic_chains > 0``) are
        computed on these.
    max_proposals : int, default=100_000
        Proposal budget of the exact sampler.
    diagnostic_chains : int, default=0
        When positive, run this many further independent Gibbs chains beside the released one
        and store every chain's trace of ``tr(VᵀAV)`` in ``trace_`` and their diagnostics in
        ``mixing_``. **These are computed from the data without noise and are not covered by
        privacy_**; a :class:`~privpca.exceptions.PrivacyLeakWarning` says so. Use them on
        synthetic or public data of the same shape to choose ``burn_in``.
    whiten : bool, default=False
        Divide the projections of :meth:`transform` by ``sqrt(explained_variance_)`` (and
        multiply them back in :meth:`inverse_transform`), as scikit-learn's ``PCA``:
        post-processing of released values; the fit is the same either way.
    random_state : None, int or numpy.random.Generator, default=None
        Source of randomness. A fixed seed reproduces a fit exactly.
    ledger : PrivacyLedger or None, default=None
        Where the spend is recorded (``None``: :func:`privpca.accounting.default_ledger`).

    Attributes
    ----------
    components_ : ndarray of shape (n_components, n_features)
        Orthonormal rows spanning the released subspace (signs fixed by the largest entry).
    mean_, scale_, data_norm_
        As in :class:`~privpca.AnalyzeGaussPCA`.
    explained_variance_, explained_variance_ratio_ : ndarray of shape (n_components,)
        Private variances along the components and their ratio to the private total (the
        pipeline's ``"variance"`` part), made feasible
        (:func:`~privpca.pipeline.spectrum.feasible_spectrum`); NaN in the papers' setting.
    noise_level_ : float
        NaN: the exponential mechanism has no additive noise to report.
    expected_error_ : float or None
        The smaller of the Ky Fan and the Davis–Kahan residual bounds from the released
        variances and residual pair, w.p. ≥ 95 %, capped at √(2k), against the rows clipped
        at the bound selection's robust maximum (so it covers the rotation clipping at a lower
        chosen bound causes): :mod:`privpca.pipeline.basis_error`. None in the papers' setting: the
        exponential mechanism's utility bound (the sampled basis's Rayleigh trace is within
        ``O(kp·T)`` of the top-k sum at temperature T) turns into a distance only through ``XᵀX``'s
        eigengap, not released.
    privacy_ : PrivacyRecord
        ε, δ (0 in the papers' setting), central model, replace-one neighbours,
        ``sensitivity`` = D² (of the score), ``noise_scale`` = the temperature ``2D²/ε`` of
        the mechanism (density ``∝ exp(q/T)``), ``calibration = "exponential mechanism"``.
    sampler_ : str
        The sampler in use, a function of the public parameters only: ``"exact"``,
        ``"gibbs"``, ``"exact-or-gibbs"`` (``sampler="auto"``, k = 1: which of the two drew
        ``components_`` is deliberately not recorded), or ``"uniform"`` when ``k = p``, where
        the Bingham law is the Haar law whatever the data.
    n_sweeps_ : int
        Gibbs sweeps of the sampler's chain, a function of the public parameters only:
        ``burn_in + n_iter`` for ``"gibbs"`` and ``"exact-or-gibbs"`` (the fallback's length,
        whether or not it ran), 0 for ``"exact"`` and ``"uniform"``.
    trace_ : ndarray of shape (1 + diagnostic_chains, burn_in + n_iter)
        Only when ``diagnostic_chains > 0``: ``tr(VᵀAV)`` (in ``[0, k·D²]``) after every sweep;
        row 0 is the released chain. Not private.
    mixing_ : dict
        Only when ``diagnostic_chains > 0``:
        :func:`~privpca.mechanisms.bingham_sampler.mixing_diagnostics` of
        ``trace_[:, burn_in:]``. Read it as: ``split_rhat`` ≤ 1.01 (chains from different
        random starts agree), ``ess`` in the hundreds or more, ``|geweke_z|`` ≲ 2 (the
        window's start and end agree), ``flags`` empty. A failed check means ``burn_in`` is
        too short; passing them detects no problem but certifies nothing. Not private.
    n_features_in_ : int

    See Also
    --------
    privpca.mechanisms.bingham_sampler.sample_bingham_gibbs
    privpca.mechanisms.bingham_sampler.sample_bingham_exact

    References
    ----------
    K. Chaudhuri, A. D. Sarwate, K. Sinha. A near-optimal algorithm for differentially-private
    principal components. JMLR 14, 2013 (PPCA). F. McSherry, K. Talwar. Mechanism design via
    differential privacy. FOCS 2007. P. D. Hoff. Simulation of the matrix Bingham–von
    Mises–Fisher distribution. JCGS 18(2), 2009. J. T. Kent, A. M. Ganeiber, K. V. Mardia.
    A new unified approach for the simulation of a wide class of directional distributions.
    JCGS 27(2), 2018.

    Examples
    --------
    >>> from privpca import BinghamPCA
    >>> from privpca.datasets import make_spiked
    >>> X, V = make_spiked(2_000, 8, 2, lam=9.0, random_state=0)
    >>> est = BinghamPCA(n_components=2, epsilon=1.0, centering=None, data_norm=1.0,
    ...                  random_state=0).fit(X)
    >>> est.components_.shape
    (2, 8)
    >>> est.privacy_.delta
    0.0
    """

    _parameter_constraints: ClassVar[dict[str, list[Any]]] = {
        **GRAM_PIPELINE,
        "n_components": N_COMPONENTS,  # no released spectrum to pick k from a share
        "delta": DELTA_OR_ZERO,
        "sampler": [StrOptions(set(SAMPLERS))],
        "update": [StrOptions(set(UPDATES))],
        "burn_in": positive_int(0),
        "n_iter": positive_int(0),
        "max_proposals": positive_int(),
        "diagnostic_chains": positive_int(0),
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
        sampler: str = "auto",
        update: str = "row",
        burn_in: int = 100,
        n_iter: int = 100,
        max_proposals: int = 100_000,
        diagnostic_chains: int = 0,
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
        self.sampler = sampler
        self.update = update
        self.burn_in = burn_in
        self.n_iter = n_iter
        self.max_proposals = max_proposals
        self.diagnostic_chains = diagnostic_chains
        self.whiten = whiten
        self.random_state = random_state
        self.ledger = ledger

    # ------------------------------------------------------------------------------------
    def _check_params(self, n_features: int) -> int:
        # Each value was checked against its declaration; what remains depends on p.
        k = check_n_components(self.n_components, n_features, owner=self)
        if self.sampler == "exact" and k != 1:
            raise ValueError(
                f"sampler='exact' of BinghamPCA samples one direction only: it requires "
                f"n_components=1. Got n_components={k} instead; use sampler='gibbs'."
            )
        if self.sampler != "exact" and k < n_features and int(self.burn_in) + int(self.n_iter) < 1:
            raise ValueError(
                "burn_in + n_iter of BinghamPCA must be at least 1 for the Gibbs sampler. "
                f"Got burn_in={self.burn_in!r}, n_iter={self.n_iter!r} instead."
            )
        return k

    def _resolve_sampler(self, k: int, n_features: int) -> str:
        """The sampler, decided from public quantities only (``sampler``, k, p): what
        ``sampler_`` publishes, whatever happens during the draw."""
        if k == n_features:
            return "uniform"
        if self.sampler != "auto":
            return str(self.sampler)
        return "exact-or-gibbs" if k == 1 else "gibbs"

    def _statistic_spend(
        self, eps: float, data_norm: float, sampler: str
    ) -> tuple[PrivacySpend, str]:
        """The exponential mechanism's spend at ε = ``eps`` and the notes on its sampler."""
        D2 = float(data_norm) ** 2
        temperature = 2.0 * D2 / eps
        spend = PrivacySpend(
            mechanism=(
                "exponential mechanism: matrix Bingham exp(epsilon tr(V^T X^T X V)/(2 D^2)) "
                "on the Stiefel manifold"
            ),
            epsilon=eps,
            delta=0.0,
            sensitivity=D2,
            noise_scale=temperature,
            dp_event=None,  # dp-accounting has no event for a generic pure ε-DP mechanism
            condition=SAMPLER_CONDITIONS.get(sampler, ""),
        )
        gibbs = (f"Hoff's Gibbs sampler ({self.update} updates, "
                 f"{int(self.burn_in) + int(self.n_iter)} sweeps from a data-independent "
                 "random start)")
        if sampler == "exact":
            how = (
                "Drawn exactly (Kent-Ganeiber-Mardia rejection sampling), so the guarantee "
                "holds up to floating point. If all max_proposals proposals are rejected "
                "(probability f = (1 - a)^max_proposals, a the acceptance rate on these data) "
                "the fit raises instead of releasing; counting that error as an output, the "
                "release is (epsilon, (1 + e^epsilon) * sup f)-DP. Its running time depends "
                "on the data (a timing side channel): do not release it."
            )
        elif sampler == "exact-or-gibbs":
            how = (
                "Drawn by the exact Kent-Ganeiber-Mardia rejection sampler within "
                f"max_proposals={int(self.max_proposals)} proposals or, only if all of them "
                f"are rejected, by {gibbs}. Which of the two ran depends on the data and is "
                "not published: sampler_, n_sweeps_ and these notes are the same either way. "
                "An accepted proposal is an exact Bingham draw, so with a the acceptance rate "
                "on these data and f = (1 - a)^max_proposals the output's law is within "
                "total-variation distance f * eta <= f of the Bingham law (eta: the Gibbs "
                "chain's, unknown), and the release is (epsilon, (1 + e^epsilon) * sup f * "
                "eta)-DP over data sets of rows of norm <= D: never weaker than the Gibbs "
                "sampler's guarantee; no closed-form bound on a is known (measured acceptance "
                "rates of 3-30 % make f negligible at the default budget). The running time "
                "depends on the data (a timing side channel): do not release it."
            )
        elif sampler == "uniform":
            how = (
                "n_components = n_features: the Bingham law is the Haar law whatever the data; "
                "the output is an exact Haar draw."
            )
        else:
            how = (
                f"Drawn by {gibbs}. The guarantee is that of an exact draw: if the output's law "
                "is within total-variation distance eta of the Bingham law for every data set, "
                "the release is (epsilon, (1 + e^epsilon) * eta)-DP. No bound on eta is known "
                "for a finite number of sweeps: delta = 0 holds only in the limit, and mixing "
                "diagnostics can reveal non-convergence but never certify convergence."
            )
        notes = (
            "Pure epsilon-DP exponential mechanism with score tr(V^T X^T X V) "
            "(sensitivity D^2 under replacement); noise_scale holds its temperature "
            "2 D^2 / epsilon (density proportional to exp(score / temperature)). "
            + how
            + " The spend has no dp-accounting event: compose it with others by basic "
            "composition (epsilons add)."
        )
        return spend, notes

    # ------------------------------------------------------------------------------------
    def _plan(self, table: Table) -> FitPlan:
        n, p = table.n_samples, table.n_features
        k = self._check_params(p)
        run = ReleasePipeline(
            self, self._settings(), n, p,
            Statistic("exponential mechanism on the Stiefel manifold (matrix Bingham)",
                      lambda D: D**2, kind="pure", subspace_rank=k),
            neighbouring=Neighbouring.REPLACE_ONE_RECORD,
        )
        return FitPlan(run, settings={"k": k, "n": n, "p": p,
                                      "epsilon": float(run.statistic_budget.epsilon),
                                      "sampler": self._resolve_sampler(k, p)})

    def _release(self, plan: FitPlan, prepared: Any, rng: np.random.Generator,
                 pre_rng: np.random.Generator) -> Release:
        """Sample the basis from the Bingham law of the prepared rows' Gram matrix."""
        run, settings = plan.run, plan.settings
        k, n, p, eps, sampler = (settings[key] for key in ("k", "n", "p", "epsilon", "sampler"))
        data_norm = prepared.data_norm
        for attr in ("trace_", "mixing_"):
            if hasattr(self, attr):
                delattr(self, attr)
        n_sweeps = int(self.burn_in) + int(self.n_iter)
        # Published whatever the data: functions of the public parameters only.
        self.sampler_ = sampler
        self.n_sweeps_ = 0 if sampler in ("exact", "uniform") else n_sweeps
        self.noise_level_ = math.nan
        if sampler == "uniform":
            V = sample_haar(p, rng)
            return self._finish(run, prepared, np.asarray(fix_signs(V).T), eps, sampler, pre_rng)

        inv_temp = eps / (2.0 * data_norm**2)
        # A streamed table: one Gram pass on the workers; the sampler runs here.
        if run.recentre:  # held-out layout: re-centred on the statistic's own rows
            B = run.recentred_gram(prepared, pre_rng)
        else:
            B = prepared.gram() if prepared.streamed else gram_matrix(prepared.rows)
        B *= inv_temp
        # Up to p ≈ 10³ this eigh is latency-bound: a second BLAS thread only adds
        # contention (docs/BENCHMARKS.md, "Measurements behind small code choices").
        threads = 1 if p <= _ONE_THREAD_EIGH else None
        with threadpool_limits(limits=threads, user_api="blas"):
            lam, U = scipy.linalg.eigh(B, check_finite=False, overwrite_a=True)
        # LAPACK's eigenvector signs are arbitrary and flip under last-bit changes of B (a
        # Gram summed in another order, e.g. streamed): fix them so that the chain, which
        # runs in U's coordinates, is a function of B itself.
        U = fix_signs(U)
        if sampler in ("exact", "exact-or-gibbs"):
            try:
                res = sample_bingham_exact(
                    lam, eigenvectors=U, max_proposals=int(self.max_proposals), rng=rng
                )
            except ProposalBudgetExceededError:
                if sampler == "exact":
                    raise
                # The fallback changes nothing published (sampler_, n_sweeps_, privacy_ are
                # fixed above); only the data holder is told.
                warnings.warn(
                    "BinghamPCA: the exact sampler exhausted max_proposals="
                    f"{self.max_proposals}; the Gibbs sampler drew the released basis. Whether "
                    "this happens depends on the data: this warning is for the data holder "
                    "only, never publish it (sampler_ and privacy_ do not show it).",
                    DataDependentWarning,
                    stacklevel=caller_stacklevel(),
                )
            else:
                return self._finish(run, prepared,
                                    np.asarray(fix_signs(res.vector[:, None]).T), eps,
                                    sampler, pre_rng)

        chain = sample_bingham_gibbs(
            lam, k, n_sweeps, eigenvectors=U, update=str(self.update), rng=rng
        )
        release = self._finish(run, prepared, np.asarray(fix_signs(chain.basis).T), eps,
                               sampler, pre_rng)
        if int(self.diagnostic_chains) > 0:
            self._diagnose(chain.trace, lam, k, n_sweeps, n, rng, eps, data_norm)
        return release

    def _finish(
        self,
        run: ReleasePipeline,
        prepared: Any,
        components: NDArray[np.float64],
        eps: float,
        sampler: str,
        rng: np.random.Generator,
    ) -> Release:
        """Variances (outside the papers' setting), the fitted attributes, the record's
        statistic."""
        spectrum = run.rotate_to_spectrum(prepared, components, rng)
        components = spectrum.components
        self.explained_variance_ = spectrum.explained_variance
        self.explained_variance_ratio_ = spectrum.explained_variance_ratio
        self.expected_error_ = spectrum.expected_error
        spend, notes = self._statistic_spend(eps, prepared.data_norm, sampler)
        if not run.paper_mode:
            notes += (" The Gaussian preprocessing parts and the exponential mechanism compose "
                      "by basic composition to the requested (epsilon, delta).")
        if spectrum.read_off_high_pilot:
            notes += HIGH_PILOT_NOTE
        self.components_ = components
        return Release(spend, "exponential mechanism", notes)

    def _diagnose(
        self,
        released: NDArray[np.float64],
        lam: NDArray[np.float64],
        k: int,
        n_sweeps: int,
        n_samples: int,
        rng: np.random.Generator,
        eps: float,
        data_norm: float,
    ) -> None:
        warnings.warn(
            "BinghamPCA: trace_ and mixing_ are computed from the data without noise and are "
            "not covered by privacy_. Do not release them; use them on synthetic or public "
            "data to choose burn_in.",
            PrivacyLeakWarning,
            stacklevel=caller_stacklevel(),
        )
        traces = [released]
        for _ in range(int(self.diagnostic_chains)):
            traces.append(
                sample_bingham_gibbs(lam, k, n_sweeps, update=str(self.update), rng=rng).trace
            )
        # tr(VᵀBV) → tr(VᵀAV): B = ε/(2D²)·XᵀX and A = XᵀX/n.
        scale = 2.0 * data_norm**2 / (eps * n_samples)
        self.trace_ = np.vstack(traces) * scale
        window = self.trace_[:, int(self.burn_in) :]
        self.mixing_ = (
            mixing_diagnostics(window)
            if window.shape[1] >= 4
            else {"flags": ["n_iter < 4: too few post-burn-in sweeps to diagnose."]}
        )
