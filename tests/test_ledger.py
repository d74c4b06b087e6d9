"""The embedded double-entry ledger: atomic, idempotent per reference, always balanced."""

from __future__ import annotations

import threading

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pactwright.errors import LedgerError
from pactwright.runtime.ledger import InMemoryLedger
from pactwright.runtime.numscript import Posting, Program, parse_program

FUND = parse_program("vars { monetary $amount account $to }\nsend $amount ( source = @world destination = $to )")
SPLIT = parse_program(
    """
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
)
SPLIT_VARS = {"price": "EUR/2 6490", "escrow": "escrow:a1", "seller": "sellers:s1"}
TRANSFER = parse_program(
    "vars { monetary $amount account $from account $to }\nsend $amount ( source = $from destination = $to )"
)


def fund(ledger: InMemoryLedger, account: str, amount: int, asset: str = "EUR/2") -> None:
    ledger.apply(f"fund:{account}:{amount}:{asset}", FUND, {"amount": f"{asset} {amount}", "to": account})


def test_fund_then_split() -> None:
    ledger = InMemoryLedger()
    fund(ledger, "escrow:a1", 6490)
    postings = ledger.apply("release:a1", SPLIT, SPLIT_VARS)
    assert postings == [
        Posting("escrow:a1", "platform:fees", 649, "EUR/2"),
        Posting("escrow:a1", "sellers:s1", 5841, "EUR/2"),
    ]
    assert ledger.balance("escrow:a1", "EUR/2") == 0
    assert ledger.balance("platform:fees", "EUR/2") == 649
    assert ledger.balance("sellers:s1", "EUR/2") == 5841
    assert ledger.balance("world", "EUR/2") == -6490
    assert ledger.asset_balances() == {
        ("platform:fees", "EUR/2"): 649,
        ("sellers:s1", "EUR/2"): 5841,
        ("world", "EUR/2"): -6490,
    }
    assert ledger.asset_totals() == {"EUR/2": 0}


def test_repeated_reference_returns_original_postings_and_moves_nothing() -> None:
    ledger = InMemoryLedger()
    fund(ledger, "escrow:a1", 10_000)
    first = ledger.apply("release:a1", SPLIT, SPLIT_VARS)
    before = ledger.asset_balances()
    again = ledger.apply("release:a1", SPLIT, dict(SPLIT_VARS))
    assert again == first
    assert ledger.asset_balances() == before


def test_repeat_of_a_reformatted_program_is_the_same_program() -> None:
    ledger = InMemoryLedger()
    fund(ledger, "escrow:a1", 10_000)
    first = ledger.apply("release:a1", SPLIT, SPLIT_VARS)
    reformatted = parse_program(
        "vars{monetary $price account $escrow account $seller}"
        "send [EUR/2 $price](source=$escrow destination={10% to @platform:fees remaining to $seller})"
    )
    assert ledger.apply("release:a1", reformatted, SPLIT_VARS) == first


@pytest.mark.parametrize(
    ("program", "variables"),
    [
        (SPLIT, {**SPLIT_VARS, "price": "EUR/2 6491"}),
        (SPLIT, {**SPLIT_VARS, "seller": "sellers:other"}),
        (TRANSFER, {"amount": "EUR/2 6490", "from": "escrow:a1", "to": "sellers:s1"}),
    ],
)
def test_same_reference_with_other_payload_is_refused(program: Program, variables: dict[str, str]) -> None:
    ledger = InMemoryLedger()
    fund(ledger, "escrow:a1", 10**6)
    ledger.apply("release:a1", SPLIT, SPLIT_VARS)
    before = ledger.asset_balances()
    with pytest.raises(LedgerError) as caught:
        ledger.apply("release:a1", program, variables)
    assert caught.value.code == "PW757"
    assert "`release:a1`" in caught.value.message
    assert ledger.asset_balances() == before


def test_empty_reference_is_refused() -> None:
    with pytest.raises(LedgerError) as caught:
        InMemoryLedger().apply("", FUND, {"amount": "EUR/2 1", "to": "a"})
    assert caught.value.code == "PW757"


def test_overdraft_of_internal_account_is_refused_and_moves_nothing() -> None:
    ledger = InMemoryLedger()
    fund(ledger, "escrow:a1", 100)
    with pytest.raises(LedgerError) as caught:
        ledger.apply("release:a1", SPLIT, SPLIT_VARS)
    assert caught.value.code == "PW754"
    assert "`escrow:a1`" in caught.value.message
    assert ledger.balance("escrow:a1", "EUR/2") == 100


def test_failed_apply_leaves_the_reference_free_for_a_retry() -> None:
    ledger = InMemoryLedger()
    with pytest.raises(LedgerError):
        ledger.apply("release:a1", SPLIT, SPLIT_VARS)
    fund(ledger, "escrow:a1", 6490)
    assert len(ledger.apply("release:a1", SPLIT, SPLIT_VARS)) == 2


def test_second_send_failing_rolls_back_the_first() -> None:
    program = parse_program(
        "send [EUR/2 60] ( source = @a destination = @b )\nsend [EUR/2 60] ( source = @a destination = @c )"
    )
    ledger = InMemoryLedger()
    fund(ledger, "a", 100)
    before = ledger.asset_balances()
    with pytest.raises(LedgerError) as caught:
        ledger.apply("two-sends", program, {})
    assert caught.value.code == "PW754"
    assert ledger.asset_balances() == before
    assert ledger.balance("b", "EUR/2") == 0


def test_external_accounts_may_go_negative() -> None:
    program = parse_program(
        "send [EUR/2 300] ( source = @merchant:refunds allowing unbounded overdraft destination = @buyer )\n"
        "send [EUR/2 50] ( source = @psp allowing overdraft up to [EUR/2 50] destination = @buyer )"
    )
    ledger = InMemoryLedger()
    ledger.apply("refund:1", program, {})
    assert ledger.balance("merchant:refunds", "EUR/2") == -300
    assert ledger.balance("psp", "EUR/2") == -50
    assert ledger.asset_totals() == {"EUR/2": 0}
    with pytest.raises(LedgerError) as caught:
        ledger.apply("refund:2", parse_program(PSP_ONE_MORE), {})
    assert caught.value.code == "PW754"  # the bound of 50 is used up


PSP_ONE_MORE = "send [EUR/2 1] ( source = @psp allowing overdraft up to [EUR/2 50] destination = @buyer )"


def test_concurrent_applies_of_one_reference_move_money_once() -> None:
    ledger = InMemoryLedger()
    fund(ledger, "escrow:a1", 6490)
    results: list[list[Posting]] = []
    errors: list[Exception] = []

    def worker() -> None:
        try:
            results.append(ledger.apply("release:a1", SPLIT, SPLIT_VARS))
        except LedgerError as exc:  # pragma: no cover - would be a bug
            errors.append(exc)

    threads = [threading.Thread(target=worker) for _ in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert len(results) == 16
    assert all(result == results[0] for result in results)
    assert ledger.balance("sellers:s1", "EUR/2") == 5841


def test_huge_amounts_stay_exact() -> None:
    ledger = InMemoryLedger()
    amount = 2**64 + 12345
    fund(ledger, "escrow:a1", amount)
    ledger.apply("release:a1", SPLIT, {**SPLIT_VARS, "price": f"EUR/2 {amount}"})
    fee = ledger.balance("platform:fees", "EUR/2")
    assert fee + ledger.balance("sellers:s1", "EUR/2") == amount
    assert fee == amount // 10 + 1  # the single leftover unit goes to the first portion


accounts = st.sampled_from(["a", "b", "c", "escrow:x"])
assets = st.sampled_from(["EUR/2", "USD/2"])
operations = st.lists(
    st.tuples(st.sampled_from(["fund", "transfer"]), accounts, accounts, st.integers(0, 500), assets),
    max_size=40,
)


@settings(max_examples=150, deadline=None)
@given(operations=operations)
def test_balances_always_sum_to_zero_and_internal_accounts_never_go_negative(
    operations: list[tuple[str, str, str, int, str]],
) -> None:
    ledger = InMemoryLedger()
    for index, (kind, source, destination, amount, asset) in enumerate(operations):
        before = ledger.asset_balances()
        refused: str | None = None
        try:
            if kind == "fund":
                ledger.apply(f"op{index}", FUND, {"amount": f"{asset} {amount}", "to": destination})
            else:
                variables = {"amount": f"{asset} {amount}", "from": source, "to": destination}
                ledger.apply(f"op{index}", TRANSFER, variables)
        except LedgerError as exc:
            refused = exc.code
        if refused is not None:
            assert refused == "PW754"
            assert ledger.asset_balances() == before
        assert all(total == 0 for total in ledger.asset_totals().values())
        assert all(value >= 0 for (account, _), value in ledger.asset_balances().items() if account != "world")
