"""Policy text -> syntax tree, or a syntax diagnostic that names what was expected.

The LALR parser runs with the transformer inline, so the tree is built in one
pass. Lark's exceptions never leave this module: they become `Diagnostic`s
with a stable code, a span and a hint.
"""

from __future__ import annotations

import difflib
import functools
import itertools
import re
from collections.abc import Callable
from importlib import resources
from typing import Any

from lark import Lark, Token, Transformer_NonRecursive, Tree, v_args
from lark.exceptions import UnexpectedCharacters, UnexpectedEOF, UnexpectedInput, VisitError

from pactwright.candidate import CHAIN_TERMS
from pactwright.compiler import _reserved, ast
from pactwright.diagnostics import Diagnostic, Severity, Span

# Words the grammar uses; a name spelled like one is refused (PW109) so a
# policy never reads ambiguously to a human.
KEYWORDS: frozenset[str] = frozenset()

# Grammar words that are keywords only where the parser accepts them and
# names everywhere else. `amount` is one, because `param amount: money ...` is
# the natural name of a refund's amount; the contextual lexer never offers it
# where a name may stand (an effect field, or right after `call NAME`), so
# `amount amount` in an effect reads unambiguously. They are not reserved.
CONTEXTUAL_KEYWORDS: frozenset[str] = frozenset({"amount"}) | frozenset({"property", "leads_to", "eventually"})
# Four eyes (new in 1.1): `approvals N by ROLE distinct`, and the function `approvals(T)`.
CONTEXTUAL_KEYWORDS = CONTEXTUAL_KEYWORDS | frozenset({"distinct", "approvals"})

# Limits across agreements (new in 1.1): `limit` starts a declaration and `per` follows a
# number, where no name may stand.
CONTEXTUAL_KEYWORDS = CONTEXTUAL_KEYWORDS | frozenset({"limit", "per"})

# Deepest syntax tree accepted (declarations take ~4 levels, the rest is
# expression nesting). Later stages recurse over expressions and pydantic
# refuses to serialize models nested ~250 deep, so the limit is enforced here,
# before anything recursive runs.
MAX_TREE_DEPTH = 100

# Characters that make text display differently from how it is parsed: bidi
# controls (CVE-2021-42574) and line breaks that editors honour but `#`
# comments do not end at.
_BIDI = re.compile("[\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")
_ODD_BREAK = re.compile("[\u0085\u2028\u2029]")


class ParseFailure(Exception):
    """Raised with the diagnostics of a policy that has no syntax tree."""

    def __init__(self, diagnostics: list[Diagnostic]) -> None:
        super().__init__(diagnostics[0].message)
        self.diagnostics = diagnostics


@functools.cache
def _grammar_text() -> str:
    return resources.files("pactwright.compiler.grammar").joinpath("pact.lark").read_text("utf-8")


@functools.cache
def bare_parser() -> Lark:
    """The LALR parser without the transformer (benchmarks compare against it)."""
    return Lark(_grammar_text(), parser="lalr", propagate_positions=True, maybe_placeholders=False)


def _span(token: Token) -> Span:
    return Span(
        line=token.line or 1,
        column=token.column or 1,
        end_line=token.end_line or token.line or 1,
        end_column=token.end_column or token.column or 1,
    )


def _meta_span(meta: Any) -> Span:
    return Span(line=meta.line, column=meta.column, end_line=meta.end_line, end_column=meta.end_column)


def _join(first: Span, last: Span) -> Span:
    return Span(line=first.line, column=first.column, end_line=last.end_line, end_column=last.end_column)


def _node_span(item: Any) -> Span:
    if isinstance(item, Token):
        return _span(item)
    span: Span = item.span
    return span


