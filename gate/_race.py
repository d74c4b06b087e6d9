"""One side of a `race` step: a separate OS process that meets the others at a barrier, then submits.

Started with multiprocessing's `spawn`, so it shares nothing with the gate's
process but the store's URL: the race is decided by the store's row lock,
exactly as between two hosts.
"""

from __future__ import annotations

from multiprocessing.queues import Queue
from multiprocessing.synchronize import Barrier
from typing import Any


def side(url: str, agreement_id: str, command: dict[str, Any], now: int, barrier: Barrier,
         results: Queue[tuple[int, str, str]], index: int) -> None:  # fmt: skip
    """Submit `command` once everyone is at the barrier; report (index, "committed" | "refused", event or code)."""
    from pactwright.errors import PactwrightError
    from pactwright.runtime import TestClock, submit
    from pactwright.runtime.store import open_store

    role, party = str(command["as"]).split(":", 1)
    with open_store(url, migrate_schema=False) as store:
        barrier.wait(timeout=60)
        try:
            result = submit(store, agreement_id, command["transition"], role, party, command["key"],
                            expect_version=command.get("expect_version"), params=command.get("params"),
                            clock=TestClock(now))  # fmt: skip
            results.put((index, result.status, result.event_id))
        except PactwrightError as exc:
            results.put((index, "refused", exc.code))
