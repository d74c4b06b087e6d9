"""The runtime's own evaluator of transitions.json expression trees.

Guards (and transfer amounts written as expressions) are evaluated here,
over one agreement's committed view and the trusted commit time, with the
typing rules of docs/language.md: money, int, duration and time are ints
(minor units, seconds, epoch seconds), percent is an exact `Fraction` of the
whole, text is `str`. Rounding happens only where the language says
(money * percent and `/` round toward minus infinity). As in the verifier,
an unset stamp and a division by zero are undefined (`None`): arithmetic on
them stays undefined and a comparison with them is false. Nothing here
imports the verifier: the two evaluators are independent by design.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from pactwright.errors import CommandError
from pactwright.expr_text import render_expr
from pactwright.money import Percent

Value = int | Fraction | str | bool | None
_OUTCOMES = frozenset({"acknowledged", "reconciled", "abandoned"})


@dataclass(frozen=True)
class View:
    """What an expression may read of one agreement, at one instant."""

    now: int
    params: Mapping[str, Value]
    stamps: Mapping[str, int]
    fired: Mapping[str, int]
    balances: Mapping[str, int]
    reached: frozenset[str]
    approved: frozenset[str]
    final: bool
    # Per effect: how many of its calls took effect, and the amount they carried (runtime/_command_effects.py).
    applied: Mapping[str, int] = field(default_factory=dict)
    totals: Mapping[str, int] = field(default_factory=dict)
    # New in 1.1: per outcome function (`acknowledged`, `reconciled`, `abandoned`), the effects it holds for.
    outcomes: Mapping[str, frozenset[str]] = field(default_factory=dict)


_CMP: dict[str, Callable[[Any, Any], bool]] = {
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
    "==": operator.eq,
    "!=": operator.ne,
}


_PERCENTS: dict[str, Fraction] = {}  # a percent's exact text -> its value (a Fraction, immutable)


def percent_value(text: str) -> Fraction:
    """`Percent.parse(text).value`, remembered by the exact text (only a text that parsed is remembered)."""
    found = _PERCENTS.get(text)
    if found is None:
        found = Percent.parse(text).value
        if len(_PERCENTS) >= 1024:
            _PERCENTS.clear()
        _PERCENTS[text] = found
    return found


def typed_value(kind: str, text: str) -> Value:
    """A param or literal's transitions.json text as the evaluator's value."""
    if kind in ("money", "int", "duration", "time"):
        return int(text)
    if kind == "percent":
        return percent_value(text)
    return text


def _floor(value: Any) -> int:
    if isinstance(value, Fraction):
        return value.numerator // value.denominator
    return int(value)


def _arith(op: str, a: Any, b: Any, kind: str) -> Value:
    if a is None or b is None:
        return None
    if op == "+":
        result = a + b
    elif op == "-":
        result = a - b
    elif op == "*":
        result = a * b
    elif op == "/":
        if b == 0:
            return None
        return _floor(Fraction(a) / Fraction(b))
    else:
        raise _unsupported(op)
    return result if kind == "percent" else _floor(result)


def evaluate(expr: Mapping[str, Any], view: View) -> Value:
    """The value of one expression tree in `view`."""
    op = str(expr["op"])
    args = expr.get("args", [])
    kind = str(expr.get("type", ""))
    if op == "lit":
        return typed_value(kind, str(expr["value"]))
    if op == "param":
        return view.params[str(expr["name"])]
    if op == "stamp":
        return view.stamps.get(str(expr["name"]))
    if op == "now":
        return view.now
    if op == "final":
        return view.final
    if op == "balance":
        return view.balances.get(str(expr["name"]), 0)
    if op in ("fired", "applied"):
        # Postings are delivered once per commit (the outbox deduplicates by reference),
        # so a transition's postings take effect exactly as often as it committed. An effect's
        # count is the calls the runtime knows took effect (acknowledged or recovered).
        if expr.get("value", "transition") == "transition":
            return view.fired.get(str(expr["name"]), 0)
        return view.applied.get(str(expr["name"]), 0)
    if op == "total":
        return view.totals.get(str(expr["name"]), 0)
    if op == "reached":
        return str(expr["name"]) in view.reached
    if op == "approved":
        return str(expr["name"]) in view.approved
    if op == "approvals":
        # Four eyes (new in 1.1): a commit of T consumed exactly the approvals it requires (`value`,
        # runtime/approvals.py refuses it with fewer), so the count is that once T was approved.
        return int(str(expr["value"])) if str(expr["name"]) in view.approved else 0
    if op in _OUTCOMES:
        # The latest call at some `call E` stands in that phase (runtime/_command_effects.py).
        return str(expr["name"]) in view.outcomes.get(op, frozenset())
    if op == "not":
        return not evaluate(args[0], view)
    if op == "neg":
        value = evaluate(args[0], view)
        return None if value is None else -value  # type: ignore[operator]
    # `and`, `or` and `+` are binary, or one node over the terms of a chain longer than
    # CHAIN_TERMS (new in 1.1, pactwright/candidate.py), read left to right as the binary tree is.
    if op == "and":
        return all(bool(evaluate(arg, view)) for arg in args)
    if op == "or":
        return any(bool(evaluate(arg, view)) for arg in args)
    if op == "implies":
        return (not evaluate(args[0], view)) or bool(evaluate(args[1], view))
    if op in _CMP:
        left, right = evaluate(args[0], view), evaluate(args[1], view)
        if left is None or right is None:
            return False
        return _CMP[op](left, right)
    if op == "+" and len(args) > 2:
        total = evaluate(args[0], view)
        for arg in args[1:]:
            total = _arith(op, total, evaluate(arg, view), kind)
        return total
    if op in ("+", "-", "*", "/"):
        return _arith(op, evaluate(args[0], view), evaluate(args[1], view), kind)
    raise _unsupported(op)


def false_parts(guard: Mapping[str, Any], view: View, scale: int) -> list[str]:
    """The top-level conjuncts of a false guard that are false, as policy text with their values."""
    parts: list[Mapping[str, Any]] = []

    def flatten(expr: Mapping[str, Any]) -> None:
        if expr["op"] == "and":
            for arg in expr["args"]:
                flatten(arg)
        else:
            parts.append(expr)

    flatten(guard)
    out = []
    for part in parts:
        if evaluate(part, view):
            continue
        text = f"`{render_expr(dict(part), scale)}`"
        if part["op"] in _CMP:
            left, right = (evaluate(a, view) for a in part["args"])
            text += f" ({_show(left)} {part['op']} {_show(right)})"
        out.append(text)
    return out


def _show(value: Value) -> str:
    if value is None:
        return "undefined"
    if isinstance(value, Fraction):
        return f"{Percent(value).canonical()}%"
    return str(value)


def _unsupported(op: str) -> CommandError:
    return CommandError(f"the bundle's expression uses `{op}`, which this runtime does not evaluate", code="PW518")
