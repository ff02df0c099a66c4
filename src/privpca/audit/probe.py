"""The floating-point probe: does the output, read modulo a grid, tell the neighbours apart?

Why
---
A threshold audit reads an output as a real number; it cannot see *which floats* a mechanism
outputs. Issue 26: secure mode's ``SecureGenerator.standard_normal`` returned ``2^-30·K``
(``K`` an integer) and callers computed ``value + σ·z`` in float64, so ``output − f(D)`` was
a multiple of ``g = σ·2^-30`` up to rounding; an adversary who knows ``f(D)`` and ``f(D')``
keeps the candidate for which ``(output − candidate)/g`` is an integer (right 40 of 40 times),
whatever ε the noise was calibrated for.

Method
------
The mechanism runs ``runs`` times on each neighbour; the runs are split as in
:func:`~privpca.audit.audit` (the first ``selection_fraction`` select, the rest evaluate).

* **Candidates** ``v₀, v₁`` for the exact values: given (``values``), computed (``exact``), or
  — the default, which needs no knowledge of the mechanism — the *first selection run* of
  each neighbour. Under a grid leak any two outputs of one dataset differ by a multiple of the
  grid too, so a reference run is as good as the exact value; under a mechanism whose outputs
  lie on a data-independent lattice (the snapped release), outputs of both neighbours sit on
  the same lattice and the reference runs tell nothing.
* **Grids** ``g``: ``σ·2^-b`` for every known noise scale σ (``scales``; for an estimator, its
  fitted ``noise_scale_`` and ``privacy_`` spends, and each over n and n − 1) and ``b`` in
  ``bits`` (8–52), and the powers of two ``2^j`` from 2⁵⁶ times below the smallest of the
  noise scales and the outputs' magnitude up to 2⁴ times below the noise (coarser grids see
  the noise's shape, which the threshold audit covers, not its floats).
* **Statistic** per run and grid: with ``d_i`` the distance of ``(output − v_i)/g`` to the
  nearest integer in each released coordinate, ``s = d₁ − d₀`` (positive: the output sits on
  ``D``'s coset). Candidates: its sum over coordinates, its sign vote, each of the first 16
  coordinates, and the tolerance counts ``#{d₀ < τ} − #{d₁ < τ}`` for ``τ = 2^-6, 2^-12,
  2^-20`` (robust when only some coordinates carry the grid). The classifier "guess D iff
  statistic > 0" is scored on the selection runs (the Clopper–Pearson ε bound of its counts)
  for every (grid, statistic); the best few also get the threshold search of the threshold
  audit (:func:`~privpca.audit._bounds.best_threshold`), still on the selection runs (the
  classifier at 0 wins ties).
* **Bound**: the one chosen (grid, statistic, threshold) is evaluated on the evaluation runs
  only, and ``ε ≥ ln((p₀ − δ)/p₁)`` with one-sided Clopper–Pearson bounds, as in the threshold
  audit: valid at ``confidence`` for *any* (ε, δ)-DP mechanism, whatever grid was chosen. A
  correct mechanism therefore stays below its claim (at chance for a mechanism whose floats
  carry nothing); a grid leak separates the runs and the bound reaches what the number of
  evaluation runs allows (about ``ln(n_eval/3.7)`` at 95 %).

The report gives the best grid, the statistic, the balanced accuracy of the chosen test as a
classifier on the evaluation runs, ``epsilon_lower`` and whether it exceeds the claimed ε.

The lattice probe
-----------------
A grid read coordinate by coordinate does not survive a nonlinear post-processing: issue 35's
Bingham sampler released ``U·z/‖z‖`` with ``z`` on the lattice ``2^-30·s∘ℤ^p``.
:func:`lattice_probe` asks whether released vectors are proportional to short integer vectors
(an LLL reduction, :mod:`privpca.audit.lattice`), directly or through linear maps the auditor
rebuilds from each neighbour, and whether that tells the neighbours apart (the same
selection/evaluation split and bound as above). :func:`generator_lattice_probe` asks it of
the continuous draws of the generator a fit gets, before any mechanism maps them: the general
guard, which needs no knowledge of the mechanism. Each says in its docstring what it cannot
see.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from privpca._config import secure_mode
from privpca.audit._bounds import CellBounds, ThresholdTest, best_threshold, epsilon_bound
from privpca.audit.core import (
    SELECTION_CONFIDENCE,
    AuditReport,
    _callable_rng,
    _decide,
    _estimator_setup,
    _fit_runs,
    _is_estimator,
    _run_states,
    _sample_callable,
)
from privpca.audit.neighbours import release_features

__all__ = [
    "DEFAULT_BITS",
    "GENERATOR_BITS",
    "GENERATOR_METHODS",
    "LATTICE_FEATURES",
    "FloatProbeReport",
    "GeneratorLatticeReport",
    "Grid",
    "LatticeProbeReport",
    "audit_with_probe",
    "candidate_grids",
    "float_probe",
    "generator_lattice_probe",
    "lattice_neighbours",
    "lattice_probe",
    "lattice_probe_releases",
    "lattice_vectors",
    "noise_scales",
    "probe_features",
    "probe_releases",
]

#: The ``b`` of the grids ``σ·2^-b`` (2^-30 was the leaking grid of issue 26).
DEFAULT_BITS: tuple[int, ...] = tuple(range(8, 53))
#: Powers of two from ``2^-POW2_BELOW`` × the smallest reference magnitude ...
POW2_BELOW = 56
#: ... up to ``2^-POW2_ABOVE`` × the noise scale.
POW2_ABOVE = 4
#: Coordinates tested one by one (besides their sum and vote).
MAX_COORDINATES = 16
#: Candidates (by the classifier's selection score) given the full threshold search.
REFINE = 8
#: The tolerances ``τ = 2^-t`` of the ``near(τ)`` statistics.
TOLERANCE_BITS: tuple[int, ...] = (12, 6, 20)


@dataclass(frozen=True)
class Grid:
    """A candidate grid: its step and how it was made (``"σ·2^-30"``, ``"2^-28"``)."""

    step: float
    label: str


@dataclass(frozen=True)
class FloatProbeReport(CellBounds):
    """The outcome of :func:`float_probe`.

    Attributes
    ----------
    epsilon, delta : float
        The claimed privacy.
    epsilon_lower : float
        ε proven by the evaluation runs with probability ≥ ``confidence``; above ``epsilon``:
        the claim is violated (the floats tell the neighbours apart).
    runs : int
        Runs per dataset (selection and evaluation together).
    grid : float
        The grid step of the chosen test (NaN when no test could be made).
    grid_label : str
        How that grid was made, e.g. ``"σ=5.27591·2^-30"`` or ``"2^-28"``.
    statistic : str
        ``"sum"``, ``"vote"`` or ``"coordinate[j]"`` of ``s = d₁ − d₀``, or ``"near(τ)"``.
    threshold, upper, swap :
        The chosen threshold test (as in :class:`~privpca.audit.AuditReport`).
    counts : tuple of int
        Hits among the evaluation runs (first dataset, second, in test order) and the number
        of evaluation runs per dataset.
    accuracy : float
        Balanced accuracy of the chosen test as a classifier of the evaluation runs (0.5:
        chance; 1: every run told apart).
    confidence : float
        The per-cell level of ``epsilon_lower``.
    mode : str
        ``"secure"`` when the runs were drawn in secure mode, else ``"default"``.
    reference : str
        ``"exact values"`` or ``"reference runs"`` (what the outputs were compared with).
    grids : int
        Grids tried.
    description : str
        The neighbours (and mechanism) probed.
    selection_epsilon : float
        The ε bound the chosen test reached on the selection runs (at the stricter selection
        level). 0: no grid told the selection runs apart, and ``grid`` is merely the first
        candidate.
    """

    epsilon: float
    delta: float
    epsilon_lower: float
    runs: int
    grid: float
    grid_label: str
    statistic: str
    threshold: float
    upper: bool
    swap: bool
    counts: tuple[int, int, int]
    accuracy: float
    confidence: float
    mode: str
    reference: str
    grids: int
    description: str
    selection_epsilon: float = 0.0

    def __str__(self) -> str:
        return (f"float probe ({self.mode} mode), claimed eps={self.epsilon:g}: eps_lower="
                f"{self.epsilon_lower:.3f}, accuracy={self.accuracy:.3f}, grid "
                f"{self.grid_label}, statistic {self.statistic}, runs={self.runs} "
                f"[{self._verdict}]")


# --------------------------------------------------------------------------- grids


def _scale_items(scales: Mapping[str, float] | Sequence[float] | None
                 ) -> list[tuple[str, float]]:
    if scales is None:
        return []
    items = (list(scales.items()) if isinstance(scales, Mapping)
             else [(f"σ={float(v):.6g}", float(v)) for v in np.ravel(np.asarray(scales))])
    out: dict[float, str] = {}
    for label, value in items:
        v = float(value)
        if math.isfinite(v) and v > 0 and v not in out:
            out[v] = label
    return [(label, v) for v, label in out.items()]


def candidate_grids(scales: Mapping[str, float] | Sequence[float] | None,
                    magnitudes: Sequence[float] = (),
                    bits: Sequence[int] = DEFAULT_BITS) -> list[Grid]:
    """The grids to try: ``σ·2^-b`` for every scale and ``b`` in ``bits`` (coarse to fine),
    then powers of two from ``2^-POW2_ABOVE`` × the noise (the largest scale, or magnitude
    when no scale is known) down to ``2^-POW2_BELOW`` × the smallest scale or magnitude.
    Duplicates are dropped (the first label is kept)."""
    items = _scale_items(scales)
    grids: dict[float, str] = {}
    for label, s in items:
        for b in bits:
            step = math.ldexp(s, -int(b))
            if step > 0 and step not in grids:
                grids[step] = f"{label}·2^-{int(b)}"
    refs = [v for _, v in items] + [float(m) for m in magnitudes
                                    if math.isfinite(float(m)) and float(m) > 0]
    if refs:
        noise = max(v for _, v in items) if items else max(refs)
        hi = math.frexp(noise)[1] - 1 - POW2_ABOVE
        lo = math.frexp(min(refs))[1] - 1 - POW2_BELOW
        for j in range(min(hi, 1023), max(lo, -1074) - 1, -1):
            step = math.ldexp(1.0, j)
            if step not in grids:
                grids[step] = f"2^{j}"
    return [Grid(step, label) for step, label in grids.items()]


# --------------------------------------------------------------------------- the probe


def _dist(a: NDArray[np.float64]) -> NDArray[np.float64]:
    """Distance to the nearest integer (NaN stays NaN; huge values are integers)."""
    return np.asarray(np.abs(a - np.rint(a)))


def _statistics(d: tuple[NDArray[np.float64], NDArray[np.float64]]
                ) -> list[tuple[str, NDArray[np.float64]]]:
    """Scalar candidates from the distances ``(d₀, d₁)`` (runs × coordinates each): with
    ``s = d₁ − d₀``, its sum, its sign vote, each coordinate, and the tolerance counts
    ``near(τ) = #{d₀ < τ} − #{d₁ < τ}`` (robust when some coordinates carry no grid)."""
    d0, d1 = d
    s = d1 - d0
    out = [("sum", s.sum(axis=1))]
    out += [(f"near(2^-{t})", (d0 < 2.0**-t).sum(axis=1) - (d1 < 2.0**-t).sum(axis=1))
            for t in TOLERANCE_BITS]
    m = s.shape[1]
    if m > 1:
        out.append(("vote", np.sign(s).sum(axis=1)))
        out += [(f"coordinate[{j}]", s[:, j]) for j in range(min(m, MAX_COORDINATES))]
    return [(name, np.asarray(v, dtype=np.float64)) for name, v in out]


