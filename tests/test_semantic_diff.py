"""`pactwright diff`: semantic changes between policies or bundles, with clauses,
and the safety downgrades among them (text, JSON and the CI exit code)."""

from __future__ import annotations

import copy
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from pactwright.cli.main import main as cli_main
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


# Safety downgrades ----------------------------------------------------------------

SMALL = """\
pact "test.downgrades" version "1.0.0"

currency EUR scale 2
default deny

role agent
role approver
role auditor
role helper untrusted

param amount: money between 0.01 and 100.00
param order_id: text matching "ORD-[0-9]{1,6}"

account merchant "merchant:refunds" external
account customer "customers:{order_id}"

budget {
  max_turns 4
  ceiling 100.00
}

rule R1 allow
rule R4 require_approval

effect pay {
  risk R4
  reversibility compensable
  max_calls 1
  ceiling 100.00
  strategy reconcilable
  key order_id, amount
  amount amount
}

effect notify {
  risk R1
  reversibility irreversible
  strategy once
}

state open initial
state paid final
state closed final

clause "1" transition pay_out: open -> paid {
  by agent
  when amount <= 50.00
  approval by approver not requester
  call pay
  transfer amount from merchant to customer
}

clause "2" transition close: open -> closed {
  by agent
  approval by auditor
  call notify amount amount
}

clause "3" invariant paid_once: applied(pay_out) <= 1
"""

# (edit of SMALL: old text -> new text, the one finding expected: kind, level, where, clause, before, after)
DOWNGRADES = [
    (
        "strategy reconcilable",
        "strategy retry",
        "strategy weakened",
        "downgrade",
        "effect pay",
        None,
        "reconcilable",
        "retry",
    ),
    (
        "strategy reconcilable",
        "strategy once",
        "strategy weakened",
        "downgrade",
        "effect pay",
        None,
        "reconcilable",
        "once",
    ),
    (
        "reversibility irreversible",
        "reversibility reversible",
        "reversibility changed",
        "downgrade",
        "effect notify",
        None,
        "irreversible",
        "reversible",
    ),
    (
        "reversibility compensable",
        "reversibility not_applicable",
        "reversibility changed",
        "downgrade",
        "effect pay",
        None,
        "compensable",
        "not_applicable",
    ),
    (
        "reversibility compensable",
        "reversibility irreversible",
        "reversibility changed",
        "review",
        "effect pay",
        None,
        "compensable",
        "irreversible",
    ),
    ("  approval by auditor\n", "", "approval dropped", "downgrade", "transition close", "2", "by auditor", "none"),
    (
        "approval by approver not requester",
        "approval by approver",
        "not requester dropped",
        "downgrade",
        "transition pay_out",
        "1",
        "by approver not requester",
        "by approver",
    ),
    (
        "approval by approver not requester",
        "approval by auditor not requester",
        "approval changed",
        "review",
        "transition pay_out",
        "1",
        "by approver not requester",
        "by auditor not requester",
    ),
    (
        "  when amount <= 50.00\n",
        "",
        "guard dropped",
        "downgrade",
        "transition pay_out",
        "1",
        "amount <= 50.00",
        "none",
    ),
    (
        "when amount <= 50.00",
        "when amount <= 60.00",
        "guard changed",
        "review",
        "transition pay_out",
        "1",
        "amount <= 50.00",
        "amount <= 60.00",
    ),
    (
        "  ceiling 100.00\n  strategy",
        "  ceiling 150.00\n  strategy",
        "ceiling raised",
        "downgrade",
        "effect pay",
        None,
        "100.00",
        "150.00",
    ),
    (
        "  ceiling 100.00\n  strategy",
        "  strategy",
        "ceiling removed",
        "downgrade",
        "effect pay",
        None,
        "100.00",
        "none",
    ),
    ("  ceiling 100.00\n}", "  ceiling 100.01\n}", "ceiling raised", "downgrade", "budget", None, "100.00", "100.01"),
    ("  ceiling 100.00\n}", "}", "ceiling removed", "downgrade", "budget", None, "100.00", "none"),
    ("max_turns 4", "max_turns 5", "max_turns raised", "downgrade", "budget", None, "4", "5"),
    ("max_calls 1", "max_calls 3", "max_calls raised", "downgrade", "effect pay", None, "1", "3"),
    ("  max_calls 1\n", "", "max_calls removed", "downgrade", "effect pay", None, "1", "none"),
    ("risk R4", "risk R1", "risk lowered", "downgrade", "effect pay", None, "R4", "R1"),
    (
        'clause "3" invariant paid_once: applied(pay_out) <= 1\n',
        "",
        "invariant dropped",
        "downgrade",
        "invariant paid_once",
        "3",
        "applied(pay_out) <= 1",
        "none",
    ),
    (
        "applied(pay_out) <= 1",
        "applied(pay_out) <= 2",
        "invariant changed",
        "review",
        "invariant paid_once",
        "3",
        "applied(pay_out) <= 1",
        "applied(pay_out) <= 2",
    ),
    (
        "key order_id, amount",
        "key order_id",
        "key reduced",
        "downgrade",
        "effect pay",
        None,
        "amount, order_id",
        "order_id",
    ),
    (
        "role helper untrusted",
        "role helper",
        "role made trusted",
        "downgrade",
        "role helper",
        None,
        "untrusted",
        "trusted",
    ),
    (
        "rule R4 require_approval",
        "rule R4 allow",
        "rule relaxed",
        "downgrade",
        "rule R4",
        None,
        "require_approval",
        "allow",
    ),
    (
        "rule R1 allow\n",
        "rule R1 allow\nrule R2 allow\n",
        "rule relaxed",
        "downgrade",
        "rule R2",
        None,
        "deny (no rule)",
        "allow",
    ),
]


