"""Counterexamples: shortest path, minimized, replayed, then described.

BFS gives a shortest path to the first state violating an invariant. The
path is minimized by dropping events while the same violation persists (a
no-op for a true shortest path, and a check that it is one), replayed
through `transitions.json` and the ledger programs, and only then turned
into numbered events with the state and balances after each step.
"""

from __future__ import annotations

from typing import Any

from pactwright.errors import VerifyError
from pactwright.money import format_duration, format_money
from pactwright.verifier._replay_outcomes import SitePhases
from pactwright.verifier.explorer import ExplorationResult, Explorer, Move, State
from pactwright.verifier.model import Json
from pactwright.verifier.protocol import PHASE_NAMES, Phase
from pactwright.verifier.replay import ReplayAgreement, Replayer
from pactwright.verifier.zones import INF, Dim


def _same(a: Move, b: Move) -> bool:
    return (a.kind, a.agreement, a.name, a.fault, a.site, a.delta, a.cell) == (
        b.kind,
        b.agreement,
        b.name,
        b.fault,
        b.site,
        b.delta,
        b.cell,
    )


def _timeline_clock(move: Move) -> bool:
    """A clock move of a concrete counterexample: time passes for every agreement."""
    return move.kind == "clock" and move.agreement < 0


def simulate(explorer: Explorer, start: State, moves: list[Move]) -> list[State] | None:
    """States along `moves` from `start` (agreements unsorted), or None if a move is not enabled.

    A concrete clock move (agreement -1, a delay in seconds) lets time pass
    for every agreement, symbolically: each zone loses its upper bounds.
    """
    states = [start]
    explorer.symmetry = False
    try:
        for move in moves:
            if _timeline_clock(move):
                states.append(explorer.all_later(states[-1]))
                continue
            if move.kind == "refused":
                # The runtime refuses it: the state stays as it was.
                if not any(_same(m, move) for _, m, _ in explorer.refusals(states[-1])):
                    return None
                states.append(states[-1])
                continue
            nxt = next((succ for m, succ, _ in explorer.successors(states[-1]) if _same(m, move)), None)
            if nxt is None:
                return None
            states.append(nxt)
    finally:
        explorer.symmetry = True
    return states


def violates(explorer: Explorer, states: list[State], invariant: str, moves: list[Move]) -> bool:
    if invariant == "funds_available":
        return bool(moves) and moves[-1].kind == "refused"
    if invariant == "no_posting_after_final":
        for before, move in zip(states, moves, strict=False):
            for m, _, edge in explorer.successors(before):
                if _same(m, move) and edge == invariant:
                    return True
        return False
    return any(name == invariant for name, _ in explorer.check_state(states[-1]))


def minimize(explorer: Explorer, start: State, moves: list[Move], invariant: str) -> list[Move]:
    """Drop events one at a time while the same invariant is still violated."""
    current = list(moves)
    changed = True
    while changed:
        changed = False
        for index in range(len(current)):
            candidate = current[:index] + current[index + 1 :]
            states = simulate(explorer, start, candidate)
            if states is not None and violates(explorer, states, invariant, candidate):
                current = candidate
                changed = True
                break
    return current


def shortest(explorer: Explorer, result: ExplorationResult, state_id: int) -> tuple[State, list[Move]]:
    """The BFS path to `state_id` as concrete moves with stable agreement numbers.

    Symmetry reduction reorders agreements from state to state; the path is
    re-simulated without it, choosing at each step the move whose successor
    is (up to that reordering) the next state of the BFS path.
    """
    path = explorer.path(result, state_id)
    start = explorer.expand(result.states[path[0]])
    current = start
    moves: list[Move] = []
    explorer.symmetry = False
    try:
        for target_id in path[1:]:
            target = result.states[target_id]
            for move, succ, _ in explorer.successors(current):
                if explorer.compact(succ) == target:
                    moves.append(move)
                    current = succ
                    break
            else:
                raise VerifyError("counterexample path cannot be re-simulated; this is a verifier bug", code="PW390")
    finally:
        explorer.symmetry = True
    return start, moves


