"""The kernel's money movement against the Numscript interpreter, and who uses it.

`pactwright.movement` computes a transfer's postings from its rule as
`transitions.json` / `model.json` describe it; the interpreter in
`runtime/numscript` computes them from program text. Hypothesis generates
amounts, share lists and caps, renders each rule as the Numscript program
the compiler would emit for it, and requires the same postings from both,
for every rule kind. The last tests show that the verifier's explorer and
the runtime's command path both go through this one function, and that the
command path refuses to commit when its ledger program disagrees with it.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import replace
from datetime import datetime
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pactwright import movement
from pactwright.errors import CommandError, LedgerError
from pactwright.runtime import TestClock, open_agreement, submit
from pactwright.runtime import commands as runtime_commands
from pactwright.runtime.activation import FixedClock, activate_files
from pactwright.runtime.numscript import Posting, parse_program, run_program
from pactwright.runtime.store import open_store
from pactwright.verifier import explorer as verifier_explorer
from pactwright.verifier.explorer import Bounds, Explorer
from pactwright.verifier.model import load_model
from tests.signed_bundles import BACKENDS, NOW, PACT_ID, default_trust, dump, signed, temporary_store

ASSET = "EUR/2"
ACCOUNTS = ("a", "b", "c")  # few names, so consecutive portions often share a destination
WHOLE = 10**6  # shares are drawn in millionths: a percent with four decimals, as the language allows
GOLDEN = Path(__file__).resolve().parent / "golden" / "bundles" / "marketplace_milestone"
Rule = dict[str, Any]
Case = tuple[Rule, dict[str, movement.ParamValue], str, dict[str, str]]


def _percent_text(millionths: int) -> str:
    return f"{millionths // 10_000}.{millionths % 10_000:04d}%"


def _program(destination: str, variables: Mapping[str, str]) -> str:
    kinds = {name: "portion" if value.endswith("%") else "monetary" for name, value in variables.items()}
    decls = "\n".join(f"  {kind} ${name}" for name, kind in {"amount": "monetary", **kinds}.items())
    return f"vars {{\n{decls}\n}}\nsend $amount (\n  source = @world\n  destination = {destination}\n)\n"


def _ledger(amount: int, rule: Rule, destination: str, variables: Mapping[str, str]) -> list[tuple[str, str, int]]:
    """What the interpreter posts for `rule` rendered as Numscript."""
    program = parse_program(_program(destination, variables))
    postings = run_program(program, {"amount": f"{ASSET} {amount}", **variables}, {})
    return [(p.source, p.destination, p.amount) for p in postings]


def _compare(amount: int, case: Case) -> list[tuple[str, str, int]]:
    rule, params, destination, variables = case
    ours = movement.ledger_postings(amount, "world", rule, params)
    assert ours == _ledger(amount, rule, destination, variables)
    parts = movement.split(amount, rule, params)
    assert [target for target, _ in parts] == [str(p["to"]) for p in rule.get("portions", [rule])]
    assert sum(part for _, part in parts) == amount
    assert all(part >= 0 for _, part in parts)
    net = Counter[str]()
    for account, delta in movement.move(amount, "world", rule, params):
        net[account] += delta
    expected = Counter({"world": -amount})
    for target, part in parts:
        expected[target] += part
    assert net == expected
    return ours


# -- generated rules -------------------------------------------------------------------


@st.composite
def single_rules(draw: st.DrawFn) -> Case:
    to = draw(st.sampled_from(ACCOUNTS))
    return {"kind": "single", "to": to}, {}, f"@{to}", {}


@st.composite
def allotment_rules(draw: st.DrawFn) -> Case:
    """Portions as literal shares or percent params, then `remaining`; sometimes exactly 100% before it."""
    count = draw(st.integers(min_value=0, max_value=5))
    cuts = sorted(draw(st.lists(st.integers(min_value=0, max_value=WHOLE), min_size=count, max_size=count)))
    if cuts and draw(st.booleans()):
        cuts[-1] = WHOLE  # the portions make exactly 100%: `remaining` gets nothing
    sizes = [high - low for low, high in zip([0, *cuts], cuts, strict=False)]
    portions: list[Rule] = []
    params: dict[str, movement.ParamValue] = {}
    lines: list[str] = []
    variables: dict[str, str] = {}
    for index, size in enumerate(sizes):
        to = draw(st.sampled_from(ACCOUNTS))
        if draw(st.booleans()):
            name = f"p{index}"
            portions.append({"kind": "percent", "param": name, "to": to})
            params[name] = Fraction(size, WHOLE)
            variables[name] = _percent_text(size)
            lines.append(f"${name} to @{to}")
        else:
            share = Fraction(size, WHOLE)
            text = f"{share.numerator}/{share.denominator}"
            portions.append({"kind": "percent", "percent": _percent_text(size)[:-1], "share": text, "to": to})
            lines.append(f"{_percent_text(size)} to @{to}")
    rest = draw(st.sampled_from(ACCOUNTS))
    portions.append({"kind": "remaining", "to": rest})
    lines.append(f"remaining to @{rest}")
    return {"kind": "allotment", "portions": portions}, params, "{ " + "  ".join(lines) + " }", variables


@st.composite
def capped_rules(draw: st.DrawFn) -> Case:
    """Caps as literal minor units or money params, in order, then `remaining`."""
    count = draw(st.integers(min_value=1, max_value=4))
    portions: list[Rule] = []
    params: dict[str, movement.ParamValue] = {}
    lines: list[str] = []
    variables: dict[str, str] = {}
    for index in range(count):
        to = draw(st.sampled_from(ACCOUNTS))
        cap = draw(st.one_of(st.integers(min_value=0, max_value=3), st.integers(min_value=0, max_value=10**7)))
        if draw(st.booleans()):
            name = f"c{index}"
            portions.append({"kind": "amount", "param": name, "to": to})
            params[name] = cap
            variables[name] = f"{ASSET} {cap}"
            lines.append(f"max ${name} to @{to}")
        else:
            portions.append({"kind": "amount", "max_minor": str(cap), "to": to})
            lines.append(f"max [{ASSET} {cap}] to @{to}")
    rest = draw(st.sampled_from(ACCOUNTS))
    portions.append({"kind": "remaining", "to": rest})
    lines.append(f"remaining to @{rest}")
    return {"kind": "capped", "portions": portions}, params, "{ " + "  ".join(lines) + " }", variables


AMOUNTS = st.one_of(
    st.sampled_from([0, 1, 2, 3, 7, 99, 100, 101, 999_999, 10**6 + 1]),
    st.integers(min_value=0, max_value=10**12),
    st.integers(min_value=0, max_value=2**80),
)


@settings(max_examples=300, deadline=None)
@given(amount=AMOUNTS, case=single_rules())
def test_single_moves_as_numscript(amount: int, case: Case) -> None:
    _compare(amount, case)


@settings(max_examples=600, deadline=None)
@given(amount=AMOUNTS, case=allotment_rules())
def test_allotment_moves_as_numscript(amount: int, case: Case) -> None:
    _compare(amount, case)


@settings(max_examples=600, deadline=None)
@given(amount=AMOUNTS, case=capped_rules())
def test_capped_moves_as_numscript(amount: int, case: Case) -> None:
    _compare(amount, case)


# -- the rounding edges, by hand ---------------------------------------------------------


def _allotment(*portions: tuple[str, str]) -> Case:
    """(share or `remaining`, account) pairs -> a rule and its Numscript destination."""
    rule_portions: list[Rule] = []
    lines = []
    for share, to in portions:
        if share == "remaining":
            rule_portions.append({"kind": "remaining", "to": to})
        else:
            rule_portions.append({"kind": "percent", "share": share, "to": to})
        lines.append(f"{share} to @{to}")
    return {"kind": "allotment", "portions": rule_portions}, {}, "{ " + "  ".join(lines) + " }", {}


def _capped(*portions: tuple[int | None, str]) -> Case:
    rule_portions: list[Rule] = []
    lines = []
    for cap, to in portions:
        if cap is None:
            rule_portions.append({"kind": "remaining", "to": to})
            lines.append(f"remaining to @{to}")
        else:
            rule_portions.append({"kind": "amount", "max_minor": str(cap), "to": to})
            lines.append(f"max [{ASSET} {cap}] to @{to}")
    return {"kind": "capped", "portions": rule_portions}, {}, "{ " + "  ".join(lines) + " }", {}


EDGES = [
    pytest.param(1, _allotment(("1/3", "a"), ("1/3", "b"), ("remaining", "c")), [("world", "a", 1)], id="one-unit"),
    # 10% of one unit: both floors are 0, and the left-over unit goes to the first portion, the fee.
    pytest.param(1, _allotment(("1/10", "a"), ("remaining", "b")), [("world", "a", 1)], id="one-unit-10pct"),
    pytest.param(
        100,
        _allotment(("1/6", "a"), ("1/6", "b"), ("remaining", "c")),
        [("world", "a", 17), ("world", "b", 17), ("world", "c", 66)],
        id="two-units-left-over",
    ),
    pytest.param(
        1001,
        _allotment(("1/7", "a"), ("2/7", "b"), ("remaining", "c")),
        [("world", "a", 143), ("world", "b", 286), ("world", "c", 572)],
        id="not-divisible",
    ),
    pytest.param(
        6491,
        _allotment(("1/10", "a"), ("remaining", "b")),
        [("world", "a", 650), ("world", "b", 5841)],
        id="marketplace-fee-takes-the-left-over-unit",
    ),
    pytest.param(
        6490,
        _allotment(("1/10", "a"), ("remaining", "b")),
        [("world", "a", 649), ("world", "b", 5841)],
        id="marketplace-exact",
    ),
    pytest.param(
        10,
        _allotment(("3/5", "a"), ("2/5", "b"), ("remaining", "c")),
        [("world", "a", 6), ("world", "b", 4)],
        id="exactly-100pct-remaining-gets-nothing",
    ),
    pytest.param(
        7,
        _allotment(("1/2", "a"), ("1/2", "b"), ("remaining", "c")),
        [("world", "a", 4), ("world", "b", 3)],
        id="exactly-100pct-odd-amount",
    ),
    pytest.param(
        5,
        _allotment(
            ("remaining", "a"),
        ),
        [("world", "a", 5)],
        id="remaining-only",
    ),
    pytest.param(
        3,
        _allotment(("1/3", "a"), ("1/3", "a"), ("remaining", "b")),
        [("world", "a", 2), ("world", "b", 1)],
        id="consecutive-portions-merge",
    ),
    pytest.param(0, _allotment(("1/3", "a"), ("remaining", "b")), [], id="zero-amount"),
    pytest.param(
        100,
        _capped((30, "a"), (50, "b"), (None, "c")),
        [("world", "a", 30), ("world", "b", 50), ("world", "c", 20)],
        id="capped-all-reached",
    ),
    pytest.param(20, _capped((30, "a"), (50, "b"), (None, "c")), [("world", "a", 20)], id="capped-first-absorbs"),
    pytest.param(
        80,
        _capped((30, "a"), (50, "b"), (None, "c")),
        [("world", "a", 30), ("world", "b", 50)],
        id="capped-exact-remaining-nothing",
    ),
    pytest.param(9, _capped((0, "a"), (None, "b")), [("world", "b", 9)], id="capped-zero-cap"),
]


@pytest.mark.parametrize(("amount", "case", "expected"), EDGES)
def test_rounding_edges(amount: int, case: Case, expected: list[tuple[str, str, int]]) -> None:
    assert _compare(amount, case) == expected


def test_remaining_anywhere_but_last_is_refused_by_both() -> None:
    rule, params, destination, variables = _allotment(("1/3", "a"), ("remaining", "b"), ("1/3", "c"))
    with pytest.raises(ValueError, match="last"):
        movement.split(100, rule, params)
    with pytest.raises(LedgerError, match="last clause"):
        _ledger(100, rule, destination, variables)


@pytest.mark.parametrize(
    ("amount", "rule", "params"),
    [
        pytest.param(-1, {"kind": "single", "to": "a"}, {}, id="negative-amount"),
        pytest.param(10, _allotment(("3/5", "a"), ("1/2", "b"), ("remaining", "c"))[0], {}, id="over-100pct"),
        pytest.param(10, _allotment(("1/2", "a"))[0], {}, id="allotment-below-100pct-without-remaining"),
        pytest.param(
            10,
            {"kind": "capped", "portions": [{"kind": "amount", "max_minor": "5", "to": "a"}]},
            {},
            id="capped-without-remaining",
        ),
        pytest.param(
            10,
            {
                "kind": "capped",
                "portions": [{"kind": "amount", "param": "cap", "to": "a"}, {"kind": "remaining", "to": "b"}],
            },
            {},
            id="missing-param",
        ),
        pytest.param(
            10,
            {
                "kind": "capped",
                "portions": [{"kind": "amount", "param": "cap", "to": "a"}, {"kind": "remaining", "to": "b"}],
            },
            {"cap": -1},
            id="negative-cap",
        ),
        pytest.param(10, {"kind": "split", "to": "a"}, {}, id="unknown-kind"),
    ],
)
def test_a_rule_no_checked_bundle_holds_is_refused(amount: int, rule: Rule, params: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match=r"\S"):
        movement.split(amount, rule, params)


def test_over_100_percent_is_refused_by_both() -> None:
    rule, params, destination, variables = _allotment(("3/5", "a"), ("1/2", "b"), ("remaining", "c"))
    with pytest.raises(ValueError, match="over 100%"):
        movement.ledger_postings(10, "world", rule, params)
    with pytest.raises(LedgerError) as caught:
        _ledger(10, rule, destination, variables)
    assert caught.value.code == "PW756"


# -- one function for the verifier and the runtime ---------------------------------------


def test_the_explorer_and_the_runtime_import_this_one_module() -> None:
    assert verifier_explorer.movement is movement
    assert runtime_commands.ledger_postings is movement.ledger_postings
    assert runtime_commands.params_of is movement.params_of
    assert not hasattr(verifier_explorer, "allot")  # no second copy of the arithmetic left behind


def _recording(monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, str]]:
    """Record every call of the kernel's `split` (both `move` and `ledger_postings` go through it)."""
    calls: list[tuple[int, str]] = []
    original = movement.split

    def split(amount: int, rule: Mapping[str, Any], params: Mapping[str, movement.ParamValue]) -> list[Any]:
        calls.append((amount, str(rule["kind"])))
        return original(amount, rule, params)

    monkeypatch.setattr(movement, "split", split)
    return calls


