"""The embedded ledger's Numscript interpreter: semantics, boundaries, errors.

Expected postings in `FORMANCE_CASES` are the documented results of
Formance's own test suite (github.com/formancehq/numscript,
internal/interpreter/interpreter_test.go and testdata/script-tests/e2e),
restricted to the constructs our subset supports.
"""

from __future__ import annotations

import json
from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pactwright.errors import CanonicalError, LedgerError, UsageError
from pactwright.runtime.numscript import Posting, allot, parse_program, run_program
from pactwright.runtime.numscript.cli_support import run_from_json

Balances = dict[tuple[str, str], int]


def run(source: str, variables: dict[str, str] | None = None, balances: Balances | None = None) -> list[Posting]:
    return run_program(parse_program(source), variables or {}, balances or {})


def moves(postings: list[Posting]) -> list[tuple[str, str, int]]:
    return [(p.source, p.destination, p.amount) for p in postings]


def code_of(source: str, variables: dict[str, str] | None = None, balances: Balances | None = None) -> str:
    with pytest.raises(LedgerError) as caught:
        run(source, variables, balances)
    return caught.value.code


MARKETPLACE = """
vars {
  monetary $price
  account $escrow
  account $seller
}
send [EUR/2 $price] (
  source = $escrow
  destination = {
    10% to @platform:fees
    remaining to $seller
  }
)
"""
MARKET_VARS = {"price": "EUR/2 6490", "escrow": "escrow:a1", "seller": "sellers:s1"}


# -- Formance's documented results ------------------------------------------------

FORMANCE_CASES = [
    pytest.param(
        "send [EUR/2 100] ( source = @alice destination = @bob )",
        {},
        {("alice", "EUR/2"): 100},
        [("alice", "bob", 100)],
        id="TestSend",
    ),
    pytest.param(
        "vars { account $rider account $driver }\n"
        "send [GEM 15] ( source = $rider destination = { 80% to $driver 8% to @a 12% to @b } )",
        {"rider": "users:001", "driver": "users:002"},
        {("users:001", "GEM"): 15},
        [("users:001", "users:002", 13), ("users:001", "a", 1), ("users:001", "b", 1)],
        id="TestAllocation",
    ),
    pytest.param(
        "vars { portion $p }\nsend [GEM 15] ( source = @a destination = { 80% to @b $p to @c remaining to @d } )",
        {"p": "15%"},
        {("a", "GEM"): 15},
        [("a", "b", 13), ("a", "c", 2)],
        id="TestDynamicAllocation",
    ),
    pytest.param(
        "send [GEM 2] ( source = @world destination = { 90% to @a 10% to @b } )",
        {},
        {},
        [("world", "a", 2)],
        id="TestNoEmptyPostings",
    ),
    pytest.param(
        "send [USD/2 100] ( source = @world destination = { max [USD/2 10] to @d1 max [USD/2 12] to @d2 "
        "remaining to @rem } )",
        {},
        {},
        [("world", "d1", 10), ("world", "d2", 12), ("world", "rem", 78)],
        id="TestManyMaxDest",
    ),
    pytest.param(
        "send [COIN 10] ( source = @world destination = { max [COIN 10] to @a remaining to @b } )",
        {},
        {},
        [("world", "a", 10)],
        id="TestRemainingNone",
    ),
    pytest.param(
        "send [COIN 50] ( source = @world destination = @a )\nsend [COIN 100] ( source = @a destination = @b )",
        {},
        {("a", "COIN"): 50},
        [("world", "a", 50), ("a", "b", 100)],
        id="TestTrackBalances",
    ),
    pytest.param("send [COIN 0] ( source = @src destination = @dest )", {}, {}, [], id="TestSendZero"),
    pytest.param(
        "send [USD/2 100] ( source = @world destination = { max [USD/2 30] to @x remaining to @y } )",
        {},
        {},
        [("world", "x", 30), ("world", "y", 70)],
        id="e2e/destination-inorder",
    ),
    pytest.param(
        "send [USD/2 100] ( source = @world destination = { 1/3 to @a 1/3 to @b remaining to @c } )",
        {},
        {},
        [("world", "a", 34), ("world", "b", 33), ("world", "c", 33)],
        id="e2e/destination-allotment-thirds",
    ),
    pytest.param(
        "send [USD/2 100] ( source = @world destination = { 1/6 to @a 1/6 to @b remaining to @c } )",
        {},
        {},
        [("world", "a", 17), ("world", "b", 17), ("world", "c", 66)],
        id="e2e/allotment-leftover-two-units",
    ),
    pytest.param(
        "send [USD/2 1001] ( source = @world destination = { 1/7 to @a 2/7 to @b remaining to @c } )",
        {},
        {},
        [("world", "a", 143), ("world", "b", 286), ("world", "c", 572)],
        id="e2e/allotment-sevenths",
    ),
    pytest.param(
        "send [USD/2 1000000000000000000000000001] ( source = @world destination = { 1/2 to @a remaining to @b } )",
        {},
        {},
        [("world", "a", 500000000000000000000000001), ("world", "b", 500000000000000000000000000)],
        id="e2e/allotment-beyond-int64",
    ),
    pytest.param(
        "send [USD/2 42] ( source = @a allowing overdraft up to [USD/2 5] destination = @dest )",
        {},
        {("a", "USD/2"): 40},
        [("a", "dest", 42)],
        id="e2e/bounded-overdraft",
    ),
]