def _edit(old: str, new: str) -> str:
    assert SMALL.count(old) == 1, old
    return SMALL.replace(old, new)


def _finding(row: tuple[str, ...]) -> dict[str, Any]:
    kind, level, where, clause, before, after = row[2:]
    return {"kind": kind, "level": level, "where": where, "clause": clause, "before": before, "after": after}


def _line(finding: dict[str, Any]) -> str:
    clause = f" [clause {finding['clause']}]" if finding["clause"] else ""
    return (
        f"{finding['level']}: {finding['where']}{clause}: {finding['kind']}: {finding['before']} -> {finding['after']}"
    )


@pytest.mark.parametrize("row", DOWNGRADES, ids=[f"{r[2]}:{r[4]}:{r[3]}" for r in DOWNGRADES])
def test_each_downgrade_is_flagged_alone_in_json_and_text(row: tuple[str, ...]) -> None:
    diff = _diff(SMALL, _edit(row[0], row[1]))
    assert diff["downgrades"] == [_finding(row)]
    text = render_diff_text(diff)
    assert _line(_finding(row)) in text.splitlines(), text
    assert "safety downgrades: 1 flagged" in text


@pytest.mark.parametrize(
    "row",
    [r for r in DOWNGRADES if r[3] == "downgrade" and r[2] != "reversibility changed"],
    ids=[f"{r[2]}:{r[4]}" for r in DOWNGRADES if r[3] == "downgrade" and r[2] != "reversibility changed"],
)
def test_the_reverse_of_a_downgrade_strengthens_and_is_not_flagged(row: tuple[str, ...]) -> None:
    """retry -> reconcilable, a ceiling lowered or added, an approval or guard added, a key extended..."""
    diff = _diff(_edit(row[0], row[1]), SMALL)
    assert diff["changes"], "the pair must differ"
    assert diff["downgrades"] == []
    assert "no safety downgrades" in render_diff_text(diff).splitlines()


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("strategy reconcilable", "strategy idempotent"),  # equally safe
        ("strategy reconcilable", "strategy compensate with notify"),
        ("  ceiling 100.00\n  strategy", "  ceiling 99.99\n  strategy"),
        ("max_calls 1", "max_calls 1\n  timeout 5s"),
        ("between 0.01 and 100.00", "between 0.01 and 90.00"),
        ("  by agent\n  approval by auditor", "  by agent, approver\n  approval by auditor"),
    ],
)
def test_other_changes_are_not_downgrades(old: str, new: str) -> None:
    diff = _diff(SMALL, _edit(old, new))
    assert diff["changes"] and diff["downgrades"] == []


