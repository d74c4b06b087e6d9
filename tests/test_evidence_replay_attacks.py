"""Attacks on the replay of the tables the evidence speaks from (runtime/_evidence_tables.py), on both backends.

`verify_evidence` replays, from the hash-chained records, what the agreement
row, the events, outbox, effects, approvals and approval_requests tables
must hold, and names every disagreement PW586. Two ways to break it:

- a false alarm: a run of the real runtime, nobody touching the store, after
  which `verify_evidence(...).ok` is False. Every effect strategy under every
  fault the provider simulator injects, compensations (sent, failing,
  retried, found applied or not by lookup, quarantined, resolved by an
  operator), workers killed with SIGKILL between persisted steps, four-eyes
  approvals with partial grants, expiry and renewal, refused and rejected
  grants, outbox quarantine, the scheduler firing deadlines, transitions fired
  again: each run must verify;
- missed tampering: one table edited (never the evidence table) after which
  verify still passes while `evidence(...)` states something false, or a
  column the claims print that the replay never compares.

A bug is `xfail(strict=True)` with what is wrong in its reason; the attacks
that held assert the exact run and that it verifies.
"""

from __future__ import annotations

import multiprocessing
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from pactwright.errors import PactwrightError
from pactwright.runtime import TestClock, approvals, open_agreement, submit
from pactwright.runtime.evidence import evidence, verify_evidence
from pactwright.runtime.store import Store, open_store
from tests._chain_tamper import undo_event_links
from tests.signed_bundles import BACKENDS
from tests.test_budget_inflight_attacks import PROVIDER, _adapter_for, _any_store, _open, _step, _submit
from tests.test_liveness_attacks import T0

ROOT = Path(__file__).resolve().parent.parent
HEAD = (
    'pact "att.replay" version "1.0.0"\ncurrency EUR scale 2\ndefault deny\nrule R2 allow\nrole buyer\nclock timer\n'
    'param price: money between 1.00 and 500.00\nparam order_id: text matching "ORD-[0-9]{1,6}"\n'
)
PARAMS = {"price": "10.00", "order_id": "ORD-1"}
ROUTES = ("charge", "undo", "notify")


def _effect(name: str, strategy: str, extra: str = "") -> str:
    """A reversible R2 effect sent to `PROVIDER/name`."""
    return (f'effect {name} {{\n  risk R2\n  reversibility reversible\n  egress POST "{PROVIDER}/{name}"\n'
            f"  timeout 10s\n  strategy {strategy}\n{extra}}}\n")  # fmt: skip


def _policy(charge: str, undo: str = "idempotent", notify: str = "once") -> str:
    """`go` calls `charge` (money-moving, 10.00) then `notify`; `charge` may be `compensate with undo`."""
    effects = _effect("charge", charge, "  key price\n  amount price\n") + _effect("notify", notify, "  key order_id\n")
    if "undo" in charge:
        effects += _effect("undo", undo, "  key order_id\n")
    return (
        HEAD
        + effects
        + (
            "state placed initial\nstate done final\n"
            "transition go: placed -> done {\n  by buyer\n  call charge\n  call notify\n}\n"
        )
    )


def _problems(store: Store, agreement_id: str = "a1") -> list[tuple[str, int | None, str]]:
    return [(p.code, p.seq, p.message) for p in verify_evidence(store, agreement_id).problems]


def _verifies(store: Store, agreement_id: str = "a1") -> None:
    problems = _problems(store, agreement_id)
    assert problems == [], f"a run nobody tampered with does not verify: {problems}"


def _migrates_unchanged(store: Store, url: str, since: int) -> None:
    """The store as one made before migration `since` (its markers from there on deleted) migrates to the
    latest version with every call's phase kept, and verifies."""
    from pactwright.runtime.store._migrations import LATEST

    phases = _phases(store)
    with store.transaction(exclusive=False) as db:
        undo_event_links(db)  # made before migration 15 too
        db.execute("DELETE FROM schema_migrations WHERE version >= ?", (since,))
    with open_store(url) as migrated:
        assert migrated.schema_version() == LATEST
        assert _phases(migrated) == phases
        _verifies(migrated)


def _phases(store: Store, agreement_id: str = "a1") -> list[tuple[str, str, int]]:
    """(instance id without the agreement, phase, quarantined) of every call of the agreement."""
    with store.transaction(write=False) as db:
        found = db.query("SELECT id, phase, quarantined FROM effects WHERE agreement_id = ? ORDER BY id",
                         (agreement_id,))  # fmt: skip
    return [(str(i).split("/", 1)[1], str(p), int(q)) for i, p, q in found]


def _drain(store: Store, adapter: Any, at: int) -> list[Any]:
    from pactwright.runtime.effect_worker import EffectWorker

    return EffectWorker(store, adapter, TestClock(at)).drain()


def _settle(store: Store, adapter: Any, start: int, rounds: int = 5) -> None:
    """Drain the effect worker at instants 1000 s apart, past every back-off."""
    for n in range(rounds):
        _drain(store, adapter, start + n * 1000)


