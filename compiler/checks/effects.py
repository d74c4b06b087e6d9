"""Effects and authority: rules, approvals, untrusted roles, strategies."""

from __future__ import annotations

from collections.abc import Iterator

from pactwright.compiler import ast
from pactwright.compiler.checks._registry import CheckContext, check
from pactwright.diagnostics import Diagnostic


def _field(effect: ast.EffectDecl, key: str) -> ast.EffectField | None:
    return next((f for f in effect.fields if f.key == key), None)


def _risk(effect: ast.EffectDecl) -> str | None:
    risk = _field(effect, "risk")
    if risk is None:
        return None
    arg = risk.args[0]
    return arg.name if isinstance(arg, ast.Ident) else None


def _calls(decl: ast.TransitionDecl) -> list[ast.CallField]:
    return [f for f in decl.fields if isinstance(f, ast.CallField)]


@check("PW131", "PW132")
def effect_rules(ctx: CheckContext) -> Iterator[Diagnostic]:
    sym = ctx.sym
    for decl in sym.transitions.values():
        approval = next((f for f in decl.fields if isinstance(f, ast.ApprovalField)), None)
        for call in _calls(decl):
            effect = sym.effects.get(call.effect.name)
            risk = _risk(effect) if effect else None
            if risk is None:
                continue
            rule = sym.rules.get(risk)
            if rule is None or rule.decision == "deny":
                why = "no rule, and the default is deny" if rule is None else f"rule {risk} is `deny`"
                yield ctx.error(
                    "PW132",
                    f"transition `{decl.name.name}` calls effect `{call.effect.name}` (risk {risk}), which is denied",
                    call.span,
                    f"add `rule {risk} require_approval` (or another decision) if the effect is intended",
                    label=why,
                )
            elif rule.decision == "require_approval" and approval is None:
                yield ctx.error(
                    "PW131",
                    f"transition `{decl.name.name}` calls effect `{call.effect.name}` (risk {risk}) "
                    "without an approval",
                    call.span,
                    f"add `approval by <role> not requester` to `{decl.name.name}`, "
                    "or lower the effect's risk class if that is true",
                    label=f"rule {risk} is `require_approval`",
                )


@check("PW132")
def denied_effects(ctx: CheckContext) -> Iterator[Diagnostic]:
    """A denied effect nobody calls directly (a compensation, say) is still denied."""
    called = {c.effect.name for decl in ctx.sym.transitions.values() for c in _calls(decl)}
    for effect in ctx.sym.effects.values():
        risk = _risk(effect)
        risk_field = _field(effect, "risk")
        if effect.name.name in called or risk is None or risk_field is None:
            continue
        rule = ctx.sym.rules.get(risk)
        if rule is None or rule.decision == "deny":
            why = "no rule, and the default is deny" if rule is None else f"rule {risk} is `deny`"
            yield ctx.error(
                "PW132",
                f"effect `{effect.name.name}` (risk {risk}) is denied: {why}",
                risk_field.span,
                f"add `rule {risk} ...` with a decision other than `deny`, or remove the effect",
            )


@check("PW133")
def untrusted_roles(ctx: CheckContext) -> Iterator[Diagnostic]:
    sym = ctx.sym
    for decl in sym.transitions.values():
        moves_money = any(isinstance(f, ast.TransferField) for f in decl.fields)
        risky = [
            c.effect.name
            for c in _calls(decl)
            if c.effect.name in sym.effects and (_risk(sym.effects[c.effect.name]) or "R1") > "R1"
        ]
        for tfield in decl.fields:
            if isinstance(tfield, ast.ByField):
                for role in tfield.roles:
                    decl_role = sym.roles.get(role.name)
                    if decl_role is None or not decl_role.untrusted:
                        continue
                    if moves_money or risky:
                        what = "moves money" if moves_money else f"calls `{risky[0]}` above R1"
                        yield ctx.error(
                            "PW133",
                            f"untrusted role `{role.name}` may not invoke `{decl.name.name}`: it {what}",
                            role.span,
                            "let a trusted role invoke it; an untrusted role may only propose",
                        )
            elif isinstance(tfield, ast.ApprovalField):
                decl_role = sym.roles.get(tfield.role.name)
                if decl_role is not None and (decl_role.untrusted or decl_role.clock):
                    kind = "untrusted" if decl_role.untrusted else "clock"
                    yield ctx.error(
                        "PW133",
                        f"{kind} role `{tfield.role.name}` can never approve",
                        tfield.role.span,
                        "approvals come from a trusted human role",
                    )


