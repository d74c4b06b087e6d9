"""A deterministic layered layout of a report's state machine, for the HTML report's inline SVG.

The layout is computed here, in plain Python, so that the same report always
gives the same picture, byte for byte (no graphviz, no JavaScript layout at
view time, no float formatting that depends on the platform). It follows the
classic layered (Sugiyama) recipe, small enough to read in one sitting:

1. break cycles: a depth-first search from the initial state marks back
   edges, which are laid out reversed and drawn with their arrow pointing
   back;
2. layers by longest path, so every state sits right of everything that can
   lead to it and final states gather at the right;
3. edges that span several layers get a dummy slot in every layer between,
   which reserves room for the edge and its label;
4. a few barycenter sweeps order each layer to reduce crossings;
5. vertical positions pull each slot towards its neighbours, with order and
   spacing kept by an isotonic regression (pool adjacent violators).

Only geometry lives here; `render_html` decides classes, badges and colours.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

# Geometry, in SVG user units (CSS pixels at 100%). Text is monospace so that
# widths can be estimated from character counts without a font engine.
NAME_CHAR = 8.5  # 14px monospace (0.6em advance), with a little slack
LABEL_CHAR = 7.6  # 12.5px monospace
LABEL_LINE = 13.0
NODE_H = 42.0
NODE_PAD = 18.0
MIN_NODE_W = 96.0
DUMMY_H = 36.0
SLOT_GAP = 34.0
MIN_LAYER_GAP = 140.0
MARGIN_X = 44.0  # room on the left for the initial-state marker
MARGIN_Y = 40.0  # room above for step badges on nodes
BADGE_R = 10.0
LOOP_LIFT = 30.0
LOOP_STEP = 22.0
SWEEPS = 6


@dataclass(frozen=True)
class Point:
    x: float
    y: float


@dataclass(frozen=True)
class NodeBox:
    """One state: its box (top-left corner, size) and its flags."""

    name: str
    x: float
    y: float
    w: float
    h: float
    initial: bool
    final: bool

    @property
    def cx(self) -> float:
        return self.x + self.w / 2

    @property
    def cy(self) -> float:
        return self.y + self.h / 2


@dataclass(frozen=True)
class EdgeLine:
    """One (transition, source state) pair drawn as a path from `source` to `target`."""

    transition: str
    clause: str | None
    source: str
    target: str
    d: str  # SVG path data, drawn in the arrow's direction
    label_at: Point  # centre of the label: the transition id, and its clause on a second line
    label_w: float
    label_h: float
    back: bool
    loop: bool


@dataclass(frozen=True)
class Layout:
    width: float
    height: float
    nodes: tuple[NodeBox, ...]
    edges: tuple[EdgeLine, ...]
    initial_marker: tuple[Point, Point] | None  # dot centre, arrow tip

    def node(self, name: str) -> NodeBox:
        return next(n for n in self.nodes if n.name == name)

    def edge(self, transition: str, source: str) -> EdgeLine | None:
        return next((e for e in self.edges if e.transition == transition and e.source == source), None)


@dataclass
class _Slot:
    """A node or a dummy in one layer; dummies carry their edge's index."""

    key: str
    height: float
    edge: int | None = None
    y: float = 0.0
    pos: int = 0


@dataclass
class _Edge:
    transition: str
    clause: str | None
    source: str
    target: str
    back: bool
    loop: bool
    tail: str = ""  # layout direction: tail is left of head
    head: str = ""
    chain: list[str] = field(default_factory=list)  # slot keys from tail to head, dummies included


def fmt(value: float) -> str:
    """A coordinate as short, stable text: at most one decimal, no `-0`."""
    text = f"{round(value, 1):.1f}".removesuffix(".0")
    return "0" if text == "-0" else text


def label_size(transition: str, clause: str | None) -> tuple[float, float]:
    """Width and height of an edge label: the id, then `[clause]` on a second line."""
    chars = max(len(transition), len(clause) + 2 if clause else 0)
    return chars * LABEL_CHAR + 8, (LABEL_LINE * 2 + 5 if clause else LABEL_LINE + 5)


