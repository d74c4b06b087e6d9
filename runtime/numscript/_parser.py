"""Recursive-descent parser and static checks for the Numscript subset.

Grammar (whitespace and comments are free; `//` and `/* */`):

    program     := ("vars" "{" (TYPE VARIABLE)* "}")? send*
    send        := "send" monetary "(" "source" "=" source
                                       "destination" "=" destination ")"
    monetary    := "[" ASSET (NUMBER | VARIABLE) "]" | VARIABLE
    source      := account ("allowing" "unbounded" "overdraft"
                           | "allowing" "overdraft" "up" "to" monetary)?
    destination := account | "{" inorder "}" | "{" allotment "}"
    inorder     := ("max" monetary "to" destination)* "remaining" "to" destination
    allotment   := (portion "to" destination)+ ("remaining" "to" destination)?
    portion     := PERCENT | NUMBER "/" NUMBER | VARIABLE
    account     := ACCOUNT | VARIABLE

Valid Numscript outside this subset is refused with PW752 (naming the
construct) rather than half-understood. After parsing, static checks refuse
what no variable values could make valid: undeclared, duplicate or
mistyped variables (PW753), literal portions that cannot sum to 100% (PW756)
and literal assets that differ within one send (PW755). The compiler's lark
validator applies the same checks so the two agree on every program.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from fractions import Fraction
from typing import Final

from pactwright.errors import LedgerError

from ._lexer import Token, syntax_error, tokenize
from .program import (
    AccountExpr,
    AccountLiteral,
    Allotment,
    AllotmentClause,
    CappedClause,
    Destination,
    InOrder,
    MonetaryExpr,
    MonetaryLiteral,
    Overdraft,
    PortionExpr,
    PortionLiteral,
    Program,
    Send,
    Source,
    Span,
    VarDecl,
    Variable,
    VarType,
)

_VAR_TYPES: Final[dict[str, VarType]] = {
    "monetary": "monetary",
    "account": "account",
    "portion": "portion",
    "number": "number",
}
_UNSUPPORTED_TYPES: Final = frozenset({"asset", "string"})


@functools.lru_cache(maxsize=256)
def parse_program(source: str) -> Program:
    """Parse and statically check one program.

    Raises `LedgerError`: PW751 for a syntax error (with line and column),
    PW752 for valid Numscript outside the supported subset, PW753/PW755/PW756
    for variable, asset and allotment errors that hold whatever the inputs.

    A program is a function of its text and immutable (frozen dataclasses
    and tuples), so each text is parsed once per process: a command, the
    worker's check before delivery and the ledger's apply all parse the same
    few programs, and parsing was a millisecond of each delivery. Text that
    is refused is not remembered (`lru_cache` keeps results, not
    exceptions); it is refused again, the same way.
    """
    program = _Parser(tokenize(source)).program()
    _check(program)
    return program


class _Parser:
    def __init__(self, tokens: list[Token]) -> None:
        self._tokens = tokens
        self._index = 0

    # -- token helpers -----------------------------------------------------
    def _peek(self, offset: int = 0) -> Token:
        return self._tokens[min(self._index + offset, len(self._tokens) - 1)]

    def _next(self) -> Token:
        token = self._peek()
        self._index += 1
        return token

    def _at(self, kind: str, text: str | None = None, offset: int = 0) -> bool:
        token = self._peek(offset)
        return token.kind == kind and (text is None or token.text == text)

    def _error(self, expected: str) -> LedgerError:
        found = self._peek()
        return LedgerError(
            f"syntax error at line {found.line}, column {found.column}: expected {expected}, found {found.describe()}",
            code="PW751",
            expected=expected,
            found=found.describe(),
        )

    def _unsupported(self, what: str) -> LedgerError:
        at = self._peek()
        return syntax_error(at.line, at.column, f"{what} is not supported", code="PW752")

    def _expect(self, kind: str, text: str | None = None, expected: str | None = None) -> Token:
        if not self._at(kind, text):
            raise self._error(expected or f"`{text}`")
        return self._next()

    def _word(self, text: str) -> Token:
        return self._expect("WORD", text)

    def _punct(self, text: str) -> Token:
        return self._expect("PUNCT", text)

    @staticmethod
    def _span(token: Token) -> Span:
        return Span(token.line, token.column)

    # -- program -----------------------------------------------------------
    def program(self) -> Program:
        variables: list[VarDecl] = []
        if self._at("WORD", "vars"):
            self._next()
            self._punct("{")
            while not self._at("PUNCT", "}"):
                variables.append(self._var_decl())
            self._next()
        statements: list[Send] = []
        while not self._at("EOF"):
            statements.append(self._statement())
        return Program(tuple(variables), tuple(statements))

    def _var_decl(self) -> VarDecl:
        token = self._peek()
        if token.kind != "WORD":
            raise self._error("a variable type (`monetary`, `account`, `portion`, `number`) or `}`")
        if token.text in _UNSUPPORTED_TYPES:
            raise self._unsupported(f"a variable of type `{token.text}`")
        if token.text not in _VAR_TYPES:
            raise self._error("a variable type (`monetary`, `account`, `portion`, `number`)")
        self._next()
        name = self._expect("VARIABLE", expected="a variable name (`$name`)")
        if self._at("PUNCT", "="):
            raise self._unsupported("a variable origin (`= meta(...)`, `= balance(...)`)")
        return VarDecl(name.text[1:], _VAR_TYPES[token.text], self._span(token))

    def _statement(self) -> Send:
        token = self._peek()
        if token.kind == "WORD" and self._at("PUNCT", "(", offset=1):
            raise self._unsupported(f"the function call `{token.text}(...)`")
        if self._at("WORD", "save"):
            raise self._unsupported("the `save` statement")
        send = self._word("send")
        amount = self._monetary(sending=True)
        self._punct("(")
        self._word("source")
        self._punct("=")
        source = self._source()
        self._word("destination")
        self._punct("=")
        destination = self._destination()
        self._punct(")")
        return Send(amount, source, destination, self._span(send))

    # -- values ------------------------------------------------------------
    def _monetary(self, *, sending: bool = False) -> MonetaryExpr:
        if self._at("VARIABLE"):
            return self._variable()
        if not self._at("PUNCT", "["):
            raise self._error("a monetary (`[ASSET amount]` or `$var`)")
        start = self._next()
        if self._at("VARIABLE"):
            raise self._unsupported("an asset variable")
        asset = self._expect("ASSET", expected="an asset (`EUR/2`)")
        amount: int | Variable
        if self._at("PUNCT", "*"):
            raise self._unsupported("sending all (`*`)" if sending else "`*` outside a send")
        if self._at("VARIABLE"):
            amount = self._variable()
        else:
            amount = self._integer(self._expect("NUMBER", expected="an amount or a variable"))
        self._punct("]")
        return MonetaryLiteral(asset.text, amount, self._span(start))

    def _integer(self, token: Token) -> int:
        try:
            return int(token.text)
        except ValueError:  # beyond Python's digit limit for int()
            raise syntax_error(token.line, token.column, "number has too many digits") from None

    def _variable(self) -> Variable:
        token = self._expect("VARIABLE", expected="a variable")
        return Variable(token.text[1:], self._span(token))

    def _account(self) -> AccountExpr:
        if self._at("VARIABLE"):
            return self._variable()
        token = self._expect("ACCOUNT", expected="an account (`@name` or `$var`)")
        return AccountLiteral(token.text[1:], self._span(token))

    def _portion(self) -> PortionExpr:
        token = self._peek()
        if token.kind == "VARIABLE":
            return self._variable()
        if token.kind == "PERCENT":
            self._next()
            whole, _, decimals = token.text[:-1].partition(".")
            digits = self._integer(Token("NUMBER", whole + decimals, token.line, token.column))
            value = Fraction(digits, 100 * 10 ** len(decimals))
            return PortionLiteral(value, token.text, self._span(token))
        if token.kind == "NUMBER" and self._at("PUNCT", "/", offset=1):
            self._next()
            self._next()
            denominator = self._expect("NUMBER", expected="a denominator")
            num, den = self._integer(token), self._integer(denominator)
            if den == 0:
                raise LedgerError(
                    f"invalid allotment at line {token.line}, column {token.column}: "
                    f"portion `{num}/{den}` divides by zero",
                    code="PW756",
                )
            return PortionLiteral(Fraction(num, den), f"{num}/{den}", self._span(token))
        raise self._error("a portion (`10%`, `1/3` or `$var`) or `remaining`")

    # -- source and destination --------------------------------------------
    def _source(self) -> Source:
        start = self._peek()
        if self._at("PUNCT", "{"):
            raise self._unsupported("a source block (in-order or allotment sources)")
        if self._at("WORD", "max"):
            raise self._unsupported("a capped source (`max ... from`)")
        if self._at("WORD", "oneof"):
            raise self._unsupported("`oneof`")
        account = self._account()
        overdraft: Overdraft | None = None
        if self._at("WORD", "allowing"):
            self._next()
            if self._at("WORD", "unbounded"):
                self._next()
                self._word("overdraft")
                overdraft = Overdraft(None)
            else:
                self._expect("WORD", "overdraft", expected="`unbounded` or `overdraft`")
                self._word("up")
                self._word("to")
                overdraft = Overdraft(self._monetary())
        self._refuse_suffix()
        return Source(account, overdraft, self._span(start))

    def _refuse_suffix(self) -> None:
        if self._at("WORD", "if"):
            raise self._unsupported("a conditional (`if ... else`)")
        if self._at("PUNCT", "\\"):
            raise self._unsupported("an asset color restriction (`\\`)")

    def _destination(self) -> Destination:
        if self._at("WORD", "oneof"):
            raise self._unsupported("`oneof`")
        if not self._at("PUNCT", "{"):
            account = self._account()
            self._refuse_suffix()
            return account
        start = self._next()
        if self._at("WORD", "max") or self._at("WORD", "remaining"):
            block: Destination = self._in_order(start)
        else:
            block = self._allotment(start)
        self._refuse_suffix()
        return block

    def _to(self) -> None:
        if self._at("WORD", "kept"):
            raise self._unsupported("`kept`")
        self._word("to")

    def _in_order(self, start: Token) -> InOrder:
        clauses: list[CappedClause] = []
        while self._at("WORD", "max"):
            self._next()
            cap = self._monetary()
            self._to()
            clauses.append(CappedClause(cap, self._destination()))
        self._expect("WORD", "remaining", expected="`max` or `remaining`")
        self._to()
        remaining = self._destination()
        self._expect("PUNCT", "}", expected="`}` (`remaining` must be the last clause)")
        return InOrder(tuple(clauses), remaining, self._span(start))

    def _allotment(self, start: Token) -> Allotment:
        clauses: list[AllotmentClause] = []
        while True:
            if self._at("WORD", "remaining"):
                self._next()
                self._to()
                clauses.append(AllotmentClause(None, self._destination()))
                self._expect("PUNCT", "}", expected="`}` (`remaining` must be the last clause)")
                break
            if clauses and self._at("PUNCT", "}"):
                self._next()
                break
            portion = self._portion()
            self._to()
            clauses.append(AllotmentClause(portion, self._destination()))
        return Allotment(tuple(clauses), self._span(start))


# -- static checks ----------------------------------------------------------


def _check(program: Program) -> None:
    declared: dict[str, VarType] = {}
    for decl in program.variables:
        if decl.name in declared:
            raise LedgerError(f"variable `${decl.name}` is declared twice (again at {decl.span})", code="PW753")
        declared[decl.name] = decl.type
    for send in program.statements:
        for variable, allowed in _variable_uses(send):
            found = declared.get(variable.name)
            if found is None:
                raise LedgerError(
                    f"variable `${variable.name}` is used at {variable.span} but not declared",
                    code="PW753",
                )
            if found not in allowed:
                raise LedgerError(
                    f"variable `${variable.name}` at {variable.span} is a `{found}`, "
                    f"expected {' or '.join(f'`{t}`' for t in allowed)}",
                    code="PW753",
                    expected=" or ".join(allowed),
                    found=found,
                )
        _check_assets(send)
        for block in _blocks(send.destination):
            if isinstance(block, Allotment):
                _check_literal_allotment(block)


def _variable_uses(send: Send) -> Iterator[tuple[Variable, tuple[VarType, ...]]]:
    """Every variable in a send, with the types its position accepts."""
    yield from _monetary_uses(send.amount)
    if isinstance(send.source.account, Variable):
        yield send.source.account, ("account",)
    if send.source.overdraft is not None and send.source.overdraft.bound is not None:
        yield from _monetary_uses(send.source.overdraft.bound)
    for block in _blocks(send.destination):
        if isinstance(block, Variable):
            yield block, ("account",)
        elif isinstance(block, Allotment):
            for clause in block.clauses:
                if isinstance(clause.portion, Variable):
                    yield clause.portion, ("portion",)
        elif isinstance(block, InOrder):
            for capped in block.clauses:
                yield from _monetary_uses(capped.cap)


def _monetary_uses(expr: MonetaryExpr) -> Iterator[tuple[Variable, tuple[VarType, ...]]]:
    if isinstance(expr, Variable):
        yield expr, ("monetary",)
    elif isinstance(expr.amount, Variable):
        yield expr.amount, ("number", "monetary")


def _blocks(destination: Destination) -> Iterator[Destination]:
    """The destination and every destination nested in it, outermost first."""
    yield destination
    if isinstance(destination, Allotment):
        for clause in destination.clauses:
            yield from _blocks(clause.destination)
    elif isinstance(destination, InOrder):
        for capped in destination.clauses:
            yield from _blocks(capped.destination)
        yield from _blocks(destination.remaining)


def _check_assets(send: Send) -> None:
    if not isinstance(send.amount, MonetaryLiteral):
        return
    literals: list[MonetaryLiteral] = []
    bound = send.source.overdraft.bound if send.source.overdraft else None
    if isinstance(bound, MonetaryLiteral):
        literals.append(bound)
    for block in _blocks(send.destination):
        if isinstance(block, InOrder):
            literals.extend(c.cap for c in block.clauses if isinstance(c.cap, MonetaryLiteral))
    for literal in literals:
        if literal.asset != send.amount.asset:
            raise LedgerError(
                f"asset mismatch at {literal.span}: the send moves `{send.amount.asset}` "
                f"but this amount is in `{literal.asset}`",
                code="PW755",
                expected=send.amount.asset,
                found=literal.asset,
            )


def _check_literal_allotment(block: Allotment) -> None:
    literal = sum(
        (c.portion.value for c in block.clauses if isinstance(c.portion, PortionLiteral)),
        Fraction(0),
    )
    has_variable = any(isinstance(c.portion, Variable) for c in block.clauses)
    has_remaining = any(c.portion is None for c in block.clauses)
    if literal > 1 or (not has_variable and not has_remaining and literal != 1):
        raise LedgerError(
            f"invalid allotment at {block.span}: portions sum to `{literal}`, "
            + ("over 100%" if literal > 1 else "not 100% and there is no `remaining`"),
            code="PW756",
        )
