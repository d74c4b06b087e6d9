"""`Backend.query_many` answers several reads exactly as the same reads one by one would.

On PostgreSQL the reads travel as ONE statement (each read an array of
records), so what must not change is checked here against `query`, on both
backends: the rows of each read and their order (a read with ORDER BY, one
whose rows the index would give in another order), an empty read, NULLs,
bytes, booleans, integers past 32 bits, text with non-ASCII characters, two
columns of one name, parameters bound in the order the reads are given, and
a failing read failing the whole call.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from pactwright.runtime.store._backend import Backend, connect
from tests import signed_bundles as sb

ROWS = [
    ("zeta", 3, True, b"\x00\x01\xff", None),
    ("alpha", 2**40, False, b"", "\u00e9t\u00e9 \u2713"),
    ("mid", -7, None, None, "x"),
    ("beta", 0, True, bytes(range(256)) * 40, ""),  # 10 KiB: stored out of line on PostgreSQL
]

READS = [
    ("SELECT name, n, flag, data, note FROM qm ORDER BY name", ()),
    ("SELECT name FROM qm WHERE n > ? ORDER BY n DESC", (0,)),
    ("SELECT name, n FROM qm WHERE name = ?", ("nobody",)),
    ("SELECT a.n, b.n FROM qm a JOIN qm b ON b.name = ? WHERE a.name = ?", ("mid", "zeta")),
    ("SELECT COUNT(*), MAX(n) FROM qm WHERE note IS NULL OR name = ?", ("beta",)),
    ("SELECT one FROM (SELECT 1 AS one) o LEFT JOIN qm k ON k.name = ?", ("nobody",)),
]


@pytest.fixture(params=sb.BACKENDS)
def db(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    with sb.temporary_store(str(request.param), tmp_path) as url:
        backend = connect(url)
        try:
            with backend.transaction(write=True):
                backend.execute(
                    "CREATE TABLE qm (name TEXT PRIMARY KEY, n BIGINT, flag BOOLEAN, "
                    f"data {backend.blob_type}, note TEXT)"
                )
                backend.execute_many("INSERT INTO qm (name, n, flag, data, note) VALUES (?, ?, ?, ?, ?)", ROWS)
            yield backend
        finally:
            backend.close()


def test_reads_together_equal_the_reads_one_by_one(db: Backend) -> None:
    with db.transaction(write=False):
        alone = [db.query(sql, params) for sql, params in READS]
        together = db.query_many(READS)
    assert together == alone
    assert [row[0] for row in together[0]] == ["alpha", "beta", "mid", "zeta"]
    assert together[1] == [("alpha",), ("zeta",)]
    assert together[2] == []
    assert together[3] == [(3, -7)]
    assert together[5] == [(1,)]
    by_name = {row[0]: row for row in together[0]}
    assert by_name["beta"][3] == bytes(range(256)) * 40 and type(by_name["beta"][3]) is bytes
    assert by_name["zeta"][3] == b"\x00\x01\xff" and by_name["mid"][3] is None and by_name["alpha"][3] == b""
    assert by_name["alpha"][1] == 2**40 and by_name["alpha"][4] == "\u00e9t\u00e9 \u2713"


@pytest.mark.parametrize("count", [1, 2, len(READS)])
def test_any_number_of_reads_and_their_order_of_parameters(db: Backend, count: int) -> None:
    reads = list(reversed(READS))[:count]
    with db.transaction(write=False):
        assert db.query_many(reads) == [db.query(sql, params) for sql, params in reads]


def test_a_failing_read_fails_the_call(db: Backend) -> None:
    reads = [READS[0], ("SELECT nothing FROM no_such_table", ())]
    with pytest.raises(Exception) as raised, db.transaction(write=False):
        db.query_many(reads)
    assert "no_such_table" in str(raised.value) or "nothing" in str(raised.value)
