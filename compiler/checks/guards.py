"""Expressions: types, guards that can never hold, deadlines nobody fires."""

from __future__ import annotations

from collections.abc import Iterator
from fractions import Fraction

from pactwright.candidate import Expr
from pactwright.compiler import ast
from pactwright.compiler.checks._registry import CheckContext, check
from pactwright.diagnostics import Diagnostic
from pactwright.money import Percent

Interval = tuple[Fraction | None, Fraction | None]  # None: unbounded on that side
_UNKNOWN: Interval = (None, None)
_NATURAL: Interval = (Fraction(0), None)


def type_all(ctx: CheckContext) -> None:
    """Type every guard, invariant, transfer amount and effect amount once, for all checks."""
    for decl in ctx.sym.transitions.values():
        for tfield in decl.fields:
            if isinstance(tfield, ast.WhenField) and decl.name.name not in ctx.guards:
                ctx.guards[decl.name.name] = ctx.typer.lower(tfield.expr, "bool")
    for decl, index, transfer in ctx.transfers():
        ctx.amounts[(decl.name.name, index)] = ctx.typer.lower(transfer.amount, "money")
    for inv in ctx.sym.invariants.values():
        ctx.invariants[inv.name.name] = ctx.typer.lower(inv.expr, "bool")
    for effect in ctx.sym.effects.values():
        declared = next((f for f in effect.fields if f.key == "amount" and f.expr is not None), None)
        if declared is not None and declared.expr is not None:
            ctx.effect_amounts[effect.name.name] = ctx.typer.lower_amount(declared.expr)
    for decl, index, call in ctx.calls():
        if call.amount is not None:
            ctx.call_amounts[(decl.name.name, index)] = ctx.typer.lower_amount(call.amount)


@check("PW120", "PW137", "PW104", "PW105", "PW106", "PW107")
def expression_types(ctx: CheckContext) -> Iterator[Diagnostic]:
    yield from ctx.typer.diagnostics


def _param_interval(ctx: CheckContext, name: str) -> Interval:
    from pactwright.compiler.literals import Classified, classify, money_value, percent_value

    param = ctx.sym.params.get(name)
    if param is None:
        return _UNKNOWN
    bounds: list[Fraction | None] = []
    for lit in (param.low, param.high) if param.value is None else (param.value, param.value):
        if lit is None:
            bounds.append(None)
        elif param.type == "money":
            amount = money_value(lit.text, ctx.sym.scale)
            bounds.append(Fraction(amount) if isinstance(amount, int) else None)
        elif param.type == "percent" and lit.text.endswith("%"):
            bounds.append(percent_value(lit.text))
        else:
            found = classify(lit.text, ctx.sym.scale)
            bounds.append(
                Fraction(int(found.value)) if isinstance(found, Classified) and found.kind == "duration" else None
            )
    return (bounds[0], bounds[1])


def interval(ctx: CheckContext, expr: Expr) -> Interval:
    """The least and greatest value `expr` can take under the params' declared bounds (None: unknown)."""
    return _interval(ctx, expr)


def _interval(ctx: CheckContext, expr: Expr) -> Interval:
    if expr.op == "lit" and expr.value is not None and expr.type in ("money", "int", "duration"):
        return (Fraction(int(expr.value)), Fraction(int(expr.value)))
    if expr.op == "lit" and expr.value is not None and expr.type == "percent":
        value = Percent.parse(expr.value).value
        return (value, value)
    if expr.op == "param" and expr.name is not None:
        return _param_interval(ctx, expr.name)
    if expr.op in ("applied", "fired", "total"):
        return _NATURAL
    if expr.op == "neg" and len(expr.args) == 1:
        low, high = _interval(ctx, expr.args[0])
        return (None if high is None else -high, None if low is None else -low)
    if expr.op == "+" and len(expr.args) > 2:
        # One node over a long chain's terms (new in 1.1): the interval of the sum, term by term.
        total = _interval(ctx, expr.args[0])
        for arg in expr.args[1:]:
            total = _sum_interval(total, _interval(ctx, arg))
        return total
    if expr.op in ("+", "-", "*") and len(expr.args) == 2:
        left, right = _interval(ctx, expr.args[0]), _interval(ctx, expr.args[1])
        if None in left or None in right:
            if expr.op == "+" and left[0] is not None and right[0] is not None:
                return (left[0] + right[0], None)
            return _UNKNOWN
        assert None not in left
        assert None not in right
        lo1, hi1 = left
        lo2, hi2 = right
        assert lo1 is not None
        assert hi1 is not None
        assert lo2 is not None
        assert hi2 is not None
        if expr.op == "+":
            return (lo1 + lo2, hi1 + hi2)
        if expr.op == "-":
            return (lo1 - hi2, hi1 - lo2)
        products = [lo1 * lo2, lo1 * hi2, hi1 * lo2, hi1 * hi2]
        return (min(products), max(products))
    return _UNKNOWN


