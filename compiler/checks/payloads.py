"""Effects that move money: declared reversibility, declared amounts, keys, payloads.

What "money-moving" and "payload" mean is defined once, in
`compiler/payload.py`; these checks hold a policy to it so the verifier and
the approval preview never have to guess what an effect carries.
"""

from __future__ import annotations

from collections.abc import Iterator

from pactwright.candidate import Expr
from pactwright.compiler import ast
from pactwright.compiler.checks._registry import CheckContext, check
from pactwright.compiler.payload import EffectFacts, money_moving, payload_fields, placeholders
from pactwright.diagnostics import Diagnostic, Span

# Strategies whose safety rests on the provider recognising a repeat by key.
_KEYED = frozenset({"idempotent", "reconcilable"})
# Expression nodes an amount may not contain: it is fixed by the agreement's
# params, never by the state a run is in.
_STATE_OPS = frozenset({"stamp", "now", "final", "balance", "applied", "fired", "total", "reached", "approved",
                        "approvals", "acknowledged", "reconciled", "abandoned"})  # fmt: skip


def _field(effect: ast.EffectDecl, key: str) -> ast.EffectField | None:
    return next((f for f in effect.fields if f.key == key), None)


def _word(effect: ast.EffectDecl, key: str) -> str | None:
    found = _field(effect, key)
    if found is None or not found.args or not isinstance(found.args[0], ast.Ident):
        return None
    return found.args[0].name


def _key(effect: ast.EffectDecl) -> tuple[str, ...]:
    found = _field(effect, "key")
    return () if found is None else tuple(a.name for a in found.args if isinstance(a, ast.Ident))


def _consequence(effect: ast.EffectDecl) -> ast.StringLit | None:
    found = _field(effect, "consequence")
    if found is None or not found.args or not isinstance(found.args[0], ast.StringLit):
        return None
    return found.args[0]


def _site_amounts(ctx: CheckContext) -> dict[str, list[Expr | None]]:
    """Per effect, the amount written at each of its calls (None where a call writes none)."""
    found: dict[str, list[Expr | None]] = {}
    for decl, index, call in ctx.calls():
        found.setdefault(call.effect.name, []).append(ctx.call_amounts.get((decl.name.name, index)))
    return found


def _facts(ctx: CheckContext, effect: ast.EffectDecl, sites: dict[str, list[Expr | None]]) -> EffectFacts:
    name = effect.name.name
    amounts = [ctx.effect_amounts.get(name), *sites.get(name, [])]
    consequence = _consequence(effect)
    return EffectFacts(
        reversibility=_word(effect, "reversibility"),
        key=_key(effect),
        consequence=consequence.value if consequence else None,
        amounts=tuple(a for a in amounts if a is not None),
    )


def _money_params(ctx: CheckContext) -> set[str]:
    return {name for name, param in ctx.sym.params.items() if param.type == "money"}


@check("PW155")
def risky_effects_declare_reversibility(ctx: CheckContext) -> Iterator[Diagnostic]:
    """From R3 up, an unset reversibility would hide an irreversible retry (PW134)."""
    for effect in ctx.sym.effects.values():
        risk = _word(effect, "risk")
        if risk is None or not risk[1:].isdigit() or int(risk[1:]) < 3 or _field(effect, "reversibility"):
            continue
        yield ctx.error(
            "PW155",
            f"effect `{effect.name.name}` (risk {risk}) does not declare its `reversibility`",
            effect.name.span,
            "add `reversibility irreversible`, `compensable`, `reversible` or `not_applicable`",
            label=f"risk {risk} and above must say whether the effect can be undone",
        )


@check("PW156", "PW159")
def money_moving_calls_declare_amounts(ctx: CheckContext) -> Iterator[Diagnostic]:
    money = _money_params(ctx)
    sites = _site_amounts(ctx)
    moving: dict[str, bool] = {}
    for decl, _index, call in ctx.calls():
        effect = ctx.sym.effects.get(call.effect.name)
        if effect is None:
            continue
        if call.effect.name not in moving:
            moving[call.effect.name] = money_moving(_facts(ctx, effect, sites), money)
        declared = _field(effect, "amount")
        if declared is not None and call.amount is not None:
            yield ctx.error(
                "PW159",
                f"the amount of this call of `{call.effect.name}` is declared twice "
                f"(the effect declares it at line {declared.span.line})",
                call.amount.span,
                f"remove `amount ...` here or from effect `{call.effect.name}`",
            )
        elif declared is None and call.amount is None and moving[call.effect.name]:
            yield ctx.error(
                "PW156",
                f"transition `{decl.name.name}` calls money-moving effect `{call.effect.name}` "
                "without a declared amount",
                call.span,
                f"add `amount EXPR` to effect `{call.effect.name}` or write `call {call.effect.name} amount EXPR`; "
                "an effect that moves no money says `reversibility reversible` or `not_applicable`",
                label="what this call carries is not stated",
            )


