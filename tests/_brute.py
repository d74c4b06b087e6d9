"""A brute-force enumerator of the policies `tests/_policy_gen.py` makes, written from the docs.

It shares no code with the verifier. The semantics are those of
docs/language.md and docs/verifier.md ("the verifier semantics" of the
issue that made amounts exact):

- one agreement, no effects (so no faults), roles not told apart;
- a command commits only if the agreement is in one of its source states,
  its guard holds, every amount is defined and non-negative, and no
  non-external account goes negative in this agreement's own balances;
- an enabled command (source state and guard true) that would be refused for
  funds or a negative amount is a `funds_available` violation;
- a non-final state from which no command can ever commit, whatever time
  passes, while a non-external account holds money, is `funds_not_stuck`;
- the policy's invariants hold in every state the runtime can reach;
- percent splits are Numscript allotments (each portion rounded down, the
  leftover units one each to the portions in order, `remaining` last); fixed
  portions are capped by what is left, in order; `remaining` takes the rest;
- money times percent rounds toward minus infinity;
- time is whole seconds: a stamp's age restarts at 0 when it is set and
  grows by any number of seconds when the clock moves; a comparison with a
  stamp never set is false.

Every ranged param takes every value of a grid: its bounds and one minor unit
inside them, every constant the policy mentions, every sum and difference of
two of them, one unit either side of each of those, clipped to the range.
Rather than one search per valuation, one search carries, for each concrete
state shape, the set of valuations that reach it (a bit mask): balances are
kept as sums of amount terms (a param, a split portion, ...) whose values are
tabulated for every valuation, and every comparison is a mask. For one
valuation that is an ordinary breadth-first search, which is how witnesses
(shortest paths) are produced.

Ages are capped one past the largest duration the policy compares with and
counters one past the largest integer they are compared with: comparisons
with those constants cannot tell a capped value from a larger one, so the
capped search is exact, and finite unless a cycle pumps a balance, which the
depth bound stops (`truncated`).
"""

from __future__ import annotations

import itertools
import math
from collections import deque
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, NamedTuple

from tests._policy_gen import Expr, Plain, Policy, Split, Transition, money_text, percent_text

Form = tuple[tuple[int, int], ...]  # (term id, coefficient), sorted by term; term 0 is one minor unit
PERCENT_STEP = Fraction(1, 1_000_000)  # 0.0001%
MILLION = 1_000_000  # percents are held as integer millionths of the whole: 10% is 100_000
TIER_LIMIT = 3_000  # grids up to this size also take one unit either side of each sum and difference
BUILTIN_CHECKED = ("funds_available", "funds_not_stuck", "money_conserved", "no_negative_internal")


class State(NamedTuple):
    ctrl: int
    ages: tuple[int | None, ...]
    fired: tuple[int, ...]
    reached: int
    bals: tuple[Form, ...]  # one per internal account


# the grid --------------------------------------------------------------------------


def _walk(node: Any) -> list[tuple[Any, ...]]:
    out: list[tuple[Any, ...]] = []
    if isinstance(node, tuple) and node and isinstance(node[0], str):
        out.append(node)
        for part in node[1:]:
            out += _walk(part)
    return out


def _expressions(policy: Policy) -> list[Expr]:
    exprs: list[Expr] = [expr for _, expr in policy.invariants]
    for t in policy.transitions:
        if t.guard is not None:
            exprs.append(t.guard)
        for transfer in t.transfers:
            exprs.append(transfer.amount)
            if isinstance(transfer, Split):
                exprs += [portion for portion, _ in transfer.portions]
    return [node for expr in exprs for node in _walk(expr)]


def _near(values: set[Any], step: Any, lo: Any, hi: Any, fine: bool) -> list[Any]:
    """`values`, one `step` either side of each, every sum and difference of two of them
    (`fine`: one step either side of those too), and the bounds and one step inside them,
    all within [lo, hi]."""
    sums = {a + b for a in values for b in values} | {a - b for a in values for b in values}
    near = {v + d for v in values for d in (-step, 0, step)} | sums
    if fine:
        near |= {v + d for v in sums for d in (-step, step)}
    near |= {lo, hi, lo + step, hi - step}
    return sorted(v for v in near if lo <= v <= hi)


