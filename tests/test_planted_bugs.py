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
    # What the reviewer is shown where the runtime refuses the overdraft the bug was planted for: the
    # command the policy offers that can never commit, and why that is the mistake to fix.
    finding: str = ""
    # The depth the row is verified at: the default, or more for a bug whose shortest path is longer.
    max_depth: int = 64
    # Findings of the same bug on another path (their own counterexample), named in the bug's header.
    also: frozenset[str] = frozenset()


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
        frozenset({"funds_available"}),
        ("pay", "settle", "refused refund"),
        "the refund is short of funds only once `settle` has emptied the escrow, which needs `pay` first;"
        " from `paid` the escrow covers it",
        finding="support is offered a refund of a settled order that can never be paid: the runtime refuses it,"
        " so the second payout (`paid_out_once`, a negative escrow) never happens on a run it executes",
    ),
    Planted(
        "fixed_fee_exceeds_price",
        frozenset({"seller_paid_on_release"}),
        ("fund", "deliver", "release"),
        "`release` is three commands from `draft`; the smallest price (1.00) is all fee",
        {"price": "1.00"},
    ),
    Planted(
        "nested_fee_leaves_seller_nothing",
        frozenset({"seller_paid_on_release"}),
        ("fund", "deliver", "release"),
        "`release` is three commands from `draft`; at 2.51 the cent after the fee rounds to the platform",
        {"price": "2.51"},
    ),
    Planted(
        "retry_non_idempotent",
        frozenset({"payout_at_most_once", "effect_max_calls", "effect_applied_once"}),
        ("pay", "fault send_payout (lost_response)", "runtime send_payout", "dispatch send_payout"),
        "a second application needs a first one whose response is lost, the runtime's retry, and a dispatch",
    ),
    Planted(
        "second_terminal_path",
        frozenset({"funds_available"}),
        ("fund", "deliver", "release", "time passes +10d", "refused auto_close"),
        "`auto_close` is short of funds only after `release` (three commands) emptied the escrow, and it waits"
        " for the clock; from `delivered` the escrow covers it",
        finding="the scheduler's `auto_close` is offered on a released order and refused every time: the second"
        " settlement (`settles_once`, a negative escrow) never executes, but the copied source list is the bug",
    ),
    Planted(
        "confirm_before_acknowledged",
        frozenset({"confirmed_only_when_refunded"}),
        ("refund", "confirm"),
        "`confirm` leaves `dispatched`, which only `refund` reaches; its guard holds while the refund is prepared",
    ),
    Planted(
        "once_loses_instalment",
        frozenset({"no_instalment_lost"}),
        ("pay_instalment", "next_period", "fault pay_supplier (provider_error)", "pay_instalment"),
        "two instalments committed (three commands) and one failed delivery; the abandoned path is one longer",
        # After a lost request `once` abandons the payment, and the runtime refuses the next instalment
        # for good (PW526): the agreement can never complete.
        also=frozenset({"funds_not_stuck"}),
    ),
    Planted(
        "missing_balance_guard",
        frozenset({"funds_available"}),
        ("fund", "refused start_work"),
        "the advance leaves escrow only after funding; any advance above the price is refused (the price is"
        " pulled to its lower bound 10.00; the advance is the solver's, above it)",
        {"price": "10.00"},
        finding="without the guard `start_work` is offered for every advance above the price and the runtime"
        " refuses it: the work can never start; the escrow never goes negative on an executed run",
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
        frozenset({"funds_available"}),
        ("fund", "refused refund"),
        "`refund` leaves from `funded` only, and `platform` holds nothing there (its fee arrives with `release`)",
        finding="the refund draws on the platform's empty fee account, so it is refused every time (`refund`"
        " never fires): no buyer can be refunded, and no refunded order is left with money in escrow",
    ),
    Planted(
        "cancel_unpaid_refund",
        frozenset({"funds_available"}),
        ("refused cancel",),
        "`cancel` is enabled in the initial state, where the escrow holds nothing",
        finding="an unpaid order cannot be cancelled at all: the one clause refunds money the escrow never"
        " received, and the runtime refuses it",
    ),
    Planted(
        "second_call_site",
        frozenset({"voucher_at_most_once"}),
        ("make_good", "goodwill", "dispatch issue_voucher", "dispatch issue_voucher"),
        "two vouchers need both call sites committed and both dispatched",
    ),
    Planted(
        "courier_paid_refund",
        frozenset({"funds_available"}),
        ("pay", "ship", "refused refund_lost_parcel"),
        "`refund_lost_parcel` leaves from `shipped`, two commands from `placed`",
        finding="the full refund is short by the courier fee for every price, so it is refused every time"
        " (`refund_lost_parcel` never fires): a buyer whose parcel is lost cannot be refunded",
    ),
    Planted(
        "approval_on_wrong_transition",
        frozenset({"payout_only_when_approved"}),
        ("approve review", "review", "pay", "dispatch send_claim_payment"),
        "`review` needs its approval, then `pay` and the worker's dispatch",
    ),
    Planted(
        "promo_exact_amount",
        frozenset({"funds_available"}),
        ("fund", "refused release_promo"),
        "the promotion is enabled only in `funded`, one command from `open`, and only at price 19.99",
        {"price": "19.99"},
    ),
    Planted(
        "courtesy_credit_band",
        frozenset({"funds_available"}),
        ("fund", "ship_with_credit", "refused release"),
        "the credit leaves the escrow when a funded order ships; only then is the release short of funds",
    ),
    Planted(
        "fee_equals_price",
        frozenset({"seller_paid_on_release"}),
        ("fund", "deliver", "release"),
        "`release` is three commands from `draft`, and only price == fee leaves the seller 0.00",
    ),
    Planted(
        "payout_below_minimum",
        frozenset({"seller_payout_at_least_minimum"}),
        ("fund", "deliver", "release"),
        "`release` is three commands from `draft`, and only 0.00 < price - fee < 1.00 pays less than the minimum",
    ),
    Planted(
        "damage_claim_exceeds_deposit",
        frozenset({"funds_available"}),
        ("pay", "inspect", "refused claim_full"),
        "the claim is enabled only once the deposit is paid and inspected",
    ),
    Planted(
        "stuck_after_partial_refund",
        frozenset({"funds_not_stuck"}),
        ("fund", "refund_shipping"),
        "the release guard turns false only after a shipping refund, which needs a funded order",
    ),
    Planted(
        "negative_payout_stuck",
        frozenset({"funds_not_stuck"}),
        ("fund",),
        "a funded order that cannot cover its costs has nowhere to go; before `fund` nothing is held",
    ),
    Planted(
        "prepaid_lifetime_load",
        frozenset({"lifetime_load_limit"}),
        ("load", "load", *("withdraw", "load") * 34),
        "36 loads break the limit and the card holds two at most, so 34 withdrawals come between them;"
        " breadth-first order loads as soon as the card has room",
        max_depth=100,
    ),
    Planted(
        "payout_retry_without_key",
        frozenset({"paid_out_once", "effect_applied_once"}),
        ("fund", "release", "fault psp_payout (lost_response)", "runtime psp_payout", "dispatch psp_payout"),
        "a second payout needs a committed release, a first payout whose response is lost, the retry and a dispatch",
    ),
    Planted(
        "payout_above_ceiling",
        frozenset({"funds_not_stuck"}),
        ("fund",),
        "a funded order above the provider's ceiling can never be released; before `fund` nothing is held",
    ),
    Planted(
        "goodwill_over_ceiling",
        frozenset({"credit_within_limit"}),
        ("make_good",),
        "`make_good` credits the card in the initial state; the ceiling sees only the refund",
    ),
    Planted(
        "partial_refund_above_price",
        frozenset({"never_refund_above_price"}),
        ("pay", "ship", "refund_part"),
        "the refund is paid only after the order is paid and shipped; the smallest partial above a price is"
        " 1.01 over a price of 1.00 (the fix bounds `partial` by `price`, new in 1.1)",
        params={"partial": "1.01", "price": "1.00"},
    ),
    Planted(
        "single_approver_four_eyes",
        frozenset({"four_eyes"}),
        ("approve issue", "issue", "dispatch refund_payment"),
        "the refund takes effect only once `issue` committed (one approval, then the command) and its call was"
        " delivered; the fix needs two approvals (`approvals(issue)`, new in 1.1)",
    ),
]


