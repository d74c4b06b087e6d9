"""Attacks on "the same runtime on SQLite and PostgreSQL": column types, value ranges, SQL dialect.

Each attack gives both backends the same input and requires the same
outcome: the same result, or the same refusal code, never a crash on one
side, and nothing written by a refusal. Migration 9 (times as BIGINT) closed
the first hole of this kind; the tests marked "once broken" below found the
others, each since fixed. The attacks that held assert the exact outcome.

What differs between the two databases, and what each attack aims at:

- integers: SQLite binds Python ints of at most 64 bits (larger ones raise
  OverflowError, which is no driver error); PostgreSQL refuses an
  out-of-range value with a driver error (PW709). `LIMIT -1` is "no limit"
  to SQLite and an error to PostgreSQL;
- text: PostgreSQL's text cannot hold NUL; its btree index entries hold at
  most 2704 bytes; ORDER BY follows the database's default collation (this
  test server's is C.UTF-8, the same order as SQLite's binary one, so the
  collation attacks make a database whose default is ICU `en-US`, as a
  server initialised with an `en_US.UTF-8` locale has);
- SQLite's `LIKE` ignores ASCII case, PostgreSQL's does not.

Four bugs found on the way (fixed) failed the same on both backends: an agreement id
holding an unpaired surrogate (a non-UTF-8 argument), a limit window ending
after year 9999, a limit's usage past 40 digits, and a posting above 10**30
minor units at the outbox worker's pre-delivery check.
"""

from __future__ import annotations

import contextlib
import random
import re
import secrets
import string
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import pytest

from pactwright.cli.main import main
from pactwright.errors import PactwrightError
from pactwright.runtime import (
    FileClock,
    TestClock,
    approvals,
    effect_ops,
    open_agreement,
    outbox,
    parties,
    show,
    submit,
    tokens,
)
from pactwright.runtime.activation import FixedClock, activate_files
from pactwright.runtime.ledger_db import DurableLedger, open_ledger
from pactwright.runtime.scheduler import scan
from pactwright.runtime.store import Store, open_store
from pactwright.runtime.worker import Worker
from tests import signed_bundles as sb
from tests.test_budget_inflight_attacks import _any_store

T0 = 1780315200  # 2026-06-01T12:00:00Z
DAY = 86_400
PARTIES = {"buyer": "alice", "seller": "bob", "arbiter": "carol"}
LAST_SECOND = 253402300799  # 9999-12-31T23:59:59Z, the latest time a clock file may hold
DESK = (sb.ROOT / "policies" / "desk_limit.pact").read_text()


def _outcome(action: Callable[[], Any]) -> tuple[Any, ...]:
    """("ok", value), ("refused", code) or ("crashed", exception type): what a caller sees."""
    try:
        value = action()
    except PactwrightError as exc:
        return ("refused", exc.code)
    except Exception as exc:
        return ("crashed", type(exc).__name__)
    return ("ok", value)


@contextlib.contextmanager
def _funded(backend: str, directory: Path) -> Iterator[str]:
    """A store with the reference pact active, agreement `a1` funded, `op` a registered operator."""
    directory = directory / backend
    directory.mkdir(parents=True, exist_ok=True)
    with sb.temporary_store(backend, directory) as url:
        with open_store(url) as store:
            activate_files(
                store, sb.signed("1.0.0"), sb.default_trust(), clock=FixedClock(datetime.fromisoformat(sb.NOW))
            )
            open_agreement(store, sb.PACT_ID, {"price": "64.90"}, PARTIES, agreement_id="a1", clock=TestClock(T0))
            submit(store, "a1", "fund", "buyer", "alice", "fund", clock=TestClock(T0))
            parties.add_party(store, "op", "operator", None, T0)
        try:
            yield url
        finally:
            _drop_ledger(url)


def _drop_ledger(url: str) -> None:
    """Drop the ledger schema a PostgreSQL store URL implies (`temporary_store` drops only the store's own)."""
    if not url.startswith("postgresql://"):
        return
    import psycopg

    from pactwright.runtime._ledger_sql import default_url

    schema = default_url(url)[1]
    with psycopg.connect(url, autocommit=True, connect_timeout=10) as admin:
        admin.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