def _sum_interval(left: Interval, right: Interval) -> Interval:
    """The interval of `left + right`, as `_interval` finds it for a binary `+`."""
    if None in left or None in right:
        if left[0] is not None and right[0] is not None:
            return (left[0] + right[0], None)
        return _UNKNOWN
    lo1, hi1 = left
    lo2, hi2 = right
    assert lo1 is not None
    assert hi1 is not None
    assert lo2 is not None
    assert hi2 is not None
    return (lo1 + lo2, hi1 + hi2)


def _truth(ctx: CheckContext, expr: Expr) -> bool | None:
    """True or False when the guard's value is fixed by declared bounds; else None."""
    if expr.op == "not":
        inner = _truth(ctx, expr.args[0])
        return None if inner is None else not inner
    if expr.op in ("and", "or") and len(expr.args) > 2:
        # One node over a long chain's terms (new in 1.1), read as the binary chain would be.
        parts = [_truth(ctx, arg) for arg in expr.args]
        if expr.op == "and":
            return False if False in parts else (True if all(parts) else None)
        return True if True in parts else (False if all(part is False for part in parts) else None)
    if expr.op in ("and", "or", "implies"):
        left, right = _truth(ctx, expr.args[0]), _truth(ctx, expr.args[1])
        if expr.op == "and":
            return False if False in (left, right) else (True if left and right else None)
        if expr.op == "or":
            return True if True in (left, right) else (False if left is False and right is False else None)
        return True if left is False or right is True else (False if left is True and right is False else None)
    if expr.op in ("<", "<=", ">", ">=", "==", "!=") and expr.args[0].type != "text":
        (alo, ahi), (blo, bhi) = _interval(ctx, expr.args[0]), _interval(ctx, expr.args[1])
        op = expr.op
        if op in (">", ">="):
            (alo, ahi), (blo, bhi), op = (blo, bhi), (alo, ahi), "<" if op == ">" else "<="
        if op == "<":
            if ahi is not None and blo is not None and ahi < blo:
                return True
            if alo is not None and bhi is not None and alo >= bhi:
                return False
        if op == "<=":
            if ahi is not None and blo is not None and ahi <= blo:
                return True
            if alo is not None and bhi is not None and alo > bhi:
                return False
        if op == "==" and (
            (ahi is not None and blo is not None and ahi < blo) or (alo is not None and bhi is not None and alo > bhi)
        ):
            return False
    return None


@check("PW150")
def guards_that_never_hold(ctx: CheckContext) -> Iterator[Diagnostic]:
    for decl in ctx.sym.transitions.values():
        guard = ctx.guards.get(decl.name.name)
        when = next((f for f in decl.fields if isinstance(f, ast.WhenField)), None)
        if guard is not None and when is not None and _truth(ctx, guard) is False:
            yield ctx.warning(
                "PW150",
                f"the guard of transition `{decl.name.name}` can never hold",
                when.expr.span,
                "check the comparison against the params' declared bounds",
                label="false for every allowed value",
            )


