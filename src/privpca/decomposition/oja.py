"""Oja's algorithm (non-private reference) and Private Oja (Liu, Kong, Jain & Oh 2022, Alg. 1–2).

Both make one pass over the records in a random order, to rank k by block Oja (``ThinQR`` in
place of the normalisation; Liu et al. treat k = 1 and leave k > 1 open, §7).

Private Oja: privacy (central model, replace one record)
--------------------------------------------------------
Step t uses only record π(t): ``W ← QR(W + η_t·clip_β(A W) + 2η_tβα·Z)``, ``Z`` i.i.d.
``N(0, 1)`` of shape p×k, ``clip_β`` scaling the p×k block to Frobenius norm ≤ β. Replacing the
record moves ``η_t·clip_β(AW)`` by at most ``2η_tβ`` (two blocks of norm ≤ β), so every step is
a Gaussian mechanism with noise multiplier ``α`` on one record, chosen adaptively from the
previous outputs — a *local randomiser* in the sense of amplification by shuffling.

* ``amplification="shuffle"`` (the paper's Algorithm 2): the records are shuffled, so by
  Feldman–McMillan–Talwar (Theorem D.1 of the paper; :mod:`privpca.mechanisms.shuffling`) the
  released trajectory is (ε, δ)-DP when each step is (ε₀, δ₀)-DP with ε₀ solved numerically
  from the bound. ``α`` is then the analytic Gaussian multiplier for (ε₀, δ₀). Refused with a
  clear error where the bound does not apply (ε too large for n, as the paper's
  ``ε = O(√(log(n/δ)/n))``).
* ``amplification="none"`` [derived, ALGORITHMS.md]: each record enters exactly one step and
  the other steps do not read it, so (ε, δ) per step is (ε, δ) overall: ``α = σ(ε, δ)``.
  Valid for every ε; more noise than shuffling where shuffling applies.

The paper's clipping threshold ``β = Cλ₁√d(Kγ·log^a(nd/ζ) + 1)`` needs λ₁ and C, which users
do not know; ``clip_norm`` is β itself. For records with ``‖x‖ ≤ D`` and orthonormal W,
``‖x xᵀW‖_F ≤ D²``, so ``clip_norm = D²`` never clips.
"""

from __future__ import annotations

import math
import warnings
from typing import Any

import dp_accounting
import numpy as np
from numpy.typing import NDArray

from privpca._validation import check_delta, check_epsilon, check_in_range, check_options
from privpca.accounting.ledger import PrivacyLedger
from privpca.accounting.record import PrivacyRecord, PrivacySpend
from privpca.decomposition._stochastic import StochasticPCA
from privpca.exceptions import RowClippingWarning
from privpca.mechanisms.shuffling import local_epsilon_for_shuffling
from privpca.solvers.eigen import fix_signs
from privpca.solvers.oja import (
    GradientSource,
    LearningRate,
    VectorGradients,
    block_oja_update,
    resolve_learning_rate,
)
from privpca.solvers.power import thin_qr

__all__ = ["OjaPCA", "PrivateOjaPCA"]

REPLACE_ONE = "replace one record (central model)"
#: η_t = c1/(c2 + t). c1 ≈ 1/(λ₁ − λ₂) for data whose eigengap is of order 1 (Jain et al.'s
#: α/((λ₁−λ₂)(ξ+t)) with α ≈ 1); c2 damps the first, nearly random, steps.
DEFAULT_LEARNING_RATE = LearningRate(c1=2.0, c2=100.0)
_RENORMALISE_EVERY = 64


def _check_batch_size(value: Any, owner: object) -> int:
    return int(check_in_range(value, "batch_size", low=1, low_closed=True, integer=True,
                              owner=owner))


