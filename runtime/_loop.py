"""The loop every worker runs: step until nothing is due (`drain`), or until told to stop (`run`).

One definition for the outbox worker and the effect worker, so both stop
the same way: never in the middle of a step, checking between steps and
while idle.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Final, TypeVar

from pactwright.errors import UsageError

T = TypeVar("T")
DEFAULT_LEASE: Final = 60
# A lease longer than a year would hold a dead worker's row past any operator's patience.
MAX_LEASE: Final = 366 * 86_400


def check_lease(seconds: int) -> int:
    """The seconds a worker's claim lasts, 1 to `MAX_LEASE` (else UsageError PW001): checked by both
    workers, and by `pactwright worker` before it opens anything."""
    if not 1 <= seconds <= MAX_LEASE:
        raise UsageError(f"a lease lasts 1 to {MAX_LEASE} seconds", field="lease_seconds", found=str(seconds))
    return seconds


def drain(step: Callable[[], T | None], limit: int | None = None) -> list[T]:
    """Call `step` until it returns None (nothing due) or `limit` steps were taken; the results in order."""
    done: list[T] = []
    while limit is None or len(done) < limit:
        taken = step()
        if taken is None:
            break
        done.append(taken)
    return done


def run(step: Callable[[], T | None], should_stop: Callable[[], bool], idle_seconds: float = 1.0) -> list[T]:
    """Call `step` until `should_stop()`, waiting up to `idle_seconds` (in 50 ms slices) when nothing is due."""
    done: list[T] = []
    while not should_stop():
        taken = step()
        if taken is not None:
            done.append(taken)
            continue
        waited = 0.0
        while waited < idle_seconds and not should_stop():
            time.sleep(0.05)
            waited += 0.05
    return done
