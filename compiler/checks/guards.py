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
    """Type every guard, invariant and transfer amount once, for all checks."""
    for decl in ctx.sym.transitions.values():
        for tfield in decl.fields:
            if isinstance(tfield, ast.WhenField) and decl.name.name not in ctx.guards:
                ctx.guards[decl.name.name] = ctx.typer.lower(tfield.expr, "bool")
    for decl, index, transfer in ctx.transfers():
        ctx.amounts[(decl.name.name, index)] = ctx.typer.lower(transfer.amount, "money")
    for inv in ctx.sym.invariants.values():
        ctx.invariants[inv.name.name] = ctx.typer.lower(inv.expr, "bool")


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


def _truth(ctx: CheckContext, expr: Expr) -> bool | None:
    """True or False when the guard's value is fixed by declared bounds; else None."""
    if expr.op == "not":
        inner = _truth(ctx, expr.args[0])
        return None if inner is None else not inner
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


def _deadline(expr: Expr) -> bool:
    """Whether `expr` becomes true by time passing: `now >= T`, `now > T`, `T <= now`..."""
    if expr.op in (">=", ">") and expr.args[0].op == "now":
        return True
    if expr.op in ("<=", "<") and expr.args[1].op == "now":
        return True
    return any(_deadline(arg) for arg in expr.args if expr.op in ("and", "or"))


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
