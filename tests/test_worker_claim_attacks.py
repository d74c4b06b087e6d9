"""Attacks on the outbox worker's claim reading the evidence itself, and on what rode along with it.

The claim under attack: the outbox worker's claim transaction reading and
checking the agreement's evidence chain for the check before delivery, the
mark reading the entry's status and the chain's head in one statement and
writing the row and its record together (`execute_all`), the ledger's
repeat check outside a transaction, `parse_program` remembering programs by
text, the effect worker reading its agreement and bundle once per claim
(and passing over a row moved to another agreement), and store migration 12
(PostgreSQL's claim index in code-point order) let no worker deliver or send
what the evidence does not support, deliver twice, lose a delivery, break
commit order per agreement, fork the chain, or leave a store that
`evidence verify` or the worker cannot handle.

Every attack runs on SQLite and PostgreSQL. Workers that race or die are
real OS processes (`pactwright worker`, SIGKILLed by the test-only hook);
a command committed while a delivery is in flight is a real process too.
Every test asserts the exact run. (One attack found a hole older than these
changes: an earlier event record rewritten with its hash recomputed, and
the row edited to match, was delivered, because the check compared the
record only with its own hash. The worker now checks the whole chain;
`test_an_earlier_event_record_rewritten_with_its_hash_is_not_delivered`.)
"""

from __future__ import annotations

import itertools
import json
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from pactwright.canonical import canonical_bytes, hash_bytes
from pactwright.cli.main import main
from pactwright.errors import LedgerError
from pactwright.runtime import TestClock, open_agreement, submit
from pactwright.runtime._evidence_chain import chain_rows
from pactwright.runtime.evidence import verify_evidence
from pactwright.runtime.ledger_db import open_ledger
from pactwright.runtime.numscript import Posting
from pactwright.runtime.store import Store, open_store
from pactwright.runtime.store._backend import Backend
from pactwright.runtime.store._migrations import LATEST
from pactwright.runtime.worker import CRASH_ENV, Worker
from tests import _chain_tamper as chain
from tests.signed_bundles import BACKENDS, PACT_ID
from tests.test_runtime_worker import (
    HAPPY,
    PARTIES,
    ROOT,
    T0,
    environment,
    outbox_rows,
    run_steps,
    tamper,
    worker_process,
)

# Links a record to its predecessor, numbers the chain, or names the record's own row: none of these may
# ever be reported after a worker appended to a chain, whatever was edited before.
_LINK_CODES = frozenset({"PW582", "PW583", "PW584", "PW585"})
FUND_VARIABLES = '{"account_escrow":"escrow:t1","price":"EUR/2 649000"}'
FUND_EXPECTED = ('[{"amount":"649000","asset":"EUR/2","destination_address":"escrow:t1",'
                 '"source_address":"world"}]')  # fmt: skip


