"""The typed contract of a bundle: `transitions.json` and `model.json`.

The compiler writes these two documents, the verifier reads `model.json` and
the runtime reads `transitions.json`. Each side reads them through the models
here, so there is one definition of their shape: the emitters validate what
they build before writing it, and a reader refuses a document that does not
have exactly this shape (a missing or extra field, a wrong type, an
expression operator nobody evaluates) before it looks at any value.

The models describe the documents as they are written, byte for byte:
`to_json()` gives back exactly the dictionary that was validated. A field is
one of two kinds, and the difference is visible in the bytes:

- nullable: always present, `null` when absent (a transition's `guard`,
  `approval`, `ledger`; a call's `amount`). Such a field has no default, so a
  document that leaves it out is refused.
- optional: left out when absent (a param's `min`, an effect's `ceiling`).
  Such a field defaults to None and is named in the class's `omit_none`.

Money is a decimal string of minor units, never a float; this module only
checks shapes, the meaning stays with the rooms that compute with it. It is
kernel code: it imports pydantic and nothing of the compiler or verifier.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Annotated, Any, ClassVar, Literal, TypeVar

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    StrictBool,
    StrictInt,
    StrictStr,
    StringConstraints,
    ValidationError,
    field_validator,
    model_serializer,
    model_validator,
)
from pydantic_core import PydanticCustomError

from pactwright.candidate import CHAIN_OPERATORS, CHAIN_TERMS

TRANSITIONS_FORMAT = "pactwright.transitions/1"
MODEL_FORMAT = "pactwright.model/1"

Text = StrictStr
Flag = StrictBool
Count = Annotated[StrictInt, Field(ge=0)]
Minor = Annotated[StrictStr, StringConstraints(pattern=r"^-?(0|[1-9][0-9]*)$")]
Hash = Annotated[StrictStr, StringConstraints(pattern=r"^sha256:[0-9a-f]{64}$")]
Names = tuple[Text, ...]
ValueType = Literal["money", "int", "percent", "duration", "time", "bool", "text"]

# The expression operators every reader evaluates, by arity. Leaves carry a
# `name` (what they read) or a `value` (a literal); no leaf has arguments.
NAMED_LEAVES = frozenset({"param", "stamp", "balance", "applied", "fired", "total", "reached", "approved"})
# New in 1.1 (four eyes): `approvals(T)`, whose `value` is the number of approvals T's commit consumes.
NAMED_LEAVES = NAMED_LEAVES | {"approvals"}
# New in 1.1: whether the latest call at some `call E` stands acknowledged, reconciled or abandoned.
OUTCOME_LEAVES = frozenset({"acknowledged", "reconciled", "abandoned"})
NAMED_LEAVES = NAMED_LEAVES | OUTCOME_LEAVES
LEAVES = NAMED_LEAVES | {"lit", "now", "final"}
UNARY = frozenset({"not", "neg"})
COMPARISONS = frozenset({"==", "!=", "<", "<=", ">", ">="})
LOGICAL = frozenset({"and", "or", "implies"})
ARITHMETIC = frozenset({"+", "-", "*", "/"})
OPERATORS = LEAVES | UNARY | COMPARISONS | LOGICAL | ARITHMETIC
# Operators whose result type never varies (the others take their operands').
_RESULT_TYPE: dict[str, str] = {
    "now": "time",
    "stamp": "time",
    "final": "bool",
    "balance": "money",
    "total": "money",
    "applied": "int",
    "fired": "int",
    "reached": "bool",
    "approved": "bool",
    "approvals": "int",
    "not": "bool",
} | dict.fromkeys(COMPARISONS | LOGICAL | OUTCOME_LEAVES, "bool")


_INTEGER = re.compile(r"-?(0|[1-9][0-9]*)")
_DECIMAL = re.compile(r"-?[0-9]+(\.[0-9]+)?")
# The text a number of each type is written as: minor units, seconds and
# counts are integers; a percent is exact decimal text without `%`.
_NUMBER_SHAPE = {"money": _INTEGER, "int": _INTEGER, "duration": _INTEGER, "time": _INTEGER, "percent": _DECIMAL}


def _number_shape(kind: str, values: dict[str, str | None]) -> None:
    shape = _NUMBER_SHAPE.get(kind)
    for field, text in values.items():
        if shape is not None and text is not None and shape.fullmatch(text) is None:
            raise PydanticCustomError(
                "number_shape", "`{field}` `{text}` is not a {kind} value", {"field": field, "text": text, "kind": kind}
            )


class Document(BaseModel):
    """A frozen, closed part of a bundle document; `omit_none` fields are left out when None."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    omit_none: ClassVar[frozenset[str]] = frozenset()

    @model_serializer(mode="wrap")
    def _leave_out_absent(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data: dict[str, Any] = handler(self)
        for key in self.omit_none:
            if data.get(key, 0) is None:
                del data[key]
        return data

    def to_json(self) -> dict[str, Any]:
        """The JSON document, exactly as it is written (and as it was validated)."""
        out: dict[str, Any] = self.model_dump(mode="json", by_alias=True)
        return out


class Expr(Document):
    """One node of a typed expression tree (the candidate's `Expr`, as artifacts hold it).

    `args` is left out when empty, `name` and `value` when None. The operator
    must be one of OPERATORS with its arity, a leaf that reads something must
    name it, a literal must carry its value, and an operator with a fixed
    result type (comparisons are `bool`, `balance` is `money`...) must carry it.
    A chain of `+`, `and` or `or` longer than CHAIN_TERMS terms is one node
    with all its terms (new in 1.1); a shorter one is binary, as it always was.
    """

    omit_none = frozenset({"name", "value", "args"})

    op: Text
    type: ValueType
    name: Text | None = None
    value: Text | None = None
    args: tuple[Expr, ...] | None = None

    @field_validator("op")
    @classmethod
    def _known_operator(cls, op: str) -> str:
        if op not in OPERATORS:
            raise PydanticCustomError("unknown_operator", "unknown expression operator `{op}`", {"op": op})
        return op

    @field_validator("args")
    @classmethod
    def _no_empty_args(cls, args: tuple[Expr, ...] | None) -> tuple[Expr, ...] | None:
        if args is not None and not args:
            raise PydanticCustomError("empty_args", "`args` is left out when there are none")
        return args

    @model_validator(mode="after")
    def _well_formed(self) -> Expr:
        count = len(self.args or ())
        wanted = 0 if self.op in LEAVES else 1 if self.op in UNARY else 2
        if self.op in CHAIN_OPERATORS and count > CHAIN_TERMS:
            pass  # a chain longer than CHAIN_TERMS terms is one node (new in 1.1; candidate.py)
        elif count != wanted:
            raise PydanticCustomError(
                "operator_arity",
                "`{op}` takes {wanted} argument(s), found {count}",
                {"op": self.op, "wanted": wanted, "count": count},
            )
        if self.op in NAMED_LEAVES and self.name is None:
            raise PydanticCustomError("operator_name", "`{op}` names what it reads", {"op": self.op})
        if self.op == "lit":
            if self.value is None:
                raise PydanticCustomError("operator_value", "a literal carries its value", {})
            _number_shape(self.type, {"value": self.value})
        fixed = _RESULT_TYPE.get(self.op)
        if fixed is not None and self.type != fixed:
            raise PydanticCustomError(
                "operator_type",
                "`{op}` is of type {fixed}, not {found}",
                {"op": self.op, "fixed": fixed, "found": self.type},
            )
        return self


# Shared parts of both documents.


class PactId(Document):
    id: Text
    version: Text


class Currency(Document):
    code: Text
    scale: Count
    asset: Text


class Role(Document):
    name: Text
    trusted: Flag
    clock: Flag


class State(Document):
    name: Text
    initial: Flag
    final: Flag


class Approval(Document):
    """Who approves a transition. New in 1.1 (four eyes), left out when unused: `also`, the further
    roles of `approval by A, B distinct` (one approval each); `count`, the N of `approvals N by R
    distinct` (N approvals by parties holding R in the store's party registry)."""

    omit_none = frozenset({"also", "count"})

    role: Text
    not_requester: Flag
    also: tuple[Text, ...] | None = None
    count: int | None = None

    def slots(self) -> tuple[str, ...]:
        """The role of each required approval, one entry per approval (each from a distinct party)."""
        if self.count is not None:
            return (self.role,) * self.count
        return (self.role, *(self.also or ()))


class Strategy(Document):
    omit_none = frozenset({"compensation"})

    kind: Literal["retry", "idempotent", "reconcilable", "once", "compensate"]
    compensation: Text | None = None


class Egress(Document):
    method: Text
    url: Text


class Effect(Document):
    """A declared effect, with whether it moves money (`compiler/payload.py`)."""

    omit_none = frozenset({"reversibility", "max_calls", "timeout", "ceiling", "strategy", "consequence", "amount"})

    name: Text
    risk: Text
    reversibility: Literal["reversible", "irreversible", "compensable", "not_applicable"] | None = None
    scopes: Names
    egress: tuple[Egress, ...]
    max_calls: Count | None = None
    timeout: Count | None = None
    ceiling: Minor | None = None
    strategy: Strategy | None = None
    key: Names
    consequence: Text | None = None
    amount: Expr | None = None
    money_moving: Flag


class Call(Document):
    """One `call EFFECT` in a transition: the effect's strategy and risk, and the amount it declares."""

    effect: Text
    strategy: Strategy | None
    risk: Text
    amount: Expr | None
    money_moving: Flag


class Portion(Document):
    """One part of a split: a fixed `percent` (with its exact `share`), a cap, a ranged `param`, or `remaining`.

    Its part goes `to` an account or, new in 1.1, on to a nested `split`
    (exactly one of the two; `pactwright.movement` defines the arithmetic).
    """

    omit_none = frozenset({"param", "percent", "share", "max_minor", "to", "split"})

    kind: Literal["percent", "amount", "remaining"]
    to: Text | None = None
    split: SplitRule | None = None
    param: Text | None = None
    percent: Text | None = None
    share: Annotated[Text, StringConstraints(pattern=r"^[0-9]+/[1-9][0-9]*$")] | None = None
    max_minor: Minor | None = None

    @model_validator(mode="after")
    def _one_value(self) -> Portion:
        given = {k for k in ("param", "percent", "share", "max_minor") if getattr(self, k) is not None}
        allowed: dict[str, list[set[str]]] = {
            "remaining": [set()],
            "percent": [{"param"}, {"percent", "share"}],
            "amount": [{"param"}, {"max_minor"}],
        }
        if given not in allowed[self.kind]:
            raise PydanticCustomError(
                "portion_value", "a `{kind}` portion cannot carry {given}", {"kind": self.kind, "given": sorted(given)}
            )
        if (self.to is None) == (self.split is None):
            raise PydanticCustomError("portion_target", "a portion goes either `to` an account or on to a `split`")
        if self.split is not None and any(p.split is not None for p in self.split.portions):
            raise PydanticCustomError("portion_depth", "a nested split sends its portions to accounts only")
        return self


class SingleRule(Document):
    kind: Literal["single"]
    to: Text


class SplitRule(Document):
    kind: Literal["capped", "allotment"]
    portions: tuple[Portion, ...] = Field(min_length=1)


Portion.model_rebuild()

PostingRule = Annotated[SingleRule | SplitRule, Field(discriminator="kind")]


class Invariant(Document):
    name: Text
    clause: Text | None
    expr: Expr


class Property(Document):
    """A liveness property (new in 1.1): `premise leads_to goal`, or `eventually final`
    (premise and goal null), checked by the verifier under the fairness of docs/verifier.md."""

    name: Text
    clause: Text | None
    kind: Literal["leads_to", "eventually_final"]
    premise: Expr | None
    goal: Expr | None

    @model_validator(mode="after")
    def _shape(self) -> Property:
        if (self.kind == "leads_to") != (self.premise is not None and self.goal is not None):
            raise PydanticCustomError(
                "property_shape",
                "property `{name}`: `leads_to` has a premise and a goal, `eventually_final` neither",
                {"name": self.name},
            )
        return self


# transitions.json


class LiteralSource(Document):
    kind: Literal["literal"]
    minor: Minor


class ParamSource(Document):
    omit_none = frozenset({"var"})

    kind: Literal["param"]
    param: Text
    var: Text | None = None


class ExprSource(Document):
    kind: Literal["expr"]
    expr: Expr
    var: Text


class AccountSource(Document):
    kind: Literal["account"]
    account: Text


AmountSource = Annotated[LiteralSource | ParamSource | ExprSource, Field(discriminator="kind")]
VarSource = Annotated[ParamSource | ExprSource | AccountSource, Field(discriminator="kind")]


class Posting(Document):
    """One transfer, with how the runtime obtains its amount (`amount_source`)."""

    index: Count
    amount: Expr
    amount_source: AmountSource
    source: Text
    rule: PostingRule


class LedgerVar(Document):
    name: Text
    type: Literal["monetary", "account", "portion"]
    from_: VarSource = Field(alias="from")


class Ledger(Document):
    program: Text
    vars: tuple[LedgerVar, ...]


class TableParam(Document):
    """A param; `min_param` / `max_param` (new in 1.1) name the money param a value
    must also be at least / at most, and `min` / `max` then hold the literal hull
    (compiler/related.py): every allowed value lies within them."""

    omit_none = frozenset({"min", "max", "value", "pattern", "min_param", "max_param"})

    name: Text
    type: Literal["money", "percent", "duration", "text"]
    min: Text | None = None
    max: Text | None = None
    value: Text | None = None
    pattern: Text | None = None
    options: Names
    min_param: Text | None = None
    max_param: Text | None = None

    @model_validator(mode="after")
    def _numbers(self) -> TableParam:
        _number_shape(self.type, {"min": self.min, "max": self.max, "value": self.value})
        return self


class TableAccount(Document):
    name: Text
    address: Text
    external: Flag
    placeholders: Names


class Rule(Document):
    risk: Text
    decision: Literal["allow", "allow_with_grant", "require_approval", "deny"]


class Budget(Document):
    omit_none = frozenset({"max_turns", "max_model_calls", "max_tool_calls", "max_active_time", "ceiling"})

    max_turns: Count | None = None
    max_model_calls: Count | None = None
    max_tool_calls: Count | None = None
    max_active_time: Count | None = None
    ceiling: Minor | None = None


class TableTransition(Document):
    id: Text
    clause: Text | None
    from_: Names = Field(alias="from")
    to: Text
    roles: Names
    guard: Expr | None
    stamps: Names
    postings: tuple[Posting, ...]
    effects: tuple[Call, ...]
    approval: Approval | None
    ledger: Ledger | None


class Limit(Document):
    """A limit across agreements (new in 1.1): the money `effect`'s calls carry, summed over every
    agreement of the pact (or per party holding `per`) in a UTC window of `window` seconds, is at
    most `max` minor units."""

    omit_none = frozenset({"per"})

    name: Text
    effect: Text
    max: Annotated[StrictStr, StringConstraints(pattern=r"^(0|[1-9][0-9]*)$")]
    window: Annotated[StrictInt, Field(gt=0)]
    per: Text | None = None


class TransitionTable(Document):
    """`transitions.json`: everything the runtime needs to execute a transition."""

    format: Literal["pactwright.transitions/1"]
    pact: PactId
    candidate_hash: Hash
    currency: Currency
    roles: tuple[Role, ...]
    params: tuple[TableParam, ...]
    accounts: tuple[TableAccount, ...]
    states: tuple[State, ...]
    rules: tuple[Rule, ...]
    effects: tuple[Effect, ...]
    budget: Budget | None
    transitions: tuple[TableTransition, ...]
    invariants: tuple[Invariant, ...]
    properties: tuple[Property, ...] | None = None  # new in 1.1; absent when the policy declares none
    limits: tuple[Limit, ...] | None = None  # new in 1.1; absent when the policy declares none
    omit_none = frozenset({"properties", "limits"})

    @model_validator(mode="after")
    def _references(self) -> TransitionTable:
        _check_references(self.states, self.roles, self.accounts, self.effects, self.transitions)
        _check_related(self.params)
        return self


# model.json


class Bounds(Document):
    agreements: Count
    faults: Count
    max_depth: Count
    max_states: Count


class ModelParam(Document):
    """A param as the verifier explores it: `fixed`, or a range with its `samples`, or text."""

    omit_none = frozenset({"fixed", "min", "max", "samples", "options", "pattern", "min_param", "max_param"})

    name: Text
    type: Literal["money", "percent", "duration", "text"]
    fixed: Text | None = None
    min: Text | None = None
    max: Text | None = None
    samples: Names | None = None
    options: Names | None = None
    pattern: Text | None = None
    min_param: Text | None = None  # new in 1.1, as in `TableParam`
    max_param: Text | None = None

    @model_validator(mode="after")
    def _numbers(self) -> ModelParam:
        values = {"fixed": self.fixed, "min": self.min, "max": self.max}
        values |= {f"samples/{i}": text for i, text in enumerate(self.samples or ())}
        _number_shape(self.type, values)
        return self


class ModelAccount(Document):
    name: Text
    external: Flag
    scope: Literal["agreement", "shared"]


class ModelPosting(Document):
    index: Count
    amount: Expr
    source: Text
    rule: PostingRule


class ModelTransition(Document):
    id: Text
    clause: Text | None
    from_: Names = Field(alias="from")
    to: Text
    roles: Names
    guard: Expr | None
    stamps: Names
    approval: Approval | None
    postings: tuple[ModelPosting, ...]
    effects: tuple[Call, ...]
    ledger_program: Text | None


class Deadline(Document):
    """`now` compared with `stamp + offset` in some guard (`stamp` null: compared with `offset` alone)."""

    stamp: Text | None
    offset: Expr


class BuiltinInvariant(Document):
    name: Text
    description: Text


class ModelDocument(Document):
    """`model.json`: the finite model the verifier explores."""

    format: Literal["pactwright.model/1"]
    pact: PactId
    candidate_hash: Hash
    currency: Currency
    bounds: Bounds
    roles: tuple[Role, ...]
    params: tuple[ModelParam, ...]
    accounts: tuple[ModelAccount, ...]
    states: tuple[State, ...]
    transitions: tuple[ModelTransition, ...]
    effects: tuple[Effect, ...]
    deadlines: tuple[Deadline, ...]
    invariants: tuple[Invariant, ...]
    builtin_invariants: tuple[BuiltinInvariant, ...]
    properties: tuple[Property, ...] | None = None  # new in 1.1; absent when the policy declares none
    limits: tuple[Limit, ...] | None = None  # new in 1.1; absent when the policy declares none
    omit_none = frozenset({"properties", "limits"})

    @model_validator(mode="after")
    def _references(self) -> ModelDocument:
        _check_references(self.states, self.roles, self.accounts, self.effects, self.transitions)
        _check_related(self.params)
        return self


def _check_related(params: Sequence[TableParam | ModelParam]) -> None:
    """A related bound (new in 1.1) joins two distinct money params, and its side has a literal hull."""
    money = {p.name for p in params if p.type == "money"}
    for param in params:
        for side, ref in (("min", param.min_param), ("max", param.max_param)):
            if ref is None:
                continue
            if param.type != "money" or ref not in money or ref == param.name or getattr(param, side) is None:
                raise PydanticCustomError(
                    "related_bound",
                    "param `{name}`: `{side}_param` `{ref}` must name another money param, with `{side}` its hull",
                    {"name": param.name, "side": side, "ref": ref},
                )


def _known(kind: str, name: str, names: set[str], at: str) -> None:
    if name not in names:
        raise PydanticCustomError(
            "unknown_reference", "`{at}` names unknown {kind} `{name}`", {"kind": kind, "name": name, "at": at}
        )


def _unique(kind: str, names: list[str], at: str) -> set[str]:
    seen: set[str] = set()
    for index, name in enumerate(names):
        if name in seen:
            raise PydanticCustomError(
                "duplicate_name",
                "`{at}` declares {kind} `{name}` a second time",
                {"kind": kind, "name": name, "at": f"{at}/{index}"},
            )
        seen.add(name)
    return seen


def _check_references(
    states: Sequence[State],
    roles: Sequence[Role],
    accounts: Sequence[TableAccount | ModelAccount],
    effects: Sequence[Effect],
    transitions: Sequence[TableTransition | ModelTransition],
) -> None:
    """Every name a transition uses is declared once: readers index by these names and never guess.

    The refusal's `at` is the JSON path of the offending value (a document-wide
    check has no field of its own in pydantic's error location).
    """
    state_names = _unique("state", [s.name for s in states], "states")
    role_names = _unique("role", [r.name for r in roles], "roles")
    account_names = _unique("account", [a.name for a in accounts], "accounts")
    effect_names = _unique("effect", [e.name for e in effects], "effects")
    _unique("transition", [t.id for t in transitions], "transitions")
    for t_index, transition in enumerate(transitions):
        at = f"transitions/{t_index}"
        for index, state in enumerate(transition.from_):
            _known("state", state, state_names, f"{at}/from/{index}")
        _known("state", transition.to, state_names, f"{at}/to")
        for index, role in enumerate(transition.roles):
            _known("role", role, role_names, f"{at}/roles/{index}")
        for index, call in enumerate(transition.effects):
            _known("effect", call.effect, effect_names, f"{at}/effects/{index}/effect")
        postings: Sequence[Posting | ModelPosting] = transition.postings
        for p_index, posting in enumerate(postings):
            where = f"{at}/postings/{p_index}"
            _known("account", posting.source, account_names, f"{where}/source")
            rule = posting.rule
            if isinstance(rule, SingleRule):
                _known("account", rule.to, account_names, f"{where}/rule/to")
            else:
                _known_portions(rule, account_names, f"{where}/rule")


def _known_portions(rule: SplitRule, account_names: set[str], where: str) -> None:
    """Each portion's account is declared, in nested splits (new in 1.1) too."""
    for index, portion in enumerate(rule.portions):
        if portion.split is not None:
            _known_portions(portion.split, account_names, f"{where}/portions/{index}/split")
        else:
            _known("account", portion.to or "", account_names, f"{where}/portions/{index}/to")


# Writing and reading.

D = TypeVar("D", bound=Document)


def emitted(kind: type[D], doc: dict[str, Any]) -> D:
    """An emitter's document, validated; its dump must be the document itself.

    The emitters build plain dictionaries and write the model's dump, so a
    model that dropped or added a field would change the bundle's bytes.
    Both are refused here: a mismatch is a bug in pactwright, never in the
    policy, and surfaces as an internal error.
    """
    model = kind.model_validate(doc)
    if model.to_json() != doc:
        raise ValueError(f"the {kind.__name__} model does not reproduce the emitted document")
    return model


# Reading errors.


def problem(exc: ValidationError) -> tuple[str, str, str]:
    """(path, message, kind) of the first thing wrong in a refused document.

    The path is JSON-pointer-like (`transitions/0/guard/op`) so a reader can
    name the field (a discriminated part adds its kind: `rule/single/to`); `kind` is pydantic's error type (`missing`,
    `extra_forbidden`, `unknown_operator`...), for readers that give some
    kinds their own code.
    """
    first = exc.errors(include_url=False)[0]
    path = "/".join(str(part) for part in first["loc"]) or str((first.get("ctx") or {}).get("at", "/"))
    return path, str(first["msg"]), str(first["type"])


def has_unknown_operator(exc: ValidationError) -> str | None:
    """The first unknown expression operator behind a refusal, or None."""
    for error in exc.errors(include_url=False):
        if error["type"] == "unknown_operator":
            return str((error.get("ctx") or {}).get("op"))
    return None


Expr.model_rebuild()
