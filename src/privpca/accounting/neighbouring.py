"""The neighbouring relations a privacy guarantee is stated under (what a record names)."""

from __future__ import annotations

from enum import Enum
from typing import Any

from privpca._validation import check_options

__all__ = ["NEIGHBOURING_RELATIONS", "Neighbouring"]

#: The relations AnalyzeGauss can state its guarantee under (privpca's default: replace).
NEIGHBOURING_RELATIONS: tuple[str, ...] = ("replace", "add-remove")


class Neighbouring(Enum):
    """The neighbouring relation a guarantee is stated under, as written to a privacy record.

    Each member is a pair ``(relation, description)``. ``relation`` is the relation itself:

    * ``"replace"``: central model, one record replaced by any other (n public);
    * ``"add-remove"``: central model, one record added or removed (n private);
    * ``"replace-user"``: local model, one user's record replaced;
    * ``"replace-provider"``: distributed model, one record of one provider replaced (every
      provider's nᵢ public);
    * ``"none"``: a non-private fit.

    ``description`` is the text :attr:`PrivacyRecord.neighbouring` holds. The four
    ``"replace"`` members are one relation in the wording each estimator family's records
    carry; they are separate members so that those records (and the JSON written from them)
    keep their exact text.
    """

    #: AnalyzeGauss, ModSuLQ, NoisyPower: replace one record, every record of norm ≤ D.
    REPLACE_ONE = ("replace", "replace one record (any two records of norm <= data_norm)")
    #: The release pipeline's default (an estimator that names no relation).
    REPLACE_ONE_N_PUBLIC = ("replace", "replace one record (any two records; n public)")
    #: The stochastic estimators (Oja, Private Oja, DPPCA).
    REPLACE_ONE_CENTRAL = ("replace", "replace one record (central model)")
    #: Bingham (exponential mechanism).
    REPLACE_ONE_RECORD = ("replace", "replace one record")
    #: AnalyzeGauss with ``neighbouring="add-remove"`` (Dwork et al.'s setting).
    ADD_REMOVE_ONE = ("add-remove", "add or remove one record of norm <= data_norm")
    #: The local model: each user randomises their own record.
    LOCAL_REPLACE_ONE = (
        "replace-user", "replace one user's record (any two records of norm <= data_norm)")
    #: The distributed model: each provider adds its own noise.
    DISTRIBUTED_REPLACE_ONE = (
        "replace-provider",
        "replace one record of one provider (any two records of norm <= data_norm; the "
        "numbers of records n_i are public)",
    )
    #: A non-private fit (ε = ∞).
    NOT_PRIVATE = ("none", "none: the output is not differentially private")

    @property
    def relation(self) -> str:
        """The relation: ``"replace"``, ``"add-remove"``, ``"replace-user"``, ... (above)."""
        return str(self.value[0])

    @property
    def description(self) -> str:
        """The text written to :attr:`PrivacyRecord.neighbouring`."""
        return str(self.value[1])

    @property
    def n_public(self) -> bool:
        """Whether the number of records is public (all but add/remove-one)."""
        return self.relation != "add-remove"

    @classmethod
    def from_option(cls, neighbouring: Any, *, owner: object | None = None) -> Neighbouring:
        """The member for the public option ``neighbouring="replace" | "add-remove"``.

        The one place the user-facing strings of :data:`NEIGHBOURING_RELATIONS` become a
        relation; anything else raises the usual ``ValueError`` naming ``owner``.
        """
        option = check_options(neighbouring, "neighbouring", NEIGHBOURING_RELATIONS, owner=owner)
        return cls.ADD_REMOVE_ONE if option == "add-remove" else cls.REPLACE_ONE
