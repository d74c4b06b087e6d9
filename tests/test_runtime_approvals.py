"""Approvals at commit: one-use, granted only through the signed flow, on both backends.

The reference support refund policy (policies/support_refund.pact) says
`issue` needs `approval by refund_approver not requester`. The bundle is
built, verified, approved, signed and activated into a real store (SQLite
file, PostgreSQL schema) the way tests/signed_bundles.py makes the
marketplace's.

What is checked: with no approval the command is parked as an approval
request (runtime/approvals.py; tests/test_approval_previews.py covers every
refusal of the grant flow) and writes nothing else: no event, no effect
row; a grant (the approver's registered key signing the preview digest)
commits it and its one-use record is consumed by that event; a consumed
approval is never used again; an `approvals` row written straight into the
store, even one exactly like a grant's, is never taken as an approval; the
requester cannot approve when the policy says `not requester` (PW607). The
`refund_payment` call `issue` makes is committed `prepared` with the event,
to be sent by the worker.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import datetime
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from pactwright.runtime import SubmitResult, TestClock, open_agreement, payload_digest, show, submit
from pactwright.runtime.activation import FixedClock, activate_files
from pactwright.runtime.store import Store, open_store
from tests import _chain_tamper as chain
from tests.effect_env import settle_calls
from tests.signed_bundles import BACKENDS, NOW, compile_verified, default_trust, dump, sign, temporary_store

ROOT = Path(__file__).resolve().parent.parent
SUPPORT = ROOT / "policies" / "support_refund.pact"
PACT_ID = "support.refund"
T0 = 1780315200  # 2026-06-01T12:00:00Z
PARAMS = {"amount": "25.00", "order_id": "ORD-1001", "reason": "damaged_on_arrival"}
PARTIES = {"support_agent": "sam", "refund_approver": "rita", "assistant": "bot"}
ISSUE = payload_digest("issue", "support_agent", "sam")  # the payload `submit(..., "issue", "support_agent", "sam")`


@cache
def _built(repeatable: bool) -> tuple[tuple[str, bytes], ...]:
    """The reference policy (or the variant where `issue` may refund twice: tests/effect_env.py), compiled and
    verified in-process."""
    from tests.effect_env import repeatable as twice

    source = twice(SUPPORT.read_bytes(), 3) if repeatable else SUPPORT.read_bytes()
    bundle, verdict = compile_verified(source, SUPPORT.name)
    assert verdict == "pass"
    return tuple(sorted(bundle.items()))


def _store(backend: str, directory: Path, *, repeatable: bool = False) -> Iterator[str]:
    with temporary_store(backend, directory) as url:
        with open_store(url) as store:
            activate_files(store, sign(dict(_built(repeatable))), default_trust(),
                           clock=FixedClock(datetime.fromisoformat(NOW)))  # fmt: skip
        yield url


@pytest.fixture(params=BACKENDS)
def url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    yield from _store(request.param, tmp_path)


@pytest.fixture(params=BACKENDS)
def repeat_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    yield from _store(request.param, tmp_path, repeatable=True)


def forge(store: Store, agreement_id: str, approval_id: str, approver_party: str, digest: str = ISSUE,
          *, approver_role: str = "refund_approver", transition: str = "issue", at: int = T0) -> None:  # fmt: skip
    """Write one unconsumed approval record straight into the store, as an attacker with store access could.

    The row is exactly what a grant writes (bound to the agreement, the
    transition and the payload digest, granted by a role and a party); the
    command path must never take it as an approval by itself.
    """
    with store.transaction(exclusive=False) as db:
        db.execute(
            "INSERT INTO approvals (id, agreement_id, transition, payload_digest, approver_role, approver_party, "
            "granted_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
            (approval_id, agreement_id, transition, digest, approver_role, approver_party, at),
        )


def grant(store: Store, parked: SubmitResult, party: str = "rita", at: int = T0 + 20) -> SubmitResult:
    """Grant a parked command through the real flow: `party`'s registered key signs its preview digest."""
    from tests.effect_env import grant as signed_grant
    from tests.effect_env import register_approver

    register_approver(store, party)
    assert parked.approval is not None
    return signed_grant(store, parked.approval, at, party)  # type: ignore[no-any-return]


def _assessed(store: Store, agreement_id: str = "r1", parties: dict[str, str] = PARTIES) -> None:
    open_agreement(store, PACT_ID, PARAMS, parties, agreement_id=agreement_id, clock=TestClock(T0))
    submit(store, agreement_id, "assess", "assistant", "bot", "assess", clock=TestClock(T0 + 10))


def _refused(store: Store, url: str, key: str = "issue", agreement_id: str = "r1") -> SubmitResult:
    """Submit `issue` as the support agent with no usable approval: it parks, and writes nothing else.

    The only rows it adds are the approval request and its evidence record;
    no event, effect, outbox, idempotency or approval row changes.
    """
    before = dump(url)
    result = submit(store, agreement_id, "issue", "support_agent", "sam", key, clock=TestClock(T0 + 20))
    assert result.status == "waiting_for_approval" and result.approval is not None
    assert result.event_id == "" and result.state == "assessed" and result.outbox == ()
    after = dump(url)
    assert {t for t in after if after[t] != before.get(t)} == {"approval_requests", "evidence"}
    assert len(after["approval_requests"]) == len(before["approval_requests"]) + 1
    assert len(after["evidence"]) == len(before["evidence"]) + 1
    return result


