"""`/metrics` is Prometheus text (parsed strictly here), counts commands by outcome and reads state from the store."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from pactwright.runtime.ledger_db import open_ledger
from pactwright.runtime.store import open_store
from pactwright.runtime.worker import Worker
from tests.signed_bundles import BACKENDS
from tests.test_service_env import OPEN_BODY, service_env

_NAME = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
_PAIR = r'[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\]|\\.)*"'
_SAMPLE = re.compile(
    rf"^(?P<name>{_NAME})(?:\{{(?P<labels>{_PAIR}(?:,{_PAIR})*)\}})? (?P<value>-?[0-9]+(?:\.[0-9]+)?|\+Inf|NaN)$"
)
_LABEL = re.compile(r'(?P<key>[a-zA-Z_][a-zA-Z0-9_]*)="(?P<value>(?:[^"\\]|\\.)*)"')
Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def parse(text: str) -> tuple[dict[str, str], Samples]:
    """The text format 0.0.4, strictly: HELP and TYPE before each family's samples, every line well formed."""
    assert text.endswith("\n")
    types: dict[str, str] = {}
    samples: Samples = {}
    for line in text.splitlines():
        if line.startswith("# HELP "):
            assert re.fullmatch(rf"# HELP {_NAME} .+", line), line
            continue
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split(" ")
            assert kind in ("counter", "gauge", "histogram", "summary", "untyped"), line
            assert name not in types, f"two TYPE lines for {name}"
            types[name] = kind
            continue
        match = _SAMPLE.fullmatch(line)
        assert match, f"not a sample line: {line!r}"
        name = match["name"]
        family = re.sub(r"_(bucket|sum|count)$", "", name) if name not in types else name
        assert family in types, f"sample {name} before its TYPE"
        labels = match["labels"] or ""
        pairs = tuple((m["key"], m["value"]) for m in _LABEL.finditer(labels))
        assert ",".join(f'{k}="{v}"' for k, v in pairs) == labels, line
        key = (name, pairs)
        assert key not in samples, f"duplicate sample {line}"
        samples[key] = float(match["value"])
    return types, samples


@pytest.mark.parametrize("backend", BACKENDS)
def test_metrics_count_commands_and_read_the_outbox_from_the_store(backend: str, tmp_path: Path) -> None:
    with service_env(backend, tmp_path) as env, env.client() as client:
        assert client.post("/v1/agreements", json=OPEN_BODY, headers=env.auth("alice")).status_code == 201
        types, samples = parse(client.get("/metrics").text)
        assert types["pactwright_commands_total"] == "counter"
        assert types["pactwright_delivery_latency_seconds"] == "histogram"
        assert samples[("pactwright_outbox_entries", (("status", "pending"),))] == 0

        headers = {**env.auth("alice"), "Idempotency-Key": "k1"}
        fund = {"transition": "fund", "role": "buyer"}
        assert client.post("/v1/agreements/a1/commands", json=fund, headers=headers).status_code == 201
        assert client.post("/v1/agreements/a1/commands", json=fund, headers=headers).status_code == 200
        refused = client.post("/v1/agreements/a1/commands", json={"transition": "release", "role": "buyer"},
                              headers={**env.auth("alice"), "Idempotency-Key": "k2"})  # fmt: skip
        assert refused.status_code == 409
        response = client.get("/metrics")
        assert response.headers["content-type"] == "text/plain; version=0.0.4; charset=utf-8"
        _, samples = parse(response.text)
        assert samples[("pactwright_commands_total", (("outcome", "committed"),))] == 1
        assert samples[("pactwright_commands_total", (("outcome", "replayed"),))] == 1
        assert samples[("pactwright_commands_total", (("outcome", "refused"), ("code", "PW511")))] == 1
        assert samples[("pactwright_outbox_entries", (("status", "pending"),))] == 1
        assert samples[("pactwright_store_up", ())] == 1
        route = (("method", "POST"), ("route", "/v1/agreements/{id}/commands"), ("status", "201"))
        assert samples[("pactwright_http_requests_total", route)] == 1

        env.clock.advance(7)
        with open_store(env.store) as store, open_ledger(env.ledger, env.store) as ledger:
            assert [o.status for o in Worker(store, ledger, env.clock).drain()] == ["delivered"]
        _, samples = parse(client.get("/metrics").text)
        assert samples[("pactwright_outbox_entries", (("status", "pending"),))] == 0
        assert samples[("pactwright_outbox_entries", (("status", "delivered"),))] == 1
        latency = "pactwright_delivery_latency_seconds"
        assert samples[(f"{latency}_count", ())] == 1
        assert samples[(f"{latency}_sum", ())] == 7
        assert samples[(f"{latency}_bucket", (("le", "5"),))] == 0
        assert samples[(f"{latency}_bucket", (("le", "15"),))] == 1
        assert samples[(f"{latency}_bucket", (("le", "+Inf"),))] == 1
        assert samples[("pactwright_quarantined", (("kind", "outbox"),))] == 0
        assert samples[("pactwright_effects_parked", ())] == 0


def test_metrics_are_served_when_the_store_is_not(tmp_path: Path) -> None:
    from starlette.testclient import TestClient

    from pactwright.service import create_app

    with TestClient(create_app(str(tmp_path / "missing.db"), threads=1)) as client:
        response = client.get("/metrics")
    assert response.status_code == 200
    types, samples = parse(response.text)
    assert samples[("pactwright_store_up", ())] == 0
    assert "pactwright_outbox_entries" not in types