def _operator(store: Store, party: str = "olga") -> None:
    from pactwright.runtime.parties import add_party

    add_party(store, party, "operator", None, T0)


def _claims(store: Store, agreement_id: str = "a1") -> dict[str, str]:
    return {c["instance"]: c["claim"] for c in evidence(store, agreement_id).doc["claim"]["effects"]}


@contextmanager
def _running(policy: str, directory: Path, backend: str) -> Iterator[tuple[Store, Any, Any, str]]:
    """A store running `policy`, a simulator, an adapter routing to it, and the store's URL; a1 committed `go`."""
    from pactwright.runtime.provider_sim import start_simulator

    with _any_store(policy, directory, backend) as (store, report), start_simulator() as sim:
        _operator(store)
        _open(store, "att.replay", PARAMS)
        _submit(store, "go", "go", T0 + 10)
        yield store, sim, _adapter_for(directory, sim, *ROUTES), report["url"]


# == False alarms: runs nobody tampered with ==================================================

# -- every strategy under every fault ----------------------------------------------------------

FAULTS = ((), ("lost_request",), ("lost_response",), ("error_5xx",), ("wrong_amount",),
          ("lost_response", "lookup_unknown"))  # fmt: skip
ACK = [("1/e0", "acknowledged", 0), ("1/e1", "acknowledged", 0)]
QUARANTINED = [("1/e0", "uncertain", 1), ("1/e1", "prepared", 0)]
GAVE_UP = [("1/e0", "abandoned_uncertain", 0), ("1/e1", "cancelled", 0)]
FAILED = [("1/e0", "failed", 0), ("1/e1", "cancelled", 0)]
UNDONE = [("1/e0", "compensated", 0), ("1/e0/c", "acknowledged", 0), ("1/e1", "cancelled", 0)]
RECOVERED = [("1/e0", "reconciled_recovered", 0), ("1/e1", "acknowledged", 0)]
# strategy -> the phases after each fault of FAULTS, in order
EXPECTED = {
    "once": [ACK, GAVE_UP, GAVE_UP, FAILED, QUARANTINED, GAVE_UP],
    "retry": [ACK, ACK, ACK, ACK, QUARANTINED, ACK],
    "idempotent": [ACK, ACK, ACK, ACK, QUARANTINED, ACK],
    "reconcilable": [ACK, ACK, RECOVERED, ACK, QUARANTINED, RECOVERED],
    "compensate with undo": [ACK, UNDONE, UNDONE, FAILED, QUARANTINED, UNDONE],
}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("strategy", list(EXPECTED))
def test_each_strategy_under_each_fault_verifies(backend: str, strategy: str, tmp_path: Path) -> None:
    """One agreement per fault, each settled before the next: the first write of each meets the fault."""
    from pactwright.runtime.provider_sim import start_simulator

    with _any_store(_policy(strategy), tmp_path, backend) as (store, _), start_simulator() as sim:
        adapter = _adapter_for(tmp_path, sim, *ROUTES)
        found = []
        for k, faults in enumerate(FAULTS):
            _open(store, "att.replay", PARAMS, f"a{k}")
            _submit(store, "go", "go", T0 + 10, f"a{k}")
            sim.queue(*faults)
            _settle(store, adapter, T0 + 20)
            found.append(_phases(store, f"a{k}"))
            _verifies(store, f"a{k}")
    assert found == EXPECTED[strategy]


# -- compensations and operators ---------------------------------------------------------------


def _resolve(instance: str, resolution: str, ref: str | None = None) -> Callable[[Store, int], Any]:
    from pactwright.runtime.effect_ops import abandon, reconcile

    if resolution == "abandon":
        return lambda store, at: abandon(store, "a1", instance, "the provider cannot say", "olga", TestClock(at))
    return lambda store, at: reconcile(store, "a1", instance, resolution, "olga", ref, TestClock(at))


