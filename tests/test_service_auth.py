"""Authentication and authority over HTTP: each refusal has its status and code, and writes nothing.

A token is the caller's identity: no token, a malformed one, an unknown or
revoked one are 401; a token acting in a role its party does not hold, a
role the pact does not let that role take, or the pact's clock role is 403.
Every refused request leaves the store exactly as it was (`dump`).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from pactwright.runtime.store import open_store
from pactwright.runtime.tokens import revoke_token
from tests.signed_bundles import BACKENDS, dump
from tests.test_service_env import OPEN_BODY, T0, Env, problem_of, service_env


@pytest.fixture(params=BACKENDS)
def env(request: pytest.FixtureRequest, tmp_path: Path) -> Env:  # type: ignore[misc]
    with service_env(request.param, tmp_path) as opened:
        with opened.client() as client:
            assert client.post("/v1/agreements", json=OPEN_BODY, headers=opened.auth("alice")).status_code == 201
            fund = client.post("/v1/agreements/a1/commands", json={"transition": "fund", "role": "buyer"},
                               headers={**opened.auth("alice"), "Idempotency-Key": "fund"})  # fmt: skip
            assert fund.status_code == 201
        yield opened


def _submit(env: Env, headers: dict[str, str], transition: str = "deliver", role: str = "seller",
            key: str = "k-deliver") -> object:  # fmt: skip
    with env.client() as client:
        return client.post("/v1/agreements/a1/commands", json={"transition": transition, "role": role},
                           headers={**headers, "Idempotency-Key": key})  # fmt: skip


@pytest.mark.parametrize(
    ("headers", "code"),
    [
        ({}, "PW670"),
        ({"Authorization": "Basic YWxpY2U6cHc="}, "PW670"),
        ({"Authorization": "Bearer not-a-token"}, "PW670"),
        ({"Authorization": "Bearer pwt_0123456789abcdef_" + "A" * 43}, "PW671"),
    ],
    ids=["no-token", "basic", "malformed", "unknown"],
)
def test_without_a_valid_token_every_endpoint_is_401(env: Env, headers: dict[str, str], code: str) -> None:
    before = dump(env.store)
    with env.client() as client:
        for method, path in [("POST", "/v1/agreements"), ("GET", "/v1/agreements/a1"),
                             ("POST", "/v1/agreements/a1/commands"), ("GET", "/v1/approvals"),
                             ("GET", "/v1/effects?parked=true"), ("GET", "/v1/bundles"),
                             ("POST", "/v1/effects/a1%2F1%2Fe0/abandon")]:  # fmt: skip
            body = {"transition": "deliver", "role": "seller"} if path.endswith("commands") else None
            if path.endswith("abandon"):
                body = {"reason": "gone"}
            if path == "/v1/agreements":
                body = {**OPEN_BODY, "id": "a2"}
            response = client.request(method, path, json=body, headers={**headers, "Idempotency-Key": "k"})
            problem_of(response, 401, code)
    assert dump(env.store) == before


def test_a_wrong_secret_for_a_known_token_id_is_401_like_an_unknown_one(env: Env) -> None:
    token_id = env.token_ids["bob"]
    forged = f"pwt_{token_id}_" + "B" * 43
    problem = problem_of(_submit(env, {"Authorization": f"Bearer {forged}"}), 401, "PW671")  # type: ignore[arg-type]
    unknown = problem_of(_submit(env, {"Authorization": "Bearer pwt_" + "f" * 16 + "_" + "B" * 43}),  # type: ignore[arg-type]
                         401, "PW671")  # fmt: skip
    assert problem["detail"] == unknown["detail"]


def test_a_revoked_token_is_401_and_writes_nothing(env: Env) -> None:
    with open_store(env.store) as store:
        revoke_token(store, env.token_ids["bob"], T0 + 5)
    before = dump(env.store)
    problem_of(_submit(env, env.auth("bob")), 401, "PW671")  # type: ignore[arg-type]
    assert dump(env.store) == before


def test_a_buyer_token_cannot_submit_the_sellers_transition(env: Env) -> None:
    before = dump(env.store)
    # claiming the seller's role: alice does not hold it
    problem = problem_of(_submit(env, env.auth("alice")), 403, "PW672")  # type: ignore[arg-type]
    assert problem["field"] == "role"
    # in her own role: the pact does not let a buyer deliver
    problem_of(_submit(env, env.auth("alice"), role="buyer"), 403, "PW507")  # type: ignore[arg-type]
    assert dump(env.store) == before
    with env.client() as client:
        shown = client.get("/v1/agreements/a1", headers=env.auth("alice")).json()
    assert (shown["version"], [e["event_id"] for e in shown["last_events"]]) == (1, ["a1/1"])


def test_a_party_holding_the_role_elsewhere_cannot_act_for_the_bound_party(env: Env, tmp_path: Path) -> None:
    """`mallory` holds `seller` in the registry, but agreement a1 binds seller to bob and nothing to her: a1 is
    answered as unknown (PW501, 404), as it is to her reads; an operator is told PW508 (it may see a1)."""
    from pactwright.runtime.parties import add_party
    from pactwright.runtime.tokens import issue_token

    with open_store(env.store) as store:
        add_party(store, "mallory", "seller", None, T0)
        token = issue_token(store, "mallory", T0).token
    before = dump(env.store)
    problem_of(_submit(env, {"Authorization": f"Bearer {token}"}), 404, "PW501")  # type: ignore[arg-type]
    assert dump(env.store) == before


def test_a_token_never_acts_as_the_clock_role(env: Env) -> None:
    """carol, a1's arbiter, also holds `scheduler` (the pact's clock role) in the registry: refused all the same
    (PW673); `tick`, who holds it and is bound in nothing, finds no a1 (PW501)."""
    from pactwright.runtime.parties import add_party

    env.clock.set(T0 + 15 * 86400)  # past the refund window: only the role stands in the way
    with open_store(env.store) as store:
        add_party(store, "carol", "scheduler", None, T0)
    before = dump(env.store)
    problem = problem_of(_submit(env, env.auth("carol"), "refund_undelivered", "scheduler"), 403, "PW673")  # type: ignore[arg-type]
    assert problem["field"] == "role"
    problem_of(_submit(env, env.auth("tick"), "refund_undelivered", "scheduler"), 404, "PW501")  # type: ignore[arg-type]
    assert dump(env.store) == before


def test_opening_needs_a_bound_party_in_a_role_it_holds_or_an_operator(env: Env) -> None:
    before = dump(env.store)
    with env.client() as client:
        stranger = {**OPEN_BODY, "id": "a2", "parties": {"buyer": "dave", "seller": "bob", "arbiter": "carol"}}
        # alice is not among the parties she binds
        problem_of(client.post("/v1/agreements", json=stranger, headers=env.auth("alice")), 403, "PW672")
        # carol is bound, but as buyer, a role she does not hold
        posing = {**OPEN_BODY, "id": "a2", "parties": {"buyer": "carol", "seller": "bob", "arbiter": "eve"}}
        problem_of(client.post("/v1/agreements", json=posing, headers=env.auth("carol")), 403, "PW672")
        assert dump(env.store) == before
        assert client.post("/v1/agreements", json=stranger, headers=env.auth("ops")).status_code == 201
        assert client.post("/v1/agreements", json={**OPEN_BODY, "id": "a3"},
                           headers=env.auth("bob")).status_code == 201  # fmt: skip


def test_resolving_an_effect_needs_the_operator_role(env: Env) -> None:
    before = dump(env.store)
    with env.client() as client:
        refused = client.post("/v1/effects/a1%2F1%2Fe0/abandon", json={"reason": "provider lost it"},
                              headers=env.auth("alice"))  # fmt: skip
        problem_of(refused, 403, "PW672")
        # the operator gets past the role check, to the runtime's own answer: a1 has no such call
        unknown = client.post("/v1/effects/a1/1/e0/reconcile", json={"resolution": "not_occurred"},
                              headers=env.auth("ops"))  # fmt: skip
        problem_of(unknown, 404, "PW640")
    assert dump(env.store) == before
