"""Choosing the clipping bound D for the table: the estimated errors of two candidates.

Why a choice at all
-------------------
Clipping the rows at D has two effects on the top-k subspace (Davis–Kahan, sin Θ form):

* **noise**: the Gram's noise is ``σ ∝ D²``, so its effect on the subspace is about
  ``ν(D) ≈ ‖N_D‖ / gap(Σ_D)``, growing with D wherever the rows above D carry little of the
  gap;
* **bias**: ``Σ_D = Σ − B_D`` with ``B_D = Σ_{‖y‖>D} (1 − D²/‖y‖²) y yᵀ``. Shrinking a row
  does not turn it: if the shrunk rows' directions have the same principal axes as the
  table (a sign-symmetric, e.g. elliptical, cloud), ``Σ_D`` has the same top-k eigenvectors
  as ``Σ`` at every D and the bias is zero however much is clipped. When the heavy rows point
  elsewhere than the bulk (a skewed count, a subgroup far out), clipping *rotates* the
  subspace by ``b(D) ≈ ‖P_k(Σ_D) − P_k(Σ)‖``, decreasing in D, 0 above the largest norm.

On real tables the best fixed quantile is the median on some (the clipped rows carry no
direction of their own) and the maximum on others (docs/REAL_DATA.md): the norms alone cannot
tell the two apart, because the bias is a property of the directions.

The rule: estimated errors along a ladder of candidates
-------------------------------------------------------
The candidates come from one private search of the norms
(:class:`~privpca.mechanisms.quantile.PrivateQuantile`, a noisy bisection that sees every
row, however thinly the tail is spread): their median ``D_low`` (:data:`LOW_QUANTILE`, read
inside its last step) and ``D_high``, the point below which all but about 4.5 noise
deviations of the rows lie. The ladder (:func:`candidate_ladder`) runs geometrically from
``D_low`` to ``D_high`` in steps of at most :data:`LADDER_RATIO` and ends at
:data:`TOP_FACTOR` ``· D_high``, for the few rows above ``D_high`` (a heavy count tail can be
the table's top components): up to :data:`MAX_CANDIDATES` bounds, so a bound between the
median and the top can be chosen.

One Gaussian release (the "bound_select" part) gives a pilot Gram at every candidate: the
Grams' differences between consecutive candidates, normalised ("shells",
:func:`choose_bound`), released at once with sensitivity ``√(2L)``; the pilot at ``c_j`` is
the sum of the shells up to it (post-processing). From them only (``P_k`` is the projector
on the top-k eigenvectors):

* ``d_j = ‖P_k(Ĝ_j) − P_k(Ĝ_{j+1})‖_F``, how far the next shell turns the subspace;
* ``ν_j``: the ``1 −`` :data:`NOISE_LEVEL` quantile of ``‖P_k(Ĝ_j + E) − P_k(Ĝ_j)‖_F`` over
  :data:`NOISE_DRAWS` draws ``E`` of the next shell's noise alone (a parametric bootstrap on
  the released matrix): how far that shell would turn it were it noise, taken high so that a
  fluctuation of the noise is not read as a rotation;
* ``f_j``: the mean of the same with the *statistic's* noise level at ``c_j`` (its multiplier
  times ``√2·c_j²``; the plan's total multiplier for a statistic that is not Gaussian) and
  the private centre's rank-one term ``n·e·eᵀ`` (``e`` drawn at the mean's public noise
  level), made non-decreasing along the ladder where a pilot cannot see its own top k (A3).
  The centre's term is the same at every bound, but the gap it competes with is not: with
  the components in the large rows (norms spread over octaves) the median's gap is small
  enough for it to turn the subspace, which Gram noise alone did not show (the held-out
  table norm_octaves: 0.508 → 0.257 over five seeds, oracle 0.232).

Estimated errors ``e_j = b̂_j + f_j`` with ``b̂_j = Σ_{l ≥ j} max(0, d_l − ν_l)``, the
rotations resolved above ``c_j`` (a triangle-inequality estimate of the rotation clipping at
``c_j`` causes), or, where larger, the **drift** ``max_{l ≥ j+2} √((‖P_j − P_l‖² −
κ·noise_jl)⁺)`` below the top candidate (:func:`_drifts`): a rotation spread over several
shells, each step below its own ν (log-normal and count tables whose large rows carry the
components), shows in the distance to a pilot several steps up beyond the two pilots' noise
energy. ``D`` is the candidate with the smallest. A step whose ``ν_l`` reaches
:data:`RESOLVABLE` of the largest distance ``√(2k)`` counts as 0: its shell's noise alone
turns the pilot that far, so its distance is a draw, not evidence (on an elliptical cloud
the empty top shell's distance beat its ν in one seed of a few, which moved every
candidate's estimated rotation up by the same spurious amount).

Assumptions: (A1) the bias is non-increasing in D and the top candidate clips (almost)
nothing that rotates; (A2) the bootstrap's ν and f, computed around the released matrices
instead of the true ones, are the noise's effect (typical values, not bounds: the rule
chooses the smaller estimated error, it does not certify it); (A3) without a rotation the
lower bound is the better one: the subspaces agree, the higher bound's noise is
``(c_{j+1}/c_j)²`` times larger — so ``f`` is made non-decreasing across pilots that cannot
see their top k (their own noise moves their subspace by :data:`RESOLVABLE` ``·√(2k)`` or
more, at the ``1 −`` :data:`NOISE_LEVEL` quantile): a bootstrap around such a pilot is a
draw, not an estimate (without this, a noisy top pilot's lucky draw took D = 2 048 against
an oracle near 190 on the skewed count table of the suite). A pilot that sees its top k
keeps its own ``f``: the rows its bound restores may widen the gap faster than the noise
grows (norms spread over octaves with the components in the large rows).

The error bar
-------------
The estimators' bar covers the rotation clipping at the chosen bound causes by a release of
its own on the rows clipped at the robust maximum (the ``variance`` part,
:mod:`privpca.pipeline.basis_error`), not by the pilots.

Measured (docs/REAL_DATA.md; ``AnalyzeGaussPCA``, ε = 1, ten seeds): within 1.25× + 0.01
of the oracle with no seed worse than 2× + 0.02 on Covertype, the binary survey and the
skewed count table (0.053 against 0.039: the drift term; 0.080 with three bad seeds
without it), not on RAND, whose second component lives in the rows above the robust
maximum. Pilots run up to :data:`MAX_FEATURES` features.

Everything released here — the candidates, the d, ν, f and the choice — is post-processing
of the private releases and is published in the record's notes.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

import numpy as np
import scipy.linalg
from numpy.typing import NDArray

from privpca.mechanisms.noise import gaussian_release, symmetric_noise
from privpca.mechanisms.secure_noise import fast_stream
from privpca.mechanisms.sensitivity import gram_sensitivity

__all__ = [
    "LADDER_RATIO",
    "LOW_QUANTILE",
    "MAX_CANDIDATES",
    "MAX_FEATURES",
    "NOISE_DRAWS",
    "NOISE_LEVEL",
    "RESOLVABLE",
    "BoundChoice",
    "candidate_ladder",
    "choose_bound",
    "shell_sigmas",
    "subspace_noise",
    "top_vectors",
]

#: Quantile of the norms giving the low candidate (the ladder's first).
LOW_QUANTILE = 0.5
#: Consecutive candidates are this ratio apart (at most), from the median to the robust maximum.
LADDER_RATIO = 2.0**0.5
#: A step between candidates counts only where its shell's noise alone moves the pilot's
#: subspace by less than this fraction of the largest distance, √(2k).
RESOLVABLE = 0.5
#: The most candidates on the ladder.
MAX_CANDIDATES = 6
#: The last candidate is this factor above the robust maximum: the ~4.5σ rows above it may be
#: the table's top components (a heavy count tail); its shell tells.
TOP_FACTOR = 2.0
#: The drift rule (:func:`_drifts`) counts as rotation what a pilot-to-pilot distance has
#: beyond this multiple of the two pilots' mean noise energy: 1 subtracts the noise's energy
#: on average (a debiased squared rotation). Chosen on the tuning tables and on synthetic
#: ones: 0.75 cost twice the distance on an elliptical cloud of 8 000 rows (0.016 → 0.031)
#: for no further gain on the skewed ones; 2 kept a log-normal table at 0.13 (1: 0.095).
DRIFT_MARGIN = 1.0
#: The drift rule skips pairs of pilots whose noise (root of the summed energies) reaches this
#: share of :data:`RESOLVABLE` ``·√(2k)``: their distance is mostly noise (without it a
#: table of 6 000 rows took bounds 2–4 steps up in 6 seeds of 10).
DRIFT_SEEN = 0.5
#: Bootstrap draws per noise level.
NOISE_DRAWS = 10
#: The pilots' noise distances are taken at their ``1 − NOISE_LEVEL`` quantile.
NOISE_LEVEL = 0.1
#: Up to this many features the pilots run (``2 + 4·NOISE_DRAWS`` top-k eigenpairs of a p×p
#: matrix); above it no pilot is planned (decided from the public p) and D is the private
#: 0.99-quantile of the norms, as with ``"quantile"``. Measured on AnalyzeGaussPCA's fits of
#: 20 000 rows: +0.7 s at p = 256 (0.2 s without), +5 s at p = 617, +9 s at p = 1 024.
MAX_FEATURES = 256


@dataclass(frozen=True)
class BoundChoice:
    """The rule's outcome (all of it post-processing of private releases: publishable).

    Attributes
    ----------
    candidates : tuple of float
        The ladder, lowest (the private median) to highest (the robust maximum).
    chosen : float
        The bound the statistic uses.
    distances : tuple of float
        ``d_j``: the subspace distance between the pilots of candidates j and j + 1.
    noise : tuple of float
        ``ν_j``: how far the shell between them would move the lower pilot's subspace if it
        were noise alone (an upper quantile of a parametric bootstrap).
    finals : tuple of float
        The final release's estimated noise effect f_j at each candidate.
    pilot : ndarray of shape (p, p) or None
        The released pilot Gram at the chosen bound (kept in memory, not published: a
        statistic that releases the same Gram may average it in, inverse-variance).
    pilot_sigma : float
        Its noise standard deviation per coordinate.
    high_pilot : ndarray of shape (p, p) or None
        The pilot at the robust maximum (in memory only): where a lower bound is chosen,
        the explained variances can be read off it
        (:func:`privpca.pipeline.spectrum.variances_along`).
    high_sigma : float
        Its noise standard deviation per coordinate.
    """

    candidates: tuple[float, ...]
    chosen: float
    distances: tuple[float, ...]
    noise: tuple[float, ...]
    finals: tuple[float, ...]
    pilot: NDArray[np.float64] | None = field(default=None, repr=False, compare=False)
    pilot_sigma: float = math.nan
    high_pilot: NDArray[np.float64] | None = field(default=None, repr=False, compare=False)
    high_sigma: float = math.nan

    @property
    def low(self) -> float:
        return self.candidates[0]

    @property
    def high(self) -> float:
        return self.candidates[-1]

    resolvable: float = math.inf
    #: Per candidate, the rotation resolved directly against a pilot two or more steps up
    #: (:func:`_drifts`); zeros where none was looked for.
    drifts: tuple[float, ...] = ()
    #: Per candidate, whether its pilot sees its top k: its own noise moves it by less than
    #: :attr:`resolvable` at the ``1 −`` :data:`NOISE_LEVEL` quantile (empty: all do).
    seen: tuple[bool, ...] = ()

    @property
    def reference(self) -> float:
        """The bound the ``variance`` part reads the rows at, so that the error bar covers
        the rotation clipping at the chosen bound causes: the robust maximum where the top
        shell's pilot puts its possible rotation (its step's distance plus its noise) below
        :attr:`resolvable`, else the top candidate. Rows above it are not covered."""
        if len(self.candidates) < 2:
            return self.chosen
        quiet = self.distances[-1] + self.noise[-1] < self.resolvable
        return max(self.chosen, self.candidates[-2 if quiet else -1])

    @property
    def steps(self) -> tuple[float, ...]:
        """``max(0, d_j − ν_j)``: the rotation resolved between candidates j and j + 1 (0
        where the shell's noise alone moves the pilot by :attr:`resolvable` or more, or where
        pilot j + 1 does not see its top k (:attr:`seen`): there a distance is a draw of the
        noise, not evidence)."""
        seen = self.seen or (True,) * (len(self.distances) + 1)
        return tuple(max(0.0, d - nu) if nu < self.resolvable and seen[j + 1] else 0.0
                     for j, (d, nu) in enumerate(zip(self.distances, self.noise, strict=True)))

    @property
    def biases(self) -> tuple[float, ...]:
        """``b̂_j``: the rotations resolved above candidate j, summed (a triangle-inequality
        estimate of its distance to the highest candidate's subspace), or its :attr:`drifts`
        where larger."""
        above = np.cumsum(np.asarray(self.steps[::-1] or (), dtype=np.float64))[::-1]
        summed = (*(float(b) for b in above), 0.0)
        if not self.drifts:
            return summed
        return tuple(max(b, d) for b, d in zip(summed, self.drifts, strict=True))

    @property
    def bias(self) -> float:
        """The lowest candidate's estimated rotation."""
        return self.biases[0]

    @property
    def errors(self) -> tuple[float, ...]:
        """``e_j = b̂_j + f_j``."""
        return tuple(b + f for b, f in zip(self.biases, self.finals, strict=True))

    def describe(self) -> str:
        """One sentence for the record's notes."""
        j = self.candidates.index(self.chosen)
        which = ("low candidate" if j == 0 else "high candidate"
                 if j == len(self.candidates) - 1 else f"candidate {j + 1} of "
                 f"{len(self.candidates)}")
        ladder = ", ".join(f"{c:.4g} ({e:.3g})" for c, e in zip(self.candidates, self.errors,
                                                                strict=True))
        return (
            f"The bound selection chose D = {self.chosen:.6g} ({which}) on a ladder from the "
            f"private median of the norms D_low = {self.low:.6g} to D_high = {self.high:.6g} "
            "(the private point below which all but about 4.5 noise deviations of rows lie); "
            f"candidates (estimated error: rotation + noise): {ladder} "
            "(privpca.pipeline.bound_selection)."
        )


def candidate_ladder(low: float, high: float) -> tuple[float, ...]:
    """Geometric candidates from ``low`` to ``high``, at most :data:`LADDER_RATIO` apart, and
    :data:`TOP_FACTOR` times ``high``; at most :data:`MAX_CANDIDATES` in all (post-processing
    of the two private quantiles).

    Examples
    --------
    >>> [round(c, 3) for c in candidate_ladder(1.0, 4.0)]
    [1.0, 1.414, 2.0, 2.828, 4.0, 8.0]
    >>> candidate_ladder(3.0, 3.0)
    (3.0, 6.0)
    """
    if not high > low:
        return (float(low), float(TOP_FACTOR * low))
    steps = math.ceil(math.log(high / low) / math.log(LADDER_RATIO) - 1e-9)
    m = min(MAX_CANDIDATES - 1, max(2, steps + 1))
    ladder = [float(low * (high / low) ** (j / (m - 1))) for j in range(m)]
    return (*ladder, float(TOP_FACTOR * high))


def top_vectors(matrix: NDArray[np.float64], k: int) -> NDArray[np.float64]:
    """The top-``k`` eigenvectors (columns) of a symmetric matrix, largest first. Only the k
    pairs are computed (LAPACK's subset drivers: the rule runs ``2 + 4·NOISE_DRAWS`` of these;
    ``evx`` is the faster one from a few hundred features on, measured)."""
    p = matrix.shape[0]
    _, vectors = scipy.linalg.eigh(matrix, subset_by_index=[p - k, p - 1],
                                   driver="evr" if p < 512 else "evx")
    return np.ascontiguousarray(vectors[:, ::-1])


def subspace_noise(released: NDArray[np.float64], sigma: float, k: int,
                   rng: np.random.Generator, centring: float = 0.0,
                   ) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """``(P_k(released), distances)``: how far :data:`NOISE_DRAWS` symmetric draws ``E`` of
    standard deviation ``sigma`` move the top-k subspace, ``‖P_k(released + E) −
    P_k(released)‖_F`` (a parametric bootstrap: it reads only the released matrix and a
    public σ). With ``centring = n·s²`` each draw also adds ``n·e·eᵀ``, ``e ~ N(0, s²I)``:
    the rank-one term a private centre of per-coordinate noise ``s`` adds to the Gram."""
    V = top_vectors(released, k)
    P = V @ V.T
    p = released.shape[0]
    moved = []
    for _ in range(NOISE_DRAWS):
        E = symmetric_noise(p, sigma, rng)
        if centring > 0.0:
            z = rng.standard_normal(p)
            E += centring * np.outer(z, z)
        W = top_vectors(released + E, k)
        moved.append(float(np.linalg.norm(W @ W.T - P)))
    return P, np.asarray(moved)


def shell_sigmas(multiplier: float, candidates: Sequence[float]) -> tuple[float, ...]:
    """The noise std per coordinate of the normalised shells (first) and of each candidate's
    pilot ``Ĝ_j = Σ_{l ≤ j} Δ_l S̃_l``: ``σ_s = m·√(2L)`` and ``σ_s·√(Σ_{l≤j} Δ_l²)``."""
    c2 = np.square(np.asarray(candidates, dtype=np.float64))
    widths = np.diff(np.concatenate([[0.0], c2]))
    sigma = multiplier * math.sqrt(2.0 * len(c2))
    return (sigma, *(float(sigma * math.sqrt(v)) for v in np.cumsum(widths**2)))


def choose_bound(
    grams_at: Callable[[tuple[float, ...]], Sequence[NDArray[np.float64]]],
    n_components: int,
    low: float,
    high: float,
    multiplier: float,
    final_multiplier: float,
    rng: np.random.Generator,
    centring: float = 0.0,
) -> BoundChoice:
    """Release the ladder's pilots in one Gaussian release and choose the candidate with the
    smallest estimated error.

    The shells: with candidates ``c_1 < … < c_L`` (:func:`candidate_ladder`), ``c_0 = 0`` and
    ``Δ_l = c_l² − c_{l−1}²``, shell ``l`` is ``S_l = (G_{c_l} − G_{c_{l−1}})/Δ_l`` (G_c the
    Gram of the rows clipped at c). A row of norm r adds ``w_l·uuᵀ`` to it with ``u`` its
    direction and ``w_l = (min(r², c_l²) − min(r², c_{l−1}²))/Δ_l ∈ [0, 1]``: replacing one
    row moves the stacked shells by at most ``√(2L)`` (Frobenius, each shell at most √2),
    so one Gaussian release of multiplier ``multiplier`` adds ``N(0, (multiplier·√(2L))²)``
    to each shell's upper triangle. Every candidate's pilot is a sum of released shells,
    ``Ĝ_j = Σ_{l≤j} Δ_l S̃_l`` (post-processing), with noise ``σ_s·√(Σ_{l≤j} Δ_l²)`` — on a
    ladder of ratio √2 about as much as a pilot of its own at the whole share.

    Parameters
    ----------
    grams_at : callable
        ``bounds ↦ [Σ clip_D(y) clip_D(y)ᵀ for D in bounds]`` over the rows the statistic
        will see (exact, private; one pass).
    n_components : int
        k.
    low, high : float
        The private median and the robust maximum of the norms.
    multiplier : float
        The "bound_select" part's noise multiplier (one release).
    final_multiplier : float
        The statistic's noise multiplier (σ/Δ), for the final release's noise effect f.
    rng : numpy.random.Generator
        The fit's noise generator.
    centring : float, default 0.0
        ``n·s²``, with ``s`` the private centre's noise std per coordinate (0: a public or no
        centre): ``f`` includes the rank-one term ``n·e·eᵀ`` centring on it adds to the
        Gram at every candidate (a fixed size, against a gap that grows with the bound
        where the components live in the large rows).

    Returns
    -------
    BoundChoice
    """
    k = int(n_components)
    candidates = candidate_ladder(low, high)
    c2 = np.square(np.asarray(candidates))
    widths = np.diff(np.concatenate([[0.0], c2]))
    grams = grams_at(candidates)
    p = grams[0].shape[0]
    sigma, *sigmas = shell_sigmas(multiplier, candidates)
    packed = gaussian_release(_stacked_shells(grams, widths), sigma, rng,
                              sensitivity=math.sqrt(2.0 * len(candidates)))
    released = _pilots(packed, widths, p)
    # The bootstrap reads only the released pilots (post-processing): a fast stream keyed
    # from the release's (the release's own on a seeded run, so its draws are unchanged).
    boot = fast_stream(rng)
    projectors = [top_vectors(G, k) for G in released]
    projectors = [V @ V.T for V in projectors]
    distances = tuple(float(np.linalg.norm(a - b)) for a, b in itertools.pairwise(projectors))
    # How far the next shell would turn the lower pilot were it noise alone: an upper
    # quantile (a mean would call half of the noise's fluctuations a rotation).
    nus = tuple(float(np.quantile(subspace_noise(G, sigma * width, k, boot)[1],
                                  1.0 - NOISE_LEVEL))
                for G, width in zip(released[:-1], widths[1:], strict=True))
    raw = [float(np.mean(subspace_noise(
        G, final_multiplier * gram_sensitivity(c, "replace"), k, boot, centring)[1]))
        for G, c in zip(released, candidates, strict=True)]
    # How far each pilot's own noise moves its subspace: whether it sees its top k at all.
    own = [subspace_noise(G, s, k, boot)[1] for G, s in zip(released, sigmas, strict=True)]
    cap = math.sqrt(2.0 * min(k, p - k))
    sees = [float(np.quantile(d, 1.0 - NOISE_LEVEL)) < RESOLVABLE * cap for d in own]
    choice = BoundChoice(candidates, candidates[0], distances, nus,
                         _guarded_finals(raw, sees), resolvable=RESOLVABLE * cap,
                         seen=tuple(sees))
    drifts = _drifts(released, projectors, own, widths, sigma, k, boot, choice)
    return _with_pilots(replace(choice, drifts=drifts), released, sigmas)


def _drifts(released: Sequence[NDArray[np.float64]], projectors: Sequence[NDArray[np.float64]],
            own: Sequence[NDArray[np.float64]], widths: NDArray[np.float64], sigma: float,
            k: int, rng: np.random.Generator, choice: BoundChoice) -> tuple[float, ...]:
    """Per candidate j, the rotation resolved between its pilot and a higher one's directly:
    ``max_{j+2 ≤ l < L} √((‖P_j − P_l‖² − κ·(r_j² + u_jl²))⁺)``, κ = :data:`DRIFT_MARGIN`,
    with ``r_j`` the root mean square of ``own[j]`` (how far pilot j's own noise moves it)
    and ``u_jl`` that of how far the noise only pilot l carries (the shells between them,
    std ``σ_s·√(Σ_{j<m≤l} Δ_m²)``) moves pilot l: parametric bootstraps on the released
    pilots, post-processing. Pairs whose noise ``√(r_j² + u_jl²)`` reaches
    :data:`DRIFT_SEEN` of :attr:`BoundChoice.resolvable` are skipped, and so is the top
    candidate: its shell holds the few rows above the robust maximum, and its pilot, the
    noisiest, made the rule leave the median of elliptical clouds (its step is judged by the
    steps' rule). A rotation spread over several shells, each below its own step's noise,
    is seen here and not in the steps: on a log-normal table whose large rows carry the
    components the steps summed 0.02 where clipping at the median rotated the subspace by
    0.16."""
    energy = [float(np.mean(np.square(d))) for d in own]
    drifts = [0.0] * len(projectors)
    for low, up in itertools.combinations(range(len(projectors) - 1), 2):
        distance = float(np.linalg.norm(projectors[low] - projectors[up]))
        if up < low + 2 or distance <= drifts[low]:
            continue
        spread = sigma * math.sqrt(float(np.sum(widths[low + 1:up + 1] ** 2)))
        noise = energy[low] + float(np.mean(np.square(
            subspace_noise(released[up], spread, k, rng)[1])))
        if noise < (DRIFT_SEEN * choice.resolvable) ** 2:
            drifts[low] = max(drifts[low],
                              math.sqrt(max(distance**2 - DRIFT_MARGIN * noise, 0.0)))
    return tuple(drifts)


def _stacked_shells(grams: Sequence[NDArray[np.float64]],
                    widths: NDArray[np.float64]) -> NDArray[np.float64]:
    """The upper triangles of the shells ``S_l = (G_{c_l} − G_{c_{l−1}})/Δ_l``, end to end."""
    p = grams[0].shape[0]
    iu = np.triu_indices(p)
    previous = np.zeros((p, p))
    shells = []
    for gram, width in zip(grams, widths, strict=True):
        shells.append(((gram - previous) / width)[iu])
        previous = gram
    return np.concatenate(shells)


def _pilots(packed: NDArray[np.float64], widths: NDArray[np.float64],
            p: int) -> list[NDArray[np.float64]]:
    """Every candidate's pilot ``Ĝ_j = Σ_{l≤j} Δ_l S̃_l``, from the released shells
    ``packed`` (upper triangles end to end, as :func:`_stacked_shells` lays them)."""
    iu = np.triu_indices(p)
    released, total = [], np.zeros((p, p))
    for i, width in enumerate(widths):
        shell = np.empty((p, p))
        shell[iu] = packed[i * len(iu[0]):(i + 1) * len(iu[0])]
        shell.T[iu] = shell[iu]
        total = total + width * shell
        released.append(total)
    return released


def _guarded_finals(raw: Sequence[float], sees: Sequence[bool]) -> tuple[float, ...]:
    """The noise effects ``raw``, raised to the previous candidate's where a pilot does not
    see its top k (``sees``)."""
    # A3: a bootstrap around a pilot that cannot see its top k is a draw, not an estimate,
    # and must not undercut a lower candidate's f (the final noise grows as c²). A pilot
    # that sees its top k may: the rows its bound restores can widen the gap faster than
    # the noise grows (norms spread over octaves, the components in the large rows).
    finals: list[float] = []
    for f, seen in zip(raw, sees, strict=True):
        finals.append(f if seen or not finals else max(f, finals[-1]))
    return tuple(finals)


def _with_pilots(choice: BoundChoice, released: Sequence[NDArray[np.float64]],
                 sigmas: Sequence[float]) -> BoundChoice:
    """``choice`` with the smallest-error candidate chosen, and the pilots (and their noise)
    that the statistic and the variances read."""
    candidates = choice.candidates
    j = int(np.argmin(choice.errors))
    # The variances are read off the pilot at the robust maximum (the ladder's last but one):
    # it clips only ~4.5σ rows and has a third of the top one's noise.
    top = max(len(candidates) - 2, 0)
    return replace(choice, chosen=candidates[j], pilot=released[j], pilot_sigma=sigmas[j],
                   high_pilot=released[top], high_sigma=sigmas[top])
