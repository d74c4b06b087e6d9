"""Agreements over HTTP on SQLite and PostgreSQL: open, submit (idempotent), show, events, evidence, bundles."""

from __future__ import annotations

from pathlib import Path

import pytest

from pactwright.runtime.worker import Worker
from tests.signed_bundles import BACKENDS, dump
from tests.test_service_env import OPEN_BODY, service_env

pytestmark = pytest.mark.parametrize("backend", BACKENDS)


def test_open_submit_show_replay_and_evidence(backend: str, tmp_path: Path) -> None:
    with service_env(backend, tmp_path) as env, env.client() as client:
        opened = client.post("/v1/agreements", json=OPEN_BODY, headers=env.auth("alice"))
        assert opened.status_code == 201, opened.text
        assert opened.headers["location"] == "/v1/agreements/a1"
        assert opened.json()["state"] == "draft"
        assert opened.json()["params"]["price"] == "6490"

        fund = {"transition": "fund", "role": "buyer"}
        first = client.post("/v1/agreements/a1/commands", json=fund, headers={**env.auth("alice"),
                                                                              "Idempotency-Key": "k1"})  # fmt: skip
        assert first.status_code == 201, first.text
        committed = first.json()
        assert committed["event_id"] == "a1/1"
        assert committed["state"] == "funded"
        assert committed["replayed"] is False
        assert [(p["source"], p["destination"], p["amount"]) for p in committed["postings"]] == [
            ("world", "escrow", "6490")
        ]

        again = client.post("/v1/agreements/a1/commands", json=fund, headers={**env.auth("alice"),
                                                                              "Idempotency-Key": "k1"})  # fmt: skip
        assert again.status_code == 200, again.text
        assert again.json()["event_id"] == committed["event_id"]
        assert again.json()["replayed"] is True

        shown = client.get("/v1/agreements/a1", headers=env.auth("bob"))
        assert shown.status_code == 200, shown.text
        doc = shown.json()
        assert (doc["state"], doc["version"]) == ("funded", 1)
        assert doc["balances"]["escrow"] == "6490"
        assert [e["event_id"] for e in doc["last_events"]] == ["a1/1"]
        assert doc["last_events"][0]["actor"] == "buyer:alice"
        assert [o["reference"] for o in doc["pending_outbox"]] == ["a1/1/0"]

        events = client.get("/v1/agreements/a1/events?limit=5", headers=env.auth("carol"))
        assert [e["transition"] for e in events.json()["data"]] == ["fund"]

        # `1.0` is the integer 1 (as JSON Schema counts it), read exactly, never as a float
        deliver = client.post("/v1/agreements/a1/commands",
                              content=b'{"transition": "deliver", "role": "seller", "expect_version": 1.0}',
                              headers={**env.auth("bob"), "Idempotency-Key": "k2",
                                       "Content-Type": "application/json"})  # fmt: skip
        assert deliver.status_code == 201, deliver.text
        assert deliver.json()["seq"] == 2

        evidence = client.get("/v1/agreements/a1/evidence", headers=env.auth("alice")).json()
        assert evidence["supports"]["event_ids"] == ["a1/1", "a1/2"]
        verified = client.get("/v1/agreements/a1/evidence/verification", headers=env.auth("alice")).json()
        assert verified["verifies"] is True
        assert verified["records"] == 3  # opened + two events
        wrong_head = client.get("/v1/agreements/a1/evidence/verification?expect_head=" + "0" * 64,
                                headers=env.auth("alice")).json()  # fmt: skip
        assert wrong_head["verifies"] is False
        assert [p["code"] for p in wrong_head["problems"]] == ["PW587"]

        bundles = client.get("/v1/bundles", headers=env.auth("alice")).json()["data"]
        assert [(b["pact_id"], b["pact_version"]) for b in bundles] == [("marketplace.milestone", "1.0.0")]
        assert bundles[0]["manifest_hash"] == doc["manifest_hash"]


def test_reused_key_with_another_body_is_409_and_writes_nothing(backend: str, tmp_path: Path) -> None:
    with service_env(backend, tmp_path) as env, env.client() as client:
        assert client.post("/v1/agreements", json=OPEN_BODY, headers=env.auth("alice")).status_code == 201
        headers = {**env.auth("alice"), "Idempotency-Key": "k1"}
        assert client.post("/v1/agreements/a1/commands", json={"transition": "fund", "role": "buyer"},
                           headers=headers).status_code == 201  # fmt: skip
        before = dump(env.store)
        reused = client.post("/v1/agreements/a1/commands", json={"transition": "dispute", "role": "buyer"},
                             headers=headers)  # fmt: skip
        assert reused.status_code == 409
        assert reused.headers["content-type"] == "application/problem+json"
        problem = reused.json()
        assert (problem["code"], problem["field"]) == ("PW515", "transition")
        assert dump(env.store) == before


def test_show_reads_ledger_balances_after_the_worker_delivers(backend: str, tmp_path: Path) -> None:
    from pactwright.runtime.ledger_db import open_ledger
    from pactwright.runtime.store import open_store

    with service_env(backend, tmp_path) as env, env.client() as client:
        assert client.post("/v1/agreements", json=OPEN_BODY, headers=env.auth("alice")).status_code == 201
        assert client.post("/v1/agreements/a1/commands", json={"transition": "fund", "role": "buyer"},
                           headers={**env.auth("alice"), "Idempotency-Key": "k1"}).status_code == 201  # fmt: skip
        with open_store(env.store) as store, open_ledger(env.ledger, env.store) as ledger:
            assert Worker(store, ledger, env.clock).drain()
        doc = client.get("/v1/agreements/a1", headers=env.auth("alice")).json()
        assert doc["pending_outbox"] == []
        assert doc["ledger_balances"]["escrow"] == "6490"
        assert doc["ledger_balances"]["world"] == "-6490"
