"""Re-walk one agreement's hash-chained evidence log and name every way it was tampered with.

Each record is canonical JSON (pactwright.canonical) holding its own
sequence number, the agreement, its kind and its predecessor's hash; its
hash is the kernel's hash of those bytes. Walking the rows in sequence
order finds, each with its own code:

- PW580 a record that is not canonical JSON (its bytes were rewritten);
- PW581 a record whose bytes no longer hash to its stored hash (edited);
- PW582 a gap in the sequence, or a chain not starting at 0 (deleted);
- PW583 a record whose own sequence number is not its place (reordered);
- PW584 a record whose `prev_hash` is not its predecessor's hash although
  its own hash is intact (edited and re-hashed, or spliced in);
- PW585 a row whose columns (kind, prev_hash) disagree with its record, or a
  record naming another agreement (moved);
- PW586 records that disagree with the store's event log, outbox or
  agreement row: an event or a delivered/quarantined outbox entry with no
  record (the tail deleted), a record of an event or a delivery that the
  store does not hold, or different facts (an edit re-hashed through the end);
- PW587 a head other than the one the caller recorded elsewhere;
- PW588 no record at all.

A hash chain proves order and integrity relative to its head; a writer who
can rewrite every table can rebuild a consistent chain. That is why the
head hash is printed, and `expect_head` checks it against a copy kept
outside the store.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pactwright.canonical import canonical_bytes, hash_bytes, load_json
from pactwright.errors import PactwrightError
from pactwright.runtime._agreement import Agreement, event_record
from pactwright.runtime.store._backend import Backend

# The kinds of record the outbox worker appends, one per settled outbox entry.
_SETTLED = ("delivered", "quarantined")
# The facts an `event` record repeats from the event log's payload.
_EVENT_FACTS = ("command", "from", "to", "postings", "stamps", "manifest_hash", "approval", "effects")


@dataclass(frozen=True)
class Problem:
    """One way the chain was tampered with: its code, the record's place, and what was found."""

    code: str
    seq: int | None
    message: str

    def to_json(self) -> dict[str, Any]:
        return {"code": self.code, "seq": self.seq, "message": self.message}


@dataclass
class ChainCheck:
    """The outcome of one walk: the records that read cleanly, the head, and every problem."""

    agreement_id: str
    count: int = 0
    head: str | None = None
    records: list[dict[str, Any]] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems

    def to_json(self) -> dict[str, Any]:
        return {
            "agreement": self.agreement_id,
            "records": self.count,
            "head": self.head,
            "verifies": self.ok,
            "problems": [p.to_json() for p in self.problems],
        }


def _text(value: object) -> bytes:
    if isinstance(value, bytes | memoryview):
        return bytes(value)
    return str(value).encode("utf-8")


def _parse(data: bytes, *, canonical: bool = True) -> Any:
    """The JSON value of `data` (an object, or with `canonical=False` anything), None if unreadable."""
    try:
        doc = load_json(data, require_canonical=canonical)
    except PactwrightError:
        return None
    return doc if isinstance(doc, dict) or not canonical else None


def _walk(check: ChainCheck, rows: list[tuple[Any, ...]]) -> set[str]:
    """Structural checks, row by row; returns the event ids every readable record names, clean or not."""
    flagged: set[int] = set()
    named: set[str] = set()
    expected_seq, prev_hash = 0, None
    for raw_seq, kind, row_prev, stored_hash, text in rows:
        seq, data = _place(raw_seq), _text(text)

        def flag(code: str, message: str, seq: int = seq) -> None:
            check.problems.append(Problem(code, seq if seq >= 0 else None, message))
            flagged.add(seq)

        if seq < 0:  # not a whole number (SQLite keeps text or a fraction in an INTEGER column as given)
            flag("PW583", f"an evidence record is numbered `{raw_seq}`, which is no place in the chain: records "
                          "were renumbered")  # fmt: skip
            continue
        if seq < expected_seq:  # a second record at a place already taken (one in each table, or a renumbering)
            flag("PW584", f"evidence record {seq} appears twice: the chain forks at record {seq}")
        elif seq != expected_seq:
            missing = f"{expected_seq}" if seq == expected_seq + 1 else f"{expected_seq}..{seq - 1}"
            flag("PW582", f"evidence record {missing} is missing before record {seq}")
        record = _parse(data)
        if record is None:
            flag("PW580", f"evidence record {seq} is not canonical JSON")
        elif hash_bytes(data) != str(stored_hash):
            flag("PW581", f"evidence record {seq} was edited: its bytes hash to {hash_bytes(data)}, not {stored_hash}")
        elif record.get("seq") != seq:
            flag(
                "PW583", f"evidence record {seq} holds the record numbered {record.get('seq')}: records were reordered"
            )
        elif seq == expected_seq and record.get("prev_hash") != prev_hash:
            flag("PW584", f"evidence record {seq} does not follow record {seq - 1}: its prev_hash is "
                          f"{record.get('prev_hash')}, record {seq - 1} hashes to {prev_hash}")  # fmt: skip
        elif (
            record.get("agreement") != check.agreement_id
            or record.get("kind") != str(kind)
            or record.get("prev_hash") != (None if row_prev is None else str(row_prev))
        ):
            flag("PW585", f"evidence row {seq} disagrees with its record (agreement, kind or prev_hash)")
        if record is not None and record.get("kind") == "event":
            named.add(str(record.get("event_id")))
        if record is not None and record.get("kind") in _SETTLED:
            named.add(str(record.get("reference")))
        if record is not None and seq not in flagged:
            check.records.append(record)
        expected_seq, prev_hash = seq + 1, str(stored_hash)
    return named


