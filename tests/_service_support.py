"""What the service's attack tests share: the support refund agreement with `issue` parked for its approver,
and the helpers to act on it over HTTP."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
from starlette.testclient import TestClient

from pactwright.runtime.approvals import decision_statement
from pactwright.signing import sign_statement
from tests.signed_bundles import ROOT, key
from tests.test_service_env import Env, service_env

SUPPORT = ROOT / "policies" / "support_refund.pact"
SUPPORT_PARTIES = {"support_agent": "sam", "refund_approver": "rita", "assistant": "bot"}
SUPPORT_OPEN = {"pact_id": "support.refund", "params": {"amount": "25.00", "order_id": "ORD-1001",
                                                         "reason": "damaged_on_arrival"},
                "parties": SUPPORT_PARTIES}  # fmt: skip
# `stranger` holds the requester's role and `mallory` the approver's, with a key, but neither is bound.
SUPPORT_REGISTRY = {"sam": ("support_agent",), "bot": ("assistant",), "ops": ("operator",),
                    "stranger": ("support_agent",)}  # fmt: skip
SUPPORT_KEYED = {"rita": "refund_approver", "mallory": "refund_approver"}


def headers(env: Env, party: str, key: str | None = None) -> dict[str, str]:
    return {**env.auth(party), **({"Idempotency-Key": key} if key is not None else {})}


def same_as_unknown(hidden: httpx2.Response, unknown: httpx2.Response, hidden_id: str, unknown_id: str) -> None:
    """`hidden` is, byte for byte, the answer for an unknown id with that id in its place."""
    assert len(hidden_id) == len(unknown_id)
    assert hidden.status_code == unknown.status_code == 404
    assert hidden.text == unknown.text.replace(unknown_id, hidden_id)
    assert dict(hidden.headers) == dict(unknown.headers)


def signed_proof(party: str, request: dict[str, Any], decision: str = "grant") -> str:
    return sign_statement(key(party).private, decision_statement(request["id"], request["preview_digest"], decision))


def park(env: Env, client: TestClient, agreement: str, key_name: str = "issue") -> dict[str, Any]:
    issue = client.post(f"/v1/agreements/{agreement}/commands", json={"transition": "issue", "role": "support_agent"},
                        headers=headers(env, "sam", key_name))  # fmt: skip
    assert issue.status_code == 202, issue.text
    request: dict[str, Any] = issue.json()["approval"]
    return request


@contextlib.contextmanager
def support(tmp_path: Path, backend: str) -> Iterator[tuple[Env, TestClient, dict[str, Any]]]:
    """Support refund r1, assessed, with `issue` parked for rita."""
    with service_env(backend, tmp_path, SUPPORT, SUPPORT_REGISTRY, keyed=SUPPORT_KEYED) as env, \
            env.client() as client:  # fmt: skip
        assert client.post("/v1/agreements", json={**SUPPORT_OPEN, "id": "r1"},
                           headers=env.auth("sam")).status_code == 201  # fmt: skip
        assessed = client.post("/v1/agreements/r1/commands", json={"transition": "assess", "role": "assistant"},
                               headers=headers(env, "bot", "assess"))  # fmt: skip
        assert assessed.status_code == 201, assessed.text
        env.clock.advance(10)
        yield env, client, park(env, client, "r1")


def grant_ok(env: Env, client: TestClient, request: dict[str, Any]) -> None:
    granted = client.post(f"/v1/approvals/{request['id']}/grant", json={"proof": signed_proof("rita", request)},
                          headers=env.auth("rita"))  # fmt: skip
    assert granted.status_code == 200, granted.text
