"""Public numeric tables that ship inside packages on PyPI: the real-table suite's extra tables.

These tables are read from files installed with scikit-learn (always present: a dependency of
privpca) or statsmodels (optional: ``pip install privpca[suite]``), never downloaded at run
time. Each loader returns the raw numeric columns as float64, **not** scaled, centred or
row-normalised: the suite asks for the PCA of the table as a user has it, in its own units.

=================  =========  ==================  ===========================================
name               package    n × p               what the columns are
=================  =========  ==================  ===========================================
``randhie``        statsmodels  20 190 × 10       RAND Health Insurance Experiment: doctor
                                                  visits (a count, heavy tail), log
                                                  coinsurance, deductible indicator, log
                                                  participation incentive, log max.
                                                  deductible, physical limitation, disease
                                                  count, three self-rated health indicators
``fair``           statsmodels  6 366 × 9         Fair's affairs survey (Redbook 1974):
                                                  marriage rating, age, years married,
                                                  children, religiousness, education,
                                                  occupation codes, time in affairs (mostly
                                                  0, heavy tail)
``digits``         scikit-learn 1 797 × 64        8×8 handwritten digits, pixel intensities
                                                  0–16
``anes96``         statsmodels  944 × 11          American National Election Survey 1996:
                                                  population of the respondent's town (up to
                                                  7 300, heavy tail) and its log, TV news
                                                  days, 7-point left–right placements, party
                                                  id, age, education and income codes, vote
``breast_cancer``  scikit-learn 569 × 30          Wisconsin diagnostic breast cancer: cell
                                                  nucleus radius, texture, perimeter, area
                                                  (to 4 254), smoothness (about 0.1), ...:
                                                  units four orders of magnitude apart
``diabetes``       scikit-learn 442 × 10          Efron et al.'s diabetes data, raw
                                                  (``scaled=False``): age, sex (1/2), BMI,
                                                  blood pressure, six blood serum measures
``star98``         statsmodels  303 × 22          California schools 1998: pupils above and
                                                  below the national median (counts in the
                                                  hundreds to thousands), percentages,
                                                  teachers' experience and salary, spending
                                                  per pupil, interaction terms
``macrodata``      statsmodels  203 × 12          US quarterly macroeconomic series
                                                  1959–2009: real GDP, consumption,
                                                  investment, government spending, disposable
                                                  income (billions), CPI, M1, T-bill rate,
                                                  unemployment, population (thousands),
                                                  inflation, real interest rate (``year``
                                                  and ``quarter`` dropped: an index)
``wine``           scikit-learn 178 × 13          UCI wine: 13 chemical measures, from hue
                                                  (about 1) to proline (to 1 680)
=================  =========  ==================  ===========================================
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from sklearn.utils import Bunch

__all__ = ["PACKAGED_TABLES", "PackagedTable", "list_packaged_tables", "load_packaged"]


@dataclass(frozen=True)
class PackagedTable:
    """What is known about one table shipped inside a package."""

    name: str
    package: str
    shape: tuple[int, int]
    title: str
    columns: str
    drop: tuple[str, ...] = ()


PACKAGED_TABLES: dict[str, PackagedTable] = {
    t.name: t
    for t in (
        PackagedTable("randhie", "statsmodels", (20_190, 10),
                      "RAND Health Insurance Experiment (statsmodels.datasets.randhie)",
                      "doctor visits (count, heavy tail), log coinsurance, deductible "
                      "indicator, log participation incentive, log max. deductible, physical "
                      "limitation, disease count, self-rated health (3 indicators)"),
        PackagedTable("fair", "statsmodels", (6_366, 9),
                      "Fair's affairs survey (statsmodels.datasets.fair)",
                      "marriage rating, age, years married, children, religiousness, "
                      "education, occupation codes (2), time in affairs (heavy tail)"),
        PackagedTable("digits", "scikit-learn", (1_797, 64),
                      "Handwritten digits (sklearn.datasets.load_digits)",
                      "8×8 pixel intensities 0–16"),
        PackagedTable("anes96", "statsmodels", (944, 11),
                      "American National Election Survey 1996 (statsmodels.datasets.anes96)",
                      "town population (heavy tail) and its log, TV news days, left–right "
                      "placements, party id, age, education, income, vote"),
        PackagedTable("breast_cancer", "scikit-learn", (569, 30),
                      "Wisconsin diagnostic breast cancer (sklearn.datasets."
                      "load_breast_cancer)",
                      "30 nucleus measures, from smoothness (~0.1) to area (to 4 254)"),
        PackagedTable("diabetes", "scikit-learn", (442, 10),
                      "Diabetes, raw (sklearn.datasets.load_diabetes(scaled=False))",
                      "age, sex (1/2), BMI, blood pressure, six serum measures"),
        PackagedTable("star98", "statsmodels", (303, 22),
                      "California schools 1998 (statsmodels.datasets.star98)",
                      "pupils above/below the median (counts), percentages, teachers' "
                      "experience and salary, spending, interaction terms"),
        PackagedTable("macrodata", "statsmodels", (203, 12),
                      "US macroeconomic series 1959–2009 (statsmodels.datasets.macrodata)",
                      "real GDP, consumption, investment, government, income (billions), "
                      "CPI, M1, T-bill rate, unemployment, population, inflation, real "
                      "interest rate", drop=("year", "quarter")),
        PackagedTable("wine", "scikit-learn", (178, 13),
                      "UCI wine (sklearn.datasets.load_wine)",
                      "13 chemical measures, from hue (~1) to proline (to 1 680)"),
    )
}


def list_packaged_tables() -> list[str]:
    """Names accepted by :func:`load_packaged`, largest table first.

    Examples
    --------
    >>> list_packaged_tables()[:3]
    ['randhie', 'fair', 'digits']
    """
    return list(PACKAGED_TABLES)


def _sklearn_frame(name: str) -> tuple[np.ndarray, list[str]]:
    from sklearn import datasets

    loader: Callable[..., Any] = getattr(datasets, f"load_{name}")
    kwargs = {"scaled": False} if name == "diabetes" else {}
    bunch = loader(**kwargs)
    return np.asarray(bunch.data, dtype=np.float64), [str(c) for c in bunch.feature_names]


def statsmodels_data(name: str) -> Any:
    """The pandas frame of ``statsmodels.datasets.<name>``, or an ImportError naming the
    ``suite`` extra (statsmodels is optional)."""
    try:
        module = importlib.import_module(f"statsmodels.datasets.{name}")
    except ImportError as exc:
        raise ImportError(
            f"The table {name!r} ships with statsmodels, which is not installed: "
            "pip install 'privpca[suite]' (or statsmodels)."
        ) from exc
    return module.load_pandas().data


def _statsmodels_frame(name: str, drop: tuple[str, ...]) -> tuple[np.ndarray, list[str]]:
    frame = statsmodels_data(name).drop(columns=list(drop))
    return frame.to_numpy(dtype=np.float64), [str(c) for c in frame.columns]


def package_version(package: str) -> str:
    """The installed version of ``package`` ("scikit-learn" or "statsmodels")."""
    module = importlib.import_module("sklearn" if package == "scikit-learn" else package)
    return str(module.__version__)


def load_packaged(name: str) -> Bunch:
    """Load a table shipped inside scikit-learn or statsmodels: raw numeric columns, float64.

    Parameters
    ----------
    name : str
        One of :func:`list_packaged_tables`.

    Returns
    -------
    Bunch
        ``data`` (ndarray of shape (n_samples, n_features), float64, the values as shipped),
        ``feature_names`` (list of str), ``name``, ``package``, ``version`` (the installed
        version of that package), ``DESCR`` (title, columns and source) and ``info``
        (:class:`PackagedTable`).

    Raises
    ------
    ImportError
        The table ships with statsmodels and statsmodels is not installed.
    ValueError
        Unknown name, or the package returned a table of another shape than documented.

    Examples
    --------
    >>> wine = load_packaged("wine")
    >>> wine.data.shape, wine.package
    ((178, 13), 'scikit-learn')
    """
    if name not in PACKAGED_TABLES:
        raise ValueError(f"Unknown table {name!r}; choose one of {list_packaged_tables()}.")
    info = PACKAGED_TABLES[name]
    if info.package == "scikit-learn":
        X, columns = _sklearn_frame(name)
    else:
        X, columns = _statsmodels_frame(name, info.drop)
    if X.shape != info.shape:
        raise ValueError(f"{name}: the {info.package} table has shape {X.shape}, expected "
                         f"{info.shape}: another version of the package?")
    version = package_version(info.package)
    descr = (f"{info.title}: {X.shape[0]} x {X.shape[1]}, raw numeric columns (float64; not "
             f"scaled, centred or normalised).\nColumns: {info.columns}.\nSource: "
             f"{info.package} {version}, installed files (no download).")
    return Bunch(data=X, feature_names=columns, name=name, package=info.package,
                 version=version, DESCR=descr, info=info)
