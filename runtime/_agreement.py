"""One agreement's row and its bundle, as the command path reads and writes them.

The row holds canonical JSON (pactwright.canonical) in text columns: money
as minor units in decimal strings, times as epoch seconds. Reading a row
back refuses anything that does not have the shape written here (PW518), so
an edited row is never guessed at.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from pactwright.canonical import canonical_bytes, hash_bytes, load_json
from pactwright.errors import CommandError, PactwrightError
from pactwright.runtime._evaluate import Value, View, typed_value
from pactwright.runtime.store import Store, StoredBundle
from pactwright.runtime.store._backend import Backend, storable

if TYPE_CHECKING:
    from pactwright.bundle_models import TransitionTable

TRANSITIONS_PATH = "transitions.json"
COLUMNS = (
    "id, pact_id, manifest_hash, activation_id, state, version, params, parties, accounts, stamps, fired, "
    "balances, reached, approved, opened_at, updated_at"
)


_DUMPED: dict[str, str] = {}  # repr of a JSON value -> its canonical text (most columns repeat)


def dumps(value: Any) -> str:
    """Canonical JSON text for a JSON column.

    Columns such as params, parties and accounts are the same on every
    commit; their canonical text is remembered by the value's `repr`, which
    for these plain JSON values (str, int, lists, dicts) is equal exactly when
    the values are, so the same text comes back without re-encoding.
    """
    key = repr(value)
    found = _DUMPED.get(key)
    if found is None:
        found = canonical_bytes(value).decode("utf-8")
        if len(_DUMPED) >= 4096:
            _DUMPED.clear()
        _DUMPED[key] = found
    return found


def loads(text: object, what: str) -> Any:
    if isinstance(text, bytes | memoryview):
        text = bytes(text).decode("utf-8", "replace")
    try:
        return load_json(str(text).encode("utf-8"))
    except PactwrightError:
        raise CommandError(f"the stored {what} is not canonical JSON", code="PW518") from None


@dataclass(frozen=True)
class _Index:
    """What the command path looks up in transitions.json, by name: derived once per document's bytes."""

    kinds: Mapping[str, str]  # param name -> declared type
    transitions: Mapping[str, dict[str, Any]]
    states: Mapping[str, dict[str, Any]]
    external: frozenset[str]

    @classmethod
    def of(cls, doc: Mapping[str, Any]) -> _Index:
        return cls(
            kinds=MappingProxyType({str(p["name"]): str(p["type"]) for p in doc["params"]}),
            transitions=MappingProxyType({t["id"]: t for t in reversed(doc["transitions"])}),
            states=MappingProxyType({s["name"]: s for s in reversed(doc["states"])}),
            external=frozenset(a["name"] for a in doc["accounts"] if a["external"]),
        )


@dataclass(frozen=True)
class Bundle:
    """An agreement's bundle: its re-verified files and its transitions.json.

    `table` is the document as the kernel's `TransitionTable` model; `doc` is
    that model's dump (the same document, as plain JSON values), which the
    command path indexes (`index`: the same entries by name).
    """

    stored: StoredBundle
    doc: dict[str, Any]
    table: TransitionTable
    index: _Index

    @property
    def scale(self) -> int:
        return int(self.doc["currency"]["scale"])

    @property
    def asset(self) -> str:
        return str(self.doc["currency"]["asset"])

    @property
    def kinds(self) -> Mapping[str, str]:
        """Each declared param's type, by name."""
        return self.index.kinds

    def transition(self, name: str) -> dict[str, Any] | None:
        return self.index.transitions.get(name)

    def state(self, name: str) -> dict[str, Any]:
        found = self.index.states.get(name)
        if found is None:
            raise StopIteration  # as the linear search did: an undeclared state is a malformed row
        return found

    def external(self) -> set[str]:
        return set(self.index.external)


# transitions.json by its sha256, read: reading is a function of the bytes.
_TABLES: dict[str, tuple[TransitionTable, dict[str, Any], _Index]] = {}


