"""Attacks on two guarantees: budgets modelled exactly, and one call in flight per call site (PW530).

The explorer refuses at commit, as the runtime does, a command whose calls
would pass an effect's `max_calls` (PW523), the budget's `max_tool_calls`
(PW524) or the budget's `ceiling` (PW525), counting calls made (failed and
abandoned ones count, compensations and cancelled ones do not); and it has
no move for a command whose own call site still has a call without an
outcome, which the runtime refuses with PW530. Each test verifies a small
policy, runs the same agreement in the runtime (a test clock, the effect
worker against the provider simulator, the scheduler's scans) and compares
the two; a broken precondition fails a test outright (`_require`), apart from
the differential assertion. Three attacks broke the guarantees and are fixed
(each says "Once broken"): an abandon a re-send overwrote, an uncertain
`compensate` call that left the calls before it standing, and a lasso naming
PW530 where the runtime refuses PW527. The attacks that held assert the exact
verdict and the exact run.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from pactwright.errors import CommandError
from tests import signed_bundles as sb
from tests.test_liveness_attacks import DAY, HEAD, NOTIFY, T0, _entry, _policy, _scan_for_days, _verify
from tests.test_liveness_attacks_2 import ESCROW, _drain, _phases, _scan_at

PROVIDER = "https://api.example.com"


def _require(condition: bool, what: str) -> None:
    """A precondition of a differential test: a failure here is not the defect the test is about."""
    if not condition:
        pytest.fail(f"precondition broken: {what}")


@contextmanager
def _any_store(source: str, directory: Path, backend: str = "sqlite") -> Iterator[tuple[Any, dict[str, Any]]]:
    """A store running the policy whatever the verifier said of it, and the report.

    A passing bundle is activated as `pactwright activate` does; any other is
    recorded past activation's refusal (as tests/test_verifier_attacks_1_1.py
    `_convicted_store` does), so a differential test keeps running once a fix
    turns a false pass into a failure.
    """
    from datetime import datetime

    from pactwright.canonical import hash_bytes, load_json
    from pactwright.manifest import MANIFEST_PATH
    from pactwright.runtime.activation import FixedClock, VerifiedBundle, activate, activate_files
    from pactwright.runtime.store import open_store
    from pactwright.signing import APPROVAL_PATH

    bundle, verdict = sb.compile_verified(source.encode(), "attack.pact")
    report: dict[str, Any] = load_json(bundle["report.json"])
    files = sb.sign(bundle)
    clock = FixedClock(datetime.fromisoformat(sb.NOW))
    with sb.temporary_store(backend, directory) as url, open_store(url) as store:
        if verdict == "pass":
            activate_files(store, files, sb.default_trust(), clock=clock)
        else:
            manifest = sb.manifest_of(files)
            approver = load_json(files[APPROVAL_PATH])["statement"]["approver"]
            activate(store, VerifiedBundle(
                pact_id=manifest["pact"]["id"], pact_version=manifest["pact"]["version"],
                manifest_hash=hash_bytes(files[MANIFEST_PATH]), candidate_hash=manifest["candidate_hash"],
                files=files, approval_hash=hash_bytes(files[APPROVAL_PATH]), approver=approver,
                approver_keyid=sb.key("alice").keyid, signer_keyids=(sb.key("signer").keyid,), expires=sb.EXPIRES,
                report_verdict=verdict, verified_at=clock.now(),
            ))  # fmt: skip
        report["url"] = url
        yield store, report


def _effect(name: str, strategy: str) -> str:
    """A reversible R2 effect sent to `PROVIDER/name`."""
    return (
        f'effect {name} {{\n  risk R2\n  reversibility reversible\n  egress POST "{PROVIDER}/{name}"\n'
        f"  timeout 10s\n  strategy {strategy}\n}}\n"
    )


def _adapter_for(directory: Path, sim: Any, *names: str) -> Any:
    """An HTTP adapter that sends each named effect's destination to the simulator."""
    from pactwright.runtime.effect_http import Credentials, HttpAdapter, load_providers

    routes = directory / "providers.toml"
    routes.write_text("".join(f'[destination."{PROVIDER}/{n}"]\nendpoint = "{sim.url}/{n}"\n' for n in names))
    return HttpAdapter(load_providers(routes), Credentials())


