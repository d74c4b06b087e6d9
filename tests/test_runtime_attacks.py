"""Attacks on the runtime's guarantees, with real processes and real databases.

Each test states the CORRECT behaviour. Where the runtime does not behave
that way yet, the test is `xfail(strict=True)` with the defect in its
reason, so the suite stays green while the defect stays recorded (and the
mark must go once it is fixed). The other tests are the strongest attack
tried against a guarantee that held.
"""

from __future__ import annotations

import multiprocessing
import os
import sqlite3
import subprocess
import sys
import unicodedata
from collections import Counter
from collections.abc import Iterator
from datetime import datetime
from multiprocessing.synchronize import Barrier
from pathlib import Path
from typing import Any

import pytest

from pactwright.cli.main import main
from pactwright.errors import CommandError, PactwrightError
from pactwright.runtime import TestClock, Worker, open_agreement, open_ledger, show, submit, verify_evidence
from pactwright.runtime._evidence_chain import chain_rows
from pactwright.runtime.activation import FixedClock, activate_files
from pactwright.runtime.store import open_store
from tests import _chain_tamper as chain
from tests.signed_bundles import NOW, PACT_ID, default_trust, dump, signed, temporary_store

T0 = 1780315200  # 2026-06-01T12:00:00Z
WINDOW = 14 * 86400
PARTIES = {"buyer": "alice", "seller": "bob", "arbiter": "carol"}
PACTWRIGHT = str(Path(sys.executable).with_name("pactwright"))


def _activated(url: str) -> str:
    with open_store(url) as store:
        activate_files(store, signed("1.0.0"), default_trust(), clock=FixedClock(datetime.fromisoformat(NOW)))
    return url


@pytest.fixture
def url(tmp_path: Path) -> str:
    return _activated(str(tmp_path / "store.db"))


@pytest.fixture
def pg_url(tmp_path: Path) -> Iterator[str]:
    with temporary_store("postgresql", tmp_path) as store_url:
        yield _activated(store_url)


def _funded(url: str, *ids: str, released: bool = False) -> None:
    with open_store(url) as store:
        for agreement in ids:
            open_agreement(store, PACT_ID, {"price": "64.90"}, PARTIES, agreement_id=agreement, clock=TestClock(T0))
            submit(store, agreement, "fund", "buyer", "alice", "fund", clock=TestClock(T0))
            if released:
                submit(store, agreement, "deliver", "seller", "bob", "deliver", clock=TestClock(T0 + 60))
                submit(store, agreement, "release", "buyer", "alice", "release", clock=TestClock(T0 + 120))


def _refused(url: str, code: str, call: Any) -> CommandError:
    """`call()` must raise a CommandError with `code` and leave every store table as it was."""
    before = dump(url)
    with pytest.raises(CommandError) as caught:
        call()
    assert caught.value.code == code, caught.value
    assert dump(url) == before
    return caught.value


# Idempotency ---------------------------------------------------------------------------


def test_a_retry_restating_the_same_money_differently_is_answered(url: str) -> None:
    with open_store(url) as store:
        open_agreement(store, PACT_ID, {"price": "64.90"}, PARTIES, agreement_id="a1", clock=TestClock(T0))
        first = submit(store, "a1", "fund", "buyer", "alice", "k", params={"price": "64.90"}, clock=TestClock(T0))
        again = submit(store, "a1", "fund", "buyer", "alice", "k", params={"price": "64.9"}, clock=TestClock(T0))
    assert again.replayed and again.event_id == first.event_id


