"""Two-process races on the scheduler's deadline scan and on the renewal of expired approval requests.

Every race here is between two spawned interpreters
(tests/_races_scheduler_renewal_child.py), each with its own store
connection, that meet at a barrier before each round and then act on the
same agreement at the same test-clock instant; on SQLite and on PostgreSQL.

The scheduler (runtime/scheduler.py, docs/runtime.md "The scheduler") tries
each enabled deadline transition in transitions.json order until one
commits: a transition that needs an approval parks (PW513) and the next is
tried; the Nth firing (N >= 2) of a transition at one deadline is keyed
`sched/T/DEADLINE/N`. Claims attacked: one commit per agreement and
version, no double settlement (store events, outbox rows and balances), one
approval request per (transition, key), and keys as documented, with two
schedulers at once:

- at an instant where `escalate` (approval by manager) and `expire` are both
  due, with the escalation not yet parked or parked and already expired (so
  both schedulers also race to renew it), per agreement through the Python
  API and over a whole store through `pactwright scheduler --once`;
- the same instant, the manager granting the parked `escalate` against one
  scheduler firing `expire`;
- with a reminder that fires twice at one deadline and then `close`.

Every attack held: each test asserts the exact store outcome for every
interleaving the claim allows, and prints how often each one occurred.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from pactwright.runtime import TestClock, open_agreement, show, submit, verify_evidence
from pactwright.runtime.scheduler import scan
from pactwright.runtime.store import Store, open_store
from tests import signed_bundles as sb
from tests._races_common import (
    DAY,
    ESCALATE_KEY,
    EXPIRE_KEY,
    PARK,
    PRICE,
    T0,
    TICK,
    TICK_ID,
    TTL,
    _active,
    _events,
    _funded,
    _grant,
    _outbox,
    _park,
    _print,
    _race,
    _requested,
    _requests,
)
from tests._races_scheduler_renewal_child import Action

# -- 1. the scheduler: a deadline parked for approval, another due at the same instant ----------------

RACED = 16  # agreements raced one by one through the Python API
SCANNED = 8  # agreements raced by two whole-store `scheduler --once` runs
BOTH_DUE = T0 + 2 * DAY + 5  # `escalate` and `expire` are both enabled
PRE_PARKED = T0 + DAY + 5  # where the odd agreements were parked: expired (TTL) by BOTH_DUE


def _scan_kind(agreement_id: str, scanned: dict[str, Any], backend: str) -> str:
    """What one scheduler's scan of one agreement did, by the only shapes the claim allows.

    `late`: the scan found the agreement final and planned nothing. On SQLite
    its read transaction is one snapshot, so the agreement is not even a
    candidate (`scanned` 0); on PostgreSQL (READ COMMITTED) the candidate query
    may still see it `funded` and the row read a moment later `refunded`
    (`scanned` 1), which is harmless: nothing is planned from a final state.
    """
    assert scanned["failures"] == [] and scanned["at"] == BOTH_DUE
    for due in scanned["due"]:
        assert (due["agreement"], due["expect_version"], due["actor"]) == (agreement_id, 1, "timer:timer")
        assert due["key"] == {"escalate": ESCALATE_KEY, "expire": EXPIRE_KEY}[due["transition"]]
    shape = ([d["transition"] for d in scanned["due"]], scanned["committed"], scanned["replayed"], scanned["refused"])
    kinds = {
        "committed": (["escalate", "expire"], [f"{agreement_id}/2"], 0, {"PW513": 1}),
        "replayed": (["escalate", "expire"], [], 1, {"PW513": 1}),
        "stale": (["escalate"], [], 0, {"PW509": 1}),
        "late": ([], [], 0, {}),
    }
    found = [kind for kind, expected in kinds.items() if shape == expected]
    assert len(found) == 1, (agreement_id, scanned)
    if found == ["late"]:
        assert scanned["scanned"] in ((0,) if backend == "sqlite" else (0, 1)), scanned
        return "late" if scanned["scanned"] == 0 else "late, read final"
    return found[0]


def _settled_once_by_expire(store: Store, agreement_id: str, pre_parked: dict[str, Any] | None) -> None:
    """`expire` committed once, `escalate` never, one pending request for its key (renewed once if expired)."""
    assert _events(store, agreement_id) == [(1, "fund", "fund"), (2, "expire", EXPIRE_KEY)]
    assert _outbox(store, agreement_id) == [1, 2]
    balances = show(store, agreement_id).agreement.balances
    assert (balances["escrow"], balances["buyer"], balances["seller"]) == (0, PRICE, 0)
    (request,) = _requests(store, agreement_id)
    assert (request["transition"], request["idempotency_key"], request["status"]) == ("escalate", ESCALATE_KEY,
                                                                                     "pending")  # fmt: skip
    assert (request["created_at"], request["expires_at"], request["expect_version"]) == (BOTH_DUE, BOTH_DUE + TTL, 1)
    assert request["grants"] == [] and request["intact"]
    if pre_parked is None:
        assert _requested(store, agreement_id) == [(request["id"], None)]
    else:
        assert request["id"] != pre_parked["id"]
        assert _requested(store, agreement_id) == [(pre_parked["id"], None), (request["id"], pre_parked["id"])]
    assert verify_evidence(store, agreement_id).ok


@pytest.mark.parametrize("backend", sb.BACKENDS)
def test_two_schedulers_park_once_and_settle_once_when_two_deadlines_are_due(
    backend: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Held: per agreement one `expire` commit, one request for `sched/escalate/D`, one renewal at most.

    Both schedulers plan [escalate, expire] at version 1. The winner parks
    (or renews) `escalate` and commits `expire`; the loser finds the same
    pending request and replays `expire` by its key, or is refused PW509,
    or reads the agreement already final. Half the agreements were parked a
    day earlier, so their request has expired and both schedulers race to
    renew it too. The last round is two whole `pactwright scheduler --once`
    runs over a second batch.
    """
    clock_file = tmp_path / "clock"
    clock_file.write_text(f"{BOTH_DUE}\n")
    with _active(backend, tmp_path, PARK) as url:
        raced = [f"p{n:02d}" for n in range(RACED)]
        batch = [f"q{n:02d}" for n in range(SCANNED)]
        pre_parked: dict[str, dict[str, Any] | None] = {}
        with open_store(url) as store:
            for n, agreement_id in enumerate(raced + batch):
                _funded(store, agreement_id)
                pre_parked[agreement_id] = None
                if n % 2:
                    assert scan(store, TestClock(PRE_PARKED), [agreement_id]).refused == {"PW513": 1}
                    (pre_parked[agreement_id],) = _requests(store, agreement_id)
        rounds: list[Action] = [("scan", {"at": BOTH_DUE, "agreements": [a]}) for a in raced]
        rounds.append(("cli", {"clock": str(clock_file)}))
        first, second = _race(url, rounds, rounds)

        kinds: dict[str, int] = {}
        for agreement_id, pair in zip(raced, zip(first, second, strict=True), strict=False):
            found = sorted(_scan_kind(agreement_id, scanned, backend) for scanned in pair)
            assert found.count("committed") == 1, (agreement_id, pair)
            loser = next(k for k in found if k != "committed")
            kinds[loser] = kinds.get(loser, 0) + 1
        cli = [first[-1], second[-1]]
        assert [run["exit"] for run in cli] == [0, 0] and [len(run["scans"]) for run in cli] == [1, 1]
        committed = sorted(c for run in cli for c in run["scans"][0]["committed"])
        assert committed == [f"{a}/2" for a in batch]  # each agreement of the batch exactly once, by either run
        assert all(run["scans"][0]["failures"] == [] for run in cli)
        for due in (d for run in cli for d in run["scans"][0]["due"]):
            assert (due["expect_version"], due["key"]) == (1, {"escalate": ESCALATE_KEY, "expire": EXPIRE_KEY}[
                due["transition"]]), due  # fmt: skip
        with open_store(url) as store:
            for agreement_id in raced + batch:
                _settled_once_by_expire(store, agreement_id, pre_parked[agreement_id])
            assert not scan(store, TestClock(BOTH_DUE + DAY)).due
    _print(f"[{backend}] {RACED} two-scheduler races at a parked deadline + a due one: 1 commit each; "
           f"losers {dict(sorted(kinds.items()))}; CLI runs committed "
           f"{[len(run['scans'][0]['committed']) for run in cli]} of {SCANNED}", capsys)  # fmt: skip


