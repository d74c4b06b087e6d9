"""The durable ledger on both backends: apply once per reference, refuse reuse and overdrafts, survive restarts.

Every test runs against a new SQLite file and a fresh PostgreSQL schema
(dropped after). PostgreSQL tests fail, never skip, when the server is
unreachable. The races run in separate OS processes, each with its own
interpreter and its own database connection, meeting at a barrier before
each round.
"""

from __future__ import annotations

import multiprocessing
import secrets
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pactwright.cli.main import main
from pactwright.errors import LedgerError, PactwrightError
from pactwright.runtime.ledger import InMemoryLedger
from pactwright.runtime.ledger_api import Ledger, Posting
from pactwright.runtime.ledger_db import DurableLedger, open_ledger
from tests.signed_bundles import BACKENDS, POSTGRES_URL

FUND = "vars { monetary $amount account $to }\nsend $amount ( source = @world destination = $to )"
SPEND = "vars { monetary $amount account $from account $to }\nsend $amount ( source = $from destination = $to )"
SPLIT = """
vars {
  monetary $price
  account $escrow
  account $seller
}
send $price (
  source = $escrow
  destination = {
    10% to @platform:fees
    remaining to $seller
  }
)
"""
SPLIT_VARS = {"price": "EUR/2 6490", "escrow": "escrow:a1", "seller": "sellers:s1"}
PSP_REFUND = "send [EUR/2 500] ( source = @psp:settlement allowing unbounded overdraft destination = @buyers:b1 )"


def _pg_url(schema: str) -> str:
    separator = "&" if "?" in POSTGRES_URL else "?"
    return f"{POSTGRES_URL}{separator}options=-csearch_path%3D{schema}"


def _drop_schema(schema: str) -> None:
    import psycopg

    with psycopg.connect(POSTGRES_URL, autocommit=True, connect_timeout=10) as admin:
        admin.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


@pytest.fixture(params=BACKENDS)
def ledger_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield str(tmp_path / "pw.ledger.sqlite")
        return
    schema = f"pw_ledger_test_{secrets.token_hex(6)}"
    try:
        yield _pg_url(schema)
    finally:
        _drop_schema(schema)


@pytest.fixture
def ledger(ledger_url: str) -> Iterator[DurableLedger]:
    with open_ledger(ledger_url, None) as opened:
        yield opened


def _fund(ledger: Ledger, account: str, amount: int) -> None:
    ledger.apply(f"fund:{account}:{amount}", FUND, {"amount": f"EUR/2 {amount}", "to": account})


def _tables(url: str) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of every ledger table, read behind the ledger's back."""
    names = ("ledger_transactions", "ledger_postings", "ledger_accounts", "ledger_balances")
    if url.startswith("postgresql://"):
        import psycopg

        with psycopg.connect(url, autocommit=True) as conn:
            return {n: sorted(conn.execute(f"SELECT * FROM {n}").fetchall()) for n in names}  # noqa: S608
    with sqlite3.connect(url) as conn:
        return {n: sorted(conn.execute(f"SELECT * FROM {n}").fetchall()) for n in names}  # noqa: S608


def _sql(url: str, statement: str) -> None:
    if url.startswith("postgresql://"):
        import psycopg

        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(statement)
        return
    with sqlite3.connect(url) as conn:
        conn.execute(statement)


# The protocol ---------------------------------------------------------------------


def test_both_embedded_ledgers_implement_the_protocol(ledger: DurableLedger) -> None:
    ledgers: list[Ledger] = [ledger, InMemoryLedger()]
    for each in ledgers:
        _fund(each, "escrow:a1", 6490)
        assert each.apply("release:a1", SPLIT, SPLIT_VARS) == [
            Posting("escrow:a1", "platform:fees", 649, "EUR/2"),
            Posting("escrow:a1", "sellers:s1", 5841, "EUR/2"),
        ]
        assert each.postings("release:a1") == each.apply("release:a1", SPLIT, dict(SPLIT_VARS))
        assert each.postings("never") is None
        assert each.balances() == {"platform:fees": 649, "sellers:s1": 5841, "world": -6490}
        assert each.balances(["escrow:a1", "sellers:s1", "unknown"]) == {
            "escrow:a1": 0,
            "sellers:s1": 5841,
            "unknown": 0,
        }


