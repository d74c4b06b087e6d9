"""The graph the liveness check searches: the explored states, less the moves the runtime refuses.

Rebuilt from the explorer's states and the moves it cached per agreement
block, never a second exploration. A node is a state together with the
agreement a property follows (agreements are symmetric, so one agreement per
distinct block is followed).

The search lets a command commit while an effect it depends on has an
unknown outcome (an over-approximation that can only add counterexamples to
invariants). The runtime refuses such a command for good or until an
operator acts (PW526, PW527; `Explorer.outcome_refusal`), and a fair run
relies on no operator, so those moves are left out here, and so are the
states only they lead to: every node of this graph is reachable by moves
the runtime takes.

Paths to a node are the fewest "lazy" clock moves first, then the fewest
moves: a clock move is lazy when the agreement it passes time for has a
deadline transition enabled, so the scheduler may have let a window go by.
Weak fairness allows that, but a lasso whose prefix needs none holds however
promptly the scheduler acts, so that one is printed when there is one.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from pactwright.verifier.explorer import ExplorationResult, Explorer

Node = tuple[int, int]  # (state id, block id of the agreement followed)
Cost = tuple[int, int]  # (lazy clock moves, moves)


@dataclass
class Edge:
    target: Node
    action: str | None  # the fair action, or None
    state: int  # the target state id
    position: int  # the agreement (position in the source state) that moved
    move: int  # index of the move in that block's cached moves
    lazy: bool = False  # a clock move while a deadline transition of that agreement is enabled


@dataclass(frozen=True)
class BlockMove:
    """One cached move of an agreement block that the runtime would take."""

    index: int
    new: int  # the successor block id
    action: str | None
    transition: str | None  # the command's transition id, None for other moves
    cell: tuple[int, ...] | None  # the cell of the zone a time-reading guard fired from


class Graph:
    """The explored graph as runs of the runtime can take it (see the module docstring)."""

    def __init__(self, explorer: Explorer, result: ExplorationResult) -> None:
        graph = getattr(explorer, "_graph", None)
        assert graph is not None, "the exploration kept no graph: the model declares no properties"
        local, fair, index, max_depth = graph
        self.explorer = explorer
        self.result = result
        self._local = local
        self._fair = fair
        self._moves: dict[int, list[BlockMove]] = {}
        self.edges: dict[Node, list[Edge]] = {}
        self.expanded: set[Node] = set()
        room_total = explorer.bounds.faults
        for sid, state in enumerate(result.states):
            ids = state[1:]
            nodes = [(sid, b) for b in sorted(set(ids))]
            out: dict[Node, list[Edge]] = {n: [] for n in nodes}
            complete = result.depths[sid] < max_depth
            room = room_total - state[0]
            previous = -1
            for position, bid in enumerate(ids):
                if local[bid] is None:
                    complete = False
                    break
                if bid == previous:
                    continue  # an identical agreement: its moves are the previous one's
                previous = bid
                copies = ids.count(bid)
                rest = ids[:position] + ids[position + 1 :]
                scheduled = self.scheduled_in(bid)
                for move in self.moves(bid):
                    cost = local[bid][move.index][1]
                    if cost > room:
                        continue
                    succ = (state[0] + cost, *sorted((*rest, move.new)))
                    target = index.get(succ)
                    if target is None:
                        complete = False
                        continue
                    lazy = move.action == "clock" and scheduled
                    for node in nodes:
                        if node[1] == bid:
                            out[node].append(Edge((target, move.new), move.action, target, position, move.index, lazy))
                            if copies > 1:  # an identical agreement that is not the one followed moved
                                out[node].append(Edge((target, bid), move.action, target, position, move.index, lazy))
                        else:
                            out[node].append(Edge((target, node[1]), move.action, target, position, move.index, lazy))
            self.edges.update(out)
            if complete:
                self.expanded.update(nodes)
        # Nodes a run reaches only after the model forgot an abandon: not judged exactly.
        initial = [
            (sid, b) for sid, parent in enumerate(result.parents) if parent < 0 for b in set(result.states[sid][1:])
        ]
        self.cost, self._parent = self.shortest(initial, lambda _: True)

    def moves(self, bid: int) -> list[BlockMove]:
        """The cached moves of block `bid` that lead somewhere and that the runtime does not refuse."""
        found = self._moves.get(bid)
        if found is not None:
            return found
        explorer = self.explorer
        block = explorer._blocks[bid]
        local = self._local[bid]
        actions = self._fair[bid]
        assert local is not None
        out: list[BlockMove] = []
        for m, (new_bid, _, _, tid, cell) in enumerate(local):
            if new_bid < 0:
                continue
            if tid is not None:
                t = explorer.model.transition_index[tid]
                if explorer.outcome_refusal(block, t) is not None:
                    continue  # PW526 / PW527: the runtime refuses it
            out.append(BlockMove(m, new_bid, actions[m], tid, cell))
        self._moves[bid] = out
        return out

    def scheduled_in(self, bid: int) -> bool:
        """Whether a deadline transition of this agreement is enabled (somewhere in its zone)."""
        return any(m.action is not None and m.action.startswith("scheduler:") for m in self.moves(bid))

    def nodes(self) -> Iterator[Node]:
        """The nodes runs of the runtime reach."""
        return iter(self.cost)

    def shortest(
        self, sources: list[Node], allowed: Callable[[Node], bool], stop: Callable[[Node], bool] | None = None
    ) -> tuple[dict[Node, Cost], dict[Node, tuple[Node, Edge] | None]]:
        """Least-cost paths from `sources` through `allowed` nodes (Dijkstra on (lazy moves, moves)),
        up to the first node `stop` accepts when given. Ties go breadth-first, in the order of the edges."""
        cost: dict[Node, Cost] = {}
        parent: dict[Node, tuple[Node, Edge] | None] = {}
        heap: list[tuple[Cost, int, Node, tuple[Node, Edge] | None]] = [
            ((0, 0), order, s, None) for order, s in enumerate(sorted(sources))
        ]
        heapq.heapify(heap)
        settled: set[Node] = set()
        order = len(heap)  # breaks ties: the first pushed wins, so equal costs go in breadth-first order
        while heap:
            here, _, node, via = heapq.heappop(heap)
            if node in settled:
                continue
            settled.add(node)
            cost[node] = here
            parent[node] = via
            if stop is not None and stop(node):
                break
            for edge in self.edges.get(node, ()):
                if edge.target in settled or not allowed(edge.target):
                    continue
                order += 1
                heapq.heappush(heap, ((here[0] + int(edge.lazy), here[1] + 1), order, edge.target, (node, edge)))
        return cost, parent

    def to_targets(self, targets: set[Node], within: set[Node]) -> dict[Node, Cost]:
        """Per node of `within`, the least cost of a path inside it to one of `targets` (absent: none)."""
        back: dict[Node, list[tuple[Node, int]]] = {}
        for node in within:
            for edge in self.edges.get(node, ()):
                if edge.target in within:
                    back.setdefault(edge.target, []).append((node, int(edge.lazy)))
        cost: dict[Node, Cost] = {}
        heap: list[tuple[Cost, Node]] = [((0, 0), t) for t in targets]
        heapq.heapify(heap)
        while heap:
            here, node = heapq.heappop(heap)
            if node in cost:
                continue
            cost[node] = here
            for before, lazy in back.get(node, ()):
                if before not in cost:
                    heapq.heappush(heap, ((here[0] + lazy, here[1] + 1), before))
        return cost

    def path_to(
        self, node: Node, parent: dict[Node, tuple[Node, Edge] | None] | None = None
    ) -> list[tuple[Node, Edge]]:
        """The (node, edge taken from it) steps of the least-cost path to `node`."""
        parents = self._parent if parent is None else parent
        out: list[tuple[Node, Edge]] = []
        step = parents[node]
        while step is not None:
            out.append(step)
            step = parents[step[0]]
        return out[::-1]
