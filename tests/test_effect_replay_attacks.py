"""Attacks on the effect worker's replay of a row's evidence records before it acts (PW644), on both backends.

The claim: before the effect worker (runtime/effect_worker.py `_claim`,
`_disagreement`) sends, looks up or recovers a call, it replays the
agreement's hash-chained records (runtime/_effect_replay.py
`row_disagreement`) and quarantines the row unsent (PW644) only when the row
was edited behind pactwright's back; a row pactwright wrote itself is never
refused, in any legitimate history.

Two ways to break it:

- a false refusal: a run nobody touched in which some row ends up
  quarantined with PW644, or no longer verifies. Workers SIGKILLed at every
  crash point of a compensation and of a lookup (real processes, restarted),
  two worker processes draining the same agreements at once, a lease that
  runs out under a slow provider and is reclaimed while the first worker is
  still sending, operators' resolutions followed by the worker, lookups that
  find a call applied or not, compensations of several earlier calls after a
  later one fails, events committed while calls are in flight, a store that
  went through migration 10 with calls in flight, and back-offs;
- a missed edit: a raw SQL edit after which the worker sends something the
  records do not support.

A bug is `xfail(strict=True)` with its cause in the reason; every other test
asserts the exact run.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from pactwright.runtime import TestClock
from pactwright.runtime.effect_ops import abandon, list_effects, reconcile
from pactwright.runtime.effect_worker import EffectWorker
from pactwright.runtime.store import Store, open_store
from tests._chain_tamper import undo_event_links
from tests.signed_bundles import BACKENDS
from tests.test_budget_inflight_attacks import PROVIDER, _adapter_for, _any_store, _open, _submit
from tests.test_evidence_replay_attacks import (
    ACK,
    GAVE_UP,
    HEAD,
    PARAMS,
    UNDONE,
    _effect,
    _operator,
    _phases,
    _policy,
    _problems,
    _tamper,
    _verifies,
)
from tests.test_liveness_attacks import T0

ROOT = Path(__file__).resolve().parent.parent
ROUTES = ("charge", "hold", "notify", "undo", "release")
C = "1/e0/c"

# A worker process: `step` takes one step at one instant; `race` drains at each instant of a list.
_CHILD = """
import sys
from pathlib import Path
from pactwright.runtime import TestClock
from pactwright.runtime.effect_worker import EffectWorker
from pactwright.runtime.store import open_store
from tests.test_budget_inflight_attacks import _adapter_for

class Sim:
    url = sys.argv[3]

url, at, _, directory, lease, mode = sys.argv[1:7]
with open_store(url) as store:
    adapter = _adapter_for(Path(directory), Sim, "charge", "hold", "notify", "undo", "release")
    if mode == "step":
        EffectWorker(store, adapter, TestClock(int(at)), lease_seconds=int(lease)).step()
    else:
        for n in range(4):
            EffectWorker(store, adapter, TestClock(int(at) + n * 1000), lease_seconds=int(lease)).drain(limit=200)
