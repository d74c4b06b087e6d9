"""Attacks on budgets and on one call in flight per call site that held (split from
test_budget_inflight_attacks.py): the budget's ceiling at rounding edges, a re-sent call after
reconciliation, PW530 on a second call site, a retried call and a dry run, two agreements, and two
processes re-sending at once."""

from __future__ import annotations

import multiprocessing
from pathlib import Path
from typing import Any

import pytest

from pactwright.errors import PactwrightError
from tests import signed_bundles as sb
from tests.test_budget_inflight_attacks import (
    _adapter_for,
    _any_store,
    _codes,
    _effect,
    _invariant,
    _open,
    _refusal,
    _step,
    _submit,
)
from tests.test_liveness_attacks import DAY, NOTIFY, T0, _entry, _policy, _verify
from tests.test_liveness_attacks_2 import REENTRY, _drain, _phases, _scan_at

# -- the budget's ceiling over percent amounts, at the params' bounds ---------------------------

# Two calls of `pay`, each carrying floor(price x fee): at most 2 x floor(10001 x 50%) = 100.00.
ROUNDED_CEILING = """\
default deny
param price: money between 1.00 and 100.01
param fee: percent between 0% and 50%
rule R2 allow
budget { ceiling CEILING }
effect pay {
  risk R2
  reversibility reversible
  egress POST "https://api.example.com/pay"
  timeout 10s
  strategy idempotent
  key price, fee
  amount price * fee
}
role buyer
clock timer
state placed initial
state sent
state done final
transition send: placed -> sent {
  by buyer
  call pay
}
transition finish: sent -> done {
  by timer
  when acknowledged(pay)
  call pay
}
property sent_ends: reached(sent) leads_to final
"""


def _percent(millionths: int) -> str:
    text = f"{millionths // 10_000}.{millionths % 10_000:04d}".rstrip("0").rstrip(".")
    return f"{text}%"


def _paid_twice(directory: Path, pact: str, ceiling: str, price: str, fee: str
                ) -> tuple[dict[str, Any], list[tuple[str, str]]]:  # fmt: skip
    """`send` (its call acknowledged), then one scan: (the scan, [(call, amount)])."""
    from pactwright.runtime.provider_sim import start_simulator

    directory.mkdir()
    source = _policy(pact, ROUNDED_CEILING.replace("CEILING", ceiling))
    with _any_store(source, directory) as (store, _), start_simulator() as sim:
        adapter = _adapter_for(directory, sim, "pay")
        _open(store, f"att.{pact}", {"price": price, "fee": fee})
        _submit(store, "send", "send", T0)
        _drain(store, adapter, T0 + 30)
        scan = _scan_at(store, T0 + 60)
        with store.transaction(write=False) as db:
            amounts = [(str(i), str(a)) for i, a in db.query("SELECT id, amount FROM effects ORDER BY id")]
    return scan, amounts


def test_a_budget_ceiling_met_exactly_after_rounding_holds_and_the_runtime_agrees(tmp_path: Path) -> None:
    """Ceiling 100.00: the two calls carry at most 50.00 each (rounded down), so `sent_ends` holds; at
    price 100.01 and fee 50% the runtime carries 50.00 twice and commits (100.00 is not above it)."""
    entry = _entry(_verify(_policy("rounded_pass", ROUNDED_CEILING.replace("CEILING", "100.00"))), "sent_ends")
    assert entry["verdict"] == "holds"
    scan, amounts = _paid_twice(tmp_path / "top", "rounded_pass", "100.00", "100.01", "50%")
    assert scan["committed"] == ["a1/2"] and amounts == [("a1/1/e0", "5000"), ("a1/2/e0", "5000")]


def test_a_budget_ceiling_passed_by_one_unit_is_violated_at_a_witness_the_runtime_refuses(tmp_path: Path) -> None:
    """Ceiling 99.99: the lasso's witness carries 2 x 50.00; the runtime refuses the second call PW525 for
    those values, and commits it one fee step lower (49.99%: 2 x 49.99)."""
    entry = _entry(_verify(_policy("rounded_fail", ROUNDED_CEILING.replace("CEILING", "99.99"))), "sent_ends")
    assert entry["verdict"] == "violated" and entry["lasso"]["last_state"] == "sent"
    witness = entry["lasso"]["params"]
    price, fee = f"{witness['price'] // 100}.{witness['price'] % 100:02d}", _percent(witness["fee"])
    refused, amounts = _paid_twice(tmp_path / "witness", "rounded_fail", "99.99", price, fee)
    assert _codes(refused) == ["PW525"] and not refused["committed"] and 2 * int(amounts[0][1]) > 9999
    lower, _ = _paid_twice(tmp_path / "lower", "rounded_fail", "99.99", "100.00", "49.99%")
    assert lower["committed"] == ["a1/2"]


