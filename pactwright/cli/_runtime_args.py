"""Argument helpers shared by the runtime's commands (`open`, `submit`, `show`)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from pactwright.errors import CommandError, UsageError

if TYPE_CHECKING:
    from pactwright.runtime.clock import Clock
    from pactwright.runtime.store import Store


def pairs(values: list[str] | None, flag: str, sep: str = "=") -> dict[str, str]:
    """`k=v` arguments as a dict; a malformed or repeated one is a usage error (PW001)."""
    out: dict[str, str] = {}
    for value in values or []:
        name, found, rest = value.partition(sep)
        if not found or not name:
            raise UsageError(f"`{flag} {value}` must be `{flag} NAME{sep}VALUE`")
        if name in out:
            raise UsageError(f"`{flag} {name}` is given twice")
        out[name] = rest
    return out


def add_store(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--store", required=True, metavar="URL", help="SQLite file path or postgresql:// URL")


def add_clock(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--clock-file",
        metavar="PATH",
        help="TEST AND DEMO ONLY: read trusted time (epoch seconds) from this file instead of the host clock",
    )


def clock(args: argparse.Namespace) -> Clock:
    from pactwright.runtime.clock import FileClock, SystemClock

    return FileClock(args.clock_file) if args.clock_file else SystemClock()


def upgraded(store: Store) -> Store:
    """An existing store migrated forward for a command that writes (PW701 for a newer one, as on open).

    A store that holds agreements, made by an earlier release, gains the
    tables later ones added (versioned migrations, one transaction) before a
    command writes to them; a store without agreements has nothing for such
    a command and is left as it is, and commands that only read never migrate.
    """
    from pactwright.runtime.store._migrations import LATEST, RUNTIME_TABLES

    if RUNTIME_TABLES <= store.schema_version() < LATEST:
        store.migrate()
    return store


def existing_store(url: str, agreement_id: str, *, write: bool = False) -> Store:
    """An existing store with the agreement tables, opened without creating or migrating anything.

    A missing SQLite file is PW700 and a newer schema PW701 (both from the
    store); a store made before agreements existed holds none (PW501).
    """
    from pactwright.runtime.store import open_store
    from pactwright.runtime.store._migrations import RUNTIME_TABLES

    store = open_store(url, migrate_schema=False)
    if store.schema_version() < RUNTIME_TABLES:
        store.close()
        raise CommandError(f"there is no agreement `{agreement_id}` in the store", code="PW501")
    return upgraded(store) if write else store
