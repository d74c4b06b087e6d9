"""Where the durable ledger lives: its URL rules, its connection, its own schema and migrations.

The ledger is a database of its own, never the store's. A SQLite ledger is a
separate file (WAL, full fsync, `BEGIN IMMEDIATE` for writers, the store's
own SQLite connection code); a PostgreSQL ledger is a separate schema,
`pactwright_ledger` unless the URL names another through `search_path`. The
ledger keeps its own migration table (`ledger_migrations`), so the store and
the ledger evolve, back up and restore independently.

Every table name starts with `ledger_`, and a database that already holds
other tables but no ledger is refused: pointing `--ledger` at the store by
mistake must not graft ledger tables onto it.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from pactwright.errors import LedgerError, UsageError

from .store._backend import Backend, SQLiteBackend, first_line, storable

__all__ = ["DEFAULT_SCHEMA", "LedgerTarget", "connect_ledger", "default_url", "parse_target"]

DEFAULT_SCHEMA: Final = "pactwright_ledger"
_POSTGRES_PREFIXES: Final = ("postgresql://", "postgres://")
_SQLITE_PREFIX: Final = "sqlite://"
_SCHEMA_RE: Final = re.compile(r"[a-z_][a-z0-9_]{0,62}")
_SEARCH_PATH_RE: Final = re.compile(r"(?:^|\s)(?:-c\s*|--)search_path=(\S+)")

# (version, name, statements); statements may name `{id}` for the dialect's identity column.
_MIGRATIONS: Final[tuple[tuple[int, str, tuple[str, ...]], ...]] = (
    (
        1,
        "ledger transactions, postings, accounts and balances",
        (
            "CREATE TABLE ledger_transactions ("
            " id {id},"
            " reference TEXT NOT NULL UNIQUE,"
            " program_text TEXT NOT NULL,"
            " variables TEXT NOT NULL)",
            "CREATE TABLE ledger_postings ("
            " reference TEXT NOT NULL REFERENCES ledger_transactions (reference),"
            " position INTEGER NOT NULL,"
            " source TEXT NOT NULL,"
            " destination TEXT NOT NULL,"
            " amount TEXT NOT NULL,"
            " asset TEXT NOT NULL,"
            " PRIMARY KEY (reference, position))",
            "CREATE TABLE ledger_accounts (account TEXT PRIMARY KEY)",
            "CREATE TABLE ledger_balances ("
            " account TEXT NOT NULL REFERENCES ledger_accounts (account),"
            " asset TEXT NOT NULL,"
            " amount TEXT NOT NULL,"
            " PRIMARY KEY (account, asset))",
        ),
    ),
)
LATEST: Final = _MIGRATIONS[-1][0]


def unreachable(url: str, why: object) -> UsageError:
    return UsageError(
        f"cannot open the ledger `{url}`: {why}",
        code="PW550",
        hint="pass `--ledger PATH` (a SQLite file of its own) or `--ledger postgresql://...`",
    )


@dataclass(frozen=True, slots=True)
class LedgerTarget:
    """A parsed ledger URL: a SQLite file path, or a PostgreSQL conninfo and the schema to use."""

    url: str
    sqlite_path: str | None = None
    schema: str | None = None


def _schema_of(url: str) -> str | None:
    """The first schema the URL's `options=-csearch_path=...` names, if it names one."""
    from psycopg import conninfo  # lazy: a SQLite deployment never loads the driver

    try:
        params = conninfo.conninfo_to_dict(url)
    except Exception as exc:  # noqa: BLE001 - psycopg raises ProgrammingError and others for bad URLs
        raise unreachable(url, f"malformed PostgreSQL URL ({str(exc).strip() or type(exc).__name__})") from None
    options = params.get("options")
    if not isinstance(options, str):
        return None
    match = _SEARCH_PATH_RE.search(options)
    if match is None:
        return None
    first = match[1].split(",")[0].strip().strip('"')
    if _SCHEMA_RE.fullmatch(first) is None:
        raise unreachable(url, f"the schema `{first}` is not a plain lower-case name")
    return first


