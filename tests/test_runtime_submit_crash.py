"""A command process killed with SIGKILL after writing every row and before its commit, on both backends.

`PACTWRIGHT_TEST_SUBMIT_CRASH_AT=before_commit` (runtime/commands.py, a
TEST-ONLY hook) makes `submit` kill its own process right there: the event,
outbox row, effect rows, idempotency key and evidence record are written in
the open transaction. The store must hold none of them afterwards (every
table equal to before), and the same command, retried with the same key,
must commit exactly once. The scheduler goes through the same command path:
killed in the middle of firing a deadline, a second scan settles the
agreement once.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from pactwright.runtime import show
from pactwright.runtime.commands import CRASH_ENV
from pactwright.runtime.store import open_store
from tests.signed_bundles import dump
from tests.test_runtime_commands import T0, WINDOW, _delivered, _opened, url

__all__ = ["url"]  # the fixture (both backends), reused from the command tests


def _cli(*args: str, crash: bool, clock: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != CRASH_ENV}
    if crash:
        env[CRASH_ENV] = "before_commit"
    return subprocess.run([sys.executable, "-m", "pactwright.cli.main", *args, "--clock-file", str(clock)],
                          capture_output=True, text=True, env=env, timeout=120, check=False)  # fmt: skip


def test_a_submit_killed_before_its_commit_leaves_nothing_and_its_retry_commits_once(url: str, tmp_path: Path) -> None:
    _opened(url)
    clock = tmp_path / "clock"
    clock.write_text(f"{T0 + 10}\n")
    before = dump(url)
    args = ("submit", "a1", "fund", "--as", "buyer:alice", "--key", "fund-1", "--store", url)
    crashed = _cli(*args, crash=True, clock=clock)
    assert crashed.returncode == -signal.SIGKILL, crashed.stderr
    assert dump(url) == before  # nothing of the command survived the kill
    done = _cli(*args, crash=False, clock=clock)
    assert done.returncode == 0, done.stderr
    again = _cli(*args, crash=False, clock=clock)
    assert again.returncode == 0 and again.stdout.startswith("already committed a1/1 fund")
    with open_store(url) as store:
        view = show(store, "a1")
    assert (view.agreement.state, view.agreement.version) == ("funded", 1)


def test_a_scheduler_killed_while_firing_a_deadline_settles_once_on_the_next_scan(url: str, tmp_path: Path) -> None:
    _delivered(url)
    clock = tmp_path / "clock"
    clock.write_text(f"{T0 + 60 + WINDOW}\n")  # the end of the refund window: auto_release is due
    before = dump(url)
    crashed = _cli("scheduler", "--store", url, "--once", crash=True, clock=clock)
    assert crashed.returncode == -signal.SIGKILL, crashed.stderr
    assert dump(url) == before
    for _ in range(2):  # a second scheduler after the first settled finds nothing due
        done = _cli("scheduler", "--store", url, "--once", crash=False, clock=clock)
        assert done.returncode == 0, done.stderr
    with open_store(url) as store:
        view = show(store, "a1")
    assert view.agreement.state == "released" and view.agreement.version == 3
