"""The terminal race over HTTP: two client processes against one live `pactwright serve` on PostgreSQL.

For each of 20 disputed marketplace agreements, two OS processes (spawned
interpreters, each with its own HTTP connection and the arbiter's bearer
token) meet at a barrier, then both POST a settling command:
`rule_for_buyer` (the refund to the buyer) against `rule_for_seller` (the
release to the seller and the platform). Half the races pin
`expect_version` to the version both read; half send no version. Exactly one
side commits (201); the other is answered 409 with a problem document whose
code is PW509 (stale version) or PW510 (already final). The store then holds
exactly one settling event per agreement; after `pactwright worker --drain`
(a real process) the LEDGER, a PostgreSQL schema of its own, holds exactly
one settlement per agreement (one reference moving money out of its escrow),
every escrow is 0 there, and `GET /v1/agreements/{id}` shows the winner's
state with the ledger's balances.
"""

from __future__ import annotations

import multiprocessing
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from multiprocessing.synchronize import Barrier
from pathlib import Path
from typing import Any

import httpx2
import pytest

from pactwright.runtime import TestClock, open_agreement, submit
from pactwright.runtime.ledger_db import open_ledger
from pactwright.runtime.store import open_store
from tests.signed_bundles import PACT_ID, temporary_store
from tests.test_runtime_race import _ledger_settlements
from tests.test_service_env import PARTIES, T0, Env, problem_of, service_env
from tests.test_service_process import serving

RACES = 20
NOW = T0 + 600  # the trusted time `serve` and the worker read from their clock file
SETTLING = {"rule_for_buyer": "refunded", "rule_for_seller": "released"}


@dataclass
class Live:
    env: Env
    base: str
    ledger: str
    clock_file: Path


@pytest.fixture
def live(tmp_path: Path) -> Iterator[Live]:
    """A PostgreSQL store with the marketplace active, a PostgreSQL ledger schema of its own, and `serve`."""
    clock_file = tmp_path / "clock"
    clock_file.write_text(f"{NOW}\n")
    with service_env("postgresql", tmp_path) as env, temporary_store("postgresql", tmp_path) as ledger:
        command = [sys.executable, "-m", "pactwright.cli.main", "serve", "--store", env.store, "--ledger", ledger,
                   "--port", "0", "--clock-file", str(clock_file)]  # fmt: skip
        with serving(command) as (base, _):
            yield Live(env, base, ledger, clock_file)


def _disputed(store_url: str) -> list[tuple[str, bool]]:
    """`RACES` agreements funded, delivered and disputed (version 3); even ones are raced with `expect_version`."""
    plan = []
    with open_store(store_url) as store:
        for n in range(RACES):
            agreement = f"h{n:02d}"
            open_agreement(store, PACT_ID, {"price": "10.01"}, PARTIES, agreement_id=agreement, clock=TestClock(T0))
            submit(store, agreement, "fund", "buyer", "alice", "fund", clock=TestClock(T0))
            submit(store, agreement, "deliver", "seller", "bob", "deliver", clock=TestClock(T0 + 60))
            submit(store, agreement, "dispute", "buyer", "alice", "dispute", clock=TestClock(T0 + 120))
            plan.append((agreement, n % 2 == 0))
    return plan


def _racer(base: str, token: str, transition: str, plan: list[tuple[str, bool]], barrier: Barrier, out: Any) -> None:
    """One client process: before each race it meets the other at the barrier, then submits `transition`."""
    outcomes = []
    with httpx2.Client(base_url=base, timeout=60, headers={"Authorization": f"Bearer {token}"}) as client:
        assert client.get("/healthz").status_code == 200  # the connection is open before the first race
        for agreement, pinned in plan:
            body: dict[str, Any] = {"transition": transition, "role": "arbiter"}
            if pinned:
                body["expect_version"] = 3
            barrier.wait(timeout=60)
            response = client.post(f"/v1/agreements/{agreement}/commands", json=body,
                                   headers={"Idempotency-Key": f"{transition}-{agreement}"})  # fmt: skip
            outcomes.append((agreement, response.status_code, response.headers.get("content-type"), response.text))
    out.put((transition, outcomes))


