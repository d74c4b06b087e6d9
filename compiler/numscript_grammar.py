"""Validate emitted ledger programs with an independent lark grammar.

Every `.num` file the compiler writes is checked here before it enters a
bundle. The embedded ledger parses the same files with its own hand-written
parser (runtime/numscript/_parser.py); the two are deliberately separate
implementations of one subset, and the tests hold them to the same
accept/reject answer on a shared corpus and on generated programs, so a
program the compiler accepts is one the runtime can run.

Beyond syntax, the same static checks as the runtime's parser run on the
tree: variables declared once, declared before use and used at a position
of their type; literal allotments that can make 100%; one asset per send.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable
from fractions import Fraction
from importlib import resources
from typing import Final, NoReturn

from lark import Lark, Token, Tree, UnexpectedCharacters, UnexpectedInput, UnexpectedToken
from lark.lexer import PatternStr

from pactwright.errors import CompileError

__all__ = ["validate_numscript"]

_NAMES: Final = {
    "ACCOUNT": "an account (`@name`)",
    "VARIABLE": "a variable (`$name`)",
    "ASSET": "an asset (`EUR/2`)",
    "NUMBER": "a number",
    "PERCENT": "a percent (`10%`)",
    "VAR_TYPE": "a variable type",
    "$END": "end of input",
}

# What an error message shows as found: the whole word, or one character.
_WORD: Final = re.compile(r"[A-Za-z0-9_]+|.", re.DOTALL)

# The types a variable may have, by the rule it appears in.
_ROLES: Final[dict[str, tuple[str, ...]]] = {
    "monetary_variable": ("monetary",),
    "monetary_literal": ("number", "monetary"),
    "account": ("account",),
    "portion_variable": ("portion",),
}


@functools.cache
def _parser() -> Lark:
    grammar = resources.files("pactwright.compiler.grammar").joinpath("numscript.lark")
    return Lark(grammar.read_text("utf-8"), parser="lalr", propagate_positions=True)


def validate_numscript(source: str) -> None:
    """Raise `CompileError` PW210 unless `source` is a program the ledger accepts.

    The message gives the line, the column and what was expected there.
    """
    try:
        tree = _parser().parse(source)
    except UnexpectedInput as exc:
        _raise_syntax(exc, source)
    for number in tree.scan_values(lambda v: isinstance(v, Token) and v.type == "NUMBER"):
        _int(number)
    _check_variables(tree)
    for send in tree.find_data("send"):
        _check_assets(send)
    for allotment in tree.find_data("allotment"):
        _check_allotment(allotment)


def _at(token: Token) -> tuple[int, int]:
    return token.line or 0, token.column or 0


def _fail(line: int, column: int, message: str, **context: str) -> NoReturn:
    raise CompileError(
        f"invalid ledger program at line {line}, column {column}: {message}",
        code="PW210",
        **context,
    )


def _raise_syntax(exc: UnexpectedInput, source: str) -> NoReturn:
    # The interactive parser replays LALR's pending reductions, so it names
    # what can really come next rather than every lookahead of the state.
    interactive = getattr(exc, "interactive_parser", None)
    expected: Iterable[str] = interactive.accepts() if interactive is not None else ()
    line, column = exc.line, exc.column
    if isinstance(exc, UnexpectedCharacters):
        expected = expected or exc.allowed or ()
        word = _WORD.match(source, exc.pos_in_stream or 0)
        found = f"`{word.group() if word else ''}`"
    elif isinstance(exc, UnexpectedToken) and exc.token.type != "$END":
        expected = expected or exc.expected
        found = f"`{exc.token}`"
    else:
        expected = expected or getattr(exc, "expected", ())
        found = "end of input"
        line = source.count("\n") + 1
        column = len(source) - (source.rfind("\n") + 1) + 1
    wanted = sorted({_display(name) for name in expected})
    text = wanted[0] if len(wanted) == 1 else "one of " + ", ".join(wanted)
    _fail(line, column, f"expected {text}, found {found}", expected=text, found=found)


def _display(name: str) -> str:
    if name in _NAMES:
        return _NAMES[name]
    if name.startswith("_"):
        return f"`{name[1:].lower()}`"
    try:
        pattern = _parser().get_terminal(name).pattern
    except KeyError:
        return name
    return f"`{pattern.value}`" if isinstance(pattern, PatternStr) else name


def _int(token: Token) -> int:
    try:
        return int(token)
    except ValueError:  # beyond Python's digit limit for int(), as in the runtime
        _fail(*_at(token), "number has too many digits")


def _tokens(tree: Tree[Token], kind: str) -> list[Token]:
    return [c for c in tree.children if isinstance(c, Token) and c.type == kind]


def _check_variables(tree: Tree[Token]) -> None:
    declared: dict[str, str] = {}
    for decl in tree.find_data("var_decl"):
        (var_type,) = _tokens(decl, "VAR_TYPE")
        (variable,) = _tokens(decl, "VARIABLE")
        if variable in declared:
            _fail(*_at(variable), f"variable `{variable}` is declared twice")
        declared[str(variable)] = str(var_type)
    for subtree in tree.iter_subtrees():
        allowed = _ROLES.get(str(subtree.data))
        if allowed is None:
            continue
        for variable in _tokens(subtree, "VARIABLE"):
            found = declared.get(str(variable))
            where = _at(variable)
            if found is None:
                _fail(*where, f"variable `{variable}` is not declared")
            if found not in allowed:
                expected = " or ".join(f"`{t}`" for t in allowed)
                _fail(*where, f"variable `{variable}` is a `{found}`, expected {expected}")


def _check_assets(send: Tree[Token]) -> None:
    amount = send.children[0]
    if not isinstance(amount, Tree) or amount.data != "monetary_literal":
        return
    (asset,) = _tokens(amount, "ASSET")
    for literal in send.find_data("monetary_literal"):
        (other,) = _tokens(literal, "ASSET")
        if other != asset:
            _fail(
                *_at(other),
                f"asset mismatch: the send moves `{asset}` but this amount is in `{other}`",
            )


def _check_allotment(allotment: Tree[Token]) -> None:
    total = Fraction(0)
    has_variable = has_remaining = False
    for clause in allotment.children:
        if not isinstance(clause, Tree):
            continue
        if clause.data == "remaining":
            has_remaining = True
            continue
        portion = next(c for c in clause.children if isinstance(c, Tree))
        if portion.data == "portion_variable":
            has_variable = True
        elif portion.data == "percent":
            (token,) = _tokens(portion, "PERCENT")
            whole, _, decimals = token[:-1].partition(".")
            digits = _int(Token("NUMBER", whole + decimals, line=token.line, column=token.column))
            total += Fraction(digits, 100 * 10 ** len(decimals))
        else:
            numerator, denominator = _tokens(portion, "NUMBER")
            if _int(denominator) == 0:
                _fail(*_at(numerator), f"portion `{numerator}/0` divides by zero")
            total += Fraction(_int(numerator), _int(denominator))
    if total > 1 or (not has_variable and not has_remaining and total != 1):
        why = "over 100%" if total > 1 else "not 100% and there is no `remaining`"
        _fail(allotment.meta.line, allotment.meta.column, f"portions sum to `{total}`, {why}")
