"""The review pages as `serve` answers them: HTML for a stored bundle and for an agreement, behind a token."""

from __future__ import annotations

from pathlib import Path

from tests.test_service_env import OPEN_BODY, problem_of, service_env


def test_review_pages_are_served_for_a_stored_bundle_and_an_agreement(tmp_path: Path) -> None:
    with service_env("sqlite", tmp_path) as env, env.client() as client:
        assert client.post("/v1/agreements", json=OPEN_BODY, headers=env.auth("alice")).status_code == 201
        assert client.post("/v1/agreements/a1/commands", json={"transition": "fund", "role": "buyer"},
                           headers={**env.auth("alice"), "Idempotency-Key": "k1"}).status_code == 201  # fmt: skip
        manifest = client.get("/v1/bundles", headers=env.auth("alice")).json()["data"][0]["manifest_hash"]

        problem_of(client.get(f"/review/bundles/{manifest}"), 401, "PW670")
        bundle = client.get(f"/review/bundles/{manifest}", headers=env.auth("alice"))
        assert bundle.status_code == 200, bundle.text
        assert bundle.headers["content-type"] == "text/html; charset=utf-8"
        assert "marketplace.milestone" in bundle.text
        assert manifest in bundle.text
        problem_of(client.get(f"/review/bundles/{'0' * 64}", headers=env.auth("alice")), 404, "PW710")

        page = client.get("/review/agreements/a1", headers=env.auth("bob"))
        assert page.status_code == 200, page.text
        assert page.headers["content-type"] == "text/html; charset=utf-8"
        assert "a1/1" in page.text  # the committed event
        problem_of(client.get("/review/agreements/nope", headers=env.auth("bob")), 404, "PW501")
