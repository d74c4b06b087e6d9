"""A seeded generator of small `.pact` policies for the verifier's differential test.

Each policy is built as a small typed tree (`Policy`) and rendered to `.pact`
text, so the brute-force enumerator in `tests/_brute.py` reads the same
policy as the compiler without parsing it a second way. The shapes are the
ones the verifier has got wrong before: cyclic state machines, deadlines on
stamps, percent and fixed-amount splits, ranged money and percent params,
guards comparing params with each other and with point constants, and
invariants over balances and counters.

Kept out on purpose, so that the enumerator's semantics stay the documented
ones and nothing is left to interpretation: effects (no faults then), approvals,
text params, division, comparisons of two stamps, `balance()` in an amount of
a transition with several transfers, and transitions where one internal
account is both a source and a destination (sequential and net funds checks
then agree).
"""

from __future__ import annotations

import itertools
import random
from dataclasses import dataclass, replace
from fractions import Fraction
from typing import Any

# An expression is a small tuple tree; the first item names the node:
#   ("m", units)              money literal, minor units
#   ("i", n)                  integer literal
#   ("pc", fraction)          percent literal (10% is Fraction(1, 10))
#   ("p", name)               a money or percent param
#   ("bal", account) ("fired", t) ("applied", t) ("reached", state) ("final",)
#   ("+", a, b) ("-", a, b) ("*", money, percent)
#   ("cmp", op, a, b)         op in == != < <= > >=
#   ("age", stamp, op, secs)  `now OP stamp + secs` (stamp unset: false)
#   ("and", a, b) ("or", a, b) ("not", a) ("implies", a, b)
Expr = tuple[Any, ...]

SCALE = 2
UNIT = 10**SCALE


@dataclass(frozen=True)
class Param:
    """A money or percent param: ranged (`lo < hi`) or fixed (`lo == hi`)."""

    name: str
    kind: str  # "money" (minor units) or "percent" (Fraction)
    lo: Any
    hi: Any

    @property
    def fixed(self) -> bool:
        return bool(self.lo == self.hi)


@dataclass(frozen=True)
class Account:
    name: str
    address: str
    external: bool = False


@dataclass(frozen=True)
class Split:
    """`transfer AMOUNT from SOURCE { PORTION to ACCOUNT ... remaining to ACCOUNT }`."""

    amount: Expr
    source: str
    portions: tuple[tuple[Expr, str], ...]
    remaining: str
    percent: bool  # percent portions (allotment) or fixed amounts (capped in order)


@dataclass(frozen=True)
class Plain:
    amount: Expr
    source: str
    destination: str


Transfer = Plain | Split


@dataclass(frozen=True)
class Transition:
    name: str
    sources: tuple[str, ...]
    target: str
    by: tuple[str, ...]
    guard: Expr | None
    stamps: tuple[str, ...]
    transfers: tuple[Transfer, ...]


@dataclass(frozen=True)
class Policy:
    seed: int
    params: tuple[Param, ...]
    accounts: tuple[Account, ...]
    states: tuple[str, ...]  # the first is initial
    finals: frozenset[str]
    transitions: tuple[Transition, ...]
    invariants: tuple[tuple[str, Expr], ...]
    stamps: tuple[str, ...]

    def param(self, name: str) -> Param:
        return next(p for p in self.params if p.name == name)

    def account(self, name: str) -> Account:
        return next(a for a in self.accounts if a.name == name)


# rendering -----------------------------------------------------------------------


def money_text(units: int) -> str:
    sign = "-" if units < 0 else ""
    whole, cents = divmod(abs(units), UNIT)
    return f"{sign}{whole}.{cents:0{SCALE}d}"


def percent_text(value: Fraction) -> str:
    scaled = value * 100
    if scaled.denominator == 1:
        return f"{scaled.numerator}%"
    text = f"{float(scaled):.4f}".rstrip("0").rstrip(".")
    assert Fraction(text) == scaled, value
    return f"{text}%"


