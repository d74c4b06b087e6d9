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

import re
from fractions import Fraction
from typing import Any

from pactwright.canonical import canonical_bytes
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


# A value of a `text matching` param that differs from every text it is compared with.
STAND_IN = "any"


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


def _text_samples(table: Json) -> dict[str, list[str]]:
    """The values a `text matching` param is explored with.

    Text matters only where it is compared. A pattern param takes every
    literal it is compared with that its pattern admits (so `region == "EU"`
    can hold), the values of the params it is compared with, and stand-ins
    that differ from all of those: as many as there are params in its group
    of params compared with each other, so that any two of them can be equal
    or different.
    """
    params = {p["name"]: p for p in table["params"] if p["type"] == "text" and "pattern" in p}
    options = {p["name"]: list(p.get("options", [])) for p in table["params"] if p["type"] == "text"}
    literals, partners = _text_comparisons(table)
    out: dict[str, list[str]] = {}
    for name, param in params.items():
        group, todo = {name}, [name]
        while todo:
            for other in partners.get(todo.pop(), set()):
                if other not in group:
                    group.add(other)
                    todo.append(other)
        known = set(literals.get(name, set()))
        for other in group:
            known |= literals.get(other, set()) | set(options.get(other, []))
        values = sorted(v for v in known if _matches(param["pattern"], v))
        stand_ins: list[str] = []
        suffix = 1
        while len(stand_ins) < len([g for g in group if g in params]):
            candidate = STAND_IN if suffix == 1 else f"{STAND_IN}{suffix}"
            suffix += 1
            if candidate not in known:
                stand_ins.append(candidate)
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
    if expr["op"] == "+" and expr["args"][0]["op"] == "stamp":
        return {"stamp": expr["args"][0]["name"], "offset": expr["args"][1]}
    return {"stamp": None, "offset": expr}


def build_model(table: Json) -> Json:
    """The verifier's model, derived from the transition table alone."""
    deadlines: list[Json] = []
    for transition in table["transitions"]:
        _deadlines(transition["guard"], deadlines)
    unique: dict[str, Json] = {}
    for deadline in deadlines:
        unique.setdefault(canonical_bytes(deadline).decode(), deadline)
    effects: list[dict[str, Any]] = table["effects"]
    text_samples = _text_samples(table)
    return {
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
