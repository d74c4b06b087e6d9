"""`pactwright scheduler --store URL [--once] [--interval S] [--clock-file PATH]`: fire due deadlines.

Each scan submits every enabled deadline transition through the ordinary
command path as the pact's clock role (`pactwright.runtime.scheduler`).
`--once` scans once and exits (1 if a command failed for a reason other
than another command winning); otherwise it scans every `--interval`
seconds and stops cleanly on SIGTERM or Ctrl-C, after the command in flight.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import threading
from typing import TYPE_CHECKING

from pactwright.cli._runtime_args import add_clock, add_store, clock, upgraded

if TYPE_CHECKING:
    from collections.abc import Callable

    from pactwright.runtime.scheduler import ScanResult


# A scheduler that scans less than daily misses deadlines by more than a day; and the wait between scans
# must stay within what the operating system's timers take.
MAX_INTERVAL = 86_400


def register(parser: argparse.ArgumentParser) -> None:
    add_store(parser)
    parser.add_argument("--once", action="store_true", help="scan once and exit")
    parser.add_argument("--interval", type=float, default=5.0, metavar="SECONDS", help="seconds between scans")
    add_clock(parser)
    parser.add_argument("--format", choices=("text", "json"), default="text", help="json: one object per scan")


def _printer(fmt: str, quiet_when_idle: bool) -> Callable[[ScanResult], None]:
    def report(result: ScanResult) -> None:
        if fmt == "json":
            sys.stdout.write(json.dumps(result.to_json(), sort_keys=True) + "\n")
            sys.stdout.flush()
            return
        if quiet_when_idle and not result.due and not result.failures:
            return
        refused = ", ".join(f"{code} {n}" for code, n in sorted(result.refused.items())) or "none"
        lines = [
            f"scan at {result.at}: {result.scanned} waiting, {len(result.due)} due, {len(result.committed)} "
            f"committed, {result.replayed} already committed, refused: {refused}, failed {len(result.failures)}"
        ]
        lines += [f"  committed {event_id}" for event_id in result.committed]
        lines += [
            f"  failed {f['agreement']} {f['transition']}: error[{f['code']}]: {f['message']}" for f in result.failures
        ]
        sys.stdout.write("\n".join(lines) + "\n")
        sys.stdout.flush()

    return report


def run(args: argparse.Namespace) -> int:
    from pactwright.errors import UsageError
    from pactwright.runtime import scheduler
    from pactwright.runtime.store import open_store

    if not 0 < args.interval <= MAX_INTERVAL:  # also refuses nan and inf
        raise UsageError(f"`--interval` must be a positive number of seconds, at most {MAX_INTERVAL:,} (a day)",
                         field="interval", found=str(args.interval))  # fmt: skip
    now = clock(args)
    with upgraded(open_store(args.store, migrate_schema=False)) as store:
        if args.once:
            result = scheduler.scan(store, now)
            _printer(args.format, quiet_when_idle=False)(result)
            return 1 if result.failures else 0
        stop = threading.Event()
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda *_: stop.set())
        scheduler.run(store, now, args.interval, stop, _printer(args.format, quiet_when_idle=True))
    return 0
