"""Migration 8 on a store made by the previous release: idempotency keys move onto the events.

tests/fixtures/stores/v7.sqlite was made by the release before migration 8
(schema 7): the reference marketplace pact activated, agreement `m-1`
opened, `fund` committed under key `fund-1` and `deliver` under
`deliver-1`, each with its row in the old `idempotency_keys` table. After
the migration (on SQLite from the file itself; on PostgreSQL from the same
rows, copied into a schema at version 7) every kept key must still answer
its command's original result and write nothing, a reused key with another
payload must still be refused with PW515 naming the field, the evidence
chain must still verify, and new commands must commit on top. The fixture
is copied, never edited.
"""

from __future__ import annotations

import shutil
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from pactwright.errors import CommandError
from pactwright.runtime import TestClock, submit
from pactwright.runtime.evidence import verify_evidence
from pactwright.runtime.store import open_store
from pactwright.runtime.store._backend import connect
from pactwright.runtime.store._migrations import LATEST, MIGRATIONS
from tests.signed_bundles import temporary_store

ROOT = Path(__file__).resolve().parent.parent
V7_STORE = ROOT / "tests" / "fixtures" / "stores" / "v7.sqlite"
T0 = 1780315200
# Parents before children, as the foreign keys need them.
V7_TABLES = (
    "bundles", "bundle_files", "activations", "active", "agreements", "events", "idempotency_keys",
    "outbox", "approvals", "evidence", "parties", "effects", "approval_requests", "limits", "tokens",
)  # fmt: skip


def _copy_v7_into_postgres(url: str) -> None:
    """A PostgreSQL store at schema 7 holding exactly the fixture's rows."""
    backend = connect(url, create=True)
    try:
        with backend.transaction(write=True):
            backend.execute("CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL)")
            for migration in MIGRATIONS[:7]:
                for statement in migration.statements:
                    backend.execute(statement.format(blob=backend.blob_type))
                backend.execute("INSERT INTO schema_migrations (version, name) VALUES (?, ?)",
                                (migration.version, migration.name))  # fmt: skip
            with sqlite3.connect(V7_STORE) as source:
                for table in V7_TABLES:
                    rows = source.execute(f"SELECT * FROM {table}").fetchall()  # noqa: S608 - fixed names
                    for row in rows:
                        marks = ", ".join("?" * len(row))
                        backend.execute(f"INSERT INTO {table} VALUES ({marks})", row)  # noqa: S608
    finally:
        backend.close()


@pytest.fixture(params=["sqlite", "postgresql"])
def v7(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        copy = tmp_path / "v7.sqlite"
        shutil.copyfile(V7_STORE, copy)
        yield str(copy)
        return
    with temporary_store("postgresql", tmp_path) as url:
        _copy_v7_into_postgres(url)
        yield url


def test_the_fixture_is_a_schema_7_store_with_two_keyed_commands() -> None:
    with sqlite3.connect(V7_STORE) as db:
        assert [v for (v,) in db.execute("SELECT version FROM schema_migrations ORDER BY version")] == list(range(1, 8))
        keys = db.execute("SELECT key, event_id FROM idempotency_keys ORDER BY event_id").fetchall()
    assert keys == [("fund-1", "m-1/1"), ("deliver-1", "m-1/2")]


def test_the_migration_moves_every_key_onto_its_event_and_drops_the_table(v7: str) -> None:
    with open_store(v7) as store:
        assert store.schema_version() == LATEST
        rows = store.dump()
        with store.transaction(write=False) as db:
            assert not db.has_table("idempotency_keys")
            keys = db.query("SELECT event_id, idempotency_key FROM events ORDER BY seq")
    assert keys == [("m-1/1", "fund-1"), ("m-1/2", "deliver-1")]
    assert len(rows["evidence"]) == 3  # opened, fund, deliver: every record kept


def test_a_kept_key_still_answers_its_original_result_and_writes_nothing(v7: str) -> None:
    with open_store(v7) as store:
        before = store.dump()
        again = submit(store, "m-1", "fund", "buyer", "alice", "fund-1", 0, clock=TestClock(T0 + 999))
        assert store.dump() == before
    assert again.replayed and (again.event_id, again.version, again.state) == ("m-1/1", 1, "funded")
    assert again.committed_at == T0 + 60  # the original commit time, not the retry's
    assert again.postings[0]["amount"] == "6490" and again.outbox == ("m-1/1/0",)


def test_a_kept_key_with_another_payload_is_refused_naming_the_field(v7: str) -> None:
    with open_store(v7) as store:
        before = store.dump()
        with pytest.raises(CommandError) as refused:
            submit(store, "m-1", "release", "buyer", "alice", "fund-1", clock=TestClock(T0 + 999))
        assert store.dump() == before
    assert refused.value.code == "PW515" and refused.value.field == "transition"


def test_evidence_verifies_after_the_migration_and_new_commands_commit_on_top(v7: str) -> None:
    with open_store(v7) as store:
        assert verify_evidence(store, "m-1").ok
        done = submit(store, "m-1", "release", "buyer", "alice", "release-1", 2, clock=TestClock(T0 + 180))
        assert (done.state, done.version, done.replayed) == ("released", 3, False)
        assert submit(store, "m-1", "release", "buyer", "alice", "release-1", clock=TestClock(T0 + 240)).replayed
        with pytest.raises(CommandError) as reused:
            submit(store, "m-1", "release", "buyer", "alice", "deliver-1", clock=TestClock(T0 + 240))
        check = verify_evidence(store, "m-1")
    assert reused.value.code == "PW515"
    assert check.ok and check.count == 4
