"""Attacks on `PostgresBackend.query_many` answering several reads as ONE statement (since commit d7f9b5a).

The claim under attack: on PostgreSQL, `query_many(reads)` returns exactly
what the same reads run one by one (each `execute(..., binary=True).fetchall()`,
as the code before d7f9b5a did) would return inside the caller's transaction:
the same rows, in the same order, with the same Python types and values; a
failing read fails the call; and nothing the command path relies on changes
(locking, what is visible after the agreement's row lock, refusal codes).

Each read now travels as `ARRAY(SELECT ROW(t.*) FROM (<read>) t)`, one column
of one `SELECT`, with every read's parameters bound in one list. What broke
at d7f9b5a (each now goes one by one instead, `runtime/store/_pg_reads.py`):

- a column of a DOMAIN type (information_schema's columns are domains too):
  a plain fetch is described by its base type (text -> str), a record field
  carries the domain's own OID, which psycopg does not know, so it comes back
  as raw bytes. On the command path a store whose `events.payload_digest`
  is a domain over text turns the retry of a committed command (a replay)
  into a PW515 refusal;
- a read's own SQL text is pasted inside parentheses: a read that ends with
  `;` or a `--` comment fails the combined statement;
- the parameters of all reads are one list: a read given too few parameters
  and the next one too many no longer fails, it silently takes its
  neighbour's value; reads whose parameters sum past 65,535 fail together;
- more than 1,664 reads exceed PostgreSQL's target list.

Not tested here (it moves over 1 GB): reads whose answers together pass
PostgreSQL's 1 GB limit on one row fail as one statement where each alone
would not; `_pg_reads` documents that limit.

What held is asserted too: zero-column reads, all-NULL rows, nested records,
arrays, json/jsonb, numeric, timestamps, intervals, a str parameter in a
target list, non-UTF-8 client encodings, FOR UPDATE inside a read still
locking, ORDER BY under parallel plans, the store's own three reads of a
command equal to the reads one by one, and a command waiting on the row lock
seeing the commit it waited for (the key's replay and the evidence head).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import psycopg
import pytest

from pactwright.errors import CommandError
from pactwright.runtime import TestClock, open_agreement, submit, verify_evidence
from pactwright.runtime import _agreement as rows
from pactwright.runtime.commands import _AFTER_LOCK, Command, run_in
from pactwright.runtime.store import open_store
from pactwright.runtime.store._backend import PostgresBackend, connect
from pactwright.runtime.store._store import _ACTIVATION_SQL, _file_rows_sql
from tests import signed_bundles as sb
from tests.test_runtime_attacks import PARTIES, T0, _activated

Reads = Sequence[tuple[str, Sequence[Any]]]


def _one_by_one(db: PostgresBackend, reads: Reads) -> list[list[tuple[Any, ...]]]:
    """The reads as the code before d7f9b5a ran them: one statement each, answered in binary."""
    conn = db._conn
    answers = [conn.execute(db._sql(sql), tuple(params), binary=True).fetchall() for sql, params in reads]
    return [[tuple(bytes(v) if isinstance(v, memoryview) else v for v in row) for row in rows_] for rows_ in answers]


def _outcome(call: Any) -> Any:
    """What a call returns, or its error's class and first line (so two failures compare by kind)."""
    try:
        return call()
    except psycopg.Error as exc:
        return ("error", type(exc).__name__, str(exc).splitlines()[0])


@pytest.fixture
def pg(tmp_path: Path) -> Iterator[PostgresBackend]:
    with sb.temporary_store("postgresql", tmp_path) as url:
        backend = connect(url)
        assert isinstance(backend, PostgresBackend)
        try:
            with backend.transaction(write=True):
                backend.execute("CREATE DOMAIN hexdigest AS TEXT CHECK (VALUE ~ '^[0-9a-f]*$')")
                backend.execute("CREATE TABLE qa (name TEXT PRIMARY KEY, n BIGINT, digest hexdigest)")
                backend.execute_many(
                    "INSERT INTO qa (name, n, digest) VALUES (?, ?, ?)", [("a", 1, "ab01"), ("b", 2, "cd02")]
                )
            yield backend
        finally:
            backend.close()


@pytest.fixture
def pg_url(tmp_path: Path) -> Iterator[str]:
    """A PostgreSQL store with the marketplace bundle active."""
    with sb.temporary_store("postgresql", tmp_path) as url:
        yield _activated(url)


def _same(db: PostgresBackend, reads: Reads, *, write: bool = False) -> tuple[Any, Any]:
    with db.transaction(write=write):
        alone = _outcome(lambda: _one_by_one(db, reads))
    with db.transaction(write=write):
        together = _outcome(lambda: db.query_many(reads))
    return alone, together


