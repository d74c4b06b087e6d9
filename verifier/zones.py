"""Zones: the sets of stamp ages one agreement may have, as difference-bound matrices.

Time is exact integer seconds, and a guard or invariant compares it only as
`now - STAMP  OP  D` or `STAMP1 - STAMP2  OP  D` (see `model.py`). Which
commands are enabled later depends not only on where each age lies relative
to its own deadlines, but on how the ages relate to each other: a stamp set
13 s after another can meet a window that one set 11 s after it cannot. A
choice of concrete clock jumps cannot cover every such relation, so the
explorer keeps, per agreement, the exact set of age vectors reachable along
the path (a zone) and lets a clock move add any delay at once.

A zone over clocks x_1..x_n (the ages of the model's stamps; x_0 = 0) is a
canonical difference-bound matrix: entry (i, j) is the least c with
x_i - x_j <= c, or INF. All bounds are integers and non-strict (`<` on
integers is `<= c - 1`), so a non-empty canonical zone contains the integer
point made of its lower bounds. A stamp never set has INF everywhere in its
row and column (except the diagonal) and is ignored by every operation.

`cells` splits a zone by the truth of the time comparisons of one guard or
invariant: within a cell every comparison has one truth value, so the
expression can be evaluated at the cell's lower-bound point. Ages beyond the
largest constant a stamp is compared with are indistinguishable, so zones are
extrapolated (Extra_M) to keep the space finite; stamps compared with other
stamps are never extrapolated, because diagonal comparisons make the
abstraction unsound.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from itertools import pairwise

INF = 1 << 62

Zone = tuple[int, ...]


@dataclass(frozen=True)
class Dim:
    """One dimension a guard or invariant reads time along.

    `kind` "age": the age of stamp `stamp` (`now - stamp`); "diff": the
    difference `stamp - other` of two stamps (= age(other) - age(stamp)).
    `points` are the sorted values b where "value < b" and "value >= b"
    differ for some comparison of the expression, so the value's range is
    cut into intervals: (-inf, p0 - 1], [p0, p1 - 1], ..., [p_last, +inf).
    """

    kind: str
    stamp: int
    other: int
    points: tuple[int, ...]

    def intervals(self) -> list[tuple[int, int]]:
        bounds = [-INF, *self.points, INF]
        out = []
        for start, end in pairwise(bounds):
            low = max(start, 0) if self.kind == "age" else start
            if end == INF:
                out.append((low, INF))
            elif low <= end - 1:
                out.append((low, end - 1))
        return out


class Zones:
    """Zone operations for a model with `n` stamps (clocks 1..n; 0 is the reference)."""

    def __init__(self, n: int, maxima: Sequence[int]) -> None:
        self.n = n
        self.size = (n + 1) * (n + 1) if n else 0
        self.width = n + 1
        # Extrapolation constant per clock (index 0 unused); INF: never extrapolated.
        self.maxima = [0, *maxima]

    # -- construction ----------------------------------------------------------------

    def initial(self) -> Zone:
        """No stamp set."""
        if not self.n:
            return ()
        w = self.width
        return tuple(0 if i == j else INF for i in range(w) for j in range(w))

    def is_set(self, zone: Zone, clock: int) -> bool:
        """Whether stamp `clock` (0-based) has been set."""
        return zone[clock + 1] != INF  # entry (0, clock+1): minus the lower bound of its age

    def point(self, zone: Zone) -> tuple[int, ...]:
        """The lower-bound ages (a point of the zone); -1 for a stamp never set."""
        return tuple(-zone[i] if zone[i] != INF else -1 for i in range(1, self.width))

    # -- operations ----------------------------------------------------------------------

    def _active(self, zone: Sequence[int]) -> list[int]:
        return [0] + [i for i in range(1, self.width) if zone[i] != INF]

    def close(self, cells: list[int]) -> Zone | None:
        """Canonical form (all-pairs shortest paths), or None if empty."""
        w = self.width
        active = self._active(cells)
        for k in active:
            row_k = k * w
            for i in active:
                row_i = i * w
                ik = cells[row_i + k]
                if ik == INF:
                    continue
                for j in active:
                    kj = cells[row_k + j]
                    if kj == INF:
                        continue
                    cells[row_i + j] = min(cells[row_i + j], ik + kj)
        for i in active:
            if cells[i * w + i] < 0:
                return None
        return tuple(cells)

    def constrain(self, zone: Zone, bounds: Sequence[tuple[int, int, int]]) -> Zone | None:
        """The zone with x_i - x_j <= c for each (i, j, c) (clock indices 1-based), or None if empty."""
        cells = list(zone)
        w = self.width
        changed = False
        for i, j, c in bounds:
            if c < cells[i * w + j]:
                cells[i * w + j] = c
                changed = True
        if not changed:
            return zone
        return self.close(cells)

    def reset(self, zone: Zone, clocks: Sequence[int]) -> Zone:
        """Set each stamp in `clocks` (0-based) to age 0 (it is set from now on)."""
        if not clocks:
            return zone
        cells = list(zone)
        w = self.width
        for stamp in clocks:
            k = stamp + 1
            cells[k] = 0  # (0, k): age >= 0
            cells[k * w] = 0  # (k, 0): age <= 0
        active = self._active(cells)
        for stamp in clocks:
            k = stamp + 1
            for j in active:
                if j in (0, k):
                    continue
                cells[k * w + j] = cells[j]  # x_k - x_j <= 0 - x_j
                cells[j * w + k] = cells[j * w]  # x_j - x_k <= x_j
        for stamp in clocks:
            for other in clocks:
                if stamp != other:
                    cells[(stamp + 1) * w + other + 1] = 0
        return tuple(cells)

    def up(self, zone: Zone) -> Zone:
        """Let any amount of time pass: drop the upper bounds of the ages, then extrapolate."""
        cells = list(zone)
        w = self.width
        for i in self._active(cells)[1:]:
            cells[i * w] = INF
        return self.extrapolate(cells)

    def extrapolate(self, cells: list[int]) -> Zone:
        """Extra_M: bounds beyond a clock's largest constant say nothing a guard can see."""
        w = self.width
        active = self._active(cells)
        changed = False
        for i in active:
            for j in active:
                if i == j:
                    continue
                value = cells[i * w + j]
                if value == INF:
                    continue
                if i and self.maxima[i] != INF and value > self.maxima[i]:
                    cells[i * w + j] = INF
                    changed = True
                elif j and self.maxima[j] != INF and value < -self.maxima[j]:
                    cells[i * w + j] = -(self.maxima[j] + 1)
                    changed = True
        if not changed:
            return tuple(cells)
        closed = self.close(cells)
        assert closed is not None  # extrapolation only enlarges a non-empty zone
        return closed

    # -- splitting by an expression's comparisons ---------------------------------------------

    def bounds_of(self, dim: Dim, interval: tuple[int, int]) -> list[tuple[int, int, int]]:
        """DBM bounds saying `dim`'s value lies in `interval`."""
        low, high = interval
        out = []
        if dim.kind == "age":
            i = dim.stamp + 1
            if high != INF:
                out.append((i, 0, high))
            if low > 0:
                out.append((0, i, -low))
        else:
            # value = stamp - other = x_other - x_stamp
            s, r = dim.stamp + 1, dim.other + 1
            if high != INF:
                out.append((r, s, high))
            if low != -INF:
                out.append((s, r, -low))
        return out

    def cells(self, zone: Zone, dims: Sequence[Dim]) -> Iterator[tuple[tuple[int, ...], Zone]]:
        """(key, sub-zone) for every combination of intervals of `dims` that meets the zone.

        A key entry is the interval's index, or -1 for a dimension over a stamp
        never set (its comparisons are false whatever the time). Keys come in a
        fixed order, so the first cell of a zone is always the same one.
        """
        if not dims:
            yield (), zone
            return
        yield from self._cells(zone, dims, 0, ())

    def _cells(
        self, zone: Zone, dims: Sequence[Dim], index: int, key: tuple[int, ...]
    ) -> Iterator[tuple[tuple[int, ...], Zone]]:
        if index == len(dims):
            yield key, zone
            return
        dim = dims[index]
        if not self.is_set(zone, dim.stamp) or (dim.kind == "diff" and not self.is_set(zone, dim.other)):
            yield from self._cells(zone, dims, index + 1, (*key, -1))
            return
        for position, interval in enumerate(dim.intervals()):
            sub = self.constrain(zone, self.bounds_of(dim, interval))
            if sub is not None:
                yield from self._cells(sub, dims, index + 1, (*key, position))

    def restrict(self, zone: Zone, dims: Sequence[Dim], key: Sequence[int]) -> Zone | None:
        """The cell of `zone` with `key`, or None if it is empty."""
        bounds = []
        for dim, position in zip(dims, key, strict=True):
            if position >= 0:
                bounds.extend(self.bounds_of(dim, dim.intervals()[position]))
        return self.constrain(zone, bounds)
