"""Liveness properties on the explored graph: `P leads_to Q` and `eventually final`.

The graph is the one the explorer already enumerated (its states, and the
per-agreement moves it cached), never a second exploration. A node is a
state together with the agreement the property follows (agreements are
symmetric, so one agreement per distinct block is followed). A run is fair
when every fair action (`Explorer.fair_action`: time passing, the
scheduler, the worker, the runtime's strategy) that stays enabled is
eventually taken; humans are not assumed to act, so a run may stop for good
in a state where no fair action is enabled (a stuttering end).

`P leads_to Q` fails when some reachable state where P holds and Q does not
leads, through states where Q does not hold, to a fair end: a stuttering end,
or a strongly connected component (networkx) in which every fair action
enabled in all of its states has an edge inside it. The counterexample is a
lasso: the shortest prefix to the state where P holds, the path on to the
loop, and the loop (a stuttering end loops on itself). When the search hit a
bound, a property with no counterexample is `incomplete`, never holds.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import pairwise
from typing import Any

import networkx as nx  # type: ignore[import-untyped]  # no stubs; used for graph facts only

from pactwright.expr_text import render_expr
from pactwright.verifier.explorer import ExplorationResult, Explorer, Move
from pactwright.verifier.model import Json
from pactwright.verifier.symbolic import Formula

Node = tuple[int, int]  # (state id, block id of the agreement followed)

FAIRNESS = (
    "weak fairness for time passing, the scheduler (transitions a clock role may invoke), the worker "
    "(a prepared call is attempted, a compensation runs) and the runtime's strategy; humans, approvals "
    "and operators are not assumed to act"
)


@dataclass
class _Edge:
    target: Node
    action: str | None  # the fair action, or None
    state: int  # the target state id
    position: int  # the agreement (position in the source state) that moved
    move: int  # index of the move in that block's cached moves


class _Graph:
    """The explored graph, rebuilt from the explorer's states and cached block moves."""

    def __init__(self, explorer: Explorer, result: ExplorationResult) -> None:
        graph = getattr(explorer, "_graph", None)
        assert graph is not None, "the exploration kept no graph: the model declares no properties"
        local, fair, index, max_depth = graph
        self.explorer = explorer
        self.result = result
        self.edges: dict[Node, list[_Edge]] = {}
        self.expanded: set[Node] = set()
        room_total = explorer.bounds.faults
        for sid, state in enumerate(result.states):
            ids = state[1:]
            followed = sorted(set(ids))
            nodes = [(sid, b) for b in followed]
            out: dict[Node, list[_Edge]] = {n: [] for n in nodes}
            complete = result.depths[sid] < max_depth
            room = room_total - state[0]
            previous = -1
            for position, bid in enumerate(ids):
                moves = local[bid]
                if moves is None:
                    complete = False
                    break
                if bid == previous:
                    continue  # an identical agreement: its moves are the previous one's
                previous = bid
                copies = ids.count(bid)
                rest = ids[:position] + ids[position + 1 :]
                actions = fair[bid]
                for m, (new_bid, cost, _, _, _) in enumerate(moves):
                    if cost > room or new_bid < 0:
                        continue
                    succ = (state[0] + cost, *sorted((*rest, new_bid)))
                    target = index.get(succ)
                    if target is None:
                        complete = False
                        continue
                    for node in nodes:
                        if node[1] == bid:
                            out[node].append(_Edge((target, new_bid), actions[m], target, position, m))
                            if copies > 1:  # an identical agreement that is not the one followed moved
                                out[node].append(_Edge((target, bid), actions[m], target, position, m))
                        else:
                            out[node].append(_Edge((target, node[1]), actions[m], target, position, m))
            self.edges.update(out)
            if complete:
                self.expanded.update(nodes)

    def nodes(self) -> Iterator[Node]:
        return iter(self.edges)


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
    graph = _Graph(explorer, result)
    return [_check_one(explorer, result, graph, prop) for prop in explorer.model.properties]


def _statement(prop: Json, scale: int) -> str:
    if prop["kind"] == "eventually_final":
        return "eventually final"
    return f"{render_expr(prop['premise'], scale)} leads_to {render_expr(prop['goal'], scale)}"


