"""Adversarial policies against the bounded verifier: each once fooled it.

Every test is a small policy built to make `pactwright verify` claim more
than it checked (a pass, a `proved`, a "proved for all values" on a
violable invariant), crash on a reasonable policy, or disagree with itself.
Where the truth is not obvious, a brute-force simulator written here (whole
seconds, one tick at a time, guards evaluated by the replay's independent
evaluator over `transitions.json`) says what is reachable.

- time: a deadline at offset 0 (`now > paid_at`), stamps compared only with
  each other, and two stamps whose deadlines constrain the gap between them
  were unreachable for the old "jump to each deadline" clock (false passes);
  `-(paid_at - now)` crashed on an unset stamp and `2 * (now - paid_at)` was
  refused (PW303). The explorer now keeps zones of ages (`verifier/zones.py`);
- text: a `text matching` param compared with a literal or with another such
  param was explored with one stand-in value only (a false `proved`);
- division by zero in a guard crashed the explorer (exit 3);
- `total(E)` read a guessed effect amount such as `balance(escrow)` when
  checking, not what the call carried (a false pass, and a false violation);
  effects now declare their amount, and `total` counts it per application;
  replay forgot a compensation's amount (PW390);
- the sampled z3 amount search ignored compensations, and commands refused
  for some amounts, and said "proved for all values in range"; ranged params
  are now symbols in the search itself, and a refusal is `funds_available`;
- a percent range whose midpoint has more than four decimals made `verify`
  fail on a valid policy;
- `does_not_prove` left out limits the docs list (ledger delivery, parked
  runs, idempotency keys, compensations, guards on effect counts);
- solver budgets were wall-clock timeouts, so `unknown` depended on load.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from collections import deque
from pathlib import Path
from typing import Any

import pytest

from pactwright.compiler.bundle import compile_candidate
from pactwright.compiler.pipeline import check_bytes
from pactwright.diagnostics import Severity
from pactwright.verifier.explorer import Bounds
from pactwright.verifier.replay import ReplayAgreement, _value
from pactwright.verifier.verify import VerifyOptions, verify_files

REPO = Path(__file__).resolve().parents[1]


def _files(text: str) -> dict[str, bytes]:
    result = check_bytes(text.encode())
    errors = [d for d in result.diagnostics if d.severity == Severity.ERROR]
    assert result.ok and not errors and result.candidate is not None, errors
    return compile_candidate(result.candidate, result.source_map, "adversarial.pact")


def _verify(text: str, *, proofs: bool = False, agreements: int = 1) -> dict[str, Any]:
    options = VerifyOptions(bounds=Bounds(agreements=agreements), proofs=proofs, mutants=False)
    return verify_files(_files(text), options)


def _entry(report: dict[str, Any], name: str) -> dict[str, Any]:
    found: dict[str, Any] = next(i for i in report["invariants"] if i["name"] == name)
    return found


def _events(report: dict[str, Any], name: str) -> list[str]:
    cx = report["counterexamples"][_entry(report, name)["counterexample"]]
    assert cx["replayed"]
    return [e["command"] for e in cx["events"]]


# -- brute force: whole seconds, one tick at a time --------------------------------------------

_EXTRA: dict[str, Any] = {"final": False, "effect_applied": {}, "effect_total": {}, "approved": set()}


def _brute(
    table: dict[str, Any], stamps: tuple[str, ...], *, horizon: int | None = None, cap: int | None = None
) -> tuple[set[str], set[str]]:
    """Reachable control states and violated invariants of one agreement (no money, no effects).

    Integer times, the clock ticking one second at a time; guards and
    invariants evaluated by the replay's evaluator. With `horizon`, times
    are absolute and stop there; with `cap`, a stamp is kept as its age,
    capped at `cap` (exact when every constant a stamp's age is compared
    with is below it, and no two stamps are compared).
    """
    transitions = table["transitions"]
    initial = next(s["name"] for s in table["states"] if s["initial"])
    start = (initial, 0, (None,) * len(stamps), frozenset([initial]))
    seen = {start}
    queue = deque([start])
    violated: set[str] = set()
    while queue:
        ctrl, now, times, reached = queue.popleft()
        agr = ReplayAgreement("a1", ctrl, {}, {n: t for n, t in zip(stamps, times, strict=True) if t is not None})
        agr.reached = set(reached)
        violated |= {i["name"] for i in table["invariants"] if not _value(i["expr"], agr, now, {}, _EXTRA)}
        if cap is not None:  # now stays 0 and stamps are minus their ages
            older = tuple(None if t is None else max(t - 1, -cap) for t in times)
            successors = [(ctrl, 0, older, reached)]
        else:
            assert horizon is not None
            successors = [(ctrl, now + 1, times, reached)] if now < horizon else []
        for t in transitions:
            if ctrl in t["from"] and (t["guard"] is None or _value(t["guard"], agr, now, {}, _EXTRA)):
                stamped = tuple(now if n in t["stamps"] else v for n, v in zip(stamps, times, strict=True))
                successors.append((t["to"], now, stamped, reached | {t["to"]}))
        for state in successors:
            if state not in seen:
                seen.add(state)
                queue.append(state)
    return {s[0] for s in seen}, violated


# -- time: deadlines the old clock could not reach ---------------------------------------------

OFFSET_ZERO = """pact "adv.offset_zero" version "1.0.0"
currency EUR scale 2
role buyer
clock timer
state placed initial
state paid
state late
state done final
transition pay: placed -> paid {
  by buyer
  stamp paid_at
}
transition expire: paid -> late {
  by timer
  when now > paid_at
}
transition finish: paid, late -> done {
  by buyer
}
invariant never_late: not reached(late)
"""


def test_a_deadline_at_offset_zero_is_reached() -> None:
    """`now > paid_at` holds one second after `pay`; no offset was recorded, so the clock never moved."""
    report = _verify(OFFSET_ZERO)
    assert _entry(report, "never_late")["verdict"] == "violated"
    assert _events(report, "never_late") == ["pay", "time passes +1s", "expire"]


STAMPS_ONLY = """pact "adv.stamps_only" version "1.0.0"
currency EUR scale 2
role buyer
state placed initial
state paid
state shipped
state late
state done final
transition pay: placed -> paid {
  by buyer
  stamp paid_at
}
transition ship: paid -> shipped {
  by buyer
  stamp shipped_at
}
transition flag: shipped -> late {
  by buyer
  when shipped_at >= paid_at + 1d
}
transition finish: shipped, late -> done {
  by buyer
}
invariant never_late: not reached(late)
"""


def test_stamps_compared_only_with_each_other_still_let_time_pass() -> None:
    """A late shipment needs a day between two stamps; with no `now` deadline no clock move existed."""
    report = _verify(STAMPS_ONLY)
    assert _entry(report, "never_late")["verdict"] == "violated"
    assert _events(report, "never_late") == ["pay", "time passes +1d", "ship", "flag"]


TWO_STAMP_WINDOW = """pact "adv.two_stamp_window" version "1.0.0"
currency EUR scale 2
role buyer
clock timer
state s0 initial
state s1
state s2
state bad
state done final
transition start: s0 -> s1 {
  by buyer
  stamp a
}
transition mark: s1 -> s2 {
  by buyer, timer
  when now >= a + 10s
  stamp b
}
transition boom: s2 -> bad {
  by timer
  when now >= b + 100s and now < b + 101s and now >= a + 113s and now < a + 115s
}
transition end: s2, bad -> done {
  by buyer
}
invariant never_bad: not reached(bad)
"""


def test_a_window_between_two_stamps_is_reached() -> None:
    """`boom` needs `mark` 13 or 14 s after `start`; the old clock jumped only to 10 s, 11 s, 113 s..."""
    table = json.loads(_files(TWO_STAMP_WINDOW)["transitions.json"])
    reached, violated = _brute(table, ("a", "b"), cap=120)
    assert "bad" in reached and violated == {"never_bad"}  # the ground truth
    report = _verify(TWO_STAMP_WINDOW)
    assert report["exploration"]["exhausted"]
    assert _events(report, "never_bad") == ["start", "time passes +13s", "mark", "time passes +1m40s", "boom"]


SCALED_DEADLINE = """pact "adv.scaled" version "1.0.0"
currency EUR scale 2
role buyer
clock timer
param window: duration = 2d
state placed initial
state paid
state late
state done final
transition pay: placed -> paid {
  by buyer
  stamp paid_at
}
transition expire: placed, paid -> late {
  by timer
  when GUARD
}
transition finish: paid, late -> done {
  by buyer
}
invariant never_late: not reached(late)
"""


@pytest.mark.parametrize(
    ("guard", "wait"),
    [
        ("-(paid_at - now) >= window", "+2d"),
        ("2 * (now - paid_at) >= window", "+1d"),
        ("3 * (now - paid_at) > 7s", "+3s"),
    ],
)
def test_time_arithmetic_is_placed_and_an_unset_stamp_does_not_crash(guard: str, wait: str) -> None:
    """`-(paid_at - now)` crashed on an unset stamp (None); a factor on `now - paid_at` was refused (PW303)."""
    report = _verify(SCALED_DEADLINE.replace("GUARD", guard))
    assert _events(report, "never_late") == ["pay", f"time passes {wait}", "expire"]


# Random timed policies: reachable states and violated invariants must match the brute force.

_STAMPS = ("a", "b", "c")
_STATES = ("s0", "s1", "s2", "s3", "s4")


def _atom(rng: random.Random, diagonal: bool, scaled: bool = True) -> str:
    op = rng.choice([">=", "<", ">", "<=", "=="])
    n = rng.randint(0, 6 if diagonal else 9)
    if diagonal and rng.random() < 0.5:
        x, y = rng.sample(_STAMPS, 2)
        return f"{x} {op} {y} + {n}s"
    s = rng.choice(_STAMPS)
    if scaled and rng.random() < 0.2:
        return f"{rng.choice([2, 3])} * (now - {s}) {op} {n}s"
    if not diagonal and rng.random() < 0.5:
        low = rng.randint(0, 15)
        return f"now >= {s} + {low}s and now < {s} + {low + rng.randint(1, 4)}s"
    return f"now {op} {s} + {n}s"


def _guard(rng: random.Random, diagonal: bool, scaled: bool) -> str:
    text = _atom(rng, diagonal, scaled)
    for _ in range(rng.randint(0, 2)):
        text = f"({text}) {rng.choice(['and', 'and', 'or'])} ({_atom(rng, diagonal, scaled)})"
    return text


def _random_policy(seed: int, diagonal: bool, scaled: bool = True) -> str:
    rng = random.Random(seed)
    lines = ['pact "adv.random" version "1.0.0"', "currency EUR scale 2", "role user", "clock timer"]
    lines += [f"state {s}{' initial' if s == 's0' else ''}" for s in _STATES] + ["state end final"]
    edges = [(i, i + 1) for i in range(4)] + [(i, j) for i in range(5) for j in range(i + 1, 5) if rng.random() < 0.3]
    for k, (i, j) in enumerate(edges):
        body = ["  by user, timer"]
        if k < 3:
            body.append(f"  stamp {_STAMPS[k]}")
        elif rng.random() < 0.5:
            body.append(f"  stamp {rng.choice(_STAMPS)}")
        if i > 0 or rng.random() < 0.3:
            body.append(f"  when {_guard(rng, diagonal, scaled)}")
        lines.append(f"transition t{k}: {_STATES[i]} -> {_STATES[j]} {{\n" + "\n".join(body) + "\n}")
    lines.append("transition finish: " + ", ".join(_STATES) + " -> end {\n  by user\n}")
    for k in range(2):
        state = rng.choice(_STATES[1:])
        lines.append(f"invariant inv{k}: not reached({state}) or reached(end) or ({_guard(rng, diagonal, scaled)})")
    return "\n".join(lines) + "\n"


# Seeds 1682, 1910, 5289 and 5535 (without scaled comparisons) were wrong under the old clock:
# a state or a violation missed. The others add scaled comparisons, which it refused (PW303).
@pytest.mark.parametrize(
    ("seed", "scaled"), [(1682, False), (1910, False), (5289, False), (5535, False), *((s, True) for s in range(30))]
)
def test_random_timed_policies_match_the_brute_force(seed: int, scaled: bool) -> None:
    text = _random_policy(seed, diagonal=False, scaled=scaled)
    files = _files(text)
    table = json.loads(files["transitions.json"])
    reached, violated = _brute(table, _STAMPS, cap=22)
    report = verify_files(files, VerifyOptions(bounds=Bounds(), proofs=False, mutants=False))
    assert report["exploration"]["exhausted"]
    explored = {s["name"] for s in table["states"]} - set(report["coverage"]["states_never_reached"])
    assert explored == reached, text
    assert {i["name"] for i in report["invariants"] if i["verdict"] == "violated"} == violated, text


@pytest.mark.parametrize("seed", range(300, 320))
def test_random_policies_comparing_stamps_match_the_brute_force(seed: int) -> None:
    text = _random_policy(seed, diagonal=True)
    files = _files(text)
    table = json.loads(files["transitions.json"])
    reached, violated = _brute(table, _STAMPS, horizon=35)
    report = verify_files(files, VerifyOptions(bounds=Bounds(), proofs=False, mutants=False))
    explored = {s["name"] for s in table["states"]} - set(report["coverage"]["states_never_reached"])
    assert explored == reached, text
    assert {i["name"] for i in report["invariants"] if i["verdict"] == "violated"} == violated, text


def test_two_agreements_lay_a_time_counterexample_on_one_timeline() -> None:
    """Each agreement's time passes on its own in the search; the replayed path has one clock."""
    report = _verify(TWO_STAMP_WINDOW, agreements=2)
    assert _events(report, "never_bad") == ["start", "time passes +13s", "mark", "time passes +1m40s", "boom"]


