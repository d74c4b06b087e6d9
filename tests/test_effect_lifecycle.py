"""The effect lifecycle against a real HTTP provider simulator, on SQLite and PostgreSQL.

The support refund policy (and variants of its refund strategy) is
activated into a real store; `issue` commits a `prepared` call of
`refund_payment`; the effect worker sends it over HTTP to the simulator,
which counts the writes it really performed. For every strategy and every
fault the simulator can inject, the provider's own write count is what the
strategy promises (1), and 2 only for the deliberate `retry` mistake
against a provider that ignores keys: the double refund the verifier
predicts for that policy.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pactwright.errors import CommandError
from pactwright.runtime import TestClock, show, submit
from pactwright.runtime.effect_http import Credentials, HttpAdapter, load_providers
from pactwright.runtime.effect_ops import abandon, list_effects, reconcile
from pactwright.runtime.effect_worker import EffectStep, EffectWorker
from pactwright.runtime.provider_sim import Simulator, start_simulator
from pactwright.runtime.store import Store, open_store
from tests.effect_env import NOTIFY_URL, T0, issued, providers_file, refund_store, report, settle_calls
from tests.signed_bundles import BACKENDS


@pytest.fixture
def sim() -> Iterator[Simulator]:
    with start_simulator(slow_seconds=1.5) as simulator:
        yield simulator


def settle(store: Store, adapter: HttpAdapter, start: int = T0 + 30, rounds: int = 12) -> list[EffectStep]:
    """Step the worker until nothing is due, moving the trusted clock past every back-off."""
    steps: list[EffectStep] = []
    for n in range(rounds):
        taken = EffectWorker(store, adapter, TestClock(start + n * 1000)).drain()
        steps.extend(taken)
        if not taken and n > 0:
            break
    return steps


def refund(store: Store) -> Any:
    return next(r for r in list_effects(store) if r.effect == "refund_payment")


def _adapter(tmp_path: Path, sim: Simulator, timeout: float | None = None) -> HttpAdapter:
    return HttpAdapter(load_providers(providers_file(tmp_path, sim.url)), Credentials())


CASES = [
    # strategy, fault, expected refund phase, provider writes
    ("idempotent", None, "acknowledged", 1),
    ("idempotent", "lost_response", "acknowledged", 1),
    ("idempotent", "lost_request", "acknowledged", 1),
    ("idempotent", "error_5xx", "acknowledged", 1),
    ("idempotent", "slow", "acknowledged", 1),
    ("idempotent", "duplicate_ack", "acknowledged", 1),
    ("reconcilable", None, "acknowledged", 1),
    ("reconcilable", "lost_response", "reconciled_recovered", 1),
    ("reconcilable", "lost_request", "acknowledged", 1),
    ("reconcilable", "error_5xx", "acknowledged", 1),
    ("reconcilable", "slow", "reconciled_recovered", 1),
    ("once", None, "acknowledged", 1),
    ("once", "lost_response", "abandoned_uncertain", 1),
    ("once", "lost_request", "abandoned_uncertain", 0),
    ("once", "error_5xx", "failed", 0),
]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize(("strategy", "fault", "phase", "writes"), CASES,
                         ids=[f"{c[0]}-{c[1] or 'clean'}" for c in CASES])  # fmt: skip
def test_each_strategy_under_each_fault_writes_what_it_promises(
    backend: str, strategy: str, fault: str | None, phase: str, writes: int, tmp_path: Path, sim: Simulator
) -> None:
    with refund_store(backend, tmp_path, strategy) as url, open_store(url) as store:
        issued(store)
        if fault:
            sim.queue(fault)
        settle(store, _adapter(tmp_path, sim))
        assert refund(store).phase == phase
        assert sim.state()["writes"] == writes, sim.state()


@pytest.mark.parametrize("backend", BACKENDS)
def test_retry_against_a_provider_that_ignores_keys_refunds_twice_as_the_verifier_predicts(
    backend: str, tmp_path: Path, sim: Simulator
) -> None:
    verdict = report("retry")
    failed = [i["name"] for i in verdict["invariants"] if i.get("verdict") == "violated"]
    assert verdict["verdict"] == "fail" and "refund_at_most_once" in failed, failed
    sim.set_mode(ignore_keys=True)
    with refund_store(backend, tmp_path, "retry", past_activation=True) as url, open_store(url) as store:
        issued(store)
        sim.queue("lost_response")
        settle(store, _adapter(tmp_path, sim))
        assert refund(store).phase == "acknowledged"
        assert sim.state()["writes"] == 2  # the double refund: one lost answer, one repeat, no key honoured


@pytest.mark.parametrize("backend", BACKENDS)
def test_retry_against_a_provider_that_honours_keys_writes_once(backend: str, tmp_path: Path, sim: Simulator) -> None:
    with refund_store(backend, tmp_path, "retry", past_activation=True) as url, open_store(url) as store:
        issued(store)
        sim.queue("lost_response")
        settle(store, _adapter(tmp_path, sim))
        assert sim.state()["writes"] == 1


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_later_step_failing_compensates_the_refund_once(backend: str, tmp_path: Path, sim: Simulator) -> None:
    with refund_store(backend, tmp_path, "compensate") as url, open_store(url) as store:
        issued(store)
        # the refund succeeds, then notify_customer's provider refuses the connection: a definite failure
        adapter = HttpAdapter(load_providers(providers_file(tmp_path, sim.url, down=frozenset({NOTIFY_URL}))))
        steps = settle(store, adapter)
        phases = {r.effect: r.phase for r in list_effects(store) if r.compensates is None}
        assert phases["notify_customer"] == "failed"
        assert phases["refund_payment"] == "compensated", [s.to_json() for s in steps]
        void = [r for r in list_effects(store) if r.compensates is not None]
        assert [(r.effect, r.phase) for r in void] == [("void_payment", "acknowledged")]
        state = sim.state()
        assert state["writes"] == 2  # one refund, one void: nothing repeated


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_provider_answering_another_amount_is_quarantined_not_success(
    backend: str, tmp_path: Path, sim: Simulator
) -> None:
    with refund_store(backend, tmp_path, "idempotent") as url, open_store(url) as store:
        issued(store)
        sim.queue("wrong_amount")
        steps = settle(store, _adapter(tmp_path, sim))
        found = refund(store)
        assert found.quarantined and found.phase == "uncertain", [s.to_json() for s in steps]
        assert found.parked
        assert [r.id for r in list_effects(store, parked=True)] == [found.id]


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_parked_refund_is_reconciled_only_by_an_operator(backend: str, tmp_path: Path, sim: Simulator) -> None:
    with refund_store(backend, tmp_path, "reconcilable") as url, open_store(url) as store:
        issued(store)
        sim.queue("lost_response", "lookup_unknown")
        settle(store, _adapter(tmp_path, sim), rounds=1)
        parked = refund(store)
        assert parked.phase == "needs_reconciliation", parked
        _register(store, "olga", "operator")
        before = store.dump()
        with pytest.raises(CommandError) as refused:
            reconcile(store, "r1", "refund_payment", "recovered_acknowledgement", "sam", provider_ref="sim_1")
        assert refused.value.code == "PW641"
        assert store.dump() == before
        done = reconcile(store, "r1", "refund_payment", "recovered_acknowledgement", "olga", provider_ref="sim_1",
                         clock=TestClock(T0 + 5000))  # fmt: skip
        assert (done.phase, done.provider_ref, done.resolved_by) == ("reconciled_recovered", "sim_1", "olga")
        with pytest.raises(CommandError) as again:
            reconcile(store, "r1", done.id, "not_occurred", "olga")
        assert again.value.code == "PW642"
        assert sim.state()["writes"] == 1


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_parked_or_abandoned_refund_blocks_what_depends_on_it(backend: str, tmp_path: Path, sim: Simulator) -> None:
    with refund_store(backend, tmp_path, "repeatable") as url, open_store(url) as store:
        issued(store, "r1")
        sim.queue("lost_response", "lookup_unknown")
        settle(store, _adapter(tmp_path, sim), rounds=1)
        before = store.dump()
        with pytest.raises(CommandError) as parked:  # `issue` calls refund_payment: it depends on it
            submit(store, "r1", "issue", "support_agent", "sam", "issue-2", clock=TestClock(T0 + 3000))
        assert parked.value.code == "PW527" and "EFFECT_OUTCOME_PARKED" in parked.value.message
        assert store.dump() == before
        _register(store, "olga", "operator")
        done = abandon(store, "r1", "refund_payment", "provider cannot say; ticket PAY-77", "olga")
        assert done.phase == "abandoned_uncertain"
        before = store.dump()
        with pytest.raises(CommandError) as abandoned:
            submit(store, "r1", "issue", "support_agent", "sam", "issue-2", clock=TestClock(T0 + 4000))
        assert abandoned.value.code == "PW526" and "EFFECT_ABANDONED_UNCERTAIN" in abandoned.value.message
        assert store.dump() == before
        # What does not depend on the refund proceeds: `close` neither reads nor calls it.
        submit(store, "r1", "close", "support_agent", "sam", "close", clock=TestClock(T0 + 4100))
        assert show(store, "r1").agreement.state == "refunded"
        assert sim.state()["writes"] == 1


def _register(store: Store, party: str, role: str) -> None:
    with store.transaction(exclusive=False) as db:
        db.execute("INSERT INTO parties (party, role, public_key, added_at) VALUES (?, ?, NULL, ?)", (party, role, T0))


@pytest.mark.parametrize("backend", BACKENDS)
def test_max_calls_refuses_before_anything_is_written(backend: str, tmp_path: Path) -> None:
    # The verifier refuses the second refund at commit, as the runtime does (once it flagged it instead).
    assert report("twice")["verdict"] == "pass"
    with refund_store(backend, tmp_path, "twice") as url, open_store(url) as store:
        issued(store)
        settle_calls(store, tmp_path, T0 + 30)  # the first refund settled: its call site is free again
        before = store.dump()
        with pytest.raises(CommandError) as refused:
            submit(store, "r1", "issue", "support_agent", "sam", "issue-2", clock=TestClock(T0 + 40))
        assert refused.value.code == "PW523"
        assert store.dump() == before


@pytest.mark.parametrize("backend", BACKENDS)
def test_evidence_states_the_refund_claim_its_support_and_its_limits(
    backend: str, tmp_path: Path, sim: Simulator
) -> None:
    from pactwright.runtime.evidence import evidence, verify_evidence

    with refund_store(backend, tmp_path, "reconcilable") as url, open_store(url) as store:
        issued(store)
        settle(store, _adapter(tmp_path, sim))
        report = evidence(store, "r1")
        doc, text = report.to_json(), report.text()
        call = next(c for c in doc["claim"]["effects"] if c["effect"] == "refund_payment")
        assert call["claim"].startswith("a 64.90 EUR `refund_payment` call was authorised by rita holding "
                                        "refund_approver and acknowledged by the provider")  # fmt: skip
        support = next(s for s in doc["supports"]["effects"] if s["instance"] == call["instance"])
        assert support["payload_matches"] and support["dispatched_payload_digests"] == [support["payload_digest"]]
        assert support["provider_ref"] == sim.state()["records"][0]["id"]
        limits = "\n".join(doc["does_not_prove"])
        assert "that the customer received the funds" in limits and "commercially right" in limits
        assert "that the data `read_order` read" in limits
        assert call["claim"] in text
        assert verify_evidence(store, "r1").ok


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize(
    ("column", "value"),
    [("amount", "649000"), ("url", "https://orders.internal.example.com"), ("idempotency_key", "pw-other"),
     ("payload", '{"agreement":"r1","amount":"649000","currency":"EUR","effect":"refund_payment","params":{}}')],
    ids=["amount", "destination", "key", "payload"],
)  # fmt: skip
def test_an_edited_effect_row_is_never_sent(
    backend: str, column: str, value: str, tmp_path: Path, sim: Simulator
) -> None:
    with refund_store(backend, tmp_path, "idempotent") as url, open_store(url) as store:
        issued(store)
        with store.transaction(exclusive=False) as db:
            db.execute(f"UPDATE effects SET {column} = ? WHERE effect = 'refund_payment'", (value,))  # noqa: S608
        steps = settle(store, _adapter(tmp_path, sim))
        found = refund(store)
        assert found.quarantined and found.phase == "prepared" and found.attempts == 0, found
        assert found.last_error is not None and found.last_error.startswith("PW644")
        assert any(s.action == "refuse" for s in steps)
        assert sim.state()["writes"] == 0 and not [r for r in sim.state()["records"] if "refunds" in r["path"]]


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_budget_ceiling_and_tool_calls_refuse_before_anything_is_written(backend: str, tmp_path: Path) -> None:
    big = {"amount": "300.00", "order_id": "ORD-3003", "reason": "wrong_item"}
    with refund_store(backend, tmp_path, "repeatable") as url, open_store(url) as store:
        issued(store, "r1", big)  # 300.00 carried; a second 300.00 would carry 600.00 > the budget's 500.00
        settle_calls(store, tmp_path, T0 + 30)
        before = store.dump()
        with pytest.raises(CommandError) as ceiling:
            submit(store, "r1", "issue", "support_agent", "sam", "issue-2", clock=TestClock(T0 + 40))
        assert ceiling.value.code == "PW525" and store.dump() == before
    (tmp_path / "tight").mkdir()
    with refund_store(backend, tmp_path / "tight", "tight") as url, open_store(url) as store:
        issued(store, "r1")  # read_order + refund_payment: the budget's two calls
        settle_calls(store, tmp_path / "tight", T0 + 30)
        before = store.dump()
        with pytest.raises(CommandError) as tools:
            submit(store, "r1", "issue", "support_agent", "sam", "issue-2", clock=TestClock(T0 + 40))
        assert tools.value.code == "PW524" and store.dump() == before


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fault", ["wrong_key", "oversized", "not_utf8"])
def test_a_hostile_answer_is_quarantined_not_success(backend: str, fault: str, tmp_path: Path, sim: Simulator) -> None:
    with refund_store(backend, tmp_path, "idempotent") as url, open_store(url) as store:
        issued(store)
        sim.queue(fault)
        settle(store, _adapter(tmp_path, sim))
        found = refund(store)
        assert found.quarantined and found.phase == "uncertain" and found.provider_ref is None, found
        assert sim.state()["writes"] == 1  # it happened at the provider; the runtime does not call it success
