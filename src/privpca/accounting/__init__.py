"""Privacy accounting: records of what was spent, composition, and budgets."""

from privpca.accounting.composition import (
    compose_epsilon,
    compose_events,
    gaussian_noise_multiplier_for_composition,
)
from privpca.accounting.ledger import PrivacyLedger, default_ledger
from privpca.accounting.record import PrivacyRecord, PrivacySpend

__all__ = [
    "PrivacyLedger",
    "PrivacyRecord",
    "PrivacySpend",
    "compose_epsilon",
    "compose_events",
    "default_ledger",
    "gaussian_noise_multiplier_for_composition",
]
