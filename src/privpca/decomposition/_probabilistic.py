"""scikit-learn's probabilistic PCA surface, computed from released quantities only.

:class:`ProbabilisticPCAMixin` gives every privpca estimator what a user of
``sklearn.decomposition.PCA`` reaches for after a fit: ``get_covariance``, ``get_precision``,
``score_samples``, ``score``, ``noise_variance_``, ``singular_values_``, ``n_samples_``, and the
``whiten`` scaling of ``transform``. Everything here reads the fitted attributes a private
fit has already released and nothing else: it is post-processing, it costs no privacy and
books nothing on the ledger.

Released quantities read
------------------------
* ``components_`` (``W``, k×p), ``explained_variance_`` (``λ``, length k);
* the **private total variance** ``t``, released by every estimator that releases variances as
  the denominator of ``explained_variance_ratio_`` (``rᵢ = λᵢ/t``, made feasible by
  :func:`~privpca.pipeline.spectrum.feasible_spectrum`, so ``t ≥ Σλ``): ``t = λᵢ/rᵢ``, read at
  the largest ratio (:func:`~privpca.pipeline.spectrum.released_total`; scikit-learn's own test
  ``test_variance_correctness`` reads its total the same way). The noisy-matrix estimators'
  ``t`` is the noisy matrix's trace (Analyze Gauss, MOD-SuLQ, the local model), the others' the
  separately released ``tr G + e`` of their ``"variance"`` part (noisy power, Bingham, Private
  Oja, DP-PCA, DPS-PCA);
* ``mean_`` and ``scale_`` (the model lives where ``transform`` projects, ``z = (x − μ)/s``);
* ``privacy_.n_samples``: the number of rows where the fit's neighbouring relation treats it as
  public (replace-one), None where it is private (add/remove-one).

The model (Tipping & Bishop's probabilistic PCA, as scikit-learn evaluates it)
------------------------------------------------------------------------------
``noise_variance_ σ² = max((t − Σλ)/(p − k), φ)``, the mean variance the components leave out,
with the floor ``φ =`` :data:`NOISE_VARIANCE_FLOOR` ``· t/p`` (a relative √ε of the mean
variance per feature), which keeps the covariance invertible and ``get_precision`` finite where
noise or a rank-deficient table leaves nothing outside the components (scikit-learn's σ² is 0
there, and ``k = p`` gives ``φ`` where scikit-learn gives 0). The covariance of ``z`` is
``C = Wᵀ diag(max(λ − σ², 0)) W + σ² I``; of the features, ``diag(s) C diag(s)``. A private
``λᵢ`` may fall below σ² (scikit-learn's exact ones cannot): that component then adds nothing,
as in scikit-learn's formula, and is left out of the matrix inversion lemma of
``get_precision`` (its ``1/(λᵢ − σ²)`` would be infinite). The log-likelihood of a row is
Gaussian's, ``−½(x − μ)ᵀ P (x − μ) − ½(p log 2π − log det P)`` with ``P = get_precision()``;
with scales this is the density of ``x`` itself (the Jacobian ``−Σ log sⱼ`` is in ``log det P``).

It is the model of the rows **as the fit prepared them**: centred on the private mean, scaled,
clipped to the norm bound. Clipping shrinks the variances a little (the estimators' documents
say where); the noise of the release makes every number here a noisy estimate.

Whitening: the covariance does not depend on ``whiten`` here. scikit-learn 1.x multiplies its
(unit-norm) ``components_`` by ``√λ`` again in ``get_covariance`` when ``whiten=True``
(scikit-learn issue #13898), so its whitened covariance and score differ from its unwhitened
ones; privpca keeps the one model of the data, which is scikit-learn's ``whiten=False`` model.

Where the model is not defined (the method or attribute is then absent: ``hasattr`` is False
and using it raises an :class:`AttributeError` that says why)
------------------------------------------------------------------------------------------
* **no variances released** (``explained_variance_`` NaN: the papers' settings of noisy power,
  Bingham, Private Oja, DP-PCA, DPS-PCA and the stochastic family, which release the basis
  only): no model, no ``noise_variance_`` and no ``singular_values_``; ``whiten=True`` refuses
  to transform (ValueError: nothing to divide by);
* **no total released** (ratios NaN, or every released variance 0 so that the ratios carry no
  total; the non-private :class:`~privpca.SparsePCA`, which stores no total): no
  ``noise_variance_``, so no model (``singular_values_`` and ``whiten`` still work);
* **n private** (``AnalyzeGaussPCA(neighbouring="add-remove")``: ``privacy_.n_samples`` is
  None and its spectrum is in the units of the noisy Gram matrix ``XᵀX``, never divided by
  n): no ``n_samples_``, ``singular_values_``, ``noise_variance_`` or covariance, since each
  would need n (the square roots of ``explained_variance_`` are then the singular values);
* **no mean released** (centred by row-pair differences on a wide table: ``centering=
  "private"`` with ``mean_`` all zeros): the covariance is defined, ``score_samples`` and
  ``score`` are not (they need the mean).
"""

