"""Attacks on the service's authentication and authority, over real HTTP (Starlette's TestClient, and a live
`serve` process where the server itself matters), on SQLite and PostgreSQL where the store matters.

What is attacked: reading what the caller is no party to (every read is scoped to the agreement's parties
and operators, and a hidden item is answered exactly as an unknown one), acting as another party (lookalike
names, a party bound under two roles, idempotency keys of another party), the clock role under other
spellings, `Authorization` header variants, revocation while the service runs, path tricks in effect ids, `/metrics`
and problem documents leaking secrets or internals, and the timing of unknown against wrong tokens.
Every refusal is checked for its status and code and for writing nothing (`dump`). The attacks on
approvals are in test_service_attacks_approvals.py.
"""

from __future__ import annotations

import os
import secrets
import socket
import statistics
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from pactwright.errors import PactwrightError
from pactwright.runtime.parties import add_party
from pactwright.runtime.store import open_store
from pactwright.runtime.tokens import issue_token, revoke_token
from pactwright.service import create_app
from tests._service_support import SUPPORT_OPEN, grant_ok, headers, same_as_unknown, support
from tests.signed_bundles import BACKENDS, ROOT, dump
from tests.test_service_env import OPEN_BODY, PARTIES, T0, Env, problem_of, service_env

# `mallory` holds every marketplace role in the registry but is bound in no agreement she did not open;
# `Alice` and `аlice` (a Cyrillic `а`) look like alice; `tick` holds the pact's clock role.
REGISTRY = {"alice": ("buyer",), "bob": ("seller",), "carol": ("arbiter",), "ops": ("operator",),
            "tick": ("scheduler",), "mallory": ("buyer", "seller", "arbiter"), "Alice": ("buyer",),
            "\u0430lice": ("buyer",)}  # fmt: skip
STRANGERS = ("mallory", "Alice", "\u0430lice", "tick")
READS = ("/v1/agreements/{id}", "/v1/agreements/{id}/events", "/v1/agreements/{id}/evidence",
         "/v1/agreements/{id}/evidence/verification", "/review/agreements/{id}")  # fmt: skip
FUND = {"transition": "fund", "role": "buyer"}


@pytest.fixture(params=BACKENDS)
def env(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Env]:
    """Marketplace: a1 (alice, bob, carol) funded by alice."""
    with service_env(request.param, tmp_path, registry=REGISTRY) as opened:
        with opened.client() as client:
            assert client.post("/v1/agreements", json=OPEN_BODY, headers=opened.auth("alice")).status_code == 201
            fund = client.post("/v1/agreements/a1/commands", json=FUND,
                               headers={**opened.auth("alice"), "Idempotency-Key": "fund"})  # fmt: skip
            assert fund.status_code == 201, fund.text
        yield opened


# Reads are scoped ---------------------------------------------------------------------------------------


def test_reads_are_scoped_to_the_agreements_parties_and_operators(env: Env) -> None:
    with env.client() as client:
        for template in READS:
            for party in (*PARTIES.values(), "ops"):
                shown = client.get(template.format(id="a1"), headers=env.auth(party))
                assert shown.status_code == 200, (template, party, shown.text)
            for party in STRANGERS:
                hidden = client.get(template.format(id="a1"), headers=env.auth(party))
                unknown = client.get(template.format(id="a9"), headers=env.auth(party))
                problem_of(hidden, 404, "PW501")
                same_as_unknown(hidden, unknown, "a1", "a9")


