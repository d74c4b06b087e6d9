"""Long flat chains (new in 1.1): a sum of 300 terms is not "nested too deeply".

A chain of `+`, `and` or `or` longer than CHAIN_TERMS (100) terms is one
node of the candidate; a shorter one keeps the binary form 1.0 wrote, so old
candidates keep their hash. The policy below transfers a sum of N terms of
one param under a guard on that sum, and an invariant (an `and` chain of N
terms whose last one caps the escrow) that holds or fails by a single minor
unit, so each verdict depends on every term. Each long policy is compared
with the same sums written as parenthesised groups of at most 50 terms
(nested, binary): the same verdicts, the same amounts. Deep nesting is still
refused (PW113), and so are a chain of more than 1,000 terms and a long
chain that mixes operators (PW187), each with its own message.
"""

from __future__ import annotations

import json
from datetime import datetime
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from pactwright.candidate import CHAIN_TERMS
from pactwright.compiler.bundle import compile_candidate
from pactwright.compiler.pipeline import check_text
from pactwright.runtime import TestClock, open_agreement, submit
from pactwright.runtime._evaluate import View, evaluate
from pactwright.runtime.activation import FixedClock, activate_files
from pactwright.runtime.store import open_store
from pactwright.verifier.explorer import Bounds
from pactwright.verifier.verify import VerifyOptions, verify_files
from tests.signed_bundles import NOW, compile_verified, default_trust, sign, temporary_store

T0 = 1780315200  # 2026-06-01T12:00:00Z
HALF = 50  # the guard lets p be at most 0.50, so the escrow holds at most N * 50 minor units


