"""Cycles of transitions in a model's control graph: why a bounded search may never end.

A cycle of transitions can fire again and again: each round posts money
(a balance grows or shrinks without limit) or at least raises the `fired`
count of its transitions, so the reachable state space is infinite and only
a bound stops the search. When a bound did stop it, the report names these
cycles, so the reader knows what to bound in the policy, or which invariant
to prove by induction, instead of only raising `--max-depth`.

The cycles are found statically, from `model.json`'s states and transitions
alone (guards are not evaluated: a cycle whose guards can never all hold is
still named, which errs toward telling the reader too much).
"""

from __future__ import annotations

import networkx as nx  # type: ignore[import-untyped]  # no stubs; used for graph facts only

from pactwright.verifier.model import Model

__all__ = ["MAX_CYCLES", "describe", "pumping_cycles"]

MAX_CYCLES = 3  # named in a report; more would bury the first ones
_MAX_SCAN = 2_000  # cycles enumerated in all; bounds the work on dense graphs


def pumping_cycles(model: Model, limit: int = MAX_CYCLES) -> list[list[str]]:
    """Up to `limit` cycles of transitions (ids, without repeating the first), deterministic.

    Each cycle starts at its transition that comes first in the model. Cycles
    that post money come first (they pump a balance), then shorter ones,
    then model order.
    """
    order = {t["id"]: i for i, t in enumerate(model.transitions)}
    # Transitions are nodes; t -> u when u may fire from the state t leads to.
    graph = nx.DiGraph()
    for transition in model.transitions:
        graph.add_node(transition["id"])
    for transition in model.transitions:
        for following in model.transitions:
            if transition["to"] in following["from"]:
                graph.add_edge(transition["id"], following["id"])
    posts = {t["id"] for t in model.transitions if t["postings"]}
    found: list[list[str]] = []
    budget = _MAX_SCAN
    for component in sorted(nx.strongly_connected_components(graph), key=lambda c: min(order[n] for n in c)):
        sub = graph.subgraph(component)
        if len(component) == 1 and not sub.has_edge(*(2 * [next(iter(component))])):
            continue  # a single transition that cannot follow itself is on no cycle
        # Shortest cycles first, length by length, so a dense component cannot stall the search.
        mine = 0
        for length in range(1, len(component) + 1):
            for cycle in nx.simple_cycles(sub, length_bound=length):
                budget -= 1
                if len(cycle) == length:
                    found.append(_rotated(cycle, order))
                    mine += 1
                if budget <= 0:
                    break
            if budget <= 0 or mine >= limit:
                break
        if budget <= 0:
            break
    found.sort(key=lambda c: (not (set(c) & posts), len(c), [order[t] for t in c]))
    return found[:limit]


def describe(cycle: list[str]) -> str:
    """`top_up -> withdraw -> top_up`: the cycle closed on its first transition."""
    return " -> ".join([*cycle, cycle[0]])


def _rotated(cycle: list[str], order: dict[str, int]) -> list[str]:
    start = min(range(len(cycle)), key=lambda i: order[cycle[i]])
    return cycle[start:] + cycle[:start]
