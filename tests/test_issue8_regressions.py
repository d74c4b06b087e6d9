"""Regression tests for issue 8: no false pass, exact over amounts, honest at bounds.

Each of the issue's ten defects has its own small policy under
`tests/fixtures/issue8/` (or a textual variant of one, derived in the test),
and the tests assert the behaviour the issue asks for, not the behaviour
that was reported: a violation between the sampled amounts is found with its
exact amount, a command the ledger would refuse is reported as
`funds_available` and never appears inside a reported run, a bound that
stops the search gives `incomplete`, a money-moving effect retried after a
lost response breaks `effect_applied_once`, and the amount an effect carries
is the one it declares.

Verification runs in process (as in `test_planted_bugs.py`) except where the
exit code or the printed output is what the defect is about; then the CLI
runs in a subprocess.
"""

from __future__ import annotations

import dataclasses
import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

from pactwright.codes import CODES
from pactwright.compiler.bundle import compile_candidate
from pactwright.compiler.pipeline import check_bytes
from pactwright.verifier.explorer import Bounds
from pactwright.verifier.render_html import render_html
from pactwright.verifier.render_junit import render_junit
from pactwright.verifier.render_markdown import render_markdown
from pactwright.verifier.render_text import render_summary
from pactwright.verifier.verify import VerifyOptions, verify_files
from tests.test_planted_bugs import CASES

REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO / "tests" / "fixtures" / "issue8"
PLANTED = REPO / "tests" / "planted"
CLI = REPO / ".venv" / "bin" / "pactwright"

Report = dict[str, Any]

# The check blockers the issue adds (pactwright/codes.py).
NO_REVERSIBILITY = "PW155"
NO_KEY = "PW157"
UNKNOWN_PLACEHOLDER = "PW158"
REPORT_DIR_UNUSABLE = "PW307"


# helpers -------------------------------------------------------------------------


def _source(name: str) -> bytes:
    return (FIXTURES / name).read_bytes()


def _replace(source: bytes, old: str, new: str) -> bytes:
    """`source` with `old` replaced once; fails loudly if the fixture no longer has `old`."""
    text = source.decode("utf-8")
    assert text.count(old) == 1, f"fixture does not contain {old!r} exactly once"
    return text.replace(old, new).encode("utf-8")


def _blocker_codes(source: bytes) -> dict[str, str]:
    """Code -> message of every blocker `check` reports for `source`."""
    return {d.code: d.message for d in check_bytes(source).diagnostics if d.is_blocker}


def _files(source: bytes, name: str) -> dict[str, bytes]:
    result = check_bytes(source)
    assert result.ok, f"{name} has blockers: {_blocker_codes(source)}"
    assert result.candidate is not None
    return compile_candidate(result.candidate, result.source_map, name)


def _verify(
    source: bytes,
    name: str,
    *,
    max_depth: int = 64,
    proofs: bool = False,
    mutants: bool = False,
    allow_incomplete: bool = False,
) -> Report:
    options = VerifyOptions(bounds=Bounds(max_depth=max_depth), proofs=proofs, mutants=mutants)
    if allow_incomplete:
        options = dataclasses.replace(options, allow_incomplete=True)
    return verify_files(_files(source, name), options)


def _violated(report: Report) -> set[str]:
    return {i["name"] for i in report["invariants"] if i["verdict"] == "violated"}


def _invariant(report: Report, name: str) -> dict[str, Any]:
    found: dict[str, Any] = next(i for i in report["invariants"] if i["name"] == name)
    return found


def _counterexample(report: Report, invariant: str) -> dict[str, Any]:
    found: dict[str, Any] = report["counterexamples"][_invariant(report, invariant)["counterexample"]]
    return found


def _path(found: dict[str, Any]) -> list[str]:
    """The events of a counterexample that the runtime executes (the refused command excluded)."""
    return [e["command"] for e in found["events"] if e["kind"] != "refused"]


def _refused(found: dict[str, Any]) -> str | None:
    """The transition a `funds_available` counterexample ends with, the one the runtime refuses."""
    refused = found.get("refused")
    if isinstance(refused, str):
        return refused
    if isinstance(refused, dict):
        return str(refused.get("transition") or refused.get("command"))
    last = [e for e in found["events"] if e["kind"] == "refused"]
    return str(last[-1]["command"]).removeprefix("refused ") if last else None


