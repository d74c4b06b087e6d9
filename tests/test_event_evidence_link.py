"""An event's evidence record is its event row (store migration 15), on both backends.

A command no longer writes a second copy of its event into the `evidence`
table: the event row holds the record's place in the chain and its hash,
and verification derives the record's bytes from the row, the event's
outbox references and that place (`rows.event_record`, the one definition
used at commit and at verification). These tests check that what a commit
hashed is what verification derives, that the chain's head is read across
both places, that an edit of anything the record is derived from is an
edit of the record, and that a store with event records from before the
migration keeps them and links new events after them.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path

import pytest

from pactwright.canonical import canonical_bytes, hash_bytes
from pactwright.runtime import TestClock, submit
from pactwright.runtime._agreement import HEAD_SQL, head_params
from pactwright.runtime._evidence_chain import chain_rows
from pactwright.runtime.activation import FixedClock, activate_files
from pactwright.runtime.evidence import verify_evidence
from pactwright.runtime.store import open_store
from pactwright.runtime.store._backend import Backend
from tests.signed_bundles import NOW, default_trust, signed, temporary_store
from tests.test_runtime_commands import T0, _cli, _delivered, url
from tests.test_runtime_keys_migration import V7_STORE

__all__ = ["url"]  # the fixture, reused from the command tests


def _released(store_url: str) -> None:
    _delivered(store_url)
    with open_store(store_url) as store:
        submit(store, "a1", "release", "buyer", "alice", "release", clock=TestClock(T0 + 120))


def _bytes(value: object) -> bytes:
    return value.encode() if isinstance(value, str) else bytes(value)  # type: ignore[arg-type]


def test_a_command_links_its_record_on_its_event_row_and_writes_no_evidence_row(url: str) -> None:
    _released(url)
    with open_store(url) as store, store.transaction(write=False) as db:
        kinds = [str(k) for (k,) in db.query("SELECT kind FROM evidence WHERE agreement_id = 'a1' ORDER BY seq")]
        links = db.query("SELECT seq, evidence_seq, evidence_prev, evidence_hash FROM events "
                         "WHERE agreement_id = 'a1' ORDER BY seq")  # fmt: skip
        chain = chain_rows(db, "a1")
        head = db.query(HEAD_SQL, head_params("a1"))
    assert kinds == ["opened"]
    assert [(int(s), int(e)) for s, e, _, _ in links] == [(1, 1), (2, 2), (3, 3)]
    assert [int(row[0]) for row in chain] == [0, 1, 2, 3] and [row[1] for row in chain] == ["opened", *["event"] * 3]
    for (seq, kind, prev, digest, record), before in zip(chain, [None, *chain], strict=False):
        assert hash_bytes(_bytes(record)) == str(digest), (seq, kind)  # what was hashed at commit, derived again
        assert prev == (None if before is None else before[3])
    assert (int(head[0][0]), str(head[0][1])) == (3, str(chain[-1][3]))
    with open_store(url) as store:
        assert verify_evidence(store, "a1").ok


def test_a_delivery_record_follows_the_event_linked_before_it(url: str, tmp_path: Path) -> None:
    """The head is the later of the two places: a delivery after event 3 chains to event 3's row."""
    from pactwright.runtime import Worker
    from pactwright.runtime.ledger_db import open_ledger
    from tests.signed_bundles import temporary_store

    _delivered(url)
    backend = "postgresql" if url.startswith("postgresql") else "sqlite"
    with temporary_store(backend, tmp_path) as ledger_store, open_store(url) as store:
        ledger = open_ledger(ledger_store if backend == "postgresql" else str(tmp_path / "ledger.sqlite"), url)
        try:
            assert [o.status for o in Worker(store, ledger, TestClock(T0 + 60)).drain()] == ["delivered"]
            submit(store, "a1", "release", "buyer", "alice", "release", clock=TestClock(T0 + 120))
            assert [o.status for o in Worker(store, ledger, TestClock(T0 + 200)).drain()] == ["delivered"]
        finally:
            ledger.close()
        with store.transaction(write=False) as db:
            chain = chain_rows(db, "a1")
        assert [(int(r[0]), r[1]) for r in chain] == [
            (0, "opened"), (1, "event"), (2, "event"), (3, "delivered"), (4, "event"), (5, "delivered")]  # fmt: skip
        assert all(chain[k][2] == chain[k - 1][3] for k in range(1, len(chain)))
        assert verify_evidence(store, "a1").ok


EDITS: list[tuple[str, Callable[[Backend], None], tuple[str, int | None]]] = [
    ("commit time", lambda db: db.execute("UPDATE events SET committed_at = committed_at + 1 WHERE event_id = 'a1/2'"),
     ("PW581", 2)),
    ("event id", lambda db: db.execute("UPDATE events SET event_id = 'a1/x' WHERE event_id = 'a1/2'"),
     ("PW581", 2)),
    ("outbox reference", lambda db: db.execute("UPDATE outbox SET reference = 'a1/1/9' WHERE reference = 'a1/1/0'"),
     ("PW581", 1)),
    ("outbox entry deleted", lambda db: db.execute("DELETE FROM outbox WHERE reference = 'a1/3/0'"),
     ("PW581", 3)),
    ("link's predecessor", lambda db: db.execute("UPDATE events SET evidence_prev = evidence_hash "
                                                 "WHERE event_id = 'a1/3'"), ("PW581", 3)),
    ("payload, not canonical", lambda db: db.execute("UPDATE events SET payload = ' ' || payload "
                                                     "WHERE event_id = 'a1/1'"), ("PW580", 1)),
    ("link removed", lambda db: db.execute("UPDATE events SET evidence_seq = NULL WHERE event_id = 'a1/2'"),
     ("PW582", 3)),
]  # fmt: skip


