"""A hand-specialised breadth-first search of `policies/marketplace_milestone.pact`.

Written from the policy text and the documented state-space semantics
(docs/verifier.md, the zone rules in `verifier/zones.py`'s docstring), not
from the explorer's code paths, so that equal state counts are a
differential check and the speed ratio compares the explorer with the
fastest plain search of the same space.

One agreement of this policy is fully described by its control state, the
set of transitions it has fired (the machine is acyclic, so each fires at
most once; balances and `reached` are functions of that set, and no guard
or posting involves `price` beyond `price >= 1.00`, so the path condition
never changes) and the zone of its two stamps' ages. Agreements share
nothing (no effects, so the fault budget is never used), so a state of N
agreements is a sorted N-tuple of per-agreement states (symmetry reduction).

Speed: the per-agreement graph (a few dozen nodes) is built once; the
search proper is one pass over packed states (for three agreements, one
int of three 6-bit digits), with every move read from a precomputed table
and no helper call per state.
"""

from __future__ import annotations

from bisect import bisect_left
from collections import deque

INF = 1 << 62
WINDOW = 14 * 86_400  # `refund_window`, in seconds
# The explorer cuts an age compared with a constant D at ceil(D) and floor(D) + 1 (a
# comparison of whole seconds changes there), so the guards see three intervals of an
# age, and ages beyond the last cut are alike (extrapolation constant).
INTERVALS = ((0, WINDOW - 1), (WINDOW, WINDOW), (WINDOW + 1, INF))
MAXIMUM = WINDOW + 1
DRAFT, FUNDED, DELIVERED, DISPUTED, RELEASED, REFUNDED = range(6)
D, F = 1, 2  # clocks: the ages of `delivered_at` and `funded_at` (clock 0 is the reference)
# Bits of the fired set.
FUND, DELIVER, RELEASE, AUTO_RELEASE, REFUND_UNDELIVERED, DISPUTE, RULE_BUYER, RULE_SELLER = (1 << i for i in range(8))

Dbm = tuple[int, ...]  # 3 x 3 row-major: entry (i, j) bounds x_i - x_j
Local = tuple[int, int, Dbm]  # control state, fired set, zone


def _active(m: list[int]) -> list[int]:
    return [0] + [i for i in (D, F) if m[i] != INF]


def _close(m: list[int]) -> Dbm | None:
    """Shortest paths over the set clocks; None when the zone is empty."""
    active = _active(m)
    for k in active:
        for i in active:
            ik = m[i * 3 + k]
            if ik == INF:
                continue
            for j in active:
                kj = m[k * 3 + j]
                if kj != INF and ik + kj < m[i * 3 + j]:
                    m[i * 3 + j] = ik + kj
    if any(m[i * 4] < 0 for i in active):
        return None
    return tuple(m)


def _age_in(zone: Dbm, clock: int, interval: tuple[int, int]) -> Dbm | None:
    """The part of `zone` where the age of `clock` lies in `interval`."""
    low, high = interval
    m = list(zone)
    changed = False
    if high != INF and high < m[clock * 3]:
        m[clock * 3], changed = high, True
    if low > 0 and -low < m[clock]:
        m[clock], changed = -low, True
    return _close(m) if changed else zone


def _stamp(zone: Dbm, clock: int) -> Dbm:
    """`clock`'s stamp taken now: its age is 0, so its differences are the other ages."""
    m = list(zone)
    m[clock] = m[clock * 3] = 0
    for j in _active(m):
        if j not in (0, clock):
            m[clock * 3 + j] = m[j]
            m[j * 3 + clock] = m[j * 3]
    return tuple(m)


def _later(zone: Dbm) -> Dbm:
    """Any delay: ages lose their upper bounds; bounds past the extrapolation constant are dropped."""
    m = list(zone)
    active = _active(m)
    for i in active[1:]:
        m[i * 3] = INF
    changed = False
    for i in active:
        for j in active:
            value = m[i * 3 + j]
            if i == j or value == INF:
                continue
            if i and value > MAXIMUM:
                m[i * 3 + j], changed = INF, True
            elif j and value < -MAXIMUM:
                m[i * 3 + j], changed = -(MAXIMUM + 1), True
    if not changed:
        return tuple(m)
    closed = _close(m)
    assert closed is not None
    return closed


