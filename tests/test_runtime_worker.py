"""The outbox worker on both backends: delivery, comparison, quarantine, retry, commit order, concurrency.

Every test runs against a real SQLite file and a real PostgreSQL schema; the
ledger is a database of its own (the store's sibling SQLite file, or the
schema `S_ledger` beside the store's schema S), never the store.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from pactwright.cli.main import main
from pactwright.errors import LedgerError
from pactwright.runtime import TestClock, open_agreement, show, submit
from pactwright.runtime.activation import FixedClock, activate_files
from pactwright.runtime.ledger_api import Ledger
from pactwright.runtime.ledger_db import open_ledger
from pactwright.runtime.numscript import Posting
from pactwright.runtime.store import Store, open_store
from pactwright.runtime.worker import Worker
from tests.signed_bundles import BACKENDS, NOW, PACT_ID, POSTGRES_URL, default_trust, signed, temporary_store

ROOT = Path(__file__).resolve().parent.parent
T0 = 1780315200
PARTIES = {"buyer": "alice", "seller": "bob", "arbiter": "carol"}
OTHER_PROGRAM = "send [EUR/2 5] (\n  source = @world\n  destination = @x\n)\n"
HAPPY = (("fund", "buyer", "alice"), ("deliver", "seller", "bob"), ("release", "buyer", "alice"))


@contextlib.contextmanager
def environment(backend: str, directory: Path) -> Iterator[str]:
    """A store with the marketplace bundle active; its default ledger is dropped afterwards on PostgreSQL."""
    with temporary_store(backend, directory) as url:
        with open_store(url) as store:
            activate_files(store, signed("1.0.0"), default_trust(), clock=FixedClock(datetime.fromisoformat(NOW)))
        try:
            yield url
        finally:
            if backend == "postgresql":
                import psycopg

                schema = url.rsplit("%3D", 1)[1]
                with psycopg.connect(POSTGRES_URL, autocommit=True) as admin:
                    admin.execute(f'DROP SCHEMA IF EXISTS "{schema}_ledger" CASCADE')


def run_steps(url: str, agreement_id: str, steps: tuple[tuple[str, str, str], ...] = HAPPY,
              price: str = "64.90") -> None:  # fmt: skip
    """Open the agreement and commit `steps` through the runtime API."""
    with open_store(url) as store:
        open_agreement(store, PACT_ID, {"price": price}, PARTIES, agreement_id=agreement_id, clock=TestClock(T0))
        for transition, role, party in steps:
            submit(store, agreement_id, transition, role, party, f"{agreement_id}-{transition}", clock=TestClock(T0))


def outbox_rows(url: str) -> list[dict[str, Any]]:
    with open_store(url) as store, store.transaction(write=False) as db:
        found = db.query(
            "SELECT reference, status, attempts, expected_postings, delivered_postings, last_error, lease_owner, "
            "lease_until FROM outbox ORDER BY agreement_id, event_seq, group_index"
        )
    names = ("reference", "status", "attempts", "expected", "delivered", "last_error", "lease_owner", "lease_until")
    return [dict(zip(names, row, strict=True)) for row in found]


def evidence(url: str, agreement_id: str) -> list[dict[str, Any]]:
    with open_store(url) as store, store.transaction(write=False) as db:
        found = db.query("SELECT record FROM evidence WHERE agreement_id = ? ORDER BY seq", (agreement_id,))
    return [json.loads(str(r[0])) for r in found]


def tamper(url: str, sql: str, params: tuple[Any, ...] = ()) -> None:
    with open_store(url) as store, store.transaction() as db:
        db.execute(sql, params)


def cli(*args: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    assert "Traceback" not in err
    return code, out, err


def worker_process(url: str, clock_file: Path, *extra: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    """A real worker OS process (`pactwright worker`), its output in JSON."""
    command = [sys.executable, "-m", "pactwright.cli.main", "worker", "--store", url, "--clock-file", str(clock_file),
               "--format", "json", *extra]  # fmt: skip
    return subprocess.Popen(
        command, cwd=ROOT, env={**os.environ, **(env or {})}, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


class Recording:
    """A ledger wrapper that records every apply and can fail the first `failures` of them."""

    def __init__(self, inner: Ledger, failures: int = 0, error: Exception | None = None) -> None:
        self.inner, self.failures, self.calls = inner, failures, []
        self.error = error or sqlite3.OperationalError("unable to open database file")

    def apply(self, reference: str, program_text: str, variables: dict[str, str]) -> list[Posting]:
        self.calls.append(reference)
        if self.failures > 0:
            self.failures -= 1
            raise self.error
        return self.inner.apply(reference, program_text, variables)

    def postings(self, reference: str) -> list[Posting] | None:
        return self.inner.postings(reference)

    def balances(self, accounts: list[str] | None = None) -> dict[str, int]:
        return self.inner.balances(accounts)


@pytest.fixture(params=BACKENDS)
def url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    with environment(request.param, tmp_path) as store_url:
        yield store_url


@contextlib.contextmanager
def opened(url: str, clock: TestClock, ledger: Ledger | None = None) -> Iterator[tuple[Store, Worker, Ledger]]:
    with open_store(url) as store, open_ledger(None, url) as durable:
        chosen = ledger or durable
        if isinstance(chosen, Recording):
            chosen.inner = durable
        yield store, Worker(store, chosen, clock), chosen


# The happy path ---------------------------------------------------------------------


@pytest.mark.parametrize(("price", "platform", "seller"), [("64.90", 649, 5841), ("64.91", 650, 5841),
                         ("1.09", 11, 98)])  # fmt: skip
def test_happy_path_the_worker_delivers_exact_balances(
    url: str, price: str, platform: int, seller: int, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run_steps(url, "m1", price=price)
    clock = tmp_path / "clock"
    clock.write_text(f"{T0}\n")
    code, out, err = cli("worker", "--store", url, "--drain", "--clock-file", str(clock), "--format", "json",
                         capsys=capsys)  # fmt: skip
    assert code == 0, err
    assert json.loads(out)["counts"] == {"delivered": 2, "quarantined": 0, "retry": 0, "skipped": 0}
    with open_ledger(None, url, create=False) as ledger:
        held = ledger.balances(["escrow:m1", "platform:fees", "sellers:bob:payable", "world"])
        assert ledger.references() == ["m1/1/0", "m1/3/0"]
        assert ledger.asset_totals() == {"EUR/2": 0}
    total = int(price.replace(".", ""))
    assert held == {"escrow:m1": 0, "platform:fees": platform, "sellers:bob:payable": seller, "world": -total}
    code, out, err = cli("show", "m1", "--store", url, "--format", "json", capsys=capsys)
    assert code == 0, err
    doc = json.loads(out)
    assert doc["ledger_balances"] == doc["balances"]
    assert doc["pending_outbox"] == []
    rows = outbox_rows(url)
    assert [(r["reference"], r["status"], r["attempts"]) for r in rows] == [("m1/1/0", "delivered", 1),
                                                                          ("m1/3/0", "delivered", 1)]  # fmt: skip
    assert all(json.loads(r["delivered"]) == json.loads(r["expected"]) for r in rows)
    assert all(r["lease_owner"] is None and r["last_error"] is None for r in rows)
    records = evidence(url, "m1")
    assert [(r["kind"], r.get("reference")) for r in records if r["kind"] == "delivered"] == [
        ("delivered", "m1/1/0"), ("delivered", "m1/3/0")]  # fmt: skip
    assert all(r["prev_hash"] is not None for r in records[1:])
    # A second drain finds nothing: delivered entries are never delivered again.
    code, out, _ = cli("worker", "--store", url, "--drain", "--clock-file", str(clock), "--format", "json",
                       capsys=capsys)  # fmt: skip
    assert code == 0 and json.loads(out)["outcomes"] == []


def test_show_without_any_ledger_has_null_ledger_balances(url: str, capsys: pytest.CaptureFixture[str]) -> None:
    run_steps(url, "m1", HAPPY[:1])
    code, out, err = cli("show", "m1", "--store", url, "--format", "json", capsys=capsys)
    assert code == 0, err
    assert json.loads(out)["ledger_balances"] is None


# Quarantine -------------------------------------------------------------------------


class Lying(Recording):
    """A ledger that applies the postings but answers with one minor unit more on the first."""

    def apply(self, reference: str, program_text: str, variables: dict[str, str]) -> list[Posting]:
        answer = super().apply(reference, program_text, variables)
        first = answer[0]
        return [Posting(first.source, first.destination, first.amount + 1, first.asset), *answer[1:]]


def test_an_edited_outbox_row_is_quarantined_before_the_ledger_sees_it(url: str) -> None:
    run_steps(url, "e1")
    forged = [{"amount": "6400", "asset": "EUR/2", "destination_address": "escrow:e1", "source_address": "world"}]
    tamper(url, "UPDATE outbox SET expected_postings = ? WHERE reference = 'e1/1/0'",
           (json.dumps(forged, separators=(",", ":"), sort_keys=True),))  # fmt: skip
    with opened(url, TestClock(T0)) as (_, worker, ledger):
        outcomes = worker.drain()
        assert [(o.reference, o.status, o.code) for o in outcomes] == [("e1/1/0", "quarantined", "PW564")]
        assert ledger.references() == []  # type: ignore[attr-defined]
    rows = {r["reference"]: r for r in outbox_rows(url)}
    assert rows["e1/1/0"]["status"] == "quarantined"
    assert rows["e1/1/0"]["last_error"].startswith("PW564: the entry's expected postings are not event")


def test_ledger_postings_that_differ_are_quarantined_with_both_sides(
    url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    run_steps(url, "q1")
    forged = [{"amount": "6490", "asset": "EUR/2", "destination_address": "escrow:q1", "source_address": "world"}]
    with opened(url, TestClock(T0), Lying(None)) as (_, worker, ledger):  # type: ignore[arg-type]
        outcomes = worker.drain()
        assert [(o.reference, o.status, o.code) for o in outcomes] == [("q1/1/0", "quarantined", "PW560")]
        assert ledger.calls == ["q1/1/0"]  # type: ignore[attr-defined]
    rows = {r["reference"]: r for r in outbox_rows(url)}
    assert rows["q1/1/0"]["status"] == "quarantined"
    assert json.loads(rows["q1/1/0"]["expected"]) == forged
    ledger_side = json.loads(rows["q1/1/0"]["delivered"])
    assert ledger_side == [{"amount": "6491", "asset": "EUR/2", "destination_address": "escrow:q1",
                            "source_address": "world"}]  # fmt: skip
    assert rows["q1/1/0"]["last_error"].startswith("PW560: posting 0: `amount` is `6491` in the ledger")
    # Commit order: the release waits behind the quarantined fund, and a later drain does not retry it.
    assert rows["q1/3/0"]["status"] == "pending" and rows["q1/3/0"]["attempts"] == 0
    with opened(url, TestClock(T0 + 3600)) as (_, worker, _ledger):
        assert worker.drain() == []
    record = next(r for r in evidence(url, "q1") if r["kind"] == "quarantined")
    assert record["expected"] == forged and record["ledger"] == ledger_side and record["code"] == "PW560"
    code, out, err = cli("outbox", "list", "--store", url, "--quarantined", "--format", "json", capsys=capsys)
    assert code == 0, err
    listed = json.loads(out)
    assert [(e["reference"], e["status"]) for e in listed] == [("q1/1/0", "quarantined")]
    assert listed[0]["expected_postings"] == forged and listed[0]["ledger_postings"] == ledger_side
    code, out, err = cli("outbox", "list", "--store", url, "--quarantined", capsys=capsys)
    assert code == 0, err
    assert "expected: world -> escrow:q1 6490 EUR/2" in out and "ledger:   world -> escrow:q1 6491 EUR/2" in out
    code, out, _ = cli("outbox", "list", "--store", url, "--format", "json", capsys=capsys)
    assert [e["status"] for e in json.loads(out)] == ["quarantined", "pending"]


def test_a_ledger_refusal_quarantines_and_the_cli_exits_1(url: str, tmp_path: Path,
                                                         capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    run_steps(url, "r1", HAPPY[:1])
    with open_ledger(None, url) as ledger:  # someone else already used the reference with other variables
        assert ledger.apply("r1/1/0", OTHER_PROGRAM, {})
    clock = tmp_path / "clock"
    clock.write_text(f"{T0}\n")
    code, out, _ = cli("worker", "--store", url, "--drain", "--clock-file", str(clock), capsys=capsys)
    assert code == 1
    assert "quarantined r1/1/0" in out and "[PW561]" in out and "PW757" in out
    assert outbox_rows(url)[0]["status"] == "quarantined"


def test_a_malformed_outbox_row_is_quarantined_before_the_ledger_sees_it(url: str) -> None:
    run_steps(url, "b1", HAPPY[:1])
    tamper(url, "UPDATE outbox SET variables = '[]' WHERE reference = 'b1/1/0'")
    recording = Recording(None)  # type: ignore[arg-type]
    with opened(url, TestClock(T0), recording) as (_, worker, _ledger):
        assert [(o.status, o.code) for o in worker.drain()] == [("quarantined", "PW562")]
    assert recording.calls == []


# Retry ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "error", [sqlite3.OperationalError("disk I/O error"), LedgerError("the ledger refused the write", code="PW552")]
)
def test_a_delivery_failure_backs_off_and_retries_with_the_same_reference(url: str, error: Exception) -> None:
    run_steps(url, "t1", HAPPY[:1])
    clock = TestClock(T0)
    recording = Recording(None, failures=2, error=error)  # type: ignore[arg-type]
    with opened(url, clock, recording) as (_, worker, ledger):
        assert [(o.status, o.attempts) for o in worker.drain()] == [("retry", 1)]
        row = outbox_rows(url)[0]
        assert (row["status"], row["attempts"], row["lease_owner"], row["lease_until"]) == ("pending", 1, None, T0 + 2)
        assert row["last_error"].startswith("PW563" if isinstance(error, sqlite3.Error) else "PW552")
        assert worker.drain() == []  # not due before its next try time
        clock.advance(2)
        assert [(o.status, o.attempts) for o in worker.drain()] == [("retry", 2)]
        assert outbox_rows(url)[0]["lease_until"] == T0 + 2 + 4  # exponential back-off
        clock.advance(4)
        assert [(o.status, o.attempts) for o in worker.drain()] == [("delivered", 3)]
        assert recording.calls == ["t1/1/0"] * 3
        assert ledger.balances(["escrow:t1"]) == {"escrow:t1": 6490}
    assert outbox_rows(url)[0]["last_error"] is None


# Commit order -----------------------------------------------------------------------


def test_an_agreements_entries_reach_the_ledger_in_commit_order(url: str) -> None:
    run_steps(url, "o1")
    run_steps(url, "o2")
    clock = TestClock(T0)
    recording = Recording(None, failures=1)  # type: ignore[arg-type]
    with opened(url, clock, recording) as (_, worker, _ledger):
        first = worker.drain()
        # o1's fund failed: o1's release may not pass it, while o2 proceeds in its own order.
        assert [(o.reference, o.status) for o in first] == [("o1/1/0", "retry"), ("o2/1/0", "delivered"),
                                                            ("o2/3/0", "delivered")]  # fmt: skip
        clock.advance(60)
        assert [(o.reference, o.status) for o in worker.drain()] == [("o1/1/0", "delivered"), ("o1/3/0", "delivered")]
    assert recording.calls == ["o1/1/0", "o2/1/0", "o2/3/0", "o1/1/0", "o1/3/0"]


def test_a_claimed_entry_is_not_claimed_again_until_its_lease_expires(url: str) -> None:
    run_steps(url, "l1", HAPPY[:1])
    clock = TestClock(T0)
    with opened(url, clock) as (store, first, ledger):
        assert first._claim() is not None  # claimed, then (say) the process hangs
        second = Worker(store, ledger, clock, lease_seconds=60)
        assert second.drain() == []
        clock.advance(60)
        assert [(o.status, o.attempts) for o in second.drain()] == [("delivered", 2)]


# Several workers at once ------------------------------------------------------------


def test_two_worker_processes_drain_at_once_and_deliver_each_entry_once(url: str, tmp_path: Path) -> None:
    agreements = [f"p{n}" for n in range(12)]
    for agreement_id in agreements:
        run_steps(url, agreement_id)
    with open_ledger(None, url):
        pass  # create the ledger before the race, so neither worker creates it
    clock = tmp_path / "clock"
    clock.write_text(f"{T0}\n")
    workers = [worker_process(url, clock, "--drain") for _ in range(2)]
    results = [w.communicate(timeout=300) for w in workers]
    assert [w.returncode for w in workers] == [0, 0], [err for _, err in results]
    delivered = [[o["reference"] for o in json.loads(out)["outcomes"] if o["status"] == "delivered"]
                 for out, _ in results]  # fmt: skip
    print(f"worker A delivered {len(delivered[0])}, worker B delivered {len(delivered[1])}")
    expected = sorted(f"{a}/{s}/0" for a in agreements for s in (1, 3))
    assert sorted(delivered[0] + delivered[1]) == expected  # each entry by exactly one worker
    rows = outbox_rows(url)
    assert all(r["status"] == "delivered" and r["attempts"] == 1 for r in rows)
    with open_ledger(None, url, create=False) as ledger:
        assert sorted(ledger.references()) == expected
        assert all(ledger.balances([f"escrow:{a}"]) == {f"escrow:{a}": 0} for a in agreements)
        assert ledger.balances(["platform:fees"]) == {"platform:fees": 649 * len(agreements)}
    for agreement_id in agreements:
        kinds = [r.get("reference") for r in evidence(url, agreement_id) if r["kind"] == "delivered"]
        assert kinds == [f"{agreement_id}/1/0", f"{agreement_id}/3/0"]


def test_a_running_worker_delivers_new_entries_and_stops_cleanly_on_sigterm(url: str, tmp_path: Path) -> None:
    clock = tmp_path / "clock"
    clock.write_text(f"{T0}\n")
    process = worker_process(url, clock, "--poll", "0.1")
    try:
        run_steps(url, "s1", HAPPY[:1])
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and outbox_rows(url)[0]["status"] != "delivered":
            time.sleep(0.1)
        assert outbox_rows(url)[0]["status"] == "delivered"
        process.send_signal(signal.SIGTERM)
        out, err = process.communicate(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 0, err
    assert [o["reference"] for o in json.loads(out)["outcomes"]] == ["s1/1/0"]


def test_show_reads_a_named_ledger_and_refuses_a_missing_one(url: str, tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    run_steps(url, "n1", HAPPY[:1])
    ledger = str(tmp_path / "own.ledger.sqlite")
    code, _, err = cli("show", "n1", "--store", url, "--ledger", ledger, capsys=capsys)
    assert code == 2 and "PW550" in err
    with open_store(url) as store, open_ledger(ledger, url) as own:
        Worker(store, own, TestClock(T0)).drain()
        assert show(store, "n1", ledger=own).ledger_balances == show(store, "n1").to_json()["balances"]
    code, out, err = cli("show", "n1", "--store", url, "--ledger", ledger, capsys=capsys)
    assert code == 0, err
    assert "ledger balances:" in out
