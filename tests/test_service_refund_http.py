"""The refund scenario over HTTP: a lost provider response parked, listed and reconciled through the API.

Against a live `pactwright serve` (a real process; PostgreSQL store) and the
provider simulator (runtime/provider_sim.py) on loopback: the support agent
opens a refund, the assistant assesses it, `issue` parks for the refund
approver, who grants it with a signed proof; all over HTTP. Then
`pactwright worker --drain --providers` (a real process) sends the refund,
the simulator applies it and drops the answer (`lost_response`), and the
lookup that follows is unanswered too (`lookup_unknown`): the call parks as
`needs_reconciliation`. Through the API only: `GET /v1/effects?parked=true`
lists exactly that call; a non-operator's reconcile is refused and writes
nothing; the operator's `POST /v1/effects/{id}/reconcile` records the
provider's reference; the call leaves the parked list; and the evidence
says the refund was found at the provider by reconciliation, with that
reference, while its hash chain still verifies. The provider applied the
refund exactly once.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx2

from pactwright.runtime.approvals import decision_statement
from pactwright.runtime.provider_sim import start_simulator
from pactwright.signing import sign_statement
from tests.effect_env import providers_file
from tests.signed_bundles import ROOT, dump, key
from tests.test_service_env import T0, problem_of, service_env
from tests.test_service_process import serving

SUPPORT = ROOT / "policies" / "support_refund.pact"
PARTIES = {"support_agent": "sam", "refund_approver": "rita", "assistant": "bot"}
OPEN = {"pact_id": "support.refund", "id": "r1", "parties": PARTIES,
        "params": {"amount": "64.90", "order_id": "ORD-1001", "reason": "damaged_on_arrival"}}  # fmt: skip
REGISTRY: dict[str, tuple[str, ...]] = {"sam": ("support_agent",), "bot": ("assistant",), "ops": ("operator",)}


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pactwright.cli.main", *args], capture_output=True, text=True,
                          timeout=120, check=False)  # fmt: skip


def _granted(client: httpx2.Client, auth: Any) -> dict[str, Any]:
    """Open r1, assess it, park `issue` and grant it with rita's signed proof: the committed refund command."""
    assert client.post("/v1/agreements", json=OPEN, headers=auth("sam")).status_code == 201
    assessed = client.post("/v1/agreements/r1/commands", json={"transition": "assess", "role": "assistant"},
                           headers={**auth("bot"), "Idempotency-Key": "assess"})  # fmt: skip
    assert assessed.status_code == 201, assessed.text
    parked = client.post("/v1/agreements/r1/commands", json={"transition": "issue", "role": "support_agent"},
                         headers={**auth("sam"), "Idempotency-Key": "issue"})  # fmt: skip
    assert parked.status_code == 202, parked.text
    request = parked.json()["approval"]
    proof = sign_statement(key("rita").private, decision_statement(request["id"], request["preview_digest"], "grant"))
    granted = client.post(f"/v1/approvals/{request['id']}/grant", json={"proof": proof}, headers=auth("rita"))
    assert granted.status_code == 200, granted.text
    result: dict[str, Any] = granted.json()["result"]
    return result


def test_a_lost_refund_response_is_parked_listed_and_reconciled_through_the_api(tmp_path: Path) -> None:
    clock = tmp_path / "clock"
    clock.write_text(f"{T0 + 30}\n")
    keyed = {"rita": "refund_approver"}
    with start_simulator() as sim, service_env("postgresql", tmp_path, SUPPORT, REGISTRY, keyed=keyed) as env:
        command = [sys.executable, "-m", "pactwright.cli.main", "serve", "--store", env.store, "--ledger", env.ledger,
                   "--port", "0", "--clock-file", str(clock)]  # fmt: skip
        with serving(command) as (base, _), httpx2.Client(base_url=base, timeout=30) as client:
            result = _granted(client, env.auth)
            assert (result["state"], [c["effect"] for c in result["effects"]]) == ("refunded", ["refund_payment"])

            sim.queue("lost_response", "lookup_unknown")
            worked = _cli("worker", "--store", env.store, "--ledger", env.ledger, "--drain", "--providers",
                          str(providers_file(tmp_path, sim.url)), "--clock-file", str(clock))  # fmt: skip
            assert worked.returncode == 0, worked.stderr
            assert "needs_reconciliation" in worked.stdout, worked.stdout
            refunds = [r for r in sim.state()["records"] if r["path"] == "/refunds"]
            assert len(refunds) == 1  # the provider applied it; only its answer was lost

            parked = client.get("/v1/effects?parked=true", headers=env.auth("ops"))
            assert parked.status_code == 200, parked.text
            ((call,),) = [parked.json()["data"]]
            assert (call["effect"], call["phase"], call["parked"], call["amount"]) == (
                "refund_payment",
                "needs_reconciliation",
                True,
                "6490",
            )
            assert call["provider_ref"] is None and call["resolution"] is None

            before = dump(env.store)
            url = f"/v1/effects/{call['id'].replace('/', '%2F')}/reconcile"
            body = {"resolution": "recovered_acknowledgement", "provider_ref": refunds[0]["id"]}
            problem_of(client.post(url, json=body, headers=env.auth("sam")), 403, "PW672")
            problem_of(client.post(url, json={"resolution": "not_occurred", "provider_ref": "x"},
                                   headers=env.auth("ops")), 422, "PW643")  # fmt: skip
            assert dump(env.store) == before

            reconciled = client.post(url, json=body, headers=env.auth("ops"))
            assert reconciled.status_code == 200, reconciled.text
            doc = reconciled.json()
            assert (doc["id"], doc["phase"], doc["parked"]) == (call["id"], "reconciled_recovered", False)
            assert (doc["provider_ref"], doc["resolution"], doc["resolved_by"]) == (
                refunds[0]["id"],
                "recovered_acknowledgement",
                "ops",
            )
            assert client.get("/v1/effects?parked=true", headers=env.auth("ops")).json()["data"] == []
            again = client.post(url, json=body, headers=env.auth("ops"))
            problem_of(again, 409, "PW642")  # resolved once: nothing left to resolve

            evidence = client.get("/v1/agreements/r1/evidence", headers=env.auth("sam"))
            assert evidence.status_code == 200, evidence.text
            claims = {c["instance"]: c for c in evidence.json()["claim"]["effects"]}
            claim = claims[call["id"]]
            assert (claim["phase"], claim["amount"]) == ("reconciled_recovered", "6490")
            assert claim["claim"] == (
                "a 64.90 EUR `refund_payment` call was authorised by rita holding refund_approver and found at the "
                f"provider by reconciliation (provider ref {refunds[0]['id']}); resolved `recovered_acknowledgement` "
                "by operator ops"
            )
            verified = client.get("/v1/agreements/r1/evidence/verification", headers=env.auth("sam")).json()
            assert verified["verifies"] is True and verified["problems"] == []
        assert len([r for r in sim.state()["records"] if r["path"] == "/refunds"]) == 1
