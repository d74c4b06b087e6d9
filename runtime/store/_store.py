"""The store: activated bundles, their activations, and the active version per pact.

`Store` is persistence with integrity checks and no policy: activation
decides *whether* a bundle may become active (`runtime.activation`) and then
writes through a `WriteTx`, inside one transaction that holds the store's
single writer lock. Every load re-verifies the stored bytes
(`_integrity`), so what the runtime executes is what was activated.
"""

from __future__ import annotations

import contextlib
import functools
import sqlite3
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pactwright.canonical import hash_bytes
from pactwright.errors import PactwrightError, StoreError
from pactwright.manifest import MANIFEST_PATH
from pactwright.runtime.store import _integrity as integrity
from pactwright.runtime.store._backend import Backend, connect, first_line, storable, unreachable
from pactwright.runtime.store._migrations import TABLES, applied, check_known, migrate, refuse_foreign, refuse_ledger
from pactwright.signing import APPROVAL_PATH, SIGNATURES_PATH


@dataclass(frozen=True)
class ActiveVersion:
    pact_id: str
    pact_version: str
    manifest_hash: str
    activation_id: int


@dataclass(frozen=True)
class ActivationRecord:
    id: int
    pact_id: str
    pact_version: str
    manifest_hash: str
    approval_hash: str
    signatures_hash: str
    activated_at: str
    forced: bool
    reason: str | None
    previous_version: str | None
    previous_manifest_hash: str | None


@dataclass(frozen=True)
class StoredBundle:
    """A loaded, re-verified bundle: its files (with approval and signatures) and its activation.

    `files` holds every file, or, for a load with `only` (the command path
    reads what it executes), the manifest, approval, signatures and the
    files asked for; `complete` says which.
    """

    pact_id: str
    pact_version: str
    manifest_hash: str
    files: Mapping[str, bytes]
    activation: ActivationRecord
    complete: bool = True

    def active_version(self) -> ActiveVersion:
        return ActiveVersion(self.pact_id, self.pact_version, self.manifest_hash, self.activation.id)


@dataclass(frozen=True)
class Finding:
    """One problem `Store.verify_all` found: the code, where, and what."""

    code: str
    message: str
    subject: str


_ACTIVATION_COLUMNS = (
    "id, pact_id, pact_version, manifest_hash, approval_hash, signatures_hash, activated_at, forced, reason, "
    "previous_version, previous_manifest_hash"
)


def _record(row: tuple[Any, ...]) -> ActivationRecord:
    values = list(row)
    values[7] = bool(values[7])
    return ActivationRecord(*values)


class WriteTx:
    """Writes of one activation; exists only inside `Store.writing()`."""

    def __init__(self, backend: Backend) -> None:
        self._db = backend

    def active(self, pact_id: str) -> ActiveVersion | None:
        """The active version, its stored bundle re-verified first.

        The version check compares against this; an `active` row edited to
        an older version must not open the door to a rollback (PW707).
        """
        stored = _load_active(self._db, pact_id)
        return None if stored is None else stored.active_version()

    def put_bundle(self, pact_id: str, pact_version: str, manifest_hash: str, files: Mapping[str, bytes]) -> None:
        """Store a bundle's manifest-covered files, once; a bundle stored before must still be intact."""
        if self._db.query("SELECT 1 FROM bundles WHERE manifest_hash = ?", (manifest_hash,)):
            rows = _file_rows(self._db.query(*_file_rows_sql(manifest_hash)), manifest_hash)
            integrity.check_bundle_rows(manifest_hash, pact_id, pact_version, rows)
            return
        self._db.execute(
            "INSERT INTO bundles (manifest_hash, pact_id, pact_version) VALUES (?, ?, ?)",
            (manifest_hash, pact_id, pact_version),
        )
        self._db.execute_many(
            "INSERT INTO bundle_files (manifest_hash, path, sha256, size, content) VALUES (?, ?, ?, ?, ?)",
            [(manifest_hash, path, hash_bytes(data), len(data), data) for path, data in sorted(files.items())],
        )

    def record_activation(
        self,
        *,
        pact_id: str,
        pact_version: str,
        manifest_hash: str,
        approval: bytes,
        signatures: bytes,
        activated_at: str,
        forced: bool,
        reason: str | None,
        previous: ActiveVersion | None,
    ) -> int:
        """Append the activation record and point the pact's active version at it; returns its id."""
        # Ids are allocated under the writer lock, so MAX + 1 is race-free and portable.
        activation_id = int(self._db.query("SELECT COALESCE(MAX(id), 0) + 1 FROM activations")[0][0])
        self._db.execute(
            f"INSERT INTO activations ({_ACTIVATION_COLUMNS}, approval, signatures) "  # noqa: S608 - fixed columns
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                activation_id,
                pact_id,
                pact_version,
                manifest_hash,
                hash_bytes(approval),
                hash_bytes(signatures),
                activated_at,
                int(forced),
                reason,
                previous.pact_version if previous else None,
                previous.manifest_hash if previous else None,
                approval,
                signatures,
            ),
        )
        self._db.execute(
            "INSERT INTO active (pact_id, pact_version, manifest_hash, activation_id) VALUES (?, ?, ?, ?) "
            "ON CONFLICT (pact_id) DO UPDATE SET pact_version = excluded.pact_version, "
            "manifest_hash = excluded.manifest_hash, activation_id = excluded.activation_id",
            (pact_id, pact_version, manifest_hash, activation_id),
        )
        return activation_id


