"""Lowering: candidate -> transition table (the content of `transitions.json`).

Everything a runtime needs to execute a transition is resolved here, once:
fixed percent and money params inside splits become exact rules, account
addresses and their placeholders are listed, and each money-moving
transition names its ledger program and how to fill that program's
variables. Nothing downstream re-derives meaning from the candidate.
"""

from __future__ import annotations

import re
from typing import Any

from pactwright.bundle_models import TransitionTable, emitted
from pactwright.candidate import Candidate, Effect, Expr, Param, Portion, Transfer, Transition
from pactwright.compiler.payload import call_amount, money_moving_effects
from pactwright.compiler.related import Bounds, hull
from pactwright.money import Percent
from pactwright.movement import rule_accounts, rule_portions

TRANSITIONS_FORMAT = "pactwright.transitions/1"
_PLACEHOLDER = re.compile(r"\{([a-z][a-z0-9_]*)\}")

Json = dict[str, Any]


def expr_json(expr: Expr | None) -> Json | None:
    """The canonical expression tree, as it appears in every artifact."""
    if expr is None:
        return None
    out: Json = {"op": expr.op, "type": expr.type}
    if expr.name is not None:
        out["name"] = expr.name
    if expr.value is not None:
        out["value"] = expr.value
    if expr.args:
        out["args"] = [expr_json(arg) for arg in expr.args]
    return out


def _fixed(params: dict[str, Param], name: str | None) -> str | None:
    param = params.get(name or "")
    return param.value if param is not None else None


def _portion_share(percent: str) -> str:
    value = Percent.parse(percent).value
    return f"{value.numerator}/{value.denominator}"


def _generated(name: str, params: dict[str, Param]) -> str:
    """A variable name the compiler makes up, kept apart from the params' own.

    A param's variable is the param's name, so a param called `transfer_0`
    or `account_escrow` would share a variable with a transfer's amount or an
    account. No param name starts with `_` (names are `[a-z][a-z0-9_]*`), so
    the generated name takes one exactly when a param already has it.
    """
    return f"_{name}" if name in params else name


def _amount_source(amount: Expr, index: int, params: dict[str, Param]) -> Json:
    """How the runtime obtains a transfer's amount: a literal, a param, or an expression."""
    if amount.op == "lit" and amount.value is not None:
        return {"kind": "literal", "minor": amount.value}
    if amount.op == "param" and amount.name is not None:
        return {"kind": "param", "param": amount.name, "var": amount.name}
    return {"kind": "expr", "expr": expr_json(amount), "var": _generated(f"transfer_{index}", params)}


def account_var(name: str, params: dict[str, Param]) -> str:
    """The ledger program's variable for an account whose address has placeholders."""
    return _generated(f"account_{name}", params)


def _split_rule(portions: tuple[Portion, ...], params: dict[str, Param]) -> Json:
    """A split's rule; a portion sent on to a nested split (new in 1.1) carries that split's rule."""
    out: list[Json] = []
    kinds = {p.kind for p in portions} - {"remaining"}
    for portion in portions:
        where: Json = {"to": portion.to} if portion.split is None else {"split": _split_rule(portion.split, params)}
        if portion.kind == "remaining":
            out.append({"kind": "remaining", **where})
            continue
        value = portion.value if portion.value is not None else _fixed(params, portion.param)
        entry: Json = {"kind": portion.kind, **where}
        if value is None:
            # A ranged param: the runtime supplies it per agreement.
            entry["param"] = portion.param
        elif portion.kind == "percent":
            entry["percent"] = value
            entry["share"] = _portion_share(value)
        else:
            entry["max_minor"] = value
        out.append(entry)
    return {"kind": "capped" if kinds == {"amount"} else "allotment", "portions": out}


def _posting(transfer: Transfer, index: int, params: dict[str, Param]) -> Json:
    rule: Json
    if transfer.destination is not None:
        rule = {"kind": "single", "to": transfer.destination}
    else:
        rule = _split_rule(transfer.portions, params)
    return {
        "index": index,
        "amount": expr_json(transfer.amount),
        "amount_source": _amount_source(transfer.amount, index, params),
        "source": transfer.source,
        "rule": rule,
    }


def _effect_json(effect: Effect, moving: frozenset[str]) -> Json:
    """An effect as the artifacts describe it, with whether it moves money (`compiler/payload.py`)."""
    out = effect.model_dump(mode="json", exclude_none=True) | {"money_moving": effect.name in moving}
    if effect.amount is not None:
        out["amount"] = expr_json(effect.amount)  # the artifacts' expression form, as in every call
    return out


def _call_json(effect: Effect, site_amount: Expr | None, moving: frozenset[str]) -> Json:
    """One call site: its effect's strategy and risk, and exactly the amount it declares.

    The amount is what the policy states (`amount EXPR` in the effect, or
    `call E amount EXPR`), null for an effect that moves no money; it is never
    derived from the transition's transfers or the effect's key.
    """
    return {
        "effect": effect.name,
        "strategy": _effect_json(effect, moving).get("strategy"),
        "risk": effect.risk,
        "amount": expr_json(call_amount(effect.amount, site_amount)),
        "money_moving": effect.name in moving,
    }


