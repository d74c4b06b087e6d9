"""The outbox claim walks an index in claim order on both backends: no claim sorts the pending entries.

A backlog committed within one second (a ledger outage, a batch) puts every
pending entry at one `created_at`; the claim then orders them by agreement
id in code-point order. If no index holds that order, each claim sorts the
whole backlog, and draining n entries costs n^2 (on PostgreSQL, before
migration 12, 3,600 entries drained at 59 a second instead of 300). The
plans are read with sorting priced out (`enable_sort = off` on PostgreSQL),
so a plan that still sorts is one that has no index to walk.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from pactwright.runtime import TestClock, open_agreement, submit
from pactwright.runtime.ledger_db import open_ledger
from pactwright.runtime.store import open_store
from pactwright.runtime.worker import _DUE_SQL, Worker
from tests._query_plans import plan_nodes
from tests.signed_bundles import BACKENDS, PACT_ID
from tests.test_runtime_worker import PARTIES, T0, environment

AGREEMENTS = 40


def _backlog(url: str) -> None:
    """AGREEMENTS funded agreements, all committed at T0, ids out of code-point order when read as numbers."""
    with open_store(url) as store:
        for n in range(AGREEMENTS):
            agreement_id = f"b{n}"
            open_agreement(store, PACT_ID, {"price": "10.00"}, PARTIES, agreement_id=agreement_id, clock=TestClock(T0))
            submit(store, agreement_id, "fund", "buyer", "alice", f"{agreement_id}-fund", clock=TestClock(T0))


def _plan(url: str, backend: str) -> Any:
    with open_store(url) as store, store.transaction(write=False) as db:
        if backend == "postgresql":
            db.execute("SET LOCAL enable_sort = off")
            sql = f"EXPLAIN (FORMAT JSON) {_DUE_SQL[backend]} FOR UPDATE OF o SKIP LOCKED"
            return db.query(sql, (T0,))[0][0]
        return [str(row[-1]) for row in db.query(f"EXPLAIN QUERY PLAN {_DUE_SQL[backend]}", (T0,))]


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_claim_walks_the_claim_order_index_without_sorting(backend: str, tmp_path: Path) -> None:
    with environment(backend, tmp_path) as url:
        _backlog(url)
        plan = _plan(url, backend)
        if backend == "postgresql":
            nodes = plan_nodes(plan)
            assert any(node.startswith(("Index Scan outbox_due", "Index Only Scan outbox_due")) for node in nodes), (
                nodes
            )
            assert not any("Sort" in node for node in nodes), nodes
        else:
            assert any("USING INDEX outbox_due" in line for line in plan), plan
            assert not any("TEMP B-TREE" in line for line in plan), plan


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_backlog_of_one_instant_drains_in_code_point_order_of_ids(backend: str, tmp_path: Path) -> None:
    """What the index serves is still the order: one instant, agreements by id in code-point order."""
    with environment(backend, tmp_path) as url:
        _backlog(url)
        with open_store(url) as store:
            ledger = open_ledger(None, url)
            try:
                outcomes = Worker(store, ledger, TestClock(T0)).drain()
            finally:
                ledger.close()
        delivered = [o.reference.split("/")[0] for o in outcomes if o.status == "delivered"]
        assert delivered == sorted(f"b{n}" for n in range(AGREEMENTS))
        assert delivered[:3] == ["b0", "b1", "b10"]
