"""More adversarial checks of the verifier's `holds` against what the runtime does.

Each differential test verifies a small policy, then runs the same agreement in
the runtime (a test clock, the scheduler scanning, the effect worker against
the provider simulator) and compares. The attacks aim at what the runtime
refuses or does that the verifier's model may not follow: an effect's
`max_calls` (PW523), the budget, limits across agreements (PW528), commands
refused on an abandoned effect (PW526), a transition firing again while its
call is still in flight, several deadlines due at once, four-eyes approvals and
rounding at a param's bounds. A false `holds` (or `holds-to-bound`, or a
lasso that names the wrong reason) is `xfail(strict=True)` with what is wrong
in its reason; the attacks that held assert the exact verdict and run.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from pactwright.errors import CommandError
from tests.test_liveness_attacks import (
    DAY,
    NOTIFY,
    T0,
    _entry,
    _policy,
    _scan_for_days,
    _store,
    _verify,
)

ROUTES = ("notify", "receipt")


def _adapter(directory: Path, sim: Any) -> Any:
    """An HTTP adapter that sends every declared destination of these policies to the simulator."""
    from pactwright.runtime.effect_http import Credentials, HttpAdapter, load_providers

    routes = directory / "providers.toml"
    routes.write_text(
        "".join(f'[destination."https://api.example.com/{r}"]\nendpoint = "{sim.url}/{r}"\n' for r in ROUTES)
    )
    return HttpAdapter(load_providers(routes), Credentials())


def _drain(store: Any, adapter: Any, at: int) -> None:
    """Run the effect worker at one instant until nothing is due (a call backing off is not)."""
    from pactwright.runtime import TestClock
    from pactwright.runtime.effect_worker import EffectWorker

    EffectWorker(store, adapter, TestClock(at)).drain()


def _phases(store: Any) -> list[tuple[str, str]]:
    """(instance id, phase) of every effect call: what the runtime knows of each call it made."""
    with store.transaction(write=False) as db:
        return [(str(i), str(p)) for i, p in db.query("SELECT id, phase FROM effects ORDER BY id")]


def _scan_at(store: Any, at: int) -> dict[str, Any]:
    """One scheduler scan at `at`, as its JSON summary."""
    from pactwright.runtime import TestClock
    from pactwright.runtime.scheduler import scan

    return scan(store, TestClock(at)).to_json()


def _codes(scan: dict[str, Any]) -> list[str]:
    """The codes of a scan's failures: the refusals the scheduler does not count as ordinary."""
    return [f["code"] for f in scan["failures"]]


def _invariant(report: dict[str, Any], name: str) -> dict[str, Any]:
    """The report's entry for one invariant, built-in or the policy's."""
    return next(i for i in report["invariants"] if i["name"] == name)


# -- an effect's max_calls counts a call that failed -------------------------------------------

# `send` calls `notify` (max_calls 1, strategy once); after a provider error the call stays `failed`
# (it did not happen) and the scheduler sends again a day later, from the same call site.
MAX_CALLS = _policy(
    "max_calls_failed",
    NOTIFY.replace("STRATEGY", "once").replace("  timeout 10s\n", "  timeout 10s\n  max_calls 1\n")
    + """\
role buyer
clock timer
state placed initial
state sent
state done final
state closed final
transition send: placed, sent -> sent {
  by buyer, timer
  when fired(send) == 0 or (now >= sent_at + 1d and not acknowledged(notify) and not abandoned(notify))
  stamp sent_at
  call notify
}
transition finish: sent -> done {
  by timer
  when acknowledged(notify)
}
transition give_up: sent -> closed {
  by timer
  when abandoned(notify)
}
property sent_ends: reached(sent) leads_to final
""",
)


def _failed_then_scanned(source: str, pact: str, directory: Path, verdict: str = "pass"
                         ) -> tuple[str, list[dict[str, Any]], dict[str, Any]]:  # fmt: skip
    """`send` at T0, its call answered 503 (error_5xx), the worker run to the end, then 100 days of scans
    and one more after the worker ran again: (state, scans, report)."""
    from pactwright.runtime import TestClock, open_agreement, show, submit
    from pactwright.runtime.provider_sim import start_simulator

    with _store(source, directory, verdict) as (store, report), start_simulator() as sim:
        adapter = _adapter(directory, sim)
        open_agreement(store, pact, {"order_id": "ORD-1"}, {"buyer": "bea"}, agreement_id="a1", clock=TestClock(T0))
        submit(store, "a1", "send", "buyer", "bea", "send", clock=TestClock(T0))
        sim.queue("error_5xx")
        _drain(store, adapter, T0 + 30)
        _drain(store, adapter, T0 + 600)  # past the back-off of a call that is sent again
        scans = _scan_for_days(store)
        _drain(store, adapter, T0 + 200 * DAY)
        scans.append(_scan_at(store, T0 + 201 * DAY))
        return show(store, "a1").agreement.state, scans, report