# The bundle of one verified `StoredBundle` object, by identity: the store hands the same object out
# for the same verified bytes (runtime/store/_store.py `_VERIFIED`), and the entry holds that object,
# so its id cannot be reused while the entry lives.
_BUNDLES: dict[int, tuple[StoredBundle, Bundle]] = {}


def bundle_of(stored: StoredBundle) -> Bundle:
    """The bundle with its transitions.json read through the kernel's `TransitionTable`.

    A document that is not canonical JSON, not of the format this runtime
    reads, or not of that format's shape (a field missing or extra, a wrong
    type, an unknown expression operator, a transition naming an undeclared
    state) is refused with PW518, naming the field. The result is read-only:
    it is shared by every load of the same bytes, whose hashes the store has
    just re-checked.
    """
    known = _BUNDLES.get(id(stored))
    if known is not None and known[0] is stored:
        return known[1]
    data = stored.files[TRANSITIONS_PATH]
    digest = hash_bytes(data)
    found = _TABLES.get(digest)
    if found is None:
        table, doc = _read_table(stored.manifest_hash, data)
        found = (table, doc, _Index.of(doc))
        if len(_TABLES) >= 64:
            _TABLES.clear()
        _TABLES[digest] = found
    bundle = Bundle(stored, found[1], found[0], found[2])
    if len(_BUNDLES) >= 64:
        _BUNDLES.clear()
    _BUNDLES[id(stored)] = (stored, bundle)
    return bundle


def _read_table(manifest_hash: str, data: bytes) -> tuple[TransitionTable, dict[str, Any]]:
    # Imported here: pydantic's start-up is paid only by commands that read a bundle.
    from pydantic import ValidationError

    from pactwright.bundle_models import TRANSITIONS_FORMAT, TransitionTable, problem

    unreadable = f"bundle {manifest_hash} has no readable transitions.json"
    try:
        doc = load_json(data)
    except PactwrightError as exc:
        raise CommandError(f"{unreadable}: {exc.message}", code="PW518") from None
    if not isinstance(doc, dict) or doc.get("format") != TRANSITIONS_FORMAT:
        raise CommandError(unreadable, code="PW518")
    try:
        table = TransitionTable.model_validate(doc)
    except ValidationError as exc:
        path, message, _ = problem(exc)
        raise CommandError(
            f"{unreadable}: at `{path}`: {message}", code="PW518", file=TRANSITIONS_PATH, field=path
        ) from None
    return table, table.to_json()


@dataclass(frozen=True)
class Agreement:
    """One agreement as committed (or as a command would leave it)."""

    id: str
    pact_id: str
    manifest_hash: str
    activation_id: int
    state: str
    version: int
    params: dict[str, str]
    parties: dict[str, str]
    accounts: dict[str, str]
    stamps: dict[str, int] = field(default_factory=dict)
    fired: dict[str, int] = field(default_factory=dict)
    balances: dict[str, int] = field(default_factory=dict)
    reached: tuple[str, ...] = ()
    approved: tuple[str, ...] = ()
    opened_at: int = 0
    updated_at: int = 0

    def row(self) -> tuple[Any, ...]:
        return (
            self.id,
            self.pact_id,
            self.manifest_hash,
            self.activation_id,
            self.state,
            self.version,
            dumps(self.params),
            dumps(self.parties),
            dumps(self.accounts),
            dumps(self.stamps),
            dumps(self.fired),
            dumps({k: str(v) for k, v in self.balances.items()}),
            dumps(sorted(self.reached)),
            dumps(sorted(self.approved)),
            self.opened_at,
            self.updated_at,
        )

    def view(self, bundle: Bundle, now: int, applied: Mapping[str, int] | None = None,
             totals: Mapping[str, int] | None = None,
             outcomes: Mapping[str, frozenset[str]] | None = None) -> View:  # fmt: skip
        """What expressions read at `now`; `applied`, `totals`, `outcomes` are the effects' (_command_effects.py)."""
        kinds = bundle.kinds
        params: dict[str, Value] = {name: typed_value(kinds[name], text) for name, text in self.params.items()}
        return View(
            now=now,
            params=params,
            stamps=self.stamps,
            fired=self.fired,
            balances=self.balances,
            reached=frozenset(self.reached),
            approved=frozenset(self.approved),
            final=bool(bundle.state(self.state)["final"]),
            applied=applied or {},
            totals=totals or {},
            outcomes=outcomes or {},
        )

    def evolve(self, **changes: Any) -> Agreement:
        """A copy with `changes` (as `dataclasses.replace`, without its per-field walk: every field is init)."""
        return Agreement(**{**self.__dict__, **changes})


