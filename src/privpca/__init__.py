"""privpca: principal component analysis under differential privacy.

Estimators follow scikit-learn's conventions (``fit``, ``transform``, ``components_`` of shape
``(n_components, n_features)``) and record what they spent in ``privacy_``.
"""

from privpca import decomposition
from privpca._config import ReproducibleNoiseWarning, config_context, get_config, set_config
from privpca.accounting import PrivacyLedger, PrivacyRecord, default_ledger
from privpca.decomposition import *  # noqa: F403
from privpca.exceptions import (
    BudgetExceededError,
    DataDependentWarning,
    NonFiniteInputError,
    PrivacyLeakWarning,
    PrivacyWarning,
    RowClippingWarning,
)
from privpca.mechanisms.shuffling import ShufflingBoundError
from privpca.solvers.bingham import ProposalBudgetExceededError

__version__ = "0.1.0"

__all__ = [
    "BudgetExceededError",
    "DataDependentWarning",
    "NonFiniteInputError",
    "PrivacyLeakWarning",
    "PrivacyLedger",
    "PrivacyRecord",
    "PrivacyWarning",
    "ProposalBudgetExceededError",
    "ReproducibleNoiseWarning",
    "RowClippingWarning",
    "ShufflingBoundError",
    "__version__",
    "config_context",
    "default_ledger",
    "get_config",
    "set_config",
    *decomposition.__all__,
]
