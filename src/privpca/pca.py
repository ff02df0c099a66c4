"""The front door: :class:`PCA`, one estimator that picks the mechanism for the trust model.

``privpca.PCA(n_components, epsilon=..., delta=..., model=...)`` is scikit-learn's ``PCA``
signature plus the privacy budget and the trust model. It chooses one of the private
estimators of :data:`privpca._registry.PRIVATE_ESTIMATORS` by :func:`select_mechanism`, a
rule on public quantities only, fits it, and forwards its fitted attributes.

The rule (docs/FRONT_DOOR.md has the measurements behind it)
------------------------------------------------------------
1. ``mechanism`` names one (its CLI name, e.g. ``"noisy-power"``): that one, provided its
   trust model is allowed by ``model`` (a local mechanism may run wherever a curator is
   trusted; a central one only in the central model).
2. ``model="local"``: :class:`~privpca.LocalGaussianPCA` (Wang & Xu's protocol: every user
   randomises their own row; nobody is trusted).
3. ``model="distributed"``: :class:`~privpca.DPSPCA` (each provider adds its own noise; the
   server is not trusted).
4. ``model="central"`` and ``delta == 0``: :class:`~privpca.BinghamPCA`, the exponential
   mechanism, the only pure ε-DP mechanism here. The private mean and norm bound are
   Gaussian releases (δ > 0), so pure ε-DP needs a public centre and bound:
   ``options={"centering": None, "data_norm": D}``.
5. ``model="central"`` and ``n_features > MAX_GRAM_FEATURES`` (4096):
   :class:`~privpca.NoisyPowerPCA` with ``solver="data"``, which never forms a p×p matrix.
6. otherwise (central, δ > 0, p ≤ 4096): :class:`~privpca.AnalyzeGaussPCA`, the most
   accurate of the central mechanisms in our measurements (README's table: 0.043 against
   noisy power's 0.131 at n = 10⁴), at the cost of a p×p noisy Gram matrix and its
   eigendecomposition.
"""

from __future__ import annotations

import inspect
import warnings
from typing import Any, ClassVar

import numpy as np
from numpy.typing import ArrayLike, NDArray
from sklearn.base import BaseEstimator, ClassNamePrefixFeaturesOutMixin, TransformerMixin
from sklearn.utils.validation import _check_feature_names, check_is_fitted

from privpca._registry import PRIVATE_ESTIMATORS, TRUST_MODELS
from privpca._validation import check_options
from privpca.accounting.ledger import PrivacyLedger
from privpca.decomposition._base import BasePrivatePCA
from privpca.decomposition._constraints import DELTA_OR_ZERO, EPSILON, WHITEN
from privpca.decomposition._incremental import (
    CHANGED,
    in_stream,
    same_stream_parameters,
    stream_refusal,
)
from privpca.decomposition._probabilistic import if_defined

__all__ = ["MAX_GRAM_FEATURES", "PCA", "select_mechanism"]

#: Trust models, from the most trusting: a mechanism of a later model also protects the rows
#: in an earlier one (a row randomised by its user is private against a curator too).
MODELS: tuple[str, ...] = ("central", "distributed", "local")

#: Above this many features the central model uses the noisy power method. Analyze Gauss holds
#: about five p×p float64 matrices (Gram, noise, their sum, the eigensolver's copies: 145 MiB
#: above the data at p = 2000) and runs two O(p³) symmetric eigensolvers (15 s at p = 2000,
#: 1.7 s at p = 1000: one fit in a fresh process, 2-core machine). At p = 4096 about 0.6 GiB
#: and two minutes; beyond, memory and time grow as p² and p³ while the noisy power method's
#: ``Xᵀ(XQ)`` passes need O(npk) time per iteration and no p×p matrix.
MAX_GRAM_FEATURES = 4096

#: Fitted attributes copied from the chosen estimator when it has them (any other is on
#: ``estimator_``).
FORWARDED: tuple[str, ...] = (
    "components_", "n_components_", "explained_variance_", "explained_variance_ratio_",
    "mean_", "scale_", "data_norm_", "noise_level_", "expected_error_", "noise_scale_",
    "total_variance_", "noise_sd_per_entry_", "privacy_", "n_features_in_",
    "feature_names_in_", "n_samples_seen_",
)

