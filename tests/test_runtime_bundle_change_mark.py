"""A long-lived store refuses the next command after its bundle is edited, whoever edits it.

On SQLite a command does not read the bundle's rows again when the store's
change mark (`Backend.change_mark`: this connection, SQLite's
`data_version`, and this connection's own writes to the bundle tables
counted by TEMP triggers) is the one recorded when they were last read
and verified. These tests keep ONE store open across commands (the
situation the mark is for: a service or worker process) and edit the
bundle between two of its commands in every way a writer can reach it:
another connection of the same process, another OS process through the
`sqlite3` module, and the very connection the store commands through
(`store.transaction()`), including an edit rolled back. Each time the next
command on the long-lived store must be refused with the code a fresh
store gives, and change nothing. PostgreSQL has no mark (it always reads
the rows); it runs the same edits.
"""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from pactwright.errors import PactwrightError
from pactwright.runtime import TestClock, open_agreement, submit
from pactwright.runtime.activation import FixedClock, activate_files
from pactwright.runtime.store import Store, open_store
from pactwright.runtime.store._backend import Backend
from tests.signed_bundles import BACKENDS, NOW, PACT_ID, default_trust, dump, signed, temporary_store

T0 = 1780315200
PARTIES = {"buyer": "alice", "seller": "bob", "arbiter": "carol"}
APPEND = "UPDATE bundle_files SET content = ? WHERE path = ?"  # the stored bytes with one more at the end
EDITS = [
    (APPEND, ("transitions.json",), "PW705"),
    (APPEND, ("ledger/refund_undelivered.num",), "PW705"),
    (APPEND, ("ledger/release.num",), "PW705"),
    ("UPDATE bundle_files SET sha256 = ? WHERE path = ?", ("sha256:" + "0" * 64, "report.html"), "PW705"),
    ("DELETE FROM bundle_files WHERE path = ?", ("report.md",), "PW704"),
    ("UPDATE activations SET signatures = ?", (b"{}",), "PW706"),
]
EDIT_IDS = ["transitions", "unused-program", "executed-program", "unread-hash", "unread-deleted", "signatures"]


def _prepare(store_url: str, *versions: str) -> None:
    """Activate `versions` (default 1.0.0) and open agreements a1 and a2 on the last."""
    with open_store(store_url) as store:
        for version in versions or ("1.0.0",):
            activate_files(store, signed(version), default_trust(), clock=FixedClock(datetime.fromisoformat(NOW)))
        for agreement_id in ("a1", "a2"):
            open_agreement(store, PACT_ID, {"price": "64.90"}, PARTIES, agreement_id=agreement_id,
                           clock=TestClock(T0))  # fmt: skip


@pytest.fixture(params=BACKENDS)
def url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    with temporary_store(request.param, tmp_path) as store_url:
        _prepare(store_url)
        yield store_url


def _warm(store: Store) -> None:
    """Two commands, so the store has read, verified and marked the bundle's rows."""
    clock = TestClock(T0)
    assert submit(store, "a1", "fund", "buyer", "alice", "f1", clock=clock).version == 1
    assert submit(store, "a1", "deliver", "seller", "bob", "d1", clock=clock).version == 2
    assert store._db.change_mark() is not None or store.backend == "postgresql"


def _next_command_refused(store: Store, url: str, code: str) -> None:
    before = dump(url)
    with pytest.raises(PactwrightError) as caught:
        submit(store, "a1", "release", "buyer", "alice", "r1", clock=TestClock(T0))
    assert caught.value.code == code, caught.value
    assert dump(url) == before
    with pytest.raises(PactwrightError) as again:  # and every command after it, on any agreement
        submit(store, "a2", "fund", "buyer", "alice", "f2", clock=TestClock(T0))
    assert again.value.code == code
    assert dump(url) == before


def _edit_sqlite(path: str, sql: str, params: tuple[Any, ...]) -> None:
    with sqlite3.connect(path) as other:
        other.execute(sql, params)


def _edit(db: Backend, sql: str, params: tuple[Any, ...]) -> None:
    """Run one edit of EDITS on `db`; APPEND reads the file's bytes first. Every edit changes a row."""
    if sql == APPEND:
        (content,) = db.query("SELECT content FROM bundle_files WHERE path = ?", params)[0]
        params = (bytes(content) + b" ", *params)
    before = dump_rows(db)
    db.execute(sql, params)
    assert dump_rows(db) != before, "the edit changed nothing"


def dump_rows(db: Backend) -> list[tuple[Any, ...]]:
    return [*db.query("SELECT path, sha256, content FROM bundle_files ORDER BY path"),
            *db.query("SELECT signatures FROM activations ORDER BY id")]  # fmt: skip


@pytest.mark.parametrize(("sql", "params", "code"), EDITS, ids=EDIT_IDS)
def test_an_edit_by_another_connection_of_this_process_refuses_the_next_command(
    url: str, sql: str, params: tuple[Any, ...], code: str
) -> None:
    with open_store(url) as store:
        _warm(store)
        with open_store(url) as other, other.transaction() as db:
            _edit(db, sql, params)
        _next_command_refused(store, url, code)


@pytest.mark.parametrize(("sql", "params", "code"), EDITS, ids=EDIT_IDS)
def test_an_edit_through_the_same_connection_refuses_the_next_command(
    url: str, sql: str, params: tuple[Any, ...], code: str
) -> None:
    with open_store(url) as store:
        _warm(store)
        with store.transaction() as db:
            _edit(db, sql, params)
        _next_command_refused(store, url, code)