def test_lists_show_only_what_the_caller_may_see(tmp_path: Path) -> None:
    """Approvals and effects of an agreement are listed to its parties and operators, never to a stranger."""
    with support(tmp_path, "sqlite") as (env, client, request):
        grant_ok(env, client, request)
        for party in ("sam", "rita", "bot", "ops"):
            assert [r["id"] for r in _get(client, env, party, "/v1/approvals")] == [request["id"]], party
            assert {e["agreement"] for e in _get(client, env, party, "/v1/effects")} == {"r1"}, party
        for party in ("stranger", "mallory"):
            for query in ("", "?agreement=r1", "?status=consumed"):
                assert _get(client, env, party, f"/v1/approvals{query}") == [], (party, query)
                assert _get(client, env, party, f"/v1/effects{query.replace('status=consumed', 'parked=false')}") \
                    == [], (party, query)  # fmt: skip


def _get(client: TestClient, env: Env, party: str, path: str) -> list[dict[str, Any]]:
    response = client.get(path, headers=env.auth(party))
    assert response.status_code == 200, response.text
    found: list[dict[str, Any]] = response.json()["data"]
    return found


# Acting as another party ----------------------------------------------------------------------------------


def test_lookalike_parties_act_only_as_themselves(env: Env) -> None:
    before = dump(env.store)
    with env.client() as client:
        for party in ("Alice", "\u0430lice"):
            refused = client.post("/v1/agreements/a1/commands", json=FUND, headers=headers(env, party, "fund"))
            problem_of(refused, 404, "PW501")  # bound in nothing: a1 is unknown to them
    assert dump(env.store) == before
    with open_store(env.store) as store:
        for name in ("alice ", " alice", "alice\n", "alice\x00", ""):
            with pytest.raises(PactwrightError) as refused:
                add_party(store, name, "buyer", None, T0)
            assert refused.value.code == "PW611"


def test_an_unbound_party_cannot_probe_another_partys_idempotency_keys(env: Env) -> None:
    """mallory holds `buyer` in the registry: with alice's key (`fund`) or a fresh one, a1 answers her the same
    (a1 is unknown to her, PW501, before any key is looked up), never PW515 or alice's result."""
    before = dump(env.store)
    with env.client() as client:
        for body in (FUND, {"transition": "deliver", "role": "seller"}):
            used = client.post("/v1/agreements/a1/commands", json=body, headers=headers(env, "mallory", "fund"))
            fresh = client.post("/v1/agreements/a1/commands", json=body, headers=headers(env, "mallory", "fun2"))
            problem_of(used, 404, "PW501")
            assert (used.text, dict(used.headers)) == (fresh.text, dict(fresh.headers))
    assert dump(env.store) == before


def test_a_command_on_an_agreement_the_caller_may_not_read_is_answered_as_unknown(env: Env) -> None:
    with env.client() as client:
        hidden = client.post("/v1/agreements/a1/commands", json=FUND, headers=headers(env, "mallory", "fund"))
        unknown = client.post("/v1/agreements/a9/commands", json=FUND, headers=headers(env, "mallory", "fund"))
    same_as_unknown(hidden, unknown, "a1", "a9")


def test_a_bound_party_cannot_replay_another_partys_key_into_its_result(env: Env) -> None:
    """bob is a1's seller: alice's key `fund` is not his to replay; the same key on another agreement is new."""
    before = dump(env.store)
    with env.client() as client:
        replay = client.post("/v1/agreements/a1/commands", json={"transition": "deliver", "role": "seller"},
                             headers=headers(env, "bob", "fund"))  # fmt: skip
        problem = problem_of(replay, 409, "PW515")
        assert "event_id" not in problem and "a1/1" not in replay.text
        assert dump(env.store) == before
        # alice's own key on another agreement of hers is a new command there, not a1's result
        assert client.post("/v1/agreements", json={**OPEN_BODY, "id": "a2"}, headers=env.auth("alice")).status_code \
            == 201  # fmt: skip
        other = client.post("/v1/agreements/a2/commands", json=FUND, headers=headers(env, "alice", "fund"))
        assert (other.status_code, other.json()["event_id"], other.json()["replayed"]) == (201, "a2/1", False)


