"""The store on both backends: schema and migrations, atomic activation, re-verification at load.

Every test runs against a real SQLite file and a real PostgreSQL schema
created for it (and dropped after). PostgreSQL tests fail, never skip, when
the server is unreachable: a green run must mean both backends were tested.
Tampering is done the way an operator with database access would do it:
plain SQL through a separate connection, behind the runtime's back.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from pactwright.cli.main import main
from pactwright.errors import PactwrightError, StoreError, UsageError
from pactwright.runtime.activation import FixedClock, Refusal, activate_files
from pactwright.runtime.store import open_store
from pactwright.runtime.store._migrations import LATEST, MIGRATIONS, TABLES, migrate
from tests.signed_bundles import (
    BACKENDS,
    NOW,
    PACT_ID,
    Trusted,
    default_trust,
    dump,
    key,
    signed,
    temporary_store,
    trust_bytes,
    write,
)

CLOCK = FixedClock(datetime.fromisoformat(NOW))


@pytest.fixture(params=BACKENDS)
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    with temporary_store(request.param, tmp_path) as url:
        yield url


def _sql(url: str, statement: str, params: tuple[Any, ...] = ()) -> None:
    """Change the store behind pactwright's back."""
    if url.startswith("postgresql://"):
        import psycopg

        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(statement.replace("?", "%s"), params)
        return
    with sqlite3.connect(url) as conn:
        conn.execute(statement, params)


def _activated(url: str, *versions: str) -> None:
    with open_store(url) as store:
        for version in versions:
            activate_files(store, signed(version), default_trust(), clock=CLOCK)


# Schema and migrations --------------------------------------------------------------


def test_a_new_store_is_migrated_once_and_reopening_changes_nothing(store_url: str) -> None:
    with open_store(store_url) as store:
        assert store.schema_version() == LATEST
        rows = store.dump()
    assert set(rows) == set(TABLES)
    assert sorted(rows["schema_migrations"]) == [(m.version, m.name) for m in MIGRATIONS]
    _activated(store_url, "1.0.0")
    before = dump(store_url)
    with open_store(store_url) as store:  # migrating an up-to-date store is a no-op
        assert store.dump() == before


def test_migrate_is_idempotent(store_url: str) -> None:
    from pactwright.runtime.store._backend import connect

    backend = connect(store_url)
    try:
        assert migrate(backend) == len(MIGRATIONS)
        assert migrate(backend) == 0
    finally:
        backend.close()


def test_a_store_with_an_unknown_migration_is_refused(store_url: str) -> None:
    _activated(store_url)
    _sql(store_url, "INSERT INTO schema_migrations (version, name) VALUES (?, ?)", (LATEST + 1, "from the future"))
    with pytest.raises(StoreError) as caught:
        open_store(store_url)
    assert caught.value.code == "PW701"


def test_sqlite_runs_in_wal_mode(tmp_path: Path) -> None:
    url = str(tmp_path / "wal.db")
    open_store(url).close()
    with sqlite3.connect(url) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    open_store(f"sqlite://{url}").close()  # the URL form names the same file


@pytest.mark.parametrize(
    "url",
    ["mysql://localhost/x", "sqlite://relative.db", "postgresql://nobody@127.0.0.1:1/none"],
)
def test_an_unusable_store_url_is_an_environment_error(url: str) -> None:
    with pytest.raises(UsageError) as caught:
        open_store(url)
    assert caught.value.code == "PW700"
    assert caught.value.exit_code == 2


def test_reading_commands_do_not_create_a_store(tmp_path: Path) -> None:
    with pytest.raises(UsageError):
        open_store(str(tmp_path / "absent.db"), migrate_schema=False)
    assert not (tmp_path / "absent.db").exists()


# Activation writes -------------------------------------------------------------------