def _check_one(explorer: Explorer, result: ExplorationResult, graph: _Graph, prop: Json) -> Json:
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
    for node in avoid & graph.expanded:
        condition = _end_condition(explorer, graph, node)
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
    bad = set(targets)
    todo = deque(targets)
    while todo:
        node = todo.popleft()
        for before in sub.predecessors(node):
            if before not in bad:
                bad.add(before)
                todo.append(before)
    triggers = sorted(
        (n for n in bad if possible(labels.premise_of(n[1]), n)),
        key=lambda n: (result.depths[n[0]], n),
    )
    entry: Json = {
        "name": prop["name"],
        "clause": prop["clause"],
        "kind": prop["kind"],
        "statement": _statement(prop, explorer.model.scale),
        "fairness": FAIRNESS,
    }
    for trigger in triggers:
        lasso = _lasso(explorer, result, graph, sub, trigger, targets, loops)
        condition = _lasso_condition(explorer, labels, trigger, lasso, ends)
        if condition is True:
            witness = None
        else:
            sat, witness = space.satisfiable(0, condition)
            if sat is not True:
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
        )
        entry["verdict"] = "incomplete"
        entry["method"] = f"fair cycle search on the explored graph: {reason}"
    elif (unmodelled := unmodelled_fairness(explorer)) is not None:
        entry["verdict"] = "incomplete"
        entry["method"] = f"fair cycle search on the explored graph, state space exhausted, but {unmodelled}"
    else:
        entry["verdict"] = "holds"
        entry["method"] = "fair cycle search on the explored graph, state space exhausted"
    entry["lasso"] = None
    return entry


# Effect strategies after which a call can end abandoned (`once` after a fault; `compensate` gives its step up;
# `reconcilable` when an operator abandons it): the runtime then refuses what depends on the effect (PW526).
_ABANDONABLE = frozenset({"once", "compensate", "reconcilable"})
_UPWARD = {">=": "lower", ">": "lower", "<=": "upper", "<": "upper"}


def unmodelled_fairness(explorer: Explorer) -> str | None:
    """Why a fair-run search that found no counterexample may still be wrong (None: nothing known).

    Two things the search does not decide, so a `holds` there would be a
    false pass (each found by attacking the check):
    - a deadline transition whose guard time can close (`now < t`): after a
      person acts late, the window may be gone for good, and the explored
      zones do not tell that state apart from one where it is open;
    - a deadline transition that depends on an effect whose call can end
      abandoned, without reading `abandoned(E)`: the runtime refuses it for
      good (EFFECT_ABANDONED_UNCERTAIN), the model lets it fire.
    """
    model = explorer.model
    strategies = {site.effect: site.strategy for site in model.sites}
    for transition in model.transitions:
        if transition["id"] not in explorer.scheduled:
            continue
        guard = transition.get("guard")
        if guard is not None and not _opens_for_good(guard, positive=True):
            return (f"the deadline transition `{transition['id']}` has a guard that time can make false again, "
                    "which this search does not follow after a late human move")  # fmt: skip
        reads = set(_effects_read(guard)) | {str(c["effect"]) for c in transition.get("effects", [])}
        handled = set(_effects_read(guard, only="abandoned"))
        for effect in sorted(reads - handled):
            if strategies.get(effect) in _ABANDONABLE:
                return (f"the deadline transition `{transition['id']}` depends on `{effect}`, whose call can "
                        "end abandoned; the runtime then refuses it (PW526), unmodelled here")  # fmt: skip
    return None


def _opens_for_good(expr: Any, positive: bool) -> bool:
    """Whether time passing can never make `expr` false once it is true (read with its polarity)."""
    if not isinstance(expr, dict):
        return True
    op, args = expr.get("op"), expr.get("args", [])
    if op == "not":
        return _opens_for_good(args[0], not positive)
    if op in ("and", "or"):
        return all(_opens_for_good(a, positive) for a in args)
    if op == "implies":
        return _opens_for_good(args[0], not positive) and _opens_for_good(args[1], positive)
    if op in _UPWARD or op in ("==", "!="):
        left, right = (_reads_now(a) for a in args[:2])
        if not left and not right:
            return True
        if op in ("==", "!="):
            return False
        # `now >= t` (or `t <= now`) opens for good; negated, it closes.
        lower = (_UPWARD[op] == "lower") == left
        return lower == positive
    return not _reads_now(expr)


def _reads_now(expr: Any) -> bool:
    if not isinstance(expr, dict):
        return False
    return expr.get("op") == "now" or any(_reads_now(a) for a in expr.get("args", []))


def _effects_read(expr: Any, only: str | None = None) -> Iterator[str]:
    """The effects an expression reads (`applied`, `total`, `acknowledged`, `reconciled`, `abandoned`)."""
    if not isinstance(expr, dict):
        return
    op = expr.get("op")
    effect_ops = {"total", "acknowledged", "reconciled", "abandoned"}
    if (only is None and (op in effect_ops or (op == "applied" and expr.get("value") == "effect"))) or op == only:
        yield str(expr["name"])
    for arg in expr.get("args", []):
        yield from _effects_read(arg, only)