def layout(machine: Mapping[str, Any]) -> Layout:
    """Lay out `report["machine"]`: states left to right by longest path from the initial state."""
    states = [s["name"] for s in machine["states"]]
    flags = {s["name"]: (bool(s["initial"]), bool(s["final"])) for s in machine["states"]}
    edges = [
        _Edge(t["id"], t["clause"], source, t["to"], back=False, loop=source == t["to"])
        for t in machine["transitions"]
        for source in t["from"]
    ]
    initial = next((s for s in states if flags[s][0]), states[0] if states else None)
    _mark_back_edges(states, initial, edges)
    layer = _longest_path_layers(states, edges)
    slots = _slots(states, edges, layer)
    _order(slots, edges)
    node_w = max([MIN_NODE_W, *(len(s) * NAME_CHAR + 2 * NODE_PAD for s in states)])
    widest_label = max((label_size(e.transition, e.clause)[0] for e in edges), default=0.0)
    gap = max(MIN_LAYER_GAP, widest_label + 40)
    loops: dict[str, int] = {}
    for edge in edges:
        if edge.loop:
            loops[edge.source] = loops.get(edge.source, 0) + 1
    # Self-loops rise above their node; the highest one sets the top margin.
    top = MARGIN_Y + max((LOOP_LIFT + LOOP_STEP * (n - 1) for n in loops.values()), default=0.0)
    _place_vertically(slots, edges, top)
    x_of = [MARGIN_X + i * (node_w + gap) for i in range(len(slots))]
    where: dict[str, tuple[float, float, float]] = {}  # key -> (x left, y centre, height)
    for i, column in enumerate(slots):
        for slot in column:
            where[slot.key] = (x_of[i], slot.y, slot.height)
    nodes = tuple(
        NodeBox(s, where[s][0], where[s][1] - NODE_H / 2, node_w, NODE_H, flags[s][0], flags[s][1]) for s in states
    )
    lines = _route(edges, where, node_w)
    bottom = max((y + h / 2 for _, y, h in where.values()), default=MARGIN_Y)
    width = (x_of[-1] + node_w if x_of else 2 * MARGIN_X) + MARGIN_X / 2
    marker = None
    if initial is not None:
        box = where[initial]
        marker = (Point(box[0] - 34, box[1]), Point(box[0] - 2, box[1]))
    return Layout(width, bottom + MARGIN_Y / 2, nodes, tuple(lines), marker)


def _mark_back_edges(states: Sequence[str], initial: str | None, edges: list[_Edge]) -> None:
    """Depth-first from the initial state (then any unvisited state, in order): edges to the stack are back edges."""
    out: dict[str, list[_Edge]] = {s: [] for s in states}
    for edge in edges:
        out[edge.source].append(edge)
    visited: set[str] = set()
    on_stack: set[str] = set()
    roots = ([initial] if initial is not None else []) + list(states)
    for root in roots:
        if root in visited:
            continue
        # Iterative DFS keeps deep machines away from Python's recursion limit.
        stack: list[tuple[str, int]] = [(root, 0)]
        visited.add(root)
        on_stack.add(root)
        while stack:
            state, index = stack[-1]
            if index == len(out[state]):
                stack.pop()
                on_stack.discard(state)
                continue
            stack[-1] = (state, index + 1)
            edge = out[state][index]
            if edge.loop:
                continue
            if edge.target in on_stack:
                edge.back = True
            elif edge.target not in visited:
                visited.add(edge.target)
                on_stack.add(edge.target)
                stack.append((edge.target, 0))
    for edge in edges:
        edge.tail, edge.head = (edge.target, edge.source) if edge.back else (edge.source, edge.target)


def _longest_path_layers(states: Sequence[str], edges: Sequence[_Edge]) -> dict[str, int]:
    """Layer of each state: the longest path to it over the acyclic (tail -> head) edges."""
    preds: dict[str, list[str]] = {s: [] for s in states}
    for edge in edges:
        if not edge.loop:
            preds[edge.head].append(edge.tail)
    layer: dict[str, int] = {}
    for state in states:
        stack = [state]
        while stack:
            top = stack[-1]
            if top in layer:
                stack.pop()
                continue
            pending = [p for p in preds[top] if p not in layer]
            if pending:
                stack.extend(pending)
            else:
                layer[top] = max((layer[p] + 1 for p in preds[top]), default=0)
                stack.pop()
    return layer


