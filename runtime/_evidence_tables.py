"""The tables the evidence speaks from, checked against the hash-chained records (PW586).

`evidence` states the agreement's final state, version and balances, each
event's actor and commit time, each ledger reference's postings and status,
each effect call's amount, phase and provider reference, and who approved
what. Those facts live in the agreement row and in the events, outbox,
effects, approvals and approval_requests tables, which the chain does not
hash. So each is replayed here from the records that do hold them (the
`opened` record, the `event` records, the outbox worker's `delivered` and
`quarantined` records, the effect worker's `effect_*` records, the
operator's `effect_resolved`, the `approval_*` records) and compared with
the rows: a row the records do not support, or a record no row matches, is
a PW586 problem naming the table, the row and the field. Only what verifies
here may be claimed.

The effect replay follows the effect worker's rules (runtime/effect_worker.py
`after_phase`, `compensate_earlier`, which runtime/effect_ops.py's resolutions share): the
phase each record names, the calls before a given-up one in the same event
that declare `compensate with E` becoming `compensation_required`, and the
call a good compensation undoes becoming `compensated`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pactwright.canonical import canonical_bytes, hash_bytes
from pactwright.errors import PactwrightError
from pactwright.protocol import ON_FAILED
from pactwright.runtime import _agreement as rows
from pactwright.runtime._agreement import Agreement
from pactwright.runtime._compensation import derive
from pactwright.runtime.store._backend import Backend

__all__ = ["check_tables"]

# Phases after which a call is settled well, and records whose `phase` is the call's new phase.
_GOOD = frozenset({"acknowledged", "reconciled_recovered"})
_OUTCOMES = ("effect_acknowledged", "effect_failed", "effect_uncertain", "effect_mismatch", "effect_quarantined")
_EFFECT_FIELDS = ("effect", "strategy", "event_seq", "call_index", "compensates", "phase", "destination", "amount",
                  "idempotency_key", "payload_digest", "provider_ref", "quarantined", "resolution", "resolved_by",
                  "reason")  # fmt: skip


@dataclass
class _Call:
    """One effect call as the records have it."""

    effect: str | None
    event_seq: int
    call_index: int
    compensates: str | None
    strategy: str | None
    destination: str | None
    amount: str | None
    idempotency_key: str | None
    payload_digest: str | None
    phase: str = "prepared"
    provider_ref: str | None = None
    quarantined: int = 0
    resolution: str | None = None
    resolved_by: str | None = None
    reason: str | None = None
    recorded: bool = True  # False for a compensation the worker created and has not sent yet

    def values(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in _EFFECT_FIELDS}


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
        _effect_rows(found, db, agreement.id, doc, records, events)
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
            "seq": (int(seq), _event_seq(str(event_id))),
            "transition": (str(transition), command.get("transition")),
            "actor": ((str(role), str(party)), (actor.get("role"), actor.get("party"))),
            "committed_at": (int(at), record.get("committed_at")),
            "payload_digest": (str(digest), _digest(command)),
        }
        differing = [name for name, (row, said) in facts.items() if row != said]
        if differing:
            found.add(int(record["seq"]), f"event `{event_id}` in the event log disagrees with evidence record "
                                          f"{record['seq']} on {', '.join(differing)}")  # fmt: skip


def _event_seq(event_id: str) -> int | None:
    tail = event_id.rsplit("/", 1)[-1]
    return int(tail) if tail.isdigit() else None


def _digest(command: object) -> str | None:
    try:
        return hash_bytes(canonical_bytes(command))
    except Exception:  # noqa: BLE001 - a record that does not encode supports no digest
        return None


# -- the outbox -------------------------------------------------------------------------------


def _outbox_rows(found: _Found, db: Backend, agreement_id: str, records: list[dict[str, Any]],
                 events: list[dict[str, Any]]) -> None:  # fmt: skip
    """Every outbox row is one an event record lists, with its postings, and its status has its record."""
    listed: dict[str, tuple[int, dict[str, Any]]] = {}
    for record in events:
        for reference in record.get("outbox") or []:
            listed[str(reference)] = (int(record["seq"]), record)
    settled: dict[str, list[str]] = {}
    last: dict[str, dict[str, Any]] = {}
    for record in records:
        if record.get("kind") in ("delivered", "quarantined"):
            settled.setdefault(str(record.get("reference")), []).append(str(record["kind"]))
            last[str(record.get("reference"))] = record
    present = set()
    for raw_reference, event_seq, raw_status, expected, returned, error in db.query(
        "SELECT reference, event_seq, status, expected_postings, delivered_postings, last_error FROM outbox "
        "WHERE agreement_id = ? ORDER BY event_seq, group_index",
        (agreement_id,),
    ):
        reference, status = str(raw_reference), str(raw_status)
        present.add(reference)
        if reference not in listed:
            found.add(None, f"outbox entry `{reference}` is listed by no event record")
            continue
        seq, record = listed[reference]
        want = [{k: p.get(k) for k in ("source_address", "destination_address", "amount", "asset")}
                for p in record.get("postings") or []]  # fmt: skip
        if int(event_seq) != _event_seq(str(record.get("event_id"))) or _loads(expected) != want:
            found.add(seq, f"outbox entry `{reference}` disagrees with evidence record {seq} on its expected postings")
        kinds = settled.get(reference, [])
        if status == "delivered" and "delivered" not in kinds:
            found.add(None, f"outbox entry `{reference}` is delivered but no evidence record says it was delivered")
        elif status != "delivered" and "delivered" in kinds:
            found.add(None, f"outbox entry `{reference}` is {status} but an evidence record says it was delivered")
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
    for reference, (seq, _) in listed.items():
        if reference not in present:
            found.add(seq, f"evidence record {seq} lists outbox entry `{reference}`, which the outbox does not hold")


def _loads(text: object) -> object:
    try:
        return rows.loads(text, "outbox postings")
    except Exception:  # noqa: BLE001 - an unreadable column matches nothing
        return None


# -- effects ----------------------------------------------------------------------------------


def _strategies(doc: Mapping[str, Any], transition: str) -> list[str]:
    """Each call's strategy kind in `transition`, as runtime/effect_payload.py `planned_calls` picks it."""
    effects = {str(e["name"]): e for e in doc.get("effects", [])}
    spec: Mapping[str, Any] = next((t for t in doc.get("transitions", []) if t.get("id") == transition), {})
    out = []
    for call in spec.get("effects", []):
        strategy = call.get("strategy") or effects.get(str(call.get("effect")), {}).get("strategy") or {"kind": "once"}
        out.append(str(strategy["kind"]))
    return out


