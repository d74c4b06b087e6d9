"""The scheduler on both backends: deadlines fire once, through the command path, as the clock role.

Time is a clock file moved by the test (never a sleep past a deadline). Two
scheduler processes racing over the same agreements must settle each one
exactly once; the loop stops cleanly on SIGTERM.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pactwright.errors import PactwrightError
from pactwright.runtime import TestClock, open_agreement, show, submit
from pactwright.runtime.scheduler import plan, scan
from pactwright.runtime.store import open_store
from tests.signed_bundles import dump
from tests.test_runtime_commands import ROOT, T0, WINDOW, _cli, _delivered, _opened, url

__all__ = ["url"]  # the fixture, reused from the command tests

DEADLINE = T0 + 60 + WINDOW  # delivered at T0 + 60, refund window 14d


def _clock(tmp_path: Path, seconds: int) -> str:
    path = tmp_path / "clock"
    path.write_text(f"{seconds}\n")
    return str(path)


def test_once_before_the_deadline_does_nothing(url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _delivered(url)
    before = dump(url)
    code, out, err = _cli("scheduler", "--store", url, "--once", "--clock-file", _clock(tmp_path, DEADLINE - 1),
                          "--format", "json", capsys=capsys)  # fmt: skip
    assert code == 0, err
    doc = json.loads(out)
    assert doc["scanned"] == 1 and doc["due"] == [] and doc["committed"] == []
    assert dump(url) == before


@pytest.mark.parametrize(("price", "platform", "seller"), [("64.90", 649, 5841), ("1.09", 11, 98)])
def test_once_after_the_deadline_auto_releases_with_exact_balances(
    url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], price: str, platform: int, seller: int
) -> None:
    _delivered(url, price=price)
    clock = _clock(tmp_path, DEADLINE)
    code, out, err = _cli("scheduler", "--store", url, "--once", "--clock-file", clock, capsys=capsys)
    assert code == 0, err
    assert "1 committed" in out and "committed a1/3" in out
    with open_store(url) as store:
        view = show(store, "a1")
        a = view.agreement
        assert (a.state, a.version) == ("released", 3)
        assert a.balances["escrow"] == 0 and a.balances["platform"] == platform and a.balances["seller"] == seller
        last = view.last_events[-1]
        assert (last["transition"], last["actor"], last["committed_at"]) == ("auto_release", "scheduler:scheduler",
                                                                             DEADLINE)  # fmt: skip
        with store.transaction(write=False) as db:
            keys = [str(k) for (k,) in db.query("SELECT idempotency_key FROM events WHERE agreement_id = 'a1'")]
        assert f"sched/auto_release/{DEADLINE}" in keys
    after = dump(url)
    code, out, _ = _cli("scheduler", "--store", url, "--once", "--clock-file", clock, capsys=capsys)
    assert code == 0 and "0 due" in out
    assert dump(url) == after


def test_refund_of_an_undelivered_milestone_and_the_key_per_deadline(url: str) -> None:
    _opened(url)
    with open_store(url) as store:
        submit(store, "a1", "fund", "buyer", "alice", "f", clock=TestClock(T0))
        assert scan(store, TestClock(T0 + WINDOW - 1)).due == []
        result = scan(store, TestClock(T0 + WINDOW))
        assert result.committed == ["a1/2"]
        assert result.due[0].key == f"sched/refund_undelivered/{T0 + WINDOW}"
        a = show(store, "a1").agreement
        assert a.state == "refunded" and a.balances["buyer"] == 6490 and a.balances["escrow"] == 0


def test_a_replayed_plan_is_answered_by_its_key_and_a_stale_one_is_refused(url: str) -> None:
    """A second scheduler that read the agreement before the first one's commit sends the same key."""
    _delivered(url)
    with open_store(url) as store:
        from pactwright.runtime._agreement import read
        from pactwright.runtime.scheduler import fire

        with store.transaction(write=False) as db:
            from pactwright.runtime._agreement import load_bundle

            agreement = read(db, "a1", lock=False)
            due = plan(load_bundle(store, db, agreement), agreement, DEADLINE)
        assert due is not None
        assert fire(store, due, TestClock(DEADLINE)) == "committed"
        assert fire(store, due, TestClock(DEADLINE + 5)) == "replayed"
        events = len(store.dump()["events"])
        # A buyer's release that read the same version is refused as stale.
        with pytest.raises(Exception, match="STALE_AGREEMENT_VERSION"):
            submit(store, "a1", "release", "buyer", "alice", "r", expect_version=2, clock=TestClock(DEADLINE))
        assert len(store.dump()["events"]) == events


def _scheduler(url: str, clock: str, *extra: str) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen(
        [sys.executable, "-m", "pactwright.cli.main", "scheduler", "--store", url, "--clock-file", clock, *extra],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT, env=env,
    )  # fmt: skip


