"""The effect worker: send committed effect calls to their providers, each step persisted before the next.

A transition's `call EFFECT` is committed with its event as an `effects`
row in phase `prepared`, holding the exact bytes to send, the idempotency
key and the declared destination (runtime/effect_payload.py). The worker
moves each row through the effect protocol of `pactwright.protocol`, the
same tables the verifier explores, one persisted step at a time:

1. claim a due row with a lease (PostgreSQL `FOR UPDATE SKIP LOCKED`;
   SQLite's single writer), and, for a first send or a re-send, commit it as
   `dispatched` (attempts + 1) BEFORE any byte leaves;
2. send it through the adapter (runtime/effect_adapter.py), which refuses an
   undeclared destination before connecting;
3. commit the outcome and what the strategy makes of it, with an evidence
   record: `acknowledged`; after a definite failure `ON_FAILED`; after an
   unknown outcome `ON_UNCERTAIN` (`retry` and `idempotent` send again with
   the same key, `reconcilable` parks in `needs_reconciliation`, `once`
   abandons as "may have occurred", `compensate with E` requires E); an
   answer that contradicts the request (another amount or key, an unreadable
   body) quarantines the row, never success.

A row found `dispatched` whose lease ran out is a worker that died between
steps 1 and 3: the request may have left, so its outcome is unknown and the
strategy decides, exactly as after a lost response. A parked `reconcilable`
row is looked up by key: `applied` recovers it, `not_applied` sends it once
more, `unknown` leaves it parked for an operator (`pactwright effects`).

The calls of one event go in order: a call waits until the calls before it
succeeded, and is cancelled if one was given up (abandoned, failed for
good, or compensated); giving a step up makes the earlier calls of the same
event that declare `compensate with E` and happened require E. A
compensation is its own row (`ID/c`), governed like any call but never
compensated again.

`PACTWRIGHT_TEST_EFFECT_CRASH_AT` is a TEST-ONLY hook (docs/effects.md,
"Crash safety"): at the named point the process kills itself with SIGKILL,
so the crash matrix reaches every persisted step in a real process.
"""

from __future__ import annotations

import os
import signal
import socket
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final, Protocol

from pactwright.canonical import hash_bytes
from pactwright.errors import PactwrightError, UsageError
from pactwright.protocol import ON_FAILED, ON_UNCERTAIN, PHASE_NAMES
from pactwright.runtime import _agreement as rows
from pactwright.runtime import _loop as loop
from pactwright.runtime._compensation import compensation_body
from pactwright.runtime._effect_bundle import Own, Target, derived_compensation, disagreement, egress_of
from pactwright.runtime._loop import DEFAULT_LEASE, check_lease
from pactwright.runtime.clock import Clock, SystemClock, epoch_seconds
from pactwright.runtime.effect_adapter import EffectAdapter, EffectRequest, Lookup, Outcome
from pactwright.runtime.effect_payload import DEFAULT_TIMEOUT_S
from pactwright.runtime.store import Store
from pactwright.runtime.store._backend import Backend
from pactwright.runtime.store._migrations import EFFECT_TABLES, EFFECTS_LIVE

__all__ = ["CRASH_ENV", "CRASH_POINTS", "EffectStep", "EffectWorker"]

CRASH_ENV: Final = "PACTWRIGHT_TEST_EFFECT_CRASH_AT"
CRASH_POINTS: Final = ("after_claim", "after_dispatched", "after_send", "after_outcome")
MAX_BACKOFF: Final = 300
GOOD: Final = frozenset({"acknowledged", "reconciled_recovered"})
# A call in one of these phases was given up: the calls after it in the same event are cancelled.
GIVEN_UP: Final = frozenset({"abandoned_uncertain", "compensation_required", "compensated", "cancelled"})
_SENDABLE: Final = ("prepared", "reconciled_not_occurred")
# `next_at` of a call that is never due again: its compensation was given up (an operator decides).
NEVER: Final = 2**62
_COLUMNS: Final = (
    "id, agreement_id, event_seq, call_index, effect, strategy, compensates, phase, method, url, "
    "idempotency_key, payload, amount, attempts"
)


