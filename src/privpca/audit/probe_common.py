"""What the float and lattice probes share: the runs of a callable mechanism, the
selection/evaluation split, the classifier at a fixed threshold and the ε bound of the chosen
test on the evaluation runs."""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from privpca._config import secure_mode
from privpca.audit._bounds import ThresholdTest, epsilon_bound
from privpca.audit.core import _callable_rng, _sample_callable


def _probe_mode(random_state: Any) -> str:
    """``"secure"`` or ``"default"``, the mode in force; secure mode refuses a seed."""
    if secure_mode() and random_state is not None:
        raise ValueError("Secure mode refuses random_state: probe with random_state=None.")
    return "secure" if secure_mode() else "default"


def _callable_runs(mechanism: Any, X: ArrayLike | None, X_neighbour: ArrayLike | None,
                   random_state: Any, runs: int, progress: bool) -> tuple[Any, Any]:
    """``runs`` outputs of a callable ``(X, rng) -> release`` on each neighbour."""
    if not callable(mechanism):
        raise TypeError(f"mechanism must be an estimator or a callable. Got {mechanism!r}.")
    if X is None or X_neighbour is None:
        raise ValueError("A callable mechanism needs X and X_neighbour.")
    rng = _callable_rng(random_state)
    O0 = _sample_callable(mechanism, X, rng, runs, progress, "runs on X")
    O1 = _sample_callable(mechanism, X_neighbour, rng, runs, progress, "runs on X'")
    return O0, O1


def _check_split(runs: int, confidence: float, selection_fraction: float) -> None:
    if runs < 20:
        raise ValueError(f"runs must be at least 20. Got {runs} instead.")
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1). Got {confidence!r} instead.")
    if not 0.0 < selection_fraction < 1.0:
        raise ValueError(f"selection_fraction must be in (0, 1). Got {selection_fraction!r}.")


def _zero_tests(a0: ArrayLike, a1: ArrayLike, n: int, delta: float, level: float
                ) -> list[tuple[NDArray[np.float64], ThresholdTest]]:
    """The classifier at threshold 0 in its four orientations, from its selection hits
    ``a0 = #{s > 0}`` on D and ``a1`` on D' (vectorised over candidates): ``s > 0`` or its
    complement ``s ≤ 0`` (ties count as "not D"), either neighbour first."""
    k0, k1 = np.asarray(a0), np.asarray(a1)
    return [
        (epsilon_bound(k0, n, k1, n, delta, level), ThresholdTest(0.0, True, False)),
        (epsilon_bound(k1, n, k0, n, delta, level), ThresholdTest(0.0, True, True)),
        (epsilon_bound(n - k1, n, n - k0, n, delta, level), ThresholdTest(0.0, False, True)),
        (epsilon_bound(n - k0, n, n - k1, n, delta, level), ThresholdTest(0.0, False, False)),
    ]


def _fixed_test(a0: int, a1: int, n: int, delta: float, level: float, threshold: float = 0.0
                ) -> tuple[float, ThresholdTest]:
    """The best orientation of the classifier at ``threshold``, from its selection hits
    ``a0 = #{s > threshold}`` on D and ``a1`` on D' (as :func:`_zero_tests`)."""
    eps, test = max(((float(e), t) for e, t in _zero_tests(a0, a1, n, delta, level)),
                    key=lambda o: o[0])
    return eps, ThresholdTest(threshold, test.upper, test.swap)


def _evaluate(test: ThresholdTest, e0: NDArray[np.float64], e1: NDArray[np.float64],
              n_eval: int, delta: float, confidence: float) -> tuple[int, int, float, float]:
    """The chosen test on the evaluation runs: its hits ``k0, k1``, the ε it proves at
    ``confidence`` and its balanced accuracy as a classifier."""
    k0, k1 = test.counts(e0, e1)
    eps_lower = float(epsilon_bound(k0, n_eval, k1, n_eval, delta, confidence))
    accuracy = (k0 + n_eval - k1) / (2.0 * n_eval)
    return k0, k1, eps_lower, accuracy
