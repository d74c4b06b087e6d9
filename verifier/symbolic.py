"""Symbolic amounts: linear forms over ranged params, path conditions, and one z3 oracle.

The explorer treats every ranged money and percent param as a symbol, not
as a handful of samples, so what it finds holds for every value in the
declared ranges. Amounts are linear forms (`Lin`) over integer symbols:
the params themselves, and derived symbols for what is not linear (a floor
of a share, the smaller of two amounts, a remainder's unit, a product of two
params), each with its exact definition for the solver. Truth values are
Python bools where the symbols do not matter and formulas where they do; a
state carries a path condition, the conjunction of the formulas its path
took, interned as an id.

Most questions are settled without z3: forms are kept canonical (integer
coefficients divided by their gcd, so `2*price >= 2` and `price >= 1` are
one atom), and interval bounds of the symbols decide the easy cases. What is
left goes to z3, with a deterministic resource limit; an `unknown` answer is
counted and surfaced, never read as a proof.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from math import gcd
from typing import Any

from pactwright.errors import VerifyError

Coef = int | Fraction
Value = Any  # int | Fraction | Lin | None
Formula = Any  # bool | tuple (see below)

# Formula encoding (hashable tuples):
#   ("atom", op, lin)   lin OP 0 with op in (">=", "==", "!="), lin with integer coefficients
#   ("and", frozenset)  ("or", frozenset)  ("not", formula)

PERCENT_UNITS = 1_000_000  # a percent symbol holds k for the share k / 10**6 of the whole
RLIMIT = 4_000_000  # z3's deterministic work budget per query


def related_pairs(param: dict[str, Any]) -> list[tuple[str, str]]:
    """A model param's bounds named by other params (new in 1.1) as (smaller, larger) names."""
    out = []
    if param.get("min_param"):
        out.append((str(param["min_param"]), str(param["name"])))
    if param.get("max_param"):
        out.append((str(param["name"]), str(param["max_param"])))
    return out


class Lin:
    """An exact linear form `sum(coef * symbol) + const` over integer symbols."""

    __slots__ = ("const", "hash", "terms")

    def __init__(self, terms: tuple[tuple[int, Coef], ...], const: Coef) -> None:
        self.terms = terms
        self.const = const
        self.hash = hash((terms, const))

    def __hash__(self) -> int:
        return self.hash

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Lin) and self.terms == other.terms and self.const == other.const

    def __lt__(self, other: object) -> bool:  # for sorting blocks; any fixed total order will do
        return _order_key(self) < _order_key(other)

    def __repr__(self) -> str:
        return f"Lin({self.terms}, {self.const})"

    # Arithmetic with ints keeps the postings code of the explorer unchanged.
    def __add__(self, other: Value) -> Value:
        return add(self, other)

    __radd__ = __add__

    def __sub__(self, other: Value) -> Value:
        return add(self, scale(other, -1))

    def __rsub__(self, other: Value) -> Value:
        return add(other, scale(self, -1))

    def __neg__(self) -> Value:
        return scale(self, -1)


def _order_key(value: object) -> tuple[Any, ...]:
    if isinstance(value, Lin):
        return (1, value.terms, value.const)
    return (0, (), value)


def make(terms: dict[int, Coef], const: Coef) -> Value:
    """A canonical value: a plain number when no symbol is left."""
    kept = tuple(sorted((s, c) for s, c in terms.items() if c))
    if not kept:
        return _number(const)
    return Lin(kept, _number(const))


def _number(value: Coef) -> Coef:
    if isinstance(value, Fraction) and value.denominator == 1:
        return value.numerator
    return value


def is_sym(value: Value) -> bool:
    return isinstance(value, Lin)


def add(a: Value, b: Value) -> Value:
    if a is None or b is None:
        return None
    if not isinstance(a, Lin) and not isinstance(b, Lin):
        return _number(a + b)
    terms: dict[int, Coef] = {}
    const: Coef = 0
    for side in (a, b):
        if isinstance(side, Lin):
            for s, c in side.terms:
                terms[s] = terms.get(s, 0) + c
            const += side.const
        else:
            const += side
    return make(terms, const)


