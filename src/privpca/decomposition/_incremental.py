"""Fitting in batches: ``partial_fit`` for Analyze Gauss (and :class:`privpca.PCA` on it).

As scikit-learn's ``IncrementalPCA.partial_fit``, each call adds one batch: it releases, from
that batch's rows only, the Gram matrix of the clipped rows ``y = clip_D((x − c)/s)`` with
symmetric Gaussian noise (Δ = √2·D², or D² under add/remove) and, with ``centering="private"``,
their sum (Δ = 2D, the ``"centre"`` share, :mod:`privpca.pipeline.budget`). The components are
those of ``Σ G̃ₜ − ŜŜᵀ/n`` (Ŝ = Σ s̃ₜ, n = Σ nₜ: minus n·μ̂μ̂ᵀ, μ̂ the running private mean).
Each row is read by one call, so the calls compose in parallel: (ε, δ) per row however many
calls, for disjoint batches fixed by the rows' positions (a row passed twice is two rows). The
ledger is charged at the first call, amended after.

``data_norm`` must be a public number and ``scale`` False or public (a private bound or scales
need the whole table). With ``centering="private"`` rows are clipped around the origin (no
centre is known before the first batch), so ``data_norm`` bounds the raw rows' norms. Under
add/remove-one neighbours (no private mean, as for ``fit``) ``n_samples_seen_`` is None.
``fit`` starts afresh, as does ``partial_fit`` after ``fit`` (scikit-learn's checks call one
after the other). A copy, pickle or :func:`privpca.load` of a stream drops it (two copies
drawing the same noise would cancel it in a difference): ``partial_fit`` on it refuses rather
than start a new stream over its fit; a clone starts one.

The summed noise has std σ√T per entry against a signal growing with n: the error grows about
as √T. ``python benchmarks/bench_partial_fit.py`` (spiked table, n = 20 000, p = 20, k = 2,
ε = 1, δ = 1e-5, ``centering="private"``, public ``data_norm=1``; distance to scikit-learn's
PCA over 5 seeds; chance ≈ 1.9)::

    batches T        mean   worst
    1               0.252   0.282
    2               0.348   0.433
    5               0.563   0.633
    10              0.806   0.960
    20              1.114   1.282
    fit             0.259   0.291   (the whole table at once, the same parameters)
    fit, defaults   0.016   0.017   (a private bound near the rows' norms, about 0.3)
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import dp_accounting
import numpy as np
from numpy.typing import ArrayLike, NDArray

from privpca._config import fit_noise_mode
from privpca._validation import bounded_rows, clip_rows, fit_input
from privpca.accounting.neighbouring import Neighbouring
from privpca.accounting.record import PrivacyRecord, PrivacySpend
from privpca.decomposition._base import BasePrivatePCA
from privpca.decomposition._probabilistic import if_defined
from privpca.mechanisms.gaussian import certified_epsilon, classic_gaussian_sigma
from privpca.mechanisms.noise import gaussian_release, symmetric_gaussian_release
from privpca.mechanisms.randomness import check_random_state, noise_mode_of
from privpca.mechanisms.secure_noise import fast_stream
from privpca.mechanisms.sensitivity import gram_sensitivity
from privpca.pipeline.budget import BudgetPlan
from privpca.pipeline.settings import check_centering, check_scale
from privpca.pipeline.spectrum import ERROR_ALPHA, check_n_components_spec, fit_noisy_matrix
from privpca.solvers.gram import gram_matrix

__all__ = ["CHANGED", "IncrementalGramMixin", "in_stream", "same_stream_parameters",
           "stream_refusal"]

#: Parameters that only post-process the released sums: they may change between calls.
POST_PROCESSING = ("n_components", "whiten")
#: The refusal of a stream whose other parameters changed.
CHANGED = ("a parameter that sets the released noise or its accounting changed since the "
           "stream's first batch (only n_components and whiten may change). fit(X), or "
           "partial_fit on a clone, starts a new stream.")


def stream_refusal(params: Mapping[str, Any]) -> str | None:
    """Why ``partial_fit`` is not offered with these parameters (None: it is)."""
    data_norm, scale = params.get("data_norm", "auto"), params.get("scale", False)
    if isinstance(data_norm, str):
        why = f"data_norm={data_norm!r} is chosen privately from the whole table"
    elif isinstance(scale, bool | np.bool_) and scale:
        why = "scale=True releases private scales from the whole table"
    else:
        return None
    return (f"{why}, which no batch holds. What works: a public numeric data_norm (a bound on "
            "every row's L2 norm fixed without looking at the data; longer rows are clipped "
            "to it), centering None, an array or 'private', and scale False or an array; or "
            "fit(X) on the whole table.")


def same_stream_parameters(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    """Whether two parameter sets release the same stream (post-processing ones aside)."""
    try:
        return all(a.get(k) is b.get(k)
                   or bool(np.array_equal(a.get(k), b.get(k)))  # type: ignore[arg-type]
                   for k in (set(a) | set(b)) - set(POST_PROCESSING))
    except (TypeError, ValueError):
        return False


def in_stream(estimator: Any) -> bool:
    """Whether ``estimator`` holds a stream that its next ``partial_fit`` continues."""
    return vars(estimator).get("_stream") is not None


@dataclass
class _Stream:
    """A stream in progress: its frozen parameters and one call's calibration (public), the
    booking, the noise generator and the running sums of the released values (never rows)."""

    key: dict[str, Any]
    centre: NDArray[np.float64] | None  # a public centre (scale: public scales)
    scale: NDArray[np.float64] | None
    data_norm: float
    neighbouring: Neighbouring
    calibration: str
    epsilon: float  # what one call certifies (the classic calibration's own ε)
    delta: float
    gram_delta: float
    gram_sigma: float
    sum_sigma: float  # NaN without a private mean
    spends: tuple[PrivacySpend, ...]
    gram: NDArray[np.float64]
    total: NDArray[np.float64] | None  # None without a private mean
    booking: Any = None
    rng: Any = None
    n: int = 0
    batches: int = 0

    @classmethod
    def plan(cls, owner: Any, p: int, key: dict[str, Any]) -> _Stream:
        """Check the parameters against p and calibrate one call (before any charge)."""
        neighbouring = Neighbouring.from_option(owner.neighbouring, owner=owner)
        centering = check_centering(owner.centering, p, owner)
        scale = check_scale(owner.scale, p, owner)
        private_mean = isinstance(centering, str)
        relation, calibration = neighbouring.relation, str(owner.calibration)
        if private_mean and (relation != "replace" or calibration != "analytic"):
            raise ValueError(f"{type(owner).__name__}: neighbouring='add-remove' and "
                             "calibration='classic' need a public centre (centering=None or "
                             "an array) and a numeric data_norm, as for fit.")
        D, eps, delta = float(owner.data_norm), float(owner.epsilon), float(owner.delta)
        gram_delta = gram_sensitivity(D, relation)
        budget = BudgetPlan.split(eps, delta, ("centre",) if private_mean else (),
                                  shares=owner.budget_shares)
        if calibration == "classic":
            sigma = classic_gaussian_sigma(eps, delta, gram_delta)
            eps = stat_eps = certified_epsilon(sigma, delta, gram_delta)
        else:
            sigma = budget["statistic"].multiplier * gram_delta
            stat_eps = budget["statistic"].epsilon
        spends = [PrivacySpend(
            mechanism="statistic: gaussian: packed upper triangle of one batch's Gram matrix "
                      "(Analyze Gauss, per partial_fit call)",
            epsilon=stat_eps, delta=delta, sensitivity=gram_delta, noise_scale=sigma,
            dp_event=dp_accounting.GaussianDpEvent(sigma / gram_delta))]
        sum_sigma = math.nan
        if private_mean:
            part = budget["centre"]
            sum_sigma = part.multiplier * 2.0 * D
            spends.insert(0, PrivacySpend(
                mechanism="centre: gaussian: Σ clip_D(x) over one batch's rows (the running "
                          "private mean)",
                epsilon=part.epsilon, delta=delta, sensitivity=2.0 * D, noise_scale=sum_sigma,
                dp_event=dp_accounting.GaussianDpEvent(part.multiplier)))
        return cls(key, None if private_mean else centering, None if scale is False else scale,
                   D, neighbouring, calibration, eps, delta, gram_delta, sigma, sum_sigma,
                   tuple(spends),
                   np.zeros((p, p)), np.zeros(p) if private_mean else None)

    def record(self, n: int, batches: int, target: float) -> PrivacyRecord:
        """The stream's record: one call's spends (each row is read by one); T in the notes."""
        public, mean = self.neighbouring.n_public, self.total is not None
        around = ("the public centre" if self.centre is not None else "the origin"
                  + (": no centre is known before the first batch" if mean else ""))
        notes = (
            f"Fitted by partial_fit in {batches} batch{'es' if batches != 1 else ''}"
            + (f" ({n} rows)" if public else "") + ". Each call released, from its own rows "
            f"(clipped to data_norm around {around}), the noisy Gram matrix"
            + (" and the rows' noisy sum" if mean else "") + " at the whole (epsilon, delta). "
            "The batches are assumed disjoint (a row passed to two calls is two rows), so "
            "each row is read by one call: (epsilon, delta)-DP whatever the number of batches "
            "(parallel composition). The spends are one call's; the components come from the "
            "running sums. The ledger was charged at the first call; later calls amend this."
            + ("" if public else " Under add/remove-one neighbours n is private: "
               "n_samples_seen_ is None and explained_variance_ is in Gram units."))
        return PrivacyRecord(
            self.epsilon, self.delta, "central", self.neighbouring.description, self.gram_delta,
            self.gram_sigma, self.calibration, self.data_norm, n if public else None,
            spends=self.spends, target_epsilon=target, notes=notes)


class IncrementalGramMixin(BasePrivatePCA):
    """``partial_fit`` on a noisy-Gram estimator (the module's documentation says how)."""

    epsilon: float
    n_components: Any
    random_state: Any

    def _check_defined(self, name: str) -> None:
        """Where ``partial_fit`` is not offered, the AttributeError says why and what works."""
        if name != "partial_fit":
            return super()._check_defined(name)
        reason = stream_refusal(self.get_params(deep=False))
        if reason is not None:
            raise AttributeError(f"{type(self).__name__}.partial_fit is not offered with "
                                 f"these parameters: {reason}")

    @if_defined
    def partial_fit(self, X: ArrayLike, y: Any = None) -> Any:
        """Update the fit with one more batch of rows (scikit-learn's ``IncrementalPCA``).

        Releases the batch's noisy Gram (and row sum) at the whole (ε, δ); the attributes
        follow the running sums. With each row in one batch the stream is (ε, δ)-DP however
        many calls, charged once (:mod:`privpca.decomposition._incremental`).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            The batch's rows, each a record not passed before. Not modified.
        y : ignored

        Returns
        -------
        self
        """
        stream: _Stream | None = vars(self).get("_stream")
        key = {name: value.copy() if isinstance(value, np.ndarray | list | dict) else value
               for name, value in self.get_params(deep=False).items()
               if name not in POST_PROCESSING}
        if stream is None:
            self._validate_params()
            if "n_samples_seen_" in vars(self):  # a stream's fit, its exact sums gone
                raise ValueError(
                    f"{type(self).__name__}.partial_fit cannot continue this stream: its exact "
                    "running sums are never kept outside the object that made them (a copy, "
                    "pickle or privpca.load drops them), so a new stream would silently "
                    "replace its fit. Add batches to the original object, or start a new "
                    "stream on sklearn.base.clone(estimator).")
        elif not same_stream_parameters(stream.key, key):
            raise ValueError(f"{type(self).__name__}.partial_fit: {CHANGED}")
        with fit_noise_mode(noise_mode_of(self.random_state)):
            # NaN/inf refused before anything is released; rows above MAX_ROW_NORM bounded
            Xv, sq = bounded_rows(fit_input(self, X, reset=stream is None))
            if stream is None:  # a new stream: refusals, then the one charge
                p = Xv.shape[1]
                check_n_components_spec(self.n_components, p, self)
                stream = _Stream.plan(self, p, key)
                stream.rng = check_random_state(self.random_state)
                stream.booking = self._book(stream.record(Xv.shape[0], 1, float(self.epsilon)))
            self._release_batch(stream, Xv, sq)
            self._stream = stream
            self._refit(stream)
        return self

    def _release_batch(self, stream: _Stream, X: NDArray[np.float64],
                       sq: NDArray[np.float64]) -> None:
        """Clip the batch, release its Gram (and sum), add them to the running sums."""
        shifted = stream.centre is not None or stream.scale is not None
        rows = (X - (0.0 if stream.centre is None else stream.centre)) / (
            1.0 if stream.scale is None else stream.scale) if shifted else X
        rows, _ = clip_rows(rows, stream.data_norm, owner=self, copy=not shifted,
                            norms=None if shifted else np.sqrt(sq))  # warns if any clipped
        stream.gram += symmetric_gaussian_release(gram_matrix(rows), stream.gram_sigma,
                                                  stream.rng, sensitivity=stream.gram_delta)
        if stream.total is not None:
            stream.total += gaussian_release(rows.sum(axis=0), stream.sum_sigma, stream.rng,
                                             sensitivity=2.0 * stream.data_norm)
        stream.n += X.shape[0]
        stream.batches += 1
        self.privacy_ = stream.booking.settle(
            stream.record(stream.n, stream.batches, float(self.epsilon)))

    def _refit(self, stream: _Stream) -> None:
        """Every fitted attribute from the running sums (post-processing, free)."""
        n, root_t, p = stream.n, math.sqrt(stream.batches), stream.gram.shape[0]
        gram = stream.gram.copy()
        mean = np.zeros(p) if stream.centre is None else stream.centre.copy()
        extra = 0.0
        if stream.total is not None:  # Σ G̃ − ŜŜᵀ/n: centred on the running private mean
            gram -= np.outer(stream.total, stream.total) / n
            shift = stream.total / n
            mean += shift if stream.scale is None else shift * stream.scale
            # What the mean's noise leaves in the Gram, w.p. 1 − α (as the pipeline's centre).
            radius = stream.sum_sigma * root_t * (
                math.sqrt(p) + math.sqrt(2.0 * math.log(1.0 / ERROR_ALPHA)))
            extra = (2.0 * float(np.linalg.norm(stream.total)) * radius + radius**2) / n
        centred = stream.total is not None or stream.centre is not None
        public = stream.neighbouring.n_public
        denominator = float(n - 1 if centred and n > 1 else n) if public else 1.0
        fit = fit_noisy_matrix(gram, check_n_components_spec(self.n_components, p, self),
                               noise_sd=stream.gram_sigma * root_t, denominator=denominator,
                               extra_perturbation=extra, rng=fast_stream(stream.rng))
        self._set_spectrum(fit)
        self.noise_scale_ = stream.gram_sigma * root_t
        self.mean_, self.data_norm_ = mean, stream.data_norm
        self.scale_ = None if stream.scale is None else stream.scale.copy()
        self.n_samples_seen_ = n if public else None

    def _fit(self, data: Any) -> Any:
        self.__dict__.pop("_stream", None)  # fit starts afresh
        self.__dict__.pop("n_samples_seen_", None)
        return super()._fit(data)

    def __getstate__(self) -> dict[str, Any]:
        # A copy must not continue the stream: it would draw the same noise as the original.
        state = dict(super().__getstate__())
        state.pop("_stream", None)
        return state
