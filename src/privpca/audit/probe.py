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

Modules
-------
This module holds the generator probe and re-exports the rest:
:mod:`~privpca.audit.probe_float` (the float probe), :mod:`~privpca.audit.probe_lattice` (the
lattice probe), :mod:`~privpca.audit.probe_grids` (the float probe's candidate grids),
:mod:`~privpca.audit.probe_estimator` (what a fitted estimator releases, as the probes read
it) and :mod:`~privpca.audit.probe_common` (the selection/evaluation machinery both share).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from privpca._config import secure_mode
from privpca.audit.lattice import LATTICE_THRESHOLD, lattice_score
from privpca.audit.probe_estimator import (
    LATTICE_FEATURES,
    lattice_neighbours,
    lattice_vectors,
    noise_scales,
    probe_features,
)
from privpca.audit.probe_float import (
    FloatProbeReport,
    audit_with_probe,
    float_probe,
    probe_releases,
)
from privpca.audit.probe_grids import DEFAULT_BITS, Grid, candidate_grids
from privpca.audit.probe_lattice import (
    _NO_SCORE,
    LatticeProbeReport,
    lattice_probe,
    lattice_probe_releases,
)
from privpca.mechanisms.randomness import check_random_state

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
