"""Evidence on both backends: the claim and its limits, and every kind of tampering with its own code.

Each tampering case edits the chain where it is stored (`evidence` rows,
and since store migration 15 the event rows, from which the events' records
are derived) directly through the store's own connection (as an attacker
with database access would), then
`pactwright evidence verify` must exit 1 and name the case's code first.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from pactwright.canonical import canonical_bytes, hash_bytes
from pactwright.runtime import TestClock, submit
from pactwright.runtime.evidence import evidence, verify_evidence
from pactwright.runtime.store import open_store
from pactwright.runtime.store._backend import Backend
from tests import _chain_tamper as chain_tamper
from tests.signed_bundles import PACT_ID, dump, temporary_store
from tests.test_runtime_commands import T0, _cli, _delivered, url

__all__ = ["url"]  # the fixture, reused from the command tests


def _released(store_url: str) -> None:
    _delivered(store_url)
    with open_store(store_url) as store:
        submit(store, "a1", "release", "buyer", "alice", "release", clock=TestClock(T0 + 120))


def test_the_evidence_states_claim_support_and_limits(url: str, capsys: pytest.CaptureFixture[str]) -> None:
    _released(url)
    before = dump(url)
    code, out, err = _cli("evidence", "a1", "--store", url, "--format", "json", capsys=capsys)
    assert code == 0, err
    doc = json.loads(out)
    assert doc["format"] == "pactwright.evidence/1" and doc["pact"] == {"id": PACT_ID, "version": "1.0.0"}
    claim, sup = doc["claim"], doc["supports"]
    assert [e["transition"] for e in claim["events"]] == ["fund", "deliver", "release"]
    release = claim["events"][2]
    assert release["actor"] == "buyer:alice" and release["committed_at"] == T0 + 120
    assert [(p["destination"], p["amount"], p["amount_text"], p["reference"]) for p in release["postings"]] == [
        ("platform", "649", "6.49 EUR", "a1/3/0"), ("seller", "5841", "58.41 EUR", "a1/3/0")]  # fmt: skip
    assert claim["params"]["price"]["text"] == "64.90 EUR" and claim["params"]["refund_window"]["text"] == "14d"
    assert claim["balances"]["escrow"] == {"minor": "0", "text": "0.00 EUR"} and claim["final"]
    assert sup["event_ids"] == ["a1/1", "a1/2", "a1/3"]
    assert sup["manifest_hash"].startswith("sha256:")
    assert sup["evidence_chain"]["verifies"] and sup["evidence_chain"]["records"] == 4
    assert [(e["reference"], e["status"]) for e in sup["ledger"]] == [("a1/1/0", "pending"), ("a1/3/0", "pending")]
    limits = " | ".join(doc["does_not_prove"])
    for phrase in ("parties are who they claim", "money reached anyone outside the ledger", "`world`",
                   "policy matches the contract", "`a1/3/0` reached the ledger", "verification report"):  # fmt: skip
        assert phrase in limits, phrase
    code, text, _ = _cli("evidence", "a1", "--store", url, capsys=capsys)
    assert code == 0
    assert "claim:" in text and "supported by:" in text and "does not prove:" in text
    assert "escrow (escrow:a1) -> seller (sellers:bob:payable)  58.41 EUR  ref a1/3/0" in text
    code, text, _ = _cli("evidence", "verify", "a1", "--store", url, capsys=capsys)
    assert code == 0 and text.startswith("evidence of a1 verifies: 4 records, head sha256:")
    head = text.split("head ")[1].strip()
    assert _cli("evidence", "verify", "a1", "--store", url, "--head", head, capsys=capsys)[0] == 0
    assert dump(url) == before  # evidence only reads


def _settled(store_url: str, ledger_url: str) -> None:
    """a1 released and both outbox entries delivered: records 0 `opened` and 4, 5 `delivered` are `evidence`
    rows; records 1-3 are the events', held by their event rows (store migration 15)."""
    from pactwright.runtime import Worker
    from pactwright.runtime.ledger_db import open_ledger

    _released(store_url)
    with open_store(store_url) as store:
        ledger = open_ledger(ledger_url, store_url)
        try:
            assert [o.status for o in Worker(store, ledger, TestClock(T0 + 200)).drain()] == ["delivered"] * 2
        finally:
            ledger.close()
        assert verify_evidence(store, "a1").ok


