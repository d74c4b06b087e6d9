"""Tools for tests that tamper with an agreement's evidence chain where it is stored.

Since store migration 15 the chain lives in two places: `evidence` rows
(the `opened` record, deliveries, quarantines, approvals, effects) and the
links on event rows (`evidence_seq`, `evidence_prev`, `evidence_hash`),
whose record bytes are derived from the event row and its outbox
references (`rows.event_record`). These tools read and write a record as
one logical thing, in whichever place it is stored, as an attacker with
write access to the database would.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from pactwright.canonical import canonical_bytes, hash_bytes
from pactwright.runtime._agreement import HEAD_SQL, head_params
from pactwright.runtime._evidence_chain import chain_rows
from pactwright.runtime.store._backend import Backend

# The fields of an event's record that the event row holds outside its payload, or the chain adds.
EVENT_FIELDS = ("event_id", "committed_at", "outbox", "agreement", "seq", "kind", "prev_hash")


def records(db: Backend, agreement_id: str = "a1") -> list[dict[str, Any]]:
    """Every record of the chain, in sequence order, as stored or derived."""
    return [
        json.loads(row[4] if isinstance(row[4], str | bytes) else bytes(row[4])) for row in chain_rows(db, agreement_id)
    ]


def record_at(db: Backend, seq: int, agreement_id: str = "a1") -> dict[str, Any]:
    """The record numbered `seq`."""
    return next(r for r in records(db, agreement_id) if r["seq"] == seq)


def on_event_row(db: Backend, seq: int, agreement_id: str = "a1") -> bool:
    """Whether record `seq` is an event's, held by its event row (not an `evidence` row)."""
    found = db.query("SELECT 1 FROM events WHERE agreement_id = ? AND evidence_seq = ?", (agreement_id, seq))
    return bool(found)


def write(db: Backend, record: dict[str, Any], digest: str, at: int | None = None, agreement_id: str = "a1") -> None:
    """Store `record` with hash `digest` in place of record `at` (default: its own `seq`), where that one is.

    An event row takes the record's payload fields as its payload, and its
    `seq`, `prev_hash` and `digest` as its link; an `evidence` row takes
    the record's bytes, kind, prev_hash and number.
    """
    at = record["seq"] if at is None else at
    if on_event_row(db, at, agreement_id):
        body = {k: v for k, v in record.items() if k not in EVENT_FIELDS}
        db.execute(
            "UPDATE events SET payload = ?, committed_at = ?, evidence_seq = ?, evidence_prev = ?, evidence_hash = ? "
            "WHERE agreement_id = ? AND evidence_seq = ?",
            (canonical_bytes(body).decode(), record["committed_at"], record["seq"], record["prev_hash"], digest,
             agreement_id, at),
        )  # fmt: skip
        return
    db.execute(
        "UPDATE evidence SET record = ?, hash = ?, prev_hash = ?, kind = ?, seq = ? WHERE agreement_id = ? AND seq = ?",
        (canonical_bytes(record).decode(), digest, record["prev_hash"], record["kind"], record["seq"], agreement_id,
         at),
    )  # fmt: skip


def rehash_from(db: Backend, start: int, edit: Callable[[dict[str, Any]], None], agreement_id: str = "a1") -> None:
    """Edit record `start`, then re-hash it and every later record so that each follows its predecessor."""
    chain = records(db, agreement_id)
    prev = next((hash_bytes(canonical_bytes(r)) for r in chain if r["seq"] == start - 1), None)
    for record in chain:
        if record["seq"] < start:
            continue
        if record["seq"] == start:
            edit(record)
        record["prev_hash"] = prev
        prev = hash_bytes(canonical_bytes(record))
        write(db, record, prev, agreement_id=agreement_id)


def head(db: Backend, agreement_id: str = "a1") -> tuple[int, str]:
    """(seq, hash) of the chain's last record, as the runtime reads it."""
    seq, digest = db.query(HEAD_SQL, head_params(agreement_id))[0]
    return int(seq), str(digest)


def append(db: Backend, record: dict[str, Any], agreement_id: str = "a1") -> None:
    """Append `record` as the next, correctly chained and hashed, `evidence` row of `agreement_id`."""
    seq, last = head(db, agreement_id)
    record = {**record, "seq": seq + 1, "prev_hash": last}
    data = canonical_bytes(record)
    db.execute(
        "INSERT INTO evidence (agreement_id, seq, kind, prev_hash, hash, record) VALUES (?, ?, ?, ?, ?, ?)",
        (agreement_id, seq + 1, record["kind"], last, hash_bytes(data), data.decode()),
    )


def undo_event_links(db: Backend) -> None:
    """The store as a release before migration 15 kept it: every event's record an `evidence` row (its
    derived bytes, as that release wrote them) and no evidence link on the event rows.

    For tests that rewind a store to before an older migration by deleting
    its markers: migration 15 runs again on the next open, and finds the
    store as that release left it.
    """
    for (agreement_id,) in db.query("SELECT DISTINCT agreement_id FROM events WHERE evidence_seq IS NOT NULL"):
        for seq, kind, prev, digest, data in chain_rows(db, str(agreement_id)):
            if on_event_row(db, int(seq), str(agreement_id)):
                text = data if isinstance(data, str) else bytes(data).decode()
                db.execute(
                    "INSERT INTO evidence (agreement_id, seq, kind, prev_hash, hash, record) VALUES (?, ?, ?, ?, ?, ?)",
                    (str(agreement_id), int(seq), kind, prev, digest, text),
                )
    for column in ("evidence_seq", "evidence_prev", "evidence_hash"):
        db.execute(f"ALTER TABLE events DROP COLUMN {column}")
