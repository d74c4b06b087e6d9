"""The threads that call the runtime: each owns one store connection and one ledger connection.

A `Store` and a `DurableLedger` hold one database connection each, which
must not be shared between threads (SQLite refuses it outright). So the
service runs every runtime call on one of a fixed number of threads, each
opening its own store and ledger on first use and closing them when the
service stops; the event loop only parses, authenticates nothing itself and
awaits the answer. The thread count bounds the store connections the
service holds (on PostgreSQL, `size` connections to the store and at most
`size` to the ledger).

The store is opened without creating anything (a mistyped SQLite path is
PW700, never a new empty store) and migrated forward only when it already
holds agreements, as the CLI's writing commands do. A connection that
failed (PW700, PW709, a ledger PW550/PW552) is closed and reopened on the
thread's next call, so a restarted database heals without restarting the
service.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import queue
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from pactwright.errors import PactwrightError

if TYPE_CHECKING:
    from pactwright.runtime.clock import Clock
    from pactwright.runtime.ledger_db import DurableLedger
    from pactwright.runtime.store import Store

__all__ = ["Pool", "Resources", "open_current"]

T = TypeVar("T")
_RESET_CODES = frozenset({"PW550", "PW552", "PW700", "PW709"})
log = logging.getLogger("pactwright.service")


def open_current(url: str) -> Store:
    """The store at `url`, never created; migrated forward only when it already holds agreements."""
    from pactwright.runtime.store import open_store
    from pactwright.runtime.store._migrations import LATEST, RUNTIME_TABLES

    store = open_store(url, migrate_schema=False)
    try:
        if RUNTIME_TABLES <= store.schema_version() < LATEST:
            store.migrate()
    except BaseException:
        store.close()
        raise
    return store


class Resources:
    """One thread's store and ledger, opened on first use."""

    def __init__(self, store_url: str, ledger_url: str | None, clock: Clock) -> None:
        self.store_url = store_url
        self.ledger_url = ledger_url
        self.clock = clock
        self._store: Store | None = None
        self._ledger: DurableLedger | None = None

    @property
    def store(self) -> Store:
        if self._store is None:
            self._store = open_current(self.store_url)
        return self._store

    @property
    def ledger(self) -> DurableLedger:
        if self._ledger is None:
            from pactwright.runtime.ledger_db import open_ledger

            self._ledger = open_ledger(self.ledger_url, self.store_url)
        return self._ledger

    def close(self) -> None:
        for opened in (self._store, self._ledger):
            if opened is not None:
                try:
                    opened.close()
                except Exception:  # a dead connection may fail to close; it is dropped either way
                    log.debug("closing a connection failed", exc_info=True)
        self._store = self._ledger = None


_Job = tuple[Callable[[Resources], Any], "concurrent.futures.Future[Any]"]


class Pool:
    """`size` threads running runtime calls, each with its own `Resources`."""

    def __init__(self, store_url: str, ledger_url: str | None, clock: Clock, size: int = 8) -> None:
        self._args = (store_url, ledger_url, clock)
        self._size = size
        self._jobs: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self._threads: list[threading.Thread] = []
        self._lock = threading.Lock()

    def start(self) -> None:
        with self._lock:
            if self._threads:
                return
            for n in range(self._size):
                thread = threading.Thread(target=self._serve, name=f"pactwright-runtime-{n}", daemon=True)
                thread.start()
                self._threads.append(thread)

    def stop(self) -> None:
        with self._lock:
            threads, self._threads = self._threads, []
        for _ in threads:
            self._jobs.put(None)
        for thread in threads:
            thread.join(timeout=30)

    async def run(self, job: Callable[[Resources], T]) -> T:
        """Run `job(resources)` on a runtime thread and await its result (or its exception)."""
        self.start()
        future: concurrent.futures.Future[T] = concurrent.futures.Future()
        self._jobs.put((job, future))
        return await asyncio.wrap_future(future)

    def _serve(self) -> None:
        resources = Resources(*self._args)
        try:
            while (item := self._jobs.get()) is not None:
                job, future = item
                if not future.set_running_or_notify_cancel():
                    continue
                try:
                    future.set_result(job(resources))
                except PactwrightError as exc:
                    if exc.code in _RESET_CODES:
                        resources.close()
                    future.set_exception(exc)
                except BaseException as exc:  # noqa: BLE001 - handed to the awaiting request, which logs it
                    resources.close()
                    future.set_exception(exc)
        finally:
            resources.close()