_ACTIVATION_SQL = (
    f"SELECT {', '.join('a.' + c.strip() for c in _ACTIVATION_COLUMNS.split(','))}, "  # noqa: S608
    "b.manifest_hash, b.pact_id, b.pact_version, a.approval, a.signatures "
    "FROM activations a LEFT JOIN bundles b ON b.manifest_hash = a.manifest_hash WHERE a.id = ?"
)


_ACTIVATION_NAMES = tuple(c.strip() for c in _ACTIVATION_COLUMNS.split(","))


def _activation_row(
    rows: list[tuple[Any, ...]], activation_id: int
) -> tuple[dict[str, Any], bytes, bytes, tuple[Any, Any] | None] | None:
    """The activation row, its approval and signatures, and its bundle's (pact id, version) row or None.

    From the rows of `_ACTIVATION_SQL`: one statement (the bundle row
    joined), so a load costs one round trip less.
    """
    if not rows:
        return None
    names = _ACTIVATION_NAMES
    what = f"activation {activation_id}"
    row = rows[0]
    count = len(names)
    return (
        dict(zip(names, row[:count], strict=True)),
        integrity.as_bytes(row[-2], "PW706", f"the approval of {what}", file=APPROVAL_PATH),
        integrity.as_bytes(row[-1], "PW706", f"the signatures of {what}", file=SIGNATURES_PATH),
        None if row[count] is None else (row[count + 1], row[count + 2]),
    )


def _load(
    db: Backend,
    activation_id: int,
    active: tuple[str, str, str] | None,
    only: Sequence[str] | None = None,
    manifest_hash: str | None = None,
    also: Sequence[tuple[str, Sequence[Any]]] = (),
) -> tuple[StoredBundle, list[list[tuple[Any, ...]]]]:
    """One activation's bundle, every byte it returns and every cross-reference re-verified.

    With `active` (pact id, version, manifest hash from the `active` row),
    the pointer must also agree with the activation it names. With `only`
    (paths, and prefixes ending in `/`), only those files' contents are read
    and re-hashed; every other stored file's row must still be listed in the
    manifest with the manifest's hash and size (`integrity.check_bundle_rows`).
    With `manifest_hash` (the one the caller's record names), the activation
    and file rows are read in one round trip, with the statements of `also`,
    whose rows come back beside the bundle; the activation must then hold
    that manifest.
    """
    if manifest_hash is None:
        found = _activation_row(db.query(_ACTIVATION_SQL, (activation_id,)), activation_id)
        extra: list[list[tuple[Any, ...]]] = db.query_many(also) if also else []
        file_rows = None
    else:
        # Only a load whose every input is in hand is remembered (not one that must read another manifest's rows).
        slot = (activation_id, active, None if only is None else tuple(only), manifest_hash)
        known = _VERIFIED.get(slot)
        mark = db.change_mark()
        if known is not None and mark is not None and known[2] == mark:
            # Nothing was written to the bundle tables since these rows were read and verified.
            return known[1], db.query_many(also) if also else []
        sql, params = _file_rows_sql(manifest_hash, only)
        answers = db.query_many([(_ACTIVATION_SQL, (activation_id,)), (sql, params), *also])
        file_rows, extra = answers[1], answers[2:]
        seen = (tuple(answers[0]), tuple(file_rows))
        if known is not None and known[0] == seen:  # every byte read equal to what was verified
            _VERIFIED[slot] = (seen, known[1], mark)
            return known[1], extra
        found = _activation_row(answers[0], activation_id)
    stored = _verify(db, activation_id, active, only, manifest_hash, found, file_rows)
    if file_rows is not None and found is not None and str(found[0]["manifest_hash"]) == manifest_hash:
        if len(_VERIFIED) >= 64:
            _VERIFIED.clear()
        _VERIFIED[slot] = (seen, stored, mark)
    return stored, extra


