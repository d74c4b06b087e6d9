"""Attacks on event records held by their event rows (store migration 15), on both backends.

Since migration 15 an event's evidence record is not an `evidence` row: the
event row holds its place in the chain (`evidence_seq`, `evidence_prev`,
`evidence_hash`) and the record's bytes are derived from the row, its
outbox references and that place (`rows.event_record`). The attacks here:

- a command process and an outbox worker process racing on the same
  agreements (real processes, `spawn`, real connections): the chain must
  never fork, and an entry committed honestly must never be quarantined
  because the worker's own chain check saw a half-committed store;
- SQL edits through the store's own connection, as someone with write access
  to the database: outbox rows moved to another event or added to one, two
  event rows claiming one place, an event row moved to another agreement,
  the last event's link removed, payload keys named like the record's own
  fields;
- commands whose record must hash at commit exactly as verification derives
  it (four-eyes grants, money restated as `64.9`);
- a store made before migration 15 (tests/fixtures/stores/v7.sqlite): its
  pending entry delivered afterwards, new events linked after the old
  records, and an old record still checked against its event row.

Each test's docstring names the claim it attacks; the race test failed on PostgreSQL when it was
written, and says why.
"""

from __future__ import annotations

import json
import multiprocessing
import shutil
import time
from collections.abc import Callable
from multiprocessing.synchronize import Barrier
from pathlib import Path
from typing import Any

import pytest

from pactwright.canonical import canonical_bytes
from pactwright.errors import PactwrightError
from pactwright.runtime import TestClock, open_agreement, submit
from pactwright.runtime._evidence_chain import chain_rows
from pactwright.runtime.evidence import verify_evidence
from pactwright.runtime.ledger_db import open_ledger
from pactwright.runtime.store import open_store
from pactwright.runtime.store._backend import Backend
from pactwright.runtime.worker import Worker
from tests import _chain_tamper as chain
from tests.signed_bundles import BACKENDS, PACT_ID
from tests.test_evidence_tamper_attacks import _committed as committed
from tests.test_evidence_tamper_attacks import _problems, _tamper, url
from tests.test_runtime_keys_migration import V7_STORE

__all__ = ["url"]  # the fixture, reused from the evidence attacks
T0 = 1780315200  # 2026-06-01T12:00:00Z
PARTIES = {"buyer": "alice", "seller": "bob", "arbiter": "carol"}


def _committed(store_url: str) -> None:
    """a1: fund, deliver, release (records 0..3, the events' on their rows); a2 only opened."""
    committed(store_url)
    assert _problems(store_url) == []


# == a command process and a worker process on the same agreements ============================================

# Races per backend (SQLite's writers take the whole store, so its races settle in turn).
RACES = {"sqlite": 15, "postgresql": 300}


def _commands(store_url: str, agreements: list[str], barrier: Barrier, done: Any, out: Any) -> None:
    """Racer 0: at each agreement's barrier, commit `deliver` then `release` (the second outbox entry)."""
    refused: list[tuple[str, str]] = []
    try:
        with open_store(store_url, migrate_schema=False) as store:
            for n, agreement_id in enumerate(agreements):
                barrier.wait(timeout=60)
                for transition, role, party in (("deliver", "seller", "bob"), ("release", "buyer", "alice")):
                    try:
                        submit(store, agreement_id, transition, role, party, transition, clock=TestClock(T0 + 60))
                    except PactwrightError as exc:
                        refused.append((agreement_id, exc.code))
                done.value = n + 1
    finally:
        out.put(("commands", refused))