def _edit_keep_hash(db: Backend) -> None:
    """Event a1/1's payload (which its record is derived from) edited, its stored hash kept."""
    db.execute("UPDATE events SET payload = REPLACE(payload, '\"6490\"', '\"6400\"') WHERE event_id = 'a1/1'")


def _not_canonical(db: Backend) -> None:
    db.execute("UPDATE events SET payload = payload || ' ' WHERE event_id = 'a1/2'")


def _rehash(db: Backend, seq: int) -> None:
    """Record `seq` edited (the buyer's name, or a delivered amount) and re-hashed; the records after it left."""
    record = chain_tamper.record_at(db, seq)
    edited = json.loads(json.dumps(record).replace('"alice"', '"mallory"', 1).replace('"5841"', '"5800"', 1))
    assert edited != record
    chain_tamper.write(db, edited, hash_bytes(canonical_bytes(edited)))


def _swap(db: Backend) -> None:
    """The two `delivered` records exchange their places (rows 4 and 5)."""
    for old, new in ((4, 100), (5, 4), (100, 5)):
        db.execute("UPDATE evidence SET seq = ? WHERE agreement_id = 'a1' AND seq = ?", (new, old))


def _cut_last_event(db: Backend) -> None:
    """Event a1/3 (`release`) gone with its outbox entry and every record after it: the log ends at 2, the row at 3."""
    db.execute("DELETE FROM evidence WHERE agreement_id = 'a1' AND seq >= 4")
    db.execute("DELETE FROM outbox WHERE reference = 'a1/3/0'")
    db.execute("DELETE FROM events WHERE event_id = 'a1/3'")


def _delete_all(db: Backend) -> None:
    db.execute("DELETE FROM evidence WHERE agreement_id = 'a1'")
    db.execute("UPDATE events SET evidence_seq = NULL, evidence_prev = NULL, evidence_hash = NULL "
               "WHERE agreement_id = 'a1'")  # fmt: skip


CASES: list[tuple[str, Callable[[Backend], None], str]] = [
    ("record edited in place", _edit_keep_hash, "PW581"),
    ("record bytes re-encoded", _not_canonical, "PW580"),
    ("middle record deleted", lambda db: db.execute("DELETE FROM events WHERE event_id = 'a1/2'"), "PW582"),
    ("first record deleted", lambda db: db.execute("DELETE FROM evidence WHERE agreement_id = 'a1' AND seq = 0"),
     "PW582"),
    ("records reordered", _swap, "PW583"),
    ("record edited and re-hashed", lambda db: _rehash(db, 1), "PW584"),
    ("row kind changed", lambda db: db.execute("UPDATE evidence SET kind = 'delivered' WHERE agreement_id = 'a1' "
                                               "AND seq = 0"), "PW585"),
    ("last record deleted", lambda db: db.execute("DELETE FROM evidence WHERE agreement_id = 'a1' AND seq = 5"),
     "PW586"),
    ("last record edited and re-hashed", lambda db: _rehash(db, 5), "PW586"),
    ("last event cut", _cut_last_event, "PW586"),
    ("every record deleted", _delete_all, "PW588"),
]  # fmt: skip


