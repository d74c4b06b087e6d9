"""The state machine: one initial state, reachable states, no dead ends."""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator

from pactwright.compiler.checks._registry import CheckContext, check
from pactwright.diagnostics import Diagnostic, Span


def _flag(decl_flags: tuple[object, ...], flag: str) -> bool:
    return any(getattr(f, "name", None) == flag for f in decl_flags)


@check("PW122", "PW123", "PW124")
def initial_and_final_states(ctx: CheckContext) -> Iterator[Diagnostic]:
    states = ctx.sym.states
    initial = [s for s in states.values() if _flag(s.flags, "initial")]
    header = ctx.sym.policy.header.span
    if not initial:
        yield ctx.error("PW122", "no initial state", header, "mark exactly one state `initial`: `state draft initial`")
    for extra in initial[1:]:
        yield ctx.error(
            "PW123",
            f"state `{extra.name.name}` is a second initial state (first: `{initial[0].name.name}`)",
            extra.name.span,
            "exactly one state may be `initial`",
        )
    if states and not any(_flag(s.flags, "final") for s in states.values()):
        yield ctx.error("PW124", "no final state", header, "mark at least one state `final`")
    for state in states.values():
        seen: set[str] = set()
        for flag in state.flags:
            if flag.name in seen:
                yield ctx.error("PW121", f"state `{state.name.name}` repeats `{flag.name}`", flag.span, "say it once")
            seen.add(flag.name)


@check("PW125")
def unreachable_states(ctx: CheckContext) -> Iterator[Diagnostic]:
    states = ctx.sym.states
    starts = [name for name, s in states.items() if _flag(s.flags, "initial")]
    if len(starts) != 1:
        return
    edges: dict[str, set[str]] = {}
    for decl in ctx.sym.transitions.values():
        for source in decl.sources:
            edges.setdefault(source.name, set()).add(decl.target.name)
    seen = {starts[0]}
    queue = deque(starts)
    while queue:
        for nxt in sorted(edges.get(queue.popleft(), ())):
            if nxt not in seen:
                seen.add(nxt)
                queue.append(nxt)
    for name, state in states.items():
        if name not in seen:
            yield ctx.error(
                "PW125",
                f"state `{name}` is unreachable from the initial state `{starts[0]}`",
                state.name.span,
                "add a transition into it, or remove it",
            )


@check("PW126", "PW127")
def final_and_deadlocked_states(ctx: CheckContext) -> Iterator[Diagnostic]:
    outgoing: dict[str, list[tuple[Span, str]]] = {}
    exits: set[str] = set()  # states with a transition to another state (a self-loop is no way out)
    for decl in ctx.sym.transitions.values():
        for source in decl.sources:
            outgoing.setdefault(source.name, []).append((source.span, decl.name.name))
            if source.name != decl.target.name:
                exits.add(source.name)
    for name, state in ctx.sym.states.items():
        final = _flag(state.flags, "final")
        if final and name in outgoing:
            span, user = outgoing[name][0]
            yield ctx.error(
                "PW126",
                f"final state `{name}` has outgoing transition `{user}`",
                span,
                f"remove `final` from `{name}`, or move `{user}` to start elsewhere",
                label="a final state ends the agreement",
            )
        if not final and name not in exits:
            yield ctx.error(
                "PW127",
                f"state `{name}` is not final and has no way out (deadlock)",
                state.name.span,
                f"declare `state {name} final`, or add a transition out of it",
            )
