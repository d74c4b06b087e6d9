"""The steps a scenario can take, each through the runtime's own public entry points.

A refusal a step meets (`PactwrightError` from the runtime) is recorded
with its code and the scenario goes on: refusals are observations the
expectations may name. A step that cannot be carried out at all (a grant of
a request that never parked, a crash hook that did not fire) is a
`StepError`, and the scenario fails there.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from pactwright.errors import PactwrightError
from pactwright.gate._race import side
from pactwright.gate.bundles import edited
from pactwright.gate.context import Context, StepError
from pactwright.gate.scenario import Step
from pactwright.runtime import Worker, approvals, open_agreement, submit
from pactwright.runtime.activation import FixedClock, activate_files
from pactwright.runtime.clock import epoch_seconds
from pactwright.runtime.effect_ops import abandon, reconcile
from pactwright.runtime.effect_worker import CRASH_ENV, EffectWorker
from pactwright.signing import sign_statement

__all__ = ["STEPS", "activate_bundle", "drain", "run_step"]

ROUND_SECONDS = 1000  # a drain round moves the clock past any back-off (at most 300 s)
CRASH_LEASE = 5  # the crashing worker's lease; the clock moves past it after the kill


def _actor(text: str) -> tuple[str, str]:
    role, party = text.split(":", 1)
    return role, party


def _record(ctx: Context, step: Step, result: Any) -> None:
    entry = {"step": step.number, "transition": result.transition, "status": result.status,
             "replayed": result.replayed, "event_id": result.event_id, "version": result.version}  # fmt: skip
    if result.approval is not None:
        entry["approval"] = result.approval["id"]
    ctx.commands.append(entry)


def _open(ctx: Context, step: Step) -> None:
    params = dict(ctx.scenario.params) | dict(step.get("params", {}))
    for name in step.get("omit", ()):
        params.pop(name, None)
    open_agreement(ctx.store, str(ctx.pact_id), params, ctx.scenario.parties,
                   agreement_id=step.get("id", ctx.scenario.agreement_id), clock=ctx.clock)  # fmt: skip
    ctx.opened = True


def _submit(ctx: Context, step: Step) -> None:
    role, party = _actor(step.get("as"))
    result = submit(ctx.store, ctx.scenario.agreement_id, step.get("transition"), role, party, step.get("key"),
                    expect_version=step.get("expect_version"), params=step.get("params"),
                    clock=ctx.clock)  # fmt: skip
    _record(ctx, step, result)
    if result.approval is not None:
        ctx.parked[step.get("key")] = dict(result.approval)


def _decide(ctx: Context, step: Step, decision: str) -> None:
    key = step.get("request")
    request = ctx.parked.get(key)
    if request is None:
        raise StepError(f"step {step.number}: no command submitted with key `{key}` is waiting for approval")
    ctx.clock.advance(step.get("advance", 0))
    if step.get("replay"):
        if key not in ctx.proofs:
            raise StepError(f"step {step.number}: no proof was sent for `{key}` yet, so none can be replayed")
        proof = ctx.proofs[key]
    else:
        statement = approvals.decision_statement(request["id"], request["preview_digest"], decision)
        proof = sign_statement(ctx.key(step.get("signer", step.get("by"))), statement)
        ctx.proofs[key] = proof
    if decision == "grant":
        _record(ctx, step, approvals.grant(ctx.store, request["id"], step.get("by"), proof, ctx.clock))
    else:
        approvals.reject(ctx.store, request["id"], step.get("by"), proof, ctx.clock)


def drain(ctx: Context, rounds: int = 12) -> None:
    """Deliver the outbox to the ledger and step the effect worker, round after round, until nothing is due.

    Each round after the first moves the trusted clock by `ROUND_SECONDS`,
    past every back-off, so a scenario never sleeps.
    """
    from pactwright.runtime.effect_http import Credentials, HttpAdapter, load_providers

    with HttpAdapter(load_providers(ctx.providers), Credentials()) as adapter:
        for n in range(rounds):
            if n:
                ctx.clock.advance(ROUND_SECONDS)
            taken = EffectWorker(ctx.store, adapter, ctx.clock).drain()
            delivered = Worker(ctx.store, ctx.ledger, ctx.clock).drain()
            if not taken and not delivered and n:
                break


def _drain(ctx: Context, step: Step) -> None:
    drain(ctx, step.get("rounds", 12))


def _crash(ctx: Context, step: Step) -> None:
    """A real `pactwright worker --drain` process that SIGKILLs itself at the crash point; then past its lease."""
    clock_file = ctx.workdir / "clock"
    clock_file.write_text(f"{epoch_seconds(ctx.clock)}\n", encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k != CRASH_ENV} | {CRASH_ENV: step.get("at")}
    done = subprocess.run(
        [sys.executable, "-m", "pactwright.cli.main", "worker", "--store", ctx.store_url, "--drain", "--providers",
         str(ctx.providers), "--clock-file", str(clock_file), "--lease-seconds", str(CRASH_LEASE)],
        capture_output=True, text=True, env=env, timeout=120, check=False,
    )  # fmt: skip
    if done.returncode != -signal.SIGKILL:
        raise StepError(f"step {step.number}: the worker was not killed at `{step.get('at')}` "
                        f"(exit {done.returncode}): {done.stderr.strip()[-300:]}")  # fmt: skip
    ctx.clock.advance(CRASH_LEASE + 55)


def _race(ctx: Context, step: Step) -> None:
    """Each command in its own spawned process; all meet at a barrier, then submit at the same trusted instant."""
    spawn = multiprocessing.get_context("spawn")
    commands = list(step.get("commands"))
    barrier = spawn.Barrier(len(commands))
    results = spawn.Queue()
    now = epoch_seconds(ctx.clock)
    workers = [spawn.Process(target=side, args=(ctx.store_url, ctx.scenario.agreement_id, dict(c), now, barrier,
                                                results, n)) for n, c in enumerate(commands)]  # fmt: skip
    for worker in workers:
        worker.start()
    outcomes = []
    try:
        outcomes = [results.get(timeout=120) for _ in workers]
    except Exception as exc:  # noqa: BLE001 - an empty queue or a dead child: the step could not run
        raise StepError(f"step {step.number}: a racing process did not report ({type(exc).__name__})") from None
    finally:
        for worker in workers:
            worker.join(timeout=30)
    for index, status, detail in sorted(outcomes):
        command = commands[index]
        if status == "refused":
            ctx.refusals.append({"step": step.number, "what": f"race {command['transition']}", "code": detail,
                                 "message": "refused in a racing process"})  # fmt: skip
            continue
        ctx.commands.append({"step": step.number, "transition": command["transition"], "status": status,
                             "replayed": False, "event_id": detail, "race": True})  # fmt: skip
        ctx.race_committed += status == "committed"


def _reconcile(ctx: Context, step: Step) -> None:
    reconcile(ctx.store, ctx.scenario.agreement_id, step.get("effect"), step.get("resolution"), step.get("by"),
              provider_ref=step.get("provider_ref"), clock=ctx.clock)  # fmt: skip


def _abandon(ctx: Context, step: Step) -> None:
    abandon(ctx.store, ctx.scenario.agreement_id, step.get("effect"), step.get("reason"), step.get("by"),
            clock=ctx.clock)  # fmt: skip


def activate_bundle(ctx: Context, *, version: str | None = None, edit: Any = None, tamper: Any = None,
                    force_reason: str | None = None) -> None:  # fmt: skip
    """Build (or read), sign, optionally tamper with one file AFTER signing, and activate."""
    scenario = ctx.scenario
    if scenario.policy is not None:
        files = ctx.builder.policy(scenario.policy, version=version, edit=edit)
    else:
        if version is not None or edit is not None:
            raise StepError("`version` and `edit` need a `policy`; a bundle directory is activated as it is")
        assert scenario.bundle is not None
        files = ctx.builder.directory(scenario.bundle)
    signed = ctx.builder.sign(files)
    if tamper is not None:
        name = tamper["file"]
        if name not in signed:
            raise StepError(f"the bundle has no file `{name}` to tamper with")
        signed[name] = edited(signed[name], tamper["find"], tamper["replace"], f"the bundle's `{name}`")
    clock = FixedClock(datetime.fromtimestamp(epoch_seconds(ctx.clock), UTC))
    activate_files(ctx.store, signed, ctx.builder.trust(), clock=clock, force_reason=force_reason)
    ctx.learn_bundle(signed)


def _activate(ctx: Context, step: Step) -> None:
    activate_bundle(ctx, version=step.get("version"), edit=step.get("edit"), tamper=step.get("tamper"),
                    force_reason=step.get("force_reason"))  # fmt: skip


def _tamper_store(ctx: Context, step: Step) -> None:
    """Edit one stored file of the active bundle behind the runtime's back (as a compromised database would)."""
    if ctx.pact_id is None or (active := ctx.store.active(ctx.pact_id)) is None:
        raise StepError(f"step {step.number}: nothing is active to tamper with")
    with ctx.store.transaction() as db:
        found = db.query("SELECT content FROM bundle_files WHERE manifest_hash = ? AND path = ?",
                         (active.manifest_hash, step.get("file")))  # fmt: skip
        if not found:
            raise StepError(f"step {step.number}: the active bundle has no stored file `{step.get('file')}`")
        data = edited(bytes(found[0][0]), step.get("find"), step.get("replace"), f"stored `{step.get('file')}`")
        db.execute("UPDATE bundle_files SET content = ? WHERE manifest_hash = ? AND path = ?",
                   (data, active.manifest_hash, step.get("file")))  # fmt: skip


STEPS: dict[str, Callable[[Context, Step], None]] = {
    "open": _open,
    "submit": _submit,
    "grant": lambda ctx, step: _decide(ctx, step, "grant"),
    "reject": lambda ctx, step: _decide(ctx, step, "reject"),
    "advance": lambda ctx, step: ctx.clock.advance(step.get("seconds")),
    "fault": lambda ctx, step: ctx.sim.queue(*step.get("faults")),
    "provider": lambda ctx, step: ctx.sim.set_mode(
        ignore_keys=step.get("ignore_keys"), slow_seconds=step.get("slow_seconds")
    ),
    "drain": _drain,
    "crash": _crash,
    "race": _race,
    "reconcile": _reconcile,
    "abandon": _abandon,
    "activate": _activate,
    "tamper_store": _tamper_store,
}


def run_step(ctx: Context, step: Step) -> None:
    """Run one step; a runtime refusal is recorded (the scenario goes on), a `StepError` propagates."""
    try:
        STEPS[step.kind](ctx, step)
    except StepError:
        raise
    except PactwrightError as exc:
        if exc.code.startswith("PW66"):
            raise
        ctx.refused(step.number, step.kind, exc)