# Apply and deduplicate ----------------------------------------------------------------


def test_apply_moves_money_and_keeps_postings_in_order(ledger: DurableLedger) -> None:
    _fund(ledger, "escrow:a1", 10_000)
    postings = ledger.apply("release:a1", SPLIT, SPLIT_VARS)
    assert [p.destination for p in postings] == ["platform:fees", "sellers:s1"]
    assert ledger.postings("release:a1") == postings
    assert ledger.asset_balances() == {
        ("escrow:a1", "EUR/2"): 3510,
        ("platform:fees", "EUR/2"): 649,
        ("sellers:s1", "EUR/2"): 5841,
        ("world", "EUR/2"): -10_000,
    }
    assert ledger.asset_totals() == {"EUR/2": 0}
    assert ledger.references() == ["fund:escrow:a1:10000", "release:a1"]


def test_same_reference_same_intent_returns_the_original_and_moves_nothing(ledger_url: str) -> None:
    with open_ledger(ledger_url, None) as ledger:
        _fund(ledger, "escrow:a1", 10_000)
        first = ledger.apply("release:a1", SPLIT, SPLIT_VARS)
        before = _tables(ledger_url)
        reformatted = " ".join(SPLIT.split())  # the same program, laid out differently
        assert ledger.apply("release:a1", reformatted, dict(SPLIT_VARS)) == first
        assert ledger.apply("release:a1", SPLIT, SPLIT_VARS) == first
    assert _tables(ledger_url) == before


@pytest.mark.parametrize(
    ("program", "variables", "named"),
    [
        (SPLIT, {**SPLIT_VARS, "price": "EUR/2 6491"}, "exists_with_different_variables"),
        (SPLIT, {**SPLIT_VARS, "seller": "sellers:s2"}, "exists_with_different_variables"),
        (SPLIT.replace("10%", "20%"), SPLIT_VARS, "exists_with_different_program"),
    ],
    ids=["amount", "account", "program"],
)
def test_same_reference_other_intent_is_refused_and_writes_nothing(
    ledger_url: str, program: str, variables: dict[str, str], named: str
) -> None:
    with open_ledger(ledger_url, None) as ledger:
        _fund(ledger, "escrow:a1", 10_000)
        ledger.apply("release:a1", SPLIT, SPLIT_VARS)
        before = _tables(ledger_url)
        with pytest.raises(LedgerError) as refused:
            ledger.apply("release:a1", program, variables)
    assert refused.value.code == "PW757"
    assert named in refused.value.message
    assert _tables(ledger_url) == before


def test_both_differences_are_named(ledger: DurableLedger) -> None:
    ledger.apply("r", FUND, {"amount": "EUR/2 1", "to": "a"})
    with pytest.raises(LedgerError, match="exists_with_different_program and exists_with_different_variables"):
        ledger.apply("r", SPEND, {"amount": "EUR/2 1", "from": "a", "to": "b"})


# Overdrafts ----------------------------------------------------------------------------


def test_overdraft_of_an_internal_account_is_refused_and_writes_nothing(ledger_url: str) -> None:
    with open_ledger(ledger_url, None) as ledger:
        _fund(ledger, "escrow:a1", 6489)
        before = _tables(ledger_url)
        with pytest.raises(LedgerError) as refused:
            ledger.apply("release:a1", SPLIT, SPLIT_VARS)
        assert refused.value.code == "PW754"
        assert ledger.postings("release:a1") is None
    assert _tables(ledger_url) == before
    with open_ledger(ledger_url, None) as ledger:  # a refused reference may be retried once funds arrive
        _fund(ledger, "escrow:a1", 1)
        assert len(ledger.apply("release:a1", SPLIT, SPLIT_VARS)) == 2


