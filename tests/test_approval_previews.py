"""Approvals with previews, on both backends: park, show, grant once, and every refusal on the way.

The reference support refund policy (policies/support_refund.pact) says
`issue` needs `approval by refund_approver not requester` and calls
`refund_payment`. `submit` parks it with a preview; the approver (rita, whose
ed25519 key is in the store's party registry) grants it by signing the
preview digest, which commits the command with one `prepared` effect row.

Each way a grant can be wrong is refused with its own code and changes
nothing (the whole store is dumped before and after): unknown, expired,
replayed, another preview digest, the requester approving, a party without
the role, no registered key, a bad signature, an altered stored preview, and
the loser of two grants racing from two real OS processes. The base64 proof
never appears anywhere in the store or the evidence, only its digest.
"""

from __future__ import annotations

import json
import multiprocessing
import subprocess
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from pactwright.canonical import canonical_bytes, hash_bytes
from pactwright.errors import PactwrightError
from pactwright.runtime import SubmitResult, TestClock, approvals, evidence, open_agreement, submit, verify_evidence
from pactwright.runtime.commands import Command, Grant, run_in
from pactwright.runtime.parties import OPERATOR, add_party, holds, key_for, list_parties
from pactwright.runtime.store import Store, open_store
from pactwright.signing import decode_b64, encode_b64, raw_public_key, sign_statement
from tests.signed_bundles import BACKENDS, dump
from tests.test_runtime_approvals import PACT_ID, T0, _store

PARAMS = {"amount": "64.90", "order_id": "ORD-1001", "reason": "damaged_on_arrival"}
PARTIES = {"support_agent": "sam", "refund_approver": "rita", "assistant": "bot"}
CONSEQUENCE = "64.90 EUR will be returned to the customer's card for order ORD-1001."
PARKED_AT = T0 + 20


@cache
def key(name: str) -> Ed25519PrivateKey:
    return Ed25519PrivateKey.generate()


def public(name: str) -> bytes:
    return raw_public_key(key(name).public_key())


@pytest.fixture(params=BACKENDS)
def url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    yield from _store(request.param, tmp_path)


def _park(store: Store, agreement_id: str = "r1", parties: dict[str, str] = PARTIES, *,
          register: bool = True) -> dict[str, Any]:  # fmt: skip
    """Open, assess, and submit `issue`: returns the parked approval request (its JSON)."""
    open_agreement(store, PACT_ID, PARAMS, parties, agreement_id=agreement_id, clock=TestClock(T0))
    submit(store, agreement_id, "assess", "assistant", "bot", "assess", clock=TestClock(T0 + 10))
    if register:
        approver = parties["refund_approver"]
        add_party(store, approver, "refund_approver", public(approver), T0)
    result = submit(store, agreement_id, "issue", "support_agent", "sam", "issue", clock=TestClock(PARKED_AT))
    assert result.status == "waiting_for_approval" and result.approval is not None
    return result.approval


def proof(request: dict[str, Any], signer: str = "rita", decision: str = "grant") -> str:
    statement = approvals.decision_statement(request["id"], request["preview_digest"], decision)
    return sign_statement(key(signer), statement)


def _refunds(store: Store) -> list[tuple[Any, ...]]:
    with store.transaction(write=False) as db:
        return db.query(
            "SELECT id, phase, payload_digest, payload FROM effects WHERE effect = 'refund_payment' ORDER BY id"
        )


def _evidence_records(store: Store, agreement_id: str = "r1") -> list[dict[str, Any]]:
    with store.transaction(write=False) as db:
        found = db.query("SELECT record FROM evidence WHERE agreement_id = ? ORDER BY seq", (agreement_id,))
    return [json.loads(str(r[0])) for r in found]


def _refused(store: Store, url: str, code: str, call: Any) -> PactwrightError:
    """`call()` must raise `code`, change no row of the store, and leave nothing dispatched."""
    before = dump(url)
    with pytest.raises(PactwrightError) as caught:
        call()
    assert caught.value.code == code, caught.value
    assert dump(url) == before
    assert _refunds(store) == []
    return caught.value


# Park and preview --------------------------------------------------------------------------