from __future__ import annotations

import functools
import math
import types
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar, cast

import numpy as np
import scipy.linalg
from numpy.typing import ArrayLike, NDArray
from sklearn.utils.validation import check_is_fitted, validate_data

from privpca.pipeline.spectrum import released_total

__all__ = ["NOISE_VARIANCE_FLOOR", "ProbabilisticModel", "ProbabilisticPCAMixin", "if_defined"]

#: Floor of ``noise_variance_``, relative to the mean private variance per feature ``t/p``:
#: √(machine ε) ≈ 1.5·10⁻⁸. Above it the precision is computed to about √ε relative accuracy
#: (its condition number is at most ``1/φ`` times the top variance over the mean); a variance
#: below it is numerically nothing against the table's own.
NOISE_VARIANCE_FLOOR = math.sqrt(float(np.finfo(np.float64).eps))

#: The methods that also need the released mean (the log-likelihood of a row).
_NEEDS_MEAN = frozenset({"score_samples", "score"})

_Method = TypeVar("_Method", bound=Callable[..., Any])


class _IfDefined:
    """A method present only where its owner defines it (scikit-learn's ``available_if``,
    with the owner's reason as the AttributeError's message rather than a generic one).

    On an unfitted estimator the method is present and raises ``NotFittedError`` when called,
    as scikit-learn's PCA does; once fitted it is present only where
    ``owner._check_defined(name)`` does not raise.
    """

    def __init__(self, fn: Callable[..., Any]) -> None:
        self.fn = fn
        functools.update_wrapper(self, fn)  # type: ignore[arg-type]

    def __get__(self, obj: Any, owner: type | None = None) -> Any:
        if obj is None:
            return self.fn
        obj._check_defined(self.fn.__name__)
        return types.MethodType(self.fn, obj)


def if_defined(fn: _Method) -> _Method:
    """Decorate a method of the probabilistic model: absent (with the reason) where the fit's
    released quantities do not define it."""
    return cast(_Method, _IfDefined(fn))


