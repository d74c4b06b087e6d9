"""`pactwright worker --store URL [--ledger URL] [--providers FILE] [--drain]`: deliver the outbox and effects.

Delivers committed posting groups to the ledger at least once, by their
stable reference, in commit order per agreement (runtime/worker.py), and,
with `--providers FILE` (the routes file of docs/effects.md), sends the
committed effect calls to their providers, one persisted step at a time
(runtime/effect_worker.py). Runs until SIGTERM or SIGINT, finishing the
step in hand first; `--drain` does what is due and exits. Exit 1 when this
run quarantined an entry or a call.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import time
from collections.abc import Callable
from types import FrameType
from typing import TYPE_CHECKING

from pactwright.cli._runtime_args import add_clock, add_store, clock, upgraded

if TYPE_CHECKING:
    from pactwright.runtime.effect_worker import EffectStep, EffectWorker
    from pactwright.runtime.worker import Outcome, Worker


def register(parser: argparse.ArgumentParser) -> None:
    add_store(parser)
    parser.add_argument("--ledger", metavar="URL", help="the ledger database (default: the store's sibling)")
    parser.add_argument("--providers", metavar="FILE", help="routes file: also send effect calls to their providers")
    parser.add_argument("--secrets", metavar="FILE", help="credential slots (TOML, owner-only) for --providers")
    parser.add_argument("--drain", action="store_true", help="deliver what is due, then exit")
    parser.add_argument("--lease-seconds", type=int, default=60, metavar="N", help="how long a claim lasts")
    parser.add_argument("--poll", type=float, default=1.0, metavar="SECONDS", help="idle wait between polls")
    add_clock(parser)
    parser.add_argument("--format", choices=("text", "json"), default="text")


def run(args: argparse.Namespace) -> int:
    from contextlib import ExitStack

    from pactwright.runtime._loop import check_lease
    from pactwright.runtime.ledger_db import open_ledger
    from pactwright.runtime.store import open_store
    from pactwright.runtime.worker import Worker

    stopping: list[int] = []

    def stop(signum: int, frame: FrameType | None) -> None:
        stopping.append(signum)

    check_lease(args.lease_seconds)  # refused before anything is opened, let alone made
    with ExitStack() as stack:
        store = stack.enter_context(upgraded(open_store(args.store, migrate_schema=False)))
        store.check_writable()  # a store this process cannot write (PW709) is refused before its ledger is made
        ledger = stack.enter_context(open_ledger(args.ledger, args.store))
        worker = Worker(store, ledger, clock(args), lease_seconds=args.lease_seconds)
        effects = None
        if args.providers:
            from pactwright.runtime.effect_http import Credentials, HttpAdapter, load_providers
            from pactwright.runtime.effect_worker import EffectWorker

            adapter = stack.enter_context(HttpAdapter(load_providers(args.providers), Credentials.load(args.secrets)))
            effects = EffectWorker(store, adapter, clock(args), lease_seconds=args.lease_seconds)
        if args.drain:
            outcomes, steps = _drain(worker, effects)
        else:
            previous = {s: signal.signal(s, stop) for s in (signal.SIGTERM, signal.SIGINT)}
            try:
                outcomes, steps = _loop(worker, effects, lambda: bool(stopping), max(0.05, args.poll))
            finally:
                for number, handler in previous.items():
                    signal.signal(number, handler)
    return _report(args, outcomes, steps)


def _drain(worker: Worker, effects: EffectWorker | None) -> tuple[list[Outcome], list[EffectStep]]:
    """Outbox and effects alternately until neither has anything due (a step can make more due)."""
    outcomes: list[Outcome] = []
    steps: list[EffectStep] = []
    while True:
        done = worker.drain()
        taken = effects.drain() if effects is not None else []
        outcomes.extend(done)
        steps.extend(taken)
        if not done and not taken:
            return outcomes, steps


def _loop(worker: Worker, effects: EffectWorker | None, should_stop: Callable[[], bool],
          idle: float) -> tuple[list[Outcome], list[EffectStep]]:  # fmt: skip
    outcomes: list[Outcome] = []
    steps: list[EffectStep] = []
    while not should_stop():
        done = worker.deliver_one()
        taken = effects.step() if effects is not None and not should_stop() else None
        if done is not None:
            outcomes.append(done)
        if taken is not None:
            steps.append(taken)
        if done is None and taken is None:
            waited = 0.0
            while waited < idle and not should_stop():
                time.sleep(0.05)
                waited += 0.05
    return outcomes, steps


def _report(args: argparse.Namespace, outcomes: list[Outcome], steps: list[EffectStep]) -> int:
    counts = {s: sum(1 for o in outcomes if o.status == s) for s in ("delivered", "quarantined", "retry", "skipped")}
    quarantined = sum(1 for t in steps if t.outcome == "mismatch")
    if args.format == "json":
        doc = {"counts": counts, "outcomes": [o.to_json() for o in outcomes], "effects": [t.to_json() for t in steps]}
        sys.stdout.write(json.dumps(doc, indent=2, sort_keys=True) + "\n")
    else:
        for o in outcomes:
            detail = f"  [{o.code}] {o.message}" if o.code else ""
            sys.stdout.write(f"{o.status:<11} {o.reference}  attempt {o.attempts}{detail}\n")
        for t in steps:
            said = f" ({t.outcome})" if t.outcome else ""
            ref = f"  provider ref {t.provider_ref}" if t.provider_ref else ""
            detail = f"  {t.detail}" if t.detail else ""
            sys.stdout.write(f"{t.action:<11} {t.instance} {t.effect}{said} -> {t.phase}{ref}{detail}\n")
        sys.stdout.write(", ".join(f"{n} {s}" for s, n in counts.items()))
        sys.stdout.write(f"; {len(steps)} effect steps\n" if steps else "\n")
    return 1 if counts["quarantined"] or quarantined else 0