def _replay_effects(doc: Mapping[str, Any], agreement_id: str, records: list[dict[str, Any]],
                    payloads: Mapping[str, str]) -> dict[str, _Call]:  # fmt: skip
    """Every call as the records make it; `payloads` (instance -> the effects table's body) gives the bodies
    a compensation's derives from, each used only when it hashes to its call's recorded digest."""
    calls: dict[str, _Call] = {}
    for record in records:
        kind = str(record.get("kind"))
        if kind == "event":
            seq = _event_seq(str(record.get("event_id"))) or 0
            strategies = _strategies(doc, str((record.get("command") or {}).get("transition")))
            for index, call in enumerate(record.get("effects") or []):
                calls[str(call.get("instance"))] = _Call(
                    effect=str(call.get("effect")), event_seq=seq, call_index=index, compensates=None,
                    strategy=strategies[index] if index < len(strategies) else None,
                    destination=call.get("destination"), amount=call.get("amount"),
                    idempotency_key=call.get("idempotency_key"), payload_digest=call.get("payload_digest"),
                )  # fmt: skip
            continue
        instance = record.get("instance")
        if not kind.startswith("effect_") or not isinstance(instance, str):
            continue
        call = calls.get(instance) or _compensation(doc, agreement_id, calls, instance, payloads)
        if call is None:
            continue
        calls[instance] = call
        _step(calls, call, kind, record)
    return calls


def _compensation(doc: Mapping[str, Any], agreement_id: str, calls: dict[str, _Call], instance: str,
                  payloads: Mapping[str, str], *, recorded: bool = True) -> _Call | None:  # fmt: skip
    """The compensation `ID/c` of a recorded call, as runtime/_compensation.py derives it from the bundle and
    the call: never from its own row or its records (a record of a compensation refused unsent holds no key)."""
    original = calls.get(instance[:-2]) if instance.endswith("/c") else None
    if original is None:
        return None
    payload = payloads.get(instance[:-2])
    derived = None
    if (payload is not None and original.effect is not None and original.idempotency_key is not None
            and hash_bytes(payload.encode("utf-8")) == original.payload_digest):  # fmt: skip
        try:
            derived = derive(doc, agreement_id, instance[:-2], original.effect, original.idempotency_key, payload,
                             original.amount)  # fmt: skip
        except PactwrightError:
            derived = None
    if derived is None:  # nothing to expect: every field the row holds is named
        return _Call(effect=None, event_seq=original.event_seq, call_index=original.call_index,
                     compensates=instance[:-2], strategy=None, destination=None, amount=original.amount,
                     idempotency_key=None, payload_digest=None, recorded=recorded)  # fmt: skip
    return _Call(effect=derived.effect, event_seq=original.event_seq, call_index=original.call_index,
                 compensates=instance[:-2], strategy=derived.strategy, destination=derived.destination,
                 amount=derived.amount, idempotency_key=derived.idempotency_key,
                 payload_digest=derived.payload_digest, recorded=recorded)  # fmt: skip


