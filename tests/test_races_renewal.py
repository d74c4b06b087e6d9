"""Two-process races on the renewal of expired approval requests.

Every race here is between two spawned interpreters
(tests/_races_scheduler_renewal_child.py), each with its own store
connection, that meet at a barrier before each round and then act on the
same agreement at the same test-clock instant; on SQLite and on PostgreSQL.

The renewal (`_renew` in runtime/approvals.py, docs/effects.md "Approvals
with previews"): an expired undecided request resubmitted with the same key
is renewed in its row (new id, expiry and preview; grants dropped; the old id
PW601, its proof PW608). Claims attacked: two resubmissions renew once and
both get the new request; a grant of the old request against its renewal,
and a grant of the new request against a second renewal attempt, never
both commit and renew. Then four eyes: a partial grant of a request racing
its renewal is never kept on the renewed request; and, in one process, a
partial grant of an expired request counts for nothing after the renewal
and its proof is refused.

Every attack held: each test asserts the exact store outcome for every
interleaving the claim allows, and prints how often each one occurred.
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

import pytest

from pactwright.runtime import TestClock, approvals, open_agreement, show, submit, verify_evidence
from pactwright.runtime.store import open_store
from tests import signed_bundles as sb
from tests._races_common import (
    DAY,
    ESCALATE_KEY,
    HOUR,
    PARK,
    PRICE,
    T0,
    TTL,
    _active,
    _code,
    _events,
    _funded,
    _grant,
    _outbox,
    _park,
    _print,
    _proof,
    _race,
    _records,
    _requested,
    _requests,
    _resubmit,
)

# -- 3. renewal: two resubmissions of one expired request -------------------------------------------------

RENEWED = 16
PARKED_AT = T0 + DAY + 5
RENEW_AT = PARKED_AT + 2 * HOUR  # past the first request's expiry, before `expire` is due


@pytest.mark.parametrize("backend", sb.BACKENDS)
def test_two_resubmissions_of_an_expired_request_renew_it_once(
    backend: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Held: one renewal per expired request, and both resubmitters are answered with the same new request.

    Even agreements: both processes at the same instant. Odd ones: one a
    second later than the other, so whichever renews first makes the request
    the other must be given (it is within its lifetime by then).
    """
    with _active(backend, tmp_path, PARK) as url:
        agreements = [f"n{n:02d}" for n in range(RENEWED)]
        parked: dict[str, dict[str, Any]] = {}
        with open_store(url) as store:
            for agreement_id in agreements:
                _funded(store, agreement_id)
                parked[agreement_id] = _park(store, agreement_id, PARKED_AT)
        first = [_resubmit(a, RENEW_AT) for a in agreements]
        second = [_resubmit(a, RENEW_AT + n % 2) for n, a in enumerate(agreements)]
        one, two = _race(url, first, second)

        later_won = 0
        with open_store(url) as store:
            for n, agreement_id in enumerate(agreements):
                a, b = one[n], two[n]
                assert a["status"] == b["status"] == "waiting_for_approval" and not a["replayed"], (a, b)
                assert a["approval"] == b["approval"], (agreement_id, a, b)
                renewed, old = a["approval"], parked[agreement_id]
                assert renewed["id"] != old["id"] and renewed["grants"] == [] and renewed["status"] == "pending"
                assert renewed["created_at"] in ((RENEW_AT,) if n % 2 == 0 else (RENEW_AT, RENEW_AT + 1))
                later_won += renewed["created_at"] == RENEW_AT + 1
                assert renewed["expires_at"] == renewed["created_at"] + TTL
                assert renewed["preview_digest"] != old["preview_digest"]
                assert _requests(store, agreement_id) == [renewed]
                assert _requested(store, agreement_id) == [(old["id"], None), (renewed["id"], old["id"])]
                assert _code(lambda old=old: approvals.get_request(store, old["id"])) == "PW601"
                assert _events(store, agreement_id) == [(1, "fund", "fund")]
    _print(f"[{backend}] {RENEWED} double resubmissions of an expired request: 1 renewal each, both answered "
           f"with it; of the skewed ones, the later clock renewed {later_won} of {RENEWED // 2}", capsys)  # fmt: skip


# -- 4. renewal: a grant of the old request against its renewal ---------------------------------------------


