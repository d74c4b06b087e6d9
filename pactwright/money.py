"""Exact money, percent and duration values.

Money is an integer count of minor units with the currency's scale beside it;
a literal with more decimals than the scale is an error, never rounded.
Percents are exact fractions with at most four decimals. Durations are whole
seconds. Nothing here ever touches a float.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from fractions import Fraction

from pactwright.errors import MoneyError

MAX_SCALE = 8
PERCENT_DECIMALS = 4
# Far beyond any real amount; keeps int <-> str conversion cheap (and below
# Python's 4300-digit conversion limit, which would raise a bare ValueError).
MAX_DIGITS = 100
_DECIMAL = re.compile(r"(-?)([0-9]+)(?:\.([0-9]+))?")
_DURATION_PART = re.compile(r"([0-9]+)([dhms])")
_UNIT_SECONDS = {"d": 86400, "h": 3600, "m": 60, "s": 1}


@dataclass(frozen=True, slots=True)
class Currency:
    """An ISO-4217-like code and its minor-unit scale (0..8)."""

    code: str
    scale: int

    @property
    def asset(self) -> str:
        """The Numscript asset name, e.g. `EUR/2`."""
        return f"{self.code}/{self.scale}" if self.scale else self.code


def parse_money(text: str, scale: int) -> int:
    """Minor units of a decimal literal; more decimals than `scale` is an error."""
    match = _DECIMAL.fullmatch(text)
    if match is None:
        raise MoneyError(f"`{text}` is not a money amount", code="PW021")
    sign, whole, frac = match.group(1), match.group(2), match.group(3) or ""
    if len(whole) + max(len(frac), scale) > MAX_DIGITS:
        raise MoneyError(f"`{text[:20]}...` has more than {MAX_DIGITS} digits", code="PW021")
    if len(frac) > scale:
        raise MoneyError(
            f"`{text}` has {len(frac)} decimals but the currency scale is {scale}",
            code="PW022",
            hint="money is never rounded: write at most the currency's decimals",
        )
    minor = int(whole) * 10**scale + (int(frac.ljust(scale, "0")) if scale else 0)
    return -minor if sign else minor


def format_money(minor: int, scale: int) -> str:
    """The decimal text of `minor` units, with exactly `scale` decimals."""
    sign = "-" if minor < 0 else ""
    units = abs(minor)
    if scale == 0:
        return f"{sign}{units}"
    whole, frac = divmod(units, 10**scale)
    return f"{sign}{whole}.{str(frac).rjust(scale, '0')}"


@dataclass(frozen=True, slots=True)
class Percent:
    """An exact percentage: `value` is the fraction of the whole (10% = 1/10)."""

    value: Fraction

    @classmethod
    def parse(cls, text: str) -> Percent:
        """Parse `10%`, `2.5%` (the `%` is optional); at most four decimals."""
        body = text[:-1] if text.endswith("%") else text
        match = _DECIMAL.fullmatch(body)
        if match is None or match.group(1):
            raise MoneyError(f"`{text}` is not a percent", code="PW023")
        frac = match.group(3) or ""
        if len(match.group(2)) + len(frac) > MAX_DIGITS:
            raise MoneyError(f"`{text[:20]}...` has more than {MAX_DIGITS} digits", code="PW023")
        if len(frac) > PERCENT_DECIMALS:
            raise MoneyError(
                f"`{text}` has {len(frac)} decimals; a percent has at most {PERCENT_DECIMALS}",
                code="PW024",
            )
        return cls(Fraction(int(match.group(2) + frac), 10 ** len(frac) * 100))

    def canonical(self) -> str:
        """Shortest exact decimal text of the percentage, without `%` (`2.5`)."""
        scaled = self.value * 100 * 10**PERCENT_DECIMALS
        if scaled.denominator != 1:
            # Only reachable through arithmetic, never through parsing.
            return f"{self.value.numerator * 100}/{self.value.denominator}"
        text = format_money(scaled.numerator, PERCENT_DECIMALS)
        return text.rstrip("0").rstrip(".") if "." in text else text

    def share_of(self, minor: int) -> int:
        """`minor` times this percent, rounded down (as Numscript allots)."""
        product = self.value * minor
        return product.numerator // product.denominator

    def __str__(self) -> str:
        return self.canonical() + "%"


def parse_duration(text: str) -> int:
    """Seconds in `14d`, `36h`, `1d12h`, `30m`, `15s`; units in d, h, m, s order."""
    pos, total, last_rank = 0, 0, -1
    order = "dhms"
    for match in _DURATION_PART.finditer(text):
        if match.start() != pos:
            break
        if len(match.group(1)) > MAX_DIGITS:
            raise MoneyError(f"`{text[:20]}...` has more than {MAX_DIGITS} digits", code="PW025")
        rank = order.index(match.group(2))
        if rank <= last_rank:
            raise MoneyError(
                f"duration `{text}` repeats or misorders its units",
                code="PW026",
                hint="write units largest first, each once: `1d12h`",
            )
        last_rank = rank
        total += int(match.group(1)) * _UNIT_SECONDS[match.group(2)]
        pos = match.end()
    if pos != len(text) or not text:
        raise MoneyError(f"`{text}` is not a duration", code="PW025", hint="e.g. `14d`, `36h`, `1d12h`")
    return total


def format_duration(seconds: int) -> str:
    """Canonical duration text: largest units first, zero parts omitted."""
    if seconds == 0:
        return "0s"
    parts = []
    for unit in "dhms":
        count, seconds = divmod(seconds, _UNIT_SECONDS[unit])
        if count:
            parts.append(f"{count}{unit}")
    return "".join(parts)