def grid(policy: Policy) -> tuple[tuple[str, ...], list[dict[str, Any]]]:
    """The ranged params' names and every valuation of the grid (fixed params included)."""
    nodes = _expressions(policy)
    money = {n[1] for n in nodes if n[0] == "m"} | {0}
    percents = {n[1] for n in nodes if n[0] == "pc"} | {Fraction(0)}
    for p in policy.params:
        (money if p.kind == "money" else percents).update((p.lo, p.hi))
    ranged = [p for p in policy.params if not p.fixed]
    names = [p.name for p in ranged]
    for fine in (True, False):
        axes = [
            _near(money, 1, p.lo, p.hi, fine) if p.kind == "money" else _near(percents, PERCENT_STEP, p.lo, p.hi, fine)
            for p in ranged
        ]
        if math.prod(len(a) for a in axes) <= TIER_LIMIT:
            break
    fixed = {p.name: p.lo for p in policy.params if p.fixed}
    valuations = [dict(zip(names, combo, strict=True)) | fixed for combo in itertools.product(*axes)]
    return tuple(names), valuations


def valuation_text(policy: Policy, valuation: dict[str, Any]) -> str:
    parts = []
    for p in policy.params:
        show = money_text if p.kind == "money" else percent_text
        parts.append(f"{p.name} = {show(valuation[p.name])}")
    return ", ".join(parts)


# the search --------------------------------------------------------------------------


@dataclass
class Outcome:
    """What the search found: per invariant, the valuations (bits) that violate it somewhere."""

    violated: dict[str, int]
    states: int
    truncated: bool
    # single-valuation searches: the shortest path to the first violating state, per invariant
    paths: dict[str, list[str]] = field(default_factory=dict)
    depths: dict[str, int] = field(default_factory=dict)


