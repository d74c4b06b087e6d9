"""Related amounts (new in 1.1) in the runtime: `open` holds every agreement to `partial <= price`.

policies/partial_refund.pact bounds its partial refund by the agreement's own
price (`param partial: money between 0.01 and price`). Opening an agreement
whose partial is above its price is refused with PW503, naming both params
and their values, and writes nothing; within the relation the agreement opens
and a refund of the partial commits. Both backends, as every runtime test.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from pactwright.errors import CommandError
from pactwright.runtime import TestClock, open_agreement, show, submit
from pactwright.runtime.store import open_store
from tests.signed_bundles import (
    BACKENDS,
    dump,
    store_with_policy,
)

POLICY = Path(__file__).resolve().parent.parent / "policies" / "partial_refund.pact"
PACT_ID = "shop.partial_refund"
PARTIES = {"customer": "cora", "shop_agent": "sid", "support_agent": "sam"}
T0 = 1780315200  # 2026-06-01T12:00:00Z


@pytest.fixture(params=BACKENDS)
def url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    with store_with_policy(request.param, tmp_path, POLICY) as store_url:
        yield store_url


@pytest.mark.parametrize(
    ("price", "partial", "found"),
    [("20.00", "20.01", "partial = 20.01, price = 20.00"), ("1.00", "499.99", "partial = 499.99, price = 1.00")],
)
def test_open_refuses_a_partial_above_the_price_naming_both(url: str, price: str, partial: str, found: str) -> None:
    before = dump(url)
    with open_store(url) as store, pytest.raises(CommandError) as caught:
        open_agreement(store, PACT_ID, {"price": price, "partial": partial}, PARTIES, agreement_id="x",
                       clock=TestClock(T0))  # fmt: skip
    error = caught.value
    assert error.code == "PW503"
    assert "`partial`" in error.message and "`price`" in error.message
    assert partial in error.message and price in error.message
    assert error.expected == "partial <= price" and error.found == found
    assert dump(url) == before


def test_open_still_refuses_a_partial_below_its_literal_bound(url: str) -> None:
    with open_store(url) as store, pytest.raises(CommandError) as caught:
        open_agreement(store, PACT_ID, {"price": "20.00", "partial": "0.00"}, PARTIES, agreement_id="x",
                       clock=TestClock(T0))  # fmt: skip
    assert caught.value.code == "PW503"
    assert caught.value.expected == "0.01 .. price"


@pytest.mark.parametrize("partial", ["7.50", "19.99"])
def test_a_partial_within_the_price_opens_and_its_refund_commits(url: str, partial: str) -> None:
    with open_store(url) as store:
        open_agreement(store, PACT_ID, {"price": "20.00", "partial": partial}, PARTIES, agreement_id="a1",
                       clock=TestClock(T0))  # fmt: skip
        submit(store, "a1", "pay", "customer", "cora", "pay", clock=TestClock(T0))
        submit(store, "a1", "ship", "shop_agent", "sid", "ship", clock=TestClock(T0 + 60))
        result = submit(store, "a1", "refund_part", "support_agent", "sam", "refund", clock=TestClock(T0 + 120))
        assert result.state == "partly_refunded"
        assert [p["amount"] for p in result.postings] == [str(int(partial.replace(".", "")))]
        balances = show(store, "a1").agreement.balances
    assert balances["card"] == int(partial.replace(".", "")) - 2000
    assert balances["escrow"] == 0


def test_a_partial_equal_to_the_price_is_within_the_relation_but_not_partial(url: str) -> None:
    """`partial <= price` admits the whole price; the policy's guard `partial < price` then refuses a partial refund."""
    with open_store(url) as store:
        open_agreement(store, PACT_ID, {"price": "20.00", "partial": "20.00"}, PARTIES, agreement_id="a1",
                       clock=TestClock(T0))  # fmt: skip
        submit(store, "a1", "pay", "customer", "cora", "pay", clock=TestClock(T0))
        submit(store, "a1", "ship", "shop_agent", "sid", "ship", clock=TestClock(T0 + 60))
        with pytest.raises(CommandError) as caught:
            submit(store, "a1", "refund_part", "support_agent", "sam", "refund", clock=TestClock(T0 + 120))
        assert caught.value.code == "PW512"
        assert submit(store, "a1", "refund_all", "support_agent", "sam", "all", clock=TestClock(T0 + 120)).state == (
            "refunded"
        )