def test_a_party_bound_under_two_roles_acts_only_in_the_roles_it_holds(env: Env) -> None:
    """alice opens a3 binding herself as buyer and seller: she holds only buyer, so she never delivers."""
    with env.client() as client:
        doubled = {**OPEN_BODY, "id": "a3", "parties": {"buyer": "alice", "seller": "alice", "arbiter": "carol"}}
        assert client.post("/v1/agreements", json=doubled, headers=env.auth("alice")).status_code == 201
        assert client.post("/v1/agreements/a3/commands", json=FUND,
                           headers=headers(env, "alice", "f")).status_code == 201  # fmt: skip
        before = dump(env.store)
        deliver = {"transition": "deliver", "role": "seller"}
        problem_of(client.post("/v1/agreements/a3/commands", json=deliver, headers=headers(env, "alice", "d")),
                   403, "PW672")  # fmt: skip
        # bob holds seller, but a3 binds seller to alice and nothing to him: a3 is unknown to him
        problem_of(client.post("/v1/agreements/a3/commands", json=deliver, headers=headers(env, "bob", "d")),
                   404, "PW501")  # fmt: skip
        assert dump(env.store) == before


@pytest.mark.parametrize(
    ("role", "code"),
    [("scheduler", "PW673"), ("Scheduler", "PW672"), ("SCHEDULER", "PW672"), (" scheduler", "PW672"),
     ("scheduler ", "PW672"), ("scheduler\u200b", "PW672"), ("\u017fcheduler", "PW672"), ("scheduler\x00", "PW672"),
     ("sch\u0435duler", "PW672")],
    ids=["exact", "title", "upper", "lead-space", "trail-space", "zero-width", "long-s", "nul", "cyrillic-e"],
)  # fmt: skip
def test_the_clock_role_is_never_available_under_any_spelling(env: Env, role: str, code: str) -> None:
    env.clock.set(T0 + 15 * 86400)  # past the refund window: only the role stands in the way
    before = dump(env.store)
    with env.client() as client:
        for dry_run in (False, True):
            body = {"transition": "refund_undelivered", "role": role, "dry_run": dry_run}
            # An operator may see a1, so it is told which rule refuses it: the clock role (PW673), or a
            # spelling of it that is just another role it does not hold (PW672).
            problem_of(client.post("/v1/agreements/a1/commands", json=body, headers=headers(env, "ops", "t")),
                       403, code)  # fmt: skip
            # `tick` holds `scheduler` in the registry but a1 binds nothing to it: a1 is unknown to it.
            problem_of(client.post("/v1/agreements/a1/commands", json=body, headers=headers(env, "tick", "t")),
                       404, "PW501")  # fmt: skip
    assert dump(env.store) == before


def test_opening_with_an_id_in_use_says_only_that_it_is_taken(env: Env) -> None:
    """A caller-chosen agreement id is unique in the store, so opening one in use is PW502 whoever asks: that
    much existence cannot be hidden (docs/api.md says so; omit `id` for a random one). Nothing else leaks and
    nothing is written."""
    before = dump(env.store)
    with env.client() as client:
        mine = {**OPEN_BODY, "parties": {"buyer": "mallory", "seller": "bob", "arbiter": "carol"}}
        taken = client.post("/v1/agreements", json=mine, headers=env.auth("mallory"))
        problem = problem_of(taken, 409, "PW502")
        assert not {"alice", "funded", "6490"} & set(taken.text.replace('"', " ").replace("`", " ").split())
        assert problem["detail"] == "agreement `a1` already exists"
    assert dump(env.store) == before