# Per (activation, pointer, paths read, manifest): the stored rows last verified in full (every byte of
# the activation row and of the file rows read), the bundle they gave, and the store's change mark when
# they were read. A load whose rows compare equal to those is that bundle (verification is a function
# of those bytes alone, so the same bytes are verified once per process); any changed byte fails the
# comparison and is verified in full. A load on the same SQLite connection whose change mark is still
# the one recorded (`Backend.change_mark`: no commit by any other connection, no schema change and no
# write of this one to the bundle tables since) would read those same rows again, and takes the bundle
# without reading them.
_VERIFIED: dict[tuple[Any, ...], tuple[tuple[Any, ...], StoredBundle, tuple[int, ...] | None]] = {}


def _verify(
    db: Backend,
    activation_id: int,
    active: tuple[str, str, str] | None,
    only: Sequence[str] | None,
    manifest_hash: str | None,
    found: tuple[dict[str, Any], bytes, bytes, tuple[Any, Any] | None] | None,
    file_rows: list[tuple[Any, ...]] | None,
) -> StoredBundle:
    if active is not None:
        pact_id, version, manifest_hash = active
        integrity.check_active_row(pact_id, (version, manifest_hash, activation_id), found and found[0])
    if found is None:
        raise StoreError(f"there is no activation {activation_id} in the store", code="PW702")
    activation, approval, signatures, bundle = found
    if manifest_hash is not None and str(activation["manifest_hash"]) != manifest_hash:
        file_rows = None  # read for another manifest: read this one's below
    manifest_hash = str(activation["manifest_hash"])
    if bundle is None:
        raise integrity.tampered("PW704", f"activation {activation_id} points at bundle {manifest_hash}, which is gone")
    pact = (str(bundle[0]), str(bundle[1]))
    if file_rows is None:
        file_rows = db.query(*_file_rows_sql(manifest_hash, only))
    _, files = integrity.check_bundle_rows(manifest_hash, *pact, _file_rows(file_rows, manifest_hash, only))
    integrity.check_activation_row(activation, approval, signatures, manifest_hash, pact)
    activation["forced"] = bool(activation["forced"])
    return StoredBundle(
        pact_id=pact[0],
        pact_version=pact[1],
        manifest_hash=manifest_hash,
        files={**files, APPROVAL_PATH: approval, SIGNATURES_PATH: signatures},
        activation=ActivationRecord(**activation),
        complete=only is None,
    )


def _load_active(db: Backend, pact_id: str) -> StoredBundle | None:
    """The pact's active bundle, re-verified, or None if it was never activated.

    The pointer and the pact's latest activation id are read in one
    statement (one snapshot, even under PostgreSQL's READ COMMITTED), and the
    pointer must name that latest activation (`integrity.check_latest`).
    A pact id no store can hold (`storable`) names no pact: None, without a statement.
    """
    if not storable(pact_id):
        return None
    rows = db.query(
        "SELECT a.activation_id, a.pact_version, a.manifest_hash, h.latest "
        "FROM (SELECT MAX(id) AS latest FROM activations WHERE pact_id = ?) h "
        "LEFT JOIN active a ON a.pact_id = ?",
        (pact_id, pact_id),
    )
    pointers = [row for row in rows if row[0] is not None]
    activation_id = integrity.check_latest(pact_id, pointers, rows[0][3])
    if activation_id is None:
        return None
    _, version, manifest_hash, _ = pointers[0]
    return _load(db, activation_id, (pact_id, str(version), str(manifest_hash)))[0]