# name -> (undo's strategy, notify's strategy, plan, phases): a plan item is "step" (one worker step),
# "drain", a tuple of faults to queue, or an operator's resolution.
C = "1/e0/c"
SEQUENCES: dict[str, tuple[str, str, list[Any], list[tuple[str, str, int]]]] = {
    "compensation found applied by lookup": (
        "reconcilable", "once", ["step", ("lost_request",), "step", ("lost_response",), "drain", "drain"],
        [("1/e0", "compensated", 0), (C, "reconciled_recovered", 0), ("1/e1", "abandoned_uncertain", 0)]),
    "compensation found not applied by lookup, sent again": (
        "reconcilable", "once", ["step", ("lost_request",), "step", ("lost_request",), "drain", "drain"],
        [("1/e0", "compensated", 0), (C, "acknowledged", 0), ("1/e1", "abandoned_uncertain", 0)]),
    "compensation parked, an operator finds it applied": (
        "reconcilable", "once", ["step", ("lost_request",), "step", ("lost_response", "lookup_unknown"), "step",
                                 "step", _resolve("a1/1/e0/c", "recovered_acknowledgement", "ref-9"), "drain"],
        [("1/e0", "compensated", 0), (C, "reconciled_recovered", 0), ("1/e1", "abandoned_uncertain", 0)]),
    "compensation parked, an operator finds it did not happen": (
        "reconcilable", "once", ["step", ("lost_request",), "step", ("lost_request", "lookup_unknown"), "step",
                                 "step", _resolve("a1/1/e0/c", "not_occurred"), "drain"],
        [("1/e0", "compensated", 0), (C, "acknowledged", 0), ("1/e1", "abandoned_uncertain", 0)]),
    "compensation parked, an operator abandons it": (
        "reconcilable", "once", ["step", ("lost_request",), "step", ("lost_request", "lookup_unknown"), "step",
                                 "step", _resolve("a1/1/e0/c", "abandon"), "drain", "drain"],
        [("1/e0", "compensation_required", 0), (C, "abandoned_uncertain", 0), ("1/e1", "abandoned_uncertain", 0)]),
    "compensation failed for good": (
        "once", "once", ["step", ("lost_request",), "step", ("error_5xx",), "drain", "drain"],
        [("1/e0", "compensation_required", 0), (C, "failed", 0), ("1/e1", "abandoned_uncertain", 0)]),
    "compensation retried after a failure and a lost answer": (
        "retry", "once", ["step", ("lost_request",), "step", ("error_5xx", "lost_response"), "drain", "drain",
                          "drain"],
        [("1/e0", "compensated", 0), (C, "acknowledged", 0), ("1/e1", "abandoned_uncertain", 0)]),
    "compensation quarantined, an operator finds it applied": (
        "idempotent", "once", ["step", ("lost_request",), "step", ("wrong_key",), "drain",
                               _resolve("a1/1/e0/c", "recovered_acknowledgement", "ref-2"), "drain"],
        [("1/e0", "compensated", 0), (C, "reconciled_recovered", 0), ("1/e1", "abandoned_uncertain", 0)]),
    "later call parked, abandoned by an operator": (
        "idempotent", "reconcilable", ["step", ("lost_response", "lookup_unknown"), "step", "step",
                                       _resolve("a1/1/e1", "abandon"), "drain"],
        [("1/e0", "compensated", 0), (C, "acknowledged", 0), ("1/e1", "abandoned_uncertain", 0)]),
    "later call parked, found not to have happened, sent again": (
        "idempotent", "reconcilable", ["step", ("lost_response", "lookup_unknown"), "step", "step",
                                       _resolve("a1/1/e1", "not_occurred"), "drain"],
        [("1/e0", "acknowledged", 0), ("1/e1", "acknowledged", 0)]),
    "later call quarantined, abandoned by an operator": (
        "idempotent", "reconcilable", ["step", ("wrong_key",), "step", _resolve("a1/1/e1", "abandon"), "drain"],
        [("1/e0", "compensated", 0), (C, "acknowledged", 0), ("1/e1", "abandoned_uncertain", 0)]),
    "quarantined call found not to have happened, sent again": (
        "idempotent", "once", [("wrong_amount",), "step", _resolve("a1/1/e0", "not_occurred"), "drain"],
        [("1/e0", "acknowledged", 0), ("1/e1", "acknowledged", 0)]),
}  # fmt: skip


def _play(store: Store, sim: Any, adapter: Any, plan: list[Any]) -> None:
    at = T0 + 20
    for item in plan:
        at += 1000
        if isinstance(item, tuple):
            sim.queue(*item)
        elif item == "step":
            _step(store, adapter, at)
        elif item == "drain":
            _drain(store, adapter, at)
        else:
            item(store, at)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", list(SEQUENCES))
def test_compensations_lookups_and_operators_verify(backend: str, name: str, tmp_path: Path) -> None:
    undo, notify, plan, phases = SEQUENCES[name]
    with _running(_policy("compensate with undo", undo, notify), tmp_path, backend) as (store, sim, adapter, _):
        _play(store, sim, adapter, plan)
        assert _phases(store) == phases
        _verifies(store)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", ["compensation found applied by lookup",
                                  "compensation parked, an operator finds it applied"])  # fmt: skip
def test_a_compensation_found_applied_undoes_its_call(backend: str, name: str, tmp_path: Path) -> None:
    undo, notify, plan, _ = SEQUENCES[name]
    with _running(_policy("compensate with undo", undo, notify), tmp_path, backend) as (store, sim, adapter, _):
        _play(store, sim, adapter, plan)
        assert _phases(store)[0] == ("1/e0", "compensated", 0)
        assert _claims(store)["a1/1/e0"].endswith("acknowledged, then undone by its compensation (provider ref sim_1)")
        _verifies(store)


# -- a worker killed between persisted steps ---------------------------------------------------

