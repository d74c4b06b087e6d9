"""Reading the outbox: what is pending, delivered or quarantined, with both sides of every quarantine.

`pactwright outbox list` prints these entries. A quarantined entry keeps
the expected postings stored at commit and, beside them, what the ledger
returned (or nothing, when it returned nothing usable) and the reason; it
is never retried by the worker and blocks the later entries of its
agreement until an operator resolves it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pactwright.errors import PactwrightError
from pactwright.runtime import _agreement as rows
from pactwright.runtime.store import Store
from pactwright.runtime.store._migrations import RUNTIME_TABLES

__all__ = ["OutboxEntry", "list_entries"]


@dataclass(frozen=True)
class OutboxEntry:
    """One outbox row as stored (JSON columns decoded; an unreadable one is shown as its text)."""

    reference: str
    agreement_id: str
    event_seq: int
    group: int
    status: str
    program: str
    attempts: int
    expected_postings: Any
    ledger_postings: Any
    last_error: str | None
    lease_owner: str | None
    lease_until: int | None

    def to_json(self) -> dict[str, Any]:
        return {
            "reference": self.reference,
            "agreement": self.agreement_id,
            "event_seq": self.event_seq,
            "group": self.group,
            "status": self.status,
            "program": self.program,
            "attempts": self.attempts,
            "expected_postings": self.expected_postings,
            "ledger_postings": self.ledger_postings,
            "last_error": self.last_error,
            "lease_owner": self.lease_owner,
            "lease_until": self.lease_until,
        }


def _decoded(value: object) -> Any:
    if value is None:
        return None
    try:
        return rows.loads(value, "outbox column")
    except PactwrightError:
        return str(value)[:500]


def list_entries(store: Store, *, quarantined: bool = False, agreement_id: str | None = None) -> list[OutboxEntry]:
    """Every outbox entry (or only the quarantined ones), in commit order per agreement."""
    if store.schema_version() < RUNTIME_TABLES:
        return []
    where, params = ["1 = 1"], []
    if quarantined:
        where.append("status = 'quarantined'")
    if agreement_id is not None:
        where.append("agreement_id = ?")
        params.append(agreement_id)
    with store.transaction(write=False) as db:
        found = db.query(
            "SELECT reference, agreement_id, event_seq, group_index, status, program_path, attempts, "  # noqa: S608
            "expected_postings, delivered_postings, last_error, lease_owner, lease_until FROM outbox "
            f"WHERE {' AND '.join(where)}",
            params,
        )
    # Sorted here, by code point: ORDER BY on text follows the database's collation, which differs.
    found = sorted(found, key=lambda row: (str(row[1]), int(row[2]), int(row[3])))
    return [
        OutboxEntry(
            str(ref),
            str(aid),
            int(seq),
            int(group),
            str(status),
            str(path),
            int(attempts),
            _decoded(expected),
            _decoded(delivered),
            None if error is None else str(error),
            None if owner is None else str(owner),
            None if until is None else int(until),
        )
        for ref, aid, seq, group, status, path, attempts, expected, delivered, error, owner, until in found
    ]