def test_the_clock_role_never_opens_an_agreement_nor_is_rebound(env: Env) -> None:
    """tick holds only the clock role: binding itself to it is no authority to open. Nobody, operator included,
    names who the clock is (its party is the role's own name), else the scheduler would act as that party."""
    before = dump(env.store)
    base = {"buyer": "alice", "seller": "bob", "arbiter": "carol"}
    with env.client() as client:
        attempts = (("tick", "tick"), ("alice", "alice"), ("ops", "ops"), ("alice", "mallory"))
        for party, bound_clock in attempts:
            bound = {**base, "scheduler": bound_clock}
            body = {**OPEN_BODY, "id": "t1", "parties": bound}
            problem = problem_of(client.post("/v1/agreements", json=body, headers=env.auth(party)), 403, "PW673")
            assert problem["field"] == "parties.scheduler", problem
        assert dump(env.store) == before
        # the clock's own name is what the runtime binds anyway: stating it changes nothing
        same = {**OPEN_BODY, "id": "t2", "parties": {**base, "scheduler": "scheduler"}}
        opened = client.post("/v1/agreements", json=same, headers=env.auth("alice"))
        assert opened.status_code == 201, opened.text
        assert opened.json()["parties"]["scheduler"] == "scheduler"


def test_a_request_without_a_valid_token_is_401_before_its_body_is_read(env: Env) -> None:
    """No token, or a wrong one, with a body that is not JSON, not an object, or too large: 401, not 4xx."""
    before = dump(env.store)
    unknown = {"Authorization": "Bearer pwt_" + "0" * 16 + "_" + "A" * 43}
    with env.client() as client:
        for headers, code in (({}, "PW670"), (unknown, "PW671")):
            bodies = (("not json", "text/plain"), ("{", "application/json"), ("[1]", "application/json"),
                      ("x" * 70000, "application/json"), ('{"transition": 1}', "application/json"))  # fmt: skip
            for body, media in bodies:
                for path in ("/v1/agreements", "/v1/agreements/a1/commands", "/v1/approvals/apr-1/grant",
                             "/v1/effects/a1%2F1%2Fe0/abandon"):  # fmt: skip
                    response = client.post(path, content=body, headers={**headers, "content-type": media,
                                                                         "Idempotency-Key": "k"})  # fmt: skip
                    problem_of(response, 401, code)
    assert dump(env.store) == before


def test_a_pact_role_named_operator_is_refused(tmp_path: Path) -> None:
    """The marketplace with its arbiter renamed `operator`: whoever was registered to act in that pact role would
    hold the store's operator authority (every agreement readable, parked effects resolved), so the language
    refuses the name (PW188) and no such bundle is built."""
    from pactwright.compiler.pipeline import check_text

    text = (ROOT / "policies" / "marketplace_milestone.pact").read_text(encoding="utf-8")
    result = check_text(text.replace("arbiter", "operator"))
    assert result.candidate is None
    assert "PW188" in {d.code for d in result.diagnostics}


def test_no_endpoint_registers_parties_or_roles(env: Env) -> None:
    """Roles come only from the registry, written by the CLI on the store's host; the API cannot add one."""
    with env.client() as client:
        for path in ("/v1/parties", "/v1/parties/mallory", "/v1/tokens"):
            problem_of(client.post(path, json={"role": "operator"}, headers=env.auth("mallory")), 404, "PW680")
        paths = client.get("/openapi.json").json()["paths"]
    assert not [p for p in paths if "part" in p or "token" in p]


# The Authorization header ---------------------------------------------------------------------------------


def test_authorization_header_variants(env: Env) -> None:
    token = env.tokens["alice"]
    accepted = [f"Bearer {token}", f"bearer {token}", f"BEARER {token}", f"Bearer   {token}", f"Bearer {token}  "]
    refused = [f"Bearer\t{token}", f"Bearer {token} x", f"Bearer {token}x", f"Token {token}", token,
               f"Bearer {token[:-1]}", f"Bearer {token}" + " " * 300, "Bearer " + "A" * 10000, "Bearer ",
               f"Bearer {token.upper()}", f"Bearer {token}\u00a0"]  # fmt: skip
    with env.client() as client:
        for value in accepted:
            assert client.get("/v1/agreements/a1", headers={"Authorization": value}).status_code == 200, value
        for value in refused:
            response = client.get("/v1/agreements/a1", headers={"Authorization": value.encode("utf-8")})
            problem = problem_of(response, 401, "PW670")
            assert token not in response.text and len(response.text) < 1000, value
            assert problem["field"] == "authorization"