class _Builder(Transformer_NonRecursive[Token, ast.PolicyAst]):
    """Builds `ast` nodes bottom-up; collects lexical diagnostics on the way.

    Without recursion: a flat chain of a thousand terms is a syntax tree a
    thousand levels deep (nesting, which recursion would need, is PW113).
    """

    def __init__(self) -> None:
        super().__init__()
        self.diagnostics: list[Diagnostic] = []
        self.source = ""  # the text being parsed, for `_GluedWord`

    # Leaves ---------------------------------------------------------------

    def _ident(self, token: Token) -> ast.Ident:
        return ast.Ident(span=_span(token), name=str(token))

    def _string(self, token: Token) -> ast.StringLit:
        raw = str(token)[1:-1]
        out: list[str] = []
        index = 0
        while index < len(raw):
            char = raw[index]
            if char == "\\":
                nxt = raw[index + 1]
                if nxt not in '"\\':
                    col = (token.column or 1) + 1 + index
                    self.diagnostics.append(
                        Diagnostic(
                            code="PW103",
                            severity=Severity.ERROR,
                            message=f"invalid escape `\\{nxt}` in string",
                            span=Span(line=token.line or 1, column=col, end_line=token.line or 1, end_column=col + 2),
                            hint='strings allow only `\\"` and `\\\\`',
                        )
                    )
                out.append(nxt)
                index += 2
                continue
            out.append(char)
            index += 1
        return ast.StringLit(span=_span(token), value="".join(out))

    def _number(self, token: Token) -> ast.NumberLit:
        return ast.NumberLit(span=_span(token), text=str(token))

    # Header and simple declarations --------------------------------------

    @v_args(meta=True)
    def header(self, meta: Any, items: list[Token]) -> ast.Header:
        return ast.Header(span=_meta_span(meta), pact_id=self._string(items[0]), version=self._string(items[1]))

    @v_args(meta=True)
    def start(self, meta: Any, items: list[Any]) -> ast.PolicyAst:
        header: ast.Header = items[0]
        decls = tuple(items[1:])
        end = decls[-1].span if decls else header.span
        return ast.PolicyAst(span=_join(header.span, end), header=header, decls=decls)

    @v_args(meta=True)
    def currency(self, meta: Any, items: list[Token]) -> ast.CurrencyDecl:
        return ast.CurrencyDecl(span=_meta_span(meta), code=self._ident(items[0]), scale=self._number(items[1]))

    @v_args(meta=True)
    def default_decl(self, meta: Any, items: list[Token]) -> ast.DefaultDecl:
        return ast.DefaultDecl(span=_meta_span(meta))

    @v_args(meta=True)
    def role(self, meta: Any, items: list[Any]) -> ast.RoleDecl:
        return ast.RoleDecl(span=_meta_span(meta), name=self._ident(items[0]), untrusted=len(items) > 1)

    @v_args(meta=True)
    def clock(self, meta: Any, items: list[Token]) -> ast.RoleDecl:
        return ast.RoleDecl(span=_meta_span(meta), name=self._ident(items[0]), clock=True)

    @v_args(meta=True)
    def param(self, meta: Any, items: list[Any]) -> ast.ParamDecl:
        name = self._ident(items[0])
        fields: dict[str, Any] = items[1]
        return ast.ParamDecl(span=_meta_span(meta), name=name, **fields)

    def money_range(self, items: list[Token]) -> dict[str, Any]:
        return {"type": "money", **self._bounds(items)}

    def _bounds(self, items: list[Token]) -> dict[str, Any]:
        """`low`/`high` for literal bounds, `low_ref`/`high_ref` for a param's name."""
        out: dict[str, Any] = {}
        for side, token in zip(("low", "high"), items, strict=True):
            if token.type == "NAME":
                out[f"{side}_ref"] = self._ident(token)
            else:
                out[side] = self._number(token)
        return out

    def money_fixed(self, items: list[Token]) -> dict[str, Any]:
        return {"type": "money", "value": self._number(items[0])}

    def percent_range(self, items: list[Token]) -> dict[str, Any]:
        return {"type": "percent", **self._bounds(items)}

    def percent_fixed(self, items: list[Token]) -> dict[str, Any]:
        return {"type": "percent", "value": self._number(items[0])}

    def duration_fixed(self, items: list[Token]) -> dict[str, Any]:
        return {"type": "duration", "value": self._number(items[0])}

    def text_matching(self, items: list[Token]) -> dict[str, Any]:
        return {"type": "text", "pattern": self._string(items[0])}

    def text_one_of(self, items: list[tuple[ast.Ident, ...]]) -> dict[str, Any]:
        return {"type": "text", "options": items[0]}

    def name_list(self, items: list[Token]) -> tuple[ast.Ident, ...]:
        return tuple(self._ident(token) for token in items)

    @v_args(meta=True)
    def account(self, meta: Any, items: list[Any]) -> ast.AccountDecl:
        return ast.AccountDecl(
            span=_meta_span(meta), name=self._ident(items[0]), address=self._string(items[1]), external=len(items) > 2
        )

    @v_args(meta=True)
    def budget(self, meta: Any, items: list[ast.BudgetItem]) -> ast.BudgetDecl:
        return ast.BudgetDecl(span=_meta_span(meta), items=tuple(items))

    @v_args(meta=True)
    def budget_item(self, meta: Any, items: list[Any]) -> ast.BudgetItem:
        return ast.BudgetItem(span=_meta_span(meta), key=str(items[0]), value=self._number(items[1]))

    @v_args(meta=True)
    def rule(self, meta: Any, items: list[Any]) -> ast.RuleDecl:
        return ast.RuleDecl(span=_meta_span(meta), risk=self._ident(items[0]), decision=items[1])

    # Keyword choices come back as their single token's text.
    def _word(self, items: list[Token]) -> str:
        return str(items[0])

    decision = reversibility = strategy = budget_key = function = _word

    def untrusted(self, items: list[Token]) -> bool:
        return True

    external = not_requester = untrusted

    def remaining(self, items: list[Token]) -> Token:
        return items[0]

    def state_flag(self, items: list[Token]) -> ast.Ident:
        return self._ident(items[0])

    @v_args(meta=True)
    def state(self, meta: Any, items: list[Any]) -> ast.StateDecl:
        return ast.StateDecl(span=_meta_span(meta), name=self._ident(items[0]), flags=tuple(items[1:]))

    # Effects ---------------------------------------------------------------

    def _field(self, meta: Any, key: str, args: list[Any]) -> ast.EffectField:
        converted: list[ast.Ident | ast.StringLit | ast.NumberLit] = []
        for arg in args:
            if isinstance(arg, Token):
                if arg.type == "STRING":
                    converted.append(self._string(arg))
                elif arg.type == "NUMBER":
                    converted.append(self._number(arg))
                else:
                    converted.append(self._ident(arg))
            elif isinstance(arg, tuple):
                converted.extend(arg)
            else:
                converted.append(ast.Ident(span=_meta_span(meta), name=str(arg)))
        return ast.EffectField(span=_meta_span(meta), key=key, args=tuple(converted))

    @v_args(meta=True)
    def effect(self, meta: Any, items: list[Any]) -> ast.EffectDecl:
        return ast.EffectDecl(span=_meta_span(meta), name=self._ident(items[0]), fields=tuple(items[1:]))

    @v_args(meta=True)
    def eff_risk(self, meta: Any, items: list[Any]) -> ast.EffectField:
        return self._field(meta, "risk", items)

    @v_args(meta=True)
    def eff_reversibility(self, meta: Any, items: list[Any]) -> ast.EffectField:
        return self._field(meta, "reversibility", items)

    @v_args(meta=True)
    def eff_scopes(self, meta: Any, items: list[Any]) -> ast.EffectField:
        return self._field(meta, "scopes", items)

    @v_args(meta=True)
    def eff_egress(self, meta: Any, items: list[Any]) -> ast.EffectField:
        return self._field(meta, "egress", items)

    @v_args(meta=True)
    def eff_max_calls(self, meta: Any, items: list[Any]) -> ast.EffectField:
        return self._field(meta, "max_calls", items)

    @v_args(meta=True)
    def eff_timeout(self, meta: Any, items: list[Any]) -> ast.EffectField:
        return self._field(meta, "timeout", items)

    @v_args(meta=True)
    def eff_ceiling(self, meta: Any, items: list[Any]) -> ast.EffectField:
        return self._field(meta, "ceiling", items)

    @v_args(meta=True)
    def eff_strategy(self, meta: Any, items: list[Any]) -> ast.EffectField:
        return self._field(meta, "strategy", items)

    @v_args(meta=True)
    def eff_compensate(self, meta: Any, items: list[Any]) -> ast.EffectField:
        return self._field(meta, "compensate", items)

    @v_args(meta=True)
    def eff_key(self, meta: Any, items: list[Any]) -> ast.EffectField:
        return self._field(meta, "key", items)

    @v_args(meta=True)
    def eff_consequence(self, meta: Any, items: list[Any]) -> ast.EffectField:
        return self._field(meta, "consequence", items)

    @v_args(meta=True)
    def eff_amount(self, meta: Any, items: list[Any]) -> ast.EffectField:
        return ast.EffectField(span=_meta_span(meta), key="amount", args=(), expr=items[0])

    # Transitions and invariants ---------------------------------------------

    def clause(self, items: list[Token]) -> ast.StringLit:
        return self._string(items[0])

    @v_args(meta=True)
    def transition(self, meta: Any, items: list[Any]) -> ast.TransitionDecl:
        clause = items.pop(0) if isinstance(items[0], ast.StringLit) else None
        return ast.TransitionDecl(
            span=_meta_span(meta),
            clause=clause,
            name=self._ident(items[0]),
            sources=items[1],
            target=self._ident(items[2]),
            fields=tuple(items[3:]),
        )

    @v_args(meta=True)
    def invariant(self, meta: Any, items: list[Any]) -> ast.InvariantDecl:
        clause = items.pop(0) if isinstance(items[0], ast.StringLit) else None
        return ast.InvariantDecl(span=_meta_span(meta), clause=clause, name=self._ident(items[0]), expr=items[1])

    @v_args(meta=True)
    def liveness_property(self, meta: Any, items: list[Any]) -> ast.PropertyDecl:
        clause = items.pop(0) if isinstance(items[0], ast.StringLit) else None
        premise, goal = items[1]
        return ast.PropertyDecl(
            span=_meta_span(meta), clause=clause, name=self._ident(items[0]), premise=premise, goal=goal
        )

    def prop_leads_to(self, items: list[Any]) -> tuple[ast.Expr | None, ast.Expr | None]:
        return items[0], items[1]

    def prop_eventually_final(self, items: list[Any]) -> tuple[ast.Expr | None, ast.Expr | None]:
        return None, None

    @v_args(meta=True)
    def limit_decl(self, meta: Any, items: list[Token]) -> ast.LimitDecl:
        """`limit NAME: total(EFFECT) OP MONEY per DURATION [per ROLE]` (new in 1.1)."""
        return ast.LimitDecl(
            span=_meta_span(meta),
            name=self._ident(items[0]),
            effect=self._ident(items[1]),
            op=str(items[2]),
            op_span=_span(items[2]),
            amount=self._number(items[3]),
            window=self._number(items[4]),
            per_role=self._ident(items[5]) if len(items) > 5 else None,
        )

    @v_args(meta=True)
    def tr_by(self, meta: Any, items: list[Any]) -> ast.ByField:
        return ast.ByField(span=_meta_span(meta), roles=items[0])

    @v_args(meta=True)
    def tr_when(self, meta: Any, items: list[Any]) -> ast.WhenField:
        return ast.WhenField(span=_meta_span(meta), expr=items[0])

    @v_args(meta=True)
    def tr_stamp(self, meta: Any, items: list[Token]) -> ast.StampField:
        return ast.StampField(span=_meta_span(meta), name=self._ident(items[0]))

    @v_args(meta=True)
    def tr_transfer(self, meta: Any, items: list[Any]) -> ast.TransferField:
        return ast.TransferField(
            span=_meta_span(meta), amount=items[0], source=self._ident(items[1]), destination=self._ident(items[2])
        )

    @v_args(meta=True)
    def tr_split(self, meta: Any, items: list[Any]) -> ast.TransferField:
        return ast.TransferField(
            span=_meta_span(meta), amount=items[0], source=self._ident(items[1]), portions=tuple(items[2:])
        )

    @v_args(meta=True)
    def portion(self, meta: Any, items: list[Token]) -> ast.Portion:
        share_token, target = items
        share: ast.NumberLit | ast.Ident | None
        if share_token.type == "REMAINING":
            share = None
        elif share_token.type == "NUMBER":
            share = self._number(share_token)
        else:
            share = self._ident(share_token)
        return ast.Portion(span=_meta_span(meta), share=share, target=self._ident(target))

    @v_args(meta=True)
    def portion_block(self, meta: Any, items: list[Any]) -> ast.Portion:
        """A portion sent on to a nested split (new in 1.1)."""
        share_token, block = items[0], tuple(items[1:])
        share: ast.NumberLit | ast.Ident | None
        if share_token.type == "REMAINING":
            share = None
        elif share_token.type == "NUMBER":
            share = self._number(share_token)
        else:
            share = self._ident(share_token)
        return ast.Portion(span=_meta_span(meta), share=share, target=None, block=block)

    @v_args(meta=True)
    def tr_call(self, meta: Any, items: list[Any]) -> ast.CallField:
        amount = items[1] if len(items) > 1 else None
        return ast.CallField(span=_meta_span(meta), effect=self._ident(items[0]), amount=amount)

    @v_args(meta=True)
    def tr_approval(self, meta: Any, items: list[Any]) -> ast.ApprovalField:
        return ast.ApprovalField(span=_meta_span(meta), role=self._ident(items[0]), not_requester=len(items) > 1)

    # Four eyes (new in 1.1): `approval by A, B distinct` and `approvals N by R distinct`.
    @v_args(meta=True)
    def tr_approval_roles(self, meta: Any, items: list[Any]) -> ast.ApprovalField:
        names = [self._ident(i) for i in items if isinstance(i, Token)]
        flags = [i for i in items if not isinstance(i, Token)]
        return ast.ApprovalField(span=_meta_span(meta), role=names[0], not_requester=True in flags,
                                 also=tuple(names[1:]), distinct="distinct" in flags)  # fmt: skip

    @v_args(meta=True)
    def tr_approvals(self, meta: Any, items: list[Any]) -> ast.ApprovalField:
        flags = [i for i in items[2:] if not isinstance(i, Token)]
        count = ast.NumberExpr(span=_span(items[0]), text=str(items[0]))
        return ast.ApprovalField(span=_meta_span(meta), role=self._ident(items[1]), not_requester=True in flags,
                                 count=count, distinct="distinct" in flags)  # fmt: skip

    def distinct(self, items: list[Token]) -> str:
        return "distinct"

    # Expressions --------------------------------------------------------------

    def lit_number(self, items: list[Token]) -> ast.NumberExpr:
        return ast.NumberExpr(span=_span(items[0]), text=str(items[0]))

    def lit_string(self, items: list[Token]) -> ast.StringExpr:
        lit = self._string(items[0])
        return ast.StringExpr(span=lit.span, value=lit.value)

    def ref_name(self, items: list[Token]) -> ast.NameExpr:
        return ast.NameExpr(span=_span(items[0]), name=str(items[0]))

    @v_args(meta=True)
    def ref_now(self, meta: Any, items: list[Token]) -> ast.NowExpr:
        return ast.NowExpr(span=_meta_span(meta))

    @v_args(meta=True)
    def ref_final(self, meta: Any, items: list[Token]) -> ast.FinalExpr:
        return ast.FinalExpr(span=_meta_span(meta))

    @v_args(meta=True)
    def call_function(self, meta: Any, items: list[Any]) -> ast.CallExpr:
        return ast.CallExpr(span=_meta_span(meta), function=items[0], arg=self._ident(items[1]))

    def _binary(self, left: ast.Expr, op: Token, right: ast.Expr) -> ast.BinaryExpr:
        return ast.BinaryExpr(span=_join(left.span, right.span), op=str(op), left=left, right=right, op_span=_span(op))

    def op_compare(self, items: list[Any]) -> ast.BinaryExpr:
        return self._binary(items[0], items[1], items[2])

    op_arith = op_compare

    def _keyword_binary(self, op: str, items: list[Any]) -> ast.BinaryExpr:
        left, right = items
        between = Span(
            line=left.span.end_line,
            column=left.span.end_column,
            end_line=right.span.line,
            end_column=right.span.column,
        )
        return ast.BinaryExpr(span=_join(left.span, right.span), op=op, left=left, right=right, op_span=between)

    def op_and(self, items: list[Any]) -> ast.BinaryExpr:
        return self._keyword_binary("and", items)

    def op_or(self, items: list[Any]) -> ast.BinaryExpr:
        return self._keyword_binary("or", items)

    def op_implies(self, items: list[Any]) -> ast.BinaryExpr:
        return self._keyword_binary("implies", items)

    @v_args(meta=True)
    def op_not(self, meta: Any, items: list[Any]) -> ast.UnaryExpr:
        return ast.UnaryExpr(span=_meta_span(meta), op="not", operand=items[0])

    @v_args(meta=True)
    def op_negate(self, meta: Any, items: list[Any]) -> ast.UnaryExpr:
        return ast.UnaryExpr(span=_meta_span(meta), op="-", operand=items[0])


