"""Classify numeric literals: money, integer, percent or duration.

The grammar has one NUMBER terminal; the kind of a literal follows from its
spelling alone (`%` suffix: percent; unit suffix: duration; a decimal point:
money; digits only: integer), so a malformed literal is reported here with a
precise code instead of as a parse error.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from fractions import Fraction
from typing import Literal

from pactwright.errors import MoneyError
from pactwright.money import MAX_DIGITS, Percent, parse_duration, parse_money

LiteralKind = Literal["money", "int", "percent", "duration"]
_DURATION_SHAPE = re.compile(r"([0-9]+[a-z])+")


@dataclass(frozen=True, slots=True)
class Classified:
    """A literal's kind and canonical value text (minor units, seconds...)."""

    kind: LiteralKind
    value: str


@dataclass(frozen=True, slots=True)
class LiteralProblem:
    code: str
    message: str
    hint: str


def _shown(text: str) -> str:
    """A literal as quoted in a message: long ones are cut."""
    return text if len(text) <= 40 else text[:37] + "..."


def classify(text: str, scale: int) -> Classified | LiteralProblem:
    """The kind and canonical value of a literal, or why it is not one."""
    try:
        if text.endswith("%"):
            return Classified("percent", Percent.parse(text).canonical())
        if _DURATION_SHAPE.fullmatch(text):
            return Classified("duration", str(parse_duration(text)))
        if "." in text:
            return Classified("money", str(parse_money(text, scale)))
        if text.isdigit() and len(text) <= MAX_DIGITS:
            return Classified("int", str(int(text)))
    except MoneyError as exc:
        return _problem(exc, text, scale)
    return LiteralProblem(
        "PW104", f"malformed number `{_shown(text)}`", "write money as `12.50`, percents as `10%`, durations as `14d`"
    )


def _problem(exc: MoneyError, text: str, scale: int) -> LiteralProblem:
    if exc.code == "PW022":
        return LiteralProblem(
            "PW105",
            f"money literal `{_shown(text)}` has more decimals than the currency scale {scale}",
            f"money is never rounded: write at most {scale} decimals",
        )
    if exc.code in ("PW023", "PW024"):
        return LiteralProblem(
            "PW106", f"bad percent `{_shown(text)}`: {exc.message}", "a percent has at most 4 decimals: `2.5%`"
        )
    if exc.code in ("PW025", "PW026"):
        return LiteralProblem(
            "PW107", f"bad duration `{_shown(text)}`", "write units largest first, each once: `1d12h`, `30m`, `15s`"
        )
    return LiteralProblem("PW104", f"malformed number `{_shown(text)}`", "write money as `12.50`")


def percent_value(text: str) -> Fraction | None:
    """The exact fraction of a well-formed percent literal; None for anything else (reported elsewhere)."""
    found = classify(text, 0)
    if isinstance(found, Classified) and found.kind == "percent":
        return Percent.parse(text).value
    return None


def money_value(text: str, scale: int) -> int | LiteralProblem:
    """Minor units of a literal in a money position; integers mean whole units."""
    found = classify(text, scale)
    if isinstance(found, LiteralProblem):
        return found
    if found.kind == "money":
        return int(found.value)
    if found.kind == "int":
        if len(found.value) + scale > MAX_DIGITS:
            # The same limit as `12.00`: `fmt` writes this amount with its decimals.
            return LiteralProblem(
                "PW104",
                f"malformed number `{_shown(text)}`: more than {MAX_DIGITS} digits as money",
                f"an amount has at most {MAX_DIGITS} digits, its {scale} decimals included",
            )
        return int(found.value) * 10**scale
    return LiteralProblem(
        "PW137", f"expected a money amount, found {found.kind} `{_shown(text)}`", "write money as `12.50`"
    )