def _minor(text: str) -> int:
    """A scale-2 amount as printed in a counterexample (`37.41`, `-0.50`) in minor units."""
    match = re.fullmatch(r"(-?)(\d+)\.(\d\d)", text)
    assert match, f"not an amount at scale 2: {text!r}"
    value = int(match.group(2)) * 100 + int(match.group(3))
    return -value if match.group(1) else value


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    if not CLI.exists():
        pytest.skip("the pactwright console script is not installed in .venv")
    return subprocess.run([str(CLI), *args], capture_output=True, text=True, timeout=300, check=False, cwd=REPO)


def _json_report(*args: str) -> tuple[int, Report]:
    done = _cli("verify", *args, "--format", "json")
    return done.returncode, json.loads(done.stdout)


# defect 1: amounts between the samples ---------------------------------------------------


def test_a_point_guard_fires_at_its_one_price_and_breaks_the_invariant() -> None:
    report = _verify(_source("point_guard.pact"), "point_guard.pact")
    assert report["verdict"] == "fail"
    assert "escrow_holds_price" in _violated(report)
    found = _counterexample(report, "escrow_holds_price")
    assert found["replayed"] is True
    assert found["params"][0]["price"] == "37.41"
    assert _path(found) == ["fund", "promo"]
    assert "promo" not in report["coverage"]["transitions_never_fired"]


def test_a_point_guard_overdraft_is_the_refused_release_at_that_price() -> None:
    report = _verify(_source("point_guard.pact"), "point_guard.pact")
    assert "funds_available" in _violated(report)
    found = _counterexample(report, "funds_available")
    assert found["params"][0]["price"] == "37.41"
    assert _refused(found) == "release"
    assert _path(found) == ["fund", "promo"]


def test_a_point_guard_violation_is_not_discarded_by_the_proofs() -> None:
    """The base step of k-induction once found this run and threw it away ("time guards ignored")."""
    report = _verify(_source("point_guard.pact"), "point_guard.pact", proofs=True)
    assert report["verdict"] == "fail"
    assert _invariant(report, "escrow_holds_price")["verdict"] == "violated"
    assert "time guards ignored" not in json.dumps(report)


def test_the_report_states_the_whole_declared_range() -> None:
    report = _verify(_source("point_guard.pact"), "point_guard.pact")
    assert "for every value of price in 1.00 .. 100.00" in json.dumps(report)


def test_two_params_that_must_be_equal_are_found_equal() -> None:
    report = _verify(_source("equal_params.pact"), "equal_params.pact")
    assert report["verdict"] == "fail"
    assert "seller_gets_something" in _violated(report)
    found = _counterexample(report, "seller_gets_something")
    assert found["replayed"] is True
    assert _path(found) == ["fund", "release"]
    price, fee = (_minor(found["params"][0][name]) for name in ("price", "fee"))
    assert price == fee
    assert 2000 <= fee <= 3000


def test_a_narrow_band_of_the_difference_of_two_params_is_found() -> None:
    report = _verify(_source("narrow_difference.pact"), "narrow_difference.pact")
    assert report["verdict"] == "fail"
    assert "seller_gets_the_minimum" in _violated(report)
    found = _counterexample(report, "seller_gets_the_minimum")
    assert found["replayed"] is True
    price, fee = (_minor(found["params"][0][name]) for name in ("price", "fee"))
    assert 0 < price - fee < 50


# defect 2: a stuck agreement ---------------------------------------------------------------


@pytest.mark.parametrize("proofs", [False, True], ids=["search", "with-proofs"])
def test_an_agreement_stuck_by_a_negative_payout_violates_funds_not_stuck(proofs: bool) -> None:
    report = _verify(_source("stuck_payout.pact"), "stuck_payout.pact", proofs=proofs)
    assert report["verdict"] == "fail"
    assert "funds_not_stuck" in _violated(report)
    found = _counterexample(report, "funds_not_stuck")
    params = found["params"][0]
    assert _minor(params["price"]) - _minor(params["fixed_fee"]) - _minor(params["partial"]) < 0
    assert _path(found) == ["fund"]


# defect 3: a bound that is hit -------------------------------------------------------------


def test_a_loop_past_the_default_depth_is_incomplete_not_pass() -> None:
    report = _verify(_source("pumping_loop.pact"), "pumping_loop.pact")
    assert report["verdict"] == "incomplete"
    assert report["complete"] is False
    assert report["allow_incomplete"] is False
    assert report["exploration"]["bound_hit"] == "max_depth"
    assert isinstance(report["exploration"]["unknown_queries"], int)
    warning = next(w for w in report["warnings"] if "max_depth" in w)
    assert "--max-depth" in warning
    assert "load" in warning  # the cycle that pumps the counters is named