# Syntax errors ------------------------------------------------------------------

_TERMINAL_TEXT = {
    "NAME": "a name",
    "UPPER": "an upper-case word",
    "NUMBER": "a number",
    "STRING": "a string",
    "COMPARATOR": "a comparison",
    "ADDITIVE": "`+` or `-`",
    "MULTIPLICATIVE": "`*` or `/`",
    "$END": "end of file",
}


def _cache_path() -> str | None:
    """A private per-user file for the built LALR tables, or None to rebuild.

    Building the tables costs more than the rest of start-up. Lark's default
    cache lives in the shared temp directory, where another local user could
    plant a file that is unpickled; a 0700 directory of our own cannot be.
    """
    import hashlib
    import os
    from pathlib import Path

    import lark

    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    folder = Path(base) / "pactwright"
    try:
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        info = folder.stat()
        if info.st_uid != os.getuid() or info.st_mode & 0o077:
            return None
    except OSError:
        return None
    digest = hashlib.sha256(_grammar_text().encode() + lark.__version__.encode()).hexdigest()[:16]
    return str(folder / f"pact-grammar-{digest}.lark")


class _GluedWord(Exception):
    """A word-like token followed directly by a letter, digit or `_`."""

    def __init__(self, token: Token) -> None:
        super().__init__(str(token))
        self.token = token


