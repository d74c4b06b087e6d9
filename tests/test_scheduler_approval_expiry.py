"""A deadline parked for an approval stays grantable after its request expires.

The scheduler resubmits an enabled deadline transition on every scan with
the same idempotency key (`sched/TRANSITION/DEADLINE`). When the transition
needs `approval by manager`, the first scan parks it as an approval request
that expires `APPROVAL_TTL_S` later. The verifier treats the manager's
approval as possible for as long as the transition is enabled, so a later
scan must make a fresh request (new id, new expiry, a new preview to sign)
in place of the expired one: otherwise the expired request came back on
every scan and the manager could never grant it (PW602), leaving the
agreement stuck in `funded`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from pactwright.errors import PactwrightError
from pactwright.runtime import TestClock, approvals, open_agreement, show, submit, verify_evidence
from pactwright.runtime.parties import add_party
from pactwright.runtime.scheduler import scan
from pactwright.runtime.store import Store
from pactwright.signing import raw_public_key, sign_statement
from tests.test_liveness_attacks import APPROVAL_FIRST, DAY, T0, _store

HOUR = 3_600
DUE = T0 + DAY  # `escalate` is enabled from here
MANAGER_KEY = Ed25519PrivateKey.generate()

# APPROVAL_FIRST without its fallback deadline and property: `escalate` is the only way out of `funded`.
APPROVAL_LATE = (
    APPROVAL_FIRST.replace("approval_first", "approval_late")
    .replace("state expired final\n", "")
    .split("transition expire:")[0]
)


def _funded(store: Store) -> None:
    open_agreement(store, "att.approval_late", {}, {"buyer": "bea", "manager": "max"}, agreement_id="a1",
                   clock=TestClock(T0))  # fmt: skip
    add_party(store, "max", "manager", raw_public_key(MANAGER_KEY.public_key()), T0)
    submit(store, "a1", "fund", "buyer", "bea", "fund", clock=TestClock(T0))


def _requests(store: Store) -> list[dict[str, Any]]:
    return [r.to_json() for r in approvals.list_requests(store, agreement_id="a1")]


def _evidence_records(store: Store) -> list[dict[str, Any]]:
    with store.transaction(write=False) as db:
        found = db.query("SELECT record FROM evidence WHERE agreement_id = 'a1' ORDER BY seq")
    return [json.loads(str(r[0])) for r in found]


def _proof(request: dict[str, Any], decision: str = "grant") -> str:
    return sign_statement(MANAGER_KEY, approvals.decision_statement(request["id"], request["preview_digest"], decision))


def _code(call: Any) -> str | None:
    with pytest.raises(PactwrightError) as caught:
        call()
    return caught.value.code


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_a_later_scan_renews_an_expired_request_and_the_manager_grants_it(tmp_path: Path, backend: str) -> None:
    with _store(APPROVAL_LATE, tmp_path, backend=backend) as (store, _report):
        _funded(store)
        first = scan(store, TestClock(DUE)).to_json()
        assert first["refused"] == {"PW513": 1}
        (parked,) = _requests(store)
        assert (parked["status"], parked["expires_at"]) == ("pending", DUE + approvals.APPROVAL_TTL_S)
        assert parked["idempotency_key"] == f"sched/escalate/{DUE}"

        # A replayed scan within the lifetime: the same request, as it was.
        assert scan(store, TestClock(DUE + 60)).to_json()["refused"] == {"PW513": 1}
        assert _requests(store) == [parked]

        # After the expiry, the next scans: one fresh request in its place, still for the same command.
        scan(store, TestClock(DUE + 2 * HOUR))
        scan(store, TestClock(DUE + 3 * HOUR))
        (renewed,) = _requests(store)
        assert renewed["id"] != parked["id"] and renewed["status"] == "pending"
        assert (renewed["created_at"], renewed["expires_at"]) == (DUE + 2 * HOUR, DUE + 3 * HOUR)
        assert renewed["preview"]["expires_at"] == DUE + 3 * HOUR
        assert renewed["preview_digest"] != parked["preview_digest"]
        assert (renewed["command_digest"], renewed["idempotency_key"]) == (
            parked["command_digest"],
            parked["idempotency_key"],
        )
        assert renewed["grants"] == [] and renewed["intact"]

        # The expired request stays refused, and its proof cannot approve the fresh one.
        at = TestClock(DUE + 3 * HOUR)
        assert _code(lambda: approvals.grant(store, parked["id"], "max", _proof(parked), at)) == "PW601"
        assert _code(lambda: approvals.grant(store, renewed["id"], "max", _proof(parked), at)) == "PW608"
        assert show(store, "a1").agreement.state == "funded"

        result = approvals.grant(store, renewed["id"], "max", _proof(renewed), at)
        assert result.status == "committed" and show(store, "a1").agreement.state == "done"
        # Approved once: a second grant is a replay, and the request is consumed by the one event.
        assert _code(lambda: approvals.grant(store, renewed["id"], "max", _proof(renewed), at)) == "PW604"
        (consumed,) = _requests(store)
        assert (consumed["status"], consumed["event_id"]) == ("consumed", result.event_id)
        assert not scan(store, TestClock(DUE + 4 * HOUR)).to_json()["due"]
        done = show(store, "a1").agreement
        assert (done.version, done.fired) == (2, {"fund": 1, "escalate": 1})
        # The chain holds both requests, the second naming the one it renewed, and the one grant.
        records = [r for r in _evidence_records(store) if r["kind"].startswith("approval_")]
        assert [(r["kind"], r["approval"]) for r in records] == [
            ("approval_requested", parked["id"]),
            ("approval_requested", renewed["id"]),
            ("approval_granted", renewed["id"]),
        ]
        assert records[1]["renews"] == parked["id"] and "renews" not in records[0]
        assert verify_evidence(store, "a1").ok


def test_an_expired_request_is_still_refused_until_a_scan_renews_it(tmp_path: Path) -> None:
    with _store(APPROVAL_LATE, tmp_path) as (store, _report):
        _funded(store)
        scan(store, TestClock(DUE))
        (parked,) = _requests(store)
        late = TestClock(parked["expires_at"] + 1)
        assert _code(lambda: approvals.grant(store, parked["id"], "max", _proof(parked), late)) == "PW602"
        assert _requests(store) == [parked]


def test_a_rejected_request_is_not_renewed(tmp_path: Path) -> None:
    with _store(APPROVAL_LATE, tmp_path) as (store, _report):
        _funded(store)
        scan(store, TestClock(DUE))
        (parked,) = _requests(store)
        late = TestClock(DUE + 2 * HOUR)
        approvals.reject(store, parked["id"], "max", _proof(parked, "reject"), late)
        again = scan(store, late).to_json()
        assert [f["code"] for f in again["failures"]] == ["PW604"]
        (rejected,) = _requests(store)
        assert (rejected["id"], rejected["status"]) == (parked["id"], "rejected")
        assert show(store, "a1").agreement.state == "funded"