def _file_rows_sql(manifest_hash: str, only: Sequence[str] | None = None) -> tuple[str, list[Any]]:
    """The statement reading a bundle's file rows; with `only`, the content of the manifest and those files alone.

    A file left out has None for its content (the database never sends it);
    its path, hash and size columns are still returned and checked.
    """
    sql, params = _file_rows_statement(None if only is None else tuple(only))
    return sql, [*params, manifest_hash]


@functools.lru_cache(maxsize=64)
def _file_rows_statement(only: tuple[str, ...] | None) -> tuple[str, tuple[Any, ...]]:
    """`_file_rows_sql` without the manifest hash (its last parameter): a function of `only` alone."""
    params: tuple[str, ...] = ()
    if only is None:
        content = "content"
    else:
        exact = [MANIFEST_PATH, *(p for p in only if not p.endswith("/"))]
        prefixes = [p for p in only if p.endswith("/")]
        tests = [f"path IN ({', '.join('?' * len(exact))})", *(f"substr(path, 1, {len(p)}) = ?" for p in prefixes)]
        content, params = f"CASE WHEN {' OR '.join(tests)} THEN content END", (*exact, *prefixes)
    sql = f"SELECT path, sha256, size, {content} FROM bundle_files WHERE manifest_hash = ? ORDER BY path"  # noqa: S608
    return sql, params


def _file_rows(
    rows: list[tuple[Any, ...]], manifest_hash: str, only: Sequence[str] | None = None
) -> list[tuple[str, str, int, bytes | None]]:
    """The rows of `_file_rows_sql`, their types checked."""
    exact_paths = None if only is None else {MANIFEST_PATH, *only}
    prefix_paths = () if only is None else tuple(p for p in only if p.endswith("/"))
    out: list[tuple[str, str, int, bytes | None]] = []
    for stored_path, digest, stored_size, stored_data in rows:
        path = str(stored_path)
        wanted = exact_paths is None or path in exact_paths or path.startswith(prefix_paths)
        size, data = stored_size, stored_data if wanted else None
        if type(size) is not int or (wanted and type(data) is not bytes):  # the common case builds no message
            where = {"file": path}
            what = f"the stored `{path}` of bundle {manifest_hash}"
            size = integrity.as_int(size, "PW705", f"the size of {what}", **where)
            data = integrity.as_bytes(data, "PW705", what, **where) if wanted else None
        out.append((path, str(digest), size, data))
    return out


def _check_histories(db: Backend) -> list[Finding]:
    """Every pact's activation records chain (`integrity.check_history`)."""
    findings: list[Finding] = []
    by_pact: dict[str, list[tuple[Any, ...]]] = {}
    for row in db.query(
        "SELECT pact_id, id, pact_version, manifest_hash, forced, previous_version, previous_manifest_hash "
        "FROM activations ORDER BY id"
    ):
        by_pact.setdefault(str(row[0]), []).append(row[1:])
    for pact_id, records in sorted(by_pact.items()):
        try:
            integrity.check_history(pact_id, records)
        except StoreError as exc:
            findings.append(Finding(exc.code, exc.message, f"activations of {pact_id}"))
    return findings


