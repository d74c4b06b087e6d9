"""Adversarial checks of the verifier's language-1.1 features (related bounds, nested
splits, liveness, limits, effect outcomes, four eyes).

Each test states the verdict the verifier *should* give for a small policy; a known
false pass is marked `xfail(strict=True)` with the breaking run in its reason. The
liveness runs found by attacking the check are lassos now, each also run in the runtime.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from pactwright.compiler.bundle import compile_candidate
from pactwright.compiler.pipeline import check_bytes
from pactwright.verifier.explorer import Bounds
from pactwright.verifier.verify import VerifyOptions, verify_files

DAY = 86_400
T0 = 1780315200  # 2026-06-01T12:00:00Z


def _verify(source: str, agreements: int = 1) -> dict[str, Any]:
    result = check_bytes(source.encode())
    assert result.candidate is not None, [str(d) for d in result.diagnostics]
    files = dict(compile_candidate(result.candidate, result.source_map, "attack.pact"))
    return verify_files(files, VerifyOptions(bounds=Bounds(agreements=agreements), mutants=False))


def _property(report: dict[str, Any], name: str) -> str:
    return next(p["verdict"] for p in report["properties"] if p["name"] == name)


def _invariant(report: dict[str, Any], name: str) -> str:
    return next(i["verdict"] for i in report["invariants"] if i["name"] == name)


# -- (c) liveness: a human may act after a scheduler's window closed -------------------

LATE_REVIEW = """\
pact "att.late_review" version "1.0.0"
currency EUR scale 2
role buyer
clock timer
state placed initial
state funded
state review
state done final
transition fund: placed -> funded {
  by buyer
  stamp funded_at
}
transition start_review: funded -> review {
  by buyer
}
transition close: review -> done {
  by timer
  when now < funded_at + 1d
}
property reviewed_closes: reached(review) leads_to reached(done)
"""


CLOSE_SHUT = "time keeps the guard of `close` (`now < funded_at + 1d`) false: never enabled again"


def _moves(lasso: dict[str, Any]) -> list[tuple[str, str]]:
    return [(e["actor"], e["move"]) for e in lasso["events"]]


def test_liveness_scheduler_window_already_closed_is_violated() -> None:
    """Once a false PASS, then `incomplete`: the buyer starts the review after `close`'s window shut."""
    report = _verify(LATE_REVIEW)
    entry = next(p for p in report["properties"] if p["name"] == "reviewed_closes")
    assert entry["verdict"] == "violated" and report["verdict"] == "fail"
    lasso = entry["lasso"]
    # Time passes in `funded`, where no deadline is due: no scheduler had to let a window go by.
    assert _moves(lasso) == [("buyer", "fund"), ("clock", "time passes"), ("buyer", "start_review")]
    assert lasso["premise_at"] == 3 and lasso["stuttering"] and lasso["last_state"] == "review"
    assert lasso["late"] == CLOSE_SHUT and lasso["refused"] == [] and lasso["waiting_for"] == []


def test_late_review_run_is_real_in_the_runtime(tmp_path: Path) -> None:
    """The lasso above in the runtime: fund at t0, start the review at t0 + 2d; `close` is refused for good."""
    from pactwright.runtime import TestClock, open_agreement, submit

    with _convicted_store(LATE_REVIEW, tmp_path) as store:
        open_agreement(store, "att.late_review", {}, {"buyer": "bea"}, agreement_id="a1", clock=TestClock(T0))
        submit(store, "a1", "fund", "buyer", "bea", "fund", clock=TestClock(T0))
        assert (
            submit(store, "a1", "start_review", "buyer", "bea", "sr", clock=TestClock(T0 + 2 * DAY)).state == "review"
        )
        with pytest.raises(Exception, match="the guard of `close` is false") as refused:
            submit(store, "a1", "close", "timer", "timer", "close", clock=TestClock(T0 + 2 * DAY + 60))
        assert getattr(refused.value, "code", None) == "PW512"


LATE_REVIEW_EXPIRY = """\
pact "att.late_review_expiry" version "1.0.0"
currency EUR scale 2
role buyer
clock timer
state placed initial
state funded
state review
state done final
state expired final
transition fund: placed -> funded {
  by buyer
  stamp funded_at
}
transition start_review: funded -> review {
  by buyer
}
transition close: review -> done {
  by timer
  when now < funded_at + 1d
}
transition expire: funded -> expired {
  by timer
  when now >= funded_at + 3d
}
property funded_ends: reached(funded) leads_to final
"""


def test_liveness_review_after_window_never_final_is_violated() -> None:
    """Start the review 1d to 3d after funding: before `expire` is due, after `close`'s window shut."""
    report = _verify(LATE_REVIEW_EXPIRY)
    entry = next(p for p in report["properties"] if p["name"] == "funded_ends")
    assert entry["verdict"] == "violated" and report["verdict"] == "fail"
    lasso = entry["lasso"]
    assert _moves(lasso) == [("buyer", "fund"), ("clock", "time passes"), ("buyer", "start_review")]
    assert lasso["premise_at"] == 1 and lasso["stuttering"] and lasso["last_state"] == "review"
    assert lasso["late"] == CLOSE_SHUT