def test_several_downgrades_are_listed_in_a_fixed_order_with_counts() -> None:
    new = SMALL
    for old_text, new_text in (
        ("strategy reconcilable", "strategy retry"),
        ("when amount <= 50.00", "when amount <= 60.00"),
        ("max_turns 4", "max_turns 5"),
        ('clause "3" invariant paid_once: applied(pay_out) <= 1\n', ""),
    ):
        new = new.replace(old_text, new_text)
    diff = _diff(SMALL, new)
    assert [(d["where"], d["kind"]) for d in diff["downgrades"]] == [
        ("budget", "max_turns raised"),
        ("transition pay_out", "guard changed"),
        ("invariant paid_once", "invariant dropped"),
        ("effect pay", "strategy weakened"),
    ]
    assert "safety downgrades: 4 flagged (3 downgrade, 1 review)" in render_diff_text(diff)


def test_a_removed_budget_removes_each_of_its_limits() -> None:
    diff = _diff(SMALL, _edit("budget {\n  max_turns 4\n  ceiling 100.00\n}\n", ""))
    assert [(d["where"], d["kind"], d["before"]) for d in diff["downgrades"]] == [
        ("budget", "ceiling removed", "100.00"),
        ("budget", "max_turns removed", "4"),
    ]


def test_ceilings_compare_across_scales_and_not_across_currencies() -> None:
    def ceilings(new: str) -> list[tuple[str, str, str, str, str]]:
        found = _diff(SMALL, new)["downgrades"]
        return [(d["where"], d["kind"], d["level"], d["before"], d["after"]) for d in found if "ceiling" in d["kind"]]

    # 100.00 at scale 2 (10000 minor units) is 100.000 at scale 3 (100000): not raised.
    finer = SMALL.replace("scale 2", "scale 3").replace("100.00", "100.000")
    assert ceilings(finer) == []
    raised = finer.replace("  ceiling 100.000\n}", "  ceiling 100.001\n}")
    assert ceilings(raised) == [("budget", "ceiling raised", "downgrade", "100.00", "100.001")]
    assert ceilings(SMALL.replace("currency EUR", "currency USD")) == []
    other = SMALL.replace("currency EUR", "currency USD").replace("  ceiling 100.00\n}", "  ceiling 1.00\n}")
    assert ceilings(other) == [("budget", "ceiling changed", "review", "100.00", "1.00")]


def _candidate(source: str) -> dict[str, Any]:
    result = check_text(source)
    assert result.candidate is not None, result.diagnostics
    return copy.deepcopy(result.candidate.to_json())


def test_unset_reversibility_and_strategy_count_as_weaker_than_declared() -> None:
    # Edited at the candidate level: `check` may refuse such an effect at a high risk class.
    old = _candidate(SMALL)
    new = copy.deepcopy(old)
    notify = next(e for e in new["effects"] if e["name"] == "notify")
    del notify["reversibility"]
    pay = next(e for e in new["effects"] if e["name"] == "pay")
    del pay["strategy"]
    found = {
        (d["where"], d["kind"], d["level"], d["before"], d["after"]) for d in semantic_diff(old, new)["downgrades"]
    }
    assert found == {
        ("effect notify", "reversibility changed", "downgrade", "irreversible", "none"),
        ("effect pay", "strategy weakened", "downgrade", "reconcilable", "once (unset)"),
    }
    # An unset reversibility still counts as moving money; declaring it `reversible` leaves that.
    back = copy.deepcopy(new)
    next(e for e in back["effects"] if e["name"] == "notify")["reversibility"] = "reversible"
    assert [(d["kind"], d["level"]) for d in semantic_diff(new, back)["downgrades"]] == [
        ("reversibility changed", "downgrade")
    ]


_PRICE = {"op": "param", "type": "money", "name": "amount"}
_HALF = {"op": "/", "type": "money", "args": [_PRICE, {"op": "lit", "type": "int", "value": "2"}]}