class Store:
    """An open store. Use `open_store(url)`; close it (or use `with`) when done."""

    def __init__(self, backend: Backend) -> None:
        self._db = backend

    @property
    def backend(self) -> str:
        return self._db.name

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._db.close()

    def schema_version(self) -> int:
        """The highest applied migration (0 for a store never migrated)."""
        return max(applied(self._db), default=0)

    def migrate(self) -> int:
        """Apply every missing migration, as `open_store` does by default; returns how many ran.

        For a store opened with `migrate_schema=False` by a caller that first
        checked what it is about to write (`runtime.agreements.check_open`).
        """
        with _refused_as_pw709("its schema migration"):
            ran = migrate(self._db)
            self._db.watch_bundles()
            return ran

    def check_writable(self) -> None:
        """Refuse (PW709) a store this process could not write, before a command makes anything else."""
        why = self._db.cannot_write()
        if why is not None:
            raise StoreError(f"the store cannot be written: {why}", code="PW709")

    @contextlib.contextmanager
    def writing(self) -> Iterator[WriteTx]:
        """One write transaction under the writer lock; any exception rolls all of it back."""
        with _refused_as_pw709("the write"), self._db.transaction(write=True):
            yield WriteTx(self._db)

    @contextlib.contextmanager
    def transaction(self, *, write: bool = True, exclusive: bool = True) -> Iterator[Backend]:
        """A raw write transaction for the runtime's own tables (agreements, events, outbox...).

        `exclusive=False` skips PostgreSQL's store-wide writer lock, for the
        command path, which locks its agreement row instead (`FOR UPDATE`);
        on SQLite every writer is exclusive. Driver errors become PW709.
        """
        try:
            with self._db.transaction(write=write, exclusive=exclusive):
                yield self._db
        except PactwrightError:
            raise
        except Exception as exc:
            if not _is_db_error(exc):
                raise
            raise StoreError(f"the store refused the write and rolled it back: {exc}", code="PW709") from exc

    def load_activation_in(self, db: Backend, activation_id: int, only: Sequence[str] | None = None) -> StoredBundle:
        """`load_activation` inside a transaction already open on `db` (from `transaction()`).

        `only` (paths, and prefixes ending in `/`): read and re-hash just those
        files (and the manifest, approval and signatures), for a caller that
        uses nothing else; the rows of the others are still checked against
        the manifest, but their bytes are not read.
        """
        return _load(db, activation_id, None, only)[0]

    def load_recorded_in(
        self,
        db: Backend,
        activation_id: int,
        manifest_hash: str,
        only: Sequence[str] | None = None,
        also: Sequence[tuple[str, Sequence[Any]]] = (),
    ) -> tuple[StoredBundle, list[list[tuple[Any, ...]]]]:
        """`load_activation_in` for a record that names its manifest, in one round trip with `also`.

        The caller's own statements (`also`, read-only) travel with the
        bundle's; their rows come back in order beside the bundle, which is
        verified exactly as `load_activation_in` verifies it.
        """
        return _load(db, activation_id, None, only, manifest_hash, also)

    def active_in(self, db: Backend, pact_id: str) -> StoredBundle:
        """`load_active` inside a transaction already open on `db` (PW702 when nothing is active)."""
        stored = _load_active(db, pact_id)
        if stored is None:
            raise StoreError(f"no version of `{pact_id}` is active", code="PW702")
        return stored

    def _read(self) -> contextlib.AbstractContextManager[None]:
        return self._db.transaction(write=False)

    def active(self, pact_id: str) -> ActiveVersion | None:
        """The active version of `pact_id` (re-verified, like every load), or None."""
        if self.schema_version() == 0:
            return None
        with self._read():
            return WriteTx(self._db).active(pact_id)

    def actives(self) -> list[ActiveVersion]:
        with self._read():
            rows = self._db.query(
                "SELECT pact_id, pact_version, manifest_hash, activation_id FROM active ORDER BY pact_id"
            )
        return [ActiveVersion(*row) for row in rows]

    def history(self, pact_id: str | None = None) -> list[ActivationRecord]:
        """Activation records, oldest first (of one pact, or all)."""
        where, params = ("WHERE pact_id = ? ", (pact_id,)) if pact_id else ("", ())
        with self._read():
            rows = self._db.query(f"SELECT {_ACTIVATION_COLUMNS} FROM activations {where}ORDER BY id", params)  # noqa: S608
        return [_record(row) for row in rows]

    def load_active(self, pact_id: str) -> StoredBundle:
        """The active bundle of `pact_id`, every stored byte re-verified (PW702-PW707)."""
        if self.schema_version() == 0:
            raise StoreError(f"no version of `{pact_id}` is active (the store is empty)", code="PW702")
        with self._read():
            stored = _load_active(self._db, pact_id)
        if stored is None:
            raise StoreError(f"no version of `{pact_id}` is active", code="PW702")
        return stored

    def load_activation(self, activation_id: int) -> StoredBundle:
        """The bundle of one activation record (active or not), re-verified."""
        with self._read():
            return _load(self._db, activation_id, None)[0]

    def verify_all(self) -> list[Finding]:
        """Re-verify every stored bundle, activation and active pointer; every problem, not just the first."""
        findings: list[Finding] = []

        def collect(subject: str, check: Callable[..., object], *args: Any) -> None:
            try:
                check(*args)
            except StoreError as exc:
                findings.append(Finding(exc.code, exc.message, subject))

        def check_bundle(manifest_hash: str, pact_id: str, version: str) -> None:
            rows = _file_rows(self._db.query(*_file_rows_sql(manifest_hash)), manifest_hash)
            integrity.check_bundle_rows(manifest_hash, pact_id, version, rows)

        with self._read():
            for manifest_hash, pact_id, version in self._db.query(
                "SELECT manifest_hash, pact_id, pact_version FROM bundles ORDER BY pact_id, manifest_hash"
            ):
                collect(f"{pact_id} {version} bundle {manifest_hash}", check_bundle, manifest_hash, pact_id, version)
            for (activation_id,) in self._db.query("SELECT id FROM activations ORDER BY id"):
                collect(f"activation {activation_id}", _load, self._db, int(activation_id), None)
            findings += _check_histories(self._db)
            # Every pact with an active row or an activation record: its pointer names its latest activation.
            for (pact_id,) in self._db.query(
                "SELECT pact_id FROM activations UNION SELECT pact_id FROM active ORDER BY 1"
            ):
                collect(f"active version of {pact_id}", _load_active, self._db, str(pact_id))
        return findings

    def dump(self) -> dict[str, list[tuple[Any, ...]]]:
        """Every row of every table, in a fixed order: for audits, and for tests that a refusal changed nothing."""
        out: dict[str, list[tuple[Any, ...]]] = {}
        with self._read():
            for table in TABLES:
                if not self._db.has_table(table):
                    continue
                rows = self._db.query(f"SELECT * FROM {table}")  # noqa: S608 - fixed table names
                out[table] = sorted(rows, key=repr)
        return out


