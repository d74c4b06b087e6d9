"""Model expressions, params and splits as z3 integer terms.

The explorer computes with exact Python integers and Fractions on sampled
param values. To cover every value in a declared range, the same arithmetic
is re-expressed here over z3 integers: a rational value is an integer term
over a positive integer denominator, and flooring happens exactly where the
explorer floors (a percent of money, `/`, each allotment share). The
encoding never approximates silently: whatever it does not model (time in a
symbolic setting, the effect protocol, text compared in unusual ways) raises
`Opaque`, and the caller decides whether a free boolean is a sound stand-in
(an enabling guard) or the question must be left unanswered (a property).

Only `pactwright.verifier.proofs` imports this module, lazily, so z3 is
never loaded at CLI start-up.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from fractions import Fraction
from math import lcm
from typing import Any, Protocol

import z3

from pactwright.money import Percent, format_money
from pactwright.verifier.model import Json, Model
from pactwright.verifier.symbolic import related_pairs

# A percent has at most four decimals, so every percent is k / 10^6 exactly.
PERCENT_DENOMINATOR = 1_000_000
_COMPARISONS = ("<", "<=", ">", ">=", "==", "!=")


class Opaque(Exception):
    """A sub-expression this encoding does not model; the message says what."""


@dataclass(frozen=True)
class Num:
    """The rational `term / den`: `term` a z3 Int term, `den` a positive int."""

    term: Any
    den: int = 1


@dataclass(frozen=True)
class Time:
    """A concrete instant relative to now (now = 0); None: a stamp never set."""

    value: int | None


@dataclass(frozen=True)
class Text:
    """A text param as an index into the sample values the explorer uses."""

    term: Any
    samples: tuple[str, ...]


@dataclass(frozen=True)
class TextLit:
    """A text literal, or a text param pinned to one sample value."""

    value: str


def num(value: int) -> Num:
    """An integer constant (minor units, seconds, a count)."""
    return Num(z3.IntVal(value), 1)


def concrete(value: Any) -> int | None:
    """The Python int of a constant z3 Int term, or None when it is symbolic."""
    simplified = z3.simplify(value)
    if z3.is_int_value(simplified):
        result: int = simplified.as_long()
        return result
    return None


def floor(value: Num) -> Any:
    """floor(term / den) as an Int term (z3 `div` is floor for a positive divisor)."""
    return value.term if value.den == 1 else value.term / value.den


# -- params ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Ranged:
    """A money or percent param with a declared range: one z3 variable.

    Percents are scaled: the variable holds k for the percent k / 10^6 of
    the whole, so `low` and `high` are in the same unit as the variable.
    """

    name: str
    kind: str  # money | percent
    var: Any
    low: int
    high: int

    def sample_text(self, value: int) -> str:
        """`value` as `model.json` writes a sample of this param."""
        if self.kind == "money":
            return str(value)
        return Percent(Fraction(value, PERCENT_DENOMINATOR)).canonical()

    def display(self, value: int, scale: int) -> str:
        """`value` as a reviewer reads it: `400.01`, `7.5%`."""
        if self.kind == "money":
            return format_money(value, scale)
        return f"{self.sample_text(value)}%"

    def range_text(self, scale: int) -> str:
        return f"{self.name} {self.display(self.low, scale)} .. {self.display(self.high, scale)}"


def _percent_units(text: str) -> Fraction:
    return Percent.parse(text).value * PERCENT_DENOMINATOR


class ParamSpace:
    """z3 values of one agreement's params, with the constraints of their ranges.

    `text` pins text params to concrete sample values (the explorer
    enumerates them); without it a text param is an index over its samples.
    """

    def __init__(self, model: Model, prefix: str, text: dict[str, str] | None = None) -> None:
        self.model = model
        self.values: dict[str, Num | Text | TextLit] = {}
        self.ranged: list[Ranged] = []
        self.constraints: list[Any] = []
        for param in model.params:
            name, kind = param["name"], param["type"]
            if kind in ("money", "duration", "percent") and "fixed" in param:
                if kind == "percent":
                    share = Percent.parse(param["fixed"]).value
                    self.values[name] = Num(z3.IntVal(share.numerator), share.denominator)
                else:
                    self.values[name] = num(int(param["fixed"]))
            elif kind in ("money", "percent"):
                var = z3.Int(f"{prefix}.{name}")
                if kind == "money":
                    low, high = int(param["min"]), int(param["max"])
                    self.values[name] = Num(var, 1)
                else:
                    low_f, high_f = _percent_units(param["min"]), _percent_units(param["max"])
                    assert low_f.denominator == 1
                    assert high_f.denominator == 1
                    low, high = int(low_f), int(high_f)
                    self.values[name] = Num(var, PERCENT_DENOMINATOR)
                self.ranged.append(Ranged(name, kind, var, low, high))
                self.constraints.extend([var >= low, var <= high])
            elif text is not None and name in text:
                self.values[name] = TextLit(text[name])
            else:
                samples = tuple(str(s) for s in param.get("samples", []))
                var = z3.Int(f"{prefix}.{name}")
                self.values[name] = Text(var, samples)
                self.constraints.extend([var >= 0, var < max(len(samples), 1)])
        self.constraints.extend(self._related(model))

    def _related(self, model: Model) -> list[Any]:
        """New in 1.1: `partial <= price` for each money bound written as another param's name."""
        out: list[Any] = []
        for param in model.params:
            for small, big in related_pairs(param):
                low, high = self.values[small], self.values[big]
                assert isinstance(low, Num)
                assert isinstance(high, Num)
                assert low.den == high.den == 1
                out.append(low.term <= high.term)
        return out

    def describe(self) -> str:
        """`price 1.00 .. 10000.00` for the reader of a proof."""
        return ", ".join(r.range_text(self.model.scale) for r in self.ranged) or "the fixed param values"

    def witness(self, found: Any) -> dict[str, int]:
        """Ranged param values in a z3 model (every variable completed)."""
        return {r.name: found.eval(r.var, model_completion=True).as_long() for r in self.ranged}

    def python_params(self, values: dict[str, int]) -> tuple[Any, ...]:
        """A param tuple as the explorer's `View.p` holds it, at `values`."""
        out: list[Any] = []
        for param in self.model.params:
            name, kind = param["name"], param["type"]
            if name in values:
                raw = values[name]
                out.append(raw if kind == "money" else Fraction(raw, PERCENT_DENOMINATOR))
            elif "fixed" in param:
                out.append(Percent.parse(param["fixed"]).value if kind == "percent" else int(param["fixed"]))
            else:
                samples = param.get("samples", ["any"])
                out.append(samples[0])
        return tuple(out)


