"""Second round of SQL-only attacks on the SQLite change mark (see tests/test_change_mark_attacks.py).

Outside the claim (xfail, strict): statements that write SQLite's schema
cookies (`PRAGMA [temp.]schema_version = N`) or its schema table
(`PRAGMA writable_schema`), which SQLite documents as able to corrupt a
database and disables in its defensive mode. The mark reads `schema_version`
as a counter; a schema change that hides an edit (a TEMP counting trigger
dropped, a table rebuilt) followed by setting the version back leaves the
mark as recorded. A `writable_schema` edit of `sqlite_master` that does not
bump the version leaves the connection's parsed schema stale, so even
reading every time (the behaviour before the mark) misses it. Only code
inside the process runs SQL on the store's private connection; every other
attack here, and every edit by another connection or process, is refused.
"""

from __future__ import annotations

import pytest

from pactwright.errors import PactwrightError
from pactwright.runtime.commands import Command, run_in
from pactwright.runtime.store import Store
from tests.test_change_mark_attacks import (
    APPEND,
    HOLE,
    RELEASE,
    T0,
    _conn,
    _expect,
    _other,
    _previous_behaviour,
    store,
    swap_columns,
    template,
    url,
)

__all__ = ["store", "template", "url"]  # fixtures, re-exported for pytest


def broken(reason: str) -> pytest.MarkDecorator:
    """An edit that writes SQLite's schema cookies or schema table on the store's private connection."""
    return pytest.mark.xfail(strict=True, raises=HOLE, reason=f"outside the claim: {reason}")


def _version(store: Store, schema: str) -> int:
    (version,) = _conn(store).execute(f"PRAGMA {schema}.schema_version").fetchone()
    return int(version)


def _original(store: Store) -> bytes:
    (content,) = _conn(store).execute("SELECT content FROM bundle_files WHERE path = ?", (RELEASE,)).fetchone()
    return bytes(content)


def _uncounted_restore_then_refused_command(store: Store, original: bytes, temp: int | None) -> None:
    """One transaction: the counting trigger dropped, the original bytes back (uncounted), temp.schema_version
    set back to `temp` (unless None), a command that loads them and is refused (PW508): all rolled back."""
    with store.transaction() as db:
        db.execute("DROP TRIGGER temp.pw_watch_bundle_files_update")
        db.execute("UPDATE bundle_files SET content = ? WHERE path = ?", (original, RELEASE))
        if temp is not None:
            db.execute(f"PRAGMA temp.schema_version = {temp}")
        run_in(store, db, "a2", Command("fund", "buyer", "mallory", "x1", {}), T0)


# Breaks ------------------------------------------------------------------------------------------


@broken("DROP TRIGGER moves temp.schema_version; PRAGMA temp.schema_version = old puts the mark back")
def test_temp_trigger_dropped_then_temp_schema_version_set_back(store: Store, url: str) -> None:
    temp = _version(store, "temp")
    with store.transaction() as db:
        db.execute("DROP TRIGGER temp.pw_watch_bundle_files_update")
        db.execute(APPEND)  # no trigger: not counted
        db.execute(f"PRAGMA temp.schema_version = {temp}")
    _expect(store, url, "PW705")


def _rebuild_then_set_versions_back(store: Store) -> None:
    main, temp = _version(store, "main"), _version(store, "temp")
    with store.transaction() as db:
        db.execute("CREATE TABLE bf_copy AS SELECT * FROM bundle_files")
        db.execute("UPDATE bf_copy SET content = content || X'20' WHERE path = 'ledger/release.num'")
        db.execute("DROP TABLE bundle_files")  # its TEMP triggers go with it
        db.execute("ALTER TABLE bf_copy RENAME TO bundle_files")
        db.execute(f"PRAGMA main.schema_version = {main}")
        db.execute(f"PRAGMA temp.schema_version = {temp}")


@broken("a table rebuilt, then main and temp schema_version set back to their old values: the mark is unchanged")
def test_table_rebuilt_then_schema_versions_set_back(store: Store, url: str) -> None:
    _rebuild_then_set_versions_back(store)
    _expect(store, url, "PW705")


def test_table_rebuilt_then_schema_versions_set_back_is_refused_by_the_previous_behaviour(
    store: Store, url: str
) -> None:
    """SQLite reloads this connection's schema (setting the version invalidates its copy): reading finds it."""
    _previous_behaviour(store)
    _rebuild_then_set_versions_back(store)
    _expect(store, url, "PW705")


@broken("an edit restored, loaded and rolled back inside a transaction whose temp.schema_version was set back")
def test_restore_without_the_counting_trigger_rolled_back(store: Store, url: str) -> None:
    """The committed bytes are edited (another connection). On the store's connection one transaction drops
    the counting TEMP trigger, puts the original bytes back (uncounted), sets temp.schema_version back,
    runs a command that loads and verifies them (mark recorded) and is refused (PW508): all rolled back."""
    original, temp = _original(store), _version(store, "temp")
    _other(url, APPEND)
    with pytest.raises(PactwrightError) as inner:
        _uncounted_restore_then_refused_command(store, original, temp)
    assert inner.value.code == "PW508"
    _expect(store, url, "PW705")


