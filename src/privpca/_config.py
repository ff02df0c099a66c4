"""Global configuration: ``get_config``, ``set_config`` and ``config_context``.

scikit-learn's pattern: a process-wide default (from the environment) overridden per thread.
The only option today is ``secure_mode``, which says where privacy noise comes from:

* ``"auto"`` (default): **secure unless seeded.** A fit with ``random_state=None`` draws its
  privacy noise on the secure path (a cryptographic generator keyed from the OS, each value
  snapped to a grid and given exact discrete noise: :mod:`privpca.mechanisms.secure_noise`,
  :mod:`privpca.mechanisms.noise`). A seeded fit (an int, a SeedSequence or a Generator) is a
  *reproducible run* for tests and experiments: NumPy's float path bit for bit, warned once
  (:class:`ReproducibleNoiseWarning`), and its ``privacy_.noise_mode`` is
  ``"reproducible"``: not a release.
* ``True`` (strict): as ``"auto"``, and every ``random_state`` other than ``None`` is refused
  with a ValueError, before anything is charged.
* ``False`` (opt-out): NumPy's PCG64 with continuous float samplers even without a seed
  (Mironov 2012's floating-point attacks are not answered); recorded as
  ``privacy_.noise_mode == "float"``.

The environment variable ``PRIVPCA_SECURE_MODE`` sets the process default: ``1``/``true``/
``yes``/``on`` for strict, ``0``/``false``/``no``/``off`` for the opt-out, ``auto`` or unset for
the default. See ``docs/SECURITY.md``.

A second option, ``allow_large_delta`` (default ``False``), forces a δ ≥ 0.1 through the
estimators' declared range (0, 0.1) (:data:`privpca.decomposition._constraints.DELTA`): for
reproducing a paper's grid (Ge et al. plot δ = 0.3) or an audit probe, never for a release, whose
δ should be well below 1/n.
"""

from __future__ import annotations

import contextvars
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from privpca.exceptions import PrivacyWarning

__all__ = ["GRID_BITS", "NOISE_MODE_NOTES", "SECURE_NOISE_NOTE", "ReproducibleNoiseWarning",
           "config_context", "get_config", "set_config"]

#: log₂ of the number of grid points per noise standard deviation (or Laplace scale) of the
#: secure path (:func:`privpca.mechanisms.noise.grid_step`).
GRID_BITS = 30

SECURE_NOISE_NOTE = (
    "Secure mode: every noisy value was snapped to the grid L = 2^(floor(log2 sigma) - "
    f"{GRID_BITS}) and given exact discrete Gaussian/Laplace noise on that grid, its scale "
    "raised by the factor (Delta + L*sqrt(d))/Delta to cover the rounding (sensitivity "
    "Delta + L*sqrt(d) over d coordinates), so (epsilon, delta) is as stated."
)

#: The note each :attr:`~privpca.accounting.PrivacyRecord.noise_mode` adds to a record.
NOISE_MODE_NOTES: dict[str, str] = {
    "secure": SECURE_NOISE_NOTE,
    "reproducible": (
        "Reproducible run: random_state was given, so the noise is NumPy's float noise from "
        "that seed, which anyone who knows it can rebuild and subtract. For tests and "
        "experiments; not a release (leave random_state=None for one)."),
    "float": (
        "Float noise: secure_mode=False was set, so the noise is NumPy's continuous float "
        "noise (PCG64, fresh OS entropy); floating-point attacks on the samplers (Mironov "
        "2012) are not answered."),
}

_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")


class ReproducibleNoiseWarning(PrivacyWarning):
    """A private fit was given a ``random_state``: its noise can be rebuilt from the seed.

    Anyone who learns the seed can subtract the noise and recover the exact statistic, so a
    seeded fit is for tests and experiments, never for a release. Strict secure mode
    (``secure_mode=True``) refuses seeds.
    """


def _mode_from_environment() -> bool | str:
    env = os.environ.get("PRIVPCA_SECURE_MODE", "").strip().lower()
    if env in _TRUE:
        return True
    if env in _FALSE:
        return False
    return "auto"


