"""DPS-PCA (Ge, Wang, Wang, Liu 2018): distributed private sparse PCA, simulated in one process.

:class:`DPSPCA` runs the protocol of :mod:`privpca.federated.protocol` with N providers held in
this process: every provider is a :class:`~privpca.federated.protocol.ProviderState` (its own
noise stream, its own release counter), the server a
:class:`~privpca.federated.protocol.ServerState`. The Flower application
(:mod:`privpca.federated.flower_app`) runs the very same two classes in separate processes or
machines; with the same seeds and split both give bitwise the same components.

Privacy (distributed model; replace one record of one provider, ‖x‖ ≤ D)
-------------------------------------------------------------------------
Each provider answers T queries ``Hᵢ = Σ̂ᵢQ + Gᵢ/nᵢ`` with its own ``Gᵢ`` i.i.d.
``N(0, (m·Δ)²)``: Δ = ``power_sensitivity(D, k)`` (``D²`` for k = 1, ``√2·D²`` for k ≥ 2) is the
Frobenius sensitivity of ``XᵢᵀXᵢQ`` for orthonormal Q, and m is the noise multiplier for which
T adaptive Gaussian releases compose to (ε, δ) under privpca's accounting (``dp-accounting``).
So each provider's data is (ε, δ)-DP against the untrusted server and anyone who sees the
output, whatever the other providers do; the data sets are disjoint, so every record in the
union is protected at (ε, δ). The numbers of records nᵢ are public (they are fixed by the
replace-one relation and used as weights). ``Q⁽⁰⁾`` is data-independent: free.
"""

from __future__ import annotations

import itertools
import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray
from sklearn.utils.validation import check_is_fitted, validate_data

from privpca._validation import (
    check_delta,
    check_epsilon,
    check_in_range,
    check_n_components,
    check_random_state,
)
from privpca.accounting.ledger import PrivacyLedger
from privpca.decomposition._base import BasePrivatePCA
from privpca.federated.protocol import (
    INITS,
    ProviderState,
    ServerState,
    dpspca_noise_multiplier,
    paper_noise_scale,
    provider_privacy_record,
)
from privpca.metrics import sin_theta

__all__ = ["DPSPCA"]