def _chain(term: str, op: str, terms: int, grouped: bool) -> str:
    """`term op term op ...`, flat, or as parenthesised groups of 50 (each one binary, as in 1.0)."""
    if not grouped:
        return f" {op} ".join([term] * terms)
    sizes = [50] * (terms // 50) + ([terms % 50] if terms % 50 else [])
    return f" {op} ".join("(" + f" {op} ".join([term] * size) + ")" for size in sizes)


def _policy(terms: int, cap: int, grouped: bool = False) -> str:
    total = _chain("p", "+", terms, grouped)
    every = f"balance(escrow) <= {cap // 100}.{cap % 100:02d}"
    if terms > 1:
        every = _chain("p >= 0.00", "and", terms - 1, grouped) + " and " + every
    guard = terms * HALF
    return f"""pact "t.long_sums" version "1.0.0"
currency EUR scale 2
role buyer
param p: money between 0.00 and 1.00
account card "c:{{buyer}}" external
account escrow "e:{{agreement}}"
state start initial
state paid final
transition pay: start -> paid {{
  by buyer
  when {total} <= {guard // 100}.{guard % 100:02d}
  transfer {total} from card to escrow
}}
invariant capped: {every}
"""


@cache
def _verified(terms: int, cap: int, grouped: bool) -> tuple[tuple[tuple[str, bytes], ...], str]:
    bundle, verdict = compile_verified(_policy(terms, cap, grouped).encode(), "long_sums.pact")
    return tuple(sorted(bundle.items())), verdict


def _depth(expr: dict[str, Any]) -> int:
    """The height of an expression tree, counted without recursion."""
    deepest, stack = 0, [(expr, 1)]
    while stack:
        node, level = stack.pop()
        deepest = max(deepest, level)
        stack += [(arg, level + 1) for arg in node.get("args", [])]
    return deepest


@pytest.mark.parametrize("terms", [100, 300])
def test_a_flat_sum_checks_and_its_candidate_is_byte_stable(terms: int) -> None:
    first, second = check_text(_policy(terms, terms * HALF)), check_text(_policy(terms, terms * HALF))
    assert first.candidate is not None, [f"{d.code} {d.message}" for d in first.diagnostics]
    assert second.candidate is not None
    assert first.candidate.canonical_bytes() == second.candidate.canonical_bytes()
    assert first.candidate.hash() == second.candidate.hash()
    files = compile_candidate(first.candidate, first.source_map, "long_sums.pact")
    again = compile_candidate(second.candidate, second.source_map, "long_sums.pact")
    assert files == again
    table = json.loads(files["transitions.json"])
    total = table["transitions"][0]["guard"]["args"][0]
    assert total["op"] == "+"
    if terms > CHAIN_TERMS:
        # One node over every term, in written order, so the documents nest as the policy does.
        assert len(total["args"]) == terms and _depth(total) == 2
    else:
        # A chain 1.0 could have held keeps its binary form (and its hash).
        assert len(total["args"]) == 2 and _depth(total) == terms
    assert {"model.json", "transitions.json"} <= set(files)
    assert any(path.endswith(".num") for path in files)


@pytest.mark.parametrize("terms", [100, 300])
def test_the_verdict_depends_on_every_term_and_matches_the_nested_form(terms: int) -> None:
    # The escrow holds at most terms * 50 minor units: a cap of exactly that holds, one less fails.
    for cap, expected in ((terms * HALF, "pass"), (terms * HALF - 1, "fail")):
        flat = _verified(terms, cap, grouped=False)[1]
        nested = _verified(terms, cap, grouped=True)[1]
        assert (flat, nested) == (expected, expected), (terms, cap)


def test_z3_sees_the_exact_sum_flat_as_nested() -> None:
    """z3 proves the long invariant by induction and bounds the transfer at exactly 300 * 1.00."""
    terms = 300
    for grouped in (False, True):
        result = check_text(_policy(terms, terms * HALF, grouped))
        assert result.candidate is not None
        files = compile_candidate(result.candidate, result.source_map, "long_sums.pact")
        report = verify_files(files, VerifyOptions(Bounds(faults=0), mutants=False, proofs=True))
        capped = next(entry for entry in report["invariants"] if entry["name"] == "capped")
        assert capped["verdict"] == "proved" and "k-induction" in capped["method"], grouped
        share = next(entry for entry in report["amounts"] if entry["kind"] == "share_range")
        assert (share["verdict"], share["min"], share["max"]) == ("proved", "0", str(terms * 100)), grouped
        assert report["verdict"] == "pass"


@pytest.mark.parametrize("terms", [100, 300])
def test_the_runtime_evaluator_computes_the_exact_sum(terms: int) -> None:
    table = json.loads(dict(_verified(terms, terms * HALF, False)[0])["transitions.json"])
    transition = table["transitions"][0]
    view = View(now=T0, params={"p": 37}, stamps={}, fired={}, balances={}, reached=frozenset(),
                approved=frozenset(), final=False)  # fmt: skip
    assert evaluate(transition["guard"]["args"][0], view) == terms * 37
    assert evaluate(transition["postings"][0]["amount"], view) == terms * 37
    assert evaluate(transition["guard"], view) is True
    assert evaluate(transition["guard"], View(**{**view.__dict__, "params": {"p": 51}})) is False
    invariant = table["invariants"][0]["expr"]
    assert evaluate(invariant, View(**{**view.__dict__, "balances": {"escrow": terms * HALF}})) is True
    assert evaluate(invariant, View(**{**view.__dict__, "balances": {"escrow": terms * HALF + 1}})) is False


def test_an_agreement_commits_the_exact_sum(tmp_path: Path) -> None:
    bundle = dict(_verified(300, 300 * HALF, False)[0])
    with temporary_store("sqlite", tmp_path) as store_url, open_store(store_url) as store:
        activate_files(store, sign(bundle), default_trust(), clock=FixedClock(datetime.fromisoformat(NOW)))
        open_agreement(store, "t.long_sums", {"p": "0.37"}, {"buyer": "bo"}, agreement_id="a1", clock=TestClock(T0))
        result = submit(store, "a1", "pay", "buyer", "bo", "pay", clock=TestClock(T0 + 60))
    assert result.state == "paid"
    assert [p["amount"] for p in result.postings] == [str(300 * 37)]


def test_deep_parentheses_are_nesting_and_say_so() -> None:
    text = _policy(1, HALF).replace("when p <= 0.50", "when " + "p + (" * 120 + "p" + ")" * 120 + " <= 0.50")
    result = check_text(text)
    assert [d.code for d in result.diagnostics] == ["PW113"]
    assert "nested too deeply" in result.diagnostics[0].message
    assert "levels" in result.diagnostics[0].hint


def test_more_than_a_thousand_terms_is_pw187_and_names_the_count() -> None:
    result = check_text(_policy(1, HALF).replace("when p <= 0.50", "when " + " + ".join(["p"] * 1001) + " <= 0.50"))
    assert [d.code for d in result.diagnostics] == ["PW187"]
    assert "1001 terms in one chain of `+`" in result.diagnostics[0].message
    assert check_text(_policy(1000, 1000 * HALF)).candidate is not None


def test_a_long_chain_that_mixes_operators_is_pw187() -> None:
    mixed = " + ".join(["p - p"] * 80)
    result = check_text(_policy(1, HALF).replace("when p <= 0.50", f"when {mixed} <= 0.50"))
    assert [d.code for d in result.diagnostics] == ["PW187"]
    assert "mixes operators" in result.diagnostics[0].message


def test_the_formatter_prints_a_long_chain_flat() -> None:
    from pactwright.compiler.formatter import format_policy

    text = _policy(1000, 1000 * HALF)
    formatted = format_policy(text)
    assert check_text(formatted).candidate.hash() == check_text(text).candidate.hash()  # type: ignore[union-attr]