def _d(out: NDArray[np.float64], v0: NDArray[np.float64], v1: NDArray[np.float64],
       step: float) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    with np.errstate(over="ignore", invalid="ignore"):
        return _dist((out - v0) / step), _dist((out - v1) / step)


def probe_releases(
    O0: ArrayLike,
    O1: ArrayLike,
    *,
    epsilon: float,
    delta: float,
    values: tuple[ArrayLike, ArrayLike] | None = None,
    scales: Mapping[str, float] | Sequence[float] | None = None,
    confidence: float = 0.95,
    selection_fraction: float = 0.3,
    bits: Sequence[int] = DEFAULT_BITS,
    mode: str = "default",
    description: str = "",
) -> FloatProbeReport:
    """The floating-point probe on releases already drawn: ``O0`` on D, ``O1`` on D'.

    Parameters
    ----------
    O0, O1 : array-like of shape (runs, ...) each
        One release per row (flattened), the same number of runs for both.
    epsilon, delta : float
        The claim.
    values : pair of array-like, optional
        ``(f(D), f(D'))``, the exact values (broadcast to a release). Default: the first run
        of each dataset is the reference (see the module docstring).
    scales : sequence of float or mapping label → float, optional
        The noise scales σ whose grids ``σ·2^-b`` are tried (powers of two always are).
    confidence, selection_fraction : float
        As in :func:`~privpca.audit.audit`.
    bits : sequence of int
        The ``b`` of the grids ``σ·2^-b``.
    mode, description : str
        Carried into the report.
    """
    A0 = np.asarray(O0, dtype=np.float64)
    A1 = np.asarray(O1, dtype=np.float64)
    runs = A0.shape[0]
    A0, A1 = A0.reshape(runs, -1), A1.reshape(A1.shape[0], -1)
    if A1.shape != A0.shape:
        raise ValueError(f"O0 and O1 must have the same shape; got {A0.shape} and {A1.shape}.")
    if runs < 20:
        raise ValueError(f"runs must be at least 20. Got {runs} instead.")
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1). Got {confidence!r} instead.")
    if not 0.0 < selection_fraction < 1.0:
        raise ValueError(f"selection_fraction must be in (0, 1). Got {selection_fraction!r}.")
    n_sel = max(3, min(runs - 1, round(selection_fraction * runs)))
    n_eval = runs - n_sel
    m = A0.shape[1]
    if values is None:
        v0, v1 = A0[0].copy(), A1[0].copy()
        first, reference = 1, "reference runs"
    else:
        v0 = np.broadcast_to(np.asarray(values[0], dtype=np.float64).ravel(), (m,)).copy()
        v1 = np.broadcast_to(np.asarray(values[1], dtype=np.float64).ravel(), (m,)).copy()
        first, reference = 0, "exact values"
    S0, S1 = A0[first:n_sel], A1[first:n_sel]
    # Coordinates kept: decided on the selection runs (and the candidates) only.
    pooled = np.vstack([S0, S1, v0[None, :], v1[None, :]])
    keep = np.all(np.isfinite(pooled), axis=0) & (np.ptp(pooled, axis=0) > 0)
    none = FloatProbeReport(float(epsilon), float(delta), 0.0, runs, math.nan, "none", "none",
                            math.nan, True, False, (0, 0, n_eval), 0.5, float(confidence),
                            mode, reference, 0, description)
    if not keep.any():
        return none
    A0, A1, S0, S1, v0, v1 = (a[..., keep] for a in (A0, A1, S0, S1, v0, v1))
    with np.errstate(invalid="ignore"):
        magnitudes = [float(np.median(np.abs(S0 - v0))), float(np.median(np.abs(A0)))]
    grids = candidate_grids(scales, magnitudes, bits)
    if not grids:
        return none
    # Pass 1: the classifier "guess D iff s > 0" on the selection runs, every candidate.
    keys: list[tuple[int, int]] = []
    hits: list[tuple[int, int, int]] = []
    for gi, grid in enumerate(grids):
        st0 = _statistics(_d(S0, v0, v1, grid.step))
        st1 = _statistics(_d(S1, v0, v1, grid.step))
        for si, ((_, a), (_, b)) in enumerate(zip(st0, st1, strict=True)):
            keys.append((gi, si))
            # Runs strictly on their own side of 0 (ties tell nothing): breaks ties between
            # equally scored candidates in favour of the one that separates without ties.
            strict = max(int((a > 0).sum() + (b < 0).sum()), int((a < 0).sum() + (b > 0).sum()))
            hits.append((int((a > 0).sum()), int((b > 0).sum()), strict))
    h = np.asarray(hits, dtype=np.int64)
    n_s = S0.shape[0]
    level = max(confidence, SELECTION_CONFIDENCE)
    score = np.max(np.stack([eps for eps, _ in _zero_tests(h[:, 0], h[:, 1], n_s, delta,
                                                           level)]), axis=0)
    top = np.lexsort((-h[:, 2], -score))[:REFINE]  # by score, then by strict separation
    # Pass 2: the threshold search on the best candidates, still on the selection runs.
    best: tuple[float, int, int, int, ThresholdTest] | None = None
    for c in top:
        gi, si = keys[int(c)]
        s0 = _statistics(_d(S0, v0, v1, grids[gi].step))[si][1]
        s1 = _statistics(_d(S1, v0, v1, grids[gi].step))[si][1]
        if not (np.all(np.isfinite(s0)) and np.all(np.isfinite(s1))):
            continue
        sc, test = best_threshold(s0, s1, delta, level)
        # The classifier at 0 itself, in its best orientation, competes too and wins ties:
        # when the selection runs separate perfectly, the searched threshold sits at the edge
        # of the selection values (and misses evaluation runs just beyond it), 0 does not.
        zeros = _zero_tests(h[int(c), 0], h[int(c), 1], n_s, delta, level)
        z_eps, z_test = max(((float(e), t) for e, t in zeros), key=lambda o: o[0])
        if z_eps >= sc:
            sc, test = z_eps, z_test
        if best is None or (sc, h[int(c), 2]) > (best[0], best[1]):
            best = (sc, int(h[int(c), 2]), gi, si, test)
    if best is None:
        return none
    sel_eps, _, gi, si, test = best
    grid = grids[gi]
    name, e0 = _statistics(_d(A0[n_sel:], v0, v1, grid.step))[si]
    _, e1 = _statistics(_d(A1[n_sel:], v0, v1, grid.step))[si]
    k0, k1 = test.counts(e0, e1)
    eps_lower = float(epsilon_bound(k0, n_eval, k1, n_eval, delta, confidence))
    accuracy = (k0 + n_eval - k1) / (2.0 * n_eval)
    return FloatProbeReport(float(epsilon), float(delta), eps_lower, runs, grid.step,
                            grid.label, name, test.threshold, test.upper, test.swap,
                            (k0, k1, n_eval), accuracy, float(confidence), mode, reference,
                            len(grids), description, float(sel_eps))