def _minor(text: str) -> int:
    """A scale-2 amount as a counterexample prints it (`250.73`) in minor units."""
    units, cents = text.split(".")
    return int(units) * 100 + int(cents)


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
def _report(path: Path, max_depth: int = 64) -> dict[str, Any]:
    return _verify(path.read_bytes(), path.name, Bounds(max_depth=max_depth))


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
    assert bugs == sorted([*(case.name for case in CASES), *LIVENESS, *LIMITS])
    assert len(bugs) >= 27  # seventeen pairs, and ten more for exact amounts, stuck funds, loops and effects


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_the_bug_is_described_at_the_top_of_its_file(case: Planted) -> None:
    bug = (PLANTED / f"{case.name}.bug.pact").read_text("utf-8")
    fixed = (PLANTED / f"{case.name}.fixed.pact").read_text("utf-8")
    assert bug.startswith("# PLANTED BUG: ")
    assert "A reviewer should see:" in bug and "Fix:" in bug
    assert fixed.startswith(f"# FIXED twin of {case.name}.bug.pact")
    builtin = {"no_negative_internal", "effect_max_calls", "funds_available", "funds_not_stuck", "effect_applied_once"}
    for name in case.violated - builtin:
        assert re.search(rf"invariant {name}\b", bug), f"`{name}` is not an invariant of the bug policy"