@broken("writable_schema edit of sqlite_master with no schema_version bump: mark unchanged, parsed schema stale")
def test_writable_schema_swap_without_a_version_bump(store: Store, url: str) -> None:
    swap_columns(store, bump=False)
    _expect(store, url, "PW705")


@broken("not the mark's alone: the connection's parsed schema is stale, so reading every time runs it too")
def test_writable_schema_swap_without_a_version_bump_previous_behaviour(store: Store, url: str) -> None:
    _previous_behaviour(store)
    swap_columns(store, bump=False)
    _expect(store, url, "PW705")


# Withstood ---------------------------------------------------------------------------------------


def test_restore_without_the_counting_trigger_rolled_back_moves_temp_schema_version(store: Store, url: str) -> None:
    """The same rolled-back restore without setting the version back: the recorded mark holds temp+1."""
    original = _original(store)
    _other(url, APPEND)
    with pytest.raises(PactwrightError) as inner:
        _uncounted_restore_then_refused_command(store, original, None)
    assert inner.value.code == "PW508"
    _expect(store, url, "PW705")


@pytest.mark.parametrize("begin", ["BEGIN", "BEGIN DEFERRED", "BEGIN IMMEDIATE", "SAVEPOINT raw"])
def test_raw_begin_restore_load_then_rollback(store: Store, url: str, begin: str) -> None:
    """A transaction opened by raw SQL (`_writes_at_begin` is stale, but lower): a counted write in it still
    makes the mark None, so the rolled-back restore records nothing."""
    original = _original(store)
    _other(url, APPEND)
    db = store._db
    db.execute(begin)
    db.execute("UPDATE bundle_files SET content = ? WHERE path = ?", (original, RELEASE))
    assert db.change_mark() is None
    run_in(store, db, "a2", Command("fund", "buyer", "alice", "f2", {}), T0, dry_run=True)
    db.execute("ROLLBACK")
    _expect(store, url, "PW705")


def test_raw_commit_and_begin_inside_a_store_transaction(store: Store, url: str) -> None:
    """Inside `store.transaction()`: a raw COMMIT, an autocommit edit (counted), a raw BEGIN, a load."""
    with store.transaction() as db:
        db.execute("COMMIT")
        db.execute(APPEND)
        db.execute("BEGIN")
        with pytest.raises(PactwrightError) as caught:
            run_in(store, db, "a2", Command("fund", "buyer", "alice", "f2", {}), T0, dry_run=True)
        assert caught.value.code == "PW705"
    _expect(store, url, "PW705")


def test_temp_trigger_dropped_and_recreated_by_hand(store: Store, url: str) -> None:
    """Recreating the TEMP trigger under its name does not restore temp.schema_version: it moves it again."""
    conn = _conn(store)
    (sql,) = conn.execute("SELECT sql FROM sqlite_temp_master WHERE name = 'pw_watch_bundle_files_update'").fetchone()
    conn.execute("DROP TRIGGER temp.pw_watch_bundle_files_update")
    conn.execute(APPEND)
    conn.execute(sql)
    _expect(store, url, "PW705")


def test_temp_view_with_instead_of_trigger_writes_are_counted(store: Store, url: str) -> None:
    conn = _conn(store)
    conn.execute("CREATE TEMP VIEW v AS SELECT path, content FROM main.bundle_files")
    conn.execute(
        "CREATE TEMP TRIGGER v_upd INSTEAD OF UPDATE ON v BEGIN "
        "UPDATE bundle_files SET content = NEW.content WHERE path = OLD.path; END"
    )
    conn.execute("UPDATE v SET content = content || X'20' WHERE path = ?", (RELEASE,))
    _expect(store, url, "PW705")


def test_insert_returning_and_upsert_are_counted(store: Store, url: str) -> None:
    conn = _conn(store)
    rows = conn.execute(
        "INSERT INTO bundle_files SELECT manifest_hash, path, sha256, size, content || X'20' FROM bundle_files "
        "WHERE path = ? ON CONFLICT DO UPDATE SET content = excluded.content RETURNING path",
        (RELEASE,),
    ).fetchall()
    assert rows == [(RELEASE,)]
    _expect(store, url, "PW705")


def test_recursive_triggers_off_replace_delete_is_still_counted(store: Store, url: str) -> None:
    """REPLACE's conflict delete fires no trigger with recursive_triggers off; its insert is counted."""
    conn = _conn(store)
    conn.execute("PRAGMA recursive_triggers=OFF")
    conn.execute(
        "REPLACE INTO bundle_files SELECT manifest_hash, path, sha256, size, content || X'20' FROM bundle_files "
        "WHERE path = ?",
        (RELEASE,),
    )
    _expect(store, url, "PW705")


def test_journal_mode_switch_on_the_store_connection(store: Store, url: str) -> None:
    conn = _conn(store)
    conn.execute("PRAGMA journal_mode=DELETE")
    _other(url, APPEND)
    conn.execute("PRAGMA journal_mode=WAL")
    _expect(store, url, "PW705")
