"""Option types shared by the commands: ``-k`` (a count or a share of the explained
variance), ``--data-norm`` (``auto`` or a public bound) and ``--holdout-fraction``."""

from __future__ import annotations

import math
from typing import Any

import click


class _NComponents(click.ParamType):
    """An int ≥ 1, or a float in (0, 1) (a share of the explained variance)."""

    name = "K"

    def convert(self, value: Any, param: Any, ctx: Any) -> int | float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            number: int | float = value
        else:
            text = str(value).strip()
            try:
                number = int(text)
            except ValueError:
                try:
                    number = float(text)
                except ValueError:
                    number = math.nan
        if isinstance(number, int) and number >= 1:
            return number
        if isinstance(number, float) and 0.0 < number < 1.0:
            return number
        self.fail(
            f"expected an int >= 1 (the number of components) or a float in (0, 1) (the share "
            f"of the explained variance to reach). Got {value!r}.", param, ctx)


class _DataNorm(click.ParamType):
    """``auto`` (or another of ``words``) or a float > 0 (a public bound on the rows' norms)."""

    def __init__(self, words: tuple[str, ...] = ("auto",)) -> None:
        self.words = words
        self.name = "|".join(words) + "|FLOAT"

    def convert(self, value: Any, param: Any, ctx: Any) -> str | float:
        if isinstance(value, str) and value.strip().lower() in self.words:
            return value.strip().lower()
        try:
            number = float(value)
        except (TypeError, ValueError):
            number = math.nan
        if not (math.isfinite(number) and number > 0):
            words = ", ".join(repr(w) for w in self.words)
            self.fail(f"expected {words} or a float in (0, inf). Got {value!r}.", param, ctx)
        return number


class _HoldoutFraction(click.ParamType):
    """``auto``, ``none`` or a fraction in (0, 1) of the rows held out for the preprocessing."""

    name = "auto|none|FLOAT"

    def convert(self, value: Any, param: Any, ctx: Any) -> str | float | None:
        if isinstance(value, str) and value.strip().lower() in ("auto", "none"):
            return None if value.strip().lower() == "none" else "auto"
        try:
            number = float(value)
        except (TypeError, ValueError):
            number = math.nan
        if not (0.0 < number < 1.0):
            self.fail(f"expected 'auto', 'none' or a float in (0, 1). Got {value!r}.", param,
                      ctx)
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