@pytest.mark.parametrize(("source", "variables", "balances", "expected"), FORMANCE_CASES)
def test_formance_documented_results(
    source: str, variables: dict[str, str], balances: Balances, expected: list[tuple[str, str, int]]
) -> None:
    assert moves(run(source, variables, balances)) == expected


def test_formance_track_balances_insufficient_funds() -> None:
    # TestTrackBalances2: the second send sees what the first left (10 of 60).
    source = "send [COIN 50] ( source = @a destination = @z )\nsend [COIN 50] ( source = @a destination = @z )"
    with pytest.raises(LedgerError) as caught:
        run(source, {}, {("a", "COIN"): 60})
    assert caught.value.code == "PW754"
    assert "`a`" in caught.value.message
    assert "`50`" in caught.value.message
    assert "`10`" in caught.value.message
    assert "`COIN`" in caught.value.message


# -- the programs the compiler emits -----------------------------------------------


def test_marketplace_split() -> None:
    postings = run(MARKETPLACE, MARKET_VARS, {("escrow:a1", "EUR/2"): 6490})
    assert postings == [
        Posting("escrow:a1", "platform:fees", 649, "EUR/2"),
        Posting("escrow:a1", "sellers:s1", 5841, "EUR/2"),
    ]


def test_world_funding_and_unbounded_overdraft() -> None:
    source = """
    vars { number $amount }
    send [EUR/2 $amount] ( source = @world destination = @escrow:a1 )
    send [EUR/2 300] ( source = @merchant:refunds allowing unbounded overdraft destination = @buyer )
    """
    postings = run(source, {"amount": "1000"})
    assert moves(postings) == [("world", "escrow:a1", 1000), ("merchant:refunds", "buyer", 300)]


def test_send_monetary_variable_directly() -> None:
    source = "vars { monetary $m }\nsend $m ( source = @world destination = @a )"
    assert run(source, {"m": "USD/2 5"}) == [Posting("world", "a", 5, "USD/2")]


def test_fixed_amount_in_order_destination() -> None:
    source = (
        "vars { monetary $price }\n"
        "send [EUR/2 $price] ( source = @world destination = "
        "{ max [EUR/2 500] to @platform:fees remaining to @seller } )"
    )
    assert moves(run(source, {"price": "EUR/2 6490"})) == [("world", "platform:fees", 500), ("world", "seller", 5990)]
    assert moves(run(source, {"price": "EUR/2 300"})) == [("world", "platform:fees", 300)]


def test_fractional_percent_and_fraction_portions() -> None:
    source = "send [EUR/2 1001] ( source = @world destination = { 2.5% to @a 1/3 to @b remaining to @c } )"
    # floors 25, 333, 642 sum to 1000; the leftover unit goes to the first portion.
    assert moves(run(source)) == [("world", "a", 26), ("world", "b", 333), ("world", "c", 642)]


def test_zero_percent_portion_can_receive_a_leftover_unit() -> None:
    # Numscript hands leftover units in declaration order, whatever the portion.
    source = "send [X 2] ( source = @world destination = { 1/3 to @a 0% to @b 1/3 to @c remaining to @d } )"
    assert moves(run(source)) == [("world", "a", 1), ("world", "b", 1)]


def test_nested_destinations_and_merging() -> None:
    source = (
        "send [COIN 100] ( source = @world destination = "
        "{ 50% to { max [COIN 10] to @b remaining to @c } remaining to @c } )"
    )
    # c's two consecutive shares (40 and 50) merge into one posting, as Numscript does.
    assert moves(run(source)) == [("world", "b", 10), ("world", "c", 90)]


def test_non_consecutive_postings_do_not_merge() -> None:
    source = "send [COIN 9] ( source = @world destination = { 1/3 to @a 1/3 to @b remaining to @a } )"
    assert moves(run(source)) == [("world", "a", 3), ("world", "b", 3), ("world", "a", 3)]


