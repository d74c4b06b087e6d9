"""Tokenizer for the Numscript subset, written by hand.

The runtime must not need lark on a deploy host, so the runtime's parser is
hand-written; the compiler checks every emitted program with an independent
lark grammar (compiler/grammar/numscript.lark) and the tests hold the two to
the same answers. The token shapes follow Formance's Numscript lexer:
identifiers `[a-z][a-z_]*`, variables `$[a-z_][a-z0-9_]*`, assets
`[A-Z][A-Z0-9]*(/[0-9]+)?`, accounts `@seg(:seg)*` with segments
`[a-zA-Z0-9_-]+`, percents `12.5%`. Words are lexed with maximal munch, so a
keyword glued to more letters (`remainingto`) is one unknown word.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal, TypeAlias

from pactwright.errors import LedgerError

TokenKind: TypeAlias = Literal["ACCOUNT", "VARIABLE", "ASSET", "NUMBER", "PERCENT", "WORD", "STRING", "PUNCT", "EOF"]

_PUNCT: Final = frozenset("()[]{}=/*,+-!\\<>%&|")
_SEGMENT: Final = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-")
_LOWER: Final = frozenset("abcdefghijklmnopqrstuvwxyz")
_UPPER: Final = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZ")
_DIGITS: Final = frozenset("0123456789")
_SPACE: Final = frozenset(" \t\r\n")


@dataclass(frozen=True, slots=True)
class Token:
    """One token with its 1-based position; `text` is exactly as written."""

    kind: TokenKind
    text: str
    line: int
    column: int

    def describe(self) -> str:
        """How an error message names this token."""
        return "end of input" if self.kind == "EOF" else f"`{self.text}`"


def syntax_error(line: int, column: int, message: str, *, code: str = "PW751") -> LedgerError:
    """The runtime's syntax (PW751) or unsupported-construct (PW752) error, to raise."""
    kind = "syntax error" if code == "PW751" else "unsupported construct"
    return LedgerError(f"{kind} at line {line}, column {column}: {message}", code=code)


class _Scanner:
    """Walks the text once, tracking line and column."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0
        self.line = 1
        self.column = 1

    def peek(self, offset: int = 0) -> str:
        index = self.pos + offset
        return self.text[index] if index < len(self.text) else ""

    def advance(self, count: int = 1) -> None:
        for _ in range(count):
            if self.text[self.pos] == "\n":
                self.line += 1
                self.column = 1
            else:
                self.column += 1
            self.pos += 1

    def take_while(self, allowed: frozenset[str]) -> str:
        start = self.pos
        while self.pos < len(self.text) and self.text[self.pos] in allowed:
            self.advance()
        return self.text[start : self.pos]


def tokenize(text: str) -> list[Token]:
    """Split program text into tokens, dropping whitespace and comments.

    Raises `LedgerError` PW751 on a character that starts no token and PW752
    on valid Numscript lexemes the subset refuses (nested block comments,
    digit separators, account interpolation).
    """
    scan = _Scanner(text)
    tokens: list[Token] = []
    while True:
        _skip_blanks(scan)
        line, column = scan.line, scan.column
        char = scan.peek()
        if not char:
            tokens.append(Token("EOF", "", line, column))
            return tokens
        start = scan.pos
        kind = _lex_one(scan, char)
        tokens.append(Token(kind, text[start : scan.pos], line, column))


def _skip_blanks(scan: _Scanner) -> None:
    while True:
        char = scan.peek()
        if char in _SPACE:
            scan.advance()
        elif char == "/" and scan.peek(1) == "/":
            while scan.peek() not in ("", "\n"):
                scan.advance()
        elif char == "/" and scan.peek(1) == "*":
            _skip_block_comment(scan)
        else:
            return


def _skip_block_comment(scan: _Scanner) -> None:
    # Numscript nests block comments; the subset refuses nesting rather than
    # guess, so `/*` inside a comment is an error and the first `*/` ends it.
    line, column = scan.line, scan.column
    scan.advance(2)
    while True:
        if not scan.peek():
            raise syntax_error(line, column, "unterminated block comment")
        if scan.peek() == "*" and scan.peek(1) == "/":
            scan.advance(2)
            return
        if scan.peek() == "/" and scan.peek(1) == "*":
            raise syntax_error(scan.line, scan.column, "nested block comments are not supported", code="PW752")
        scan.advance()


def _lex_one(scan: _Scanner, char: str) -> TokenKind:
    line, column = scan.line, scan.column
    if char == "@":
        return _lex_account(scan)
    if char == "$":
        return _lex_variable(scan)
    if char in _DIGITS:
        return _lex_number(scan)
    if char in _LOWER:
        scan.take_while(_LOWER | {"_"})
        return "WORD"
    if char in _UPPER:
        return _lex_asset(scan)
    if char == '"':
        return _lex_string(scan)
    if char == "#" and scan.peek(1) == "!":
        raise syntax_error(line, column, "feature directives (`#!`) are not supported", code="PW752")
    if char not in _PUNCT:
        raise syntax_error(line, column, f"unexpected character `{char}`")
    scan.advance()
    return "PUNCT"


def _lex_variable(scan: _Scanner) -> TokenKind:
    line, column = scan.line, scan.column
    scan.advance()
    if scan.peek() not in _LOWER and scan.peek() != "_":
        raise syntax_error(line, column, "a variable name is `$` then `[a-z_][a-z0-9_]*`")
    scan.take_while(_LOWER | _DIGITS | {"_"})
    return "VARIABLE"


def _lex_asset(scan: _Scanner) -> TokenKind:
    scan.take_while(_UPPER | _DIGITS)
    if scan.peek() == "/" and scan.peek(1) in _DIGITS:
        scan.advance()
        scan.take_while(_DIGITS)
    return "ASSET"


def _lex_account(scan: _Scanner) -> TokenKind:
    line, column = scan.line, scan.column
    scan.advance()
    if not scan.take_while(_SEGMENT):
        if scan.peek() == "$":
            raise syntax_error(line, column, "account interpolation is not supported", code="PW752")
        raise syntax_error(line, column, "an account name is `@` then segments `[a-zA-Z0-9_-]+`")
    while scan.peek() == ":":
        if scan.peek(1) == "$":
            raise syntax_error(scan.line, scan.column, "account interpolation is not supported", code="PW752")
        if not scan.peek(1) or scan.peek(1) not in _SEGMENT:
            raise syntax_error(scan.line, scan.column, "an account segment cannot be empty")
        scan.advance()
        scan.take_while(_SEGMENT)
    return "ACCOUNT"


def _lex_number(scan: _Scanner) -> TokenKind:
    scan.take_while(_DIGITS)
    if scan.peek() == "_":
        raise syntax_error(scan.line, scan.column, "digit separators in numbers are not supported", code="PW752")
    if scan.peek() == "." and scan.peek(1) in _DIGITS:
        scan.advance()
        scan.take_while(_DIGITS)
        if scan.peek() != "%":
            raise syntax_error(scan.line, scan.column, "a decimal number must be a percent (`2.5%`)")
    if scan.peek() == "%":
        scan.advance()
        return "PERCENT"
    return "NUMBER"


def _lex_string(scan: _Scanner) -> TokenKind:
    line, column = scan.line, scan.column
    scan.advance()
    while scan.peek() != '"':
        if scan.peek() in ("", "\n", "\r"):
            raise syntax_error(line, column, "unterminated string")
        scan.advance(2 if scan.peek() == "\\" and scan.peek(1) == '"' else 1)
    scan.advance()
    return "STRING"
