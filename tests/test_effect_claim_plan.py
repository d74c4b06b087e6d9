"""The effect worker's candidate read walks the live calls in claim order: it never sorts, nor reads finished calls.

Before migration 13 every claim read every due call and sorted them: with
10,000 calls due (a provider down for an hour) one candidate read took 8 ms
on SQLite and 14 ms on PostgreSQL, so draining them cost n^2; and on SQLite,
once `ANALYZE` had run, it walked the finished calls as well (7 ms with
20,000 of them behind 100 due ones). The partial index `effects_live`
holds only the calls a claim can take, in the order a claim takes them.
"""

from __future__ import annotations

import contextlib
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from pactwright.protocol import PHASE_NAMES
from pactwright.runtime.effect_worker import _DUE, _IS_DUE
from pactwright.runtime.store import open_store
from pactwright.runtime.store._migrations import EFFECTS_LIVE
from tests._query_plans import plan_nodes
from tests.signed_bundles import BACKENDS, temporary_store

NOW = 1_000
_INSERT = (
    "INSERT INTO effects (id, agreement_id, event_seq, call_index, effect, strategy, compensates, phase, method, "
    "url, idempotency_key, payload, payload_digest, amount, attempts, lease_until, next_at, created_at, updated_at) "
    "VALUES (?, ?, 1, 0, 'pay', 'once', NULL, ?, 'POST', 'https://provider.example/pay', 'k', '{}', 'd', NULL, 0, "
    "?, ?, 0, 0)"
)


def _rows(due: int, finished: int) -> list[tuple[Any, ...]]:
    """`due` calls to send and `finished` acknowledged ones, one agreement each (the rows are only for the planner)."""
    out = [(f"d{n}/1/0", f"d{n}", "prepared", None, n % 7) for n in range(due)]
    return out + [(f"f{n}/1/0", f"f{n}", "acknowledged", None, n % 7) for n in range(finished)]


def test_sqlite_walks_the_live_index_even_after_analyze(tmp_path: Path) -> None:
    url = str(tmp_path / "store.db")
    with open_store(url):
        pass
    with contextlib.closing(sqlite3.connect(url, isolation_level=None)) as conn:
        conn.execute("PRAGMA foreign_keys=OFF")  # rows for the planner only: no agreements behind them
        conn.executemany(_INSERT, _rows(100, 5_000))
        conn.execute("ANALYZE")
        plan = [str(row[-1]) for row in conn.execute(f"EXPLAIN QUERY PLAN {_DUE['sqlite']}", (NOW, NOW, NOW))]
        assert any("USING INDEX effects_live" in line for line in plan), plan
        assert not any("TEMP B-TREE" in line for line in plan), plan
        assert len(conn.execute(_DUE["sqlite"], (NOW, NOW, NOW)).fetchall()) == 64


def test_postgresql_has_an_index_that_gives_the_claim_order() -> None:
    """With sorting priced out, a plan that still sorts is one with no index to walk."""
    with temporary_store("postgresql", Path()) as url, open_store(url) as store, store.transaction(write=False) as db:
        db.execute("SET LOCAL enable_sort = off")
        nodes = plan_nodes(db.query(f"EXPLAIN (FORMAT JSON) {_DUE['postgresql']}", (NOW, NOW, NOW))[0][0])
    assert any("effects_live" in node for node in nodes), nodes
    assert not any(node.startswith(("Sort", "Incremental Sort")) for node in nodes), nodes


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_index_terms_leave_out_no_call_the_worker_may_take(backend: str, tmp_path: Path) -> None:
    """For every phase, leased or not, early or late: due by `_IS_DUE` alone exactly when due by the claim's read."""
    # The protocol's phases, plus the two the runtime stores beyond them: a call sent and not yet answered
    # (`dispatched`, the protocol's `uncertain` while its worker lives) and one never sent (`cancelled`).
    phases = sorted({*PHASE_NAMES.values(), "dispatched", "cancelled"})
    cases = [(phase, lease, next_at) for phase in phases for lease in (None, NOW - 1, NOW + 1)
             for next_at in (0, NOW + 1)]  # fmt: skip
    with temporary_store(backend, tmp_path) as url, open_store(url) as store, store.transaction() as db:
        if backend == "postgresql":
            db.execute("SET LOCAL session_replication_role = replica")  # no agreements behind the rows
        else:
            db.execute("PRAGMA defer_foreign_keys = ON")
        for n, (phase, lease, next_at) in enumerate(cases):
            db.execute(_INSERT, (f"c{n}/1/0", f"c{n}", phase, lease, next_at))
        alone = {r[0] for r in db.query(f"SELECT id FROM effects WHERE {_IS_DUE}", (NOW, NOW, NOW))}  # noqa: S608
        indexed = {r[0] for r in db.query(
            f"SELECT id FROM effects WHERE quarantined = 0 AND phase IN {EFFECTS_LIVE} AND {_IS_DUE}",  # noqa: S608
            (NOW, NOW, NOW))}  # fmt: skip
        db.execute("DELETE FROM effects")
    assert alone and alone == indexed
    live = {phase for n, (phase, _, _) in enumerate(cases) if f"c{n}/1/0" in alone}
    assert live == {p.strip(" '") for p in EFFECTS_LIVE.strip("()").split(",")}