def concretize(explorer: Explorer, start: State, moves: list[Move], invariant: str) -> list[Move]:
    """The path on one concrete timeline: each symbolic clock move becomes a delay in seconds.

    Exploration keeps, per agreement, the zone of ages its path allows; the
    path fixes only which cell of the zone each time-reading guard fired in
    (and, for an invariant that reads time, a cell where it fails). Those
    are difference constraints between the times of the events, solved here
    for the earliest times (Bellman-Ford). Agreements are laid out one after
    the other, the one that shows the violation last, so that time passing
    for one agreement never disturbs another's cells. Clock moves that turn
    out to need no delay are dropped. Raises PW390 when no timeline exists:
    that would be a verifier bug.
    """
    states = simulate(explorer, start, moves)
    if states is None:
        raise VerifyError("counterexample path cannot be re-simulated; this is a verifier bug", code="PW390")
    check = next((fn for name, fn in explorer.invariants if name == invariant), None)
    dims = explorer.model.invariant_dims.get(invariant, ())
    _, final_blocks = explorer.split(states[-1])
    last: int | None = None
    if check is not None and dims:
        last = next(
            (i for i, b in enumerate(final_blocks) if explorer.violating_cell(b, check, dims) is not None), None
        )
    involved = list(dict.fromkeys(m.agreement for m in moves))
    if len(involved) > 1:
        order = [a for a in involved if a != last] + [a for a in involved if a == last]
        moves = [m for a in order for m in moves if m.agreement == a]
        states = simulate(explorer, start, moves)
        if states is None:
            raise VerifyError("counterexample cannot be laid out on one timeline; this is a verifier bug", code="PW390")
    # Difference constraints T[a] - T[b] <= w over the event times; T[0] = 0 is the start.
    constraints: list[tuple[int, int, int]] = []

    def within(later: int, earlier: int, interval: tuple[int, int]) -> None:
        low, high = interval
        if high < INF:
            constraints.append((later, earlier, high))
        if low > -INF:
            constraints.append((earlier, later, -low))

    set_at: dict[tuple[int, int], int] = {}

    def place(index: int, agreement: int, dims: tuple[Dim, ...], key: tuple[int, ...]) -> None:
        for dim, position in zip(dims, key, strict=True):
            if position < 0:
                continue
            interval = dim.intervals()[position]
            if dim.kind == "age":
                within(index, set_at[(agreement, dim.stamp)], interval)
            else:
                within(set_at[(agreement, dim.stamp)], set_at[(agreement, dim.other)], interval)

    for index, move in enumerate(moves, start=1):
        if move.kind == "clock":
            constraints.append((index - 1, index, 0))
        else:
            constraints.extend(((index - 1, index, 0), (index, index - 1, 0)))
        if move.kind in ("command", "refused"):
            t = explorer.model.transition_index[move.name]
            if move.cell is not None:
                place(index, move.agreement, explorer.guard_dims[t], move.cell)
            if move.kind == "command":
                for stamp in explorer.stamp_sets[t]:
                    set_at[(move.agreement, stamp)] = index
    if invariant == "funds_not_stuck" and moves and moves[-1].kind == "clock":
        # Stuck "from some time on": the path ends at the first instant from which no command
        # of the agreement can commit any more (at the latest, past every deadline it compares with).
        earliest = _earliest(len(moves) + 1, constraints)
        agreement = moves[-1].agreement
        block = explorer.split(states[-1])[1][agreement]
        end = None if earliest is None else _stuck_from(explorer, block, agreement, earliest, set_at)
        if end is not None:
            constraints.append((0, len(moves), -end))
        else:
            for (owner, stamp), index in set_at.items():
                deadline = explorer.model.clock_maxima[stamp]
                if owner == agreement and 0 < deadline < INF:
                    constraints.append((index, len(moves), -deadline))
    times: list[int] | None = None
    if last is not None and check is not None:
        block = explorer.split(states[-1])[1][last]
        for key, zone in explorer.cells(block, dims):
            if key is None or check(explorer.view(block, zone)):
                continue
            before = len(constraints)
            place(len(moves), last, dims, key)
            times = _earliest(len(moves) + 1, constraints)
            if times is not None:
                break
            del constraints[before:]
    else:
        times = _earliest(len(moves) + 1, constraints)
    if times is None:
        raise VerifyError("counterexample has no concrete timeline; this is a verifier bug", code="PW390")
    out: list[Move] = []
    for index, move in enumerate(moves, start=1):
        if move.kind != "clock":
            out.append(move)
            continue
        delta = times[index] - times[index - 1]
        if delta > 0:
            out.append(Move("clock", -1, "clock", f"+{format_duration(delta)}", delta=delta))
    return out


