"""DPS-PCA's answers under secure aggregation: each provider adds a share of one noise draw.

With ``aggregation="secure"`` a provider does not add its own full noise to its answer: it
encodes the exact answer on a public grid, adds its share of a distributed discrete Gaussian
(:class:`~privpca.mechanisms.distributed_gaussian.DistributedGaussianPlan`) and sends the
residues modulo ``2^b`` through SecAgg (:mod:`privpca.federated.secure`), so the server
opens only the sum over the surviving providers. That sum carries the noise of **one**
central release, so the error stops growing with the number of providers.

Privacy (replace one record of one provider; nᵢ public)
-------------------------------------------------------
A record moves one provider's exact answer by at most Δ (the same Δ(D, k) for the power answers
and √2·D² for the variances as today, with one public D for every provider), so the opened sum
is the central Gaussian mechanism of the summed answer. Each share is sized for the agreed
``min_providers`` m and ``colluders`` t: any m − t honest shares carry at least the central
noise σ' (the rounding covered), more survivors only add noise. The sum of independent discrete
Gaussians ``N_ℤ(0, s²)`` is, by Poisson summation, the discrete Gaussian ``N_ℤ(0, ns²)`` times
a factor within ``1 ± η``, ``η = Σ_{w ≠ 0} exp(−2π²s²‖w‖²)`` over the dual lattice of ``{x ∈ ℤⁿ
: Σx = 0}`` (every ``‖w‖² ≥ 1/2``). The shares have ``s ≥ 2^GRID_BITS = 2³⁰``, so η is below
``exp(−10¹⁸)`` for any n ≤ 10⁶ and the sum's privacy curve is the discrete Gaussian's up to an
ε-shift of ``2 ln((1+η)/(1−η))``, 0 in float64; and the discrete Gaussian's curve is the
continuous one's to a relative error ``e^(−2π²ns²)`` (Canonne, Kamath & Steinke 2020), the
argument the library's secure mode already rests on. Every part is therefore accounted as the
central Gaussian it equals: the fit's record is the one budget plan at (ε, δ), against the
server that sees only the opened sums. KLS 2021's RDP bound
(:meth:`~privpca.mechanisms.distributed_gaussian.DistributedGaussianPlan.rho`) is the cross-
check. With j colluding providers the honest noise is ``(m − j)/(m − t)`` of the variance:
:func:`collusion_epsilons` composes every part at that scale.

What a secure run releases
--------------------------
Every provider answer is a share: the power answers and the variances, and, where the local-
noise protocol has each provider search its own quantiles, the counts of the same noisy
bisection on the union of the rows (:func:`secure_preparation`: the server picks each edge
from the opened counts, as :class:`~privpca.mechanisms.quantile.PrivateQuantile` does) and
the mean rounds' clipped sums. Streamed providers are refused with private centring or an
``"auto"`` bound (their count passes are not written yet).
"""

from __future__ import annotations

import math
from collections.abc import Generator, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from privpca.federated.protocol.agreement import MEAN_PARTS
from privpca.federated.protocol.messages import CountQuery, Reply, SumQuery, VarianceReply
from privpca.mechanisms.distributed_gaussian import DistributedGaussianPlan
from privpca.mechanisms.quantile import PrivateQuantile
from privpca.pipeline.settings import DEFAULT_NORM_QUANTILE

__all__ = [
    "OpenedSum",
    "SecureAgreement",
    "ShareReply",
    "collusion_epsilons",
    "combine_replies",
    "default_min_providers",
    "open_sum",
    "secure_agreement",
    "secure_notes",
    "secure_preparation",
]

#: The provider id of an opened sum, as the server sees it.
SUM_ID = "secure sum"

def secure_agreement(aggregation: str, centering: Any, data_norm: Any,
                     min_providers: int | None, colluders: int,
                     row_counts: Sequence[int], streamed: bool = False
                     ) -> SecureAgreement | None:
    """The public agreement of a secure run (None for ``"local-noise"``), refused before
    anything is charged when this version cannot honour it."""
    if aggregation != "secure":
        if min_providers is not None or colluders:
            raise ValueError(
                "min_providers and colluders size the noise shares of aggregation='secure'; "
                "with 'local-noise' every provider adds its own full noise, which protects it "
                "whoever drops out or colludes: leave them at None and 0, or choose "
                "aggregation='secure'.")
        return None
    from privpca.federated.protocol.provider_checks import check_secure

    check_secure("(every)", True, centering, data_norm, streamed)
    N = len(row_counts)
    m = default_min_providers(N) if min_providers is None else int(min_providers)
    return SecureAgreement(N, m, int(colluders), max(int(n) for n in row_counts),
                           sum(int(n) for n in row_counts))


def default_min_providers(n_providers: int) -> int:
    """N: every provider must answer, and the opened sum carries exactly one central noise.

    Tolerating dropouts costs accuracy: shares sized for m < N survivors put ``N/m`` times
    the central variance in the sum when all answer (std ×1.12 at m = 0.8N), so it is the
    caller's choice (``min_providers``), not the default.
    """
    return int(n_providers)


