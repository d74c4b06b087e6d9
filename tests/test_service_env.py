"""The service's test environment (a store with an active pact, registered parties and their tokens), and
the checks that the published OpenAPI document is well formed and names every route the app mounts.

Other tests/test_service_*.py modules import `service_env`, `problem_of` and the constants from here.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx2
from starlette.testclient import TestClient

from pactwright.runtime.clock import TestClock
from pactwright.runtime.parties import add_party
from pactwright.runtime.store import open_store
from pactwright.runtime.tokens import issue_token
from pactwright.service import create_app
from tests.signed_bundles import ROOT, store_with_policy

MARKETPLACE = ROOT / "policies" / "marketplace_milestone.pact"
T0 = 1780315200  # 2026-06-01T12:00:00Z
PARTIES = {"buyer": "alice", "seller": "bob", "arbiter": "carol"}
OPEN_BODY = {"pact_id": "marketplace.milestone", "id": "a1", "params": {"price": "64.90"}, "parties": PARTIES}
# party -> roles it holds in the registry; `ops` is the operator, `tick` holds the pact's clock role.
REGISTRY = {"alice": ("buyer",), "bob": ("seller",), "carol": ("arbiter",), "ops": ("operator",),
            "tick": ("scheduler",)}  # fmt: skip


@dataclass
class Env:
    store: str
    ledger: str
    tokens: dict[str, str]  # party -> bearer token
    token_ids: dict[str, str]
    clock: TestClock

    def auth(self, party: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.tokens[party]}"}

    def client(self, **options: Any) -> TestClient:
        app = create_app(self.store, self.ledger, clock=self.clock, threads=2)
        return TestClient(app, raise_server_exceptions=False, **options)


@contextlib.contextmanager
def service_env(backend: str, directory: Path, policy: Path = MARKETPLACE,
                registry: dict[str, tuple[str, ...]] = REGISTRY, keyed: dict[str, str] | None = None
                ) -> Iterator[Env]:  # fmt: skip
    """A store with `policy` active and every party of `registry` registered, each with one token.

    `keyed` (party -> role) registers those with their test key (`tests.signed_bundles.key`), as approvers.
    """
    from pactwright.signing import raw_public_key
    from tests.signed_bundles import key

    with store_with_policy(backend, directory, policy) as url:
        tokens, ids = {}, {}
        with open_store(url) as store:
            for party, role in (keyed or {}).items():
                add_party(store, party, role, raw_public_key(key(party).private.public_key()), T0)
            for party, roles in {**registry, **dict.fromkeys(keyed or {}, ())}.items():
                for role in roles:
                    add_party(store, party, role, None, T0)
                issued = issue_token(store, party, T0)
                tokens[party], ids[party] = issued.token, issued.token_id
        yield Env(url, str(directory / "ledger.sqlite"), tokens, ids, TestClock(T0))


def problem_of(response: httpx2.Response, status: int, code: str) -> dict[str, Any]:
    """The response's problem document, checked: its status, media type, shape and code."""
    assert response.status_code == status, (response.status_code, response.text)
    assert response.headers["content-type"] == "application/problem+json", response.headers
    doc: dict[str, Any] = response.json()
    assert doc["code"] == code, doc
    assert doc["status"] == status
    assert {"type", "title", "status", "detail", "code"} <= set(doc), doc
    assert doc["type"] == f"urn:pactwright:error:{code.lower()}"
    assert "Traceback" not in response.text
    return doc


def test_openapi_is_3_1_and_documents_every_mounted_route(tmp_path: Path) -> None:
    from starlette.routing import Route

    app = create_app(str(tmp_path / "none.db"))
    with TestClient(app) as client:
        doc = client.get("/openapi.json").json()
    assert doc["openapi"] == "3.1.0"
    mounted = {(r.path.replace(":path", ""), m) for r in app.routes if isinstance(r, Route) for m in r.methods or ()
               if m != "HEAD" and r.path != "/openapi.json"}  # fmt: skip
    documented = {(path, method.upper()) for path, ops in doc["paths"].items() for method in ops}
    assert mounted == documented
    for path, ops in doc["paths"].items():
        for method, op in ops.items():
            for status, response in op["responses"].items():
                ((media, content),) = response["content"].items()
                if int(status) >= 400:
                    assert media == "application/problem+json", (path, method, status)
                    assert content["schema"] == {"$ref": "#/components/schemas/Problem"}
            if path.startswith(("/v1/", "/review/")):
                assert op["security"] == [{"bearer": []}], path
                assert "401" in op["responses"], path
    # every reference resolves inside the document
    text = json.dumps(doc)
    refs = {part.split('"')[0] for part in text.split('"$ref": "#/components/schemas/')[1:]}
    assert refs <= set(doc["components"]["schemas"]), refs - set(doc["components"]["schemas"])


def test_openapi_validates_as_a_3_1_document(tmp_path: Path) -> None:
    """The document is valid against the OpenAPI 3.1 meta-schema (as schemathesis will load it)."""
    from jsonschema import Draft202012Validator

    with TestClient(create_app(str(tmp_path / "none.db"))) as client:
        doc = client.get("/openapi.json").json()
    for name, schema in doc["components"]["schemas"].items():
        Draft202012Validator.check_schema(schema)
        assert schema.get("type") == "object" or "$ref" in schema or "anyOf" in schema, name
    money = doc["components"]["schemas"]["SubmitCommand"]["properties"]["params"]
    assert money["additionalProperties"] == {"type": "string"}
