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

It implements `runtime.ledger_api.Ledger` and refuses exactly what
`DurableLedger` refuses (the checks live in `_ledger_common`): it is the
ledger the differential and property tests run against.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass

from ._ledger_common import as_program, check_reference, check_variables, one_per_account, reuse_error
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

    def apply(self, reference: str, program_text: str | Program, variables: Mapping[str, str]) -> list[Posting]:
        """Run the program (text, or already parsed) with `variables` and commit its postings, once per reference.

        Raises `LedgerError`: PW757 when `reference` is empty or malformed or
        was already applied with another program or other variables;
        otherwise whatever parsing and `run_program` raise (PW751-PW756), in
        which case nothing changed.
        """
        reference = check_reference(reference)
        given = check_variables(variables)
        program = as_program(program_text)
        with self._lock:
            prior = self._applied.get(reference)
            if prior is not None:
                error = reuse_error(reference, (prior.program, prior.variables), (program, given))
                if error is not None:
                    raise error
                return list(prior.postings)
            postings = run_program(program, given, self._balances)
            for posting in postings:
                self._move(posting)
            self._applied[reference] = _Applied(program, given, tuple(postings))
            return list(postings)

    def postings(self, reference: str) -> list[Posting] | None:
        """The postings applied under `reference`, in order; None if nothing was."""
        check_reference(reference)
        with self._lock:
            prior = self._applied.get(reference)
            return None if prior is None else list(prior.postings)

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

    def balances(self, accounts: list[str] | None = None) -> dict[str, int]:
        """Account -> minor units, as `Ledger.balances` returns them (PW553 for a multi-asset account)."""
        return one_per_account(self.asset_balances(), accounts)

    def asset_balances(self) -> dict[tuple[str, str], int]:
        """A copy of every non-zero balance, keyed by (account, asset)."""
        with self._lock:
            return dict(self._balances)

    def asset_totals(self) -> dict[str, int]:
        """The sum of all balances per asset: 0 for every asset, always."""
        totals: dict[str, int] = {}
        with self._lock:
            for (_, asset), amount in self._balances.items():
                totals[asset] = totals.get(asset, 0) + amount
        return totals