def test_comments_are_ignored() -> None:
    source = "// header\nsend /* amount */ [EUR/2 1] ( source = @world // from\n destination = @a )"
    assert moves(run(source)) == [("world", "a", 1)]


# -- boundary amounts ---------------------------------------------------------------


@pytest.mark.parametrize("amount", [0, 1, 2, 3, 99, 101, 6491, 2**63 - 1, 2**63, 2**63 + 1, 10**40 + 7])
def test_boundary_amounts_split_exactly(amount: int) -> None:
    source = "vars { monetary $p }\nsend [EUR/2 $p] ( source = @world destination = { 10% to @f remaining to @s } )"
    postings = run(source, {"p": f"EUR/2 {amount}"})
    assert sum(p.amount for p in postings) == amount
    fee = next((p.amount for p in postings if p.destination == "f"), 0)
    assert fee in (amount // 10, amount // 10 + 1)
    assert all(p.amount > 0 for p in postings)


def test_plain_account_may_spend_exactly_its_balance() -> None:
    source = "send [EUR/2 6490] ( source = @a destination = @b )"
    assert moves(run(source, {}, {("a", "EUR/2"): 6490})) == [("a", "b", 6490)]
    assert code_of(source, {}, {("a", "EUR/2"): 6489}) == "PW754"
    assert code_of(source, {}, {("a", "USD/2"): 10**6}) == "PW754"  # another asset does not count


def test_zero_send_from_an_overdrawn_account_fails_like_numscript() -> None:
    # Numscript sends min(balance + overdraft, amount): -5 is not 0.
    assert code_of("send [X 0] ( source = @a destination = @b )", {}, {("a", "X"): -5}) == "PW754"


def test_bounded_overdraft_edges() -> None:
    source = "send [X 45] ( source = @a allowing overdraft up to [X 5] destination = @b )"
    assert moves(run(source, {}, {("a", "X"): 40})) == [("a", "b", 45)]
    assert code_of(source, {}, {("a", "X"): 39}) == "PW754"
    assert code_of(source, {}, {("a", "X"): -1}) == "PW754"


def test_world_is_unbounded_even_as_a_variable() -> None:
    source = "vars { account $src }\nsend [X 10] ( source = $src destination = @b )"
    assert moves(run(source, {"src": "world"}, {("world", "X"): -(10**30)})) == [("world", "b", 10)]


def test_atomic_when_second_send_fails() -> None:
    source = "send [X 5] ( source = @a destination = @b )\nsend [X 6] ( source = @a destination = @c )"
    balances = {("a", "X"): 10}
    with pytest.raises(LedgerError) as caught:
        run(source, {}, balances)
    assert caught.value.code == "PW754"
    assert balances == {("a", "X"): 10}


def test_balances_are_not_modified_on_success() -> None:
    balances = {("a", "X"): 10}
    run("send [X 5] ( source = @a destination = @b )", {}, balances)
    assert balances == {("a", "X"): 10}


# -- variables ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("variables", "fragment"),
    [
        ({"escrow": "escrow:a1", "seller": "s"}, "missing variable `$price`"),
        ({**MARKET_VARS, "extra": "1"}, "unexpected variable `extra`"),
        ({**MARKET_VARS, "$price": "EUR/2 1"}, "unexpected variable `$price`"),
        ({**MARKET_VARS, "price": "EUR/2 64.90"}, "malformed"),
        ({**MARKET_VARS, "price": "EUR/2  6490"}, "malformed"),
        ({**MARKET_VARS, "price": "6490"}, "malformed"),
        ({**MARKET_VARS, "price": "eur/2 6490"}, "malformed"),
        ({**MARKET_VARS, "price": "EUR/2 +6490"}, "malformed"),
        ({**MARKET_VARS, "price": "EUR/2 -1"}, "negative"),
        ({**MARKET_VARS, "escrow": "@escrow:a1"}, "without `@`"),
        ({**MARKET_VARS, "escrow": "escrow::a1"}, "malformed"),
        ({**MARKET_VARS, "escrow": ""}, "malformed"),
    ],
)
def test_bad_variables(variables: dict[str, str], fragment: str) -> None:
    with pytest.raises(LedgerError) as caught:
        run(MARKETPLACE, variables, {("escrow:a1", "EUR/2"): 10**9})
    assert caught.value.code == "PW753"
    assert fragment in caught.value.message
    assert "\n" not in caught.value.message