def test_issue_parks_with_a_preview_of_what_will_be_sent(url: str) -> None:
    with open_store(url) as store:
        request = _park(store)
        preview = request["preview"]
        assert request["id"].startswith("apr-") and len(request["id"]) == 20
        assert request["preview_digest"] == hash_bytes(canonical_bytes(preview))
        assert preview["consequence"] == [CONSEQUENCE]
        assert preview["operation"] == {"transition": "issue", "from": "assessed", "to": "refunded",
                                        "effects": ["refund_payment"]}  # fmt: skip
        assert preview["target"] == {
            "accounts": {"customer": "customers:ORD-1001:card", "merchant": "merchant:refunds"},
            "destinations": [{"effect": "refund_payment", "destination": "POST https://api.payments.example.com"}],
        }
        assert [p["amount"] for p in preview["postings"]] == ["64.90 EUR"]
        (call,) = preview["calls"]
        assert (call["reversibility"], call["risk"], call["amount"]) == ("irreversible", "R4", "64.90 EUR")
        assert call["payload_digest"] == hash_bytes(call["body"].encode("utf-8"))
        assert json.loads(call["body"])["params"]["amount"] == "64.90"
        assert preview["requested_by"] == {"role": "support_agent", "party": "sam"}
        assert (preview["requested_at"], preview["expires_at"]) == (PARKED_AT, PARKED_AT + approvals.APPROVAL_TTL_S)
        with store.transaction(write=False) as db:
            assert db.query("SELECT manifest_hash FROM agreements WHERE id = 'r1'")[0][0] == preview["manifest_hash"]
            assert [r[0] for r in db.query("SELECT transition FROM events ORDER BY seq")] == ["assess"]
        assert _refunds(store) == []
        requested = [r for r in _evidence_records(store) if r["kind"] == "approval_requested"]
        assert [(r["approval"], r["preview_digest"]) for r in requested] == [(request["id"], request["preview_digest"])]
        assert verify_evidence(store, "r1").ok
        # Submitting the same command again is answered with the same request.
        again = submit(store, "r1", "issue", "support_agent", "sam", "issue", clock=TestClock(PARKED_AT + 5))
        assert again.approval == request


def test_the_same_key_for_another_command_is_refused(url: str) -> None:
    with open_store(url) as store:
        _park(store)
        restated = {"amount": "64.90"}  # another payload than the parked `{}`, though the same amount
        _refused(store, url, "PW610", lambda: submit(store, "r1", "issue", "support_agent", "sam", "issue",
                                                     params=restated, clock=TestClock(PARKED_AT)))  # fmt: skip


def test_a_grant_commits_the_parked_command_once(url: str) -> None:
    with open_store(url) as store:
        request = _park(store)
        signature = proof(request)
        result = approvals.grant(store, request["id"], "rita", signature, TestClock(PARKED_AT + 30))
        assert (result.status, result.state, result.version) == ("committed", "refunded", 2)
        (refund,) = _refunds(store)
        assert refund[1] == "prepared"
        assert refund[2] == request["preview"]["calls"][0]["payload_digest"] == hash_bytes(str(refund[3]).encode())
        decided = approvals.get_request(store, request["id"])
        assert (decided.status, decided.decided_by, decided.event_id) == ("consumed", "rita", result.event_id)
        signature_bytes = decode_b64(signature)
        assert signature_bytes is not None and decided.proof_digest == hash_bytes(signature_bytes)
        with store.transaction(write=False) as db:
            consumed = db.query("SELECT id, approver_party, consumed_event_id FROM approvals")
        assert consumed == [(request["id"], "rita", result.event_id)]
        granted = [r for r in _evidence_records(store) if r["kind"] == "approval_granted"]
        assert len(granted) == 1 and granted[0]["proof_digest"] == decided.proof_digest
        assert granted[0]["approver"] == {"role": "refund_approver", "party": "rita"}
        assert granted[0]["preview_digest"] == request["preview_digest"]
        report = evidence(store, "r1")
        assert report.chain.ok
        # The proof itself is nowhere: not in any row, not in the evidence.
        assert signature not in repr(dump(url))
        assert signature not in json.dumps(report.to_json()) and signature not in report.text()
        # A retry of the submit is answered from the key, not parked again.
        again = submit(store, "r1", "issue", "support_agent", "sam", "issue", clock=TestClock(PARKED_AT + 40))
        assert again.replayed and again.event_id == result.event_id


# Refusals ------------------------------------------------------------------------------------