def _texts(value: Any) -> dict[str, str]:
    return {str(k): str(v) for k, v in value.items()}


def _counts(value: Any) -> dict[str, int]:
    return {str(k): int(v) for k, v in value.items()}


def _amounts(value: Any) -> dict[str, int]:
    return {str(k): int(str(v)) for k, v in value.items()}


def _names(value: Any) -> tuple[str, ...]:
    return tuple(str(s) for s in value)


# (what, a JSON column's exact text) -> the column as `_from_row` reads it (most columns repeat).
_COLUMNS_READ: dict[tuple[str, str], Any] = {}


def _column(text: object, what: str, convert: Callable[[Any], Any]) -> Any:
    """`convert(loads(text))` for an agreement column, remembered by the column's exact text.

    Both steps are pure functions of the text (the same strict parser, the
    same conversions, the same refusals: a text that does not parse or
    convert is never remembered), and a remembered dict is handed out as a
    new copy (a tuple as itself), so a caller can never change what another
    read returns.
    """
    if not isinstance(text, str):
        return convert(loads(text, what))
    key = (what, text)
    found = _COLUMNS_READ.get(key)
    if found is None:
        found = convert(loads(text, what))
        if len(_COLUMNS_READ) >= 4096:
            _COLUMNS_READ.clear()
        _COLUMNS_READ[key] = found
    return dict(found) if type(found) is dict else found


def _from_row(row: tuple[Any, ...]) -> Agreement:
    try:
        (aid, pact, mhash, act, state, version, params, parties, accounts, stamps, fired, balances, reached,
         approved, opened, updated) = row  # fmt: skip
        return Agreement(
            id=str(aid),
            pact_id=str(pact),
            manifest_hash=str(mhash),
            activation_id=int(act),
            state=str(state),
            version=int(version),
            params=_column(params, "params", _texts),
            parties=_column(parties, "parties", _texts),
            accounts=_column(accounts, "accounts", _texts),
            stamps=_column(stamps, "stamps", _counts),
            fired=_column(fired, "fired counts", _counts),
            balances=_column(balances, "balances", _amounts),
            reached=_column(reached, "reached states", _names),
            approved=_column(approved, "approvals", _names),
            opened_at=int(opened),
            updated_at=int(updated),
        )
    except (TypeError, ValueError, AttributeError):
        raise CommandError(f"the stored agreement `{row[0]}` is malformed", code="PW518") from None


def unknown(agreement_id: str) -> CommandError:
    shown = agreement_id.replace("\x00", "\\0").encode("utf-8", "backslashreplace").decode("utf-8")
    return CommandError(
        f"there is no agreement `{shown}` in the store",
        code="PW501",
        hint="open one with `pactwright open PACT_ID --store URL ...`",
    )


def read(db: Backend, agreement_id: str, *, lock: bool) -> Agreement:
    """The agreement's row; with `lock`, held until the transaction ends (FOR UPDATE on PostgreSQL)."""
    suffix = " FOR UPDATE" if lock and db.name == "postgresql" else ""
    sql = f"SELECT {COLUMNS} FROM agreements WHERE id = ?{suffix}"  # noqa: S608
    return _from_row(_row(db, agreement_id, sql, (agreement_id,)))


def _row(db: Backend, agreement_id: str, sql: str, params: tuple[Any, ...]) -> tuple[Any, ...]:
    """The one row `sql` reads for the agreement, or PW501 (also for an id no store can hold)."""
    if not storable(agreement_id):  # no stored id holds NUL or invalid UTF-8 (open refuses both)
        raise unknown(agreement_id)
    rows = db.query(sql, params)
    if not rows:
        raise unknown(agreement_id)
    return rows[0]