def test_liveness_review_with_a_window_that_stays_open_holds() -> None:
    """The same policy where `close` waits for a deadline (`now >= ...`) instead: the property holds."""
    report = _verify(LATE_REVIEW_EXPIRY.replace("now < funded_at + 1d", "now >= funded_at + 1d"))
    assert _property(report, "funded_ends") == "holds" and report["verdict"] == "pass"


# -- (e) effect outcomes: a scheduler guard reading an abandoned effect -----------------

ABANDONED_GIVE_UP = """\
pact "att.abandoned_give_up" version "1.0.0"
currency EUR scale 2
default deny
role buyer
clock timer
param order_id: text matching "ORD-[0-9]{1,6}"
rule R2 allow
effect notify {
  risk R2
  reversibility reversible
  egress POST "https://api.example.com/notify"
  timeout 10s
  strategy once
}
state placed initial
state sent
state done final
state closed final
transition send: placed -> sent {
  by buyer
  stamp sent_at
  call notify
}
transition finish: sent -> done {
  by timer
  when acknowledged(notify)
}
transition give_up: sent -> closed {
  by timer
  when now >= sent_at + 1d and not acknowledged(notify)
}
property sent_ends: reached(sent) leads_to final
"""


def test_liveness_guard_refused_after_abandon_is_violated() -> None:
    """One lost request: `once` abandons `notify`, and the runtime refuses `give_up` for good (PW526)."""
    report = _verify(ABANDONED_GIVE_UP)
    entry = next(p for p in report["properties"] if p["name"] == "sent_ends")
    assert entry["verdict"] == "violated" and report["verdict"] == "fail"
    lasso = entry["lasso"]
    assert _moves(lasso) == [
        ("buyer", "send"),
        ("worker", "fault lost_request notify"),
        ("runtime", "runtime notify"),
        ("clock", "time passes"),
    ]
    assert lasso["premise_at"] == 1 and lasso["stuttering"] and lasso["last_state"] == "sent"
    assert lasso["refused"] == ["`give_up` by timer: PW526, it depends on `notify` and a call of it was abandoned"]
    assert lasso["late"] is None


def test_liveness_guard_that_handles_the_abandon_holds() -> None:
    """`give_up` that also fires on `abandoned(notify)` handles it: the runtime runs it, the property holds."""
    fixed = ABANDONED_GIVE_UP.replace(
        "when now >= sent_at + 1d and not acknowledged(notify)",
        "when abandoned(notify) or (now >= sent_at + 1d and not acknowledged(notify))",
    )
    report = _verify(fixed)
    assert _property(report, "sent_ends") == "holds" and report["verdict"] == "pass"


def test_abandoned_give_up_run_is_real_in_the_runtime(tmp_path: Path) -> None:
    """The lasso above in the runtime: the request is lost, `once` abandons it, `give_up` is refused PW526."""
    from pactwright.runtime import TestClock, open_agreement, show, submit
    from pactwright.runtime.effect_http import Credentials, HttpAdapter, load_providers
    from pactwright.runtime.effect_worker import EffectWorker
    from pactwright.runtime.provider_sim import start_simulator

    with _convicted_store(ABANDONED_GIVE_UP, tmp_path) as store, start_simulator() as sim:
        routes = tmp_path / "providers.toml"
        routes.write_text(f'[destination."https://api.example.com/notify"]\nendpoint = "{sim.url}/notify"\n')
        adapter = HttpAdapter(load_providers(routes), Credentials())
        parties = {"buyer": "bea"}
        open_agreement(store, "att.abandoned_give_up", {"order_id": "ORD-1"}, parties, agreement_id="a1",
                       clock=TestClock(T0))  # fmt: skip
        submit(store, "a1", "send", "buyer", "bea", "send", clock=TestClock(T0))
        sim.queue("lost_request")
        EffectWorker(store, adapter, TestClock(T0 + 30)).drain()
        with store.transaction(write=False) as db:
            phases = [str(row[0]) for row in db.query("SELECT phase FROM effects WHERE agreement_id = 'a1'")]
        assert phases == ["abandoned_uncertain"]
        with pytest.raises(Exception, match="EFFECT_ABANDONED_UNCERTAIN") as refused:
            submit(store, "a1", "give_up", "timer", "timer", "give_up", clock=TestClock(T0 + 2 * DAY))
        assert getattr(refused.value, "code", None) == "PW526"
        assert show(store, "a1").agreement.state == "sent"


RESEND_AFTER_ABANDON = """\
pact "att.resend_after_abandon" version "1.0.0"
currency EUR scale 2
default deny
clock timer
param order_id: text matching "ORD-[0-9]{1,6}"
rule R2 allow
effect notify {
  risk R2
  reversibility reversible
  egress POST "https://api.example.com/notify"
  timeout 10s
  strategy once
}
state placed initial
state sent
state done final
transition send: placed -> sent {
  by timer
  when fired(send) == 0 or abandoned(notify)
  stamp sent_at
  call notify
}
transition reset: sent -> placed {
  by timer
  when abandoned(notify)
}
transition finish: sent -> done {
  by timer
  when now >= sent_at + 1d and applied(notify) >= 0
}
property sent_ends: reached(sent) leads_to final
"""


