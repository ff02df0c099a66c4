"""Parameter checks, input validation, row-norm clipping and RNG handling.

Every estimator validates in ``fit`` (never in ``__init__``), with messages that name the
parameter, the allowed range and the value given, in scikit-learn's wording.
"""

from __future__ import annotations

import numbers
import os
import sys
import warnings
from typing import Any

import numpy as np
import sklearn
from numpy.typing import ArrayLike, NDArray

from privpca._config import large_delta_allowed
from privpca.exceptions import NonFiniteInputError, RowClippingWarning

__all__ = [
    "EPSILON_RANGE",
    "NORM_BOUND_RANGE",
    "check_data",
    "check_delta",
    "check_epsilon",
    "check_in_range",
    "check_n_components",
    "check_norm_bound",
    "check_options",
    "clip_rows",
    "fit_input",
    "non_finite_message",
    "row_norms",
]

#: ε accepted by every estimator and mechanism. Beyond 10¹² nothing is private and the
#: calibrations (e^ε, a noise multiplier ~1/ε) leave float64; below 10⁻⁹ the noise
#: multiplier (~1/ε) times a squared norm bound leaves it too.
EPSILON_RANGE = (1e-9, 1e12)
#: Public norm bounds (data_norm, clip_norm, ...) accepted: D², D⁴ and their inverses stay
#: finite, non-zero float64 numbers times any noise multiplier of :data:`EPSILON_RANGE`.
NORM_BOUND_RANGE = (1e-60, 1e60)


def _owner(owner: object | None) -> str:
    if owner is None:
        return ""
    name = owner if isinstance(owner, str) else type(owner).__name__
    return f" of {name}"


def check_in_range(
    value: Any,
    name: str,
    *,
    low: float = -np.inf,
    high: float = np.inf,
    low_closed: bool = False,
    high_closed: bool = False,
    integer: bool = False,
    owner: object | None = None,
) -> float:
    """Check that ``value`` is a real number (or integer) in an interval and return it.

    Raises
    ------
    ValueError
        With a message such as ``The 'epsilon' parameter of LocalGaussianPCA must be a float
        in the range (0, inf). Got -1 instead.``
    """
    kind = "an int" if integer else "a float"
    left = "[" if low_closed else "("
    right = "]" if high_closed else ")"
    interval = f"{left}{_fmt(low)}, {_fmt(high)}{right}"
    message = (
        f"The '{name}' parameter{_owner(owner)} must be {kind} in the range {interval}. "
        f"Got {value!r} instead."
    )
    if isinstance(value, bool):
        raise ValueError(message)
    if integer and not isinstance(value, numbers.Integral):
        raise ValueError(message)
    if not isinstance(value, numbers.Real):
        raise ValueError(message)
    value_f = float(value)
    if not np.isfinite(value_f) and not (value_f == np.inf and high == np.inf and high_closed):
        raise ValueError(message)
    below = value_f < low or (value_f == low and not low_closed)
    above = value_f > high or (value_f == high and not high_closed)
    if below or above:
        raise ValueError(message)
    return value_f


def _fmt(x: float) -> str:
    if np.isinf(x):
        return "-inf" if x < 0 else "inf"
    return f"{x:g}"


def check_epsilon(epsilon: Any, *, owner: object | None = None, name: str = "epsilon") -> float:
    """Return ε as a float after checking ``1e-9 <= ε <= 1e12`` (:data:`EPSILON_RANGE`).

    ε = ∞ (no privacy) is refused: use the non-private estimator instead.
    """
    low, high = EPSILON_RANGE
    return check_in_range(epsilon, name, low=low, high=high, low_closed=True,
                          high_closed=True, owner=owner)


def check_norm_bound(value: Any, name: str = "data_norm", *,
                     owner: object | None = None) -> float:
    """Return a public norm bound ``D`` after checking it lies in :data:`NORM_BOUND_RANGE`.

    The sensitivities are powers of D (D², D⁴) and the noise is a multiplier times them:
    a bound outside ``[1e-60, 1e60]`` would overflow to ∞ or vanish to 0 (a
    ZeroDivisionError or a noise of ∞), so it is refused; rescale the data instead.
    """
    low, high = NORM_BOUND_RANGE
    return check_in_range(value, name, low=low, high=high, low_closed=True, high_closed=True,
                          owner=owner)


