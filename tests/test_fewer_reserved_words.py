"""Fewer reserved words and flat chains (new in 1.1), from check to the runtime.

tests/fixtures/formerly_reserved.pact names a role `by`, params `total` and
`key`, an account `once`, states `approved` and `final`, a transition `by` and
an invariant `total`: all reserved words until 1.1, all names now. It checks,
compiles, verifies and runs. A long flat sum and `and` chain are not "nested
too deeply" (PW113); a chain of more than 1,000 terms is PW187, refused fast
and without recursion (tests/test_long_sums.py carries long chains through
every stage).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import datetime
from functools import cache
from pathlib import Path

import pytest

from pactwright.compiler.parser import keywords, reservations
from pactwright.compiler.pipeline import check_text
from pactwright.runtime import TestClock, open_agreement, submit
from pactwright.runtime.activation import FixedClock, activate_files
from pactwright.runtime.store import open_store
from tests.signed_bundles import BACKENDS, NOW, compile_verified, default_trust, sign, temporary_store

POLICY = Path(__file__).resolve().parent / "fixtures" / "formerly_reserved.pact"
T0 = 1780315200  # 2026-06-01T12:00:00Z


def test_only_the_words_the_parser_cannot_tell_from_a_name_are_reserved() -> None:
    assert keywords() == {"final", "not", "now", "remaining"}
    assert reservations()["remaining"].constructs == {"a split portion"}
    assert reservations()["now"].constructs == {"an expression"}


@cache
def _built() -> tuple[tuple[str, bytes], ...]:
    bundle, verdict = compile_verified(POLICY.read_bytes(), POLICY.name)
    assert verdict == "pass"
    return tuple(sorted(bundle.items()))


def test_the_policy_checks_and_its_names_are_names() -> None:
    result = check_text(POLICY.read_text("utf-8"))
    assert result.candidate is not None, [f"{d.code} {d.message}" for d in result.diagnostics]
    data = result.candidate.to_json()
    assert [r["name"] for r in data["roles"]] == ["by", "once"]  # type: ignore[index]
    go = data["transitions"][0]  # type: ignore[index]
    assert go["name"] == "by" and go["sources"] == ["approved"] and go["target"] == "final" and go["roles"] == ["by"]


@pytest.fixture(params=BACKENDS)
def url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    with temporary_store(request.param, tmp_path) as store_url:
        with open_store(store_url) as store:
            activate_files(store, sign(dict(_built())), default_trust(), clock=FixedClock(datetime.fromisoformat(NOW)))
        yield store_url


def test_an_agreement_opens_and_the_command_commits(url: str) -> None:
    with open_store(url) as store:
        open_agreement(store, "t.formerly_reserved", {"total": "20.00", "key": "5.00"}, {"by": "bo", "once": "oz"},
                       agreement_id="a1", clock=TestClock(T0))  # fmt: skip
        result = submit(store, "a1", "by", "by", "bo", "go", clock=TestClock(T0 + 60))
    assert result.state == "final"
    assert [p["amount"] for p in result.postings] == ["2000"]


def _long(terms: int) -> str:
    total = " + ".join(["p"] * terms)
    every = " and ".join(["p >= 0.00"] * terms)
    return f"""pact "t.long" version "1.0.0"
