"""One side of the terminal race: a long-lived process that meets the other at a barrier before each race.

argv: store URL, barrier directory, side (`buyer` or `scheduler`), clock seconds, agreement ids...
Prints one line per race: `AGREEMENT ok` or `AGREEMENT PWnnn`.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from pactwright.errors import PactwrightError
from pactwright.runtime import TestClock, submit
from pactwright.runtime.store import open_store


def main() -> None:
    url, barrier, side, seconds, *agreements = sys.argv[1:]
    other = "scheduler" if side == "buyer" else "buyer"
    clock = TestClock(int(seconds))
    with open_store(url, migrate_schema=False) as store:
        for agreement in agreements:
            (Path(barrier) / f"{agreement}.{side}").touch()
            while not (Path(barrier) / f"{agreement}.{other}").exists():
                time.sleep(0.001)
            transition, actor = ("release", "alice") if side == "buyer" else ("auto_release", "scheduler")
            try:
                submit(store, agreement, transition, side, actor, f"race-{side}", expect_version=2, clock=clock)
                outcome = "ok"
            except PactwrightError as exc:
                outcome = exc.code
            sys.stdout.write(f"{agreement} {outcome}\n")
            sys.stdout.flush()


if __name__ == "__main__":
    main()
