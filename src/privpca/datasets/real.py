"""Real data sets of Wang & Xu's experiments, shipped with the package (no network needed).

Six ``np.savez_compressed`` archives live in ``privpca/datasets/data/`` (about 17 MiB), each
with arrays ``X`` (float32, rows = samples) and ``y`` (int8 labels), copied byte for byte from
the project's staging folder; ``data/README.md`` records the source, licence and build of each.
Every loader checks the file's sha256 against the value recorded here before reading it (once
per process and path) and raises :class:`DatasetChecksumError` on a mismatch.

Preprocessing follows Wang & Xu (§6): rows are scaled to unit L2 norm ("normalized rows"),
which makes ``data_norm = 1`` exact for the local-model estimators. No centring by default
(the paper does not centre, and the private estimators use the uncentred second moment).
Both steps can be switched off; returned data are float64.

:func:`load_package_table` reads further public tables installed with scikit-learn or
statsmodels (:data:`PACKAGE_TABLES`: the real-table suite's tables beside
:mod:`privpca.datasets.packaged`'s), raw and offline.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from numpy.typing import NDArray
from sklearn.utils import Bunch

from privpca.datasets.packaged import package_version, statsmodels_data

__all__ = [
    "DATASETS",
    "PACKAGE_TABLES",
    "DatasetChecksumError",
    "DatasetInfo",
    "PackageTable",
    "list_datasets",
    "load_colon",
    "load_covtype",
    "load_dataset",
    "load_isolet5",
    "load_leukemia",
    "load_package_table",
]

DATA_DIR = Path(__file__).resolve().parent / "data"


class DatasetChecksumError(ValueError):
    """A shipped data file does not have the sha256 recorded for it (corrupt or replaced)."""


@dataclass(frozen=True)
class DatasetInfo:
    """What is known about one shipped file (see ``data/README.md`` for the full record)."""

    name: str
    filename: str
    shape: tuple[int, int]
    sha256: str
    title: str
    source: str
    reference: str
    license: str
    notes: str


DATASETS: dict[str, DatasetInfo] = {
    info.name: info
    for info in (
        DatasetInfo(
            "covtype",
            "covtype.npz",
            (581_012, 54),
            "d8a3cb4559e910b8236a7d2d1b8fed158fbbdf3bb4c098fc3fabc6535c8ab8a7",
            "Covertype (UCI id 31)",
            "scikit-multiflow 0.4.1 wheel, skmultiflow/data/datasets/covtype.csv (raw UCI "
            "covtype.data with a header row)",
            "Blackard & Dean, Computers and Electronics in Agriculture 24(3):131-151, 2000",
            "UCI: CC BY 4.0 (keep the copyright notice of J. A. Blackard and Colorado State "
            "University)",
            "X = the 54 columns (10 quantitative, 4 wilderness and 40 soil indicators), all "
            "integers; y = Cover_Type 1..7. The whole data set, in UCI row order.",
        ),
        DatasetInfo(
            "leukemia_allaml",
            "leukemia_allaml.npz",
            (72, 7129),
            "185ae69f5187a9609d8802b87d3e79fcb5e5ea948f1a4df7d98c919fceff64bf",
            "Leukemia ALL/AML (Golub et al.), continuous",
            "scikit-feature (jundongl/scikit-feature) skfeature/data/ALLAML.mat",
            "Golub et al., Science 286:531-537, 1999; Li et al., ACM CSUR 50(6), 2017",
            "GPL-2.0 (repository); public Golub/Broad data",
            "Standardised per gene at the source (column mean ~0, std ~1). y: 1 = ALL (47), "
            "2 = AML (25). The paper lists 72 x 7128; this file has 7129 probes.",
        ),
        DatasetInfo(
            "leukemia_discrete",
            "leukemia_skfeature_discrete.npz",
            (72, 7070),
            "f237e5cd77a073a6fbada5ee1f5c410b07de182c8e7273ea07d8b623816b3b31",
            "Leukemia (scikit-feature 'leukemia'), discretised",
            "scikit-feature skfeature/data/leukemia.mat",
            "Golub et al. 1999, via Li et al. 2017",
            "GPL-2.0 (repository)",
            "Values in {-2,...,2} as discretised by scikit-feature. y in {-1 (47), +1 (25)}.",
        ),
        DatasetInfo(
            "colon_discrete",
            "colon_skfeature_discrete.npz",
            (62, 2000),
            "c811b4402a05f5e97609b2a40080645e3135687a61fa07b6545110eb925c1bf9",
            "Colon cancer (Alon et al.), scikit-feature, discretised",
            "scikit-feature skfeature/data/colon.mat",
            "Alon et al., PNAS 96:6745-6750, 1999, via Li et al. 2017",
            "GPL-2.0 (repository)",
            "Values in {-2,...,2}. y in {-1 (40), +1 (22)}. The paper lists 60 x 2000; the "
            "source has 62 samples.",
        ),
        DatasetInfo(
            "colon_continuous",
            "colon_continuous.npz",
            (62, 2000),
            "f3821aa6eb03a567dcb4ddf174594de7630eb7b14a172367335e456b8a7cd741",
            "Colon cancer (Alon et al.), continuous",
            "I-SOFT-developer/Gene-expression-profiling-High-dimension-Dataset colon.mat "
            "(upstream: Díaz-Uriarte & Alvarez de Andrés supplement)",
            "Alon et al. 1999; Díaz-Uriarte & Alvarez de Andrés, BMC Bioinformatics 7:3, 2006",
            "No licence file in the repository; public research data",
            "Standardised per sample at the source (each row mean 0, std 1), apparently after a "
            "log transform. y: 1 = tumour (40), 0 = normal (22).",
        ),
        DatasetInfo(
            "isolet5",
            "isolet5.npz",
            (1559, 617),
            "9169aa2751e4db11a7be6518f94d908d9c455c6a23838cf0a258966904f4ad23",
            "isolet5 (UCI ISOLET, test part 5)",
            "ma-xu/L21FS data/isolet5.mat (Deng Cai's fea/gnd layout of UCI isolet5.data)",
            "Fanty & Cole, Spoken letter recognition, NIPS 3, 1991 (UCI id 54)",
            "UCI: CC BY 4.0",
            "Values in [-1, 1]. y = letter 1..26 (letter 13 has 59 rows, the others 60).",
        ),
    )
}

# Paths whose checksum has been verified in this process: hashing covtype takes ~0.1 s.
_VERIFIED: set[tuple[str, int, int]] = set()


def list_datasets() -> list[str]:
    """Names accepted by :func:`load_dataset`, sorted.

    Examples
    --------
    >>> list_datasets()[:2]
    ['colon_continuous', 'colon_discrete']
    """
    return sorted(DATASETS)


def _sha256(path: Path, chunk: int = 1 << 20) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(chunk), b""):
            h.update(block)
    return h.hexdigest()


def _verified_path(info: DatasetInfo, data_home: str | Path | None) -> Path:
    path = (Path(data_home) if data_home is not None else DATA_DIR) / info.filename
    if not path.is_file():
        raise FileNotFoundError(
            f"Data file for {info.name!r} not found at {path}. The files ship inside the "
            "privpca package (privpca/datasets/data); reinstall privpca if it is missing."
        )
    stat = path.stat()
    key = (str(path.resolve()), stat.st_size, stat.st_mtime_ns)
    if key not in _VERIFIED:
        digest = _sha256(path)
        if digest != info.sha256:
            raise DatasetChecksumError(
                f"Checksum mismatch for {info.name!r} ({path}): sha256 {digest}, expected "
                f"{info.sha256}. The file is corrupt or not the shipped one; reinstall privpca."
            )
        _VERIFIED.add(key)
    return path


def _preprocess(
    X: NDArray[np.float64], *, center: bool, normalize_rows: bool
) -> tuple[NDArray[np.float64], int]:
    if center:
        X -= X.mean(axis=0)
    n_zero = 0
    if normalize_rows:
        norms = np.sqrt(np.einsum("ij,ij->i", X, X))
        zero = norms == 0.0
        n_zero = int(zero.sum())
        norms[zero] = 1.0  # an all-zero row stays zero
        X /= norms[:, None]
    return X, n_zero


def load_dataset(
    name: str,
    *,
    normalize_rows: bool = True,
    center: bool = False,
    data_home: str | Path | None = None,
) -> Bunch:
    """Load a shipped data set by name, checksum-verified and preprocessed.

    Parameters
    ----------
    name : str
        One of :func:`list_datasets`.
    normalize_rows : bool, default=True
        Scale every row to unit L2 norm (Wang & Xu's preprocessing), after centring if
        ``center=True``. All-zero rows are left at zero.
    center : bool, default=False
        Subtract the column means first (not done by Wang & Xu).
    data_home : path or None, default=None
        Folder holding the ``.npz`` files; ``None`` uses the copy inside the package.

    Returns
    -------
    Bunch
        ``data`` (ndarray of shape (n_samples, n_features), float64), ``target`` (int8 labels),
        ``feature_names`` (None), ``DESCR`` (provenance and preprocessing), ``sha256``,
        ``filename``, ``name``, ``preprocessing`` (dict of the options) and ``info``
        (:class:`DatasetInfo`).

    Raises
    ------
    DatasetChecksumError
        The file's sha256 differs from the recorded one.
    """
    if name not in DATASETS:
        raise ValueError(f"Unknown data set {name!r}; choose one of {list_datasets()}.")
    info = DATASETS[name]
    path = _verified_path(info, data_home)
    with np.load(path, allow_pickle=False) as npz:
        X = np.asarray(npz["X"], dtype=np.float64)
        y = np.asarray(npz["y"])
    if X.shape != info.shape:
        raise DatasetChecksumError(f"{name}: X has shape {X.shape}, expected {info.shape}.")
    X, n_zero = _preprocess(X, center=center, normalize_rows=normalize_rows)
    steps = [
        "cast float32 -> float64",
        "columns centred" if center else "not centred",
        "rows scaled to unit L2 norm" if normalize_rows else "rows not normalised",
    ]
    if n_zero:
        steps.append(f"{n_zero} all-zero rows left at zero")
    descr = (
        f"{info.title}: {info.shape[0]} x {info.shape[1]}.\n"
        f"Source: {info.source}.\nReference: {info.reference}.\nLicence: {info.license}.\n"
        f"Notes: {info.notes}\nPreprocessing here: {'; '.join(steps)}.\n"
        f"sha256 of {info.filename}: {info.sha256} (verified)."
    )
    return Bunch(
        data=X,
        target=y,
        feature_names=None,
        DESCR=descr,
        sha256=info.sha256,
        filename=str(path),
        name=name,
        preprocessing={"center": center, "normalize_rows": normalize_rows},
        info=info,
    )


def load_covtype(
    *, normalize_rows: bool = True, center: bool = False, data_home: str | Path | None = None
) -> Bunch:
    """Covertype (UCI), 581 012 x 54: Wang & Xu's low-dimensional real data set (Figs. 1-2).

    Rows are scaled to unit L2 norm and **not** centred by default (Wang & Xu: "normalized
    rows"); data are float64. See :func:`load_dataset` for the parameters and the returned
    Bunch; ``target`` is the cover type 1..7.

    Examples
    --------
    >>> data = load_covtype()
    >>> data.data.shape
    (581012, 54)
    """
    return load_dataset(
        "covtype", normalize_rows=normalize_rows, center=center, data_home=data_home
    )


def load_leukemia(
    variant: str = "allaml",
    *,
    normalize_rows: bool = True,
    center: bool = False,
    data_home: str | Path | None = None,
) -> Bunch:
    """Leukemia ALL/AML (Golub et al.), 72 samples: Wang & Xu's Tables 1-2.

    Parameters
    ----------
    variant : {"allaml", "discrete"}, default="allaml"
        ``"allaml"``: 72 x 7129, continuous, standardised per gene at the source.
        ``"discrete"``: 72 x 7070, values in {-2, ..., 2} (scikit-feature's ``leukemia``).
        The paper (72 x 7128) does not say which it used.
    normalize_rows, center, data_home
        As in :func:`load_dataset`: rows scaled to unit norm, not centred, float64 by default.

    Returns
    -------
    Bunch
        See :func:`load_dataset`.
    """
    name = _variant({"allaml": "leukemia_allaml", "discrete": "leukemia_discrete"}, variant)
    return load_dataset(name, normalize_rows=normalize_rows, center=center, data_home=data_home)


def _variant(names: dict[str, str], variant: str) -> str:
    """The data set name of a loader's ``variant``, or a ValueError listing the choices."""
    if variant not in names:
        raise ValueError(f"variant must be one of {sorted(names)}; got {variant!r}.")
    return names[variant]


def load_colon(
    variant: str = "continuous",
    *,
    normalize_rows: bool = True,
    center: bool = False,
    data_home: str | Path | None = None,
) -> Bunch:
    """Colon cancer (Alon et al.), 62 x 2000: Wang & Xu's Tables 1-2.

    Parameters
    ----------
    variant : {"continuous", "discrete"}, default="continuous"
        ``"continuous"``: standardised per sample at the source (log scale, apparently).
        ``"discrete"``: scikit-feature's ``colon``, values in {-2, ..., 2}. The paper
        (60 x 2000) does not say which it used.
    normalize_rows, center, data_home
        As in :func:`load_dataset`: rows scaled to unit norm, not centred, float64 by default.

    Returns
    -------
    Bunch
        See :func:`load_dataset`.
    """
    name = _variant({"continuous": "colon_continuous", "discrete": "colon_discrete"}, variant)
    return load_dataset(name, normalize_rows=normalize_rows, center=center, data_home=data_home)


def load_isolet5(
    *, normalize_rows: bool = True, center: bool = False, data_home: str | Path | None = None
) -> Bunch:
    """isolet5 (UCI ISOLET, part 5), 1559 x 617: Wang & Xu's Tables 1-2.

    Rows are scaled to unit L2 norm and not centred by default; float64. See
    :func:`load_dataset`; ``target`` is the spoken letter 1..26.
    """
    return load_dataset(
        "isolet5", normalize_rows=normalize_rows, center=center, data_home=data_home
    )


# ---------------------------------------------------------------------------------------------
# More public tables installed with scikit-learn or statsmodels (the real-table suite's tables
# beside privpca.datasets.packaged's nine). Read from installed files, never downloaded.
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PackageTable:
    """One more table read from files installed with scikit-learn or statsmodels.

    Parameters
    ----------
    name : str
        The suite's name of the table.
    package : {"scikit-learn", "statsmodels"}
        The package whose installed files hold it.
    shape : tuple of int
        ``(n, p)`` after the documented drops.
    title : str
        What the table is, and the call that reads it.
    columns : str
        What the kept columns are.
    dropped : str
        Which columns or rows are dropped and why ("" when none).
    """

    name: str
    package: str
    shape: tuple[int, int]
    title: str
    columns: str
    dropped: str = ""


#: The real-table suite's further package tables (:func:`load_package_table`), largest first.
PACKAGE_TABLES: dict[str, PackageTable] = {
    t.name: t
    for t in (
        PackageTable("china_patches", "scikit-learn", (68_160, 12),
                     "Non-overlapping 2×2 RGB patches of the photograph 'china.jpg' "
                     "(sklearn.datasets.load_sample_image)",
                     "the 12 values (2×2 pixels × red, green, blue, each 0–255) of a patch, "
                     "row-major within the patch",
                     "the image's last pixel row (427 is odd): 213 × 320 patches"),
        PackageTable("modechoice", "statsmodels", (840, 7),
                     "Travel mode choice, Greene (statsmodels.datasets.modechoice)",
                     "choice (0/1), terminal time, in-vehicle cost, in-vehicle time, "
                     "generalised cost, household income, party size (one row per traveller "
                     "and mode: income and party size repeat over a traveller's 4 rows)",
                     "individual (an identifier) and mode (the alternative's code 1–4)"),
        PackageTable("grunfeld", "statsmodels", (220, 3),
                     "Grunfeld's investment data (statsmodels.datasets.grunfeld)",
                     "gross investment, market value, capital stock of 11 US firms over 20 "
                     "years (heavy tail: General Motors is an order of magnitude above most)",
                     "firm (a name) and year (an index)"),
        PackageTable("fertility", "statsmodels", (192, 52),
                     "World Bank fertility rates 1960–2011 (statsmodels.datasets.fertility)",
                     "births per woman in each year 1960–2011 (one row per country or "
                     "regional aggregate)",
                     "country name and code and indicator name and code (text), 2012 and "
                     "2013 (empty), and the 27 rows with a missing year"),
        PackageTable("iris", "scikit-learn", (150, 4),
                     "Fisher's iris (sklearn.datasets.load_iris)",
                     "sepal length and width, petal length and width (cm)"),
        PackageTable("ccard", "statsmodels", (72, 5),
                     "Credit card expenditure, Greene (statsmodels.datasets.ccard)",
                     "average monthly expenditure (heavy tail), age, income, income squared, "
                     "home ownership (0/1)"),
        PackageTable("heart", "statsmodels", (69, 3),
                     "Stanford heart transplant survival (statsmodels.datasets.heart)",
                     "survival (days, heavy tail), censoring indicator (0/1), age"),
        PackageTable("elnino", "statsmodels", (61, 12),
                     "El Niño sea surface temperatures 1950–2010 (statsmodels.datasets.elnino)",
                     "monthly temperature (°C), January to December, one row per year",
                     "YEAR (an index)"),
        PackageTable("statecrime", "statsmodels", (51, 7),
                     "US state crime 2009 (statsmodels.datasets.statecrime)",
                     "violent crime and murder rates per 100 000, % high-school graduates, "
                     "% in poverty, % single-parent households, % white, % urban"),
        PackageTable("stackloss", "statsmodels", (21, 4),
                     "Brownlee's stack loss plant data (statsmodels.datasets.stackloss)",
                     "stack loss, air flow, water temperature, acid concentration"),
        PackageTable("linnerud", "scikit-learn", (20, 6),
                     "Linnerud's exercise data (sklearn.datasets.load_linnerud), data and "
                     "targets side by side",
                     "chin-ups, sit-ups, jumps; weight (lb), waist (in), pulse"),
        PackageTable("longley", "statsmodels", (16, 6),
                     "Longley's US macro series 1947–1962 (statsmodels.datasets.longley)",
                     "total employment, GNP deflator, GNP, unemployment, armed forces, "
                     "population (nearly collinear)",
                     "YEAR (an index)"),
    )
}


#: Columns dropped from the statsmodels tables (identifiers and time indices).
_STATSMODELS_DROP: dict[str, tuple[str, ...]] = {
    "modechoice": ("individual", "mode"), "grunfeld": ("firm", "year"),
    "elnino": ("YEAR",), "longley": ("YEAR",),
    "fertility": ("Country Name", "Country Code", "Indicator Name", "Indicator Code", "2012",
                  "2013"),
}


def _package_frame(name: str) -> tuple[NDArray[np.float64], list[str]]:
    """The raw values (float64) and column names of a :data:`PACKAGE_TABLES` table."""
    from sklearn import datasets

    if name == "china_patches":
        image = np.asarray(datasets.load_sample_image("china.jpg"), dtype=np.float64)
        rows, cols = image.shape[0] // 2, image.shape[1] // 2
        patches = image[: 2 * rows, : 2 * cols].reshape(rows, 2, cols, 2, 3)
        X = patches.transpose(0, 2, 1, 3, 4).reshape(rows * cols, 12)
        return X, [f"{c}{i}{j}" for i in range(2) for j in range(2) for c in "rgb"]
    if name == "iris":
        bunch = datasets.load_iris()
        return np.asarray(bunch.data, dtype=np.float64), [str(c) for c in bunch.feature_names]
    if name == "linnerud":
        bunch = datasets.load_linnerud()
        X = np.hstack([bunch.data, bunch.target]).astype(np.float64)
        return X, [str(c) for c in (*bunch.feature_names, *bunch.target_names)]
    frame = statsmodels_data(name).drop(columns=list(_STATSMODELS_DROP.get(name, ())))
    if name == "fertility":
        frame = frame.dropna(axis=0)
    return frame.to_numpy(dtype=np.float64), [str(c) for c in frame.columns]


def load_package_table(name: str) -> Bunch:
    """Load one of :data:`PACKAGE_TABLES`: raw numeric columns, float64, read offline.

    The values are as installed with scikit-learn or statsmodels (``pip install
    'privpca[suite]'``), not scaled, centred or normalised; identifier and time-index columns
    are dropped (:attr:`PackageTable.dropped` says which).

    Parameters
    ----------
    name : str
        A key of :data:`PACKAGE_TABLES`.

    Returns
    -------
    Bunch
        ``data`` (ndarray of shape (n_samples, n_features), float64), ``feature_names``,
        ``name``, ``package``, ``version`` (the installed version of that package), ``DESCR``
        and ``info`` (:class:`PackageTable`).

    Raises
    ------
    ImportError
        The table ships with statsmodels and statsmodels is not installed.
    ValueError
        Unknown name, or the package gave another shape than documented.

    Examples
    --------
    >>> iris = load_package_table("iris")
    >>> iris.data.shape, iris.package
    ((150, 4), 'scikit-learn')
    """
    if name not in PACKAGE_TABLES:
        raise ValueError(f"Unknown table {name!r}; choose one of {list(PACKAGE_TABLES)}.")
    info = PACKAGE_TABLES[name]
    X, columns = _package_frame(name)
    if X.shape != info.shape:
        raise ValueError(f"{name}: the {info.package} table has shape {X.shape}, expected "
                         f"{info.shape}: another version of the package?")
    version = package_version(info.package)
    dropped = f"\nDropped: {info.dropped}." if info.dropped else ""
    descr = (f"{info.title}: {X.shape[0]} x {X.shape[1]}, raw numeric columns (float64; not "
             f"scaled, centred or normalised).\nColumns: {info.columns}.{dropped}\nSource: "
             f"{info.package} {version}, installed files (no download).")
    return Bunch(data=X, feature_names=columns, name=name, package=info.package,
                 version=version, DESCR=descr, info=info)
