"""Run a program from JSON inputs and return JSON-ready postings, for the CLI.

The inputs use Formance's shapes, so the same files drive a Formance Ledger:
variables are an object of strings (`{"price": "EUR/2 6490"}`), balances a
list of `{"account", "asset", "amount"}`. JSON is read strictly: duplicate
keys, floats, NaN and Infinity are refused, because a duplicated key or a
float amount is ambiguous money. Amounts come out as decimal strings of minor
units (`"6490"`), as everywhere at pactwright's JSON boundaries.
"""

from __future__ import annotations

import re
from typing import Final

from pactwright.canonical import load_json
from pactwright.errors import CanonicalError, LedgerError, UsageError

from ._parser import parse_program
from .interpreter import ACCOUNT_RE, ASSET_RE, run_program

__all__ = ["run_from_json"]

_INTEGER_RE: Final = re.compile(r"-?[0-9]+")
_BALANCE_KEYS: Final = frozenset({"account", "asset", "amount"})


def run_from_json(program_text: str, vars_json: bytes, balances_json: bytes | None) -> dict[str, list[dict[str, str]]]:
    """Parse `program_text`, run it, and return `{"postings": [...]}`.

    Each posting is `{"source", "destination", "amount", "asset"}` with the
    amount as a decimal string. Without balances every account starts at 0.
    Raises `CanonicalError` (PW011, PW015-PW018) for JSON that is not strict, `UsageError`
    (PW001) for a malformed balances document, and `LedgerError` (PW75x) for
    everything the parser and interpreter refuse.
    """
    program = parse_program(program_text)
    variables = _load_variables(vars_json)
    balances = _load_balances(balances_json) if balances_json is not None else {}
    postings = run_program(program, variables, balances)
    return {
        "postings": [
            {
                "source": posting.source,
                "destination": posting.destination,
                "amount": str(posting.amount),
                "asset": posting.asset,
            }
            for posting in postings
        ]
    }


def _strict_loads(data: bytes, what: str) -> object:
    """The kernel's strict JSON reader, with big integers allowed and the document named."""
    try:
        return load_json(data, big_ints=True)
    except CanonicalError as exc:
        raise CanonicalError(f"{what}: {exc.message}", code=exc.code) from None


def _load_variables(data: bytes) -> dict[str, str]:
    document = _strict_loads(data, "variables")
    if not isinstance(document, dict):
        raise LedgerError("variables must be a json object of strings", code="PW753")
    variables: dict[str, str] = {}
    for name, value in document.items():
        if not isinstance(value, str):
            raise LedgerError(
                f"variable `{name}` must be a json string, found `{type(value).__name__}`",
                code="PW753",
                field=name,
                hint='write amounts as strings, for example "EUR/2 6490"',
            )
        variables[name] = value
    return variables


def _load_balances(data: bytes) -> dict[tuple[str, str], int]:
    document = _strict_loads(data, "balances")
    if not isinstance(document, list):
        raise _bad_balances("the document must be a json list of {account, asset, amount}")
    balances: dict[tuple[str, str], int] = {}
    for index, entry in enumerate(document):
        where = f"entry {index}"
        if not isinstance(entry, dict) or set(entry) != _BALANCE_KEYS:
            raise _bad_balances(f"{where} must have exactly the keys account, asset and amount")
        account, asset, amount = entry["account"], entry["asset"], entry["amount"]
        if not isinstance(account, str) or ACCOUNT_RE.fullmatch(account) is None:
            raise _bad_balances(f"{where} has an invalid account (write it without `@`)")
        if not isinstance(asset, str) or ASSET_RE.fullmatch(asset) is None:
            raise _bad_balances(f"{where} has an invalid asset")
        if (account, asset) in balances:
            raise _bad_balances(f"{where} repeats account `{account}` in `{asset}`")
        balances[(account, asset)] = _balance_amount(amount, where)
    return balances


def _balance_amount(amount: object, where: str) -> int:
    # bool is an int subclass in Python; JSON true is not an amount.
    if type(amount) is int:
        return amount
    if isinstance(amount, str) and _INTEGER_RE.fullmatch(amount):
        try:
            return int(amount)
        except ValueError:  # beyond Python's digit limit for int()
            raise _bad_balances(f"{where} has an amount with too many digits") from None
    raise _bad_balances(f"{where} has an invalid amount (an integer or a decimal string)")


def _bad_balances(why: str) -> UsageError:
    return UsageError(f"invalid balances: {why}", field="balances")