def _stuck_from(
    explorer: Explorer, block: State, agreement: int, times: list[int], set_at: dict[tuple[int, int], int]
) -> int | None:
    """The earliest time (from the start) at which, and after which, no command of this
    agreement can commit, or None when the check cannot tell (then the caller waits out
    every deadline instead).

    Guards change truth only where an age crosses one of its points, so the candidates are
    the last event's time and each stamp's time plus each point; a time qualifies when no
    command commits there nor at any later candidate.
    """
    stamped = {stamp: times[index] for (owner, stamp), index in set_at.items() if owner == agreement}
    start = times[-2] if len(times) >= 2 else 0
    candidates = {start}
    for dims in explorer.guard_dims:
        for dim in dims:
            if dim.kind == "age" and dim.stamp in stamped:
                candidates.update(stamped[dim.stamp] + p for p in dim.points if stamped[dim.stamp] + p >= start)
    ordered = sorted(candidates)
    commits = [_commits_at(explorer, block, stamped, moment) for moment in ordered]
    if any(c is None for c in commits) or commits[-1]:
        return None
    answer = ordered[-1]
    for moment, can in zip(reversed(ordered), reversed(commits), strict=True):
        if can:
            break
        answer = moment
    return answer


def _commits_at(explorer: Explorer, block: State, stamped: dict[int, int], moment: int) -> bool | None:
    """Whether some command of the agreement (approvals taken as grantable) commits at `moment`."""
    zone = explorer.zone(block)
    for t, sources in enumerate(explorer.sources):
        if block[0] not in sources:
            continue
        dims = explorer.guard_dims[t]
        key = []
        for dim in dims:
            if dim.kind == "age":
                if dim.stamp not in stamped:
                    key.append(-1)
                    continue
                value = moment - stamped[dim.stamp]
            else:
                if dim.stamp not in stamped or dim.other not in stamped:
                    key.append(-1)
                    continue
                value = stamped[dim.stamp] - stamped[dim.other]
            position = next((i for i, (low, high) in enumerate(dim.intervals()) if low <= value <= high), None)
            if position is None:
                return None
            key.append(position)
        cell = explorer.zones.restrict(zone, dims, key) if zone and dims else zone
        if cell is None:
            continue
        view = explorer.view(block, cell)
        slot = explorer.approval_slot.get(t)
        if any(new is not None for _, new, _, _ in explorer._guarded(block, view, t, slot, tuple(key), cell)):
            return True
    return False


def _earliest(count: int, constraints: list[tuple[int, int, int]]) -> list[int] | None:
    """The least times T[0..count) with T[0] = 0 and every T[a] - T[b] <= w, or None if none exist.

    With x = -T each constraint is x[b] <= x[a] + w, an edge a -> b of weight
    w; shortest distances from T[0] are the largest x, so the earliest T.
    """
    dist: list[int | None] = [None] * count
    dist[0] = 0
    for _ in range(count):
        changed = False
        for a, b, w in constraints:
            base = dist[a]
            if base is not None and (dist[b] is None or base + w < dist[b]):  # type: ignore[operator]
                dist[b] = base + w
                changed = True
        if not changed:
            break
    else:
        return None  # still changing after `count` rounds: a negative cycle
    if any(d is None for d in dist) or dist[0] != 0:
        return None
    return [-d for d in dist]  # type: ignore[operator]