@pytest.mark.parametrize("backend", sb.BACKENDS)
def test_a_grant_of_the_expired_request_racing_its_renewal_never_both(
    backend: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Held: the grant (at the request's last valid second) commits first and the renewal replays it, or the
    renewal (a second later) comes first and the grant is PW601; never a commit and a renewal.

    The renewer is the command resubmitted as the scheduler submits it (even
    agreements) or a scheduler scan (odd ones). After a renewal won, the old
    proof does not approve the new request (PW608) and a proof of the new
    one commits it once.
    """
    with _active(backend, tmp_path, PARK) as url:
        agreements = [f"g{n:02d}" for n in range(RENEWED)]
        parked: dict[str, dict[str, Any]] = {}
        with open_store(url) as store:
            for agreement_id in agreements:
                _funded(store, agreement_id)
                parked[agreement_id] = _park(store, agreement_id, PARKED_AT)
        last_second = PARKED_AT + TTL  # still grantable: a request expires after `expires_at`
        granting = [_grant(parked[a], last_second) for a in agreements]
        renewing = [_resubmit(a, last_second + 1) if n % 2 == 0 else
                    ("scan", {"at": last_second + 1, "agreements": [a]}) for n, a in enumerate(agreements)]  # fmt: skip
        grants, renewals = _race(url, granting, renewing)

        wins = {"grant": 0, "renewal": 0}
        with open_store(url) as store:
            for n, agreement_id in enumerate(agreements):
                old, granted, renewal = parked[agreement_id], grants[n], renewals[n]
                event = f"{agreement_id}/2"
                by_scan = n % 2 == 1
                if _events(store, agreement_id) == [(1, "fund", "fund"), (2, "escalate", ESCALATE_KEY)]:
                    wins["grant"] += 1
                    assert (granted["status"], granted["event_id"], granted["replayed"]) == ("committed", event, False)
                    if by_scan:  # it read the agreement before the grant's commit (a replay) or after (final)
                        assert (renewal["committed"], renewal["failures"], renewal["refused"]) == ([], [], {})
                        assert renewal["replayed"] == 1 or (renewal["due"] == [] and renewal["scanned"] in (0, 1))
                    else:
                        assert (renewal["status"], renewal["event_id"], renewal["replayed"]) == ("committed", event,
                                                                                                 True)  # fmt: skip
                    (row,) = _requests(store, agreement_id)
                    assert (row["id"], row["status"], row["event_id"]) == (old["id"], "consumed", event)
                    assert _requested(store, agreement_id) == [(old["id"], None)]
                    assert _outbox(store, agreement_id) == [1, 2]
                    assert show(store, agreement_id).agreement.balances["seller"] == PRICE
                else:
                    wins["renewal"] += 1
                    assert granted == {"code": "PW601"}, (agreement_id, granted, renewal)
                    assert _events(store, agreement_id) == [(1, "fund", "fund")]
                    (fresh,) = _requests(store, agreement_id)
                    if by_scan:
                        assert (renewal["committed"], renewal["refused"], renewal["failures"]) == ([], {"PW513": 1}, [])
                    else:
                        assert renewal["status"] == "waiting_for_approval" and renewal["approval"] == fresh
                    assert fresh["id"] != old["id"] and fresh["status"] == "pending"
                    assert (fresh["created_at"], fresh["grants"]) == (last_second + 1, [])
                    assert _requested(store, agreement_id) == [(old["id"], None), (fresh["id"], old["id"])]
                    assert _records(store, agreement_id, "approval_granted") == []
                    at = TestClock(last_second + 2)
                    assert _code(lambda f=fresh, o=old, at=at: approvals.grant(store, f["id"], "max", _proof(o),
                                                                               at)) == "PW608"  # fmt: skip
                    assert approvals.grant(store, fresh["id"], "max", _proof(fresh), at).event_id == event
                    assert _events(store, agreement_id) == [(1, "fund", "fund"), (2, "escalate", ESCALATE_KEY)]
                assert show(store, agreement_id).agreement.balances["escrow"] == 0
                assert verify_evidence(store, agreement_id).ok
        assert wins["grant"] + wins["renewal"] == RENEWED
    _print(f"[{backend}] {RENEWED} grants of an expiring request vs its renewal: {wins}, never both", capsys)


# -- 5. renewal: a grant of the renewed request against a second renewal attempt ------------------------------


@pytest.mark.parametrize("backend", sb.BACKENDS)
def test_a_grant_of_the_renewed_request_racing_a_second_renewal(
    backend: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Held: the renewed request commits once or is renewed again, never both.

    Even agreements: the resubmission comes a second after the renewed
    request's expiry (a second renewal is due): the grant commits and the
    resubmission replays it, or the renewal wins and the grant is PW601.
    Odd ones: the resubmission is within the renewed request's lifetime:
    it is answered with that request unchanged or with the committed
    result, and the grant always commits.
    """
    with _active(backend, tmp_path, PARK) as url:
        agreements = [f"h{n:02d}" for n in range(RENEWED)]
        first: dict[str, dict[str, Any]] = {}
        renewed: dict[str, dict[str, Any]] = {}
        with open_store(url) as store:
            for agreement_id in agreements:
                _funded(store, agreement_id)
                first[agreement_id] = _park(store, agreement_id, PARKED_AT)
                renewed[agreement_id] = _park(store, agreement_id, RENEW_AT)
                assert renewed[agreement_id]["id"] != first[agreement_id]["id"]
        last_second = RENEW_AT + TTL
        granting = [_grant(renewed[a], last_second) for a in agreements]
        again = [_resubmit(a, last_second + 1 if n % 2 == 0 else RENEW_AT + 60) for n, a in enumerate(agreements)]
        grants, renewals = _race(url, granting, again)

        wins = {"grant then replay": 0, "second renewal": 0, "unchanged request then grant": 0}
        with open_store(url) as store:
            for n, agreement_id in enumerate(agreements):
                granted, resubmitted, current = grants[n], renewals[n], renewed[agreement_id]
                chain = [(first[agreement_id]["id"], None), (current["id"], first[agreement_id]["id"])]
                event = f"{agreement_id}/2"
                if (
                    resubmitted.get("status") == "waiting_for_approval"
                    and resubmitted["approval"]["id"] != current["id"]
                ):
                    wins["second renewal"] += 1
                    assert n % 2 == 0 and granted == {"code": "PW601"}, (agreement_id, granted, resubmitted)
                    third = resubmitted["approval"]
                    assert (third["created_at"], third["grants"]) == (last_second + 1, [])
                    assert _requests(store, agreement_id) == [third]
                    assert _requested(store, agreement_id) == [*chain, (third["id"], current["id"])]
                    assert _events(store, agreement_id) == [(1, "fund", "fund")]
                    continue
                assert (granted["status"], granted["event_id"], granted["replayed"]) == ("committed", event, False)
                if resubmitted["status"] == "waiting_for_approval":
                    wins["unchanged request then grant"] += 1
                    assert n % 2 == 1 and resubmitted["approval"] == current, (agreement_id, resubmitted)
                else:
                    wins["grant then replay"] += 1
                    assert (resubmitted["status"], resubmitted["event_id"], resubmitted["replayed"]) == (
                        "committed", event, True)  # fmt: skip
                assert _events(store, agreement_id) == [(1, "fund", "fund"), (2, "escalate", ESCALATE_KEY)]
                (row,) = _requests(store, agreement_id)
                assert (row["id"], row["status"], row["event_id"]) == (current["id"], "consumed", event)
                assert _requested(store, agreement_id) == chain
                assert _outbox(store, agreement_id) == [1, 2]
                assert show(store, agreement_id).agreement.balances["seller"] == PRICE
                assert verify_evidence(store, agreement_id).ok
    _print(f"[{backend}] {RENEWED} grants of a renewed request vs a second renewal attempt: {wins}", capsys)


# -- 6. renewal under four eyes: a partial grant of the expired request -------------------------------------


@pytest.mark.parametrize("registry", [False, True], ids=["roles", "registry"])
@pytest.mark.parametrize("backend", sb.BACKENDS)
def test_a_partial_grant_does_not_survive_the_renewal_of_its_request(
    backend: str, registry: bool, tmp_path: Path
) -> None:
    """Held: after rita's grant of the expired request, the renewed one needs two new grants.

    policies/four_eyes_refund.pact (`approval by refund_approver,
    risk_officer distinct`, and its `approvals 2 by refund_approver` variant):
    rita grants the first request, it expires, `issue` is resubmitted with
    the same key. The renewed request has no grants; the other approver's
    grant leaves it pending (rita's old grant is not counted); rita's old
    proof is PW608 on the new request and PW601 on the old id; her new grant
    commits the command with one `approvals` row per new grant.
    """
    from tests import test_four_eyes as fe

    other = "pete" if registry else "olga"
    with contextlib.contextmanager(fe._store)(backend, tmp_path, registry) as url, open_store(url) as store:
        expired = fe._park(store)
        partial = fe._grant(store, expired, "rita")
        assert partial.status == "waiting_for_approval" and [g["party"] for g in partial.approval["grants"]] == ["rita"]
        old_proof = fe._proof(expired, "rita")
        later = expired["expires_at"] + 60
        again = submit(store, "r1", "issue", "support_agent", "sam", "issue", clock=TestClock(later))
        renewed = again.approval
        assert again.status == "waiting_for_approval" and renewed is not None
        assert renewed["id"] != expired["id"] and renewed["grants"] == []
        assert approvals.get_request(store, renewed["id"]).grants == ()

        second = fe._grant(store, renewed, other, later + 10)
        assert second.status == "waiting_for_approval" and second.event_id == ""
        assert [g["party"] for g in second.approval["grants"]] == [other]
        assert _events(store, "r1") == [] and fe._rows(store) == []

        at = TestClock(later + 20)
        assert _code(lambda: approvals.grant(store, renewed["id"], "rita", old_proof, at)) == "PW608"
        assert _code(lambda: approvals.grant(store, expired["id"], "rita", old_proof, at)) == "PW601"
        (pending,) = _requests(store, "r1")
        assert [g["party"] for g in pending["grants"]] == [other] and pending["status"] == "pending"

        done = fe._grant(store, renewed, "rita", later + 30)
        assert done.status == "committed" and _events(store, "r1") == [(1, "issue", "issue")]
        assert [(r[0], r[2], r[3]) for r in fe._rows(store)] == [(renewed["id"], other, "r1/1"),
                                                                  (f"{renewed['id']}/2", "rita", "r1/1")]  # fmt: skip
        assert [(r["approval"], r["approver"]["party"]) for r in _records(store, "r1", "approval_granted")] == [
            (expired["id"], "rita"), (renewed["id"], other), (renewed["id"], "rita")]  # fmt: skip
        assert verify_evidence(store, "r1").ok


@pytest.mark.parametrize("backend", sb.BACKENDS)
def test_a_partial_grant_racing_the_renewal_of_its_request_is_never_kept(
    backend: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Held: rita's grant of a four-eyes request at its last valid second, against its renewal a second later.

    Either the grant is recorded and the renewal then drops it, or the
    renewal comes first and the grant is PW601. Both ways the renewed
    request has no grants, and olga's grant alone leaves it pending.
    """
    from tests import test_four_eyes as fe

    agreements = [f"f{n:02d}" for n in range(RENEWED)]
    with contextlib.contextmanager(fe._store)(backend, tmp_path, False) as url:
        parked: dict[str, dict[str, Any]] = {}
        with open_store(url) as store:
            for agreement_id in agreements:
                open_agreement(store, fe.PACT_ID, fe.PARAMS, fe.PARTIES, agreement_id=agreement_id,
                               clock=TestClock(T0))  # fmt: skip
                asked = submit(store, agreement_id, "issue", "support_agent", "sam", "issue", clock=TestClock(T0 + 10))
                assert asked.approval is not None
                parked[agreement_id] = asked.approval
        last_second = T0 + 10 + TTL
        granting = [_grant(parked[a], last_second, "rita", fe._proof(parked[a], "rita")) for a in agreements]
        renewing = [("submit", {"agreement": a, "transition": "issue", "role": "support_agent", "party": "sam",
                                "key": "issue", "at": last_second + 1}) for a in agreements]  # fmt: skip
        grants, renewals = _race(url, granting, renewing)

        wins = {"grant recorded, then dropped": 0, "renewal first": 0}
        with open_store(url) as store:
            for n, agreement_id in enumerate(agreements):
                old, granted, renewal = parked[agreement_id], grants[n], renewals[n]
                fresh = renewal["approval"]
                assert renewal["status"] == "waiting_for_approval" and fresh["id"] != old["id"]
                assert (fresh["created_at"], fresh["grants"]) == (last_second + 1, [])
                rita = _records(store, agreement_id, "approval_granted")
                if granted.get("status") == "waiting_for_approval":
                    wins["grant recorded, then dropped"] += 1
                    assert [g["party"] for g in granted["approval"]["grants"]] == ["rita"]
                    assert [(r["approval"], r["approver"]["party"]) for r in rita] == [(old["id"], "rita")]
                else:
                    wins["renewal first"] += 1
                    assert granted == {"code": "PW601"} and rita == [], (agreement_id, granted)
                assert _requests(store, agreement_id) == [fresh]
                olga = fe._grant(store, fresh, "olga", last_second + 5)
                assert olga.status == "waiting_for_approval" and [g["party"] for g in olga.approval["grants"]] == [
                    "olga"]  # fmt: skip
                assert _events(store, agreement_id) == []
                assert verify_evidence(store, agreement_id).ok
        assert sum(wins.values()) == RENEWED
    _print(f"[{backend}] {RENEWED} four-eyes partial grants vs the renewal of their request: {wins}; the renewed "
           "request had no grants every time", capsys)  # fmt: skip