_CHILD = """
import sys
from pathlib import Path
from pactwright.runtime import TestClock
from pactwright.runtime.effect_worker import EffectWorker
from pactwright.runtime.store import open_store
from tests.test_budget_inflight_attacks import _adapter_for

class Sim:
    url = sys.argv[3]

with open_store(sys.argv[1]) as store:
    adapter = _adapter_for(Path(sys.argv[4]), Sim, "charge", "undo", "notify")
    EffectWorker(store, adapter, TestClock(int(sys.argv[2]))).step()
"""

CRASHES = [
    # strategy, where the worker dies, the phases after recovery, the writes the provider performed
    ("compensate with undo", "after_dispatched", UNDONE, 1),  # `charge` never left: only `undo` was written
    ("compensate with undo", "after_send", UNDONE, 2),
    ("once", "after_send", GAVE_UP, 1),
    ("retry", "after_dispatched", ACK, 2),
    ("reconcilable", "after_dispatched", ACK, 2),  # looked up: not applied, sent again
    ("reconcilable", "after_send", RECOVERED, 2),  # looked up: applied
]  # fmt: skip


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize(("strategy", "point", "phases", "writes"), CRASHES,
                         ids=[f"{c[0].split()[0]}-{c[1]}" for c in CRASHES])  # fmt: skip
def test_a_dispatch_whose_worker_was_killed_is_recovered_and_verifies(
    backend: str, strategy: str, point: str, phases: list[tuple[str, str, int]], writes: int, tmp_path: Path
) -> None:
    """A real process takes `charge`'s first step and SIGKILLs itself at `point`; after its lease ran out the
    next worker finds the call `dispatched` and lets the strategy decide, as after a lost answer."""
    with _running(_policy(strategy), tmp_path, backend) as (store, sim, adapter, url):
        (tmp_path / "child").mkdir()
        env = {**os.environ, "PACTWRIGHT_TEST_EFFECT_CRASH_AT": point}
        child = subprocess.run([sys.executable, "-c", _CHILD, url, str(T0 + 20), sim.url, str(tmp_path / "child")],
                               cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)  # fmt: skip
        assert child.returncode == -9, child.stderr
        assert _phases(store) == [("1/e0", "dispatched", 0), ("1/e1", "prepared", 0)]
        _verifies(store)  # the step persisted so far verifies too
        _settle(store, adapter, T0 + 200)
        assert _phases(store) == phases
        assert sim.state()["writes"] == writes
        _verifies(store)


# -- approvals: four eyes, partial grants, expiry, renewal, refusals ---------------------------


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("registry", [False, True], ids=["two-roles", "two-of-a-role"])
def test_four_eyes_with_a_renewed_request_and_refused_grants_verifies(
    backend: str, registry: bool, tmp_path: Path
) -> None:
    """A first grant, the request expiring (its partial grant dropped), a late grant refused PW602, the
    request renewed by the same command, the requester refused (PW605/PW607), a second grant by the same
    party refused PW614, then two grants commit it; a replay is PW604."""
    from tests.test_four_eyes import _grant, _park, _store

    first, second = ("pete", "rosa") if registry else ("rita", "olga")
    late = T0 + 10 + approvals.APPROVAL_TTL_S + 100
    stores = _store(backend, tmp_path, registry)
    url = next(stores)
    codes = []
    with open_store(url) as store:
        request = _park(store)
        _grant(store, request, first, T0 + 20)
        _verifies(store, "r1")
        with pytest.raises(PactwrightError) as expired:
            _grant(store, request, second, late)
        codes.append(expired.value.code)
        renewed = submit(store, "r1", "issue", "support_agent", "sam", "issue", clock=TestClock(late)).approval
        assert renewed is not None and renewed["id"] != request["id"]
        for party, at in (("sam", late), (second, late + 1), (second, late + 1)):
            try:
                _grant(store, renewed, party, at)
            except PactwrightError as exc:
                codes.append(exc.code)
        _verifies(store, "r1")
        result = _grant(store, renewed, first, late + 2)
        with pytest.raises(PactwrightError) as replayed:
            _grant(store, renewed, first, late + 3)
        codes.append(replayed.value.code)
        approvers = [a["approver"].split(":")[1] for a in evidence(store, "r1").doc["supports"]["approvals"]]
        _verifies(store, "r1")
    next(stores, None)
    assert codes == ["PW602", "PW607" if registry else "PW605", "PW614", "PW604"]
    assert result.status == "committed" and approvers == [second, first]


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_refused_grant_an_operator_a_second_grant_and_the_scheduler_verify(backend: str, tmp_path: Path) -> None:
    """tests/test_abandon_compensate_attacks.py's run: `pay`'s grant refused PW527 while `notify` is parked,
    an operator reconciles it, the same proof grants it, `pay` refused PW530 while its call is in flight, then
    parked, granted again and fired a second time; the scheduler fires `finish`. A rejected request and its
    replay (PW604) on a second agreement."""
    from pactwright.runtime.effect_ops import reconcile
    from pactwright.runtime.parties import add_party
    from pactwright.runtime.provider_sim import start_simulator
    from pactwright.runtime.scheduler import scan
    from pactwright.signing import raw_public_key, sign_statement
    from tests import signed_bundles as sb
    from tests.test_abandon_compensate_attacks import APPROVED_PAY

    def proof(request: dict[str, Any], decision: str = "grant") -> str:
        statement = approvals.decision_statement(request["id"], request["preview_digest"], decision)
        return sign_statement(sb.key("max").private, statement)

    codes = []
    with _any_store(APPROVED_PAY, tmp_path, backend) as (store, _), start_simulator() as sim:
        add_party(store, "max", "manager", raw_public_key(sb.key("max").private.public_key()), T0)
        _operator(store)
        adapter = _adapter_for(tmp_path, sim, "notify", "charge")
        for agreement in ("a1", "a2"):
            open_agreement(store, "att.approved_pay", {"order_id": "ORD-1"}, {"buyer": "bea", "manager": "max"},
                           agreement_id=agreement, clock=TestClock(T0))  # fmt: skip
        _submit(store, "ping", "ping", T0)
        first = _submit(store, "pay", "pay-1", T0 + 1).approval
        sim.queue("lost_request", "lookup_unknown")
        _drain(store, adapter, T0 + 30)
        try:
            approvals.grant(store, first["id"], "max", proof(first), TestClock(T0 + 40))
        except PactwrightError as exc:
            codes.append(exc.code)
        _verifies(store)
        reconcile(store, "a1", "notify", "recovered_acknowledgement", "olga", "ref-1", TestClock(T0 + 50))
        approvals.grant(store, first["id"], "max", proof(first), TestClock(T0 + 60))
        try:
            _submit(store, "pay", "pay-2", T0 + 70)
        except PactwrightError as exc:
            codes.append(exc.code)
        _drain(store, adapter, T0 + 80)
        second = _submit(store, "pay", "pay-2", T0 + 90).approval
        approvals.grant(store, second["id"], "max", proof(second), TestClock(T0 + 100))
        _drain(store, adapter, T0 + 110)
        committed = scan(store, TestClock(T0 + 200)).to_json()["committed"]
        rejected = _submit(store, "pay", "pay-x", T0 + 1, "a2").approval
        approvals.reject(store, rejected["id"], "max", proof(rejected, "reject"), TestClock(T0 + 300))
        try:
            approvals.grant(store, rejected["id"], "max", proof(rejected), TestClock(T0 + 301))
        except PactwrightError as exc:
            codes.append(exc.code)
        agreement = evidence(store, "a1").doc["claim"]
        _verifies(store)
        _verifies(store, "a2")
    assert codes == ["PW527", "PW530", "PW604"] and committed == ["a1/4"]
    assert (agreement["state"], agreement["version"]) == ("done", 4)


