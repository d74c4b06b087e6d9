"""Effect outcomes in guards and invariants (new in 1.1): `acknowledged(E)`, `reconciled(E)`, `abandoned(E)`.

Each reads the latest call made at each `call E` of the policy (docs/language.md,
"Effect outcomes"), so it needs an effect that some transition calls. The
expression typer reports an argument that names another kind of thing
(PW162) and an outcome used as a number (PW164); this module reports an
outcome of an effect no transition calls (PW163), which could never hold.
"""

from __future__ import annotations

from collections.abc import Iterator

from pactwright.compiler import ast
from pactwright.compiler.checks._registry import CheckContext, check
from pactwright.compiler.expressions import OUTCOMES
from pactwright.diagnostics import Diagnostic


def _outcome_calls(expr: ast.Expr) -> Iterator[ast.CallExpr]:
    stack: list[ast.Expr] = [expr]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.CallExpr) and node.function in OUTCOMES:
            yield node
        elif isinstance(node, ast.UnaryExpr):
            stack.append(node.operand)
        elif isinstance(node, ast.BinaryExpr):
            stack.extend((node.right, node.left))


def _read(ctx: CheckContext) -> Iterator[ast.CallExpr]:
    for decl in ctx.sym.transitions.values():
        for tfield in decl.fields:
            if isinstance(tfield, ast.WhenField):
                yield from _outcome_calls(tfield.expr)
    for inv in ctx.sym.invariants.values():
        yield from _outcome_calls(inv.expr)


@check("PW162", "PW164")
def outcome_types(ctx: CheckContext) -> Iterator[Diagnostic]:
    yield from (d for d in ctx.typer.diagnostics if d.code in ("PW162", "PW164"))


@check("PW163")
def outcome_of_uncalled_effect(ctx: CheckContext) -> Iterator[Diagnostic]:
    called = {call.effect.name for _, _, call in ctx.calls()}
    for found in _read(ctx):
        name = found.arg.name
        if name in ctx.sym.effects and name not in called:
            compensates = any(
                f.key == "compensate" and any(a.name == name for a in f.args if isinstance(a, ast.Ident))
                for effect in ctx.sym.effects.values()
                for f in effect.fields
            )
            why = "it only compensates other calls" if compensates else "it is never called"
            yield ctx.error(
                "PW163",
                f"`{found.function}({name})` can never hold: no transition calls `{name}` ({why})",
                found.arg.span,
                f"outcomes read the calls of `call {name}` in a transition; add one, or read the effect it compensates",
            )
