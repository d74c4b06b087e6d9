"""Adversarial checks of the verifier against the runtime that held (split from test_liveness_attacks_2.py):
budget fields the runtime does not enforce, deadlines due at one instant, limits, rounding at the
bounds and four-eyes deadlines, each with its exact verdict and the runtime's run."""

from __future__ import annotations

from pathlib import Path

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
from tests.test_liveness_attacks_2 import ESCROW, _adapter, _codes, _drain, _scan_at

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
    assert ends["verdict"] == "incomplete" and "holds for no param value" in ends["method"]
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