def test_non_string_variable_is_refused() -> None:
    with pytest.raises(LedgerError) as caught:
        run(MARKETPLACE, {**MARKET_VARS, "price": 6490}, {})  # type: ignore[dict-item]
    assert caught.value.code == "PW753"


@pytest.mark.parametrize(
    ("text", "expected"),
    [("10%", Fraction(1, 10)), ("2.5%", Fraction(1, 40)), ("1/3", Fraction(1, 3)), ("1 / 3", Fraction(1, 3))],
)
def test_portion_variable_shapes(text: str, expected: Fraction) -> None:
    source = "vars { portion $p }\nsend [X 1200] ( source = @world destination = { $p to @a remaining to @b } )"
    share = moves(run(source, {"p": text}))[0][2]
    assert share == 1200 * expected


@pytest.mark.parametrize("text", ["101%", "3/2", "1/0", "-1%", "10", "0.1", "10 %", "1//3", "1  /3"])
def test_bad_portion_variables(text: str) -> None:
    source = "vars { portion $p }\nsend [X 1] ( source = @world destination = { $p to @a remaining to @b } )"
    assert code_of(source, {"p": text}) == "PW753"


@pytest.mark.parametrize(("text", "code"), [("42", None), ("-1", "PW753"), ("4.2", "PW753"), ("", "PW753")])
def test_number_variables(text: str, code: str | None) -> None:
    source = "vars { number $n }\nsend [X $n] ( source = @world destination = @a )"
    if code is None:
        assert moves(run(source, {"n": text})) == [("world", "a", 42)]
    else:
        assert code_of(source, {"n": text}) == code


def test_number_with_too_many_digits_is_refused_not_crashed() -> None:
    source = "vars { number $n }\nsend [X $n] ( source = @world destination = @a )"
    assert code_of(source, {"n": "9" * 5000}) == "PW753"


# -- assets and allotments ----------------------------------------------------------


def test_asset_mismatch_between_send_and_monetary_variable() -> None:
    assert code_of(MARKETPLACE, {**MARKET_VARS, "price": "USD/2 6490"}, {}) == "PW755"


def test_asset_mismatch_in_variable_cap_and_bound() -> None:
    capped = "vars { monetary $cap }\nsend [X 5] ( source = @world destination = { max $cap to @a remaining to @b } )"
    assert code_of(capped, {"cap": "Y 3"}) == "PW755"
    assert moves(run(capped, {"cap": "X 3"})) == [("world", "a", 3), ("world", "b", 2)]
    bounded = "vars { monetary $od }\nsend [X 5] ( source = @a allowing overdraft up to $od destination = @b )"
    assert code_of(bounded, {"od": "Y 10"}) == "PW755"


def test_caps_beyond_exhaustion_are_still_checked() -> None:
    # Stricter than recent Numscript, which skips clauses once nothing is left.
    source = (
        "vars { monetary $c }\n"
        "send [X 10] ( source = @world destination = { max [X 10] to @a max $c to @b remaining to @c } )"
    )
    assert code_of(source, {"c": "Y 1"}) == "PW755"


def test_literal_asset_mismatch_is_refused_when_parsing() -> None:
    with pytest.raises(LedgerError) as caught:
        parse_program("send [X 5] ( source = @world destination = { max [Y 1] to @a remaining to @b } )")
    assert caught.value.code == "PW755"


@pytest.mark.parametrize(
    ("portions", "valid"),
    [(("60%", "50%"), False), (("60%", "40%"), True), (("60%", "30%"), False), (("100%", "0%"), True)],
)
def test_variable_portions_must_make_100_percent(portions: tuple[str, str], valid: bool) -> None:
    source = "vars { portion $p portion $q }\nsend [X 10] ( source = @world destination = { $p to @a $q to @b } )"
    variables = {"p": portions[0], "q": portions[1]}
    if valid:
        assert sum(p.amount for p in run(source, variables)) == 10
    else:
        assert code_of(source, variables) == "PW756"


def test_remaining_gets_zero_when_portions_already_make_100_percent() -> None:
    source = "vars { portion $p }\nsend [X 10] ( source = @world destination = { $p to @a remaining to @b } )"
    assert moves(run(source, {"p": "100%"})) == [("world", "a", 10)]
    assert code_of(source.replace("remaining", "$p"), {"p": "60%"}) == "PW756"


# -- allotment properties -------------------------------------------------------------

portion_lists = st.lists(st.fractions(min_value=0, max_value=1, max_denominator=10_000), min_size=1, max_size=8)


