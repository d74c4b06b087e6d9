"""Vacuity by mutation: small changes to the model that the invariants should catch.

Each mutant is one deliberate bug (drop a guard, retarget a transition,
alter a split, weaken a strategy) explored under the same bounds, without
proofs or further mutation. A mutant that no invariant catches is reported
as `uncaught` with its clause; an invariant that no mutant violates is
marked `vacuous-suspect`, because an invariant nothing can break may be
checking nothing.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

from pactwright.verifier.explorer import Bounds, Explorer
from pactwright.verifier.model import Json, load_model

MAX_MUTANT_STATES = 200_000


def _mutants(doc: Json) -> Iterator[tuple[str, str, str | None, Json]]:
    """(id, description, clause, mutated model) in a fixed order."""
    states = [s["name"] for s in doc["states"]]
    for index, transition in enumerate(doc["transitions"]):
        tid, clause = transition["id"], transition["clause"]
        if transition["guard"] is not None:
            mutant = copy.deepcopy(doc)
            mutant["transitions"][index]["guard"] = None
            yield f"drop-guard:{tid}", f"drop the guard of `{tid}`", clause, mutant
        if transition["approval"] is not None:
            mutant = copy.deepcopy(doc)
            mutant["transitions"][index]["approval"] = None
            yield f"drop-approval:{tid}", f"drop the approval `{tid}` requires", clause, mutant
        for target in states:
            if target != transition["to"] and target not in transition["from"]:
                mutant = copy.deepcopy(doc)
                mutant["transitions"][index]["to"] = target
                yield (
                    f"retarget:{tid}:{target}",
                    f"send `{tid}` to `{target}` instead of `{transition['to']}`",
                    clause,
                    mutant,
                )
                break
        for p_index, posting in enumerate(transition["postings"]):
            rule = posting["rule"]
            if rule["kind"] in ("allotment", "capped"):
                mutant = copy.deepcopy(doc)
                portions = mutant["transitions"][index]["postings"][p_index]["rule"]["portions"]
                first, last = portions[0], portions[-1]
                if first is not last and first["to"] != last["to"]:
                    first["to"], last["to"] = last["to"], first["to"]
                    yield (
                        f"split:{tid}:{p_index}",
                        f"swap the first and `remaining` recipients of the split in `{tid}`",
                        clause,
                        mutant,
                    )
            elif rule["kind"] == "single":
                mutant = copy.deepcopy(doc)
                mutant["transitions"][index]["postings"][p_index]["amount"] = {
                    "op": "+",
                    "type": "money",
                    "args": [posting["amount"], {"op": "lit", "type": "money", "value": "1"}],
                }
                yield f"amount:{tid}:{p_index}", f"move one minor unit more in `{tid}`", clause, mutant
    for e_index, effect in enumerate(doc["effects"]):
        strategy = (effect.get("strategy") or {}).get("kind")
        if strategy in ("reconcilable", "idempotent", "once"):
            mutant = copy.deepcopy(doc)
            mutant["effects"][e_index]["strategy"] = {"kind": "retry"}
            clause = next(
                (t["clause"] for t in doc["transitions"] if any(c["effect"] == effect["name"] for c in t["effects"])),
                None,
            )
            yield (
                f"strategy:{effect['name']}",
                f"change the strategy of `{effect['name']}` from `{strategy}` to `retry`",
                clause,
                mutant,
            )


def run(doc: Json, bounds: Bounds, invariants: list[Json]) -> list[Json]:
    """Explore each mutant; returns mutant results and marks vacuous invariants in place."""
    results: list[Json] = []
    caught_any: set[str] = set()
    mutant_bounds = Bounds(
        agreements=bounds.agreements,
        faults=bounds.faults,
        max_depth=bounds.max_depth,
        max_states=min(bounds.max_states, MAX_MUTANT_STATES),
    )
    baseline_violated = {i["name"] for i in invariants if i["verdict"] == "violated"}
    for mutant_id, description, clause, mutant in _mutants(doc):
        explorer = Explorer(load_model(mutant), mutant_bounds)
        result = explorer.explore()
        caught = sorted(set(result.violations) - baseline_violated)
        caught_any.update(caught)
        entry: dict[str, Any] = {
            "id": mutant_id,
            "description": description,
            "clause": clause,
            "caught_by": caught,
            "status": "caught" if caught else "uncaught",
            "states": len(result.states),
            "exhausted": result.exhausted,
        }
        results.append(entry)
    if results:
        for invariant in invariants:
            if invariant["verdict"] != "violated" and not invariant["builtin"] and invariant["name"] not in caught_any:
                # A proof stays a proof; the flag still tells the reviewer no mutant could break it.
                invariant["vacuous_suspect"] = True
                if invariant["verdict"] == "holds-to-bound":
                    invariant["verdict"] = "vacuous-suspect"
    return results