def read_joined(db: Backend, agreement_id: str, joins: str, params: tuple[Any, ...], extra: str
                ) -> tuple[Agreement, tuple[Any, ...]]:  # fmt: skip
    """SQLite: the agreement's row and the caller's columns `extra` from its `joins`, in one statement.

    For a caller already holding the store's write lock (`BEGIN IMMEDIATE`),
    under which nothing else commits, so one read sees the row and what is
    joined to it as of that lock. `params` bind the joins' placeholders,
    then the agreement's id. Returns the agreement and the extra columns.
    """
    row = _row(db, agreement_id, _joined_sql(joins, extra), (*params, agreement_id))
    return _from_row(row[:_COUNT]), row[_COUNT:]


_COUNT = len(COLUMNS.split(","))


@functools.lru_cache(maxsize=16)
def _joined_sql(joins: str, extra: str) -> str:
    columns = ", ".join(f"a.{c.strip()}" for c in COLUMNS.split(","))
    return f"SELECT {columns}, {extra} FROM agreements a {joins} WHERE a.id = ?"  # noqa: S608


EXECUTED = ("ledger/",)  # what a command runs, besides transitions.json: the ledger programs


def clock_roles(bundle: Bundle) -> dict[str, bool]:
    """The pact's clock roles (name -> True); a pact may declare none."""
    return {str(r["name"]): True for r in bundle.doc["roles"] if r.get("clock")}


def load_bundle(store: Store, db: Backend, agreement: Agreement, only: tuple[str, ...] | None = None) -> Bundle:
    """The agreement's own activation's bundle, re-verified, and its manifest hash the recorded one.

    Without `only` every stored byte is read and re-hashed. With `only`
    (paths, and prefixes ending in `/`, such as `EXECUTED`), just those files,
    transitions.json, the manifest, approval and signatures are read and
    re-hashed: every byte the caller will use is checked, the other files'
    rows are checked against the manifest, and their bytes are not read.
    """
    return load_bundle_with(store, db, agreement, only)[0]


def load_bundle_with(
    store: Store,
    db: Backend,
    agreement: Agreement,
    only: tuple[str, ...] | None = None,
    also: tuple[tuple[str, tuple[Any, ...]], ...] = (),
) -> tuple[Bundle, list[list[tuple[Any, ...]]]]:
    """`load_bundle`, with the caller's reads `also` answered in the same round trip."""
    wanted = None if only is None else (TRANSITIONS_PATH, *only)
    stored, extra = store.load_recorded_in(db, agreement.activation_id, agreement.manifest_hash, wanted, also)
    if stored.manifest_hash != agreement.manifest_hash or stored.pact_id != agreement.pact_id:
        raise CommandError(
            f"agreement `{agreement.id}` records bundle {agreement.manifest_hash} but its activation holds "
            f"{stored.manifest_hash}",
            code="PW518",
        )
    return bundle_of(stored), extra


# What a command changes; the rest (pact, bundle, activation, params, parties, accounts, opened_at)
# is fixed when the agreement is opened, so an update neither re-encodes nor rewrites it.
_MUTABLE = ("state", "version", "stamps", "fired", "balances", "reached", "approved", "updated_at")
_UPDATE = f"UPDATE agreements SET {', '.join(f'{n} = ?' for n in _MUTABLE)} WHERE id = ?"  # noqa: S608


def write(db: Backend, agreement: Agreement, *, insert: bool) -> None:
    """Insert the agreement's row, or update what a command changes (`_MUTABLE`)."""
    if insert:
        marks = ", ".join("?" * len(agreement.row()))
        db.execute(f"INSERT INTO agreements ({COLUMNS}) VALUES ({marks})", agreement.row())  # noqa: S608
        return
    db.execute(*update(agreement))


def update(agreement: Agreement) -> tuple[str, tuple[Any, ...]]:
    """The statement `write(..., insert=False)` runs: what a command changed, for the caller to batch."""
    a = agreement
    return _UPDATE, (
        a.state, a.version, dumps(a.stamps), dumps(a.fired), dumps({k: str(v) for k, v in a.balances.items()}),
        dumps(sorted(a.reached)), dumps(sorted(a.approved)), a.updated_at, a.id,
    )  # fmt: skip


