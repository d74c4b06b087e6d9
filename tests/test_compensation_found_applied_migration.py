"""Store migration 10: a compensation found applied before it undoes its call in stores made before it.

Before migration 10 a compensation found applied by a lookup or by an
operator left the call it undoes in `compensation_required` for good (due,
and skipped by every claim), and the evidence said it was still to be
undone. The worker now marks the call `compensated`, as after an
acknowledged compensation, and the evidence replay expects that; the
migration repairs the rows such a store already holds, on both backends.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from pactwright.runtime.store import open_store
from pactwright.runtime.store._migrations import LATEST
from tests._chain_tamper import undo_event_links
from tests.signed_bundles import BACKENDS
from tests.test_evidence_replay_attacks import (
    SEQUENCES,
    _claims,
    _migrates_unchanged,
    _phases,
    _play,
    _policy,
    _problems,
    _running,
    _verifies,
)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", ["compensation found applied by lookup",
                                  "compensation parked, an operator finds it applied"])  # fmt: skip
def test_a_store_left_in_compensation_required_is_repaired_by_migration_10(
    backend: str, name: str, tmp_path: Path
) -> None:
    undo, notify, plan, _ = SEQUENCES[name]
    with _running(_policy("compensate with undo", undo, notify), tmp_path, backend) as (store, sim, adapter, url):
        _play(store, sim, adapter, plan)
        assert _phases(store)[0] == ("1/e0", "compensated", 0)
        _verifies(store)
        with store.transaction(exclusive=False) as db:  # the rows as the code before migration 10 left them
            db.execute("UPDATE effects SET phase = 'compensation_required' WHERE id = 'a1/1/e0'")
        assert _phases(store)[0] == ("1/e0", "compensation_required", 0)
        assert _problems(store) == [("PW586", None, "effect call `a1/1/e0` disagrees with its evidence records on "
                                                    "phase")]  # fmt: skip
        with store.transaction(exclusive=False) as db:
            undo_event_links(db)  # made before migration 15 too
            db.execute("DELETE FROM schema_migrations WHERE version >= 10")  # made before 10 (and 11)
        assert store.schema_version() == 9
        with open_store(url) as migrated:
            assert migrated.schema_version() == LATEST
            assert _phases(migrated)[0] == ("1/e0", "compensated", 0)
            assert _phases(migrated)[1:] == _phases(store)[1:]
            assert _claims(migrated)["a1/1/e0"].endswith("then undone by its compensation (provider ref sim_1)")
            _verifies(migrated)


@pytest.mark.parametrize("backend", BACKENDS)
def test_migration_10_leaves_a_call_whose_compensation_has_not_run(backend: str, tmp_path: Path) -> None:
    """A call still waiting for its compensation (none sent, or one given up) keeps `compensation_required`."""
    undo, notify, plan, phases = SEQUENCES["compensation failed for good"]
    with _running(_policy("compensate with undo", undo, notify), tmp_path, backend) as (store, sim, adapter, url):
        _play(store, sim, adapter, plan)
        assert _phases(store) == phases and phases[0] == ("1/e0", "compensation_required", 0)
        _migrates_unchanged(store, url, 10)
