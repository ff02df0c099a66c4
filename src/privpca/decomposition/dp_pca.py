"""DP-PCA (Liu, Kong, Jain & Oh 2022, Algorithm 3), to rank k, with a private learning-rate search.

Minibatch Oja in which every step privatises its gradient *adaptively*: with ``B`` records per
step and ``T = ⌊n/B⌋`` steps (each record used once), step t

1. runs Algorithm 4 (:class:`~privpca.mechanisms.gradient_statistics.PrivateTopEigenvalue`) on
   the gradients ``A_i W`` of the first half of the batch → ``Λ_t``, the spread of the
   gradients (a step whose histogram releases nothing reuses the last released ``Λ``, or
   before the first one, on a table, one set by the held-out private bound; counted, and
   warned of when more than half of the steps fail: ``n_eigen_failures_``);
2. runs Algorithm 5 (:class:`~privpca.mechanisms.gradient_statistics.PrivateMean`) on the
   second half, truncating to a box whose size is set by ``Λ_t`` → ``ĝ_t``;
3. ``W ← ThinQR(W + η_t ĝ_t)``.

The noise therefore scales with the *range* of the gradients, not their norm: on Liu et al.'s
Example 4.1 it vanishes with the data's noise σ, while Private Oja's does not.

Privacy (central model, replace one record; no norm bound on the data needed)
------------------------------------------------------------------------------
Both subroutines are (ε, δ)-DP for their half-batch whatever the data (the truncation box is
computed from released quantities, and its diameter sets the sensitivity). Each record enters
exactly one mechanism call — Algorithm 4 or 5 of one step — and every other step reads other
records, so by parallel composition over disjoint records **the whole run is (ε, δ)-DP** when
each call is (ε, δ)-DP (``budget_split="parallel"``, the default) [derived, ALGORITHMS.md].
Algorithm 3 as printed gives each call (ε/2, δ/2) (``budget_split="paper"``); by the same
argument that run is (ε/2, δ/2)-DP, which the record states (with the requested ε as target).

When a ledger composes a DP-PCA fit with other fits, the fit is represented, conservatively,
by the composition of *both* calls' events (as if a record entered both) plus the histograms'
tails (:mod:`privpca.mechanisms.histogram`).

Rank k
------
Block Oja: each record's gradient is the p×k block ``A_i W``, privatised as one vector of
``q = p·k`` coordinates (eigenvalue of its covariance, ``q`` centre histograms, a q-dimensional
Gaussian). No split of the budget across components is needed — each record still enters one
call — but the noise grows with ``q``.

On a table: centring by pair differences (the defaults)
-------------------------------------------------------
DP-PCA has no norm bound to centre with, and needs none: with ``centering="private"`` it
centres by **pair differences**. The records left after a small held-out share are paired in
their (uniformly random) order and the stream reads ``g = (x_a − x_b)/√2``, whose second moment
is the covariance Σ (mean zero; for a fixed table, on average over the pairing, exactly the
sample covariance). Replacing one record replaces at most one derived record, so the derived
data set is a neighbour under the same replace-one relation and the guarantee above holds
unchanged for the ``m = ⌊(n − n_held)/2⌋`` derived records — no budget is spent on centring
the subspace; the price is half the records. The held-out share releases ``mean_`` (a
two-round private mean clipped at private norm quantiles), a private bound D and the explained
variance (``VᵀGV``, Δ = √2·D²) at the full (ε, δ), in parallel with the stream (disjoint
records). :mod:`privpca.decomposition._stochastic` has the full argument. ``centering=None``
is the paper's uncentred algorithm exactly; an array is a public mean, subtracted.

Streamed tables (one pass, in the table's order)
------------------------------------------------
``fit`` on a Dask array, a memory map, Parquet or chunks reads the blocks once, in order,
copying the records into one B×p minibatch buffer that every step reuses (memory: a block, a
minibatch and W; X is never formed). B and T are computed from the public n (or m) exactly as
in memory, and each record still enters one call: the records after T·B are not read. The
guarantee above never used the order (the batches are fixed by positions, not values), so it
is unchanged; the accuracy assumes i.i.d. records (shuffle a sorted table first). With
``shuffle=False`` an in-memory array is read the same way, and the streamed fit equals it for
the same seed. :mod:`privpca.decomposition._stochastic` gives the held-out rows used on
defaults. ``learning_rate="search"`` is refused on streams.

Learning rate
-------------
``η_t = c1/(c2 + t)``. The paper's schedule needs ``λ₁ − λ₂``; the default (16, 0) suits
data with eigengap of order one (chosen on the Gaussian benchmark d = 50, λ = (1, 0.5, …):
see docs/DP_PCA.md). ``learning_rate="search"`` runs the private search of §5
(:meth:`DPPCA._search`): candidates on disjoint parts of the data, selection by the
exponential mechanism on a held-out part, all recorded in ``privacy_``.
"""