def test_two_authorization_headers_are_refused_whatever_their_order(env: Env) -> None:
    """A proxy and the service could each read a different one of two headers: two are never accepted."""
    before = dump(env.store)
    with env.client() as client:
        for pair in ((env.tokens["alice"], env.tokens["bob"]), (env.tokens["bob"], env.tokens["alice"]),
                     (env.tokens["alice"], env.tokens["alice"]), (env.tokens["alice"], "junk")):  # fmt: skip
            headers = [("Authorization", f"Bearer {pair[0]}"), ("Authorization", f"Bearer {pair[1]}"),
                       ("Idempotency-Key", "two")]  # fmt: skip
            for method, path, body in (("GET", "/v1/agreements/a1", None),
                                       ("POST", "/v1/agreements/a1/commands", FUND)):  # fmt: skip
                response = client.request(method, path, json=body, headers=headers)
                problem_of(response, 401, "PW670")
    assert dump(env.store) == before


def _raw(port: int, lines: list[str]) -> tuple[str, str]:
    """One request written by hand to a live server: (status line, body)."""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as conn:
        conn.sendall(("\r\n".join([*lines, "Connection: close"]) + "\r\n\r\n").encode("latin-1"))
        data = b""
        while chunk := conn.recv(65536):
            data += chunk
    head, _, body = data.decode("latin-1").partition("\r\n\r\n")
    return head.splitlines()[0], body


def test_a_live_server_refuses_two_authorization_headers(tmp_path: Path, cli: Path) -> None:
    """uvicorn hands both headers on, in order; the service refuses the pair, and a comma-joined one too."""
    from tests.test_service_process import serving

    with service_env("sqlite", tmp_path, registry=REGISTRY) as env:
        command = [str(cli), "serve", "--store", env.store, "--ledger", env.ledger, "--port", "0"]
        with serving(command) as (base, _):
            port = int(base.rsplit(":", 1)[1])
            alice, bob = env.tokens["alice"], env.tokens["bob"]
            get = ["GET /v1/bundles HTTP/1.1", "Host: test"]
            assert _raw(port, [*get, f"authorization: bearer {alice}"])[0] == "HTTP/1.1 200 OK"
            for extra in ([f"Authorization: Bearer {alice}", f"Authorization: Bearer {bob}"],
                          [f"Authorization: Bearer {bob}", f"Authorization: Bearer {alice}"],
                          [f"Authorization: Bearer {alice}, Bearer {bob}"]):  # fmt: skip
                status, body = _raw(port, [*get, *extra])
                assert status == "HTTP/1.1 401 Unauthorized", (status, body)
                assert '"code": "PW670"' in body, body


def test_a_token_revoked_while_the_service_runs_stops_at_the_next_request(env: Env) -> None:
    """The service's threads hold open store connections; revocation is read at every request, never cached."""
    with env.client() as client:
        for _ in range(4):  # warm every runtime thread with alice's token
            assert client.get("/v1/agreements/a1", headers=env.auth("alice")).status_code == 200
        with open_store(env.store) as store:
            revoke_token(store, env.token_ids["alice"], T0 + 1)
            fresh = issue_token(store, "alice", T0 + 1).token
        before = dump(env.store)
        for _ in range(4):
            problem_of(client.get("/v1/agreements/a1", headers=env.auth("alice")), 401, "PW671")
            problem_of(client.post("/v1/agreements/a1/commands", json={"transition": "cancel", "role": "buyer"},
                                   headers=headers(env, "alice", "after")), 401, "PW671")  # fmt: skip
        assert dump(env.store) == before
        assert client.get("/v1/agreements/a1", headers={"Authorization": f"Bearer {fresh}"}).status_code == 200