# Broke: types --------------------------------------------------------------------------------------------


def test_a_domain_typed_column_comes_back_as_the_read_alone_types_it(pg: PostgresBackend) -> None:
    """BREAKS: a record field carries the domain's OID (unknown to psycopg): bytes, where a read alone gives str."""
    reads = [("SELECT name, digest FROM qa ORDER BY name", ()), ("SELECT n FROM qa WHERE name = ?", ("a",))]
    alone, together = _same(pg, reads)
    assert alone == [[("a", "ab01"), ("b", "cd02")], [(1,)]]
    assert together == alone


def test_information_schema_names_come_back_as_text(pg: PostgresBackend) -> None:
    """BREAKS: information_schema's columns are domains (sql_identifier): b'qa' together, 'qa' alone."""
    reads = [
        ("SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema() ORDER BY 1", ()),
        ("SELECT 1", ()),
    ]
    alone, together = _same(pg, reads)
    assert alone == [[("qa",)], [(1,)]]
    assert together == alone


def test_a_domain_on_the_event_digest_keeps_a_retry_a_replay(pg_url: str) -> None:
    """BREAKS on the command path: the same command retried under its key is answered from the store
    (replay) when the read of `_AFTER_LOCK` runs alone; with the key's `payload_digest` a domain over
    text, the record read gives bytes, `str(b'...')` never equals the digest, and the retry is refused
    PW515 ("idempotency key was used for another payload") although nothing in any row changed."""
    with open_store(pg_url) as store:
        open_agreement(store, sb.PACT_ID, {"price": "64.90"}, PARTIES, agreement_id="dom1", clock=TestClock(T0))
        first = submit(store, "dom1", "fund", "buyer", "alice", "k-fund", clock=TestClock(T0))
        with store.transaction() as db:
            db.execute("CREATE DOMAIN digest_text AS TEXT")
            db.execute("ALTER TABLE events ALTER COLUMN payload_digest TYPE digest_text")
    with open_store(pg_url) as store:
        try:
            again = submit(store, "dom1", "fund", "buyer", "alice", "k-fund", clock=TestClock(T0 + 1))
        except CommandError as exc:
            pytest.fail(f"a retry of the committed command was refused {exc.code}: {exc}")
    assert again.replayed and again.event_id == first.event_id


# Broke: the read's text pasted into one statement ---------------------------------------------------------


def test_a_read_ending_in_a_semicolon(pg: PostgresBackend) -> None:
    """BREAKS: `SELECT ...;` runs alone; inside `FROM (...;) t` it is a syntax error."""
    reads = [("SELECT name FROM qa ORDER BY name;", ()), ("SELECT 2", ())]
    alone, together = _same(pg, reads)
    assert alone == [[("a",), ("b",)], [(2,)]]
    assert together == alone


def test_a_read_ending_in_a_line_comment(pg: PostgresBackend) -> None:
    """BREAKS: a trailing `-- comment` swallows the rest of the combined statement's one line."""
    reads = [("SELECT name FROM qa ORDER BY name -- the names", ()), ("SELECT 2", ())]
    alone, together = _same(pg, reads)
    assert alone == [[("a",), ("b",)], [(2,)]]
    assert together == alone


# Broke: parameters bound as one list --------------------------------------------------------------------


def test_a_read_given_too_few_parameters_fails_the_call(pg: PostgresBackend) -> None:
    """BREAKS: read 1 has two placeholders and one value, read 2 none and one value. One by one that is
    refused; together the placeholders and values add up, and read 1 silently binds read 2's value."""
    reads = [("SELECT name FROM qa WHERE name = ? AND n = ?", ("a",)), ("SELECT 2", (1,))]
    alone, together = _same(pg, reads)
    assert alone[0] == "error" and "placeholders" in alone[2]
    assert together == alone, f"the mis-bound call answered {together}"


def test_reads_whose_parameters_sum_past_the_protocol_limit(pg: PostgresBackend) -> None:
    """BREAKS: two reads of 40,000 parameters each run alone; together they pass the 65,535 a statement may bind."""
    many = 40_000
    sql = f"SELECT count(*) FROM qa WHERE n IN ({', '.join('?' * many)})"  # noqa: S608 - placeholders only
    reads = [(sql, tuple(range(many))), (sql, tuple(range(many, 2 * many)))]
    alone, together = _same(pg, reads)
    assert alone == [[(2,)], [(0,)]]
    assert together == alone


