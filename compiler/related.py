"""Related amounts (new in 1.1): money params whose bounds name other money params.

`param partial: money between 0.00 and price` relates two params: every
agreement's `partial` lies between 0.00 and its own `price`. A bound is a
money literal or the name of another money param (ranged or fixed), on
either side; expressions (`price - 5.00`) are not bounds.

The relations are difference constraints `low_ref <= param <= high_ref`
over integers. With no cycle among them (the static checks refuse one),
propagating the literal bounds along them gives every param its tightest
literal interval, its hull: the system has a solution exactly when every
hull is non-empty (set each param to its hull's low end). The checks use the
hull to refuse a param that can take no value, and lowering writes it as the
`min`/`max` of a bound written as a name, so every reader that only knows
intervals still reads a sound one.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Bounds:
    """One money param's bounds in minor units: a literal (`low`/`high`) or a name (`*_ref`) per side."""

    low: int | None = None
    high: int | None = None
    low_ref: str | None = None
    high_ref: str | None = None


def edges(params: Mapping[str, Bounds]) -> Iterator[tuple[str, str]]:
    """Each relation as (smaller, larger): `a between b and c` gives (b, a) and (a, c)."""
    for name, bounds in params.items():
        if bounds.low_ref is not None:
            yield bounds.low_ref, name
        if bounds.high_ref is not None:
            yield name, bounds.high_ref


def cycle(params: Mapping[str, Bounds]) -> list[str] | None:
    """A cycle of relations as the params along it (`[a, b, a]` for a <= b <= a), or None."""
    larger: dict[str, list[str]] = {}
    for small, big in edges(params):
        larger.setdefault(small, []).append(big)
    state: dict[str, int] = {}  # 1 on the current path, 2 done
    for start in params:
        if state.get(start):
            continue
        path = [start]
        stack = [iter(larger.get(start, ()))]
        state[start] = 1
        while stack:
            step = next(stack[-1], None)
            if step is None:
                state[path.pop()] = 2
                stack.pop()
            elif state.get(step) == 1:
                return [*path[path.index(step) :], step]
            elif not state.get(step):
                state[step] = 1
                path.append(step)
                stack.append(iter(larger.get(step, ())))
    return None


def hull(params: Mapping[str, Bounds]) -> dict[str, tuple[int | None, int | None]]:
    """Each param's tightest literal interval under the relations (None: unbounded on that side).

    Lower bounds flow from the smaller to the larger side of each relation and
    upper bounds the other way, until nothing changes; with no cycle that
    takes at most one round per param.
    """
    low = {name: b.low for name, b in params.items()}
    high = {name: b.high for name, b in params.items()}
    pairs = [(s, b) for s, b in edges(params) if s in params and b in params]
    for _ in range(len(params) + 1):
        changed = False
        for small, big in pairs:
            if low[small] is not None and (low[big] is None or low[big] < low[small]):  # type: ignore[operator]
                low[big] = low[small]
                changed = True
            if high[big] is not None and (high[small] is None or high[small] > high[big]):  # type: ignore[operator]
                high[small] = high[big]
                changed = True
        if not changed:
            break
    return {name: (low[name], high[name]) for name in params}