class OjaPCA(StochasticPCA):
    """Non-private Oja's algorithm (Liu et al., Algorithm 1), to rank k by block Oja.

    One pass over the records in a random order: ``W ← ThinQR(W + η_t·A_t W)`` with
    ``η_t = c1/(c2 + t)``; ``W₀`` is uniform on the Stiefel manifold. With ``batch_size = b``
    the gradient is the mean over b records per step (⌊n/b⌋ steps).

    Parameters
    ----------
    n_components : int, default=1
        Dimension k of the subspace.
    learning_rate : "auto", float or (float, float), default="auto"
        ``(c1, c2)`` of ``η_t = c1/(c2 + t)``; a float sets c1 only; ``"auto"`` is (2, 100),
        suited to data whose eigengap ``λ_k − λ_{k+1}`` is of order 1. Rescale c1 by
        ``1/scale`` when the data are scaled by ``√scale`` (e.g. rows normalised to unit
        norm in high dimension have small eigenvalues).
    batch_size : int, default=1
        Records per step (1 is Algorithm 1).
    random_state : None, int or numpy.random.Generator, default=None
        Source of the order of the records and of ``W₀``.

    Attributes
    ----------
    components_ : ndarray of shape (n_components, n_features)
        Orthonormal rows spanning the estimate.
    n_iter_ : int
        Number of steps taken.
    learning_rate_ : LearningRate
        The schedule used.
    privacy_ : PrivacyRecord
        ε = ∞: non-private (a budgeted ledger refuses it).
    n_features_in_ : int

    References
    ----------
    E. Oja. Simplified neuron model as a principal component analyzer. J. Math. Biology, 1982.
    P. Jain et al. Streaming PCA: matching matrix Bernstein and near-optimal finite sample
    guarantees for Oja's algorithm. COLT 2016.

    Examples
    --------
    >>> from privpca import OjaPCA
    >>> from privpca.datasets import make_spiked
    >>> X, V = make_spiked(20_000, 10, 1, lam=9.0, random_state=0)
    >>> OjaPCA(random_state=0).fit(X).components_.shape
    (1, 10)
    """

    def __init__(
        self,
        n_components: int = 1,
        *,
        learning_rate: Any = "auto",
        batch_size: int = 1,
        random_state: Any = None,
        ledger: PrivacyLedger | None = None,
    ) -> None:
        self.n_components = n_components
        self.learning_rate = learning_rate
        self.batch_size = batch_size
        self.random_state = random_state
        self.ledger = ledger

    def _fit_source(self, source: GradientSource) -> OjaPCA:
        _k, rng, W = self._start(source)
        lr = resolve_learning_rate(self.learning_rate, DEFAULT_LEARNING_RATE, owner="OjaPCA")
        b = _check_batch_size(self.batch_size, self)
        n = source.n_samples
        order = rng.permutation(n)
        self.privacy_ = PrivacyRecord.non_private(
            n, "Non-private Oja's algorithm: no noise, no guarantee (an infinite spend)."
        )
        self._charge(self.privacy_, self.ledger)
        if b == 1 and isinstance(source, VectorGradients):
            W, steps = _oja_single_pass(source.X, order, W, lr)
        else:
            steps = n // b
            for t in range(1, steps + 1):
                idx = order[(t - 1) * b : t * b]
                W = block_oja_update(W, lr(t) * source.mean_gradient(idx, W))
        self.components_ = fix_signs(W).T.copy()
        self.n_iter_ = steps
        self.learning_rate_ = lr
        return self


def _oja_single_pass(
    X: NDArray[np.float64], order: NDArray[np.intp], W: NDArray[np.float64], lr: LearningRate
) -> tuple[NDArray[np.float64], int]:
    """Algorithm 1 with one record per step.

    ``W ← (I + η x xᵀ) W`` is linear in W, so for k > 1 orthonormalising only every few steps
    gives the same column space as doing it every step (``QR`` is a right-multiplication by
    R⁻¹); it is done every 64 steps, or after any step that can more than double a column, to
    keep the numbers in range. For k = 1 the normalisation is one scalar and done every step.
    """
    n = len(order)
    etas = lr(np.arange(1, n + 1, dtype=np.float64))
    k = W.shape[1]
    chunk = 8192
    if k == 1:
        w = W[:, 0].copy()
        for start in range(0, n, chunk):
            Xc = X[order[start : start + chunk]]
            eta_c = etas[start : start + chunk]
            for i in range(Xc.shape[0]):
                x = Xc[i]
                w += (eta_c[i] * float(x @ w)) * x
                w /= math.sqrt(float(w @ w))
        return w[:, None], n
    for start in range(0, n, chunk):
        Xc = X[order[start : start + chunk]]
        eta_c = etas[start : start + chunk]
        for i in range(Xc.shape[0]):
            x = Xc[i]
            W += np.outer(x, eta_c[i] * (x @ W))
            if i % _RENORMALISE_EVERY == 0 or eta_c[i] * float(x @ x) > 1.0:
                W = thin_qr(W)
    return thin_qr(W), n


