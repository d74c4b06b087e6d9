"""Liveness properties (new in 1.1): `property NAME: P leads_to Q` and `eventually final`.

P and Q are true/false expressions over one agreement, typed like
invariants (unknown names PW120, types PW137). The verifier checks them on
the explored graph, state by state, so they may not read time (PW171): a
property about a deadline is stated over what the deadline makes happen
(`reached(expired)`), not over `now` or a stamp.
"""

from __future__ import annotations

from collections.abc import Iterator

from pactwright.candidate import Expr
from pactwright.compiler.checks._registry import CheckContext, check
from pactwright.diagnostics import Diagnostic


def _reads_time(expr: Expr) -> str | None:
    """`now` or the stamp `expr` reads, if any."""
    if expr.op == "now":
        return "now"
    if expr.op == "stamp":
        return expr.name
    for arg in expr.args:
        found = _reads_time(arg)
        if found is not None:
            return found
    return None


@check("PW120", "PW137", "PW171", "PW172")
def liveness_properties(ctx: CheckContext) -> Iterator[Diagnostic]:
    has_final = any(any(f.name == "final" for f in d.flags) for d in ctx.sym.states.values())
    for name, decl in ctx.sym.properties.items():
        if decl.premise is None or decl.goal is None:
            ctx.properties[name] = (None, None)
            if not has_final:
                yield ctx.error(
                    "PW172",
                    f"property `{name}` asks for a final state, but no state is `final`",
                    decl.span,
                    "mark the states where an agreement is done with `final`",
                )
            continue
        before = len(ctx.typer.diagnostics)
        typed = (ctx.typer.lower(decl.premise, "bool"), ctx.typer.lower(decl.goal, "bool"))
        yield from ctx.typer.diagnostics[before:]
        ctx.properties[name] = typed
        for source, lowered in zip((decl.premise, decl.goal), typed, strict=True):
            if lowered is None:
                continue
            read = _reads_time(lowered)
            if read is not None:
                yield ctx.error(
                    "PW171",
                    f"property `{name}` reads `{read}`; a property may not read time",
                    source.span,
                    "state what the deadline makes happen instead, e.g. `reached(expired)`",
                )