def _listed(names: frozenset[str] | tuple[str, ...]) -> str:
    return ", ".join(f"'{name}'" for name in sorted(names))


# An earlier call a later one of its event waits for (`_action`): not gone well, not given up.
_UNSETTLED: Final = (
    f"w.phase NOT IN ({_listed(GOOD | GIVEN_UP)}) AND NOT (w.phase = 'failed' "
    f"AND w.strategy IN ({_listed(tuple(s for s, after in ON_FAILED.items() if after is None))}))"
)
# Due: a row to send, a parked row to look up, a required compensation, or a send whose worker died.
# A row to send that waits for an earlier call is not due: a claim would only pass over it, and enough
# of them would hide every other due call from the candidates a claim reads.
_IS_DUE: Final = (
    "quarantined = 0 AND next_at <= ? AND ("  # noqa: S608 - fixed phase and strategy names
    "(phase IN ('prepared', 'reconciled_not_occurred', 'needs_reconciliation', 'compensation_required') "
    "AND (lease_until IS NULL OR lease_until < ?)) "
    "OR (phase = 'dispatched' AND lease_until < ?)) "
    "AND NOT (compensates IS NULL AND phase IN ('prepared', 'reconciled_not_occurred') AND EXISTS "
    "(SELECT 1 FROM effects w WHERE w.agreement_id = effects.agreement_id AND w.event_seq = effects.event_seq "
    f"AND w.call_index < effects.call_index AND w.compensates IS NULL AND {_UNSETTLED}))"
)
# The candidates, read without a lock; each is then claimed on its own (`_claim_one`).
# The index `effects_live` (migrations 13 and 14) holds exactly the rows of the first two terms, in this
# order. Agreements due at one instant go in code-point order of their ids on both backends, as the
# outbox worker's do: SQLite compares text byte by byte; PostgreSQL follows the database's collation
# unless told "C".
_DUE_ORDERED: Final = (
    f"SELECT id, agreement_id FROM effects WHERE quarantined = 0 AND phase IN {EFFECTS_LIVE} "  # noqa: S608
    f"AND {_IS_DUE} ORDER BY next_at, agreement_id{{collate}}, event_seq, call_index LIMIT 64"
)
_DUE: Final = {"sqlite": _DUE_ORDERED.format(collate=""), "postgresql": _DUE_ORDERED.format(collate=' COLLATE "C"')}
_DUE_ONE: Final = f"SELECT {_COLUMNS} FROM effects WHERE id = ? AND {_IS_DUE}"  # noqa: S608


def _owner() -> str:
    return f"{socket.gethostname()[:64]}:{os.getpid()}:{os.urandom(4).hex()}"


def _crash_point() -> str | None:
    point = os.environ.get(CRASH_ENV) or None
    if point is not None and point not in CRASH_POINTS:
        raise UsageError(f"`{CRASH_ENV}={point}` names no crash point", expected=", ".join(CRASH_POINTS))
    return point


@dataclass(frozen=True)
class EffectStep:
    """One step the worker took on one call: what it did and the phase the call is in after it."""

    instance: str
    effect: str
    action: str  # dispatch | lookup | compensate | recover | cancel
    phase: str
    attempts: int
    outcome: str | None = None
    provider_ref: str | None = None
    detail: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"instance": self.instance, "effect": self.effect, "action": self.action, "phase": self.phase,
                "attempts": self.attempts, "outcome": self.outcome, "provider_ref": self.provider_ref,
                "detail": self.detail}  # fmt: skip


