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
    APPROVAL_FIRST,
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

REENTRY = _policy(
    "reentry",
    NOTIFY.replace("STRATEGY", "once")
    + """\
role buyer
clock timer
state placed initial
state sent
state done final
state closed final
transition send: placed, sent -> sent {
  by buyer, timer
  when fired(send) == 0 or (now >= sent_at + 1d and not acknowledged(notify))
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


REENTRY_TWICE = _policy(
    "reentry_twice",
    NOTIFY.replace("STRATEGY", "once")
    + """\
role buyer
clock timer
state placed initial
state sent
state done final
state doubled final
state closed final
transition send: placed, sent -> sent {
  by buyer, timer
  when fired(send) == 0 or (now >= sent_at + 1d and not acknowledged(notify) and not abandoned(notify))
  stamp sent_at
  call notify
}
transition double: sent -> doubled {
  by timer
  when applied(notify) >= 2
}
transition finish: sent -> done {
  by timer
  when acknowledged(notify)
}
transition give_up: sent -> closed {
  by timer
  when abandoned(notify)
}
invariant never_doubled: not reached(doubled)
""",
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


# -- attacks that held ---------------------------------------------------------------------

OTHER_BUDGETS = _policy(
    "other_budgets",
    NOTIFY.replace("STRATEGY", "retry")
    + """\
budget {
  max_turns 1
  max_model_calls 1
  max_active_time 1s
}
role buyer
clock timer
state placed initial
state sent
state done final
transition send: placed -> sent {
  by buyer
  stamp sent_at
  call notify
}
transition finish: sent -> done {
  by timer
  when now >= sent_at + 1d and acknowledged(notify)
  call notify
}
property sent_ends: reached(sent) leads_to final
""",
)


def test_budget_fields_the_runtime_does_not_enforce_keep_the_property_holding(tmp_path: Path) -> None:
    """`max_turns`, `max_model_calls` and `max_active_time` are not refusals of the command path, so
    they do not make the property incomplete, and the run does end a day after the active time ran out,
    with a second tool call and a second turn."""
    from pactwright.runtime import TestClock, open_agreement, show, submit
    from pactwright.runtime.provider_sim import start_simulator

    with _store(OTHER_BUDGETS, tmp_path) as (store, report), start_simulator() as sim:
        adapter = _adapter(tmp_path, sim)
        open_agreement(store, "att.other_budgets", {"order_id": "ORD-1"}, {"buyer": "bea"}, agreement_id="a1",
                       clock=TestClock(T0))  # fmt: skip
        submit(store, "a1", "send", "buyer", "bea", "send", clock=TestClock(T0))
        _drain(store, adapter, T0 + 30)
        scans = _scan_for_days(store)
        state = show(store, "a1").agreement.state
    entry = _entry(report, "sent_ends")
    assert (
        entry["verdict"] == "holds"
        and entry["method"] == "fair cycle search on the explored graph, state space exhausted"
    )
    assert scans[0]["committed"] == ["a1/2"] and not any(s["failures"] for s in scans) and state == "done"


def test_a_spent_tool_call_budget_is_modelled_for_eventually_final_and_leads_to() -> None:
    """The budget is counted for `eventually final` as for `leads_to`."""
    source = OTHER_BUDGETS.replace(
        "  max_turns 1\n  max_model_calls 1\n  max_active_time 1s\n", "  max_tool_calls 1\n"
    ).replace("property sent_ends: reached(sent) leads_to final", "property sent_ends: eventually final")
    report = _verify(source)
    entry = _entry(report, "sent_ends")
    # Nothing forces the buyer to `send`, so `eventually final` fails at the start; `leads_to` fails
    # where `finish` is refused for the budget.
    assert entry["verdict"] == "violated" and entry["lasso"]["last_state"] == "placed"
    leads_to = source.replace(
        "property sent_ends: eventually final", "property sent_ends: reached(sent) leads_to final"
    )
    leads = _entry(_verify(leads_to), "sent_ends")
    assert leads["verdict"] == "violated" and leads["lasso"]["last_state"] == "sent"
    assert leads["lasso"]["refused"] == ["`finish` by timer: refused at commit (PW524, call number 2 passes the "
                                         "budget's max_tool_calls 1)"]  # fmt: skip


CEILING_FIRST = _policy(
    "ceiling_first",
    NOTIFY.replace("STRATEGY", "retry")
    .replace("  timeout 10s\n", "  timeout 10s\n  ceiling 100.00\n  amount price\n")
    .replace('param order_id: text matching "ORD-[0-9]{1,6}"', "param price: money = 150.00")
    + """\
role buyer
clock timer
state placed initial
state funded
state done final
state expired final
transition fund: placed -> funded {
  by buyer
  stamp funded_at
}
transition a_pay: funded -> done {
  by timer
  when now >= funded_at + 1d
  call notify
}
transition expire: funded -> expired {
  by timer
  when now >= funded_at + 1d
}
property funded_ends: reached(funded) leads_to final
""",
)


def test_a_deadline_refused_for_its_ceiling_does_not_starve_one_due_at_the_same_instant(tmp_path: Path) -> None:
    """Two deadlines fall due at the same second; the first in order is refused PW522 (its call carries
    150.00 over a ceiling of 100.00) on the scan that also commits the second."""
    from pactwright.runtime import TestClock, open_agreement, show, submit

    with _store(CEILING_FIRST, tmp_path) as (store, report):
        open_agreement(store, "att.ceiling_first", {}, {"buyer": "bea"}, agreement_id="a1", clock=TestClock(T0))
        submit(store, "a1", "fund", "buyer", "bea", "fund", clock=TestClock(T0))
        scans = _scan_for_days(store)
        state = show(store, "a1").agreement.state
    assert _entry(report, "funded_ends")["verdict"] == "holds"
    assert [d["key"] for d in scans[0]["due"]] == [f"sched/a_pay/{T0 + DAY}", f"sched/expire/{T0 + DAY}"]
    assert _codes(scans[0]) == ["PW522"] and scans[0]["committed"] == ["a1/2"]
    assert state == "expired" and all(not s["due"] for s in scans[1:])


LIMITED = _policy(
    "limited",
    """\
default deny
param order_id: text matching "ORD-[0-9]{1,6}"
rule R2 allow
effect notify {
  risk R2
  reversibility reversible
  egress POST "https://api.example.com/notify"
  timeout 10s
  strategy once
  amount 60.00
}
limit daily: total(notify) <= 100.00 per 1d
role buyer
clock timer
state placed initial
state sent
state done final
state closed final
transition send: placed, sent -> sent {
  by buyer, timer
  when fired(send) == 0 or (now >= sent_at + 1h and not acknowledged(notify) and not abandoned(notify))
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


def test_a_limit_refusal_only_delays_a_resend_to_the_next_window(tmp_path: Path) -> None:
    """The failed first call still counts 60.00 in the day's window (the runtime counts calls from
    commit, the verifier only calls that took effect), so the resend an hour later is refused PW528;
    it commits on the next UTC day, and the property the verifier says holds is reached."""
    from pactwright.runtime import TestClock, open_agreement, show, submit
    from pactwright.runtime.provider_sim import start_simulator

    with _store(LIMITED, tmp_path) as (store, report), start_simulator() as sim:
        adapter = _adapter(tmp_path, sim)
        open_agreement(store, "att.limited", {"order_id": "ORD-1"}, {"buyer": "bea"}, agreement_id="a1",
                       clock=TestClock(T0))  # fmt: skip
        submit(store, "a1", "send", "buyer", "bea", "send", clock=TestClock(T0))
        sim.queue("error_5xx")
        _drain(store, adapter, T0 + 30)
        same_day = _scan_at(store, T0 + 2 * 3600)
        next_day = _scan_at(store, T0 + DAY)
        _drain(store, adapter, T0 + DAY + 30)
        after = _scan_at(store, T0 + DAY + 60)
        state = show(store, "a1").agreement.state
    assert _entry(report, "sent_ends")["verdict"] == "holds"
    assert [lim["verdict"] for lim in report["limits"]] == ["not-checked-across-agreements"]
    assert _codes(same_day) == ["PW528"] and not same_day["committed"]
    assert next_day["committed"] == ["a1/2"] and after["committed"] == ["a1/3"] and state == "done"


ROUNDED = _policy(
    "rounded",
    ESCROW
    + """\
state done final
state refunded final
transition fund: placed -> funded {
  by buyer
  stamp funded_at
  transfer price * 50% from card to escrow
}
transition release: funded -> done {
  by timer
  when now >= funded_at + 1d and balance(escrow) >= price - price * 50%
  transfer price - price * 50% from escrow to shop
}
transition refund: funded -> refunded {
  by timer
  when now >= funded_at + 1d and balance(escrow) < price - price * 50%
  transfer balance(escrow) from escrow to card
}
property funded_ends: reached(funded) leads_to final
property funded_is_paid: reached(funded) leads_to reached(done)
""",
)


def test_an_odd_minor_unit_at_the_low_bound_is_the_witness_and_the_runtime_agrees(tmp_path: Path) -> None:
    """Half the price is escrowed (rounded down); the release needs the other half (rounded up). The
    verifier finds exactly the odd prices, witnessed at 1.01, the first above the bound; the runtime
    refunds at 1.01 and releases at the bound, 1.00, and at the top, 500.00.

    `funded_ends` is not claimed: every candidate lasso's condition is refuted by the solver (the odd
    and even cases each have a way out), but only one lasso per trigger is tried, so the verdict stays
    `incomplete` rather than `holds` (cautious, never a false pass)."""
    from pactwright.runtime import TestClock, open_agreement, show, submit

    report = _verify(ROUNDED)
    assert report["verdict"] == "fail" and report["exploration"]["unknown_queries"] == 0
    ends = _entry(report, "funded_ends")
    assert ends["verdict"] == "incomplete" and "the solver did not decide" in ends["method"]
    paid = _entry(report, "funded_is_paid")
    assert paid["verdict"] == "violated" and paid["lasso"]["params"] == {"price": 101}
    assert [(e["actor"], e["move"]) for e in paid["lasso"]["events"]] == [
        ("buyer", "fund"), ("clock", "time passes"), ("timer", "refund"), ("clock", "time passes")
    ]  # fmt: skip
    assert paid["lasso"]["last_state"] == "refunded" and paid["lasso"]["refused"] == []
    runnable = ROUNDED.split("property funded_ends")[0]
    with _store(runnable, tmp_path) as (store, _):
        for n, price in enumerate(("1.00", "1.01", "500.00")):
            aid = f"a{n}"
            open_agreement(store, "att.rounded", {"price": price}, {"buyer": "bea"}, agreement_id=aid,
                           clock=TestClock(T0))  # fmt: skip
            submit(store, aid, "fund", "buyer", "bea", "fund", clock=TestClock(T0))
        scans = _scan_for_days(store)
        states = {aid: show(store, aid).agreement for aid in ("a0", "a1", "a2")}
    assert not any(s["failures"] for s in scans)
    assert {aid: a.state for aid, a in states.items()} == {"a0": "done", "a1": "refunded", "a2": "done"}
    assert [a.balances["escrow"] for a in states.values()] == [0, 0, 0]


FOUR_EYES = (
    APPROVAL_FIRST.replace("role manager\n", "role manager\nrole auditor\n")
    .replace("approval by manager", "approval by manager, auditor distinct")
    .replace("att.approval_first", "att.four_eyes")
)


def test_a_four_eyes_deadline_waiting_for_both_approvers_does_not_starve_the_next_one(tmp_path: Path) -> None:
    """`escalate` needs the manager and the auditor: it parks (PW513) from day 1, and its request,
    long expired, is renewed at each scan; `expire` still fires at day 2."""
    from pactwright.runtime import TestClock, open_agreement, show, submit

    with _store(FOUR_EYES, tmp_path) as (store, report):
        open_agreement(store, "att.four_eyes", {}, {"buyer": "bea", "manager": "max", "auditor": "ada"},
                       agreement_id="a1", clock=TestClock(T0))  # fmt: skip
        submit(store, "a1", "fund", "buyer", "bea", "fund", clock=TestClock(T0))
        scans = _scan_for_days(store)
        state = show(store, "a1").agreement.state
        with store.transaction(write=False) as db:
            requests = [tuple(r) for r in db.query("SELECT idempotency_key, status, expires_at FROM approval_requests")]
    assert _entry(report, "funded_ends")["verdict"] == "holds"
    # One request, renewed in its row by the day-2 scan after the day-1 one expired undecided.
    assert requests == [(f"sched/escalate/{T0 + DAY}", "pending", T0 + 2 * DAY + 5 + 3600)]
    assert scans[0]["refused"] == {"PW513": 1} and not scans[0]["committed"]
    assert scans[1]["refused"] == {"PW513": 1} and scans[1]["committed"] == ["a1/2"]
    assert state == "expired"


def test_a_four_eyes_stop_names_both_approvers() -> None:
    """Without the fallback, the lasso stops in `funded` waiting for each of the two approvals."""
    source = FOUR_EYES.replace("transition expire: funded -> expired {\n  by timer\n  when now >= funded_at + 2d\n}\n",
                               "").replace("state expired final\n", "")  # fmt: skip
    entry = _entry(_verify(source), "funded_ends")
    assert entry["verdict"] == "violated"
    lasso = entry["lasso"]
    assert [(e["actor"], e["move"]) for e in lasso["events"]] == [("buyer", "fund"), ("clock", "time passes")]
    assert lasso["waiting_for"] == ["approve escalate by auditor", "approve escalate by manager"]
    assert lasso["late"] is None and lasso["refused"] == []