def _worker(store_url: str, agreements: list[str], barrier: Barrier, done: Any, out: Any) -> None:
    """Racer 1: fund the agreement (its entry is the only one due), then at the barrier claim that entry again
    and again (a one-second lease, the clock moved past it each time) while the other process commits on the
    same agreement; a claim whose chain check fails is delivered as `drain` would (quarantined), the others
    are left to lapse. When the commands are in, drain the agreement."""
    outcomes: list[tuple[str, str, str | None]] = []
    try:
        with (
            open_store(store_url, migrate_schema=False) as store,
            open_ledger(None, store_url, create=False) as ledger,
        ):
            clock = TestClock(T0 + 100)
            worker = Worker(store, ledger, clock, lease_seconds=1)
            for n, agreement_id in enumerate(agreements):
                submit(store, agreement_id, "fund", "buyer", "alice", "fund", clock=TestClock(T0))
                barrier.wait(timeout=60)
                give_up = time.monotonic() + 60  # the other racer died: stop claiming
                while done.value <= n and time.monotonic() < give_up:
                    clock.advance(2)
                    claim = worker._claim()
                    if claim is not None and claim.chain is not None and not claim.chain.ok:
                        outcome = worker._deliver(claim)
                        outcomes.append((outcome.reference, outcome.status, outcome.message))
                clock.advance(2)
                outcomes += [(o.reference, o.status, o.message) for o in worker.drain()]
    finally:
        out.put(("worker", outcomes))


def test_a_worker_racing_commands_never_forks_the_chain_nor_quarantines_an_honest_entry(url: str) -> None:
    """Claim 2, and claim 3 as the worker checks it. One process commits `deliver` and `release` on each
    agreement while another runs the outbox worker's claim of the agreement's `fund` entry.

    Every agreement's records must be numbered 0..n once each and verify, and no honest entry may be
    quarantined. This failed on PostgreSQL when first written: the claim read the agreement row, then (one
    statement later, each on its own READ COMMITTED snapshot) the event log; a command committed in between
    made the check of the log against the agreement's version (PW586) fire on an honest store, and 13-28
    entries a run were quarantined unapplied (PW564: `[PW586] agreement `r0010` is at version 1, but its
    event log holds events 1..2`). The chain is now read in one statement, and the log may hold more events
    than the version read before it counts, never fewer."""
    backend = "postgresql" if url.startswith("postgresql") else "sqlite"
    agreements = [f"r{n:04d}" for n in range(RACES[backend])]
    with open_store(url) as store:
        for agreement_id in agreements:
            open_agreement(store, PACT_ID, {"price": "64.90"}, PARTIES, agreement_id=agreement_id,
                           clock=TestClock(T0))  # fmt: skip
    with open_ledger(None, url):  # created here, so the worker only opens it
        pass
    ctx = multiprocessing.get_context("spawn")
    barrier, done, out = ctx.Barrier(2), ctx.Value("i", 0), ctx.Queue()
    racers = [ctx.Process(target=side, args=(url, agreements, barrier, done, out)) for side in (_commands, _worker)]
    for racer in racers:
        racer.start()
    results = dict(out.get(timeout=900) for _ in racers)
    for racer in racers:
        racer.join(timeout=60)
        assert racer.exitcode == 0
    assert results["commands"] == []
    with open_store(url) as store:
        for agreement_id in agreements:
            with store.transaction(write=False) as db:
                places = [int(row[0]) for row in chain_rows(db, agreement_id)]
            assert places == list(range(len(places))), (agreement_id, places)  # no fork, no gap
            assert verify_evidence(store, agreement_id).ok, agreement_id
    quarantined = [(reference, message) for reference, status, message in results["worker"]
                   if status == "quarantined"]  # fmt: skip
    assert quarantined == [], f"{len(quarantined)} honest entries quarantined, first: {quarantined[:2]}"
    assert {status for _, status, _ in results["worker"]} == {"delivered"}


# == tampering with what an event's record is derived from ====================================================


def _outbox_entry_moved(db: Backend) -> None:
    """`a1/1/0` said to be event 2's (the row's `event_seq`), its reference kept."""
    db.execute("UPDATE outbox SET event_seq = 2 WHERE reference = 'a1/1/0'")


def _outbox_entry_added(db: Backend) -> None:
    """An entry for `deliver` (event 2), which moved no money and had none."""
    db.execute(
        "INSERT INTO outbox (agreement_id, event_seq, group_index, reference, program_path, variables, "
        "expected_postings, status, attempts, created_at, updated_at) VALUES ('a1', 2, 0, 'a1/2/0', "
        "'ledger/fund.num', '{}', '[]', 'pending', 0, ?, ?)",
        (T0 + 60, T0 + 60),
    )