def test_max_calls_spent_by_a_failed_call_is_a_violation_the_lasso_names(tmp_path: Path) -> None:
    """The runtime counts every call made (a failed one too) against `max_calls`, so the second `send`
    is refused PW523 on every scan and nothing else can fire.

    Once broken: the verifier counted only calls that took effect, saw the second call go through,
    and said `sent_ends` holds. Now it counts calls made, as the runtime does.
    """
    state, scans, report = _failed_then_scanned(MAX_CALLS, "att.max_calls_failed", tmp_path, "fail")
    assert all(_codes(s) == ["PW523"] and not s["committed"] for s in scans)
    assert state == "sent"
    entry = _entry(report, "sent_ends")
    assert entry["verdict"] == "violated" and entry["lasso"]["last_state"] == "sent", entry
    assert entry["lasso"]["refused"] == [
        "`send` by timer: refused at commit (PW523, a call of `notify` number 2 passes its max_calls 1)"
    ]


def test_max_calls_with_a_retried_call_is_one_call(tmp_path: Path) -> None:
    """Held: an `idempotent` call that failed is sent again on its own row, so max_calls 1 is never passed."""
    source = MAX_CALLS.replace("strategy once", "strategy idempotent\n  key order_id")
    source = source.replace("att.max_calls_failed", "att.max_calls_retry")
    state, scans, report = _failed_then_scanned(source, "att.max_calls_retry", tmp_path)
    assert report["verdict"] == "pass" and _entry(report, "sent_ends")["verdict"] == "holds"
    assert scans[0]["committed"] == ["a1/2"] and state == "done"
    assert not any(s["failures"] for s in scans)


# -- a transition firing again while its own call is in flight -------------------------------

# MAX_CALLS without `max_calls`, and the re-send not waiting for an abandon.
REENTRY = (
    MAX_CALLS.replace("att.max_calls_failed", "att.reentry")
    .replace("  max_calls 1\n", "")
    .replace(" and not acknowledged(notify) and not abandoned(notify))", " and not acknowledged(notify))")
)


def _resent_before_the_worker(source: str, pact: str, directory: Path, fault: str | None
                              ) -> tuple[str, list[tuple[str, str]], list[dict[str, Any]], dict[str, Any]]:  # fmt: skip
    """`send` at T0; the worker is down until the scheduler sent again at day 1; then it runs (the first
    call meeting `fault`), and the scheduler scans on: (state, effect phases, scans, report)."""
    from pactwright.runtime import TestClock, open_agreement, show, submit
    from pactwright.runtime.provider_sim import start_simulator

    with _store(source, directory) as (store, report), start_simulator() as sim:
        adapter = _adapter(directory, sim)
        open_agreement(store, pact, {"order_id": "ORD-1"}, {"buyer": "bea"}, agreement_id="a1", clock=TestClock(T0))
        submit(store, "a1", "send", "buyer", "bea", "send", clock=TestClock(T0))
        scans = [_scan_at(store, T0 + DAY + 5)]
        if fault is not None:
            sim.queue(fault)
        _drain(store, adapter, T0 + DAY + 30)
        phases = _phases(store)
        scans += [_scan_at(store, T0 + day * DAY + 5) for day in (2, 3, 10, 100)]
        return show(store, "a1").agreement.state, phases, scans, report


def test_a_resend_while_the_first_call_is_in_flight_waits_for_its_outcome(tmp_path: Path) -> None:
    """The scheduler would send again while the first call is still prepared (the worker was down).

    Once broken: the runtime let the second `send` commit, the first call was then lost and
    abandoned and the second acknowledged, and `finish` (PW526) and `give_up` (which reads the latest
    call) were both refused for good, while the verifier, which never explored that re-entry, said
    `sent_ends` holds. Now the runtime keeps one call in flight per call site, as the model does: the
    second `send` is refused PW530 until the first call settles; it is abandoned, and `give_up` ends
    the run, as the verifier says.
    """
    state, phases, scans, report = _resent_before_the_worker(REENTRY, "att.reentry", tmp_path, "lost_request")
    assert scans[0]["committed"] == [] and scans[0]["refused"] == {"PW530": 1}
    assert phases == [("a1/1/e0", "abandoned_uncertain")]
    assert scans[1]["committed"] == ["a1/2"] and state == "closed"
    assert report["verdict"] == "pass" and not report["warnings"]
    assert _entry(report, "sent_ends")["verdict"] == "holds"


