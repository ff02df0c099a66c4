"""Where a fit's random numbers come from: seeds to tagged streams, the secure rule (which
generators a release may draw from), and the noise mode a record states."""

from __future__ import annotations

import numbers
import warnings
from typing import Any

import numpy as np

from privpca._config import ReproducibleNoiseWarning, secure_by_default, secure_mode
from privpca._validation import _owner, caller_stacklevel
from privpca.mechanisms.secure_noise import SecureGenerator, is_os_keyed

__all__ = ["RANDOM_STREAM_KEYS", "check_noise_rng", "check_random_state",
           "check_secure_random_state", "noise_mode_of", "public_start_generator"]


# Integer seeds are mapped to tagged SeedSequences so that one integer never gives two
# components the same draws (a data generator and an estimator seeded alike would otherwise
# start the estimator at the true direction). The tags are large constants so that they cannot
# equal the spawn keys (0,), (1,), ... of a user's own ``SeedSequence(seed).spawn(...)``.
RANDOM_STREAM_KEYS: dict[str, int] = {
    "estimator": 0x65737469,  # "esti"
    "data": 0x64617461,  # "data"
}


def check_random_state(random_state: Any, *, stream: str = "estimator") -> np.random.Generator:
    """Turn ``None``, an int seed, a ``SeedSequence`` or a ``Generator`` into a Generator.

    Parameters
    ----------
    random_state : None, int, numpy.random.SeedSequence or numpy.random.Generator
        ``None`` draws fresh OS entropy. An int ``s`` gives the stream
        ``SeedSequence(s, spawn_key=(RANDOM_STREAM_KEYS[stream],))``, so an estimator and a
        data generator given the same integer draw independent numbers, and neither equals
        ``numpy.random.default_rng(s)``. A ``SeedSequence`` or ``Generator`` is used as given
        (the caller has already chosen the stream).
    stream : {"estimator", "data"}
        Which component asks: estimators and mechanisms use ``"estimator"``, the synthetic
        data generators ``"data"``.

    Returns
    -------
    numpy.random.Generator
        For an estimator's ``None``, a :class:`~privpca.mechanisms.secure_noise.SecureGenerator`
        (AES-128-CTR keyed from the OS; its draws select the secure noise path) unless the
        user opted out with ``privpca.set_config(secure_mode=False)``; then, and for the data
        stream, NumPy's PCG64 on fresh OS entropy.

    Raises
    ------
    ValueError
        In strict secure mode (``secure_mode=True``), for any ``random_state`` of an
        estimator other than ``None`` or a
        :class:`~privpca.mechanisms.secure_noise.SecureGenerator` that privpca keyed from the
        OS itself (one handed down by a fit, or ``spawn``-ed): an int, a SeedSequence, a
        Generator, a RandomState, a BitGenerator, or a SecureGenerator built on a caller's
        bit generator (:func:`check_secure_random_state`).

    Warns
    -----
    ReproducibleNoiseWarning
        Once per process, outside strict secure mode, when an estimator is given a seed or a
        generator: its noise is NumPy's float path, rebuilt by anyone who learns the seed.

    The global NumPy RNG is never used. A legacy ``RandomState`` is refused, because
    mixing it in would make runs irreproducible in a way users do not expect.
    """
    if stream not in RANDOM_STREAM_KEYS:
        raise ValueError(f"stream must be one of {sorted(RANDOM_STREAM_KEYS)}; got {stream!r}.")
    if stream == "estimator":
        check_secure_random_state(random_state)
        if random_state is None or is_os_keyed(random_state):
            return check_noise_rng(random_state)
        _warn_reproducible()  # a SecureGenerator on a caller's key included
    if random_state is None:
        return np.random.default_rng()
    if isinstance(random_state, numbers.Integral) and not isinstance(random_state, bool):
        if random_state < 0:
            raise ValueError(f"random_state must be a non-negative int; got {random_state}.")
        return _stream_generator(int(random_state), stream)
    if isinstance(random_state, np.random.SeedSequence):
        return np.random.default_rng(random_state)
    if isinstance(random_state, np.random.Generator):
        return random_state
    raise ValueError(
        "random_state must be None, an int, a numpy SeedSequence or a numpy Generator. "
        f"Got {random_state!r} instead."
    )