def test_a_bigger_depth_finds_the_loop_violation() -> None:
    report = _verify(_source("pumping_loop.pact"), "pumping_loop.pact", max_depth=200)
    assert report["verdict"] == "fail"
    assert report["exploration"]["exhausted"] is True
    assert _violated(report) == {"lifetime_limit"}
    found = _counterexample(report, "lifetime_limit")
    # 41 loads, and the card holds three: 38 withdrawals between them.
    assert found["length"] == 79
    assert found["replayed"] is True


def test_allow_incomplete_passes_the_bounded_run_and_says_so() -> None:
    report = _verify(_source("pumping_loop.pact"), "pumping_loop.pact", allow_incomplete=True)
    assert report["verdict"] == "pass"
    assert report["complete"] is False
    assert report["allow_incomplete"] is True


def test_the_cli_exits_1_on_an_incomplete_run_and_names_the_flag() -> None:
    policy = str(FIXTURES / "pumping_loop.pact")
    done = _cli("verify", policy, "--no-mutants")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "incomplete" in done.stdout.lower()
    assert "--max-depth" in done.stdout
    code, report = _json_report(policy, "--no-mutants", "--max-depth", "200")
    assert code == 1
    assert report["verdict"] == "fail"
    code, report = _json_report(policy, "--no-mutants", "--allow-incomplete")
    assert code == 0
    assert report["verdict"] == "pass"
    assert report["allow_incomplete"] is True


@pytest.mark.parametrize("case", [c for c in CASES if c.max_depth > 64], ids=lambda c: c.name)
def test_a_planted_loop_bug_is_incomplete_at_the_default_depth(case: Any) -> None:
    path = PLANTED / f"{case.name}.bug.pact"
    report = _verify(path.read_bytes(), path.name)
    assert report["verdict"] == "incomplete"
    assert report["exploration"]["bound_hit"] == "max_depth"


# defect 4: money that leaves through an effect twice ---------------------------------------


def test_check_refuses_an_r3_effect_without_reversibility() -> None:
    source = _replace(_source("retry_payout.pact"), "  reversibility reversible\n", "")
    blockers = _blocker_codes(source)
    assert NO_REVERSIBILITY in blockers
    assert "reversibility" in blockers[NO_REVERSIBILITY]


def test_irreversible_retry_is_still_pw134() -> None:
    source = _replace(_source("retry_payout.pact"), "reversibility reversible", "reversibility irreversible")
    assert "PW134" in _blocker_codes(source)


def test_a_retried_money_moving_effect_violates_effect_applied_once() -> None:
    source = _source("retry_payout.pact")
    model = json.loads(_files(source, "retry_payout.pact")["model.json"])
    (effect,) = model["effects"]
    assert effect["money_moving"] is True
    (call,) = next(t for t in model["transitions"] if t["id"] == "release")["effects"]
    assert call["amount"]["op"] == "param" and call["amount"]["name"] == "price"
    report = _verify(source, "retry_payout.pact", proofs=True)
    assert report["verdict"] == "fail"
    assert "effect_applied_once" in _violated(report)
    found = _counterexample(report, "effect_applied_once")
    assert found["replayed"] is True
    assert [e["fault"] for e in found["events"] if e["fault"]] == ["lost_response"]
    assert _path(found) == [
        "fund",
        "release",
        "fault psp_payout",
        "runtime psp_payout",
        "dispatch psp_payout",
    ]


def test_an_r2_effect_with_reversibility_left_unset_is_money_moving() -> None:
    source = _replace(_source("retry_payout.pact"), "  risk R3\n  reversibility reversible\n", "  risk R2\n")
    assert NO_REVERSIBILITY not in _blocker_codes(source)
    report = _verify(source, "retry_payout_r2.pact")
    assert "effect_applied_once" in _violated(report)


# defect 5: counterexamples the runtime can execute -----------------------------------------


def _internal_accounts(files: dict[str, bytes]) -> set[str]:
    model = json.loads(files["model.json"])
    return {a["name"] for a in model["accounts"] if not a["external"]}


