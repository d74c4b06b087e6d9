"""Store migration 11: a `compensate` call given up undoes the earlier calls of its event in older stores.

Before migration 11 a `compensate` call whose outcome was unknown became
`compensation_required` without putting the `compensate` calls before it in
its event, which had gone through, there too: they stayed `acknowledged`
and were never undone, while the verifier's model, the worker and the
evidence replay all say they must be. The migration repairs such rows on
both backends, and leaves every row a legitimate history of this release
wrote as it is.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from pactwright.runtime import TestClock
from pactwright.runtime.effect_worker import EffectWorker
from pactwright.runtime.store import open_store
from pactwright.runtime.store._migrations import LATEST
from tests._chain_tamper import undo_event_links
from tests.signed_bundles import BACKENDS
from tests.test_effect_replay_attacks import _refused, _run, _sent, _three
from tests.test_evidence_replay_attacks import SEQUENCES, _phases, _play, _policy, _problems, _running, _verifies
from tests.test_liveness_attacks import T0


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_earlier_call_left_acknowledged_is_undone_after_migration_11(backend: str, tmp_path: Path) -> None:
    """charge and hold are `compensate with ...`; hold's answer is lost after charge went through."""
    policy = _three("compensate with undo", "compensate with release", "once")
    with _run(policy, tmp_path, backend) as (store, sim, adapter, url):
        EffectWorker(store, adapter, TestClock(T0 + 20)).step()
        sim.queue("lost_response")
        EffectWorker(store, adapter, TestClock(T0 + 30)).step()
        legitimate = _phases(store)
        assert legitimate == [("1/e0", "compensation_required", 0), ("1/e1", "compensation_required", 0),
                              ("1/e2", "prepared", 0)]  # fmt: skip
        with store.transaction(exclusive=False) as db:  # the rows as releases before 11 left them
            db.execute("UPDATE effects SET phase = 'acknowledged' WHERE id = 'a1/1/e0'")
        assert _problems(store) == [("PW586", None, "effect call `a1/1/e0` disagrees with its evidence records on "
                                                    "phase")]  # fmt: skip
        with store.transaction(exclusive=False) as db:
            undo_event_links(db)  # made before migration 15 too
            db.execute("DELETE FROM schema_migrations WHERE version >= 11")
        assert store.schema_version() == 10
        with open_store(url) as migrated:
            assert migrated.schema_version() == LATEST
            assert _phases(migrated) == legitimate
            _verifies(migrated)
            for n in range(4):
                EffectWorker(migrated, adapter, TestClock(T0 + 1000 * (n + 1))).drain(limit=100)
            assert _refused(migrated) == []
            assert _phases(migrated) == [("1/e0", "compensated", 0), ("1/e0/c", "acknowledged", 0),
                                         ("1/e1", "compensated", 0), ("1/e1/c", "acknowledged", 0),
                                         ("1/e2", "cancelled", 0)]  # fmt: skip
            sent = _sent(sim)
            assert (sent.count("/undo"), sent.count("/release"), sent.count("/notify")) == (1, 1, 0), sent
            _verifies(migrated)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", sorted(SEQUENCES))
def test_migration_11_leaves_every_row_of_a_legitimate_history_as_it_is(backend: str, name: str,
                                                                        tmp_path: Path) -> None:  # fmt: skip
    undo, notify, plan, phases = SEQUENCES[name]
    with _running(_policy("compensate with undo", undo, notify), tmp_path, backend) as (store, sim, adapter, url):
        _play(store, sim, adapter, plan)
        assert _phases(store) == phases
        with store.transaction(write=False) as db:
            before = db.query("SELECT * FROM effects ORDER BY id")
        with store.transaction(exclusive=False) as db:
            undo_event_links(db)  # made before migration 15 too
            db.execute("DELETE FROM schema_migrations WHERE version >= 11")
        with open_store(url) as migrated:
            assert migrated.schema_version() == LATEST
            with migrated.transaction(write=False) as db:
                assert db.query("SELECT * FROM effects ORDER BY id") == before
            _verifies(migrated)