def _step(store: Any, adapter: Any, at: int) -> Any:
    """One step of the effect worker: the next due call only."""
    from pactwright.runtime import TestClock
    from pactwright.runtime.effect_worker import EffectWorker

    return EffectWorker(store, adapter, TestClock(at)).step()


def _open(store: Any, pact: str, params: dict[str, str], agreement_id: str = "a1") -> None:
    from pactwright.runtime import TestClock, open_agreement

    open_agreement(store, pact, params, {"buyer": "bea"}, agreement_id=agreement_id, clock=TestClock(T0))


def _submit(store: Any, transition: str, key: str, at: int, agreement_id: str = "a1", **options: Any) -> Any:
    from pactwright.runtime import TestClock, submit

    return submit(store, agreement_id, transition, "buyer", "bea", key, clock=TestClock(at), **options)


def _refusal(store: Any, transition: str, key: str, at: int, **options: Any) -> str:
    """The code a command by the buyer is refused with (it must be refused)."""
    with pytest.raises(CommandError) as refused:
        _submit(store, transition, key, at, **options)
    return refused.value.code


def _codes(scan: dict[str, Any]) -> list[str]:
    return [f["code"] for f in scan["failures"]]


def _invariant(report: dict[str, Any], name: str) -> dict[str, Any]:
    return next(i for i in report["invariants"] if i["name"] == name)


# == BUGS ======================================================================================

# -- funds_not_stuck forgets an abandon that a re-sent call overwrote --------------------------

# `send` may call `notify` again once its call failed or was abandoned (its guard reads
# `abandoned(notify)`, so it is not refused PW526 itself). The runtime refuses `release`, which
# depends on `notify`, PW526 for good once ANY call of `notify` was abandoned; the model keeps the
# latest call per call site, so after the re-send is acknowledged it lets `release` out.
RESEND_STUCK = _policy(
    "resend_stuck",
    NOTIFY.replace("STRATEGY", "once")
    + ESCROW
    + """\
state done final
transition fund: placed -> funded {
  by buyer
  transfer price from card to escrow
}
transition send: funded -> funded {
  by buyer, timer
  when fired(send) == 0 or not acknowledged(notify) or abandoned(notify)
  call notify
}
transition release: funded -> done {
  by buyer, timer
  when acknowledged(notify)
  transfer price from escrow to shop
}
""",
)


def test_funds_stuck_behind_an_abandon_a_resend_overwrote_are_found(tmp_path: Path) -> None:
    """`fund` 10.00 into escrow, `send` (lost request: `once` abandons it), `send` again (acknowledged):
    the runtime refuses `release` PW526 for every role on every scan, and the escrow holds 10.00 for
    good. Once broken: the model kept only the latest call per call site, the re-send overwrote the
    abandon, and `funds_not_stuck` passed. Now the agreement remembers every abandon (`Layout.abandoned`)."""
    from pactwright.runtime import show
    from pactwright.runtime.provider_sim import start_simulator

    with _any_store(RESEND_STUCK, tmp_path) as (store, report), start_simulator() as sim:
        adapter = _adapter_for(tmp_path, sim, "notify")
        _open(store, "att.resend_stuck", {"order_id": "ORD-1", "price": "10.00"})
        _submit(store, "fund", "fund", T0)
        _submit(store, "send", "send-1", T0)
        sim.queue("lost_request")
        _drain(store, adapter, T0 + 30)
        _require(_phases(store) == [("a1/2/e0", "abandoned_uncertain")], "the first call is abandoned")
        _submit(store, "send", "send-2", T0 + 60)
        _drain(store, adapter, T0 + 90)
        _require(_phases(store)[1] == ("a1/3/e0", "acknowledged"), "the re-sent call is acknowledged")
        by_buyer = _refusal(store, "release", "release", T0 + 120)
        scans = _scan_for_days(store)
        view = show(store, "a1").agreement
    stuck = view.state == "funded" and view.balances["escrow"] == 1000
    _require(stuck and by_buyer == "PW526" and all(_codes(s) == ["PW526"] for s in scans), "the run is stuck")
    assert report["verdict"] != "pass" and _invariant(report, "funds_not_stuck")["verdict"] != "holds-to-bound"


