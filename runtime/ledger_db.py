"""The durable embedded ledger: Numscript programs applied once per reference, in a database of its own.

The ledger never shares a transaction with the store, exactly as a Formance
Ledger would not: the outbox worker delivers to it at least once, and the
reference makes the second delivery a no-op. One apply is one ledger
transaction that:

1. serializes applies of the same reference (PostgreSQL: a transaction-scoped
   advisory lock on the reference; SQLite: `BEGIN IMMEDIATE`, one writer);
2. returns the stored postings if the reference was applied with the same
   program and variables, refuses it (PW757) if with others;
3. locks the rows of exactly the accounts the program names (PostgreSQL:
   `SELECT ... FOR UPDATE` in sorted order, after creating missing rows, so
   two programs never deadlock and a new account cannot be raced into);
4. reads those accounts' balances, runs the interpreter on them (which
   refuses an overdraft of a non-external source, PW754), and writes the
   transaction, its postings in order and the new balances, or nothing.

Amounts are stored as decimal strings: integer minor units of any size, the
same on SQLite and PostgreSQL, never floats; every value read back is
checked (PW554), so a row edited behind the ledger's back is reported, not
used.
"""

from __future__ import annotations

import re
from types import TracebackType
from typing import Any, Final

from pactwright.canonical import canonical_bytes, load_json
from pactwright.errors import LedgerError, PactwrightError, UsageError
from pactwright.runtime.store._backend import first_line, storable

from ._ledger_common import (
    check_reference,
    check_variables,
    involved_accounts,
    one_per_account,
    reuse_error,
)
from ._ledger_sql import LedgerTarget, PostgresLedgerBackend, connect_ledger, default_url, parse_target
from .numscript import Posting, Program, parse_program, run_program
from .numscript.interpreter import ACCOUNT_RE, ASSET_RE
from .store._backend import Backend

__all__ = ["DurableLedger", "open_ledger"]

_AMOUNT_RE: Final = re.compile(r"-?[0-9]+")


