"""Effect call sites in the runtime-vs-verifier differential: the verifier's facts and the runtime's moves.

The verifier moves each call site through the protocol of
`pactwright.protocol`; the runtime moves `effects` rows. This module holds
both sides of that comparison:

- `facts`: what the verifier holds about every call site after a step
  (phase, `happened`, applications, compensations, the amount the call
  carries) and `applied(E)` / `total(E)` as its expressions read them;
- `moves_of`: a report counterexample's events matched back to the
  explorer's moves, so its effect facts can be read step by step;
- `EffectBench`: the runtime side, a provider simulator pair over real HTTP
  and the effect worker, with one action per verifier move (below).

- dispatch: one worker step on the call's row; the simulator acknowledges it;
- fault lost_request / lost_response / provider_error: the simulator's
  `lost_request` / `lost_response` / `error_5xx` queued, then one worker
  step, which applies `ON_UNCERTAIN` / `ON_FAILED` in that same step (for a
  read, a provider error is a refused connection);
- runtime: nothing, after a fault (the fault's worker step did it) and after
  `reconciled_not_occurred` (the worker sends such a row as it is);
- reconcile: one worker step, its lookup by key (truthful, as the
  verifier's); or, `operator=True`, a lookup answering unknown and then
  `effect_ops.reconcile` by an operator who read the provider's records;
- abandon: `effect_ops.abandon` by an operator;
- compensate: one worker step: it writes the compensation row `ID/c` and
  sends it;
- cancel: one worker step: the row is `cancelled` (the verifier's IDLE).

The worker picks the next due row itself; the verifier names the call. The
bench holds every other row under a lease for the step (as another worker
holding them would), so the worker steps exactly the call the verifier moves.

The verifier's `retry` assumes a provider that does not deduplicate (a lost
response then a retry applies twice), `idempotent` one that does: effects
with `retry` are routed to a simulator that ignores keys, all others to one
that honours them.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator, Mapping
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pactwright.money import Percent, parse_money
from pactwright.protocol import ON_FAILED, ON_UNCERTAIN, PHASE_NAMES, Phase
from pactwright.runtime import TestClock
from pactwright.runtime._command_effects import HAPPENED, tally
from pactwright.runtime.effect_http import Credentials, HttpAdapter, load_providers
from pactwright.runtime.effect_ops import abandon, reconcile
from pactwright.runtime.effect_worker import EffectStep, EffectWorker
from pactwright.runtime.parties import add_party
from pactwright.runtime.provider_sim import Simulator, start_simulator
from pactwright.runtime.store import Store
from pactwright.verifier import counterexample as cx
from pactwright.verifier.explorer import Bounds, Explorer, Move, State
from pactwright.verifier.model import Json, Model
from pactwright.verifier.symbolic import PERCENT_UNITS

if TYPE_CHECKING:
    from tests import _runtime_paths as paths  # it imports this module: for annotations only

EFFECT_MOVES = frozenset({"dispatch", "fault", "runtime", "reconcile", "abandon", "compensate", "cancel"})
SIM_FAULT = {"lost_request": "lost_request", "lost_response": "lost_response", "provider_error": "error_5xx"}
OPERATOR = "ops-differential"
HOLD = "differential-hold"
WORKER_T0 = 1790000000  # the worker's own trusted clock, after every command of a path
WORKER_TICK = 1000  # past every back-off (MAX_BACKOFF is 300 s)


@dataclass(frozen=True)
class SiteFacts:
    """One call site as the verifier holds it."""

    phase: Phase
    happened: int
    applied: int
    compensated: int
    carried: int


@dataclass(frozen=True)
class EffectFacts:
    """The verifier's move of one step, the call sites before and after it, and `applied`/`total` per effect."""

    move: Move
    before: tuple[SiteFacts, ...]
    after: tuple[SiteFacts, ...]
    applied: dict[str, int]
    totals: dict[str, int]


def _sites(explorer: Explorer, state: State) -> tuple[SiteFacts, ...]:
    _, blocks = explorer.split(state)
    block, lay = blocks[0], explorer.layout
    return tuple(
        SiteFacts(Phase(block[lay.phase + s]), int(block[lay.happened + s]), int(block[lay.applied + s]),
                  int(block[lay.compensated + s]), int(block[lay.carried + s]))
        for s in range(len(explorer.model.sites))
    )  # fmt: skip