@dataclass(frozen=True)
class SecureAgreement:
    """What the providers and the server agree to before a secure run (all public).

    Parameters
    ----------
    n_providers : int
        N ≥ 2, the providers in the run.
    min_providers : int
        m, the fewest survivors whose sum may be opened (a strict majority of N, ≥ 2): each
        noise share is sized so that m − t honest shares carry one central release's noise.
    colluders : int
        t with 0 ≤ t < m − 1: providers that may pool what they know with the server; the
        guarantee (ε, δ) is stated against the server plus t of them.
    max_rows : int
        The largest nᵢ: it bounds every answer's coordinates (``nᵢ·D²``) for the bit width.
    total_rows : int
        Σ nᵢ: the budget plan and the searches are the central ones over the union.
    """

    n_providers: int
    min_providers: int
    colluders: int
    max_rows: int
    total_rows: int

    def __post_init__(self) -> None:
        N, m, t = self.n_providers, self.min_providers, self.colluders
        if N < 2:
            raise ValueError("Secure aggregation needs at least 2 providers: the 'sum' of one "
                             "provider is its own answer. Use aggregation='local-noise'.")
        if not N // 2 + 1 <= m <= N:
            raise ValueError(f"min_providers must be a strict majority of the {N} providers "
                             f"(from {N // 2 + 1} to {N}): SecAgg's secret sharing needs it. "
                             f"Got {m}.")
        if not 0 <= t < m - 1:
            raise ValueError(f"colluders must be from 0 to min_providers - 2 = {m - 2} (the "
                             f"sum must keep at least two honest shares). Got {t}.")

    def noise_plan(self, central_sigma: float, sensitivity: float, coordinates: int,
                   per_row: float) -> DistributedGaussianPlan:
        """The public plan of one release: shares for m − t, each answer's coordinates
        bounded by ``max_rows·per_row`` (``D²`` for a Gram product or a variance, ``R`` for a
        clipped sum, 1 for a count)."""
        bound = self.max_rows * per_row * (1.0 + 1e-9)
        return DistributedGaussianPlan(
            central_sigma=central_sigma, sensitivity=sensitivity, coordinates=coordinates,
            min_providers=self.min_providers, colluders=self.colluders, value_bound=bound,
            max_providers=self.n_providers)


@dataclass(frozen=True)
class ShareReply:
    """One provider's encoded, noise-shared answer: residues modulo ``2^plan.bits``."""

    provider_id: str
    kind: str  # "query" (a power answer XᵢᵀXᵢQ) or "variance" (packed QᵀXᵢᵀXᵢQ, ‖Xᵢ‖²_F)
    round: int
    n_samples: int
    residues: NDArray[np.uint64]
    plan: DistributedGaussianPlan


def open_sum(replies: Sequence[ShareReply], *, round: int, session: str = "privpca",
             dropouts: Mapping[int, Iterable[str]] | None = None
             ) -> tuple[NDArray[np.float64], int, tuple[str, ...]]:
    """Sum the replies' answers by SecAgg and decode: ``(Σ answers + noise, Σ nᵢ, survivors)``.

    Raises
    ------
    SecureAggregationAborted
        Fewer than ``min_providers`` survived a stage: nothing is opened.
    ValueError
        Replies of different plans (the agreement is broken).
    """
    from privpca.federated.secure import run_secure_aggregation

    plan = replies[0].plan
    if any(r.plan != plan for r in replies):
        raise ValueError("The providers' noise plans differ: they did not agree on the same "
                         "public settings. Nothing was opened.")
    result = run_secure_aggregation(
        {r.provider_id: r.residues for r in replies}, plan.bits,
        min_providers=plan.min_providers, session=session, round=round, dropouts=dropouts)
    survivors = set(result.survivors)
    total = plan.decode(result.total, survivors=len(survivors))
    n = sum(r.n_samples for r in replies if r.provider_id in survivors)
    return total, n, tuple(sorted(survivors))


def combine_replies(replies: Sequence[Any], n_features: int, n_components: int, *,
                    session: str = "privpca",
                    dropouts: Mapping[int, Iterable[str]] | None = None) -> list[Any]:
    """One step's replies as the server combines them: share replies opened into one.

    Replies of the local-noise protocol pass through. Share replies are summed by
    :func:`open_sum` into a single ``Reply`` (``Σ answers/Σ nᵢ``, so the server's weighted
    mean ``Σ nᵢHᵢ/Σ nᵢ`` is the opened sum over Σ nᵢ) or ``VarianceReply``.
    """
    shared = [r for r in replies if isinstance(r, ShareReply)]
    if not shared:
        return list(replies)
    if len(shared) != len(replies) or len({(r.kind, r.round) for r in shared}) != 1:
        raise ValueError("A step's replies mix share replies with others (or steps): the "
                         "providers did not agree on the aggregation. Nothing was opened.")
    first = shared[0]
    total, n, _ = open_sum(shared, round=first.round, session=session, dropouts=dropouts)
    return [opened_reply(first.kind, first.round, n, total, n_features, n_components)]