def test_zone_operations_agree_with_explicit_sets_of_ages() -> None:
    """Reset, letting time pass, and splitting into cells, against the integer points they stand for."""
    import itertools

    from pactwright.verifier.zones import INF, Dim, Zones

    window = 10

    def points(zones: Zones, zone: tuple[int, ...], n: int) -> set[tuple[int | None, ...]]:
        live = [i for i in range(n) if zones.is_set(zone, i)]
        out = set()
        for values in itertools.product(range(window + 1), repeat=len(live)):
            x = [0] * (n + 1)
            for clock, value in zip(live, values, strict=True):
                x[clock + 1] = value
            index = [0] + [c + 1 for c in live]
            if all(zone[i * (n + 1) + j] == INF or x[i] - x[j] <= zone[i * (n + 1) + j] for i in index for j in index):
                out.add(tuple(x[c + 1] if c in live else None for c in range(n)))
        return out

    rng = random.Random(7)
    for _ in range(150):
        n = rng.randint(1, 3)
        zones = Zones(n, [INF] * n)
        zone = zones.initial()
        truth: set[tuple[int | None, ...]] = {(None,) * n}
        for _ in range(6):
            op = rng.choice(["reset", "up", "split", "split"])
            if op == "reset":
                clocks = rng.sample(range(n), rng.randint(1, n))
                zone = zones.reset(zone, clocks)
                truth = {tuple(0 if i in clocks else p[i] for i in range(n)) for p in truth}
            elif op == "up":
                zone = zones.up(zone)
                truth = {
                    tuple(None if v is None else v + d for v in p)
                    for p in truth
                    for d in range(window + 1)
                    if all(v is None or v + d <= window for v in p)
                }
            else:
                stamp = rng.randrange(n)
                others = [i for i in range(n) if i != stamp]
                if others and rng.random() < 0.5:
                    dim = Dim(
                        "diff", stamp, rng.choice(others), tuple(sorted({rng.randint(-5, 5), rng.randint(-5, 5)}))
                    )
                else:
                    dim = Dim("age", stamp, -1, tuple(sorted({rng.randint(1, 8), rng.randint(1, 8)})))
                cells = list(zones.cells(zone, [dim]))
                parts = [points(zones, sub, n) for _, sub in cells]
                assert set().union(*parts) == points(zones, zone, n)  # the cells cover the zone...
                assert sum(len(part) for part in parts) == len(points(zones, zone, n))  # ...and do not overlap
                key, zone = rng.choice(cells)
                if key[0] >= 0:
                    low, high = dim.intervals()[key[0]]
                    # age(stamp), or stamp - other = age(other) - age(stamp)
                    if dim.kind == "age":
                        truth = {p for p in truth if low <= p[dim.stamp] <= high}
                    else:
                        truth = {p for p in truth if low <= p[dim.other] - p[dim.stamp] <= high}
            assert points(zones, zone, n) == truth


