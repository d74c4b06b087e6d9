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
            if how in ("abandoned", "both"):  # the call abandoned, and the agreement's memory of it
                state[phase + sites[0]] = Phase.ABANDONED_UNCERTAIN
                state[explorer.layout.abandoned] |= explorer.abandon_bit[effect]
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
    block[explorer.layout.abandoned] |= explorer.abandon_bit["refund_payment"]
    assert explorer.outcome_refusal(tuple(block), index["confirm"]) == ("PW526", "refund_payment")
    assert explorer.outcome_refusal(tuple(block), index["close_after_abandon"]) is None
    block[explorer.layout.phase + site] = Phase.NEEDS_RECONCILIATION
    assert explorer.outcome_refusal(tuple(block), index["close_after_abandon"]) == ("PW527", "refund_payment")


@pytest.mark.parametrize("path", POLICIES, ids=lambda p: p.name)
def test_a_call_site_is_in_flight_for_the_model_exactly_when_the_runtime_says(path: Path) -> None:
    """One call in flight per call site: the model has no command while a site of its transition is not
    idle (`Explorer._idle`), and the runtime refuses it PW530 while the latest call there is not
    `settled`. For every call site of every policy and every phase, the two agree; the runtime's own
    phases (`dispatched`: sent, no answer yet; `cancelled`: never sent) are in flight and settled."""
    from pactwright.protocol import PHASE_NAMES
    from pactwright.runtime._command_effects import check_in_flight, settled

    result = check_bytes(path.read_bytes())
    assert result.candidate is not None
    files = dict(compile_candidate(result.candidate, result.source_map, path.name))
    explorer = Explorer(load_model(load_json(files["model.json"])), Bounds())
    table = {t["id"]: t for t in load_json(files["transitions.json"])["transitions"]}
    block = explorer.initial_states()[0][1 : 1 + explorer.layout.width]
    for site in explorer.model.sites:
        transition = explorer.model.transitions[site.transition]["id"]
        index = [s.index for s in explorer.model.sites if s.transition == site.transition].index(site.index)
        for phase in Phase:
            state = list(block)
            state[explorer.layout.phase + site.index] = phase
            idle = explorer._idle(tuple(state), site.index)
            assert idle == settled(PHASE_NAMES[phase], site.strategy), (transition, site.effect, phase)
            seen = Tally(in_flight=frozenset() if idle else frozenset({(transition, index)}))
            if idle:
                check_in_flight(table[transition], seen)
            else:
                with pytest.raises(CommandError) as refused:
                    check_in_flight(table[transition], seen)
                assert (refused.value.code, refused.value.found) == ("PW530", site.effect)
        assert not settled("dispatched", site.strategy) and settled("cancelled", site.strategy)
