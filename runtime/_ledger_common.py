"""What every embedded ledger checks the same way: references, variables, reuse, accounts touched.

Kept in one place so `InMemoryLedger` and `DurableLedger` refuse the same
input with the same code and the same words.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from pactwright.errors import LedgerError

from .numscript import Program, parse_program
from .numscript.program import AccountLiteral, Allotment, Destination, InOrder, Variable

__all__ = [
    "MAX_REFERENCE",
    "as_program",
    "check_reference",
    "check_variables",
    "involved_accounts",
    "one_per_account",
    "reuse_error",
]

MAX_REFERENCE: Final = 512


def check_reference(reference: object) -> str:
    """A reference is a non-empty string of at most 512 printable characters (PW757 otherwise)."""
    if not isinstance(reference, str) or not reference:
        raise LedgerError("a ledger reference must be a non-empty string", code="PW757", field="reference")
    if len(reference) > MAX_REFERENCE:
        raise LedgerError(
            f"a ledger reference must be at most {MAX_REFERENCE} characters, found {len(reference)}",
            code="PW757",
            field="reference",
        )
    if not reference.isprintable():
        raise LedgerError("a ledger reference must not contain control characters", code="PW757", field="reference")
    return reference


def check_variables(variables: object) -> dict[str, str]:
    """Variables are a mapping of string names to string values (PW753 otherwise)."""
    if not isinstance(variables, Mapping):
        raise LedgerError(
            f"ledger variables must be a mapping of strings, found `{type(variables).__name__}`", code="PW753"
        )
    given: dict[str, str] = {}
    for name, value in variables.items():
        if not isinstance(name, str) or not isinstance(value, str):
            raise LedgerError(
                f"ledger variable `{name!s:.64}` must be a string named by a string", code="PW753", field=str(name)
            )
        if "\x00" in name or "\x00" in value:
            raise LedgerError(f"ledger variable `{name:.64}` contains a NUL character", code="PW753", field=name)
        given[name] = value
    return given


def as_program(program: str | Program) -> Program:
    """Parse program text (PW751, PW752, ...); a parsed `Program` passes through."""
    if isinstance(program, Program):
        return program
    if not isinstance(program, str):
        raise LedgerError(f"a ledger program must be text, found `{type(program).__name__}`", code="PW751")
    return parse_program(program)


def reuse_error(
    reference: str,
    stored: tuple[Program, Mapping[str, str]],
    given: tuple[Program, Mapping[str, str]],
) -> LedgerError | None:
    """None when a repeat matches what was applied; else PW757 naming what differs.

    Programs compare by their syntax tree, so re-indenting a program does not
    make it another program; variables compare exactly, value by value.
    """
    (stored_program, stored_vars), (program, variables) = stored, given
    reasons: list[str] = []
    if stored_program != program:
        reasons.append("exists_with_different_program")
    differing = sorted(set(stored_vars) ^ set(variables) | {k for k in variables if stored_vars.get(k) != variables[k]})
    if differing:
        shown = ", ".join(f"`{name:.64}`" for name in differing[:5]) + (" ..." if len(differing) > 5 else "")
        reasons.append(f"exists_with_different_variables ({shown})")
    if not reasons:
        return None
    return LedgerError(
        f"reference `{reference:.128}` was already applied: {' and '.join(reasons)}",
        code="PW757",
        field="program" if stored_program != program else "variables",
        hint="a retry must repeat the original program and variables exactly; a new intent needs a new reference",
    )


def involved_accounts(program: Program, variables: Mapping[str, str]) -> list[str]:
    """Every account a program may read or write, sorted: the rows an apply must lock.

    Account variables resolve from `variables` as given; a malformed or
    missing one is left to the interpreter to refuse (PW753).
    """
    found: set[str] = set()

    def name(expr: AccountLiteral | Variable) -> None:
        if isinstance(expr, AccountLiteral):
            found.add(expr.name)
        elif expr.name in variables:
            found.add(variables[expr.name])

    def walk(dest: Destination) -> None:
        if isinstance(dest, AccountLiteral | Variable):
            name(dest)
        elif isinstance(dest, Allotment):
            for clause in dest.clauses:
                walk(clause.destination)
        elif isinstance(dest, InOrder):
            for capped in dest.clauses:
                walk(capped.destination)
            walk(dest.remaining)

    for send in program.statements:
        name(send.source.account)
        walk(send.destination)
    return sorted(found)


def one_per_account(by_asset: Mapping[tuple[str, str], int], accounts: list[str] | None) -> dict[str, int]:
    """Collapse (account, asset) balances to one number per account, as `Ledger.balances` returns them."""
    if accounts is not None and (
        not isinstance(accounts, list) or not all(isinstance(account, str) for account in accounts)
    ):
        raise LedgerError("accounts must be a list of account names", code="PW753")
    wanted = None if accounts is None else set(accounts)
    out: dict[str, int] = {}
    assets: dict[str, str] = {}
    for (account, asset), amount in sorted(by_asset.items()):
        if (wanted is not None and account not in wanted) or amount == 0:
            continue
        if account in assets:
            raise LedgerError(
                f"account `{account}` holds more than one asset (`{assets[account]}` and `{asset}`)",
                code="PW553",
                hint="read the balances per asset (`pactwright ledger balances`)",
            )
        assets[account] = asset
        out[account] = amount
    if accounts is not None:
        for account in accounts:
            out.setdefault(account, 0)
    return out
