"""Canonical layout for `.pact` files: the syntax tree printed back, comments kept.

Reviewers diff policies; a diff should show changed meaning, not changed
habits. So `format_policy` prints one layout for every spelling of a policy,
and it is safe to run anywhere because it keeps three promises, all tested:

- idempotent: `format_policy(format_policy(x)) == format_policy(x)`;
- meaning-preserving: the formatted text has the same canonical candidate
  (same bytes, same hash) as the original, so an approval stays valid;
- lossless for people: every comment survives, next to the line it annotated.

It prints from the syntax tree, never by editing text, and refuses (raises
`ParseFailure`) a policy that does not parse rather than guess at it.
Declarations and fields stay in the order written; only spelling and layout
change. A literal is respelled only when its meaning cannot change: a literal
the checks would reject (`12.505` at scale 2) is printed exactly as written,
so formatting never hides an error.
"""

from __future__ import annotations

import bisect
import functools
import threading
from dataclasses import dataclass, field
from importlib import resources

from lark import Lark, Token

from pactwright.compiler import _reserved, ast
from pactwright.compiler.literals import LiteralProblem, classify, money_value
from pactwright.compiler.parser import ParseFailure, parse_policy
from pactwright.diagnostics import Diagnostic, Severity, Span
from pactwright.money import MAX_SCALE, format_duration, format_money

__all__ = ["format_policy"]

INDENT = "  "
WIDTH = 100  # a longer guard or invariant wraps before an operator
Pos = tuple[int, int]  # (line, column), both 1-based, as in `Span`

# Binding strength, loosest first, as in the grammar's expression rules.
_IMPLIES, _OR, _AND, _NOT, _COMPARE, _SUM, _PRODUCT, _NEGATE, _ATOM = range(1, 10)
_BINARY: dict[str, int] = {
    "implies": _IMPLIES,
    "or": _OR,
    "and": _AND,
    **dict.fromkeys(("==", "!=", "<", "<=", ">", ">="), _COMPARE),
    "+": _SUM,
    "-": _SUM,
    "*": _PRODUCT,
    "/": _PRODUCT,
}

# Declarations of one group sit together; a new group starts after a blank
# line. Block declarations always stand alone (the reference policies' look).
_GROUPS: dict[str, str] = {"currency": "setup", "default": "setup"}
_BLOCKS = frozenset({"budget", "effect", "transition"})


def format_policy(text: str) -> str:
    """The canonical text of a policy; raises `ParseFailure` if it does not parse."""
    # Line ends as the parser reads them (a lone CR ends a line too), so that
    # comment positions and syntax-tree spans count lines the same way.
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    policy = parse_policy(text)
    try:
        lines = _Printer(_currency_scale(policy)).policy(policy)
    except RecursionError:
        raise ParseFailure(
            [
                Diagnostic(
                    code="PW113",
                    severity=Severity.ERROR,
                    message="expression nested too deeply",
                    span=Span(line=1, column=1, end_line=1, end_column=1),
                    hint="split the expression; nesting is limited to a few hundred levels",
                )
            ]
        ) from None
    tail = _attach_comments(lines, _comments(text), text)
    return _render(lines, tail)


# Literals ----------------------------------------------------------------------


def _currency_scale(policy: ast.PolicyAst) -> int | None:
    """The scale money is written at, or None when the currency does not say.

    The first `currency` counts, as in the symbol tables. Without a valid one
    the policy has blockers anyway, and money literals are left as written
    rather than padded to a scale that is only a guess.
    """
    for decl in policy.decls:
        if isinstance(decl, ast.CurrencyDecl):
            text = decl.scale.text
            return int(text) if _scale_ok(text) else None
    return None


@dataclass(frozen=True)
class _Literals:
    """Canonical spellings; any literal the checks would reject stays verbatim."""

    scale: int | None

    def number(self, text: str) -> str:
        """A literal whose kind follows from its spelling (expressions, counts)."""
        found = classify(text, MAX_SCALE if self.scale is None else self.scale)
        if isinstance(found, LiteralProblem):
            return text
        if found.kind == "money":
            return text if self.scale is None else format_money(int(found.value), self.scale)
        if found.kind == "percent":
            return f"{found.value}%"
        if found.kind == "duration":
            return format_duration(int(found.value))
        return found.value

    def money(self, text: str) -> str:
        """A literal in a money position, where an integer means whole units."""
        if self.scale is not None:
            amount = money_value(text, self.scale)
            if isinstance(amount, int):
                return format_money(amount, self.scale)
        return self.number(text)

    def scale_text(self, text: str) -> str:
        return str(int(text)) if _scale_ok(text) else text