def test_activation_keeps_every_file_verbatim_and_a_record_per_activation(store_url: str) -> None:
    _activated(store_url, "0.9.0", "1.0.0")
    with open_store(store_url) as store:
        loaded = store.load_active(PACT_ID)
        history = store.history(PACT_ID)
        old = store.load_activation(history[0].id)
    assert dict(loaded.files) == signed("1.0.0") | {"signatures.json": loaded.files["signatures.json"]}
    assert loaded.pact_version == "1.0.0"
    assert [r.pact_version for r in history] == ["0.9.0", "1.0.0"]
    assert history[1].previous_version == "0.9.0"
    assert history[1].activated_at == NOW
    assert old.pact_version == "0.9.0"


def test_only_the_version_check_runs_inside_the_transaction(store_url: str) -> None:
    """A version refusal happens under the writer lock and writes nothing."""
    _activated(store_url, "1.1.0")
    before = dump(store_url)
    with open_store(store_url) as store, pytest.raises(Refusal) as caught:
        activate_files(store, signed("1.0.0"), default_trust(), clock=CLOCK)
    assert caught.value.code == "PW460"
    assert dump(store_url) == before


def test_racing_activations_of_one_bundle_record_it_once(store_url: str) -> None:
    files, trust = signed("1.0.0"), default_trust()
    open_store(store_url).close()
    results: list[object] = []

    def worker() -> None:
        with open_store(store_url) as store:
            results.append(activate_files(store, files, trust, clock=CLOCK).decision.action)

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(results) == ["activate", "unchanged", "unchanged", "unchanged"]  # type: ignore[type-var]
    with open_store(store_url) as store:
        assert len(store.history()) == 1


# Re-verification at load -------------------------------------------------------------

TAMPERING = [
    pytest.param(
        "UPDATE bundle_files SET content = ? WHERE path = 'ledger/release.num'",
        (b"send [EUR/2 *] ( source = @world destination = @me )\n",),
        "PW705",
        id="artifact-bytes",
    ),
    pytest.param(
        "UPDATE bundle_files SET sha256 = ? WHERE path = 'model.json'",
        ("sha256:" + "0" * 64,),
        "PW705",
        id="artifact-hash-column",
    ),
    pytest.param("DELETE FROM bundle_files WHERE path = 'ledger/fund.num'", (), "PW704", id="file-row-deleted"),
    pytest.param(
        "INSERT INTO bundle_files (manifest_hash, path, sha256, size, content) "
        "SELECT manifest_hash, 'ledger/extra.num', sha256, size, content FROM bundle_files "
        "WHERE path = 'ledger/fund.num'",
        (),
        "PW704",
        id="file-row-added",
    ),
    pytest.param(
        "UPDATE bundle_files SET content = ? WHERE path = 'manifest.json'", (b"{}",), "PW703", id="manifest-bytes"
    ),
    pytest.param("UPDATE activations SET approval = ?", (b"{}",), "PW706", id="approval-bytes"),
    pytest.param("UPDATE activations SET signatures = ?", (b"{}",), "PW706", id="signatures-bytes"),
    pytest.param("UPDATE bundles SET pact_version = '9.9.9'", (), "PW707", id="bundle-version"),
    pytest.param("UPDATE active SET pact_version = '9.9.9'", (), "PW707", id="active-pointer"),
]


@pytest.mark.parametrize(("statement", "params", "code"), TAMPERING)
def test_a_row_edited_behind_the_runtimes_back_is_refused_at_load(
    store_url: str, statement: str, params: tuple[Any, ...], code: str, capsys: pytest.CaptureFixture[str]
) -> None:
    _activated(store_url, "1.0.0")
    assert main(["store", "verify", "--store", store_url]) == 0
    _sql(store_url, statement, params)
    with open_store(store_url) as store, pytest.raises(StoreError) as caught:
        store.load_active(PACT_ID)
    assert caught.value.code == code
    capsys.readouterr()
    assert main(["store", "verify", "--store", store_url]) == 1
    assert f"error[{code}]" in capsys.readouterr().err