"""


def _child(url: str, at: int, sim: Any, directory: Path, *, crash: str | None = None, lease: int = 60,
           mode: str = "step") -> subprocess.Popen[str]:  # fmt: skip
    """A worker in its own OS process (SIGKILLed by the test-only hook at `crash`, if given)."""
    home = directory / f"child-{time.monotonic_ns()}"
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "PACTWRIGHT_TEST_EFFECT_CRASH_AT"}
    if crash is not None:
        env["PACTWRIGHT_TEST_EFFECT_CRASH_AT"] = crash
    return subprocess.Popen([sys.executable, "-c", _CHILD, url, str(at), sim.url, str(home), str(lease), mode],
                            cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip


def _wait(child: subprocess.Popen[str]) -> int:
    _, err = child.communicate(timeout=60)
    assert child.returncode in (0, -9), err
    return child.returncode


def _refused(store: Store, agreement_id: str | None = None) -> list[tuple[str, str | None]]:
    """Every row the worker quarantined unsent as edited (PW644), with its error."""
    return [(r.id, r.last_error) for r in list_effects(store, agreement_id=agreement_id)
            if r.last_error is not None and "PW644" in r.last_error]  # fmt: skip


def _settle(store: Store, adapter: Any, start: int, rounds: int = 5) -> None:
    for n in range(rounds):
        EffectWorker(store, adapter, TestClock(start + n * 1000)).drain(limit=200)


def _step(store: Store, adapter: Any, at: int) -> Any:
    return EffectWorker(store, adapter, TestClock(at)).step()


def _writes(sim: Any, path: str) -> int:
    """How many distinct writes the provider performed on `path` (a key sent again is the same write)."""
    return len({r["idempotency_key"] for r in sim.state()["records"] if r["path"] == path})


def _sent(sim: Any) -> list[str]:
    return [str(r["path"]) for r in sim.state()["records"]]


def _event_calls(store: Store, agreement_id: str = "a1") -> list[dict[str, Any]]:
    """Every call as the `event` records of an intact chain commit it."""
    from pactwright.runtime import _agreement as rows
    from pactwright.runtime._evidence_chain import check_chain

    with store.transaction(write=False) as db:
        chain = check_chain(db, rows.read(db, agreement_id, lock=False))
    assert chain.ok
    return [c for r in chain.records if r.get("kind") == "event" for c in r.get("effects") or []]


def _clean(store: Store, agreement_id: str = "a1") -> None:
    """Nothing refused, and the whole agreement verifies."""
    assert _refused(store, agreement_id) == []
    _verifies(store, agreement_id)


@contextmanager
def _run(policy: str, directory: Path, backend: str, agreements: int = 1) -> Iterator[tuple[Store, Any, Any, str]]:
    """A store running `policy` and a simulator; agreements a1.. opened, each with `go` committed."""
    from pactwright.runtime.provider_sim import start_simulator

    with _any_store(policy, directory, backend) as (store, report), start_simulator(slow_seconds=2.0) as sim:
        _operator(store)
        for k in range(1, agreements + 1):
            _open(store, "att.replay", PARAMS, f"a{k}")
            _submit(store, "go", "go", T0 + 10, f"a{k}")
        yield store, sim, _adapter_for(directory, sim, *ROUTES), report["url"]


def _three(charge: str, hold: str, notify: str, undo: str = "idempotent", release: str = "idempotent") -> str:
    """`go` calls charge (money-moving), hold, then notify."""
    effects = (_effect("charge", charge, "  key price\n  amount price\n") + _effect("hold", hold, "  key order_id\n")
               + _effect("notify", notify, "  key order_id\n") + _effect("undo", undo, "  key order_id\n")
               + _effect("release", release, "  key order_id\n"))  # fmt: skip
    return (
        HEAD
        + effects
        + (
            "state placed initial\nstate done final\n"
            "transition go: placed -> done {\n  by buyer\n  call charge\n  call hold\n  call notify\n}\n"
        )
    )


def _looping(charge: str) -> str:
    """`go` calls charge then notify; `tick` commits no call; `again` calls notify and ends."""
    effects = _effect("charge", charge, "  key price\n  amount price\n") + _effect("notify", "once", "  key order_id\n")
    return (
        HEAD
        + effects
        + (
            "state placed initial\nstate mid\nstate done final\n"
            "transition go: placed -> mid {\n  by buyer\n  call charge\n  call notify\n}\n"
            "transition tick: mid -> mid {\n  by buyer\n}\n"
            "transition again: mid -> done {\n  by buyer\n  call notify\n}\n"
        )
    )


# == False refusals: runs nobody tampered with ===================================================================

# -- a worker killed at each point of a compensation, restarted ------------------------------------------------


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("point", ["after_claim", "after_dispatched", "after_send", "after_outcome"])
def test_a_worker_killed_while_making_or_sending_a_compensation_resumes_unrefused(
    backend: str, point: str, tmp_path: Path
) -> None:
    """`charge` acknowledged, `notify` abandoned: the next claim creates `a1/1/e0/c` and marks it dispatched in
    one transaction. A real worker process dies at `point`; the next one (after the lease) recovers or finishes
    the compensation from the rows the dead one wrote, and none of them is taken for an edit."""
    with _run(_policy("compensate with undo"), tmp_path, backend) as (store, sim, adapter, url):
        _step(store, adapter, T0 + 20)
        sim.queue("lost_request")
        _step(store, adapter, T0 + 30)
        assert _phases(store) == [("1/e0", "compensation_required", 0), ("1/e1", "abandoned_uncertain", 0)]
        assert _wait(_child(url, T0 + 40, sim, tmp_path, crash=point)) == -9
        left = ("acknowledged", 0) if point == "after_outcome" else ("dispatched", 0)
        assert _phases(store)[1] == (C, *left)
        _clean(store)
        _settle(store, adapter, T0 + 200)
        assert _phases(store) == [("1/e0", "compensated", 0), (C, "acknowledged", 0),
                                  ("1/e1", "abandoned_uncertain", 0)]  # fmt: skip
        assert _writes(sim, "/undo") == 1 and _writes(sim, "/charge") == 1
        _clean(store)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_worker_killed_after_claiming_a_lookup_resumes_unrefused(backend: str, tmp_path: Path) -> None:
    """A parked `reconcilable` call is leased for its lookup; the worker process dies right after the claim.
    Once the lease ran out the next worker looks it up (applied) and the event goes on."""
    with _run(_policy("reconcilable"), tmp_path, backend) as (store, sim, adapter, url):
        sim.queue("lost_response")
        _step(store, adapter, T0 + 20)
        assert _phases(store)[0] == ("1/e0", "needs_reconciliation", 0)
        assert _wait(_child(url, T0 + 30, sim, tmp_path, crash="after_claim")) == -9
        assert _step(store, adapter, T0 + 40) is None  # still leased by the dead worker
        _settle(store, adapter, T0 + 200)
        assert _phases(store) == [("1/e0", "reconciled_recovered", 0), ("1/e1", "acknowledged", 0)]
        assert sim.state()["lookups"] == 1
        _clean(store)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("point", ["after_dispatched", "after_send"])
def test_a_later_call_under_compensate_killed_mid_send_undoes_both_unrefused(
    backend: str, point: str, tmp_path: Path
) -> None:
    """`hold` (compensate with release) is recovered as uncertain after its worker died: it and `charge` both
    need their compensations, each derived and sent without a refusal."""
    with _run(_three("compensate with undo", "compensate with release", "once"), tmp_path, backend) as (
        store, sim, adapter, url,
    ):  # fmt: skip
        _step(store, adapter, T0 + 20)
        assert _wait(_child(url, T0 + 30, sim, tmp_path, crash=point)) == -9
        assert _phases(store)[:2] == [("1/e0", "acknowledged", 0), ("1/e1", "dispatched", 0)]
        _settle(store, adapter, T0 + 200)
        assert _phases(store) == [("1/e0", "compensated", 0), (C, "acknowledged", 0), ("1/e1", "compensated", 0),
                                  ("1/e1/c", "acknowledged", 0), ("1/e2", "cancelled", 0)]  # fmt: skip
        assert _writes(sim, "/undo") == 1 and _writes(sim, "/release") == 1
        _clean(store)


# -- two worker processes on the same rows ------------------------------------------------------------------


@pytest.mark.parametrize("backend", BACKENDS)
def test_two_worker_processes_racing_refuse_nothing(backend: str, tmp_path: Path) -> None:
    """Two worker processes drain four agreements at the same instants while the provider loses requests and
    answers: whatever each wins, no row pactwright wrote is refused and every agreement verifies. (On
    PostgreSQL without compensations: a claim racing a compensation's outcome can deadlock, see
    `test_a_claim_and_a_compensation_outcome_on_postgresql_do_not_deadlock`.)"""
    strategy = "compensate with undo" if backend == "sqlite" else "reconcilable"
    with _run(_policy(strategy, "retry"), tmp_path, backend, agreements=4) as (
        store, sim, adapter, url,
    ):  # fmt: skip
        sim.queue("lost_response", "error_5xx", "lost_request", "lost_response", "error_5xx", "lost_request")
        first = _child(url, T0 + 20, sim, tmp_path, mode="race")
        second = _child(url, T0 + 20, sim, tmp_path, mode="race")
        assert (_wait(first), _wait(second)) == (0, 0)
        _settle(store, adapter, T0 + 10_000)
        for k in range(1, 5):
            phases = {p for _, p, _ in _phases(store, f"a{k}")}
            assert phases <= {
                "acknowledged",
                "compensated",
                "failed",
                "cancelled",
                "abandoned_uncertain",
                "reconciled_recovered",
            }, phases
            _clean(store, f"a{k}")
        charges = [r["idempotency_key"] for r in sim.state()["records"] if r["path"] == "/charge"]
        assert 1 <= len(set(charges)) <= 4
        if strategy.startswith("compensate"):
            assert len(set(charges)) == len(charges)  # a compensate call is never sent twice


def _waiting_on_agreements(url: str) -> int:
    """How many backends wait for a lock on an agreement row (`FOR UPDATE`)."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as db:
        found = db.execute("SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
                           "AND query LIKE 'SELECT id FROM agreements WHERE id = %%FOR UPDATE'").fetchone()  # fmt: skip
    return int(found[0]) if found else 0


