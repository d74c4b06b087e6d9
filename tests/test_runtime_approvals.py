"""Approvals at commit: a one-use record bound to the payload digest, on both backends.

The reference support refund policy (policies/support_refund.pact) says
`issue` needs `approval by refund_approver not requester`. The bundle is
built, verified, approved, signed and activated into a real store (SQLite
file, PostgreSQL schema) the way tests/signed_bundles.py makes the
marketplace's. `grant` below writes the approval record directly, exactly as
the command path reads it: an `approvals` row for (agreement, transition,
payload digest, approver role, approver party), unconsumed.

What is checked: with no approval the command is parked as an approval
request (runtime/approvals.py; tests/test_approval_previews.py covers the
grant flow) and writes nothing else: no event, no effect row; a matching
approval commits and is consumed by that event; a consumed one is never used
again; one bound to another payload digest, or granted by a party that does
not hold the approver role, or by the requester when the policy says `not
requester`, does not count: the command parks. The `refund_payment` call
`issue` makes is committed `prepared` with the event, to be sent by the
worker.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from datetime import datetime
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from pactwright.canonical import hash_bytes
from pactwright.manifest import MANIFEST_PATH
from pactwright.runtime import SubmitResult, TestClock, open_agreement, payload_digest, show, submit
from pactwright.runtime.activation import FixedClock, activate_files
from pactwright.runtime.store import Store, open_store
from tests.signed_bundles import BACKENDS, NOW, default_trust, dump, sign, temporary_store

ROOT = Path(__file__).resolve().parent.parent
SUPPORT = ROOT / "policies" / "support_refund.pact"
PACT_ID = "support.refund"
T0 = 1780315200  # 2026-06-01T12:00:00Z
PARAMS = {"amount": "25.00", "order_id": "ORD-1001", "reason": "damaged_on_arrival"}
PARTIES = {"support_agent": "sam", "refund_approver": "rita", "assistant": "bot"}
ISSUE = payload_digest("issue", "support_agent", "sam")  # the payload `submit(..., "issue", "support_agent", "sam")`


def _repeatable(source: bytes) -> bytes:
    """A variant where `issue` may fire twice (assessed -> assessed, `fired(issue) < 2`), to see one-use approvals.

    The reference `issue` ends the agreement, so a second use of an approval
    would be refused as already final before any approval is looked at.
    `close` keeps `refunded` reachable; the two invariants about a single
    refund, and the effect's `max_calls 1`, do not hold for a policy that
    refunds twice by design and are dropped.
    """
    source = source.replace(b"transition issue: assessed -> refunded", b"transition issue: assessed -> assessed")
    source = source.replace(
        b"  approval by refund_approver not requester\n",
        b"  when fired(issue) < 2\n  approval by refund_approver not requester\n",
    )
    source = source.replace(
        b'clause "3" transition decline',
        b'clause "2.1" transition close: assessed -> refunded {\n  by support_agent\n}\n\n'
        b'clause "3" transition decline',
    )
    source = source.replace(b"  max_calls 1\n", b"  max_calls 3\n")
    return re.sub(rb'clause "4\.[12]" invariant[^\n]*\n', b"", source)


@cache
def _built(repeatable: bool) -> tuple[tuple[str, bytes], ...]:
    """Compile and verify the policy in-process, as `pactwright build` does (mutants and z3 off)."""
    from pactwright.compiler.bundle import compile_candidate, with_manifest
    from pactwright.compiler.pipeline import check_bytes
    from pactwright.verifier.explorer import Bounds
    from pactwright.verifier.render import report_files
    from pactwright.verifier.verify import VerifyOptions, verify_files

    source = _repeatable(SUPPORT.read_bytes()) if repeatable else SUPPORT.read_bytes()
    result = check_bytes(source)
    assert result.candidate is not None, result.diagnostics
    files = compile_candidate(result.candidate, result.source_map, SUPPORT.name)
    report = verify_files(files, VerifyOptions(Bounds(faults=1), mutants=False, proofs=False))
    assert report["verdict"] == "pass"
    rendered = report_files(report)
    files = {p: d for p, d in files.items() if p != MANIFEST_PATH} | rendered
    bundle = with_manifest(
        files,
        result.candidate,
        result.candidate.hash(),
        report={"path": "report.json", "hash": hash_bytes(rendered["report.json"]), "verdict": report["verdict"]},
    )
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


def grant(store: Store, agreement_id: str, approval_id: str, approver_party: str, digest: str = ISSUE,
          *, approver_role: str = "refund_approver", transition: str = "issue", at: int = T0) -> None:  # fmt: skip
    """Write one unconsumed approval record, as the (not yet built) granting flow will.

    The row is exactly what the command path looks for: bound to the
    agreement, the transition and the payload digest, granted by a role and
    a party; `consumed_event_id` is set by the command that uses it.
    """
    with store.transaction(exclusive=False) as db:
        db.execute(
            "INSERT INTO approvals (id, agreement_id, transition, payload_digest, approver_role, approver_party, "
            "granted_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
            (approval_id, agreement_id, transition, digest, approver_role, approver_party, at),
        )


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


def test_a_matching_approval_commits_and_is_consumed_by_that_event(url: str) -> None:
    with open_store(url) as store:
        _assessed(store)
        grant(store, "r1", "ap-1", "rita")
        preview = submit(store, "r1", "issue", "support_agent", "sam", "issue", dry_run=True, clock=TestClock(T0 + 20))
        assert preview.dry_run and _approvals(store) == {"ap-1": (None, None)}  # a dry run consumes nothing
        result = submit(store, "r1", "issue", "support_agent", "sam", "issue", clock=TestClock(T0 + 20))
        assert (result.state, result.version) == ("refunded", 2)
        assert _approvals(store) == {"ap-1": (result.event_id, T0 + 20)}
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
            (record,) = db.query("SELECT record FROM evidence WHERE agreement_id = 'r1' AND kind = 'event' "
                                 "ORDER BY seq DESC LIMIT 1")[0]  # fmt: skip
        for doc in (json.loads(payload), json.loads(record)):
            assert doc["approval"] == "ap-1"
            assert doc["effects"] == [call]
        # A retry after a lost response is answered from the key: nothing is consumed again.
        again = submit(store, "r1", "issue", "support_agent", "sam", "issue", clock=TestClock(T0 + 30))
        assert again.replayed and again.event_id == result.event_id and again.effects == result.effects
        assert _approvals(store) == {"ap-1": (result.event_id, T0 + 20)}


def test_an_approval_is_used_once(repeat_url: str) -> None:
    url = repeat_url
    with open_store(url) as store:
        _assessed(store)
        grant(store, "r1", "ap-1", "rita")
        first = submit(store, "r1", "issue", "support_agent", "sam", "issue-1", clock=TestClock(T0 + 20))
        assert first.state == "assessed" and _approvals(store)["ap-1"][0] == first.event_id
        # Same payload, new key, agreement still in `assessed`: the consumed approval does not count.
        _refused(store, url, key="issue-2")
        grant(store, "r1", "ap-2", "rita")
        second = submit(store, "r1", "issue", "support_agent", "sam", "issue-2", clock=TestClock(T0 + 30))
        assert _approvals(store) == {"ap-1": (first.event_id, T0 + 20), "ap-2": (second.event_id, T0 + 30)}
        assert show(store, "r1").agreement.balances["customer"] == 5000


@pytest.mark.parametrize(
    ("digest", "party", "role", "transition"),
    [
        (payload_digest("issue", "support_agent", "sam", {"amount": "25.00"}), "rita", "refund_approver", "issue"),
        (payload_digest("issue", "support_agent", "someone_else"), "rita", "refund_approver", "issue"),
        (payload_digest("decline", "support_agent", "sam"), "rita", "refund_approver", "issue"),
        (ISSUE, "rita", "refund_approver", "decline"),
        (ISSUE, "rita", "support_agent", "issue"),
        (ISSUE, "mallory", "refund_approver", "issue"),  # mallory does not hold refund_approver here
    ],
    ids=[
        "other-params",
        "other-party",
        "other-transition-digest",
        "other-transition",
        "other-role",
        "not-the-approver",
    ],
)
def test_an_approval_that_does_not_match_the_command_is_refused(
    url: str, digest: str, party: str, role: str, transition: str
) -> None:
    with open_store(url) as store:
        _assessed(store)
        grant(store, "r1", "ap-x", party, digest, approver_role=role, transition=transition)
        _refused(store, url)
        assert _approvals(store) == {"ap-x": (None, None)}


def test_an_approval_by_the_requester_is_refused_when_the_policy_says_not_requester(url: str) -> None:
    with open_store(url) as store:
        # sam holds both roles in this agreement: his own approval is the requester's.
        _assessed(store, "r2", {**PARTIES, "refund_approver": "sam"})
        grant(store, "r2", "ap-self", "sam")
        _refused(store, url, agreement_id="r2")
        assert _approvals(store) == {"ap-self": (None, None)}