def public_start_generator(seed: int | None) -> np.random.Generator:
    """The estimator stream's generator for a draw that is public and data-independent (DPS-PCA
    server's start Q⁽⁰⁾): the draws of ``check_random_state(seed)``, so a Flower server
    seeded ``s`` starts where ``DPSPCA(random_state=s)`` does, without its warning or strict
    secure mode's refusal: nothing private is drawn from it."""
    return np.random.default_rng() if seed is None else _stream_generator(int(seed), "estimator")


def _stream_generator(seed: int, stream: str) -> np.random.Generator:
    return np.random.default_rng(np.random.SeedSequence(seed,
                                                        spawn_key=(RANDOM_STREAM_KEYS[stream],)))


def check_secure_random_state(random_state: Any, *, what: str = "random_state",
                              owner: object | None = None) -> None:
    """In strict secure mode, refuse every source of randomness but ``None`` and an OS-keyed
    one.

    The rule of strict secure mode (``secure_mode=True``), in one place: only ``None``
    (privpca draws a fresh OS key) or a
    :class:`~privpca.mechanisms.secure_noise.SecureGenerator` keyed from the OS by privpca
    itself (:func:`~privpca.mechanisms.secure_noise.is_os_keyed`: made with no bit generator,
    or ``spawn``-ed) may pass. Refused with a ValueError: ints, SeedSequences, Generators,
    RandomStates, BitGenerators, and a SecureGenerator built on a caller's bit generator
    (seeded ChaCha included). Otherwise: nothing (no warning either).

    Estimators call it before they book a ledger (``BasePrivatePCA._book``)
    as well as in :func:`check_random_state`, so a refused fit spends nothing.
    """
    if random_state is None or not secure_mode():
        return
    if is_os_keyed(random_state):
        return
    raise ValueError(
        f"Secure mode refuses {what}{_owner(owner)}: a seed or a generator not keyed by "
        f"privpca from the operating system would make the noise reproducible. Got "
        f"{random_state!r}; pass {what}=None (or leave secure mode for tests and experiments)."
    )


def noise_mode_of(random_state: Any) -> str:
    """How a fit given ``random_state`` draws its noise, in the configuration in force.

    ``"secure"`` for ``None`` (unless opted out) and an OS-keyed SecureGenerator,
    ``"float"`` for ``None`` after ``set_config(secure_mode=False)``, ``"reproducible"`` for
    anything seeded. What :attr:`privpca.accounting.PrivacyRecord.noise_mode` records.
    """
    if random_state is None:
        return "secure" if secure_by_default() else "float"
    return "secure" if is_os_keyed(random_state) else "reproducible"


def check_noise_rng(rng: Any, *, owner: object | None = None) -> np.random.Generator:
    """The generator a releasing function (``report``, ``randomise``, ``release_*``, the
    noise module) draws its noise from, through the secure rule.

    ``None`` gives a fresh :class:`~privpca.mechanisms.secure_noise.SecureGenerator` (the
    secure path) unless the user opted out (``secure_mode=False``: ``default_rng()``). In
    strict secure mode anything but ``None`` and an OS-keyed SecureGenerator is refused
    (:func:`check_secure_random_state`); otherwise a given generator is returned as given
    (no reproducibility warning: the caller chose the stream).
    """

    check_secure_random_state(rng, what="rng", owner=owner)
    if rng is not None:
        return rng
    if secure_by_default():
        return SecureGenerator()
    return np.random.default_rng()


_warned_reproducible = False


def _warn_reproducible() -> None:
    """Warn once per process that seeded noise is reproducible (see check_random_state)."""
    global _warned_reproducible
    if _warned_reproducible:
        return
    _warned_reproducible = True
    warnings.warn(
        "A private fit was given a random_state: a reproducible run (NumPy's float noise, "
        "privacy_.noise_mode == 'reproducible'), whose noise can be rebuilt and subtracted by "
        "anyone who knows the seed. Use seeds for tests and experiments only; for a release "
        "leave random_state=None (secure noise, the default). (This warning is shown once "
        "per process.)",
        ReproducibleNoiseWarning,
        stacklevel=caller_stacklevel(),
    )