def _until(condition: Any, what: str) -> None:
    deadline = time.monotonic() + 20
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting until {what}"
        time.sleep(0.02)


def test_a_claim_and_a_compensation_outcome_on_postgresql_do_not_deadlock(tmp_path: Path) -> None:
    """One worker process sends `a1/1/e0/c` to a slow provider; a command holds the agreement's row lock (as
    any submit does) when the answer comes, so that worker waits for it, then a second worker process claims
    (it locks the due `a1/1/e0` and waits for the agreement too). When the command commits, both must finish."""
    import psycopg

    with _run(_policy("compensate with undo"), tmp_path, "postgresql") as (store, sim, adapter, url):
        _step(store, adapter, T0 + 20)
        sim.queue("lost_request")
        _step(store, adapter, T0 + 30)
        sim.queue("slow")
        sender = _child(url, T0 + 40, sim, tmp_path)
        _until(lambda: (C, "dispatched", 0) in _phases(store), "the compensation is being sent")
        with psycopg.connect(url) as command:
            command.execute("SELECT id FROM agreements WHERE id = 'a1' FOR UPDATE")
            _until(lambda: _waiting_on_agreements(url) == 1, "the sender waits to record its answer")
            claimer = _child(url, T0 + 41, sim, tmp_path)
            _until(lambda: _waiting_on_agreements(url) == 2, "the second worker waits in its claim")
            command.rollback()
        errors = [child.communicate(timeout=60)[1][-400:] for child in (sender, claimer)]
        assert (sender.returncode, claimer.returncode) == (0, 0), errors
        assert _phases(store)[:2] == [("1/e0", "compensated", 0), (C, "acknowledged", 0)]


