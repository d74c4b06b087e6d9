"""Attacks on the evidence chain and on what the evidence claims, on both backends.

Each attack runs the reference marketplace pact (or the support refund pact,
for effect calls and approvals) through the real runtime and workers, then
edits store rows directly with SQL through the store's own connection, as
someone with write access to the database would, recomputing sha256 where
that helps. `verify_evidence` (and `pactwright evidence verify`) must then
name the change, or the change must be one the docs say only a head hash
kept outside the store can reveal.

Since store migration 15 an event's evidence record is not an `evidence`
row: the event row holds its place in the chain (`evidence_seq`,
`evidence_prev`, `evidence_hash`) and the record's bytes are derived from
the row and its outbox references. The record and the event row are one, so
attacks on an event's record edit its event row (tests/_chain_tamper.py),
an edit of an event row that is not re-hashed is an edited record (PW581),
and an event row deleted is a record deleted (PW582, or PW586 for the tail).

Attacks that are caught assert the exact problems. The changes in the
section "Changes verify once missed" went unseen until the tables the
evidence speaks from were replayed from the records and compared
(runtime/_evidence_tables.py).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from pactwright.canonical import canonical_bytes, hash_bytes
from pactwright.cli.main import main
from pactwright.errors import StoreError
from pactwright.runtime import TestClock, open_agreement, show, submit
from pactwright.runtime._evidence_chain import chain_rows
from pactwright.runtime.evidence import evidence, verify_evidence
from pactwright.runtime.ledger_db import open_ledger
from pactwright.runtime.store import Store, open_store
from pactwright.runtime.store._backend import Backend
from pactwright.runtime.worker import Worker
from tests import _chain_tamper as chain_tamper
from tests.signed_bundles import BACKENDS, PACT_ID, POSTGRES_URL
from tests.test_runtime_worker import OTHER_PROGRAM, environment

ROOT = Path(__file__).resolve().parent.parent
T0 = 1780315200  # 2026-06-01T12:00:00Z
PARTIES = {"buyer": "alice", "seller": "bob", "arbiter": "carol"}


@pytest.fixture(params=BACKENDS)
def url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A store with the marketplace bundle active (its default ledger dropped afterwards)."""
    with environment(request.param, tmp_path) as store_url:
        yield store_url


# A normal run -------------------------------------------------------------------------


def _committed(url: str) -> None:
    """a1: fund, deliver, release (records 0..3); a2 only opened."""
    with open_store(url) as store:
        open_agreement(store, PACT_ID, {"price": "64.90"}, PARTIES, agreement_id="a1", clock=TestClock(T0))
        open_agreement(store, PACT_ID, {"price": "10.00"}, PARTIES, agreement_id="a2", clock=TestClock(T0))
        submit(store, "a1", "fund", "buyer", "alice", "fund", clock=TestClock(T0))
        submit(store, "a1", "deliver", "seller", "bob", "deliver", clock=TestClock(T0 + 60))
        submit(store, "a1", "release", "buyer", "alice", "release", clock=TestClock(T0 + 120))


def _drain(url: str) -> list[str]:
    with open_store(url) as store, open_ledger(None, url) as ledger:
        return [o.status for o in Worker(store, ledger, TestClock(T0 + 200)).drain()]


def _delivered(url: str) -> None:
    """The run above with both outbox entries delivered: records 4 (`a1/1/0`) and 5 (`a1/3/0`)."""
    _committed(url)
    assert _drain(url) == ["delivered", "delivered"]
    assert verify_evidence_ok(url)


def verify_evidence_ok(url: str, agreement_id: str = "a1") -> bool:
    with open_store(url) as store:
        return verify_evidence(store, agreement_id).ok


# Tampering tools ----------------------------------------------------------------------


def _tamper(url: str, edit: Callable[[Backend], None]) -> None:
    with open_store(url) as store, store.transaction() as db:
        edit(db)


def _records(db: Backend, agreement_id: str = "a1") -> list[dict[str, Any]]:
    """The chain's records in sequence order, event records derived from their event rows (store migration 15)."""
    return chain_tamper.records(db, agreement_id)


def _rehash_from(db: Backend, start: int, edit: Callable[[dict[str, Any]], None], agreement_id: str = "a1") -> None:
    """Edit record `start` where it is stored, then re-hash it and every later record so that each follows its
    predecessor (an event's record is written to its event row's payload and link)."""
    chain_tamper.rehash_from(db, start, edit, agreement_id)