def test_a_concrete_exploration_moves_money_through_the_kernel(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _recording(monkeypatch)
    model = load_model(json.loads((GOLDEN / "model.json").read_bytes()))
    result = Explorer(model, Bounds(faults=0), pinned={"price": 6491}).explore()
    assert result.exhausted
    assert (6491, "single") in calls  # fund, refunds
    assert (6491, "allotment") in calls  # release, auto_release, rule_for_seller


PARTIES = {"buyer": "alice", "seller": "bob", "arbiter": "carol"}
T0 = 1780315200  # 2026-06-01T12:00:00Z


def _released(url: str, price: str) -> None:
    with open_store(url) as store:
        activate_files(store, signed("1.0.0"), default_trust(), clock=FixedClock(datetime.fromisoformat(NOW)))
        open_agreement(store, PACT_ID, {"price": price}, PARTIES, agreement_id="a1", clock=TestClock(T0))
        submit(store, "a1", "fund", "buyer", "alice", "fund", clock=TestClock(T0))
        submit(store, "a1", "deliver", "seller", "bob", "deliver", clock=TestClock(T0 + 60))


def test_a_command_moves_money_through_the_kernel(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    url = str(tmp_path / "store.db")
    _released(url, "64.91")
    calls = _recording(monkeypatch)
    with open_store(url) as store:
        result = submit(store, "a1", "release", "buyer", "alice", "release", clock=TestClock(T0 + 120))
    assert calls == [(6491, "allotment")]
    assert [(p["destination"], p["amount"]) for p in result.postings] == [("platform", "650"), ("seller", "5841")]


def _off_by_one(run: Callable[..., list[Posting]]) -> Callable[..., list[Posting]]:
    """An interpreter that moves one unit from the last posting to the first: a disagreement to catch."""

    def wrong(*args: Any) -> list[Posting]:
        postings = run(*args)
        if len(postings) < 2:
            return postings
        first, last = postings[0], postings[-1]
        return [replace(first, amount=first.amount + 1), *postings[1:-1], replace(last, amount=last.amount - 1)]

    return wrong


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_ledger_program_that_disagrees_with_the_kernel_never_commits(
    backend: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Activation refuses a program other than the one the report checked, so the disagreement is
    injected into the interpreter's answer: the command is refused with PW521 and writes nothing."""
    with temporary_store(backend, tmp_path) as url:
        _released(url, "64.91")
        monkeypatch.setattr(runtime_commands, "run_program", _off_by_one(run_program))
        before = dump(url)
        with open_store(url) as store, pytest.raises(CommandError) as caught:
            submit(store, "a1", "release", "buyer", "alice", "release", clock=TestClock(T0 + 120))
        assert caught.value.code == "PW521"
        assert "`escrow -> platform 651`" in caught.value.message
        assert "`escrow -> platform 650`" in caught.value.message
        assert dump(url) == before