# -- a lease that runs out while its worker is still sending ---------------------------------------------------


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize(("strategy", "phases"), [("retry", ACK), ("once", GAVE_UP)])
def test_a_lease_reclaimed_while_the_first_worker_still_sends_refuses_nothing(
    backend: str, strategy: str, phases: list[tuple[str, str, int]], tmp_path: Path
) -> None:
    """A worker process with a 1 s lease sends `charge` to a provider that answers after 2 s. Meanwhile
    another worker finds the lease expired and recovers the call (uncertain: `retry` sends it again with the
    same key, `once` abandons it). The first worker's late answer changes nothing, and nothing is refused."""
    with _run(_policy(strategy), tmp_path, backend) as (store, sim, adapter, url):
        sim.queue("slow")
        first = _child(url, T0 + 20, sim, tmp_path, lease=1)
        deadline = time.monotonic() + 20
        while _phases(store)[0][1] != "dispatched":
            assert time.monotonic() < deadline and first.poll() is None
            time.sleep(0.02)
        recovered = _step(store, adapter, T0 + 100)
        assert recovered is not None and (recovered.action, recovered.outcome) == ("recover", "uncertain")
        assert _wait(first) == 0
        _settle(store, adapter, T0 + 1000)
        assert _phases(store) == phases
        assert _writes(sim, "/charge") == 1
        _clean(store)


# -- operators, lookups, compensations of several calls ----------------------------------------------------------


def _resolve(how: str, instance: str) -> Any:
    def run(store: Store, at: int) -> None:
        if how == "abandon":
            abandon(store, "a1", instance, "the provider cannot say", "olga", TestClock(at))
        elif how == "recovered":
            reconcile(store, "a1", instance, "recovered_acknowledgement", "olga", "ref-7", TestClock(at))
        else:
            reconcile(store, "a1", instance, "not_occurred", "olga", None, TestClock(at))

    return run


