"""Adversarial checks of `leads_to` verdicts against what the runtime does.

Each differential test verifies a small policy, runs the same agreement in the
runtime (its scheduler scanning day after day, the effect worker against the
provider simulator) and requires the two to agree: a property that `holds` must
be reached by the runtime's run. A false pass found this way is marked
`xfail(strict=True)` with the breaking run in its reason. The attacks that held
are kept as exact-verdict regressions.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from pactwright.compiler.bundle import compile_candidate
from pactwright.compiler.pipeline import check_bytes
from pactwright.verifier.explorer import Bounds
from pactwright.verifier.verify import VerifyOptions, verify_files
from tests import signed_bundles as sb
from tests.test_verifier_attacks_1_1 import ABANDONED_GIVE_UP

DAY = 86_400
T0 = 1780315200  # 2026-06-01T12:00:00Z
SCANS = (1, 2, 3, 10, 100)  # days after T0 at which the scheduler scans

HEAD = 'pact "att.{name}" version "1.0.0"\ncurrency EUR scale 2\n'
NOTIFY = """\
default deny
param order_id: text matching "ORD-[0-9]{1,6}"
rule R2 allow
effect notify {
  risk R2
  reversibility reversible
  egress POST "https://api.example.com/notify"
  timeout 10s
  strategy STRATEGY
}
"""


def _policy(name: str, body: str) -> str:
    return HEAD.replace("{name}", name) + body


def _entry(report: dict[str, Any], name: str) -> dict[str, Any]:
    return next(p for p in report["properties"] if p["name"] == name)


def _verify(source: str, **bounds: int) -> dict[str, Any]:
    result = check_bytes(source.encode())
    assert result.candidate is not None, [str(d) for d in result.diagnostics]
    files = dict(compile_candidate(result.candidate, result.source_map, "attack.pact"))
    return verify_files(files, VerifyOptions(bounds=Bounds(**bounds), mutants=False))


@contextmanager
def _store(source: str, directory: Path, verdict: str = "pass", backend: str = "sqlite"
           ) -> Iterator[tuple[Any, dict[str, Any]]]:  # fmt: skip
    """A store running the policy as `build` verified it (with the `verdict` given), and that report.

    `verdict="incomplete"`: built with `--allow-incomplete` (a signable bounded result); `"fail"`:
    recorded past activation's refusal of the failing report (`_convicted_store`), to run what the
    verifier convicted.
    """
    from pactwright.runtime.activation import FixedClock, activate_files
    from pactwright.runtime.store import open_store

    if verdict == "fail":
        from tests.test_verifier_attacks_1_1 import _convicted_store

        report: dict[str, Any] = {}
        with _convicted_store(source, directory, backend, report) as store:
            yield store, report
        return
    bundle, found = sb.compile_verified(source.encode(), "attack.pact", allow_incomplete=verdict == "incomplete")
    report = json.loads(bundle["report.json"])
    assert (found, report["complete"]) == (("pass", False) if verdict == "incomplete" else (verdict, True))
    with sb.temporary_store(backend, directory) as url, open_store(url) as store:
        activate_files(store, sb.sign(bundle), sb.default_trust(), clock=FixedClock(datetime.fromisoformat(sb.NOW)))
        yield store, report


def _scan_for_days(store: Any) -> list[dict[str, Any]]:
    """The scheduler's scans over 100 days; what each one did."""
    from pactwright.runtime import TestClock
    from pactwright.runtime.scheduler import scan

    return [scan(store, TestClock(T0 + day * DAY + 5)).to_json() for day in SCANS]


# -- breaks: `holds`, but the runtime's scheduler leaves the agreement stuck -------------------

APPROVAL_FIRST = _policy(
    "approval_first",
    """\
role buyer
role manager
clock timer
state placed initial
state funded
state done final
state expired final
transition fund: placed -> funded {
  by buyer
  stamp funded_at
}
transition escalate: funded -> done {
  by timer
  when now >= funded_at + 1d
  approval by manager
}
transition expire: funded -> expired {
  by timer
  when now >= funded_at + 2d
}
property funded_ends: reached(funded) leads_to final
""",
)


