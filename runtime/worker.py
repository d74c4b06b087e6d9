"""The outbox worker: deliver committed posting groups to the ledger, at least once, in commit order.

The command path writes one outbox row per posting group in the command's
own store transaction; the ledger is another database that shares no
transaction with the store. The worker closes that gap with four steps per
entry, each safe to repeat:

1. claim: in one short store transaction, take the first due entry whose
   agreement has no earlier undelivered entry, and write a lease on it
   (owner, until). PostgreSQL: `SELECT ... FOR UPDATE SKIP LOCKED`, so
   concurrent workers pass over each other's rows; SQLite: the claim runs
   under `BEGIN IMMEDIATE` (one writer), so two processes never claim the
   same entry. A lease that has expired can be taken over. The same
   transaction reads the program from the agreement's re-verified bundle
   and reads and checks the agreement's evidence chain, which the entry is
   checked against before the ledger sees it;
2. apply: `Ledger.apply(reference, program, variables)` with the entry's
   stable reference `AGREEMENT/EVENTSEQ/GROUP`; the ledger deduplicates by
   reference, so a second apply after a crash moves nothing again;
3. compare: the postings the ledger returned against the expected postings
   stored at commit (`_worker_compare`);
4. mark: in one store transaction, under the agreement's row lock, mark the
   entry delivered (storing the delivered postings) or quarantined (storing
   the ledger's side and the reason; the expected side stays in its row),
   and append the hash-chained evidence record. Only the transaction that
   moves the entry out of `pending` appends, so the record is written once.

A transient ledger failure (the database is unreachable or refused the
write: PW550, PW552, or a driver error) releases the lease with a back-off
(`attempts`, next try at `lease_until`) and the entry is retried later with
the same reference. A deterministic refusal (overdraft, a reference reused
with other variables, a program that does not run) quarantines.

`PACTWRIGHT_TEST_CRASH_AT` is a TEST-ONLY hook (docs/runtime.md, "Crash
safety"): at the named point the worker process kills itself with SIGKILL,
so the crash-matrix tests reach every step of delivery in a real process.
"""

from __future__ import annotations

import os
import signal
import socket
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

from pactwright.errors import LedgerError, PactwrightError, UsageError
from pactwright.money import MAX_DIGITS
from pactwright.runtime import _agreement as rows
from pactwright.runtime import _loop as loop
from pactwright.runtime._evidence_chain import ChainCheck, check_chain
from pactwright.runtime._loop import DEFAULT_LEASE, check_lease
from pactwright.runtime._worker_compare import Mismatch, compare, ledger_side, normalize_expected
from pactwright.runtime.clock import Clock, SystemClock, epoch_seconds
from pactwright.runtime.ledger_api import Ledger
from pactwright.runtime.store import Store
from pactwright.runtime.store._backend import Backend
from pactwright.runtime.store._migrations import RUNTIME_TABLES

__all__ = ["CRASH_ENV", "CRASH_POINTS", "Outcome", "Worker"]

CRASH_ENV: Final = "PACTWRIGHT_TEST_CRASH_AT"
CRASH_POINTS: Final = ("after_claim", "after_ledger_apply", "during_compare", "after_mark")
TRANSIENT: Final = frozenset({"PW550", "PW552"})
MAX_BACKOFF: Final = 300
_STATUS_AND_HEAD: Final = (
    "SELECT o.status, e.seq, e.hash FROM outbox o "  # noqa: S608 - fixed statements only
    f"LEFT JOIN ({rows.HEAD_SQL}) e ON 1 = 1 WHERE o.reference = ?"
)

# The first due entry whose agreement has nothing undelivered before it (commit order).
_DUE = (
    "SELECT o.agreement_id, o.event_seq, o.group_index, o.reference, o.program_path, o.variables, "
    "o.expected_postings, o.attempts FROM outbox o "
    "WHERE o.status = 'pending' AND (o.lease_until IS NULL OR o.lease_until <= ?) "
    "AND NOT EXISTS (SELECT 1 FROM outbox e WHERE e.agreement_id = o.agreement_id AND e.status <> 'delivered' "
    "AND (e.event_seq < o.event_seq OR (e.event_seq = o.event_seq AND e.group_index < o.group_index))) "
    "ORDER BY o.created_at, o.agreement_id{collate}, o.event_seq, o.group_index LIMIT 1"
)
# Agreements due at one instant go in code-point order of their ids on both backends: SQLite compares
# text byte by byte; PostgreSQL follows the database's collation unless told "C".
_DUE_SQL = {"sqlite": _DUE.format(collate=""), "postgresql": _DUE.format(collate=' COLLATE "C"')}