def parse_target(url: str) -> LedgerTarget:
    """Check a `--ledger` URL without connecting; PW550 for anything malformed."""
    if not isinstance(url, str) or not url.strip():
        raise unreachable(str(url), "the URL is empty")
    if "\x00" in url:
        raise unreachable(url.replace("\x00", "\\0"), "the URL contains a NUL byte")
    if url.startswith(_POSTGRES_PREFIXES):
        if not storable(url):  # the driver cannot send text that is not UTF-8
            raise unreachable(url, "the URL holds text that is not UTF-8")
        return LedgerTarget(url, schema=_schema_of(url) or DEFAULT_SCHEMA)
    if url.startswith(_SQLITE_PREFIX):
        path = url[len(_SQLITE_PREFIX) :]
        if not path.startswith("/"):
            raise unreachable(url, "a sqlite URL needs an absolute path (`sqlite:///var/lib/pw.ledger.sqlite`)")
        return LedgerTarget(url, sqlite_path=path)
    if "://" in url:
        raise unreachable(url, "unsupported scheme (use `postgresql://`, `sqlite:///PATH` or a file path)")
    return LedgerTarget(url, sqlite_path=url)


def default_url(store_url: str) -> tuple[str, str | None]:
    """The ledger URL implied by a store URL, and the schema for PostgreSQL.

    A SQLite store `DIR/NAME.db` gets the sibling file `DIR/NAME.ledger.sqlite`.
    A PostgreSQL store gets the same server and database with the schema
    `pactwright_ledger`; a store that names its own schema S (through
    `search_path`) gets `S_ledger`, so two stores on one server never share
    a ledger by accident.
    """
    if store_url.startswith(_POSTGRES_PREFIXES):
        store_schema = _schema_of(store_url)
        if store_schema is None:
            return store_url, DEFAULT_SCHEMA
        schema = f"{store_schema}_ledger"
        if _SCHEMA_RE.fullmatch(schema) is None:
            raise unreachable(store_url, f"the derived ledger schema `{schema}` is too long; pass `--ledger`")
        return store_url, schema
    path = store_url[len(_SQLITE_PREFIX) :] if store_url.startswith(_SQLITE_PREFIX) else store_url
    if "://" in path or not path:
        raise unreachable(store_url, "no ledger URL can be derived from this store URL; pass `--ledger`")
    store = Path(path)
    return str(store.with_name(f"{store.stem}.ledger.sqlite")), None


class PostgresLedgerBackend:
    """One autocommit psycopg connection whose `search_path` is the ledger's schema.

    Unlike the store's backend, a write transaction takes no schema-wide lock:
    the ledger locks the rows of the accounts a program touches, so programs
    on disjoint accounts commit in parallel.
    """

    name = "postgresql"
    blob_type = "BYTEA"

    def __init__(self, url: str, schema: str, *, create: bool) -> None:
        import psycopg

        self.errors: type[Exception] = psycopg.Error
        self.unique_violation: type[Exception] = psycopg.errors.UniqueViolation
        self.schema = schema
        try:
            self._conn = psycopg.connect(url, autocommit=True, connect_timeout=10)
        except psycopg.Error as exc:
            first = first_line(exc)
            raise unreachable(url, first) from None
        try:
            exists = self._conn.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s", (schema,)).fetchone()
            if exists is None:
                if not create:
                    raise unreachable(url, f"the schema `{schema}` holds no ledger")
                with self._conn.transaction():
                    self._conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (f"pactwright.ledger:{schema}",))
                    self._conn.execute(f'CREATE SCHEMA IF NOT EXISTS "{schema}"')
            self._conn.execute(f'SET search_path TO "{schema}"')
        except psycopg.Error as exc:
            self._conn.close()
            raise unreachable(url, first_line(exc)) from None
        except UsageError:
            self._conn.close()
            raise

    @staticmethod
    def _sql(sql: str) -> str:
        assert "%" not in sql, "portable SQL must not contain `%`"
        return sql.replace("?", "%s")

    def query(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        return [tuple(row) for row in self._conn.execute(self._sql(sql), tuple(params)).fetchall()]

    def execute(self, sql: str, params: Sequence[Any] = ()) -> None:
        self._conn.execute(self._sql(sql), tuple(params))

    def execute_many(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        with self._conn.cursor() as cursor:
            cursor.executemany(self._sql(sql), [tuple(row) for row in rows])

    @contextlib.contextmanager
    def transaction(self, *, write: bool) -> Iterator[None]:
        del write  # row locks are taken by the statements themselves
        with self._conn.transaction():
            yield

    def lock_reference(self, reference: str) -> None:
        """Serialize applies of one reference (a transaction-scoped advisory lock)."""
        self._conn.execute(
            "SELECT pg_advisory_xact_lock(hashtext(%s))", (f"pactwright.ledger:{self.schema}:ref:{reference}",)
        )

    def lock_schema(self) -> None:
        self._conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (f"pactwright.ledger:{self.schema}",))

    def has_table(self, name: str) -> bool:
        # A scan of pg_tables under the statement's snapshot, not `to_regclass`: the catalog cache is
        # not refreshed by an advisory lock, so a migration that waited for another one would miss its table.
        row = self._conn.execute(
            "SELECT 1 FROM pg_catalog.pg_tables WHERE schemaname = %s AND tablename = %s", (self.schema, name)
        ).fetchone()
        return row is not None

    def other_tables(self) -> list[str]:
        rows = self._conn.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = %s AND table_name NOT LIKE %s",
            (self.schema, "ledger\\_%"),
        ).fetchall()
        return sorted(str(row[0]) for row in rows)

    def close(self) -> None:
        self._conn.close()


