"""A worker killed at each step of sending a compensation: resumed, it never sends a given-up one again.

`go` calls `hold` (compensate with `release_hold`, itself `once`) and then
`charge` (`once`). `hold` is acknowledged and `charge` fails for good, so
`hold` needs `release_hold`. A `pactwright worker --drain` process is then
killed with SIGKILL at each crash point of that compensation's send
(runtime/effect_worker.py `CRASH_POINTS`); later workers, past the dead
one's lease, must leave it as `once` declares and never send it again. When
the compensation was given up (`abandoned_uncertain`), the call it was to
undo leaves the due set for an operator: no later worker claims either row.
Real processes, real SIGKILL, a real HTTP provider, both backends.
"""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from pactwright.runtime.effect_worker import CRASH_POINTS, NEVER
from pactwright.runtime.provider_sim import start_simulator
from tests.signed_bundles import BACKENDS
from tests.test_abandon_compensate_attacks import ONCE_COMPENSATION
from tests.test_budget_inflight_attacks import _adapter_for, _any_store, _open, _step, _submit
from tests.test_effect_crash import _worker
from tests.test_liveness_attacks import T0

# crash point -> (phase of `release_hold`, phase of `hold`, requests `release_hold` reached the provider with).
# Before the request left, the row is already `dispatched`: `once` cannot tell that from a lost response,
# so it is given up unsent; after it left, the provider applied it, and `once` still may not ask again.
EXPECTED = {
    "after_claim": ("abandoned_uncertain", "compensation_required", 0),
    "after_dispatched": ("abandoned_uncertain", "compensation_required", 0),
    "after_send": ("abandoned_uncertain", "compensation_required", 1),
    "after_outcome": ("acknowledged", "compensated", 1),
}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("point", CRASH_POINTS)
def test_a_worker_killed_while_compensating_resumes_and_never_resends_a_given_up_compensation(
    backend: str, point: str, tmp_path: Path
) -> None:
    with _any_store(ONCE_COMPENSATION, tmp_path, backend) as (store, report), start_simulator() as sim:
        adapter = _adapter_for(tmp_path, sim, "hold", "charge", "release_hold")
        routes = tmp_path / "providers.toml"  # the file `_adapter_for` wrote: the workers route the same way
        _open(store, "att.once_compensation", {})
        _submit(store, "go", "go", T0)
        assert _step(store, adapter, T0 + 30).phase == "acknowledged"
        sim.queue("error_5xx")
        assert _step(store, adapter, T0 + 60).phase == "failed"  # `charge`, `once`: failed for good
        clock = tmp_path / "clock"
        clock.write_text(f"{T0 + 90}\n")
        crashed = _worker(report["url"], routes, clock, point)
        assert crashed.returncode == -signal.SIGKILL, (crashed.returncode, crashed.stderr)
        for n in range(3):  # past the dead worker's lease, then past any back-off
            clock.write_text(f"{T0 + 90 + 10_000 * (n + 1)}\n")
            resumed = _worker(report["url"], routes, clock, None)
            assert resumed.returncode == 0, resumed.stderr
        with store.transaction(write=False) as db:
            rows = {str(i): (str(p), int(a), int(t)) for i, p, a, t in
                    db.query("SELECT id, phase, attempts, next_at FROM effects ORDER BY id")}  # fmt: skip
        records = sim.state()["records"]
        requests = sim.state()["requests"]
    compensation, original, sent = EXPECTED[point]
    assert (rows["a1/1/e0/c"][0], rows["a1/1/e0"][0], rows["a1/1/e1"][0]) == (compensation, original, "failed")
    # `hold` and `charge` reached the provider once each, `release_hold` as `once` allows: never twice.
    assert requests == 2 + sent, (point, requests, rows)
    assert [r["path"] for r in records] == ["/hold", *["/release_hold"] * sent], records
    if compensation == "abandoned_uncertain":
        assert rows["a1/1/e0"][2] == NEVER, rows  # the call to undo left the due set: an operator decides
        assert rows["a1/1/e0/c"][1] == 1, rows  # one attempt, the dead worker's; no later worker sent it