@dataclass(frozen=True)
class Outcome:
    """What one delivery attempt did: `delivered`, `quarantined`, `retry` or `skipped` (another worker won)."""

    reference: str
    status: str
    attempts: int
    code: str | None = None
    message: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"reference": self.reference, "status": self.status, "attempts": self.attempts,
                "code": self.code, "message": self.message}  # fmt: skip


@dataclass(frozen=True)
class _Claim:
    agreement_id: str
    event_seq: int
    group: int
    reference: str
    program_path: str
    program_text: str | None
    variables: Any
    expected: Any
    attempts: int
    # The agreement's evidence chain as the claim's transaction read and checked it (None: no agreement to read)
    chain: ChainCheck | None = None


def _owner() -> str:
    return f"{socket.gethostname()[:64]}:{os.getpid()}:{os.urandom(4).hex()}"


def _crash_point() -> str | None:
    point = os.environ.get(CRASH_ENV) or None
    if point is not None and point not in CRASH_POINTS:
        raise UsageError(f"`{CRASH_ENV}={point}` names no crash point", expected=", ".join(CRASH_POINTS))
    return point


class Worker:
    """Delivers due outbox entries from `store` to `ledger`; several may run at once on one store."""

    def __init__(
        self,
        store: Store,
        ledger: Ledger,
        clock: Clock | None = None,
        *,
        owner: str | None = None,
        lease_seconds: int = DEFAULT_LEASE,
    ) -> None:
        check_lease(lease_seconds)
        self.store = store
        self.ledger = ledger
        self.clock = clock or SystemClock()
        self.owner = owner or _owner()
        self.lease_seconds = lease_seconds
        self._crash_at = _crash_point()
        # A store's schema only moves forward: once it has the outbox, it keeps it for this worker's life.
        self._has_outbox = False

    # -- the loop ---------------------------------------------------------------

    def deliver_one(self) -> Outcome | None:
        """Claim and deliver the next due entry; None when nothing is due."""
        claim = self._claim()
        if claim is None:
            return None
        self._crash("after_claim")
        return self._deliver(claim)

    def drain(self, limit: int | None = None) -> list[Outcome]:
        """Deliver until nothing is due (entries backing off are not due); the outcomes in order."""
        return loop.drain(self.deliver_one, limit)

    def run(self, should_stop: Callable[[], bool], idle_seconds: float = 1.0) -> list[Outcome]:
        """Step until `should_stop()` (checked between steps and while idle); never stops mid-step."""
        return loop.run(self.deliver_one, should_stop, idle_seconds)

    # -- the steps ------------------------------------------------------------------

    def _now(self) -> int:
        return epoch_seconds(self.clock)

    def _claim(self) -> _Claim | None:
        if not self._has_outbox:
            if self.store.schema_version() < RUNTIME_TABLES:
                return None  # a store made before the outbox existed has nothing to deliver
            self._has_outbox = True
        now = self._now()
        with self.store.transaction(write=True, exclusive=False) as db:
            sql = _DUE_SQL[db.name] + (" FOR UPDATE OF o SKIP LOCKED" if db.name == "postgresql" else "")
            found = db.query(sql, (now,))
            if not found:
                return None
            agreement_id, seq, group, reference, path, variables, expected, attempts = found[0]
            db.execute(
                "UPDATE outbox SET lease_owner = ?, lease_until = ?, attempts = ?, updated_at = ? "
                "WHERE reference = ? AND status = 'pending'",
                (self.owner, now + self.lease_seconds, int(attempts) + 1, now, reference),
            )
            text, chain = _program_and_chain(self.store, db, str(agreement_id), str(path))
        return _Claim(str(agreement_id), int(seq), int(group), str(reference), str(path), text,
                      _json(variables), _json(expected), int(attempts) + 1, chain)  # fmt: skip

    def _deliver(self, claim: _Claim) -> Outcome:
        if claim.program_text is None:
            return self._quarantine(claim, "PW562", f"no verified ledger program `{claim.program_path}`", None)
        try:
            expected = normalize_expected(claim.expected)
            variables = _variables(claim.variables)
        except Mismatch as exc:
            return self._quarantine(claim, "PW562", str(exc), None)
        try:
            self._agrees_with_commit(claim, expected, variables)
        except Mismatch as exc:
            return self._quarantine(claim, "PW564", str(exc), None)
        try:
            returned: object = self.ledger.apply(claim.reference, claim.program_text, variables)
        except LedgerError as exc:
            if exc.code in TRANSIENT:
                return self._back_off(claim, exc.code, exc.message)
            return self._quarantine(claim, "PW561", f"the ledger refused it: [{exc.code}] {exc.message}", None)
        except PactwrightError as exc:
            return self._back_off(claim, exc.code, exc.message)
        except Exception as exc:  # noqa: BLE001 - the ledger's driver or transport failed: retry later
            return self._back_off(claim, "PW563", f"{type(exc).__name__}: {str(exc).strip()[:200]}")
        self._crash("after_ledger_apply")
        try:
            delivered = compare(expected, returned, self._compare_hook)
        except Mismatch as exc:
            return self._quarantine(claim, "PW560", str(exc), returned)
        outcome = self._mark(claim, "delivered", delivered, None, None)
        self._crash("after_mark")
        return outcome

    def _agrees_with_commit(self, claim: _Claim, expected: list[dict[str, str]], variables: dict[str, str]) -> None:
        """Before any byte reaches the ledger: the entry must be what was committed.

        The outbox row is only a copy. Its expected postings must equal the
        postings of the event's record in the agreement's evidence chain, and
        its program, run on its variables (every account funded, so only the
        arithmetic speaks), must move exactly those postings; otherwise an
        edited row could move another agreement's money, or book an amount
        the event never had. The chain must verify as `evidence verify`
        verifies it (every record hashing to its row, linked to the one
        before, agreeing with the event log), so a record rewritten with a
        hash to match is not taken as the commit either. Raises `Mismatch`:
        the entry is quarantined unapplied. The chain is the one the claim
        read and checked, in its transaction.
        """
        from pactwright.runtime.numscript import parse_program, run_program

        event_id = f"{claim.agreement_id}/{claim.event_seq}"
        chain = claim.chain
        if chain is not None and not chain.ok:
            first = chain.problems[0]
            raise Mismatch(f"the evidence chain of agreement `{claim.agreement_id}` does not verify "
                           f"([{first.code}] {first.message})")  # fmt: skip
        records = [] if chain is None else chain.records
        committed = next((r.get("postings") for r in records if r.get("kind") == "event"
                          and r.get("event_id") == event_id), None)  # fmt: skip
        if not isinstance(committed, list):
            raise Mismatch(f"no evidence record of event `{event_id}` to check the entry against")
        recorded = [
            {k: str(p.get(k)) for k in ("source_address", "destination_address", "amount", "asset")}
            for p in committed
            if isinstance(p, dict)
        ]
        if recorded != expected:
            raise Mismatch(f"the entry's expected postings are not event `{event_id}`'s committed postings")
        try:
            program = parse_program(claim.program_text or "")
            assets = {p["asset"] for p in expected}
            # Every account funded past any amount money can state (MAX_DIGITS), so only the arithmetic speaks.
            funded = {(v, a): 10 ** (MAX_DIGITS + 1) for v in variables.values() for a in assets}
            moved = run_program(program, variables, funded)
        except PactwrightError as exc:
            raise Mismatch(f"the entry's program does not run on its variables: {exc.message}") from None
        ran = [
            {
                "source_address": m.source,
                "destination_address": m.destination,
                "amount": str(m.amount),
                "asset": m.asset,
            }
            for m in moved
        ]
        if ran != expected:
            raise Mismatch("the entry's variables make its program move other postings than the committed ones")

    def _mark(self, claim: _Claim, status: str, side: Any, code: str | None, message: str | None) -> Outcome:
        now = self._now()
        with self.store.transaction(write=True, exclusive=False) as db:
            _lock_agreement(db, claim.agreement_id)
            # After the lock, in one statement: the entry's status and the evidence chain's head.
            current = db.query(_STATUS_AND_HEAD, (*rows.head_params(claim.agreement_id), claim.reference))
            if not current or current[0][0] != "pending":
                return Outcome(claim.reference, "skipped", claim.attempts)  # another worker finished it
            error = None if code is None else f"{code}: {message}"
            body: dict[str, Any] = {"reference": claim.reference, "event_seq": claim.event_seq,
                                    "group": claim.group, "program": claim.program_path, "at": now}  # fmt: skip
            if status == "delivered":
                kind, body = "delivered", {**body, "postings": side}
            else:
                expected = claim.expected if isinstance(claim.expected, list) else None
                kind, body = "quarantined", {**body, "expected": expected, "ledger": side, "code": code,
                                             "reason": message}  # fmt: skip
            head = rows.evidence_head(current[0][1], current[0][2])
            db.execute_all([  # the row and its record: one statement on PostgreSQL
                ("UPDATE outbox SET status = ?, delivered_postings = ?, lease_owner = NULL, lease_until = NULL, "
                 "last_error = ?, updated_at = ? WHERE reference = ?",
                 (status, None if side is None else rows.dumps(side), error, now, claim.reference)),
                rows.evidence_insert(claim.agreement_id, kind, body, head)[1],
            ])  # fmt: skip
        return Outcome(claim.reference, status, claim.attempts, code, message)

    def _quarantine(self, claim: _Claim, code: str, message: str, returned: object) -> Outcome:
        return self._mark(claim, "quarantined", ledger_side(returned), code, message)

    def _back_off(self, claim: _Claim, code: str, message: str) -> Outcome:
        now = self._now()
        delay = min(MAX_BACKOFF, 2 ** min(claim.attempts, 16))
        with self.store.transaction(write=True, exclusive=False) as db:
            db.execute(
                "UPDATE outbox SET lease_owner = NULL, lease_until = ?, last_error = ?, updated_at = ? "
                "WHERE reference = ? AND status = 'pending' AND lease_owner = ?",
                (now + delay, f"{code}: {message}"[:500], now, claim.reference, self.owner),
            )
        return Outcome(claim.reference, "retry", claim.attempts, code, message)

    # -- the test-only crash hook ---------------------------------------------------

    def _crash(self, point: str) -> None:
        if self._crash_at == point:
            os.kill(os.getpid(), signal.SIGKILL)

    def _compare_hook(self, index: int) -> None:
        if index == 0:
            self._crash("during_compare")


