"""Syntax tree -> canonical candidate, plus the source map it leaves behind.

Normalization forgets what does not change meaning: order of declarations
and of set-like lists, literal spelling, comments and layout. It keeps what
does: names, clause labels, amounts, order of transfers and split portions.
Spans go to the `SourceMap`, which is never hashed.
"""

from __future__ import annotations

from typing import Any

from pactwright.candidate import (
    Account,
    Approval,
    Budget,
    Call,
    Candidate,
    CurrencySpec,
    Effect,
    Egress,
    Expr,
    Invariant,
    Limit,
    PactId,
    Param,
    Portion,
    Property,
    Role,
    Rule,
    State,
    Strategy,
    Transfer,
    Transition,
)
from pactwright.compiler import ast
from pactwright.compiler.checks import CheckContext
from pactwright.compiler.literals import Classified, classify, money_value
from pactwright.diagnostics import Span

SourceMap = dict[str, Span]


def _value(lit: ast.NumberLit, kind: str, scale: int) -> str:
    if kind == "money":
        amount = money_value(lit.text, scale)
        assert isinstance(amount, int), "checked before normalization"
        return str(amount)
    found = classify(lit.text, scale)
    assert isinstance(found, Classified)
    return found.value


def _param(decl: ast.ParamDecl, scale: int) -> Param:
    def opt(lit: ast.NumberLit | None) -> str | None:
        return None if lit is None else _value(lit, decl.type, scale)

    return Param(
        name=decl.name.name,
        type=decl.type,
        min=opt(decl.low),
        max=opt(decl.high),
        value=opt(decl.value),
        pattern=decl.pattern.value if decl.pattern else None,
        options=tuple(sorted(o.name for o in decl.options)),
        min_param=decl.low_ref.name if decl.low_ref else None,
        max_param=decl.high_ref.name if decl.high_ref else None,
    )


def _effect(decl: ast.EffectDecl, scale: int, amount: Expr | None) -> Effect:
    fields: dict[str, object] = {"name": decl.name.name}
    if amount is not None:
        fields["amount"] = amount
    scopes: list[str] = []
    egress: list[Egress] = []
    for efield in decl.fields:
        args = efield.args
        first = args[0] if args else None
        if efield.key == "scopes":
            scopes.extend(a.value for a in args if isinstance(a, ast.StringLit))
        elif efield.key == "egress":
            assert isinstance(args[0], ast.Ident)
            assert isinstance(args[1], ast.StringLit)
            egress.append(Egress(method=args[0].name, url=args[1].value))
        elif efield.key == "key":
            fields["key"] = tuple(sorted({a.name for a in args if isinstance(a, ast.Ident)}))
        elif efield.key in ("risk", "reversibility"):
            assert isinstance(first, ast.Ident)
            fields[efield.key] = first.name
        elif efield.key == "strategy":
            assert isinstance(first, ast.Ident)
            fields["strategy"] = Strategy(kind=first.name)
        elif efield.key == "compensate":
            assert isinstance(first, ast.Ident)
            fields["strategy"] = Strategy(kind="compensate", compensation=first.name)
        elif efield.key == "consequence":
            assert isinstance(first, ast.StringLit)
            fields["consequence"] = first.value
        elif efield.key in ("max_calls", "timeout", "ceiling"):
            assert isinstance(first, ast.NumberLit)
            kind = "money" if efield.key == "ceiling" else "int"
            text = _value(first, kind, scale)
            fields[efield.key] = text if kind == "money" else int(text)
    fields["scopes"] = tuple(sorted(set(scopes)))
    fields["egress"] = tuple(sorted(set(egress), key=lambda e: (e.method, e.url)))
    return Effect.model_validate(fields)


def _portion(portion: ast.Portion, ctx: CheckContext) -> Portion:
    scale = ctx.sym.scale
    # Where the part goes: an account, or (new in 1.1) a nested split.
    where: dict[str, Any] = (
        {"to": portion.target.name}
        if portion.block is None and portion.target is not None
        else {"split": tuple(_portion(p, ctx) for p in portion.block or ())}
    )
    if portion.share is None:
        return Portion(kind="remaining", **where)
    if isinstance(portion.share, ast.Ident):
        param = ctx.sym.params[portion.share.name]
        kind = "percent" if param.type == "percent" else "amount"
        return Portion(kind=kind, param=param.name.name, **where)
    found = classify(portion.share.text, scale)
    assert isinstance(found, Classified)
    if found.kind == "percent":
        return Portion(kind="percent", value=found.value, **where)
    return Portion(kind="amount", value=_value(portion.share, "money", scale), **where)


