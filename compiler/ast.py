"""The syntax tree of a `.pact` file: frozen nodes that keep every span.

The tree is faithful to the text (declaration order, literal spellings,
labels, spans); the canonical candidate is derived from it by
`normalize.py`, which forgets everything that does not change the meaning.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from pactwright.diagnostics import Span

# Frozen slotted dataclasses rather than pydantic models: the parser builds
# one node per token, and construction cost is most of a large file's check.


@dataclass(frozen=True, slots=True, kw_only=True)
class Node:
    span: Span


@dataclass(frozen=True, slots=True, kw_only=True)
class Ident(Node):
    """A name (lowercase identifier) or an upper-case word (`EUR`, `R4`, `GET`)."""

    name: str


@dataclass(frozen=True, slots=True, kw_only=True)
class StringLit(Node):
    """A string literal; `value` has its escapes resolved."""

    value: str


@dataclass(frozen=True, slots=True, kw_only=True)
class NumberLit(Node):
    """Any numeric literal as written; classified by `literals.py`."""

    text: str


# Expressions -----------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class NumberExpr(Node):
    kind: Literal["number"] = "number"
    text: str


@dataclass(frozen=True, slots=True, kw_only=True)
class StringExpr(Node):
    kind: Literal["string"] = "string"
    value: str


@dataclass(frozen=True, slots=True, kw_only=True)
class NameExpr(Node):
    kind: Literal["name"] = "name"
    name: str


@dataclass(frozen=True, slots=True, kw_only=True)
class NowExpr(Node):
    kind: Literal["now"] = "now"


@dataclass(frozen=True, slots=True, kw_only=True)
class FinalExpr(Node):
    kind: Literal["final"] = "final"


@dataclass(frozen=True, slots=True, kw_only=True)
class CallExpr(Node):
    kind: Literal["call"] = "call"
    function: str
    arg: Ident


@dataclass(frozen=True, slots=True, kw_only=True)
class UnaryExpr(Node):
    kind: Literal["unary"] = "unary"
    op: Literal["-", "not"]
    operand: Expr


@dataclass(frozen=True, slots=True, kw_only=True)
class BinaryExpr(Node):
    kind: Literal["binary"] = "binary"
    op: str
    left: Expr
    right: Expr
    op_span: Span


Expr = NumberExpr | StringExpr | NameExpr | NowExpr | FinalExpr | CallExpr | UnaryExpr | BinaryExpr


# Declarations ----------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class Header(Node):
    pact_id: StringLit
    version: StringLit


@dataclass(frozen=True, slots=True, kw_only=True)
class CurrencyDecl(Node):
    kind: Literal["currency"] = "currency"
    code: Ident
    scale: NumberLit


@dataclass(frozen=True, slots=True, kw_only=True)
class DefaultDecl(Node):
    kind: Literal["default"] = "default"


@dataclass(frozen=True, slots=True, kw_only=True)
class RoleDecl(Node):
    kind: Literal["role"] = "role"
    name: Ident
    untrusted: bool = False
    clock: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class ParamDecl(Node):
    kind: Literal["param"] = "param"
    name: Ident
    type: Literal["money", "percent", "duration", "text"]
    low: NumberLit | None = None
    high: NumberLit | None = None
    value: NumberLit | None = None
    pattern: StringLit | None = None
    options: tuple[Ident, ...] = ()
    # A bound written as another param's name (new in 1.1): `between 0.00 and price`
    # has `low` and `high_ref`, never both `high` and `high_ref`.
    low_ref: Ident | None = None
    high_ref: Ident | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class AccountDecl(Node):
    kind: Literal["account"] = "account"
    name: Ident
    address: StringLit
    external: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class BudgetItem(Node):
    key: str
    value: NumberLit


@dataclass(frozen=True, slots=True, kw_only=True)
class BudgetDecl(Node):
    kind: Literal["budget"] = "budget"
    items: tuple[BudgetItem, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class RuleDecl(Node):
    kind: Literal["rule"] = "rule"
    risk: Ident
    decision: Literal["allow", "allow_with_grant", "require_approval", "deny"]


@dataclass(frozen=True, slots=True, kw_only=True)
class EffectField(Node):
    """One field of an effect; `args` are its operands in written order.

    `amount EXPR` is the one field whose operand is an expression: its `args`
    are empty and `expr` holds it.
    """

    key: str
    args: tuple[Ident | StringLit | NumberLit, ...]
    expr: Expr | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class EffectDecl(Node):
    kind: Literal["effect"] = "effect"
    name: Ident
    fields: tuple[EffectField, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class StateDecl(Node):
    kind: Literal["state"] = "state"
    name: Ident
    flags: tuple[Ident, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class ByField(Node):
    kind: Literal["by"] = "by"
    roles: tuple[Ident, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class WhenField(Node):
    kind: Literal["when"] = "when"
    expr: Expr


@dataclass(frozen=True, slots=True, kw_only=True)
class StampField(Node):
    kind: Literal["stamp"] = "stamp"
    name: Ident


@dataclass(frozen=True, slots=True, kw_only=True)
class Portion(Node):
    """A split portion; `share` is None for `remaining`.

    New in 1.1: a portion's part may go on to a nested split, `block`, in
    place of an account; `target` is then None.
    """

    share: NumberLit | Ident | None
    target: Ident | None
    block: tuple[Portion, ...] | None = None


def all_portions(portions: tuple[Portion, ...]) -> list[Portion]:
    """Every portion of a split, each nested split's after the portion that holds it."""
    out: list[Portion] = []
    for portion in portions:
        out.append(portion)
        if portion.block is not None:
            out.extend(all_portions(portion.block))
    return out