def test_activation_refuses_to_reuse_a_tampered_stored_bundle(store_url: str) -> None:
    """Re-activating a stored manifest (a forced rollback) re-verifies the stored copy first."""
    _activated(store_url, "1.0.0", "1.1.0")
    _sql(store_url, "UPDATE bundle_files SET content = ? WHERE path = 'trace.json'", (b"{}",))
    before = dump(store_url)
    with open_store(store_url) as store, pytest.raises(StoreError) as caught:
        activate_files(store, signed("1.0.0"), default_trust(), clock=CLOCK, force_reason="roll back")
    assert caught.value.code == "PW705"
    assert dump(store_url) == before


@pytest.mark.parametrize(
    "statement",
    [
        "UPDATE active SET pact_version = '0.0.1'",
        "UPDATE active SET pact_version = 'zero'",
        "DELETE FROM bundle_files WHERE path = 'report.json'",
    ],
    ids=["older-pointer", "not-semver", "active-bundle-damaged"],
)
def test_an_edited_active_version_cannot_open_the_door_to_a_rollback(store_url: str, statement: str) -> None:
    """The version check compares against a re-verified active bundle, never a bare row."""
    _activated(store_url, "1.1.0")
    _sql(store_url, statement)
    before = dump(store_url)
    with open_store(store_url) as store, pytest.raises(StoreError) as caught:
        activate_files(store, signed("1.0.0"), default_trust(), clock=CLOCK)
    assert caught.value.code in {"PW704", "PW707"}
    assert dump(store_url) == before


def test_loading_a_pact_that_was_never_activated(store_url: str) -> None:
    with open_store(store_url) as store, pytest.raises(StoreError) as caught:
        store.load_active("nobody.home")
    assert caught.value.code == "PW702"


def test_store_verify_with_trust_catches_a_key_revoked_since_activation(
    store_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _activated(store_url, "1.0.0")
    trust = tmp_path / "trust.json"
    trust.write_bytes(default_trust())
    assert main(["store", "verify", "--store", store_url, "--trust", str(trust)]) == 0
    trust.write_bytes(trust_bytes([Trusted(key("alice"), ("approver",)), Trusted(key("signer"), revoked=True)]))
    capsys.readouterr()
    assert main(["store", "verify", "--store", store_url, "--trust", str(trust)]) == 1
    err = capsys.readouterr().err
    assert "error[PW708]" in err
    assert "PW442" in err


def test_store_verify_json_output(store_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    import json

    _activated(store_url, "1.0.0")
    assert main(["store", "verify", "--store", store_url, "--format", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["ok"] is True
    assert out["active"][0]["version"] == "1.0.0"


# bundle inspect ----------------------------------------------------------------------


def test_bundle_inspect_describes_and_dry_runs(
    store_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import json

    trust = tmp_path / "trust.json"
    trust.write_bytes(default_trust())
    bundle = write(signed("1.0.0"), tmp_path / "b")
    assert main(["bundle", "inspect", str(bundle)]) == 0
    text = capsys.readouterr().out
    assert "marketplace.milestone 1.0.0" in text
    assert "approved   by alice" in text
    assert "activation: not checked" in text

    _activated(store_url, "1.1.0")
    args = ["bundle", "inspect", str(bundle), "--trust", str(trust), "--now", NOW, "--format", "json"]
    assert main(args) == 0
    assert json.loads(capsys.readouterr().out)["activation"]["would_activate"] is True
    assert main([*args, "--store", store_url]) == 1  # the store's 1.1.0 makes 1.0.0 a rollback
    verdict = json.loads(capsys.readouterr().out)["activation"]
    assert verdict["error"]["code"] == "PW460"


def test_the_runtime_never_treats_a_store_error_as_success(tmp_path: Path) -> None:
    """A database error inside the transaction is a PW709 refusal, never a half write."""
    url = str(tmp_path / "s.db")
    _activated(url)
    _sql(url, "CREATE TRIGGER no_more BEFORE INSERT ON activations BEGIN SELECT RAISE(ABORT, 'read-only'); END")
    before = dump(url)
    with open_store(url) as store, pytest.raises(PactwrightError) as caught:
        activate_files(store, signed("1.0.0"), default_trust(), clock=CLOCK)
    assert caught.value.code == "PW709"
    assert dump(url) == before