def _zero_tests(a0: ArrayLike, a1: ArrayLike, n: int, delta: float, level: float
                ) -> list[tuple[NDArray[np.float64], ThresholdTest]]:
    """The classifier at threshold 0 in its four orientations, from its selection hits
    ``a0 = #{s > 0}`` on D and ``a1`` on D' (vectorised over candidates): ``s > 0`` or its
    complement ``s ≤ 0`` (ties count as "not D"), either neighbour first."""
    k0, k1 = np.asarray(a0), np.asarray(a1)
    return [
        (epsilon_bound(k0, n, k1, n, delta, level), ThresholdTest(0.0, True, False)),
        (epsilon_bound(k1, n, k0, n, delta, level), ThresholdTest(0.0, True, True)),
        (epsilon_bound(n - k1, n, n - k0, n, delta, level), ThresholdTest(0.0, False, True)),
        (epsilon_bound(n - k0, n, n - k1, n, delta, level), ThresholdTest(0.0, False, False)),
    ]


# --------------------------------------------------------------------------- estimators


def probe_features(estimator: Any) -> NDArray[np.float64]:
    """The raw numbers a fitted estimator releases, for the probe: the released matrix
    ``Σ λᵢcᵢcᵢᵀ`` (packed upper triangle; with every component it is the noisy matrix the
    mechanism released, up to the eigensolver's rounding) when ``explained_variance_`` has a
    value per component, the ``explained_variance_``, the ``mean_`` and the components
    (each signed so that its largest entry is positive), unprojected."""
    comps = np.atleast_2d(np.asarray(estimator.components_, dtype=np.float64))
    idx = np.argmax(np.abs(comps), axis=1)
    signs = np.where(comps[np.arange(comps.shape[0]), idx] < 0, -1.0, 1.0)
    parts = [(comps * signs[:, None]).ravel()]
    variance = getattr(estimator, "explained_variance_", None)
    if variance is not None:
        lam = np.asarray(variance, dtype=np.float64).ravel()
        if lam.size == comps.shape[0]:
            M = (comps.T * lam) @ comps
            parts.append(M[np.triu_indices(M.shape[0])])
        parts.append(lam)
    mean = getattr(estimator, "mean_", None)
    if mean is not None:
        parts.append(np.asarray(mean, dtype=np.float64).ravel())
    return np.concatenate(parts) if parts else np.zeros(0)


