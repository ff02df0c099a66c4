"""``audit``: a black-box lower bound on the ε a mechanism or an estimator really spends.

Method
------
The mechanism is run ``runs`` times on each of two neighbouring datasets. The runs are
split: the first ``selection_fraction`` of them (the *selection runs*) choose the test, and
only the others (the *evaluation runs*) count. On the selection runs alone, each released
number (and, for several, the Fisher discriminant direction and the squared norm) is a
candidate statistic (which ones are kept — constant, non-finite — is also decided there), and
for each the threshold with the largest Clopper–Pearson ε bound is found
(:func:`~privpca.audit._bounds.best_threshold`). Only the best (statistic, threshold,
direction, ordering) is then evaluated on the evaluation runs, which nothing before looked at,
so one test is made and the bound ``ε ≥ ln((p₀ − δ)/p₁)`` holds with probability ≥
``confidence`` (each Clopper–Pearson bound at ``1 − (1 − confidence)/2``). The report also
gives the bound at any other level (:meth:`AuditReport.epsilon_lower_at`, for a family-wise
correction over many cells, :mod:`privpca.audit.family`) and the p-value of the claim.

``power`` is what as many evaluation runs would certify for the ideal mechanism that meets
the claimed (ε, δ) with equality (:func:`~privpca.audit._bounds.ideal_power`): an
``epsilon_lower`` near ``power`` means the audit was as strong as it can be at that size; an
``epsilon_lower`` above the claimed ε is a proven violation (at the stated confidence).
"""

from __future__ import annotations

import inspect
import math
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from privpca._config import ReproducibleNoiseWarning, secure_mode
from privpca.accounting import PrivacyLedger
from privpca.audit._bounds import CellBounds, best_threshold, epsilon_bound, ideal_power
from privpca.audit.neighbours import builtin_neighbours, release_features
from privpca.mechanisms.randomness import check_random_state

__all__ = ["SELECTION_CONFIDENCE", "AuditReport", "audit"]

#: The stricter Clopper–Pearson level used to rank tests on the selection runs: it favours
#: thresholds with enough hits to replicate on the evaluation runs (over lucky extreme ones).
SELECTION_CONFIDENCE = 0.999


@dataclass(frozen=True)
class AuditReport(CellBounds):
    """The outcome of :func:`audit`.

    Attributes
    ----------
    epsilon, delta : float
        The claimed privacy.
    epsilon_lower : float
        ε proven by the evaluation runs with probability ≥ ``confidence`` (0 when nothing is
        proven). Above ``epsilon``: the claim is violated.
    power : float
        What the same number of evaluation runs certifies for the ideal mechanism with the
        claimed (ε, δ) exactly; the most this audit could have shown for a correct mechanism.
    runs : int
        Runs per dataset (selection and evaluation together).
    statistic : str
        The statistic chosen on the selection runs.
    threshold : float
        Its threshold; ``upper`` says whether the event is ``s > threshold``; ``swap`` whether
        the neighbour was put first.
    counts : tuple of int
        Hits of the event among the evaluation runs (first dataset, second dataset, in test
        order) and the number of evaluation runs per dataset.
    confidence : float
        The per-cell level of ``epsilon_lower``; :meth:`epsilon_lower_at` gives the bound of
        the same test at another level, :attr:`p_value` the p-value of the claim.
    description : str
        The neighbouring datasets audited.
    """

    epsilon: float
    delta: float
    epsilon_lower: float
    power: float
    runs: int
    statistic: str
    threshold: float
    upper: bool
    swap: bool
    counts: tuple[int, int, int]
    confidence: float
    description: str

    def __str__(self) -> str:
        return (f"claimed eps={self.epsilon:g} (delta={self.delta:g}): eps_lower="
                f"{self.epsilon_lower:.3f}, power={self.power:.3f}, runs={self.runs} "
                f"[{self._verdict}; statistic {self.statistic}]")


def _is_estimator(obj: Any) -> bool:
    return hasattr(obj, "fit") and hasattr(obj, "get_params")


