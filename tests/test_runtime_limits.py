"""Limits across agreements (new in 1.1) in the runtime: one serialised check at commit, both stores.

policies/desk_limit.pact pays refunds of at most 300.00 EUR and declares
`limit desk_daily: total(refund_payment) <= 600.00 per 1d`: over every
agreement of the pact, the refunds committed in one UTC day carry at most
600.00 EUR. A command that would cross it is refused with PW528 naming the
limit, the window, what was used and what is left, and writes nothing; a dry
run computes the same refusal or result without writing; the next UTC day is
a new window. Two agreements racing across the limit from two OS processes
(spawn) commit exactly the allowed total.
"""

from __future__ import annotations

import multiprocessing
from collections.abc import Iterator
from multiprocessing.synchronize import Barrier
from pathlib import Path
from typing import Any

import pytest

from pactwright.errors import CommandError, PactwrightError
from pactwright.runtime import TestClock, open_agreement, submit
from pactwright.runtime.store import open_store
from tests.signed_bundles import (
    BACKENDS,
    dump,
    store_with_policy,
)

POLICY = Path(__file__).resolve().parent.parent / "policies" / "desk_limit.pact"
PACT_ID = "example.desk_limit"
PARTIES = {"agent": "ann"}
DAY = 86_400
T0 = 1780315200  # 2026-06-01T12:00:00Z
RACES = 20


@pytest.fixture(params=BACKENDS)
def url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    with store_with_policy(request.param, tmp_path, POLICY) as store_url:
        yield store_url


def _open(url: str, agreement_id: str, amount: str) -> None:
    with open_store(url) as store:
        open_agreement(store, PACT_ID, {"amount": amount, "order_id": "ORD-1"}, PARTIES, agreement_id=agreement_id,
                       clock=TestClock(T0))  # fmt: skip


def _refund(url: str, agreement_id: str, at: int = T0, dry_run: bool = False) -> Any:
    with open_store(url) as store:
        return submit(store, agreement_id, "refund", "agent", "ann", f"r-{agreement_id}", clock=TestClock(at),
                      dry_run=dry_run)  # fmt: skip


def test_the_command_that_would_cross_the_limit_is_refused_naming_what_is_left(url: str) -> None:
    for agreement_id, amount in (("a1", "300.00"), ("a2", "250.00"), ("a3", "60.00")):
        _open(url, agreement_id, amount)
    _refund(url, "a1")
    _refund(url, "a2", T0 + 60)
    before = dump(url)
    with pytest.raises(CommandError) as caught:
        _refund(url, "a3", T0 + 120)
    error = caught.value
    assert error.code == "PW528"
    assert "`desk_daily`" in error.message and "LIMIT_REACHED" in error.message
    assert "2026-06-01T00:00:00Z .. 2026-06-02T00:00:00Z" in error.message
    assert "550.00 EUR used and 50.00 EUR left" in error.message
    assert error.expected == "at most 50.00 EUR" and error.found == "60.00 EUR"
    assert dump(url) == before  # refused before anything is written
    with pytest.raises(CommandError) as dry:
        _refund(url, "a3", T0 + 120, dry_run=True)
    assert dry.value.code == "PW528"
    assert dump(url) == before
    # The next UTC day is a new window.
    assert _refund(url, "a3", T0 + DAY).state == "refunded"


def test_a_dry_run_computes_without_writing(url: str) -> None:
    _open(url, "a1", "300.00")
    before = dump(url)
    result = _refund(url, "a1", dry_run=True)
    assert result.dry_run and result.state == "refunded"
    assert dump(url) == before