def _assert_every_run_executes(report: Report, internal: set[str]) -> None:
    """No event of a reported run posts a negative amount or leaves an internal account below zero."""
    for found in report["counterexamples"]:
        for event in found["events"]:
            if event["kind"] == "refused":
                continue
            assert all(int(p["amount"]) >= 0 for p in event["postings"]), event
            negative = {a: v for a, v in event["balances_after"].items() if a in internal and int(v) < 0}
            assert not negative, f"step {event['step']} ({event['command']}) leaves {negative}"


def test_the_unsafe_chargeback_is_the_refused_command() -> None:
    source = (REPO / "policies" / "unsafe_chargeback.pact").read_bytes()
    files = _files(source, "unsafe_chargeback.pact")
    report = verify_files(files, VerifyOptions(bounds=Bounds(), proofs=False, mutants=False))
    assert report["verdict"] == "fail"
    assert "funds_available" in _violated(report)
    assert "settles_once" not in _violated(report)  # the second settlement is never executed
    found = _counterexample(report, "funds_available")
    assert _path(found) == ["fund", "deliver", "release"]
    assert _refused(found) == "chargeback"
    assert found["length"] <= 4
    assert found["replayed"] is True
    _assert_every_run_executes(report, _internal_accounts(files))


def test_the_docs_say_what_the_runtime_refuses() -> None:
    verifier = (REPO / "docs" / "verifier.md").read_text("utf-8")
    for name in ("funds_available", "funds_not_stuck", "effect_applied_once"):
        assert name in verifier, f"docs/verifier.md does not describe `{name}`"
    assert "funds_available" in (REPO / "docs" / "language.md").read_text("utf-8")


# defect 6: the amount an effect carries is the declared one ---------------------------------


def test_the_ceiling_and_total_use_the_declared_amount() -> None:
    source = _source("ceiling_payout.pact")
    model = json.loads(_files(source, "ceiling_payout.pact")["model.json"])
    (call,) = next(t for t in model["transitions"] if t["id"] == "release")["effects"]
    assert call["amount"]["op"] == "param" and call["amount"]["name"] == "payout"
    report = _verify(source, "ceiling_payout.pact")
    assert report["verdict"] == "fail"
    assert "payout_total_within_80" in _violated(report)
    found = _counterexample(report, "payout_total_within_80")
    assert found["replayed"] is True
    assert 8000 < _minor(found["params"][0]["payout"]) <= 10000  # above 80.00, within the ceiling


def test_a_payout_above_the_ceiling_is_refused_and_reported() -> None:
    source = _replace(_source("ceiling_payout.pact"), "money between 1.00 and 150.00", "money = 120.49")
    report = _verify(source, "ceiling_payout_fixed.pact")
    assert report["verdict"] == "fail"
    assert "release" in report["coverage"]["transitions_never_fired"]
    assert "payout_total_within_80" not in _violated(report)
    assert "funds_not_stuck" in _violated(report)
    assert _counterexample(report, "funds_not_stuck")["params"][0]["payout"] == "120.49"


def test_a_refund_and_goodwill_credit_carries_their_sum() -> None:
    source = _source("refund_goodwill.pact")
    model = json.loads(_files(source, "refund_goodwill.pact")["model.json"])
    (call,) = next(t for t in model["transitions"] if t["id"] == "make_good")["effects"]
    assert call["amount"]["op"] == "+"
    assert [a.get("name") for a in call["amount"]["args"]] == ["refund", "goodwill"]
    report = _verify(source, "refund_goodwill.pact")
    assert "credits_within_40" in _violated(report)
    params = _counterexample(report, "credits_within_40")["params"][0]
    assert 4000 < _minor(params["refund"]) + _minor(params["goodwill"]) <= 5000


def test_check_refuses_idempotent_without_a_key() -> None:
    source = _replace(_source("ceiling_payout.pact"), "  key order_id\n", "")
    assert NO_KEY in _blocker_codes(source)


def test_check_refuses_a_consequence_placeholder_naming_no_field() -> None:
    source = _replace(_source("ceiling_payout.pact"), "for order {order_id}.", "for order {order_ref}.")
    blockers = _blocker_codes(source)
    assert UNKNOWN_PLACEHOLDER in blockers
    assert "order_ref" in blockers[UNKNOWN_PLACEHOLDER]


def test_the_new_blockers_are_registered_codes() -> None:
    for code in (NO_REVERSIBILITY, NO_KEY, UNKNOWN_PLACEHOLDER, REPORT_DIR_UNUSABLE):
        assert code in CODES