# MAX_CALLS without `max_calls`, with a state that two applications of `notify` would reach.
REENTRY_TWICE = (
    MAX_CALLS.replace("att.max_calls_failed", "att.reentry_twice")
    .replace("  max_calls 1\n", "")
    .replace("state closed final\n", "state doubled final\nstate closed final\n")
    .replace(
        "transition finish:",
        "transition double: sent -> doubled {\n  by timer\n  when applied(notify) >= 2\n}\ntransition finish:",
    )
    .replace("property sent_ends: reached(sent) leads_to final", "invariant never_doubled: not reached(doubled)")
)


def test_a_resend_while_the_first_call_is_in_flight_cannot_double_it(tmp_path: Path) -> None:
    """Safety, same gap: once, both calls of `send` took effect, the runtime's `applied(notify)` was 2
    and the scheduler fired `double` into the state `never_doubled` says is never reached, while the
    report passed. Now the second `send` waits for the first call (PW530), which is acknowledged, so
    `finish` ends the run and the invariant the verifier checked holds in the runtime too."""
    state, phases, scans, report = _resent_before_the_worker(REENTRY_TWICE, "att.reentry_twice", tmp_path, None)
    assert scans[0]["committed"] == [] and scans[0]["refused"] == {"PW530": 1}
    assert phases == [("a1/1/e0", "acknowledged")]
    assert scans[1]["committed"] == ["a1/2"] and state == "done"
    assert report["verdict"] == "pass" and _invariant(report, "never_doubled")["verdict"] != "violated"


# -- funds_not_stuck and what the runtime refuses at commit -----------------------------------

ESCROW = """\
role buyer
clock timer
param price: money between 1.00 and 500.00
account card "card" external
account escrow "escrow:{agreement}"
account shop "shop" external
state placed initial
state funded
"""

STUCK_ABANDON = _policy(
    "stuck_abandon",
    NOTIFY.replace("STRATEGY", "once")
    + ESCROW
    + """\
state done final
state refunded final
transition fund: placed -> funded {
  by buyer
  stamp funded_at
  transfer price from card to escrow
  call notify
}
transition release: funded -> done {
  by timer
  when acknowledged(notify)
  transfer price from escrow to shop
}
transition refund: funded -> refunded {
  by buyer, timer
  when now >= funded_at + 1d and not acknowledged(notify)
  transfer price from escrow to card
}
""",
)


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_funds_stuck_behind_an_abandoned_effect_are_found(tmp_path: Path, backend: str) -> None:
    """`fund`'s notification is lost (`once` abandons it): `release` waits for an acknowledgement that
    never comes and `refund`, which reads `acknowledged(notify)`, is refused PW526 by every role on
    every scan.

    Once broken: the liveness graph left such commands out (docs/verifier.md) but funds_not_stuck
    did not, so it held-to-bound and the report passed.
    """
    from pactwright.runtime import TestClock, open_agreement, show, submit
    from pactwright.runtime.provider_sim import start_simulator

    with _store(STUCK_ABANDON, tmp_path, "fail", backend) as (store, report), start_simulator() as sim:
        adapter = _adapter(tmp_path, sim)
        open_agreement(store, "att.stuck_abandon", {"order_id": "ORD-1", "price": "10.00"}, {"buyer": "bea"},
                       agreement_id="a1", clock=TestClock(T0))  # fmt: skip
        submit(store, "a1", "fund", "buyer", "bea", "fund", clock=TestClock(T0))
        sim.queue("lost_request")
        _drain(store, adapter, T0 + 30)
        scans = _scan_for_days(store)
        with pytest.raises(CommandError) as by_buyer:
            submit(store, "a1", "refund", "buyer", "bea", "refund", clock=TestClock(T0 + 200 * DAY))
        view = show(store, "a1").agreement
        phases = _phases(store)
    assert phases == [("a1/1/e0", "abandoned_uncertain")]
    assert all(_codes(s) == ["PW526"] for s in scans) and by_buyer.value.code == "PW526"
    assert view.state == "funded" and view.balances["escrow"] == 1000
    assert _invariant(report, "funds_not_stuck")["verdict"] == "violated"


STUCK_BUDGET = _policy(
    "stuck_budget",
    NOTIFY.replace("STRATEGY", "retry")
    + """\
budget { max_tool_calls 1 }
effect receipt {
  risk R2
  reversibility reversible
  egress POST "https://api.example.com/receipt"
  timeout 10s
  strategy retry
}
"""
    + ESCROW
    + """\
state done final
transition fund: placed -> funded {
  by buyer
  transfer price from card to escrow
  call notify
}
transition release: funded -> done {
  by buyer, timer
  when acknowledged(notify)
  transfer price from escrow to shop
  call receipt
}
""",
)