def noise_scales(estimator: Any, n_samples: int) -> dict[str, float]:
    """The noise scales a fitted estimator states (``noise_scale_``, each spend's
    ``noise_scale`` in ``privacy_``), each also over ``n`` and ``n − 1`` (the variances are
    eigenvalues over n or n − 1)."""
    base: list[tuple[str, Any]] = [("noise_scale_", getattr(estimator, "noise_scale_", None))]
    spends = getattr(getattr(estimator, "privacy_", None), "spends", None) or ()
    base += [(f"spend[{i}]", getattr(s, "noise_scale", None)) for i, s in enumerate(spends)]
    out: dict[str, float] = {}
    seen: set[float] = set()
    for label, value in base:
        try:
            v = float(value)
        except (TypeError, ValueError):
            continue
        if not (math.isfinite(v) and v > 0):
            continue
        for lab, w in ((label, v), (f"{label}/n", v / n_samples),
                       (f"{label}/(n-1)", v / (n_samples - 1) if n_samples > 1 else v)):
            if w not in seen:
                seen.add(w)
                out[lab] = w
    return out


def _estimator_releases(su: Any, states: list[Any], runs: int, progress: bool,
                        with_features: bool
                        ) -> tuple[NDArray[np.float64], NDArray[np.float64], dict[str, float],
                                   NDArray[np.float64] | None, NDArray[np.float64] | None]:
    """Probe vectors (and, optionally, threshold-audit features) of ``runs`` fits per side."""
    name = type(su.estimator).__name__
    out: list[Any] = []
    scales: dict[str, float] = {}
    for X, st, tag in ((su.X, states[:runs], "X"), (su.X_neighbour, states[runs:], "X'")):
        P, F = [], []
        for fit in _fit_runs(su.estimator, X, st, progress, f"{name} on {tag}"):
            if not scales:
                scales = noise_scales(fit, len(X))
            P.append(probe_features(fit))
            if with_features:
                F.append(release_features(fit, su.record, su.other))
        out.append((np.vstack(P), np.vstack(F) if with_features else None))
    (P0, F0), (P1, F1) = out
    return P0, P1, scales, F0, F1


def float_probe(
    mechanism: Any,
    X: ArrayLike | None = None,
    X_neighbour: ArrayLike | None = None,
    *,
    epsilon: float,
    delta: float,
    runs: int,
    values: tuple[ArrayLike, ArrayLike] | None = None,
    exact: Callable[[Any], ArrayLike] | None = None,
    scales: Mapping[str, float] | Sequence[float] | None = None,
    random_state: Any = None,
    setting: str = "paper",
    confidence: float = 0.95,
    selection_fraction: float = 0.3,
    bits: Sequence[int] = DEFAULT_BITS,
    progress: bool = False,
) -> FloatProbeReport:
    """Probe ``mechanism`` for a floating-point leak on two neighbours (``runs`` runs each).

    Runs in the mode in force: inside ``privpca.config_context(secure_mode=True)`` the
    estimators (and a callable's ``rng``) draw from the secure generator, and ``random_state``
    must be None.

    Parameters
    ----------
    mechanism : estimator or callable
        As in :func:`~privpca.audit.audit`: an estimator (its built-in neighbours when ``X``
        is omitted; its released matrix, variances and mean are probed, see
        :func:`probe_features`, with the grids of its stated noise scales,
        :func:`noise_scales`) or a callable ``(X, rng) -> release`` (vectorised when it
        takes ``runs=``).
    X, X_neighbour : array-like, optional
        The neighbours (required for a callable).
    epsilon, delta : float
        The claim.
    runs : int
        Runs per dataset.
    values : pair of array-like, optional
        The exact values ``(f(D), f(D'))``.
    exact : callable, optional
        ``X -> f(X)``: computes them instead. Neither: reference runs (module docstring).
    scales : sequence of float or mapping label → float, optional
        Noise scales σ whose grids ``σ·2^-b`` are tried (added to an estimator's own).
    random_state : None, int, SeedSequence or Generator
        Seeds the runs (default mode only).
    setting : {"paper", "release"}
        The estimator's built-in neighbours.
    confidence, selection_fraction : float
        As in :func:`~privpca.audit.audit`.
    bits : sequence of int
        The ``b`` of the grids ``σ·2^-b``.
    progress : bool
        A progress bar over the runs.

    Examples
    --------
    >>> import numpy as np, privpca
    >>> from privpca.audit import float_probe
    >>> from privpca.mechanisms.secure_noise import SecureGenerator, discrete_gaussian
    >>> def leaky(X, rng, runs):  # issue 26: value + σ·z with z on the grid 2^-30
    ...     z = np.ldexp(discrete_gaussian(SecureGenerator(), 2.0**30, runs), -30)
    ...     return X.sum() + 5.0 * z
    >>> r = float_probe(leaky, np.array([[0.0]]), np.array([[1.0]]), epsilon=1.0,
    ...                 delta=1e-5, runs=1000, scales=[5.0])
    >>> r.violated, r.grid_label
    (True, 'σ=5·2^-30')
    """
    runs = int(runs)
    mode = "secure" if secure_mode() else "default"
    if secure_mode() and random_state is not None:
        raise ValueError("Secure mode refuses random_state: probe with random_state=None.")
    given = _scale_items(scales)
    if _is_estimator(mechanism):
        su = _estimator_setup(mechanism, X, X_neighbour, float(epsilon), float(delta), setting)
        states = _run_states(random_state, 2 * runs)
        P0, P1, own, _, _ = _estimator_releases(su, states, runs, progress, False)
        all_scales = {**own, **dict(given)}
        if exact is not None and values is None:
            values = (np.ravel(exact(su.X)), np.ravel(exact(su.X_neighbour)))
        return probe_releases(P0, P1, epsilon=epsilon, delta=delta, values=values,
                              scales=all_scales, confidence=confidence,
                              selection_fraction=selection_fraction, bits=bits, mode=mode,
                              description=f"{type(su.estimator).__name__}: {su.description}")
    if not callable(mechanism):
        raise TypeError(f"mechanism must be an estimator or a callable. Got {mechanism!r}.")
    if X is None or X_neighbour is None:
        raise ValueError("A callable mechanism needs X and X_neighbour.")
    rng = _callable_rng(random_state)
    O0 = _sample_callable(mechanism, X, rng, runs, progress, "runs on X")
    O1 = _sample_callable(mechanism, X_neighbour, rng, runs, progress, "runs on X'")
    if exact is not None and values is None:
        values = (np.ravel(exact(X)), np.ravel(exact(X_neighbour)))
    return probe_releases(O0, O1, epsilon=epsilon, delta=delta, values=values,
                          scales=dict(given), confidence=confidence,
                          selection_fraction=selection_fraction, bits=bits, mode=mode,
                          description="user-supplied neighbours")