def _slots(states: Sequence[str], edges: list[_Edge], layer: Mapping[str, int]) -> list[list[_Slot]]:
    depth = max(layer.values(), default=0) + 1
    slots: list[list[_Slot]] = [[] for _ in range(depth)]
    for state in states:
        slots[layer[state]].append(_Slot(state, NODE_H))
    for index, edge in enumerate(edges):
        chain = [edge.tail]
        if not edge.loop:
            for between in range(layer[edge.tail] + 1, layer[edge.head]):
                key = f"\0{index}:{between}"
                slots[between].append(_Slot(key, DUMMY_H, edge=index))
                chain.append(key)
            chain.append(edge.head)
        edge.chain = chain
    for column in slots:
        for pos, slot in enumerate(column):
            slot.pos = pos
    return slots


def _order(slots: list[list[_Slot]], edges: Sequence[_Edge]) -> None:
    """Barycenter sweeps, left to right then right to left; ties keep the current order."""
    left: dict[str, list[str]] = {}
    right: dict[str, list[str]] = {}
    for edge in edges:
        for a, b in itertools.pairwise(edge.chain):
            right.setdefault(a, []).append(b)
            left.setdefault(b, []).append(a)
    pos = {slot.key: slot.pos for column in slots for slot in column}
    for sweep in range(SWEEPS):
        columns = range(1, len(slots)) if sweep % 2 == 0 else range(len(slots) - 2, -1, -1)
        neighbours = left if sweep % 2 == 0 else right
        for i in columns:
            column = slots[i]

            def centre(slot: _Slot, neighbours: dict[str, list[str]] = neighbours) -> float:
                around = neighbours.get(slot.key, [])
                return sum(pos[k] for k in around) / len(around) if around else float(pos[slot.key])

            column.sort(key=lambda s: (centre(s), pos[s.key]))
            for p, slot in enumerate(column):
                slot.pos = p
                pos[slot.key] = p


def _place_vertically(slots: list[list[_Slot]], edges: Sequence[_Edge], top: float) -> None:
    """Centres each column, then pulls slots towards their neighbours' mean height, keeping order and gaps."""
    tallest = max((_column_height(c) for c in slots), default=0.0)
    for column in slots:
        y = MARGIN_Y + (tallest - _column_height(column)) / 2
        for slot in column:
            slot.y = y + slot.height / 2
            y += slot.height + SLOT_GAP
    left: dict[str, list[str]] = {}
    right: dict[str, list[str]] = {}
    for edge in edges:
        for a, b in itertools.pairwise(edge.chain):
            right.setdefault(a, []).append(b)
            left.setdefault(b, []).append(a)
    y_of = {slot.key: slot.y for column in slots for slot in column}
    for sweep in range(4):
        forward = sweep % 2 == 0
        columns = range(1, len(slots)) if forward else range(len(slots) - 2, -1, -1)
        neighbours = left if forward else right
        for i in columns:
            column = slots[i]
            wanted = []
            for slot in column:
                around = neighbours.get(slot.key, [])
                wanted.append(sum(y_of[k] for k in around) / len(around) if around else slot.y)
            gaps = [(a.height + b.height) / 2 + SLOT_GAP for a, b in itertools.pairwise(column)]
            for slot, y in zip(column, _pack(wanted, gaps), strict=True):
                slot.y = y
                y_of[slot.key] = y
    lowest = min(((s.y - s.height / 2) for column in slots for s in column), default=top)
    for column in slots:
        for slot in column:
            slot.y += top - lowest


def _column_height(column: Sequence[_Slot]) -> float:
    return sum(s.height for s in column) + SLOT_GAP * max(len(column) - 1, 0)


def _pack(wanted: Sequence[float], gaps: Sequence[float]) -> list[float]:
    """Positions closest (least squares) to `wanted` with `pos[i+1] - pos[i] >= gaps[i]`.

    Subtracting the cumulative gaps turns this into isotonic regression, which
    pool-adjacent-violators solves exactly in one pass.
    """
    offsets = [0.0]
    for gap in gaps:
        offsets.append(offsets[-1] + gap)
    targets = [w - o for w, o in zip(wanted, offsets, strict=True)]
    blocks: list[list[float]] = []  # [mean, count]
    for value in targets:
        blocks.append([value, 1.0])
        while len(blocks) > 1 and blocks[-2][0] > blocks[-1][0]:
            mean_b, count_b = blocks.pop()
            mean_a, count_a = blocks[-1]
            total = count_a + count_b
            blocks[-1] = [(mean_a * count_a + mean_b * count_b) / total, total]
    fitted: list[float] = []
    for mean, count in blocks:
        fitted.extend([mean] * int(count))
    return [f + o for f, o in zip(fitted, offsets, strict=True)]