class DPSPCA(BasePrivatePCA):
    """Distributed private sparse PCA (DPS-PCA, Ge et al. 2018), providers simulated in-process.

    Algorithm 1 of the paper with one change for an untrusted server: every provider draws its
    own noise. For ``t = 1..T``: each provider i answers ``Hᵢ = Σ̂ᵢQ⁽ᵗ⁾ + Gᵢ/nᵢ``; the server
    combines ``K = Σ nᵢHᵢ/Σ nᵢ``, ``V = ThinQR(K)``, ``Q⁽ᵗ⁺¹⁾ = ThinQR(Threshold(V, ŝ))``.
    Output: ``Q⁽ᵀ⁺¹⁾``. See :mod:`privpca.federated.protocol` for the privacy analysis.

    Parameters
    ----------
    n_components : int, default=2
        k.
    epsilon : float, default=1.0
        ε > 0 of each provider's (ε, δ) guarantee (its T releases together).
    delta : float, default=1e-5
        0 < δ < 1.
    data_norm : float, default=1.0
        Public bound D on every record's L2 norm; longer rows are clipped (with a
        :class:`~privpca.exceptions.RowClippingWarning`).
    n_iter : int, default=10
        T, the number of rounds (= releases per provider), fixed in advance; the paper uses 10.
    n_nonzero : int or None, default=None
        ŝ, the rows kept by Threshold. ``None`` keeps all (no sparsity: a distributed noisy
        power method). The paper uses ŝ = 50 for s = 10 at d = 1000; choose it from public
        knowledge of the sparsity.
    n_providers : int, default=1
        Used by :meth:`fit` without ``groups``: the rows are cut into this many contiguous
        blocks of (nearly) equal size, one per provider. The default treats the data as one
        provider (the paper's §5 setting).
    init : {"random", "random-sparse"} or array of shape (n_features, n_components), \
default="random"
        Data-independent start ``Q⁽⁰⁾`` (see
        :meth:`privpca.federated.protocol.ServerState.initial`): ``"random"`` queries a dense
        Haar-random Q first; ``"random-sparse"`` thresholds it first (Algorithm 1 literally);
        an array is a public start. None costs privacy.
    random_state : None, int or numpy.random.Generator, default=None
        Seeds Q⁽⁰⁾ and one noise seed per provider (drawn in this order: Q⁽⁰⁾, then the N
        provider seeds as ``integers(0, 2**63)``), so a run can be replayed across processes.
    ledger : PrivacyLedger or None, default=None
        Where the spend is recorded (``None``: :func:`privpca.accounting.default_ledger`).

    Attributes
    ----------
    components_ : ndarray of shape (n_components, n_features)
        Orthonormal rows spanning ``Q⁽ᵀ⁺¹⁾`` (at most ŝ non-zero columns).
    history_ : ndarray of shape (n_iter + 1, n_components, n_features)
        ``Q⁽¹⁾`` (the start) and every iterate, as rows (post-processing: free). Use
        :meth:`sin_theta_path` for the error per iteration (the paper's Figure 3).
    n_iter_ : int
    n_providers_ : int
    provider_ids_ : list of str
    provider_n_samples_ : ndarray of int of shape (n_providers,)
    provider_seeds_ : list of int
        The noise seed of each provider (what a multi-process replay must be given).
    noise_multiplier_ : float
        m = σ/Δ per release.
    noise_scales_ : ndarray of shape (n_providers,)
        Standard deviation of each entry of ``Gᵢ/nᵢ`` (= m·Δ/nᵢ).
    paper_noise_scale_ : float
        The paper's ω(ε, δ) = (2T/ε)√(2 ln(2T/δ)) (std of G), for comparison only.
    privacy_ : PrivacyRecord
        Distributed model; the per-provider guarantee (every provider's is the same (ε, δ)).
    n_features_in_ : int

    References
    ----------
    J. Ge, Z. Wang, M. Wang, H. Liu. Minimax-optimal privacy-preserving sparse PCA in
    distributed systems. AISTATS 2018, Algorithms 1–3, Theorem 4.1.

    Examples
    --------
    >>> from privpca import DPSPCA
    >>> from privpca.datasets import make_dpspca_data
    >>> X, V = make_dpspca_data(4_000, 60, 2, 6, random_state=0)
    >>> est = DPSPCA(n_components=2, epsilon=1.0, n_nonzero=12, n_providers=3,
    ...              random_state=0).fit(X)
    >>> est.components_.shape, est.history_.shape, est.n_providers_
    ((2, 60), (11, 2, 60), 3)
    """

    def __init__(
        self,
        n_components: int = 2,
        *,
        epsilon: float = 1.0,
        delta: float = 1e-5,
        data_norm: float = 1.0,
        n_iter: int = 10,
        n_nonzero: int | None = None,
        n_providers: int = 1,
        init: Any = "random",
        random_state: Any = None,
        ledger: PrivacyLedger | None = None,
    ) -> None:
        self.n_components = n_components
        self.epsilon = epsilon
        self.delta = delta
        self.data_norm = data_norm
        self.n_iter = n_iter
        self.n_nonzero = n_nonzero
        self.n_providers = n_providers
        self.init = init
        self.random_state = random_state
        self.ledger = ledger

    def fit(self, X: ArrayLike, y: Any = None, *, groups: ArrayLike | None = None) -> DPSPCA:
        """Run DPS-PCA with providers given by ``groups`` (or ``n_providers`` equal blocks).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            All records. Not modified.
        y : ignored
        groups : array-like of shape (n_samples,) or None, default=None
            Provider label of each row; providers are ordered by sorted label (their ids are
            ``str(label)``). ``None``: ``n_providers`` contiguous blocks.

        Returns
        -------
        self
        """
        Xv = validate_data(self, X, dtype=np.float64, ensure_all_finite=False, reset=True)
        n = Xv.shape[0]
        if groups is None:
            n_prov = int(check_in_range(self.n_providers, "n_providers", low=1,
                                        low_closed=True, integer=True, owner=self))
            if n_prov > n:
                raise ValueError(
                    f"n_providers={n_prov} exceeds n_samples={n}: every provider needs at least "
                    "one record."
                )
            bounds = np.linspace(0, n, n_prov + 1).round().astype(int)
            parts = [Xv[a:b] for a, b in itertools.pairwise(bounds)]
            ids = [str(i) for i in range(n_prov)]
        else:
            g = np.asarray(groups)
            if g.shape != (n,):
                raise ValueError(f"groups must have shape ({n},); got {g.shape}.")
            labels = np.unique(g)
            parts = [Xv[g == lab] for lab in labels]
            ids = [str(lab) for lab in labels]
        return self._fit_parts(parts, ids)

    def fit_providers(self, datasets: Sequence[ArrayLike]) -> DPSPCA:
        """Run DPS-PCA with one provider per array of ``datasets`` (ids ``"0"``, ``"1"``, …).

        Parameters
        ----------
        datasets : sequence of array-like of shape (n_i, n_features)

        Returns
        -------
        self
        """
        if isinstance(datasets, np.ndarray) or len(datasets) == 0:
            raise ValueError("fit_providers expects a non-empty list of 2-D arrays.")
        parts = []
        for i, Xi in enumerate(datasets):
            parts.append(validate_data(self, Xi, dtype=np.float64, ensure_all_finite=False,
                                       reset=i == 0))
        return self._fit_parts(parts, [str(i) for i in range(len(parts))])

    def _fit_parts(self, parts: list[NDArray[np.float64]], ids: list[str]) -> DPSPCA:
        p = parts[0].shape[1]
        k = check_n_components(self.n_components, p, owner=self)
        epsilon = check_epsilon(self.epsilon, owner=self)
        delta = check_delta(self.delta, owner=self)
        data_norm = check_in_range(self.data_norm, "data_norm", low=0.0, owner=self)
        T = int(check_in_range(self.n_iter, "n_iter", low=1, low_closed=True, integer=True,
                               owner=self))
        s_hat = p if self.n_nonzero is None else int(
            check_in_range(self.n_nonzero, "n_nonzero", low=k, high=p, low_closed=True,
                           high_closed=True, integer=True, owner=self)
        )
        if isinstance(self.init, str):
            if self.init not in INITS:
                raise ValueError(
                    f"The 'init' parameter of {type(self).__name__} must be a str among "
                    f"{sorted(INITS)} or an array of shape ({p}, {k}). Got {self.init!r} instead."
                )
        else:
            init = np.asarray(self.init, dtype=np.float64)
            if init.shape != (p, k) or not np.all(np.isfinite(init)):
                raise ValueError(
                    f"The 'init' parameter of {type(self).__name__} must be a str among "
                    f"{sorted(INITS)} or a finite array of shape ({p}, {k}). Got an array of "
                    f"shape {init.shape} instead."
                )
        rng = check_random_state(self.random_state)

        start = ServerState.initial(p, k, s_hat, self.init, rng)
        seeds = [int(s) for s in rng.integers(0, 2**63, size=len(parts))]
        providers = []
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            for part, pid, seed in zip(parts, ids, seeds, strict=True):
                providers.append(ProviderState(
                    part, n_components=k, epsilon=epsilon, delta=delta, n_rounds=T,
                    data_norm=data_norm, noise_seed=seed, provider_id=pid,
                ))
        n_clipped = sum(pr.n_clipped for pr in providers)
        _reemit(caught, n_clipped, sum(pr.n_samples for pr in providers), data_norm, self)

        record = provider_privacy_record(
            epsilon=epsilon, delta=delta, n_rounds=T, n_components=k, data_norm=data_norm,
            n_samples=sum(pr.n_samples for pr in providers), n_clipped=n_clipped,
            n_providers=len(providers),
        )
        self.privacy_ = record
        self._charge(record, self.ledger)

        server = ServerState(p, k, s_hat, T, start)
        while not server.finished:
            query = server.query()
            server.aggregate([pr.answer_query(query) for pr in providers])

        self.components_ = server.components()
        self.history_ = np.stack([Q.T for Q in server.history])
        self.n_iter_ = T
        self.n_nonzero_ = s_hat
        self.n_providers_ = len(providers)
        self.provider_ids_ = ids
        self.provider_n_samples_ = np.array([pr.n_samples for pr in providers])
        self.provider_seeds_ = seeds
        self.noise_multiplier_ = dpspca_noise_multiplier(epsilon, delta, T)
        self.noise_scales_ = np.array([pr.noise_scale for pr in providers])
        self.paper_noise_scale_ = paper_noise_scale(epsilon, delta, T)
        return self

    def sin_theta_path(self, V: ArrayLike) -> NDArray[np.float64]:
        """``‖sin Θ(Q⁽ᵗ⁾, V)‖_F`` for t = 1..T+1 (the paper's Figure 3 against truth ``V``).

        Parameters
        ----------
        V : array-like of shape (n_features, n_components)
            The true basis (orthonormal columns).

        Returns
        -------
        ndarray of shape (n_iter + 1,)
            Entry 0 is the start ``Q⁽¹⁾``, entry t the iterate after t rounds.
        """
        check_is_fitted(self, "history_")
        return np.array([sin_theta(Q.T, V) for Q in self.history_])


def _reemit(caught: list[warnings.WarningMessage], n_clipped: int, n: int, data_norm: float,
            owner: object) -> None:
    """One clipping warning for the whole fit (not one per provider); others re-raised as is."""
    from privpca.exceptions import RowClippingWarning

    for w in caught:
        if not issubclass(w.category, RowClippingWarning):
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    if n_clipped:
        warnings.warn(
            f"{n_clipped} of {n} rows passed to {type(owner).__name__} had an L2 norm above "
            f"data_norm={data_norm:g} and were clipped to it. The privacy guarantee holds; the "
            "estimate is biased. Rescale your data or raise data_norm (which adds noise) if "
            "this is unexpected.",
            RowClippingWarning,
            stacklevel=4,
        )
