"""Declared values: currency, literals, bounds, budgets and effect fields."""

from __future__ import annotations

import re
from collections.abc import Iterator

from pactwright.canonical import MAX_SAFE_INT
from pactwright.compiler import ast
from pactwright.compiler.checks._registry import CheckContext, check
from pactwright.compiler.literals import Classified, LiteralProblem, classify, money_value
from pactwright.diagnostics import Diagnostic
from pactwright.money import MAX_SCALE

_RISKS = {"R1", "R2", "R3", "R4", "R5"}
_METHODS = {"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE"}
_CURRENCY = re.compile(r"[A-Z]{3,12}")


def _a(kind: str) -> str:
    """`a money`, `an int`: the article a kind takes in a message."""
    return f"an {kind}" if kind[0] in "aeiou" else f"a {kind}"


@check("PW138")
def currency_declared(ctx: CheckContext) -> Iterator[Diagnostic]:
    if not ctx.sym.currencies:
        yield ctx.error("PW138", "no currency declared", ctx.sym.policy.header.span, "add `currency EUR scale 2`")
        return
    decl = ctx.sym.currencies[0]
    if not _CURRENCY.fullmatch(decl.code.name):
        yield ctx.error(
            "PW138", f"bad currency code `{decl.code.name}`", decl.code.span, "use an ISO-4217-like code: `EUR`"
        )
    if not decl.scale.text.isdigit() or len(decl.scale.text) > 3 or int(decl.scale.text) > MAX_SCALE:
        yield ctx.error("PW138", f"bad currency scale `{decl.scale.text}`", decl.scale.span, "the scale is 0 to 8")


def _kind(lit: ast.NumberLit, scale: int) -> Classified | LiteralProblem:
    return classify(lit.text, scale)


@check("PW104", "PW105", "PW106", "PW107", "PW128", "PW137")
def param_values(ctx: CheckContext) -> Iterator[Diagnostic]:
    scale = ctx.sym.scale
    for param in ctx.sym.params.values():
        lits = [lit for lit in (param.low, param.high, param.value) if lit is not None]
        values: list[int] = []
        for lit in lits:
            found = _kind(lit, scale)
            if isinstance(found, LiteralProblem):
                yield ctx.error(found.code, found.message, lit.span, found.hint)
                continue
            if param.type == "money":
                amount = money_value(lit.text, scale)
                if isinstance(amount, LiteralProblem):
                    yield ctx.error(amount.code, amount.message, lit.span, amount.hint)
                    continue
                values.append(amount)
            elif found.kind != param.type:
                yield ctx.error(
                    "PW137",
                    f"param `{param.name.name}` is {_a(param.type)} but `{lit.text}` is {_a(found.kind)}",
                    lit.span,
                    {"percent": "write percents as `10%`", "duration": "write durations as `14d`"}.get(param.type, ""),
                )
            else:
                values.append(_order_key(found))
        if param.low is not None and param.high is not None and len(values) == 2 and values[0] > values[1]:
            yield ctx.error(
                "PW128",
                f"bounds of param `{param.name.name}` are reversed: `{param.low.text}` > `{param.high.text}`",
                param.low.span,
                f"write `between {param.high.text} and {param.low.text}`",
            )


def _order_key(found: Classified) -> int:
    if found.kind == "percent":
        whole, _, frac = found.value.partition(".")
        return int(whole) * 10**4 + int(frac.ljust(4, "0") or "0")
    return int(found.value)


def pattern_problem(pattern: str) -> str | None:
    """Why a `text matching` pattern cannot be used, or None.

    The pattern must compile with Python's `re` and, anchored as the events
    schema states it, with the schema validator's engine (pydantic's Rust
    regex: no lookaround, no backreferences, a size limit). `re` raises more
    than `re.error` on hostile patterns: deep nesting overflows its recursive
    parser and huge repeat counts overflow a C integer.
    """
    try:
        re.compile(pattern)
    except re.error as exc:
        return exc.msg
    except RecursionError:
        return "nested too deeply"
    except (OverflowError, ValueError, MemoryError) as exc:
        return str(exc) or type(exc).__name__
    from pydantic_core import SchemaError, SchemaValidator, core_schema

    from pactwright.compiler.emit_schema import anchored_pattern

    try:
        SchemaValidator(core_schema.str_schema(pattern=anchored_pattern(pattern)))
    except SchemaError as exc:
        # The engine's message spans several lines (it draws a caret); keep its summary.
        lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
        summary = next((line for line in reversed(lines) if line.startswith("error:")), lines[-1] if lines else "")
        summary = summary.removeprefix("error:").removeprefix("SchemaError:").strip()
        return f"not supported by the events schema's regex engine ({summary})"
    return None


