"""Paths of the verifier, in a form the runtime can be driven along, for the runtime-vs-verifier differential.

Two sources of paths, both taken from the verifier itself, never written by hand:

- the counterexamples of the report `verify_files` produces (events with
  kind command / clock / refused, the params, and `states_after` /
  `balances_after` per step);
- for every policy, a covering set: for each transition, one shortest path of
  the verifier's explorer that fires it, using only moves the runtime can
  take today (commands, the clock, approvals). Ranged params are symbolic in
  the explorer, so the path is found symbolically, the solver's witness
  values for its path condition pin the params, and the path is searched
  again concretely at those values; `concretize` then lays it on one timeline
  (concrete clock deltas) and `replay` + `describe` give the same per-step
  facts a counterexample has.

Each step also carries the policy invariants the verifier decides at that
state without reading the clock (time-free ones), so the runtime's own
evaluator can be compared with the verifier's.
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

# The moves the runtime's command path can take today: effects are not executed, so no
# dispatch, fault, runtime strategy, reconciliation or compensation.
RUNNABLE = frozenset({"command", "clock", "refused", "approve"})


@dataclass(frozen=True)
class Step:
    """One event of a verifier path and what the verifier says holds after it."""

    kind: str  # command | clock | refused | approve
    transition: str | None
    actor: str | None
    delta: int  # seconds, for a clock step
    state_after: str
    balances_after: dict[str, int]  # non-zero balances only, as the report lists them
    invariants_after: dict[str, bool] | None = None  # time-free policy invariants, where known


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


def unrunnable(events: list[Json]) -> list[str]:
    """The events of a report path the runtime cannot take today (effects, faults), as the report names them."""
    return [str(e["command"]) for e in events if e["kind"] not in RUNNABLE]


def from_events(origin: str, params: Mapping[str, str], events: list[Json], violated: tuple[str, ...] = (),
                invariants: list[dict[str, bool] | None] | None = None) -> VerifierPath:  # fmt: skip
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
        else:
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
            )
        )
    return VerifierPath(origin, dict(params), tuple(steps), violated)


def counterexample_paths(report: Json) -> tuple[list[VerifierPath], list[tuple[str, str]]]:
    """The report's counterexamples the runtime can run, and (origin, reason) for those it cannot."""
    runnable: list[VerifierPath] = []
    skipped: list[tuple[str, str]] = []
    for number, example in enumerate(report["counterexamples"], start=1):
        origin = f"counterexample {number} ({', '.join(example['invariants'])})"
        blocked = unrunnable(example["events"])
        if blocked:
            skipped.append((origin, "needs " + ", ".join(f"`{b}`" for b in blocked) + ": the runtime does not "
                            "execute effects yet"))  # fmt: skip
            continue
        if len(example["params"]) != 1:
            skipped.append((origin, f"{len(example['params'])} agreements"))
            continue
        runnable.append(from_events(origin, example["params"][0], example["events"], tuple(example["invariants"])))
    return runnable, skipped


def _bfs(explorer: Explorer, wanted: set[str] | None) -> dict[str, tuple[State, list[Move], State]]:
    """Per transition, the first (shortest) runnable path firing it: (start, moves, the state it reaches).

    Breadth first over `successors` with symmetry off (one agreement), restricted to
    commands, the clock and approvals; `wanted` None means every transition.
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
                if move.kind == "command" and move.name not in found and (wanted is None or move.name in wanted):
                    found[move.name] = (start, path, succ)
                if succ not in seen:
                    seen.add(succ)
                    queue.append((start, succ, path))
            if wanted is not None and wanted <= set(found):
                break
    finally:
        explorer.symmetry = True
    return found


def covering_paths(files: Mapping[str, bytes], report: Json) -> Coverage:
    """For each transition, one shortest runnable path of the verifier's explorer that fires it."""
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
        if tid in first:
            continue
        out.uncovered[tid] = (
            "the verifier never fires it within its bounds"
            if tid in never
            else "every path of the verifier that fires it needs an effect or a fault, which the runtime "
            "does not run yet"
        )
    # One concrete explorer per witness valuation (the smallest values where the symbolic path holds).
    groups: dict[tuple[tuple[str, int], ...], list[str]] = {}
    for tid, (_, _, succ) in sorted(first.items()):
        witness = symbolic.space.witness(symbolic.split(succ)[1][0][2]) if symbolic.symbolic else {}
        groups.setdefault(tuple(sorted((witness or {}).items())), []).append(tid)
    for witness_key, tids in groups.items():
        concrete = Explorer(model, bounds, pinned=dict(witness_key)) if symbolic.symbolic else symbolic
        again = _bfs(concrete, set(tids))
        for tid in tids:
            if tid not in again:
                out.uncovered[tid] = f"no concrete path at the witness values {dict(witness_key)} (a verifier bug?)"
                continue
            start, moves, _ = again[tid]
            moves = cx.concretize(concrete, start, moves, "money_conserved")
            steps = cx.replay(concrete, start, moves, [], table, programs)
            described = cx.describe(concrete, start, moves, steps, [])
            states = cx.simulate(concrete, start, moves)
            assert states is not None
            out.paths.append(
                from_events(
                    f"covers `{tid}`",
                    described["params"][0],
                    described["events"],
                    invariants=[_time_free_invariants(concrete, s) for s in states[1:]],
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