def _is_db_error(exc: Exception) -> bool:
    """A driver error (constraint, lock, connection) rather than a bug: reported as PW709."""
    psycopg = sys.modules.get("psycopg")
    return isinstance(exc, sqlite3.Error) or (psycopg is not None and isinstance(exc, psycopg.Error))


@contextlib.contextmanager
def _refused_as_pw709(what: str) -> Iterator[None]:
    """A database error inside (the transaction already rolled back) as StoreError PW709 naming `what`."""
    try:
        yield
    except PactwrightError:
        raise
    except Exception as exc:
        if not _is_db_error(exc):
            raise
        raise StoreError(f"the store refused {what} and rolled it back: {exc}", code="PW709") from exc


def open_store(url: str, *, migrate_schema: bool = True) -> Store:
    """Open (and by default create and migrate) the store at `url`.

    `migrate_schema=False` opens an existing store as it is, for commands
    that only read (`store verify`): it refuses a missing SQLite file and a
    store with an unknown migration, and reports an unmigrated one as empty.
    """
    backend = connect(url, create=migrate_schema)
    try:
        if migrate_schema:
            migrate(backend)
            backend.watch_bundles()
        else:
            refuse_ledger(backend)
            refuse_foreign(backend)
            check_known(applied(backend))
    except Exception as exc:
        backend.close()
        if not _is_db_error(exc):
            raise
        # The server or file refused the schema itself (no schema selected, read-only, ...).
        raise unreachable(url, first_line(exc)) from exc
    except BaseException:
        backend.close()
        raise
    return Store(backend)