def test_the_same_resend_under_a_property_is_violated_by_the_runtimes_run() -> None:
    """With a property, the lasso is the run the runtime takes: the abandon, the re-send acknowledged,
    and `release` refused PW526 for good. (Once the model forgot the abandon and said `incomplete`.)"""
    report = _verify(RESEND_STUCK + "property funded_ends: reached(funded) leads_to final\n")
    entry = _entry(report, "funded_ends")
    assert entry["verdict"] == "violated" and report["verdict"] == "fail"
    lasso = entry["lasso"]
    assert [e["move"] for e in lasso["events"]] == [
        "fund", "send", "fault lost_request notify", "runtime notify", "send", "dispatch notify"
    ]  # fmt: skip
    assert lasso["refused"] == ["`release` by buyer: PW526, it depends on `notify` and a call of it was abandoned"]
    assert _invariant(report, "funds_not_stuck")["verdict"] == "violated"


# -- an uncertain call under `compensate with E` does not compensate the calls before it -------

# `go` calls `hold` then `charge`, each `compensate with ...`. The explorer treats any fault of a
# `compensate` call as giving the step up (docs/verifier.md: "`compensate with E` after any fault"),
# so `hold` is compensated and its site no longer stands acknowledged; the runtime compensates the
# earlier calls only after a definite failure or an abandon (effect_worker._after_phase).
COMPENSATE_UNCERTAIN = (
    HEAD.replace("{name}", "compensate_uncertain")
    + "default deny\nrule R2 allow\n"
    + _effect("hold", "compensate with release_hold")
    + _effect("charge", "compensate with refund")
    + _effect("release_hold", "retry")
    + _effect("refund", "retry")
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
}
transition finish: sent -> done {
  by timer
  when acknowledged(charge)
}
transition void: sent -> voided {
  by timer
  when not acknowledged(hold) and not acknowledged(charge)
}
property sent_ends: reached(sent) leads_to final
"""
)


def test_an_uncertain_compensate_call_releases_the_calls_before_it(tmp_path: Path) -> None:
    """`hold` is acknowledged, `charge`'s request is lost: `hold` then needs `release_hold` and `void`
    ends the run, in the model and in the runtime. Once broken: the runtime compensated `charge` by
    `refund` alone, `hold` stayed acknowledged with no compensation row, and neither `finish` nor
    `void` could ever fire while the verifier said `sent_ends` holds."""
    from pactwright.runtime import show
    from pactwright.runtime.provider_sim import start_simulator

    with _any_store(COMPENSATE_UNCERTAIN, tmp_path) as (store, report), start_simulator() as sim:
        adapter = _adapter_for(tmp_path, sim, "hold", "charge", "release_hold", "refund")
        _open(store, "att.compensate_uncertain", {})
        _submit(store, "go", "go", T0)
        first = _step(store, adapter, T0 + 30)
        _require(first.instance == "a1/1/e0" and first.phase == "acknowledged", "`hold` is acknowledged")
        sim.queue("lost_request")
        _drain(store, adapter, T0 + 60)
        _drain(store, adapter, T0 + 900)
        phases = dict(_phases(store))
        scans = _scan_for_days(store)
        state = show(store, "a1").agreement.state
    _require(phases.get("a1/1/e1") == "compensated", "`charge` was compensated")
    _require(not any(s["failures"] for s in scans), "no scan failed")
    holds = _entry(report, "sent_ends")["verdict"] == "holds"
    assert not holds or state in ("done", "voided"), (state, phases)


# -- a lasso names PW530 where the runtime refuses PW527 --------------------------------------

PARKED_RESEND = _policy(
    "parked_resend",
    NOTIFY.replace("STRATEGY", "reconcilable\n  key order_id")
    + """\