# The last evidence record of an agreement, `(seq, hash)`, for `evidence_head`; read under the agreement's
# lock (alone, or joined into a caller's statement so the head costs no round trip of its own). The
# chain is in two tables (store migration 15): the `evidence` rows, and the links on the event rows, of
# which the latest event's is the last (events are chained in commit order). Binds the agreement's id
# twice (`head_params`).
HEAD_SQL = (
    "SELECT seq, hash FROM ("
    "SELECT seq, hash FROM (SELECT seq, hash FROM evidence WHERE agreement_id = ? ORDER BY seq DESC LIMIT 1) r "
    "UNION ALL SELECT s, h FROM (SELECT evidence_seq AS s, evidence_hash AS h FROM events "
    "WHERE agreement_id = ? AND evidence_seq IS NOT NULL ORDER BY seq DESC LIMIT 1) v"
    ") h ORDER BY seq DESC LIMIT 1"
)


def head_params(agreement_id: str) -> tuple[str, str]:
    """What `HEAD_SQL` binds: the agreement's id, once per table."""
    return (agreement_id, agreement_id)


def evidence_head(seq: object, digest: object) -> tuple[int, str | None]:
    """The (next sequence number, previous hash) after the last record `(seq, hash)`; (0, None) for none."""
    return (0, None) if seq is None else (int(str(seq)) + 1, str(digest))


def append_evidence(
    db: Backend, agreement_id: str, kind: str, body: dict[str, Any], head: tuple[int, str | None] | None = None
) -> str:
    """Append one hash-chained evidence record; returns its hash.

    The record is `body` plus the agreement, its sequence number, the kind
    and the previous record's hash (None for the first); its hash is the
    kernel's hash of the record's canonical bytes, and the row holds those
    same bytes. Called under the agreement's row lock, so the chain never
    forks. `head` (from `evidence_head`) is the last record as the caller
    read it after taking that lock, in the same transaction; without it,
    it is read here.
    """
    if head is None:
        rows = db.query(HEAD_SQL, head_params(agreement_id))
        head = evidence_head(*rows[0]) if rows else evidence_head(None, None)
    digest, statement = evidence_insert(agreement_id, kind, body, head)
    db.execute(*statement)
    return digest


_EVIDENCE_INSERT = "INSERT INTO evidence (agreement_id, seq, kind, prev_hash, hash, record) VALUES (?, ?, ?, ?, ?, ?)"


def evidence_insert(
    agreement_id: str, kind: str, body: dict[str, Any], head: tuple[int, str | None]
) -> tuple[str, tuple[str, tuple[Any, ...]]]:
    """The record `append_evidence` appends after `head`: its hash and its INSERT, for the caller to batch."""
    seq, prev = head
    data = canonical_bytes(record_of(agreement_id, kind, body, head))
    digest = hash_bytes(data)
    return digest, (_EVIDENCE_INSERT, (agreement_id, seq, kind, prev, digest, data.decode("utf-8")))


def event_record(agreement_id: str, event_id: str, body: Mapping[str, Any], committed_at: int,
                 outbox: list[str], head: tuple[int, str | None]) -> dict[str, Any]:  # fmt: skip
    """An event's evidence record: the event row's payload (`body`) and facts, placed after `head`.

    The one definition, used where the event is committed (which stores
    only the record's place and hash on the event row) and where the chain
    is walked (which derives the record's bytes from that row again).
    `outbox` is the event's outbox references in group order.
    """
    return record_of(agreement_id, "event", {**body, "event_id": event_id, "committed_at": committed_at,
                                             "outbox": outbox}, head)  # fmt: skip


def record_of(agreement_id: str, kind: str, body: Mapping[str, Any], head: tuple[int, str | None]) -> dict[str, Any]:
    """A record of the chain: `body` plus the agreement, its place, its kind and the previous record's hash."""
    seq, prev = head
    return {**body, "agreement": agreement_id, "seq": seq, "kind": kind, "prev_hash": prev}
