"""Mixing diagnostics for Markov chains' traces of a scalar summary: ESS, split-R̂, Geweke's z.

The Gibbs sampler (:mod:`privpca.mechanisms.bingham_gibbs`) records ``tr(VᵀBV)`` after every
sweep; these functions read such traces.

References
----------
A. Vehtari, A. Gelman, D. Simpson, B. Carpenter, P.-C. Bürkner. Rank-normalization, folding,
and localization: an improved R̂ for assessing convergence of MCMC. Bayesian Analysis, 2021.
J. Geweke. Evaluating the accuracy of sampling-based approaches to the calculation of
posterior moments. Bayesian Statistics 4, 1992.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

__all__ = ["effective_sample_size", "geweke_z", "mixing_diagnostics", "split_rhat"]


def _as_chains(traces: ArrayLike) -> NDArray[np.float64]:
    arr = np.asarray(traces, dtype=np.float64)
    if arr.ndim == 1:
        arr = arr[None, :]
    if arr.ndim != 2 or arr.shape[1] < 4:
        raise ValueError("traces must be (n_chains, n_draws) with n_draws >= 4.")
    return arr


def _autocovariance(x: NDArray[np.float64]) -> NDArray[np.float64]:
    n = x.shape[-1]
    xc = x - x.mean(axis=-1, keepdims=True)
    size = 1 << (2 * n - 1).bit_length()
    f = np.fft.rfft(xc, size, axis=-1)
    return np.asarray(np.fft.irfft(f * np.conj(f), size, axis=-1)[..., :n] / n)


def effective_sample_size(traces: ArrayLike) -> float:
    """Effective sample size of one or more chains (Geyer's initial monotone sequence).

    Uses the multi-chain autocorrelation of Vehtari et al. (2021): ``ρ_t = 1 −
    (W − mean_chains(γ_t))/var⁺``; the sum of positive pairs ``ρ_{2t} + ρ_{2t+1}``, made
    monotone, gives ``τ`` and ``ESS = m n / τ``. Constant traces give ``n·m``.
    """
    x = _as_chains(traces)
    m, n = x.shape
    acov = _autocovariance(x)
    within = float(np.mean(acov[:, 0])) * n / (n - 1)
    between = float(np.var(x.mean(axis=1), ddof=1)) * n if m > 1 else 0.0
    var_plus = (n - 1) / n * within + between / n
    if var_plus <= 0.0 or not math.isfinite(var_plus):
        return float(m * n)
    rho = 1.0 - (within - acov.mean(axis=0)) / var_plus
    rho[0] = 1.0
    tau = -1.0
    prev = math.inf
    for t in range(0, n - 1, 2):
        pair = float(rho[t] + rho[t + 1])
        if pair <= 0.0:
            break
        pair = min(pair, prev)
        prev = pair
        tau += 2.0 * pair
    tau = max(tau, 1.0 / math.log10(max(m * n, 10)))
    return float(m * n / tau)


def split_rhat(traces: ArrayLike) -> float:
    """Split-R̂ (Gelman–Rubin on chains cut in halves); ≈ 1 when the chains agree.

    Read it as: above about 1.01 the chains have not forgotten their starting points (or
    explore different regions); one chain is split in two, so even ``n_chains = 1`` detects
    a drift between the first and the second half.
    """
    x = _as_chains(traces)
    half = x.shape[1] // 2
    parts = np.concatenate((x[:, :half], x[:, x.shape[1] - half :]), axis=0)
    n = parts.shape[1]
    means = parts.mean(axis=1)
    within = float(np.mean(parts.var(axis=1, ddof=1)))
    between = float(n * np.var(means, ddof=1))
    if within <= 0.0:
        return 1.0 if between <= 0.0 else math.inf
    var_plus = (n - 1) / n * within + between / n
    return float(math.sqrt(var_plus / within))


def geweke_z(trace: ArrayLike, first: float = 0.1, last: float = 0.5) -> float:
    """Geweke's z: the first ``first`` and last ``last`` fractions of one chain compared.

    ``z = (mean_a − mean_b)/sqrt(var_a/ESS_a + var_b/ESS_b)``; under stationarity it is
    approximately standard normal, so ``|z| > 2`` flags a drift (e.g. an unfinished burn-in).
    """
    x = np.asarray(trace, dtype=np.float64).ravel()
    n = x.size
    na, nb = int(first * n), int(last * n)
    if na < 4 or nb < 4:
        raise ValueError("trace too short for Geweke's test (need >= 4 draws in each part).")
    a, b = x[:na], x[n - nb :]
    va = float(a.var(ddof=1)) / effective_sample_size(a)
    vb = float(b.var(ddof=1)) / effective_sample_size(b)
    if va + vb <= 0.0:
        return 0.0 if a.mean() == b.mean() else math.inf
    return float((a.mean() - b.mean()) / math.sqrt(va + vb))


def mixing_diagnostics(traces: ArrayLike) -> dict[str, Any]:
    """Summarise chains' traces: split-R̂, ESS, Geweke z per chain, and plain-language flags.

    Parameters
    ----------
    traces : array-like of shape (n_chains, n_draws) or (n_draws,)
        Post-burn-in traces of a scalar summary (e.g. ``tr(VᵀAV)``).

    Returns
    -------
    dict
        ``split_rhat`` (float), ``ess`` (float), ``geweke_z`` (list of float, one per chain),
        ``n_chains``, ``n_draws``, ``mean``, ``sd``, and ``flags`` (list of str, empty when no
        check fired). An empty ``flags`` list means no problem was *detected*; it never
        proves that the chain reached its stationary law.
    """
    x = _as_chains(traces)
    m, n = x.shape
    rhat = split_rhat(x)
    ess = effective_sample_size(x)
    zs = [geweke_z(row) if n >= 40 else float("nan") for row in x]
    flags = []
    if rhat > 1.01:
        flags.append(f"split-R̂ = {rhat:.3f} > 1.01: the chains disagree or drift.")
    if ess < 100:
        flags.append(f"ESS = {ess:.0f} < 100: too few effective draws to judge mixing.")
    bad = [i for i, z in enumerate(zs) if math.isfinite(z) and abs(z) > 2.5]
    if bad:
        flags.append(f"Geweke |z| > 2.5 in chain(s) {bad}: start and end of the trace differ.")
    return {
        "split_rhat": rhat,
        "ess": ess,
        "geweke_z": zs,
        "n_chains": m,
        "n_draws": n,
        "mean": float(x.mean()),
        "sd": float(x.std(ddof=1)) if x.size > 1 else 0.0,
        "flags": flags,
    }