def _params_of(explorer: Explorer, block: State) -> dict[str, Any]:
    values = explorer.param_values[block[1]]
    return {p["name"]: v for p, v in zip(explorer.model.params, values, strict=True)}


def replay(
    explorer: Explorer,
    start: State,
    moves: list[Move],
    invariants: list[str],
    table: Json,
    programs: dict[str, str],
) -> list[dict[str, Any]]:
    """Replay `moves` independently; returns per-step facts, or raises PW390."""
    _, blocks = explorer.split(start)
    replayer = Replayer(table, programs)
    replayer.site_phases = SitePhases(explorer.model.sites, explorer.sites_of)
    agreements = [
        ReplayAgreement(
            agreement=f"a{i + 1}", state=explorer.model.states[block[0]], params=_params_of(explorer, block)
        )
        for i, block in enumerate(blocks)
    ]
    for each in agreements:
        each.reached.add(each.state)
    contributions: dict[str, dict[str, int]] = {}
    effect_applied: dict[str, dict[str, int]] = {a.agreement: {} for a in agreements}
    effect_total: dict[str, dict[str, int]] = {a.agreement: {} for a in agreements}
    approved: dict[str, set[str]] = {a.agreement: set() for a in agreements}
    happened: dict[tuple[int, int], bool] = {}
    carried: dict[tuple[int, int], int] = {}  # the amount each call carries, fixed at its commit
    steps: list[dict[str, Any]] = []
    refusals: list[str] = []
    site_applied: dict[tuple[int, int], int] = {}  # (agreement, call site) -> applications
    sites = explorer.model.sites
    for move in moves:
        agr: ReplayAgreement | None = agreements[move.agreement] if move.agreement >= 0 else None
        postings: list[tuple[str, str, int]] = []
        if move.kind == "clock":
            replayer.now += move.delta or 0
        elif move.kind == "refused":
            assert agr is not None
            extra = _extra(agr, effect_applied, effect_total, approved, replayer, explorer)
            reason = replayer.refusal(agr, move.name, contributions, extra)
            if reason is None:
                raise VerifyError(
                    f"`{move.name}` commits on replay although the verifier found it refused; this is a verifier bug",
                    code="PW390",
                )
            refusals.append(reason)
        elif move.kind == "command":
            assert agr is not None
            extra = _extra(agr, effect_applied, effect_total, approved, replayer, explorer)
            for s in explorer.sites_of[explorer.model.transition_index[move.name]]:
                expr = sites[s].amount
                carried[(move.agreement, s)] = 0 if expr is None else replayer.evaluate(expr, agr, contributions, extra)
            postings = replayer.command(agr, move.name, contributions, extra)
            replayer.site_phases.committed(agr.agreement, explorer.model.transition_index[move.name])
            transition = replayer.transitions[move.name]
            if transition["approval"]:
                approved[agr.agreement].add(move.name)
            for s in explorer.sites_of[explorer.model.transition_index[move.name]]:
                happened[(move.agreement, s)] = False
        elif move.kind in ("dispatch", "fault") and move.site is not None:
            assert agr is not None
            site = sites[move.site]
            takes_effect = move.kind == "dispatch" or move.fault == "lost_response"
            deduplicated = site.strategy == "idempotent" and happened.get((move.agreement, move.site), False)
            if takes_effect and not deduplicated:
                happened[(move.agreement, move.site)] = True
                site_applied[(move.agreement, move.site)] = site_applied.get((move.agreement, move.site), 0) + 1
                effect_applied[agr.agreement][site.effect] = effect_applied[agr.agreement].get(site.effect, 0) + 1
                amount = carried.get((move.agreement, move.site), 0)
                effect_total[agr.agreement][site.effect] = effect_total[agr.agreement].get(site.effect, 0) + amount
        elif (
            move.kind == "compensate"
            and move.site is not None
            and agr is not None
            and happened.get((move.agreement, move.site))
        ):
            name = sites[move.site].compensation or sites[move.site].effect
            effect_applied[agr.agreement][name] = effect_applied[agr.agreement].get(name, 0) + 1
            # A compensation carries the amount of the call it undoes.
            amount = carried.get((move.agreement, move.site), 0)
            effect_total[agr.agreement][name] = effect_total[agr.agreement].get(name, 0) + amount
        if agr is not None and move.kind in ("dispatch", "fault", "runtime", "reconcile", "abandon", "compensate",
                                             "cancel"):  # fmt: skip
            happened_now = happened.get((move.agreement, move.site), False) if move.site is not None else False
            replayer.site_phases.moved(agr.agreement, move.kind, move.site, move.fault, happened_now)
        steps.append({"postings": postings, "now": replayer.now})
    # The violation must reproduce on the replayed state.
    for invariant in invariants:
        if invariant == "effect_applied_once":
            # Per call site: applications of one `call` against the commits of its transition.
            if any(
                count > agreements[a].fired.get(explorer.model.transitions[sites[s].transition]["id"], 0)
                for (a, s), count in site_applied.items()
                if s in explorer.once_sites
            ):
                continue
            raise VerifyError(
                "counterexample for `effect_applied_once` does not replay against transitions.json; "
                "this is a verifier bug",
                code="PW390",
            )
        if not _replayed_violation(
            invariant,
            table,
            replayer,
            agreements,
            contributions,
            effect_applied,
            effect_total,
            approved,
            explorer,
            moves,
        ):
            raise VerifyError(
                f"counterexample for `{invariant}` does not replay against transitions.json; this is a verifier bug",
                code="PW390",
            )
    return steps


