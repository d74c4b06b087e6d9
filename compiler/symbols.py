"""Symbol tables: every declared name, by kind, with its declaration.

Each kind has its own namespace (a role and an account may both be called
`seller`), except the names an expression can mention bare: params and
stamps share one. The first declaration wins; later ones are recorded as
duplicates for the duplicate check to report.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pactwright.compiler import ast
from pactwright.diagnostics import Span


@dataclass(frozen=True, slots=True)
class Duplicate:
    kind: str
    name: str
    first: Span
    again: Span


@dataclass
class Symbols:
    """What a policy declares, indexed for the checks and the normalizer."""

    policy: ast.PolicyAst
    currencies: list[ast.CurrencyDecl] = field(default_factory=list)
    defaults: list[ast.DefaultDecl] = field(default_factory=list)
    budgets: list[ast.BudgetDecl] = field(default_factory=list)
    roles: dict[str, ast.RoleDecl] = field(default_factory=dict)
    params: dict[str, ast.ParamDecl] = field(default_factory=dict)
    accounts: dict[str, ast.AccountDecl] = field(default_factory=dict)
    rules: dict[str, ast.RuleDecl] = field(default_factory=dict)
    effects: dict[str, ast.EffectDecl] = field(default_factory=dict)
    states: dict[str, ast.StateDecl] = field(default_factory=dict)
    transitions: dict[str, ast.TransitionDecl] = field(default_factory=dict)
    invariants: dict[str, ast.InvariantDecl] = field(default_factory=dict)
    properties: dict[str, ast.PropertyDecl] = field(default_factory=dict)
    limits: dict[str, ast.LimitDecl] = field(default_factory=dict)  # new in 1.1
    stamps: dict[str, ast.StampField] = field(default_factory=dict)
    duplicates: list[Duplicate] = field(default_factory=list)

    @property
    def scale(self) -> int:
        """The currency scale, or 2 while the currency is missing or broken."""
        if self.currencies and self.currencies[0].scale.text.isdigit() and len(self.currencies[0].scale.text) < 4:
            return min(int(self.currencies[0].scale.text), 8)
        return 2

    def transition_fields(self, decl: ast.TransitionDecl, kind: str) -> list[ast.TransitionField]:
        return [f for f in decl.fields if f.kind == kind]


def _add(
    table: dict[str, Any], kind: str, name: ast.Ident, decl: Any, dups: list[Duplicate], first_span: Span | None
) -> None:
    if name.name in table:
        assert first_span is not None
        dups.append(Duplicate(kind, name.name, first_span, name.span))
    else:
        table[name.name] = decl


def _ordered(kind: str, name: str, one: Span, other: Span) -> Duplicate:
    """A duplicate across namespaces: whichever comes later in the file is the copy."""
    first, again = sorted((one, other), key=lambda s: (s.line, s.column))
    return Duplicate(kind, name, first, again)


def build_symbols(policy: ast.PolicyAst) -> Symbols:
    """Index every declaration of `policy` by kind and name."""
    sym = Symbols(policy)
    named: list[tuple[dict[str, Any], str, ast.Ident, Any]] = []
    for decl in policy.decls:
        if isinstance(decl, ast.CurrencyDecl):
            sym.currencies.append(decl)
        elif isinstance(decl, ast.DefaultDecl):
            sym.defaults.append(decl)
        elif isinstance(decl, ast.BudgetDecl):
            sym.budgets.append(decl)
        elif isinstance(decl, ast.RoleDecl):
            named.append((sym.roles, "role", decl.name, decl))
        elif isinstance(decl, ast.ParamDecl):
            named.append((sym.params, "param", decl.name, decl))
        elif isinstance(decl, ast.AccountDecl):
            named.append((sym.accounts, "account", decl.name, decl))
        elif isinstance(decl, ast.RuleDecl):
            named.append((sym.rules, "rule", decl.risk, decl))
        elif isinstance(decl, ast.EffectDecl):
            named.append((sym.effects, "effect", decl.name, decl))
        elif isinstance(decl, ast.StateDecl):
            named.append((sym.states, "state", decl.name, decl))
        elif isinstance(decl, ast.TransitionDecl):
            named.append((sym.transitions, "transition", decl.name, decl))
            for tfield in decl.fields:
                if isinstance(tfield, ast.StampField) and tfield.name.name not in sym.stamps:
                    sym.stamps[tfield.name.name] = tfield
        elif isinstance(decl, ast.InvariantDecl):
            named.append((sym.invariants, "invariant", decl.name, decl))
        elif isinstance(decl, ast.PropertyDecl):
            named.append((sym.properties, "property", decl.name, decl))
        elif isinstance(decl, ast.LimitDecl):
            named.append((sym.limits, "limit", decl.name, decl))
    first_spans: dict[tuple[str, str], Span] = {}
    for table, kind, name, decl in named:
        key = (kind, name.name)
        _add(table, kind, name, decl, sym.duplicates, first_spans.get(key))
        first_spans.setdefault(key, name.span)
    # Params and stamps share the bare-name namespace of expressions; so do
    # transitions and effects, which `applied(...)` accepts alike.
    for stamp, stamp_field in sym.stamps.items():
        if stamp in sym.params:
            sym.duplicates.append(_ordered("param or stamp", stamp, sym.params[stamp].name.span, stamp_field.name.span))
    for effect, effect_decl in sym.effects.items():
        if effect in sym.transitions:
            sym.duplicates.append(
                _ordered("transition or effect", effect, sym.transitions[effect].name.span, effect_decl.name.span)
            )
    _property_clashes(sym)
    return sym


def _property_clashes(sym: Symbols) -> None:
    """Invariants and properties share one namespace: the report lists both by name."""
    for name, prop in sym.properties.items():
        if name in sym.invariants:
            first = sym.invariants[name].name.span
            sym.duplicates.append(_ordered("invariant or property", name, first, prop.name.span))