# -- text params -------------------------------------------------------------------------------

PATTERN_LITERAL = """pact "adv.pattern_literal" version "1.0.0"
currency EUR scale 2
role clerk
param price: money between 1.00 and 100.00
param region: text matching "[A-Z]{2}"
account world  "world" external
account fees "fees:{agreement}"
state open initial
state done final
transition close: open -> done {
  by clerk
  when region == "EU"
  transfer price from world to fees
}
transition close_free: open -> done {
  by clerk
  when region != "EU"
}
invariant no_fee: balance(fees) == 0
"""


def test_a_pattern_param_takes_the_values_it_is_compared_with() -> None:
    """With the stand-in `any` alone `region == "EU"` never held, and k-induction said `proved`."""
    report = _verify(PATTERN_LITERAL, proofs=True)
    assert _entry(report, "no_fee")["verdict"] == "violated"
    cx = report["counterexamples"][_entry(report, "no_fee")["counterexample"]]
    assert cx["params"][0]["region"] == "EU"
    assert "close" not in report["coverage"]["transitions_never_fired"]


TWO_PATTERNS = """pact "adv.two_patterns" version "1.0.0"
currency EUR scale 2
role clerk
param price: money = 5.00
param a: text matching "[A-Z]{2}"
param b: text matching "[A-Z]{2}"
account world  "world" external
account fees "fees:{agreement}"
state open initial
state done final
transition close: open -> done {
  by clerk
  when a != b
  transfer price from world to fees
}
transition close_same: open -> done {
  by clerk
  when a == b
}
invariant no_fee: balance(fees) == 0
"""