@given(amount=st.integers(min_value=0, max_value=2**80), weights=portion_lists)
def test_allotment_properties(amount: int, weights: list[Fraction]) -> None:
    total = sum(weights, Fraction(0))
    portions = [w / total for w in weights] if total else [Fraction(1, len(weights))] * len(weights)
    shares = allot(amount, portions)
    assert sum(shares) == amount
    assert all(share >= 0 for share in shares)
    exact = [amount * p for p in portions]
    assert all(abs(share - e) <= 1 for share, e in zip(shares, exact, strict=True))
    bumped = [share - (e.numerator // e.denominator) for share, e in zip(shares, exact, strict=True)]
    assert set(bumped) <= {0, 1}
    # The leftover units go to a prefix, in declaration order.
    assert bumped == sorted(bumped, reverse=True)


@given(
    amount=st.integers(min_value=0, max_value=10**30),
    percents=st.lists(st.integers(min_value=0, max_value=10_000), min_size=1, max_size=5),
)
def test_program_split_always_sums_to_amount(amount: int, percents: list[int]) -> None:
    # Basis points of a percent: 0.00% .. 100.00%, scaled so they fit under 100%.
    scale = max(1, sum(percents) // 10_000 + 1)
    basis = [p // scale for p in percents]
    clauses = " ".join(f"{b // 100}.{b % 100:02d}% to @d{i}" for i, b in enumerate(basis))
    source = f"send [X {amount}] ( source = @world destination = {{ {clauses} remaining to @rest }} )"
    postings = run(source)
    assert sum(p.amount for p in postings) == amount
    assert all(p.amount > 0 for p in postings)


# -- CLI support ----------------------------------------------------------------------


def test_run_from_json_returns_string_amounts() -> None:
    balances = json.dumps([{"account": "escrow:a1", "asset": "EUR/2", "amount": "6490"}]).encode()
    result = run_from_json(MARKETPLACE, json.dumps(MARKET_VARS).encode(), balances)
    assert result == {
        "postings": [
            {"source": "escrow:a1", "destination": "platform:fees", "amount": "649", "asset": "EUR/2"},
            {"source": "escrow:a1", "destination": "sellers:s1", "amount": "5841", "asset": "EUR/2"},
        ]
    }


def test_run_from_json_without_balances_starts_at_zero() -> None:
    with pytest.raises(LedgerError) as caught:
        run_from_json(MARKETPLACE, json.dumps(MARKET_VARS).encode(), None)
    assert caught.value.code == "PW754"


@pytest.mark.parametrize(
    ("vars_json", "code"),
    [
        (b'{"price": "EUR/2 1", "price": "EUR/2 2"}', "PW015"),
        (b'{"price": 1.5}', "PW011"),
        (b'{"price": 1e3}', "PW011"),
        (b'{"price": NaN}', "PW016"),
        (b'{"price": "\xff"}', "PW017"),
        (b"{not json", "PW018"),
    ],
)
def test_run_from_json_rejects_non_strict_json(vars_json: bytes, code: str) -> None:
    with pytest.raises(CanonicalError) as caught:
        run_from_json(MARKETPLACE, vars_json, None)
    assert caught.value.code == code


@pytest.mark.parametrize("vars_json", [b"[]", b'{"price": 6490, "escrow": "e", "seller": "s"}'])
def test_run_from_json_variable_shapes(vars_json: bytes) -> None:
    with pytest.raises(LedgerError) as caught:
        run_from_json(MARKETPLACE, vars_json, None)
    assert caught.value.code == "PW753"


@pytest.mark.parametrize(
    "balances",
    [
        {"account": "a", "asset": "X", "amount": 1},
        [{"account": "a", "asset": "X"}],
        [{"account": "@a", "asset": "X", "amount": 1}],
        [{"account": "a", "asset": "x", "amount": 1}],
        [{"account": "a", "asset": "X", "amount": True}],
        [{"account": "a", "asset": "X", "amount": "1.0"}],
        [{"account": "a", "asset": "X", "amount": "9" * 5000}],
        [{"account": "a", "asset": "X", "amount": 1}, {"account": "a", "asset": "X", "amount": 2}],
        [{"account": "a", "asset": "X", "amount": 1, "extra": 0}],
    ],
)
def test_run_from_json_rejects_bad_balances(balances: object) -> None:
    with pytest.raises(UsageError):
        run_from_json("send [X 1] ( source = @a destination = @b )", b"{}", json.dumps(balances).encode())


def test_run_from_json_accepts_negative_and_huge_balances() -> None:
    balances = [{"account": "a", "asset": "X", "amount": 2**70}, {"account": "world", "asset": "X", "amount": "-5"}]
    result = run_from_json("send [X 1] ( source = @a destination = @b )", b"{}", json.dumps(balances).encode())
    assert result["postings"][0]["amount"] == "1"
