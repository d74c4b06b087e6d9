"""Where a fair run may stop for good: stuttering ends, read cell by cell of the agreements' zones.

A node's agreements each hold a zone: the set of stamp ages their path
allows. A run stops for good at a point of those zones when, from there on,
time passes and no fair action is ever taken. Time passing is fair and runs
are non-Zeno (time grows without bound), so while an agreement's zone is
not closed under time passing its clock move is enabled, and its future
points lie in the node the clock move leads to. In a zone closed under time
passing, every point's ages eventually pass every constant a guard compares
them with: the run's tail lies in an *eventual cell* (every age in its last
interval; differences of stamps keep their value). A fair action enabled
there stays enabled, so weak fairness takes it; one enabled only in an
earlier cell (a window such as `now < funded_at + 1d`) may be gone for good
when a person acted late. So an agreement can stop for good exactly where
some eventual cell of its zone has no fair action enabled, for the param
values where none is: a fair move whose target keeps the path condition is
enabled for every value, one that refines it only where the target's
condition holds.
"""

from __future__ import annotations

from typing import Any

from pactwright.expr_text import render_expr
from pactwright.verifier._liveness_graph import BlockMove, Graph, Node
from pactwright.verifier.explorer import Explorer
from pactwright.verifier.model import Json
from pactwright.verifier.symbolic import Formula
from pactwright.verifier.zones import Dim


def end_condition(graph: Graph, node: Node, cache: dict[int, Formula]) -> Formula:
    """Where (for which param values) the run may stop for good at `node`: every agreement may."""
    condition: Formula = True
    for bid in sorted(set(graph.result.states[node[0]][1:])):
        if bid not in cache:
            cache[bid] = _block_stops(graph, bid)[0]
        condition = graph.explorer.space.conj(condition, cache[bid])
        if condition is False:
            return False
    return condition


def _block_stops(graph: Graph, bid: int) -> tuple[Formula, tuple[int, ...] | None]:
    """(where this agreement may stop for good, the key of the first eventual cell where it may)."""
    explorer = graph.explorer
    space = explorer.space
    block = explorer._blocks[bid]
    pc = int(block[2])
    everywhere: Formula = False  # where some fair move that does not read time is enabled
    timed: list[BlockMove] = []
    for move in graph.moves(bid):
        if move.action is None:
            continue
        if move.cell is not None:
            timed.append(move)
            continue
        target = int(explorer._blocks[move.new][2])
        if target == pc:
            return False, None
        everywhere = space.disj(everywhere, explorer._pc_formula(target))
    if not timed:
        return space.negate(everywhere), None
    dims, positions = _dims(explorer, timed)
    stops: Formula = False
    first: tuple[int, ...] | None = None
    for key, _ in explorer.zones.cells(explorer.zone(block), dims):
        if not _eventual(dims, key):
            continue
        enabled = everywhere
        for move in timed:
            if tuple(key[i] for i in positions[move.index]) != move.cell:
                continue
            target = int(explorer._blocks[move.new][2])
            enabled = True if target == pc else space.disj(enabled, explorer._pc_formula(target))
            if enabled is True:
                break
        here = space.negate(enabled)
        if here is not False and first is None:
            first = key
        stops = space.disj(stops, here)
    return stops, first


def _dims(explorer: Explorer, timed: list[BlockMove]) -> tuple[tuple[Dim, ...], dict[int, tuple[int, ...]]]:
    """The time dimensions the timed moves' guards read, and per move where its own lie among them."""
    dims: list[Dim] = []
    positions: dict[int, tuple[int, ...]] = {}
    for move in timed:
        assert move.transition is not None
        own = explorer.guard_dims[explorer.model.transition_index[move.transition]]
        for dim in own:
            if dim not in dims:
                dims.append(dim)
        positions[move.index] = tuple(dims.index(dim) for dim in own)
    return tuple(dims), positions


def _eventual(dims: tuple[Dim, ...], key: tuple[int, ...]) -> bool:
    """Whether a cell is one time never leaves: every age read is in its last interval (or never set)."""
    return all(
        dim.kind != "age" or position < 0 or position == len(dim.intervals()) - 1
        for dim, position in zip(dims, key, strict=True)
    )


def late_stop(graph: Graph, sid: int) -> str | None:
    """Why a stuttering end is one although a deadline transition is enabled somewhere in its zone:
    the transitions whose guard time keeps false from there on (their window closed before)."""
    explorer = graph.explorer
    ids = graph.result.states[sid][1:]
    out: list[str] = []
    for position, bid in enumerate(ids):
        key = _block_stops(graph, bid)[1]
        if key is None:
            continue
        timed = [m for m in graph.moves(bid) if m.action is not None and m.cell is not None]
        _, positions = _dims(explorer, timed)
        enabled = {m.transition for m in timed if tuple(key[i] for i in positions[m.index]) == m.cell}
        closed = sorted({str(m.transition) for m in timed if m.transition not in enabled})
        if not closed:  # no window closed here: the stop is a refusal at commit (the lasso's `refused` says)
            continue
        shown = ", ".join(f"`{t}` (`{render_guard(explorer, t)}`)" for t in closed)
        text = f"time keeps the guard of {shown} false: never enabled again"
        out.append(f"agreement {position + 1}: {text}" if len(ids) > 1 else text)
    return "; ".join(out) or None


def incomplete_because(graph: Graph, prop: Json, sub: Any) -> str | None:
    """Why a search that found no counterexample may still miss one (None: nothing known).

    The ends above are exact for a graph without cycles; a cycle through
    states where a deadline transition is enabled only in part of the zone
    is judged per node, not per cell, by the fair-cycle check, so it is not
    decided. A property that reads `now` is labelled at one point of each
    zone.
    """
    if any(_reads_now(prop.get(part)) for part in ("premise", "goal")):
        return "the property reads `now`, which the search labels at one point of each time zone"
    import networkx as nx  # type: ignore[import-untyped]  # no stubs; used for graph facts only

    for component in nx.strongly_connected_components(sub):
        cyclic = len(component) > 1 or any(sub.has_edge(n, n) for n in component)
        blocks = {b for n in component for b in graph.result.states[n[0]][1:]}
        if cyclic and any(m.cell is not None and m.action for b in blocks for m in graph.moves(b)):
            return (
                "a cycle of the graph passes states where a deadline transition is enabled only in part of the "
                "time zone, which the fair-cycle check does not split"
            )
    return None


def render_guard(explorer: Explorer, transition: str) -> str:
    """A transition's guard as the policy writes it."""
    guard = explorer.model.transitions[explorer.model.transition_index[transition]]["guard"]
    return render_expr(guard, explorer.model.scale) if guard is not None else "true"


def _reads_now(expr: Any) -> bool:
    if not isinstance(expr, dict):
        return False
    return expr.get("op") == "now" or any(_reads_now(a) for a in expr.get("args", []))
