"""Effect calls as the hash-chained records make them, compared with the effects table.

One replay, read by two: `evidence verify` (runtime/_evidence_tables.py)
compares every row of an agreement's calls with it, and the effect worker
(runtime/effect_worker.py `_disagreement`) compares the one row it is
about to send, look up or recover, before any byte leaves. So a row edited
behind pactwright's back (its phase set back to `prepared`, its strategy
changed from `once` to `retry`, a compensation inserted for a call nobody
gave up or under a second id) is never acted on, and the evidence never
claims what the records do not say.

The replay follows the effect worker's rules (runtime/effect_worker.py
`after_phase`, `compensate_earlier`, shared with runtime/effect_ops.py's
resolutions): the phase each record names; the calls before a given-up one
in the same event that declare `compensate with E` becoming
`compensation_required`; the call a good compensation undoes (acknowledged,
or found applied by a lookup or an operator) becoming `compensated`. A
call's compensation is the one row `ID/c`, derived from the bundle and the
call (runtime/_compensation.py), and only for a call the records put in
`compensation_required`; a dispatch record is accepted only from a phase
the worker sends from.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pactwright.canonical import hash_bytes
from pactwright.errors import PactwrightError
from pactwright.protocol import ON_FAILED
from pactwright.runtime._compensation import derive
from pactwright.runtime.store._backend import Backend

__all__ = ["effect_problems", "event_seq", "row_disagreement"]

# Phases after which a call is settled well, and records whose `phase` is the call's new phase.
_GOOD = frozenset({"acknowledged", "reconciled_recovered"})
_OUTCOMES = ("effect_acknowledged", "effect_failed", "effect_uncertain", "effect_mismatch", "effect_quarantined")
# The phases the worker sends a call from (runtime/effect_worker.py `_SENDABLE`).
_SENDABLE = ("prepared", "reconciled_not_occurred")
_FIELDS = ("effect", "strategy", "event_seq", "call_index", "compensates", "phase", "destination", "amount",
           "idempotency_key", "payload_digest", "provider_ref", "quarantined", "resolution", "resolved_by",
           "reason")  # fmt: skip
_SELECT = (
    "SELECT id, effect, strategy, event_seq, call_index, compensates, phase, method, url, amount, "
    "idempotency_key, payload_digest, provider_ref, quarantined, resolution, resolved_by, reason, payload "
    "FROM effects WHERE agreement_id = ? ORDER BY id"
)


@dataclass
class _Call:
    """One effect call as the records have it (None: nothing the records support)."""

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
        return {name: getattr(self, name) for name in _FIELDS}


@dataclass(frozen=True)
class _Row:
    """One row of the effects table, in the replay's terms."""

    instance: str
    values: dict[str, Any]
    payload: str


def event_seq(event_id: str) -> int | None:
    tail = event_id.rsplit("/", 1)[-1]
    return int(tail) if tail.isdigit() else None


# -- the comparisons ------------------------------------------------------------------------


def effect_problems(db: Backend, agreement_id: str, doc: Mapping[str, Any], records: list[dict[str, Any]]) -> list[str]:
    """Every disagreement between the agreement's effect rows and the records (those of an intact walk)."""
    table = _rows(db, agreement_id)
    payloads = {r.instance: r.payload for r in table}
    calls = _replay(doc, agreement_id, records, payloads)
    out = []
    for row in table:
        problem = _compare(doc, agreement_id, calls, row, payloads)
        if problem is not None:
            out.append(problem)
    present = {r.instance for r in table}
    for instance, call in calls.items():
        if instance not in present and call.recorded:
            out.append(f"evidence records name effect call `{instance}`, which the effects table does not hold")
    return out


def row_disagreement(db: Backend, agreement_id: str, doc: Mapping[str, Any], records: list[dict[str, Any]],
                     instance: str, *, earlier: bool = False) -> str | None:  # fmt: skip
    """Why row `instance` is not the call the records make it (None when it is): the worker's check.

    With `earlier`, also every call the records put before it in its event
    (a row that disagrees, or one the table no longer holds), and every row
    the table puts there: the worker sends or cancels a call on what those
    rows say.
    """
    table = _rows(db, agreement_id)
    payloads = {r.instance: r.payload for r in table}
    calls = _replay(doc, agreement_id, records, payloads)
    row = next((r for r in table if r.instance == instance), None)
    if row is None:
        return f"effect call `{instance}` is gone"
    problem = _compare(doc, agreement_id, calls, row, payloads)
    if problem is not None or not earlier:
        return problem
    seq, index = row.values["event_seq"], row.values["call_index"]
    by_instance = {r.instance: r for r in table}
    # The rows `_action` reads (the table's idea of what came before) and the calls the records put there.
    before = [r.instance for r in table if r.values["event_seq"] == seq and r.values["call_index"] < index
              and r.values["compensates"] is None]  # fmt: skip
    before += [name for name, call in calls.items() if call.event_seq == seq and call.call_index < index
               and call.compensates is None and name not in before]  # fmt: skip
    for name in sorted(before):
        other = by_instance.get(name)
        problem = (f"evidence records name effect call `{name}`, which the effects table does not hold"
                   if other is None else _compare(doc, agreement_id, calls, other, payloads))  # fmt: skip
        if problem is not None:
            return f"{problem}; `{instance}` goes only after it"
    return None