def audit_with_probe(
    estimator: Any,
    *,
    epsilon: float,
    delta: float,
    runs: int,
    random_state: Any = None,
    setting: str = "paper",
    confidence: float = 0.95,
    selection_fraction: float = 0.3,
    progress: bool = False,
) -> tuple[AuditReport, FloatProbeReport]:
    """The threshold audit of an estimator on its built-in neighbours and the float probe on
    the *same* fits (one set of runs, two tests: what ``privpca audit`` does in the mode in
    force). Each test selects on its own selection runs and is evaluated on the others; the
    two cells share runs, which a family-wise correction (Bonferroni, Holm) allows."""
    runs = int(runs)
    if runs < 20:
        raise ValueError(f"runs must be at least 20. Got {runs} instead.")
    if secure_mode() and random_state is not None:
        raise ValueError("Secure mode refuses random_state: audit with random_state=None.")
    eps, dlt = float(epsilon), float(delta)
    su = _estimator_setup(estimator, None, None, eps, dlt, setting)
    states = _run_states(random_state, 2 * runs)
    P0, P1, scales, F0, F1 = _estimator_releases(su, states, runs, progress, True)
    assert F0 is not None and F1 is not None
    n_sel = max(1, min(runs - 1, round(selection_fraction * runs)))
    report = _decide(F0, F1, n_sel, runs - n_sel, eps, dlt, confidence, runs, su.description)
    probe = probe_releases(P0, P1, epsilon=eps, delta=dlt, scales=scales,
                           confidence=confidence, selection_fraction=selection_fraction,
                           mode="secure" if secure_mode() else "default",
                           description=f"{type(su.estimator).__name__}: {su.description}")
    return report, probe


# --------------------------------------------------------------------------- lattice probe
#
# Issue 35: the float probe reads each released number modulo a grid, so it cannot see a
# lattice that a *nonlinear* post-processing hides (Bingham's exact sampler released
# U·z/‖z‖ with z on the lattice 2^-30·s∘ℤ^p). The lattice probe asks instead whether released
# vectors are proportional to short integer vectors (privpca.audit.lattice), and whether that
# tells the neighbours apart; the generator probe asks it of the draws themselves.

#: Features of the neighbours the lattice probe builds by default (the built-in neighbours
#: have 2; a 2-vector carries too few bits to show a 2^30 lattice, see privpca.audit.lattice).
LATTICE_FEATURES = 6
#: The statistic of a vector whose score is NaN in a run (too few nonzero coordinates): high,
#: i.e. "not on a lattice", and the same on both neighbours.
_NO_SCORE = 16.0
#: The precisions of the generator probe (the draws are as precise as floats: 52 is the
#: sharpest; 24 and 40 catch coarser lattices at once).
GENERATOR_BITS: tuple[int, ...] = (24, 40, 52)
#: Continuous draws the generator probe tests (those a mechanism may transform nonlinearly).
GENERATOR_METHODS: dict[str, Callable[[np.random.Generator, int], Any]] = {
    "standard_normal": lambda g, n: g.standard_normal(n),
    "normal(0, 1)": lambda g, n: g.normal(0.0, 1.0, n),
    "random": lambda g, n: g.random(n),
    "standard_exponential": lambda g, n: g.standard_exponential(n),
    "laplace(0, 1)": lambda g, n: g.laplace(0.0, 1.0, n),
    "standard_gamma(2)": lambda g, n: g.standard_gamma(2.0, n),
    "vonmises(0, 1)": lambda g, n: g.vonmises(0.0, 1.0, n),
}


@dataclass(frozen=True)
class LatticeProbeReport(CellBounds):
    """The outcome of :func:`lattice_probe`.

    Attributes
    ----------
    epsilon, delta, epsilon_lower, runs, threshold, upper, swap, counts, accuracy,
    confidence, mode, description, selection_epsilon :
        As in :class:`FloatProbeReport`: the one test chosen on the selection runs,
        evaluated on the others (``epsilon_lower > epsilon``: the lattice structure tells the
        neighbours apart beyond the claim).
    statistic : str
        The chosen statistic: ``"score[v]"`` (the lattice score of released vector ``v``),
        ``"lowest score"`` (over the vectors), or ``"M: score@D' − score@D [v]"`` (``v``
        through the auditor's map ``M`` rebuilt on each neighbour).
    on_lattice : tuple of float
        The fraction of runs on D and on D' with a released vector (raw) scoring below
        ``−LATTICE_THRESHOLD``: structure is *present*. Not a leak by itself: a
        data-independent lattice (secure mode's snapped releases, a mean of them divided by
        n) puts both neighbours' releases on the same lattice.
    lowest_score : tuple of float
        The median over runs of the lowest raw score, on D and on D'.
    vectors : tuple of str
        The released vectors tested (and, after ``" via "``, the maps).
    """

    epsilon: float
    delta: float
    epsilon_lower: float
    runs: int
    statistic: str
    threshold: float
    upper: bool
    swap: bool
    counts: tuple[int, int, int]
    accuracy: float
    confidence: float
    mode: str
    description: str
    selection_epsilon: float
    on_lattice: tuple[float, float]
    lowest_score: tuple[float, float]
    vectors: tuple[str, ...]

    @property
    def structure(self) -> bool:
        """Whether most runs of either neighbour release a vector on a lattice."""
        return max(self.on_lattice) > 0.5

    def __str__(self) -> str:
        return (f"lattice probe ({self.mode} mode), claimed eps={self.epsilon:g}: eps_lower="
                f"{self.epsilon_lower:.3f}, accuracy={self.accuracy:.3f}, statistic "
                f"{self.statistic}, on a lattice {self.on_lattice[0]:.2f}/"
                f"{self.on_lattice[1]:.2f}, runs={self.runs} [{self._verdict}]")


