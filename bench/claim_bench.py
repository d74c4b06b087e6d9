"""Claim bench: does one claim's read grow with the backlog? Outbox worker and effect worker, SQLite and PostgreSQL.

A worker claims one entry at a time; if each claim reads (or sorts) the
whole backlog, draining n entries costs n^2. This times the read each claim
starts with, the outbox worker's due entry (`worker._DUE_SQL`, FOR UPDATE
SKIP LOCKED on PostgreSQL) and the effect worker's candidates
(`effect_worker._DUE`), on stores holding 100, 1,000 and 10,000 due rows
(the outbox rows all committed in one second, the worst case for its
order), plus 20,000 finished effect calls behind 100 due ones, after
`ANALYZE`. It prints milliseconds per read (median of 30, after 5 untimed)
and the ratio to the 100-row store in the same run: near 1 means a claim
costs the same whatever the backlog. Each store is then put back to its
indexes before migrations 12 and 13 (no `effects_live`; `outbox_due` in the
database's collation) and timed again, as the baseline the last column
compares with.

The rows are written straight into the tables with foreign keys off (no
agreements or events behind them): only the planner and the index see them.

Run: `python bench/claim_bench.py [--backends sqlite,postgresql] [--postgres URL]`
"""

from __future__ import annotations

import argparse
import contextlib
import secrets
import sqlite3
import statistics
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from pactwright.runtime.effect_worker import _DUE as EFFECTS_DUE
from pactwright.runtime.store import open_store
from pactwright.runtime.store._migrations import MIGRATIONS
from pactwright.runtime.worker import _DUE_SQL as OUTBOX_DUE

POSTGRES_URL = "postgresql://root@127.0.0.1:5432/test"
NOW = 1_000
SIZES = (100, 1_000, 10_000)
_EFFECT = (
    "INSERT INTO effects (id, agreement_id, event_seq, call_index, effect, strategy, phase, method, url, "
    "idempotency_key, payload, payload_digest, attempts, next_at, created_at, updated_at) "
    "VALUES (?, ?, 1, 0, 'pay', 'once', ?, 'POST', 'https://provider.example/pay', 'k', '{}', 'd', 0, ?, 0, 0)"
)
_OUTBOX = (
    "INSERT INTO outbox (agreement_id, event_seq, group_index, reference, program_path, variables, "
    "expected_postings, status, attempts, created_at, updated_at) "
    "VALUES (?, 1, 0, ?, 'ledger/fund.num', '{}', '[]', 'pending', 0, ?, ?)"
)


@contextlib.contextmanager
def connection(backend: str, postgres: str, directory: Path) -> Iterator[Any]:
    """A raw connection to a new, migrated store, foreign keys off; the PostgreSQL schema is dropped afterwards."""
    if backend == "sqlite":
        path = directory / f"claims-{secrets.token_hex(4)}.db"
        with open_store(str(path)):
            pass
        with contextlib.closing(sqlite3.connect(path, isolation_level=None)) as conn:
            conn.execute("PRAGMA foreign_keys=OFF")
            yield conn
        return
    import psycopg

    schema = f"pw_claims_{secrets.token_hex(6)}"
    with psycopg.connect(postgres, autocommit=True) as admin:
        admin.execute(f'CREATE SCHEMA "{schema}"')
        try:
            url = f"{postgres}{'&' if '?' in postgres else '?'}options=-csearch_path%3D{schema}"
            with open_store(url):
                pass
            with psycopg.connect(url, autocommit=True) as conn:
                conn.execute("SET session_replication_role = replica")  # no agreements behind the rows
                yield conn
        finally:
            admin.execute(f'DROP SCHEMA "{schema}" CASCADE')


def _sql(backend: str, sql: str) -> str:
    return sql if backend == "sqlite" else sql.replace("?", "%s")


