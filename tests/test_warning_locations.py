"""A warning raised anywhere inside a fit names the line that called ``fit``
(``_validation.caller_stacklevel``), whatever the depth of privpca's own calls."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from privpca import (
    DPSPCA,
    AnalyzeGaussPCA,
    BinghamPCA,
    LocalGaussianPCA,
    ModSuLQPCA,
    NoisyPowerPCA,
    RowClippingWarning,
)

PAPER = {"centering": None, "data_norm": 1.0}


@pytest.mark.parametrize("cls", [AnalyzeGaussPCA, ModSuLQPCA, NoisyPowerPCA, BinghamPCA,
                                 LocalGaussianPCA, DPSPCA], ids=lambda c: c.__name__)
def test_the_clipping_warning_names_the_callers_line(cls):
    X = np.random.default_rng(0).standard_normal((400, 4)) * 3.0  # norms above D = 1
    est = cls(n_components=1, epsilon=1.0, random_state=0, **PAPER)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        est.fit(X)
    clipped = [w for w in caught if issubclass(w.category, RowClippingWarning)]
    assert clipped, [str(w.message) for w in caught]
    assert {w.filename for w in clipped} == {__file__}