class DurableLedger:
    """A ledger in its own SQLite file or PostgreSQL schema; one connection, not shared between threads."""

    def __init__(self, target: LedgerTarget, *, create: bool = True) -> None:
        self._target = target
        self._db: Backend | PostgresLedgerBackend = connect_ledger(target, create=create)

    @property
    def url(self) -> str:
        return self._target.url

    def __enter__(self) -> DurableLedger:
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None, tb: TracebackType | None) -> None:
        self.close()

    def close(self) -> None:
        self._db.close()

    # -- the Ledger protocol --------------------------------------------------

    def apply(self, reference: str, program_text: str, variables: dict[str, str]) -> list[Posting]:
        """Run `program_text` with `variables` and commit its postings, once per `reference`.

        Raises `LedgerError`: PW757 for an empty or malformed reference, or one
        applied with another program or other variables; PW751-PW756 for what
        the parser and interpreter refuse; PW552 when the database refuses the
        write. Whenever it raises, nothing was written.
        """
        reference = check_reference(reference)
        given = check_variables(variables)
        if not isinstance(program_text, str):
            raise LedgerError(f"a ledger program must be text, found `{type(program_text).__name__}`", code="PW751")
        if not storable(program_text):  # a comment may hold anything, but no database holds NUL alike
            raise LedgerError("a ledger program holds NUL or text that is not UTF-8", code="PW751")
        program = parse_program(program_text)
        # A retry after a lost response is the common repeat: answer it without a write lock.
        prior = self._stored(reference)
        if prior is not None:
            return self._repeat(reference, prior, program, given)
        for attempt in (1, 2):
            try:
                return self._apply_once(reference, program, program_text, given)
            except _Raced:
                # Another process committed this reference between our check and our insert.
                if attempt == 2:
                    break
        raise LedgerError(f"reference `{reference:.128}` could not be applied: it kept racing", code="PW552")

    def postings(self, reference: str) -> list[Posting] | None:
        """The postings applied under `reference`, in order; None if nothing was."""
        check_reference(reference)
        with self._read():
            if not self._db.query("SELECT 1 FROM ledger_transactions WHERE reference = ?", (reference,)):
                return None
            return self._postings(reference)

    def balances(self, accounts: list[str] | None = None) -> dict[str, int]:
        """Account -> minor units (one asset per account; PW553 otherwise)."""
        return one_per_account(self.asset_balances(accounts), accounts)

    # -- beyond the protocol ----------------------------------------------------

    def asset_balances(self, accounts: list[str] | None = None) -> dict[tuple[str, str], int]:
        """Every non-zero balance keyed by (account, asset), optionally for some accounts only."""
        with self._read():
            rows = self._db.query("SELECT account, asset, amount FROM ledger_balances ORDER BY account, asset")
        wanted = None if accounts is None else set(accounts)
        out: dict[tuple[str, str], int] = {}
        for account, asset, amount in rows:
            if wanted is not None and account not in wanted:
                continue
            value = _amount(amount, f"balance of `{account}`")
            _check_name(account, asset)
            if value:
                out[(account, asset)] = value
        return out

    def asset_totals(self) -> dict[str, int]:
        """The sum of all balances per asset: 0 for every asset, always (double entry)."""
        totals: dict[str, int] = {}
        for (_, asset), amount in self.asset_balances().items():
            totals[asset] = totals.get(asset, 0) + amount
        return totals

    def references(self) -> list[str]:
        """Every applied reference, in the order applied."""
        with self._read():
            return [str(row[0]) for row in self._db.query("SELECT reference FROM ledger_transactions ORDER BY id")]

    # -- internals --------------------------------------------------------------

    def _read(self) -> Any:
        return self._db.transaction(write=False)

    def _stored(self, reference: str) -> tuple[Program, dict[str, str]] | None:
        # One statement is its own snapshot: no BEGIN and COMMIT around it (two round trips on PostgreSQL,
        # paid by every first delivery, which finds nothing here and goes on to the write).
        rows = self._db.query(
            "SELECT program_text, variables FROM ledger_transactions WHERE reference = ?", (reference,)
        )
        return _decode(reference, rows[0]) if rows else None

    def _repeat(
        self, reference: str, prior: tuple[Program, dict[str, str]], program: Program, given: dict[str, str]
    ) -> list[Posting]:
        with self._read():
            return self._repeat_locked(reference, prior, program, given)

    def _repeat_locked(
        self, reference: str, prior: tuple[Program, dict[str, str]], program: Program, given: dict[str, str]
    ) -> list[Posting]:
        error = reuse_error(reference, prior, (program, given))
        if error is not None:
            raise error
        return self._postings(reference)

    def _postings(self, reference: str) -> list[Posting]:
        rows = self._db.query(
            "SELECT position, source, destination, amount, asset FROM ledger_postings"
            " WHERE reference = ? ORDER BY position",
            (reference,),
        )
        out: list[Posting] = []
        for index, (position, source, destination, amount, asset) in enumerate(rows):
            if position != index:
                raise _tampered(f"the postings of `{reference:.128}` are not numbered 0, 1, 2, ...")
            _check_name(source, asset)
            _check_name(destination, asset)
            value = _amount(amount, f"a posting of `{reference:.128}`")
            if value <= 0:
                raise _tampered(f"a posting of `{reference:.128}` has the amount `{amount}`")
            out.append(Posting(source, destination, value, asset))
        return out

    def _apply_once(self, reference: str, program: Program, text: str, given: dict[str, str]) -> list[Posting]:
        db = self._db
        try:
            with db.transaction(write=True):
                return self._apply_locked(reference, program, text, given)
        except PactwrightError:
            raise
        except Exception as exc:  # noqa: BLE001 - sqlite3 / psycopg: the database refused the write
            if isinstance(db, PostgresLedgerBackend) and isinstance(exc, db.unique_violation):
                raise _Raced from None
            why = first_line(exc)
            raise LedgerError(f"the ledger refused the write and rolled it back: {why}", code="PW552") from None

    def _apply_locked(self, reference: str, program: Program, text: str, given: dict[str, str]) -> list[Posting]:
        """Steps 1 to 4 of the module docstring, inside the caller's write transaction."""
        db = self._db
        if isinstance(db, PostgresLedgerBackend):
            db.lock_reference(reference)
        rows = db.query("SELECT program_text, variables FROM ledger_transactions WHERE reference = ?", (reference,))
        if rows:
            return self._repeat_locked(reference, _decode(reference, rows[0]), program, given)
        balances = self._lock(involved_accounts(program, given), postgres=isinstance(db, PostgresLedgerBackend))
        postings = run_program(program, given, balances)
        self._write(reference, text, given, postings, balances)
        return postings

    def _lock(self, accounts: list[str], *, postgres: bool) -> dict[tuple[str, str], int]:
        """Create missing account rows, lock them (PostgreSQL), and read their balances."""
        db = self._db
        valid = [account for account in accounts if ACCOUNT_RE.fullmatch(account)]
        if not valid:
            return {}
        db.execute_many(
            "INSERT INTO ledger_accounts (account) VALUES (?) ON CONFLICT (account) DO NOTHING", [(a,) for a in valid]
        )
        # Only `?` marks are interpolated into these two statements; the values are parameters.
        marks = ", ".join("?" for _ in valid)
        if postgres:
            locking = f"SELECT account FROM ledger_accounts WHERE account IN ({marks}) ORDER BY account FOR UPDATE"  # noqa: S608
            db.query(locking, valid)
        reading = f"SELECT account, asset, amount FROM ledger_balances WHERE account IN ({marks})"  # noqa: S608
        rows = db.query(reading, valid)
        return {(account, asset): _amount(amount, f"balance of `{account}`") for account, asset, amount in rows}

    def _write(
        self,
        reference: str,
        text: str,
        given: dict[str, str],
        postings: list[Posting],
        balances: dict[tuple[str, str], int],
    ) -> None:
        db = self._db
        db.execute(
            "INSERT INTO ledger_transactions (reference, program_text, variables) VALUES (?, ?, ?)",
            (reference, text, canonical_bytes(given).decode("utf-8")),
        )
        db.execute_many(
            "INSERT INTO ledger_postings (reference, position, source, destination, amount, asset)"
            " VALUES (?, ?, ?, ?, ?, ?)",
            [(reference, i, p.source, p.destination, str(p.amount), p.asset) for i, p in enumerate(postings)],
        )
        moved = dict(balances)
        for posting in postings:
            for account, delta in ((posting.source, -posting.amount), (posting.destination, posting.amount)):
                key = (account, posting.asset)
                moved[key] = moved.get(key, 0) + delta
        changed = sorted(key for key in moved if key not in balances or moved[key] != balances[key])
        db.execute_many(
            "INSERT INTO ledger_balances (account, asset, amount) VALUES (?, ?, ?)"
            " ON CONFLICT (account, asset) DO UPDATE SET amount = excluded.amount",
            [(account, asset, str(moved[(account, asset)])) for account, asset in changed],
        )


