"""What a fitted estimator releases, read for the probes: its numbers and stated noise scales
(the float probe), its named vectors and the built-in neighbours lifted to more features (the
lattice probe)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from numpy.typing import NDArray

from privpca.audit.core import _fit_runs
from privpca.audit.neighbours import builtin_neighbours, release_features
from privpca.pipeline.spectrum import noisy_eigenvalues

__all__ = ["LATTICE_FEATURES", "lattice_neighbours", "lattice_vectors", "noise_scales",
           "probe_features"]

#: Features of the neighbours the lattice probe builds by default (the built-in neighbours
#: have 2; a 2-vector carries too few bits to show a 2^30 lattice, see privpca.audit.lattice).
LATTICE_FEATURES = 6


def probe_features(estimator: Any) -> NDArray[np.float64]:
    """The raw numbers a fitted estimator releases, for the probe: the released matrix
    ``Σ λᵢcᵢcᵢᵀ`` (packed upper triangle; with every component it is the noisy matrix the
    mechanism released, up to the eigensolver's rounding) when ``explained_variance_`` has a
    value per component, the ``explained_variance_``, the ``mean_`` and the components
    (each signed so that its largest entry is positive), unprojected. Variances debiased for
    the noise (``noise_sd_per_entry_``) are mapped back to the released eigenvalues first, as
    an attacker would (:func:`~privpca.pipeline.spectrum.noisy_eigenvalues`)."""
    comps = np.atleast_2d(np.asarray(estimator.components_, dtype=np.float64))
    idx = np.argmax(np.abs(comps), axis=1)
    signs = np.where(comps[np.arange(comps.shape[0]), idx] < 0, -1.0, 1.0)
    parts = [(comps * signs[:, None]).ravel()]
    variance = getattr(estimator, "explained_variance_", None)
    if variance is not None:
        lam = np.asarray(variance, dtype=np.float64).ravel()
        entry_noise = float(getattr(estimator, "noise_sd_per_entry_", math.nan))
        if math.isfinite(entry_noise):
            lam = noisy_eigenvalues(lam, entry_noise, comps.shape[1])
        if lam.size == comps.shape[0]:
            M = (comps.T * lam) @ comps
            parts.append(M[np.triu_indices(M.shape[0])])
        parts.append(lam)
    mean = getattr(estimator, "mean_", None)
    if mean is not None:
        parts.append(np.asarray(mean, dtype=np.float64).ravel())
    return np.concatenate(parts) if parts else np.zeros(0)


def noise_scales(estimator: Any, n_samples: int) -> dict[str, float]:
    """The noise scales a fitted estimator states (``noise_scale_``, each spend's
    ``noise_scale`` in ``privacy_``), each also over ``n`` and ``n − 1`` (the variances are
    eigenvalues over n or n − 1)."""
    base: list[tuple[str, Any]] = [("noise_scale_", getattr(estimator, "noise_scale_", None))]
    spends = getattr(getattr(estimator, "privacy_", None), "spends", None) or ()
    base += [(f"spend[{i}]", getattr(s, "noise_scale", None)) for i, s in enumerate(spends)]
    out: dict[str, float] = {}
    seen: set[float] = set()
    for label, value in base:
        try:
            v = float(value)
        except (TypeError, ValueError):
            continue
        if not (math.isfinite(v) and v > 0):
            continue
        for lab, w in ((label, v), (f"{label}/n", v / n_samples),
                       (f"{label}/(n-1)", v / (n_samples - 1) if n_samples > 1 else v)):
            if w not in seen:
                seen.add(w)
                out[lab] = w
    return out


def lattice_vectors(estimator: Any) -> dict[str, NDArray[np.float64]]:
    """The released vectors of a fitted estimator the lattice probe tests: each component,
    ``explained_variance_``, ``mean_`` and, when there is a variance per component, the
    released matrix ``Σ λᵢcᵢcᵢᵀ`` (packed upper triangle), each as released."""
    comps = np.atleast_2d(np.asarray(estimator.components_, dtype=np.float64))
    out = {f"components_[{i}]": comps[i].copy() for i in range(comps.shape[0])}
    variance = getattr(estimator, "explained_variance_", None)
    if variance is not None:
        lam = np.asarray(variance, dtype=np.float64).ravel()
        out["explained_variance_"] = lam
        if lam.size == comps.shape[0]:
            M = (comps.T * lam) @ comps
            out["released matrix"] = M[np.triu_indices(M.shape[0])]
    mean = getattr(estimator, "mean_", None)
    if mean is not None:
        out["mean_"] = np.asarray(mean, dtype=np.float64).ravel()
    return out


def lattice_neighbours(estimator: Any, setting: str = "paper",
                       n_features: int = LATTICE_FEATURES) -> tuple[Any, Any, dict[str, Any],
                                                                     str]:
    """The built-in neighbours (:func:`~privpca.audit.builtin_neighbours`) lifted to
    ``n_features`` features: the public records get ``n_features − 2`` more deterministic
    columns (small multiples of permuted copies of their second column; rows stay within
    the paper setting's unit bound), the differing records zeros there. Returns
    ``(X, X_neighbour, params, description)``."""
    nb = builtin_neighbours(estimator, setting)
    extra = int(n_features) - nb.X.shape[1]
    if extra <= 0:
        return nb.X, nb.X_neighbour, nb.params, nb.description
    base = nb.X[:-1]
    m = base.shape[0]
    cols = []
    for j in range(extra):
        perm = (np.arange(m) * (7919 + 104729 * j) + 13 * j) % max(m, 1)
        cols.append((0.5 / (j + 2)) * base[perm, 1] if m else np.zeros(0))
    lifted = np.column_stack([base, *cols]) if m else np.zeros((0, nb.X.shape[1] + extra))
    pad = np.zeros(extra)
    X = np.vstack([lifted, np.concatenate([nb.X[-1], pad])])
    Xn = np.vstack([lifted, np.concatenate([nb.X_neighbour[-1], pad])])
    return X, Xn, nb.params, f"{nb.description}; lifted to {int(n_features)} features"


def _estimator_releases(su: Any, states: list[Any], runs: int, progress: bool,
                        with_features: bool
                        ) -> tuple[NDArray[np.float64], NDArray[np.float64], dict[str, float],
                                   NDArray[np.float64] | None, NDArray[np.float64] | None]:
    """Probe vectors (and, optionally, threshold-audit features) of ``runs`` fits per side."""
    name = type(su.estimator).__name__
    out: list[Any] = []
    scales: dict[str, float] = {}
    for X, st, tag in ((su.X, states[:runs], "X"), (su.X_neighbour, states[runs:], "X'")):
        P, F = [], []
        for fit in _fit_runs(su.estimator, X, st, progress, f"{name} on {tag}"):
            if not scales:
                scales = noise_scales(fit, len(X))
            P.append(probe_features(fit))
            if with_features:
                F.append(release_features(fit, su.record, su.other))
        out.append((np.vstack(P), np.vstack(F) if with_features else None))
    (P0, F0), (P1, F1) = out
    return P0, P1, scales, F0, F1


def _lattice_releases(su: Any, states: list[Any], runs: int, progress: bool
                      ) -> tuple[list[dict[str, NDArray[np.float64]]],
                                 list[dict[str, NDArray[np.float64]]]]:
    """The released vectors (:func:`lattice_vectors`) of ``runs`` fits per side."""
    name = type(su.estimator).__name__
    V0 = [lattice_vectors(f) for f in _fit_runs(su.estimator, su.X, states[:runs], progress,
                                                 f"{name} on X")]
    V1 = [lattice_vectors(f) for f in _fit_runs(su.estimator, su.X_neighbour, states[runs:],
                                                 progress, f"{name} on X'")]
    return V0, V1
