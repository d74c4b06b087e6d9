"""The tables the evidence speaks from, checked against the hash-chained records (PW586).

`evidence` states the agreement's final state, version and balances, each
event's actor and commit time, each ledger reference's postings and status,
each effect call's amount, phase and provider reference, and who approved
what. Those facts live in the agreement row and in the events, outbox,
effects, approvals and approval_requests tables, which the chain does not
hash (since store migration 15 an event row's payload, id and commit time,
and its outbox references, are what its record is derived from; its other
columns and every other row are not). So each is replayed here from the records that do hold them (the
`opened` record, the `event` records, the outbox worker's `delivered` and
`quarantined` records, the effect worker's `effect_*` records, the
operator's `effect_resolved`, the `approval_*` records) and compared with
the rows: a row the records do not support, or a record no row matches, is
a PW586 problem naming the table, the row and the field. Only what verifies
here may be claimed.

The effect calls are replayed by runtime/_effect_replay.py, which the
effect worker also reads before it acts on a row.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pactwright.canonical import canonical_bytes, hash_bytes
from pactwright.runtime import _agreement as rows
from pactwright.runtime._agreement import Agreement
from pactwright.runtime._effect_replay import effect_problems, event_seq
from pactwright.runtime.store._backend import Backend

__all__ = ["check_tables"]


@dataclass
class _Found:
    problems: list[tuple[int | None, str]] = field(default_factory=list)

    def add(self, seq: int | None, message: str) -> None:
        self.problems.append((seq, message))


def check_tables(db: Backend, agreement: Agreement, doc: Mapping[str, Any], records: list[dict[str, Any]],
                 effect_tables: bool) -> list[tuple[int | None, str]]:  # fmt: skip
    """Every disagreement between the records (those of an intact walk) and the tables, as (seq, message)."""
    found = _Found()
    events = [r for r in records if r.get("kind") == "event"]
    _agreement_row(found, agreement, [str(a["name"]) for a in doc.get("accounts", [])], records, events)
    _event_rows(found, db, agreement.id, events)
    _outbox_rows(found, db, agreement.id, records, events)
    if effect_tables:
        for message in effect_problems(db, agreement.id, doc, records):
            found.add(None, message)
        _approval_rows(found, db, agreement.id, records, events)
    return found.problems


# -- the agreement row --------------------------------------------------------------------------


def _agreement_row(found: _Found, agreement: Agreement, accounts: list[str], records: list[dict[str, Any]],
                   events: list[dict[str, Any]]) -> None:  # fmt: skip
    """State, version, stamps, counts, balances, reached states, approvals and times, replayed from the records."""
    opened = next((r for r in records if r.get("kind") == "opened"), None)
    if opened is None:
        return
    state = str(opened.get("state"))
    balances = dict.fromkeys(agreement.balances, 0)
    stamps: dict[str, Any] = {}
    fired: dict[str, int] = {}
    reached, approved = {state}, set()
    updated = opened.get("at")
    for record in events:
        at: Any = record.get("committed_at")
        transition = str((record.get("command") or {}).get("transition"))
        state = str(record.get("to"))
        fired[transition] = fired.get(transition, 0) + 1
        stamps.update(dict.fromkeys((str(s) for s in record.get("stamps") or []), at))
        reached.add(state)
        if record.get("approval") is not None:
            approved.add(transition)
        for posting in record.get("postings") or []:
            amount = int(str(posting.get("amount")))
            for name, sign in ((str(posting.get("source")), -1), (str(posting.get("destination")), 1)):
                balances[name] = balances.get(name, 0) + sign * amount
        updated = at
    replayed = {
        "opened_at": opened.get("at"), "state": state, "version": len(events), "stamps": stamps, "fired": fired,
        "balances": balances, "reached": sorted(reached), "approved": sorted(approved), "updated_at": updated,
    }  # fmt: skip
    stored = {
        "opened_at": agreement.opened_at, "state": agreement.state, "version": agreement.version,
        "stamps": dict(agreement.stamps), "fired": dict(agreement.fired), "balances": dict(agreement.balances),
        "reached": sorted(agreement.reached), "approved": sorted(agreement.approved),
        "updated_at": agreement.updated_at,
    }  # fmt: skip
    differing = [name for name in replayed if replayed[name] != stored[name]]
    if differing:
        found.add(None, f"agreement `{agreement.id}` as stored disagrees with its evidence records on "
                        f"{', '.join(differing)}")  # fmt: skip


# -- events ----------------------------------------------------------------------------------


def _event_rows(found: _Found, db: Backend, agreement_id: str, events: list[dict[str, Any]]) -> None:
    """Each event row's own columns (seq, transition, actor, commit time, payload digest) against its record."""
    by_id = {str(r.get("event_id")): r for r in events}
    for event_id, seq, transition, role, party, at, digest in db.query(
        "SELECT event_id, seq, transition, actor_role, actor_party, committed_at, payload_digest FROM events "
        "WHERE agreement_id = ? ORDER BY seq",
        (agreement_id,),
    ):
        record = by_id.get(str(event_id))
        if record is None:  # the chain check names an event without a record
            continue
        command = record.get("command") or {}
        actor = command.get("actor") or {}
        facts = {
            "seq": (int(seq), event_seq(str(event_id))),
            "transition": (str(transition), command.get("transition")),
            "actor": ((str(role), str(party)), (actor.get("role"), actor.get("party"))),
            "committed_at": (int(at), record.get("committed_at")),
            "payload_digest": (str(digest), _digest(command)),
        }
        differing = [name for name, (row, said) in facts.items() if row != said]
        if differing:
            found.add(int(record["seq"]), f"event `{event_id}` in the event log disagrees with evidence record "
                                          f"{record['seq']} on {', '.join(differing)}")  # fmt: skip


