"""Planted bugs: the verifier finds each with its shortest counterexample, and passes its fix.

Every `tests/planted/NAME.bug.pact` has a fixed twin `NAME.fixed.pact` and a
row in `CASES` below: the invariants the bug violates (the policy's own and
the built-in ones, exactly), and the shortest counterexample's events, with
the reason no shorter path exists. Each bug is compiled and verified in
process within the default bounds; its counterexample must be that length,
those events, replayed; and a search bounded one step short of it must find
nothing, which checks "shortest" independently of the BFS that found it. The
fixed twin must pass with the state space exhausted.

The acceptance checks of the verifier's issue close the file: the unsafe
chargeback fixture, the two reference policies, and the support refund with
a `retry` (unsafe) or `reconcilable` (safe) payment effect.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from pactwright.canonical import load_json
from pactwright.compiler.bundle import compile_candidate
from pactwright.compiler.pipeline import check_bytes
from pactwright.diagnostics import Severity
from pactwright.verifier import counterexample as cx
from pactwright.verifier.explorer import Bounds, Explorer, Move
from pactwright.verifier.model import load_model
from pactwright.verifier.protocol import Phase
from pactwright.verifier.verify import VerifyOptions, verify_files

REPO = Path(__file__).resolve().parents[1]
PLANTED = REPO / "tests" / "planted"
POLICIES = REPO / "policies"
DAY = 86_400


@dataclass(frozen=True)
class Planted:
    """One planted bug: what the verifier must report for `NAME.bug.pact`."""

    name: str
    violated: frozenset[str]
    events: tuple[str, ...]
    why_shortest: str
    params: dict[str, str] = field(default_factory=dict)


CASES = [
    Planted(
        "deadline_exact_instant",
        frozenset({"shipped_is_never_cancelled"}),
        ("pay", "time passes +14d", "ship", "cancel"),
        "`ship` needs the stamp `paid_at` (pay) and the clock at the deadline; `cancel` must then leave `shipped`",
    ),
    Planted(
        "auto_release_from_dispute",
        frozenset({"disputes_settled_by_arbiter"}),
        ("fund", "deliver", "dispute", "time passes +7d", "auto_release"),
        "the dispute must open before the window closes and `auto_release` needs it closed: the clock sits between",
    ),
    Planted(
        "refund_after_settlement",
        frozenset({"escrow_never_negative", "paid_out_once", "no_negative_internal"}),
        ("pay", "settle", "refund"),
        "two payouts of one escrow need it funded, then both `settle` and `refund`",
    ),
    Planted(
        "fixed_fee_exceeds_price",
        frozenset({"seller_paid_on_release"}),
        ("fund", "deliver", "release"),
        "`release` is three commands from `draft`; the smallest price (1.00) is all fee",
        {"price": "1.00"},
    ),
    Planted(
        "retry_non_idempotent",
        frozenset({"payout_at_most_once", "effect_max_calls"}),
        ("pay", "fault send_payout (lost_response)", "runtime send_payout", "dispatch send_payout"),
        "a second application needs a first one whose response is lost, the runtime's retry, and a dispatch",
    ),
    Planted(
        "second_terminal_path",
        frozenset({"settles_once", "escrow_never_negative", "no_negative_internal"}),
        ("fund", "deliver", "release", "time passes +10d", "auto_close"),
        "both payouts need a delivered order (two commands), and `auto_close` waits for the clock",
    ),
    Planted(
        "once_loses_instalment",
        frozenset({"no_instalment_lost"}),
        ("pay_instalment", "next_period", "fault pay_supplier (provider_error)", "pay_instalment"),
        "two instalments committed (three commands) and one failed delivery; the abandoned path is one longer",
    ),
    Planted(
        "missing_balance_guard",
        frozenset({"escrow_never_negative", "no_negative_internal"}),
        ("fund", "start_work"),
        "the advance leaves escrow only after funding; the first sampled advance above the price is 200.00",
        {"price": "10.00", "advance": "200.00"},
    ),
    Planted(
        "percent_split_wrong_account",
        frozenset({"tax_collected"}),
        ("fund", "deliver", "release"),
        "the split happens only at `release`, three commands from `draft`",
    ),
    Planted(
        "approval_less_payout",
        frozenset({"payout_only_when_approved"}),
        ("review", "pay", "dispatch send_payout"),
        "`applied(send_payout)` needs `pay` (after `review`) and the worker's dispatch",
    ),
    Planted(
        "stranded_restocking_fee",
        frozenset({"escrow_empty_when_final"}),
        ("pay", "return_item"),
        "the escrow holds something only after `pay`; the return strands the fee",
        {"price": "5.00"},
    ),
    Planted(
        "rounding_stranded_cent",
        frozenset({"escrow_empty_when_final"}),
        ("fund", "deliver", "release"),
        "three commands to release; 1.00 splits exactly and 1.01 is the first sampled price that strands a cent",
        {"price": "1.01"},
    ),
    Planted(
        "refund_from_wrong_account",
        frozenset({"escrow_empty_when_final", "no_negative_internal"}),
        ("fund", "refund"),
        "`refund` leaves from `funded` only",
    ),
    Planted(
        "cancel_unpaid_refund",
        frozenset({"escrow_never_negative", "escrow_empty_when_final", "no_negative_internal"}),
        ("cancel",),
        "`cancel` is enabled in the initial state",
    ),
    Planted(
        "second_call_site",
        frozenset({"voucher_at_most_once", "effect_max_calls"}),
        ("make_good", "goodwill", "dispatch issue_voucher", "dispatch issue_voucher"),
        "two vouchers need both call sites committed and both dispatched",
    ),
    Planted(
        "courier_paid_refund",
        frozenset({"escrow_never_negative", "escrow_empty_when_final", "no_negative_internal"}),
        ("pay", "ship", "refund_lost_parcel"),
        "`refund_lost_parcel` leaves from `shipped`, two commands from `placed`",
    ),
    Planted(
        "approval_on_wrong_transition",
        frozenset({"payout_only_when_approved"}),
        ("approve review", "review", "pay", "dispatch send_claim_payment"),
        "`review` needs its approval, then `pay` and the worker's dispatch",
    ),
]


def _event(event: dict[str, Any]) -> str:
    text: str = event["command"]
    return f"{text} ({event['fault']})" if event["fault"] else text


def _files(source: bytes, name: str) -> dict[str, bytes]:
    result = check_bytes(source)
    errors = [d for d in result.diagnostics if d.severity == Severity.ERROR]
    assert result.ok and not errors, f"{name} has blockers: {errors}"
    assert result.candidate is not None
    return compile_candidate(result.candidate, result.source_map, name)


def _verify(source: bytes, name: str, bounds: Bounds | None = None) -> dict[str, Any]:
    options = VerifyOptions(bounds=bounds or Bounds(), proofs=False, mutants=False)
    return verify_files(_files(source, name), options)


@functools.cache
def _report(path: Path) -> dict[str, Any]:
    return _verify(path.read_bytes(), path.name)


def _violated(report: dict[str, Any]) -> set[str]:
    return {i["name"] for i in report["invariants"] if i["verdict"] == "violated"}


def _counterexample(report: dict[str, Any], invariant: str) -> dict[str, Any]:
    entry = next(i for i in report["invariants"] if i["name"] == invariant)
    found: dict[str, Any] = report["counterexamples"][entry["counterexample"]]
    return found


# the table covers the directory ---------------------------------------------------


def test_every_planted_bug_has_a_fixed_twin_and_a_row() -> None:
    bugs = sorted(p.name.removesuffix(".bug.pact") for p in PLANTED.glob("*.bug.pact"))
    fixed = sorted(p.name.removesuffix(".fixed.pact") for p in PLANTED.glob("*.fixed.pact"))
    assert bugs == fixed
    assert bugs == sorted(case.name for case in CASES)
    assert len(bugs) >= 16


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_the_bug_is_described_at_the_top_of_its_file(case: Planted) -> None:
    bug = (PLANTED / f"{case.name}.bug.pact").read_text("utf-8")
    fixed = (PLANTED / f"{case.name}.fixed.pact").read_text("utf-8")
    assert bug.startswith("# PLANTED BUG: ")
    assert "A reviewer should see:" in bug and "Fix:" in bug
    assert fixed.startswith(f"# FIXED twin of {case.name}.bug.pact")
    for name in case.violated - {"no_negative_internal", "effect_max_calls"}:
        assert re.search(rf"invariant {name}\b", bug), f"`{name}` is not an invariant of the bug policy"


# each bug, shortest -----------------------------------------------------------------


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_the_bug_is_found_with_its_shortest_counterexample(case: Planted) -> None:
    report = _report(PLANTED / f"{case.name}.bug.pact")
    assert report["verdict"] == "fail"
    assert report["exploration"]["exhausted"]
    assert _violated(report) == case.violated
    # One path shows every violation of the planted bug.
    assert len(report["counterexamples"]) == 1
    found = report["counterexamples"][0]
    assert set(found["invariants"]) == case.violated
    assert found["replayed"] is True
    assert found["length"] == len(found["events"]) == len(case.events), case.why_shortest
    assert tuple(_event(e) for e in found["events"]) == case.events
    for name, value in case.params.items():
        assert found["params"][0][name] == value


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_nothing_shorter_violates(case: Planted) -> None:
    """Bounded one step short of the counterexample, the search finds no violation at all."""
    path = PLANTED / f"{case.name}.bug.pact"
    report = _verify(path.read_bytes(), path.name, Bounds(max_depth=len(case.events) - 1))
    assert report["verdict"] == "pass", case.why_shortest
    assert report["exploration"]["bound_hit"] == "max_depth"


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_the_fixed_twin_passes_with_the_space_exhausted(case: Planted) -> None:
    report = _report(PLANTED / f"{case.name}.fixed.pact")
    assert report["verdict"] == "pass"
    assert report["exploration"]["exhausted"] is True
    assert report["exploration"]["bound_hit"] is None
    assert report["counterexamples"] == []
    assert {i["verdict"] for i in report["invariants"]} == {"holds-to-bound"}


# strategies in detail ----------------------------------------------------------------


def _explorer(source: bytes, name: str) -> Explorer:
    model = load_model(load_json(_files(source, name)["model.json"]))
    return Explorer(model, Bounds())


def test_once_abandoning_a_lost_request_loses_the_instalment_too() -> None:
    """The shortest path uses a provider error; the abandoned path is explored and violates as well."""
    path = PLANTED / "once_loses_instalment.bug.pact"
    explorer = _explorer(path.read_bytes(), path.name)
    moves = [
        Move("command", 0, "treasurer", "pay_instalment"),
        Move("fault", 0, "worker", "pay_supplier", fault="lost_request", site=0),
        Move("runtime", 0, "runtime", "pay_supplier", site=0),
        Move("command", 0, "treasurer", "next_period"),
        Move("command", 0, "treasurer", "pay_instalment"),
    ]
    states = cx.simulate(explorer, explorer.initial_states()[0], moves)
    assert states is not None, "the abandoned path is not a path of the model"
    _, blocks = explorer.split(states[3])
    assert blocks[0][explorer.layout.phase] == Phase.ABANDONED_UNCERTAIN
    assert "no_instalment_lost" in {name for name, _ in explorer.check_state(states[-1])}
    phases = _report(path)["coverage"]["effect_phases"]["pay_instalment:pay_supplier"]
    assert "abandoned_uncertain" in phases
    fixed = _report(PLANTED / "once_loses_instalment.fixed.pact")
    assert "abandoned_uncertain" not in fixed["coverage"]["effect_phases"]["pay_instalment:pay_supplier"]


PROBE = PLANTED / "compensation_probe.pact"


def _after_capture(explorer: Explorer) -> tuple[int, ...]:
    """The agreement after `ship` committed and the payment capture was acknowledged."""
    moves = [Move("command", 0, "clerk", "ship"), Move("dispatch", 0, "worker", "capture_payment", site=0)]
    states = cx.simulate(explorer, explorer.initial_states()[0], moves)
    assert states is not None
    return explorer.split(states[-1])[1][0]


@pytest.mark.parametrize(("strategy", "compensated"), [("once", True), ("idempotent", False), ("reconcilable", False)])
def test_a_provider_error_compensates_earlier_steps_only_when_the_step_is_given_up(
    strategy: str, compensated: bool
) -> None:
    """Regression: an error that the strategy goes on to retry used to void the capture."""
    source = PROBE.read_text("utf-8").replace("  strategy once\n", f"  strategy {strategy}\n")
    explorer = _explorer(source.encode(), PROBE.name)
    block = _after_capture(explorer)
    after = next(
        new for move, new, _, _ in explorer.local_moves(block) if move.fault == "provider_error" and move.site == 1
    )
    expected = Phase.COMPENSATION_REQUIRED if compensated else Phase.ACKNOWLEDGED
    assert after[explorer.layout.phase] == expected


def test_an_abandoned_step_does_not_compensate_twice() -> None:
    """Regression: the fault and then the runtime's abandonment each voided the capture (2 > max_calls 1)."""
    report = _report(PROBE)
    assert "effect_max_calls" not in _violated(report)
    assert "compensated" in report["coverage"]["effect_phases"]["ship:capture_payment"]


