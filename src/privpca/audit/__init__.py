"""Privacy auditing: black-box lower bounds on the ε that a mechanism or estimator spends.

:func:`audit` runs a mechanism on two neighbouring datasets many times and proves, with a
threshold test and Clopper–Pearson bounds, a lower bound on its ε; an estimator can be
audited on its built-in worst-case neighbours. ``privpca audit METHOD`` prints a table.
"""

from privpca.audit._bounds import ideal_power
from privpca.audit.core import AuditReport, audit
from privpca.audit.neighbours import builtin_neighbours, release_features

__all__ = ["AuditReport", "audit", "builtin_neighbours", "ideal_power", "release_features"]
