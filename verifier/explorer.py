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

from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from pactwright.expr_text import render_expr
from pactwright.money import Percent, format_money
from pactwright.verifier.expressions import ExpressionCompiler, View
from pactwright.verifier.model import Json, Model
from pactwright.verifier.protocol import FAULTS, ON_FAILED, ON_UNCERTAIN, TERMINAL, Phase
from pactwright.verifier.zones import Dim, Zone, Zones

State = tuple[int, ...]


@dataclass(frozen=True)
class Move:
    """One event of a path: who did what to which agreement, with which fault."""

    kind: str  # command | approve | clock | dispatch | fault | runtime | reconcile | abandon | compensate
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


@dataclass
class Layout:
    """Offsets of the fields of one agreement block."""

    stamps: int
    transitions: int
    sites: int
    approvals: int
    accounts: int
    zone_size: int = 0

    @property
    def zone(self) -> int:
        return 2

    @property
    def fired(self) -> int:
        return 2 + self.zone_size

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
    def width(self) -> int:
        return self.reached + 1


@dataclass
class Violation:
    invariant: str
    state_id: int
    message: str
    edge: bool = False


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


def allot(amount: int, shares: list[Fraction]) -> list[int]:
    """Numscript allotment, written independently of the runtime's interpreter."""
    parts = [amount * s.numerator // s.denominator for s in shares]
    for index in range(amount - sum(parts)):
        parts[index % len(parts)] += 1
    return parts


class Explorer:
    """Builds and explores the composed state space of one model."""

    def __init__(self, model: Model, bounds: Bounds) -> None:
        self.model = model
        self.bounds = bounds
        self.zones = Zones(len(model.stamps), model.clock_maxima)
        self.layout = Layout(
            stamps=len(model.stamps),
            transitions=len(model.transitions),
            sites=len(model.sites),
            approvals=len(model.approval_transitions),
            accounts=len(model.accounts),
            zone_size=self.zones.size,
        )
        compiler = ExpressionCompiler(model)
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
        self.first_role = [self._actor(t) for t in model.transitions]
        self.approver = {t: model.transitions[t]["approval"]["role"] for t in model.approval_transitions}
        self.compensation_of = {s.index: s.compensation for s in model.sites if s.compensation}
        self.reentry_warned = False
        self.warnings: list[str] = []
        # Off while a counterexample is re-simulated, so agreement numbers stay put.
        self.symmetry = True

    # -- setup -----------------------------------------------------------------

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

    def initial_states(self) -> list[State]:
        """One state per combination of param samples across agreements (symmetric ones once)."""
        lay = self.layout
        blocks = []
        for choice in range(len(self.model.param_choices)):
            block = [0] * lay.width
            block[0] = self.model.initial
            block[1] = choice
            block[lay.zone : lay.zone + lay.zone_size] = self.zones.initial()
            block[lay.reached] = 1 << self.model.initial
            blocks.append(tuple(block))
        out: set[State] = set()
        self._combine(blocks, self.bounds.agreements, 0, [], out)
        return sorted(out)

    def _combine(self, blocks: list[State], count: int, start: int, chosen: list[State], out: set[State]) -> None:
        if count == 0:
            out.add(self.canonical((0,), chosen))
            return
        for index in range(start, len(blocks)):
            self._combine(blocks, count - 1, index, [*chosen, blocks[index]], out)

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
            p=self.model.param_choices[block[1]],
            stamps=tuple(None if a < 0 else -a for a in ages),
            fired=block[lay.fired : lay.fired + lay.transitions],
            bal=block[lay.balances : lay.balances + lay.accounts],
            sapp=block[lay.applied : lay.applied + lay.sites],
            comp=block[lay.compensated : lay.compensated + lay.sites],
            stot=block[lay.totals : lay.totals + lay.sites],
            ctot=block[lay.compensated_totals : lay.compensated_totals + lay.sites],
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

    def successors(self, state: State) -> Iterator[tuple[Move, State, str | None]]:
        """(move, successor, edge violation or None) for every enabled move.

        The slow, general path over flat states; `explore` uses the same
        per-agreement moves through caches keyed by interned blocks.
        """
        head, blocks = self.split(state)
        faults = head[0]
        for index, block in enumerate(blocks):
            for move, new_block, cost, edge in self.local_moves(block):
                if faults + cost > self.bounds.faults:
                    continue
                new_blocks = list(blocks)
                new_blocks[index] = new_block
                placed = Move(move.kind, index, move.actor, move.name, move.fault, move.site, move.delta, move.cell)
                yield placed, self.canonical((faults + cost,), new_blocks), edge

    def local_moves(self, block: State) -> list[tuple[Move, State, int, str | None]]:
        """Every move of one agreement: (move, new block, faults it costs, edge violation)."""
        out: list[tuple[Move, State, int, str | None]] = []
        out.extend(self._commands(block))
        out.extend(self._approvals(block))
        out.extend(self._effects(block))
        out.extend(self._clock(block))
        return out

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

    def _commands(self, block: State) -> Iterator[tuple[Move, State, int, str | None]]:
        whole: View | None = None  # the view for guards that do not read time
        for t, sources in enumerate(self.sources):
            if block[0] not in sources:
                continue
            slot = self.approval_slot.get(t)
            if slot is not None and not block[self.layout.tokens + slot] & 1:
                continue
            if not self.guard_dims[t]:
                whole = whole or self.view(block)
                if self.guards[t](whole):
                    yield from self._command(block, whole, t, slot, None, self.zone(block))
                continue
            for cell, zone in self.cells(block, self.guard_dims[t]):
                view = self.view(block, zone)
                if self.guards[t](view):
                    yield from self._command(block, view, t, slot, cell, zone)

    def _command(
        self, block: State, view: View, t: int, slot: int | None, cell: tuple[int, ...] | None, zone: Zone
    ) -> Iterator[tuple[Move, State, int, str | None]]:
        lay = self.layout
        ctrl = block[0]
        busy = [s for s in self.sites_of[t] if not self._idle(block, s)]
        if busy:
            if not self.reentry_warned:
                self.reentry_warned = True
                self.warnings.append(
                    f"transition `{self.model.transitions[t]['id']}` can fire again while its effect is in flight; "
                    "those re-entries were not explored"
                )
            return
        # The ledger refuses a negative amount (PW753), and no amount at all when it
        # is undefined (a division by zero): such a command never commits.
        amounts = [amount_fn(view) for amount_fn, _, _ in self.postings[t]]
        refused = any(amount is None or amount < 0 for amount in amounts)
        for s in self.sites_of[t]:
            site = self.model.sites[s]
            amount_fn = self.site_amount[s]
            if site.ceiling is not None and amount_fn is not None:
                carried = amount_fn(view)
                refused = refused or carried is None or carried > site.ceiling
        if refused:
            return
        new = list(block)
        new[0] = self.targets[t]
        if zone:
            new[lay.zone : lay.zone + lay.zone_size] = self.zones.reset(zone, self.stamp_sets[t])
        new[lay.fired + t] += 1
        for s in self.sites_of[t]:
            new[lay.phase + s] = Phase.PREPARED
            new[lay.happened + s] = 0
            amount_fn = self.site_amount[s]
            new[lay.carried + s] = amount_fn(view) if amount_fn is not None else 0
        if slot is not None:
            new[lay.tokens + slot] = 2  # consumed: approved(t) holds from now on
        new[lay.reached] |= 1 << self.targets[t]
        for (_, source, rule), amount in zip(self.postings[t], amounts, strict=True):
            for account, delta in self._posting(view, amount, source, rule):
                new[lay.balances + account] += delta
        edge = None
        if self.final[ctrl] and self.postings[t]:
            edge = "no_posting_after_final"
        move = Move("command", 0, self.first_role[t], self.model.transitions[t]["id"], cell=cell)
        yield move, tuple(new), 0, edge

    def _posting(self, view: View, amount: int, source: int, rule: Json) -> list[tuple[int, int]]:
        index = self.model.account_index
        if rule["kind"] == "single":
            return [(source, -amount), (index[rule["to"]], amount)]
        moves = [(source, -amount)]
        portions = rule["portions"]
        if rule["kind"] == "capped":
            left = amount
            for portion in portions:
                if portion["kind"] == "remaining":
                    take = left
                else:
                    cap = (
                        int(portion["max_minor"])
                        if "max_minor" in portion
                        else int(view.p[self.model.param_index[portion["param"]]])
                    )
                    take = min(cap, left)
                moves.append((index[portion["to"]], take))
                left -= take
            return moves
        shares: list[Fraction] = []
        for portion in portions:
            if portion["kind"] == "remaining":
                continue
            if "share" in portion:
                num, den = portion["share"].split("/")
                shares.append(Fraction(int(num), int(den)))
            else:
                shares.append(Fraction(view.p[self.model.param_index[portion["param"]]]))
        shares.append(1 - sum(shares, Fraction(0)))
        parts = allot(amount, shares)
        moves.extend((index[p["to"]], part) for p, part in zip(portions, parts, strict=True))
        return moves

    def _idle(self, block: State, site: int) -> bool:
        phase = block[self.layout.phase + site]
        if phase in TERMINAL:
            return True
        return phase == Phase.FAILED and ON_FAILED[self.model.sites[site].strategy] is None

    def _approvals(self, block: State) -> Iterator[tuple[Move, State, int, str | None]]:
        lay = self.layout
        for t, slot in self.approval_slot.items():
            if block[0] in self.sources[t] and not block[lay.tokens + slot] & 1:
                new = list(block)
                new[lay.tokens + slot] |= 1
                move = Move("approve", 0, self.approver[t], self.model.transitions[t]["id"])
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
        """Invariants violated in a flat `state`: (name, explanation)."""
        _, blocks = self.split(state)
        out: list[tuple[str, str]] = []
        for block in blocks:
            out.extend(self._block_violations(block, include_global=False))
        totals = [sum(b[self.layout.balances + a] for b in blocks) for a in range(self.layout.accounts)]
        out.extend(self._global_violations(totals))
        return out

    def _block_violations(self, block: State, *, include_global: bool) -> list[tuple[str, str]]:
        """Violations visible in one agreement; with `include_global`, its balances
        are the whole ledger (one agreement), so the ledger-wide checks run too."""
        lay = self.layout
        out: list[tuple[str, str]] = []
        whole = self.view(block)
        for (name, fn), dims in zip(self.invariants, self.invariant_dims, strict=True):
            if not dims:
                if not fn(whole):
                    out.append((name, self._explain(name, whole)))
                continue
            zone = self.violating_cell(block, fn, dims)
            if zone is not None:
                out.append((name, self._explain(name, self.view(block, zone))))
        for effect, spec in self.model.effects.items():
            limit = spec.get("max_calls")
            if limit is not None:
                count = self.effect_applications(block, effect)
                if count > limit:
                    out.append(("effect_max_calls", f"`{effect}` applied {count} times, max_calls {limit}"))
        if include_global:
            out.extend(self._global_violations(list(block[lay.balances : lay.balances + lay.accounts])))
        return out

    def violating_cell(self, block: State, fn: Callable[[View], Any], dims: tuple[Dim, ...]) -> Zone | None:
        """The first cell of the agreement's zone where `fn` is false (a time when the invariant fails), or None."""
        for _, zone in self.cells(block, dims):
            if not fn(self.view(block, zone)):
                return zone
        return None

    def _global_violations(self, totals: list[int]) -> list[tuple[str, str]]:
        out: list[tuple[str, str]] = []
        if sum(totals) != 0:
            out.append(("money_conserved", f"balances sum to {format_money(sum(totals), self.model.scale)}, not 0"))
        for account, total in enumerate(totals):
            if total < 0 and not self.external[account]:
                name = self.model.accounts[account]["name"]
                out.append(("no_negative_internal", f"account `{name}` is at {format_money(total, self.model.scale)}"))
        return out

    def _explain(self, name: str, view: View) -> str:
        """`expr` is false, with the values of the terms it reads."""
        values = []
        for text, fn, kind in self.leaf_fns[name]:
            value = fn(view)
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
        local: list[list[tuple[int, int, str | None, str | None]] | None] = []
        block_violations: list[list[tuple[str, str]]] = []
        block_balances: list[tuple[int, ...]] = []
        phases: dict[int, set[int]] = {s.index: set() for s in self.model.sites}
        reached: set[int] = set()
        fired: set[str] = set()
        shared_check = self.bounds.agreements > 1

        def intern(block: State) -> int:
            found = block_id.get(block)
            if found is not None:
                return found
            bid = len(blocks)
            block_id[block] = bid
            blocks.append(block)
            local.append(None)
            block_balances.append(block[lay.balances : lay.balances + lay.accounts])
            block_violations.append(self._block_violations(block, include_global=not shared_check))
            reached.add(block[0])
            for s in range(lay.sites):
                phases[s].add(block[lay.phase + s])
            return bid

        def moves_of(bid: int) -> list[tuple[int, int, str | None, str | None]]:
            cached = local[bid]
            if cached is None:
                cached = [
                    (intern(new), cost, edge, move.name if move.kind == "command" else None)
                    for move, new, cost, edge in self.local_moves(blocks[bid])
                ]
                local[bid] = cached
            return cached

        states: list[tuple[int, ...]] = []
        parents: list[int] = []
        depths: list[int] = []
        index: dict[tuple[int, ...], int] = {}
        violations: dict[str, Violation] = {}
        wanted = {name for name, _ in self.invariants} | {"money_conserved", "no_negative_internal", "effect_max_calls"}
        queue: deque[int] = deque()
        edges = 0
        bound_hit: str | None = None
        max_states = self.bounds.max_states
        max_depth_bound = self.bounds.max_depth

        def check(sid: int, state: tuple[int, ...]) -> None:
            ids = state[1:]
            for bid in ids:
                for name, why in block_violations[bid]:
                    if name in wanted:
                        wanted.discard(name)
                        violations[name] = Violation(name, sid, why)
            if shared_check and ("money_conserved" in wanted or "no_negative_internal" in wanted):
                totals = [sum(col) for col in zip(*(block_balances[b] for b in ids), strict=True)]
                for name, why in self._global_violations(totals):
                    if name in wanted:
                        wanted.discard(name)
                        violations[name] = Violation(name, sid, why)

        def add(state: tuple[int, ...], parent: int, depth: int) -> int:
            sid = len(states)
            index[state] = sid
            states.append(state)
            parents.append(parent)
            depths.append(depth)
            if wanted:
                check(sid, state)
            queue.append(sid)
            return sid

        for flat in self.initial_states():
            add(self._compact(flat, intern), -1, 0)
        max_depth = 0
        while queue:
            sid = queue.popleft()
            depth = depths[sid]
            if depth >= max_depth_bound:
                bound_hit = bound_hit or "max_depth"
                continue
            state = states[sid]
            faults = state[0]
            ids = state[1:]
            successors: list[tuple[int, ...]] = []
            for position, bid in enumerate(ids):
                for new_bid, cost, edge, tid in moves_of(bid):
                    if faults + cost > max_faults:
                        continue
                    if tid is not None:
                        fired.add(tid)
                    new_ids = list(ids)
                    new_ids[position] = new_bid
                    new_ids.sort()
                    succ = (faults + cost, *new_ids)
                    if edge is not None and edge not in violations:
                        target = index.get(succ)
                        if target is None:
                            target = add(succ, sid, depth + 1)
                        violations[edge] = Violation(edge, target, "a posting after a final state", edge=True)
                    successors.append(succ)
            edges += len(successors)
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
        self._blocks = blocks
        self._block_id = block_id
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
            exhausted=bound_hit is None,
            bound_hit=bound_hit,
            warnings=self.warnings,
        )

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


def _leaves(expr: Json) -> Iterator[Json]:
    """The terms an invariant reads: params, balances, counters, totals."""
    if expr["op"] in ("param", "balance", "applied", "fired", "total"):
        yield expr
    for arg in expr.get("args", []):
        yield from _leaves(arg)


def _mentions_now(expr: Json) -> bool:
    return expr["op"] == "now" or any(_mentions_now(a) for a in expr.get("args", []))