from __future__ import annotations

import math
import warnings
from numbers import Real
from typing import Any, ClassVar

import numpy as np
from numpy.typing import NDArray
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils._param_validation import Interval, StrOptions

from privpca._validation import caller_stacklevel, check_n_components
from privpca.accounting.ledger import PrivacyLedger
from privpca.accounting.record import PrivacyRecord, PrivacySpend
from privpca.decomposition._constraints import STOCHASTIC, WHITEN, positive_int
from privpca.decomposition._dppca_plan import (
    DEFAULT_SEARCH_GRID,
    RESOLVING_SUBSET_SIZE,
    SUBSET_SPREAD,
    DPPCACalibration,
    _Setup,
)
from privpca.decomposition._dppca_steps import _fallback_eigenvalue, _noise_level, _Plan, _run
from privpca.decomposition._records import RecordStream
from privpca.decomposition._stochastic import (
    HeldOutRelease,
    StreamInput,
    StreamPlan,
    StreamRun,
)
from privpca.solvers.eigen import fix_signs
from privpca.solvers.oja import LearningRate, VectorGradients
from privpca.solvers.power import random_orthonormal_basis

__all__ = ["DEFAULT_SEARCH_GRID", "DPPCA", "RESOLVING_SUBSET_SIZE", "SUBSET_SPREAD"]


