"""Render a canonical expression tree back into policy syntax, for humans.

Used by diffs, reports and explanations. Money renders in minor units
with its type (the currency's scale is not part of the tree); parentheses
are added only where precedence needs them.
"""

from __future__ import annotations

from typing import Any

from pactwright.money import format_duration, format_money

_PRECEDENCE = {
    "implies": 1,
    "or": 2,
    "and": 3,
    "not": 4,
    "==": 5,
    "!=": 5,
    "<": 5,
    "<=": 5,
    ">": 5,
    ">=": 5,
    "+": 6,
    "-": 6,
    "*": 7,
    "/": 7,
    "neg": 8,
}


def render_expr(expr: dict[str, Any], scale: int | None = None) -> str:
    """Policy-like text of an expression tree; money as `N minor` unless `scale` is given."""
    op = expr["op"]
    if op == "lit":
        return _literal(expr, scale)
    if op in ("param", "stamp"):
        return str(expr["name"])
    if op in ("now", "final"):
        return str(op)
    if op in ("balance", "applied", "fired", "total", "reached", "approved", "approvals", "acknowledged", "reconciled",
              "abandoned"):  # fmt: skip
        return f"{op}({expr['name']})"
    args = expr.get("args", [])
    mine = _PRECEDENCE[op]
    if op == "not":
        return f"not {_wrap(args[0], mine, scale)}"
    if op == "neg":
        return f"-{_wrap(args[0], mine, scale)}"
    if op == "implies":
        return f"{_wrap(args[0], mine + 1, scale)} implies {_wrap(args[1], mine, scale)}"
    # A left-associative chain prints flat, without recursing a term: binary
    # (`(a + b) + c`), one node over its terms (new in 1.1), or both.
    terms = _terms(expr)
    first = _wrap(terms[0], mine, scale)
    return f" {op} ".join([first, *(_wrap(term, mine + 1, scale) for term in terms[1:])])


def _terms(expr: dict[str, Any]) -> list[dict[str, Any]]:
    """The left-to-right operands of the chain of `expr`'s operator that it tops."""
    op, rights, node = expr["op"], [], expr
    while node["op"] == op and len(node.get("args", [])) >= 2:
        rights.extend(reversed(node["args"][1:]))
        node = node["args"][0]
    return [node, *reversed(rights)]


def _wrap(expr: dict[str, Any], minimum: int, scale: int | None) -> str:
    text = render_expr(expr, scale)
    inner = _PRECEDENCE.get(expr["op"], 99)
    return f"({text})" if inner < minimum else text


def _literal(expr: dict[str, Any], scale: int | None) -> str:
    value = str(expr["value"])
    kind = expr["type"]
    if kind == "money":
        if scale is None:
            return f"{value} minor"
        return format_money(int(value), scale)
    if kind == "percent":
        return f"{value}%"
    if kind == "duration":
        return format_duration(int(value))
    if kind == "text":
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return value