def _run_states(random_state: Any, runs: int) -> list[Any]:
    """One independent random_state per run: fresh entropy (None) or children of the seed."""
    if random_state is None:
        return [None] * runs
    if secure_mode():
        raise ValueError("Secure mode refuses random_state: audit with random_state=None.")
    if isinstance(random_state, np.random.Generator):
        return list(random_state.spawn(runs))
    seq = (random_state if isinstance(random_state, np.random.SeedSequence)
           else np.random.SeedSequence(int(random_state)))
    return [np.random.default_rng(s) for s in seq.spawn(runs)]


def _callable_rng(random_state: Any) -> np.random.Generator:

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ReproducibleNoiseWarning)
        if isinstance(random_state, int | np.integer) and not isinstance(random_state, bool):
            return np.random.default_rng(np.random.SeedSequence(int(random_state)))
        return check_random_state(random_state)


def _progress(iterable: Any, total: int, show: bool, desc: str) -> Any:
    if not show:
        return iterable
    from tqdm.auto import tqdm

    return tqdm(iterable, total=total, desc=desc, leave=False)


def _sample_callable(fn: Callable[..., Any], X: Any, rng: np.random.Generator, runs: int,
                     progress: bool, desc: str) -> NDArray[np.float64]:
    params = inspect.signature(fn).parameters
    if "runs" in params:  # vectorised: one call returns (runs, ...) releases
        out = np.asarray(fn(X, rng, runs=runs), dtype=np.float64)
        return out.reshape(runs, -1)
    rows = [np.asarray(fn(X, rng), dtype=np.float64).ravel()
            for _ in _progress(range(runs), runs, progress, desc)]
    return np.vstack(rows)


def _fit_runs(est: Any, X: NDArray[np.float64], states: list[Any], progress: bool,
              desc: str) -> Iterator[Any]:
    """One fitted clone of ``est`` per state (a throw-away ledger each)."""
    from sklearn.base import clone


    names = est.get_params(deep=False)
    for state in _progress(states, len(states), progress, desc):
        run = clone(est)
        params: dict[str, Any] = {"random_state": state}
        if "ledger" in names:  # a throw-away ledger: the runs are not the user's spend
            params["ledger"] = PrivacyLedger()
        run.set_params(**params)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # clipping, seeded-noise: expected in an audit
            run.fit(X)
        yield run


def _sample_estimator(est: Any, X: NDArray[np.float64], record: NDArray[np.float64],
                      other: NDArray[np.float64] | None, states: list[Any], progress: bool,
                      desc: str) -> NDArray[np.float64]:
    return np.vstack([release_features(run, record, other)
                      for run in _fit_runs(est, X, states, progress, desc)])


@dataclass(frozen=True)
class _EstimatorSetup:
    """An estimator set to the claim (and the built-in neighbours' parameters), the two
    datasets, the records that differ and a description."""

    estimator: Any
    X: NDArray[np.float64]
    X_neighbour: NDArray[np.float64]
    record: NDArray[np.float64]
    other: NDArray[np.float64] | None
    description: str


def _estimator_setup(mechanism: Any, X: ArrayLike | None, X_neighbour: ArrayLike | None,
                     epsilon: float, delta: float, setting: str) -> _EstimatorSetup:
    from sklearn.base import clone

    names = mechanism.get_params(deep=False)
    claim = {k: v for k, v in (("epsilon", epsilon), ("delta", delta)) if k in names}
    est = clone(mechanism).set_params(**claim)
    if X is None:
        nb = builtin_neighbours(est, setting)
        est = est.set_params(**nb.params)
        return _EstimatorSetup(est, nb.X, nb.X_neighbour, nb.record, nb.other, nb.description)
    if X_neighbour is None:
        raise ValueError("X_neighbour is required when X is given.")
    X0 = np.asarray(X, dtype=np.float64)
    X1 = np.asarray(X_neighbour, dtype=np.float64)
    rec, oth = _differing_records(X0, X1)
    return _EstimatorSetup(est, X0, X1, rec, oth, "user-supplied neighbours")


