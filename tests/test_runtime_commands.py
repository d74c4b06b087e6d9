"""Agreements and the command path on both backends: open, submit, show, idempotency, refusals, races.

Every test runs against a real SQLite file and a real PostgreSQL schema
(tests.signed_bundles.temporary_store); PostgreSQL tests fail, never skip.
A refusal must change nothing: every table is dumped before and after.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pactwright.cli.main import main
from pactwright.errors import CommandError, PactwrightError
from pactwright.runtime import TestClock, open_agreement, show, submit
from pactwright.runtime.activation import FixedClock, activate_files
from pactwright.runtime.store import open_store
from pactwright.runtime.store._migrations import LATEST
from tests.signed_bundles import BACKENDS, NOW, PACT_ID, default_trust, dump, signed, temporary_store

ROOT = Path(__file__).resolve().parent.parent
V1_STORE = ROOT / "tests" / "fixtures" / "stores" / "v1.sqlite"
T0 = 1780315200  # 2026-06-01T12:00:00Z
WINDOW = 14 * 86400
PARTIES = {"buyer": "alice", "seller": "bob", "arbiter": "carol"}


@pytest.fixture(params=BACKENDS)
def url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    with temporary_store(request.param, tmp_path) as store_url:
        with open_store(store_url) as store:
            activate_files(store, signed("1.0.0"), default_trust(), clock=FixedClock(datetime.fromisoformat(NOW)))
        yield store_url


def _opened(url: str, agreement_id: str = "a1", price: str = "64.90", clock: TestClock | None = None) -> None:
    with open_store(url) as store:
        open_agreement(
            store, PACT_ID, {"price": price}, PARTIES, agreement_id=agreement_id, clock=clock or TestClock(T0)
        )


def _delivered(url: str, agreement_id: str = "a1", price: str = "64.90") -> None:
    _opened(url, agreement_id, price)
    with open_store(url) as store:
        submit(store, agreement_id, "fund", "buyer", "alice", "fund", clock=TestClock(T0))
        submit(store, agreement_id, "deliver", "seller", "bob", "deliver", clock=TestClock(T0 + 60))


def _cli(*args: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    assert "Traceback" not in err
    return code, out, err


# Schema ---------------------------------------------------------------------------


def test_a_store_made_by_the_previous_release_migrates_in_place(tmp_path: Path) -> None:
    copy = tmp_path / "v1.sqlite"
    shutil.copy(V1_STORE, copy)
    with sqlite3.connect(copy) as conn:
        assert conn.execute("SELECT MAX(version) FROM schema_migrations").fetchone() == (1,)
    before = dump(str(copy))
    with open_store(str(copy)) as store:
        assert store.schema_version() == LATEST
        active = store.active(PACT_ID)
        assert active is not None and active.pact_version == "1.0.0"
        assert store.verify_all() == []
        open_agreement(store, PACT_ID, {"price": "10.00"}, PARTIES, agreement_id="old", clock=TestClock(T0))
        submit(store, "old", "fund", "buyer", "alice", "k", clock=TestClock(T0))
        after = store.dump()
    for table in ("bundles", "bundle_files", "activations", "active"):
        assert after[table] == before[table]
    assert len(after["events"]) == 1


# The happy path through the CLI, at rounding edges ------------------------------------


@pytest.mark.parametrize(("price", "platform", "seller"), [("64.90", "649", "5841"), ("64.91", "650", "5841"),
                         ("1.00", "10", "90"), ("1.09", "11", "98"), ("10000.00", "100000", "900000")])  # fmt: skip
def test_marketplace_happy_path_through_the_cli(
    url: str, price: str, platform: str, seller: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    clock = tmp_path / "clock"
    clock.write_text(f"{T0}\n")
    parties = [x for role, party in PARTIES.items() for x in ("--party", f"{role}={party}")]
    opened = _cli("open", PACT_ID, "--store", url, "--id", "m1", "--param", f"price={price}", *parties,
                  "--clock-file", str(clock), capsys=capsys)  # fmt: skip
    assert opened[0] == 0, opened[2]
    for n, (transition, actor) in enumerate([("fund", "buyer:alice"), ("deliver", "seller:bob"),
                                             ("release", "buyer:alice")]):  # fmt: skip
        code, out, err = _cli("submit", "m1", transition, "--as", actor, "--key", f"k{n}", "--store", url,
                              "--expect-version", str(n), "--clock-file", str(clock), "--format", "json",
                              capsys=capsys)  # fmt: skip
        assert code == 0, err
        assert json.loads(out)["version"] == n + 1
    code, out, err = _cli("show", "m1", "--store", url, "--format", "json", capsys=capsys)
    assert code == 0, err
    doc = json.loads(out)
    assert doc["state"] == "released" and doc["version"] == 3
    assert doc["balances"]["escrow"] == "0"
    assert doc["balances"]["platform"] == platform
    assert doc["balances"]["seller"] == seller
    assert int(platform) + int(seller) == -int(doc["balances"]["world"])
    assert [e["reference"] for e in doc["pending_outbox"]] == ["m1/1/0", "m1/3/0"]
    assert [e["transition"] for e in doc["last_events"]] == ["fund", "deliver", "release"]
    assert _cli("show", "m1", "--store", url, capsys=capsys)[0] == 0


def test_time_comes_from_the_clock_and_deadlines_pass_with_it(url: str) -> None:
    _delivered(url)
    with open_store(url) as store:
        with pytest.raises(CommandError) as caught:
            submit(store, "a1", "auto_release", "scheduler", "scheduler", "auto", clock=TestClock(T0 + 60 + WINDOW - 1))
        assert caught.value.code == "PW512"
        assert "now >= delivered_at + refund_window" in caught.value.message
        result = submit(
            store, "a1", "auto_release", "scheduler", "scheduler", "auto", clock=TestClock(T0 + 60 + WINDOW)
        )
        assert result.committed_at == T0 + 60 + WINDOW
        assert show(store, "a1").agreement.stamps == {"funded_at": T0, "delivered_at": T0 + 60}


def test_a_later_activation_does_not_change_a_running_agreement(url: str) -> None:
    _opened(url)
    with open_store(url) as store:
        first = show(store, "a1").agreement.manifest_hash
        activate_files(store, signed("1.1.0"), default_trust(), clock=FixedClock(datetime.fromisoformat(NOW)))
        open_agreement(store, PACT_ID, {"price": "5.00"}, PARTIES, agreement_id="a2", clock=TestClock(T0))
        submit(store, "a1", "fund", "buyer", "alice", "k", clock=TestClock(T0))
        assert show(store, "a1").agreement.manifest_hash == first
        assert show(store, "a2").agreement.manifest_hash != first


# Refusals change nothing ------------------------------------------------------------

REFUSALS: list[tuple[str, dict[str, Any], str]] = [
    ("unknown agreement", {"agreement_id": "nope"}, "PW501"),
    ("unknown transition", {"transition": "settle"}, "PW506"),
    ("wrong role", {"actor_role": "seller", "actor_party": "bob"}, "PW507"),
    ("party not bound", {"actor_party": "mallory"}, "PW508"),
    ("stale version", {"expect_version": 1}, "PW509"),
    ("not from this state", {"transition": "deliver", "actor_role": "seller", "actor_party": "bob"}, "PW511"),
    ("bad param", {"params": {"price": "99.00"}}, "PW516"),
    ("unknown param", {"params": {"colour": "red"}}, "PW516"),
    ("bad key", {"key": " "}, "PW519"),
]


@pytest.mark.parametrize(("what", "change", "code"), REFUSALS, ids=[r[0] for r in REFUSALS])
def test_each_refusal_has_its_code_and_changes_nothing(url: str, what: str, change: dict[str, Any], code: str) -> None:
    _opened(url)
    command: dict[str, Any] = {"agreement_id": "a1", "transition": "fund", "actor_role": "buyer",
                               "actor_party": "alice", "key": "k", "expect_version": 0, **change}  # fmt: skip
    before = dump(url)
    with open_store(url) as store, pytest.raises(CommandError) as caught:
        submit(store, clock=TestClock(T0), **command)
    assert caught.value.code == code, what
    if code == "PW509":
        assert "STALE_AGREEMENT_VERSION" in caught.value.message
    assert dump(url) == before


def test_final_guard_and_funds_refusals_change_nothing(url: str) -> None:
    _delivered(url)
    with open_store(url) as store:
        before = store.dump()
        with pytest.raises(CommandError) as guard:
            submit(store, "a1", "auto_release", "scheduler", "scheduler", "early", clock=TestClock(T0 + 61))
        assert guard.value.code == "PW512"
        assert store.dump() == before
        submit(store, "a1", "release", "buyer", "alice", "release", clock=TestClock(T0 + 120))
        final = store.dump()
        with pytest.raises(CommandError) as done:
            submit(store, "a1", "auto_release", "scheduler", "scheduler", "late", clock=TestClock(T0 + 2 * WINDOW))
        assert done.value.code == "PW510"
        assert store.dump() == final


def test_a_command_that_would_overdraw_the_agreements_own_escrow_is_refused(url: str) -> None:
    # Write an agreement whose committed escrow is short (as a buggy policy could leave it), then release.
    _delivered(url)
    with open_store(url) as store:
        with store.transaction() as db:
            db.execute("UPDATE agreements SET balances = ? WHERE id = ?",
                       ('{"buyer":"0","escrow":"100","platform":"0","seller":"0","world":"-100"}', "a1"))  # fmt: skip
        before = store.dump()
        with pytest.raises(CommandError) as caught:
            submit(store, "a1", "release", "buyer", "alice", "r", clock=TestClock(T0 + 120))
        assert caught.value.code == "PW514"
        assert store.dump() == before


def test_dry_run_computes_everything_and_writes_nothing(url: str) -> None:
    _opened(url)
    before = dump(url)
    with open_store(url) as store:
        result = submit(store, "a1", "fund", "buyer", "alice", "k", dry_run=True, clock=TestClock(T0))
    assert result.dry_run and result.state == "funded" and result.outbox == ("a1/1/0",)
    assert [p["amount"] for p in result.postings] == ["6490"]
    assert dump(url) == before


@pytest.mark.parametrize(
    ("params", "code"),
    [({"price": "0.99"}, "PW503"), ({"price": "10000.01"}, "PW503"), ({"price": "64.901"}, "PW503"),
     ({"price": "ten"}, "PW503"), ({}, "PW503"), ({"price": "5.00", "fee": "20"}, "PW503")],
)  # fmt: skip
def test_open_refuses_bad_params_and_writes_nothing(url: str, params: dict[str, str], code: str) -> None:
    before = dump(url)
    with open_store(url) as store, pytest.raises(CommandError) as caught:
        open_agreement(store, PACT_ID, params, PARTIES, agreement_id="x", clock=TestClock(T0))
    assert caught.value.code == code
    assert dump(url) == before


def test_open_refuses_unbound_roles_and_taken_ids(url: str) -> None:
    _opened(url)
    with open_store(url) as store:
        before = store.dump()
        cases = [({"buyer": "alice"}, "x", "PW504"), (PARTIES, "a1", "PW502"),
                 ({**PARTIES, "ghost": "g"}, "x", "PW504"), (PARTIES, "a/b", "PW502")]  # fmt: skip
        for parties, agreement_id, code in cases:
            with pytest.raises(CommandError) as caught:
                open_agreement(store, PACT_ID, {"price": "5.00"}, parties, agreement_id=agreement_id)
            assert caught.value.code == code
        assert store.dump() == before


# Idempotency ---------------------------------------------------------------------------


def test_a_retry_returns_the_original_result_and_a_changed_amount_is_refused(url: str) -> None:
    _opened(url)
    with open_store(url) as store:
        first = submit(store, "a1", "fund", "buyer", "alice", "pay-1", expect_version=0, params={"price": "64.90"},
                       clock=TestClock(T0))  # fmt: skip
        after = store.dump()
        again = submit(store, "a1", "fund", "buyer", "alice", "pay-1", expect_version=0, params={"price": "64.90"},
                       clock=TestClock(T0 + 999))  # fmt: skip
        assert again.replayed and again.event_id == first.event_id and again.postings == first.postings
        assert again.committed_at == first.committed_at
        assert store.dump() == after
        with pytest.raises(CommandError) as caught:
            submit(store, "a1", "fund", "buyer", "alice", "pay-1", params={"price": "65.00"}, clock=TestClock(T0))
        assert caught.value.code == "PW515" and caught.value.field == "params.price"
        with pytest.raises(CommandError) as other:
            submit(store, "a1", "deliver", "seller", "bob", "pay-1", clock=TestClock(T0))
        assert other.value.code == "PW515" and other.value.field == "actor.party"
        assert store.dump() == after


_INTENTS = [("fund", "buyer", "alice"), ("deliver", "seller", "bob"), ("release", "buyer", "alice"),
            ("dispute", "buyer", "alice"), ("rule_for_buyer", "arbiter", "carol")]  # fmt: skip


@pytest.mark.parametrize("backend", BACKENDS)
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(st.integers(0, 4), st.integers(0, 3)), min_size=1, max_size=10))
def test_repeated_keys_give_one_event_per_distinct_intent(backend: str, tmp_path: Path,
                                                           commands: list[tuple[int, int]]) -> None:  # fmt: skip
    import secrets

    directory = tmp_path / secrets.token_hex(4)
    directory.mkdir()
    with temporary_store(backend, directory) as store_url, open_store(store_url) as store:
        activate_files(store, signed("1.0.0"), default_trust(), clock=FixedClock(datetime.fromisoformat(NOW)))
        open_agreement(store, PACT_ID, {"price": "10.00"}, PARTIES, agreement_id="h", clock=TestClock(T0))
        first_use: dict[int, int] = {}  # key -> intent it committed
        committed = 0
        for intent, key in commands:
            transition, role, party = _INTENTS[intent]
            try:
                result = submit(store, "h", transition, role, party, f"key-{key}", clock=TestClock(T0))
            except CommandError as exc:
                refused = exc.code
            else:
                refused = ""
            if refused:
                assert refused != "PW515" or first_use.get(key, intent) != intent
                if key in first_use and first_use[key] != intent:
                    assert refused == "PW515"
                continue
            if result.replayed:
                assert first_use[key] == intent
            else:
                assert key not in first_use
                first_use[key] = intent
                committed += 1
        rows = store.dump()
        assert len(rows["events"]) == committed == len({(r[0], r[-1]) for r in rows["events"]})  # one key each
        escrow = show(store, "h").agreement.balances["escrow"]
        fund_events = sum(1 for r in rows["events"] if r[3] == "fund")
        settle_events = sum(1 for r in rows["events"] if r[3] in ("release", "rule_for_buyer"))
        assert escrow == 1000 * (fund_events - settle_events) and fund_events <= 1


# Bad input through the CLI -------------------------------------------------------------


def test_cli_bad_input_is_a_clear_error_and_writes_nothing(url: str, capsys: pytest.CaptureFixture[str]) -> None:
    _opened(url)
    before = dump(url)
    cases = [
        (["submit", "ghost", "fund", "--as", "buyer:alice", "--key", "k", "--store", url], 1, "PW501"),
        (["show", "ghost", "--store", url], 1, "PW501"),
        (["submit", "a1", "settle", "--as", "buyer:alice", "--key", "k", "--store", url], 1, "PW506"),
        (["submit", "a1", "fund", "--as", "buyer", "--key", "k", "--store", url], 2, "PW001"),
        (["open", PACT_ID, "--store", url, "--param", "price=0.50", "--party", "buyer=a", "--party", "seller=b",
          "--party", "arbiter=c"], 1, "PW503"),
        (["open", PACT_ID, "--store", url, "--param", "price=lots", "--party", "buyer=a", "--party", "seller=b",
          "--party", "arbiter=c"], 1, "PW503"),
        (["submit", "a1", "fund", "--as", "buyer:alice", "--key", "k", "--store", url, "--clock-file", "/nonexistent"],
         2, "PW520"),
    ]  # fmt: skip
    for args, exit_code, code in cases:
        got, _, err = _cli(*args, capsys=capsys)
        assert (got, err.split("]")[0]) == (exit_code, f"error[{code}"), (args, err)
    assert dump(url) == before


def test_cli_refuses_malformed_urls_and_newer_stores(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for bad in ("mysql://x/y", "sqlite://relative.db", str(tmp_path / "missing.db")):
        for args in (["show", "a1", "--store", bad], ["open", PACT_ID, "--store", bad, "--param", "price=5"]):
            code, _, err = _cli(*args, capsys=capsys)
            assert code == 2 and err.startswith("error[PW700]"), (args, err)
    assert not (tmp_path / "missing.db").exists()
    newer = tmp_path / "newer.sqlite"
    shutil.copy(V1_STORE, newer)
    with sqlite3.connect(newer) as conn:
        conn.execute("INSERT INTO schema_migrations VALUES (99, 'from the future')")
    before = newer.read_bytes()
    for args in (["show", "a1", "--store", str(newer)], ["open", PACT_ID, "--store", str(newer), "--param", "price=5"],
                 ["submit", "a1", "fund", "--as", "buyer:alice", "--key", "k", "--store", str(newer)]):  # fmt: skip
        code, _, err = _cli(*args, capsys=capsys)
        assert code == 1 and err.startswith("error[PW701]"), (args, err)
    assert newer.read_bytes() == before


# Races between two OS processes --------------------------------------------------------


def test_two_processes_racing_the_same_version_commit_exactly_once(url: str, tmp_path: Path) -> None:
    races = 20
    ids = [f"r{n}" for n in range(races)]
    for agreement_id in ids:
        _delivered(url, agreement_id, "10.01")
    barrier = tmp_path / "barrier"
    barrier.mkdir()
    after_deadline = str(T0 + 60 + WINDOW)
    child = [sys.executable, str(ROOT / "tests" / "_runtime_race_child.py"), url, str(barrier)]
    procs = [subprocess.Popen([*child, side, after_deadline, *ids], stdout=subprocess.PIPE, text=True, cwd=ROOT,
                              env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
             for side in ("buyer", "scheduler")]  # fmt: skip
    outs = [p.communicate(timeout=300)[0] for p in procs]
    assert all(p.returncode == 0 for p in procs), outs
    outcomes = [dict(line.split() for line in out.splitlines()) for out in outs]
    wins = {"buyer": 0, "scheduler": 0}
    with open_store(url) as store:
        for agreement_id in ids:
            pair = [o[agreement_id] for o in outcomes]
            assert sorted(pair)[0] == "ok" or pair.count("ok") == 1, pair
            assert pair.count("ok") == 1 and set(pair) - {"ok"} <= {"PW509", "PW510"}, pair
            wins["buyer" if pair[0] == "ok" else "scheduler"] += 1
            view = show(store, agreement_id)
            assert view.agreement.state == "released" and view.agreement.version == 3
            assert view.agreement.balances["escrow"] == 0
            assert sum(1 for e in view.last_events if e["transition"] in ("release", "auto_release")) == 1
    backend = url.split(":", maxsplit=1)[0]
    print(f"{races} races on {backend}: buyer won {wins['buyer']}, scheduler won {wins['scheduler']}")


def test_show_reports_an_unknown_agreement(url: str) -> None:
    with open_store(url) as store, pytest.raises(PactwrightError) as caught:
        show(store, "nobody")
    assert caught.value.code == "PW501"