def test_unknown_expired_and_replayed_grants_are_refused(url: str) -> None:
    with open_store(url) as store:
        request = _park(store)
        expires = request["expires_at"]
        _refused(store, url, "PW601", lambda: approvals.grant(store, "apr-0000000000000000", "rita", proof(request),
                                                              TestClock(PARKED_AT)))  # fmt: skip
        _refused(store, url, "PW602", lambda: approvals.grant(store, request["id"], "rita", proof(request),
                                                              TestClock(expires + 1)))  # fmt: skip
        approvals.grant(store, request["id"], "rita", proof(request), TestClock(expires))  # the last second counts
        before = dump(url)
        with pytest.raises(PactwrightError) as caught:
            approvals.grant(store, request["id"], "rita", proof(request), TestClock(expires))
        assert caught.value.code == "PW604" and dump(url) == before
        assert len(_refunds(store)) == 1


def test_a_grant_for_another_preview_digest_is_refused_by_the_command_path(url: str) -> None:
    with open_store(url) as store:
        request = _park(store)
        forged = Grant(request["id"], "refund_approver", "rita", "sha256:" + "0" * 64, request["expires_at"],
                       request["created_at"])  # fmt: skip
        command = Command("issue", "support_agent", "sam", "issue", {})

        def run() -> SubmitResult:
            with store.transaction(exclusive=False) as db:
                return run_in(store, db, "r1", command, PARKED_AT + 30, grant=forged)

        error = _refused(store, url, "PW603", run)
        assert error.found == request["preview_digest"]
        # The request's times are part of what was seen: another expiry is another preview.
        stretched = Grant(request["id"], "refund_approver", "rita", request["preview_digest"],
                          request["expires_at"] + 3600, request["created_at"])  # fmt: skip
        forged = stretched
        _refused(store, url, "PW603", run)
        assert approvals.get_request(store, request["id"]).status == "pending"


def test_the_requester_may_not_approve_their_own_command(url: str) -> None:
    with open_store(url) as store:
        request = _park(store, "r2", {**PARTIES, "refund_approver": "sam"})
        _refused(store, url, "PW607", lambda: approvals.grant(store, request["id"], "sam", proof(request, "sam"),
                                                              TestClock(PARKED_AT + 30)))  # fmt: skip


def test_a_party_without_the_role_or_without_a_registered_key_is_refused(url: str) -> None:
    with open_store(url) as store:
        request = _park(store, register=False)
        # mallory registered a key for the role, but does not hold it in this agreement.
        add_party(store, "mallory", "refund_approver", public("mallory"), T0)
        signed = proof(request, "mallory")
        _refused(store, url, "PW605", lambda: approvals.grant(store, request["id"], "mallory", signed,
                                                              TestClock(PARKED_AT + 30)))  # fmt: skip
        # rita holds it, but the registry has no key of hers for it (an operator key is not one).
        add_party(store, "rita", OPERATOR, public("rita"), T0)
        _refused(store, url, "PW606", lambda: approvals.grant(store, request["id"], "rita", proof(request),
                                                              TestClock(PARKED_AT + 30)))  # fmt: skip


@pytest.mark.parametrize(
    "make",
    [
        lambda r: proof(r, signer="mallory"),  # another key
        lambda r: proof(r, decision="reject"),  # the reject statement
        lambda r: sign_statement(key("rita"), approvals.decision_statement(r["id"], "sha256:" + "1" * 64, "grant")),
        lambda r: sign_statement(key("rita"), approvals.decision_statement("apr-other", r["preview_digest"], "grant")),
        lambda r: "not base64!",
        lambda r: encode_b64(b"\x00" * 64),
        lambda r: "A" * 10_000,
    ],
    ids=["other-key", "reject-statement", "other-digest", "other-request", "garbage", "zero-signature", "huge"],
)
def test_a_bad_signature_is_refused(url: str, make: Any) -> None:
    with open_store(url) as store:
        request = _park(store)
        _refused(store, url, "PW608", lambda: approvals.grant(store, request["id"], "rita", make(request),
                                                              TestClock(PARKED_AT + 30)))  # fmt: skip


def test_an_altered_stored_preview_is_refused(url: str) -> None:
    with open_store(url) as store:
        request = _park(store)
        stored = canonical_bytes(request["preview"]).decode("utf-8")
        changed = stored.replace("64.90 EUR will", "6.49 EUR will")
        with store.transaction() as db:
            db.execute("UPDATE approval_requests SET preview = ? WHERE id = ?", (changed, request["id"]))
        grant = lambda: approvals.grant(store, request["id"], "rita", proof(request), TestClock(PARKED_AT + 30))  # noqa: E731
        _refused(store, url, "PW609", grant)
        _refused(store, url, "PW609", lambda: approvals.get_request(store, request["id"]))
        # Re-hashed to match (so the approver is shown, and signs, the altered digest): the command
        # path recomputes the preview from the agreement and refuses it.
        digest = hash_bytes(changed.encode("utf-8"))
        with store.transaction() as db:
            db.execute("UPDATE approval_requests SET preview_digest = ? WHERE id = ?", (digest, request["id"]))
        shown = approvals.get_request(store, request["id"])
        assert shown.preview["consequence"] == ["6.49 EUR will be returned to the customer's card for order ORD-1001."]
        _refused(store, url, "PW603", lambda: approvals.grant(store, request["id"], "rita", proof(shown.to_json()),
                                                              TestClock(PARKED_AT + 30)))  # fmt: skip