def test_a_key_reused_after_the_agreement_moved_on_is_refused_naming_the_field(url: str) -> None:
    _funded(url, "a1")
    with open_store(url) as store:
        error = _refused(url, "PW515", lambda: submit(store, "a1", "deliver", "seller", "bob", "fund",
                                                      clock=TestClock(T0 + 60)))  # fmt: skip
        assert error.field == "actor.party"
        # The original intent under that key is still answered, not re-executed, after the state moved on.
        submit(store, "a1", "deliver", "seller", "bob", "deliver", clock=TestClock(T0 + 60))
        before = dump(url)
        again = submit(store, "a1", "fund", "buyer", "alice", "fund", clock=TestClock(T0 + 999))
        assert again.replayed and again.event_id == "a1/1" and again.committed_at == T0
        assert dump(url) == before


def test_keys_differing_by_case_or_normalization_never_settle_twice(url: str) -> None:
    """Keys are exact strings (NFC and NFD `café` are two keys), so the version and state checks must hold."""
    _funded(url, "a1")
    nfc = "caf\u00e9"
    with open_store(url) as store:
        submit(store, "a1", "deliver", "seller", "bob", nfc, clock=TestClock(T0 + 60))
        _refused(url, "PW511", lambda: submit(store, "a1", "deliver", "seller", "bob",
                                              unicodedata.normalize("NFD", nfc), clock=TestClock(T0 + 60)))  # fmt: skip
        submit(store, "a1", "release", "buyer", "alice", "REL", clock=TestClock(T0 + 61))
        _refused(url, "PW510", lambda: submit(store, "a1", "release", "buyer", "alice", "rel",
                                              clock=TestClock(T0 + 61)))  # fmt: skip
        assert show(store, "a1").agreement.balances["escrow"] == 0


@pytest.mark.parametrize("key", ["a\x00b", "x" * 10_000_000, "\u202e", "\ud800", " k", "", "k\n"])
def test_hostile_keys_are_refused_and_change_nothing(url: str, key: str) -> None:
    _funded(url, "a1")
    with open_store(url) as store:
        _refused(url, "PW519", lambda: submit(store, "a1", "deliver", "seller", "bob", key, clock=TestClock(T0)))


@pytest.mark.parametrize("price", ["x" * 10_000_000, "9" * 5000, "64.90\x00", "-64.90", "６４.９０", "64.900",
                                   " 64.90", "6.49e1", "NaN", "-0.00"])  # fmt: skip
def test_hostile_command_params_are_refused_and_change_nothing(url: str, price: str) -> None:
    with open_store(url) as store:
        open_agreement(store, PACT_ID, {"price": "64.90"}, PARTIES, agreement_id="a1", clock=TestClock(T0))
        _refused(url, "PW516", lambda: submit(store, "a1", "fund", "buyer", "alice", "k", params={"price": price},
                                              clock=TestClock(T0)))  # fmt: skip


def test_a_party_bound_to_two_roles_acts_only_in_the_role_it_names(url: str) -> None:
    with open_store(url) as store:
        parties = {"buyer": "alice", "seller": "bob", "arbiter": "alice"}
        open_agreement(store, PACT_ID, {"price": "64.90"}, parties, agreement_id="a1", clock=TestClock(T0))
        submit(store, "a1", "fund", "buyer", "alice", "fund", clock=TestClock(T0))
        submit(store, "a1", "deliver", "seller", "bob", "deliver", clock=TestClock(T0))
        submit(store, "a1", "dispute", "buyer", "alice", "dispute", clock=TestClock(T0))
        _refused(url, "PW507", lambda: submit(store, "a1", "rule_for_buyer", "buyer", "alice", "r",
                                              clock=TestClock(T0)))  # fmt: skip
        _refused(url, "PW508", lambda: submit(store, "a1", "rule_for_buyer", "arbiter", "bob", "r",
                                              clock=TestClock(T0)))  # fmt: skip