@dataclass(frozen=True)
class _Row:
    id: str
    agreement_id: str
    event_seq: int
    call_index: int
    effect: str
    strategy: str
    compensates: str | None
    phase: str
    method: str
    url: str
    key: str
    payload: str
    amount: str | None
    attempts: int

    @classmethod
    def of(cls, row: tuple[Any, ...]) -> _Row:
        (id_, agreement, seq, index, effect, strategy, compensates, phase, method, url, key, payload, amount,
         attempts) = row  # fmt: skip
        return cls(str(id_), str(agreement), int(seq), int(index), str(effect), str(strategy),
                   None if compensates is None else str(compensates), str(phase), str(method), str(url), str(key),
                   str(payload), None if amount is None else str(amount), int(attempts))  # fmt: skip


class EffectWorker:
    """Moves due effect calls of `store` one persisted step at a time; several may run at once."""

    def __init__(self, store: Store, adapter: EffectAdapter, clock: Clock | None = None, *,
                 owner: str | None = None, lease_seconds: int = DEFAULT_LEASE) -> None:  # fmt: skip
        check_lease(lease_seconds)
        self.store = store
        self.adapter = adapter
        self.clock = clock or SystemClock()
        self.owner = owner or _owner()
        self.lease_seconds = lease_seconds
        self._crash_at = _crash_point()

    # -- the loop ---------------------------------------------------------------

    def step(self) -> EffectStep | None:
        """Take one step on the next due call; None when nothing is due."""
        claimed = self._claim()
        if claimed is None:
            return None
        row, action, target = claimed
        if action == "refused":
            detail = f"{EDITED}: the call's row disagrees with its committed event; never sent"
            return EffectStep(row.id, row.effect, "refuse", row.phase, row.attempts, "mismatch", detail=detail)
        self._crash("after_claim")
        if action in {"cancel", "recover"}:
            return self._settle(row, action)
        if action == "lookup":
            return self._lookup(row, target)
        return self._send(row, target)

    def drain(self, limit: int | None = None) -> list[EffectStep]:
        """Step until nothing is due (calls backing off are not due)."""
        return loop.drain(self.step, limit)

    def run(self, should_stop: Callable[[], bool], idle_seconds: float = 1.0) -> list[EffectStep]:
        """Step until `should_stop()` (checked between steps and while idle); never stops mid-step."""
        return loop.run(self.step, should_stop, idle_seconds)

    # -- the steps ------------------------------------------------------------------

    def _now(self) -> int:
        return epoch_seconds(self.clock)

    # -- step 1: claim ------------------------------------------------------------

    def _claim(self) -> tuple[_Row, str, Target] | None:
        """The next due call this worker may take a step on, leased; None when no call is.

        The candidates are read without a lock, then each is claimed in a
        transaction of its own that takes the agreement's row lock first and
        the call's row after it (`SKIP LOCKED` on PostgreSQL, re-checking that
        it is still due). Every writer of effect rows (a command, an outcome,
        a lookup, an operator's resolution) locks the agreement first, so no
        two transactions ever wait for each other's locks in opposite order;
        and a candidate that must wait holds nothing while the next is tried.
        """
        if self.store.schema_version() < EFFECT_TABLES:
            return None
        now = self._now()
        with self.store.transaction(write=False) as db:
            due = db.query(_DUE[db.name], (now, now, now))
            candidates = [(str(instance), str(agreement)) for instance, agreement in due]
        for instance, agreement_id in candidates:
            claimed = self._claim_one(instance, agreement_id, now)
            if claimed is not None:
                return claimed
        return None

    def _claim_one(self, instance: str, agreement_id: str, now: int) -> tuple[_Row, str, Target] | None:
        with self.store.transaction(write=True, exclusive=False) as db:
            _lock_agreement(db, agreement_id)  # evidence is appended under the agreement's lock
            own = Own(self.store, db, agreement_id)
            sql = _DUE_ONE + (" FOR UPDATE SKIP LOCKED" if db.name == "postgresql" else "")
            found = db.query(sql, (instance, now, now, now))
            if not found:
                return None  # another worker took it, or it changed since it was read
            row = _Row.of(found[0])
            if row.agreement_id != agreement_id:
                return None  # moved to another agreement since it was read: the next round locks that one
            action = self._action(db, row)
            if action is None:
                return None  # waits for an earlier call of its event
            if action == "compensate":
                # The call must be one the records gave up, before its compensation is made at all.
                if _current(db, f"{row.id}/c") is None and (why := disagreement(own, row)):
                    _quarantine_unsent(db, row, why, now)
                    return row, "refused", Target((), DEFAULT_TIMEOUT_S)
                made = _compensation(db, own, row, now)
                if made is None:
                    _quarantine_unsent(db, row, f"`{row.id}` needs a compensation its bundle does not derive",
                                       now)  # fmt: skip
                    return row, "refused", Target((), DEFAULT_TIMEOUT_S)
                compensation, created = made
                if not created:
                    # The compensation row exists and is due on its own (sent, looked up, recovered
                    # there); a given-up one (abandoned, failed for good) is never sent again, and the
                    # call it was to undo leaves the due set, for an operator.
                    if compensation.phase == "abandoned_uncertain" or (
                        compensation.phase == "failed" and ON_FAILED[compensation.strategy] is None
                    ):
                        db.execute("UPDATE effects SET next_at = ?, updated_at = ? WHERE id = ?",
                                   (NEVER, now, row.id))  # fmt: skip
                    return None
                row, action = compensation, "dispatch"
            # Every step rests on the row as its records make it; a send or a cancel also on the earlier
            # calls of its event (whether they went well or were given up), as `_action` read their rows.
            earlier = action in {"dispatch", "cancel"} and row.compensates is None
            if why := disagreement(own, row, earlier=earlier):
                _quarantine_unsent(db, row, why, now)
                return row, "refused", Target((), DEFAULT_TIMEOUT_S)
            target = egress_of(own, row)
            if action == "dispatch":
                row = _mark_dispatched(db, row, self.owner, now + self.lease_seconds, now)
            else:
                db.execute("UPDATE effects SET lease_owner = ?, lease_until = ?, updated_at = ? WHERE id = ?",
                           (self.owner, now + self.lease_seconds, now, row.id))  # fmt: skip
            return row, action, target

    def _action(self, db: Backend, row: _Row) -> str | None:
        if row.phase == "dispatched":
            return "recover"
        if row.phase == "needs_reconciliation":
            return "lookup"
        if row.phase == "compensation_required":
            return "compensate"
        if row.compensates is not None:
            return "dispatch"  # a compensation runs on its own
        earlier = db.query(
            "SELECT phase, strategy FROM effects WHERE agreement_id = ? AND event_seq = ? AND call_index < ? "
            "AND compensates IS NULL ORDER BY call_index",
            (row.agreement_id, row.event_seq, row.call_index),
        )
        for phase, strategy in earlier:
            if phase in GOOD:
                continue
            if phase in GIVEN_UP or (phase == "failed" and ON_FAILED[str(strategy)] is None):
                return "cancel"
            return None
        return "dispatch"

    # -- steps 2 and 3: send, then commit the outcome ----------------------------

    def _send(self, row: _Row, target: Target) -> EffectStep:
        self._crash("after_dispatched")
        try:
            outcome = self.adapter.dispatch(_request(row, target), target.egress)
        except PactwrightError as exc:  # refused before anything left (undeclared egress, no route, ...)
            outcome = Outcome("failed", detail=f"{exc.code}: {exc.message}")
        self._crash("after_send")
        step = self._record(row, "dispatch", outcome)
        self._crash("after_outcome")
        return step

    def _record(self, row: _Row, action: str, outcome: Outcome) -> EffectStep:
        now = self._now()
        with self.store.transaction(write=True, exclusive=False) as db:
            _lock_agreement(db, row.agreement_id)
            current = _current(db, row.id)
            if current is None or current.phase != "dispatched" or current.attempts != row.attempts:
                return EffectStep(row.id, row.effect, action, current.phase if current else "gone", row.attempts,
                                  outcome.kind, detail="another worker finished this step")  # fmt: skip
            strategy = _governing(row)
            if outcome.kind == "acknowledged":
                phase, ref = "acknowledged", outcome.provider_ref
            elif outcome.kind == "failed":
                after = ON_FAILED[strategy]
                phase, ref = ("failed" if after is None else PHASE_NAMES[after]), None
            elif outcome.kind == "uncertain":
                phase, ref = PHASE_NAMES[ON_UNCERTAIN[strategy]], None
            else:
                phase, ref = "uncertain", outcome.provider_ref
            self._write_outcome(db, row, phase, ref, outcome, now)
        return EffectStep(row.id, row.effect, action, phase, row.attempts, outcome.kind, ref, outcome.detail)

    def _write_outcome(self, db: Backend, row: _Row, phase: str, ref: str | None, outcome: Outcome, now: int) -> None:
        quarantined = 1 if outcome.kind == "mismatch" else 0
        delay = min(MAX_BACKOFF, 2 ** min(row.attempts, 16)) if phase == "prepared" else 0
        db.execute(
            "UPDATE effects SET phase = ?, provider_ref = ?, last_error = ?, quarantined = ?, lease_owner = NULL, "
            "lease_until = NULL, next_at = ?, updated_at = ? WHERE id = ?",
            (phase, ref, outcome.detail[:500] or None, quarantined, now + delay, now, row.id),
        )
        kind = "effect_quarantined" if quarantined else f"effect_{outcome.kind}"
        rows.append_evidence(db, row.agreement_id, kind, {
            "instance": row.id, "effect": row.effect, "event_seq": row.event_seq, "attempt": row.attempts,
            "destination": f"{row.method} {row.url}", "idempotency_key": row.key,
            "payload_digest": hash_bytes(row.payload.encode("utf-8")), "amount": row.amount,
            "outcome": outcome.kind, "phase": phase, "provider_ref": ref, "detail": outcome.detail[:500],
            "compensates": row.compensates, "at": now})  # fmt: skip
        after_phase(db, row, phase, now)

    def _settle(self, row: _Row, action: str) -> EffectStep:
        """A cancel (an earlier call was given up) or a recovery (a dispatch whose worker died)."""
        if action == "recover":
            detail = "the worker stopped after the call was marked dispatched: it may have been sent"
            return self._record(row, "recover", Outcome("uncertain", detail=detail))
        now = self._now()
        with self.store.transaction(write=True, exclusive=False) as db:
            _lock_agreement(db, row.agreement_id)
            current = _current(db, row.id)
            if current is None or current.phase not in _SENDABLE:
                return EffectStep(row.id, row.effect, action, current.phase if current else "gone", row.attempts)
            db.execute("UPDATE effects SET phase = 'cancelled', lease_owner = NULL, lease_until = NULL, "
                       "updated_at = ? WHERE id = ?", (now, row.id))  # fmt: skip
            rows.append_evidence(db, row.agreement_id, "effect_cancelled", {
                "instance": row.id, "effect": row.effect, "event_seq": row.event_seq,
                "reason": "an earlier call of the same event was given up; this one was never sent",
                "at": now})  # fmt: skip
        return EffectStep(row.id, row.effect, "cancel", "cancelled", row.attempts)

    def _lookup(self, row: _Row, target: Target) -> EffectStep:
        try:
            found = self.adapter.lookup(_request(row, target), target.egress)
        except PactwrightError as exc:
            found = Lookup("unknown", detail=f"{exc.code}: {exc.message}")
        now = self._now()
        with self.store.transaction(write=True, exclusive=False) as db:
            _lock_agreement(db, row.agreement_id)
            current = _current(db, row.id)
            if current is None or current.phase != "needs_reconciliation":
                return EffectStep(row.id, row.effect, "lookup", current.phase if current else "gone", row.attempts)
            phase = {"applied": "reconciled_recovered", "not_applied": "reconciled_not_occurred"}.get(found.kind)
            if phase is None:  # unknown: stays parked; looked up again after a back-off, or resolved by hand
                delay = min(MAX_BACKOFF, 2 ** min(row.attempts + 2, 16))
                db.execute("UPDATE effects SET lease_owner = NULL, lease_until = NULL, next_at = ?, last_error = ?, "
                           "updated_at = ? WHERE id = ?",
                           (now + delay, f"lookup: {found.detail}"[:500], now, row.id))  # fmt: skip
                phase = "needs_reconciliation"
            else:
                db.execute("UPDATE effects SET phase = ?, provider_ref = ?, resolution = ?, lease_owner = NULL, "
                           "lease_until = NULL, next_at = ?, updated_at = ? WHERE id = ?",
                           (phase, found.provider_ref, f"lookup:{found.kind}", now, now, row.id))  # fmt: skip
                after_phase(db, row, phase, now)
            rows.append_evidence(db, row.agreement_id, "effect_lookup", {
                "instance": row.id, "effect": row.effect, "idempotency_key": row.key, "result": found.kind,
                "provider_ref": found.provider_ref, "phase": phase, "detail": found.detail[:500],
                "at": now})  # fmt: skip
        return EffectStep(row.id, row.effect, "lookup", phase, row.attempts, found.kind, found.provider_ref,
                          found.detail)  # fmt: skip

    def _crash(self, point: str) -> None:
        if self._crash_at == point:
            os.kill(os.getpid(), signal.SIGKILL)


