"""Built-in worst-case neighbouring datasets for the estimators, and what a fit releases.

Two settings:

* ``"paper"`` — the papers' setting: ``centering=None`` and a numeric bound ``data_norm=1``
  (``clip_norm=1`` for Private Oja). Neighbours replace one record: ``x = e₁`` (along the
  top direction of the rest of the data) against ``x' = e₂`` (orthogonal to it), the pair
  that attains the second-moment sensitivity ``√2·D²``. For the local protocols this is one
  user's two extreme records.
* ``"release"`` — the estimators' defaults (``centering="private"``, ``data_norm="auto"``:
  the whole release pipeline, private mean and norm bound included). Neighbours **replace**
  one record, as every estimator's guarantee does (same n): a record far out along ``e₂``
  against one as far out along ``e₁``, next to a public base dataset spread along ``e₁``.
  Both sit far beyond the bound the private quantile chooses (2–2.8 here), so both are
  clipped to it: the replacement is the paper pair ``D·e₂`` against ``D·e₁`` at whatever
  bound ``D`` the pipeline picks, orthogonal records that attain the second-moment
  sensitivity ``√2·D²`` (the most a replacement can move ``Σxxᵀ``); the mean moves by
  ``√2·D/n``.

The released output tested is :func:`release_features`: the projection of each released
component on the neighbours' difference of second moments ``xxᵀ − x'x'ᵀ`` (the statistic
that separates a half-noise NoisyPower from the real one), the released variances and the
released mean projected on ``x − x'``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

__all__ = ["BUILTIN_SIZES", "SETTINGS", "Neighbours", "builtin_neighbours", "release_features"]

SETTINGS: tuple[str, ...] = ("paper", "release")

#: Records in the public base dataset per estimator and setting (the fewest each accepts;
#: fits are repeated per run, so they are kept small).
BUILTIN_SIZES: dict[str, dict[str, int]] = {
    "paper": {"PrivateOjaPCA": 4000, "DPPCA": 6000, "LocalGaussianPCA": 600,
              "LocalSparsePCA": 600},
    "release": {"PrivateOjaPCA": 4000, "DPPCA": 8000, "LocalGaussianPCA": 4000,
                "LocalSparsePCA": 4000, "ModSuLQPCA": 10000},
}
_DEFAULT_BASE = {"paper": 0, "release": 3000}
#: Estimators whose release is a function of one noisy matrix: audited with every component,
#: so that components and variances together give that matrix back (the strongest test).
FULL_SPECTRUM: frozenset[str] = frozenset({"AnalyzeGaussPCA", "ModSuLQPCA",
                                           "LocalGaussianPCA"})


@dataclass(frozen=True)
class Neighbours:
    """Two neighbouring datasets and the direction that tells them apart."""

    X: NDArray[np.float64]
    X_neighbour: NDArray[np.float64]
    record: NDArray[np.float64]
    other: NDArray[np.float64] | None
    params: dict[str, Any]
    description: str


def builtin_neighbours(estimator: Any, setting: str = "paper") -> Neighbours:
    """The worst-case neighbours of ``estimator`` in ``setting`` (see the module docstring).

    ``params`` are the parameters to set on the estimator (``n_components=1`` and, in the
    paper setting, ``centering=None`` and a unit norm bound).
    """
    if setting not in SETTINGS:
        raise ValueError(f"setting must be one of {list(SETTINGS)}. Got {setting!r} instead.")
    name = type(estimator).__name__
    names = estimator.get_params(deep=False)
    n_base = BUILTIN_SIZES[setting].get(name, _DEFAULT_BASE[setting])
    params: dict[str, Any] = {}
    if "n_components" in names:
        params["n_components"] = 2 if name in FULL_SPECTRUM else 1
    e1, e2 = np.array([1.0, 0.0]), np.array([0.0, 1.0])
    # A fixed, public base: deterministic so that the two datasets differ in one record only.
    grid = np.linspace(-1.0, 1.0, max(n_base, 1))
    if setting == "paper":
        params["centering"] = None
        for bound in ("data_norm", "clip_norm"):
            if bound in names:
                params[bound] = 1.0
        base = np.column_stack([0.5 * np.sign(grid + 1e-9), 0.1 * grid])[:n_base]
        X = np.vstack([base, e1])
        X_neighbour = np.vstack([base, e2])
        record, other = e1, e2
        desc = (f"replace one record: e1 vs e2 (unit norm bound), {n_base} public records "
                "along e1, centering=None")
    else:
        # Gaussian quantiles (deterministic, public): N(0, diag(1, 0.09)) in shape.
        from scipy.stats import norm

        q = norm.ppf((np.arange(n_base) + 0.5) / n_base)
        base = np.column_stack([q, 0.3 * q[(np.arange(n_base) * 7919) % n_base]])
        far, far_other = 10.0 * e2, 10.0 * e1
        X = np.vstack([base, far])
        X_neighbour = np.vstack([base, far_other])
        record, other = far, far_other
        desc = (f"replace one record: 10*e2 vs 10*e1 (both clipped to the private bound), "
                f"{n_base} public records along e1; the estimator's defaults (private "
                "centring, data_norm='auto')")
    return Neighbours(X, X_neighbour, record, other, params, desc)


def release_features(estimator: Any, record: NDArray[np.float64],
                     other: NDArray[np.float64] | None = None) -> NDArray[np.float64]:
    """What a fitted estimator releases, as numbers a threshold test can use.

    With ``u = record/‖record‖`` (and ``w`` likewise for ``other``): the projection of each
    released component ``cᵢ`` on the neighbours' difference of second moments,
    ``(cᵢ·u)² − (cᵢ·w)²`` (``(cᵢ·u)²`` under add/remove; sign-free), the released
    ``explained_variance_`` λ when there is one, the released matrix ``Σ λᵢcᵢcᵢᵀ`` projected
    on ``uuᵀ − wwᵀ`` (with every component: the likelihood-ratio statistic of a Gaussian
    matrix release), and the released ``mean_`` projected on
    ``u − w`` (0 when uncentred).
    """
    u = _unit(record)
    w = np.zeros_like(u) if other is None else _unit(other)
    comps = np.atleast_2d(np.asarray(estimator.components_, dtype=np.float64))
    proj = (comps @ u) ** 2 - (comps @ w) ** 2
    parts = [proj]
    variance = getattr(estimator, "explained_variance_", None)
    if variance is not None:
        lam = np.asarray(variance, dtype=np.float64).ravel()
        # ⟨Σ λᵢ cᵢcᵢᵀ, uuᵀ − wwᵀ⟩: the released matrix on the difference of second moments.
        parts += [lam, np.array([float(lam[: proj.size] @ proj[: lam.size])])]
    mean = getattr(estimator, "mean_", None)
    parts.append(np.array([0.0 if mean is None else float(np.asarray(mean) @ (u - w))]))
    return np.concatenate(parts)


def _unit(v: NDArray[np.float64]) -> NDArray[np.float64]:
    v = np.asarray(v, dtype=np.float64).ravel()
    norm = float(np.linalg.norm(v))
    return v / norm if norm > 0 else v