def _word_guard(builder: _Builder) -> Callable[[Token], Token]:
    """Maximal munch for words: `roleb` is one (unknown) word, never `role b`.

    The contextual lexer only tries the terminals the parser accepts, so it
    would happily read the keyword `role` off the front of `roleb`.
    """

    def guard(token: Token) -> Token:
        end = token.end_pos
        source = builder.source
        if end is not None and end < len(source) and (source[end].isalnum() or source[end] == "_"):
            raise _GluedWord(token)
        return token

    return guard


def _word_terminals(grammar: str) -> set[str]:
    # Lark names the terminal of an identifier-like literal by upper-casing it.
    return {word.upper() for word in re.findall(r'"([a-z][a-z_]*)"', grammar)} | {"NAME", "UPPER"}


@functools.cache
def _parser() -> tuple[Lark, _Builder, dict[str, str], frozenset[str]]:
    builder = _Builder()
    guard = _word_guard(builder)
    word_terminals = _word_terminals(_grammar_text())
    lark = Lark(
        _grammar_text(),
        parser="lalr",
        propagate_positions=True,
        maybe_placeholders=False,
        lexer_callbacks=dict.fromkeys(word_terminals, guard),
        cache=_cache_path() or False,
    )
    literals: dict[str, str] = {}
    keywords: set[str] = set()
    for terminal in lark.terminals:
        pattern = terminal.pattern
        if pattern.type == "str":
            literals[terminal.name] = pattern.value
            if pattern.value.isidentifier() and pattern.value not in CONTEXTUAL_KEYWORDS:
                keywords.add(pattern.value)
    assert {name for name, value in literals.items() if value.isidentifier()} <= word_terminals
    _reserved.install(lark)
    return lark, builder, literals, frozenset(keywords)