def _route(edges: Sequence[_Edge], where: Mapping[str, tuple[float, float, float]], node_w: float) -> list[EdgeLine]:
    """Paths through each edge's chain, with ports spread along the node sides and labels kept apart."""
    out_ports = _ports(edges, where, side="tail")
    in_ports = _ports(edges, where, side="head")
    taken: list[tuple[float, float, float, float]] = [
        (x, y - h / 2, x + node_w, y + h / 2) for key, (x, y, h) in where.items() if not key.startswith("\0")
    ]
    lines: list[EdgeLine] = []
    loops: dict[str, int] = {}
    for index, edge in enumerate(edges):
        label_w, label_h = label_size(edge.transition, edge.clause)
        if edge.loop:
            x, y, h = where[edge.source]
            n = loops.get(edge.source, 0)
            loops[edge.source] = n + 1
            lift = LOOP_LIFT + LOOP_STEP * n
            top = y - h / 2
            a, b = x + node_w * 0.62, x + node_w * 0.86
            d = f"M{fmt(a)},{fmt(top)} C{fmt(a)},{fmt(top - lift)} {fmt(b)},{fmt(top - lift)} {fmt(b)},{fmt(top)}"
            at = Point(b + label_w / 2 + 4, top - lift * 0.75)
            lines.append(
                EdgeLine(edge.transition, edge.clause, edge.source, edge.target, d, at, label_w, label_h, False, True)
            )
            continue
        points = [Point(where[edge.tail][0] + node_w, out_ports[index])]
        for key in edge.chain[1:-1]:
            x, y, _ = where[key]
            points.append(Point(x, y))
            points.append(Point(x + node_w, y))
        points.append(Point(where[edge.head][0], in_ports[index]))
        if len(points) > 2:
            # A long edge: its label sits in the first dummy slot, which was reserved for it.
            at = Point((points[1].x + points[2].x) / 2, points[1].y)
        else:
            at = _free_spot(points[0], points[1], label_w, label_h, taken)
        taken.append(_label_box(at, label_w, label_h))
        drawn = list(reversed(points)) if edge.back else points
        lines.append(
            EdgeLine(
                edge.transition,
                edge.clause,
                edge.source,
                edge.target,
                _smooth(drawn),
                at,
                label_w,
                label_h,
                edge.back,
                False,
            )
        )
    return lines


def _ports(edges: Sequence[_Edge], where: Mapping[str, tuple[float, float, float]], side: str) -> dict[int, float]:
    """The y of each edge's end on a node side, spread in the order of the far ends so edges do not cross there."""
    groups: dict[str, list[tuple[float, int]]] = {}
    for index, edge in enumerate(edges):
        if edge.loop:
            continue
        if side == "tail":
            node, far = edge.tail, edge.chain[1]
        else:
            node, far = edge.head, edge.chain[-2]
        groups.setdefault(node, []).append((where[far][1], index))
    ports: dict[int, float] = {}
    for node, members in groups.items():
        members.sort()
        y = where[node][1]
        step = min(10.0, (NODE_H - 14) / max(len(members) - 1, 1))
        for rank, (_, index) in enumerate(members):
            ports[index] = y + (rank - (len(members) - 1) / 2) * step
    return ports


def _smooth(points: Sequence[Point]) -> str:
    """Cubic segments with horizontal tangents at every point: straight runs, S-curves between rows."""
    parts = [f"M{fmt(points[0].x)},{fmt(points[0].y)}"]
    for a, b in itertools.pairwise(points):
        if a.y == b.y:
            parts.append(f"L{fmt(b.x)},{fmt(b.y)}")
            continue
        mid = (a.x + b.x) / 2
        parts.append(f"C{fmt(mid)},{fmt(a.y)} {fmt(mid)},{fmt(b.y)} {fmt(b.x)},{fmt(b.y)}")
    return " ".join(parts)


