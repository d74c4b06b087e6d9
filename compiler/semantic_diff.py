"""Semantic diff of two candidates: what a reviewer must read in a pull request.

The diff compares meaning, not text: transitions, guards, postings, effects,
invariants, params, states, accounts, roles and rules, each keyed by name,
reported as added, removed or changed with the clause labels involved.
Reformatting a policy yields an empty diff.
"""

from __future__ import annotations

from typing import Any

from pactwright.expr_text import render_expr
from pactwright.money import format_duration, format_money

Json = dict[str, Any]

_SECTIONS = ("transitions", "invariants", "params", "effects", "states", "accounts", "roles", "rules")


def _key(section: str, item: Json) -> str:
    return str(item["risk"] if section == "rules" else item["name"])


def _describe(section: str, field: str, value: Any, scale: int, item: Json | None = None) -> str:
    """A reviewer-readable rendering of one field's value.

    Amounts are shown in currency units at the scale of the side they come
    from (the candidate keeps minor units: `150` at scale 2 is `1.50`),
    percents with `%` and durations as `1d12h`.
    """
    if value is None:
        return "none"
    if field in ("guard", "expr", "amount") and isinstance(value, dict):
        return render_expr(value, scale)
    if field == "transfers":
        return "; ".join(_transfer(t, scale) for t in value) or "none"
    kind = _kind(section, field, item)
    if kind is not None and isinstance(value, str | int) and not isinstance(value, bool):
        return _value(kind, value, scale)
    if field == "egress" and isinstance(value, list):
        return ", ".join(f"{e.get('method')} {e.get('url')}" for e in value if isinstance(e, dict)) or "none"
    if field == "strategy" and isinstance(value, dict):
        kind_text = str(value.get("kind"))
        return f"{kind_text} with {value['compensation']}" if value.get("compensation") else kind_text
    if isinstance(value, list):
        return ", ".join(str(v) for v in value) or "none"
    if isinstance(value, dict):
        return ", ".join(f"{k}={_describe(field, k, v, scale)}" for k, v in sorted(value.items()))
    return str(value)


def _kind(section: str, field: str, item: Json | None) -> str | None:
    """`money`, `percent` or `duration` when the field holds such a value."""
    if section == "params" and field in ("min", "max", "value") and item is not None:
        kind = item.get("type")
        return kind if kind in ("money", "percent", "duration") else None
    if section in ("effects", "budget") and field == "ceiling":
        return "money"
    if (section, field) in (("effects", "timeout"), ("budget", "max_active_time")):
        return "duration"
    return None


def _value(kind: str, value: str | int, scale: int) -> str:
    try:
        if kind == "money":
            return format_money(int(value), scale)
        if kind == "duration":
            return format_duration(int(value))
    except ValueError:
        return str(value)
    return f"{value}%"


def _transfer(transfer: Json, scale: int) -> str:
    head = f"{render_expr(transfer['amount'], scale)} from {transfer['source']}"
    if transfer.get("destination"):
        return f"{head} to {transfer['destination']}"
    parts = []
    for portion in transfer.get("portions", []):
        if portion["kind"] == "remaining":
            share = "remaining"
        elif portion.get("param"):
            share = str(portion["param"])
        else:
            share = _value("percent" if portion["kind"] == "percent" else "money", portion.get("value", ""), scale)
        parts.append(f"{share} to {portion['to']}")
    return f"{head} {{ {', '.join(parts)} }}"


def semantic_diff(old: Json, new: Json) -> Json:
    """Changes from `old` to `new` candidate JSON, grouped by section."""
    changes: list[Json] = []
    # Each side's amounts are read at that side's scale.
    old_scale, new_scale = _scale(old), _scale(new)
    for field in ("pact", "currency", "budget", "default"):
        if old.get(field) != new.get(field):
            changes.append(
                {
                    "section": "policy",
                    "name": field,
                    "change": "changed",
                    "clause": None,
                    "fields": [
                        {
                            "field": field,
                            "old": _describe("policy", field, old.get(field), old_scale),
                            "new": _describe("policy", field, new.get(field), new_scale),
                        }
                    ],
                }
            )
    for section in _SECTIONS:
        before = {_key(section, item): item for item in old.get(section, [])}
        after = {_key(section, item): item for item in new.get(section, [])}
        for name in sorted(before.keys() | after.keys()):
            a, b = before.get(name), after.get(name)
            if a == b:
                continue
            clause = (b or a or {}).get("clause")
            if a is None or b is None:
                present = b if a is None else a
                assert present is not None
                changes.append(
                    {
                        "section": section,
                        "name": name,
                        "change": "added" if a is None else "removed",
                        "clause": clause,
                        "fields": [],
                        "summary": _summary(section, present, new_scale if a is None else old_scale),
                    }
                )
                continue
            fields = [
                {
                    "field": f,
                    "old": _describe(section, f, a.get(f), old_scale, a),
                    "new": _describe(section, f, b.get(f), new_scale, b),
                }
                for f in sorted(a.keys() | b.keys())
                if f != "name" and a.get(f) != b.get(f)
            ]
            changes.append({"section": section, "name": name, "change": "changed", "clause": clause, "fields": fields})
    return {
        "old": {"pact": old.get("pact"), "candidate_hash": None},
        "new": {"pact": new.get("pact"), "candidate_hash": None},
        "changes": changes,
    }


def _scale(candidate: Json) -> int:
    scale = candidate.get("currency", {}).get("scale", 2)
    return scale if isinstance(scale, int) and not isinstance(scale, bool) else 2


def _summary(section: str, item: Json, scale: int) -> str:
    if section == "transitions":
        text = f"{', '.join(item['sources'])} -> {item['target']} by {', '.join(item['roles'])}"
        if item.get("guard"):
            text += f" when {render_expr(item['guard'], scale)}"
        if item.get("transfers"):
            text += f"; transfer {_describe(section, 'transfers', item['transfers'], scale)}"
        if item.get("stamps"):
            text += f"; stamp {', '.join(item['stamps'])}"
        if item.get("calls"):
            text += f"; call {', '.join(item['calls'])}"
        approval = item.get("approval")
        if isinstance(approval, dict):
            text += f"; approval by {approval.get('role')}{' not requester' if approval.get('not_requester') else ''}"
        return text
    if section == "invariants":
        return render_expr(item["expr"], scale)
    return ", ".join(f"{k}={_describe(section, k, v, scale, item)}" for k, v in sorted(item.items()) if k != "name")


def render_diff_text(diff: Json) -> str:
    """The diff as lines a reviewer reads top to bottom."""
    if not diff["changes"]:
        return "no semantic changes\n"
    lines: list[str] = []
    marks = {"added": "+", "removed": "-", "changed": "~"}
    for change in diff["changes"]:
        clause = f" [clause {change['clause']}]" if change.get("clause") else ""
        singular = change["section"].rstrip("s") if change["section"] != "policy" else "policy"
        lines.append(f"{marks[change['change']]} {singular} {change['name']}{clause}: {change['change']}")
        if change.get("summary"):
            lines.append(f"    {change['summary']}")
        for field in change["fields"]:
            lines.append(f"    {field['field']}: {field['old']}")
            lines.append(f"    {' ' * len(field['field'])}  -> {field['new']}")
    counts = {kind: sum(1 for c in diff["changes"] if c["change"] == kind) for kind in ("added", "removed", "changed")}
    lines.append(f"{counts['added']} added, {counts['removed']} removed, {counts['changed']} changed")
    return "\n".join(lines) + "\n"