def grammar_words() -> frozenset[str]:
    """Every word the grammar uses, reserved or not."""
    return _parser()[3] | CONTEXTUAL_KEYWORDS


def reservations() -> dict[str, _reserved.Reservation]:
    """The reserved words (new in 1.1: only where the parser cannot tell them from a name)."""
    return _reserved.analysis(_parser()[0]).reserved


def keywords() -> frozenset[str]:
    """Every reserved word of the language, read from the grammar's parse table.

    A grammar word is reserved only where the parser accepts both it and a
    name and the next token cannot tell them apart (compiler/_reserved.py);
    every other grammar word, `CONTEXTUAL_KEYWORDS` included, may be a name.
    """
    return frozenset(reservations())


def _describe(terminal: str, literals: dict[str, str]) -> str:
    if terminal in literals:
        return f"`{literals[terminal]}`"
    return _TERMINAL_TEXT.get(terminal, terminal.lower())


def _expected_text(expected: set[str], literals: dict[str, str]) -> str:
    # Kinds of token ("a name", "a number") first: the list is cut at eight.
    words = sorted({_describe(name, literals) for name in expected}, key=lambda w: (w.startswith("`"), w))
    if len(words) > 8:
        words = [*words[:8], "..."]
    return ", ".join(words)


def _syntax_diagnostic(exc: UnexpectedInput, text: str, literals: dict[str, str]) -> Diagnostic:
    line = getattr(exc, "line", 1) or 1
    column = getattr(exc, "column", 1) or 1
    if isinstance(exc, UnexpectedCharacters):
        pos = exc.pos_in_stream or 0
        char = text[pos] if pos < len(text) else ""
        point = Span(line=line, column=column, end_line=line, end_column=column + 1)
        if char == '"':
            rest = text[pos:].split("\n", 1)[0]
            return Diagnostic(
                code="PW102",
                severity=Severity.ERROR,
                message="unterminated string",
                span=Span(line=line, column=column, end_line=line, end_column=column + len(rest)),
                hint='close the string with `"` on the same line',
            )
        shown = char if char.isprintable() else f"U+{ord(char):04X}" if char else "end of file"
        return Diagnostic(
            code="PW101",
            severity=Severity.ERROR,
            message=f"unexpected character `{shown}`",
            span=point,
            hint="names are lower-case letters, digits and `_`; comments start with `#`",
        )
    # `accepts` is exact; LALR's `expected` merges lookaheads of unrelated
    # contexts (it offers `->` and `account` inside a transition body).
    expected = set(getattr(exc, "accepts", None) or getattr(exc, "expected", None) or set())
    token = getattr(exc, "token", None)
    if isinstance(exc, UnexpectedEOF) or (token is not None and token.type == "$END"):
        end_line = text.count("\n") + 1
        end_col = len(text) - (text.rfind("\n") + 1) + 1
        point = Span(line=end_line, column=end_col, end_line=end_line, end_column=end_col)
        if not text.strip() or (
            text.strip().startswith("#")
            and all(not ln.strip() or ln.strip().startswith("#") for ln in text.splitlines())
        ):
            return Diagnostic(
                code="PW111",
                severity=Severity.ERROR,
                message="empty policy: no `pact` header",
                span=Span(line=1, column=1, end_line=1, end_column=1),
                hint='start the file with `pact "ID" version "1.0.0"`',
            )
        return Diagnostic(
            code="PW100",
            severity=Severity.ERROR,
            message=f"unexpected end of file; expected {_expected_text(expected, literals)}",
            span=point,
            hint="the last declaration is incomplete",
        )
    assert isinstance(token, Token)
    span = _span(token)
    value = str(token)
    if token.type == "PACT" or value == "pact":
        return Diagnostic(
            code="PW112",
            severity=Severity.ERROR,
            message="the `pact` header must be the first declaration and appear exactly once",
            span=span,
            hint="keep one header at the top of the file",
        )
    expected_words = sorted(literals[name] for name in expected if name in literals and literals[name].isidentifier())
    if token.type == "NAME" and expected_words and "NAME" not in expected:
        # A word where a keyword belongs: most often a misspelt keyword.
        word = _whole_word(text, token)
        close = difflib.get_close_matches(word, expected_words, n=1)
        hint = f"did you mean `{close[0]}`?" if close else f"expected one of {_expected_text(expected, literals)}"
        return Diagnostic(
            code="PW108",
            severity=Severity.ERROR,
            message=f"unknown keyword `{word}`; expected {_expected_text(expected, literals)}",
            span=span,
            hint=hint,
        )
    return Diagnostic(
        code="PW100",
        severity=Severity.ERROR,
        message=f"unexpected {_describe(token.type, literals) if token.type in literals else f'`{value}`'}; "
        f"expected {_expected_text(expected, literals)}",
        span=span,
        hint=_hint_for(expected, literals),
    )


