"""The one place privpca reaches into Flower's internals: shorter sleeps, nothing else.

Flower 1.41 hard-codes two waits that make a DPS-PCA round take seconds on localhost: the
SuperNode's idle poll (``time.sleep(3)`` in ``flwr.supernode.start_client_internal``, not
configurable) and the 1 s first retry of ``pull_objects`` for a message listed before its
contents arrive. Flower offers no knob for either, so this module (and only this module)
replaces two module globals: the SuperNode loop's ``time`` (by :class:`PollClock`) and
``pull_objects`` in the SuperNode loop and the ServerApp's grid (by the same function with a
shorter ``initial_backoff``). What is pulled, stored, answered and pushed stays Flower's code.

Each patch first checks that the global is the one it expects; with another Flower release it
leaves everything as it is and returns False (the provider then runs at Flower's own pace).
``tests/test_federated_flower.py`` checks that both apply to the pinned Flower and what a round
takes with them. The pin (``flwr>=1.41,<1.42`` in ``pyproject.toml``) is for these globals.
"""

from __future__ import annotations

import functools
import threading
import time
from typing import Any

__all__ = ["IDLE_AFTER", "LOCAL_POLL", "POLL", "PULL_BACKOFF", "PollClock",
           "patch_supernode_polling", "shorten_pull_backoff"]

#: Seconds between the SuperNode's polls of the SuperLink while a run is active. Each poll is
#: a request the SuperLink serves: on a loaded 2-core localhost, 0.1 s (server 0.05 s) gave
#: faster rounds than 0.05 s (server 0.02 s), the SuperLink spending less CPU on polls.
POLL = 0.1
#: Seconds before the first retry of an object listed but not yet uploaded (Flower: 1 s).
PULL_BACKOFF = 0.02
#: Seconds between the SuperNode's checks for the worker's reply (in memory, no request).
LOCAL_POLL = 0.005
#: Seconds without a message after which the polls back off (doubling) to Flower's intervals.
IDLE_AFTER = 10.0

class PollClock:
    """Stands in for :mod:`time` in Flower's SuperNode loop: shorter sleeps while active.

    ``sleep(s)`` with ``s >= 1`` is the SuperNode's idle poll (no message waiting): it sleeps
    ``poll`` within ``idle_after`` seconds of the last message, then doubles per poll up to
    ``s``. A shorter ``sleep`` is the SuperNode waiting for a reply to a message it has stored
    (a check of its own memory): it marks activity, wakes the worker (``wake``) and sleeps at
    most ``LOCAL_POLL``. Every other attribute is :mod:`time`'s own.
    """

    def __init__(self, poll: float = POLL, idle_after: float = IDLE_AFTER,
                 wake: threading.Event | None = None) -> None:
        self.poll, self.idle_after = float(poll), float(idle_after)
        self.wake = wake if wake is not None else threading.Event()
        self._last = time.monotonic()
        self._backoff = self.poll

    def activity(self) -> None:
        """A message came or went: poll fast again."""
        self._last = time.monotonic()
        self._backoff = self.poll

    def interval(self, cap: float) -> float:
        """Seconds to the next idle poll (``poll`` while active, then doubling up to ``cap``)."""
        if time.monotonic() - self._last < self.idle_after:
            return min(self.poll, cap)
        self._backoff = min(2.0 * self._backoff, cap)
        return self._backoff

    def sleep(self, seconds: float) -> None:
        if seconds >= 1.0:
            time.sleep(self.interval(seconds))
            return
        self.activity()
        self.wake.set()
        time.sleep(min(seconds, LOCAL_POLL))

    def __getattr__(self, name: str) -> Any:
        return getattr(time, name)


def patch_supernode_polling(clock: PollClock) -> bool:
    """Make Flower's SuperNode loop sleep through ``clock``; False (and unchanged) if it can't.

    Flower 1.41 hard-codes the SuperNode's poll (``time.sleep(3)`` in
    ``flwr.supernode.start_client_internal``); the module's ``time`` global is the only handle.
    Only sleeps change: what is pulled, stored and pushed is Flower's code as it is.
    """
    from flwr.supernode import start_client_internal as loop

    if getattr(loop, "time", None) is not time:  # another Flower: leave it as it is
        return False
    loop.time = clock  # type: ignore[assignment]
    shorten_pull_backoff(loop)
    return True


def shorten_pull_backoff(module: Any, initial: float = PULL_BACKOFF) -> bool:
    """Retry pulls of not-yet-uploaded objects after ``initial`` s (Flower: 1 s), in ``module``.

    A message is listed before its contents are uploaded; a reader that polls fast finds it
    early and Flower's ``pull_objects`` then retries after 1 s, doubling. Here the retries
    start at ``initial`` and double as before. Used for the SuperNode's loop and the
    ServerApp's grid (``module.pull_objects`` replaced; False, unchanged, if it is not
    Flower's ``pull_objects``).
    """
    from flwr.supercore.inflatable import inflatable_utils

    original = inflatable_utils.pull_objects
    if getattr(module, "pull_objects", None) is not original:
        return False
    module.pull_objects = functools.partial(original, initial_backoff=float(initial))
    return True


