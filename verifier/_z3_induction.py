"""k-induction over one agreement's symbolic transition relation.

The relation is built from `model.json` alone. A state is the control
state, one counter per (transition, source state) edge (`fired(t)` is their
sum), the balances, `reached` flags and `approved` flags; params are
symbolic within their ranges and shared by all steps. A step is one commit:
the source state matches, the guard holds, no effect amount is above its
ceiling, and the postings move money with the exact split arithmetic. Every
other move of the composed model (clock, approvals, effect delivery, faults)
leaves these variables alone, and invariants are per agreement, so the
relation over-approximates every agreement under any bound. What is not
modelled is weakened, never guessed: a guard's time comparison, text test
or effect counter becomes a free boolean, so the relation allows more
steps than the runtime does, which keeps every proof sound. Invariants that
read the effect protocol or time are not attempted.

Lemmas strengthen the induction. Each candidate lemma (flow conservation
through the state graph, each transition at most once when the graph is
acyclic, reached/approved as functions of the counters, balances as sums of
postings) is kept only if z3 proves it inductive (Houdini: drop whatever
fails, repeat), so assuming them in the step case is sound.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import networkx as nx  # type: ignore[import-untyped]  # no stubs; used for graph facts only
import z3

from pactwright.verifier._z3_terms import (
    Encoder,
    Num,
    Opaque,
    ParamSpace,
    Text,
    TextLit,
    Time,
    reads_effects,
    reads_state,
    reads_time,
    split,
)
from pactwright.verifier._z3_terms import solver as make_solver
from pactwright.verifier.model import Json, Model


@dataclass
class SymState:
    """One agreement's variables at one step."""

    ctrl: Any
    edges: dict[tuple[int, int], Any]  # (transition, source state) -> commits along that edge
    bal: list[Any]
    reached: list[Any]
    approved: dict[int, Any]  # approval transition -> consumed

    def fired(self, transition: int) -> Any:
        terms = [v for (t, _), v in self.edges.items() if t == transition]
        return z3.Sum(terms) if terms else z3.IntVal(0)


class StateEnv:
    """Leaves of an expression over one symbolic state."""

    def __init__(self, machine: Machine, state: SymState, fresh: Callable[[], Any] | None = None) -> None:
        self.machine = machine
        self.model = machine.model
        self.state = state
        self.encoder = Encoder(self.model, self, fresh)

    def param(self, name: str) -> Num | Text | TextLit:
        return self.machine.space.values[name]

    def balance(self, name: str) -> Num:
        return Num(self.state.bal[self.model.account_index[name]], 1)

    def fired(self, name: str) -> Num:
        return Num(self.state.fired(self.model.transition_index[name]), 1)

    def effect_applied(self, name: str) -> Num:
        raise Opaque(f"applied({name}) belongs to the effect protocol, which this relation does not model")

    def total(self, name: str) -> Num:
        raise Opaque(f"total({name}) belongs to the effect protocol, which this relation does not model")

    def reached(self, name: str) -> Any:
        return self.state.reached[self.model.states.index(name)]

    def approved(self, name: str) -> Any:
        index = self.model.transition_index[name]
        return self.state.approved.get(index, z3.BoolVal(False))

    def final(self) -> Any:
        return (
            z3.Or(*[self.state.ctrl == f for f in sorted(self.model.final)]) if self.model.final else z3.BoolVal(False)
        )

    def stamp(self, name: str) -> Time:
        raise Opaque("time is abstracted in the transition relation")

    def now(self) -> Time:
        raise Opaque("time is abstracted in the transition relation")


@dataclass
class Outcome:
    proved: bool
    text: str


@dataclass
class _Lemma:
    group: str
    make: Callable[[SymState], Any]


@dataclass
class _Houdini:
    kept: list[_Lemma] = field(default_factory=list)
    dropped: list[str] = field(default_factory=list)  # groups with a conjunct not proved inductive


