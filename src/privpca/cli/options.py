"""Option types shared by the commands: an estimator parameter as typed in the shell
(:class:`_Declared`), ``--data-norm`` of the federated commands, and the score plot's δ."""

from __future__ import annotations

import math
from typing import Any

import click
from sklearn.utils._param_validation import StrOptions

from privpca._registry import PRIVATE_ESTIMATORS


class _Declared(click.ParamType):
    """An estimator parameter, parsed only: one of the words the registered estimators declare
    for it (their ``_parameter_constraints``; ``none`` where they take None), else a number of
    one of ``numbers``, else the text as given. The estimator validates the value; ``privpca
    fit`` says its refusal of the option (:func:`privpca.cli.refusals.option_refused`).

    >>> _Declared("centering").name, _Declared("centering").convert("none", None, None)
    ('private|none', None)
    >>> _Declared("data_norm", float).convert("2", None, None)
    2.0
    """

    def __init__(self, parameter: str, *numbers: type) -> None:
        constraints = [c for cls in PRIVATE_ESTIMATORS.values()
                       for c in cls._parameter_constraints.get(parameter, [])]
        self.words = sorted({w for c in constraints if isinstance(c, StrOptions)
                             for w in c.options})
        self.none = None in constraints and "none" not in self.words  # "none" is None
        self.numbers = numbers
        self.name = "|".join([*self.words, *["none"] * self.none,
                              *(n.__name__.upper() for n in numbers)])

    def get_metavar(self, param: Any, ctx: Any = None) -> str:
        return f"[{self.name}]"

    def convert(self, value: Any, param: Any, ctx: Any) -> Any:
        if not isinstance(value, str):
            return value
        word = value.strip().lower()
        if word == "none" and self.none:
            return None
        if word in self.words:
            return word
        for number in self.numbers:
            try:
                return number(word)
            except ValueError:
                pass
        return value


class _DataNorm(click.ParamType):
    """``auto`` or a float > 0 (a public bound on the rows' norms): the federated commands'
    ``--data-norm``, checked here because it travels to another process."""

    name = "auto|FLOAT"

    def convert(self, value: Any, param: Any, ctx: Any) -> str | float:
        if isinstance(value, str) and value.strip().lower() == "auto":
            return "auto"
        try:
            number = float(value)
        except (TypeError, ValueError):
            number = math.nan
        if not (math.isfinite(number) and number > 0):
            self.fail(f"expected 'auto' or a float in (0, inf). Got {value!r}.", param, ctx)
        return number


class _ScoresDelta(click.ParamType):
    """0 (the Laplace mechanism, pure ε-DP) or a δ in (0, 1) (the Gaussian mechanism)."""

    name = "0|FLOAT"

    def convert(self, value: Any, param: Any, ctx: Any) -> float:
        try:
            number = float(value)
        except (TypeError, ValueError):
            number = math.nan
        if not (number == 0.0 or 0.0 < number < 1.0):
            self.fail(f"expected 0 (Laplace noise) or a float in (0, 1) (Gaussian noise). Got "
                      f"{value!r}.", param, ctx)
        return number
