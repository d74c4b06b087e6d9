"""Limits across agreements (new in 1.1), enforced at commit.

`limit NAME: total(EFFECT) <= MAX per WINDOW [per ROLE]` bounds the money
EFFECT's calls carry (each call's declared amount, fixed at commit, as
`max_calls` and the budget's `ceiling` count it) over every agreement of
the pact, or per party holding ROLE, in one window.

**The window** is a fixed calendar window of trusted time: the command's
commit time `now` (epoch seconds, UTC) falls in window
`floor(now / WINDOW) * WINDOW .. + WINDOW`; `per 1d` is the UTC day. Fixed
windows are exact (one integer row per window, no event history to scan),
serialisable (one row to lock) and agree with what a desk means by "per
day". A sliding window would need every call's time and a scan at each
commit, and its usage would drop call by call; it is not offered.

**Serialisation.** The usage is one `limits` row per (pact, limit, window,
party). The command, in its own transaction, inserts the row if it is
missing (so the first two commands of a window meet on one row) and locks
it (`SELECT ... FOR UPDATE` on PostgreSQL; SQLite's single writer under
`BEGIN IMMEDIATE` already serialises every command), reads the usage,
refuses with PW528 before anything is written when the calls would cross
the limit, and otherwise adds them in the same transaction. A dry run reads
the row without inserting or locking it and writes nothing.

Calls count from their commit, whatever their outcome later: a call that
fails at the provider still used the window's room (the limit is checked
before anything is sent, so it can only count what was committed).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pactwright.errors import CommandError
from pactwright.money import MAX_DIGITS, format_money
from pactwright.runtime.clock import utc_text
from pactwright.runtime.effect_payload import PlannedCall
from pactwright.runtime.store._backend import Backend

__all__ = ["Usage", "check_limits", "record_limits"]


@dataclass(frozen=True)
class Usage:
    """One limit's row this command adds to: its key and the usage after the command."""

    key: tuple[str, str, int, int, str]
    after: int


_SELECT = (
    "SELECT used FROM limits WHERE pact_id = ? AND limit_name = ? AND window_start = ? AND window_seconds = ? "
    "AND party = ?"
)
_LOCKED = _SELECT + " FOR UPDATE"


def _window_text(seconds: int) -> str:
    for unit, size in (("d", 86_400), ("h", 3_600), ("m", 60)):
        if seconds % size == 0:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def _read(db: Backend, key: tuple[str, str, int, int, str], *, lock: bool, now: int) -> int:
    if lock:
        # Insert-or-lock: a missing row is created first, so two first commands of a window
        # serialise on it instead of both reading "nothing used".
        db.execute(
            "INSERT INTO limits (pact_id, limit_name, window_start, window_seconds, party, used, updated_at) "
            "VALUES (?, ?, ?, ?, ?, '0', ?) ON CONFLICT DO NOTHING",
            (*key, now),
        )
    found = db.query(_LOCKED if lock and db.name == "postgresql" else _SELECT, key)
    if not found:
        return 0
    text = found[0][0]
    if not isinstance(text, str) or not text.isascii() or not text.isdigit() or len(text) > MAX_DIGITS:
        raise CommandError(
            f"the store's usage of limit `{key[1]}` for the window starting {utc_text(key[2])} is unreadable",
            code="PW529",
            field="limit",
            found=str(text)[:40],
        )
    return int(text)


def check_limits(
    db: Backend,
    doc: Mapping[str, Any],
    pact_id: str,
    parties: Mapping[str, str],
    transition: str,
    planned: Sequence[PlannedCall],
    now: int,
    scale: int,
    *,
    lock: bool,
) -> list[Usage]:
    """The usage rows this command adds to; PW528 when one would cross its limit.

    With `lock` (a command that may commit) each row is inserted if missing and locked;
    without it (a dry run) it is only read.
    """
    code = str((doc.get("currency") or {}).get("code", ""))

    def money(value: int) -> str:
        return f"{format_money(value, scale)} {code}".rstrip()

    out: list[Usage] = []
    for limit in doc.get("limits") or ():
        carried = sum(c.amount or 0 for c in planned if c.effect == limit["effect"])
        if not carried:
            continue
        window = int(limit["window"])
        start = now // window * window
        role = limit.get("per")
        party = parties.get(role, "") if role else ""
        key = (pact_id, str(limit["name"]), start, window, party)
        used = _read(db, key, lock=lock, now=now)
        most = int(limit["max"])
        if used + carried > most:
            left = max(most - used, 0)
            who = f" for `{party}` as `{role}`" if role else ""
            raise CommandError(
                f"LIMIT_REACHED: limit `{limit['name']}` ({money(most)} per "
                f"{_window_text(window)}{who}, window {utc_text(start)} .. {utc_text(start + window)}) has "
                f"{money(used)} used and {money(left)} left; `{transition}` "
                f"carries {money(carried)}",
                code="PW528",
                field="limit",
                expected=f"at most {money(left)}",
                found=money(carried),
            )
        out.append(Usage(key, used + carried))
    return out


def record_limits(db: Backend, usages: Sequence[Usage], now: int) -> None:
    """Write the usage after the command, in its transaction, on the rows `check_limits` locked."""
    for usage in usages:
        db.execute(
            "UPDATE limits SET used = ?, updated_at = ? WHERE pact_id = ? AND limit_name = ? AND window_start = ? "
            "AND window_seconds = ? AND party = ?",
            (str(usage.after), now, *usage.key),
        )