@check("PW134")
def irreversible_retry(ctx: CheckContext) -> Iterator[Diagnostic]:
    for effect in ctx.sym.effects.values():
        reversibility = _field(effect, "reversibility")
        strategy = _field(effect, "strategy")
        if reversibility is None or strategy is None:
            continue
        rev = reversibility.args[0]
        strat = strategy.args[0]
        if (
            isinstance(rev, ast.Ident)
            and rev.name == "irreversible"
            and isinstance(strat, ast.Ident)
            and strat.name == "retry"
        ):
            yield ctx.error(
                "PW134",
                f"irreversible effect `{effect.name.name}` has strategy `retry`: a lost response would repeat it",
                strategy.span,
                "say `idempotent` (the provider deduplicates by key) or `reconcilable`",
            )


@check("PW153")
def explicit_default(ctx: CheckContext) -> Iterator[Diagnostic]:
    if ctx.sym.effects and not ctx.sym.defaults:
        first = next(iter(ctx.sym.effects.values()))
        yield ctx.warning(
            "PW153",
            "the policy declares effects but not `default deny`",
            first.name.span,
            "add `default deny` so a reader sees that unlisted risk classes are denied",
        )


@check("PW152")
def ceilings_below_bounds(ctx: CheckContext) -> Iterator[Diagnostic]:
    from pactwright.compiler.checks.guards import interval
    from pactwright.compiler.literals import money_value
    from pactwright.money import format_money

    scale = ctx.sym.scale
    for decl in ctx.sym.transitions.values():
        for index, call in enumerate(_calls(decl)):
            effect = ctx.sym.effects.get(call.effect.name)
            ceiling = _field(effect, "ceiling") if effect else None
            if effect is None or ceiling is None or not isinstance(ceiling.args[0], ast.NumberLit):
                continue
            cap = money_value(ceiling.args[0].text, scale)
            if not isinstance(cap, int):
                continue
            declared = ctx.effect_amounts.get(effect.name.name) or ctx.call_amounts.get((decl.name.name, index))
            if declared is not None:
                # What the call carries is stated: compare its largest value, not the transfers.
                largest = interval(ctx, declared)[1]
                if declared.type == "money" and largest is not None and largest > cap:
                    most = format_money(int(largest), scale)
                    yield ctx.warning(
                        "PW152",
                        f"ceiling of effect `{effect.name.name}` is below the most its amount can be ({most})",
                        ceiling.span,
                        "such calls will be refused at the ceiling; lower the params' bounds or raise the ceiling",
                    )
                continue
            for transfer in (f for f in decl.fields if isinstance(f, ast.TransferField)):
                if isinstance(transfer.amount, ast.NameExpr) and transfer.amount.name in ctx.sym.params:
                    param = ctx.sym.params[transfer.amount.name]
                    top = param.high or param.value
                    high = money_value(top.text, scale) if top is not None and param.type == "money" else None
                    if isinstance(high, int) and cap < high:
                        yield ctx.warning(
                            "PW152",
                            f"ceiling of effect `{effect.name.name}` is below the upper bound "
                            f"of param `{param.name.name}`",
                            ceiling.span,
                            "such runs will be refused at the ceiling; lower the param's bound or raise the ceiling",
                        )
    for budget in ctx.sym.budgets[:1]:
        cap_item = next((i for i in budget.items if i.key == "ceiling"), None)
        if cap_item is None:
            continue
        cap = money_value(cap_item.value.text, scale)
        if not isinstance(cap, int):
            continue
        for param in ctx.sym.params.values():
            top = param.high or param.value
            if param.type == "money" and top is not None:
                high = money_value(top.text, scale)
                if isinstance(high, int) and cap < high:
                    yield ctx.warning(
                        "PW152",
                        f"budget ceiling is below the upper bound of param `{param.name.name}`",
                        cap_item.span,
                        "such runs will be refused at the ceiling",
                    )