def lattice_vectors(estimator: Any) -> dict[str, NDArray[np.float64]]:
    """The released vectors of a fitted estimator the lattice probe tests: each component,
    ``explained_variance_``, ``mean_`` and, when there is a variance per component, the
    released matrix ``Σ λᵢcᵢcᵢᵀ`` (packed upper triangle), each as released."""
    comps = np.atleast_2d(np.asarray(estimator.components_, dtype=np.float64))
    out = {f"components_[{i}]": comps[i].copy() for i in range(comps.shape[0])}
    variance = getattr(estimator, "explained_variance_", None)
    if variance is not None:
        lam = np.asarray(variance, dtype=np.float64).ravel()
        out["explained_variance_"] = lam
        if lam.size == comps.shape[0]:
            M = (comps.T * lam) @ comps
            out["released matrix"] = M[np.triu_indices(M.shape[0])]
    mean = getattr(estimator, "mean_", None)
    if mean is not None:
        out["mean_"] = np.asarray(mean, dtype=np.float64).ravel()
    return out


def lattice_neighbours(estimator: Any, setting: str = "paper",
                       n_features: int = LATTICE_FEATURES) -> tuple[Any, Any, dict[str, Any],
                                                                     str]:
    """The built-in neighbours (:func:`~privpca.audit.builtin_neighbours`) lifted to
    ``n_features`` features: the public records get ``n_features − 2`` more deterministic
    columns (small multiples of permuted copies of their second column; rows stay within
    the paper setting's unit bound), the differing records zeros there. Returns
    ``(X, X_neighbour, params, description)``."""
    from privpca.audit.neighbours import builtin_neighbours

    nb = builtin_neighbours(estimator, setting)
    extra = int(n_features) - nb.X.shape[1]
    if extra <= 0:
        return nb.X, nb.X_neighbour, nb.params, nb.description
    base = nb.X[:-1]
    m = base.shape[0]
    cols = []
    for j in range(extra):
        perm = (np.arange(m) * (7919 + 104729 * j) + 13 * j) % max(m, 1)
        cols.append((0.5 / (j + 2)) * base[perm, 1] if m else np.zeros(0))
    lifted = np.column_stack([base, *cols]) if m else np.zeros((0, nb.X.shape[1] + extra))
    pad = np.zeros(extra)
    X = np.vstack([lifted, np.concatenate([nb.X[-1], pad])])
    Xn = np.vstack([lifted, np.concatenate([nb.X_neighbour[-1], pad])])
    return X, Xn, nb.params, f"{nb.description}; lifted to {int(n_features)} features"


def _vector_scores(vectors: Sequence[Mapping[str, NDArray[np.float64]]],
                   maps: Sequence[Mapping[str, NDArray[np.float64]]], bits: Sequence[int]
                   ) -> dict[str, NDArray[np.float64]]:
    """Per statistic name, its value in each run: ``score[v]`` for every released vector,
    ``lowest score``, and for every map pair ``score@D' − score@D`` (positive: D)."""
    from privpca.audit.lattice import vector_lattice_score

    names = list(vectors[0])
    out: dict[str, list[float]] = {}
    for run in vectors:
        raw = []
        for name in names:
            sc = vector_lattice_score(run[name], bits) if name in run else math.nan
            raw.append(sc)
            out.setdefault(f"score[{name}]", []).append(sc if math.isfinite(sc) else _NO_SCORE)
        finite = [s for s in raw if math.isfinite(s)]
        out.setdefault("lowest score", []).append(min(finite) if finite else _NO_SCORE)
        if maps:
            m0, m1 = maps
            for label in m0:
                for name in names:
                    v = run.get(name)
                    A0, A1 = m0[label], m1[label]
                    if v is None or A0.shape[1] != v.size:
                        continue
                    s0 = vector_lattice_score(A0 @ v, bits)
                    s1 = vector_lattice_score(A1 @ v, bits)
                    diff = (s1 - s0) if math.isfinite(s0) and math.isfinite(s1) else 0.0
                    out.setdefault(f"{label}: score@D' − score@D [{name}]", []).append(diff)
    return {k: np.asarray(v, dtype=np.float64) for k, v in out.items()}


