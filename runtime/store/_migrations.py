"""Versioned schema migrations: ordered SQL, applied once, recorded in `schema_migrations`.

One schema for both backends; the only substitution is `{blob}` (the
binary column type), and a migration may change one backend's schema only
(`Migration.backends`: PostgreSQL's 32-bit INTEGER, migration 9). Applying is idempotent and runs under the store's
writer lock in one transaction, so two processes opening a new store at
once cannot both create it, and a half-applied migration never exists.
A store whose recorded migrations this release does not know (a newer
pactwright wrote it, or the history was edited) is refused, never guessed at.

Activation times are RFC 3339 UTC text, the runtime's times epoch seconds
in 64-bit integer columns, and flags 0/1 integers: all compare and
round-trip identically in SQLite and PostgreSQL.
"""

from __future__ import annotations

from dataclasses import dataclass

from pactwright.errors import StoreError, UsageError
from pactwright.runtime.store._backend import Backend


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    statements: tuple[str, ...]
    # The backends whose schema the statements change; on the others the migration changes nothing
    # and is still recorded, so every store of one release has the same migration history.
    backends: tuple[str, ...] = ("sqlite", "postgresql")


# The phases of a call the effect worker may still take a step on (`effect_worker._IS_DUE`), as the
# partial index of migration 13 lists them; the claim's query repeats this exact text, which is how
# SQLite knows the index covers it.
EFFECTS_LIVE = "('compensation_required', 'dispatched', 'needs_reconciliation', 'prepared', 'reconciled_not_occurred')"


