"""Small policies that break the verifier's promises, each checked against hand reasoning.

The promises under test (docs/verifier.md): `funds_not_stuck` fails in a
reachable non-final state from which no command can ever commit again,
after any time; text params are explored with values their pattern admits;
every reported violation replays. Each policy is a few lines, compiled and
verified in process with the default bounds and no mutants, and each test
states the verdict a brute force over the policy's runs gives.
"""

from __future__ import annotations

from typing import Any

from pactwright.compiler.bundle import compile_candidate
from pactwright.compiler.pipeline import check_bytes
from pactwright.diagnostics import Severity
from pactwright.verifier.explorer import Bounds
from pactwright.verifier.verify import VerifyOptions, verify_files


def _verify(source: str, name: str = "attack.pact") -> dict[str, Any]:
    result = check_bytes(source.encode("utf-8"))
    errors = [d for d in result.diagnostics if d.severity == Severity.ERROR]
    assert result.ok and not errors, f"{name} has blockers: {errors}"
    assert result.candidate is not None
    files = compile_candidate(result.candidate, result.source_map, name)
    return verify_files(files, VerifyOptions(bounds=Bounds(), mutants=False))


def _violated(report: dict[str, Any]) -> set[str]:
    return {i["name"] for i in report["invariants"] if i["verdict"] == "violated"}


def _counterexample(report: dict[str, Any], invariant: str) -> dict[str, Any]:
    entry = next(i for i in report["invariants"] if i["name"] == invariant)
    found: dict[str, Any] = report["counterexamples"][entry["counterexample"]]
    return found


def _commands(found: dict[str, Any]) -> list[str]:
    return [str(e["command"]) for e in found["events"]]


# funds stuck once a deadline has passed ------------------------------------------

STUCK_AFTER_DEADLINE = """
pact "attack.stuck_after_deadline" version "1.0.0"
currency EUR scale 2
role buyer
param price: money = 10.00
param window: duration = 2d
account world  "world" external
account escrow "escrow:{agreement}"
account seller "sellers:{agreement}"
state open initial
state funded
state done final
transition fund: open -> funded {
  by buyer
  stamp paid_at
  transfer price from world to escrow
}
transition early: funded -> done {
  by buyer
  when now < paid_at + window
  transfer price from escrow to seller
}
invariant escrow_never_negative: balance(escrow) >= 0
"""


def test_funds_stuck_once_the_only_window_has_closed() -> None:
    # Hand reasoning: after `fund`, `early` is the only way out of `funded`, and only
    # while the stamp is younger than 2d. Time only grows, so once 2d have passed
    # no command can ever commit again, and escrow holds 10.00 forever in a
    # non-final state: `funds_not_stuck` is violated by fund, time passes +2d.
    # The verifier judges the zone of `funded` as a whole (some cell of it still
    # lets `early` fire) and says PASS.
    report = _verify(STUCK_AFTER_DEADLINE)
    assert report["verdict"] == "fail"
    assert "funds_not_stuck" in _violated(report)
    found = _counterexample(report, "funds_not_stuck")
    assert found["replayed"] is True
    commands = _commands(found)
    assert commands[0] == "fund" and commands[1].startswith("time passes +2d") and len(commands) == 2


def test_the_stuck_counterexample_waits_no_longer_than_needed() -> None:
    # Hand reasoning: `early` needs `now < paid_at + 2d`, so at age exactly 2d it is
    # already disabled for good: the earliest instant at which the agreement is stuck
    # is +2d, and a timeline solved for the earliest times shows "time passes +2d",
    # not +2d1s (which is stuck too, but one second later than needed).
    found = _counterexample(_verify(STUCK_AFTER_DEADLINE), "funds_not_stuck")
    assert _commands(found) == ["fund", "time passes +2d"]


STUCK_AFTER_DEADLINE_SYMBOLIC = """
pact "attack.stuck_after_deadline_symbolic" version "1.0.0"
currency EUR scale 2
role buyer
clock timer
param price: money between 1.00 and 100.00
param cap: money between 10.00 and 60.00
param window: duration = 2d
account world  "world" external
account escrow "escrow:{agreement}"
account seller "sellers:{agreement}"
state open initial
state funded
state done final
transition fund: open -> funded {
  by buyer
  stamp paid_at
  transfer price from world to escrow
}
transition early: funded -> done {
  by buyer
  when now < paid_at + window
  transfer price from escrow to seller
}
transition late: funded -> done {
  by timer
  when now >= paid_at + window and price > cap
  transfer price from escrow to seller
}
invariant escrow_never_negative: balance(escrow) >= 0
"""


