"""Crash matrix over the effect lifecycle: SIGKILL after each persisted step, real processes, both backends.

`pactwright worker --drain --providers FILE` runs as its own process with
`PACTWRIGHT_TEST_EFFECT_CRASH_AT` set to a crash point (runtime/effect_worker.py):
it kills itself with SIGKILL right there. A second worker, started after the
first one's lease ran out, must bring the refund to the outcome its
strategy declares, and the simulator (a real HTTP server that counts the
writes it performed) must show no extra write: one refund for every
strategy that promises it, `once` included (it happened before the crash,
and the runtime says "may have occurred" rather than sending it again).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from pactwright.runtime.effect_ops import list_effects
from pactwright.runtime.effect_worker import CRASH_ENV, CRASH_POINTS
from pactwright.runtime.provider_sim import Simulator, start_simulator
from pactwright.runtime.store import open_store
from tests.effect_env import T0, issued, providers_file, refund_store
from tests.signed_bundles import BACKENDS

# (strategy, crash point) -> (the refund's phase once a new worker resumed, the provider's writes).
# Before the request left (after_claim, after_dispatched) the row is already `dispatched`: the runtime
# cannot tell that from a lost response, so each strategy does what it declares for an unknown outcome;
# after it left (after_send) the provider holds the write; after the outcome was committed, nothing is left.
PRE = ("after_claim", "after_dispatched")
EXPECTED = {
    **{("idempotent", p): ("acknowledged", 1) for p in PRE},
    ("idempotent", "after_send"): ("acknowledged", 1),  # sent again with the same key: the provider dedupes
    ("idempotent", "after_outcome"): ("acknowledged", 1),
    **{("reconcilable", p): ("acknowledged", 1) for p in PRE},  # looked up: not applied, so sent once
    ("reconcilable", "after_send"): ("reconciled_recovered", 1),  # looked up: applied
    ("reconcilable", "after_outcome"): ("acknowledged", 1),
    **{("once", p): ("abandoned_uncertain", 0) for p in PRE},  # never sent again: "may have occurred"
    ("once", "after_send"): ("abandoned_uncertain", 1),
    ("once", "after_outcome"): ("acknowledged", 1),
}
STRATEGIES = ("idempotent", "once", "reconcilable")


@pytest.fixture
def sim() -> Iterator[Simulator]:
    with start_simulator() as simulator:
        yield simulator


def _worker(url: str, providers: Path, clock: Path, crash: str | None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != CRASH_ENV}
    if crash is not None:
        env[CRASH_ENV] = crash
    return subprocess.run(
        [sys.executable, "-m", "pactwright.cli.main", "worker", "--store", url, "--drain", "--providers",
         str(providers), "--clock-file", str(clock), "--lease-seconds", "5"],
        capture_output=True, text=True, env=env, timeout=120, check=False,
    )  # fmt: skip


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("point", CRASH_POINTS)
def test_a_worker_killed_at_each_step_resumes_to_the_declared_outcome(
    backend: str, strategy: str, point: str, tmp_path: Path, sim: Simulator
) -> None:
    with refund_store(backend, tmp_path, strategy) as url:
        with open_store(url) as store:
            issued(store)
            # only the refund is sent: read_order's row is taken out of the way (its own retries are not the point)
            with store.transaction(exclusive=False) as db:
                db.execute("UPDATE effects SET phase = 'acknowledged' WHERE effect = 'read_order'")
        providers = providers_file(tmp_path, sim.url)
        clock = tmp_path / "clock"
        clock.write_text(f"{T0 + 30}\n")
        crashed = _worker(url, providers, clock, point)
        assert crashed.returncode == -signal.SIGKILL, (crashed.returncode, crashed.stderr)
        for n in range(3):  # past the dead worker's lease, then past each back-off
            clock.write_text(f"{T0 + 30 + 10_000 * (n + 1)}\n")
            resumed = _worker(url, providers, clock, None)
            assert resumed.returncode == 0, resumed.stderr
        with open_store(url) as store:
            refund = next(r for r in list_effects(store) if r.effect == "refund_payment")
        phase, writes = EXPECTED[(strategy, point)]
        assert refund.phase == phase, (point, refund.to_json())
        assert sim.state()["writes"] == writes, sim.state()
