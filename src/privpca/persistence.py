"""Publishing a fitted model: :func:`save` writes what was released, :func:`load` reads it.

A fitted estimator's release is its fitted attributes (each the noisy output of its fit or
post-processing of it, with ``privacy_`` saying what was spent) and the public parameters it
was fitted with. Its ledger is not: a :class:`~privpca.accounting.PrivacyLedger` is the data
holder's running account of every fit, kept where the data are. :func:`save` therefore writes
a model **without its ledger** and **with its** ``privacy_`` record, and refuses to write
anything that was not released.

The file
--------
One NumPy ``.npz`` archive (a zip of ``.npy`` arrays; any file name, ``.npz`` by custom):

* ``__privpca__``: a 0-d text array holding a JSON header, ``{"format": "privpca-model",
  "version": 1, "privpca": <version>, "estimator": <node>}``; a node is ``{"class": <name>,
  "params": {...}, "attributes": {...}}``;
* ``a0``, ``a1``, ...: plain numeric, boolean or text arrays, referred to from the header as
  ``{"__array__": "a0"}``.

Other values are tagged JSON: ``{"__tuple__": [...]}``, ``{"__dict__": [[key, value], ...]}``,
``{"__float__": "nan"}`` (and ``"inf"``, ``"-inf"``), ``{"__dataclass__": "PrivacyRecord",
"fields": {...}}`` (also ``PrivacySpend`` and Oja's ``LearningRate``), ``{"__dp_event__":
"GaussianDpEvent", "fields": {...}}`` (dp-accounting's events, so a loaded record still
composes) and ``{"__estimator__": <node>}`` (:class:`privpca.PCA`'s ``estimator_``).

:func:`load` reads it with ``numpy.load(..., allow_pickle=False)`` and ``json.loads``: **no
code from the file runs**. Classes are looked up by name among privpca's private estimators
(:data:`privpca._registry.PRIVATE_ESTIMATORS` and :class:`privpca.PCA`) and the value types
above; nothing else is imported. :func:`header` returns the parsed header, for whoever wants
to read what a file holds before loading it.

What is written: the released attributes only
---------------------------------------------
1. **Constructor parameters** (``get_params(deep=False)``), public by construction, except
   ``ledger`` (never written; the loaded model's ``ledger`` is ``None``, so it can never
   charge the original ledger, and a refit charges the ledger it is then given) and
   ``random_state`` (never written, ``None`` on load: a seed rebuilds the noise, and
   a Generator's state is its future noise).
2. **Fitted attributes**: every attribute whose name ends in ``_`` and does not begin with
   ``_`` (scikit-learn's convention for what ``fit`` produced; privpca's estimators release
   exactly these, ``privacy_`` included), and scikit-learn's ``set_output`` configuration.
3. **Nothing else.** Private attributes (a leading ``_``: caches such as ``_mean_sd``) and any
   other attribute are left out.

Every value written must be data: ``None``, a bool, number or string, a NumPy array of numbers,
booleans or text, a list, tuple or dict of these, the privacy record (its spends and their
dp-accounting events), Oja's learning rate, or (``estimator_``) an estimator written by the
same rule. Anything else (a Generator or SeedSequence, a ledger, a function, an object of
another class) makes :func:`save` raise a TypeError naming the attribute, before the file is
written, as does an array of shape ``(privacy_.n_samples, n_features_in_)``: a copy of the
table is never a release.

Plain ``pickle``
----------------
``pickle.dumps(estimator)`` (and ``joblib.dump``) of a model that holds a ledger raises a
TypeError that points here: a ledger refuses to leave its process (a process-parallel search
would otherwise lose spends silently), and a pickle cannot tell a publication from a worker's
copy. :func:`without_ledger` returns a copy with ``ledger=None`` that pickles; a pickle holds
everything the object holds (``random_state`` included) and runs code when loaded, so it is
for one's own use, :func:`save` for a release.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import json
import math
import os
import sys
import warnings
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["FORMAT", "VERSION", "header", "is_released", "load", "save", "without_ledger"]

#: The ``format`` of the header, and its ``version``.
FORMAT = "privpca-model"
VERSION = 1

#: The archive entry holding the JSON header.
HEADER = "__privpca__"

#: Constructor parameters never written (``None`` in a loaded model).
NOT_WRITTEN: tuple[str, ...] = ("ledger", "random_state")

#: Private attributes of scikit-learn that are configuration, not data (written).
KEPT_PRIVATE: tuple[str, ...] = ("_sklearn_output_config",)

#: Array kinds written: bool, signed and unsigned int, float, complex, text.
ARRAY_KINDS = "biufcU"


def _estimator_classes() -> dict[str, type]:
    """The classes a file may name: the registered private estimators and privpca.PCA."""
    from privpca._registry import PRIVATE_ESTIMATORS
    from privpca.pca import PCA

    classes: dict[str, type] = {cls.__name__: cls for cls in PRIVATE_ESTIMATORS.values()}
    classes[PCA.__name__] = PCA
    return classes


@functools.cache
def _value_classes() -> dict[str, type]:
    """The dataclasses a file may hold: the privacy record, its spends, Oja's step size."""
    from privpca.accounting.record import PrivacyRecord, PrivacySpend
    from privpca.solvers.oja import LearningRate

    return {cls.__name__: cls for cls in (PrivacyRecord, PrivacySpend, LearningRate)}