_PRECEDENCE = {"implies": 1, "or": 2, "and": 3, "not": 4, "cmp": 5, "age": 5, "+": 6, "-": 6, "*": 7}


def expr_text(expr: Expr, outer: int = 0) -> str:
    """`.pact` text for an expression, parenthesised only where precedence needs it."""
    op = expr[0]
    if op == "m":
        return money_text(expr[1])
    if op == "i":
        return str(expr[1])
    if op == "pc":
        return percent_text(expr[1])
    if op == "p":
        return str(expr[1])
    if op in ("bal", "fired", "applied", "reached"):
        fn = "balance" if op == "bal" else op
        return f"{fn}({expr[1]})"
    if op == "final":
        return "final"
    level = _PRECEDENCE[op]
    if op in ("+", "-", "*"):
        # left-associative: the right operand binds one level tighter
        text = f"{expr_text(expr[1], level)} {op} {expr_text(expr[2], level + 1)}"
    elif op == "cmp":
        text = f"{expr_text(expr[2], level + 1)} {expr[1]} {expr_text(expr[3], level + 1)}"
    elif op == "age":
        text = f"now {expr[2]} {expr[1]} + {expr[3]}s"
    elif op in ("and", "or"):
        text = f"{expr_text(expr[1], level)} {op} {expr_text(expr[2], level + 1)}"
    elif op == "implies":
        text = f"{expr_text(expr[1], level + 1)} implies {expr_text(expr[2], level)}"
    elif op == "not":
        text = f"not {expr_text(expr[1], level + 1)}"
    else:
        raise ValueError(op)
    return f"({text})" if level <= outer else text


def _param_text(p: Param) -> str:
    show = money_text if p.kind == "money" else percent_text
    if p.fixed:
        return f"param {p.name}: {p.kind} = {show(p.lo)}"
    return f"param {p.name}: {p.kind} between {show(p.lo)} and {show(p.hi)}"


def _transfer_text(t: Transfer) -> list[str]:
    if isinstance(t, Plain):
        return [f"  transfer {expr_text(t.amount)} from {t.source} to {t.destination}"]
    lines = [f"  transfer {expr_text(t.amount)} from {t.source} {{"]
    lines += [f"    {expr_text(portion)} to {dest}" for portion, dest in t.portions]
    lines += [f"    remaining to {t.remaining}", "  }"]
    return lines


def render(policy: Policy) -> str:
    """The policy as `.pact` source."""
    out = [f'pact "gen.p{policy.seed}" version "1.0.0"', "", "currency EUR scale 2", ""]
    out += ["role buyer", "role seller", "clock scheduler", ""]
    out += [_param_text(p) for p in policy.params] + [""]
    for a in policy.accounts:
        out.append(f'account {a.name} "{a.address}"' + (" external" if a.external else ""))
    out.append("")
    for i, s in enumerate(policy.states):
        flags = (" initial" if i == 0 else "") + (" final" if s in policy.finals else "")
        out.append(f"state {s}{flags}")
    out.append("")
    for n, t in enumerate(policy.transitions, start=1):
        out.append(f'clause "{n}" transition {t.name}: {", ".join(t.sources)} -> {t.target} {{')
        out.append(f"  by {', '.join(t.by)}")
        if t.guard is not None:
            out.append(f"  when {expr_text(t.guard)}")
        out += [f"  stamp {s}" for s in t.stamps]
        for transfer in t.transfers:
            out += _transfer_text(transfer)
        out += ["}", ""]
    for n, (name, expr) in enumerate(policy.invariants, start=1):
        out.append(f'clause "9.{n}" invariant {name}: {expr_text(expr)}')
    return "\n".join(out) + "\n"


# generation ------------------------------------------------------------------------

_MIDDLE = ("funded", "review", "disputed")
_FINALS = ("done", "cancelled")