# Effect ids and path tricks -------------------------------------------------------------------------------


@pytest.mark.parametrize("backend", BACKENDS)
def test_effect_id_path_tricks_never_reach_another_agreements_call(backend: str, tmp_path: Path) -> None:
    with support(tmp_path, backend) as (env, client, request):
        grant_ok(env, client, request)  # r1/2/e0 exists (prepared, not parked)
        assert client.post("/v1/agreements", json={**SUPPORT_OPEN, "id": "r2"},
                           headers=env.auth("sam")).status_code == 201  # fmt: skip
        before = dump(env.store)
        for effect in ("r2%2F..%2Fr1%2F2%2Fe0", "r2/../r1/2/e0", "r2%2F2%2Fe0", "..%2Fr1%2F2%2Fe0", "r2%2Fr1%2F2%2Fe0",
                       "r2%252Fx", "r2%00", "r2%2F2%2Fe0%00"):  # fmt: skip
            for party, status, code in (("sam", 403, "PW672"), ("stranger", 403, "PW672")):
                problem_of(client.post(f"/v1/effects/{effect}/abandon", json={"reason": "x"},
                                       headers=env.auth(party)), status, code)  # fmt: skip
            answered = client.post(f"/v1/effects/{effect}/abandon", json={"reason": "x"}, headers=env.auth("ops"))
            assert answered.status_code in (404, 409), (effect, answered.text)
            assert answered.json()["code"] in ("PW501", "PW640", "PW680", "PW642"), (effect, answered.text)
            assert answered.headers["content-type"] == "application/problem+json"
        assert dump(env.store) == before


# What leaks ---------------------------------------------------------------------------------------------


def test_metrics_leak_no_token_party_or_agreement_and_stay_bounded(env: Env) -> None:
    with env.client() as client:
        client.get("/v1/agreements/a1", headers=env.auth("mallory"))
        client.get(f"/v1/{env.tokens['alice']}")
        client.get("/v1/agreements/a1", headers={"Authorization": f"Bearer {env.tokens['alice']}x"})
        for n in range(40):
            client.request(f"X{n:03d}{secrets.token_hex(4)}", "/v1/agreements")
            client.request(f"M{n:03d}", f"/nothing/{n}")
        text = client.get("/metrics").text
    for secret in (*env.tokens.values(), *env.token_ids.values(), "mallory", "alice", "a1", "/nothing"):
        assert secret not in text, secret
    series = [line for line in text.splitlines() if line.startswith("pactwright_http_requests_total")]
    assert len(series) < 12, series  # odd methods share one label value, not one series each