def _race(url: str, rounds: int, who: int, barrier: Barrier, out: Any) -> None:
    """One racer: 0 and 1 send `release` with the SAME key, 2 the scheduler's `auto_release`, no expected version."""
    with open_store(url) as store:
        for n in range(rounds):
            barrier.wait()
            try:
                if who < 2:
                    result = submit(store, f"r{n}", "release", "buyer", "alice", "same", clock=TestClock(T0 + WINDOW))
                else:
                    result = submit(store, f"r{n}", "auto_release", "scheduler", "scheduler", "auto",
                                    clock=TestClock(T0 + WINDOW))  # fmt: skip
                out.put((n, who, "replayed" if result.replayed else "committed"))
            except CommandError as exc:
                out.put((n, who, exc.code))


def test_three_processes_racing_one_key_and_another_settle_once_on_postgresql(pg_url: str) -> None:
    rounds = 12
    with open_store(pg_url) as store:
        for n in range(rounds):
            open_agreement(store, PACT_ID, {"price": "64.90"}, PARTIES, agreement_id=f"r{n}", clock=TestClock(T0))
            submit(store, f"r{n}", "fund", "buyer", "alice", "fund", clock=TestClock(T0))
            submit(store, f"r{n}", "deliver", "seller", "bob", "deliver", clock=TestClock(T0))
    context = multiprocessing.get_context("spawn")
    barrier, out = context.Barrier(3), context.Queue()
    racers = [context.Process(target=_race, args=(pg_url, rounds, who, barrier, out)) for who in range(3)]
    for racer in racers:
        racer.start()
    results = [out.get(timeout=60) for _ in range(3 * rounds)]
    for racer in racers:
        racer.join(timeout=60)
    for n in range(rounds):
        outcomes = Counter(o for m, _, o in results if m == n)
        assert outcomes["committed"] == 1, outcomes
        assert set(outcomes) <= {"committed", "replayed", "PW510"}, outcomes
    with open_store(pg_url) as store, store.transaction(write=False) as db:
        settled = db.query("SELECT agreement_id, COUNT(*) FROM events WHERE transition IN ('release', "
                           "'auto_release') GROUP BY agreement_id")  # fmt: skip
        assert sorted(int(c) for _, c in settled) == [1] * rounds


# Trusted time ------------------------------------------------------------------------------


@pytest.mark.parametrize("content", ["", "abc", "-5", "1e9", "99999999999999999999999999999", "1780315200.5",
                                     "0x10", "1780315200\x00", "1780315200\njunk"])  # fmt: skip