# each bug, shortest -----------------------------------------------------------------


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_the_bug_is_found_with_its_shortest_counterexample(case: Planted) -> None:
    report = _report(PLANTED / f"{case.name}.bug.pact", case.max_depth)
    assert report["verdict"] == "fail"
    assert report["exploration"]["exhausted"]
    assert _violated(report) == case.violated | case.also, case.finding or case.why_shortest
    # One path shows every violation of the planted bug (the findings `also` have their own).
    assert len(report["counterexamples"]) == 1 + len(case.also)
    found = next(c for c in report["counterexamples"] if set(c["invariants"]) == case.violated)
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
    assert not _violated(report) - case.also, case.why_shortest
    # Nothing violated, but a bound stopped the search: that is not a pass.
    assert report["verdict"] == ("fail" if _violated(report) else "incomplete")
    assert report["exploration"]["bound_hit"] == "max_depth"


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_the_fixed_twin_passes_with_the_space_exhausted(case: Planted) -> None:
    report = _report(PLANTED / f"{case.name}.fixed.pact", case.max_depth)
    assert report["verdict"] == "pass"
    assert report["exploration"]["exhausted"] is True
    assert report["exploration"]["bound_hit"] is None
    assert report["counterexamples"] == []
    assert {i["verdict"] for i in report["invariants"]} == {"holds-to-bound"}


# liveness (new in 1.1) ---------------------------------------------------------------

# Planted bugs a liveness property finds: name -> (property, lasso events, state it stutters in).
LIVENESS = {
    "escrow_silent_buyer": ("funded_is_closed", ("fund", "time passes"), "funded"),
    # A refund that can stay parked forever: reconciliation waits for an operator, who is not obliged to act.
    "refund_parked_forever": (
        "refund_is_answered",
        ("fund", "time passes", "refund", "fault lost_request refund_payment", "runtime refund_payment", "time passes"),
        "refunded",
    ),
}


@pytest.mark.parametrize("name", sorted(LIVENESS))
def test_a_liveness_bug_is_found_with_its_lasso_and_its_fix_holds(name: str) -> None:
    prop, events, stutters_in = LIVENESS[name]
    bug = (PLANTED / f"{name}.bug.pact").read_text("utf-8")
    assert bug.startswith("# PLANTED BUG: ") and "A reviewer should see:" in bug and "Fix:" in bug
    report = _report(PLANTED / f"{name}.bug.pact")
    assert report["verdict"] == "fail" and not _violated(report)
    entry = next(p for p in report["properties"] if p["name"] == prop)
    assert entry["verdict"] == "violated"
    lasso = entry["lasso"]
    assert tuple(e["move"] for e in lasso["events"]) == events
    assert lasso["stuttering"] and lasso["last_state"] == stutters_in
    # Bounded before the run stops, nothing is found, and that is not a pass.
    short = _verify(bug.encode(), name, Bounds(max_depth=1))
    assert next(p for p in short["properties"] if p["name"] == prop)["verdict"] == "incomplete"
    assert short["verdict"] == "incomplete" and short["complete"] is False
    fixed = _report(PLANTED / f"{name}.fixed.pact")
    assert fixed["verdict"] == "pass" and fixed["exploration"]["exhausted"]
    assert {p["verdict"] for p in fixed["properties"]} == {"holds"}