def lattice_probe_releases(
    V0: Sequence[Mapping[str, ArrayLike]],
    V1: Sequence[Mapping[str, ArrayLike]],
    *,
    epsilon: float,
    delta: float,
    maps: tuple[Mapping[str, ArrayLike], Mapping[str, ArrayLike]] | None = None,
    confidence: float = 0.95,
    selection_fraction: float = 0.3,
    bits: Sequence[int] | None = None,
    mode: str = "default",
    description: str = "",
) -> LatticeProbeReport:
    """The lattice probe on releases already drawn: ``V0`` (runs on D) and ``V1`` (on D'),
    one mapping ``name → vector`` per run, the same names in every run.

    ``maps``: optional ``({label: M_D}, {label: M_D'})``, matrices the auditor rebuilt from
    each neighbour; every released vector of matching length is also tested through both.
    The statistics are scored on the selection runs (threshold search), the chosen one is
    evaluated on the others, as in :func:`probe_releases`.
    """
    from privpca.audit.lattice import DEFAULT_LATTICE_BITS, LATTICE_THRESHOLD

    runs = len(V0)
    if len(V1) != runs:
        raise ValueError(f"V0 and V1 must hold as many runs; got {runs} and {len(V1)}.")
    if runs < 20:
        raise ValueError(f"runs must be at least 20. Got {runs} instead.")
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1). Got {confidence!r} instead.")
    if not 0.0 < selection_fraction < 1.0:
        raise ValueError(f"selection_fraction must be in (0, 1). Got {selection_fraction!r}.")
    bits = DEFAULT_LATTICE_BITS if bits is None else tuple(int(b) for b in bits)
    A0 = [{k: np.ravel(np.asarray(v, dtype=np.float64)) for k, v in r.items()} for r in V0]
    A1 = [{k: np.ravel(np.asarray(v, dtype=np.float64)) for k, v in r.items()} for r in V1]
    mats: list[Mapping[str, NDArray[np.float64]]] = []
    labels: list[str] = []
    if maps is not None:
        mats = [{k: np.atleast_2d(np.asarray(M, dtype=np.float64)) for k, M in m.items()}
                for m in maps]
        if set(mats[0]) != set(mats[1]):
            raise ValueError("maps must give the same labels for both neighbours.")
        labels = sorted(mats[0])
    st0 = _vector_scores(A0, mats, bits)
    st1 = _vector_scores(A1, mats, bits)
    n_sel = max(1, min(runs - 1, round(selection_fraction * runs)))
    n_eval = runs - n_sel
    low0, low1 = st0["lowest score"], st1["lowest score"]
    on = (float(np.mean(low0 < -LATTICE_THRESHOLD)), float(np.mean(low1 < -LATTICE_THRESHOLD)))
    lowest = (float(np.median(low0)), float(np.median(low1)))
    names = tuple(list(A0[0]) + [f"{n} via {lab}" for lab in labels for n in A0[0]])
    level = max(confidence, SELECTION_CONFIDENCE)
    best: tuple[float, str, ThresholdTest] | None = None
    for name in st0:
        if name not in st1:
            continue
        s0, s1 = st0[name][:n_sel], st1[name][:n_sel]
        if np.ptp(np.concatenate([s0, s1])) == 0:
            continue  # constant on the selection runs: tells nothing
        sc, test = best_threshold(s0, s1, delta, level)
        # The natural threshold competes and wins ties (as the classifier at 0 does in
        # probe_releases: a searched threshold sits at the edge of the selection values):
        # 0 for a difference (which neighbour's map puts the release on a lattice), the
        # lattice threshold for a score.
        t = 0.0 if "score@D" in name else -LATTICE_THRESHOLD
        fixed = _zero_tests(int((s0 > t).sum()), int((s1 > t).sum()), n_sel, delta, level)
        f_eps, f_test = max(((float(e), ft) for e, ft in fixed), key=lambda o: o[0])
        if f_eps >= sc:
            sc, test = f_eps, ThresholdTest(t, f_test.upper, f_test.swap)
        if best is None or sc > best[0]:
            best = (sc, name, test)
    if best is None:
        return LatticeProbeReport(float(epsilon), float(delta), 0.0, runs, "none", math.nan,
                                  True, False, (0, 0, n_eval), 0.5, float(confidence), mode,
                                  description, 0.0, on, lowest, names)
    sel_eps, name, test = best
    k0, k1 = test.counts(st0[name][n_sel:], st1[name][n_sel:])
    eps_lower = float(epsilon_bound(k0, n_eval, k1, n_eval, delta, confidence))
    accuracy = (k0 + n_eval - k1) / (2.0 * n_eval)
    return LatticeProbeReport(float(epsilon), float(delta), eps_lower, runs, name,
                              test.threshold, test.upper, test.swap, (k0, k1, n_eval),
                              accuracy, float(confidence), mode, description,
                              float(sel_eps), on, lowest, names)


def lattice_probe(
    mechanism: Any,
    X: ArrayLike | None = None,
    X_neighbour: ArrayLike | None = None,
    *,
    epsilon: float,
    delta: float,
    runs: int,
    maps: Callable[[NDArray[np.float64]], Mapping[str, ArrayLike]] | None = None,
    random_state: Any = None,
    setting: str = "paper",
    n_features: int = LATTICE_FEATURES,
    confidence: float = 0.95,
    selection_fraction: float = 0.3,
    bits: Sequence[int] | None = None,
    progress: bool = False,
) -> LatticeProbeReport:
    """Probe ``mechanism`` for a lattice in its released vectors (``runs`` runs per
    neighbour, in the mode in force).

    Every released vector (for an estimator: :func:`lattice_vectors`; for a callable
    ``(X, rng) -> release``: its flattened output) gets the LLL short-vector score of
    :mod:`privpca.audit.lattice` — ``log₂`` of the shortest integer vector proportional to it
    (to the float precision) over the expected length — on consecutive blocks of up to
    ``MAX_DIM`` coordinates (so every ratio of coordinates within a block is covered). The
    scores, and through ``maps`` the scores of auditor-rebuilt linear images, are the
    candidate statistics of a threshold test chosen on the selection runs and evaluated on the
    others: ``epsilon_lower`` is valid at ``confidence`` for any (ε, δ)-DP mechanism.

    What it sees: a release that is (a block of it) proportional to an integer vector of
    fewer than about ``(d−1)/d·50`` bits, ``d ≥ 3`` its length — the sampler's lattice
    surviving a public *linear* map — and, when that differs between the neighbours, a
    violation. ``on_lattice`` reports structure even when it does not differ.

    What it cannot see: a lattice hidden behind a *data-dependent* map the auditor does not
    rebuild. Issue 35 is such a case: Bingham's exact sampler released ``U·(s∘K)/‖s∘K‖``
    with ``U`` and the scales ``s`` functions of the table, so the released component is on
    no lattice by itself, and with unknown per-coordinate scales no linear lattice test can
    find it from the outputs alone. Pass ``maps`` (here, ``diag(1/s)·Uᵀ`` of each neighbour,
    :func:`privpca.audit.lattice.kgm_map`) to test such a hypothesis; the general guard is
    :func:`generator_lattice_probe`, which tests the draws before any map. Nor does it see a
    lattice with an offset (``c + g·K``: :func:`float_probe`), 2-vectors (too few bits), or
    lattices finer than about ``2^(−50·(d−1)/d)`` of the vector's size.

    Parameters
    ----------
    mechanism : estimator or callable
        As in :func:`float_probe`. An estimator without ``X`` runs on its built-in neighbours
        lifted to ``n_features`` features (:func:`lattice_neighbours`).
    X, X_neighbour : array-like, optional
        The neighbours.
    epsilon, delta : float
        The claim.
    runs : int
        Runs per dataset (at least 20).
    maps : callable, optional
        ``X -> {label: matrix}``: linear maps the auditor rebuilds from a dataset; each
        released vector whose length matches a matrix's columns is also tested through the
        matrix of each neighbour (the statistic ``score@D' − score@D``).
    random_state : None, int, SeedSequence or Generator
        Seeds the runs (default mode only).
    setting : {"paper", "release"}
        The built-in neighbours' setting.
    n_features : int
        Features of the lifted built-in neighbours.
    confidence, selection_fraction : float
        As in :func:`~privpca.audit.audit`.
    bits : sequence of int, optional
        The precisions of the lattice test (default
        :data:`~privpca.audit.lattice.DEFAULT_LATTICE_BITS`).
    progress : bool
        A progress bar over the runs.
    """
    runs = int(runs)
    mode = "secure" if secure_mode() else "default"
    if secure_mode() and random_state is not None:
        raise ValueError("Secure mode refuses random_state: probe with random_state=None.")
    if _is_estimator(mechanism):
        if X is None:
            from sklearn.base import clone

            X0, X1, params, desc = lattice_neighbours(mechanism, setting, n_features)
            est = clone(mechanism).set_params(**params)
            su = _estimator_setup(est, X0, X1, float(epsilon), float(delta), setting)
            desc = f"{type(est).__name__}: {desc}"
        else:
            su = _estimator_setup(mechanism, X, X_neighbour, float(epsilon), float(delta),
                                  setting)
            desc = f"{type(su.estimator).__name__}: {su.description}"
        states = _run_states(random_state, 2 * runs)
        name = type(su.estimator).__name__
        V0 = [lattice_vectors(f) for f in _fit_runs(su.estimator, su.X, states[:runs],
                                                     progress, f"{name} on X")]
        V1 = [lattice_vectors(f) for f in _fit_runs(su.estimator, su.X_neighbour,
                                                     states[runs:], progress, f"{name} on X'")]
        D0, D1 = su.X, su.X_neighbour
    else:
        if not callable(mechanism):
            raise TypeError(f"mechanism must be an estimator or a callable. Got {mechanism!r}.")
        if X is None or X_neighbour is None:
            raise ValueError("A callable mechanism needs X and X_neighbour.")
        rng = _callable_rng(random_state)
        O0 = _sample_callable(mechanism, X, rng, runs, progress, "runs on X")
        O1 = _sample_callable(mechanism, X_neighbour, rng, runs, progress, "runs on X'")
        V0 = [{"output": o} for o in O0]
        V1 = [{"output": o} for o in O1]
        D0, D1 = np.asarray(X, dtype=np.float64), np.asarray(X_neighbour, dtype=np.float64)
        desc = "user-supplied neighbours"
    pair = None if maps is None else (maps(D0), maps(D1))
    return lattice_probe_releases(V0, V1, epsilon=epsilon, delta=delta, maps=pair,
                                  confidence=confidence, selection_fraction=selection_fraction,
                                  bits=bits, mode=mode, description=desc)


