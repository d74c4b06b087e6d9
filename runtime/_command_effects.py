"""What the command path checks and writes about effects: budgets, parked outcomes, the effect rows.

Budgets are enforced before policy, before anything is written or sent: a
command whose calls would exceed an effect's `max_calls` in the agreement
(PW523), the budget's `max_tool_calls` (PW524) or the budget's `ceiling` on
the money all its calls carry (PW525) is refused. (An effect's own
`ceiling` per call is PW522, in the command path.)

A command that depends on an effect whose outcome nobody knows is refused:
it depends on effect E when its guard reads `applied(E)` or `total(E)`, or
when it calls E itself. While one of E's calls was abandoned as "may have
occurred", such a command fails with EFFECT_ABANDONED_UNCERTAIN (PW526);
while one is parked for reconciliation or quarantined, with
EFFECT_OUTCOME_PARKED (PW527). Other commands of the agreement proceed,
as the verifier's model lets them.

`applied(E)` and `total(E)` read what the runtime knows took effect: calls
acknowledged, recovered by reconciliation, or awaiting or done with their
compensation (they happened), and compensations of another call that ran.

`acknowledged(E)`, `reconciled(E)` and `abandoned(E)` (new in 1.1) read the
latest call made at each `call E` of the policy (a transition and a call
index), as the verifier's call sites do: one holds when such a call stands
`acknowledged`, `reconciled_recovered` or `abandoned_uncertain`
(`pactwright.protocol.OUTCOME_PHASES`). They count as depending on E, except
that a command whose guard reads `abandoned(E)` handles that abandon and is
not refused PW526 for E.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from pactwright.errors import CommandError
from pactwright.money import format_money
from pactwright.protocol import ON_FAILED, OUTCOME_PHASES, PHASE_NAMES, TERMINAL
from pactwright.runtime._agreement import Agreement, Bundle
from pactwright.runtime.effect_payload import PlannedCall
from pactwright.runtime.store._backend import Backend

__all__ = ["HAPPENED", "PARKED", "Tally", "check_budgets", "check_dependencies", "check_in_flight", "read_by_guard",
           "referenced", "settled", "tally", "write_calls"]  # fmt: skip

HAPPENED = frozenset({"acknowledged", "reconciled_recovered", "compensation_required", "compensated"})
PARKED = frozenset({"needs_reconciliation"})
ABANDONED = "EFFECT_ABANDONED_UNCERTAIN"
PARKED_NAME = "EFFECT_OUTCOME_PARKED"
IN_FLIGHT = "EFFECT_IN_FLIGHT"


@dataclass(frozen=True)
class Tally:
    """One agreement's effect calls so far, by effect."""

    calls: Mapping[str, int] = field(default_factory=dict)  # calls made (compensations and cancelled aside)
    carried: int = 0  # money all calls carried (minor units)
    applied: Mapping[str, int] = field(default_factory=dict)
    totals: Mapping[str, int] = field(default_factory=dict)
    abandoned: frozenset[str] = frozenset()
    parked: frozenset[str] = frozenset()
    # Per outcome function (`acknowledged`...): the effects whose latest call at some call site stands in it.
    outcomes: Mapping[str, frozenset[str]] = field(default_factory=dict)
    # The call sites (transition, call index) whose latest call has no outcome yet (`IN_FLIGHT`).
    in_flight: frozenset[tuple[str, int]] = frozenset()


def tally(db: Backend, agreement_id: str) -> Tally:
    calls: dict[str, int] = {}
    applied: dict[str, int] = {}
    totals: dict[str, int] = {}
    carried = 0
    abandoned: set[str] = set()
    parked: set[str] = set()
    for effect, phase, amount, compensates, quarantined in db.query(
        "SELECT effect, phase, amount, compensates, quarantined FROM effects WHERE agreement_id = ?", (agreement_id,)
    ):
        name, value = str(effect), int(amount) if amount is not None else 0
        if compensates is None and phase != "cancelled":
            calls[name] = calls.get(name, 0) + 1
            carried += value
        if phase in HAPPENED:
            applied[name] = applied.get(name, 0) + 1
            totals[name] = totals.get(name, 0) + value
        if phase == "abandoned_uncertain":
            abandoned.add(name)
        if phase in PARKED or int(quarantined):
            parked.add(name)
    outcomes, in_flight = _latest(db, agreement_id)
    return Tally(calls, carried, applied, totals, frozenset(abandoned), frozenset(parked), outcomes, in_flight)