def test_a_deadline_waiting_for_approval_does_not_starve_the_next_one(tmp_path: Path) -> None:
    """`escalate` parks for the manager (PW513) from day 1; the scheduler still fires `expire` at day 2.

    Once broken: the scheduler submitted only the first enabled clock
    transition, so `expire` was never tried and the agreement stayed
    `funded` although the verifier said `funded_ends` holds.
    """
    from pactwright.runtime import TestClock, open_agreement, show, submit

    with _store(APPROVAL_FIRST, tmp_path) as (store, report):
        open_agreement(store, "att.approval_first", {}, {"buyer": "bea", "manager": "max"}, agreement_id="a1",
                       clock=TestClock(T0))  # fmt: skip
        submit(store, "a1", "fund", "buyer", "bea", "fund", clock=TestClock(T0))
        scans = _scan_for_days(store)
        state = show(store, "a1").agreement.state
    assert _entry(report, "funded_ends")["verdict"] == "holds"
    assert [d["transition"] for d in scans[0]["due"]] == ["escalate"] and scans[0]["refused"] == {"PW513": 1}
    assert [d["transition"] for d in scans[1]["due"]] == ["escalate", "expire"]
    assert scans[1]["refused"] == {"PW513": 1} and scans[1]["committed"] == ["a1/2"]
    assert state == "expired" and all(not s["due"] for s in scans[2:])


# The abandoned `give_up` policy of the 1.1 attacks, with a fallback deadline after it.
ABANDON_FIRST = ABANDONED_GIVE_UP.replace('"att.abandoned_give_up"', '"att.abandon_first"').replace(
    "property sent_ends",
    "transition time_out: sent -> closed {\n  by timer\n  when now >= sent_at + 2d\n}\nproperty sent_ends",
)


def _abandoned_run(source: str, pact: str, directory: Path) -> tuple[str, list[dict[str, Any]], dict[str, Any]]:
    """`send`, its request lost (`once` abandons it), then 100 days of scans: (state, scans, report)."""
    from pactwright.runtime import TestClock, open_agreement, show, submit
    from pactwright.runtime.effect_http import Credentials, HttpAdapter, load_providers
    from pactwright.runtime.effect_worker import EffectWorker
    from pactwright.runtime.provider_sim import start_simulator

    with _store(source, directory) as (store, report), start_simulator() as sim:
        routes = directory / "providers.toml"
        routes.write_text(f'[destination."https://api.example.com/notify"]\nendpoint = "{sim.url}/notify"\n')
        adapter = HttpAdapter(load_providers(routes), Credentials())
        open_agreement(store, pact, {"order_id": "ORD-1"}, {"buyer": "bea"}, agreement_id="a1", clock=TestClock(T0))
        submit(store, "a1", "send", "buyer", "bea", "send", clock=TestClock(T0))
        sim.queue("lost_request")
        EffectWorker(store, adapter, TestClock(T0 + 30)).drain()
        with store.transaction(write=False) as db:
            assert [str(r[0]) for r in db.query("SELECT phase FROM effects")] == ["abandoned_uncertain"]
        scans = _scan_for_days(store)
        return show(store, "a1").agreement.state, scans, report


def test_a_deadline_refused_after_an_abandon_does_not_starve_the_next_one(tmp_path: Path) -> None:
    """`give_up` is refused for good (PW526) once `notify` is abandoned; `time_out` still fires at day 2.

    Once broken: the scheduler kept submitting `give_up` alone, so the
    agreement stayed `sent` although the verifier said `sent_ends` holds.
    """
    state, scans, report = _abandoned_run(ABANDON_FIRST, "att.abandon_first", tmp_path)
    assert _entry(report, "sent_ends")["verdict"] == "holds"
    assert [f["code"] for f in scans[0]["failures"]] == ["PW526"] and not scans[0]["committed"]
    assert [f["code"] for f in scans[1]["failures"]] == ["PW526"] and scans[1]["committed"] == ["a1/2"]
    assert state == "closed"


def test_the_same_fallback_first_by_name_is_reached(tmp_path: Path) -> None:
    """Held: with the fallback named before `give_up`, the scheduler reaches it at 2d and the run ends."""
    source = ABANDON_FIRST.replace("time_out", "a_time_out").replace("att.abandon_first", "att.abandon_second")
    state, scans, report = _abandoned_run(source, "att.abandon_second", tmp_path)
    assert _entry(report, "sent_ends")["verdict"] == "holds"
    assert [f["code"] for f in scans[0]["failures"]] == ["PW526"] and scans[1]["committed"] == ["a1/2"]
    assert state == "closed"


