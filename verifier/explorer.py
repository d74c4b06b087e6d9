"""Explicit-state breadth-first exploration of a policy composed with the runtime.

States are flat tuples of ints interned in a dict to ids, with parent
pointers, so the first violation found of each invariant is a shortest one.
A state is a global prefix (faults used) followed by one block per
agreement, sorted so that interchangeable agreements are explored once
(symmetry reduction). Moves are the environment's: any role issuing any
enabled command, approvals, time passing (each agreement keeps the zone of
stamp ages its path allows, see `zones.py`), the outbox worker dispatching
effects, faults within the budget, and the runtime's strategy after an
uncertain outcome, with reconciliation outcomes chosen by the environment.
"""

from __future__ import annotations

from bisect import bisect_left
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from pactwright import movement
from pactwright.bundle_models import Approval
from pactwright.errors import VerifyError
from pactwright.expr_text import render_expr
from pactwright.money import Percent, format_money
from pactwright.verifier._choices import Choices, initial_count
from pactwright.verifier.expressions import ExpressionCompiler, View
from pactwright.verifier.model import Json, Model
from pactwright.verifier.protocol import FAULTS, ON_FAILED, ON_UNCERTAIN, TERMINAL, Phase
from pactwright.verifier.symbolic import PERCENT_UNITS, Formula, Lin, Space, is_sym, related_pairs
from pactwright.verifier.zones import Dim, Zone, Zones

State = tuple[Any, ...]  # ints, and linear forms where amounts depend on ranged params
Condition = tuple[int, Any]  # (path condition id, formula): where a violation happens
NOWHERE_NEEDED: Condition = (-1, True)  # a concrete run's violation: no witness to compute
STUCK_EXTRA_BLOCKS = 4096  # blocks past the depth bound the stuck check may expand, per exploration
BUILTIN_NAMES = (
    "money_conserved",
    "no_negative_internal",
    "effect_max_calls",
    "effect_applied_once",
    "funds_available",
    "funds_not_stuck",
)


@dataclass(frozen=True)
class Move:
    """One event of a path: who did what to which agreement, with which fault."""

    kind: str  # command | approve | clock | dispatch | fault | runtime | reconcile | abandon | compensate | refused
    agreement: int
    actor: str
    name: str  # transition id, effect name, "time passes", or a concrete clock delta ("+14d")
    fault: str | None = None
    site: int | None = None
    delta: int | None = None
    # For a command whose guard reads time: which cell of the agreement's zone it fired from.
    cell: tuple[int, ...] | None = None


@dataclass
class Bounds:
    agreements: int = 1
    faults: int = 1
    max_depth: int = 64
    max_states: int = 2_000_000
    # Stop as soon as every invariant named here has a violation (a mutant is
    # caught, a witness is confirmed); an empty set stops at the first violation;
    # None explores everything.
    stop_on: frozenset[str] | None = None


@dataclass(frozen=True)
class Refusal:
    """An enabled command the runtime refuses at commit: a `funds_available` violation."""

    transition: str
    message: str
    condition: Any = None  # (path condition id, formula) where it is refused; None in a concrete run


def _approval_tokens(model: Model) -> list[tuple[int, str]]:
    """(transition, approver role) per approval token: the first of each approval transition, in
    `approval_transitions` order, then the further ones of four-eyes transitions (new in 1.1)."""
    tokens: list[tuple[int, str]] = []
    extra: list[tuple[int, str]] = []
    for t in model.approval_transitions:
        roles = Approval.model_validate(model.transitions[t]["approval"]).slots()
        tokens.append((t, roles[0]))
        extra.extend((t, role) for role in roles[1:])
    return tokens + extra


@dataclass
class Layout:
    """Offsets of the fields of one agreement block."""

    stamps: int
    transitions: int
    sites: int
    approvals: int
    accounts: int
    zone_size: int = 0
    # Budgets the runtime enforces at commit: per effect (`Explorer.counted`), the calls made so far
    # (compensations and cancelled calls aside, as runtime/_command_effects.py `tally` counts them);
    # and, with a budget `ceiling`, one slot for the money all those calls carried.
    counters: int = 0
    carry: int = 0
    # One slot when the policy calls effects: a bit per effect (`Explorer.abandon_bit`) set once a call of
    # it was abandoned. An abandon is never undone in the runtime (PW526 for good), even after a later
    # call at the same call site replaces it in `phase`.
    abandons: int = 0

    # block[0] control state, block[1] choice of text samples, block[2] path condition id

    @property
    def zone(self) -> int:
        return 3

    @property
    def fired(self) -> int:
        return 3 + self.zone_size

    @property
    def phase(self) -> int:
        return self.fired + self.transitions

    @property
    def happened(self) -> int:
        return self.phase + self.sites

    @property
    def applied(self) -> int:
        return self.happened + self.sites

    @property
    def compensated(self) -> int:
        return self.applied + self.sites

    @property
    def carried(self) -> int:
        """Per call site: the amount its current call carries (fixed when the transition commits)."""
        return self.compensated + self.sites

    @property
    def totals(self) -> int:
        """Per call site: the sum of the amounts its applications carried."""
        return self.carried + self.sites

    @property
    def compensated_totals(self) -> int:
        """Per call site: the sum of the amounts its compensations carried."""
        return self.totals + self.sites

    @property
    def tokens(self) -> int:
        return self.compensated_totals + self.sites

    @property
    def balances(self) -> int:
        return self.tokens + self.approvals

    @property
    def reached(self) -> int:
        return self.balances + self.accounts

    @property
    def made(self) -> int:
        return self.reached + 1

    @property
    def carried_all(self) -> int:
        return self.made + self.counters

    @property
    def abandoned(self) -> int:
        return self.carried_all + self.carry

    @property
    def width(self) -> int:
        return self.abandoned + self.abandons


@dataclass
class Violation:
    invariant: str
    state_id: int
    message: str
    edge: bool = False
    # Symbolic exploration: ranged param values (minor units, percent millionths) where it happens.
    witness: dict[str, int] | None = None
    refused: str | None = None  # funds_available: the transition the runtime refuses


@dataclass
class ExplorationResult:
    states: list[tuple[int, ...]]  # compact: (faults used, sorted agreement block ids)
    parents: list[int]
    depths: list[int]
    violations: dict[str, Violation]
    transitions_fired: set[str]
    phases_seen: dict[int, set[int]]
    states_reached: set[int]
    edges: int
    depth_reached: int
    exhausted: bool  # True when the whole reachable space (within faults/agreements) was explored
    bound_hit: str | None
    warnings: list[str] = field(default_factory=list)
    unknown_queries: int = 0  # solver answers of `unknown`: the search may have missed what they hide
    symbolic: tuple[str, ...] = ()  # params explored as symbols: results hold for every value in range
    model_ranges: list[tuple[str, str, str]] = field(default_factory=list)  # (param, low, high) as a reader writes


