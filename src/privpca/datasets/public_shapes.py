"""Public-shape tables: synthetic tables with the shapes of real ones that no offline table has.

The real-table suite (``privpca reproduce real-data-suite``) asks how a private PCA does on
tables *as people have them*. A few shapes common in practice have no public table that
installs offline with privpca, scikit-learn or statsmodels; these four fill them. They are
**synthetic** (every name says so in :data:`PUBLIC_SHAPE_TABLES` and in the suite's notes),
drawn deterministically from a fixed seed with :func:`numpy.random.default_rng`, each by the
recipe in its ``make_*`` function. The draws are data generation (a table to fit), not privacy
noise.

==================  ===========  ====================================================
name                n × p        recipe (seed)
==================  ===========  ====================================================
``counts_heavy``    300 000 × 4  Poisson–lognormal counts, heavy right tail (seed 2)
``norm_octaves``    5 000 × 22   rank-2 spiked Gaussian rows scaled by 2^U, U ~ U(0, 7):
                                 row norms spread over seven octaves (seed 4)
``survey_binary``   5 000 × 24   0/1 answers to 24 items from two latent traits (a
                                 two-dimensional logistic item-response model; seed 1)
``wide_spiked``     3 000 × 210  three spikes plus unit noise, p > n^(2/3) (seed 3)
==================  ===========  ====================================================
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray
from sklearn.utils import Bunch

__all__ = [
    "PUBLIC_SHAPE_TABLES",
    "PublicShape",
    "load_public_shape",
    "make_counts_heavy",
    "make_norm_octaves",
    "make_survey_binary",
    "make_wide_spiked",
]


def make_survey_binary(n: int = 5_000, p: int = 24, *, seed: int = 1) -> NDArray[np.float64]:
    """0/1 answers of ``n`` respondents to ``p`` yes/no items driven by two latent traits.

    Recipe (``rng = np.random.default_rng(seed)``, in this order): item loadings
    ``A = 1.5 · rng.standard_normal((p, 2))``, item thresholds ``b = rng.standard_normal(p)``,
    traits ``Z = rng.standard_normal((n, 2))``, uniforms ``U = rng.random((n, p))``; answer
    ``x_ij = 1[U_ij < σ(z_i·a_j − b_j)]`` with σ the logistic function. Items answered alike by
    respondents with similar traits are correlated; rows are not centred (means between 0
    and 1).

    Parameters
    ----------
    n, p : int
        Respondents and items.
    seed : int, default=1
        Seed of :func:`numpy.random.default_rng`.

    Returns
    -------
    ndarray of shape (n, p), float64, values in {0, 1}
    """
    rng = np.random.default_rng(seed)
    loadings = 1.5 * rng.standard_normal((p, 2))
    thresholds = rng.standard_normal(p)
    traits = rng.standard_normal((n, 2))
    uniforms = rng.random((n, p))
    prob = 1.0 / (1.0 + np.exp(-(traits @ loadings.T - thresholds)))
    return (uniforms < prob).astype(np.float64)


def make_counts_heavy(n: int = 300_000, p: int = 4, *, seed: int = 2) -> NDArray[np.float64]:
    """Skewed counts: a Poisson–lognormal table with a heavy right tail (claims, visits).

    Recipe (``rng = np.random.default_rng(seed)``): log-rates
    ``log λ_i = μ + σ ∘ (L g_i)`` with ``g_i = rng.standard_normal((n, p))[i]``, ``L`` the
    Cholesky factor of the equicorrelation matrix (0.5 off the diagonal),
    ``μ_j = 0.5 j`` and ``σ_j = 1 + 0.2 j`` (j = 0, …, p − 1); counts
    ``x_ij = rng.poisson(λ_ij)``. Most counts are small (medians 1 to 4 for p = 4), the
    largest in the thousands.

    Parameters
    ----------
    n, p : int
        Rows and columns.
    seed : int, default=2
        Seed of :func:`numpy.random.default_rng`.

    Returns
    -------
    ndarray of shape (n, p), float64, non-negative integers
    """
    rng = np.random.default_rng(seed)
    corr = np.full((p, p), 0.5) + 0.5 * np.eye(p)
    chol = np.linalg.cholesky(corr)
    j = np.arange(p, dtype=np.float64)
    log_rate = 0.5 * j + (1.0 + 0.2 * j) * (rng.standard_normal((n, p)) @ chol.T)
    return rng.poisson(np.exp(log_rate)).astype(np.float64)


def make_wide_spiked(n: int = 3_000, p: int = 210, *, seed: int = 3) -> NDArray[np.float64]:
    """A wide spiked table, ``p`` above ``n^(2/3)``: three directions above unit noise.

    Recipe (``rng = np.random.default_rng(seed)``): a Haar-random basis ``U`` (QR of
    ``rng.standard_normal((p, 3))``, signs fixed by ``R``'s diagonal), scores
    ``S = rng.standard_normal((n, 3)) · (5, 4, 3)`` (variances 25, 16, 9), noise
    ``E = rng.standard_normal((n, p))``; ``X = 2 + S Uᵀ + E`` (every column's mean 2).

    Parameters
    ----------
    n, p : int
        Rows and columns.
    seed : int, default=3
        Seed of :func:`numpy.random.default_rng`.

    Returns
    -------
    ndarray of shape (n, p), float64
    """
    rng = np.random.default_rng(seed)
    q, r = np.linalg.qr(rng.standard_normal((p, 3)))
    basis = q * np.sign(np.diag(r))
    scores = rng.standard_normal((n, 3)) * np.array([5.0, 4.0, 3.0])
    return 2.0 + scores @ basis.T + rng.standard_normal((n, p))


def make_norm_octaves(n: int = 5_000, p: int = 22, *, seed: int = 4) -> NDArray[np.float64]:
    """Rows whose norms spread over seven octaves (a factor 128), around a rank-2 signal.

    Recipe (``rng = np.random.default_rng(seed)``): a Haar-random basis ``U`` (QR of
    ``rng.standard_normal((p, 2))``, signs fixed), rows
    ``y_i = U (c_i · (√8, 2)) + e_i`` with ``c_i``, ``e_i`` standard normal
    (``rng.standard_normal((n, 2))``, ``rng.standard_normal((n, p))``: covariance
    ``I + U diag(8, 4) Uᵀ``), scales ``s_i = 2^{u_i}`` with ``u_i = rng.uniform(0, 7)``;
    ``x_i = 1 + s_i y_i``. The scale does not change the direction of the signal, so the PCA
    is well defined, but the largest centred norms are about 16 times the median (a bound at
    the median clips them that much).

    Parameters
    ----------
    n, p : int
        Rows and columns.
    seed : int, default=4
        Seed of :func:`numpy.random.default_rng`.

    Returns
    -------
    ndarray of shape (n, p), float64
    """
    rng = np.random.default_rng(seed)
    q, r = np.linalg.qr(rng.standard_normal((p, 2)))
    basis = q * np.sign(np.diag(r))
    signal = (rng.standard_normal((n, 2)) * np.array([np.sqrt(8.0), 2.0])) @ basis.T
    rows = signal + rng.standard_normal((n, p))
    scales = 2.0 ** rng.uniform(0.0, 7.0, size=n)
    return 1.0 + scales[:, None] * rows


@dataclass(frozen=True)
class PublicShape:
    """A synthetic table with a public shape: its recipe and the shape it stands for.

    Parameters
    ----------
    name : str
    shape : tuple of int
        ``(n, p)``.
    seed : int
        The recipe's seed (:func:`numpy.random.default_rng`).
    make : callable
        The recipe: ``make(seed=seed)`` returns the table.
    stands_for : str
        The kind of real table whose shape it has.
    """

    name: str
    shape: tuple[int, int]
    seed: int
    make: Callable[..., NDArray[np.float64]]
    stands_for: str


#: The public-shape tables, largest first.
PUBLIC_SHAPE_TABLES: dict[str, PublicShape] = {
    t.name: t
    for t in (
        PublicShape("counts_heavy", (300_000, 4), 2, make_counts_heavy,
                    "skewed count tables (insurance claims, doctor visits, purchases): "
                    "hundreds of thousands of rows, a few columns, a heavy right tail"),
        PublicShape("norm_octaves", (5_000, 22), 4, make_norm_octaves,
                    "tables whose rows differ in scale by orders of magnitude (sizes of "
                    "firms, cities, accounts): row norms over seven octaves"),
        PublicShape("survey_binary", (5_000, 24), 1, make_survey_binary,
                    "binary survey tables (yes/no items answered by thousands of "
                    "respondents, correlated through a few traits)"),
        PublicShape("wide_spiked", (3_000, 210), 3, make_wide_spiked,
                    "wide tables, p above n^(2/3) (sensors, text features), with a few "
                    "strong directions"),
    )
}


def load_public_shape(name: str) -> Bunch:
    """Generate a public-shape table (synthetic, deterministic).

    Parameters
    ----------
    name : str
        A key of :data:`PUBLIC_SHAPE_TABLES`.

    Returns
    -------
    Bunch
        ``data`` (ndarray of shape (n, p), float64), ``name``, ``seed``, ``DESCR`` (the
        recipe) and ``info`` (:class:`PublicShape`).

    Examples
    --------
    >>> load_public_shape("survey_binary").data.shape
    (5000, 24)
    """
    if name not in PUBLIC_SHAPE_TABLES:
        raise ValueError(f"Unknown table {name!r}; choose one of {list(PUBLIC_SHAPE_TABLES)}.")
    info = PUBLIC_SHAPE_TABLES[name]
    X = info.make(seed=info.seed)
    recipe = (info.make.__doc__ or "").strip()
    descr = (f"{name}: SYNTHETIC public-shape table, {X.shape[0]} x {X.shape[1]}, standing "
             f"for {info.stands_for}.\nRecipe ({info.make.__name__}, seed {info.seed}): "
             f"{recipe}")
    return Bunch(data=X, name=name, seed=info.seed, DESCR=descr, info=info)
