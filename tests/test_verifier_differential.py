"""Differential acceptance test: the verifier against a brute-force enumerator.

Seeded random policies (`tests/_policy_gen.py`: cyclic state machines,
deadlines, percent and fixed splits, ranged money and percent params, guards
comparing params with each other and with point constants) are compiled in
memory and verified (with proofs on for every fifth seed). The enumerator (`tests/_brute.py`,
written from docs/language.md and docs/verifier.md, importing nothing of the
verifier) tries every valuation of a grid that holds every constant the
policy mentions and every sum and difference of two of them.

For every policy:
- every invariant the enumerator finds violated (the policy's own,
  `funds_available`, `funds_not_stuck`) must be reported `violated` by the
  verifier when its shortest witness is within the verifier's depth bound;
  in no case may the report say `pass`, nor the invariant `proved`, nor
  `holds-to-bound` after a complete search (a false pass);
- every counterexample the verifier reports must replay (a PW390 is a
  failure);
- every violation the verifier reports must be found by the enumerator too;
  when it is not, the verifier's own witness valuation is checked alone, to
  tell an enumerator grid gap from a verifier false alarm.

`PACTWRIGHT_DIFFERENTIAL_POLICIES` sets how many seeds run (default 300, the
acceptance bar); `PACTWRIGHT_DIFFERENTIAL_FIRST` the first seed.
"""

from __future__ import annotations

import os
import time
from collections import Counter
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import pytest

from pactwright.compiler.bundle import compile_candidate
from pactwright.compiler.pipeline import check_bytes
from pactwright.diagnostics import Severity
from pactwright.errors import VerifyError
from pactwright.verifier.explorer import Bounds
from pactwright.verifier.verify import VerifyOptions, verify_files
from tests._brute import (
    BUILTIN_CHECKED,
    Enumerator,
    Finding,
    check_valuation,
    enumerate_policy,
    valuation_text,
)
from tests._policy_gen import UNIT, Policy, generate, render

POLICIES = int(os.environ.get("PACTWRIGHT_DIFFERENTIAL_POLICIES", "300"))
FIRST = int(os.environ.get("PACTWRIGHT_DIFFERENTIAL_FIRST", "0"))
PROOF_EVERY = int(os.environ.get("PACTWRIGHT_DIFFERENTIAL_PROOF_EVERY", "5"))
ENUM_DEPTH = 12  # moves (commands and clock moves) the enumerator follows
VERIFY_BOUNDS = Bounds(agreements=1, faults=0, max_depth=ENUM_DEPTH, max_states=200_000)
SHOWN = 6  # failures printed in full


@dataclass
class Tally:
    generated: int = 0
    discarded: int = 0
    verified: int = 0
    refused: Counter[str] = field(default_factory=Counter)
    enum_violated_policies: int = 0
    enum_violations: Counter[str] = field(default_factory=Counter)
    verifier_violations: Counter[str] = field(default_factory=Counter)
    false_passes: Counter[str] = field(default_factory=Counter)  # "policy" or "built-in" invariant
    violated_but_pass: int = 0  # policies the enumerator finds violated that the report calls `pass`
    missed_in_bound: int = 0
    verifier_only: Counter[str] = field(default_factory=Counter)
    replay_failures: int = 0
    crashes: int = 0
    pass_verdicts: int = 0
    failures: list[str] = field(default_factory=list)

    def summary(self) -> str:
        return (
            f"policies generated {self.generated}, discarded by check {self.discarded}, verified {self.verified}, "
            f"refused by the verifier {dict(self.refused)}; enumerator: {self.enum_violated_policies} policies "
            f"violated, by invariant {dict(sorted(self.enum_violations.items()))}; verifier: by invariant "
            f"{dict(sorted(self.verifier_violations.items()))}, verdict pass {self.pass_verdicts}; "
            f"violated policies reported pass {self.violated_but_pass}, false passes {dict(self.false_passes)}, "
            f"missed within bound {self.missed_in_bound}, "
            f"verifier-only {dict(self.verifier_only)}, replay failures {self.replay_failures}, "
            f"crashes {self.crashes}"
        )