def _json(value: object) -> Any:
    try:
        return rows.loads(value, "outbox entry")
    except PactwrightError:
        return None


def _variables(value: Any) -> dict[str, str]:
    if not isinstance(value, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
        raise Mismatch("the variables stored at commit are malformed")
    return dict(value)


def _program_and_chain(store: Store, db: Backend, agreement_id: str, path: str) -> tuple[str | None, ChainCheck | None]:
    """The ledger program's text from the agreement's own bundle, every stored byte re-verified, and the
    agreement's evidence chain, checked (`check_chain`).

    The text is None when the bundle no longer verifies or has no such
    program: the entry is then quarantined, never delivered with bytes
    nobody activated. The chain is None when the agreement cannot be read.
    """
    try:
        agreement = rows.read(db, agreement_id, lock=False)
    except PactwrightError:
        return None, None
    chain = check_chain(db, agreement)
    try:
        data = rows.load_bundle(store, db, agreement, (path,)).stored.files.get(path)
    except PactwrightError:
        return None, chain
    if data is None or not path.startswith("ledger/"):
        return None, chain
    try:
        return data.decode("utf-8"), chain
    except UnicodeDecodeError:
        return None, chain


def _lock_agreement(db: Backend, agreement_id: str) -> None:
    """The evidence chain is appended under the agreement's row lock (SQLite: BEGIN IMMEDIATE already is)."""
    if db.name == "postgresql":
        db.query("SELECT id FROM agreements WHERE id = ? FOR UPDATE", (agreement_id,))