# -- helpers shared by the steps --------------------------------------------------------


def _governing(row: _Row) -> str:
    """The strategy that decides this row's next phase; a compensation is never compensated again."""
    if row.compensates is not None and row.strategy == "compensate":
        return "once"
    return row.strategy


def _current(db: Backend, instance: str) -> _Row | None:
    found = db.query(f"SELECT {_COLUMNS} FROM effects WHERE id = ?", (instance,))  # noqa: S608
    return _Row.of(found[0]) if found else None


def _mark_dispatched(db: Backend, row: _Row, owner: str, until: int, now: int) -> _Row:
    db.execute(
        "UPDATE effects SET phase = 'dispatched', attempts = ?, lease_owner = ?, lease_until = ?, updated_at = ? "
        "WHERE id = ?",
        (row.attempts + 1, owner, until, now, row.id),
    )
    rows.append_evidence(db, row.agreement_id, "effect_dispatched", {
        "instance": row.id, "effect": row.effect, "attempt": row.attempts + 1,
        "destination": f"{row.method} {row.url}", "idempotency_key": row.key,
        "payload_digest": hash_bytes(row.payload.encode("utf-8")), "at": now})  # fmt: skip
    return _Row(row.id, row.agreement_id, row.event_seq, row.call_index, row.effect, row.strategy, row.compensates,
                "dispatched", row.method, row.url, row.key, row.payload, row.amount, row.attempts + 1)  # fmt: skip