# -- the outbox and the scheduler (marketplace) -------------------------------------------------


@pytest.mark.parametrize("backend", BACKENDS)
def test_deliveries_a_quarantine_and_deadlines_fired_by_the_scheduler_verify(backend: str, tmp_path: Path) -> None:
    """a1: fund, deliver, auto_release by the scheduler; a2: fund, refund_undelivered by the scheduler;
    a3: fund, its delivery quarantined (the ledger holds its reference under another program), then
    refund_undelivered by the scheduler. Stamps, deadlines, fees, deliveries and a quarantine."""
    from pactwright.runtime.ledger_db import open_ledger
    from pactwright.runtime.scheduler import scan
    from pactwright.runtime.worker import Worker
    from tests.signed_bundles import PACT_ID
    from tests.test_evidence_tamper_attacks import PARTIES
    from tests.test_runtime_worker import OTHER_PROGRAM, environment

    day = 86_400
    with environment(backend, tmp_path) as url, open_store(url) as store, open_ledger(None, url) as ledger:
        for agreement in ("a1", "a2", "a3"):
            open_agreement(store, PACT_ID, {"price": "64.90"}, PARTIES, agreement_id=agreement, clock=TestClock(T0))
            submit(store, agreement, "fund", "buyer", "alice", "fund", clock=TestClock(T0 + 10))
        submit(store, "a1", "deliver", "seller", "bob", "deliver", clock=TestClock(T0 + 60))
        ledger.apply("a3/1/0", OTHER_PROGRAM, {})
        first = sorted(o.status for o in Worker(store, ledger, TestClock(T0 + 100)).drain())
        committed = scan(store, TestClock(T0 + 15 * day)).to_json()["committed"]
        again = [(o.reference, o.status) for o in Worker(store, ledger, TestClock(T0 + 15 * day + 10)).drain()]
        a3 = [(e["reference"], e["status"]) for e in evidence(store, "a3").doc["supports"]["ledger"]]
        states = [evidence(store, a).doc["claim"]["state"] for a in ("a1", "a2", "a3")]
        for agreement in ("a1", "a2", "a3"):
            _verifies(store, agreement)
    assert first == ["delivered", "delivered", "quarantined"]
    assert sorted(committed) == ["a1/3", "a2/2", "a3/2"] and states == ["released", "refunded", "refunded"]
    # a3's refund waits behind its quarantined funding entry
    assert again == [("a1/3/0", "delivered"), ("a2/2/0", "delivered")]
    assert a3 == [("a3/1/0", "quarantined"), ("a3/2/0", "pending")]


