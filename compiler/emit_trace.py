"""`trace.json`: clause label -> source span -> transitions, invariants, properties -> artifacts.

Traceability is what lets a reviewer start from a contract clause and land
on the exact JSON pointer or program lines that implement it, and back.
Spans come from the source map, which the candidate deliberately omits.
"""

from __future__ import annotations

from pactwright.compiler.emit_schema import model_name
from pactwright.compiler.lower import Json
from pactwright.compiler.normalize import SourceMap

TRACE_FORMAT = "pactwright.trace/1"


def _span(source_map: SourceMap, key: str) -> Json | None:
    span = source_map.get(key)
    return span.to_json() if span is not None else None


def posting_lines(program: str) -> list[tuple[int, int]]:
    """1-based inclusive line ranges of each `send` block, in posting order."""
    ranges: list[tuple[int, int]] = []
    start: int | None = None
    # Lines end at `\n` only, as both Numscript parsers count them; `splitlines`
    # would also break at \v, \f and \x1c-\x1e, which a clause label may hold.
    for number, line in enumerate(program.split("\n"), start=1):
        if line.startswith("send "):
            start = number
        elif line == ")" and start is not None:
            ranges.append((start, number))
            start = None
    return ranges


def _transition_artifacts(index: int, transition: Json, programs: dict[str, bytes]) -> list[Json]:
    pointer = f"/transitions/{index}"
    out: list[Json] = [
        {"path": "candidate.json", "pointer": pointer},
        {"path": "transitions.json", "pointer": pointer},
        {"path": "model.json", "pointer": pointer},
        {"path": "events.schema.json", "pointer": "/$defs/" + model_name("Command", transition["id"])},
    ]
    if transition["ledger"]:
        path = transition["ledger"]["program"]
        text = programs[path].decode("utf-8")
        lines = text.count("\n")
        out.append({"path": path, "lines": [1, lines]})
        for posting_index, (first, last) in enumerate(posting_lines(text)):
            out.append({"path": path, "lines": [first, last], "posting": posting_index})
    return out


def build_trace(table: Json, source_map: SourceMap, source_name: str, programs: dict[str, bytes]) -> Json:
    """The trace document; `source_name` is the policy's file name, never a full path."""
    transitions: list[Json] = []
    for index, transition in enumerate(table["transitions"]):
        key = f"transition:{transition['id']}"
        transitions.append(
            {
                "id": transition["id"],
                "clause": transition["clause"],
                "span": _span(source_map, key),
                "artifacts": _transition_artifacts(index, transition, programs),
            }
        )
    invariants: list[Json] = []
    for index, invariant in enumerate(table["invariants"]):
        pointer = f"/invariants/{index}"
        invariants.append(
            {
                "name": invariant["name"],
                "clause": invariant["clause"],
                "span": _span(source_map, f"invariant:{invariant['name']}"),
                "artifacts": [
                    {"path": "candidate.json", "pointer": pointer},
                    {"path": "transitions.json", "pointer": pointer},
                    {"path": "model.json", "pointer": pointer},
                ],
            }
        )
    # Liveness properties (new in 1.1) are traced like invariants; a policy without any writes the same bytes
    # as before (no `properties` key, no `properties` list in its clauses).
    properties: list[Json] = []
    for index, prop in enumerate(table.get("properties") or []):
        pointer = f"/properties/{index}"
        properties.append(
            {
                "name": prop["name"],
                "clause": prop.get("clause"),
                "span": _span(source_map, f"property:{prop['name']}"),
                "artifacts": [
                    {"path": "candidate.json", "pointer": pointer},
                    {"path": "transitions.json", "pointer": pointer},
                    {"path": "model.json", "pointer": pointer},
                ],
            }
        )
    clauses: dict[str, Json] = {}
    for kind, items in (("transitions", transitions), ("invariants", invariants), ("properties", properties)):
        for item in items:
            if item["clause"] is None:
                continue
            entry = clauses.setdefault(item["clause"], {"clause": item["clause"], "transitions": [], "invariants": []})
            entry.setdefault(kind, []).append(item["id"] if kind == "transitions" else item["name"])
    doc: Json = {
        "format": TRACE_FORMAT,
        "candidate_hash": table["candidate_hash"],
        "source": source_name,
        "clauses": [clauses[label] for label in sorted(clauses, key=_clause_order)],
        "transitions": transitions,
        "invariants": invariants,
        "unlabelled": sorted(
            [t["id"] for t in transitions if t["clause"] is None]
            + [i["name"] for i in invariants if i["clause"] is None]
            + [p["name"] for p in properties if p["clause"] is None]
        ),
    }
    if properties:
        doc["properties"] = properties
    return doc


def _clause_order(label: str) -> tuple[tuple[int, int | str], ...]:
    """Natural order: 2 < 4.1 < 4.2 < 10; non-numeric parts sort after numbers."""
    # ASCII digits only: `"²".isdigit()` is true but `int("²")` raises.
    return tuple((0, int(part)) if part.isascii() and part.isdigit() else (1, part) for part in label.split("."))