def facts(explorer: Explorer, states: list[State], moves: list[Move]) -> list[EffectFacts]:
    """Per step of a one-agreement path: the verifier's effect facts, as its expressions read them."""
    model, lay = explorer.model, explorer.layout
    out = []
    for move, before, after in zip(moves, states[:-1], states[1:], strict=True):
        block = explorer.split(after)[1][0]
        applied: dict[str, int] = {}
        totals: dict[str, int] = {}
        for site in model.sites:  # as `_op_applied` / `_op_total` of verifier/expressions.py read them
            applied[site.effect] = applied.get(site.effect, 0) + int(block[lay.applied + site.index])
            totals[site.effect] = totals.get(site.effect, 0) + int(block[lay.totals + site.index])
            if site.compensation is not None:
                name = site.compensation
                applied[name] = applied.get(name, 0) + int(block[lay.compensated + site.index])
                extra = int(block[lay.compensated_totals + site.index]) if site.amount is not None else 0
                totals[name] = totals.get(name, 0) + extra
        out.append(EffectFacts(move, _sites(explorer, before), _sites(explorer, after), applied, totals))
    return out


# -- a report's counterexample, back to the explorer's moves -----------------------------------


def _pinned(model: Model, params: Mapping[str, str]) -> dict[str, int]:
    pinned = {}
    for param in model.params:
        if param["type"] in ("money", "percent") and "fixed" not in param and "min" in param:
            text = params[param["name"]]
            if param["type"] == "money":
                pinned[param["name"]] = parse_money(text, model.scale)
            else:
                pinned[param["name"]] = int(Percent.parse(text.removesuffix("%")).value * PERCENT_UNITS)
    return pinned


def _matches(explorer: Explorer, move: Move, after: State, event: Json) -> bool:
    command = str(event["command"])
    name = command if move.kind == "command" else command.partition(" ")[2]
    if (move.kind, move.name, move.fault) != (event["kind"], name, event.get("fault")):
        return False
    _, blocks = explorer.split(after)
    if [explorer.model.states[b[0]] for b in blocks] != event["states_after"]:
        return False
    if move.site is not None and "effect_phase" in event:
        return PHASE_NAMES[Phase(blocks[0][explorer.layout.phase + move.site])] == event["effect_phase"]
    return True


def moves_of(model: Model, params: Mapping[str, str], events: list[Json]) -> tuple[Explorer, State, list[Move]]:
    """A one-agreement counterexample's events as the concrete explorer's moves (depth first, exact match)."""
    explorer = Explorer(model, Bounds(), pinned=_pinned(model, params))
    explorer.symmetry = False

    def search(state: State, index: int) -> list[Move] | None:
        if index == len(events):
            return []
        event = events[index]
        if event["kind"] == "clock":
            options: list[tuple[Move, State]] = [(Move("clock", -1, "clock", "time passes"), explorer.all_later(state))]
        elif event["kind"] == "refused":
            options = [(m, state) for _, m, _ in explorer.refusals(state)
                       if m.name == str(event["command"]).removeprefix("refused ")]  # fmt: skip
        else:
            options = [(m, s) for m, s, _ in explorer.successors(state) if _matches(explorer, m, s, event)]
        for move, succ in options:
            rest = search(succ, index + 1)
            if rest is not None:
                return [move, *rest]
        return None

    try:
        for start in explorer.initial_states():
            if cx.describe(explorer, start, [], [], [])["params"][0] != dict(params):
                continue
            found = search(start, 0)
            if found is not None:
                return explorer, start, found
    finally:
        explorer.symmetry = True
    raise AssertionError(f"the counterexample's events match no path of the explorer: {events}")


def label(explorer: Explorer, state: State, move: Move) -> str | None:
    """What an effect move exercises, naming the call site: the covering set takes one path per label."""
    if move.kind not in EFFECT_MOVES or move.site is None:
        return None
    site = explorer.model.sites[move.site]
    block = explorer.split(state)[1][0]
    phase = PHASE_NAMES[Phase(block[explorer.layout.phase + move.site])]
    happened = "happened" if block[explorer.layout.happened + move.site] else "not happened"
    what = f"{move.kind} {move.fault}" if move.fault else move.kind
    transition = explorer.model.transitions[site.transition]["id"]
    return f"`{what}` on `{site.effect}` of `{transition}` ({phase}, {happened})"