# name -> (policy, plan, phases): a plan item is a tuple of faults, "step", "drain" or a resolution.
STORIES: dict[str, tuple[str, list[Any], list[tuple[str, str, int]]]] = {
    "recovered after a crash, parked, resolved not occurred, sent again": (
        _policy("reconcilable"),
        ["kill", ("lookup_unknown",), "step", _resolve("not_occurred", "a1/1/e0"), "drain"],
        [("1/e0", "acknowledged", 0), ("1/e1", "acknowledged", 0)]),
    "looked up not applied twice, then applied": (
        _policy("reconcilable"),
        [("lost_request",), "step", "step", ("lost_request",), "step", "step", ("lost_response",), "step",
         "step", "drain"],
        [("1/e0", "reconciled_recovered", 0), ("1/e1", "acknowledged", 0)]),
    "a quarantined compensate call abandoned by an operator": (
        _policy("compensate with undo"),
        [("wrong_amount",), "step", _resolve("abandon", "a1/1/e0"), "drain"],
        [("1/e0", "abandoned_uncertain", 0), ("1/e1", "cancelled", 0)]),
    "a quarantined compensation found not to have happened, sent again": (
        _policy("compensate with undo"),
        ["step", ("lost_request", "wrong_key"), "step", "step", _resolve("not_occurred", "a1/1/e0/c"), "drain"],
        [("1/e0", "compensated", 0), (C, "acknowledged", 0), ("1/e1", "abandoned_uncertain", 0)]),
    "a parked call in the middle abandoned: the first undone, the last cancelled": (
        _three("compensate with undo", "reconcilable", "once"),
        ["step", ("lost_response", "lookup_unknown"), "step", "step", _resolve("abandon", "a1/1/e1"), "drain"],
        [("1/e0", "compensated", 0), (C, "acknowledged", 0), ("1/e1", "abandoned_uncertain", 0),
         ("1/e2", "cancelled", 0)]),
    "the last call fails for good: two earlier calls undone": (
        _three("compensate with undo", "compensate with release", "once"),
        ["step", "step", ("error_5xx",), "drain", "drain"],
        [("1/e0", "compensated", 0), (C, "acknowledged", 0), ("1/e1", "compensated", 0),
         ("1/e1/c", "acknowledged", 0), ("1/e2", "failed", 0)]),
    "the last call lost under compensate: three undone, one compensation retried": (
        _three("compensate with undo", "compensate with release", "compensate with undo", "retry"),
        ["step", "step", ("lost_response", "error_5xx"), "drain", "drain", "drain"],
        [("1/e0", "compensated", 0), (C, "acknowledged", 0), ("1/e1", "compensated", 0),
         ("1/e1/c", "acknowledged", 0), ("1/e2", "compensated", 0), ("1/e2/c", "acknowledged", 0)]),
    "two compensations, the first looked up and found applied": (
        _three("compensate with undo", "compensate with release", "once", "reconcilable", "reconcilable"),
        ["step", "step", ("lost_response",), "step", ("lost_response",), "drain", "drain"],
        [("1/e0", "compensated", 0), (C, "reconciled_recovered", 0), ("1/e1", "compensated", 0),
         ("1/e1/c", "acknowledged", 0), ("1/e2", "abandoned_uncertain", 0)]),
}  # fmt: skip


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", list(STORIES))
def test_operators_lookups_and_compensations_then_the_worker_refuse_nothing(
    backend: str, name: str, tmp_path: Path
) -> None:
    policy, plan, phases = STORIES[name]
    with _run(policy, tmp_path, backend) as (store, sim, adapter, url):
        at = T0 + 20
        for item in plan:
            at += 1000
            if isinstance(item, tuple):
                sim.queue(*item)
            elif item == "kill":
                assert _wait(_child(url, at, sim, tmp_path, crash="after_send")) == -9
            elif item == "step":
                _step(store, adapter, at)
            elif item == "drain":
                EffectWorker(store, adapter, TestClock(at)).drain(limit=200)
            else:
                item(store, at)
            assert _refused(store) == [], (item, _phases(store))
        assert _phases(store) == phases
        _clean(store)


# -- events committed while calls are in flight ------------------------------------------------------------------