def test_two_pattern_params_compared_with_each_other_can_differ() -> None:
    report = _verify(TWO_PATTERNS, proofs=True)
    assert _entry(report, "no_fee")["verdict"] == "violated"
    assert report["coverage"]["transitions_never_fired"] == []


# -- arithmetic ----------------------------------------------------------------------------------

DIVISION = """pact "adv.division" version "1.0.0"
currency EUR scale 2
role clerk
param price: money between 1.00 and 100.00
account world  "world" external
account escrow "escrow:{agreement}"
state open initial
state paid
state done final
transition pay: open -> paid {
  by clerk
  transfer price from world to escrow
}
transition again: paid -> paid {
  by clerk
  when balance(escrow) / fired(again) <= price
  transfer price from world to escrow
}
transition close: paid -> done {
  by clerk
  transfer balance(escrow) from escrow to world
}
invariant bounded: balance(escrow) / fired(again) <= price * 3
"""


def test_a_division_by_zero_is_undefined_not_a_crash() -> None:
    """`x / 0` crashed the explorer (TypeError, exit 3); a comparison with it is false, like an unset stamp."""
    report = _verify(DIVISION, proofs=True)
    # fired(again) is 0 at the start, so `bounded` compares an undefined quotient: false.
    assert _entry(report, "bounded")["verdict"] == "violated"
    assert _events(report, "bounded") == []
    assert "again" in report["coverage"]["transitions_never_fired"]


