"""The real-table suite's catalogue: its tables, their shape classes and the two halves.

Tables (:data:`SUITE`, with each one's shape, source and shape class): Covertype's 10
quantitative columns, isolet5, Leukemia and Colon (shipped with privpca), tables installed with
scikit-learn and statsmodels (:mod:`privpca.datasets.packaged` and
:func:`privpca.datasets.load_package_table`) and four synthetic *public-shape* tables for
shapes no offline table has (:mod:`privpca.datasets.public_shapes`).

**Tuning and held-out halves.** A bound rule tuned on some tables is judged on others. The
split is fixed by a public rule that reads only names and shapes, never a result
(:func:`split_halves`): each table gets a shape class (:func:`shape_class`: wide when
p ≥ n^(2/3), else skewed when its largest centred row norm is at least 5 times the median,
else plain; and large when n ≥ 1000, else small), the tables of a class are ordered by
``sha256(name)`` (hex digest), and they alternate, the first to the tuning half. Every class
with two tables or more so has one in each half. (The plain rule "first byte of
``sha256(name)`` even" put 7 of the 10 skewed tables, and all three large real skewed ones,
in one half.)
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from privpca import datasets
from privpca.datasets import public_shapes

__all__ = [
    "HALVES",
    "HELD_OUT_TABLES",
    "QUICK_TABLES",
    "SUITE",
    "SUITE_TABLES",
    "TUNING_TABLES",
    "SuiteTable",
    "load_table",
    "norm_tail_ratio",
    "shape_class",
    "split_halves",
]

#: A table is wide when p ≥ n ** WIDE_EXPONENT.
WIDE_EXPONENT = 2.0 / 3.0
#: A table is skewed when its largest centred row norm is at least this many medians.
SKEW_RATIO = 5.0
#: A table is large when n ≥ LARGE_N.
LARGE_N = 1_000

SHIPPED, SKLEARN, STATSMODELS, SYNTHETIC = (
    "privpca (shipped)", "scikit-learn", "statsmodels", "synthetic (public shape)")


def shape_class(n: int, p: int, skewed: bool) -> str:
    """The shape class of an ``n × p`` table: its kind and its size.

    Kind: ``"wide"`` when ``p ≥ n^(2/3)``, else ``"skewed"`` when ``skewed`` (the largest
    centred row norm at least :data:`SKEW_RATIO` times the median), else ``"plain"``. Size:
    ``"large"`` when ``n ≥ 1000``, else ``"small"``.

    Examples
    --------
    >>> shape_class(3_000, 210, False), shape_class(20_190, 10, True), shape_class(150, 4, False)
    ('wide, large', 'skewed, large', 'plain, small')
    """
    kind = "wide" if p >= n ** WIDE_EXPONENT else "skewed" if skewed else "plain"
    return f"{kind}, {'large' if n >= LARGE_N else 'small'}"


def norm_tail_ratio(X: np.ndarray) -> float:
    """The largest row norm of the centred table over the median one (the skew criterion)."""
    norms = np.linalg.norm(X - X.mean(axis=0), axis=1)
    return float(norms.max() / max(float(np.median(norms)), 1e-300))


@dataclass(frozen=True)
class SuiteTable:
    """One table of the suite: its shape, where it comes from, and its shape class.

    ``skewed`` is recorded here (so the split reads no data) and checked against the data by
    the tests: the largest centred row norm is at least :data:`SKEW_RATIO` medians.
    """

    name: str
    n: int
    p: int
    source: str
    skewed: bool

    @property
    def shape_class(self) -> str:
        """:func:`shape_class` of the table."""
        return shape_class(self.n, self.p, self.skewed)

    @property
    def needs_statsmodels(self) -> bool:
        """Whether loading it needs statsmodels (the ``suite`` extra)."""
        return self.source == STATSMODELS


#: Every table of the suite, largest n first.
SUITE: dict[str, SuiteTable] = {
    t.name: t
    for t in sorted(
        (
            SuiteTable("covtype", 581_012, 10, SHIPPED, False),
            SuiteTable("counts_heavy", 300_000, 4, SYNTHETIC, True),
            SuiteTable("china_patches", 68_160, 12, SKLEARN, False),
            SuiteTable("randhie", 20_190, 10, STATSMODELS, True),
            SuiteTable("fair", 6_366, 9, STATSMODELS, True),
            SuiteTable("norm_octaves", 5_000, 22, SYNTHETIC, True),
            SuiteTable("survey_binary", 5_000, 24, SYNTHETIC, False),
            SuiteTable("wide_spiked", 3_000, 210, SYNTHETIC, False),
            SuiteTable("digits", 1_797, 64, SKLEARN, False),
            SuiteTable("isolet5", 1_559, 617, SHIPPED, False),
            SuiteTable("anes96", 944, 11, STATSMODELS, True),
            SuiteTable("modechoice", 840, 7, STATSMODELS, False),
            SuiteTable("breast_cancer", 569, 30, SKLEARN, True),
            SuiteTable("diabetes", 442, 10, SKLEARN, False),
            SuiteTable("star98", 303, 22, STATSMODELS, True),
            SuiteTable("grunfeld", 220, 3, STATSMODELS, True),
            SuiteTable("macrodata", 203, 12, STATSMODELS, False),
            SuiteTable("fertility", 192, 52, STATSMODELS, False),
            SuiteTable("wine", 178, 13, SKLEARN, False),
            SuiteTable("iris", 150, 4, SKLEARN, False),
            SuiteTable("ccard", 72, 5, STATSMODELS, True),
            SuiteTable("leukemia", 72, 7_129, SHIPPED, False),
            SuiteTable("heart", 69, 3, STATSMODELS, False),
            SuiteTable("colon", 62, 2_000, SHIPPED, False),
            SuiteTable("elnino", 61, 12, STATSMODELS, False),
            SuiteTable("statecrime", 51, 7, STATSMODELS, True),
            SuiteTable("stackloss", 21, 4, STATSMODELS, False),
            SuiteTable("linnerud", 20, 6, SKLEARN, False),
            SuiteTable("longley", 16, 6, STATSMODELS, False),
        ),
        key=lambda t: (-t.n, t.name),
    )
}

#: The suite's table names, largest n first.
SUITE_TABLES: tuple[str, ...] = tuple(SUITE)


def split_halves(classes: Mapping[str, str]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The tuning and held-out halves of tables ``{name: shape class}``: the public rule.

    Within each class the names are ordered by ``sha256(name)`` (hex digest of the UTF-8
    name) and alternate between the halves, the first to the tuning half. Each half keeps the
    order of ``classes``.

    Examples
    --------
    >>> split_halves({"a": "x", "b": "x", "c": "y"})
    (('b', 'c'), ('a',))
    """
    tuning: set[str] = set()
    for cls in set(classes.values()):
        names = sorted((n for n, c in classes.items() if c == cls),
                       key=lambda n: hashlib.sha256(n.encode("utf-8")).hexdigest())
        tuning.update(names[::2])
    return (tuple(n for n in classes if n in tuning),
            tuple(n for n in classes if n not in tuning))