def test_a_second_send_that_fails_undoes_the_first(ledger_url: str) -> None:
    two = "send [EUR/2 5] ( source = @world destination = @a )\nsend [EUR/2 9] ( source = @a destination = @b )"
    with open_ledger(ledger_url, None) as ledger:
        before = _tables(ledger_url)
        with pytest.raises(LedgerError, match="insufficient funds"):
            ledger.apply("two", two, {})
    assert _tables(ledger_url) == before


def test_external_sources_are_unbounded_only_when_the_program_says_so(ledger: DurableLedger) -> None:
    assert ledger.apply("refund:1", PSP_REFUND, {}) == [Posting("psp:settlement", "buyers:b1", 500, "EUR/2")]
    assert ledger.balances(["psp:settlement", "buyers:b1"]) == {"psp:settlement": -500, "buyers:b1": 500}
    bounded = PSP_REFUND.replace("allowing unbounded overdraft", "allowing overdraft up to [EUR/2 600]")
    with pytest.raises(LedgerError) as refused:
        ledger.apply("refund:2", bounded, {})
    assert refused.value.code == "PW754"
    assert ledger.balances(["psp:settlement"]) == {"psp:settlement": -500}


def test_big_amounts_stay_exact(ledger: DurableLedger) -> None:
    amount = 10**40 + 7
    _fund(ledger, "escrow:a1", amount)
    assert ledger.balances(["escrow:a1"]) == {"escrow:a1": amount}


# Restart durability -------------------------------------------------------------------


def test_everything_survives_a_close_and_reopen(ledger_url: str) -> None:
    with open_ledger(ledger_url, None) as ledger:
        _fund(ledger, "escrow:a1", 6490)
        first = ledger.apply("release:a1", SPLIT, SPLIT_VARS)
        balances = ledger.asset_balances()
    with open_ledger(ledger_url, None) as reopened:
        assert reopened.postings("release:a1") == first
        assert reopened.asset_balances() == balances
        assert reopened.apply("release:a1", SPLIT, SPLIT_VARS) == first
        with pytest.raises(LedgerError, match="exists_with_different_variables"):
            reopened.apply("release:a1", SPLIT, {**SPLIT_VARS, "price": "EUR/2 1"})
        assert reopened.asset_balances() == balances


# Hostile input -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("reference", "program", "variables", "code"),
    [
        ("", FUND, {"amount": "EUR/2 1", "to": "a"}, "PW757"),
        ("x" * 513, FUND, {"amount": "EUR/2 1", "to": "a"}, "PW757"),
        ("a\x00b", FUND, {"amount": "EUR/2 1", "to": "a"}, "PW757"),
        ("r", "send [EUR/2 1] ( source = @world", {}, "PW751"),
        ("r", "save [EUR/2 1] from @a", {}, "PW752"),
        ("r", FUND, {"amount": "EUR/2 1"}, "PW753"),
        ("r", FUND, {"amount": "EUR/2 1", "to": "a", "extra": "1"}, "PW753"),
        ("r", FUND, {"amount": "EUR/2 -1", "to": "a"}, "PW753"),
        ("r", FUND, {"amount": "EUR/2 1", "to": "@a"}, "PW753"),
        ("r", FUND, {"amount": "EUR/2 1", "to": "a\x00"}, "PW753"),
        ("r", FUND, {"amount": 1, "to": "a"}, "PW753"),
        ("r", FUND, ["amount"], "PW753"),
        ("r", b"send", {}, "PW751"),
    ],
    ids=[
        "empty-ref",
        "long-ref",
        "nul-ref",
        "syntax",
        "unsupported",
        "missing-var",
        "extra-var",
        "negative",
        "at-account",
        "nul-var",
        "int-var",
        "vars-not-a-mapping",
        "bytes-program",
    ],
)
def test_hostile_input_is_refused_with_its_code_and_writes_nothing(
    ledger_url: str, reference: str, program: Any, variables: Any, code: str
) -> None:
    with open_ledger(ledger_url, None) as ledger:
        before = _tables(ledger_url)
        with pytest.raises(PactwrightError) as refused:
            ledger.apply(reference, program, variables)
    assert refused.value.code == code
    assert _tables(ledger_url) == before