@pytest.mark.parametrize("backend", BACKENDS)
def test_events_committed_while_calls_are_parked_refuse_nothing(backend: str, tmp_path: Path) -> None:
    """`go`'s first call parks; commands that call nothing commit on top (event records after the calls'
    own), `again` adds a call of a later event (another call site, so not held by PW530) whose provider
    refuses it for good; an operator resolves the parked call and `go`'s event finishes."""
    with _run(_looping("reconcilable"), tmp_path, backend) as (store, sim, adapter, _):
        sim.queue("lost_response", "lookup_unknown")
        _step(store, adapter, T0 + 20)
        _step(store, adapter, T0 + 30)
        assert _phases(store)[0] == ("1/e0", "needs_reconciliation", 0)
        for n in range(3):
            _submit(store, "tick", f"tick-{n}", T0 + 40 + n)
        _submit(store, "again", "again", T0 + 50)
        assert _phases(store) == [("1/e0", "needs_reconciliation", 0), ("1/e1", "prepared", 0),
                                  ("5/e0", "prepared", 0)]  # fmt: skip
        sim.queue("error_5xx", "lookup_unknown")
        EffectWorker(store, adapter, TestClock(T0 + 51)).drain()  # the parked call is looked up again
        assert _phases(store) == [("1/e0", "needs_reconciliation", 0), ("1/e1", "prepared", 0),
                                  ("5/e0", "failed", 0)]  # fmt: skip
        _resolve("recovered", "a1/1/e0")(store, T0 + 60)
        _settle(store, adapter, T0 + 100)
        assert _phases(store) == [("1/e0", "reconciled_recovered", 0), ("1/e1", "acknowledged", 0),
                                  ("5/e0", "failed", 0)]  # fmt: skip
        _clean(store)


# -- a store migrated with calls in flight ------------------------------------------------------------------------


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_store_through_migration_10_with_calls_in_flight_refuses_nothing(backend: str, tmp_path: Path) -> None:
    """a1's compensation was found applied by a lookup, which left its call `compensation_required` before
    migration 10; a2's `charge` is dispatched by a worker that died and its `notify` waits. Migration 10 runs
    on the next open, and the worker carries on with both without a refusal."""
    policy = _policy("compensate with undo", "reconcilable")
    with _run(policy, tmp_path, backend) as (store, sim, adapter, url):
        _step(store, adapter, T0 + 20)  # a1's charge
        sim.queue("lost_request")
        _step(store, adapter, T0 + 30)  # a1's notify abandoned
        sim.queue("lost_response")
        for at in (T0 + 40, T0 + 50):
            step = _step(store, adapter, at)
            assert step is not None and step.instance.startswith("a1/")
        assert _phases(store, "a1")[1] == (C, "reconciled_recovered", 0)
        _open(store, "att.replay", PARAMS, "a2")
        _submit(store, "go", "go", T0 + 55, "a2")
        assert _wait(_child(url, T0 + 60, sim, tmp_path, crash="after_send")) == -9
        assert _phases(store, "a2")[0] == ("1/e0", "dispatched", 0)
        with store.transaction(exclusive=False) as db:  # the rows as the release before 10 left them
            db.execute("UPDATE effects SET phase = 'compensation_required' WHERE id = 'a1/1/e0'")
            undo_event_links(db)  # made before migration 15 too
            db.execute("DELETE FROM schema_migrations WHERE version >= 10")  # made before 10 (and 11)
        with open_store(url) as migrated:
            assert _phases(migrated, "a1")[0] == ("1/e0", "compensated", 0)
            _settle(migrated, adapter, T0 + 500)
            assert _phases(migrated, "a2") == UNDONE
            for agreement in ("a1", "a2"):
                _clean(migrated, agreement)


# -- back-off ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_retry_backing_off_refuses_nothing_and_waits_its_time(backend: str, tmp_path: Path) -> None:
    """`retry` after three refusals: each attempt is committed before it leaves, the next is due 2, 4 and 8 s
    later, steps before that take nothing, and the chain verifies after every step."""
    with _run(_policy("retry"), tmp_path, backend) as (store, sim, adapter, _):
        sim.queue("error_5xx", "error_5xx", "error_5xx")
        seen = []
        at = T0 + 20
        for _ in range(4):
            assert _step(store, adapter, at) is not None
            (row,) = [r for r in list_effects(store, agreement_id="a1") if r.id == "a1/1/e0"]
            with store.transaction(write=False) as db:
                (next_at,) = db.query("SELECT next_at FROM effects WHERE id = 'a1/1/e0'", ())[0]
            seen.append((row.phase, row.attempts, int(next_at) - at))
            if row.phase == "prepared":
                assert _step(store, adapter, int(next_at) - 1) is None  # not due yet
                at = int(next_at)
            _clean(store)
        assert seen == [("prepared", 1, 2), ("prepared", 2, 4), ("prepared", 3, 8), ("acknowledged", 4, 0)]
        _settle(store, adapter, at + 10)
        assert _phases(store) == ACK
        _clean(store)