def _cross_check(check: ChainCheck, agreement: Agreement, events: list[tuple[Any, ...]],
                 settled: dict[str, tuple[str, Any]], named: set[str]) -> None:  # fmt: skip
    """The chain against the event log, the settled outbox entries and the agreement row (PW586)."""

    def flag(seq: int | None, message: str) -> None:
        check.problems.append(Problem("PW586", seq, message))

    logged: dict[str, Mapping[str, Any]] = {}
    for event_id, payload in events:
        logged[str(event_id)] = _parse(_text(payload)) or {}
    for record in check.records:
        seq = int(record["seq"])
        if record.get("kind") == "opened":
            same = (record.get("manifest_hash"), record.get("params"), record.get("parties"),
                    record.get("accounts")) == (agreement.manifest_hash, agreement.params, agreement.parties,
                                                agreement.accounts)  # fmt: skip
            # The activation an agreement runs on (held since store migration 10; older records name the manifest only).
            if "activation_id" in record and record.get("activation_id") != agreement.activation_id:
                same = False
            if not same:
                flag(seq, f"the `opened` record {seq} disagrees with agreement `{agreement.id}` as stored")
        elif record.get("kind") == "event":
            event_id = str(record.get("event_id"))
            if event_id not in logged:
                flag(seq, f"evidence record {seq} is of event `{event_id}`, which the event log does not hold")
                continue
            differing = [name for name in _EVENT_FACTS if record.get(name) != logged[event_id].get(name)]
            if differing:
                flag(seq, f"evidence record {seq} disagrees with event `{event_id}` on {', '.join(differing)}")
        elif record.get("kind") in _SETTLED:
            reference = str(record.get("reference"))
            status = settled.get(reference, ("", None))[0]
            # A quarantined entry may be delivered later (after repair); a delivery is final.
            if status != record.get("kind") and not (status and record.get("kind") == "quarantined"):
                flag(seq, f"evidence record {seq} says `{reference}` was {record.get('kind')}, the outbox does not")
            elif record.get("kind") == "delivered" and record.get("postings") != settled[reference][1]:
                flag(seq, f"evidence record {seq} disagrees with the outbox on the postings delivered under "
                          f"`{reference}`")  # fmt: skip
    # A record that is there but flagged above is accounted for; a record that is gone is not.
    for event_id in logged:
        if event_id not in named:
            flag(None, f"event `{event_id}` has no evidence record: records were deleted")
    for reference, (status, _) in settled.items():
        if reference not in named:
            flag(None, f"outbox entry `{reference}` is {status} but has no evidence record: records were deleted")


def _event_rows(agreement_id: str, events: list[tuple[Any, ...]], references: dict[int, list[str]]
                ) -> list[tuple[Any, ...]]:  # fmt: skip
    """The chain rows of the events that hold their own link (store migration 15), records derived.

    Each is `(seq, kind, prev_hash, hash, record bytes)` as an `evidence`
    row would be: the record is `rows.event_record` of the event row and
    its outbox references (per event, in group order), so an edited
    payload, id, time or reference hashes differently (PW581). A payload
    that is not canonical JSON is handed on as the record's bytes (PW580).
    """
    out: list[tuple[Any, ...]] = []
    for event_id, payload, seq, committed_at, link_seq, link_prev, link_hash in events:
        if link_seq is None:
            continue  # committed before migration 15: its record is an `evidence` row
        data = _text(payload)
        body = _parse(data)
        if body is not None and type(committed_at) is int:
            prev = None if link_prev is None else str(link_prev)
            record = event_record(str(agreement_id), str(event_id), body, committed_at,
                                  references.get(_place(seq), []), (_place(link_seq), prev))  # fmt: skip
            data = canonical_bytes(record)
        out.append((link_seq, "event", link_prev, link_hash, data))
    return out


