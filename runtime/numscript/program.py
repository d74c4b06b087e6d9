"""The syntax tree of a ledger program, and the postings it produces.

Every node is a frozen dataclass, so a parsed program can be shared between
threads, used as a dictionary key and compared for equality. Source spans are
kept for error messages but excluded from equality: the ledger compares
programs to deduplicate by reference, and re-indenting a program does not
change what it does.

Account names are stored without their leading `@`, the way a Formance
Ledger reports them in postings (`@escrow:a1` posts from `escrow:a1`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction
from typing import Literal, TypeAlias

__all__ = [
    "AccountExpr",
    "AccountLiteral",
    "Allotment",
    "AllotmentClause",
    "CappedClause",
    "Destination",
    "InOrder",
    "MonetaryExpr",
    "MonetaryLiteral",
    "Overdraft",
    "PortionExpr",
    "PortionLiteral",
    "Posting",
    "Program",
    "Send",
    "Source",
    "Span",
    "VarDecl",
    "VarType",
    "Variable",
]

VarType: TypeAlias = Literal["monetary", "account", "portion", "number"]


@dataclass(frozen=True, slots=True)
class Span:
    """A 1-based line and column in the program text."""

    line: int
    column: int

    def __str__(self) -> str:
        return f"line {self.line}, column {self.column}"


@dataclass(frozen=True, slots=True)
class Variable:
    """A use of a declared variable, `$name` (stored without the `$`)."""

    name: str
    span: Span = field(compare=False)


@dataclass(frozen=True, slots=True)
class AccountLiteral:
    """`@a:b:c`, stored as `a:b:c`; `world` is the unbounded external account."""

    name: str
    span: Span = field(compare=False)


@dataclass(frozen=True, slots=True)
class MonetaryLiteral:
    """`[ASSET amount]`; the amount is minor units or a variable.

    A `number` variable gives the amount (Numscript's own form). A `monetary`
    variable is accepted too, and its asset must equal `asset`: that is
    pactwright's own extension, which a Formance Ledger rejects as a type
    error (see docs/numscript.md).
    """

    asset: str
    amount: int | Variable
    span: Span = field(compare=False)


@dataclass(frozen=True, slots=True)
class PortionLiteral:
    """`10%`, `2.5%` or `1/3`, kept as an exact fraction."""

    value: Fraction
    text: str = field(compare=False)
    span: Span = field(compare=False)


@dataclass(frozen=True, slots=True)
class Overdraft:
    """`allowing unbounded overdraft` (bound None) or `... up to MONETARY`."""

    bound: MonetaryExpr | None


@dataclass(frozen=True, slots=True)
class Source:
    """A single account to take the money from, with its overdraft rule."""

    account: AccountExpr
    overdraft: Overdraft | None
    span: Span = field(compare=False)


@dataclass(frozen=True, slots=True)
class AllotmentClause:
    """`PORTION to DEST`, or `remaining to DEST` when portion is None."""

    portion: PortionExpr | None
    destination: Destination


@dataclass(frozen=True, slots=True)
class Allotment:
    """`{ 10% to @a  remaining to @b }`: a split by portions."""

    clauses: tuple[AllotmentClause, ...]
    span: Span = field(compare=False)


@dataclass(frozen=True, slots=True)
class CappedClause:
    """`max MONETARY to DEST` inside an in-order destination."""

    cap: MonetaryExpr
    destination: Destination


@dataclass(frozen=True, slots=True)
class InOrder:
    """`{ max [EUR/2 500] to @a  remaining to @b }`: capped, in order."""

    clauses: tuple[CappedClause, ...]
    remaining: Destination
    span: Span = field(compare=False)


@dataclass(frozen=True, slots=True)
class Send:
    """One `send` statement."""

    amount: MonetaryExpr
    source: Source
    destination: Destination
    span: Span = field(compare=False)


@dataclass(frozen=True, slots=True)
class VarDecl:
    """One line of the `vars { ... }` block."""

    name: str
    type: VarType
    span: Span = field(compare=False)


@dataclass(frozen=True, slots=True)
class Program:
    """A parsed program: its variable declarations and its sends, in order."""

    variables: tuple[VarDecl, ...]
    statements: tuple[Send, ...]


@dataclass(frozen=True, slots=True)
class Posting:
    """One movement of `amount` minor units of `asset` between two accounts."""

    source: str
    destination: str
    amount: int
    asset: str


AccountExpr: TypeAlias = AccountLiteral | Variable
MonetaryExpr: TypeAlias = MonetaryLiteral | Variable
PortionExpr: TypeAlias = PortionLiteral | Variable
Destination: TypeAlias = AccountLiteral | Variable | Allotment | InOrder
