"""The registry of static checks: one small function per rule, each with its codes.

A new check is one decorated function and one row in the diagnostics test
table. Checks read the symbol tables and the typed expressions in a shared
`CheckContext` and yield diagnostics; they never raise on a bad policy.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from pactwright.candidate import Expr
from pactwright.compiler import ast
from pactwright.compiler.expressions import ExpressionTyper
from pactwright.compiler.symbols import Symbols
from pactwright.diagnostics import Diagnostic, Severity, Span


@dataclass
class CheckContext:
    """What every check may read: the symbols and each expression's typed tree."""

    sym: Symbols
    typer: ExpressionTyper
    guards: dict[str, Expr | None] = field(default_factory=dict)
    invariants: dict[str, Expr | None] = field(default_factory=dict)
    amounts: dict[tuple[str, int], Expr | None] = field(default_factory=dict)
    # Declared effect amounts: by effect name, and by (transition, call index).
    effect_amounts: dict[str, Expr | None] = field(default_factory=dict)
    call_amounts: dict[tuple[str, int], Expr | None] = field(default_factory=dict)
    # Liveness properties (checks/properties.py): name -> (typed premise, typed goal).
    properties: dict[str, tuple[Expr | None, Expr | None]] = field(default_factory=dict)

    def error(self, code: str, message: str, span: Span, hint: str, label: str | None = None) -> Diagnostic:
        return Diagnostic(code=code, severity=Severity.ERROR, message=message, span=span, hint=hint, label=label)

    def warning(self, code: str, message: str, span: Span, hint: str, label: str | None = None) -> Diagnostic:
        return Diagnostic(code=code, severity=Severity.WARNING, message=message, span=span, hint=hint, label=label)

    def transfers(self) -> Iterator[tuple[ast.TransitionDecl, int, ast.TransferField]]:
        for decl in self.sym.transitions.values():
            index = 0
            for tfield in decl.fields:
                if isinstance(tfield, ast.TransferField):
                    yield decl, index, tfield
                    index += 1

    def calls(self) -> Iterator[tuple[ast.TransitionDecl, int, ast.CallField]]:
        for decl in self.sym.transitions.values():
            index = 0
            for tfield in decl.fields:
                if isinstance(tfield, ast.CallField):
                    yield decl, index, tfield
                    index += 1


CheckFn = Callable[[CheckContext], Iterator[Diagnostic]]


@dataclass(frozen=True)
class Check:
    name: str
    codes: tuple[str, ...]
    run: CheckFn


REGISTRY: list[Check] = []


def check(*codes: str) -> Callable[[CheckFn], CheckFn]:
    """Register a check function under the codes it may emit."""

    def register(fn: CheckFn) -> CheckFn:
        REGISTRY.append(Check(fn.__name__, codes, fn))
        return fn

    return register