@pytest.mark.parametrize(("what", "tamper", "code"), CASES, ids=[c[0] for c in CASES])
def test_each_kind_of_tampering_is_detected_with_its_own_code(
    url: str, what: str, tamper: Callable[[Backend], None], code: str, tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    backend = "postgresql" if url.startswith("postgresql") else "sqlite"
    with temporary_store(backend, tmp_path) as ledger_store:
        _settled(url, ledger_store if backend == "postgresql" else str(tmp_path / "ledger.sqlite"))
    with open_store(url) as store:
        with store.transaction() as db:
            tamper(db)
        check = verify_evidence(store, "a1")
        assert not check.ok and check.problems[0].code == code, (what, check.problems)
        assert not evidence(store, "a1").chain.ok
    got, out, err = _cli("evidence", "verify", "a1", "--store", url, capsys=capsys)
    assert got == 1, err
    assert out.splitlines()[1].strip().startswith(f"error[{code}]"), out
    assert _cli("evidence", "a1", "--store", url, capsys=capsys)[0] == 1


def test_an_event_cut_from_the_end_of_the_log_is_named_by_the_agreement_row(url: str) -> None:
    """The last event's record is its event row (store migration 15): deleting the row deletes the record
    with it, and the chain that is left is whole. The agreement row still counts the event."""
    _released(url)
    with open_store(url) as store:
        with store.transaction() as db:
            db.execute("DELETE FROM outbox WHERE reference = 'a1/3/0'")
            db.execute("DELETE FROM events WHERE event_id = 'a1/3'")
        check = verify_evidence(store, "a1")
    assert [(p.code, p.seq, p.message) for p in check.problems] == [
        ("PW586", None, "agreement `a1` is at version 3, but its event log holds events 1..2: events were deleted "
                        "or added")]  # fmt: skip


def test_the_codes_of_the_cases_are_distinct_per_kind() -> None:
    kinds = {"edited": "PW581", "re-encoded": "PW580", "deleted": "PW582", "reordered": "PW583",
             "re-hashed": "PW584", "changed": "PW585", "every": "PW588"}  # fmt: skip
    by_code: dict[str, set[str]] = {}
    for what, _, code in CASES:
        by_code.setdefault(code, set()).add(what)
    assert len(by_code) == 8 and set(kinds.values()) < set(by_code)


def test_a_recorded_head_detects_a_rebuilt_or_extended_chain(url: str, capsys: pytest.CaptureFixture[str]) -> None:
    _delivered(url)
    with open_store(url) as store:
        head = verify_evidence(store, "a1").head
        assert head is not None
        submit(store, "a1", "release", "buyer", "alice", "release", clock=TestClock(T0 + 120))
        check = verify_evidence(store, "a1", expect_head=head)
        assert [p.code for p in check.problems] == ["PW587"]
    code, out, _ = _cli("evidence", "verify", "a1", "--store", url, "--head", head, capsys=capsys)
    assert code == 1 and "error[PW587]" in out


def test_bad_input_is_a_clear_error(url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cases = [
        (["evidence", "ghost", "--store", url], 1, "PW501"),
        (["evidence", "verify", "ghost", "--store", url], 1, "PW501"),
        (["evidence", "a", "b", "--store", url], 2, "PW001"),
        (["evidence", "a", "--store", url, "--head", "x"], 2, "PW001"),
        (["evidence", "a1", "--store", str(tmp_path / "none.db")], 2, "PW700"),
    ]
    for args, exit_code, code in cases:
        got, _, err = _cli(*args, capsys=capsys)
        assert (got, err.split("]")[0]) == (exit_code, f"error[{code}"), (args, err)


def test_deliveries_support_the_claim_and_their_records_are_checked(url: str, tmp_path: Path) -> None:
    from pactwright.runtime import Worker
    from pactwright.runtime.ledger_db import open_ledger

    _released(url)
    backend = "postgresql" if url.startswith("postgresql") else "sqlite"
    with temporary_store(backend, tmp_path) as ledger_store, open_store(url) as store:
        ledger_url = ledger_store if backend == "postgresql" else str(tmp_path / "ledger.sqlite")
        ledger = open_ledger(ledger_url, url)
        outcomes = Worker(store, ledger, TestClock(T0 + 200)).drain()
        assert [o.status for o in outcomes] == ["delivered", "delivered"]
        report = evidence(store, "a1")
        assert report.chain.ok, report.chain.problems
        ledger_rows = report.doc["supports"]["ledger"]
        assert [(e["reference"], e["status"], e["matches"]) for e in ledger_rows] == [
            ("a1/1/0", "delivered", True), ("a1/3/0", "delivered", True)]  # fmt: skip
        assert not any("reached the ledger" in item for item in report.doc["does_not_prove"])
        assert (
            "ledger a1/3/0: delivered, the postings the ledger returned at delivery equal the expected ones"
            in report.text()
        )
        with store.transaction() as db:
            last = db.query("SELECT MAX(seq) FROM evidence WHERE agreement_id = 'a1'")[0][0]
            db.execute("DELETE FROM evidence WHERE agreement_id = 'a1' AND seq = ?", (last,))
        assert [p.code for p in verify_evidence(store, "a1").problems] == ["PW586"]