# -- expressions -------------------------------------------------------------------------


class Env(Protocol):
    """Where an expression's leaves come from: a concrete state, symbolic state vars..."""

    def param(self, name: str) -> Num | Text | TextLit: ...
    def balance(self, name: str) -> Num: ...
    def fired(self, name: str) -> Num: ...
    def effect_applied(self, name: str) -> Num: ...
    def total(self, name: str) -> Num: ...
    def reached(self, name: str) -> Any: ...
    def approved(self, name: str) -> Any: ...
    def final(self) -> Any: ...
    def stamp(self, name: str) -> Time: ...
    def now(self) -> Time: ...


class Encoder:
    """Expression trees of one model -> z3 terms, following `expressions.py` exactly.

    With `fresh`, a truth-valued sub-expression that cannot be encoded
    becomes `fresh()` (a new free boolean): sound for a guard, since the
    transition is then allowed whenever some value of it would allow it.
    """

    def __init__(self, model: Model, env: Env, fresh: Callable[[], Any] | None = None) -> None:
        self.model = model
        self.env = env
        self.fresh = fresh

    def boolean(self, expr: Json) -> Any:
        result = self.value(expr)
        if isinstance(result, bool):
            return z3.BoolVal(result)
        if not z3.is_bool(result):
            raise Opaque(f"`{expr['op']}` is not a truth value")
        return result

    def number(self, expr: Json) -> Num:
        result = self.value(expr)
        if not isinstance(result, Num):
            raise Opaque(f"`{expr['op']}` is not a number here")
        return result

    def value(self, expr: Json) -> Any:
        if self.fresh is not None and expr.get("type") == "bool":
            try:
                return self._value(expr)
            except Opaque:
                return self.fresh()
        return self._value(expr)

    def _value(self, expr: Json) -> Any:
        op = expr["op"]
        env = self.env
        if op == "lit":
            return _literal(expr)
        if op == "param":
            return env.param(expr["name"])
        if op == "stamp":
            return env.stamp(expr["name"])
        if op == "now":
            return env.now()
        if op == "final":
            return env.final()
        if op == "balance":
            return env.balance(expr["name"])
        if op == "fired":
            return env.fired(expr["name"])
        if op == "applied":
            if expr.get("value") == "effect" or expr["name"] not in self.model.transition_index:
                return env.effect_applied(expr["name"])
            return env.fired(expr["name"])
        if op == "total":
            return env.total(expr["name"])
        if op == "reached":
            return env.reached(expr["name"])
        if op == "approved":
            return env.approved(expr["name"])
        if op == "approvals":  # four eyes (new in 1.1): the count T's commit consumed, once it committed
            return Num(z3.If(env.approved(expr["name"]), z3.IntVal(int(expr["value"])), z3.IntVal(0)), 1)
        args = expr.get("args", [])
        if op == "not":
            return z3.Not(self.boolean(args[0]))
        if op in ("and", "or"):
            # Binary, or one node over a long chain's terms (new in 1.1): z3 takes any number.
            parts = [self.boolean(a) for a in args]
            return z3.And(*parts) if op == "and" else z3.Or(*parts)
        if op == "implies":
            return z3.Implies(self.boolean(args[0]), self.boolean(args[1]))
        values = [self.value(a) for a in args]
        if op == "+" and len(values) > 2:
            return _sum(values)
        if op == "neg":
            return _negate(values[0])
        if op in _COMPARISONS:
            return _compare(op, values[0], values[1])
        if op in ("+", "-"):
            return _add(values[0], values[1], -1 if op == "-" else 1)
        if op == "*":
            product = _multiply(values[0], values[1])
            if expr["type"] == "money" and any(a["type"] == "percent" for a in args):
                return Num(floor(product), 1)
            return product
        if op == "/":
            return _divide(values[0], values[1])
        raise Opaque(f"operator `{op}` is not modelled")