@functools.cache
def _dp_event_classes() -> dict[str, type]:
    """dp-accounting's event classes, by name."""
    from dp_accounting import dp_event

    return {name: cls for name, cls in vars(dp_event).items()
            if isinstance(cls, type) and issubclass(cls, dp_event.DpEvent)}


def _is_listed(est: object) -> bool:
    """Whether ``est`` is an instance of exactly one of :func:`_estimator_classes`."""
    return _estimator_classes().get(type(est).__name__) is type(est)


def is_released(name: str) -> bool:
    """Whether an attribute ``name`` is part of a release: a fitted attribute (ends in ``_``,
    does not begin with ``_``) or scikit-learn's output configuration."""
    return (name.endswith("_") and not name.startswith("_")) or name in KEPT_PRIVATE


# ------------------------------------------------------------------------------ writing


class _Writer:
    """Turns an estimator into a JSON node and the arrays it refers to."""

    def __init__(self) -> None:
        self.arrays: dict[str, np.ndarray] = {}
        self.table_shape: tuple[int, int] | None = None

    def estimator(self, est: Any, where: str) -> dict[str, Any]:
        from sklearn.exceptions import NotFittedError

        name = type(est).__name__
        if not _is_listed(est):
            raise TypeError(
                f"privpca.save writes privpca's private estimators and privpca.PCA; {where} is "
                f"a {type(est).__module__}.{type(est).__qualname__}. Nothing was written."
            )
        record = getattr(est, "privacy_", None)
        if record is None:
            raise NotFittedError(f"{name} is not fitted: there is nothing released to save.")
        n, p = getattr(record, "n_samples", None), getattr(est, "n_features_in_", None)
        if n is not None and p is not None and n > p:
            self.table_shape = (int(n), int(p))
        params = est.get_params(deep=False)
        node_params = {
            key: None if key in NOT_WRITTEN else self.value(value, f"{name}.{key}")
            for key, value in sorted(params.items())
        }
        attributes = {
            key: self.value(value, f"{name}.{key}")
            for key, value in sorted(vars(est).items())
            if key not in params and is_released(key)
        }
        return {"class": name, "params": node_params, "attributes": attributes}

    def array(self, value: np.ndarray, where: str) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if value.dtype.kind == "O":
            if not all(isinstance(item, str) for item in value.ravel()):
                raise TypeError(f"{where} is an object array holding other things than text: "
                                "not data privpca.save writes. Nothing was written.")
            value = value.astype(str)
            out["object"] = True
        if value.dtype.kind not in ARRAY_KINDS:
            raise TypeError(f"{where} is an array of dtype {value.dtype}: privpca.save writes "
                            "numbers, booleans and text. Nothing was written.")
        if self.table_shape is not None and value.ndim == 2 and value.shape == self.table_shape:
            raise TypeError(
                f"{where} has shape {value.shape}, the table's (n_samples, n_features_in_): "
                "one value per record and feature is never part of a release. Nothing was "
                "written."
            )
        key = f"a{len(self.arrays)}"
        self.arrays[key] = value
        return {"__array__": key, **out}

    def value(self, value: Any, where: str) -> Any:
        from sklearn.base import BaseEstimator

        if value is None or isinstance(value, (bool, str)):
            return value
        if isinstance(value, np.bool_):
            return bool(value)
        if isinstance(value, (int, np.integer)):
            return int(value)
        if isinstance(value, (float, np.floating)):
            number = float(value)
            return number if math.isfinite(number) else {"__float__": repr(number)}
        if isinstance(value, np.ndarray):
            return self.array(value, where)
        if isinstance(value, tuple):
            return {"__tuple__": [self.value(v, f"{where}[{i}]") for i, v in enumerate(value)]}
        if isinstance(value, list):
            return [self.value(v, f"{where}[{i}]") for i, v in enumerate(value)]
        if isinstance(value, dict):
            pairs = []
            for key, item in value.items():
                if not isinstance(key, (str, int)) or isinstance(key, bool):
                    raise TypeError(f"{where} has a key {key!r}: privpca.save writes dicts "
                                    "keyed by text or integers. Nothing was written.")
                pairs.append([key, self.value(item, f"{where}[{key!r}]")])
            return {"__dict__": pairs}
        if type(value) in _value_classes().values() and dataclasses.is_dataclass(value):
            fields = {f.name: self.value(getattr(value, f.name), f"{where}.{f.name}")
                      for f in dataclasses.fields(value)}
            return {"__dataclass__": type(value).__name__, "fields": fields}
        if _dp_event_classes().get(type(value).__name__) is type(value):
            import attr

            fields = {f.name: self.value(getattr(value, f.name), f"{where}.{f.name}")
                      for f in attr.fields(type(value))}  # type: ignore[arg-type]
            return {"__dp_event__": type(value).__name__, "fields": fields}
        if isinstance(value, BaseEstimator):
            return {"__estimator__": self.estimator(value, where)}
        raise TypeError(f"{where} holds {_what(value)}: not data privpca.save writes (see "
                        "privpca.persistence). Nothing was written.")