PERCENT_MIDPOINT = """pact "adv.percent_midpoint" version "1.0.0"
currency EUR scale 2
role clerk
param price: money between 1.00 and 100.00
param rate: percent between 0.0001% and 0.0002%
account world  "world" external
account fees "fees:{agreement}"
account seller "seller:{agreement}"
state open initial
state done final
transition close: open -> done {
  by clerk
  transfer price from world {
    rate to fees
    remaining to seller
  }
}
invariant fees_small: balance(fees) <= balance(seller)
"""


def test_a_percent_range_whose_midpoint_has_five_decimals_compiles() -> None:
    """The midpoint 0.00015% was rendered `300/2000000` and refused: `verify` failed on a valid policy."""
    files = _files(PERCENT_MIDPOINT)
    rate = next(p for p in json.loads(files["model.json"])["params"] if p["name"] == "rate")
    assert rate["samples"] == ["0.0001", "0.0002"]
    assert _verify(PERCENT_MIDPOINT)["verdict"] == "pass"


# -- effects: amounts carried, compensations ---------------------------------------------------

PAYOUT = """pact "adv.payout" version "1.0.0"
currency EUR scale 2
default deny
role clerk
param price: money between 1.00 and 100.00
account world  "world" external
account escrow "escrow:{agreement}"
account seller "seller:{agreement}"
rule R2 allow
effect payout {
  risk R2
  reversibility reversible
  scopes "payments:write"
  strategy STRATEGY
  key price
  amount price
}
state open initial
state paid
state done final
transition pay: open -> paid {
  by clerk
  transfer price from world to escrow
}
transition release: paid -> done {
  by clerk
  call payout
  transfer balance(escrow) from escrow to seller
}
invariant paid_out_once: total(payout) <= price
invariant payout_carries_the_price: applied(payout) == 0 or total(payout) >= price
"""