def test_a_hostile_clock_file_is_refused_and_writes_nothing(
    url: str, content: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    clock = tmp_path / "clock"
    clock.write_text(content)
    before = dump(url)
    code = main(["open", PACT_ID, "--store", url, "--id", "a1", "--param", "price=64.90", "--party", "buyer=alice",
                 "--party", "seller=bob", "--party", "arbiter=carol", "--clock-file", str(clock)])  # fmt: skip
    err = capsys.readouterr().err
    assert code == 2 and "PW520" in err and "Traceback" not in err
    assert dump(url) == before


@pytest.mark.parametrize("content", ["\u00b2", "\u0661\u0667\u0668\u0660\u0663\u0661\u0665\u0662\u0660\u0660"])
def test_a_clock_file_of_non_ascii_digits_is_refused_and_writes_nothing(
    url: str, content: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    clock = tmp_path / "clock"
    clock.write_text(content, encoding="utf-8")
    before = dump(url)
    code = main(["open", PACT_ID, "--store", url, "--id", "a1", "--param", "price=64.90", "--party", "buyer=alice",
                 "--party", "seller=bob", "--party", "arbiter=carol", "--clock-file", str(clock)])  # fmt: skip
    err = capsys.readouterr().err
    assert code == 2 and "PW520" in err and "Traceback" not in err
    assert dump(url) == before


def test_a_clock_moving_backwards_never_commits_before_the_last_event(url: str) -> None:
    with open_store(url) as store:
        open_agreement(store, PACT_ID, {"price": "64.90"}, PARTIES, agreement_id="a1", clock=TestClock(T0))
        submit(store, "a1", "fund", "buyer", "alice", "fund", clock=TestClock(T0 + 1000))
        try:
            result = submit(store, "a1", "deliver", "seller", "bob", "deliver", clock=TestClock(T0 - 5000))
        except PactwrightError:
            return  # refusing a regressed clock is correct too
        assert result.committed_at >= T0 + 1000
        stamps = show(store, "a1").agreement.stamps
        assert stamps["delivered_at"] >= stamps["funded_at"]


# The outbox worker -------------------------------------------------------------------------


def test_three_workers_and_a_killed_one_deliver_each_entry_once(url: str, tmp_path: Path) -> None:
    agreements = [f"a{n}" for n in range(12)]
    _funded(url, *agreements, released=True)
    clock = tmp_path / "clock"
    clock.write_text(f"{T0 + 200}\n")
    command = [PACTWRIGHT, "worker", "--store", url, "--drain", "--clock-file", str(clock)]
    crash = {**os.environ, "PACTWRIGHT_TEST_CRASH_AT": "after_ledger_apply"}
    workers = [subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE) for _ in range(3)]
    workers.append(subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=crash))
    codes = sorted(w.wait(timeout=60) for w in workers)
    assert codes[1:] == [0, 0, 0] and codes[0] in (0, -9)  # the hooked one dies if it claimed anything
    clock.write_text(f"{T0 + 200 + 61}\n")  # its lease expires
    assert subprocess.run(command, capture_output=True, timeout=60).returncode == 0
    ledger = tmp_path / "store.ledger.sqlite"
    with sqlite3.connect(ledger) as conn:
        assert conn.execute("SELECT COUNT(*), COUNT(DISTINCT reference) FROM ledger_transactions").fetchone() == (
            24,
            24,
        )
    with open_store(url) as store:
        balances = open_ledger(str(ledger), url).balances()
        assert balances == {"platform:fees": 649 * 12, "sellers:bob:payable": 5841 * 12, "world": -6490 * 12}
        with store.transaction(write=False) as db:
            assert db.query("SELECT status, COUNT(*) FROM outbox GROUP BY status") == [("delivered", 24)]
            assert db.query("SELECT COUNT(*) FROM evidence WHERE kind = 'delivered'") == [(24,)]
        assert all(verify_evidence(store, a).problems == [] for a in agreements)


def _edit_outbox(url: str, reference: str, **columns: str) -> None:
    with sqlite3.connect(url) as conn:
        for column, value in columns.items():
            conn.execute(f"UPDATE outbox SET {column} = ? WHERE reference = ?", (value, reference))  # noqa: S608 - fixed names


def _row(url: str, reference: str, column: str) -> str:
    with sqlite3.connect(url) as conn:
        found = conn.execute(f"SELECT {column} FROM outbox WHERE reference = ?", (reference,))  # noqa: S608 - fixed names
        return str(found.fetchone()[0])


def test_an_outbox_row_edited_to_another_agreements_escrow_moves_no_money(url: str, tmp_path: Path) -> None:
    _funded(url, "a1", "a2")
    ledger = open_ledger(str(tmp_path / "store.ledger.sqlite"), url)
    with open_store(url) as store:
        Worker(store, ledger, TestClock(T0)).drain()
        submit(store, "a1", "deliver", "seller", "bob", "deliver", clock=TestClock(T0))
        submit(store, "a1", "release", "buyer", "alice", "release", clock=TestClock(T0))
        _edit_outbox(url, "a1/3/0", variables=_row(url, "a1/3/0", "variables").replace("escrow:a1", "escrow:a2"))
        outcomes = Worker(store, ledger, TestClock(T0)).drain()
    assert [o.status for o in outcomes] == ["quarantined"]
    assert ledger.balances(["escrow:a2"]) == {"escrow:a2": 6490}  # a2's money never moved
    assert ledger.postings("a1/3/0") is None