@pytest.mark.parametrize("backend", sb.BACKENDS)
def test_the_managers_grant_racing_a_scheduler_that_fires_the_next_deadline_settles_once(
    backend: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Held: the grant of the parked `escalate` against a scan that parks it again and fires `expire`.

    The request was parked a minute before `expire` became due, so at
    BOTH_DUE it is still valid. Either the grant commits `escalate` (the
    scheduler replays its key or finds the agreement final, or is refused
    PW509 for `expire`), or the scheduler commits `expire` and the grant is
    refused PW509; the seller or the buyer is paid, never both.
    """
    with _active(backend, tmp_path, PARK) as url:
        agreements = [f"m{n:02d}" for n in range(RACED)]
        parked: dict[str, dict[str, Any]] = {}
        with open_store(url) as store:
            for agreement_id in agreements:
                _funded(store, agreement_id)
                parked[agreement_id] = _park(store, agreement_id, T0 + 2 * DAY - 60)
        granting = [_grant(parked[a], BOTH_DUE) for a in agreements]
        scanning: list[Action] = [("scan", {"at": BOTH_DUE, "agreements": [a]}) for a in agreements]
        grants, scans = _race(url, granting, scanning)

        wins = {"escalate": 0, "expire": 0}
        with open_store(url) as store:
            for n, agreement_id in enumerate(agreements):
                granted, scanned, event = grants[n], scans[n], f"{agreement_id}/2"
                assert scanned["failures"] == [] and scanned["at"] == BOTH_DUE
                shape = ([d["transition"] for d in scanned["due"]], scanned["committed"], scanned["replayed"],
                         scanned["refused"])  # fmt: skip
                balances = show(store, agreement_id).agreement.balances
                if granted.get("status") == "committed":
                    wins["escalate"] += 1
                    assert granted["event_id"] == event and not granted["replayed"]
                    assert shape in ((["escalate"], [], 1, {}), ([], [], 0, {}),
                                     (["escalate", "expire"], [], 0, {"PW513": 1, "PW509": 1})), shape  # fmt: skip
                    assert _events(store, agreement_id) == [(1, "fund", "fund"), (2, "escalate", ESCALATE_KEY)]
                    assert (balances["seller"], balances["buyer"]) == (PRICE, 0)
                    (row,) = _requests(store, agreement_id)
                    assert (row["id"], row["status"], row["event_id"]) == (parked[agreement_id]["id"], "consumed",
                                                                           event)  # fmt: skip
                else:
                    wins["expire"] += 1
                    assert granted == {"code": "PW509"}, (agreement_id, granted, scanned)
                    assert shape == (["escalate", "expire"], [event], 0, {"PW513": 1}), shape
                    assert _events(store, agreement_id) == [(1, "fund", "fund"), (2, "expire", EXPIRE_KEY)]
                    assert (balances["seller"], balances["buyer"]) == (0, PRICE)
                    assert _requests(store, agreement_id) == [parked[agreement_id]]  # still pending, unchanged
                assert balances["escrow"] == 0 and _outbox(store, agreement_id) == [1, 2]
                assert _requested(store, agreement_id) == [(parked[agreement_id]["id"], None)]
                assert verify_evidence(store, agreement_id).ok
        assert sum(wins.values()) == RACED
    _print(f"[{backend}] {RACED} grants of a parked deadline vs a scheduler firing the next one: {wins}", capsys)


# -- 2. the scheduler: a reminder that fires twice at one deadline --------------------------------------

REMINDED = 12
DEADLINE = T0 + DAY  # `opened_at + 1d`
TICK_AT = DEADLINE + 5
TICK_KEYS = {("remind", 1): f"sched/remind/{DEADLINE}", ("remind", 2): f"sched/remind/{DEADLINE}/2",
             ("close", 3): "sched/close/v3"}  # fmt: skip


@pytest.mark.parametrize("backend", sb.BACKENDS)
def test_two_schedulers_fire_a_reminder_twice_at_one_deadline_and_close_once(
    backend: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Held: `remind` commits exactly twice (keys `D` then `D/2`), `close` once; the fee is taken twice.

    Three rounds per agreement, both schedulers scanning at the same instant.
    Every round commits at least once, so after three the agreement is
    `done` with exactly three scheduler commits between the two processes,
    whatever the interleaving; every plan either of them made (even from a
    stale read) carries the documented key for the version it read.
    """
    with _active(backend, tmp_path, TICK) as url:
        agreements = [f"r{n:02d}" for n in range(REMINDED)]
        with open_store(url) as store:
            for agreement_id in agreements:
                open_agreement(store, TICK_ID, {"price": "50.00", "fee": "1.50"}, {"buyer": "bea"},
                               agreement_id=agreement_id, clock=TestClock(T0))  # fmt: skip
                submit(store, agreement_id, "open", "buyer", "bea", "open", clock=TestClock(T0))
        rounds: list[Action] = [("scan", {"at": TICK_AT, "agreements": [a]}) for a in agreements for _ in range(3)]
        first, second = _race(url, rounds, rounds)

        replays = stale = doubled = 0
        with open_store(url) as store:
            for n, agreement_id in enumerate(agreements):
                scans = [*first[3 * n : 3 * n + 3], *second[3 * n : 3 * n + 3]]
                for scanned in scans:
                    assert scanned["failures"] == []
                    for due in scanned["due"]:
                        assert due["key"] == TICK_KEYS[(due["transition"], due["expect_version"])], due
                committed = sorted(c for s in scans for c in s["committed"])
                assert committed == [f"{agreement_id}/{seq}" for seq in (2, 3, 4)], (agreement_id, scans)
                replays += sum(s["replayed"] for s in scans)
                stale += sum(s["refused"].get("PW509", 0) for s in scans)
                doubled += sum(len(first[3 * n + k]["committed"]) + len(second[3 * n + k]["committed"]) == 2
                               for k in range(3))  # fmt: skip
                assert _events(store, agreement_id) == [(1, "open", "open"), (2, "remind", TICK_KEYS[("remind", 1)]),
                                                        (3, "remind", TICK_KEYS[("remind", 2)]),
                                                        (4, "close", TICK_KEYS[("close", 3)])]  # fmt: skip
                assert _outbox(store, agreement_id) == [1, 2, 3, 4]
                agreement = show(store, agreement_id).agreement
                assert (agreement.state, agreement.fired) == ("done", {"open": 1, "remind": 2, "close": 1})
                balances = agreement.balances
                assert (balances["escrow"], balances["platform"], balances["buyer"]) == (0, 300, 4_700)
                assert verify_evidence(store, agreement_id).ok
    _print(f"[{backend}] {REMINDED} agreements x 3 two-scheduler rounds: 3 commits each (remind, remind/2, "
           f"close); replays {replays}, PW509 {stale}, rounds where both committed {doubled}", capsys)  # fmt: skip