def _sqlite(target: LedgerTarget, *, create: bool) -> Backend:
    path = target.sqlite_path or ""
    if not create and not Path(path).is_file():
        raise unreachable(target.url, "no such ledger file")
    if Path(path).is_dir():
        raise unreachable(target.url, "it is a directory")
    try:
        return SQLiteBackend(path, create=create)
    except UsageError as exc:
        # The store's backend words its errors for the store; keep only the reason.
        raise unreachable(target.url, exc.message.partition("`: ")[2] or exc.message) from None


def _sqlite_other_tables(backend: Backend) -> list[str]:
    rows = backend.query(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'ledger\\_%' ESCAPE '\\'"
    )
    return sorted(str(row[0]) for row in rows if not str(row[0]).startswith("sqlite_"))


def connect_ledger(target: LedgerTarget, *, create: bool) -> Backend | PostgresLedgerBackend:
    """Connect and bring the ledger schema to the latest migration (unless `create` is False)."""
    backend: Backend | PostgresLedgerBackend
    if target.schema is not None:
        backend = PostgresLedgerBackend(target.url, target.schema, create=create)
    else:
        backend = _sqlite(target, create=create)
    try:
        _migrate(backend, target, create=create)
    except BaseException:
        backend.close()
        raise
    return backend


def _recorded(backend: Backend | PostgresLedgerBackend) -> list[tuple[Any, ...]]:
    return backend.query("SELECT version, name FROM ledger_migrations ORDER BY version")


def _check_recorded(rows: list[tuple[Any, ...]], url: str) -> int:
    known = {version: name for version, name, _ in _MIGRATIONS}
    for version, name in rows:
        if known.get(version) != name:
            raise LedgerError(
                f"the ledger `{url}` records schema migration {version} `{name}`, which this pactwright does not have",
                code="PW551",
                hint="use the release that wrote the ledger, or a newer one",
            )
    return max((int(row[0]) for row in rows), default=0)


def _refuse_foreign(others: list[str], url: str) -> None:
    if others:
        raise unreachable(url, f"it is not a ledger database: it already holds other tables ({', '.join(others[:3])})")


def _probe(backend: Backend | PostgresLedgerBackend, target: LedgerTarget, *, create: bool) -> list[str] | None:
    """The other tables of a database the ledger must migrate, or None when there is nothing to do."""
    if backend.has_table("ledger_migrations"):
        current = _check_recorded(_recorded(backend), target.url)
        if current == LATEST or not create:
            return None
    elif not create:
        raise unreachable(target.url, "it holds no ledger")
    return backend.other_tables() if isinstance(backend, PostgresLedgerBackend) else _sqlite_other_tables(backend)


def _migrate(backend: Backend | PostgresLedgerBackend, target: LedgerTarget, *, create: bool) -> None:
    try:
        others = _probe(backend, target, create=create)
    except (UsageError, LedgerError):
        raise
    except Exception as exc:  # noqa: BLE001 - sqlite3/psycopg errors: a file or server that is no database
        raise unreachable(target.url, f"it cannot be read as a database: {exc}") from None
    if others is None:
        return
    identity = (
        "BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY"
        if isinstance(backend, PostgresLedgerBackend)
        else "INTEGER PRIMARY KEY AUTOINCREMENT"
    )
    try:
        with backend.transaction(write=True):
            if isinstance(backend, PostgresLedgerBackend):
                backend.lock_schema()
            if not backend.has_table("ledger_migrations"):
                _refuse_foreign(others, target.url)
                backend.execute("CREATE TABLE ledger_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL)")
            current = _check_recorded(_recorded(backend), target.url)
            for version, name, statements in _MIGRATIONS:
                if version <= current:
                    continue
                for statement in statements:
                    backend.execute(statement.replace("{id}", identity))
                backend.execute("INSERT INTO ledger_migrations (version, name) VALUES (?, ?)", (version, name))
    except (UsageError, LedgerError):
        raise
    except Exception as exc:  # noqa: BLE001 - sqlite3/psycopg errors: a database that refuses the schema
        raise unreachable(target.url, f"the database refused the ledger schema: {exc}") from None