def test_funds_stuck_behind_a_spent_budget_are_not_a_pass(tmp_path: Path) -> None:
    """The only way out of `funded` is refused PW524 for every role: funds_not_stuck is violated.

    Once broken: the model did not count calls against the budget, so with no property declared the
    report passed.
    """
    from pactwright.runtime import TestClock, open_agreement, show, submit
    from pactwright.runtime.provider_sim import start_simulator

    with _store(STUCK_BUDGET, tmp_path, "fail") as (store, report), start_simulator() as sim:
        adapter = _adapter(tmp_path, sim)
        open_agreement(store, "att.stuck_budget", {"order_id": "ORD-1", "price": "10.00"}, {"buyer": "bea"},
                       agreement_id="a1", clock=TestClock(T0))  # fmt: skip
        submit(store, "a1", "fund", "buyer", "bea", "fund", clock=TestClock(T0))
        _drain(store, adapter, T0 + 30)
        scans = _scan_for_days(store)
        with pytest.raises(CommandError) as by_buyer:
            submit(store, "a1", "release", "buyer", "bea", "release", clock=TestClock(T0 + 60))
        view = show(store, "a1").agreement
    assert all(_codes(s) == ["PW524"] for s in scans) and by_buyer.value.code == "PW524"
    assert view.state == "funded" and view.balances["escrow"] == 1000
    assert _invariant(report, "funds_not_stuck")["verdict"] == "violated" and report["verdict"] == "fail"


# -- lassos that stop on a refusal at commit, with fixed params --------------------------------

FUNDS_FIXED = _policy(
    "funds_fixed",
    ESCROW.replace("param price: money between 1.00 and 500.00", "param price: money = 5.00")
    + """\
state done final
transition fund: placed -> funded {
  by buyer
  stamp funded_at
  transfer 1.00 from card to escrow
}
transition release: funded -> done {
  by timer
  when now >= funded_at + 1d
  transfer price from escrow to shop
}
property funded_ends: reached(funded) leads_to final
""",
)

CEILING_FIXED = _policy(
    "ceiling_fixed",
    NOTIFY.replace("STRATEGY", "retry")
    .replace("  timeout 10s\n", "  timeout 10s\n  ceiling 100.00\n  amount price\n")
    .replace('param order_id: text matching "ORD-[0-9]{1,6}"', "param price: money = 150.00")
    + """\
role buyer
clock timer
state placed initial
state funded
state done final
transition fund: placed -> funded {
  by buyer
  stamp funded_at
}
transition pay: funded -> done {
  by timer
  when now >= funded_at + 1d
  call notify
}
property funded_ends: reached(funded) leads_to final
""",
)


def _stop(source: str) -> dict[str, Any]:
    """The lasso of `funded_ends`: a stop in `funded` after time passed, with no window closed."""
    entry = _entry(_verify(source), "funded_ends")
    assert entry["verdict"] == "violated"
    lasso: dict[str, Any] = entry["lasso"]
    assert [(e["actor"], e["move"]) for e in lasso["events"]] == [("buyer", "fund"), ("clock", "time passes")]
    assert lasso["stuttering"] and lasso["late"] is None and lasso["waiting_for"] == []
    return lasso


def test_a_lasso_stopped_by_a_funds_refusal_with_a_fixed_price_names_it() -> None:
    """`release` moves 5.00 out of an escrow holding 1.00: refused at commit (PW514) on every scan. With
    a ranged price the lasso names it too. Once broken: with a fixed one its `refused` was empty and
    `late` absent, so the lasso gave no reason at all."""
    lasso = _stop(FUNDS_FIXED)
    assert lasso["refused"] == ["`release` by timer: refused at commit (`release` is enabled but the runtime "
                                "refuses it at commit: `escrow` would be at -4.00)"]  # fmt: skip


def test_a_lasso_stopped_by_an_effect_ceiling_with_a_fixed_amount_names_it() -> None:
    """`pay` carries 150.00 over its effect's ceiling of 100.00 (PW522): the lasso should name it, as
    docs/verifier.md says `refused` does for a ceiling. Once broken: it named nothing."""
    lasso = _stop(CEILING_FIXED)
    assert lasso["refused"] == ["`pay` by timer: refused at commit (PW522, a call would carry more than its "
                                "effect's ceiling)"]  # fmt: skip
