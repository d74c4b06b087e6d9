"""The terminal race: 1,000 races on PostgreSQL and 200 on SQLite, each between two OS processes.

Two long-lived processes (separate interpreters, `spawn`, each with its own
store connection) meet at a barrier before every race, then submit a
settling command for the same agreement at the same version:

- `release` by the buyer against the scheduler's `auto_release` after the
  deadline (the scheduler side plans through `runtime.scheduler.plan`, as a
  scan that read the agreement just before the buyer's commit would, and
  fires through `runtime.scheduler.fire`);
- `rule_for_buyer` against `rule_for_seller`, both by the arbiter.

Half the races are of each kind. Exactly one side commits; the other is
refused with PW509 (STALE_AGREEMENT_VERSION) or PW510 (already final). Then
every agreement holds exactly one settlement event and one settlement outbox
entry, and its escrow is 0 in the store.

Then three outbox workers at once (separate processes, each running
`runtime.worker.Worker.drain`, what `pactwright worker --drain` runs)
deliver every entry to a ledger in its own database
(`runtime.ledger_db.open_ledger`: the store's sibling SQLite file, or the
schema `S_ledger` on PostgreSQL), and the LEDGER is checked on its own: every
entry delivered once and nothing left due, exactly one reference per agreement whose postings leave its
escrow (the settlement), every escrow at 0, each asset summing to 0, and the
ledger's balance of every address equal to the sum of the store's committed
balances of the accounts at that address. The test prints the counts.
"""

from __future__ import annotations

import json
import multiprocessing
import time
from collections.abc import Iterator
from multiprocessing.synchronize import Barrier
from pathlib import Path
from typing import Any

import pytest

from pactwright.errors import PactwrightError
from pactwright.runtime import TestClock, open_agreement, show, submit
from pactwright.runtime.ledger_db import DurableLedger, open_ledger
from pactwright.runtime.store import open_store
from pactwright.runtime.worker import Worker
from tests.signed_bundles import BACKENDS, PACT_ID
from tests.test_runtime_commands import PARTIES, T0, WINDOW
from tests.test_runtime_worker import environment

RACES = {"sqlite": 200, "postgresql": 1000}
DEADLINE = T0 + 60 + WINDOW
SETTLING = {"release", "auto_release", "rule_for_buyer", "rule_for_seller"}
WORKERS = 3  # outbox workers draining at once, each its own process and connections


