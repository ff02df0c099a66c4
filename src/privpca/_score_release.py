"""The release behind :func:`privpca.plot.scores`: the part of the score plot that spends privacy.

:func:`release_scores` charges the plot's own (ε, δ) on a ledger **before** the rows are read,
then projects them, counts the projections clipped to a public box on a fixed grid and adds
noise. The parameters arrive checked, and drawing the counts is :mod:`privpca.plot`'s.
"""

from __future__ import annotations

import math
from typing import Any

import dp_accounting
import numpy as np
from numpy.typing import NDArray

from privpca._config import fit_noise_mode
from privpca._validation import check_data, warn_clipped
from privpca.accounting.calibration import laplace_scale
from privpca.accounting.ledger import Booking, resolve_ledger
from privpca.accounting.neighbouring import Neighbouring
from privpca.accounting.record import PrivacyRecord, PrivacySpend
from privpca.mechanisms.gaussian import analytic_gaussian_sigma
from privpca.mechanisms.noise import gaussian_release, laplace_release
from privpca.mechanisms.randomness import check_random_state, noise_mode_of

#: L1 and L2 sensitivities of a histogram on a fixed grid under replace-one neighbours: one
#: record leaves one bin for another, so two counts change by 1.
SCORES_L1_SENSITIVITY = 2.0
SCORES_L2_SENSITIVITY = math.sqrt(2.0)
#: The same under add/remove-one neighbours: one count changes by 1 (L1 and L2).
SCORES_ADD_REMOVE_SENSITIVITY = 1.0
#: The neighbouring relation of :func:`privpca.plot.scores` after a fit whose n is public.
SCORES_NEIGHBOURING = "replace one record (any two records; n public)"

Box = tuple[tuple[float, float], tuple[float, float]]
Edges = tuple[NDArray[np.float64], NDArray[np.float64]]


def release_scores(
    est: Any, X: Any, comps: NDArray[np.float64], epsilon: float, delta: float, bins: int,
    box: Box, *, warn: bool, random_state: Any, ledger: Any,
) -> tuple[PrivacyRecord, NDArray[np.float64], Edges]:
    """Charge, read ``X``, release the noisy counts: ``(record, noisy counts, bin edges)``.

    ``warn``: the box was stated by the user, so a projection outside it is warned about.
    """
    rng = check_random_state(random_state)  # secure mode refuses a seed before the charge
    n_private = _n_private_relation(est)
    with fit_noise_mode(noise_mode_of(random_state)):  # the records state how it was drawn
        planned = _scores_record(est, epsilon, delta, bins, box, None, n_private)
        target = resolve_ledger(est, ledger)
        target.spend(planned, label=f"{type(est).__name__} score plot")
        booking = Booking(target, planned)
        try:  # the first look at X, after the charge; a refused input releases nothing
            Xv = check_data(X)
            if Xv.shape[1] != comps.shape[1]:
                raise ValueError(f"X has {Xv.shape[1]} features; {type(est).__name__} was "
                                 f"fitted on {comps.shape[1]}.")
        except ValueError:
            booking.withdraw()
            raise
        counts, edges = _clipped_histogram(_projections(est, Xv, comps), box, bins, warn=warn)
        noisy = _noisy_counts(counts, planned, rng)
        record = booking.settle(_scores_record(est, epsilon, delta, bins, box,
                                               int(Xv.shape[0]), n_private))
    return record, noisy, edges


def _n_private_relation(est: Any) -> str | None:
    """The fit's neighbouring relation (its record's text) when it keeps n private, else None.

    A fit under add/remove-one neighbours (``privacy_.n_samples`` is None, or its relation is
    :attr:`~privpca.accounting.neighbouring.Neighbouring.ADD_REMOVE_ONE`) does not release the
    number of rows; its score plot must not either, and states the same relation, so that
    the two guarantees compose.
    """
    record = getattr(est, "privacy_", None)
    if record is None:
        return None
    text = getattr(record, "neighbouring", None)
    relation = next((m for m in Neighbouring if m.description == text), None)
    n_private = (relation is not None and not relation.n_public) or (
        getattr(record, "n_samples", 0) is None and getattr(record, "model", "") != "non-private")
    if not n_private:
        return None
    return str(text) if text else Neighbouring.ADD_REMOVE_ONE.description