@dataclass(frozen=True)
class ProbabilisticModel:
    """The probabilistic PCA model of a fit, from its released quantities.

    Attributes
    ----------
    components : ndarray of shape (k, p)
    variances : ndarray of shape (k,)
        ``explained_variance_``.
    noise_variance : float
        σ², floored (module docstring).
    scale : ndarray of shape (p,) or None
        ``scale_``: the model is of the scaled rows.
    """

    components: NDArray[np.float64]
    variances: NDArray[np.float64]
    noise_variance: float
    scale: NDArray[np.float64] | None

    def covariance(self) -> NDArray[np.float64]:
        """``diag(s) (Wᵀ diag(max(λ − σ², 0)) W + σ² I) diag(s)``."""
        W, s2 = self.components, self.noise_variance
        cov = (W.T * np.maximum(self.variances - s2, 0.0)) @ W
        cov.flat[:: cov.shape[0] + 1] += s2
        return self._to_features(cov, power=1.0)

    def precision(self) -> NDArray[np.float64]:
        """The inverse of :meth:`covariance` by the matrix inversion lemma (Woodbury)."""
        W, s2 = self.components, self.noise_variance
        p = W.shape[1]
        diff = self.variances - s2
        kept = diff > 0.0  # a component at or below σ² adds nothing to the covariance
        Wk = W[kept]
        precision = np.zeros((p, p))
        if Wk.shape[0]:
            inner = Wk @ Wk.T / s2
            inner.flat[:: inner.shape[0] + 1] += 1.0 / diff[kept]
            precision = -(Wk.T @ scipy.linalg.solve(inner, Wk, assume_a="pos")) / s2**2
        precision.flat[:: p + 1] += 1.0 / s2
        return self._to_features(precision, power=-1.0)

    def _to_features(self, matrix: NDArray[np.float64], power: float) -> NDArray[np.float64]:
        if self.scale is None:
            return matrix
        s = np.asarray(self.scale, dtype=np.float64) ** power
        return np.asarray(matrix * np.outer(s, s))


