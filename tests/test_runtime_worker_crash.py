"""The crash matrix: a worker process killed with SIGKILL at each step of delivery, then restarted.

The kill is real: `PACTWRIGHT_TEST_CRASH_AT=POINT` (a test-only hook read
by runtime/worker.py, documented in docs/runtime.md "Crash safety") makes
the worker send itself SIGKILL at that point. A second worker without the
hook then drains the outbox. For every point, on both backends, the ledger
and the outbox must equal those of a run that never crashed: every
reference applied once, its postings the expected ones, the same balances,
every entry delivered, one `delivered` evidence record per entry.

Compared: ledger references, postings and balances; outbox reference,
status, expected and delivered postings, last error. Not compared:
`attempts` (a claim that died is an attempt), lease columns and times, and
the evidence records' `at` and hashes (the restart runs after the lease
expired, so later in trusted time).
"""

from __future__ import annotations

import json
import signal
from pathlib import Path
from typing import Any

import pytest

from pactwright.runtime.ledger_db import open_ledger
from pactwright.runtime.worker import CRASH_ENV, CRASH_POINTS
from tests.signed_bundles import BACKENDS
from tests.test_runtime_worker import T0, environment, evidence, outbox_rows, run_steps, worker_process

AGREEMENTS = ("c1", "c2")


def _drain(url: str, clock: Path, crash_at: str | None = None) -> tuple[int, str, str]:
    process = worker_process(url, clock, "--drain", env={CRASH_ENV: crash_at} if crash_at else None)
    out, err = process.communicate(timeout=120)
    return process.returncode, out, err


def _result(url: str) -> dict[str, Any]:
    with open_ledger(None, url, create=False) as ledger:
        references = ledger.references()
        postings = {r: ledger.postings(r) for r in references}
        balances = ledger.balances()
    outbox = [(r["reference"], r["status"], json.loads(r["expected"]), json.loads(r["delivered"] or "null"),
               r["last_error"]) for r in outbox_rows(url)]  # fmt: skip
    delivered = {a: [e["reference"] for e in evidence(url, a) if e["kind"] == "delivered"] for a in AGREEMENTS}
    # Commit order is per agreement: c2 may pass c1 while c1's entry waits out a dead worker's lease.
    per_agreement = {a: [r for r in references if r.startswith(f"{a}/")] for a in AGREEMENTS}
    return {"references": sorted(references), "order": per_agreement, "postings": postings, "balances": balances,
            "outbox": outbox, "evidence": delivered}  # fmt: skip


def _prepare(url: str) -> None:
    for agreement_id in AGREEMENTS:
        run_steps(url, agreement_id)


@pytest.fixture(scope="module", params=BACKENDS)
def uncrashed(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    directory = tmp_path_factory.mktemp(f"uncrashed-{request.param}")
    with environment(request.param, directory) as url:
        _prepare(url)
        clock = directory / "clock"
        clock.write_text(f"{T0}\n")
        code, _, err = _drain(url, clock)
        assert code == 0, err
        return {"backend": request.param, "result": _result(url)}


@pytest.mark.parametrize("point", CRASH_POINTS)
def test_a_worker_killed_at_each_step_loses_and_duplicates_nothing(
    uncrashed: dict[str, Any], point: str, tmp_path: Path
) -> None:
    with environment(uncrashed["backend"], tmp_path) as url:
        _prepare(url)
        clock = tmp_path / "clock"
        clock.write_text(f"{T0}\n")
        code, _, err = _drain(url, clock, crash_at=point)
        assert code == -signal.SIGKILL, f"the worker did not die at {point}: {code} {err}"
        killed = next(r for r in outbox_rows(url) if r["lease_owner"] is not None or r["status"] != "delivered")
        if point == "after_mark":
            assert outbox_rows(url)[0]["status"] == "delivered" and outbox_rows(url)[0]["lease_owner"] is None
        else:
            assert killed["reference"] == "c1/1/0" and killed["status"] == "pending"
            assert killed["lease_owner"] is not None  # the dead worker's lease is still on it
            # Before the lease expires nobody takes the entry, and nothing behind it in c1 moves.
            code, out, err = _drain(url, clock)
            assert code == 0, err
            assert "c1/" not in out
        clock.write_text(f"{T0 + 61}\n")  # past the 60-second lease
        code, out, err = _drain(url, clock)
        assert code == 0, err
        after = _result(url)
    assert after == uncrashed["result"]
    assert after["references"].count("c1/1/0") == 1
    print(f"{uncrashed['backend']} {point}: {len(after['references'])} references, each applied once")