def test_the_limit_can_be_used_exactly(url: str) -> None:
    for agreement_id in ("a1", "a2", "a3"):
        _open(url, agreement_id, "300.00")
    _refund(url, "a1")
    _refund(url, "a2")  # 600.00: exactly the limit
    with pytest.raises(CommandError) as caught:
        _refund(url, "a3")
    assert "0.00 EUR left" in caught.value.message
    with open_store(url) as store:
        rows = store._db.query("SELECT limit_name, window_start, window_seconds, party, used FROM limits")
    assert rows == [("desk_daily", T0 // DAY * DAY, DAY, "", "60000")]


def test_two_processes_racing_across_the_limit_commit_exactly_the_allowed_total(url: str) -> None:
    """Each race: two agreements of 300.00 EUR in the same window, after 100.00 EUR was used: one commits."""
    pairs = []
    for n in range(RACES):
        # One window per race: each race's day starts with 100.00 EUR used by a third agreement.
        day = T0 + n * DAY
        first, second, seed = f"x{n:03d}", f"y{n:03d}", f"s{n:03d}"
        for agreement_id, amount in ((first, "300.00"), (second, "300.00"), (seed, "100.00")):
            _open(url, agreement_id, amount)
        _refund(url, seed, day)
        pairs.append((first, second))
    context = multiprocessing.get_context("spawn")
    barrier = context.Barrier(2)
    out = context.Queue()
    sides = [context.Process(target=_racer_at, args=(url, [p[i] for p in pairs], barrier, out)) for i in range(2)]
    for process in sides:
        process.start()
    results = [out.get(timeout=300) for _ in sides]
    for process in sides:
        process.join(timeout=60)
        assert process.exitcode == 0
    for n in range(RACES):
        outcomes = sorted(results[side][n] for side in range(2))
        assert outcomes == ["PW528", "committed"], (n, outcomes)
    with open_store(url) as store:
        used = store._db.query("SELECT window_start, used FROM limits ORDER BY window_start")
    assert used == [((T0 + n * DAY) // DAY * DAY, "40000") for n in range(RACES)]


def _racer_at(store_url: str, agreements: list[str], barrier: Barrier, out: Any) -> None:
    """Race n happens on day n: the clock is set per race from the agreement's number."""
    results: list[str] = []
    with open_store(store_url) as store:
        for agreement_id in agreements:
            at = T0 + int(agreement_id[1:]) * DAY
            barrier.wait()
            try:
                submit(store, agreement_id, "refund", "agent", "ann", f"r-{agreement_id}", clock=TestClock(at))
                results.append("committed")
            except PactwrightError as exc:
                results.append(exc.code)
    out.put(results)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_limit_per_role_counts_each_party_on_its_own(backend: str, tmp_path: Path) -> None:
    variant = tmp_path / "desk_limit_per_agent.pact"
    text = POLICY.read_text().replace("per 1d\n", "per 1d per agent\n")
    variant.write_text(text.replace('pact "example.desk_limit"', 'pact "example.desk_limit_per_agent"'))
    with store_with_policy(backend, tmp_path, variant) as url, open_store(url) as store:
        for agreement_id, agent in (("a1", "ann"), ("a2", "ann"), ("a3", "ann"), ("b1", "bob"), ("b2", "bob")):
            open_agreement(store, "example.desk_limit_per_agent", {"amount": "300.00", "order_id": "ORD-1"},
                           {"agent": agent}, agreement_id=agreement_id, clock=TestClock(T0))  # fmt: skip
        for agreement_id, agent in (("a1", "ann"), ("a2", "ann"), ("b1", "bob")):
            assert submit(store, agreement_id, "refund", "agent", agent, "r", clock=TestClock(T0)).state == "refunded"
        before = dump(url)
        with pytest.raises(CommandError) as caught:  # ann's 600.00 are used; bob's day is his own
            submit(store, "a3", "refund", "agent", "ann", "r", clock=TestClock(T0 + 10))
        assert caught.value.code == "PW528" and "0.00 EUR left" in caught.value.message
        assert dump(url) == before
        assert submit(store, "b2", "refund", "agent", "bob", "r", clock=TestClock(T0 + 10)).state == "refunded"
        rows = sorted(store._db.query("SELECT party, used FROM limits"))
    assert rows == [("ann", "60000"), ("bob", "60000")]