def test_a_row_edited_behind_the_ledgers_back_is_reported(ledger_url: str) -> None:
    with open_ledger(ledger_url, None) as ledger:
        _fund(ledger, "escrow:a1", 100)
    _sql(ledger_url, "UPDATE ledger_balances SET amount = '1.5' WHERE account = 'escrow:a1'")
    with open_ledger(ledger_url, None) as ledger, pytest.raises(LedgerError) as tampered:
        ledger.balances()
    assert tampered.value.code == "PW554"


def test_a_ledger_of_a_newer_schema_is_refused(ledger_url: str) -> None:
    open_ledger(ledger_url, None).close()
    _sql(ledger_url, "INSERT INTO ledger_migrations (version, name) VALUES (99, 'from the future')")
    with pytest.raises(LedgerError) as newer:
        open_ledger(ledger_url, None)
    assert newer.value.code == "PW551"


# URLs -----------------------------------------------------------------------------------


def test_the_default_ledger_of_a_sqlite_store_is_its_sibling(tmp_path: Path) -> None:
    store = tmp_path / "pw.db"
    with open_ledger(None, str(store)) as ledger:
        _fund(ledger, "a", 1)
    assert (tmp_path / "pw.ledger.sqlite").is_file()
    assert not store.exists()  # the ledger never touches the store's file
    with open_ledger(None, f"sqlite://{store}") as again:
        assert again.balances(["a"]) == {"a": 1}
        assert again.url == str(tmp_path / "pw.ledger.sqlite")


def test_the_default_ledger_of_a_postgresql_store_is_a_schema_of_its_own() -> None:
    store_schema = f"pw_store_test_{secrets.token_hex(6)}"
    try:
        with open_ledger(None, _pg_url(store_schema)) as ledger:
            _fund(ledger, "a", 1)
        import psycopg

        with psycopg.connect(POSTGRES_URL, autocommit=True) as conn:
            query = f'SELECT amount FROM "{store_schema}_ledger".ledger_balances WHERE account = %s'  # noqa: S608
            row = conn.execute(query, ("a",))
            assert row.fetchone() == ("1",)
    finally:
        _drop_schema(f"{store_schema}_ledger")


@pytest.mark.parametrize(
    "url",
    [
        "mysql://localhost/x",
        "sqlite://relative.ledger.sqlite",
        "",
        "postgresql://nobody@127.0.0.1:1/none",
        "postgresql://root@127.0.0.1:5432/test?options=-csearch_path%3DBad-Schema",
        "postgresql://[::1",
    ],
)
def test_a_malformed_or_unreachable_url_is_pw550(url: str) -> None:
    with pytest.raises(PactwrightError) as refused:
        open_ledger(url, None)
    assert refused.value.code == "PW550"


def test_the_store_itself_is_never_a_ledger(tmp_path: Path) -> None:
    store = tmp_path / "store.db"
    with sqlite3.connect(store) as conn:
        conn.execute("CREATE TABLE schema_migrations (version INTEGER)")
    for url, store_url in ((str(store), str(store)), (str(store), None)):
        with pytest.raises(PactwrightError) as refused:
            open_ledger(url, store_url)
        assert refused.value.code == "PW550"
    with sqlite3.connect(store) as conn:
        assert [r[0] for r in conn.execute("SELECT name FROM sqlite_master")] == ["schema_migrations"]


def test_neither_ledger_nor_store_is_a_usage_error() -> None:
    with pytest.raises(PactwrightError) as refused:
        open_ledger(None, None)
    assert refused.value.code == "PW550"


# CLI -------------------------------------------------------------------------------------


