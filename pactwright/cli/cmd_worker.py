"""`pactwright worker --store URL [--ledger URL] [--drain] [--clock-file PATH]`: deliver the outbox.

Delivers committed posting groups to the ledger at least once, by their
stable reference, in commit order per agreement (runtime/worker.py). Runs
until SIGTERM or SIGINT, finishing the entry in hand first; `--drain`
delivers what is due and exits. Exit 1 when this run quarantined an entry.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
from types import FrameType

from pactwright.cli._runtime_args import add_clock, add_store, clock


def register(parser: argparse.ArgumentParser) -> None:
    add_store(parser)
    parser.add_argument("--ledger", metavar="URL", help="the ledger database (default: the store's sibling)")
    parser.add_argument("--drain", action="store_true", help="deliver what is due, then exit")
    parser.add_argument("--lease-seconds", type=int, default=60, metavar="N", help="how long a claim lasts")
    parser.add_argument("--poll", type=float, default=1.0, metavar="SECONDS", help="idle wait between polls")
    add_clock(parser)
    parser.add_argument("--format", choices=("text", "json"), default="text")


def run(args: argparse.Namespace) -> int:
    from pactwright.runtime.ledger_db import open_ledger
    from pactwright.runtime.store import open_store
    from pactwright.runtime.worker import Worker

    stopping: list[int] = []

    def stop(signum: int, frame: FrameType | None) -> None:
        stopping.append(signum)

    with open_store(args.store, migrate_schema=False) as store, open_ledger(args.ledger, args.store) as ledger:
        worker = Worker(store, ledger, clock(args), lease_seconds=args.lease_seconds)
        if args.drain:
            outcomes = worker.drain()
        else:
            previous = {s: signal.signal(s, stop) for s in (signal.SIGTERM, signal.SIGINT)}
            try:
                outcomes = worker.run(lambda: bool(stopping), idle_seconds=max(0.05, args.poll))
            finally:
                for number, handler in previous.items():
                    signal.signal(number, handler)
    counts = {s: sum(1 for o in outcomes if o.status == s) for s in ("delivered", "quarantined", "retry", "skipped")}
    if args.format == "json":
        doc = {"counts": counts, "outcomes": [o.to_json() for o in outcomes]}
        sys.stdout.write(json.dumps(doc, indent=2, sort_keys=True) + "\n")
    else:
        for o in outcomes:
            detail = f"  [{o.code}] {o.message}" if o.code else ""
            sys.stdout.write(f"{o.status:<11} {o.reference}  attempt {o.attempts}{detail}\n")
        sys.stdout.write(", ".join(f"{n} {s}" for s, n in counts.items()) + "\n")
    return 1 if counts["quarantined"] else 0