def test_more_reads_than_a_target_list_holds(pg: PostgresBackend) -> None:
    """BREAKS: 1,700 reads each become a column of one SELECT, past PostgreSQL's 1,664."""
    reads = [("SELECT n FROM qa WHERE n = ?", (k,)) for k in range(1700)]
    alone, together = _same(pg, reads)
    assert alone[:3] == [[], [(1,)], [(2,)]]
    assert together == alone


# Held: values and types ---------------------------------------------------------------------------------

HELD = [
    [("SELECT FROM qa ORDER BY name", ()), ("SELECT 2", ())],  # zero columns
    [("SELECT k.n, k.name, k.digest FROM (SELECT 1) o LEFT JOIN qa k ON false", ()), ("SELECT 2", ())],  # all NULL
    [("SELECT ROW(1, 'a'::text), ARRAY[1, 2], ARRAY['a', 'é'], ARRAY['\\x00ff'::bytea]", ()), ("SELECT 2", ())],
    [("SELECT '{\"a\": [1, 2.5]}'::json, '{\"a\": 1}'::jsonb, 1.50::numeric", ()), ("SELECT 2", ())],
    [
        ("SELECT TIMESTAMPTZ '2026-06-01 12:00Z', TIMESTAMP '2026-06-01', DATE '2026-06-01', INTERVAL '1 day'", ()),
        ("SELECT 2", ()),
    ],
    [("SELECT ? AS s, ? AS i, ? AS big, ? AS b, ? AS nothing", ("é?", 3, 2**62, b"\x00", None)), ("SELECT ?", (1,))],
    [
        ("SELECT 'ab'::varchar(5), 'ab'::char(4), 'x'::name, 'a'::\"char\", 1::oid, true, -0.0::float8", ()),
        ("SELECT 2", ()),
    ],
    [("VALUES (2), (1)", ()), ("WITH w AS (SELECT name FROM qa) SELECT name, name FROM w ORDER BY 1 DESC", ())],
]


@pytest.mark.parametrize("reads", HELD, ids=[
    "zero-columns", "all-null-row", "records-arrays", "json-numeric", "times", "parameters", "scalars", "values-cte"
])  # fmt: skip
def test_held_values_and_types(pg: PostgresBackend, reads: Reads) -> None:
    alone, together = _same(pg, reads)
    assert alone[0] != "error"
    assert together == alone


@pytest.mark.parametrize("encoding", ["LATIN1", "WIN1252"])
def test_held_text_under_another_client_encoding(tmp_path: Path, encoding: str) -> None:
    with sb.temporary_store("postgresql", tmp_path) as url:
        db = connect(f"{url}&client_encoding={encoding}")
        assert isinstance(db, PostgresBackend)
        try:
            reads = [("SELECT 'été' AS t, 'ü'::varchar AS v", ()), ("SELECT ?", ("ça",))]
            alone, together = _same(db, reads)
            assert alone == [[("été", "ü")], [("ça",)]]
            assert together == alone
        finally:
            db.close()


def test_held_empty_and_single(pg: PostgresBackend) -> None:
    with pg.transaction(write=False):
        assert pg.query_many([]) == []
        assert pg.query_many([("SELECT name FROM qa ORDER BY name", ())]) == [[("a",), ("b",)]]


# Held: order ------------------------------------------------------------------------------------------


def test_held_order_by_under_parallel_plans_and_a_contrary_index(pg: PostgresBackend) -> None:
    """An ORDER BY over unique keys comes back in that order together, even where the read alone is
    planned as a parallel Gather Merge and an index offers the opposite order."""
    with pg.transaction(write=True):
        pg.execute("CREATE TABLE big (path TEXT PRIMARY KEY, n INTEGER NOT NULL, content BYTEA)")
        pg.execute(
            "INSERT INTO big SELECT md5(g::text), g, CASE WHEN g / 997 * 997 = g THEN convert_to(repeat('z', 9000), "
            "'UTF8') END FROM generate_series(1, 30000) g"
        )
        pg.execute("CREATE INDEX big_desc ON big (n DESC)")
        pg.execute("ANALYZE big")
    reads = [("SELECT path, n, content FROM big ORDER BY path", ()), ("SELECT n, path FROM big ORDER BY n", ())]
    with pg.transaction(write=True):
        for setting in ("parallel_setup_cost = 0", "parallel_tuple_cost = 0", "min_parallel_table_scan_size = 0"):
            pg.execute(f"SET LOCAL {setting}")
        alone = _one_by_one(pg, reads)
        together = pg.query_many(reads)
    assert [r[0] for r in alone[0]] == sorted(r[0] for r in alone[0])
    assert together == alone


