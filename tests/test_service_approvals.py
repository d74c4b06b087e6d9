"""Approvals and effect calls over HTTP (support refund): park, preview, grant with a signed proof, reject,
list effects, and the operator's resolutions, on SQLite and PostgreSQL."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from pactwright.runtime.approvals import decision_statement
from pactwright.signing import sign_statement
from tests.signed_bundles import BACKENDS, ROOT, dump, key
from tests.test_service_env import T0, Env, problem_of, service_env

SUPPORT = ROOT / "policies" / "support_refund.pact"
PARTIES = {"support_agent": "sam", "refund_approver": "rita", "assistant": "bot"}
OPEN = {"pact_id": "support.refund", "params": {"amount": "25.00", "order_id": "ORD-1001",
                                                 "reason": "damaged_on_arrival"}, "parties": PARTIES}  # fmt: skip
REGISTRY = {"sam": ("support_agent",), "bot": ("assistant",), "ops": ("operator",)}


def _proof(party: str, request: dict[str, Any], decision: str = "grant") -> str:
    return sign_statement(key(party).private, decision_statement(request["id"], request["preview_digest"], decision))


def _parked(env: Env, client: TestClient, agreement: str) -> dict[str, Any]:
    """Open `agreement`, assess it, and submit `issue`: parked for the refund approver (202)."""
    assert client.post("/v1/agreements", json={**OPEN, "id": agreement}, headers=env.auth("sam")).status_code == 201
    assessed = client.post(f"/v1/agreements/{agreement}/commands", json={"transition": "assess", "role": "assistant"},
                           headers={**env.auth("bot"), "Idempotency-Key": "assess"})  # fmt: skip
    assert assessed.status_code == 201, assessed.text
    env.clock.advance(10)
    issue = client.post(f"/v1/agreements/{agreement}/commands", json={"transition": "issue", "role": "support_agent"},
                        headers={**env.auth("sam"), "Idempotency-Key": "issue"})  # fmt: skip
    assert issue.status_code == 202, issue.text
    doc = issue.json()
    assert (doc["status"], doc["event_id"], doc["state"]) == ("waiting_for_approval", "", "assessed")
    request: dict[str, Any] = doc["approval"]
    return request


@pytest.mark.parametrize("backend", BACKENDS)
def test_park_preview_refuse_forgeries_then_grant(backend: str, tmp_path: Path) -> None:
    with service_env(backend, tmp_path, SUPPORT, REGISTRY, keyed={"rita": "refund_approver"}) as env, \
            env.client() as client:  # fmt: skip
        request = _parked(env, client, "r1")
        pending = client.get("/v1/approvals?status=pending", headers=env.auth("rita")).json()["data"]
        assert [r["id"] for r in pending] == [request["id"]]
        shown = client.get(f"/v1/approvals/{request['id']}", headers=env.auth("rita")).json()
        assert shown["preview_digest"] == request["preview_digest"]
        assert shown["preview"]["operation"]["transition"] == "issue"

        before = dump(env.store)
        grant = f"/v1/approvals/{request['id']}/grant"
        # a proof made with a key the registry does not hold for rita
        forged = client.post(grant, json={"proof": _proof("mallory", request)}, headers=env.auth("rita"))
        problem_of(forged, 403, "PW608")
        # rita's own signature, but of a rejection
        problem_of(client.post(grant, json={"proof": _proof("rita", request, "reject")}, headers=env.auth("rita")),
                   403, "PW608")  # fmt: skip
        # the requester presents a genuine proof: the token says sam, who does not hold the approval role
        problem_of(client.post(grant, json={"proof": _proof("rita", request)}, headers=env.auth("sam")), 403, "PW605")
        assert dump(env.store) == before

        granted = client.post(grant, json={"proof": _proof("rita", request)}, headers=env.auth("rita"))
        assert granted.status_code == 200, granted.text
        doc = granted.json()
        assert (doc["request"]["status"], doc["request"]["decided_by"]) == ("consumed", "rita")
        assert (doc["result"]["event_id"], doc["result"]["state"]) == ("r1/2", "refunded")
        assert [c["effect"] for c in doc["result"]["effects"]] == ["refund_payment"]
        again = client.post(grant, json={"proof": _proof("rita", request)}, headers=env.auth("rita"))
        problem_of(again, 409, "PW604")

        effects = client.get("/v1/effects?agreement=r1", headers=env.auth("ops")).json()["data"]
        refund = next(e for e in effects if e["effect"] == "refund_payment")
        assert (refund["id"], refund["phase"], refund["amount"]) == ("r1/2/e0", "prepared", "2500")
        assert client.get("/v1/effects?parked=true", headers=env.auth("ops")).json()["data"] == []
        not_parked = client.post("/v1/effects/r1/2/e0/reconcile", json={"resolution": "not_occurred"},
                                 headers=env.auth("ops"))  # fmt: skip
        problem_of(not_parked, 409, "PW642")
        problem_of(client.post("/v1/effects/r1%2F2%2Fe0/abandon", json={"reason": "x"}, headers=env.auth("ops")),
                   409, "PW642")  # fmt: skip


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_rejected_request_never_runs(backend: str, tmp_path: Path) -> None:
    with service_env(backend, tmp_path, SUPPORT, REGISTRY, keyed={"rita": "refund_approver"}) as env, \
            env.client() as client:  # fmt: skip
        request = _parked(env, client, "r2")
        reject = {"proof": _proof("rita", request, "reject")}
        rejected = client.post(f"/v1/approvals/{request['id']}/reject", json=reject, headers=env.auth("rita"))
        assert rejected.status_code == 200, rejected.text
        assert rejected.json()["status"] == "rejected"
        problem_of(client.post(f"/v1/approvals/{request['id']}/grant", json={"proof": _proof("rita", request)},
                               headers=env.auth("rita")), 409, "PW604")  # fmt: skip
        shown = client.get("/v1/agreements/r2", headers=env.auth("sam")).json()
        assert (shown["state"], shown["version"]) == ("assessed", 1)


def test_a_dry_run_shows_the_requests_and_writes_nothing(tmp_path: Path) -> None:
    with service_env("sqlite", tmp_path, SUPPORT, REGISTRY, keyed={"rita": "refund_approver"}) as env, \
            env.client() as client:  # fmt: skip
        assert client.post("/v1/agreements", json={**OPEN, "id": "r3"}, headers=env.auth("sam")).status_code == 201
        before = dump(env.store)
        dry = client.post("/v1/agreements/r3/commands", json={"transition": "assess", "role": "assistant",
                                                               "dry_run": True},
                          headers={**env.auth("bot"), "Idempotency-Key": "assess"})  # fmt: skip
        assert dry.status_code == 200, dry.text
        doc = dry.json()
        assert doc["dry_run"] is True
        assert [(r["effect"], r["method"]) for r in doc["would_send"]] == [("read_order", "GET")]
        assert dump(env.store) == before
        assert env.clock.now().timestamp() == T0
