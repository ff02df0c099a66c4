"""DP-PCA's calibration and learning-rate search: batches, both mechanisms, the record.

Everything here is fixed from public quantities before the data are read, except
:meth:`DPPCACalibration._search`, which runs the candidates' fits and the private choice
among them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import dp_accounting
import numpy as np
from numpy.typing import NDArray

from privpca._validation import check_n_components
from privpca.accounting.calibration import laplace_scale
from privpca.accounting.neighbouring import Neighbouring
from privpca.accounting.record import PrivacyRecord, PrivacySpend
from privpca.decomposition._dppca_steps import _captured, _Plan, _run
from privpca.decomposition._stochastic import StochasticPCA
from privpca.mechanisms.gradient_statistics import PrivateMean, PrivateTopEigenvalue
from privpca.mechanisms.noise import laplace_release
from privpca.solvers.oja import GradientSource, LearningRate, resolve_learning_rate

__all__ = [
    "DEFAULT_LEARNING_RATE",
    "DEFAULT_SEARCH_GRID",
    "RESOLVING_SUBSET_SIZE",
    "SUBSET_SPREAD",
    "DPPCACalibration",
]


#: s₀: the fullest √2-wide bin of Algorithm 4's subset eigenvalues, s pair differences each,
#: holds about √(s/s₀) of them. Measured on the gradients of Gaussian tables and Covertype
#: (random and top W): 12–23 % at s = 8, 19–26 % at 16, 27–34 % at 32, 33–41 % at 64; 500
#: is near the lower edge.
SUBSET_SPREAD = 500.0
#: Pair differences per subset of the smallest batch whose Algorithm 4 is expected to release
#: (``batch_size="auto"``): 16, where the fullest bin held 19–26 %.
RESOLVING_SUBSET_SIZE = 16

DEFAULT_LEARNING_RATE = LearningRate(c1=16.0, c2=0.0)
#: (c1, c2) candidates of the private learning-rate search (powers of 2 around the default).
DEFAULT_SEARCH_GRID: tuple[tuple[float, float], ...] = (
    (4.0, 0.0),
    (16.0, 0.0),
    (64.0, 0.0),
    (16.0, 8.0),
)


@dataclass(frozen=True)
class _Setup:
    """A validated, calibrated DP-PCA run (fixed learning rate or the search), before data."""

    plan: _Plan
    lr: LearningRate | None
    candidates: tuple[LearningRate, ...]
    n_validation: int
    per_candidate: int
    search: dict[str, Any] | None


class DPPCACalibration(StochasticPCA):
    """DP-PCA's planning steps (:class:`~privpca.decomposition.dp_pca.DPPCA` reads its
    parameters through them): the calibrated run, its record and the learning-rate search."""

    def _step_plan(self, n: int, q: int, *, what: str = "n_samples") -> _Plan:
        """Calibrate both mechanisms and size the batches for ``n`` records, q coordinates."""
        # Each parameter was checked against its declaration (_parameter_constraints).
        epsilon, delta = float(self.epsilon), float(self.delta)
        eps_call, delta_call = ((epsilon, delta) if self.budget_split == "parallel"
                                else (epsilon / 2, delta / 2))
        if isinstance(self.n_subsets, str) and self.n_subsets == "auto":
            eigen = PrivateTopEigenvalue.calibrate(
                eps_call, delta_call, subsets_factor=self.subsets_factor
            )
        else:
            eigen = PrivateTopEigenvalue.calibrate(eps_call, delta_call,
                                                   n_subsets=int(self.n_subsets))
        mean = PrivateMean.calibrate(
            eps_call,
            delta_call,
            q,
            centre_fraction=self.centre_fraction, bin_width=self.bin_width,
            radius=self.truncation_radius, zeta=self.zeta,
        )
        s_min = int(self.min_subset_size)
        minimum = 2 * eigen.min_gradients() * s_min
        auto = isinstance(self.n_subsets, str)
        # "auto": the fullest bin should hold τ + 3 noise scales (n_subsets' docstring).
        need = eigen.histogram.threshold + 3.0 * eigen.histogram.scale
        resolvable = 4 * math.ceil(need * math.sqrt(SUBSET_SPREAD * RESOLVING_SUBSET_SIZE))
        if isinstance(self.batch_size, str) and self.batch_size == "auto":
            B = max(int(self.batch_constant * n / math.log(max(n, 3)) ** 2), minimum)
            if auto and B < resolvable <= n:  # raised, then spread over all the records
                B = n // (n // resolvable)
        else:
            B = int(self.batch_size)
            if B < minimum:
                raise ValueError(
                    f"batch_size={B} is too small for n_subsets={self.n_subsets} and "
                    f"min_subset_size={s_min}: Algorithm 4 needs at least {minimum} records "
                    "per step (its half-batch gives each subset min_subset_size pair "
                    "differences)."
                )
        if auto and B >= resolvable:  # the subsets a release needs (≥ 16 pairs each)
            m = math.ceil(SUBSET_SPREAD * need**2 / (B // 4))
            eigen = PrivateTopEigenvalue(eigen.histogram, max(eigen.n_subsets, m))
        if n < B:
            raise ValueError(
                f"DPPCA needs at least one minibatch of {B} records at epsilon={epsilon:g}, "
                f"delta={delta:g} (Algorithm 4 uses {eigen.n_subsets} subsets, each fed by pair "
                f"differences); got {what}={n}. Use more data, a larger epsilon or delta, "
                "or set n_subsets and batch_size explicitly."
            )
        return _Plan(B, n // B, eigen, mean, eps_call, delta_call, resolvable)

    def _setup(self, n: int, p: int, *, what: str = "n_samples") -> _Setup:
        """Validate and calibrate for a stream of ``n`` records (public: no data read)."""
        k = check_n_components(self.n_components, p, owner=self)
        if isinstance(self.learning_rate, str) and self.learning_rate == "search":
            grid = DEFAULT_SEARCH_GRID if self.search_grid is None else tuple(self.search_grid)
            if len(grid) < 2:
                raise ValueError("search_grid needs at least two (c1, c2) candidates.")
            candidates = tuple(resolve_learning_rate(c, DEFAULT_LEARNING_RATE, owner="DPPCA")
                               for c in grid)
            n_val = max(int(self.search_fraction * n), 1)
            per = (n - n_val) // len(candidates)
            plan = self._step_plan(per, p * k, what=f"{what} per candidate")
            search = {"epsilon": plan.epsilon_call, "n_candidates": len(candidates),
                      "n_validation": n_val}
            return _Setup(plan, None, candidates, n_val, per, search)
        lr = resolve_learning_rate(self.learning_rate, DEFAULT_LEARNING_RATE, owner="DPPCA")
        return _Setup(self._step_plan(n, p * k, what=what), lr, (), 0, 0, None)

    def _record(self, plan: _Plan, n: int, search: dict[str, Any] | None) -> PrivacyRecord:
        eigen_event = plan.eigen.dp_event()
        mean_event = plan.mean.dp_event()
        tail = plan.eigen.histogram.tail + plan.mean.centre_histogram.tail
        events: list[dp_accounting.DpEvent] = [eigen_event, mean_event]
        notes = (
            f"T={plan.n_steps} steps of B={plan.batch_size} records; each record enters one "
            f"call: Algorithm 4 (Laplace stability histogram of {plan.eigen.n_subsets} subset "
            f"eigenvalues) or Algorithm 5 ({plan.mean.n_coordinates} Gaussian centre "
            f"histograms + Gaussian mean with multiplier {plan.mean.noise_multiplier:.4g} on "
            "a box sized by the released eigenvalue), each "
            f"({plan.epsilon_call:.4g}, {plan.delta_call:.3g})-DP; parallel composition over "
            "disjoint records gives the overall guarantee. Data norms are not bounded: the "
            "sensitivity of each mean is the diameter of its box over the half-batch size "
            "(history_['noise_scale'] holds the noise actually used)."
        )
        epsilon, delta = plan.epsilon_call, plan.delta_call
        if search is not None:
            events.append(_selection_event(search["epsilon"]))
            notes += (
                f" Learning-rate search: {search['n_candidates']} candidates on disjoint "
                f"parts of the data, selected by report-noisy-max "
                f"(Laplace on vote counts, {search['epsilon']:.4g}-DP) on "
                f"{search['n_validation']} held-out records; still parallel composition."
            )
        spend = PrivacySpend(
            mechanism="DP-PCA minibatch step (Alg. 4 or Alg. 5 per record)",
            epsilon=epsilon,
            delta=delta,
            sensitivity=math.nan,
            noise_scale=math.nan,
            dp_event=dp_accounting.ComposedDpEvent(events),
            tail=tail,
        )
        target = float(self.epsilon)
        if self.budget_split == "paper":
            notes += (
                " budget_split='paper' gives each call (epsilon/2, delta/2) as Algorithm 3 "
                "prints; since each record enters one call, that certifies (epsilon/2, "
                "delta/2)."
            )
        return PrivacyRecord(
            epsilon=epsilon,
            delta=delta,
            model="central",
            neighbouring=Neighbouring.REPLACE_ONE_CENTRAL.description,
            sensitivity=math.nan,
            noise_scale=math.nan,
            calibration="adaptive: stability histograms + analytic Gaussian (dp-accounting)",
            data_norm=math.inf,
            n_samples=int(n),
            spends=(spend,),
            target_epsilon=target,
            notes=notes,
        )

    # ------------------------------------------------------------------ learning-rate search
    def _search(
        self,
        source: GradientSource,
        rng: np.random.Generator,
        W0: NDArray[np.float64],
        order: NDArray[np.intp],
        setup: _Setup,
        fallback: float | None = None,
    ) -> tuple[NDArray[np.float64], dict[str, Any], LearningRate]:
        """Liu et al. §5: private choice of (c1, c2) among ``search_grid``.

        The records (in random order) are split into a held-out part (``search_fraction``)
        and one disjoint part per candidate. Each candidate runs DP-PCA on its own part
        ((ε, δ)-DP for those records). Every held-out record votes for the candidate whose
        subspace captures most of it (``‖Wᵀx‖²``, or ``tr(WᵀAW)``); report-noisy-max picks the
        output: Laplace(2/ε) on each count, then argmax. Replacing a record moves one vote
        (two counts change by 1), so the noisy counts are ε-DP
        (``SelfComposedDpEvent(LaplaceDpEvent(2/ε), 2)``) and the argmax is post-processing.
        Records are in exactly one part, so the whole search is (ε, δ)-DP. Its price is in
        data: each candidate sees ``(1 − search_fraction)/len(grid)`` of the records.

        Only the choice is released, never the noisy counts: a Laplace draw in floating point
        is not the real Laplace law, and its low-order bits can reveal the count it was added
        to (Mironov 2012; on this mechanism a neighbouring count is excluded with certainty
        in most fits). The index of the largest noisy count is a function of the counts'
        order only, whose probabilities floating point moves by rounding-level amounts.
        """
        plan, candidates = setup.plan, setup.candidates
        n_val, per = setup.n_validation, setup.per_candidate
        epsilon = plan.epsilon_call
        fits = []
        for j, lr in enumerate(candidates):
            part = order[n_val + j * per : n_val + (j + 1) * per]
            W, history = _run(source, part, W0, lr, plan, rng, keep=bool(self.keep_history),
                              fallback=fallback)
            fits.append((W, history))
        val = order[:n_val]
        captured = np.stack([_captured(source, val, W) for W, _ in fits], axis=1)
        votes = np.bincount(np.argmax(captured, axis=1), minlength=len(candidates))
        # Report-noisy-max: Laplace(2/ε) on every vote count, then argmax (post-processing).
        noisy = laplace_release(votes, laplace_scale(epsilon, 2.0), rng, sensitivity=2.0,
                                integer_valued=True)
        best = int(np.argmax(noisy))
        del noisy  # released: the choice alone (docstring)
        W, history = fits[best]
        return W, history, candidates[best]


def _selection_event(epsilon: float) -> dp_accounting.DpEvent:
    """Laplace(2/ε) on vote counts of which a replacement changes two by one each."""
    return dp_accounting.SelfComposedDpEvent(
        dp_accounting.LaplaceDpEvent(laplace_scale(epsilon, 2.0)), 2)