# Held: locking and what the command path reads -----------------------------------------------------------


def test_held_for_update_in_a_read_still_locks(pg: PostgresBackend) -> None:
    reads = [("SELECT name FROM qa WHERE name = ? FOR UPDATE", ("a",)), ("SELECT 2", ())]
    with psycopg.connect(pg._conn.info.dsn, autocommit=True) as other, pg.transaction(write=True, exclusive=False):
        assert pg.query_many(reads) == [[("a",)], [(2,)]]
        with pytest.raises(psycopg.errors.LockNotAvailable):
            other.execute("SELECT 1 FROM qa WHERE name = 'a' FOR UPDATE NOWAIT")
    with pg.transaction(write=False), pytest.raises(psycopg.errors.ReadOnlySqlTransaction):
        pg.query_many(reads)


@pytest.mark.parametrize("only", [None, (rows.TRANSITIONS_PATH, *rows.EXECUTED)], ids=["all", "executed"])
def test_held_the_command_paths_reads_equal_the_reads_one_by_one(pg_url: str, only: Any) -> None:
    """The store's own three reads of a command (activation row, file rows ORDER BY path, key and head)."""
    with open_store(pg_url) as store:
        open_agreement(store, sb.PACT_ID, {"price": "64.90"}, PARTIES, agreement_id="r1", clock=TestClock(T0))
        submit(store, "r1", "fund", "buyer", "alice", "k-fund", clock=TestClock(T0))
        with store.transaction(exclusive=False) as db:
            assert isinstance(db, PostgresBackend)
            agreement = rows.read(db, "r1", lock=True)
            for key in ("k-fund", "k-new"):
                reads = [
                    (_ACTIVATION_SQL, (agreement.activation_id,)),
                    _file_rows_sql(agreement.manifest_hash, only),
                    (_AFTER_LOCK, ("r1", key, *rows.head_params("r1"))),
                ]
                alone = _one_by_one(db, reads)
                together = db.query_many(reads)
                assert together == alone
                assert [type(v) for v in together[0][0]] == [type(v) for v in alone[0][0]]
                assert len(together[1]) > 3 and all(type(r[3]) in (bytes, type(None)) for r in together[1])
                assert (together[2][0][0] is None) == (key == "k-new") and together[2][0][6] is not None


def _waiting(admin: psycopg.Connection[Any], application: str) -> bool:
    row = admin.execute(
        "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s AND wait_event_type = 'Lock'",
        (application,),
    ).fetchone()
    return bool(row and row[0])


@pytest.mark.parametrize("second", ["same-key", "next-command"])
def test_held_a_command_waiting_on_the_row_lock_sees_the_commit_it_waited_for(pg_url: str, second: str) -> None:
    """A command blocked on the agreement's FOR UPDATE while another commits under that lock then reads,
    in its one combined statement, the key the other committed (a replay) and the evidence head it
    wrote (the chain stays whole), as the reads one by one after the lock did."""
    application = f"qm_waiter_{second}"
    with open_store(pg_url) as first_store, open_store(f"{pg_url}&application_name={application}") as other:
        open_agreement(first_store, sb.PACT_ID, {"price": "64.90"}, PARTIES, agreement_id="w1",
                       clock=TestClock(T0))  # fmt: skip
        outcome: dict[str, Any] = {}

        def waiter() -> None:
            try:
                if second == "same-key":
                    outcome["r"] = submit(other, "w1", "fund", "buyer", "alice", "k-fund", clock=TestClock(T0 + 5))
                else:
                    outcome["r"] = submit(other, "w1", "deliver", "seller", "bob", "k-deliver", clock=TestClock(T0 + 5))
            except Exception as exc:
                outcome["r"] = exc

        with psycopg.connect(sb.POSTGRES_URL, autocommit=True) as admin:
            with first_store.transaction(exclusive=False) as db:
                first = run_in(first_store, db, "w1", Command("fund", "buyer", "alice", "k-fund", {}), T0)
                thread = threading.Thread(target=waiter)
                thread.start()
                deadline = time.monotonic() + 20
                while not _waiting(admin, application):
                    assert time.monotonic() < deadline, "the second command never waited on the row lock"
                    time.sleep(0.02)
            thread.join(30)
        result = outcome["r"]
        assert not isinstance(result, BaseException), result
        if second == "same-key":
            assert result.replayed and result.event_id == first.event_id
        else:
            assert not result.replayed and result.seq == first.seq + 1
        check = verify_evidence(first_store, "w1")
        assert check.ok, check.problems