TICK = _policy(
    "tick_twice",
    """\
role buyer
clock timer
state placed initial
state waiting
state done final
transition open: placed -> waiting {
  by buyer
  stamp opened_at
}
transition remind: waiting -> waiting {
  by timer
  when now >= opened_at + 1d and fired(remind) < 2
}
transition close: waiting -> done {
  by timer
  when fired(remind) == 2
}
property opened_closes: reached(waiting) leads_to final
""",
)


def _tick_run(source: str, directory: Path) -> tuple[str, list[dict[str, Any]], dict[str, Any]]:
    from pactwright.runtime import TestClock, open_agreement, show, submit

    with _store(source, directory) as (store, report):
        open_agreement(store, "att.tick_twice", {}, {"buyer": "bea"}, agreement_id="a1", clock=TestClock(T0))
        submit(store, "a1", "open", "buyer", "bea", "open", clock=TestClock(T0))
        scans = _scan_for_days(store)
        return show(store, "a1").agreement.state, scans, report


def test_a_deadline_transition_that_fires_twice_on_one_stamp(tmp_path: Path) -> None:
    """`remind` fires twice at one deadline, then `close`: the second firing has a key of its own.

    Once broken: the key was (transition, deadline) alone, so the second
    `remind` was answered with the first one's result on every scan and
    the agreement stayed `waiting` although `opened_closes` holds.
    """
    state, scans, report = _tick_run(TICK, tmp_path)
    assert _entry(report, "opened_closes")["verdict"] == "holds"
    assert [[d["key"] for d in s["due"]] for s in scans[:3]] == [
        [f"sched/remind/{T0 + DAY}"],
        [f"sched/remind/{T0 + DAY}/2"],
        ["sched/close/v3"],
    ]
    assert [s["committed"] for s in scans[:3]] == [["a1/2"], ["a1/3"], ["a1/4"]]
    assert state == "done" and all(s["replayed"] == 0 for s in scans)


def test_the_same_reminder_restamped_is_reached(tmp_path: Path) -> None:
    """Held: when `remind` stamps again, its second deadline differs and the run ends `done`."""
    source = TICK.replace("fired(remind) < 2\n", "fired(remind) < 2\n  stamp opened_at\n")
    state, _, report = _tick_run(source, tmp_path)
    assert _entry(report, "opened_closes")["verdict"] == "holds" and state == "done"