def test_an_outbox_row_edited_consistently_is_caught(url: str, tmp_path: Path) -> None:
    _funded(url, "a1")
    _edit_outbox(url, "a1/1/0", variables=_row(url, "a1/1/0", "variables").replace("6490", "9999999"),
                 expected_postings=_row(url, "a1/1/0", "expected_postings").replace("6490", "9999999"))  # fmt: skip
    ledger = open_ledger(str(tmp_path / "store.ledger.sqlite"), url)
    with open_store(url) as store:
        outcomes = Worker(store, ledger, TestClock(T0)).drain()
        delivered = [o.status for o in outcomes] == ["delivered"]
        assert not delivered or verify_evidence(store, "a1").problems != []


def test_an_outbox_row_marked_delivered_behind_the_workers_back_is_reported(url: str, tmp_path: Path) -> None:
    _funded(url, "a1")
    _edit_outbox(url, "a1/1/0", status="delivered")
    ledger = open_ledger(str(tmp_path / "store.ledger.sqlite"), url)
    with open_store(url) as store:
        assert Worker(store, ledger, TestClock(T0)).drain() == []
        assert [p.code for p in verify_evidence(store, "a1").problems] == ["PW586"]


# Evidence ----------------------------------------------------------------------------------


def test_evidence_records_swapped_between_agreements_are_detected(url: str) -> None:
    _funded(url, "a1", "a2")
    with open_store(url) as store:
        with store.transaction() as db:
            rows = {a: (chain.record_at(db, 1, a), str(chain_rows(db, a)[1][3])) for a in ("a1", "a2")}
            for mine, theirs in (("a1", "a2"), ("a2", "a1")):
                chain.write(db, *rows[theirs], agreement_id=mine)
        # Record 1 is the fund event's row (store migration 15): the swapped payload, time and link derive a
        # record naming this agreement, its event and its outbox entry, which does not hash to the other
        # agreement's hash (PW581). Before, the swapped record kept its bytes and hash and was caught by its link
        # or its agreement (PW584, PW585 or PW586).
        for agreement in ("a1", "a2"):
            problems = [(p.code, p.seq) for p in verify_evidence(store, agreement).problems]
            assert problems == [("PW581", 1)], problems


# Store and ledger URLs -----------------------------------------------------------------------


def test_a_worker_with_the_store_and_the_ledger_swapped_is_refused_and_writes_nothing(url: str, tmp_path: Path) -> None:
    _funded(url, "a1")
    ledger = tmp_path / "store.ledger.sqlite"
    assert main(["worker", "--store", url, "--drain"]) == 0
    files = {p: p.read_bytes() for p in (Path(url), ledger)}
    assert main(["worker", "--store", str(ledger), "--ledger", url, "--drain"]) == 2
    assert main(["worker", "--store", url, "--ledger", url, "--drain"]) == 2
    assert {p: p.read_bytes() for p in files} == files


def test_a_store_url_pointing_at_the_ledger_is_refused_and_writes_nothing(url: str, tmp_path: Path) -> None:
    _funded(url, "a1")
    ledger = tmp_path / "store.ledger.sqlite"
    assert main(["worker", "--store", url, "--drain"]) == 0
    with sqlite3.connect(ledger) as conn:
        tables = conn.execute("SELECT name FROM sqlite_master ORDER BY name").fetchall()
    with pytest.raises(PactwrightError):
        open_store(str(ledger)).close()
    with sqlite3.connect(ledger) as conn:
        assert conn.execute("SELECT name FROM sqlite_master ORDER BY name").fetchall() == tables


# Hostile identifiers on PostgreSQL -----------------------------------------------------------


def test_a_nul_byte_in_an_agreement_id_is_an_unknown_agreement_on_postgresql(pg_url: str) -> None:
    _funded(pg_url, "a1")
    with open_store(pg_url) as store:
        _refused(pg_url, "PW501", lambda: submit(store, "a\x001", "deliver", "seller", "bob", "d",
                                                 clock=TestClock(T0)))  # fmt: skip