def opened_reply(kind: str, round: int, n: int, total: NDArray[np.float64], n_features: int,
                 n_components: int) -> Any:
    """The one reply :class:`ServerState` receives for an opened sum: ``Σ answers/Σ nᵢ`` for
    a power round (so its weighted mean is the sum over Σ nᵢ), the summed variances and total,
    and the opened sum itself for any other step (counts, a mean round's sum)."""
    if kind == "variance":
        return VarianceReply(SUM_ID, n, total[:-1], float(total[-1]))
    if kind == "query":
        return Reply(SUM_ID, round, n, total.reshape(n_features, n_components) / n)
    return OpenedSum(kind, round, n, total)


def secure_notes(agreement: SecureAgreement, epsilon: float, delta: float,
                 by_colluders: Mapping[int, float]) -> str:
    """The record's statement of a secure fit's threat model and guarantees."""
    m, t, N = agreement.min_providers, agreement.colluders, agreement.n_providers
    worse = ", ".join(f"{j}: {eps:.3g}" for j, eps in by_colluders.items() if j > t)
    return (
        f"Secure aggregation: the server opened only sums over at least {m} of the {N} "
        "providers (SecAgg; Flower's key agreement, Shamir sharing and encryption, AES-CTR "
        "masks); each provider added a discrete Gaussian share sized so that any "
        f"{m - t} honest shares carry one central release's noise. Every record is "
        f"({epsilon:g}, {delta:g})-DP against the server"
        + (f" together with up to {t} colluding providers" if t else "")
        + ", provided SecAgg's honest-but-curious server model holds (the advertised keys "
        "are not signed). With more colluders the guarantee weakens (ε by colluders: "
        + (worse or "none beyond the agreed") + "). A sum with fewer than "
        f"{m} survivors is never opened."
    )


def collusion_epsilons(multipliers: Sequence[tuple[float, int]], delta: float,
                       agreement: SecureAgreement) -> dict[int, float]:
    """ε at δ of the whole fit against the server plus j colluders, j = 0..m − 2.

    ``multipliers``: (noise multiplier, count) of every part, the central calibration for
    the sized honest shares (m − t). With j colluders m − j honest shares remain, each part's
    multiplier scaled by ``√((m − j)/(m − t))``; composed exactly (dp-accounting).
    """
    import dp_accounting

    from privpca.accounting.composition import compose_epsilon

    m, t = agreement.min_providers, agreement.colluders
    out: dict[int, float] = {}
    for j in range(m - 1):
        factor = math.sqrt((m - j) / (m - t))
        events = [dp_accounting.SelfComposedDpEvent(
            dp_accounting.GaussianDpEvent(mult * factor), count) for mult, count in multipliers]
        out[j] = float(compose_epsilon(events, delta))
    return out


@dataclass(frozen=True)
class OpenedSum:
    """A secure step's opened sum as the server reads it (counts, or a mean round's sum)."""

    kind: str
    round: int
    n_samples: int
    total: NDArray[np.float64]


def secure_preparation(plan: Any, n_total: int, centering: Any, data_norm: Any,
                       n_features: int, units: NDArray[np.float64] | None = None
                       ) -> Generator[Any, OpenedSum, tuple[Any, float]]:
    """The server's side of a secure run's preparation, as a coroutine.

    It yields the messages (:class:`CountQuery` for each bisection round of a search,
    :class:`SumQuery` for a mean round's clipped sum) and is sent each opened sum; it returns
    the mean (None without centring) and the bound D. The searches are those a provider runs
    on its own rows in the local-noise protocol (:func:`private_norm_bound`'s bisection at the
    99 % quantile; the mean's two rounds), on the union of the providers' rows: the same
    budget parts at the same calibration, with ``n = Σ nᵢ``. With public scales ``units`` the
    providers sum ``clip_R(x/s − c/s)``; the opened sum is multiplied by ``s``.
    """
    mean: Any = None
    if isinstance(centering, str):
        mean = np.zeros(n_features)
        for r, (bound_part, _) in enumerate(MEAN_PARTS):
            R = yield from _search(plan[bound_part].multiplier, bound_part, mean, n_total)
            opened = yield SumQuery(r + 1, mean.copy(), R)
            mean = mean + (opened.total if units is None else opened.total * units) / n_total
    elif centering is not None:
        mean = np.asarray(centering, dtype=np.float64)
    if isinstance(data_norm, str):
        D = yield from _search(plan["bound"].multiplier, "bound", mean, n_total)
    else:
        D = float(data_norm)
    return mean, D


def _search(multiplier: float, part: str, centre: Any, n_total: int
            ) -> Generator[Any, OpenedSum, float]:
    search = PrivateQuantile.calibrate(multiplier, quantiles=DEFAULT_NORM_QUANTILE,
                                       n_records=n_total)
    bisection = search.bisection()
    _, mid = next(bisection)
    try:
        while True:
            opened = yield CountQuery(part, None if centre is None else centre.copy(),
                                      int(mid[0, 0]))
            _, mid = bisection.send(np.array([[float(opened.total[0])]]))
    except StopIteration as done:
        return float(done.value.value[0, 0])
