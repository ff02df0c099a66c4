"""FMT's amplification by shuffling: the closed form (Thm 3.8) against the numerical bound.

For n ∈ {10⁴, 10⁵, 10⁶} shuffled ε₀-DP local randomisers, ε₀ ∈ {0.5, 1, 2, 4, 6} and
δ′ = 10⁻⁶, prints the central ε of each bound (``—`` where the closed form's condition
``ε₀ ≤ ln(n/(16 ln(4/δ′)))`` fails), their ratio, and the seconds each took; then the time of
the inversion :func:`~privpca.mechanisms.shuffling.local_epsilon_for_shuffling` at ε = 1.

    python benchmarks/shuffling_bounds.py
"""

from __future__ import annotations

import time
from collections.abc import Callable

from privpca.mechanisms.shuffling import (
    ShufflingBoundError,
    closed_form_shuffled_epsilon,
    local_epsilon_for_shuffling,
    numerical_shuffled_epsilon,
)

NS = (10**4, 10**5, 10**6)
EPS0 = (0.5, 1.0, 2.0, 4.0, 6.0)
DELTA = 1e-6


def _timed(bound: Callable[[float, int, float], float], eps0: float,
           n: int) -> tuple[float | None, float]:
    start = time.perf_counter()
    try:
        value: float | None = bound(eps0, n, DELTA)
    except ShufflingBoundError:
        value = None
    return value, time.perf_counter() - start


def main() -> None:
    print(f"delta' = {DELTA:g}")
    print(f"{'n':>9} {'eps0':>5} {'closed form':>12} {'s':>7} {'numerical':>10} {'s':>7} "
          f"{'ratio':>6}")
    for n in NS:
        for eps0 in EPS0:
            closed, t_closed = _timed(closed_form_shuffled_epsilon, eps0, n)
            numerical, t_num = _timed(numerical_shuffled_epsilon, eps0, n)
            assert numerical is not None
            shown = "—" if closed is None else f"{closed:.4f}"
            ratio = "" if closed is None else f"{closed / numerical:.2f}"
            print(f"{n:>9} {eps0:>5g} {shown:>12} {t_closed:>7.0e} {numerical:>10.4f} "
                  f"{t_num:>7.3f} {ratio:>6}")
    print("\nInversion at epsilon = 1, delta = 1e-6 (delta' = delta/2):")
    for n in NS:
        start = time.perf_counter()
        g = local_epsilon_for_shuffling(1.0, 1e-6, n)
        print(f"  n={n:>7}: eps0 = {g.epsilon0:.4f} ({g.bound}), "
              f"{time.perf_counter() - start:.3f} s")


if __name__ == "__main__":
    main()