# -- the runtime side -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Taken:
    """What the runtime did for one verifier move."""

    steps: tuple[EffectStep, ...] = ()
    note: str = ""


class EffectBench:
    """The runtime's effect environment for one policy's store: simulators, routes, the worker's clock."""

    def __init__(self, store: Store, table: Json, directory: Path, stack: ExitStack) -> None:
        self.store = store
        self.effects = {str(e["name"]): e for e in table.get("effects", [])}
        self.keyed = stack.enter_context(start_simulator())
        self.loose = stack.enter_context(start_simulator(ignore_keys=True))  # for `retry`: no deduplication
        self.sim_of: dict[str, Simulator] = {}
        routes: dict[str, Simulator] = {}
        for name, effect in self.effects.items():
            sim = self.loose if (effect.get("strategy") or {}).get("kind") == "retry" else self.keyed
            self.sim_of[name] = sim
            for egress in effect["egress"]:
                assert routes.setdefault(str(egress["url"]), sim) is sim, f"`{egress['url']}` serves both providers"
        self.routes = routes
        self.directory = directory
        self.adapter = self._adapter(frozenset())
        self.clock = TestClock(WORKER_T0)
        add_party(store, OPERATOR, "operator", None, WORKER_T0)

    def _adapter(self, down: frozenset[str]) -> HttpAdapter:
        lines = []
        for number, (url, sim) in enumerate(sorted(self.routes.items(), key=lambda r: r[0])):
            endpoint = _closed_port() if url in down else sim.url
            lines += [f'[destination."{url}"]', f'endpoint = "{endpoint}/route{number}"', ""]
        path = self.directory / f"providers-{len(down)}.toml"
        path.write_text("\n".join(lines))
        return HttpAdapter(load_providers(path), Credentials())

    def reset(self) -> None:
        self.keyed.reset()
        self.loose.reset()

    def reads(self, name: str) -> bool:
        return all(str(e["method"]) == "GET" for e in self.effects[name]["egress"])

    # -- reading the store and the providers ------------------------------------------------------

    def row(self, aid: str, transition: str, index: int) -> tuple[str, str] | None:
        """(id, phase) of the latest call `index` of `transition` in the agreement, None before its first."""
        with self.store.transaction(write=False) as db:
            found = db.query(
                "SELECT e.id, e.phase FROM effects e JOIN events v ON v.agreement_id = e.agreement_id "
                "AND v.seq = e.event_seq WHERE e.agreement_id = ? AND v.transition = ? AND e.call_index = ? "
                "AND e.compensates IS NULL ORDER BY e.event_seq DESC LIMIT 1",
                (aid, transition, index),
            )
        return (str(found[0][0]), str(found[0][1])) if found else None

    def tally(self, aid: str) -> tuple[dict[str, int], dict[str, int]]:
        """`applied(E)` and `total(E)` as the runtime's evaluator reads them."""
        with self.store.transaction(write=False) as db:
            seen = tally(db, aid)
        return dict(seen.applied), dict(seen.totals)

    def provider(self, aid: str) -> dict[str, int]:
        """Per effect, the writes the providers really performed for this agreement (reads for `GET` effects)."""
        with self.store.transaction(write=False) as db:
            keys = {str(k): str(e) for k, e in db.query(
                "SELECT idempotency_key, effect FROM effects WHERE agreement_id = ?", (aid,))}  # fmt: skip
        out: dict[str, int] = {}
        for sim in (self.keyed, self.loose):
            state = sim.state()
            for record in state["records"]:
                name = keys.get(str(record["idempotency_key"]))
                if name is not None:
                    out[name] = out.get(name, 0) + 1
            readers = sorted({n for n in keys.values() if self.reads(n) and self.sim_of[n] is sim})
            if state["reads"]:
                assert len(readers) == 1, f"reads cannot be told apart: {readers}"
                out[readers[0]] = out.get(readers[0], 0) + int(state["reads"])
        return out

    # -- the runtime's action for one verifier move ------------------------------------------------

    def act(self, aid: str, move: Move, site: Any, transition: str, index: int, before: SiteFacts,
            operator: bool) -> Taken:  # fmt: skip
        found = self.row(aid, transition, index)
        assert found is not None, f"no effects row for `{site.effect}` of `{transition}`"
        row_id = found[0]
        if move.kind == "runtime":
            return Taken(note="applied by the worker in the step that recorded the outcome")
        if move.kind == "abandon":
            abandon(self.store, aid, row_id, "the outcome cannot be told", OPERATOR, clock=self._tick())
            return Taken(note="abandoned by an operator")
        if move.kind == "reconcile" and operator:
            self.sim_of[site.effect].queue("lookup_unknown")
            looked = self._step(row_id)
            records = [
                r for r in self.sim_of[site.effect].state()["records"] if r["idempotency_key"] == self._key(row_id)
            ]
            if records:
                reconcile(self.store, aid, row_id, "recovered_acknowledgement", OPERATOR,
                          provider_ref=str(records[0]["id"]), clock=self._tick())  # fmt: skip
            else:
                reconcile(self.store, aid, row_id, "not_occurred", OPERATOR, clock=self._tick())
            return Taken((looked,), "an unknown lookup, then an operator's reconciliation")
        adapter = self.adapter
        if move.kind == "fault":
            if self.reads(site.effect):
                assert move.fault == "provider_error", "only a refused connection fails a read"
                adapter = self._adapter(frozenset(str(e["url"]) for e in self.effects[site.effect]["egress"]))
            else:
                self.sim_of[site.effect].queue(SIM_FAULT[str(move.fault)])
        taken = self._step(row_id, adapter)
        pending = self.keyed.state()["pending_faults"] + self.loose.state()["pending_faults"]
        assert not pending, f"faults left unspent: {pending}"
        return Taken((taken,))

    def _key(self, row_id: str) -> str:
        with self.store.transaction(write=False) as db:
            return str(db.query("SELECT idempotency_key FROM effects WHERE id = ?", (row_id,))[0][0])

    def _tick(self) -> TestClock:
        self.clock.advance(WORKER_TICK)
        return self.clock

    def _step(self, row_id: str, adapter: HttpAdapter | None = None) -> EffectStep:
        """One worker step on `row_id`: every other row is held under a lease meanwhile."""
        now = self._tick().seconds
        with self.store.transaction() as db:
            db.execute("UPDATE effects SET lease_owner = ?, lease_until = ? WHERE id <> ? AND lease_until IS NULL",
                       (HOLD, now + 10**9, row_id))  # fmt: skip
        try:
            taken = EffectWorker(self.store, adapter or self.adapter, self.clock, owner="differential").step()
        finally:
            with self.store.transaction() as db:
                db.execute("UPDATE effects SET lease_owner = NULL, lease_until = NULL WHERE lease_owner = ?", (HOLD,))
        assert taken is not None, f"the worker found `{row_id}` not due"
        assert taken.instance in (row_id, f"{row_id}/c"), f"the worker stepped `{taken.instance}`, not `{row_id}`"
        return taken


