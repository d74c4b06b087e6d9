"""`pactwright diff`: semantic changes between policies or bundles, with clauses."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from pactwright.compiler.pipeline import check_text
from pactwright.compiler.semantic_diff import render_diff_text, semantic_diff
from tests.bundles import POLICIES

MILESTONE = (POLICIES / "marketplace_milestone.pact").read_text()


def _diff(old: str, new: str) -> dict:  # type: ignore[type-arg]
    a, b = check_text(old), check_text(new)
    assert a.candidate is not None and b.candidate is not None, (a.diagnostics, b.diagnostics)
    return semantic_diff(a.candidate.to_json(), b.candidate.to_json())


def test_reformatting_and_reordering_is_no_change() -> None:
    lines = MILESTONE.splitlines()
    # Move the invariants to the top (after the header) and collapse spacing.
    invariants = [i for i, line in enumerate(lines) if line.startswith('clause "7.')]
    start = invariants[0]
    moved = lines[:4] + lines[start:] + lines[4:start]
    new = "\n".join(line.replace("  ", " ") for line in moved) + "\n"
    assert _diff(MILESTONE, new)["changes"] == []


@pytest.mark.parametrize(
    ("old", "new", "section", "name", "clause", "field"),
    [
        ("fee to platform", "fee to seller", "transitions", "release", "4.1", "transfers"),
        (
            "when now >= delivered_at + refund_window",
            "when now > delivered_at + refund_window",
            "transitions",
            "auto_release",
            "4.2",
            "guard",
        ),
        ('clause "6.2" transition', 'clause "6.2a" transition', "transitions", "rule_for_buyer", "6.2a", "clause"),
        ("between 1.00 and 10000.00", "between 1.00 and 9999.99", "params", "price", None, "max"),
        (
            "by arbiter\n  transfer price from escrow to buyer",
            "by arbiter, buyer\n  transfer price from escrow to buyer",
            "transitions",
            "rule_for_buyer",
            "6.2",
            "roles",
        ),
        ("balance(escrow) >= 0", "balance(escrow) >= 1", "invariants", "escrow_never_negative", "7.1", "expr"),
    ],
)
def test_each_meaningful_change_is_reported_with_its_clause(
    old: str, new: str, section: str, name: str, clause: str | None, field: str
) -> None:
    assert old in MILESTONE
    diff = _diff(MILESTONE, MILESTONE.replace(old, new, 1))
    changes = [c for c in diff["changes"] if c["section"] == section and c["name"] == name]
    assert len(changes) == 1, diff["changes"]
    assert changes[0]["clause"] == clause
    assert field in {f["field"] for f in changes[0]["fields"]}
    assert f"{name}" in render_diff_text(diff)


def test_added_and_removed_transitions() -> None:
    start = MILESTONE.index('clause "6.3" transition rule_for_seller')
    end = MILESTONE.index('clause "7.1"')
    added = (
        'clause "6.4" transition settle_dispute: disputed -> released {\n'
        "  by arbiter\n  transfer price from escrow to seller\n}\n\n"
    )
    changed = MILESTONE[:start] + added + MILESTONE[end:].replace("applied(rule_for_seller)", "applied(settle_dispute)")
    diff = _diff(MILESTONE, changed)
    kinds = {(c["change"], c["name"], c["clause"]) for c in diff["changes"]}
    assert kinds == {
        ("removed", "rule_for_seller", "6.3"),
        ("added", "settle_dispute", "6.4"),
        ("changed", "settles_once", "7.2"),
    }
    text = render_diff_text(diff)
    assert "- transition rule_for_seller [clause 6.3]: removed" in text
    assert "+ transition settle_dispute [clause 6.4]: added" in text


def test_cli_diff_between_a_policy_and_its_bundle_and_json(tmp_path: Path) -> None:
    cli = [sys.executable, "-m", "pactwright.cli.main"]
    bundle = tmp_path / "bundle"
    subprocess.run(
        [*cli, "compile", str(POLICIES / "support_refund.pact"), "-o", str(bundle)], check=True, capture_output=True
    )
    same = subprocess.run(
        [*cli, "diff", str(POLICIES / "support_refund.pact"), str(bundle), "--exit-code"],
        capture_output=True,
        text=True,
    )
    assert same.returncode == 0
    assert "no semantic changes" in same.stdout
    changed = tmp_path / "changed.pact"
    changed.write_text((POLICIES / "support_refund.pact").read_text().replace("max_calls 1", "max_calls 2"))
    done = subprocess.run(
        [*cli, "diff", str(bundle), str(changed), "--format", "json", "--exit-code"], capture_output=True, text=True
    )
    assert done.returncode == 1
    diff = json.loads(done.stdout)
    effect = next(c for c in diff["changes"] if c["name"] == "refund_payment")
    assert effect["fields"] == [{"field": "max_calls", "old": "1", "new": "2"}]
    assert diff["old"]["candidate_hash"] != diff["new"]["candidate_hash"]