def test_a_rejected_request_never_runs(url: str) -> None:
    with open_store(url) as store:
        request = _park(store)
        _refused(store, url, "PW608", lambda: approvals.reject(store, request["id"], "rita", proof(request),
                                                               TestClock(PARKED_AT + 30)))  # fmt: skip
        rejected = approvals.reject(store, request["id"], "rita", proof(request, decision="reject"),
                                    TestClock(PARKED_AT + 30))  # fmt: skip
        assert rejected.status == "rejected" and approvals.get_request(store, request["id"]).status == "rejected"
        _refused(store, url, "PW604", lambda: approvals.grant(store, request["id"], "rita", proof(request),
                                                              TestClock(PARKED_AT + 40)))  # fmt: skip
        _refused(store, url, "PW604", lambda: submit(store, "r1", "issue", "support_agent", "sam", "issue",
                                                     clock=TestClock(PARKED_AT + 40)))  # fmt: skip
        assert [r["kind"] for r in _evidence_records(store)][-1] == "approval_rejected"
        assert verify_evidence(store, "r1").ok


# Two real processes granting at once -------------------------------------------------------


def _grant_in_child(url: str, request_id: str, signature: str, barrier: Any, out: Any) -> None:
    with open_store(url) as store:
        barrier.wait()
        try:
            result = approvals.grant(store, request_id, "rita", signature, TestClock(PARKED_AT + 30))
            out.put(("committed", result.event_id))
        except PactwrightError as exc:
            out.put(("refused", exc.code))


def test_two_concurrent_grants_consume_the_request_once(url: str) -> None:
    with open_store(url) as store:
        request = _park(store)
    context = multiprocessing.get_context("spawn")
    barrier, out = context.Barrier(2), context.Queue()
    children = [context.Process(target=_grant_in_child, args=(url, request["id"], proof(request), barrier, out))
                for _ in range(2)]  # fmt: skip
    for child in children:
        child.start()
    outcomes = sorted(out.get(timeout=120) for _ in children)
    for child in children:
        child.join(timeout=60)
        assert child.exitcode == 0
    assert outcomes == [("committed", "r1/2"), ("refused", "PW604")]
    with open_store(url) as store:
        assert len(_refunds(store)) == 1
        assert approvals.get_request(store, request["id"]).event_id == "r1/2"


# Dry run -----------------------------------------------------------------------------------


def test_a_dry_run_shows_the_request_it_would_send_and_writes_nothing(url: str) -> None:
    with open_store(url) as store:
        open_agreement(store, PACT_ID, PARAMS, PARTIES, agreement_id="r1", clock=TestClock(T0))
        submit(store, "r1", "assess", "assistant", "bot", "assess", clock=TestClock(T0 + 10))
        before = dump(url)
        command = Command("issue", "support_agent", "sam", "issue", {})
        result, requests = approvals.dry_run(store, "r1", command, TestClock(PARKED_AT))
        assert dump(url) == before
        assert result.dry_run and result.status == "waiting_for_approval"
        assert result.approval is not None and not result.approval["recorded"]
        (sent,) = requests
        assert (sent["method"], sent["url"]) == ("POST", "https://api.payments.example.com")
        assert sent["payload_digest"] == hash_bytes(sent["body"].encode("utf-8"))
        assert sent["payload_digest"] == result.approval["preview"]["calls"][0]["payload_digest"]
        assert sent["idempotency_key"] == result.effects[0]["idempotency_key"]


# Party registry ----------------------------------------------------------------------------


