"""The verifier's view of a policy: `model.json`, loaded into indexed tables.

The verifier reads only emitted artifacts. This module turns the model
document into integer-indexed tables (states, transitions, accounts,
effect call sites, stamps, deadlines) that the explorer's hot loop can use
without dictionary lookups by name.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import product
from typing import Any

from pactwright.errors import VerifyError
from pactwright.money import Percent

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
    stamp_offsets: dict[int, list[int]]  # stamp -> deadline offsets in seconds
    params: list[Json]
    param_index: dict[str, int]
    param_choices: list[tuple[Any, ...]]  # every combination of param samples
    sites: list[CallSite]
    effects: dict[str, Json]
    invariants: list[Json]
    roles: dict[str, Json]
    bounds: Json
    approval_transitions: list[int] = field(default_factory=list)

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


def _offset_seconds(offset: Json, fixed: dict[str, int]) -> int | None:
    if offset["op"] == "lit" and offset["type"] == "duration":
        return int(offset["value"])
    if offset["op"] == "param" and offset["name"] in fixed:
        return fixed[offset["name"]]
    return None


def load_model(doc: Json) -> Model:
    """Index a model document; refuses formats this verifier does not know."""
    if doc.get("format") != MODEL_FORMAT:
        raise VerifyError(f"unsupported model format `{doc.get('format')}`", code="PW301")
    states = [s["name"] for s in doc["states"]]
    initial = [i for i, s in enumerate(doc["states"]) if s["initial"]]
    if len(initial) != 1:
        raise VerifyError("the model must have exactly one initial state", code="PW302")
    transitions = doc["transitions"]
    params = doc["params"]
    fixed_durations = {p["name"]: int(p["fixed"]) for p in params if p["type"] == "duration" and "fixed" in p}
    stamps = sorted({s for t in transitions for s in t["stamps"]})
    stamp_index = {s: i for i, s in enumerate(stamps)}
    offsets: dict[int, set[int]] = {i: set() for i in range(len(stamps))}
    for deadline in doc["deadlines"]:
        if deadline["stamp"] is None or deadline["stamp"] not in stamp_index:
            continue
        seconds = _offset_seconds(deadline["offset"], fixed_durations)
        if seconds is None:
            raise VerifyError("a deadline offset must be a fixed duration", code="PW303")
        offsets[stamp_index[deadline["stamp"]]].add(seconds)
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
        stamp_offsets={i: sorted(v) for i, v in offsets.items()},
        params=params,
        param_index={p["name"]: i for i, p in enumerate(params)},
        param_choices=list(product(*sample_lists)),
        sites=sites,
        effects=effects,
        invariants=doc["invariants"],
        roles={r["name"]: r for r in doc["roles"]},
        bounds=doc["bounds"],
        approval_transitions=[i for i, t in enumerate(transitions) if t["approval"]],
    )
