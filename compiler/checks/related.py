"""Related amounts (new in 1.1): bounds that name another money param.

`param partial: money between 0.00 and price` is checked here: the name must
be a declared money param other than the param itself, the relations may not
form a cycle, only money params may have them, and together with the
literal bounds they must leave every param at least one value.
"""

from __future__ import annotations

from collections.abc import Iterator

from pactwright.compiler import ast
from pactwright.compiler.checks._registry import CheckContext, check
from pactwright.compiler.literals import money_value
from pactwright.compiler.related import Bounds, cycle, hull
from pactwright.diagnostics import Diagnostic
from pactwright.money import format_money


def _refs(param: ast.ParamDecl) -> Iterator[ast.Ident]:
    for ref in (param.low_ref, param.high_ref):
        if ref is not None:
            yield ref


@check("PW166", "PW167", "PW168", "PW169")
def related_bound_names(ctx: CheckContext) -> Iterator[Diagnostic]:
    params = ctx.sym.params
    for param in params.values():
        name = param.name.name
        for ref in _refs(param):
            other = params.get(ref.name)
            if param.type != "money":
                yield ctx.error(
                    "PW168",
                    f"param `{name}` is {param.type}, and only a money param may have a bound named by another param",
                    ref.span,
                    f"write a literal bound, such as `{'10%' if param.type == 'percent' else '1.00'}`",
                )
            elif ref.name == name:
                yield ctx.error(
                    "PW169", f"param `{name}` is bounded by itself", ref.span, "write a literal or another param's name"
                )
            elif other is None:
                yield ctx.error(
                    "PW166",
                    f"bound of param `{name}` names `{ref.name}`, which is not a declared param",
                    ref.span,
                    f"declare `param {ref.name}: money ...` or write a money literal",
                )
            elif other.type != "money":
                yield ctx.error(
                    "PW167",
                    f"bound of money param `{name}` names `{ref.name}`, which is {other.type}, not money",
                    ref.span,
                    "a bound names a money param, or is a money literal",
                )
    graph = _graph(ctx)
    if graph is None:
        return
    found = cycle({n: b for n, b in graph.items() if n not in (b.low_ref, b.high_ref)})
    if found is not None:
        # The relation found[0] <= found[1] is written in one of the two declarations.
        small, big = params[found[0]], params[found[1]]
        written = small.high_ref if small.high_ref is not None and small.high_ref.name == big.name.name else big.low_ref
        assert written is not None
        yield ctx.error(
            "PW169",
            f"bounds of params {', '.join(f'`{n}`' for n in found[:-1])} refer to each other in a cycle: "
            + " <= ".join(found),
            written.span,
            "bound one of them by literals only",
        )


def _graph(ctx: CheckContext) -> dict[str, Bounds] | None:
    """The money params' bounds in minor units, or None while a literal is malformed (reported elsewhere)."""
    scale = ctx.sym.scale
    out: dict[str, Bounds] = {}
    for name, param in ctx.sym.params.items():
        if param.type != "money":
            continue
        values: list[int | None] = []
        for lit in (param.low, param.high, param.value):
            amount = None if lit is None else money_value(lit.text, scale)
            if amount is not None and not isinstance(amount, int):
                return None
            values.append(amount)
        low, high, value = values
        refs = [r.name if r is not None and r.name in ctx.sym.params else None for r in (param.low_ref, param.high_ref)]
        if value is not None:
            low = high = value
        out[name] = Bounds(low=low, high=high, low_ref=refs[0], high_ref=refs[1])
    return out


@check("PW170")
def related_bounds_leave_a_value(ctx: CheckContext) -> Iterator[Diagnostic]:
    graph = _graph(ctx)
    if graph is None or not any(b.low_ref or b.high_ref for b in graph.values()):
        return
    if any(n in (b.low_ref, b.high_ref) for n, b in graph.items()) or cycle(graph) is not None:
        return  # PW169
    scale = ctx.sym.scale
    for name, (low, high) in hull(graph).items():
        bounds = graph[name]
        if (bounds.low_ref or bounds.high_ref) and low is not None and high is not None and low > high:
            yield ctx.error(
                "PW170",
                f"param `{name}` can take no value: its bounds and the params they name need it to be at least "
                f"{format_money(low, scale)} and at most {format_money(high, scale)}",
                ctx.sym.params[name].name.span,
                "lower its lower bound or raise the upper bound of the param it names",
            )
