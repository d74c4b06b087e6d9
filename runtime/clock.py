"""Trusted commit time for the command path: integer seconds since the Unix epoch (UTC).

A command's `now` (what guards compare with, what `stamp` records, the
events' commit time) always comes from the clock the runtime is given,
never from the caller. `SystemClock` reads the host; `TestClock` is moved by
tests and the demo; `FileClock` reads a file holding epoch seconds, for the
CLI's test-and-demo-only `--clock-file PATH`.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from pactwright.errors import UsageError
from pactwright.runtime._clock import Clock, FixedClock, SystemClock

__all__ = ["Clock", "FileClock", "FixedClock", "SystemClock", "TestClock", "epoch_seconds"]

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MAX_SECONDS = 253402300799  # 9999-12-31T23:59:59Z


def utc_text(seconds: int) -> str:
    """The instant as `YYYY-MM-DDTHH:MM:SSZ`; one past year 9999 (an approval parked at the last second a
    clock may give expires after it) as its epoch seconds, never an error in the middle of a report."""
    try:
        return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    except (OverflowError, ValueError, OSError):
        return f"{seconds} s after the epoch"


def epoch_seconds(clock: Clock) -> int:
    """The clock's instant as whole seconds since the epoch (sub-second parts dropped)."""
    instant = clock.now()
    if instant.tzinfo is None:
        raise ValueError("a clock must return a timezone-aware instant")
    # Aware instants subtract in UTC whatever their zones; a timedelta's seconds and microseconds are
    # never negative, so days and seconds alone are the floor of the exact difference.
    elapsed = instant - _EPOCH
    return elapsed.days * 86400 + elapsed.seconds


class TestClock:
    """A clock tests move by hand (`advance`, `set`), so deadlines pass without sleeping."""

    __test__ = False  # not a pytest test class

    def __init__(self, seconds: int) -> None:
        self.seconds = seconds

    def now(self) -> datetime:
        return _EPOCH + timedelta(seconds=self.seconds)

    def advance(self, seconds: int) -> None:
        self.seconds += seconds

    def set(self, seconds: int) -> None:
        self.seconds = seconds


class FileClock:
    """Reads the epoch seconds in a file at every `now()` (test and demo use only)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)

    def now(self) -> datetime:
        try:
            text = self.path.read_text(encoding="utf-8").strip()
        except (OSError, UnicodeDecodeError) as exc:
            raise UsageError(f"cannot read the clock file `{self.path}`: {exc}", code="PW520") from None
        if not (text.isascii() and text.isdigit()) or len(text) > 12 or int(text) > _MAX_SECONDS:
            raise UsageError(
                f"the clock file `{self.path}` must hold whole seconds since the Unix epoch",
                code="PW520",
                found=text[:40],
                expected="e.g. `1780315200`",
            )
        return _EPOCH + timedelta(seconds=int(text))