def _bezier(a: Point, b: Point, t: float) -> Point:
    """A point on the S-curve `_smooth` draws from `a` to `b`."""
    mid = (a.x + b.x) / 2
    c1, c2 = Point(mid, a.y), Point(mid, b.y)
    u = 1 - t
    x = u**3 * a.x + 3 * u * u * t * c1.x + 3 * u * t * t * c2.x + t**3 * b.x
    y = u**3 * a.y + 3 * u * u * t * c1.y + 3 * u * t * t * c2.y + t**3 * b.y
    return Point(x, y)


def _label_box(at: Point, width: float, height: float) -> tuple[float, float, float, float]:
    """The room a label needs, reaching up to hold the step badges drawn above it."""
    return (at.x - width / 2 - 3, at.y - height / 2 - 2 * BADGE_R - 4, at.x + width / 2 + 3, at.y + height / 2)


def _free_spot(
    a: Point, b: Point, width: float, height: float, taken: list[tuple[float, float, float, float]]
) -> Point:
    """The first point along the edge where its label overlaps no node and no other label."""
    for t in (0.5, 0.36, 0.64, 0.26, 0.74, 0.44, 0.56):
        at = _bezier(a, b, t)
        box = _label_box(at, width, height)
        if not any(box[0] < t2[2] and t2[0] < box[2] and box[1] < t2[3] and t2[1] < box[3] for t2 in taken):
            return at
    return _bezier(a, b, 0.5)


@dataclass(frozen=True)
class Badge:
    """A numbered step marker: on an edge's label for a command, on a state for any other event."""

    step: int
    kind: str  # the event kind: command, fault, dispatch, runtime, approve, ...
    x: float
    y: float
    transition: str | None
    state: str | None
    fault: str | None


@dataclass(frozen=True)
class Diagram:
    """A layout with one counterexample's path marked (or none marked)."""

    prefix: str  # makes element ids unique when a page holds several diagrams
    layout: Layout
    on_path: frozenset[tuple[str, str]]  # (transition, source state)
    visited: frozenset[str]
    end: str | None
    badges: tuple[Badge, ...]

    def edge_on_path(self, edge: EdgeLine) -> bool:
        return (edge.transition, edge.source) in self.on_path


@dataclass(frozen=True)
class Step:
    """One counterexample event, as much of it as the diagram needs."""

    step: int
    kind: str
    transition: str | None  # for commands
    source: str | None
    target: str | None
    state: str | None  # the acting agreement's state after the event
    fault: str | None


def diagram(base: Layout, prefix: str, steps: Sequence[Step] = ()) -> Diagram:
    """Marks the edges a path fires and numbers every step: commands on their edge, other events on their state."""
    on_path: set[tuple[str, str]] = set()
    visited: set[str] = set()
    on_edge: dict[tuple[str, str], list[Step]] = {}
    on_node: dict[str, list[Step]] = {}
    names = {n.name for n in base.nodes}
    for step in steps:
        edge = base.edge(step.transition, step.source) if step.transition and step.source else None
        if step.kind == "command" and edge is not None:
            on_path.add((edge.transition, edge.source))
            visited.update((edge.source, edge.target))
            on_edge.setdefault((edge.transition, edge.source), []).append(step)
        elif step.state in names:
            assert step.state is not None
            on_node.setdefault(step.state, []).append(step)
    badges: list[Badge] = []
    pitch = 2 * BADGE_R + 4
    for edge in base.edges:
        group = on_edge.get((edge.transition, edge.source), [])
        first = edge.label_at.x - (len(group) - 1) * pitch / 2
        for i, step in enumerate(group):
            y = edge.label_at.y - edge.label_h / 2 - BADGE_R - 2
            badges.append(Badge(step.step, step.kind, first + i * pitch, y, edge.transition, None, step.fault))
    for node in base.nodes:
        group = on_node.get(node.name, [])
        for i, step in enumerate(group):
            # Right-aligned on the top border, in step order from left to right.
            x = node.x + node.w - BADGE_R - 4 - (len(group) - 1 - i) * pitch
            badges.append(Badge(step.step, step.kind, x, node.y, None, node.name, step.fault))
    badges.sort(key=lambda b: b.step)
    last = next((s for s in reversed(steps) if s.state in names), None)
    end = last.state if last is not None else None
    return Diagram(prefix, base, frozenset(on_path), frozenset(visited), end, tuple(badges))