# Every column holding epoch seconds (or `effect_worker.NEVER`), by table: PostgreSQL's INTEGER is
# 32 bits, and would refuse every write after 2038-01-19T03:14:07Z; SQLite's INTEGER is 64 bits already.
_TIME_COLUMNS = (
    ("agreements", ("opened_at", "updated_at")),
    ("events", ("committed_at",)),
    ("outbox", ("lease_until", "created_at", "updated_at")),
    ("approvals", ("granted_at", "consumed_at")),
    ("parties", ("added_at",)),
    ("effects", ("lease_until", "next_at", "created_at", "updated_at")),
    ("approval_requests", ("expires_at", "created_at", "decided_at")),
    ("limits", ("window_start", "window_seconds", "updated_at")),
    ("tokens", ("created_at", "revoked_at")),
)
MIGRATIONS: tuple[Migration, ...] = (
    Migration(
        1,
        "activated bundles, activations and active versions",
        (
            # Every activated manifest and the files it covers, byte for byte.
            """CREATE TABLE bundles (
                manifest_hash TEXT PRIMARY KEY,
                pact_id TEXT NOT NULL,
                pact_version TEXT NOT NULL
            )""",
            """CREATE TABLE bundle_files (
                manifest_hash TEXT NOT NULL REFERENCES bundles (manifest_hash),
                path TEXT NOT NULL,
                sha256 TEXT NOT NULL,
                size INTEGER NOT NULL,
                content {blob} NOT NULL,
                PRIMARY KEY (manifest_hash, path)
            )""",
            # One row per activation: who authorized it (approval and
            # signatures, verbatim), when (trusted clock), and whether it was
            # a forced rollback, with the recorded reason.
            """CREATE TABLE activations (
                id INTEGER PRIMARY KEY,
                pact_id TEXT NOT NULL,
                pact_version TEXT NOT NULL,
                manifest_hash TEXT NOT NULL REFERENCES bundles (manifest_hash),
                approval_hash TEXT NOT NULL,
                approval {blob} NOT NULL,
                signatures_hash TEXT NOT NULL,
                signatures {blob} NOT NULL,
                activated_at TEXT NOT NULL,
                forced INTEGER NOT NULL CHECK (forced IN (0, 1)),
                reason TEXT,
                previous_version TEXT,
                previous_manifest_hash TEXT,
                CHECK ((forced = 0 AND reason IS NULL) OR (forced = 1 AND reason IS NOT NULL AND reason <> ''))
            )""",
            "CREATE INDEX activations_by_pact ON activations (pact_id, id)",
            # The active version per pact id.
            """CREATE TABLE active (
                pact_id TEXT PRIMARY KEY,
                pact_version TEXT NOT NULL,
                manifest_hash TEXT NOT NULL REFERENCES bundles (manifest_hash),
                activation_id INTEGER NOT NULL REFERENCES activations (id)
            )""",
        ),
    ),
    Migration(
        2,
        "agreements, events, idempotency keys, outbox, approvals and evidence",
        (
            # One row per agreement: the activation it runs on (fixed at open; a later
            # activation never changes it) and its committed state. JSON columns hold
            # canonical JSON; money in them is minor units as decimal strings; times are
            # integer seconds since the Unix epoch (UTC) from the runtime's clock.
            """CREATE TABLE agreements (
                id TEXT PRIMARY KEY,
                pact_id TEXT NOT NULL,
                manifest_hash TEXT NOT NULL REFERENCES bundles (manifest_hash),
                activation_id INTEGER NOT NULL REFERENCES activations (id),
                state TEXT NOT NULL,
                version INTEGER NOT NULL CHECK (version >= 0),
                params TEXT NOT NULL,
                parties TEXT NOT NULL,
                accounts TEXT NOT NULL,
                stamps TEXT NOT NULL,
                fired TEXT NOT NULL,
                balances TEXT NOT NULL,
                reached TEXT NOT NULL,
                approved TEXT NOT NULL,
                opened_at INTEGER NOT NULL,
                updated_at INTEGER NOT NULL
            )""",
            "CREATE INDEX agreements_by_pact ON agreements (pact_id, id)",
            # The append-only event log: one row per committed command, numbered per agreement.
            """CREATE TABLE events (
                agreement_id TEXT NOT NULL REFERENCES agreements (id),
                seq INTEGER NOT NULL CHECK (seq >= 1),
                event_id TEXT NOT NULL UNIQUE,
                transition TEXT NOT NULL,
                actor_role TEXT NOT NULL,
                actor_party TEXT NOT NULL,
                committed_at INTEGER NOT NULL,
                payload_digest TEXT NOT NULL,
                payload TEXT NOT NULL,
                PRIMARY KEY (agreement_id, seq)
            )""",
            # Idempotency keys, per agreement, kept: the payload digest and the stored result.
            """CREATE TABLE idempotency_keys (
                agreement_id TEXT NOT NULL REFERENCES agreements (id),
                key TEXT NOT NULL,
                payload_digest TEXT NOT NULL,
                payload TEXT NOT NULL,
                result TEXT NOT NULL,
                event_id TEXT NOT NULL REFERENCES events (event_id),
                PRIMARY KEY (agreement_id, key)
            )""",
            # One row per committed posting group, written in the command's transaction;
            # delivered to the ledger by reference `AGREEMENT/EVENTSEQ/GROUP`.
            """CREATE TABLE outbox (
                agreement_id TEXT NOT NULL REFERENCES agreements (id),
                event_seq INTEGER NOT NULL,
                group_index INTEGER NOT NULL CHECK (group_index >= 0),
                reference TEXT NOT NULL UNIQUE,
                program_path TEXT NOT NULL,
                variables TEXT NOT NULL,
                expected_postings TEXT NOT NULL,
                status TEXT NOT NULL CHECK (status IN ('pending', 'delivered', 'quarantined')),
                attempts INTEGER NOT NULL DEFAULT 0 CHECK (attempts >= 0),
                lease_owner TEXT,
                lease_until INTEGER,
                delivered_postings TEXT,
                last_error TEXT,
                created_at INTEGER NOT NULL,
                updated_at INTEGER NOT NULL,
                PRIMARY KEY (agreement_id, event_seq, group_index),
                FOREIGN KEY (agreement_id, event_seq) REFERENCES events (agreement_id, seq)
            )""",
            "CREATE INDEX outbox_by_status ON outbox (status, agreement_id, event_seq, group_index)",
            # One-use approvals bound to a command's payload digest; consumed by the event they allowed.
            """CREATE TABLE approvals (
                id TEXT PRIMARY KEY,
                agreement_id TEXT NOT NULL REFERENCES agreements (id),
                transition TEXT NOT NULL,
                payload_digest TEXT NOT NULL,
                approver_role TEXT NOT NULL,
                approver_party TEXT NOT NULL,
                granted_at INTEGER NOT NULL,
                consumed_event_id TEXT UNIQUE REFERENCES events (event_id),
                consumed_at INTEGER
            )""",
            "CREATE INDEX approvals_by_payload ON approvals (agreement_id, transition, payload_digest)",
            # The hash-chained evidence log per agreement: each record names its predecessor's hash.
            """CREATE TABLE evidence (
                agreement_id TEXT NOT NULL REFERENCES agreements (id),
                seq INTEGER NOT NULL CHECK (seq >= 0),
                kind TEXT NOT NULL,
                prev_hash TEXT,
                hash TEXT NOT NULL UNIQUE,
                record TEXT NOT NULL,
                PRIMARY KEY (agreement_id, seq)
            )""",
        ),
    ),
    Migration(
        3,
        "outbox index in claim order",
        (
            # The worker claims the first due entry in commit order (status, then created_at,
            # agreement, event, group). With this index the claim walks the pending entries in
            # that order and stops at the first one it may take, instead of sorting every
            # pending entry on each claim (which made draining n entries cost n^2).
            "CREATE INDEX outbox_due ON outbox (status, created_at, agreement_id, event_seq, group_index)",
        ),
    ),
    Migration(
        4,
        "effect instances, approval requests and the party registry",
        (
            # Who is who beyond one agreement: a party's roles (pact roles, or `operator`, who resolves
            # parked effects) and, for approvers, the ed25519 public key a grant must verify under.
            """CREATE TABLE parties (
                party TEXT NOT NULL,
                role TEXT NOT NULL,
                public_key TEXT,
                added_at INTEGER NOT NULL,
                PRIMARY KEY (party, role)
            )""",
            # One row per `call EFFECT` of a committed event (and per compensation), with its phase
            # (pactwright.protocol's names, plus `dispatched` and `cancelled`) persisted before each step.
            """CREATE TABLE effects (
                id TEXT PRIMARY KEY,
                agreement_id TEXT NOT NULL REFERENCES agreements (id),
                event_seq INTEGER NOT NULL,
                call_index INTEGER NOT NULL CHECK (call_index >= 0),
                effect TEXT NOT NULL,
                strategy TEXT NOT NULL,
                compensates TEXT REFERENCES effects (id),
                phase TEXT NOT NULL,
                method TEXT NOT NULL,
                url TEXT NOT NULL,
                idempotency_key TEXT NOT NULL,
                payload TEXT NOT NULL,
                payload_digest TEXT NOT NULL,
                amount TEXT,
                attempts INTEGER NOT NULL DEFAULT 0 CHECK (attempts >= 0),
                lease_owner TEXT,
                lease_until INTEGER,
                next_at INTEGER NOT NULL,
                provider_ref TEXT,
                last_error TEXT,
                resolution TEXT,
                resolved_by TEXT,
                reason TEXT,
                quarantined INTEGER NOT NULL DEFAULT 0 CHECK (quarantined IN (0, 1)),
                created_at INTEGER NOT NULL,
                updated_at INTEGER NOT NULL,
                FOREIGN KEY (agreement_id, event_seq) REFERENCES events (agreement_id, seq)
            )""",
            "CREATE INDEX effects_due ON effects (phase, next_at, agreement_id, event_seq, call_index)",
            "CREATE INDEX effects_by_agreement ON effects (agreement_id, effect, event_seq, call_index)",
            # A command parked until an approver grants it: the preview the approver sees, its digest,
            # and (once decided) who decided and the digest of the proof, never the proof itself.
            """CREATE TABLE approval_requests (
                id TEXT PRIMARY KEY,
                agreement_id TEXT NOT NULL REFERENCES agreements (id),
                transition TEXT NOT NULL,
                requester_role TEXT NOT NULL,
                requester_party TEXT NOT NULL,
                idempotency_key TEXT NOT NULL,
                command TEXT NOT NULL,
                command_digest TEXT NOT NULL,
                expect_version INTEGER NOT NULL,
                preview TEXT NOT NULL,
                preview_digest TEXT NOT NULL,
                status TEXT NOT NULL CHECK (status IN ('pending', 'consumed', 'rejected')),
                expires_at INTEGER NOT NULL,
                created_at INTEGER NOT NULL,
                decided_at INTEGER,
                decided_by TEXT,
                proof_digest TEXT,
                event_id TEXT REFERENCES events (event_id),
                UNIQUE (agreement_id, idempotency_key)
            )""",
            "CREATE INDEX approval_requests_by_status ON approval_requests (status, agreement_id)",
        ),
    ),
    Migration(
        5,
        "four eyes: several approvals per command",
        (
            # A request's grants so far (canonical JSON: role, party, proof digest, time per grant),
            # while it waits for the rest (runtime/approvals.py). NULL for a request with none.
            "ALTER TABLE approval_requests ADD COLUMN grants TEXT",
            # One consumed `approvals` row per grant: an event may now consume several, each from
            # a different party, so the one-row-per-event constraint becomes one row per (event, party).
            """CREATE TABLE approvals_per_party (
                id TEXT PRIMARY KEY,
                agreement_id TEXT NOT NULL REFERENCES agreements (id),
                transition TEXT NOT NULL,
                payload_digest TEXT NOT NULL,
                approver_role TEXT NOT NULL,
                approver_party TEXT NOT NULL,
                granted_at INTEGER NOT NULL,
                consumed_event_id TEXT REFERENCES events (event_id),
                consumed_at INTEGER,
                UNIQUE (consumed_event_id, approver_party)
            )""",
            "INSERT INTO approvals_per_party SELECT id, agreement_id, transition, payload_digest, approver_role, "
            "approver_party, granted_at, consumed_event_id, consumed_at FROM approvals",
            "DROP TABLE approvals",
            "ALTER TABLE approvals_per_party RENAME TO approvals",
            "CREATE INDEX approvals_by_payload ON approvals (agreement_id, transition, payload_digest)",
        ),
    ),
    Migration(
        6,
        "limits across agreements",
        (
            # New in 1.1: the money a limit's effect's calls carried in one fixed UTC window
            # (`window_start` = floor(commit time / window) * window), summed over the pact's
            # agreements, or per party holding the limit's role (`party` '' for the whole pact).
            # Written in the command's own transaction under this row's lock (runtime/_limits.py).
            """CREATE TABLE limits (
                pact_id TEXT NOT NULL,
                limit_name TEXT NOT NULL,
                window_start INTEGER NOT NULL,
                window_seconds INTEGER NOT NULL,
                party TEXT NOT NULL,
                used TEXT NOT NULL,
                updated_at INTEGER NOT NULL,
                PRIMARY KEY (pact_id, limit_name, window_start, window_seconds, party)
            )""",
        ),
    ),
    Migration(
        7,
        "bearer tokens",
        (
            # One row per bearer token (runtime/tokens.py): the registered party it acts as, and the
            # SHA-256 (hex) of its secret, never the secret. A revoked token keeps its row (revoked_at set).
            """CREATE TABLE tokens (
                token_id TEXT PRIMARY KEY,
                party TEXT NOT NULL,
                secret_hash TEXT NOT NULL,
                created_at INTEGER NOT NULL,
                revoked_at INTEGER
            )""",
            "CREATE INDEX tokens_by_party ON tokens (party, token_id)",
        ),
    ),
    Migration(
        8,
        "idempotency keys on events; evidence without a hash index",
        (
            # A key's row held the event's own digest, a copy of its command and the event's id:
            # the key itself was the one thing the event row lacked. The key now lives on the
            # event (unique per agreement), so a command writes one row and one index fewer.
            "ALTER TABLE events ADD COLUMN idempotency_key TEXT",
            "UPDATE events SET idempotency_key = (SELECT k.key FROM idempotency_keys k "
            "WHERE k.agreement_id = events.agreement_id AND k.event_id = events.event_id)",
            "CREATE UNIQUE INDEX events_by_key ON events (agreement_id, idempotency_key)",
            "DROP TABLE idempotency_keys",
            # A record's hash covers its agreement, sequence number and predecessor's hash, so two
            # records never share one; the unique index on it checked nothing `evidence verify`
            # does not, and cost every command a page write. Rebuilt without it.
            """CREATE TABLE evidence_chain (
                agreement_id TEXT NOT NULL REFERENCES agreements (id),
                seq INTEGER NOT NULL CHECK (seq >= 0),
                kind TEXT NOT NULL,
                prev_hash TEXT,
                hash TEXT NOT NULL,
                record TEXT NOT NULL,
                PRIMARY KEY (agreement_id, seq)
            )""",
            "INSERT INTO evidence_chain SELECT agreement_id, seq, kind, prev_hash, hash, record FROM evidence",
            "DROP TABLE evidence",
            "ALTER TABLE evidence_chain RENAME TO evidence",
        ),
    ),
    Migration(
        9,
        "times as 64-bit integers",
        tuple(
            f"ALTER TABLE {table} " + ", ".join(f"ALTER COLUMN {c} TYPE BIGINT" for c in columns)
            for table, columns in _TIME_COLUMNS
        ),
        backends=("postgresql",),
    ),
    Migration(
        10,
        "a compensation found applied undoes its call",
        (
            # Before 10, a compensation found applied by a lookup or an operator left the call it
            # undoes in `compensation_required` (still due, skipped at every claim); the worker and
            # the evidence replay now mark it `compensated`, as after an acknowledged compensation.
            "UPDATE effects SET phase = 'compensated' WHERE phase = 'compensation_required' AND id IN "
            "(SELECT compensates FROM effects WHERE compensates IS NOT NULL "
            "AND phase IN ('acknowledged', 'reconciled_recovered'))",
        ),
    ),
    Migration(
        11,
        "a given-up call undoes the earlier calls of its event",
        (
            # Before 11, a `compensate` call whose outcome was unknown (`compensation_required`) did not
            # put the `compensate` calls before it in its event, which had gone through, in
            # `compensation_required`: they stayed `acknowledged`, never undone, while the worker and the
            # evidence replay now expect them there (the verifier's model always did). A call that went
            # through next to a later call given up (or undone since) can only be such a row.
            "UPDATE effects SET phase = 'compensation_required', next_at = 0 "
            "WHERE compensates IS NULL AND strategy = 'compensate' "
            "AND phase IN ('acknowledged', 'reconciled_recovered') AND EXISTS "
            "(SELECT 1 FROM effects later WHERE later.agreement_id = effects.agreement_id "
            "AND later.event_seq = effects.event_seq AND later.call_index > effects.call_index "
            "AND later.compensates IS NULL AND (later.phase IN ('abandoned_uncertain', 'compensation_required', "
            "'compensated') OR (later.phase = 'failed' AND later.strategy IN ('once', 'compensate'))))",
        ),
    ),
    Migration(
        12,
        "outbox claim index in code-point order",
        (
            # The claim orders agreements due at one instant by id in code-point order (`COLLATE "C"`,
            # runtime/worker.py). Migration 3's index holds them in the database's collation, which
            # PostgreSQL cannot walk for that order: every claim sorted all pending entries of the first
            # instant (draining a backlog committed in one second cost n^2). SQLite's text order is
            # code-point order already.
            "DROP INDEX outbox_due",
            'CREATE INDEX outbox_due ON outbox (status, created_at, agreement_id COLLATE "C", event_seq, group_index)',
        ),
        backends=("postgresql",),
    ),
    Migration(
        13,
        "effect claim index over live calls in claim order",
        (
            # The effect worker reads its candidates in claim order (next_at, agreement, event,
            # call). Migration 4's index starts with the phase, so every claim read every due call
            # and sorted them (a backlog of 10,000 due calls: 8-14 ms per claim, n^2 to drain), and
            # on SQLite after ANALYZE it walked the finished calls too. This one holds only the calls
            # a claim can take, in claim order, so a claim stops at its 64th candidate. (IF NOT EXISTS:
            # run again over a store that has it, it changes nothing.)
            "CREATE INDEX IF NOT EXISTS effects_live ON effects (next_at, agreement_id, event_seq, call_index) "
            f"WHERE quarantined = 0 AND phase IN {EFFECTS_LIVE}",
        ),
    ),
    Migration(
        14,
        "effect claim index in code-point order",
        (
            # As migration 12 did for the outbox: calls due at one instant go by agreement id in
            # code-point order on both backends (runtime/effect_worker.py), which PostgreSQL walks only
            # in an index built `COLLATE "C"`; migration 13's followed the database's collation, so a
            # database made with an en-US locale sent `a1`'s call before `B1`'s. (Dropped and made
            # again: run over a store that has it, it ends the same.)
            "DROP INDEX IF EXISTS effects_live",
            'CREATE INDEX effects_live ON effects (next_at, agreement_id COLLATE "C", event_seq, call_index) '
            f"WHERE quarantined = 0 AND phase IN {EFFECTS_LIVE}",
        ),
        backends=("postgresql",),
    ),
    Migration(
        15,
        "an event's evidence link on its event row",
        (
            # An event's evidence record repeated the event row: its command, states, postings,
            # stamps, manifest and approval, plus the event's id, time and outbox references. From
            # here on the record is not stored twice: the event row holds its place in the chain
            # (sequence number, predecessor's hash, own hash), and the record's bytes are derived
            # from the row and its outbox entries (`rows.event_record`): an edit of the event row
            # breaks the record's hash. Records committed before stay in `evidence`, NULL here.
            "ALTER TABLE events ADD COLUMN evidence_seq INTEGER",
            "ALTER TABLE events ADD COLUMN evidence_prev TEXT",
            "ALTER TABLE events ADD COLUMN evidence_hash TEXT",
        ),
    ),
)
# The migration that created the effect, approval-request and party tables.
EFFECT_TABLES = 4
# The migration that created the bearer-token table.
TOKEN_TABLES = 7
LATEST = MIGRATIONS[-1].version
# The migration that created the runtime's tables (agreements, events, idempotency keys, outbox,
# approvals, evidence; the keys moved onto the events in migration 8): a store at this version or
# later holds them, whatever came after.
RUNTIME_TABLES = 2
TABLES = (
    "schema_migrations",
    "bundles",
    "bundle_files",
    "activations",
    "active",
    "agreements",
    "events",
    "outbox",
    "approvals",
    "evidence",
    "parties",
    "effects",
    "approval_requests",
    "limits",
    "tokens",
)

