"""The float probe: does a release, read modulo a candidate grid, tell the neighbours apart?
(The method: :mod:`privpca.audit.probe`.)"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from privpca._config import secure_mode
from privpca.audit._bounds import CellBounds, ThresholdTest, best_threshold
from privpca.audit.core import (
    SELECTION_CONFIDENCE,
    AuditReport,
    _decide,
    _estimator_setup,
    _is_estimator,
    _run_states,
)
from privpca.audit.probe_common import (
    _callable_runs,
    _check_split,
    _evaluate,
    _fixed_test,
    _probe_mode,
    _zero_tests,
)
from privpca.audit.probe_estimator import _estimator_releases
from privpca.audit.probe_grids import DEFAULT_BITS, Grid, _scale_items, candidate_grids

__all__ = ["FloatProbeReport", "audit_with_probe", "float_probe", "probe_releases"]

#: Coordinates tested one by one (besides their sum and vote).
MAX_COORDINATES = 16
#: Candidates (by the classifier's selection score) given the full threshold search.
REFINE = 8
#: The tolerances ``τ = 2^-t`` of the ``near(τ)`` statistics.
TOLERANCE_BITS: tuple[int, ...] = (12, 6, 20)


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


def _as_runs(O0: ArrayLike, O1: ArrayLike
             ) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """The releases as (runs × coordinates) arrays of the same shape."""
    A0 = np.asarray(O0, dtype=np.float64)
    A1 = np.asarray(O1, dtype=np.float64)
    A0, A1 = A0.reshape(A0.shape[0], -1), A1.reshape(A1.shape[0], -1)
    if A1.shape != A0.shape:
        raise ValueError(f"O0 and O1 must have the same shape; got {A0.shape} and {A1.shape}.")
    return A0, A1


def _references(A0: NDArray[np.float64], A1: NDArray[np.float64],
                values: tuple[ArrayLike, ArrayLike] | None
                ) -> tuple[NDArray[np.float64], NDArray[np.float64], int, str]:
    """The candidates ``v₀, v₁``, the first run left for selection, and what they are."""
    m = A0.shape[1]
    if values is None:
        return A0[0].copy(), A1[0].copy(), 1, "reference runs"
    v0 = np.broadcast_to(np.asarray(values[0], dtype=np.float64).ravel(), (m,)).copy()
    v1 = np.broadcast_to(np.asarray(values[1], dtype=np.float64).ravel(), (m,)).copy()
    return v0, v1, 0, "exact values"


def _selection_hits(S0: NDArray[np.float64], S1: NDArray[np.float64], v0: NDArray[np.float64],
                    v1: NDArray[np.float64], grids: list[Grid]
                    ) -> tuple[list[tuple[int, int]], NDArray[np.int64]]:
    """Pass 1: the classifier "guess D iff s > 0" on the selection runs, every (grid,
    statistic): its keys and, per key, ``#{s > 0}`` on D, on D', and the runs strictly on
    their own side of 0."""
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
    return keys, np.asarray(hits, dtype=np.int64)


def _choose_test(S0: NDArray[np.float64], S1: NDArray[np.float64], v0: NDArray[np.float64],
                 v1: NDArray[np.float64], grids: list[Grid], delta: float, level: float
                 ) -> tuple[float, Grid, int, ThresholdTest] | None:
    """The (grid, statistic index, threshold test) with the best ε bound on the selection
    runs, and that bound; None when no candidate is finite on them."""
    keys, h = _selection_hits(S0, S1, v0, v1, grids)
    n_s = S0.shape[0]
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
        z_eps, z_test = _fixed_test(int(h[int(c), 0]), int(h[int(c), 1]), n_s, delta, level)
        if z_eps >= sc:
            sc, test = z_eps, z_test
        if best is None or (sc, h[int(c), 2]) > (best[0], best[1]):
            best = (sc, int(h[int(c), 2]), gi, si, test)
    if best is None:
        return None
    sel_eps, _, gi, si, test = best
    return sel_eps, grids[gi], si, test


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
        of each dataset is the reference (see :mod:`privpca.audit.probe`).
    scales : sequence of float or mapping label → float, optional
        The noise scales σ whose grids ``σ·2^-b`` are tried (powers of two always are).
    confidence, selection_fraction : float
        As in :func:`~privpca.audit.audit`.
    bits : sequence of int
        The ``b`` of the grids ``σ·2^-b``.
    mode, description : str
        Carried into the report.
    """
    A0, A1 = _as_runs(O0, O1)
    runs = A0.shape[0]
    _check_split(runs, confidence, selection_fraction)
    n_sel = max(3, min(runs - 1, round(selection_fraction * runs)))
    n_eval = runs - n_sel
    v0, v1, first, reference = _references(A0, A1, values)
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
    level = max(confidence, SELECTION_CONFIDENCE)
    chosen = _choose_test(S0, S1, v0, v1, grids, delta, level)
    if chosen is None:
        return none
    sel_eps, grid, si, test = chosen
    name, e0 = _statistics(_d(A0[n_sel:], v0, v1, grid.step))[si]
    _, e1 = _statistics(_d(A1[n_sel:], v0, v1, grid.step))[si]
    k0, k1, eps_lower, accuracy = _evaluate(test, e0, e1, n_eval, delta, confidence)
    return FloatProbeReport(float(epsilon), float(delta), eps_lower, runs, grid.step,
                            grid.label, name, test.threshold, test.upper, test.swap,
                            (k0, k1, n_eval), accuracy, float(confidence), mode, reference,
                            len(grids), description, float(sel_eps))


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
    mode = _probe_mode(random_state)
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
    O0, O1 = _callable_runs(mechanism, X, X_neighbour, random_state, runs, progress)
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
