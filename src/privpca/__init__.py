"""privpca: principal component analysis under differential privacy.

Estimators follow scikit-learn's conventions (``fit``, ``transform``, ``components_`` of shape
``(n_components, n_features)``) and record what they spent in ``privacy_``.
"""

from privpca.accounting import PrivacyLedger, PrivacyRecord, default_ledger
from privpca.decomposition import LocalGaussianPCA, LocalSparsePCA
from privpca.exceptions import (
    BudgetExceededError,
    PrivacyLeakWarning,
    PrivacyWarning,
    RowClippingWarning,
)

__version__ = "0.1.0"

__all__ = [
    "BudgetExceededError",
    "LocalGaussianPCA",
    "LocalSparsePCA",
    "PrivacyLeakWarning",
    "PrivacyLedger",
    "PrivacyRecord",
    "PrivacyWarning",
    "RowClippingWarning",
    "__version__",
    "default_ledger",
]