class _Raced(Exception):
    """The reference's unique constraint fired: another process applied it first."""


def _tampered(why: str) -> LedgerError:
    return LedgerError(
        f"the ledger holds a malformed record: {why}",
        code="PW554",
        hint="the ledger database was changed outside pactwright; restore it from a backup",
    )


def _amount(value: object, what: str) -> int:
    if not isinstance(value, str) or _AMOUNT_RE.fullmatch(value) is None:
        raise _tampered(f"{what} is `{value!s:.64}`, not a decimal amount")
    return int(value)


def _check_name(account: object, asset: object) -> None:
    if not isinstance(account, str) or ACCOUNT_RE.fullmatch(account) is None:
        raise _tampered(f"the account `{account!s:.64}` is not an account name")
    if not isinstance(asset, str) or ASSET_RE.fullmatch(asset) is None:
        raise _tampered(f"the asset `{asset!s:.64}` is not an asset")


def _decode(reference: str, row: tuple[Any, ...]) -> tuple[Program, dict[str, str]]:
    text, variables = row
    try:
        program = parse_program(text) if isinstance(text, str) else None
        document = load_json(variables.encode("utf-8")) if isinstance(variables, str) else None
    except PactwrightError:
        program, document = None, None
    if program is None or not isinstance(document, dict) or not all(isinstance(v, str) for v in document.values()):
        raise _tampered(f"the program or variables stored for `{reference:.128}` no longer parse")
    return program, document


def open_ledger(url: str | None, store_url: str | None, *, create: bool = True) -> DurableLedger:
    """Open the ledger named by `--ledger URL`, or the one that goes with `--store URL`.

    URL forms: a file path or `sqlite:///ABS/PATH` (a SQLite file of its
    own), or `postgresql://...` (schema `pactwright_ledger`, or the first
    schema of the URL's `search_path`). Without a URL: the sibling
    `NAME.ledger.sqlite` of a SQLite store `NAME.db`; for a PostgreSQL store,
    the same server with the schema `pactwright_ledger` (`S_ledger` for a
    store in schema S). The ledger may never be the store itself. With
    `create=False` a missing ledger is an error (PW550) instead of a new one.
    """
    if url is None:
        if store_url is None:
            raise UsageError("no ledger given: pass `--ledger URL` (or `--store URL` to use its sibling)", code="PW550")
        derived, schema = default_url(store_url)
        target = LedgerTarget(derived, schema=schema) if schema is not None else parse_target(derived)
    else:
        target = parse_target(url)
    if store_url is not None and target.sqlite_path is not None and _same_file(target.sqlite_path, store_url):
        raise UsageError(
            f"cannot open the ledger `{target.url}`: it is the store; the ledger needs a database of its own",
            code="PW550",
        )
    return DurableLedger(target, create=create)


def _same_file(ledger_path: str, store_url: str) -> bool:
    from pathlib import Path

    store_path = store_url[len("sqlite://") :] if store_url.startswith("sqlite://") else store_url
    if "://" in store_path:
        return False
    try:
        return Path(ledger_path).resolve() == Path(store_path).resolve()
    except OSError:
        return False
