"""Execute a parsed program: variables in, postings out, nothing half done.

The semantics are Formance Numscript's (github.com/formancehq/numscript,
`internal/interpreter`), restricted to the subset `_parser` accepts:

- a send takes its whole amount from one source or fails: a plain account
  may spend its balance, `allowing overdraft up to M` its balance plus M,
  `@world` and `allowing unbounded overdraft` anything;
- an allotment gives each portion floor(amount * portion) and then hands the
  units left over, one at a time, to the portions in declaration order
  (`remaining` being the portion 1 - sum of the others), so nothing is lost;
- an in-order block gives each `max` clause min(cap, what is left), in
  order, and `remaining` the rest;
- zero amounts produce no posting, and consecutive postings between the same
  two accounts are merged, as Numscript's reconciler does;
- statements run in order, each seeing the balances the previous one left.

All arithmetic is on Python ints and `Fraction`s; no float is ever involved.
`run_program` works on its own copy of the balances and returns postings only
when every statement succeeded, so a failure moves nothing.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Final

from pactwright.errors import LedgerError

from .program import (
    AccountLiteral,
    Allotment,
    Destination,
    InOrder,
    MonetaryExpr,
    Posting,
    Program,
    Send,
    VarDecl,
    Variable,
)

__all__ = ["allot", "run_program"]

WORLD: Final = "world"

# Shared with cli_support, which validates balances files with the same shapes.
ASSET_RE: Final = re.compile(r"[A-Z][A-Z0-9]*(?:/[0-9]+)?")
ACCOUNT_RE: Final = re.compile(r"[a-zA-Z0-9_-]+(?::[a-zA-Z0-9_-]+)*")
_MONETARY_RE: Final = re.compile(rf"(?P<asset>{ASSET_RE.pattern}) (?P<amount>-?[0-9]+)")
_PERCENT_RE: Final = re.compile(r"(?P<whole>[0-9]+)(?:\.(?P<decimals>[0-9]+))?%")
_FRACTION_RE: Final = re.compile(r"(?P<num>[0-9]+)[ \t\n\f\r]?/[ \t\n\f\r]?(?P<den>[0-9]+)")
_NUMBER_RE: Final = re.compile(r"-?[0-9]+")


def allot(amount: int, portions: Sequence[Fraction]) -> list[int]:
    """Split `amount` minor units by `portions` exactly as Numscript does.

    Each share is floor(amount * portion); the units left over go one at a
    time to the portions in order. The shares always sum to `amount` when the
    portions sum to 1, and each is within one unit of its exact product.
    """
    shares = [amount * p.numerator // p.denominator for p in portions]
    left = amount - sum(shares)
    for index in range(len(shares)):
        if left <= 0:
            break
        shares[index] += 1
        left -= 1
    return shares


def run_program(
    program: Program,
    variables: Mapping[str, str],
    balances: Mapping[tuple[str, str], int],
) -> list[Posting]:
    """Run `program` against `balances` (keyed by (account, asset)).

    Returns the postings of every statement in order. Raises `LedgerError`:
    PW753 for a missing, extra or malformed variable, PW754 when a source
    cannot cover its send, PW755 on an asset mismatch, PW756 on an allotment
    whose portions do not make 100%. `balances` is never modified.
    """
    env = _bind(program.variables, variables)
    run = _Run(env, balances)
    postings: list[Posting] = []
    for send in program.statements:
        postings.extend(run.send(send))
    return postings


@dataclass(frozen=True, slots=True)
class _Monetary:
    asset: str
    amount: int


@dataclass(slots=True)
class _Env:
    accounts: dict[str, str] = field(default_factory=dict)
    monetaries: dict[str, _Monetary] = field(default_factory=dict)
    portions: dict[str, Fraction] = field(default_factory=dict)
    numbers: dict[str, int] = field(default_factory=dict)


# -- variables ----------------------------------------------------------------


def _bind(decls: Sequence[VarDecl], raw: Mapping[str, str]) -> _Env:
    declared = {decl.name: decl for decl in decls}
    for name in declared:
        if name not in raw:
            raise LedgerError(f"missing variable `${name}`", code="PW753", field=name)
    for name in sorted(raw):
        if name not in declared:
            hint = "give variable names without `$`" if name.startswith("$") else None
            raise LedgerError(
                f"unexpected variable `{_show(name)}`: the program does not declare it",
                code="PW753",
                field=name,
                hint=hint,
            )
    env = _Env()
    for name, decl in declared.items():
        value = raw[name]
        if not isinstance(value, str):
            raise LedgerError(
                f"variable `${name}` must be a string, found `{type(value).__name__}`",
                code="PW753",
                field=name,
            )
        if decl.type == "monetary":
            env.monetaries[name] = _parse_monetary(name, value)
        elif decl.type == "account":
            env.accounts[name] = _parse_account(name, value)
        elif decl.type == "portion":
            env.portions[name] = _parse_portion(name, value)
        else:
            env.numbers[name] = _parse_number(name, value)
    return env


def _bad(name: str, value: str, expected: str) -> LedgerError:
    return LedgerError(
        f"variable `${name}` is malformed: expected {expected}, found `{_show(value)}`",
        code="PW753",
        field=name,
        expected=expected,
        found=value,
    )


def _negative(name: str, value: str) -> LedgerError:
    return LedgerError(f"variable `${name}` is negative: `{_show(value)}`", code="PW753", field=name)


def _to_int(name: str, digits: str) -> int:
    try:
        return int(digits)
    except ValueError:  # beyond Python's digit limit for int()
        raise LedgerError(f"variable `${name}` has too many digits", code="PW753") from None


def _parse_monetary(name: str, value: str) -> _Monetary:
    match = _MONETARY_RE.fullmatch(value)
    if match is None:
        raise _bad(name, value, "a monetary `ASSET AMOUNT` such as `EUR/2 6490`")
    if match["amount"].startswith("-"):
        raise _negative(name, value)
    return _Monetary(match["asset"], _to_int(name, match["amount"]))


def _parse_account(name: str, value: str) -> str:
    if ACCOUNT_RE.fullmatch(value) is None:
        expected = "an account name such as `escrow:a1`"
        if value.startswith("@"):
            expected += " (without `@`)"
        raise _bad(name, value, expected)
    return value


def _parse_portion(name: str, value: str) -> Fraction:
    expected = "a portion such as `10%`, `2.5%` or `1/3`, between 0% and 100%"
    if match := _PERCENT_RE.fullmatch(value):
        decimals = match["decimals"] or ""
        digits = _to_int(name, match["whole"] + decimals)
        portion = Fraction(digits, 100 * 10 ** len(decimals))
    elif match := _FRACTION_RE.fullmatch(value):
        denominator = _to_int(name, match["den"])
        if denominator == 0:
            raise _bad(name, value, expected)
        portion = Fraction(_to_int(name, match["num"]), denominator)
    else:
        raise _bad(name, value, expected)
    if portion > 1:
        raise _bad(name, value, expected)
    return portion


def _parse_number(name: str, value: str) -> int:
    if _NUMBER_RE.fullmatch(value) is None:
        raise _bad(name, value, "a whole number of minor units such as `6490`")
    if value.startswith("-"):
        raise _negative(name, value)
    return _to_int(name, value)


def _show(value: str) -> str:
    """A user value fit for a one-line message: escaped and bounded."""
    shown = value.encode("unicode_escape").decode("ascii").replace("`", "'")
    return shown if len(shown) <= 64 else shown[:61] + "..."


# -- execution ----------------------------------------------------------------


class _Run:
    """One execution: bound variables and a private overlay of balances."""

    def __init__(self, env: _Env, balances: Mapping[tuple[str, str], int]) -> None:
        self._env = env
        self._base = balances
        self._changed: dict[tuple[str, str], int] = {}

    def _balance(self, account: str, asset: str) -> int:
        key = (account, asset)
        if key in self._changed:
            return self._changed[key]
        value = self._base.get(key, 0)
        if type(value) is not int:
            raise TypeError(f"balance of {key!r} must be an int, got {type(value).__name__}")
        return value

    def send(self, send: Send) -> list[Posting]:
        sent = self._monetary(send.amount)
        asset, amount = sent.asset, sent.amount
        source = self._account(send.source.account)
        limit = self._overdraft_limit(send, asset)
        if source != WORLD and limit is not None:
            available = self._balance(source, asset) + limit
            if available < amount:
                shown = max(available, 0)
                raise LedgerError(
                    f"insufficient funds: account `{source}` needs `{amount}` `{asset}` but has `{shown}` available",
                    code="PW754",
                    expected=str(amount),
                    found=str(shown),
                )
        receivers: list[tuple[str, int]] = []
        self._receive(send.destination, amount, asset, receivers)
        postings: list[Posting] = []
        for destination, share in receivers:
            merged = (share + postings.pop().amount) if _same_target(postings, destination) else share
            postings.append(Posting(source, destination, merged, asset))
        for posting in postings:
            self._changed[(source, asset)] = self._balance(source, asset) - posting.amount
            target = (posting.destination, asset)
            self._changed[target] = self._balance(*target) + posting.amount
        return postings

    def _overdraft_limit(self, send: Send, asset: str) -> int | None:
        """How far below zero the source may go; None means without limit."""
        overdraft = send.source.overdraft
        if overdraft is None:
            return 0
        if overdraft.bound is None:
            return None
        return self._in_asset(overdraft.bound, asset)

    def _account(self, expr: AccountLiteral | Variable) -> str:
        if isinstance(expr, AccountLiteral):
            return expr.name
        return self._env.accounts[expr.name]

    def _monetary(self, expr: MonetaryExpr) -> _Monetary:
        if isinstance(expr, Variable):
            return self._env.monetaries[expr.name]
        if isinstance(expr.amount, int):
            return _Monetary(expr.asset, expr.amount)
        name = expr.amount.name
        if name in self._env.numbers:
            return _Monetary(expr.asset, self._env.numbers[name])
        value = self._env.monetaries[name]
        if value.asset != expr.asset:
            raise _mismatch(expr.asset, value.asset, f"variable `${name}`")
        return value

    def _in_asset(self, expr: MonetaryExpr, asset: str) -> int:
        value = self._monetary(expr)
        if value.asset != asset:
            raise _mismatch(asset, value.asset, "a cap or overdraft bound")
        return value.amount

    def _receive(self, dest: Destination, amount: int, asset: str, out: list[tuple[str, int]]) -> None:
        if isinstance(dest, AccountLiteral | Variable):
            if amount != 0:
                out.append((self._account(dest), amount))
        elif isinstance(dest, Allotment):
            shares = allot(amount, self._portions(dest))
            for clause, share in zip(dest.clauses, shares, strict=True):
                self._receive(clause.destination, share, asset, out)
        else:
            self._receive_in_order(dest, amount, asset, out)

    def _receive_in_order(self, dest: InOrder, amount: int, asset: str, out: list[tuple[str, int]]) -> None:
        # Every cap is checked before anything is taken, also caps that the
        # amount never reaches: stricter than Numscript, which skips them.
        caps = [self._in_asset(clause.cap, asset) for clause in dest.clauses]
        left = amount
        for clause, cap in zip(dest.clauses, caps, strict=True):
            if left == 0:
                break
            take = min(cap, left)
            if take != 0:
                self._receive(clause.destination, take, asset, out)
                left -= take
        if left != 0:
            self._receive(dest.remaining, left, asset, out)

    def _portions(self, block: Allotment) -> list[Fraction]:
        portions: list[Fraction] = []
        remaining_at: int | None = None
        for index, clause in enumerate(block.clauses):
            if clause.portion is None:
                remaining_at = index
                portions.append(Fraction(0))
            elif isinstance(clause.portion, Variable):
                portions.append(self._env.portions[clause.portion.name])
            else:
                portions.append(clause.portion.value)
        total = sum(portions, Fraction(0))
        if total > 1:
            raise _bad_allotment(block, f"portions sum to `{_percent(total)}`, over 100%")
        if remaining_at is not None:
            portions[remaining_at] = 1 - total
        elif total != 1:
            raise _bad_allotment(block, f"portions sum to `{_percent(total)}`, not 100%, and there is no `remaining`")
        return portions


def _same_target(postings: list[Posting], destination: str) -> bool:
    """Numscript merges consecutive postings to the same destination."""
    return bool(postings) and postings[-1].destination == destination


def _mismatch(expected: str, found: str, what: str) -> LedgerError:
    return LedgerError(
        f"asset mismatch: the send moves `{expected}` but {what} is in `{found}`",
        code="PW755",
        expected=expected,
        found=found,
    )


def _bad_allotment(block: Allotment, why: str) -> LedgerError:
    return LedgerError(f"invalid allotment at {block.span}: {why}", code="PW756")


def _percent(value: Fraction) -> str:
    percent = value * 100
    return f"{percent.numerator}%" if percent.denominator == 1 else f"{value}"
