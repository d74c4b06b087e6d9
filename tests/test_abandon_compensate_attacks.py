"""Attacks on the abandon bit, on `compensate_earlier` after an uncertain call, and on PW530 with approvals.

Each test runs a small policy in the runtime (a test clock, the effect worker
against the provider simulator) and, where the verifier has a say, compares
its verdict with the run. Helpers come from the earlier attack files.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from pactwright.errors import PactwrightError
from tests import signed_bundles as sb
from tests.test_budget_inflight_attacks import (
    _adapter_for,
    _any_store,
    _effect,
    _entry,
    _open,
    _refusal,
    _require,
    _step,
    _submit,
)
from tests.test_liveness_attacks import HEAD, T0, _scan_for_days
from tests.test_liveness_attacks_2 import _drain, _phases


def _steps(store: Any, adapter: Any, at: int, count: int) -> list[tuple[str, str, int]]:
    """At most `count` worker steps at `at` (bounded: a worker that re-sends forever must not hang the test)."""
    out = []
    for i in range(count):
        step = _step(store, adapter, at + i)
        if step is None:
            break
        out.append((step.instance, step.phase, step.attempts))
    return out


# == BUGS ======================================================================================

# -- an abandoned `once` compensation is sent again -------------------------------------------

# `go` calls `hold` (compensate with release_hold) then `charge` (once); `release_hold` is itself
# `once`. docs/effects.md: a compensation is "sent like any call", and `once` "never sends twice".
ONCE_COMPENSATION = (
    HEAD.replace("{name}", "once_compensation")
    + "default deny\nrule R2 allow\n"
    + _effect("hold", "compensate with release_hold")
    + _effect("charge", "once")
    + _effect("release_hold", "once")
    + """\
role buyer
clock timer
state placed initial
state sent
state done final
transition go: placed -> sent {
  by buyer
  call hold
  call charge
}
transition finish: sent -> done {
  by timer
  when applied(release_hold) == 1
}
"""
)


def test_an_abandoned_once_compensation_is_never_sent_again(tmp_path: Path) -> None:
    """`hold` acknowledged, `charge` fails (503, `once`: for good), so `hold` needs `release_hold`; its
    request is lost and, `once`, it is `abandoned_uncertain`. Nothing may send it again: the row stays
    abandoned and the simulator saw exactly one `release_hold` request, and `hold`, whose compensation
    was given up, leaves the due set (an operator decides). Once broken: the worker picked up the
    original row (still `compensation_required`, due), found the compensation row and dispatched it
    again, attempt after attempt, until one was acknowledged."""
    from pactwright.runtime.provider_sim import start_simulator

    with _any_store(ONCE_COMPENSATION, tmp_path) as (store, _report), start_simulator() as sim:
        adapter = _adapter_for(tmp_path, sim, "hold", "charge", "release_hold")
        _open(store, "att.once_compensation", {})
        _submit(store, "go", "go", T0)
        _require(_step(store, adapter, T0 + 30).phase == "acknowledged", "`hold` is acknowledged")
        sim.queue("error_5xx", "lost_request", "lost_request")
        steps = _steps(store, adapter, T0 + 60, 6)
        phases = dict(_phases(store))
        requests = sim.state()["requests"]
    _require(steps[:2] == [("a1/1/e1", "failed", 1), ("a1/1/e0/c", "abandoned_uncertain", 1)], "abandoned once")
    assert (phases["a1/1/e0/c"], requests, len(steps)) == ("abandoned_uncertain", 3, 2), (steps, phases)


# == ATTACKS THAT HELD ==========================================================================

# -- three calls, mixed strategies: an uncertain last call undoes only the `compensate` ones ---

THREE_CALLS = (
    HEAD.replace("{name}", "three_calls")
    + "default deny\nrule R2 allow\n"
    + _effect("hold", "compensate with release_hold")
    + _effect("charge", "retry")
    + _effect("ship", "compensate with unship")
    + _effect("release_hold", "retry")
    + _effect("unship", "retry")
    + """\
role buyer
clock timer
state placed initial
state sent
state done final
state voided final
transition go: placed -> sent {
  by buyer
  call hold
  call charge
  call ship
}
transition finish: sent -> done {
  by timer
  when acknowledged(ship)
}
transition void: sent -> voided {
  by timer
  when not acknowledged(hold) and not acknowledged(ship) and acknowledged(charge)
}
property sent_ends: reached(sent) leads_to final
"""
)


def test_an_uncertain_last_call_undoes_the_compensate_calls_and_keeps_the_retried_one(tmp_path: Path) -> None:
    """`hold` acknowledged, `charge` loses its response (`retry`: sent again with its key, acknowledged,
    one write), `ship` loses its request (`compensate`: `compensation_required`). The runtime then
    compensates `ship` (by `unship`) and `hold` (by `release_hold`, via `compensate_earlier`) and leaves
    `charge` acknowledged, as the model does; `void` ends the run."""
    from pactwright.runtime import show
    from pactwright.runtime.provider_sim import start_simulator

    with _any_store(THREE_CALLS, tmp_path) as (store, report), start_simulator() as sim:
        adapter = _adapter_for(tmp_path, sim, "hold", "charge", "ship", "release_hold", "unship")
        _open(store, "att.three_calls", {})
        _submit(store, "go", "go", T0)
        _require(_step(store, adapter, T0 + 30).phase == "acknowledged", "`hold` is acknowledged")
        sim.queue("lost_response")
        _require(_step(store, adapter, T0 + 31).phase == "prepared", "`charge` is sent again")
        _require(_step(store, adapter, T0 + 60).phase == "acknowledged", "`charge` is acknowledged")
        sim.queue("lost_request")
        _drain(store, adapter, T0 + 900)
        phases = _phases(store)
        writes = sim.state()["writes"]
        scans = _scan_for_days(store)
        state = show(store, "a1").agreement.state
    assert phases == [
        ("a1/1/e0", "compensated"), ("a1/1/e0/c", "acknowledged"), ("a1/1/e1", "acknowledged"),
        ("a1/1/e2", "compensated"), ("a1/1/e2/c", "acknowledged"),
    ]  # fmt: skip
    assert writes == 4 and state == "voided" and not any(s["failures"] for s in scans)
    # The verifier's counterexample is another run (a failed `hold` leaves `charge` cancelled, so `void`
    # never fires): sound, and not the run above, which it does not contradict.
    entry = _entry(report, "sent_ends")
    assert entry["verdict"] == "violated" and [e["move"] for e in entry["lasso"]["events"]] == [
        "go", "fault provider_error hold", "cancel charge", "cancel ship"
    ]  # fmt: skip


# -- PW530 with an approval: refused before parking; a refused grant changes nothing ------------

APPROVED_PAY = (
    HEAD.replace("{name}", "approved_pay")
    + "default deny\nrule R2 allow\n"
    + _effect("notify", "reconcilable\n  key order_id")
    + _effect("charge", "retry")
    + """\