class ProbabilisticPCAMixin:
    """scikit-learn's probabilistic PCA and whitening on released quantities (module docstring).

    Mixed into :class:`~privpca.decomposition._base.BasePrivatePCA`: every estimator has it.
    Each quantity is post-processing of the fit's released attributes: it costs no privacy.
    """

    components_: NDArray[np.float64]

    # ------------------------------------------------------------------ released quantities
    def _check_defined(self, name: str) -> None:
        """Raise AttributeError (with the reason) where a fitted model does not define ``name``;
        nothing on an unfitted estimator (the method then raises ``NotFittedError``)."""
        if vars(self).get("components_") is None:
            return
        self._probabilistic_model(needs_mean=name in _NEEDS_MEAN, what=name)

    def _undefined(self, what: str, why: str) -> AttributeError:
        return AttributeError(f"{type(self).__name__}.{what} is not defined for this fit: {why}")

    def _public_n(self, what: str) -> int:
        """The public number of rows of the fit (``privacy_.n_samples``), or the reason."""
        check_is_fitted(self, "components_")
        record = getattr(self, "privacy_", None)
        n = getattr(record, "n_samples", None)
        if n is None:
            raise self._undefined(what, (
                "the fit keeps the number of rows n private (add/remove-one neighbours: "
                "privacy_.n_samples is None), so nothing computed from n is released; its "
                "explained_variance_ are in the units of the noisy Gram matrix, not divided "
                "by n (their square roots are the singular values)."))
        return int(n)

    def _released_variances(self, what: str) -> NDArray[np.float64]:
        check_is_fitted(self, "components_")
        values = np.asarray(getattr(self, "explained_variance_", np.nan), dtype=np.float64)
        values = np.broadcast_to(values, (self.components_.shape[0],))
        if not np.all(np.isfinite(values)):
            raise self._undefined(what, (
                "it released no explained variances (explained_variance_ is NaN: in the "
                "papers' setting only the basis components_ is released)."))
        return np.asarray(values)

    def _released_total(self, what: str) -> float:
        """The private total variance: ``total_variance_`` where the fit records it, else
        ``t = λᵢ/rᵢ`` (in ``explained_variance_``'s units)."""
        values = self._released_variances(what)
        ratio = getattr(self, "explained_variance_ratio_", None)
        total = float(getattr(self, "total_variance_", math.nan))
        if not math.isfinite(total) and ratio is not None:
            total = released_total(values, np.asarray(ratio, dtype=np.float64))
        if not (math.isfinite(total) and total > 0.0):
            raise self._undefined(what, (
                "it released no total variance (explained_variance_ratio_ is absent, NaN, or "
                "0 with every released variance 0 and no total_variance_), and the noise "
                "variance, what the components leave out, is the total minus their variances."))
        return total

    def _probabilistic_model(self, *, needs_mean: bool = False,
                             what: str = "the probabilistic model") -> ProbabilisticModel:
        """The model, or an AttributeError saying which released quantity is missing."""
        self._public_n(what)  # Gram units when n is private: no covariance
        sigma2 = self._noise_variance(what)
        if needs_mean:
            self._model_mean(what)
        scale = getattr(self, "scale_", None)
        return ProbabilisticModel(
            components=np.asarray(self.components_, dtype=np.float64),
            variances=self._released_variances(what), noise_variance=sigma2,
            scale=None if scale is None else np.asarray(scale, dtype=np.float64))

    def _noise_variance(self, what: str) -> float:
        values = self._released_variances(what)
        total = self._released_total(what)
        k, p = self.components_.shape
        floor = NOISE_VARIANCE_FLOOR * total / p
        if k >= p:
            return floor
        return max((total - float(values.sum())) / (p - k), floor)

    def _model_mean(self, what: str) -> NDArray[np.float64]:
        mean = getattr(self, "mean_", None)
        p = self.components_.shape[1]
        if isinstance(getattr(self, "centering", None), str) and (
                mean is None or not np.any(np.asarray(mean) != 0.0)):
            raise self._undefined(what, (
                "the rows were centred without releasing their mean (centering by row-pair "
                "differences: mean_ is zeros), and the log-likelihood of a row needs it. "
                "get_covariance and get_precision are defined."))
        return np.zeros(p) if mean is None else np.asarray(mean, dtype=np.float64)

    def _centred(self) -> bool:
        """Whether the fit centred its rows (explained variances over n − 1, else over n)."""
        params = self.get_params(deep=False)  # type: ignore[attr-defined]
        if "center" in params:
            return bool(params["center"])
        return params.get("centering", "private") is not None

    # ------------------------------------------------------------------ fitted attributes
    @property
    def n_samples_(self) -> int:
        """Number of rows of the fit, where its privacy treats it as public.

        ``privacy_.n_samples``: public under replace-one neighbours (privpca's relation), the
        fitted row count the fit planned with (for DPS-PCA the providers' total, for the local
        model the number of reports). Absent (AttributeError) under add/remove-one
        neighbours, where n is private. Free (read off the record).
        """
        return self._public_n("n_samples_")

    @property
    def noise_variance_(self) -> float:
        """Private noise variance of the probabilistic PCA model (scikit-learn's attribute).

        ``max((t − Σλ)/(p − k), φ)``: the private total variance ``t`` (read off
        ``explained_variance_ratio_``, ``t = λᵢ/rᵢ``) minus the released variances
        ``λ = explained_variance_``, per left-out direction, floored at
        ``φ = NOISE_VARIANCE_FLOOR · t/p`` so that ``get_precision`` is finite (``φ`` when
        ``k = p``, where scikit-learn's is 0). In ``explained_variance_``'s units (of the
        scaled rows when ``scale_`` is set). Post-processing of released values: no privacy
        cost. Absent (AttributeError saying why) where no variances, no total or no public n
        were released (:mod:`privpca.decomposition._probabilistic`).
        """
        self._public_n("noise_variance_")
        return self._noise_variance("noise_variance_")

    @property
    def singular_values_(self) -> NDArray[np.float64]:
        """scikit-learn's singular values, ``√(λ·(n − 1))`` (``√(λ·n)`` for an uncentred fit).

        From the released ``explained_variance_`` λ and the public ``n_samples_``: the 2-norms
        of the centred table's projections that these variances imply (for the stochastic
        estimators, whose variances come from the held-out rows, the whole table's estimate).
        Negative private variances were already clipped to 0. Post-processing: free. Absent
        where no variances were released or n is private.
        """
        n = self._public_n("singular_values_")
        values = self._released_variances("singular_values_")
        d = n - 1 if self._centred() and n > 1 else n
        return np.sqrt(np.maximum(values, 0.0) * d)

    # ------------------------------------------------------------------ the model
    @if_defined
    def get_covariance(self) -> NDArray[np.float64]:
        """Covariance of the features under the probabilistic PCA model (free).

        ``diag(s) (Wᵀ diag(max(λ − σ², 0)) W + σ² I) diag(s)`` with ``W = components_``,
        ``λ = explained_variance_``, ``σ² = noise_variance_`` (the private total variance's
        share left out of the components) and ``s = scale_`` (1 without scaling): scikit-learn's
        formula, the same with or without ``whiten``. Reads released quantities only
        (post-processing: no privacy cost).

        Returns
        -------
        ndarray of shape (n_features, n_features)
        """
        return self._probabilistic_model(what="get_covariance").covariance()

    @if_defined
    def get_precision(self) -> NDArray[np.float64]:
        """Inverse of :meth:`get_covariance`, by the matrix inversion lemma (free).

        From ``components_``, ``explained_variance_``, ``noise_variance_`` and ``scale_`` only
        (post-processing). Finite: ``noise_variance_`` is floored above 0, and a component
        whose private variance is at or below it is left out of the lemma (it adds nothing to
        the covariance).

        Returns
        -------
        ndarray of shape (n_features, n_features)
        """
        return self._probabilistic_model(what="get_precision").precision()

    @if_defined
    def score_samples(self, X: ArrayLike) -> NDArray[np.float64]:
        """Log-likelihood of each row under the probabilistic PCA model (free).

        ``−½(x − μ)ᵀ P (x − μ) − ½(p log 2π − log det P)``, ``μ = mean_``,
        ``P = get_precision()`` (Bishop, *Pattern Recognition and Machine Learning*, 12.2.1, as
        scikit-learn). Reads the released ``mean_``, ``scale_``, ``components_``,
        ``explained_variance_`` and private total variance: post-processing, no privacy cost
        (the rows of ``X`` are not protected by this estimator's record: they are yours).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        ndarray of shape (n_samples,)
        """
        check_is_fitted(self, "components_")
        Xv = validate_data(self, X, reset=False, dtype=np.float64)
        model = self._probabilistic_model(needs_mean=True, what="score_samples")
        Xr = Xv - self._model_mean("score_samples")
        precision = model.precision()
        sign, logdet = np.linalg.slogdet(precision)
        if sign <= 0:
            logdet = -math.inf
        p = Xr.shape[1]
        log_like = -0.5 * np.sum(Xr * (Xr @ precision), axis=1)
        log_like -= 0.5 * (p * math.log(2.0 * math.pi) - logdet)
        return np.asarray(log_like)

    @if_defined
    def score(self, X: ArrayLike, y: Any = None) -> float:
        """Mean log-likelihood of the rows under the probabilistic PCA model (free).

        The mean of :meth:`score_samples` (post-processing of released quantities).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : ignored

        Returns
        -------
        float
        """
        return float(np.mean(self.score_samples(X)))

    # ------------------------------------------------------------------ whitening
    def _whiten_scale(self) -> NDArray[np.float64]:
        """``√explained_variance_`` (at least machine ε, as scikit-learn), what ``whiten=True``
        divides the projections by; refused where no variances were released."""
        values = np.asarray(getattr(self, "explained_variance_", np.nan), dtype=np.float64)
        if not np.all(np.isfinite(values)):
            raise ValueError(
                f"{type(self).__name__}(whiten=True) divides the projections by "
                "sqrt(explained_variance_), and this fit released no variances "
                "(explained_variance_ is NaN: the papers' setting releases the basis only). "
                "Use whiten=False, or a setting that releases the variances.")
        scale = np.sqrt(np.maximum(values, 0.0))
        eps = np.finfo(np.float64).eps
        if np.any(scale < eps):
            warnings.warn(
                f"{type(self).__name__}(whiten=True): explained_variance_ is 0 for components "
                f"{np.flatnonzero(scale < eps).tolist()} (their variance is not resolved above "
                "the release's noise), so their projections are divided by machine epsilon. "
                "Use fewer components or a larger epsilon.", UserWarning, stacklevel=3)
        return np.where(scale < eps, eps, scale)