# -- a call reconciled as not occurred and sent again is one call -------------------------------

RESENT_ONCE = _policy(
    "resent_once",
    NOTIFY.replace("STRATEGY", "reconcilable\n  key order_id\n  max_calls 2")
    + """\
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
  when acknowledged(notify) or reconciled(notify)
  call notify
}
""",
)


def test_a_call_sent_again_after_reconciliation_is_one_call_against_max_calls(tmp_path: Path) -> None:
    """Lost request, looked up as not applied, sent again on its own row and acknowledged: one call made,
    so `finish`'s call is the second of max_calls 2 and commits, as the model (report pass) counts it."""
    from pactwright.runtime import show
    from pactwright.runtime.provider_sim import start_simulator

    with _any_store(RESENT_ONCE, tmp_path) as (store, report), start_simulator() as sim:
        adapter = _adapter_for(tmp_path, sim, "notify")
        _open(store, "att.resent_once", {"order_id": "ORD-1"})
        _submit(store, "send", "send", T0)
        sim.queue("lost_request")
        steps = [_step(store, adapter, T0 + 30) for _ in range(3)]
        scan = _scan_at(store, T0 + 60)
        state = show(store, "a1").agreement.state
    assert [(s.action, s.phase) for s in steps] == [
        ("dispatch", "needs_reconciliation"), ("lookup", "reconciled_not_occurred"), ("dispatch", "acknowledged")
    ]  # fmt: skip
    assert steps[2].attempts == 2 and scan["committed"] == ["a1/2"] and state == "done"
    assert report["verdict"] == "pass" and _invariant(report, "effect_max_calls")["verdict"] == "holds-to-bound"


# -- PW530: a retried call and a second call site hold the transition; dry-run is refused too ------

TWO_CALLS = _policy(
    "two_calls",
    NOTIFY.replace("STRATEGY", "retry")
    + _effect("receipt", "retry")
    + """\
role buyer
state placed initial
state sent
state done final
transition send: placed, sent -> sent {
  by buyer
  when fired(send) < 2
  call notify
  call receipt
}
transition finish: sent -> done {
  by buyer
  when acknowledged(receipt)
}
""",
)


def test_a_second_call_site_and_a_retried_call_hold_the_transition_until_settled(tmp_path: Path) -> None:
    """`send` calls `notify` then `receipt`. With `notify` acknowledged and `receipt` still prepared, then
    answered 503 (`retry`: prepared again, backing off), the re-send is refused PW530 at site 1, as
    a dry run too, and nothing is written; once `receipt` is acknowledged it commits."""
    from pactwright.runtime.provider_sim import start_simulator

    with _any_store(TWO_CALLS, tmp_path) as (store, report), start_simulator() as sim:
        adapter = _adapter_for(tmp_path, sim, "notify", "receipt")
        _open(store, "att.two_calls", {"order_id": "ORD-1"})
        _submit(store, "send", "send-1", T0)
        assert _step(store, adapter, T0 + 10).phase == "acknowledged"
        prepared = _refusal(store, "send", "send-2", T0 + 20)
        dry = _refusal(store, "send", "send-2", T0 + 20, dry_run=True)
        sim.queue("error_5xx")
        assert _step(store, adapter, T0 + 30).phase == "prepared"  # failed, due again after a back-off
        backing_off = _refusal(store, "send", "send-2", T0 + 31)
        before = _phases(store)
        _drain(store, adapter, T0 + 600)
        committed = _submit(store, "send", "send-2", T0 + 601)
    assert (prepared, dry, backing_off) == ("PW530", "PW530", "PW530")
    assert before == [("a1/1/e0", "acknowledged"), ("a1/1/e1", "prepared")]
    assert committed.seq == 2 and report["verdict"] == "pass" and not report["warnings"]


# -- PW530 in one of two agreements does not hold the other back -----------------------------------


def test_a_call_in_flight_in_one_agreement_does_not_hold_the_other(tmp_path: Path) -> None:
    """Two agreements of the re-entry policy: a1's call was acknowledged, a2's was made later and is still
    prepared. One scan at day 1 fires a1's `finish` and counts a2's re-send as PW530 ("not yet"); the
    verifier with two agreements says `sent_ends` holds."""
    from pactwright.runtime import show
    from pactwright.runtime.provider_sim import start_simulator

    assert _entry(_verify(REENTRY, agreements=2), "sent_ends")["verdict"] == "holds"
    with _any_store(REENTRY, tmp_path) as (store, _), start_simulator() as sim:
        adapter = _adapter_for(tmp_path, sim, "notify")
        for agreement in ("a1", "a2"):
            _open(store, "att.reentry", {"order_id": "ORD-1"}, agreement)
        _submit(store, "send", "send", T0, "a1")
        _drain(store, adapter, T0 + 30)
        _submit(store, "send", "send", T0 + 40, "a2")
        scan = _scan_at(store, T0 + DAY + 50)
        _drain(store, adapter, T0 + DAY + 60)
        after = _scan_at(store, T0 + DAY + 70)
        states = [show(store, a).agreement.state for a in ("a1", "a2")]
    assert scan["committed"] == ["a1/2"] and scan["refused"] == {"PW530": 1} and not scan["failures"]
    assert after["committed"] == ["a2/2"] and states == ["done", "done"]