def test_the_party_registry(url: str) -> None:
    with open_store(url) as store:
        first = add_party(store, "rita", "refund_approver", public("rita"), T0)
        assert add_party(store, "rita", "refund_approver", public("rita"), T0 + 99) == first  # idempotent
        add_party(store, "olga", OPERATOR, None, T0)
        for code, call in [
            ("PW612", lambda: add_party(store, "rita", "refund_approver", public("mallory"), T0)),
            ("PW612", lambda: add_party(store, "rita", "refund_approver", None, T0)),
            ("PW611", lambda: add_party(store, "rita", "Refund-Approver", None, T0)),
            ("PW611", lambda: add_party(store, " rita", "refund_approver", None, T0)),
            ("PW613", lambda: add_party(store, "eve", "refund_approver", b"\x01" + b"\x00" * 31, T0)),
            ("PW613", lambda: add_party(store, "eve", "refund_approver", b"short", T0)),
        ]:
            _refused(store, url, code, call)
        assert [(p.party, p.role) for p in list_parties(store)] == [("olga", "operator"), ("rita", "refund_approver")]
        with store.transaction(write=False) as db:
            assert holds(db, "olga", OPERATOR) and not holds(db, "rita", OPERATOR)
            assert key_for(db, "rita", "refund_approver") == public("rita") and key_for(db, "olga", OPERATOR) is None


# The command line --------------------------------------------------------------------------


def _cli(cli: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(cli), *args], capture_output=True, text=True, timeout=120, check=False)


def test_the_approval_commands_end_to_end(cli: Path, tmp_path: Path) -> None:
    from pactwright.keys import generate_key_files

    url = next(_store("sqlite", tmp_path))
    with open_store(url) as store:
        open_agreement(store, PACT_ID, PARAMS, PARTIES, agreement_id="r1", clock=TestClock(T0))
        submit(store, "r1", "assess", "assistant", "bot", "assess", clock=TestClock(T0 + 10))
    files = generate_key_files(tmp_path / "rita")
    clock = tmp_path / "clock"
    clock.write_text(f"{PARKED_AT}\n")
    common = ("--store", url, "--clock-file", str(clock))
    added = _cli(cli, "parties", "add", "rita", "--role", "refund_approver", "--public-key", str(files.public_path),
                 *common)  # fmt: skip
    assert added.returncode == 0 and files.keyid in added.stdout, added.stderr
    before = dump(url)
    dry = _cli(cli, "submit", "r1", "issue", "--as", "support_agent:sam", "--key", "issue", "--dry-run", *common)
    assert dry.returncode == 0, dry.stderr
    assert dump(url) == before
    for text in (CONSEQUENCE, "POST https://api.payments.example.com", "Idempotency-Key: pw-", '"amount":"6490"',
                 "nothing was sent and nothing was written"):  # fmt: skip
        assert text in dry.stdout, text
    parked = _cli(cli, "submit", "r1", "issue", "--as", "support_agent:sam", "--key", "issue", *common)
    assert parked.returncode == 0 and "waiting for approval apr-" in parked.stdout and CONSEQUENCE in parked.stdout
    request_id = parked.stdout.split("waiting for approval ", 1)[1].split(":", 1)[0]
    listed = _cli(cli, "approvals", "list", "--status", "pending", *common)
    assert listed.returncode == 0 and request_id in listed.stdout and "1 requests" in listed.stdout
    shown = _cli(cli, "approvals", "show", request_id, "--store", url, "--format", "json")
    assert json.loads(shown.stdout)["preview"]["consequence"] == [CONSEQUENCE]
    wrong = _cli(cli, "approvals", "grant", request_id, "--key", str(files.private_path), "--as", "sam", *common)
    assert wrong.returncode == 1 and wrong.stderr.startswith("error[PW605]"), wrong.stderr
    granted = _cli(cli, "approvals", "grant", request_id, "--key", str(files.private_path), "--as", "rita", *common)
    assert granted.returncode == 0, granted.stderr
    assert "committed r1/2 issue -> refunded" in granted.stdout
    again = _cli(cli, "approvals", "grant", request_id, "--key", str(files.private_path), "--as", "rita", *common)
    assert again.returncode == 1 and again.stderr.startswith("error[PW604]")
    shown = _cli(cli, "approvals", "show", request_id, *common)
    assert "consumed" in shown.stdout and "proof digest sha256:" in shown.stdout
    # ed25519 signatures are deterministic: this is the exact proof the CLI made and sent.
    from pactwright.keys import load_private_key

    with open_store(url) as store:
        request = approvals.get_request(store, request_id)
        signature = sign_statement(load_private_key(files.private_path), request.statement("grant"))
        assert request.proof_digest == hash_bytes(decode_b64(signature) or b"")
        everything = repr(dump(url)) + json.dumps(evidence(store, "r1").to_json()) + evidence(store, "r1").text()
    assert signature not in everything
    for output in (dry, parked, listed, shown, granted, again):
        assert signature not in output.stdout + output.stderr