def _what(value: Any) -> str:
    """A phrase naming ``value``'s kind, and why the refused kinds are refused."""
    from privpca.accounting.ledger import PrivacyLedger

    if isinstance(value, PrivacyLedger):
        return "a PrivacyLedger (the data holder's account, never part of a release)"
    if isinstance(value, (np.random.Generator, np.random.SeedSequence,
                          np.random.BitGenerator, np.random.RandomState)):
        return "a random generator (its state rebuilds the noise)"
    if callable(value):
        return "a function"
    return f"a {type(value).__module__}.{type(value).__qualname__}"


def save(estimator: Any, path: str | os.PathLike[str]) -> Path:
    """Write a fitted estimator's release to ``path``: never its ledger, always ``privacy_``.

    Parameters
    ----------
    estimator : a fitted privpca estimator or privpca.PCA
        One of :data:`privpca._registry.PRIVATE_ESTIMATORS` or :class:`privpca.PCA`.
    path : str or path-like
        The file to write (an ``.npz`` archive, whatever its name; overwritten).

    Returns
    -------
    pathlib.Path
        ``path``.

    Raises
    ------
    TypeError
        For another class, or a value that is not data (a Generator, a ledger, ...) in a
        parameter or fitted attribute that would be written; nothing is written then.
    sklearn.exceptions.NotFittedError
        For an estimator that was not fitted.

    Warns
    -----
    ReproducibleNoiseWarning
        When the model was fitted with a ``random_state`` (``privacy_.noise_mode ==
        "reproducible"``): the seed is not written, but whoever knows or guesses it can
        rebuild the noise, so the file is not a release.

    Notes
    -----
    What is written and how is the module's documentation (:mod:`privpca.persistence`):
    the constructor parameters but ``ledger`` and ``random_state``, the attributes named
    like ``components_``, and nothing else.

    Examples
    --------
    >>> import numpy as np, privpca
    >>> X = np.random.default_rng(0).standard_normal((20_000, 4))
    >>> est = privpca.PCA(2, epsilon=1.0, ledger=privpca.PrivacyLedger()).fit(X)
    >>> path = privpca.save(est, "model.npz")  # doctest: +SKIP
    >>> again = privpca.load(path)  # doctest: +SKIP
    >>> again.ledger is None and again.privacy_ == est.privacy_  # doctest: +SKIP
    True
    """
    from privpca._config import ReproducibleNoiseWarning
    from privpca._validation import caller_stacklevel

    writer = _Writer()
    node = writer.estimator(estimator, type(estimator).__name__)
    version = getattr(sys.modules.get("privpca"), "__version__", "unknown")  # the package
    text = json.dumps({"format": FORMAT, "version": VERSION, "privpca": version,
                       "estimator": node}, allow_nan=False, ensure_ascii=False)
    if getattr(estimator.privacy_, "noise_mode", "") == "reproducible":
        warnings.warn(
            f"{type(estimator).__name__} was fitted with a random_state: its noise is NumPy's "
            "float noise from that seed, which anyone who knows or guesses the seed (0, 42, "
            "...) can rebuild and subtract. privpca.save does not write random_state, but "
            "this file is not a release: refit with random_state=None to publish.",
            ReproducibleNoiseWarning,
            stacklevel=caller_stacklevel(),
        )
    target = Path(path)
    entries: dict[str, Any] = {HEADER: np.array(text), **writer.arrays}
    with open(target, "wb") as handle:
        np.savez_compressed(handle, **entries)
    return target


