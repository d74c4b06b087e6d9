"""Explicit-state breadth-first exploration of a policy composed with the runtime.

States are flat tuples of ints interned in a dict to ids, with parent
pointers, so the first violation found of each invariant is a shortest one.
A state is a global prefix (faults used) followed by one block per
agreement, sorted so that interchangeable agreements are explored once
(symmetry reduction). Moves are the environment's: any role issuing any
enabled command, approvals, the clock jumping to or just past a deadline,
the outbox worker dispatching effects, faults within the budget, and the
runtime's strategy after an uncertain outcome, with reconciliation outcomes
chosen by the environment.
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

State = tuple[int, ...]


@dataclass(frozen=True)
class Move:
    """One event of a path: who did what to which agreement, with which fault."""

    kind: str  # command | approve | clock | dispatch | fault | runtime | reconcile | abandon | compensate
    agreement: int
    actor: str
    name: str  # transition id, effect name, or clock delta
    fault: str | None = None
    site: int | None = None
    delta: int | None = None


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

    @property
    def ages(self) -> int:
        return 2

    @property
    def fired(self) -> int:
        return 2 + self.stamps

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
    def tokens(self) -> int:
        return self.compensated + self.sites

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
    states: list[State]
    parents: list[int]
    moves: list[Move | None]
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
    parts = [int(amount * share) for share in shares]  # floor for non-negative amounts
    parts = [amount * s.numerator // s.denominator for s in shares]
    for index in range(amount - sum(parts)):
        parts[index % len(parts)] += 1
    return parts


class Explorer:
    """Builds and explores the composed state space of one model."""

    def __init__(self, model: Model, bounds: Bounds) -> None:
        self.model = model
        self.bounds = bounds
        self.layout = Layout(
            stamps=len(model.stamps),
            transitions=len(model.transitions),
            sites=len(model.sites),
            approvals=len(model.approval_transitions),
            accounts=len(model.accounts),
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
        self.caps = [
            (max(model.stamp_offsets[i]) + 1) if model.stamp_offsets[i] else 1 for i in range(len(model.stamps))
        ]
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
            for i in range(lay.stamps):
                block[lay.ages + i] = -1
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

    def view(self, block: State) -> View:
        lay = self.layout
        ages = block[lay.ages : lay.ages + lay.stamps]
        return View(
            ctrl=block[0],
            p=self.model.param_choices[block[1]],
            stamps=tuple(None if a < 0 else -a for a in ages),
            fired=block[lay.fired : lay.fired + lay.transitions],
            bal=block[lay.balances : lay.balances + lay.accounts],
            sapp=tuple(block[lay.applied + i] + 0 for i in range(lay.sites)),
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
        """(move, successor, edge violation or None) for every enabled move."""
        head, blocks = self.split(state)
        faults = head[0]
        for index, block in enumerate(blocks):
            view = self.view(block)
            yield from self._commands(head, blocks, index, block, view)
            yield from self._approvals(head, blocks, index, block)
            yield from self._effects(head, blocks, index, block, faults)
        yield from self._clock(head, blocks)

    def _replace(self, head: tuple[int, ...], blocks: list[State], index: int, block: list[int]) -> State:
        new_blocks = list(blocks)
        new_blocks[index] = tuple(block)
        return self.canonical(head, new_blocks)

    def _commands(
        self, head: tuple[int, ...], blocks: list[State], index: int, block: State, view: View
    ) -> Iterator[tuple[Move, State, str | None]]:
        lay = self.layout
        ctrl = block[0]
        for t, sources in enumerate(self.sources):
            if ctrl not in sources:
                continue
            slot = self.approval_slot.get(t)
            if slot is not None and not block[lay.tokens + slot] & 1:
                continue
            if not self.guards[t](view):
                continue
            busy = [s for s in self.sites_of[t] if not self._idle(block, s)]
            if busy:
                if not self.reentry_warned:
                    self.reentry_warned = True
                    self.warnings.append(
                        f"transition `{self.model.transitions[t]['id']}` can fire again while its effect is in flight; "
                        "those re-entries were not explored"
                    )
                continue
            refused = False
            for s in self.sites_of[t]:
                site = self.model.sites[s]
                amount_fn = self.site_amount[s]
                if site.ceiling is not None and amount_fn is not None and amount_fn(view) > site.ceiling:
                    refused = True
            if refused:
                continue
            new = list(block)
            new[0] = self.targets[t]
            for stamp in self.stamp_sets[t]:
                new[lay.ages + stamp] = 0
            new[lay.fired + t] += 1
            for s in self.sites_of[t]:
                new[lay.phase + s] = Phase.PREPARED
                new[lay.happened + s] = 0
            if slot is not None:
                new[lay.tokens + slot] = 2  # consumed: approved(t) holds from now on
            new[lay.reached] |= 1 << self.targets[t]
            for amount_fn, source, rule in self.postings[t]:
                amount = amount_fn(view)
                for account, delta in self._posting(view, amount, source, rule):
                    new[lay.balances + account] += delta
            edge = None
            if self.final[ctrl] and self.postings[t]:
                edge = "no_posting_after_final"
            move = Move("command", index, self.first_role[t], self.model.transitions[t]["id"])
            yield move, self._replace(head, blocks, index, new), edge

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

    def _approvals(
        self, head: tuple[int, ...], blocks: list[State], index: int, block: State
    ) -> Iterator[tuple[Move, State, str | None]]:
        lay = self.layout
        for t, slot in self.approval_slot.items():
            if block[0] in self.sources[t] and not block[lay.tokens + slot] & 1:
                new = list(block)
                new[lay.tokens + slot] |= 1
                move = Move("approve", index, self.approver[t], self.model.transitions[t]["id"])
                yield move, self._replace(head, blocks, index, new), None

    def _effects(
        self, head: tuple[int, ...], blocks: list[State], index: int, block: State, faults: int
    ) -> Iterator[tuple[Move, State, str | None]]:
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
                new[lay.happened + s] = 1

            if phase == Phase.PREPARED:
                new = list(block)
                apply(new)
                new[lay.phase + s] = Phase.ACKNOWLEDGED
                yield (
                    Move("dispatch", index, "worker", site.effect, site=s),
                    self._replace(head, blocks, index, new),
                    None,
                )
                if faults < self.bounds.faults:
                    fault_head = (faults + 1,)
                    for fault in FAULTS:
                        new = list(block)
                        if fault == "lost_response":
                            apply(new)
                        new[lay.phase + s] = Phase.FAILED if fault == "provider_error" else Phase.UNCERTAIN
                        if fault == "provider_error" or ON_FAILED.get(site.strategy) is None:
                            self._compensate_earlier(new, site)
                        move = Move("fault", index, "worker", site.effect, fault=fault, site=s)
                        yield move, self._replace(fault_head, blocks, index, new), None
            elif phase == Phase.UNCERTAIN:
                new = list(block)
                new[lay.phase + s] = ON_UNCERTAIN[site.strategy]
                if new[lay.phase + s] == Phase.ABANDONED_UNCERTAIN:
                    self._compensate_earlier(new, site)
                yield (
                    Move("runtime", index, "runtime", site.effect, site=s),
                    self._replace(head, blocks, index, new),
                    None,
                )
            elif phase == Phase.FAILED:
                after = ON_FAILED[site.strategy]
                if after is not None:
                    new = list(block)
                    new[lay.phase + s] = after
                    yield (
                        Move("runtime", index, "runtime", site.effect, site=s),
                        self._replace(head, blocks, index, new),
                        None,
                    )
            elif phase == Phase.NEEDS_RECONCILIATION:
                new = list(block)
                new[lay.phase + s] = Phase.RECONCILED_RECOVERED if happened else Phase.RECONCILED_NOT_OCCURRED
                yield (
                    Move("reconcile", index, "operator", site.effect, site=s),
                    self._replace(head, blocks, index, new),
                    None,
                )
                new = list(block)
                new[lay.phase + s] = Phase.ABANDONED_UNCERTAIN
                self._compensate_earlier(new, site)
                yield (
                    Move("abandon", index, "operator", site.effect, site=s),
                    self._replace(head, blocks, index, new),
                    None,
                )
            elif phase == Phase.RECONCILED_NOT_OCCURRED:
                new = list(block)
                new[lay.phase + s] = Phase.PREPARED
                yield (
                    Move("runtime", index, "runtime", site.effect, site=s),
                    self._replace(head, blocks, index, new),
                    None,
                )
            elif phase == Phase.COMPENSATION_REQUIRED:
                new = list(block)
                if happened:
                    new[lay.compensated + s] += 1
                new[lay.phase + s] = Phase.COMPENSATED
                yield (
                    Move("compensate", index, "worker", site.compensation or site.effect, site=s),
                    self._replace(head, blocks, index, new),
                    None,
                )

    def _compensate_earlier(self, new: list[int], site: Any) -> None:
        """A later step failed: earlier effects of the same transition that
        happened and declare `compensate with E` now need E."""
        lay = self.layout
        for s in self.sites_of[site.transition]:
            if s >= site.index:
                break
            other = self.model.sites[s]
            if other.strategy == "compensate" and new[lay.happened + s] and new[lay.phase + s] in TERMINAL:
                new[lay.phase + s] = Phase.COMPENSATION_REQUIRED

    def _clock(self, head: tuple[int, ...], blocks: list[State]) -> Iterator[tuple[Move, State, str | None]]:
        lay = self.layout
        deltas: set[int] = set()
        for block in blocks:
            for stamp in range(lay.stamps):
                age = block[lay.ages + stamp]
                if age < 0:
                    continue
                for offset in self.model.stamp_offsets[stamp]:
                    if age < offset:
                        deltas.add(offset - age)
                    if age <= offset:
                        deltas.add(offset - age + 1)
        for delta in sorted(deltas):
            new_blocks = []
            for block in blocks:
                new = list(block)
                for stamp in range(lay.stamps):
                    age = new[lay.ages + stamp]
                    if age >= 0:
                        new[lay.ages + stamp] = min(age + delta, self.caps[stamp])
                new_blocks.append(tuple(new))
            yield Move("clock", -1, "clock", f"+{delta}s", delta=delta), self.canonical(head, new_blocks), None

    # -- invariants ----------------------------------------------------------------

    def check_state(self, state: State) -> list[tuple[str, str]]:
        """Invariants violated in `state`: (name, explanation)."""
        _, blocks = self.split(state)
        out: list[tuple[str, str]] = []
        lay = self.layout
        totals = [0] * lay.accounts
        for block in blocks:
            view = self.view(block)
            for name, fn in self.invariants:
                if not fn(view):
                    out.append((name, self._explain(name, view)))
            for account in range(lay.accounts):
                totals[account] += block[lay.balances + account]
            for effect, spec in self.model.effects.items():
                limit = spec.get("max_calls")
                if limit is not None:
                    count = self.effect_applications(block, effect)
                    if count > limit:
                        out.append(("effect_max_calls", f"`{effect}` applied {count} times, max_calls {limit}"))
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
        states: list[State] = []
        parents: list[int] = []
        moves: list[Move | None] = []
        depths: list[int] = []
        index: dict[State, int] = {}
        violations: dict[str, Violation] = {}
        fired: set[str] = set()
        phases: dict[int, set[int]] = {s.index: set() for s in self.model.sites}
        reached: set[int] = set()
        queue: deque[int] = deque()
        edges = 0
        bound_hit: str | None = None
        lay = self.layout

        def record(state: State, parent: int, move: Move | None, depth: int) -> int:
            sid = len(states)
            index[state] = sid
            states.append(state)
            parents.append(parent)
            moves.append(move)
            depths.append(depth)
            for name, why in self.check_state(state):
                if name not in violations:
                    violations[name] = Violation(name, sid, why)
            _, blocks = self.split(state)
            for block in blocks:
                reached.add(block[0])
                for s in range(lay.sites):
                    phases[s].add(block[lay.phase + s])
            queue.append(sid)
            return sid

        for state in self.initial_states():
            record(state, -1, None, 0)
        max_depth = 0
        while queue:
            sid = queue.popleft()
            depth = depths[sid]
            if depth >= self.bounds.max_depth:
                bound_hit = bound_hit or "max_depth"
                continue
            for move, succ, edge in self.successors(states[sid]):
                edges += 1
                if move.kind == "command":
                    fired.add(move.name)
                if edge is not None and edge not in violations:
                    target = index.get(succ)
                    if target is None:
                        if len(states) >= self.bounds.max_states:
                            bound_hit = "max_states"
                            continue
                        target = record(succ, sid, move, depth + 1)
                    violations[edge] = Violation(edge, target, "a posting after a final state", edge=True)
                if succ in index:
                    continue
                if len(states) >= self.bounds.max_states:
                    bound_hit = "max_states"
                    break
                record(succ, sid, move, depth + 1)
                max_depth = max(max_depth, depth + 1)
            if progress is not None and len(states) % 50_000 < 8:
                progress(len(states), edges, depth)
            if bound_hit == "max_states":
                break
        return ExplorationResult(
            states=states,
            parents=parents,
            moves=moves,
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
