"""Liveness properties on the explored graph: `P leads_to Q` and `eventually final`.

The graph is the one the explorer already enumerated, less the commands the
runtime refuses on an effect's unknown outcome (`_liveness_graph.py`), never
a second exploration. A node is a state together with the agreement the
property follows. A run is fair when every fair action
(`Explorer.fair_action`: time passing, the scheduler, the worker, the
runtime's strategy) that stays enabled is eventually taken; humans are not
assumed to act, so a run may stop for good where no fair action is enabled
any more (a stuttering end, judged cell by cell of the agreements' time
zones: `_liveness_ends.py`).

`P leads_to Q` fails when some reachable state where P holds and Q does not
leads, through states where Q does not hold, to a fair end: a stuttering end,
or a strongly connected component (networkx) in which every fair action
enabled in all of its states has an edge inside it. The counterexample is a
lasso: a prefix to the state where P holds, the path on to the loop, and the
loop (a stuttering end loops on itself), with the fewest lazy clock moves and
then the shortest prefix. When the search hit a bound, or the model does not
follow the runtime exactly (`_liveness_ends.incomplete_because`), a property
with no counterexample is `incomplete`, never holds."""

from __future__ import annotations

from collections import deque
from typing import Any

import networkx as nx  # type: ignore[import-untyped]  # no stubs; used for graph facts only

from pactwright.expr_text import render_expr
from pactwright.verifier._liveness_ends import end_condition, incomplete_because, late_stop
from pactwright.verifier._liveness_graph import Edge, Graph, Node
from pactwright.verifier.explorer import ExplorationResult, Explorer, Move, Refusal
from pactwright.verifier.model import Json
from pactwright.verifier.symbolic import Formula

FAIRNESS = (
    "weak fairness for time passing, the scheduler (transitions a clock role may invoke), the worker "
    "(a prepared call is attempted, a compensation runs) and the runtime's strategy; humans, approvals "
    "and operators are not assumed to act"
)


class _Labels:
    """P and Q per block: True, False, or a formula over the ranged params."""

    def __init__(self, explorer: Explorer, result: ExplorationResult, prop: Json) -> None:
        self.explorer = explorer
        self.states = result.states
        self.eventually_final = prop["kind"] == "eventually_final"
        compiler = explorer.compiler
        self.premise = None if self.eventually_final else compiler.function(prop["premise"])
        self.goal = None if self.eventually_final else compiler.function(prop["goal"])
        self._p: dict[int, Formula] = {}
        self._q: dict[int, Formula] = {}

    def _value(self, fn: Any, bid: int) -> Formula:
        block = self.explorer._blocks[bid]
        value = fn(self.explorer.view(block))
        if isinstance(value, tuple):
            return value
        return bool(value)

    def premise_of(self, bid: int) -> Formula:
        if bid not in self._p:
            self._p[bid] = True if self.premise is None else self._value(self.premise, bid)
        return self._p[bid]

    def goal_of(self, bid: int) -> Formula:
        if bid not in self._q:
            if self.goal is None:
                self._q[bid] = self.explorer.final[self.explorer._blocks[bid][0]]
            else:
                self._q[bid] = self._value(self.goal, bid)
        return self._q[bid]


def check(explorer: Explorer, result: ExplorationResult) -> list[Json]:
    """One entry per property of the model: verdict `holds`, `violated` or `incomplete`."""
    if not explorer.model.properties:
        return []
    graph = Graph(explorer, result)
    return [_check_one(explorer, result, graph, prop) for prop in explorer.model.properties]


def _statement(prop: Json, scale: int) -> str:
    if prop["kind"] == "eventually_final":
        return "eventually final"
    return f"{render_expr(prop['premise'], scale)} leads_to {render_expr(prop['goal'], scale)}"


