"""What happened, read back from the runtime after the steps: the report's only source.

The provider's writes come from the simulator's own counts, balances from
the ledger database, phases and approvals from the store, invariants from
the policy's own expressions evaluated by the runtime's evaluator on the
final agreement, and the evidence verdict from re-walking the hash chain.
The scenario's expectations are not read here.
"""

from __future__ import annotations

from typing import Any

from pactwright.errors import PactwrightError
from pactwright.gate.context import Context
from pactwright.money import format_money
from pactwright.runtime import show, verify_evidence
from pactwright.runtime.approvals import list_requests
from pactwright.runtime.effect_ops import list_effects

__all__ = ["observe"]


def _provider(ctx: Context) -> dict[str, Any]:
    state = ctx.sim.state()
    by_effect: dict[str, int] = {}
    for record in state["records"]:
        for name in ctx.effects_at.get(str(record["path"]), [f"(undeclared {record['path']})"]):
            by_effect[name] = by_effect.get(name, 0) + 1
    return {"writes": int(state["writes"]), "requests": int(state["requests"]), "lookups": int(state["lookups"]),
            "effect_writes": dict(sorted(by_effect.items()))}  # fmt: skip


def _invariants(ctx: Context) -> dict[str, bool | None]:
    """Each invariant of the agreement's own bundle, evaluated by the runtime on the agreement as committed."""
    from pactwright.runtime.agreements import invariant_values

    return invariant_values(ctx.store, ctx.scenario.agreement_id)


def _agreement(ctx: Context) -> dict[str, Any] | None:
    """The agreement as committed; None if it was never opened; its refusal if the store no longer verifies."""
    try:
        return _committed(ctx)
    except PactwrightError as exc:
        if exc.code == "PW501":  # never opened
            return None
        return {"unreadable": {"code": exc.code, "message": exc.message}}


def _committed(ctx: Context) -> dict[str, Any]:
    view = show(ctx.store, ctx.scenario.agreement_id, ledger=ctx.ledger)
    agreement = view.agreement
    scale = view.scale
    chain = verify_evidence(ctx.store, agreement.id)
    return {
        "state": agreement.state,
        "version": agreement.version,
        "ledger": {name: format_money(int(minor), scale) for name, minor in (view.ledger_balances or {}).items()},
        "invariants": _invariants(ctx),
        "evidence": {
            "verifies": chain.ok,
            "records": chain.count,
            "head": chain.head,
            "problems": [p.to_json() for p in chain.problems],
        },
    }


def _active_version(ctx: Context) -> str | None:
    """The version the store records as active, as recorded (a tampered bundle row must not hide it)."""
    if ctx.pact_id is None:
        return None
    with ctx.store.transaction(write=False) as db:
        found = db.query("SELECT pact_version FROM active WHERE pact_id = ?", (ctx.pact_id,))
    return str(found[0][0]) if found else None


def observe(ctx: Context) -> dict[str, Any]:
    """Everything the gate reports about one scenario run, from the runtime's side only."""
    effects = list_effects(ctx.store, agreement_id=ctx.scenario.agreement_id)
    phases: dict[str, list[str]] = {}
    attempts: dict[str, int] = {}
    for record in effects:
        phases.setdefault(record.effect, []).append(record.phase + (" (quarantined)" if record.quarantined else ""))
        attempts[record.effect] = attempts.get(record.effect, 0) + record.attempts
    active = _active_version(ctx)
    requests = list_requests(ctx.store, agreement_id=ctx.scenario.agreement_id)
    return {
        "provider": _provider(ctx),
        "active_version": active,
        "agreement": _agreement(ctx),
        "effects": phases,
        "effect_attempts": attempts,
        "effect_calls": [r.to_json() for r in effects],
        "approvals": [
            {"id": r.id, "transition": r.transition, "status": r.status, "decided_by": r.decided_by} for r in requests
        ],
        "commands": ctx.commands,
        "refusals": ctx.refusals,
        "race_committed": ctx.race_committed,
    }
