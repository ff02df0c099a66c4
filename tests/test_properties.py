"""Property-based tests (hypothesis): malformed input is refused with ValueError / TypeError /
QueryRefusedError (or the project's subclasses of them), never another exception, never a
release. Fast profile in the default suite; a heavier one under the slow marker."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from privpca import PrivacyLedger
from privpca._registry import PRIVATE_ESTIMATORS
from privpca.cli import main
from privpca.federated.protocol import ProviderState, Query, QueryRefusedError

FAST = settings(max_examples=25, deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.too_slow])
HEAVY = settings(max_examples=300, deadline=None,
                 suppress_health_check=[HealthCheck.too_slow])
ALLOWED = (ValueError, TypeError)  # QueryRefusedError, BudgetExceededError... subclass these?

odd_floats = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0.0, -1.0, 1e-300, 1e-60, 1e-9, 1e-3, 1.0, 1e3, 1e12, 1e60, 1e300]),
    st.integers(-3, 3), st.just("auto"), st.just("1.0"), st.none(), st.just(True),
)
tables = hnp.arrays(
    np.float64, hnp.array_shapes(min_dims=2, max_dims=2, min_side=1, max_side=12),
    elements=st.one_of(st.floats(-1e3, 1e3), st.sampled_from([0.0, 1e200, -1e-200, math.nan,
                                                              math.inf])),
)


def _fit_or_refuse(name, params, X):
    cls = PRIVATE_ESTIMATORS[name]
    accepted = cls().get_params()
    params = {k: v for k, v in params.items() if k in accepted}
    if "n_iter" in accepted and name != "private-oja":
        params.setdefault("n_iter", 2)
    if name == "bingham":
        params.update(burn_in=1, n_iter=2)
    est = cls(**params, ledger=PrivacyLedger())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            est.fit(X)
        except ALLOWED:
            assert not hasattr(est, "components_")  # refused: nothing released
            return
    assert np.all(np.isfinite(est.components_))  # accepted: a finite, usable release


def _estimator_property(data):
    name = data.draw(st.sampled_from(sorted(PRIVATE_ESTIMATORS)))
    params = {"epsilon": data.draw(odd_floats), "delta": data.draw(odd_floats),
              "data_norm": data.draw(odd_floats), "clip_norm": data.draw(odd_floats),
              "n_components": data.draw(st.one_of(st.integers(-1, 4), st.just(1.5))),
              "centering": data.draw(st.sampled_from([None, "private"])), "random_state": 0}
    _fit_or_refuse(name, params, data.draw(tables))


@FAST
@given(st.data())
def test_estimators_refuse_malformed_input_cleanly(data):
    _estimator_property(data)


@pytest.mark.slow
@HEAVY
@given(st.data())
def test_estimators_refuse_malformed_input_cleanly_heavy(data):
    _estimator_property(data)


# --- the provider protocol ---------------------------------------------------------------------

def _provider():
    X = np.random.default_rng(0).standard_normal((30, 4)) * 0.2
    return ProviderState(X, n_components=2, epsilon=1.0, delta=1e-5, n_rounds=3)


blocks = st.one_of(
    hnp.arrays(st.sampled_from([np.float64, np.float32, np.complex128, np.int64, np.uint8,
                                np.bool_, object]),
               st.sampled_from([(4, 2), (3, 2), (4, 1), (2, 2)]),
               elements=st.integers(0, 1)),
    st.just(np.linalg.qr(np.ones((4, 2)) + np.eye(4, 2))[0] * (1 + 0j)),
    st.just(np.array([[1.0, 0.0], [0.0, 1.0], [0.0, 0.0], [0.0, np.nan]])),
)
supports = st.one_of(
    st.just(np.arange(4)),
    hnp.arrays(st.sampled_from([np.int64, np.uint64, np.float64, np.int8]), (4,),
               elements=st.integers(0, 120)),
    st.just(np.array([0, 1, 1, 3])), st.just(np.array([-1, 0, 1, 2])),
)


def _protocol_property(data):
    prov = _provider()
    query = Query(round=data.draw(st.one_of(st.integers(0, 3), st.just(True), st.just(1.5))),
                  support=data.draw(supports), block=data.draw(blocks),
                  n_features=data.draw(st.one_of(st.just(4), st.integers(0, 5), st.just(4.0))))
    try:
        reply = prov.answer_query(query)
    except QueryRefusedError:
        assert prov.counter.used == 0  # refused: nothing booked, nothing released
        return
    # Accepted only for a real, finite, orthonormal Q on a valid support.
    block = np.asarray(query.block)
    assert block.dtype.kind in "fiu"
    assert np.abs(block.astype(float).T @ block.astype(float) - np.eye(2)).max() <= 1e-8
    assert np.all(np.isfinite(reply.product)) and prov.counter.used == 1


@FAST
@given(st.data())
def test_provider_refuses_malformed_queries(data):
    _protocol_property(data)


@pytest.mark.slow
@HEAVY
@given(st.data())
def test_provider_refuses_malformed_queries_heavy(data):
    _protocol_property(data)


@FAST
@given(epsilon=odd_floats, delta=odd_floats, data_norm=odd_floats,
       n_rounds=st.one_of(st.integers(-1, 3), st.just(2.5)))
def test_provider_validates_its_agreement(epsilon, delta, data_norm, n_rounds):
    X = np.random.default_rng(0).standard_normal((30, 4)) * 0.2
    try:
        prov = ProviderState(X, n_components=2, epsilon=epsilon, delta=delta,
                             n_rounds=n_rounds, data_norm=data_norm)
    except ALLOWED:
        return
    assert 0 < prov.epsilon < math.inf and 0 < prov.delta < 1  # ε = ∞ never accepted


# --- the CLI -----------------------------------------------------------------------------------

cells = st.one_of(st.floats(-1e3, 1e3).map(lambda v: f"{v:.4g}"),
                  st.sampled_from(["", "NA", "x", "1e999", "nan", '"3"', "0x1", " 2 "]))


def _cli_property(data):
    sep = data.draw(st.sampled_from([",", ";", "\t"]))
    n_cols = data.draw(st.integers(1, 4))
    rows = data.draw(st.lists(st.lists(cells, min_size=n_cols, max_size=n_cols + 1),
                              min_size=0, max_size=8))
    text = "\n".join(sep.join(r) for r in rows)
    runner = CliRunner()
    with runner.isolated_filesystem():
        with open("t.csv", "w") as fh:
            fh.write(text)
        result = runner.invoke(main, ["fit", "t.csv", "-k", "1", "--epsilon", "1",
                                      "--centering", "none", "--data-norm", "1"])
    assert result.exit_code in (0, 1), result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), (
        repr(result.exception), text)


@FAST
@given(st.data())
def test_cli_refuses_malformed_tables_cleanly(data):
    _cli_property(data)


@pytest.mark.slow
@HEAVY
@given(st.data())
def test_cli_refuses_malformed_tables_cleanly_heavy(data):
    _cli_property(data)