# -- no undefined effect amount can reach the budget's ceiling ------------------------------------


def test_an_effect_amount_cannot_read_a_counter_so_it_is_never_undefined() -> None:
    """The only undefined money is a quotient by a counter (`applied`, `fired`); an effect amount may not
    read one (PW160), so the runtime never counts an undefined amount as 0 against the ceiling."""
    from pactwright.compiler.pipeline import check_bytes

    source = _policy(
        "undefined_amount",
        ROUNDED_CEILING.replace("CEILING", "100.00").replace("amount price * fee", "amount price / fired(send)"),
    )
    result = check_bytes(source.encode())
    assert result.candidate is None and "PW160" in [d.code for d in result.diagnostics]


# -- two processes re-sending at once: one commit at most, never two calls in flight at a site -----

RACE = _policy(
    "inflight_race",
    NOTIFY.replace("STRATEGY", "once")
    + """\
role buyer
state placed initial
state sent
state done final
transition send: placed, sent -> sent {
  by buyer
  when fired(send) < 3
  call notify
}
transition finish: sent -> done {
  by buyer
  when acknowledged(notify)
}
""",
)
RACES = 20


def _racer(url: str, side: int, agreements: list[str], barrier: Any, out: Any) -> None:
    """One OS process: for each agreement, a re-send after its call settled, then one while the call the
    winner made is in flight; each race starts at the barrier."""
    from pactwright.runtime import TestClock, submit
    from pactwright.runtime.store import open_store

    outcomes: list[tuple[str, str, str]] = []
    with open_store(url, migrate_schema=False) as store:
        for agreement in agreements:
            for race in ("settled", "in_flight"):
                barrier.wait(timeout=60)
                try:
                    submit(store, agreement, "send", "buyer", "bea", f"{race}-{side}", clock=TestClock(T0 + 120))
                    outcome = "committed"
                except PactwrightError as exc:
                    outcome = exc.code
                outcomes.append((agreement, race, outcome))
    out.put((side, outcomes))


@pytest.mark.parametrize("backend", sb.BACKENDS)
def test_two_processes_re_sending_at_once_commit_once_and_keep_one_call_in_flight(tmp_path: Path, backend: str) -> None:
    """Each agreement's first call is acknowledged; two processes then re-send at once: exactly one
    commits and the other is refused PW530 (the winner's call is in flight). Racing again before
    the worker runs, both are refused PW530. Every agreement ends with two calls, one in flight."""
    from pactwright.runtime.provider_sim import start_simulator

    agreements = [f"r{n:02d}" for n in range(RACES)]
    with _any_store(RACE, tmp_path, backend) as (store, report), start_simulator() as sim:
        adapter = _adapter_for(tmp_path, sim, "notify")
        for agreement in agreements:
            _open(store, "att.inflight_race", {"order_id": "ORD-1"}, agreement)
            _submit(store, "send", "send", T0, agreement)
        _drain(store, adapter, T0 + 30)
        ctx = multiprocessing.get_context("spawn")
        barrier, out = ctx.Barrier(2), ctx.Queue()
        procs = [ctx.Process(target=_racer, args=(report["url"], side, agreements, barrier, out)) for side in (0, 1)]
        for proc in procs:
            proc.start()
        results = dict(out.get(timeout=120) for _ in procs)
        for proc in procs:
            proc.join(timeout=60)
        with store.transaction(write=False) as db:
            rows = [(str(a), str(p)) for a, p in db.query("SELECT agreement_id, phase FROM effects ORDER BY id")]
    assert [proc.exitcode for proc in procs] == [0, 0]
    for n, agreement in enumerate(agreements):
        settled = sorted(results[side][2 * n][2] for side in (0, 1))
        in_flight = sorted(results[side][2 * n + 1][2] for side in (0, 1))
        assert (settled, in_flight) == (["PW530", "committed"], ["PW530", "PW530"]), agreement
        assert [p for a, p in rows if a == agreement] == ["acknowledged", "prepared"], agreement