def _two_events_at_one_place(db: Backend) -> None:
    """Event a1/3 given event a1/2's whole link: two event rows claim place 2."""
    seq, prev, digest = db.query(
        "SELECT evidence_seq, evidence_prev, evidence_hash FROM events WHERE event_id = 'a1/2'"
    )[0]
    db.execute("UPDATE events SET evidence_seq = ?, evidence_prev = ?, evidence_hash = ? WHERE event_id = 'a1/3'",
               (seq, prev, digest))  # fmt: skip


OUTBOX_EDITS: list[tuple[str, Callable[[Backend], None], list[tuple[str, int | None]]]] = [
    ("entry moved to another event", _outbox_entry_moved, [("PW581", 1), ("PW581", 2)]),
    ("entry added to an event without one", _outbox_entry_added, [("PW581", 2)]),
    ("two event rows at one place", _two_events_at_one_place, [("PW584", 2), ("PW581", 2)]),
]


@pytest.mark.parametrize(("what", "edit", "expected"), OUTBOX_EDITS, ids=[e[0] for e in OUTBOX_EDITS])
def test_an_edit_of_an_event_records_outbox_or_place_is_named(
    url: str, what: str, edit: Callable[[Backend], None], expected: list[tuple[str, int | None]]
) -> None:
    """Before migration 15 an event's record listed its outbox references as committed, and the outbox rows
    were checked against that list; now the list is read from the outbox rows, so an entry moved to another
    event, or added to one, changes the records it is derived into (PW581)."""
    _committed(url)
    _tamper(url, edit)
    assert [(code, seq) for code, seq, _ in _problems(url)][: len(expected)] == expected, what


def test_the_fork_two_event_rows_make_is_named_as_one(url: str) -> None:
    _committed(url)
    _tamper(url, _two_events_at_one_place)
    assert _problems(url)[0] == ("PW584", 2, "evidence record 2 appears twice: the chain forks at record 2")


def test_an_event_row_moved_to_another_agreement_breaks_both_chains(url: str) -> None:
    """Event a1/2 (no outbox entry) moved to a2 whole: a1's chain has a hole and a short log; a2's derived
    record names a2, not the agreement the row's hash was taken for."""
    _committed(url)
    _tamper(url, lambda db: db.execute("UPDATE events SET agreement_id = 'a2' WHERE event_id = 'a1/2'"))
    assert _problems(url, "a1") == [
        ("PW582", 3, "evidence record 2 is missing before record 3"),
        ("PW586", None, "agreement `a1` is at version 3, but its event log holds events 1, 3: events were deleted "
                        "or added"),
    ]  # fmt: skip
    codes = [code for code, _, _ in _problems(url, "a2")]
    assert "PW581" in codes and "PW586" in codes, codes


def test_the_last_event_unlinked_is_a_deleted_tail(url: str) -> None:
    """The last event's link removed (its row kept, as a row from before migration 15 would be): no record."""
    _committed(url)
    _tamper(url, lambda db: db.execute("UPDATE events SET evidence_seq = NULL, evidence_prev = NULL, "
                                       "evidence_hash = NULL WHERE event_id = 'a1/3'"))  # fmt: skip
    assert _problems(url) == [("PW586", None, "event `a1/3` has no evidence record: records were deleted")]