@check("PW157")
def keyed_strategies_have_keys(ctx: CheckContext) -> Iterator[Diagnostic]:
    for effect in ctx.sym.effects.values():
        strategy = _field(effect, "strategy")
        kind = _word(effect, "strategy")
        if strategy is None or kind not in _KEYED or _key(effect):
            continue
        yield ctx.error(
            "PW157",
            f"effect `{effect.name.name}` has strategy `{kind}` but no `key`",
            strategy.span,
            "add `key PARAM, ...`: the fields by which the provider recognises a repeat",
            label=f"`{kind}` works only against a key",
        )


def _placeholder_span(lit: ast.StringLit, index: int, name: str) -> Span:
    """The span of `{name}` at `index` of the string's value, or the string's when escapes shift it."""
    if "\\" in lit.value[:index] or '"' in lit.value[:index] or lit.span.line != lit.span.end_line:
        return lit.span
    column = lit.span.column + 1 + index
    return Span(line=lit.span.line, column=column, end_line=lit.span.line, end_column=column + len(name) + 2)


@check("PW158")
def consequences_name_payload_fields(ctx: CheckContext) -> Iterator[Diagnostic]:
    sites = _site_amounts(ctx)
    for effect in ctx.sym.effects.values():
        lit = _consequence(effect)
        if lit is None:
            continue
        name = effect.name.name
        own = ctx.effect_amounts.get(name)
        key = _key(effect)
        common = set.intersection(*(payload_fields(key, own, site) for site in sites.get(name) or [None]))
        seen: set[str] = set()
        offset = 0
        for placeholder in placeholders(lit.value):
            index = lit.value.index("{" + placeholder + "}", offset)
            offset = index + 1
            if placeholder in common or placeholder in seen:
                continue
            seen.add(placeholder)
            fields = ", ".join(f"`{f}`" for f in sorted(common)) or "none"
            yield ctx.error(
                "PW158",
                f"placeholder `{{{placeholder}}}` in the consequence of effect `{name}` names no payload field",
                _placeholder_span(lit, index, placeholder),
                f"the payload is the key fields and the params the amount reads ({fields}); "
                "add the param to `key` or name one of those",
            )


def _bad_node(expr: Expr) -> Expr | None:
    stack = [expr]
    while stack:
        node = stack.pop()
        if node.op in _STATE_OPS:
            return node
        stack.extend(node.args)
    return None


def _describe(node: Expr) -> str:
    if node.op in ("stamp", "now"):
        return "a time"
    if node.name is not None:
        return f"`{node.op}({node.name})`"
    return f"`{node.op}`"


@check("PW160")
def amounts_are_money_over_params(ctx: CheckContext) -> Iterator[Diagnostic]:
    written: list[tuple[ast.Expr, Expr | None]] = []
    for effect in ctx.sym.effects.values():
        declared = _field(effect, "amount")
        if declared is not None and declared.expr is not None:
            written.append((declared.expr, ctx.effect_amounts.get(effect.name.name)))
    for decl, index, call in ctx.calls():
        if call.amount is not None:
            written.append((call.amount, ctx.call_amounts.get((decl.name.name, index))))
    for source, typed in written:
        if typed is None:
            continue  # its own diagnostic (an unknown name, a bad literal) says why
        bad = _bad_node(typed)
        if bad is not None:
            yield ctx.error(
                "PW160",
                f"an effect's amount reads {_describe(bad)}; it may read only params and literals",
                source.span,
                "state the amount from the agreement's params, e.g. `amount price`",
            )
        elif typed.type != "money":
            yield ctx.error(
                "PW160",
                f"an effect's amount must be money, found {typed.type}",
                source.span,
                "write a money expression over params, e.g. `amount price` or `amount price * fee`",
            )


def _compensations(ctx: CheckContext) -> set[str]:
    """Effects named in some `compensate with E`."""
    found: set[str] = set()
    for effect in ctx.sym.effects.values():
        field = _field(effect, "compensate")
        if field is not None and field.args and isinstance(field.args[0], ast.Ident):
            found.add(field.args[0].name)
    return found


@check("PW161")
def compensations_carry_what_they_undo(ctx: CheckContext) -> Iterator[Diagnostic]:
    """A compensation moves back what the call it undoes carried, so its own amount or
    ceiling would be a promise nothing keeps: the runtime and the verifier use the
    undone call's amount, and a compensation is never refused for being too large."""
    for name in sorted(_compensations(ctx)):
        effect = ctx.sym.effects.get(name)
        if effect is None:
            continue
        for key in ("amount", "ceiling"):
            found = _field(effect, key)
            if found is None:
                continue
            yield ctx.error(
                "PW161",
                f"effect `{name}` compensates other effects, so it carries the amount of the call it undoes; "
                f"its own `{key}` would not be used",
                found.span,
                f"remove `{key}` from `{name}`; to limit what can be undone, "
                "put the ceiling on the effect it compensates",
            )