def _fill(conn: Any, backend: str, due: int, finished: int, outbox: int) -> None:
    effects = [(f"d{n}/1/0", f"d{n}", "prepared", n % 7) for n in range(due)]
    effects += [(f"f{n}/1/0", f"f{n}", "acknowledged", n % 7) for n in range(finished)]
    entries = [(f"o{n}", f"o{n}/1/0", NOW - 1, NOW - 1) for n in range(outbox)]
    if backend == "sqlite":
        conn.execute("BEGIN")
        conn.executemany(_EFFECT, effects)
        conn.executemany(_OUTBOX, entries)
        conn.execute("COMMIT")
    else:
        with conn.cursor() as cursor:
            cursor.executemany(_sql(backend, _EFFECT), effects)
            cursor.executemany(_sql(backend, _OUTBOX), entries)
    conn.execute("ANALYZE")


def _timed(conn: Any, backend: str, sql: str, params: Sequence[Any], reads: int = 30) -> float:
    """Median milliseconds of one read (inside a transaction rolled back, as a claim's would be)."""
    times = []
    for n in range(reads + 5):
        began = time.perf_counter_ns()
        if backend == "sqlite":
            conn.execute("BEGIN IMMEDIATE")
            conn.execute(sql, params).fetchall()
            conn.execute("ROLLBACK")
        else:
            with conn.transaction():
                conn.execute(_sql(backend, sql), params).fetchall()
        if n >= 5:
            times.append((time.perf_counter_ns() - began) / 1e6)
    return statistics.median(times)


def _before_12_and_13(conn: Any, backend: str) -> None:
    """The claim indexes as they were before migrations 12 and 13."""
    conn.execute("DROP INDEX effects_live")
    if backend == "postgresql":
        conn.execute("DROP INDEX outbox_due")
        conn.execute(next(m for m in MIGRATIONS if m.version == 3).statements[0])  # outbox_due as migration 3 made it
    conn.execute("ANALYZE")


def bench(backend: str, postgres: str, directory: Path) -> list[tuple[str, int, int, float, float]]:
    """(what, due rows, finished rows, ms per read, ms per read before migrations 12 and 13) for every store."""
    outbox_sql = OUTBOX_DUE[backend] + (" FOR UPDATE OF o SKIP LOCKED" if backend == "postgresql" else "")
    out = []
    cases = [(n, 0) for n in SIZES] + [(100, 20_000)]
    for due, finished in cases:
        with connection(backend, postgres, directory) as conn:
            _fill(conn, backend, due, finished, due if finished == 0 else 0)
            reads = [("effects", EFFECTS_DUE[backend], (NOW, NOW, NOW))] + (
                [("outbox", outbox_sql, (NOW,))] if not finished else []
            )
            now = [_timed(conn, backend, sql, params) for _, sql, params in reads]
            _before_12_and_13(conn, backend)
            then = [_timed(conn, backend, sql, params) for _, sql, params in reads]
            out += [(what, due, finished, a, b) for (what, _, _), a, b in zip(reads, now, then, strict=True)]
    return out


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backends", default="sqlite,postgresql", help="comma-separated: sqlite, postgresql")
    parser.add_argument("--postgres", default=POSTGRES_URL, help=f"PostgreSQL URL (default {POSTGRES_URL})")
    args = parser.parse_args(argv)
    backends = [b.strip() for b in args.backends.split(",") if b.strip()]
    if any(b not in ("sqlite", "postgresql") for b in backends):
        parser.error("backends are sqlite and postgresql")
    print(f"{'backend':<10} {'read':<8} {'due':>6} {'finished':>8} | {'ms/read':>8} {'vs 100 due':>10} | "
          f"{'before 12/13':>12} {'speed-up':>8}")  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="pw-claim-bench-") as directory:
        for backend in backends:
            rows = bench(backend, args.postgres, Path(directory))
            base = {what: ms for what, due, finished, ms, _ in rows if due == SIZES[0] and finished == 0}
            for what, due, finished, ms, old in rows:
                print(f"{backend:<10} {what:<8} {due:>6} {finished:>8} | {ms:>8.3f} {ms / base[what]:>9.1f}x | "
                      f"{old:>12.3f} {old / ms:>7.1f}x")  # fmt: skip
    print(
        "ms/read: median of 30 reads of the claim's first statement; near 1x: a claim does not grow with the "
        "backlog; before 12/13: the same store with the claim indexes as they were"
    )


if __name__ == "__main__":
    main()