def test_a_compensation_is_visible_to_invariants() -> None:
    report = _report(PROBE)
    assert "booked_parcels_are_paid" in _violated(report)
    found = _counterexample(report, "booked_parcels_are_paid")
    assert [_event(e) for e in found["events"]] == [
        "ship",
        "dispatch capture_payment",
        "fault book_courier (lost_response)",
        "compensate void_capture",
    ]


# acceptance checks of the issue ------------------------------------------------------


def test_unsafe_chargeback_is_refused_with_the_four_event_path() -> None:
    report = _report(POLICIES / "unsafe_chargeback.pact")
    assert report["verdict"] == "fail"
    assert {"escrow_never_negative", "settles_once"} <= _violated(report)
    found = _counterexample(report, "escrow_never_negative")
    assert found is _counterexample(report, "settles_once")
    assert [e["command"] for e in found["events"]] == ["fund", "deliver", "release", "chargeback"]
    assert found["length"] == 4
    assert found["replayed"] is True


@pytest.mark.parametrize("name", ["marketplace_milestone", "support_refund"])
def test_the_reference_policies_hold_within_default_bounds(name: str) -> None:
    report = _report(POLICIES / f"{name}.pact")
    assert report["verdict"] == "pass"
    assert report["exploration"]["exhausted"] is True
    assert report["bounds"] == {"agreements": 1, "faults": 1, "max_depth": 64, "max_states": 2_000_000}
    assert all(i["verdict"] == "holds-to-bound" for i in report["invariants"])
    assert len(report["invariants"]) > 4