def _digest(command: object) -> str | None:
    try:
        return hash_bytes(canonical_bytes(command))
    except Exception:  # noqa: BLE001 - a record that does not encode supports no digest
        return None


# -- the outbox -------------------------------------------------------------------------------


def _outbox_rows(found: _Found, db: Backend, agreement_id: str, records: list[dict[str, Any]],
                 events: list[dict[str, Any]]) -> None:  # fmt: skip
    """Every outbox row is one an event record lists, with its postings, and its status has its record."""
    listed: dict[str, tuple[int, dict[str, Any], int]] = {}  # reference -> (record's seq, record, group)
    for record in events:
        for group, reference in enumerate(record.get("outbox") or []):  # an event lists its entries in group order
            listed[str(reference)] = (int(record["seq"]), record, group)
    settled: dict[str, list[str]] = {}
    last: dict[str, dict[str, Any]] = {}
    for record in records:
        if record.get("kind") in ("delivered", "quarantined"):
            settled.setdefault(str(record.get("reference")), []).append(str(record["kind"]))
            last[str(record.get("reference"))] = record
    present = set()
    for raw_reference, row_seq, row_group, raw_status, expected, returned, error in db.query(
        "SELECT reference, event_seq, group_index, status, expected_postings, delivered_postings, last_error "
        "FROM outbox WHERE agreement_id = ? ORDER BY event_seq, group_index",
        (agreement_id,),
    ):
        reference, status = str(raw_reference), str(raw_status)
        present.add(reference)
        if reference not in listed:
            found.add(None, f"outbox entry `{reference}` is listed by no event record")
            continue
        seq, record, group = listed[reference]
        if row_group != group:  # the order the worker delivers an event's entries in
            found.add(seq, f"outbox entry `{reference}` disagrees with evidence record {seq} on its group")
        want = [{k: p.get(k) for k in ("source_address", "destination_address", "amount", "asset")}
                for p in record.get("postings") or []]  # fmt: skip
        if int(row_seq) != event_seq(str(record.get("event_id"))) or _loads(expected) != want:
            found.add(seq, f"outbox entry `{reference}` disagrees with evidence record {seq} on its expected postings")
        kinds = settled.get(reference, [])
        if status == "delivered" and "delivered" not in kinds:
            found.add(None, f"outbox entry `{reference}` is delivered but no evidence record says it was delivered")
        elif status != "delivered" and "delivered" in kinds:
            found.add(None, f"outbox entry `{reference}` is {status} but an evidence record says it was delivered")
        elif status == "delivered" and error is not None:  # the worker clears it on delivery
            found.add(None, f"outbox entry `{reference}` is delivered with an error the delivery cleared")
        elif status == "quarantined" and "quarantined" not in kinds:
            found.add(None, f"outbox entry `{reference}` is quarantined but no evidence record says so")
        elif status == "quarantined":  # the reason and the ledger's answer, as the quarantine record has them
            record = last[reference]
            said = (f"{record.get('code')}: {record.get('reason')}", record.get("ledger"))
            held = (None if error is None else str(error), None if returned is None else _loads(returned))
            differing = [name for name, a, b in zip(("last_error", "delivered_postings"), held, said, strict=True)
                         if a != b]  # fmt: skip
            if differing:
                found.add(int(record["seq"]), f"outbox entry `{reference}` disagrees with evidence record "
                                              f"{record['seq']} on {', '.join(differing)}")  # fmt: skip
    for reference, (seq, _, _) in listed.items():
        if reference not in present:
            found.add(seq, f"evidence record {seq} lists outbox entry `{reference}`, which the outbox does not hold")


