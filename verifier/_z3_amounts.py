"""Invariants that read money, checked for ALL param values in every reached abstract state.

The explorer runs each agreement with sampled param values. An agreement's
block minus its param choice and its balances is an abstract state; the
balances are not lost, because each commit applies its postings exactly
once, so balance(a) = sum over transitions of fired(t) x (net posting of t
to a), a linear function of the params whenever posting amounts read only
params. For each distinct abstract state the search reached, z3 looks for a
param value in range that falsifies the invariant there. A violating value
is minimized and then confirmed by exploring the model again with each
ranged param pinned to it; unconfirmed values are never reported.

"Proved for all values" is claimed only when, in addition, the search was
exhausted and no guard or ceiling refusal depends on a ranged param: then
every value reaches exactly the abstract states the samples reached.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

import z3

from pactwright.verifier._z3_terms import (
    Encoder,
    Num,
    Opaque,
    ParamSpace,
    Ranged,
    Text,
    TextLit,
    Time,
    reads_amounts,
    reads_state,
    split,
)
from pactwright.verifier._z3_terms import optimizer as make_optimizer
from pactwright.verifier._z3_terms import solver as make_solver
from pactwright.verifier.explorer import Bounds, ExplorationResult, Explorer
from pactwright.verifier.model import Json, Model, load_model

MAX_CONFIRMATIONS = 3  # candidate witnesses re-explored before giving up


def explore_at(model: Model, bounds: Bounds, samples: dict[str, str]) -> tuple[Explorer, ExplorationResult]:
    """Explore `model` with each named param's samples replaced by one value."""
    doc = copy.deepcopy(model.doc)
    for param in doc["params"]:
        if param["name"] in samples:
            param["samples"] = [samples[param["name"]]]
    explorer = Explorer(load_model(doc), bounds)
    return explorer, explorer.explore()


@dataclass(frozen=True)
class AbstractBlock:
    """What an invariant can read of one agreement, apart from params and balances."""

    ctrl: int
    texts: tuple[tuple[str, str], ...]
    zone: tuple[int, ...]  # the ages the agreement may have (see `zones.py`)
    fired: tuple[int, ...]
    applied: tuple[int, ...]
    approved: tuple[int, ...]
    reached: int
    compensated: tuple[int, ...] = ()  # per call site: how often its compensation was applied


class BlockEnv:
    """Leaves in one abstract block: concrete counters and time, symbolic params and balances."""

    def __init__(
        self, checker: AmountChecker, block: AbstractBlock, space: ParamSpace, ages: tuple[int, ...] = ()
    ) -> None:
        self.checker = checker
        self.model = checker.model
        self.block = block
        self.space = space
        self.ages = ages  # a point of one cell of the block's zone
        self.encoder = Encoder(self.model, self)

    def param(self, name: str) -> Num | Text | TextLit:
        return self.space.values[name]

    def balance(self, name: str) -> Num:
        account = self.model.account_index[name]
        term: Any = z3.IntVal(0)
        for t_index, count in enumerate(self.block.fired):
            if count:
                term = term + count * self.checker.nets[t_index][account]
        return Num(term, 1)

    def fired(self, name: str) -> Num:
        return Num(z3.IntVal(self.block.fired[self.model.transition_index[name]]), 1)

    def effect_applied(self, name: str) -> Num:
        count = sum(self.block.applied[s.index] for s in self.model.sites if s.effect == name)
        # A compensation is an application of the compensating effect too.
        count += sum(self.block.compensated[s.index] for s in self.model.sites if s.compensation == name)
        return Num(z3.IntVal(count), 1)

    def total(self, name: str) -> Num:
        term: Any = z3.IntVal(0)
        den = 1
        for site in self.model.sites:
            count = self.block.applied[site.index] if site.effect == name else 0
            if site.compensation == name:
                count += self.block.compensated[site.index]  # it carries the amount of the call it undoes
            if site.amount is None or not count:
                continue
            amount = self.encoder.number(site.amount)
            term = term * amount.den + count * amount.term * den
            den *= amount.den
        return Num(term, den)

    def reached(self, name: str) -> Any:
        return z3.BoolVal(bool(self.block.reached >> self.model.states.index(name) & 1))

    def approved(self, name: str) -> Any:
        index = self.model.transition_index[name]
        if index not in self.model.approval_transitions:
            return z3.BoolVal(False)
        return z3.BoolVal(bool(self.block.approved[self.model.approval_transitions.index(index)]))

    def final(self) -> Any:
        return z3.BoolVal(self.block.ctrl in self.model.final)

    def stamp(self, name: str) -> Time:
        age = self.ages[self.model.stamp_index[name]]
        return Time(None if age < 0 else -age)

    def now(self) -> Time:
        return Time(0)