#: The smallest δ taken: the parts' shares of δ (over 1 + e^ε) must stay normal floats, and
#: 10⁻¹⁰⁰ is below 1/n² for every n a table can have (5·10⁻³²⁴ crashed the calibrations).
SMALLEST_DELTA = 1e-100


def check_delta(delta: Any, *, owner: object | None = None, name: str = "delta") -> float:
    """Return δ as a float after checking 0 < δ < 1 (a part's share of a δ: a user's δ is
    also at least :data:`SMALLEST_DELTA`, checked where it is declared)."""
    return check_in_range(delta, name, low=0.0, high=1.0, owner=owner)


#: The largest δ a party takes unless forced: δ ≥ 0.1 is refused (δ is the probability that
#: the guarantee fails outright; it should be well below 1/n).
LARGE_DELTA = 0.1


def check_party_delta(delta: Any, *, owner: str) -> float:
    """δ of a party's own guarantee (a user's randomiser, a data provider), checked as an
    estimator's is: in (0, :data:`LARGE_DELTA`), or (0, 1) inside
    ``privpca.config_context(allow_large_delta=True)``."""
    value = check_in_range(delta, "delta", low=SMALLEST_DELTA, low_closed=True, high=1.0,
                           owner=owner)
    if value >= LARGE_DELTA and not large_delta_allowed():
        raise ValueError(
            f"{owner}: delta={value:g} is refused: δ is the probability that the guarantee may "
            f"fail outright and should be well below 1/n (at most {LARGE_DELTA:g}); a larger "
            "δ, for a paper's grid or an audit probe, only inside "
            "privpca.config_context(allow_large_delta=True).")
    return value


def check_options(
    value: Any, name: str, options: tuple[str, ...], *, owner: object | None = None
) -> str:
    """Check that ``value`` is one of the string ``options``."""
    if not isinstance(value, str) or value not in options:
        raise ValueError(
            f"The '{name}' parameter{_owner(owner)} must be a str among "
            f"{sorted(options)}. Got {value!r} instead."
        )
    return value


def check_n_components(n_components: Any, n_features: int, *, owner: object | None = None) -> int:
    """Check 1 ≤ ``n_components`` ≤ ``n_features`` and return it as an int."""
    k = int(
        check_in_range(
            n_components, "n_components", low=1, low_closed=True, integer=True, owner=owner
        )
    )
    if k > n_features:
        raise ValueError(
            f"n_components={k} must be between 1 and n_features={n_features}"
            f"{_owner(owner).replace(' of', ' for')}."
        )
    return k


#: What to do about NaN or infinity, said by every refusal of them (which says nothing about
#: how many there are, or where: that would be a statistic of the data).
NON_FINITE_ADVICE = (
    "privpca neither drops rows (n would become a count of the data) nor imputes from the "
    "table (that needs a private release of its own): put a public value of your choice in "
    "the missing cells, e.g. sklearn.impute.SimpleImputer(strategy='constant', fill_value=VALUE) "
    "before the estimator in a Pipeline (in the shell: --missing VALUE); remove infinities."
)


def non_finite_message(name: str = "X") -> str:
    """The refusal of NaN/infinity in ``name``, with the way out."""
    return f"{name} contains NaN or infinity. {NON_FINITE_ADVICE}"


def fit_input(owner: Any, X: ArrayLike, *, finite: bool = False,
              reset: bool = True) -> NDArray[np.float64]:
    """The one door through which every ``fit`` reads an in-memory table.

    Refuses identifier columns by name (:func:`privpca._columns.refuse_identifier_columns`),
    then scikit-learn's ``validate_data`` (float64, 2-D, ``n_features_in_`` and
    ``feature_names_in_`` set when ``reset``). ``finite=True`` also refuses NaN/infinity
    here; by default the caller's own pass refuses them before anything is released.
    ``tests/test_architecture.py`` checks that no other module calls ``validate_data`` on a
    table to be fitted, so a rule added here holds for every estimator.
    """
    from sklearn.utils.validation import validate_data

    from privpca._columns import refuse_identifier_columns, refuse_text_columns

    if reset:
        refuse_identifier_columns(X, owner)
        refuse_text_columns(X, owner)
    try:
        return np.asarray(validate_data(owner, X, dtype=np.float64, ensure_all_finite=finite,
                                        reset=reset))
    except ValueError as exc:  # scikit-learn's text may print the data: said without it
        raise ValueError(_without_values(str(exc))) from None