def test_total_counts_the_amount_each_application_carried() -> None:
    """`total(payout)` read `balance(escrow)` after the release emptied it: 0, whatever was paid.

    The amount is now declared (`amount price`), which also makes the effect
    money-moving: a `retry` that makes it take effect twice for one commit
    breaks `effect_applied_once` as well.
    """
    retried = _verify(PAYOUT.replace("STRATEGY", "retry"))
    # A lost response is retried: the payout happens twice, each carrying the price.
    assert _entry(retried, "paid_out_once")["verdict"] == "violated"
    assert "fault payout" in _events(retried, "paid_out_once")
    assert _entry(retried, "effect_applied_once")["verdict"] == "violated"
    assert "fault payout" in _events(retried, "effect_applied_once")
    # ... and a payout that happened carried the price: this held false before.
    assert _entry(retried, "payout_carries_the_price")["verdict"] == "holds-to-bound"
    assert _verify(PAYOUT.replace("STRATEGY", "idempotent"))["verdict"] == "pass"


def _compensation_probe(invariant: str) -> str:
    text = (REPO / "tests" / "planted" / "compensation_probe.pact").read_text()
    head, _, _ = text.partition('clause "2" invariant')
    return head + f'clause "2" invariant probe: {invariant}\n'


def test_a_compensation_carries_its_amount_in_replay() -> None:
    """The explorer counted the voided amount in `total(void_capture)`, the replay did not: PW390."""
    report = _verify(_compensation_probe("total(void_capture) == 0"))
    assert _entry(report, "probe")["verdict"] == "violated"
    assert _events(report, "probe")[-1] == "compensate void_capture"


@pytest.mark.parametrize("proofs", [False, True])
def test_the_amount_search_counts_compensations(proofs: bool) -> None:
    """z3 read `applied(void_capture)` as 0 in every abstract state and said "proved for all values".

    The symbolic search finds the one price itself; the proof stage must not undo it.
    """
    report = _verify(_compensation_probe("applied(void_capture) == 0 or price != 123.45"), proofs=proofs)
    entry = _entry(report, "probe")
    assert entry["verdict"] == "violated"
    cx = report["counterexamples"][entry["counterexample"]]
    assert cx["replayed"]
    assert cx["params"][0]["price"] == "123.45"
    assert _events(report, "probe")[-1] == "compensate void_capture"


REFUSED_BETWEEN_SAMPLES = """pact "adv.refused" version "1.0.0"
currency EUR scale 2
role clerk
param price: money between 1.00 and 200.00
account world  "world" external
account a "a:{agreement}"
account b "b:{agreement}"
state s0 initial
state s1
state s2
state done final
transition t1: s0 -> s1 {
  by clerk
  transfer price - 50.00 from world to a
}
transition t2: s1 -> s2 {
  by clerk
  transfer 60.00 - price from world to b
}
transition end: s0, s1, s2 -> done {
  by clerk
}
invariant small_advance: not reached(s2) or balance(a) <= 5.00
"""