def test_a_changed_effect_amount_is_flagged_for_review() -> None:
    old = _candidate(SMALL)
    for effect in old["effects"]:
        effect["amount"] = _PRICE
    new = copy.deepcopy(old)
    next(e for e in new["effects"] if e["name"] == "pay")["amount"] = _HALF
    diff = semantic_diff(old, new)
    assert diff["downgrades"] == [
        {
            "kind": "amount changed",
            "level": "review",
            "where": "effect pay",
            "clause": None,
            "before": "amount",
            "after": "amount / 2",
        }
    ]
    assert "review: effect pay: amount changed: amount -> amount / 2" in render_diff_text(diff)


def test_a_changed_call_site_amount_is_flagged_and_rendered() -> None:
    old = _candidate(SMALL)
    new = copy.deepcopy(old)
    pay_out = next(t for t in new["transitions"] if t["name"] == "pay_out")
    pay_out["calls"] = [{"effect": "pay", "amount": _HALF}]
    diff = semantic_diff(old, new)
    assert diff["downgrades"] == [
        {
            "kind": "amount changed",
            "level": "review",
            "where": "transition pay_out call pay",
            "clause": "1",
            "before": "none",
            "after": "amount / 2",
        }
    ]
    text = render_diff_text(diff)
    assert "-> pay amount amount / 2" in text, text


def test_an_effect_amount_written_in_the_policy_is_compared() -> None:
    """Needs the `amount EXPR` effect field in the candidate (being built alongside)."""
    diff = _diff(SMALL, _edit("  amount amount\n}\n\neffect notify", "  amount amount / 2\n}\n\neffect notify"))
    assert [(d["where"], d["kind"], d["after"]) for d in diff["downgrades"]] == [
        ("effect pay", "amount changed", "amount / 2")
    ]