def _support_refund(strategy: str) -> bytes:
    """support_refund.pact with a reversible payment effect under `strategy`."""
    text = (POLICIES / "support_refund.pact").read_text("utf-8")
    edited = text.replace("  reversibility irreversible\n", "  reversibility reversible\n", 1)
    edited = re.sub(r"(?m)^  strategy reconcilable\b.*$", f"  strategy {strategy}", edited)
    assert edited.count("reversibility reversible") == 1
    assert edited.count(f"strategy {strategy}") == 1 + (strategy == "retry")  # read_order retries too
    return edited.encode()


def test_a_retried_refund_is_applied_twice_after_a_lost_response() -> None:
    report = _verify(_support_refund("retry"), "support_refund_retry.pact")
    assert report["verdict"] == "fail"
    assert "refund_at_most_once" in _violated(report)
    found = _counterexample(report, "refund_at_most_once")
    assert found["replayed"] is True
    assert "lost_response" in [e["fault"] for e in found["events"]]
    # assess, approve, issue, the lost response, the runtime's retry, the second dispatch.
    assert [_event(e) for e in found["events"]] == [
        "assess",
        "approve issue",
        "issue",
        "fault refund_payment (lost_response)",
        "runtime refund_payment",
        "dispatch refund_payment",
    ]


def test_a_reconcilable_refund_holds_and_reconciliation_is_explored() -> None:
    report = _verify(_support_refund("reconcilable"), "support_refund_reconcilable.pact")
    assert report["verdict"] == "pass"
    assert report["exploration"]["exhausted"] is True
    assert "refund_at_most_once" not in _violated(report)
    phases = set(report["coverage"]["effect_phases"]["issue:refund_payment"])
    assert {"needs_reconciliation", "abandoned_uncertain"} <= phases
    assert phases & {"reconciled_recovered", "reconciled_not_occurred"}