class CallSite(Protocol):
    """What `after_phase` reads of a call: the worker's row and the operator's record both have it."""

    @property
    def agreement_id(self) -> str: ...
    @property
    def event_seq(self) -> int: ...
    @property
    def call_index(self) -> int: ...
    @property
    def strategy(self) -> str: ...
    @property
    def compensates(self) -> str | None: ...


def after_phase(db: Backend, row: CallSite, phase: str, now: int) -> None:
    """What a call's new phase means for the rest of its event and for the call it compensates.

    One rule for every way a phase is reached: an outcome the worker
    records, a lookup that finds the call applied or not, an operator's
    resolution. A compensation found applied (by a lookup or an operator)
    undoes its call exactly as an acknowledged one does; the evidence replay
    (runtime/_evidence_tables.py `_after`) follows the same rule.
    """
    if row.compensates is not None:
        if phase in GOOD:
            db.execute("UPDATE effects SET phase = 'compensated', updated_at = ? WHERE id = ?",
                       (now, row.compensates))  # fmt: skip
        return
    # Given up: abandoned, failed for good, or being undone (`compensate` after an unknown outcome), as the
    # verifier's model has it: the calls before it in the same event are undone too.
    given_up = phase in ("abandoned_uncertain", "compensation_required") or (
        phase == "failed" and ON_FAILED[row.strategy] is None
    )
    if given_up:
        compensate_earlier(db, row.agreement_id, row.event_seq, row.call_index, now)