def expected_phase(after: SiteFacts, strategy: str, cancelled: bool, resend: bool) -> str:
    """The runtime phase that matches the verifier's, where the runtime takes two verifier moves in one step.

    The worker records an outcome and applies the strategy table in one step,
    so a verifier `uncertain` (or a `failed` the strategy repeats) is already
    the table's phase in the runtime; a call the verifier cancelled is
    `cancelled`; a `reconciled_not_occurred` call is sent again as it is, so
    the verifier's `prepared` after it is still `reconciled_not_occurred`.
    """
    phase = after.phase
    if phase == Phase.IDLE:
        return "cancelled" if cancelled else "idle"
    if phase == Phase.UNCERTAIN:
        return PHASE_NAMES[ON_UNCERTAIN[strategy]]
    if phase == Phase.FAILED and ON_FAILED[strategy] is not None:
        return PHASE_NAMES[ON_FAILED[strategy]]
    if phase == Phase.PREPARED and resend:
        return "reconciled_not_occurred"
    return PHASE_NAMES[phase]


def effect_names(expr: Any) -> Iterator[str]:
    """The effects an expression reads through `applied(E)` or `total(E)`."""
    if isinstance(expr, Mapping):
        if expr.get("op") == "total" or (expr.get("op") == "applied" and expr.get("value") == "effect"):
            yield str(expr["name"])
        for value in expr.values():
            yield from effect_names(value)
    elif isinstance(expr, list):
        for value in expr:
            yield from effect_names(value)