def _scale_ok(text: str) -> bool:
    """A scale the checks accept (`compiler/checks/values.py`); never `int()` of a huge digit run."""
    return text.isdigit() and len(text) <= 3 and int(text) <= MAX_SCALE


def _quote(value: str) -> str:
    escaped = value.replace("\\", "\\\\").replace('"', '\\"')
    return f'"{escaped}"'


# Printed lines -----------------------------------------------------------------


@dataclass
class _Line:
    """One printed line and the source region it came from (for comments)."""

    depth: int
    text: str
    start: Pos  # where its first token starts in the source
    end: Pos  # where its last own token ends (a block's header ends before `{`)
    group: str | None = None  # set on a declaration's first line
    block: bool = False
    closes: bool = False  # a `}`: comments leading it sit inside the block
    leading: list[str] = field(default_factory=list)
    trailing: list[str] = field(default_factory=list)


def _start(span: Span) -> Pos:
    return (span.line, span.column)


def _end(span: Span) -> Pos:
    return (span.end_line, span.end_column)


def _brace(span: Span) -> Pos:
    """Where the closing `}` that ends `span` starts."""
    return (span.end_line, span.end_column - 1)


class _Printer:
    """Turns the syntax tree into `_Line`s, in source order."""

    def __init__(self, scale: int | None) -> None:
        self.lit = _Literals(scale)
        self.lines: list[_Line] = []

    def _emit(self, depth: int, text: str, span: Span) -> _Line:
        line = _Line(depth, text, _start(span), _end(span))
        self.lines.append(line)
        return line

    def _close(self, depth: int, span: Span) -> None:
        self.lines.append(_Line(depth, "}", _brace(span), _brace(span), closes=True))

    def policy(self, policy: ast.PolicyAst) -> list[_Line]:
        head = policy.header
        self._emit(0, f"pact {_quote(head.pact_id.value)} version {_quote(head.version.value)}", head.span)
        self.lines[-1].group = "header"
        for decl in policy.decls:
            first = len(self.lines)
            self._decl(decl)
            self.lines[first].group = _GROUPS.get(decl.kind, decl.kind)
            self.lines[first].block = decl.kind in _BLOCKS
        return self.lines

    def _decl(self, decl: ast.Decl) -> None:
        if isinstance(decl, ast.CurrencyDecl):
            self._emit(0, f"currency {decl.code.name} scale {self.lit.scale_text(decl.scale.text)}", decl.span)
        elif isinstance(decl, ast.DefaultDecl):
            self._emit(0, "default deny", decl.span)
        elif isinstance(decl, ast.RoleDecl):
            word = "clock" if decl.clock else "role"
            self._emit(0, f"{word} {decl.name.name}{' untrusted' if decl.untrusted else ''}", decl.span)
        elif isinstance(decl, ast.ParamDecl):
            self._emit(0, f"param {decl.name.name}: {self._param_type(decl)}", decl.span)
        elif isinstance(decl, ast.AccountDecl):
            external = " external" if decl.external else ""
            self._emit(0, f"account {decl.name.name} {_quote(decl.address.value)}{external}", decl.span)
        elif isinstance(decl, ast.RuleDecl):
            self._emit(0, f"rule {decl.risk.name} {decl.decision}", decl.span)
        elif isinstance(decl, ast.StateDecl):
            self._emit(0, " ".join(["state", decl.name.name, *(f.name for f in decl.flags)]), decl.span)
        elif isinstance(decl, ast.InvariantDecl):
            prefix = f"{_clause(decl.clause)}invariant {decl.name.name}:"
            self._emit(0, self._wrapped(prefix, decl.expr, 0), decl.span)
        elif isinstance(decl, ast.PropertyDecl):
            self._emit(0, self._property(decl), decl.span)
        elif isinstance(decl, ast.LimitDecl):  # new in 1.1
            per = f" per {decl.per_role.name}" if decl.per_role else ""
            text = f"limit {decl.name.name}: total({decl.effect.name}) {decl.op} {self.lit.money(decl.amount.text)}"
            self._emit(0, f"{text} per {self.lit.number(decl.window.text)}{per}", decl.span)
        elif isinstance(decl, ast.BudgetDecl):
            line = self._emit(0, "budget {", decl.span)
            line.end = (decl.span.line, decl.span.column + len("budget"))
            for item in decl.items:
                value = self.lit.money(item.value.text) if item.key == "ceiling" else self.lit.number(item.value.text)
                self._emit(1, f"{item.key} {value}", item.span)
            self._close(0, decl.span)
        elif isinstance(decl, ast.EffectDecl):
            line = self._emit(0, f"effect {decl.name.name} {{", decl.span)
            line.end = _end(decl.name.span)
            for efield in decl.fields:
                self._emit(1, self._effect_field(efield), efield.span)
            self._close(0, decl.span)
        else:
            self._transition(decl)

    def _param_type(self, decl: ast.ParamDecl) -> str:
        money = decl.type == "money"

        def lit(node: ast.NumberLit) -> str:
            return self.lit.money(node.text) if money else self.lit.number(node.text)

        low = decl.low_ref.name if decl.low_ref else lit(decl.low) if decl.low else None
        high = decl.high_ref.name if decl.high_ref else lit(decl.high) if decl.high else None
        if low is not None and high is not None:
            return f"{decl.type} between {low} and {high}"
        if decl.value is not None:
            return f"{decl.type} = {lit(decl.value)}"
        if decl.pattern is not None:
            return f"text matching {_quote(decl.pattern.value)}"
        return "one of " + ", ".join(o.name for o in decl.options)

    def _effect_field(self, efield: ast.EffectField) -> str:
        def arg(node: ast.Ident | ast.StringLit | ast.NumberLit) -> str:
            if isinstance(node, ast.Ident):
                return node.name
            if isinstance(node, ast.StringLit):
                return _quote(node.value)
            return self.lit.money(node.text) if efield.key == "ceiling" else self.lit.number(node.text)

        if efield.key == "amount" and efield.expr is not None:
            return self._wrapped("amount", efield.expr, 1)
        args = [arg(a) for a in efield.args]
        if efield.key == "compensate":
            return f"strategy compensate with {args[0]}"
        separator = ", " if efield.key in ("scopes", "key") else " "
        return f"{efield.key} {separator.join(args)}"

    def _transition(self, decl: ast.TransitionDecl) -> None:
        sources = ", ".join(s.name for s in decl.sources)
        head = f"{_clause(decl.clause)}transition {decl.name.name}: {sources} -> {decl.target.name} {{"
        line = self._emit(0, head, decl.span)
        line.end = _end(decl.target.span)
        for tfield in decl.fields:
            self._transition_field(tfield)
        self._close(0, decl.span)

    def _transition_field(self, tfield: ast.TransitionField) -> None:
        if isinstance(tfield, ast.ByField):
            self._emit(1, "by " + ", ".join(r.name for r in tfield.roles), tfield.span)
        elif isinstance(tfield, ast.WhenField):
            self._emit(1, self._wrapped("when", tfield.expr, 1), tfield.span)
        elif isinstance(tfield, ast.StampField):
            self._emit(1, f"stamp {tfield.name.name}", tfield.span)
        elif isinstance(tfield, ast.CallField):
            head = f"call {tfield.effect.name}"
            text = head if tfield.amount is None else self._wrapped(f"{head} amount", tfield.amount, 1)
            self._emit(1, text, tfield.span)
        elif isinstance(tfield, ast.ApprovalField):
            suffix = (" distinct" if tfield.distinct else "") + (" not requester" if tfield.not_requester else "")
            if tfield.count is not None:  # four eyes (new in 1.1)
                head = f"approvals {tfield.count.text} by {tfield.role.name}"
            else:
                head = "approval by " + ", ".join(r.name for r in (tfield.role, *tfield.also))
            self._emit(1, head + suffix, tfield.span)
        elif tfield.destination is not None:
            text = f"transfer {self.expr(tfield.amount)} from {tfield.source.name} to {tfield.destination.name}"
            self._emit(1, text, tfield.span)
        else:
            line = self._emit(1, f"transfer {self.expr(tfield.amount)} from {tfield.source.name} {{", tfield.span)
            line.end = _end(tfield.source.span)
            self._portions(2, tfield.portions)
            self._close(1, tfield.span)

    def _portions(self, depth: int, portions: tuple[ast.Portion, ...]) -> None:
        """Split portions, a nested split (new in 1.1) as its own indented block."""
        for portion in portions:
            if portion.block is None:
                assert portion.target is not None
                self._emit(depth, f"{self._share(portion.share)} to {portion.target.name}", portion.span)
                continue
            line = self._emit(depth, f"{self._share(portion.share)} to {{", portion.span)
            line.end = _end(portion.share.span) if portion.share is not None else _start(portion.span)
            self._portions(depth + 1, portion.block)
            self._close(depth, portion.span)

    def _share(self, share: ast.NumberLit | ast.Ident | None) -> str:
        if share is None:
            return "remaining"
        if isinstance(share, ast.Ident):
            return share.name
        return self.lit.money(share.text)  # a percent stays a percent; a number is an amount

    # Expressions -----------------------------------------------------------

    def expr(self, node: ast.Expr, loosest: int = _IMPLIES) -> str:
        """`node` printed, in parentheses only if it binds looser than `loosest` allows."""
        text, strength = self._bare(node)
        return f"({text})" if strength < loosest else text

    def _bare(self, node: ast.Expr) -> tuple[str, int]:
        if isinstance(node, ast.BinaryExpr):
            spine = _spine(node)
            text = self.expr(spine[-1].left, _operand_strengths(spine[-1].op)[0])
            for binary in reversed(spine):
                text += f" {binary.op} {self.expr(binary.right, _operand_strengths(binary.op)[1])}"
            return text, _BINARY[node.op]
        if isinstance(node, ast.UnaryExpr):
            if node.op == "not":
                return f"not {self.expr(node.operand, _NOT)}", _NOT
            return f"-{self.expr(node.operand, _NEGATE)}", _NEGATE
        if isinstance(node, ast.NumberExpr):
            return self.lit.number(node.text), _ATOM
        if isinstance(node, ast.StringExpr):
            return _quote(node.value), _ATOM
        if isinstance(node, ast.NameExpr):
            return node.name, _ATOM
        if isinstance(node, ast.CallExpr):
            return f"{node.function}({node.arg.name})", _ATOM
        if isinstance(node, ast.NowExpr):
            return "now", _ATOM
        return "final", _ATOM

    def _pieces(self, node: ast.Expr, loosest: int) -> list[str]:
        """`self.expr(node, loosest)` cut before each operator outside parentheses."""
        if isinstance(node, ast.BinaryExpr) and _BINARY[node.op] >= loosest:
            spine = _spine(node)
            pieces = [self.expr(spine[-1].left, _operand_strengths(spine[-1].op)[0])]
            for binary in reversed(spine):
                rest = self._pieces(binary.right, _operand_strengths(binary.op)[1])
                pieces += [f"{binary.op} {rest[0]}", *rest[1:]]
            return pieces
        return [self.expr(node, loosest)]

    def _property(self, decl: ast.PropertyDecl) -> str:
        """A liveness property (new in 1.1); a long goal wraps as an invariant does."""
        prefix = f"{_clause(decl.clause)}property {decl.name.name}:"
        if decl.premise is None or decl.goal is None:
            return f"{prefix} eventually final"
        return self._wrapped(f"{prefix} {self.expr(decl.premise)} leads_to", decl.goal, 0)

    def _wrapped(self, prefix: str, node: ast.Expr, depth: int) -> str:
        """`prefix expr` on one line, or filled greedily up to `WIDTH` columns.

        Continuation lines are indented one level deeper than the line they
        continue (the `\\n` is re-indented when rendered); each starts with
        an operator, so a reader sees at once that the line continues.
        """
        flat = f"{prefix} {self.expr(node)}"
        if len(INDENT) * depth + len(flat) <= WIDTH:
            return flat
        pieces = self._pieces(node, _IMPLIES)
        rows = [f"{prefix} {pieces[0]}"]
        for piece in pieces[1:]:
            room = WIDTH - len(INDENT) * (depth + (len(rows) > 1))
            if len(rows[-1]) + 1 + len(piece) <= room:
                rows[-1] += " " + piece
            else:
                rows.append(piece)
        return ("\n" + INDENT).join(rows)