def compensate_earlier(db: Backend, agreement_id: str, event_seq: int, call_index: int, now: int) -> None:
    """A step was given up: the earlier calls of its event that declare `compensate with E` and happened need E."""
    db.execute(
        "UPDATE effects SET phase = 'compensation_required', next_at = ?, updated_at = ? "
        "WHERE agreement_id = ? AND event_seq = ? AND call_index < ? AND compensates IS NULL "
        "AND strategy = 'compensate' AND phase IN ('acknowledged', 'reconciled_recovered')",
        (now, now, agreement_id, event_seq, call_index),
    )


EDITED: Final = "PW644"


def _quarantine_unsent(db: Backend, row: _Row, why: str, now: int) -> None:
    db.execute("UPDATE effects SET quarantined = 1, last_error = ?, updated_at = ? WHERE id = ?",
               (f"{EDITED}: {why}"[:500], now, row.id))  # fmt: skip
    rows.append_evidence(db, row.agreement_id, "effect_quarantined", {
        "instance": row.id, "effect": row.effect, "event_seq": row.event_seq, "outcome": "refused",
        "phase": row.phase, "detail": f"{EDITED}: {why}"[:500], "sent": False, "at": now})  # fmt: skip


def _compensation_body(original: _Row, name: str) -> tuple[bytes, str]:
    """The exact body and key of the compensation `name` of `original`: a function of the original alone."""
    return compensation_body(original.agreement_id, original.id, original.key, original.payload, original.amount,
                             name)  # fmt: skip


