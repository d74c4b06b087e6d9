"""What the two-process scheduler and renewal races share: the two policies, their stores, the race
runner and the readers of the store (tests/test_races_scheduler.py, tests/test_races_renewal.py)."""

from __future__ import annotations

import contextlib
import json
import multiprocessing
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from pactwright.errors import PactwrightError
from pactwright.runtime import TestClock, approvals, open_agreement, submit
from pactwright.runtime.activation import FixedClock, activate_files
from pactwright.runtime.parties import add_party
from pactwright.runtime.store import Store, open_store
from pactwright.signing import raw_public_key, sign_statement
from tests import signed_bundles as sb
from tests._races_scheduler_renewal_child import Action, race

T0 = 1780315200  # 2026-06-01T12:00:00Z
HOUR, DAY = 3_600, 86_400
TTL = approvals.APPROVAL_TTL_S
MANAGER = Ed25519PrivateKey.generate()

PARK = """\
pact "race.park_then_expire" version "1.0.0"
currency EUR scale 2
role buyer
role seller
role manager
clock timer
param price: money between 1.00 and 10000.00
account world "world" external
account escrow "escrow:{agreement}"
account seller "sellers:{seller}:payable"
account buyer "buyers:{buyer}:refunds"
state placed initial
state funded
state paid final
state refunded final
transition fund: placed -> funded {
  by buyer
  stamp funded_at
  transfer price from world to escrow
}
transition escalate: funded -> paid {
  by timer
  when now >= funded_at + 1d
  approval by manager
  transfer price from escrow to seller
}
transition expire: funded -> refunded {
  by timer
  when now >= funded_at + 2d
  transfer price from escrow to buyer
}
invariant escrow_never_negative: balance(escrow) >= 0
invariant settles_once: applied(escalate) + applied(expire) <= 1
invariant escrow_empty_when_final: final implies balance(escrow) == 0
property funded_ends: reached(funded) leads_to final
"""
PARK_ID = "race.park_then_expire"
PARK_PARTIES = {"buyer": "bea", "seller": "sid", "manager": "max"}
PRICE = 2_500  # 25.00 EUR in minor units
ESCALATE_KEY = f"sched/escalate/{T0 + DAY}"  # funded at T0: the deadline `funded_at + 1d`
EXPIRE_KEY = f"sched/expire/{T0 + 2 * DAY}"

TICK = """\
pact "race.tick_fee" version "1.0.0"
currency EUR scale 2
role buyer
clock timer
param price: money between 10.00 and 10000.00
param fee: money between 1.00 and 2.00
account world "world" external
account escrow "escrow:{agreement}"
account platform "platform:fees"
account buyer "buyers:{buyer}:refunds"
state placed initial
state waiting
state done final
transition open: placed -> waiting {
  by buyer
  stamp opened_at
  transfer price from world to escrow
}
transition remind: waiting -> waiting {
  by timer
  when now >= opened_at + 1d and fired(remind) < 2
  transfer fee from escrow to platform
}
transition close: waiting -> done {
  by timer
  when fired(remind) == 2
  transfer price - fee - fee from escrow to buyer
}
invariant escrow_never_negative: balance(escrow) >= 0
invariant escrow_empty_when_final: final implies balance(escrow) == 0
property opened_closes: reached(waiting) leads_to final
"""
TICK_ID = "race.tick_fee"


# -- stores, processes, reading the store back ------------------------------------------------------


@contextlib.contextmanager
def _active(backend: str, directory: Path, source: str) -> Iterator[str]:
    """A fresh store (SQLite file or PostgreSQL schema) running `source` as `build` verified it."""
    bundle, verdict = sb.compile_verified(source.encode(), "race.pact")
    assert verdict == "pass"
    with sb.temporary_store(backend, directory) as url:
        with open_store(url) as store:
            activate_files(store, sb.sign(bundle), sb.default_trust(), clock=FixedClock(datetime.fromisoformat(sb.NOW)))
            add_party(store, "max", "manager", raw_public_key(MANAGER.public_key()), T0)
        yield url