# ------------------------------------------------------------------------------ reading


class _Reader:
    """Turns a JSON node and its arrays back into an estimator, checking the rule."""

    def __init__(self, arrays: dict[str, np.ndarray]) -> None:
        self.arrays = arrays
        self.used: set[str] = set()

    def estimator(self, node: Any) -> Any:
        if not isinstance(node, dict) or set(node) != {"class", "params", "attributes"}:
            raise ValueError("Not a privpca model file: an estimator entry is malformed.")
        cls = _estimator_classes().get(node["class"])
        if cls is None:
            raise ValueError(f"This file names the class {node['class']!r}, which is not one "
                             "of privpca's private estimators: it is not loaded.")
        known = set(cls().get_params(deep=False))
        params = {key: self.value(value) for key, value in node["params"].items()}
        unknown = sorted(set(params) - known)
        if unknown:
            raise ValueError(f"This file gives {cls.__name__} parameters it does not take: "
                             f"{unknown}. It was written by another version of privpca?")
        for key in NOT_WRITTEN:
            if params.get(key) is not None:
                raise ValueError(f"This file holds a {key} for {cls.__name__}: a privpca "
                                 "model file never does. It is not loaded.")
        est = cls(**params)
        for key, value in node["attributes"].items():
            if key in known or not is_released(key):
                raise ValueError(f"This file holds {cls.__name__}.{key}, which is not a "
                                 "released attribute: it is not loaded.")
            setattr(est, key, self.value(value))
        if not hasattr(est, "privacy_"):
            raise ValueError(f"This file's {cls.__name__} has no privacy_ record: it is not "
                             "loaded.")
        inner = getattr(est, "estimator_", None)
        if inner is not None:  # privpca.PCA: its forwarded attributes are the estimator's own
            from privpca.pca import FORWARDED

            for key in FORWARDED:
                if key in vars(est) and hasattr(inner, key):
                    setattr(est, key, getattr(inner, key))
        return est

    def value(self, value: Any) -> Any:
        if value is None or isinstance(value, (bool, int, float, str)):
            return value
        if isinstance(value, list):
            return [self.value(v) for v in value]
        if not isinstance(value, dict) or len(value) == 0:
            raise ValueError(f"Not a privpca model file: unexpected entry {value!r:.80}.")
        if "__array__" in value:
            key = value["__array__"]
            if key not in self.arrays or key in self.used:
                raise ValueError(f"Not a privpca model file: array {key!r} is missing or "
                                 "used twice.")
            self.used.add(key)
            array = self.arrays[key]
            return array.astype(object) if value.get("object") else array
        if "__float__" in value:
            return {"nan": math.nan, "inf": math.inf, "-inf": -math.inf}[value["__float__"]]
        if "__tuple__" in value:
            return tuple(self.value(v) for v in value["__tuple__"])
        if "__dict__" in value:
            return {key: self.value(item) for key, item in value["__dict__"]}
        if "__dataclass__" in value:
            cls = _value_classes().get(value["__dataclass__"])
            if cls is None:
                raise ValueError(f"This file holds a {value['__dataclass__']!r}, which privpca "
                                 "does not load.")
            return cls(**{k: self.value(v) for k, v in value["fields"].items()})
        if "__dp_event__" in value:
            cls = _dp_event_classes().get(value["__dp_event__"])
            if cls is None:
                raise ValueError(f"This file holds an event {value['__dp_event__']!r}, which "
                                 "dp-accounting does not define.")
            return cls(**{k: self.value(v) for k, v in value["fields"].items()})
        if "__estimator__" in value:
            return self.estimator(value["__estimator__"])
        raise ValueError(f"Not a privpca model file: unexpected entry {value!r:.80}.")


