"""The syntax tree of a `.pact` file: frozen models that keep every span.

The tree is faithful to the text (declaration order, literal spellings,
labels, spans); the canonical candidate is derived from it by
`normalize.py`, which forgets everything that does not change the meaning.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict

from pactwright.diagnostics import Span


class Node(BaseModel):
    model_config = ConfigDict(frozen=True)

    span: Span


class Ident(Node):
    """A name (lowercase identifier) or an upper-case word (`EUR`, `R4`, `GET`)."""

    name: str


class StringLit(Node):
    """A string literal; `value` has its escapes resolved."""

    value: str


class NumberLit(Node):
    """Any numeric literal as written; classified by `literals.py`."""

    text: str


# Expressions -----------------------------------------------------------------


class NumberExpr(Node):
    kind: Literal["number"] = "number"
    text: str


class StringExpr(Node):
    kind: Literal["string"] = "string"
    value: str


class NameExpr(Node):
    kind: Literal["name"] = "name"
    name: str


class NowExpr(Node):
    kind: Literal["now"] = "now"


class FinalExpr(Node):
    kind: Literal["final"] = "final"


class CallExpr(Node):
    kind: Literal["call"] = "call"
    function: str
    arg: Ident


class UnaryExpr(Node):
    kind: Literal["unary"] = "unary"
    op: Literal["-", "not"]
    operand: Expr


class BinaryExpr(Node):
    kind: Literal["binary"] = "binary"
    op: str
    left: Expr
    right: Expr
    op_span: Span


Expr = NumberExpr | StringExpr | NameExpr | NowExpr | FinalExpr | CallExpr | UnaryExpr | BinaryExpr


# Declarations ----------------------------------------------------------------


class Header(Node):
    pact_id: StringLit
    version: StringLit


class CurrencyDecl(Node):
    kind: Literal["currency"] = "currency"
    code: Ident
    scale: NumberLit


class DefaultDecl(Node):
    kind: Literal["default"] = "default"


class RoleDecl(Node):
    kind: Literal["role"] = "role"
    name: Ident
    untrusted: bool = False
    clock: bool = False


class ParamDecl(Node):
    kind: Literal["param"] = "param"
    name: Ident
    type: Literal["money", "percent", "duration", "text"]
    low: NumberLit | None = None
    high: NumberLit | None = None
    value: NumberLit | None = None
    pattern: StringLit | None = None
    options: tuple[Ident, ...] = ()


class AccountDecl(Node):
    kind: Literal["account"] = "account"
    name: Ident
    address: StringLit
    external: bool = False


class BudgetItem(Node):
    key: str
    value: NumberLit


class BudgetDecl(Node):
    kind: Literal["budget"] = "budget"
    items: tuple[BudgetItem, ...]


class RuleDecl(Node):
    kind: Literal["rule"] = "rule"
    risk: Ident
    decision: Literal["allow", "allow_with_grant", "require_approval", "deny"]


class EffectField(Node):
    """One field of an effect; `args` are its operands in written order."""

    key: str
    args: tuple[Ident | StringLit | NumberLit, ...]


class EffectDecl(Node):
    kind: Literal["effect"] = "effect"
    name: Ident
    fields: tuple[EffectField, ...]


class StateDecl(Node):
    kind: Literal["state"] = "state"
    name: Ident
    flags: tuple[Ident, ...]


class ByField(Node):
    kind: Literal["by"] = "by"
    roles: tuple[Ident, ...]


class WhenField(Node):
    kind: Literal["when"] = "when"
    expr: Expr


class StampField(Node):
    kind: Literal["stamp"] = "stamp"
    name: Ident


class Portion(Node):
    """A split portion; `share` is None for `remaining`."""

    share: NumberLit | Ident | None
    target: Ident


class TransferField(Node):
    kind: Literal["transfer"] = "transfer"
    amount: Expr
    source: Ident
    destination: Ident | None = None
    portions: tuple[Portion, ...] = ()


class CallField(Node):
    kind: Literal["call"] = "call"
    effect: Ident


class ApprovalField(Node):
    kind: Literal["approval"] = "approval"
    role: Ident
    not_requester: bool


TransitionField = ByField | WhenField | StampField | TransferField | CallField | ApprovalField


class TransitionDecl(Node):
    kind: Literal["transition"] = "transition"
    clause: StringLit | None
    name: Ident
    sources: tuple[Ident, ...]
    target: Ident
    fields: tuple[TransitionField, ...]


class InvariantDecl(Node):
    kind: Literal["invariant"] = "invariant"
    clause: StringLit | None
    name: Ident
    expr: Expr


Decl = (
    CurrencyDecl
    | DefaultDecl
    | RoleDecl
    | ParamDecl
    | AccountDecl
    | BudgetDecl
    | RuleDecl
    | EffectDecl
    | StateDecl
    | TransitionDecl
    | InvariantDecl
)


class PolicyAst(Node):
    header: Header
    decls: tuple[Decl, ...]


UnaryExpr.model_rebuild()
BinaryExpr.model_rebuild()
WhenField.model_rebuild()
TransferField.model_rebuild()
InvariantDecl.model_rebuild()
TransitionDecl.model_rebuild()
PolicyAst.model_rebuild()
