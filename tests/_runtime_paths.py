"""Paths of the verifier, in a form the runtime can be driven along, for the runtime-vs-verifier differential.

Two sources of paths, both taken from the verifier itself, never written by hand:

- the counterexamples of the report `verify_files` produces (events with
  kind command / clock / refused, the params, and `states_after` /
  `balances_after` per step);
- for every policy, a covering set: for each transition, one shortest path of
  the verifier's explorer that fires it, and for each move on an effect call
  site (dispatch, each fault, the strategy's `runtime` move, reconcile,
  abandon, compensate, cancel, per phase and `happened` before it:
  `_effect_paths.label`), one shortest path ending with it. Ranged params are symbolic in
  the explorer, so the path is found symbolically, the solver's witness
  values for its path condition pin the params, and the path is searched
  again concretely at those values; `concretize` then lays it on one timeline
  (concrete clock deltas) and `replay` + `describe` give the same per-step
  facts a counterexample has.

Each step also carries the policy invariants the verifier decides at that
state without reading the clock (time-free ones), so the runtime's own
evaluator can be compared with the verifier's, and, for a policy with effect
call sites, the verifier's move and its facts about every call site
(`_effect_paths.EffectFacts`).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field

from pactwright.canonical import load_json
from pactwright.money import parse_duration
from pactwright.verifier import counterexample as cx
from pactwright.verifier.explorer import Bounds, Explorer, Move, State
from pactwright.verifier.model import Json, load_model
from tests import _effect_paths as fx

# Every move of the verifier: the runtime executes effects (tests/_effect_paths.py maps each move).
RUNNABLE = frozenset({"command", "clock", "refused", "approve"}) | fx.EFFECT_MOVES


@dataclass(frozen=True)
class Step:
    """One event of a verifier path and what the verifier says holds after it."""

    kind: str  # command | clock | refused | approve | an effect move (dispatch, fault, ...)
    transition: str | None
    actor: str | None
    delta: int  # seconds, for a clock step
    state_after: str
    balances_after: dict[str, int]  # non-zero balances only, as the report lists them
    invariants_after: dict[str, bool] | None = None  # time-free policy invariants, where known
    effects: fx.EffectFacts | None = None  # the verifier's move and call sites, for a policy with effects


@dataclass(frozen=True)
class VerifierPath:
    """A path to drive the runtime along: where it comes from, its params, its steps."""

    origin: str
    params: dict[str, str]  # as the report renders them: `1.00`, `10%`, `14d`, text
    steps: tuple[Step, ...]
    violated: tuple[str, ...] = ()  # a counterexample's invariants, violated after its last step


@dataclass
class Coverage:
    paths: list[VerifierPath] = field(default_factory=list)
    uncovered: dict[str, str] = field(default_factory=dict)  # transition -> why no runnable path fires it


def from_events(origin: str, params: Mapping[str, str], events: list[Json], violated: tuple[str, ...] = (),
                invariants: list[dict[str, bool] | None] | None = None,
                effects: list[fx.EffectFacts] | None = None) -> VerifierPath:  # fmt: skip
    """A report-shaped list of events (a counterexample's, or `describe`'s) as a path."""
    steps = []
    for index, event in enumerate(events):
        kind, command = str(event["kind"]), str(event["command"])
        delta, transition = 0, None
        if kind == "clock":
            delta = parse_duration(command.removeprefix("time passes +"))
        elif kind == "refused":
            transition = command.removeprefix("refused ")
        elif kind == "approve":
            transition = command.removeprefix("approve ")
        elif kind == "command":
            transition = command
        steps.append(
            Step(
                kind=kind,
                transition=transition,
                actor=event.get("actor"),
                delta=delta,
                state_after=str(event["states_after"][0]),
                balances_after={k: int(v) for k, v in event["balances_after"].items() if int(v) != 0},
                invariants_after=None if invariants is None else invariants[index],
                effects=None if effects is None else effects[index],
            )
        )
    return VerifierPath(origin, dict(params), tuple(steps), violated)


def counterexample_paths(report: Json, files: Mapping[str, bytes]) -> tuple[list[VerifierPath], list[tuple[str, str]]]:
    """The report's counterexamples the runtime can run, and (origin, reason) for those it cannot.

    For a policy with effect call sites, the events are matched back to the
    explorer's moves, so each step carries the verifier's effect facts.
    """
    model = load_model(load_json(files["model.json"]))
    runnable: list[VerifierPath] = []
    skipped: list[tuple[str, str]] = []
    for number, example in enumerate(report["counterexamples"], start=1):
        origin = f"counterexample {number} ({', '.join(example['invariants'])})"
        if len(example["params"]) != 1:
            skipped.append((origin, f"{len(example['params'])} agreements"))
            continue
        params, events = example["params"][0], example["events"]
        effects = None
        if model.sites:
            explorer, start, moves = fx.moves_of(model, params, events)
            states = cx.simulate(explorer, start, moves)
            assert states is not None
            effects = fx.facts(explorer, states, moves)
        runnable.append(from_events(origin, params, events, tuple(example["invariants"]), effects=effects))
    return runnable, skipped


def _label(explorer: Explorer, state: State, move: Move) -> str | None:
    """What a move covers: a transition it fires, or an effect move on a call site (None: nothing new)."""
    if move.kind == "command":
        return move.name
    return fx.label(explorer, state, move)


def _bfs(explorer: Explorer, wanted: set[str] | None) -> dict[str, tuple[State, list[Move], State]]:
    """Per label, the first (shortest) path covering it: (start, moves, the state it reaches).

    Breadth first over `successors` with symmetry off (one agreement);
    `wanted` None means every label (every transition and effect move).
    """
    found: dict[str, tuple[State, list[Move], State]] = {}
    explorer.symmetry = False
    try:
        queue: deque[tuple[State, State, list[Move]]] = deque()
        seen: set[State] = set()
        for start in explorer.initial_states():
            queue.append((start, start, []))
            seen.add(start)
        while queue:
            start, state, moves = queue.popleft()
            if len(moves) >= explorer.bounds.max_depth:
                continue
            for move, succ, _ in explorer.successors(state):
                if move.kind not in RUNNABLE:
                    continue
                path = [*moves, move]
                name = _label(explorer, state, move)
                if name is not None and name not in found and (wanted is None or name in wanted):
                    found[name] = (start, path, succ)
                if succ not in seen:
                    seen.add(succ)
                    queue.append((start, succ, path))
            if wanted is not None and wanted <= set(found):
                break
    finally:
        explorer.symmetry = True
    return found


def covering_paths(files: Mapping[str, bytes], report: Json) -> Coverage:
    """For each transition and each effect move, one shortest path of the verifier's explorer covering it."""
    model = load_model(load_json(files["model.json"]))
    table = load_json(files["transitions.json"])
    programs = {p: d.decode("utf-8") for p, d in files.items() if p.startswith("ledger/")}
    bounds = Bounds()
    symbolic = Explorer(model, bounds)
    first = _bfs(symbolic, None)
    out = Coverage()
    never = set(report["coverage"]["transitions_never_fired"])
    for transition in model.transitions:
        tid = transition["id"]
        if tid not in first:
            out.uncovered[tid] = (
                "the verifier never fires it within its bounds" if tid in never else "no path of the explorer fires it"
            )
    # One concrete explorer per witness valuation (the smallest values where the symbolic path holds).
    groups: dict[tuple[tuple[str, int], ...], list[str]] = {}
    for name, (_, _, succ) in sorted(first.items()):
        witness = symbolic.space.witness(symbolic.split(succ)[1][0][2]) if symbolic.symbolic else {}
        groups.setdefault(tuple(sorted((witness or {}).items())), []).append(name)
    for witness_key, names in groups.items():
        concrete = Explorer(model, bounds, pinned=dict(witness_key)) if symbolic.symbolic else symbolic
        again = _bfs(concrete, set(names))
        for name in names:
            if name not in again:
                out.uncovered[name] = f"no concrete path at the witness values {dict(witness_key)} (a verifier bug?)"
                continue
            start, moves, _ = again[name]
            moves = cx.concretize(concrete, start, moves, "money_conserved")
            steps = cx.replay(concrete, start, moves, [], table, programs)
            described = cx.describe(concrete, start, moves, steps, [])
            states = cx.simulate(concrete, start, moves)
            assert states is not None
            out.paths.append(
                from_events(
                    f"covers {name}" if name.startswith("`") else f"covers `{name}`",
                    described["params"][0],
                    described["events"],
                    invariants=[_time_free_invariants(concrete, s) for s in states[1:]],
                    effects=fx.facts(concrete, states, moves) if model.sites else None,
                )
            )
    out.paths.sort(key=lambda p: p.origin)
    return out


def _time_free_invariants(explorer: Explorer, state: State) -> dict[str, bool]:
    """The policy invariants that do not read the clock, as the verifier decides them in `state`."""
    violated = {name for name, _ in explorer.check_state(state)}
    return {
        name: name not in violated for name, _ in explorer.invariants if not explorer.model.invariant_dims.get(name)
    }


def time_reading(files: Mapping[str, bytes]) -> set[str]:
    """Policy invariants that read the clock: the verifier decides them per cell of time, not per instant."""
    model = load_model(load_json(files["model.json"]))
    return {inv["name"] for inv in model.invariants if model.invariant_dims.get(inv["name"])}