def _check_one(explorer: Explorer, result: ExplorationResult, graph: Graph, prop: Json) -> Json:
    space = explorer.space
    blocks = explorer._blocks
    labels = _Labels(explorer, result, prop)

    def pc_of(node: Node) -> int:
        return int(blocks[node[1]][2])

    def possible(formula: Formula, node: Node) -> bool:
        if formula is True or formula is False:
            return bool(formula)
        return space.satisfiable(pc_of(node), formula)[0] is not False

    # Q may fail at a node unless it holds for every value of the node's path condition.
    avoid = {n for n in graph.nodes() if possible(space.negate(labels.goal_of(n[1])), n)}
    ends: dict[Node, Formula] = {}
    stops: dict[int, Formula] = {}
    for node in avoid & graph.expanded:
        condition = end_condition(graph, node, stops)
        if condition is not False:
            ends[node] = condition
    sub = nx.DiGraph()
    sub.add_nodes_from(avoid)
    sub.add_edges_from((n, e.target) for n in avoid for e in graph.edges[n] if e.target in avoid)
    loops: dict[Node, frozenset[Node]] = {}
    for component in nx.strongly_connected_components(sub):
        if len(component) < 2 and not any(sub.has_edge(n, n) for n in component):
            continue
        members = frozenset(component)
        if members <= graph.expanded and _fair_component(graph, members):
            for node in members:
                loops[node] = members
    targets = set(ends) | set(loops)
    # The nodes that lead to a fair end avoiding Q, with the least cost of getting there. Triggers go by the
    # fewest lazy clock moves of their whole lasso, then by the shortest prefix (in the order found).
    to_end = graph.to_targets(targets, avoid)
    triggers = sorted(
        (n for n in to_end if possible(labels.premise_of(n[1]), n)),
        key=lambda n: (graph.cost[n][0] + to_end[n][0], graph.cost[n], n),
    )
    entry: Json = {
        "name": prop["name"],
        "clause": prop["clause"],
        "kind": prop["kind"],
        "statement": _statement(prop, explorer.model.scale),
        "fairness": FAIRNESS,
    }
    undecided = 0  # candidate lassos the solver answered `unknown` for (the others it refuted)
    for trigger in triggers:
        lasso = _lasso(graph, sub, trigger, targets, loops)
        condition = _lasso_condition(explorer, labels, trigger, lasso, ends)
        if condition is True:
            witness = None
        else:
            sat, witness = space.satisfiable(0, condition)
            if sat is not True:
                undecided += sat is None
                continue
        entry["verdict"] = "violated"
        entry["method"] = "fair cycle search on the explored graph"
        entry["lasso"] = _describe(explorer, result, graph, trigger, lasso, ends)
        if witness:
            entry["lasso"]["params"] = witness
        return entry
    if not result.exhausted or result.unknown_queries or (triggers and explorer.symbolic):
        reason = (
            f"the search stopped at the `{result.bound_hit}` bound; a fair run that never reaches the goal may "
            "lie beyond it"
            if not result.exhausted
            else "some candidate runs depend on param values the solver did not decide"
            if undecided or result.unknown_queries
            else "the one candidate run tried per trigger holds for no param value, and other runs through the "
            "same states were not tried"
        )
        entry["verdict"] = "incomplete"
        entry["method"] = f"fair cycle search on the explored graph: {reason}"
    elif (unmodelled := incomplete_because(graph, prop, sub)) is not None:
        entry["verdict"] = "incomplete"
        entry["method"] = f"fair cycle search on the explored graph, state space exhausted, but {unmodelled}"
    else:
        entry["verdict"] = "holds"
        entry["method"] = "fair cycle search on the explored graph, state space exhausted"
    entry["lasso"] = None
    return entry


def _fair_component(graph: Graph, members: frozenset[Node]) -> bool:
    """Whether a run can stay in `members` forever and be fair: every fair action
    enabled in all of its states has an edge inside it."""
    enabled_everywhere: set[str] | None = None
    inside: set[str] = set()
    for node in members:
        here = {e.action for e in graph.edges[node] if e.action is not None}
        enabled_everywhere = here if enabled_everywhere is None else enabled_everywhere & here
        inside.update(e.action for e in graph.edges[node] if e.action is not None and e.target in members)
    return not ((enabled_everywhere or set()) - inside)