@pytest.fixture(params=BACKENDS)
def url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A store with the marketplace active; on PostgreSQL its ledger schema is dropped afterwards."""
    with environment(request.param, tmp_path) as store_url:
        yield store_url


def _setup(store_url: str, races: int) -> list[tuple[str, str]]:
    """Open `races` agreements: even ones delivered (deadline race), odd ones disputed (ruling race)."""
    plan: list[tuple[str, str]] = []
    with open_store(store_url) as store:
        for n in range(races):
            agreement_id, kind = f"t{n:04d}", ("deadline" if n % 2 == 0 else "ruling")
            open_agreement(store, PACT_ID, {"price": "10.01"}, PARTIES, agreement_id=agreement_id, clock=TestClock(T0))
            submit(store, agreement_id, "fund", "buyer", "alice", "fund", clock=TestClock(T0))
            submit(store, agreement_id, "deliver", "seller", "bob", "deliver", clock=TestClock(T0 + 60))
            if kind == "ruling":
                submit(store, agreement_id, "dispute", "buyer", "alice", "dispute", clock=TestClock(T0 + 120))
            plan.append((agreement_id, kind))
    return plan


def _side(store_url: str, side: int, plan: list[tuple[str, str]], barrier: Barrier, out: Any) -> None:
    """One racer: side 0 is the buyer (or rule_for_buyer), side 1 the scheduler (or rule_for_seller)."""
    from pactwright.runtime._agreement import load_bundle, read
    from pactwright.runtime.scheduler import fire
    from pactwright.runtime.scheduler import plan as schedule

    clock = TestClock(DEADLINE)
    outcomes: list[tuple[str, str]] = []
    with open_store(store_url, migrate_schema=False) as store:
        for agreement_id, kind in plan:
            due = None
            if kind == "deadline" and side == 1:
                with store.transaction(write=False) as db:
                    agreement = read(db, agreement_id, lock=False)
                    due = schedule(load_bundle(store, db, agreement), agreement, DEADLINE)
                assert due is not None and due.transition == "auto_release" and due.expect_version == 2
            barrier.wait(timeout=60)
            try:
                if due is not None:
                    outcome = fire(store, due, clock)
                elif kind == "deadline":
                    submit(store, agreement_id, "release", "buyer", "alice", "release", expect_version=2, clock=clock)
                    outcome = "committed"
                else:
                    transition = "rule_for_buyer" if side == 0 else "rule_for_seller"
                    submit(store, agreement_id, transition, "arbiter", "carol", transition, expect_version=3,
                           clock=clock)  # fmt: skip
                    outcome = "committed"
            except PactwrightError as exc:
                outcome = exc.code
            outcomes.append((agreement_id, outcome))
    out.put((side, outcomes))


def test_1000_races_on_postgresql_and_200_on_sqlite_each_settle_exactly_once(url: str) -> None:
    backend = "postgresql" if url.startswith("postgresql") else "sqlite"
    races = RACES[backend]
    started = time.monotonic()
    plan = _setup(url, races)
    setup_seconds = time.monotonic() - started
    ctx = multiprocessing.get_context("spawn")
    barrier, out = ctx.Barrier(2), ctx.Queue()
    procs = [ctx.Process(target=_side, args=(url, side, plan, barrier, out)) for side in (0, 1)]
    for proc in procs:
        proc.start()
    results = dict(out.get(timeout=600) for _ in procs)
    for proc in procs:
        proc.join(timeout=60)
        assert proc.exitcode == 0
    race_seconds = time.monotonic() - started - setup_seconds
    wins = {("deadline", 0): 0, ("deadline", 1): 0, ("ruling", 0): 0, ("ruling", 1): 0}
    losers: dict[str, int] = {}
    sides = [dict(results[0]), dict(results[1])]
    with open_store(url) as store:
        rows = store.dump()
        settles: dict[str, int] = {}
        for row in rows["events"]:
            if row[3] in SETTLING:
                settles[row[0]] = settles.get(row[0], 0) + 1
        outbox: dict[str, int] = {}
        for row in rows["outbox"]:
            if int(row[1]) > 1:  # every entry after the funding one settles
                outbox[row[0]] = outbox.get(row[0], 0) + 1
        for agreement_id, kind in plan:
            pair = [sides[0][agreement_id], sides[1][agreement_id]]
            assert pair.count("committed") == 1, (agreement_id, pair)
            loser = pair[1 - pair.index("committed")]
            assert loser in ("PW509", "PW510"), (agreement_id, pair)
            losers[loser] = losers.get(loser, 0) + 1
            wins[(kind, pair.index("committed"))] += 1
            assert settles.get(agreement_id) == 1 and outbox.get(agreement_id) == 1, agreement_id
        for agreement_id, _ in plan[:: max(1, races // 50)]:
            assert show(store, agreement_id).agreement.balances["escrow"] == 0
        assert all('"escrow":"0"' in str(row[11]) for row in rows["agreements"] if str(row[0]).startswith("t"))
        drained = time.monotonic()
        with open_ledger(None, url) as ledger:  # created here, so the workers only open it
            pass
        drains = [ctx.Process(target=_drain, args=(url, out)) for _ in range(WORKERS)]
        for proc in drains:
            proc.start()
        counts = [out.get(timeout=600) for _ in drains]
        for proc in drains:
            proc.join(timeout=60)
            assert proc.exitcode == 0
        drain_seconds = time.monotonic() - drained
        delivered = sum(c.get("delivered", 0) for c in counts)
        assert delivered == len(rows["outbox"]) and all(set(c) <= {"delivered", "skipped"} for c in counts), counts
        with open_ledger(None, url, create=False) as ledger:
            assert Worker(store, ledger, TestClock(DEADLINE)).drain() == []  # nothing left behind
            assert {row[7] for row in store.dump()["outbox"]} == {"delivered"}
            settled = _ledger_settlements(ledger, plan)
            _assert_ledger_matches_store(ledger, store.dump()["agreements"])
    assert settled == dict.fromkeys((a for a, _ in plan), 1), {a: n for a, n in settled.items() if n != 1}
    print(
        f"\n{races} terminal races on {backend} ({setup_seconds:.1f}s setup, {race_seconds:.1f}s racing): "
        f"release by buyer {wins[('deadline', 0)]} vs auto_release by scheduler {wins[('deadline', 1)]}; "
        f"rule_for_buyer {wins[('ruling', 0)]} vs rule_for_seller {wins[('ruling', 1)]}; "
        f"losers refused {dict(sorted(losers.items()))}; double settlements in the store 0\n"
        f"{WORKERS} worker processes drained {delivered} outbox entries into the ledger in {drain_seconds:.1f}s "
        f"({delivered / max(drain_seconds, 1e-9):.0f}/s; per worker {[c.get('delivered', 0) for c in counts]}); "
        f"settlements in the ledger: "
        f"{sum(settled.values())} for {len(plan)} agreements (exactly one each), escrow 0 in the ledger for all "
        f"{len(plan)}, ledger balances equal the store's"
    )


def _drain(store_url: str, out: Any) -> None:
    """One worker process (`pactwright worker --drain`): deliver until nothing is due; report its outcome counts."""
    counts: dict[str, int] = {}
    with open_store(store_url, migrate_schema=False) as store, open_ledger(None, store_url, create=False) as ledger:
        for outcome in Worker(store, ledger, TestClock(DEADLINE)).drain():
            counts[outcome.status] = counts.get(outcome.status, 0) + 1
    out.put(counts)


def _ledger_settlements(ledger: DurableLedger, plan: list[tuple[str, str]]) -> dict[str, int]:
    """Per agreement, how many references the LEDGER applied whose postings move money out of its escrow."""
    escrows = {f"escrow:{agreement_id}": agreement_id for agreement_id, _ in plan}
    settled = dict.fromkeys(escrows.values(), 0)
    references = ledger.references()
    assert len(references) == len(set(references)) == 2 * len(plan)  # funding and settlement, once each
    for reference in references:
        postings = ledger.postings(reference) or []
        owners = {escrows[p.source] for p in postings if p.source in escrows}
        assert len(owners) <= 1 and owners <= {reference.split("/")[0]}, (reference, postings)
        for owner in owners:
            settled[owner] += 1
    return settled


def _assert_ledger_matches_store(ledger: DurableLedger, agreements: list[tuple[Any, ...]]) -> None:
    """The ledger's balance of each address is the sum of the store's committed balances of the accounts there."""
    expected: dict[str, int] = {}
    for row in agreements:
        accounts, balances = json.loads(str(row[8])), json.loads(str(row[11]))
        for name, amount in balances.items():
            expected[accounts[name]] = expected.get(accounts[name], 0) + int(amount)
    held = ledger.balances()  # every non-zero balance
    assert held == {address: amount for address, amount in expected.items() if amount != 0}
    assert not [address for address in held if address.startswith("escrow:")]
    assert ledger.asset_totals() == {"EUR/2": 0}


@pytest.fixture(autouse=True)
def _show_counts(capsys: pytest.CaptureFixture[str]) -> Any:
    """Print the race counts even when pytest captures output (`-q` in CI)."""
    yield
    with capsys.disabled():
        text = capsys.readouterr().out
        if text:
            print(text, end="")
