"""privpca: principal component analysis under differential privacy.

Estimators follow scikit-learn's conventions (``fit``, ``transform``, ``components_`` of shape
``(n_components, n_features)``) and record what they spent in ``privacy_``.
:class:`PCA` is the front door: scikit-learn's signature plus ε, δ and the trust model.

``import privpca`` loads only the configuration and the exceptions: the estimators, the
ledger and their dependencies (scikit-learn, SciPy, dp-accounting) are imported on first use
of their name (PEP 562), so a script or the shell that never fits pays nothing for them.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from privpca._config import ReproducibleNoiseWarning, config_context, get_config, set_config
from privpca.exceptions import (
    BudgetExceededError,
    DataDependentWarning,
    LargeDeltaWarning,
    NoisyCentreWarning,
    NonFiniteInputError,
    NonPrivatePreprocessingWarning,
    PrivacyLeakWarning,
    PrivacyWarning,
    RowClippingWarning,
    UnresolvedComponentsWarning,
)

if TYPE_CHECKING:
    from privpca.accounting import PrivacyLedger, PrivacyRecord, default_ledger
    from privpca.decomposition import (
        DPPCA,
        DPSPCA,
        AnalyzeGaussPCA,
        BinghamPCA,
        LocalGaussianPCA,
        LocalSparsePCA,
        ModSuLQPCA,
        NoisyPowerPCA,
        OjaPCA,
        PrivateOjaPCA,
        SparsePCA,
    )
    from privpca.mechanisms.bingham_sampler import ProposalBudgetExceededError
    from privpca.mechanisms.shuffling import ShufflingBoundError
    from privpca.pca import PCA
    from privpca.persistence import load, save

__version__ = "0.1.0"

#: Public name → the module that defines it, imported when the name is first used.
_LAZY: dict[str, str] = {
    "PCA": "privpca.pca",
    **dict.fromkeys(("PrivacyLedger", "PrivacyRecord", "default_ledger"), "privpca.accounting"),
    **dict.fromkeys(
        ("DPPCA", "DPSPCA", "AnalyzeGaussPCA", "BinghamPCA", "LocalGaussianPCA",
         "LocalSparsePCA", "ModSuLQPCA", "NoisyPowerPCA", "OjaPCA", "PrivateOjaPCA",
         "SparsePCA"),
        "privpca.decomposition",
    ),
    "ShufflingBoundError": "privpca.mechanisms.shuffling",
    "ProposalBudgetExceededError": "privpca.mechanisms.bingham_sampler",
    **dict.fromkeys(("save", "load"), "privpca.persistence"),
}

#: Subpackages and modules reachable as attributes (``privpca.plot``) without an import.
_SUBMODULES: frozenset[str] = frozenset({
    "accounting", "audit", "cli", "datasets", "decomposition", "exceptions", "experiments",
    "federated", "local_protocol", "mechanisms", "metrics", "pca", "persistence", "pipeline",
    "plot", "report",
    "solvers",
    "streaming",
})


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is not None:
        value = getattr(importlib.import_module(module), name)
        globals()[name] = value  # later look-ups find it without coming here
        return value
    if name in _SUBMODULES:
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY, *_SUBMODULES})


__all__ = [
    "DPPCA",
    "DPSPCA",
    "PCA",
    "AnalyzeGaussPCA",
    "BinghamPCA",
    "BudgetExceededError",
    "DataDependentWarning",
    "LargeDeltaWarning",
    "LocalGaussianPCA",
    "LocalSparsePCA",
    "ModSuLQPCA",
    "NoisyCentreWarning",
    "NoisyPowerPCA",
    "NonFiniteInputError",
    "NonPrivatePreprocessingWarning",
    "OjaPCA",
    "PrivacyLeakWarning",
    "PrivacyLedger",
    "PrivacyRecord",
    "PrivacyWarning",
    "PrivateOjaPCA",
    "ProposalBudgetExceededError",
    "ReproducibleNoiseWarning",
    "RowClippingWarning",
    "ShufflingBoundError",
    "SparsePCA",
    "UnresolvedComponentsWarning",
    "__version__",
    "config_context",
    "default_ledger",
    "get_config",
    "load",
    "save",
    "set_config",
]
