"""Trusted time for activation: an injectable clock.

Signature expiry and the activation record's timestamp both come from a
clock the runtime is given, never from a caller's document, so tests (and
`activate --now`) can fix the instant and production reads UTC from the
host. Times are parsed and written with the kernel's
`pactwright.bundle_signing` (`parse_expires`, `format_time`), the same
functions `sign` uses, as `YYYY-MM-DDTHH:MM:SSZ`: second precision, UTC,
identical in SQLite and PostgreSQL, and comparable as text.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Protocol


class Clock(Protocol):
    """Where the runtime learns the time; `now()` is timezone-aware UTC."""

    def now(self) -> datetime: ...


class SystemClock:
    """The host's UTC time (the default trusted clock)."""

    def now(self) -> datetime:
        return datetime.now(UTC).replace(microsecond=0)


class FixedClock:
    """One instant, for tests, benchmarks and `activate --now`."""

    def __init__(self, instant: datetime) -> None:
        if instant.tzinfo is None:
            raise ValueError("a fixed clock needs a timezone-aware instant")
        self._instant = instant.astimezone(UTC)

    def now(self) -> datetime:
        return self._instant
