"""Type expressions and lower them to the candidate's typed trees.

Typing is where meaning is fixed: an integer literal next to money means
whole currency units (`balance(x) >= 0` equals `balance(x) >= 0.00`), a bare
name is a param or a stamp, and arithmetic that would need rounding is only
allowed where the language says it rounds down (money times percent, money
divided by an integer).
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from typing import Any

from pactwright.candidate import CHAIN_OPERATORS, CHAIN_TERMS, Expr, ValueType
from pactwright.compiler import ast
from pactwright.compiler.literals import LiteralProblem, classify
from pactwright.compiler.symbols import Symbols
from pactwright.diagnostics import Diagnostic, Severity, Span

# Fuzzy-matching every unknown name against a huge table is quadratic; past
# this many names a suggestion is skipped (a hostile file must stay cheap).
SUGGEST_LIMIT = 200

_COMPARISONS = {"==", "!=", "<", "<=", ">", ">="}
_ORDERED = {"money", "int", "percent", "duration", "time"}
_LOGICAL = {"and", "or", "implies"}

# (left, op, right) -> result type, for arithmetic.
_ARITHMETIC: dict[tuple[str, str, str], ValueType] = {
    ("money", "+", "money"): "money",
    ("money", "-", "money"): "money",
    ("int", "+", "int"): "int",
    ("int", "-", "int"): "int",
    ("int", "*", "int"): "int",
    ("int", "/", "int"): "int",
    ("money", "*", "percent"): "money",
    ("percent", "*", "money"): "money",
    ("money", "*", "int"): "money",
    ("int", "*", "money"): "money",
    ("money", "/", "int"): "money",
    ("percent", "+", "percent"): "percent",
    ("percent", "-", "percent"): "percent",
    ("time", "+", "duration"): "time",
    ("duration", "+", "time"): "time",
    ("time", "-", "duration"): "time",
    ("time", "-", "time"): "duration",
    ("duration", "+", "duration"): "duration",
    ("duration", "-", "duration"): "duration",
    ("duration", "*", "int"): "duration",
    ("int", "*", "duration"): "duration",
}

_ARITHMETIC_OPS = frozenset(op for _, op, _ in _ARITHMETIC)

_FUNCTIONS: dict[str, tuple[tuple[str, ...], ValueType]] = {
    "balance": (("account",), "money"),
    "applied": (("transition", "effect"), "int"),
    "fired": (("transition",), "int"),
    "total": (("effect",), "money"),
    "reached": (("state",), "bool"),
    "approved": (("transition",), "bool"),
    # New in 1.1 (four eyes): how many approvals the commit of a transition consumed (docs/language.md).
    "approvals": (("transition",), "int"),
    # New in 1.1: whether the latest call at some `call E` stands in that outcome (docs/language.md).
    "acknowledged": (("effect",), "bool"),
    "reconciled": (("effect",), "bool"),
    "abandoned": (("effect",), "bool"),
}
OUTCOMES = frozenset({"acknowledged", "reconciled", "abandoned"})


def _approval_count(decl: ast.TransitionDecl) -> int:
    """How many approvals a commit of `decl` consumes: `approvals(T)` reads this once T committed."""
    for tfield in decl.fields:
        if isinstance(tfield, ast.ApprovalField):
            if tfield.count is not None:
                return int(tfield.count.text) if tfield.count.text.isdigit() else 1
            return 1 + len(tfield.also)
    return 0


class ExpressionTyper:
    """Types one policy's expressions, collecting diagnostics instead of raising."""

    def __init__(self, sym: Symbols) -> None:
        self.sym = sym
        self.scale = sym.scale
        self.diagnostics: list[Diagnostic] = []
        # Unresolved bare words, by node identity, so errors point at the word.
        self._word_spans: dict[int, Span] = {}

    def _error(self, code: str, message: str, span: Span, hint: str) -> None:
        self.diagnostics.append(Diagnostic(code=code, severity=Severity.ERROR, message=message, span=span, hint=hint))

    def lower(self, expr: ast.Expr, expect: ValueType | None = None) -> Expr | None:
        """The typed tree of `expr`, or None after reporting why it has none."""
        node = self._lower(expr)
        if node is None:
            return None
        if node.op == "word":
            self._unknown_word(node, expr.span)
            return None
        if expect is not None:
            node = self._coerce(node, expect)
            if node.type != expect:
                self._error(
                    "PW137",
                    f"expected a {expect} expression, found {node.type}",
                    expr.span,
                    "guards and invariants are true/false; transfer amounts are money",
                )
                return None
        return node

    def lower_amount(self, expr: ast.Expr) -> Expr | None:
        """The typed tree of an effect's declared amount, of whatever type it has.

        Unlike `lower(expr, "money")` it reports no type error: the effect
        checks say what an amount must be (PW160). An integer literal is
        whole currency units, as everywhere beside money.
        """
        node = self.lower(expr)
        return None if node is None else self._coerce(node, "money")

    def _coerce(self, node: Expr, target: str) -> Expr:
        if node.op == "lit" and node.type == "int" and target == "money":
            assert node.value is not None
            return Expr(op="lit", type="money", value=str(int(node.value) * 10**self.scale))
        if node.op == "neg" and node.type == "int" and target == "money" and node.args[0].op == "lit":
            # `-5` beside money is `-5.00`, as `5` is `5.00`.
            return Expr(op="neg", type="money", args=(self._coerce(node.args[0], target),))
        return node

    def _lower(self, expr: ast.Expr) -> Expr | None:
        method: Callable[[ast.Expr], Expr | None] = getattr(self, f"_lower_{expr.kind}")
        return method(expr)

    def _lower_number(self, expr: ast.Expr) -> Expr | None:
        assert isinstance(expr, ast.NumberExpr)
        found = classify(expr.text, self.scale)
        if isinstance(found, LiteralProblem):
            self._error(found.code, found.message, expr.span, found.hint)
            return None
        return Expr(op="lit", type=found.kind, value=found.value)

    def _lower_string(self, expr: ast.Expr) -> Expr | None:
        assert isinstance(expr, ast.StringExpr)
        return Expr(op="lit", type="text", value=expr.value)

    def _lower_name(self, expr: ast.Expr) -> Expr | None:
        assert isinstance(expr, ast.NameExpr)
        if expr.name in self.sym.params:
            return Expr(op="param", type=self.sym.params[expr.name].type, name=expr.name)
        if expr.name in self.sym.stamps:
            return Expr(op="stamp", type="time", name=expr.name)
        # A bare word may be one of a text param's options; the comparison
        # that holds it resolves it (see `_lower_binary`).
        word = Expr(op="word", type="text", value=expr.name)
        self._word_spans[id(word)] = expr.span
        return word

    def _lower_now(self, expr: ast.Expr) -> Expr | None:
        return Expr(op="now", type="time")

    def _lower_final(self, expr: ast.Expr) -> Expr | None:
        return Expr(op="final", type="bool")

    def _lower_call(self, expr: ast.Expr) -> Expr | None:
        assert isinstance(expr, ast.CallExpr)
        kinds, result = _FUNCTIONS[expr.function]
        name = expr.arg.name
        tables: dict[str, dict[str, Any]] = {
            "account": self.sym.accounts,
            "transition": self.sym.transitions,
            "effect": self.sym.effects,
            "state": self.sym.states,
        }
        for kind in kinds:
            if name in tables[kind]:
                value = kind if expr.function == "applied" else None
                if expr.function == "approvals":
                    value = str(_approval_count(tables[kind][name]))
                return Expr(op=expr.function, type=result, name=name, value=value)
        if expr.function in OUTCOMES and self._outcome_of_other(expr, tables):
            return None
        wanted = " or ".join(kinds)
        self._error(
            "PW120",
            f"unknown {wanted} `{name}` in `{expr.function}(...)`",
            expr.arg.span,
            _suggest(name, tuple(tables[kind] for kind in kinds), wanted),
        )
        return None

    def _outcome_of_other(self, expr: ast.CallExpr, tables: dict[str, dict[str, Any]]) -> bool:
        """`acknowledged(X)` where X names a transition, state or account, not an effect (PW162)."""
        kind = next((k for k in ("transition", "state", "account") if expr.arg.name in tables[k]), None)
        if kind is None:
            return False
        self._error(
            "PW162",
            f"`{expr.function}(...)` reads an effect's calls; `{expr.arg.name}` is a {kind}",
            expr.arg.span,
            "name an effect that a transition calls, e.g. `acknowledged(refund_payment)`"
            + ("; for a transition use `fired(...)`" if kind == "transition" else ""),
        )
        return True

    def _outcome_as_value(self, expr: ast.BinaryExpr, op: str, left: Expr, right: Expr) -> bool:
        """An effect outcome used as a number or ordered (PW164): it is true/false, never a count."""
        outcome = next((side for side in (left, right) if side.op in OUTCOMES), None)
        if outcome is None or (op in ("==", "!=") and left.type == right.type == "bool"):
            return False
        self._error(
            "PW164",
            f"`{outcome.op}({outcome.name})` is true/false and cannot be used with `{op}`",
            expr.op_span,
            f"write `{outcome.op}({outcome.name})` as a condition; to count calls that took effect, "
            f"use `applied({outcome.name})`",
        )
        return True

    def _lower_unary(self, expr: ast.Expr) -> Expr | None:
        assert isinstance(expr, ast.UnaryExpr)
        operand = self._lower(expr.operand)
        if operand is None:
            return None
        if operand.op == "word":
            self._unknown_word(operand, expr.operand.span)
            return None
        if expr.op == "not":
            if operand.type != "bool":
                self._error(
                    "PW137", f"`not` needs a true/false operand, found {operand.type}", expr.span, "compare first"
                )
                return None
            return Expr(op="not", type="bool", args=(operand,))
        if operand.type not in ("money", "int", "duration", "percent"):
            self._error("PW137", f"cannot negate a {operand.type} value", expr.span, "negate numbers only")
            return None
        return Expr(op="neg", type=operand.type, args=(operand,))

    def _lower_binary(self, expr: ast.Expr) -> Expr | None:
        """A binary node and the chain it tops, left to right without recursion.

        `a + b + c` leans left one level a term; its left spine is walked in
        a loop and typed from the bottom up exactly as one operator at a time
        would be (only right operands recurse: that is nesting, PW113). A run
        of one of CHAIN_OPERATORS longer than CHAIN_TERMS terms becomes one
        node of the candidate (candidate.py).
        """
        assert isinstance(expr, ast.BinaryExpr)
        spine = [expr]
        while isinstance(spine[-1].left, ast.BinaryExpr):
            spine.append(spine[-1].left)
        node = self._lower(spine[-1].left)
        run: list[Expr] = []  # the terms of the chain of one operator that `node` ends
        spine.reverse()
        for index, binary in enumerate(spine):
            right = self._lower(binary.right)
            if node is None or right is None:
                node, run = None, []
                continue
            combined = self._combine(binary, node, right)
            if combined is None or combined.op not in CHAIN_OPERATORS:
                node, run = combined, []
                continue
            if run and node.op == combined.op:
                run.append(combined.args[1])
            else:
                run = list(combined.args)
            node = combined
            ends = index + 1 == len(spine) or spine[index + 1].op != binary.op
            if ends and len(run) > CHAIN_TERMS:
                node = Expr(op=combined.op, type=combined.type, args=tuple(run))
        return node

    def _combine(self, expr: ast.BinaryExpr, left: Expr, right: Expr) -> Expr | None:
        """The typed node of one operator over its typed operands, or None after reporting why."""
        op = expr.op
        if op in _LOGICAL:
            if left.type != "bool" or right.type != "bool":
                bad = left.type if left.type != "bool" else right.type
                self._error(
                    "PW137", f"`{op}` needs true/false operands, found {bad}", expr.op_span, "compare values first"
                )
                return None
            return Expr(op=op, type="bool", args=(left, right))
        if op in _COMPARISONS or op in ("+", "-"):
            # An integer literal beside money is whole currency units; as a
            # factor or divisor (`balance(x) * 3`) it stays a plain integer.
            left, right = self._coerce(left, right.type), self._coerce(right, left.type)
        if (op in _COMPARISONS or op in _ARITHMETIC_OPS) and self._outcome_as_value(expr, op, left, right):
            return None
        if op in _COMPARISONS:
            return self._comparison(expr, op, left, right)
        for side in (left, right):
            if side.op == "word":
                self._unknown_word(side, expr.span)
                return None
        result = _ARITHMETIC.get((left.type, op, right.type))
        if result is None:
            self._error(
                "PW137",
                f"cannot apply `{op}` to {left.type} and {right.type}",
                expr.op_span,
                "money times a percent or an integer rounds down; money plus money stays money",
            )
            return None
        return Expr(op=op, type=result, args=(left, right))

    def _comparison(self, expr: ast.BinaryExpr, op: str, left: Expr, right: Expr) -> Expr | None:
        if left.type == "text" and right.type == "text":
            resolved_left = self._resolve_word(left, right, expr)
            resolved_right = self._resolve_word(right, left, expr)
            if resolved_left is None or resolved_right is None:
                return None
            left, right = resolved_left, resolved_right
            if op not in ("==", "!="):
                self._error(
                    "PW137",
                    f"text can only be compared with `==` or `!=`, not `{op}`",
                    expr.op_span,
                    "text has no order: compare it with `==` or `!=`",
                )
                return None
            return Expr(op=op, type="bool", args=(left, right))
        if left.type != right.type or (op not in ("==", "!=") and left.type not in _ORDERED):
            for side in (left, right):
                if side.op == "word":
                    self._unknown_word(side, expr.span)
                    return None
            self._error(
                "PW137",
                f"cannot compare {left.type} with {right.type}",
                expr.op_span,
                "compare values of the same kind: money with money, time with time",
            )
            return None
        return Expr(op=op, type="bool", args=(left, right))

    def _resolve_word(self, node: Expr, other: Expr, expr: ast.BinaryExpr) -> Expr | None:
        if node.op != "word":
            return node
        word = node.value or ""
        if other.op == "param" and other.name is not None:
            options = [o.name for o in self.sym.params[other.name].options]
            if word in options:
                return Expr(op="lit", type="text", value=word)
            if options:
                self._error(
                    "PW120",
                    f"`{word}` is not one of param `{other.name}`'s values",
                    self._word_spans.get(id(node), expr.span),
                    f"one of: {', '.join(options)}",
                )
                return None
        self._unknown_word(node, expr.span)
        return None

    def _unknown_word(self, node: Expr, span: Span) -> None:
        word = node.value or ""
        span = self._word_spans.get(id(node), span)
        hint = _suggest(word, (self.sym.params, self.sym.stamps), "param or stamp")
        self._error("PW120", f"unknown name `{word}`", span, hint)


def _suggest(name: str, tables: tuple[Collection[str], ...], kind: str) -> str:
    import difflib

    count = sum(len(table) for table in tables)
    if count > SUGGEST_LIMIT:
        # Suggesting is quadratic over many unknown names; keep hostile files cheap.
        return f"none of the {count} declared {kind} names is `{name}`; check the spelling"
    known = [n for table in tables for n in table]
    close = difflib.get_close_matches(name, known, n=1)
    if close:
        return f"did you mean `{close[0]}`?"
    if known:
        return f"declared {kind} names: {', '.join(sorted(known)[:6])}"
    return f"declare the {kind} first"
