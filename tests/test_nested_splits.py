"""Nested splits (new in 1.1): a fixed fee and a percent of the rest, moved the same way everywhere.

`pactwright.movement.split` shares a nested split's part by the nested rule;
the Numscript interpreter does the same from the program's nested
destination. They must agree on generated nested rules, on the rounding
edges of policies/marketplace_nested_fee.pact, and on the program the
compiler emits for it. The runtime commits the nested split's postings (its
PW521 check compares them with the kernel's) and the embedded ledger, fed by
the worker, ends with the same balances.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from fractions import Fraction
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pactwright import movement
from pactwright.compiler.bundle import compile_candidate
from pactwright.compiler.pipeline import check_bytes
from pactwright.runtime import TestClock, open_agreement, show, submit
from pactwright.runtime.ledger import InMemoryLedger
from pactwright.runtime.numscript import parse_program, run_program
from pactwright.runtime.store import open_store
from pactwright.runtime.worker import Worker
from tests.signed_bundles import (
    BACKENDS,
    store_with_policy,
)

ASSET = "EUR/2"
ACCOUNTS = ("a", "b", "c")
WHOLE = 10**6
POLICY = Path(__file__).resolve().parent.parent / "policies" / "marketplace_nested_fee.pact"
PACT_ID = "marketplace.nested_fee"
PARTIES = {"buyer": "bea", "seller": "sol"}
T0 = 1780315200  # 2026-06-01T12:00:00Z
Rule = dict[str, Any]


def _percent_text(millionths: int) -> str:
    return f"{millionths // 10_000}.{millionths % 10_000:04d}%"


@st.composite
def blocks(
    draw: st.DrawFn, prefix: str, depth: int
) -> tuple[Rule, dict[str, movement.ParamValue], str, dict[str, str]]:
    """A split rule (capped or allotment), its params, its Numscript destination and variables;
    at depth 0 a portion may send its part on to a nested block."""
    capped = draw(st.booleans())
    count = draw(st.integers(min_value=1 if capped else 0, max_value=3))
    portions: list[Rule] = []
    params: dict[str, movement.ParamValue] = {}
    variables: dict[str, str] = {}
    lines: list[str] = []
    sizes: list[int] = []
    if not capped:
        cuts = sorted(draw(st.lists(st.integers(0, WHOLE), min_size=count, max_size=count)))
        sizes = [high - low for low, high in zip([0, *cuts], cuts, strict=False)]
    for index in range(count + 1):
        name = f"{prefix}{index}"
        nested = depth == 0 and draw(st.integers(0, 2)) == 0
        if nested:
            rule, inner_params, text, inner_vars = draw(blocks(f"{name}_", depth + 1))
            where: Rule = {"split": rule}
            params |= inner_params
            variables |= inner_vars
        else:
            to = draw(st.sampled_from(ACCOUNTS))
            where, text = {"to": to}, f"@{to}"
        if index == count:
            portions.append({"kind": "remaining", **where})
            lines.append(f"remaining to {text}")
        elif capped:
            cap = draw(st.one_of(st.integers(0, 3), st.integers(0, 10**7)))
            if draw(st.booleans()):
                portions.append({"kind": "amount", "param": name, **where})
                params[name], variables[name] = cap, f"{ASSET} {cap}"
                lines.append(f"max ${name} to {text}")
            else:
                portions.append({"kind": "amount", "max_minor": str(cap), **where})
                lines.append(f"max [{ASSET} {cap}] to {text}")
        else:
            size = sizes[index]
            if draw(st.booleans()):
                portions.append({"kind": "percent", "param": name, **where})
                params[name], variables[name] = Fraction(size, WHOLE), _percent_text(size)
                lines.append(f"${name} to {text}")
            else:
                share = Fraction(size, WHOLE)
                percent = _percent_text(size)
                entry = {"kind": "percent", "percent": percent[:-1], "share": f"{share.numerator}/{share.denominator}"}
                portions.append(entry | where)
                lines.append(f"{percent} to {text}")
    kind = "capped" if capped else "allotment"
    return {"kind": kind, "portions": portions}, params, "{ " + "  ".join(lines) + " }", variables


def _interpreted(amount: int, destination: str, variables: dict[str, str]) -> list[tuple[str, str, int]]:
    kinds = {name: "portion" if value.endswith("%") else "monetary" for name, value in variables.items()}
    decls = "\n".join(f"  {kind} ${name}" for name, kind in {"amount": "monetary", **kinds}.items())
    text = f"vars {{\n{decls}\n}}\nsend $amount (\n  source = @world\n  destination = {destination}\n)\n"
    postings = run_program(parse_program(text), {"amount": f"{ASSET} {amount}", **variables}, {})
    return [(p.source, p.destination, p.amount) for p in postings]


def _agree(amount: int, rule: Rule, params: dict[str, movement.ParamValue], destination: str,
           variables: dict[str, str]) -> list[tuple[str, int]]:  # fmt: skip
    assert movement.ledger_postings(amount, "world", rule, params) == _interpreted(amount, destination, variables)
    parts = movement.split(amount, rule, params)
    assert [account for account, _ in parts] == movement.rule_accounts(rule)
    assert sum(part for _, part in parts) == amount and all(part >= 0 for _, part in parts)
    return parts


AMOUNTS = st.one_of(
    st.sampled_from([0, 1, 2, 3, 149, 150, 151, 152, 159, 160, 161, 999_999]),
    st.integers(min_value=0, max_value=10**12),
    st.integers(min_value=0, max_value=2**80),
)


@settings(max_examples=500, deadline=None)
@given(amount=AMOUNTS, case=blocks("p", 0))
def test_nested_splits_move_as_numscript(amount: int, case: tuple[Any, ...]) -> None:
    _agree(amount, *case)


FEE_RULE: Rule = {
    "kind": "capped",
    "portions": [
        {"kind": "amount", "max_minor": "150", "to": "platform"},
        {"kind": "remaining", "split": {"kind": "allotment", "portions": [
            {"kind": "percent", "percent": "10", "share": "1/10", "to": "platform"},
            {"kind": "remaining", "to": "seller"},
        ]}},
    ],
}  # fmt: skip
FEE_DESTINATION = "{ max [EUR/2 150] to @platform  remaining to { 10% to @platform  remaining to @seller } }"


@pytest.mark.parametrize(
    ("amount", "platform", "seller"),
    [
        (0, 0, 0),
        (1, 1, 0),  # the fee is capped by the price
        (150, 150, 0),
        (151, 151, 0),  # one unit left: 10% and 90% round to 0, the leftover unit goes to the first portion
        (152, 151, 1),
        (159, 151, 8),
        (160, 151, 9),  # exactly 10% of 10
        (161, 152, 9),
        (1000, 235, 765),
        (6491, 785, 5706),  # 634.1 and 5706.9: the leftover unit to the platform
    ],
)
def test_fixed_fee_then_percent_at_the_rounding_edges(amount: int, platform: int, seller: int) -> None:
    parts = _agree(amount, FEE_RULE, {}, FEE_DESTINATION, {})
    totals = {"platform": 0, "seller": 0}
    for account, part in parts:
        totals[account] += part
    assert totals == {"platform": platform, "seller": seller}
    expected = [(a, n) for a, n in (("platform", platform), ("seller", seller)) if n]
    assert [(d, n) for _, d, n in movement.ledger_postings(amount, "world", FEE_RULE, {})] == expected


@cache
def _compiled() -> dict[str, bytes]:
    result = check_bytes(POLICY.read_bytes())
    assert result.candidate is not None
    return dict(compile_candidate(result.candidate, result.source_map, POLICY.name))


def test_the_emitted_program_nests_and_agrees_with_the_table() -> None:
    bundle = _compiled()
    program = bundle["ledger/settle.num"].decode()
    assert "    max [EUR/2 150] to @platform:fees\n    remaining to {\n      10% to @platform:fees\n" in program
    table = json.loads(bundle["transitions.json"])
    settle = next(t for t in table["transitions"] if t["id"] == "settle")
    rule = settle["postings"][0]["rule"]
    assert rule["portions"][1]["split"]["kind"] == "allotment"
    parsed = parse_program(program)
    for amount in (500, 501, 999, 1000, 6491, 200_000):
        variables = {
            "account_escrow": "escrow:a1",
            "account_seller": "sellers:sol:payable",
            "price": f"{ASSET} {amount}",
        }
        found = [(p.destination, p.amount) for p in run_program(parsed, variables, {("escrow:a1", ASSET): amount})]
        names = {"platform": "platform:fees", "seller": "sellers:sol:payable"}
        ours = [(names[d], n) for _, d, n in movement.ledger_postings(amount, "escrow", rule, {})]
        assert found == ours


def test_a_deeper_nesting_or_an_empty_block_is_refused() -> None:
    head = POLICY.read_text()
    deeper = head.replace("      remaining to seller\n", "      remaining to {\n        remaining to seller\n      }\n")
    assert [d.code for d in check_bytes(deeper.encode()).diagnostics] == ["PW177"]
    empty = head.replace("      commission to platform\n      remaining to seller\n", "")
    assert [d.code for d in check_bytes(empty.encode()).diagnostics] == ["PW178"]


@pytest.fixture(params=BACKENDS)
def url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    with store_with_policy(request.param, tmp_path, POLICY) as store_url:
        yield store_url


@pytest.mark.parametrize(("price", "platform", "seller"), [("5.00", "185", "315"), ("64.91", "785", "5706")])
def test_settle_commits_the_nested_split_and_the_ledger_agrees(
    url: str, price: str, platform: str, seller: str
) -> None:
    with open_store(url) as store:
        open_agreement(store, PACT_ID, {"price": price}, PARTIES, agreement_id="n1", clock=TestClock(T0))
        submit(store, "n1", "pay", "buyer", "bea", "pay", clock=TestClock(T0))
        result = submit(store, "n1", "settle", "buyer", "bea", "settle", clock=TestClock(T0 + 60))
        assert result.state == "settled"
        assert [(p["source"], p["destination"], p["amount"]) for p in result.postings] == [
            ("escrow", "platform", platform),
            ("escrow", "seller", seller),
        ]
        ledger = InMemoryLedger()
        outcomes = Worker(store, ledger, TestClock(T0 + 120)).drain()
        assert [o.status for o in outcomes] == ["delivered", "delivered"]
        view = show(store, "n1", ledger=ledger)
    balances = view.agreement.balances
    assert (balances["platform"], balances["seller"], balances["escrow"]) == (int(platform), int(seller), 0)
    held = ledger.balances(["platform:fees", "sellers:sol:payable", "escrow:n1"])
    assert held == {"platform:fees": int(platform), "sellers:sol:payable": int(seller), "escrow:n1": 0}
    assert set(ledger.asset_totals().values()) == {0}