def _end_condition(explorer: Explorer, graph: _Graph, node: Node) -> Formula:
    """Where the run may stop for good at `node`: no fair action is enabled there.

    A fair move whose target keeps the path condition is enabled for every value;
    one that refines it is enabled only where the target's condition holds.
    """
    blocks = explorer._blocks
    state = graph.result.states[node[0]]
    conditions = {int(blocks[b][2]) for b in state[1:]}
    enabled: Formula = False
    for edge in graph.edges[node]:
        if edge.action is None:
            continue
        target_state = graph.result.states[edge.state]
        changed = {int(blocks[b][2]) for b in target_state[1:]} - conditions
        if not changed:
            return False
        for pc in changed:
            enabled = explorer.space.disj(enabled, explorer._pc_formula(pc))
    return explorer.space.negate(enabled)


def _fair_component(graph: _Graph, members: frozenset[Node]) -> bool:
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
    explorer: Explorer,
    result: ExplorationResult,
    graph: _Graph,
    sub: Any,
    trigger: Node,
    targets: set[Node],
    loops: dict[Node, frozenset[Node]],
) -> list[tuple[Node, _Edge | None]]:
    """From `trigger`, the shortest path (avoiding Q) to a fair end, then the loop:
    (node, edge taken from it or None) in order, the loop starting at the last node."""
    parent: dict[Node, tuple[Node, _Edge] | None] = {trigger: None}
    todo = deque([trigger])
    end = trigger
    while todo:
        node = todo.popleft()
        if node in targets:
            end = node
            break
        for edge in graph.edges[node]:
            if edge.target in sub and edge.target not in parent:
                parent[edge.target] = (node, edge)
                todo.append(edge.target)
    path: list[tuple[Node, _Edge | None]] = []
    cursor = end
    step = parent[cursor]
    while step is not None:
        path.append(step)
        cursor = step[0]
        step = parent[cursor]
    path.reverse()
    if end in loops:
        path.extend(_cycle(graph, end, loops[end]))
    path.append((end, None))
    return path


def _cycle(graph: _Graph, start: Node, members: frozenset[Node]) -> list[tuple[Node, _Edge]]:
    """A cycle from `start` back to it inside `members` (shortest, by breadth-first search)."""
    parent: dict[Node, tuple[Node, _Edge]] = {}
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
    lasso: list[tuple[Node, _Edge | None]],
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
    graph: _Graph,
    trigger: Node,
    lasso: list[tuple[Node, _Edge | None]],
    ends: dict[Node, Formula],
) -> Json:
    """The lasso as the report prints it: prefix events, then the loop ("back to state N")."""
    prefix_states = explorer.path(result, trigger[0])
    events: list[Json] = []
    for before, after in pairwise(prefix_states):
        events.append(_event(explorer, result, before, _find_move(explorer, result, before, after), after))
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
        "waiting_for": _human_moves(explorer, result, last[0]) if stuttering else [],
    }


def _find_move(explorer: Explorer, result: ExplorationResult, before: int, after: int) -> Move:
    target = result.states[after]
    state = result.states[before]
    ids = state[1:]
    for position, bid in enumerate(ids):
        rest = ids[:position] + ids[position + 1 :]
        for move, new, cost, _ in explorer.local_moves(explorer._blocks[bid]):
            if new is None:
                continue
            new_bid = explorer._block_id.get(new)
            if new_bid is not None and (state[0] + cost, *sorted((*rest, new_bid))) == target:
                return Move(move.kind, position, move.actor, move.name, move.fault, move.site, move.delta, move.cell)
    raise AssertionError("a prefix step of a lasso does not reproduce; this is a verifier bug")


def _move_of(explorer: Explorer, result: ExplorationResult, sid: int, edge: _Edge) -> Move:
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


def _human_moves(explorer: Explorer, result: ExplorationResult, sid: int) -> list[str]:
    """What only a human could still do at a stuttering end (no fair move is enabled)."""
    out: set[str] = set()
    for bid in result.states[sid][1:]:
        for move, new, _, _ in explorer.local_moves(explorer._blocks[bid]):
            if new is not None and explorer.fair_action(move) is None:
                what = move.name if move.kind == "command" else f"{move.kind} {move.name}"
                out.add(f"{what} by {move.actor}")
    return sorted(out)
