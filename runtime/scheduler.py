"""The scheduler: fire a pact's deadline transitions through the ordinary command path, as its clock.

A deadline transition is one whose roles include the pact's `clock` role.
When its guard holds at the trusted time, the scheduler submits it with
`pactwright.runtime.commands.submit` exactly as any actor would: same
checks, same transaction, same refusals. It holds no lock of its own and
writes nothing itself, so two schedulers (or a scheduler racing a buyer)
are serialized by the agreement row lock and the expected version, and
can never settle an agreement twice.

The idempotency key is deterministic per (agreement, transition, deadline,
firing): `sched/TRANSITION/DEADLINE`, where DEADLINE is the epoch second
the guard waits for (the value of `X` in a top-level conjunct `now >= X` or
`now > X`, e.g. `delivered_at + refund_window`, read from the committed
stamps), and `sched/TRANSITION/DEADLINE/N` for the Nth firing (N >= 2) of a
transition that can fire again at the same deadline (a reminder looping on
its state). Two schedulers that see the same agreement therefore send the
same key, and the second one is answered with the first one's result. A
clock transition whose guard does not compare `now` with a bound is keyed
by the version it was found enabled at (`sched/TRANSITION/v7`).

Each scan tries every enabled deadline transition of an agreement, in
transitions.json order, until one commits: a deadline parked for an
approval or refused for good (an abandoned dependency, a spent budget)
never starves another one that is enabled.

Refusals are ordinary outcomes here, counted by code: another command won
(PW509 stale version, PW510 already final, PW511 state moved on), the guard
became false (PW512), an approval is still missing (PW513). Anything else
(PW514 funds, PW517, PW524, PW526, a PW518 unreadable record, a store
error) is a failure: reported with its agreement and message, never retried
silently within a scan.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pactwright.errors import PactwrightError
from pactwright.runtime import _agreement as rows
from pactwright.runtime._agreement import Agreement, Bundle, bundle_of, clock_roles
from pactwright.runtime._command_effects import Tally, read_by_guard, tally
from pactwright.runtime._evaluate import View, evaluate
from pactwright.runtime.clock import Clock, SystemClock, epoch_seconds
from pactwright.runtime.commands import SCHEDULER_KEYS, submit
from pactwright.runtime.store import Store
from pactwright.runtime.store._backend import Backend
from pactwright.runtime.store._migrations import RUNTIME_TABLES

__all__ = ["Due", "ScanResult", "deadline_of", "fire", "plan", "plan_all", "run", "scan"]

# Refusals that mean "someone else acted first" or "not yet": counted, not failures.
NORMAL_REFUSALS = frozenset({"PW509", "PW510", "PW511", "PW512", "PW513", "PW530"})
# Of those, the ones that say the agreement changed since it was read: nothing else is tried on that read.
_SUPERSEDED = frozenset({"PW509", "PW510", "PW511"})
# A bound `now` is compared with, read from a top-level conjunct: `now >= X`, `now > X`, `X <= now`, `X < now`.
_LOWER_BOUND = {(">=", 0), (">", 0), ("<=", 1), ("<", 1)}


@dataclass(frozen=True)
class Due:
    """One deadline transition the scheduler found enabled, and exactly what it will submit."""

    agreement_id: str
    transition: str
    role: str
    party: str
    key: str
    expect_version: int
    deadline: int | None

    def to_json(self) -> dict[str, Any]:
        return {
            "agreement": self.agreement_id,
            "transition": self.transition,
            "actor": f"{self.role}:{self.party}",
            "key": self.key,
            "expect_version": self.expect_version,
            "deadline": self.deadline,
        }


@dataclass
class ScanResult:
    """What one scan did: committed event ids, replays, refusals by code, failures."""

    at: int
    scanned: int = 0
    due: list[Due] = field(default_factory=list)
    committed: list[str] = field(default_factory=list)
    replayed: int = 0
    refused: dict[str, int] = field(default_factory=dict)
    failures: list[dict[str, str]] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "at": self.at,
            "scanned": self.scanned,
            "due": [d.to_json() for d in self.due],
            "committed": list(self.committed),
            "replayed": self.replayed,
            "refused": dict(sorted(self.refused.items())),
            "failures": list(self.failures),
        }


def _conjuncts(expr: Mapping[str, Any]) -> Iterable[Mapping[str, Any]]:
    if expr["op"] == "and":
        for arg in expr["args"]:
            yield from _conjuncts(arg)
    else:
        yield expr


def deadline_of(guard: Mapping[str, Any] | None, view: View) -> int | None:
    """The epoch second a guard waits for: the latest bound of a top-level `now >= X` (or `>`), if any.

    Only top-level conjuncts count: a bound under `or` or `not` is not a
    deadline the guard must pass. A bound that is undefined (an unset
    stamp) is ignored; the guard is then false anyway.
    """
    if guard is None:
        return None
    bounds: list[int] = []
    for part in _conjuncts(guard):
        args = part.get("args", [])
        if len(args) != 2:
            continue
        for op, side in _LOWER_BOUND:
            if part["op"] == op and args[side]["op"] == "now":
                value = evaluate(args[1 - side], view)
                if isinstance(value, int) and not isinstance(value, bool):
                    bounds.append(value)
    return max(bounds) if bounds else None


def plan(bundle: Bundle, agreement: Agreement, now: int, seen: Tally | None = None) -> Due | None:
    """The first deadline transition (in transitions.json order) enabled for `agreement` at `now`, if any."""
    due = plan_all(bundle, agreement, now, seen)
    return due[0] if due else None


def plan_all(bundle: Bundle, agreement: Agreement, now: int, seen: Tally | None = None) -> list[Due]:
    """Every deadline transition enabled for `agreement` at `now`, in transitions.json order.

    `seen` is the agreement's effect calls (`_command_effects.tally`), for a
    guard that reads `applied(E)` or `total(E)`: evaluated as the command
    path will evaluate it. The scan tries them in this order until one
    commits, so a deadline the runtime refuses for good (an abandoned
    dependency, a budget spent) or one parked for an approval never keeps
    another enabled deadline from firing: the verifier's liveness check
    assumes each enabled clock transition is eventually taken.
    """
    if bundle.state(agreement.state)["final"]:
        return []
    clocks = clock_roles(bundle)
    seen = seen or Tally()
    view = agreement.view(bundle, now, seen.applied, seen.totals, seen.outcomes)
    out = []
    for spec in bundle.doc["transitions"]:
        role = next((r for r in spec["roles"] if r in clocks), None)
        if role is None or agreement.state not in spec["from"] or role not in agreement.parties:
            continue
        guard = spec.get("guard")
        if guard is not None and not evaluate(guard, view):
            continue
        deadline = deadline_of(guard, view)
        cell = str(deadline) if deadline is not None else f"v{agreement.version}"
        # The Nth firing of one transition at one deadline (a reminder that loops) is a new intent.
        ordinal = agreement.fired.get(str(spec["id"]), 0) + 1
        suffix = f"/{ordinal}" if deadline is not None and ordinal > 1 else ""
        out.append(
            Due(
                agreement_id=agreement.id,
                transition=str(spec["id"]),
                role=role,
                party=agreement.parties[role],
                key=f"{SCHEDULER_KEYS}{spec['id']}/{cell}{suffix}",
                expect_version=agreement.version,
                deadline=deadline,
            )
        )
    return out


def _waiting_states(bundle: Bundle) -> list[str]:
    """Non-final states some deadline transition leaves from: the only states worth reading."""
    clocks = clock_roles(bundle)
    final = {str(s["name"]) for s in bundle.doc["states"] if s["final"]}
    out = {
        str(state)
        for spec in bundle.doc["transitions"]
        if any(r in clocks for r in spec["roles"])
        for state in spec["from"]
        if state not in final
    }
    return sorted(out)


def _candidates(store: Store, db: Backend, only: list[str] | None) -> list[tuple[Bundle, Agreement]]:
    out: list[tuple[Bundle, Agreement]] = []
    for (activation_id,) in db.query("SELECT DISTINCT activation_id FROM agreements ORDER BY activation_id"):
        bundle = bundle_of(store.load_activation_in(db, int(activation_id)))
        states = _waiting_states(bundle)
        if not states:
            continue
        marks = ", ".join("?" * len(states))
        found = db.query(
            f"SELECT id FROM agreements WHERE activation_id = ? AND state IN ({marks}) ORDER BY id",  # noqa: S608
            (int(activation_id), *states),
        )
        for (agreement_id,) in found:
            if only is None or str(agreement_id) in only:
                out.append((bundle, rows.read(db, str(agreement_id), lock=False)))
    out.sort(key=lambda pair: pair[1].id)
    return out


def fire(store: Store, due: Due, clock: Clock) -> str:
    """Submit one due transition as the clock role: `committed`, `replayed`, or the refusal's code.

    Raises only for a failure outside NORMAL_REFUSALS, so a caller can tell
    "another command won" from "something is wrong".
    """
    try:
        result = submit(
            store,
            due.agreement_id,
            due.transition,
            due.role,
            due.party,
            due.key,
            expect_version=due.expect_version,
            clock=clock,
        )
    except PactwrightError as exc:
        if exc.code in NORMAL_REFUSALS:
            return exc.code
        raise
    if result.status == "waiting_for_approval":
        return "PW513"  # parked until its approver decides: counted as an approval still missing
    return "replayed" if result.replayed else "committed"


def scan(store: Store, clock: Clock | None = None, agreements: list[str] | None = None) -> ScanResult:
    """Find every enabled deadline transition and submit it once; `agreements` narrows the scan."""
    clock = clock or SystemClock()
    now = epoch_seconds(clock)
    result = ScanResult(at=now)
    if store.schema_version() < RUNTIME_TABLES:
        return result  # a store made before agreements existed holds none
    with store.transaction(write=False) as db:
        candidates = _candidates(store, db, agreements)
    result.scanned = len(candidates)
    for bundle, agreement in candidates:
        seen = None
        if any(read_by_guard(spec) for spec in bundle.doc["transitions"]):
            with store.transaction(write=False) as db:
                seen = tally(db, agreement.id)
        for due in plan_all(bundle, agreement, now, seen):
            result.due.append(due)
            try:
                outcome = fire(store, due, clock)
            except PactwrightError as exc:
                result.failures.append({"agreement": due.agreement_id, "transition": due.transition,
                                        "code": exc.code, "message": exc.message})  # fmt: skip
                continue  # refused for this reason: the next enabled deadline may still fire
            if outcome == "committed":
                result.committed.append(f"{due.agreement_id}/{due.expect_version + 1}")
                break  # the agreement moved on: what else is due is planned from its new state next scan
            if outcome == "replayed":
                result.replayed += 1
                break  # another scheduler fired it: this read of the agreement is out of date
            result.refused[outcome] = result.refused.get(outcome, 0) + 1
            if outcome in _SUPERSEDED:
                break  # another command won: the agreement is no longer as read
    return result


def run(
    store: Store,
    clock: Clock | None = None,
    interval: float = 5.0,
    stop: threading.Event | None = None,
    report: Callable[[ScanResult], None] | None = None,
) -> int:
    """Scan every `interval` seconds until `stop` is set; returns the number of scans.

    `stop` is checked between scans and interrupts the wait, so a SIGTERM
    handler that sets it ends the loop after the command in flight commits
    or rolls back, never in the middle of one.
    """
    stop = stop or threading.Event()
    scans = 0
    while not stop.is_set():
        try:
            outcome = scan(store, clock)
        except PactwrightError as exc:  # the store went away for a moment: say so, try again next time
            outcome = ScanResult(at=0, failures=[{"agreement": "", "transition": "", "code": exc.code,
                                                  "message": exc.message}])  # fmt: skip
        scans += 1
        if report is not None:
            report(outcome)
        stop.wait(interval)
    return scans
