"""Global configuration: ``get_config``, ``set_config`` and ``config_context``.

scikit-learn's pattern: a process-wide default (from the environment) overridden per thread.
The only option today is ``secure_mode``:

* ``False`` (default): noise from NumPy's PCG64, continuous Gaussian and Laplace samplers;
  an integer ``random_state`` makes a fit reproducible (and warns once, with
  :class:`ReproducibleNoiseWarning`, that its noise can be rebuilt from the seed).
* ``True``: noise from a cryptographically secure generator (ChaCha20 keyed from the OS),
  floating-point-safe discrete samplers for the Gaussian and Laplace noise
  (:mod:`privpca.mechanisms.secure_noise`), and every ``random_state`` other than ``None``
  refused with a ValueError. See ``docs/SECURITY.md``.

The environment variable ``PRIVPCA_SECURE_MODE=1`` (or ``true``/``yes``/``on``) turns secure
mode on for every thread of the process unless a thread overrides it.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from privpca.exceptions import PrivacyWarning

__all__ = ["ReproducibleNoiseWarning", "config_context", "get_config", "set_config"]

_TRUE = ("1", "true", "yes", "on")


class ReproducibleNoiseWarning(PrivacyWarning):
    """A private fit was given a ``random_state``: its noise can be rebuilt from the seed.

    Anyone who learns the seed can subtract the noise and recover the exact statistic, so a
    seeded fit is for tests and experiments, never for a release. Secure mode refuses seeds.
    """


def _default_config() -> dict[str, Any]:
    env = os.environ.get("PRIVPCA_SECURE_MODE", "").strip().lower()
    return {"secure_mode": env in _TRUE}


_global_config: dict[str, Any] = _default_config()
_local = threading.local()


def _thread_config() -> dict[str, Any]:
    if not hasattr(_local, "config"):
        _local.config = dict(_global_config)
    config: dict[str, Any] = _local.config
    return config


def get_config() -> dict[str, Any]:
    """The configuration in force in this thread (a copy): ``{"secure_mode": bool}``."""
    return dict(_thread_config())


def set_config(secure_mode: bool | None = None) -> None:
    """Set options for this thread; ``None`` leaves an option unchanged.

    Parameters
    ----------
    secure_mode : bool, optional
        Cryptographically secure, floating-point-safe noise; seeds refused. The default comes
        from the environment variable ``PRIVPCA_SECURE_MODE``.
    """
    if secure_mode is not None:
        if not isinstance(secure_mode, bool):
            raise ValueError(f"secure_mode must be a bool. Got {secure_mode!r} instead.")
        _thread_config()["secure_mode"] = secure_mode


@contextmanager
def config_context(*, secure_mode: bool | None = None) -> Iterator[None]:
    """Set options inside a ``with`` block (this thread only), restoring them after.

    Examples
    --------
    >>> import numpy as np, privpca
    >>> X = np.random.default_rng().standard_normal((20_000, 4))
    >>> with privpca.config_context(secure_mode=True):
    ...     est = privpca.AnalyzeGaussPCA(n_components=1, epsilon=1.0).fit(X)
    """
    old = get_config()
    set_config(secure_mode=secure_mode)
    try:
        yield
    finally:
        set_config(**old)


def secure_mode() -> bool:
    """Whether secure mode is on in this thread."""
    return bool(_thread_config()["secure_mode"])