_OUTCOME_OF = {PHASE_NAMES[phase]: op for op, phase in OUTCOME_PHASES.items()}
# Where a call stands settled (pactwright.protocol: a terminal phase, or `failed` under a strategy that
# never repeats it); `cancelled` was never sent. Any other phase (`dispatched`, the runtime's own step
# between claim and send, included) is in flight.
_SETTLED = frozenset({*(PHASE_NAMES[p] for p in TERMINAL), "cancelled"})
_FAILED_FOR_GOOD = frozenset(strategy for strategy, then in ON_FAILED.items() if then is None)


def settled(phase: str, strategy: str) -> bool:
    """Whether a call in `phase` (a runtime phase name) under `strategy` has its outcome, for good."""
    return phase in _SETTLED or (phase == "failed" and strategy in _FAILED_FOR_GOOD)


def _latest(db: Backend, agreement_id: str) -> tuple[dict[str, frozenset[str]], frozenset[tuple[str, int]]]:
    """Per outcome function, the effects for which it holds, and the call sites in flight: the latest
    call at each call site decides both."""
    latest: dict[tuple[str, int], tuple[int, str, str, str]] = {}
    for effect, phase, seq, index, strategy, transition in db.query(
        "SELECT f.effect, f.phase, f.event_seq, f.call_index, f.strategy, e.transition FROM effects f "
        "JOIN events e ON e.agreement_id = f.agreement_id AND e.seq = f.event_seq "
        "WHERE f.agreement_id = ? AND f.compensates IS NULL",
        (agreement_id,),
    ):
        site = (str(transition), int(index))
        if site not in latest or int(seq) > latest[site][0]:
            latest[site] = (int(seq), str(effect), str(phase), str(strategy))
    out: dict[str, set[str]] = {op: set() for op in OUTCOME_PHASES}
    in_flight: set[tuple[str, int]] = set()
    for site, (_, effect, phase, strategy) in latest.items():
        if phase in _OUTCOME_OF:
            out[_OUTCOME_OF[phase]].add(effect)
        if not settled(phase, strategy):
            in_flight.add(site)
    return {op: frozenset(names) for op, names in out.items()}, frozenset(in_flight)


def check_in_flight(transition: Mapping[str, Any], seen: Tally) -> None:
    """Refuse (PW530) a command of a transition whose own call site still has a call with no outcome.

    The runtime keeps one call in flight per call site, as the verifier's
    model does: a second call from the same `call E` while the first one's
    outcome is unknown would leave two outcomes for one site (and two
    payments in flight for one instalment). The command is refused, and
    commits once the worker settles the earlier call.
    """
    for index, call in enumerate(transition.get("effects") or ()):
        if (str(transition["id"]), index) in seen.in_flight:
            raise CommandError(
                f"{IN_FLIGHT}: `{transition['id']}` calls `{call['effect']}`, and the call it made before at that "
                "call site has no outcome yet",
                code="PW530",
                field="effect",
                found=str(call["effect"]),
                hint="retry once the effect worker settles it (`pactwright effects list`)",
            )


_READS = frozenset({"applied", "total", *OUTCOME_PHASES})  # what a guard may read of an effect


def _names(expr: Any, ops: frozenset[str] = _READS) -> Iterator[str]:
    if isinstance(expr, Mapping):
        op = expr.get("op")
        if op in ops and (op != "applied" or expr.get("value") == "effect"):
            yield str(expr["name"])
        for arg in expr.get("args", []):
            yield from _names(arg, ops)


def read_by_guard(transition: Mapping[str, Any]) -> frozenset[str]:
    """The effects the transition's guard reads: `applied(E)`, `total(E)`, an outcome (`acknowledged(E)`...)."""
    return frozenset(_names(transition.get("guard")))


def referenced(transition: Mapping[str, Any]) -> frozenset[str]:
    """The effects a command of `transition` depends on: read by its guard, or called by it."""
    return frozenset({*_names(transition.get("guard")), *(str(c["effect"]) for c in transition.get("effects", []))})