def _candidates(F0: NDArray[np.float64], F1: NDArray[np.float64], n_sel: int
                ) -> list[tuple[str, NDArray[np.float64], NDArray[np.float64]]]:
    """Candidate scalar statistics (name, values on dataset 0, values on dataset 1).

    Which candidates exist is decided on the first ``n_sel`` (selection) runs only: a column
    constant there, or non-finite there, is dropped whatever the evaluation runs hold.
    """
    out = []
    m = F0.shape[1]
    S0, S1 = F0[:n_sel], F1[:n_sel]
    for j in range(m):
        if np.ptp(S0[:, j]) > 0 or np.ptp(S1[:, j]) > 0 or S0[0, j] != S1[0, j]:
            out.append((f"output[{j}]", F0[:, j], F1[:, j]))
    finite = np.all(np.isfinite(S0), axis=0) & np.all(np.isfinite(S1), axis=0)
    F0, F1 = F0[:, finite], F1[:, finite]  # e.g. a NaN variance some estimators release
    m = F0.shape[1]
    if m > 1:
        # Fisher's discriminant, fitted on the selection runs only.
        S0, S1 = F0[:n_sel], F1[:n_sel]
        cov = np.cov(S0, rowvar=False) + np.cov(S1, rowvar=False)
        cov += 1e-9 * (np.trace(cov) / m + 1e-300) * np.eye(m)
        w = np.linalg.lstsq(cov, S0.mean(axis=0) - S1.mean(axis=0), rcond=None)[0]
        if np.all(np.isfinite(w)) and np.any(w != 0):
            out.append(("fisher", F0 @ w, F1 @ w))
        out.append(("squared norm", np.einsum("ij,ij->i", F0, F0),
                    np.einsum("ij,ij->i", F1, F1)))
    return out


def audit(
    mechanism: Any,
    X: ArrayLike | None = None,
    X_neighbour: ArrayLike | None = None,
    *,
    epsilon: float,
    delta: float,
    runs: int,
    random_state: Any = None,
    setting: str = "paper",
    confidence: float = 0.95,
    selection_fraction: float = 0.3,
    progress: bool = False,
) -> AuditReport:
    """Lower-bound the ε of ``mechanism`` on two neighbouring datasets from ``runs`` runs each.

    Parameters
    ----------
    mechanism : estimator or callable
        A privpca estimator, audited at the claimed ``epsilon`` and ``delta`` (set on a
        clone), cloned again and fitted on each run with a throw-away ledger; its
        released components, variances and mean are tested, see
        :func:`~privpca.audit.neighbours.release_features`), or a callable
        ``(X, rng) -> ndarray`` returning one release. A callable that takes a keyword
        ``runs`` is called once as ``mechanism(X, rng, runs=runs)`` and must return
        ``runs`` releases stacked along axis 0 (vectorised: much faster).
    X, X_neighbour : array-like, optional
        The neighbouring datasets. Omitted for an estimator: its built-in worst case in
        ``setting`` (:func:`~privpca.audit.neighbours.builtin_neighbours`). Required for a
        callable (passed to it as given).
    epsilon, delta : float
        The claimed privacy, δ used in the bound.
    runs : int
        Runs per dataset; ``selection_fraction`` of them choose the test, the rest prove.
    random_state : None, int, SeedSequence or Generator, default=None
        Seeds the runs (reproducible audits). None (required in secure mode) uses fresh
        entropy in every run.
    setting : {"paper", "release"}, default="paper"
        Which built-in neighbours (estimators without ``X`` only).
    confidence : float, default=0.95
        Probability with which ``epsilon_lower`` is a valid lower bound.
    selection_fraction : float, default=0.3
        Share of the runs that choose the test (the rest prove the bound).
    progress : bool, default=False
        A tqdm progress bar over the runs (non-vectorised mechanisms).

    Returns
    -------
    AuditReport

    Examples
    --------
    >>> import numpy as np
    >>> from privpca.audit import audit
    >>> from privpca.mechanisms import analytic_gaussian_sigma
    >>> sigma = analytic_gaussian_sigma(1.0, 1e-5)
    >>> def gaussian_sum(X, rng, runs):
    ...     return X.sum() + sigma * rng.standard_normal(runs)
    >>> report = audit(gaussian_sum, np.array([[0.0]]), np.array([[1.0]]),
    ...                epsilon=1.0, delta=1e-5, runs=20_000)
    >>> report.epsilon_lower <= 1.0
    True
    """
    runs = int(runs)
    if runs < 20:
        raise ValueError(f"runs must be at least 20. Got {runs} instead.")
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1). Got {confidence!r} instead.")
    if not 0.0 < selection_fraction < 1.0:
        raise ValueError(f"selection_fraction must be in (0, 1). Got {selection_fraction!r}.")
    epsilon = float(epsilon)
    delta = float(delta)
    n_sel = max(1, min(runs - 1, round(selection_fraction * runs)))
    n_eval = runs - n_sel
    if _is_estimator(mechanism):
        su = _estimator_setup(mechanism, X, X_neighbour, epsilon, delta, setting)
        states = _run_states(random_state, 2 * runs)
        name = type(su.estimator).__name__
        F0 = _sample_estimator(su.estimator, su.X, su.record, su.other, states[:runs], progress,
                               f"{name} on X")
        F1 = _sample_estimator(su.estimator, su.X_neighbour, su.record, su.other,
                               states[runs:], progress, f"{name} on X'")
        desc = su.description
    elif callable(mechanism):
        if X is None or X_neighbour is None:
            raise ValueError("A callable mechanism needs X and X_neighbour.")
        if secure_mode() and random_state is not None:
            raise ValueError("Secure mode refuses random_state: audit with random_state=None.")
        rng = _callable_rng(random_state)
        F0 = _sample_callable(mechanism, X, rng, runs, progress, "runs on X")
        F1 = _sample_callable(mechanism, X_neighbour, rng, runs, progress, "runs on X'")
        desc = "user-supplied neighbours"
    else:
        raise TypeError(f"mechanism must be an estimator or a callable. Got {mechanism!r}.")
    return _decide(F0, F1, n_sel, n_eval, epsilon, delta, confidence, runs, desc)


