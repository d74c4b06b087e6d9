"""Vacuity by mutation: small changes to the model that the invariants should catch.

Each mutant is one deliberate bug (drop a guard or an approval, retarget a
transition, alter a split or an amount, weaken a strategy) explored under
the same bounds, without proofs or further mutation. A mutant that no
invariant catches is reported as `uncaught` with its clause; a policy
invariant that no mutant violates is marked `vacuous-suspect`, because an
invariant nothing can break may be checking nothing.

Early stop. What the report needs from a mutant is whether some invariant
catches it, and, for vacuity, whether each policy invariant is caught by at
least one mutant. So mutants are taken in a fixed order and an invariant is
*credited* once a mutant earlier in that order has been seen to violate it.
Mutant `i` is explored with `Bounds.stop_on` = the policy invariants not
credited by mutants `0 .. i-1` (and not already violated by the policy
itself): its search stops as soon as each of them is violated, or ends at
the bounds. This is exact for both questions: a mutant stopped early has
violated at least one invariant, so it is caught; an invariant left
uncredited was, by construction, searched for to the end of every mutant
(every stop set contains it), so no mutant violates it within the bounds,
just as with full exploration. Only `caught_by` (the invariants seen before
the stop) and `states` are smaller than a full search would give; a mutant
stopped early has `exhausted: false`. Once every invariant is credited the
stop set is empty, which asks the explorer to stop at the first violation;
if it stops before any violation beyond those of the policy itself, the
mutant is searched again in full, so its status is never guessed.

Parallel and deterministic. With `jobs > 1`, once the in-process work has
taken `PARALLEL_AFTER` seconds and the rest looks as costly (starting
processes costs more than tiny policies take), the remaining mutants run in
worker processes.
A worker cannot know the credits of mutants still running, so it searches
with a stop set computed from the mutants already combined: a superset of
the exact one, so that search runs at least as far. Results are combined in
mutant order; a result is kept only when it is provably the result the exact
stop set gives (the two sets are equal, or the exact set was never all
violated during the search, so it would not have stopped it either), and is
otherwise searched again with the exact set. The report is therefore
byte-identical to the in-process (`jobs == 1`) one, whatever the number of
jobs and whatever order the workers finish in. Workers receive the parent's
model document once and build each mutant from it by copying only the
transition or effect that changes.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import multiprocessing
import time
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from typing import Any

from pactwright.verifier.explorer import Bounds, Explorer
from pactwright.verifier.model import Json, load_model

MAX_MUTANT_STATES = 200_000
# In-process mutation time (seconds) after which the remaining mutants may go to worker
# processes (see `_worth_a_pool`).
PARALLEL_AFTER = 0.5
# Workers are never forked from this process: after proofs it runs z3's native threads, and a
# child forked while one holds a lock can hang. A fork server (a fresh process that has imported
# this module once) forks them cheaply where the platform has one; elsewhere they are spawned.
START_METHOD = "forkserver" if "forkserver" in multiprocessing.get_all_start_methods() else "spawn"


@dataclass(frozen=True)
class Mutation:
    """One deliberate bug as data: small enough to send to a worker, applied there to the parent's model."""

    id: str
    description: str
    clause: str | None
    kind: str  # drop-guard | drop-approval | retarget | split | amount | strategy
    index: int  # transition index, or effect index for `strategy`
    posting: int = -1
    target: str = ""


@dataclass(frozen=True)
class Outcome:
    """What the report keeps of one mutant's search."""

    violations: frozenset[str]
    states: int
    exhausted: bool


def mutations(doc: Json) -> list[Mutation]:
    """Every mutant of a model document, in a fixed order."""
    states = [s["name"] for s in doc["states"]]
    out: list[Mutation] = []
    for index, transition in enumerate(doc["transitions"]):
        tid, clause = transition["id"], transition["clause"]
        if transition["guard"] is not None:
            out.append(Mutation(f"drop-guard:{tid}", f"drop the guard of `{tid}`", clause, "drop-guard", index))
        if transition["approval"] is not None:
            out.append(
                Mutation(f"drop-approval:{tid}", f"drop the approval `{tid}` requires", clause, "drop-approval", index)
            )
        target = next((s for s in states if s != transition["to"] and s not in transition["from"]), None)
        if target is not None:
            out.append(
                Mutation(
                    f"retarget:{tid}:{target}",
                    f"send `{tid}` to `{target}` instead of `{transition['to']}`",
                    clause,
                    "retarget",
                    index,
                    target=target,
                )
            )
        for p_index, posting in enumerate(transition["postings"]):
            rule = posting["rule"]
            if rule["kind"] in ("allotment", "capped"):
                portions = rule["portions"]
                if len(portions) > 1 and _where(portions[0]) != _where(portions[-1]):
                    out.append(
                        Mutation(
                            f"split:{tid}:{p_index}",
                            f"swap the first and `remaining` recipients of the split in `{tid}`",
                            clause,
                            "split",
                            index,
                            posting=p_index,
                        )
                    )
            elif rule["kind"] == "single":
                out.append(
                    Mutation(
                        f"amount:{tid}:{p_index}",
                        f"move one minor unit more in `{tid}`",
                        clause,
                        "amount",
                        index,
                        posting=p_index,
                    )
                )
    for e_index, effect in enumerate(doc["effects"]):
        strategy = (effect.get("strategy") or {}).get("kind")
        if strategy in ("reconcilable", "idempotent", "once"):
            clause = next(
                (t["clause"] for t in doc["transitions"] if any(c["effect"] == effect["name"] for c in t["effects"])),
                None,
            )
            out.append(
                Mutation(
                    f"strategy:{effect['name']}",
                    f"change the strategy of `{effect['name']}` from `{strategy}` to `retry`",
                    clause,
                    "strategy",
                    e_index,
                )
            )
    return out