class AmountChecker:
    """Runs the amount search of `proofs.upgrade` over one exploration."""

    def __init__(self, model: Model, explorer: Explorer, result: ExplorationResult, timeout_ms: int) -> None:
        self.model = model
        self.explorer = explorer
        self.result = result
        self.timeout_ms = timeout_ms
        self.space = ParamSpace(model, "param")
        self.nets: list[list[Any]] = []
        self.blocked: str | None = None  # why balances cannot be written as sums of postings
        self._blocks: list[AbstractBlock] | None = None
        self._control: str | bool | None = False  # False: not computed yet

    # -- setup --------------------------------------------------------------------------------

    def _prepare_nets(self) -> None:
        env = BlockEnv(self, AbstractBlock(0, (), (), (), (), (), 0, ()), self.space)
        for transition in self.model.transitions:
            net: list[Any] = [z3.IntVal(0)] * len(self.model.accounts)
            for posting in transition["postings"]:
                if reads_state(posting["amount"]):
                    self.blocked = f"the amount of `{transition['id']}` reads the agreement's state"
                    return
                try:
                    shares = split(env.encoder, self.space, posting)
                except Opaque as why:
                    self.blocked = f"the split of `{transition['id']}` is not modelled ({why})"
                    return
                for account, delta in shares.deltas():
                    index = self.model.account_index[account]
                    net[index] = net[index] + delta
            self.nets.append([z3.simplify(term) for term in net])

    def abstract_blocks(self) -> list[AbstractBlock]:
        """Distinct abstract agreement blocks over every state the search reached."""
        if self._blocks is not None:
            return self._blocks
        lay = self.explorer.layout
        ids: set[int] = set()
        for state in self.result.states:
            ids.update(state[1:])
        texts = [i for i, p in enumerate(self.model.params) if p["type"] == "text"]
        found: set[AbstractBlock] = set()
        for bid in sorted(ids):
            block = self.explorer.expand((0, bid))[1:]
            choice = self.model.param_choices[block[1]]
            found.add(
                AbstractBlock(
                    ctrl=block[0],
                    texts=tuple((self.model.params[i]["name"], str(choice[i])) for i in texts),
                    zone=tuple(block[lay.zone : lay.zone + lay.zone_size]),
                    fired=tuple(block[lay.fired : lay.fired + lay.transitions]),
                    applied=tuple(block[lay.applied : lay.applied + lay.sites]),
                    approved=tuple(block[lay.tokens + i] >> 1 for i in range(lay.approvals)),
                    reached=block[lay.reached],
                    compensated=tuple(block[lay.compensated : lay.compensated + lay.sites]),
                )
            )
        self._blocks = sorted(found, key=_sort_key)
        return self._blocks

    def control_dependence(self) -> str | None:
        """Why the reachable abstract states may depend on a ranged param, or None."""
        if self._control is not False:
            return self._control  # type: ignore[return-value]
        reason: str | None = None
        for transition in self.model.transitions:
            if reads_amounts(self.model, transition["guard"]):
                reason = f"the guard of `{transition['id']}` reads amounts"
                break
        if reason is None:
            reason = self._refusal_dependence()
        if reason is None:
            reason = self._ceiling_dependence()
        self._control = reason
        return reason

    def _refusal_dependence(self) -> str | None:
        """A transfer whose amount is negative for some values is refused for those values only."""
        env = BlockEnv(self, AbstractBlock(0, (), (), (), (), (), 0, ()), self.space)
        for transition in self.model.transitions:
            for posting in transition["postings"]:
                if not reads_amounts(self.model, posting["amount"]):
                    continue
                why = f"the ledger refuses `{transition['id']}` for the values that make its amount negative"
                try:
                    amount = env.encoder.number(posting["amount"])
                except Opaque:
                    return why
                check = make_solver(self.timeout_ms)
                check.add(*self.space.constraints, amount.term < 0)
                if check.check() != z3.unsat:
                    return why
        return None

    def _ceiling_dependence(self) -> str | None:
        env = BlockEnv(self, AbstractBlock(0, (), (), (), (), (), 0, ()), self.space)
        for site in self.model.sites:
            if site.ceiling is None or site.amount is None or not reads_amounts(self.model, site.amount):
                continue
            why = f"the runtime refuses `{site.effect}` above its ceiling for some amounts"
            if reads_state(site.amount):
                return why
            try:
                amount = env.encoder.number(site.amount)
            except Opaque:
                return why
            check = make_solver(self.timeout_ms)
            check.add(*self.space.constraints, amount.term > site.ceiling * amount.den)
            if check.check() != z3.unsat:
                return why
        return None

    # -- per invariant ------------------------------------------------------------------------

    def run(self, entries: list[Json]) -> None:
        specs = {spec["name"]: spec for spec in self.model.invariants}
        wanted = [e for e in entries if reads_amounts(self.model, specs[e["name"]]["expr"])]
        if not wanted or not self.space.ranged:
            return
        self._prepare_nets()
        for entry in wanted:
            if self.blocked is not None:
                entry["amounts"] = f"not checked for all values: {self.blocked}"
                continue
            self.check(entry, specs[entry["name"]]["expr"])

    def check(self, entry: Json, expr: Json) -> None:
        formulas: dict[int, tuple[Any, AbstractBlock]] = {}
        blocks = self.abstract_blocks()
        dims = self.model.invariant_dims.get(entry["name"], ())
        zones = self.explorer.zones
        for block in blocks:
            space = ParamSpace(self.model, "param", text=dict(block.texts))
            # An invariant that reads time is checked in each cell of the block's zone.
            cells = zones.cells(block.zone, dims) if block.zone else iter([((), block.zone)])
            for _, zone in cells:
                env = BlockEnv(self, block, space, zones.point(zone) if zone else ())
                try:
                    bad = z3.simplify(z3.Not(env.encoder.boolean(expr)))
                except Opaque as why:
                    entry["amounts"] = f"not checked for all values: {why}"
                    return
                formulas.setdefault(bad.get_id(), (bad, block))
        violating: list[tuple[Any, Any]] = []  # (formula, a model of it)
        unknown: list[str] = []
        for bad, _ in formulas.values():
            check = make_solver(self.timeout_ms)
            check.add(*self.space.constraints, bad)
            status = check.check()
            if status == z3.sat:
                violating.append((bad, check.model()))
            elif status != z3.unsat:
                unknown.append(check.reason_unknown())
        if violating:
            mentioned: set[int] = set()
            for bad, _ in violating:
                mentioned |= _constants(bad)
            order = [r for r in self.space.ranged if r.var.get_id() in mentioned]
            order += [r for r in self.space.ranged if r.var.get_id() not in mentioned]
            smallest = [self._smallest(bad, found, order) for bad, found in violating]
            # Smallest overall only if every value reaches every state the samples reached,
            # no query was left unknown, and every minimization finished.
            exact = (
                not unknown
                and self.result.exhausted
                and self.control_dependence() is None
                and all(done for _, done in smallest)
            )
            self._confirm(entry, [values for values, _ in smallest], exact)
            return
        states = f"{len(blocks)} abstract state{'s' if len(blocks) != 1 else ''}"
        if unknown:
            entry["amounts"] = (
                f"unknown: z3 answered unknown ({unknown[0]}) in {len(unknown)} of {len(formulas)} checks; "
                "nothing is claimed"
            )
            return
        if entry["verdict"] == "violated":
            entry["amounts"] = (
                "z3 found no violating value in the abstract states reached, yet the search found a violation; "
                "the symbolic model may be incomplete here"
            )
            return
        limit = None if self.result.exhausted else f"the search stopped at the `{self.result.bound_hit}` bound"
        limit = limit or self.control_dependence()
        if limit is None:
            entry["amounts"] = "proved for all values in range (z3)"
            entry["method"] = (
                f"{entry['method']}; amounts: no violation for any {self.space.describe()} in the {states} reached (z3)"
            )
        else:
            entry["amounts"] = (
                f"no violation for any {self.space.describe()} in the {states} reached (z3); "
                f"not proved for all values: {limit}"
            )

    def _smallest(self, bad: Any, fallback: Any, order: list[Ranged]) -> tuple[dict[str, int], bool]:
        """Violating values of `bad`, lexicographically smallest in `order` when the second item is True."""
        opt = make_optimizer(self.timeout_ms)
        opt.add(*self.space.constraints, bad)
        for ranged in order:
            opt.minimize(ranged.var)
        done = opt.check() == z3.sat
        values = self.space.witness(opt.model() if done else fallback)
        return {r.name: values[r.name] for r in order}, done

    def _confirm(self, entry: Json, candidates: list[dict[str, int]], exact: bool) -> None:
        """Report the smallest candidate a fresh explicit-state search confirms, if any.

        With `exact`, the first candidate is the smallest violating value in
        the whole range; otherwise the text says what it is the smallest of.
        """
        ordered: list[dict[str, int]] = []
        for values in sorted(candidates, key=lambda v: tuple(v.values())):
            if values not in ordered:
                ordered.append(values)
        scale = self.model.scale
        ranged = {r.name: r for r in self.space.ranged}
        for attempt, values in enumerate(ordered[:MAX_CONFIRMATIONS]):
            samples = {name: ranged[name].sample_text(v) for name, v in values.items()}
            _, result = explore_at(self.model, self.explorer.bounds, samples)
            if entry["name"] not in result.violations:
                continue
            first = next(iter(values))
            shown = ", ".join(f"{n} = {ranged[n].display(v, scale)}" for n, v in values.items())
            if attempt > 0:
                smallest = "violating value (smaller candidates did not reproduce)"
            elif exact:
                smallest = "smallest violating value"
            else:
                smallest = "smallest violating value z3 found in the abstract states reached"
            entry["amount_witness"] = {
                "param": first,
                "value": samples[first],
                "text": ranged[first].display(values[first], scale),
                "params": samples,
            }
            entry["amounts"] = f"violated at {shown} (z3 {smallest}, confirmed by explicit-state search)"
            if entry["verdict"] == "violated":
                entry["method"] = f"{entry['method']}; {smallest} {shown} (z3, confirmed by explicit-state search)"
            else:
                entry["verdict"] = "violated"
                entry["method"] = (
                    f"z3 amount search over all values in range; {smallest} {shown} confirmed by explicit-state search"
                )
            return
        tried = "; ".join(
            ", ".join(f"{n} = {ranged[n].display(v, scale)}" for n, v in values.items())
            for values in ordered[:MAX_CONFIRMATIONS]
        )
        entry["amounts"] = (
            f"z3 found values violating it in an abstract state ({tried}), but explicit-state search at "
            "those values did not confirm a violation; not proved for all values"
        )


def _constants(expr: Any) -> set[int]:
    """Ids of the uninterpreted constants (variables) occurring in a z3 term."""
    seen: set[int] = set()
    out: set[int] = set()
    stack = [expr]
    while stack:
        node = stack.pop()
        if node.get_id() in seen:
            continue
        seen.add(node.get_id())
        if z3.is_const(node) and node.decl().kind() == z3.Z3_OP_UNINTERPRETED:
            out.add(node.get_id())
        stack.extend(node.children())
    return out


def _sort_key(block: AbstractBlock) -> tuple[Any, ...]:
    return (
        block.ctrl,
        block.fired,
        block.zone,
        block.applied,
        block.compensated,
        block.approved,
        block.reached,
        block.texts,
    )
