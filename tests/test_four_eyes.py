"""Four eyes (language 1.1): a command that needs several approvals commits with the last of them.

policies/four_eyes_refund.pact says `issue` needs `approval by refund_approver,
risk_officer distinct not requester`; its variant here says `approvals 2 by
refund_approver distinct not requester`, whose approvers are the parties
holding `refund_approver` in the store's party registry. Built, verified,
signed and activated into a real store (SQLite file, PostgreSQL schema).

What is checked: the first grant leaves the request pending with that grant
(its proof digest, never the proof), nothing else committed; the second, by
another eligible party over the same preview digest, commits the command in
its own transaction with one consumed `approvals` row per grant and an
evidence record per grant; a second grant by the same party is PW614; a
replayed proof after the commit is PW604; the requester is PW607; a party
not holding the role is PW605 (role list) or PW606 (registry); two
concurrent final grants commit exactly once.
"""

from __future__ import annotations

import multiprocessing
from collections.abc import Iterator
from datetime import datetime
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from pactwright.errors import PactwrightError
from pactwright.runtime import TestClock, approvals, open_agreement, submit
from pactwright.runtime.activation import FixedClock, activate_files
from pactwright.runtime.parties import add_party
from pactwright.runtime.store import Store, open_store
from pactwright.signing import raw_public_key, sign_statement
from tests.signed_bundles import BACKENDS, NOW, compile_verified, default_trust, key, sign, temporary_store

ROOT = Path(__file__).resolve().parent.parent
POLICY = ROOT / "policies" / "four_eyes_refund.pact"
PACT_ID = "support.four_eyes_refund"
T0 = 1780315200
PARAMS = {"amount": "1200.00", "order_id": "ORD-1001"}
PARTIES = {"support_agent": "sam", "refund_approver": "rita", "risk_officer": "olga"}
ROLES = "approval by refund_approver, risk_officer distinct not requester"
REGISTRY = "approvals 2 by refund_approver distinct not requester"


@cache
def _built(registry: bool) -> tuple[tuple[str, bytes], ...]:
    source = POLICY.read_bytes()
    if registry:
        source = source.replace(ROLES.encode(), REGISTRY.encode())
    bundle, verdict = compile_verified(source, POLICY.name)
    assert verdict == "pass"
    return tuple(sorted(bundle.items()))


def _store(backend: str, directory: Path, registry: bool) -> Iterator[str]:
    with temporary_store(backend, directory) as url:
        with open_store(url) as store:
            activate_files(store, sign(dict(_built(registry))), default_trust(),
                           clock=FixedClock(datetime.fromisoformat(NOW)))  # fmt: skip
            for party, role in (("rita", "refund_approver"), ("olga", "risk_officer"), ("pete", "refund_approver"),
                                ("rosa", "refund_approver"), ("sam", "refund_approver")):  # fmt: skip
                add_party(store, party, role, raw_public_key(key(party).private.public_key()), T0)
        yield url


@pytest.fixture(params=BACKENDS)
def url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    yield from _store(request.param, tmp_path, False)


@pytest.fixture(params=BACKENDS)
def registry_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    yield from _store(request.param, tmp_path, True)


def _park(store: Store) -> dict[str, Any]:
    open_agreement(store, PACT_ID, PARAMS, PARTIES, agreement_id="r1", clock=TestClock(T0))
    parked = submit(store, "r1", "issue", "support_agent", "sam", "issue", clock=TestClock(T0 + 10))
    assert parked.status == "waiting_for_approval" and parked.approval is not None
    return parked.approval


def _proof(request: dict[str, Any], party: str) -> str:
    statement = approvals.decision_statement(request["id"], request["preview_digest"], "grant")
    return sign_statement(key(party).private, statement)


def _grant(store: Store, request: dict[str, Any], party: str, at: int = T0 + 20) -> Any:
    return approvals.grant(store, request["id"], party, _proof(request, party), TestClock(at))


