"""The tiny dialect shim between one portable schema and two databases.

Everything above this module writes one SQL text with `?` placeholders.
What differs between SQLite and PostgreSQL lives here and nowhere else:
the connection (and, for SQLite, WAL mode), the placeholder style, the
binary column type, and how a write transaction takes the store's single
writer lock (SQLite `BEGIN IMMEDIATE`; PostgreSQL a transaction-scoped
advisory lock keyed by the schema, which also covers the very first
migration, before any table exists to lock).
"""

from __future__ import annotations

import contextlib
import itertools
import os
import sqlite3
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, Protocol

from pactwright.errors import UsageError

_SQLITE_PREFIX = "sqlite://"
_POSTGRES_PREFIXES = ("postgresql://", "postgres://")
_BUSY_SECONDS = 30
_WRITES = ("INSERT ", "UPDATE ", "DELETE ")
# The tables an activated bundle is stored in: what `change_mark` watches this connection's own writes to.
BUNDLE_TABLES = ("bundles", "bundle_files", "activations", "active")
_CONNECTIONS = itertools.count(1)  # a number no two backends of this process share


class Backend(Protocol):
    name: str
    blob_type: str

    def query(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]: ...

    def execute(self, sql: str, params: Sequence[Any] = ()) -> None: ...

    def execute_many(self, sql: str, rows: Sequence[Sequence[Any]]) -> None: ...

    def query_many(self, statements: Sequence[tuple[str, Sequence[Any]]]) -> list[list[tuple[Any, ...]]]: ...

    def transaction(self, *, write: bool, exclusive: bool = True) -> contextlib.AbstractContextManager[None]: ...

    def execute_all(self, statements: Sequence[tuple[str, Sequence[Any]]]) -> None: ...

    def has_table(self, name: str) -> bool: ...

    def change_mark(self) -> tuple[int, ...] | None: ...

    def watch_bundles(self) -> None: ...

    def cannot_write(self) -> str | None: ...

    def close(self) -> None: ...


def storable(text: str) -> bool:
    """Text a store can hold as it is: no NUL (PostgreSQL's text refuses it) and valid UTF-8 (no lone surrogate).

    Nothing a policy declares can hold either (a policy is UTF-8 without
    NUL), so such a pact id names no pact and such a param value is refused
    before any statement reaches the store.
    """
    if "\x00" in text:
        return False
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _too_big(exc: OverflowError) -> sqlite3.DataError:
    """An integer past SQLite's 64 bits, refused as the driver error it is (PW709, as PostgreSQL refuses it)."""
    return sqlite3.DataError(f"an integer does not fit a 64-bit column ({exc})")