def _literal(expr: Json) -> Any:
    kind, value = expr["type"], expr["value"]
    if kind in ("money", "int", "duration"):
        return num(int(value))
    if kind == "percent":
        share = Percent.parse(value).value
        return Num(z3.IntVal(share.numerator), share.denominator)
    if kind == "bool":
        return z3.BoolVal(value == "true")
    return TextLit(str(value))


def _as_num(value: Any) -> Num:
    if isinstance(value, Num):
        return value
    raise Opaque("a time or text value where a number is expected")


def _time_int(value: Any) -> int | None:
    """A concrete int for time arithmetic; `Time(None)` stays None."""
    if isinstance(value, Time):
        return value.value
    number = _as_num(value)
    found = concrete(number.term)
    if found is None or number.den != 1:
        raise Opaque("time arithmetic with a symbolic or fractional value")
    return found


def _negate(value: Any) -> Any:
    if isinstance(value, Time):
        return Time(None if value.value is None else -value.value)
    number = _as_num(value)
    return Num(-number.term, number.den)


def _add(left: Any, right: Any, sign: int) -> Any:
    if isinstance(left, Time) or isinstance(right, Time):
        a, b = _time_int(left), _time_int(right)
        return Time(None if a is None or b is None else a + sign * b)
    a_num, b_num = _as_num(left), _as_num(right)
    den = lcm(a_num.den, b_num.den)
    term = a_num.term * (den // a_num.den) + sign * b_num.term * (den // b_num.den)
    return Num(term, den)


def _sum(values: list[Any]) -> Any:
    """One node over a long chain's terms (new in 1.1) as one flat z3 sum, not a term a level."""
    if any(isinstance(value, Time) for value in values):
        ints = [_time_int(value) for value in values]
        return Time(None if None in ints else sum(i for i in ints if i is not None))
    nums = [_as_num(value) for value in values]
    den = lcm(*(n.den for n in nums))
    return Num(z3.Sum([n.term if n.den == den else n.term * (den // n.den) for n in nums]), den)


def _multiply(left: Any, right: Any) -> Num:
    a, b = _as_num(left), _as_num(right)
    return Num(a.term * b.term, a.den * b.den)


def _divide(left: Any, right: Any) -> Num:
    """floor(a / b) as the explorer's `_div`, for a divisor that is a non-zero constant.

    The explorer makes a quotient by zero undefined (every comparison with it
    is false); a term cannot say that, so a divisor that may be zero is not
    modelled: a guard reading it becomes a free choice, a property is not
    attempted.
    """
    a, b = _as_num(left), _as_num(right)
    divisor = concrete(b.term)
    if divisor is None or divisor == 0:
        raise Opaque("a division whose divisor may be zero")
    top = a.term * b.den
    bottom = divisor * a.den
    quotient = top / bottom if bottom > 0 else (-top) / (-bottom)
    return Num(quotient, 1)


def _compare(op: str, left: Any, right: Any) -> Any:
    if isinstance(left, Time) or isinstance(right, Time):
        a, b = _time_int(left), _time_int(right)
        if a is None or b is None:
            return z3.BoolVal(False)  # a deadline never started has not passed
        return z3.BoolVal(_PY_COMPARE[op](a, b))
    if isinstance(left, Text | TextLit) or isinstance(right, Text | TextLit):
        return _compare_text(op, left, right)
    x, y = _as_num(left), _as_num(right)
    return _Z3_COMPARE[op](x.term * y.den, y.term * x.den)


def _compare_text(op: str, left: Any, right: Any) -> Any:
    if op not in ("==", "!="):
        raise Opaque("text ordered by `<`")
    if isinstance(left, TextLit) and isinstance(right, TextLit):
        same: Any = z3.BoolVal(left.value == right.value)
    elif isinstance(left, Text) and isinstance(right, TextLit):
        same = _text_is(left, right.value)
    elif isinstance(left, TextLit) and isinstance(right, Text):
        same = _text_is(right, left.value)
    else:
        raise Opaque("two text params compared")
    return same if op == "==" else z3.Not(same)


def _text_is(param: Text, value: str) -> Any:
    if value in param.samples:
        return param.term == param.samples.index(value)
    return z3.BoolVal(False)


_PY_COMPARE: dict[str, Callable[[int, int], bool]] = {
    "<": lambda a, b: a < b,
    "<=": lambda a, b: a <= b,
    ">": lambda a, b: a > b,
    ">=": lambda a, b: a >= b,
    "==": lambda a, b: a == b,
    "!=": lambda a, b: a != b,
}
_Z3_COMPARE: dict[str, Callable[[Any, Any], Any]] = {
    "<": lambda a, b: a < b,
    "<=": lambda a, b: a <= b,
    ">": lambda a, b: a > b,
    ">=": lambda a, b: a >= b,
    "==": lambda a, b: a == b,
    "!=": lambda a, b: a != b,
}


# -- transfers ---------------------------------------------------------------------------


@dataclass
class Split:
    """One posting: the amount taken from `source` and each portion's share."""

    source: str
    amount: Any
    portions: list[tuple[str, Any]] = field(default_factory=list)  # (account, share term)

    def deltas(self) -> Iterator[tuple[str, Any]]:
        yield self.source, -self.amount
        yield from self.portions


def split(encoder: Encoder, space: ParamSpace, posting: Json) -> Split:
    """The exact shares of one posting (Numscript allotment or capped amounts)."""
    amount_value = encoder.number(posting["amount"])
    if amount_value.den != 1:
        raise Opaque("a transfer amount that is not a whole number of minor units")
    amount = amount_value.term
    rule = posting["rule"]
    out = Split(posting["source"], amount)
    if rule["kind"] == "single":
        out.portions.append((rule["to"], amount))
        return out
    out.portions.extend(_split_parts(space, amount, rule))
    return out


def _split_parts(space: ParamSpace, amount: Any, rule: Json) -> list[tuple[str, Any]]:
    """(account, share term) of a split; a nested split (new in 1.1) shares out its portion's term."""
    portions = rule["portions"]
    parts: list[Any] = []
    if rule["kind"] == "capped":
        left = amount
        for portion in portions:
            if portion["kind"] == "remaining":
                take = left
            else:
                cap = z3.IntVal(int(portion["max_minor"])) if "max_minor" in portion else _money_param(space, portion)
                take = z3.If(left < cap, left, cap)  # Python's min(cap, left)
            parts.append(take)
            left = left - take
        return _nested(space, portions, parts)
    shares: list[Num] = []
    for portion in portions:
        if portion["kind"] == "remaining":
            continue
        if "share" in portion:
            top, bottom = portion["share"].split("/")
            shares.append(Num(z3.IntVal(int(top)), int(bottom)))
        else:
            shares.append(_as_num(space.values[portion["param"]]))
    den = lcm(*(s.den for s in shares)) if shares else 1
    scaled = [s.term * (den // s.den) for s in shares]
    scaled.append(den - sum(scaled, z3.IntVal(0)))  # `remaining` takes 1 - the others
    floors = [(amount * part) / den for part in scaled]
    leftover = amount - sum(floors, z3.IntVal(0))
    for index, base in enumerate(floors):
        parts.append(base + z3.If(leftover > index, 1, 0))
    return _nested(space, portions, parts)


def _nested(space: ParamSpace, portions: list[Json], parts: list[Any]) -> list[tuple[str, Any]]:
    out: list[tuple[str, Any]] = []
    for portion, part in zip(portions, parts, strict=True):
        if "split" in portion:
            out.extend(_split_parts(space, part, portion["split"]))
        else:
            out.append((portion["to"], part))
    return out


def _money_param(space: ParamSpace, portion: Json) -> Any:
    value = _as_num(space.values[portion["param"]])
    if value.den != 1:
        raise Opaque("a capped portion that is not money")
    return value.term


# -- expression trees --------------------------------------------------------------------


def walk(expr: Json | None) -> Iterator[Json]:
    """Every node of an expression tree, root first."""
    if expr is None:
        return
    yield expr
    for arg in expr.get("args", []):
        yield from walk(arg)


def ranged_names(model: Model) -> set[str]:
    """Params whose value varies per agreement within a declared range."""
    return {p["name"] for p in model.params if p["type"] in ("money", "percent") and "fixed" not in p}


def reads_amounts(model: Model, expr: Json | None) -> bool:
    """Whether `expr` can change with a ranged param: balances, totals, ranged params."""
    ranged = ranged_names(model)
    return any(
        node["op"] in ("balance", "total") or (node["op"] == "param" and node["name"] in ranged) for node in walk(expr)
    )


def reads_state(expr: Json | None) -> bool:
    """Whether `expr` reads anything but params and literals."""
    return any(node["op"] not in ("lit", "param") and "args" not in node for node in walk(expr))


def reads_time(expr: Json | None) -> bool:
    """Whether `expr` reads `now` or a stamp."""
    return any(node["op"] in ("now", "stamp") for node in walk(expr))


def reads_effects(model: Model, expr: Json | None) -> bool:
    """Whether `expr` reads the effect protocol: `applied(EFFECT)` or `total(EFFECT)`."""
    return any(
        node["op"] == "total"
        or (node["op"] == "applied" and (node.get("value") == "effect" or node["name"] not in model.transition_index))
        for node in walk(expr)
    )


@contextmanager
def fresh_context() -> Iterator[None]:
    """Solve in a new z3 context, so that answers depend on the model alone.

    z3's heuristics depend on the ids of the terms it has already seen: in
    the shared global context an unrelated earlier proof in the same process
    turned a 0.1 s query into a timeout, and reports must not depend on what
    was verified before them. The Python API builds every term in its global
    context, so that context is swapped for the duration and restored after.
    """
    module = z3.z3
    saved = module._main_ctx
    module._main_ctx = z3.Context()
    try:
        yield
    finally:
        module._main_ctx = saved


# A query's budget is z3's resource limit, which counts work, not time: a
# wall-clock timeout answers `unknown` or not depending on the machine and
# its load, and the report must be the same on every run. About 10,000 units
# are spent per millisecond on a typical machine, so `timeout_ms` keeps its
# meaning there; the wall clock only backstops a machine many times slower.
RLIMIT_PER_MS = 10_000
WALL_CLOCK_BACKSTOP = 6


def _limit(found: Any, timeout_ms: int) -> Any:
    found.set("rlimit", max(timeout_ms, 1) * RLIMIT_PER_MS)
    found.set("timeout", max(timeout_ms, 1) * WALL_CLOCK_BACKSTOP)
    return found


def solver(timeout_ms: int) -> Any:
    """A z3 solver whose queries answer `unknown` after about `timeout_ms` of work."""
    return _limit(z3.Solver(), timeout_ms)


def optimizer(timeout_ms: int) -> Any:
    """A z3 optimizer whose queries answer `unknown` after about `timeout_ms` of work."""
    return _limit(z3.Optimize(), timeout_ms)