def _glued_diagnostic(token: Token, text: str, literals: dict[str, str]) -> Diagnostic:
    start = token.start_pos or 0
    end = token.end_pos or start
    line, column = token.line or 1, token.column or 1
    if token.type in ("NAME", "UPPER"):
        # `bobX`, `EURo`: a name or code runs into a letter it may not contain.
        column += end - start
        return Diagnostic(
            code="PW101",
            severity=Severity.ERROR,
            message=f"unexpected character `{text[end]}` in `{_whole_word(text, token)}`",
            span=Span(line=line, column=column, end_line=line, end_column=column + 1),
            hint="names are lower-case letters, digits and `_`; codes and risk classes are upper-case",
        )
    while end < len(text) and (text[end].isalnum() or text[end] == "_"):
        end += 1
    word = text[start:end]
    expected = _accepts_at(text, start)
    words = sorted(literals[n] for n in expected if n in literals and literals[n].isidentifier())
    close = difflib.get_close_matches(word, words, n=1)
    return Diagnostic(
        code="PW108",
        severity=Severity.ERROR,
        message=f"unknown keyword `{word}`; expected {_expected_text(expected, literals)}",
        span=Span(line=line, column=column, end_line=line, end_column=column + len(word)),
        hint=f"did you mean `{close[0]}`?" if close else "separate words with a space",
    )