class Machine:
    """The symbolic relation of one model, with its proved lemmas (computed once)."""

    def __init__(self, model: Model, timeout_ms: int) -> None:
        self.model = model
        self.timeout_ms = timeout_ms
        self.space = ParamSpace(model, "ki")
        self.states = list(range(len(model.states)))
        self.edges: list[tuple[int, int]] = [
            (t, model.states.index(source))
            for t, transition in enumerate(model.transitions)
            for source in sorted(set(transition["from"]))
        ]
        self.targets = [model.states.index(t["to"]) for t in model.transitions]
        graph: Any = nx.DiGraph()
        graph.add_nodes_from(self.states)
        graph.add_edges_from((source, self.targets[t]) for t, source in self.edges)
        self.acyclic = bool(nx.is_directed_acyclic_graph(graph))
        self.below = {s: frozenset(nx.descendants(graph, s)) | {s} for s in self.states}
        self.amounts_from_params = all(not reads_state(p["amount"]) for t in model.transitions for p in t["postings"])
        self._fresh = itertools.count()
        self._lemmas: _Houdini | None = None
        self._live: str | bool | None = False  # False: not checked yet

    # -- states and steps ------------------------------------------------------------------

    def state(self, tag: str) -> SymState:
        model = self.model
        return SymState(
            ctrl=z3.Int(f"{tag}.ctrl"),
            edges={(t, s): z3.Int(f"{tag}.n.{t}.{s}") for t, s in self.edges},
            bal=[z3.Int(f"{tag}.bal.{a['name']}") for a in model.accounts],
            reached=[z3.Bool(f"{tag}.reached.{name}") for name in model.states],
            approved={t: z3.Bool(f"{tag}.approved.{t}") for t in model.approval_transitions},
        )

    def initial(self, s: SymState) -> Any:
        init = self.model.initial
        return z3.And(
            s.ctrl == init,
            *[v == 0 for v in s.edges.values()],
            *[b == 0 for b in s.bal],
            *[r == (i == init) for i, r in enumerate(s.reached)],
            *[z3.Not(a) for a in s.approved.values()],
        )

    def fresh(self, tag: str) -> Callable[[], Any]:
        return lambda: z3.Bool(f"{tag}.free.{next(self._fresh)}")

    def step(self, s: SymState, n: SymState, tag: str) -> Any:
        """One commit from `s` to `n`: a disjunction over the edges of the state graph."""
        env = StateEnv(self, s, self.fresh(tag))
        options = []
        for t, source in self.edges:
            transition = self.model.transitions[t]
            target = self.targets[t]
            parts = [s.ctrl == source, n.ctrl == target]
            if transition["guard"] is not None:
                parts.append(env.encoder.boolean(transition["guard"]))
            parts.extend(self._ceilings(env, t))
            for key, var in s.edges.items():
                parts.append(n.edges[key] == (var + 1 if key == (t, source) else var))
            parts.extend(self._balances(env, s, n, t))
            for i, flag in enumerate(s.reached):
                parts.append(n.reached[i] == (z3.BoolVal(True) if i == target else flag))
            for a, flag in s.approved.items():
                parts.append(n.approved[a] == (z3.BoolVal(True) if a == t else flag))
            options.append(z3.And(*parts))
        return z3.Or(*options) if options else z3.BoolVal(False)

    def _ceilings(self, env: StateEnv, t: int) -> Iterator[Any]:
        """The runtime refuses a command whose effect amount is above the ceiling."""
        for site in self.model.sites:
            if site.transition != t or site.ceiling is None or site.amount is None:
                continue
            try:
                amount = env.encoder.number(site.amount)
            except Opaque:
                continue  # not modelled: allowing the step over-approximates
            yield amount.term <= site.ceiling * amount.den

    def _balances(self, env: StateEnv, s: SymState, n: SymState, t: int) -> list[Any]:
        deltas: list[Any] = [z3.IntVal(0)] * len(self.model.accounts)
        free: set[int] = set()
        for posting in self.model.transitions[t]["postings"]:
            try:
                shares = split(env.encoder, self.space, posting)
            except Opaque:
                rule = posting["rule"]
                touched = [posting["source"], rule.get("to")] + [p["to"] for p in rule.get("portions", [])]
                free.update(self.model.account_index[a] for a in touched if a is not None)
                continue
            for account, delta in shares.deltas():
                index = self.model.account_index[account]
                deltas[index] = deltas[index] + delta
        return [n.bal[a] == s.bal[a] + deltas[a] for a in range(len(deltas)) if a not in free]

    # -- lemmas ------------------------------------------------------------------------------

    def candidates(self) -> list[_Lemma]:
        model = self.model
        out: list[_Lemma] = [_Lemma("control state in range", self._in_range)]
        out.extend(_Lemma("counters non-negative", partial(self._non_negative, key=key)) for key in self.edges)
        out.extend(_Lemma("flow conservation", partial(self._flow, state=state)) for state in self.states)
        if self.acyclic:
            once = "each transition fires at most once (acyclic)"
            out.extend(_Lemma(once, partial(self._once, t=t)) for t in range(len(model.transitions)))
        out.extend(_Lemma("reached(S) follows the counters", partial(self._reached, state=s)) for s in self.states)
        out.extend(
            _Lemma("approved(T) follows the counters", partial(self._approved, t=t)) for t in model.approval_transitions
        )
        nets = self._nets() if self.amounts_from_params else None
        if nets is not None:
            out.extend(
                _Lemma("balances are sums of postings", partial(self._balance, account=account, nets=nets))
                for account in range(len(model.accounts))
            )
        return out

    def _in_range(self, s: SymState) -> Any:
        return z3.And(s.ctrl >= 0, s.ctrl < len(self.model.states))

    def _non_negative(self, s: SymState, key: tuple[int, int]) -> Any:
        return s.edges[key] >= 0

    def _approved(self, s: SymState, t: int) -> Any:
        return s.approved[t] == (s.fired(t) >= 1)

    def _balance(self, s: SymState, account: int, nets: list[list[Any]]) -> Any:
        return s.bal[account] == self._posted(s, nets, account)

    def _flow(self, s: SymState, state: int) -> Any:
        """Commits into a state, minus commits out of it, is 1 exactly where the agreement is."""
        into = [s.fired(t) for t in range(len(self.model.transitions)) if self.targets[t] == state]
        out = [v for (t, source), v in s.edges.items() if source == state]
        start = 1 if state == self.model.initial else 0
        return z3.Sum([*into, z3.IntVal(start)]) - z3.Sum([*out, z3.IntVal(0)]) == z3.If(s.ctrl == state, 1, 0)

    def _once(self, s: SymState, t: int) -> Any:
        below = self.below[self.targets[t]]
        return z3.And(s.fired(t) <= 1, z3.Implies(s.fired(t) >= 1, z3.Or(*[s.ctrl == b for b in sorted(below)])))

    def _reached(self, s: SymState, state: int) -> Any:
        into = [s.fired(t) >= 1 for t in range(len(self.model.transitions)) if self.targets[t] == state]
        return s.reached[state] == z3.Or(z3.BoolVal(state == self.model.initial), *into)

    def _nets(self) -> list[list[Any]] | None:
        """Each transition's net posting to each account, as terms over the params."""
        empty = self.state("nets")
        env = StateEnv(self, empty)
        nets: list[list[Any]] = []
        for transition in self.model.transitions:
            net: list[Any] = [z3.IntVal(0)] * len(self.model.accounts)
            for posting in transition["postings"]:
                try:
                    shares = split(env.encoder, self.space, posting)
                except Opaque:
                    return None
                for account, delta in shares.deltas():
                    index = self.model.account_index[account]
                    net[index] = net[index] + delta
            nets.append(net)
        return nets

    def _posted(self, s: SymState, nets: list[list[Any]], account: int) -> Any:
        terms = []
        for t, net in enumerate(nets):
            delta = z3.simplify(net[account])
            if z3.is_int_value(delta) and delta.as_long() == 0:
                continue
            # With each transition at most once, If keeps the sum linear.
            terms.append(z3.If(s.fired(t) >= 1, delta, 0) if self.acyclic else s.fired(t) * delta)
        return z3.Sum(terms) if terms else z3.IntVal(0)

    def lemmas(self) -> _Houdini:
        """The largest subset of the candidate lemmas z3 proves jointly inductive."""
        if self._lemmas is not None:
            return self._lemmas
        found = _Houdini(kept=self.candidates())
        s0, s1 = self.state("h0"), self.state("h1")
        transition = self.step(s0, s1, "h")
        self._prune(found, lambda kept: [self.initial(s0)], s0)
        self._prune(found, lambda kept: [*[lemma.make(s0) for lemma in kept], transition], s1)
        self._lemmas = found
        return found

    def _prune(self, found: _Houdini, assume: Callable[[list[_Lemma]], list[Any]], target: SymState) -> None:
        """Drop lemmas that do not follow from `assume(kept)` at `target` until none fails."""
        while found.kept:
            check = make_solver(self.timeout_ms)
            check.add(*self.space.constraints, *assume(found.kept))
            kept = self._drop_failing(check, found, [(lemma, lemma.make(target)) for lemma in found.kept])
            if len(kept) == len(found.kept):
                return
            found.kept = kept

    def _drop_failing(self, check: Any, found: _Houdini, goals: list[tuple[_Lemma, Any]]) -> list[_Lemma]:
        """Keep the lemmas whose negation is unsat under `check`'s assertions."""
        check.push()
        check.add(z3.Not(z3.And(*[goal for _, goal in goals])))
        status = check.check()
        if status == z3.unsat:
            check.pop()
            return [lemma for lemma, _ in goals]
        if status == z3.sat:
            model = check.model()
            failing = [
                i for i, (_, goal) in enumerate(goals) if not z3.is_true(model.eval(goal, model_completion=True))
            ]
            check.pop()
            if failing:
                found.dropped.extend(goals[i][0].group for i in failing)
                return [lemma for i, (lemma, _) in enumerate(goals) if i not in failing]
        else:
            check.pop()
        # unknown (or a model that refutes nothing): decide lemma by lemma, dropping unknowns
        kept = []
        for lemma, goal in goals:
            check.push()
            check.add(z3.Not(goal))
            if check.check() == z3.unsat:
                kept.append(lemma)
            else:
                found.dropped.append(lemma.group)
            check.pop()
        return kept

    # -- invariants --------------------------------------------------------------------------

    def prove(self, expr: Json, max_k: int) -> Outcome:
        """k-induction for k = 1..max_k; proved only when base and step are both unsat."""
        if reads_effects(self.model, expr):
            return Outcome(False, "k-induction not attempted: effect protocol")
        if reads_time(expr):
            return Outcome(False, "k-induction not attempted: the invariant reads time, which the relation abstracts")
        try:
            self._property(self.state("probe"), expr)
        except Opaque as why:
            return Outcome(False, f"k-induction not attempted: {why}")
        try:
            return self._prove(expr, max_k)
        except (Opaque, z3.Z3Exception) as why:
            return Outcome(False, f"k-induction not attempted: {why}")

    def _prove(self, expr: Json, max_k: int) -> Outcome:
        lemmas = self.lemmas().kept
        if self._live is False:
            self._live = self.live(lemmas)
        live = self._live
        if isinstance(live, str):
            return Outcome(False, f"k-induction: {live}; nothing is claimed")
        path = [self.state("b0")]
        base = make_solver(self.timeout_ms)
        base.add(*self.space.constraints, self.initial(path[0]))
        for k in range(1, max_k + 1):
            # Base: no path of k-1 commits from the initial state violates the invariant.
            last = path[-1]
            base.push()
            base.add(*[lemma.make(last) for lemma in lemmas], z3.Not(self._property(last, expr)))
            status = base.check()
            base.pop()
            if status == z3.sat:
                return Outcome(
                    False,
                    f"k-induction: base case fails after {k - 1} commits in the symbolic relation "
                    "(time guards ignored, so the path may not be real)",
                )
            if status != z3.unsat:
                return Outcome(False, f"k-induction: base case unknown at k={k} ({base.reason_unknown()})")
            status, reason = self._step_case(expr, k, lemmas)
            if status == z3.unsat:
                names = list(dict.fromkeys(lemma.group for lemma in lemmas))
                dropped = sorted(set(self.lemmas().dropped) - set(names))
                return Outcome(
                    True,
                    f"k-induction (k={k}) with lemmas: {', '.join(names) or 'none'}"
                    + (f" (not inductive, dropped: {', '.join(dropped)})" if dropped else "")
                    + "; guards' time tests, approval tokens and effect delivery abstracted",
                )
            if status != z3.sat:
                return Outcome(False, f"k-induction: step case unknown after k={k} ({reason})")
            following = self.state(f"b{k}")
            base.add(self.step(last, following, f"b{k}"))
            path.append(following)
        return Outcome(False, f"k-induction: step case not inductive up to k={max_k}")

    def live(self, lemmas: list[_Lemma]) -> str | None:
        """Why the step relation under the lemmas may be empty, or None when it is not.

        An empty relation would make every step case unsat; a proof then
        says nothing, so it is refused (a guard against an encoding bug).
        """
        if not self.edges:
            return None  # nothing ever fires: the base case alone decides
        s0, s1 = self.state("live0"), self.state("live1")
        check = make_solver(self.timeout_ms)
        check.add(*self.space.constraints, self.initial(s0), *[lemma.make(s0) for lemma in lemmas])
        check.add(self.step(s0, s1, "live"))
        status = check.check()
        if status == z3.sat:
            return None
        if status == z3.unsat:
            return "the symbolic relation allows no commit from the initial state"
        return f"whether the symbolic relation allows any commit is unknown ({check.reason_unknown()})"

    def _step_case(self, expr: Json, k: int, lemmas: list[_Lemma]) -> tuple[Any, str]:
        states = [self.state(f"s{i}") for i in range(k + 1)]
        check = make_solver(self.timeout_ms)
        check.add(*self.space.constraints)
        for i, state in enumerate(states):
            check.add(*[lemma.make(state) for lemma in lemmas])
            if i < k:
                check.add(self._property(state, expr), self.step(state, states[i + 1], f"s{i}"))
        check.add(z3.Not(self._property(states[k], expr)))
        status = check.check()
        return status, check.reason_unknown() if status == z3.unknown else ""

    def _property(self, state: SymState, expr: Json) -> Any:
        return StateEnv(self, state).encoder.boolean(expr)
