"""Limits across agreements (new in 1.1): `limit NAME: total(EFFECT) <= MONEY per DURATION [per ROLE]`.

The limit sums the money EFFECT's calls carry (each call's declared amount)
over every agreement of the pact in a window of DURATION, or per party
holding ROLE. Its effect must exist (PW182) and carry money (PW183); the
comparison is `<=` a money literal (PW184); the window a positive duration
(PW185); the role a declared party role, not the clock (PW186).
"""

from __future__ import annotations

from collections.abc import Iterator

from pactwright.compiler.checks._registry import CheckContext, check
from pactwright.compiler.literals import Classified, LiteralProblem, classify, money_value
from pactwright.diagnostics import Diagnostic

_MAX_WINDOW_S = 2**53 - 1  # carried as a JSON integer


def carries_money(ctx: CheckContext, effect: str) -> bool:
    """Whether some call of `effect` carries a declared amount."""
    if ctx.effect_amounts.get(effect) is not None:
        return True
    return any(
        call.effect.name == effect and ctx.call_amounts.get((decl.name.name, index)) is not None
        for decl, index, call in ctx.calls()
    )


@check("PW182", "PW183", "PW184", "PW185", "PW186")
def limits(ctx: CheckContext) -> Iterator[Diagnostic]:
    scale = ctx.sym.scale
    for name, decl in ctx.sym.limits.items():
        effect = decl.effect.name
        if effect not in ctx.sym.effects:
            yield ctx.error(
                "PW182",
                f"limit `{name}` names unknown effect `{effect}`",
                decl.effect.span,
                f"declare `effect {effect} {{ ... }}` or fix the name",
            )
        elif not carries_money(ctx, effect):
            yield ctx.error(
                "PW183",
                f"limit `{name}` sums the money `{effect}` carries, but its calls carry none",
                decl.effect.span,
                f"give the effect an `amount EXPR`, or `call {effect} amount EXPR`",
            )
        amount = money_value(decl.amount.text, scale)
        kind = classify(decl.amount.text, scale)
        if decl.op != "<=":
            yield ctx.error(
                "PW184",
                f"limit `{name}` must read `total({effect}) <= AMOUNT`, not `{decl.op}`",
                decl.op_span,
                "a limit is an upper bound: write `<=`",
            )
        elif isinstance(amount, LiteralProblem) or (isinstance(kind, Classified) and kind.kind not in ("money", "int")):
            yield ctx.error(
                "PW184",
                f"limit `{name}` must read `total({effect}) <= AMOUNT` with a money amount, not `{decl.amount.text}`",
                decl.amount.span,
                "write the amount at the currency's scale, e.g. `500.00`",
            )
        window = classify(decl.window.text, scale)
        if (
            not isinstance(window, Classified)
            or window.kind != "duration"
            or not 0 < int(window.value) <= _MAX_WINDOW_S
        ):
            yield ctx.error(
                "PW185",
                f"limit `{name}` has window `{decl.window.text}`; a window is a positive duration such as `1d`",
                decl.window.span,
                "write the window as a duration, e.g. `per 1d`",
            )
        role = decl.per_role
        if role is not None:
            found = ctx.sym.roles.get(role.name)
            if found is None or found.clock:
                what = "the clock role" if found is not None else "not a declared role"
                yield ctx.error(
                    "PW186",
                    f"limit `{name}` is counted per `{role.name}`, which is {what}",
                    role.span,
                    "name a declared party role, e.g. `per refund_approver`, or drop `per ROLE`",
                )
