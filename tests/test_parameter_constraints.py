"""Every private estimator declares its parameters (scikit-learn's ``_parameter_constraints``)
and refuses a wrong type or value first, before the input is read or anything is spent."""

from __future__ import annotations

import numpy as np
import pytest
import sklearn
from sklearn.utils._param_validation import InvalidParameterError
from sklearn.utils.estimator_checks import check_param_validation

from privpca import PrivacyLedger
from privpca._registry import PRIVATE_ESTIMATORS
from privpca.decomposition import OjaPCA

ESTIMATORS = [*PRIVATE_ESTIMATORS.values(), OjaPCA]


@pytest.mark.parametrize("cls", ESTIMATORS, ids=lambda c: c.__name__)
def test_scikit_learns_parameter_validation_check(cls):
    """A declaration for every constructor parameter, and scikit-learn's message and error
    type for a value of no valid type or out of every declared range."""
    check_param_validation(cls.__name__, cls())


@pytest.mark.parametrize("cls", ESTIMATORS, ids=lambda c: c.__name__)
def test_a_refused_parameter_comes_first_and_spends_nothing(cls):
    ledger = PrivacyLedger()
    X = np.full((50, 3), np.nan)  # a table the fit would refuse: the parameter comes first
    est = cls(epsilon=-1.0, ledger=ledger) if "epsilon" in cls().get_params() else cls(
        n_components=0, ledger=ledger)
    with pytest.raises(InvalidParameterError, match="must be"):
        est.fit(X)
    assert len(ledger.records) == 0


@pytest.mark.parametrize("cls", ESTIMATORS, ids=lambda c: c.__name__)
@pytest.mark.parametrize("name, value", [("epsilon", -1.0), ("epsilon", 0.0), ("delta", 0.0),
                                         ("delta", 1.5), ("delta", 5e-324),
                                         ("n_components", 0)])
def test_the_guarantee_is_checked_even_when_scikit_learn_skips_validation(cls, name, value):
    """``skip_parameter_validation`` is a switch for speed: ε, δ and k are still refused
    with the parameter's name, and nothing is spent."""
    if name not in cls().get_params():
        pytest.skip(f"{cls.__name__} has no {name}")
    if name == "delta" and value == 0.0 and _accepts_pure_dp(cls):
        pytest.skip("pure DP is a valid δ here")
    ledger = PrivacyLedger()
    est = cls(ledger=ledger) if "ledger" in cls().get_params() else cls()
    est.set_params(**{name: value})
    with sklearn.config_context(skip_parameter_validation=True), \
            pytest.raises(InvalidParameterError, match=f"'{name}' parameter"):
        est.fit(np.random.default_rng(0).normal(size=(60, 3)))
    assert len(ledger.records) == 0


def _accepts_pure_dp(cls) -> bool:
    try:
        cls(delta=0.0)._validate_params()
    except InvalidParameterError:
        return False
    return True


@pytest.mark.parametrize("cls", [c for c in ESTIMATORS if "delta" in c().get_params()],
                         ids=lambda c: c.__name__)
def test_a_delta_below_the_smallest_is_refused_and_the_smallest_fits(cls):
    """δ below 10⁻¹⁰⁰ is refused by the declaration (5·10⁻³²⁴ overflowed ModSuLQ's β and the
    searches' noise: an outside tester); 10⁻¹⁰⁰ itself calibrates."""
    with pytest.raises(InvalidParameterError, match="at least 1e-100"):
        cls(delta=1e-101)._validate_params()
    cls(delta=1e-100)._validate_params()
