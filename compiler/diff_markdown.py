"""`pactwright diff --format markdown`: the semantic diff as a pull-request comment.

The same facts as the text form (`semantic_diff.render_diff_text`), laid out
for a reviewer reading a comment on a code host: the safety downgrades come
first, since they are what must not be merged unseen, then one table row
per changed field. Every value is shown as code, so a policy's own text
(an expression, a name with `*` or `|` in a comment) can never render as
markup or break the table.
"""

from __future__ import annotations

import re
from typing import Any

from pactwright.compiler.semantic_diff import PAIRED_BY

Json = dict[str, Any]
_MARKS = {"added": "added", "removed": "removed", "changed": "changed"}


def code(text: object) -> str:
    """`text` as one inline code span that survives a GFM table cell: backticks fenced, pipes escaped."""
    value = " ".join(str(text).split()) or " "
    longest = max((len(run) for run in re.findall(r"`+", value)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if value.startswith("`") or value.endswith("`") else ""
    return f"{fence}{pad}{value}{pad}{fence}".replace("|", "\\|")


def _downgrades(downgrades: list[Json]) -> list[str]:
    if not downgrades:
        return ["No safety downgrades."]
    certain = sum(1 for d in downgrades if d["level"] == "downgrade")
    lines = [
        f"**Safety downgrades: {len(downgrades)} flagged** ({certain} downgrade, {len(downgrades) - certain} review)",
        "",
        "| Level | Where | Clause | What | Before | After |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for d in downgrades:
        clause = code(d["clause"]) if d.get("clause") else ""
        lines.append(f"| **{d['level']}** | {code(d['where'])} | {clause} | {code(d['kind'])} | "
                     f"{code(d['before'])} | {code(d['after'])} |")  # fmt: skip
    return lines


def _changes(changes: list[Json]) -> list[str]:
    if not changes:
        return ["No semantic changes."]
    lines = ["| Change | Section | Name | Clause | Field | Old | New |", "| --- | --- | --- | --- | --- | --- | --- |"]
    for change in changes:
        clause = code(change["clause"]) if change.get("clause") else ""
        paired = PAIRED_BY.get(str(change.get("matched_by")))
        kind = _MARKS[change["change"]] + (f" (renamed, paired by {paired})" if paired else "")
        head = f"| {kind} | {change['section']} | {code(change['name'])} | {clause} |"
        if not change["fields"]:
            summary = code(change["summary"]) if change.get("summary") else ""
            old, new = (summary, "") if change["change"] == "removed" else ("", summary)
            lines.append(f"{head} | {old} | {new} |")
        for field in change["fields"]:
            lines.append(f"{head} {code(field['field'])} | {code(field['old'])} | {code(field['new'])} |")
    counts = {kind: sum(1 for c in changes if c["change"] == kind) for kind in _MARKS}
    lines.extend(["", f"{counts['added']} added, {counts['removed']} removed, {counts['changed']} changed"])
    return lines


def render_diff_markdown(diff: Json, old_label: str, new_label: str) -> str:
    """The diff of `old_label` -> `new_label` (paths as the caller named them) as GitHub-flavoured Markdown."""
    old, new = diff["old"], diff["new"]
    lines = [
        f"**pactwright diff**: {code(old['pact']['id'])} {code(old['pact']['version'])} -> "
        f"{code(new['pact']['id'])} {code(new['pact']['version'])}",
        "",
        f"- old: {code(old_label)} {code(old['candidate_hash'])}",
        f"- new: {code(new_label)} {code(new['candidate_hash'])}",
        "",
        *_downgrades(diff.get("downgrades", [])),
        "",
        *_changes(diff["changes"]),
    ]
    return "\n".join(lines) + "\n"
