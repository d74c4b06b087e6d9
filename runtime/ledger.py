"""The embedded double-entry ledger that executes compiled `.num` programs.

Balances are integer minor units keyed by (account, asset), with account
names written without `@` as in postings. Money only ever moves as postings,
each debiting one account and crediting another by the same amount, so the
balances of every asset always sum to zero: what `@world` (the outside) has
paid in shows as its negative balance.

`apply` is atomic and idempotent per reference: the program runs against the
current balances and either every posting is committed or none is; a
reference already applied returns its original postings and moves nothing,
which is what lets the outbox worker deliver at least once. A failed apply
records nothing, so the same reference may be retried once funds arrive.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass

from pactwright.errors import LedgerError

from .numscript import Posting, Program, run_program

__all__ = ["InMemoryLedger"]


@dataclass(frozen=True, slots=True)
class _Applied:
    program: Program
    variables: dict[str, str]
    postings: tuple[Posting, ...]


class InMemoryLedger:
    """A process-local ledger; thread-safe, one lock around every apply."""

    def __init__(self) -> None:
        self._balances: dict[tuple[str, str], int] = {}
        self._applied: dict[str, _Applied] = {}
        self._lock = threading.Lock()

    def apply(self, reference: str, program: Program, variables: Mapping[str, str]) -> list[Posting]:
        """Run `program` with `variables` and commit its postings, once per reference.

        Raises `LedgerError`: PW757 when `reference` is empty or was already
        applied with another program or other variables; otherwise whatever
        `run_program` raises (PW753-PW756), in which case nothing changed.
        """
        if not isinstance(reference, str) or not reference:
            raise LedgerError("a ledger reference must be a non-empty string", code="PW757")
        given = dict(variables)
        with self._lock:
            prior = self._applied.get(reference)
            if prior is not None:
                if prior.program != program or prior.variables != given:
                    raise LedgerError(
                        f"reference `{reference}` was already applied with a different "
                        + ("program" if prior.program != program else "set of variables"),
                        code="PW757",
                        hint="a retry must repeat the original program and variables exactly",
                    )
                return list(prior.postings)
            postings = run_program(program, given, self._balances)
            for posting in postings:
                self._move(posting)
            self._applied[reference] = _Applied(program, given, tuple(postings))
            return list(postings)

    def _move(self, posting: Posting) -> None:
        for account, delta in (
            (posting.source, -posting.amount),
            (posting.destination, posting.amount),
        ):
            key = (account, posting.asset)
            value = self._balances.get(key, 0) + delta
            if value:
                self._balances[key] = value
            else:
                self._balances.pop(key, None)

    def balance(self, account: str, asset: str) -> int:
        """The balance of `account` (without `@`) in `asset`; 0 if never touched."""
        with self._lock:
            return self._balances.get((account, asset), 0)

    def balances(self) -> dict[tuple[str, str], int]:
        """A copy of every non-zero balance."""
        with self._lock:
            return dict(self._balances)

    def asset_totals(self) -> dict[str, int]:
        """The sum of all balances per asset: 0 for every asset, always."""
        totals: dict[str, int] = {}
        with self._lock:
            for (_, asset), amount in self._balances.items():
                totals[asset] = totals.get(asset, 0) + amount
        return totals