def _without_values(message: str) -> str:
    """scikit-learn's (or NumPy's) refusal of a 1-D, complex or non-numeric table, without
    the values it prints."""
    if message.startswith("Complex data not supported"):
        return "Complex data not supported: X must be real."
    if message.startswith("could not convert"):  # NumPy quotes the cell
        return "X must be numeric: a value could not be converted to float64."
    head, found, tail = message.partition("\narray=")
    if not found:
        return message
    advice = tail[tail.find("Reshape"):] if "Reshape" in tail else ""  # the values end there
    return f"{head.rstrip(':')}. {advice}".strip()


def check_data(X: ArrayLike, *, name: str = "X") -> NDArray[np.float64]:
    """Return ``X`` as a 2-D float64 array, refusing identifier columns (by name), NaN,
    infinity and empty input; rows above :data:`MAX_ROW_NORM` are scaled down to it.

    The caller's array is never modified; a copy is made only when the dtype or layout
    requires one.
    """
    from privpca._columns import refuse_identifier_columns

    refuse_identifier_columns(X)
    try:
        arr = np.asarray(X, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        # The conversion's own text may quote a value of the data: not repeated.
        raise ValueError(f"{name} must be numeric: it could not be converted to float64 "
                         f"({type(exc).__name__}).") from None
    if arr.ndim != 2:
        raise ValueError(
            f"Expected a 2-D array for {name}, got an array with {arr.ndim} dimension(s); "
            "reshape your data with X.reshape(-1, 1) for a single feature or "
            "X.reshape(1, -1) for a single sample."
        )
    if arr.shape[0] == 0 or arr.shape[1] == 0:
        raise ValueError(f"{name} is empty: found array with shape {arr.shape}.")
    return bounded_rows(arr, name=name)[0]


def refuse_non_finite(X: NDArray[np.float64], name: str = "X") -> None:
    """Raise :class:`~privpca.exceptions.NonFiniteInputError` (a ``ValueError``) if ``X``
    holds NaN or infinity (no count or position: that would be an exact statistic).

    One pass: NaN/inf make a column sum non-finite; only then (or on overflow of finite
    values) is the element-wise check made.
    """
    with np.errstate(all="ignore"):
        if np.isfinite(X.sum(axis=0)).all():
            return
    if not np.isfinite(X).all():
        # How many rows would be an exact count of the data: not reported.
        raise NonFiniteInputError(non_finite_message(name))


#: The largest row norm a fit reads: a row above it is scaled down to it, its direction kept,
#: where the table is read (:func:`bounded_rows`), so that squares and sums of squares of rows
#: stay finite in float64 (a row of norm above about 1.3e154 has an infinite squared norm). A
#: fixed map of each row, whatever the others, far above any bound a fit chooses (the private
#: quantiles' grid ends at 3.4e38): such a row is clipped as any other outlier, never refused
#: (a refusal would depend on that one row, and would not be charged).
MAX_ROW_NORM = 1e150


def bounded_rows(X: NDArray[np.float64], sq: NDArray[np.float64] | None = None, *,
                 name: str = "X") -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """``X`` and its squared row norms, NaN and infinity refused
    (:class:`~privpca.exceptions.NonFiniteInputError`, no count or position), rows above
    :data:`MAX_ROW_NORM` scaled down to it (in a copy, made only then).

    One pass (the squared norms, unless given); the exact checks only where a norm is
    non-finite or above the limit.
    """
    if sq is None:
        with np.errstate(over="ignore", invalid="ignore"):
            sq = np.einsum("ij,ij->i", X, X)
    with np.errstate(invalid="ignore"):
        over = ~(sq <= MAX_ROW_NORM**2)
    if not over.any():
        return X, sq
    if not np.isfinite(X).all():
        # How many rows would be an exact count of the data: not reported.
        raise NonFiniteInputError(non_finite_message(name))
    rows = np.flatnonzero(over)
    X, sq = X.copy(), sq.copy()
    X[rows] *= (MAX_ROW_NORM / row_norms(X[rows]))[:, None]
    sq[rows] = np.einsum("ij,ij->i", X[rows], X[rows])
    return X, sq


def row_norms(X: NDArray[np.float64]) -> NDArray[np.float64]:
    """L2 norms of the rows of ``X``, exact also where the squares overflow (‖x‖ ≥ 1e154).

    One pass (``einsum``) for the squares; only rows whose square overflowed (or
    underflowed below 1e-150) are recomputed, scaled by their largest entry.
    Rows holding NaN or infinity get a non-finite norm.
    """
    with np.errstate(over="ignore"):
        norms = np.sqrt(np.einsum("ij,ij->i", X, X))
    redo = np.flatnonzero(np.isinf(norms) | (norms < 1e-150))  # overflowed or underflowed
    if redo.size:
        rows = X[redo]
        with np.errstate(invalid="ignore", over="ignore"):
            top = np.max(np.abs(rows), axis=1)
            finite = np.isfinite(top) & (top > 0)
            scaled = rows[finite] / top[finite, None]
            norms[redo[finite]] = top[finite] * np.sqrt(np.einsum("ij,ij->i", scaled, scaled))
    return norms


def clip_rows(
    X: NDArray[np.float64],
    data_norm: float,
    *,
    owner: object | None = None,
    norms: NDArray[np.float64] | None = None,
    copy: bool = True,
) -> tuple[NDArray[np.float64], int]:
    """Scale rows whose L2 norm exceeds ``data_norm`` down to ``data_norm``.

    Parameters
    ----------
    X : ndarray of shape (n_samples, n_features)
        Data; NaN or infinity raises ValueError. Never modified: a copy is returned
        when any row is clipped.
    data_norm : float
        The public bound on every row's L2 norm that the privacy analysis assumes.
    norms : ndarray of shape (n_samples,), optional
        The row norms, when the caller has them already (saves a pass over X).
    copy : bool, default=True
        Clip a copy (``X`` untouched); ``False`` clips ``X`` in place (for arrays the caller
        owns).

    Returns
    -------
    X_clipped : ndarray of shape (n_samples, n_features)
        ``X`` itself when nothing needed clipping, else a clipped copy.
    n_clipped : int
        How many rows were clipped. An exact count of the data: for the caller's own use,
        never to be released (it is in no record, attribute or message).

    Warns
    -----
    RowClippingWarning
        When at least one row was clipped. The message holds no value computed from the
        data (no count, no norm): only that the public bound was exceeded. Callers clip
        after the budget is charged, so a refused fit never warns.
    """
    if norms is None or not np.all(np.isfinite(norms)):
        norms = row_norms(X)
    if not np.all(np.isfinite(norms)):
        # The norms double as the NaN/inf check (a NaN or inf entry makes its row's norm
        # non-finite). How many rows would be an exact count of the data: not reported.
        raise ValueError(non_finite_message())
    over = norms > data_norm * (1.0 + 1e-12)
    n_clipped = int(over.sum())
    if n_clipped == 0:
        return X, 0
    X_clipped = X.copy() if copy else X
    X_clipped[over] *= (data_norm / norms[over])[:, None]
    warn_clipped(owner, data_norm)
    return X_clipped, n_clipped


def warn_clipped(owner: object | None, data_norm: float, *, what: str = "rows",
                 bound: str = "data_norm", effect: str = "the estimate is biased",
                 cost: str = "which adds noise") -> None:
    """Warn that some ``what`` exceeded the public ``bound`` and were clipped to it.

    Says nothing computed from the data (how many, how long): a warning is a release too.
    ``effect`` and ``cost`` say what the clipping did and what raising the bound costs.
    """
    warnings.warn(
        f"Some {what}{_owner(owner).replace(' of', ' passed to')} exceeded the public "
        f"{bound}={data_norm:g} and were clipped to it. The privacy guarantee holds; "
        f"{effect}. Rescale your data or raise {bound} ({cost}) if this "
        "is unexpected. (How many were clipped is not reported: that count is not private.)",
        RowClippingWarning,
        stacklevel=caller_stacklevel(),
    )


#: Frames in these folders are "inside": privpca's own, and scikit-learn's (its ``fit``
#: wrapper, a Pipeline) between the user's line and privpca.
_INSIDE = (os.path.dirname(os.path.abspath(__file__)) + os.sep,
           os.path.dirname(os.path.abspath(sklearn.__file__)) + os.sep)


def caller_stacklevel() -> int:
    """The ``stacklevel`` that makes a warning point at the first frame outside privpca (and
    scikit-learn, whose ``fit`` wrapper calls privpca's).

    A warning raised deep inside a fit (the one fit, a pipeline step) then names the user's
    line that called ``fit``, whatever the depth of privpca's own calls.
    """
    frame = sys._getframe(1)
    level = 1
    while frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(_INSIDE):
        frame = frame.f_back  # type: ignore[assignment]
        level += 1
    return level