#: scikit-learn's probabilistic PCA attributes, computed by the chosen estimator from its
#: released quantities (:mod:`privpca.decomposition._probabilistic`): read from ``estimator_``
#: on access (properties of :class:`PCA`), so that where the fit does not define one the
#: estimator's AttributeError, which says why, is the one raised.
DELEGATED: tuple[str, ...] = ("n_samples_", "noise_variance_", "singular_values_")

#: What the rule sets on the mechanism it chooses (a mechanism asked for by name keeps its own
#: defaults): the noisy power method chosen for a wide table never forms a p×p matrix.
AUTO_OPTIONS: dict[str, dict[str, Any]] = {"noisy-power": {"solver": "data"}}

#: The parameters PCA passes itself; ``options`` may not repeat them.
OWN_PARAMETERS: tuple[str, ...] = ("n_components", "epsilon", "delta", "whiten", "random_state",
                                   "ledger")


def select_mechanism(n_features: int | None, *, delta: float, model: str = "central",
                     mechanism: str = "auto", owner: object | None = None) -> tuple[str, str]:
    """The mechanism :class:`PCA` fits, and why, from public quantities only.

    Parameters
    ----------
    n_features : int or None
        The table's number of columns (public: its shape), or None when unknown (an input
        that is not a table; the estimator then refuses it with its own message).
    delta : float
        The requested δ (0: pure ε-DP).
    model : {"central", "distributed", "local"}, default="central"
        Who may see raw rows: a trusted curator, each data provider its own, or nobody.
    mechanism : str, default="auto"
        ``"auto"``, or a CLI name of :data:`privpca._registry.PRIVATE_ESTIMATORS`.
    owner : object or None, default=None
        The estimator named in error messages.

    Returns
    -------
    name : str
        The CLI name of the chosen estimator.
    reason : str
        One sentence saying why.

    Raises
    ------
    ValueError
        For an unknown model or mechanism, a mechanism that needs more trust than ``model``
        grants, or ``delta=0`` outside the central model.

    Examples
    --------
    >>> select_mechanism(20, delta=1e-5)[0]
    'analyze-gauss'
    >>> select_mechanism(20, delta=0.0)[0]
    'bingham'
    >>> select_mechanism(10_000, delta=1e-5)[0]
    'noisy-power'
    >>> select_mechanism(20, delta=1e-5, model="local")[0]
    'local-gaussian'
    """
    check_options(model, "model", MODELS, owner=owner)
    check_options(mechanism, "mechanism", ("auto", *PRIVATE_ESTIMATORS), owner=owner)
    if mechanism != "auto":
        needs = TRUST_MODELS[mechanism]
        if MODELS.index(needs) < MODELS.index(model):
            raise ValueError(
                f"mechanism={mechanism!r} runs in the {needs} model: it needs more trust than "
                f"model={model!r} grants. Choose a mechanism of the {model} model "
                f"({', '.join(n for n, m in TRUST_MODELS.items() if m == model)}) or "
                "mechanism='auto'."
            )
        return mechanism, f"mechanism={mechanism!r} was asked for."
    if model != "central" and delta == 0:
        raise ValueError(
            f"delta=0 (pure epsilon-DP) has no mechanism in the {model} model: its "
            "mechanisms add Gaussian noise. Give delta > 0, or model='central' (BinghamPCA)."
        )
    if model == "local":
        return "local-gaussian", (
            "model='local': every user randomises their own row (Wang & Xu's Gaussian "
            "protocol); nobody sees raw rows."
        )
    if model == "distributed":
        return "dps-pca", (
            "model='distributed': each data provider adds its own noise (DPS-PCA); the "
            "server sees no raw rows."
        )
    if delta == 0:
        return "bingham", (
            "delta=0: the exponential mechanism (matrix Bingham) is the only pure epsilon-DP "
            "mechanism."
        )
    if n_features is not None and n_features > MAX_GRAM_FEATURES:
        return "noisy-power", (
            f"n_features={n_features} > {MAX_GRAM_FEATURES}: a p x p Gram matrix and its "
            "eigendecomposition are too large; the noisy power method forms none."
        )
    return "analyze-gauss", (
        "central model, delta > 0, n_features <= "
        f"{MAX_GRAM_FEATURES}: Analyze Gauss is the most accurate central mechanism."
    )


