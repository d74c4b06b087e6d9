"""The verifier's view of a policy: `model.json`, loaded into indexed tables.

The verifier reads only emitted artifacts. This module turns the model
document into integer-indexed tables (states, transitions, accounts,
effect call sites, stamps, deadlines) that the explorer's hot loop can use
without dictionary lookups by name.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from pactwright.bundle_models import ModelDocument, has_unknown_operator, problem
from pactwright.errors import VerifyError
from pactwright.money import Percent
from pactwright.verifier.zones import INF, Dim

Json = dict[str, Any]
MODEL_FORMAT = "pactwright.model/1"


@dataclass(frozen=True)
class CallSite:
    """One `call EFFECT` inside one transition: a slot in the effect protocol."""

    index: int
    transition: int
    effect: str
    strategy: str
    compensation: str | None
    amount: Json | None
    max_calls: int | None
    ceiling: int | None


@dataclass
class Model:
    """Indexed tables over one model document."""

    doc: Json
    pact_id: str
    pact_version: str
    candidate_hash: str
    asset: str
    scale: int
    states: list[str]
    initial: int
    final: frozenset[int]
    transitions: list[Json]
    transition_index: dict[str, int]
    accounts: list[Json]
    account_index: dict[str, int]
    stamps: list[str]
    stamp_index: dict[str, int]
    # Per stamp: the largest value its age is compared with, plus one (ages beyond are alike).
    clock_maxima: list[int]
    params: list[Json]
    param_index: dict[str, int]
    # Per param, its samples (the fixed value alone for a fixed one). Never their product: ranged
    # params are symbols in a symbolic run, and the explorer combines only the ones it samples.
    param_samples: list[tuple[Any, ...]]
    sites: list[CallSite]
    effects: dict[str, Json]
    invariants: list[Json]
    roles: dict[str, Json]
    bounds: Json
    approval_transitions: list[int] = field(default_factory=list)
    # Stamps compared with other stamps: their zones are never extrapolated.
    exact_stamps: frozenset[int] = frozenset()
    # The time dimensions each guard (by transition index) and invariant (by name) reads.
    guard_dims: list[tuple[Dim, ...]] = field(default_factory=list)
    invariant_dims: dict[str, tuple[Dim, ...]] = field(default_factory=dict)
    # Liveness properties (new in 1.1), as `model.json` holds them; empty when none.
    properties: list[Json] = field(default_factory=list)
    # Limits across agreements (new in 1.1), as `model.json` holds them; empty when none.
    limits: list[Json] = field(default_factory=list)
    # The pact's `budget` as transitions.json holds it (model.json does not): the runtime refuses a
    # command whose calls would pass its `max_tool_calls` or `ceiling` (PW524, PW525). None: no budget.
    budget: Json | None = None

    @property
    def state_final(self) -> list[bool]:
        return [i in self.final for i in range(len(self.states))]


def _value(param: Json, text: str) -> Any:
    """A param sample as the explorer computes with it."""
    kind = param["type"]
    if kind in ("money", "duration"):
        return int(text)
    if kind == "percent":
        return Percent.parse(text).value
    return text


Linear = tuple[int, dict[str, int], int]  # (coefficient of now, stamp -> coefficient, seconds)
_COMPARISONS = ("<", "<=", ">", ">=", "==", "!=")


def _linear(expr: Json, fixed: dict[str, int]) -> Linear | None:
    """A time or duration expression as a linear form over `now` and stamps, or None."""
    op = expr["op"]
    if op == "now":
        return (1, {}, 0)
    if op == "stamp":
        return (0, {expr["name"]: 1}, 0)
    if op == "lit" and expr["type"] in ("duration", "int"):
        return (0, {}, int(expr["value"]))
    if op == "param" and expr["name"] in fixed:
        return (0, {}, fixed[expr["name"]])
    args = expr.get("args", [])
    if op == "neg":
        inner = _linear(args[0], fixed)
        return None if inner is None else (-inner[0], {k: -v for k, v in inner[1].items()}, -inner[2])
    if op in ("+", "-"):
        # `+` may be one node over all the terms of a long chain (new in 1.1): each term adds.
        parts = [_linear(a, fixed) for a in args]
        if any(part is None for part in parts):
            return None
        sign = 1 if op == "+" else -1
        stamps: dict[str, int] = {}
        now, constant = 0, 0
        for index, part in enumerate(parts):
            assert part is not None
            factor = 1 if index == 0 else sign
            now, constant = now + factor * part[0], constant + factor * part[2]
            for name, coef in part[1].items():
                stamps[name] = stamps.get(name, 0) + factor * coef
        return (now, {k: v for k, v in stamps.items() if v}, constant)
    if op == "*":
        left, right = _linear(args[0], fixed), _linear(args[1], fixed)
        if left is None or right is None:
            return None
        for scalar, other in ((left, right), (right, left)):
            if scalar[0] == 0 and not scalar[1]:
                k = scalar[2]
                return (other[0] * k, {n: c * k for n, c in other[1].items()}, other[2] * k)
    return None


def _time_comparisons(expr: Json | None) -> list[Json]:
    """Comparisons whose operands are times or durations."""
    if expr is None:
        return []
    found = []
    args = expr.get("args", [])
    if expr["op"] in _COMPARISONS and args and {a["type"] for a in args} & {"time", "duration"}:
        found.append(expr)
    for arg in args:
        found.extend(_time_comparisons(arg))
    return found


def _dims(expr: Json | None, stamp_index: dict[str, int], fixed: dict[str, int]) -> tuple[Dim, ...]:
    """The time dimensions `expr` reads, each with the values where its comparisons change.

    Every comparison of time is normalised to `now - stamp  OP  D` (the age of
    one stamp against a fixed duration) or `stamp1 - stamp2  OP  D` (two
    stamps against each other). Any other shape is refused: silently dropping
    a deadline would leave its transition unreachable and make invariants
    about it pass vacuously.
    """
    from pactwright.expr_text import render_expr

    points: dict[tuple[str, int, int], set[int]] = {}
    for comparison in _time_comparisons(expr):
        left, right = (_linear(a, fixed) for a in comparison["args"])
        if left is None or right is None:
            form = None
        else:
            stamps = dict(left[1])
            for name, coef in right[1].items():
                stamps[name] = stamps.get(name, 0) - coef
            form = (left[0] - right[0], {k: v for k, v in stamps.items() if v}, left[2] - right[2])
        unknown = form is not None and any(name not in stamp_index for name in form[1])
        if form is None or unknown:
            raise VerifyError(
                f"the verifier cannot place the time comparison `{render_expr(comparison)}`",
                code="PW303",
                hint="write deadlines as `now >= STAMP + DURATION` with fixed durations",
            )
        now, stamps, constant = form
        if now == 0 and not stamps:
            continue
        if now and len(stamps) == 1 and next(iter(stamps.values())) == -now:
            # now*(now - stamp) + constant OP 0: the age is compared with -constant/now;
            # over whole seconds the comparison changes at its ceiling or just past its floor.
            key = ("age", stamp_index[next(iter(stamps))], -1)
            points.setdefault(key, set()).update(p for p in _crossings(-constant, now) if p > 0)
            continue
        if now == 0 and len(stamps) == 2 and sum(stamps.values()) == 0:
            coef = max(stamps.values())
            plus = next(name for name, c in stamps.items() if c == coef)
            minus = next(name for name, c in stamps.items() if c == -coef)
            # coef*(plus - minus) + constant OP 0: the difference is compared with -constant/coef.
            key = ("diff", stamp_index[plus], stamp_index[minus])
            points.setdefault(key, set()).update(_crossings(-constant, coef))
            continue
        raise VerifyError(
            f"the verifier cannot place the time comparison `{render_expr(comparison)}`",
            code="PW303",
            hint="compare `now` with one stamp plus a fixed duration, or two stamps with each other",
        )
    return tuple(Dim(kind, s, other, tuple(sorted(found))) for (kind, s, other), found in sorted(points.items()))


def _crossings(top: int, bottom: int) -> tuple[int, int]:
    """Where a comparison of a whole number x with top/bottom can change: ceil and floor + 1."""
    return (-(-top // bottom), top // bottom + 1)


def read_model(doc: object) -> ModelDocument:
    """`doc` through the kernel's `ModelDocument`, or a PW301 / PW304 refusal naming the field.

    A document of this format that lacks a field, has one too many, holds a
    value of the wrong type or names an undeclared state, role, account or
    effect is not one this verifier can read (PW301); an operator no reader
    evaluates is PW304. The explorer never meets such a document.
    """
    found = doc.get("format") if isinstance(doc, dict) else None
    if found != MODEL_FORMAT:
        raise VerifyError(f"unsupported model format `{found}`", code="PW301")
    try:
        return ModelDocument.model_validate(doc)
    except ValidationError as exc:
        op = has_unknown_operator(exc)
        if op is not None:
            raise VerifyError(f"unknown expression operator `{op}` in the model", code="PW304") from None
        path, message, _ = problem(exc)
        raise VerifyError(
            f"`model.json` does not have the shape of `{MODEL_FORMAT}` at `{path}`: {message}",
            code="PW301",
            file="model.json",
            field=path,
            hint="recompile the bundle from its policy; do not edit `model.json` by hand",
        ) from None


def load_model(doc: Json, budget: Json | None = None) -> Model:
    """Index a model document; refuses formats this verifier does not know and malformed documents.

    `budget` is transitions.json's `budget` (the runtime enforces it at commit; model.json has no
    copy of it), so the explorer refuses what the runtime refuses.

    The tables below hold plain dictionaries (the explorer's hot loop reads
    them): the validated model's dump, made once here.
    """
    doc = read_model(doc).to_json()
    states = [s["name"] for s in doc["states"]]
    initial = [i for i, s in enumerate(doc["states"]) if s["initial"]]
    if len(initial) != 1:
        raise VerifyError("the model must have exactly one initial state", code="PW302")
    transitions = doc["transitions"]
    params = doc["params"]
    fixed_durations = {p["name"]: int(p["fixed"]) for p in params if p["type"] == "duration" and "fixed" in p}
    stamps = sorted({s for t in transitions for s in t["stamps"]})
    stamp_index = {s: i for i, s in enumerate(stamps)}
    guard_dims = [_dims(t["guard"], stamp_index, fixed_durations) for t in transitions]
    invariant_dims = {i["name"]: _dims(i["expr"], stamp_index, fixed_durations) for i in doc["invariants"]}
    exact_stamps: set[int] = set()
    maxima = [0] * len(stamps)
    for dims in [*guard_dims, *invariant_dims.values()]:
        for dim in dims:
            if dim.kind == "diff":
                exact_stamps.update((dim.stamp, dim.other))
            elif dim.points:
                maxima[dim.stamp] = max(maxima[dim.stamp], dim.points[-1])
    for stamp in exact_stamps:
        maxima[stamp] = INF
    sample_lists = []
    for param in params:
        if "fixed" in param:
            sample_lists.append((_value(param, param["fixed"]),))
        else:
            sample_lists.append(tuple(_value(param, s) for s in param.get("samples", ["any"])))
    effects = {e["name"]: e for e in doc["effects"]}
    sites: list[CallSite] = []
    for t_index, transition in enumerate(transitions):
        for call in transition["effects"]:
            effect = effects[call["effect"]]
            strategy = effect.get("strategy") or {"kind": "once"}
            sites.append(
                CallSite(
                    index=len(sites),
                    transition=t_index,
                    effect=call["effect"],
                    strategy=strategy["kind"],
                    compensation=strategy.get("compensation"),
                    amount=call.get("amount"),
                    max_calls=effect.get("max_calls"),
                    ceiling=int(effect["ceiling"]) if "ceiling" in effect else None,
                )
            )
    return Model(
        doc=doc,
        pact_id=doc["pact"]["id"],
        pact_version=doc["pact"]["version"],
        candidate_hash=doc["candidate_hash"],
        asset=doc["currency"]["asset"],
        scale=int(doc["currency"]["scale"]),
        states=states,
        initial=initial[0],
        final=frozenset(i for i, s in enumerate(doc["states"]) if s["final"]),
        transitions=transitions,
        transition_index={t["id"]: i for i, t in enumerate(transitions)},
        accounts=doc["accounts"],
        account_index={a["name"]: i for i, a in enumerate(doc["accounts"])},
        stamps=stamps,
        stamp_index=stamp_index,
        clock_maxima=maxima,
        exact_stamps=frozenset(exact_stamps),
        guard_dims=guard_dims,
        invariant_dims=invariant_dims,
        params=params,
        param_index={p["name"]: i for i, p in enumerate(params)},
        param_samples=sample_lists,
        sites=sites,
        effects=effects,
        invariants=doc["invariants"],
        properties=list(doc.get("properties") or []),
        limits=_limits(doc, sites),
        roles={r["name"]: r for r in doc["roles"]},
        bounds=doc["bounds"],
        approval_transitions=[i for i, t in enumerate(transitions) if t["approval"]],
        budget=dict(budget) if budget else None,
    )


def _limits(doc: Json, sites: list[Any]) -> list[Json]:
    """The model's limits (new in 1.1), checked: each sums a carried amount over a positive window."""
    out: list[Json] = []
    for limit in doc.get("limits") or []:
        if not any(s.effect == limit["effect"] and s.amount is not None for s in sites):
            raise VerifyError(
                f"limit `{limit['name']}` sums `{limit['effect']}`, which no call site carries money for",
                code="PW311",
            )
        if not str(limit["max"]).isdigit() or not isinstance(limit["window"], int) or limit["window"] <= 0:
            raise VerifyError(f"limit `{limit['name']}` has a bad `max` or `window`", code="PW312")
        out.append(limit)
    return out