def _differing_records(X0: NDArray[np.float64], X1: NDArray[np.float64]
                       ) -> tuple[NDArray[np.float64], NDArray[np.float64] | None]:
    """The record that differs: (x, x') under replacement, (x, None) under add/remove."""
    if X0.shape == X1.shape:
        diff = X0 - X1
        i = int(np.argmax(np.einsum("ij,ij->i", diff, diff)))
        return X0[i], X1[i]
    big, small = (X0, X1) if len(X0) > len(X1) else (X1, X0)
    extra = [r for r in big if not any(np.array_equal(r, s) for s in small)]
    return (extra[0] if extra else big[-1]), None


def _decide(F0: NDArray[np.float64], F1: NDArray[np.float64], n_sel: int, n_eval: int,
            epsilon: float, delta: float, confidence: float, runs: int,
            desc: str) -> AuditReport:
    best: tuple[float, Any, str, NDArray[np.float64], NDArray[np.float64]] | None = None
    for name, s0, s1 in _candidates(F0, F1, n_sel):
        if not (np.all(np.isfinite(s0[:n_sel])) and np.all(np.isfinite(s1[:n_sel]))):
            continue  # decided on the selection runs; a NaN later never hits the event
        score, test = best_threshold(s0[:n_sel], s1[:n_sel], delta,
                                     max(confidence, SELECTION_CONFIDENCE))
        if best is None or score > best[0]:
            best = (score, test, name, s0, s1)
    power = ideal_power(epsilon, delta, n_eval, confidence)
    if best is None:
        return AuditReport(epsilon, delta, 0.0, power, runs, "none", math.nan, True, False,
                           (0, 0, n_eval), confidence, desc)
    _, test, name, s0, s1 = best
    k0, k1 = test.counts(s0[n_sel:], s1[n_sel:])
    eps_lower = float(epsilon_bound(k0, n_eval, k1, n_eval, delta, confidence))
    return AuditReport(epsilon, delta, eps_lower, power, runs, name, test.threshold, test.upper,
                       test.swap, (k0, k1, n_eval), confidence, desc)