@check("PW139")
def text_params(ctx: CheckContext) -> Iterator[Diagnostic]:
    for param in ctx.sym.params.values():
        if param.pattern is not None:
            problem = pattern_problem(param.pattern.value)
            if problem is not None:
                yield ctx.error(
                    "PW139",
                    f"bad regular expression for param `{param.name.name}`: {problem}",
                    param.pattern.span,
                    "use a plain pattern: no lookaround, no backreferences, no inline comments",
                )
        seen: set[str] = set()
        for option in param.options:
            if option.name in seen:
                yield ctx.error("PW121", f"value `{option.name}` is listed twice", option.span, "list each value once")
            seen.add(option.name)
            # A bare word in an expression is a param or a stamp before it is
            # an option, so `reason == late` would silently read a param `late`.
            clash = "param" if option.name in ctx.sym.params else "stamp" if option.name in ctx.sym.stamps else None
            if clash is not None:
                yield ctx.error(
                    "PW121",
                    f"value `{option.name}` of param `{param.name.name}` is also the name of a {clash}",
                    option.span,
                    f"rename the {clash} or the value: `{param.name.name} == {option.name}` would read the {clash}",
                )


@check("PW104", "PW105", "PW107", "PW137", "PW139")
def budget_values(ctx: CheckContext) -> Iterator[Diagnostic]:
    scale = ctx.sym.scale
    for budget in ctx.sym.budgets[:1]:
        seen: set[str] = set()
        for item in budget.items:
            if item.key in seen:
                yield ctx.error("PW121", f"budget has `{item.key}` twice", item.span, "keep one")
            seen.add(item.key)
            yield from _typed_value(ctx, item.key, item.value, scale)


def _typed_value(ctx: CheckContext, key: str, lit: ast.NumberLit, scale: int) -> Iterator[Diagnostic]:
    """Check a field's literal against the kind the field needs."""
    wanted = {"ceiling": "money", "max_active_time": "duration", "timeout": "duration"}.get(key, "int")
    found = classify(lit.text, scale)
    if isinstance(found, LiteralProblem):
        yield ctx.error(found.code, found.message, lit.span, found.hint)
        return
    if wanted == "money":
        amount = money_value(lit.text, scale)
        if isinstance(amount, LiteralProblem):
            yield ctx.error(amount.code, amount.message, lit.span, amount.hint)
        return
    if found.kind != wanted:
        yield ctx.error(
            "PW137",
            f"`{key}` needs {_a(wanted)}, found {found.kind} `{lit.text}`",
            lit.span,
            f"e.g. `{key} {'8' if wanted == 'int' else '30s'}`",
        )
    elif int(found.value) > MAX_SAFE_INT:
        # The candidate carries these as JSON integers (RFC 8785 numbers).
        yield ctx.error("PW139", f"`{key}` of `{lit.text}` is too large", lit.span, f"at most {MAX_SAFE_INT}")
    elif wanted == "int" and int(found.value) == 0 and key.startswith("max_"):
        yield ctx.error("PW139", f"`{key}` of 0 forbids every call", lit.span, "remove the call or allow at least 1")


@check("PW139", "PW140")
def effect_fields(ctx: CheckContext) -> Iterator[Diagnostic]:
    scale = ctx.sym.scale
    for effect in ctx.sym.effects.values():
        keys = {f.key for f in effect.fields}
        if "risk" not in keys:
            yield ctx.error(
                "PW140", f"effect `{effect.name.name}` has no `risk`", effect.name.span, "add `risk R1` .. `risk R5`"
            )
        for efield in effect.fields:
            if efield.key == "risk":
                risk = efield.args[0]
                assert isinstance(risk, ast.Ident)
                if risk.name not in _RISKS:
                    yield ctx.error(
                        "PW139", f"unknown risk class `{risk.name}`", risk.span, "risk classes are R1 to R5"
                    )
            elif efield.key == "egress":
                method = efield.args[0]
                assert isinstance(method, ast.Ident)
                if method.name not in _METHODS:
                    yield ctx.error(
                        "PW139",
                        f"unknown HTTP method `{method.name}`",
                        method.span,
                        f"one of {', '.join(sorted(_METHODS))}",
                    )
            elif efield.key in ("max_calls", "timeout", "ceiling"):
                lit = efield.args[0]
                assert isinstance(lit, ast.NumberLit)
                yield from _typed_value(ctx, efield.key, lit, scale)


@check("PW139")
def rule_risks(ctx: CheckContext) -> Iterator[Diagnostic]:
    for rule in ctx.sym.rules.values():
        if rule.risk.name not in _RISKS:
            yield ctx.error(
                "PW139", f"unknown risk class `{rule.risk.name}`", rule.risk.span, "risk classes are R1 to R5"
            )


@check("PW140")
def transitions_have_roles(ctx: CheckContext) -> Iterator[Diagnostic]:
    for decl in ctx.sym.transitions.values():
        if not any(isinstance(f, ast.ByField) for f in decl.fields):
            yield ctx.error(
                "PW140", f"transition `{decl.name.name}` says nobody may invoke it", decl.name.span, "add `by ROLE`"
            )