# defect 7: vacuity shown beside a proof -------------------------------------------------------


def _html_row(html: str, name: str) -> str:
    at = html.index(f'data-invariant="{name}"')
    return html[html.rindex("<tr", 0, at) : html.index("</tr>", at)]


def _junit_case(xml: str, name: str) -> str:
    at = xml.index(f'name="{name}"')
    return xml[xml.rindex("<testcase", 0, at) : xml.index("</testcase>", at)]


def test_a_proved_vacuous_invariant_is_shown_as_both_everywhere() -> None:
    report = _verify(_source("proved_vacuous.pact"), "proved_vacuous.pact", proofs=True, mutants=True)
    name = "world_only_pays_in"
    entry = _invariant(report, name)
    assert entry.get("vacuous_suspect") is True
    assert entry["verdict"] == "proved" or "k-induction" in entry["method"]
    suspects = [i["name"] for i in report["invariants"] if i.get("vacuous_suspect")]
    assert name in suspects

    text = render_summary(report, 2)
    assert f"vacuous-suspect: {len(suspects)}" in text
    assert any(name in line and "proved" in line and "vacuous" in line for line in text.splitlines())

    markdown = render_markdown(report)
    (row,) = [line for line in markdown.splitlines() if f"`{name}`" in line and line.startswith("|")]
    assert "proved" in row and "vacuous-suspect" in row

    html = render_html(report)
    assert "proved" in _html_row(html, name) and "vacuous-suspect" in _html_row(html, name)

    xml = render_junit(report)
    assert "vacuous-suspect" in _junit_case(xml, name)
    # The renderings count the same suspects.
    assert sum("vacuous-suspect" in _junit_case(xml, i["name"]) for i in report["invariants"]) == len(suspects)
    assert sum("vacuous-suspect" in _html_row(html, i["name"]) for i in report["invariants"]) == len(suspects)


# defect 8: no traceback for a bad report directory ---------------------------------------------


@pytest.mark.parametrize("where", ["existing-file", "under-dev-null"])
def test_an_unusable_report_dir_is_a_clean_usage_error(where: str, tmp_path: Path) -> None:
    target = tmp_path / "report.txt"
    target.write_text("not a directory\n")
    report_dir = str(target) if where == "existing-file" else "/dev/null/x"
    done = _cli("verify", str(REPO / "policies" / "unsafe_chargeback.pact"), "--report-dir", report_dir)
    assert done.returncode == 2, done.stdout + done.stderr
    assert REPORT_DIR_UNUSABLE in done.stderr
    assert "Traceback" not in done.stderr + done.stdout
    assert "internal error" not in done.stderr.lower()


# defect 9: no false alarms through refused commands ----------------------------------------------


def test_a_violation_only_through_a_refused_command_is_funds_available() -> None:
    source = _source("refused_only.pact")
    files = _files(source, "refused_only.pact")
    report = verify_files(files, VerifyOptions(bounds=Bounds(), proofs=False, mutants=False))
    assert report["verdict"] == "fail"
    assert "settled_once" not in _violated(report)
    assert "funds_available" in _violated(report)
    found = _counterexample(report, "funds_available")
    assert _path(found) == ["pay", "claim"]
    assert _refused(found) == "give_back"
    _assert_every_run_executes(report, _internal_accounts(files))


# defect 10: mutants stop at their first violation -------------------------------------------------


def test_a_caught_mutant_stops_exploring_at_its_first_violation() -> None:
    """Not a timing test: the mutant's recorded state count is below its full search's.

    Dropping the guard of `bonus` gives a mutant whose violation is three
    commands deep but whose space is unbounded (the search runs to the depth
    bound); the same policy without the guard, verified on its own, is that
    full search.
    """
    source = _source("mutant_early_stop.pact")
    report = _verify(source, "mutant_early_stop.pact", mutants=True)
    mutant = next(m for m in report["mutants"] if m["id"] == "drop-guard:bonus")
    assert mutant["status"] == "caught"
    assert "one_bonus" in mutant["caught_by"]
    unguarded = _replace(source, "  when fired(bonus) == 0\n", "")
    full = _verify(unguarded, "mutant_early_stop_unguarded.pact")
    assert "one_bonus" in _violated(full)
    assert mutant["states"] < full["exploration"]["states"]
    assert mutant["exhausted"] is False