role buyer
clock timer
state placed initial
state sent
state done final
transition send: placed, sent -> sent {
  by buyer, timer
  when fired(send) == 0 or (now >= sent_at + 1d and not acknowledged(notify))
  stamp sent_at
  call notify
}
transition finish: sent -> done {
  by timer
  when acknowledged(notify) or reconciled(notify)
}
property sent_ends: reached(sent) leads_to final
""",
)


def test_a_lasso_stopped_on_a_parked_call_names_the_runtime_refusal(tmp_path: Path) -> None:
    """The call's request is lost and its lookup answers unknown, so it stays `needs_reconciliation`.
    Both the model and the runtime stop in `sent` (violated is right); the scheduler's scans fail
    with PW527 (run_in: check_dependencies before check_in_flight), and the lasso's `refused` names
    PW527 too. Once broken: it named PW530, recorded before the model asked `outcome_refusal`."""
    from pactwright.runtime.provider_sim import start_simulator

    with _any_store(PARKED_RESEND, tmp_path) as (store, report), start_simulator() as sim:
        adapter = _adapter_for(tmp_path, sim, "notify")
        _open(store, "att.parked_resend", {"order_id": "ORD-1"})
        _submit(store, "send", "send", T0)
        sim.queue("lost_request", "lookup_unknown")
        _drain(store, adapter, T0 + 30)
        scan = _scan_at(store, T0 + DAY + 5)
        phases = _phases(store)
    _require(phases == [("a1/1/e0", "needs_reconciliation")] and _codes(scan) == ["PW527"], "parked, PW527")
    entry = _entry(report, "sent_ends")
    _require(entry["verdict"] == "violated", "the stop in `sent` is found")
    refused = entry["lasso"]["refused"]
    assert len(refused) == 1 and "PW527" in refused[0] and "PW530" not in refused[0], refused


# == ATTACKS THAT HELD ==========================================================================

# -- two call sites of one effect: a cancelled call no longer counts against max_calls ------------


def _two_sites(max_calls: int) -> str:
    return _policy(
        f"two_sites_{max_calls}",
        NOTIFY.replace("STRATEGY", "once").replace("  timeout 10s\n", f"  timeout 10s\n  max_calls {max_calls}\n")
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


@pytest.mark.parametrize(("max_calls", "verdict", "state"), [(2, "violated", "sent"), (3, "holds", "done")])
def test_a_cancelled_second_call_is_not_counted_against_max_calls(
    tmp_path: Path, max_calls: int, verdict: str, state: str
) -> None:
    """`send` calls `notify` twice; the first call fails (503, `once`: failed for good) and the second is
    cancelled, so one call was made. Re-sending makes calls 2 and 3: over max_calls 2 (PW523 in the
    lasso and on every scan), within max_calls 3 (it commits and the run ends `done`). While the
    second call still waits to be cancelled, the re-send is refused PW530 in both."""
    from pactwright.runtime import show
    from pactwright.runtime.provider_sim import start_simulator

    with _any_store(_two_sites(max_calls), tmp_path) as (store, report), start_simulator() as sim:
        adapter = _adapter_for(tmp_path, sim, "notify")
        _open(store, f"att.two_sites_{max_calls}", {"order_id": "ORD-1"})
        _submit(store, "send", "send", T0)
        sim.queue("error_5xx")
        assert _step(store, adapter, T0 + 30).phase == "failed"
        waiting = _refusal(store, "send", "early", T0 + DAY)  # the second call is still `prepared`
        _drain(store, adapter, T0 + 60)
        cancelled = _phases(store)
        first = _scan_at(store, T0 + DAY + 5)
        _drain(store, adapter, T0 + DAY + 30)
        second = _scan_at(store, T0 + DAY + 60)
        end = show(store, "a1").agreement.state
    assert waiting == "PW530" and cancelled == [("a1/1/e0", "failed"), ("a1/1/e1", "cancelled")]
    entry = _entry(report, "sent_ends")
    assert entry["verdict"] == verdict and end == state
    if max_calls == 2:
        assert _codes(first) == _codes(second) == ["PW523"] and not first["committed"]
        assert entry["lasso"]["refused"] == [
            "`send` by timer: refused at commit (PW523, a call of `notify` number 3 passes its max_calls 2)"
        ]
    else:
        assert first["committed"] == ["a1/2"] and second["committed"] == ["a1/3"] and report["verdict"] == "pass"


# -- a compensation is not counted against max_tool_calls --------------------------------------


def _compensated_budget(tool_calls: int) -> str:
    return (
        HEAD.replace("{name}", f"compensated_budget_{tool_calls}")
        + f"default deny\nrule R2 allow\nbudget {{ max_tool_calls {tool_calls} }}\n"
        + _effect("hold", "compensate with release_hold")
        + _effect("charge", "once")
        + _effect("release_hold", "retry")
        + """\
