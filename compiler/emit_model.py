"""`model.json`: the finite model the verifier explores.

Each effect, and each call of one in a transition, says whether it moves
money (`money_moving`, defined in `compiler/payload.py`); each call's
`amount` is exactly the amount the policy declares for it, or null.

The verifier reads only this file (and, for replay, `transitions.json` and
the ledger programs), never compiler internals. The model names its
deadlines, the sample values each ranged param takes, which accounts are
shared between agreements, and the default exploration bounds.
"""

from __future__ import annotations

import itertools
import re
from fractions import Fraction
from typing import Any

from pactwright.bundle_models import ModelDocument, emitted
from pactwright.canonical import canonical_bytes
from pactwright.compiler._regex_samples import Unsupported, texts
from pactwright.compiler.lower import Json
from pactwright.money import Percent

MODEL_FORMAT = "pactwright.model/1"
DEFAULT_BOUNDS = {"agreements": 1, "faults": 1, "max_depth": 64, "max_states": 2_000_000}
BUILTIN_INVARIANTS = (
    {"name": "money_conserved", "description": "the sum of all balances, per asset, is zero"},
    {"name": "no_negative_internal", "description": "no non-external account goes negative"},
    {"name": "no_posting_after_final", "description": "no ledger posting applies after a final state"},
    {"name": "effect_max_calls", "description": "an effect with max_calls is applied at most that often"},
)