# -- a writer committing while verify reads (PostgreSQL) ---------------------------------------


def _verify_in_child(url: str, answers: Any) -> None:
    with open_store(url) as store:
        answers.put(_problems(store))


def test_an_operator_resolving_a_call_while_verify_reads_is_not_tampering(tmp_path: Path) -> None:
    """The lock on `bundle_files` only holds verify between its two reads (it loads the bundle there);
    the operator's resolution reads no bundle, so it commits in that gap as it could at any time."""
    import psycopg

    from pactwright.runtime.effect_ops import abandon

    with _running(_policy("reconcilable"), tmp_path, "postgresql") as (store, sim, adapter, url):
        sim.queue("lost_response", "lookup_unknown")
        _step(store, adapter, T0 + 20)
        _step(store, adapter, T0 + 30)
        assert _phases(store)[0] == ("1/e0", "needs_reconciliation", 0)
        _verifies(store)
        context = multiprocessing.get_context("spawn")
        answers = context.Queue()
        with psycopg.connect(url) as gate:
            gate.execute("LOCK TABLE bundle_files IN ACCESS EXCLUSIVE MODE")
            child = context.Process(target=_verify_in_child, args=(url, answers))
            child.start()
            waiting = 0
            for _ in range(400):
                waiting = gate.execute("SELECT count(*) FROM pg_locks WHERE relation = 'bundle_files'::regclass "
                                       "AND NOT granted").fetchall()[0][0]  # fmt: skip
                if waiting:
                    break
                time.sleep(0.05)
            assert waiting, "verify never reached the bundle"
            abandon(store, "a1", "a1/1/e0", "the provider cannot say", "olga", TestClock(T0 + 40))
            gate.commit()
        during = answers.get(timeout=60)
        child.join(30)
        _verifies(store)  # read again, after the resolution: it verifies
    assert during == []


# == Missed tampering ==========================================================================


def _tamper(store: Store, *statements: tuple[str, tuple[Any, ...]]) -> None:
    with store.transaction(exclusive=False) as db:
        for sql, params in statements:
            db.execute(sql, params)


def _forged_compensation(store: Store, effect: str) -> None:
    """A row `a1/1/e0/c` for effect `effect`, its body and key derived from `a1/1/e0` exactly as the worker
    derives a compensation's (the formula is in the open), sent to `effect`'s declared destination."""
    from pactwright.canonical import hash_bytes
    from pactwright.runtime.effect_worker import _compensation_body, _current

    with store.transaction(exclusive=False) as db:
        original = _current(db, "a1/1/e0")
        assert original is not None and original.phase == "compensation_required"
        body, key = _compensation_body(original, effect)
        db.execute(
            "INSERT INTO effects (id, agreement_id, event_seq, call_index, effect, strategy, compensates, phase, "
            "method, url, idempotency_key, payload, payload_digest, amount, attempts, next_at, created_at, "
            "updated_at) VALUES ('a1/1/e0/c', 'a1', 1, 0, ?, 'once', 'a1/1/e0', 'prepared', 'POST', ?, ?, ?, ?, "
            "'1000', 0, ?, ?, ?)",
            (effect, f"{PROVIDER}/{effect}", key, body.decode(), hash_bytes(body), T0 + 30, T0 + 30, T0 + 30),
        )