def test_problems_never_show_the_store_url_password_or_a_file_path(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A store or ledger that cannot be opened is 503 with its code; the URL, password and path stay in the log."""
    missing = tmp_path / "secret-dir" / "store.db"
    password_url = "postgresql://postgres:hunter2-secret@127.0.0.1:1/test"  # noqa: S105 - made up, looked for
    for store_url, ledger_url in ((str(missing), None), (password_url, None)):
        with TestClient(create_app(store_url, ledger_url, threads=1), raise_server_exceptions=False) as client:
            for path in ("/readyz", "/v1/bundles", "/v1/agreements/a1"):
                response = client.get(path, headers={"Authorization": "Bearer pwt_" + "0" * 16 + "_" + "A" * 43})
                assert response.status_code == 503, response.text
                assert response.json()["code"] == "PW700"
                for leak in ("hunter2", "secret-dir", str(tmp_path), "127.0.0.1", "postgres:"):
                    assert leak not in response.text, (leak, response.text)
    (tmp_path / "l").mkdir()
    with service_env("sqlite", tmp_path / "l") as env, caplog.at_level("WARNING", "pactwright.service"):
        ledger = "postgresql://root:ledger-pw@127.0.0.1:1/test"
        with TestClient(create_app(env.store, ledger, threads=1), raise_server_exceptions=False) as client:
            response = client.get("/readyz")
            problem_of(response, 503, "PW550")
            assert "ledger-pw" not in response.text and "127.0.0.1" not in response.text
    assert "127.0.0.1:1" in caplog.text  # the operator still reads why, in the server's log,
    assert "hunter2" not in caplog.text and "ledger-pw" not in caplog.text  # without the password


def test_no_traceback_or_sql_reaches_the_client_on_hostile_ids(env: Env) -> None:
    hostile = ["a1'; DROP TABLE agreements; --", 'a1" OR "1"="1', "%00", "a" * 199, "%ff%fe", "..%2F..%2Fetc"]
    with env.client() as client:
        for value in hostile:
            for template in (*READS, "/v1/approvals/{id}"):
                response = client.get(template.format(id=value), headers=env.auth("ops"))
                assert response.status_code in (404, 422), (value, response.text)
                assert response.headers["content-type"] == "application/problem+json"
                for leak in ("Traceback", "SELECT", "sqlite", "psycopg", 'File "', ".py"):
                    assert leak not in response.text, (leak, response.text)
        for path in ("/v1/approvals?agreement=%00", "/v1/effects?agreement=a1%00", "/v1/approvals?status=%00"):
            problem_of(client.get(path, headers=env.auth("ops")), 422, "PW684")
    assert [row[0] for row in dump(env.store)["agreements"]] == ["a1"]


# Timing ---------------------------------------------------------------------------------------------------

TIMING_N = int(os.environ.get("PW_AUTH_TIMING_N", "300"))


@pytest.mark.parametrize("backend", BACKENDS)
def test_unknown_wrong_and_revoked_tokens_answer_alike_in_body_and_time(backend: str, tmp_path: Path) -> None:
    """Interleaved requests over HTTP; the medians of the three kinds of bad token stay within 1.5x.

    Prints the medians (`-s`); `PW_AUTH_TIMING_N` sets how many requests of each kind (default 300).
    """
    registry = {"alice": ("buyer",), "bob": ("seller",)}
    with service_env(backend, tmp_path, registry=registry) as env, env.client() as client:
        with open_store(env.store) as store:
            revoked = issue_token(store, "bob", T0)
            revoke_token(store, revoked.token_id, T0)
        kinds = {
            "unknown": lambda: f"pwt_{secrets.token_hex(8)}_{secrets.token_urlsafe(32)}",
            "wrong": lambda: f"pwt_{env.token_ids['alice']}_{secrets.token_urlsafe(32)}",
            "revoked": lambda: revoked.token,
        }
        bodies: dict[str, set[str]] = {kind: set() for kind in kinds}
        times: dict[str, list[float]] = {kind: [] for kind in kinds}
        for _ in range(10):  # warm up
            for make in kinds.values():
                client.get("/v1/bundles", headers={"Authorization": f"Bearer {make()}"})
        for _ in range(TIMING_N):
            for kind, make in kinds.items():
                header = {"Authorization": f"Bearer {make()}"}
                start = time.perf_counter()
                response = client.get("/v1/bundles", headers=header)
                times[kind].append(time.perf_counter() - start)
                bodies[kind].add(response.text + str(sorted(response.headers.items())))
        medians = {kind: statistics.median(found) for kind, found in times.items()}
        print(f"\n{backend} auth timing over HTTP, n={TIMING_N} each, medians (ms): "
              + ", ".join(f"{k} {v * 1000:.3f}" for k, v in medians.items())
              + f"; max/min {max(medians.values()) / min(medians.values()):.3f}")  # fmt: skip
    assert len(set().union(*bodies.values())) == 1, bodies  # one answer, byte for byte, for all three
    assert max(medians.values()) / min(medians.values()) < 1.5, medians