def _samples(low: int, high: int) -> list[str]:
    """Boundary points of an inclusive range: the values where rounding and caps bite."""
    points = {low, high, min(low + 1, high), max(high - 1, low), (low + high) // 2}
    return [str(p) for p in sorted(points)]


# The old stand-in: tried for a pattern the generator cannot enumerate, kept
# only when the pattern admits it (or when nothing else exists, see below).
STAND_IN = "any"
# The largest group of text params compared with each other whose every subset
# gets shared stand-ins; a larger group gets them for single params and pairs.
MAX_JOINT_GROUP = 6
# Texts of each pattern tried for a stand-in several patterns must all admit.
MAX_JOINT_POOL = 64


def _text_comparisons(table: Json) -> tuple[dict[str, set[str]], dict[str, set[str]]]:
    """Per text param: the literals it is compared with, and the text params it is compared with."""
    literals: dict[str, set[str]] = {}
    partners: dict[str, set[str]] = {}

    def walk(expr: Json | None) -> None:
        if expr is None:
            return
        args: list[Json] = expr.get("args", [])
        if expr["op"] in ("==", "!=") and len(args) == 2 and all(a["type"] == "text" for a in args):
            for side, other in ((args[0], args[1]), (args[1], args[0])):
                if side["op"] == "param" and other["op"] == "lit":
                    literals.setdefault(side["name"], set()).add(other["value"])
                elif side["op"] == "param" and other["op"] == "param" and side["name"] != other["name"]:
                    partners.setdefault(side["name"], set()).add(other["name"])
        for arg in args:
            walk(arg)

    for transition in table["transitions"]:
        walk(transition["guard"])
    for invariant in table["invariants"]:
        walk(invariant["expr"])
    return literals, partners


def _matches(pattern: str, value: str) -> bool:
    try:
        return re.fullmatch(pattern, value) is not None
    except re.error:  # a pattern Python cannot read: keep the value rather than lose a case
        return True


def _candidates(pattern: str, limit: int) -> list[str]:
    """Texts of `pattern`, shortest first; then the old `any`, `any2`, ... where the pattern admits them."""
    try:
        found = list(texts(pattern, limit))
    except Unsupported:
        found = []
    olds = (STAND_IN if i == 1 else f"{STAND_IN}{i}" for i in range(1, limit + 1))
    return found + [old for old in olds if old not in found and _matches(pattern, old)]


def _shared_stand_ins(patterns: list[str], known: set[str], need: int) -> list[str]:
    """Up to `need` distinct texts every pattern admits, none of them a known (compared) text."""
    out: list[str] = []
    # One pattern: the first texts that are not known suffice. Several: a
    # text must suit them all, so each pool is wider.
    limit = need + len(known) if len(patterns) == 1 else max(need + len(known), MAX_JOINT_POOL)
    pools = [_candidates(p, limit) for p in patterns]
    for text in (t for pool in pools for t in pool):
        if len(out) == need:
            break
        if text not in known and text not in out and all(_matches(p, text) for p in patterns):
            out.append(text)
    return out


def _group_of(name: str, partners: dict[str, set[str]]) -> set[str]:
    group, todo = {name}, [name]
    while todo:
        for other in partners.get(todo.pop(), set()):
            if other not in group:
                group.add(other)
                todo.append(other)
    return group


def _text_samples(table: Json) -> dict[str, list[str]]:
    """The values a `text matching` param is explored with.

    Text matters only where it is compared. A pattern param takes every
    literal it is compared with that its pattern admits (so `region == "EU"`
    can hold), the option values of the params it is compared with, and
    stand-ins: texts its pattern fully matches (so the runtime would create
    the agreement) that differ from all of those. Params compared with each
    other form a group of k pattern params; any way of making some of them
    equal and the rest different must be explorable, so every subset S of
    the group gets up to k - |S| + 1 distinct texts all of S's patterns admit,
    and each param takes those of every subset it is in. Where a pattern
    admits fewer texts than that (`EU|US` compared with both, or two params
    both `matching "EU"`), only the texts that exist are taken: the samples
    are then just the admitted literals. A param left with no sample at all
    (its pattern admits no text the generator finds and no compared literal)
    falls back to the stand-ins `any`, `any2`, ...: the runtime would refuse
    such an agreement, so this can raise a false alarm. The search for texts
    is capped (`compiler/_regex_samples.py`, MAX_JOINT_POOL, MAX_JOINT_GROUP),
    so a shared text found only beyond the caps is not explored.
    """
    params = {p["name"]: p for p in table["params"] if p["type"] == "text" and "pattern" in p}
    options = {p["name"]: list(p.get("options", [])) for p in table["params"] if p["type"] == "text"}
    literals, partners = _text_comparisons(table)
    out: dict[str, list[str]] = {}
    for name, param in params.items():
        group = _group_of(name, partners)
        known = set(literals.get(name, set()))
        for other in group:
            known |= literals.get(other, set()) | set(options.get(other, []))
        members = sorted(g for g in group if g in params)
        others = [g for g in members if g != name]
        if len(members) > MAX_JOINT_GROUP:
            subsets: list[tuple[str, ...]] = [(name,)] + [(name, other) for other in others]
        else:
            subsets = [
                (name, *chosen) for size in range(len(others) + 1) for chosen in itertools.combinations(others, size)
            ]
        stand_ins: list[str] = []
        for subset in subsets:
            need = len(members) - len(subset) + 1
            for text in _shared_stand_ins([params[s]["pattern"] for s in sorted(subset)], known, need):
                if text not in stand_ins:
                    stand_ins.append(text)
        values = sorted(v for v in known if _matches(param["pattern"], v))
        if not stand_ins and not values:
            olds = (STAND_IN if i == 1 else f"{STAND_IN}{i}" for i in itertools.count(1))
            stand_ins = list(itertools.islice((o for o in olds if o not in known), len(members)))
        out[name] = stand_ins + values
    return out


def _param(param: Json, text_samples: dict[str, list[str]]) -> Json:
    out: Json = {"name": param["name"], "type": param["type"]}
    if "value" in param:
        out["fixed"] = param["value"]
    elif param["type"] in ("money", "percent") and "min" in param:
        out["min"], out["max"] = param["min"], param["max"]
        if param["type"] == "money":
            out["samples"] = _samples(int(param["min"]), int(param["max"]))
            # New in 1.1: the params a value must also be at least / at most (min/max are their hull).
            out |= {k: param[k] for k in ("min_param", "max_param") if k in param}
        else:
            low, high = Percent.parse(param["min"]).value, Percent.parse(param["max"]).value
            # A percent has at most four decimals (a millionth of the whole): the
            # midpoint is rounded down to that grid, or `0.0001%..0.0002%` has none.
            grid = (low + high) * 500_000
            middle = Percent(Fraction(grid.numerator // grid.denominator, 1_000_000)).canonical()
            out["samples"] = sorted(
                {param["min"], param["max"], middle},
                key=lambda p: Percent.parse(p).value,
            )
    elif param["type"] == "text":
        out["options"] = param.get("options", [])
        if "pattern" in param:
            out["pattern"] = param["pattern"]
        # Text values matter only to guards comparing them; each option is a sample.
        out["samples"] = out["options"] or text_samples.get(param["name"], [STAND_IN])
    return out


def _deadlines(expr: Json | None, found: list[Json]) -> None:
    """Collect `now` compared against `stamp + duration` from a guard."""
    if expr is None:
        return
    args: list[Json] = expr.get("args", [])
    if expr["op"] in ("<", "<=", ">", ">=", "==", "!=") and len(args) == 2:
        for side, other in ((args[0], args[1]), (args[1], args[0])):
            if side["op"] == "now":
                found.append(_deadline(other))
    for arg in args:
        _deadlines(arg, found)


def _deadline(expr: Json) -> Json:
    if expr["op"] == "stamp":
        return {"stamp": expr["name"], "offset": {"op": "lit", "type": "duration", "value": "0"}}
    if expr["op"] == "+" and len(expr["args"]) == 2 and expr["args"][0]["op"] == "stamp":
        return {"stamp": expr["args"][0]["name"], "offset": expr["args"][1]}
    return {"stamp": None, "offset": expr}


def build_model(table: Json) -> Json:
    """The verifier's model, derived from the transition table alone.

    Checked against the kernel's `ModelDocument` (the model the verifier reads
    it through) and returned as that model's dump: the document built here.
    """
    return emitted(ModelDocument, _model(table)).to_json()


def _model(table: Json) -> Json:
    deadlines: list[Json] = []
    for transition in table["transitions"]:
        _deadlines(transition["guard"], deadlines)
    unique: dict[str, Json] = {}
    for deadline in deadlines:
        unique.setdefault(canonical_bytes(deadline).decode(), deadline)
    effects: list[dict[str, Any]] = table["effects"]
    text_samples = _text_samples(table)
    return (
        {
            "format": MODEL_FORMAT,
            "pact": table["pact"],
            "candidate_hash": table["candidate_hash"],
            "currency": table["currency"],
            "bounds": DEFAULT_BOUNDS,
            "roles": table["roles"],
            "params": [_param(p, text_samples) for p in table["params"]],
            "accounts": [
                {
                    "name": a["name"],
                    "external": a["external"],
                    "scope": "agreement" if "agreement" in a["placeholders"] else "shared",
                }
                for a in table["accounts"]
            ],
            "states": table["states"],
            "transitions": [
                {key: t[key] for key in ("id", "clause", "from", "to", "roles", "guard", "stamps", "approval")}
                | {
                    "postings": [{k: p[k] for k in ("index", "amount", "source", "rule")} for p in t["postings"]],
                    "effects": t["effects"],
                    "ledger_program": t["ledger"]["program"] if t["ledger"] else None,
                }
                for t in table["transitions"]
            ],
            "effects": effects,
            "deadlines": [unique[k] for k in sorted(unique)],
            "invariants": table["invariants"],
            "builtin_invariants": list(BUILTIN_INVARIANTS),
        }
        | ({"properties": table["properties"]} if table.get("properties") else {})
        | _limits(table)
    )


def _limits(table: Json) -> Json:
    """The limits across agreements (new in 1.1), as the table holds them; nothing when none."""
    return {"limits": table["limits"]} if table.get("limits") else {}