def _step(calls: dict[str, _Call], call: _Call, kind: str, record: Mapping[str, Any]) -> None:
    if kind == "effect_dispatched":
        call.phase = "dispatched"
        return
    if kind == "effect_cancelled":
        call.phase = "cancelled"
        return
    if kind == "effect_lookup":
        if record.get("result") in ("applied", "not_applied"):
            call.phase, call.provider_ref = str(record.get("phase")), record.get("provider_ref")
            call.resolution = f"lookup:{record.get('result')}"
            _after(calls, call)
        return
    if kind == "effect_resolved":
        call.phase, call.quarantined = str(record.get("phase")), 0
        call.provider_ref = record.get("provider_ref") if record.get("provider_ref") is not None else call.provider_ref
        call.resolution, call.resolved_by, call.reason = (record.get("resolution"), record.get("operator"),
                                                          record.get("reason"))  # fmt: skip
        _after(calls, call)
        return
    if kind == "effect_quarantined" and record.get("sent") is False:  # an edited row, quarantined unsent
        call.quarantined = 1
        return
    if kind not in _OUTCOMES:
        return
    call.phase, call.provider_ref = str(record.get("phase")), record.get("provider_ref")
    call.quarantined = 1 if kind == "effect_quarantined" else 0
    _after(calls, call)


def _after(calls: dict[str, _Call], call: _Call) -> None:
    """runtime/effect_worker.py `after_phase` on the replayed calls: one rule for outcomes, lookups and
    operators' resolutions."""
    if call.compensates is not None:  # a good compensation undoes its call
        undone = calls.get(call.compensates)
        if call.phase in _GOOD and undone is not None:
            undone.phase = "compensated"
        return
    if call.phase in ("abandoned_uncertain", "compensation_required") or (
        call.phase == "failed" and ON_FAILED.get(call.strategy or "", "") is None
    ):
        _compensate_earlier(calls, call)


def _compensate_earlier(calls: dict[str, _Call], given_up: _Call) -> None:
    for other in calls.values():
        if (other.event_seq == given_up.event_seq and other.call_index < given_up.call_index
                and other.compensates is None and other.strategy == "compensate" and other.phase in _GOOD):  # fmt: skip
            other.phase = "compensation_required"


def _effect_rows(found: _Found, db: Backend, agreement_id: str, doc: Mapping[str, Any],
                 records: list[dict[str, Any]], events: list[dict[str, Any]]) -> None:  # fmt: skip
    table = db.query(
        "SELECT id, effect, strategy, event_seq, call_index, compensates, phase, method, url, amount, "
        "idempotency_key, payload_digest, provider_ref, quarantined, resolution, resolved_by, reason, payload "
        "FROM effects WHERE agreement_id = ? ORDER BY id",
        (agreement_id,),
    )
    payloads = {str(row[0]): str(row[-1]) for row in table}
    calls = _replay_effects(doc, agreement_id, records, payloads)
    present = set()
    for row in table:
        instance = str(row[0])
        present.add(instance)
        effect, strategy, event_seq, call_index, compensates, phase, method, url, *rest, payload = row[1:]
        stored = dict(zip(_EFFECT_FIELDS, (effect, strategy, int(event_seq), int(call_index), compensates, phase,
                                           f"{method} {url}", *rest), strict=True))  # fmt: skip
        stored["quarantined"] = int(stored["quarantined"])
        call = calls.get(instance)
        if call is None:
            call = _unsent_compensation(doc, agreement_id, calls, instance, stored, payloads)
        if call is None:
            found.add(None, f"effect call `{instance}` has no evidence record")
            continue
        differing = [name for name, value in call.values().items() if _shown(value) != _shown(stored[name])]
        if hash_bytes(str(payload).encode("utf-8")) != stored["payload_digest"]:  # the bytes a worker sends
            differing.append("payload")
        if differing:
            found.add(None, f"effect call `{instance}` disagrees with its evidence records on {', '.join(differing)}")
    for instance, call in calls.items():
        if instance not in present and call.recorded:
            found.add(None, f"evidence records name effect call `{instance}`, which the effects table does not hold")


def _unsent_compensation(doc: Mapping[str, Any], agreement_id: str, calls: dict[str, _Call], instance: str,
                         stored: Mapping[str, Any], payloads: Mapping[str, str]) -> _Call | None:  # fmt: skip
    """A compensation row made for a call the records put in `compensation_required`, not yet sent: it has no
    record of its own, so it must be exactly the one derived from its call (and it is claimed as not yet sent)."""
    original = calls.get(instance[:-2]) if instance.endswith("/c") else None
    if original is None or original.phase != "compensation_required" or stored["phase"] != "prepared":
        return None
    return _compensation(doc, agreement_id, calls, instance, payloads, recorded=False)


def _shown(value: object) -> object:
    return None if value is None else str(value)


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