def _default_config() -> dict[str, Any]:
    return {"secure_mode": _mode_from_environment(), "allow_large_delta": False}


_global_config: dict[str, Any] = _default_config()
_local = threading.local()


def _thread_config() -> dict[str, Any]:
    if not hasattr(_local, "config"):
        _local.config = dict(_global_config)
    config: dict[str, Any] = _local.config
    return config


def get_config() -> dict[str, Any]:
    """The configuration in force in this thread (a copy): ``{"secure_mode": "auto",
    "allow_large_delta": False}`` by default (``True`` strict, ``False`` opted out)."""
    return dict(_thread_config())


def set_config(secure_mode: bool | str | None = None,
               allow_large_delta: bool | None = None) -> None:
    """Set options for this thread; ``None`` leaves an option unchanged.

    Parameters
    ----------
    secure_mode : {"auto", True, False}, optional
        ``"auto"``: secure noise unless a fit is seeded (the default); ``True``: secure noise
        and seeds refused; ``False``: float noise (an explicit opt-out, recorded in every
        fit's ``privacy_``). The process default comes from ``PRIVPCA_SECURE_MODE``.
    allow_large_delta : bool, optional
        ``True`` forces a δ in [0.1, 1) through the estimators' declared range (0, 0.1): for a
        paper's grid or an audit probe, not a release. Default ``False``.
    """
    if allow_large_delta is not None:
        if not isinstance(allow_large_delta, bool):
            raise ValueError("allow_large_delta must be True or False. Got "
                             f"{allow_large_delta!r} instead.")
        _thread_config()["allow_large_delta"] = allow_large_delta
    if secure_mode is not None:
        if not (isinstance(secure_mode, bool) or secure_mode == "auto"):
            raise ValueError(f"secure_mode must be 'auto', True or False. Got {secure_mode!r} "
                             "instead.")
        _thread_config()["secure_mode"] = secure_mode


@contextmanager
def config_context(*, secure_mode: bool | str | None = None,
                   allow_large_delta: bool | None = None) -> Iterator[None]:
    """Set options inside a ``with`` block (this thread only), restoring them after.

    Examples
    --------
    >>> import numpy as np, privpca
    >>> X = np.random.default_rng().standard_normal((20_000, 4))
    >>> with privpca.config_context(secure_mode=True):
    ...     est = privpca.AnalyzeGaussPCA(n_components=1, epsilon=1.0).fit(X)
    >>> with privpca.config_context(allow_large_delta=True):  # a paper's delta = 0.3, no release
    ...     est = privpca.DPSPCA(n_components=1, delta=0.3).fit(X)  # doctest: +SKIP
    """
    old = get_config()
    set_config(secure_mode=secure_mode, allow_large_delta=allow_large_delta)
    try:
        yield
    finally:
        set_config(**old)


def large_delta_allowed() -> bool:
    """Whether a δ ≥ 0.1 is forced through in this thread (``allow_large_delta``)."""
    return _thread_config().get("allow_large_delta", False) is True


def secure_mode() -> bool:
    """Whether strict secure mode (seeds refused) is on in this thread."""
    return _thread_config()["secure_mode"] is True


def secure_by_default() -> bool:
    """Whether an unseeded draw is secure in this thread (unless opted out with ``False``)."""
    return _thread_config()["secure_mode"] is not False


#: How the fit being run draws its privacy noise ("secure", "reproducible" or "float"); read
#: by the privacy records made during the fit (:class:`privpca.accounting.PrivacyRecord`).
_FIT_NOISE_MODE: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "privpca_fit_noise_mode", default=None)


@contextmanager
def fit_noise_mode(mode: str) -> Iterator[None]:
    """Inside the block, records say their noise was drawn in ``mode``."""
    token = _FIT_NOISE_MODE.set(mode)
    try:
        yield
    finally:
        _FIT_NOISE_MODE.reset(token)


def current_noise_mode() -> str:
    """The noise mode of the fit being run, else what an unseeded draw would be now."""
    mode = _FIT_NOISE_MODE.get()
    if mode is not None:
        return mode
    return "secure" if secure_by_default() else "float"
