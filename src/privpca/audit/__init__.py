"""Privacy auditing: black-box lower bounds on the ε that a mechanism or estimator spends.

:func:`audit` runs a mechanism on two neighbouring datasets many times and proves, with a
threshold test and Clopper–Pearson bounds, a lower bound on its ε; an estimator can be
audited on its built-in worst-case neighbours. :func:`float_probe` tests the same runs for a
floating-point leak: whether the outputs, read modulo a grid, tell the neighbours apart.
:func:`lattice_probe` tests whether released vectors are proportional to short integer
vectors (an LLL reduction, :mod:`privpca.audit.lattice`) and whether that tells the
neighbours apart; :func:`generator_lattice_probe` asks it of the generator's draws.
:func:`family_wise` corrects many cells together (Bonferroni bounds, Holm decisions).
``privpca audit METHOD`` prints the tables.
"""

from privpca.audit._bounds import ideal_power
from privpca.audit.core import AuditReport, audit
from privpca.audit.family import FamilyWise, bonferroni_confidence, family_wise, holm_adjust
from privpca.audit.neighbours import builtin_neighbours, release_features
from privpca.audit.probe import (
    FloatProbeReport,
    GeneratorLatticeReport,
    LatticeProbeReport,
    audit_with_probe,
    float_probe,
    generator_lattice_probe,
    lattice_probe,
)

__all__ = ["AuditReport", "FamilyWise", "FloatProbeReport", "GeneratorLatticeReport",
           "LatticeProbeReport", "audit", "audit_with_probe", "bonferroni_confidence",
           "builtin_neighbours", "family_wise", "float_probe", "generator_lattice_probe",
           "holm_adjust", "ideal_power", "lattice_probe", "release_features"]
