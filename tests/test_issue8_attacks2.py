"""Second round of attacks on the promises of issue 8, each a failing-first test of the correct behaviour.

Every test below states what the documentation promises (docs/verifier.md,
docs/language.md, docs/reports.md, docs/cli.md) and, in its comment, what
the code did when the test was written. The policies are a few lines each,
compiled and verified in process where that is possible; the signing test
drives the real commands, as a release pipeline would.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from pactwright.bundle_check import check_report, read_bundle
from pactwright.canonical import canonical_bytes, hash_bytes, load_json
from pactwright.cli.main import main as cli_main
from pactwright.compiler.bundle import compile_candidate
from pactwright.compiler.pipeline import check_bytes, check_text
from pactwright.compiler.semantic_diff import semantic_diff
from pactwright.diagnostics import Severity
from pactwright.errors import PactwrightError
from pactwright.verifier.explorer import Bounds
from pactwright.verifier.verify import VerifyOptions, verify_files

FAST = ("--no-proofs", "--no-mutants")


def _files(source: str, name: str = "attack.pact") -> dict[str, bytes]:
    result = check_bytes(source.encode("utf-8"))
    errors = [d for d in result.diagnostics if d.severity == Severity.ERROR]
    assert result.ok and not errors, f"{name} has blockers: {errors}"
    assert result.candidate is not None
    return compile_candidate(result.candidate, result.source_map, name)


def _verify(source: str, bounds: Bounds | None = None, *, allow_incomplete: bool = False) -> dict[str, Any]:
    options = VerifyOptions(bounds=bounds or Bounds(), mutants=False, proofs=False, allow_incomplete=allow_incomplete)
    return verify_files(_files(source), options)


def _violated(report: dict[str, Any]) -> set[str]:
    return {i["name"] for i in report["invariants"] if i["verdict"] == "violated"}


def _downgrades(old: str, new: str) -> list[dict[str, Any]]:
    a, b = check_text(old), check_text(new)
    assert a.candidate is not None and b.candidate is not None, (a.diagnostics, b.diagnostics)
    found: list[dict[str, Any]] = semantic_diff(a.candidate.to_json(), b.candidate.to_json())["downgrades"]
    return found


# claim 1: a hit bound is never a signed pass ------------------------------------------

WALLET = """pact "attack.wallet" version "1.0.0"
currency EUR scale 2
role owner
param unit: money = 10.00
account world  "world" external
account wallet "wallet:{agreement}"
account owner  "owners:{owner}:payable"
state open initial
state closed final
clause "1" transition top_up: open -> open {
  by owner
  transfer unit from world to wallet
}
clause "2" transition close: open -> closed {
  by owner
  when balance(wallet) == 0
}
clause "3" invariant wallet_never_negative: balance(wallet) >= 0
"""


def _rewrite_report(bundle: Path, **changes: Any) -> None:
    """Edit report.json and rebind the manifest to it, as anyone with write access to the bundle can."""
    report = load_json((bundle / "report.json").read_bytes())
    report.update(changes)
    data = canonical_bytes(report)
    (bundle / "report.json").write_bytes(data)
    manifest = load_json((bundle / "manifest.json").read_bytes())
    for entry in manifest["artifacts"]:
        if entry["path"] == "report.json":
            entry["sha256"], entry["size"] = hash_bytes(data), len(data)
    manifest["report"]["hash"] = hash_bytes(data)
    manifest["report"]["verdict"] = report["verdict"]
    (bundle / "manifest.json").write_bytes(canonical_bytes(manifest))


def test_sign_refuses_a_report_whose_complete_flag_contradicts_its_own_exploration(tmp_path: Path) -> None:
    """A report stopped by `max_depth`, flipped to `complete: true`, must not be signable.

    Expected: `sign` (check_report) refuses with PW419: the report itself says
    `exploration.bound_hit == "max_depth"`, `exhausted: false`, every invariant
    `holds-to-bound` (none proved) and `allow_incomplete: false`, so by the
    completeness rule (docs/verifier.md "Verdicts") it is incomplete whatever
    its `complete` field says; the same kind of edit that drops
    `allow_incomplete` is already refused. Actual: `_check_complete` reads
    only the `complete` field, so the edited report passes and `pactwright
    sign` signs the bundle (checked by hand: "signed attack.wallet 1.0.0").
    """
    (tmp_path / "wallet.pact").write_text(WALLET, encoding="utf-8")
    bundle = tmp_path / "b"
    built = cli_main(["build", str(tmp_path / "wallet.pact"), "-o", str(bundle), *FAST, "--max-depth", "8"])
    assert built == 1  # incomplete, as it should be
    report = load_json((bundle / "report.json").read_bytes())
    assert report["exploration"]["bound_hit"] == "max_depth" and report["allow_incomplete"] is False
    assert not any(i["verdict"] == "proved" for i in report["invariants"])
    _rewrite_report(bundle, verdict="pass", complete=True)
    with pytest.raises(PactwrightError) as refused:
        check_report(read_bundle(bundle))
    assert refused.value.code == "PW419"


# A loop that never ends, and a command that is refused two steps in: the run FAILS and is bounded.
LOOP_AND_REFUSAL = """pact "attack.loop_refusal" version "1.0.0"
currency EUR scale 2
role owner
account world  "world" external
account wallet "wallet:{agreement}"
account owner  "owners:{owner}:payable"
state open initial
state closed final
clause "1" transition top_up: open -> open {
  by owner
  transfer 1 from world to wallet
}
clause "2" transition drain: open -> closed {
  by owner
  when fired(top_up) >= 1
  transfer 100 from wallet to owner
}
"""


@pytest.mark.parametrize("allow", [False, True])
def test_a_failing_bounded_run_never_tells_the_reader_its_verdict_is_pass_or_incomplete(allow: bool) -> None:
    """The warnings of a FAIL must not contradict the verdict.

    Expected: verdict `fail`; no warning says the verdict is `incomplete` or
    `pass`. Actual: `_completeness.bound_warnings` adds "the verdict is
    `incomplete`: ..." (without the flag) or "the run is incomplete; the
    verdict is `pass` because a bounded result was accepted" (with
    `--allow-incomplete`) whenever `complete` is false, even when an invariant
    is violated; the text summary then prints that warning just above
    `verdict: FAIL`, and report.md and report.html list it too.
    """
    report = _verify(LOOP_AND_REFUSAL, Bounds(max_depth=4), allow_incomplete=allow)
    assert report["verdict"] == "fail"
    assert "funds_available" in _violated(report)
    misleading = [w for w in report["warnings"] if "verdict is `pass`" in w or "verdict is `incomplete`" in w]
    assert misleading == []


# claim 3: the amount an effect carries is exactly the declared one ---------------------

COMPENSATED = """pact "attack.compensated" version "1.0.0"
currency EUR scale 2
default deny
role agent
param amount: money between 1.00 and 500.00
param order_id: text matching "ORD-[0-9]{1,3}"
account merchant "merchant" external
account customer "customers:{order_id}"
rule R2 allow
rule R4 allow
effect hold {
  risk R4
  reversibility compensable
  strategy compensate with undo
  key order_id, amount
  amount amount
}
effect undo {
  risk R2
  reversibility reversible
  strategy retry
  ceiling 10.00
  amount 1.00
}
effect pay {
  risk R4
  reversibility irreversible
  strategy once
  key order_id
  amount amount
}
state requested initial
state done final
state declined final
clause "2" transition issue: requested -> done {
  by agent
  call hold
  call pay
  transfer amount from merchant to customer
}
clause "3" transition decline: requested -> declined {
  by agent
}
clause "4" invariant undo_as_declared: total(undo) <= 1.00
"""


def test_a_compensating_effect_carries_what_it_declares_or_check_says_it_cannot() -> None:
    """`undo` declares `amount 1.00` and `ceiling 10.00`; neither is honoured, and nothing says so.

    Expected (docs/language.md "Effects that move money": "`ceiling`,
    `total(EFFECT)` and the approval preview use exactly that amount"):
    either `check` refuses or warns that a compensating effect's own
    `amount`/`ceiling` is not what it carries, or the model counts
    `total(undo)` with the declared 1.00 and refuses a compensation above its
    ceiling. Actual: `check` is silent, and the verifier counts the amount of
    the undone `hold` call (docs/verifier.md, "compensate" row): it reports
    `undo_as_declared` violated with total(undo) = 147.09, a compensation
    fourteen times over `undo`'s own ceiling that nothing refused.
    """
    result = check_bytes(COMPENSATED.encode("utf-8"))
    flagged = [d for d in result.diagnostics if "undo" in d.message]
    if flagged:
        return
    report = _verify(COMPENSATED)
    assert "undo_as_declared" not in _violated(report)


# claim 6: diff flags safety downgrades ----------------------------------------------------

REFUND = """pact "attack.refund" version "1.0.0"
currency EUR scale 2
default deny
role agent
role approver
param amount: money between 0.01 and 500.00
param order_id: text matching "ORD-[0-9]{1,12}"
param reason: one of damaged, wrong_item
account merchant "merchant:refunds" external
account customer "customers:{order_id}:card"
rule R4 require_approval
effect refund_payment {
  risk R4
  reversibility irreversible
  strategy reconcilable
  key order_id, amount
  amount amount
  ceiling 500.00
}
state assessed initial
state refunded final
state declined final
clause "2" transition issue: assessed -> refunded {
  by agent
  when reason != wrong_item
  approval by approver not requester
  call refund_payment
  transfer amount from merchant to customer
}
clause "3" transition decline: assessed -> declined {
  by agent
}
clause "4" invariant refund_capped: balance(customer) <= 500.00
"""


def test_renaming_a_transition_does_not_hide_a_dropped_guard() -> None:
    """Same clause "2", same sources, target, roles, transfer and call; only the name and the guard differ.

    Expected: a `guard dropped` downgrade (at least a `review`) for clause 2,
    so `diff --fail-on-downgrade` fails the pull request. Actual: the diff
    shows `- transition issue` / `+ transition issue_refund` and "no safety
    downgrades"; `--fail-on-downgrade` exits 0, because only items present on
    both sides under the same name are compared.
    """
    new = REFUND.replace("transition issue:", "transition issue_refund:").replace("  when reason != wrong_item\n", "")
    found = _downgrades(REFUND, new)
    assert any("guard" in d["kind"] for d in found), found


def test_moving_a_call_to_a_renamed_effect_does_not_hide_a_weaker_strategy() -> None:
    """`issue` keeps its call site; the effect it calls is renamed and its strategy weakened to `once`.

    Expected: a `strategy weakened` downgrade (reconcilable -> once) for the
    payment `issue` makes, or at least a review of the call site's new
    effect. Actual: "no safety downgrades": the old effect is `removed`, the
    new one `added`, and `transition issue` changes only its `calls` field,
    which no downgrade rule reads.
    """
    new = REFUND.replace("refund_payment", "pay_refund").replace("strategy reconcilable", "strategy once")
    found = _downgrades(REFUND, new)
    assert any(d["kind"] == "strategy weakened" for d in found), found


TWO_CALLS = """pact "attack.two_calls" version "1.0.0"
currency EUR scale 2
default deny
role agent
role approver
param order_id: text matching "ORD-[0-9]{1,3}"
account merchant "merchant" external
account customer "customers:{order_id}"
rule R4 require_approval
effect pay {
  risk R4
  reversibility irreversible
  strategy reconcilable
  key order_id
  ceiling 100.00
}
state requested initial
state done final
clause "2" transition issue: requested -> done {
  by agent
  approval by approver not requester
  call pay amount 10.00
  call pay amount 20.00
  transfer 30.00 from merchant to customer
}
"""


def test_two_calls_of_one_effect_with_unchanged_amounts_are_not_reported_as_an_amount_change() -> None:
    """Widening `by` leaves both call amounts as they were.

    Expected: no `amount changed` entry. Actual: "review: transition issue
    call pay [clause 2]: amount changed: 20.00 -> 10.00": `_transition` keys
    the old call amounts by effect name, so the second call's 20.00 is
    compared with the first call's 10.00.
    """
    new = TWO_CALLS.replace("  by agent\n", "  by agent, approver\n")
    found = _downgrades(TWO_CALLS, new)
    assert [d for d in found if d["kind"] == "amount changed"] == []


def test_a_raised_amount_at_the_first_of_two_calls_is_reported_with_its_own_old_value() -> None:
    """The first call's amount goes from 10.00 to 90.00.

    Expected: `amount changed: 10.00 -> 90.00`. Actual: `amount changed:
    20.00 -> 90.00` (the old value shown is the other call's).
    """
    new = TWO_CALLS.replace("call pay amount 10.00", "call pay amount 90.00")
    changed = [(d["before"], d["after"]) for d in _downgrades(TWO_CALLS, new) if d["kind"] == "amount changed"]
    assert changed == [("10.00", "90.00")]


def test_dropping_not_requester_is_a_downgrade_even_when_the_approver_role_changes_too() -> None:
    """`approval by approver not requester` -> `approval by agent`: the requester may now approve itself.

    Expected: a `not requester dropped` entry at level `downgrade` (the table
    in docs/cli.md). Actual: only `review: approval changed`; the `elif`
    chain in `_transition` stops at the role change, so the certain
    downgrade is reported as a maybe.
    """
    new = TWO_CALLS.replace("approval by approver not requester", "approval by agent")
    found = _downgrades(TWO_CALLS, new)
    assert any(d["kind"] == "not requester dropped" and d["level"] == "downgrade" for d in found), found