param order_id: text matching "ORD-[0-9]{1,6}"
role buyer
role manager
clock timer
state placed initial
state paid
state done final
transition ping: placed -> placed {
  by buyer
  when fired(ping) == 0
  call notify
}
transition pay: placed, paid -> paid {
  by buyer
  when total(notify) >= 0 and fired(pay) <= 1
  approval by manager
  call charge
}
transition finish: paid -> done {
  by timer
  when fired(pay) == 2 and acknowledged(charge)
}
property paid_ends: reached(paid) leads_to final
"""
)


def test_an_approved_call_site_in_flight_refuses_before_parking_and_a_refused_grant_keeps_its_proof(
    tmp_path: Path,
) -> None:
    """`ping` calls `notify` (reconcilable). `pay` (approval by manager, reads `total(notify)`) parks while
    `notify` is merely prepared; the worker then parks `notify` (lost request, lookup unknown), so the
    grant is refused PW527 and changes nothing: the request stays pending, no event, no call. After
    the operator reconciles, the same proof grants it. Re-firing `pay` while its `charge` is in flight
    is refused PW530 before parking (no second request); once `charge` is acknowledged it parks and
    is granted. The run ends `done`."""
    from pactwright.runtime import TestClock, approvals, show
    from pactwright.runtime.effect_ops import reconcile
    from pactwright.runtime.parties import add_party
    from pactwright.runtime.provider_sim import start_simulator
    from pactwright.signing import raw_public_key, sign_statement

    def proof(request: dict[str, Any]) -> str:
        statement = approvals.decision_statement(request["id"], request["preview_digest"], "grant")
        return sign_statement(sb.key("max").private, statement)

    def requests(store: Any) -> list[str]:
        return [r.status for r in approvals.list_requests(store, agreement_id="a1")]

    with _any_store(APPROVED_PAY, tmp_path) as (store, report), start_simulator() as sim:
        add_party(store, "max", "manager", raw_public_key(sb.key("max").private.public_key()), T0)
        add_party(store, "opal", "operator", None, T0)
        adapter = _adapter_for(tmp_path, sim, "notify", "charge")
        from pactwright.runtime import open_agreement

        open_agreement(store, "att.approved_pay", {"order_id": "ORD-1"}, {"buyer": "bea", "manager": "max"},
                       agreement_id="a1", clock=TestClock(T0))  # fmt: skip
        _submit(store, "ping", "ping", T0)
        first = _submit(store, "pay", "pay-1", T0 + 1).approval
        sim.queue("lost_request", "lookup_unknown")
        _drain(store, adapter, T0 + 30)
        _require(_phases(store) == [("a1/1/e0", "needs_reconciliation")], "`notify` is parked")
        with pytest.raises(PactwrightError) as refused:
            approvals.grant(store, first["id"], "max", proof(first), TestClock(T0 + 40))
        after_refusal = (requests(store), show(store, "a1").agreement.version, len(_phases(store)))
        reconcile(store, "a1", "notify", "recovered_acknowledgement", "opal", provider_ref="ref-1",
                  clock=TestClock(T0 + 50))  # fmt: skip
        granted = approvals.grant(store, first["id"], "max", proof(first), TestClock(T0 + 60))
        in_flight = _refusal(store, "pay", "pay-2", T0 + 70)
        parked_then = requests(store)
        _drain(store, adapter, T0 + 80)
        second = _submit(store, "pay", "pay-2", T0 + 90).approval
        approvals.grant(store, second["id"], "max", proof(second), TestClock(T0 + 100))
        _drain(store, adapter, T0 + 110)
        scans = _scan_for_days(store)
        state = show(store, "a1").agreement.state
    assert refused.value.code == "PW527" and after_refusal == (["pending"], 1, 1)
    assert granted.status == "committed" and in_flight == "PW530" and parked_then == ["consumed"]
    assert state == "done" and scans[0]["committed"] == ["a1/4"]
    # The verifier's counterexample: the buyer never fires `pay` a second time (no role is obliged to).
    entry = _entry(report, "paid_ends")
    assert entry["verdict"] == "violated" and [e["move"] for e in entry["lasso"]["events"]] == [
        "approve pay", "pay", "dispatch charge"
    ]  # fmt: skip