def _loads(text: object) -> object:
    try:
        return rows.loads(text, "outbox postings")
    except Exception:  # noqa: BLE001 - an unreadable column matches nothing
        return None


# -- approvals --------------------------------------------------------------------------------


def _approval_rows(found: _Found, db: Backend, agreement_id: str, records: list[dict[str, Any]],
                   events: list[dict[str, Any]]) -> None:  # fmt: skip
    """Consumed approvals and requests against the event records that consumed them and the grant records.

    A request's id is `apr-` and hex; its later four-eyes grants are rows
    `ID/2`, `ID/3`, ... (runtime/commands.py `Grant.rows`), all consumed by
    the one event whose record names `ID` as its `approval`.
    """
    consumed = {str(r.get("event_id")): r for r in events}
    grants: dict[str, list[tuple[str, str]]] = {}
    decided: dict[str, Mapping[str, Any]] = {}
    for record in records:
        if record.get("kind") == "approval_granted":
            approver = record.get("approver") or {}
            who = (str(approver.get("role")), str(approver.get("party")))
            grants.setdefault(str(record.get("approval")), []).append(who)
            if record.get("event_id") is not None:
                decided[str(record.get("approval"))] = record
    held: dict[str, list[tuple[str, str]]] = {}
    for row_id, role, party, event_id, transition, digest, granted_at in db.query(
        "SELECT id, approver_role, approver_party, consumed_event_id, transition, payload_digest, granted_at "
        "FROM approvals WHERE agreement_id = ? AND consumed_event_id IS NOT NULL ORDER BY id",
        (agreement_id,),
    ):
        request = str(row_id).split("/", 1)[0]
        held.setdefault(request, []).append((str(role), str(party)))
        consumer = consumed.get(str(event_id))
        if consumer is None or consumer.get("approval") != request:
            found.add(None, f"approval `{row_id}` is consumed by `{event_id}`, which no evidence record says")
            continue
        if (str(role), str(party)) not in grants.get(request, []):
            found.add(None, f"approval `{row_id}` names {role}:{party}, whom no evidence record shows granting it")
        command = consumer.get("command") or {}
        facts = {  # a grant row is written in the transaction of the command it allows, bound to that command
            "transition": (str(transition), command.get("transition")),
            "payload_digest": (str(digest), _digest(command)),
            "granted_at": (int(granted_at), consumer.get("committed_at")),
        }
        differing = [name for name, (row, said) in facts.items() if row != said]
        if differing:
            found.add(int(consumer["seq"]), f"approval `{row_id}` disagrees with evidence record "
                                            f"{consumer['seq']} on {', '.join(differing)}")  # fmt: skip
    for record in events:
        if record.get("approval") is None:
            continue
        request = str(record.get("approval"))
        recorded, rows_held = grants.get(str(request), []), held.get(str(request), [])
        if len(recorded) != len(rows_held):  # every grant of the consumed request has its row (the rows' own
            seq = int(record["seq"])  # parties are checked above): four eyes are two rows
            found.add(seq, f"evidence record {seq} consumed approval `{request}` granted by {_who(recorded)}; "
                           f"the approvals table holds {len(rows_held)} row(s) of it")  # fmt: skip
    for request_id, event_id, party, digest, proof, preview in db.query(
        "SELECT id, event_id, decided_by, preview_digest, proof_digest, preview FROM approval_requests "
        "WHERE agreement_id = ? AND status = 'consumed' ORDER BY id",
        (agreement_id,),
    ):
        if hash_bytes(str(preview).encode("utf-8")) != str(digest):  # the preview the claims read calls from
            found.add(None, f"approval request `{request_id}` holds a preview that does not hash to its digest")
            continue
        grant = decided.get(str(request_id))
        said = None if grant is None else (
            str(grant.get("event_id")), str((grant.get("approver") or {}).get("party")),
            str(grant.get("preview_digest")), grant.get("proof_digest"))  # fmt: skip
        if said != (str(event_id), str(party), str(digest), None if proof is None else str(proof)):
            found.add(None, f"approval request `{request_id}` as stored disagrees with its evidence records")


def _who(grants: list[tuple[str, str]]) -> str:
    return ", ".join(f"{role}:{party}" for role, party in grants) or "no grant"