_LEDGER = "CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL)"


def applied(backend: Backend) -> dict[int, str]:
    """version -> name of every recorded migration (empty for a new store)."""
    if not backend.has_table("schema_migrations"):
        return {}
    return {int(v): str(n) for v, n in backend.query("SELECT version, name FROM schema_migrations ORDER BY version")}


def refuse_ledger(backend: Backend) -> None:
    """Refuse (PW700) a database that is a ledger's: the store never writes its schema into one.

    The ledger refuses the store (PW550); this is the other direction, so a
    `--store` pointed at the ledger's file or schema changes nothing there.
    """
    if backend.has_table("ledger_migrations") and not backend.has_table("schema_migrations"):
        raise UsageError(
            "this database is a ledger's, not a store: the store needs a database of its own",
            code="PW700",
            hint="pass the store's own `--store` URL; the ledger is given with `--ledger`",
        )


def refuse_foreign(backend: Backend) -> None:
    """Refuse (PW700) to make a store inside a database (a PostgreSQL schema) that already holds other tables.

    A `--store` pointed at an application's database, or at a file that is
    some other program's, would otherwise gain the store's tables beside
    what is there; the ledger refuses such a database the same way.
    """
    if backend.has_table("schema_migrations"):
        return
    if backend.name == "postgresql":
        found = backend.query("SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema()")
    else:
        found = backend.query("SELECT name FROM sqlite_master WHERE type = 'table'")
    others = sorted(str(row[0]) for row in found if not str(row[0]).startswith("sqlite_"))
    if others:
        raise UsageError(
            f"this database is not a pactwright store: it holds other tables ({', '.join(others[:3])}"
            f"{', ...' if len(others) > 3 else ''}) and no record of the store's migrations",
            code="PW700",
            hint="give the store a database (or PostgreSQL schema) of its own",
        )


def check_known(recorded: dict[int, str]) -> None:
    """Refuse (PW701) a store with migrations this release does not have."""
    known = {m.version: m.name for m in MIGRATIONS}
    for version, name in sorted(recorded.items()):
        if known.get(version) != name:
            raise StoreError(
                f"the store records schema migration {version} `{name}`, which this pactwright does not have",
                code="PW701",
                field="schema_migrations",
                expected=f"migrations 1..{LATEST}",
                found=f"migration {version}",
                hint="use the pactwright release that wrote this store, or a newer one",
            )


def migrate(backend: Backend) -> int:
    """Apply every missing migration in order, in one transaction; returns how many ran."""
    with backend.transaction(write=True):
        refuse_ledger(backend)
        refuse_foreign(backend)
        backend.execute(_LEDGER)
        recorded = applied(backend)
        check_known(recorded)
        ran = 0
        for migration in MIGRATIONS:
            if migration.version in recorded:
                continue
            for statement in migration.statements if backend.name in migration.backends else ():
                backend.execute(statement.format(blob=backend.blob_type))
            backend.execute(
                "INSERT INTO schema_migrations (version, name) VALUES (?, ?)", (migration.version, migration.name)
            )
            ran += 1
    return ran