class _Gen:
    """One policy from one seed; every choice goes through `self.rng`."""

    def __init__(self, seed: int) -> None:
        self.seed = seed
        self.rng = random.Random(seed)
        self.money: list[str] = []
        self.percent: str | None = None
        self.stamps: list[str] = []
        self.names: list[str] = []
        # A careful policy moves money only where it is held: payouts of what the
        # escrow holds, on the way to a final state. Its violations are the subtle ones.
        self.careful = self.rng.random() < 0.5

    def cents(self, lo: int, hi: int) -> int:
        """A point constant inside [lo, hi], often with odd cents (`37.41`)."""
        value = self.rng.randint(lo, hi)
        return value if self.rng.random() < 0.6 else value - value % UNIT

    def params(self) -> tuple[Param, ...]:
        rng = self.rng
        lo = rng.choice((1, 5, 10)) * UNIT
        hi = rng.choice((50, 100, 200)) * UNIT
        out = [Param("price", "money", lo, hi)]
        fee = rng.choice(("none", "ranged", "ranged", "fixed"))
        if fee == "ranged":
            flo = rng.choice((1, 20)) * UNIT
            out.append(Param("fee", "money", flo, flo + rng.choice((10, 20)) * UNIT))
        elif fee == "fixed":
            value = rng.choice((250, 2500, 499))
            out.append(Param("fee", "money", value, value))
        cut = rng.choice(("none", "none", "fixed", "ranged")) if fee != "ranged" else rng.choice(("none", "fixed"))
        if cut == "fixed":
            out.append(Param("cut", "percent", Fraction(1, 10), Fraction(1, 10)))
        elif cut == "ranged":
            out.append(Param("cut", "percent", Fraction(0), Fraction(1, 5)))
        self.money = [p.name for p in out if p.kind == "money"]
        self.percent = "cut" if cut != "none" else None
        return tuple(out)

    def amount(self, params: dict[str, Param]) -> Expr:
        """A transfer amount: a param, a difference of params, a constant, a sum."""
        rng = self.rng
        choices: list[Expr] = [("p", "price"), ("p", "price")]
        if "fee" in params:
            choices += [("p", "fee"), ("-", ("p", "price"), ("p", "fee")), ("+", ("p", "price"), ("p", "fee"))]
        choices.append(("m", rng.choice((500, 300, 1000))))
        choices.append(("-", ("p", "price"), ("m", rng.choice((200, 500)))))
        if self.percent is not None:
            choices.append(("*", ("p", "price"), ("p", self.percent)))
        return rng.choice(choices)

    def guard(self, params: dict[str, Param], transitions: list[str]) -> Expr | None:
        rng = self.rng
        price = params["price"]
        atoms: list[Expr] = [
            ("cmp", "==", ("p", "price"), ("m", self.cents(price.lo, price.hi))),
            ("cmp", rng.choice((">", ">=", "<")), ("p", "price"), ("m", self.cents(price.lo, price.hi))),
            ("cmp", ">=", ("bal", "escrow"), ("p", "price")),
            ("cmp", ">", ("bal", "escrow"), ("m", 0)),
        ]
        if "fee" in params and not params["fee"].fixed:
            fee = params["fee"]
            atoms += [
                ("cmp", "==", ("p", "price"), ("p", "fee")),
                ("cmp", ">", ("-", ("p", "price"), ("p", "fee")), ("m", rng.choice((300, 1, 1000)))),
                ("cmp", "<=", ("p", "price"), ("+", ("p", "fee"), ("m", rng.choice((500, 3))))),
                ("cmp", "==", ("p", "fee"), ("m", self.cents(fee.lo, fee.hi))),
            ]
        elif "fee" in params:
            atoms.append(("cmp", ">", ("p", "price"), ("p", "fee")))
        if self.percent is not None:
            atoms.append(("cmp", ">", ("*", ("p", "price"), ("p", self.percent)), ("m", rng.choice((100, 450)))))
        if transitions:
            atoms.append(("cmp", "<", ("fired", rng.choice(transitions)), ("i", rng.choice((1, 2)))))
        if self.stamps:
            stamp = rng.choice(self.stamps)
            secs = rng.choice((2, 3, 5))
            atoms += [("age", stamp, ">=", secs), ("age", stamp, "<", secs), ("age", stamp, ">", secs)]
        roll = rng.random()
        if roll < 0.35:
            return None
        first = rng.choice(atoms)
        if roll < 0.8:
            return first
        return (rng.choice(("and", "or")), first, rng.choice(atoms))

    def body(self, params: dict[str, Param], accounts: list[str]) -> tuple[Transfer, ...]:
        """0..2 transfers; an internal account is never both a source and a destination."""
        rng = self.rng
        internal = [a for a in accounts if a != "world"]
        out: list[Transfer] = []
        used_src: set[str] = set()
        used_dst: set[str] = set()
        for _ in range(rng.choice((0, 1, 1, 1, 2))):
            roll = rng.random()
            if roll < 0.6:
                source = "escrow"
            elif roll < 0.75:
                source = "world"
            elif roll < 0.9 and "hold" in internal:
                source = "hold"
            else:
                source = rng.choice(internal)
            targets = [a for a in accounts if a != source and a not in used_src and (source != "world" or a != "world")]
            if source in used_dst or not targets:
                continue
            if rng.random() < 0.3 and source != "world":
                dests = [a for a in targets if a != "world"]
                if len(dests) >= 2:
                    first, rest = rng.sample(dests, 2)
                    out.append(self.split(params, source, first, rest))
                    used_src.add(source)
                    used_dst.update((first, rest))
                    continue
            dest = rng.choice(targets)
            amount = self.amount(params)
            if not out and rng.random() < 0.15 and source != "world":
                amount = ("bal", source)
            out.append(Plain(amount, source, dest))
            used_src.add(source)
            used_dst.add(dest)
            if isinstance(amount, tuple) and amount[0] == "bal":
                break
        return tuple(out)

    def payout(self, params: dict[str, Param], accounts: list[str]) -> tuple[Transfer, ...]:
        """What the escrow holds (or the price), to one account or split between two."""
        rng = self.rng
        amount: Expr = rng.choice((("bal", "escrow"), ("bal", "escrow"), ("p", "price")))
        dests = [a for a in accounts if a not in ("escrow", "world")]
        if rng.random() < 0.5:
            first, rest = rng.sample(dests, 2)
            split = self.split(params, "escrow", first, rest)
            return (replace(split, amount=amount),)
        return (Plain(amount, "escrow", rng.choice([*dests, "world"])),)

    def split(self, params: dict[str, Param], source: str, first: str, rest: str) -> Split:
        rng = self.rng
        amount = self.amount(params)
        if rng.random() < 0.6:
            portion: Expr = ("p", self.percent) if self.percent and rng.random() < 0.5 else ("pc", Fraction(1, 10))
            if rng.random() < 0.3:
                portion = ("pc", Fraction(333333, 1000000))
            return Split(amount, source, ((portion, first),), rest, percent=True)
        fixed: Expr = ("p", "fee") if "fee" in params else ("m", 250)
        return Split(amount, source, ((fixed, first),), rest, percent=False)

    def name(self, base: str) -> str:
        name = f"{base}{len(self.names) + 1}"
        self.names.append(name)
        return name

    def policy(self) -> Policy:
        rng = self.rng
        params = self.params()
        by_name = {p.name: p for p in params}
        accounts = [
            Account("world", "world", external=True),
            Account("escrow", "escrow:{agreement}"),
            Account("seller", "sellers:{seller}:payable"),
            Account("platform", "platform:fees"),
        ]
        if rng.random() < 0.3:
            accounts.append(Account("hold", "holds:{agreement}"))
        account_names = [a.name for a in accounts]
        middle = list(_MIDDLE[: rng.choice((1, 2, 3))])
        finals = list(_FINALS[: rng.choice((1, 2))])
        if rng.random() < 0.6:
            self.stamps.append("t0")
        transitions: list[Transition] = []
        fund_amount: Expr = ("p", "price")
        if "fee" in by_name and rng.random() < 0.3:
            fund_amount = ("+", ("p", "price"), ("p", "fee"))
        transitions.append(
            Transition(
                self.name("fund"),
                ("draft",),
                middle[0],
                ("buyer",),
                None,
                tuple(self.stamps),
                (Plain(fund_amount, "world", "escrow"),),
            )
        )
        if rng.random() < 0.3:
            self.stamps.append("t1")
        edges: list[tuple[str, str]] = list(itertools.pairwise(middle))
        for _ in range(rng.choice((1, 1, 2))):
            j = rng.randrange(len(middle))
            edges.append((middle[j], middle[rng.randrange(j + 1)]))  # back edge or self-loop: a cycle
        edges.append((middle[-1], finals[0]))
        for final in finals:
            edges.append((rng.choice(middle), final))
        if rng.random() < 0.3:
            edges.append(("draft", finals[-1]))
        for source, target in edges:
            names = [t.name for t in transitions]
            guard = self.guard(by_name, names)
            stamps: tuple[str, ...] = ()
            if "t1" in self.stamps and rng.random() < 0.4:
                stamps = ("t1",)
            elif "t0" in self.stamps and rng.random() < 0.15:
                stamps = ("t0",)
            transfers = self.body(by_name, account_names) if source != "draft" else ()
            if self.careful:
                transfers = self.payout(by_name, account_names) if target in finals and source != "draft" else ()
            by = ("seller", "scheduler") if guard is not None and _reads_time(guard) else ("buyer",)
            base = "back" if target in middle and middle.index(target) <= middle.index(source) else "step"
            if target in finals:
                base = "close"
            transitions.append(Transition(self.name(base), (source,), target, by, guard, stamps, transfers))
        if "t1" in self.stamps and not any("t1" in t.stamps for t in transitions):
            transitions[1] = replace(transitions[1], stamps=("t1",))
        return Policy(
            seed=self.seed,
            params=params,
            accounts=tuple(accounts),
            states=("draft", *middle, *finals),
            finals=frozenset(finals),
            transitions=tuple(transitions),
            invariants=self.invariants(by_name, transitions, middle + finals, finals),
            stamps=tuple(self.stamps),
        )

    def invariants(
        self, params: dict[str, Param], transitions: list[Transition], states: list[str], finals: list[str]
    ) -> tuple[tuple[str, Expr], ...]:
        rng = self.rng
        price = params["price"]
        names = [t.name for t in transitions]
        closers = [t.name for t in transitions if t.target in finals]
        pool: list[Expr] = [
            ("cmp", ">=", ("bal", "escrow"), ("m", 0)),
            ("cmp", "<=", ("bal", "seller"), ("p", "price")),
            ("implies", ("final",), ("cmp", "==", ("bal", "escrow"), ("m", 0))),
            ("implies", ("reached", rng.choice(states)), ("cmp", ">", ("bal", "seller"), ("m", 0))),
            ("cmp", "<=", ("fired", rng.choice(names)), ("i", rng.choice((1, 2)))),
            ("cmp", "<=", ("bal", "platform"), ("m", self.cents(price.lo, price.hi))),
        ]
        if len(closers) >= 2:
            pool.append(("cmp", "<=", ("+", ("applied", closers[0]), ("applied", closers[1])), ("i", 1)))
        if "fee" in params:
            pool.append(("cmp", "<=", ("bal", "platform"), ("p", "fee")))
            pool.append(("cmp", "<=", ("bal", "seller"), ("-", ("p", "price"), ("p", "fee"))))
        chosen = rng.sample(pool, rng.choice((1, 2, 3)))
        return tuple((f"inv{i + 1}", expr) for i, expr in enumerate(chosen))


def _reads_time(expr: Expr) -> bool:
    if expr[0] == "age":
        return True
    return any(isinstance(part, tuple) and _reads_time(part) for part in expr[1:])


def generate(seed: int) -> Policy:
    """The policy for `seed` (deterministic: the same seed gives the same policy)."""
    return _Gen(seed).policy()