def test_an_edit_by_another_os_process_refuses_the_next_command(tmp_path: Path) -> None:
    """SQLite: another OS process's write through its own `sqlite3` connection."""
    url = str(tmp_path / "store.db")
    _prepare(url)
    with open_store(url) as store:
        _warm(store)
        script = (
            "import sqlite3, sys\n"
            "with sqlite3.connect(sys.argv[1]) as db:\n"
            "    db.execute(\"UPDATE bundle_files SET content = content || X'0a' WHERE path = 'ledger/release.num'\")\n"
        )
        subprocess.run([sys.executable, "-c", script, url], check=True, timeout=60)
        _next_command_refused(store, url, "PW705")


def test_an_edit_inside_the_command_transaction_is_read(url: str) -> None:
    """An edit made on the store's own connection in the same transaction, before a command's load."""
    with open_store(url) as store:
        _warm(store)
        before = dump(url)
        from pactwright.runtime.commands import Command, run_in

        command = Command("release", "buyer", "alice", "r1", {})

        def edit_then_command() -> None:
            with store.transaction(exclusive=False) as db:
                _edit(db, APPEND, ("ledger/release.num",))
                run_in(store, db, "a1", command, T0)

        with pytest.raises(PactwrightError) as caught:
            edit_then_command()
        assert caught.value.code == "PW705"
        assert dump(url) == before  # the edit rolled back with the refused command


def test_an_edit_rolled_back_still_makes_the_next_command_read_the_rows(url: str) -> None:
    """A write on the store's own connection that was rolled back leaves the rows as they were; the next
    command reads them again (the count is never taken back) and, finding them unchanged, runs."""
    with open_store(url) as store:
        _warm(store)

        def edit_then_fail() -> None:
            with store.transaction() as db:
                _edit(db, APPEND, ("ledger/release.num",))
                raise RuntimeError("roll back")

        with pytest.raises(RuntimeError):
            edit_then_fail()
        assert submit(store, "a1", "release", "buyer", "alice", "r1", clock=TestClock(T0)).version == 3


def test_an_edit_then_its_undo_by_another_connection_is_read_in_between(url: str) -> None:
    """The next command after an edit is refused even if the edit is undone before the one after it."""
    with open_store(url) as store:
        _warm(store)
        with open_store(url) as other, other.transaction(write=False) as db:
            (original,) = db.query("SELECT content FROM bundle_files WHERE path = 'ledger/release.num'")[0]
        with open_store(url) as other, other.transaction() as db:
            db.execute("UPDATE bundle_files SET content = ? WHERE path = 'ledger/release.num'",
                       (bytes(original) + b" ",))  # fmt: skip
        _next_command_refused(store, url, "PW705")
        with open_store(url) as other, other.transaction() as db:
            db.execute("UPDATE bundle_files SET content = ? WHERE path = 'ledger/release.num'", (bytes(original),))
        assert submit(store, "a1", "release", "buyer", "alice", "r1", clock=TestClock(T0)).version == 3


def test_the_mark_skips_the_read_only_while_nothing_was_written(tmp_path: Path) -> None:
    """SQLite: the mark is what makes the skip; it changes with another connection's commit and with
    this connection's own write to a bundle table, and not with this connection's other writes."""
    with temporary_store("sqlite", tmp_path) as store_url, open_store(store_url) as store:
        db = store._db
        with store.transaction() as tx:
            tx.execute("CREATE TABLE IF NOT EXISTS scratch (x)")
        first = db.change_mark()
        assert first is not None
        with store.transaction() as tx:
            tx.execute("INSERT INTO scratch VALUES (1)")
        assert db.change_mark() == first  # own writes elsewhere: unchanged
        _edit_sqlite(store_url, "INSERT INTO scratch VALUES (2)", ())
        second = db.change_mark()
        assert second is not None and second != first  # another connection committed
        with store.transaction() as tx:
            tx.execute("DELETE FROM active WHERE pact_id = 'nothing'")  # a write to a bundle table (no row)
            tx.execute("INSERT INTO bundles (manifest_hash, pact_id, pact_version) VALUES ('x', 'p', '1')")
        third = db.change_mark()
        assert third is not None and third != second
        with open_store(store_url) as other:
            mark = other._db.change_mark()
            assert mark is not None and mark[0] != third[0]  # another connection's marks never compare equal


def test_a_long_lived_worker_quarantines_after_the_program_is_edited(url: str) -> None:
    """The outbox worker loads its program the way a command does: one worker, one connection, two deliveries;
    the program edited by another connection between them is not delivered (PW562), the ledger untouched."""
    from pactwright.runtime.ledger_db import open_ledger
    from pactwright.runtime.worker import Worker

    clock = TestClock(T0)
    with open_store(url) as store:
        for agreement_id in ("a1", "a2"):
            assert submit(store, agreement_id, "fund", "buyer", "alice", f"f-{agreement_id}", clock=clock).version == 1
    with open_store(url) as store, open_ledger(None, url) as ledger:
        worker = Worker(store, ledger, clock)
        first = worker.deliver_one()
        assert first is not None and (first.reference, first.status) == ("a1/1/0", "delivered")
        assert store._db.change_mark() is not None or store.backend == "postgresql"
        with open_store(url) as other, other.transaction() as db:
            _edit(db, APPEND, ("ledger/fund.num",))
        second = worker.deliver_one()
        assert second is not None and (second.reference, second.status, second.code) == ("a2/1/0", "quarantined",
                                                                                          "PW562")  # fmt: skip
        assert ledger.postings("a2/1/0") is None
        assert ledger.postings("a1/1/0") is not None