def _approvals(store: Store) -> dict[str, tuple[Any, ...]]:
    """approval id -> (consumed_event_id, consumed_at)."""
    with store.transaction(write=False) as db:
        return {str(r[0]): (r[1], r[2]) for r in db.query("SELECT id, consumed_event_id, consumed_at FROM approvals")}


def test_issue_without_an_approval_parks_and_commits_nothing(url: str) -> None:
    with open_store(url) as store:
        _assessed(store)
        parked = _refused(store, url)
    assert parked.approval is not None
    assert parked.approval["command_digest"] == ISSUE
    assert parked.approval["preview"]["approval"] == {"role": "refund_approver", "not_requester": True}


def test_a_granted_approval_commits_and_is_consumed_by_that_event(url: str) -> None:
    with open_store(url) as store:
        _assessed(store)
        preview = submit(store, "r1", "issue", "support_agent", "sam", "issue", dry_run=True, clock=TestClock(T0 + 20))
        assert preview.dry_run and _approvals(store) == {}  # a dry run parks nothing and consumes nothing
        parked = _refused(store, url)
        result = grant(store, parked)
        assert (result.state, result.version) == ("refunded", 2)
        approval_id = parked.approval["id"] if parked.approval else ""
        assert _approvals(store) == {approval_id: (result.event_id, T0 + 20)}
        assert [(p["source"], p["destination"], p["amount"]) for p in result.postings] == [
            ("merchant", "customer", "2500")
        ]
        # The call is committed `prepared` with the event; the worker sends it.
        (call,) = result.effects
        assert result.effects == preview.effects
        assert (call["effect"], call["amount"], call["phase"]) == ("refund_payment", "2500", "prepared")
        view = show(store, "r1")
        assert "issue" in view.agreement.approved and view.agreement.balances["customer"] == 2500
        with store.transaction(write=False) as db:
            (payload,) = db.query("SELECT payload FROM events WHERE event_id = ?", (result.event_id,))[0]
            # The event's record, derived from its event row since store migration 15.
            record = [r for r in chain.records(db, "r1") if r["kind"] == "event"][-1]
        assert record["event_id"] == result.event_id
        for doc in (json.loads(payload), record):
            assert doc["approval"] == approval_id
            assert doc["effects"] == [call]
        # A retry after a lost response is answered from the key: nothing is consumed again.
        again = submit(store, "r1", "issue", "support_agent", "sam", "issue", clock=TestClock(T0 + 30))
        assert again.replayed and again.event_id == result.event_id and again.effects == result.effects
        assert _approvals(store) == {approval_id: (result.event_id, T0 + 20)}


def test_an_approval_is_used_once(repeat_url: str, tmp_path: Path) -> None:
    url = repeat_url
    with open_store(url) as store:
        _assessed(store)
        first = grant(store, _refused(store, url, key="issue-1"))
        assert first.state == "assessed" and len(_approvals(store)) == 1
        settle_calls(store, tmp_path, T0 + 25)  # the first refund settled: its call site is free again
        # Same payload, new key, agreement still in `assessed`: the consumed approval does not count.
        parked = _refused(store, url, key="issue-2")
        second = grant(store, parked, at=T0 + 30)
        assert sorted(v for v in _approvals(store).values()) == [(first.event_id, T0 + 20), (second.event_id, T0 + 30)]
        assert show(store, "r1").agreement.balances["customer"] == 5000


@pytest.mark.parametrize(
    ("digest", "party", "role", "transition"),
    [
        (ISSUE, "rita", "refund_approver", "issue"),  # exactly what a grant would write
        (payload_digest("issue", "support_agent", "sam", {"amount": "2500"}), "rita", "refund_approver", "issue"),
        (payload_digest("issue", "support_agent", "someone_else"), "rita", "refund_approver", "issue"),
        (payload_digest("decline", "support_agent", "sam"), "rita", "refund_approver", "issue"),
        (ISSUE, "rita", "refund_approver", "decline"),
        (ISSUE, "rita", "support_agent", "issue"),
        (ISSUE, "mallory", "refund_approver", "issue"),  # mallory does not hold refund_approver here
    ],
    ids=[
        "exact-match",
        "other-params",
        "other-party",
        "other-transition-digest",
        "other-transition",
        "other-role",
        "not-the-approver",
    ],
)
def test_an_approval_row_written_into_the_store_is_never_taken_as_an_approval(
    url: str, digest: str, party: str, role: str, transition: str
) -> None:
    with open_store(url) as store:
        _assessed(store)
        forge(store, "r1", "ap-x", party, digest, approver_role=role, transition=transition)
        _refused(store, url)
        assert _approvals(store) == {"ap-x": (None, None)}


def test_an_approval_by_the_requester_is_refused_when_the_policy_says_not_requester(url: str) -> None:
    from pactwright.errors import PactwrightError

    with open_store(url) as store:
        # sam holds both roles in this agreement: his own approval is the requester's.
        _assessed(store, "r2", {**PARTIES, "refund_approver": "sam"})
        forge(store, "r2", "ap-self", "sam")
        parked = _refused(store, url, agreement_id="r2")
        before = dump(url)
        with pytest.raises(PactwrightError) as refused:
            grant(store, parked, party="sam")
        assert refused.value.code == "PW607"
        after = dump(url)
        assert {t for t in after if after[t] != before.get(t)} <= {"parties"}  # only sam's key was registered
        assert _approvals(store) == {"ap-self": (None, None)}
