"""SciPy sparse input: read as a streamed table, one dense block of rows at a time.

Every registered estimator fits a CSR matrix as it fits the same rows streamed from a dense
array (the same blocks, the same draws), the whole table is never densified, and the checks
of a streamed table (NaN refused before anything is released) hold.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import scipy.sparse as sp

import privpca
from privpca import PrivacyLedger
from privpca._registry import PRIVATE_ESTIMATORS
from privpca.exceptions import NonFiniteInputError
from privpca.streaming import ArraySource, as_row_source
from privpca.streaming.array_source import SPARSE_BLOCK_VALUES


@pytest.fixture(scope="module")
def table() -> np.ndarray:
    rng = np.random.default_rng(0)
    X = rng.normal(size=(30_000, 6)) * [3.0, 2.0, 1.0, 1.0, 1.0, 1.0]
    X[rng.random(X.shape) < 0.5] = 0.0
    return X


def _fit(cls, X):
    kwargs = {"amplification": "none"} if cls is privpca.PrivateOjaPCA else {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return cls(2, epsilon=1.0, random_state=0, ledger=PrivacyLedger(), **kwargs).fit(X)


@pytest.mark.parametrize("name", sorted(PRIVATE_ESTIMATORS))
def test_a_sparse_table_fits_as_its_dense_rows_streamed(table, name):
    cls = PRIVATE_ESTIMATORS[name]
    sparse = _fit(cls, sp.csr_matrix(table))
    dense = _fit(cls, ArraySource(table, block_rows=as_row_source(
        sp.csr_matrix(table)).block_rows))
    np.testing.assert_allclose(sparse.components_, dense.components_, rtol=1e-9, atol=1e-12)
    assert sparse.n_features_in_ == 6
    assert sparse.privacy_.epsilon == dense.privacy_.epsilon


def test_blocks_bound_the_memory_whatever_the_width():
    wide = sp.random(1_000, 50_000, density=1e-4, format="csc", random_state=0)
    source = as_row_source(wide)
    assert source.block_rows * wide.shape[1] <= max(SPARSE_BLOCK_VALUES, 64 * wide.shape[1])
    block = next(iter(source.blocks()))
    assert isinstance(block, np.ndarray) and block.shape == (source.block_rows, 50_000)


def test_the_front_door_and_a_nan_in_a_sparse_table(table):
    est = privpca.PCA(2, epsilon=1.0, ledger=PrivacyLedger()).fit(sp.csr_matrix(table))
    assert est.components_.shape == (2, 6)
    holed = sp.lil_matrix(table)
    holed[123, 2] = np.nan
    ledger = PrivacyLedger()
    with pytest.raises(NonFiniteInputError, match="NaN or infinity"):
        privpca.AnalyzeGaussPCA(2, epsilon=1.0, ledger=ledger).fit(holed.tocsr())
    assert len(ledger) == 0


def test_transform_projects_a_sparse_table_without_densifying_it(table):
    est = _fit(privpca.AnalyzeGaussPCA, table)
    S = sp.csr_matrix(table[:500])
    np.testing.assert_allclose(est.transform(S), est.transform(table[:500]), atol=1e-9)