@contextlib.contextmanager
def _ledger(url: str) -> Iterator[DurableLedger]:
    """The ledger that goes with the store at `url`, its PostgreSQL schema dropped afterwards."""
    try:
        with open_ledger(None, url) as ledger:
            yield ledger
    finally:
        _drop_ledger(url)


def _on_both(directory: Path, action: Callable[[Store], Any]) -> dict[str, tuple[tuple[Any, ...], bool]]:
    """Per backend: the outcome of `action` on a fresh funded store, and whether the store is unchanged."""
    out = {}
    for backend in sb.BACKENDS:
        with _funded(backend, directory) as url, open_store(url) as store:
            before = store.dump()
            result = _outcome(lambda store=store: action(store))
            out[backend] = (result, store.dump() == before)
    return out


def _same(results: dict[str, tuple[tuple[Any, ...], bool]]) -> None:
    """Both backends answered alike, neither crashed, and neither wrote anything."""
    assert results["sqlite"][0] == results["postgresql"][0], results
    assert results["sqlite"][0][0] != "crashed", results
    assert all(unchanged for _, unchanged in results.values()), results


def _cli(*args: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


# == BUGS ======================================================================================

# -- integers past 64 bits: a crash on SQLite, PW709 on PostgreSQL --------------------------------


def test_a_worker_lease_past_64_bits_is_refused_alike_on_both_backends(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    clock = tmp_path / "clock"
    clock.write_text(f"{T0}\n")
    results = {}
    for backend in sb.BACKENDS:
        with _funded(backend, tmp_path) as url:
            before = sb.dump(url)["outbox"]
            code, _, err = _cli("worker", "--store", url, "--drain", "--lease-seconds", str(2**63),
                                "--clock-file", str(clock), capsys=capsys)  # fmt: skip
            results[backend] = (code, "internal error" in err, sb.dump(url)["outbox"] == before)
    assert results["sqlite"] == results["postgresql"], results
    assert results["sqlite"][1:] == (False, True), results


@pytest.mark.parametrize("case", ["show last -1", "show last 2**63", "add_party at 2**63", "issue_token at 2**63",
                                  "worker lease 2**63"])  # fmt: skip
def test_integers_a_caller_passes_are_answered_alike_on_both_backends(case: str, tmp_path: Path) -> None:
    def action(store: Store, url: str) -> Any:
        if case.startswith("show"):
            last = -1 if case.endswith("-1") else 2**63
            return [e["seq"] for e in show(store, "a1", last=last).last_events]
        if case.startswith("add_party"):
            return parties.add_party(store, "ops2", "operator", None, 2**63).added_at
        if case.startswith("issue_token"):
            return tokens.issue_token(store, "op", 2**63).created_at
        with open_ledger(None, url) as ledger:
            return [o.status for o in Worker(store, ledger, TestClock(T0), lease_seconds=2**63).drain()]

    results = {}
    for backend in sb.BACKENDS:
        with _funded(backend, tmp_path) as url, open_store(url) as store:
            before = store.dump()
            results[backend] = (_outcome(lambda store=store, url=url: action(store, url)), store.dump() == before)
    _same(results)


# -- NUL: PostgreSQL text cannot hold it, SQLite's can -------------------------------------------

# Most entry points say "an id holding a NUL names nothing" before any statement (runtime/_agreement.py
# `read`, approvals.get_request, store._backend.storable); these do not, so PostgreSQL's driver refuses
# the statement (PW709; a raw psycopg.DataError from Store.history, whose read is not wrapped) where
# SQLite answers as for an unknown name.
NUL_CASES: dict[str, tuple[Callable[[Store], Any], tuple[Any, ...]]] = {
    "approvals.list_requests agreement": (lambda s: approvals.list_requests(s, agreement_id="a1\x00"), ("ok", [])),
    "approvals.list_requests status": (lambda s: approvals.list_requests(s, status="pending\x00"), ("ok", [])),
    "outbox.list_entries agreement": (lambda s: outbox.list_entries(s, agreement_id="a1\x00"), ("ok", [])),
    "effect_ops.list_effects agreement": (lambda s: effect_ops.list_effects(s, agreement_id="a1\x00"), ("ok", [])),
    "Store.history pact": (lambda s: s.history(f"{sb.PACT_ID}\x00"), ("ok", [])),
    "effect_ops.abandon operator": (
        lambda s: effect_ops.abandon(s, "a1", "notify", "gone", "op\x00", clock=TestClock(T0)), ("refused", "PW641")),
    "effect_ops.abandon effect": (
        lambda s: effect_ops.abandon(s, "a1", "notify\x00", "gone", "op", clock=TestClock(T0)), ("refused", "PW640")),
    "effect_ops.reconcile effect": (
        lambda s: effect_ops.reconcile(s, "a1", "notify\x00", "not_occurred", "op", clock=TestClock(T0)),
        ("refused", "PW640")),
    "tokens.issue_token party": (lambda s: tokens.issue_token(s, "op\x00", T0), ("refused", "PW674")),
    "tokens.revoke_token id": (lambda s: tokens.revoke_token(s, "0123456789abcdef\x00", T0), ("refused", "PW675")),
}  # fmt: skip


@pytest.mark.parametrize("case", sorted(NUL_CASES))
def test_a_name_holding_nul_is_answered_as_unknown_on_both_backends(case: str, tmp_path: Path) -> None:
    action, expected = NUL_CASES[case]
    results = _on_both(tmp_path, action)
    assert results == {"sqlite": (expected, True), "postgresql": (expected, True)}


def test_a_registry_approver_holding_nul_is_refused_alike(tmp_path: Path) -> None:
    from tests.test_four_eyes import PACT_ID, PARAMS, _proof
    from tests.test_four_eyes import _store as four_eyes_store

    results = {}
    for backend in sb.BACKENDS:
        directory = tmp_path / backend
        directory.mkdir()
        with contextlib.contextmanager(four_eyes_store)(backend, directory, True) as url, open_store(url) as store:
            open_agreement(store, PACT_ID, PARAMS, {"support_agent": "sam", "refund_approver": "rita",
                           "risk_officer": "olga"}, agreement_id="r1", clock=TestClock(T0))  # fmt: skip
            request = submit(store, "r1", "issue", "support_agent", "sam", "issue", clock=TestClock(T0 + 10)).approval
            assert request is not None
            before = store.dump()
            results[backend] = (
                _outcome(
                    lambda store=store, request=request: approvals.grant(
                        store, request["id"], "rita\x00", _proof(request, "rita"), TestClock(T0 + 20)
                    )
                ),
                store.dump() == before,
            )
    assert results == {"sqlite": (("refused", "PW606"), True), "postgresql": (("refused", "PW606"), True)}


def test_a_ledger_program_holding_nul_is_answered_alike(tmp_path: Path) -> None:
    program = "send [EUR/2 1] (\n  source = @world\n  destination = @a // \x00\n)\n"
    results = {}
    for backend in sb.BACKENDS:
        directory = tmp_path / backend
        directory.mkdir()
        with sb.temporary_store(backend, directory) as url, _ledger(url) as ledger:
            results[backend] = (_outcome(lambda ledger=ledger: ledger.apply("r1", program, {})), ledger.references())
    assert results["sqlite"] == results["postgresql"], results
    assert results["sqlite"][0][0] != "crashed"


def test_an_agreement_id_that_is_not_utf8_is_unknown_on_both_backends(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    results = {}
    for backend in sb.BACKENDS:
        with _funded(backend, tmp_path) as url:
            code, _, err = _cli("show", "a\udcff", "--store", url, capsys=capsys)
            results[backend] = (code, "PW501" in err, "internal error" in err)
    assert results == {"sqlite": (1, True, False), "postgresql": (1, True, False)}


# -- names past PostgreSQL's btree entry limit (2704 bytes); SQLite has none ----------------------

_RANDOM = random.Random(20380119)


def _name(length: int, alphabet: str = string.ascii_lowercase + string.digits) -> str:
    """A letter, then random characters (incompressible: PostgreSQL cannot squeeze it into an index entry)."""
    return "n" + "".join(_RANDOM.choice(alphabet) for _ in range(length - 1))


LONG_EFFECT, LONG_LIMIT, LONG_PACT = _name(4000), _name(4000), _name(4000)
LONG_ACCOUNT = _name(4000, string.ascii_letters + string.digits)


def _long_policy(*, pact: str = "att.long", effect: str = "notify", limit: str | None = None,
                 address: str = "pool:x") -> str:  # fmt: skip
    limits = f"limit {limit}: total({effect}) <= 1000.00 per 1d\n" if limit else ""
    return (
        f'pact "{pact}" version "1.0.0"\ncurrency EUR scale 2\ndefault deny\nrole buyer\n'
        "param price: money between 1.00 and 100.00\nrule R2 allow\n"
        f'effect {effect} {{\n  risk R2\n  reversibility reversible\n  egress POST "https://api.example.com/n"\n'
        "  timeout 10s\n  strategy once\n  amount price\n}\n"
        f'{limits}account world "world" external\naccount pool "{address}"\n'
        "state placed initial\nstate done final\n"
        f"transition fund: placed -> done {{\n  by buyer\n  call {effect}\n  transfer price from world to pool\n}}\n"
    )


LONG_CASES = {
    "pact id (activations_by_pact)": (_long_policy(pact=f"att.{LONG_PACT}"), f"att.{LONG_PACT}"),
    "effect name (effects_by_agreement)": (_long_policy(effect=LONG_EFFECT), "att.long"),
    "limit name (limits primary key)": (_long_policy(limit=LONG_LIMIT), "att.long"),
    "account address (ledger_accounts primary key)": (_long_policy(address=f"pool:{LONG_ACCOUNT}"), "att.long"),
}


def _long_run(source: str, pact: str, backend: str, directory: Path) -> tuple[Any, ...]:
    """What activating, committing `fund` and delivering its postings does, or the first refusal."""
    from pactwright.compiler.pipeline import check_bytes

    if check_bytes(source.encode()).candidate is None:
        return ("not compiled",)
    directory.mkdir()
    try:
        with _any_store(source, directory, backend) as (store, report):
            open_agreement(store, pact, {"price": "10.00"}, {"buyer": "bea"}, agreement_id="a1", clock=TestClock(T0))
            committed = submit(store, "a1", "fund", "buyer", "bea", "fund", clock=TestClock(T0)).status
            with _ledger(report["url"]) as ledger:
                delivered = [(o.status, o.code) for o in Worker(store, ledger, TestClock(T0)).drain()]
    except PactwrightError as exc:
        return ("refused", exc.code)
    return ("ok", committed, delivered)


@pytest.mark.parametrize("case", sorted(LONG_CASES))
def test_a_long_name_runs_alike_on_both_backends(case: str, tmp_path: Path) -> None:
    source, pact = LONG_CASES[case]
    results = {b: _long_run(source, pact, b, tmp_path / b) for b in sb.BACKENDS}
    assert results["sqlite"] == results["postgresql"], results


# -- ORDER BY on text follows the database's default collation ------------------------------------


@contextlib.contextmanager
def _icu_database() -> Iterator[str]:
    """A store URL in a new database whose default collation is ICU `en-US` (dropped afterwards)."""
    import psycopg

    name = f"pw_test_icu_{secrets.token_hex(6)}"
    url = urlunsplit(urlsplit(sb.POSTGRES_URL)._replace(path=f"/{name}"))
    assert url.startswith("postgresql://")
    with psycopg.connect(sb.POSTGRES_URL, autocommit=True, connect_timeout=10) as admin:
        admin.execute(f"CREATE DATABASE {name} TEMPLATE template0 ENCODING 'UTF8' LOCALE 'C.UTF-8' "
                      "LOCALE_PROVIDER icu ICU_LOCALE 'en-US'")  # fmt: skip
        try:
            yield url
        finally:
            admin.execute(f"DROP DATABASE {name} WITH (FORCE)")


@contextlib.contextmanager
def _stores_with_collations(directory: Path) -> Iterator[dict[str, str]]:
    """SQLite, this server's default database, and a database with a non-binary default collation."""
    with contextlib.ExitStack() as stack:
        urls = {}
        for backend in sb.BACKENDS:
            (directory / backend).mkdir()
            urls[backend] = stack.enter_context(sb.temporary_store(backend, directory / backend))
            stack.callback(_drop_ledger, urls[backend])
        urls["postgresql en-US"] = stack.enter_context(_icu_database())
        yield urls


BUYERS = {"a1": "amy", "B1": "Zed", "_x": "eve"}  # mixed case, a digit, an underscore


def _three_funded(url: str) -> None:
    with open_store(url) as store:
        activate_files(store, sb.signed("1.0.0"), sb.default_trust(), clock=FixedClock(datetime.fromisoformat(sb.NOW)))
        for agreement, buyer in BUYERS.items():
            open_agreement(store, sb.PACT_ID, {"price": "10.00"}, {**PARTIES, "buyer": buyer},
                           agreement_id=agreement, clock=TestClock(T0))  # fmt: skip
        for agreement, buyer in BUYERS.items():
            submit(store, agreement, "fund", "buyer", buyer, "fund", clock=TestClock(T0))


def test_listings_and_delivery_order_do_not_depend_on_the_database_collation(tmp_path: Path) -> None:
    seen = {}
    with _stores_with_collations(tmp_path) as urls:
        for name, url in urls.items():
            _three_funded(url)
            with open_store(url) as store:
                for party in ("Zed", "amy", "Émile", "bob", "a-b", "a_c"):
                    parties.add_party(store, party, "operator", None, T0)
                registry = [p.party for p in parties.list_parties(store)]
                entries = [e.reference for e in outbox.list_entries(store)]
                with open_ledger(None, url) as ledger:
                    delivered = [o.reference for o in Worker(store, ledger, TestClock(T0 + 1)).drain()]
            seen[name] = (registry, entries, delivered)
    binary = (["Zed", "a-b", "a_c", "amy", "bob", "Émile"], ["B1/1/0", "_x/1/0", "a1/1/0"],
              ["B1/1/0", "_x/1/0", "a1/1/0"])  # fmt: skip
    assert seen == dict.fromkeys(urls, binary)


def _three_called(url: str, directory: Path) -> list[str]:
    """Fund three agreements whose `fund` calls an effect, all due at one instant; the order the worker sends them."""
    from pactwright.runtime.effect_worker import EffectWorker
    from pactwright.runtime.provider_sim import start_simulator
    from tests.test_budget_inflight_attacks import _adapter_for

    bundle, verdict = sb.compile_verified(_long_policy().encode(), "attack.pact")
    assert verdict == "pass"
    with open_store(url) as store:
        activate_files(store, sb.sign(bundle), sb.default_trust(), clock=FixedClock(datetime.fromisoformat(sb.NOW)))
        for agreement in BUYERS:
            open_agreement(store, "att.long", {"price": "10.00"}, {"buyer": "bea"}, agreement_id=agreement,
                           clock=TestClock(T0))  # fmt: skip
        for agreement in BUYERS:
            submit(store, agreement, "fund", "buyer", "bea", "fund", clock=TestClock(T0))
        with start_simulator() as sim:
            steps = EffectWorker(store, _adapter_for(directory, sim, "n"), TestClock(T0 + 1)).drain()
    return [s.instance for s in steps if s.action == "dispatch"]


def test_effect_calls_due_at_one_instant_go_in_the_same_order_whatever_the_collation(tmp_path: Path) -> None:
    """Once broken: the effect worker's candidates came in the database's collation on PostgreSQL (`a1` before
    `B1` under en-US), code-point order on SQLite; the outbox worker already used code-point order on both."""
    seen = {}
    with _stores_with_collations(tmp_path) as urls:
        for name, url in urls.items():
            routes = tmp_path / f"{name.replace(' ', '-')}-routes"
            routes.mkdir()
            seen[name] = _three_called(url, routes)
    assert seen == {name: ["B1/1/e0", "_x/1/e0", "a1/1/e0"] for name in urls}


# -- limits: value ranges the runtime cannot read back (the same on both backends) -------------------


@pytest.mark.parametrize("backend", sb.BACKENDS)
def test_a_limit_whose_window_ends_after_9999_refuses_with_pw528(backend: str, tmp_path: Path) -> None:
    with _any_store(DESK.replace("per 1d", "per 100000000d"), tmp_path, backend) as (store, report):
        assert report["verdict"] == "pass"
        outcomes = []
        for n in range(3):
            open_agreement(store, "example.desk_limit", {"amount": "300.00", "order_id": f"ORD-{n}"},
                           {"agent": "ann"}, agreement_id=f"r{n}", clock=TestClock(T0))  # fmt: skip
            outcomes.append(_outcome(lambda n=n: submit(store, f"r{n}", "refund", "agent", "ann", "k",
                                                        clock=TestClock(T0 + n)).status))  # fmt: skip
    assert outcomes == [("ok", "committed"), ("ok", "committed"), ("refused", "PW528")]


@pytest.mark.parametrize("backend", sb.BACKENDS)
def test_a_limit_usage_of_more_than_40_digits_reads_back(backend: str, tmp_path: Path) -> None:
    source = DESK.replace("between 0.01 and 300.00", f"between 0.01 and 1{'0' * 44}.00").replace(
        "<= 600.00 per 1d", f"<= 1{'0' * 45}.00 per 1d"
    )
    with _any_store(source, tmp_path, backend) as (store, report):
        assert report["verdict"] == "pass"
        outcomes = []
        for n in range(2):
            open_agreement(store, "example.desk_limit", {"amount": f"1{'0' * 39}.00", "order_id": f"ORD-{n}"},
                           {"agent": "ann"}, agreement_id=f"r{n}", clock=TestClock(T0))  # fmt: skip
            outcomes.append(_outcome(lambda n=n: submit(store, f"r{n}", "refund", "agent", "ann", "k",
                                                        clock=TestClock(T0 + n)).status))  # fmt: skip
        with store.transaction(write=False) as db:
            used = [str(r[0]) for r in db.query("SELECT used FROM limits")]
    assert outcomes == [("ok", "committed"), ("ok", "committed")]
    assert used == [f"2{'0' * 41}"]


# == ATTACKS THAT HELD ==========================================================================


@pytest.mark.parametrize("expect", [2**31 - 1, 2**31, 2**63, 2**64 + 1, -1])
def test_an_expected_version_past_32_or_64_bits_is_stale_on_both_backends(
    expect: int, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Compared in Python with the agreement's version; never bound to the 32-bit columns.
    clock = tmp_path / "clock"
    clock.write_text(f"{T0 + 60}\n")
    for backend in sb.BACKENDS:
        with _funded(backend, tmp_path) as url:
            before = sb.dump(url)
            args = ["submit", "a1", "deliver", "--as", "seller:bob", "--key", "d", "--store", url]
            code, out, err = _cli(*args, "--expect-version", str(expect), "--clock-file", str(clock), capsys=capsys)
            assert (code, out) == (1, ""), err
            assert "PW509" in err and "Traceback" not in err
            assert sb.dump(url) == before


def test_times_up_to_the_last_second_of_9999_run_and_later_ones_are_pw520_on_both_backends(tmp_path: Path) -> None:
    clock = tmp_path / "clock"
    for backend in sb.BACKENDS:
        with _funded(backend, tmp_path) as url, open_store(url) as store:
            clock.write_text(f"{LAST_SECOND}\n")
            done = submit(store, "a1", "deliver", "seller", "bob", "deliver", clock=FileClock(clock))
            with open_ledger(None, url) as ledger:
                delivered = [o.status for o in Worker(store, ledger, FileClock(clock)).drain()]
            fired = scan(store, FileClock(clock)).to_json()
            before = store.dump()
            clock.write_text(f"{LAST_SECOND + 1}\n")
            late = _outcome(lambda store=store: submit(store, "a1", "release", "buyer", "alice", "r",
                                                       clock=FileClock(clock)))  # fmt: skip
            clock.write_text(f"{2**63}\n")
            past = _outcome(lambda store=store: open_agreement(store, sb.PACT_ID, {"price": "1.00"}, PARTIES,
                                                               agreement_id="a2", clock=FileClock(clock)))  # fmt: skip
            assert (done.committed_at, show(store, "a1").agreement.updated_at) == (LAST_SECOND, LAST_SECOND)
            assert delivered == ["delivered"]
            assert (fired["committed"], fired["failures"]) == ([], [])  # the refund window ends after 9999
            assert (late, past) == (("refused", "PW520"), ("refused", "PW520"))
            assert store.dump() == before


OPEN_SUBMIT_NUL: dict[str, tuple[Callable[[Store], Any], str]] = {
    "submit agreement": (lambda s: submit(s, "a\x001", "deliver", "seller", "bob", "k"), "PW501"),
    "submit transition": (lambda s: submit(s, "a1", "deli\x00ver", "seller", "bob", "k"), "PW506"),
    "submit role": (lambda s: submit(s, "a1", "deliver", "sel\x00ler", "bob", "k"), "PW507"),
    "submit party": (lambda s: submit(s, "a1", "deliver", "seller", "bo\x00b", "k"), "PW508"),
    "submit key": (lambda s: submit(s, "a1", "deliver", "seller", "bob", "k\x00"), "PW519"),
    "submit param": (lambda s: submit(s, "a1", "deliver", "seller", "bob", "k", params={"price": "64.90\x00"}),
                     "PW516"),
    "open pact": (lambda s: open_agreement(s, f"{sb.PACT_ID}\x00", {"price": "1.00"}, PARTIES, "a2"), "PW702"),
    "open party": (lambda s: open_agreement(s, sb.PACT_ID, {"price": "1.00"}, {**PARTIES, "buyer": "al\x00"},
                                            "a2"), "PW504"),
    "open agreement id": (lambda s: open_agreement(s, sb.PACT_ID, {"price": "1.00"}, PARTIES, "a\x002"), "PW502"),
    "approvals.get_request": (lambda s: approvals.get_request(s, "apr-\x00"), "PW601"),
    "approvals.grant": (lambda s: approvals.grant(s, "apr-\x00", "op", "AA=="), "PW601"),
}  # fmt: skip


@pytest.mark.parametrize("case", sorted(OPEN_SUBMIT_NUL))
def test_nul_in_what_open_and_submit_take_is_refused_alike(case: str, tmp_path: Path) -> None:
    action, code = OPEN_SUBMIT_NUL[case]
    assert _on_both(tmp_path, action) == {"sqlite": (("refused", code), True), "postgresql": (("refused", code), True)}


def test_the_longest_keys_and_party_names_fit_postgresql_indexes(tmp_path: Path) -> None:
    # 200 printable characters of 4 UTF-8 bytes each: 800 bytes in events_by_key, the parties and
    # tokens_by_party indexes, well under the 2704-byte btree limit.
    wide = "\U0001d518" * 200
    for backend in sb.BACKENDS:
        with _funded(backend, tmp_path) as url, open_store(url) as store:
            first = submit(store, "a1", "deliver", "seller", "bob", wide, clock=TestClock(T0 + 60))
            again = submit(store, "a1", "deliver", "seller", "bob", wide, clock=TestClock(T0 + 61))
            parties.add_party(store, wide, "operator", None, T0)
            issued = tokens.issue_token(store, wide, T0)
            assert (first.event_id, first.replayed, again.event_id, again.replayed) == ("a1/2", False, "a1/2", True)
            assert [(t.token_id, t.party) for t in tokens.list_tokens(store)] == [(issued.token_id, wide)]
            assert [p.party for p in parties.list_parties(store)] == ["op", wide]


BIG_MONEY = f"""\
pact "att.big_money" version "1.0.0"
currency EUR scale 2
role buyer
role seller
param price: money between 1.00 and 1{"0" * 36}.00
param fee: percent = 3%
account world "world" external
account escrow "escrow:{{agreement}}"
account seller "sellers:{{seller}}"
account platform "platform:fees"
state placed initial
state funded
state paid final
transition fund: placed -> funded {{
  by buyer
  transfer price from world to escrow
}}
transition pay: funded -> paid {{
  by seller
  transfer price from escrow {{
    fee to platform
    remaining to seller
  }}
}}
invariant escrow_never_negative: balance(escrow) >= 0
"""


def _big_run(price: str, backend: str, directory: Path) -> tuple[list[str], dict[str, str], dict[str, str] | None]:
    """Fund and pay `price`, deliver both posting groups: (outbox outcomes, balances, ledger balances)."""
    directory.mkdir()
    with _any_store(BIG_MONEY, directory, backend) as (store, report):
        assert report["verdict"] == "pass"
        open_agreement(store, "att.big_money", {"price": price}, {"buyer": "bea", "seller": "sol"},
                       agreement_id="m1", clock=TestClock(T0))  # fmt: skip
        submit(store, "m1", "fund", "buyer", "bea", "f", clock=TestClock(T0))
        submit(store, "m1", "pay", "seller", "sol", "p", clock=TestClock(T0 + 1))
        with _ledger(report["url"]) as ledger:
            delivered = [o.status for o in Worker(store, ledger, TestClock(T0 + 2)).drain()]
            view = show(store, "m1", ledger=ledger).to_json()
    return delivered, view["balances"], view["ledger_balances"]


def _paid(price: str) -> dict[str, str]:
    from fractions import Fraction

    from pactwright.movement import allot

    minor = int(price.replace(".", ""))
    fee, rest = allot(minor, [Fraction(3, 100), Fraction(97, 100)])
    return {"escrow": "0", "platform": str(fee), "seller": str(rest), "world": str(-minor)}


@pytest.mark.parametrize("backend", sb.BACKENDS)
def test_a_posting_above_10_to_the_30_minor_units_is_delivered(backend: str, tmp_path: Path) -> None:
    price = f"1{'0' * 29}.00"  # 10**31 minor units
    assert _big_run(price, backend, tmp_path / backend) == (["delivered", "delivered"], _paid(price), _paid(price))


def test_money_of_30_digits_moves_alike_on_both_backends(tmp_path: Path) -> None:
    # Amounts are text in every column (params, balances, outbox, effects, limits, the ledger) and are
    # summed and compared in Python only: no SQL SUM, MAX, CAST or comparison touches them.
    price = "1234567890123456789012345678.90"  # 30 digits of minor units, below the worker's 10**30
    seen = {b: _big_run(price, b, tmp_path / b) for b in sb.BACKENDS}
    assert seen == dict.fromkeys(sb.BACKENDS, (["delivered", "delivered"], _paid(price), _paid(price)))


def test_the_scheduler_fires_in_the_same_order_whatever_the_collation(tmp_path: Path) -> None:
    # `_candidates` sorts the agreements in Python (code points), not by the database's ORDER BY.
    fired = {}
    with _stores_with_collations(tmp_path) as urls:
        for name, url in urls.items():
            _three_funded(url)
            with open_store(url) as store:
                fired[name] = scan(store, TestClock(T0 + 15 * DAY)).to_json()["committed"]
    assert fired == {name: ["B1/2", "_x/2", "a1/2"] for name in urls}


def test_four_eyes_grants_consume_only_their_own_approval_rows(tmp_path: Path) -> None:
    # `UPDATE approvals ... WHERE id = ? OR id LIKE ? || '/%'` (runtime/commands.py): SQLite's LIKE ignores
    # ASCII case and `_` matches any character, but request ids are `apr-` and 16 lower-case hex digits,
    # minted by the runtime alone, so no pattern can reach another request's rows on either backend.
    from tests.test_four_eyes import PACT_ID, PARAMS, _proof
    from tests.test_four_eyes import _store as four_eyes_store

    for backend in sb.BACKENDS:
        directory = tmp_path / backend
        directory.mkdir()
        with contextlib.contextmanager(four_eyes_store)(backend, directory, True) as url, open_store(url) as store:
            requests = {}
            for agreement in ("r1", "R1"):
                open_agreement(store, PACT_ID, PARAMS, {"support_agent": "sam", "refund_approver": "rita",
                               "risk_officer": "olga"}, agreement_id=agreement, clock=TestClock(T0))  # fmt: skip
                parked = submit(store, agreement, "issue", "support_agent", "sam", "issue", clock=TestClock(T0 + 10))
                assert parked.approval is not None and re.fullmatch(r"apr-[0-9a-f]{16}", parked.approval["id"])
                requests[agreement] = parked.approval
            for agreement, (first, second) in (("r1", ("rita", "pete")), ("R1", ("rosa", "rita"))):
                for party in (first, second):
                    approvals.grant(store, requests[agreement]["id"], party, _proof(requests[agreement], party),
                                    TestClock(T0 + 20))  # fmt: skip
            with store.transaction(write=False) as db:
                consumed = sorted(tuple(map(str, r)) for r in db.query(
                    "SELECT id, approver_party, consumed_event_id FROM approvals"))  # fmt: skip
        one, two = requests["r1"]["id"], requests["R1"]["id"]
        assert consumed == sorted([(one, "rita", "r1/1"), (f"{one}/2", "pete", "r1/1"),
                                   (two, "rosa", "R1/1"), (f"{two}/2", "rita", "R1/1")])  # fmt: skip