BUDGET = _policy(
    "budget_tool_calls",
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
role buyer
clock timer
state placed initial
state sent
state done final
transition send: placed -> sent {
  by buyer
  call notify
}
transition finish: sent -> done {
  by timer
  when acknowledged(notify)
  call receipt
}
property sent_ends: reached(sent) leads_to final
""",
)


def test_a_budget_refusal_is_a_violation_the_lasso_names(tmp_path: Path) -> None:
    """Once broken: `sent_ends` was `holds` while every scan's `finish` failed PW524 and the run stayed `sent`.

    Then the property was `incomplete` (budgets were not modelled); now the explorer counts calls
    against the budget as the runtime does, and the property is violated by the runtime's own run.
    """
    from pactwright.runtime import TestClock, open_agreement, show, submit
    from pactwright.runtime.effect_http import Credentials, HttpAdapter, load_providers
    from pactwright.runtime.effect_worker import EffectWorker
    from pactwright.runtime.provider_sim import start_simulator

    with _store(BUDGET, tmp_path, verdict="fail") as (store, report), start_simulator() as sim:
        routes = tmp_path / "providers.toml"
        routes.write_text(f'[destination."https://api.example.com/notify"]\nendpoint = "{sim.url}/notify"\n')
        open_agreement(store, "att.budget_tool_calls", {"order_id": "ORD-1"}, {"buyer": "bea"}, agreement_id="a1",
                       clock=TestClock(T0))  # fmt: skip
        submit(store, "a1", "send", "buyer", "bea", "send", clock=TestClock(T0))
        EffectWorker(store, HttpAdapter(load_providers(routes), Credentials()), TestClock(T0 + 30)).drain()
        scans = _scan_for_days(store)
        state = show(store, "a1").agreement.state
    # The runtime refuses `finish` for good (max_tool_calls 1 is spent by `send`) ...
    assert all([f["code"] for f in s["failures"]] == ["PW524"] for s in scans) and state == "sent"
    # ... and the verifier finds that run: a stop in `sent` where `finish` is refused for the budget.
    entry = _entry(report, "sent_ends")
    assert entry["verdict"] == "violated" and report["verdict"] == "fail", entry
    assert entry["lasso"]["last_state"] == "sent" and entry["lasso"]["late"] is None
    assert entry["lasso"]["refused"] == ["`finish` by timer: refused at commit (PW524, call number 2 passes the "
                                         "budget's max_tool_calls 1)"]  # fmt: skip


# -- a lasso that describes itself wrongly --------------------------------------------------

FUNDS = _policy(
    "funds_refused",
    """\
role buyer
clock timer
param price: money between 1.00 and 500.00
account card "card" external
account escrow "escrow:{agreement}"
account shop "shop" external
state placed initial
state funded
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


def test_a_release_refused_for_funds_is_violated_with_a_witness() -> None:
    """Held: `release` commits only for price 1.00; the lasso is a stop in `funded` with a price above it."""
    entry = _entry(_verify(FUNDS), "funded_ends")
    assert entry["verdict"] == "violated"
    lasso = entry["lasso"]
    assert [(e["actor"], e["move"]) for e in lasso["events"]] == [("buyer", "fund"), ("clock", "time passes")]
    assert lasso["stuttering"] and lasso["last_state"] == "funded" and lasso["params"]["price"] > 100


def test_a_lasso_stopped_by_a_commit_refusal_says_so_and_names_no_closed_window() -> None:
    """Once broken: `late` read "time keeps the guard of  false: never enabled again", naming nothing."""
    lasso = _entry(_verify(FUNDS), "funded_ends")["lasso"]
    assert lasso["late"] is None
    assert lasso["refused"] == [
        "`release` by timer: refused at commit (`release` is enabled but the runtime refuses it at commit: "
        "`escrow` would go below zero)"
    ]


# -- attacks that held ---------------------------------------------------------------------

TWO_STAMPS = _policy(
    "two_stamps",
    """\
role buyer
role seller
clock timer
state placed initial
state funded
state shipped
state done final
state expired final
transition fund: placed -> funded {
  by buyer
  stamp funded_at
}
transition ship: funded -> shipped {
  by seller
  stamp shipped_at
}
transition close: shipped -> done {
  by timer
  when now >= shipped_at + 1d and now < funded_at + 5d
}
transition expire: funded -> expired {
  by timer
  when now >= funded_at + 3d
}
property shipped_ends: reached(shipped) leads_to final
""",
)


def test_a_window_closed_by_another_stamp_is_violated() -> None:
    """`close` is open only while both ages allow it: a scheduler that lets it go by (weak fairness) stops."""
    entry = _entry(_verify(TWO_STAMPS), "shipped_ends")
    assert entry["verdict"] == "violated"
    lasso = entry["lasso"]
    assert [(e["actor"], e["move"]) for e in lasso["events"]] == [
        ("buyer", "fund"), ("seller", "ship"), ("clock", "time passes")
    ]  # fmt: skip
    assert lasso["late"] == (
        "time keeps the guard of `close` (`now >= shipped_at + 1d and now < funded_at + 5d`) false: never enabled again"
    )


def test_an_effect_ceiling_refusal_is_violated_with_a_witness() -> None:
    """A payout above its ceiling is refused before policy (PW522): the lasso stops with price above 100.00."""
    source = _policy("ceiling_refused", NOTIFY.replace("STRATEGY", "retry").replace(
        "  timeout 10s\n", "  timeout 10s\n  ceiling 100.00\n  amount price\n"
    ).replace('param order_id: text matching "ORD-[0-9]{1,6}"', "param price: money between 1.00 and 500.00") + """\
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
""")  # fmt: skip
    entry = _entry(_verify(source), "funded_ends")
    assert entry["verdict"] == "violated" and entry["lasso"]["params"]["price"] > 10000


def test_a_property_reading_now_is_a_blocker() -> None:
    source = TWO_STAMPS.replace("reached(shipped) leads_to", "reached(shipped) and now >= funded_at + 2d leads_to")
    result = check_bytes(source.encode())
    assert result.candidate is None and [d.code for d in result.diagnostics] == ["PW171"]


@pytest.mark.parametrize("source", ["APPROVAL_FIRST", "ABANDON_FIRST", "TICK"])
def test_cut_by_the_bound_the_same_policies_are_incomplete(source: str) -> None:
    report = _verify(globals()[source], max_depth=2)
    assert [p["verdict"] for p in report["properties"]] == ["incomplete"]
    assert report["verdict"] != "pass"


def test_two_agreements_keep_the_approval_verdict() -> None:
    assert _entry(_verify(APPROVAL_FIRST, agreements=2), "funded_ends")["verdict"] == "holds"