def _transition(decl: ast.TransitionDecl, ctx: CheckContext, spans: SourceMap) -> Transition:
    key = f"transition:{decl.name.name}"
    spans[key] = decl.span
    roles: list[str] = []
    stamps: set[str] = set()
    transfers: list[Transfer] = []
    calls: list[str | Call] = []
    approval: Approval | None = None
    for tfield in decl.fields:
        if isinstance(tfield, ast.ByField):
            roles.extend(r.name for r in tfield.roles)
        elif isinstance(tfield, ast.WhenField):
            spans[f"{key}/guard"] = tfield.span
        elif isinstance(tfield, ast.StampField):
            stamps.add(tfield.name.name)
        elif isinstance(tfield, ast.TransferField):
            amount = ctx.amounts[(decl.name.name, len(transfers))]
            assert amount is not None
            spans[f"{key}/transfer/{len(transfers)}"] = tfield.span
            transfers.append(
                Transfer(
                    amount=amount,
                    source=tfield.source.name,
                    destination=tfield.destination.name if tfield.destination else None,
                    portions=tuple(_portion(p, ctx) for p in tfield.portions),
                )
            )
        elif isinstance(tfield, ast.CallField):
            spans[f"{key}/call/{len(calls)}"] = tfield.span
            site_amount = ctx.call_amounts.get((decl.name.name, len(calls)))
            calls.append(
                tfield.effect.name if site_amount is None else Call(effect=tfield.effect.name, amount=site_amount)
            )
        elif isinstance(tfield, ast.ApprovalField):
            spans[f"{key}/approval"] = tfield.span
            approval = Approval(
                role=tfield.role.name,
                not_requester=tfield.not_requester,
                also=tuple(r.name for r in tfield.also) or None,
                count=int(tfield.count.text) if tfield.count is not None and tfield.count.text.isdigit() else None,
            )
    if decl.clause is not None:
        spans[f"{key}/clause"] = decl.clause.span
    return Transition(
        name=decl.name.name,
        clause=decl.clause.value if decl.clause else None,
        sources=tuple(sorted({s.name for s in decl.sources})),
        target=decl.target.name,
        roles=tuple(sorted(set(roles))),
        guard=ctx.guards.get(decl.name.name),
        stamps=tuple(sorted(stamps)),
        transfers=tuple(transfers),
        calls=tuple(calls),
        approval=approval,
    )


def normalize(ctx: CheckContext) -> tuple[Candidate, SourceMap]:
    """The canonical candidate of a policy that passed every blocker check."""
    sym = ctx.sym
    scale = sym.scale
    spans: SourceMap = {"header": sym.policy.header.span}
    currency = sym.currencies[0]
    spans["currency"] = currency.span
    for kind, table in (
        ("role", sym.roles),
        ("param", sym.params),
        ("account", sym.accounts),
        ("effect", sym.effects),
        ("state", sym.states),
        ("rule", sym.rules),
    ):
        for name, decl in table.items():
            spans[f"{kind}:{name}"] = decl.span
    budget: Budget | None = None
    if sym.budgets:
        spans["budget"] = sym.budgets[0].span
        items: dict[str, object] = {}
        for item in sym.budgets[0].items:
            kind = {"ceiling": "money", "max_active_time": "duration"}.get(item.key, "int")
            text = _value(item.value, kind, scale)
            items[item.key] = text if kind == "money" else int(text)
        # `budget { }` sets no limit: it means what no budget means.
        budget = Budget.model_validate(items) if items else None
    invariants: list[Invariant] = []
    for name, inv in sym.invariants.items():
        spans[f"invariant:{name}"] = inv.span
        expr: Expr | None = ctx.invariants.get(name)
        assert expr is not None
        invariants.append(Invariant(name=name, clause=inv.clause.value if inv.clause else None, expr=expr))
        if inv.clause is not None:
            spans[f"invariant:{name}/clause"] = inv.clause.span
    candidate = Candidate(
        pact=PactId(id=sym.policy.header.pact_id.value, version=sym.policy.header.version.value),
        currency=CurrencySpec(code=currency.code.name, scale=scale),
        roles=tuple(Role(name=n, trusted=not d.untrusted, clock=d.clock) for n, d in sorted(sym.roles.items())),
        params=tuple(_param(d, scale) for _, d in sorted(sym.params.items())),
        accounts=tuple(
            Account(name=n, address=d.address.value, external=d.external) for n, d in sorted(sym.accounts.items())
        ),
        budget=budget,
        rules=tuple(Rule(risk=r, decision=d.decision) for r, d in sorted(sym.rules.items())),
        effects=tuple(_effect(d, scale, ctx.effect_amounts.get(n)) for n, d in sorted(sym.effects.items())),
        states=tuple(
            State(
                name=n,
                initial=any(f.name == "initial" for f in d.flags),
                final=any(f.name == "final" for f in d.flags),
            )
            for n, d in sorted(sym.states.items())
        ),
        transitions=tuple(sorted((_transition(d, ctx, spans) for d in sym.transitions.values()), key=lambda t: t.name)),
        invariants=tuple(sorted(invariants, key=lambda i: i.name)),
        properties=_properties(ctx, spans),
        limits=_limits(ctx, spans),
    )
    return candidate, dict(sorted(spans.items()))


def _properties(ctx: CheckContext, spans: SourceMap) -> tuple[Property, ...] | None:
    """The liveness properties by name; None (omitted, the hash unchanged) when there are none."""
    out: list[Property] = []
    for name, decl in sorted(ctx.sym.properties.items()):
        spans[f"property:{name}"] = decl.span
        if decl.clause is not None:
            spans[f"property:{name}/clause"] = decl.clause.span
        clause = decl.clause.value if decl.clause else None
        premise, goal = ctx.properties.get(name, (None, None))
        if decl.premise is None:
            out.append(Property(name=name, clause=clause, kind="eventually_final"))
        else:
            assert premise is not None
            assert goal is not None
            out.append(Property(name=name, clause=clause, kind="leads_to", premise=premise, goal=goal))
    return tuple(out) or None


def _limits(ctx: CheckContext, spans: SourceMap) -> tuple[Limit, ...] | None:
    """The limits across agreements by name (new in 1.1); None (omitted, the hash unchanged) when none."""
    out: list[Limit] = []
    for name, decl in sorted(ctx.sym.limits.items()):
        spans[f"limit:{name}"] = decl.span
        window = classify(decl.window.text, ctx.sym.scale)
        assert isinstance(window, Classified)
        out.append(
            Limit(
                name=name,
                effect=decl.effect.name,
                max=_value(decl.amount, "money", ctx.sym.scale),
                window=int(window.value),
                per=decl.per_role.name if decl.per_role else None,
            )
        )
    return tuple(out) or None