@pytest.fixture(params=BACKENDS)
def url(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    with environment(request.param, tmp_path) as store_url:
        yield store_url


def _clock(directory: Path, at: int) -> Path:
    path = directory / "clock"
    path.write_text(f"{at}\n")
    return path


def _drain_process(url: str, clock: Path, crash_at: str | None = None) -> tuple[int, dict[str, Any] | None, str]:
    process = worker_process(url, clock, "--drain", env={CRASH_ENV: crash_at} if crash_at else None)
    out, err = process.communicate(timeout=120)
    return process.returncode, (json.loads(out) if process.returncode in (0, 1) and out.strip() else None), err


def _problems(url: str, agreement_id: str) -> list[tuple[str, int | None]]:
    with open_store(url) as store:
        return [(p.code, p.seq) for p in verify_evidence(store, agreement_id).problems]


def _stored_rows(store: Store, agreement_id: str) -> list[tuple[int, str, str | None, str]]:
    """(seq, kind, prev_hash, hash) of every record of the agreement's chain, as stored: the `evidence` rows and
    the links on its event rows (store migration 15)."""
    with store.transaction(write=False) as db:
        found = chain_rows(db, agreement_id)
    return [(int(s), str(k), None if p is None else str(p), str(h)) for s, k, p, h, _ in found]


def _stored_hash(db: Backend, agreement_id: str, seq: int) -> str:
    """The stored hash of record `seq` of the agreement's chain."""
    return next(str(row[3]) for row in chain_rows(db, agreement_id) if int(row[0]) == seq)


def _records(url: str, agreement_id: str) -> list[dict[str, Any]]:
    """Every record of the agreement's chain, in sequence order, wherever it is stored."""
    with open_store(url) as store, store.transaction(write=False) as db:
        return chain.records(db, agreement_id)


def _rows(url: str, agreement_id: str) -> list[tuple[int, str, str | None, str]]:
    with open_store(url) as store:
        return _stored_rows(store, agreement_id)


def _links(stored: list[tuple[int, str, str | None, str]]) -> None:
    """Every stored row names the stored hash of the row before it, numbered 0, 1, 2, ... without a gap."""
    assert [s for s, *_ in stored] == list(range(len(stored)))
    assert all(row[2] == before[3] for before, row in itertools.pairwise(stored)), stored


def _linked(url: str, agreement_id: str) -> None:
    _links(_rows(url, agreement_id))


def _ledger(url: str) -> tuple[list[str], dict[str, list[Posting] | None], dict[str, int]]:
    with open_ledger(None, url) as ledger:
        references = ledger.references()
        return references, {r: ledger.postings(r) for r in references}, ledger.balances()


# == tampering between commit and claim, and while a claimed worker lies dead ==================================


def _edit_outbox_row(url: str) -> None:
    """Another amount in both the variables and the expected postings: the row still runs to its own postings."""
    tamper(url, "UPDATE outbox SET variables = ?, expected_postings = ? WHERE reference = 't1/1/0'",
           (FUND_VARIABLES, FUND_EXPECTED))  # fmt: skip


def _edit_event_record(url: str) -> None:
    """The event's record says another amount; its hash is left as it was. The record is the event row (store
    migration 15), so the row's payload says the other amount and its `evidence_hash` is untouched."""
    with open_store(url) as store, store.transaction() as db:
        record, digest = chain.record_at(db, 1, "t1"), _stored_hash(db, "t1", 1)
        assert record["postings"][0]["amount"] == "6490"
        record["postings"][0]["amount"] = "649000"
        chain.write(db, record, digest, agreement_id="t1")


@pytest.mark.parametrize(("edit", "reason"), [
    (_edit_outbox_row, "PW564: the entry's expected postings are not event `t1/1`'s committed postings"),
    (_edit_event_record, "PW564: the evidence chain of agreement `t1` does not verify ([PW581] evidence record 1 "
                         "was edited"),
])  # fmt: skip
def test_an_edit_made_while_the_claiming_worker_lies_dead_is_quarantined_unapplied(
    url: str, tmp_path: Path, edit: Any, reason: str
) -> None:
    """A worker process claims `t1/1/0` (leased, its records read) and is SIGKILLed right after the claim.
    The store is edited while it lies dead; the worker that takes the entry over after the lease ran out
    reads the row and the records again in its own claim, so the edit is quarantined and the ledger never
    moves. The quarantine record is appended after the stored head, linked like every other."""
    run_steps(url, "t1")
    clock = _clock(tmp_path, T0)
    code, _, err = _drain_process(url, clock, crash_at="after_claim")
    assert code == -signal.SIGKILL, err
    dead = outbox_rows(url)[0]
    assert (dead["reference"], dead["status"], dead["attempts"]) == ("t1/1/0", "pending", 1)
    assert dead["lease_owner"] is not None
    edit(url)
    clock.write_text(f"{T0 + 61}\n")
    code, result, err = _drain_process(url, clock)
    assert code == 1, err  # a quarantine is reported as a failure
    assert result is not None
    assert [(o["reference"], o["status"], o["code"]) for o in result["outcomes"]] == [
        ("t1/1/0", "quarantined", "PW564")]  # fmt: skip
    assert _ledger(url)[0] == []  # nothing reached the ledger, and `t1/3/0` waits behind the quarantine
    rows = {r["reference"]: r for r in outbox_rows(url)}
    assert rows["t1/1/0"]["status"] == "quarantined" and str(rows["t1/1/0"]["last_error"]).startswith(reason)
    assert rows["t1/3/0"]["status"] == "pending" and rows["t1/3/0"]["attempts"] == 0
    assert [r["kind"] for r in _records(url, "t1")] == ["opened", "event", "event", "event", "quarantined"]
    _linked(url, "t1")
    problems = _problems(url, "t1")
    assert problems and not _LINK_CODES & {c for c, _ in problems}, problems
    if edit is _edit_event_record:
        assert ("PW581", 1) in problems  # the edit itself is named, and nothing else about the chain


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_earlier_event_record_rewritten_with_its_hash_is_not_delivered(backend: str, tmp_path: Path) -> None:
    """The fund event's record (seq 1, not the head: seq 2 names its old hash) is rewritten to 6490.00 EUR
    with its hash recomputed, and the outbox row edited to the same amount. The record is the event row
    (store migration 15): its payload is rewritten and its `evidence_hash` recomputed. The chain no longer
    verifies (PW584 at 2), so nothing of `t1/1/0` may be booked at the forged amount."""
    with environment(backend, tmp_path) as url:
        run_steps(url, "t1")
        with open_store(url) as store, store.transaction() as db:
            record = chain.record_at(db, 1, "t1")
            record["postings"][0]["amount"] = "649000"
            chain.write(db, record, hash_bytes(canonical_bytes(record)), agreement_id="t1")
        _edit_outbox_row(url)
        # Record 1 is the event row since store migration 15: the edit is the event log's too, so no record
        # disagrees with the log any more (PW586 at 1 before); the link from record 2 still names the old hash.
        assert _problems(url, "t1") == [("PW584", 2)]
        with open_store(url) as store, open_ledger(None, url) as ledger:
            Worker(store, ledger, TestClock(T0)).drain()
        _, postings, balances = _ledger(url)
        assert not any(reference.startswith("t1/") for reference in postings), postings
        assert balances.get("world", 0) == 0, balances
        with open_store(url) as store, store.transaction(write=False) as db:
            status, error = db.query("SELECT status, last_error FROM outbox WHERE reference = 't1/1/0'")[0]
        assert status == "quarantined" and str(error).startswith("PW564: the evidence chain of agreement `t1`")


# == two worker processes on one store =========================================================================

AGREEMENTS = tuple(f"r{n}" for n in range(8))


def test_two_worker_processes_deliver_every_entry_once_in_commit_order(url: str, tmp_path: Path) -> None:
    """Two `pactwright worker --drain` processes start together on 16 pending entries of 8 agreements. Each
    claim reads its records in its own transaction and each mark reads the head after the agreement's lock:
    every reference is applied once, in commit order within its agreement, each entry has exactly one
    `delivered` record, and every chain verifies."""
    for agreement_id in AGREEMENTS:
        run_steps(url, agreement_id)
    clock = _clock(tmp_path, T0)
    processes = [worker_process(url, clock, "--drain") for _ in range(2)]
    answers = [p.communicate(timeout=120) for p in processes]
    assert [p.returncode for p in processes] == [0, 0], [err[-600:] for _, err in answers]
    outcomes = [o for out, _ in answers for o in json.loads(out)["outcomes"]]
    assert {o["status"] for o in outcomes} <= {"delivered", "skipped"}, outcomes
    delivered = sorted(o["reference"] for o in outcomes if o["status"] == "delivered")
    expected = sorted(f"{a}/{seq}/0" for a in AGREEMENTS for seq in (1, 3))
    assert delivered == expected  # each entry delivered by exactly one of them
    references, postings, balances = _ledger(url)
    assert sorted(references) == expected and len(references) == len(set(references))
    for agreement_id in AGREEMENTS:
        mine = [r for r in references if r.startswith(f"{agreement_id}/")]
        assert mine == [f"{agreement_id}/1/0", f"{agreement_id}/3/0"]  # commit order per agreement
        assert balances.get(f"escrow:{agreement_id}", 0) == 0
        kinds = [(r["kind"], r.get("reference")) for r in _records(url, agreement_id) if r["kind"] != "event"]
        assert kinds == [("opened", None), ("delivered", f"{agreement_id}/1/0"), ("delivered", f"{agreement_id}/3/0")]
        _linked(url, agreement_id)
        assert _problems(url, agreement_id) == []
    assert balances["world"] == -6490 * len(AGREEMENTS)
    assert all(p is not None and sum(x.amount for x in p) == 6490 for p in postings.values())
    assert {r["status"] for r in outbox_rows(url)} == {"delivered"}


def test_a_worker_whose_lease_ran_out_finds_its_entry_delivered_and_appends_nothing(url: str, tmp_path: Path) -> None:
    """Worker A claims `w1/1/0` (lease 60 s) and stalls before delivering. After the lease, a worker process
    takes it over and drains the agreement (both entries, two `delivered` records). When A goes on, the
    ledger answers its repeat from the stored postings (the repeat check, outside any transaction) and A's
    mark, reading the status after the agreement's lock, finds the entry delivered: `skipped`, no record."""
    run_steps(url, "w1")
    with open_store(url) as store, open_ledger(None, url) as ledger:
        stalled = Worker(store, ledger, TestClock(T0))
        claim = stalled._claim()
        assert claim is not None and claim.reference == "w1/1/0"
        # The claim read and checked the agreement's evidence chain in its own transaction.
        assert claim.chain is not None and claim.chain.ok
        events = [r.get("event_id") for r in claim.chain.records if r.get("kind") == "event"]
        assert events == ["w1/1", "w1/2", "w1/3"]
        code, result, err = _drain_process(url, _clock(tmp_path, T0 + 61))
        assert code == 0, err
        assert result is not None
        assert [(o["reference"], o["status"]) for o in result["outcomes"]] == [("w1/1/0", "delivered"),
                                                                              ("w1/3/0", "delivered")]  # fmt: skip
        before = _rows(url, "w1")
        late = stalled._deliver(claim)
        assert (late.reference, late.status) == ("w1/1/0", "skipped")
    assert _rows(url, "w1") == before
    references, postings, _ = _ledger(url)
    assert references == ["w1/1/0", "w1/3/0"]
    assert postings["w1/1/0"] == [Posting("world", "escrow:w1", 6490, "EUR/2")]
    assert [r.get("reference") for r in _records(url, "w1") if r["kind"] == "delivered"] == ["w1/1/0", "w1/3/0"]
    assert _problems(url, "w1") == []


# == evidence appended between claim and mark ==================================================================

_SUBMIT = """
import sys
from pactwright.runtime import TestClock, submit
from pactwright.runtime.store import Store, open_store

url, agreement_id, at = sys.argv[1], sys.argv[2], int(sys.argv[3])
with open_store(url) as store:
    for transition, role, party in (("deliver", "seller", "bob"), ("release", "buyer", "alice")):
        submit(store, agreement_id, transition, role, party, f"{agreement_id}-{transition}", clock=TestClock(at))
"""


class CommitsFirst:
    """A ledger that, before its first apply, has another process commit the agreement's next two commands."""

    def __init__(self, inner: Any, url: str, agreement_id: str) -> None:
        self.inner, self.url, self.agreement_id, self.calls = inner, url, agreement_id, []

    def apply(self, reference: str, program_text: str, variables: dict[str, str]) -> list[Posting]:
        if not self.calls:
            done = subprocess.run([sys.executable, "-c", _SUBMIT, self.url, self.agreement_id, str(T0)], cwd=ROOT,
                                  capture_output=True, text=True, timeout=60, check=False)  # fmt: skip
            assert done.returncode == 0, done.stderr[-600:]
        self.calls.append(reference)
        return list(self.inner.apply(reference, program_text, variables))

    def postings(self, reference: str) -> list[Posting] | None:
        return list(self.inner.postings(reference) or []) or None

    def balances(self, accounts: list[str] | None = None) -> dict[str, int]:
        return dict(self.inner.balances(accounts))


def test_commands_committed_between_claim_and_mark_are_linked_before_the_delivered_record(url: str) -> None:
    """`s1/1/0` is claimed with the chain's head at the fund event (seq 1); while the ledger applies it, another
    process commits `deliver` and `release` (seq 2 and 3, and the entry `s1/3/0`). The mark reads the head
    after the agreement's lock, so its `delivered` record is seq 4 and names seq 3's hash; the chain never
    forks, and the entry committed meanwhile is delivered next, after the first."""
    run_steps(url, "s1", HAPPY[:1])
    with open_store(url) as store, open_ledger(None, url) as durable:
        ledger = CommitsFirst(durable, url, "s1")
        outcomes = Worker(store, ledger, TestClock(T0)).drain()
    assert [(o.reference, o.status) for o in outcomes] == [("s1/1/0", "delivered"), ("s1/3/0", "delivered")]
    assert ledger.calls == ["s1/1/0", "s1/3/0"]
    stored = _rows(url, "s1")
    assert [(s, k) for s, k, *_ in stored] == [(0, "opened"), (1, "event"), (2, "event"), (3, "event"),
                                               (4, "delivered"), (5, "delivered")]  # fmt: skip
    assert stored[4][2] == stored[3][3]  # the first delivery links after the commands committed meanwhile
    _linked(url, "s1")
    assert _problems(url, "s1") == []
    assert _ledger(url)[0] == ["s1/1/0", "s1/3/0"]


# == the effect worker: a row moved to another agreement =======================================================


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_effect_row_moved_to_another_agreement_is_never_sent(backend: str, tmp_path: Path) -> None:
    """`a1/1/e0` (charge 10.00) is moved to agreement a2 while due. A claim that read it as a1's (the
    candidate read before the move) locks a1, finds the row under a2 and passes over it, writing nothing;
    every later claim locks a2 and checks the row against a2's records, which never committed it: it is
    quarantined unsent (PW644), and neither it nor the call after it in a1's event reaches the provider."""
    from pactwright.runtime.effect_worker import EffectWorker
    from pactwright.runtime.provider_sim import start_simulator
    from tests.test_budget_inflight_attacks import _adapter_for, _any_store, _open, _submit
    from tests.test_evidence_replay_attacks import PARAMS, _policy

    with _any_store(_policy("idempotent"), tmp_path, backend) as (store, _), start_simulator() as sim:
        _open(store, "att.replay", PARAMS, "a1")
        _open(store, "att.replay", {**PARAMS, "price": "20.00"}, "a2")
        _submit(store, "go", "go", T0 + 10, "a1")
        _submit(store, "go", "go", T0 + 10, "a2")
        adapter = _adapter_for(tmp_path, sim, "charge", "notify", "undo")

        def rows() -> dict[str, tuple[Any, ...]]:
            with store.transaction(write=False) as db:
                found = db.query("SELECT id, agreement_id, phase, quarantined, attempts, lease_owner, "
                                 "idempotency_key, last_error FROM effects ORDER BY id")  # fmt: skip
            return {str(r[0]): tuple(r[1:]) for r in found}

        keys = {instance: row[5] for instance, row in rows().items()}
        with store.transaction(exclusive=False) as db:
            db.execute("UPDATE effects SET agreement_id = 'a2' WHERE id = 'a1/1/e0'")
        moved = rows()
        worker = EffectWorker(store, adapter, TestClock(T0 + 20))
        assert worker._claim_one("a1/1/e0", "a1", T0 + 20) is None
        assert rows() == moved and sim.state()["records"] == []
        for n in range(4):
            EffectWorker(store, adapter, TestClock(T0 + 20 + n * 1000)).drain(limit=50)
        after = rows()
        assert after["a1/1/e0"][:4] == ("a2", "prepared", 1, 0) and "PW644" in str(after["a1/1/e0"][6])
        assert after["a1/1/e1"][1:4] == ("prepared", 1, 0)
        sent = [r["idempotency_key"] for r in sim.state()["records"]]
        assert keys["a1/1/e0"] not in sent and keys["a1/1/e1"] not in sent
        assert all(r["amount"] != "1000" for r in sim.state()["records"])
        # Both chains are still one chain each: the refusals are appended after their heads.
        for agreement_id in ("a1", "a2"):
            stored = _stored_rows(store, agreement_id)
            _links(stored)
            assert [k for _, k, *_ in stored].count("effect_quarantined") == 1


# == the parse memory ==========================================================================================

FIXED = "vars {\n  account $to\n  monetary $amount\n}\nsend $amount (\n  source = @world\n  destination = $to\n)\n"
BROKEN = FIXED.replace("destination = $to", "destination = ")


def test_a_refused_program_is_refused_again_and_its_fix_applies_once(url: str) -> None:
    """The ledger refuses a program that does not parse, twice the same way and without writing; the fixed
    text then applies; a repeat with the same program re-indented is the same program (answered from the
    stored postings), and one with another program's text is refused PW757, never taken for the one
    remembered. Two references with one text and other variables move their own amounts."""
    variables = {"to": "escrow:p1", "amount": "EUR/2 100"}
    with open_ledger(None, url) as ledger:
        for _ in range(2):
            with pytest.raises(LedgerError) as refused:
                ledger.apply("p1/1/0", BROKEN, variables)
            assert refused.value.code == "PW751"
        assert ledger.references() == []
        assert ledger.apply("p1/1/0", FIXED, variables) == [Posting("world", "escrow:p1", 100, "EUR/2")]
        assert ledger.apply("p1/1/0", FIXED.replace("  ", "    "), variables) == [
            Posting("world", "escrow:p1", 100, "EUR/2")]  # fmt: skip
        other = FIXED.replace("source = @world", "source = @world\n  ").replace("$amount (", "[EUR/2 7] (")
        other = other.replace("  monetary $amount\n", "")
        with pytest.raises(LedgerError) as reused:
            ledger.apply("p1/1/0", other, {"to": "escrow:p1"})
        assert reused.value.code == "PW757"
        assert ledger.apply("p2/1/0", FIXED, {"to": "escrow:p2", "amount": "EUR/2 250"}) == [
            Posting("world", "escrow:p2", 250, "EUR/2")]  # fmt: skip
        assert ledger.references() == ["p1/1/0", "p2/1/0"]
        assert ledger.balances(["escrow:p1", "escrow:p2", "world"]) == {"escrow:p1": 100, "escrow:p2": 250,
                                                                         "world": -350}  # fmt: skip


# == migration 12 with entries pending =========================================================================


def _rewind_before_12(url: str, backend: str) -> None:
    """The store as a release before migration 12 left it: migration 3's index, every event's record an
    `evidence` row and no evidence link on the event rows (as before migration 15), no record of 12 or later."""
    with open_store(url) as store, store.transaction() as db:
        chain.undo_event_links(db)
        if backend == "postgresql":
            db.execute("DROP INDEX outbox_due")
            db.execute("CREATE INDEX outbox_due ON outbox (status, created_at, agreement_id, event_seq, group_index)")
        db.execute("DROP INDEX IF EXISTS effects_live")  # migration 13's, rebuilt by the migration as well
        db.execute("DELETE FROM schema_migrations WHERE version >= 12")


def _index(url: str, backend: str) -> str:
    with open_store(url, migrate_schema=False) as store, store.transaction(write=False) as db:
        if backend == "postgresql":
            return str(db.query("SELECT indexdef FROM pg_indexes WHERE indexname = 'outbox_due' "
                                "AND schemaname = current_schema()")[0][0])  # fmt: skip
        return str(db.query("SELECT sql FROM sqlite_master WHERE name = 'outbox_due'")[0][0])


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_store_migrated_to_12_with_entries_pending_drains_them_in_claim_order(
    backend: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Entries of five agreements are pending, committed at one instant, when a store from before migration 12
    is opened by this release: the index is rebuilt (PostgreSQL: agreement id in code-point order; SQLite:
    unchanged), the worker drains every entry once, agreements in code-point order of their ids and each in
    commit order, and `pactwright evidence verify` passes for each."""
    ids = ("m10", "m2", "M3", "m1", "m_1")
    with environment(backend, tmp_path) as url:
        with open_store(url) as store:
            for agreement_id in ids:
                open_agreement(store, PACT_ID, {"price": "64.90"}, PARTIES, agreement_id=agreement_id,
                               clock=TestClock(T0))  # fmt: skip
                for transition, role, party in HAPPY:
                    submit(store, agreement_id, transition, role, party, f"{agreement_id}-{transition}",
                           clock=TestClock(T0))  # fmt: skip
        old = _index(url, backend)
        _rewind_before_12(url, backend)
        assert 'COLLATE "C"' not in _index(url, backend)
        with open_store(url, migrate_schema=False) as store:
            assert store.schema_version() == 11
        with open_store(url) as store:
            assert store.schema_version() == LATEST >= 12
        new = _index(url, backend)
        assert new == old
        if backend == "postgresql":
            assert 'agreement_id COLLATE "C"' in new, new
        with open_store(url) as store, open_ledger(None, url) as ledger:
            outcomes = Worker(store, ledger, TestClock(T0)).drain()
        assert {o.status for o in outcomes} == {"delivered"}
        order = [o.reference for o in outcomes]
        assert order == [f"{a}/{seq}/0" for a in sorted(ids) for seq in (1, 3)]  # code-point order: M3 first
        for agreement_id in ids:
            code = main(["evidence", "verify", agreement_id, "--store", url])
            out, err = capsys.readouterr()
            assert code == 0 and out.startswith(f"evidence of {agreement_id} verifies: 6 records"), (out, err)
        with open_store(url) as store, store.transaction(write=False) as db:
            # Committed before migration 15: the events' records stay `evidence` rows, their event rows unlinked.
            assert db.query("SELECT COUNT(*) FROM evidence WHERE kind = 'event'")[0][0] == 3 * len(ids)
            assert db.query("SELECT COUNT(*) FROM events WHERE evidence_seq IS NOT NULL")[0][0] == 0
