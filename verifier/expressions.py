"""Compile model expression trees into Python functions over an agreement view.

Guards and invariants are evaluated on every explored state, so they are
compiled once into lambdas rather than interpreted per state. Time values are
relative to now: `now` is 0 and a stamp taken `age` seconds ago is `-age`;
an unset stamp is None, and any comparison involving None is false (a
deadline that was never started cannot have passed). A division by zero is
undefined in the same way: its quotient is None, arithmetic on it stays None,
and a comparison with it is false; a transfer whose amount is undefined never
commits.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from fractions import Fraction
from typing import Any

from pactwright.candidate import CHAIN_OPERATORS, CHAIN_TERMS
from pactwright.errors import VerifyError
from pactwright.protocol import OUTCOME_PHASES
from pactwright.verifier.model import Json, Model
from pactwright.verifier.symbolic import Space, add, scale


class View:
    """One agreement as expressions see it; built per state by the explorer."""

    __slots__ = (
        "approved", "bal", "comp", "ctot", "ctrl", "final", "fired", "p", "phase", "reached", "sapp", "stamps", "stot",
    )  # fmt: skip

    def __init__(
        self,
        ctrl: int,
        p: tuple[Any, ...],
        stamps: tuple[int | None, ...],
        fired: tuple[int, ...],
        bal: tuple[int, ...],
        sapp: tuple[int, ...],
        reached: int,
        approved: tuple[int, ...],
        final: bool,
        comp: tuple[int, ...] = (),
        stot: tuple[int, ...] = (),
        ctot: tuple[int, ...] = (),
        phase: tuple[int, ...] = (),
    ) -> None:
        self.ctrl = ctrl
        self.p = p
        self.stamps = stamps
        self.fired = fired
        self.bal = bal
        self.sapp = sapp
        self.comp = comp  # per call site: how often its compensation effect was applied
        self.stot = stot  # per call site: the sum of the amounts its applications carried
        self.ctot = ctot  # per call site: the sum of the amounts its compensations carried
        self.phase = phase  # per call site: the `Phase` of its latest call (effect outcomes read it)
        self.reached = reached
        self.approved = approved
        self.final = final


def _floor(value: Any) -> int:
    if isinstance(value, Fraction):
        return value.numerator // value.denominator
    return int(value)


def _pmul(a: Any, b: Any) -> Any:
    return None if a is None or b is None else a * b


def _pfloor(value: Any) -> Any:
    return None if value is None else _floor(value)


def _pneg(value: Any) -> Any:
    return None if value is None else -value


def _div(a: Any, b: Any) -> Any:
    if a is None or b is None or b == 0:
        return None
    return _floor(Fraction(a) / Fraction(b))


def _time_op(op: Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
    def apply(a: Any, b: Any) -> Any:
        if a is None or b is None:
            return None
        return op(a, b)

    return apply


def _time_cmp(op: Callable[[Any, Any], bool]) -> Callable[[Any, Any], bool]:
    def apply(a: Any, b: Any) -> bool:
        if a is None or b is None:
            return False
        return op(a, b)

    return apply


_HELPERS: dict[str, Any] = {
    "_floor": _floor,
    "_div": _div,
    "_pmul": _pmul,
    "_pfloor": _pfloor,
    "_pneg": _pneg,
    "_tadd": _time_op(operator.add),
    "_tsub": _time_op(operator.sub),
    "_Fraction": Fraction,
    **{
        f"_t{name}": _time_cmp(fn)
        for name, fn in {
            "lt": operator.lt,
            "le": operator.le,
            "gt": operator.gt,
            "ge": operator.ge,
            "eq": operator.eq,
            "ne": operator.ne,
        }.items()
    },
}
_CMP_NAMES = {"<": "lt", "<=": "le", ">": "gt", ">=": "ge", "==": "eq", "!=": "ne"}


def _tsum(values: tuple[Any, ...]) -> Any:
    """A sum where a term may be undefined (None): then the sum is too."""
    return None if any(value is None for value in values) else sum(values)


def _symbolic_sum(values: tuple[Any, ...]) -> Any:
    total = values[0]
    for value in values[1:]:
        total = add(total, value)
    return total


def _connective(combine: str) -> Callable[[Space, tuple[Any, ...]], Any]:
    def fold(space: Space, values: tuple[Any, ...]) -> Any:
        step = getattr(space, combine)
        formula = space.truth(values[0])
        for value in values[1:]:
            formula = step(formula, space.truth(value))
        return formula

    return fold


_HELPERS["_tsum"] = _tsum
_CONJ, _DISJ = _connective("conj"), _connective("disj")
_SYMBOLIC_CHAINS = {"+": "_ssum", "and": "_sconj", "or": "_sdisj"}


def chain_terms(expr: Json) -> list[Json]:
    """The terms of the chain of `expr`'s operator it tops, in written order.

    A binary chain (`(a + b) + c`), a chain that is one node (more than
    CHAIN_TERMS terms, candidate.py) and a mix of the two (a mutant adds a
    binary `+ 1` to an amount) all read as the same left-to-right terms.
    """
    op, rights, node = expr["op"], [], expr
    while node["op"] == op and node.get("args"):
        rights.extend(reversed(node["args"][1:]))
        node = node["args"][0]
    return [node, *reversed(rights)]


class ExpressionCompiler:
    """Turns expression trees of one model into Python source and functions.

    With a symbolic `space`, arithmetic, comparisons and connectives go
    through it, so a function returns linear forms and formulas where ranged
    params are involved (and plain values elsewhere); without one, the
    functions are plain Python over concrete values, for speed.
    """

    def __init__(self, model: Model, space: Space | None = None) -> None:
        self.model = model
        self.space = space
        self.sites_of: dict[str, list[int]] = {}
        for site in model.sites:
            self.sites_of.setdefault(site.effect, []).append(site.index)

    def source(self, expr: Json) -> str:
        op = expr["op"]
        method = getattr(self, f"_op_{op}", None)
        if method is not None:
            text: str = method(expr)
            return text
        if op in CHAIN_OPERATORS:
            return self._chain(op, chain_terms(expr))
        args = [self.source(a) for a in expr.get("args", [])]
        if self.space is not None:
            return self._symbolic(expr, args)
        # Values that may be None (an unset stamp, a quotient by zero) go through None-safe helpers.
        timed = any(_partial(a) for a in expr.get("args", []))
        if op in _CMP_NAMES:
            if timed:
                return f"_t{_CMP_NAMES[op]}({args[0]}, {args[1]})"
            return f"({args[0]} {op} {args[1]})"
        if op in ("+", "-"):
            if timed:
                return f"_t{'add' if op == '+' else 'sub'}({args[0]}, {args[1]})"
            return f"({args[0]} {op} {args[1]})"
        if op == "*":
            kinds = {a["type"] for a in expr["args"]}
            product = f"_pmul({args[0]}, {args[1]})" if timed else f"({args[0]} * {args[1]})"
            if "percent" in kinds and expr["type"] == "money":
                return f"_pfloor({product})" if timed else f"_floor{product}"
            return product
        if op == "/":
            return f"_div({args[0]}, {args[1]})"
        if op == "and":
            return f"({args[0]} and {args[1]})"
        if op == "or":
            return f"({args[0]} or {args[1]})"
        if op == "implies":
            return f"((not {args[0]}) or {args[1]})"
        if op == "not":
            return f"(not {args[0]})"
        if op == "neg":
            return f"_pneg({args[0]})" if timed else f"(-{args[0]})"
        raise VerifyError(f"unknown expression operator `{op}` in the model", code="PW304")

    def _chain(self, op: str, terms: list[Json]) -> str:
        """A chain of `+`, `and` or `or`, binary or one node, as one flat call or operator run.

        Flat, so the source nests as the policy does, not one level a term
        (CPython refuses more than 200 nested parentheses, and its compiler
        recurses over a long `a + b + ...`); the result is the left-to-right
        fold the binary tree means: sums are exact, connectives short-circuit.
        """
        args = [self.source(term) for term in terms]
        listed = "(" + ", ".join(args) + ",)"
        if self.space is not None:
            return f"{_SYMBOLIC_CHAINS[op]}({listed})"
        if op == "+" and any(_partial(term) for term in terms):
            return f"_tsum({listed})"
        if op == "+" and len(terms) > CHAIN_TERMS:
            return f"sum({listed})"
        return "(" + f" {op} ".join(args) + ")"

    def _symbolic(self, expr: Json, args: list[str]) -> str:
        op = expr["op"]
        if op in _CMP_NAMES:
            return f"_S.compare({op!r}, {args[0]}, {args[1]})"
        if op == "+":
            return f"_sadd({args[0]}, {args[1]})"
        if op == "-":
            return f"_sadd({args[0]}, _sscale({args[1]}, -1))"
        if op == "*":
            kinds = {a["type"] for a in expr["args"]}
            product = f"_S.mul({args[0]}, {args[1]})"
            if "percent" in kinds and expr["type"] == "money":
                return f"_S.floor({product})"
            return product
        if op == "/":
            return f"_S.div({args[0]}, {args[1]})"
        if op == "and":
            return f"_S.conj(_S.truth({args[0]}), _S.truth({args[1]}))"
        if op == "or":
            return f"_S.disj(_S.truth({args[0]}), _S.truth({args[1]}))"
        if op == "implies":
            return f"_S.implies(_S.truth({args[0]}), _S.truth({args[1]}))"
        if op == "not":
            return f"_S.negate(_S.truth({args[0]}))"
        if op == "neg":
            return f"_sscale({args[0]}, -1)"
        raise VerifyError(f"unknown expression operator `{op}` in the model", code="PW304")

    def _op_lit(self, expr: Json) -> str:
        kind, value = expr["type"], expr["value"]
        if kind in ("money", "int", "duration"):
            return str(int(value))
        if kind == "percent":
            from pactwright.money import Percent

            frac = Percent.parse(value).value
            return f"_Fraction({frac.numerator}, {frac.denominator})"
        if kind == "bool":
            return "True" if value == "true" else "False"
        return repr(str(value))

    def _op_param(self, expr: Json) -> str:
        return f"v.p[{self.model.param_index[expr['name']]}]"

    def _op_stamp(self, expr: Json) -> str:
        return f"v.stamps[{self.model.stamp_index[expr['name']]}]"

    def _op_now(self, expr: Json) -> str:
        return "0"

    def _op_final(self, expr: Json) -> str:
        return "v.final"

    def _op_balance(self, expr: Json) -> str:
        return f"v.bal[{self.model.account_index[expr['name']]}]"

    def _op_fired(self, expr: Json) -> str:
        return f"v.fired[{self.model.transition_index[expr['name']]}]"

    def _op_applied(self, expr: Json) -> str:
        if expr.get("value") == "effect" or expr["name"] not in self.model.transition_index:
            terms = [f"v.sapp[{i}]" for i in self.sites_of.get(expr["name"], [])]
            terms += [f"v.comp[{s.index}]" for s in self.model.sites if s.compensation == expr["name"]]
            return "(" + " + ".join(terms) + ")" if terms else "0"
        return f"v.fired[{self.model.transition_index[expr['name']]}]"

    def _op_total(self, expr: Json) -> str:
        # Each application carries the amount fixed when its transition committed
        # (an amount such as `balance(escrow)` changes with that very commit).
        parts = [f"v.stot[{index}]" for index in self.sites_of.get(expr["name"], [])]
        for site in self.model.sites:
            # A compensation carries the amount of the call it undoes.
            if site.compensation == expr["name"] and site.amount is not None:
                parts.append(f"v.ctot[{site.index}]")
        return "(" + " + ".join(parts) + ")" if parts else "0"

    def _op_reached(self, expr: Json) -> str:
        return f"bool(v.reached >> {self.model.states.index(expr['name'])} & 1)"

    def _op_approved(self, expr: Json) -> str:
        index = self.model.transition_index[expr["name"]]
        if index not in self.model.approval_transitions:
            return "False"
        return f"bool(v.approved[{self.model.approval_transitions.index(index)}])"

    def _op_approvals(self, expr: Json) -> str:
        """Four eyes (new in 1.1): the approvals T's commit consumed (`value`), once T committed with them."""
        index = self.model.transition_index[expr["name"]]
        if index not in self.model.approval_transitions:
            return "0"
        return f"({int(expr['value'])} if v.approved[{self.model.approval_transitions.index(index)}] else 0)"

    def _outcome(self, expr: Json) -> str:
        """Whether the latest call at some `call E` stands in the outcome's phase (new in 1.1)."""
        phase = int(OUTCOME_PHASES[expr["op"]])
        terms = [f"v.phase[{index}] == {phase}" for index in self.sites_of.get(expr["name"], [])]
        return "(" + " or ".join(terms) + ")" if terms else "False"

    _op_acknowledged = _op_reconciled = _op_abandoned = _outcome

    def function(self, expr: Json | None) -> Callable[[View], Any]:
        """A compiled function of one view; `None` compiles to always-true."""
        if expr is None:
            return lambda v: True
        code = f"lambda v: {self.source(expr)}"
        scope = dict(_HELPERS)
        if self.space is not None:
            space = self.space
            scope.update({"_S": space, "_sadd": add, "_sscale": scale, "_ssum": _symbolic_sum})
            scope.update({"_sconj": lambda values: _CONJ(space, values), "_sdisj": lambda values: _DISJ(space, values)})
        compiled: Callable[[View], Any] = eval(code, scope)  # noqa: S307 - source built from the model's own tree
        return compiled


def _partial(expr: Json) -> bool:
    """Whether `expr` may be None: it reads a stamp (maybe unset) or divides (maybe by zero)."""
    return expr["op"] in ("/", "stamp") or any(_partial(a) for a in expr.get("args", []))