def apply(doc: Json, mutation: Mutation) -> Json:
    """The mutated model document; shares every part of `doc` the mutation does not change."""
    mutant = dict(doc)
    if mutation.kind == "strategy":
        effects = list(doc["effects"])
        effects[mutation.index] = {**effects[mutation.index], "strategy": {"kind": "retry"}}
        mutant["effects"] = effects
        return mutant
    transitions = list(doc["transitions"])
    transition = copy.deepcopy(transitions[mutation.index])
    transitions[mutation.index] = transition
    mutant["transitions"] = transitions
    if mutation.kind == "drop-guard":
        transition["guard"] = None
    elif mutation.kind == "drop-approval":
        transition["approval"] = None
    elif mutation.kind == "retarget":
        transition["to"] = mutation.target
    elif mutation.kind == "split":
        portions = transition["postings"][mutation.posting]["rule"]["portions"]
        first, last = portions[0], portions[-1]
        first_where, last_where = _where(first), _where(last)
        for portion, where in ((first, last_where), (last, first_where)):
            portion.pop("to", None)
            portion.pop("split", None)
            portion.update(where)
    elif mutation.kind == "amount":
        posting = transition["postings"][mutation.posting]
        posting["amount"] = {
            "op": "+",
            "type": "money",
            "args": [posting["amount"], {"op": "lit", "type": "money", "value": "1"}],
        }
    else:  # pragma: no cover - `mutations` makes only the kinds above
        raise ValueError(f"unknown mutation kind `{mutation.kind}`")
    return mutant


def explore(
    doc: Json,
    mutation: Mutation,
    bounds: Bounds,
    stop: frozenset[str] | None,
    baseline: frozenset[str],
    budget: Json | None = None,
) -> Outcome:
    """Search one mutant, stopping once every name in `stop` is violated (see the module docstring).

    An empty `stop` asks for the first violation; if the search stopped
    without one beyond `baseline` (the policy's own violations), the mutant's
    status is not known yet and it is searched again in full.
    """
    model = load_model(apply(doc, mutation), budget=budget)
    result = Explorer(model, dataclasses.replace(bounds, stop_on=stop), witnesses=False).explore()
    violations = frozenset(result.violations)
    if stop is not None and not stop and not violations - baseline and not result.exhausted:
        result = Explorer(model, dataclasses.replace(bounds, stop_on=None), witnesses=False).explore()
        violations = frozenset(result.violations)
    return Outcome(violations, len(result.states), result.exhausted)


def _triggers(stop: frozenset[str] | None, violations: frozenset[str], baseline: frozenset[str]) -> bool:
    """Whether a search that recorded `violations` would have been stopped by `stop` at some point.

    Violations only accumulate, so a stop set not satisfied at the end was
    never satisfied; the empty set is satisfied by any violation beyond the
    baseline (otherwise `explore` searches again in full).
    """
    if stop is None:
        return False
    if not stop:
        return bool(violations - baseline)
    return stop <= violations


class _Plan:
    """The fixed-order bookkeeping of credits and stop sets shared by both drivers."""

    def __init__(self, candidates: frozenset[str], baseline: frozenset[str], early_stop: bool) -> None:
        self.uncredited = candidates
        self.baseline = baseline
        self.early_stop = early_stop
        self.outcomes: list[Outcome] = []

    def stop(self) -> frozenset[str] | None:
        """The stop set for the next mutant in order, given the mutants combined so far."""
        return self.uncredited if self.early_stop else None

    def combine(self, outcome: Outcome) -> None:
        self.outcomes.append(outcome)
        self.uncredited = self.uncredited - outcome.violations

    def keeps(self, outcome: Outcome, searched_with: frozenset[str] | None) -> bool:
        """Whether a search with `searched_with` gave what a search with the exact stop set gives."""
        exact = self.stop()
        return searched_with == exact or not _triggers(exact, outcome.violations, self.baseline)


# A worker process's copy of the parent's model, bounds, baseline and mutants, set once per process.
_WORKER: dict[str, tuple[Json, Bounds, frozenset[str], list[Mutation], Json | None]] = {}