def test_funds_stuck_after_the_deadline_for_prices_up_to_the_cap() -> None:
    # Hand reasoning: after the window only `late` can fire, and only when
    # price > cap. For any price <= cap (price 1.00, cap 10.00, say) the agreement
    # sits in `funded` with the whole price in escrow and nothing can ever commit:
    # `funds_not_stuck` is violated, with a witness where price <= cap.
    report = _verify(STUCK_AFTER_DEADLINE_SYMBOLIC)
    assert report["verdict"] == "fail"
    assert "funds_not_stuck" in _violated(report)
    found = _counterexample(report, "funds_not_stuck")
    assert found["replayed"] is True
    params = found["params"][0]
    assert float(params["price"]) <= float(params["cap"])
    assert _commands(found)[0] == "fund"
    assert any(c.startswith("time passes") for c in _commands(found))


# text stand-ins the pattern does not admit -------------------------------------

REGION_BY_PATTERN = """
pact "attack.region_by_pattern" version "1.0.0"
currency EUR scale 2
role buyer
param price: money between 1.00 and 100.00
param region: text matching "EU|US"
account world  "world" external
account escrow "escrow:{agreement}"
account seller "sellers:{agreement}"
state open initial
state funded
state done final
transition fund: open -> funded {
  by buyer
  transfer price from world to escrow
}
transition settle_eu: funded -> done {
  by buyer
  when region == "EU"
  transfer price from escrow to seller
}
transition settle_us: funded -> done {
  by buyer
  when region == "US"
  transfer price from escrow to seller
}
invariant escrow_never_negative: balance(escrow) >= 0
"""


def test_a_pattern_admitting_only_compared_literals_gets_no_stand_in() -> None:
    # Hand reasoning: `region` matches "EU|US" (the events schema anchors it as
    # ^(?:EU|US)$), so every agreement has region EU or US and one of the two
    # settle commands always commits: nothing is stuck, nothing is refused, PASS.
    # The verifier adds the stand-in `any`, which the pattern does not admit and
    # the runtime would refuse at agreement creation, and reports a false
    # `funds_not_stuck` "with region = any".
    report = _verify(REGION_BY_PATTERN)
    assert _violated(report) == set()
    assert report["verdict"] == "pass"


SAME_SINGLE_VALUE = """
pact "attack.same_single_value" version "1.0.0"
currency EUR scale 2
role buyer
param price: money between 1.00 and 100.00
param src: text matching "EU"
param dst: text matching "EU"
account world  "world" external
account escrow "escrow:{agreement}"
account seller "sellers:{agreement}"
state open initial
state funded
state done final
transition fund: open -> funded {
  by buyer
  transfer price from world to escrow
}
transition same: funded -> done {
  by buyer
  when src == dst
  transfer price from escrow to seller
}
transition differ: funded -> done {
  by buyer
  when src != dst
  transfer price + 1.00 from escrow to seller
}
invariant escrow_never_negative: balance(escrow) >= 0
"""


def test_two_params_whose_pattern_admits_one_text_are_always_equal() -> None:
    # Hand reasoning: both params can only be "EU", so `src != dst` never holds and
    # `differ` (which would overdraw escrow by 1.00) is never enabled; `same` always
    # commits. PASS. The verifier explores stand-ins `any` and `any2` (neither
    # admitted by the pattern) and reports `funds_available` and `funds_not_stuck`.
    report = _verify(SAME_SINGLE_VALUE)
    assert _violated(report) == set()
    assert report["verdict"] == "pass"


# one money-moving effect called by two transitions ---------------------------------

PAY_FROM_TWO_TRANSITIONS = """
pact "attack.pay_from_two_transitions" version "1.0.0"
currency EUR scale 2
default deny
role ops
param price: money between 1.00 and 200.00
account world "world" external
rule R2 allow
effect note {
  risk R2
  reversibility not_applicable
  strategy retry
}
effect pay {
  risk R2
  reversibility reversible
  strategy retry
  amount price
}
state open initial
state mid
state done final
transition first: open -> mid {
  by ops
  call note
  call note
  call pay
}
transition second: mid -> done {
  by ops
  call pay
}
"""


def test_a_retried_payout_of_the_second_caller_replays() -> None:
    # Hand reasoning: `pay` is money-moving (it declares an amount) and retried, so a
    # lost response pays twice. Shortest run: first, second, the payout of `second`
    # loses its response, the runtime retries, the worker dispatches it again: the
    # call site in `second` took effect 2 times for 1 commit (`first`'s payout still
    # waits behind its two notes). `effect_applied_once` is violated and the run
    # replays. The verifier finds it, but its replay check counts applications per
    # effect against the commits of every transition calling it (2 <= 1 + 1) and
    # stops with PW390 ("does not replay"), a verifier bug.
    report = _verify(PAY_FROM_TWO_TRANSITIONS)
    assert report["verdict"] == "fail"
    assert "effect_applied_once" in _violated(report)
    found = _counterexample(report, "effect_applied_once")
    assert found["replayed"] is True
    assert _commands(found)[:2] == ["first", "second"]