def _compensation_due(store: Store, sim: Any, adapter: Any) -> None:
    """`charge` acknowledged, then `notify`'s request lost (`once` abandons it): `charge` needs `undo`,
    and no worker has taken that step yet."""
    _step(store, adapter, T0 + 20)
    sim.queue("lost_request")
    _step(store, adapter, T0 + 30)
    assert _phases(store) == [("1/e0", "compensation_required", 0), ("1/e1", "abandoned_uncertain", 0)]
    _verifies(store)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_forged_unsent_compensation_is_named(backend: str, tmp_path: Path) -> None:
    with _running(_policy("compensate with undo"), tmp_path, backend) as (store, sim, adapter, _):
        _compensation_due(store, sim, adapter)
        _forged_compensation(store, "notify")
        claims = _claims(store)
        assert claims["a1/1/e0/c"] == ("a 10.00 EUR `notify` call compensating `a1/1/e0` was committed by `go` and "
                                       "committed and not yet sent")  # fmt: skip
        assert _problems(store, "a1") != []


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_forged_compensation_is_never_sent(backend: str, tmp_path: Path) -> None:
    with _running(_policy("compensate with undo"), tmp_path, backend) as (store, sim, adapter, _):
        _compensation_due(store, sim, adapter)
        _forged_compensation(store, "charge")
        _settle(store, adapter, T0 + 100)
        charged = [r["path"] for r in sim.state()["records"]]
        verified = verify_evidence(store, "a1").ok
        claims = _claims(store)
        assert charged == ["/charge"], (charged, verified, claims)
        assert not (
            verified
            and claims["a1/1/e0"].startswith(
                "a 10.00 EUR `charge` call was committed by `go` and acknowledged, then undone by its compensation"
            )
        )


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_edited_recorded_compensation_is_named(backend: str, tmp_path: Path) -> None:
    """Held: a compensation with records of its own is compared field by field."""
    with _running(_policy("compensate with undo", "retry"), tmp_path, backend) as (store, sim, adapter, _):
        _compensation_due(store, sim, adapter)
        sim.queue("error_5xx")
        _step(store, adapter, T0 + 40)  # `undo` sent and refused: `retry` makes it `prepared` again
        assert _phases(store)[1] == ("1/e0/c", "prepared", 0)
        _tamper(store, ("UPDATE effects SET effect = 'notify', idempotency_key = 'pw-other' WHERE id = 'a1/1/e0/c'",
                        ()))  # fmt: skip
        assert _problems(store) == [("PW586", None, "effect call `a1/1/e0/c` disagrees with its evidence records on "
                                                    "effect, idempotency_key")]  # fmt: skip


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_edited_destination_is_named(backend: str, tmp_path: Path) -> None:
    with _running(_policy("idempotent"), tmp_path, backend) as (store, sim, adapter, _):
        _tamper(store, ("UPDATE effects SET url = ? WHERE id = 'a1/1/e0'", (f"{PROVIDER}/notify",)))
        edited = _problems(store)
        _settle(store, adapter, T0 + 20, rounds=1)
        assert _phases(store)[0] == ("1/e0", "prepared", 1) and sim.state()["writes"] == 0  # refused unsent
        claim = _claims(store)["a1/1/e0"]
        assert edited != [], "the edited destination verifies"
        assert "the provider's answer contradicted the request" not in claim, claim
        assert claim.endswith("so the worker refused it; nothing was ever sent"), claim


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_call_edited_before_its_compensation_is_refused_itself_and_named(backend: str, tmp_path: Path) -> None:
    """The call to undo is checked against its records before its compensation is made: no compensation row,
    the edited call quarantined unsent, and verify names its destination, not a compensation."""
    with _running(_policy("compensate with undo"), tmp_path, backend) as (store, sim, adapter, _):
        _step(store, adapter, T0 + 20)
        sim.queue("lost_request")
        _step(store, adapter, T0 + 30)  # the later call is lost: the first one must be undone
        _tamper(store, ("UPDATE effects SET url = ? WHERE id = 'a1/1/e0'", (f"{PROVIDER}/notify",)))
        refused = _step(store, adapter, T0 + 40)
        assert (refused.instance, refused.action) == ("a1/1/e0", "refuse")
        assert _phases(store) == [("1/e0", "compensation_required", 1), ("1/e1", "abandoned_uncertain", 0)]
        assert _problems(store) == [("PW586", None, "effect call `a1/1/e0` disagrees with its evidence records on "
                                                    "destination")]  # fmt: skip


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_call_edited_after_it_went_holds_back_the_next_call_of_its_event(backend: str, tmp_path: Path) -> None:
    """The next call goes on what the earlier row says: an earlier row edited after it was sent (another
    destination) keeps the next call unsent, quarantined with a reason naming the edited call."""
    with _running(_policy("compensate with undo"), tmp_path, backend) as (store, sim, adapter, _):
        _step(store, adapter, T0 + 20)
        _tamper(store, ("UPDATE effects SET url = ? WHERE id = 'a1/1/e0'", (f"{PROVIDER}/notify",)))
        writes = sim.state()["writes"]
        refused = _step(store, adapter, T0 + 30)
        assert (refused.instance, refused.action) == ("a1/1/e1", "refuse")
        assert sim.state()["writes"] == writes  # nothing more left
        assert _phases(store) == [("1/e0", "acknowledged", 0), ("1/e1", "prepared", 1)]  # (phase, quarantined)
        reason = _claims(store)["a1/1/e1"]
        assert "QUARANTINED" in reason and "nothing was ever sent" in reason, reason
        assert ("PW586", None, "effect call `a1/1/e0` disagrees with its evidence records on destination") in (
            _problems(store))  # fmt: skip


# -- approvals ------------------------------------------------------------------------------------


@contextmanager
def _four_eyes(backend: str, directory: Path) -> Iterator[Store]:
    """r1's `issue` granted by rita (refund_approver), then olga (risk_officer): rows ID and ID/2."""
    from tests.test_four_eyes import _grant, _park, _store

    stores = _store(backend, directory, False)
    with open_store(next(stores)) as store:
        request = _park(store)
        _grant(store, request, "rita")
        _grant(store, request, "olga")
        _verifies(store, "r1")
        yield store
    next(stores, None)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_deleted_second_approval_is_named(backend: str, tmp_path: Path) -> None:
    with _four_eyes(backend, tmp_path) as store:
        _tamper(store, ("DELETE FROM approvals WHERE agreement_id = 'r1' AND id LIKE ?", ("%/2",)))
        shown = [a["approver"] for a in evidence(store, "r1").doc["supports"]["approvals"]]
        assert shown == ["refund_approver:rita"]
        assert _problems(store, "r1") != []