def _ledger_vars(transition: Transition, postings: list[Json], candidate: Candidate) -> list[Json]:
    """The variables of a transition's ledger program, in a fixed order."""
    accounts = {a.name: a for a in candidate.accounts}
    params = {p.name: p for p in candidate.params}
    out: dict[str, Json] = {}
    for posting in postings:
        source = posting["amount_source"]
        if source["kind"] in ("param", "expr"):
            out.setdefault(source["var"], {"name": source["var"], "type": "monetary", "from": source})
        involved = [posting["source"], *rule_accounts(posting["rule"])]
        for name in involved:
            if _PLACEHOLDER.search(accounts[name].address):
                var = account_var(name, params)
                out.setdefault(var, {"name": var, "type": "account", "from": {"kind": "account", "account": name}})
        for portion in rule_portions(posting["rule"]):
            if "param" in portion:
                kind = "portion" if portion["kind"] == "percent" else "monetary"
                out.setdefault(
                    portion["param"],
                    {"name": portion["param"], "type": kind, "from": {"kind": "param", "param": portion["param"]}},
                )
    return [out[name] for name in sorted(out)]


def lower(candidate: Candidate, candidate_hash: str) -> Json:
    """The transition table: states, accounts, params and resolved transitions.

    The table is checked against the kernel's `TransitionTable` (the model the
    runtime reads it through) and returned as that model's dump, which is the
    document built here, field for field.
    """
    table = _table(candidate, candidate_hash)
    if candidate.properties:
        table["properties"] = properties_json(candidate)
    if candidate.limits:  # new in 1.1
        table["limits"] = [lim.model_dump(mode="json", exclude_none=True) for lim in candidate.limits]
    return emitted(TransitionTable, table).to_json()


def properties_json(candidate: Candidate) -> list[Json]:
    """The liveness properties (new in 1.1); the key is left out of the table when there are none."""
    return [
        {
            "name": p.name,
            "clause": p.clause,
            "kind": p.kind,
            "premise": expr_json(p.premise),
            "goal": expr_json(p.goal),
        }
        for p in candidate.properties or ()
    ]


def _table(candidate: Candidate, candidate_hash: str) -> Json:
    params = {p.name: p for p in candidate.params}
    effects = {e.name: e for e in candidate.effects}
    moving = money_moving_effects(candidate)
    transitions: list[Json] = []
    for transition in candidate.transitions:
        postings = [_posting(t, i, params) for i, t in enumerate(transition.transfers)]
        entry: Json = {
            "id": transition.name,
            "clause": transition.clause,
            "from": list(transition.sources),
            "to": transition.target,
            "roles": list(transition.roles),
            "guard": expr_json(transition.guard),
            "stamps": list(transition.stamps),
            "postings": postings,
            "effects": [_call_json(effects[name], amount, moving) for name, amount in transition.call_sites()],
            "approval": transition.approval.model_dump(mode="json", exclude_none=True) if transition.approval else None,
            "ledger": None,
        }
        if postings:
            entry["ledger"] = {
                "program": f"ledger/{transition.name}.num",
                "vars": _ledger_vars(transition, postings, candidate),
            }
        transitions.append(entry)
    return {
        "format": TRANSITIONS_FORMAT,
        "pact": candidate.pact.model_dump(mode="json"),
        "candidate_hash": candidate_hash,
        "currency": {
            "code": candidate.currency.code,
            "scale": candidate.currency.scale,
            "asset": _asset(candidate),
        },
        "roles": [r.model_dump(mode="json") for r in candidate.roles],
        "params": _params(candidate),
        "accounts": [
            {**a.model_dump(mode="json"), "placeholders": sorted(set(_PLACEHOLDER.findall(a.address)))}
            for a in candidate.accounts
        ],
        "states": [s.model_dump(mode="json") for s in candidate.states],
        "rules": [r.model_dump(mode="json") for r in candidate.rules],
        "effects": [_effect_json(e, moving) for e in candidate.effects],
        "budget": candidate.budget.model_dump(mode="json", exclude_none=True) if candidate.budget else None,
        "transitions": transitions,
        "invariants": [{"name": i.name, "clause": i.clause, "expr": expr_json(i.expr)} for i in candidate.invariants],
    }


def _params(candidate: Candidate) -> list[Json]:
    """The params as the table lists them; a bound written as a param's name (new in 1.1)
    keeps that name (`min_param` / `max_param`) and gets the literal hull as its `min` / `max`."""
    out = [p.model_dump(mode="json", exclude_none=True) for p in candidate.params]
    if not any(p.min_param or p.max_param for p in candidate.params):
        return out

    def minor(text: str | None) -> int | None:
        return None if text is None else int(text)

    graph = {
        p.name: Bounds(
            low=minor(p.value if p.value is not None else p.min),
            high=minor(p.value if p.value is not None else p.max),
            low_ref=p.min_param,
            high_ref=p.max_param,
        )
        for p in candidate.params
        if p.type == "money"
    }
    tight = hull(graph)
    for entry in out:
        low, high = tight.get(entry["name"], (None, None))
        if "min_param" in entry:
            entry["min"] = str(low)
        if "max_param" in entry:
            entry["max"] = str(high)
    return out


def _asset(candidate: Candidate) -> str:
    scale = candidate.currency.scale
    return f"{candidate.currency.code}/{scale}" if scale else candidate.currency.code