def _closed_port() -> str:
    with socket.socket() as probe:  # free a moment ago, bound by nobody now: the connection is refused
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return f"http://127.0.0.1:{port}"


LOST_WRITE = ("a write whose answer was lost happened at the provider, but the runtime counts only the calls it "
              "knows took effect (it cannot observe `happened`): its applied()/total() stay below the verifier's "
              "until the call is acknowledged or recovered, and for good after `once`, an abandon, or a `retry`'s "
              "second write")  # fmt: skip
UNCERTAIN_COMPENSATION = ("the runtime compensates under uncertainty: after a lost request it counts the call as "
                          "happened (compensation_required) and sends its compensation, although the call never "
                          "happened; the verifier compensates only what happened")  # fmt: skip


class Sites:
    """Per call site of one path: what the runtime's side of the comparison needs to remember."""

    def __init__(self, model: Any) -> None:
        self.model = model
        count = len(model.sites)
        self.cancelled, self.resend = [False] * count, [False] * count
        self.faults: list[set[str]] = [set() for _ in range(count)]  # every fault on the site's calls so far
        self.phases = ["idle"] * count  # the runtime phase expected of the site's current call
        self.retired, self.retired_totals = [0] * count, [0] * count  # earlier calls the runtime counts
        self.compensations, self.compensated_totals = [0] * count, [0] * count

    def committed(self, transition: str, step: paths.Step) -> None:
        """The transition committed again: its sites start new calls; the runtime still counts the old ones."""
        assert step.effects is not None
        for site in self.model.sites:
            if self.model.transitions[site.transition]["id"] != transition:
                continue
            s = site.index
            if self.phases[s] in HAPPENED:
                self.retired[s] += 1
                self.retired_totals[s] += step.effects.before[s].carried
            self.cancelled[s] = self.resend[s] = False

    def moved(self, facts: EffectFacts) -> None:
        move, s = facts.move, facts.move.site
        assert s is not None
        if move.kind == "cancel":
            self.cancelled[s] = True
        elif move.kind == "runtime" and facts.before[s].phase == Phase.RECONCILED_NOT_OCCURRED:
            self.resend[s] = True
        elif move.kind in ("dispatch", "fault"):
            self.resend[s] = False
            if move.fault is not None:
                self.faults[s].add(move.fault)
        elif move.kind == "compensate":
            self.compensations[s] += 1
            self.compensated_totals[s] += facts.before[s].carried

    def phase(self, s: int, after: SiteFacts) -> str:
        self.phases[s] = expected_phase(after, self.model.sites[s].strategy, self.cancelled[s], self.resend[s])
        return self.phases[s]

    def known(self, facts: EffectFacts) -> tuple[dict[str, int], dict[str, int]]:
        """`applied(E)`, `total(E)` over the calls the runtime knows took effect (docs/effects.md), by phase."""
        applied: dict[str, int] = {}
        totals: dict[str, int] = {}
        for site in self.model.sites:
            s, now = site.index, int(self.phases[site.index] in HAPPENED)
            applied[site.effect] = applied.get(site.effect, 0) + self.retired[s] + now
            totals[site.effect] = totals.get(site.effect, 0) + self.retired_totals[s] + now * facts.after[s].carried
            if site.compensation is not None and self.compensations[s]:
                name = site.compensation
                applied[name] = applied.get(name, 0) + self.compensations[s]
                totals[name] = totals.get(name, 0) + self.compensated_totals[s]
        return applied, totals

    def why(self, effect: str) -> set[str]:
        """The documented reasons the verifier's and the runtime's counts of `effect` may differ on this path."""
        out = set()
        for site in self.model.sites:
            if site.effect == effect and "lost_response" in self.faults[site.index]:
                out.add(LOST_WRITE)
            if (effect in (site.effect, site.compensation) and site.strategy == "compensate"
                    and "lost_request" in self.faults[site.index]):  # fmt: skip
                out.add(UNCERTAIN_COMPENSATION)
        return out
