"""Attacks on the runtime's lock order on PostgreSQL, and on the effect worker's check of a call's earlier calls.

The claim: on PostgreSQL no two runtime transactions deadlock, because every
writer of agreement-owned rows (effects, outbox, events, evidence,
approvals, limits usage) takes the agreement's row lock first; the effect
worker (runtime/effect_worker.py `_claim`, `_claim_one`) reads its due
candidates without a lock and claims each in a transaction of its own,
agreement first, then the call's row `FOR UPDATE SKIP LOCKED`. And the
check of the earlier calls of an event before a send or a cancel
(runtime/_effect_replay.py `row_disagreement(..., earlier=True)`) never
refuses (PW644) a row pactwright wrote itself.

The attacks run commands, operators' resolutions, effect workers and the
outbox worker as real OS processes against one PostgreSQL store, and force
their interleaving: a raw connection holds the lock everyone must pass
(the agreement's row, or a limit's usage row), the test watches
`pg_stat_activity` until each process waits on it, then lets go. A lock
order cycle shows as PostgreSQL's deadlock detector failing one of them
(PW709) or a process dying; none may. Then histories a store can hold: a
store written by the release before an uncertain `compensate` call undid
the calls before it, and more waiting calls than one claim reads.

A bug is `xfail(strict=True)` with its cause in the reason; every other test
asserts the exact run.
"""

from __future__ import annotations

import json
import secrets
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from pactwright.runtime import TestClock
from pactwright.runtime.effect_worker import EffectWorker
from pactwright.runtime.store import Store, open_store
from tests._chain_tamper import undo_event_links
from tests.test_budget_inflight_attacks import PROVIDER, _adapter_for, _any_store, _open, _submit
from tests.test_effect_replay_attacks import _clean, _refused, _run, _three
from tests.test_evidence_replay_attacks import PARAMS, _operator, _phases, _policy, _verifies
from tests.test_liveness_attacks import T0

ROOT = Path(__file__).resolve().parent.parent
ROUTES = ("charge", "hold", "notify", "undo", "release")

# A pact whose calls carry money under two limits across agreements (one for the pact, one per buyer), and
# whose commands post to the ledger: every kind of agreement-owned row is written.
LOCKS = (
    'pact "att.locks" version "1.1.0"\ncurrency EUR scale 2\ndefault deny\nrule R2 allow\nrole buyer\n'
    'param price: money between 1.00 and 100.00\nparam order_id: text matching "ORD-[0-9]{1,6}"\n'
    'account merchant "merchant:refunds" external\naccount customer "customers:{order_id}:card"\n'
    f'effect charge {{\n  risk R2\n  reversibility reversible\n  egress POST "{PROVIDER}/charge"\n'
    "  timeout 10s\n  strategy reconcilable\n  key order_id, price\n  amount price\n}\n"
    "limit a_cap: total(charge) <= 900.00 per 1d\n"
    "limit b_cap: total(charge) <= 900.00 per 1d per buyer\n"
    "state placed initial\nstate mid\nstate done final\n"
    "transition go: placed -> mid {\n  by buyer\n  call charge\n  transfer price from merchant to customer\n}\n"
    "transition tick: mid -> mid {\n  by buyer\n}\n"
    "transition again: mid -> done {\n  by buyer\n  call charge\n  transfer price from merchant to customer\n}\n"
)

# One runtime step in its own OS process; prints one JSON line: what it did, or the code it was refused with.
_CHILD = """
import json, sys
from pathlib import Path
from pactwright.errors import PactwrightError
from pactwright.runtime import TestClock, submit
from pactwright.runtime.effect_ops import reconcile
from pactwright.runtime.effect_worker import EffectWorker
from pactwright.runtime.ledger_db import open_ledger
from pactwright.runtime.store import open_store
from pactwright.runtime.worker import Worker
from tests.test_budget_inflight_attacks import _adapter_for

class Sim:
    url = sys.argv[4]

url, mode, at, _, directory, *args = sys.argv[1:]
clock = TestClock(int(at))
with open_store(url) as store:
    try:
        if mode == "submit":
            agreement, transition, key = args
            done = submit(store, agreement, transition, "buyer", "bea", key, clock=clock).status
        elif mode == "reconcile":
            agreement, instance = args
            done = reconcile(store, agreement, instance, "recovered_acknowledgement", "olga", "ref-op", clock).phase
        elif mode == "effect":
            step = EffectWorker(store, _adapter_for(Path(directory), Sim, "charge"), clock).step()
            done = None if step is None else f"{step.action}:{step.phase}"
        else:
            with open_ledger(None, url) as ledger:
                done = [o.status for o in Worker(store, ledger, clock).drain()]
    except PactwrightError as exc:
        done = f"refused:{exc.code}"
print(json.dumps(done))
"""