class DPPCA(DPPCACalibration):
    """DP-PCA: minibatch Oja with private eigenvalue and mean estimation (central model).

    See the module docstring for the algorithm, the privacy argument and rank k.

    Parameters
    ----------
    n_components : int, default=1
        Dimension k of the subspace (block Oja for k > 1).
    epsilon : float, default=1.0
        ε > 0 of the overall guarantee.
    delta : float, default=1e-5
        0 < δ < 1. The paper's analysis assumes δ ≤ 1/n.
    centering : "private", None or array of shape (n_features,), default="private"
        ``"private"``: the stream reads pair differences ``(x_a − x_b)/√2`` (no budget, half
        the records; module docstring) and ``mean_`` is a private mean of the held-out share.
        ``None``: no centring (the paper's ``E[x xᵀ]``). An array: a public mean (free).
    batch_size : "auto" or int, default="auto"
        Records per step B. ``"auto"``: ``B = ⌊batch_constant·n/(ln n)²⌋`` (Theorem 5.1),
        raised if needed to the least Algorithm 4 runs on, ``4·n_subsets·min_subset_size``,
        and, with ``n_subsets="auto"`` and n large enough, to the least whose Algorithm 4 is
        expected to release, ``4⌈(τ + 3b)·√(16·s₀)⌉`` (``n_subsets``; 22 860 records at
        ε = 1, δ = 10⁻¹², 11 328 at δ = 10⁻⁵), then to ``⌊n/T⌋`` so that its T steps use
        all the records. Below that size the steps mostly release nothing (warned); below
        the least, the fit is refused before anything is spent.
    batch_constant : float, default=10.0
        c in B = c·n/(ln n)² (the paper's c₁, unspecified there). Larger batches mean fewer,
        less noisy steps; 10 was best of {3, 10, 30} on the Gaussian benchmark.
    learning_rate : "auto", float, (float, float) or "search", default="auto"
        ``η_t = c1/(c2 + t)``; "auto" is (16, 0); "search" runs the private search.
    budget_split : {"parallel", "paper"}, default="parallel"
        Each call gets (ε, δ) (tight, see the module docstring) or (ε/2, δ/2) (Algorithm 3
        as printed, which then certifies (ε/2, δ/2)).
    n_subsets : "auto" or int, default="auto"
        m, the number of subset eigenvalues in Algorithm 4's histogram. A bin is released
        when its noisy count (Laplace, scale b) exceeds the threshold τ set by (ε, δ), and
        the fullest bin holds about ``√(s/s₀)`` of the m subset eigenvalues when each has
        ``s = P/m`` of the step's P pair differences (:data:`SUBSET_SPREAD` s₀ = 500,
        measured). "auto" is ``⌈subsets_factor·τ⌉``, raised on a batch of the resolvable
        size (``batch_size``) or more to the fewest subsets whose fullest bin is expected to
        clear τ by 3 noise scales, ``⌈s₀(τ + 3b)²/P⌉`` (the most pairs each, at least 16,
        for the sharpest Λ; large batches keep ``subsets_factor·τ``). ``⌈3τ⌉`` alone asks a
        third of the subsets to share one bin: at 10⁵ rows (about 10 pairs each, 12–23 % in
        the fullest bin) that released nothing, e.g. 0 of 13 steps on Covertype at ε = 1,
        δ = 10⁻¹².
    subsets_factor : float, default=3.0
        See ``n_subsets``.
    min_subset_size : int, default=8
        Fewest pair differences per subset; sets the least batch (``batch_size``).
    centre_fraction : float, default=0.25
        ρ: share of Algorithm 5's budget (in inverse squared noise multiplier) spent on the
        centre histograms.
    bin_width : float, default=2.0
        Centre histogram bins are ``bin_width·√Λ`` wide.
    truncation_radius : float, default=0.25
        The box half-width is ``truncation_radius·√Λ·ln(b·q/ζ) + bin_width·√Λ``
        (Lemma 6.2's ``3K·log^a`` with the tail constant folded into this factor). 1.0 is
        Lemma 6.2 with K = 1/3, a = 1 (no truncation w.h.p. for Gaussian data); 0.25 truncates
        a few extreme gradient entries and needs 3× less noise, which measured better.
    zeta : float, default=0.01
        ζ, failure probability in the box size (the paper's choice).
    search_grid : sequence of (float, float) or None, default=None
        Candidates for ``learning_rate="search"`` (None: :data:`DEFAULT_SEARCH_GRID`).
    search_fraction : float, default=0.1
        Share of the records held out to select among the candidates.
    keep_history : bool, default=False
        Store ``W_t`` after each step in ``history_["components"]``.
    shuffle : "auto" or bool, default="auto"
        Read the records in a uniformly random order (``"auto"`` for in-memory arrays) or in
        their order (``False``; ``"auto"`` for streamed tables, which are read in one pass,
        one minibatch at a time: ``True`` is refused on them). The guarantee is the same in
        any order (each record enters one mechanism call); the accuracy suffers if the rows
        are sorted. ``learning_rate="search"`` is not available on streamed tables. See
        :mod:`privpca.decomposition._stochastic` (streamed tables).
    holdout_fraction : "auto" or float, default="auto"
        Share of the records held out (outside the papers' setting) for the private mean,
        bound and explained variance, at the full (ε, δ) (parallel composition). ``"auto"``:
        0.1, raised to the fewest rows the held-out searches need at these settings (a
        function of n, p, ε and δ only), up to half the table.
    stream_centering : {"mean", "pairs"}, default="mean"
        As in :class:`~privpca.PrivateOjaPCA` (measured for DP-PCA at n = 10⁶, d = 20:
        "mean" 0.19 against 0.31 for "pairs", docs/DP_PCA.md).
    budget_shares : dict or None, default=None
        Relative weights of the held-out parts (``"bound_raw"``, ``"mean"``,
        ``"bound_residual"``, ``"mean_refine"``, ``"bound"``, ``"variance"``), normalised
        over those in use; :data:`~privpca.decomposition._stochastic.HOLDOUT_SHARES` by
        default. The stream needs no share: it runs at the full (ε, δ) on other records.
    whiten : bool, default=False
        Divide the projections of :meth:`transform` by ``sqrt(explained_variance_)`` (and
        multiply them back in :meth:`inverse_transform`), as scikit-learn's ``PCA``:
        post-processing of released values; the fit is the same either way.
    random_state : None, int or numpy.random.Generator, default=None
        Source of the order, ``W₀``, the noise and the held-out split.
    ledger : PrivacyLedger or None, default=None

    Attributes
    ----------
    components_ : ndarray of shape (n_components, n_features)
        Outside the papers' setting, rotated within the fitted span to the eigenvectors of
        the held-out private ``VᵀGV`` (decreasing variance; post-processing).
    mean_ : ndarray of shape (n_features,)
        The private (held-out) or public mean ``transform`` subtracts; zeros uncentred.
    scale_ : None
    data_norm_ : float
        D, the held-out bound used by the variance release (``inf`` in the papers' setting:
        DP-PCA uses no norm bound).
    explained_variance_ : ndarray of shape (n_components,)
        Private variances of the held-out rows (centred, clipped to D) along the components,
        over ``n_held − 1`` (``n_held`` uncentred); NaN in the papers' setting.
    explained_variance_ratio_ : ndarray of shape (n_components,)
        Over the held-out rows' private total variance, made feasible
        (:func:`~privpca.pipeline.spectrum.feasible_spectrum`); NaN in the papers' setting.
    noise_level_ : float
        ``√(Σ_t σ_t²)/T``: the standard deviation, per entry, of the average over the T steps
        of the Gaussian noise added to the mean gradients (``history_["noise_scale"]``), in
        the units of ``explained_variance_``. An indicator, not a bound.
    expected_error_ : float or None
        The smaller of the Ky Fan and the Davis–Kahan residual bounds from the released
        variances and residual pair, w.p. ≥ 95 %, capped at √(2k): derivation in
        :func:`~privpca.pipeline.basis_error.component_error_bound`. It bounds the distance
        to the PCA of the *held-out* rows (a uniformly random share of the table). None in
        the papers' setting: the released noise scales (``history_``) bound the gradient
        noise, but DP-PCA's guarantee needs the eigengap of the data, which is not released.
    batch_size_ : int
    n_iter_ : int
        T, the number of steps.
    n_subsets_ : int
    learning_rate_ : LearningRate
        The schedule used (the selected one after a search).
    history_ : dict of ndarray
        Per step (all released or derived from releases, so free to inspect):
        ``"eigenvalue"`` (the Λ used, NaN for a step that made no update),
        ``"eigen_released"`` (whether Algorithm 4 released it this step),
        ``"eigenvalue_failed"`` (its negation: see ``n_eigen_failures_``),
        ``"noise_scale"`` (σ_t),
        ``"radius"`` (box half-width), ``"centre_failures"`` (coordinates with no released
        centre bin), and ``"components"`` when ``keep_history``. The noisy scores of
        ``learning_rate="search"`` are not kept (only the choice is released; see
        ``_search``).
    n_eigen_failures_ : int
        Steps in which Algorithm 4 released no bin. Such a step reuses the last released Λ;
        before the first release, on a table, the Λ whose box holds the gradients of rows
        within the held-out private bound D (released, so free: norm clipping's scale,
        noisier; said in ``privacy_.notes``), and in the papers' setting it makes no update.
        Over half of the steps failing warns (``sklearn.exceptions.ConvergenceWarning``, a
        function of ``history_``, so not data-dependent): how many, why, what to change. The
        fit still returns, as scikit-learn's iterative estimators do: the budget was spent
        and ``privacy_`` records it. If no step resolved in the papers' setting,
        ``components_`` is the random start, independent of the data, and the warning says
        so.
    privacy_ : PrivacyRecord
        One record: the stream's spend (``"statistic: …"``) and, outside the papers' setting,
        every held-out part's; (ε, δ) the request (``(ε/2, δ/2)`` with
        ``budget_split="paper"`` in the papers' setting).
    n_features_in_ : int

    References
    ----------
    X. Liu, W. Kong, P. Jain, S. Oh. DP-PCA: Statistically optimal and differentially private
    PCA. NeurIPS 2022, Algorithms 3–5, Theorem 5.1, §5 (learning rate).

    Examples
    --------
    >>> import numpy as np
    >>> from privpca import DPPCA
    >>> rng = np.random.default_rng(0)
    >>> X = rng.standard_normal((500_000, 10)) * np.sqrt([1.0] + [0.5] * 9)
    >>> est = DPPCA(epsilon=1.0, delta=1e-10, centering=None, random_state=0).fit(X)
    >>> bool(abs(est.components_[0, 0]) > 0.9)
    True
    """

    _parameter_constraints: ClassVar[dict[str, list[Any]]] = {
        **STOCHASTIC,
        "learning_rate": [StrOptions({"auto", "search"}), Interval(Real, 0.0, None,
                                                                   closed="neither"), tuple, list],
        "batch_size": [StrOptions({"auto"}), *positive_int(2)],
        "batch_constant": [Interval(Real, 0.0, None, closed="neither")],
        "budget_split": [StrOptions({"parallel", "paper"})],
        "n_subsets": [StrOptions({"auto"}), *positive_int()],
        "subsets_factor": [Interval(Real, 0.0, None, closed="neither")],
        "min_subset_size": positive_int(),
        "centre_fraction": [Interval(Real, 0.0, 1.0, closed="neither")],
        "bin_width": [Interval(Real, 0.0, None, closed="neither")],
        "truncation_radius": [Interval(Real, 0.0, None, closed="neither")],
        "zeta": [Interval(Real, 0.0, 1.0, closed="neither")],
        "search_grid": [None, "array-like"],
        "search_fraction": [Interval(Real, 0.0, 1.0, closed="neither")],
        "keep_history": ["boolean"],
        "whiten": WHITEN,
    }

    def __init__(
        self,
        n_components: int = 1,
        *,
        epsilon: float = 1.0,
        delta: float = 1e-5,
        centering: Any = "private",
        batch_size: Any = "auto",
        batch_constant: float = 10.0,
        learning_rate: Any = "auto",
        budget_split: str = "parallel",
        n_subsets: Any = "auto",
        subsets_factor: float = 3.0,
        min_subset_size: int = 8,
        centre_fraction: float = 0.25,
        bin_width: float = 2.0,
        truncation_radius: float = 0.25,
        zeta: float = 0.01,
        search_grid: Any = None,
        search_fraction: float = 0.1,
        keep_history: bool = False,
        shuffle: Any = "auto",
        holdout_fraction: float | str = "auto",
        stream_centering: str = "mean",
        budget_shares: dict[str, float] | None = None,
        whiten: bool = False,
        random_state: Any = None,
        ledger: PrivacyLedger | None = None,
    ) -> None:
        self.n_components = n_components
        self.epsilon = epsilon
        self.delta = delta
        self.centering = centering
        self.batch_size = batch_size
        self.batch_constant = batch_constant
        self.learning_rate = learning_rate
        self.budget_split = budget_split
        self.n_subsets = n_subsets
        self.subsets_factor = subsets_factor
        self.min_subset_size = min_subset_size
        self.centre_fraction = centre_fraction
        self.bin_width = bin_width
        self.truncation_radius = truncation_radius
        self.zeta = zeta
        self.search_grid = search_grid
        self.search_fraction = search_fraction
        self.keep_history = keep_history
        self.shuffle = shuffle
        self.holdout_fraction = holdout_fraction
        self.stream_centering = stream_centering
        self.budget_shares = budget_shares
        self.whiten = whiten
        self.random_state = random_state
        self.ledger = ledger


    def _stream(
        self, source: Any, setup: _Setup, k: int, rng: np.random.Generator, *,
        shuffle: bool = True, fallback: float | None = None,
    ) -> tuple[NDArray[np.float64], dict[str, Any], LearningRate]:
        """Algorithm 3 (or the search) over ``source``: ``(W, history, schedule)``; a
        streamed :class:`RecordStream` is read once, in its order. ``fallback``: the Λ of
        the steps before Algorithm 4's first release (:func:`_fallback_eigenvalue`)."""
        W0 = random_orthonormal_basis(source.n_features, k, rng)
        n = source.n_samples
        order: NDArray[np.intp] | None = None
        if not (isinstance(source, RecordStream) and source.is_streamed):
            # the order is public randomness; it does not leak
            order = rng.permutation(n) if shuffle else np.arange(n)
        keep = bool(self.keep_history)
        if setup.lr is not None:
            W, history = _run(source, order, W0, setup.lr, setup.plan, rng, keep=keep,
                              fallback=fallback)
            return W, history, setup.lr
        assert order is not None  # the search is refused on streams before anything runs
        return self._search(source, rng, W0, order, setup, fallback)

    # ------------------------------------------------------------------ the one fit's steps
    def _plan(self, data: StreamInput) -> StreamPlan:
        if data.mode.streamed:
            self._refuse_search_on_stream()
        return super()._plan(data)

    def _papers_plan(self, data: StreamInput) -> StreamPlan:
        """The paper's algorithm on the records as given (uncentred): its record is known in
        full before the data are read."""
        setup = self._setup(data.n_samples, data.n_features)
        record = self._record(setup.plan, data.n_samples, search=setup.search)
        k = check_n_components(self.n_components, data.n_features, owner=self)
        return StreamPlan(planned=record, mode=data.mode, k=k, shuffle=data.shuffle,
                          stream=setup)

    def _release_papers(self, plan: StreamPlan, records: Any,
                        rng: np.random.Generator) -> None:
        if isinstance(records, VectorGradients):
            # NaN/inf: refused by the stream's passes (_stream_checks_finite), each before
            # its mechanism's release (the booking is then withdrawn).
            records = RecordStream(records.X, verify=self._stream_checks_finite())
        W, history, lr = self._stream(records, plan.stream, plan.k, rng, shuffle=plan.shuffle)
        self.components_ = fix_signs(W).T.copy()
        self._finish(history, plan.stream.plan, lr, None)  # no fallback: no note

    def _paper_noise_level(self) -> float:
        return _noise_level(self.history_)

    def _stream_checks_finite(self) -> bool:
        # A fixed learning rate: every record is read by one compiled pass of one step (or
        # checked by RecordStream.batches); the search reads validation rows in NumPy.
        return not (isinstance(self.learning_rate, str) and self.learning_rate == "search")

    def _table_checks_finite(self) -> bool:
        # As _stream_checks_finite; pairs are formed before the stream reads them, so a table
        # streamed as pairs is checked by a pass first.
        return (self._stream_checks_finite()
                and getattr(self, "stream_centering", "mean") == "mean")

    def _refuse_search_on_stream(self) -> None:
        if isinstance(self.learning_rate, str) and self.learning_rate == "search":
            raise ValueError(
                "DPPCA: learning_rate='search' is not available on a streamed table (or "
                "with shuffle=False): its candidates and validation votes are not laid out "
                "for one pass in order yet. Give a learning rate (e.g. 'auto'), or fit an "
                "in-memory array with shuffle='auto'."
            )

    # ------------------------------------------------------------------ on a table
    def _table_stream_plan(self, m: int, p: int, *, pairs: bool,
                           streamed: bool) -> tuple[tuple[_Setup, PrivacyRecord],
                                                    PrivacySpend, str]:
        """Batches and both mechanisms' calibration for the m (derived) records; the
        stream's spend is known in full before the data are read."""
        setup = self._setup(m, p, what="m (pair differences)" if pairs else "m (records)")
        stream = self._record(setup.plan, m, search=setup.search)
        return (setup, stream), stream.spends[0], stream.calibration

    def _table_stream(self, plan: StreamPlan, records: Any, held: HeldOutRelease,
                      rng: np.random.Generator) -> StreamRun:
        """Algorithm 3 on the (derived) records left after the held-out share.

        An array's records are already in the uniformly random order of the held-out
        permutation (so are its pairs): they are read in that order, not shuffled again,
        which saves a permutation and lets pairs stream from memory in order. DP-PCA's
        guarantee is parallel composition over positions, so it needs no second, independent
        order (Private Oja's shuffled one does).
        """
        setup, stream = plan.stream
        pairs = plan.split is not None and plan.split.pairs
        bound = held.prepared.data_norm * (math.sqrt(2.0) if pairs else 1.0)
        fallback = _fallback_eigenvalue(setup.plan, records.n_features * plan.k, bound)
        W, history, lr = self._stream(records, setup, plan.k, rng, shuffle=False,
                                      fallback=fallback)
        notes = stream.notes + self._finish(history, setup.plan, lr, fallback) + " "
        self.noise_level_ = _noise_level(history)
        return StreamRun(W, stream.spends[0], notes, tail=(
            " Held-out rows above D are clipped to it for the variances (the stream needs "
            "no norm bound); how many is not reported, being a non-private count."))

    def _finish(self, history: dict[str, Any], plan: _Plan, lr: LearningRate,
                fallback: float | None) -> str:
        """The stream's own attributes (``components_`` is set by the caller); warns when
        Algorithm 4 released nothing in more than half of the steps (class docstring).
        Returns the record's note on the fallback steps (empty when none)."""
        self.history_ = history
        self.batch_size_ = plan.batch_size
        self.n_iter_ = plan.n_steps
        self.n_subsets_ = plan.eigen.n_subsets
        self.learning_rate_ = lr
        released = history["eigen_released"]
        T, failed = released.size, int((~released).sum())
        self.n_eigen_failures_ = failed
        first = int(np.argmax(released)) if released.any() else T  # steps before a release
        note = "" if fallback is None or first == 0 else (
            f" {first} step(s) before Algorithm 4's first release sized their box by the "
            f"held-out private bound D (Lambda = {fallback:.4g}; a released quantity, so the "
            "guarantee is unchanged).")
        if 2 * failed > T:
            if first < T:
                outcome = ("those steps reused the last released eigenvalue"
                           + (", or the held-out bound D before the first" if note else ""))
            elif fallback is not None:
                outcome = ("every step sized its truncation box by the held-out private bound "
                           "D instead, as norm-clipping would (noisier than a released "
                           "eigenvalue)")
            else:
                outcome = ("no step updated: components_ is the random start, independent of "
                           "the data (the spend is recorded in full in privacy_)")
            warnings.warn(
                f"DPPCA: Algorithm 4 released no eigenvalue in {failed} of {T} steps: no "
                f"sqrt(2)-wide bin of its {plan.eigen.n_subsets} subset eigenvalues (about "
                f"{plan.batch_size // (4 * plan.eigen.n_subsets)} pair differences each) had "
                f"a noisy count above the release threshold "
                f"{plan.eigen.histogram.threshold:.1f} set by (epsilon, delta); {outcome}. "
                "Use more data (with n_subsets='auto', steps of at least "
                f"{plan.resolvable} records are expected to release), a larger epsilon or "
                "delta, or a larger batch_size.",
                ConvergenceWarning, stacklevel=caller_stacklevel())
        return note