def first_line(exc: BaseException) -> str:
    """A driver error as one line for a message: its first line, or its type when it says nothing."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def unreachable(url: str, why: object) -> UsageError:
    return UsageError(
        f"cannot open the store `{url}`: {why}",
        code="PW700",
        hint="pass `--store PATH` (SQLite file) or `--store postgresql://...`",
    )


class SQLiteBackend:
    """The embedded default: one file, WAL journal, foreign keys on, full fsync."""

    name = "sqlite"
    blob_type = "BLOB"

    def __init__(self, path: str, *, create: bool) -> None:
        if not create and not Path(path).is_file():
            raise unreachable(path, "no such store file")
        self._path = path
        self._wal_pending = False
        self._connection = next(_CONNECTIONS)
        self._bundle_writes = 0  # this connection's writes to BUNDLE_TABLES, counted by TEMP triggers
        self._writes_at_begin = 0  # the count when the current transaction began
        self._watching = False
        try:
            if not create:
                # Only reading (`store verify`, the "nothing was changed" line after a refusal):
                # no journal switch, which would rewrite the header of a store restored in
                # rollback-journal mode. (Not `mode=ro`: a read-only connection to a WAL store
                # cannot remove the `-wal` and `-shm` files it makes, and would leave them behind.)
                self._conn = sqlite3.connect(path, isolation_level=None, timeout=_BUSY_SECONDS)
                self._conn.execute("PRAGMA foreign_keys=ON")
                return
            new = not Path(path).is_file() or Path(path).stat().st_size == 0
            # Autocommit mode: transactions are explicit (BEGIN IMMEDIATE for writers).
            self._conn = sqlite3.connect(path, isolation_level=None, timeout=_BUSY_SECONDS)
            # A new store starts in WAL. An existing one in another journal mode (restored from
            # a dump, say) is switched only after a write that changed it: switching rewrites the
            # file header, and a refused activation must leave the file byte for byte as it was.
            mode = self._wal() if new else self._conn.execute("PRAGMA journal_mode").fetchone()
            self._conn.execute("PRAGMA foreign_keys=ON")
            self._conn.execute("PRAGMA synchronous=FULL")
        except sqlite3.Error as exc:
            raise unreachable(path, exc) from None
        if new and (mode is None or str(mode[0]).lower() != "wal"):
            raise unreachable(path, f"cannot switch the journal to WAL (got `{mode}`)")
        self._wal_pending = mode is None or str(mode[0]).lower() != "wal"

    def _wal(self) -> Any:
        """Switch to WAL, waiting out another process doing the same to a new store.

        Two connections switching a new file to WAL at once make one of them
        fail with SQLITE_BUSY at once, without the busy timeout (SQLite's
        deadlock avoidance), so two activations racing on a new store would
        fail one of them as "cannot open the store". Retry until the timeout.
        """
        deadline = time.monotonic() + _BUSY_SECONDS
        while True:
            try:
                return self._conn.execute("PRAGMA journal_mode=WAL").fetchone()
            except sqlite3.OperationalError as exc:
                busy = getattr(exc, "sqlite_errorcode", None) in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)
                if not busy or time.monotonic() > deadline:
                    raise
            time.sleep(0.01)

    def query(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """The rows of a read; a value that is not valid UTF-8 (a lone surrogate, as a non-UTF-8 command-line
        byte becomes) matches no stored text, so the read finds nothing, as on PostgreSQL."""
        try:
            return [tuple(row) for row in self._conn.execute(sql, tuple(params)).fetchall()]
        except OverflowError as exc:
            raise _too_big(exc) from None
        except UnicodeEncodeError:
            return []

    def execute(self, sql: str, params: Sequence[Any] = ()) -> None:
        try:
            self._conn.execute(sql, tuple(params))
        except OverflowError as exc:
            raise _too_big(exc) from None

    def execute_many(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        try:
            self._conn.executemany(sql, [tuple(row) for row in rows])
        except OverflowError as exc:
            raise _too_big(exc) from None

    def query_many(self, statements: Sequence[tuple[str, Sequence[Any]]]) -> list[list[tuple[Any, ...]]]:
        return [self.query(sql, params) for sql, params in statements]

    @contextlib.contextmanager
    def transaction(self, *, write: bool, exclusive: bool = True) -> Iterator[None]:
        # SQLite has one writer at a time whatever `exclusive` says: BEGIN IMMEDIATE is the row lock.
        self._conn.execute("BEGIN IMMEDIATE" if write else "BEGIN")
        self._writes_at_begin = self._bundle_writes  # `change_mark`: what this transaction writes is its own
        changes = self._conn.total_changes
        try:
            yield
        except BaseException:
            self._conn.execute("ROLLBACK")
            raise
        self._conn.execute("COMMIT")
        if self._wal_pending and self._conn.total_changes != changes:
            mode = self._wal()
            self._wal_pending = mode is None or str(mode[0]).lower() != "wal"

    def execute_all(self, statements: Sequence[tuple[str, Sequence[Any]]]) -> None:
        """Each write in order (in this process there is no round trip to save)."""
        execute = self._conn.execute
        try:
            for sql, params in statements:
                execute(sql, tuple(params))
        except OverflowError as exc:
            raise _too_big(exc) from None

    def has_table(self, name: str) -> bool:
        return bool(self.query("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (name,)))

    def change_mark(self) -> tuple[int, ...] | None:
        """A value that is the same at two reads only if the bundle tables' rows cannot differ between them.

        (this connection's number, SQLite's `PRAGMA data_version`, the
        `schema_version` of the main and of the temp schema, this
        connection's own writes to the bundle tables):

        - `data_version` changes whenever another connection, of this
          process or any other, has committed anything to the database;
        - a schema change on this connection (a table rebuilt, renamed or
          altered, a TEMP trigger dropped) moves a `schema_version`; a
          statement that sets `schema_version` itself, or edits the schema
          table through `writable_schema` without moving it, is not seen
          (docs/runtime.md "What a command re-verifies");
        - the TEMP triggers of `watch_bundles` count every row this
          connection itself inserts, updates or deletes in those tables,
          as it happens; a rollback never takes the count back.

        None (the caller then reads the rows, and remembers no mark) until
        `watch_bundles` has run, and inside a transaction that has itself
        written a bundle table: rows read there may be this transaction's
        own, which a rollback would undo.
        """
        if not self._watching or (self._conn.in_transaction and self._bundle_writes != self._writes_at_begin):
            return None
        execute = self._conn.execute
        return (
            self._connection,
            int(execute("PRAGMA data_version").fetchone()[0]),
            int(execute("PRAGMA main.schema_version").fetchone()[0]),
            int(execute("PRAGMA temp.schema_version").fetchone()[0]),
            self._bundle_writes,
        )

    def watch_bundles(self) -> None:
        """Count this connection's own writes to the bundle tables (for `change_mark`), from now on.

        One TEMP trigger per table and write: TEMP triggers belong to this
        connection alone, fire on its writes only, and cannot be dropped by
        another connection. Made outside any transaction (a rollback cannot
        take them back); run again after a migration, which may rebuild a
        table and its triggers with it, and counted as a write itself.
        """
        self._bundle_writes += 1
        if not all(self.has_table(name) for name in BUNDLE_TABLES) or self._conn.in_transaction:
            self._watching = False
            return
        self._conn.create_function("pw_bundle_write", 0, self._count_bundle_write)
        for table in BUNDLE_TABLES:
            for write in ("INSERT", "UPDATE", "DELETE"):
                self._conn.execute(
                    f"CREATE TEMP TRIGGER IF NOT EXISTS pw_watch_{table}_{write.lower()} AFTER {write} "
                    f"ON main.{table} BEGIN SELECT pw_bundle_write(); END"
                )
        self._watching = True

    def _count_bundle_write(self) -> None:
        self._bundle_writes += 1

    def cannot_write(self) -> str | None:
        """Why this process could not write the store, seen before it tries (None when it can).

        SQLite opens a file it may not write read-only without a word, and
        the first write fails; a command that would make something else
        first (the worker's ledger) asks here. The directory matters too:
        the journal's `-wal` and `-shm` files are made beside the store.
        """
        path = Path(self._path)
        if not os.access(path, os.W_OK):
            return f"this process may not write the file `{path}`"
        if not os.access(path.parent, os.W_OK | os.X_OK):
            return f"this process may not make the journal files in `{path.parent}`"
        return None

    def close(self) -> None:
        self._conn.close()


class PostgresBackend:
    """PostgreSQL through psycopg 3, for many workers and hosts; honours `search_path` in the URL."""

    name = "postgresql"
    blob_type = "BYTEA"

    def __init__(self, url: str) -> None:
        import psycopg  # lazy: a SQLite deployment never loads the driver

        self._errors = psycopg.Error
        try:
            self._conn = psycopg.connect(url, autocommit=True, connect_timeout=10)
        except psycopg.Error as exc:
            raise unreachable(url, first_line(exc)) from None
        self._together: Any = None  # the cursor `query_many` sends several reads through as one statement
        # A search_path naming only schemas that do not exist leaves no schema to read or create in: that
        # is a store that is not there (as a missing SQLite file is), not an empty one.
        try:
            row = self._conn.execute("SELECT current_schema()").fetchone()
        except psycopg.Error as exc:
            self._conn.close()
            raise unreachable(url, first_line(exc)) from None
        if row is None or row[0] is None:
            self._conn.close()
            raise unreachable(url, "no schema of its search_path exists (create the schema first)")

    @staticmethod
    def _sql(sql: str) -> str:
        assert "%" not in sql, "portable SQL must not contain `%`"
        return sql.replace("?", "%s")

    def query(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """The rows of a read. A value holding NUL matches no stored text: every write path refuses NUL
        (`storable`), PostgreSQL's text type cannot hold it, and SQLite finds nothing equal to it; such a
        read is answered with no rows here, as SQLite answers it, rather than refused by the server."""
        if any(type(v) is str and not storable(v) for v in params):
            return []
        rows = self._conn.execute(self._sql(sql), tuple(params)).fetchall()
        return [_plain(row) for row in rows]

    def execute(self, sql: str, params: Sequence[Any] = ()) -> None:
        self._conn.execute(self._sql(sql), tuple(params))

    def query_many(self, statements: Sequence[tuple[str, Sequence[Any]]]) -> list[list[tuple[Any, ...]]]:
        """Several reads, each statement's rows in order, answered in binary; in ONE round trip where exact.

        A round trip to a nearby server costs more than the reads of a
        command (bench/runtime_bench.py); psycopg's pipeline mode saves
        fewer, as it still waits once per statement. So the reads travel as
        one statement (`_pg_reads`), all on one snapshot, as in the caller's
        transaction they would anyway, and go one by one only where the one
        statement would not answer exactly as they would. Binary answers
        carry a bundle's file contents as raw bytes, not hex.
        """
        from pactwright.runtime.store import _pg_reads

        if _pg_reads.mergeable(statements):
            sql, params = _pg_reads.together_sql(statements)
            if self._together is None:
                self._together = _pg_reads.typed_cursor(self._conn)
            try:
                (answer,) = self._together.execute(self._sql(sql), params).fetchall()
            except _pg_reads.UntypedField:
                pass  # a read-only statement whose answer is dropped: the reads go one by one below
            else:
                return [[_plain(row) for row in rows] for rows in answer]
        execute, sql_of = self._conn.execute, self._sql
        answers = [execute(sql_of(sql), tuple(params), binary=True).fetchall() for sql, params in statements]
        return [[_plain(row) for row in rows] for rows in answers]

    def execute_many(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        with self._conn.cursor() as cursor:  # psycopg pipelines executemany: one round trip, not one per row
            cursor.executemany(self._sql(sql), [tuple(row) for row in rows])

    @contextlib.contextmanager
    def transaction(self, *, write: bool, exclusive: bool = True) -> Iterator[None]:
        """`exclusive=False`: no store-wide writer lock; the caller locks its rows (`FOR UPDATE`).

        A read transaction is one snapshot, as SQLite's is: READ COMMITTED
        would let each statement see commits made since the one before, so a
        reader comparing two tables (evidence verify) could see a resolution
        in one and not in the other and call that tampering.
        """
        with self._conn.transaction():
            if not write:
                self._conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            elif exclusive:
                # One writer per store (= per schema): activations serialize, and
                # two first-time migrations cannot race to create the same table.
                self._conn.execute("SELECT pg_advisory_xact_lock(hashtext('pactwright.store:' || current_schema()))")
            yield

    def execute_all(self, statements: Sequence[tuple[str, Sequence[Any]]]) -> None:
        """Writes whose results nobody reads, as ONE statement: each a data-modifying `WITH` item.

        One message, one parse, one answer, where psycopg's pipeline mode
        still pays a client-side wait per statement. PostgreSQL runs the items of one
        statement on one snapshot, so the writes must touch distinct rows
        (the command path writes each of its tables once) and none may read
        another's effect; constraints, foreign keys included, are checked at
        the end of the statement as for separate ones, and any failure fails
        the whole statement inside the caller's transaction.
        """
        if len(statements) == 1:
            sql, params = statements[0]
            self._conn.execute(self._sql(sql), tuple(params))
            return
        assert all(sql.startswith(_WRITES) for sql, _ in statements), "execute_all takes plain writes"
        *items, (last, _) = statements
        head = ", ".join(f"w{n} AS ({sql})" for n, (sql, _) in enumerate(items))
        self._conn.execute(self._sql(f"WITH {head} {last}"), tuple(v for _, params in statements for v in params))

    def has_table(self, name: str) -> bool:
        row = self._conn.execute("SELECT to_regclass(%s) IS NOT NULL", (name,)).fetchone()
        return bool(row and row[0])

    def change_mark(self) -> None:
        """None: PostgreSQL gives no cheap proof that nothing changed, so its callers always read the rows."""

    def watch_bundles(self) -> None:
        """Nothing to watch (`change_mark` is always None here)."""

    def cannot_write(self) -> str | None:
        """None: what the server lets this role write shows only when it writes (PW709 then)."""
        return None

    def close(self) -> None:
        self._conn.close()


def _plain(row: Sequence[Any]) -> tuple[Any, ...]:
    """A row as Python values: bytea a driver hands over as a memoryview becomes bytes."""
    return tuple(bytes(v) if isinstance(v, memoryview) else v for v in row)


def connect(url: str, *, create: bool = True) -> Backend:
    """A backend for `url`: `postgresql://...`, `sqlite:///abs/path`, or a plain file path.

    With `create=False` a missing SQLite file is an error rather than a new
    empty store (for commands that only read).
    """
    if url.startswith(_POSTGRES_PREFIXES):
        if not storable(url):  # the driver would cut the URL at a NUL and connect to what is left
            raise unreachable(url, "the URL holds NUL or text that is not UTF-8")
        return PostgresBackend(url)
    if url.startswith(_SQLITE_PREFIX):
        path = url[len(_SQLITE_PREFIX) :]
        if not path.startswith("/"):
            raise unreachable(url, "a sqlite URL needs an absolute path (`sqlite:///var/lib/pw.db`)")
        return SQLiteBackend(path, create=create)
    if "://" in url:
        raise unreachable(url, "unsupported scheme (use `postgresql://`, `sqlite:///PATH` or a file path)")
    return SQLiteBackend(url, create=create)