class PrivateOjaPCA(StochasticPCA):
    """Private Oja's algorithm (Liu et al., Algorithm 2): clipping, Gaussian noise, shuffling.

    One pass in a uniformly random order; step t: ``W ← QR(W + η_t·clip_β(A_t W) +
    2η_tβα·Z_t)``. The module docstring gives the privacy analysis.

    Parameters
    ----------
    n_components : int, default=1
        Dimension k (block Oja for k > 1; each step privatises the p×k gradient block).
    epsilon : float, default=1.0
        ε > 0 of the overall guarantee.
    delta : float, default=1e-5
        0 < δ < 1.
    clip_norm : float, default=1.0
        β: each gradient block ``A_t W`` is scaled to Frobenius norm ≤ β (no norm bound on
        the data is needed). ``clip_norm = D²`` never clips records with ``‖x‖ ≤ D``.
    amplification : {"shuffle", "none"}, default="shuffle"
        Privacy argument (module docstring). ``"shuffle"`` raises
        :class:`~privpca.mechanisms.shuffling.ShufflingBoundError` where FMT's bound does not
        apply.
    learning_rate : "auto", float or (float, float), default="auto"
        As in :class:`OjaPCA`.
    random_state : None, int or numpy.random.Generator, default=None
        Source of the order, ``W₀`` and the noise.
    ledger : PrivacyLedger or None, default=None
        Where the spend is recorded.

    Attributes
    ----------
    components_ : ndarray of shape (n_components, n_features)
    noise_multiplier_ : float
        α (noise std over the per-step sensitivity 2ηβ).
    local_epsilon_ : float
        ε₀ of each step (equal to ε without amplification).
    n_clipped_ : int
        How many gradient blocks were clipped (also in ``privacy_.n_clipped``).
    learning_rate_ : LearningRate
    privacy_ : PrivacyRecord
        The shuffled (or per-step) guarantee. Its ``dp_event`` is the per-step Gaussian
        (valid without amplification), used when a ledger composes several fits.
    n_features_in_ : int

    References
    ----------
    X. Liu, W. Kong, P. Jain, S. Oh. DP-PCA: Statistically optimal and differentially private
    PCA. NeurIPS 2022, Algorithm 2 and Theorem D.1.
    V. Feldman, A. McMillan, K. Talwar. Hiding among the clones: a simple and nearly optimal
    analysis of privacy amplification by shuffling. FOCS 2021, Theorem 3.8.

    Examples
    --------
    >>> from privpca import PrivateOjaPCA
    >>> from privpca.datasets import make_spiked
    >>> X, V = make_spiked(20_000, 10, 1, lam=9.0, random_state=0)
    >>> est = PrivateOjaPCA(epsilon=0.5, random_state=0).fit(X)
    >>> round(est.privacy_.epsilon, 3) <= 0.5
    True
    """

    def __init__(
        self,
        n_components: int = 1,
        *,
        epsilon: float = 1.0,
        delta: float = 1e-5,
        clip_norm: float = 1.0,
        amplification: str = "shuffle",
        learning_rate: Any = "auto",
        random_state: Any = None,
        ledger: PrivacyLedger | None = None,
    ) -> None:
        self.n_components = n_components
        self.epsilon = epsilon
        self.delta = delta
        self.clip_norm = clip_norm
        self.amplification = amplification
        self.learning_rate = learning_rate
        self.random_state = random_state
        self.ledger = ledger

    def _fit_source(self, source: GradientSource) -> PrivateOjaPCA:
        epsilon = check_epsilon(self.epsilon, owner=self)
        delta = check_delta(self.delta, owner=self)
        beta = check_in_range(self.clip_norm, "clip_norm", low=0.0, owner=self)
        amplification = check_options(
            self.amplification, "amplification", ("shuffle", "none"), owner=self
        )
        lr = resolve_learning_rate(
            self.learning_rate, DEFAULT_LEARNING_RATE, owner="PrivateOjaPCA"
        )
        k, rng, W = self._start(source)
        n = source.n_samples
        if amplification == "shuffle":
            guarantee = local_epsilon_for_shuffling(epsilon, delta, n)
            eps0, delta0 = guarantee.epsilon0, guarantee.delta0
            certified, calibration = guarantee.epsilon, "analytic + shuffling (FMT Thm 3.8)"
        else:
            eps0, delta0 = epsilon, delta
            certified, calibration = epsilon, "analytic (one step per record)"
        alpha = float(dp_accounting.get_sigma_gaussian(eps0, delta0))

        order = rng.permutation(n)  # Algorithm 2, line 1 (and what shuffling assumes)
        etas = lr(np.arange(1, n + 1, dtype=np.float64))
        noise_sd = 2.0 * beta * alpha  # per unit of η
        n_clipped = 0
        chunk = 4096
        p = source.n_features
        for start in range(0, n, chunk):
            idx = order[start : start + chunk]
            Z = rng.standard_normal((len(idx), p, k))
            X_chunk = source.X[idx] if isinstance(source, VectorGradients) else None
            for i, rec in enumerate(idx):
                if X_chunk is not None:
                    x = X_chunk[i]
                    G = np.outer(x, x @ W)
                else:
                    G = source.gradients(np.array([rec]), W).reshape(p, k)
                norm = float(np.linalg.norm(G))
                if norm > beta:
                    G *= beta / norm
                    n_clipped += 1
                eta = etas[start + i]
                W = block_oja_update(W, eta * G + (eta * noise_sd) * Z[i])
        if n_clipped:
            warnings.warn(
                f"{n_clipped} of {n} gradient blocks had a norm above clip_norm={beta:g} and "
                "were clipped. The privacy guarantee holds; the estimate is biased. Raise "
                "clip_norm (more noise) or rescale the data if this is unexpected.",
                RowClippingWarning,
                stacklevel=3,
            )
        spend = PrivacySpend(
            mechanism="gaussian: one clipped gradient step per record (local randomiser)",
            epsilon=certified,
            delta=delta,
            sensitivity=2.0 * beta,
            noise_scale=noise_sd,
            dp_event=dp_accounting.GaussianDpEvent(alpha),
        )
        self.privacy_ = PrivacyRecord(
            epsilon=certified,
            delta=delta,
            model="central",
            neighbouring=REPLACE_ONE,
            sensitivity=2.0 * beta,
            noise_scale=noise_sd,
            calibration=calibration,
            data_norm=math.sqrt(beta),
            n_samples=int(n),
            n_clipped=n_clipped,
            spends=(spend,),
            target_epsilon=epsilon,
            notes=(
                f"Each step adds N(0, (2·eta_t·beta·alpha)²) to eta_t·clip_beta(A W) with "
                f"beta={beta:g}, alpha={alpha:.4g}: a ({eps0:.4g}, {delta0:.3g})-DP local "
                "randomiser per record. "
                + (
                    f"Shuffling n={n} records amplifies it to ({certified:.4g}, {delta:g}) "
                    "(Feldman-McMillan-Talwar Thm 3.8). "
                    if amplification == "shuffle"
                    else "Each record enters one step only, so this is the overall guarantee. "
                )
                + "data_norm is sqrt(clip_norm): the record norm that clipping never touches. "
                "When composed with other fits the per-step Gaussian event (no amplification) "
                "is used, which is conservative."
            ),
        )
        self._charge(self.privacy_, self.ledger)
        self.components_ = fix_signs(W).T.copy()
        self.noise_multiplier_ = alpha
        self.local_epsilon_ = eps0
        self.n_clipped_ = n_clipped
        self.n_iter_ = n
        self.learning_rate_ = lr
        return self