def _read(path: str | os.PathLike[str]) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """The header and the arrays of a privpca model file (no code from the file runs)."""
    try:
        archive = np.load(path, allow_pickle=False)
    except (OSError, EOFError, ValueError) as exc:  # not an archive, or pickled data
        raise ValueError(f"{path}: not a privpca model file ({exc}).") from exc
    if not isinstance(archive, np.lib.npyio.NpzFile):
        raise ValueError(f"{path}: not a privpca model file (a single array, not an archive).")
    with archive:
        if HEADER not in archive.files:
            raise ValueError(f"{path}: not a privpca model file (no {HEADER} entry).")
        text = str(archive[HEADER][()])
        arrays = {key: archive[key] for key in archive.files if key != HEADER}
    head = json.loads(text)
    if not isinstance(head, dict) or head.get("format") != FORMAT:
        raise ValueError(f"{path}: not a privpca model file (format {head.get('format')!r}).")
    if head.get("version") != VERSION:
        raise ValueError(f"{path}: a privpca model file of version {head.get('version')!r}; "
                         f"this privpca reads version {VERSION}.")
    return head, arrays


def header(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The parsed JSON header of a model file: its class, parameters and attributes (arrays
    appear as ``{"__array__": key}``), to read what a file holds without loading it."""
    return _read(path)[0]


def load(path: str | os.PathLike[str]) -> Any:
    """Read a model written by :func:`save`.

    Returns an estimator of the class written, with the parameters written (``ledger`` and
    ``random_state`` ``None``) and the fitted attributes written: its ``transform`` gives
    the same output bit for bit, its ``privacy_`` equals the original's. It holds no ledger,
    so it cannot charge the one of the fit that made it.

    Raises ValueError for a file that is not a privpca model, names a class that is not a
    privpca estimator, or holds anything but parameters and released attributes. No code from
    the file runs (``numpy.load(allow_pickle=False)``, ``json``).
    """
    head, arrays = _read(path)
    reader = _Reader(arrays)
    est = reader.estimator(head.get("estimator"))
    unused = sorted(set(arrays) - reader.used)
    if unused:
        raise ValueError(f"{path}: holds arrays no released attribute refers to ({unused}); "
                         "it is not loaded.")
    return est


def without_ledger(estimator: Any) -> Any:
    """A deep copy of ``estimator`` with ``ledger=None`` (and its ``estimator_``'s), which
    ``pickle`` and ``joblib`` accept. The original keeps its ledger.

    The copy holds everything the original holds but the ledger (``random_state``, private
    caches); a pickle runs code when loaded. Publish with :func:`save`.
    """
    twin = copy.deepcopy(estimator)  # the ledger's __deepcopy__ returns it: replaced below
    _detach(twin)
    return twin


def _detach(est: Any) -> None:
    if hasattr(est, "get_params") and "ledger" in est.get_params(deep=False):
        est.set_params(ledger=None)
    inner = vars(est).get("estimator_")
    if inner is not None:
        _detach(inner)