role buyer
clock timer
state placed initial
state sent
state done final
state closed final
transition go: placed, sent -> sent {
  by buyer, timer
  when fired(go) == 0 or (now >= sent_at + 1d and not acknowledged(charge) and not abandoned(charge))
  stamp sent_at
  call hold
  call charge
}
transition finish: sent -> done {
  by timer
  when acknowledged(charge)
}
transition give_up: sent -> closed {
  by timer
  when abandoned(charge) or abandoned(hold)
}
property sent_ends: reached(sent) leads_to final
"""
    )


@pytest.mark.parametrize(("tool_calls", "verdict", "state"), [(3, "violated", "sent"), (4, "holds", "done")])
def test_a_compensation_is_not_counted_against_max_tool_calls(
    tmp_path: Path, tool_calls: int, verdict: str, state: str
) -> None:
    """`hold` is acknowledged, `charge` fails for good, `hold` is compensated by `release_hold` (its own
    row): two calls made. Going again makes calls 3 and 4: over max_tool_calls 3 (PW524 in the lasso
    and in the scan), within 4 (commits; the compensation would have made it 5)."""
    from pactwright.runtime import show
    from pactwright.runtime.provider_sim import start_simulator

    with _any_store(_compensated_budget(tool_calls), tmp_path) as (store, report), start_simulator() as sim:
        adapter = _adapter_for(tmp_path, sim, "hold", "charge", "release_hold")
        _open(store, f"att.compensated_budget_{tool_calls}", {})
        _submit(store, "go", "go", T0)
        assert _step(store, adapter, T0 + 30).phase == "acknowledged"
        sim.queue("error_5xx")
        _drain(store, adapter, T0 + 60)
        undone = _phases(store)
        first = _scan_at(store, T0 + DAY + 5)
        _drain(store, adapter, T0 + DAY + 30)
        second = _scan_at(store, T0 + DAY + 60)
        end = show(store, "a1").agreement.state
    assert undone == [("a1/1/e0", "compensated"), ("a1/1/e0/c", "acknowledged"), ("a1/1/e1", "failed")]
    entry = _entry(report, "sent_ends")
    assert entry["verdict"] == verdict and end == state
    if tool_calls == 3:
        assert _codes(first) == ["PW524"] and not first["committed"]
        assert entry["lasso"]["refused"] == [
            "`go` by timer: refused at commit (PW524, call number 4 passes the budget's max_tool_calls 3)"
        ]
    else:
        assert first["committed"] == ["a1/2"] and second["committed"] == ["a1/3"] and report["verdict"] == "pass"