class Explorer:
    """Builds and explores the composed state space of one model."""

    def __init__(
        self,
        model: Model,
        bounds: Bounds,
        pinned: dict[str, int] | None = None,
        space: Space | None = None,
        witnesses: bool = True,
    ) -> None:
        """`pinned` fixes ranged params at concrete values (minor units; percents in
        millionths) for a concrete run; otherwise ranged money and percent params are symbols.
        Explorations of models with the same params (mutants) may share one `space`, and so
        its symbols and every solver answer. Without `witnesses` a violation carries no param
        values: a mutant's search asks only which invariants break, and minimising a witness
        costs a solver query per param."""
        self.model = model
        self.bounds = bounds
        self.witnesses = witnesses
        self.space = space or Space()
        self.param_values, self.symbolic_params = self._param_values(pinned)
        self.symbolic = bool(self.symbolic_params)
        self.zones = Zones(len(model.stamps), model.clock_maxima)
        # Budgets (runtime/_command_effects.py `check_budgets`): each effect's `max_calls` (PW523) and the
        # budget's `max_tool_calls` (PW524) count calls made, its `ceiling` (PW525) the money they carried.
        budget = model.budget or {}
        tool_calls, ceiling = budget.get("max_tool_calls"), budget.get("ceiling")
        self.max_tool_calls: int | None = None if tool_calls is None else int(tool_calls)
        self.budget_ceiling: int | None = None if ceiling is None else int(ceiling)
        called = sorted({x.effect for x in model.sites})  # the effects the policy calls, in one order
        counting = self.max_tool_calls is not None or any(x.max_calls is not None for x in model.sites)
        self.counted = called if counting else []
        self.counter_of = {effect: k for k, effect in enumerate(self.counted)}
        # Set by the liveness report to learn why an enabled command made no move (`blocked`).
        self.recording: dict[tuple[State, int], str] | None = None
        self.layout = Layout(
            stamps=len(model.stamps),
            transitions=len(model.transitions),
            sites=len(model.sites),
            approvals=len(_approval_tokens(model)),
            accounts=len(model.accounts),
            zone_size=self.zones.size,
            counters=len(self.counted),
            carry=1 if self.budget_ceiling is not None and model.sites else 0,
            abandons=1 if model.sites else 0,
        )
        self.abandon_bit = {effect: 1 << k for k, effect in enumerate(called)}
        compiler = ExpressionCompiler(model, self.space if self.symbolic else None)
        self.compiler = compiler
        self.guards = [compiler.function(t["guard"]) for t in model.transitions]
        self.sources = [frozenset(model.states.index(s) for s in t["from"]) for t in model.transitions]
        self.targets = [model.states.index(t["to"]) for t in model.transitions]
        self.stamp_sets = [[model.stamp_index[s] for s in t["stamps"]] for t in model.transitions]
        self.sites_of = [[s.index for s in model.sites if s.transition == i] for i in range(len(model.transitions))]
        self.site_amount = [compiler.function(s.amount) if s.amount else None for s in model.sites]
        self.invariants = [(inv["name"], compiler.function(inv["expr"])) for inv in model.invariants]
        self.invariant_exprs = {inv["name"]: inv["expr"] for inv in model.invariants}
        self.leaf_fns: dict[str, list[tuple[str, Callable[[View], Any], str]]] = {}
        for inv in model.invariants:
            leaves: dict[str, tuple[str, Callable[[View], Any], str]] = {}
            for leaf in _leaves(inv["expr"]):
                text = render_expr(leaf)
                leaves.setdefault(text, (text, compiler.function(leaf), leaf["type"]))
            self.leaf_fns[inv["name"]] = [leaves[k] for k in sorted(leaves)]
        self.external = [bool(a["external"]) for a in model.accounts]
        self.final = [i in model.final for i in range(len(model.states))]
        self.guard_dims = model.guard_dims
        self.invariant_dims = [model.invariant_dims[name] for name, _ in self.invariants]
        self.postings = [self._compile_postings(t) for t in model.transitions]
        self.approval_slot = {t: k for k, t in enumerate(model.approval_transitions)}
        # Four eyes (new in 1.1): each required approval is its own token and move. A transition's
        # first token has its `approval_slot` index (what `approved(T)` reads), its others follow.
        self.token_role: list[str] = [role for _, role in _approval_tokens(model)]
        self.approval_tokens: dict[int, list[int]] = {}
        for k, (t, _) in enumerate(_approval_tokens(model)):
            self.approval_tokens.setdefault(t, []).append(k)
        self.first_role = [self._actor(t) for t in model.transitions]
        self.approver = {t: model.transitions[t]["approval"]["role"] for t in model.approval_transitions}
        self.compensation_of = {s.index: s.compensation for s in model.sites if s.compensation}
        self.once_sites = [s.index for s in model.sites if _applied_once(model, s)]
        # Per transition: the effects a command of it depends on, and those whose abandon its guard handles,
        # as the runtime reads them (runtime/_command_effects.py: `referenced`, `handles_abandon`).
        self.depends_on = [_depends_on(t) for t in model.transitions]
        self.effect_sites: dict[str, list[int]] = {}
        for site in model.sites:
            self.effect_sites.setdefault(site.effect, []).append(site.index)
        # Transitions the scheduler fires when their guard holds: those a clock role may invoke.
        self.scheduled = frozenset(
            t["id"] for t in model.transitions if any(model.roles.get(r, {}).get("clock") for r in t["roles"])
        )
        # Limits across agreements (new in 1.1): (name, max minor units, the call sites of its effect).
        self.limits = [
            (f"limit:{lim['name']}", int(lim["max"]), [x.index for x in model.sites if x.effect == lim["effect"]])
            for lim in model.limits
        ]
        self.warnings: list[str] = []
        # Off while a counterexample is re-simulated, so agreement numbers stay put.
        self.symmetry = True

    # -- setup -----------------------------------------------------------------

    def _param_values(self, pinned: dict[str, int] | None) -> tuple[Choices, tuple[str, ...]]:
        """Per choice of text samples, the params as expressions see them; and the symbolic ones."""
        lists: list[tuple[Any, ...]] = []
        symbolic: list[str] = []
        for param, samples in zip(self.model.params, self.model.param_samples, strict=True):
            name, kind = param["name"], param["type"]
            ranged = kind in ("money", "percent") and "fixed" not in param and "min" in param
            if ranged and pinned is not None and name in pinned:
                raw = pinned[name]
                lists.append((raw if kind == "money" else Fraction(raw, PERCENT_UNITS),))
            elif ranged and pinned is None:
                if kind == "money":
                    low, high = int(param["min"]), int(param["max"])
                else:
                    low = int(Percent.parse(param["min"]).value * PERCENT_UNITS)
                    high = int(Percent.parse(param["max"]).value * PERCENT_UNITS)
                lists.append((self.space.param(name, kind, low, high),))
                symbolic.append(name)
            else:
                lists.append(tuple(dict.fromkeys(samples)))
        if pinned is None:
            self._relate_params(lists)
        return Choices(lists), tuple(symbolic)

    def _relate_params(self, lists: list[tuple[Any, ...]]) -> None:
        """New in 1.1: a money bound written as another param's name (`partial <= price`) joins the
        symbols' ranges in every solver query (symbolic.Space.relate); PW309 when nothing satisfies them."""
        params = zip(self.model.params, lists, strict=True)
        values = {p["name"]: options[0] for p, options in params if len(options) == 1}
        pairs = [pair for param in self.model.params for pair in related_pairs(param)]
        for small, big in pairs:
            self.space.relate(values[small], values[big])
        if pairs and self.space.satisfiable(0, True)[0] is False:
            shown = ", ".join(f"{small} <= {big}" for small, big in pairs)
            raise VerifyError(f"the params' related bounds ({shown}) admit no values", code="PW309")

    def _actor(self, transition: Json) -> str:
        roles: list[str] = transition["roles"]
        clocks = [r for r in roles if self.model.roles.get(r, {}).get("clock")]
        if transition["guard"] is not None and clocks and _mentions_now(transition["guard"]):
            return clocks[0]
        humans = [r for r in roles if r not in clocks]
        return (humans or roles)[0]

    def _compile_postings(self, transition: Json) -> list[tuple[Callable[[View], Any], int, Any]]:
        compiled = []
        for posting in transition["postings"]:
            amount = self.compiler.function(posting["amount"])
            source = self.model.account_index[posting["source"]]
            compiled.append((amount, source, posting["rule"]))
        return compiled

    def initial_count(self) -> int:
        """How many initial states there are: combinations of param samples across agreements."""
        return initial_count(self.param_values.size, self.bounds.agreements)

    def initial_states(self, limit: int | None = None) -> list[State]:
        """One state per combination of param samples across agreements (symmetric ones once),
        in sorted order; only the first `limit` of them when given, so a policy whose text params
        have millions of combinations costs no more than `limit` states (see `_choices.py`).

        Blocks differ only in their choice index, so agreements taken with non-decreasing
        indices list each multiset once, already sorted, and the first `limit` can be listed
        without the rest.
        """
        out: list[State] = []
        cap = self.initial_count() if limit is None else min(limit, self.initial_count())
        if cap <= 0:
            return out
        for indices in _nondecreasing(self.param_values.size, self.bounds.agreements):
            out.append(self.canonical((0,), [self._initial_block(choice) for choice in indices]))
            if len(out) >= cap:
                break
        return out

    def start_limit(self) -> int:
        """How many initial states a search starts from at most: all of them up to `max_states`,
        and only half of the bound past it (the rest is left for their successors)."""
        bound = self.bounds.max_states
        return bound if self.initial_count() <= bound else max(1, bound // 2)

    def _too_many_starts(self, starts: int, limit: int) -> str:
        """Why the search did not even start from every initial state: the text params' combinations."""
        texts = [
            f"{p['name']} ({len(options)})"
            for p, options in zip(self.model.params, self.param_values.lists, strict=True)
            if len(options) > 1
        ]
        agreements = self.bounds.agreements
        across = f" across {agreements} agreements" if agreements > 1 else ""
        return (
            f"the text params take {self.param_values.size:,} combinations of values ({', '.join(texts)}), "
            f"{starts:,} initial states{across}, more than the `max_states` bound ({self.bounds.max_states:,}); "
            f"the search started from the first {limit:,} only, so nothing is claimed for the others: "
            "raise it with `--max-states N`, or give the text params fewer options that guards tell apart"
        )

    def _initial_block(self, choice: int) -> State:
        lay = self.layout
        block = [0] * lay.width
        block[0] = self.model.initial
        block[1] = choice
        block[2] = 0  # the empty path condition
        block[lay.zone : lay.zone + lay.zone_size] = self.zones.initial()
        block[lay.reached] = 1 << self.model.initial
        return tuple(block)

    def canonical(self, head: tuple[int, ...], blocks: list[State]) -> State:
        """Flatten; with symmetry reduction on, interchangeable agreements are sorted."""
        flat: list[int] = list(head)
        for block in sorted(blocks) if self.symmetry else blocks:
            flat.extend(block)
        return tuple(flat)

    def sorted_form(self, state: State) -> State:
        head, blocks = self.split(state)
        flat: list[int] = list(head)
        for block in sorted(blocks):
            flat.extend(block)
        return tuple(flat)

    def split(self, state: State) -> tuple[tuple[int, ...], list[State]]:
        width = self.layout.width
        head = state[:1]
        body = state[1:]
        return head, [body[i : i + width] for i in range(0, len(body), width)]

    # -- views -------------------------------------------------------------------

    def zone(self, block: State) -> Zone:
        lay = self.layout
        return block[lay.zone : lay.zone + lay.zone_size]

    def ages(self, zone: Zone) -> tuple[int, ...]:
        """A point of `zone` (the lower bounds); -1 for a stamp never set."""
        return self.zones.point(zone) if zone else ()

    def view(self, block: State, zone: Zone | None = None) -> View:
        """The agreement as expressions see it, at a point of `zone` (default: its whole zone).

        Guards and invariants that read time are evaluated once per cell of
        the zone, at that cell's point: every comparison they make has the
        same truth value anywhere in the cell.
        """
        lay = self.layout
        ages = self.ages(self.zone(block) if zone is None else zone)
        return View(
            ctrl=block[0],
            p=self.param_values[block[1]],
            stamps=tuple(None if a < 0 else -a for a in ages),
            fired=block[lay.fired : lay.fired + lay.transitions],
            bal=block[lay.balances : lay.balances + lay.accounts],
            sapp=block[lay.applied : lay.applied + lay.sites],
            comp=block[lay.compensated : lay.compensated + lay.sites],
            stot=block[lay.totals : lay.totals + lay.sites],
            ctot=block[lay.compensated_totals : lay.compensated_totals + lay.sites],
            phase=block[lay.phase : lay.phase + lay.sites],
            reached=block[lay.reached],
            approved=tuple(block[lay.tokens + i] >> 1 for i in range(lay.approvals)),
            final=self.final[block[0]],
        )

    def effect_applications(self, block: State, effect: str) -> int:
        lay = self.layout
        total = sum(block[lay.applied + s.index] for s in self.model.sites if s.effect == effect)
        total += sum(block[lay.compensated + s.index] for s in self.model.sites if s.compensation == effect)
        return total

    # -- moves -------------------------------------------------------------------

    def successors(self, state: State) -> Iterator[tuple[Move, State, Any]]:
        """(move, successor, edge violation or None) for every enabled move.

        The slow, general path over flat states; `explore` uses the same
        per-agreement moves through caches keyed by interned blocks.
        """
        head, blocks = self.split(state)
        faults = head[0]
        for index, block in enumerate(blocks):
            for move, new_block, cost, edge in self.local_moves(block):
                if faults + cost > self.bounds.faults or new_block is None:
                    continue
                new_blocks = list(blocks)
                new_blocks[index] = new_block
                placed = Move(move.kind, index, move.actor, move.name, move.fault, move.site, move.delta, move.cell)
                yield placed, self.canonical((faults + cost,), new_blocks), edge

    def refusals(self, state: State) -> list[tuple[int, Move, Refusal]]:
        """(agreement, move, refusal) for every enabled command the runtime would refuse in `state`."""
        _, blocks = self.split(state)
        out = []
        for index, block in enumerate(blocks):
            for move, new_block, _, edge in self.local_moves(block):
                if new_block is None and isinstance(edge, Refusal):
                    out.append((index, Move(move.kind, index, move.actor, move.name, cell=move.cell), edge))
        return out

    def local_moves(self, block: State) -> list[tuple[Move, State | None, int, Any]]:
        """Every move of one agreement: (move, new block, faults it costs, edge violation).

        A command the runtime would refuse appears with new block None and a
        `Refusal` as its edge: it is a finding, not a successor.
        """
        out: list[tuple[Move, State | None, int, Any]] = []
        out.extend(self._commands(block))
        out.extend(self._approvals(block))
        out.extend(self._effects(block))
        out.extend(self._clock(block))
        return out

    def fair_action(self, move: Move) -> str | None:
        """The fair action a move belongs to, or None for a move nobody is obliged to take.

        The fairness of liveness properties (docs/verifier.md): time passes, the
        scheduler fires a transition a clock role may invoke, the worker attempts a
        prepared call (delivered or faulted), runs a compensation, and the runtime
        applies its strategy or cancels a call; humans (commands, approvals, an
        operator's reconcile or abandon) are not assumed to act.
        """
        kind = move.kind
        if kind == "clock":
            return "clock"
        if kind in ("dispatch", "fault"):
            return f"worker:{move.site}"
        if kind == "compensate":
            return f"compensate:{move.site}"
        if kind in ("runtime", "cancel"):
            return f"runtime:{move.site}"
        if kind == "command" and move.name in self.scheduled:
            return f"scheduler:{move.name}"
        return None

    def _clock(self, block: State) -> Iterator[tuple[Move, State, int, str | None]]:
        """Time passes for this agreement: any delay at once (its zone loses its upper bounds).

        Agreements share nothing but the clock, and nothing ever forces a
        command, so letting each agreement's time pass on its own reaches
        the same combinations of agreement states as one shared clock; a
        counterexample is laid out on one timeline afterwards.
        """
        zone = self.zone(block)
        if not zone:
            return
        later = self.zones.up(zone)
        if later == zone:
            return
        lay = self.layout
        new = list(block)
        new[lay.zone : lay.zone + lay.zone_size] = later
        yield Move("clock", 0, "clock", "time passes"), tuple(new), 0, None

    def all_later(self, state: State) -> State:
        """`state` after time passes for every agreement (a concrete counterexample's clock move)."""
        head, blocks = self.split(state)
        lay = self.layout
        later = []
        for block in blocks:
            zone = self.zone(block)
            if zone:
                later.append((*block[: lay.zone], *self.zones.up(zone), *block[lay.zone + lay.zone_size :]))
            else:
                later.append(block)
        return self.canonical(head, later)

    def cells(self, block: State, dims: tuple[Dim, ...]) -> Iterator[tuple[tuple[int, ...] | None, Zone]]:
        """(cell key, sub-zone) of this agreement's zone along `dims`; key None when no time is read."""
        zone = self.zone(block)
        if not dims or not zone:
            yield None, zone
            return
        yield from self.zones.cells(zone, dims)

    def _commands(self, block: State) -> Iterator[tuple[Move, State | None, int, Any]]:
        whole: View | None = None  # the view for guards that do not read time
        for t, sources in enumerate(self.sources):
            if block[0] not in sources:
                continue
            slot = self.approval_slot.get(t)
            if slot is not None and not all(block[self.layout.tokens + k] & 1 for k in self.approval_tokens[t]):
                continue  # the command is enabled only with every approval it requires
            if not self.guard_dims[t]:
                whole = whole or self.view(block)
                yield from self._guarded(block, whole, t, slot, None, self.zone(block))
                continue
            for cell, zone in self.cells(block, self.guard_dims[t]):
                yield from self._guarded(block, self.view(block, zone), t, slot, cell, zone)

    def _guarded(
        self, block: State, view: View, t: int, slot: int | None, cell: tuple[int, ...] | None, zone: Zone
    ) -> Iterator[tuple[Move, State | None, int, Any]]:
        """The command `t` where its guard holds: for some param values, a refined path condition."""
        held = self.guards[t](view)
        pc: int | None = block[2]
        if isinstance(held, tuple):
            pc = self.space.refine(block[2], held)
        elif not held:
            return
        if pc is not None:
            yield from self._command(block, view, t, slot, cell, zone, pc)

    def _command(
        self,
        block: State,
        view: View,
        t: int,
        slot: int | None,
        cell: tuple[int, ...] | None,
        zone: Zone,
        pc: int,
    ) -> Iterator[tuple[Move, State | None, int, Any]]:
        lay = self.layout
        space = self.space
        ctrl = block[0]
        # The runtime keeps one call in flight per call site (PW530, `check_in_flight`): a command whose
        # own call site still has a call with no outcome waits for the worker to settle it.
        if any(not self._idle(block, s) for s in self.sites_of[t]):
            # The runtime checks the effects it depends on first (PW526, PW527), then this.
            found = self.outcome_refusal(block, t)
            self._blocked(block, t, "PW530, its call site still has a call in flight" if found is None else (
                f"{found[0]}, it depends on `{found[1]}` and a call of it was "
                f"{'abandoned' if found[0] == 'PW526' else 'parked'}"
            ))  # fmt: skip
            return
        # An effect amount above its ceiling: the runtime refuses the command before policy.
        within: Formula = True
        carried: list[Any] = []
        for s in self.sites_of[t]:
            site = self.model.sites[s]
            amount_fn = self.site_amount[s]
            value = amount_fn(view) if amount_fn is not None else 0
            carried.append(value)
            if site.ceiling is not None and amount_fn is not None:
                within = space.conj(within, space.compare("<=", value, site.ceiling))
        if within is False:
            self._blocked(block, t, "PW522, a call would carry more than its effect's ceiling")
            return
        if within is not True:
            refined = space.refine(pc, within)
            if refined is None:
                self._blocked(block, t, "PW522, a call would carry more than its effect's ceiling")
                return
            pc = refined
        over, why_over = self._over_budget(block, t, carried)
        if over is not False:
            refined = None if over is True else space.refine(pc, space.negate(over))
            if refined is None:
                self._blocked(block, t, why_over)
                return
            pc = refined
        # At commit the runtime refuses a command whose amount is undefined or negative (the
        # ledger would) or whose postings would take a non-external account of this
        # agreement below zero (`balance()`'s view), checked posting by posting as the ledger does.
        balances = list(block[lay.balances : lay.balances + lay.accounts])
        refuse: Formula = False
        why: list[str] = []
        for amount_fn, source, rule in self.postings[t]:
            amount = amount_fn(view)
            negative = True if amount is None else space.compare("<", amount, 0)
            if negative is not False:
                refuse = space.disj(refuse, negative)
                why.append("an undefined amount" if amount is None else "a negative amount")
            if amount is None or refuse is True:
                break
            over = self._over_full(view, rule)
            if over is not False:
                refuse = space.disj(refuse, over)
                why.append("portions over 100%")
                if refuse is True:
                    break
            for account, delta in self._posting(view, amount, source, rule):
                balances[account] = balances[account] + delta
            if not self.external[source]:
                short = space.compare("<", balances[source], 0)
                if short is not False:
                    refuse = space.disj(refuse, short)
                    why.append(self._shortfall(source, balances[source]))
        move = Move("command", 0, self.first_role[t], self.model.transitions[t]["id"], cell=cell)
        if refuse is not False:
            refused = refuse is True or space.satisfiable(pc, refuse)[0] is True
            if refused:
                tid = self.model.transitions[t]["id"]
                message = f"`{tid}` is enabled but the runtime refuses it at commit: {', '.join(why)}"
                condition = (pc, refuse) if self.symbolic else None
                yield Move("refused", 0, move.actor, tid, cell=cell), None, 0, Refusal(tid, message, condition)
            if refuse is True:
                return
            committed = space.refine(pc, space.negate(refuse))
            if committed is None:
                return
            pc = committed
        new = list(block)
        new[0] = self.targets[t]
        new[2] = pc
        if zone:
            new[lay.zone : lay.zone + lay.zone_size] = self.zones.reset(zone, self.stamp_sets[t])
        new[lay.fired + t] += 1
        for s, value in zip(self.sites_of[t], carried, strict=True):
            new[lay.phase + s] = Phase.PREPARED
            new[lay.happened + s] = 0
            new[lay.carried + s] = value
            if self.counted:
                new[lay.made + self.counter_of[self.model.sites[s].effect]] += 1
            if lay.carry and value is not None:
                new[lay.carried_all] = new[lay.carried_all] + value
        if slot is not None:
            for k in self.approval_tokens[t]:
                new[lay.tokens + k] = 2  # consumed: approved(t) holds from now on
        new[lay.reached] |= 1 << self.targets[t]
        new[lay.balances : lay.balances + lay.accounts] = balances
        edge = None
        if self.final[ctrl] and self.postings[t]:
            edge = "no_posting_after_final"
        yield move, tuple(new), 0, edge

    def _over_budget(self, block: State, t: int, carried: list[Any]) -> tuple[Formula, str]:
        """Where the runtime refuses a command of `t` for its budgets (`check_budgets`), and why.

        In the runtime's order: an effect's `max_calls` (PW523), the budget's
        `max_tool_calls` (PW524), both counting calls made so far plus this
        command's; then the budget's `ceiling` (PW525) over the money those
        calls carry. Counts are exact numbers; the money may be a symbol.
        """
        sites = self.sites_of[t]
        if not sites:
            return False, ""
        lay = self.layout
        if self.counted:
            adding: dict[str, int] = {}
            for s in sites:
                effect = self.model.sites[s].effect
                adding[effect] = adding.get(effect, 0) + 1
            for effect, count in sorted(adding.items()):
                limit = self.model.effects[effect].get("max_calls")
                made = block[lay.made + self.counter_of[effect]] + count
                if limit is not None and made > int(limit):
                    return True, f"PW523, a call of `{effect}` number {made} passes its max_calls {limit}"
            total = sum(block[lay.made : lay.made + lay.counters]) + len(sites)
            if self.max_tool_calls is not None and total > self.max_tool_calls:
                return True, f"PW524, call number {total} passes the budget's max_tool_calls {self.max_tool_calls}"
        if lay.carry and self.budget_ceiling is not None:
            value: Any = block[lay.carried_all]
            for amount in carried:  # an undefined amount carries nothing, as the runtime counts it
                value = value if amount is None else value + amount
            over = self.space.compare(">", value, self.budget_ceiling)
            if over is not False:
                return over, "PW525, the money its calls carry passes the budget's ceiling"
        return False, ""

    def _blocked(self, block: State, t: int, why: str) -> None:
        """Remember why an enabled command of `t` makes no move here, when the liveness report asks."""
        if self.recording is not None:
            self.recording.setdefault((block, t), why)

    def outcome_refusal(self, block: State, t: int) -> tuple[str, str] | None:
        """(code, effect) when the runtime refuses a command of transition `t` in this agreement because
        an effect it depends on has an unknown outcome, else None.

        The runtime's rule (runtime/_command_effects.py, `check_dependencies`), in its order: for each
        effect the command depends on (its guard reads `applied(E)`, `total(E)` or an outcome of E, or it
        calls E), by name, PW526 once some call of E was abandoned as uncertain (`Layout.abandoned`: a later
        call at the same site does not undo it), unless the guard reads
        `abandoned(E)`; PW527 while one is parked for reconciliation. The search itself lets such a
        command commit (an over-approximation, which can only add counterexamples to invariants); the
        liveness check removes those moves, as a run of the runtime never takes them.
        """
        depends, handled = self.depends_on[t]
        phase = self.layout.phase
        abandoned = block[self.layout.abandoned] if self.layout.abandons else 0
        for effect in depends:
            phases = {block[phase + s] for s in self.effect_sites.get(effect, ())}
            if abandoned & self.abandon_bit.get(effect, 0) and effect not in handled:
                return "PW526", effect
            if Phase.NEEDS_RECONCILIATION in phases:
                return "PW527", effect
        return None

    def _over_full(self, view: View, rule: Json) -> Formula:
        """Whether an allotment's shares add up to more than 100% (the ledger refuses it, PW756),
        in the rule or in a split nested in it (new in 1.1)."""
        over: Formula = False
        for portion in rule.get("portions", ()):
            if "split" in portion:
                over = self.space.disj(over, self._over_full(view, portion["split"]))
        if rule["kind"] != "allotment":
            return over
        total: Any = 0
        for portion in rule["portions"]:
            if portion["kind"] == "remaining":
                continue
            if "share" in portion:
                num, den = portion["share"].split("/")
                total = total + Fraction(int(num), int(den))
            else:
                total = total + view.p[self.model.param_index[portion["param"]]]
        return self.space.disj(over, self.space.compare(">", total, 1))

    def _shortfall(self, account: int, balance: Any) -> str:
        name = self.model.accounts[account]["name"]
        if is_sym(balance):
            return f"`{name}` would go below zero"
        return f"`{name}` would be at {format_money(balance, self.model.scale)}"

    def _posting(self, view: View, amount: Any, source: int, rule: Json) -> list[tuple[int, Any]]:
        """(account, delta) of one transfer. With every value concrete this is the kernel's
        `pactwright.movement.move`, the arithmetic the runtime checks each commit against."""
        index = self.model.account_index
        values = {name: view.p[self.model.param_index[name]] for name in movement.params_of(rule)}
        concrete = not is_sym(amount) and not any(is_sym(value) for value in values.values())
        if concrete and amount >= 0:
            # A negative amount never commits (the ledger refuses it); the z3 step still asks
            # what it would move, which the general arithmetic below answers.
            name = self.model.accounts[source]["name"]
            return [(index[account], delta) for account, delta in movement.move(amount, name, rule, values)]
        if rule["kind"] == "single":
            return [(source, -amount), (index[rule["to"]], amount)]
        return [(source, -amount), *self._split_symbolic(view, amount, rule)]

    def _split_symbolic(self, view: View, amount: Any, rule: Json) -> list[tuple[int, Any]]:
        """(account, part) of a split over unknowns, as `movement.split` computes it: a capped
        portion takes min(cap, what is left), an allotment's floor(share x amount) plus its
        remainder unit, and a nested split (new in 1.1) shares out its portion's part the same
        way, so its forms nest those derived symbols exactly."""
        index = self.model.account_index
        portions = rule["portions"]
        parts: list[Any] = []
        if rule["kind"] == "capped":
            left = amount
            for portion in portions:
                if portion["kind"] == "remaining":
                    take = left
                else:
                    cap = (
                        int(portion["max_minor"])
                        if "max_minor" in portion
                        else view.p[self.model.param_index[portion["param"]]]
                    )
                    take = self.space.minimum(cap, left) if is_sym(left) or is_sym(cap) else min(cap, left)
                parts.append(take)
                left = left - take
        else:
            shares: list[Any] = []
            for portion in portions:
                if portion["kind"] == "remaining":
                    continue
                if "share" in portion:
                    num, den = portion["share"].split("/")
                    shares.append(Fraction(int(num), int(den)))
                else:
                    shares.append(view.p[self.model.param_index[portion["param"]]])
            parts = self._allot_symbolic(amount, shares)
        moves: list[tuple[int, Any]] = []
        for portion, part in zip(portions, parts, strict=True):
            if "split" in portion:
                moves.extend(self._split_symbolic(view, part, portion["split"]))
            else:
                moves.append((index[portion["to"]], part))
        return moves

    def _allot_symbolic(self, amount: Any, shares: list[Any]) -> list[Any]:
        """`allot` over unknowns: floors of each share, the remainder's units to the first
        portions, and the last portion takes exactly what is left (so money is conserved
        by construction, not only by the solver)."""
        space = self.space
        rest: Any = 1
        for share in shares:
            rest = rest - share
        floors = [space.floor(space.mul(amount, share)) for share in [*shares, rest]]
        remainder: Any = amount
        for part in floors:
            remainder = remainder - part
        parts = [floor + space.unit_if_above(remainder, i) for i, floor in enumerate(floors[:-1])]
        last: Any = amount
        for part in parts:
            last = last - part
        return [*parts, last]

    def _idle(self, block: State, site: int) -> bool:
        phase = block[self.layout.phase + site]
        if phase in TERMINAL:
            return True
        return phase == Phase.FAILED and ON_FAILED[self.model.sites[site].strategy] is None

    def _approvals(self, block: State) -> Iterator[tuple[Move, State, int, str | None]]:
        lay = self.layout
        for t, tokens in self.approval_tokens.items():
            for k in tokens:
                if block[0] in self.sources[t] and not block[lay.tokens + k] & 1:
                    new = list(block)
                    new[lay.tokens + k] |= 1
                    move = Move("approve", 0, self.token_role[k], self.model.transitions[t]["id"])
                    yield move, tuple(new), 0, None

    def _effects(self, block: State) -> Iterator[tuple[Move, State, int, str | None]]:
        lay = self.layout
        for site in self.model.sites:
            s = site.index
            phase = block[lay.phase + s]
            if phase == Phase.IDLE:
                continue
            happened = block[lay.happened + s]

            def apply(new: list[int], s: int = s, happened: int = happened, strategy: str = site.strategy) -> None:
                if strategy == "idempotent" and happened:
                    return  # the provider deduplicates by key
                new[lay.applied + s] += 1
                new[lay.totals + s] += new[lay.carried + s]
                new[lay.happened + s] = 1

            if phase == Phase.PREPARED:
                # A transition's effects run in declaration order: a call waits for
                # the calls before it to succeed, and is cancelled if one was given up.
                waiting, given_up = self._predecessors(block, site)
                if given_up:
                    new = list(block)
                    new[lay.phase + s] = Phase.IDLE
                    if self.counted:  # a cancelled call was never made (runtime: `tally`)
                        new[lay.made + self.counter_of[site.effect]] -= 1
                    if lay.carry and block[lay.carried + s] is not None:
                        new[lay.carried_all] = new[lay.carried_all] - block[lay.carried + s]
                    yield Move("cancel", 0, "runtime", site.effect, site=s), tuple(new), 0, None
                    continue
                if waiting:
                    continue
                new = list(block)
                apply(new)
                new[lay.phase + s] = Phase.ACKNOWLEDGED
                yield (
                    Move("dispatch", 0, "worker", site.effect, site=s),
                    tuple(new),
                    0,
                    None,
                )
                if self.bounds.faults > 0:
                    for fault in FAULTS:
                        new = list(block)
                        if fault == "lost_response":
                            apply(new)
                        new[lay.phase + s] = Phase.FAILED if fault == "provider_error" else Phase.UNCERTAIN
                        if ON_FAILED.get(site.strategy) is None:
                            # The step is given up (never repeated): undo what it already did.
                            # A strategy that retries has not failed yet, so nothing is compensated.
                            self._compensate_earlier(new, site)
                        move = Move("fault", 0, "worker", site.effect, fault=fault, site=s)
                        yield move, tuple(new), 1, None
            elif phase == Phase.UNCERTAIN:
                new = list(block)
                new[lay.phase + s] = ON_UNCERTAIN[site.strategy]
                if new[lay.phase + s] == Phase.ABANDONED_UNCERTAIN:
                    new[lay.abandoned] |= self.abandon_bit[site.effect]
                    self._compensate_earlier(new, site)
                yield (
                    Move("runtime", 0, "runtime", site.effect, site=s),
                    tuple(new),
                    0,
                    None,
                )
            elif phase == Phase.FAILED:
                after = ON_FAILED[site.strategy]
                if after is not None:
                    new = list(block)
                    new[lay.phase + s] = after
                    yield (
                        Move("runtime", 0, "runtime", site.effect, site=s),
                        tuple(new),
                        0,
                        None,
                    )
            elif phase == Phase.NEEDS_RECONCILIATION:
                new = list(block)
                new[lay.phase + s] = Phase.RECONCILED_RECOVERED if happened else Phase.RECONCILED_NOT_OCCURRED
                yield (
                    Move("reconcile", 0, "operator", site.effect, site=s),
                    tuple(new),
                    0,
                    None,
                )
                new = list(block)
                new[lay.phase + s] = Phase.ABANDONED_UNCERTAIN
                new[lay.abandoned] |= self.abandon_bit[site.effect]
                self._compensate_earlier(new, site)
                yield (
                    Move("abandon", 0, "operator", site.effect, site=s),
                    tuple(new),
                    0,
                    None,
                )
            elif phase == Phase.RECONCILED_NOT_OCCURRED:
                new = list(block)
                new[lay.phase + s] = Phase.PREPARED
                yield (
                    Move("runtime", 0, "runtime", site.effect, site=s),
                    tuple(new),
                    0,
                    None,
                )
            elif phase == Phase.COMPENSATION_REQUIRED:
                new = list(block)
                if happened:
                    new[lay.compensated + s] += 1
                    new[lay.compensated_totals + s] += new[lay.carried + s]
                new[lay.phase + s] = Phase.COMPENSATED
                yield (
                    Move("compensate", 0, "worker", site.compensation or site.effect, site=s),
                    tuple(new),
                    0,
                    None,
                )

    def _predecessors(self, block: State, site: Any) -> tuple[bool, bool]:
        """(some earlier call of the same transition is still running, one was given up)."""
        lay = self.layout
        waiting = given_up = False
        for s in self.sites_of[site.transition]:
            if s >= site.index:
                break
            phase = block[lay.phase + s]
            if phase in (Phase.ACKNOWLEDGED, Phase.RECONCILED_RECOVERED):
                continue
            if phase in (Phase.ABANDONED_UNCERTAIN, Phase.COMPENSATION_REQUIRED, Phase.COMPENSATED) or (
                phase == Phase.FAILED and ON_FAILED[self.model.sites[s].strategy] is None
            ):
                given_up = True
            else:
                waiting = True
        return waiting, given_up

    def _compensate_earlier(self, new: list[int], site: Any) -> None:
        """A later step failed: earlier effects of the same transition that
        happened and declare `compensate with E` now need E."""
        lay = self.layout
        for s in self.sites_of[site.transition]:
            if s >= site.index:
                break
            other = self.model.sites[s]
            # Completed and not yet undone: a site already COMPENSATED is never undone twice.
            if other.strategy == "compensate" and new[lay.happened + s] and new[lay.phase + s] == Phase.ACKNOWLEDGED:
                new[lay.phase + s] = Phase.COMPENSATION_REQUIRED

    # -- invariants ----------------------------------------------------------------

    def check_state(self, state: State) -> list[tuple[str, str]]:
        """Invariants violated in a flat `state`: (name, explanation).

        Ledger-wide built-ins need no separate pass: every posting conserves
        money within its agreement, and the runtime keeps each agreement's
        internal accounts at or above zero, so the ledger's totals break
        `money_conserved` or `no_negative_internal` only where one agreement does.
        """
        _, blocks = self.split(state)
        out: list[tuple[str, str]] = []
        for block in blocks:
            out.extend((name, why) for name, why, _ in self._block_violations(block))
            if self.stuck(block):
                out.append(("funds_not_stuck", self._stuck_message(block)))
        out.extend(("funds_available", refusal.message) for _, _, refusal in self.refusals(state))
        out.extend((name, why) for name, why, _ in self.limit_violations(blocks))
        return out

    def limit_violations(self, blocks: list[State]) -> list[tuple[str, str, Condition | None]]:
        """Limits crossed by the explored agreements together (new in 1.1): (name, explanation, where).

        Every explored commit is taken to fall in one window (the worst case) and, for a limit
        counted `per ROLE`, the same party to hold ROLE in every agreement, so the usage is the
        money the limit's effect took effect with, summed over all agreements.
        """
        out: list[tuple[str, str, Condition | None]] = []
        lay = self.layout
        for name, most, sites in self.limits:
            used: Any = 0
            for block in blocks:
                for s in sites:
                    used = used + block[lay.totals + s]
            crossed = self.space.compare(">", used, most)
            if crossed is False:
                continue
            where: Condition | None = NOWHERE_NEEDED
            if isinstance(crossed, tuple) or self.symbolic:
                formulas: frozenset[Any] = frozenset().union(*(self.space.pcs[b[2]] for b in blocks))
                pc = self.space.pc(formulas)
                sat, _ = self.space.satisfiable(pc, crossed)
                if sat is not True:
                    continue
                where = (pc, crossed)
            shown = format_money(used, self.model.scale) if isinstance(used, int) else "more"
            count = len(blocks)
            out.append(
                (
                    name,
                    f"{count} agreement{'s' if count != 1 else ''} in one window carry {shown} "
                    f"(limit {format_money(most, self.model.scale)})",
                    where,
                )
            )
        return out

    def _block_violations(self, block: State) -> list[tuple[str, str, Condition | None]]:
        """Violations visible in one agreement: (name, explanation, where it happens or None)."""
        lay = self.layout
        out: list[tuple[str, str, Condition | None]] = []
        whole = self.view(block)
        anywhere: Condition | None = (block[2], True) if self.symbolic else None
        for (name, fn), dims in zip(self.invariants, self.invariant_dims, strict=True):
            if not dims:
                found = self._fails(block, fn, whole)
                if found is not None:
                    out.append((name, self._explain(name, whole), found))
                continue
            cell = self.violating_cell(block, fn, dims)
            if cell is not None:
                zone, found = cell
                out.append((name, self._explain(name, self.view(block, zone)), found))
        for effect, spec in self.model.effects.items():
            limit = spec.get("max_calls")
            if limit is not None:
                count = self.effect_applications(block, effect)
                if count > limit:
                    out.append(("effect_max_calls", f"`{effect}` applied {count} times, max_calls {limit}", anywhere))
        for s in self.once_sites:
            site = self.model.sites[s]
            applied, fired = block[lay.applied + s], block[lay.fired + site.transition]
            if applied > fired:
                tid = self.model.transitions[site.transition]["id"]
                out.append(
                    (
                        "effect_applied_once",
                        f"`{site.effect}` took effect {applied} times for {fired} commit{'s' if fired != 1 else ''} "
                        f"of `{tid}` (strategy `{site.strategy}`)",
                        anywhere,
                    )
                )
        out.extend(self._ledger_violations(block))
        return out

    def _fails(self, block: State, fn: Callable[[View], Any], view: View) -> Condition | None:
        """None when `fn` holds for every value of the path condition; else where it fails
        (`NOWHERE_NEEDED` for a concrete run, which needs no witness)."""
        value = fn(view)
        if isinstance(value, tuple):
            negated = self.space.negate(value)
            sat, _ = self.space.satisfiable(block[2], negated)
            return (block[2], negated) if sat is True else None
        if value:
            return None
        return (block[2], True) if self.symbolic else NOWHERE_NEEDED

    def witness_of(self, condition: Condition | None) -> dict[str, int] | None:
        """Param values for a violation's condition (computed only for the violations reported)."""
        if condition is None or condition is NOWHERE_NEEDED or not self.witnesses:
            return None
        return self.space.witness(*condition)

    def violating_cell(
        self, block: State, fn: Callable[[View], Any], dims: tuple[Dim, ...]
    ) -> tuple[Zone, Condition] | None:
        """The first cell of the agreement's zone where `fn` fails (a time when the invariant fails), or None."""
        for _, zone in self.cells(block, dims):
            found = self._fails(block, fn, self.view(block, zone))
            if found is not None:
                return zone, found
        return None

    def _ledger_violations(self, block: State) -> list[tuple[str, str, Condition | None]]:
        lay = self.layout
        balances = block[lay.balances : lay.balances + lay.accounts]
        out: list[tuple[str, str, Condition | None]] = []
        total: Any = 0
        for value in balances:
            total = total + value
        if total != 0:
            shown = total if isinstance(total, int) else "a non-zero amount"
            text = format_money(shown, self.model.scale) if isinstance(shown, int) else shown
            out.append(
                (
                    "money_conserved",
                    f"balances sum to {text}, not 0",
                    (block[2], self.space.compare("!=", total, 0)) if self.symbolic else None,
                )
            )
        for account, value in enumerate(balances):
            if self.external[account]:
                continue
            below = self.space.compare("<", value, 0)
            if below is False or isinstance(below, tuple):
                # Undecided by bounds: implied anyway. Commits keep every source at or above zero and
                # every portion is non-negative (amounts >= 0, shares within 100%), so a balance of a
                # committed run is a sum of non-negative receipts and of debits it covered.
                continue
            condition: Condition | None = (block[2], True) if self.symbolic else None
            name = self.model.accounts[account]["name"]
            shown = format_money(value, self.model.scale) if isinstance(value, int) else "below zero"
            out.append(("no_negative_internal", f"account `{name}` is at {shown}", condition))
        return out

    # -- funds that can never leave ------------------------------------------------

    def holding(self, block: State) -> Formula:
        """Whether some non-external account of the agreement holds money (a formula)."""
        lay = self.layout
        held: Formula = False
        for account in range(lay.accounts):
            if not self.external[account]:
                held = self.space.disj(held, self.space.compare("!=", block[lay.balances + account], 0))
        return held

    def stuck_condition(
        self, block: State, moves_of: Callable[[State], list[tuple[State | None, str | None, Any]] | None]
    ) -> Formula | None:
        """Where (for which param values) no command can ever commit again from this
        non-final agreement while it holds money: a formula, False, or None when the
        search did not expand everything reachable without a command.

        Moves other than commands (time, approvals, effects) keep the path
        condition, so the commands reachable through them commit exactly
        where their targets' conditions hold. A command the runtime refuses
        for an effect of unknown outcome (`outcome_refusal`) is no way out
        where it is refused; an operator's resolution of that effect is a
        move like any other, followed to the commands after it.
        """
        if self.final[block[0]]:
            return False
        held = self.holding(block)
        if held is False:
            return False
        pc = block[2]
        targets: set[int] = set()
        seen = {block}
        todo = [block]
        while todo:
            if len(seen) > STUCK_EXTRA_BLOCKS:
                return None  # too far to judge: the block is not reported (and not claimed)
            current = todo.pop()
            moves = moves_of(current)
            if moves is None:
                return None
            settled = self._time_passed(current)
            for new, tid, cell in moves:
                if new is None:
                    continue
                if tid is not None:
                    if self.outcome_refusal(current, self.model.transition_index[tid]) is not None:
                        continue  # PW526 / PW527: the runtime refuses it here; not a way out
                    # Once time has been let pass, only a command still enabled after every
                    # deadline is a way out: any earlier window may already be gone.
                    if not settled or self._eventual(tid, cell):
                        targets.add(new[2])
                elif new not in seen:
                    seen.add(new)
                    todo.append(new)
        if pc in targets:
            return False  # some command commits for every value of this state's condition
        can: Formula = False
        for target in sorted(targets):
            can = self.space.disj(can, self._pc_formula(target))
        return self.space.conj(held, self.space.negate(can))

    def _time_passed(self, block: State) -> bool:
        """Whether the agreement's zone is closed under time passing (a clock move has happened)."""
        zone = self.zone(block)
        return (
            bool(zone)
            and any(self.zones.is_set(zone, c) for c in range(self.layout.stamps))
            and (self.zones.up(zone) == zone)
        )

    def _eventual(self, tid: str, cell: tuple[int, ...] | None) -> bool:
        """Whether a command fired from `cell` stays enabled however late: every age it reads
        is in its last interval (past the largest deadline) or never set."""
        if cell is None:
            return True
        dims = self.guard_dims[self.model.transition_index[tid]]
        for dim, position in zip(dims, cell, strict=True):
            if dim.kind == "age" and position >= 0 and position != len(dim.intervals()) - 1:
                return False
        return True

    def _pc_formula(self, pc: int) -> Formula:
        formula: Formula = True
        for part in sorted(self.space.pcs[pc], key=repr):
            formula = self.space.conj(formula, part)
        return formula

    def stuck(self, block: State) -> bool:
        """`funds_not_stuck` fails for this agreement (concrete runs: any holding counts)."""

        def moves_of(current: State) -> list[tuple[State | None, str | None, Any]] | None:
            return [
                (new, move.name if move.kind == "command" else None, move.cell)
                for move, new, _, _ in self.local_moves(current)
            ]

        condition = self.stuck_condition(block, moves_of)
        if condition is None or condition is False:
            return False
        if condition is True:
            return True
        sat, _ = self.space.satisfiable(block[2], condition)
        return sat is True

    def _stuck_message(self, block: State) -> str:
        lay = self.layout
        held = [
            f"{self.model.accounts[a]['name']} holds "
            + (format_money(v, self.model.scale) if isinstance(v, int) else "money")
            for a in range(lay.accounts)
            if not self.external[a] and (v := block[lay.balances + a]) != 0
        ]
        state = self.model.states[block[0]]
        return f"no command can ever commit from `{state}` while {', '.join(held) or 'money is held'}"

    def _explain(self, name: str, view: View) -> str:
        """`expr` is false, with the values of the terms it reads."""
        values = []
        for text, fn, kind in self.leaf_fns[name]:
            value = fn(view)
            if isinstance(value, Lin):
                continue  # an unknown: the concrete run at the witness shows its value
            if kind == "money" and isinstance(value, int):
                value = format_money(value, self.model.scale)
            elif kind == "percent":
                value = f"{Percent(value).canonical()}%"
            values.append(f"{text} = {value}")
        rendered = render_expr(self.invariant_exprs[name], self.model.scale)
        return f"{rendered} is false" + (f" with {', '.join(values)}" if values else "")

    # -- search -----------------------------------------------------------------------

    def explore(self, progress: Callable[[int, int, int], None] | None = None) -> ExplorationResult:
        """Breadth-first search over compact states: (faults, sorted agreement block ids).

        Agreement blocks are interned once; everything that depends on one
        block alone (its moves, time passing, its invariant verdicts) is
        computed once per block and cached, so the hot loop is mostly tuple
        building and dict lookups.
        """
        lay = self.layout
        max_faults = self.bounds.faults
        block_id: dict[State, int] = {}
        blocks: list[State] = []
        # Per block: (successor block id or -1 for a refused command, faults, edge, command id or None).
        local: list[list[tuple[int, int, Any, str | None, Any]] | None] = []
        block_violations: list[list[tuple[str, str, Condition | None]]] = []
        first_state: list[int] = []
        phases: dict[int, set[int]] = {s.index: set() for s in self.model.sites}
        reached: set[int] = set()
        fired: set[str] = set()

        def intern(block: State) -> int:
            found = block_id.get(block)
            if found is not None:
                return found
            bid = len(blocks)
            block_id[block] = bid
            blocks.append(block)
            local.append(None)
            first_state.append(-1)
            block_violations.append(self._block_violations(block))
            return bid

        # Per block: how many of its moves lead to a successor (not a refusal) with no fault
        # budget left, and with some left (a fault costs one).
        counted: dict[int, tuple[int, int]] = {}

        # Liveness properties need each move's fairness (see `fair_action`), aligned with `local`.
        fair: dict[int, list[str | None]] | None = {} if self.model.properties else None

        def moves_of(bid: int) -> list[tuple[int, int, Any, str | None, Any]]:
            cached = local[bid]
            if cached is None:
                raw = self.local_moves(blocks[bid])
                cached = [
                    (
                        intern(new) if new is not None else -1,
                        cost,
                        edge,
                        move.name if move.kind == "command" else None,
                        move.cell,
                    )
                    for move, new, cost, edge in raw
                ]
                local[bid] = cached
                if fair is not None:
                    fair[bid] = [self.fair_action(move) for move, _, _, _ in raw]
                counted[bid] = (
                    sum(1 for m in cached if m[0] >= 0 and m[1] == 0),
                    sum(1 for m in cached if m[0] >= 0),
                )
            return cached

        states: list[tuple[int, ...]] = []
        parents: list[int] = []
        depths: list[int] = []
        index: dict[tuple[int, ...], int] = {}
        violations: dict[str, Violation] = {}
        wanted = {name for name, _ in self.invariants} | set(BUILTIN_NAMES)
        wanted |= {name for name, _, _ in self.limits}
        stop_on = self.bounds.stop_on
        queue: deque[int] = deque()
        edges = 0
        bound_hit: str | None = None
        max_states = self.bounds.max_states
        max_depth_bound = self.bounds.max_depth

        def found(name: str, violation: Violation) -> None:
            wanted.discard(name)
            violations[name] = violation

        def add(state: tuple[int, ...], parent: int, depth: int) -> int:
            sid = len(states)
            index[state] = sid
            states.append(state)
            parents.append(parent)
            depths.append(depth)
            for bid in state[1:]:
                if first_state[bid] < 0:
                    first_state[bid] = sid
                    block = blocks[bid]
                    reached.add(block[0])
                    for s in range(lay.sites):
                        phases[s].add(block[lay.phase + s])
                    for name, why, condition in block_violations[bid]:
                        if name in wanted:
                            found(name, Violation(name, sid, why, witness=self.witness_of(condition)))
            if self.limits:
                for name, why, condition in self.limit_violations([blocks[b] for b in state[1:]]):
                    if name in wanted:
                        found(name, Violation(name, sid, why, witness=self.witness_of(condition)))
            queue.append(sid)
            return sid

        def done() -> bool:
            if stop_on is None:
                return False
            if not stop_on:
                return bool(violations)  # an empty set: stop at the first violation of anything
            return all(name in violations for name in stop_on)

        # Every combination of text samples is an initial state. When there are more than the
        # bound, the first half of it is started from, so the search can still follow them, and
        # the run is incomplete (never a pass by the search) with a warning that says why.
        start_limit = self.start_limit()
        starts_cut = self.initial_count() > start_limit
        if starts_cut:
            self.warnings.append(self._too_many_starts(self.initial_count(), start_limit))
        for flat in self.initial_states(limit=start_limit):
            add(self._compact(flat, intern), -1, 0)
        max_depth = 0
        while queue and not done():
            sid = queue.popleft()
            depth = depths[sid]
            if depth >= max_depth_bound:
                bound_hit = bound_hit or "max_depth"
                continue
            state = states[sid]
            faults = state[0]
            ids = state[1:]
            room = max_faults - faults
            successors: list[tuple[int, ...]] = []
            repeated = 0  # moves of an agreement block that appears twice: same successors, counted
            previous = -1
            for position, bid in enumerate(ids):
                moves = local[bid]
                if moves is None:
                    moves = moves_of(bid)
                if bid == previous:
                    # Interchangeable agreements in the same block: the successors of this
                    # position are those of the previous one, which are already generated.
                    repeated += counted[bid][0 if room <= 0 else 1]
                    continue
                previous = bid
                rest = ids[:position] + ids[position + 1 :]
                for new_bid, cost, edge, tid, _ in moves:
                    if cost > room:
                        continue
                    if new_bid < 0:
                        if "funds_available" in wanted:
                            found(
                                "funds_available",
                                Violation(
                                    "funds_available",
                                    sid,
                                    edge.message,
                                    witness=self.witness_of(edge.condition),
                                    refused=edge.transition,
                                ),
                            )
                        continue
                    if tid is not None:
                        fired.add(tid)
                    at = bisect_left(rest, new_bid)
                    succ = (faults + cost, *rest[:at], new_bid, *rest[at:])
                    if edge is not None and edge not in violations:
                        target = index.get(succ)
                        if target is None:
                            target = add(succ, sid, depth + 1)
                        violations[edge] = Violation(edge, target, "a posting after a final state", edge=True)
                        wanted.discard(edge)
                    successors.append(succ)
            edges += len(successors) + repeated
            for succ in successors:
                if succ in index:
                    continue
                if len(states) >= max_states:
                    bound_hit = "max_states"
                    break
                add(succ, sid, depth + 1)
                max_depth = max(max_depth, depth + 1)
            if bound_hit == "max_states":
                break
            if progress is not None and not len(states) & 0xFFFF:
                progress(len(states), edges, depth)
        if starts_cut:
            bound_hit = "max_states"
        stopped_early = bool(queue) and done()
        if "funds_not_stuck" in wanted and not stopped_early:
            self._find_stuck(blocks, local, first_state, depths, found)
        self._blocks = blocks
        self._block_id = block_id
        # The explored graph, kept for the liveness check only when the policy declares properties.
        self._graph = (local, fair, index, max_depth_bound) if fair is not None else None
        return ExplorationResult(
            states=states,
            parents=parents,
            depths=depths,
            violations=violations,
            transitions_fired=fired,
            phases_seen=phases,
            states_reached=reached,
            edges=edges,
            depth_reached=max_depth,
            exhausted=bound_hit is None and not stopped_early,
            bound_hit=bound_hit or ("stopped at first violation" if stopped_early else None),
            warnings=self.warnings,
            unknown_queries=self.space.unknown,
            symbolic=self.symbolic_params,
            model_ranges=self._ranges(),
        )

    def _ranges(self) -> list[tuple[str, str, str]]:
        out = []
        for param in self.model.params:
            if param["name"] not in self.symbolic_params:
                continue
            if param["type"] == "money":
                low = format_money(int(param["min"]), self.model.scale)
                high = format_money(int(param["max"]), self.model.scale)
            else:
                low, high = f"{param['min']}%", f"{param['max']}%"
            if param.get("min_param"):  # new in 1.1: the relation is part of what was covered
                low = f"{low} (at least {param['min_param']})"
            if param.get("max_param"):
                high = f"{high} (at most {param['max_param']})"
            out.append((param["name"], low, high))
        return out

    def _find_stuck(
        self,
        blocks: list[State],
        local: list[list[tuple[int, int, Any, str | None, Any]] | None],
        first_state: list[int],
        depths: list[int],
        found: Callable[[str, Violation], None],
    ) -> None:
        """The shallowest agreement that can never commit again while it holds money."""
        ids = {block: bid for bid, block in enumerate(blocks)}

        beyond: dict[State, list[tuple[State | None, str | None, Any]]] = {}

        def moves_of(block: State) -> list[tuple[State | None, str | None, Any]] | None:
            bid = ids.get(block)
            cached = local[bid] if bid is not None else None
            if cached is not None:
                return [(blocks[nb] if nb >= 0 else None, tid, cell) for nb, _, _, tid, cell in cached]
            # Past the depth bound: the search never needed its moves, but whether anything can
            # still commit from it is a question about this one agreement (bounded work).
            if block not in beyond:
                if len(beyond) >= STUCK_EXTRA_BLOCKS:
                    return None
                beyond[block] = [
                    (new, move.name if move.kind == "command" else None, move.cell)
                    for move, new, _, _ in self.local_moves(block)
                ]
            return beyond[block]

        order = sorted(
            (bid for bid in range(len(blocks)) if first_state[bid] >= 0 and local[bid] is not None),
            key=lambda bid: (depths[first_state[bid]], first_state[bid], bid),
        )
        for bid in order:
            block = blocks[bid]
            condition = self.stuck_condition(block, moves_of)
            if condition is None or condition is False:
                continue
            witness: dict[str, int] | None = None
            if condition is not True:
                sat, witness = self.space.satisfiable(block[2], condition)
                if sat is not True:
                    continue
            elif self.symbolic and self.witnesses:
                witness = self.space.witness(block[2])
            found(
                "funds_not_stuck",
                Violation("funds_not_stuck", first_state[bid], self._stuck_message(block), witness=witness),
            )
            return

    def _compact(self, flat: State, intern: Callable[[State], int]) -> tuple[int, ...]:
        head, blocks = self.split(flat)
        return (head[0], *sorted(intern(b) for b in blocks))

    def compact(self, flat: State) -> tuple[int, ...] | None:
        """The compact form of a flat state seen by the last `explore`, or None."""
        ids = []
        head, blocks = self.split(flat)
        for block in blocks:
            bid = self._block_id.get(block)
            if bid is None:
                return None
            ids.append(bid)
        return (head[0], *sorted(ids))

    def expand(self, compact: tuple[int, ...]) -> State:
        """The flat state of a compact one (agreements in block-id order)."""
        flat: list[int] = [compact[0]]
        for bid in compact[1:]:
            flat.extend(self._blocks[bid])
        return tuple(flat)

    def path(self, result: ExplorationResult, sid: int) -> list[int]:
        out = []
        while sid >= 0:
            out.append(sid)
            sid = result.parents[sid]
        return out[::-1]


def _applied_once(model: Model, site: Any) -> bool:
    """Whether `effect_applied_once` watches this call site: a money-moving effect
    whose strategy does not deduplicate against a key."""
    if site.strategy in ("idempotent", "reconcilable"):
        return False
    effect = model.effects.get(site.effect, {})
    if "money_moving" in effect:
        return bool(effect["money_moving"])
    return effect.get("reversibility") in (None, "irreversible", "compensable") or site.amount is not None


_OUTCOME_READS = frozenset({"applied", "total", "acknowledged", "reconciled", "abandoned"})


def _effects_read(expr: Any, ops: frozenset[str] = _OUTCOME_READS) -> Iterator[str]:
    """The effects an expression reads through `ops` (`applied` only as `applied(EFFECT)`)."""
    if isinstance(expr, dict):
        op = expr.get("op")
        if op in ops and (op != "applied" or expr.get("value") == "effect"):
            yield str(expr["name"])
        for arg in expr.get("args", []):
            yield from _effects_read(arg, ops)


def _depends_on(transition: Json) -> tuple[tuple[str, ...], frozenset[str]]:
    """(the effects a command of `transition` depends on, sorted; those whose abandon its guard handles)."""
    guard = transition.get("guard")
    called = {str(c["effect"]) for c in transition.get("effects", [])}
    depends = tuple(sorted({*_effects_read(guard), *called}))
    return depends, frozenset(_effects_read(guard, frozenset({"abandoned"})))


def _leaves(expr: Json) -> Iterator[Json]:
    """The terms an invariant reads: params, balances, counters, totals."""
    if expr["op"] in ("param", "balance", "applied", "fired", "total"):
        yield expr
    for arg in expr.get("args", []):
        yield from _leaves(arg)


def _mentions_now(expr: Json) -> bool:
    return expr["op"] == "now" or any(_mentions_now(a) for a in expr.get("args", []))


def _nondecreasing(size: int, count: int) -> Iterator[tuple[int, ...]]:
    """Every tuple of `count` indices below `size` in non-decreasing order, lexicographically."""
    if count == 0:
        yield ()
        return
    indices = [0] * count
    while True:
        yield tuple(indices)
        position = count - 1
        while position >= 0 and indices[position] == size - 1:
            position -= 1
        if position < 0:
            return
        value = indices[position] + 1
        indices[position:] = [value] * (count - position)
