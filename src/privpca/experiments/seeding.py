"""Independent random streams for every run of an experiment (``SeedSequence.spawn``).

One rule, used by every experiment, the demo and the benchmarks' data builders: a run's integer
seed (recorded in its CSV row) is the root of a :class:`numpy.random.SeedSequence`, and the
data, each estimator and any extra draw (a subsample, a random direction) get their own spawned
child. Children of one root are independent of each other and of every other root's, so the
data can never hand an estimator its own draws (with one shared integer, an estimator's random
start could be the data's true direction). ``spawned(seed, *path)`` is exactly
``SeedSequence(seed).spawn(path[0] + 1)[path[0]].spawn(...)...``, computed directly.

The run seeds themselves derive from the experiment's base seed the same way
(:meth:`privpca.experiments.context.RunContext.run_seed`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["DATA", "ESTIMATOR", "EXTRA", "RunStreams", "spawned", "spawned_int"]

#: First spawn index of each stream below a run's root.
DATA, ESTIMATOR, EXTRA = 0, 1, 2


def spawned(seed: int, *path: int) -> np.random.SeedSequence:
    """The child ``path`` of ``SeedSequence(seed)``: ``spawn`` applied once per index."""
    return np.random.SeedSequence(int(seed), spawn_key=tuple(int(i) for i in path))


def spawned_int(seed: int, *path: int) -> int:
    """A 32-bit integer seed drawn from :func:`spawned` (what a CSV row records)."""
    return int(spawned(seed, *path).generate_state(1)[0])


@dataclass(frozen=True)
class RunStreams:
    """The independent streams of one run, all spawned from ``SeedSequence(seed)``.

    Parameters
    ----------
    seed : int
        The run's seed (the ``seed`` column of its CSV row).

    Examples
    --------
    >>> s = RunStreams(7)
    >>> rng = s.data()                   # the data generator's stream
    >>> est_seed = s.estimator(0, 2)     # estimator 2 of setting 0 (a SeedSequence)
    """

    seed: int

    def data(self, *key: int) -> np.random.Generator:
        """The data stream (``key`` tells several data draws of one run apart)."""
        return np.random.default_rng(spawned(self.seed, DATA, *key))

    def estimator(self, *key: int) -> np.random.SeedSequence:
        """The stream of the estimator identified by ``key`` (e.g. ``(setting, method)``)."""
        return spawned(self.seed, ESTIMATOR, *key)

    def extra(self, *key: int) -> np.random.Generator:
        """A stream for anything else the run draws (subsamples, random directions)."""
        return np.random.default_rng(spawned(self.seed, EXTRA, *key))