def _moves(local: Local) -> list[Local]:
    """Every move of one agreement (time passing included), by the policy's clauses."""
    ctrl, fired, zone = local
    out: list[Local] = []

    def timed(clock: int, intervals: tuple[int, ...], target: int, bit: int) -> None:
        if zone[clock] == INF:  # stamp never set: the deadline cannot have passed
            return
        for index in intervals:
            cell = _age_in(zone, clock, INTERVALS[index])
            if cell is not None:
                out.append((target, fired | bit, cell))

    if ctrl == DRAFT:
        out.append((FUNDED, fired | FUND, _stamp(zone, F)))  # 2.1
    elif ctrl == FUNDED:
        out.append((DELIVERED, fired | DELIVER, _stamp(zone, D)))  # 3.1
        timed(F, (1, 2), REFUNDED, REFUND_UNDELIVERED)  # 5.1: now >= funded_at + refund_window
    elif ctrl == DELIVERED:
        out.append((RELEASED, fired | RELEASE, zone))  # 4.1
        timed(D, (1, 2), RELEASED, AUTO_RELEASE)  # 4.2: now >= delivered_at + refund_window
        timed(D, (0,), DISPUTED, DISPUTE)  # 6.1: now < delivered_at + refund_window
    elif ctrl == DISPUTED:
        out.append((REFUNDED, fired | RULE_BUYER, zone))  # 6.2
        out.append((RELEASED, fired | RULE_SELLER, zone))  # 6.3
    later = _later(zone)
    if later != zone:
        out.append((ctrl, fired, later))
    return out


def local_graph() -> tuple[list[list[int]], int]:
    """(successor ids per agreement state, id of the initial one): built once, before the timed search."""
    start: Local = (DRAFT, 0, tuple(0 if i == j else INF for i in range(3) for j in range(3)))
    ids = {start: 0}
    order = [start]
    succ: list[list[int]] = []
    for local in order:  # grows while iterated: a breadth-first walk
        row = []
        for new in _moves(local):
            if new not in ids:
                ids[new] = len(order)
                order.append(new)
            row.append(ids[new])
        succ.append(row)
    return succ, 0


def search(agreements: int, succ: list[list[int]], start: int) -> tuple[int, int]:
    """(distinct states, transitions) of `agreements` agreements; transitions count duplicates as the explorer does."""
    if agreements == 3 and len(succ) <= 64:
        return _search3(succ, start)
    if len(succ) <= 64:
        return _search_packed(agreements, succ, start)
    initial = (start,) * agreements
    seen = {initial}
    queue = deque([initial])
    degree = [len(row) for row in succ]
    edges = 0
    while queue:
        state = queue.popleft()
        for position in range(agreements):
            local = state[position]
            edges += degree[local]
            if position and local == state[position - 1]:
                continue  # same successors as the previous position
            rest = state[:position] + state[position + 1 :]
            for new in succ[local]:
                nxt = tuple(sorted((*rest, new)))
                if nxt not in seen:
                    seen.add(nxt)
                    queue.append(nxt)
    return len(seen), edges


def _search3(succ: list[list[int]], start: int) -> tuple[int, int]:
    """Three agreements, each state one int `a << 12 | b << 6 | c` with a <= b <= c."""
    initial = start << 12 | start << 6 | start
    seen = {initial}
    queue = deque([initial])
    append = queue.append
    add = seen.add
    degree = [len(row) for row in succ]
    edges = 0
    while queue:
        state = queue.popleft()
        a, b, c = state >> 12, (state >> 6) & 63, state & 63
        edges += degree[a] + degree[b] + degree[c]
        for n in succ[a]:  # replace a; keep b <= c
            s = (n << 12 | b << 6 | c) if n <= b else (b << 12 | n << 6 | c) if n <= c else (b << 12 | c << 6 | n)
            if s not in seen:
                add(s)
                append(s)
        if b != a:
            for n in succ[b]:  # replace b; keep a <= c
                s = (n << 12 | a << 6 | c) if n <= a else (a << 12 | n << 6 | c) if n <= c else (a << 12 | c << 6 | n)
                if s not in seen:
                    add(s)
                    append(s)
        if c != b:
            for n in succ[c]:  # replace c; keep a <= b
                s = (n << 12 | a << 6 | b) if n <= a else (a << 12 | n << 6 | b) if n <= b else (a << 12 | b << 6 | n)
                if s not in seen:
                    add(s)
                    append(s)
    return len(seen), edges


def _search_packed(agreements: int, succ: list[list[int]], start: int) -> tuple[int, int]:
    """Any number of agreements, each state one int of sorted 6-bit local ids (smallest in the top bits)."""
    shifts = [6 * (agreements - 1 - i) for i in range(agreements)]

    def pack(ids: list[int]) -> int:
        value = 0
        for local in ids:
            value = value << 6 | local
        return value

    initial = pack([start] * agreements)
    seen = {initial}
    queue = deque([initial])
    append = queue.append
    add = seen.add
    degree = [len(row) for row in succ]
    edges = 0
    while queue:
        state = queue.popleft()
        ids = [(state >> shift) & 63 for shift in shifts]
        previous = -1
        for position, local in enumerate(ids):
            edges += degree[local]
            if local == previous:
                continue  # the same successors as the previous position
            previous = local
            rest = ids[:position] + ids[position + 1 :]
            for new in succ[local]:
                at = bisect_left(rest, new)
                value = 0
                for other in rest[:at]:
                    value = value << 6 | other
                value = value << 6 | new
                for other in rest[at:]:
                    value = value << 6 | other
                if value not in seen:
                    add(value)
                    append(value)
    return len(seen), edges