currency EUR scale 2
role buyer
param p: money between 0.00 and 1.00
account card "c:{{buyer}}" external
account escrow "e:{{agreement}}"
state start initial
state paid final
transition pay: start -> paid {{
  by buyer
  when {total} <= {terms}.00
  transfer {total} from card to escrow
}}
invariant every: {every}
"""


def test_a_flat_sum_and_an_and_chain_of_90_terms_build_and_run(tmp_path: Path) -> None:
    bundle, verdict = compile_verified(_long(90).encode(), "long.pact")
    assert verdict == "pass"
    with temporary_store("sqlite", tmp_path) as store_url, open_store(store_url) as store:
        activate_files(store, sign(bundle), default_trust(), clock=FixedClock(datetime.fromisoformat(NOW)))
        open_agreement(store, "t.long", {"p": "0.50"}, {"buyer": "bo"}, agreement_id="a1", clock=TestClock(T0))
        result = submit(store, "a1", "pay", "buyer", "bo", "pay", clock=TestClock(T0 + 60))
    assert result.state == "paid"
    assert [p["amount"] for p in result.postings] == ["4500"]


@pytest.mark.parametrize("terms", [100, 1_000])
def test_a_chain_of_a_thousand_terms_checks(terms: int) -> None:
    result = check_text(_long(terms))
    assert result.candidate is not None, [f"{d.code} {d.message}" for d in result.diagnostics]


@pytest.mark.parametrize("terms", [1_001, 10_000])
def test_a_longer_chain_is_pw187_fast_and_never_nested_too_deeply(terms: int) -> None:
    started = time.perf_counter()
    result = check_text(_long(terms))
    assert {d.code for d in result.diagnostics} == {"PW187"}
    assert f"{terms} terms in one chain of `+`" in result.diagnostics[0].message
    assert result.candidate is None
    assert time.perf_counter() - started < 10


def test_a_chain_whose_left_operands_are_parenthesised_is_nesting() -> None:
    text = _long(1).replace("when p <= 1.00", "when " + "(" * 120 + "p" + " + p)" * 120 + " <= 1.00")
    assert [d.code for d in check_text(text).diagnostics] == ["PW113"]


# fmt reads names that were keywords as the parser does --------------------------------------------------

PAYROLL = Path(__file__).resolve().parent.parent / "policies" / "payroll_batch.pact"


@pytest.mark.parametrize("path", [POLICY, PAYROLL], ids=["formerly_reserved", "payroll_batch"])
def test_fmt_formats_a_policy_whose_names_were_keywords(path: Path) -> None:
    """The formatter's comment scan once read `== total }` with `total` as the keyword and failed (exit 3)."""
    from pactwright.compiler.formatter import format_policy

    text = path.read_text("utf-8")
    formatted = format_policy(text)
    before, after = check_text(text).candidate, check_text(formatted).candidate
    assert before is not None and after is not None
    assert after.to_json() == before.to_json()
    assert format_policy(formatted) == formatted


# payroll_batch: 101 lines summed flat, a state `approved`, a param `total` ------------------------------

LINES = [f"{12 + k % 7}.{k % 100:02d}" for k in range(1, 102)]  # 101 line amounts, exact in minor units
LINES_TOTAL = sum(int(v.replace(".", "")) for v in LINES)


@cache
def _payroll() -> tuple[tuple[str, bytes], ...]:
    bundle, verdict = compile_verified(PAYROLL.read_bytes(), PAYROLL.name)
    assert verdict == "pass"
    return tuple(sorted(bundle.items()))


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_payroll_batch_of_101_lines_is_approved_only_when_they_add_up(backend: str, tmp_path: Path) -> None:
    from pactwright.errors import PactwrightError
    from pactwright.money import format_money

    params = {f"line_{k:03d}": value for k, value in enumerate(LINES, start=1)}
    with temporary_store(backend, tmp_path) as url, open_store(url) as store:
        activate_files(store, sign(dict(_payroll())), default_trust(), clock=FixedClock(datetime.fromisoformat(NOW)))
        parties = {"treasurer": "tess", "approver": "abe"}
        right = {**params, "total": format_money(LINES_TOTAL, 2)}
        wrong = {**params, "total": format_money(LINES_TOTAL + 1, 2)}  # one cent more than the lines
        open_agreement(store, "payroll.batch", right, parties, agreement_id="p1", clock=TestClock(T0))
        open_agreement(store, "payroll.batch", wrong, parties, agreement_id="p2", clock=TestClock(T0))
        assert submit(store, "p1", "approve", "approver", "abe", "a", clock=TestClock(T0 + 60)).state == "approved"
        paid = submit(store, "p1", "pay", "treasurer", "tess", "p", clock=TestClock(T0 + 120))
        assert paid.state == "paid"
        assert [p["amount"] for p in paid.postings] == [str(LINES_TOTAL)]
        with pytest.raises(PactwrightError) as refused:
            submit(store, "p2", "approve", "approver", "abe", "a", clock=TestClock(T0 + 60))
        assert refused.value.code == "PW512"
