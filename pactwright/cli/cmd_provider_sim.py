"""`pactwright provider-sim [--port N] [--host H] [--ignore-keys] [--slow-seconds S]`: run the provider simulator.

A payment provider on loopback that speaks the effect wire protocol, with
fault injection and write counts (runtime/provider_sim.py, docs/effects.md).
Prints its URL, serves until SIGTERM or SIGINT (or `--exit-after`), exits 0.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from types import FrameType

from pactwright.errors import UsageError


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not 0 <= value <= 86_400:
        raise argparse.ArgumentTypeError(f"seconds must be between 0 and 86400, not {text!r}")
    return value


def register(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--port", type=int, default=0, metavar="N", help="port to listen on (default 0: any free one)")
    parser.add_argument("--host", default="127.0.0.1", metavar="HOST", help="address to bind (default 127.0.0.1)")
    parser.add_argument("--ignore-keys", action="store_true", help="start as a provider that ignores idempotency keys")
    parser.add_argument("--slow-seconds", type=_seconds, default=3.0, metavar="S",
                        help="how long the `slow` fault waits before answering (default 3)")  # fmt: skip
    parser.add_argument("--exit-after", type=_seconds, default=None, metavar="S",
                        help="stop by itself after S seconds (for scripts)")  # fmt: skip


def run(args: argparse.Namespace) -> int:
    from pactwright.runtime.provider_sim import start_simulator

    if not 0 <= args.port <= 65535:
        raise UsageError(f"port must be between 0 and 65535, not `{args.port}`")
    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        simulator = start_simulator(args.port, host=args.host, ignore_keys=args.ignore_keys,
                                    slow_seconds=args.slow_seconds)  # fmt: skip
        try:
            sys.stdout.write(f"provider simulator listening on {simulator.url}\n")
            sys.stdout.flush()
            waited = 0.0
            while not stop.wait(0.1):
                waited += 0.1
                if args.exit_after is not None and waited >= args.exit_after:
                    break
        finally:
            writes = simulator.state()["writes"]
            simulator.close()
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)
    sys.stdout.write(f"provider simulator stopped after {writes} writes\n")
    return 0
