"""Times after 2038-01-19T03:14:07Z: an agreement runs on both backends, and migration 9 widens old stores.

The runtime stores epoch seconds (and the effect worker's `NEVER`, 2**62)
in integer columns. SQLite's INTEGER holds 64 bits; PostgreSQL's holds 32,
so before migration 9 every write past 2**31 - 1 seconds was refused there
(PW709), and a call whose compensation was given up could not be set
aside at all. Real stores on both backends, PostgreSQL never skipped.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import pytest

from pactwright.runtime import TestClock, open_agreement, show, submit
from pactwright.runtime.activation import FixedClock, activate_files
from pactwright.runtime.ledger_db import open_ledger
from pactwright.runtime.scheduler import scan
from pactwright.runtime.store import open_store
from pactwright.runtime.store._backend import PostgresBackend
from pactwright.runtime.store._migrations import _TIME_COLUMNS, LATEST, MIGRATIONS
from pactwright.runtime.worker import Worker
from tests.signed_bundles import BACKENDS, NOW, PACT_ID, default_trust, signed, temporary_store

AFTER_2038 = 2**31 + 3600  # 2038-01-19T04:14:08Z, one hour past the last 32-bit second
WINDOW = 14 * 86400
PARTIES = {"buyer": "alice", "seller": "bob", "arbiter": "carol"}


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_agreement_opened_after_2038_runs_to_its_deadline_and_its_ledger(backend: str, tmp_path: Path) -> None:
    with temporary_store(backend, tmp_path) as url, open_store(url) as store:
        activate_files(store, signed("1.0.0"), default_trust(), clock=FixedClock(datetime.fromisoformat(NOW)))
        open_agreement(store, PACT_ID, {"price": "64.90"}, PARTIES, agreement_id="a1", clock=TestClock(AFTER_2038))
        submit(store, "a1", "fund", "buyer", "alice", "fund", clock=TestClock(AFTER_2038 + 1))
        submit(store, "a1", "deliver", "seller", "bob", "deliver", clock=TestClock(AFTER_2038 + 2))
        fired = scan(store, TestClock(AFTER_2038 + 2 + WINDOW))
        with open_ledger(None, url) as ledger:
            delivered = Worker(store, ledger, TestClock(AFTER_2038 + 3 + WINDOW)).drain()
            view = show(store, "a1", ledger=ledger)
    assert fired.to_json()["committed"] == ["a1/3"]
    assert [o.status for o in delivered] == ["delivered", "delivered"]
    assert view.agreement.state == "released" and view.agreement.updated_at == AFTER_2038 + 2 + WINDOW
    assert view.to_json()["ledger_balances"] == {
        "buyer": "0",
        "escrow": "0",
        "platform": "649",
        "seller": "5841",
        "world": "-6490",
    }


def test_a_postgresql_store_made_before_migration_9_gets_64_bit_times_and_keeps_its_rows(tmp_path: Path) -> None:
    with temporary_store("postgresql", tmp_path) as url:
        backend = PostgresBackend(url)
        try:
            with backend.transaction(write=True):  # the schema as migrations 1..8 left it
                backend.execute("CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL)")
                for migration in MIGRATIONS[:8]:
                    for statement in migration.statements:
                        backend.execute(statement.format(blob=backend.blob_type))
                    backend.execute("INSERT INTO schema_migrations VALUES (?, ?)", (migration.version, migration.name))
                backend.execute("INSERT INTO parties (party, role, public_key, added_at) VALUES ('p', 'r', NULL, 5)")
        finally:
            backend.close()
        with open_store(url) as store:
            assert store.schema_version() == LATEST >= 9
            with store.transaction(write=False) as db:
                types = {(str(t), str(c)): str(k) for t, c, k in db.query(
                    "SELECT table_name, column_name, data_type FROM information_schema.columns "
                    "WHERE table_schema = current_schema()")}  # fmt: skip
                kept = db.query("SELECT party, added_at FROM parties")
    assert {(t, c): types[(t, c)] for t, cs in _TIME_COLUMNS for c in cs} == {
        (t, c): "bigint" for t, cs in _TIME_COLUMNS for c in cs
    }
    assert [(str(p), int(a)) for p, a in kept] == [("p", 5)]


def test_on_sqlite_migration_9_is_recorded_and_changes_no_table(tmp_path: Path) -> None:
    with temporary_store("sqlite", tmp_path) as url, open_store(url) as store, store.transaction(write=False) as db:
        recorded = db.query("SELECT version, name FROM schema_migrations WHERE version = 9")
        tables = db.query("SELECT sql FROM sqlite_master WHERE name = 'effects'")
    assert [(int(v), str(n)) for v, n in recorded] == [(9, "times as 64-bit integers")]
    assert "next_at INTEGER NOT NULL" in str(tables[0][0])