def _race(url: str, first: list[Action], second: list[Action]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Run two racer processes (spawned, separate connections), round by round at a barrier; their outcomes."""
    assert len(first) == len(second)
    ctx = multiprocessing.get_context("spawn")
    barrier, out = ctx.Barrier(2), ctx.Queue()
    procs = [ctx.Process(target=race, args=(url, side, actions, barrier, out))
             for side, actions in enumerate((first, second))]  # fmt: skip
    for proc in procs:
        proc.start()
    try:
        results = dict(out.get(timeout=120) for _ in procs)
    finally:
        for proc in procs:
            proc.join(timeout=60)
    assert [proc.exitcode for proc in procs] == [0, 0]
    return results[0], results[1]


def _query(store: Store, sql: str, params: tuple[Any, ...]) -> list[tuple[Any, ...]]:
    with store.transaction(write=False) as db:
        return [tuple(row) for row in db.query(sql, params)]


def _events(store: Store, agreement_id: str) -> list[tuple[int, str, str]]:
    found = _query(store, "SELECT seq, transition, idempotency_key FROM events WHERE agreement_id = ? ORDER BY seq",
                   (agreement_id,))  # fmt: skip
    return [(int(seq), str(t), str(k)) for seq, t, k in found]


def _outbox(store: Store, agreement_id: str) -> list[int]:
    found = _query(store, "SELECT event_seq FROM outbox WHERE agreement_id = ? ORDER BY event_seq", (agreement_id,))
    return [int(r[0]) for r in found]


def _requests(store: Store, agreement_id: str) -> list[dict[str, Any]]:
    return [r.to_json() for r in approvals.list_requests(store, agreement_id=agreement_id)]


def _records(store: Store, agreement_id: str, kind: str) -> list[dict[str, Any]]:
    found = _query(store, "SELECT record FROM evidence WHERE agreement_id = ? AND kind = ? ORDER BY seq",
                   (agreement_id, kind))  # fmt: skip
    return [json.loads(bytes(r[0]).decode() if isinstance(r[0], bytes | memoryview) else str(r[0])) for r in found]


def _requested(store: Store, agreement_id: str) -> list[tuple[str, str | None]]:
    """(request id, the id it renews) per `approval_requested` record, in chain order."""
    return [(r["approval"], r.get("renews")) for r in _records(store, agreement_id, "approval_requested")]


def _proof(request: dict[str, Any], signer: Ed25519PrivateKey = MANAGER) -> str:
    return sign_statement(signer, approvals.decision_statement(request["id"], request["preview_digest"], "grant"))


def _code(call: Any) -> str:
    with pytest.raises(PactwrightError) as caught:
        call()
    return caught.value.code


def _funded(store: Store, agreement_id: str) -> None:
    open_agreement(store, PARK_ID, {"price": "25.00"}, PARK_PARTIES, agreement_id=agreement_id, clock=TestClock(T0))
    submit(store, agreement_id, "fund", "buyer", "bea", "fund", clock=TestClock(T0))


def _park(store: Store, agreement_id: str, at: int, key: str = ESCALATE_KEY) -> dict[str, Any]:
    """`escalate` submitted as the scheduler submits it (the timer, this key): the request it is parked as."""
    parked = submit(store, agreement_id, "escalate", "timer", "timer", key, clock=TestClock(at))
    assert parked.status == "waiting_for_approval" and parked.approval is not None
    return parked.approval


def _resubmit(agreement_id: str, at: int) -> Action:
    return ("submit", {"agreement": agreement_id, "transition": "escalate", "role": "timer", "party": "timer",
                       "key": ESCALATE_KEY, "at": at})  # fmt: skip


def _grant(request: dict[str, Any], at: int, party: str = "max", proof: str | None = None) -> Action:
    return ("grant", {"request": request["id"], "party": party, "proof": proof or _proof(request), "at": at})


def _print(line: str, capsys: pytest.CaptureFixture[str]) -> None:
    with capsys.disabled():
        print(f"\n{line}")
