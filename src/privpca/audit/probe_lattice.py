"""The lattice probe: are released vectors proportional to short integer vectors, and does that
tell the neighbours apart? (The method: :mod:`privpca.audit.probe`.)"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from privpca.audit._bounds import CellBounds, ThresholdTest, best_threshold
from privpca.audit.core import SELECTION_CONFIDENCE, _estimator_setup, _is_estimator, _run_states
from privpca.audit.lattice import DEFAULT_LATTICE_BITS, LATTICE_THRESHOLD, vector_lattice_score
from privpca.audit.probe_common import (
    _callable_runs,
    _check_split,
    _evaluate,
    _fixed_test,
    _probe_mode,
)
from privpca.audit.probe_estimator import LATTICE_FEATURES, _lattice_releases, lattice_neighbours

__all__ = ["LatticeProbeReport", "lattice_probe", "lattice_probe_releases"]

#: The statistic of a vector whose score is NaN in a run (too few nonzero coordinates): high,
#: i.e. "not on a lattice", and the same on both neighbours.
_NO_SCORE = 16.0


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


def _vector_scores(vectors: Sequence[Mapping[str, NDArray[np.float64]]],
                   maps: Sequence[Mapping[str, NDArray[np.float64]]], bits: Sequence[int]
                   ) -> dict[str, NDArray[np.float64]]:
    """Per statistic name, its value in each run: ``score[v]`` for every released vector,
    ``lowest score``, and for every map pair ``score@D' − score@D`` (positive: D)."""
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


def _as_maps(maps: tuple[Mapping[str, ArrayLike], Mapping[str, ArrayLike]] | None
             ) -> tuple[list[Mapping[str, NDArray[np.float64]]], list[str]]:
    """The map pair as float matrices, and their labels (sorted)."""
    if maps is None:
        return [], []
    mats: list[Mapping[str, NDArray[np.float64]]] = [
        {k: np.atleast_2d(np.asarray(M, dtype=np.float64)) for k, M in m.items()} for m in maps]
    if set(mats[0]) != set(mats[1]):
        raise ValueError("maps must give the same labels for both neighbours.")
    return mats, sorted(mats[0])


def _choose_lattice_test(st0: Mapping[str, NDArray[np.float64]],
                         st1: Mapping[str, NDArray[np.float64]], n_sel: int, delta: float,
                         level: float) -> tuple[float, str, ThresholdTest] | None:
    """The statistic and threshold test with the best ε bound on the selection runs, and that
    bound; None when every statistic is constant on them."""
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
        f_eps, f_test = _fixed_test(int((s0 > t).sum()), int((s1 > t).sum()), n_sel, delta,
                                    level, t)
        if f_eps >= sc:
            sc, test = f_eps, f_test
        if best is None or sc > best[0]:
            best = (sc, name, test)
    return best


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
    runs = len(V0)
    if len(V1) != runs:
        raise ValueError(f"V0 and V1 must hold as many runs; got {runs} and {len(V1)}.")
    _check_split(runs, confidence, selection_fraction)
    bits = DEFAULT_LATTICE_BITS if bits is None else tuple(int(b) for b in bits)
    A0 = [{k: np.ravel(np.asarray(v, dtype=np.float64)) for k, v in r.items()} for r in V0]
    A1 = [{k: np.ravel(np.asarray(v, dtype=np.float64)) for k, v in r.items()} for r in V1]
    mats, labels = _as_maps(maps)
    st0 = _vector_scores(A0, mats, bits)
    st1 = _vector_scores(A1, mats, bits)
    n_sel = max(1, min(runs - 1, round(selection_fraction * runs)))
    n_eval = runs - n_sel
    low0, low1 = st0["lowest score"], st1["lowest score"]
    on = (float(np.mean(low0 < -LATTICE_THRESHOLD)), float(np.mean(low1 < -LATTICE_THRESHOLD)))
    lowest = (float(np.median(low0)), float(np.median(low1)))
    names = tuple(list(A0[0]) + [f"{n} via {lab}" for lab in labels for n in A0[0]])
    best = _choose_lattice_test(st0, st1, n_sel, delta, max(confidence, SELECTION_CONFIDENCE))
    if best is None:
        return LatticeProbeReport(float(epsilon), float(delta), 0.0, runs, "none", math.nan,
                                  True, False, (0, 0, n_eval), 0.5, float(confidence), mode,
                                  description, 0.0, on, lowest, names)
    sel_eps, name, test = best
    k0, k1, eps_lower, accuracy = _evaluate(test, st0[name][n_sel:], st1[name][n_sel:],
                                            n_eval, delta, confidence)
    return LatticeProbeReport(float(epsilon), float(delta), eps_lower, runs, name,
                              test.threshold, test.upper, test.swap, (k0, k1, n_eval),
                              accuracy, float(confidence), mode, description,
                              float(sel_eps), on, lowest, names)


def _lattice_setup(mechanism: Any, X: ArrayLike | None, X_neighbour: ArrayLike | None,
                   epsilon: float, delta: float, setting: str, n_features: int
                   ) -> tuple[Any, str]:
    """The estimator's audit setup: on ``X`` and ``X_neighbour``, or on the built-in
    neighbours lifted to ``n_features`` features; with its description."""
    if X is not None:
        su = _estimator_setup(mechanism, X, X_neighbour, epsilon, delta, setting)
        return su, f"{type(su.estimator).__name__}: {su.description}"
    from sklearn.base import clone

    X0, X1, params, desc = lattice_neighbours(mechanism, setting, n_features)
    est = clone(mechanism).set_params(**params)
    su = _estimator_setup(est, X0, X1, epsilon, delta, setting)
    return su, f"{type(est).__name__}: {desc}"


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
    mode = _probe_mode(random_state)
    if _is_estimator(mechanism):
        su, desc = _lattice_setup(mechanism, X, X_neighbour, float(epsilon), float(delta),
                                  setting, n_features)
        V0, V1 = _lattice_releases(su, _run_states(random_state, 2 * runs), runs, progress)
        D0, D1 = su.X, su.X_neighbour
    else:
        O0, O1 = _callable_runs(mechanism, X, X_neighbour, random_state, runs, progress)
        V0 = [{"output": o} for o in O0]
        V1 = [{"output": o} for o in O1]
        D0, D1 = np.asarray(X, dtype=np.float64), np.asarray(X_neighbour, dtype=np.float64)
        desc = "user-supplied neighbours"
    pair = None if maps is None else (maps(D0), maps(D1))
    return lattice_probe_releases(V0, V1, epsilon=epsilon, delta=delta, maps=pair,
                                  confidence=confidence, selection_fraction=selection_fraction,
                                  bits=bits, mode=mode, description=desc)