def _scores_record(
    est: Any, epsilon: float, delta: float, bins: int, box: Box,
    n_samples: int | None, n_private: str | None = None,
) -> PrivacyRecord:
    """The record of a score histogram: Laplace (δ = 0) or analytic Gaussian noise per count.

    ``n_private``: the fit's relation when it keeps n private (:func:`_n_private_relation`):
    the record then states it, one count moves by 1 and ``n_samples`` is not recorded.
    """
    what = f"2-D histogram of the projections on PC1, PC2 ({bins}×{bins} bins)"
    if n_private is not None:  # add or remove one record: one count moves by 1
        l1 = l2 = SCORES_ADD_REMOVE_SENSITIVITY
        l1_text = l2_text = "1"
    else:  # replace one record: two counts move by 1
        l1, l2 = SCORES_L1_SENSITIVITY, SCORES_L2_SENSITIVITY
        l1_text, l2_text = "2", "√2"
    if delta == 0.0:
        sensitivity, calibration = l1, "laplace"
        scale = laplace_scale(epsilon, sensitivity)
        # Each count moves by at most 1, so its noise multiplier is the scale itself; under
        # replace-one two counts move: two Laplace mechanisms of L1 sensitivity 1 each.
        event: Any = dp_accounting.LaplaceDpEvent(scale)
        if n_private is None:
            event = dp_accounting.SelfComposedDpEvent(event, 2)
        mechanism = f"laplace: {what}, L1 sensitivity {l1_text}"
    else:
        sensitivity, calibration = l2, "analytic"
        scale = analytic_gaussian_sigma(epsilon, delta, sensitivity)
        event = dp_accounting.GaussianDpEvent(scale / sensitivity)
        mechanism = f"gaussian: {what}, L2 sensitivity {l2_text}"
    spend = PrivacySpend(mechanism=mechanism, epsilon=epsilon, delta=delta,
                         sensitivity=sensitivity, noise_scale=scale, dp_event=event)
    (x0, x1), (y0, y1) = box
    notes = (f"Score plot of {type(est).__name__}: a release of its own, composed with the "
             f"fit's. Projections clipped to the public box [{x0:.4g}, {x1:.4g}] × "
             f"[{y0:.4g}, {y1:.4g}] before counting; negative noisy counts are drawn as 0 "
             "(post-processing).")
    if n_private is not None:
        notes += (" The fit keeps the number of records private (add or remove one record): "
                  "so does the plot, under the same relation. n is not recorded; the noisy "
                  "counts' sum is its only trace, as private as the counts.")
    return PrivacyRecord(
        epsilon=epsilon, delta=delta, model="central",
        neighbouring=SCORES_NEIGHBOURING if n_private is None else n_private,
        sensitivity=sensitivity, noise_scale=scale, calibration=calibration,
        data_norm=float(max(abs(x0), abs(x1), abs(y0), abs(y1))),
        n_samples=None if n_private is not None else n_samples,
        spends=(spend,), target_epsilon=epsilon, notes=notes,
    )


def _projections(est: Any, X: NDArray[np.float64], comps: NDArray[np.float64]
                 ) -> NDArray[np.float64]:
    """Rows centred and scaled as the fit prepared them, projected on PC1 and PC2."""
    mean = getattr(est, "mean_", None)
    scale = getattr(est, "scale_", None)
    if mean is not None and np.any(np.asarray(mean) != 0.0):
        X = X - np.asarray(mean, dtype=np.float64)
    if scale is not None:
        X = X / np.asarray(scale, dtype=np.float64)
    return np.asarray(X @ comps[:2].T)


def _clipped_histogram(
    Z: NDArray[np.float64], box: Box, bins: int, *, warn: bool
) -> tuple[NDArray[np.float64], Edges]:
    """Exact counts of the projections clipped to ``box`` on a fixed ``bins × bins`` grid.

    ``warn``: say (data-dependent) when a projection left a box the user stated; the default
    box ``[-D, D]²`` holds every projection of a row the fit itself did not clip.
    """
    (x0, x1), (y0, y1) = box
    zx, zy = np.clip(Z[:, 0], x0, x1), np.clip(Z[:, 1], y0, y1)
    if warn and (np.any(zx != Z[:, 0]) or np.any(zy != Z[:, 1])):
        warn_clipped("scores", max(abs(x0), abs(x1), abs(y0), abs(y1)), what="projections",
                     bound="bound", effect="the edge cells hold them as well as their own",
                     cost="which coarsens the cells")
    xedges, yedges = np.linspace(x0, x1, bins + 1), np.linspace(y0, y1, bins + 1)
    counts, _, _ = np.histogram2d(zx, zy, bins=(xedges, yedges))
    return counts, (xedges, yedges)


def _noisy_counts(counts: NDArray[np.float64], record: PrivacyRecord,
                  rng: np.random.Generator) -> NDArray[np.float64]:
    release = laplace_release if record.delta == 0.0 else gaussian_release
    return np.asarray(release(counts, record.noise_scale, rng, sensitivity=record.sensitivity,
                              integer_valued=True), dtype=np.float64)