def _compensation(db: Backend, own: Own, row: _Row, now: int) -> tuple[_Row, bool] | None:
    """The compensation row for `row` (created once, `ID/c`, as runtime/_compensation.py derives it), and
    whether it was created now; None when the bundle derives none (the row's strategy was edited, or its
    bundle no longer verifies). The call it undoes keeps its phase until it ran."""
    instance = f"{row.id}/c"
    found = _current(db, instance)
    if found is not None:
        return found, False
    derived = derived_compensation(own, row)
    if derived is None:
        return None
    db.execute(
        "INSERT INTO effects (id, agreement_id, event_seq, call_index, effect, strategy, compensates, phase, method, "
        "url, idempotency_key, payload, payload_digest, amount, attempts, next_at, created_at, updated_at) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, 'prepared', ?, ?, ?, ?, ?, ?, 0, ?, ?, ?)",
        (instance, row.agreement_id, row.event_seq, row.call_index, derived.effect, derived.strategy, row.id,
         derived.method, derived.url, derived.idempotency_key, derived.body.decode("utf-8"), derived.payload_digest,
         row.amount, now, now, now),
    )  # fmt: skip
    created = _current(db, instance)
    assert created is not None
    return created, True


def _request(row: _Row, target: Target) -> EffectRequest:
    return EffectRequest(row.id, row.effect, row.method, row.url, row.key, row.payload.encode("utf-8"), row.amount,
                         float(target.timeout_s))  # fmt: skip


def _lock_agreement(db: Backend, agreement_id: str) -> None:
    """Evidence is appended under the agreement's row lock (SQLite: BEGIN IMMEDIATE already is)."""
    if db.name == "postgresql":
        db.query("SELECT id FROM agreements WHERE id = ? FOR UPDATE", (agreement_id,))