class Enumerator:
    """One search over every valuation in `valuations` at once."""

    def __init__(
        self, policy: Policy, valuations: list[dict[str, Any]], max_depth: int = 12, max_states: int = 60_000
    ) -> None:
        self.policy = policy
        self.valuations = valuations
        self.n = len(valuations)
        self.all = (1 << self.n) - 1
        self.max_depth = max_depth
        self.max_states = max_states
        self.states = {s: i for i, s in enumerate(policy.states)}
        self.finals = {self.states[s] for s in policy.finals}
        self.internal = [a.name for a in policy.accounts if not a.external]
        self.acct = {name: i for i, name in enumerate(self.internal)}
        self.tindex = {t.name: i for i, t in enumerate(policy.transitions)}
        self.stamp = {s: i for i, s in enumerate(policy.stamps)}
        nodes = _expressions(policy)
        self.age_cap = max([n[3] for n in nodes if n[0] == "age"], default=0) + 1
        ints = [n[1] for n in nodes if n[0] == "i"]
        self.count_cap = max(ints, default=0) + 1
        self.term_ids: dict[Any, int] = {("one",): 0}
        self.term_values: list[list[int]] = [[1] * self.n]
        self._values: dict[Form, list[int]] = {}
        self._masks: dict[tuple[Form, str], int] = {}
        self._moves: dict[State, list[tuple[State, int, str]]] = {}
        self._commit_any: dict[State, int] = {}

    # values and masks ------------------------------------------------------------

    def _term(self, key: Any, make: Any) -> int:
        found = self.term_ids.get(key)
        if found is None:
            found = self.term_ids[key] = len(self.term_values)
            self.term_values.append(make())
        return found

    def percent(self, expr: Expr) -> list[int]:
        """The percent's value for every valuation, in millionths."""
        if expr[0] == "pc":
            return [_millionths(expr[1])] * self.n
        if expr[0] == "p":
            return [_millionths(v[expr[1]]) for v in self.valuations]
        raise ValueError(f"not a percent: {expr}")

    def values(self, form: Form) -> list[int]:
        found = self._values.get(form)
        if found is None:
            found = [0] * self.n
            for term, coeff in form:
                column = self.term_values[term]
                found = [a + coeff * b for a, b in zip(found, column, strict=True)]
            self._values[form] = found
        return found

    def mask(self, form: Form, op: str) -> int:
        """Valuations where `form OP 0`."""
        key = (form, op)
        found = self._masks.get(key)
        if found is None:
            vals = self.values(form)
            test = _OPS[op]
            bits = "".join("1" if test(x) else "0" for x in reversed(vals))
            found = self._masks[key] = int(bits, 2) if bits else 0
        return found

    # expressions -------------------------------------------------------------------

    def money(self, expr: Expr, st: State) -> Form:
        op = expr[0]
        if op == "m":
            return ((0, expr[1]),) if expr[1] else ()
        if op == "p":
            name = expr[1]
            return ((self._term(("p", name), lambda: [v[name] for v in self.valuations]), 1),)
        if op == "bal":
            return st.bals[self.acct[expr[1]]]
        if op in ("+", "-"):
            return _combine(self.money(expr[1], st), self.money(expr[2], st), 1 if op == "+" else -1)
        if op == "*":
            left = self.money(expr[1], st)
            shares = self.percent(expr[2])

            def make() -> list[int]:
                vals = self.values(left)
                return [(a * s) // MILLION for a, s in zip(vals, shares, strict=True)]

            return ((self._term(("*", left, expr[2]), make), 1),)
        raise ValueError(f"not money: {expr}")

    def integer(self, expr: Expr, st: State) -> int:
        op = expr[0]
        if op == "i":
            return int(expr[1])
        if op in ("fired", "applied"):
            return st.fired[self.tindex[expr[1]]]
        if op in ("+", "-"):
            left, right = self.integer(expr[1], st), self.integer(expr[2], st)
            return left + right if op == "+" else left - right
        raise ValueError(f"not an integer: {expr}")

    def boolean(self, expr: Expr, st: State) -> int:
        op = expr[0]
        if op == "cmp":
            if _is_int(expr[2]):
                ok = _OPS[expr[1]](self.integer(expr[2], st) - self.integer(expr[3], st))
                return self.all if ok else 0
            return self.mask(_combine(self.money(expr[2], st), self.money(expr[3], st), -1), expr[1])
        if op == "age":
            age = st.ages[self.stamp[expr[1]]]
            return self.all if age is not None and _OPS[expr[2]](age - expr[3]) else 0
        if op == "and":
            return self.boolean(expr[1], st) & self.boolean(expr[2], st)
        if op == "or":
            return self.boolean(expr[1], st) | self.boolean(expr[2], st)
        if op == "not":
            return self.all & ~self.boolean(expr[1], st)
        if op == "implies":
            return (self.all & ~self.boolean(expr[1], st)) | self.boolean(expr[2], st)
        if op == "reached":
            return self.all if st.reached >> self.states[expr[1]] & 1 else 0
        if op == "final":
            return self.all if st.ctrl in self.finals else 0
        raise ValueError(f"not a condition: {expr}")

    # moves -------------------------------------------------------------------------------

    def _split_terms(self, transfer: Split, amount: Form, key: Any) -> list[Form]:
        """One term per destination of the split: the Numscript shares of `amount`."""
        ids = [self.term_ids.get(("split", key, amount, j)) for j in range(len(transfer.portions) + 1)]
        if all(i is not None for i in ids):
            return [((i, 1),) for i in ids if i is not None]
        vals = self.values(amount)
        if transfer.percent:
            shares = [self.percent(portion) for portion, _ in transfer.portions]
        else:
            caps = [self.values(self.money(portion, _EMPTY)) for portion, _ in transfer.portions]
        columns: list[list[int]] = [[] for _ in range(len(transfer.portions) + 1)]
        for i, a in enumerate(vals):
            if a < 0:
                parts = [0] * len(columns)
            elif transfer.percent:
                row = [s[i] for s in shares]
                row.append(MILLION - sum(row))
                parts = [(a * s) // MILLION for s in row]
                for j in range(a - sum(parts)):
                    parts[j] += 1
            else:
                left, parts = a, []
                for cap in caps:
                    take = max(0, min(cap[i], left))
                    parts.append(take)
                    left -= take
                parts.append(left)
            for column, part in zip(columns, parts, strict=True):
                column.append(part)
        forms: list[Form] = []
        for j, column in enumerate(columns):
            tid = self._term(("split", key, amount, j), lambda c=column: c)
            forms.append(((tid, 1),))
        return forms

    def step(self, st: State, index: int, t: Transition) -> tuple[int, int, State]:
        """(enabled, commits, successor) of command `t` from `st`: masks over every valuation."""
        enabled = self.all if t.guard is None else self.boolean(t.guard, st)
        ok = self.all
        bals = list(st.bals)
        sources: set[str] = set()
        for k, transfer in enumerate(t.transfers):
            amount = self.money(transfer.amount, st)
            ok &= self.mask(amount, ">=")
            if isinstance(transfer, Plain):
                postings = [(transfer.source, transfer.destination, amount)]
            else:
                dests = [d for _, d in transfer.portions] + [transfer.remaining]
                shares = self._split_terms(transfer, amount, (index, k))
                postings = [(transfer.source, d, s) for d, s in zip(dests, shares, strict=True)]
            for source, dest, value in postings:
                if source in self.acct:
                    bals[self.acct[source]] = _combine(bals[self.acct[source]], value, -1)
                    sources.add(source)
                if dest in self.acct:
                    bals[self.acct[dest]] = _combine(bals[self.acct[dest]], value, 1)
        for source in sources:
            ok &= self.mask(bals[self.acct[source]], ">=")
        ages = list(st.ages)
        for s in t.stamps:
            ages[self.stamp[s]] = 0
        fired = list(st.fired)
        fired[index] = min(fired[index] + 1, self.count_cap)
        target = self.states[t.target]
        succ = State(target, tuple(ages), tuple(fired), st.reached | 1 << target, tuple(bals))
        return enabled, enabled & ok, succ

    def clock(self, st: State) -> list[tuple[State, int]]:
        """The states `k` seconds later, k = 1 .. the age cap (distinct ones only)."""
        out: dict[State, int] = {}
        for k in range(1, self.age_cap + 1):
            ages = tuple(None if a is None else min(a + k, self.age_cap) for a in st.ages)
            if ages != st.ages:
                out.setdefault(st._replace(ages=ages), k)
        return list(out.items())

    def moves(self, st: State) -> list[tuple[State, int, str]]:
        found = self._moves.get(st)
        if found is None:
            found = []
            for i, t in enumerate(self.policy.transitions):
                if self.policy.states[st.ctrl] in t.sources:
                    _, commits, succ = self.step(st, i, t)
                    if commits:
                        found.append((succ, commits, t.name))
            found += [(succ, self.all, f"time passes +{k}s") for succ, k in self.clock(st)]
            self._moves[st] = found
        return found

    def commit_any(self, st: State) -> int:
        found = self._commit_any.get(st)
        if found is None:
            found = 0
            for move in self.moves(st):
                if not move[2].startswith("time passes"):
                    found |= move[1]
            self._commit_any[st] = found
        return found

    def checks(self, st: State) -> list[tuple[str, int, str]]:
        """(invariant, valuations violating it at `st`, detail)."""
        out: list[tuple[str, int, str]] = []
        for name, expr in self.policy.invariants:
            bad = self.all & ~self.boolean(expr, st)
            if bad:
                out.append((name, bad, ""))
        for i, t in enumerate(self.policy.transitions):
            if self.policy.states[st.ctrl] in t.sources:
                enabled, commits, _ = self.step(st, i, t)
                if enabled & ~commits:
                    out.append(("funds_available", enabled & ~commits, f"refused {t.name}"))
        if st.ctrl not in self.finals:
            holding = 0
            for form in st.bals:
                holding |= self.mask(form, "!=")
            if holding:
                can = self.commit_any(st)
                for later, _ in self.clock(st):
                    can |= self.commit_any(later)
                if holding & ~can:
                    out.append(("funds_not_stuck", holding & ~can, f"stuck in {self.policy.states[st.ctrl]}"))
        return out

    def initial(self) -> State:
        n_t = len(self.policy.transitions)
        return State(0, (None,) * len(self.policy.stamps), (0,) * n_t, 1, ((),) * len(self.internal))

    def run(self) -> Outcome:
        """Explore every valuation; with one valuation, also the shortest path per invariant."""
        start = self.initial()
        reach: dict[State, int] = {start: self.all}
        depth = {start: 0}
        parent: dict[State, tuple[State, str]] = {}
        pending = {start: self.all}
        queue = deque([start])
        outcome = Outcome({}, 0, truncated=False)
        while queue:
            st = queue.popleft()
            delta = pending.pop(st)
            for name, bad, detail in self.checks(st):
                hit = bad & delta
                if hit:
                    if name not in outcome.violated and self.n == 1:
                        outcome.paths[name] = [*_path(parent, st), *([detail] if detail else [])]
                        outcome.depths[name] = depth[st]
                    outcome.violated[name] = outcome.violated.get(name, 0) | hit
            moves = self.moves(st)
            if depth[st] >= self.max_depth:
                outcome.truncated = outcome.truncated or any(delta & m for _, m, _ in moves)
                continue
            for succ, m, label in moves:
                new = delta & m & ~reach.get(succ, 0)
                if not new:
                    continue
                reach[succ] = reach.get(succ, 0) | new
                if succ not in depth:
                    depth[succ] = depth[st] + 1
                    parent[succ] = (st, label)
                if succ in pending:
                    pending[succ] |= new
                else:
                    pending[succ] = new
                    queue.append(succ)
            if len(reach) > self.max_states:
                outcome.truncated = True
                break
        outcome.states = len(reach)
        return outcome

    def describe(self, st: State) -> str:
        bals = [f"{a} {money_text(self.values(f)[0])}" for a, f in zip(self.internal, st.bals, strict=True) if f]
        return f"{self.policy.states[st.ctrl]} [{', '.join(bals)}]"


_EMPTY = State(0, (), (), 0, ())


def _path(parent: dict[State, tuple[State, str]], st: State) -> list[str]:
    steps: list[str] = []
    while st in parent:
        st, label = parent[st]
        steps.append(label)
    return steps[::-1]


def _combine(left: Form, right: Form, sign: int) -> Form:
    acc = dict(left)
    for term, coeff in right:
        acc[term] = acc.get(term, 0) + sign * coeff
    return tuple(sorted((t, c) for t, c in acc.items() if c))


def _millionths(value: Fraction) -> int:
    scaled = value * MILLION
    assert scaled.denominator == 1, value
    return int(scaled)


def _is_int(expr: Expr) -> bool:
    if expr[0] in ("i", "fired", "applied"):
        return True
    return expr[0] in ("+", "-") and _is_int(expr[1])


_OPS: dict[str, Any] = {
    "==": lambda x: x == 0,
    "!=": lambda x: x != 0,
    "<": lambda x: x < 0,
    "<=": lambda x: x <= 0,
    ">": lambda x: x > 0,
    ">=": lambda x: x >= 0,
}


# entry points ----------------------------------------------------------------------


@dataclass
class Finding:
    """An invariant the enumerator saw violated, with a witness valuation and its shortest path."""

    invariant: str
    valuation: dict[str, Any]
    path: list[str]
    depth: int
    count: int  # how many grid valuations violate it


def enumerate_policy(policy: Policy, max_depth: int = 12) -> tuple[list[Finding], Outcome, int]:
    """Every violation over the grid; (findings, the grid search's outcome, grid size)."""
    _, valuations = grid(policy)
    outcome = Enumerator(policy, valuations, max_depth=max_depth).run()
    findings = []
    for name in sorted(outcome.violated):
        bits = outcome.violated[name]
        lowest = (bits & -bits).bit_length() - 1
        single = check_valuation(policy, valuations[lowest], max_depth)
        findings.append(
            Finding(
                name,
                valuations[lowest],
                single.paths.get(name, ["(not reproduced for one valuation: enumerator bug)"]),
                single.depths.get(name, -1),
                bin(bits).count("1"),
            )
        )
    return findings, outcome, len(valuations)


def check_valuation(policy: Policy, valuation: dict[str, Any], max_depth: int = 12) -> Outcome:
    """The search for one valuation, with shortest paths."""
    return Enumerator(policy, [valuation], max_depth=max_depth).run()