#: The tuning half (choose a rule's constants on these) and the held-out half (judge it on
#: these): :func:`split_halves` of the suite's shape classes.
TUNING_TABLES, HELD_OUT_TABLES = split_halves({t.name: t.shape_class for t in SUITE.values()})
HALVES: dict[str, tuple[str, ...]] = {"all": SUITE_TABLES, "tuning": TUNING_TABLES,
                                      "held-out": HELD_OUT_TABLES}

#: The quick run's tables: fast, without statsmodels, from both halves, and with enough rows
#: that every fit succeeds (``privpca reproduce``'s quick test wants finite distances).
QUICK_TABLES: tuple[str, ...] = ("digits", "survey_binary", "china_patches")

#: The shipped tables of the suite: loader, its keyword arguments, description.
_SHIPPED: dict[str, tuple[str, dict[str, Any], str]] = {
    "covtype": ("load_covtype", {}, "Covertype, 10 quantitative columns"),
    "isolet5": ("load_isolet5", {}, "isolet5"),
    "leukemia": ("load_leukemia", {"variant": "allaml"},
                 "Leukemia ALL/AML, continuous (standardised per gene at the source)"),
    "colon": ("load_colon", {"variant": "continuous"},
              "Colon, continuous (standardised per sample at the source)"),
}


def load_table(name: str) -> tuple[np.ndarray, str]:
    """The raw table (float64, as shipped: not normalised or centred) and a description.

    Parameters
    ----------
    name : str
        One of :data:`SUITE_TABLES`: a table shipped with privpca, one installed with
        scikit-learn or statsmodels (:func:`privpca.datasets.load_packaged`,
        :func:`privpca.datasets.load_package_table`), or a synthetic public-shape table
        (:func:`privpca.datasets.public_shapes.load_public_shape`).

    Returns
    -------
    X : ndarray of shape (n, p), float64
    description : str
        Title and source (with the package's version; "SYNTHETIC" for a public-shape table).

    Raises
    ------
    ValueError
        Unknown name.
    ImportError
        A statsmodels table without statsmodels installed (``pip install 'privpca[suite]'``).
    """
    if name in _SHIPPED:
        loader, kwargs, title = _SHIPPED[name]
        X = getattr(datasets, loader)(normalize_rows=False, **kwargs).data
        return (X[:, :10].copy() if name == "covtype" else X), title
    if name in datasets.PACKAGED_TABLES:
        table = datasets.load_packaged(name)
        return table.data, f"{table.info.title}, {table.package} {table.version}"
    if name in datasets.PACKAGE_TABLES:
        table = datasets.load_package_table(name)
        return table.data, f"{table.info.title}, {table.package} {table.version}"
    if name in public_shapes.PUBLIC_SHAPE_TABLES:
        info = public_shapes.PUBLIC_SHAPE_TABLES[name]
        X = public_shapes.load_public_shape(name).data
        return X, (f"SYNTHETIC public-shape table standing for {info.stands_for} "
                   f"(privpca.datasets.public_shapes.{info.make.__name__}, seed {info.seed})")
    raise ValueError(f"unknown table {name!r}; choose one of {list(SUITE_TABLES)}")