def _append(db: Backend, record: dict[str, Any], agreement_id: str = "a1") -> None:
    """Append `record` as the next, correctly chained and hashed, `evidence` row of `agreement_id`."""
    chain_tamper.append(db, record, agreement_id)


def _chain_hashes(url: str, agreement_id: str = "a1") -> tuple[dict[int, str], dict[int, str]]:
    """Per record number, the hash stored for the record and the hash of its bytes as stored or derived now."""
    with open_store(url) as store, store.transaction(write=False) as db:
        rows = chain_rows(db, agreement_id)
    data = {int(r[0]): r[4].encode() if isinstance(r[4], str) else bytes(r[4]) for r in rows}
    return {int(r[0]): str(r[3]) for r in rows}, {seq: hash_bytes(raw) for seq, raw in data.items()}


def _edited(seq: int) -> str:
    """PW581's message for record `seq`, to fill with `_filled` (the record's stored hash is taken before the edit)."""
    return f"evidence record {seq} was edited: its bytes hash to {{now[{seq}]}}, not {{before[{seq}]}}"


def _filled(url: str, expected: list[tuple[str, int | None, str]], before: dict[int, str],
            agreement_id: str = "a1") -> list[tuple[str, int | None, str]]:  # fmt: skip
    """`expected` with the hashes of `_edited` messages filled in: stored before the edit, of the bytes now."""
    now = _chain_hashes(url, agreement_id)[1]
    return [(code, seq, message.format(before=before, now=now)) for code, seq, message in expected]


def _problems(url: str, agreement_id: str = "a1", head: str | None = None) -> list[tuple[str, int | None, str]]:
    with open_store(url) as store:
        return [(p.code, p.seq, p.message) for p in verify_evidence(store, agreement_id, head).problems]


def _head(url: str, agreement_id: str = "a1") -> str:
    with open_store(url) as store:
        head = verify_evidence(store, agreement_id).head
    assert head is not None
    return head