def _extra(
    agr: ReplayAgreement,
    effect_applied: dict[str, dict[str, int]],
    effect_total: dict[str, dict[str, int]],
    approved: dict[str, set[str]],
    replayer: Replayer,
    explorer: Explorer,
) -> dict[str, Any]:
    return {
        "final": agr.state in replayer.final_states,
        "effect_applied": effect_applied[agr.agreement],
        "effect_total": effect_total[agr.agreement],
        "approved": approved[agr.agreement],
        "outcomes": replayer.site_phases.outcomes(agr.agreement),
    }


def _replayed_violation(
    invariant: str,
    table: Json,
    replayer: Replayer,
    agreements: list[ReplayAgreement],
    contributions: dict[str, dict[str, int]],
    effect_applied: dict[str, dict[str, int]],
    effect_total: dict[str, dict[str, int]],
    approved: dict[str, set[str]],
    explorer: Explorer,
    moves: list[Move],
) -> bool:
    if invariant == "funds_available":
        return bool(moves) and moves[-1].kind == "refused"  # and `replay` had the interpreter refuse it
    if invariant == "funds_not_stuck":
        # The search showed no command can commit again; replay confirms the agreement is
        # left in a non-final state with money in a non-external account.
        names = [a["name"] for a in table["accounts"] if not a["external"]]
        return any(
            agr.state not in replayer.final_states
            and any(replayer.balances(agr, contributions)[name] != 0 for name in names)
            for agr in agreements
        )
    if invariant == "money_conserved":
        return sum(replayer.ledger.values()) != 0
    if invariant == "no_negative_internal":
        internal = {
            replayer.address(a["name"], agr) for agr in agreements for a in table["accounts"] if not a["external"]
        }
        return any(replayer.ledger.get(address, 0) < 0 for address in internal)
    if invariant == "effect_max_calls":
        limits = {e["name"]: e["max_calls"] for e in table["effects"] if "max_calls" in e}
        return any(
            count > limits.get(name, count)
            for agr in agreements
            for name, count in effect_applied[agr.agreement].items()
        )
    if invariant == "no_posting_after_final":
        last = moves[-1]
        transition = replayer.transitions.get(last.name, {})
        return bool(transition.get("postings")) and any(s in replayer.final_states for s in transition.get("from", []))
    if invariant.startswith("limit:"):  # new in 1.1: a limit across agreements, all in one window
        limit = next((x for x in table.get("limits") or () if f"limit:{x['name']}" == invariant), None)
        used = sum(effect_total[agr.agreement].get(limit["effect"], 0) for agr in agreements) if limit else 0
        return limit is not None and used > int(limit["max"])
    spec = next((i for i in table["invariants"] if i["name"] == invariant), None)
    if spec is None:
        return False
    return any(
        not replayer.evaluate(
            spec["expr"], agr, contributions, _extra(agr, effect_applied, effect_total, approved, replayer, explorer)
        )
        for agr in agreements
    )


