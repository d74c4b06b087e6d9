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

from pactwright.canonical import hash_bytes, load_json
from pactwright.errors import PactwrightError
from pactwright.runtime._agreement import Agreement
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
        seq, data = int(raw_seq), _text(text)

        def flag(code: str, message: str, seq: int = seq) -> None:
            check.problems.append(Problem(code, seq, message))
            flagged.add(seq)

        if seq != expected_seq:
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


def check_chain(db: Backend, agreement: Agreement, expect_head: str | None = None) -> ChainCheck:
    """Walk the agreement's evidence in sequence order and cross-check it; never raises for tampering."""
    check = ChainCheck(agreement.id)
    rows = db.query(
        "SELECT seq, kind, prev_hash, hash, record FROM evidence WHERE agreement_id = ? ORDER BY seq",
        (agreement.id,),
    )
    check.count = len(rows)
    if not rows:
        check.problems.append(Problem("PW588", None, f"agreement `{agreement.id}` has no evidence records"))
        return check
    check.head = str(rows[-1][3])
    named = _walk(check, [tuple(r) for r in rows])
    events = db.query("SELECT event_id, payload FROM events WHERE agreement_id = ? ORDER BY seq", (agreement.id,))
    settled = {
        str(reference): (str(status), None if delivered is None else _parse(_text(delivered), canonical=False))
        for reference, status, delivered in db.query(
            "SELECT reference, status, delivered_postings FROM outbox WHERE agreement_id = ? AND status IN "
            "('delivered', 'quarantined') ORDER BY event_seq, group_index",
            (agreement.id,),
        )
    }
    _cross_check(check, agreement, [tuple(e) for e in events], settled, named)
    if expect_head is not None and check.head != expect_head:
        check.problems.append(
            Problem("PW587", len(rows) - 1, f"the chain ends at {check.head}, not at the recorded head {expect_head}")
        )
    return check