def _spine(node: ast.BinaryExpr) -> list[ast.BinaryExpr]:
    """`node` and the left operands that continue its chain unparenthesised, top down.

    A chain `a + b + ... + z` is a tree one level a term; it is printed in a
    loop over this spine, so its length never meets Python's recursion limit.
    """
    spine = [node]
    while True:
        child = spine[-1].left
        if not isinstance(child, ast.BinaryExpr) or _BINARY[child.op] < _operand_strengths(spine[-1].op)[0]:
            return spine
        spine.append(child)


def _operand_strengths(op: str) -> tuple[int, int]:
    """How tightly the left and right operands of `op` must bind to need no parentheses."""
    strength = _BINARY[op]
    if op == "implies":  # right-associative
        return strength + 1, strength
    if strength == _COMPARE:  # not associative at all: `a < b < c` does not parse
        return strength + 1, strength + 1
    return strength, strength + 1  # left-associative


def _clause(label: ast.StringLit | None) -> str:
    return "" if label is None else f"clause {_quote(label.value)} "


# Comments ----------------------------------------------------------------------

_LEXER_LOCK = threading.Lock()
_seen_comments: list[Token] = []


@functools.cache
def _comment_parser() -> Lark:
    """The policy grammar with a hook on the (ignored) COMMENT terminal.

    Lexing with the grammar itself, rather than a hand-written scanner, means
    a `#` inside a string can never be mistaken for a comment.
    """
    grammar = resources.files("pactwright.compiler.grammar").joinpath("pact.lark").read_text("utf-8")
    lark = Lark(grammar, parser="lalr", lexer_callbacks={"COMMENT": _seen_comments.append})
    # As the policy parser does: a keyword is read as a name where the next token shows it is one
    # (`param total`, `state approved`), else a policy that parses could not be formatted.
    _reserved.install(lark)
    return lark