# == Missed edits: what an edited row makes the worker send ====================================================

# Columns the replay does not compare: after the edit `charge` is still sent, exactly as its event recorded it.
UNCHECKED = {
    "attempts": "attempts = 40",
    "next_at": "next_at = 0",
    "lease columns": "lease_owner = 'someone', lease_until = 5",
    "last_error": "last_error = 'PW999: made up'",
    "times": "created_at = 1, updated_at = 2",
}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("column", list(UNCHECKED))
def test_an_unchecked_column_edited_sends_only_what_the_records_say(backend: str, column: str,
                                                                     tmp_path: Path) -> None:  # fmt: skip
    """`retry` refused once, backing off; a raw edit of a column the replay does not compare. Whatever the
    worker then does, every request that leaves is the recorded call: its key, body and amount."""
    with _run(_policy("retry"), tmp_path, backend) as (store, sim, adapter, _):
        sim.queue("error_5xx")
        _step(store, adapter, T0 + 20)
        _tamper(store, (f"UPDATE effects SET {UNCHECKED[column]} WHERE id = 'a1/1/e0'", ()))  # noqa: S608
        _settle(store, adapter, T0 + 30)
        (call,) = [c for c in _event_calls(store) if c["instance"] == "a1/1/e0"]
        charges = [r for r in sim.state()["records"] if r["path"] == "/charge"]
        assert charges
        assert {(r["idempotency_key"], r["body_digest"], r["amount"]) for r in charges} == {
            (call["idempotency_key"], call["payload_digest"], str(call["amount"]))
        }
        assert _phases(store) == ACK
        assert _refused(store) == []


# Columns the worker sends from: an edit is refused unsent.
SENT_FROM = {
    "method": "method = 'PUT'",
    "url": f"url = '{PROVIDER}/undo'",
    "payload and its digest": None,  # set below: another body with its own digest
    "amount": "amount = '99999'",
    "idempotency key": "idempotency_key = 'pw-0000000000000000000000000000000000000000'",
}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("column", list(SENT_FROM))
def test_a_column_the_worker_sends_from_edited_is_refused_unsent(backend: str, column: str, tmp_path: Path) -> None:
    from pactwright.canonical import canonical_bytes, hash_bytes

    with _run(_policy("retry"), tmp_path, backend) as (store, sim, adapter, _):
        assignment = SENT_FROM[column]
        params: tuple[Any, ...] = ()
        if assignment is None:
            body = canonical_bytes({"agreement": "a1", "effect": "charge", "amount": "99999", "currency": "EUR"})
            assignment, params = "payload = ?, payload_digest = ?", (body.decode(), hash_bytes(body))
        _tamper(store, (f"UPDATE effects SET {assignment} WHERE id = 'a1/1/e0'", params))  # noqa: S608
        _settle(store, adapter, T0 + 20, rounds=2)
        assert sim.state()["requests"] == 0
        assert _phases(store) == [("1/e0", "prepared", 1), ("1/e1", "prepared", 0)]
        ((instance, error),) = _refused(store)
        assert instance == "a1/1/e0" and error is not None and error.startswith("PW644: effect call `a1/1/e0`")


# An edit of an EARLIER call of the same event: the later call is checked, the earlier one is not.
EARLIER = {
    "its phase set to acknowledged": "phase = 'acknowledged'",
    "made to look like a compensation": "compensates = 'a1/1/e0'",
    "moved after the later call": "call_index = 7",
}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("edit", list(EARLIER))
def test_an_edited_earlier_call_does_not_let_the_later_call_go(backend: str, edit: str, tmp_path: Path) -> None:
    """`charge` was never sent (its records say `prepared`); a raw edit of its row alone. `notify` must keep
    waiting for it (or the edit be refused): the provider must not see `notify` before `charge`."""
    with _run(_policy("once"), tmp_path, backend) as (store, sim, adapter, _):
        _tamper(store, (f"UPDATE effects SET {EARLIER[edit]} WHERE id = 'a1/1/e0'", ()))  # noqa: S608
        _settle(store, adapter, T0 + 20, rounds=2)
        assert "/notify" not in _sent(sim)[:1], _sent(sim)
        assert _problems(store) != []  # and verify names the edit either way
