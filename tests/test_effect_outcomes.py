"""Effect outcomes in guards (new in 1.1), evaluated by the runtime from the effect lifecycle.

policies/refund_outcomes.pact is activated into a real store; `refund`
commits a `prepared` call of `refund_payment`, which the effect worker sends
over HTTP to the provider simulator. `confirm` (`when
acknowledged(refund_payment) or reconciled(refund_payment)`) and
`close_after_abandon` (`when abandoned(refund_payment)`) are then judged from
the call's phase in the effects table, exactly as the verifier's call sites
are: and a command whose guard asks `abandoned(E)` handles the abandon, so it
is not refused PW526 (EFFECT_ABANDONED_UNCERTAIN) for E.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path

import pytest

from pactwright.errors import CommandError
from pactwright.runtime import TestClock, open_agreement, show, submit
from pactwright.runtime._command_effects import tally
from pactwright.runtime.activation import FixedClock, activate_files
from pactwright.runtime.effect_http import Credentials, HttpAdapter, load_providers
from pactwright.runtime.effect_ops import abandon, reconcile
from pactwright.runtime.effect_worker import EffectWorker
from pactwright.runtime.provider_sim import Simulator, start_simulator
from pactwright.runtime.store import Store, open_store
from tests.signed_bundles import BACKENDS, NOW, compile_verified, default_trust, sign, temporary_store

ROOT = Path(__file__).resolve().parent.parent
POLICY = ROOT / "policies" / "refund_outcomes.pact"
T0 = 1780315200  # 2026-06-01T12:00:00Z
PARAMS = {"amount": "64.90", "order_id": "ORD-1001"}
PARTIES = {"agent": "sam", "ops": "olga"}


@pytest.fixture
def sim() -> Iterator[Simulator]:
    with start_simulator() as simulator:
        yield simulator


@contextmanager
def outcome_store(backend: str, directory: Path) -> Iterator[Store]:
    files, verdict = compile_verified(POLICY.read_bytes(), POLICY.name)
    assert verdict == "pass"
    with temporary_store(backend, directory) as url, open_store(url) as store:
        activate_files(store, sign(files), default_trust(), clock=FixedClock(datetime.fromisoformat(NOW)))
        with store.transaction(exclusive=False) as db:  # `olga` may also resolve parked calls
            db.execute("INSERT INTO parties (party, role, public_key, added_at) VALUES (?, ?, NULL, ?)",
                       ("olga", "operator", T0))  # fmt: skip
        open_agreement(store, "example.refund_outcomes", PARAMS, PARTIES, agreement_id="r1", clock=TestClock(T0))
        submit(store, "r1", "refund", "agent", "sam", "refund", clock=TestClock(T0 + 10))
        yield store


def _adapter(directory: Path, sim: Simulator) -> HttpAdapter:
    routes = directory / "providers.toml"
    routes.write_text(f'[destination."https://api.payments.example.com/refunds"]\nendpoint = "{sim.url}/refunds"\n')
    return HttpAdapter(load_providers(routes), Credentials())


def _settle(store: Store, adapter: HttpAdapter, rounds: int = 6) -> None:
    for n in range(rounds):
        if not EffectWorker(store, adapter, TestClock(T0 + 30 + n * 1000)).drain() and n > 0:
            return


def _refused(store: Store, transition: str, role: str, party: str, at: int) -> str:
    before = store.dump()
    with pytest.raises(CommandError) as refused:
        submit(store, "r1", transition, role, party, f"{transition}-{at}", clock=TestClock(at))
    assert store.dump() == before
    return refused.value.code


def _outcomes(store: Store) -> dict[str, frozenset[str]]:
    with store.transaction(write=False) as db:
        return dict(tally(db, "r1").outcomes)


@pytest.mark.parametrize("backend", BACKENDS)
def test_confirm_waits_for_the_providers_acknowledgement(backend: str, tmp_path: Path, sim: Simulator) -> None:
    with outcome_store(backend, tmp_path) as store:
        # Prepared, not yet sent: no outcome holds, so neither guard does.
        assert _refused(store, "confirm", "agent", "sam", T0 + 20) == "PW512"
        assert _refused(store, "close_after_abandon", "ops", "olga", T0 + 20) == "PW512"
        _settle(store, _adapter(tmp_path, sim))
        assert _outcomes(store)["acknowledged"] == {"refund_payment"}
        assert _refused(store, "close_after_abandon", "ops", "olga", T0 + 9000) == "PW512"
        submit(store, "r1", "confirm", "agent", "sam", "confirm", clock=TestClock(T0 + 9000))
        agreement = show(store, "r1").agreement
        assert agreement.state == "confirmed" and agreement.balances["customer"] == 6490


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_refund_found_by_reconciliation_can_be_confirmed(backend: str, tmp_path: Path, sim: Simulator) -> None:
    with outcome_store(backend, tmp_path) as store:
        sim.queue("lost_response", "lookup_unknown")
        _settle(store, _adapter(tmp_path, sim), rounds=1)
        assert _refused(store, "confirm", "agent", "sam", T0 + 3000) == "PW527"  # parked: its outcome is unknown
        reconcile(store, "r1", "refund_payment", "recovered_acknowledgement", "olga", provider_ref="rf_1",
                  clock=TestClock(T0 + 3100))  # fmt: skip
        assert _outcomes(store) == {"acknowledged": set(), "reconciled": {"refund_payment"}, "abandoned": set()}
        submit(store, "r1", "confirm", "agent", "sam", "confirm", clock=TestClock(T0 + 3200))
        assert show(store, "r1").agreement.state == "confirmed"


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_guard_that_asks_abandoned_handles_the_abandon(backend: str, tmp_path: Path, sim: Simulator) -> None:
    with outcome_store(backend, tmp_path) as store:
        sim.queue("lost_response", "lookup_unknown")
        _settle(store, _adapter(tmp_path, sim), rounds=1)
        assert _refused(store, "close_after_abandon", "ops", "olga", T0 + 3000) == "PW527"
        abandon(store, "r1", "refund_payment", "provider cannot say; ticket PAY-9", "olga", clock=TestClock(T0 + 3100))
        assert _outcomes(store)["abandoned"] == {"refund_payment"}
        # `confirm` reads the refund's outcome without handling the abandon: refused as before 1.1.
        assert _refused(store, "confirm", "agent", "sam", T0 + 3200) == "PW526"
        # `close_after_abandon` asks `abandoned(refund_payment)`: it is what handles it, so it is not refused.
        submit(store, "r1", "close_after_abandon", "ops", "olga", "close", clock=TestClock(T0 + 3300))
        agreement = show(store, "r1").agreement
        assert agreement.state == "written_off" and agreement.balances.get("customer", 0) == 0
        assert sim.state()["writes"] == 1