def leaf_portions(portions: tuple[Portion, ...]) -> list[Portion]:
    """The portions that name an account, nested splits' included, in written order."""
    out: list[Portion] = []
    for portion in portions:
        if portion.block is not None:
            out.extend(leaf_portions(portion.block))
        else:
            out.append(portion)
    return out


@dataclass(frozen=True, slots=True, kw_only=True)
class TransferField(Node):
    kind: Literal["transfer"] = "transfer"
    amount: Expr
    source: Ident
    destination: Ident | None = None
    portions: tuple[Portion, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class CallField(Node):
    """`call EFFECT [amount EXPR]`: the amount, when given, is what this call carries."""

    kind: Literal["call"] = "call"
    effect: Ident
    amount: Expr | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ApprovalField(Node):
    kind: Literal["approval"] = "approval"
    role: Ident
    not_requester: bool
    # Four eyes (new in 1.1): the further roles of `approval by A, B distinct`, or the N of
    # `approvals N by R distinct`, and whether `distinct` was written.
    also: tuple[Ident, ...] = ()
    count: NumberExpr | None = None
    distinct: bool = False


TransitionField = ByField | WhenField | StampField | TransferField | CallField | ApprovalField


@dataclass(frozen=True, slots=True, kw_only=True)
class TransitionDecl(Node):
    kind: Literal["transition"] = "transition"
    clause: StringLit | None
    name: Ident
    sources: tuple[Ident, ...]
    target: Ident
    fields: tuple[TransitionField, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class InvariantDecl(Node):
    kind: Literal["invariant"] = "invariant"
    clause: StringLit | None
    name: Ident
    expr: Expr


@dataclass(frozen=True, slots=True, kw_only=True)
class PropertyDecl(Node):
    """`property NAME: P leads_to Q`, or `property NAME: eventually final` (premise and goal None)."""

    kind: Literal["property"] = "property"
    clause: StringLit | None
    name: Ident
    premise: Expr | None
    goal: Expr | None


@dataclass(frozen=True, slots=True, kw_only=True)
class LimitDecl(Node):
    """`limit NAME: total(EFFECT) <= MONEY per DURATION [per ROLE]` (new in 1.1)."""

    kind: Literal["limit"] = "limit"
    name: Ident
    effect: Ident
    op: str
    op_span: Span
    amount: NumberLit
    window: NumberLit
    per_role: Ident | None = None


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
    | PropertyDecl
    | LimitDecl
)


@dataclass(frozen=True, slots=True, kw_only=True)
class PolicyAst(Node):
    header: Header
    decls: tuple[Decl, ...]