def _init_worker(doc: Json, bounds: Bounds, baseline: frozenset[str], budget: Json | None) -> None:
    _WORKER["parent"] = (doc, bounds, baseline, mutations(doc), budget)


def _work(index: int, stop: frozenset[str] | None) -> Outcome:
    doc, bounds, baseline, found, budget = _WORKER["parent"]
    return explore(doc, found[index], bounds, stop, baseline, budget)


def _parallel(doc: Json, bounds: Bounds, found: list[Mutation], plan: _Plan, jobs: int, budget: Json | None) -> None:
    """Explore `found[len(plan.outcomes):]` in worker processes; combine in order into `plan`."""
    start = len(plan.outcomes)
    context = multiprocessing.get_context(START_METHOD)
    if START_METHOD == "forkserver":
        context.set_forkserver_preload([__name__])
    pool = ProcessPoolExecutor(
        max_workers=min(jobs, len(found) - start),
        mp_context=context,
        initializer=_init_worker,
        initargs=(doc, bounds, plan.baseline, budget),
    )
    running: dict[int, tuple[Future[Outcome], frozenset[str] | None]] = {}
    following = start

    def fill() -> None:
        """Keep every worker busy with the next mutants, each with the stop set known now."""
        nonlocal following
        while following < len(found) and sum(not f.done() for f, _ in running.values()) < jobs:
            stop = plan.stop()
            running[following] = (pool.submit(_work, following, stop), stop)
            following += 1

    try:
        for head in range(start, len(found)):
            fill()
            future, searched_with = running[head]
            while not future.done():
                wait([f for f, _ in running.values() if not f.done()], return_when=FIRST_COMPLETED)
                fill()
            outcome = future.result()
            if not plan.keeps(outcome, searched_with):
                outcome = pool.submit(_work, head, plan.stop()).result()
            del running[head]
            plan.combine(outcome)
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def _worth_a_pool(elapsed: float, done: int, total: int, after: float) -> bool:
    """Whether to start worker processes for the rest: the work so far took `after` seconds and,
    at the average cost so far, the rest would too (a pool costs more than a few tiny mutants).

    Starting late also lets the first mutants credit most invariants in process, so the
    workers' stop sets are rarely stale (a stale one can make a worker search a mutant in full).
    """
    remaining = total - done
    if remaining < 2 or elapsed < after:
        return False
    return done == 0 or elapsed / done * remaining >= after


def run(
    doc: Json,
    bounds: Bounds,
    invariants: list[Json],
    jobs: int = 1,
    *,
    early_stop: bool = True,
    parallel_after: float | None = None,
    budget: Json | None = None,
) -> list[Json]:
    """Explore each mutant; returns mutant results and marks vacuous invariants in place.

    `jobs` > 1 lets the mutants run in that many worker processes; the
    result does not depend on it. `early_stop=False` searches every mutant
    in full (the reference the early stop is tested against);
    `parallel_after` overrides `PARALLEL_AFTER`. `budget` is transitions.json's
    (`load_model`), so a mutant is refused what the runtime would refuse.
    """
    found = mutations(doc)
    mutant_bounds = dataclasses.replace(bounds, max_states=min(bounds.max_states, MAX_MUTANT_STATES), stop_on=None)
    baseline = frozenset(i["name"] for i in invariants if i["verdict"] == "violated")
    candidates = frozenset(i["name"] for i in invariants if not i["builtin"] and i["name"] not in baseline)
    plan = _Plan(candidates, baseline, early_stop)
    after = PARALLEL_AFTER if parallel_after is None else parallel_after
    started = time.perf_counter()
    pool_tried = jobs <= 1
    while len(plan.outcomes) < len(found):
        if not pool_tried and _worth_a_pool(time.perf_counter() - started, len(plan.outcomes), len(found), after):
            pool_tried = True
            # If a worker dies (killed, or a caller's script that cannot be re-imported), the
            # outcomes combined so far are exact and the rest is finished in process.
            with contextlib.suppress(BrokenProcessPool):
                _parallel(doc, mutant_bounds, found, plan, jobs, budget)
            continue
        plan.combine(explore(doc, found[len(plan.outcomes)], mutant_bounds, plan.stop(), baseline, budget))
    results: list[Json] = []
    caught_any: set[str] = set()
    for mutation, outcome in zip(found, plan.outcomes, strict=True):
        caught = sorted(outcome.violations - baseline)
        caught_any.update(caught)
        entry: dict[str, Any] = {
            "id": mutation.id,
            "description": mutation.description,
            "clause": mutation.clause,
            "caught_by": caught,
            "status": "caught" if caught else "uncaught",
            "states": outcome.states,
            "exhausted": outcome.exhausted,
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


def _where(portion: Json) -> Json:
    """Where a split portion's part goes: `to` an account or (new in 1.1) on to a nested `split`."""
    return {key: portion[key] for key in ("to", "split") if key in portion}
