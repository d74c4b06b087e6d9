"""The combinations of param values an agreement may start with, without building them.

Each ranged money or percent param is one symbol, so it contributes one
value; each text param contributes its samples, and every combination is an
initial state. Their number is the product of the sample counts: three text
params of three samples give 27, fifteen give over fourteen million. The
combinations are therefore never listed: a combination is decoded from its
index on demand (in `itertools.product` order, so indices, and the reports
that follow from them, are those of a listed product), and the explorer
starts from all of them only while they fit in `max_states` (see
`Explorer.start_limit`).
"""

from __future__ import annotations

from math import comb, prod
from typing import Any


class Choices:
    """Every combination of one value per param, indexed as `itertools.product` lists them."""

    def __init__(self, lists: list[tuple[Any, ...]]) -> None:
        self.lists = lists
        # Their number: an int past what `len` may return for a few dozen text params.
        self.size = prod(len(options) for options in lists)
        # Decoded combinations, one per index the search used (at most one per initial block).
        self._decoded: dict[int, tuple[Any, ...]] = {}

    def __getitem__(self, index: int) -> tuple[Any, ...]:
        found = self._decoded.get(index)
        if found is not None:
            return found
        if not 0 <= index < self.size:
            raise IndexError(index)
        digits: list[Any] = []
        rest = index
        for options in reversed(self.lists):  # the last param varies fastest, as in a product
            rest, digit = divmod(rest, len(options))
            digits.append(options[digit])
        found = tuple(reversed(digits))
        self._decoded[index] = found
        return found


def initial_count(choices: int, agreements: int) -> int:
    """Initial states of `agreements` interchangeable agreements over `choices` combinations:
    the multisets of that size (symmetry reduction keeps one of each)."""
    return comb(choices + agreements - 1, agreements) if choices else 0