def _rows(db: Backend, agreement_id: str) -> list[_Row]:
    out = []
    for row in db.query(_SELECT, (agreement_id,)):
        effect, strategy, seq, index, compensates, phase, method, url, *rest, payload = row[1:]
        values = dict(zip(_FIELDS, (effect, strategy, int(seq), int(index), compensates, phase, f"{method} {url}",
                                    *rest), strict=True))  # fmt: skip
        values["quarantined"] = int(values["quarantined"])
        out.append(_Row(str(row[0]), values, str(payload)))
    return out


def _compare(doc: Mapping[str, Any], agreement_id: str, calls: dict[str, _Call], row: _Row,
             payloads: Mapping[str, str]) -> str | None:  # fmt: skip
    call = calls.get(row.instance)
    if call is None:
        call = _unsent_compensation(doc, agreement_id, calls, row, payloads)
    if call is None:
        return f"effect call `{row.instance}` has no evidence record"
    differing = [name for name, value in call.values().items() if _shown(value) != _shown(row.values[name])]
    if hash_bytes(row.payload.encode("utf-8")) != row.values["payload_digest"]:  # the bytes a worker sends
        differing.append("payload")
    if differing:
        return f"effect call `{row.instance}` disagrees with its evidence records on {', '.join(differing)}"
    return None


def _unsent_compensation(doc: Mapping[str, Any], agreement_id: str, calls: dict[str, _Call], row: _Row,
                         payloads: Mapping[str, str]) -> _Call | None:  # fmt: skip
    """A compensation row made for a call the records put in `compensation_required`, not yet sent: it has no
    record of its own, so it must be exactly the one derived from its call (and it is claimed as not yet sent)."""
    original = calls.get(row.instance[:-2]) if row.instance.endswith("/c") else None
    if original is None or original.phase != "compensation_required" or row.values["phase"] != "prepared":
        return None
    return _compensation(doc, agreement_id, calls, row.instance, payloads, recorded=False)


def _shown(value: object) -> object:
    return None if value is None else str(value)


# -- the replay -----------------------------------------------------------------------------


def _strategies(doc: Mapping[str, Any], transition: str) -> list[str]:
    """Each call's strategy kind in `transition`, as runtime/effect_payload.py `planned_calls` picks it."""
    effects = {str(e["name"]): e for e in doc.get("effects", [])}
    spec: Mapping[str, Any] = next((t for t in doc.get("transitions", []) if t.get("id") == transition), {})
    out = []
    for call in spec.get("effects", []):
        strategy = call.get("strategy") or effects.get(str(call.get("effect")), {}).get("strategy") or {"kind": "once"}
        out.append(str(strategy["kind"]))
    return out


def _replay(doc: Mapping[str, Any], agreement_id: str, records: list[dict[str, Any]],
            payloads: Mapping[str, str]) -> dict[str, _Call]:  # fmt: skip
    """Every call as the records make it; `payloads` (instance -> the effects table's body) gives the bodies
    a compensation's derives from, each used only when it hashes to its call's recorded digest."""
    calls: dict[str, _Call] = {}
    for record in records:
        kind = str(record.get("kind"))
        if kind == "event":
            seq = event_seq(str(record.get("event_id"))) or 0
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
    if recorded and original.phase != "compensation_required":  # its first record: nobody gave its call up
        return _Call(effect=None, event_seq=original.event_seq, call_index=original.call_index,
                     compensates=instance[:-2], strategy=None, destination=None, amount=None, idempotency_key=None,
                     payload_digest=None, phase="(a compensation of a call nobody gave up)")  # fmt: skip
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
    if kind == "effect_dispatched":  # the worker sends only from these phases; any other is not its record
        call.phase = "dispatched" if call.phase in _SENDABLE else f"(dispatched from {call.phase})"
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
        if call.phase in _GOOD and undone is not None and call.effect is not None:  # not one nobody required
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