def test_two_scheduler_processes_at_once_settle_each_agreement_exactly_once(url: str, tmp_path: Path) -> None:
    ids = [f"s{n:02d}" for n in range(30)]
    for agreement_id in ids:
        _delivered(url, agreement_id, "10.01")
    clock = _clock(tmp_path, DEADLINE)
    procs = [_scheduler(url, clock, "--once", "--format", "json") for _ in range(2)]
    outs = [p.communicate(timeout=120) for p in procs]
    assert all(p.returncode == 0 for p in procs), outs
    docs = [json.loads(out) for out, _ in outs]
    committed = [e for d in docs for e in d["committed"]]
    assert sorted(committed) == sorted(f"{i}/3" for i in ids)
    others = sum(d["replayed"] + sum(d["refused"].values()) for d in docs)
    assert all(set(d["refused"]) <= {"PW509", "PW510", "PW511"} for d in docs)
    assert all(not d["failures"] for d in docs)
    with open_store(url) as store:
        rows = store.dump()
        for agreement_id in ids:
            settles = [r for r in rows["events"] if r[0] == agreement_id and r[3] == "auto_release"]
            assert len(settles) == 1, agreement_id
            assert show(store, agreement_id).agreement.balances["escrow"] == 0
        assert len([r for r in rows["outbox"] if r[3].endswith("/3/0")]) == len(ids)
    print(f"two schedulers over {len(ids)} agreements: {len(committed)} committed, {others} replayed or refused")


def test_the_loop_fires_when_time_passes_and_stops_on_sigterm(url: str, tmp_path: Path) -> None:
    _delivered(url)
    clock = _clock(tmp_path, DEADLINE - 1)
    proc = _scheduler(url, clock, "--interval", "0.1")
    try:
        time.sleep(0.5)
        with open_store(url) as store:
            assert show(store, "a1").agreement.state == "delivered"
        Path(clock).write_text(f"{DEADLINE}\n")
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            with open_store(url) as store:
                if show(store, "a1").agreement.state == "released":
                    break
            time.sleep(0.1)
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err
    assert "committed a1/3" in out and "Traceback" not in err
    with open_store(url) as store:
        assert show(store, "a1").agreement.state == "released"


def test_a_bad_interval_and_a_missing_store_are_clear_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = _cli("scheduler", "--store", str(tmp_path / "none.db"), "--once", capsys=capsys)
    assert code == 2 and err.startswith("error[PW700]")
    code, _, err = _cli("scheduler", "--store", str(tmp_path / "none.db"), "--interval", "0", capsys=capsys)
    assert code == 2 and err.startswith("error[PW001]")
    assert not (tmp_path / "none.db").exists()


NOTE_THEN_EXPIRE = """\
pact "att.note_then_expire" version "1.0.0"
currency EUR scale 2
role buyer
clock timer
state placed initial
state funded
state noted
state done final
transition fund: placed -> funded {
  by buyer
  stamp funded_at
}
transition note: funded -> noted {
  by buyer
}
transition expire: funded, noted -> done {
  by timer
  when now >= funded_at + 1d
}
property funded_ends: reached(funded) leads_to final
"""


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_a_party_cannot_take_the_schedulers_key_for_a_deadline(backend: str, tmp_path: Path) -> None:
    """The scheduler's keys (`sched/...`) are the clock role's alone.

    Once broken: the buyer committed `note` under `sched/expire/DEADLINE`,
    the scheduler's key for `expire`; at the deadline the scheduler's
    `expire` met that key with another payload (PW515) on every scan, so
    `funded_ends` (which the verifier says holds) never came true.
    """
    from tests.test_liveness_attacks import DAY, _store
    from tests.test_liveness_attacks import T0 as START

    deadline = START + DAY
    with _store(NOTE_THEN_EXPIRE, tmp_path, backend=backend) as (store, report):
        assert report["properties"][0]["verdict"] == "holds"
        open_agreement(store, "att.note_then_expire", {}, {"buyer": "bea"}, agreement_id="a1",
                       clock=TestClock(START))  # fmt: skip
        submit(store, "a1", "fund", "buyer", "bea", "fund", clock=TestClock(START))
        before = store.dump()
        for key in (f"sched/expire/{deadline}", "sched/anything", "sched/"):
            with pytest.raises(PactwrightError) as refused:
                submit(store, "a1", "note", "buyer", "bea", key, clock=TestClock(START + 10))
            assert refused.value.code == "PW519" and "reserved" in refused.value.message
        assert store.dump() == before
        submit(store, "a1", "note", "buyer", "bea", "Sched/expire", clock=TestClock(START + 10))  # only the prefix
        result = scan(store, TestClock(deadline + 5))
        assert result.committed == ["a1/3"] and result.due[0].key == f"sched/expire/{deadline}"
        assert show(store, "a1").agreement.state == "done"