def chain_rows(db: Backend, agreement_id: str) -> list[tuple[Any, ...]]:
    """The agreement's chain as stored, in sequence order: `(seq, kind, prev_hash, hash, record bytes)` per record.

    The `evidence` rows and, merged in by sequence number, the records of
    the events that hold their own link (`_event_rows`).
    """
    return _chain(db, agreement_id)[0]


# The chain's three sources in one statement, so that a reader in a READ COMMITTED transaction (the
# outbox worker's claim) sees them in one snapshot: a command or a worker committing between two reads
# would otherwise show a record without its predecessor, or an event without its outbox reference.
# Per row: source (0 `evidence` row, 1 event row, 2 outbox entry), then that source's columns.
_CHAIN_SQL = (
    "SELECT 0, seq, kind, prev_hash, hash, record, NULL, NULL, NULL FROM evidence WHERE agreement_id = ? "
    "UNION ALL SELECT 1, evidence_seq, NULL, evidence_prev, evidence_hash, payload, event_id, committed_at, seq "
    "FROM events WHERE agreement_id = ? "
    "UNION ALL SELECT 2, event_seq, NULL, NULL, NULL, reference, NULL, NULL, group_index "
    "FROM outbox WHERE agreement_id = ?"
)


def _chain(db: Backend, agreement_id: str) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    """(`chain_rows`, the agreement's event rows in sequence order as `_event_rows` reads them)."""
    found = db.query(_CHAIN_SQL, (agreement_id, agreement_id, agreement_id))
    stored = [tuple(r[1:6]) for r in found if r[0] == 0]
    events = sorted(
        ((r[6], r[5], r[8], r[7], r[1], r[3], r[4]) for r in found if r[0] == 1), key=lambda e: _place(e[2])
    )
    references: dict[int, list[str]] = {}
    for event_seq, _, reference in sorted((_place(r[1]), _place(r[8]), str(r[5])) for r in found if r[0] == 2):
        references.setdefault(event_seq, []).append(reference)
    rows = sorted([*stored, *_event_rows(agreement_id, events, references)], key=lambda row: _place(row[0]))
    return rows, events


def check_chain(db: Backend, agreement: Agreement, expect_head: str | None = None) -> ChainCheck:
    """Walk the agreement's evidence (`chain_rows`) in sequence order and cross-check it; never raises for tampering."""
    check = ChainCheck(agreement.id)
    rows, events = _chain(db, agreement.id)
    check.count = len(rows)
    if not rows:
        check.problems.append(Problem("PW588", None, f"agreement `{agreement.id}` has no evidence records"))
        return check
    check.head = str(rows[-1][3])
    named = _walk(check, rows)
    settled = {
        str(reference): (str(status), None if delivered is None else _parse(_text(delivered), canonical=False))
        for reference, status, delivered in db.query(
            "SELECT reference, status, delivered_postings FROM outbox WHERE agreement_id = ? AND status IN "
            "('delivered', 'quarantined') ORDER BY event_seq, group_index",
            (agreement.id,),
        )
    }
    _cross_check(check, agreement, [(e[0], e[1]) for e in events], settled, named)
    # The agreement row may have been read before a later command committed (the outbox worker reads it
    # first, in READ COMMITTED): the log may hold more events than its version counts, never fewer.
    logged = [_place(e[2]) for e in events]
    if logged != list(range(1, max(agreement.version, len(logged)) + 1)):
        check.problems.append(Problem("PW586", None, f"agreement `{agreement.id}` is at version "
                                      f"{agreement.version}, but its event log holds events "
                                      f"{_ranges(logged) or 'none'}: events were deleted or added"))  # fmt: skip
    if expect_head is not None and check.head != expect_head:
        check.problems.append(
            Problem("PW587", len(rows) - 1, f"the chain ends at {check.head}, not at the recorded head {expect_head}")
        )
    return check


def _place(value: object) -> int:
    """A stored sequence number as an int; -1 for anything that is not a whole number (never a place)."""
    return value if type(value) is int else -1


def _ranges(numbers: list[int]) -> str:
    """`1..3, 5` for [1, 2, 3, 5]: the event numbers a log holds, in its order."""
    runs: list[list[int]] = []
    for n in numbers:
        if runs and n == runs[-1][-1] + 1:
            runs[-1].append(n)
        else:
            runs.append([n])
    return ", ".join(str(r[0]) if len(r) == 1 else f"{r[0]}..{r[-1]}" for r in runs)