def _comments(text: str) -> list[Token]:
    """Every comment token of a policy that parses, in source order."""
    with _LEXER_LOCK:
        _seen_comments.clear()
        try:
            _comment_parser().parse(text)
            return list(_seen_comments)
        finally:
            _seen_comments.clear()


def _code_before(text: str, offset: int) -> bool:
    line_start = text.rfind("\n", 0, offset) + 1
    return bool(text[line_start:offset].strip())


def _attach_comments(lines: list[_Line], comments: list[Token], text: str) -> list[str]:
    """Give each comment to a printed line; returns the comments left for the end.

    A comment after code trails the line that code belongs to (the last line
    starting before it). A comment on a line of its own leads the line whose
    source region contains it, else the next line; after the last line it
    stays at the end of the file.
    """
    starts = [line.start for line in lines]
    tail: list[str] = []
    for token in comments:
        body = str(token).rstrip()
        pos: Pos = (token.line or 1, token.column or 1)
        before = bisect.bisect_left(starts, pos) - 1
        if before >= 0 and _code_before(text, token.start_pos or 0):
            lines[before].trailing.append(body)
        elif before >= 0 and lines[before].end > pos:
            lines[before].leading.append(body)
        elif before + 1 < len(lines):
            lines[before + 1].leading.append(body)
        else:
            tail.append(body)
    return tail


def _render(lines: list[_Line], tail: list[str]) -> str:
    out: list[str] = []
    previous: _Line | None = None
    for line in lines:
        if line.group is not None:
            if previous is not None and (line.group != previous.group or line.block or previous.block):
                out.append("")
            previous = line
        indent = INDENT * line.depth
        comment_indent = INDENT * (line.depth + 1) if line.closes else indent
        # A line carries one trailing comment; earlier ones move above it.
        out.extend(comment_indent + comment for comment in [*line.leading, *line.trailing[:-1]])
        text = line.text.replace("\n", "\n" + indent)
        out.append(indent + text + (f"  {line.trailing[-1]}" if line.trailing else ""))
    if tail:
        out.append("")
        out.extend(tail)
    return "\n".join(out) + "\n"