def _divisions_by_zero(ctx: CheckContext, node: ast.Expr, typed: Expr) -> Iterator[ast.BinaryExpr]:
    """Every `/` in `node` whose divisor is zero whatever the params (`x / 0`, `x / (2 - 2)`).

    The typed tree has the syntax tree's shape (parentheses are gone from
    both, coercions rewrite leaves in place), so the two are walked together.
    """
    stack = [(node, typed)]
    while stack:
        source, lowered = stack.pop()
        if isinstance(source, ast.BinaryExpr) and len(lowered.args) > 2:
            # A chain lowered to one node (new in 1.1): its terms are the syntax chain's operands.
            spine = [source]
            while len(spine) < len(lowered.args) - 1 and isinstance(spine[-1].left, ast.BinaryExpr):
                spine.append(spine[-1].left)
            operands = [spine[-1].left, *(binary.right for binary in reversed(spine))]
            stack += zip(operands, lowered.args, strict=True)
        elif isinstance(source, ast.BinaryExpr) and len(lowered.args) == 2:
            if source.op == "/" and _interval(ctx, lowered.args[1]) == (Fraction(0), Fraction(0)):
                yield source
            stack += [(source.left, lowered.args[0]), (source.right, lowered.args[1])]
        elif isinstance(source, ast.UnaryExpr) and len(lowered.args) == 1:
            stack.append((source.operand, lowered.args[0]))


@check("PW139")
def division_by_zero(ctx: CheckContext) -> Iterator[Diagnostic]:
    found: list[tuple[ast.Expr, Expr | None]] = []
    for decl in ctx.sym.transitions.values():
        when = next((f for f in decl.fields if isinstance(f, ast.WhenField)), None)
        if when is not None:
            found.append((when.expr, ctx.guards.get(decl.name.name)))
    for decl, index, transfer in ctx.transfers():
        found.append((transfer.amount, ctx.amounts.get((decl.name.name, index))))
    for inv in ctx.sym.invariants.values():
        found.append((inv.expr, ctx.invariants.get(inv.name.name)))
    for node, typed in found:
        if typed is None:
            continue
        for division in _divisions_by_zero(ctx, node, typed):
            yield ctx.error(
                "PW139",
                "division by zero: the divisor is always 0",
                division.right.span,
                "divide by a number that is never 0",
            )


def _now_coefficient(expr: Expr) -> int:
    """How many times `now` counts in a time or duration sum (`now - s` once, `s - now` minus once)."""
    if expr.op == "now":
        return 1
    if expr.op == "neg" and len(expr.args) == 1:
        return -_now_coefficient(expr.args[0])
    if expr.op == "+":
        return sum(_now_coefficient(arg) for arg in expr.args)
    if expr.op == "-" and len(expr.args) == 2:
        right = _now_coefficient(expr.args[1])
        return _now_coefficient(expr.args[0]) + (right if expr.op == "+" else -right)
    return 0


def _deadline(expr: Expr, holds: bool = True) -> bool:
    """Whether `expr` (or, with `holds` false, its negation) becomes true by time passing.

    A comparison does when `now` counts positively on its greater side:
    `now >= T`, `T < now`, `now - s >= D`, `not (now < T)`, inside `and`,
    `or` and `implies` too.
    """
    if expr.op == "not":
        return _deadline(expr.args[0], not holds)
    if expr.op in ("and", "or"):
        return any(_deadline(arg, holds) for arg in expr.args)
    if expr.op == "implies":
        return _deadline(expr.args[0], not holds) or _deadline(expr.args[1], holds)
    if expr.op in ("<", "<=", ">", ">=") and expr.args[0].type in ("time", "duration"):
        growth = _now_coefficient(expr.args[0]) - _now_coefficient(expr.args[1])
        greater = expr.op in (">", ">=")
        return growth > 0 if greater == holds else growth < 0
    return False


@check("PW151")
def deadlines_without_clock(ctx: CheckContext) -> Iterator[Diagnostic]:
    for decl in ctx.sym.transitions.values():
        guard = ctx.guards.get(decl.name.name)
        if guard is None or not _deadline(guard):
            continue
        roles = [r for f in decl.fields if isinstance(f, ast.ByField) for r in f.roles]
        if not any(ctx.sym.roles.get(r.name) is not None and ctx.sym.roles[r.name].clock for r in roles):
            when = next(f for f in decl.fields if isinstance(f, ast.WhenField))
            yield ctx.warning(
                "PW151",
                f"transition `{decl.name.name}` waits for a deadline but no clock may invoke it",
                when.span,
                "add a `clock` role to `by` so the deadline fires on time",
                label="nothing fires this on time",
            )