def _word_start(text: str, start: int) -> int:
    while start > 0 and (text[start - 1].isalnum() or text[start - 1] == "_"):
        start -= 1
    return start


def _accepts_at(text: str, pos: int) -> set[str]:
    """The terminals the parser accepts at `pos` (the text before it parses)."""
    try:
        interactive = _parser()[0].parse_interactive(text[:pos])
        interactive.exhaust_lexer()
        return set(interactive.accepts())
    except UnexpectedInput:
        return set()


def _whole_word(text: str, token: Token) -> str:
    """The full word around a token the contextual lexer split (`allowance`)."""
    start = _word_start(text, token.start_pos or 0)
    end = token.end_pos or start
    while end < len(text) and (text[end].isalnum() or text[end] == "_"):
        end += 1
    return text[start:end]


def _hint_for(expected: set[str], literals: dict[str, str]) -> str:
    if "RBRACE" in expected and len(expected) > 3:
        return "a block field is misspelt or a `}` is missing"
    if expected <= {"NAME"}:
        return "names are lower-case: `[a-z][a-z0-9_]*`"
    return f"write {_expected_text(expected, literals)} here"


# Left-associative chains (new in 1.1): `a + b + c` is a tree that leans left one
# level a term, but is flat to a reader, so an operand that continues its
# parent's chain (its left operand, not in parentheses) is not a level of
# nesting (PW113). Later stages hold the candidate's tree, where a chain of one
# of CHAIN_OPERATORS longer than CHAIN_TERMS terms is one node (candidate.py):
# the limit on height (PW187) is on that tree, a generous one so that any
# shorter chain, still binary, fits under any declaration. Other chains
# (`a - b - c`, `a + b - c + d`, `a * b * c`) stay binary at any length and
# count a level an operator. A chain of one operator is at most
# MAX_CHAIN_TERMS terms long (PW187): a policy is reviewed by people.
_CHAINS = frozenset({"op_arith", "op_and", "op_or", "op_compare"})
MAX_CHAIN_DEPTH = MAX_TREE_DEPTH + 20
MAX_CHAIN_TERMS = 1000


def _continues_chain(node: Tree[Token], child: Tree[Token]) -> bool:
    """`child` is `node`'s left operand written without parentheses."""
    if node.data not in _CHAINS or getattr(node.meta, "empty", True) or getattr(child.meta, "empty", True):
        return False
    return bool(child.meta.start_pos == node.meta.start_pos)


def _chain_operator(node: Tree[Token] | Token) -> str | None:
    """The operator of `node` if it is one CHAIN_OPERATORS chains (`+`, `and`, `or`)."""
    if not isinstance(node, Tree):
        return None
    if node.data == "op_arith":
        return "+" if str(node.children[1]) == "+" else None
    return {"op_and": "and", "op_or": "or"}.get(str(node.data))


def _tree_span(node: Tree[Token]) -> Span:
    if getattr(node.meta, "empty", True):
        return Span(line=1, column=1, end_line=1, end_column=1)
    return _meta_span(node.meta)


def _too_deep(tree: Tree[Token]) -> ParseFailure | None:
    """Why the tree is too deep to accept (PW113, PW187), found without recursion.

    `depth` is the nesting (PW113); `height` the level in the candidate's
    tree (PW187), where a chain longer than CHAIN_TERMS is one level.
    """
    # Nesting is the better explanation where both limits are crossed, so the
    # walk goes on past the first over-long chain (it is linear either way).
    stack: list[tuple[Tree[Token], int, int, bool]] = [(tree, 1, 1, False)]
    long: ParseFailure | None = None
    while stack:
        node, depth, height, continued = stack.pop()
        if depth > MAX_TREE_DEPTH:
            return _nested_too_deeply(_tree_span(node))
        if height > MAX_CHAIN_DEPTH and long is None:
            long = _chain_too_long(_tree_span(node))
        operator = _chain_operator(node)
        if operator is not None and not continued:
            spine = _spine(node, operator)
            terms = len(spine) + 1
            if terms > MAX_CHAIN_TERMS and long is None:
                long = _chain_too_many_terms(_tree_span(node), operator, terms)
            if terms > CHAIN_TERMS:
                failure = _push_chain(stack, spine, depth, height)
                if failure is not None:
                    return failure
                continue
        # Reversed, so the leftmost (earliest) offending subtree is reported.
        children = [child for child in node.children if isinstance(child, Tree)]
        for index in reversed(range(len(children))):
            child = children[index]
            flat = index == 0 and _continues_chain(node, child)
            more = index == 0 and operator is not None and _chain_operator(child) == operator
            stack.append((child, depth if flat else depth + 1, height + 1, more))
    return long


