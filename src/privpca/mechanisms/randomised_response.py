"""Randomised response: a user's bits, randomised by the user, pure ε-LDP.

The local model's norm questions (:mod:`privpca.local_protocol.local_preprocessing`) release
nothing but bits that each user randomises before sending them. Two forms, one calibration:

* **binary** (Warner 1965; :meth:`RandomisedResponse.flip`): one bit, flipped with
  probability ``q = 1/(1 + e^ε)``. The two values of the user's bit give a report the
  probabilities ``1 − q`` and ``q``: a likelihood ratio of at most ``(1 − q)/q = e^ε``.
* **optimal unary encoding** (Wang, Blocki, Li & Jha, USENIX Security 2017;
  :meth:`RandomisedResponse.encode_unary`): the one-hot vector of the user's bin, each 1-bit
  kept with probability ½ and each 0-bit set to 1 with probability ``q``. Replacing the user's
  value moves two bits of the one-hot (L1 sensitivity 2); the likelihood ratio of a report is
  at most ``½(1 − q)/(½q) = e^ε``.

``q`` is :func:`privpca.accounting.calibration.unary_encoding_flip_probability` (ε capped at
700 against overflow): the one place it is written.

**Privacy statement.** Neighbouring relation: *one user's report*: any two values of that
user's record (the local model; no other user, and no curator, is trusted). Each report is
pure ε-LDP (δ = 0) whatever the other users send; a user who sends one report is ε-LDP, and
disjoint groups of users compose in parallel.

**Samplers.** :meth:`~RandomisedResponse.flip` and :meth:`~RandomisedResponse.encode_unary`
randomise each user's bits; :meth:`~RandomisedResponse.unary_counts` draws the per-bin sums of
``m`` users' unary reports exactly (``Binomial(n_b, ½) + Binomial(m − n_b, q)``: independent
bits), which simulates many users inside one fit. They draw from the given generator
(:func:`privpca.mechanisms.randomness.check_noise_rng`: in strict secure mode only ``None`` or an
OS-keyed :class:`~privpca.mechanisms.secure_noise.SecureGenerator`), the same numbers in the
same order as the randomisers drew them before this module, so seeded results are unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np
from numpy.typing import ArrayLike, NDArray

from privpca._validation import check_epsilon
from privpca.accounting.calibration import unary_encoding_flip_probability
from privpca.mechanisms.randomness import check_noise_rng

__all__ = ["RandomisedResponse"]


@dataclass(frozen=True)
class RandomisedResponse:
    """Randomised response at ε: binary flips and optimal unary encoding (pure ε-LDP).

    Parameters
    ----------
    epsilon : float
        ε of one user's report.

    Attributes
    ----------
    neighbouring : str
        The relation the guarantee is for: one user's report.
    delta : float
        0: pure ε-LDP.
    """

    epsilon: float

    neighbouring: ClassVar[str] = "one user's report (any two values of that user's record)"
    delta: ClassVar[float] = 0.0

    def __post_init__(self) -> None:
        check_epsilon(self.epsilon, owner="RandomisedResponse")

    # ------------------------------------------------------------------ calibration
    @property
    def flip_probability(self) -> float:
        """``q = 1/(1 + e^ε)``: a binary answer is flipped, a unary 0-bit set, with this
        probability."""
        return unary_encoding_flip_probability(self.epsilon)

    @property
    def keep_probability(self) -> float:
        """½: the probability that a unary 1-bit is reported as 1."""
        return 0.5

    @property
    def set_probability(self) -> float:
        """``q``: the probability that a unary 0-bit is reported as 1."""
        return self.flip_probability

    # ------------------------------------------------------------------ samplers
    def flip(self, bits: ArrayLike, rng: np.random.Generator | None) -> NDArray[np.bool_]:
        """Each user's bit (a vector, one bit per user) flipped with probability ``q``."""
        rng = check_noise_rng(rng, owner="RandomisedResponse")
        b = np.asarray(bits, dtype=bool)
        if b.ndim != 1:
            raise ValueError("flip takes one bit per user (a vector).")
        flipped: NDArray[np.bool_] = b ^ (rng.random(len(b)) < self.flip_probability)
        return flipped

    def encode_unary(
        self, onehot: ArrayLike, rng: np.random.Generator | None
    ) -> NDArray[np.bool_]:
        """Each user's one-hot row: a 1-bit kept with probability ½, a 0-bit set with
        probability ``q`` (one uniform per bit, row by row)."""
        rng = check_noise_rng(rng, owner="RandomisedResponse")
        h = np.asarray(onehot, dtype=bool)
        u = rng.random(h.shape)
        return np.where(h, u < self.keep_probability, u < self.set_probability)

    def unary_counts(
        self, bin_counts: ArrayLike, rng: np.random.Generator | None
    ) -> NDArray[np.int64]:
        """The 1-bits per bin of ``m = Σ bin_counts`` users' unary reports, drawn exactly.

        Bin b's count is ``Binomial(n_b, ½) + Binomial(m − n_b, q)``: the law of summing
        :meth:`encode_unary` over the users (each bit independent), at two draws per bin.
        """
        rng = check_noise_rng(rng, owner="RandomisedResponse")
        counts = np.asarray(bin_counts, dtype=np.int64)
        m = int(counts.sum())
        ones: NDArray[np.int64] = (rng.binomial(counts, self.keep_probability)
                                   + rng.binomial(m - counts, self.set_probability))
        return ones