def describe(
    explorer: Explorer,
    start: State,
    moves: list[Move],
    steps: list[dict[str, Any]],
    invariants: list[tuple[str, str]],
) -> dict[str, Any]:
    """The counterexample as the report prints it: numbered events with the state after each."""
    model = explorer.model
    states = simulate(explorer, start, moves)
    assert states is not None
    lay = explorer.layout
    events = []
    clauses: set[str] = set()
    for number, (move, before, after, step) in enumerate(
        zip(moves, states[:-1], states[1:], steps, strict=True), start=1
    ):
        _, blocks_after = explorer.split(after)
        _, blocks_before = explorer.split(before)
        event: dict[str, Any] = {"step": number, "kind": move.kind, "actor": move.actor, "fault": move.fault}
        if move.kind == "command":
            transition = model.transitions[model.transition_index[move.name]]
            event["command"] = move.name
            event["clause"] = transition["clause"]
            if transition["clause"]:
                clauses.add(transition["clause"])
            event["from"] = model.states[blocks_before[move.agreement][0]]
            event["to"] = model.states[blocks_after[move.agreement][0]] if move.agreement < len(blocks_after) else None
        elif move.kind == "approve":
            event["command"] = f"approve {move.name}"
        elif move.kind == "clock":
            event["command"] = f"time passes {move.name}"
        else:
            event["command"] = f"{move.kind} {move.name}"
            if move.site is not None:
                phase = (
                    Phase(blocks_after[move.agreement][lay.phase + move.site])
                    if move.agreement < len(blocks_after)
                    else None
                )
                event["effect_phase"] = PHASE_NAMES[phase] if phase is not None else None
        event["agreement"] = move.agreement + 1 if move.agreement >= 0 else None
        event["postings"] = [{"source": s, "destination": d, "amount": str(a)} for s, d, a in step["postings"]]
        event["states_after"] = [model.states[b[0]] for b in blocks_after]
        event["balances_after"] = _balances(explorer, blocks_after)
        events.append(event)
    _, first_blocks = explorer.split(start)
    params = [
        {
            p["name"]: _render_param(p, v, model.scale)
            for p, v in zip(model.params, explorer.param_values[b[1]], strict=True)
        }
        for b in first_blocks
    ]
    return {
        "invariants": [name for name, _ in invariants],
        "violations": [{"invariant": name, "explanation": why} for name, why in invariants],
        "length": len(events),
        "params": params,
        "events": events,
        "clauses": sorted(clauses),
        "replayed": True,
    }


def _balances(explorer: Explorer, blocks: list[State]) -> dict[str, str]:
    lay = explorer.layout
    out: dict[str, str] = {}
    for account, spec in enumerate(explorer.model.accounts):
        total = sum(b[lay.balances + account] for b in blocks)
        if total or any(b[lay.balances + account] for b in blocks):
            out[spec["name"]] = str(total)
    return out


def _render_param(param: Json, value: Any, scale: int) -> str:
    if param["type"] == "money":
        return format_money(int(value), scale)
    if param["type"] == "duration":
        from pactwright.money import format_duration

        return format_duration(int(value))
    if param["type"] == "percent":
        from pactwright.money import Percent

        return f"{Percent(value).canonical()}%"
    return str(value)