APPROVAL_COLUMNS = [
    ("granted_at", "UPDATE approvals SET granted_at = 1 WHERE agreement_id = 'r1'", "granted_at", 1),
    ("transition", "UPDATE approvals SET transition = 'decline' WHERE agreement_id = 'r1'", "transition",
     "decline"),
    ("payload_digest", "UPDATE approvals SET payload_digest = 'sha256:00' WHERE agreement_id = 'r1'",
     "payload_digest", "sha256:00"),
]  # fmt: skip


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize(("what", "sql", "field", "value"), APPROVAL_COLUMNS, ids=[c[0] for c in APPROVAL_COLUMNS])
def test_an_edited_approval_column_the_evidence_prints_is_named(
    backend: str, what: str, sql: str, field: str, value: Any, tmp_path: Path
) -> None:
    with _four_eyes(backend, tmp_path) as store:
        _tamper(store, (sql, ()))
        assert [a[field] for a in evidence(store, "r1").doc["supports"]["approvals"]] == [value, value]
        assert _problems(store, "r1") != [], what


# -- the outbox -----------------------------------------------------------------------------------


@contextmanager
def _quarantined(backend: str, directory: Path) -> Iterator[Store]:
    """a1 funded; its delivery quarantined PW561 (the ledger holds `a1/1/0` under another program)."""
    from pactwright.runtime.ledger_db import open_ledger
    from pactwright.runtime.worker import Worker
    from tests.signed_bundles import PACT_ID
    from tests.test_evidence_tamper_attacks import PARTIES
    from tests.test_runtime_worker import OTHER_PROGRAM, environment

    with environment(backend, directory) as url, open_store(url) as store, open_ledger(None, url) as ledger:
        open_agreement(store, PACT_ID, {"price": "64.90"}, PARTIES, agreement_id="a1", clock=TestClock(T0))
        submit(store, "a1", "fund", "buyer", "alice", "fund", clock=TestClock(T0))
        ledger.apply("a1/1/0", OTHER_PROGRAM, {})
        assert [o.status for o in Worker(store, ledger, TestClock(T0 + 100)).drain()] == ["quarantined"]
        _verifies(store)
        yield store


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_quarantined_entry_set_back_to_pending_is_named(backend: str, tmp_path: Path) -> None:
    """Held: the chain's cross-check names it (a quarantine record the outbox no longer shows)."""
    with _quarantined(backend, tmp_path) as store:
        _tamper(store, ("UPDATE outbox SET status = 'pending', last_error = NULL WHERE reference = 'a1/1/0'", ()))
        assert _problems(store) == [("PW586", 2, "evidence record 2 says `a1/1/0` was quarantined, the outbox "
                                                     "does not")]  # fmt: skip


QUARANTINE_COLUMNS = [
    ("last_error", "UPDATE outbox SET last_error = 'PW560: the ledger booked 1.00' WHERE reference = 'a1/1/0'",
     lambda entry: entry["last_error"] == "PW560: the ledger booked 1.00"),
    ("delivered_postings",
     "UPDATE outbox SET delivered_postings = expected_postings WHERE reference = 'a1/1/0'",
     lambda entry: entry["matches"] is True),
]  # fmt: skip


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize(("what", "sql", "shown"), QUARANTINE_COLUMNS, ids=[c[0] for c in QUARANTINE_COLUMNS])
def test_an_edited_quarantine_is_named(backend: str, what: str, sql: str, shown: Callable[[dict[str, Any]], bool],
                                       tmp_path: Path) -> None:  # fmt: skip
    with _quarantined(backend, tmp_path) as store:
        _tamper(store, (sql, ()))
        assert shown(evidence(store, "a1").doc["supports"]["ledger"][0])
        assert _problems(store, "a1") != [], what


# -- the agreement row ------------------------------------------------------------------------


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_agreement_moved_to_another_activation_of_its_bundle_is_named(backend: str, tmp_path: Path) -> None:
    from pactwright.runtime.activation import FixedClock, activate_files
    from tests.signed_bundles import NOW, PACT_ID, default_trust, signed
    from tests.test_evidence_tamper_attacks import PARTIES
    from tests.test_runtime_worker import environment

    clock = FixedClock(datetime.fromisoformat(NOW))
    with environment(backend, tmp_path) as url, open_store(url) as store:
        open_agreement(store, PACT_ID, {"price": "64.90"}, PARTIES, agreement_id="a1", clock=TestClock(T0))
        activate_files(store, signed("1.1.0"), default_trust(), clock=clock)
        again = activate_files(store, signed("1.0.0"), default_trust(), clock=clock, force_reason="back to 1.0.0")
        _verifies(store)
        _tamper(store, ("UPDATE agreements SET activation_id = ? WHERE id = 'a1'", (again.activation_id,)))
        assert evidence(store, "a1").doc["supports"]["activation_id"] == again.activation_id == 3
        assert _problems(store, "a1") != []
