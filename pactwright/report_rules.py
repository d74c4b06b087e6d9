"""When a verification report decided its policy: one rule, read by the verifier, `sign` and activation.

A bounded search that found nothing is not a pass. A report is complete when
its search exhausted the state space (within the agreement and fault bounds)
with no inconclusive solver query, or when every invariant it did not find
violated is `proved`. The verifier computes this when it writes the report;
`sign` and activation recompute it from the report's own exploration and
verdicts rather than trust its `complete` field, so an edited flag cannot
turn a bounded result into a signed pass.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["is_complete", "report_is_complete"]


def is_complete(
    exhausted: bool,
    unknown_queries: int,
    invariants: Sequence[Mapping[str, Any]],
    properties: Sequence[Mapping[str, Any]] = (),
) -> bool:
    """Exhausted with every solver query decided, or every invariant not violated proved;
    and no liveness property `incomplete` (a proof of the invariants says nothing about them)."""
    if any(p.get("verdict") not in ("holds", "violated") for p in properties):
        return False
    if exhausted and unknown_queries == 0:
        return True
    return all(i.get("verdict") == "proved" for i in invariants if i.get("verdict") != "violated")


def report_is_complete(report: Mapping[str, Any]) -> bool:
    """`is_complete` recomputed from a report document's `exploration` and `invariants`."""
    exploration = report.get("exploration")
    invariants = report.get("invariants")
    if not isinstance(exploration, Mapping) or not isinstance(invariants, list):
        return False
    unknown = exploration.get("unknown_queries", 0)
    if not isinstance(unknown, int) or isinstance(unknown, bool):
        return False
    entries = [i for i in invariants if isinstance(i, Mapping)]
    properties = report.get("properties", [])
    if not isinstance(properties, list) or not all(isinstance(p, Mapping) for p in properties):
        return False
    return is_complete(exploration.get("exhausted") is True, unknown, entries, properties)
