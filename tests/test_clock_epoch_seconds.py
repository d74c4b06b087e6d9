"""`epoch_seconds` is the floor of the exact seconds since the epoch, for an aware instant in any zone.

The command path reads it once per command, so it is computed from the
timedelta's days and seconds rather than through a UTC conversion and a
timedelta division; this checks the two agree on generated instants and
offsets, across the whole range a clock may give (before 1970 included,
where flooring and truncating differ).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pactwright.runtime.clock import epoch_seconds

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


class _AsGiven:
    """A clock that returns its instant as given, in its own zone (FixedClock converts to UTC)."""

    def __init__(self, instant: datetime) -> None:
        self.instant = instant

    def now(self) -> datetime:
        return self.instant


@settings(max_examples=500, deadline=None)
@given(
    st.datetimes(min_value=datetime(1, 1, 2), max_value=datetime(9999, 12, 30), timezones=st.just(UTC)),
    st.integers(min_value=-1439, max_value=1439),
)
def test_epoch_seconds_floors_the_exact_difference_in_any_zone(instant: datetime, minutes: int) -> None:
    shown = instant.astimezone(timezone(timedelta(minutes=minutes)))
    assert shown.utcoffset() == timedelta(minutes=minutes)
    assert epoch_seconds(_AsGiven(shown)) == (instant - _EPOCH) // timedelta(seconds=1)


def test_epoch_seconds_floors_before_the_epoch_and_drops_sub_seconds() -> None:
    assert epoch_seconds(_AsGiven(_EPOCH - timedelta(microseconds=1))) == -1
    assert epoch_seconds(_AsGiven(_EPOCH + timedelta(seconds=1, microseconds=999_999))) == 1


def test_epoch_seconds_refuses_a_naive_instant() -> None:
    with pytest.raises(ValueError, match="timezone-aware"):
        epoch_seconds(_AsGiven(datetime(2026, 6, 1)))
