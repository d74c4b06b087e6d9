"""The canonical candidate: the normalized meaning of a policy.

This is what a human approves by hash. It is independent of comments,
whitespace, declaration order and literal spelling (`12.5` = `12.50`,
`1d12h` = `36h`), and it includes clause labels, because reviewers approve
them. Source spans are not here: they live in the compiler's source map.

Collections whose order carries no meaning (roles, states, params, the
sources of a transition...) are sorted by name; collections whose order is
meaning (transfers in a transition, split portions) keep written order.
Money is a decimal string of minor units; percents are exact decimal text
without `%`; durations are whole seconds.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict

from pactwright.canonical import canonical_bytes, hash_bytes

CANDIDATE_FORMAT = "pactwright.candidate/1"

ValueType = Literal["money", "int", "percent", "duration", "time", "bool", "text"]


class Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


# Flat chains (new in 1.1). A chain `a + b + c` is a tree that leans left one
# level a term, which no later stage should have to hold for a hundred terms
# (a JSON document nests two levels a node, pydantic and CPython's compiler
# stop near 255 and 200). So a chain of one associative operator with more
# than CHAIN_TERMS terms is a single n-ary node. Shorter chains keep the
# binary form: 1.0 accepted chains of at most 98 terms, so every candidate
# written before has the same bytes and hash. The threshold is part of the
# canonical form and never changes.
CHAIN_OPERATORS = frozenset({"+", "and", "or"})
CHAIN_TERMS = 100


class Expr(Frozen):
    """A typed expression tree.

    `op` is one of: `lit` (value), `param` / `stamp` (name), `now`, `final`,
    `balance` / `applied` / `fired` / `total` / `reached` / `approved` (name),
    `acknowledged` / `reconciled` / `abandoned` (an effect's name; new in 1.1),
    `neg` / `not` (one arg), arithmetic `+ - * /`, comparisons
    `== != < <= > >=`, and `and` / `or` / `implies` (two args). Every node
    carries its static type so consumers never re-infer it.

    New in 1.1, a chain of one of CHAIN_OPERATORS longer than CHAIN_TERMS
    terms (`a + b + ... + z`) is one node whose `args` are its terms in
    written order, read left to right (`((a + b) + c) + ...`); see
    `CHAIN_TERMS` for why shorter chains keep their binary form.
    """

    op: str
    type: ValueType
    name: str | None = None
    value: str | None = None
    args: tuple[Expr, ...] = ()


class PactId(Frozen):
    id: str
    version: str


class CurrencySpec(Frozen):
    code: str
    scale: int


class Role(Frozen):
    name: str
    trusted: bool
    clock: bool


class Param(Frozen):
    """A per-agreement value: a range (`min`/`max`), a fixed `value`, or text.

    New in 1.1, a money range's bound may be another money param's name
    (`between 0.00 and price`): `min_param` / `max_param` hold it, in place of
    `min` / `max` on that side, and are omitted when unused, so the
    candidates of policies that never write the form keep their hashes.
    """

    name: str
    type: Literal["money", "percent", "duration", "text"]
    min: str | None = None
    max: str | None = None
    value: str | None = None
    pattern: str | None = None
    options: tuple[str, ...] = ()
    min_param: str | None = None
    max_param: str | None = None


class Account(Frozen):
    name: str
    address: str
    external: bool


class Budget(Frozen):
    max_turns: int | None = None
    max_model_calls: int | None = None
    max_tool_calls: int | None = None
    max_active_time: int | None = None
    ceiling: str | None = None


class Rule(Frozen):
    risk: str
    decision: Literal["allow", "allow_with_grant", "require_approval", "deny"]


class Egress(Frozen):
    method: str
    url: str


class Strategy(Frozen):
    kind: Literal["retry", "idempotent", "reconcilable", "once", "compensate"]
    compensation: str | None = None


class Effect(Frozen):
    name: str
    risk: str
    reversibility: Literal["reversible", "irreversible", "compensable", "not_applicable"] | None = None
    scopes: tuple[str, ...] = ()
    egress: tuple[Egress, ...] = ()
    max_calls: int | None = None
    timeout: int | None = None
    ceiling: str | None = None
    strategy: Strategy | None = None
    key: tuple[str, ...] = ()
    consequence: str | None = None
    amount: Expr | None = None


class State(Frozen):
    name: str
    initial: bool
    final: bool


class Portion(Frozen):
    """One part of a split: `percent` or `amount` (a cap), or `remaining`.

    New in 1.1, a portion's part may go on to a nested split: `split` holds
    its portions in place of `to`. It is omitted when unused, so the
    candidates of policies that never nest keep their hashes.
    """

    kind: Literal["percent", "amount", "remaining"]
    value: str | None = None
    param: str | None = None
    to: str | None = None
    split: tuple[Portion, ...] | None = None


class Transfer(Frozen):
    amount: Expr
    source: str
    destination: str | None = None
    portions: tuple[Portion, ...] = ()


class Call(Frozen):
    """A call site that states its own amount: `call EFFECT amount EXPR`.

    A call without one stays a bare effect name in `Transition.calls`, so the
    candidates of policies that never write the form keep their hashes.
    """

    effect: str
    amount: Expr


class Approval(Frozen):
    """`approval by ROLE [not requester]`; new in 1.1, four eyes (omitted when unused, so old hashes stay):
    `also` holds the further roles of `approval by A, B distinct`, `count` the N of `approvals N by R distinct`."""

    role: str
    not_requester: bool
    also: tuple[str, ...] | None = None
    count: int | None = None

    def slots(self) -> tuple[str, ...]:
        """The role of each required approval, one entry per approval (each from a distinct party)."""
        if self.count is not None:
            return (self.role,) * self.count
        return (self.role, *(self.also or ()))


class Transition(Frozen):
    name: str
    clause: str | None
    sources: tuple[str, ...]
    target: str
    roles: tuple[str, ...]
    guard: Expr | None = None
    stamps: tuple[str, ...] = ()
    transfers: tuple[Transfer, ...] = ()
    calls: tuple[str | Call, ...] = ()
    approval: Approval | None = None

    def call_sites(self) -> tuple[tuple[str, Expr | None], ...]:
        """(effect, amount written at the call site or None) for each call, in order."""
        return tuple((c, None) if isinstance(c, str) else (c.effect, c.amount) for c in self.calls)


class Invariant(Frozen):
    name: str
    clause: str | None
    expr: Expr


class Property(Frozen):
    """A liveness property (new in 1.1): `premise leads_to goal`, or `eventually final`.

    Both expressions are absent for `eventually final`, which reads as
    `true leads_to final`.
    """

    name: str
    clause: str | None
    kind: Literal["leads_to", "eventually_final"]
    premise: Expr | None = None
    goal: Expr | None = None


class Limit(Frozen):
    """A limit across agreements (new in 1.1): `limit NAME: total(EFFECT) <= MAX per WINDOW [per ROLE]`.

    `max` is minor units (decimal text, as every amount); `window` seconds;
    `per` the role whose party the usage is counted for, absent for the
    whole pact.
    """

    name: str
    effect: str
    max: str
    window: int
    per: str | None = None


class Candidate(Frozen):
    format: Literal["pactwright.candidate/1"] = "pactwright.candidate/1"
    pact: PactId
    currency: CurrencySpec
    default: Literal["deny"] = "deny"
    roles: tuple[Role, ...]
    params: tuple[Param, ...]
    accounts: tuple[Account, ...]
    budget: Budget | None = None
    rules: tuple[Rule, ...]
    effects: tuple[Effect, ...]
    states: tuple[State, ...]
    transitions: tuple[Transition, ...]
    invariants: tuple[Invariant, ...]
    # New in 1.1; None (omitted from the hashed JSON) when the policy declares none,
    # so a policy without properties keeps its hash.
    properties: tuple[Property, ...] | None = None
    # New in 1.1, omitted likewise when the policy declares no `limit`.
    limits: tuple[Limit, ...] | None = None

    def to_json(self) -> dict[str, object]:
        """The JSON form that is hashed: absent optional fields are omitted."""
        return self.model_dump(mode="json", exclude_none=True, exclude_defaults=False)

    def canonical_bytes(self) -> bytes:
        return canonical_bytes(self.to_json())

    def hash(self) -> str:
        return hash_bytes(self.canonical_bytes())


Expr.model_rebuild()