@pytest.mark.parametrize(("what", "edit", "first"), EDITS, ids=[e[0] for e in EDITS])
def test_an_edit_of_what_an_event_record_is_derived_from_is_named(
    url: str, what: str, edit: Callable[[Backend], None], first: tuple[str, int | None]
) -> None:
    _released(url)
    with open_store(url) as store:
        with store.transaction() as db:
            edit(db)
        check = verify_evidence(store, "a1")
    assert check.problems and (check.problems[0].code, check.problems[0].seq) == first, (what, check.problems)


@pytest.fixture
def v7(tmp_path: Path) -> str:
    copy = tmp_path / "v7.sqlite"
    shutil.copyfile(V7_STORE, copy)
    return str(copy)


def test_a_migrated_store_keeps_its_event_records_and_links_new_events_after_them(v7: str) -> None:
    """tests/fixtures/stores/v7.sqlite: `m-1` opened, `fund` and `deliver` committed before migration 15."""
    with open_store(v7) as store:
        submit(store, "m-1", "release", "buyer", "alice", "release-1", 2, clock=TestClock(T0 + 180))
        with store.transaction(write=False) as db:
            kinds = [str(k) for (k,) in db.query("SELECT kind FROM evidence WHERE agreement_id = 'm-1' ORDER BY seq")]
            links = db.query("SELECT evidence_seq FROM events WHERE agreement_id = 'm-1' ORDER BY seq")
        assert kinds == ["opened", "event", "event"]
        assert [None if s is None else int(s) for (s,) in links] == [None, None, 3]
        assert verify_evidence(store, "m-1").ok
        # An old event record is still a second copy, checked against its row; the new one is the row.
        with store.transaction() as db:
            db.execute("UPDATE events SET payload = REPLACE(payload, '\"alice\"', '\"mallory\"') "
                       "WHERE agreement_id = 'm-1' AND seq IN (1, 3)")  # fmt: skip
        problems = [(p.code, p.seq) for p in verify_evidence(store, "m-1").problems]
    assert problems[:2] == [("PW581", 3), ("PW586", 1)], problems


def test_a_record_written_at_a_place_an_event_row_holds_is_named_as_a_fork(url: str) -> None:
    """No single key spans both tables: an `evidence` row numbered like event a1/3's link is a fork (PW584)."""
    _released(url)
    with open_store(url) as store:
        with store.transaction() as db:
            before = chain_rows(db, "a1")[2]
            record = {"agreement": "a1", "seq": 3, "kind": "delivered", "prev_hash": str(before[3]),
                      "reference": "a1/1/0", "event_seq": 1, "group": 0, "program": "ledger/fund.num",
                      "at": T0}  # fmt: skip
            data = canonical_bytes(record)
            db.execute("INSERT INTO evidence (agreement_id, seq, kind, prev_hash, hash, record) "
                       "VALUES (?, ?, ?, ?, ?, ?)",
                       ("a1", 3, "delivered", str(before[3]), hash_bytes(data), data.decode()))  # fmt: skip
        problems = [(p.code, p.seq, p.message) for p in verify_evidence(store, "a1").problems]
    assert problems[0] == ("PW584", 3, "evidence record 3 appears twice: the chain forks at record 3"), problems


@pytest.fixture
def sqlite_url(tmp_path: Path) -> Iterator[str]:
    with temporary_store("sqlite", tmp_path) as store_url:
        with open_store(store_url) as store:
            activate_files(store, signed("1.0.0"), default_trust(), clock=FixedClock(datetime.fromisoformat(NOW)))
        yield store_url


@pytest.mark.parametrize(
    "edit",
    [
        "UPDATE events SET evidence_seq = 'x' WHERE event_id = 'a1/2'",
        "UPDATE events SET evidence_seq = 2.5 WHERE event_id = 'a1/2'",
        "UPDATE evidence SET seq = 'x' WHERE agreement_id = 'a1' AND seq = 0",
    ],
)
def test_a_place_that_is_not_a_whole_number_is_named_not_a_crash(
    sqlite_url: str, edit: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """SQLite keeps text or a fraction written into an INTEGER column as given; verify names it (exit 1)."""
    _released(sqlite_url)
    with open_store(sqlite_url) as store:
        with store.transaction() as db:
            db.execute(edit)
        problems = verify_evidence(store, "a1").problems
    code, out, err = _cli("evidence", "verify", "a1", "--store", sqlite_url, capsys=capsys)
    assert code == 1 and "internal error" not in out + err, (out, err)
    assert (problems[0].code, problems[0].seq) == ("PW583", None), problems


def test_an_outbox_entry_moved_to_another_group_is_named(url: str) -> None:
    """The reference names the group, and the event's record lists its entries in group order; the row's
    `group_index` (the order the worker delivers an event's entries in) must agree."""
    _released(url)
    with open_store(url) as store:
        with store.transaction() as db:
            db.execute("UPDATE outbox SET group_index = 4 WHERE reference = 'a1/3/0'")
        problems = [(p.code, p.seq, p.message) for p in verify_evidence(store, "a1").problems]
    assert problems == [("PW586", 3, "outbox entry `a1/3/0` disagrees with evidence record 3 on its group")]