def _cli(*args: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    assert "Traceback" not in err
    return code, out, err


def _swap_events(db: Backend) -> None:
    """Events a1/1 and a1/2 exchange everything but their ids, numbers and keys."""
    columns = "transition, actor_role, actor_party, committed_at, payload_digest, payload"
    first, second = (db.query(f"SELECT {columns} FROM events WHERE event_id = ?", (e,))[0]  # noqa: S608
                     for e in ("a1/1", "a1/2"))  # fmt: skip
    for event_id, row in (("a1/1", second), ("a1/2", first)):
        db.execute(
            "UPDATE events SET transition = ?, actor_role = ?, actor_party = ?, committed_at = ?, "
            "payload_digest = ?, payload = ? WHERE event_id = ?",
            (*row, event_id),
        )


def _foreign_record(db: Backend) -> None:
    """a2's `opened` record, appended to a1's chain (agreement field left as a2)."""
    _append(db, _records(db, "a2")[0])


def _spliced_event(db: Backend) -> None:
    """A copy of the release record, renumbered as an event a1/4 that was never committed."""
    _append(db, {**chain_tamper.record_at(db, 3), "event_id": "a1/4"})


def _set(field: str, value: Any) -> Callable[[dict[str, Any]], None]:
    return lambda record: record.__setitem__(field, value)


def _first_posting_amount(record: dict[str, Any]) -> None:
    record["postings"][0]["amount"] = "1"


# Tampering that verify names ----------------------------------------------------------

P = "PW586"
# An event's record is derived from its event row (store migration 15): an event row edited without
# re-hashing is an edited record (PW581, where the record and the row once disagreed, PW586), and an event
# row deleted is a record deleted. An event's record edited and re-hashed through the end rewrites the event
# row with it; the agreement row, the outbox and the event row's own columns still disagree.
DETECTED: list[tuple[str, Callable[[Backend], None], list[tuple[str, int | None, str]]]] = [
    ("event payload postings edited",
     lambda db: db.execute("UPDATE events SET payload = REPLACE(payload, '\"6490\"', '\"6400\"') "
                           "WHERE event_id = 'a1/1'"),
     [("PW581", 1, _edited(1))]),
    ("event payload actor edited",
     lambda db: db.execute("UPDATE events SET payload = REPLACE(payload, '\"alice\"', '\"mallory\"') "
                           "WHERE event_id = 'a1/3'"),
     [("PW581", 3, _edited(3))]),
    ("middle event deleted", lambda db: db.execute("DELETE FROM events WHERE event_id = 'a1/2'"),
     [("PW582", 3, "evidence record 2 is missing before record 3"),
      (P, None, "agreement `a1` is at version 3, but its event log holds events 1, 3: events were deleted or added")]),
    ("events reordered", _swap_events, [("PW581", 1, _edited(1)), ("PW581", 2, _edited(2))]),
    ("delivered entry set back to pending",
     lambda db: db.execute("UPDATE outbox SET status = 'pending', delivered_postings = NULL "
                           "WHERE reference = 'a1/3/0'"),
     [(P, 5, "evidence record 5 says `a1/3/0` was delivered, the outbox does not")]),
    ("delivered entry marked quarantined",
     lambda db: db.execute("UPDATE outbox SET status = 'quarantined' WHERE reference = 'a1/3/0'"),
     [(P, 5, "evidence record 5 says `a1/3/0` was delivered, the outbox does not")]),
    ("delivered postings edited",
     lambda db: db.execute("UPDATE outbox SET delivered_postings = REPLACE(delivered_postings, '\"5841\"', "
                           "'\"5800\"') WHERE reference = 'a1/3/0'"),
     [(P, 5, "evidence record 5 disagrees with the outbox on the postings delivered under `a1/3/0`")]),
    ("chain truncated by its delivery records",
     lambda db: db.execute("DELETE FROM evidence WHERE agreement_id = 'a1' AND seq >= 4"),
     [(P, None, "outbox entry `a1/1/0` is delivered but has no evidence record: records were deleted"),
      (P, None, "outbox entry `a1/3/0` is delivered but has no evidence record: records were deleted")]),
    ("record moved to another agreement",
     lambda db: db.execute("UPDATE evidence SET agreement_id = 'a2', seq = 1 WHERE agreement_id = 'a1' AND seq = 5"),
     [(P, None, "outbox entry `a1/3/0` is delivered but has no evidence record: records were deleted")]),
    ("another agreement's record appended", _foreign_record,
     [("PW585", 6, "evidence row 6 disagrees with its record (agreement, kind or prev_hash)")]),
    ("record of an uncommitted event appended", _spliced_event,
     [(P, 6, "evidence record 6 is of event `a1/4`, which the event log does not hold")]),
    ("opened record edited and re-hashed through the end",
     lambda db: _rehash_from(db, 0, _set("params", {"fee": "0", "price": "6490", "refund_window": "1209600"})),
     [(P, 0, "the `opened` record 0 disagrees with agreement `a1` as stored")]),
    ("event record edited and re-hashed through the end",
     lambda db: _rehash_from(db, 1, _first_posting_amount),
     [(P, None, "agreement `a1` as stored disagrees with its evidence records on balances"),
      (P, 1, "outbox entry `a1/1/0` disagrees with evidence record 1 on its expected postings")]),
    ("event record's actor edited and re-hashed through the end",
     lambda db: _rehash_from(db, 3, _set("command", {"actor": {"party": "mallory", "role": "buyer"}, "params": {},
                                                     "transition": "release"})),
     [(P, 3, "event `a1/3` in the event log disagrees with evidence record 3 on actor, payload_digest")]),
    ("last delivery record edited and re-hashed",
     lambda db: _rehash_from(db, 5, _first_posting_amount),
     [(P, 5, "evidence record 5 disagrees with the outbox on the postings delivered under `a1/3/0`")]),
]  # fmt: skip


@pytest.mark.parametrize(("what", "edit", "expected"), DETECTED, ids=[c[0] for c in DETECTED])
def test_tampering_after_a_normal_run_is_named_exactly(
    url: str, what: str, edit: Callable[[Backend], None], expected: list[tuple[str, int | None, str]],
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    _delivered(url)
    before = _chain_hashes(url)[0]
    _tamper(url, edit)
    expected = _filled(url, expected, before)
    assert _problems(url) == expected, what
    with open_store(url) as store:
        assert not evidence(store, "a1").chain.ok
    code, out, _ = _cli("evidence", "verify", "a1", "--store", url, capsys=capsys)
    assert code == 1
    assert out.splitlines()[1:] == [f"  error[{c}]: {m}" for c, _, m in expected]


def test_a_moved_record_breaks_the_other_agreement_too(url: str) -> None:
    _delivered(url)
    _tamper(url, next(c[1] for c in DETECTED if c[0] == "record moved to another agreement"))
    assert _problems(url, "a2") == [
        ("PW583", 1, "evidence record 1 holds the record numbered 5: records were reordered")
    ]


def test_a_pending_entry_marked_delivered_without_a_record_is_named(url: str) -> None:
    _committed(url)
    _tamper(
        url,
        lambda db: db.execute(
            "UPDATE outbox SET status = 'delivered', delivered_postings = expected_postings WHERE reference = 'a1/3/0'"
        ),
    )
    assert _problems(url) == [
        (P, None, "outbox entry `a1/3/0` is delivered but has no evidence record: records were deleted")
    ]


def test_a_fork_is_refused_by_the_store_and_leaves_the_chain_intact(url: str) -> None:
    """A second record 5 (another delivery time, hashed and chained to record 4) cannot be written."""
    _delivered(url)
    with open_store(url) as store:
        before = store.dump()["evidence"]
        with store.transaction(write=False) as db:
            record = {**chain_tamper.record_at(db, 5), "at": T0 + 201}
    data = canonical_bytes(record)
    fork = ("a1", 5, "delivered", record["prev_hash"], hash_bytes(data), data.decode())
    with pytest.raises(StoreError) as refused:
        _tamper(url, lambda db: db.execute("INSERT INTO evidence (agreement_id, seq, kind, prev_hash, hash, record) "
                                           "VALUES (?, ?, ?, ?, ?, ?)", fork))  # fmt: skip
    assert refused.value.code == "PW709"
    assert refused.value.message.startswith("the store refused the write and rolled it back: ")
    with open_store(url) as store:
        assert store.dump()["evidence"] == before
        assert verify_evidence(store, "a1").ok


# Tampering that only a head kept outside the store reveals (as the docs say) -------------


def _docs_say_rebuilds_need_the_head() -> None:
    text = " ".join((ROOT / "docs" / "runtime.md").read_text().split())
    said = ("Someone who can rewrite the evidence table and the tables it supports, consistently, can build a "
            "new chain that verifies (appending a forged `delivered` record after flipping its outbox row is "
            "enough); only a head hash kept outside the store (`--head`) detects that.")  # fmt: skip
    assert said in text


def _rebuild_with_another_actor(db: Backend) -> None:
    """Event a1/3 re-attributed to mallory in the event log and the chain alike, every hash recomputed."""
    payload = str(db.query("SELECT payload FROM events WHERE event_id = 'a1/3'")[0][0])
    forged = payload.replace('"alice"', '"mallory"')
    digest = hash_bytes(canonical_bytes(json.loads(forged)["command"]))
    db.execute("UPDATE events SET payload = ?, payload_digest = ?, actor_party = 'mallory' WHERE event_id = 'a1/3'",
               (forged, digest))  # fmt: skip
    _rehash_from(db, 3, _set("command", json.loads(forged)["command"]))


def test_a_rebuilt_chain_verifies_alone_and_fails_against_the_recorded_head(
    url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    _docs_say_rebuilds_need_the_head()
    _delivered(url)
    head = _head(url)
    _tamper(url, _rebuild_with_another_actor)
    assert _problems(url) == []
    new = _head(url)
    assert _problems(url, head=head) == [("PW587", 5, f"the chain ends at {new}, not at the recorded head {head}")]
    code, out, _ = _cli("evidence", "verify", "a1", "--store", url, "--head", head, capsys=capsys)
    assert (
        code == 1 and out.splitlines()[1] == f"  error[PW587]: the chain ends at {new}, not at the recorded head {head}"
    )


def test_a_forged_delivery_appended_verifies_alone_and_fails_against_the_recorded_head(url: str) -> None:
    _committed(url)
    head = _head(url)

    def forge(db: Backend) -> None:
        expected = str(db.query("SELECT expected_postings FROM outbox WHERE reference = 'a1/3/0'")[0][0])
        db.execute("UPDATE outbox SET status = 'delivered', delivered_postings = ? WHERE reference = 'a1/3/0'",
                   (expected,))  # fmt: skip
        _append(db, {"agreement": "a1", "kind": "delivered", "reference": "a1/3/0", "event_seq": 3, "group": 0,
                     "program": "ledger/release.num", "at": T0 + 200, "postings": json.loads(expected)})  # fmt: skip

    _tamper(url, forge)
    assert _problems(url) == []
    assert [p[0] for p in _problems(url, head=head)] == ["PW587"]


def test_a_consistently_truncated_history_verifies_alone_and_fails_against_the_recorded_head(url: str) -> None:
    with open_store(url) as store:
        open_agreement(store, PACT_ID, {"price": "64.90"}, PARTIES, agreement_id="a1", clock=TestClock(T0))
        submit(store, "a1", "fund", "buyer", "alice", "fund", clock=TestClock(T0))
        submit(store, "a1", "deliver", "seller", "bob", "deliver", clock=TestClock(T0 + 60))
        with store.transaction(write=False) as db:
            before = db.query(f"SELECT {ROLLED_BACK} FROM agreements WHERE id = 'a1'")[0]  # noqa: S608
        submit(store, "a1", "release", "buyer", "alice", "release", clock=TestClock(T0 + 120))
    latest = _head(url)  # recorded outside the store after the last command

    def cut(db: Backend) -> None:
        """The release undone everywhere: its outbox entry, its event (whose row holds its record since store
        migration 15), and the agreement row."""
        db.execute("DELETE FROM outbox WHERE reference = 'a1/3/0'")
        db.execute("DELETE FROM events WHERE event_id = 'a1/3'")
        db.execute(f"UPDATE agreements SET {', '.join(c + ' = ?' for c in ROLLED_BACK.split(', '))} "  # noqa: S608
                   "WHERE id = 'a1'", tuple(before))  # fmt: skip

    _tamper(url, cut)
    with open_store(url) as store:
        assert show(store, "a1").agreement.state == "delivered"
    assert _problems(url) == []
    assert [p[0] for p in _problems(url, head=latest)] == ["PW587"]


ROLLED_BACK = "state, version, stamps, fired, balances, reached, approved, updated_at"


# Changes verify once missed ---------------------------------------------------------------


def test_event_log_columns_edited(url: str) -> None:
    _delivered(url)
    before = _chain_hashes(url)[0]
    _tamper(
        url,
        lambda db: db.execute(
            "UPDATE events SET actor_party = 'mallory', committed_at = committed_at + 86400 WHERE event_id = 'a1/3'"
        ),
    )
    with open_store(url) as store:
        last = show(store, "a1").last_events[-1]
    assert (last["actor"], last["committed_at"]) == ("buyer:mallory", T0 + 120 + 86400)
    # The event's record is derived from its row (store migration 15): its commit time is the row's, so the
    # record no longer hashes to the hash the row holds.
    assert _problems(url) == _filled(url, [("PW581", 3, _edited(3))], before)


def test_commit_time_rewritten_in_the_chain_alone(url: str) -> None:
    _delivered(url)
    _tamper(url, lambda db: _rehash_from(db, 3, _set("committed_at", T0 + 120 + 86400)))
    # Since store migration 15 the record's commit time is its event row's: rewriting it in the chain rewrites
    # the event log too, and the agreement row's last update is what still tells.
    with open_store(url) as store, store.transaction(write=False) as db:
        assert db.query("SELECT committed_at FROM events WHERE event_id = 'a1/3'")[0][0] == T0 + 120 + 86400
    assert _problems(url) == [
        ("PW586", None, "agreement `a1` as stored disagrees with its evidence records on updated_at"),
    ]


def test_opening_time_edited_in_the_agreement_row(url: str) -> None:
    _delivered(url)
    _tamper(url, lambda db: db.execute("UPDATE agreements SET opened_at = opened_at - 86400 WHERE id = 'a1'"))
    assert _problems(url) == [("PW586", None, "agreement `a1` as stored disagrees with its evidence records on "
                                              "opened_at")]  # fmt: skip


def test_final_state_and_balances_edited_in_the_agreement_row(url: str) -> None:
    _delivered(url)
    _tamper(
        url,
        lambda db: db.execute(
            "UPDATE agreements SET state = 'refunded', balances = ? WHERE id = 'a1'",
            ('{"buyer":"6490","escrow":"0","platform":"0","seller":"0","world":"-6490"}',),
        ),
    )
    with open_store(url) as store:
        claim = evidence(store, "a1").doc["claim"]
    assert (claim["state"], claim["balances"]["buyer"]["text"]) == ("refunded", "64.90 EUR")  # the row's, and
    assert _problems(url) == [("PW586", None, "agreement `a1` as stored disagrees with its evidence records on "
                                              "state, balances")]  # fmt: skip


def test_last_event_cut_while_the_agreement_row_keeps_it(url: str) -> None:
    _committed(url)

    def cut(db: Backend) -> None:
        """The outbox entry and the event, whose row holds its evidence record (store migration 15)."""
        db.execute("DELETE FROM outbox WHERE reference = 'a1/3/0'")
        db.execute("DELETE FROM events WHERE event_id = 'a1/3'")

    _tamper(url, cut)
    with open_store(url) as store:
        claim = evidence(store, "a1").doc["claim"]
    assert [e["transition"] for e in claim["events"]] == ["fund", "deliver"]
    assert _problems(url) == [("PW586", None, "agreement `a1` is at version 3, but its event log holds events 1..2: "
                                              "events were deleted or added")]  # fmt: skip


def test_expected_postings_edited_on_a_delivered_entry(url: str) -> None:
    _delivered(url)
    _tamper(
        url,
        lambda db: db.execute(
            "UPDATE outbox SET expected_postings = REPLACE(expected_postings, '\"5841\"', '\"5800\"') "
            "WHERE reference = 'a1/3/0'"
        ),
    )
    assert _problems(url) == [("PW586", 3, "outbox entry `a1/3/0` disagrees with evidence record 3 on its "
                                           "expected postings")]  # fmt: skip


def test_pending_entry_deleted(url: str) -> None:
    _committed(url)
    before = _chain_hashes(url)[0]
    _tamper(url, lambda db: db.execute("DELETE FROM outbox WHERE reference = 'a1/3/0'"))
    # An event's record lists its outbox references as the outbox holds them (store migration 15): without the
    # entry, record 3 no longer hashes to the hash its event row holds, and the claim leaves the event out.
    with open_store(url) as store:
        doc = evidence(store, "a1").doc
    assert [e["transition"] for e in doc["claim"]["events"]] == ["fund", "deliver"]
    assert _problems(url) == _filled(url, [("PW581", 3, _edited(3))], before)


def _quarantine_first_delivery(url: str) -> None:
    """A normal quarantine: the ledger already holds `a1/1/0` under another program (PW561)."""
    _committed(url)
    with open_ledger(None, url) as ledger:
        ledger.apply("a1/1/0", OTHER_PROGRAM, {})
    assert _drain(url) == ["quarantined"]
    assert verify_evidence_ok(url)


def _quarantined_marked_delivered(url: str) -> None:
    _quarantine_first_delivery(url)
    _tamper(
        url,
        lambda db: db.execute(
            "UPDATE outbox SET status = 'delivered', delivered_postings = expected_postings, last_error = NULL "
            "WHERE reference = 'a1/1/0'"
        ),
    )
    with open_store(url) as store:
        entry = evidence(store, "a1").doc["supports"]["ledger"][0]
    assert (entry["reference"], entry["status"], entry["matches"]) == ("a1/1/0", "delivered", True)


def _delivery_record_rewritten_as_quarantine(url: str) -> None:
    _delivered(url)

    def rewrite(record: dict[str, Any]) -> None:
        record["kind"] = "quarantined"
        record.update(expected=record.pop("postings"), ledger=None, code="PW561", reason="forged")

    _tamper(url, lambda db: _rehash_from(db, 5, rewrite))


@pytest.mark.parametrize(
    "attack",
    [_quarantined_marked_delivered, _delivery_record_rewritten_as_quarantine],
    ids=["quarantined entry marked delivered", "delivery record rewritten as a quarantine"],
)
def test_a_delivered_entry_backed_only_by_a_quarantine_record(url: str, attack: Callable[[str], None]) -> None:
    attack(url)
    (problem,) = _problems(url)
    assert problem[0] == "PW586" and problem[2].endswith("is delivered but no evidence record says it was delivered")


def _ledger_forget(url: str, reference: str) -> None:
    """Delete `reference` from the ledger's own database (the store's default sibling ledger)."""
    if url.startswith("postgresql"):
        import psycopg

        schema = url.rsplit("%3D", 1)[1] + "_ledger"
        with psycopg.connect(POSTGRES_URL, autocommit=True) as conn:
            for table in ("ledger_postings", "ledger_transactions"):
                conn.execute(f'DELETE FROM "{schema}".{table} WHERE reference = %s', (reference,))  # noqa: S608
        return
    path = Path(url).with_name(f"{Path(url).stem}.ledger.sqlite")
    with sqlite3.connect(path) as lite:
        for table in ("ledger_postings", "ledger_transactions"):
            lite.execute(f"DELETE FROM {table} WHERE reference = ?", (reference,))  # noqa: S608
    lite.close()


def test_a_delivered_claim_for_a_reference_the_ledger_does_not_hold(url: str) -> None:
    _delivered(url)
    _ledger_forget(url, "a1/3/0")
    with open_ledger(None, url, create=False) as ledger:
        assert ledger.postings("a1/3/0") is None
    with open_store(url) as store:
        report = evidence(store, "a1")
    assert report.chain.ok
    # The evidence speaks of what the ledger returned at delivery, and says it does not show the ledger now.
    assert "ledger a1/3/0: delivered, the postings the ledger returned at delivery equal the expected ones" in (
        report.text()
    )
    assert (
        "that the ledger still holds `a1/3/0`: the store kept what the ledger returned at delivery; "
        "`pactwright show --ledger URL` shows the balances it holds now"
    ) in report.doc["does_not_prove"]


# Effect calls and approvals (support refund) ----------------------------------------


def _refunded(backend: str, tmp_path: Path) -> Iterator[tuple[str, list[dict[str, Any]]]]:
    """r1: assessed, issued with rita's grant, both calls acknowledged by a provider simulator."""
    from pactwright.runtime.effect_http import Credentials, HttpAdapter, load_providers
    from pactwright.runtime.effect_worker import EffectWorker
    from pactwright.runtime.provider_sim import start_simulator
    from tests.effect_env import issued, providers_file, refund_store

    with refund_store(backend, tmp_path, "reconcilable") as store_url:
        with open_store(store_url) as store, start_simulator() as sim:
            issued(store)
            adapter = HttpAdapter(load_providers(providers_file(tmp_path, sim.url)), Credentials())
            EffectWorker(store, adapter, TestClock(T0 + 30)).drain()
            applied = sim.state()["records"]
            assert verify_evidence(store, "r1").ok
        yield store_url, applied


@pytest.fixture(params=BACKENDS)
def refunded(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, list[dict[str, Any]]]]:
    yield from _refunded(request.param, tmp_path)


def _claims(store: Store) -> dict[str, str]:
    return {c["instance"]: c["claim"] for c in evidence(store, "r1").doc["claim"]["effects"]}


def test_the_refund_claim_before_any_tampering(refunded: tuple[str, list[dict[str, Any]]]) -> None:
    store_url, applied = refunded
    assert [(r["amount"], r["id"]) for r in applied] == [("6490", "sim_1")]
    with open_store(store_url) as store:
        assert _claims(store)["r1/2/e0"] == (
            "a 64.90 EUR `refund_payment` call was authorised by rita holding "
            "refund_approver and acknowledged by the provider (provider ref sim_1)"
        )
        records = [r for r in evidence(store, "r1").chain.records if r["kind"] == "effect_acknowledged"]
    assert [(r["instance"], r["amount"], r["provider_ref"]) for r in records] == [
        ("r1/1/e0", None, "read_1"), ("r1/2/e0", "6490", "sim_1")]  # fmt: skip


def test_refund_event_payload_edited_is_named(refunded: tuple[str, list[dict[str, Any]]]) -> None:
    store_url, _ = refunded
    before = _chain_hashes(store_url, "r1")[0]
    _tamper(
        store_url,
        lambda db: db.execute(
            'UPDATE events SET payload = REPLACE(payload, \'"amount":"6490"\', \'"amount":"9990"\') '
            "WHERE event_id = 'r1/2'"
        ),
    )
    # The event's record is derived from its payload (store migration 15), so the edit is an edited record.
    assert _problems(store_url, "r1") == _filled(store_url, [("PW581", 3, _edited(3))], before, "r1")


EFFECT_EDITS = [
    ("amount raised", "UPDATE effects SET amount = '9990' WHERE id = 'r1/2/e0'", "a 99.90 EUR `refund_payment`"),
    ("acknowledged call said failed", "UPDATE effects SET phase = 'failed' WHERE id = 'r1/2/e0'",
     "refused by the provider: it did not happen"),
    ("provider reference replaced", "UPDATE effects SET provider_ref = 'sim_999' WHERE id = 'r1/2/e0'",
     "(provider ref sim_999)"),
    ("read call said compensated", "UPDATE effects SET phase = 'compensated' WHERE id = 'r1/1/e0'",
     "acknowledged, then undone by its compensation"),
]  # fmt: skip


EFFECT_PROBLEMS = {
    "amount raised": "effect call `r1/2/e0` disagrees with its evidence records on amount",
    "acknowledged call said failed": "effect call `r1/2/e0` disagrees with its evidence records on phase",
    "provider reference replaced": "effect call `r1/2/e0` disagrees with its evidence records on provider_ref",
    "read call said compensated": "effect call `r1/1/e0` disagrees with its evidence records on phase",
}


@pytest.mark.parametrize(("what", "sql", "claimed"), EFFECT_EDITS, ids=[e[0] for e in EFFECT_EDITS])
def test_effect_row_edited(refunded: tuple[str, list[dict[str, Any]]], what: str, sql: str, claimed: str) -> None:
    store_url, applied = refunded
    _tamper(store_url, lambda db: db.execute(sql))
    with open_store(store_url) as store:
        claims = " | ".join(_claims(store).values())
    assert [r["amount"] for r in applied] == ["6490"]  # what the provider applied
    assert claimed in claims  # the row speaks, and verify names the row and the field
    assert _problems(store_url, "r1") == [("PW586", None, EFFECT_PROBLEMS[what])]


def test_effect_row_deleted(refunded: tuple[str, list[dict[str, Any]]]) -> None:
    store_url, _ = refunded
    _tamper(store_url, lambda db: db.execute("DELETE FROM effects WHERE id = 'r1/2/e0'"))
    with open_store(store_url) as store:
        claims = _claims(store)
    assert "r1/2/e0" not in claims
    assert _problems(store_url, "r1") == [
        ("PW586", None, "evidence records name effect call `r1/2/e0`, which the effects table does not hold")
    ]


APPROVAL_EDITS = [
    ("approver party replaced", "UPDATE approvals SET approver_party = 'mallory' WHERE agreement_id = 'r1'",
     lambda doc: doc["supports"]["approvals"][0]["approver"] == "refund_approver:mallory"),
    ("approval moved to the assess event", "UPDATE approvals SET consumed_event_id = 'r1/1' WHERE agreement_id = 'r1'",
     lambda doc: doc["claim"]["effects"][0]["claim"].startswith(
         "a `read_order` call was authorised by rita holding refund_approver")),
    ("request decided by someone else", "UPDATE approval_requests SET decided_by = 'mallory' WHERE agreement_id = 'r1'",
     lambda doc: "authorised by mallory holding refund_approver" in doc["claim"]["effects"][1]["claim"]),
]  # fmt: skip


APPROVAL_PROBLEMS = {
    "approver party replaced": "names refund_approver:mallory, whom no evidence record shows granting it",
    "approval moved to the assess event": "is consumed by `r1/1`, which no evidence record says",
    "request decided by someone else": "as stored disagrees with its evidence records",
}


@pytest.mark.parametrize(("what", "sql", "shown"), APPROVAL_EDITS, ids=[e[0] for e in APPROVAL_EDITS])
def test_approval_rows_edited(refunded: tuple[str, list[dict[str, Any]]], what: str, sql: str,
                              shown: Callable[[dict[str, Any]], bool]) -> None:  # fmt: skip
    store_url, _ = refunded
    _tamper(store_url, lambda db: db.execute(sql))
    with open_store(store_url) as store:
        doc = evidence(store, "r1").doc
    assert shown(doc), what  # the rows speak, and verify names the row
    (problem,) = _problems(store_url, "r1")
    assert problem[:2] == ("PW586", None) and problem[2].endswith(APPROVAL_PROBLEMS[what]), problem


def test_a_preview_edited_in_its_request_row_is_named(refunded: tuple[str, list[dict[str, Any]]]) -> None:
    """The effect claims read the payload digest the approver saw from the request's preview; a preview
    rewritten in its row no longer hashes to the digest the grant record holds."""
    store_url, _ = refunded
    _tamper(store_url, lambda db: db.execute(
        "UPDATE approval_requests SET preview = REPLACE(preview, '\"payload_digest\":\"sha256:', "
        "'\"payload_digest\":\"sha256:0') WHERE agreement_id = 'r1'"))  # fmt: skip
    (problem,) = _problems(store_url, "r1")
    assert problem[:2] == ("PW586", None)
    assert problem[2].endswith("holds a preview that does not hash to its digest"), problem