def _tagged(url: str, tag: str) -> str:
    """The store's URL with an application name, so the test can tell its processes' waits from any other."""
    return f"{url}{'&' if '?' in url else '?'}application_name={tag}"


def _spawn(url: str, mode: str, at: int, sim_url: str, directory: Path, *args: str) -> subprocess.Popen[str]:
    home = directory / f"child-{time.monotonic_ns()}"
    home.mkdir()
    return subprocess.Popen([sys.executable, "-c", _CHILD, url, mode, str(at), sim_url, str(home), *args],
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip


def _result(child: subprocess.Popen[str]) -> Any:
    out, err = child.communicate(timeout=60)
    assert child.returncode == 0, err[-2000:]
    assert "PW709" not in out + err and "deadlock" not in (out + err).lower(), (out, err[-2000:])
    return json.loads(out.strip().splitlines()[-1])


def _waiting(url: str, tag: str) -> list[str]:
    """The statements of the tagged backends that wait for a lock."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as db:
        found = db.execute("SELECT query FROM pg_stat_activity WHERE application_name = %s "
                           "AND wait_event_type = 'Lock' ORDER BY query", (tag,)).fetchall()  # fmt: skip
    return [str(q) for (q,) in found]


def _blockers(url: str, tag: str) -> dict[int, list[int]]:
    """Each tagged backend waiting for a lock, and the backends it waits for."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as db:
        found = db.execute("SELECT pid, pg_blocking_pids(pid) FROM pg_stat_activity WHERE application_name = %s "
                           "AND wait_event_type = 'Lock'", (tag,)).fetchall()  # fmt: skip
    return {int(pid): sorted(int(b) for b in blocking) for pid, blocking in found}


def _until_waiting(url: str, tag: str, count: int, children: list[subprocess.Popen[str]]) -> list[str]:
    deadline = time.monotonic() + 30
    while len(found := _waiting(url, tag)) < count:
        for child in children:
            if child.poll() is not None:  # finished without waiting: the lock order is not what it claims
                pytest.fail(f"a process finished before it waited: {child.communicate()}")
        assert time.monotonic() < deadline, f"timed out: {found} of {count} processes wait"
        time.sleep(0.02)
    return found


@contextmanager
def _locks_store(directory: Path, agreements: int) -> Iterator[tuple[Store, Any, str, str]]:
    """A PostgreSQL store running LOCKS, a simulator, its URL and a tag: a0..aN opened, `go` committed in a0."""
    from pactwright.runtime.provider_sim import start_simulator

    with _any_store(LOCKS, directory, "postgresql") as (store, report), start_simulator() as sim:
        _operator(store)
        for k in range(agreements):
            _open(store, "att.locks", PARAMS, f"a{k}")
        _submit(store, "go", "go", T0 + 10, "a0")  # both limits' rows of the day exist from here
        (directory / "routes").mkdir()
        _adapter_for(directory / "routes", sim, "charge")
        yield store, sim, report["url"], f"pwlock{secrets.token_hex(4)}"


def _used(store: Store) -> list[tuple[str, str, str]]:
    with store.transaction(write=False) as db:
        return [(str(n), str(p), str(u)) for n, p, u in
                db.query("SELECT limit_name, party, used FROM limits ORDER BY limit_name")]  # fmt: skip


# == Lock order: no cycle between any two writers ==============================================================


def test_commands_of_two_agreements_meet_on_two_limit_rows_in_one_order(tmp_path: Path) -> None:
    """a1's command holds a1 and `a_cap`'s row and waits for `b_cap`'s (held by a raw connection); a2's command
    holds a2 and waits for `a_cap`'s. Were the limits locked in two orders (another version of the pact, a
    per-role limit), the two would wait for each other; they are locked in the bundle's order (by name,
    compiler/normalize.py `_limits`), so both commit once `b_cap` is free."""
    import psycopg

    with _locks_store(tmp_path, 3) as (store, sim, url, tag), psycopg.connect(url) as holder:
        assert _used(store) == [("a_cap", "", "1000"), ("b_cap", "bea", "1000")]
        holder.execute("SELECT used FROM limits WHERE limit_name = 'b_cap' FOR UPDATE")
        first = _spawn(_tagged(url, tag), "submit", T0 + 20, sim.url, tmp_path, "a1", "go", "go")
        waits = _until_waiting(url, tag, 1, [first])
        second = _spawn(_tagged(url, tag), "submit", T0 + 21, sim.url, tmp_path, "a2", "go", "go")
        waits = _until_waiting(url, tag, 2, [first, second])
        assert all(w.startswith("SELECT used FROM limits") for w in waits), waits
        # a1's command waits for the raw connection (`b_cap`), a2's for a1's command (`a_cap`), not the other way.
        blocked = _blockers(url, tag)
        [(by_holder, _)] = [(pid, b) for pid, b in blocked.items() if b == [holder.info.backend_pid]]
        assert sorted(blocked.values()) == sorted([[holder.info.backend_pid], [by_holder]])
        holder.rollback()
        assert (_result(first), _result(second)) == ("committed", "committed")
        assert _used(store) == [("a_cap", "", "3000"), ("b_cap", "bea", "3000")]
        for k in range(3):
            _verifies(store, f"a{k}")


def test_every_writer_queued_on_one_agreement_finishes_when_it_is_free(tmp_path: Path) -> None:
    """a0's `charge` is parked (its answer lost, the lookup could not say) and its ledger entry is pending. A
    raw connection holds a0's row lock; then, each in its own process and each waiting before the next
    starts: an effect worker's claim (the lookup is due), the outbox worker (its claim takes the entry, its
    mark waits), an operator resolving the parked call, a command (`tick`), a second effect worker, and a
    command under both limits (`again`). Released, every one finishes: none is failed by a deadlock."""
    import psycopg

    with _locks_store(tmp_path, 1) as (store, sim, url, tag):
        adapter = _adapter_for(tmp_path / "routes", sim, "charge")
        sim.queue("lost_response", "lookup_unknown")
        EffectWorker(store, adapter, TestClock(T0 + 20)).step()
        EffectWorker(store, adapter, TestClock(T0 + 30)).step()
        assert _phases(store, "a0") == [("1/e0", "needs_reconciliation", 0)]
        at = T0 + 5000  # past the lookup's back-off and the outbox lease
        plan = [("effect",), ("outbox",), ("reconcile", "a0", "a0/1/e0"), ("submit", "a0", "tick", "tick-1"),
                ("effect",), ("submit", "a0", "again", "again-1")]  # fmt: skip
        children: list[subprocess.Popen[str]] = []
        with psycopg.connect(url) as holder:
            holder.execute("SELECT id FROM agreements WHERE id = 'a0' FOR UPDATE")
            for n, (mode, *args) in enumerate(plan):
                children.append(_spawn(_tagged(url, tag), mode, at + n, sim.url, tmp_path / "routes", *args))
                _until_waiting(url, tag, n + 1, children)
            holder.rollback()
        results = [_result(child) for child in children]
    # The lookup finds the call applied (its answer was lost, not its request), or the operator did first.
    assert results[1] == ["delivered"]
    assert results[3] == "committed" and results[5] == "committed"
    assert results[2] in ("reconciled_recovered", "refused:PW642")
    assert results[0] in ("lookup:reconciled_recovered", None)


def test_a_claim_waiting_for_an_agreement_passes_over_nothing_it_should_take(tmp_path: Path) -> None:
    """While a1's row is held, a worker's claim waits on its first candidate (a1's charge) and holds no lock
    while it waits; a command on a2 commits meanwhile; released, the claim takes a1's charge and the next
    worker a2's: each claim re-reads its row after the agreement's lock, so nothing is sent twice."""
    import psycopg

    with _locks_store(tmp_path, 3) as (store, sim, url, tag):
        adapter = _adapter_for(tmp_path / "routes", sim, "charge")
        EffectWorker(store, adapter, TestClock(T0 + 15)).drain()  # a0's charge acknowledged
        _submit(store, "go", "go", T0 + 20, "a1")
        with psycopg.connect(url) as holder:
            holder.execute("SELECT id FROM agreements WHERE id = 'a1' FOR UPDATE")
            worker = _spawn(_tagged(url, tag), "effect", T0 + 40, sim.url, tmp_path / "routes")
            assert _until_waiting(url, tag, 1, [worker]) == ["SELECT id FROM agreements WHERE id = $1 FOR UPDATE"]
            command = _spawn(_tagged(url, tag), "submit", T0 + 30, sim.url, tmp_path, "a2", "go", "go")
            assert _result(command) == "committed"  # the waiting claim holds nothing a2's command needs
            holder.rollback()
        assert _result(worker) == "dispatch:acknowledged"
        assert EffectWorker(store, adapter, TestClock(T0 + 50)).step().instance == "a2/1/e0"
        assert EffectWorker(store, adapter, TestClock(T0 + 60)).step() is None
        keys = [r["idempotency_key"] for r in sim.state()["records"] if r["path"] == "/charge"]
        assert len(keys) == len(set(keys)) == 3  # one send per agreement's charge, none twice
        for k in range(3):
            _clean(store, f"a{k}")


# == The earlier calls of an event: histories a store can hold ==================================================


def test_a_store_from_before_uncertain_compensate_undid_earlier_calls_cancels_the_last_call(tmp_path: Path) -> None:
    """charge and hold are `compensate with ...`; hold's answer is lost after charge went through, so hold
    is `compensation_required`. Releases before store migration 11 left charge `acknowledged` there (its after-phase
    rule undid earlier calls only after an abandon or a failure for good). Opened by this release, the store
    must carry on: notify cancelled, not refused, and both calls undone."""
    policy = _three("compensate with undo", "compensate with release", "once")
    with _run(policy, tmp_path, "postgresql") as (store, sim, adapter, url):
        EffectWorker(store, adapter, TestClock(T0 + 20)).step()
        sim.queue("lost_response")
        EffectWorker(store, adapter, TestClock(T0 + 30)).step()
        assert _phases(store) == [("1/e0", "compensation_required", 0), ("1/e1", "compensation_required", 0),
                                  ("1/e2", "prepared", 0)]  # fmt: skip
        with store.transaction(exclusive=False) as db:  # the rows as releases before 11 left them
            db.execute("UPDATE effects SET phase = 'acknowledged' WHERE id = 'a1/1/e0'")
            undo_event_links(db)  # made before migration 15 too
            db.execute("DELETE FROM schema_migrations WHERE version >= 10")  # made before migrations 10 and 11
        with open_store(url) as migrated:
            for n in range(5):
                EffectWorker(migrated, adapter, TestClock(T0 + 1000 * (n + 1))).drain(limit=200)
            assert _refused(migrated) == []
            assert ("1/e2", "cancelled", 0) in _phases(migrated)
            assert ("1/e0", "compensated", 0) in _phases(migrated)


def test_an_earlier_call_quarantined_then_recovered_by_an_operator_lets_the_later_ones_go(tmp_path: Path) -> None:
    """charge's answer contradicts the request (quarantined, `uncertain`); hold and notify wait. An operator
    finds it applied; the later calls' check replays the quarantine and the resolution and lets both go."""
    from pactwright.runtime.effect_ops import reconcile

    with _run(_three("idempotent", "retry", "once"), tmp_path, "postgresql") as (store, sim, adapter, _):
        sim.queue("wrong_amount")
        EffectWorker(store, adapter, TestClock(T0 + 20)).drain()
        assert _phases(store) == [("1/e0", "uncertain", 1), ("1/e1", "prepared", 0), ("1/e2", "prepared", 0)]
        reconcile(store, "a1", "a1/1/e0", "recovered_acknowledgement", "olga", "ref-1", TestClock(T0 + 30))
        EffectWorker(store, adapter, TestClock(T0 + 40)).drain()
        assert _phases(store) == [("1/e0", "reconciled_recovered", 0), ("1/e1", "acknowledged", 0),
                                  ("1/e2", "acknowledged", 0)]  # fmt: skip
        _clean(store)


WAITING = 64  # runtime/effect_worker.py `_DUE`: the candidates one claim reads


def test_a_due_call_is_sent_though_more_calls_than_one_claim_reads_wait_behind_parked_ones(tmp_path: Path) -> None:
    """64 agreements' `charge` answered with another amount (quarantined for an operator), so each `notify`
    waits, due since its commit. A 65th agreement commits later; its `charge` is due and nothing holds it."""
    with _run(_policy("idempotent"), tmp_path, "postgresql", agreements=WAITING) as (store, sim, adapter, _):
        sim.queue(*["wrong_amount"] * WAITING)
        EffectWorker(store, adapter, TestClock(T0 + 20)).drain(limit=10 * WAITING)
        parked = [_phases(store, f"a{k}") for k in range(1, WAITING + 1)]
        assert parked == [[("1/e0", "uncertain", 1), ("1/e1", "prepared", 0)]] * WAITING
        _open(store, "att.replay", PARAMS, "late")
        _submit(store, "go", "go", T0 + 100, "late")
        EffectWorker(store, adapter, TestClock(T0 + 200)).drain(limit=10)
        assert _phases(store, "late") == [("1/e0", "acknowledged", 0), ("1/e1", "acknowledged", 0)]
