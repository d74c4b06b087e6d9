"""The verifier's pipeline: explore, confirm counterexamples, prove, mutate, report.

Input is a bundle's files (path -> bytes); output is the report document.
Nothing here reads compiler internals: `model.json` drives exploration,
`transitions.json` and `ledger/*.num` drive replay.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from pactwright import __version__
from pactwright.canonical import hash_bytes, load_json
from pactwright.errors import VerifyError
from pactwright.verifier import counterexample as cx
from pactwright.verifier.explorer import Bounds, ExplorationResult, Explorer
from pactwright.verifier.model import Json, Model, load_model
from pactwright.verifier.protocol import PHASE_NAMES, Phase

REPORT_FORMAT = "pactwright.report/1"
BUILTINS = {
    "money_conserved": "money is conserved across all accounts",
    "no_negative_internal": "no non-external account goes negative",
    "no_posting_after_final": "no ledger posting after a final state",
    "effect_max_calls": "an effect with max_calls is applied at most that often",
    "effect_applied_once": "a money-moving effect that does not deduplicate by key takes effect at most once "
    "per commit of its transition",
    "funds_available": "no enabled command is refused at commit for lack of funds or a negative amount",
    "funds_not_stuck": "no agreement is left where no command can ever commit while it holds money",
}
# Files the report binds to: every compiled artifact it read or vouches for.
CHECKED_PREFIXES = ("candidate.json", "transitions.json", "events.schema.json", "model.json", "trace.json", "ledger/")


@dataclass
class VerifyOptions:
    bounds: Bounds
    mutants: bool = True
    proofs: bool = True
    progress: Callable[[int, int, int], None] | None = None
    # Accept a run a bound stopped before it decided the policy (`--allow-incomplete`): verdict `pass`, recorded.
    allow_incomplete: bool = False
    # Worker processes for mutation analysis (`--jobs`); the report does not depend on it.
    jobs: int = 1


def _checked_hashes(files: Mapping[str, bytes]) -> dict[str, str]:
    return {path: hash_bytes(data) for path, data in sorted(files.items()) if path.startswith(CHECKED_PREFIXES)}


def explore(
    model: Model, bounds: Bounds, progress: Callable[[int, int, int], None] | None = None
) -> tuple[Explorer, ExplorationResult]:
    explorer = Explorer(model, bounds)
    return explorer, explorer.explore(progress)


def counterexamples(
    explorer: Explorer, result: ExplorationResult, table: Json, programs: dict[str, str]
) -> tuple[list[dict[str, Any]], dict[str, int]]:
    """Confirmed counterexamples, one per distinct path, and invariant -> index.

    A symbolic exploration names each violation with param values where it
    happens; each is confirmed by a concrete exploration at those values,
    whose shortest path is the counterexample (never longer: the symbolic
    search is exact, so no valuation has a shorter one it missed).
    """
    if not explorer.symbolic:
        return _concrete_counterexamples(explorer, result, table, programs)
    found: list[dict[str, Any]] = []
    index_of: dict[str, int] = {}
    by_witness: dict[tuple[tuple[str, int], ...], list[str]] = {}
    for name in sorted(result.violations, key=lambda n: (result.depths[result.violations[n].state_id], n)):
        witness = result.violations[name].witness
        if witness is None:
            raise VerifyError(f"violation of `{name}` has no witness values; this is a verifier bug", code="PW390")
        by_witness.setdefault(tuple(sorted(witness.items())), []).append(name)
    for witness_key, names in by_witness.items():
        bounds = replace(explorer.bounds, stop_on=None if "funds_not_stuck" in names else frozenset(names))
        concrete = Explorer(explorer.model, bounds, pinned=dict(witness_key))
        concrete_result = concrete.explore()
        missing = [n for n in names if n not in concrete_result.violations]
        if missing:
            raise VerifyError(
                f"violation of `{missing[0]}` does not reproduce at its witness values; this is a verifier bug",
                code="PW390",
            )
        concrete_result.violations = {n: concrete_result.violations[n] for n in names}
        extra, extra_index = _concrete_counterexamples(concrete, concrete_result, table, programs)
        offset = len(found)
        found.extend(extra)
        for name, position in extra_index.items():
            index_of[name] = offset + position
    return found, index_of


def _concrete_counterexamples(
    explorer: Explorer, result: ExplorationResult, table: Json, programs: dict[str, str]
) -> tuple[list[dict[str, Any]], dict[str, int]]:
    found: list[dict[str, Any]] = []
    by_path: dict[tuple[Any, ...], int] = {}
    index_of: dict[str, int] = {}
    for name in sorted(result.violations, key=lambda n: (result.depths[result.violations[n].state_id], n)):
        violation = result.violations[name]
        start, moves = cx.shortest(explorer, result, violation.state_id)
        if violation.refused is not None:
            moves.append(_refused_move(explorer, start, moves, violation.refused))
        moves = cx.minimize(explorer, start, moves, name)
        moves = cx.concretize(explorer, start, moves, name)
        key = (start, tuple((m.kind, m.agreement, m.name, m.fault, m.site, m.delta) for m in moves))
        if key in by_path:
            entry = found[by_path[key]]
            entry["_names"].append((name, violation.message))
            index_of[name] = by_path[key]
            continue
        by_path[key] = len(found)
        index_of[name] = len(found)
        found.append({"_start": start, "_moves": moves, "_names": [(name, violation.message)]})
    out = []
    for entry in found:
        names = [n for n, _ in entry["_names"]]
        steps = cx.replay(explorer, entry["_start"], entry["_moves"], names, table, programs)
        out.append(cx.describe(explorer, entry["_start"], entry["_moves"], steps, entry["_names"]))
    return out, index_of


def _refused_move(explorer: Explorer, start: cx.State, moves: list[Any], transition: str) -> Any:
    """The refused command at the end of a `funds_available` path, as a move of that path."""
    states = cx.simulate(explorer, start, moves)
    if states is None:
        raise VerifyError("counterexample path cannot be re-simulated; this is a verifier bug", code="PW390")
    for _, move, _ in explorer.refusals(states[-1]):
        if move.name == transition:
            return move
    raise VerifyError(f"the refusal of `{transition}` does not reproduce; this is a verifier bug", code="PW390")


def coverage(model: Model, explorer: Explorer, result: ExplorationResult) -> Json:
    fired = result.transitions_fired
    never = [t["id"] for t in model.transitions if t["id"] not in fired]
    exercised_clauses = {t["clause"] for t in model.transitions if t["id"] in fired and t["clause"]}
    all_clauses = {t["clause"] for t in model.transitions if t["clause"]}
    phases: dict[str, list[str]] = {}
    for site in model.sites:
        seen = sorted(result.phases_seen.get(site.index, set()) - {Phase.IDLE})
        key = f"{model.transitions[site.transition]['id']}:{site.effect}"
        phases[key] = [PHASE_NAMES[Phase(p)] for p in seen]
    return {
        "transitions_never_fired": never,
        "clauses_never_exercised": sorted(all_clauses - exercised_clauses),
        "states_never_reached": [s for i, s in enumerate(model.states) if i not in result.states_reached],
        "effect_phases": phases,
    }


def verify_files(files: Mapping[str, bytes], options: VerifyOptions) -> Json:
    """Verify a compiled bundle; returns the report document (deterministic)."""
    try:
        model_doc = load_json(files["model.json"])
        table = load_json(files["transitions.json"])
    except KeyError as exc:
        raise VerifyError(f"the bundle has no `{exc.args[0]}`", code="PW305") from None
    model = load_model(model_doc, budget=table.get("budget"))
    programs = {p: d.decode("utf-8") for p, d in files.items() if p.startswith("ledger/")}
    explorer, result = explore(model, options.bounds, options.progress)
    found, index_of = counterexamples(explorer, result, table, programs)
    properties: list[Json] = []
    if model.properties:
        from pactwright.verifier import liveness

        properties = liveness.check(explorer, result)
    from pactwright.verifier._limits_report import limit_verdicts

    limits = limit_verdicts(model, result, index_of, options.bounds.agreements)
    invariants: list[Json] = []
    for spec in model.invariants:
        invariants.append(_verdict(spec["name"], spec["clause"], False, result, index_of))
    for name, description in BUILTINS.items():
        entry = _verdict(name, None, True, result, index_of)
        entry["description"] = description
        invariants.append(entry)
    amounts: list[Json] = []
    if options.proofs:
        from pactwright.verifier import proofs

        amounts = proofs.transfer_properties(model)
        proofs.upgrade(model, explorer, result, invariants)
    mutants: list[Json] = []
    if options.mutants:
        from pactwright.verifier import mutation

        mutants = mutation.run(model_doc, options.bounds, invariants, options.jobs, budget=model.budget)
    from pactwright.verifier import _completeness

    unknown_queries: int = getattr(result, "unknown_queries", 0)
    complete = _completeness.is_complete(result.exhausted, unknown_queries, invariants, properties)
    verdict = _completeness.verdict_of([*invariants, *limits], complete, options.allow_incomplete, properties)
    warnings = list(result.warnings) + _completeness.bound_warnings(
        model, result, options.bounds, unknown_queries, complete, options.allow_incomplete, verdict == "fail"
    )
    return {
        "format": REPORT_FORMAT,
        "verifier": {"name": "pactwright", "version": __version__},
        "pact": {"id": model.pact_id, "version": model.pact_version},
        "candidate_hash": model.candidate_hash,
        "currency": model.doc["currency"],
        "artifacts": _checked_hashes(files),
        "bounds": {
            "agreements": options.bounds.agreements,
            "faults": options.bounds.faults,
            "max_depth": options.bounds.max_depth,
            "max_states": options.bounds.max_states,
        },
        "exploration": {
            "states": len(result.states),
            "transitions": result.edges,
            "depth_reached": result.depth_reached,
            "exhausted": result.exhausted,
            "bound_hit": result.bound_hit,
            "initial_states": sum(1 for d in result.depths if d == 0),
            "unknown_queries": result.unknown_queries,
            "symbolic_params": list(result.symbolic),
        },
        "verdict": verdict,
        "complete": complete,
        "allow_incomplete": options.allow_incomplete,
        "invariants": invariants,
        **({"properties": properties} if properties else {}),
        **({"limits": limits} if limits else {}),
        "counterexamples": found,
        "amounts": amounts,
        "mutants": mutants,
        "coverage": coverage(model, explorer, result),
        "machine": {
            "states": [
                {"name": name, "initial": i == model.initial, "final": i in model.final}
                for i, name in enumerate(model.states)
            ],
            "transitions": [
                {"id": t["id"], "clause": t["clause"], "from": t["from"], "to": t["to"]} for t in model.transitions
            ],
        },
        "warnings": warnings,
        "does_not_prove": _limits(options, result, model),
    }


def _verdict(name: str, clause: str | None, builtin: bool, result: ExplorationResult, index_of: dict[str, int]) -> Json:
    if name in index_of:
        return {
            "name": name,
            "clause": clause,
            "builtin": builtin,
            "verdict": "violated",
            "method": "explicit-state search",
            "counterexample": index_of[name],
        }
    method = (
        "explicit-state search, state space exhausted"
        if result.exhausted
        else f"explicit-state search to depth {result.depth_reached}"
    )
    if result.symbolic and not result.unknown_queries:
        method += f", for every value of {ranges_text(result.model_ranges)}"
    elif result.symbolic:
        method += (
            f", symbolic over {ranges_text(result.model_ranges)} except behind {_unknowns(result.unknown_queries)}"
        )
    return {
        "name": name,
        "clause": clause,
        "builtin": builtin,
        "verdict": "holds-to-bound",
        "method": method,
        "counterexample": None,
    }


def ranges_text(ranges: list[tuple[str, str, str]]) -> str:
    """`price in 1.00 .. 10000.00 and fee in 20.00 .. 30.00`."""
    return " and ".join(f"{name} in {low} .. {high}" for name, low, high in ranges)


def _amount_limit(result: ExplorationResult) -> str:
    """What the search says about amounts: exact over the ranges when they were symbols."""
    if not result.symbolic:
        return "text values other than the options, compared literals and stand-ins explored"
    text = (
        f"nothing more about amounts: every value of {ranges_text(result.model_ranges)} was covered "
        "symbolically; text params take their options, compared literals and stand-ins"
    )
    if result.unknown_queries:
        text += f", except behind {_unknowns(result.unknown_queries)}"
    return text


def _unknowns(count: int) -> str:
    return f"{count} solver answer{'s' if count != 1 else ''} of unknown"


def _limits(options: VerifyOptions, result: ExplorationResult, model: Model) -> list[str]:
    bounds = options.bounds
    limits = [
        f"behaviour with more than {bounds.agreements} concurrent agreement{'s' if bounds.agreements != 1 else ''} "
        f"or more than {bounds.faults} fault{'s' if bounds.faults != 1 else ''} per run",
        _amount_limit(result),
        "that the policy matches the contract or intent it was written from",
        "the behaviour of external providers beyond the modelled faults: lost requests, lost responses, "
        "provider errors; reconciliation lookups are assumed truthful",
        "budgets of turns, model calls and active time (the calls an agreement makes and the money they carry are "
        "counted as the runtime counts them), and approval identities beyond one approver per role",
    ]
    # The limits of docs/verifier.md ("What it does not check") that this policy runs into.
    if any(t["postings"] for t in model.transitions):
        limits.append(
            "ledger delivery: postings are taken as atomic with the commit; duplicate deliveries, a crash between "
            "the commit and the outbox, and racing commands are left to the runtime's version check and the "
            "ledger's deduplication by reference"
        )
    if model.sites:
        limits.append(
            "an agreement parked while an effect is uncertain (its other commands are explored as if it were not)"
        )
    if any(s.strategy == "idempotent" for s in model.sites):
        limits.append(
            "which payload fields make up an idempotency key: deduplication is modelled per call of an effect"
        )
    if any(s.compensation for s in model.sites):
        limits.append(
            "faults while a compensating effect runs: each compensation is modelled as applied exactly once "
            "when its call happened"
        )
    if any(_reads_effect(t["guard"], model) for t in model.transitions):
        limits.append(
            "guards on `applied(EFFECT)` or `total(EFFECT)` read whether the effect really happened, "
            "which the runtime cannot know after a lost response"
        )
    if model.limits:  # new in 1.1
        from pactwright.verifier._limits_report import ASSUMPTION

        limits.append(ASSUMPTION)
    if not result.exhausted:
        limits.insert(0, f"states beyond depth {result.depth_reached} or beyond the first {len(result.states)} states")
    return limits


def _reads_effect(expr: Json | None, model: Model) -> bool:
    """Whether `expr` reads the effect protocol: `applied(EFFECT)` or `total(EFFECT)`."""
    if expr is None:
        return False
    if expr["op"] == "total" or (
        expr["op"] == "applied" and (expr.get("value") == "effect" or expr["name"] not in model.transition_index)
    ):
        return True
    return any(_reads_effect(a, model) for a in expr.get("args", []))


class TerminalProgress:
    """Progress for a human at a terminal: states, depth and rate, on one line.

    Timing lives here and on the terminal only, never in the report.
    """

    def __init__(self) -> None:
        import time

        self._clock = time.perf_counter
        self._start = self._clock()

    def __call__(self, states: int, edges: int, depth: int) -> None:
        elapsed = max(self._clock() - self._start, 1e-9)
        sys.stderr.write(
            f"\r  explored {states:,} states, {edges:,} transitions, depth {depth}, {states / elapsed:,.0f} states/s"
        )
        sys.stderr.flush()
