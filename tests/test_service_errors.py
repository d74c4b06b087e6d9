"""Every error is an RFC 9457 problem document with a PW code: routing, bodies, refusals, bugs, readiness."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from pactwright.service import create_app
from pactwright.service._http import MAX_BODY
from pactwright.service._problems import STATUS
from tests.signed_bundles import BACKENDS, dump
from tests.test_service_env import OPEN_BODY, Env, problem_of, service_env


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Env:  # type: ignore[misc]
    with service_env("sqlite", tmp_path_factory.mktemp("errors")) as opened:
        with opened.client() as client:
            assert client.post("/v1/agreements", json=OPEN_BODY, headers=opened.auth("alice")).status_code == 201
        yield opened


def _post(env: Env, path: str, content: bytes, content_type: str | None = "application/json",
          **headers: str) -> object:  # fmt: skip
    sent = {**env.auth("alice"), "Idempotency-Key": "k", **headers}
    if content_type is not None:
        sent["Content-Type"] = content_type
    with env.client() as client:
        return client.post(path, content=content, headers=sent)


@pytest.mark.parametrize(
    ("content", "content_type", "status", "code"),
    [
        (b'{"transition": "fund", "role": ', "application/json", 400, "PW018"),
        (b'{"transition": "fund", "transition": "deliver", "role": "buyer"}', "application/json", 400, "PW015"),
        (b'{"transition": "fund", "role": "buyer", "expect_version": NaN}', "application/json", 400, "PW016"),
        (b'{"transition": "fund", "role": "\xff"}', "application/json", 400, "PW017"),
        (b'{"transition": "fund", "role": "buyer"}', "text/plain", 415, "PW682"),
        (b'{"transition": "fund", "role": "buyer"}', None, 415, "PW682"),
        (b'["fund"]', "application/json", 422, "PW684"),
        (b'{"transition": "fund", "role": "buyer", "as": "seller:bob"}', "application/json", 422, "PW684"),
        (b'{"transition": 7, "role": "buyer"}', "application/json", 422, "PW685"),
        (b'{"transition": "fund", "role": "buyer", "expect_version": "0"}', "application/json", 422, "PW684"),
        (b'{"transition": "fund", "role": "buyer", "expect_version": 0.5}', "application/json", 422, "PW684"),
        (b'{"transition": "fund", "role": "buyer", "expect_version": 1e400}', "application/json", 422, "PW684"),
        (b'{"transition": "fund", "role": "buyer", "params": {"price": 64.9}}', "application/json", 422, "PW685"),
        (b'{"transition": "fund", "role": "buyer", "params": {"price": 6490}}', "application/json", 422, "PW685"),
        (b'{"transition": "fund", "role": "buyer", "params": {"price": "64.9"}}', "application/json", 201, ""),
    ],
    ids=[
        "truncated",
        "duplicate-key",
        "nan",
        "not-utf8",
        "text-plain",
        "no-content-type",
        "array",
        "unknown-field",
        "number-as-string",
        "string-as-int",
        "fraction-as-int",
        "huge-exponent",
        "float-money",
        "int-money",
        "decimal-string-money",
    ],
)
def test_a_malformed_body_is_a_problem_and_writes_nothing(env: Env, content: bytes, content_type: str | None,
                                                          status: int, code: str) -> None:  # fmt: skip
    before = dump(env.store)
    response = _post(env, "/v1/agreements/a1/commands", content, content_type)
    if status == 201:  # the same value as a decimal string is accepted (and then replayed)
        assert response.status_code in (200, 201), response.text  # type: ignore[attr-defined]
        return
    problem_of(response, status, code)  # type: ignore[arg-type]
    assert dump(env.store) == before


def test_money_given_as_a_json_number_names_the_field(env: Env) -> None:
    body = b'{"pact_id": "marketplace.milestone", "id": "a9", "params": {"price": 64}, "parties": {}}'
    problem = problem_of(_post(env, "/v1/agreements", body), 422, "PW685")  # type: ignore[arg-type]
    assert problem["field"] == "params.price"


def test_an_oversize_body_is_413_whether_declared_or_streamed(env: Env) -> None:
    big = b'{"transition": "' + b"x" * MAX_BODY + b'", "role": "buyer"}'
    problem_of(_post(env, "/v1/agreements/a1/commands", big), 413, "PW683")  # type: ignore[arg-type]

    def chunks() -> object:
        yield b'{"transition": "'
        for _ in range(MAX_BODY // 1024 + 1):
            yield b"x" * 1024
        yield b'", "role": "buyer"}'

    with env.client() as client:
        streamed = client.post("/v1/agreements/a1/commands", content=chunks(),  # type: ignore[arg-type]
                               headers={**env.auth("alice"), "Idempotency-Key": "k",
                                        "Content-Type": "application/json"})  # fmt: skip
    assert "content-length" not in streamed.request.headers
    problem_of(streamed, 413, "PW683")


def test_routing_misses_are_problems(env: Env) -> None:
    with env.client() as client:
        problem_of(client.get("/v1/nothing-here"), 404, "PW680")
        problem_of(client.get("/"), 404, "PW680")
        problem_of(client.get("/v1/bundles/", headers=env.auth("alice"), follow_redirects=False), 404, "PW680")
        wrong = problem_of(client.delete("/v1/agreements/a1", headers=env.auth("alice")), 405, "PW681")
        assert "GET" in wrong["expected"]
        problem_of(client.put("/v1/agreements"), 405, "PW681")


@pytest.mark.parametrize(
    ("path", "status", "code"),
    [
        ("/v1/agreements/nope", 404, "PW501"),
        ("/v1/agreements/nope/events", 404, "PW501"),
        ("/v1/agreements/nope/evidence", 404, "PW501"),
        ("/v1/approvals/apr-0000000000000000", 404, "PW601"),
        ("/v1/agreements/a1/events?limit=0", 422, "PW684"),
        ("/v1/agreements/a1/events?limit=%C2%B2", 422, "PW684"),
        ("/v1/effects?parked=yes", 422, "PW684"),
        ("/v1/approvals?status=granted", 422, "PW684"),
    ],
)
def test_unknown_things_and_bad_queries(env: Env, path: str, status: int, code: str) -> None:
    with env.client() as client:
        problem_of(client.get(path, headers=env.auth("alice")), status, code)


def test_refusals_keep_their_code_field_and_hint(env: Env) -> None:
    with env.client() as client:
        no_key = client.post("/v1/agreements/a1/commands", json={"transition": "fund", "role": "buyer"},
                             headers=env.auth("alice"))  # fmt: skip
        problem_of(no_key, 422, "PW519")
        unknown = client.post("/v1/agreements/a1/commands", json={"transition": "nope", "role": "buyer"},
                              headers={**env.auth("alice"), "Idempotency-Key": "k-nope"})  # fmt: skip
        problem = problem_of(unknown, 422, "PW506")
        assert problem["field"] == "transition" and "fund" in problem["expected"]
        taken = problem_of(client.post("/v1/agreements", json=OPEN_BODY, headers=env.auth("alice")), 409, "PW502")
        assert taken["instance"] == "/v1/agreements"
        bad_param = {**OPEN_BODY, "id": "a5", "params": {"price": "64.901"}}
        problem_of(client.post("/v1/agreements", json=bad_param, headers=env.auth("alice")), 422, "PW503")
        inactive = {**OPEN_BODY, "id": "a6", "pact_id": "no.such.pact"}
        problem_of(client.post("/v1/agreements", json=inactive, headers=env.auth("alice")), 404, "PW702")


def test_an_unexpected_exception_is_a_500_problem_without_internals(
    env: Env, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from pactwright.runtime import agreements

    def broken(*args: object, **kwargs: object) -> object:
        raise RuntimeError("secret-internal-detail at /srv/db")

    monkeypatch.setattr(agreements, "show", broken)
    with caplog.at_level(logging.ERROR, logger="pactwright.service"), env.client() as client:
        response = client.get("/v1/agreements/a1", headers=env.auth("alice"))
    problem = problem_of(response, 500, "PW003")
    assert "secret-internal-detail" not in response.text and "RuntimeError" not in response.text
    assert problem["detail"] == "internal error: the server logged the details"
    assert "secret-internal-detail" in caplog.text  # logged server-side, with its traceback
    assert "Traceback" in caplog.text


def test_every_status_of_the_table_is_documented_as_a_problem_somewhere() -> None:
    from pactwright.service._routes import _REASONS

    assert set(STATUS.values()) - {405, 501} <= set(_REASONS)


@pytest.mark.parametrize("backend", BACKENDS)
def test_readyz_is_ready_on_a_current_store_and_healthz_needs_nothing(backend: str, tmp_path: Path) -> None:
    with service_env(backend, tmp_path) as env, env.client() as client:
        assert client.get("/healthz").json() == {"status": "ok"}
        ready = client.get("/readyz")
        assert ready.status_code == 200, ready.text
        assert ready.json()["store"] == backend


def test_readyz_is_503_when_the_store_is_unreachable(tmp_path: Path) -> None:
    for url in (str(tmp_path / "missing.db"), "postgresql://root@127.0.0.1:1/test"):
        with TestClient(create_app(url, str(tmp_path / "ledger.sqlite"), threads=1)) as client:
            assert client.get("/healthz").status_code == 200
            problem_of(client.get("/readyz"), 503, "PW700")
            # and the API says so too, with the same code
            problem_of(client.get("/v1/bundles", headers={"Authorization": "Bearer x"}), 503, "PW700")
    assert not (tmp_path / "missing.db").exists()  # never created


def test_readyz_is_503_when_the_store_has_no_migrations(tmp_path: Path) -> None:
    empty = tmp_path / "empty.db"
    empty.write_bytes(b"")
    with TestClient(create_app(str(empty), str(tmp_path / "ledger.sqlite"), threads=1)) as client:
        problem = problem_of(client.get("/readyz"), 503, "PW686")
    assert problem["found"] == "0"


def test_readyz_is_503_when_the_ledger_is_unreachable(tmp_path: Path) -> None:
    with service_env("sqlite", tmp_path) as env:
        app = create_app(env.store, "postgresql://root@127.0.0.1:1/test", threads=1)
        with TestClient(app) as client:
            problem_of(client.get("/readyz"), 503, "PW550")


@pytest.mark.parametrize("backend", BACKENDS)
def test_text_no_store_can_hold_is_refused_not_a_server_error(backend: str, tmp_path: Path) -> None:
    """A NUL or a lone surrogate in a pact id, a party or a role (PostgreSQL's text refuses NUL) names nothing:
    a 4xx problem with its code, nothing written; found by the stateful API fuzzing as a 503 PW709."""
    bodies = [
        ({**OPEN_BODY, "id": "n1", "pact_id": "marketplace.milestone\x00"}, 409, "PW702"),
        ({**OPEN_BODY, "id": "n2", "pact_id": "Y\udaee\udce0\u00d8"}, 409, "PW702"),
        ({**OPEN_BODY, "id": "n3", "parties": {**OPEN_BODY["parties"], "seller": "bob\x00"}}, 422, "PW504"),
        ({**OPEN_BODY, "id": "n4", "parties": {**OPEN_BODY["parties"], "seller": "b\ud800"}}, 422, "PW504"),
        ({**OPEN_BODY, "id": "n5", "parties": {**OPEN_BODY["parties"], "x\x00": "alice"}}, 422, "PW504"),
    ]
    with service_env(backend, tmp_path) as env, env.client() as client:
        before = dump(env.store)
        for body, status, code in bodies:
            sent = json.dumps(body).encode("ascii")  # lone surrogates as `\\udxxx` escapes, as a client may send
            headers = {**env.auth("alice"), "Content-Type": "application/json"}
            response = client.post("/v1/agreements", content=sent, headers=headers)
            assert response.status_code < 500, response.text
            problem_of(response, STATUS.get(code, status), code)
        assert dump(env.store) == before
