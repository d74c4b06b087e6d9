"""Verifier benchmark: the explorer against a hand-written BFS of the same model.

The model is `bench/policies/shared_platform.pact`: escrowed orders sharing
the platform fee account, with a payout notification whose provider may lose
requests or responses (strategy `reconcilable`). With several agreements and
a fault budget the state space grows quickly. The baseline below is a
specialised breadth-first search of exactly that model, written by hand with
tuples, a dict and a deque; both searches must find the same number of
distinct states (a differential check), and the ratio of their speeds is
printed.

Run: `python bench/verify_bench.py [AGREEMENTS] [FAULTS]` (default 4 and 2).
"""

from __future__ import annotations

import sys
import time
from collections import deque
from pathlib import Path

from pactwright.canonical import load_json
from pactwright.compiler.bundle import compile_candidate
from pactwright.compiler.pipeline import check_bytes
from pactwright.verifier.explorer import Bounds, Explorer
from pactwright.verifier.model import load_model

POLICY = Path(__file__).resolve().parent / "policies" / "shared_platform.pact"

# The hand-written model. Control states and effect phases as small ints.
DRAFT, FUNDED, RELEASED, REFUNDED = 0, 1, 2, 3
IDLE, PREPARED, ACK, UNCERTAIN, PARKED, RECOVERED, NOT_OCCURRED, ABANDONED, FAILED = 0, 1, 2, 3, 4, 5, 6, 7, 8
PRICES = (100, 101, 5050, 9999, 10000)  # the model's boundary samples of `price`


def local_moves(local: tuple[int, int, int, int, int]) -> list[tuple[tuple[int, int, int, int, int], int]]:
    """Moves of one agreement: (new local state, faults used). Local: ctrl, price, phase, happened, applied."""
    ctrl, price, phase, happened, applied = local
    out = []
    if ctrl == DRAFT:
        out.append(((FUNDED, price, phase, happened, applied), 0))
    elif ctrl == FUNDED:
        out.append(((REFUNDED, price, phase, happened, applied), 0))
        out.append(((RELEASED, price, PREPARED, 0, applied), 0))
    if phase == PREPARED:
        out.append(((ctrl, price, ACK, 1, applied + 1), 0))
        out.append(((ctrl, price, UNCERTAIN, happened, applied), 1))  # lost request
        out.append(((ctrl, price, UNCERTAIN, 1, applied + 1), 1))  # lost response
        out.append(((ctrl, price, FAILED, happened, applied), 1))  # provider error
    elif phase == UNCERTAIN:
        out.append(((ctrl, price, PARKED, happened, applied), 0))
    elif phase == FAILED:
        out.append(((ctrl, price, PREPARED, happened, applied), 0))
    elif phase == PARKED:
        out.append(((ctrl, price, RECOVERED if happened else NOT_OCCURRED, happened, applied), 0))
        out.append(((ctrl, price, ABANDONED, happened, applied), 0))
    elif phase == NOT_OCCURRED:
        out.append(((ctrl, price, PREPARED, happened, applied), 0))
    return out


def violated(agreements: tuple[tuple[int, int, int, int, int], ...]) -> bool:
    """The model's invariants: escrow never negative, notified at most once, no shared account negative."""
    platform = 0
    for ctrl, price, _, _, applied in agreements:
        escrow = PRICES[price] if ctrl == FUNDED else 0
        if escrow < 0 or applied > 1:
            return True
        if ctrl == RELEASED:
            platform += PRICES[price] // 10
    return platform < 0


def baseline(agreements: int, faults: int) -> int:
    """Hand-written specialised BFS with symmetry reduction; returns distinct states."""
    starts = set()

    def combos(count: int, first: int, chosen: tuple[int, ...]) -> None:
        if count == 0:
            starts.add((0, tuple(sorted((DRAFT, p, IDLE, 0, 0) for p in chosen))))
            return
        for p in range(first, len(PRICES)):
            combos(count - 1, p, (*chosen, p))

    combos(agreements, 0, ())
    seen = dict.fromkeys(starts, 0)
    queue = deque(starts)
    while queue:
        used, locals_ = queue.popleft()
        violated(locals_)
        for index, local in enumerate(locals_):
            for new, cost in local_moves(local):
                if used + cost > faults:
                    continue
                nxt = list(locals_)
                nxt[index] = new
                state = (used + cost, tuple(sorted(nxt)))
                if state not in seen:
                    seen[state] = len(seen)
                    queue.append(state)
    return len(seen)


def main() -> None:
    agreements = int(sys.argv[1]) if len(sys.argv) > 1 else 4
    faults = int(sys.argv[2]) if len(sys.argv) > 2 else 2
    result = check_bytes(POLICY.read_bytes())
    assert result.candidate is not None, result.diagnostics
    files = compile_candidate(result.candidate, result.source_map, POLICY.name)
    model = load_model(load_json(files["model.json"]))
    bounds = Bounds(agreements=agreements, faults=faults, max_states=10_000_000, max_depth=1000)

    start = time.perf_counter()
    explored = Explorer(model, bounds).explore()
    ours = time.perf_counter() - start
    start = time.perf_counter()
    hand_states = baseline(agreements, faults)
    hand = time.perf_counter() - start

    states = len(explored.states)
    print(f"model: {POLICY.name}, {agreements} agreements sharing platform:fees, fault budget {faults}")
    ours_rate, hand_rate = states / ours, hand_states / hand
    print(
        f"pactwright explorer : {states:>10,} states, {explored.edges:,} transitions, "
        f"{ours:6.2f} s, {ours_rate:,.0f} states/s"
    )
    print(f"hand-written BFS    : {hand_states:>10,} states, {hand:6.2f} s, {hand_rate:,.0f} states/s")
    print(f"speed relative to the hand-written baseline: {hand / ours:.2f}x (target >= 0.5x)")
    if states != hand_states:
        print(f"MISMATCH: the explorer found {states} states, the baseline {hand_states}")
        raise SystemExit(1)
    print("state counts agree")


if __name__ == "__main__":
    main()