def _lasso(
    graph: Graph,
    sub: Any,
    trigger: Node,
    targets: set[Node],
    loops: dict[Node, frozenset[Node]],
) -> list[tuple[Node, Edge | None]]:
    """From `trigger`, the least-cost path (avoiding Q) to a fair end, then the loop:
    (node, edge taken from it or None) in order, the loop starting at the last node."""
    cost, parent = graph.shortest([trigger], lambda n: n in sub, stop=lambda n: n in targets)
    end = min((n for n in cost if n in targets), key=lambda n: (cost[n], n))
    path: list[tuple[Node, Edge | None]] = list(graph.path_to(end, parent))
    if end in loops:
        path.extend(_cycle(graph, end, loops[end]))
    path.append((end, None))
    return path


def _cycle(graph: Graph, start: Node, members: frozenset[Node]) -> list[tuple[Node, Edge]]:
    """A cycle from `start` back to it inside `members` (shortest, by breadth-first search)."""
    parent: dict[Node, tuple[Node, Edge]] = {}
    todo = deque([start])
    seen = {start}
    while todo:
        node = todo.popleft()
        for edge in graph.edges[node]:
            if edge.target not in members:
                continue
            if edge.target == start:
                out = [(node, edge)]
                while node != start:
                    node, taken = parent[node]
                    out.append((node, taken))
                return out[::-1]
            if edge.target not in seen:
                seen.add(edge.target)
                parent[edge.target] = (node, edge)
                todo.append(edge.target)
    return []


def _lasso_condition(
    explorer: Explorer,
    labels: _Labels,
    trigger: Node,
    lasso: list[tuple[Node, Edge | None]],
    ends: dict[Node, Formula],
) -> Formula:
    """For which param values the lasso is a run that violates the property (True: all)."""
    space = explorer.space
    blocks = explorer._blocks
    last = lasso[-1][0]
    formula: Formula = True
    for bid in labels.states[last[0]][1:]:
        formula = space.conj(formula, explorer._pc_formula(int(blocks[bid][2])))
    formula = space.conj(formula, labels.premise_of(trigger[1]))
    for node, _ in lasso:
        formula = space.conj(formula, space.negate(labels.goal_of(node[1])))
    if last in ends:
        formula = space.conj(formula, ends[last])
    return formula


def _describe(
    explorer: Explorer,
    result: ExplorationResult,
    graph: Graph,
    trigger: Node,
    lasso: list[tuple[Node, Edge | None]],
    ends: dict[Node, Formula],
) -> Json:
    """The lasso as the report prints it: prefix events, then the loop ("back to state N")."""
    events: list[Json] = []
    for before, taken in graph.path_to(trigger):
        events.append(_event(explorer, result, before[0], _move_of(explorer, result, before[0], taken), taken.state))
    premise_at = len(events)
    last = lasso[-1][0]
    back_to: int | None = None
    for node, edge in lasso:
        if node == last and back_to is None:
            back_to = len(events)
        if edge is not None:
            events.append(_event(explorer, result, node[0], _move_of(explorer, result, node[0], edge), edge.state))
    stuttering = last in ends
    return {
        "events": events,
        "premise_at": premise_at,
        "back_to": back_to,
        "stuttering": stuttering,
        "last_state": _state_text(explorer, result, last[0]),
        "waiting_for": _human_moves(explorer, graph, last[0]) if stuttering else [],
        # When a deadline transition is enabled only earlier in the time zone: when the run stops.
        "late": late_stop(graph, last[0]) if stuttering else None,
        # Deadline transitions the runtime refuses there: at commit (funds, a ceiling), or for an effect's
        # unknown outcome (PW526, PW527).
        "refused": _refused(explorer, graph, last[0]) if stuttering else [],
    }