def _n_features(X: Any) -> int | None:
    """The number of columns of ``X`` from its shape (public), without reading its values."""
    from privpca.streaming import as_row_source, is_streamed

    if is_streamed(X):
        return int(as_row_source(X).n_features)
    shape = getattr(X, "shape", None)
    if shape is None:
        try:
            shape = np.shape(X)
        except (TypeError, ValueError):  # ragged or not array-like: the estimator refuses it
            return None
    return int(shape[1]) if len(shape) == 2 else None


class PCA(ClassNamePrefixFeaturesOutMixin, TransformerMixin, BaseEstimator):
    """Private PCA with scikit-learn's signature: it picks the mechanism for the trust model.

    The mechanism is chosen by :func:`select_mechanism` from **public** quantities only: the
    number of features (the table's shape), ``delta``, ``model`` and ``mechanism``, never
    from a value of the data, so the choice itself reveals nothing. In short: Analyze Gauss
    in the central model; Bingham (the exponential mechanism) when ``delta=0``; the noisy
    power method above :data:`MAX_GRAM_FEATURES` features; the local protocol
    (:class:`~privpca.LocalGaussianPCA`) for ``model="local"``; DPS-PCA for
    ``model="distributed"`` (docs/FRONT_DOOR.md).

    Parameters
    ----------
    n_components : int or float, default=2
        Dimension k of the subspace (a float in (0, 1) where the chosen estimator accepts
        one, as Analyze Gauss does).
    epsilon : float, default=1.0
        ε > 0 of the guarantee of the whole fit.
    delta : float, default=1e-5
        δ of the guarantee; 0 asks for pure ε-DP (Bingham, with a public centre and bound in
        ``options``: ``{"centering": None, "data_norm": D}``).
    model : {"central", "distributed", "local"}, default="central"
        The trust model: a curator sees the raw rows; each provider sees only its own; nobody
        does (each user randomises their own row).
    mechanism : str, default="auto"
        ``"auto"`` (the rule above) or a CLI name of
        :data:`privpca._registry.PRIVATE_ESTIMATORS` (``"analyze-gauss"``, ``"bingham"``,
        ``"noisy-power"``, ``"local-gaussian"``, ``"dps-pca"``, ...), refused when it needs
        more trust than ``model`` grants.
    options : dict or None, default=None
        Further parameters of the chosen estimator (``centering``, ``data_norm``,
        ``scale``, ``n_iter``, ...), passed as they are.
    whiten : bool, default=False
        scikit-learn's ``whiten``, passed to the chosen estimator: ``transform`` divides the
        projections by ``sqrt(explained_variance_)`` and ``inverse_transform`` multiplies them
        back (post-processing of released values; the fit is the same either way). Handed over
        at ``fit``: on a fitted PCA, ``estimator_.set_params(whiten=...)`` changes it at once.
    random_state : None, int or numpy.random.Generator, default=None
        Source of the noise (leave it out for a real release).
    ledger : PrivacyLedger or None, default=None
        Where the chosen estimator records its spend (``None``:
        :func:`privpca.accounting.default_ledger`).

    Attributes
    ----------
    estimator_ : BasePrivatePCA
        The fitted estimator that was chosen; every fitted attribute of it is there.
    mechanism_ : str
        Its CLI name (``"analyze-gauss"``, ...).
    selection_reason_ : str
        Why it was chosen (one sentence).
    components_ : ndarray of shape (n_components_, n_features)
    n_components_ : int
    explained_variance_, explained_variance_ratio_ : ndarray of shape (n_components_,)
    mean_ : ndarray of shape (n_features,)
    scale_ : ndarray of shape (n_features,) or None
    data_norm_, noise_level_, expected_error_, noise_scale_ : float
    total_variance_, noise_sd_per_entry_ : float
        Where the chosen estimator has them (see its documentation).
    privacy_ : PrivacyRecord
        The chosen estimator's record, the very one its ledger holds: the choice is in
        ``mechanism_`` and ``selection_reason_``, not in the record, so the ledger and
        ``privacy_`` stay one object.
    n_features_in_ : int
    feature_names_in_ : ndarray of shape (n_features_in_,)
        Defined when ``X`` has column names (a DataFrame).
    n_samples_ : int
    noise_variance_ : float
    singular_values_ : ndarray of shape (n_components_,)
        scikit-learn's, read from ``estimator_`` (its documentation and
        :mod:`privpca.decomposition._probabilistic`): computed from released quantities only
        (free), absent with the reason where the fit released too little (no variances in the
        papers' settings, no total, or a private n).

    ``get_covariance``, ``get_precision``, ``score_samples`` and ``score`` are the chosen
    estimator's, scikit-learn's probabilistic PCA model on the released quantities.

    ``partial_fit`` (fitting in batches, scikit-learn's ``IncrementalPCA``) is offered where
    the choice is Analyze Gauss with a public numeric ``data_norm`` in ``options``
    (:meth:`AnalyzeGaussPCA.partial_fit <privpca.AnalyzeGaussPCA.partial_fit>`); the chosen
    estimator's ``n_samples_seen_`` is then forwarded too.

    Examples
    --------
    >>> import privpca
    >>> from privpca.datasets import make_spiked
    >>> X, V = make_spiked(5_000, 10, 2, lam=9.0, random_state=0)
    >>> est = privpca.PCA(2, epsilon=1.0, random_state=0).fit(X + 5.0)
    >>> est.mechanism_, type(est.estimator_).__name__
    ('analyze-gauss', 'AnalyzeGaussPCA')
    >>> est.transform(X).shape, list(est.get_feature_names_out())
    ((5000, 2), ['pca0', 'pca1'])
    """

    #: scikit-learn's declaration. Only ``whiten`` is checked here: the chosen estimator
    #: checks its own parameters (with its own declaration, before anything is spent), and
    #: :func:`select_mechanism` checks ``model`` and ``mechanism``.
    _parameter_constraints: ClassVar[dict[str, Any]] = {
        "n_components": "no_validation",
        "epsilon": EPSILON,  # declared here too, so that a refusal names PCA
        "delta": DELTA_OR_ZERO,
        "model": "no_validation",
        "mechanism": "no_validation",
        "options": "no_validation",
        "whiten": WHITEN,
        "random_state": "no_validation",
        "ledger": "no_validation",
    }

    def __init__(
        self,
        n_components: int | float = 2,
        *,
        epsilon: float = 1.0,
        delta: float = 1e-5,
        model: str = "central",
        mechanism: str = "auto",
        options: dict[str, Any] | None = None,
        whiten: bool = False,
        random_state: Any = None,
        ledger: PrivacyLedger | None = None,
    ) -> None:
        self.n_components = n_components
        self.epsilon = epsilon
        self.delta = delta
        self.model = model
        self.mechanism = mechanism
        self.options = options
        self.whiten = whiten
        self.random_state = random_state
        self.ledger = ledger

    def _chosen(self, X: Any) -> tuple[str, str, BasePrivatePCA]:
        """The mechanism's name, the reason, and an unfitted estimator with its parameters."""
        name, reason = select_mechanism(_n_features(X), delta=self.delta, model=self.model,
                                        mechanism=self.mechanism, owner=self)
        cls = PRIVATE_ESTIMATORS[name]
        whiten: dict[str, Any] = {}
        if "whiten" in inspect.signature(cls).parameters:
            whiten["whiten"] = self.whiten
        elif self.whiten:
            raise ValueError(f"whiten=True: {cls.__name__} (mechanism {name!r}) takes no "
                             "'whiten' parameter.")
        # A share or None refused by a mechanism that takes no share at all: say why. Any
        # other refused value (0, 1.0, 7 of 6 columns) gets the mechanism's own range message.
        share = self.n_components is None or isinstance(self.n_components, float)
        if (share and not _accepts(cls, "n_components", self.n_components)
                and not _accepts(cls, "n_components", 0.5)):
            raise ValueError(
                f"n_components={self.n_components!r}: the mechanism chosen for this table, "
                f"{name!r} ({reason.rstrip('.')}), takes only a whole number of components: "
                "it releases no spectrum to choose k from. Pass an int, e.g. n_components=2.")
        options, params = self._options(name), set(cls().get_params())
        if unknown := sorted(set(options) - params):
            raise ValueError(
                f"options {unknown} are not parameters of the mechanism chosen for this "
                f"table, {name!r} ({cls.__name__}: {reason.rstrip('.')}); its parameters: "
                f"{sorted(params - set(OWN_PARAMETERS))}. Fix the mechanism with "
                "mechanism=... to pass options of another one.")
        estimator = cls(
            n_components=self.n_components, epsilon=self.epsilon, delta=self.delta,
            random_state=self.random_state, ledger=self.ledger, **whiten, **options,
        )
        return name, reason, estimator

    def _options(self, name: str) -> dict[str, Any]:
        """``options`` for the estimator ``name``, checked against the request."""
        options = dict(self.options or {})
        repeated = sorted(set(options) & set(OWN_PARAMETERS))
        if repeated:
            raise ValueError(f"options may not set {repeated}: they are parameters of PCA.")
        if self.mechanism == "auto":
            options = {**AUTO_OPTIONS.get(name, {}), **options}
        return options  # the estimator refuses delta=0 with a private part, before booking

    def fit(self, X: ArrayLike, y: Any = None, **fit_params: Any) -> PCA:
        """Choose the mechanism (from public quantities), fit it, forward its attributes.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features), or a streamed table
            One record per row (a DataFrame's column names become ``feature_names_in_``).
            Anything the chosen estimator reads: a ``dask.array.Array``, a memory-mapped
            array, a Parquet path, a :class:`~privpca.streaming.RowSource`.
        y : ignored
        **fit_params
            Passed to the chosen estimator's ``fit`` (DPS-PCA's ``groups``).

        Returns
        -------
        self
        """
        # ε, δ, whiten (the estimator checks the rest); even under scikit-learn's
        # skip_parameter_validation, as every private fit (private_fit_context)
        self._validate_params()
        name, reason, estimator = self._chosen(X)
        estimator.fit(X, **fit_params)
        return self._adopt(name, reason, estimator)

    def _adopt(self, name: str, reason: str, estimator: BasePrivatePCA) -> PCA:
        """Keep the fitted ``estimator`` and forward its attributes."""
        self.estimator_ = estimator
        self.mechanism_ = name
        self.selection_reason_ = reason
        for attribute in FORWARDED:
            if hasattr(estimator, attribute):
                setattr(self, attribute, getattr(estimator, attribute))
            elif attribute in vars(self):  # from an earlier fit (e.g. on a DataFrame)
                delattr(self, attribute)
        return self

    def _partial_fit_offered(self) -> None:
        """Raise AttributeError, saying why and what works, where partial_fit is absent."""
        try:
            name, _ = select_mechanism(None, delta=self.delta, model=self.model,
                                       mechanism=self.mechanism, owner=self)
        except (TypeError, ValueError):  # partial_fit refuses them with their own message
            return
        if name != "analyze-gauss":
            raise AttributeError(
                f"PCA.partial_fit is not offered here: the mechanism is {name!r}, and only "
                "Analyze Gauss fits in batches. What works: model='central', delta > 0 and "
                "mechanism 'auto' or 'analyze-gauss', with options={'data_norm': D}.")
        reason = stream_refusal(self.options if isinstance(self.options, dict) else {})
        if reason is not None:
            raise AttributeError(f"PCA.partial_fit is not offered with these options: {reason}")

    @if_defined
    def partial_fit(self, X: ArrayLike, y: Any = None) -> PCA:
        """Update the fit with one more batch of rows, on Analyze Gauss (each row in one
        batch: the stream is charged once, whatever the number of calls; see
        :meth:`privpca.AnalyzeGaussPCA.partial_fit`).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            The batch's rows, each a record not passed before.
        y : ignored

        Returns
        -------
        self
        """
        self._validate_params()
        name, reason, fresh = self._chosen(X)
        if name != "analyze-gauss":  # a table wider than MAX_GRAM_FEATURES
            raise ValueError(f"PCA.partial_fit: {reason} Only Analyze Gauss fits in batches; "
                             "use fit(X) on the whole table.")
        current = vars(self).get("estimator_")
        if current is None or not in_stream(current):
            current = fresh  # the first batch (or the first after fit): a new stream
        elif not same_stream_parameters(current.get_params(deep=False),
                                        fresh.get_params(deep=False)):
            raise ValueError(f"PCA.partial_fit: {CHANGED}")
        else:  # post-processing parameters follow the front door's
            current.set_params(n_components=self.n_components, whiten=self.whiten)
        current.partial_fit(X)
        return self._adopt(name, reason, current)

    def transform(self, X: ArrayLike) -> NDArray[np.float64]:
        """Project ``X`` with the chosen estimator (post-processing: free).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        ndarray of shape (n_samples, n_components_)
            A DataFrame with columns ``pca0, pca1, ...`` under ``set_output(transform="pandas")``.
        """
        return self._delegate("transform", X)

    def _delegate(self, method: str, X: ArrayLike) -> Any:
        """``estimator_.method(X)``, with the feature names checked here, so that a
        mismatch names PCA, the class the user fitted, not the estimator it chose."""
        check_is_fitted(self, "estimator_")
        _check_feature_names(self, X, reset=False)
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="X (does not have valid|has) feature names",
                                    category=UserWarning)
            return getattr(self.estimator_, method)(X)

    def inverse_transform(self, X: ArrayLike) -> NDArray[np.float64]:
        """Map projections back to feature space with the chosen estimator."""
        check_is_fitted(self, "estimator_")
        return self.estimator_.inverse_transform(X)

    # ------------------------------------------------------------- the probabilistic model
    def _check_defined(self, name: str) -> None:
        """The chosen estimator's reason where it does not define ``name`` (nothing unfitted:
        the method then raises ``NotFittedError``); for ``partial_fit``, the front door's."""
        if name == "partial_fit":
            self._partial_fit_offered()
            return
        estimator = vars(self).get("estimator_")
        if estimator is not None:
            getattr(estimator, name)

    @if_defined
    def get_covariance(self) -> NDArray[np.float64]:
        """The chosen estimator's ``get_covariance``: scikit-learn's model covariance from
        released quantities only (post-processing: free)."""
        check_is_fitted(self, "estimator_")
        return self.estimator_.get_covariance()

    @if_defined
    def get_precision(self) -> NDArray[np.float64]:
        """The chosen estimator's ``get_precision`` (free)."""
        check_is_fitted(self, "estimator_")
        return self.estimator_.get_precision()

    @if_defined
    def score_samples(self, X: ArrayLike) -> NDArray[np.float64]:
        """The chosen estimator's ``score_samples``: each row's log-likelihood (free)."""
        return self._delegate("score_samples", X)

    @if_defined
    def score(self, X: ArrayLike, y: Any = None) -> float:
        """The chosen estimator's ``score``: the rows' mean log-likelihood (free)."""
        return float(self._delegate("score", X))

    @property
    def n_samples_(self) -> int:
        """``estimator_.n_samples_``: the public number of rows (absent where n is private)."""
        check_is_fitted(self, "estimator_")
        return self.estimator_.n_samples_

    @property
    def noise_variance_(self) -> float:
        """``estimator_.noise_variance_`` (absent, with the reason, where undefined)."""
        check_is_fitted(self, "estimator_")
        return self.estimator_.noise_variance_

    @property
    def singular_values_(self) -> NDArray[np.float64]:
        """``estimator_.singular_values_`` (absent, with the reason, where undefined)."""
        check_is_fitted(self, "estimator_")
        return self.estimator_.singular_values_

    @property
    def _n_features_out(self) -> int:
        """The number of output columns (read by :meth:`get_feature_names_out`)."""
        return int(self.estimator_.components_.shape[0])

    def __sklearn_tags__(self) -> Any:
        tags = super().__sklearn_tags__()
        # As every privpca estimator: seeded fits are reproducible, output is float64.
        tags.transformer_tags.preserves_dtype = ["float64"]
        tags.input_tags.sparse = True  # as every privpca estimator (streamed by blocks)
        return tags


def _accepts(cls: type, parameter: str, value: Any) -> bool:
    """Whether ``cls``'s declared constraints on ``parameter`` accept ``value``."""
    from sklearn.utils._param_validation import make_constraint

    constraints = getattr(cls, "_parameter_constraints", {}).get(parameter)
    if constraints is None or constraints == "no_validation":
        return True
    return any(make_constraint(c).is_satisfied_by(value) for c in constraints)