def test_cli_flags_downgrades_in_json_and_fails_only_when_asked(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    old, weaker, stronger = tmp_path / "old.pact", tmp_path / "weaker.pact", tmp_path / "stronger.pact"
    old.write_text(SMALL)
    weaker.write_text(_edit("strategy reconcilable", "strategy retry"))
    stronger.write_text(_edit("  ceiling 100.00\n  strategy", "  ceiling 80.00\n  strategy"))
    assert cli_main(["diff", str(old), str(weaker), "--format", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["downgrades"] == [
        {
            "kind": "strategy weakened",
            "level": "downgrade",
            "where": "effect pay",
            "clause": None,
            "before": "reconcilable",
            "after": "retry",
        }
    ]
    assert cli_main(["diff", str(old), str(weaker), "--fail-on-downgrade"]) == 1
    assert "downgrade: effect pay: strategy weakened: reconcilable -> retry" in capsys.readouterr().out
    assert cli_main(["diff", str(old), str(stronger), "--fail-on-downgrade"]) == 0
    assert "no safety downgrades" in capsys.readouterr().out
    assert cli_main(["diff", str(old), str(stronger), "--fail-on-downgrade", "--exit-code"]) == 1
    capsys.readouterr()
    # A `review` finding (a guard rewritten) also fails the gate: a person has to read it.
    guard = tmp_path / "guard.pact"
    guard.write_text(_edit("when amount <= 50.00", "when amount < 50.00"))
    assert cli_main(["diff", str(old), str(guard), "--fail-on-downgrade", "--format", "json"]) == 1
    assert [d["level"] for d in json.loads(capsys.readouterr().out)["downgrades"]] == ["review"]


# Renames: a transition or an effect renamed in the same edit hides nothing -------------


def _renamed(source: str, old_name: str, new_name: str) -> str:
    """`source` with the transition `old_name` called `new_name` everywhere (its invariant too)."""
    return re.sub(rf"\b{old_name}\b", new_name, source)


def _unlabelled(source: str) -> str:
    return re.sub(r'clause "[^"]*" transition', "transition", source)


def test_a_transition_renamed_under_its_clause_label_is_compared_with_its_old_version() -> None:
    new = _renamed(SMALL, "pay_out", "pay_refund").replace("  when amount <= 50.00\n", "")
    diff = _diff(SMALL, new)
    transition = next(c for c in diff["changes"] if c["section"] == "transitions")
    assert (transition["name"], transition["change"], transition["clause"]) == ("pay_refund", "changed", "1")
    assert (transition["renamed_from"], transition["matched_by"]) == ("pay_out", "clause")
    assert [f["field"] for f in transition["fields"]] == ["name", "guard"]
    assert transition["fields"][0] == {"field": "name", "old": "pay_out", "new": "pay_refund"}
    assert [c["change"] for c in diff["changes"]].count("changed") == 2  # and the invariant naming it
    assert not any(c["change"] in ("added", "removed") for c in diff["changes"])
    assert diff["downgrades"] == [
        {
            "kind": "guard dropped",
            "level": "downgrade",
            "where": "transition pay_refund (was pay_out)",
            "clause": "1",
            "before": "amount <= 50.00",
            "after": "none",
        },
        {
            "kind": "invariant changed",
            "level": "review",
            "where": "invariant paid_once",
            "clause": "3",
            "before": "applied(pay_out) <= 1",
            "after": "applied(pay_refund) <= 1",
        },
    ]
    text = render_diff_text(diff).splitlines()
    assert "~ transition pay_refund [clause 1]: changed (renamed, paired by clause label)" in text
    assert text[1:3] == ["    name: pay_out", "          -> pay_refund"]


def test_an_unlabelled_transition_renamed_pairs_by_sources_target_and_roles() -> None:
    old = _unlabelled(SMALL)
    new = _renamed(old, "close", "shut").replace("  approval by auditor\n", "")
    diff = _diff(old, new)
    [transition] = diff["changes"]
    assert (transition["name"], transition["renamed_from"], transition["matched_by"]) == ("shut", "close", "shape")
    assert [(d["kind"], d["where"]) for d in diff["downgrades"]] == [
        ("approval dropped", "transition shut (was close)")
    ]
    assert "~ transition shut: changed (renamed, paired by sources, target and roles)" in render_diff_text(diff)


def test_a_label_dropped_with_the_rename_still_pairs_by_sources_target_and_roles() -> None:
    new = _renamed(SMALL, "close", "shut").replace('clause "2" transition', "transition")
    new = new.replace("  approval by auditor\n", "")
    diff = _diff(SMALL, new)
    [transition] = diff["changes"]
    assert (transition["renamed_from"], transition["matched_by"], transition["clause"]) == ("close", "shape", None)
    assert {"field": "clause", "old": "2", "new": "none"} in transition["fields"]
    assert [d["kind"] for d in diff["downgrades"]] == ["approval dropped"]


def test_a_pure_rename_is_one_change_and_no_downgrade() -> None:
    diff = _diff(SMALL, _renamed(SMALL, "close", "shut"))
    assert [(c["name"], c["change"], c["fields"]) for c in diff["changes"]] == [
        ("shut", "changed", [{"field": "name", "old": "close", "new": "shut"}])
    ]
    assert diff["downgrades"] == []
    assert "0 added, 0 removed, 1 changed" in render_diff_text(diff)


@pytest.mark.parametrize(
    "relabel",
    [
        # Two different clause labels name two clauses: the author says they are different transitions.
        lambda source: _renamed(source, "close", "shut").replace('clause "2" transition', 'clause "2a" transition'),
        # Roles widened too: nothing is left to pair them by.
        lambda source: _renamed(_unlabelled(source), "close", "shut").replace(
            "  by agent\n  approval by auditor", "  by agent, approver\n  approval by auditor"
        ),
    ],
    ids=["other-label", "other-roles"],
)
def test_a_rename_with_nothing_left_to_pair_by_is_a_removal_and_an_addition(relabel: Any) -> None:
    old = SMALL if "2a" in relabel(SMALL) else _unlabelled(SMALL)
    diff = _diff(old, relabel(SMALL))
    assert {(c["change"], c["name"]) for c in diff["changes"]} == {("removed", "close"), ("added", "shut")}
    assert diff["downgrades"] == []


def test_renamed_transitions_pair_only_where_one_on_each_side_fits() -> None:
    """Two unlabelled transitions `open -> paid by agent` renamed at once: which is which cannot be told."""
    both = _unlabelled(SMALL) + "\ntransition settle: open -> paid {\n  by agent\n}\n"
    new = _renamed(_renamed(both, "settle", "settle_now"), "pay_out", "pay_refund")
    new = new.replace("  when amount <= 50.00\n", "")
    diff = _diff(both, new)
    changes = {(c["change"], c["name"]) for c in diff["changes"] if c["section"] == "transitions"}
    assert changes == {("removed", "settle"), ("removed", "pay_out"), ("added", "settle_now"), ("added", "pay_refund")}
    # Only one of the two renamed: it pairs with the one added transition of its shape.
    one = _renamed(both, "settle", "settle_now")
    [change] = [c for c in _diff(both, one)["changes"] if c["section"] == "transitions"]
    assert (change["name"], change.get("renamed_from")) == ("settle_now", "settle")


def test_a_call_to_a_renamed_effect_compares_the_two_effects_once() -> None:
    """`pay` renamed `pay_v2` with a weaker strategy; both transitions call it."""
    old = SMALL.replace("  call notify amount amount\n", "  call notify amount amount\n  call pay\n")
    new = re.sub(r"\bpay\b", "pay_v2", old).replace("strategy reconcilable", "strategy retry")
    diff = _diff(old, new)
    assert {(c["change"], c["name"]) for c in diff["changes"] if c["section"] == "effects"} == {
        ("removed", "pay"),
        ("added", "pay_v2"),
    }
    assert diff["downgrades"] == [
        {
            "kind": "strategy weakened",
            "level": "downgrade",
            "where": "transition close call pay_v2 (was pay)",
            "clause": "2",
            "before": "reconcilable",
            "after": "retry",
        }
    ]


def test_a_call_swapped_for_another_effect_reads_every_protection_of_the_two() -> None:
    """`pay_out` calls `notify` instead of `pay`, carrying the same amount (written at the call now)."""
    diff = _diff(SMALL, _edit("  call pay\n", "  call notify amount amount\n"))
    found = [(d["kind"], d["level"], d["before"], d["after"]) for d in diff["downgrades"]]
    assert found == [
        ("strategy weakened", "downgrade", "reconcilable", "once"),
        ("reversibility changed", "review", "compensable", "irreversible"),
        ("risk lowered", "downgrade", "R4", "R1"),
        ("key reduced", "downgrade", "amount, order_id", "none"),
        ("ceiling removed", "downgrade", "100.00", "none"),
        ("max_calls removed", "downgrade", "1", "none"),
    ]
    assert {d["where"] for d in diff["downgrades"]} == {"transition pay_out call notify (was pay)"}
    assert {d["clause"] for d in diff["downgrades"]} == {"1"}


def test_a_call_added_in_front_shifts_no_other_call() -> None:
    diff = _diff(SMALL, _edit("  call pay\n", "  call notify amount amount\n  call pay\n"))
    assert diff["changes"] and diff["downgrades"] == []


def test_two_calls_of_one_effect_are_named_by_their_rank() -> None:
    old = _edit("  call notify amount amount\n", "  call notify amount 1.00\n  call notify amount 2.00\n")
    new = old.replace("call notify amount 2.00", "call notify amount 3.00")
    assert [(d["where"], d["before"], d["after"]) for d in _diff(old, new)["downgrades"]] == [
        ("transition close call notify #2", "2.00", "3.00")
    ]
    # The same two calls swapped: each is compared with the call of its own rank.
    swapped = old.replace("amount 1.00\n  call notify amount 2.00", "amount 2.00\n  call notify amount 1.00")
    assert [(d["where"], d["before"], d["after"]) for d in _diff(old, swapped)["downgrades"]] == [
        ("transition close call notify #1", "1.00", "2.00"),
        ("transition close call notify #2", "2.00", "1.00"),
    ]


def test_not_requester_dropped_with_another_approver_is_both_a_review_and_a_downgrade() -> None:
    diff = _diff(SMALL, _edit("approval by approver not requester", "approval by auditor"))
    assert [(d["kind"], d["level"], d["before"], d["after"]) for d in diff["downgrades"]] == [
        ("approval changed", "review", "by approver not requester", "by auditor"),
        ("not requester dropped", "downgrade", "by approver not requester", "by auditor"),
    ]