def handles_abandon(transition: Mapping[str, Any]) -> frozenset[str]:
    """The effects whose abandon the transition's guard asks about (`abandoned(E)`): not refused PW526 for them."""
    return frozenset(_names(transition.get("guard"), frozenset({"abandoned"})))


def check_dependencies(transition: Mapping[str, Any], seen: Tally) -> None:
    handled = handles_abandon(transition)
    for name in sorted(referenced(transition)):
        if name in seen.abandoned and name not in handled:
            raise CommandError(
                f"{ABANDONED}: `{transition['id']}` depends on `{name}`, a call of which was abandoned and "
                "may have occurred",
                code="PW526",
                field="effect",
                found=name,
                hint="an operator abandoned it (`pactwright effects list`); nothing that depends on it can run",
            )
        if name in seen.parked:
            raise CommandError(
                f"{PARKED_NAME}: `{transition['id']}` depends on `{name}`, a call of which is parked until an "
                "operator reconciles it",
                code="PW527",
                field="effect",
                found=name,
                hint="resolve it with `pactwright effects reconcile` or `effects abandon`",
            )


def check_budgets(bundle: Bundle, transition: Mapping[str, Any], planned: tuple[PlannedCall, ...],
                  seen: Tally) -> None:  # fmt: skip
    if not planned:
        return
    effects = {str(e["name"]): e for e in bundle.doc.get("effects", [])}
    budget = bundle.doc.get("budget") or {}
    adding: dict[str, int] = {}
    for call in planned:
        adding[call.effect] = adding.get(call.effect, 0) + 1
    for name, count in sorted(adding.items()):
        limit = effects[name].get("max_calls")
        if limit is not None and seen.calls.get(name, 0) + count > int(limit):
            raise CommandError(
                f"`{transition['id']}` would call `{name}` a {seen.calls.get(name, 0) + count}th time in this "
                f"agreement; its max_calls is {limit}",
                code="PW523",
                field="effect",
                expected=f"at most {limit}",
                found=str(seen.calls.get(name, 0) + count),
            )
    made = sum(seen.calls.values()) + len(planned)
    if budget.get("max_tool_calls") is not None and made > int(budget["max_tool_calls"]):
        raise CommandError(
            f"`{transition['id']}` would make this agreement's effect call {made}; the budget's max_tool_calls "
            f"is {budget['max_tool_calls']}",
            code="PW524",
            field="budget",
            expected=f"at most {budget['max_tool_calls']}",
            found=str(made),
        )
    carried = seen.carried + sum(c.amount or 0 for c in planned)
    if budget.get("ceiling") is not None and carried > int(budget["ceiling"]):
        scale = bundle.scale
        raise CommandError(
            f"`{transition['id']}` would bring the money this agreement's calls carry to "
            f"{format_money(carried, scale)}, above the budget's ceiling {format_money(int(budget['ceiling']), scale)}",
            code="PW525",
            field="budget",
            expected=f"at most {format_money(int(budget['ceiling']), scale)}",
            found=format_money(carried, scale),
        )


def instance_id(agreement_id: str, seq: int, index: int) -> str:
    return f"{agreement_id}/{seq}/e{index}"


def write_calls(db: Backend, agreement: Agreement, seq: int, planned: tuple[PlannedCall, ...], now: int) -> None:
    """One `prepared` row per call, in the command's transaction: nothing is sent before this commits."""
    for call in planned:
        db.execute(
            "INSERT INTO effects (id, agreement_id, event_seq, call_index, effect, strategy, phase, method, url, "
            "idempotency_key, payload, payload_digest, amount, attempts, next_at, created_at, updated_at) "
            "VALUES (?, ?, ?, ?, ?, ?, 'prepared', ?, ?, ?, ?, ?, ?, 0, ?, ?, ?)",
            (instance_id(agreement.id, seq, call.index), agreement.id, seq, call.index, call.effect, call.strategy,
             call.method, call.url, call.idempotency_key, call.body.decode("utf-8"), call.payload_digest,
             None if call.amount is None else str(call.amount), now, now, now),
        )  # fmt: skip