def test_a_resend_after_an_abandon_keeps_the_abandon_and_the_lasso_shows_it() -> None:
    """After an abandon, `send` calls `notify` again at the same call site; the runtime refuses `finish`
    for good (PW526). Once the model kept only the latest call and forgot the abandon, so the property
    was `incomplete`; now the agreement remembers every abandon and the run the runtime takes is the
    lasso."""
    report = _verify(RESEND_AFTER_ABANDON)
    entry = next(p for p in report["properties"] if p["name"] == "sent_ends")
    assert entry["verdict"] == "violated" and report["verdict"] == "fail"
    lasso = entry["lasso"]
    assert [e["move"] for e in lasso["events"]] == [
        "send", "fault lost_request notify", "runtime notify", "reset", "send", "dispatch notify", "time passes"
    ]  # fmt: skip
    assert lasso["last_state"] == "sent"
    assert lasso["refused"] == ["`finish` by timer: PW526, it depends on `notify` and a call of it was abandoned"]


@pytest.mark.parametrize(
    ("source", "name"),
    [("LATE_REVIEW", "reviewed_closes"), ("LATE_REVIEW_EXPIRY", "funded_ends"), ("ABANDONED_GIVE_UP", "sent_ends")],
)
def test_a_liveness_run_cut_by_the_bound_is_never_reported_as_holding(source: str, name: str) -> None:
    """Bounded before the lasso's end, the same policies are `incomplete`, never `holds`."""
    result = check_bytes(globals()[source].encode())
    assert result.candidate is not None
    files = dict(compile_candidate(result.candidate, result.source_map, "attack.pact"))
    report = verify_files(files, VerifyOptions(bounds=Bounds(max_depth=2), mutants=False))
    assert _property(report, name) == "incomplete"
    assert report["verdict"] != "pass" and report["complete"] is False


@contextmanager
def _convicted_store(source: str, directory: Path, backend: str = "sqlite",
                     report: dict[str, Any] | None = None) -> Iterator[Any]:  # fmt: skip
    """A store running exactly the policy the verifier convicted: activation refuses the failing report
    (PW459), as it must, so the bundle is then recorded with `activate`, which skips only that check
    (as tests/test_runtime_vs_verifier.py does). `report`, when given, receives the report."""
    from datetime import datetime

    from pactwright.canonical import hash_bytes, load_json
    from pactwright.manifest import MANIFEST_PATH
    from pactwright.runtime.activation import FixedClock, Refusal, VerifiedBundle, activate, activate_files
    from pactwright.runtime.store import open_store
    from pactwright.signing import APPROVAL_PATH
    from tests import signed_bundles as sb

    bundle, verdict = sb.compile_verified(source.encode(), "attack.pact")
    assert verdict == "fail"
    if report is not None:
        report.update(load_json(bundle["report.json"]))
    files = sb.sign(bundle)
    clock = FixedClock(datetime.fromisoformat(sb.NOW))
    with sb.temporary_store(backend, directory) as url, open_store(url) as store:
        with pytest.raises(Refusal) as refused:
            activate_files(store, files, sb.default_trust(), clock=clock)
        assert refused.value.code == "PW459"
        manifest = sb.manifest_of(files)
        approver = load_json(files[APPROVAL_PATH])["statement"]["approver"]
        activate(store, VerifiedBundle(
            pact_id=manifest["pact"]["id"], pact_version=manifest["pact"]["version"],
            manifest_hash=hash_bytes(files[MANIFEST_PATH]), candidate_hash=manifest["candidate_hash"], files=files,
            approval_hash=hash_bytes(files[APPROVAL_PATH]), approver=approver, approver_keyid=sb.key("alice").keyid,
            signer_keyids=(sb.key("signer").keyid,), expires=sb.EXPIRES, report_verdict=verdict,
            verified_at=clock.now(),
        ))  # fmt: skip
        yield store


# -- attacks that held (cheap regression checks) ----------------------------------------

RELATION_EDGE = """\
pact "att.relation_edge" version "1.0.0"
currency EUR scale 2
role agent
param price: money between 1.00 and 500.00
param partial: money between 0.01 and price
account card "card" external
account shop "shop" external
state s initial
state done final
transition go: s -> done {
  by agent
  transfer partial from shop to card
}
invariant strict_below: partial < price
"""


def test_related_bound_edge_partial_equals_price_is_found() -> None:
    report = _verify(RELATION_EDGE)
    assert _invariant(report, "strict_below") == "violated"
    assert report["verdict"] == "fail"


def test_desk_limit_crossed_by_three_agreements() -> None:
    source = (Path(__file__).resolve().parents[1] / "policies" / "desk_limit.pact").read_text()
    report = _verify(source, agreements=3)
    assert report["verdict"] == "fail"