@dataclass(frozen=True)
class GeneratorLatticeReport:
    """The outcome of :func:`generator_lattice_probe`.

    Attributes
    ----------
    mode : str
        ``"secure"`` (strict secure mode in force) or ``"default"``.
    generator : str
        The class of the generator probed.
    draws, dim : int
        Vectors tested per method, and their length.
    methods : tuple of (str, float, float)
        Per method: its name, the fraction of its vectors scoring below
        ``−LATTICE_THRESHOLD``, and their median score.
    """

    mode: str
    generator: str
    draws: int
    dim: int
    methods: tuple[tuple[str, float, float], ...]

    @property
    def flagged(self) -> tuple[str, ...]:
        """The methods whose draws lie on a lattice (most vectors below the threshold)."""
        return tuple(name for name, frac, _ in self.methods if frac > 0.5)

    @property
    def violated(self) -> bool:
        """Whether some continuous draw lies on a lattice."""
        return bool(self.flagged)

    def __str__(self) -> str:
        parts = ", ".join(f"{n} {f:.2f} ({s:+.1f})" for n, f, s in self.methods)
        verdict = "LATTICE: " + ", ".join(self.flagged) if self.violated else "ok"
        return f"generator lattice probe ({self.mode} mode, {self.generator}): {parts} [{verdict}]"


def generator_lattice_probe(rng: np.random.Generator | None = None, *, draws: int = 16,
                            dim: int = 8, bits: Sequence[int] | None = None,
                            methods: Mapping[str, Callable[[np.random.Generator, int], Any]]
                            | None = None) -> GeneratorLatticeReport:
    """Do the continuous draws a fit would make lie on a lattice?

    ``rng=None`` probes the generator an unseeded estimator gets in the mode in force
    (:func:`privpca.mechanisms.randomness.check_random_state`). Each method of
    :data:`GENERATOR_METHODS` draws ``draws`` vectors of ``dim`` values, each scored by
    :func:`privpca.audit.lattice.lattice_score`; a method is flagged when most of its vectors
    are proportional to a short integer vector. Issue 35's ``standard_normal`` (``2^-30·K``)
    scores about −12 at ``dim = 8``; independent continuous draws score about 0.

    This needs no knowledge of any mechanism, and is the check that would have caught issue
    35 from its source: a lattice in the draws is not a leak by itself (an additive release
    snapped to a public grid is safe), but any mechanism that passes the draws through a
    data-dependent map (Bingham's sampler: ``U·(s∘z)/‖s∘z‖``) leaks the map, and through it
    the data, to a lattice reduction. It sees only lattices through 0 (``g·K``; the standard
    draws have no reason for an offset) coarser than about ``2^(−45)`` relative to the draws:
    NumPy's ``random()`` (multiples of 2⁻⁵³) is not flagged, and need not be.
    """
    from privpca.audit.lattice import LATTICE_THRESHOLD, lattice_score
    from privpca.mechanisms.randomness import check_random_state

    if rng is None:
        rng = check_random_state(None)
    bits = GENERATOR_BITS if bits is None else tuple(int(b) for b in bits)
    table = GENERATOR_METHODS if methods is None else methods
    rows = []
    for name, draw in table.items():
        scores = []
        for _ in range(int(draws)):
            v = np.ravel(np.asarray(draw(rng, int(dim)), dtype=np.float64))
            sc = lattice_score(v, bits)
            scores.append(sc if math.isfinite(sc) else _NO_SCORE)
        arr = np.asarray(scores)
        rows.append((name, float(np.mean(arr < -LATTICE_THRESHOLD)), float(np.median(arr))))
    return GeneratorLatticeReport("secure" if secure_mode() else "default",
                                  type(rng).__name__, int(draws), int(dim), tuple(rows))
