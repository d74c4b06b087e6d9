"""`pactwright explain BUNDLE --clause L`: from a clause to the artifacts that implement it."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from pactwright.errors import PactwrightError, UsageError


def register(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("bundle", metavar="BUNDLE", help="bundle directory")
    parser.add_argument("--clause", metavar="LABEL", help="clause label, e.g. 4.1 (all clauses when omitted)")
    parser.add_argument("--format", choices=("text", "json"), default="text")


def _where(artifact: dict[str, Any]) -> str:
    if "pointer" in artifact:
        return f"{artifact['path']}#{artifact['pointer']}"
    first, last = artifact["lines"]
    suffix = f" (posting {artifact['posting']})" if "posting" in artifact else ""
    return f"{artifact['path']}:{first}-{last}{suffix}"


def _span(source: str, span: dict[str, int] | None) -> str:
    if span is None:
        return source
    return f"{source}:{span['line']}:{span['column']}-{span['end_line']}:{span['end_column']}"


def explain(trace: dict[str, Any], label: str) -> dict[str, Any]:
    """The chain for one clause: spans, transitions, invariants, artifact locations."""
    clause = next((c for c in trace["clauses"] if c["clause"] == label), None)
    if clause is None:
        known = ", ".join(c["clause"] for c in trace["clauses"]) or "none"
        raise PactwrightError(f"no clause `{label}` in this bundle (clauses: {known})", code="PW202")
    transitions = [t for t in trace["transitions"] if t["id"] in clause["transitions"]]
    invariants = [i for i in trace["invariants"] if i["name"] in clause["invariants"]]
    chain = {"clause": label, "source": trace["source"], "transitions": transitions, "invariants": invariants}
    if clause.get("properties"):  # liveness properties (new in 1.1)
        chain["properties"] = [p for p in trace.get("properties", []) if p["name"] in clause["properties"]]
    return chain


def render(chain: dict[str, Any], transitions_table: dict[str, Any]) -> str:
    by_id = {t["id"]: t for t in transitions_table["transitions"]}
    lines = [f"clause {chain['clause']}"]
    for item in chain["transitions"]:
        row = by_id[item["id"]]
        lines.append(
            f"  transition {item['id']}: {', '.join(row['from'])} -> {row['to']}  by {', '.join(row['roles'])}"
        )
        lines.append(f"    source   {_span(chain['source'], item['span'])}")
        lines.extend(f"    artifact {_where(a)}" for a in item["artifacts"])
    for kind, items in (("invariant", chain["invariants"]), ("property", chain.get("properties", []))):
        for item in items:
            lines.append(f"  {kind} {item['name']}")
            lines.append(f"    source   {_span(chain['source'], item['span'])}")
            lines.extend(f"    artifact {_where(a)}" for a in item["artifacts"])
    return "\n".join(lines) + "\n"


def run(args: argparse.Namespace) -> int:
    from pactwright.cli._inputs import read_bundle_json

    trace = read_bundle_json(args.bundle, "trace.json")
    table = read_bundle_json(args.bundle, "transitions.json")
    try:
        labels = [args.clause] if args.clause else [str(c["clause"]) for c in trace["clauses"]]
        chains = [explain(trace, label) for label in labels]
        text = "".join(render(chain, table) for chain in chains) if args.format == "text" else ""
    except (KeyError, TypeError, IndexError, AttributeError, ValueError) as exc:
        # A bundle is input: a hand-edited or foreign trace is reported, not a crash.
        raise UsageError(
            f"`{args.bundle}` holds a `trace.json` or `transitions.json` that is not pactwright's "
            f"({type(exc).__name__}: {exc})"
        ) from None
    if args.format == "json":
        sys.stdout.write(json.dumps({"clauses": chains}, indent=2) + "\n")
    else:
        sys.stdout.write(text)
    return 0