def _refused(code: str, store: Store, request: dict[str, Any], party: str) -> None:
    with pytest.raises(PactwrightError) as caught:
        _grant(store, request, party)
    assert caught.value.code == code


def _rows(store: Store) -> list[tuple[Any, ...]]:
    with store.transaction(write=False) as db:
        return [tuple(r) for r in db.query(
            "SELECT id, approver_role, approver_party, consumed_event_id FROM approvals ORDER BY id")]  # fmt: skip


def _granted_records(store: Store) -> list[dict[str, Any]]:
    import json

    with store.transaction(write=False) as db:
        found = db.query("SELECT record FROM evidence WHERE kind = 'approval_granted' ORDER BY seq")
    return [json.loads(bytes(r[0]).decode() if isinstance(r[0], bytes | memoryview) else r[0]) for r in found]


def test_two_grants_by_two_parties_commit_the_command_once(url: str) -> None:
    with open_store(url) as store:
        request = _park(store)
        assert request["preview"]["approval"]["approvers"] == ["refund_approver", "risk_officer"]
        first = _grant(store, request, "rita")
        assert first.status == "waiting_for_approval" and first.event_id == ""
        assert [g["party"] for g in first.approval["grants"]] == ["rita"]
        assert "proof" not in first.approval["grants"][0] and first.approval["grants"][0]["proof_digest"]
        assert _rows(store) == []
        assert approvals.get_request(store, request["id"]).status == "pending"
        _refused("PW614", store, request, "rita")  # the same party twice
        _refused("PW605", store, request, "pete")  # holds no role of the approval in this agreement
        done = _grant(store, request, "olga", T0 + 30)
        assert done.status == "committed" and done.event_id == "r1/1"
        rid = request["id"]
        assert _rows(store) == [(rid, "refund_approver", "rita", "r1/1"), (f"{rid}/2", "risk_officer", "olga", "r1/1")]
        granted = _granted_records(store)
        assert [g["approver"]["party"] for g in granted] == ["rita", "olga"]
        assert all(g["preview_digest"] == request["preview_digest"] for g in granted)
        _refused("PW604", store, request, "olga")  # the replayed final proof


def test_approvals_n_by_a_role_take_registered_parties_of_that_role(registry_url: str) -> None:
    with open_store(registry_url) as store:
        request = _park(store)
        assert request["preview"]["approval"]["registry"] is True
        _refused("PW606", store, request, "olga")  # olga holds risk_officer, not refund_approver, in the registry
        assert _grant(store, request, "pete").status == "waiting_for_approval"
        _refused("PW614", store, request, "pete")
        _refused("PW607", store, request, "sam")
        assert _grant(store, request, "rita", T0 + 30).status == "committed"
        assert [r[2] for r in _rows(store)] == ["pete", "rita"]


def _final_grant_in_child(url: str, request: dict[str, Any], party: str, proof: str, barrier: Any, out: Any) -> None:
    with open_store(url) as store:
        barrier.wait()
        try:
            result = approvals.grant(store, request["id"], party, proof, TestClock(T0 + 30))
            out.put(("committed", result.event_id))
        except PactwrightError as exc:
            out.put(("refused", exc.code))


def test_two_concurrent_final_grants_commit_exactly_once(registry_url: str) -> None:
    with open_store(registry_url) as store:
        request = _park(store)
        _grant(store, request, "pete")
    context = multiprocessing.get_context("spawn")
    barrier, out = context.Barrier(2), context.Queue()
    children = [context.Process(target=_final_grant_in_child,
                                args=(registry_url, request, party, _proof(request, party), barrier, out))
                for party in ("rita", "rosa")]  # fmt: skip
    for child in children:
        child.start()
    outcomes = sorted(out.get(timeout=120) for _ in children)
    for child in children:
        child.join(timeout=60)
        assert child.exitcode == 0
    assert outcomes == [("committed", "r1/1"), ("refused", "PW604")]
    with open_store(registry_url) as store:
        assert [r[3] for r in _rows(store)] == ["r1/1", "r1/1"]