def test_two_client_processes_race_to_settle_over_http_and_exactly_one_settles(live: Live) -> None:
    plan = _disputed(live.env.store)
    ctx = multiprocessing.get_context("spawn")
    barrier, out = ctx.Barrier(2), ctx.Queue()
    token = live.env.tokens["carol"]
    procs = [ctx.Process(target=_racer, args=(live.base, token, transition, plan, barrier, out))
             for transition in SETTLING]  # fmt: skip
    for proc in procs:
        proc.start()
    results = dict(out.get(timeout=300) for _ in procs)
    for proc in procs:
        proc.join(timeout=60)
        assert proc.exitcode == 0
    sides = {transition: {a: (status, media, text) for a, status, media, text in outcomes}
             for transition, outcomes in results.items()}  # fmt: skip
    winners: dict[str, str] = {}
    losers: dict[str, int] = {}
    for agreement, _ in plan:
        answers = {transition: sides[transition][agreement] for transition in SETTLING}
        committed = [t for t, (status, _, _) in answers.items() if status == 201]
        assert len(committed) == 1, (agreement, answers)
        winners[agreement] = committed[0]
        ((status, media, text),) = [a for t, a in answers.items() if t != committed[0]]
        response = httpx2.Response(status, headers={"content-type": media or ""}, content=text.encode())
        code = response.json().get("code")
        assert code in ("PW509", "PW510"), (agreement, answers)
        problem_of(response, 409, code)
        losers[code] = losers.get(code, 0) + 1

    with open_store(live.env.store) as store:
        rows = store.dump()
    settles: dict[str, list[str]] = {}
    for row in rows["events"]:
        if row[3] in SETTLING:
            settles.setdefault(str(row[0]), []).append(str(row[3]))
    assert settles == {agreement: [winners[agreement]] for agreement, _ in plan}

    drained = subprocess.run([sys.executable, "-m", "pactwright.cli.main", "worker", "--store", live.env.store,
                              "--ledger", live.ledger, "--drain", "--clock-file", str(live.clock_file)],
                             capture_output=True, text=True, timeout=300, check=False)  # fmt: skip
    assert drained.returncode == 0, drained.stderr
    with open_ledger(live.ledger, None, create=False) as ledger:
        settled = _ledger_settlements(ledger, [(agreement, "ruling") for agreement, _ in plan])
        assert not [address for address in ledger.balances() if address.startswith("escrow:")]
        assert ledger.asset_totals() == {"EUR/2": 0}
    assert settled == dict.fromkeys(winners, 1)

    with httpx2.Client(base_url=live.base, timeout=30, headers=live.env.auth("carol")) as client:
        for agreement, _ in plan:
            shown = client.get(f"/v1/agreements/{agreement}")
            assert shown.status_code == 200, shown.text
            doc = shown.json()
            assert (doc["state"], doc["version"]) == (SETTLING[winners[agreement]], 4), doc
            assert doc["balances"]["escrow"] == "0" and doc["pending_outbox"] == []
            assert doc["ledger_balances"]["escrow"] == "0", doc["ledger_balances"]
    won = {t: list(winners.values()).count(t) for t in SETTLING}
    print(
        f"\n{RACES} settling races over HTTP (two client processes, one serve, PostgreSQL): wins {won}; losers "
        f"refused {dict(sorted(losers.items()))}; one settlement per agreement in the store and in the ledger"
    )


@pytest.fixture(autouse=True)
def _show_counts(capsys: pytest.CaptureFixture[str]) -> Any:
    """Print the race counts even when pytest captures output (`-q` in CI)."""
    yield
    with capsys.disabled():
        text = capsys.readouterr().out
        if text:
            print(text, end="")