def test_the_liveness_policy_holds_its_two_properties() -> None:
    report = _report(POLICIES / "escrow_liveness.pact")
    assert {p["name"]: p["verdict"] for p in report["properties"]} == {
        "funded_is_settled": "holds",
        "refund_is_answered": "holds",
    }


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
    # A fault is never refused at commit (only a command is), so the move has a new block.
    assert after is not None
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
    """The chargeback is the refused command; the second settlement and the overdraft never execute.

    `released` is not final and its one way out is the refused chargeback,
    so the seller's and the platform's shares are also held in a state no
    command can leave (`funds_not_stuck`, one event shorter).
    """
    report = _report(POLICIES / "unsafe_chargeback.pact")
    assert report["verdict"] == "fail"
    assert report["exploration"]["exhausted"] is True
    assert _violated(report) == {"funds_available", "funds_not_stuck"}
    found = _counterexample(report, "funds_available")
    assert [_event(e) for e in found["events"]] == ["fund", "deliver", "release", "refused chargeback"]
    assert found["events"][-1]["kind"] == "refused"
    assert found["length"] == 4
    assert found["replayed"] is True
    stuck = _counterexample(report, "funds_not_stuck")
    assert [_event(e) for e in stuck["events"]] == ["fund", "deliver", "release"]
    assert stuck["replayed"] is True


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
    """The refund carries `amount`, so it moves money: a retry breaks `effect_applied_once` as well.

    Applied twice, a refund above half the ceiling also takes the total
    past 500.00, at other values of `amount` and so on its own path.
    """
    report = _verify(_support_refund("retry"), "support_refund_retry.pact")
    assert report["verdict"] == "fail"
    assert _violated(report) == {
        "refund_at_most_once",
        "effect_applied_once",
        "effect_max_calls",
        "refund_within_ceiling",
    }
    found = _counterexample(report, "refund_at_most_once")
    assert set(found["invariants"]) == {"refund_at_most_once", "effect_applied_once", "effect_max_calls"}
    assert found["replayed"] is True
    over = _counterexample(report, "refund_within_ceiling")
    assert over["replayed"] is True
    assert 2 * _minor(over["params"][0]["amount"]) > 500_00
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


# limits across agreements (new in 1.1) ------------------------------------------------

LIMITS = ("desk_limit_crossed",)


def test_a_desk_limit_crossed_by_two_agreements_is_found_and_its_fix_holds() -> None:
    """With two agreements the bug's two same-day refunds cross the limit; its fix holds; one agreement
    says the limit was not checked across agreements, never that it holds."""
    path = PLANTED / "desk_limit_crossed.bug.pact"
    report = _verify(path.read_bytes(), path.name, Bounds(agreements=2))
    assert report["verdict"] == "fail"
    (limit,) = report["limits"]
    assert limit["name"] == "limit:desk_daily" and limit["verdict"] == "violated"
    found = report["counterexamples"][limit["counterexample"]]
    assert found["replayed"] is True
    assert [e["command"] for e in found["events"]].count("refund") == 2
    assert len({e["agreement"] for e in found["events"]}) == 2
    fixed = PLANTED / "desk_limit_crossed.fixed.pact"
    passing = _verify(fixed.read_bytes(), fixed.name, Bounds(agreements=2))
    assert passing["verdict"] == "pass" and passing["limits"][0]["verdict"] == "holds-to-bound"
    single = _verify(path.read_bytes(), path.name, Bounds())
    assert single["limits"][0]["verdict"] == "not-checked-across-agreements"
    assert "not checked across agreements" in single["limits"][0]["method"]
