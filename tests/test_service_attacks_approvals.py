"""Attacks on approvals over the service's HTTP API (split from test_service_attacks.py): a stranger, a token
carrying another party's genuine proof, a replayed grant, and an approver known only to the registry."""

from __future__ import annotations

import contextlib
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from pactwright.runtime.clock import TestClock
from pactwright.runtime.parties import add_party
from pactwright.runtime.store import open_store
from pactwright.runtime.tokens import issue_token
from pactwright.service import create_app
from tests._service_support import SUPPORT_OPEN, grant_ok, headers, park, same_as_unknown, signed_proof, support
from tests.signed_bundles import BACKENDS, dump
from tests.test_service_env import T0, problem_of


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_stranger_cannot_see_or_decide_an_approval_and_learns_nothing(backend: str, tmp_path: Path) -> None:
    with support(tmp_path, backend) as (env, client, request):
        unknown_id = "apr-" + "0" * 16
        before = dump(env.store)
        for party in ("stranger", "mallory"):
            hidden = client.get(f"/v1/approvals/{request['id']}", headers=env.auth(party))
            problem_of(hidden, 404, "PW601")
            same_as_unknown(hidden, client.get(f"/v1/approvals/{unknown_id}", headers=env.auth(party)),
                             request["id"], unknown_id)  # fmt: skip
            for decision in ("grant", "reject"):
                # mallory signs with her own registered key; the stranger replays rita's genuine proof
                proof = signed_proof("mallory" if party == "mallory" else "rita", request, decision)
                refused = client.post(f"/v1/approvals/{request['id']}/{decision}", json={"proof": proof},
                                      headers=env.auth(party))  # fmt: skip
                problem_of(refused, 404, "PW601")
                other = client.post(f"/v1/approvals/{unknown_id}/{decision}", json={"proof": proof},
                                    headers=env.auth(party))  # fmt: skip
                same_as_unknown(refused, other, request["id"], unknown_id)
        assert dump(env.store) == before


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_token_carrying_another_partys_valid_proof_is_403(backend: str, tmp_path: Path) -> None:
    """rita's token with mallory's genuine signature of this very grant: refused as a forgery (403), not 409."""
    with support(tmp_path, backend) as (env, client, request):
        before = dump(env.store)
        forged = client.post(f"/v1/approvals/{request['id']}/grant", json={"proof": signed_proof("mallory", request)},
                             headers=env.auth("rita"))  # fmt: skip
        problem = problem_of(forged, 403, "PW615")
        assert problem["found"] == "mallory"
        assert dump(env.store) == before


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_grant_replayed_over_http_never_commits_twice(backend: str, tmp_path: Path) -> None:
    with support(tmp_path, backend) as (env, client, request):
        proof = signed_proof("rita", request)
        grant_ok(env, client, request)
        after = dump(env.store)
        for decision, body in (("grant", proof), ("reject", signed_proof("rita", request, "reject"))):
            problem_of(client.post(f"/v1/approvals/{request['id']}/{decision}", json={"proof": body},
                                   headers=env.auth("rita")), 409, "PW604")  # fmt: skip
        shown = client.get("/v1/agreements/r1", headers=env.auth("sam")).json()
        assert shown["state"] == "refunded"
        assert dump(env.store) == after
        # rita's genuine proof for r1's request does not decide another request of hers
        assert client.post("/v1/agreements", json={**SUPPORT_OPEN, "id": "r2"},
                           headers=env.auth("sam")).status_code == 201  # fmt: skip
        assert client.post("/v1/agreements/r2/commands", json={"transition": "assess", "role": "assistant"},
                           headers=headers(env, "bot", "assess")).status_code == 201  # fmt: skip
        other = park(env, client, "r2")
        before = dump(env.store)
        for decision in ("grant", "reject"):
            problem_of(client.post(f"/v1/approvals/{other['id']}/{decision}",
                                   json={"proof": signed_proof("rita", request, decision)}, headers=env.auth("rita")),
                       403, "PW608")  # fmt: skip
        assert dump(env.store) == before


# Four eyes by the registry: an approver need not be bound ------------------------------------------------


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_registry_approver_sees_and_grants_what_it_may_approve(backend: str, tmp_path: Path) -> None:
    """Under `approvals 2 by refund_approver distinct`, pete (not bound, holds the role with a key) may see the
    request and grant it; a support agent bound nowhere in it may not see it."""
    from tests.test_four_eyes import PACT_ID, PARAMS, _store
    from tests.test_four_eyes import PARTIES as FE_PARTIES

    with contextlib.contextmanager(_store)(backend, tmp_path, True) as url:
        with open_store(url) as store:
            for party in ("sam", "stranger"):
                add_party(store, party, "support_agent", None, T0)
            tokens = {p: issue_token(store, p, T0).token for p in ("sam", "pete", "stranger")}
        clock = TestClock(T0)
        with TestClient(create_app(url, str(tmp_path / "ledger.sqlite"), clock=clock, threads=2),
                        raise_server_exceptions=False) as client:  # fmt: skip
            auth = {p: {"Authorization": f"Bearer {t}"} for p, t in tokens.items()}
            opened = client.post("/v1/agreements", json={"pact_id": PACT_ID, "id": "r1", "params": PARAMS,
                                                         "parties": FE_PARTIES}, headers=auth["sam"])  # fmt: skip
            assert opened.status_code == 201, opened.text
            clock.advance(10)
            parked = client.post("/v1/agreements/r1/commands", json={"transition": "issue", "role": "support_agent"},
                                 headers={**auth["sam"], "Idempotency-Key": "issue"})  # fmt: skip
            assert parked.status_code == 202, parked.text
            request = parked.json()["approval"]
            assert [r["id"] for r in client.get("/v1/approvals", headers=auth["pete"]).json()["data"]] == [
                request["id"]
            ]
            assert client.get(f"/v1/approvals/{request['id']}", headers=auth["pete"]).status_code == 200
            assert client.get("/v1/approvals", headers=auth["stranger"]).json()["data"] == []
            problem_of(client.get(f"/v1/approvals/{request['id']}", headers=auth["stranger"]), 404, "PW601")
            granted = client.post(f"/v1/approvals/{request['id']}/grant", json={"proof": signed_proof("pete", request)},
                                  headers=auth["pete"])  # fmt: skip
            assert granted.status_code == 200, granted.text
            assert granted.json()["request"]["status"] == "pending"