def test_payload_keys_named_like_record_fields_never_reach_the_record(url: str) -> None:
    """A payload that claims another place, agreement, kind, predecessor, id, time or outbox: the record takes
    those from the row and its link, so it is the record committed, and the claim is unchanged."""
    _committed(url)
    with open_store(url) as store, store.transaction(write=False) as db:
        before = chain.records(db)

    def claim_otherwise(db: Backend) -> None:
        payload = json.loads(str(db.query("SELECT payload FROM events WHERE event_id = 'a1/2'")[0][0]))
        payload.update({"seq": 9, "agreement": "a2", "kind": "opened", "prev_hash": None, "event_id": "a2/9",
                        "committed_at": 1, "outbox": ["a2/9/0"]})  # fmt: skip
        db.execute("UPDATE events SET payload = ? WHERE event_id = 'a1/2'",
                   (canonical_bytes(payload).decode(),))  # fmt: skip

    _tamper(url, claim_otherwise)
    with open_store(url) as store, store.transaction(write=False) as db:
        assert chain.records(db) == before
    assert _problems(url) == []


# == what is hashed at commit is what verification derives ===================================================


def test_money_restated_at_commit_is_hashed_as_stored(url: str) -> None:
    """`64.9` for `64.90`: the command is recorded with the amount as the agreement holds it."""
    with open_store(url) as store:
        open_agreement(store, PACT_ID, {"price": "64.90"}, PARTIES, agreement_id="a1", clock=TestClock(T0))
        submit(store, "a1", "fund", "buyer", "alice", "fund", params={"price": "64.9"}, clock=TestClock(T0))
        submit(store, "a1", "deliver", "seller", "bob", "deliver", clock=TestClock(T0 - 3600))  # clock went back
        with store.transaction(write=False) as db:
            assert chain.record_at(db, 1)["command"]["params"] == {"price": "6490"}
            assert chain.record_at(db, 2)["committed_at"] == T0
    assert _problems(url) == []


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_four_eyes_grant_commits_a_record_that_verifies(backend: str, tmp_path: Path) -> None:
    """Two grants: the event links between the first and the second `approval_granted` record."""
    from tests import test_four_eyes as four_eyes

    stores = four_eyes._store(backend, tmp_path, False)
    store_url = next(stores)
    try:
        with open_store(store_url) as store:
            request = four_eyes._park(store)
            four_eyes._grant(store, request, "rita")
            assert four_eyes._grant(store, request, "olga", T0 + 30).status == "committed"
            with store.transaction(write=False) as db:
                kinds = [(r["seq"], r["kind"]) for r in chain.records(db, "r1")]
            assert kinds == [(0, "opened"), (1, "approval_requested"), (2, "approval_granted"), (3, "event"),
                             (4, "approval_granted")]  # fmt: skip
            assert verify_evidence(store, "r1").ok
    finally:
        next(stores, None)


# == a store made before migration 15 ============================================================================


def test_a_pre_15_entry_is_delivered_and_linked_and_old_records_stay_checked(tmp_path: Path) -> None:
    """tests/fixtures/stores/v7.sqlite: `m-1/1/0` pending from before the migration is delivered after it,
    a new event and its delivery link after the old records; an old event row's commit time edited is still
    named against its record."""
    copy = tmp_path / "v7.sqlite"
    shutil.copyfile(V7_STORE, copy)
    with open_store(str(copy)) as store, open_ledger(str(tmp_path / "ledger.sqlite"), str(copy)) as ledger:
        assert [o.status for o in Worker(store, ledger, TestClock(T0 + 100)).drain()] == ["delivered"]
        submit(store, "m-1", "release", "buyer", "alice", "release-1", 2, clock=TestClock(T0 + 180))
        assert [o.status for o in Worker(store, ledger, TestClock(T0 + 200)).drain()] == ["delivered"]
        with store.transaction(write=False) as db:
            kinds = [(r["seq"], r["kind"]) for r in chain.records(db, "m-1")]
        assert kinds == [(0, "opened"), (1, "event"), (2, "event"), (3, "delivered"), (4, "event"), (5, "delivered")]
        assert verify_evidence(store, "m-1").ok
        with store.transaction() as db:
            db.execute("UPDATE events SET committed_at = committed_at + 1 WHERE event_id = 'm-1/1'")
        problems = [(p.code, p.seq, p.message) for p in verify_evidence(store, "m-1").problems]
    assert problems == [("PW586", 1, "event `m-1/1` in the event log disagrees with evidence record 1 on committed_at")]