def scale(a: Value, k: Coef) -> Value:
    if a is None:
        return None
    if not isinstance(a, Lin):
        return _number(a * k)
    return make({s: c * k for s, c in a.terms}, a.const * k)


@dataclass(frozen=True)
class Symbol:
    """An integer unknown: a param (kind `param`) or a derived value with its definition."""

    kind: str  # param | floor | min | ind | mul
    name: str
    low: int
    high: int
    args: tuple[Any, ...] = ()


def _ceil(value: Coef) -> int:
    return -((-value.numerator) // value.denominator) if isinstance(value, Fraction) else int(value)


def _floor(value: Coef) -> int:
    return value.numerator // value.denominator if isinstance(value, Fraction) else int(value)


class Space:
    """The symbols of one exploration, the path conditions, and the solver behind them."""

    def __init__(self) -> None:
        self.symbols: list[Symbol] = []
        self._derived: dict[tuple[Any, ...], int] = {}
        self.pcs: list[frozenset[Formula]] = [frozenset()]
        self._pc_index: dict[frozenset[Formula], int] = {frozenset(): 0}
        self._refine_cache: dict[tuple[int, Formula], int | None] = {}
        self._sat_cache: dict[tuple[int, Formula], tuple[bool | None, dict[str, int] | None]] = {}
        self.unknown = 0  # solver answers of `unknown`
        self.queries = 0
        # Constraints between params (new in 1.1: `partial <= price`), part of every query.
        self.relations: list[Formula] = []
        # Per atom: its z3 term and the symbols it reads, built once. An atom over a hundred
        # params costs more to build through z3's API than to solve, and path conditions repeat
        # the same atoms in every query; z3 shares equal terms, so each query is unchanged.
        self.atom_terms: dict[Formula, tuple[Any, tuple[int, ...]]] = {}
        self.definition_terms: dict[int, tuple[list[Any], tuple[int, ...]]] = {}

    # -- symbols -------------------------------------------------------------------

    def param(self, name: str, kind: str, low: int, high: int) -> Value:
        """The value of a ranged param: money in minor units, a percent as a share of the whole.

        Asking again for the same param gives the same symbol, so explorations sharing a
        space share what the solver learnt."""
        found = self._derived.get(("param", name, kind, low, high))
        index = found if found is not None else len(self.symbols)
        if found is None:
            self.symbols.append(Symbol("param", name, low, high, (kind,)))
            self._derived[("param", name, kind, low, high)] = index
        if kind == "percent":
            return Lin(((index, Fraction(1, PERCENT_UNITS)),), 0)
        return Lin(((index, 1),), 0)

    def relate(self, small: Value, big: Value) -> None:
        """Every value explored has `small <= big`: a related bound, part of every solver query.

        The interval shortcuts read each symbol's own range and so stay sound
        (what holds on the whole box holds where the relation does); what they
        leave open goes to z3, which sees the relation. Call before any query.
        """
        formula = self.compare("<=", small, big)
        if formula is not True and formula not in self.relations:
            assert not self._sat_cache, "relations are stated before the first query"
            self.relations.append(formula)

    def params(self) -> list[tuple[int, Symbol]]:
        return [(i, s) for i, s in enumerate(self.symbols) if s.kind == "param"]

    def _derive(self, kind: str, args: tuple[Any, ...], low: int, high: int) -> Lin:
        key = (kind, *args)
        index = self._derived.get(key)
        if index is None:
            index = len(self.symbols)
            self.symbols.append(Symbol(kind, f"{kind}{index}", low, high, args))
            self._derived[key] = index
        return Lin(((index, 1),), 0)

    def bounds(self, value: Value) -> tuple[Coef, Coef]:
        """Interval bounds of a value over the symbols' ranges (ignoring any path condition).

        Each floor is also read as its argument minus less than one, which
        keeps what cancels (`price - floor(price / 10)` is at least 90% of the
        lowest price); the tighter of the two readings is kept.
        """
        if not isinstance(value, Lin):
            return value, value
        low, high = self._interval(value.terms, value.const)
        terms: dict[int, Coef] = {}
        const: Coef = value.const
        slack_low: Coef = 0
        slack_high: Coef = 0
        expanded = False
        for s, c in value.terms:
            sym = self.symbols[s]
            if sym.kind != "floor":
                terms[s] = terms.get(s, 0) + c
                continue
            expanded = True
            numerator, den = sym.args
            inner = numerator.terms if isinstance(numerator, Lin) else ()
            for t, d in inner:
                terms[t] = terms.get(t, 0) + Fraction(c * d, den)
            const += Fraction(c * (numerator.const if isinstance(numerator, Lin) else numerator), den)
            error = Fraction(den - 1, den)  # floor(x) lies in [x - error, x]
            if c > 0:
                slack_low -= c * error
            else:
                slack_high -= c * error
        if expanded:
            other_low, other_high = self._interval(tuple(terms.items()), const)
            low = max(low, other_low + slack_low)
            high = min(high, other_high + slack_high)
        return low, high

    def _interval(self, terms: tuple[tuple[int, Coef], ...], const: Coef) -> tuple[Coef, Coef]:
        low: Coef = const
        high: Coef = const
        for s, c in terms:
            sym = self.symbols[s]
            if c > 0:
                low += c * sym.low
                high += c * sym.high
            else:
                low += c * sym.high
                high += c * sym.low
        return low, high

    def floor(self, value: Value) -> Value:
        """floor(value); exact for forms with integer coefficients, a derived symbol otherwise."""
        if value is None:
            return None
        if not isinstance(value, Lin):
            return _floor(value)
        den = 1
        for _, c in value.terms:
            if isinstance(c, Fraction):
                den = den * c.denominator // gcd(den, c.denominator)
        if den == 1:
            # Integer coefficients: floor moves only the constant.
            return make(dict(value.terms), _floor(value.const))
        numerator = scale(value, den)  # integer form N with value = N / den
        low, high = self.bounds(value)
        return self._derive("floor", (numerator, den), _floor(low), _floor(high))

    def mul(self, a: Value, b: Value) -> Value:
        if a is None or b is None:
            return None
        if not isinstance(a, Lin):
            return scale(b, a)
        if not isinstance(b, Lin):
            return scale(a, b)
        # Two unknowns: a derived product of their integer forms (nonlinear for the solver).
        da, db = _denominator(a), _denominator(b)
        ia, ib = scale(a, da), scale(b, db)
        corners = [x * y for x in self.bounds(ia) for y in self.bounds(ib)]
        left, right = sorted((ia, ib), key=_order_key)
        product = self._derive("mul", (left, right), _floor(min(corners)), _ceil(max(corners)))
        return scale(product, Fraction(1, da * db))

    def div(self, a: Value, b: Value) -> Value:
        """floor(a / b), None when b is zero; b must not be an unknown."""
        if a is None or b is None:
            return None
        if isinstance(b, Lin):
            raise SymbolicLimit(
                "the verifier cannot reason exactly about a division by a ranged amount",
                hint="divide by a fixed number or a count (`fired(...)`), or give the param a fixed value",
            )
        if b == 0:
            return None
        return self.floor(scale(a, Fraction(1) / Fraction(b)))

    def minimum(self, a: Value, b: Value) -> Value:
        """min(a, b): decided by bounds where possible, else a derived symbol."""
        if not isinstance(a, Lin) and not isinstance(b, Lin):
            return min(a, b)
        (alo, ahi), (blo, bhi) = self.bounds(a), self.bounds(b)
        if ahi <= blo:
            return a
        if bhi <= alo:
            return b
        left, right = sorted((a, b), key=_order_key)
        return self._derive("min", (left, right), _floor(min(alo, blo)), _ceil(min(ahi, bhi)))

    def unit_if_above(self, value: Value, index: int) -> Value:
        """1 when value > index, else 0 (a remainder's unit going to portion `index`)."""
        if not isinstance(value, Lin):
            return 1 if value > index else 0
        low, high = self.bounds(value)
        if low > index:
            return 1
        if high <= index:
            return 0
        return self._derive("ind", (value, index), 0, 1)

    # -- formulas --------------------------------------------------------------------

    def compare(self, op: str, a: Value, b: Value) -> Formula:
        """`a OP b` as a bool or an atom; comparisons with an undefined value are false."""
        if a is None or b is None:
            return False
        if not isinstance(a, Lin) and not isinstance(b, Lin):
            return bool(_OPS[op](a, b))
        diff = add(a, scale(b, -1))
        if op == "<":
            return self._atom(">=", scale(diff, -1), strict=True)
        if op == "<=":
            return self._atom(">=", scale(diff, -1), strict=False)
        if op == ">":
            return self._atom(">=", diff, strict=True)
        if op == ">=":
            return self._atom(">=", diff, strict=False)
        return self._atom(op, diff, strict=False)

    def _atom(self, op: str, value: Value, *, strict: bool) -> Formula:
        """value OP 0 (strict: value > 0), canonical over integer symbols."""
        if not isinstance(value, Lin):
            if op == ">=":
                return value > 0 if strict else value >= 0
            return value == 0 if op == "==" else value != 0
        den = _denominator(value)
        terms = [(s, int(c * den)) for s, c in value.terms]
        const = value.const * den  # may still be a fraction if only the constant is fractional
        g = 0
        for _, c in terms:
            g = gcd(g, abs(c))
        if op == ">=":
            # sum(c x) + k > 0  <=>  sum(c/g x) >= floor(-k/g) + 1 ; >= 0  <=>  sum >= ceil(-k/g)
            bound = Fraction(-const) / g
            rhs = _floor(bound) + 1 if strict else _ceil(bound)
            lin = make({s: c // g for s, c in terms}, -rhs)
            low, high = self.bounds(lin)
            if low >= 0:
                return True
            if high < 0:
                return False
            return ("atom", ">=", lin)
        # == / !=: integral only when g divides the constant
        exact = Fraction(const) / g
        if exact.denominator != 1:
            return op == "!="
        sign = 1 if terms[0][1] > 0 else -1
        lin = make({s: sign * c // g for s, c in terms}, sign * exact.numerator)
        low, high = self.bounds(lin)
        if low > 0 or high < 0:
            return op == "!="
        if low == high == 0:
            return op == "=="
        return ("atom", op, lin)

    @staticmethod
    def conj(a: Formula, b: Formula) -> Formula:
        if a is False or b is False:
            return False
        if a is True:
            return b
        if b is True:
            return a
        parts: set[Formula] = set()
        for side in (a, b):
            if side[0] == "and":
                parts.update(side[1])
            else:
                parts.add(side)
        return ("and", frozenset(parts))

    @staticmethod
    def disj(a: Formula, b: Formula) -> Formula:
        if a is True or b is True:
            return True
        if a is False:
            return b
        if b is False:
            return a
        parts: set[Formula] = set()
        for side in (a, b):
            if side[0] == "or":
                parts.update(side[1])
            else:
                parts.add(side)
        return ("or", frozenset(parts))

    @staticmethod
    def negate(a: Formula) -> Formula:
        if a is True or a is False:
            return not a
        if a[0] == "not":
            return a[1]
        if a[0] == "atom" and a[1] in ("==", "!="):
            return ("atom", "!=" if a[1] == "==" else "==", a[2])
        return ("not", a)

    def implies(self, a: Formula, b: Formula) -> Formula:
        return self.disj(self.negate(a), b)

    def truth(self, value: Any) -> Formula:
        """A guard's value as a formula (Python truthiness for concrete values)."""
        if value is True or value is False or isinstance(value, tuple):
            return value
        return bool(value)

    # -- path conditions ---------------------------------------------------------------

    def pc(self, formulas: frozenset[Formula]) -> int:
        found = self._pc_index.get(formulas)
        if found is None:
            found = len(self.pcs)
            self.pcs.append(formulas)
            self._pc_index[formulas] = found
        return found

    def refine(self, pc: int, formula: Formula) -> int | None:
        """The path condition `pc and formula`, or None when that is unsatisfiable."""
        if formula is True:
            return pc
        if formula is False:
            return None
        key = (pc, formula)
        if key in self._refine_cache:
            return self._refine_cache[key]
        current = self.pcs[pc]
        result: int | None
        if formula in current:
            result = pc
        elif self.negate(formula) in current:
            result = None
        else:
            sat, _ = self.satisfiable(pc, formula)
            if sat is False:
                result = None
            else:
                implied, _ = self.satisfiable(pc, self.negate(formula))
                if implied is False:
                    result = pc
                else:
                    parts = formula[1] if formula[0] == "and" else (formula,)
                    result = self.pc(current | frozenset(parts))
        self._refine_cache[key] = result
        return result

    def satisfiable(self, pc: int, formula: Formula) -> tuple[bool | None, dict[str, int] | None]:
        """Whether `pc and formula` has a solution: (True, param values) | (False, None) | (None, None)."""
        if formula is False:
            return False, None
        key = (pc, formula)
        cached = self._sat_cache.get(key)
        if cached is not None:
            return cached
        result = self._solve([*self.pcs[pc], formula])
        self._sat_cache[key] = result
        return result

    def _solve(self, formulas: list[Formula]) -> tuple[bool | None, dict[str, int] | None]:
        import z3

        self.queries += 1
        encoder = _Encoder(self)
        constraints = [encoder.formula(f) for f in [*self.relations, *formulas] if f is not True]
        for index, _ in self.params():
            encoder.var(index)  # every param within its declared range, mentioned or not
        constraints.extend(encoder.definitions())
        # Only a product of two ranged params makes a query nonlinear; the rest stay in linear arithmetic.
        nonlinear = any(self.symbols[i].kind == "mul" for i in encoder.vars)
        solver = z3.SolverFor("QF_NIA") if nonlinear else z3.SolverFor("QF_LIA")
        solver.set("rlimit", RLIMIT)
        solver.add(*constraints)
        answer = solver.check()
        if answer == z3.unsat:
            return False, None
        if answer != z3.sat:
            self.unknown += 1
            return None, None
        model = solver.model()
        values: dict[str, int] = {}
        for index, sym in self.params():
            var = encoder.var(index)
            values[sym.name] = model.eval(var, model_completion=True).as_long()
        return True, values

    def witness(self, pc: int, formula: Formula = True) -> dict[str, int] | None:
        """Param values (minor units; percents in millionths) where `pc and formula` holds.

        The smallest such values, param by param in the model's order (each one searched by
        bisection with the ones before it fixed), so the witness is the plainest one
        (`price = 1.00` where that violates) and the same on every run, whatever the
        solver's internal choices: a report must not depend on them. Every query carries the
        params' relations (`relate`), so a witness respects them: with `partial <= price`, each
        param is the smallest that the relation and the values fixed before it still allow.
        """
        sat, values = self.satisfiable(pc, formula)
        if sat is not True or values is None:
            return None
        fixed: list[Formula] = [*self.pcs[pc], formula]
        for index, sym in self.params():
            low, high = sym.low, values[sym.name]
            first = True
            while low < high:
                # The lowest value first: most params of a wide sum can take it, and then one
                # query settles the param instead of a whole bisection.
                middle = low if first else (low + high) // 2
                first = False
                found, better = self._solve([*fixed, self._atom(">=", make({index: -1}, middle), strict=False)])
                if found is True and better is not None:
                    high = better[sym.name]
                    values = better
                elif found is False:
                    low = middle + 1
                else:
                    break  # unknown: keep the smallest value shown so far
            fixed.append(self._atom("==", make({index: 1}, -values[sym.name]), strict=False))
        final, settled = self._solve(fixed)
        return settled if final is True and settled is not None else values


class SymbolicLimit(VerifyError):
    """An expression the symbolic explorer cannot represent exactly."""

    code = "PW308"


def _denominator(value: Lin) -> int:
    den = 1
    for _, c in value.terms:
        if isinstance(c, Fraction):
            den = den * c.denominator // gcd(den, c.denominator)
    if isinstance(value.const, Fraction):
        den = den * value.const.denominator // gcd(den, value.const.denominator)
    return den


_OPS = {
    "<": lambda a, b: a < b,
    "<=": lambda a, b: a <= b,
    ">": lambda a, b: a > b,
    ">=": lambda a, b: a >= b,
    "==": lambda a, b: a == b,
    "!=": lambda a, b: a != b,
}


class _Encoder:
    """z3 terms for one query: each symbol once, with the definitions of those it uses."""

    def __init__(self, space: Space) -> None:
        import z3

        self.z3 = z3
        self.space = space
        self.vars: dict[int, Any] = {}
        self.pending: list[int] = []

    def var(self, index: int) -> Any:
        found = self.vars.get(index)
        if found is None:
            found = self.z3.Int(f"s{index}")
            self.vars[index] = found
            self.pending.append(index)
        return found

    def lin(self, value: Value) -> Any:
        if not isinstance(value, Lin):
            assert not isinstance(value, Fraction) or value.denominator == 1
            return self.z3.IntVal(int(value))
        den = _denominator(value)
        terms = [int(c * den) * self.var(s) for s, c in value.terms]
        total = self.z3.Sum([*terms, self.z3.IntVal(int(value.const * den))]) if terms else None
        assert den == 1, "atoms and definitions carry integer forms"
        return total

    def formula(self, formula: Formula) -> Any:
        z3 = self.z3
        if formula is True:
            return z3.BoolVal(True)
        if formula is False:
            return z3.BoolVal(False)
        kind = formula[0]
        if kind == "atom":
            cached = self.space.atom_terms.get(formula)
            if cached is not None:
                for index in cached[1]:
                    self.var(index)  # in the order the term reads them, as building it would
                return cached[0]
            _, op, lin = formula
            term = self.lin(lin)
            if op == ">=":
                built = term >= 0
            else:
                built = term == 0 if op == "==" else term != 0
            reads = tuple(s for s, _ in lin.terms) if isinstance(lin, Lin) else ()
            self.space.atom_terms[formula] = (built, reads)
            return built
        if kind == "and":
            return z3.And([self.formula(f) for f in sorted(formula[1], key=repr)])
        if kind == "or":
            return z3.Or([self.formula(f) for f in sorted(formula[1], key=repr)])
        return z3.Not(self.formula(formula[1]))

    def definitions(self) -> list[Any]:
        z3 = self.z3
        out: list[Any] = []
        done: set[int] = set()
        while self.pending:
            index = self.pending.pop()
            if index in done:
                continue
            done.add(index)
            cached = self.space.definition_terms.get(index)
            if cached is not None:
                for read in cached[1]:
                    self.var(read)  # in the order building the definition reads them
                out.extend(cached[0])
                continue
            terms: list[Any] = []
            sym = self.space.symbols[index]
            v = self.vars[index]
            terms.extend([v >= sym.low, v <= sym.high])
            reads: list[int] = []
            for arg in sym.args if sym.kind in ("floor", "min", "ind", "mul") else ():
                if isinstance(arg, Lin):
                    reads.extend(s for s, _ in arg.terms)
            if sym.kind == "floor":
                numerator, den = sym.args
                n = self.lin(numerator)
                terms.extend([den * v <= n, n < den * v + den])
            elif sym.kind == "min":
                a, b = (self.lin(x) for x in sym.args)
                terms.append(v == z3.If(a <= b, a, b))
            elif sym.kind == "ind":
                value, index_ = sym.args
                terms.append(v == z3.If(self.lin(value) > index_, 1, 0))
            elif sym.kind == "mul":
                a, b = (self.lin(x) for x in sym.args)
                terms.append(v == a * b)
            self.space.definition_terms[index] = (terms, tuple(reads))
            out.extend(terms)
        return out