def test_cli_balances_and_postings(ledger_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    with open_ledger(ledger_url, None) as ledger:
        _fund(ledger, "escrow:a1", 6490)
        ledger.apply("release:a1", SPLIT, SPLIT_VARS)
    assert main(["ledger", "balances", "--ledger", ledger_url, "--format", "json"]) == 0
    out = capsys.readouterr().out
    assert '"account": "sellers:s1"' in out and '"amount": "5841"' in out
    assert main(["ledger", "balances", "--ledger", ledger_url]) == 0
    assert "platform:fees  EUR/2  649" in capsys.readouterr().out
    assert main(["ledger", "postings", "release:a1", "--ledger", ledger_url]) == 0
    assert capsys.readouterr().out == "escrow:a1 -> platform:fees  EUR/2  649\nescrow:a1 -> sellers:s1  EUR/2  5841\n"
    assert main(["ledger", "postings", "nope", "--ledger", ledger_url]) == 1
    assert "error[PW555]" in capsys.readouterr().err


def test_cli_never_creates_a_ledger(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / "absent.ledger.sqlite"
    assert main(["ledger", "balances", "--ledger", str(missing)]) == 2
    assert capsys.readouterr().err.startswith("error[PW550]: cannot open the ledger")
    assert not missing.exists()
    assert main(["ledger", "balances", "--ledger", "mysql://x/y"]) == 2
    assert "Traceback" not in capsys.readouterr().err


# Races between OS processes ------------------------------------------------------------

ROUNDS = 25


def _racer(url: str, barrier: Any, results: Any, mode: str) -> None:
    """One process: ROUNDS times, meet the other at the barrier, then apply."""
    with open_ledger(url, None) as ledger:
        for index in range(ROUNDS):
            barrier.wait()
            try:
                if mode == "same":
                    postings = ledger.apply(f"fund:{index}", FUND, {"amount": "EUR/2 7", "to": f"escrow:{index}"})
                    results.put(("ok", index, [(p.source, p.destination, p.amount) for p in postings]))
                else:
                    reference = f"spend:{index}:{multiprocessing.current_process().name}"
                    ledger.apply(reference, SPEND, {"amount": "EUR/2 60", "from": f"pool:{index}", "to": "out"})
                    results.put(("ok", index, reference))
            except LedgerError as exc:
                results.put((exc.code, index, None))


def _race(url: str, mode: str) -> list[tuple[Any, ...]]:
    context = multiprocessing.get_context("spawn")
    barrier = context.Barrier(2)
    results = context.Queue()
    processes = [context.Process(target=_racer, args=(url, barrier, results, mode), name=f"racer{n}") for n in (1, 2)]
    for process in processes:
        process.start()
    collected = [results.get(timeout=120) for _ in range(2 * ROUNDS)]
    for process in processes:
        process.join(timeout=60)
        assert process.exitcode == 0
    return collected


def test_two_processes_applying_one_reference_apply_it_once(ledger_url: str) -> None:
    open_ledger(ledger_url, None).close()  # the schema exists before the race; first use is tested apart
    collected = _race(ledger_url, "same")
    assert all(status == "ok" for status, _, _ in collected)
    for index in range(ROUNDS):
        both = [postings for _, i, postings in collected if i == index]
        assert both == [[("world", f"escrow:{index}", 7)]] * 2
    with open_ledger(ledger_url, None) as ledger:
        assert ledger.balances(["world"]) == {"world": -7 * ROUNDS}
        assert len(ledger.references()) == ROUNDS
    print(f"same-reference races: {ROUNDS}, applied once each")


def test_two_processes_overdrawing_together_do_not_both_succeed(ledger_url: str) -> None:
    with open_ledger(ledger_url, None) as ledger:
        for index in range(ROUNDS):
            _fund(ledger, f"pool:{index}", 100)
    collected = _race(ledger_url, "overdraw")
    for index in range(ROUNDS):
        statuses = sorted(status for status, i, _ in collected if i == index)
        assert statuses == ["PW754", "ok"], (index, statuses)
    with open_ledger(ledger_url, None) as ledger:
        assert ledger.balances([f"pool:{i}" for i in range(ROUNDS)]) == {f"pool:{i}": 40 for i in range(ROUNDS)}
        assert ledger.balances(["out"]) == {"out": 60 * ROUNDS}
    print(f"overdraft races: {ROUNDS}, one spend each")


def test_two_processes_creating_a_ledger_at_once_both_succeed(ledger_url: str) -> None:
    collected = _race(ledger_url, "same")  # the first apply of each process also creates the schema
    assert sum(1 for status, _, _ in collected if status == "ok") == 2 * ROUNDS