def _refused(explorer: Explorer, graph: Graph, sid: int) -> list[str]:
    """The deadline transitions enabled at a stuttering end that the runtime does not let commit, and why.

    A specific reason (a refusal at commit for funds, a ceiling or a budget; an effect's unknown
    outcome) is given where the explorer has one; otherwise, for a transition that commits only for
    other param values than the lasso's, the general one.
    """
    found: dict[str, set[str]] = {}
    general: set[str] = set()
    explorer.recording = {}  # filled by the moves below: the enabled commands that made no move, and why
    try:
        for bid in graph.result.states[sid][1:]:
            block = explorer._blocks[bid]
            moves = explorer.local_moves(block)
            for (at, t), why in explorer.recording.items():
                tid = explorer.model.transitions[t]["id"]
                if at == block and tid in explorer.scheduled:
                    found.setdefault(tid, set()).add(f"`{tid}` by {explorer.first_role[t]}: refused at commit ({why})")
            for move, new, _, edge in moves:
                if move.kind not in ("command", "refused") or move.name not in explorer.scheduled:
                    continue
                if new is None and isinstance(edge, Refusal):  # enabled, and refused at commit: funds
                    found.setdefault(move.name, set()).add(f"`{move.name}` by {move.actor}: refused at commit "
                                                           f"({edge.message})")  # fmt: skip
                    continue
                if new is None:
                    continue
                if int(new[2]) != int(block[2]):  # it commits only for some param values: not for the lasso's
                    general.add(move.name)
                    continue
                refusal = explorer.outcome_refusal(block, explorer.model.transition_index[move.name])
                if refusal is not None:
                    code, effect = refusal
                    why = "a call of it was abandoned" if code == "PW526" else "a call of it is parked"
                    found.setdefault(move.name, set()).add(f"`{move.name}` by {move.actor}: {code}, it depends on "
                                                           f"`{effect}` and {why}")  # fmt: skip
    finally:
        explorer.recording = None
    out = {line for lines in found.values() for line in lines}
    for tid in general - set(found):
        actor = explorer.first_role[explorer.model.transition_index[tid]]
        out.add(f"`{tid}` by {actor}: does not commit for these param values (its guard is false for them, or "
                "the runtime refuses it at commit: funds, a ceiling, a budget)")  # fmt: skip
    return sorted(out)


def _move_of(explorer: Explorer, result: ExplorationResult, sid: int, edge: Edge) -> Move:
    bid = result.states[sid][1:][edge.position]
    move, _, _, _ = explorer.local_moves(explorer._blocks[bid])[edge.move]
    return Move(move.kind, edge.position, move.actor, move.name, move.fault, move.site, move.delta, move.cell)


def _state_text(explorer: Explorer, result: ExplorationResult, sid: int) -> str:
    return ", ".join(explorer.model.states[explorer._blocks[b][0]] for b in result.states[sid][1:])


def _event(explorer: Explorer, result: ExplorationResult, before: int, move: Move, after: int) -> Json:
    if move.kind == "command":
        what = move.name
    elif move.kind == "clock":
        what = "time passes"
    elif move.kind == "fault":
        what = f"fault {move.fault} {move.name}"
    else:
        what = f"{move.kind} {move.name}"
    return {
        "actor": move.actor,
        "move": what,
        "agreement": move.agreement + 1,
        "from": _state_text(explorer, result, before),
        "to": _state_text(explorer, result, after),
    }


def _human_moves(explorer: Explorer, graph: Graph, sid: int) -> list[str]:
    """What only a human could still do at a stuttering end (no fair move is enabled): the moves the
    runtime would take, so not a command it refuses on an unknown effect outcome."""
    out: set[str] = set()
    for bid in graph.result.states[sid][1:]:
        local = explorer.local_moves(explorer._blocks[bid])
        for taken in graph.moves(bid):
            if taken.action is None:
                move = local[taken.index][0]
                what = move.name if move.kind == "command" else f"{move.kind} {move.name}"
                out.add(f"{what} by {move.actor}")
    return sorted(out)
