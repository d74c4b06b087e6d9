"""Differential: the commands the liveness graph leaves out are exactly those the runtime refuses.

The liveness check removes a command whose effect dependency has an unknown
outcome (`Explorer.outcome_refusal`): PW526 while a call of the effect
stands abandoned and the guard does not read `abandoned(E)`, PW527 while one
is parked for reconciliation. The runtime's rule is
`runtime/_command_effects.check_dependencies`. For every transition of every
policy in policies/ and tests/planted/, and every way of putting each effect
with a call site in no such phase, abandoned, parked, or (with two call
sites) both, the two must refuse the same command with the same code and
effect.
"""

from __future__ import annotations

from itertools import product
from pathlib import Path

import pytest

from pactwright.canonical import load_json
from pactwright.compiler.bundle import compile_candidate
from pactwright.compiler.pipeline import check_bytes
from pactwright.errors import CommandError
from pactwright.protocol import Phase
from pactwright.runtime._command_effects import Tally, check_dependencies
from pactwright.verifier.explorer import Bounds, Explorer
from pactwright.verifier.model import load_model

ROOT = Path(__file__).resolve().parent.parent
POLICIES = sorted((ROOT / "policies").glob("*.pact")) + sorted((ROOT / "tests" / "planted").glob("*.pact"))
STANDINGS = ("none", "abandoned", "parked", "both")


def _runtime(transition: dict[str, object], abandoned: set[str], parked: set[str]) -> tuple[str, str] | None:
    try:
        check_dependencies(transition, Tally(abandoned=frozenset(abandoned), parked=frozenset(parked)))
    except CommandError as refused:
        return str(refused.code), str(refused.found)
    return None


@pytest.mark.parametrize("path", POLICIES, ids=lambda p: p.name)
def test_the_liveness_graph_refuses_what_the_runtime_refuses(path: Path) -> None:
    result = check_bytes(path.read_bytes())
    assert result.candidate is not None
    files = dict(compile_candidate(result.candidate, result.source_map, path.name))
    explorer = Explorer(load_model(load_json(files["model.json"])), Bounds())
    table = {t["id"]: t for t in load_json(files["transitions.json"])["transitions"]}
    effects = sorted(explorer.effect_sites)
    block = explorer.initial_states()[0][1 : 1 + explorer.layout.width]
    phase = explorer.layout.phase
    compared = 0
    for standing in product(STANDINGS, repeat=len(effects)):
        state = list(block)
        abandoned, parked = set(), set()
        for effect, how in zip(effects, standing, strict=True):
            sites = explorer.effect_sites[effect]
            if how == "both" and len(sites) < 2:
                continue
            if how in ("abandoned", "both"):
                state[phase + sites[0]] = Phase.ABANDONED_UNCERTAIN
                abandoned.add(effect)
            if how in ("parked", "both"):
                state[phase + sites[-1]] = Phase.NEEDS_RECONCILIATION
                parked.add(effect)
        for t, transition in enumerate(explorer.model.transitions):
            expected = _runtime(table[transition["id"]], abandoned, parked)
            assert explorer.outcome_refusal(tuple(state), t) == expected, (transition["id"], standing)
            compared += 1
    assert compared >= len(explorer.model.transitions)


def test_a_guard_reading_abandoned_is_refused_only_while_parked() -> None:
    """refund_outcomes: `close_after_abandon` reads `abandoned(refund_payment)`; `confirm` does not."""
    path = ROOT / "policies" / "refund_outcomes.pact"
    result = check_bytes(path.read_bytes())
    assert result.candidate is not None
    files = dict(compile_candidate(result.candidate, result.source_map, path.name))
    explorer = Explorer(load_model(load_json(files["model.json"])), Bounds())
    block = list(explorer.initial_states()[0][1 : 1 + explorer.layout.width])
    site = explorer.effect_sites["refund_payment"][0]
    index = explorer.model.transition_index
    block[explorer.layout.phase + site] = Phase.ABANDONED_UNCERTAIN
    assert explorer.outcome_refusal(tuple(block), index["confirm"]) == ("PW526", "refund_payment")
    assert explorer.outcome_refusal(tuple(block), index["close_after_abandon"]) is None
    block[explorer.layout.phase + site] = Phase.NEEDS_RECONCILIATION
    assert explorer.outcome_refusal(tuple(block), index["close_after_abandon"]) == ("PW527", "refund_payment")