def _files(source: str, name: str) -> dict[str, bytes] | None:
    result = check_bytes(source.encode("utf-8"))
    errors = [d for d in result.diagnostics if d.severity == Severity.ERROR]
    if not result.ok or errors or result.candidate is None:
        return None
    return compile_candidate(result.candidate, result.source_map, name)


def _verdicts(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {entry["name"]: entry for entry in report["invariants"]}


def _complete(report: dict[str, Any]) -> bool:
    if "complete" in report:
        return bool(report["complete"])
    return bool(report["exploration"]["exhausted"])


def _parse_value(policy: Policy, name: str, text: str) -> Any:
    kind = policy.param(name).kind
    if kind == "percent":
        return Fraction(text.rstrip("%")) / 100
    return int(Fraction(text) * UNIT)


def _verifier_valuation(policy: Policy, report: dict[str, Any], entry: dict[str, Any]) -> dict[str, Any] | None:
    """The param values of the verifier's counterexample for `entry` (first agreement)."""
    index = entry.get("counterexample")
    if index is None:
        return None
    rows = report["counterexamples"][index].get("params") or [{}]
    known = {p.name for p in policy.params}
    values = {k: _parse_value(policy, k, v) for k, v in rows[0].items() if k in known}
    for p in policy.params:
        values.setdefault(p.name, p.lo)
    return values


def _events(report: dict[str, Any], entry: dict[str, Any]) -> list[str]:
    index = entry.get("counterexample")
    if index is None:
        return []
    cx = report["counterexamples"][index]
    out = [str(e.get("command")) for e in cx.get("events", [])]
    if cx.get("refused"):
        out.append(f"refused {cx['refused']}")
    return out


def _finding_text(policy: Policy, finding: Finding) -> str:
    return (
        f"enumerator witness ({finding.count} grid valuations violate it): "
        f"{valuation_text(policy, finding.valuation)}; "
        f"shortest path ({finding.depth} moves): {' ; '.join(finding.path) or '(initial state)'}"
    )


def check_policy(seed: int, tally: Tally) -> None:
    """Generate, check, verify and enumerate one policy; record what disagrees."""
    policy = generate(seed)
    source = render(policy)
    tally.generated += 1
    files = _files(source, f"gen_{seed}.pact")
    if files is None:
        tally.discarded += 1
        return
    problems: list[str] = []
    try:
        # Proofs (k-induction) cost most of the time: every fifth policy runs with them, so
        # "proved" claims are checked too, and the rest test the search alone.
        proofs = seed % PROOF_EVERY == 0
        report = verify_files(files, VerifyOptions(bounds=VERIFY_BOUNDS, mutants=False, proofs=proofs))
    except VerifyError as exc:
        if exc.code == "PW390":
            tally.replay_failures += 1
            tally.failures.append(f"seed {seed}: a counterexample did not replay: {exc}\n{source}")
        else:
            tally.refused[exc.code] += 1
        return
    except Exception as exc:
        tally.crashes += 1
        tally.failures.append(f"seed {seed}: the verifier crashed: {type(exc).__name__}: {exc}\n{source}")
        return
    tally.verified += 1
    findings, outcome, _ = enumerate_policy(policy, max_depth=ENUM_DEPTH)
    verdicts = _verdicts(report)
    if report["verdict"] == "pass":
        tally.pass_verdicts += 1
    if findings:
        tally.enum_violated_policies += 1
        if report["verdict"] == "pass":
            tally.violated_but_pass += 1
    for cx in report["counterexamples"]:
        if cx.get("replayed") is False:
            tally.replay_failures += 1
            problems.append(f"counterexample for {cx.get('invariants')} not replayed")
    found = {f.invariant for f in findings}
    for finding in findings:
        tally.enum_violations[finding.invariant] += 1
        entry = verdicts.get(finding.invariant)
        verdict = entry["verdict"] if entry else None
        if verdict == "violated":
            continue
        false_pass = (
            report["verdict"] == "pass"
            or entry is None
            or verdict in ("proved", "vacuous-suspect")
            or entry.get("proved") is True
            or (verdict == "holds-to-bound" and _complete(report))
        )
        if false_pass:
            tally.false_passes["built-in" if finding.invariant in BUILTIN_CHECKED else "policy"] += 1
            kind = "FALSE PASS"
        elif finding.depth <= ENUM_DEPTH:
            tally.missed_in_bound += 1
            kind = "MISSED WITHIN BOUND"
        else:
            continue
        problems.append(
            f"{kind}: `{finding.invariant}` violated by the enumerator, verifier says "
            f"{verdict or 'nothing (no such invariant in the report)'} (report verdict "
            f"{report['verdict']}, complete {_complete(report)}); {_finding_text(policy, finding)}"
        )
    checked = {name for name, _ in policy.invariants} | set(BUILTIN_CHECKED)
    for name, entry in verdicts.items():
        if entry["verdict"] != "violated":
            continue
        tally.verifier_violations[name] += 1
        if name in found or name not in checked:
            continue
        valuation = _verifier_valuation(policy, report, entry)
        events = _events(report, entry)
        alone = check_valuation(policy, valuation, ENUM_DEPTH) if valuation is not None else None
        if alone is not None and name in alone.violated:
            kind = "ENUMERATOR GRID GAP"
        elif alone is not None and alone.truncated and len(events) > ENUM_DEPTH:
            tally.verifier_only["beyond enumerator depth"] += 1
            continue
        else:
            kind = "VERIFIER FALSE ALARM"
        tally.verifier_only[kind] += 1
        shown = valuation_text(policy, valuation) if valuation is not None else "(no params in the counterexample)"
        problems.append(
            f"{kind}: the verifier reports `{name}` violated, the enumerator does not (grid search "
            f"{'truncated' if outcome.truncated else 'exhausted'}); verifier witness {shown}, events: "
            f"{' ; '.join(events)}"
        )
    if problems:
        tally.failures.append(f"seed {seed}:\n  " + "\n  ".join(problems) + f"\n--- policy ---\n{source}")


def run(first: int, count: int) -> Tally:
    tally = Tally()
    for seed in range(first, first + count):
        check_policy(seed, tally)
    return tally


# the enumerator's own semantics, against the docs' worked examples --------------------


def _split_policy(amount: str, portions: str, remaining: str) -> Policy:
    """A one-split policy to read the enumerator's allotment off (built through the generator's types)."""
    from tests._policy_gen import Account, Param, Plain, Split, Transition

    def money(text: str) -> int:
        return int(Fraction(text) * UNIT)

    parts = tuple(
        (("pc", Fraction(p.rstrip("%")) / 100) if p.endswith("%") else ("m", money(p)), d)
        for p, d in (x.split(":") for x in portions.split())
    )
    percent = portions.endswith("%") or "%:" in portions
    accounts = ("a", "b", "c", "escrow")
    return Policy(
        seed=0,
        params=(Param("price", "money", money(amount), money(amount)),),
        accounts=(Account("world", "world", external=True), *(Account(a, f"acc:{a}") for a in accounts)),
        states=("draft", "done"),
        finals=frozenset({"done"}),
        transitions=(
            Transition(
                "pay",
                ("draft",),
                "done",
                ("buyer",),
                None,
                (),
                (
                    Plain(("p", "price"), "world", "escrow"),
                    Split(("p", "price"), "escrow", parts, remaining, percent),
                ),
            ),
        ),
        invariants=(),
        stamps=(),
    )


def _allotment(amount: str, portions: str, remaining: str) -> dict[str, str]:
    from tests._policy_gen import money_text

    policy = _split_policy(amount, portions, remaining)
    enum = Enumerator(policy, [{"price": policy.params[0].lo}])
    _, commits, succ = enum.step(enum.initial(), 0, policy.transitions[0])
    assert commits == 1
    held = {a: enum.values(f)[0] for a, f in zip(enum.internal, succ.bals, strict=True)}
    return {a: money_text(v) for a, v in held.items() if v}


def test_enumerator_allots_percent_splits_as_the_docs_say() -> None:
    # docs/language.md, "Splits": 10.01 split 10% / remaining: platform 1.01, seller 9.00
    assert _allotment("10.01", "10%:a", "b") == {"a": "1.01", "b": "9.00"}
    # 33.3333% to a and b, remaining to c, on 1.00: a 0.34, b 0.33, c 0.33
    assert _allotment("1.00", "33.3333%:a 33.3333%:b", "c") == {"a": "0.34", "b": "0.33", "c": "0.33"}


def test_enumerator_caps_fixed_portions_in_order() -> None:
    # docs/language.md: 5.00 to fees, 3 to reserve, remaining to seller, on 6.00: 5.00, 1.00, 0.00
    assert _allotment("6.00", "5.00:a 3.00:b", "c") == {"a": "5.00", "b": "1.00"}


def test_enumerator_finds_a_point_guard_overdraft() -> None:
    """`when price == 37.41` enables an overdraft at one value of a 1.00 .. 100.00 range."""
    from tests._policy_gen import Account, Param, Plain, Transition

    policy = Policy(
        seed=0,
        params=(Param("price", "money", 100, 10000),),
        accounts=(
            Account("world", "world", external=True),
            Account("escrow", "e:{agreement}"),
            Account("seller", "s:x"),
        ),
        states=("draft", "funded", "done"),
        finals=frozenset({"done"}),
        transitions=(
            Transition("fund", ("draft",), "funded", ("buyer",), None, (), (Plain(("p", "price"), "world", "escrow"),)),
            Transition(
                "odd",
                ("funded",),
                "done",
                ("buyer",),
                ("cmp", "==", ("p", "price"), ("m", 3741)),
                (),
                (Plain(("+", ("p", "price"), ("m", 100)), "escrow", "seller"),),
            ),
            Transition("pay", ("funded",), "done", ("buyer",), None, (), (Plain(("p", "price"), "escrow", "seller"),)),
        ),
        invariants=(("seller_bounded", ("cmp", "<=", ("bal", "seller"), ("p", "price"))),),
        stamps=(),
    )
    findings, outcome, _ = enumerate_policy(policy)
    assert not outcome.truncated
    by_name = {f.invariant: f for f in findings}
    assert set(by_name) == {"funds_available"}
    assert by_name["funds_available"].valuation == {"price": 3741}
    assert by_name["funds_available"].count == 1
    assert by_name["funds_available"].path == ["fund", "refused odd"]


def test_generator_is_deterministic_and_policies_check() -> None:
    assert render(generate(11)) == render(generate(11))
    assert all(_files(render(generate(seed)), "g.pact") is not None for seed in range(20))


# the acceptance test ------------------------------------------------------------------


@pytest.mark.skipif(POLICIES <= 0, reason="PACTWRIGHT_DIFFERENTIAL_POLICIES is 0")
def test_verifier_agrees_with_brute_force_enumeration() -> None:
    """Fails until the verifier is exact over amounts (issue 8); the message lists each disagreement."""
    started = time.monotonic()
    tally = run(FIRST, POLICIES)
    elapsed = time.monotonic() - started
    summary = f"{tally.summary()}; {elapsed:.1f} s"
    print(summary)  # shown with `pytest -s`
    assert tally.verified >= min(300, POLICIES), f"too few policies verified: {summary}"
    shown = "\n\n".join(tally.failures[:SHOWN])
    assert not tally.failures, f"{len(tally.failures)} policies disagree: {summary}\n\n{shown}"