def _spine(node: Tree[Token], operator: str) -> list[Tree[Token]]:
    """The nodes of the chain `node` tops: `node`, its left operand if it continues it, and so on."""
    spine = [node]
    while _chain_operator(spine[-1].children[0]) == operator:
        child = spine[-1].children[0]
        assert isinstance(child, Tree)
        spine.append(child)
    return spine


def _push_chain(stack: list[tuple[Tree[Token], int, int, bool]], spine: list[Tree[Token]], depth: int, height: int
                ) -> ParseFailure | None:  # fmt: skip
    """Push the terms of a chain that is one node of the candidate: each one level below it."""
    depths = [depth]
    for upper, lower in itertools.pairwise(spine):
        # A left operand in parentheses is nesting, even inside a chain.
        depths.append(depths[-1] if _continues_chain(upper, lower) else depths[-1] + 1)
        if depths[-1] > MAX_TREE_DEPTH:
            return _nested_too_deeply(_tree_span(lower))
    bottom = spine[-1]
    first = bottom.children[0]
    # The terms in written order: the bottom's left operand, then each right operand upwards.
    terms = [(first, depths[-1] if isinstance(first, Tree) and _continues_chain(bottom, first) else depths[-1] + 1)]
    terms += [
        (node.children[-1], node_depth + 1) for node, node_depth in zip(reversed(spine), reversed(depths), strict=True)
    ]
    for term, term_depth in reversed(terms):
        if isinstance(term, Tree):
            stack.append((term, term_depth, height + 1, False))
    return None


def _chain_too_long(span: Span) -> ParseFailure:
    return ParseFailure(
        [
            Diagnostic(
                code="PW187",
                severity=Severity.ERROR,
                message="expression too long: more than about "
                f"{MAX_CHAIN_DEPTH - 10} operators in one chain that mixes operators (`a + b - c ...`) "
                "or of `-`, `*`, `/`",
                span=span,
                hint="split it into several guards or invariants, or group terms in parentheses",
            )
        ]
    )


def _chain_too_many_terms(span: Span, operator: str, terms: int) -> ParseFailure:
    return ParseFailure(
        [
            Diagnostic(
                code="PW187",
                severity=Severity.ERROR,
                message=f"expression too long: {terms} terms in one chain of `{operator}`; "
                f"the limit is {MAX_CHAIN_TERMS}",
                span=span,
                hint="split it into several guards or invariants, or group terms in parentheses",
            )
        ]
    )


def _nested_too_deeply(span: Span) -> ParseFailure:
    return ParseFailure(
        [
            Diagnostic(
                code="PW113",
                severity=Severity.ERROR,
                message="expression nested too deeply",
                span=span,
                hint=f"split the expression; nesting (parentheses, `not`, `-`, right operands) is limited to "
                f"about {MAX_TREE_DEPTH - 5} levels; a long flat chain such as `a + b + c` counts as one",
            )
        ]
    )


def parse_policy(text: str) -> ast.PolicyAst:
    """Parse policy text into its syntax tree.

    Raises `ParseFailure` with diagnostics (never a lark exception) when the
    text is not a policy; lexical problems found inside well-formed tokens
    (bad string escapes) are reported the same way.
    """
    # What a reviewer sees must be what is parsed: a lone CR ends a line in
    # editors and terminals, so it ends one here (else a comment would swallow
    # the declarations after it), and bidi controls, which reorder what is
    # displayed (CVE-2021-42574), are refused.
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    hidden = _BIDI.search(text) or _ODD_BREAK.search(text)
    if hidden is not None:
        index = hidden.start()
        line = text.count("\n", 0, index) + 1
        column = index - (text.rfind("\n", 0, index) + 1) + 1
        raise ParseFailure(
            [
                Diagnostic(
                    code="PW101",
                    severity=Severity.ERROR,
                    message=f"unexpected character `U+{ord(hidden.group()):04X}` "
                    f"({'a bidirectional text control' if _BIDI.match(hidden.group()) else 'an unusual line break'})",
                    span=Span(line=line, column=column, end_line=line, end_column=column + 1),
                    hint="remove it: it makes the text display differently from how it is read",
                )
            ]
        )
    lark, builder, literals, _ = _parser()
    builder.diagnostics = []
    builder.source = text
    try:
        raw = lark.parse(text)
    except UnexpectedInput as exc:
        raise ParseFailure([_syntax_diagnostic(exc, text, literals)]) from None
    except _GluedWord as glued:
        raise ParseFailure([_glued_diagnostic(glued.token, text, literals)]) from None
    deep = _too_deep(raw)
    if deep is not None:
        raise deep
    try:
        tree = builder.transform(raw)
    except (RecursionError, VisitError) as exc:
        if isinstance(exc, VisitError) and not isinstance(exc.orig_exc, RecursionError):
            raise
        raise _nested_too_deeply(Span(line=1, column=1, end_line=1, end_column=1)) from None
    if builder.diagnostics:
        raise ParseFailure(sorted(builder.diagnostics, key=Diagnostic.sort_key))
    assert isinstance(tree, ast.PolicyAst)
    return tree