@pytest.mark.parametrize("proofs", [False, True])
def test_a_violation_behind_amounts_the_ledger_refuses_elsewhere_is_found(proofs: bool) -> None:
    """`s2` needs 50 <= price <= 60, which no sample hits; z3 saw only the sampled states and said "proved".

    Now the search carries the path condition 50.00 <= price <= 60.00 to
    `s2` and finds `small_advance` broken above 55.00; and the refusals
    themselves (a negative `t1` below 50.00) are `funds_available`.
    """
    report = _verify(REFUSED_BETWEEN_SAMPLES, proofs=proofs)
    assert report["verdict"] == "fail"
    entry = _entry(report, "small_advance")
    assert entry["verdict"] == "violated"
    cx = report["counterexamples"][entry["counterexample"]]
    assert cx["replayed"]
    assert [e["command"] for e in cx["events"]] == ["t1", "t2"]
    whole, _, cents = cx["params"][0]["price"].partition(".")
    assert 5501 <= int(whole) * 100 + int(cents) <= 6000
    assert _events(report, "funds_available") == ["refused t1"]
    refused = report["counterexamples"][_entry(report, "funds_available")["counterexample"]]
    assert refused["params"][0]["price"] == "1.00"  # the lowest price, where `price - 50.00` is negative


# -- what the report does not prove ----------------------------------------------------------


def test_every_documented_limit_the_policy_runs_into_is_in_does_not_prove() -> None:
    """docs/verifier.md lists ledger delivery, parked runs, idempotency keys... `does_not_prove` listed none."""
    limits = " | ".join(_verify(_compensation_probe("applied(void_capture) <= 1"))["does_not_prove"])
    assert "ledger delivery" in limits
    assert "parked while an effect is uncertain" in limits
    assert "compensating effect" in limits
    assert "idempotency key" not in limits  # no call is idempotent (`void_capture` only compensates)
    assert any(
        "idempotency key" in item for item in _verify(PAYOUT.replace("STRATEGY", "idempotent"))["does_not_prove"]
    )
    guarded = PAYOUT.replace("STRATEGY", "idempotent").replace(
        "transition release: paid -> done {\n  by clerk",
        "transition release: paid -> done {\n  by clerk\n  when applied(payout) == 0",
    )
    assert any("guards on `applied(EFFECT)`" in item for item in _verify(guarded)["does_not_prove"])
    # ... and only those: a policy without money or effects is not told about them.
    plain = " | ".join(_verify(OFFSET_ZERO)["does_not_prove"])
    assert "ledger delivery" not in plain and "effect" not in plain.replace("effects", "")


# -- determinism --------------------------------------------------------------------------------


def test_solver_limits_count_work_not_wall_clock_time() -> None:
    """A wall-clock timeout makes `unknown` depend on the machine's load, and so the report's bytes.

    z3 answers "timeout" when the wall clock stops it and "canceled" (or
    "max. resource limit exceeded") when its resource limit does; the wall
    clock is only a backstop, several times the budget.
    """
    import z3

    from pactwright.verifier._z3_terms import solver

    x, y, z = z3.Ints("x y z")
    reasons = []
    for _ in range(3):
        query = solver(20)
        query.add(x * x * x + y * y * y == z * z * z, x > 1, y > 1, z > 1)
        assert query.check() == z3.unknown
        reasons.append(query.reason_unknown())
        if reasons[-1] != "timeout":
            break
    assert reasons[-1] != "timeout", reasons


def test_the_report_is_the_same_whatever_the_hash_seed_and_time_zone() -> None:
    outputs = set()
    for seed, zone in (("0", "UTC"), ("1", "Pacific/Chatham"), ("12345", "America/St_Johns")):
        env = dict(os.environ, PYTHONHASHSEED=seed, TZ=zone)
        done = subprocess.run(
            [sys.executable, "-c", _SEEDED_RUN, PATTERN_LITERAL, TWO_PATTERNS, TWO_STAMP_WINDOW],
            env=env,
            capture_output=True,
            check=True,
        )
        outputs.add(done.stdout)
    assert len(outputs) == 1


_SEEDED_RUN = """
import sys
from pactwright.canonical import canonical_bytes
from pactwright.compiler.bundle import compile_candidate
from pactwright.compiler.pipeline import check_bytes
from pactwright.verifier.explorer import Bounds
from pactwright.verifier.verify import VerifyOptions, verify_files
for text in sys.argv[1:]:
    result = check_bytes(text.encode())
    files = compile_candidate(result.candidate, result.source_map, "p.pact")
    report = verify_files(files, VerifyOptions(bounds=Bounds(agreements=2)))
    sys.stdout.buffer.write(canonical_bytes(report))
"""
