"""Attacks on derived compensations, the unified `after_phase`, the wider evidence replay and read snapshots.

Four claims, on both backends:

1. a compensation row `ID/c` is derived from the bundle and the call it
   undoes (runtime/_compensation.py `derive`) and re-derived by the effect
   worker before any byte leaves (effect_worker `_disagreement`, `_derived`):
   an inserted or edited row is refused unsent (PW644);
2. a compensation found applied by a lookup or an operator marks its call
   `compensated` (`after_phase`, replayed by `_after`); store migration 10
   repairs the rows older stores hold;
3. the replay compares each effect row's strategy, destination and payload
   hash, consumed approvals' bindings and grant rows, a quarantined outbox
   entry's reason and returned postings, and the `opened` record's
   activation;
4. a read transaction on PostgreSQL is one read-only snapshot.

Two ways to break them: a false alarm (a run nobody touched that no longer
verifies) and a row written by someone able to write the store that the
worker still acts on, or that verify still passes while the evidence states
something false. The first section holds what these attacks broke, now
fixed (the worker replays a row's records before acting on it,
runtime/_effect_replay.py); every test asserts the exact run.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from pactwright.runtime import TestClock, open_agreement, submit
from pactwright.runtime.evidence import evidence
from pactwright.runtime.store import Store, open_store
from tests.signed_bundles import BACKENDS
from tests.test_evidence_replay_attacks import (
    ACK,
    HEAD,
    PROVIDER,
    _claims,
    _compensation_due,
    _migrates_unchanged,
    _phases,
    _policy,
    _problems,
    _running,
    _settle,
    _step,
    _tamper,
    _verifies,
)
from tests.test_liveness_attacks import T0

C = "1/e0/c"


def _paths(sim: Any) -> list[str]:
    """The path of every write the provider performed, in order."""
    return [str(r["path"]) for r in sim.state()["records"]]


def _insert_derived(store: Store, original_id: str, instance: str) -> None:
    """A `prepared` row `instance` compensating `original_id`, field for field the one runtime/_compensation.py
    derives from the bundle and the call (the derivation is in the open): only its existence is forged."""
    from pactwright.runtime import _agreement as rows
    from pactwright.runtime._compensation import derive
    from pactwright.runtime.effect_worker import _current

    with store.transaction(exclusive=False) as db:
        original = _current(db, original_id)
        assert original is not None
        doc = rows.load_bundle(store, db, rows.read(db, original.agreement_id, lock=False), ()).doc
        made = derive(doc, original.agreement_id, original.id, original.effect, original.key, original.payload,
                      original.amount)  # fmt: skip
        assert made is not None
        db.execute(
            "INSERT INTO effects (id, agreement_id, event_seq, call_index, effect, strategy, compensates, phase, "
            "method, url, idempotency_key, payload, payload_digest, amount, attempts, next_at, created_at, "
            "updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, 'prepared', ?, ?, ?, ?, ?, ?, 0, ?, ?, ?)",
            (instance, original.agreement_id, original.event_seq, original.call_index, made.effect, made.strategy,
             original.id, made.method, made.url, made.idempotency_key, made.body.decode(), made.payload_digest,
             made.amount, T0, T0, T0),
        )  # fmt: skip


def _effect(name: str, strategy: str, extra: str = "", *, egress: bool = True) -> str:
    line = f'  egress POST "{PROVIDER}/{name}"\n' if egress else ""
    return (f"effect {name} {{\n  risk R2\n  reversibility reversible\n{line}  timeout 10s\n"
            f"  strategy {strategy}\n{extra}}}\n")  # fmt: skip


def _shaped(charge: str, undo: str, *, charge_egress: bool = True, undo_egress: bool = True,
            amount: bool = True) -> str:  # fmt: skip
    """tests/test_evidence_replay_attacks.py's `go` (charge, then notify) with `undo` always declared, either
    effect possibly without egress, and `charge` possibly carrying no amount."""
    charged = "  key price\n  amount price\n" if amount else "  key order_id\n"
    return (
        HEAD
        + _effect("charge", charge, charged, egress=charge_egress)
        + _effect("notify", "once", "  key order_id\n")
        + _effect("undo", undo, "  key order_id\n", egress=undo_egress)
        + "state placed initial\nstate done final\n"
        "transition go: placed -> done {\n  by buyer\n  call charge\n  call notify\n}\n"
    )


# == Bugs found, now fixed ========================================================================================

# -- a compensation of a call nobody gave up ---------------------------------------------------------

# How the row `a1/1/e0/c` comes to exist (and what state `charge` is in when it does).
UNWARRANTED = {
    "inserted for an acknowledged call": "acknowledged",
    "the acknowledged call set to compensation_required": "edited",
    "inserted for a call never sent": "prepared",
    "inserted for a call the provider refused": "failed",
}
# how -> the phases once the worker drained: the forged row (or the edited call) refused unsent, never sent
UNWARRANTED_PHASES = {
    "acknowledged": [("1/e0", "acknowledged", 0), (C, "prepared", 1), ("1/e1", "acknowledged", 0)],
    "edited": [("1/e0", "compensation_required", 1), ("1/e1", "acknowledged", 0)],
    "prepared": [("1/e0", "acknowledged", 0), (C, "prepared", 1), ("1/e1", "acknowledged", 0)],
    "failed": [("1/e0", "failed", 0), (C, "prepared", 1), ("1/e1", "cancelled", 0)],
}
UNWARRANTED_NAMED = {
    "acknowledged": "effect call `a1/1/e0/c` disagrees with its evidence records on effect, strategy, phase, "
    "destination, amount, idempotency_key, payload_digest",
    "edited": "effect call `a1/1/e0` disagrees with its evidence records on phase",
    "prepared": "effect call `a1/1/e0/c` disagrees with its evidence records on effect, strategy, phase, "
    "destination, amount, idempotency_key, payload_digest",
    "failed": "effect call `a1/1/e0/c` disagrees with its evidence records on effect, strategy, phase, "
    "destination, amount, idempotency_key, payload_digest",
}


def _unwarranted(store: Store, sim: Any, adapter: Any, how: str) -> None:
    """`a1/1/e0/c` made to exist without any call of `go` being given up, then the worker drained."""
    if how in ("acknowledged", "edited"):
        _settle(store, adapter, T0 + 20, rounds=1)
        assert _phases(store) == ACK
    elif how == "failed":
        sim.queue("error_5xx")  # `compensate` after a definite failure: it did not happen, nothing to undo
        _step(store, adapter, T0 + 20)
        assert _phases(store) == [("1/e0", "failed", 0), ("1/e1", "prepared", 0)]
    if how == "edited":
        _tamper(store, ("UPDATE effects SET phase = 'compensation_required' WHERE id = 'a1/1/e0'", ()))
    else:
        _insert_derived(store, "a1/1/e0", "a1/1/e0/c")
    _settle(store, adapter, T0 + 100, rounds=3)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("how", list(UNWARRANTED))
def test_a_compensation_of_a_call_nobody_gave_up_is_never_sent_and_is_named(
    backend: str, how: str, tmp_path: Path
) -> None:
    """The worker replays the call's records before it makes or sends a compensation: only a call the records
    put in `compensation_required` has one. The forged row (or the edited call) is refused unsent (PW644),
    and verify names it; the evidence never says the charge was undone."""
    with _running(_policy("compensate with undo"), tmp_path, backend) as (store, sim, adapter, _):
        _unwarranted(store, sim, adapter, UNWARRANTED[how])
        assert "/undo" not in _paths(sim), (_paths(sim), _phases(store))
        assert _phases(store) == UNWARRANTED_PHASES[UNWARRANTED[how]]
        assert "undone by its compensation" not in _claims(store)["a1/1/e0"]
        assert _problems(store) == [("PW586", None, UNWARRANTED_NAMED[UNWARRANTED[how]])]


# -- a second compensation row under another id -----------------------------------------------------


@contextmanager
def _second_compensation(backend: str, directory: Path) -> Iterator[tuple[Store, Any]]:
    """`charge` needs `undo` (retry); its first send refused 503, so `a1/1/e0/c` is `prepared` again; a row
    `a1/1/e0/d`, the same derivation, is inserted; the provider ignores idempotency keys (as a `once`
    provider may) and the worker drains."""
    with _running(_policy("compensate with undo", "retry"), directory, backend) as (store, sim, adapter, _):
        _compensation_due(store, sim, adapter)
        sim.queue("error_5xx")
        _step(store, adapter, T0 + 40)
        assert _phases(store)[1] == (C, "prepared", 0)
        sim.set_mode(ignore_keys=True)
        _insert_derived(store, "a1/1/e0", "a1/1/e0/d")
        _settle(store, adapter, T0 + 1000, rounds=3)
        yield store, sim


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_second_compensation_row_is_never_sent_and_is_named(backend: str, tmp_path: Path) -> None:
    """A call has one compensation, `ID/c`: `ID/d` has no record, so it is refused unsent; `ID/c` is sent
    once more (its retry) and undoes the charge."""
    with _second_compensation(backend, tmp_path) as (store, sim):
        assert _paths(sim) == ["/charge", "/undo"], _paths(sim)
        assert [p for p in _phases(store) if p[0].startswith("1/e0")] == [
            ("1/e0", "compensated", 0), (C, "acknowledged", 0), ("1/e0/d", "prepared", 1)]  # fmt: skip
        assert _problems(store) == [("PW586", None, "effect call `a1/1/e0/d` has no evidence record")]


# -- a `once` call never sent twice: the worker checks its row's strategy and phase ---------------

RESENT = {
    # name -> (the edit, the fault the first send meets)
    "strategy edited to retry": ("UPDATE effects SET strategy = 'retry' WHERE id = 'a1/1/e0'", "lost_response"),
    "phase set back to prepared": ("UPDATE effects SET phase = 'prepared' WHERE id = 'a1/1/e0'", None),
}
# name -> (the writes the provider performed, the phases, what verify names)
RESENT_EXPECTED = {
    "strategy edited to retry": ([], [("1/e0", "prepared", 1), ("1/e1", "prepared", 0)], "strategy"),
    "phase set back to prepared": (["/charge", "/notify"], [("1/e0", "prepared", 1), ("1/e1", "acknowledged", 0)],
                                   "phase"),
}  # fmt: skip


def _resent(store: Store, sim: Any, adapter: Any, name: str) -> None:
    """`charge` is `once` (sent at most once); the provider ignores keys, as the providers `once` is for may."""
    sql, fault = RESENT[name]
    sim.set_mode(ignore_keys=True)
    if fault is None:
        _settle(store, adapter, T0 + 20, rounds=1)
        assert _phases(store) == ACK
    _tamper(store, (sql, ()))
    if fault is not None:
        sim.queue(fault)
    _settle(store, adapter, T0 + 100)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", list(RESENT))
def test_a_once_call_is_never_sent_twice_and_the_edit_is_named(backend: str, name: str, tmp_path: Path) -> None:
    writes, phases, fields = RESENT_EXPECTED[name]
    with _running(_policy("once"), tmp_path, backend) as (store, sim, adapter, _):
        _resent(store, sim, adapter, name)
        assert _paths(sim) == writes
        assert _phases(store) == phases
        assert _problems(store) == [("PW586", None, f"effect call `a1/1/e0` disagrees with its evidence records on "
                                                    f"{fields}")]  # fmt: skip


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_dispatch_record_from_a_phase_the_worker_never_sends_from_is_named(backend: str, tmp_path: Path) -> None:
    """Defence in depth for the replay: a chain holding a dispatch of an acknowledged call (as a worker
    that trusted its row's phase would have written) does not verify, even with the row agreeing."""
    from pactwright.canonical import hash_bytes
    from pactwright.runtime import _agreement as rows

    with _running(_policy("once"), tmp_path, backend) as (store, _sim, adapter, _):
        _settle(store, adapter, T0 + 20, rounds=1)
        assert _phases(store) == ACK
        with store.transaction(exclusive=False) as db:
            row = db.query("SELECT method, url, idempotency_key, payload FROM effects WHERE id = 'a1/1/e0'")[0]
            digest = hash_bytes(str(row[3]).encode())
            rows.append_evidence(db, "a1", "effect_dispatched", {
                "instance": "a1/1/e0", "effect": "charge", "attempt": 2, "destination": f"{row[0]} {row[1]}",
                "idempotency_key": row[2], "payload_digest": digest, "at": T0 + 50})  # fmt: skip
            db.execute("UPDATE effects SET phase = 'dispatched' WHERE id = 'a1/1/e0'")
        assert _problems(store) == [("PW586", None, "effect call `a1/1/e0` disagrees with its evidence records on "
                                                    "phase")]  # fmt: skip


# -- the outbox: a delivered entry's last_error -----------------------------------------------


@contextmanager
def _marketplace(backend: str, directory: Path, ledger: Any = None) -> Iterator[tuple[Store, Any]]:
    """The marketplace bundle active, a1 funded (64.90 EUR into escrow); `ledger` (default: the store's own
    durable ledger) is the one the outbox worker delivers to."""
    from pactwright.runtime.ledger_db import open_ledger
    from tests.signed_bundles import PACT_ID
    from tests.test_evidence_tamper_attacks import PARTIES
    from tests.test_runtime_worker import environment

    with environment(backend, directory) as url, open_store(url) as store, open_ledger(None, url) as durable:
        open_agreement(store, PACT_ID, {"price": "64.90"}, PARTIES, agreement_id="a1", clock=TestClock(T0))
        submit(store, "a1", "fund", "buyer", "alice", "fund", clock=TestClock(T0))
        yield store, durable if ledger is None else ledger


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_edited_last_error_of_a_delivered_entry_is_named(backend: str, tmp_path: Path) -> None:
    from pactwright.runtime.worker import Worker

    with _marketplace(backend, tmp_path) as (store, ledger):
        assert [o.status for o in Worker(store, ledger, TestClock(T0 + 100)).drain()] == ["delivered"]
        _verifies(store)
        _tamper(store, ("UPDATE outbox SET last_error = 'PW560: the ledger booked 1.00' WHERE reference = 'a1/1/0'",
                        ()))  # fmt: skip
        assert evidence(store, "a1").doc["supports"]["ledger"][0]["last_error"] == "PW560: the ledger booked 1.00"
        assert _problems(store) == [("PW586", None, "outbox entry `a1/1/0` is delivered with an error the delivery "
                                                    "cleared")]  # fmt: skip


# == Attacks that held ============================================================================

# -- edited or inserted compensations are refused unsent -------------------------------------------

EDITED_ORIGINAL = [
    ("idempotency_key", "UPDATE effects SET idempotency_key = 'pw-other' WHERE id = 'a1/1/e0'"),
    ("payload", "UPDATE effects SET payload = '{}', payload_digest = 'sha256:" + "0" * 64 + "' WHERE id = 'a1/1/e0'"),
    ("payload keeping its digest", "UPDATE effects SET payload = '{}' WHERE id = 'a1/1/e0'"),
    ("effect", "UPDATE effects SET effect = 'notify' WHERE id = 'a1/1/e0'"),
]  # fmt: skip


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize(("what", "sql"), EDITED_ORIGINAL, ids=[e[0] for e in EDITED_ORIGINAL])
def test_an_edited_original_gets_no_compensation_sent(backend: str, what: str, sql: str, tmp_path: Path) -> None:
    """The call to undo needs `undo`; its row is edited so that the derived compensation would differ (another
    key or body) or not exist (an effect declaring none): nothing more is sent, and verify names the edit."""
    with _running(_policy("compensate with undo"), tmp_path, backend) as (store, sim, adapter, _):
        _compensation_due(store, sim, adapter)
        _tamper(store, (sql, ()))
        _settle(store, adapter, T0 + 100)
        assert _paths(sim) == ["/charge"]
        refused = [p for p in _phases(store) if p[2] == 1]
        assert refused == [("1/e0", "compensation_required", 1)]  # checked before its compensation is made
        named = [m for _, _, m in _problems(store)]
        assert any(m.startswith("effect call `a1/1/e0` disagrees") for m in named), named


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_strategy_edited_to_compensate_gets_no_compensation_sent(backend: str, tmp_path: Path) -> None:
    """`charge` is `once` though `undo` is declared; its row's strategy is edited to `compensate` (so that an
    abandoned `notify` would make it `compensation_required`): the strategy is not the one its records give,
    so the call is quarantined unsent (PW644) at its first send, and verify names the strategy."""
    with _running(_shaped("once", "idempotent"), tmp_path, backend) as (store, sim, adapter, _):
        _tamper(store, ("UPDATE effects SET strategy = 'compensate' WHERE id = 'a1/1/e0'", ()))
        _step(store, adapter, T0 + 20)
        sim.queue("lost_request")
        _settle(store, adapter, T0 + 30)
        assert _paths(sim) == []
        assert _phases(store) == [("1/e0", "prepared", 1), ("1/e1", "prepared", 0)]
        assert _problems(store) == [("PW586", None, "effect call `a1/1/e0` disagrees with its evidence records on "
                                                    "strategy")]  # fmt: skip


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_compensation_of_a_call_that_declares_none_is_refused(backend: str, tmp_path: Path) -> None:
    """`a1/1/e1/c` undoing `notify` (which declares no compensation), its body and key made by the same formula
    for `undo`, inserted after `notify` was abandoned: refused unsent, named."""
    from pactwright.canonical import hash_bytes
    from pactwright.runtime.effect_worker import _compensation_body, _current

    with _running(_policy("compensate with undo"), tmp_path, backend) as (store, sim, adapter, _):
        _compensation_due(store, sim, adapter)
        with store.transaction(exclusive=False) as db:
            notify = _current(db, "a1/1/e1")
            assert notify is not None
            body, key = _compensation_body(notify, "undo")
            db.execute(
                "INSERT INTO effects (id, agreement_id, event_seq, call_index, effect, strategy, compensates, phase, "
                "method, url, idempotency_key, payload, payload_digest, amount, attempts, next_at, created_at, "
                "updated_at) VALUES ('a1/1/e1/c', 'a1', 1, 1, 'undo', 'idempotent', 'a1/1/e1', 'prepared', 'POST', "
                "?, ?, ?, ?, NULL, 0, ?, ?, ?)",
                (f"{PROVIDER}/undo", key, body.decode(), hash_bytes(body), T0, T0, T0),
            )  # fmt: skip
        _step(store, adapter, T0 + 40)
        assert ("1/e1/c", "prepared", 1) in _phases(store)
        _settle(store, adapter, T0 + 100)
        assert _paths(sim) == ["/charge", "/undo"]  # the one `a1/1/e0/c`
        assert [p for p in _phases(store) if p[0].startswith("1/e0")] == [("1/e0", "compensated", 0),
                                                                          (C, "acknowledged", 0)]  # fmt: skip
        assert _problems(store) == [("PW586", None, "effect call `a1/1/e1/c` disagrees with its evidence records on "
                                                    "effect, strategy, phase, destination, idempotency_key, "
                                                    "payload_digest")]  # fmt: skip


EDITED_COMPENSATION = [
    ("effect", "effect = 'charge'"),
    ("strategy", "strategy = 'once'"),
    ("url", f"url = '{PROVIDER}/charge'"),
    ("method", "method = 'PUT'"),
    ("idempotency_key", "idempotency_key = 'pw-0000000000000000000000000000000000000000'"),
    ("body", "payload = '{\"amount\":\"99999\"}'"),
    ("amount", "amount = '99999'"),
]  # fmt: skip


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize(("field", "assignment"), EDITED_COMPENSATION, ids=[e[0] for e in EDITED_COMPENSATION])
def test_an_edited_compensation_is_refused_unsent(backend: str, field: str, assignment: str, tmp_path: Path) -> None:
    """`undo` (retry) refused 503 once, so `a1/1/e0/c` waits `prepared`; one field of it is edited: the next
    claim refuses it unsent (PW644) and nothing but the first `charge` was ever written."""
    with _running(_policy("compensate with undo", "retry"), tmp_path, backend) as (store, sim, adapter, _):
        _compensation_due(store, sim, adapter)
        sim.queue("error_5xx")
        _step(store, adapter, T0 + 40)
        _tamper(store, (f"UPDATE effects SET {assignment} WHERE id = 'a1/1/e0/c'", ()))  # noqa: S608
        refused = _step(store, adapter, T0 + 2000)
        assert (refused.instance, refused.action) == ("a1/1/e0/c", "refuse"), refused
        _settle(store, adapter, T0 + 3000)
        assert _paths(sim) == ["/charge"]
        assert _phases(store)[:2] == [("1/e0", "compensation_required", 0), (C, "prepared", 1)]
        assert _problems(store) != [], field


# -- every undo strategy under every fault verifies --------------------------------------------------

UNDO_FAULTS = ((), ("lost_request",), ("lost_response",), ("error_5xx",), ("wrong_amount",),
               ("lost_response", "lookup_unknown"), ("error_5xx", "error_5xx"))  # fmt: skip
_A, _R, _L, _F, _Q = ("acknowledged", 0), ("reconciled_recovered", 0), ("abandoned_uncertain", 0), ("failed", 0), \
    ("uncertain", 1)  # fmt: skip
# undo's strategy -> the compensation's final (phase, quarantined) after each fault of UNDO_FAULTS
UNDO_EXPECTED = {
    "once": [_A, _L, _L, _F, _Q, _L, _F],
    "retry": [_A, _A, _A, _A, _Q, _A, _A],
    "idempotent": [_A, _A, _A, _A, _Q, _A, _A],
    "reconcilable": [_A, _A, _R, _A, _Q, _R, _A],
    "compensate with notify": [_A, _L, _L, _F, _Q, _L, _F],  # a compensation is never compensated: as `once`
}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("undo", list(UNDO_EXPECTED))
@pytest.mark.parametrize("k", range(len(UNDO_FAULTS)), ids=["+".join(f) or "none" for f in UNDO_FAULTS])
def test_each_undo_strategy_under_each_fault_verifies(backend: str, undo: str, k: int, tmp_path: Path) -> None:
    with _running(_policy("compensate with undo", undo), tmp_path, backend) as (store, sim, adapter, _):
        _compensation_due(store, sim, adapter)
        sim.queue(*UNDO_FAULTS[k])
        _settle(store, adapter, T0 + 100, rounds=6)
        phase, quarantined = UNDO_EXPECTED[undo][k]
        undone = phase in ("acknowledged", "reconciled_recovered")
        assert _phases(store) == [("1/e0", "compensated" if undone else "compensation_required", 0),
                                  (C, phase, quarantined), ("1/e1", "abandoned_uncertain", 0)]  # fmt: skip
        assert _paths(sim).count("/undo") <= 1
        _verifies(store)


# -- compensations and calls of other shapes ------------------------------------------------------

SHAPES = {
    # name -> (policy, the phases once settled, the writes the provider performed)
    "a compensation with no egress (refused PW620, retried)": (
        _shaped("compensate with undo", "retry", undo_egress=False),
        [("1/e0", "compensation_required", 0), (C, "prepared", 0), ("1/e1", "abandoned_uncertain", 0)],
        ["/charge"]),
    "a call with no egress": (
        _shaped("compensate with undo", "retry", charge_egress=False),
        [("1/e0", "failed", 0), ("1/e1", "cancelled", 0)], []),
    "a compensation of a call carrying no amount": (
        _shaped("compensate with undo", "idempotent", amount=False),
        [("1/e0", "compensated", 0), (C, "acknowledged", 0), ("1/e1", "abandoned_uncertain", 0)],
        ["/charge", "/undo"]),
    "an effect declared and never called": (
        _shaped("once", "idempotent"), [("1/e0", "acknowledged", 0), ("1/e1", "abandoned_uncertain", 0)],
        ["/charge"]),
}  # fmt: skip


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", list(SHAPES))
def test_calls_and_compensations_of_other_shapes_verify(backend: str, name: str, tmp_path: Path) -> None:
    """`charge` first, then `notify`'s request lost (`once` abandons it), settled past every back-off."""
    policy, phases, writes = SHAPES[name]
    with _running(policy, tmp_path, backend) as (store, sim, adapter, _):
        _step(store, adapter, T0 + 20)
        sim.queue("lost_request")
        _settle(store, adapter, T0 + 30)
        assert _phases(store) == phases
        assert _paths(sim) == writes
        _verifies(store)


# -- four eyes: an edited approver -----------------------------------------------------------------


@pytest.mark.parametrize("backend", BACKENDS)
def test_four_eyes_rows_with_their_roles_swapped_are_named(backend: str, tmp_path: Path) -> None:
    """Each party may appear once per event (a unique index), so a duplicated approver cannot be forged;
    swapping the two rows' roles names two grants no record shows."""
    from tests.test_evidence_replay_attacks import _four_eyes

    with _four_eyes(backend, tmp_path) as store:
        _tamper(store, ("UPDATE approvals SET approver_role = CASE approver_role WHEN 'risk_officer' THEN "
                        "'refund_approver' ELSE 'risk_officer' END WHERE agreement_id = 'r1'", ()))  # fmt: skip
        shown = sorted(a["approver"] for a in evidence(store, "r1").doc["supports"]["approvals"])
        assert shown == ["refund_approver:olga", "risk_officer:rita"]
        named = [m for _, _, m in _problems(store, "r1")]
        assert len(named) == 2 and all("whom no evidence record shows granting it" in m for m in named), named


# -- the outbox: every way an entry is quarantined --------------------------------------------------


class _Answering:
    """A ledger answering each `apply` with the next of `answers`: a value returned, or an exception raised."""

    def __init__(self, *answers: Any) -> None:
        self.answers = list(answers)

    def apply(self, reference: str, program_text: str, variables: dict[str, str]) -> Any:
        answer = self.answers.pop(0)
        if isinstance(answer, BaseException):
            raise answer
        return answer


def _posting(amount: int) -> Any:
    from pactwright.runtime.numscript import Posting

    return Posting("world", "escrow:a1", amount, "EUR/2")


_BOOKED = {"amount": "6491", "asset": "EUR/2", "destination_address": "escrow:a1", "source_address": "world"}
QUARANTINES = {
    # name -> (the ledger's answers, one per delivery attempt; the entry's last_error; its delivered_postings)
    "postings differ (PW560)": (
        (lambda: [_posting(6491)],),
        "PW560: posting 0: `amount` is `6491` in the ledger, `6490` expected at commit", [_BOOKED]),
    "no postings returned (PW560)": ((lambda: None,), "PW560: the ledger returned no postings for the reference", None),
    "not a list (PW560)": ((lambda: "booked",), "PW560: the ledger returned `str`, not a list of postings",
                           ["not a list: str"]),
    "a malformed posting (PW560)": ((lambda: [{"amount": 1}],), "PW560: ledger posting 0 is malformed",
                                    ["malformed: {'amount': 1}"]),
    "refused (PW561)": ((lambda: _refused("PW757"),), "PW561: the ledger refused it: [PW757] held elsewhere", None),
    "unreachable, then refused": ((lambda: _refused("PW550"), lambda: _refused("PW757")),
                                  "PW561: the ledger refused it: [PW757] held elsewhere", None),
    "a transport failure, then postings differ": (
        (lambda: RuntimeError("connection reset"), lambda: [_posting(6491)]),
        "PW560: posting 0: `amount` is `6491` in the ledger, `6490` expected at commit", [_BOOKED]),
}  # fmt: skip


def _refused(code: str) -> BaseException:
    from pactwright.errors import LedgerError

    return LedgerError("held elsewhere", code=code)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", list(QUARANTINES))
def test_every_kind_of_outbox_quarantine_verifies(backend: str, name: str, tmp_path: Path) -> None:
    """The entry's last_error and delivered_postings are exactly its quarantine record's, whatever came before
    (a back-off's error is overwritten); and an edited reason is named."""
    from pactwright.runtime.worker import Worker

    answers, error, returned = QUARANTINES[name]
    ledger = _Answering(*(make() for make in answers))
    with _marketplace(backend, tmp_path, ledger) as (store, ledger):
        statuses = [o.status for at in (100, 2000) for o in Worker(store, ledger, TestClock(T0 + at)).drain()]
        assert statuses == ["retry"] * (len(answers) - 1) + ["quarantined"]
        entry = evidence(store, "a1").doc["supports"]["ledger"][0]
        assert (entry["status"], entry["last_error"], entry["delivered_postings"]) == ("quarantined", error, returned)
        _verifies(store)
        _tamper(store, ("UPDATE outbox SET last_error = 'PW561: the ledger refused it' WHERE reference = 'a1/1/0'",
                        ()))  # fmt: skip
        assert [m for _, _, m in _problems(store)] == ["outbox entry `a1/1/0` disagrees with evidence record 2 on "
                                                      "last_error"]  # fmt: skip


# -- agreements opened on several activations --------------------------------------------------------


@pytest.mark.parametrize("backend", BACKENDS)
def test_agreements_opened_before_and_after_activation_changes_verify(backend: str, tmp_path: Path) -> None:
    """a1 on 1.0.0 (activation 1), a2 on 1.1.0 (2), a3 on 1.0.0 activated again (3, the same bundle bytes as
    1): each verifies; moving a3 to activation 1, which holds the very same manifest, is named."""
    from pactwright.runtime.activation import FixedClock, activate_files
    from tests.signed_bundles import NOW, PACT_ID, default_trust, signed
    from tests.test_evidence_tamper_attacks import PARTIES
    from tests.test_runtime_worker import environment

    clock = FixedClock(datetime.fromisoformat(NOW))
    with environment(backend, tmp_path) as url, open_store(url) as store:
        open_agreement(store, PACT_ID, {"price": "64.90"}, PARTIES, agreement_id="a1", clock=TestClock(T0))
        activate_files(store, signed("1.1.0"), default_trust(), clock=clock)
        open_agreement(store, PACT_ID, {"price": "64.90"}, PARTIES, agreement_id="a2", clock=TestClock(T0))
        again = activate_files(store, signed("1.0.0"), default_trust(), clock=clock, force_reason="back to 1.0.0")
        open_agreement(store, PACT_ID, {"price": "64.90"}, PARTIES, agreement_id="a3", clock=TestClock(T0))
        for agreement in ("a1", "a2", "a3"):
            submit(store, agreement, "fund", "buyer", "alice", "fund", clock=TestClock(T0 + 10))
        shown = [evidence(store, a).doc["supports"]["activation_id"] for a in ("a1", "a2", "a3")]
        for agreement in ("a1", "a2", "a3"):
            _verifies(store, agreement)
        _tamper(store, ("UPDATE agreements SET activation_id = 1 WHERE id = 'a3'", ()))
        named = _problems(store, "a3")
    assert shown == [1, 2, 3] and again.activation_id == 3
    assert named == [("PW586", 0, "the `opened` record 0 disagrees with agreement `a3` as stored")]


# -- store migration 10 leaves every compensation not yet good -------------------------------------

LEFT_ALONE = {
    # name -> (undo's strategy, the faults undo's first send meets, steps after the compensation is due,
    #          the compensation's phase and quarantine)
    "sent, its answer lost, parked": ("reconcilable", ("lost_response", "lookup_unknown"), 2,
                                      ("needs_reconciliation", 0)),
    "found not to have happened, to be sent again": ("reconcilable", ("lost_request",), 2,
                                                     ("reconciled_not_occurred", 0)),
    "quarantined": ("idempotent", ("wrong_amount",), 1, ("uncertain", 1)),
    "refused, to be sent again": ("retry", ("error_5xx",), 1, ("prepared", 0)),
    "abandoned": ("once", ("lost_request",), 1, ("abandoned_uncertain", 0)),
}  # fmt: skip


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", list(LEFT_ALONE))
def test_migration_10_leaves_a_call_whose_compensation_is_not_good(backend: str, name: str, tmp_path: Path) -> None:
    undo, faults, steps, compensation = LEFT_ALONE[name]
    with _running(_policy("compensate with undo", undo), tmp_path, backend) as (store, sim, adapter, url):
        _compensation_due(store, sim, adapter)
        sim.queue(*faults)
        for n in range(steps):
            _step(store, adapter, T0 + 40 + n * 1000)
        phases = _phases(store)
        assert phases == [("1/e0", "compensation_required", 0), (C, *compensation), ("1/e1", "abandoned_uncertain", 0)]
        _migrates_unchanged(store, url, 10)


# -- PostgreSQL: a read transaction is one read-only snapshot ----------------------------------------


def test_a_write_in_a_read_transaction_is_refused_on_postgresql(tmp_path: Path) -> None:
    """READ ONLY is enforced by the server: a read path that wrote would fail there, never silently."""
    from pactwright.errors import StoreError

    with _running(_policy("once"), tmp_path, "postgresql") as (store, _, _, _):
        with pytest.raises(StoreError) as refused, store.transaction(write=False) as db:
            db.execute("UPDATE effects SET phase = 'acknowledged' WHERE id = 'a1/1/e0'")
        assert refused.value.code == "PW709" and "read-only transaction" in refused.value.message
        assert _phases(store) == [("1/e0", "prepared", 0), ("1/e1", "prepared", 0)]


def test_every_read_path_reads_past_an_open_writer_on_postgresql(tmp_path: Path) -> None:
    """Another connection holds the agreement's row lock with an operator-like change not committed: every
    read path answers at once from the committed snapshot (verify finds nothing), none blocks or fails."""
    import psycopg

    from pactwright.runtime import approvals, show
    from pactwright.runtime.agreements import check_open
    from pactwright.runtime.effect_ops import list_effects
    from pactwright.runtime.outbox import list_entries
    from pactwright.runtime.scheduler import scan
    from tests.test_evidence_replay_attacks import PARAMS

    with _running(_policy("compensate with undo"), tmp_path, "postgresql") as (first, sim, adapter, url):
        _compensation_due(first, sim, adapter)
        # A read that waited on the writer's locks would fail after 5 s instead of hanging the test.
        with psycopg.connect(url) as writer, open_store(url + "%20-clock_timeout%3D5000") as store:
            writer.execute("SET lock_timeout = '5s'")
            writer.execute("SELECT id FROM agreements WHERE id = 'a1' FOR UPDATE")
            writer.execute("UPDATE effects SET phase = 'compensated' WHERE id = 'a1/1/e0'")
            answers = {
                "verify": _problems(store),
                "claims": _claims(store)["a1/1/e0"],
                "show": show(store, "a1").agreement.version,
                "effects": [r.phase for r in list_effects(store, agreement_id="a1")],
                "requests": approvals.list_requests(store, agreement_id="a1"),
                "outbox": list_entries(store, agreement_id="a1"),
                "open": check_open(store, "att.replay", {**PARAMS, "order_id": "ORD-2"}, {"buyer": "bea"}, "a2"),
                "scan": scan(store, TestClock(T0 + 50)).to_json()["committed"],
                "store": store.verify_all(),
            }
            writer.rollback()
    assert answers == {
        "verify": [], "claims": "a 10.00 EUR `charge` call was committed by `go` and acknowledged, and to be undone "
        "by its compensation (provider ref sim_1)", "show": 1,
        "effects": ["compensation_required", "abandoned_uncertain"], "requests": [], "outbox": [], "open": None,
        "scan": [], "store": [],
    }  # fmt: skip
